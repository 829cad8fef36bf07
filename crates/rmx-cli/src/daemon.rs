//! Reaching the daemon: connect over the Unix socket of this rmx home, and when nothing listens
//! there, start one in the background (detached, logging to a file in the home) and wait until
//! it answers. The lock the daemon takes keeps this race-free: when two commands start one at
//! once, the second daemon finds the lock taken and exits, and both commands connect to the
//! first.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rmx_api::{Client, DaemonPaths};

/// How long a starting daemon may take to answer: binding is quick, but a cold disk cache and a
/// busy machine can stretch it.
const START_TIMEOUT: Duration = Duration::from_secs(30);

pub fn paths() -> Result<DaemonPaths> {
    DaemonPaths::from_env()
        .context("neither RMX_HOME nor HOME is set; set RMX_HOME to a folder rmx can write to")
}

/// A client for a running daemon, or None when none runs (commands that have nothing to do
/// without one, like `ps` and `stop`, do not start it).
pub async fn running() -> Result<Option<Client>> {
    let client = Client::unix(paths()?.socket);
    match client.version().await {
        Ok(_) => Ok(Some(client)),
        Err(e) if e.is_not_running() => Ok(None),
        Err(e) => Err(e).context("the rmx daemon does not answer properly"),
    }
}

/// A client for the daemon, started first when none runs.
pub async fn connect() -> Result<Client> {
    let paths = paths()?;
    let client = Client::unix(&paths.socket);
    match client.version().await {
        Ok(_) => return Ok(client),
        // A connection reset: a daemon that is dying right now (its socket still open while
        // its threads exit). Start another; it waits for the old one's lock.
        Err(e) if e.is_not_running() || matches!(e, rmx_api::ClientError::Http(_)) => {}
        Err(e) => return Err(e).context("the rmx daemon does not answer properly"),
    }
    if paths.socket.exists() {
        eprintln!("rmx: the daemon is not running (it stopped or was killed); starting a new one");
    }
    let mut child = start(&paths)?;
    wait_ready(&client, &paths, &mut child).await?;
    Ok(client)
}

/// The daemon log, opened for appending with a line saying who starts a daemon now.
pub fn open_log(paths: &DaemonPaths, by: &str) -> Result<std::fs::File> {
    let log_dir = paths.log.parent().unwrap_or(&paths.home);
    std::fs::create_dir_all(log_dir).with_context(|| format!("creating {}", log_dir.display()))?;
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&paths.log)
        .with_context(|| format!("opening the daemon log {}", paths.log.display()))?;
    let _ = writeln!(log, "--- started by {by} (pid {})", std::process::id());
    Ok(log)
}

fn start(paths: &DaemonPaths) -> Result<Child> {
    let log = open_log(paths, "rmx")?;
    let err = log.try_clone().context("opening the daemon log")?;
    let exe = std::env::current_exe().context("finding the rmx executable")?;
    Command::new(exe)
        .args(["serve", "--background"])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        // Its own process group: a Ctrl-C in this terminal must not reach the daemon.
        .process_group(0)
        .spawn()
        .context("starting the rmx daemon")
}

async fn wait_ready(client: &Client, paths: &DaemonPaths, child: &mut Child) -> Result<()> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(2);
    let mut exited_at: Option<Instant> = None;
    loop {
        match client.version().await {
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_running() || matches!(e, rmx_api::ClientError::Http(_)) => {}
            Err(e) => return Err(e).context("the new rmx daemon does not answer properly"),
        }
        // A daemon that exits at once either lost the lock to another one starting now (give
        // that one a moment) or failed (say why).
        if exited_at.is_none() && child.try_wait().ok().flatten().is_some() {
            exited_at = Some(Instant::now());
        }
        if exited_at.is_some_and(|t| t.elapsed() > Duration::from_secs(2))
            || started.elapsed() > START_TIMEOUT
        {
            bail!(
                "the rmx daemon did not start; the end of its log ({}):\n{}",
                paths.log.display(),
                log_tail(paths)
            );
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

fn log_tail(paths: &DaemonPaths) -> String {
    let text = std::fs::read_to_string(&paths.log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

/// Every command talks to the daemon from one small runtime: one connection at a time.
/// The models a running daemon has loaded (`rmx ps`); none without a daemon, which is not
/// started for this.
pub fn loaded() -> Result<rmx_api::PsResponse> {
    runtime()?.block_on(async {
        match running().await? {
            Some(client) => client.ps().await.map_err(broken_off),
            None => Ok(rmx_api::PsResponse::default()),
        }
    })
}

pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// What to say when the daemon's answer broke off.
pub fn broken_off(e: rmx_api::ClientError) -> anyhow::Error {
    match e {
        rmx_api::ClientError::Api { message, .. } => anyhow::anyhow!(message),
        other => {
            let log = paths()
                .map(|p| p.log.display().to_string())
                .unwrap_or_default();
            anyhow::anyhow!("the rmx daemon stopped while answering ({other}); see its log {log}; the next command starts a new one")
        }
    }
}
