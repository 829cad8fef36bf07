//! Where one rmx home keeps its daemon: the socket the CLI connects to, the lock that keeps a
//! second daemon out, the log a background daemon writes. Daemon and CLI compute these paths
//! the same way from the same environment, so they always meet.

use std::path::{Path, PathBuf};

use rmx_settings::EnvVars;

/// The rmx home: `RMX_HOME`, else `~/.rmx` (the folder rmx-store keeps user aliases in, so one
/// variable moves everything).
pub fn rmx_home() -> Option<PathBuf> {
    if let Some(dir) = rmx_settings::var(EnvVars::RMX_HOME) {
        return Some(PathBuf::from(dir));
    }
    var("HOME").map(|h| Path::new(&h).join(".rmx"))
}

/// A variable of the system's (`HOME`, `XDG_RUNTIME_DIR`); rmx's own come from rmx-settings.
fn var(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// The daemon's files for one rmx home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonPaths {
    pub home: PathBuf,
    pub socket: PathBuf,
    pub lock: PathBuf,
    pub log: PathBuf,
}

impl DaemonPaths {
    /// The socket goes in `XDG_RUNTIME_DIR` where that exists (a tmpfs owned by the user,
    /// cleaned at logout), named after the home so two homes get two daemons; else in the home.
    pub fn new(home: &Path) -> DaemonPaths {
        let runtime = var("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|d| d.is_dir());
        let socket = match runtime {
            Some(dir) => dir.join(format!(
                "rmx-{:016x}.sock",
                fnv1a(home.as_os_str().as_encoded_bytes())
            )),
            None => home.join("rmx.sock"),
        };
        DaemonPaths {
            home: home.to_path_buf(),
            socket,
            lock: home.join("daemon.lock"),
            log: home.join("logs").join("daemon.log"),
        }
    }

    pub fn from_env() -> Option<DaemonPaths> {
        rmx_home().map(|h| DaemonPaths::new(&h))
    }
}

/// A stable, dependency-free hash for the socket name (not for security).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

/// The TCP address the daemon serves HTTP on: `RMX_HOST` (`host`, `host:port` or `:port`),
/// default `127.0.0.1:8000`.
pub fn default_http_addr() -> String {
    let default = "127.0.0.1:8000".to_string();
    match rmx_settings::var(EnvVars::RMX_HOST).map(|h| h.trim().to_string()) {
        None => default,
        Some(h) if h.starts_with(':') => format!("127.0.0.1{h}"),
        Some(h) if h.contains(':') => h,
        Some(h) => format!("{h}:8000"),
    }
}
