//! Issue #24: speculative decoding (prompt lookup) on the OpenAI and Anthropic surfaces and as
//! a daemon default (`rmx serve --speculative`): the same greedy answer as without, the guesses
//! reported where the API has room (OpenAI's `*_prediction_tokens`, the native stats), and bad
//! `speculative` / `draft_tokens` values a 400 naming the field in each API's shape.

mod common_api;

use axum::http::StatusCode;
use common_api::{app, call, config, model_name, service};
use serde_json::{json, Value};

/// A conversation whose answer starts where an earlier one did (`<|im_start|>assistant\n`), so
/// prompt lookup has something to copy from the first step on.
fn repetitive_chat(model: &str) -> Value {
    let turn = "one two three four five six seven eight nine ten";
    json!({"model": model, "temperature": 0, "max_tokens": 32, "messages": [
        {"role": "user", "content": turn},
        {"role": "assistant", "content": turn},
        {"role": "user", "content": turn},
    ]})
}

/// Drafted and accepted guesses from an OpenAI usage, None when it reports none.
fn predictions(usage: &Value) -> Option<(u64, u64)> {
    let d = &usage["completion_tokens_details"];
    let accepted = d["accepted_prediction_tokens"].as_u64()?;
    let rejected = d["rejected_prediction_tokens"].as_u64()?;
    Some((accepted + rejected, accepted))
}

/// Asks `path` for `plain` and for it with each `draft_tokens`: the same greedy text, the
/// guesses counted in usage (and none without speculation). Returns the most guesses accepted.
async fn same_answer_speculating(
    app: &axum::Router,
    path: &str,
    plain: Value,
    text: fn(&Value) -> &Value,
) -> u64 {
    let (status, want) = call(app, path, plain.clone()).await;
    assert_eq!(status, StatusCode::OK, "{want}");
    assert_eq!(predictions(&want["usage"]), None, "{want}");
    let mut most = 0;
    for k in [1, 4, 16] {
        let mut asked = plain.clone();
        asked["speculative"] = json!("prompt-lookup");
        asked["draft_tokens"] = json!(k);
        let (status, got) = call(app, path, asked).await;
        assert_eq!(status, StatusCode::OK, "{got}");
        assert_eq!(text(&got), text(&want), "{path} k={k}: {got}");
        assert_eq!(
            got["usage"]["completion_tokens"], want["usage"]["completion_tokens"],
            "{path} k={k}"
        );
        let (drafted, accepted) = predictions(&got["usage"]).expect("prediction counts");
        assert!(drafted > 0 && accepted <= drafted, "{path} k={k}: {got}");
        most = most.max(accepted);
    }
    most
}

#[tokio::test]
async fn openai_routes_speculating_give_the_plain_greedy_answer() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    same_answer_speculating(
        &app,
        "/v1/chat/completions",
        repetitive_chat(&model_name()),
        |b| &b["choices"][0]["message"]["content"],
    )
    .await;
    // The tiny model falls into loops after a run of one word, so guesses are taken and the
    // blocks are cut back at several points.
    let plain = json!({"model": model_name(), "prompt": "a a a a a a a a a a a a",
                       "temperature": 0, "max_tokens": 64});
    let accepted =
        same_answer_speculating(&app, "/v1/completions", plain, |b| &b["choices"][0]["text"]).await;
    assert!(
        accepted > 0,
        "no guess was accepted: the check ran on refusals only"
    );
}

/// Each route's 400 for a field it got wrong, checked before any model loads (`m` is none).
#[tokio::test]
async fn bad_speculation_fields_are_400_naming_them() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let cases = [
        (
            json!({"speculative": "prompt-lookup", "draft_tokens": 0}),
            "draft_tokens",
        ),
        (
            json!({"speculative": "prompt-lookup", "draft_tokens": 17}),
            "draft_tokens",
        ),
        (json!({"draft_tokens": 4}), "draft_tokens"),
        (
            json!({"speculative": "off", "draft_tokens": 4}),
            "draft_tokens",
        ),
        (json!({"speculative": "medusa"}), "speculative"),
    ];
    let user = json!([{"role": "user", "content": "hi"}]);
    for (fields, param) in cases {
        let openai = [
            (
                "/v1/chat/completions",
                json!({"model": "m", "messages": user}),
            ),
            ("/v1/completions", json!({"model": "m", "prompt": "hi"})),
            ("/v1/responses", json!({"model": "m", "input": "hi"})),
        ];
        for (path, mut body) in openai {
            merge(&mut body, &fields);
            let (status, body) = call(&app, path, body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {fields}: {body}");
            assert_eq!(body["error"]["param"], param, "{path} {fields}: {body}");
            assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
        }
        let mut body = json!({"model": "m", "max_tokens": 8, "messages": user});
        merge(&mut body, &fields);
        let (status, body) = call(&app, "/v1/messages", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{fields}: {body}");
        assert_eq!(body["type"], "error", "{body}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(param), "{fields}: {body}");
    }
}

/// `rmx serve --speculative prompt-lookup`: a request that names no speculation speculates (the
/// native stats count its guesses) and answers as a daemon without the default does; one that
/// says "off" does not.
#[tokio::test]
async fn a_daemon_default_speculates_requests_that_do_not_say() {
    let prompt = "alpha beta gamma delta alpha beta gamma delta alpha beta gamma delta alpha beta";
    let req = plain_request(prompt);
    let home = tempfile::tempdir().expect("tempdir");
    let (status, plain) = call(&app(service(home.path())), "/api/generate", req.clone()).await;
    assert_eq!(status, StatusCode::OK, "{plain}");
    assert!(plain.get("draft_tokens").is_none(), "{plain}");

    let home = tempfile::tempdir().expect("tempdir");
    let mut setup = config(home.path(), Vec::new());
    setup.speculative = Some(rmx_server::speculation::Spec::PromptLookup { draft_tokens: 4 });
    let app = app(rmx_server::Service::new(setup));
    let (status, body) = call(&app, "/api/generate", req).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["response"], plain["response"], "{body}");
    let drafted = body["draft_tokens"].as_u64().expect("draft_tokens");
    let accepted = body["accepted_draft_tokens"]
        .as_u64()
        .expect("accepted_draft_tokens");
    assert!(drafted > 0 && accepted <= drafted, "{body}");

    // The OpenAI routes read the same default.
    let (status, body) = call(&app, "/v1/chat/completions", repetitive_chat(&model_name())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(predictions(&body["usage"]).is_some(), "{body}");

    // A request turns the default off with "off", on every surface: the same answer, no
    // guesses.
    let mut off = plain_request(prompt);
    off["options"]["speculative"] = json!("off");
    let (status, body) = call(&app, "/api/generate", off).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["response"], plain["response"], "{body}");
    assert!(body.get("draft_tokens").is_none(), "{body}");
    let mut chat = repetitive_chat(&model_name());
    chat["speculative"] = json!("off");
    let (status, body) = call(&app, "/v1/chat/completions", chat).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(predictions(&body["usage"]), None, "{body}");
    let mut messages = repetitive_chat(&model_name());
    messages["speculative"] = json!("off");
    let (status, body) = call(&app, "/v1/messages", messages).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// The native request of `a_daemon_default_speculates_requests_that_do_not_say`.
fn plain_request(prompt: &str) -> Value {
    json!({"model": model_name(), "prompt": prompt, "raw": true, "stream": false,
           "options": {"temperature": 0, "num_predict": 24}})
}

fn merge(body: &mut Value, fields: &Value) {
    for (k, v) in fields.as_object().expect("an object") {
        body[k] = v.clone();
    }
}

/// `speculative: "draft:MODEL"`: a draft model named as `model` is (here the model itself, so
/// its guesses are taken) gives the plain greedy answer on the OpenAI and Anthropic routes,
/// with its guesses counted; a draft of another tokenizer, or one not found, is a 400 that
/// says so.
#[tokio::test]
async fn a_draft_model_gives_the_plain_answer_and_a_bad_one_is_a_400() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let own = format!("draft:{}", model_name());
    let plain = repetitive_chat(&model_name());
    let (status, want) = call(&app, "/v1/chat/completions", plain.clone()).await;
    assert_eq!(status, StatusCode::OK, "{want}");
    let mut asked = plain.clone();
    asked["speculative"] = json!(own);
    let (status, got) = call(&app, "/v1/chat/completions", asked).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    let content = |b: &Value| b["choices"][0]["message"]["content"].clone();
    assert_eq!(content(&got), content(&want), "{got}");
    let (drafted, accepted) = predictions(&got["usage"]).expect("prediction counts");
    assert!(accepted > 0 && accepted <= drafted, "{got}");

    let (status, want) = call(&app, "/v1/messages", plain.clone()).await;
    assert_eq!(status, StatusCode::OK, "{want}");
    let mut asked = plain.clone();
    asked["speculative"] = json!(own);
    let (status, got) = call(&app, "/v1/messages", asked).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["content"], want["content"], "{got}");

    let foreign = rmx_tests::models::model("llama", "f32");
    let refusals = [
        (format!("draft:{}", foreign.display()), "tokenizer differs"),
        ("draft:no-such-draft".to_string(), "draft model"),
        // The tiny model is an MLX conversion: no multi-token-prediction head.
        ("mtp".to_string(), "multi-token-prediction head"),
    ];
    for (method, says) in refusals {
        let mut asked = plain.clone();
        asked["speculative"] = json!(method);
        let (status, body) = call(&app, "/v1/chat/completions", asked.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{method}: {body}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{method}: {body}");
        let (status, body) = call(&app, "/v1/messages", asked).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{method}: {body}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    }
}

/// An alias's speculation (`rmx alias add NAME TARGET --speculative draft:MODEL`) applies to
/// requests through the alias that do not say, and to nothing else: the same answer, guesses
/// counted through the alias, none by the folder's path or with "off".
#[tokio::test]
async fn an_alias_speculates_the_requests_through_it() {
    let home = tempfile::tempdir().expect("tempdir");
    let svc = service(home.path());
    let hints = rmx_store::ModelHints {
        speculative: Some(format!("draft:{}", model_name())),
        draft_tokens: Some(3),
        ..rmx_store::ModelHints::default()
    };
    svc.store()
        .add_alias("drafted", &model_name(), hints)
        .expect("add the alias");
    let app = app(svc);
    let (status, plain) = call(&app, "/v1/chat/completions", repetitive_chat(&model_name())).await;
    assert_eq!(status, StatusCode::OK, "{plain}");
    assert_eq!(predictions(&plain["usage"]), None, "{plain}");
    let (status, aliased) = call(&app, "/v1/chat/completions", repetitive_chat("drafted")).await;
    assert_eq!(status, StatusCode::OK, "{aliased}");
    let content = |b: &Value| b["choices"][0]["message"]["content"].clone();
    assert_eq!(content(&aliased), content(&plain), "{aliased}");
    let (drafted, accepted) = predictions(&aliased["usage"]).expect("prediction counts");
    assert!(accepted > 0 && accepted <= drafted, "{aliased}");
    let mut off = repetitive_chat("drafted");
    off["speculative"] = json!("off");
    let (status, body) = call(&app, "/v1/chat/completions", off).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(predictions(&body["usage"]), None, "{body}");
}

/// A default "mtp" (here an alias's) speculates only on models that have the head: a model
/// without one answers as it would without, with no guesses counted, where the request's own
/// "mtp" is a 400.
#[tokio::test]
async fn a_default_mtp_leaves_a_model_without_the_head_alone() {
    let home = tempfile::tempdir().expect("tempdir");
    let svc = service(home.path());
    let hints = rmx_store::ModelHints {
        speculative: Some("mtp".into()),
        ..rmx_store::ModelHints::default()
    };
    svc.store()
        .add_alias("headless", &model_name(), hints)
        .expect("add the alias");
    let app = app(svc);
    let (status, plain) = call(&app, "/v1/chat/completions", repetitive_chat(&model_name())).await;
    assert_eq!(status, StatusCode::OK, "{plain}");
    let (status, aliased) = call(&app, "/v1/chat/completions", repetitive_chat("headless")).await;
    assert_eq!(status, StatusCode::OK, "{aliased}");
    let content = |b: &Value| b["choices"][0]["message"]["content"].clone();
    assert_eq!(content(&aliased), content(&plain), "{aliased}");
    assert_eq!(predictions(&aliased["usage"]), None, "{aliased}");
}
