//! The official Python clients (`openai`, `anthropic`, `ollama` from PyPI, pinned in
//! scripts/requirements-test.txt) against the real daemon (`rmx serve` in a throwaway home) on
//! a real TCP port, on the API suites' tiny Qwen3 (images: the tiny Gemma 3 VLM). Each script
//! asserts its own checks and prints `ok <check>` per check passed.
//!
//! These need RMX_TEST_PYTHON (`. scripts/test-env.sh`) and fail without it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use rmx_tests::api::model_name;
use rmx_tests::home::TestHome;
use rmx_tests::{py, python};

/// `rmx serve` in a fresh home, listening on the home's port; dropping it stops the daemon.
struct Server {
    home: TestHome,
    daemon: Child,
    base: String,
}

impl Server {
    /// Its clients name the test models by their folders (all in target/tmp), which requests
    /// over TCP may only under the daemon's model roots.
    fn start() -> Server {
        let roots = model_roots();
        Server::start_in(TestHome::new().with_env("RMX_MODEL_ROOTS", &roots))
    }

    /// `rmx serve` in `home`, set up by the caller.
    fn start_in(home: TestHome) -> Server {
        let daemon = home
            .cmd(&["serve"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start rmx serve");
        let addr = format!("127.0.0.1:{}", home.port);
        home.wait_until("the daemon to listen", Duration::from_secs(60), || {
            TcpStream::connect(&addr).is_ok()
        });
        Server {
            home,
            daemon,
            base: format!("http://{addr}"),
        }
    }
}

/// The folder the API suites' tiny models are built in.
fn model_roots() -> String {
    let model = rmx_tests::api::tiny_model();
    let root = model
        .parent()
        .expect("the tiny model's folder has a parent");
    root.to_string_lossy().into_owned()
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

fn run(script: &str) -> String {
    run_with(script, &[])
}

/// `script BASE ARGS...` against `server`: the script's stdout (it must succeed).
fn run_on(server: &Server, script: &str, args: &[&str]) -> String {
    let out = Command::new(python())
        .arg(py(script))
        .arg(&server.base)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {script}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{script} failed\n--- stdout\n{stdout}\n--- stderr\n{}\n--- daemon log\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.home.log()
    );
    eprintln!("{script}:\n{stdout}");
    stdout
}

/// `script BASE MODEL ALIAS...`, each alias a user alias (`rmx alias add`) naming the model's
/// folder.
fn run_with(script: &str, aliases: &[&str]) -> String {
    let model = model_name();
    let server = Server::start();
    for alias in aliases {
        server.home.ok(&["alias", "add", alias, &model]);
    }
    let mut args = vec![model.as_str()];
    args.extend_from_slice(aliases);
    run_on(&server, script, &args)
}

fn assert_checks(stdout: &str, checks: &[&str]) {
    for c in checks {
        assert!(
            stdout.lines().any(|l| l == format!("ok {c}")),
            "check `{c}` did not run:\n{stdout}"
        );
    }
}

#[test]
fn py_openai_client() {
    let out = run("openai_client.py");
    assert_checks(
        &out,
        &[
            "chat whole",
            "chat stream equals whole, usage chunk",
            "tools accepted and rendered, tool history",
            "response_format json_object enforced",
            "tool_choice required and named enforced",
            "logprobs",
            "response_format, stop, penalties, chat_template_kwargs",
            "completions stream equals whole",
            "models list and retrieve",
            "responses whole and stream",
            "responses with codex-style items and tools",
            "errors",
        ],
    );
}

#[test]
fn py_anthropic_client() {
    let out = run("anthropic_client.py");
    assert_checks(
        &out,
        &[
            "messages whole",
            "event order, stream equals whole",
            "stop_sequences",
            "stream helper",
            "tools accepted and rendered, tool history",
            "tool_choice any and tool enforced",
            "count_tokens",
            "/messages without /v1",
            "errors",
        ],
    );
}

/// Issue #20: every response, chunk and event of chat, completions, Responses and messages
/// (and models, errors) validated against the `openai` and `anthropic` packages' own pydantic
/// types in strict mode; a scripted Qwen3.5 that thinks and then calls a tool gives the
/// reasoning and tool-call shapes.
#[test]
fn py_strict_types() {
    static SCRIPTED: OnceLock<PathBuf> = OnceLock::new();
    let scripts = serde_json::json!([
        ["assistant\n", "<think>The user wants the weather.</think><tool_call><function=get_weather><parameter=city>Paris</tool_call><|im_end|>"],
        ["</think>\n\n", "Sunny in Paris!<|im_end|>"],
    ]);
    let scripted = rmx_tests::api::scripted_model(
        &SCRIPTED,
        "qwen3_5-scripted-strict",
        "qwen3_5",
        &["--scripts", &scripts.to_string()],
    );
    let out = run_on(
        &Server::start(),
        "strict_types.py",
        &[&model_name(), &scripted],
    );
    assert_checks(
        &out,
        &[
            "chat and chunks",
            "completions and chunks",
            "responses and events",
            "messages, events, count_tokens",
            "models",
            "errors",
        ],
    );
}

/// Issue #27: the three clients send images (an `image_url` data URI, a base64 image block,
/// Ollama's `images`) to the tiny Gemma 3 VLM and get the same greedy answer, which another
/// image changes; an image for the text-only tiny Qwen3 is each client's 400.
#[test]
fn py_vision_clients() {
    let vlm = rmx_tests::models::tiny_vlm("f32");
    let roots = std::env::join_paths([
        PathBuf::from(model_roots()),
        vlm.parent().expect("a parent").to_path_buf(),
    ])
    .expect("join the model roots");
    let home = TestHome::new().with_env("RMX_MODEL_ROOTS", &roots.to_string_lossy());
    let server = Server::start_in(home);
    let out = run_on(
        &server,
        "vision_clients.py",
        &[&vlm.to_string_lossy(), &model_name()],
    );
    assert_checks(
        &out,
        &[
            "openai image_url data URI",
            "anthropic base64 image",
            "ollama images on chat and generate",
            "errors",
        ],
    );
}

/// The tags check finds the tiny model under a user alias (what `rmx alias add` and
/// `rmx import` register), with its details.
#[test]
fn py_ollama_client() {
    let out = run_with("ollama_client.py", &["tiny-alias"]);
    assert_checks(
        &out,
        &[
            "chat whole and stream",
            "generate whole and stream",
            "format json enforced",
            "tags",
            "ps",
            "show",
            "folders outside the model roots",
        ],
    );
}

/// Issue #23: the OpenAI SDK's `embeddings.create` (base64 by default, float, dimensions) and
/// the Ollama client's `embed` and `embeddings`, on the tiny Qwen3 read as an embedding model;
/// then `rmx embed` against the same daemon.
#[test]
fn py_embeddings_clients_and_rmx_embed() {
    let model = rmx_tests::api::tiny_embedder()
        .to_string_lossy()
        .into_owned();
    let server = Server::start();
    let stdout = run_on(&server, "embeddings_client.py", &[&model, &model_name()]);
    assert_checks(
        &stdout,
        &[
            "embeddings default (base64 decoded by the SDK)",
            "embeddings float and explicit base64 equal",
            "embeddings one input, dimensions",
            "embeddings errors",
            "ollama embed and embeddings",
        ],
    );

    // `rmx embed`: one JSON array per input per line, in order, stdin lines when no text.
    let lines = server
        .home
        .ok(&["embed", &model, "first text", "second text"]);
    let vectors: Vec<Vec<f32>> = lines
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON array per line"))
        .collect();
    assert_eq!(vectors.len(), 2, "{lines}");
    assert!(vectors.iter().all(|v| v.len() == 64), "{lines}");
    let mut piped = server
        .home
        .cmd(&["embed", &model, "--dimensions", "8"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("rmx embed");
    std::io::Write::write_all(
        piped.stdin.as_mut().expect("stdin"),
        b"second text\n\nfirst text\n",
    )
    .expect("write");
    drop(piped.stdin.take());
    let out = piped.wait_with_output().expect("rmx embed");
    assert!(out.status.success());
    let cut: Vec<Vec<f32>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON array per line"))
        .collect();
    assert_eq!(cut.len(), 2, "blank lines are no input");
    assert_eq!(cut[0].len(), 8);
    let unit: f32 = cut[1].iter().map(|x| x * x).sum();
    assert!((unit - 1.0).abs() < 1e-4, "{cut:?}");
    let json: serde_json::Value =
        serde_json::from_str(&server.home.ok(&["embed", &model, "--json", "one"]))
            .expect("--json is JSON");
    assert_eq!(json["object"], "list");
    assert_eq!(
        json["data"][0]["embedding"].as_array().map(Vec::len),
        Some(64)
    );
    assert!(json["usage"]["prompt_tokens"]
        .as_u64()
        .is_some_and(|n| n > 0));
    let refused = server.home.run(&["embed", &model_name(), "hello"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("does not make embeddings"), "{stderr}");
}

#[test]
fn py_openapi_is_valid_openapi_3_1() {
    let python = python();
    let server = Server::start();
    let base = &server.base;
    let code = format!(
        "import json, urllib.request\n\
         from openapi_spec_validator import validate\n\
         from openapi_spec_validator.validation.exceptions import OpenAPIValidationError\n\
         spec = json.load(urllib.request.urlopen('{base}/openapi.json'))\n\
         assert spec['openapi'] == '3.1.0'\n\
         validate(spec)\n\
         print('ok openapi', len(spec['paths']))\n"
    );
    let out = Command::new(&python)
        .arg("-c")
        .arg(code)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "openapi validation failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
