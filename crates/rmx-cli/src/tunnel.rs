//! Public tunnels for `rmx share`: a cloudflared quick tunnel (no account; it prints a
//! random https://*.trycloudflare.com address) or an ssh reverse forward to a server the user
//! names. The tunnel is a child process; dropping [`Running`] kills it, so it never outlives
//! the share.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

/// How long a tunnel may take to come up: cloudflared registers with Cloudflare first, ssh
/// connects and authenticates.
const TUNNEL_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tunnel {
    Cloudflared,
    /// `ssh -R remote_port:local dest`.
    Ssh {
        dest: String,
        remote_port: u16,
    },
}

/// `--tunnel`: None for `none`. `local_port` is the default remote port of an ssh tunnel.
pub fn parse(spec: &str, local_port: u16) -> Result<Option<Tunnel>> {
    match spec {
        "none" => Ok(None),
        "cloudflared" => Ok(Some(Tunnel::Cloudflared)),
        _ => {
            let Some(target) = spec.strip_prefix("ssh:").filter(|t| !t.is_empty()) else {
                bail!("unknown tunnel `{spec}`: use cloudflared, ssh:[USER@]HOST[:PORT] or none");
            };
            let (dest, remote_port) = match target.rsplit_once(':') {
                Some((d, p)) => (
                    d,
                    p.parse::<u16>().ok().filter(|&p| p > 0).with_context(|| {
                        format!("`{p}` in --tunnel {spec} is not a port number")
                    })?,
                ),
                None => (target, local_port),
            };
            Ok(Some(Tunnel::Ssh {
                dest: dest.to_string(),
                remote_port,
            }))
        }
    }
}

/// A started tunnel and the address others reach the share at.
pub struct Running {
    pub public_url: String,
    child: Child,
}

impl Running {
    /// Kills the tunnel and waits for it, so nothing is left behind.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

pub async fn start(tunnel: &Tunnel, local: SocketAddr) -> Result<Running> {
    match tunnel {
        Tunnel::Cloudflared => {
            let mut cmd = Command::new("cloudflared");
            cmd.args(["tunnel", "--no-autoupdate", "--url"])
                .arg(format!("http://{local}"));
            let (public_url, child) = run_until(cmd, "cloudflared", trycloudflare_url).await?;
            Ok(Running { public_url, child })
        }
        Tunnel::Ssh { dest, remote_port } => {
            let mut cmd = Command::new("ssh");
            // -v for the line that says the forward is up; BatchMode: fail, never prompt.
            cmd.args([
                "-v",
                "-N",
                "-o",
                "ExitOnForwardFailure=yes",
                "-o",
                "BatchMode=yes",
            ])
            .arg("-R")
            .arg(format!("{remote_port}:{local}"))
            .arg(dest);
            let (_, child) = run_until(cmd, "ssh", |line| {
                line.contains("remote forward success").then(String::new)
            })
            .await?;
            let host = dest.rsplit_once('@').map_or(dest.as_str(), |(_, h)| h);
            Ok(Running {
                public_url: format!("http://{host}:{remote_port}"),
                child,
            })
        }
    }
}

/// Starts the tunnel program and waits for the first line of its output `ready` accepts
/// (what it returns comes back); fails with its last words when it exits first.
async fn run_until(
    mut cmd: Command,
    name: &str,
    ready: fn(&str) -> Option<String>,
) -> Result<(String, Child)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    // Both streams: cloudflared prints its banner on stderr, older versions on stdout.
    if let Some(out) = child.stdout.take() {
        tokio::spawn(scan(out, tx.clone()));
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(scan(err, tx));
    }
    let mut last = String::new();
    let wait = async {
        while let Some(line) = rx.recv().await {
            if let Some(found) = ready(&line) {
                return Some(found);
            }
            last = line;
        }
        None
    };
    match tokio::time::timeout(TUNNEL_TIMEOUT, wait).await {
        Ok(Some(found)) => Ok((found, child)),
        Ok(None) => {
            let status = child.wait().await.ok();
            bail!(
                "{name} ended before the tunnel was up ({}): {}",
                status.map_or("unknown status".into(), |s| s.to_string()),
                last.trim()
            )
        }
        Err(_) => bail!(
            "{name} did not open the tunnel in {} s; is this machine online?",
            TUNNEL_TIMEOUT.as_secs()
        ),
    }
}

/// Forwards every line, then keeps reading: a child writing into a full pipe nobody reads
/// would stall.
async fn scan(out: impl AsyncRead + Unpin, tx: tokio::sync::mpsc::UnboundedSender<String>) {
    let mut lines = BufReader::new(out).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let _ = tx.send(line);
    }
}

/// `https://<name>.trycloudflare.com` in a line of cloudflared's output.
pub fn trycloudflare_url(line: &str) -> Option<String> {
    let start = line.find("https://")?;
    let url: String = line[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '/'))
        .collect();
    let host = url.trim_start_matches("https://").trim_end_matches('/');
    (host.ends_with(".trycloudflare.com") && host != "api.trycloudflare.com")
        .then(|| format!("https://{host}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_quick_tunnel_address_in_the_banner() {
        let line = "2024-01-01T00:00:00Z INF |  https://tiny-words-here.trycloudflare.com  |";
        assert_eq!(
            trycloudflare_url(line).as_deref(),
            Some("https://tiny-words-here.trycloudflare.com")
        );
        assert_eq!(
            trycloudflare_url("INF Requesting new quick Tunnel on trycloudflare.com..."),
            None
        );
        assert_eq!(
            trycloudflare_url("see https://api.trycloudflare.com/tunnel"),
            None
        );
        assert_eq!(trycloudflare_url("https://example.com"), None);
    }

    #[test]
    fn tunnel_specs() {
        assert_eq!(parse("none", 8001).expect("a valid spec"), None);
        assert_eq!(
            parse("cloudflared", 8001).expect("a valid spec"),
            Some(Tunnel::Cloudflared)
        );
        assert_eq!(
            parse("ssh:me@box.example", 8001).expect("a valid spec"),
            Some(Tunnel::Ssh {
                dest: "me@box.example".into(),
                remote_port: 8001
            })
        );
        assert_eq!(
            parse("ssh:box:9000", 8001).expect("a valid spec"),
            Some(Tunnel::Ssh {
                dest: "box".into(),
                remote_port: 9000
            })
        );
        assert!(parse("ssh:", 8001).is_err());
        assert!(parse("ngrok", 8001).is_err());
        assert!(parse("ssh:box:port", 8001).is_err());
        assert!(parse("ssh:box:0", 8001).is_err());
    }
}
