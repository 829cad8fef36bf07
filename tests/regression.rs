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
