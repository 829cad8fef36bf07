//! Helpers for the OpenAI/Anthropic API tests: a tiny random Qwen3 with the real tokenizer,
//! a service over a throwaway store, the router for `oneshot`, and a real server on a TCP port.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use rmx_api::KeepAlive;
use rmx_server::{Service, ServiceConfig};
use rmx_store::{Store, StoreConfig};
use serde_json::Value;

/// The tiny model's context: small, so "prompt longer than the context" is cheap to provoke.
pub const CONTEXT: usize = 512;

/// The Python with mlx-lm and the API clients; a test that needs it fails without it.
pub fn python() -> String {
    match std::env::var("RMX_TEST_PYTHON") {
        Ok(p) if !p.is_empty() => p,
        _ => panic!(
            "RMX_TEST_PYTHON is not set: this test needs the test venv (mlx-lm and the openai, anthropic \
             and ollama clients). Run `. scripts/test-env.sh` first, or scripts/test.sh."
        ),
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn py_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py")
}

/// A tiny model of `family` whose weights make it write fixed replies (tiny_models.py `make`
/// with `args`, e.g. `--script TEXT`), built into the test binary's temp folder as `name` once
/// per run (`cell`).
pub fn scripted_model(cell: &OnceLock<PathBuf>, name: &str, family: &str, args: &[&str]) -> String {
    static BUILDING: Mutex<()> = Mutex::new(());
    let _guard = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
    cell.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
        let tmp = dir.with_extension("tmp");
        let _ = std::fs::remove_dir_all(&tmp);
        let tiny_models = repo_root().join("crates/rmx-models/tests/py/tiny_models.py");
        let out = Command::new(python())
            .arg(tiny_models)
            .args(["make", "--family", family, "--quant", "f32"])
            .args(args)
            .arg("--out")
            .arg(&tmp)
            .output()
            .expect("run tiny_models.py");
        assert!(
            out.status.success(),
            "tiny_models.py failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&tmp, &dir).expect("move the model in place");
        dir
    })
    .to_string_lossy()
    .into_owned()
}

/// A tiny random Qwen3 (real Qwen3 tokenizer and template), built once per test binary run.
pub fn tiny_model() -> PathBuf {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    static BUILDING: Mutex<()> = Mutex::new(());
    let _guard = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
    MODEL
        .get_or_init(|| {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("api-tiny-qwen3-ctx{CONTEXT}"));
            if dir.join("model.safetensors").exists() && dir.join("tokenizer_config.json").exists() {
                return dir;
            }
            let python = python();
            assert!(
                std::env::var("RMX_TEST_FIXTURES").is_ok_and(|f| !f.is_empty()),
                "RMX_TEST_FIXTURES is not set: run `. scripts/test-env.sh` (it fetches the Qwen3 tokenizer)"
            );
            let tmp = dir.with_extension("tmp");
            let _ = std::fs::remove_dir_all(&tmp);
            let out = Command::new(&python)
                .arg(py_dir().join("make_tiny_qwen3.py"))
                .arg(&tmp)
                .arg(CONTEXT.to_string())
                .current_dir(repo_root())
                .output()
                .expect("run make_tiny_qwen3.py");
            assert!(
                out.status.success(),
                "make_tiny_qwen3.py failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::rename(&tmp, &dir).expect("move the tiny model in place");
            dir
        })
        .clone()
}

/// A copy of the tiny model in `dir/variant` whose chat template is `template`.
pub fn with_template(dir: &Path, template: &str) -> PathBuf {
    let src = tiny_model();
    let out = dir.join("variant");
    std::fs::create_dir_all(&out).expect("mkdir");
    for entry in std::fs::read_dir(&src).expect("read model dir") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() {
            std::fs::copy(entry.path(), out.join(entry.file_name())).expect("copy");
        }
    }
    let path = out.join("tokenizer_config.json");
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read config")).expect("config");
    config["chat_template"] = serde_json::json!(template);
    std::fs::write(&path, config.to_string()).expect("write config");
    let _ = std::fs::remove_file(out.join("chat_template.jinja"));
    out
}

/// The name requests use for the tiny model: its folder.
pub fn model_name() -> String {
    tiny_model().to_string_lossy().into_owned()
}

/// A service over an empty store in `home` (models are asked for by folder).
pub fn service(home: &Path) -> Arc<Service> {
    let store = Store::new(StoreConfig::new(
        home.join("hub"),
        home.join("rmx"),
        "http://127.0.0.1:9",
    ));
    Service::new(ServiceConfig {
        store,
        default_keep_alive: KeepAlive::from_env(),
        max_loaded_models: 2,
        memory_budget: 8 << 30,
    })
}

pub fn app(service: Arc<Service>) -> Router {
    rmx_server::router(service)
}

pub fn post(path: &str, body: impl Into<Body>) -> Request<Body> {
    Request::post(path)
        .header("content-type", "application/json")
        .body(body.into())
        .expect("request")
}

pub fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).expect("request")
}

/// Status and JSON body of a response (panics with the text when it is not JSON).
pub async fn json(resp: axum::response::Response) -> (StatusCode, Value) {
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, value)
}

/// POSTs `body` as JSON to `path` on `app`: the status and JSON body.
pub async fn call(app: &Router, path: &str, body: Value) -> (StatusCode, Value) {
    use tower::ServiceExt;
    json(
        app.clone()
            .oneshot(post(path, body.to_string()))
            .await
            .expect("response"),
    )
    .await
}

/// POSTs `body` with `"stream": true` to `path` on `app`; requires a 200 and returns the SSE text.
pub async fn stream(app: &Router, path: &str, mut body: Value) -> String {
    use tower::ServiceExt;
    body["stream"] = Value::Bool(true);
    let resp = app
        .clone()
        .oneshot(post(path, body.to_string()))
        .await
        .expect("response");
    let (status, sse) = text(resp).await;
    assert_eq!(status, StatusCode::OK, "{sse}");
    sse
}

/// The JSON chunks of an OpenAI SSE body (`data: {...}` events; the closing `[DONE]` left out).
pub fn sse_chunks(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|ev| ev.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).expect("chunk"))
        .collect()
}

/// What an OpenAI chat stream carried, its deltas joined: reasoning, content, the tool calls'
/// names and arguments, and the last finish reason.
#[derive(Debug, Default)]
pub struct ChatStream {
    pub reasoning: String,
    pub content: String,
    pub names: String,
    pub args: String,
    pub finish: Value,
}

pub fn chat_stream(body: &str) -> ChatStream {
    let mut out = ChatStream::default();
    for c in sse_chunks(body) {
        let delta = &c["choices"][0]["delta"];
        out.reasoning
            .push_str(delta["reasoning_content"].as_str().unwrap_or(""));
        out.content
            .push_str(delta["content"].as_str().unwrap_or(""));
        for tc in delta["tool_calls"].as_array().into_iter().flatten() {
            out.names
                .push_str(tc["function"]["name"].as_str().unwrap_or(""));
            out.args
                .push_str(tc["function"]["arguments"].as_str().unwrap_or(""));
        }
        if !c["choices"][0]["finish_reason"].is_null() {
            out.finish = c["choices"][0]["finish_reason"].clone();
        }
    }
    out
}

/// An Anthropic stream's `content_block_delta`s of delta type `kind`, their `field` joined
/// (`thinking_delta`/`thinking`, `text_delta`/`text`, `input_json_delta`/`partial_json`).
pub fn anthropic_deltas(body: &str, kind: &str, field: &str) -> String {
    sse_named(body)
        .iter()
        .filter(|(name, data)| name == "content_block_delta" && data["delta"]["type"] == kind)
        .filter_map(|(_, data)| data["delta"][field].as_str().map(String::from))
        .collect()
}

/// The items of the array `list` whose `type` is `kind` (Responses output, Anthropic content).
pub fn of_type<'a>(list: &'a Value, kind: &str) -> Vec<&'a Value> {
    list.as_array()
        .expect("an array")
        .iter()
        .filter(|b| b["type"] == kind)
        .collect()
}

pub async fn text(resp: axum::response::Response) -> (StatusCode, String) {
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// The router served on a real TCP port on loopback, on its own runtime thread; returns the
/// base URL (`http://127.0.0.1:PORT`). The server lives until the process ends.
pub fn serve(app: Router) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = listener.local_addr().expect("addr");
            let _ = tx.send(format!("http://{addr}"));
            let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
            axum::serve(listener, app).await.expect("serve");
        });
    });
    rx.recv().expect("server address")
}

/// The `(event name, JSON data)` pairs of a named-event SSE body (Anthropic's stream, OpenAI's
/// Responses stream).
pub fn sse_named(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter_map(|ev| {
            let name = ev.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data = ev.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((name.to_string(), serde_json::from_str(data).ok()?))
        })
        .collect()
}
