//! The HTTP+SSE transport of MCP 2024-11-05, which many servers still serve: a GET opens
//! an event stream whose first event, `endpoint`, names where to POST each message; the
//! server's messages come back on that stream. rmcp 3.9 has no client for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use tokio::sync::mpsc;

/// The largest event the stream may carry (one message): a larger one ends the
/// connection. Held whole in memory, unlike a stdio line, which the spill takes to disk.
pub const MAX_EVENT_BYTES: usize = 64 * 1024 * 1024;

/// How long the stream may take to name its endpoint.
const ENDPOINT_WAIT: Duration = Duration::from_secs(30);

/// How long one message's POST may take (the answer comes on the stream).
const POST_TIMEOUT: Duration = Duration::from_secs(60);

/// Messages read ahead of the session.
const QUEUE: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum LegacySseError {
    #[error("its event stream was refused: HTTP {0}")]
    Refused(reqwest::StatusCode),
    #[error("its URL answers with {0}, not an event stream")]
    NotEventStream(String),
    #[error("its event stream ended before it named where to send messages")]
    NoEndpoint,
    #[error("its event stream did not name where to send messages within {0:?}")]
    EndpointLate(Duration),
    #[error("its event stream named an endpoint that does not parse ({0})")]
    BadEndpoint(String),
    #[error("its event stream named an endpoint on another server ({0}): refused")]
    EndpointElsewhere(String),
    #[error("an event on its stream is larger than {} MiB", MAX_EVENT_BYTES / (1024 * 1024))]
    EventTooLarge,
    #[error("a message was refused: HTTP {0}")]
    PostRefused(reqwest::StatusCode),
    #[error("HTTP: {0}")]
    Http(#[source] reqwest::Error),
    #[error("its event stream broke: {0}")]
    Stream(String),
}

/// An open legacy SSE session: its stream is read by a task of its own, ended with it.
pub struct LegacySse {
    client: reqwest::Client,
    endpoint: reqwest::Url,
    headers: HeaderMap,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for LegacySse {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl LegacySse {
    /// Opens the event stream at `url` and waits for its `endpoint` event, which must
    /// name the same origin (scheme, host and port): the entry's headers go with every
    /// message, and must not go to another server.
    pub async fn open(
        client: reqwest::Client,
        url: &reqwest::Url,
        headers: HeaderMap,
    ) -> Result<Self, LegacySseError> {
        let response = client
            .get(url.clone())
            .headers(headers.clone())
            .header(ACCEPT, HeaderValue::from_static("text/event-stream"))
            .send()
            .await
            .map_err(LegacySseError::Http)?;
        if !response.status().is_success() {
            return Err(LegacySseError::Refused(response.status()));
        }
        let kind = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("no content type")
            .to_owned();
        if !kind.starts_with("text/event-stream") {
            return Err(LegacySseError::NotEventStream(kind));
        }
        let mut events = Box::pin(bounded_events(response));
        let endpoint = tokio::time::timeout(ENDPOINT_WAIT, async {
            while let Some(event) = events.next().await {
                let event = event?;
                if event.event.as_deref() == Some("endpoint") {
                    return Ok(event.data.unwrap_or_default());
                }
            }
            Err(LegacySseError::NoEndpoint)
        })
        .await
        .map_err(|_| LegacySseError::EndpointLate(ENDPOINT_WAIT))??;
        let endpoint = same_origin_endpoint(url, endpoint.trim())?;
        let (sender, incoming) = mpsc::channel(QUEUE);
        let reader = tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(error) => {
                        tracing::warn!(%error, "an MCP server's event stream ended");
                        return;
                    }
                };
                // Messages are `message` events (the default kind); others are ignored.
                if !matches!(event.event.as_deref(), None | Some("message")) {
                    continue;
                }
                let Some(data) = event.data else {
                    continue;
                };
                match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&data) {
                    Ok(message) => {
                        if sender.send(message).await.is_err() {
                            return;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "an MCP server sent an event that is not a message; skipped");
                    }
                }
            }
        });
        Ok(Self {
            client,
            endpoint,
            headers,
            incoming,
            reader,
        })
    }
}

/// `endpoint` (absolute, or relative to the stream's URL) when it is on the stream's
/// origin.
fn same_origin_endpoint(
    stream: &reqwest::Url,
    endpoint: &str,
) -> Result<reqwest::Url, LegacySseError> {
    let resolved = stream
        .join(endpoint)
        .map_err(|error| LegacySseError::BadEndpoint(error.to_string()))?;
    if resolved.origin() != stream.origin() {
        return Err(LegacySseError::EndpointElsewhere(
            resolved.origin().ascii_serialization(),
        ));
    }
    Ok(resolved)
}

/// The response's events, each at most [`MAX_EVENT_BYTES`]: the bytes read since the
/// last event are counted, so a stream that never finishes an event ends instead of
/// growing without end.
fn bounded_events(
    response: reqwest::Response,
) -> impl futures::Stream<Item = Result<sse_stream::Sse, LegacySseError>> + Send {
    let pending = Arc::new(AtomicUsize::new(0));
    let too_large = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let counted = {
        let (pending, too_large) = (pending.clone(), too_large.clone());
        response.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(std::io::Error::other)?;
            let held = pending.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
            if held > MAX_EVENT_BYTES {
                too_large.store(true, Ordering::Relaxed);
                return Err(std::io::Error::other("event too large"));
            }
            Ok(chunk)
        })
    };
    sse_stream::SseStream::from_bytes_stream(counted).map(move |event| {
        pending.store(0, Ordering::Relaxed);
        event.map_err(|error| {
            if too_large.load(Ordering::Relaxed) {
                LegacySseError::EventTooLarge
            } else {
                LegacySseError::Stream(error.to_string())
            }
        })
    })
}

impl rmcp::transport::Transport<RoleClient> for LegacySse {
    type Error = LegacySseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .timeout(POST_TIMEOUT)
            .json(&item);
        async move {
            let response = request.send().await.map_err(LegacySseError::Http)?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(LegacySseError::PostRefused(response.status()))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_taken_on_the_streams_origin_only() {
        let stream = reqwest::Url::parse("https://mcp.example.com:8443/v1/sse").unwrap();
        assert_eq!(
            same_origin_endpoint(&stream, "/messages/?session_id=42")
                .unwrap()
                .as_str(),
            "https://mcp.example.com:8443/messages/?session_id=42"
        );
        assert_eq!(
            same_origin_endpoint(&stream, "messages?s=1")
                .unwrap()
                .as_str(),
            "https://mcp.example.com:8443/v1/messages?s=1"
        );
        for elsewhere in [
            "https://evil.example/collect",
            "//evil.example/collect",
            "http://mcp.example.com:8443/messages/",
            "https://mcp.example.com/messages/",
        ] {
            assert!(
                matches!(
                    same_origin_endpoint(&stream, elsewhere),
                    Err(LegacySseError::EndpointElsewhere(_))
                ),
                "{elsewhere}"
            );
        }
    }
}
