//! `rmx doctor` on a healthy set-up passes, and each planted fault is reported with its fix:
//! no MLX runtime, a stale daemon socket, a truncated model file, a partial download, a broken
//! aliases file. Runs the real binary with a temporary RMX_HOME and HF_HUB_CACHE.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output};

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let s = Setup {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(s.rmx_home()).unwrap();
        std::fs::create_dir_all(s.hub()).unwrap();
        s
    }

    fn rmx_home(&self) -> PathBuf {
        self.dir.path().join("rmx-home")
    }

    fn hub(&self) -> PathBuf {
        self.dir.path().join("hub")
    }

    /// With no XDG_RUNTIME_DIR, the daemon's socket is `$RMX_HOME/rmx.sock`
    /// (rmx_api::home::DaemonPaths).
    fn socket(&self) -> PathBuf {
        self.rmx_home().join("rmx.sock")
    }

    fn doctor(&self, extra_env: &[(&str, &str)], json: bool) -> Output {
        let mut cmd = Command::new(rmx_tests::rmx());
        cmd.arg("doctor")
            .env_clear()
            .env("HOME", self.dir.path())
            .env("RMX_HOME", self.rmx_home())
            .env("HF_HUB_CACHE", self.hub())
            // A port nothing listens on: the test must not depend on daemons of other tests.
            .env("RMX_HOST", "127.0.0.1:9")
            .envs(extra_env.iter().copied());
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        eprintln!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// A model in the Hub cache layout: refs/main, a snapshot with config.json and one
    /// safetensors file holding a 2x2 f32 tensor (cut to `keep` data bytes when given).
    fn add_model(&self, repo: &str, keep: Option<usize>) -> PathBuf {
        let repo_dir = self
            .hub()
            .join(format!("models--{}", repo.replace('/', "--")));
        let commit = "0123456789abcdef0123456789abcdef01234567";
        std::fs::create_dir_all(repo_dir.join("refs")).unwrap();
        std::fs::write(repo_dir.join("refs/main"), commit).unwrap();
        let snap = repo_dir.join("snapshots").join(commit);
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::write(snap.join("config.json"), r#"{"model_type": "llama"}"#).unwrap();
        let header = br#"{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        bytes.extend_from_slice(&[0u8; 16][..keep.unwrap_or(16)]);
        std::fs::write(snap.join("model.safetensors"), bytes).unwrap();
        repo_dir
    }
}

fn lines(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The finding line that mentions `needle`, and the fix line after it.
fn finding<'a>(text: &'a str, level: &str, needle: &str) -> (&'a str, &'a str) {
    let all: Vec<&str> = text.lines().collect();
    let i = all
        .iter()
        .position(|l| l.starts_with(level) && l.contains(needle))
        .unwrap_or_else(|| panic!("no {level} line about {needle:?} in:\n{text}"));
    let fix = all.get(i + 1).copied().unwrap_or("");
    assert!(fix.contains("fix:"), "no fix after {:?}", all[i]);
    (all[i], fix)
}

#[test]
fn a_healthy_setup_passes() {
    let s = Setup::new();
    s.add_model("mlx-community/tiny-test", None);
    std::fs::write(
        s.rmx_home().join("aliases.toml"),
        "[[alias]]\nname = \"tiny\"\nrepo = \"mlx-community/tiny-test\"\n",
    )
    .unwrap();
    let out = s.doctor(&[], false);
    let text = lines(&out);
    assert!(
        out.status.success(),
        "doctor failed on a healthy set-up:\n{text}"
    );
    assert!(!text.contains("FAIL "), "{text}");
    assert!(text.contains("PASS mlx"));
    assert!(text.contains("2x2 matmul"));
    assert!(text.contains("1 of 1 models"));
    assert!(text.contains("1 user aliases"));

    let json: serde_json::Value = serde_json::from_slice(&s.doctor(&[], true).stdout).unwrap();
    assert_eq!(json["ok"], true);
    let checks = json["checks"].as_array().unwrap();
    for name in ["mlx", "memory", "disk", "daemon", "models", "config"] {
        assert!(checks.iter().any(|c| c["check"] == name), "no {name} check");
    }
}

#[test]
fn a_missing_mlx_runtime_fails_with_the_fix() {
    let s = Setup::new();
    let empty = s.dir.path().join("no-mlx-here");
    std::fs::create_dir_all(&empty).unwrap();
    let out = s.doctor(&[("RMX_DOCTOR_MLX_LIBDIR", empty.to_str().unwrap())], false);
    assert!(!out.status.success());
    let text = lines(&out);
    let (_, fix) = finding(&text, "FAIL", "no MLX runtime found");
    assert!(fix.contains("install MLX"));

    let json: serde_json::Value = serde_json::from_slice(
        &s.doctor(&[("RMX_DOCTOR_MLX_LIBDIR", empty.to_str().unwrap())], true)
            .stdout,
    )
    .unwrap();
    assert_eq!(json["ok"], false);
    assert!(json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["level"] == "fail" && c["fix"].is_string()));
}

#[test]
fn a_leftover_file_at_the_socket_path_fails_with_the_fix() {
    let s = Setup::new();
    std::fs::write(s.socket(), "not a socket").unwrap();
    let out = s.doctor(&[], false);
    assert!(!out.status.success());
    let text = lines(&out);
    let (_, fix) = finding(&text, "FAIL", "stale socket");
    assert!(fix.contains(&format!("rm {}", s.socket().display())));
}

#[test]
fn a_dead_socket_is_reported_as_stale_with_the_fix() {
    let s = Setup::new();
    // Bound and closed: the socket file stays, nothing listens.
    drop(std::os::unix::net::UnixListener::bind(s.socket()).unwrap());
    assert!(s.socket().exists());
    let out = s.doctor(&[], false);
    let text = lines(&out);
    let (_, fix) = finding(&text, "WARN", "stale socket");
    assert!(fix.contains("rmx serve"));
    assert!(
        out.status.success(),
        "a dead socket is replaced by the next daemon: not a failure"
    );
}

#[test]
fn a_truncated_model_file_fails_with_the_fix() {
    let s = Setup::new();
    s.add_model("mlx-community/cut-short", Some(8));
    let out = s.doctor(&[], false);
    assert!(!out.status.success());
    let text = lines(&out);
    let (line, fix) = finding(&text, "FAIL", "truncated");
    assert!(line.contains("model.safetensors"), "{line}");
    assert!(fix.contains("rmx pull mlx-community/cut-short"), "{fix}");
}

#[test]
fn a_partial_download_warns_with_the_pull_to_resume() {
    let s = Setup::new();
    let repo = s.add_model("mlx-community/half-done", None);
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::write(repo.join("blobs/abc.incomplete"), b"xx").unwrap();
    let out = s.doctor(&[], false);
    assert!(out.status.success());
    let text = lines(&out);
    let (_, fix) = finding(&text, "WARN", "download incomplete");
    assert!(fix.contains("rmx pull mlx-community/half-done"));
}

#[test]
fn a_broken_aliases_file_fails_with_the_fix() {
    let s = Setup::new();
    std::fs::write(s.rmx_home().join("aliases.toml"), "[[alias]\nname = ").unwrap();
    let out = s.doctor(&[], false);
    assert!(!out.status.success());
    let text = lines(&out);
    let (_, fix) = finding(&text, "FAIL", "does not parse");
    assert!(fix.contains("aliases.toml"));
}

/// A TCP port answering every request with `reply`, for as long as the test runs.
fn fake_server(reply: &'static str) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(reply.as_bytes());
        }
    });
    port
}

#[test]
fn a_port_taken_by_something_else_warns_with_the_fix() {
    let s = Setup::new();
    let port =
        fake_server("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let host = format!("127.0.0.1:{port}");
    let out = s.doctor(&[("RMX_HOST", &host)], false);
    assert!(out.status.success());
    let text = lines(&out);
    let (_, fix) = finding(&text, "WARN", "taken by something that is not rmx");
    assert!(fix.contains("RMX_HOST"));
}

#[test]
fn a_daemon_answering_on_tcp_passes() {
    let s = Setup::new();
    let port = fake_server(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 19\r\nConnection: close\r\n\r\n{\"version\":\"9.9.9\"}",
    );
    let host = format!("127.0.0.1:{port}");
    let out = s.doctor(&[("RMX_HOST", &host)], false);
    assert!(out.status.success());
    assert!(lines(&out).contains("answers: rmx 9.9.9"));
}
