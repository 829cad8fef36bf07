//! The Gated DeltaNet token mixer of Qwen3-Next and Qwen3.5/3.6 (linear attention): input
//! projections, a short causal depthwise convolution whose last inputs the cache carries, q/k
//! L2-normalised, the gated delta rule over a recurrent `[heads, value dim, key dim]` state,
//! and an RMS norm gated by `z`. Op for op as mlx-lm's `qwen3_next.py` / `qwen3_5.py` and its
//! `gated_delta.py` reference recurrence (`gated_delta_ops`), which is what mlx-lm runs off
//! Metal; its Metal kernel computes the same rule.

use rmx_mlx::distributed::Group;
use rmx_mlx::quant::{QuantSpec, Quantized};
use rmx_mlx::{concatenate, fast, stack, Array, Dtype};

use crate::cache::LayerCache;
use crate::config::QuantConfig;
use crate::error::{ModelError, Result};
use crate::fastpath::DeltaStepWeights;
use crate::layers::{silu, Linear, RmsNorm};
use crate::tensor_parallel::{self, Part, Split};
use crate::weights::Weights;

/// The shape of a DeltaNet layer (the config's `linear_*` fields).
#[derive(Debug, Clone, Copy)]
pub struct DeltaNetShape {
    pub hidden: i32,
    pub k_heads: i32,
    pub v_heads: i32,
    pub k_dim: i32,
    pub v_dim: i32,
    pub conv_kernel: i32,
    pub eps: f32,
}

impl DeltaNetShape {
    pub(crate) fn key_dim(&self) -> i32 {
        self.k_heads * self.k_dim
    }
    pub(crate) fn value_dim(&self) -> i32 {
        self.v_heads * self.v_dim
    }
    pub(crate) fn conv_dim(&self) -> i32 {
        2 * self.key_dim() + self.value_dim()
    }

    /// Checks what the projections' split and the head repeat need.
    pub fn check(&self) -> Result<()> {
        let bad = |message: String| {
            Err(ModelError::Config {
                path: "config.json".into(),
                message,
            })
        };
        if self.k_heads < 1 || self.v_heads % self.k_heads != 0 {
            return bad(format!(
                "linear_num_value_heads ({}) must be a multiple of linear_num_key_heads ({})",
                self.v_heads, self.k_heads
            ));
        }
        if self.conv_kernel < 1 || self.k_dim < 1 || self.v_dim < 1 {
            return bad(format!(
                "linear_conv_kernel_dim ({}), linear_key_head_dim ({}) and linear_value_head_dim ({}) must be positive",
                self.conv_kernel, self.k_dim, self.v_dim
            ));
        }
        Ok(())
    }
}

/// The input projections: Qwen3.5's four, the same four joined into one product at load (the
/// CUDA fast path: one launch where a decode step ran four), or Qwen3-Next's two fused ones
/// whose outputs are interleaved per key head.
enum InProj {
    Joined(Linear),
    Split {
        qkv: Linear,
        z: Linear,
        b: Linear,
        a: Linear,
    },
    Fused {
        qkvz: Linear,
        ba: Linear,
    },
}

/// A tensor-parallel rank's heads of a DeltaNet layer (mlx-lm's qwen3_5 `shard()`).
struct HeadSplit {
    k: Part,
    v: Part,
    group: Group,
}

impl HeadSplit {
    /// This rank's channels of the projection's `[q | k | v]` rows and of the convolution:
    /// its key heads' q and k, its value heads' v.
    fn channels(&self, whole: &DeltaNetShape) -> [Part; 3] {
        let (kd, k) = (whole.key_dim(), self.k.scaled(whole.k_dim));
        [
            k,
            Part {
                start: kd + k.start,
                len: k.len,
            },
            Part {
                start: 2 * kd + self.v.start * whole.v_dim,
                len: self.v.len * whole.v_dim,
            },
        ]
    }
}

/// A DeltaNet layer's tensors for the one-launch layer kernel (`GatedDeltaNet::decode_parts`).
pub(crate) struct DeltaParts<'a> {
    /// The joined `[qkv | z | b | a]` input projection.
    pub proj: (&'a Quantized, QuantSpec),
    pub out: (&'a Quantized, QuantSpec),
    /// `[conv_dim, kernel, 1]`.
    pub conv: &'a Array,
    pub dt_bias: &'a Array,
    /// `-exp(A_log)`, float32.
    pub rate: &'a Array,
    pub norm: &'a Array,
    pub shape: DeltaNetShape,
    pub qk_eps: f32,
}

pub struct GatedDeltaNet {
    s: DeltaNetShape,
    proj: InProj,
    /// `[conv_dim, kernel, 1]`: one filter per channel.
    conv: Array,
    dt_bias: Array,
    /// `-exp(A_log)` in float32, made once at load (mlx-lm makes it at every call; same ops).
    rate: Array,
    norm: Array,
    out: Linear,
    /// The recurrence runs as rmx's CUDA kernel (fastpath::gated_delta), chosen at load.
    kernel: bool,
    /// A decode step runs as one kernel after the joined projection (fastpath::delta_step),
    /// chosen at load.
    step: bool,
}

/// What the projections give one chunk of tokens: the convolution's input `[B, S, conv_dim]`,
/// the gate `z` `[B, S, Hv, Dv]`, and `b`, `a` `[B, S, Hv]`.
struct Projected {
    qkv: Array,
    z: Array,
    b: Array,
    a: Array,
}

impl GatedDeltaNet {
    /// `fused`: Qwen3-Next's `in_proj_qkvz` / `in_proj_ba`; else Qwen3.5's four projections.
    pub fn load(
        w: &mut Weights,
        q: &QuantConfig,
        path: &str,
        s: DeltaNetShape,
        fused: bool,
    ) -> Result<GatedDeltaNet> {
        s.check()?;
        let whole = s;
        let (h, kd, vd, hv) = (s.hidden, s.key_dim(), s.value_dim(), s.v_heads);
        // On a rank of a tensor-parallel group, as mlx-lm's qwen3_5 `shard()`: its key and
        // value heads (their q, k, v channels of the projection and the convolution, z, b, a,
        // dt_bias, A_log), and the out projection's matching input columns summed over the
        // ranks. The output norm is per head, whole on every rank. A rank's value heads are
        // those its key heads serve (both shares are the rank's r-th of N).
        let tp = w.tensor_parallel().cloned();
        let split = match &tp {
            Some(tp) => Some(HeadSplit {
                k: tp.share(s.k_heads, "the linear attention's key heads")?,
                v: tp.share(s.v_heads, "the linear attention's value heads")?,
                group: tp.group().clone(),
            }),
            None => None,
        };
        let s = match &split {
            Some(sp) => DeltaNetShape {
                k_heads: sp.k.len,
                v_heads: sp.v.len,
                ..s
            },
            None => s,
        };
        let lin = |w: &mut Weights, name: &str, out: i32, rows: Option<Part>| {
            tensor_parallel::linear(
                w,
                q,
                &format!("{path}.{name}"),
                h,
                out,
                false,
                rows.map(Split::Rows),
            )
        };
        let step_fits = crate::fastpath::delta_step_fits(&s);
        let proj = if fused {
            // Qwen3-Next's rows are grouped by key head ([q, k, v.., z..] and [b.., a..] of
            // each), so a rank's key heads are one run of rows of each.
            let per = whole.v_heads / whole.k_heads;
            let (qkvz_rows, ba_rows) = match &split {
                Some(sp) => (
                    Some(sp.k.scaled(2 * whole.k_dim + 2 * per * whole.v_dim)),
                    Some(sp.k.scaled(2 * per)),
                ),
                None => (None, None),
            };
            InProj::Fused {
                qkvz: lin(w, "in_proj_qkvz", 2 * kd + 2 * vd, qkvz_rows)?,
                ba: lin(w, "in_proj_ba", 2 * hv, ba_rows)?,
            }
        } else {
            let qkv_path = format!("{path}.in_proj_qkv");
            let qkv = match &split {
                Some(sp) => tensor_parallel::linear_rows(
                    w,
                    q,
                    &qkv_path,
                    h,
                    2 * kd + vd,
                    &sp.channels(&whole),
                )?,
                None => Linear::load(w, q, &qkv_path, h, 2 * kd + vd, false)?,
            };
            let (z_rows, head_rows) = match &split {
                Some(sp) => (Some(sp.v.scaled(s.v_dim)), Some(sp.v)),
                None => (None, None),
            };
            let parts = [
                qkv,
                lin(w, "in_proj_z", vd, z_rows)?,
                lin(w, "in_proj_b", hv, head_rows)?,
                lin(w, "in_proj_a", hv, head_rows)?,
            ];
            // Joined only where the step kernel will read it: off the fast path the four stay
            // mlx-lm's four products (Linear::fuse also declines there).
            let joined = if step_fits {
                Linear::fuse(parts)?
            } else {
                Err(parts)
            };
            match joined {
                Ok(all) => InProj::Joined(all),
                Err([qkv, z, b, a]) => InProj::Split { qkv, z, b, a },
            }
        };
        let conv_name = format!("{path}.conv1d.weight");
        let conv_shape = [whole.conv_dim(), s.conv_kernel, 1];
        let per_head = |w: &mut Weights, name: &str| {
            let name = format!("{path}.{name}");
            match &split {
                Some(sp) => w.take_part(&name, &[hv], 0, sp.v),
                None => w.take(&name, &[hv]),
            }
        };
        let conv = match &split {
            Some(sp) => w.take_parts(&conv_name, &conv_shape, 0, &sp.channels(&whole))?,
            None => w.take(&conv_name, &conv_shape)?,
        };
        let dt_bias = per_head(w, "dt_bias")?;
        let rate = per_head(w, "A_log")?
            .astype(Dtype::F32)?
            .exp()?
            .negative()?;
        rate.eval()?;
        let norm = w.take(&format!("{path}.norm.weight"), &[s.v_dim])?;
        let step = matches!(proj, InProj::Joined(_))
            && dt_bias.dtype() == conv.dtype()
            && norm.dtype() == conv.dtype();
        Ok(GatedDeltaNet {
            proj,
            conv,
            dt_bias,
            rate,
            norm,
            out: tensor_parallel::linear(
                w,
                q,
                &format!("{path}.out_proj"),
                vd,
                h,
                false,
                split
                    .as_ref()
                    .map(|sp| Split::Cols(sp.v.scaled(s.v_dim), &sp.group)),
            )?,
            kernel: crate::fastpath::gated_delta_fits(s.k_dim),
            step,
            s,
        })
    }

    fn project(&self, x: &Array) -> Result<Projected> {
        let sh = x.shape();
        let (b_, l) = (sh[0], sh[1]);
        let s = &self.s;
        Ok(match &self.proj {
            InProj::Joined(all) => {
                let (c, vd) = (s.conv_dim(), s.value_dim());
                let p = all
                    .forward(x)?
                    .split_at(&[c, c + vd, c + vd + s.v_heads], -1)?;
                Projected {
                    qkv: p[0].clone(),
                    z: p[1].reshape(&[b_, l, s.v_heads, s.v_dim])?,
                    b: p[2].clone(),
                    a: p[3].clone(),
                }
            }
            InProj::Split { qkv, z, b, a } => Projected {
                qkv: qkv.forward(x)?,
                z: z.forward(x)?.reshape(&[b_, l, s.v_heads, s.v_dim])?,
                b: b.forward(x)?,
                a: a.forward(x)?,
            },
            InProj::Fused { qkvz, ba } => {
                // mlx-lm's fix_query_key_value_ordering: per key head [q, k, v..., z...].
                let (nk, dn, per) = (s.k_heads, s.k_dim, s.v_heads / s.k_heads);
                let mixed = qkvz.forward(x)?.reshape(&[b_, l, nk, -1])?;
                let p = mixed.split_at(&[dn, 2 * dn, 2 * dn + per * s.v_dim], -1)?;
                let mixed_ba = ba.forward(x)?.reshape(&[b_, l, nk, -1])?;
                let pba = mixed_ba.split_at(&[per], -1)?;
                let flat = |a: &Array| a.reshape(&[b_, l, -1]);
                let v = p[2].reshape(&[b_, l, -1, s.v_dim])?;
                Projected {
                    qkv: concatenate(&[&flat(&p[0])?, &flat(&p[1])?, &flat(&v)?], -1)?,
                    z: p[3].reshape(&[b_, l, -1, s.v_dim])?,
                    b: pba[0].reshape(&[b_, l, s.v_heads])?,
                    a: pba[1].reshape(&[b_, l, s.v_heads])?,
                }
            }
        })
    }

    /// What the one-launch layer kernel reads of this mixer (decode_layer/delta.rs): `None`
    /// unless a decode step takes the step kernel (so the projections are joined) and both
    /// projections are bias-free quantized.
    pub(crate) fn decode_parts(&self) -> Option<DeltaParts<'_>> {
        let (true, InProj::Joined(proj)) = (self.step, &self.proj) else {
            return None;
        };
        Some(DeltaParts {
            proj: proj.bias_free_quant()?,
            out: self.out.bias_free_quant()?,
            conv: &self.conv,
            dt_bias: &self.dt_bias,
            rate: &self.rate,
            norm: &self.norm,
            shape: self.s,
            qk_eps: qk_eps(self.s.k_dim),
        })
    }

    /// Whether the recurrence runs as rmx's CUDA kernel, for `rmx run -v`.
    pub fn uses_kernel(&self) -> bool {
        self.kernel
    }

    /// Whether a decode step runs as the one step kernel, for `rmx run -v`.
    pub fn uses_step_kernel(&self) -> bool {
        self.step
    }

    /// `x + mixer(norm(x))`, advancing `cache`. A decode step on the fast path is three launches:
    /// the joined projection with the norm folded in, the step kernel, and the out projection
    /// adding the residual.
    pub fn forward_prenorm(
        &self,
        x: &Array,
        norm: &RmsNorm,
        cache: &mut LayerCache,
    ) -> Result<Array> {
        // One token a sequence (a decode step) on the step kernel; anything else by `forward`.
        let (true, InProj::Joined(all), LayerCache::Recurrent(rc), 1) =
            (self.step, &self.proj, &mut *cache, x.dim(1))
        else {
            return Ok(x.add(&self.forward(&norm.forward(x)?, cache)?)?);
        };
        let s = &self.s;
        let b = x.dim(0);
        let proj = all.forward_prenorm(x, norm)?;
        let conv = match rc.conv.take() {
            Some(c) => c,
            None => Array::zeros(&[b, s.conv_kernel - 1, s.conv_dim()], x.dtype())?,
        };
        let state = match rc.state.take() {
            Some(st) => st,
            None => Array::zeros(&[b, s.v_heads, s.v_dim, s.k_dim], Dtype::F32)?,
        };
        let weights = DeltaStepWeights {
            conv: &self.conv,
            dt_bias: &self.dt_bias,
            rate: &self.rate,
            norm: &self.norm,
            eps: [s.eps, qk_eps(s.k_dim)],
        };
        let (y, conv, state) = crate::fastpath::delta_step(&proj, &conv, &state, &weights, s)?;
        rc.conv = Some(conv);
        rc.state = Some(state);
        rc.offset += 1;
        self.out.forward_residual(&y, x)
    }

    /// The mixer's output for `x` `[B, S, hidden]` (already normed), advancing `cache`.
    pub fn forward(&self, x: &Array, cache: &mut LayerCache) -> Result<Array> {
        let LayerCache::Recurrent(cache) = cache else {
            unreachable!("a DeltaNet layer got a KV cache (make_cache's bug)")
        };
        let s = &self.s;
        let sh = x.shape();
        let (b, l) = (sh[0], sh[1]);
        let p = self.project(x)?;
        let conv_state = match &cache.conv {
            Some(c) => c.clone(),
            None => Array::zeros(&[b, s.conv_kernel - 1, s.conv_dim()], x.dtype())?,
        };
        let conv_in = concatenate(&[&conv_state, &p.qkv], 1)?;
        let total = conv_in.dim(1);
        cache.conv = Some(
            conv_in
                .slice_axis(1, total - (s.conv_kernel - 1), total)?
                .contiguous()?,
        );
        let conv_out = silu(&conv_in.conv1d(&self.conv, 1, 0, 1, s.conv_dim())?)?;
        let parts = conv_out.split_at(&[s.key_dim(), 2 * s.key_dim()], -1)?;
        let q = parts[0].reshape(&[b, l, s.k_heads, s.k_dim])?;
        let k = parts[1].reshape(&[b, l, s.k_heads, s.k_dim])?;
        let v = parts[2].reshape(&[b, l, s.v_heads, s.v_dim])?;
        let (q, k) = normalize_qk(&q, &k, s.k_dim)?;
        let state = match cache.state.take() {
            Some(st) => st,
            None => Array::zeros(&[b, s.v_heads, s.v_dim, s.k_dim], Dtype::F32)?,
        };
        let beta = p.b.sigmoid()?;
        let g = self.decay(&p.a)?;
        let (y, state) = if self.kernel {
            crate::fastpath::gated_delta(&q, &k, &v, &g, &beta, &state)?
        } else {
            gated_delta(&q, &k, &v, &g, &beta, state)?
        };
        cache.state = Some(state);
        cache.offset += l;
        let y = self.gated_norm(&y, &p.z)?;
        self.out.forward(&y.reshape(&[b, l, -1])?)
    }

    /// mlx-lm's `compute_g`: `exp(-exp(A_log in float32) * softplus(a + dt_bias))`.
    fn decay(&self, a: &Array) -> Result<Array> {
        let softplus = a.add(&self.dt_bias)?.logaddexp_scalar(0.0)?;
        Ok(self.rate.multiply(&softplus)?.exp()?)
    }

    /// `Qwen3NextRMSNormGated`: `rms_norm(y) * silu(z)`, the product in float32.
    fn gated_norm(&self, y: &Array, z: &Array) -> Result<Array> {
        let x = fast::rms_norm(y, Some(&self.norm), self.s.eps)?;
        let gate = silu(&z.astype(Dtype::F32)?)?;
        Ok(gate.multiply(&x.astype(Dtype::F32)?)?.astype(y.dtype())?)
    }
}

/// mlx-lm's `normalize_qk`: L2 norms as RMS norms with the epsilon rescaled, and the
/// `Dk^-0.5` readout scale folded into q.
fn normalize_qk(q: &Array, k: &Array, k_dim: i32) -> Result<(Array, Array)> {
    let inv_scale = (k_dim as f64).powf(-0.5);
    let eps = qk_eps(k_dim);
    let q = fast::rms_norm(q, None, eps)?.multiply_scalar(inv_scale * inv_scale)?;
    let k = fast::rms_norm(k, None, eps)?.multiply_scalar(inv_scale)?;
    Ok((q, k))
}

/// The q/k RMS norms' epsilon: an L2 norm's 1e-6 rescaled by `1 / k_dim`.
fn qk_eps(k_dim: i32) -> f32 {
    let inv_scale = (k_dim as f64).powf(-0.5);
    (1e-6 * inv_scale * inv_scale) as f32
}

/// The gated delta rule token by token (mlx-lm's `gated_delta_ops`): q, k `[B, T, Hk, Dk]`,
/// v `[B, T, Hv, Dv]`, g and beta `[B, T, Hv]`, state `[B, Hv, Dv, Dk]` (float32). Returns
/// `y` `[B, T, Hv, Dv]` in q's dtype and the new state.
fn gated_delta(
    q: &Array,
    k: &Array,
    v: &Array,
    g: &Array,
    beta: &Array,
    mut state: Array,
) -> Result<(Array, Array)> {
    let (hk, hv) = (q.dim(2), v.dim(2));
    let (q, k) = if hv / hk > 1 {
        (q.repeat(hv / hk, -2)?, k.repeat(hv / hk, -2)?)
    } else {
        (q.clone(), k.clone())
    };
    let at = |a: &Array, t: i32| -> Result<Array> { Ok(a.slice_axis(1, t, t + 1)?.squeeze(&[1])?) };
    let mut ys = Vec::with_capacity(q.dim(1) as usize);
    for t in 0..q.dim(1) {
        let (qt, kt, vt) = (at(&q, t)?, at(&k, t)?, at(v, t)?);
        let (gt, bt) = (at(g, t)?, at(beta, t)?);
        state = state.multiply(&gt.expand_dims(&[-1, -2])?)?;
        let k_row = kt.expand_dims(&[-2])?;
        let kv_mem = state.multiply(&k_row)?.sum(&[-1], false)?;
        let delta = vt.subtract(&kv_mem)?.multiply(&bt.expand_dims(&[-1])?)?;
        state = state.add(&k_row.multiply(&delta.expand_dims(&[-1])?)?)?;
        let y = state.multiply(&qt.expand_dims(&[-2])?)?.sum(&[-1], false)?;
        ys.push(y.astype(q.dtype())?);
    }
    let refs: Vec<&Array> = ys.iter().collect();
    Ok((stack(&refs, 1)?, state))
}
