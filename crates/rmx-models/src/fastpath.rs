//! Where the CUDA backend leaves mlx-lm's op-for-op graph, because measurement on the H100 said
//! so (docs/perf.md): decode's quantized matrix-vector products run on rmx's own kernels
//! (kernels/qgemv.cuh), the projections that read the same input are fused into one weight
//! (QKV, gate+up) so a token launches fewer kernels, and long prefills on quantized weights
//! dequantize to a dense GEMM instead of MLX's quantized GEMM. On the CPU and Metal backends
//! none of this applies: there the graph is mlx-lm's, which the parity tests pin token for token.
//!
//! `RMX_FAST_PATH=0` turns it all off (for A/B measurements), `RMX_QGEMV_ROWS` sets the rows per
//! warp of the GEMV kernels, `RMX_DEQUANT_PREFILL_ROWS` the prompt rows from which prefill
//! dequantizes (0 disables it).

use std::cell::OnceCell;
use std::sync::OnceLock;

use rmx_mlx::quant::{QuantSpec, Quantized};
use rmx_mlx::{Array, Backend, Dtype, Kernel, KernelLang, Launch, TemplateArg};

use crate::error::Result;

const HEADER: &str = include_str!("kernels/qgemv.cuh");

/// The choices, made once per process: the backend cannot change under a running engine.
#[derive(Debug, Clone, Copy)]
pub struct FastPath {
    /// rmx's GEMV kernels for single-row products (and fused projections).
    pub kernels: bool,
    pub rows_per_warp: i32,
    /// Dequantize + dense matmul from this many rows on.
    pub dequant_prefill_rows: Option<usize>,
}

fn env_num(name: &str) -> Option<usize> {
    std::env::var(name).ok()?.trim().parse().ok()
}

pub fn fast_path() -> FastPath {
    static PATH: OnceLock<FastPath> = OnceLock::new();
    *PATH.get_or_init(|| {
        let on = rmx_mlx::backend() == Backend::Cuda
            && std::env::var("RMX_FAST_PATH").map_or(true, |v| v.trim() != "0");
        FastPath {
            kernels: on,
            rows_per_warp: env_num("RMX_QGEMV_ROWS").map_or(2, |r| r.clamp(1, 8) as i32),
            dequant_prefill_rows: match env_num("RMX_DEQUANT_PREFILL_ROWS") {
                _ if !on => None,
                Some(0) => None,
                Some(n) => Some(n),
                None => Some(512),
            },
        }
    })
}

thread_local! {
    // Kernels hold MLX objects, which stay on the engine thread that made them.
    static PLAIN: OnceCell<Kernel> = const { OnceCell::new() };
    static SWIGLU: OnceCell<Kernel> = const { OnceCell::new() };
}

/// What a GEMV product computes from its weight rows.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Epilogue {
    /// `y = x W^T`.
    Plain,
    /// W is `[gate; up]`; `y = silu(x G^T) * (x U^T)`, half as many outputs as rows.
    SwiGlu,
}

fn with_kernel<R>(e: Epilogue, f: impl FnOnce(&Kernel) -> Result<R>) -> Result<R> {
    let (cell, func) = match e {
        Epilogue::Plain => (&PLAIN, "qgemv"),
        Epilogue::SwiGlu => (&SWIGLU, "qgemv_swiglu"),
    };
    cell.with(|c| {
        if c.get().is_none() {
            let k = Kernel::new(
                KernelLang::Cuda,
                &format!("rmx_{func}"),
                &["x", "w", "scales", "biases"],
                &["y"],
                &format!("rmx::{func}<T, BITS, G, ROWS, K>(x, w, scales, biases, y, N);"),
                HEADER,
            )?;
            let _ = c.set(k);
        }
        f(c.get().expect("set just above"))
    })
}

/// `x @ W^T` through rmx's kernel when it applies (CUDA, one row, 4/8-bit affine with biases,
/// matching dtypes); `None` means "use MLX's op".
pub fn qgemv(x: &Array, q: &Quantized, spec: QuantSpec, e: Epilogue) -> Result<Option<Array>> {
    let fp = fast_path();
    let Some(biases) = &q.biases else {
        return Ok(None);
    };
    let k = x.dim(-1);
    let rows = x.size() / k.max(1) as usize;
    let dtype = x.dtype();
    let per_chunk = 128 / spec.bits.max(1);
    if !fp.kernels
        || rows != 1
        || !matches!(spec.bits, 4 | 8)
        || spec.group_size % per_chunk != 0
        || k % per_chunk != 0
        || !matches!(dtype, Dtype::Bf16 | Dtype::F16)
        || q.scales.dtype() != dtype
        || biases.dtype() != dtype
    {
        return Ok(None);
    }
    let n_rows = q.weight.dim(0);
    let n = match e {
        Epilogue::Plain => n_rows,
        Epilogue::SwiGlu => n_rows / 2,
    };
    let r = fp.rows_per_warp;
    let warps = (n + r - 1) / r;
    let mut out_shape = x.shape();
    *out_shape.last_mut().expect("x has a last axis") = n;
    let y = with_kernel(e, |kern| {
        Ok(kern.launch(&Launch {
            inputs: &[x, &q.weight, &q.scales, biases],
            output_shapes: &[&out_shape],
            output_dtypes: &[dtype],
            grid: [warps * 32, 1, 1],
            threadgroup: [128, 1, 1],
            template: &[
                ("T", TemplateArg::Dtype(dtype)),
                ("BITS", TemplateArg::Int(spec.bits)),
                ("G", TemplateArg::Int(spec.group_size)),
                ("ROWS", TemplateArg::Int(r)),
                ("K", TemplateArg::Int(k)),
                ("N", TemplateArg::Int(n)),
            ],
            init_value: None,
        })?)
    })?;
    Ok(y.into_iter().next())
}

/// Whether `x @ W^T` with an `[n, k]` weight should dequantize and run a dense GEMM: measured on
/// the H100 (scripts/bench/gemv_lab.py, docs/perf.md), the dense GEMM wins from ~512 rows on the
/// 8B model's matrices but loses below ~4G multiply-adds, where dequantizing costs more than
/// the quantized GEMM saves (Qwen3-0.6B's small matrices at 512 and 1K rows).
pub fn dequant_prefill(x: &Array, n: i32) -> bool {
    let k = x.dim(-1).max(1) as usize;
    let rows = x.size() / k;
    let work = rows as u64 * k as u64 * n.max(0) as u64;
    fast_path()
        .dequant_prefill_rows
        .is_some_and(|min| rows >= min && work >= 1 << 32)
}
