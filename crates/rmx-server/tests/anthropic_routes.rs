//! The Anthropic routes on the tiny model through the router (no socket): the event order,
//! streamed text equal to the whole message, count_tokens agreeing with usage, and `/messages`
//! without the `/v1` prefix.

mod common_api;

use axum::http::StatusCode;
use common_api::{app, json, model_name, post, service, sse_named, text};
use serde_json::{json, Value};
use tower::ServiceExt;

#[tokio::test]
async fn message_stream_order_and_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Keep the service alive while bodies stream: its end ends their answers.
    let svc = service(dir.path());
    let app = app(svc.clone());
    let req = json!({"model": model_name(), "max_tokens": 6, "temperature": 0, "system": "Be brief.",
                     "messages": [{"role": "user", "content": "Hello"}]});
    let (status, whole) = json(
        app.clone()
            .oneshot(post("/v1/messages", req.to_string()))
            .await
            .expect("r"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{whole}");
    assert_eq!(whole["stop_reason"], "max_tokens");
    assert_eq!(whole["usage"]["output_tokens"], 6);
    let answer = whole["content"][0]["text"]
        .as_str()
        .expect("text")
        .to_string();

    let mut sreq = req.clone();
    sreq["stream"] = json!(true);
    let (_, body) = text(
        app.clone()
            .oneshot(post("/messages", sreq.to_string()))
            .await
            .expect("r"),
    )
    .await;
    let evs = sse_named(&body);
    let names: Vec<&str> = evs
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| *n != "ping")
        .collect();
    assert_eq!(
        names,
        ["message_start", "content_block_start"]
            .into_iter()
            .chain(std::iter::repeat_n("content_block_delta", names.len() - 5))
            .chain(["content_block_stop", "message_delta", "message_stop"])
            .collect::<Vec<_>>(),
        "{body}"
    );
    for (name, data) in &evs {
        assert_eq!(data["type"], name.as_str());
    }
    let streamed: String = evs
        .iter()
        .filter_map(|(_, d)| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(streamed, answer);
    let delta = &evs
        .iter()
        .find(|(n, _)| n == "message_delta")
        .expect("message_delta")
        .1;
    assert_eq!(delta["delta"]["stop_reason"], "max_tokens");
    assert_eq!(delta["usage"]["output_tokens"], 6);

    let count = json!({"model": model_name(), "system": "Be brief.", "messages": [{"role": "user", "content": "Hello"}]});
    let (status, n) = json(
        app.oneshot(post("/v1/messages/count_tokens", count.to_string()))
            .await
            .expect("r"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{n}");
    let usage = &whole["usage"];
    assert_eq!(
        n["input_tokens"].as_u64(),
        Some(
            usage["input_tokens"].as_u64().unwrap_or(0)
                + usage["cache_read_input_tokens"].as_u64().unwrap_or(0)
        )
    );
}

#[tokio::test]
async fn tools_and_tool_history_are_accepted() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Keep the service alive while bodies stream: its end ends their answers.
    let svc = service(dir.path());
    let app = app(svc.clone());
    let req = json!({
        "model": model_name(), "max_tokens": 2, "temperature": 0,
        "tools": [{"name": "Bash", "description": "Run a shell command",
                   "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
        "tool_choice": {"type": "auto"},
        "messages": [
            {"role": "user", "content": "list files"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a.txt"}]}]}
        ]
    });
    let (status, body) = json(
        app.oneshot(post("/v1/messages", req.to_string()))
            .await
            .expect("r"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body["usage"]["input_tokens"].as_u64().unwrap_or(0) > 50,
        "{body}"
    );
}

/// The first piece of `answer` after its start that occurs there first: as a stop string it
/// cuts the answer at that point.
fn stop_inside(answer: &str) -> (String, usize) {
    let starts: Vec<usize> = answer.char_indices().map(|(at, _)| at).skip(1).collect();
    starts
        .windows(3)
        .find_map(|w| {
            let piece = &answer[w[0]..w[2]];
            (answer.find(piece) == Some(w[0]) && !piece.trim().is_empty())
                .then(|| (piece.to_string(), w[0]))
        })
        .unwrap_or_else(|| panic!("no usable stop string in {answer:?}"))
}

#[tokio::test]
async fn a_stop_sequence_ends_the_answer_and_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let app = app(svc.clone());
    let mut req = json!({"model": model_name(), "max_tokens": 8, "temperature": 0,
                         "messages": [{"role": "user", "content": "Hello"}]});
    let (status, whole) = json(
        app.clone()
            .oneshot(post("/v1/messages", req.to_string()))
            .await
            .expect("r"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{whole}");
    assert_eq!(
        whole["content"].as_array().map(Vec::len),
        Some(1),
        "{whole}"
    );
    let answer = whole["content"][0]["text"].as_str().expect("text");
    assert_eq!(whole["stop_sequence"], Value::Null);
    let (stop, at) = stop_inside(answer);

    req["stop_sequences"] = json!(["never in this answer", stop]);
    let (status, cut) = json(
        app.clone()
            .oneshot(post("/v1/messages", req.to_string()))
            .await
            .expect("r"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{cut}");
    assert_eq!(cut["content"][0]["text"], answer[..at], "{cut}");
    assert_eq!(cut["stop_reason"], "stop_sequence", "{cut}");
    assert_eq!(cut["stop_sequence"], stop.as_str(), "{cut}");

    req["stream"] = json!(true);
    let (_, body) = text(
        app.oneshot(post("/v1/messages", req.to_string()))
            .await
            .expect("r"),
    )
    .await;
    let evs = sse_named(&body);
    let streamed: String = evs
        .iter()
        .filter_map(|(_, d)| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(streamed, answer[..at]);
    let delta = &evs
        .iter()
        .find(|(n, _)| n == "message_delta")
        .expect("message_delta")
        .1;
    assert_eq!(
        delta["delta"],
        json!({"stop_reason": "stop_sequence", "stop_sequence": stop}),
        "{body}"
    );
}
