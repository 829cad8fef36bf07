//! Thinking budgets through every surface (issue #20): on the tiny random model with a template
//! that opens the thought, an answer without a budget never leaves the thought; with one, the
//! thought is closed after its budget and the answer follows. Bad values are 400s in each
//! API's shape.

mod common_api;

use axum::http::StatusCode;
use common_api::{app, call, service, with_template};
use serde_json::{json, Value};

/// The close the engine feeds (`"\n</think>\n\n"`) is a few tokens, some of them counted while
/// the thought is still open.
const CLOSE_TOKENS: u64 = 4;

fn thinking_model(home: &std::path::Path) -> String {
    with_template(
        home,
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\
         {% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}",
    )
    .to_string_lossy()
    .into_owned()
}

fn reasoning_tokens(usage: &Value, details: &str) -> u64 {
    usage[details]["reasoning_tokens"]
        .as_u64()
        .unwrap_or_else(|| panic!("no reasoning_tokens: {usage}"))
}

#[tokio::test]
async fn openai_routes_close_the_thought_after_thinking_token_budget() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let model = thinking_model(home.path());
    let ask = |budget: Option<u64>| {
        let mut body = json!({"model": model, "messages": [{"role": "user", "content": "x"}],
                              "temperature": 0.8, "seed": 3, "max_tokens": 24});
        if let Some(b) = budget {
            body["thinking_token_budget"] = json!(b);
        }
        body
    };
    let (status, body) = call(&app, "/v1/chat/completions", ask(None)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let usage = &body["usage"];
    assert_eq!(
        reasoning_tokens(usage, "completion_tokens_details"),
        usage["completion_tokens"].as_u64().unwrap(),
        "without a budget the random model never closes its thought: {body}"
    );
    let (status, body) = call(&app, "/v1/chat/completions", ask(Some(5))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let reasoning = reasoning_tokens(&body["usage"], "completion_tokens_details");
    assert!((5..=5 + CLOSE_TOKENS).contains(&reasoning), "{body}");
    let message = &body["choices"][0]["message"];
    assert!(
        !message["reasoning_content"]
            .as_str()
            .unwrap_or("")
            .is_empty(),
        "{body}"
    );
    assert!(
        !message["content"].as_str().unwrap_or("").is_empty(),
        "{body}"
    );

    let (status, body) = call(
        &app,
        "/v1/responses",
        json!({"model": model, "input": "x", "max_output_tokens": 24, "temperature": 0.8,
               "seed": 3, "thinking_token_budget": 3}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let reasoning = reasoning_tokens(&body["usage"], "output_tokens_details");
    assert!((3..=3 + CLOSE_TOKENS).contains(&reasoning), "{body}");
    assert!(
        !body["output_text"].as_str().unwrap_or("").is_empty()
            || body["output"]
                .as_array()
                .is_some_and(|o| o.iter().any(|i| i["type"] == "message")),
        "{body}"
    );

    let (status, body) = call(&app, "/v1/chat/completions", {
        let mut b = ask(None);
        b["thinking_token_budget"] = json!(-1);
        b
    })
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
}

#[tokio::test]
async fn anthropic_budget_tokens_closes_the_thought_and_must_leave_room_for_the_answer() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let model = thinking_model(home.path());
    let ask = |budget: u64, max_tokens: u64| {
        json!({"model": model, "max_tokens": max_tokens, "temperature": 0.8,
               "messages": [{"role": "user", "content": "x"}],
               "thinking": {"type": "enabled", "budget_tokens": budget}})
    };
    let (status, body) = call(&app, "/v1/messages", ask(4, 24)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let blocks = body["content"].as_array().expect("content");
    let kinds: Vec<&str> = blocks.iter().filter_map(|b| b["type"].as_str()).collect();
    assert_eq!(kinds, ["thinking", "text"], "{body}");
    assert!(
        !blocks[1]["text"].as_str().unwrap_or("").is_empty(),
        "{body}"
    );

    let (status, body) = call(&app, "/v1/messages", ask(24, 24)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("budget_tokens")),
        "{body}"
    );
}

#[tokio::test]
async fn ollama_think_levels_and_the_thinking_budget_option() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let model = thinking_model(home.path());
    let ask = |think: Value, options: Value| {
        json!({"model": model, "messages": [{"role": "user", "content": "x"}], "stream": false,
               "think": think, "options": options})
    };
    let options = json!({"temperature": 0.8, "seed": 2, "num_predict": 24, "thinking_budget": 4});
    for think in [json!(true), json!("low")] {
        let (status, body) = call(&app, "/api/chat", ask(think.clone(), options.clone())).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let m = &body["message"];
        assert!(
            !m["thinking"].as_str().unwrap_or("").is_empty(),
            "{think}: {body}"
        );
        assert!(
            !m["content"].as_str().unwrap_or("").is_empty(),
            "{think}: {body}"
        );
    }
    // Without the option, a level's budget (1,024 for "low") is far beyond this answer.
    let long = json!({"temperature": 0.8, "seed": 2, "num_predict": 24});
    let (status, body) = call(&app, "/api/chat", ask(json!("low"), long)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["message"]["content"], "", "{body}");

    let (status, body) = call(&app, "/api/chat", ask(json!("extreme"), options)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| e.contains("think")),
        "{body}"
    );
}
