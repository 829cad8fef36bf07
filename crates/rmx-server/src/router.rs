//! The HTTP surfaces, assembled into one axum `Router` served on both the TCP port and the Unix
//! socket. Each surface is a module with `routes() -> Router<Arc<Service>>` that translates
//! its wire format into the [`Service`](crate::service::Service) core; add a surface by
//! merging its routes below (the OpenAI and Anthropic surfaces live in `src/openai/` and
//! `src/anthropic/`).

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::Router;
use tower::Layer;

use crate::service::Service;

pub use crate::wire::body::BODY_LIMIT;

pub fn router(service: Arc<Service>) -> Router {
    let routes = Router::new()
        .merge(crate::native::routes())
        .merge(crate::openai::routes())
        .merge(crate::anthropic::routes())
        .merge(crate::openapi::routes())
        .merge(crate::health::routes())
        .merge(crate::rerank::routes())
        .merge(crate::metrics::routes())
        // Counts every request a route takes (the fallback's are not counted).
        .route_layer(middleware::from_fn_with_state(
            service.clone(),
            crate::metrics::count,
        ))
        .fallback(crate::path_errors::not_found)
        .layer(middleware::from_fn(crate::listener::scope))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(service);
    // What no handler answers (a wrong method, a body axum refused) still gets a JSON error in
    // the path's API shape. Around the whole router, not as a layer of it: a layer wraps each
    // route's handlers, and a 405's `Allow` header is written outside them.
    let json_errors = middleware::from_fn(crate::path_errors::json_errors).layer(routes);
    Router::new().fallback_service(json_errors)
}
