//! Quantized matrix products on rmx's kernels: one row (`qgemv`, with a residual add, SwiGLU or
//! an input norm folded in), a few rows (`qgemm_rows`, a batch's decode step), and when a
//! prefill should dequantize to a dense GEMM instead.

use rmx_mlx::quant::{QuantSpec, Quantized};
use rmx_mlx::{Array, Dtype, Launch, TemplateArg};

use super::launch::{consts, kernel, Spec};
use super::settings::fast_path;
use crate::error::Result;

const QGEMV: Spec = Spec {
    name: "rmx_qgemv",
    section: "qgemv",
    inputs: &["x", "w", "scales", "biases"],
    outputs: &["y"],
    body: "rmx::qgemv<T, BITS, G, ROWS, K>(x, w, scales, biases, y, N);",
};
const QGEMV_RES: Spec = Spec {
    name: "rmx_qgemv_res",
    section: "qgemv",
    inputs: &["x", "w", "scales", "biases", "res"],
    outputs: &["y"],
    body: "rmx::qgemv<T, BITS, G, ROWS, K, true>(x, w, scales, biases, y, N, res);",
};
const QGEMV_SWIGLU: Spec = Spec {
    name: "rmx_qgemv_swiglu",
    section: "qgemv",
    inputs: &["x", "w", "scales", "biases"],
    outputs: &["y"],
    body: "rmx::qgemv_swiglu<T, BITS, G, ROWS, K>(x, w, scales, biases, y, N);",
};
const QGEMV_NORM: Spec = Spec {
    name: "rmx_qgemv_norm",
    section: "qgemv",
    inputs: &["x", "w", "scales", "biases", "nw", "eps"],
    outputs: &["y"],
    body: "rmx::qgemv<T, BITS, G, ROWS, K, false, true>(x, w, scales, biases, y, N, nullptr, nw, eps);",
};
const QGEMV_SWIGLU_NORM: Spec = Spec {
    name: "rmx_qgemv_swiglu_norm",
    section: "qgemv",
    inputs: &["x", "w", "scales", "biases", "nw", "eps"],
    outputs: &["y"],
    body: "rmx::qgemv_swiglu<T, BITS, G, ROWS, K, true>(x, w, scales, biases, y, N, nw, eps);",
};
const QGEMM_ROWS: Spec = Spec {
    name: "rmx_qgemm_rows",
    section: "qgemv",
    inputs: &["x", "w", "scales", "biases", "m"],
    outputs: &["y"],
    body: "rmx::qgemm_rows<T, BITS, G, ROWS, K, MR>(x, w, scales, biases, y, N, (int)m[0]);",
};
const QGEMM_ROWS_RES: Spec = Spec {
    name: "rmx_qgemm_rows_res",
    section: "qgemv",
    inputs: &["x", "w", "scales", "biases", "m", "res"],
    outputs: &["y"],
    body: "rmx::qgemm_rows<T, BITS, G, ROWS, K, MR, true>(x, w, scales, biases, y, N, (int)m[0], res);",
};
const QGEMM_ROWS_SWIGLU: Spec = Spec {
    name: "rmx_qgemm_rows_swiglu",
    section: "qgemv",
    inputs: &["x", "w", "scales", "biases", "m"],
    outputs: &["y"],
    body: "rmx::qgemm_rows<T, BITS, G, ROWS, K, MR, false, true>(x, w, scales, biases, y, N, (int)m[0]);",
};
/// Rows of x each block of `qgemm_rows` applies its weights to.
const QGEMM_MR: i32 = 8;

/// What a GEMV product computes from its weight rows.
#[derive(Clone, Copy)]
pub enum Epilogue<'a> {
    /// `y = x W^T`.
    Plain,
    /// `y = x W^T + res` (the residual stream), one launch instead of two.
    Residual(&'a Array),
    /// W is `[gate; up]`; `y = silu(x G^T) * (x U^T)`, half as many outputs as rows.
    SwiGlu,
}

/// An RMS norm applied to a product's input inside the kernel: its weight and epsilon.
pub type Norm<'a> = (&'a Array, f32);

/// `x @ W^T` (of `rms_norm(x)` with `norm`) through rmx's kernel when it applies (CUDA, one row,
/// 4/8-bit affine with biases, matching dtypes); `None` means "use MLX's op".
pub fn qgemv(
    x: &Array,
    q: &Quantized,
    spec: QuantSpec,
    e: Epilogue,
    norm: Option<Norm>,
) -> Result<Option<Array>> {
    let fp = fast_path();
    let Some(biases) = &q.biases else {
        return Ok(None);
    };
    let k = x.dim(-1);
    let dtype = x.dtype();
    let per_chunk = 128 / spec.bits.max(1);
    let m = rows(x);
    if !fp.kernels
        || !(1..=fp.qgemm_max_rows.max(1)).contains(&m)
        || (m > 1 && norm.is_some())
        || !matches!(spec.bits, 4 | 8)
        || spec.group_size % per_chunk != 0
        || k % per_chunk != 0
        || !matches!(dtype, Dtype::Bf16 | Dtype::F16)
        || q.scales.dtype() != dtype
        || biases.dtype() != dtype
        || norm.is_some_and(|(w, _)| w.dtype() != dtype || w.size() != k as usize)
    {
        return Ok(None);
    }
    let n_rows = q.weight.dim(0);
    let n = match e {
        Epilogue::SwiGlu => n_rows / 2,
        _ => n_rows,
    };
    let mut out_shape = x.shape();
    *out_shape.last_mut().expect("x has a last axis") = n;
    if m > 1 {
        return qgemm_rows(x, q, spec, e, n, out_shape);
    }
    let mut inputs = vec![x, &q.weight, &q.scales, biases];
    let eps;
    let kspec = match (e, norm) {
        (Epilogue::Plain, None) => &QGEMV,
        (Epilogue::SwiGlu, None) => &QGEMV_SWIGLU,
        (Epilogue::Plain | Epilogue::SwiGlu, Some((w, e_))) => {
            eps = consts(&[e_])?;
            inputs.push(w);
            inputs.push(&eps);
            match e {
                Epilogue::SwiGlu => &QGEMV_SWIGLU_NORM,
                _ => &QGEMV_NORM,
            }
        }
        (Epilogue::Residual(_), Some(_)) => return Ok(None),
        (Epilogue::Residual(res), None) => {
            if res.shape() != out_shape || res.dtype() != dtype {
                return Ok(None);
            }
            inputs.push(res);
            &QGEMV_RES
        }
    };
    let r = fp.rows_per_warp;
    let warps = (n + r - 1) / r;
    let y = kernel(kspec)?.launch(&Launch {
        inputs: &inputs,
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
    })?;
    Ok(y.into_iter().next())
}

/// `qgemv` for 2 to `QGEMM_MAX_ROWS` rows of x (no input norm): one launch, each weight chunk
/// read once per `QGEMM_MR` rows.
fn qgemm_rows(
    x: &Array,
    q: &Quantized,
    spec: QuantSpec,
    e: Epilogue,
    n: i32,
    out_shape: Vec<i32>,
) -> Result<Option<Array>> {
    let Some(biases) = &q.biases else {
        return Ok(None);
    };
    let (k, dtype, m) = (x.dim(-1), x.dtype(), rows(x) as i32);
    let x = x.reshape(&[m, k])?;
    let dims = consts(&[m as f32])?;
    let mut inputs = vec![&x, &q.weight, &q.scales, biases, &dims];
    let flat_res;
    let kspec = match e {
        Epilogue::Plain => &QGEMM_ROWS,
        Epilogue::SwiGlu => &QGEMM_ROWS_SWIGLU,
        Epilogue::Residual(res) => {
            if res.shape() != out_shape || res.dtype() != dtype {
                return Ok(None);
            }
            flat_res = res.reshape(&[m, n])?;
            inputs.push(&flat_res);
            &QGEMM_ROWS_RES
        }
    };
    let r = fast_path().rows_per_warp;
    let warps = (n + r - 1) / r;
    let y = kernel(kspec)?.launch(&Launch {
        inputs: &inputs,
        output_shapes: &[&[m, n]],
        output_dtypes: &[dtype],
        grid: [warps * 32, (m + QGEMM_MR - 1) / QGEMM_MR, 1],
        threadgroup: [128, 1, 1],
        template: &[
            ("T", TemplateArg::Dtype(dtype)),
            ("BITS", TemplateArg::Int(spec.bits)),
            ("G", TemplateArg::Int(spec.group_size)),
            ("ROWS", TemplateArg::Int(r)),
            ("K", TemplateArg::Int(k)),
            ("N", TemplateArg::Int(n)),
            ("MR", TemplateArg::Int(QGEMM_MR)),
        ],
        init_value: None,
    })?;
    match y.into_iter().next() {
        Some(y) => Ok(Some(y.reshape(&out_shape)?)),
        None => Ok(None),
    }
}

/// Whether `x @ W^T` with an `[n, k]` weight should dequantize and run a dense GEMM: measured on
/// the H100 (scripts/bench/gemv_lab.py, docs/perf.md), the dense GEMM wins from ~512 rows on the
/// 8B model's matrices but loses below ~4G multiply-adds, where dequantizing costs more than
/// the quantized GEMM saves (Qwen3-0.6B's small matrices at 512 and 1K rows). Rows count in
/// whole 128-row tiles, as the GEMMs run them: a 2,048-token prompt prefills 2,047 rows (the
/// last goes through decode), which left Qwen3-0.6B's o projection (2,047 x 2,048 x 1,024) just
/// under 2^32 on its quantized GEMM, 110 us against 84 us dequantized (prefill_lab.py).
pub fn dequant_prefill(x: &Array, n: i32) -> bool {
    let rows = rows(x);
    let tiles = rows.div_ceil(128) as u64 * 128;
    let work = tiles * x.dim(-1).max(0) as u64 * n.max(0) as u64;
    let fp = fast_path();
    fp.dequant_prefill_rows
        .is_some_and(|min| rows >= min && work >= fp.dequant_prefill_work)
}

/// The rows of `x` as a matrix `[rows, x.dim(-1)]`.
pub fn rows(x: &Array) -> usize {
    x.size() / x.dim(-1).max(1) as usize
}
