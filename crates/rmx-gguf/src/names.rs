//! GGUF tensor names (llama.cpp's `gguf-py/gguf/tensor_mapping.py` spelling) back to the
//! Hugging Face names mlx-lm's model files expect.

use crate::arch::Arch;

/// The HF name of GGUF tensor `name`, `Ok(None)` for tensors to drop, `Err(())` if unknown.
pub fn hf_name(arch: Arch, name: &str) -> Result<Option<String>, ()> {
    let global = match name {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        // llama.cpp precomputes Llama 3's rope frequency factors; mlx-lm derives them from
        // `rope_scaling` in config.json instead.
        "rope_freqs.weight" => return Ok(None),
        _ => None,
    };
    if let Some(hf) = global {
        return Ok(Some(hf.to_owned()));
    }
    let rest = name.strip_prefix("blk.").ok_or(())?;
    let (layer, rest) = rest.split_once('.').ok_or(())?;
    let layer: usize = layer.parse().map_err(|_| ())?;
    let (module, suffix) = rest.rsplit_once('.').ok_or(())?;
    if suffix != "weight" && suffix != "bias" {
        return Err(());
    }
    let hf_module = match (module, arch) {
        ("attn_norm", _) => "input_layernorm",
        ("attn_q", _) => "self_attn.q_proj",
        ("attn_k", _) => "self_attn.k_proj",
        ("attn_v", _) => "self_attn.v_proj",
        ("attn_output", _) => "self_attn.o_proj",
        ("attn_q_norm", _) => "self_attn.q_norm",
        ("attn_k_norm", _) => "self_attn.k_norm",
        // Gemma 3 has four norms per layer; llama.cpp calls the pre-MLP one `ffn_norm`, which is
        // what Llama-style models name `post_attention_layernorm`.
        ("ffn_norm", Arch::Gemma3) => "pre_feedforward_layernorm",
        ("ffn_norm", _) => "post_attention_layernorm",
        ("post_attention_norm", Arch::Gemma3) => "post_attention_layernorm",
        ("post_ffw_norm", Arch::Gemma3) => "post_feedforward_layernorm",
        ("ffn_gate", _) => "mlp.gate_proj",
        ("ffn_up", _) => "mlp.up_proj",
        ("ffn_down", _) => "mlp.down_proj",
        _ => return Err(()),
    };
    Ok(Some(format!("model.layers.{layer}.{hf_module}.{suffix}")))
}

/// Norm weights: never quantized, and shifted by -1 for Gemma.
pub fn is_norm(hf_name: &str) -> bool {
    hf_name.ends_with("norm.weight") || hf_name.ends_with("layernorm.weight")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_layer_tensors() {
        assert_eq!(
            hf_name(Arch::Llama, "blk.12.attn_q.weight"),
            Ok(Some("model.layers.12.self_attn.q_proj.weight".into()))
        );
        assert_eq!(
            hf_name(Arch::Qwen2, "blk.0.attn_k.bias"),
            Ok(Some("model.layers.0.self_attn.k_proj.bias".into()))
        );
        assert_eq!(
            hf_name(Arch::Gemma3, "blk.3.ffn_norm.weight"),
            Ok(Some(
                "model.layers.3.pre_feedforward_layernorm.weight".into()
            ))
        );
        assert_eq!(
            hf_name(Arch::Llama, "blk.3.ffn_norm.weight"),
            Ok(Some(
                "model.layers.3.post_attention_layernorm.weight".into()
            ))
        );
        assert_eq!(hf_name(Arch::Llama, "rope_freqs.weight"), Ok(None));
        assert_eq!(hf_name(Arch::Llama, "blk.0.ssm_a"), Err(()));
    }
}
