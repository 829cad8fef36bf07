//! Running the daemon: one per rmx home, serving the same router on the Unix socket (for the
//! CLI) and on TCP (for other programs), until SIGTERM or Ctrl-C.
//!
//! One daemon per home is kept by an exclusive `flock` on `daemon.lock`: the kernel drops it
//! when the process dies however it dies, so a lock file left by a killed daemon is no
//! obstacle, and whoever holds the lock knows any socket file on the path is stale.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use rmx_api::DaemonPaths;
use tokio::net::{TcpListener, UnixListener};

use crate::service::Service;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("failed to {action} `{}`", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("a daemon is already running for this rmx home{} (lock `{}`)", pid.map(|p| format!(" (pid {p})")).unwrap_or_default(), lock.display())]
    AlreadyRunning { pid: Option<u32>, lock: PathBuf },
    #[error(
        "cannot listen on {addr}: {source} (set RMX_HOST or --host/--port to another address)"
    )]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}

fn io<'a>(
    action: &'static str,
    path: &'a std::path::Path,
) -> impl FnOnce(std::io::Error) -> DaemonError + 'a {
    move |source| DaemonError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Holds the one-daemon lock; removes the socket and the lock file when dropped.
pub struct DaemonLock {
    file: File,
    paths: DaemonPaths,
}

impl DaemonLock {
    pub fn acquire(paths: &DaemonPaths) -> Result<DaemonLock, DaemonError> {
        std::fs::create_dir_all(&paths.home).map_err(io("create", &paths.home))?;
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&paths.lock)
            .map_err(io("open", &paths.lock))?;
        if fs4::FileExt::try_lock(&file).is_err() {
            let pid = std::fs::read_to_string(&paths.lock)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            return Err(DaemonError::AlreadyRunning {
                pid,
                lock: paths.lock.clone(),
            });
        }
        file.set_len(0).map_err(io("write", &paths.lock))?;
        writeln!(file, "{}", std::process::id()).map_err(io("write", &paths.lock))?;
        Ok(DaemonLock {
            file,
            paths: paths.clone(),
        })
    }
}

impl Drop for DaemonLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.paths.socket);
        let _ = std::fs::remove_file(&self.paths.lock);
        let _ = fs4::FileExt::unlock(&self.file);
    }
}

/// Bound listeners, before serving: binding first lets `rmx serve` report a taken port at once.
pub struct Listeners {
    pub unix: UnixListener,
    pub tcp: Option<TcpListener>,
    pub http_addr: Option<std::net::SocketAddr>,
    _lock: DaemonLock,
}

/// Takes the lock, replaces a stale socket, and binds both listeners. `http_addr` None: no TCP.
pub async fn bind(paths: &DaemonPaths, http_addr: Option<&str>) -> Result<Listeners, DaemonError> {
    let lock = DaemonLock::acquire(paths)?;
    if let Some(dir) = paths.socket.parent() {
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    }
    match std::fs::remove_file(&paths.socket) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("remove the stale socket", &paths.socket)(e)),
    }
    let unix = UnixListener::bind(&paths.socket).map_err(io("listen on", &paths.socket))?;
    {
        use std::os::unix::fs::PermissionsExt;
        // Only this user may talk to the daemon over the socket.
        let _ = std::fs::set_permissions(&paths.socket, std::fs::Permissions::from_mode(0o600));
    }
    let (tcp, http_addr) = match http_addr {
        Some(addr) => {
            let l = TcpListener::bind(addr)
                .await
                .map_err(|source| DaemonError::Bind {
                    addr: addr.to_string(),
                    source,
                })?;
            let local = l.local_addr().ok();
            (Some(l), local)
        }
        None => (None, None),
    };
    Ok(Listeners {
        unix,
        tcp,
        http_addr,
        _lock: lock,
    })
}

/// Serves until SIGTERM or SIGINT; then every running answer ends with a final
/// `done_reason: "cancelled"` line, connections close, and the socket and lock are removed.
/// `wrap_tcp` adds the layers only TCP needs (API key, CORS, rate limit): the socket is
/// guarded by its file permissions.
///
/// `stop` ends it too, but lets running answers end on their own (a split model's lost
/// group fails them with its own error, which a shutdown's cut-off would hide).
pub async fn serve(
    listeners: Listeners,
    service: Arc<Service>,
    wrap_tcp: impl FnOnce(axum::Router) -> axum::Router,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), DaemonError> {
    let app = crate::router(service.clone());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let signals = {
        let service = service.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = wait_for_signal() => {
                    eprintln!("rmx: shutting down");
                    service.shutdown();
                }
                _ = stop => {}
            }
            let _ = stop_tx.send(true);
        })
    };
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let Listeners {
        unix, tcp, _lock, ..
    } = listeners;
    let unix_server =
        axum::serve(unix, app.clone()).with_graceful_shutdown(stopped(stop_rx.clone()));
    let result = match tcp {
        Some(tcp) => {
            // Outermost, so that whatever the layers do, the handlers know it came over TCP.
            let tcp_app = crate::listener::over_tcp(wrap_tcp(app))
                .into_make_service_with_connect_info::<std::net::SocketAddr>();
            let tcp_server = axum::serve(tcp, tcp_app).with_graceful_shutdown(stopped(stop_rx));
            tokio::try_join!(async { unix_server.await }, async { tcp_server.await }).map(|_| ())
        }
        None => unix_server.await,
    };
    signals.abort();
    drop(_lock);
    result.map_err(|source| DaemonError::Io {
        action: "serve on",
        path: PathBuf::from("the daemon's listeners"),
        source,
    })
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
