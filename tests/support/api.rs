//! The tiny Qwen3 the HTTP suites share (random weights, the real Qwen3 tokenizer and chat
//! template, a 512-token context; `py/make_tiny_qwen3.py` writes it), copies of it with
//! other chat templates, tiny models scripted to write fixed replies, and the tiny Qwen3 read
//! as an embedding model.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

use crate::python;

/// The tiny model's context: small, so "prompt longer than the context" is cheap to provoke.
pub const CONTEXT: usize = 512;

/// A tiny model of `family` whose weights make it write fixed replies (tiny_models.py `make`
/// with `args`, e.g. `--script TEXT`), built into target/tmp as `name` once per run (`cell`).
pub fn scripted_model(cell: &OnceLock<PathBuf>, name: &str, family: &str, args: &[&str]) -> String {
    static BUILDING: Mutex<()> = Mutex::new(());
    let _guard = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
    cell.get_or_init(|| {
        let dir = crate::target_tmp(name);
        let tmp = dir.with_extension("tmp");
        let _ = std::fs::remove_dir_all(&tmp);
        let mut make = vec!["make", "--family", family, "--quant", "f32"];
        make.extend_from_slice(args);
        make.extend_from_slice(&["--out", tmp.to_str().expect("a UTF-8 target folder")]);
        crate::models::run(&make);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&tmp, &dir).expect("move the model in place");
        dir
    })
    .to_string_lossy()
    .into_owned()
}

/// A tiny random Qwen3 (real Qwen3 tokenizer and template, [`CONTEXT`] tokens), built once
/// and kept in target/tmp.
pub fn tiny_model() -> PathBuf {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    static BUILDING: Mutex<()> = Mutex::new(());
    let _guard = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
    MODEL
        .get_or_init(|| {
            let dir = crate::target_tmp(&format!("api-tiny-qwen3-ctx{CONTEXT}"));
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
                .arg(crate::py("make_tiny_qwen3.py"))
                .arg(&tmp)
                .arg(CONTEXT.to_string())
                .current_dir(crate::repo_root())
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

/// The most tokens an input to [`tiny_embedder`] may have (its `max_seq_length`): small, so
/// "input too long" is cheap to provoke.
pub const EMBED_LIMIT: usize = 32;

/// The tiny f32 Qwen3's files linked (not copied) into `target/tmp/<name>-<generator hash>`
/// (a new tiny Qwen3 gets new links), with `extra` files (path, JSON) written beside them.
/// Other test processes may build it at the same time: each in its own folder, renamed into
/// place (the loser's rename fails and it uses the winner's).
fn linked_tiny_qwen3(name: &str, extra: &[(&str, Value)]) -> PathBuf {
    let src = crate::models::model("qwen3", "f32");
    let hash = src
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = crate::target_tmp(&format!("{name}-{hash}"));
    if dir.join("config.json").exists() {
        return dir;
    }
    let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).expect("mkdir");
    for entry in std::fs::read_dir(&src).expect("read model dir") {
        let entry = entry.expect("entry");
        let from = std::fs::canonicalize(entry.path()).expect("canonical");
        std::os::unix::fs::symlink(from, tmp.join(entry.file_name())).expect("link");
    }
    for (file, v) in extra {
        let path = tmp.join(file);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
        std::fs::write(path, v.to_string()).expect("write");
    }
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    dir
}

/// The tiny f32 Qwen3 read as an embedding model, the way Qwen3-Embedding's folder reads: a
/// sentence-transformers `modules.json` (last-token pooling, then Normalize) and a
/// `sentence_bert_config.json` of [`EMBED_LIMIT`] tokens beside the model's own files. Kept in
/// target/tmp.
pub fn tiny_embedder() -> PathBuf {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            linked_tiny_qwen3(
                &format!("api-embedding-{EMBED_LIMIT}"),
                &[
                    (
                        "modules.json",
                        serde_json::json!([
                            {"idx": 0, "name": "0", "path": "",
                             "type": "sentence_transformers.models.Transformer"},
                            {"idx": 1, "name": "1", "path": "1_Pooling",
                             "type": "sentence_transformers.models.Pooling"},
                            {"idx": 2, "name": "2", "path": "2_Normalize",
                             "type": "sentence_transformers.models.Normalize"}
                        ]),
                    ),
                    (
                        "1_Pooling/config.json",
                        serde_json::json!({"word_embedding_dimension": 64,
                                           "pooling_mode_lasttoken": true}),
                    ),
                    (
                        "sentence_bert_config.json",
                        serde_json::json!({"max_seq_length": EMBED_LIMIT, "do_lower_case": false}),
                    ),
                ],
            )
        })
        .clone()
}

/// The tiny f32 Qwen3 read as a reranker (Qwen3-Reranker's files are a chat model's; its name
/// tells): its files linked into a folder named `Qwen3-Reranker-…`. Kept in target/tmp.
pub fn tiny_reranker() -> PathBuf {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL
        .get_or_init(|| linked_tiny_qwen3("Qwen3-Reranker-tiny", &[]))
        .clone()
}
