//! Issue #24: the quantized KV cache through Ollama's options (`kv_bits`, `kv_group_size`,
//! `kv_quant_start`, rmx's own): values MLX cannot store are a 400 that says what is allowed,
//! before the model loads; good ones answer.

mod common_api;

use axum::http::StatusCode;
use common_api::{app, call, model_name, service};
use serde_json::{json, Value};
use std::path::PathBuf;

#[tokio::test]
async fn kv_options_out_of_range_are_400_naming_what_is_allowed() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let cases = [
        (json!({"kv_bits": 3}), "4 or 8"),
        (json!({"kv_bits": 16}), "4 or 8"),
        (json!({"kv_bits": 8, "kv_group_size": 48}), "32, 64 or 128"),
        (json!({"kv_bits": 4, "kv_quant_start": -1}), "0 or more"),
        (json!({"kv_group_size": 32}), "need kv_bits"),
    ];
    for (options, want) in cases {
        for (path, mut body) in [
            (
                "/api/chat",
                json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
            ),
            ("/api/generate", json!({"model": "m", "prompt": "hi"})),
        ] {
            body["options"] = options.clone();
            body["stream"] = json!(false);
            let (status, body) = call(&app, path, body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {options}: {body}");
            let msg = body["error"].as_str().unwrap_or_default();
            assert!(msg.contains(want), "{path} {options}: {body}");
        }
    }
}

/// Good values answer on a model whose heads (32 wide, the tiny Qwen3's) take groups of 32;
/// a model whose heads no group size divides (the API suites' tiny model: 16) fails with what
/// to do.
/// The same fields as top-level body fields of the OpenAI and Anthropic routes: a 400 in each
/// API's shape naming the field, before any model loads (`m` is none).
#[tokio::test]
async fn kv_fields_out_of_range_are_400_naming_them_on_openai_and_anthropic() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let user = json!([{"role": "user", "content": "hi"}]);
    let cases = [
        (json!({"kv_bits": 3}), "kv_bits", "4 or 8"),
        (
            json!({"kv_bits": 8, "kv_group_size": 48}),
            "kv_group_size",
            "32, 64 or 128",
        ),
        (
            json!({"kv_bits": 4, "kv_quant_start": -1}),
            "kv_quant_start",
            "0 or more",
        ),
        (
            json!({"kv_group_size": 32}),
            "kv_group_size",
            "need kv_bits",
        ),
    ];
    for (fields, param, says) in cases {
        for (path, body) in [
            (
                "/v1/chat/completions",
                json!({"model": "m", "messages": user}),
            ),
            ("/v1/completions", json!({"model": "m", "prompt": "hi"})),
            ("/v1/responses", json!({"model": "m", "input": "hi"})),
        ] {
            let (status, body) = call(&app, path, merged(body, &fields)).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {fields}: {body}");
            assert_eq!(body["error"]["param"], param, "{path} {fields}: {body}");
            assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
            let msg = body["error"]["message"].as_str().unwrap_or_default();
            assert!(msg.contains(says), "{path} {fields}: {body}");
        }
        let body = merged(
            json!({"model": "m", "max_tokens": 8, "messages": user}),
            &fields,
        );
        let (status, body) = call(&app, "/v1/messages", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{fields}: {body}");
        assert_eq!(body["type"], "error", "{body}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
        let msg = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains(param) && msg.contains(says),
            "{fields}: {body}"
        );
    }
}

/// A quantized KV cache asked for on the OpenAI and Anthropic routes answers, and the OpenAI
/// completion is the native route's with the same fields (the same prompt tokens, greedy).
#[tokio::test]
async fn kv_bits_answer_through_the_openai_and_anthropic_routes() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let qwen3 = rmx_tests::models::tiny_qwen3()
        .to_string_lossy()
        .into_owned();
    let kv = json!({"kv_bits": 8, "kv_group_size": 32});
    let native = json!({"model": qwen3, "prompt": "hi", "stream": false, "raw": true,
                        "options": merged(json!({"num_predict": 6, "temperature": 0}), &kv)});
    let (status, want) = call(&app, "/api/generate", native).await;
    assert_eq!(status, StatusCode::OK, "{want}");
    let body = merged(
        json!({"model": qwen3, "prompt": "hi", "max_tokens": 6, "temperature": 0}),
        &kv,
    );
    let (status, got) = call(&app, "/v1/completions", body).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["choices"][0]["text"], want["response"], "{got}");
    let user = json!([{"role": "user", "content": "hi"}]);
    for (path, body) in [
        (
            "/v1/chat/completions",
            json!({"model": qwen3, "messages": user, "max_tokens": 4}),
        ),
        (
            "/v1/messages",
            json!({"model": qwen3, "messages": user, "max_tokens": 4}),
        ),
    ] {
        let (status, got) = call(&app, path, merged(body, &kv)).await;
        assert_eq!(status, StatusCode::OK, "{path}: {got}");
    }
}

fn merged(mut body: Value, fields: &Value) -> Value {
    for (k, v) in fields.as_object().expect("an object") {
        body[k] = v.clone();
    }
    body
}

#[tokio::test]
async fn kv_bits_answer_through_the_native_routes() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let qwen3 = rmx_tests::models::tiny_qwen3()
        .to_string_lossy()
        .into_owned();
    let options = json!({"num_predict": 4, "kv_bits": 8, "kv_group_size": 32});
    let req = json!({"model": qwen3, "prompt": "hi", "stream": false, "raw": true,
                     "options": options});
    let (status, body): (StatusCode, Value) = call(&app, "/api/generate", req).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["done"], true, "{body}");
    assert!(body["eval_count"].as_u64().unwrap_or(0) >= 1, "{body}");

    let req = json!({"model": model_name(), "prompt": "hi", "stream": false, "raw": true,
                     "options": options});
    let (_, body): (StatusCode, Value) = call(&app, "/api/generate", req).await;
    let msg = body["error"].as_str().unwrap_or_default();
    assert!(msg.contains("without --kv-bits"), "{body}");
}

/// `/api/ps` while a quantized answer runs: its KV cache's bytes, measured on the arrays, are
/// the unquantized bytes times the format's ratio (8 bits plus a bf16 scale and bias per 32
/// elements: (1 + 4/32) / 2 of bf16's), which `rmx ps` shows as the saving.
#[tokio::test]
async fn ps_shows_the_kv_cache_and_what_quantizing_saves() {
    let home = tempfile::tempdir().expect("tempdir");
    let (svc, qwen3) = qwen3_service(home.path());
    let kv = rmx_engine::KvQuant::new(8, 32, 0).unwrap();
    quantized_in_ps(&svc, &qwen3.to_string_lossy(), Some(kv), kv).await;
}

/// An alias's hint (`rmx alias add --kv-bits`) applies to requests that do not say; one MLX
/// cannot store is a 400 naming the alias.
#[tokio::test]
async fn an_aliases_kv_hint_applies_and_a_bad_one_is_400() {
    use rmx_store::ModelHints;

    let hint = |bits, group| ModelHints {
        kv_bits: Some(bits),
        kv_group_size: Some(group),
        ..ModelHints::default()
    };
    let home = tempfile::tempdir().expect("tempdir");
    let (svc, qwen3) = qwen3_service(home.path());
    let path = qwen3.to_string_lossy().into_owned();
    svc.store().add_alias("q5", &path, hint(5, 32)).unwrap();
    let req = json!({"model": "q5", "prompt": "hi", "stream": false});
    let (status, body) = call(&app(svc), "/api/generate", req).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let msg = body["error"].as_str().unwrap_or_default();
    assert!(msg.contains("alias") && msg.contains("4 or 8"), "{body}");

    let home = tempfile::tempdir().expect("tempdir");
    let (svc, _) = qwen3_service(home.path());
    svc.store().add_alias("q4", &path, hint(4, 32)).unwrap();
    let kv = rmx_engine::KvQuant::new(4, 32, 0).unwrap();
    quantized_in_ps(&svc, "q4", None, kv).await;
}

/// A service that may load the tiny bf16 Qwen3 (heads of 32) by its folder, and the folder.
fn qwen3_service(home: &std::path::Path) -> (std::sync::Arc<rmx_server::Service>, PathBuf) {
    let qwen3 = rmx_tests::models::tiny_qwen3();
    // Called from here, not through the socket: the model's folder must be under a root.
    let root = qwen3.parent().expect("a parent").to_path_buf();
    (common_api::service_with_roots(home, vec![root]), qwen3)
}

/// Starts a long answer of `model` (asking for `asked`) and checks `/api/ps` while it runs:
/// a KV cache of `want`'s ratio to its unquantized size (bf16: 2 bytes an element).
async fn quantized_in_ps(
    svc: &std::sync::Arc<rmx_server::Service>,
    model: &str,
    asked: Option<rmx_engine::KvQuant>,
    want: rmx_engine::KvQuant,
) {
    use rmx_server::service::{InternalRequest, PromptInput};
    use tower::ServiceExt;

    let app = app(svc.clone());
    let req = InternalRequest {
        model: model.into(),
        prompt: PromptInput::Raw("Once upon a time".into()),
        max_tokens: Some(100_000),
        kv_quant: asked,
        ..Default::default()
    };
    let mut stream = svc.generate(req).await.expect("generate");
    assert!(stream.next_event().await.is_some(), "a first token");
    let mut seen = vec![];
    for _ in 0..3 {
        let resp = app.clone().oneshot(common_api::get("/api/ps")).await;
        let (_, body) = common_api::json(resp.expect("ps")).await;
        let m = &body["models"][0];
        let q = m["kv_cache"].as_u64().expect("kv_cache in /api/ps");
        let plain = m["kv_cache_unquantized"]
            .as_u64()
            .expect("kv_cache_unquantized in /api/ps");
        if q > 0 && q as f64 == plain as f64 * want.ratio(2) {
            return;
        }
        seen.push((q, plain));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!(
        "{model}: kv_cache vs kv_cache_unquantized, want ratio {}: {seen:?}",
        want.ratio(2)
    );
}
