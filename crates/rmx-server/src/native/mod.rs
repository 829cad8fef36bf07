//! rmx's native API, `/api/...`, shaped like Ollama's so its clients work: the routes the CLI
//! itself uses, over the Unix socket and over TCP alike.

mod chat;
mod embed;
mod error;
mod generate;
mod models;
mod ndjson;
pub(crate) mod pull;
mod show;

use std::sync::Arc;

use axum::routing::{delete, get, post};
use axum::Router;
use serde::de::DeserializeOwned;

pub use error::NativeError;
pub(crate) use models::loaded_kind;

use crate::error::ServiceError;
use crate::service::{Service, Shape};

pub fn routes() -> Router<Arc<Service>> {
    Router::new()
        .route("/api/generate", post(generate::generate))
        .route("/api/chat", post(chat::chat))
        .route("/api/embed", post(embed::embed))
        .route("/api/embeddings", post(embed::embeddings))
        .route("/api/ps", get(models::ps))
        .route("/api/tags", get(models::tags))
        .route("/api/show", post(show::show))
        .route("/api/delete", delete(models::delete))
        .route("/api/pull", post(pull::pull))
        .route("/api/version", get(models::version))
}

/// Parses a JSON body, answering bad JSON in this API's error shape (axum's `Json` answers
/// plain text).
fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, NativeError> {
    serde_json::from_slice(body).map_err(|e| {
        NativeError(ServiceError::BadRequest(format!(
            "invalid request body: {e}"
        )))
    })
}

/// A user turn with Ollama's `images` (base64 files), as the content parts the core reads:
/// the images first, then the text, where Ollama's own prompts put them. `field` names the
/// list in errors (`images`, `messages[0].images`).
fn image_parts(
    field: &str,
    images: &[String],
    text: &str,
) -> Result<Vec<crate::service::ContentPart>, NativeError> {
    use crate::service::ContentPart;
    let mut parts = Vec::with_capacity(images.len() + 1);
    for (j, data) in images.iter().enumerate() {
        let bytes = crate::service::decode_base64(data)
            .map_err(|e| NativeError(ServiceError::BadRequest(format!("{field}[{j}]: {e}"))))?;
        parts.push(ContentPart::Image(std::sync::Arc::new(bytes)));
    }
    parts.push(ContentPart::Text(text.to_string()));
    Ok(parts)
}

/// Ollama's `format`: `"json"` constrains the answer to one JSON object, a JSON schema to a
/// value valid against it; `""` or none leaves it free.
fn shape(format: Option<&serde_json::Value>) -> Result<Option<Shape>, NativeError> {
    use serde_json::Value;
    match format {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) if s == "json" => Ok(Some(Shape::JsonObject)),
        Some(schema @ Value::Object(_)) => Ok(Some(Shape::JsonSchema(schema.clone()))),
        Some(other) => Err(NativeError(ServiceError::BadRequest(format!(
            "invalid `format` {other}: expected \"json\" or a JSON schema object"
        )))),
    }
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// What Ollama's options set: sampling, the most tokens to generate (None: until the context
/// is full) and the stop strings.
type Sampling = (crate::service::SamplingParams, Option<usize>, Vec<String>);

/// Ollama's options onto the core's sampling parameters, held to the ranges the OpenAI routes
/// hold them to ([`crate::sampling`]).
fn sampling(options: Option<&rmx_api::Options>) -> Result<Sampling, NativeError> {
    use crate::sampling::{check, Knob};
    let mut s = crate::service::SamplingParams::default();
    let Some(o) = options else {
        return Ok((s, None, Vec::new()));
    };
    let checks = [
        (Knob::Temperature, "temperature", o.temperature),
        (Knob::TopP, "top_p", o.top_p),
        (Knob::MinP, "min_p", o.min_p),
        (Knob::RepetitionPenalty, "repeat_penalty", o.repeat_penalty),
        (
            Knob::PresencePenalty,
            "presence_penalty",
            o.presence_penalty,
        ),
        (
            Knob::FrequencyPenalty,
            "frequency_penalty",
            o.frequency_penalty,
        ),
    ];
    for (knob, name, value) in checks {
        check(knob, name, value)
            .map_err(|e| NativeError(ServiceError::BadRequest(format!("options: {e}"))))?;
    }
    if let Some(t) = o.temperature {
        s.temperature = t;
    }
    if let Some(p) = o.top_p {
        s.top_p = p;
    }
    if let Some(k) = o.top_k {
        s.top_k = k;
    }
    if let Some(p) = o.min_p {
        s.min_p = p;
    }
    if let Some(p) = o.repeat_penalty {
        s.repetition_penalty = p;
    }
    if let Some(p) = o.presence_penalty {
        s.presence_penalty = p;
    }
    if let Some(p) = o.frequency_penalty {
        s.frequency_penalty = p;
    }
    s.seed = o.seed;
    // Negative (Ollama's -1 "infinite", -2 "fill the context"): until the context is full,
    // which is where the core stops any answer.
    let max = o.num_predict.filter(|n| *n >= 0).map(|n| n as usize);
    Ok((s, max, o.stop.clone()))
}

/// rmx's KV-cache options (`kv_bits`, `kv_group_size`, `kv_quant_start`): `None` without
/// `kv_bits` (the daemon's default then applies); out of range, a 400 that says what is
/// allowed.
fn kv_quant(
    options: Option<&rmx_api::Options>,
) -> Result<Option<rmx_engine::KvQuant>, NativeError> {
    let Some(o) = options else {
        return Ok(None);
    };
    crate::kv_options::parse(o.rmx.kv_bits, o.rmx.kv_group_size, o.rmx.kv_quant_start)
        .map_err(|e| NativeError(ServiceError::BadRequest(format!("options: {e}"))))
}

/// How a request thinks: Ollama's `think` (on, off, or a level, which also goes to the
/// template as `reasoning_effort` and caps the thought: thinking.rs) and rmx's
/// `thinking_budget` option, which wins over a level's cap.
struct Thinking {
    think: Option<bool>,
    template_kwargs: serde_json::Map<String, serde_json::Value>,
    budget: Option<usize>,
}

fn thinking(
    think: Option<&rmx_api::Think>,
    options: Option<&rmx_api::Options>,
) -> Result<Thinking, NativeError> {
    let level = think.and_then(rmx_api::Think::level);
    if let Some(l) = level.filter(|l| !rmx_api::Think::LEVELS.contains(l)) {
        return Err(NativeError(ServiceError::BadRequest(format!(
            "think: {l:?} is not a think value: expected true, false, \"low\", \"medium\" or \"high\""
        ))));
    }
    let mut template_kwargs = serde_json::Map::new();
    if let Some(l) = level {
        template_kwargs.insert("reasoning_effort".into(), l.into());
    }
    let budget = options
        .and_then(|o| o.thinking_budget)
        .or_else(|| level.and_then(crate::service::thinking::effort_budget));
    Ok(Thinking {
        think: think.map(rmx_api::Think::enabled),
        template_kwargs,
        budget,
    })
}

/// rmx's speculation options (`speculative`, `draft_tokens`), read as on every surface
/// ([`crate::speculation`]).
fn speculative(
    options: Option<&rmx_api::Options>,
) -> Result<Option<crate::speculation::Asked>, NativeError> {
    let Some(o) = options else {
        return Ok(None);
    };
    crate::speculation::parse(o.rmx.speculative.as_deref(), o.rmx.draft_tokens)
        .map_err(|e| NativeError(ServiceError::BadRequest(format!("options: {e}"))))
}

fn stats(f: &crate::service::Final) -> rmx_api::DoneStats {
    rmx_api::DoneStats {
        done_reason: f.finish.as_str().to_string(),
        total_duration: f.total_duration.as_nanos() as u64,
        load_duration: f.load_duration.as_nanos() as u64,
        prompt_eval_count: f.usage.prompt_tokens,
        prompt_eval_duration: f.timings.prefill.as_nanos() as u64,
        eval_count: f.usage.completion_tokens,
        eval_duration: f.timings.decode.as_nanos() as u64,
        draft_tokens: f.usage.drafts.map(|d| d.drafted),
        accepted_draft_tokens: f.usage.drafts.map(|d| d.accepted),
        speculation_off: f.usage.speculation_off.map(|o| o.to_string()),
    }
}

#[cfg(test)]
mod speculative_tests {
    use super::*;

    fn options(method: Option<&str>, k: Option<usize>) -> rmx_api::Options {
        rmx_api::Options {
            rmx: rmx_api::extensions::RmxFields {
                speculative: method.map(str::to_string),
                draft_tokens: k,
                ..Default::default()
            },
            ..rmx_api::Options::default()
        }
    }

    fn refusal(o: rmx_api::Options) -> String {
        match speculative(Some(&o)) {
            Err(NativeError(ServiceError::BadRequest(m))) => m,
            other => panic!("not a 400: {other:?}"),
        }
    }

    #[test]
    fn speculation_options_are_checked_and_defaulted() {
        assert_eq!(speculative(None).ok(), Some(None));
        let default = speculative(Some(&options(Some("prompt-lookup"), None))).ok();
        let k = match default.flatten() {
            Some(crate::speculation::Asked::On(s)) => Some(s.draft_tokens()),
            _ => None,
        };
        assert_eq!(k, Some(rmx_engine::speculative::DEFAULT_DRAFT_TOKENS));
        assert_eq!(
            speculative(Some(&options(Some("off"), None))).ok(),
            Some(Some(crate::speculation::Asked::Off))
        );
        assert!(refusal(options(Some("prompt-lookup"), Some(0))).contains("between 1 and 16"));
        assert!(refusal(options(Some("prompt-lookup"), Some(17))).contains("between 1 and 16"));
        assert!(refusal(options(Some("medusa"), None)).contains("expected \"prompt-lookup\""));
        assert!(refusal(options(None, Some(4))).contains("needs speculative"));
    }
}
