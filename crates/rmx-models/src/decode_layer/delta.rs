//! Consecutive Gated DeltaNet layers (Qwen3.5's linear-attention layers with their dense MLP)
//! as one launch for a decode step: kernels/layer_delta.cuh runs each layer's joined input
//! projection, the step (`delta_head`, the standalone `delta_step` kernel's body), the out
//! projection with the residual and the MLP as five phases on the layer kernel's tickets. The
//! per-op fast path took five launches a layer (projection, step, out projection, gate/up,
//! down), and a decode step was bound by MLX's CPU work per launch (docs/perf.md, session 18).
//!
//! A MoE hybrid's DeltaNet layer (Qwen3.5-35B-A3B) runs its experts as three more phases
//! (moe.rs), consecutive layers in one launch; where the kernel does not take its experts, its
//! first three phases, one layer a launch, and the experts after it.
//!
//! The step writes each layer's new convolution cache and state as outputs of the launch, as
//! the standalone kernel does, rather than in place: a snapshot of the old state (the prefix
//! cache's) stays what it was.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use rmx_mlx::quant::QuantSpec;
use rmx_mlx::{Array, Dtype, Kernel, KernelLang, TemplateArg};

use super::moe::{self, MoePrepared, MoeShape};
use super::{
    alike, body, counters, ffn_staging, in_launch, per_layer, table, InLaunch, OneLaunch,
    MAX_LAYERS, THREADS,
};
use crate::cache::LayerCache;
use crate::decoder_layer::DecoderLayer;
use crate::delta_net::{DeltaNetShape, DeltaParts};
use crate::error::Result;
use crate::fastpath::{consts, fast_path};
use crate::kernel_source;

/// A layer's tensors as the kernel's parameters name them (`DeltaPtrs` in
/// kernels/layer_delta.cuh, in that order), suffixed with the layer's index in the launch;
/// `OUTPUTS` follow them in `DeltaPtrs`.
const PER_LAYER: [&str; 20] = [
    "wi", "si", "bi", "wo", "so", "bo", "wg", "sg", "bg", "wd", "sd", "bd", "n1", "n2", "cw",
    "dtb", "rate", "nw", "cvin", "stin",
];
const OUTPUTS: [&str; 2] = ["cvout", "stout"];
const SHARED_INPUTS: [&str; 3] = ["x", "par", "bar"];

thread_local! {
    // The kernel for n layers a launch, by (n, shared memory bytes, its feed-forward).
    static KERNELS: RefCell<HashMap<(usize, i32, InLaunch), Rc<Kernel>>> =
        RefCell::new(HashMap::new());
}

fn kernel(n: usize, shared_memory: i32, ffn: InLaunch) -> Result<Rc<Kernel>> {
    KERNELS.with(|ks| {
        if let Some(k) = ks.borrow().get(&(n, shared_memory, ffn)) {
            return Ok(k.clone());
        }
        let (mlp, experts) = (ffn == InLaunch::Mlp, ffn == InLaunch::Experts);
        let mut inputs: Vec<String> = SHARED_INPUTS.iter().map(|s| s.to_string()).collect();
        inputs.extend(per_layer(&PER_LAYER, n));
        let mut outputs = vec!["y".to_string(), "scratch".to_string()];
        outputs.extend(per_layer(&OUTPUTS, n));
        let fields: Vec<&str> = PER_LAYER.iter().chain(&OUTPUTS).copied().collect();
        let mut tables = vec![table("DeltaPtrs", "tab", n, &fields, &[])];
        let (moe_type, mtab) = if experts {
            inputs.extend(per_layer(&moe::PER_LAYER, n));
            tables.push(moe::table(n, false));
            (format!(", {}", moe::SHAPE_TYPE), ", mtab")
        } else {
            (String::new(), "")
        };
        let body = body(
            &tables,
            &format!(
                "rmx::decode_delta_layers<T, BITS, G, HID, HK, HV, DK, DV, KC, F, NT, O_Y, O_H, \
                 O_ACT, O_X, IDOT, {mlp}{moe_type}>(x, tab, {n}, par, bar, y, scratch{mtab});"
            ),
        );
        let name = match ffn {
            InLaunch::Mlp => format!("rmx_decode_delta_layers{n}"),
            InLaunch::Experts => format!("rmx_decode_delta_moe{n}"),
            InLaunch::After => format!("rmx_decode_delta{n}"),
        };
        let header = if experts {
            kernel_source::header_of(&["layer_delta", "layer_moe"])
        } else {
            kernel_source::header("layer_delta")
        };
        let ins: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let outs: Vec<&str> = outputs.iter().map(String::as_str).collect();
        let k = Rc::new(Kernel::with_shared_memory(
            KernelLang::Cuda,
            &name,
            &ins,
            &outs,
            &body,
            &header,
            shared_memory,
        )?);
        ks.borrow_mut().insert((n, shared_memory, ffn), k.clone());
        Ok(k)
    })
}

/// The kernel's scratch regions, in floats, each on whole 128-byte lines: `[offsets of y, h,
/// the activations, the layer output; total]` (the projection's row from 0).
fn scratch_layout(hid: i32, s: &DeltaNetShape, f: i32) -> [i32; 5] {
    let lines = |floats: i32| (floats + 31) / 32 * 32;
    let p = s.conv_dim() + s.value_dim() + 2 * s.v_heads;
    let y = lines(p / 2);
    let h = y + lines(s.value_dim() / 2);
    let act = h + lines(hid / 2);
    let xo = act + lines(f / 2);
    [y, h, act, xo, xo + lines(hid / 2)]
}

/// What the kernel's template depends on; layers share a launch only when theirs are equal.
#[derive(Clone, Copy, PartialEq, Debug)]
struct Shape {
    spec: QuantSpec,
    hid: i32,
    k_heads: i32,
    v_heads: i32,
    k_dim: i32,
    v_dim: i32,
    conv_kernel: i32,
    ffn: i32,
    /// The dense MLP runs in the launch (false: a MoE layer's experts run in it, `moe`, or after
    /// it; `ffn` 0).
    mlp: bool,
    moe: Option<MoeShape>,
    // eps, q/k eps and the output norm's eps, as bits: the launch passes one set.
    par: [u32; 3],
}

/// One layer's tensors for the kernel, in `PER_LAYER` order: the products and norms, then the
/// step's own (the caches follow them).
pub(super) struct Prepared<'a> {
    shape: Shape,
    products: [&'a Array; 14],
    step: [&'a Array; 4],
    /// `shape.par` as numbers: the input norms' eps, q/k eps, the output norm's eps.
    par: [f32; 3],
    delta: DeltaNetShape,
    moe: Option<MoePrepared<'a>>,
}

impl Prepared<'_> {
    pub(super) fn in_launch(&self) -> InLaunch {
        in_launch(self.shape.mlp, self.shape.moe.is_some())
    }
}

/// `layer`'s parts for the kernel, or `None` when it does not apply (the step kernel off,
/// biased or mixed quantization, odd sizes, heads whose state rows would not fit a thread's
/// registers).
pub(super) fn prepare(layer: &DecoderLayer, dtype: Dtype) -> Option<Prepared<'_>> {
    let crate::mixer::Mixer::DeltaNet(d) = &layer.mixer else {
        return None;
    };
    let DeltaParts {
        proj,
        out,
        conv,
        dt_bias,
        rate,
        norm,
        shape: ds,
        qk_eps,
    } = d.decode_parts()?;
    let p = super::products(layer, [proj, out], ds.value_dim(), dtype)?;
    // The DeltaNet kernel's products are affine only.
    if super::is_mx(p.spec) {
        return None;
    }
    let p_rows = ds.conv_dim() + ds.value_dim() + 2 * ds.v_heads;
    // delta_head: each of a block's 16 warps keeps v_dim/16 state rows of k_dim/32 floats a
    // lane in registers (32 at Qwen3.5's 128 x 128).
    let state_regs = (ds.v_dim / (THREADS / 32)) * (ds.k_dim / 32);
    if [conv, dt_bias, norm].iter().any(|a| a.dtype() != dtype)
        || rate.dtype() != Dtype::F32
        || proj.0.weight.dim(0) != p_rows
        || p_rows % 2 != 0
        || p.hid % 2 != 0
        || ds.k_dim % 32 != 0
        || ds.v_dim % (THREADS / 32) != 0
        || state_regs > 32
    {
        return None;
    }
    let par = [p.eps, qk_eps, ds.eps];
    let moe = super::experts(layer, p.hid, p.spec, dtype);
    let shape = Shape {
        spec: p.spec,
        hid: p.hid,
        k_heads: ds.k_heads,
        v_heads: ds.v_heads,
        k_dim: ds.k_dim,
        v_dim: ds.v_dim,
        conv_kernel: ds.conv_kernel,
        ffn: p.ffn,
        mlp: p.mlp,
        moe: moe.as_ref().map(|m| m.shape),
        par: par.map(f32::to_bits),
    };
    Some(Prepared {
        shape,
        products: p.tensors,
        step: [conv, dt_bias, rate, norm],
        par,
        delta: ds,
        moe,
    })
}

/// One token of one sequence through consecutive DeltaNet `layers` in one launch; `None` when
/// the kernel does not apply to all of them alike (a batch, layers of different shapes, see
/// `prepare`), and nothing has changed then.
pub(super) fn forward_group(
    layers: &[DecoderLayer],
    x: &Array,
    caches: &mut [LayerCache],
    blocks: i32,
) -> Result<Option<Array>> {
    let n = layers.len();
    let dtype = x.dtype();
    let hid = x.dim(-1);
    if n == 0 || n > MAX_LAYERS || caches.len() != n || x.size() != hid as usize {
        return Ok(None);
    }
    let Some((prepared, s)) = alike(layers, |l| prepare(l, dtype), |p| p.shape) else {
        return Ok(None);
    };
    let ffn = prepared[0].in_launch();
    let kind = OneLaunch { delta: true, ffn };
    if s.hid != hid || (n > 1 && !kind.groups()) || n > kind.max_layers() {
        return Ok(None);
    }
    let ds = prepared[0].delta;
    let conv_shape = [1, ds.conv_kernel - 1, ds.conv_dim()];
    let state_shape = [1, ds.v_heads, ds.v_dim, ds.k_dim];
    // A cache that has seen nothing starts from zeros, as the step kernel's caller does.
    let mut held = Vec::with_capacity(n);
    for c in caches.iter() {
        let LayerCache::Recurrent(rc) = c else {
            return Ok(None);
        };
        let conv = match &rc.conv {
            Some(c) => c.clone(),
            None => Array::zeros(&conv_shape, dtype)?,
        };
        let state = match &rc.state {
            Some(st) => st.clone(),
            None => Array::zeros(&state_shape, Dtype::F32)?,
        };
        if conv.shape() != conv_shape || state.shape() != state_shape {
            return Ok(None);
        }
        held.push((conv, state));
    }
    let [eps, qk_eps, norm_eps] = prepared[0].par;
    let par = consts(&[eps, qk_eps, 0.0, norm_eps])?;
    let bar = counters()?;
    // The staged vectors: the layer's input, the step's output (value heads x dim), the
    // feed-forward's activations.
    let (f, shared) = ffn_staging(s.moe, s.ffn, hid.max(ds.value_dim()), s.spec.bits);
    let lay = scratch_layout(hid, &ds, f);
    let kernel = kernel(n, shared, ffn)?;
    let mut inputs: Vec<&Array> = vec![x, &par, &bar];
    for (p, (conv, state)) in prepared.iter().zip(&held) {
        inputs.extend(p.products);
        inputs.extend(p.step);
        inputs.push(conv);
        inputs.push(state);
    }
    for p in &prepared {
        inputs.extend(p.moe.iter().flat_map(|m| m.tensors));
    }
    let x_shape = x.shape();
    // The router's logits and the choice after the layout's regions.
    let scratch = [lay[4] + s.moe.map_or(0, |m| m.scratch())];
    let mut shapes: Vec<&[i32]> = vec![&x_shape, &scratch];
    let mut dtypes = vec![dtype, Dtype::F32];
    for _ in 0..n {
        shapes.extend([&conv_shape[..], &state_shape[..]]);
        dtypes.extend([dtype, Dtype::F32]);
    }
    let mut template = vec![
        ("T", TemplateArg::Dtype(dtype)),
        ("BITS", TemplateArg::Int(s.spec.bits)),
        ("G", TemplateArg::Int(s.spec.group_size)),
        ("HID", TemplateArg::Int(hid)),
        ("HK", TemplateArg::Int(s.k_heads)),
        ("HV", TemplateArg::Int(s.v_heads)),
        ("DK", TemplateArg::Int(s.k_dim)),
        ("DV", TemplateArg::Int(s.v_dim)),
        ("KC", TemplateArg::Int(s.conv_kernel)),
        ("F", TemplateArg::Int(f)),
        ("NT", TemplateArg::Int(THREADS)),
        ("O_Y", TemplateArg::Int(lay[0])),
        ("O_H", TemplateArg::Int(lay[1])),
        ("O_ACT", TemplateArg::Int(lay[2])),
        ("O_X", TemplateArg::Int(lay[3])),
        ("IDOT", TemplateArg::Bool(fast_path().layer_idot)),
    ];
    template.extend(s.moe.iter().flat_map(|m| m.template(lay[4])));
    let out = super::launch(&kernel, blocks, &inputs, &shapes, &dtypes, &template)?;
    let mut out = out.into_iter();
    let y = out.next().expect("the kernel's first output is y");
    out.next(); // scratch
    for c in caches.iter_mut() {
        let LayerCache::Recurrent(rc) = c else {
            unreachable!("checked above")
        };
        rc.conv = out.next();
        rc.state = out.next();
        rc.offset += 1;
    }
    Ok(Some(y))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_regions_start_on_whole_lines_and_hold_their_rows() {
        // Qwen3.5-9B's and -27B's DeltaNet layers.
        for (hid, hv, f) in [(4096, 32, 12288), (5120, 48, 17408)] {
            let s = DeltaNetShape {
                hidden: hid,
                k_heads: 16,
                v_heads: hv,
                k_dim: 128,
                v_dim: 128,
                conv_kernel: 4,
                eps: 1e-6,
            };
            let l = scratch_layout(hid, &s, f);
            assert!(l.iter().all(|o| o % 32 == 0), "{l:?}");
            let p = 2 * 16 * 128 + 2 * hv * 128 + 2 * hv;
            let sizes = [p / 2, hv * 128 / 2, hid / 2, f / 2, hid / 2];
            let starts = [0, l[0], l[1], l[2], l[3]];
            for i in 0..5 {
                assert!(starts[i] + sizes[i] <= l[i], "region {i} overflows: {l:?}");
            }
        }
    }
}
