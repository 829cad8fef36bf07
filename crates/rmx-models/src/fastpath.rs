//! Where the CUDA backend leaves mlx-lm's op-for-op graph, because measurement on the H100 said
//! so (docs/perf.md): decode's quantized matrix-vector products run on rmx's own kernels
//! (kernels/*.cuh), the projections that read the same input are fused into one weight
//! (QKV, gate+up) so a token launches fewer kernels, and long prefills on quantized weights
//! dequantize to a dense GEMM instead of MLX's quantized GEMM. On the CPU and Metal backends
//! none of this applies: there the graph is mlx-lm's, which the parity tests pin token for token.
//!
//! A decode step's attention is one kernel too (rope, q/k norms, the KV-cache write and the
//! attention itself), the layers' input norms ride in the GEMV that reads them, and SwiGLU is one
//! elementwise kernel instead of three ops. Fewer nodes matter as much as faster ones: MLX spends
//! several µs of CPU per graph node, which bounds decode on small models.
//!
//! `RMX_FAST_PATH=0` turns it all off (for A/B measurements), `RMX_QGEMV_ROWS` sets the rows per
//! warp of the GEMV kernels, `RMX_DEQUANT_PREFILL_ROWS` the prompt rows from which prefill
//! dequantizes (0 disables it) and `RMX_DEQUANT_PREFILL_WORK` the multiply-adds from which it
//! does (default 2^32), `RMX_FAST_ATTN_MAX` the longest context the one-kernel decode
//! attention serves (beyond it, MLX's two-pass attention over the same cache; the one-launch
//! layer kernel serves any context),
//! `RMX_DECODE_ADDMM=1` folds a dense layer's residual add into cuBLAS for one-row products too,
//! `RMX_LAYER_KERNEL=0` keeps a quantized decoder layer at five kernels instead of one
//! (decode_layer.rs), `RMX_LAYER_IDOT=0` makes that kernel's products float instead of integer,
//! `RMX_LAYERS_PER_LAUNCH` sets how many consecutive layers one launch of it runs (default 32),
//! `RMX_PREFILL_HEADS=0` keeps a prompt chunk's q/k/v heads on MLX's ops instead of one kernel,
//! `RMX_QGEMM_ROWS` sets the most rows (a batch's decode step) rmx's small-batch product takes
//! (default 32; 1 leaves every several-row product to MLX).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::OnceLock;

use rmx_mlx::quant::{QuantSpec, Quantized};
use rmx_mlx::{Array, Backend, Dtype, Kernel, KernelLang, Launch, TemplateArg};

use crate::error::Result;
use crate::kernel_source::header;

/// The choices, made once per process: the backend cannot change under a running engine.
#[derive(Debug, Clone, Copy)]
pub struct FastPath {
    /// rmx's GEMV kernels for single-row products (and fused projections).
    pub kernels: bool,
    pub rows_per_warp: i32,
    /// Dequantize + dense matmul from this many rows on.
    pub dequant_prefill_rows: Option<usize>,
    /// Contexts up to this many positions decode through `decode_attention` (`RMX_FAST_ATTN_MAX`,
    /// default 1,024): one block of 32 warps a head reads positions one after another, which
    /// past ~4K loses to MLX's two-pass attention.
    pub attn_max: i32,
    /// A dense layer's residual add as one cuBLAS call (beta = 1) for single rows too; off by
    /// default since MLX runs a one-row product as its own GEMV kernel, not cuBLAS.
    pub decode_addmm: bool,
    /// Blocks of the one-launch decoder layer (decode_layer.rs): one per SM, from the driver;
    /// `None` turns that kernel off.
    pub layer_blocks: Option<i32>,
    /// Consecutive decoder layers per launch of the layer kernel (`RMX_LAYERS_PER_LAUNCH`, 1-32).
    pub layers_per_launch: usize,
    /// The layer kernel's products as integer dot products on x staged in 8-bit planes
    /// (`RMX_LAYER_IDOT`, default on); float products otherwise.
    pub layer_idot: bool,
    /// A batch's decode step through the layer kernel's rows variant (`RMX_LAYER_ROWS`, default
    /// on with integer products; 0 runs a batch op by op).
    pub layer_rows: bool,
    /// Dequantize for prefill only from this many multiply-adds on (`RMX_DEQUANT_PREFILL_WORK`).
    pub dequant_prefill_work: u64,
    /// A prompt chunk's q/k/v heads from the fused QKV product in one kernel
    /// (`RMX_PREFILL_HEADS`, default on).
    pub prefill_heads: bool,
    /// Products of 2 up to this many rows (a batch's decode step) through `qgemm_rows`
    /// (`RMX_QGEMM_ROWS`, default 32; 1 leaves them to MLX).
    pub qgemm_max_rows: usize,
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
            // Measured on the H100 (Qwen3-0.6B bf16, decode tok/s after a prompt of 2K / 4K /
            // 8K positions): this kernel 313 / 234 / 171, MLX's attention 203 / 141 / 233. 4,096
            // waits on a measurement of Llama-3-8B bf16's prefill@2K, whose first decode step
            // would move to this kernel (docs/perf.md, session 7).
            attn_max: env_num("RMX_FAST_ATTN_MAX").map_or(1024, |n| n.min(1 << 20) as i32),
            decode_addmm: env_num("RMX_DECODE_ADDMM") == Some(1),
            layer_blocks: match env_num("RMX_LAYER_KERNEL") {
                _ if !on => None,
                Some(0) => None,
                _ => rmx_mlx::cuda_sm_count(),
            },
            layer_idot: env_num("RMX_LAYER_IDOT") != Some(0),
            layer_rows: env_num("RMX_LAYER_ROWS") != Some(0),
            layers_per_launch: env_num("RMX_LAYERS_PER_LAUNCH").map_or(32, |n| n.clamp(1, 32)),
            dequant_prefill_work: env_num("RMX_DEQUANT_PREFILL_WORK").map_or(1 << 32, |w| w as u64),
            prefill_heads: on && env_num("RMX_PREFILL_HEADS") != Some(0),
            qgemm_max_rows: env_num("RMX_QGEMM_ROWS").unwrap_or(QGEMM_MAX_ROWS),
        }
    })
}

/// One kernel of kernels/*.cuh: its MLX name, parameter names and body.
pub(crate) struct Spec {
    pub name: &'static str,
    pub section: &'static str,
    pub inputs: &'static [&'static str],
    pub outputs: &'static [&'static str],
    pub body: &'static str,
}

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
/// The most rows `qgemm_rows` takes by default (a batch's decode step); past it MLX's quantized
/// matmul (tensor cores) or the dequantized prefill runs. Its products run on CUDA cores: at 32
/// rows an 8B model's step is ~240 G multiply-adds, where they stop paying.
const QGEMM_MAX_ROWS: usize = 32;

const DECODE_ATTN: Spec = Spec {
    name: "rmx_decode_attn",
    section: "attn",
    inputs: &["qs", "ks", "vs", "qn", "kn", "inv_freq", "pos", "par", "kc", "vc"],
    outputs: &["o"],
    body: "rmx::decode_attn<T, H, KV, D, NORM, TRADITIONAL, QOFF, KOFF, VOFF>(qs, ks, vs, qn, kn, inv_freq, pos, par, kc, vc, o);",
};
const DECODE_ATTN_BATCH: Spec = Spec {
    name: "rmx_decode_attn_batch",
    section: "attn",
    inputs: &["qkv", "qn", "kn", "inv_freq", "pos", "pads", "par", "kc", "vc"],
    outputs: &["o"],
    body: "rmx::decode_attn_batch<T, H, KV, D, NORM, TRADITIONAL, S>(qkv, qn, kn, inv_freq, pos, pads, par, kc, vc, o);",
};
const SWIGLU: Spec = Spec {
    name: "rmx_swiglu",
    section: "swiglu",
    inputs: &["gate", "up"],
    outputs: &["y"],
    body: "rmx::swiglu<T, F, GS, US, GOFF, UOFF>(gate, up, y);",
};
const QKV_ROPE: Spec = Spec {
    name: "rmx_qkv_rope",
    section: "qkv_rope",
    inputs: &["qkv", "qn", "kn", "inv_freq", "offset", "eps"],
    outputs: &["q", "k", "v"],
    body: "rmx::qkv_rope<T, H, KV, D, NORM, TRADITIONAL>(qkv, qn, kn, inv_freq, offset, eps, q, k, v);",
};

const PREFILL_HEADS: Spec = Spec {
    name: "rmx_prefill_heads",
    section: "qkv_rope",
    inputs: &["qkv", "qn", "kn", "inv_freq", "pos", "eps"],
    outputs: &["q", "k", "v"],
    body: "rmx::prefill_heads<T, H, KV, D, NORM, TRADITIONAL>(qkv, qn, kn, inv_freq, pos, eps, q, k, v);",
};

const GATED_DELTA: Spec = Spec {
    name: "rmx_gated_delta",
    section: "gated_delta",
    inputs: &["q", "k", "v", "g", "beta", "state_in", "tlen"],
    outputs: &["y", "state_out"],
    body: "rmx::gated_delta<T, Dk, Dv, Hk, Hv>(q, k, v, g, beta, state_in, tlen, y, state_out);",
};

thread_local! {
    // Kernels hold MLX objects, which stay on the engine thread that made them.
    static KERNELS: RefCell<HashMap<(&'static str, i32), Rc<Kernel>>> = RefCell::new(HashMap::new());
    // Small constant inputs (eps, scale) made once, not once per launch.
    static CONSTS: RefCell<HashMap<Vec<u32>, Array>> = RefCell::new(HashMap::new());
    // `{offset, cap}` of the step in flight: every layer of a token shares one array.
    static POS: RefCell<Option<([i32; 2], Array)>> = const { RefCell::new(None) };
    // `{1, 0}`: the next step's `POS` from this one's, on the GPU.
    static POS_STEP: RefCell<Option<Array>> = const { RefCell::new(None) };
}

/// `a` copied by a GPU op (lazily, as part of the graph). MLX's CUDA backend keeps arrays made
/// from host data in managed memory, and those of 8 bytes or less in one shared pool of it,
/// which the CPU writes again whenever it makes the next small array: a kernel that reads such
/// an input waits for the page to migrate to the GPU. The copy is an ordinary device buffer:
/// with `a` as both operands, MLX cannot donate its managed buffer to the result.
pub(crate) fn on_device(a: Array) -> Result<Array> {
    Ok(a.maximum(&a)?)
}

/// A float32 array of `vals`, made once per thread, in device memory.
pub(crate) fn consts(vals: &[f32]) -> Result<Array> {
    let key: Vec<u32> = vals.iter().map(|v| v.to_bits()).collect();
    CONSTS.with(|c| {
        if let Some(a) = c.borrow().get(&key) {
            return Ok(a.clone());
        }
        let a = on_device(Array::from_slice(vals, &[vals.len() as i32])?)?;
        a.eval()?;
        c.borrow_mut().insert(key, a.clone());
        Ok(a)
    })
}

/// `{offset, cap}` (a prompt chunk's `{offset, n}`) as an int32 array for the kernels. A decode
/// step's is the previous step's plus `{1, 0}`, added on the GPU, so no step's kernels read
/// host-written memory (see `on_device`); any other (a new sequence, a grown cache, a prompt
/// chunk) is copied from the host once.
pub(crate) fn pos_array(pos: [i32; 2]) -> Result<Array> {
    POS.with(|p| {
        let next = match &*p.borrow() {
            Some((k, a)) if *k == pos => return Ok(a.clone()),
            Some((k, a)) if [k[0] + 1, k[1]] == pos => Some(a.add(&pos_step()?)?),
            _ => None,
        };
        let a = match next {
            Some(a) => a,
            None => on_device(Array::from_slice(&pos, &[2])?)?,
        };
        *p.borrow_mut() = Some((pos, a.clone()));
        Ok(a)
    })
}

fn pos_step() -> Result<Array> {
    POS_STEP.with(|s| {
        if let Some(a) = &*s.borrow() {
            return Ok(a.clone());
        }
        let a = on_device(Array::from_slice(&[1i32, 0], &[2])?)?;
        a.eval()?;
        *s.borrow_mut() = Some(a.clone());
        Ok(a)
    })
}

pub(crate) fn kernel(spec: &Spec) -> Result<Rc<Kernel>> {
    kernel_with_shared(spec, 0)
}

/// `spec`'s kernel with `shared_memory` bytes of dynamic shared memory per block.
pub(crate) fn kernel_with_shared(spec: &Spec, shared_memory: i32) -> Result<Rc<Kernel>> {
    KERNELS.with(|ks| {
        if let Some(k) = ks.borrow().get(&(spec.name, shared_memory)) {
            return Ok(k.clone());
        }
        let k = Rc::new(Kernel::with_shared_memory(
            KernelLang::Cuda,
            spec.name,
            spec.inputs,
            spec.outputs,
            spec.body,
            &header(spec.section),
            shared_memory,
        )?);
        ks.borrow_mut()
            .insert((spec.name, shared_memory), k.clone());
        Ok(k)
    })
}

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

/// The per-head work between a token's fused QKV product and attention.
pub struct QkvRope<'a> {
    pub heads: i32,
    pub kv_heads: i32,
    pub head_dim: i32,
    /// Per-head RMS norm weights for q and k, and their epsilon.
    pub norms: Option<(&'a Array, &'a Array, f32)>,
    pub traditional: bool,
    /// `[head_dim / 2]` float32 inverse frequencies, rope scale folded in.
    pub inv_freq: &'a Array,
}

impl<'a> QkvRope<'a> {
    /// The q and k norm weights and epsilon a kernel takes; without norms, `unused` stands in
    /// for both weights (the kernel does not read them).
    pub(crate) fn norm_inputs(&self, unused: &'a Array) -> (&'a Array, &'a Array, f32) {
        self.norms.unwrap_or((unused, unused, 0.0))
    }

    /// Whether the head kernels take rows of `dtype`: bf16 or f16, norm weights of the same.
    fn takes(&self, dtype: Dtype) -> bool {
        matches!(dtype, Dtype::Bf16 | Dtype::F16)
            && self
                .norms
                .is_none_or(|(q, k, _)| q.dtype() == dtype && k.dtype() == dtype)
    }

    /// The template arguments every head kernel (qkv_rope, prefill_heads, decode_attn) takes.
    fn template(&self, dtype: Dtype) -> [(&'static str, TemplateArg); 6] {
        [
            ("T", TemplateArg::Dtype(dtype)),
            ("H", TemplateArg::Int(self.heads)),
            ("KV", TemplateArg::Int(self.kv_heads)),
            ("D", TemplateArg::Int(self.head_dim)),
            ("NORM", TemplateArg::Bool(self.norms.is_some())),
            ("TRADITIONAL", TemplateArg::Bool(self.traditional)),
        ]
    }
}

/// Splits one token's `[1, 1, (H + 2 KV) * D]` QKV row into q `[1, H, 1, D]`, k and v
/// `[1, KV, 1, D]`, q and k normed and rotated at `offset`. `None` when the kernel does not
/// apply (not CUDA, not one token, odd head size or dtype).
pub fn qkv_rope(qkv: &Array, p: &QkvRope, offset: i32) -> Result<Option<[Array; 3]>> {
    let (h, kv, d) = (p.heads, p.kv_heads, p.head_dim);
    let dtype = qkv.dtype();
    if !fast_path().kernels
        || qkv.size() != ((h + 2 * kv) * d) as usize
        || d % 2 != 0
        || d / 2 > 1024
        || !p.takes(dtype)
    {
        return Ok(None);
    }
    let offset = Array::from_slice(&[offset], &[1])?;
    let (qn, kn, eps) = p.norm_inputs(qkv);
    let eps = consts(&[eps])?;
    let out = kernel(&QKV_ROPE)?.launch(&Launch {
        inputs: &[qkv, qn, kn, p.inv_freq, &offset, &eps],
        output_shapes: &[&[1, h, 1, d], &[1, kv, 1, d], &[1, kv, 1, d]],
        output_dtypes: &[dtype, dtype, dtype],
        grid: [(h + 2 * kv) * (d / 2), 1, 1],
        threadgroup: [d / 2, 1, 1],
        template: &p.template(dtype),
        init_value: None,
    })?;
    Ok(out.try_into().ok())
}

/// A prompt chunk's `[1, n, (H + 2 KV) * D]` QKV rows as attention's heads, in one kernel
/// (`prefill_heads` in kernels/qkv_rope.cuh): q `[1, H, n, D]` (a transposed view of `[1, n, H,
/// D]`), k and v `[1, KV, cap, D]` with positions `0..n` normed and rotated at `offset + row` and
/// `n..cap` zeroed. With `cap` past `n` the k and v are a new cache's buffers
/// (`KvCache::adopt`). `None` when the kernel does not apply (off the fast path, one row, odd
/// head size or dtype).
pub fn prefill_heads(
    qkv: &Array,
    p: &QkvRope,
    offset: i32,
    cap: i32,
) -> Result<Option<[Array; 3]>> {
    let (h, kv, d) = (p.heads, p.kv_heads, p.head_dim);
    let dtype = qkv.dtype();
    let n = qkv.dim(1);
    if !fast_path().prefill_heads
        || qkv.ndim() != 3
        || qkv.dim(0) != 1
        || n < 2
        || cap < n
        || cap > 65535
        || qkv.dim(2) != (h + 2 * kv) * d
        || d % 64 != 0
        || d > 2048
        || !p.takes(dtype)
    {
        return Ok(None);
    }
    // Every layer of the chunk shares one `{offset, n}`.
    let pos = pos_array([offset, n])?;
    let (qn, kn, eps) = p.norm_inputs(qkv);
    let eps = consts(&[eps])?;
    let out = kernel(&PREFILL_HEADS)?.launch(&Launch {
        inputs: &[qkv, qn, kn, p.inv_freq, &pos, &eps],
        output_shapes: &[&[1, n, h, d], &[1, kv, cap, d], &[1, kv, cap, d]],
        output_dtypes: &[dtype, dtype, dtype],
        grid: [(h + 2 * kv) * (d / 2), cap, 1],
        threadgroup: [d / 2, 1, 1],
        template: &p.template(dtype),
        init_value: None,
    })?;
    let Ok([q, k, v]) = <[Array; 3]>::try_from(out) else {
        return Ok(None);
    };
    Ok(Some([q.transpose(&[0, 2, 1, 3])?, k, v]))
}

/// Where a decode step's q, k and v rows are.
pub enum QkvRows<'a> {
    /// One `[1, 1, (H + 2 KV) * D]` row from the fused projection.
    Fused(&'a Array),
    /// Three rows, `[1, 1, H * D]` and `[1, 1, KV * D]` twice.
    Separate([&'a Array; 3]),
}

/// Whether `decode_attention` serves a step with `dtype` rows at a context of `positions`
/// (the new token included); checked before the cache hands out a slot.
pub fn decode_attention_fits(p: &QkvRope, dtype: Dtype, positions: i32) -> bool {
    positions <= fast_path().attn_max && attention_heads_fit(p, dtype)
}

/// Whether the attention kernels take these heads: the one-launch layer kernel at any context
/// (its positions are split across up to 64 warps a head), `decode_attention` up to
/// `RMX_FAST_ATTN_MAX`.
pub fn attention_heads_fit(p: &QkvRope, dtype: Dtype) -> bool {
    let (h, kv, d) = (p.heads, p.kv_heads, p.head_dim);
    fast_path().kernels && kv > 0 && h % kv == 0 && d % 64 == 0 && d <= 256 && p.takes(dtype)
}

/// One token's attention in one kernel (see `decode_attn` in kernels/attn.cuh): q and k
/// normed and roped at `offset`, k and v written into `keys`/`values` (`[1, KV, cap, D]`, owned
/// by the cache) at `offset`, attention over positions `0..=offset`. Returns `[1, 1, H * D]`.
/// The caller has checked `decode_attention_fits`.
pub fn decode_attention(
    rows: &QkvRows,
    p: &QkvRope,
    scale: f32,
    keys: &Array,
    values: &Array,
    offset: i32,
) -> Result<Array> {
    let (h, kv, d) = (p.heads, p.kv_heads, p.head_dim);
    let (srcs, offs) = match rows {
        QkvRows::Fused(r) => ([*r; 3], [0, h * d, (h + kv) * d]),
        QkvRows::Separate(a) => (*a, [0; 3]),
    };
    let dtype = srcs[0].dtype();
    let cap = keys.dim(2);
    let pos = pos_array([offset, cap])?;
    let (qn, kn, eps) = p.norm_inputs(srcs[0]);
    let par = consts(&[eps, scale])?;
    let out = kernel(&DECODE_ATTN)?.launch(&Launch {
        inputs: &[
            srcs[0], srcs[1], srcs[2], qn, kn, p.inv_freq, &pos, &par, keys, values,
        ],
        output_shapes: &[&[1, 1, h * d]],
        output_dtypes: &[dtype],
        grid: [h * 1024, 1, 1],
        threadgroup: [1024, 1, 1],
        template: &[
            p.template(dtype).as_slice(),
            &[
                ("QOFF", TemplateArg::Int(offs[0])),
                ("KOFF", TemplateArg::Int(offs[1])),
                ("VOFF", TemplateArg::Int(offs[2])),
            ],
        ]
        .concat(),
        init_value: None,
    })?;
    Ok(out.into_iter().next().expect("one output"))
}

/// A batch's decode step of attention in one kernel (`decode_attn_batch`): for each of the B
/// rows of `qkv` (`[B, 1, (H + 2 KV) * D]`, one fused product), q and k normed and roped at the
/// row's position (`col - pads[b]`), k and v written at column `col` of the left-padded
/// `keys`/`values` (`[B, KV, cap, D]`, owned by the batch cache), attention over the row's
/// columns `pads[b]..=col`. Returns `[B, 1, H * D]`. The caller has checked
/// `decode_attention_fits` for `col + 1` positions.
pub fn decode_attention_batch(
    qkv: &Array,
    p: &QkvRope,
    scale: f32,
    keys: &Array,
    values: &Array,
    col: i32,
    pads: &Array,
) -> Result<Array> {
    let (h, kv, d) = (p.heads, p.kv_heads, p.head_dim);
    let b = qkv.dim(0);
    let dtype = qkv.dtype();
    let pos = on_device(Array::from_slice(&[col, keys.dim(2)], &[2])?)?;
    let (qn, kn, eps) = p.norm_inputs(qkv);
    let par = consts(&[eps, scale])?;
    let out = kernel(&DECODE_ATTN_BATCH)?.launch(&Launch {
        inputs: &[qkv, qn, kn, p.inv_freq, &pos, pads, &par, keys, values],
        output_shapes: &[&[b, 1, h * d]],
        output_dtypes: &[dtype],
        grid: [h * 1024, b, 1],
        threadgroup: [1024, 1, 1],
        template: &[
            p.template(dtype).as_slice(),
            &[("S", TemplateArg::Int((h + 2 * kv) * d))],
        ]
        .concat(),
        init_value: None,
    })?;
    Ok(out.into_iter().next().expect("one output"))
}

/// `silu(gate) * up` as one kernel; with `up` None, `gate` is a fused `[.., 2F]` product (gate
/// first). `None` off the fast path or for shapes the kernel does not take.
pub fn swiglu(gate: &Array, up: Option<&Array>) -> Result<Option<Array>> {
    let dtype = gate.dtype();
    let width = gate.dim(-1);
    let f = if up.is_some() { width } else { width / 2 };
    let rows = rows(gate) as i32;
    if !fast_path().kernels
        || !matches!(dtype, Dtype::Bf16 | Dtype::F16)
        || rows > 65535
        || up.is_some_and(|u| u.shape() != gate.shape() || u.dtype() != dtype)
        || (up.is_none() && width % 2 != 0)
    {
        return Ok(None);
    }
    let (up, stride, up_off) = match up {
        Some(u) => (u, f, 0),
        None => (gate, width, f),
    };
    let mut shape = gate.shape();
    *shape.last_mut().expect("gate has a last axis") = f;
    let y = kernel(&SWIGLU)?.launch(&Launch {
        inputs: &[gate, up],
        output_shapes: &[&shape],
        output_dtypes: &[dtype],
        grid: [f, rows, 1],
        threadgroup: [256, 1, 1],
        template: &[
            ("T", TemplateArg::Dtype(dtype)),
            ("F", TemplateArg::Int(f)),
            ("GS", TemplateArg::Int(stride)),
            ("US", TemplateArg::Int(stride)),
            ("GOFF", TemplateArg::Int(0)),
            ("UOFF", TemplateArg::Int(up_off)),
        ],
        init_value: None,
    })?;
    Ok(y.into_iter().next())
}

/// Whether Gated DeltaNet's recurrence of a layer with heads of `k_dim` runs as rmx's kernel
/// (decided once, at load): on CUDA, for key heads of a multiple of 32 (a warp's lanes split a
/// state row). mlx-lm has only a Metal kernel for it; on CUDA it runs the rule op by op, token
/// by token (../shared/PERF-BASELINES.md: 323 tok/s prefill for a Qwen3.5-9B shape).
pub fn gated_delta_fits(k_dim: i32) -> bool {
    fast_path().kernels && k_dim >= 32 && k_dim % 32 == 0
}

/// The gated delta rule over every token of q `[B, T, Hk, Dk]`, k, v `[B, T, Hv, Dv]`, g
/// (float32) and beta `[B, T, Hv]` from `state` (float32 `[B, Hv, Dv, Dk]`) in one launch:
/// `y` `[B, T, Hv, Dv]` in q's dtype and the new state (kernels/gated_delta.cuh).
pub fn gated_delta(
    q: &Array,
    k: &Array,
    v: &Array,
    g: &Array,
    beta: &Array,
    state: &Array,
) -> Result<(Array, Array)> {
    let (qs, vs) = (q.shape(), v.shape());
    let (b, t, hk, dk) = (qs[0], qs[1], qs[2], qs[3]);
    let (hv, dv) = (vs[2], vs[3]);
    let dtype = q.dtype();
    // A decode step's T = 1 is one cached constant; a prompt chunk's length is copied per
    // launch, so the table of constants does not grow with every prompt length seen.
    let tlen = if t == 1 {
        consts(&[1.0])?
    } else {
        on_device(Array::from_slice(&[t as f32], &[1])?)?
    };
    let out = kernel(&GATED_DELTA)?.launch(&Launch {
        inputs: &[
            q,
            k,
            &v.astype(dtype)?,
            g,
            &beta.astype(dtype)?,
            state,
            &tlen,
        ],
        output_shapes: &[&[b, t, hv, dv], &state.shape()],
        output_dtypes: &[dtype, Dtype::F32],
        grid: [32, dv, b * hv],
        threadgroup: [32, 4, 1],
        template: &[
            ("T", TemplateArg::Dtype(dtype)),
            ("Dk", TemplateArg::Int(dk)),
            ("Dv", TemplateArg::Int(dv)),
            ("Hk", TemplateArg::Int(hk)),
            ("Hv", TemplateArg::Int(hv)),
        ],
        init_value: None,
    })?;
    let mut it = out.into_iter();
    match (it.next(), it.next()) {
        (Some(y), Some(s)) => Ok((y, s)),
        _ => unreachable!("the kernel has two outputs"),
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
