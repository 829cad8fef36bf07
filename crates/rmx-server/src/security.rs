//! Who may talk to the daemon over TCP: an API key, a CORS allow-list, and a per-client rate
//! limit, as axum middleware around the router ([`protect`]).
//!
//! The daemon listens on loopback by default. A key (`--api-key` / `RMX_API_KEY`) is
//! required before it listens anywhere else ([`check_listen_addr`]): a model server open to
//! the network without one is a free GPU for anybody who finds it. The key is accepted as
//! `Authorization: Bearer <key>` (OpenAI SDKs) and as `x-api-key: <key>` (Anthropic SDKs) and
//! compared in constant time. Rejections speak the error shape of the API the path belongs
//! to, so SDKs report them properly.
//!
//! Before all of them, requests from web pages of other sites and under foreign `Host` names
//! are refused (`crate::origin`).
//!
//! The Unix socket is guarded by file permissions; serve it without these layers.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use rmx_settings::EnvVars;
use sha2::{Digest, Sha256};

use crate::origin::listed;
pub use crate::path_errors::reject;

/// The environment variables read by [`SecurityConfig::from_env`] (declared, with their
/// documentation, in rmx-settings).
pub const ENV_API_KEY: &str = EnvVars::RMX_API_KEY;
pub const ENV_CORS_ORIGINS: &str = EnvVars::RMX_CORS_ORIGINS;
pub const ENV_RATE_LIMIT: &str = EnvVars::RMX_RATE_LIMIT;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SecurityConfig {
    /// A blank key (empty or spaces) is no key: see [`SecurityConfig::key`].
    pub api_key: Option<String>,
    /// Empty: no CORS headers (browsers refuse cross-origin calls).
    pub cors_origins: Vec<String>,
    /// Requests per minute per client.
    pub rate_limit: Option<u32>,
    /// Count clients by address even when they send a key: `rmx share` hands one key to
    /// everybody, so counting by key would put them all in one bucket.
    pub rate_limit_by_address: bool,
    /// The address the TCP listener is bound to, set once bound: on loopback (or unknown) only
    /// local `Host` names are served; its own origin may call it from a browser
    /// (`crate::origin`).
    pub listen_addr: Option<SocketAddr>,
    /// Serve any `Host` even on loopback: `rmx share` behind a tunnel, which forwards its public
    /// name. A share always has its key, which a DNS-rebound page does not.
    pub any_host: bool,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SecurityError {
    #[error("refusing to listen on {addr} without an API key: set --api-key or {ENV_API_KEY}, or listen on 127.0.0.1")]
    KeyRequired { addr: SocketAddr },
    #[error("{ENV_RATE_LIMIT}=`{value}` is not a number of requests per minute")]
    BadRateLimit { value: String },
}

impl SecurityConfig {
    /// The key clients must send, trimmed as offered keys are ([`offered_key`]). A blank one
    /// is none: no client could send it (offered keys are trimmed), yet it would pass for a key
    /// when the daemon decides whether it may listen off loopback.
    pub fn key(&self) -> Option<&str> {
        self.api_key
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty())
    }

    /// Reads `RMX_API_KEY`, `RMX_CORS_ORIGINS` and `RMX_RATE_LIMIT`.
    pub fn from_env() -> Result<SecurityConfig, SecurityError> {
        let var = rmx_settings::var;
        let rate_limit = match var(ENV_RATE_LIMIT) {
            Some(v) => Some(
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| SecurityError::BadRateLimit { value: v.clone() })?,
            )
            .filter(|&n| n > 0),
            None => None,
        };
        Ok(SecurityConfig {
            api_key: var(ENV_API_KEY),
            cors_origins: var(ENV_CORS_ORIGINS)
                .map(|v| {
                    v.split(',')
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
            rate_limit,
            rate_limit_by_address: false,
            listen_addr: None,
            any_host: false,
        })
    }
}

/// Refuses a non-loopback address unless an API key (not a blank one) is set.
pub fn check_listen_addr(addr: SocketAddr, config: &SecurityConfig) -> Result<(), SecurityError> {
    match config.key() {
        Some(_) => Ok(()),
        None if addr.ip().is_loopback() => Ok(()),
        None => Err(SecurityError::KeyRequired { addr }),
    }
}

/// Wraps a router in the layers the config asks for. Outermost first: the `Origin`/`Host`
/// guard (`crate::origin`, always), CORS (so preflights and error responses carry its
/// headers), then the key, then the rate limit.
pub fn protect(router: Router, config: &SecurityConfig) -> Router {
    let mut router = router;
    if let Some(rpm) = config.rate_limit {
        let limiter = Arc::new(RateLimiter::new(rpm, config.rate_limit_by_address));
        router = router.layer(middleware::from_fn(move |req: Request, next: Next| {
            let limiter = limiter.clone();
            async move { limiter.check(req, next).await }
        }));
    }
    if let Some(key) = config.key() {
        let digest: Arc<[u8; 32]> = Arc::new(sha256(key.as_bytes()));
        router = router.layer(middleware::from_fn(move |req: Request, next: Next| {
            let digest = digest.clone();
            async move { require_key(&digest, req, next).await }
        }));
    }
    if !config.cors_origins.is_empty() {
        let origins: Arc<Vec<String>> = Arc::new(config.cors_origins.clone());
        router = router.layer(middleware::from_fn(move |req: Request, next: Next| {
            let origins = origins.clone();
            async move { cors(&origins, req, next).await }
        }));
    }
    crate::origin::guard(
        router,
        &config.cors_origins,
        config.listen_addr,
        config.any_host,
    )
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Compares digests of the two keys, so neither the content nor the length of the key leaks
/// through timing.
pub fn key_matches(expected_digest: &[u8; 32], offered: &str) -> bool {
    let offered = sha256(offered.as_bytes());
    let diff = expected_digest
        .iter()
        .zip(offered.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(diff) == 0
}

/// The key a client offered: `Authorization: Bearer`, else `x-api-key`.
pub fn offered_key(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    bearer.or_else(|| {
        headers
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    })
}

async fn require_key(digest: &[u8; 32], req: Request, next: Next) -> Response {
    // Browsers send preflights without credentials.
    if req.method() == Method::OPTIONS {
        return next.run(req).await;
    }
    match offered_key(req.headers()) {
        Some(k) if key_matches(digest, k) => next.run(req).await,
        Some(_) => reject(
            req.uri().path(),
            StatusCode::UNAUTHORIZED,
            "invalid API key",
        ),
        None => reject(
            req.uri().path(),
            StatusCode::UNAUTHORIZED,
            "missing API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`",
        ),
    }
}

/// A token bucket per client: `rpm` requests a minute, bursts up to `rpm`.
struct RateLimiter {
    rpm: u32,
    by_address: bool,
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl RateLimiter {
    fn new(rpm: u32, by_address: bool) -> RateLimiter {
        RateLimiter {
            rpm,
            by_address,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Some(wait) when the client must wait that long.
    fn take(&self, client: &str, now: Instant) -> Option<Duration> {
        let capacity = f64::from(self.rpm);
        let per_sec = capacity / 60.0;
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() > 10_000 {
            // Forget clients that have been quiet long enough to be full again.
            buckets.retain(|_, (tokens, at)| {
                *tokens + now.duration_since(*at).as_secs_f64() * per_sec < capacity
            });
        }
        let (tokens, at) = buckets.entry(client.to_string()).or_insert((capacity, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * per_sec).min(capacity);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            None
        } else {
            Some(Duration::from_secs_f64((1.0 - *tokens) / per_sec))
        }
    }

    async fn check(&self, req: Request, next: Next) -> Response {
        let client = client_id(&req, self.by_address);
        match self.take(&client, Instant::now()) {
            None => next.run(req).await,
            Some(wait) => {
                let secs = wait.as_secs().max(1);
                let mut resp = reject(
                    req.uri().path(),
                    StatusCode::TOO_MANY_REQUESTS,
                    &format!(
                        "rate limit of {} requests per minute reached; retry in {secs} s",
                        self.rpm
                    ),
                );
                if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                    resp.headers_mut().insert(header::RETRY_AFTER, v);
                }
                resp
            }
        }
    }
}

/// A client is its API key when it sends one (several users behind one address) unless keys
/// are shared, else its address, else everyone local together.
fn client_id(req: &Request, by_address: bool) -> String {
    if let Some(k) = offered_key(req.headers()).filter(|_| !by_address) {
        return format!("key:{}", hex_prefix(&sha256(k.as_bytes())));
    }
    match req.extensions().get::<ConnectInfo<SocketAddr>>() {
        Some(ConnectInfo(addr)) => format!("ip:{}", addr.ip()),
        None => format!("ip:{}", IpAddr::from([127, 0, 0, 1])),
    }
}

fn hex_prefix(d: &[u8; 32]) -> String {
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

async fn cors(origins: &[String], req: Request, next: Next) -> Response {
    let origin = req.headers().get(header::ORIGIN).cloned();
    let allowed = origin
        .as_ref()
        .and_then(|o| o.to_str().ok())
        .is_some_and(|o| listed(origins, o));
    if req.method() == Method::OPTIONS && origin.is_some() {
        if !allowed {
            return StatusCode::FORBIDDEN.into_response();
        }
        let requested = req
            .headers()
            .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
            .cloned();
        let mut resp = StatusCode::NO_CONTENT.into_response();
        let h = resp.headers_mut();
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            requested.unwrap_or(HeaderValue::from_static(
                "authorization, content-type, x-api-key",
            )),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
        allow_origin(h, origin);
        return resp;
    }
    let mut resp = next.run(req).await;
    if allowed {
        allow_origin(resp.headers_mut(), origin);
    }
    resp
}

fn allow_origin(h: &mut HeaderMap, origin: Option<HeaderValue>) {
    if let Some(o) = origin {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
        h.insert(header::VARY, HeaderValue::from_static("origin"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_compare_by_content() {
        let d = sha256(b"secret");
        assert!(key_matches(&d, "secret"));
        assert!(!key_matches(&d, "secreT"));
        assert!(!key_matches(&d, "secret2"));
        assert!(!key_matches(&d, ""));
    }

    #[test]
    fn non_loopback_needs_a_key() {
        let open: SocketAddr = "0.0.0.0:8000".parse().expect("addr");
        let local: SocketAddr = "127.0.0.1:8000".parse().expect("addr");
        let v6: SocketAddr = "[::1]:8000".parse().expect("addr");
        let none = SecurityConfig::default();
        assert_eq!(
            check_listen_addr(open, &none),
            Err(SecurityError::KeyRequired { addr: open })
        );
        assert_eq!(check_listen_addr(local, &none), Ok(()));
        assert_eq!(check_listen_addr(v6, &none), Ok(()));
        let keyed = SecurityConfig {
            api_key: Some("k".into()),
            ..SecurityConfig::default()
        };
        assert_eq!(check_listen_addr(open, &keyed), Ok(()));
    }

    /// Issue #20: `--api-key "   "` passed for a key and let the daemon listen on the network.
    #[test]
    fn issue_20_a_blank_key_is_no_key() {
        let open: SocketAddr = "0.0.0.0:8000".parse().expect("addr");
        let local: SocketAddr = "127.0.0.1:8000".parse().expect("addr");
        for blank in ["", "   ", "\t\n"] {
            let config = SecurityConfig {
                api_key: Some(blank.into()),
                ..SecurityConfig::default()
            };
            assert_eq!(config.key(), None, "{blank:?}");
            assert_eq!(
                check_listen_addr(open, &config),
                Err(SecurityError::KeyRequired { addr: open }),
                "{blank:?}"
            );
            assert_eq!(check_listen_addr(local, &config), Ok(()), "{blank:?}");
        }
        let padded = SecurityConfig {
            api_key: Some(" s3cret ".into()),
            ..SecurityConfig::default()
        };
        assert_eq!(padded.key(), Some("s3cret"));
    }

    #[test]
    fn bucket_refills_over_time() {
        let l = RateLimiter::new(60, false);
        let t0 = Instant::now();
        for _ in 0..60 {
            assert_eq!(l.take("a", t0), None);
        }
        assert!(l.take("a", t0).is_some());
        assert_eq!(l.take("b", t0), None, "clients have their own buckets");
        assert_eq!(l.take("a", t0 + Duration::from_millis(1100)), None);
    }
}
