//! A [`ToolServer`] over streamable HTTP (rmcp's server under axum) at `/mcp`: loopback
//! unless the caller explicitly allows more, `Host` and `Origin` checked against DNS
//! rebinding (a foreign one is refused with 403), and a bearer token on every request
//! (401 without it). Both protocol eras: 2025-11-25 with sessions (at most
//! [`MAX_SESSIONS`] open at once), 2026-07-28 stateless.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::server::{ResponseHold, ServeError, ToolServer};

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// How many 2025-11-25 sessions may be open at once. Each holds a task, a change
/// forwarder and up to 1,000 subscriptions until its client ends it or rmcp drops it for
/// five minutes without a message either way; a client that keeps opening sessions is
/// refused past this instead of growing the process. Desktop clients open one each.
pub const MAX_SESSIONS: usize = 64;

/// A session whose client has sent nothing for this long gives its place to a new one
/// when all are taken. The server's own list-change notifications keep rmcp's idle timer
/// from running out, so a client that crashed without ending its session would otherwise
/// hold its place for as long as the app runs.
pub const CLIENT_SILENCE: std::time::Duration = std::time::Duration::from_secs(5 * 60);

/// Why an address may not be served on.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BindError {
    #[error(
        "{0} is not a loopback address: other machines could reach it; pass --allow-remote to serve there anyway"
    )]
    NotLoopback(SocketAddr),
    #[error(
        "{0} is every address of this machine: other machines name one of them, which Conduit cannot know to accept; serve on the address of the interface they reach (such as 192.168.1.5:{port})",
        port = .0.port()
    )]
    Wildcard(SocketAddr),
}

/// Refuses a non-loopback address unless `allow_remote` says otherwise, and a wildcard
/// address (`0.0.0.0`, `::`) always: its requests name the machine's own address in
/// `Host`, which is not among the names accepted ([`allowed_hosts`]), so every request
/// from another machine would be refused while Conduit said it was reachable.
pub fn check_bind(addr: SocketAddr, allow_remote: bool) -> Result<(), BindError> {
    if addr.ip().is_unspecified() {
        Err(BindError::Wildcard(addr))
    } else if addr.ip().is_loopback() || allow_remote {
        Ok(())
    } else {
        Err(BindError::NotLoopback(addr))
    }
}

/// The `Host` names accepted: loopback names, and the bound address (another loopback
/// address such as 127.0.0.2 too: the URL Conduit prints names it). Not a wildcard
/// address: a client names the machine's own address there, which is not known here.
fn allowed_hosts(bound: SocketAddr) -> Vec<String> {
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    let ip = bound.ip().to_string();
    if !bound.ip().is_unspecified() && !hosts.contains(&ip) {
        hosts.push(ip);
    }
    hosts
}

/// Browser origins accepted: pages served from this machine's loopback names only (a
/// page elsewhere that resolves its name to 127.0.0.1 is refused).
fn allowed_origins() -> Vec<String> {
    ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        .map(str::to_owned)
        .to_vec()
}

/// Whether the request carries `Authorization: Bearer <token>` (compared in constant
/// time, so the token cannot be guessed byte by byte from timings).
fn has_token(request: &Request, token: &str) -> bool {
    let Some(value) = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some(given) = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
    else {
        return false;
    };
    let (given, token) = (given.trim().as_bytes(), token.as_bytes());
    given.len() == token.len()
        && given
            .iter()
            .zip(token)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

async fn require_token(token: Arc<str>, request: Request, next: Next) -> Response {
    if has_token(&request, &token) {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "a bearer token is required (see `conduit mcp serve --http`)",
        )
            .into_response()
    }
}

/// Why a session could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionLimitError {
    #[error(
        "{max} MCP sessions are open, the most this server keeps, and every client was heard from in the last {} minutes: end one (HTTP DELETE) or try again later",
        silence.as_secs().div_ceil(60)
    )]
    Full {
        max: usize,
        silence: std::time::Duration,
    },
    #[error(transparent)]
    Session(#[from] LocalSessionManagerError),
}

/// rmcp's in-memory sessions, at most `max` at once. Sessions leave the count when their
/// client ends them or their worker stops (rmcp removes them then); when all places are
/// taken, the session whose client has been silent longest gives its place if that is
/// longer than `silence`, else the new one is refused.
pub struct CappedSessions {
    inner: LocalSessionManager,
    max: usize,
    silence: std::time::Duration,
    /// When each session's client last sent something.
    heard: parking_lot::Mutex<std::collections::HashMap<SessionId, std::time::Instant>>,
    /// Held from the count to the insert, so two opening at once cannot both take the
    /// last place.
    opening: tokio::sync::Mutex<()>,
}

/// How long a displaced session's worker is given to take its close before the handle is
/// dropped (its worker then ends when it next reads its events).
const CLOSE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

impl CappedSessions {
    pub fn new(max: usize, silence: std::time::Duration) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.completed_cache_ttl = COMPLETED_RESPONSE_KEPT;
        Self {
            inner,
            max,
            silence,
            heard: parking_lot::Mutex::new(std::collections::HashMap::new()),
            opening: tokio::sync::Mutex::new(()),
        }
    }

    /// How many sessions are open.
    pub async fn open(&self) -> usize {
        self.inner.sessions.read().await.len()
    }

    /// The client of `id` sent something. Only sessions made here are kept: an id a
    /// client names is never added.
    fn heard_from(&self, id: &SessionId) {
        if let Some(when) = self.heard.lock().get_mut(id) {
            *when = std::time::Instant::now();
        }
    }

    /// Makes a place when all are taken: ends the open session whose client has been
    /// silent longest, if longer than `silence`. False when none has.
    async fn free_a_silent_place(&self) -> Result<bool, SessionLimitError> {
        let open: Vec<SessionId> = self.inner.sessions.read().await.keys().cloned().collect();
        let stalest = {
            let mut heard = self.heard.lock();
            heard.retain(|id, _| open.contains(id));
            open.iter()
                .map(|id| (heard.get(id).copied(), id))
                .min_by_key(|(when, _)| *when)
                .filter(|(when, _)| when.is_none_or(|when| when.elapsed() >= self.silence))
                .map(|(_, id)| id.clone())
        };
        let Some(id) = stalest else {
            return Ok(false);
        };
        tracing::info!(
            "an MCP client's session ended to make room: its client had been silent for {} minutes or more",
            self.silence.as_secs() / 60
        );
        // Out of the count at once; the worker hears the close from a task of its own: a
        // worker stuck writing to a client that does not read its stream has a full event
        // queue, and waiting on it here would hold `opening`, and every new session, for
        // as long as that client keeps its connection.
        let handle = self.inner.sessions.write().await.remove(&id);
        self.heard.lock().remove(&id);
        if let Some(handle) = handle {
            conduit_core::task::spawn(async move {
                let closed = tokio::time::timeout(CLOSE_PATIENCE, handle.close()).await;
                if closed.is_err() {
                    tracing::info!(
                        "a displaced MCP session did not take its close; left to end with its connection"
                    );
                }
            });
        }
        Ok(true)
    }
}

impl SessionManager for CappedSessions {
    type Error = SessionLimitError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _opening = self.opening.lock().await;
        if self.open().await >= self.max && !self.free_a_silent_place().await? {
            return Err(SessionLimitError::Full {
                max: self.max,
                silence: self.silence,
            });
        }
        let (id, transport) = self.inner.create_session().await?;
        self.heard
            .lock()
            .insert(id.clone(), std::time::Instant::now());
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.heard_from(id);
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.heard.lock().remove(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.heard_from(id);
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.heard_from(id);
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.heard_from(id);
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.heard_from(id);
        Ok(self.inner.resume(id, last_event_id).await?)
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // Restoring re-creates a session in memory: it takes a place like a new one.
        let _opening = self.opening.lock().await;
        if !self.inner.has_session(&id).await? && self.open().await >= self.max {
            return Err(SessionLimitError::Full {
                max: self.max,
                silence: self.silence,
            });
        }
        Ok(self.inner.restore_session(id).await?)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

/// How many TCP connections the endpoint holds at once, token or not: a local process that
/// opens connections and never finishes a request (no token needed for that) would
/// otherwise hold a file of the process each and ~0.4 MB of header buffer, until the
/// process ran out of files. Two per session (its requests and its stream) for every
/// session there can be.
pub const MAX_CONNECTIONS: usize = 2 * MAX_SESSIONS;

/// How long a client has to send a request's headers, counted from when the server
/// starts waiting for them (a new connection, or a kept-alive one after its last
/// response). Past it the connection closes and frees its place: a local process that
/// opened [`MAX_CONNECTIONS`] connections and sent a byte now and then would otherwise
/// hold every place for good, and no client could reach the endpoint. A response being
/// streamed (an SSE stream) waits for no header and is not cut.
pub const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Serves `router` over HTTP/1.1 on `listener` until `stop` is cancelled: at most `most`
/// connections at once ([`CappedListener`]), each given `header_timeout` to send a
/// request's headers. Once stopped, every connection ends ([`HeldConnection`]) and this
/// returns when all have. (axum's own `serve` sets hyper no timer, so hyper's header
/// timeout never ran there.)
pub async fn serve_capped(
    listener: TcpListener,
    most: usize,
    header_timeout: std::time::Duration,
    router: axum::Router,
    stop: CancellationToken,
) {
    let mut listener = CappedListener::new(listener, most, stop.clone());
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let (connection, _address) = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            accepted = axum::serve::Listener::accept(&mut listener) => accepted,
        };
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        connections.spawn(async move {
            let mut http1 = hyper::server::conn::http1::Builder::new();
            http1
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout);
            let io = hyper_util::rt::TokioIo::new(connection);
            // A client that left, sent no headers in time or spoke no HTTP: its
            // connection is over, and the endpoint goes on.
            if let Err(error) = http1.serve_connection(io, service).await {
                tracing::debug!(%error, "a served connection ended");
            }
        });
    }
    connections.close();
    connections.wait().await;
}

/// A TCP listener that holds at most a number of accepted connections: past it, it accepts
/// no more until one closes, and the next wait in the kernel's backlog, holding nothing of
/// the process.
pub struct CappedListener {
    listener: TcpListener,
    places: Arc<tokio::sync::Semaphore>,
    stop: CancellationToken,
}

impl CappedListener {
    /// Holds at most `most` connections, each of which ends when `stop` is cancelled.
    pub fn new(listener: TcpListener, most: usize, stop: CancellationToken) -> Self {
        Self {
            listener,
            places: Arc::new(tokio::sync::Semaphore::new(most)),
            stop,
        }
    }
}

impl axum::serve::Listener for CappedListener {
    type Io = HeldConnection;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let place = loop {
            match self.places.clone().acquire_owned().await {
                Ok(place) => break place,
                // The semaphore is never closed; were it, waiting a moment beats a spin.
                Err(error) => {
                    tracing::error!(%error, "the served endpoint's connection places closed");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        };
        let (stream, address) = axum::serve::Listener::accept(&mut self.listener).await;
        (
            HeldConnection {
                stream,
                _place: place,
                stopped: Box::pin(self.stop.clone().cancelled_owned()),
            },
            address,
        )
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// An accepted connection and the place it holds until it closes. Once serving stops it
/// reads as ended and refuses writes: axum's graceful shutdown waits for every connection,
/// and hyper closes only idle ones, so a client holding half a request (one byte is
/// enough) or a response it does not read would otherwise keep the server, and with it
/// its catalog and watchers, running after a stop.
pub struct HeldConnection {
    stream: tokio::net::TcpStream,
    _place: tokio::sync::OwnedSemaphorePermit,
    stopped: std::pin::Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
}

impl HeldConnection {
    /// Whether serving has stopped; a pending read or write is woken when it does.
    fn has_stopped(&mut self, cx: &mut std::task::Context<'_>) -> bool {
        self.stopped.as_mut().poll(cx).is_ready()
    }
}

/// What a write to a connection of a stopped server gets.
fn stopped_error() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "the served endpoint has stopped",
    )
}

impl tokio::io::AsyncRead for HeldConnection {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let connection = self.get_mut();
        if connection.has_stopped(cx) {
            // Nothing read: the end of the stream.
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut connection.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for HeldConnection {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let connection = self.get_mut();
        if connection.has_stopped(cx) {
            return std::task::Poll::Ready(Err(stopped_error()));
        }
        std::pin::Pin::new(&mut connection.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let connection = self.get_mut();
        if connection.has_stopped(cx) {
            return std::task::Poll::Ready(Err(stopped_error()));
        }
        std::pin::Pin::new(&mut connection.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let connection = self.get_mut();
        if connection.has_stopped(cx) {
            return std::task::Poll::Ready(Err(stopped_error()));
        }
        std::pin::Pin::new(&mut connection.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// How long a session keeps a finished response for a client that reconnects to read the
/// rest of it (rmcp's default is 60 s). A response with stored files holds its share of
/// [`crate::server::MAX_SERVED_MEDIA_IN_FLIGHT`] this long after it is written out, so the
/// copy kept here is counted too; on loopback a client reconnects within moments.
pub const COMPLETED_RESPONSE_KEPT: std::time::Duration = std::time::Duration::from_secs(10);

/// Puts a [`ResponseHold`] in each request for the tools that answer it, and keeps it with
/// the response's body until the body is written out or dropped.
async fn hold_for_response(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let hold = Arc::new(ResponseHold::default());
    request.extensions_mut().insert(Arc::clone(&hold));
    next.run(request)
        .await
        .map(|body| axum::body::Body::new(HeldBody { body, _hold: hold }))
}

/// A response body and the hold that lives as long as it does.
struct HeldBody {
    body: axum::body::Body,
    _hold: Arc<ResponseHold>,
}

impl http_body::Body for HeldBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Serves `server` on `listener` until `stop` is cancelled.
pub async fn serve_http(
    server: ToolServer,
    listener: TcpListener,
    token: String,
    stop: CancellationToken,
) -> Result<(), ServeError> {
    if token.is_empty() {
        return Err(ServeError("the bearer token is empty".into()));
    }
    let bound = listener
        .local_addr()
        .map_err(|e| ServeError(e.to_string()))?;
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts(bound))
        .with_allowed_origins(allowed_origins())
        .enforce_origin_validation()
        .with_cancellation_token(stop.child_token());
    let service: StreamableHttpService<ToolServer, CappedSessions> = StreamableHttpService::new(
        move || Ok(server.session()),
        Arc::new(CappedSessions::new(MAX_SESSIONS, CLIENT_SILENCE)),
        config,
    );
    let token: Arc<str> = token.into();
    let router = axum::Router::new()
        .nest_service(MCP_PATH, service)
        .layer(axum::middleware::from_fn(hold_for_response))
        .layer(axum::middleware::from_fn(move |request, next| {
            require_token(token.clone(), request, next)
        }));
    serve_capped(listener, MAX_CONNECTIONS, HEADER_READ_TIMEOUT, router, stop).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_unless_allowed() {
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let public: SocketAddr = "192.0.2.1:8080".parse().unwrap();
        assert!(check_bind(local, false).is_ok());
        assert!(check_bind("[::1]:1".parse().unwrap(), false).is_ok());
        assert!(matches!(
            check_bind(public, false),
            Err(BindError::NotLoopback(_))
        ));
        assert!(check_bind(public, true).is_ok());
        for wildcard in ["0.0.0.0:8765", "[::]:8765"] {
            let refused = check_bind(wildcard.parse().unwrap(), true).unwrap_err();
            assert!(matches!(refused, BindError::Wildcard(_)), "{refused}");
            assert!(refused.to_string().contains(":8765"), "{refused}");
        }
    }

    #[test]
    fn the_bound_address_is_an_accepted_host() {
        let hosts = |addr: &str| allowed_hosts(addr.parse().unwrap());
        assert!(hosts("127.0.0.2:8765").contains(&"127.0.0.2".to_owned()));
        assert!(hosts("192.168.1.20:8765").contains(&"192.168.1.20".to_owned()));
        assert_eq!(hosts("127.0.0.1:8765"), ["localhost", "127.0.0.1", "::1"]);
        assert_eq!(hosts("[::1]:8765"), ["localhost", "127.0.0.1", "::1"]);
        assert_eq!(hosts("0.0.0.0:8765"), ["localhost", "127.0.0.1", "::1"]);
    }

    #[tokio::test]
    async fn a_session_past_the_limit_takes_the_place_of_the_longest_silent_client() {
        // Every client counts as silent long enough.
        let sessions = CappedSessions::new(2, std::time::Duration::ZERO);
        let (first, _t1) = sessions.create_session().await.unwrap();
        let (second, _t2) = sessions.create_session().await.unwrap();
        // The first client speaks again: the second is now the longest silent.
        std::thread::sleep(std::time::Duration::from_millis(2));
        sessions.heard_from(&first);
        let (third, _t3) = sessions.create_session().await.unwrap();
        assert_eq!(sessions.open().await, 2);
        assert!(sessions.has_session(&first).await.unwrap());
        assert!(!sessions.has_session(&second).await.unwrap());
        assert!(sessions.has_session(&third).await.unwrap());
        // An id no session has is not kept.
        sessions.heard_from(&SessionId::from("made-up"));
        assert_eq!(sessions.heard.lock().len(), 2);
    }

    #[tokio::test]
    async fn a_session_past_the_limit_is_refused_until_one_ends() {
        let sessions = CappedSessions::new(2, CLIENT_SILENCE);
        let (first, _t1) = sessions.create_session().await.unwrap();
        let (_second, _t2) = sessions.create_session().await.unwrap();
        assert!(matches!(
            sessions.create_session().await,
            Err(SessionLimitError::Full { max: 2, .. })
        ));
        assert_eq!(sessions.open().await, 2);
        sessions.close_session(&first).await.unwrap();
        assert_eq!(sessions.open().await, 1);
        assert!(sessions.create_session().await.is_ok());
        let said = SessionLimitError::Full {
            max: 2,
            silence: CLIENT_SILENCE,
        }
        .to_string();
        assert!(
            said.starts_with("2 MCP sessions are open") && said.contains("last 5 minutes"),
            "{said}"
        );
    }

    /// A whole request for `/` on a new connection, and everything answered to it.
    async fn served_here(address: SocketAddr) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    }

    /// `asked` ends (within a bound on a hang) with the test router's "here".
    async fn assert_served_here(asked: tokio::task::JoinHandle<String>) {
        let answer = tokio::time::timeout(std::time::Duration::from_secs(10), asked)
            .await
            .unwrap()
            .unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("here"),
            "{answer}"
        );
    }

    #[tokio::test]
    async fn connections_past_the_cap_wait_until_one_closes() {
        use tokio::io::AsyncWriteExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let router = axum::Router::new().route("/", axum::routing::get(|| async { "here" }));
        let serving = tokio::spawn(serve_capped(
            listener,
            3,
            HEADER_READ_TIMEOUT,
            router,
            CancellationToken::new(),
        ));
        // Three connections that never finish their request hold every place.
        let mut idle = Vec::new();
        for _ in 0..3 {
            let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
            stream.write_all(b"GET / HTTP/1.1\r\nX: ").await.unwrap();
            idle.push(stream);
        }
        let waiting = tokio::spawn(served_here(address));
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(!waiting.is_finished(), "a fourth connection is not served");
        drop(idle.pop());
        assert_served_here(waiting).await;
        serving.abort();
    }

    /// A client that sends a request's headers a byte now and then (slowloris) holds its
    /// place only until the header timeout: then its connection closes, and a client
    /// waiting for a place is served. Before, every place could be held for good.
    #[tokio::test]
    async fn a_connection_that_never_finishes_its_headers_is_closed_and_its_place_freed() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let router = axum::Router::new().route("/", axum::routing::get(|| async { "here" }));
        let timeout = std::time::Duration::from_millis(500);
        let serving = tokio::spawn(serve_capped(
            listener,
            1,
            timeout,
            router,
            CancellationToken::new(),
        ));
        let mut slow = tokio::net::TcpStream::connect(address).await.unwrap();
        slow.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        let ask = tokio::spawn(served_here(address));
        // A byte now and then, as such a client sends, until the server closes on it (a
        // bound on a hang, not a speed: the timeout is half a second).
        let mut closed = false;
        for _ in 0..100 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let mut byte = [0u8; 1];
            match tokio::time::timeout(std::time::Duration::from_millis(1), slow.read(&mut byte))
                .await
            {
                Ok(Ok(0)) | Ok(Err(_)) => {
                    closed = true;
                    break;
                }
                Ok(Ok(_)) | Err(_) => {}
            }
            if slow.write_all(b"X").await.is_err() {
                closed = true;
                break;
            }
        }
        assert!(closed, "the slow client's connection was never closed");
        assert_served_here(ask).await;
        serving.abort();
    }

    /// A client holding half a request, or a stream it does not read, does not keep the
    /// server running after a stop (hyper closes only idle connections on a graceful
    /// shutdown, and axum waits for every one).
    #[tokio::test]
    async fn a_stop_ends_connections_that_hold_half_a_request_or_an_unread_stream() {
        use tokio::io::AsyncWriteExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        // A response that never ends, which the client below never reads.
        let endless = || async {
            let chunks = futures::stream::repeat_with(|| {
                Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(vec![b'x'; 64 * 1024]))
            });
            axum::body::Body::from_stream(chunks)
        };
        let router = axum::Router::new().route("/", axum::routing::get(endless));
        let serving = tokio::spawn(serve_capped(
            listener,
            8,
            HEADER_READ_TIMEOUT,
            router,
            stop.clone(),
        ));
        let mut half = tokio::net::TcpStream::connect(address).await.unwrap();
        half.write_all(b"G").await.unwrap();
        let mut unread = tokio::net::TcpStream::connect(address).await.unwrap();
        unread
            .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        // The server has filled the socket buffers with what the client leaves unread.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(!serving.is_finished());
        stop.cancel();
        // A bound on a hang, not a speed: both connections are still open on this side.
        let ended = tokio::time::timeout(std::time::Duration::from_secs(20), serving).await;
        assert!(
            ended.is_ok(),
            "the server is still waiting for its connections"
        );
        ended.unwrap().unwrap();
        drop((half, unread));
    }

    /// The hold a request carries lives as long as its response's body: while it is
    /// unread, and not after it is read.
    #[tokio::test]
    async fn a_response_keeps_its_hold_until_its_body_is_gone() {
        use tower::ServiceExt;

        let seen: Arc<parking_lot::Mutex<Option<std::sync::Weak<ResponseHold>>>> = Arc::default();
        let keep = Arc::clone(&seen);
        let router = axum::Router::new()
            .route(
                "/",
                axum::routing::get(
                    move |axum::Extension(hold): axum::Extension<Arc<ResponseHold>>| {
                        *keep.lock() = Some(Arc::downgrade(&hold));
                        async { "a body" }
                    },
                ),
            )
            .layer(axum::middleware::from_fn(hold_for_response));
        let response = router
            .oneshot(
                axum::http::Request::get("/")
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let hold = seen.lock().clone().expect("the handler saw a hold");
        assert!(hold.upgrade().is_some(), "held while the body is unread");
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        assert_eq!(&body[..], b"a body");
        assert!(hold.upgrade().is_none(), "given up once the body is read");
    }

    #[test]
    fn the_token_must_match_exactly() {
        let with = |value: &str| {
            Request::builder()
                .header(header::AUTHORIZATION, value)
                .body(axum::body::Body::empty())
                .unwrap()
        };
        assert!(has_token(&with("Bearer secret-1"), "secret-1"));
        assert!(!has_token(&with("Bearer secret-2"), "secret-1"));
        assert!(!has_token(&with("Bearer secret-1x"), "secret-1"));
        assert!(!has_token(&with("Basic secret-1"), "secret-1"));
        let none = Request::builder().body(axum::body::Body::empty()).unwrap();
        assert!(!has_token(&none, "secret-1"));
    }
}
