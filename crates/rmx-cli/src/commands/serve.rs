//! `rmx serve`: the daemon in the foreground. Other commands run this same code in the
//! background (`--background`) when they find no daemon. Under `rmx launch` it is rank 0 of
//! a group, and every model it loads is split over the group (docs/distributed.md).

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rmx_server::daemon::{bind, serve, DaemonError};
use rmx_server::security::{check_listen_addr, protect, SecurityConfig};
use rmx_server::{GroupServing, Service, ServiceConfig};
use rmx_settings::EnvVars;

use crate::cli::ServeArgs;
use crate::commands::launch::GROUP_LOST_EXIT;
use crate::daemon;

/// How long a rank 0 whose group is gone lets its answers end before it exits.
const FAIL_WITHIN: Duration = Duration::from_secs(5);

pub fn run(args: ServeArgs) -> Result<ExitCode> {
    let paths = daemon::paths()?;
    let addr = http_addr(args.host.as_deref(), args.port);
    // Joined before anything is bound: the other ranks are waiting.
    let group = crate::commands::launch::lead()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async {
        let mut config = ServiceConfig::from_env()?;
        if group.is_some() {
            // A group runs one model at a time (Service::in_group); say so at start.
            config.max_loaded_models = 1;
        }
        // The store the other store commands use, test override of the free space included:
        // `/api/pull` downloads into it.
        config.store = crate::commands::pull::store()?;
        if let Some((bits, group, start)) = args.kv.settings() {
            config.kv_quant = Some(rmx_engine::KvQuant::new(bits, group, start)?);
        }
        config.speculative = args.spec.spec();
        let mut security = SecurityConfig::from_env()?;
        match args.api_key.as_deref() {
            // A blank key is no key (as a blank RMX_API_KEY is): it cannot open the network.
            Some(k) if k.trim().is_empty() => {
                eprintln!("rmx: warning: --api-key is blank; it is ignored");
            }
            Some(k) => security.api_key = Some(k.to_string()),
            None => {}
        }
        // Refuse a non-loopback address without a key before taking the lock.
        if let Ok(a) = addr.parse() {
            check_listen_addr(a, &security)?;
        }
        let mut bound = bind(&paths, Some(&addr)).await;
        if args.background {
            // The lock may belong to a daemon that is dying (killed, its threads still
            // exiting): wait for it a little. If it is alive, the command that started us
            // connects to it instead.
            let start = std::time::Instant::now();
            while matches!(bound, Err(DaemonError::AlreadyRunning { .. }))
                && start.elapsed() < std::time::Duration::from_secs(5)
            {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                bound = bind(&paths, Some(&addr)).await;
            }
        }
        let listeners = match bound {
            Ok(l) => l,
            // Another command started one at the same moment: that one serves.
            Err(DaemonError::AlreadyRunning { .. }) if args.background => {
                return Ok(ExitCode::SUCCESS)
            }
            Err(e @ DaemonError::Bind { .. }) if args.background => {
                eprintln!("rmx: warning: {e}; serving only the socket");
                bind(&paths, None).await?
            }
            Err(e) => return Err(e.into()),
        };
        let tcp = listeners
            .http_addr
            .map(|a| format!("http://{a}"))
            .unwrap_or_else(|| "no TCP".into());
        eprintln!(
            "rmx {} daemon (pid {}): listening on {tcp} and {}; budget {}, at most {} models",
            rmx_api::VERSION,
            std::process::id(),
            paths.socket.display(),
            rmx_store::human_bytes(config.memory_budget),
            config.max_loaded_models,
        );
        // Which Host names the TCP port answers to depends on where it is bound.
        security.listen_addr = listeners.http_addr;
        let Some((lead, mode)) = group else {
            let service = Service::new(config);
            serve(
                listeners,
                service,
                |router| protect(router, &security),
                std::future::pending(),
            )
            .await?;
            eprintln!("rmx: daemon stopped");
            return Ok(ExitCode::SUCCESS);
        };
        let service = Service::in_group(config, GroupServing::new(lead, mode));
        let lost = Arc::new(AtomicBool::new(false));
        let stall = rmx_settings::number(EnvVars::RMX_GROUP_STALL_SECS)
            .map_err(anyhow::Error::msg)?
            .unwrap_or(60);
        let stop = group_lost(lost.clone(), Duration::from_secs(stall));
        // Held here, so that `serve` returning does not drop the models: dropping an engine
        // joins its thread, which a lost group can leave stuck.
        let held = service.clone();
        serve(
            listeners,
            service,
            |router| protect(router, &security),
            stop,
        )
        .await?;
        if lost.load(Ordering::SeqCst) {
            // No destructors: they would wait on a group that is gone.
            std::process::exit(i32::from(GROUP_LOST_EXIT));
        }
        drop(held);
        eprintln!("rmx: daemon stopped");
        Ok(ExitCode::SUCCESS)
    })
}

/// Resolves when this rank 0's group is gone: a collective failed (the engine recorded it),
/// or the launcher closed stdin, its lifeline (it saw a worker end, or it ended itself). The
/// process then ends with [`GROUP_LOST_EXIT`] for `rmx launch` to start every rank again,
/// within [`FAIL_WITHIN`] even if an engine thread is stuck in a collective.
async fn group_lost(lost: Arc<AtomicBool>, stall: Duration) {
    let (tx, mut closed) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = tx.send(());
    });
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let why = loop {
        tokio::select! {
            _ = &mut closed => break "rmx launch saw a rank end".to_string(),
            _ = tick.tick() => {
                if let Some(f) = rmx_engine::group::failure() {
                    break f.to_string();
                }
                // A rank or link that stalls without closing: no collective fails, none ends.
                if rmx_engine::group::step_running_for().is_some_and(|d| d > stall) {
                    break format!(
                        "an engine step ran over {} s ({}): a rank or a link stalls",
                        stall.as_secs(),
                        EnvVars::RMX_GROUP_STALL_SECS
                    );
                }
            }
        }
    };
    // The engine thread may be stuck in a collective: its clients are failed from here.
    let failed = rmx_engine::group::fail_running(&why);
    eprintln!("rmx: rank 0's group is gone ({why}): {failed} running answer(s) failed; ending");
    lost.store(true, Ordering::SeqCst);
    std::thread::spawn(|| {
        std::thread::sleep(FAIL_WITHIN);
        eprintln!(
            "rmx: answers still running after {} s; ending anyway",
            FAIL_WITHIN.as_secs()
        );
        std::process::exit(i32::from(GROUP_LOST_EXIT));
    });
}

/// `--host`/`--port` over `RMX_HOST` over 127.0.0.1:8000.
fn http_addr(host: Option<&str>, port: Option<u16>) -> String {
    let base = match host {
        Some(h) if h.contains(':') => h.to_string(),
        Some(h) => format!("{h}:8000"),
        None => rmx_api::default_http_addr(),
    };
    match port {
        Some(p) => {
            let host = base.rsplit_once(':').map_or(base.as_str(), |(h, _)| h);
            format!("{host}:{p}")
        }
        None => base,
    }
}
