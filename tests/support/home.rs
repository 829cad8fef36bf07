//! A throwaway rmx home: `RMX_HOME` in a temp dir (the socket lands there too, as
//! `XDG_RUNTIME_DIR` is removed), an empty model store, a free TCP port. Dropping it stops the
//! daemon it started (SIGTERM, then SIGKILL).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub struct TestHome {
    pub dir: tempfile::TempDir,
    pub port: u16,
    bin: PathBuf,
    env: Vec<(String, String)>,
}

impl TestHome {
    /// A home for the real `rmx` ([`crate::rmx`]).
    // A home is a temp dir, a port and a binary to build: made on purpose, never by default.
    #[allow(clippy::new_without_default)]
    pub fn new() -> TestHome {
        let dir = tempfile::Builder::new().prefix("rmx").tempdir().unwrap();
        TestHome {
            port: free_port(),
            dir,
            bin: crate::rmx().to_path_buf(),
            env: Vec::new(),
        }
    }

    /// An extra variable for every command (and so for the daemon they start).
    pub fn with_env(mut self, key: &str, value: &str) -> TestHome {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn home(&self) -> &Path {
        self.dir.path()
    }

    pub fn socket(&self) -> PathBuf {
        self.home().join("rmx.sock")
    }

    pub fn lock(&self) -> PathBuf {
        self.home().join("daemon.lock")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.home().join("logs/daemon.log")).unwrap_or_default()
    }

    /// `rmx <args>` in this home.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args)
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("RMX_KEEP_ALIVE")
            .env_remove("RMX_MAX_MEMORY")
            .env_remove("RMX_MAX_LOADED_MODELS")
            .env("RMX_HOME", self.home())
            .env("RMX_HOST", format!("127.0.0.1:{}", self.port))
            .env("HF_HUB_CACHE", self.home().join("hub"))
            .env("HF_HOME", self.home().join("hf"));
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// Runs and requires success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "rmx {args:?} failed\nstdout: {}\nstderr: {}\ndaemon log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The running daemon's pid, from its lock file.
    pub fn daemon_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.lock())
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// `rmx ps --json`'s models.
    pub fn ps(&self) -> Vec<serde_json::Value> {
        let out = self.ok(&["ps", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["models"].as_array().cloned().unwrap_or_default()
    }

    pub fn wait_until(&self, what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
        let start = Instant::now();
        while !f() {
            assert!(
                start.elapsed() < timeout,
                "timed out waiting for {what}\ndaemon log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for TestHome {
    fn drop(&mut self) {
        let Some(pid) = self.daemon_pid() else { return };
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let start = Instant::now();
        while alive(pid) && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if alive(pid) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// Whether a process runs (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
