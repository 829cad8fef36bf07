//! What the store CLI suites (store_cli, pull_daemon) share: a local Hub ([`crate::fake_hub`])
//! serving a tiny MLX-style model, a temporary `HF_HUB_CACHE` + `RMX_HOME`, and the real `rmx`
//! binary pointed at them. `rmx pull` runs in the daemon, which the first pull starts in that
//! home (on a free port) and dropping the [`Env`] stops.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use crate::fake_hub::FakeHub;
use crate::tiny_repo::{tiny_model_files, COMMIT, REPO};

/// A fake Hub with the tiny model, and a temporary home for everything rmx writes.
pub struct Env {
    pub hub: FakeHub,
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl Env {
    pub async fn new() -> Env {
        let hub = FakeHub::start().await;
        hub.add_repo(REPO, COMMIT, tiny_model_files());
        let dir = tempfile::tempdir().expect("tempdir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        Env { hub, dir, port }
    }

    pub fn cache(&self) -> PathBuf {
        self.dir.path().join("hf").join("hub")
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("rmx")
    }

    /// The real binary, with the store, the hub and HOME pointed into the temp dir and
    /// nothing of the caller's environment that could change what it prints.
    pub fn rmx(&self) -> Command {
        let mut cmd = Command::new(crate::rmx());
        cmd.env("HOME", self.dir.path())
            .env("HF_HUB_CACHE", self.cache())
            .env("RMX_HOME", self.home())
            .env("HF_ENDPOINT", &self.hub.url)
            .env_remove("HF_HOME")
            .env_remove("HF_TOKEN")
            .env_remove("HF_TOKEN_PATH")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("XDG_RUNTIME_DIR")
            .env("RMX_HOST", format!("127.0.0.1:{}", self.port))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        cmd
    }

    /// The pid of the daemon running in this home, from its lock file.
    pub fn daemon_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.home().join("daemon.lock"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The daemon's log (what it says about a pull that went wrong).
    pub fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.home().join("logs/daemon.log")).unwrap_or_default()
    }

    /// Runs `rmx args...` (off the async runtime: the hub must keep serving meanwhile).
    pub async fn run(&self, args: &[&str]) -> Run {
        let mut cmd = self.rmx();
        cmd.args(args);
        self.run_cmd(cmd).await
    }

    pub async fn run_cmd(&self, mut cmd: Command) -> Run {
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .expect("join")
            .expect("run rmx");
        Run::new(out, self)
    }

    /// Paths and clock-dependent text replaced by stable markers.
    pub fn mask(&self, text: &str) -> String {
        let tmp = self.dir.path().display().to_string();
        let mut out = text.replace(&tmp, "[TMP]").replace(&self.hub.url, "[HUB]");
        for unit in ["B", "KB", "MB", "GB"] {
            out = mask_rates(&out, unit);
        }
        out
    }
}

impl Drop for Env {
    /// Stops the daemon a pull started (SIGTERM, then SIGKILL).
    fn drop(&mut self) {
        let Some(pid) = self.daemon_pid() else { return };
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                !stat
                    .rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
        };
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let start = std::time::Instant::now();
        while alive() && start.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        if alive() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// ` in 0.1s (3.5 MB/s)` -> ` in [TIME]`: the only clock-dependent text of a pull.
fn mask_rates(text: &str, unit: &str) -> String {
    text.lines()
        .map(
            |line| match (line.find(" in "), line.ends_with(&format!("{unit}/s)"))) {
                (Some(i), true) => format!("{} in [TIME]", &line[..i]),
                _ => line.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join("\n")
        + if text.ends_with('\n') { "\n" } else { "" }
}

pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn new(out: Output, env: &Env) -> Run {
        Run {
            code: out.status.code(),
            stdout: env.mask(&String::from_utf8_lossy(&out.stdout)),
            stderr: env.mask(&String::from_utf8_lossy(&out.stderr)),
        }
    }

    pub fn ok(self) -> Run {
        assert_eq!(
            self.code,
            Some(0),
            "rmx failed\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    pub fn failed(self) -> Run {
        assert_ne!(
            self.code,
            Some(0),
            "rmx should have failed\nstdout:\n{}",
            self.stdout
        );
        self
    }
}
