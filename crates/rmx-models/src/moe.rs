//! Mixture-of-experts feed-forward blocks, as mlx-lm's `switch_layers.py` computes them: the
//! experts' weights stacked `[experts, out, in]` (dense or quantized), each token's chosen
//! experts multiplied through MLX's `gather_mm` / `gather_qmm`, and the two routers that the
//! families here use (Qwen3-MoE's softmax-then-top-k, GPT-OSS's top-k-then-softmax).

use rmx_mlx::distributed::Group;
use rmx_mlx::quant::{self, QuantSpec, Quantized};
use rmx_mlx::{gather_mm, Array, Backend, Dtype};

use crate::attention::Mlp;
use crate::config::QuantConfig;
use crate::error::{ModelError, Result};
use crate::layers::{swiglu, Linear, RmsNorm};
use crate::parallel::{Parallel, Part};
use crate::weights::Weights;

/// mlx-lm sorts the (token, expert) pairs by expert from this many pairs on, so each expert's
/// rows are read together (`do_sort = indices.size >= 64`).
const SORT_FROM: usize = 64;

/// One projection of every expert (mlx-lm's `SwitchLinear` / `QuantizedSwitchLinear`).
pub struct SwitchLinear {
    weight: SwitchWeight,
    /// `[experts, out]`.
    bias: Option<Array>,
}

enum SwitchWeight {
    /// `[experts, in, out]`: the stored `[experts, out, in]` with its last axes swapped.
    Dense(Array),
    Quant(Quantized, QuantSpec),
}

/// How one rank of a tensor-parallel group holds the experts' projections (mlx-lm's
/// `shard_inplace` of a `SwitchLinear`): every expert, each one's share of the rows or columns.
#[derive(Clone, Copy)]
pub(crate) enum ExpertSplit {
    /// Each expert's output rows `Part` (gate and up: "all-to-sharded").
    Rows(Part),
    /// Each expert's input columns `Part` (down: "sharded-to-all"); the block's output is summed
    /// over the ranks after the experts are combined. `bias`: this rank adds the experts' biases
    /// (one rank does, so the sum has them once).
    Cols { part: Part, bias: bool },
}

impl SwitchLinear {
    /// Loads `path.weight` as `[experts, out, in]` (quantized when `path.scales` exists), whole
    /// or this rank's `split` of it (read from the file in part: only its slices of every
    /// expert).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn load(
        w: &mut Weights,
        q: &QuantConfig,
        path: &str,
        experts: i32,
        inp: i32,
        out: i32,
        bias: bool,
        split: Option<ExpertSplit>,
    ) -> Result<SwitchLinear> {
        let bias_name = format!("{path}.bias");
        let bias = match (bias, split) {
            (false, _) => None,
            (true, None) => Some(w.take(&bias_name, &[experts, out])?),
            (true, Some(ExpertSplit::Rows(p))) => {
                Some(w.take_part(&bias_name, &[experts, out], 1, p)?)
            }
            (true, Some(ExpertSplit::Cols { bias: mine, .. })) => {
                // Taken either way (never read where unused), so no tensor is left over.
                let b = w.take(&bias_name, &[experts, out])?;
                mine.then_some(b)
            }
        };
        let (axis, part) = match split {
            None => (1, Part { start: 0, len: out }),
            Some(ExpertSplit::Rows(p)) => (1, p),
            Some(ExpertSplit::Cols { part, .. }) => (2, part),
        };
        let weight = match crate::layers::spec_for(w, q, path)? {
            Some(spec) => SwitchWeight::Quant(
                crate::tensor_parallel::quantized_part(
                    w,
                    path,
                    &[experts],
                    inp,
                    out,
                    spec,
                    axis,
                    &[part],
                )?,
                spec,
            ),
            None => SwitchWeight::Dense(
                w.take_part(&format!("{path}.weight"), &[experts, out, inp], axis, part)?
                    .swapaxes(-1, -2)?,
            ),
        };
        Ok(SwitchLinear { weight, bias })
    }

    /// `x @ W[idx]^T (+ b[idx])` for `x` `[..., 1, in]` and expert ids `idx`.
    fn forward(&self, x: &Array, idx: &Array, sorted: bool) -> Result<Array> {
        let y = match &self.weight {
            SwitchWeight::Dense(w_t) => dense_gather_mm(x, w_t, idx, sorted)?,
            SwitchWeight::Quant(q, spec) if sorted && dequant_experts(x, q.weight.dim(0)) => {
                let w_t = quant::dequantize(q, *spec, Some(x.dtype()))?.swapaxes(-1, -2)?;
                gather_mm(x, &w_t, None, Some(idx), true)?
            }
            SwitchWeight::Quant(q, spec) => {
                quant::gather_qmm(x, q, *spec, None, Some(idx), true, sorted)?
            }
        };
        Ok(match &self.bias {
            Some(b) => y.add(&b.take(idx, 0)?.expand_dims(&[-2])?)?,
            None => y,
        })
    }
}

/// A prompt's quantized expert products go through a dense grouped GEMM (CUDA fast path, where
/// `dequant_prefill_rows` is on): every expert dequantized, then MLX's `gather_mm` over the
/// (token, expert) rows sorted by expert, which CUDA runs as one CUTLASS grouped GEMM. MLX's
/// `gather_qmm` multiplies such rows one at a time (a tensor-core tile per row), which held a 2K
/// prompt of Qwen3-30B-A3B to mlx-lm's ~1,400 tok/s (docs/perf.md, session 8). Dequantizing
/// costs one pass over all experts, so it pays from a couple of rows per expert on.
fn dequant_experts(x: &Array, experts: i32) -> bool {
    let pairs = crate::fastpath::rows(x);
    crate::fastpath::fast_path()
        .dequant_prefill_rows
        .is_some_and(|min| pairs >= min && pairs >= 2 * experts.max(0) as usize)
}

/// `gather_mm` of dense experts. MLX 0.32.4's CPU `gather_mm` takes float32 only, so there
/// bf16/f16 experts are multiplied in float32 and rounded back; the CPU reference runs of
/// mlx-lm do the same (tests/py/tiny_models.py), so both sides compute the same numbers.
fn dense_gather_mm(x: &Array, w_t: &Array, idx: &Array, sorted: bool) -> Result<Array> {
    let dtype = x.dtype();
    if rmx_mlx::backend() == Backend::Cpu && dtype != Dtype::F32 {
        let y = gather_mm(
            &x.astype(Dtype::F32)?,
            &w_t.astype(Dtype::F32)?,
            None,
            Some(idx),
            sorted,
        )?;
        return Ok(y.astype(dtype)?);
    }
    Ok(gather_mm(x, w_t, None, Some(idx), sorted)?)
}

/// The gated activation between the experts' up and down projections.
#[derive(Clone, Copy)]
pub enum ExpertActivation {
    /// `silu(gate) * up`.
    SwiGlu,
    /// GPT-OSS's clamped form: `(clip(up, -l, l) + 1) * g * sigmoid(alpha * g)` with
    /// `g = min(gate, l)` (mlx-lm's `swiglu_oai`).
    SwiGluOai { alpha: f64, limit: f64 },
    /// `gelu_approx(gate) * up` (Gemma 4).
    GeGlu,
}

impl ExpertActivation {
    fn apply(self, up: &Array, gate: &Array) -> Result<Array> {
        match self {
            ExpertActivation::SwiGlu => swiglu(gate, up),
            ExpertActivation::SwiGluOai { alpha, limit } => {
                let g = gate.minimum_scalar(limit)?;
                let x = up.maximum_scalar(-limit)?.minimum_scalar(limit)?;
                let glu = g.multiply(&g.multiply_scalar(alpha)?.sigmoid()?)?;
                Ok(x.add_scalar(1.0)?.multiply(&glu)?)
            }
            ExpertActivation::GeGlu => Ok(crate::layers::gelu_approx(gate)?.multiply(up)?),
        }
    }
}

/// Every expert's gated MLP (mlx-lm's `SwitchGLU`).
pub struct SwitchGlu {
    gate_up: GateUp,
    down: SwitchLinear,
    act: ExpertActivation,
}

/// The experts' gate and up projections: as stored, or (CUDA fast path, chosen at load) fused
/// per expert into `[E, 2F, in]` with gate's rows first, which a decode step's kernel reads in
/// one launch (moe_kernels.rs) and a prompt's `gather_qmm` in one product.
enum GateUp {
    Separate {
        gate: SwitchLinear,
        up: SwitchLinear,
    },
    Fused {
        both: SwitchLinear,
        hidden: i32,
    },
}

impl GateUp {
    fn new(
        gate: SwitchLinear,
        up: SwitchLinear,
        hidden: i32,
        dim: i32,
        act: ExpertActivation,
    ) -> Result<GateUp> {
        // The kernels take Qwen's bias-free SwiGLU experts and GPT-OSS's biased swiglu_oai ones.
        let kernel_act = match act {
            ExpertActivation::SwiGlu => gate.bias.is_none() && up.bias.is_none(),
            ExpertActivation::SwiGluOai { .. } => gate.bias.is_some() && up.bias.is_some(),
            ExpertActivation::GeGlu => false,
        };
        let fusable = match (&gate.weight, &up.weight) {
            (SwitchWeight::Quant(g, gs), SwitchWeight::Quant(u, us)) => {
                // mxfp4 experts: for the layer kernel's expert phases only (the per-op expert
                // kernels are affine), while those are measured (`RMX_LAYER_MXFP4`).
                let mx = gs.mode == quant::QuantMode::Mxfp4
                    && crate::fastpath::fast_path().layer_mxfp4_experts
                    && dim % gs.group_size == 0;
                kernel_act
                    && gs == us
                    && (mx
                        || (crate::moe_kernels::fits(*gs, g, dim)
                            && crate::moe_kernels::fits(*us, u, dim)))
            }
            _ => false,
        };
        if !fusable {
            return Ok(GateUp::Separate { gate, up });
        }
        let cat = |a: &Array, b: &Array| rmx_mlx::concatenate(&[a, b], 1);
        let bias = match (&gate.bias, &up.bias) {
            (Some(a), Some(b)) => Some(cat(a, b)?),
            _ => None,
        };
        let (SwitchWeight::Quant(g, spec), SwitchWeight::Quant(u, _)) = (gate.weight, up.weight)
        else {
            unreachable!("checked above")
        };
        let both = Quantized {
            weight: cat(&g.weight, &u.weight)?,
            scales: cat(&g.scales, &u.scales)?,
            biases: match (&g.biases, &u.biases) {
                (Some(a), Some(b)) => Some(cat(a, b)?),
                _ => None,
            },
        };
        let mut all = vec![&both.weight, &both.scales];
        all.extend(both.biases.as_ref());
        all.extend(bias.as_ref());
        rmx_mlx::eval(&all)?;
        Ok(GateUp::Fused {
            both: SwitchLinear {
                weight: SwitchWeight::Quant(both, spec),
                bias,
            },
            hidden,
        })
    }

    /// (up, gate) of the chosen experts.
    fn forward(&self, x: &Array, idx: &Array, sorted: bool) -> Result<(Array, Array)> {
        match self {
            GateUp::Separate { gate, up } => {
                Ok((up.forward(x, idx, sorted)?, gate.forward(x, idx, sorted)?))
            }
            GateUp::Fused { both, hidden } => {
                let mut p = both
                    .forward(x, idx, sorted)?
                    .split_at(&[*hidden], -1)?
                    .into_iter();
                let (Some(g), Some(u)) = (p.next(), p.next()) else {
                    unreachable!("split in two")
                };
                Ok((u, g))
            }
        }
    }
}

impl SwitchGlu {
    /// Loads `path.{gate,up,down}_proj`: stacked as mlx-lm writes them, or (unquantized
    /// checkpoints straight from transformers) one tensor per expert, stacked here as mlx-lm's
    /// `sanitize` does.
    #[allow(clippy::too_many_arguments)]
    pub fn load(
        w: &mut Weights,
        q: &QuantConfig,
        path: &str,
        experts: i32,
        dim: i32,
        hidden: i32,
        bias: bool,
        act: ExpertActivation,
    ) -> Result<SwitchGlu> {
        SwitchGlu::load_split(w, q, path, experts, dim, hidden, bias, act, None)
    }

    /// [`SwitchGlu::load`], or on rank `tp.rank()` of a tensor-parallel group its share of
    /// every expert, as mlx-lm's `shard()` splits them: gate and up by output rows (each rank
    /// its slice of every expert's `hidden` units), down by the matching input columns. The
    /// experts' output is then a partial sum, which [`SparseMoe`] sums over the ranks after
    /// combining the experts. Per-expert checkpoints are stacked whole first, then sliced
    /// (read whole once; mlx-lm's conversions are stacked).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn load_split(
        w: &mut Weights,
        q: &QuantConfig,
        path: &str,
        experts: i32,
        dim: i32,
        hidden: i32,
        bias: bool,
        act: ExpertActivation,
        tp: Option<&Parallel>,
    ) -> Result<SwitchGlu> {
        let experts_dir = path.rsplit_once('.').map_or(path, |(p, _)| p);
        for name in ["gate_proj", "up_proj", "down_proj"] {
            stack_per_expert(w, experts_dir, path, name, experts)?;
        }
        let part = match tp {
            Some(tp) => Some(tp.share(hidden, "the experts' hidden units")?),
            None => None,
        };
        let rows = part.map(ExpertSplit::Rows);
        let cols = match (tp, part) {
            (Some(tp), Some(part)) => Some(ExpertSplit::Cols {
                part,
                bias: tp.rank == 0,
            }),
            _ => None,
        };
        let proj = |w: &mut Weights, name: &str, inp, out, split| {
            SwitchLinear::load(
                w,
                q,
                &format!("{path}.{name}"),
                experts,
                inp,
                out,
                bias,
                split,
            )
        };
        let gate = proj(w, "gate_proj", dim, hidden, rows)?;
        let up = proj(w, "up_proj", dim, hidden, rows)?;
        let local = part.map_or(hidden, |p| p.len);
        Ok(SwitchGlu {
            gate_up: GateUp::new(gate, up, local, dim, act)?,
            down: proj(w, "down_proj", hidden, dim, cols)?,
            act,
        })
    }

    /// The bytes of its weights (gate, up and down, with scales and biases).
    #[cfg(test)]
    pub(crate) fn nbytes(&self) -> usize {
        let one = |l: &SwitchLinear| {
            let w = match &l.weight {
                SwitchWeight::Dense(a) => a.nbytes(),
                SwitchWeight::Quant(q, _) => {
                    q.weight.nbytes()
                        + q.scales.nbytes()
                        + q.biases.as_ref().map_or(0, Array::nbytes)
                }
            };
            w + l.bias.as_ref().map_or(0, Array::nbytes)
        };
        let gate_up = match &self.gate_up {
            GateUp::Separate { gate, up } => one(gate) + one(up),
            GateUp::Fused { both, .. } => one(both),
        };
        gate_up + one(&self.down)
    }

    /// `x` `[..., dim]`, expert ids `[..., k]` -> each chosen expert's output `[..., k, dim]`.
    pub fn forward(&self, x: &Array, indices: &Array) -> Result<Array> {
        let x = x.expand_dims(&[-2, -3])?;
        let idx_shape = indices.shape();
        if indices.size() < SORT_FROM {
            let (up, gate) = self.gate_up.forward(&x, indices, false)?;
            let y = self
                .down
                .forward(&self.act.apply(&up, &gate)?, indices, false)?;
            return Ok(y.squeeze(&[-2])?);
        }
        // mlx-lm's `_gather_sort`: one row per (token, expert) pair, ordered by expert.
        let k = idx_shape[idx_shape.len() - 1];
        let flat = indices.flatten()?;
        let order = flat.argsort(-1)?;
        let inv_order = order.argsort(-1)?;
        let s = x.shape();
        let rows = x.reshape(&[-1, s[s.len() - 2], s[s.len() - 1]])?;
        let x = rows.take(&order.floor_divide_scalar(k as f64)?, 0)?;
        let idx = flat.take(&order, 0)?;
        let (up, gate) = self.gate_up.forward(&x, &idx, true)?;
        let y = self
            .down
            .forward(&self.act.apply(&up, &gate)?, &idx, true)?;
        let y = y.take(&inv_order, 0)?;
        let ys = y.shape();
        let shape: Vec<i32> = idx_shape.iter().chain(&ys[1..]).copied().collect();
        Ok(y.reshape(&shape)?.squeeze(&[-2])?)
    }
}

impl SwitchGlu {
    /// The dtype of the fused gate/up's linear bias (the activations' dtype: an mxfp4 expert's
    /// scales are bytes), when gate/up are fused with one (GPT-OSS).
    fn fused_bias_dtype(&self) -> Option<Dtype> {
        match &self.gate_up {
            GateUp::Fused {
                both: SwitchLinear { bias: Some(b), .. },
                ..
            } => Some(b.dtype()),
            _ => None,
        }
    }

    /// One token's output through rmx's two kernels, `scores`-weighted and summed over the
    /// chosen experts `idx` (`[.., k]`): `[.., dim]`; of `rms_norm(x)` with `norm`'s weight and
    /// epsilon, and plus `res`, where given. `None` where they do not apply (not the fused CUDA
    /// path, several tokens, a down projection the kernel cannot read).
    pub fn decode_kernel(
        &self,
        x: &Array,
        idx: &Array,
        scores: &Array,
        norm: Option<(&Array, f32)>,
        res: Option<&Array>,
    ) -> Result<Option<Array>> {
        let (
            GateUp::Fused { both, hidden },
            SwitchLinear {
                weight: SwitchWeight::Quant(down, dspec),
                bias: down_bias,
            },
        ) = (&self.gate_up, &self.down)
        else {
            return Ok(None);
        };
        let SwitchWeight::Quant(both_q, spec) = &both.weight else {
            return Ok(None);
        };
        let oai = match (self.act, &both.bias) {
            (ExpertActivation::SwiGlu, None) => None,
            (ExpertActivation::SwiGluOai { alpha, limit }, Some(bias)) => {
                Some(crate::moe_kernels::Oai {
                    bias,
                    alpha: alpha as f32,
                    limit: limit as f32,
                })
            }
            _ => return Ok(None),
        };
        let dim = x.dim(-1);
        if x.size() != dim as usize
            || !crate::moe_kernels::fits(*dspec, down, *hidden)
            || norm.is_some_and(|(w, _)| w.dtype() != x.dtype() || w.size() != dim as usize)
            || res.is_some_and(|r| r.dtype() != x.dtype() || r.size() != dim as usize)
        {
            return Ok(None);
        }
        let act = crate::moe_kernels::gate_up(x, both_q, *spec, idx, *hidden, oai, norm)?;
        let y = crate::moe_kernels::down(
            &act,
            down,
            *dspec,
            idx,
            scores,
            dim,
            down_bias.as_ref(),
            res,
        )?;
        Ok(Some(y.reshape(&x.shape())?))
    }
}

/// A quantized product as the layer kernel reads it: weights, scales, biases and their spec.
pub(crate) type QuantPart<'a> = (&'a Quantized, QuantSpec);

/// A MoE block's tensors for the layer kernel's expert phases (decode_layer/moe.rs): experts
/// fused at load, a quantized router, and either Qwen's bias-free SwiGLU experts with
/// softmax-then-top-k routing and the shared expert where it has one, or GPT-OSS's biased
/// products, swiglu_oai and top-k-then-softmax (`oai`).
pub(crate) struct MoeParts<'a> {
    pub router: QuantPart<'a>,
    /// `[E, 2F, hid]`, gate rows first.
    pub gate_up: QuantPart<'a>,
    /// `[E, hid, F]`.
    pub down: QuantPart<'a>,
    pub experts: i32,
    pub top_k: i32,
    /// An expert's hidden size F.
    pub hidden: i32,
    /// `moe_route`'s MODE ([`Routing::kernel_mode`]).
    pub mode: i32,
    /// The shared expert's gate (`[1, hid]`), its fused `[gate; up]` and down, its hidden size.
    pub shared: Option<(QuantPart<'a>, [QuantPart<'a>; 2], i32)>,
    /// GPT-OSS: the router's linear bias `[E]`, the experts' gate/up biases `[E, 2F]` and down
    /// biases `[E, hid]`, and swiglu_oai's `[alpha, limit]` in the activations' dtype.
    pub oai: Option<[&'a Array; 4]>,
}

impl SparseMoe {
    /// The block's tensors for the layer kernel, or `None` where it does not take them (dense
    /// or unfused experts, a router that is not quantized, a tensor-parallel rank's partial
    /// experts).
    pub(crate) fn decode_parts(&self) -> Option<MoeParts<'_>> {
        let (
            GateUp::Fused { both, hidden },
            SwitchLinear {
                weight: SwitchWeight::Quant(down, dspec),
                bias: down_bias,
            },
        ) = (&self.experts.gate_up, &self.experts.down)
        else {
            return None;
        };
        let SwitchLinear {
            weight: SwitchWeight::Quant(gu, spec),
            bias: gu_bias,
        } = both
        else {
            return None;
        };
        if self.group.is_some() {
            return None;
        }
        let (router, router_bias) = self.router.quant()?;
        let oai = match (self.routing, self.experts.act) {
            (Routing::SoftmaxTopK { .. }, ExpertActivation::SwiGlu) => {
                if router_bias.is_some() || gu_bias.is_some() || down_bias.is_some() {
                    return None;
                }
                None
            }
            (Routing::TopKSoftmax, ExpertActivation::SwiGluOai { .. }) => Some([
                router_bias?,
                gu_bias.as_ref()?,
                down_bias.as_ref()?,
                self.oai_consts.as_ref()?,
            ]),
            _ => return None,
        };
        let shared = match &self.shared {
            Some(s) => Some((
                s.gate.bias_free_quant()?,
                s.mlp.decode_parts()?,
                s.mlp.hidden(),
            )),
            None => None,
        };
        Some(MoeParts {
            router,
            gate_up: (gu, *spec),
            down: (down, *dspec),
            experts: self.num_experts,
            top_k: self.top_k,
            hidden: *hidden,
            mode: self.routing.kernel_mode(),
            shared,
            oai,
        })
    }
}

/// Stacks `dir.{0..experts}.name.weight` into `path.name.weight`, when the checkpoint has one
/// tensor per expert.
fn stack_per_expert(
    w: &mut Weights,
    dir: &str,
    path: &str,
    name: &str,
    experts: i32,
) -> Result<()> {
    let first = format!("{dir}.experts.0.{name}.weight");
    let first_alt = format!("{path}.0.{name}.weight");
    let prefix = if w.has(&first) {
        format!("{dir}.experts")
    } else if w.has(&first_alt) {
        path.to_string()
    } else {
        return Ok(());
    };
    let file = w.file_of(&format!("{prefix}.0.{name}.weight")).unwrap_or(0);
    let mut parts = Vec::with_capacity(experts as usize);
    for e in 0..experts {
        parts.push(w.take(&format!("{prefix}.{e}.{name}.weight"), &[-1, -1])?);
    }
    let refs: Vec<&Array> = parts.iter().collect();
    w.insert(
        &format!("{path}.{name}.weight"),
        rmx_mlx::stack(&refs, 0)?,
        file,
    );
    Ok(())
}

/// How a router turns its logits into the chosen experts and their weights.
#[derive(Clone, Copy)]
pub enum Routing {
    /// Qwen3-MoE: softmax over all experts (in float32), the top k, optionally renormalized
    /// to sum to one (`norm_topk_prob`).
    SoftmaxTopK { normalize: bool },
    /// GPT-OSS: the top k logits, then a softmax over those k.
    TopKSoftmax,
}

impl Routing {
    /// `moe_route`'s MODE (kernels/route.cuh) for this routing.
    pub(crate) fn kernel_mode(self) -> i32 {
        match self {
            Routing::SoftmaxTopK { normalize: false } => 0,
            Routing::SoftmaxTopK { normalize: true } => 1,
            Routing::TopKSoftmax => 2,
        }
    }
}

/// An expert every token goes through, scaled by a sigmoid gate of its own (Qwen3-Next,
/// Qwen3.5-MoE): `sigmoid(gate(x)) * mlp(x)`.
pub struct SharedExpert {
    pub mlp: Mlp,
    pub gate: Linear,
}

/// A routed mixture of experts: router, experts, and how the two combine.
pub struct SparseMoe {
    router: Linear,
    experts: SwitchGlu,
    num_experts: i32,
    top_k: i32,
    routing: Routing,
    shared: Option<SharedExpert>,
    /// On a rank of a tensor-parallel group: the group its experts are split over
    /// ([`SwitchGlu::load_split`]); the combined experts' output is summed over it.
    group: Option<Group>,
    /// swiglu_oai's `[alpha, limit]` in the experts' dtype, for the layer kernel (GPT-OSS's
    /// experts fused at load).
    oai_consts: Option<Array>,
}

impl SparseMoe {
    pub fn new(
        router: Linear,
        experts: SwitchGlu,
        num_experts: i32,
        top_k: i32,
        routing: Routing,
    ) -> Result<SparseMoe> {
        if top_k < 1 || top_k > num_experts {
            return Err(ModelError::Config {
                path: "config.json".into(),
                message: format!(
                    "num_experts_per_tok {top_k} must be between 1 and the number of experts ({num_experts})"
                ),
            });
        }
        let oai_consts = match (experts.act, experts.fused_bias_dtype()) {
            (ExpertActivation::SwiGluOai { alpha, limit }, Some(dtype)) => {
                let c = Array::from_slice(&[alpha as f32, limit as f32], &[2])?.astype(dtype)?;
                rmx_mlx::eval(&[&c])?;
                Some(c)
            }
            _ => None,
        };
        Ok(SparseMoe {
            router,
            experts,
            num_experts,
            top_k,
            routing,
            shared: None,
            group: None,
            oai_consts,
        })
    }

    /// Qwen's layout under `path`: a bias-free router `gate` and SwiGLU experts `switch_mlp`
    /// of `hidden` each, softmax-then-top-k routing (Qwen3-MoE, Qwen3-Next, Qwen3.5-MoE). On a
    /// rank of a tensor-parallel group the experts are split and the router kept whole, as
    /// mlx-lm's `qwen3_moe.shard()` does.
    #[allow(clippy::too_many_arguments)]
    pub fn load_qwen(
        w: &mut Weights,
        q: &QuantConfig,
        path: &str,
        dim: i32,
        experts: i32,
        top_k: i32,
        hidden: i32,
        normalize: bool,
    ) -> Result<SparseMoe> {
        let tp = w.tensor_parallel().cloned();
        let router = Linear::load(w, q, &format!("{path}.gate"), dim, experts, false)?;
        let switch = SwitchGlu::load_split(
            w,
            q,
            &format!("{path}.switch_mlp"),
            experts,
            dim,
            hidden,
            false,
            ExpertActivation::SwiGlu,
            tp.as_ref(),
        )?;
        let moe = SparseMoe::new(
            router,
            switch,
            experts,
            top_k,
            Routing::SoftmaxTopK { normalize },
        )?;
        Ok(match tp {
            Some(tp) => moe.split_over(tp.group().clone()),
            None => moe,
        })
    }

    /// Marks the experts as split over `group` ([`SwitchGlu::load_split`]): each rank's
    /// combined experts are a partial sum, summed over the ranks.
    pub(crate) fn split_over(mut self, group: Group) -> SparseMoe {
        self.group = Some(group);
        self
    }

    /// Whether a decode step runs rmx's expert kernels (the gate/up fused at load for them).
    pub fn uses_kernels(&self) -> bool {
        matches!(self.experts.gate_up, GateUp::Fused { .. })
    }

    pub fn with_shared(mut self, shared: SharedExpert) -> SparseMoe {
        self.shared = Some(shared);
        self
    }

    /// The indices of the `k` largest entries of the last axis, as mlx-lm takes them
    /// (`argpartition(a, kth=-k)[..., -k:]`), and those entries.
    fn top_k(&self, a: &Array) -> Result<(Array, Array)> {
        let (n, k) = (self.num_experts, self.top_k);
        let inds = a.argpartition(n - k, -1)?.slice_axis(-1, n - k, n)?;
        let vals = a.take_along_axis(&inds, -1)?;
        Ok((inds, vals))
    }

    /// `x + moe(norm(x))`. A decode step on the fast path is one launch of the layer kernel's
    /// expert phases (decode_layer/moe.rs), or where that does not apply four launches (the
    /// router's product with the norm folded in, its choice, the experts' gate/up with the norm
    /// folded in, their down products adding the residual), where MLX's ops take ~12; a shared
    /// expert adds its own products to the residual first.
    pub fn forward_prenorm(&self, x: &Array, norm: &RmsNorm) -> Result<Array> {
        if let Some(y) = self.decode_prenorm(x, norm)? {
            return Ok(y);
        }
        Ok(x.add(&self.forward(&norm.forward(x)?)?)?)
    }

    fn decode_prenorm(&self, x: &Array, norm: &RmsNorm) -> Result<Option<Array>> {
        // A rank's experts are a partial sum, summed over the group before the residual.
        if self.group.is_some() || !self.uses_kernels() || x.size() != x.dim(-1) as usize {
            return Ok(None);
        }
        // The whole block as one launch of the layer kernel's expert phases, where it applies.
        if let Some(y) = crate::decode_layer::moe_forward(self, x, norm)? {
            return Ok(Some(y));
        }
        let logits = self.router.forward_prenorm(x, norm)?;
        let (inds, scores) = self.choose(&logits)?;
        let res = match &self.shared {
            Some(s) => {
                let gate = s.gate.forward_prenorm(x, norm)?.sigmoid()?;
                x.add(&gate.multiply(&s.mlp.forward_of_norm(x, norm)?)?)?
            }
            None => x.clone(),
        };
        self.experts
            .decode_kernel(x, &inds, &scores, Some(norm.parts()), Some(&res))
    }

    pub fn forward(&self, x: &Array) -> Result<Array> {
        let y = self.routed(x)?;
        // One sum per block, after the experts are weighted and combined (either path of
        // `routed`, the CUDA kernels' included: they combine this rank's slices only).
        let y = match &self.group {
            Some(g) => g.all_sum(&y)?,
            None => y,
        };
        let Some(s) = &self.shared else {
            return Ok(y);
        };
        let shared = s.gate.forward(x)?.sigmoid()?.multiply(&s.mlp.forward(x)?)?;
        Ok(y.add(&shared)?)
    }

    fn routed(&self, x: &Array) -> Result<Array> {
        let logits = self.router.forward(x)?;
        let (inds, scores) = self.choose(&logits)?;
        if let Some(y) = self.experts.decode_kernel(x, &inds, &scores, None, None)? {
            return Ok(y);
        }
        let y = self.experts.forward(x, &inds)?;
        let weighted = y.multiply(&scores.expand_dims(&[-1])?)?.sum(&[-2], false)?;
        Ok(match self.routing {
            Routing::SoftmaxTopK { .. } => weighted.astype(y.dtype())?,
            Routing::TopKSoftmax => weighted,
        })
    }

    /// The chosen experts' ids and weights: one token's by the router kernel where the expert
    /// kernels run (moe_kernels::route), else by `route`.
    fn choose(&self, logits: &Array) -> Result<(Array, Array)> {
        if self.uses_kernels() {
            if let Some(r) = crate::moe_kernels::route(logits, self.top_k, self.routing)? {
                return Ok(r);
            }
        }
        self.route(logits)
    }

    /// The chosen experts' ids and weights by MLX's ops, as mlx-lm routes.
    fn route(&self, logits: &Array) -> Result<(Array, Array)> {
        Ok(match self.routing {
            Routing::SoftmaxTopK { normalize } => {
                let gates = logits.softmax(&[-1], true)?;
                let (inds, scores) = self.top_k(&gates)?;
                if normalize {
                    let total = scores.sum(&[-1], true)?;
                    (inds, scores.divide(&total)?)
                } else {
                    (inds, scores)
                }
            }
            Routing::TopKSoftmax => {
                let (inds, top) = self.top_k(logits)?;
                (inds, top.softmax(&[-1], true)?)
            }
        })
    }
}
