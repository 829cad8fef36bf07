//! Loading a Gemma 4 checkpoint: the text model alone or inside the vision-language wrapper,
//! each layer's attention (sliding or full, K-eq-V, KV-shared), MLP, experts and per-layer gate.

use serde_json::Value;

use super::config::{config_error, Config};
use super::*;
use crate::config::{QuantConfig, RawConfig};
use crate::error::ModelError;
use crate::moe::ExpertActivation;
use crate::vision::gemma4::Gemma4Vision;
use crate::weights::Weights;

/// `gemma4_text`: the text model at the top of the checkpoint.
pub fn load(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse()?;
    Ok(load_text(raw, c, w, "model", "lm_head")?)
}

/// `Gemma4ForConditionalGeneration`: as mlx-lm's `gemma4.py`, `text_config` with the top-level
/// `vocab_size` (262144 when absent) and 8 / 1 heads where it names none; with its vision
/// encoder and `embed_vision` where the files carry them (mlx-vlm's layout), for prompts with
/// images. Audio weights stay unloaded.
pub fn load_multimodal(raw: &RawConfig, w: &mut Weights) -> Result<Box<dyn CausalLm>> {
    let c: Config = raw.parse_wrapped_text(
        262144,
        &[("num_attention_heads", 8), ("num_key_value_heads", 1)],
    )?;
    if w.has("model.language_model.embed_tokens.weight") {
        return Err(config_error(
            raw,
            "these are transformers' weight names (model.language_model.*); rmx reads \
             mlx-lm's layout: convert with `mlx_lm.convert`, or use an mlx-community upload"
                .into(),
        ));
    }
    let vision = if w.has("vision_tower.patch_embedder.input_proj.weight") {
        Some(Gemma4Vision::from_checkpoint(raw, w, c.hidden_size)?)
    } else {
        None
    };
    const SKIPPED: [&str; 6] = [
        "vision_tower.",
        "multi_modal_projector.",
        "audio_tower.",
        "embed_audio.",
        "embed_vision.",
        "vision_embedder.",
    ];
    w.discard(|k| SKIPPED.iter().any(|s| k.starts_with(s)));
    let mut model = load_text(raw, c, w, "language_model.model", "language_model.lm_head")?;
    model.vision = vision;
    Ok(model)
}

fn load_text(
    raw: &RawConfig,
    c: Config,
    w: &mut Weights,
    root: &str,
    lm_head_path: &str,
) -> Result<Box<Gemma4>> {
    let q = &raw.quant;
    let n = c.num_hidden_layers;
    let sliding = c.layer_types(raw)?;
    let first_shared = (n - c.num_kv_shared_layers).max(0);
    // mlx-lm's `previous_kvs`: each shared layer reads the last unshared layer of its type.
    let mut last_of_type = [None, None];
    for (i, s) in sliding.iter().enumerate().take(first_shared as usize) {
        last_of_type[usize::from(*s)] = Some(i);
    }
    w.discard(|k| {
        [
            "self_attn.rotary_emb",
            "input_max",
            "input_min",
            "output_max",
            "output_min",
        ]
        .iter()
        .any(|s| k.contains(s))
    });
    let mut layers = Vec::new();
    for i in 0..n {
        let p = format!("{root}.layers.{i}");
        let is_sliding = sliding[i as usize];
        let kv_source = if i >= first_shared {
            Some(last_of_type[usize::from(is_sliding)].ok_or_else(|| {
                config_error(
                    raw,
                    format!(
                        "layer {i} shares K/V (num_kv_shared_layers {}) but no earlier layer \
                         has its attention type",
                        c.num_kv_shared_layers
                    ),
                )
            })?)
        } else {
            None
        };
        // mlx-lm's sanitize drops a shared layer's K/V weights, which it never uses.
        if kv_source.is_some() {
            for name in ["k_proj", "v_proj", "k_norm"] {
                let prefix = format!("{p}.self_attn.{name}.");
                w.discard(|k| k.starts_with(&prefix));
            }
        }
        layers.push(load_layer(w, q, &c, &p, is_sliding, kv_source)?);
    }
    let per_layer = match c.per_layer_dim() {
        Some(d) => Some(PerLayerInputs {
            embed: Embedding::load(
                w,
                q,
                &format!("{root}.embed_tokens_per_layer"),
                c.vocab_size_per_layer_input,
                n * d,
            )?,
            projection: Linear::load(
                w,
                q,
                &format!("{root}.per_layer_model_projection"),
                c.hidden_size,
                n * d,
                false,
            )?,
            norm: RmsNorm::load(
                w,
                &format!("{root}.per_layer_projection_norm"),
                d,
                c.rms_norm_eps,
            )?,
            dim: d,
        }),
        None => None,
    };
    let lm_head = if c.tie_word_embeddings {
        w.discard(|k| k.starts_with(&format!("{lm_head_path}.")));
        None
    } else {
        Some(Linear::load(
            w,
            q,
            lm_head_path,
            c.hidden_size,
            c.vocab_size,
            false,
        )?)
    };
    let kinds = layers.iter().map(|l| {
        let attn = if l.sliding {
            "sliding attention"
        } else {
            "attention"
        };
        let shared = if l.kv_source.is_some() {
            " (shared K/V)"
        } else {
            ""
        };
        let ffn = if l.experts.is_some() {
            "dense + moe"
        } else {
            "dense"
        };
        format!("{attn}{shared} + {ffn}")
    });
    let info = ModelInfo {
        model_type: raw.model_type.clone(),
        vocab_size: c.vocab_size,
        hidden_size: c.hidden_size,
        num_layers: n,
        context_length: Some(c.max_position_embeddings),
        quant_bits: q.default.map(|s| s.bits),
        tied_embeddings: c.tie_word_embeddings,
        layer_kinds: crate::llama::summarize(kinds),
        kind: crate::model::ModelKind::Chat,
        mtp_layers: 0,
    };
    let eps = c.rms_norm_eps;
    Ok(Box::new(Gemma4 {
        embed: Embedding::load(
            w,
            q,
            &format!("{root}.embed_tokens"),
            c.vocab_size,
            c.hidden_size,
        )?,
        per_layer,
        layers,
        norm: RmsNorm::load(w, &format!("{root}.norm"), c.hidden_size, eps)?,
        lm_head,
        softcap: c.final_logit_softcapping,
        cached: first_shared as usize,
        cfg: c,
        info,
        vision: None,
    }))
}

#[allow(clippy::too_many_arguments)]
fn load_layer(
    w: &mut Weights,
    q: &QuantConfig,
    c: &Config,
    p: &str,
    sliding: bool,
    kv_source: Option<usize>,
) -> Result<Layer> {
    let eps = c.rms_norm_eps;
    let hidden = c.hidden_size;
    let norm =
        |w: &mut Weights, name: &str, d: i32| RmsNorm::load(w, &format!("{p}.{name}"), d, eps);
    let head_dim = match c.global_head_dim {
        Some(g) if g > 0 && !sliding => g,
        _ => c.head_dim,
    };
    let k_eq_v = c.attention_k_eq_v && !sliding;
    let kv_heads = match c.num_global_key_value_heads {
        Some(g) if k_eq_v => g,
        _ => c.num_key_value_heads,
    };
    let heads = c.num_attention_heads;
    let a = format!("{p}.self_attn");
    let kv = if kv_source.is_none() {
        Some(KvProj {
            k: Linear::load(
                w,
                q,
                &format!("{a}.k_proj"),
                hidden,
                kv_heads * head_dim,
                false,
            )?,
            v: if k_eq_v {
                None
            } else {
                Some(Linear::load(
                    w,
                    q,
                    &format!("{a}.v_proj"),
                    hidden,
                    kv_heads * head_dim,
                    false,
                )?)
            },
            k_norm: norm(w, "self_attn.k_norm", head_dim)?,
            kv_heads,
            eps,
        })
    } else {
        None
    };
    let params = c.rope_params(sliding);
    let theta = params
        .get("rope_theta")
        .and_then(Value::as_f64)
        .unwrap_or(10000.0) as f32;
    let rope = Rope::from_config(
        head_dim,
        theta,
        c.rope_traditional,
        Some(&params),
        Some(c.max_position_embeddings),
    )?;
    let attn = Attention {
        q: Linear::load(
            w,
            q,
            &format!("{a}.q_proj"),
            hidden,
            heads * head_dim,
            false,
        )?,
        kv,
        o: Linear::load(
            w,
            q,
            &format!("{a}.o_proj"),
            heads * head_dim,
            hidden,
            false,
        )?,
        q_norm: norm(w, "self_attn.q_norm", head_dim)?,
        heads,
        head_dim,
        rope,
    };
    // mlx-lm's double-wide MLP goes with KV sharing.
    let wide = if c.use_double_wide_mlp && kv_source.is_some() {
        2
    } else {
        1
    };
    let mlp = Mlp::load(
        w,
        q,
        &format!("{p}.mlp"),
        hidden,
        c.intermediate_size * wide,
        false,
        true,
    )?;
    let experts = if c.enable_moe_block {
        let missing = |f: &str| config_error_at(format!("enable_moe_block needs {f}"));
        let num_experts = c.num_experts.ok_or_else(|| missing("num_experts"))?;
        let top_k = c.top_k_experts.ok_or_else(|| missing("top_k_experts"))?;
        let inter = c
            .moe_intermediate_size
            .ok_or_else(|| missing("moe_intermediate_size"))?;
        if top_k < 1 || top_k > num_experts {
            return Err(config_error_at(format!(
                "top_k_experts {top_k} must be between 1 and num_experts ({num_experts})"
            )));
        }
        let scale = w.take(&format!("{p}.router.scale"), &[hidden])?;
        Some(Experts {
            router: Linear::load(
                w,
                q,
                &format!("{p}.router.proj"),
                hidden,
                num_experts,
                false,
            )?,
            router_norm: scale.multiply_scalar(f64::from(hidden).powf(-0.5))?,
            per_expert_scale: w.take(&format!("{p}.router.per_expert_scale"), &[num_experts])?,
            switch: SwitchGlu::load(
                w,
                q,
                &format!("{p}.experts.switch_glu"),
                num_experts,
                hidden,
                inter,
                false,
                ExpertActivation::GeGlu,
            )?,
            num_experts,
            top_k,
            eps,
            pre_norm: norm(w, "pre_feedforward_layernorm_2", hidden)?,
            post_norm: norm(w, "post_feedforward_layernorm_2", hidden)?,
            dense_post_norm: norm(w, "post_feedforward_layernorm_1", hidden)?,
        })
    } else {
        None
    };
    let per_layer = match c.per_layer_dim() {
        Some(d) => Some(PerLayerGate {
            gate: Linear::load(w, q, &format!("{p}.per_layer_input_gate"), hidden, d, false)?,
            projection: Linear::load(w, q, &format!("{p}.per_layer_projection"), d, hidden, false)?,
            norm: norm(w, "post_per_layer_input_norm", hidden)?,
        }),
        None => None,
    };
    Ok(Layer {
        attn,
        mlp,
        experts,
        per_layer,
        input_norm: norm(w, "input_layernorm", hidden)?,
        post_attn_norm: norm(w, "post_attention_layernorm", hidden)?,
        pre_ff_norm: norm(w, "pre_feedforward_layernorm", hidden)?,
        post_ff_norm: norm(w, "post_feedforward_layernorm", hidden)?,
        scalar: w.take(&format!("{p}.layer_scalar"), &[1])?,
        sliding,
        kv_source,
    })
}

/// A config error the registry puts the config's path on.
fn config_error_at(message: String) -> ModelError {
    ModelError::Config {
        path: "config.json".into(),
        message,
    }
}
