//! Issue #20: a model the client named whose files cannot be loaded (truncated weights, a
//! config with zero attention heads) is answered with a 400 in each API's shape naming the
//! model and what is wrong, not a 500; and the daemon goes on serving the models that load.
//! The zero-heads config used to panic the engine thread.

mod common_api;

use std::path::{Path, PathBuf};

use axum::http::StatusCode;
use common_api::{app, call, model_name, tiny_model};
use serde_json::{json, Value};

/// A copy of the tiny model in `dir/name`, `edit` applied to the copy's folder.
fn broken_copy(dir: &Path, name: &str, edit: impl FnOnce(&Path)) -> PathBuf {
    let out = dir.join(name);
    std::fs::create_dir_all(&out).expect("mkdir");
    for entry in std::fs::read_dir(tiny_model()).expect("read model dir") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() {
            std::fs::copy(entry.path(), out.join(entry.file_name())).expect("copy");
        }
    }
    edit(&out);
    out
}

fn truncated_weights(dir: &Path) {
    let path = dir.join("model.safetensors");
    let bytes = std::fs::read(&path).expect("read weights");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("write weights");
}

fn zero_heads(dir: &Path) {
    let path = dir.join("config.json");
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read config")).expect("config");
    config["num_attention_heads"] = json!(0);
    std::fs::write(&path, config.to_string()).expect("write config");
}

#[tokio::test]
async fn issue_20_a_model_whose_files_do_not_load_is_a_400_naming_it() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(common_api::service(home.path()));
    let cases = [
        (
            broken_copy(home.path(), "truncated", truncated_weights),
            "model.safetensors",
        ),
        (
            broken_copy(home.path(), "zero-heads", zero_heads),
            "num_attention_heads",
        ),
    ];
    let messages = json!([{"role": "user", "content": "hi"}]);
    for (dir, reason) in &cases {
        let model = dir.to_string_lossy().into_owned();
        let names_it = |m: &str| m.contains(&model) && m.contains(reason);

        let req = json!({"model": model, "messages": messages, "max_tokens": 2});
        let (status, body) = call(&app, "/v1/chat/completions", req).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let e = &body["error"];
        assert_eq!(e["type"], "invalid_request_error", "{body}");
        assert_eq!(e["param"], "model", "{body}");
        assert_eq!(e["code"], "model_load_failed", "{body}");
        assert!(
            names_it(e["message"].as_str().unwrap_or_default()),
            "{body}"
        );

        let req = json!({"model": model, "messages": messages, "max_tokens": 2});
        let (status, body) = call(&app, "/v1/messages", req).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
        assert!(
            names_it(body["error"]["message"].as_str().unwrap_or_default()),
            "{body}"
        );

        let req = json!({"model": model, "messages": messages, "stream": false});
        let (status, body) = call(&app, "/api/chat", req).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            names_it(body["error"].as_str().unwrap_or_default()),
            "{body}"
        );
    }

    // The daemon goes on serving: the model that loads answers.
    let req = json!({"model": model_name(), "messages": messages, "max_tokens": 2});
    let (status, body) = call(&app, "/v1/chat/completions", req).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// Issue #20: a FIFO where a weight file should be made the load wait in `open` for a writer
/// that never comes, and the daemon's shutdown with it. It is refused at once, naming the file.
#[tokio::test]
async fn issue_20_a_fifo_for_weights_is_refused_not_waited_on() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(common_api::service(home.path()));
    let fifo_weights = |dir: &Path| {
        let path = dir.join("model.safetensors");
        std::fs::remove_file(&path).expect("remove the weights");
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("run mkfifo");
        assert!(made.success(), "mkfifo failed");
    };
    let dir = broken_copy(home.path(), "fifo", fifo_weights);
    let model = dir.to_string_lossy().into_owned();
    let req = json!({"model": model, "messages": [{"role": "user", "content": "hi"}],
                     "max_tokens": 2});
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        call(&app, "/v1/chat/completions", req),
    )
    .await;
    let Ok((status, body)) = answer else {
        // Let the waiting load go (it reads an empty file) before failing.
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("model.safetensors"));
        panic!("the load waited on the FIFO");
    };
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "model_load_failed", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&model) && message.contains("is not a regular file"),
        "{body}"
    );
}
