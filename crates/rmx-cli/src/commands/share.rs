//! `rmx share <model>`: a foreground front door to one model of the daemon, for other people.
//!
//! The model stays in the daemon (loaded and kept loaded here); this process only listens on
//! the LAN address, checks a key generated for this run, applies CORS and a per-address rate
//! limit (rmx-server's security layers, the daemon's own), and forwards to the daemon's
//! socket. The key exists only in this process's memory, so it dies with it: Ctrl-C (or
//! SIGTERM) kills the tunnel, closes the port and ends the process.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rmx_api::KeepAlive;
use rmx_server::security::{protect, SecurityConfig};
use serde_json::json;

use crate::agents::{self, Env};
use crate::cli::ShareArgs;
use crate::daemon;
use crate::tunnel::{self, Tunnel};

/// How often the pin is renewed: any request's own keep_alive replaces it when it ends.
const REPIN_EVERY: Duration = Duration::from_secs(60);

pub fn run(args: ShareArgs) -> Result<ExitCode> {
    let host = match args.host {
        Some(h) => h,
        None => lan_address()?,
    };
    let tunnel = match &args.tunnel {
        Some(spec) => tunnel::parse(spec, args.port)?,
        None if agents::on_path("cloudflared", &Env::from_process()) => Some(Tunnel::Cloudflared),
        None => None,
    };
    let security = SecurityConfig {
        api_key: Some(new_key()),
        cors_origins: args.cors_origins.clone(),
        rate_limit: Some(args.rate_limit).filter(|&n| n > 0),
        rate_limit_by_address: true,
        listen_addr: None,
        // A tunnel forwards its public name as the Host (cloudflared does); the key guards a
        // share wherever it listens.
        any_host: true,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(share(args, host, tunnel, security))
}

async fn share(
    args: ShareArgs,
    host: IpAddr,
    tunnel: Option<Tunnel>,
    mut security: SecurityConfig,
) -> Result<ExitCode> {
    use tokio::signal::unix::{signal, SignalKind};
    // Before anything starts, so a Ctrl-C during the load still tears down in order.
    let mut int = signal(SignalKind::interrupt()).context("listening for Ctrl-C")?;
    let mut term = signal(SignalKind::terminate()).context("listening for SIGTERM")?;

    let client = daemon::connect().await?;
    if !args.json {
        eprintln!("loading {} ...", args.model);
    }
    // Loaded on the usual keep-alive and pinned only once sharing starts, so a Ctrl-C during
    // a long load leaves no model pinned for good.
    tokio::select! {
        r = client.load(&args.model, None) => {
            r.map_err(daemon::broken_off).with_context(|| format!("loading {}", args.model))?;
        }
        () = stop_signal(&mut int, &mut term) => return Ok(ExitCode::from(130)),
    }

    let listener = tokio::net::TcpListener::bind((host, args.port))
        .await
        .with_context(|| {
            format!(
                "cannot listen on {}; choose another with --port or --host",
                SocketAddr::new(host, args.port)
            )
        })?;
    let local = listener.local_addr().context("reading the bound address")?;
    security.listen_addr = Some(local);
    let app = protect(
        rmx_server::share::router(daemon::paths()?.socket, args.model.clone()),
        &security,
    );
    let mut server = tokio::spawn(rmx_server::share::serve(listener, app));

    let started = match &tunnel {
        Some(t) => tokio::select! {
            r = tunnel::start(t, local) => Some(r),
            // Dropping the start kills the tunnel program.
            () = stop_signal(&mut int, &mut term) => return Ok(ExitCode::from(130)),
        },
        None => None,
    };
    let running = match started {
        Some(r) => match r {
            Ok(r) => Some(r),
            // Asked for by name: a share without it is not what the user wanted.
            Err(e) if args.tunnel.is_some() => {
                server.abort();
                return Err(e);
            }
            Err(e) => {
                eprintln!("rmx: warning: no public URL: {e:#}; sharing on the LAN only");
                None
            }
        },
        None => None,
    };
    client
        .load(&args.model, Some(KeepAlive::Forever))
        .await
        .map_err(daemon::broken_off)
        .with_context(|| format!("keeping {} loaded", args.model))?;
    let key = security.api_key.clone().unwrap_or_default();
    let url = format!("http://{local}/v1");
    let public_url = running.as_ref().map(|r| format!("{}/v1", r.public_url));
    if args.json {
        println!(
            "{}",
            json!({
                "model": args.model,
                "url": url,
                "public_url": public_url,
                "key": key,
                "rate_limit": security.rate_limit,
                "cors_origins": security.cors_origins,
            })
        );
    } else {
        print_banner(&args, &security, &url, public_url.as_deref(), &key, host);
    }

    let repin = {
        let (client, model) = (client.clone(), args.model.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REPIN_EVERY).await;
                let _ = client.load(&model, Some(KeepAlive::Forever)).await;
            }
        })
    };
    let outcome = tokio::select! {
        () = stop_signal(&mut int, &mut term) => Ok(()),
        r = &mut server => match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(anyhow::Error::new(e).context("serving the share")),
            Err(e) => Err(anyhow::Error::new(e).context("the share server stopped")),
        },
    };
    // The port closes (and the key with it) before anything else is tidied up.
    server.abort();
    let _ = server.await;
    repin.abort();
    if let Some(r) = running {
        r.stop().await;
    }
    // Back to the daemon's usual keep-alive, unless someone's request unloaded it meanwhile.
    let loaded = client
        .ps()
        .await
        .is_ok_and(|ps| ps.models.iter().any(|m| m.name == args.model));
    if loaded {
        let _ = client.load(&args.model, None).await;
    }
    if !args.json {
        eprintln!("stopped sharing {}; the key no longer works", args.model);
    }
    // Returning ends the runtime, which drops the connections still open.
    outcome.map(|()| ExitCode::SUCCESS)
}

async fn stop_signal(
    int: &mut tokio::signal::unix::Signal,
    term: &mut tokio::signal::unix::Signal,
) {
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}

fn print_banner(
    args: &ShareArgs,
    security: &SecurityConfig,
    url: &str,
    public_url: Option<&str>,
    key: &str,
    host: IpAddr,
) {
    println!("sharing {} (kept loaded while shared)", args.model);
    println!("  URL:        {url}");
    if host.is_loopback() {
        println!("              (loopback: only this machine and a tunnel reach it)");
    }
    if let Some(p) = public_url {
        println!("  public URL: {p}");
    }
    println!("  key:        {key}");
    match security.rate_limit {
        Some(n) => println!("  limit:      {n} requests per minute per client address"),
        None => println!("  limit:      none"),
    }
    if !security.cors_origins.is_empty() {
        println!("  browsers:   {}", security.cors_origins.join(", "));
    }
    let base = public_url.unwrap_or(url);
    println!("try it:");
    println!(
        "  curl {base}/chat/completions -H 'Authorization: Bearer {key}' \\\n    -H 'Content-Type: application/json' \\\n    -d '{}'",
        json!({"model": args.model, "messages": [{"role": "user", "content": "Hello"}]})
    );
    println!("Ctrl-C stops sharing; the key stops working then.");
}

/// 256 random bits from the OS-seeded CSPRNG, hex: a key nobody guesses within a rate limit.
fn new_key() -> String {
    let bytes: [u8; 32] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("rmx-{hex}")
}

/// The address this machine uses on its network: the source address of a route to a public
/// address. Connecting a UDP socket sends nothing; it only asks the kernel for the route.
fn lan_address() -> Result<IpAddr> {
    let socket = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .context("opening a socket to find the LAN address")?;
    let found = socket
        .connect((Ipv4Addr::new(192, 0, 2, 1), 9))
        .and_then(|()| socket.local_addr())
        .map(|a| a.ip());
    match found {
        Ok(ip) if !ip.is_loopback() && !ip.is_unspecified() => Ok(ip),
        _ => bail!(
            "found no network address to share on (no network route); pass --host with this \
             machine's address, or --host 127.0.0.1 with a tunnel"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fresh_and_long() {
        let (a, b) = (new_key(), new_key());
        assert_ne!(a, b);
        assert_eq!(a.len(), 4 + 64);
        assert!(a.starts_with("rmx-"));
    }
}
