//! `rmx serve`: the daemon in the foreground. Other commands run this same code in the
//! background (`--background`) when they find no daemon.

use std::process::ExitCode;

use anyhow::{Context, Result};
use rmx_server::daemon::{bind, serve, DaemonError};
use rmx_server::security::{check_listen_addr, protect, SecurityConfig};
use rmx_server::{Service, ServiceConfig};

use crate::cli::ServeArgs;
use crate::daemon;

pub fn run(args: ServeArgs) -> Result<ExitCode> {
    let paths = daemon::paths()?;
    let addr = http_addr(args.host.as_deref(), args.port);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async {
        let mut config = ServiceConfig::from_env()?;
        // The store the other store commands use, test override of the free space included:
        // `/api/pull` downloads into it.
        config.store = crate::commands::pull::store()?;
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
        let service = Service::new(config);
        serve(listeners, service, |router| protect(router, &security)).await?;
        eprintln!("rmx: daemon stopped");
        Ok(ExitCode::SUCCESS)
    })
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
