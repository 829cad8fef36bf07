//! `/api/show` in Ollama's shape: its clients validate the answer against their own types (the
//! `ollama` Python client requires `model_info`), and tools read `details.parameter_size`,
//! `model_info["<arch>.context_length"]` and `capabilities` to decide what to ask a model.
//! rmx's own description of the model stays beside them under `info` (the CLI reads it).
//!
//! Ollama fills `model_info` from a GGUF file's metadata; rmx models are safetensors folders,
//! so the same keys are read from config.json, where llama.cpp's converter reads them from.

use std::path::Path;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
use rmx_api::{ModelDetails, ModelRequest, ShowResponse};
use rmx_engine::ModelKind;
use rmx_store::{ModelInfo, Quantization, ToolParser};
use serde_json::{Map, Value};

use super::models::store_error;
use super::{parse, NativeError};
use crate::service::Service;

pub async fn show(
    State(svc): State<Arc<Service>>,
    body: Bytes,
) -> Result<Json<ShowResponse>, NativeError> {
    let req: ModelRequest = parse(&body)?;
    let resolved = svc.resolve(&req.model)?;
    let info = svc.store().info(&req.model).map_err(store_error)?;
    // A model that does not generate says what it does instead (Ollama's word for an
    // embedding model is "embedding"): the loaded engine's word, else its files'.
    let kind = svc
        .models()
        .kind(&resolved.path)
        .or_else(|| rmx_engine::model_kind(&resolved.path));
    let capabilities = match kind {
        Some(k) if k != ModelKind::Chat => vec![k.name().to_string()],
        _ => generative_capabilities(&info),
    };
    let config = read_json(&info.path.join("config.json")).unwrap_or(Value::Null);
    Ok(Json(ShowResponse {
        model_info: model_info(&info, &config),
        details: details(&info),
        modified_at: modified_at(&info.path),
        parameters: info.context_length.map(|n| format!("num_ctx {n}")),
        // A template that cannot be read is a model that will not load; `show` still
        // describes the rest.
        template: rmx_text::tokenizer::chat_template_in(&info.path)
            .ok()
            .flatten(),
        license: license(&info.path),
        loaded: svc.models().is_loaded(&resolved.path),
        capabilities,
        info: serde_json::to_value(&info).unwrap_or_default(),
        model: req.model,
    }))
}

/// A language model's capabilities, as far as its files tell.
fn generative_capabilities(info: &ModelInfo) -> Vec<String> {
    let mut capabilities = vec!["completion".to_string()];
    if info.chat_template {
        capabilities.push("chat".into());
    }
    if info.hints.tool_parser != ToolParser::None {
        capabilities.push("tools".into());
    }
    if info.hints.reasoning_parser != rmx_store::ReasoningParser::None {
        capabilities.push("thinking".into());
    }
    capabilities
}

/// Ollama's `details` of a stored model.
pub(crate) fn details(info: &ModelInfo) -> ModelDetails {
    let family = info.model_type.clone().unwrap_or_default();
    ModelDetails {
        parent_model: String::new(),
        format: "safetensors".into(),
        families: if family.is_empty() {
            Vec::new()
        } else {
            vec![family.clone()]
        },
        family,
        parameter_size: info.parameters.map(parameter_size).unwrap_or_default(),
        quantization_level: quantization_level(info.quantization.as_ref(), info.dtype.as_deref()),
    }
}

/// config.json keys (top level, else under `text_config` as multimodal checkpoints nest
/// them) and the GGUF suffix Ollama reports each under.
const CONFIG_KEYS: &[(&str, &str)] = &[
    ("max_position_embeddings", "context_length"),
    ("hidden_size", "embedding_length"),
    ("num_hidden_layers", "block_count"),
    ("intermediate_size", "feed_forward_length"),
    ("num_attention_heads", "attention.head_count"),
    ("head_dim", "attention.key_length"),
    ("head_dim", "attention.value_length"),
    ("rms_norm_eps", "attention.layer_norm_rms_epsilon"),
    ("layer_norm_eps", "attention.layer_norm_epsilon"),
    ("sliding_window", "attention.sliding_window"),
    ("rope_theta", "rope.freq_base"),
    ("vocab_size", "vocab_size"),
    ("num_local_experts", "expert_count"),
    ("num_experts", "expert_count"),
    ("num_experts_per_tok", "expert_used_count"),
];

/// Ollama's `model_info`: `general.*` plus the architecture's own keys, prefixed with its name
/// as GGUF prefixes them (`qwen3.context_length`).
fn model_info(info: &ModelInfo, config: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(arch) = info.model_type.as_deref() else {
        return out;
    };
    out.insert("general.architecture".into(), arch.into());
    if let Some(n) = info.parameters {
        out.insert("general.parameter_count".into(), n.into());
    }
    if let Some(name) = info.repo.as_ref() {
        out.insert("general.name".into(), name.to_string().into());
    }
    let get = |key: &str| {
        config
            .get(key)
            .or_else(|| config.get("text_config").and_then(|t| t.get(key)))
            .filter(|v| v.is_number())
    };
    for (key, suffix) in CONFIG_KEYS {
        let name = format!("{arch}.{suffix}");
        if let (Some(v), false) = (get(key), out.contains_key(&name)) {
            out.insert(name, v.clone());
        }
    }
    // Without `num_key_value_heads` every head has its own keys and values (no GQA).
    if let Some(kv) = get("num_key_value_heads").or_else(|| get("num_attention_heads")) {
        out.insert(format!("{arch}.attention.head_count_kv"), kv.clone());
    }
    // An alias may give a context length its config lacks.
    if let Some(n) = info.context_length {
        out.entry(format!("{arch}.context_length"))
            .or_insert(n.into());
    }
    out
}

/// Ollama's `format.HumanNumber`: "8B", "8.1B", "135M", "134.52M", "500K".
fn parameter_size(n: u64) -> String {
    const B: f64 = 1e9;
    const M: f64 = 1e6;
    let x = n as f64;
    let whole = |v: f64| v == v.floor();
    if x >= B {
        let v = x / B;
        if whole(v) {
            format!("{v:.0}B")
        } else {
            format!("{v:.1}B")
        }
    } else if x >= M {
        let v = x / M;
        if whole(v) {
            format!("{v:.0}M")
        } else {
            format!("{v:.2}M")
        }
    } else if n >= 1000 {
        format!("{:.0}K", x / 1e3)
    } else {
        n.to_string()
    }
}

/// Ollama names a model's quantization by its GGUF type ("Q4_K_M", "F16"); an MLX folder's is
/// its bits ("Q4" for 4-bit affine), its float format ("MXFP4"), or its dtype ("BF16").
fn quantization_level(q: Option<&Quantization>, dtype: Option<&str>) -> String {
    match (q, dtype) {
        (Some(q), _) => match q.mode.as_deref() {
            Some(mode) if mode != "affine" => mode.to_uppercase(),
            _ => format!("Q{}", q.bits),
        },
        (None, Some("bfloat16")) => "BF16".into(),
        (None, Some("float16")) => "F16".into(),
        (None, Some("float32")) => "F32".into(),
        (None, Some(other)) => other.to_uppercase(),
        (None, None) => String::new(),
    }
}

/// RFC 3339 time of the folder's last change.
pub(crate) fn modified_at(dir: &Path) -> Option<String> {
    let modified = std::fs::metadata(dir).and_then(|m| m.modified()).ok()?;
    Some(chrono::DateTime::<chrono::Utc>::from(modified).to_rfc3339())
}

/// The largest license text reported; real ones are a few KiB.
const LICENSE_MAX: u64 = 256 * 1024;

/// The text of the folder's license file, as model repos name it.
fn license(dir: &Path) -> Option<String> {
    ["LICENSE", "LICENSE.md", "LICENSE.txt", "license.txt"]
        .iter()
        .map(|name| dir.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() <= LICENSE_MAX))
        .and_then(|p| std::fs::read_to_string(p).ok())
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_sizes_read_as_ollama_writes_them() {
        assert_eq!(parameter_size(8_030_261_248), "8.0B");
        assert_eq!(parameter_size(7_000_000_000), "7B");
        assert_eq!(parameter_size(134_515_008), "134.52M");
        assert_eq!(parameter_size(135_000_000), "135M");
        assert_eq!(parameter_size(524_288), "524K");
        assert_eq!(parameter_size(999), "999");
    }

    #[test]
    fn quantization_levels() {
        let q = |bits, mode: Option<&str>| Quantization {
            bits,
            group_size: Some(64),
            mode: mode.map(str::to_string),
        };
        assert_eq!(quantization_level(Some(&q(4, None)), None), "Q4");
        assert_eq!(quantization_level(Some(&q(8, Some("affine"))), None), "Q8");
        assert_eq!(
            quantization_level(Some(&q(4, Some("mxfp4"))), None),
            "MXFP4"
        );
        assert_eq!(quantization_level(None, Some("bfloat16")), "BF16");
        assert_eq!(quantization_level(None, None), "");
    }
}
