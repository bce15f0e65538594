//! The HTTP side every protocol shares: POST with retries and backoff that honour
//! `retry-after`, HTTP errors mapped to typed errors, and SSE streams that fail when they
//! stall.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use conduit_core::provider::{EventStream, ProviderError, ProviderErrorKind, ProviderEvent};
use futures::StreamExt;
use parking_lot::Mutex;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use sse_stream::SseStream;

/// Limits on retrying a failed request.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts after the first.
    pub max_retries: u32,
    /// Delay before the first retry; it doubles each time.
    pub base_delay: Duration,
    /// No single wait is longer than this, whatever `retry-after` says.
    pub max_delay: Duration,
    /// No retry starts once this much time has passed since the first attempt.
    pub max_total: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            max_total: Duration::from_secs(180),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `attempt` (1-based): what the provider asked for, or
    /// exponential backoff.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let backoff = conduit_core::backoff::Backoff::new(self.base_delay, self.max_delay);
        retry_after
            .unwrap_or_else(|| backoff.delay(attempt))
            .min(self.max_delay)
    }
}

/// Counts the attempts of one request and decides whether and when to try again.
struct Retrier<'a> {
    policy: &'a RetryPolicy,
    attempt: u32,
    started: std::time::Instant,
}

impl<'a> Retrier<'a> {
    fn new(policy: &'a RetryPolicy) -> Self {
        Self {
            policy,
            attempt: 0,
            started: std::time::Instant::now(),
        }
    }

    /// The wait before the next attempt, or `None` when `err` should end the request.
    fn next_delay(&mut self, err: &ProviderError) -> Option<(u32, Duration)> {
        if !err.is_retryable() || self.attempt >= self.policy.max_retries {
            return None;
        }
        // The provider said when it will take the request again, and that is past the
        // longest wait: retries sooner only fail again (a `retry-after: 3600` had the user
        // watch three minutes of retries before the same failure).
        if err
            .retry_after
            .is_some_and(|after| after > self.policy.max_delay)
        {
            return None;
        }
        let delay = self.policy.delay(self.attempt + 1, err.retry_after);
        if self.started.elapsed() + delay > self.policy.max_total {
            return None;
        }
        self.attempt += 1;
        Some((self.attempt, delay))
    }
}

/// How long a turn's answer may take to start by default: a large local model loads from
/// a slow disk in a few minutes; a server that has not answered in ten has hung.
pub const DEFAULT_ANSWER_START_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// Connection settings of one provider.
#[derive(Clone)]
pub struct HttpSettings {
    pub connect_timeout: Duration,
    /// A stream that sends nothing (not even a ping) for this long fails as stalled.
    pub read_timeout: Duration,
    /// A turn whose answer has not started (its status and headers) this long after the
    /// request went fails as stalled. Longer than `read_timeout`: a local server may load
    /// the model from disk before it answers at all.
    pub answer_start_timeout: Duration,
    pub retry: RetryPolicy,
    /// Extra headers sent with every request (from the provider's settings).
    pub extra_headers: Vec<(String, String)>,
    /// The clients to share with the other providers of the same owner; none: a client of
    /// its own.
    pub clients: Option<HttpClients>,
    /// The parts of the provider's base URL that may be a key (user name, password, query
    /// values, key-like path segments: [`conduit_net::url_secrets`]), hidden in the errors
    /// its answers quote; [`crate::build`] fills them in. Only the base URL's: the paths
    /// Conduit adds (`models/gemini-2.5-flash:streamGenerateContent`) are no key.
    pub url_secrets: Vec<String>,
}

/// Names the extra headers without their values (a gateway's key may be one).
impl std::fmt::Debug for HttpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<&str> = self
            .extra_headers
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        f.debug_struct("HttpSettings")
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("answer_start_timeout", &self.answer_start_timeout)
            .field("retry", &self.retry)
            .field("extra_headers", &headers)
            .field("clients", &self.clients)
            .finish()
    }
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(15),
            read_timeout: Duration::from_secs(120),
            answer_start_timeout: DEFAULT_ANSWER_START_TIMEOUT,
            retry: RetryPolicy::default(),
            extra_headers: Vec::new(),
            clients: None,
            url_secrets: Vec::new(),
        }
    }
}

/// The HTTP clients an owner's providers share (the host's, for every turn and model
/// list), one per connect timeout: one TLS context (OpenSSL's, with the system's CA store
/// read once instead of for every turn) and one connection pool, so a provider's next
/// turn reuses the connection its last one left open instead of a new TCP and TLS
/// handshake. Connections are pooled by scheme, host and port (providers at one origin,
/// two keys for one API, may take turns on one; each request carries its own headers).
/// Owned, not a process global: a pooled connection belongs to the async runtime that
/// opened it.
#[derive(Clone, Default)]
pub struct HttpClients {
    by_connect_timeout: Arc<Mutex<HashMap<Duration, reqwest::Client>>>,
}

impl HttpClients {
    fn client(&self, connect_timeout: Duration) -> Result<reqwest::Client, ProviderError> {
        let mut clients = self.by_connect_timeout.lock();
        if let Some(client) = clients.get(&connect_timeout) {
            return Ok(client.clone());
        }
        let client = new_client(connect_timeout)?;
        clients.insert(connect_timeout, client.clone());
        Ok(client)
    }
}

impl std::fmt::Debug for HttpClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClients")
            .field("clients", &self.by_connect_timeout.lock().len())
            .finish()
    }
}

/// A client that connects within `connect_timeout` and follows only same-origin redirects.
fn new_client(connect_timeout: Duration) -> Result<reqwest::Client, ProviderError> {
    conduit_net::client_builder()
        .connect_timeout(connect_timeout)
        .redirect(same_origin_redirects())
        .build()
        .map_err(|e| ProviderError::new(ProviderErrorKind::Connection, e.to_string()))
}

/// Turns one protocol's server-sent events into provider events.
pub trait StreamDecoder: Send + 'static {
    /// One SSE event: its `event:` name, if any, and its `data:`.
    fn decode(
        &mut self,
        event: Option<&str>,
        data: &str,
    ) -> Result<Vec<ProviderEvent>, ProviderError>;

    /// The stream ended. Events still held back come out here; a stream that ended
    /// before the protocol said it was done is an error.
    fn finish(&mut self) -> Result<Vec<ProviderEvent>, ProviderError>;
}

/// How much of a provider's answer is read into memory. The endpoint may be any
/// OpenAI-compatible URL or a proxy, so none of its bodies is trusted to end.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// An HTTP error body: only its message is shown, and a real one is a few hundred
    /// bytes.
    error_body: usize,
    /// A model list, or a 200 answer that is one document instead of a stream: the
    /// largest real model lists (OpenRouter's) are a few MiB.
    whole_body: usize,
    /// The bytes of one SSE event still being received: a real event is one delta or
    /// one tool call's arguments; the core caps a whole answer separately.
    sse_event: usize,
    /// The data of all of one answer's SSE events. The core caps what the events say;
    /// this bounds what a decoder holds back on the way (a block that never closes, a
    /// name in pieces, events the core does not count), whatever the protocol.
    sse_response: usize,
}

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

impl Default for Limits {
    fn default() -> Self {
        Self {
            error_body: 64 * KIB,
            whole_body: 8 * MIB,
            sse_event: MAX_SSE_EVENT_BYTES,
            sse_response: MAX_SSE_RESPONSE_BYTES,
        }
    }
}

/// The most bytes one SSE event may take before it is given up on.
pub const MAX_SSE_EVENT_BYTES: usize = 16 * MIB;

/// The most bytes of data all of one answer's SSE events may carry. A real answer of
/// 128,000 tokens streamed one token an event, each in a JSON envelope of a few hundred
/// bytes, is about 32 MiB.
pub const MAX_SSE_RESPONSE_BYTES: usize = 256 * MIB;

/// An HTTP client for one provider.
#[derive(Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    settings: HttpSettings,
    limits: Limits,
}

impl HttpClient {
    pub fn new(settings: HttpSettings) -> Result<Self, ProviderError> {
        let client = match &settings.clients {
            Some(clients) => clients.client(settings.connect_timeout)?,
            None => new_client(settings.connect_timeout)?,
        };
        Ok(Self {
            client,
            settings,
            limits: Limits::default(),
        })
    }

    /// The same client with smaller limits, so tests can reach them quickly.
    #[cfg(test)]
    fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    fn headers(&self, protocol_headers: &[(&str, String)]) -> Result<HeaderMap, ProviderError> {
        let mut map = HeaderMap::new();
        // Every extra header may carry a gateway's key (`Helicone-Auth`,
        // `cf-aig-authorization`): all are marked sensitive, as the known key headers are.
        let extra = self
            .settings
            .extra_headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone(), true));
        let protocol = protocol_headers
            .iter()
            .map(|(name, value)| (*name, value.clone(), false));
        for (name, value, is_extra) in protocol.chain(extra) {
            let (name, mut value) = checked_header(name, value)?;
            if is_extra || is_secret_header(name.as_str()) {
                value.set_sensitive(true);
            }
            map.insert(name, value);
        }
        Ok(map)
    }

    /// What of a request carries credentials: the secret headers' values, every extra
    /// header's (a gateway's key may go in any header), and the base URL's parts that may
    /// be a key (a gateway's `https://gw.example/v1/sk-…/`, which a 404 quoting its path
    /// would repeat).
    fn secrets_of(&self, protocol_headers: &[(&str, String)]) -> SentSecrets {
        let secret = protocol_headers
            .iter()
            .filter(|(name, _)| is_secret_header(&name.to_ascii_lowercase()))
            .map(|(_, value)| value.as_str());
        let extra = self.settings.extra_headers.iter().map(|(_, v)| v.as_str());
        let in_url = self.settings.url_secrets.iter().map(String::as_str);
        SentSecrets::new(secret.chain(extra).chain(in_url))
    }

    /// GETs JSON (model lists), with the same error mapping and retries.
    pub async fn get_json(
        &self,
        url: &str,
        headers: &[(&str, String)],
    ) -> Result<Value, ProviderError> {
        let secrets = self.secrets_of(headers);
        self.get_json_with(url, headers)
            .await
            .map_err(|err| secrets.hidden_in(err))
    }

    async fn get_json_with(
        &self,
        url: &str,
        headers: &[(&str, String)],
    ) -> Result<Value, ProviderError> {
        let headers = self.headers(headers)?;
        let read_timeout = self.settings.read_timeout;
        let mut retrier = Retrier::new(&self.settings.retry);
        loop {
            // A model list has no one to cancel it, so the answer's headers get no longer
            // than a stream may stay silent.
            let sent = tokio::time::timeout(
                read_timeout,
                self.client.get(url).headers(headers.clone()).send(),
            )
            .await;
            let err = match sent {
                Err(_) => ProviderError::new(
                    ProviderErrorKind::Stalled,
                    format!(
                        "the model list did not start within {} s",
                        read_timeout.as_secs_f32()
                    ),
                ),
                Ok(sent) => match check(sent, self.limits, read_timeout).await {
                    Ok(response) => return self.read_json(response).await,
                    Err(err) => err,
                },
            };
            match retrier.next_delay(&err) {
                Some((_, delay)) => tokio::time::sleep(delay).await,
                None => return Err(err),
            }
        }
    }

    /// A successful answer's JSON document, read within the whole-body cap and the read
    /// timeout.
    async fn read_json(&self, response: reqwest::Response) -> Result<Value, ProviderError> {
        let read_timeout = self.settings.read_timeout;
        let body = read_capped(response, self.limits.whole_body, read_timeout).await;
        match body.end {
            End::Whole => {
                // Parsed values take 70 bytes and more each: 8 MiB of `[0],[0],…` (a model
                // list) would take hundreds of megabytes.
                let limit = conduit_core::agent::MAX_RESPONSE_VALUES;
                if json_values_in(&body.bytes) > limit {
                    return Err(ProviderError::new(
                        ProviderErrorKind::Protocol,
                        format!(
                            "the answer has more than {limit} JSON values; Conduit did not read it"
                        ),
                    ));
                }
                serde_json::from_slice::<Value>(&body.bytes)
                    .map_err(|e| ProviderError::new(ProviderErrorKind::Protocol, e.to_string()))
            }
            End::Cut => Err(ProviderError::new(
                ProviderErrorKind::Protocol,
                format!(
                    "the answer is larger than {}; Conduit stopped reading it",
                    size(self.limits.whole_body)
                ),
            )),
            End::Late => Err(ProviderError::new(
                ProviderErrorKind::Stalled,
                format!(
                    "the answer did not end within {} s",
                    read_timeout.as_secs_f32()
                ),
            )),
            End::Broke(why) => Err(ProviderError::new(
                ProviderErrorKind::Connection,
                format!("the answer broke: {why}"),
            )),
        }
    }

    /// POSTs `body` and streams the SSE answer through a decoder `new_decoder` makes for
    /// each attempt. Failures before the answer starts are retried (each retry is a
    /// `Retrying` event): an error status, and an error the stream reports before any of
    /// the answer (Anthropic sends an overload as an `error` event after `message_start`,
    /// its documented form of a 529). Once any of the answer went out, an error ends the
    /// stream: the caller has shown it, and a second answer would not continue it.
    pub fn stream<D: StreamDecoder>(
        &self,
        url: String,
        headers: &[(&str, String)],
        body: Value,
        new_decoder: impl Fn() -> D + Send + 'static,
    ) -> Result<EventStream, ProviderError> {
        // A provider (or a gateway before it) that quotes the key it was sent in an error
        // does not get it into the log, the history, the window or a sampling server.
        let secrets = self.secrets_of(headers);
        let headers = self.headers(headers)?;
        let client = self.client.clone();
        let settings = self.settings.clone();
        let limits = self.limits;
        let stream = async_stream::stream! {
            let mut retrier = Retrier::new(&settings.retry);
            loop {
                // One attempt, to its end or to the failure that may be retried.
                let err = 'attempt: {
                    let sent = tokio::time::timeout(
                        settings.answer_start_timeout,
                        client
                            .post(&url)
                            .headers(headers.clone())
                            .header("accept", "text/event-stream")
                            .json(&body)
                            .send(),
                    )
                    .await;
                    let Ok(sent) = sent else {
                        yield Err(ProviderError::new(
                            ProviderErrorKind::Stalled,
                            format!(
                                "the provider did not start answering within {} s",
                                settings.answer_start_timeout.as_secs_f32()
                            ),
                        ));
                        return;
                    };
                    let response = match check(sent, limits, settings.read_timeout).await {
                        Ok(response) => response,
                        Err(err) => break 'attempt secrets.hidden_in(err),
                    };
                    let mut events = match not_a_stream(response, settings.read_timeout, limits).await {
                        // One stream type for both (each is a decoding pipeline per
                        // protocol in the binary): an event stream is one whose first
                        // piece is still to come.
                        Answer::Stream(first, response) => decode_sse_limited(
                            futures::stream::once(async move { Ok::<_, reqwest::Error>(first) })
                                .chain(response.bytes_stream()),
                            new_decoder(),
                            settings.read_timeout,
                            limits,
                        ),
                        Answer::Read(body) => decode_sse_limited(
                            futures::stream::iter([Ok::<_, std::io::Error>(body)]),
                            new_decoder(),
                            settings.read_timeout,
                            limits,
                        ),
                        Answer::Failed(err) => {
                            yield Err(secrets.hidden_in(err));
                            return;
                        }
                    };
                    // Token counts (Anthropic's `message_start`) are no part of the
                    // answer: the next attempt's replace them.
                    let mut answered = false;
                    while let Some(item) = events.next().await {
                        match item {
                            Ok(event) => {
                                answered |= !matches!(
                                    event,
                                    ProviderEvent::Usage(_) | ProviderEvent::Retrying { .. }
                                );
                                yield Ok(event);
                            }
                            Err(err) if !answered => break 'attempt secrets.hidden_in(err),
                            Err(err) => {
                                yield Err(secrets.hidden_in(err));
                                return;
                            }
                        }
                    }
                    return;
                };
                match retrier.next_delay(&err) {
                    Some((attempt, delay)) => {
                        tracing::warn!(attempt, ?delay, error = %err, "retrying the provider request");
                        yield Ok(ProviderEvent::Retrying { attempt, delay, error: err });
                        tokio::time::sleep(delay).await;
                    }
                    None => {
                        yield Err(err);
                        return;
                    }
                }
            }
        };
        Ok(stream.boxed())
    }
}

/// What a successful answer turned out to be.
enum Answer {
    /// An event stream, still to be read after what was read of it (nothing, or the first
    /// piece of one labelled as JSON, whose first bytes are an event's).
    Stream(bytes::Bytes, reqwest::Response),
    /// An event stream labelled as JSON, read whole.
    Read(bytes::Bytes),
    /// A page or a JSON document where the event stream should be: a proxy's or
    /// captive portal's HTML page, or a server that reports its error with status 200.
    Failed(ProviderError),
}

/// Checks that a 200 answer is an event stream: one labelled HTML, or JSON that is one
/// whole document, is an error with the provider's message (or a short excerpt).
async fn not_a_stream(
    response: reqwest::Response,
    read_timeout: Duration,
    limits: Limits,
) -> Answer {
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let is_json = content_type.starts_with("application/json");
    if !is_json && !content_type.starts_with("text/html") {
        return Answer::Stream(bytes::Bytes::new(), response);
    }
    let status = response.status().as_u16();
    let mut response = response;
    // Events under a JSON label (a proxy's, a server's) are streamed as they come: read
    // whole, a long answer showed nothing until it ended, and failed after the read
    // timeout. The first piece tells: an event starts with a field name or a comment.
    let first = if is_json {
        match tokio::time::timeout(read_timeout, response.chunk()).await {
            Ok(Ok(Some(first))) if starts_like_events(&first) => {
                return Answer::Stream(first, response);
            }
            Ok(Ok(Some(first))) => first.to_vec(),
            Ok(Ok(None)) => Vec::new(),
            Ok(Err(err)) => {
                return Answer::Failed(ProviderError::new(
                    ProviderErrorKind::Connection,
                    format!("the answer broke: {}", describe_reqwest(err)),
                ));
            }
            Err(_) => {
                return Answer::Failed(ProviderError::new(
                    ProviderErrorKind::Connection,
                    format!(
                        "the answer did not arrive within {} s",
                        read_timeout.as_secs()
                    ),
                ));
            }
        }
    } else {
        Vec::new()
    };
    // Read whole, but never longer than a stream may stay silent nor past the cap.
    let body = read_capped_after(first, response, limits.whole_body, read_timeout).await;
    match body.end {
        End::Whole => match whole_answer(&content_type, status, body.bytes.into()) {
            Ok(events) => Answer::Read(events),
            Err(err) => Answer::Failed(err),
        },
        End::Cut => Answer::Failed(ProviderError {
            kind: ProviderErrorKind::Protocol,
            status: Some(status),
            message: format!(
                "an answer that is not an event stream ({content_type}) and is larger than {}; Conduit stopped reading it: {}",
                size(limits.whole_body),
                error_message(&String::from_utf8_lossy(&body.bytes))
            ),
            retry_after: None,
        }),
        End::Broke(why) => Answer::Failed(ProviderError::new(
            ProviderErrorKind::Connection,
            format!("the answer broke: {why}"),
        )),
        End::Late => Answer::Failed(ProviderError::new(
            ProviderErrorKind::Connection,
            format!(
                "the answer did not arrive within {} s",
                read_timeout.as_secs()
            ),
        )),
    }
}

/// A body read no further than a cap and for no longer than a time limit.
struct Capped {
    /// What arrived, at most the cap.
    bytes: Vec<u8>,
    end: End,
}

/// How reading a body ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    Whole,
    /// More than the cap was sent; the rest was left unread.
    Cut,
    /// The body did not end within the time limit.
    Late,
    /// The connection failed while reading, for this reason.
    Broke(String),
}

/// Reads `response`'s body: at most `cap` bytes, and no longer than `limit` in all (a body
/// that trickles a byte at a time must not hold the turn either).
async fn read_capped(response: reqwest::Response, cap: usize, limit: Duration) -> Capped {
    read_capped_after(Vec::new(), response, cap, limit).await
}

/// Whether a body's first bytes are an event stream's: `data:`, `event:`, `id:`,
/// `retry:` or a `:` comment, after any blank lines.
fn starts_like_events(first: &[u8]) -> bool {
    let start = first
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map_or(&[][..], |at| &first[at..]);
    [&b"data:"[..], b"event:", b"id:", b"retry:", b":"]
        .iter()
        .any(|field| start.starts_with(field))
}

/// [`read_capped`] with `bytes` already read (counted against the cap).
async fn read_capped_after(
    mut bytes: Vec<u8>,
    mut response: reqwest::Response,
    cap: usize,
    limit: Duration,
) -> Capped {
    let deadline = tokio::time::Instant::now() + limit;
    if bytes.len() > cap {
        bytes.truncate(cap);
        return Capped {
            bytes,
            end: End::Cut,
        };
    }
    let end = loop {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Err(_) => break End::Late,
            Ok(Err(err)) => break End::Broke(describe_reqwest(err)),
            Ok(Ok(None)) => break End::Whole,
            Ok(Ok(Some(chunk))) => {
                let room = cap.saturating_sub(bytes.len());
                if chunk.len() > room {
                    bytes.extend_from_slice(chunk.get(..room).unwrap_or_default());
                    break End::Cut;
                }
                bytes.extend_from_slice(&chunk);
            }
        }
    };
    Capped { bytes, end }
}

/// A byte count as people read it: `64 KiB`, `8 MiB`.
fn size(bytes: usize) -> String {
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// A 200 answer labelled JSON or HTML, read whole: events under the wrong label (a JSON
/// label on what is not one JSON document), or the error it is.
fn whole_answer(
    content_type: &str,
    status: u16,
    body: bytes::Bytes,
) -> Result<bytes::Bytes, ProviderError> {
    // Read only when its values are within the count a stream's event is held to.
    let document = (json_values_in(&body) <= conduit_core::agent::MAX_RESPONSE_VALUES)
        .then(|| serde_json::from_slice::<Value>(&body).ok())
        .flatten();
    if content_type.starts_with("application/json") && document.is_none() {
        return Ok(body);
    }
    let message = match document.as_ref().and_then(crate::error_body::details) {
        Some(details) => details.line(),
        None => format!(
            "an answer that is not an event stream ({content_type}): {}",
            error_message(&String::from_utf8_lossy(&body))
        ),
    };
    Err(ProviderError {
        kind: ProviderErrorKind::Protocol,
        status: Some(status),
        message,
        retry_after: None,
    })
}

/// Decodes a provider's SSE bytes into events through `decoder`. The stream ends after
/// `Stop` or the first error; silence longer than `read_timeout` is a `Stalled` error, and
/// an event larger than [`MAX_SSE_EVENT_BYTES`], or events carrying more than
/// [`MAX_SSE_RESPONSE_BYTES`] in all, a `Protocol` one.
pub fn decode_sse<S, B, E>(
    bytes: S,
    decoder: impl StreamDecoder,
    read_timeout: Duration,
) -> EventStream
where
    S: futures::Stream<Item = Result<B, E>> + Send + 'static,
    B: bytes::Buf + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    decode_sse_limited(bytes, decoder, read_timeout, Limits::default())
}

/// A byte stream given up on because one SSE event grew past the cap.
#[derive(Debug, thiserror::Error)]
enum EventBytes<E: std::error::Error + 'static> {
    #[error(transparent)]
    Read(#[from] E),
    #[error("one event is larger than {}", size(*.0))]
    TooLarge(usize),
}

/// [`decode_sse`] with the caps on one event's bytes and all events' data given. The SSE
/// parser keeps an unfinished line and event with no limit of its own, so the bytes that
/// arrive after the last whole event are counted here, before the parser, and the stream
/// fails when they pass `limits.sse_event`.
fn decode_sse_limited<S, B, E>(
    bytes: S,
    mut decoder: impl StreamDecoder,
    read_timeout: Duration,
    limits: Limits,
) -> EventStream
where
    S: futures::Stream<Item = Result<B, E>> + Send + 'static,
    B: bytes::Buf + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let (max_event_bytes, max_response_bytes) = (limits.sse_event, limits.sse_response);
    let pending = Arc::new(AtomicUsize::new(0));
    // When bytes last came, in milliseconds from the start: a comment (`: ping`), which
    // proxies send while a model thinks, yields no event but shows the stream is alive.
    let started = tokio::time::Instant::now();
    let last_bytes = Arc::new(AtomicU64::new(0));
    let counted = {
        let (pending, last_bytes) = (pending.clone(), last_bytes.clone());
        bytes.map(move |chunk| {
            let chunk = chunk?;
            last_bytes.store(millis_since(started), Ordering::Relaxed);
            let now = pending
                .fetch_add(bytes::Buf::remaining(&chunk), Ordering::Relaxed)
                .saturating_add(bytes::Buf::remaining(&chunk));
            if now > max_event_bytes {
                return Err(EventBytes::TooLarge(max_event_bytes));
            }
            Ok(chunk)
        })
    };
    let stream = async_stream::stream! {
        let mut received: usize = 0;
        // Lines the SSE specification ignores (a field a proxy adds) are dropped before
        // the parser, which would end the stream at them.
        let mut lines = crate::sse_lines::SpecLines::default();
        let events = SseStream::from_bytes_stream(
            counted.map(move |chunk| chunk.map(|chunk| lines.filter(chunk))),
        );
        futures::pin_mut!(events);
        loop {
            // Nothing for `read_timeout` is a stall; bytes without an event (comments)
            // are not. Silence counts from this wait's start at the earliest: a reader
            // that paused (a full pipe) has not seen what arrived meanwhile.
            let waiting_since = millis_since(started);
            let next = loop {
                let heard = last_bytes.load(Ordering::Relaxed).max(waiting_since);
                let quiet = Duration::from_millis(millis_since(started).saturating_sub(heard));
                let left = read_timeout.saturating_sub(quiet);
                if left.is_zero() {
                    break Err(());
                }
                if let Ok(next) = tokio::time::timeout(left, events.next()).await {
                    break Ok(next);
                }
            };
            let decoded = match next {
                Err(_) => Err(ProviderError::new(
                    ProviderErrorKind::Stalled,
                    format!("nothing arrived for {} s", read_timeout.as_secs_f32()),
                )),
                Ok(None) => {
                    for item in split(decoder.finish()) {
                        yield item;
                    }
                    return;
                }
                Ok(Some(Err(err))) if pending.load(Ordering::Relaxed) > max_event_bytes => {
                    Err(ProviderError::new(
                        ProviderErrorKind::Protocol,
                        format!(
                            "the provider sent an event larger than {}; Conduit stopped reading the answer ({err})",
                            size(max_event_bytes)
                        ),
                    ))
                }
                Ok(Some(Err(err))) => Err(ProviderError::new(
                    ProviderErrorKind::Connection,
                    format!("the stream broke: {err}"),
                )),
                Ok(Some(Ok(sse))) => {
                    // Everything received so far is in this event or the ones still
                    // queued behind it; only what follows counts against the next.
                    pending.store(0, Ordering::Relaxed);
                    received = received.saturating_add(sse.data.as_deref().map_or(0, str::len));
                    match sse.data.as_deref() {
                        _ if received > max_response_bytes => Err(ProviderError::new(
                            ProviderErrorKind::Protocol,
                            format!(
                                "the provider's answer is larger than {}; Conduit stopped reading it",
                                size(max_response_bytes)
                            ),
                        )),
                        // Comments and keep-alives carry no data; an event whose data is
                        // empty (a bare `data`) says nothing either.
                        None | Some("") => Ok(Vec::new()),
                        Some(data) => decoder.decode(sse.event.as_deref(), data),
                    }
                }
            };
            let failed = decoded.is_err();
            let mut stopped = false;
            for item in split(decoded) {
                stopped |= matches!(item, Ok(ProviderEvent::Stop(_)));
                yield item;
            }
            if failed || stopped {
                return;
            }
        }
    };
    stream.boxed()
}

/// Milliseconds from `started` to now.
fn millis_since(started: tokio::time::Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Events, or the error, as stream items.
fn split(
    decoded: Result<Vec<ProviderEvent>, ProviderError>,
) -> Vec<Result<ProviderEvent, ProviderError>> {
    match decoded {
        Ok(events) => events.into_iter().map(Ok).collect(),
        Err(err) => vec![Err(err)],
    }
}

/// Follows redirects only within the origin of the first request (`conduit_net`): the
/// key headers, the extra headers and the conversation never go to another server, and an
/// https request is never downgraded to http. Anything else is an error that names where
/// the server pointed.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    conduit_net::same_origin_redirects(|refused| match refused {
        conduit_net::Refused::Elsewhere(target) => RefusedRedirect::Elsewhere {
            target: without_secrets(&target),
        },
        conduit_net::Refused::TooMany => RefusedRedirect::TooMany,
    })
}

/// Whether a redirect from `first` to `target` stays on the same scheme, host and port
/// (so https to http on the same host is another origin).
fn same_origin(first: &reqwest::Url, target: &reqwest::Url) -> bool {
    first.origin() == target.origin()
}

/// Whether two base URLs name the same origin (scheme, host and port). A URL that does
/// not parse matches nothing, so a doubtful change counts as a move to another server.
pub fn same_origin_urls(a: &str, b: &str) -> bool {
    match (reqwest::Url::parse(a.trim()), reqwest::Url::parse(b.trim())) {
        (Ok(a), Ok(b)) => same_origin(&a, &b),
        _ => false,
    }
}

/// A URL as it may be shown: no user info and no query (either can hold a key).
fn without_secrets(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    // Both fail only for URLs that cannot have user info (no host), where there is none.
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// A redirect the policy refused.
#[derive(Debug, thiserror::Error)]
enum RefusedRedirect {
    #[error(
        "the provider redirected to another origin, {target}; Conduit does not follow it so the key and the conversation stay with the configured server"
    )]
    Elsewhere { target: String },
    #[error(
        "the provider redirected more than {} times",
        conduit_net::MAX_REDIRECTS
    )]
    TooMany,
}

/// A sent request's response, or its failure as a typed error with the provider's message
/// (its body read within the error-body cap and `read_timeout`).
async fn check(
    sent: Result<reqwest::Response, reqwest::Error>,
    limits: Limits,
    read_timeout: Duration,
) -> Result<reqwest::Response, ProviderError> {
    let response = sent.map_err(|e| {
        let kind = if e.is_timeout() || e.is_connect() || e.is_request() {
            ProviderErrorKind::Connection
        } else {
            ProviderErrorKind::Protocol
        };
        ProviderError::new(kind, describe_reqwest(e))
    })?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let retry_after = retry_after(response.headers(), SystemTime::now());
    let body = read_capped(response, limits.error_body, read_timeout).await;
    let text = String::from_utf8_lossy(&body.bytes);
    // Gemini says how long to wait in its body, not in a header.
    let retry_after = retry_after.or_else(|| {
        serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|value| crate::error_body::retry_delay(&value))
    });
    let mut err = status_error(status.as_u16(), &text, retry_after);
    match body.end {
        End::Whole => {}
        End::Cut => err.message.push_str(&format!(
            " (the error body was cut at {})",
            size(limits.error_body)
        )),
        End::Late => err.message.push_str(&format!(
            " (the error body did not end within {} s)",
            read_timeout.as_secs_f32()
        )),
        End::Broke(why) => err
            .message
            .push_str(&format!(" (the error body broke off: {why})")),
    }
    Err(err)
}

/// A reqwest error and its causes, without the request's URL: a key can be part of a base
/// URL's path or query, and this text is logged, stored and shown. Only the server's
/// origin (scheme, host and port) is named.
fn describe_reqwest(e: reqwest::Error) -> String {
    let origin = e.url().map(|url| url.origin().ascii_serialization());
    let e = e.without_url();
    let mut text = match origin {
        Some(origin) => format!("{e} (at {origin})"),
        None => e.to_string(),
    };
    let mut source = std::error::Error::source(&e);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// Maps an HTTP error status and body to a typed error carrying the provider's message.
pub fn status_error(status: u16, body: &str, retry_after: Option<Duration>) -> ProviderError {
    let kind = status_kind(status);
    let message = error_message(body);
    let kind = if kind == ProviderErrorKind::InvalidRequest && refuses_tools(&message) {
        ProviderErrorKind::ToolsUnsupported
    } else if matches!(
        kind,
        ProviderErrorKind::InvalidRequest | ProviderErrorKind::RequestTooLarge
    ) && exceeds_context(body, &message)
    {
        ProviderErrorKind::ContextTooLong
    } else if kind == ProviderErrorKind::RateLimited && is_out_of_credit(body) {
        // OpenAI answers an account out of credit with a 429: no wait makes it work, so it
        // is not retried (four retries over minutes, then the same failure).
        ProviderErrorKind::InvalidRequest
    } else {
        kind
    };
    ProviderError {
        kind,
        status: Some(status),
        message,
        retry_after,
    }
}

/// Whether an error body is OpenAI's `insufficient_quota` (an account out of credit).
fn is_out_of_credit(body: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|value| crate::error_body::details(&value))
        .is_some_and(|details| details.code.as_deref() == Some("insufficient_quota"))
}

/// Whether a refused request says it is longer than the model's context, in the words of
/// each service (a refusal for the requested output's length reads so too: a shorter
/// prompt leaves it room): OpenAI's `context_length_exceeded` code (Chat Completions and Responses),
/// llama.cpp's `exceed_context_size_error` type, Anthropic's "prompt is too long: 208310
/// tokens > 200000 maximum", OpenAI-style servers' (vLLM, Mistral, LM Studio) "maximum
/// context length", Responses' "exceeds the context window", Gemini's "The input token
/// count (1200000) exceeds the maximum number of tokens allowed (1048576)".
fn exceeds_context(body: &str, message: &str) -> bool {
    let details = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|value| crate::error_body::details(&value));
    let coded = details.is_some_and(|details| {
        details
            .code
            .is_some_and(|code| crate::error_body::CONTEXT_TOO_LONG_CODES.contains(&code.as_str()))
    });
    let message = message.to_ascii_lowercase();
    coded
        || message.contains("prompt is too long")
        || message.contains("maximum context length")
        || message.contains("exceeds the context window")
        || message.contains("exceeds the available context size")
        || (message.contains("input token count") && message.contains("exceeds the maximum"))
        || (message.contains("context length") && message.contains("exceed"))
        // Anthropic, when the prompt and `max_tokens` together pass the window: "input
        // length and `max_tokens` exceed context limit: 178959 + 64000 > 200000".
        || message.contains("exceed context limit")
}

/// Whether a refused request's message says the model takes no tools: Ollama answers
/// `registry.ollama.ai/library/gemma:2b does not support tools`; other servers say
/// "does not support tool calling" / "tool use".
fn refuses_tools(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    message.contains("does not support tool") || message.contains("tools are not supported")
}

/// The human message inside a provider's error body, in any shape the services send
/// (see [`crate::error_body`]); anything else is shown as a short excerpt.
pub fn error_message(body: &str) -> String {
    crate::error_body::body_message(body)
}

/// The longest wait a `retry-after` is read as.
const LONGEST_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// How long the provider asked to wait: `retry-after-ms`, or `retry-after` in seconds or
/// as an HTTP date.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let wait = seconds_to_wait;
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        return Some(wait(ms / 1000.0));
    }
    let value = text("retry-after")?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return Some(wait(seconds));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(
        date.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(LONGEST_RETRY_AFTER),
    )
}

/// A wait the provider asked for, in seconds, as a duration. A wait longer than a day
/// (`inf`, `1e30` included) is read as a day, which the retry policy caps again; a negative
/// one or NaN is none.
pub(crate) fn seconds_to_wait(seconds: f64) -> Duration {
    if seconds.is_nan() {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(seconds.clamp(0.0, LONGEST_RETRY_AFTER.as_secs_f64()))
        .unwrap_or(LONGEST_RETRY_AFTER)
}

/// What failed, by the HTTP status it was answered with (or that an error event names as
/// its code, as OpenRouter's `"code": 502` mid-stream).
pub(crate) fn status_kind(status: u16) -> ProviderErrorKind {
    match status {
        401 | 403 => ProviderErrorKind::Authentication,
        404 => ProviderErrorKind::NotFound,
        413 => ProviderErrorKind::RequestTooLarge,
        429 => ProviderErrorKind::RateLimited,
        503 | 529 => ProviderErrorKind::Overloaded,
        // A request that timed out (408) or met a conflicting one (409, a lock on the
        // provider's side) may go through as it is the next time: the official SDKs retry
        // both.
        408 | 409 | 500..=599 => ProviderErrorKind::Server,
        _ => ProviderErrorKind::InvalidRequest,
    }
}

/// A header as a request sends it, or which of its name and value HTTP does not allow (a
/// space or colon in the name, a line break in the value); the value is never quoted.
/// Checked when a provider is saved too, so a bad one is refused there and not at every
/// message.
pub fn checked_header(
    name: &str,
    value: String,
) -> Result<(HeaderName, HeaderValue), ProviderError> {
    let name = HeaderName::try_from(name).map_err(|_| {
        ProviderError::new(
            ProviderErrorKind::Input,
            format!("bad header name {name:?}"),
        )
    })?;
    let value = HeaderValue::try_from(value).map_err(|_| {
        ProviderError::new(
            ProviderErrorKind::Input,
            format!("the value of header {name} is not valid"),
        )
    })?;
    Ok((name, value))
}

/// Credentials a request sent, to be hidden in what comes back about it.
struct SentSecrets(Vec<String>);

impl SentSecrets {
    /// Values shorter than this are not hidden (a header such as `x-beta: 1`).
    const MIN_CHARS: usize = 8;

    /// From header values: each whole and trimmed, and the credential after an
    /// authorization scheme (`Bearer <key>`), longest first.
    fn new<'a>(values: impl Iterator<Item = &'a str>) -> Self {
        let mut forms: Vec<String> = values
            .flat_map(|value| {
                let value = value.trim();
                let credential = value
                    .split_once(' ')
                    .filter(|(scheme, _)| {
                        ["bearer", "basic", "token"].contains(&scheme.to_ascii_lowercase().as_str())
                    })
                    .map(|(_, credential)| credential.trim().to_owned());
                [Some(value.to_owned()), credential].into_iter().flatten()
            })
            .filter(|form| form.chars().count() >= Self::MIN_CHARS)
            .collect();
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        forms.dedup();
        Self(forms)
    }

    /// `err` with every credential in its message masked.
    fn hidden_in(&self, mut err: ProviderError) -> ProviderError {
        for form in &self.0 {
            if err.message.contains(form.as_str()) {
                err.message = err.message.replace(form.as_str(), "••••");
            }
        }
        // A message (or a part of it: an excerpt, the provider's message beside its raw
        // error) is cut to a length before it comes here, and a cut may fall inside a
        // credential: a start of one just before a cut (its `…`) or at the message's end
        // is masked too, whatever was added after the cut.
        for form in &self.0 {
            let mut ends: Vec<usize> = err.message.match_indices('…').map(|(at, _)| at).collect();
            ends.push(err.message.len());
            // From the last, so the earlier positions stay where they are.
            for end in ends.into_iter().rev() {
                let body = &err.message[..end];
                let start = (Self::MIN_CHARS..form.len())
                    .rev()
                    .filter(|&len| form.is_char_boundary(len))
                    .find(|&len| body.ends_with(&form[..len]))
                    .map(|len| end - len);
                if let Some(start) = start {
                    err.message.replace_range(start..end, "••••");
                }
            }
        }
        err
    }
}

fn is_secret_header(name: &str) -> bool {
    matches!(
        name,
        "authorization" | "x-api-key" | "x-goog-api-key" | "api-key"
    )
}

/// At most how many JSON values `bytes` holds ([`crate::decode::json_values_at_most`]);
/// none when it is not text (it is then no JSON either).
fn json_values_in(bytes: &[u8]) -> usize {
    std::str::from_utf8(bytes).map_or(0, crate::decode::json_values_at_most)
}

/// Parses a tool call's accumulated argument text; empty text means no arguments.
pub fn parse_arguments(raw: &str) -> Result<Value, conduit_core::provider::InvalidArguments> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    let limit = conduit_core::agent::MAX_RESPONSE_VALUES;
    if crate::decode::json_values_at_most(raw) > limit {
        return Err(conduit_core::provider::InvalidArguments {
            raw: raw.to_owned(),
            error: format!("more than {limit} JSON values: Conduit did not read them"),
        });
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(conduit_core::provider::InvalidArguments {
            raw: raw.to_owned(),
            error: format!("expected a JSON object, got {}", json_kind(&other)),
        }),
        Err(err) => Err(conduit_core::provider::InvalidArguments {
            raw: raw.to_owned(),
            error: format!("not valid JSON: {err}"),
        }),
    }
}

pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each service's refusal of a prompt longer than the model's context, as it sends
    /// it, reads as `ContextTooLong`; other refusals that mention tokens do not.
    #[test]
    fn a_prompt_longer_than_the_context_is_told_apart_in_every_services_words() {
        let too_long = [
            // Anthropic.
            (
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}"#,
            ),
            // OpenAI Chat Completions.
            (
                400,
                r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
            ),
            // OpenAI Responses.
            (
                400,
                r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}"#,
            ),
            // Gemini.
            (
                400,
                r#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
            ),
            // llama.cpp's server.
            (
                400,
                r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}"#,
            ),
            // vLLM (no code).
            (
                400,
                r#"{"object":"error","message":"This model's maximum context length is 32768 tokens. However, you requested 40112 tokens (39088 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
            ),
            // A proxy's 413 for the same reason.
            (
                413,
                r#"{"error":{"message":"context length exceeded","type":"invalid_request_error"}}"#,
            ),
        ];
        for (status, body) in too_long {
            assert_eq!(
                status_error(status, body, None).kind,
                ProviderErrorKind::ContextTooLong,
                "{body}"
            );
        }
        let other = [
            (
                400,
                r#"{"error":{"message":"max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet","type":"invalid_request_error"}}"#,
            ),
            (
                413,
                r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}"#,
            ),
            (
                429,
                r#"{"error":{"message":"Request too large for gpt-4o: Limit 30000, Requested 130412. The input or output tokens must be reduced in order to run successfully.","type":"tokens","code":"rate_limit_exceeded"}}"#,
            ),
        ];
        let kinds: Vec<_> = other
            .iter()
            .map(|(status, body)| status_error(*status, body, None).kind)
            .collect();
        assert_eq!(
            kinds,
            [
                ProviderErrorKind::InvalidRequest,
                ProviderErrorKind::RequestTooLarge,
                ProviderErrorKind::RateLimited
            ]
        );
    }

    #[test]
    fn statuses_map_to_kinds_with_the_providers_message() {
        let anthropic = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
        let err = status_error(401, anthropic, None);
        assert_eq!(err.kind, ProviderErrorKind::Authentication);
        assert_eq!(err.message, "invalid x-api-key");
        let openai = r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#;
        assert_eq!(
            status_error(429, openai, None).kind,
            ProviderErrorKind::RateLimited
        );
        let gemini =
            r#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#;
        let err = status_error(503, gemini, None);
        assert_eq!(err.kind, ProviderErrorKind::Overloaded);
        assert_eq!(err.message, "The model is overloaded.");
        for (status, kind) in [
            (400, ProviderErrorKind::InvalidRequest),
            (403, ProviderErrorKind::Authentication),
            (404, ProviderErrorKind::NotFound),
            (413, ProviderErrorKind::RequestTooLarge),
            (500, ProviderErrorKind::Server),
            (529, ProviderErrorKind::Overloaded),
            (408, ProviderErrorKind::Server),
            (409, ProviderErrorKind::Server),
        ] {
            assert_eq!(status_error(status, "", None).kind, kind, "{status}");
        }
        // A request timeout and a conflict go again, as the official SDKs send them again.
        assert!(status_error(408, "", None).is_retryable());
        assert!(status_error(409, "", None).is_retryable());
        assert_eq!(status_error(500, "", None).message, "no details given");
        assert_eq!(
            status_error(502, "<html>bad gateway</html>", None).message,
            "an HTML page instead of an error message: \"bad gateway\""
        );
    }

    #[test]
    fn a_page_or_a_json_error_where_the_stream_should_be_is_an_error() {
        let whole = |content_type: &str, body: &'static str| {
            whole_answer(
                content_type,
                200,
                bytes::Bytes::from_static(body.as_bytes()),
            )
        };
        let err = whole(
            "application/json",
            r#"{"error":{"message":"model 'x' not found","type":"not_found_error","code":"model_not_found"}}"#,
        )
        .unwrap_err();
        assert_eq!(err.kind, ProviderErrorKind::Protocol);
        assert_eq!(err.status, Some(200));
        assert_eq!(err.message, "model_not_found: model 'x' not found");

        let err = whole(
            "text/html; charset=utf-8",
            "<html><head><title>Sign in to the Wi-Fi</title></head></html>",
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "an answer that is not an event stream (text/html; charset=utf-8): an HTML page instead of an error message: \"Sign in to the Wi-Fi\""
        );

        let events = "data: {\"a\":1}\n\ndata: [DONE]\n\n";
        assert_eq!(
            whole("application/json", events).unwrap(),
            events.as_bytes()
        );
    }

    #[test]
    fn a_retry_after_too_large_or_not_a_number_does_not_break_the_turn() {
        let now = SystemTime::UNIX_EPOCH;
        for (name, value, expected) in [
            ("retry-after", "inf", LONGEST_RETRY_AFTER),
            ("retry-after", "1e30", LONGEST_RETRY_AFTER),
            ("retry-after-ms", "1e300", LONGEST_RETRY_AFTER),
            ("retry-after", "NaN", Duration::ZERO),
            ("retry-after", "-5", Duration::ZERO),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(name, HeaderValue::from_static(value));
            assert_eq!(
                retry_after(&headers, now),
                Some(expected),
                "{name}: {value}"
            );
        }
        // The policy still waits no longer than its cap.
        let policy = RetryPolicy::default();
        assert_eq!(policy.delay(1, Some(LONGEST_RETRY_AFTER)), policy.max_delay);
    }

    #[test]
    fn retry_after_reads_milliseconds_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(7)));
        headers.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(
            retry_after(&headers, now),
            Some(Duration::from_millis(1500))
        );
        let mut dated = HeaderMap::new();
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        dated.insert("retry-after", HeaderValue::from_str(&later).unwrap());
        assert_eq!(retry_after(&dated, now), Some(Duration::from_secs(30)));
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn backoff_doubles_honours_retry_after_and_is_capped() {
        let policy = RetryPolicy {
            max_retries: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            max_total: Duration::from_secs(10),
        };
        assert_eq!(policy.delay(1, None), Duration::from_millis(100));
        assert_eq!(policy.delay(3, None), Duration::from_millis(400));
        assert_eq!(policy.delay(9, None), Duration::from_secs(1));
        assert_eq!(
            policy.delay(1, Some(Duration::from_millis(250))),
            Duration::from_millis(250)
        );
        assert_eq!(
            policy.delay(1, Some(Duration::from_secs(90))),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn retries_stop_at_the_count_the_total_time_and_non_retryable_errors() {
        let policy = RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_secs(60),
            max_total: Duration::from_secs(30),
        };
        let busy = ProviderError::new(ProviderErrorKind::RateLimited, "busy");
        let mut retrier = Retrier::new(&policy);
        assert_eq!(
            retrier.next_delay(&busy),
            Some((1, Duration::from_millis(10)))
        );
        assert_eq!(
            retrier.next_delay(&busy),
            Some((2, Duration::from_millis(20)))
        );
        assert_eq!(retrier.next_delay(&busy), None, "count reached");

        let mut long_wait = busy.clone();
        long_wait.retry_after = Some(Duration::from_secs(45));
        assert_eq!(
            Retrier::new(&policy).next_delay(&long_wait),
            None,
            "past the total time"
        );

        let auth = ProviderError::new(ProviderErrorKind::Authentication, "bad key");
        assert_eq!(Retrier::new(&policy).next_delay(&auth), None);

        // Asked to come back later than the longest wait: not retried at all.
        let mut an_hour = busy.clone();
        an_hour.retry_after = Some(Duration::from_secs(3600));
        assert_eq!(Retrier::new(&policy).next_delay(&an_hour), None);
        // An account out of credit is no rate limit.
        let quota = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        let out_of_credit = status_error(429, quota, None);
        assert_eq!(out_of_credit.kind, ProviderErrorKind::InvalidRequest);
        assert!(
            out_of_credit
                .message
                .contains("exceeded your current quota")
        );
        assert_eq!(Retrier::new(&policy).next_delay(&out_of_credit), None);
    }

    #[test]
    fn redirects_stay_on_the_scheme_host_and_port_of_the_first_request() {
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        let first = url("https://api.example.com/v1/messages");
        assert!(same_origin(
            &first,
            &url("https://api.example.com/v2/messages?x=1")
        ));
        assert!(same_origin(&first, &url("https://api.example.com:443/v1")));
        for other in [
            "http://api.example.com/v1/messages",
            "https://api.example.com:8443/v1/messages",
            "https://evil.example.com/v1/messages",
            "https://example.com/v1/messages",
        ] {
            assert!(!same_origin(&first, &url(other)), "{other}");
        }
        assert!(same_origin_urls(
            "https://API.example.com/v1",
            "https://api.example.com:443/v2"
        ));
        assert!(!same_origin_urls("https://api.example.com/v1", "not a url"));
        assert_eq!(
            without_secrets(&url("https://user:pw@evil.example/collect?key=sk-1#frag")),
            "https://evil.example/collect"
        );
    }

    #[test]
    fn settings_written_for_a_log_name_headers_without_their_values() {
        let config = crate::ProviderConfig {
            protocol: crate::Protocol::OpenAiChat,
            base_url: "https://api.example.com/v1".into(),
            api_key: Some("sk-live-0123456789".into()),
            http: HttpSettings {
                extra_headers: vec![("Helicone-Auth".into(), "Bearer gw-secret-98765".into())],
                ..HttpSettings::default()
            },
        };
        let logged = format!("{config:?}");
        assert!(
            logged.contains("Helicone-Auth") && logged.contains("••••"),
            "{logged}"
        );
        assert!(
            !logged.contains("sk-live") && !logged.contains("gw-secret"),
            "{logged}"
        );
    }

    #[test]
    fn a_credential_cut_at_the_end_of_a_shortened_message_is_masked_too() {
        let secrets = SentSecrets::new(["Bearer sk-0123456789abcdef"].into_iter());
        let hidden = |message: &str| {
            secrets
                .hidden_in(ProviderError::new(ProviderErrorKind::Server, message))
                .message
        };
        assert_eq!(hidden("bad key sk-0123456789…"), "bad key ••••…");
        assert_eq!(hidden("bad key sk-0123456789"), "bad key ••••");
        assert_eq!(
            hidden("sk-0123456789abcdef and sk-01234567…"),
            "•••• and ••••…"
        );
        // Whatever was added after the cut: a note on the body, the raw error.
        assert_eq!(
            hidden("bad key sk-0123456789ab… (the error body was cut at 64 KiB)"),
            "bad key ••••… (the error body was cut at 64 KiB)"
        );
        assert_eq!(
            hidden("provider says sk-0123456789a…: raw sk-0123456789abc…"),
            "provider says ••••…: raw ••••…"
        );
        // Shorter than a credential's least: nothing to tell from ordinary text.
        assert_eq!(hidden("bad key sk-0123…"), "bad key sk-0123…");
        assert_eq!(
            hidden("the request was too large"),
            "the request was too large"
        );
    }

    #[test]
    fn arguments_parse_to_objects_only() {
        assert_eq!(parse_arguments("").unwrap(), serde_json::json!({}));
        assert_eq!(
            parse_arguments("{\"a\":1}").unwrap(),
            serde_json::json!({"a": 1})
        );
        assert!(parse_arguments("{\"a\":").is_err());
        let err = parse_arguments("[1]").unwrap_err();
        assert!(err.error.contains("an array"));
        // Arguments that would take gigabytes parsed are refused unparsed, kept as text.
        let limit = conduit_core::agent::MAX_RESPONSE_VALUES;
        let raw = format!(r#"{{"points":[{}0]}}"#, "0,".repeat(limit));
        let err = parse_arguments(&raw).unwrap_err();
        assert_eq!(err.raw, raw);
        assert_eq!(
            err.error,
            format!("more than {limit} JSON values: Conduit did not read them")
        );
    }
}

#[cfg(test)]
#[path = "http_limits_tests.rs"]
mod limits_tests;

#[cfg(test)]
#[path = "stream_retry_tests.rs"]
mod stream_retry_tests;
