//! Qwen3-Next (`qwen3_next`), and the hybrid decoder it shares with Qwen3.5 (qwen3_5.rs):
//! three of every `full_attention_interval` layers mix tokens with Gated DeltaNet
//! (delta_net.rs), the last with gated full attention (q/k norms, a sigmoid gate on the output,
//! rope over part of each head); the feed-forward is a dense MLP or routed experts with a
//! shared expert. As mlx-lm's `qwen3_next.py`.

use serde::{Deserialize, Serialize};

use crate::attention::{Mlp, QkNorm};
use crate::config::RawConfig;
use crate::delta_net::{DeltaNetShape, GatedDeltaNet};
use crate::error::{ModelError, Result};
use crate::feed_forward::FeedForward;
use crate::layers::Linear;
use crate::llama::{load_decoder, Llama, Variant};
use crate::mixer::Mixer;
use crate::model::CausalLm;
use crate::moe::{SharedExpert, SparseMoe};
use crate::rope::Rope;
use crate::weights::Weights;

fn four() -> i32 {
    4
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Config {
    pub hidden_size: i32,
    pub num_hidden_layers: i32,
    pub intermediate_size: i32,
    pub num_attention_heads: i32,
    pub linear_num_value_heads: i32,
    pub linear_num_key_heads: i32,
    pub linear_key_head_dim: i32,
    pub linear_value_head_dim: i32,
    pub linear_conv_kernel_dim: i32,
    pub num_experts: i32,
    pub num_experts_per_tok: i32,
    pub decoder_sparse_step: i32,
    pub shared_expert_intermediate_size: i32,
    pub mlp_only_layers: Vec<i32>,
    pub moe_intermediate_size: i32,
    pub rms_norm_eps: f32,
    pub vocab_size: i32,
    pub num_key_value_heads: i32,
    pub rope_theta: f32,
    pub partial_rotary_factor: f32,
    pub max_position_embeddings: i32,
    pub head_dim: i32,
    #[serde(default)]
    pub norm_topk_prob: bool,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default)]
    pub attention_bias: bool,
    pub rope_scaling: Option<serde_json::Value>,
    #[serde(default = "four")]
    pub full_attention_interval: i32,
}

/// Where a hybrid checkpoint differs by family.
pub(crate) struct Layout {
    /// Qwen3-Next's fused `in_proj_qkvz` / `in_proj_ba` (else Qwen3.5's four projections).
    pub fused_projections: bool,
    /// Qwen3.5 puts experts on every layer when it has any; Qwen3-Next follows
    /// `decoder_sparse_step` and `mlp_only_layers`.
    pub experts_everywhere: bool,
    /// `model` or `language_model.model`, and the lm_head's path.
    pub root: &'static str,
    pub lm_head: &'static str,
    /// Reads the multi-token-prediction head (`mtp.*`) when the weights have it: checkpoints
    /// in transformers' layout (hub_layout.rs), the only ones that keep it.
    pub mtp: bool,
}

impl Config {
    /// The rotated dimensions of a head: mlx-lm's `int(head_dim * partial_rotary_factor)`.
    pub(crate) fn rotary_dims(&self) -> i32 {
        (self.head_dim as f64 * self.partial_rotary_factor as f64) as i32
    }

    fn is_linear(&self, layer: i32) -> bool {
        (layer + 1) % self.full_attention_interval != 0
    }

    fn is_moe(&self, layer: i32, layout: &Layout) -> bool {
        if layout.experts_everywhere {
            return self.num_experts > 0;
        }
        !self.mlp_only_layers.contains(&layer)
            && self.num_experts > 0
            && (layer + 1) % self.decoder_sparse_step == 0
    }

    fn check(&self) -> Result<()> {
        let bad = |message: String| {
            Err(ModelError::Config {
                path: "config.json".into(),
                message,
            })
        };
        if self.full_attention_interval < 1 || self.decoder_sparse_step < 1 {
            return bad(format!(
                "full_attention_interval ({}) and decoder_sparse_step ({}) must be at least 1",
                self.full_attention_interval, self.decoder_sparse_step
            ));
        }
        if !(0.0..=1.0).contains(&self.partial_rotary_factor) {
            return bad(format!(
                "partial_rotary_factor {} is not between 0 and 1",
                self.partial_rotary_factor
            ));
        }
        Ok(())
    }
}

pub(crate) fn load_hybrid(
    raw: &RawConfig,
    w: &mut Weights,
    c: Config,
    layout: Layout,
) -> Result<Llama> {
    c.check()?;
    let common = crate::llama::Config::from_family(&c)?;
    let dims = c.rotary_dims();
    let (theta, scaling, max_pos) = (
        c.rope_theta,
        c.rope_scaling.clone(),
        c.max_position_embeddings,
    );
    let mut v = Variant::dense(
        c.attention_bias,
        c.attention_bias,
        QkNorm::BeforeTranspose,
        c.head_dim,
        Box::new(move |_| Rope::from_config(dims, theta, false, scaling.as_ref(), Some(max_pos))),
    );
    v.output_gate = true;
    // Split by the loaders below on a tensor-parallel rank: the dense MLPs as the dense
    // families' (FeedForward::swiglu), the routed experts as Qwen3-MoE's (SparseMoe::load_qwen)
    // and the shared expert as a dense MLP, whose sum over the ranks comes before its gate.
    v.root = layout.root.into();
    v.lm_head = layout.lm_head.into();
    // A model split over ranks does not speculate (speculative.rs, Off::Group).
    v.mtp = layout.mtp && w.parallel().is_none();
    if !v.mtp {
        // Heads not read here (mlx-lm drops them all).
        w.discard(|k| k.contains("mtp."));
    }
    let shape = DeltaNetShape {
        hidden: c.hidden_size,
        k_heads: c.linear_num_key_heads,
        v_heads: c.linear_num_value_heads,
        k_dim: c.linear_key_head_dim,
        v_dim: c.linear_value_head_dim,
        conv_kernel: c.linear_conv_kernel_dim,
        eps: c.rms_norm_eps,
    };
    let (cfg, fused) = (c.clone(), layout.fused_projections);
    v.mixer = Some(Box::new(move |w, q, i, p| {
        if !cfg.is_linear(i) {
            return Ok(None);
        }
        let d = GatedDeltaNet::load(w, q, &format!("{p}.linear_attn"), shape, fused)?;
        Ok(Some(Mixer::DeltaNet(Box::new(d))))
    }));
    let cfg = c.clone();
    v.ffn = Some(Box::new(move |w, q, i, p| {
        let c = &cfg;
        if !c.is_moe(i, &layout) {
            return FeedForward::swiglu(w, q, p, c.hidden_size, c.intermediate_size);
        }
        let shared = SharedExpert {
            mlp: Mlp::load(
                w,
                q,
                &format!("{p}.shared_expert"),
                c.hidden_size,
                c.shared_expert_intermediate_size,
                false,
                false,
            )?,
            gate: Linear::load(
                w,
                q,
                &format!("{p}.shared_expert_gate"),
                c.hidden_size,
                1,
                false,
            )?,
        };
        let moe = SparseMoe::load_qwen(
            w,
            q,
            p,
            c.hidden_size,
            c.num_experts,
            c.num_experts_per_tok,
            c.moe_intermediate_size,
            c.norm_topk_prob,
        )?
        .with_shared(shared);
        Ok(FeedForward::Moe(Box::new(moe)))
    }));
    load_decoder(raw, &common, w, v)
}

pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse()?;
    // The Hub's own checkpoints, read as mlx-lm reads them (and with their MTP head).
    if crate::hub_layout::is_transformers(w) {
        crate::hub_layout::to_mlx(w, crate::hub_layout::Hub::Qwen3Next)?;
    }
    Ok(Box::new(load_hybrid(
        raw,
        w,
        c,
        Layout {
            fused_projections: true,
            experts_everywhere: false,
            root: "model",
            lm_head: "lm_head",
            mtp: true,
        },
    )?))
}
