//! Which web pages and which host names may reach the daemon over TCP: the `Origin` and `Host`
//! checks, the outermost of the security layers ([`crate::security::protect`]).
//!
//! CORS alone does not stop a web page: a "simple" request (a POST of `text/plain` or a form)
//! needs no preflight, so the browser sends it and only hides the answer, while the handlers read
//! their bodies as JSON whatever the content type. A page on any site could start a chat or a
//! pull. So a request whose `Origin` is not allowed is refused before any handler runs, whatever
//! its method, as Ollama does since its CVEs. Requests without an `Origin` (CLIs, SDKs, curl) are
//! not from a page and pass.
//!
//! DNS rebinding points a page's own name at 127.0.0.1: the browser then sees a same-origin
//! request, sends no `Origin`, and lets the page read every answer. The `Host` header still
//! carries the page's name, so on loopback only local names are served. Bound to the network,
//! clients reach the daemon under names it cannot know, so any `Host` is served there; that
//! needs an API key ([`crate::security::check_listen_addr`]), which a rebound page lacks.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;

use rmx_settings::EnvVars;

use crate::path_errors::reject;

/// Schemes of apps and editor extensions (Electron, Tauri, VS Code webviews), allowed by
/// default as Ollama allows them: no web page can send these origins, so refusing them protects
/// nothing. Reading answers still needs CORS (`RMX_CORS_ORIGINS`).
const APP_SCHEMES: [&str; 4] = ["app", "file", "tauri", "vscode-webview"];

#[derive(Debug, Clone)]
struct Policy {
    /// `RMX_CORS_ORIGINS` (or `rmx share --cors-origin`).
    configured: Vec<String>,
    listen_addr: Option<SocketAddr>,
    any_host: bool,
}

/// Adds the guard around `router`, outside every other layer, so nothing else sees a refused
/// request. The arguments are `SecurityConfig`'s fields of the same names (the security layers
/// call this; it stands below them).
pub fn guard(
    router: Router,
    cors_origins: &[String],
    listen_addr: Option<SocketAddr>,
    any_host: bool,
) -> Router {
    let policy = Arc::new(Policy {
        configured: cors_origins.to_vec(),
        listen_addr,
        any_host,
    });
    router.layer(middleware::from_fn(move |req: Request, next: Next| {
        let policy = policy.clone();
        async move { policy.check(req, next).await }
    }))
}

impl Policy {
    async fn check(&self, req: Request, next: Next) -> Response {
        let path = req.uri().path();
        if let Some(host) = request_host(&req) {
            if !self.host_allowed(&host) {
                return reject(path, StatusCode::FORBIDDEN, &self.host_refused(&host));
            }
        }
        if let Some(origin) = req.headers().get(header::ORIGIN) {
            let origin = String::from_utf8_lossy(origin.as_bytes()).into_owned();
            if !self.origin_allowed(&origin) {
                return reject(path, StatusCode::FORBIDDEN, &origin_refused(&origin));
            }
        }
        next.run(req).await
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        if listed(&self.configured, origin) {
            return true;
        }
        let origin = origin.to_ascii_lowercase();
        let Some((scheme, rest)) = origin.split_once("://") else {
            // `null` (sandboxed frames, redirects) and anything malformed.
            return false;
        };
        match scheme {
            "http" | "https" => {
                is_local_name(split_port(rest))
                    || self
                        .listen_addr
                        .is_some_and(|a| rest == a.to_string() || same_ip(rest, a.ip()))
            }
            s => APP_SCHEMES.contains(&s),
        }
    }

    fn host_allowed(&self, host: &str) -> bool {
        let on_network = self.listen_addr.is_some_and(|a| !a.ip().is_loopback());
        self.any_host || on_network || is_local_name(split_port(&host.to_ascii_lowercase()))
    }

    fn host_refused(&self, host: &str) -> String {
        let at = self
            .listen_addr
            .map_or_else(|| "loopback".to_string(), |a| a.to_string());
        format!(
            "Host `{host}` is not served: this server listens on {at} and answers only to \
             localhost, 127.0.0.1 and [::1] (a page reaching it under another name is a DNS \
             rebinding attack). Behind a proxy, have it send `Host: localhost`; to serve other \
             names, listen on the network with `rmx serve --host` and an API key"
        )
    }
}

fn origin_refused(origin: &str) -> String {
    format!(
        "cross-origin request from `{origin}` refused: only local pages (localhost, 127.0.0.1, \
         [::1]) and apps may call this server from a browser; to allow this origin, add it to \
         {} (comma-separated) when starting the daemon",
        EnvVars::RMX_CORS_ORIGINS
    )
}

/// Whether `origin` is in a CORS allow-list (`*`: any).
pub(crate) fn listed(origins: &[String], origin: &str) -> bool {
    origins.iter().any(|a| a == "*" || a == origin)
}

/// The `Host` header, else the HTTP/2 `:authority`; None when the client sent neither (HTTP/1.0
/// tools; a browser always sends one).
fn request_host(req: &Request) -> Option<String> {
    match req.headers().get(header::HOST) {
        Some(h) => Some(String::from_utf8_lossy(h.as_bytes()).into_owned()),
        None => req.uri().authority().map(|a| a.as_str().to_string()),
    }
}

/// `host[:port]` without the port; an IPv6 literal keeps its brackets.
fn split_port(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority
            .find(']')
            .map_or(authority, |end| &authority[..=end]);
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => authority,
    }
}

/// Names that only ever mean this machine: browsers resolve `localhost` and `*.localhost` to
/// loopback themselves, so no remote site can be reached under them.
fn is_local_name(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || parse_ip(host).is_some_and(|ip| ip.is_loopback())
}

fn same_ip(authority: &str, ip: IpAddr) -> bool {
    parse_ip(split_port(authority)) == Some(ip)
}

fn parse_ip(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(listen: &str, configured: &[&str]) -> Policy {
        Policy {
            configured: configured.iter().map(|s| s.to_string()).collect(),
            listen_addr: Some(listen.parse().expect("addr")),
            any_host: false,
        }
    }

    #[test]
    fn local_pages_and_apps_may_call() {
        let p = policy("127.0.0.1:8000", &[]);
        for o in [
            "http://localhost:3000",
            "https://localhost",
            "http://127.0.0.1:5173",
            "http://[::1]:8080",
            "http://app.localhost:3000",
            "tauri://localhost",
            "vscode-webview://8f2c4a1b",
            "app://.",
        ] {
            assert!(p.origin_allowed(o), "{o}");
        }
        for o in [
            "https://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "null",
            "chrome-extension://abc",
        ] {
            assert!(!p.origin_allowed(o), "{o}");
        }
    }

    #[test]
    fn the_bound_origin_and_configured_ones_may_call() {
        let p = policy("192.168.1.5:8000", &["https://app.example"]);
        assert!(p.origin_allowed("http://192.168.1.5:8000"));
        assert!(p.origin_allowed("https://app.example"));
        assert!(!p.origin_allowed("https://other.example"));
        assert!(policy("127.0.0.1:8000", &["*"]).origin_allowed("https://other.example"));
    }

    #[test]
    fn loopback_serves_local_names_only() {
        let p = policy("127.0.0.1:8000", &[]);
        for h in [
            "localhost",
            "localhost:8000",
            "LOCALHOST:8000",
            "127.0.0.1:8000",
            "127.0.0.1",
            "[::1]:8000",
        ] {
            assert!(p.host_allowed(h), "{h}");
        }
        for h in [
            "evil.example",
            "evil.example:8000",
            "localhost.evil.example",
        ] {
            assert!(!p.host_allowed(h), "{h}");
        }
        assert!(policy("0.0.0.0:8000", &[]).host_allowed("evil.example"));
        let shared = Policy {
            any_host: true,
            ..p
        };
        assert!(shared.host_allowed("abc.trycloudflare.com"));
    }
}
