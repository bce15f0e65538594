//! The HTTP+SSE transport of MCP 2024-11-05, which many servers still serve: a GET opens
//! an event stream whose first event, `endpoint`, names where to POST each message; the
//! server's messages come back on that stream. rmcp 3.9 has no client for it: this one
//! bridges it to JSON lines, which the session reads as from a server in this process.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// The largest event the stream may carry (one message): a larger one ends the
/// connection. Held whole in memory, unlike a stdio line, which the spill takes to disk.
pub const MAX_EVENT_BYTES: usize = 64 * 1024 * 1024;

/// How long the GET may take to answer and name its endpoint: a legacy server names it
/// at once, and a Streamable HTTP server may hold the GET (a stateless one answers late,
/// with a stream that names none), so the wait is short before Streamable HTTP is tried.
const ENDPOINT_WAIT: Duration = Duration::from_secs(5);

/// How long one message's POST may take (the answer comes on the stream).
const POST_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum LegacySseError {
    #[error("its event stream was refused: HTTP {0}")]
    Refused(reqwest::StatusCode),
    /// 401 or 403: the entry's credentials were refused, whichever transport it speaks.
    #[error("its event stream was refused: HTTP {0} (check the entry's headers)")]
    Unauthorized(reqwest::StatusCode),
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

/// Opens the event stream at `url` and waits for its `endpoint` event, which must name
/// the same origin (scheme, host and port): the entry's headers go with every message,
/// and must not go to another server. The session speaks JSON lines over the stream
/// handed back, as to a server in this process: the same transport type, so the binaries
/// hold no second copy of rmcp's session loop for this one. A task bridges it: each
/// line the session writes is posted, each message event is written back as a line.
pub async fn open(
    client: reqwest::Client,
    url: &reqwest::Url,
    headers: HeaderMap,
) -> Result<tokio::io::DuplexStream, LegacySseError> {
    let (endpoint, events) =
        tokio::time::timeout(ENDPOINT_WAIT, read_endpoint(&client, url, headers.clone()))
            .await
            .map_err(|_| LegacySseError::EndpointLate(ENDPOINT_WAIT))??;
    let (session_end, bridge_end) = tokio::io::duplex(BRIDGE_BUFFER);
    let bridge = Bridge {
        client,
        endpoint,
        headers,
    };
    tokio::spawn(bridge.run(events, bridge_end));
    Ok(session_end)
}

/// What the session's end of the stream holds before a write waits.
const BRIDGE_BUFFER: usize = 1024 * 1024;

/// The GET's stream, read up to its `endpoint` event: where to post, and the rest of the
/// stream.
async fn read_endpoint(
    client: &reqwest::Client,
    url: &reqwest::Url,
    headers: HeaderMap,
) -> Result<(reqwest::Url, Events), LegacySseError> {
    let response = client
        .get(url.clone())
        .headers(headers)
        .header(ACCEPT, HeaderValue::from_static("text/event-stream"))
        .send()
        .await
        .map_err(LegacySseError::Http)?;
    let status = response.status();
    if matches!(
        status,
        reqwest::StatusCode::UNAUTHORIZED | reqwest::StatusCode::FORBIDDEN
    ) {
        return Err(LegacySseError::Unauthorized(status));
    }
    if !status.is_success() {
        return Err(LegacySseError::Refused(status));
    }
    // A relative endpoint is the stream's, wherever a redirect (on the same origin, the
    // client's rule) took it.
    let streamed_from = response.url().clone();
    let kind = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("no content type")
        .to_owned();
    if !kind.starts_with("text/event-stream") {
        return Err(LegacySseError::NotEventStream(kind));
    }
    let mut events: Events = Box::pin(bounded_events(response));
    while let Some(event) = events.next().await {
        let event = event?;
        if event.event.as_deref() == Some("endpoint") {
            let endpoint = event.data.unwrap_or_default();
            let endpoint = same_origin_endpoint(url, &streamed_from, endpoint.trim())?;
            return Ok((endpoint, events));
        }
    }
    Err(LegacySseError::NoEndpoint)
}

/// A legacy stream's events, boxed for the task that reads them.
type Events =
    std::pin::Pin<Box<dyn futures::Stream<Item = Result<sse_stream::Sse, LegacySseError>> + Send>>;

/// Where the session's messages are posted, with what.
struct Bridge {
    client: reqwest::Client,
    endpoint: reqwest::Url,
    headers: HeaderMap,
}

impl Bridge {
    /// Until the stream or the session ends; then both ends close (the session ends).
    async fn run(self, mut events: Events, bridge_end: tokio::io::DuplexStream) {
        let (from_session, to_session) = tokio::io::split(bridge_end);
        let to_session = Arc::new(tokio::sync::Mutex::new(to_session));
        let incoming = {
            let to_session = to_session.clone();
            async move {
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
                    // One line each: a message written over several `data:` lines holds
                    // line breaks, which the session would read as message ends.
                    let line = match serde_json::from_str::<serde_json::Value>(&data) {
                        Ok(message) => message.to_string(),
                        Err(error) => {
                            tracing::warn!(%error, "an MCP server sent an event that is not JSON; skipped");
                            continue;
                        }
                    };
                    if write_line(&to_session, &line).await.is_err() {
                        return;
                    }
                }
            }
        };
        let outgoing = async move {
            let mut lines = tokio::io::BufReader::new(from_session).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                // Each on its own: a slow answer to one does not hold the next.
                tokio::spawn(self.post(line, to_session.clone()));
            }
        };
        tokio::select! {
            () = incoming => {}
            () = outgoing => {}
        }
    }

    /// Posts one message; a request the server refused is answered to the session with
    /// an error naming the status, so the request fails rather than waiting for ever.
    fn post(
        &self,
        line: String,
        to_session: Arc<tokio::sync::Mutex<WriteHalf>>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let sent = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .timeout(POST_TIMEOUT)
            .body(line.clone())
            .send();
        async move {
            let failed = match sent.await {
                Ok(response) if response.status().is_success() => return,
                Ok(response) => LegacySseError::PostRefused(response.status()).to_string(),
                Err(error) => LegacySseError::Http(error).to_string(),
            };
            let request = serde_json::from_str::<serde_json::Value>(&line)
                .ok()
                .filter(|message| message.get("method").is_some())
                .and_then(|message| message.get("id").cloned());
            match request {
                Some(id) => {
                    let answer = serde_json::json!({
                        "jsonrpc": "2.0",
                        "id": id,
                        "error": {"code": -32603, "message": format!("the server did not take the request: {failed}")}
                    });
                    let _ = write_line(&to_session, &answer.to_string()).await;
                }
                None => tracing::warn!(%failed, "a message to an MCP server was not taken"),
            }
        }
    }
}

type WriteHalf = tokio::io::WriteHalf<tokio::io::DuplexStream>;

async fn write_line(to_session: &tokio::sync::Mutex<WriteHalf>, line: &str) -> std::io::Result<()> {
    let mut writer = to_session.lock().await;
    writer.write_all(line.as_bytes()).await?;
    writer.write_all(b"\n").await?;
    writer.flush().await
}

/// `endpoint` (absolute, or relative to the URL the stream came from) when it is on the
/// entry's origin.
fn same_origin_endpoint(
    entry: &reqwest::Url,
    streamed_from: &reqwest::Url,
    endpoint: &str,
) -> Result<reqwest::Url, LegacySseError> {
    let resolved = streamed_from
        .join(endpoint)
        .map_err(|error| LegacySseError::BadEndpoint(error.to_string()))?;
    if resolved.origin() != entry.origin() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_taken_on_the_streams_origin_only() {
        let stream = reqwest::Url::parse("https://mcp.example.com:8443/v1/sse").unwrap();
        assert_eq!(
            same_origin_endpoint(&stream, &stream, "/messages/?session_id=42")
                .unwrap()
                .as_str(),
            "https://mcp.example.com:8443/messages/?session_id=42"
        );
        assert_eq!(
            same_origin_endpoint(&stream, &stream, "messages?s=1")
                .unwrap()
                .as_str(),
            "https://mcp.example.com:8443/v1/messages?s=1"
        );
        // Relative to where a redirect on the same origin took the stream.
        let redirected = reqwest::Url::parse("https://mcp.example.com:8443/v2/sse/").unwrap();
        assert_eq!(
            same_origin_endpoint(&stream, &redirected, "messages?s=1")
                .unwrap()
                .as_str(),
            "https://mcp.example.com:8443/v2/sse/messages?s=1"
        );
        for elsewhere in [
            "https://evil.example/collect",
            "//evil.example/collect",
            "http://mcp.example.com:8443/messages/",
            "https://mcp.example.com/messages/",
        ] {
            assert!(
                matches!(
                    same_origin_endpoint(&stream, &stream, elsewhere),
                    Err(LegacySseError::EndpointElsewhere(_))
                ),
                "{elsewhere}"
            );
        }
    }
}
