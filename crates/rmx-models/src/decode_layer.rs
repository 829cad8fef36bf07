//! Quantized pre-norm decoder layers (Llama, Qwen3) as one CUDA launch for a decode step:
//! kernels/layer.cuh runs each layer's QKV product, attention, the o
//! product, the MLP's two products and both residual adds as phases of one kernel, each phase
//! waiting for the one before across the grid, and up to 32 consecutive layers one after the
//! other in the same launch (`RMX_LAYERS_PER_LAUNCH`; llama.rs groups them). The five-kernel
//! path (fastpath/) costs five MLX graph nodes per layer, and MLX spends several µs of CPU on
//! each; one launch per layer still left ~3.5 µs between kernels (Qwen3-0.6B 4-bit decode:
//! 733-800 tok/s with one layer a launch, 1,114-1,160 with 8 or 32; docs/perf.md).
//!
//! The same phases serve the layer seam's other compositions (`OneLaunch`): a MoE layer's
//! attention with its experts as three more phases (moe.rs; or, where the kernel does not take
//! them, the attention half alone and the experts after the launch), and Gated DeltaNet layers
//! (delta.rs: the joined input projection, the step, the out projection, then the MLP or the
//! experts).
//!
//! The grid is one 512-thread block per SM (asked of the driver). The phases hand out their
//! work as tickets that running blocks claim (the kernel's `Tickets`), so the kernel does not
//! need every block resident at once: two models decoding on two streams, each holding part of
//! the GPU, finish with fewer blocks instead of waiting on each other. The session-4 kernel used
//! a plain grid barrier and was safe only while two of its blocks fit an SM. A wait that has not
//! ended after 2 s traps (a kernel fault, which the process's CUDA context does not survive)
//! instead of hanging; with tickets only a bug can get there.
//!
//! 32 layers are 576 pointer parameters (4.6 KB): past the classic 4 KB limit, which CUDA 12.1+
//! lifts on Volta and later (the H100 runs it).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use rmx_mlx::quant::{QuantMode, QuantSpec, Quantized};
use rmx_mlx::{Array, Dtype, Kernel, KernelLang, Launch, TemplateArg};

use crate::attention::AttnExtras;
use crate::cache::{AttnMask, LayerCache};
use crate::decoder_layer::DecoderLayer;
use crate::error::Result;
use crate::fastpath::{self, consts, fast_path, layer_pos, QkvRope};
use crate::feed_forward::FeedForward;
use crate::kernel_source;

mod delta;
mod moe;
mod phase_times;
mod rows;

pub(crate) use rows::MAX_BLOCK;

pub(crate) use moe::forward as moe_forward;

/// How a decode step runs a layer in one launch of the layer kernel, decided at load
/// (`fits`). A layer that fits none runs MLX's ops and rmx's per-op kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OneLaunch {
    /// The mixer is Gated DeltaNet (kernels/layer_delta.cuh, Qwen3.5), else attention
    /// (kernels/layer.cuh: Llama, Qwen3, Qwen3-MoE).
    pub delta: bool,
    /// Which feed-forward runs in the launch.
    pub ffn: InLaunch,
}

/// A layer's feed-forward in the layer kernel's launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum InLaunch {
    /// The dense MLP: two phases.
    Mlp,
    /// The experts (moe.rs): three phases.
    Experts,
    /// None: the launch is the mixer half of a MoE layer, one layer a launch, and the experts
    /// (moe_kernels.rs) run after it.
    After,
}

impl OneLaunch {
    /// Whether consecutive layers of this kind share a launch.
    pub(crate) fn groups(self) -> bool {
        self.ffn != InLaunch::After
    }

    /// The kernel's phases for a layer of this kind (the mixer's three, then the feed-forward's).
    fn phases(self) -> usize {
        3 + match self.ffn {
            InLaunch::Mlp => 2,
            InLaunch::Experts => 3,
            InLaunch::After => 0,
        }
    }

    /// Most consecutive layers of this kind one launch runs: the kernel's counters hold
    /// `MAX_PHASES` phases.
    pub(crate) fn max_layers(self) -> usize {
        (MAX_PHASES / self.phases()).min(MAX_LAYERS)
    }
}

// Threads per block: 16 warps per SM keep the weight loads in flight, and 512 threads leave each
// up to 128 registers (ptxas: 96 today), so one block always fits an SM. 1,024 threads (measured
// slower at 64 registers in session 4) no longer fit.
const THREADS: i32 = 512;

/// The counters the kernel keeps across its blocks, in 32-bit words: kernels/layer.cuh's
/// `Tickets` (TK_CLAIMS, TK_FINISHED, TK_OUT), then the per-head counters from `TK_HEADS`.
const COUNTERS: usize = 4096;
const TK_HEADS: i32 = 384;
/// Most query heads (of all rows, in a batch) the per-head counters have room for.
const MAX_HEADS: i32 = COUNTERS as i32 - TK_HEADS;
/// Most layers one launch runs, and most phases (the kernel's TK_PMAX: five a layer of 32 dense
/// layers, six a MoE layer's).
const MAX_LAYERS: usize = 32;
const MAX_PHASES: usize = 160;

/// Most splits of one head's positions in the attention phase (the kernel's SMAX).
const SPLITS: i32 = 64;

/// A layer's tensors as the kernel's parameters name them (`LayerPtrs` in kernels/layer.cuh,
/// in that order), suffixed with the layer's index in the launch.
const PER_LAYER: [&str; 18] = [
    "wq", "sq", "bq", "wo", "so", "bo", "wg", "sg", "bg", "wd", "sd", "bd", "n1", "n2", "qn", "kn",
    "kc", "vc",
];
const SHARED_INPUTS: [&str; 5] = ["x", "inv_freq", "pos", "par", "bar"];

/// A layer's `AttnExtras` (kernels/layer.cuh, in that order): the QKV and o projections' biases
/// and the sinks.
const EXTRAS: [&str; 3] = ["lbq", "lbo", "sk"];

/// A layer's scales that are bytes (e8m0) where the products are mxfp4: the tables type every
/// scale `const T*`, the kernel reads these through `unsigned char` (row_dot2_i8's MX).
const MX_SCALES: [&str; 4] = ["sq", "so", "sg", "sd"];

/// A launch's kernel: (layers, shared memory bytes, rows, its feed-forward, which of `EXTRAS`
/// its layers have, mxfp4 products).
type KernelKey = (usize, i32, Rows, InLaunch, [bool; 3], bool);

/// Whose rows a launch takes: one sequence's one token, a batch's (one token of each sequence),
/// or one sequence's block of consecutive tokens (a speculative verify).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Rows {
    One,
    Batch,
    /// A batch's rows with their products on bf16 tensor cores (`RMX_LAYER_ROWS_MMA`).
    BatchMma,
    Block,
}

thread_local! {
    static KERNELS: RefCell<HashMap<KernelKey, Rc<Kernel>>> = RefCell::new(HashMap::new());
}

/// The layer kernels' counters (`COUNTERS` words, kernels/layer.cuh `Tickets`), per engine thread
/// like the model whose layers use them.
pub(super) fn counters() -> Result<Array> {
    fastpath::counters("layer", COUNTERS)
}

/// The launch's parameter names: `shared`, then each layer's `PER_LAYER` with its index.
fn input_names(shared: &[&str], n: usize) -> Vec<String> {
    let mut v: Vec<String> = shared.iter().map(|s| s.to_string()).collect();
    v.extend(per_layer(&PER_LAYER, n));
    v
}

/// `fields` of each of `n` layers, suffixed with the layer's index: a launch's parameters for
/// them, in the order `table` reads them.
fn per_layer(fields: &[&str], n: usize) -> Vec<String> {
    (0..n)
        .flat_map(|i| fields.iter().map(move |p| format!("{p}{i}")))
        .collect()
}

/// Body lines that fill `var`, a table of `n` `rmx::{ty}<T>` in shared memory, each layer's
/// entry from its `fields` parameters (those in `bytes`, uint8 arrays, cast to `const T*`): a
/// runtime loop over layers then indexes it (the parameters themselves cannot be indexed).
/// Thread 0 fills it; `body` synchronizes.
fn table(ty: &str, var: &str, n: usize, fields: &[&str], bytes: &[&str]) -> String {
    let mut b = format!("__shared__ rmx::{ty}<T> {var}[{n}];\nif (threadIdx.x == 0) {{\n");
    for i in 0..n {
        let entry: Vec<String> = fields
            .iter()
            .map(|f| match bytes.contains(f) {
                true => format!("reinterpret_cast<const T*>({f}{i})"),
                false => format!("{f}{i}"),
            })
            .collect();
        b += &format!("  {var}[{i}] = rmx::{ty}<T>{{{}}};\n", entry.join(", "));
    }
    b + "}\n"
}

/// A kernel body: its tables filled, the block synchronized, then every thread runs `call`
/// (`decode_layers`, its rows or DeltaNet variant, `decode_moe`).
fn body(tables: &[String], call: &str) -> String {
    tables.concat() + "__syncthreads();\n" + call
}

/// The body lines that fill `xtab`, the launch's `AttnExtras`, from the parameters of the
/// fields `has` says its layers have (the others null), and those parameters' names.
fn extras_table(n: usize, has: [bool; 3]) -> (String, Vec<String>) {
    let mut b = format!("__shared__ rmx::AttnExtras<T> xtab[{n}];\nif (threadIdx.x == 0) {{\n");
    let mut names = Vec::new();
    for i in 0..n {
        let fields: Vec<String> = EXTRAS
            .iter()
            .zip(has)
            .map(|(f, on)| {
                if on {
                    format!("{f}{i}")
                } else {
                    "nullptr".into()
                }
            })
            .collect();
        b += &format!(
            "  xtab[{i}] = rmx::AttnExtras<T>{{{}}};\n",
            fields.join(", ")
        );
        names.extend(fields.into_iter().filter(|f| f != "nullptr"));
    }
    (b + "}\n", names)
}

/// The launch's kernel: n layers, for one sequence's token or (`rows`) a batch's or a block's
/// rows (dense layers only), with the feed-forward `ffn`, the attention extras `extras` says the
/// layers have, and mxfp4 products (`mx`).
fn kernel(
    n: usize,
    shared_memory: i32,
    rows: Rows,
    ffn: InLaunch,
    extras: [bool; 3],
    mx: bool,
) -> Result<Rc<Kernel>> {
    let key = (n, shared_memory, rows, ffn, extras, mx);
    KERNELS.with(|ks| {
        if let Some(k) = ks.borrow().get(&key) {
            return Ok(k.clone());
        }
        let timed = rows != Rows::One && fast_path().layer_times;
        let (names, body, name, section) = if rows != Rows::One {
            let kind = match rows {
                Rows::Block => "block",
                Rows::BatchMma => "rows_mma",
                _ => "rows",
            };
            let kind = if timed {
                format!("{kind}_t")
            } else {
                kind.to_string()
            };
            (
                input_names(&rows::INPUTS, n),
                body(
                    &[table("LayerPtrs", "tab", n, &PER_LAYER, &[])],
                    &rows::call(n, rows),
                ),
                format!("rmx_decode_layers_{kind}{n}"),
                "layer_rows",
            )
        } else {
            let mlp = ffn == InLaunch::Mlp;
            let any_extra = extras.iter().any(|e| *e);
            let (moe_type, mtab) = match (ffn, any_extra) {
                (InLaunch::Experts, _) => (moe::SHAPE_TYPE, ", mtab"),
                (_, true) => ("rmx::NoMoe", ", nullptr"),
                (_, false) => ("rmx::NoMoe", ""),
            };
            let xtab = if any_extra { ", xtab" } else { "" };
            let call = format!(
                "rmx::decode_layers<T, BITS, G, HID, H, KV, D, F, QKNORM, TRADITIONAL, NT, SMAX, \
                 O_ML, O_PART, O_ATT, O_H, O_ACT, O_X, IDOT, {mlp}, {moe_type}, ROT, GATED, \
                 MX>(x, tab, {n}, inv_freq, pos, par, bar, y, scratch{mtab}{xtab});"
            );
            let mut names = input_names(&SHARED_INPUTS, n);
            let bytes: &[&str] = if mx { &MX_SCALES } else { &[] };
            let mut tables = vec![table("LayerPtrs", "tab", n, &PER_LAYER, bytes)];
            // Variants have names of their own (MLX keys its compiled kernels by name and source).
            let x = match (any_extra, mx) {
                (false, false) => "",
                (true, false) => "_x",
                (false, true) => "_mx",
                (true, true) => "_x_mx",
            };
            let (name, section) = match ffn {
                InLaunch::Mlp => (format!("rmx_decode_layers{n}{x}"), "layer"),
                InLaunch::After => (format!("rmx_decode_attention{n}{x}"), "layer"),
                InLaunch::Experts => {
                    names.extend(per_layer(&moe::PER_LAYER, n));
                    tables.push(moe::table(n, mx));
                    (format!("rmx_decode_moe_layers{n}{x}"), "layer_moe")
                }
            };
            if any_extra {
                let (t, xnames) = extras_table(n, extras);
                tables.push(t);
                names.extend(xnames);
            }
            (names, body(&tables, &call), name, section)
        };
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let k = Rc::new(Kernel::with_shared_memory(
            KernelLang::Cuda,
            &name,
            &names,
            &["y", "scratch"],
            &body,
            &if timed {
                format!("{}{}", phase_times::DEFINE, kernel_source::header(section))
            } else {
                kernel_source::header(section)
            },
            shared_memory,
        )?);
        ks.borrow_mut().insert(key, k.clone());
        Ok(k)
    })
}

/// The kernel's scratch regions, in floats, each rounded up to whole 128-byte lines:
/// `[offsets of m/l, partial rows, attended row, residual, activations, layer output; total]`.
/// `q_rows`: q's rows of a head over `d` (2 with an output gate).
fn scratch_layout(hid: i32, h: i32, kv: i32, d: i32, f: i32, q_rows: i32) -> [i32; 7] {
    let lines = |floats: i32| (floats + 31) / 32 * 32;
    let ml = lines((q_rows * h + 2 * kv) * d / 2);
    let part = ml + lines(h * SPLITS * 2);
    let att = part + lines(h * SPLITS * d);
    let res = att + lines(h * d / 2);
    let act = res + lines(hid / 2);
    let xo = act + lines(f / 2);
    [ml, part, att, res, act, xo, xo + lines(hid / 2)]
}

/// A launch's feed-forward activations (the MLP's `ffn`, or with `moe` its chosen and shared
/// experts') and the shared memory that stages them or the mixer's vectors (up to `k` values).
fn ffn_staging(moe: Option<moe::MoeShape>, ffn: i32, k: i32, bits: i32) -> (i32, i32) {
    let f = moe.map_or(ffn, |m| m.act());
    let k = k.max(f);
    (f, moe.map_or(staged_bytes(k, bits), |m| m.shared_bytes(k)))
}

/// Bytes of dynamic shared memory for a largest staged vector of `k` values at `bits`: the
/// vector as floats, its chunk sums and 32 floats, which also holds the integer staging (IDOT:
/// 32 floats, 2 bytes an element, 8 a chunk).
fn staged_bytes(k: i32, bits: i32) -> i32 {
    4 * (k + k / (128 / bits) + 32)
}

/// Whether the kernel's products read this quantized weight as `spec`, `k` inputs a row, `k`
/// whole groups: 4- or 8-bit affine groups that whole 16-byte chunks fill, with scales and
/// biases in the activations' dtype; or mxfp4, a byte scale per 32 values, one 16-byte chunk
/// (the callers check `RMX_LAYER_MXFP4` for their half: `products`, `moe::prepare`).
fn quant_fits((q, s): &(&Quantized, QuantSpec), spec: QuantSpec, k: i32, dtype: Dtype) -> bool {
    *s == spec
        && k % spec.group_size == 0
        && match spec.mode {
            QuantMode::Affine => {
                matches!(spec.bits, 4 | 8)
                    && spec.group_size % (128 / spec.bits) == 0
                    && q.scales.dtype() == dtype
                    && q.biases.as_ref().is_some_and(|b| b.dtype() == dtype)
            }
            QuantMode::Mxfp4 => {
                (spec.bits, spec.group_size) == (4, 32)
                    && q.scales.dtype() == Dtype::U8
                    && q.biases.is_none()
            }
            QuantMode::Mxfp8 | QuantMode::Nvfp4 => false,
        }
}

/// Whether a launch's products are mxfp4 (`quant_fits`).
fn is_mx(spec: QuantSpec) -> bool {
    spec.mode == QuantMode::Mxfp4
}

/// Whether a launch of products read as `spec` takes them as integer dot products (IDOT):
/// affine ones as `RMX_LAYER_IDOT` says; mxfp4 ones only with `RMX_LAYER_MXFP4=2` (their
/// integer staging of x failed the logits check on GPT-OSS, whose activations carry channels
/// hundreds of times their neighbours').
fn idot(spec: QuantSpec) -> bool {
    let fp = fast_path();
    fp.layer_idot && (!is_mx(spec) || fp.layer_mxfp4_idot)
}

/// What the kernel's template depends on; layers share a launch only when theirs are equal.
#[derive(Clone, Copy, PartialEq, Debug)]
struct Shape {
    spec: QuantSpec,
    hid: i32,
    heads: i32,
    kv_heads: i32,
    head_dim: i32,
    ffn: i32,
    qk_norm: bool,
    traditional: bool,
    /// The rope's dimensions of a head (fewer than `head_dim`: Qwen3.5's partial rotary factor).
    rotated: i32,
    /// q's rows hold each head's queries then its output gate (Qwen3-Next / Qwen3.5).
    gated: bool,
    /// The layer's dense MLP runs in the launch (false: its experts run in it, `moe`, or after
    /// it; `ffn` is 0).
    mlp: bool,
    moe: Option<moe::MoeShape>,
    /// Which of `EXTRAS` the attention has (linear biases, sinks).
    extras: [bool; 3],
    // eps, q/k norm eps, the attention scale and the rope's input scale, as bits: the launch
    // passes one set.
    par: [u32; 4],
}

impl Shape {
    fn in_launch(&self) -> InLaunch {
        in_launch(self.mlp, self.moe.is_some())
    }
}

fn in_launch(mlp: bool, moe: bool) -> InLaunch {
    match (mlp, moe) {
        (true, _) => InLaunch::Mlp,
        (false, true) => InLaunch::Experts,
        (false, false) => InLaunch::After,
    }
}

/// One layer's tensors for the kernel, once its checks have passed: in `PER_LAYER` order, the
/// products and norms, then q's and k's norms (the cache follows them).
struct Prepared<'a> {
    shape: Shape,
    products: [&'a Array; 14],
    qk_norms: [&'a Array; 2],
    rope: QkvRope<'a>,
    par: [f32; 4],
    moe: Option<moe::MoePrepared<'a>>,
    extras: AttnExtras<'a>,
}

impl Prepared<'_> {
    /// The present `extras`, in `EXTRAS` order.
    fn extra_tensors(&self) -> impl Iterator<Item = &Array> {
        let e = self.extras;
        [e.qkv_bias, e.o_bias, e.sinks].into_iter().flatten()
    }
}

/// A layer's dense MLP as the kernel reads it (fused `[gate; up]`, down, hidden size): `Some(None)`
/// for a MoE layer, whose experts moe.rs prepares; `None` for an MLP the kernel cannot run.
type MlpParts<'a> = Option<([(&'a Quantized, QuantSpec); 2], i32)>;

fn mlp_parts(layer: &DecoderLayer) -> Option<MlpParts<'_>> {
    match &layer.ffn {
        FeedForward::Dense(m) => Some(Some((m.decode_parts()?, m.hidden()))),
        FeedForward::Moe(_) => Some(None),
    }
}

/// What both layer kernels read of a layer besides its mixer's own tensors, once the checks they
/// share pass: four quantized products of one 4/8-bit affine spec with scales and biases in the
/// activations' dtype (the mixer's in and out projections, the MLP's fused gate/up and down, or
/// the mixer's two standing in for a MoE layer's MLP, which the kernel does not read), and the
/// two norms in that dtype with one eps.
pub(super) struct Products<'a> {
    pub spec: QuantSpec,
    pub hid: i32,
    pub eps: f32,
    /// The MLP's hidden size; 0 without it.
    pub ffn: i32,
    pub mlp: bool,
    /// Each product's weight, scales and biases, in that order, then the two norms.
    pub tensors: [&'a Array; 14],
}

/// `layer`'s `Products` with its mixer's `[in, out]` projections (`out` reading `mixer_k`
/// inputs), or `None` when a shared check fails.
pub(super) fn products<'a>(
    layer: &'a DecoderLayer,
    mixer: [(&'a Quantized, QuantSpec); 2],
    mixer_k: i32,
    dtype: Dtype,
) -> Option<Products<'a>> {
    let mlp = mlp_parts(layer)?;
    let ([gu, down], f) = mlp.unwrap_or((mixer, 0));
    let spec = mixer[0].1;
    if is_mx(spec) && !fast_path().layer_mxfp4_attn {
        return None;
    }
    let (n1, eps) = layer.input_norm.parts();
    let (n2, eps2) = layer.post_norm.parts();
    let hid = n1.dim(0);
    let weights = [mixer[0], mixer[1], gu, down];
    // Each product's inputs: a MoE layer's stand-ins for the MLP (the mixer's) are not read.
    if !weights
        .iter()
        .zip([hid, mixer_k, hid, f])
        .all(|(w, k)| quant_fits(w, spec, k, dtype))
        || eps != eps2
        || n1.dtype() != dtype
        || n2.dtype() != dtype
        || (mlp.is_some() && gu.0.weight.dim(0) != 2 * f)
    {
        return None;
    }
    // mxfp4 has no biases; the norm stands in (never read).
    let b = |q: &'a Quantized| q.biases.as_ref().unwrap_or(n1);
    let [a, o, g, d] = weights.map(|(q, _)| q);
    Some(Products {
        spec,
        hid,
        eps,
        ffn: f,
        mlp: mlp.is_some(),
        tensors: [
            &a.weight,
            &a.scales,
            b(a),
            &o.weight,
            &o.scales,
            b(o),
            &g.weight,
            &g.scales,
            b(g),
            &d.weight,
            &d.scales,
            b(d),
            n1,
            n2,
        ],
    })
}

/// `layer`'s parts for the kernel, or `None` when it does not apply to it (unfused or biased or
/// mixed quantization, odd sizes, too many heads). A MoE layer's parts are its attention half's
/// (`Shape::mlp` false).
fn prepare(layer: &DecoderLayer, dtype: Dtype) -> Option<Prepared<'_>> {
    let a = layer.mixer.attention()?.decode_parts()?;
    let (qkv, rope) = (a.qkv, a.rope);
    let (h, kvh, d) = (rope.heads, rope.kv_heads, rope.head_dim);
    let p = products(layer, [qkv, a.o], h * d, dtype)?;
    let q_rows = if rope.gated { 2 } else { 1 };
    if qkv.0.weight.dim(0) != (q_rows * h + 2 * kvh) * d || h > MAX_HEADS {
        return None;
    }
    // The biases per row of their products, the sinks per head, all in the activations' dtype.
    let x = a.extras;
    let extras_fit = [
        (x.qkv_bias, qkv.0.weight.dim(0)),
        (x.o_bias, p.hid),
        (x.sinks, h),
    ]
    .iter()
    .all(|(t, n)| t.is_none_or(|t| t.shape() == [*n] && t.dtype() == dtype));
    if !extras_fit {
        return None;
    }
    let (qn, kn, qk_eps) = rope.norm_inputs(layer.input_norm.parts().0);
    let par = [p.eps, qk_eps, a.scale, a.rope_scale];
    let moe = experts(layer, p.hid, p.spec, dtype);
    let shape = Shape {
        spec: p.spec,
        hid: p.hid,
        heads: h,
        kv_heads: kvh,
        head_dim: d,
        ffn: p.ffn,
        qk_norm: rope.norms.is_some(),
        traditional: rope.traditional,
        rotated: rope.rotated,
        gated: rope.gated,
        mlp: p.mlp,
        moe: moe.as_ref().map(|m| m.shape),
        extras: [x.qkv_bias.is_some(), x.o_bias.is_some(), x.sinks.is_some()],
        par: par.map(f32::to_bits),
    };
    Some(Prepared {
        shape,
        products: p.tensors,
        qk_norms: [qn, kn],
        rope,
        par,
        moe,
        extras: x,
    })
}

/// A MoE layer's experts as the kernel's phases (moe.rs), where it takes them: quantized as the
/// mixer (`spec`), since the launch's template has one spec for both.
fn experts(
    layer: &DecoderLayer,
    hid: i32,
    spec: QuantSpec,
    dtype: Dtype,
) -> Option<moe::MoePrepared<'_>> {
    match &layer.ffn {
        FeedForward::Moe(m) => {
            moe::prepare(m, hid, dtype, layer.post_norm.parts().0).filter(|m| m.shape.spec == spec)
        }
        FeedForward::Dense(_) => None,
    }
}

/// Every layer's parts and their one shape, when `prepare` takes every layer and their shapes
/// agree (one launch runs one kernel instance); `None` otherwise.
pub(super) fn alike<'a, P, S: PartialEq + Copy>(
    layers: &'a [DecoderLayer],
    prepare: impl Fn(&'a DecoderLayer) -> Option<P>,
    shape: impl Fn(&P) -> S,
) -> Option<(Vec<P>, S)> {
    let prepared = layers.iter().map(prepare).collect::<Option<Vec<_>>>()?;
    let s = shape(prepared.first()?);
    prepared
        .iter()
        .all(|p| shape(p) == s)
        .then_some((prepared, s))
}

/// How the one-launch kernel runs `layer`, if it can (CUDA, and `prepare` or `delta::prepare`
/// takes it in the dtype of its norms, which is the dtype its activations have): decided once,
/// at load.
pub(crate) fn fits(layer: &DecoderLayer) -> Option<OneLaunch> {
    fast_path().layer_blocks?;
    let dtype = layer.input_norm.parts().0.dtype();
    let ffn = if layer.mixer.is_recurrent() {
        delta::prepare(layer, dtype)?.in_launch()
    } else {
        prepare(layer, dtype)?.shape.in_launch()
    };
    Some(OneLaunch {
        delta: layer.mixer.is_recurrent(),
        ffn,
    })
}

/// One token through `layer` with the one-launch kernel: the whole layer, or (a MoE layer) its
/// mixer half and then its experts; `None` when it does not apply, and nothing has
/// changed then.
pub(crate) fn forward(
    layer: &DecoderLayer,
    x: &Array,
    mask: &AttnMask,
    cache: &mut LayerCache,
) -> Result<Option<Array>> {
    let h = forward_group(
        std::slice::from_ref(layer),
        x,
        mask,
        std::slice::from_mut(cache),
    )?;
    match (h, layer.one_launch) {
        (
            Some(h),
            Some(OneLaunch {
                ffn: InLaunch::After,
                ..
            }),
        ) => Ok(Some(layer.ffn.forward_prenorm(&h, &layer.post_norm)?)),
        (h, _) => Ok(h),
    }
}

/// One token through consecutive `layers` (at most 32) of one `OneLaunch` kind in one launch
/// (of a MoE layer: through its mixer half, one layer), or (unless `RMX_LAYER_BLOCK=0`) a block of
/// a few tokens of one sequence under a causal mask (dense layers: rows::forward_block); `None`
/// when the kernel does not
/// apply to all of them alike (not CUDA, not one token of full-attention or sliding-window
/// caches at the same step, a mask, different shapes; see `prepare`), and nothing has changed
/// then. `mask` must hold for every layer (llama.rs groups sliding-window layers only where
/// their mask is none, as the full layers' is for one token). Any context
/// length: measured on the H100 (Qwen3-0.6B 4-bit, 2,048 positions), this kernel decodes at
/// 865 tok/s where the per-op path with MLX's attention, which took contexts past 1,024 before,
/// managed 209 (docs/perf.md row 23).
pub(crate) fn forward_group(
    layers: &[DecoderLayer],
    x: &Array,
    mask: &AttnMask,
    caches: &mut [LayerCache],
) -> Result<Option<Array>> {
    let fp = fast_path();
    let Some(blocks) = fp.layer_blocks else {
        return Ok(None);
    };
    // The kernel turns heads by the cache's offset: a sequence whose images moved its
    // positions (mrope.rs) runs MLX's ops.
    if caches.iter().any(|c| c.mrope().is_some()) {
        return Ok(None);
    }
    // A batch's mask is its rows' padding, which the rows kernel reads from the cache itself;
    // a block's is causal, which it applies by position.
    let batch = matches!(caches.first(), Some(LayerCache::Batch(_)));
    let block = x.ndim() == 3 && x.dim(1) > 1;
    let mask_fits = batch
        || matches!(
            (block, mask),
            (false, AttnMask::None) | (true, AttnMask::Causal)
        );
    if !mask_fits {
        return Ok(None);
    }
    let n = layers.len();
    let dtype = x.dtype();
    let hid = x.dim(-1);
    if n == 0 || n > MAX_LAYERS || caches.len() != n || !matches!(dtype, Dtype::Bf16 | Dtype::F16) {
        return Ok(None);
    }
    if block {
        if !fp.layer_block || layers[0].mixer.is_recurrent() || batch {
            return Ok(None);
        }
        return rows::forward_block(layers, x, caches, blocks);
    }
    if layers[0].mixer.is_recurrent() {
        return delta::forward_group(layers, x, caches, blocks);
    }
    if let LayerCache::Batch(_) = &caches[0] {
        return rows::forward(layers, x, caches, blocks);
    }
    if x.size() != hid as usize {
        return Ok(None);
    }
    let Some((prepared, s)) = alike(layers, |l| prepare(l, dtype), |p| p.shape) else {
        return Ok(None);
    };
    let first = &prepared[0];
    // Every cache at the same step: full ones with the same capacity, so each grows (or not)
    // alike, and sliding windows (rings, as mlx-lm's RotatingKVCache) in the same state.
    let (mut full, mut ring) = (None, None);
    for c in caches.iter() {
        let same = match c {
            LayerCache::Full(kv) => {
                let st = (kv.offset, kv.capacity());
                *full.get_or_insert(st) == st
            }
            LayerCache::Rotating(r) => {
                let st = r.step_state();
                *ring.get_or_insert(st) == st
            }
            // A quantized cache is read by MLX's quantized_matmul (product_attention.rs).
            LayerCache::Quantized(_) | LayerCache::Recurrent(_) | LayerCache::Batch(_) => false,
        };
        if !same {
            return Ok(None);
        }
    }
    let offset = caches[0].offset();
    let ffn = s.in_launch();
    let kind = OneLaunch { delta: false, ffn };
    if s.hid != hid
        || full.is_some_and(|f| f.0 != offset)
        || ring.is_some_and(|r| r.0 != offset)
        || (n > 1 && !kind.groups())
        || n > kind.max_layers()
        || !fastpath::layer_heads_fit(&first.rope, dtype)
    {
        return Ok(None);
    }
    let mut slots = Vec::with_capacity(n);
    let (mut cap, mut ring_pos, mut rings) = (0, [0; 3], 0u32);
    for (i, c) in caches.iter_mut().enumerate() {
        match c {
            LayerCache::Full(kv) => {
                let (k, v, _) = kv.decode_slot(s.kv_heads, s.head_dim, dtype)?;
                cap = k.dim(2);
                slots.push((k, v));
            }
            LayerCache::Rotating(r) => {
                let (k, v, at, read) = r.decode_slot(s.kv_heads, s.head_dim, dtype)?;
                ring_pos = [at, read, k.dim(2)];
                rings |= 1 << i;
                slots.push((k, v));
            }
            _ => unreachable!("checked above"),
        }
    }
    let [slot, read, ring_cap] = ring_pos;
    let pos = layer_pos([offset, cap, slot, read, ring_cap, rings as i32])?;
    let par = consts(&first.par)?;
    let bar = counters()?;
    let (h, kvh, d) = (s.heads, s.kv_heads, s.head_dim);
    let (f, shared) = ffn_staging(s.moe, s.ffn, hid.max(h * d), s.spec.bits);
    let lay = scratch_layout(hid, h, kvh, d, f, if s.gated { 2 } else { 1 });
    let kernel = kernel(n, shared, Rows::One, ffn, s.extras, is_mx(s.spec))?;
    let mut inputs: Vec<&Array> = vec![x, first.rope.inv_freq, &pos, &par, &bar];
    for (p, (keys, values)) in prepared.iter().zip(&slots) {
        inputs.extend(p.products);
        inputs.extend(p.qk_norms);
        inputs.push(keys);
        inputs.push(values);
    }
    for p in &prepared {
        inputs.extend(p.moe.iter().flat_map(|m| m.tensors));
    }
    for p in &prepared {
        inputs.extend(p.extra_tensors());
    }
    let scratch = lay[6] + s.moe.map_or(0, |m| m.scratch());
    let mut template = vec![
        ("T", TemplateArg::Dtype(dtype)),
        ("BITS", TemplateArg::Int(s.spec.bits)),
        ("G", TemplateArg::Int(s.spec.group_size)),
        ("HID", TemplateArg::Int(hid)),
        ("H", TemplateArg::Int(h)),
        ("KV", TemplateArg::Int(kvh)),
        ("D", TemplateArg::Int(d)),
        ("F", TemplateArg::Int(f)),
        ("QKNORM", TemplateArg::Bool(s.qk_norm)),
        ("TRADITIONAL", TemplateArg::Bool(s.traditional)),
        ("ROT", TemplateArg::Int(s.rotated)),
        ("GATED", TemplateArg::Bool(s.gated)),
        ("NT", TemplateArg::Int(THREADS)),
        ("SMAX", TemplateArg::Int(SPLITS)),
        ("O_ML", TemplateArg::Int(lay[0])),
        ("O_PART", TemplateArg::Int(lay[1])),
        ("O_ATT", TemplateArg::Int(lay[2])),
        ("O_H", TemplateArg::Int(lay[3])),
        ("O_ACT", TemplateArg::Int(lay[4])),
        ("O_X", TemplateArg::Int(lay[5])),
        ("IDOT", TemplateArg::Bool(idot(s.spec))),
        ("MX", TemplateArg::Bool(is_mx(s.spec))),
    ];
    // The router's logits and the choice after the layout's regions.
    template.extend(s.moe.iter().flat_map(|m| m.template(lay[6])));
    let out = launch(
        &kernel,
        blocks,
        &inputs,
        &[&x.shape(), &[scratch]],
        &[dtype, Dtype::F32],
        &template,
    )?;
    Ok(out.into_iter().next())
}

/// Launches a layer kernel on its grid, `blocks` blocks of `THREADS` (one per SM).
pub(super) fn launch(
    kernel: &Kernel,
    blocks: i32,
    inputs: &[&Array],
    shapes: &[&[i32]],
    dtypes: &[Dtype],
    template: &[(&str, TemplateArg)],
) -> Result<Vec<Array>> {
    Ok(kernel.launch(&Launch {
        inputs,
        output_shapes: shapes,
        output_dtypes: dtypes,
        grid: [blocks * THREADS, 1, 1],
        threadgroup: [THREADS, 1, 1],
        template,
        init_value: None,
    })?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_fills_every_table_before_the_block_synchronizes() {
        let b = body(
            &[
                table("LayerPtrs", "tab", 2, &["wq", "kc"], &[]),
                moe::table(1, false),
            ],
            "call();",
        );
        assert!(b.starts_with(
            "__shared__ rmx::LayerPtrs<T> tab[2];\nif (threadIdx.x == 0) {\n  tab[0] = \
             rmx::LayerPtrs<T>{wq0, kc0};\n  tab[1] = rmx::LayerPtrs<T>{wq1, kc1};\n}\n"
        ));
        let mtab = b
            .find("mtab[0] = rmx::MoePtrs<T>{mwr0, ")
            .expect("the MoE table");
        let sync = b
            .find("__syncthreads();\ncall();")
            .expect("sync, then the call");
        assert!(mtab < sync && b.ends_with("call();"), "{b}");
        // The parameters in the order the tables read them.
        assert_eq!(per_layer(&["a", "b"], 2), ["a0", "b0", "a1", "b1"]);
        // An mxfp4 product's byte scales are read through the table's `const T*`.
        let t = table("LayerPtrs", "tab", 1, &["wq", "sq"], &MX_SCALES);
        assert!(
            t.contains("tab[0] = rmx::LayerPtrs<T>{wq0, reinterpret_cast<const T*>(sq0)};"),
            "{t}"
        );
        assert!(moe::table(1, true).contains("reinterpret_cast<const T*>(msg0)"));
        assert!(!moe::table(1, false).contains("reinterpret_cast"));
    }

    #[test]
    fn the_extras_table_names_the_fields_a_layer_has_and_nulls_the_rest() {
        // Qwen2: a q/k/v bias only; GPT-OSS: both biases and the sinks.
        let (b, names) = extras_table(2, [true, false, false]);
        assert!(
            b.contains("xtab[1] = rmx::AttnExtras<T>{lbq1, nullptr, nullptr};"),
            "{b}"
        );
        assert_eq!(names, ["lbq0", "lbq1"]);
        let (b, names) = extras_table(1, [true, true, true]);
        assert!(
            b.contains("xtab[0] = rmx::AttnExtras<T>{lbq0, lbo0, sk0};"),
            "{b}"
        );
        assert_eq!(names, ["lbq0", "lbo0", "sk0"]);
    }

    /// A decode step's positions come from the last step's where they differ by a step (one
    /// more position; a ring's slot and its positions one more or as they were), from the host
    /// otherwise (a ring's slot wrapping); either way the array holds them.
    #[test]
    fn layer_positions_follow_the_steps_of_rings_and_full_caches() {
        let steps = [
            [5, 256, 5, 6, 8, 1],
            [6, 256, 6, 7, 8, 1],
            [7, 256, 7, 8, 8, 1],
            [8, 256, 0, 8, 8, 1],
            [9, 256, 1, 8, 8, 1],
            [9, 256, 1, 8, 8, 1],
            [40, 512, 0, 0, 0, 0],
            [41, 512, 0, 0, 0, 0],
        ];
        for pos in steps {
            let a = layer_pos(pos).unwrap();
            assert_eq!(a.to_vec::<i32>().unwrap(), pos);
        }
    }

    #[test]
    fn a_launch_holds_as_many_layers_as_its_counters_have_phases_for() {
        let kind = |ffn| OneLaunch { delta: false, ffn };
        // Five phases a dense layer: 32; six with experts: 26; three (experts after): one
        // layer a launch, whatever the counters would hold.
        assert_eq!(kind(InLaunch::Mlp).max_layers(), 32);
        assert_eq!(kind(InLaunch::Experts).max_layers(), 26);
        assert!(26 * kind(InLaunch::Experts).phases() <= MAX_PHASES);
        assert!(!kind(InLaunch::After).groups());
        assert!(kind(InLaunch::Experts).groups());
        assert_eq!(in_launch(false, true), InLaunch::Experts);
        assert_eq!(in_launch(true, false), InLaunch::Mlp);
        assert_eq!(in_launch(false, false), InLaunch::After);
    }

    #[test]
    fn scratch_regions_start_on_whole_lines_and_do_not_overlap() {
        // Qwen3-0.6B and Llama-3-8B shapes, and Qwen3.5-9B's gated attention (q's rows twice).
        for (hid, h, kv, d, f, q_rows) in [
            (1024, 16, 8, 128, 3072, 1),
            (4096, 32, 8, 128, 14336, 1),
            (4096, 16, 4, 256, 12288, 2),
        ] {
            let l = scratch_layout(hid, h, kv, d, f, q_rows);
            assert!(l.iter().all(|o| o % 32 == 0), "{l:?}");
            let sizes = [
                (q_rows * h + 2 * kv) * d / 2,
                h * SPLITS * 2,
                h * SPLITS * d,
                h * d / 2,
                hid / 2,
                f / 2,
                hid / 2,
            ];
            let starts = [0, l[0], l[1], l[2], l[3], l[4], l[5]];
            for i in 0..7 {
                let end = l[i];
                assert!(starts[i] + sizes[i] <= end, "region {i} overflows: {l:?}");
            }
        }
        // The 8B model's MLP input is the largest staged vector (its hidden size and attended
        // row are 4096): 14336 floats + sums + 32.
        assert_eq!(
            ffn_staging(None, 14336, 4096, 4),
            (14336, 4 * (14336 + 448 + 32))
        );
    }
}
