//! Issue #23: the embedding routes on the tiny Qwen3 read as an embedding model (last-token
//! pooling, normalized; inputs of at most `EMBED_LIMIT` tokens), through the router: OpenAI's
//! `/v1/embeddings` in every input shape and both encodings, `dimensions`, Ollama's `/api/embed`
//! and `/api/embeddings`, and each API's 400 when a model is asked for the kind of work it does
//! not do.

mod common_api;

use axum::http::StatusCode;
use axum::Router;
use common_api::{app, call, get, json, model_name, service, tiny_embedder, EMBED_LIMIT};
use rmx_api::openai::EmbeddingVector;
use serde_json::{json, Value};
use tower::ServiceExt;

fn embedder() -> String {
    tiny_embedder().to_string_lossy().into_owned()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a vector: {v}"))
        .iter()
        .map(|x| x.as_f64().expect("number") as f32)
        .collect()
}

/// The vectors of an OpenAI answer, in `index` order, decoding base64.
fn vectors(body: &Value) -> Vec<Vec<f32>> {
    let data = body["data"].as_array().unwrap_or_else(|| panic!("{body}"));
    for (i, d) in data.iter().enumerate() {
        assert_eq!(d["index"], i, "{body}");
        assert_eq!(d["object"], "embedding");
    }
    data.iter()
        .map(|d| {
            let v: EmbeddingVector =
                serde_json::from_value(d["embedding"].clone()).expect("embedding");
            v.values().expect("base64 of f32s")
        })
        .collect()
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    dot / (norm(a) * norm(b))
}

fn tokens(text: &str) -> Vec<u32> {
    rmx_text::tokenizer::Tokenizer::from_dir(tiny_embedder())
        .expect("tokenizer")
        .encode(text, true)
        .expect("encode")
}

async fn embed(app: &Router, body: Value) -> Vec<Vec<f32>> {
    let (status, answer) = call(app, "/v1/embeddings", body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    vectors(&answer)
}

#[tokio::test]
async fn every_input_shape_gives_the_same_vectors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let app = app(svc.clone());
    let (a, b) = ("The cat sat on the mat.", "Vectors for retrieval");
    let (status, one) = call(
        &app,
        "/v1/embeddings",
        json!({"model": embedder(), "input": a, "user": "someone"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(one["object"], "list");
    assert_eq!(one["model"], embedder());
    let ids_a = tokens(a);
    assert_eq!(one["usage"]["prompt_tokens"], ids_a.len(), "{one}");
    assert_eq!(one["usage"]["total_tokens"], ids_a.len(), "{one}");
    let va = vectors(&one).remove(0);
    assert_eq!(va.len(), 64, "the model's hidden size");
    assert!((norm(&va) - 1.0).abs() < 1e-4, "the model normalizes");

    let two = embed(&app, json!({"model": embedder(), "input": [a, b]})).await;
    assert_eq!(two.len(), 2);
    let ids = embed(&app, json!({"model": embedder(), "input": ids_a})).await;
    let lists = embed(
        &app,
        json!({"model": embedder(), "input": [tokens(b), tokens(a)]}),
    )
    .await;
    for (x, y) in [
        (&two[0], &va),
        (&ids[0], &va),
        (&lists[1], &va),
        (&lists[0], &two[1]),
    ] {
        assert!(cosine(x, y) > 0.9999, "{x:?} vs {y:?}");
    }
    assert!(cosine(&two[0], &two[1]) < 0.999, "different texts differ");
}

#[tokio::test]
async fn base64_decodes_to_the_float_vectors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let app = app(svc.clone());
    let input = json!(["one input", "and another one"]);
    let float = embed(
        &app,
        json!({"model": embedder(), "input": input, "encoding_format": "float"}),
    )
    .await;
    let (status, b64) = call(
        &app,
        "/v1/embeddings",
        json!({"model": embedder(), "input": input, "encoding_format": "base64"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{b64}");
    assert!(b64["data"][0]["embedding"].is_string(), "{b64}");
    // Bit for bit: JSON floats print the shortest decimal that reads back to the same f32.
    assert_eq!(vectors(&b64), float);

    let (status, bad) = call(
        &app,
        "/v1/embeddings",
        json!({"model": embedder(), "input": "x", "encoding_format": "int8"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    assert_eq!(bad["error"]["param"], "encoding_format", "{bad}");
}

#[tokio::test]
async fn dimensions_cut_and_renormalize() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let app = app(svc.clone());
    let text = "Matryoshka vectors are cut";
    let full = embed(&app, json!({"model": embedder(), "input": text})).await;
    let cut = embed(
        &app,
        json!({"model": embedder(), "input": text, "dimensions": 16}),
    )
    .await;
    assert_eq!(cut[0].len(), 16);
    assert!((norm(&cut[0]) - 1.0).abs() < 1e-5, "{:?}", cut[0]);
    assert!(
        cosine(&cut[0], &full[0][..16]) > 0.9999,
        "the first 16 values"
    );

    for (dims, what) in [(65, "64"), (0, "at least 1")] {
        let (status, e) = call(
            &app,
            "/v1/embeddings",
            json!({"model": embedder(), "input": text, "dimensions": dims}),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
        assert_eq!(e["error"]["param"], "dimensions", "{e}");
        let message = e["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(what), "{e}");
    }

    let (status, ollama) = call(
        &app,
        "/api/embed",
        json!({"model": embedder(), "input": text, "dimensions": 16}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{ollama}");
    let v = floats(&ollama["embeddings"][0]);
    assert_eq!(v.len(), 16);
    assert!(cosine(&v, &cut[0]) > 0.9999);
}

#[tokio::test]
async fn the_same_text_gives_the_same_vector_and_a_batch_equals_each_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let app = app(svc.clone());
    let texts: Vec<String> = (0..40)
        .map(|i| {
            let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"];
            (0..1 + i % 9)
                .map(|k| words[(i * 3 + k) % words.len()])
                .collect::<Vec<_>>()
                .join(" ")
                + &format!(" #{i}")
        })
        .collect();
    let batch = embed(&app, json!({"model": embedder(), "input": texts})).await;
    assert_eq!(batch.len(), 40);
    for (i, text) in texts.iter().enumerate() {
        let alone = embed(&app, json!({"model": embedder(), "input": text})).await;
        let c = cosine(&batch[i], &alone[0]);
        assert!(c > 0.9999, "input {i} ({text}): cosine {c}");
    }
    let twice = embed(
        &app,
        json!({"model": embedder(), "input": [texts[3], texts[3]]}),
    )
    .await;
    assert_eq!(twice[0], twice[1], "one text twice in one batch");
    let again = embed(&app, json!({"model": embedder(), "input": texts[3]})).await;
    let first = embed(&app, json!({"model": embedder(), "input": texts[3]})).await;
    assert_eq!(again, first, "one text in two requests");
}

#[tokio::test]
async fn a_long_input_is_refused_by_openai_and_cut_by_ollama_unless_asked_not_to() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let app = app(svc.clone());
    let long = "word ".repeat(3 * EMBED_LIMIT);
    let n = tokens(&long).len();
    assert!(n > EMBED_LIMIT);
    let (status, e) = call(
        &app,
        "/v1/embeddings",
        json!({"model": embedder(), "input": ["short", long]}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    assert_eq!(e["error"]["type"], "invalid_request_error", "{e}");
    assert_eq!(e["error"]["param"], "input", "{e}");
    assert_eq!(e["error"]["code"], "context_length_exceeded", "{e}");
    let message = e["error"]["message"].as_str().unwrap_or_default();
    for part in ["input[1]", &n.to_string(), &EMBED_LIMIT.to_string()] {
        assert!(message.contains(part), "{part}: {message}");
    }

    let (status, cut) = call(
        &app,
        "/api/embed",
        json!({"model": embedder(), "input": ["short", long]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{cut}");
    assert_eq!(cut["embeddings"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        cut["prompt_eval_count"],
        tokens("short").len() + EMBED_LIMIT,
        "{cut}"
    );
    // Cut, it is the vector of its first EMBED_LIMIT tokens.
    let head = tokens(&long)[..EMBED_LIMIT].to_vec();
    let exact = embed(&app, json!({"model": embedder(), "input": head})).await;
    assert!(cosine(&floats(&cut["embeddings"][1]), &exact[0]) > 0.9999);

    let (status, e) = call(
        &app,
        "/api/embed",
        json!({"model": embedder(), "input": long, "truncate": false}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    let message = e["error"].as_str().unwrap_or_default();
    assert!(
        message.contains("input[0]") && message.contains("truncate"),
        "{e}"
    );
}

#[tokio::test]
async fn empty_inputs_are_400() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let app = app(svc.clone());
    for input in [
        json!(""),
        json!([]),
        json!(["a", ""]),
        json!([[]]),
        json!(["a", 1]),
    ] {
        let (status, e) = call(
            &app,
            "/v1/embeddings",
            json!({"model": embedder(), "input": input}),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{input}: {e}");
        assert_eq!(e["error"]["type"], "invalid_request_error", "{e}");
    }
    let (status, e) = call(
        &app,
        "/v1/embeddings",
        json!({"model": embedder(), "input": [4_000_000_000u32]}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    assert!(
        e["error"]["message"].to_string().contains("vocabulary"),
        "{e}"
    );
    let (status, e) = call(
        &app,
        "/api/embed",
        json!({"model": embedder(), "input": ["a", ""]}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    assert!(e["error"].is_string(), "Ollama's shape: {e}");
}

#[tokio::test]
async fn ollama_embed_and_embeddings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let app = app(svc.clone());
    // No input: the model loads, no vectors.
    let (status, load) = call(&app, "/api/embed", json!({"model": embedder()})).await;
    assert_eq!(status, StatusCode::OK, "{load}");
    assert_eq!(load["embeddings"], json!([]), "{load}");
    let text = "Ollama's clients ask this way";
    let (status, one) = call(
        &app,
        "/api/embed",
        json!({"model": embedder(), "input": text, "keep_alive": "1m",
               "options": {"temperature": 0}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(one["model"], embedder());
    assert_eq!(one["prompt_eval_count"], tokens(text).len());
    assert!(
        one["total_duration"].as_u64().is_some_and(|d| d > 0),
        "{one}"
    );
    assert!(one["load_duration"].is_u64(), "{one}");
    let v = floats(&one["embeddings"][0]);
    assert!((norm(&v) - 1.0).abs() < 1e-4);
    let openai = embed(&app, json!({"model": embedder(), "input": text})).await;
    assert!(cosine(&v, &openai[0]) > 0.9999);

    let (status, legacy) = call(
        &app,
        "/api/embeddings",
        json!({"model": embedder(), "prompt": text}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{legacy}");
    assert!(cosine(&floats(&legacy["embedding"]), &v) > 0.9999);
    let (status, empty) = call(
        &app,
        "/api/embeddings",
        json!({"model": embedder(), "prompt": ""}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{empty}");
    assert_eq!(empty["embedding"], json!([]));
}

#[tokio::test]
async fn a_chat_model_asked_for_embeddings_is_400_in_each_shape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let app = app(svc.clone());
    let (status, e) = call(
        &app,
        "/v1/embeddings",
        json!({"model": model_name(), "input": "hello"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    assert_eq!(e["error"]["type"], "invalid_request_error", "{e}");
    assert_eq!(e["error"]["param"], "model", "{e}");
    let message = e["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("generates text") && message.contains("embedding model"),
        "{e}"
    );
    for (path, body) in [
        (
            "/api/embed",
            json!({"model": model_name(), "input": "hello"}),
        ),
        ("/api/embed", json!({"model": model_name()})),
        (
            "/api/embeddings",
            json!({"model": model_name(), "prompt": "hello"}),
        ),
    ] {
        let (status, e) = call(&app, path, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {e}");
        let message = e["error"].as_str().unwrap_or_default();
        assert!(message.contains("does not make embeddings"), "{path}: {e}");
    }
}

#[tokio::test]
async fn an_embedding_model_asked_to_chat_is_400_in_each_shape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let app = app(svc.clone());
    let m = embedder();
    let messages = json!([{"role": "user", "content": "Hi"}]);
    let cases = [
        (
            "/v1/chat/completions",
            json!({"model": m, "messages": messages}),
        ),
        ("/v1/completions", json!({"model": m, "prompt": "Hi"})),
        ("/v1/responses", json!({"model": m, "input": "Hi"})),
        (
            "/v1/messages",
            json!({"model": m, "messages": messages, "max_tokens": 4}),
        ),
        (
            "/v1/messages/count_tokens",
            json!({"model": m, "messages": messages}),
        ),
        (
            "/api/chat",
            json!({"model": m, "messages": messages, "stream": false}),
        ),
        (
            "/api/generate",
            json!({"model": m, "prompt": "Hi", "stream": false}),
        ),
    ];
    for (path, body) in cases {
        let (status, e) = call(&app, path, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {e}");
        let message = match path {
            p if p.starts_with("/api/") => e["error"].as_str(),
            p if p.starts_with("/v1/messages") => {
                assert_eq!(e["type"], "error", "{path}: {e}");
                assert_eq!(e["error"]["type"], "invalid_request_error", "{path}: {e}");
                e["error"]["message"].as_str()
            }
            _ => {
                assert_eq!(e["error"]["type"], "invalid_request_error", "{path}: {e}");
                assert_eq!(e["error"]["param"], "model", "{path}: {e}");
                e["error"]["message"].as_str()
            }
        }
        .unwrap_or_default();
        assert!(
            message.contains("is an embedding model") && message.contains("/v1/embeddings"),
            "{path}: {e}"
        );
    }
}

#[tokio::test]
async fn listings_say_a_loaded_model_is_an_embedding_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let app = app(svc.clone());
    embed(&app, json!({"model": embedder(), "input": "load it"})).await;
    let (status, chat) = call(
        &app,
        "/v1/chat/completions",
        json!({"model": model_name(), "messages": [{"role": "user", "content": "Hi"}],
               "max_tokens": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{chat}");

    let (_, models) = json(app.clone().oneshot(get("/v1/models")).await.expect("r")).await;
    let kind_of = |id: &str| {
        models["data"]
            .as_array()
            .and_then(|d| d.iter().find(|m| m["id"] == id))
            .map(|m| m["kind"].clone())
    };
    assert_eq!(kind_of(&embedder()), Some(json!("embedding")), "{models}");
    assert_eq!(kind_of(&model_name()), Some(json!("chat")), "{models}");

    let (_, ps) = json(app.clone().oneshot(get("/api/ps")).await.expect("r")).await;
    let kinds: Vec<&Value> = ps["models"]
        .as_array()
        .map(|m| m.iter().map(|m| &m["kind"]).collect())
        .unwrap_or_default();
    assert_eq!(kinds.len(), 2, "{ps}");
    assert!(kinds.contains(&&json!("embedding")), "{ps}");

    let (status, show) = call(&app, "/api/show", json!({"model": embedder()})).await;
    assert_eq!(status, StatusCode::OK, "{show}");
    assert_eq!(show["capabilities"], json!(["embedding"]), "{show}");
    let (_, show) = call(&app, "/api/show", json!({"model": model_name()})).await;
    assert!(
        show["capabilities"]
            .as_array()
            .is_some_and(|c| c.contains(&json!("completion"))),
        "{show}"
    );
}

/// Qwen3-Embedding's query instruction: `input_type: "query"` (or `prompt_name: "query"`) puts
/// the model's named prompt before each text, as sentence-transformers' `prompt_name` does; a
/// model without prompts embeds the text as it is, and an unknown name is a 400 listing them.
#[tokio::test]
async fn the_models_query_prompt_goes_before_the_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app(service(dir.path()));
    let model = rmx_tests::encoders::encoder("qwen3_embedding", "f32");
    let model = model.to_string_lossy().into_owned();
    let st: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(&model).join("config_sentence_transformers.json"),
        )
        .expect("config_sentence_transformers.json"),
    )
    .expect("json");
    let instruction = st["prompts"]["query"].as_str().expect("a query prompt");
    assert!(instruction.starts_with("Instruct:"), "{instruction}");
    let text = "what is the boiling point of water?";
    let plain = embed(&app, json!({"model": model, "input": text})).await;
    let prefixed = embed(
        &app,
        json!({"model": model, "input": format!("{instruction}{text}")}),
    )
    .await;
    for body in [
        json!({"model": model, "input": text, "input_type": "query"}),
        json!({"model": model, "input": text, "input_type": "search_query"}),
        json!({"model": model, "input": text, "prompt_name": "query"}),
    ] {
        let v = embed(&app, body.clone()).await;
        assert!(cosine(&v[0], &prefixed[0]) > 0.999999, "{body}");
        assert!(
            cosine(&v[0], &plain[0]) < 0.9999,
            "{body}: the prompt changed nothing"
        );
    }
    // Its document prompt is empty: documents are embedded as they are.
    let doc = embed(
        &app,
        json!({"model": model, "input": text, "input_type": "document"}),
    )
    .await;
    assert!(cosine(&doc[0], &plain[0]) > 0.999999);
    let (status, err) = call(
        &app,
        "/v1/embeddings",
        json!({"model": model, "input": text, "prompt_name": "nope"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    let msg = err["error"]["message"].as_str().expect("message");
    assert!(msg.contains("document, query"), "{msg}");
    let (status, err) = call(
        &app,
        "/v1/embeddings",
        json!({"model": model, "input": text, "input_type": "poem"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    // A model without prompts: input_type changes nothing.
    let a = embed(&app, json!({"model": embedder(), "input": text})).await;
    let b = embed(
        &app,
        json!({"model": embedder(), "input": text, "input_type": "query"}),
    )
    .await;
    assert!(cosine(&a[0], &b[0]) > 0.999999);
}
