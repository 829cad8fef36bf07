//! A quantized pre-norm decoder layer (Llama, Qwen3) as one CUDA launch for a decode step:
//! kernels/decode.cuh's `layer` section runs the QKV product, attention, the o product, the MLP's
//! two products and both residual adds as phases of one kernel, each phase waiting for the one
//! before across the grid. The five-kernel path (fastpath.rs) costs five MLX graph nodes per
//! layer, and MLX spends several µs of CPU on each; with one node per layer, a small model's
//! decode step is no longer bound by that CPU work.
//!
//! The grid is one 512-thread block per SM (asked of the driver). The phases hand out their
//! work as tickets that running blocks claim (the kernel's `Tickets`), so the kernel does not
//! need every block resident at once: two models decoding on two streams, each holding part of
//! the GPU, finish with fewer blocks instead of waiting on each other. The session-4 kernel used
//! a plain grid barrier and was safe only while two of its blocks fit an SM. A wait that has not
//! ended after 2 s traps (a kernel fault, which the process's CUDA context does not survive)
//! instead of hanging; with tickets only a bug can get there.

use std::cell::RefCell;

use rmx_mlx::quant::{QuantSpec, Quantized};
use rmx_mlx::{Array, Dtype, Launch, TemplateArg};

use crate::attention::AttnParts;
use crate::cache::{AttnMask, LayerCache};
use crate::error::Result;
use crate::fastpath::{self, consts, fast_path, kernel_with_shared, pos_array, Spec};
use crate::llama::DecoderLayer;

const LAYER: Spec = Spec {
    name: "rmx_decode_layer",
    section: "layer",
    inputs: &[
        "x", "wq", "sq", "bq", "wo", "so", "bo", "wg", "sg", "bg", "wd", "sd", "bd", "n1", "n2",
        "qn", "kn", "inv_freq", "pos", "par", "kc", "vc", "bar",
    ],
    outputs: &["y", "scratch"],
    body: "rmx::decode_layer<T, BITS, G, HID, H, KV, D, F, QKNORM, TRADITIONAL, NT, SMAX, O_ML, O_PART, \
           O_ATT, O_H, O_ACT, IDOT>(x, wq, sq, bq, wo, so, bo, wg, sg, bg, wd, sd, bd, n1, n2, qn, kn, \
           inv_freq, pos, par, kc, vc, bar, y, scratch);",
};

// Threads per block: 16 warps per SM keep the weight loads in flight, and 512 threads leave each
// up to 128 registers (ptxas: 96 today), so one block always fits an SM. 1,024 threads (measured
// slower at 64 registers in session 4) no longer fit.
const THREADS: i32 = 512;

/// The counters the kernel keeps across its blocks (kernels/decode.cuh's `Tickets` from word 32,
/// the per-head merge counters from word 128), in 32-bit words.
const COUNTERS: usize = 512;
/// Most query heads the per-head counters have room for.
const MAX_HEADS: i32 = COUNTERS as i32 - 128;

/// Most splits of one head's positions in the attention phase (the kernel's SMAX).
const SPLITS: i32 = 64;

thread_local! {
    // The kernel's counters (`COUNTERS` words): zero once, then left at zero by every launch.
    // Per engine thread, like the model whose layers use it.
    static COUNTER_ARRAY: RefCell<Option<Array>> = const { RefCell::new(None) };
}

fn counters() -> Result<Array> {
    COUNTER_ARRAY.with(|b| {
        if let Some(a) = &*b.borrow() {
            return Ok(a.clone());
        }
        // Copied to device memory (fastpath::on_device): the GPU's atomics and the spinning
        // reads of the waits must not cross the bus. The first build made its two counters from
        // host data and hung on the H100.
        let a = fastpath::on_device(Array::from_slice(&[0u32; COUNTERS], &[COUNTERS as i32])?)?;
        a.eval()?;
        *b.borrow_mut() = Some(a.clone());
        Ok(a)
    })
}

/// The kernel's scratch regions, in floats, each rounded up to whole 128-byte lines:
/// `[offsets of m/l, partial rows, attended row, residual, activations; total]`.
fn scratch_layout(hid: i32, h: i32, kv: i32, d: i32, f: i32) -> [i32; 6] {
    let lines = |floats: i32| (floats + 31) / 32 * 32;
    let ml = lines((h + 2 * kv) * d / 2);
    let part = ml + lines(h * SPLITS * 2);
    let att = part + lines(h * SPLITS * d);
    let res = att + lines(h * d / 2);
    let act = res + lines(hid / 2);
    [ml, part, att, res, act, act + lines(f / 2)]
}

/// Bytes of dynamic shared memory: the staged vector as floats, its chunk sums and 32 floats,
/// which also holds the integer staging (IDOT: 32 floats, 2 bytes an element, 8 a chunk).
fn shared_bytes(hid: i32, h: i32, d: i32, f: i32, bits: i32) -> i32 {
    let k = hid.max(h * d).max(f);
    4 * (k + k / (128 / bits) + 32)
}

/// `x + mlp(x + attention(x))` of one token through the one-launch kernel; `None` when it does
/// not apply (not CUDA, not one token of a full-attention cache, unfused or biased or mixed
/// quantization, a context past `RMX_FAST_ATTN_MAX`, odd sizes), and nothing has changed then.
pub(crate) fn forward(
    layer: &DecoderLayer,
    x: &Array,
    mask: &AttnMask,
    cache: &mut LayerCache,
) -> Result<Option<Array>> {
    let fp = fast_path();
    let (Some(blocks), LayerCache::Full(kv), AttnMask::None) = (fp.layer_blocks, cache, mask)
    else {
        return Ok(None);
    };
    let dtype = x.dtype();
    let hid = x.dim(-1);
    if x.size() != hid as usize || !matches!(dtype, Dtype::Bf16 | Dtype::F16) {
        return Ok(None);
    }
    let (Some(a), Some([gu, down])) = (layer.attn.decode_parts(), layer.mlp.decode_parts()) else {
        return Ok(None);
    };
    let AttnParts {
        qkv,
        o,
        rope,
        scale,
    } = a;
    let (h, kvh, d) = (rope.heads, rope.kv_heads, rope.head_dim);
    let f = layer.mlp.hidden();
    let spec = qkv.1;
    let (n1, eps) = layer.input_norm.parts();
    let (n2, eps2) = layer.post_norm.parts();
    let weights = [qkv, o, gu, down];
    let quant_ok = |(q, s): &(&Quantized, QuantSpec)| {
        *s == spec
            && q.scales.dtype() == dtype
            && q.biases.as_ref().is_some_and(|b| b.dtype() == dtype)
    };
    let per = 128 / spec.bits.max(1);
    if !weights.iter().all(quant_ok)
        || !matches!(spec.bits, 4 | 8)
        || spec.group_size % per != 0
        || [hid, h * d, f].iter().any(|k| k % spec.group_size != 0)
        || eps != eps2
        || n1.dtype() != dtype
        || n2.dtype() != dtype
        || !fastpath::decode_attention_fits(&rope, dtype, kv.offset + 1)
        || gu.0.weight.dim(0) != 2 * f
        || qkv.0.weight.dim(0) != (h + 2 * kvh) * d
        || h > MAX_HEADS
    {
        return Ok(None);
    }
    let (qn, kn, qk_eps) = rope.norm_inputs(n1);
    let (keys, values, offset) = kv.decode_slot(kvh, d, dtype)?;
    let pos = pos_array([offset, keys.dim(2)])?;
    let par = consts(&[eps, qk_eps, scale])?;
    let bar = counters()?;
    let lay = scratch_layout(hid, h, kvh, d, f);
    let kernel = kernel_with_shared(&LAYER, shared_bytes(hid, h, d, f, spec.bits))?;
    let [q, o, gu, dn] = weights.map(|(q, _)| q);
    let b = |q: &'_ Quantized| -> Array { q.biases.clone().expect("checked by quant_ok") };
    let (bq, bo, bg, bd) = (b(q), b(o), b(gu), b(dn));
    let out = kernel.launch(&Launch {
        inputs: &[
            x,
            &q.weight,
            &q.scales,
            &bq,
            &o.weight,
            &o.scales,
            &bo,
            &gu.weight,
            &gu.scales,
            &bg,
            &dn.weight,
            &dn.scales,
            &bd,
            n1,
            n2,
            qn,
            kn,
            rope.inv_freq,
            &pos,
            &par,
            &keys,
            &values,
            &bar,
        ],
        output_shapes: &[&x.shape(), &[lay[5]]],
        output_dtypes: &[dtype, Dtype::F32],
        grid: [blocks * THREADS, 1, 1],
        threadgroup: [THREADS, 1, 1],
        template: &[
            ("T", TemplateArg::Dtype(dtype)),
            ("BITS", TemplateArg::Int(spec.bits)),
            ("G", TemplateArg::Int(spec.group_size)),
            ("HID", TemplateArg::Int(hid)),
            ("H", TemplateArg::Int(h)),
            ("KV", TemplateArg::Int(kvh)),
            ("D", TemplateArg::Int(d)),
            ("F", TemplateArg::Int(f)),
            ("QKNORM", TemplateArg::Bool(rope.norms.is_some())),
            ("TRADITIONAL", TemplateArg::Bool(rope.traditional)),
            ("NT", TemplateArg::Int(THREADS)),
            ("SMAX", TemplateArg::Int(SPLITS)),
            ("O_ML", TemplateArg::Int(lay[0])),
            ("O_PART", TemplateArg::Int(lay[1])),
            ("O_ATT", TemplateArg::Int(lay[2])),
            ("O_H", TemplateArg::Int(lay[3])),
            ("O_ACT", TemplateArg::Int(lay[4])),
            ("IDOT", TemplateArg::Bool(fp.layer_idot)),
        ],
        init_value: None,
    })?;
    Ok(out.into_iter().next())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_regions_start_on_whole_lines_and_do_not_overlap() {
        // Qwen3-0.6B and Llama-3-8B shapes.
        for (hid, h, kv, d, f) in [(1024, 16, 8, 128, 3072), (4096, 32, 8, 128, 14336)] {
            let l = scratch_layout(hid, h, kv, d, f);
            assert!(l.iter().all(|o| o % 32 == 0), "{l:?}");
            let sizes = [
                (h + 2 * kv) * d / 2,
                h * SPLITS * 2,
                h * SPLITS * d,
                h * d / 2,
                hid / 2,
                f / 2,
            ];
            let starts = [0, l[0], l[1], l[2], l[3], l[4]];
            for i in 0..6 {
                let end = if i < 5 { l[i] } else { l[5] };
                assert!(starts[i] + sizes[i] <= end, "region {i} overflows: {l:?}");
            }
        }
        // The 8B model's MLP input is the largest staged vector: 14336 floats + sums + 32.
        assert_eq!(
            shared_bytes(4096, 32, 128, 14336, 4),
            4 * (14336 + 448 + 32)
        );
    }
}
