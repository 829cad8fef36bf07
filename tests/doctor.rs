//! `rmx doctor` on a healthy set-up passes, and each planted fault is reported with its fix:
//! no MLX runtime, a stale daemon socket, a truncated model file, a partial download, a broken
//! aliases file. The distributed checks: the backends this MLX has, a ring hostfile's hosts up
//! or unreachable, and under `rmx launch` every rank's versions and model fingerprint side by
//! side, a rank with other model files failing the check. Runs the real binary with a
//! temporary RMX_HOME and HF_HUB_CACHE.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
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
        let mut args = vec!["doctor"];
        if json {
            args.push("--json");
        }
        self.rmx(&args, extra_env, None)
    }

    /// `rmx ARGS` in this set-up (run in `cwd` when given); its output, echoed for failures.
    fn rmx(&self, args: &[&str], extra_env: &[(&str, &str)], cwd: Option<&Path>) -> Output {
        let mut cmd = Command::new(rmx_tests::rmx());
        cmd.args(args)
            .env_clear()
            .env("HOME", self.dir.path())
            .env("RMX_HOME", self.rmx_home())
            .env("HF_HUB_CACHE", self.hub())
            // A port nothing listens on: the test must not depend on daemons of other tests.
            .env("RMX_HOST", "127.0.0.1:9")
            .envs(extra_env.iter().copied());
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
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
    assert!(
        text.contains("PASS cluster distributed backends: ring"),
        "{text}"
    );
    for name in [
        "mlx", "memory", "disk", "daemon", "models", "config", "cluster",
    ] {
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

/// Two loopback ports that were free a moment ago (nothing listens on them now).
fn free_ports() -> [u16; 2] {
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    [
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    ]
}

/// A model folder as far as the fingerprint goes: config.json and a weights file.
fn model_files(dir: &Path, config: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), config).unwrap();
    std::fs::write(dir.join("model.safetensors"), [0u8; 64]).unwrap();
}

#[test]
fn a_hostfile_s_hosts_are_reported_up_or_unreachable() {
    let s = Setup::new();
    let [port, _] = free_ports();
    // Linux refuses a TCP connection to the broadcast address at once (ENETUNREACH): an
    // unreachable host without waiting for a timeout. (TEST-NET addresses are no good here:
    // sandboxes route them, and some answer for every address.)
    let hostfile = s.dir.path().join("ring.json");
    std::fs::write(
        &hostfile,
        format!("[[\"127.0.0.1:{port}\"], [\"255.255.255.255:5000\"]]"),
    )
    .unwrap();
    let out = s.rmx(
        &["doctor", "--hostfile", hostfile.to_str().unwrap()],
        &[],
        None,
    );
    assert!(!out.status.success(), "an unreachable rank fails the check");
    let text = lines(&out);
    assert!(
        text.contains(&format!(
            "PASS cluster rank 0 127.0.0.1:{port}: host up, nothing listens on port {port}"
        )),
        "{text}"
    );
    let (line, fix) = finding(&text, "FAIL", "rank 1 255.255.255.255:5000: unreachable");
    assert!(line.contains("unreachable"), "{line}");
    assert!(
        fix.contains("firewall") && fix.contains("port 5000"),
        "{fix}"
    );

    std::fs::write(&hostfile, "[\"127.0.0.1:1\"]").unwrap();
    let out = s.rmx(
        &["doctor", "--hostfile", hostfile.to_str().unwrap()],
        &[],
        None,
    );
    assert!(!out.status.success());
    let text = lines(&out);
    let (_, fix) = finding(&text, "FAIL", "ring.json");
    assert!(fix.contains("ip:port"), "{fix}");
}

#[test]
fn launched_doctor_shows_every_rank_and_fails_on_other_model_files() {
    let s = Setup::new();
    let model = s.dir.path().join("model");
    model_files(&model, r#"{"model_type": "llama"}"#);
    let model = model.to_str().unwrap();
    let launch = ["launch", "-n", "2", "--", "rmx", "doctor", "--model", model];
    let out = s.rmx(&[&launch[..], &["--json"]].concat(), &[], None);
    assert!(out.status.success(), "{}", lines(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ranks = json["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2, "{json}");
    for (i, r) in ranks.iter().enumerate() {
        assert_eq!(r["rank"], i, "{json}");
        assert_eq!(r["comm"], "ring", "{json}");
        assert!(r["model"].as_str().is_some_and(|m| m.len() == 16), "{json}");
        for field in ["rmx_version", "mlx_version", "device", "model"] {
            assert_eq!(r[field], ranks[0][field], "{field}: {json}");
        }
    }
    assert_eq!(json["ok"], true);
    let out = s.rmx(&launch, &[], None);
    let text = lines(&out);
    assert!(
        text.contains(
            "PASS ranks   2 ranks run the same rmx, MLX and backends and have the same model files"
        ),
        "{text}"
    );
    assert!(text.contains("rank  host"), "{text}");
    assert!(!text.contains('*'), "{text}");

    // Two launchers, rank 0's and rank 1's, each in its own folder: the relative path names
    // another model folder on each rank, as two machines with other files would.
    let [p0, p1] = free_ports();
    let hostfile = s.dir.path().join("ring.json");
    std::fs::write(
        &hostfile,
        format!("[[\"127.0.0.1:{p0}\"], [\"127.0.0.1:{p1}\"]]"),
    )
    .unwrap();
    let hostfile = hostfile.to_str().unwrap();
    let (a, b) = (s.dir.path().join("a"), s.dir.path().join("b"));
    model_files(&a.join("m"), r#"{"model_type": "llama"}"#);
    model_files(&b.join("m"), r#"{"model_type": "qwen3"}"#);
    let on = |rank: &'static str, cwd: PathBuf| {
        let s = &s;
        let args = [
            "launch",
            "--hostfile",
            hostfile,
            "--rank",
            rank,
            "--",
            "rmx",
            "doctor",
            "--model",
            "m",
        ];
        move || s.rmx(&args, &[], Some(&cwd))
    };
    let (out, worker) = std::thread::scope(|t| {
        let worker = t.spawn(on("1", b));
        let out = on("0", a)();
        (out, worker.join().unwrap())
    });
    assert!(worker.status.success(), "rank 1's launcher");
    assert!(!out.status.success(), "other model files fail the check");
    let text = lines(&out);
    let (line, fix) = finding(&text, "FAIL", "model fingerprint differs from rank 0's");
    assert!(line.contains("rank(s) 1 ("), "{line}");
    assert!(fix.contains("copy rank 0's model folder"), "{fix}");
    assert!(text.contains("* differs from rank 0"), "{text}");
}
