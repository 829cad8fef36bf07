//! Issue #23: `/v1/rerank` (and `/rerank`, `/v2/rerank`) in the shape Jina's and Cohere's
//! clients send, on the tiny Qwen3 read as a reranker: documents ranked best first with their
//! scores, `top_n`, `return_documents`, object documents, and 400s in OpenAI's shape for bad
//! requests and for a model that is not a reranker.

mod common_api;

use axum::http::StatusCode;
use common_api::{app, call, model_name, service, tiny_embedder, tiny_reranker};
use serde_json::{json, Value};

const DOCS: [&str; 4] = [
    "Paris is the capital of France.",
    "Bananas are yellow.",
    "The Eiffel Tower stands in Paris.",
    "Rust is a systems programming language.",
];

fn reranker() -> String {
    tiny_reranker().to_string_lossy().into_owned()
}

fn scores_by_index(body: &Value) -> Vec<(usize, f64)> {
    body["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|r| {
            (
                r["index"].as_u64().expect("index") as usize,
                r["relevance_score"].as_f64().expect("score"),
            )
        })
        .collect()
}

#[tokio::test]
async fn documents_come_back_ranked_with_their_scores() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app(service(dir.path()));
    let (status, all) = call(
        &app,
        "/v1/rerank",
        json!({"model": reranker(), "query": "What is the capital of France?", "documents": DOCS}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{all}");
    let ranked = scores_by_index(&all);
    assert_eq!(ranked.len(), DOCS.len());
    assert!(
        ranked.windows(2).all(|w| w[0].1 >= w[1].1),
        "not best first: {all}"
    );
    assert!(ranked.iter().all(|(_, s)| *s > 0.0 && *s < 1.0), "{all}");
    let mut seen: Vec<usize> = ranked.iter().map(|(i, _)| *i).collect();
    seen.sort();
    assert_eq!(seen, vec![0, 1, 2, 3]);
    // Documents are echoed by default, each with its own text.
    for r in all["results"].as_array().unwrap() {
        let i = r["index"].as_u64().unwrap() as usize;
        assert_eq!(r["document"]["text"], DOCS[i]);
    }
    assert!(all["usage"]["total_tokens"].as_u64().unwrap() > 0);
    assert_eq!(all["model"], reranker());

    // Cohere's object documents, top_n and return_documents false, on the other paths: the
    // same scores for the same documents.
    let objects: Vec<Value> = DOCS.iter().map(|d| json!({"text": d})).collect();
    for path in ["/rerank", "/v2/rerank"] {
        let (status, top) = call(
            &app,
            path,
            json!({"model": reranker(), "query": "What is the capital of France?",
                   "documents": objects, "top_n": 2, "return_documents": false}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{path}: {top}");
        let best = scores_by_index(&top);
        assert_eq!(best.len(), 2, "{top}");
        for ((i, s), (j, t)) in best.iter().zip(&ranked) {
            assert_eq!(i, j);
            assert!((s - t).abs() < 1e-6, "{path}: {s} vs {t}");
        }
        assert!(top["results"][0].get("document").is_none(), "{top}");
    }
}

#[tokio::test]
async fn bad_requests_and_other_kinds_of_model_are_400s_in_openai_shape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app(service(dir.path()));
    let cases = [
        json!({"model": reranker(), "query": "q", "documents": []}),
        json!({"model": reranker(), "query": "q", "documents": ["a"], "top_n": 0}),
        json!({"model": reranker(), "documents": ["a"]}),
        json!({"model": reranker(), "query": "q", "documents": [7]}),
    ];
    for body in cases {
        let (status, err) = call(&app, "/v1/rerank", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {err}");
        assert!(err["error"]["message"].is_string(), "{err}");
    }
    // A chat model and an embedding model each say what they do.
    let (status, err) = call(
        &app,
        "/v1/rerank",
        json!({"model": model_name(), "query": "q", "documents": ["a"]}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    let msg = err["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("generates text") && msg.contains("rerank"),
        "{msg}"
    );
    let (status, err) = call(
        &app,
        "/v1/rerank",
        json!({"model": tiny_embedder().to_string_lossy(), "query": "q", "documents": ["a"]}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("embedding model"),
        "{err}"
    );
    // And a reranker refuses to chat, in the chat API's shape.
    let (status, err) = call(
        &app,
        "/v1/chat/completions",
        json!({"model": reranker(), "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("reranker"),
        "{err}"
    );
}
