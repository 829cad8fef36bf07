//! Regression tests, each named after the issue that found the bug, driving the real binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};

use rmx_tests::home::TestHome;

/// Issue #22: `rmx completions bash | head` panicked once `head` had gone ("failed to write
/// completion file"). The reader here is gone before rmx writes a byte, so every run hits it.
#[test]
fn issue_22_completions_into_a_closed_pipe_do_not_panic() {
    // A pipe whose only reader (`true`) has exited: writing to it fails with EPIPE.
    let mut reader = Command::new("true").stdin(Stdio::piped()).spawn().unwrap();
    let write_end = reader.stdin.take().unwrap();
    reader.wait().unwrap();
    let out = Command::new(rmx_tests::rmx())
        .args(["completions", "bash"])
        .stdout(Stdio::from(write_end))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
}

/// Issue #22, the same for every command that prints with `println!` (`rmx doctor --json |
/// head`): it panicked with "failed printing to stdout: Broken pipe".
#[test]
fn issue_22_printing_into_a_closed_pipe_does_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let mut reader = Command::new("true").stdin(Stdio::piped()).spawn().unwrap();
    let write_end = reader.stdin.take().unwrap();
    reader.wait().unwrap();
    let out = Command::new(rmx_tests::rmx())
        .args(["doctor", "--json"])
        .env("RMX_HOME", dir.path().join("home"))
        .env("HF_HUB_CACHE", dir.path().join("hub"))
        .env_remove("XDG_RUNTIME_DIR")
        .stdout(Stdio::from(write_end))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Issue #22: `rmx stop` of a model that was not loaded said nothing, exactly as when it
/// unloaded one. It says which happened, in text and in `--json`.
#[test]
fn issue_22_stop_says_whether_the_model_was_loaded() {
    let home = TestHome::new();
    let model = rmx_tests::models::tiny_qwen3().display().to_string();
    let stop = |json: bool| {
        let mut args = vec!["stop", model.as_str()];
        if json {
            args.push("--json");
        }
        let out = home.run(&args);
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(if json { &out.stdout } else { &out.stderr });
        text.into_owned()
    };
    // No daemon yet.
    assert!(stop(false).contains("is not loaded"));
    // A daemon, the model answered and unloaded at once.
    home.ok(&[
        "run",
        &model,
        "Hi",
        "--max-tokens",
        "2",
        "--keep-alive",
        "0",
    ]);
    assert!(stop(false).contains("is not loaded"));
    let v: serde_json::Value = serde_json::from_str(&stop(true)).unwrap();
    assert_eq!(v["stopped"], false, "{v}");
    // Loaded, then stopped.
    home.ok(&["run", &model, "Hi", "--max-tokens", "2"]);
    assert_eq!(home.ps().len(), 1);
    let v: serde_json::Value = serde_json::from_str(&stop(true)).unwrap();
    assert_eq!(v, serde_json::json!({"model": model, "stopped": true}));
    home.ok(&["run", &model, "Hi", "--max-tokens", "2"]);
    assert!(stop(false).contains(&format!("stopped `{model}`")));
}

/// Issue #22: after `rmx agents codex --setup`, `rmx agents` showed Codex as installed: the
/// setup had created `~/.codex/config.toml`, and that folder counted as proof. Only signs the
/// tool left itself count.
#[test]
fn issue_22_agents_setup_does_not_make_codex_installed() {
    let dir = tempfile::tempdir().unwrap();
    let codex_home = dir.path().join("codex-home");
    let agents = |args: &[&str]| {
        let out = Command::new(rmx_tests::rmx())
            .arg("agents")
            .args(args)
            .env_clear()
            .env("HOME", dir.path())
            .env("RMX_HOME", dir.path().join(".rmx"))
            .env("CODEX_HOME", &codex_home)
            .env("PATH", "/usr/bin:/bin")
            .env("RMX_HOST", "127.0.0.1:9")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(agents(&["codex"]).contains("installed: no"));
    agents(&["codex", "--setup", "-y"]);
    assert!(codex_home.join("config.toml").is_file());
    let shown = agents(&["codex"]);
    assert!(shown.contains("installed: no"), "{shown}");
    assert!(shown.contains("uses rmx:  yes"), "{shown}");
    // What Codex itself writes there does show it.
    std::fs::write(codex_home.join("auth.json"), "{}").unwrap();
    assert!(agents(&["codex"]).contains("installed: yes"));
}

/// The tiny qwen3 GGUF rmx-gguf's tests make (llama.cpp's layout, the real Qwen3 tokenizer),
/// written into `dir`.
fn tiny_gguf(dir: &std::path::Path) -> std::path::PathBuf {
    let fixtures =
        std::env::var("RMX_TEST_FIXTURES").expect("RMX_TEST_FIXTURES (scripts/test-env.sh)");
    let script = rmx_tests::repo_root().join("crates/rmx-gguf/tests/py/make_tiny_gguf.py");
    let out = Command::new(rmx_tests::python())
        .arg(script)
        .arg("qwen3")
        .arg(std::path::Path::new(&fixtures).join("npm/tokenizer-qwen3/models"))
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "make_tiny_gguf.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join("model.gguf")
}

/// The folders `rmx import` left in the home's `models/`.
fn imported(home: &TestHome) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(home.home().join("models"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Issue #20: `rmx import` left its converted model (269 MB for SmolLM2) in `$RMX_HOME/models`
/// when the alias file could not be written: a folder no command could name or remove. And it
/// imported GGUF metadata of 0xFFFFFFFF, which then failed to load. Both now fail the import
/// with a message that says why, and nothing left behind; a model an import was to replace
/// (`--force`) is kept.
#[test]
fn issue_20_a_failed_import_leaves_nothing_behind() {
    let home = TestHome::new();
    let work = tempfile::tempdir().unwrap();
    let gguf = tiny_gguf(work.path());
    let gguf = gguf.to_str().unwrap();
    // The alias file cannot be written: a folder stands where it is written first.
    let obstacle = home.home().join("aliases.toml.tmp");
    std::fs::create_dir_all(&obstacle).unwrap();
    let out = home.run(&["import", gguf, "--name", "tiny"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("the converted model was removed"),
        "{stderr}"
    );
    assert_eq!(imported(&home), Vec::<String>::new(), "{stderr}");

    std::fs::remove_dir(&obstacle).unwrap();
    home.ok(&["import", gguf, "--name", "tiny"]);
    std::fs::create_dir_all(&obstacle).unwrap();
    let out = home.run(&["import", gguf, "--name", "tiny", "--force"]);
    assert!(!out.status.success());
    assert_eq!(imported(&home), vec!["tiny".to_string()]);
    assert!(home.home().join("models/tiny/model.safetensors").is_file());
    std::fs::remove_dir(&obstacle).unwrap();
    assert!(home.ok(&["ls"]).contains("tiny"));

    // A layer count of 0xFFFFFFFF: GGUF stores the key (u64 length, bytes), the value's type
    // (u32 4, UINT32), the value.
    let mut bytes = std::fs::read(gguf).unwrap();
    let key = "qwen3.block_count";
    let mut needle = (key.len() as u64).to_le_bytes().to_vec();
    needle.extend(key.as_bytes());
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
        .unwrap()
        + needle.len();
    assert_eq!(bytes[at..at + 4], 4u32.to_le_bytes());
    bytes[at + 4..at + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    let broken = work.path().join("broken.gguf");
    std::fs::write(&broken, bytes).unwrap();
    let out = home.run(&["import", broken.to_str().unwrap(), "--name", "broken"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("qwen3.block_count") && stderr.contains("4294967295"),
        "{stderr}"
    );
    assert_eq!(imported(&home), vec!["tiny".to_string()], "{stderr}");
}
