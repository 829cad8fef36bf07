//! Which listener a request came in on: the Unix socket (the user's own CLI, guarded by its file
//! permissions) or TCP (any program, any local user, maybe another machine). Some answers
//! depend on it: over TCP a request may name a model folder by path only where the user
//! registered it or allowed it (`crate::service::folders`), so that a client cannot read out
//! which folders of the user's disk hold what.
//!
//! [`crate::daemon::serve`] marks every TCP request ([`over_tcp`]); the router ([`scope`]) runs
//! each handler knowing its listener, which [`current`] reads wherever the request's own task
//! asks, with no parameter threaded through every surface. A router served without the mark
//! (the socket; `Router::oneshot` in tests) is the socket. Code outside a request's task (a
//! spawned task) counts as TCP: the stricter answer.

use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    Socket,
    Tcp,
}

tokio::task_local! {
    static LISTENER: Listener;
}

/// The listener of the request whose task this runs in; [`Listener::Tcp`] outside one.
pub fn current() -> Listener {
    LISTENER.try_with(|l| *l).unwrap_or(Listener::Tcp)
}

/// Marks every request of `router` as come over TCP.
pub fn over_tcp(router: Router) -> Router {
    router.layer(middleware::map_request(|mut req: Request| async move {
        req.extensions_mut().insert(Listener::Tcp);
        req
    }))
}

/// Middleware of the router: runs the request with its listener known to [`current`].
pub(crate) async fn scope(req: Request, next: Next) -> Response {
    let listener = req
        .extensions()
        .get::<Listener>()
        .copied()
        .unwrap_or(Listener::Socket);
    LISTENER.scope(listener, next.run(req)).await
}
