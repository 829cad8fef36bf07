//! The attention block the decoder families share: projections, optional q/k norms, rotary
//! embedding at the cache's offset, the cache update, and MLX's fused attention.

use rmx_mlx::quant::{QuantSpec, Quantized};
use rmx_mlx::{fast, Array};

use crate::cache::{AttnMask, BatchKvCache, KvCache, LayerCache};
use crate::config::QuantConfig;
use crate::error::{ModelError, Result};
use crate::fastpath::{self, fast_path, QkvRope, QkvRows};
use crate::layers::{Linear, RmsNorm};
use crate::product_attention::{product_sdpa, quantized_sdpa, FEW_QUERIES};
use crate::rope::Rope;
use crate::tensor_parallel::{self, Heads, Part, Split};
use crate::weights::Weights;

/// Where the q/k norms sit: Qwen3 normalizes `[B, L, H, D]` before the head transpose, Gemma 3
/// after it; the same per-row op, but kept as in the reference.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum QkNorm {
    None,
    BeforeTranspose,
    AfterTranspose,
}

pub struct AttentionShape {
    pub hidden: i32,
    pub heads: i32,
    pub kv_heads: i32,
    pub head_dim: i32,
    pub qkv_bias: bool,
    pub o_bias: bool,
    pub scale: f32,
    /// Per-head attention-sink logits (`sinks`, GPT-OSS): an extra softmax column per head.
    pub sinks: bool,
    /// Qwen3-Next / Qwen3.5: q_proj also gives a gate per output feature, and attention's
    /// output is multiplied by its sigmoid before the o projection.
    pub output_gate: bool,
}

/// The q, k and v projections: three layers, or one fused layer on the CUDA fast path.
enum Qkv {
    Separate { q: Linear, k: Linear, v: Linear },
    Fused { qkv: Linear, qd: i32, kvd: i32 },
}

impl Qkv {
    /// The projections as the checkpoint stores them: one `qkv_proj` (Phi-3/4), computed and
    /// split as mlx-lm does, or `q_proj`, `k_proj` and `v_proj`.
    fn load(
        w: &mut Weights,
        q: &QuantConfig,
        path: &str,
        s: &AttentionShape,
        q_out: i32,
        kvd: i32,
        heads: Option<Heads>,
    ) -> Result<Qkv> {
        // The whole layer's sizes as stored, and this rank's rows of them.
        let (q_rows, kv_rows) = (q_out / s.heads, kvd / s.kv_heads);
        let fused = format!("{path}.qkv_proj");
        if w.has(&format!("{fused}.weight")) {
            let (inp, rows) = (s.hidden, q_out + 2 * kvd);
            let Some(h) = heads else {
                let qkv = Linear::load(w, q, &fused, inp, rows, s.qkv_bias)?;
                return Ok(Qkv::Fused {
                    qkv,
                    qd: q_out,
                    kvd,
                });
            };
            if s.qkv_bias {
                return Err(ModelError::Parallel {
                    ranks: w.tensor_parallel().map_or(1, |p| p.size()),
                    message: format!("{fused} with a bias is not split yet"),
                });
            }
            // A rank's q heads and its k and v heads: three runs of the `[q; k; v]` rows.
            let (kq, kk) = (h.q.scaled(q_rows), h.kv.scaled(kv_rows));
            let at = |start: i32, p: Part| Part {
                start: start + p.start,
                len: p.len,
            };
            let parts = [kq, at(q_out, kk), at(q_out + kvd, kk)];
            let qkv = tensor_parallel::linear_rows(w, q, &fused, inp, rows, &parts)?;
            return Ok(Qkv::Fused {
                qkv,
                qd: kq.len,
                kvd: kk.len,
            });
        }
        let (q_split, kv_split) = match heads {
            Some(h) => (
                Some(Split::Rows(h.q.scaled(q_rows))),
                Some(Split::Rows(h.kv.scaled(kv_rows))),
            ),
            None => (None, None),
        };
        let (lq, lkv) = match heads {
            Some(h) => (h.q.len * q_rows, h.kv.len * kv_rows),
            None => (q_out, kvd),
        };
        let mut proj = |name: &str, out: i32, split| {
            let p = format!("{path}.{name}");
            tensor_parallel::linear(w, q, &p, s.hidden, out, s.qkv_bias, split)
        };
        Qkv::new(
            proj("q_proj", q_out, q_split)?,
            proj("k_proj", kvd, kv_split)?,
            proj("v_proj", kvd, kv_split)?,
            lq,
            lkv,
        )
    }

    fn new(q: Linear, k: Linear, v: Linear, qd: i32, kvd: i32) -> Result<Qkv> {
        Ok(match Linear::fuse([q, k, v])? {
            Ok(qkv) => Qkv::Fused { qkv, qd, kvd },
            Err([q, k, v]) => Qkv::Separate { q, k, v },
        })
    }

    fn forward(&self, x: &Array) -> Result<(Array, Array, Array)> {
        Ok(match self {
            Qkv::Separate { q, k, v } => (q.forward(x)?, k.forward(x)?, v.forward(x)?),
            Qkv::Fused { qkv, qd, kvd } => {
                let mut p = qkv.forward(x)?.split_at(&[*qd, qd + kvd], -1)?.into_iter();
                let mut next = || p.next().expect("split in three");
                (next(), next(), next())
            }
        })
    }
}

pub struct Attention {
    qkv: Qkv,
    /// The rope's inverse frequencies, when the fused decode kernel can run (fast path, rope
    /// over the whole head).
    decode_inv_freq: Option<Array>,
    /// The same for a rope over part of the head or an output gate (Qwen3.5's gated
    /// attention), which only the one-sequence decode kernel takes.
    step_inv_freq: Option<Array>,
    /// The same for attention with sinks (GPT-OSS) or a rope with an input scale (YaRN), which
    /// only the one-launch layer kernel takes.
    layer_inv_freq: Option<Array>,
    head_dim: i32,
    o: Linear,
    q_norm: Option<RmsNorm>,
    k_norm: Option<RmsNorm>,
    qk_norm: QkNorm,
    heads: i32,
    kv_heads: i32,
    scale: f32,
    rope: Rope,
    sinks: Option<Array>,
    output_gate: bool,
    /// A few queries at once (a speculative verify step, a short prompt chunk), and any number
    /// beside sinks, attend through explicit products rather than MLX's fused kernel, which on
    /// CUDA is built anew for each shape (product_attention.rs); `RMX_PRODUCT_ATTN`, by default
    /// with the CUDA fast path, chosen at load.
    by_products: bool,
    /// With `by_products`, attentions of at most this many scores go by products too
    /// (`RMX_PRODUCT_ATTN_SCORES`, default 0).
    product_scores: i64,
}

impl Attention {
    /// `norm` builds a q/k norm layer (plain or Gemma's 1 + w) for the given path.
    pub fn load(
        w: &mut Weights,
        q: &QuantConfig,
        path: &str,
        s: &AttentionShape,
        rope: Rope,
        qk_norm: QkNorm,
        norm: &dyn Fn(&mut Weights, &str, i32) -> Result<RmsNorm>,
    ) -> Result<Attention> {
        let (qd, kvd) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
        let q_out = if s.output_gate { 2 * qd } else { qd };
        // On a rank of a tensor-parallel group: its heads, and the o projection's matching
        // input columns, summed over the ranks.
        let tp = w.tensor_parallel().cloned();
        let split = match &tp {
            Some(tp) => Some(tensor_parallel::heads(tp, s.heads, s.kv_heads)?),
            None => None,
        };
        let (heads, kv_heads) = match split {
            Some(h) => (h.q.len, h.kv.len),
            None => (s.heads, s.kv_heads),
        };
        let (q_norm, k_norm) = if qk_norm == QkNorm::None {
            (None, None)
        } else {
            (
                Some(norm(w, &format!("{path}.q_norm"), s.head_dim)?),
                Some(norm(w, &format!("{path}.k_norm"), s.head_dim)?),
            )
        };
        let sinks = match (s.sinks, split) {
            (false, _) => None,
            (true, Some(h)) => Some(w.take_part(&format!("{path}.sinks"), &[s.heads], 0, h.q)?),
            (true, None) => Some(w.take(&format!("{path}.sinks"), &[s.heads])?),
        };
        // The fused decode kernels implement neither sinks nor ropes beyond a frequency table;
        // the one-launch layer kernel takes both (sinks, an input scale).
        let (dims, _) = rope.layout();
        let kernels = fast_path().kernels && dims > 0 && dims % 2 == 0;
        let fits = kernels && sinks.is_none();
        let (decode_inv_freq, step_inv_freq) = if !fits {
            (None, None)
        } else if dims == s.head_dim && !s.output_gate {
            (rope.inv_freq()?, None)
        } else if s.output_gate {
            (None, rope.inv_freq()?)
        } else {
            // A partial rope without the gate (Phi-4-mini's 0.75) would take the same kernel,
            // but only the gated shape has been checked against mlx-lm on the GPU.
            (None, None)
        };
        let layer_inv_freq = if kernels
            && decode_inv_freq.is_none()
            && step_inv_freq.is_none()
            && (dims == s.head_dim || s.output_gate)
        {
            rope.scaled_inv_freq()?
        } else {
            None
        };
        let o_split = match (&tp, split) {
            (Some(tp), Some(h)) => Some(Split::Cols(h.q.scaled(s.head_dim), tp.group())),
            _ => None,
        };
        let o_path = format!("{path}.o_proj");
        Ok(Attention {
            decode_inv_freq,
            step_inv_freq,
            layer_inv_freq,
            head_dim: s.head_dim,
            qkv: Qkv::load(w, q, path, s, q_out, kvd, split)?,
            o: tensor_parallel::linear(w, q, &o_path, qd, s.hidden, s.o_bias, o_split)?,
            q_norm,
            k_norm,
            qk_norm,
            heads,
            kv_heads,
            scale: s.scale,
            rope,
            sinks,
            output_gate: s.output_gate,
            by_products: fast_path().product_attn,
            product_scores: fast_path().product_attn_scores,
        })
    }

    /// Whether rows at different positions rotate in one call (a batch can use this block).
    pub fn rotates_rows(&self) -> bool {
        self.rope.rotates_rows()
    }

    fn heads_first(&self, x: &Array, heads: i32, norm: Option<&RmsNorm>) -> Result<Array> {
        let s = x.shape();
        let mut x = x.reshape(&[s[0], s[1], heads, -1])?;
        if let (QkNorm::BeforeTranspose, Some(n)) = (self.qk_norm, norm) {
            x = n.forward(&x)?;
        }
        let mut x = x.transpose(&[0, 2, 1, 3])?;
        if let (QkNorm::AfterTranspose, Some(n)) = (self.qk_norm, norm) {
            x = n.forward(&x)?;
        }
        Ok(x)
    }

    pub fn forward(&self, x: &Array, mask: &AttnMask, cache: &mut LayerCache) -> Result<Array> {
        self.o.forward(&self.attend(Input::Normed(x), mask, cache)?)
    }

    /// `x + attention(norm(x))`: the pre-norm block, with the norm left to the fast path's
    /// kernels when they run.
    pub fn forward_prenorm(
        &self,
        x: &Array,
        norm: &RmsNorm,
        mask: &AttnMask,
        cache: &mut LayerCache,
    ) -> Result<Array> {
        self.o
            .forward_residual(&self.attend(Input::Raw(x, norm), mask, cache)?, x)
    }

    /// Everything before the o projection: `[B, L, heads * head_dim]`.
    fn attend(&self, input: Input, mask: &AttnMask, cache: &mut LayerCache) -> Result<Array> {
        // The fast path's kernels turn heads by the cache's offset; a sequence whose images
        // moved its positions (mrope.rs) runs MLX's ops.
        let planned = cache.mrope().is_some();
        if !planned {
            if let Some(out) = self.decode_attention(&input, mask, cache)? {
                return Ok(out);
            }
        }
        let x = &input.normed()?;
        let s = x.shape();
        let mut gate = None;
        let heads = match planned {
            true => None,
            false => self.prefill_heads(x, cache)?,
        };
        let (q, k, v) = match heads {
            Some([q, k, v]) => (q, k, v),
            None => {
                let (q, k, v, g) = self.project(x, cache)?;
                gate = g;
                if let LayerCache::Quantized(qc) = cache {
                    if self.sinks.is_some() {
                        // As mlx-lm: "Quantized SDPA does not support attention sinks."
                        return Err(ModelError::KvQuant(
                            "attention with sinks (GPT-OSS) cannot read a quantized KV cache; \
                             run this model without --kv-bits"
                                .into(),
                        ));
                    }
                    let (kq, vq) = qc.update_and_fetch(&k, &v)?;
                    let out = quantized_sdpa(&q, &kq, &vq, self.scale, mask, &qc.quant())?;
                    return heads_last(out, &s, gate);
                }
                let (k, v) = cache.update_and_fetch(&k, &v)?;
                (q, k, v)
            }
        };
        // On CUDA, explicit products wherever MLX's fused attention would be built anew for a
        // shape (product_sdpa's note): a few queries, or any number beside sinks, one included
        // (the layer kernel takes a lone sequence's step; a batch's step without padding would
        // meet MLX's cuDNN decoding graph, built anew for every 256 cached positions).
        // RMX_PRODUCT_ATTN_SCORES adds small attentions of more queries (a batch's prompts, an
        // agent's next turn after its cached prefix), each a new shape, to be measured.
        let l = q.dim(2);
        let sinks = self.sinks.is_some();
        let scores = i64::from(q.dim(0)) * i64::from(q.dim(1)) * i64::from(l) * i64::from(k.dim(2));
        let small = l >= 2 && scores <= self.product_scores;
        if self.by_products && (sinks || small || (2..=FEW_QUERIES).contains(&l)) {
            let out = product_sdpa(&q, &k, &v, self.scale, mask, self.sinks.as_ref())?;
            return heads_last(out, &s, gate);
        }
        let out = fast::scaled_dot_product_attention(
            &q,
            &k,
            &v,
            self.scale,
            mask.as_fast(),
            self.sinks.as_ref(),
        )?;
        heads_last(out, &s, gate)
    }

    /// The new positions' q, k and v heads `[B, heads, L, D]`, rotated to their positions,
    /// and the output gate where the block has one; the cache is not touched.
    fn project(
        &self,
        x: &Array,
        cache: &LayerCache,
    ) -> Result<(Array, Array, Array, Option<Array>)> {
        let s = x.shape();
        let plan = cache.mrope();
        if plan.is_none() {
            if let Some([q, k, v]) = self.decode_heads(x, cache.offset())? {
                return Ok((q, k, v, None));
            }
        }
        let mut gate = None;
        let (mut q, k, v) = self.qkv.forward(x)?;
        if self.output_gate {
            // mlx-lm: split [B, L, H, 2D] into queries and gate per head.
            let both = q.reshape(&[s[0], s[1], self.heads, -1])?;
            let mut halves = both.split(2, -1)?.into_iter();
            let (Some(qh), Some(gh)) = (halves.next(), halves.next()) else {
                unreachable!("split in two")
            };
            gate = Some(gh.reshape(&[s[0], s[1], -1])?);
            q = qh;
        }
        let q = self.heads_first(&q, self.heads, self.q_norm.as_ref())?;
        let k = self.heads_first(&k, self.kv_heads, self.k_norm.as_ref())?;
        let v = self.heads_first(&v, self.kv_heads, None)?;
        if let Some(plan) = plan {
            let offset = cache.offset();
            return Ok((plan.rotate(&q, offset)?, plan.rotate(&k, offset)?, v, gate));
        }
        Ok(match cache.row_positions() {
            Some(pos) => (
                self.rope.forward_rows(&q, pos)?,
                self.rope.forward_rows(&k, pos)?,
                v,
                gate,
            ),
            None => {
                let offset = cache.offset();
                (
                    self.rope.forward(&q, offset)?,
                    self.rope.forward(&k, offset)?,
                    v,
                    gate,
                )
            }
        })
    }

    /// The rope's frequencies for a one-sequence decode kernel: `decode_inv_freq`, or a gated
    /// block's `step_inv_freq`.
    fn inv_freq(&self) -> Option<&Array> {
        self.decode_inv_freq
            .as_ref()
            .or(self.step_inv_freq.as_ref())
    }

    fn rope_params<'a>(&'a self, inv_freq: &'a Array) -> QkvRope<'a> {
        let norms = match (&self.q_norm, &self.k_norm) {
            (Some(q), Some(k)) => {
                let (qw, eps) = q.parts();
                Some((qw, k.parts().0, eps))
            }
            _ => None,
        };
        let (rotated, traditional) = self.rope.layout();
        QkvRope {
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            norms,
            traditional,
            inv_freq,
            rotated,
            gated: self.output_gate,
        }
    }

    /// A decode step on the fast path: the projections, then one kernel for rope, norms, the
    /// cache write and attention. `None` when it does not apply (not CUDA, several tokens, a
    /// sliding-window cache, a long context, an odd head size).
    fn decode_attention(
        &self,
        input: &Input,
        mask: &AttnMask,
        cache: &mut LayerCache,
    ) -> Result<Option<Array>> {
        if let (Some(inv_freq), LayerCache::Batch(b)) = (&self.decode_inv_freq, &mut *cache) {
            return self.decode_attention_batch(input, inv_freq, b);
        }
        let (Some(inv_freq), LayerCache::Full(kv), AttnMask::None) = (self.inv_freq(), cache, mask)
        else {
            return Ok(None);
        };
        let x = input.raw();
        if x.size() != x.dim(-1) as usize {
            return Ok(None);
        }
        let p = self.rope_params(inv_freq);
        if !fastpath::decode_attention_fits(&p, x.dtype(), kv.offset + 1) {
            return Ok(None);
        }
        let fused;
        let separate;
        let rows = match &self.qkv {
            Qkv::Fused { qkv, .. } => {
                fused = match input {
                    Input::Raw(x, n) => qkv.forward_prenorm(x, n)?,
                    Input::Normed(x) => qkv.forward(x)?,
                };
                QkvRows::Fused(&fused)
            }
            Qkv::Separate { q, k, v } => {
                let x = input.normed()?;
                separate = [q.forward(&x)?, k.forward(&x)?, v.forward(&x)?];
                QkvRows::Separate([&separate[0], &separate[1], &separate[2]])
            }
        };
        let dtype = match &rows {
            QkvRows::Fused(r) => r.dtype(),
            QkvRows::Separate(r) => r[0].dtype(),
        };
        if dtype != x.dtype() {
            return Ok(None);
        }
        let (keys, values, offset) = kv.decode_slot(self.kv_heads, self.head_dim, dtype)?;
        Ok(Some(fastpath::decode_attention(
            &rows, &p, self.scale, &keys, &values, offset,
        )?))
    }

    /// A batch's decode step on the fast path: the fused projection of every row, then one
    /// kernel for every row's rope, norms, cache write and attention over its own columns.
    /// `None` when it does not apply (separate projections, several tokens a row, a long
    /// context), and MLX's ops run with the batch's mask.
    fn decode_attention_batch(
        &self,
        input: &Input,
        inv_freq: &Array,
        cache: &mut BatchKvCache,
    ) -> Result<Option<Array>> {
        let x = input.raw();
        let Qkv::Fused { qkv, .. } = &self.qkv else {
            return Ok(None);
        };
        if x.ndim() != 3 || x.dim(1) != 1 || x.dim(0) as usize != cache.rows() {
            return Ok(None);
        }
        let p = self.rope_params(inv_freq);
        if !fastpath::decode_attention_fits(&p, x.dtype(), cache.offset() + 1) {
            return Ok(None);
        }
        let rows = match input {
            Input::Raw(x, n) => qkv.forward_prenorm(x, n)?,
            Input::Normed(x) => qkv.forward(x)?,
        };
        if rows.dtype() != x.dtype() {
            return Ok(None);
        }
        let (keys, values, col, pads) =
            cache.decode_slot(self.kv_heads, self.head_dim, rows.dtype())?;
        Ok(Some(fastpath::decode_attention_batch(
            &rows, &p, self.scale, &keys, &values, col, &pads,
        )?))
    }

    /// A prompt chunk on the fast path: q, k, v heads from the fused product in one kernel, the
    /// cache updated, and what attention reads (q, then the cache's keys and values so far). An
    /// empty cache takes the kernel's k and v buffers as its own, so it is neither zero-filled
    /// nor copied into.
    fn prefill_heads(&self, x: &Array, cache: &mut LayerCache) -> Result<Option<[Array; 3]>> {
        let (Qkv::Fused { qkv, .. }, Some(inv_freq)) = (&self.qkv, &self.decode_inv_freq) else {
            return Ok(None);
        };
        let n = x.dim(1);
        // A quantized cache stores what MLX's quantize makes of the heads (`attend`).
        if x.ndim() != 3
            || x.dim(0) != 1
            || n < 2
            || !fastpath::fast_path().prefill_heads
            || matches!(cache, LayerCache::Quantized(_))
        {
            return Ok(None);
        }
        let fresh = matches!(cache, LayerCache::Full(kv) if kv.capacity() == 0);
        let cap = if fresh { KvCache::first_capacity(n) } else { n };
        let p = self.rope_params(inv_freq);
        let rows = qkv.forward(x)?;
        let Some([q, k, v]) = fastpath::prefill_heads(&rows, &p, cache.offset(), cap)? else {
            return Ok(None);
        };
        let (k, v) = match cache {
            LayerCache::Full(kv) if fresh => kv.adopt(k, v, n)?,
            c => c.update_and_fetch(&k, &v)?,
        };
        Ok(Some([q, k, v]))
    }

    /// Decode on the fast path: q, k, v of one token from the fused product and one kernel.
    fn decode_heads(&self, x: &Array, offset: i32) -> Result<Option<[Array; 3]>> {
        let (Qkv::Fused { qkv, .. }, Some(inv_freq)) = (&self.qkv, &self.decode_inv_freq) else {
            return Ok(None);
        };
        if x.size() != x.dim(-1) as usize {
            return Ok(None);
        }
        fastpath::qkv_rope(&qkv.forward(x)?, &self.rope_params(inv_freq), offset)
    }
}

/// What the one-launch decoder layer (decode_layer.rs) needs of an attention block: its fused
/// quantized QKV and o weights and the shape of its heads.
pub(crate) struct AttnParts<'a> {
    pub qkv: (&'a Quantized, QuantSpec),
    pub o: (&'a Quantized, QuantSpec),
    pub rope: QkvRope<'a>,
    pub scale: f32,
    /// What [`AttnExtras`] holds: the projections' linear biases, the sinks.
    pub extras: AttnExtras<'a>,
    /// The rope's input scale (YaRN's `mscale`); 1 for others.
    pub rope_scale: f32,
}

/// Attention's tensors beyond the plain form: the fused q/k/v projection's linear bias (Qwen2,
/// GPT-OSS), the o projection's (GPT-OSS), per-head sink logits (GPT-OSS).
#[derive(Clone, Copy)]
pub(crate) struct AttnExtras<'a> {
    pub qkv_bias: Option<&'a Array>,
    pub o_bias: Option<&'a Array>,
    pub sinks: Option<&'a Array>,
}

impl Attention {
    /// The projections (quantized, QKV fused) and what else the layer kernel reads, or `None`.
    /// An output gate and a partial rope are in `rope` (`gated`, `rotated`).
    pub(crate) fn decode_parts(&self) -> Option<AttnParts<'_>> {
        let Qkv::Fused { qkv, .. } = &self.qkv else {
            return None;
        };
        let (qkv, qkv_bias) = qkv.quant()?;
        let (o, o_bias) = self.o.quant()?;
        let inv_freq = self.inv_freq().or(self.layer_inv_freq.as_ref())?;
        Some(AttnParts {
            qkv,
            o,
            rope: self.rope_params(inv_freq),
            scale: self.scale,
            extras: AttnExtras {
                qkv_bias,
                o_bias,
                sinks: self.sinks.as_ref(),
            },
            rope_scale: self.rope.input_scale().unwrap_or(1.0) as f32,
        })
    }
}

/// Attention's `[B, heads, L, D]` output as `[B, L, heads * D]`, times the gate's sigmoid
/// where the block has one.
fn heads_last(out: Array, s: &[i32], gate: Option<Array>) -> Result<Array> {
    let out = if s[0] == 1 && s[1] == 1 {
        // One token: [1, H, 1, D] is already laid out as [1, 1, H * D].
        out.reshape(&[1, 1, -1])?
    } else {
        out.transpose(&[0, 2, 1, 3])?.reshape(&[s[0], s[1], -1])?
    };
    Ok(match gate {
        Some(g) => out.multiply(&g.sigmoid()?)?,
        None => out,
    })
}

/// A block's input: already normed, or raw with the norm still to apply.
enum Input<'a> {
    Normed(&'a Array),
    Raw(&'a Array, &'a RmsNorm),
}

impl Input<'_> {
    fn raw(&self) -> &Array {
        match self {
            Input::Normed(x) | Input::Raw(x, _) => x,
        }
    }

    fn normed(&self) -> Result<Array> {
        match self {
            Input::Normed(x) => Ok((*x).clone()),
            Input::Raw(x, n) => n.forward(x),
        }
    }
}

/// Gated MLP: `down(act(gate(x)) * up(x))`.
pub struct Mlp {
    gate_up: GateUp,
    down: Linear,
    hidden: i32,
    gelu: bool,
}

/// Gate and up: two layers, or one fused `[gate; up]` layer on the CUDA fast path.
enum GateUp {
    Separate { gate: Linear, up: Linear },
    Fused(Linear),
}

impl Mlp {
    pub fn load(
        w: &mut Weights,
        q: &QuantConfig,
        path: &str,
        dim: i32,
        hidden: i32,
        bias: bool,
        gelu: bool,
    ) -> Result<Mlp> {
        // One `gate_up_proj` where the checkpoint stores it so (Phi-3/4): `[gate; up]` rows.
        let fused = format!("{path}.gate_up_proj");
        // On a rank of a tensor-parallel group: its share of the hidden units, and down's
        // matching input columns, summed over the ranks.
        let tp = w.tensor_parallel().cloned();
        let part = match &tp {
            Some(tp) => Some(tp.share(hidden, "the MLP's hidden units")?),
            None => None,
        };
        let gate_up = if w.has(&format!("{fused}.weight")) {
            GateUp::Fused(match (&tp, part) {
                (Some(tp), Some(p)) => {
                    if bias {
                        return Err(ModelError::Parallel {
                            ranks: tp.size(),
                            message: format!("{fused} with a bias is not split yet"),
                        });
                    }
                    // A rank's hidden units of gate and of up: two runs of the rows.
                    let up = Part {
                        start: hidden + p.start,
                        len: p.len,
                    };
                    tensor_parallel::linear_rows(w, q, &fused, dim, 2 * hidden, &[p, up])?
                }
                _ => Linear::load(w, q, &fused, dim, 2 * hidden, bias)?,
            })
        } else {
            let mut proj = |name: &str| {
                let p = format!("{path}.{name}");
                tensor_parallel::linear(w, q, &p, dim, hidden, bias, part.map(Split::Rows))
            };
            let (gate, up) = (proj("gate_proj")?, proj("up_proj")?);
            match Linear::fuse([gate, up])? {
                Ok(both) => GateUp::Fused(both),
                Err([gate, up]) => GateUp::Separate { gate, up },
            }
        };
        let down_split = match (&tp, part) {
            (Some(tp), Some(p)) => Some(Split::Cols(p, tp.group())),
            _ => None,
        };
        let down = format!("{path}.down_proj");
        Ok(Mlp {
            gate_up,
            down: tensor_parallel::linear(w, q, &down, hidden, dim, bias, down_split)?,
            hidden: part.map_or(hidden, |p| p.len),
            gelu,
        })
    }

    pub fn forward(&self, x: &Array) -> Result<Array> {
        self.down.forward(&self.activated(x)?)
    }

    /// `x + mlp(norm(x))`: the pre-norm block, the norm inside the gate/up kernel on the fast
    /// path.
    pub fn forward_prenorm(&self, x: &Array, norm: &RmsNorm) -> Result<Array> {
        let a = match (&self.gate_up, self.gelu) {
            (GateUp::Fused(both), false) => both.forward_swiglu(x, self.hidden, Some(norm))?,
            _ => self.activated(&norm.forward(x)?)?,
        };
        self.down.forward_residual(&a, x)
    }

    /// `mlp(norm(x))` without the residual (a MoE layer's shared expert), the norm inside the
    /// gate/up kernel on the fast path.
    pub fn forward_of_norm(&self, x: &Array, norm: &RmsNorm) -> Result<Array> {
        let a = match (&self.gate_up, self.gelu) {
            (GateUp::Fused(both), false) => both.forward_swiglu(x, self.hidden, Some(norm))?,
            _ => self.activated(&norm.forward(x)?)?,
        };
        self.down.forward(&a)
    }

    /// The fused quantized `[gate; up]` and down weights of a bias-free SwiGLU MLP, and the
    /// hidden size, for the one-launch decoder layer.
    pub(crate) fn decode_parts(&self) -> Option<[(&Quantized, QuantSpec); 2]> {
        let (GateUp::Fused(gu), false) = (&self.gate_up, self.gelu) else {
            return None;
        };
        Some([gu.bias_free_quant()?, self.down.bias_free_quant()?])
    }

    pub(crate) fn hidden(&self) -> i32 {
        self.hidden
    }

    fn activated(&self, x: &Array) -> Result<Array> {
        Ok(match (&self.gate_up, self.gelu) {
            (GateUp::Fused(both), false) => both.forward_swiglu(x, self.hidden, None)?,
            (GateUp::Fused(both), true) => {
                let p = both.forward(x)?.split_at(&[self.hidden], -1)?;
                crate::layers::gelu_approx(&p[0])?.multiply(&p[1])?
            }
            (GateUp::Separate { gate, up }, gelu) => {
                let (g, u) = (gate.forward(x)?, up.forward(x)?);
                if gelu {
                    crate::layers::gelu_approx(&g)?.multiply(&u)?
                } else {
                    crate::layers::swiglu(&g, &u)?
                }
            }
        })
    }
}
