//! The layer kernel for a batch's decode step (kernels/layer_rows.cuh): the
//! rows of a left-padded batch cache (batch_cache.rs) through up to 32 layers in one launch, each
//! row computed with the arithmetic the one-sequence kernel gives it alone, so a sequence's tokens
//! do not change when others join it (batch invariance on the fast path, not only in f32). Each
//! weight chunk is loaded once for up to `MR` rows. The op-by-op batch path costs about eight MLX
//! graph nodes a layer, whose CPU time bounded the step: 9.3 ms for 4 rows of Llama-3-8B 4-bit
//! on the H100 against 2.4 ms for one sequence (docs/perf.md, session 10).

use rmx_mlx::{Array, Dtype, TemplateArg};

use super::{alike, counters, kernel, prepare, Rows, MAX_HEADS, MAX_LAYERS, SPLITS, THREADS};
use crate::cache::LayerCache;
use crate::decoder_layer::DecoderLayer;
use crate::error::Result;
use crate::fastpath::{self, consts, fast_path};

/// Rows whose products share one load of a weight chunk (the kernel's MR).
const MR: i32 = 8;

/// Shared memory for staged rows: within every CUDA GPU's opt-in limit since Ampere (A100: 164
/// KB; the H100 has 227 KB), so a phase stages 5 rows of an 8B model's 14,336-wide MLP input at
/// once, and 17 of its 4,096-wide vectors.
const STAGE_BYTES: i32 = 160 * 1024;

/// The launch's shared parameters: the one-sequence kernel's with the rows' `pads` after `pos`.
pub(super) const INPUTS: [&str; 6] = ["x", "inv_freq", "pos", "pads", "par", "bar"];

/// What every thread of the n-layer kernel runs once the layer table is filled: a batch's rows
/// (with tensor-core products: `BatchMma`), or (`Block`) one sequence's consecutive positions.
pub(super) fn call(n: usize, rows: Rows) -> String {
    let block = rows == Rows::Block;
    let share = block && fast_path().layer_block_share;
    let mma = rows == Rows::BatchMma;
    format!(
        "rmx::decode_layers_rows<T, BITS, G, HID, H, KV, D, F, QKNORM, TRADITIONAL, NT, SMAX, \
         MR, {block}, {share}, {mma}>(x, tab, {n}, inv_freq, pos, pads, par, bar, y, scratch);"
    )
}

/// Shared memory of the tensor-core phases before their staged part (kernels/layer_rows_mma.cuh's
/// MmaShared::PART floats): the K slices' sums (16 floats a lane), the rows' sums of squares and
/// their norm scales.
const MMA_FIXED_BYTES: i32 = 4 * ((THREADS / 32) * 32 * 16 + 32 * (THREADS / 32) + 32);

/// Spans (64 columns) of a k-wide phase's x the tensor-core phases stage at once for `rows` rows
/// (at most 32 at a time) within `bytes` of shared memory: the whole row if it fits, else parts
/// of a whole number of [`MMA_PART_UNIT`] spans where as many fit (else of the kernel's chunks),
/// as even as they go. A span of n rows takes n x 64 bf16 values and n float sums; each row also
/// 8 bytes of padding and one more sum (MmaPart's strides), the sums' region up to 12 bytes of
/// rounding.
fn mma_part_spans(k: i32, rows: i32, bytes: i32) -> i32 {
    let n = rows.clamp(1, 32);
    let spans = k / 64;
    let room = bytes - MMA_FIXED_BYTES - n * (8 + 4) - 16;
    let most = (room / (n * (128 + 4))).clamp(1, spans);
    if most == spans {
        return spans;
    }
    let unit = if most >= MMA_PART_UNIT {
        MMA_PART_UNIT
    } else {
        MMA_CHUNK
    };
    let most = (most / unit * unit).max(1);
    let parts = (spans + most - 1) / most;
    let even = (spans + parts - 1) / parts;
    ((even + unit - 1) / unit * unit).min(most)
}

/// Spans a warp loads at once (the kernel's RMX_MMA_CHUNK).
const MMA_CHUNK: i32 = 4;

/// Spans of a part that give each of 8 K slices (the out and down projections' at Llama-3-8B's
/// shape on 132 SMs) the same number of chunks: a part of 45 spans of its 14,336 left some
/// slices two chunks and others one.
const MMA_PART_UNIT: i32 = 8 * MMA_CHUNK;

/// Bytes the kernel's MmaPart takes for `ps` spans of n rows (as layer_rows_mma.cuh lays it out).
#[cfg(test)]
fn mma_part_bytes(ps: i32, n: i32) -> i32 {
    let sums = (n * (ps | 1) + 3) / 4 * 4;
    MMA_FIXED_BYTES + 4 * sums + 2 * n * (ps * 64 + 4)
}

/// Whether a batch's step can take its products on the tensor cores: bf16 activations, 4-bit
/// weights in groups of 64 or more, and widths in whole tiles and spans.
fn mma_fits(s: &super::Shape, dtype: Dtype, hid: i32) -> bool {
    let nqkv = (s.heads + 2 * s.kv_heads) * s.head_dim;
    fast_path().layer_rows_mma
        && dtype == Dtype::Bf16
        && s.spec.bits == 4
        && s.spec.group_size % 64 == 0
        && nqkv % 16 == 0
        && hid % 64 == 0
        && (s.heads * s.head_dim) % 64 == 0
        && s.ffn % 64 == 0
}

/// The most positions one block takes (a verify of up to 15 guesses; each weight chunk is
/// loaded once for every `MR` of them).
pub(crate) const MAX_BLOCK: i32 = 16;

/// Floats of shared memory one staged row of width k takes (the kernel's RowStage<BITS, K>).
fn stage_floats(k: i32, bits: i32) -> i32 {
    let floats = 32 + k / 2 + 2 * (k / (128 / bits));
    (floats + 31) / 32 * 32
}

/// Rows of width k a phase stages at once.
fn group(rows: i32, k: i32, bits: i32) -> i32 {
    (STAGE_BYTES / (4 * stage_floats(k, bits))).clamp(1, rows)
}

/// Splits of one head's positions for a sequence of n positions, as the kernels choose them.
fn splits(n: i32, warps: i32, heads: i32) -> i32 {
    ((n + 7) / 8).min(SPLITS).min(warps / heads).max(1)
}

/// The scratch regions' offsets in floats (qkv at 0, then m/l, partial rows, attended rows,
/// residual rows, activations, layer outputs) and the total, each on whole 128-byte lines.
fn scratch_layout(rows: i32, sb: i32, hid: i32, h: i32, kv: i32, d: i32, f: i32) -> [i32; 7] {
    let lines = |floats: i32| (floats + 31) / 32 * 32;
    let ml = lines(rows * (h + 2 * kv) * d / 2);
    let part = ml + lines(rows * h * sb * 2);
    let att = part + lines(rows * h * sb * d);
    let res = att + lines(rows * h * d / 2);
    let act = res + lines(rows * hid / 2);
    let xo = act + lines(rows * f / 2);
    [ml, part, att, res, act, xo, xo + lines(rows * hid / 2)]
}

/// A batch's decode step (x `[B, 1, hidden]`) through `layers`, or `None` when the kernel does
/// not take it (integer products off, one row, shapes `prepare` refuses, caches not at one step),
/// and nothing has changed then.
pub(super) fn forward(
    layers: &[DecoderLayer],
    x: &Array,
    caches: &mut [LayerCache],
    blocks: i32,
) -> Result<Option<Array>> {
    let rows = x.dim(0);
    if x.ndim() != 3 || x.dim(1) != 1 || rows < 2 {
        return Ok(None);
    }
    let step = match &caches[0] {
        LayerCache::Batch(c) => c.slot_state(),
        _ => return Ok(None),
    };
    let same_step = caches
        .iter()
        .all(|c| matches!(c, LayerCache::Batch(b) if b.slot_state() == step));
    if !same_step || step.2 != rows as usize {
        return Ok(None);
    }
    let Some(plan) = plan(layers, x, rows)? else {
        return Ok(None);
    };
    let min_pad = match &caches[0] {
        LayerCache::Batch(c) => c.pads().iter().copied().min().unwrap_or(0),
        _ => unreachable!("checked above"),
    };
    let mut slots = Vec::with_capacity(layers.len());
    for c in caches.iter_mut() {
        let LayerCache::Batch(b) = c else {
            unreachable!("checked above")
        };
        slots.push(b.decode_slot(plan.shape.kv_heads, plan.shape.head_dim, x.dtype())?);
    }
    let (col, pads) = (slots[0].2, slots[0].3.clone());
    let longest = col - min_pad + 1;
    let kv: Vec<(Array, Array)> = slots.into_iter().map(|(k, v, _, _)| (k, v)).collect();
    run(plan, x, &kv, col, &pads, longest, blocks, Rows::Batch)
}

/// A block of 2 to [`MAX_BLOCK`] consecutive tokens of one sequence (x `[1, L, hidden]`: a
/// speculative verify's) through `layers`, each position attending causally, with the sums a
/// decode step at that position makes alone; `None` when the kernel does not take it (as
/// [`forward`], or caches other than full ones at one offset), and nothing has changed then.
pub(super) fn forward_block(
    layers: &[DecoderLayer],
    x: &Array,
    caches: &mut [LayerCache],
    blocks: i32,
) -> Result<Option<Array>> {
    if x.ndim() != 3 || x.dim(0) != 1 {
        return Ok(None);
    }
    let rows = x.dim(1);
    if !(2..=MAX_BLOCK).contains(&rows) || caches.len() != layers.len() {
        return Ok(None);
    }
    let state = |c: &LayerCache| match c {
        LayerCache::Full(kv) => Some((kv.offset, kv.capacity())),
        _ => None,
    };
    let Some(first) = state(&caches[0]) else {
        return Ok(None);
    };
    if caches.iter().any(|c| state(c) != Some(first)) {
        return Ok(None);
    }
    let Some(plan) = plan(layers, x, rows)? else {
        return Ok(None);
    };
    let mut kv = Vec::with_capacity(layers.len());
    let mut col = 0;
    for c in caches.iter_mut() {
        let LayerCache::Full(cache) = c else {
            unreachable!("checked above")
        };
        let (k, v, at) =
            cache.block_slot(rows, plan.shape.kv_heads, plan.shape.head_dim, x.dtype())?;
        col = at;
        kv.push((k, v));
    }
    let pads = fastpath::on_device(Array::zeros(&[rows], Dtype::I32)?)?;
    run(plan, x, &kv, col, &pads, col + rows, blocks, Rows::Block)
}

/// What both kinds of rows share: the layers prepared alike, and checked for what the rows
/// kernel does not have, for `rows` rows.
struct Plan<'a> {
    prepared: Vec<super::Prepared<'a>>,
    shape: super::Shape,
    rows: i32,
}

fn plan<'a>(layers: &'a [DecoderLayer], x: &Array, rows: i32) -> Result<Option<Plan<'a>>> {
    let fp = fast_path();
    if !fp.layer_rows || !fp.layer_idot {
        return Ok(None);
    }
    let dtype = x.dtype();
    let Some((prepared, s)) = alike(layers, |l| prepare(l, dtype), |p| p.shape) else {
        return Ok(None);
    };
    let first = &prepared[0];
    // The rows kernel has neither linear biases nor sinks nor a rope input scale.
    if layers.len() > MAX_LAYERS
        || !s.mlp
        || s.extras.iter().any(|e| *e)
        || first.par[3] != 1.0
        || super::is_mx(s.spec)
        || s.hid != x.dim(-1)
        || rows * s.heads > MAX_HEADS
        || !fastpath::attention_heads_fit(&first.rope, dtype)
    {
        return Ok(None);
    }
    Ok(Some(Plan {
        prepared,
        shape: s,
        rows,
    }))
}

/// One launch over `rows` rows of x: caches `kv` (per layer, the whole buffers), writing at column
/// `col` (a block: from `col` on), `pads` per row, the longest row `longest` positions.
#[allow(clippy::too_many_arguments)]
fn run(
    plan: Plan<'_>,
    x: &Array,
    kv: &[(Array, Array)],
    col: i32,
    pads: &Array,
    longest: i32,
    blocks: i32,
    kind: Rows,
) -> Result<Option<Array>> {
    let (prepared, s) = (&plan.prepared, plan.shape);
    let first = &prepared[0];
    let dtype = x.dtype();
    let n = prepared.len();
    let rows = plan.rows;
    let hid = x.dim(-1);
    let cap = kv[0].0.dim(2);
    let (h, kvh, d, f, bits) = (s.heads, s.kv_heads, s.head_dim, s.ffn, s.spec.bits);
    let sb = splits(longest, blocks * (THREADS / 32), h);
    let kind = if kind == Rows::Batch && mma_fits(&s, dtype, hid) {
        Rows::BatchMma
    } else {
        kind
    };
    let lay = scratch_layout(rows, sb, hid, h, kvh, d, f);
    // What a phase of each width stages at once (rows, or with tensor cores x's spans), and the
    // launch's shared memory: as much as the most rows would take, whatever the batch, so one
    // compiled kernel serves every batch size (the shared memory is part of the kernel's key).
    let widths = [hid, h * d, f];
    let (groups, shared) = if kind == Rows::BatchMma {
        // 1 KB below the device's limit for the kernel's own (static) shared variables; the
        // parts of x staged at once are as wide as this batch's rows leave room for.
        let budget = rmx_mlx::cuda_shared_memory_optin().unwrap_or(STAGE_BYTES) - 1024;
        (widths.map(|k| mma_part_spans(k, rows, budget)), budget)
    } else {
        let most = widths
            .iter()
            .map(|&k| 4 * group(i32::MAX, k, bits) * stage_floats(k, bits))
            .max()
            .unwrap_or(0);
        (widths.map(|k| group(rows, k, bits)), most)
    };
    let pos = fastpath::on_device(Array::from_slice(
        &[
            col, cap, rows, sb, groups[0], groups[1], groups[2], lay[0], lay[1], lay[2], lay[3],
            lay[4], lay[5], lay[6],
        ],
        &[14],
    )?)?;
    // RMX_LAYER_TIMES: the phases' clocks after the scratch regions (u64 each: block 0's start
    // and waits, then every block's finish).
    let times = fast_path().layer_times;
    let clocks = 2 * (super::phase_times::PHASES * n as i32 + blocks);
    let scratch = lay[6] + if times { clocks } else { 0 };
    let par = consts(&first.par)?;
    let bar = counters()?;
    let kernel = kernel(n, shared, kind, super::InLaunch::Mlp, [false; 3], false)?;
    let mut inputs: Vec<&Array> = vec![x, first.rope.inv_freq, &pos, pads, &par, &bar];
    for (p, (keys, values)) in prepared.iter().zip(kv) {
        inputs.extend(p.products);
        inputs.extend(p.qk_norms);
        inputs.push(keys);
        inputs.push(values);
    }
    let out = super::launch(
        &kernel,
        blocks,
        &inputs,
        &[&x.shape(), &[scratch]],
        &[dtype, Dtype::F32],
        &[
            ("T", TemplateArg::Dtype(dtype)),
            ("BITS", TemplateArg::Int(bits)),
            ("G", TemplateArg::Int(s.spec.group_size)),
            ("HID", TemplateArg::Int(hid)),
            ("H", TemplateArg::Int(h)),
            ("KV", TemplateArg::Int(kvh)),
            ("D", TemplateArg::Int(d)),
            ("F", TemplateArg::Int(f)),
            ("QKNORM", TemplateArg::Bool(s.qk_norm)),
            ("TRADITIONAL", TemplateArg::Bool(s.traditional)),
            ("NT", TemplateArg::Int(THREADS)),
            ("SMAX", TemplateArg::Int(SPLITS)),
            ("MR", TemplateArg::Int(MR)),
        ],
    )?;
    if times {
        super::phase_times::report(&out[1], lay[6], n, blocks, rows, kind)?;
    }
    Ok(out.into_iter().next())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_rows_fit_the_shared_memory_and_the_scratch_regions_do_not_overlap() {
        // Llama-3-8B 4-bit: 17 rows of 4,096, 5 of 14,336.
        assert_eq!(group(32, 4096, 4), 17);
        assert_eq!(group(32, 14336, 4), 5);
        assert_eq!(group(3, 4096, 4), 3);
        assert_eq!(stage_floats(4096, 4), 32 + 2048 + 256);
        for g in [group(32, 4096, 4), group(32, 14336, 4), group(32, 14336, 8)] {
            assert!(4 * g * stage_floats(14336, 4).max(stage_floats(4096, 4)) <= 4 * STAGE_BYTES);
        }
        let (rows, sb, hid, h, kv, d, f) = (32, 24, 4096, 32, 8, 128, 14336);
        let l = scratch_layout(rows, sb, hid, h, kv, d, f);
        let sizes = [
            rows * (h + 2 * kv) * d / 2,
            rows * h * sb * 2,
            rows * h * sb * d,
            rows * h * d / 2,
            rows * hid / 2,
            rows * f / 2,
            rows * hid / 2,
        ];
        let starts = [0, l[0], l[1], l[2], l[3], l[4], l[5]];
        for i in 0..7 {
            assert_eq!(starts[i] % 32, 0);
            assert!(starts[i] + sizes[i] <= l[i], "region {i} overflows: {l:?}");
        }
        // The tensor-core phases' parts: at 32 rows in an H100's 227 KB (1 KB kept back)
        // Llama-3-8B's 4,096 columns in two parts of 32 spans and its 14,336 in seven of 32 (45
        // would fit); 16 rows or fewer take a 4,096-wide row whole; every part fits.
        let h100 = 227 * 1024 - 1024;
        assert_eq!(mma_part_spans(4096, 32, h100), 32);
        assert_eq!(mma_part_spans(14336, 32, h100), 32);
        assert_eq!(mma_part_spans(14336, 16, h100), 64);
        assert_eq!(mma_part_spans(4096, 16, h100), 64);
        assert_eq!(mma_part_spans(576, 2, h100), 9);
        assert_eq!(
            mma_part_spans(4096, 32, 61_000),
            4,
            "room for 6 spans: chunks of 4"
        );
        for budget in [h100, STAGE_BYTES - 1024] {
            for k in [576, 1024, 4096, 5120, 14336, 18944] {
                for rows in [1, 2, 5, 16, 17, 23, 31, 32, 40] {
                    let ps = mma_part_spans(k, rows, budget);
                    let n = rows.min(32);
                    assert!(ps >= 1 && ps <= k / 64);
                    assert!(mma_part_bytes(ps, n) <= budget, "{k} {rows} {ps}");
                }
            }
        }
        // The splits follow the one-sequence kernel's: 132 SMs x 16 warps over 32 heads.
        assert_eq!(splits(1, 2112, 32), 1);
        assert_eq!(splits(192, 2112, 32), 24);
        assert_eq!(splits(100_000, 2112, 32), 64);
        assert_eq!(splits(100_000, 2112, 64), 33);
    }
}
