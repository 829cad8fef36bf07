//! The coding agents and chat tools `rmx agents` can point at the local daemon: where each keeps
//! its config, how to tell it is installed and already set up, and the edit that sets it up.
//! One file per tool; `edit` holds what they share (backups, atomic writes, diffs, YAML lines).

pub mod edit;

mod aider;
mod claude;
mod codex;
mod continue_dev;
mod goose;
mod hermes;
mod opencode;

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

/// What a setup needs to know about the daemon and the user's choice.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http://127.0.0.1:8000` (no path): the daemon's HTTP root.
    pub root: String,
    /// The model the tool should ask for.
    pub model: String,
    /// Whether `RMX_API_KEY` is set: tools then read the key from the environment, never
    /// from a file rmx writes.
    pub api_key_env: bool,
}

impl Target {
    /// The OpenAI-compatible base URL, `<root>/v1`.
    pub fn openai_base(&self) -> String {
        format!("{}/v1", self.root)
    }
}

/// One integration. `render` gets the file's current text ("" when missing) and returns the new
/// text; it must leave everything that is not rmx's alone.
pub struct Integration {
    pub name: &'static str,
    pub title: &'static str,
    /// Executables that show the tool is installed.
    pub binaries: &'static [&'static str],
    pub config_path: fn(&Env) -> Option<PathBuf>,
    pub render: fn(&str, &Path, &Target) -> Result<String>,
    /// Whether the file's text already points at this daemon.
    pub configured: fn(&str, &Target) -> bool,
    /// The one command to try afterwards.
    pub try_command: &'static str,
    /// What else the user must do (e.g. export a key), given the target.
    pub notes: fn(&Target) -> Vec<String>,
}

/// The environment the paths come from (a struct so tests of paths need no global state).
pub struct Env {
    pub home: Option<PathBuf>,
    pub var: fn(&str) -> Option<String>,
}

impl Env {
    pub fn from_process() -> Env {
        fn var(k: &str) -> Option<String> {
            std::env::var(k).ok().filter(|v| !v.is_empty())
        }
        Env {
            home: var("HOME").map(PathBuf::from),
            var,
        }
    }

    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub fn config_dir(&self) -> Option<PathBuf> {
        (self.var)("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| self.home.as_ref().map(|h| h.join(".config")))
    }
}

pub fn all() -> &'static [Integration] {
    static ALL: [Integration; 7] = [
        codex::INTEGRATION,
        claude::INTEGRATION,
        opencode::INTEGRATION,
        aider::INTEGRATION,
        goose::INTEGRATION,
        continue_dev::INTEGRATION,
        hermes::INTEGRATION,
    ];
    &ALL
}

pub fn find(name: &str) -> Option<&'static Integration> {
    let name = name.to_ascii_lowercase();
    all().iter().find(|i| {
        i.name == name
            || (i.name == "claude" && name == "claude-code")
            || (i.name == "continue" && name == "continue-dev")
    })
}

/// Whether an executable of that name is on `PATH`.
pub fn on_path(binary: &str, env: &Env) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = (env.var)("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(binary))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The placeholder key written where a tool insists on one and the daemon needs none.
pub const PLACEHOLDER_KEY: &str = "rmx";

/// `GET /api/version` on the daemon's TCP address with a short timeout: its version, or None.
pub fn daemon_version(root: &str) -> Option<String> {
    let addr = root.strip_prefix("http://")?;
    let sock = addr.to_socket_addrs().ok()?.next()?;
    let timeout = Duration::from_millis(700);
    let mut stream = TcpStream::connect_timeout(&sock, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    // A daemon serving TCP with a key wants it on every route.
    let auth = rmx_settings::var(rmx_settings::EnvVars::RMX_API_KEY)
        .map(|k| format!("Authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    // One write: a server that reads the request once and closes must see all of it.
    let request =
        format!("GET /api/version HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut reply = Vec::new();
    let _ = stream.take(64 * 1024).read_to_end(&mut reply);
    let reply = String::from_utf8_lossy(&reply);
    if !reply.starts_with("HTTP/1.1 200") && !reply.starts_with("HTTP/1.0 200") {
        return None;
    }
    // The JSON object, whether the body came whole or chunked.
    let body = &reply[reply.find('{')?..=reply.rfind('}')?];
    let json: serde_json::Value = serde_json::from_str(body).ok()?;
    json.get("version")
        .and_then(|v| v.as_str())
        .map(str::to_string)
}
