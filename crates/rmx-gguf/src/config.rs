//! config.json for mlx-lm, from a GGUF's `<arch>.*` metadata.
//!
//! Field names are the ones mlx-lm 0.32's `models/{llama,qwen2,qwen3,gemma3_text}.py` read.
//! Values GGUF does not store but llama.cpp hardcodes (Gemma 3's local rope base, its
//! sliding-window pattern) are filled in the same way llama.cpp does.

use serde_json::{json, Map, Value};

use crate::arch::Arch;
use crate::error::{GgufError, Result};
use crate::reader::GgufFile;

/// Quantization settings to record in config.json, if the weights are quantized.
#[derive(Debug, Clone, Copy)]
pub struct QuantConfig {
    pub group_size: usize,
    pub bits: u32,
}

/// llama.cpp stores every float as f32; printing through f32's shortest form turns
/// 9.999999747378752e-06 back into the 1e-05 the original config had.
fn clean_f64(v: f64) -> f64 {
    let short = format!("{}", v as f32);
    short.parse().unwrap_or(v)
}

fn f64_json(v: f64) -> Value {
    serde_json::Number::from_f64(clean_f64(v)).map_or(Value::Null, Value::Number)
}

/// Builds config.json's contents.
pub fn build_config(
    gguf: &GgufFile,
    arch: Arch,
    quant: Option<QuantConfig>,
    float_dtype: &str,
) -> Result<Value> {
    let p = arch.gguf_name();
    let key = |k: &str| format!("{p}.{k}");
    let req_u64 = |k: &str| -> Result<u64> {
        let k = key(k);
        // Some files store per-layer arrays (e.g. feed_forward_length); the first entry stands
        // for a model whose layers are all alike, which is all these architectures have.
        match gguf.get(&k) {
            Some(v) => v
                .as_u64()
                .or_else(|| v.as_array()?.first()?.as_u64())
                .ok_or_else(|| gguf.metadata_error(&k, "unsigned integer")),
            None => Err(gguf.metadata_error(&k, "unsigned integer")),
        }
    };
    let opt_u64 = |k: &str| req_u64(k).ok();
    let opt_f64 = |k: &str| gguf.get_f64(&key(k));

    let hidden = req_u64("embedding_length")?;
    let layers = req_u64("block_count")?;
    let heads = req_u64("attention.head_count")?;
    let kv_heads = opt_u64("attention.head_count_kv").unwrap_or(heads);
    let head_dim = opt_u64("attention.key_length").unwrap_or(hidden / heads.max(1));
    let vocab = gguf
        .tensor("token_embd.weight")
        .and_then(|t| t.dims.get(1).copied())
        .or_else(|| opt_u64("vocab_size"))
        .ok_or_else(|| gguf.metadata_error("token_embd.weight", "a [hidden, vocab] tensor"))?;
    let eps = opt_f64("attention.layer_norm_rms_epsilon").unwrap_or(1e-6);

    let mut c = Map::new();
    c.insert("architectures".into(), json!([arch.hf_class()]));
    c.insert("model_type".into(), json!(arch.model_type()));
    c.insert("hidden_size".into(), json!(hidden));
    c.insert(
        "intermediate_size".into(),
        json!(req_u64("feed_forward_length")?),
    );
    c.insert("num_hidden_layers".into(), json!(layers));
    c.insert("num_attention_heads".into(), json!(heads));
    c.insert("num_key_value_heads".into(), json!(kv_heads));
    c.insert("head_dim".into(), json!(head_dim));
    c.insert("rms_norm_eps".into(), f64_json(eps));
    c.insert(
        "rope_theta".into(),
        f64_json(opt_f64("rope.freq_base").unwrap_or(10_000.0)),
    );
    c.insert("vocab_size".into(), json!(vocab));
    if let Some(ctx) = opt_u64("context_length") {
        c.insert("max_position_embeddings".into(), json!(ctx));
    }
    c.insert(
        "tie_word_embeddings".into(),
        json!(gguf.tensor("output.weight").is_none()),
    );
    if let Some(scaling) = rope_scaling(gguf, p) {
        c.insert("rope_scaling".into(), scaling);
    } else if gguf.tensor("rope_freqs.weight").is_some() {
        let theta = opt_f64("rope.freq_base").unwrap_or(10_000.0);
        let dims = opt_u64("rope.dimension_count").unwrap_or(head_dim);
        c.insert(
            "rope_scaling".into(),
            llama3_rope_scaling(gguf, theta, dims)?,
        );
    }
    for (field, k) in [
        ("bos_token_id", "bos_token_id"),
        ("eos_token_id", "eos_token_id"),
        ("pad_token_id", "padding_token_id"),
    ] {
        if let Some(id) = gguf.get_u64(&format!("tokenizer.ggml.{k}")) {
            c.insert(field.into(), json!(id));
        }
    }
    c.insert("torch_dtype".into(), json!(float_dtype));

    match arch {
        Arch::Llama => {
            let bias = gguf.tensor("blk.0.attn_q.bias").is_some();
            c.insert("attention_bias".into(), json!(bias));
            c.insert("mlp_bias".into(), json!(false));
            c.insert("hidden_act".into(), json!("silu"));
        }
        Arch::Qwen2 | Arch::Qwen3 => {
            c.insert("hidden_act".into(), json!("silu"));
        }
        Arch::Gemma3 => gemma3_extras(
            &mut c,
            hidden,
            heads,
            head_dim,
            layers,
            |k| opt_u64(k),
            |k| opt_f64(k),
        ),
    }

    if let Some(q) = quant {
        // mlx-lm reads `quantization`; transformers-style tools read `quantization_config`.
        let qc = json!({"group_size": q.group_size, "bits": q.bits, "mode": "affine"});
        c.insert("quantization".into(), qc.clone());
        c.insert("quantization_config".into(), qc);
    }
    Ok(Value::Object(c))
}

fn gemma3_extras(
    c: &mut Map<String, Value>,
    hidden: u64,
    heads: u64,
    head_dim: u64,
    layers: u64,
    opt_u64: impl Fn(&str) -> Option<u64>,
    opt_f64: impl Fn(&str) -> Option<f64>,
) {
    // llama.cpp (llama-model.cpp, LLM_ARCH_GEMMA3): every 6th layer is global, the local
    // layers use rope base 10000, and queries are scaled by 1/sqrt(head_dim) except on 27B,
    // which uses hidden/heads.
    const PATTERN: u64 = 6;
    let is_27b = hidden == 5376 && layers == 62;
    let scalar = if is_27b {
        hidden / heads.max(1)
    } else {
        head_dim
    };
    c.insert("query_pre_attn_scalar".into(), json!(scalar));
    c.insert(
        "sliding_window".into(),
        json!(opt_u64("attention.sliding_window").unwrap_or(4096)),
    );
    c.insert("sliding_window_pattern".into(), json!(PATTERN));
    let layer_types: Vec<&str> = (0..layers)
        .map(|i| {
            if (i + 1) % PATTERN == 0 {
                "full_attention"
            } else {
                "sliding_attention"
            }
        })
        .collect();
    c.insert("layer_types".into(), json!(layer_types));
    c.insert("rope_local_base_freq".into(), json!(10_000.0));
    c.insert("hidden_activation".into(), json!("gelu_pytorch_tanh"));
    let softcap = |k: &str| opt_f64(k).map_or(Value::Null, f64_json);
    c.insert(
        "final_logit_softcapping".into(),
        softcap("final_logit_softcapping"),
    );
    c.insert(
        "attn_logit_softcapping".into(),
        softcap("attn_logit_softcapping"),
    );
}

/// `rope_scaling` from `<arch>.rope.scaling.*`, in the shape HF configs use.
fn rope_scaling(gguf: &GgufFile, p: &str) -> Option<Value> {
    let ty = gguf.get_str(&format!("{p}.rope.scaling.type"))?;
    if ty == "none" {
        return None;
    }
    let mut m = Map::new();
    m.insert("type".into(), json!(ty));
    m.insert("rope_type".into(), json!(ty));
    if let Some(f) = gguf.get_f64(&format!("{p}.rope.scaling.factor")) {
        m.insert("factor".into(), f64_json(f));
    }
    if let Some(n) = gguf.get_u64(&format!("{p}.rope.scaling.original_context_length")) {
        m.insert("original_max_position_embeddings".into(), json!(n));
    }
    Some(Value::Object(m))
}

/// Llama 3.1+'s `rope_scaling`, recovered from the `rope_freqs` factors llama.cpp precomputed
/// from it (convert_hf_to_gguf.py, LlamaModel.generate_extra_tensors). The factor is the largest
/// entry; the other parameters are the ones every Llama 3.x release uses, and the factors they
/// imply must reproduce the stored ones, or the conversion stops rather than guess.
fn llama3_rope_scaling(gguf: &GgufFile, theta: f64, dims: u64) -> Result<Value> {
    const LOW_FREQ_FACTOR: f64 = 1.0;
    const HIGH_FREQ_FACTOR: f64 = 4.0;
    const OLD_CONTEXT: f64 = 8192.0;
    let stored = gguf.tensor_f32("rope_freqs.weight")?;
    let factor = stored.iter().copied().fold(f32::MIN, f32::max) as f64;
    let expected: Vec<f64> = (0..dims / 2)
        .map(|i| {
            let freq = 1.0 / theta.powf((2 * i) as f64 / dims as f64);
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            if wavelen < OLD_CONTEXT / HIGH_FREQ_FACTOR {
                1.0
            } else if wavelen > OLD_CONTEXT / LOW_FREQ_FACTOR {
                factor
            } else {
                let smooth = (OLD_CONTEXT / wavelen - LOW_FREQ_FACTOR)
                    / (HIGH_FREQ_FACTOR - LOW_FREQ_FACTOR);
                1.0 / ((1.0 - smooth) / factor + smooth)
            }
        })
        .collect();
    let matches = expected.len() == stored.len()
        && expected
            .iter()
            .zip(&stored)
            .all(|(&e, &s)| (e - s as f64).abs() <= 1e-4 * e.abs().max(1.0));
    if !matches {
        return Err(GgufError::BadTensor {
            path: gguf.path().to_path_buf(),
            tensor: "rope_freqs.weight".into(),
            detail: "these rope frequency factors are not Llama 3's (factor, low 1, high 4, context 8192); \
                     the model's rope scaling cannot be expressed in config.json"
                .into(),
        });
    }
    Ok(json!({
        "rope_type": "llama3",
        "factor": clean_f64(factor),
        "low_freq_factor": LOW_FREQ_FACTOR,
        "high_freq_factor": HIGH_FREQ_FACTOR,
        "original_max_position_embeddings": OLD_CONTEXT as u64,
    }))
}
