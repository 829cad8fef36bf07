//! Streaming answers as newline-delimited JSON. A task turns service events into lines; when the
//! client hangs up, the body (and its channel) is dropped, the task's next send fails, and
//! dropping the service stream cancels the generation.

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt;

/// Where a streaming handler writes its lines.
pub struct Lines(mpsc::UnboundedSender<Bytes>);

impl Lines {
    /// False once the client is gone.
    pub fn send<T: Serialize>(&self, value: &T) -> bool {
        let mut line = serde_json::to_vec(value).unwrap_or_else(|e| {
            format!("{{\"error\":\"cannot encode the answer: {e}\"}}").into_bytes()
        });
        line.push(b'\n');
        self.0.send(Bytes::from(line)).is_ok()
    }

    /// The client hung up (the body and its end of the channel are gone).
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

pub fn response(lines: mpsc::UnboundedReceiver<Bytes>) -> Response {
    let stream = UnboundedReceiverStream::new(lines).map(Ok::<_, std::convert::Infallible>);
    (
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(stream),
    )
        .into_response()
}

pub fn channel() -> (Lines, mpsc::UnboundedReceiver<Bytes>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Lines(tx), rx)
}
