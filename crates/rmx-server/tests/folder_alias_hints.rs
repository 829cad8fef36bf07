//! Issue #21: a user alias that names a model folder keeps its hints (`rmx alias add NAME
//! /folder --tool-parser hermes`). They were dropped when the alias resolved to the folder, and
//! a loaded model kept the hints of whichever name loaded it first; now they travel with each
//! request.
//!
//! The tiny model here has a chat template with no tool-call markup. By its path the daemon
//! takes the format its family writes (Qwen3: Hermes) and answers a forced call; through an
//! alias whose hint says it has none, the same loaded model refuses it (a 400).

mod common_api;

use axum::http::StatusCode;
use common_api::{app, call, service, with_template};
use rmx_store::{ModelHints, ToolParser};
use serde_json::{json, Value};

const PLAIN: &str = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n\
                     {% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

fn request(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Weather in Paris?"}],
           "tools": [{"type": "function", "function": {"name": "get_weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
           "tool_choice": "required", "temperature": 0.8, "seed": 1, "max_tokens": 60})
}

#[tokio::test]
async fn issue_21_a_folder_aliases_tool_parser_is_honoured() {
    let home = tempfile::tempdir().expect("tempdir");
    let folder = with_template(home.path(), PLAIN);
    let path = folder.to_string_lossy().into_owned();
    let svc = service(home.path());
    let hints = ModelHints {
        tool_parser: ToolParser::None,
        ..ModelHints::default()
    };
    svc.store()
        .add_alias("plain-none", &path, hints)
        .expect("add the alias");
    let app = app(svc);

    // By its path first: this loads the model; no alias, so the family's format.
    let (status, body) = call(&app, "/v1/chat/completions", request(&path)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{body}");
    let calls = choice["message"]["tool_calls"]
        .as_array()
        .expect("tool_calls");
    assert_eq!(calls.len(), 1, "{body}");
    assert_eq!(calls[0]["function"]["name"], "get_weather", "{body}");
    let args: Value = serde_json::from_str(
        calls[0]["function"]["arguments"]
            .as_str()
            .expect("arguments"),
    )
    .expect("arguments are JSON");
    assert!(args.is_object(), "{body}");

    // Through the alias, on the same loaded model: its hint (no format) wins.
    let (status, body) = call(&app, "/v1/chat/completions", request("plain-none")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no tool-call format")),
        "{body}"
    );

    // And by the path again: the alias's hints stayed with the alias's request.
    let (status, _) = call(&app, "/v1/chat/completions", request(&path)).await;
    assert_eq!(status, StatusCode::OK);

    // `/api/show` reports the alias's hints too, not those guessed from the qwen3 config
    // (which would think).
    let (status, body) = call(&app, "/api/show", json!({"model": "plain-none"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["info"]["hints"],
        json!({"tool_parser": "none", "reasoning_parser": "none"}),
        "{body}"
    );
    assert_eq!(
        body["capabilities"],
        json!(["completion", "chat"]),
        "{body}"
    );
}
