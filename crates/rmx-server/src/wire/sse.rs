//! Server-sent events out of a [`ServiceEvent`] stream, for every streaming surface (the
//! Anthropic one too): a [`Translator`] turns each service event into zero or more SSE events,
//! and says what to send while the model is silent (a long prefill) so that proxies and
//! clients with read timeouts keep the connection.
//!
//! The SSE body owns the service stream: when the client hangs up, hyper drops the body, the
//! service stream's receiver goes with it, and the service cancels the generation.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};

use crate::service::ServiceEvent;

/// How long the model may be silent before the translator's idle events go out.
pub const IDLE_INTERVAL: Duration = Duration::from_secs(5);

pub trait Translator: Send + 'static {
    /// Events before the first service event (`message_start`, `response.created`, ...).
    fn start(&mut self) -> Vec<Event>;
    /// Events for one service event. After `Done` or `Error` nothing more is read.
    fn event(&mut self, event: ServiceEvent) -> Vec<Event>;
    /// Events while the model is silent (pings); none by default.
    fn idle(&mut self) -> Vec<Event> {
        Vec::new()
    }
}

/// The SSE events of a whole answer, the idle interval given.
pub fn events<S, T>(
    service: S,
    translator: T,
    idle: Duration,
) -> impl Stream<Item = Result<Event, Infallible>> + Send
where
    S: Stream<Item = ServiceEvent> + Send + Unpin + 'static,
    T: Translator,
{
    struct State<S, T> {
        service: S,
        translator: T,
        queue: VecDeque<Event>,
        started: bool,
        done: bool,
        idle: Duration,
    }
    let state = State {
        service,
        translator,
        queue: VecDeque::new(),
        started: false,
        done: false,
        idle,
    };
    futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(ev) = st.queue.pop_front() {
                return Some((Ok(ev), st));
            }
            if st.done {
                return None;
            }
            if !st.started {
                st.started = true;
                st.queue.extend(st.translator.start());
                continue;
            }
            match tokio::time::timeout(st.idle, st.service.next()).await {
                Ok(Some(ev)) => {
                    st.done = matches!(ev, ServiceEvent::Done(_) | ServiceEvent::Error(_));
                    st.queue.extend(st.translator.event(ev));
                }
                Ok(None) => {
                    // The service promises a last event; if the channel closed without one,
                    // end the answer as a failure rather than leave the client hanging.
                    st.done = true;
                    let ev = ServiceEvent::Error("the answer ended without a final event".into());
                    st.queue.extend(st.translator.event(ev));
                }
                Err(_) => st.queue.extend(st.translator.idle()),
            }
        }
    })
}

/// An SSE response for a whole answer.
pub fn response<S, T>(service: S, translator: T) -> Response
where
    S: Stream<Item = ServiceEvent> + Send + Unpin + 'static,
    T: Translator,
{
    let mut resp = Sse::new(events(service, translator, IDLE_INTERVAL)).into_response();
    // Reverse proxies (nginx) buffer responses unless told not to.
    resp.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    resp
}

/// `data: <json>` with no event name (OpenAI Chat Completions).
pub fn data_event<T: serde::Serialize>(value: &T) -> Event {
    Event::default()
        .data(serde_json::to_string(value).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")))
}

/// `event: <name>` + `data: <json>` (Anthropic, Responses API).
pub fn named_event<T: serde::Serialize>(name: &str, value: &T) -> Event {
    data_event(value).event(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{Final, FinishReason};
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::UnboundedReceiverStream;

    struct Echo;
    impl Translator for Echo {
        fn start(&mut self) -> Vec<Event> {
            vec![Event::default().data("start")]
        }
        fn event(&mut self, event: ServiceEvent) -> Vec<Event> {
            vec![Event::default().data(format!("{event:?}"))]
        }
        fn idle(&mut self) -> Vec<Event> {
            vec![Event::default().data("ping")]
        }
    }

    fn done() -> ServiceEvent {
        ServiceEvent::Done(Final {
            finish: FinishReason::Stop,
            usage: Default::default(),
            timings: Default::default(),
            load_duration: Duration::ZERO,
            total_duration: Duration::ZERO,
            ended_in_reasoning: false,
            stop_sequence: None,
            reasoning_tokens: 0,
        })
    }

    #[tokio::test]
    async fn idle_events_go_out_while_the_model_is_silent() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut s = Box::pin(events(
            UnboundedReceiverStream::new(rx),
            Echo,
            Duration::from_millis(20),
        ));
        assert!(s.next().await.is_some()); // start
        let before_token = s.next().await;
        assert!(
            format!("{before_token:?}").contains("ping"),
            "{before_token:?}"
        );
        tx.send(ServiceEvent::Content("hi".into())).expect("open");
        tx.send(done()).expect("open");
        let mut rest = Vec::new();
        while let Some(ev) = s.next().await {
            rest.push(format!("{ev:?}"));
        }
        assert!(rest.iter().any(|e| e.contains("Content")));
        assert!(rest.last().is_some_and(|e| e.contains("Done")), "{rest:?}");
    }

    #[tokio::test]
    async fn dropping_the_body_drops_the_service_receiver() {
        let (tx, rx) = mpsc::unbounded_channel::<ServiceEvent>();
        let body = events(UnboundedReceiverStream::new(rx), Echo, IDLE_INTERVAL);
        drop(body);
        // The service's pump waits on exactly this to cancel the generation.
        tokio::time::timeout(Duration::from_secs(1), tx.closed())
            .await
            .expect("receiver dropped");
    }

    #[tokio::test]
    async fn a_stream_without_a_final_event_ends_as_an_error() {
        let (tx, rx) = mpsc::unbounded_channel::<ServiceEvent>();
        drop(tx);
        let all: Vec<_> = events(UnboundedReceiverStream::new(rx), Echo, IDLE_INTERVAL)
            .collect()
            .await;
        assert!(format!("{:?}", all.last()).contains("Error"));
    }
}
