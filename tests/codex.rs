//! Codex CLI against the real daemon: `rmx agents codex --setup` writes its config, and
//! `codex exec` (the npm package's binary, pinned and fetched by scripts/test-env.sh as
//! RMX_TEST_CODEX) completes a turn over /v1/responses with Codex's real request (its tools,
//! reasoning and metadata fields included).
//!
//! The model is a tiny Qwen3 whose weights spell one fixed reply and then stop
//! (tests/py/scripted_model.py): Codex sends no token limit, so a random-weight model would
//! never finish, and a known reply lets the test check that Codex printed the model's text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rmx_tests::home::TestHome;

const REPLY: &str = "Hello from rmx";

fn codex() -> PathBuf {
    let path = std::env::var_os("RMX_TEST_CODEX")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "RMX_TEST_CODEX is not set: `. scripts/test-env.sh` fetches the pinned Codex CLI \
             (it has builds for Linux and macOS on x86_64 and arm64)"
            )
        });
    assert!(
        path.is_file(),
        "RMX_TEST_CODEX={} is not a file",
        path.display()
    );
    path
}

/// The scripted model, built once next to the tiny Qwen3 it is made from.
fn scripted_model(reply: &str) -> PathBuf {
    let base = rmx_tests::models::tiny_qwen3();
    let script = rmx_tests::py("scripted_model.py");
    let mut bytes = std::fs::read(&script).unwrap();
    bytes.extend_from_slice(reply.as_bytes());
    let hash = bytes.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    });
    let dir = base.with_file_name(format!("scripted-{hash:016x}"));
    if !dir.join("config.json").exists() {
        let python = std::env::var("RMX_TEST_PYTHON").expect("RMX_TEST_PYTHON");
        let out = Command::new(python)
            .arg(&script)
            .arg("--base")
            .arg(&base)
            .args(["--reply", reply, "--out"])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scripted_model.py failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    dir
}

#[test]
fn codex_exec_completes_a_turn_against_the_daemon() {
    let codex = codex();
    let model = scripted_model(REPLY);
    // Codex names the model by its folder, which TCP clients may under the model roots only.
    let roots = model.parent().expect("a parent").display().to_string();
    let model = model.display().to_string();
    let home = TestHome::new().with_env("RMX_MODEL_ROOTS", &roots);
    let user = tempfile::tempdir().unwrap();
    let codex_home = user.path().join(".codex");
    let work = user.path().join("work");
    std::fs::create_dir_all(&work).unwrap();

    let mut serve = home.cmd(&["serve"]).stderr(Stdio::null()).spawn().unwrap();
    home.wait_until("the daemon to listen", Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", home.port)).is_ok()
    });

    let setup = home
        .cmd(&["agents", "codex", "--setup", "-y", "--model", &model])
        .env("HOME", user.path())
        .env("CODEX_HOME", &codex_home)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&setup.stdout).into_owned();
    assert!(setup.status.success(), "{said}");
    assert!(said.contains("the rmx daemon answers at"), "{said}");

    let mut child = Command::new(&codex)
        .args(["exec", "--skip-git-repo-check", "--sandbox", "read-only"])
        // Its plugin sync, apps and analytics would call GitHub and chatgpt.com.
        .args(["--disable", "plugins", "--disable", "apps"])
        .args(["-c", "analytics.enabled=false"])
        .arg("Say hello")
        // Every connection its HTTP client opens, on stderr.
        .env("RUST_LOG", "reqwest::connect=debug")
        .current_dir(&work)
        .env("HOME", user.path())
        .env("CODEX_HOME", &codex_home)
        .env_remove("OPENAI_API_KEY")
        .env_remove("CODEX_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Codex retries a failing server for minutes; a stuck turn is a failure, not a hang.
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(300) {
            child.kill().unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "codex exec failed ({})\nstdout: {stdout}\nstderr: {stderr}\ndaemon log:\n{}",
        out.status,
        home.log()
    );
    assert!(stderr.contains("provider: rmx"), "{stderr}");
    let ours = format!("http://127.0.0.1:{}/", home.port);
    let connections: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.split("starting new connection: ").nth(1))
        .collect();
    assert!(!connections.is_empty(), "{stderr}");
    assert!(
        connections.iter().all(|c| c.trim() == ours),
        "codex connected elsewhere: {connections:?}"
    );
    // `codex exec` prints the agent's last message on stdout: the model's reply, verbatim.
    assert_eq!(stdout.trim(), REPLY, "stderr: {stderr}");
    // Nothing but Codex asked for this model, so the daemon loaded it for Codex's request,
    // under the alias `rmx agents --setup` gave the folder (its name).
    let alias = std::path::Path::new(&model)
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let ps = home.ps();
    assert!(ps.iter().any(|m| m["name"] == alias.as_str()), "{ps:?}");

    std::process::Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status()
        .unwrap();
    assert!(serve.wait().unwrap().success());
}
