//! Issue #20: a model whose chat template shows no tool-call markup still has its tool calls
//! parsed, in the format its family writes (config.json's `model_type`), when no alias says
//! otherwise. The tiny Qwen3.5 here writes a Qwen3-Coder XML call after a plain ChatML template
//! that never mentions tools; before, the call came back as text.

#![allow(clippy::unwrap_used)]

mod common_api;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use axum::http::StatusCode;
use common_api::{app, call, scripted_model, service};
use serde_json::{json, Value};

/// ChatML with nothing about tools: what many community conversions carry.
const PLAIN_CHATML: &str = "{%- for message in messages %}<|im_start|>{{ message.role }}\n\
    {{ message.content }}<|im_end|>\n{% endfor %}\
    {%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// The scripted model, with its template swapped for [`PLAIN_CHATML`], in `dir`.
fn model_without_tool_markup(dir: &Path) -> PathBuf {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    let scripts = json!([[
        "assistant\n",
        "<tool_call><function=get_weather><parameter=city>Paris</tool_call><|im_end|>"
    ]]);
    let src = scripted_model(
        &MODEL,
        "qwen3_5-scripted-plain-template",
        "qwen3_5",
        &["--scripts", &scripts.to_string()],
    );
    let out = dir.join("qwen3_5-plain");
    std::fs::create_dir_all(&out).unwrap();
    for entry in std::fs::read_dir(&src).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), out.join(entry.file_name())).unwrap();
        }
    }
    let path = out.join("tokenizer_config.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    config["chat_template"] = json!(PLAIN_CHATML);
    std::fs::write(&path, config.to_string()).unwrap();
    let _ = std::fs::remove_file(out.join("chat_template.jinja"));
    out
}

#[tokio::test]
async fn tool_calls_are_parsed_in_the_familys_format_when_the_template_shows_none() {
    let home = tempfile::tempdir().unwrap();
    let model = model_without_tool_markup(home.path());
    let config: Value =
        serde_json::from_slice(&std::fs::read(model.join("tokenizer_config.json")).unwrap())
            .unwrap();
    let template = config["chat_template"].as_str().unwrap();
    assert!(
        !template.contains("tool"),
        "the template must show no tool markup"
    );
    let app = app(service(home.path()));
    let body = json!({
        "model": model.to_string_lossy(),
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
        "max_tokens": 40,
    });
    let (status, v) = call(&app, "/v1/chat/completions", body).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let message = &v["choices"][0]["message"];
    let calls = message["tool_calls"]
        .as_array()
        .unwrap_or_else(|| panic!("no tool call parsed: {v}"));
    assert_eq!(calls.len(), 1, "{v}");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "Paris"}));
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
}
