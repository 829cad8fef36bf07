//! `GET /metrics`: what the daemon has done and holds, in the OpenMetrics text format that
//! Prometheus scrapes, through the `prometheus-client` crate: requests by route and status,
//! prompt and generated tokens, time to first token and decode time, the sequences running and
//! waiting, the loaded models and memory.
//!
//! Counters and histograms are kept as requests go ([`Metrics::request`] from the router's
//! middleware, [`Metrics::answer`] when an answer ends); what the daemon holds is read when
//! scraped. No label names a model: a model's name can be a folder of someone's disk, and a
//! label per model grows without bound.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::service::Service;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    /// The route's pattern (`/v1/models/{id}`), not the path asked for.
    route: String,
    status: u16,
}

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    prompt_tokens: Counter,
    generated_tokens: Counter,
    time_to_first_token: Histogram,
    decode: Histogram,
    running: Gauge,
    waiting: Gauge,
    loaded_models: Gauge,
    loaded_bytes: Gauge,
    accelerator_bytes: Gauge,
    resident_bytes: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("rmx");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route and status",
            requests.clone(),
        );
        let counter = |registry: &mut Registry, name: &str, help: &str| {
            let c = Counter::default();
            registry.register(name, help, c.clone());
            c
        };
        let prompt_tokens = counter(&mut registry, "prompt_tokens", "Prompt tokens read");
        let generated_tokens = counter(&mut registry, "generated_tokens", "Tokens generated");
        // 10 ms to about 80 s.
        let time_to_first_token = Histogram::new(exponential_buckets(0.01, 2.0, 14));
        registry.register_with_unit(
            "time_to_first_token",
            "From a request's arrival to its first generated token",
            prometheus_client::registry::Unit::Seconds,
            time_to_first_token.clone(),
        );
        // 1 ms to about 130 s per answer.
        let decode = Histogram::new(exponential_buckets(0.001, 2.0, 18));
        registry.register_with_unit(
            "decode",
            "Time an answer spent generating after its first token",
            prometheus_client::registry::Unit::Seconds,
            decode.clone(),
        );
        let gauge = |registry: &mut Registry, name: &str, help: &str| {
            let g = Gauge::default();
            registry.register(name, help, g.clone());
            g
        };
        Metrics {
            running: gauge(
                &mut registry,
                "running_sequences",
                "Sequences the engines are prefilling or decoding",
            ),
            waiting: gauge(
                &mut registry,
                "waiting_sequences",
                "Prefilled sequences waiting for a row in a full batch (the queue)",
            ),
            loaded_models: gauge(&mut registry, "loaded_models", "Models loaded or loading"),
            loaded_bytes: gauge(
                &mut registry,
                "loaded_model_bytes",
                "Bytes of weights of the loaded models",
            ),
            accelerator_bytes: gauge(
                &mut registry,
                "mlx_active_memory_bytes",
                "Memory MLX holds in arrays now",
            ),
            resident_bytes: gauge(
                &mut registry,
                "resident_memory_bytes",
                "The daemon's resident memory",
            ),
            registry,
            requests,
            prompt_tokens,
            generated_tokens,
            time_to_first_token,
            decode,
        }
    }

    /// One HTTP request answered.
    pub fn request(&self, route: &str, status: u16) {
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_string(),
                status,
            })
            .inc();
    }

    /// One answer ended: its prompt and generated tokens, when its first token came (None:
    /// none did), and how long it generated after that.
    pub fn answer(
        &self,
        prompt: usize,
        generated: usize,
        first_token: Option<Duration>,
        decode: Duration,
    ) {
        self.prompt_tokens.inc_by(prompt as u64);
        self.generated_tokens.inc_by(generated as u64);
        if let Some(t) = first_token {
            self.time_to_first_token.observe(t.as_secs_f64());
            self.decode.observe(decode.as_secs_f64());
        }
    }

    /// The text Prometheus scrapes, with what `svc` holds now.
    fn scrape(&self, svc: &Service) -> String {
        let running = svc.models().running();
        let sum = |f: fn(&crate::lifecycle::RunningInfo) -> usize| {
            running.iter().map(f).sum::<usize>() as i64
        };
        self.running.set(sum(|r| r.running));
        self.waiting.set(sum(|r| r.waiting));
        self.loaded_models.set(running.len() as i64);
        self.loaded_bytes
            .set(running.iter().map(|r| r.size).sum::<u64>() as i64);
        self.accelerator_bytes.set(rmx_mlx::active_memory() as i64);
        if let Some(rss) = resident_bytes() {
            self.resident_bytes.set(rss as i64);
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The process's resident memory, from /proc (Linux); None elsewhere.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub fn routes() -> Router<Arc<Service>> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(State(svc): State<Arc<Service>>) -> Response {
    let text = svc.metrics().scrape(&svc);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// Middleware on the routes: counts each answered request under its route's pattern.
pub(crate) async fn count(State(svc): State<Arc<Service>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let resp = next.run(req).await;
    svc.metrics().request(&route, resp.status().as_u16());
    resp
}
