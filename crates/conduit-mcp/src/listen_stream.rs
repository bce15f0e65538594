//! Waits, bounded, for an HTTP server's own stream (its GET) before the first request; the
//! same client wrapper passes large SSE events through the spill and turns an answer too
//! large for rmcp to read whole into its request's error.
//!
//! A server with a session sends what is not an answer to a request (an `elicitation/create`
//! it does not relate to a call, a list-changed notification) on the stream the client
//! opens with GET after `initialized`. rmcp opens it in the background, so the first
//! request can reach the server before the stream does, and what the server sends in
//! between is lost: the TypeScript SDK drops a message for a stream that is not open.
//! The official conformance suite's `elicitation-sep1034-client-defaults` scenario does
//! exactly that, and failed once on a loaded machine. [`WatchedClient`] tells
//! [`ListenStream`] when the server gave a session and when the GET was answered.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use tokio::sync::watch;

use crate::spill::Spill;

/// How long a connection waits for the server to answer its GET: a server answers it at
/// once (its stream's headers, or 405 without one); one that holds it is not waited for.
pub const LISTEN_STREAM_WAIT: Duration = Duration::from_secs(1);

/// Where the server's own stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    /// No session yet (or ever: a stateless server has no such stream).
    NotExpected,
    /// The server gave a session: the GET will follow.
    Expected,
    /// The server answered the GET (with its stream, or without one).
    Answered,
}

/// Shared by a connection and its HTTP client.
#[derive(Debug, Clone)]
pub struct ListenStream {
    state: watch::Sender<Stream>,
}

impl Default for ListenStream {
    fn default() -> Self {
        Self {
            state: watch::Sender::new(Stream::NotExpected),
        }
    }
}

impl ListenStream {
    /// Waits until the server answered the GET, when one is expected, for at most
    /// `within`; false when it did not answer in time.
    pub async fn answered(&self, within: Duration) -> bool {
        let mut state = self.state.subscribe();
        let settled = state.wait_for(|stream| *stream != Stream::Expected);
        matches!(tokio::time::timeout(within, settled).await, Ok(Ok(_)))
    }

    fn session_given(&self) {
        self.state.send_if_modified(|stream| {
            let first = *stream == Stream::NotExpected;
            if first {
                *stream = Stream::Expected;
            }
            first
        });
    }

    fn get_answered(&self) {
        self.state.send_replace(Stream::Answered);
    }
}

/// An HTTP client for rmcp's transport that reports to a [`ListenStream`], and passes the
/// events of every stream through the connection's spill (`spill::held_events`).
#[derive(Clone)]
pub struct WatchedClient<C> {
    inner: C,
    stream: ListenStream,
    spill: Arc<Spill>,
    /// When the next GET would go at the steady pace (a GCRA's theoretical arrival time):
    /// a server that ends its stream at once with `retry: 0` would otherwise have rmcp
    /// open it again in a tight loop for the whole session.
    next_get: Arc<parking_lot::Mutex<Option<tokio::time::Instant>>>,
}

/// The steady pace of one connection's GETs (its own stream, and requests' streams
/// resumed), after a burst of [`GET_BURST`] at once.
pub const MIN_GET_INTERVAL: Duration = Duration::from_secs(1);
/// GETs that may go at once: the session's stream and the streams of up to 8 calls
/// resumed together.
pub const GET_BURST: u32 = 9;

impl<C> WatchedClient<C> {
    pub fn new(inner: C, stream: ListenStream, spill: Arc<Spill>) -> Self {
        Self {
            inner,
            stream,
            spill,
            next_get: Arc::default(),
        }
    }

    /// Waits for this GET's turn: [`GET_BURST`] at once, then one each
    /// [`MIN_GET_INTERVAL`].
    async fn paced_get(&self) {
        let due = {
            let mut next = self.next_get.lock();
            let now = tokio::time::Instant::now();
            let theoretical = next.map_or(now, |next| next.max(now));
            let due = theoretical
                .checked_sub(MIN_GET_INTERVAL * (GET_BURST - 1))
                .map_or(now, |earliest| earliest.max(now));
            *next = Some(theoretical + MIN_GET_INTERVAL);
            due
        };
        tokio::time::sleep_until(due).await;
    }

    fn saw_post<E>(
        &self,
        asked: Option<RequestId>,
        response: Result<StreamableHttpPostResponse, StreamableHttpError<E>>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<E>>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let response = match (response, asked) {
            // rmcp reads an answer sent whole (JSON) up to 16 MiB and otherwise fails the
            // transport, which ended the session for one large result: the request fails
            // instead, saying why.
            (Err(StreamableHttpError::ResponseBodyTooLarge { max_size }), Some(id)) => Ok(
                StreamableHttpPostResponse::Json(too_large(id, max_size), None),
            ),
            (response, _) => response,
        };
        if let Ok(
            StreamableHttpPostResponse::Json(_, Some(_))
            | StreamableHttpPostResponse::Sse(_, Some(_)),
        ) = &response
        {
            self.stream.session_given();
        }
        response.map(|response| match response {
            StreamableHttpPostResponse::Sse(events, session) => StreamableHttpPostResponse::Sse(
                crate::spill::held_events(events, self.spill.clone()),
                session,
            ),
            other => other,
        })
    }

    /// The session's own stream is a GET with a session and nothing to resume.
    fn saw_get<E>(
        &self,
        session_id: bool,
        resuming: bool,
        response: Result<BoxedSseResponse, E>,
    ) -> Result<BoxedSseResponse, E> {
        if session_id && !resuming {
            self.stream.get_answered();
        }
        response.map(|events| crate::spill::held_events(events, self.spill.clone()))
    }
}

impl<C> StreamableHttpClient for WatchedClient<C>
where
    C: StreamableHttpClient + Send + Sync,
{
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let asked = request_id(&message);
        let response = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.saw_post(asked, response)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let asked = request_id(&message);
        let response = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.saw_post(asked, response)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        let (session, resuming) = (session_id.is_some(), last_event_id.is_some());
        self.paced_get().await;
        let response = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.saw_get(session, resuming, response)
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        let (session, resuming) = (session_id.is_some(), last_event_id.is_some());
        self.paced_get().await;
        let response = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.saw_get(session, resuming, response)
    }
}

/// A connection's HTTP client, signed in or not. One type for both: each client type is
/// another copy of rmcp's HTTP worker and session loop in the binary (~100 KB).
#[derive(Clone)]
pub enum MaybeSignedIn {
    Plain(reqwest::Client),
    SignedIn(rmcp::transport::AuthClient<reqwest::Client>),
}

/// `$call` on whichever client `$self` holds, named `$client`: one body for both arms.
macro_rules! on_either {
    ($self:ident, $client:ident => $call:expr) => {
        match $self {
            MaybeSignedIn::Plain($client) => $call,
            MaybeSignedIn::SignedIn($client) => $call,
        }
    };
}

impl StreamableHttpClient for MaybeSignedIn {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        on_either!(self, client => {
            client
                .post_message(uri, message, session_id, auth_header, custom_headers)
                .await
        })
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        on_either!(self, client => {
            client
                .post_message_with_max_sse_event_size(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    max_sse_event_size,
                )
                .await
        })
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        on_either!(self, client => {
            client
                .delete_session(uri, session_id, auth_header, custom_headers)
                .await
        })
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        on_either!(self, client => {
            client
                .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
                .await
        })
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        on_either!(self, client => {
            client
                .get_stream_with_max_sse_event_size(
                    uri,
                    session_id,
                    last_event_id,
                    auth_header,
                    custom_headers,
                    max_sse_event_size,
                )
                .await
        })
    }
}

/// The id of a request the client sends; none for what is not a request.
fn request_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        rmcp::model::JsonRpcMessage::Request(request) => Some(request.id.clone()),
        _ => None,
    }
}

/// The error a request gets in place of an answer sent whole that was too large to read.
fn too_large(id: RequestId, max_size: usize) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::Error(rmcp::model::JsonRpcError::new(
        Some(id),
        rmcp::model::ErrorData::internal_error(
            format!(
                "its answer, sent whole, is larger than {}, the most Conduit reads of one (an answer it streams as events may be up to {} MiB)",
                if max_size >= 1024 * 1024 {
                    format!("{} MiB", max_size / (1024 * 1024))
                } else {
                    format!("{} KiB", max_size / 1024)
                },
                crate::client::MAX_STDIO_MESSAGE / (1024 * 1024)
            ),
            None,
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_a_session_nothing_is_waited_for() {
        let stream = ListenStream::default();
        assert!(stream.answered(Duration::ZERO).await);
    }

    #[tokio::test]
    async fn with_a_session_the_wait_ends_when_the_get_is_answered_or_at_the_bound() {
        let stream = ListenStream::default();
        stream.session_given();
        assert!(!stream.answered(Duration::from_millis(20)).await);
        let waiting = tokio::spawn({
            let stream = stream.clone();
            async move { stream.answered(Duration::from_secs(30)).await }
        });
        stream.get_answered();
        assert!(matches!(waiting.await, Ok(true)));
        // A later session id (each answer may carry it) does not start a new wait.
        stream.session_given();
        assert!(stream.answered(Duration::ZERO).await);
    }

    /// Counts GETs; a stream that ends at once.
    #[derive(Clone, Default)]
    struct Gets(Arc<parking_lot::Mutex<Vec<tokio::time::Instant>>>);

    impl StreamableHttpClient for Gets {
        type Error = std::io::Error;

        async fn post_message(
            &self,
            _: Arc<str>,
            _: ClientJsonRpcMessage,
            _: Option<Arc<str>>,
            _: Option<String>,
            _: HashMap<HeaderName, HeaderValue>,
        ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
            Ok(StreamableHttpPostResponse::Accepted)
        }

        async fn delete_session(
            &self,
            _: Arc<str>,
            _: Arc<str>,
            _: Option<String>,
            _: HashMap<HeaderName, HeaderValue>,
        ) -> Result<(), StreamableHttpError<Self::Error>> {
            Ok(())
        }

        async fn get_stream(
            &self,
            _: Arc<str>,
            _: Option<Arc<str>>,
            _: Option<String>,
            _: Option<String>,
            _: HashMap<HeaderName, HeaderValue>,
        ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
            use futures::StreamExt;
            self.0.lock().push(tokio::time::Instant::now());
            Ok(futures::stream::empty().boxed())
        }
    }

    /// A server ending its stream at once (with `retry: 0`) gets its GETs a second apart
    /// after a burst at once (its stream and calls' streams resumed together).
    #[tokio::test(start_paused = true)]
    async fn gets_of_one_connection_are_a_second_apart_after_a_burst() {
        let gets = Gets::default();
        let client = WatchedClient::new(
            gets.clone(),
            ListenStream::default(),
            Arc::new(Spill::new("test")),
        );
        let started = tokio::time::Instant::now();
        for _ in 0..GET_BURST + 4 {
            let _ = client
                .get_stream(
                    "http://127.0.0.1/mcp".into(),
                    Some("s".into()),
                    None,
                    None,
                    HashMap::new(),
                )
                .await;
        }
        let times = gets.0.lock().clone();
        let burst = GET_BURST as usize;
        assert_eq!(times.len(), burst + 4);
        assert!(
            times[..burst].iter().all(|at| *at == started),
            "the burst at once"
        );
        for pair in times[burst - 1..].windows(2) {
            assert_eq!(pair[1] - pair[0], MIN_GET_INTERVAL);
        }
    }
}
