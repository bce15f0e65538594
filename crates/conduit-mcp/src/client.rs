//! One connection to an MCP server over stdio or streamable HTTP, through rmcp: the
//! handshake with a timeout, tools, resources and prompts, and tool calls with a timeout
//! that progress resets, progress matched to its call, and cancellation that reaches the
//! server.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use crate::legacy_sse::{self, LegacySseError};
use crate::redact::Redactor;
use conduit_core::tool::{Progress, ProgressSink};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientCapabilities, ClientConfig, ClientRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, FormElicitationCapability, GetPromptRequestParams,
    GetPromptResult, Implementation, JsonObject, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, Prompt, ProtocolVersion, ReadResourceRequestParams, ReadResourceResult,
    Resource, ResourceTemplate, ServerNotification, ServerResult, SubscriptionFilter, Tool,
    UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{
    ClientCacheConfig, ClientHandler, ClientLifecycleMode, ClientServiceExt, Peer, RoleClient,
    ServiceError,
};
use tokio_util::sync::CancellationToken;

use crate::config::{ProtocolEra, ServerSpec, Transport};
use crate::elicit::{
    self, Asker, Elicitation, ElicitationAnswer, ElicitationKind, ElicitationOffer,
};
use crate::listen_stream::{LISTEN_STREAM_WAIT, ListenStream, MaybeSignedIn, WatchedClient};
use crate::oauth::{self, TokenVault};
use crate::paging::{ListDeadline, ListError, Listed, Listing, Pager};
use crate::process::{self, ServerProcess, StderrTail};
use crate::sampling::{self, SamplingAnswer};
use crate::spill::{self, Spill};
use rmcp::transport::AuthClient;

/// Default time a tool call may take without progress.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest message a server may send, over stdio or as one SSE event (a tool output
/// of 100 MB fits, with room).
pub const MAX_STDIO_MESSAGE: usize = 256 * 1024 * 1024;
/// Progress resets the call timeout, but no call runs longer than this.
pub const MAX_CALL_TIME: Duration = Duration::from_secs(30 * 60);

/// Why a server did not start, with what it left behind.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason}")]
pub struct StartError {
    pub reason: String,
    pub exit_code: Option<i32>,
    pub stderr_tail: Vec<String>,
    /// The server answered `server/discover` with something that is neither a 2026
    /// answer nor the error a legacy server gives: worth one more try with `initialize`.
    confused_by_discover: bool,
    /// The server wants the user to sign in (it answered 401, or 403 for more scope).
    pub sign_in: Option<SignInNeeded>,
    /// Its Streamable HTTP handshake was refused as a legacy HTTP+SSE server refuses it
    /// ([`posted_and_refused`]): its event stream is worth a try.
    legacy_hint: bool,
    /// It may start when tried again: it did not finish starting in time (a first `npx`
    /// or `uvx` downloading, a `docker run` pulling its image) or could not be reached (the
    /// app opened before the network was up). One that exited or refused has no such hope.
    pub worth_retrying: bool,
}

/// A server that needs the user to sign in (again), and what it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInNeeded {
    /// Its `WWW-Authenticate` challenge: where its metadata is and what scope it wants.
    pub challenge: Option<String>,
    /// It answered 403 `insufficient_scope`: signed in, but with too little.
    pub more_scope: bool,
}

impl SignInNeeded {
    /// Finds a 401 or 403 challenge anywhere in an error's chain of causes.
    fn find(error: &(dyn std::error::Error + 'static)) -> Option<Self> {
        use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
        let mut current = Some(error);
        while let Some(error) = current {
            if let Some(required) = error.downcast_ref::<AuthRequiredError>() {
                return Some(Self {
                    challenge: Some(required.www_authenticate_header.clone()),
                    more_scope: false,
                });
            }
            if let Some(scope) = error.downcast_ref::<InsufficientScopeError>() {
                return Some(Self {
                    challenge: Some(scope.www_authenticate_header.clone()),
                    more_scope: true,
                });
            }
            if matches!(
                error.downcast_ref::<rmcp::transport::AuthError>(),
                Some(rmcp::transport::AuthError::AuthorizationRequired)
            ) {
                return Some(Self {
                    challenge: None,
                    more_scope: false,
                });
            }
            current = error.source();
        }
        None
    }
}

impl StartError {
    fn plain(reason: String) -> Self {
        Self {
            reason,
            exit_code: None,
            stderr_tail: Vec::new(),
            confused_by_discover: false,
            sign_in: None,
            legacy_hint: false,
            worth_retrying: false,
        }
    }

    /// A start that did not finish within `start_timeout`: worth another try.
    fn timed_out(start_timeout: Duration) -> Self {
        Self {
            worth_retrying: true,
            ..Self::plain(format!(
                "it did not finish starting within {start_timeout:?}"
            ))
        }
    }

    /// Why the handshake failed, noting a server that did not understand discovery.
    fn handshake(error: &rmcp::service::ClientInitializeError) -> Self {
        use rmcp::service::ClientInitializeError as Failed;
        let confused = matches!(
            error,
            Failed::ExpectedInitResponse(_)
                | Failed::ExpectedInitResult(_)
                | Failed::ConflictInitResponseId(..)
                | Failed::UncorrelatedErrorResponse { .. }
        ) || matches!(
            error,
            // A 2026 server's own refusal (it needs a capability Conduit lacks, or a
            // header did not match) says why; a legacy handshake would only hide that,
            // and start a stdio server twice.
            Failed::JsonRpcError(data)
                if data.code != rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
                    && data.code != rmcp::model::ErrorCode::HEADER_MISMATCH
        );
        let sign_in = SignInNeeded::find(error).or_else(|| {
            error.is_authorization_required().then_some(SignInNeeded {
                challenge: error.auth_challenge().map(str::to_owned),
                more_scope: false,
            })
        });
        let reason = match &sign_in {
            Some(need) if need.more_scope => "it needs more access: sign in again".to_owned(),
            Some(_) => "it needs you to sign in".to_owned(),
            None => handshake_words(error),
        };
        Self {
            confused_by_discover: confused && sign_in.is_none(),
            legacy_hint: sign_in.is_none() && posted_and_refused(error),
            worth_retrying: sign_in.is_none() && handshake_never_connected(error),
            sign_in,
            ..Self::plain(reason)
        }
    }
}

/// Whether a handshake failed for want of a connection (nothing listened at the URL, no
/// network): the transport's error is inside rmcp's, not its source.
fn handshake_never_connected(error: &rmcp::service::ClientInitializeError) -> bool {
    use rmcp::service::ClientInitializeError as Failed;
    match error {
        Failed::TransportError { error, .. } => never_connected(error),
        Failed::LegacyFallbackFailed { discover, fallback } => {
            handshake_never_connected(discover) || handshake_never_connected(fallback)
        }
        other => never_connected(other),
    }
}

/// What a failed handshake says: when discovery and the legacy handshake both failed,
/// what each failed with (rmcp says only that both did), once when they agree.
fn handshake_words(error: &rmcp::service::ClientInitializeError) -> String {
    match error {
        rmcp::service::ClientInitializeError::LegacyFallbackFailed { discover, fallback } => {
            let (discover, fallback) = (handshake_words(discover), handshake_words(fallback));
            if discover == fallback {
                discover
            } else {
                format!("{discover}; initialize then failed too: {fallback}")
            }
        }
        // rmcp names the transport's Rust type: what failed is its error, and when.
        rmcp::service::ClientInitializeError::TransportError { error, context } => {
            format!("{} ({context})", error.error)
        }
        other => other.to_string(),
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    #[error("the server closed the connection")]
    Closed,
    /// The HTTP server let the session expire (a 404): the connection ends and Conduit
    /// connects again, listing the tools, rather than sending the call to whatever answers.
    #[error(
        "the server's session expired (it answered 404); Conduit connects to it again and lists its tools before any runs: call again"
    )]
    SessionExpired,
    #[error("the call took longer than {0:?}")]
    Timeout(Duration),
    #[error("the call was cancelled")]
    Cancelled,
    #[error("the server answered with an error: {0}")]
    Server(String),
    #[error("{0}")]
    Other(String),
    /// The HTTP server answered the request with a rate limit (429) or a failure (5xx)
    /// instead of an answer; the connection goes on.
    #[error("{}", refused_words(*.status, .retry_after.as_deref()))]
    Refused {
        status: u16,
        retry_after: Option<String>,
    },
    /// The server could not be reached (no connection was made): the request did not run.
    #[error("the server could not be reached, so the request did not run: {0}")]
    Unreachable(String),
    /// Sending the request, or reading its answer, failed after it may have reached the
    /// server (a timeout, a reset, an answer that is not MCP); the connection goes on.
    #[error("the request failed on its way ({0}); it may have run")]
    Send(String),
    /// The server refused the call for want of sign-in (401) or of scope (403).
    #[error("{}", if .0.more_scope { "the server needs more access than you granted: sign in to it again" } else { "the server needs you to sign in again" })]
    SignIn(SignInNeeded),
    /// A paged list that would not end, or outgrew what Conduit takes.
    #[error(transparent)]
    List(#[from] ListError),
    /// The server needs the user to finish steps on its web pages before it runs the
    /// request (`URLElicitationRequiredError`, -32042, 2025-11-25): a tool call, a resource
    /// read or a prompt asks the user to open them and goes again
    /// ([`Connection::finish_url_steps`]).
    #[error("the server needs you to finish a step in your browser first: {message}")]
    UrlRequired {
        message: String,
        /// Each a URL-mode elicitation (`mode: "url"`), as the error's data names them.
        steps: Vec<ElicitRequestParams>,
    },
}

/// The JSON-RPC error code of `URLElicitationRequiredError` (2025-11-25).
const URL_ELICITATION_REQUIRED: i32 = -32042;

/// The web pages a `URLElicitationRequiredError`'s data names (`elicitations`, each a
/// URL-mode elicitation), or `None` when it names none or one is not a URL elicitation:
/// the error is then said as the server's error it is. Only the first
/// [`MAX_URL_STEPS`] + 1 are read: a call sends the user to [`MAX_URL_STEPS`] pages at
/// most, so a list of more distinct pages is refused, however long.
fn url_steps(data: Option<&serde_json::Value>) -> Option<Vec<ElicitRequestParams>> {
    let listed = data?.get("elicitations")?.as_array()?;
    let steps = listed
        .iter()
        .take(MAX_URL_STEPS + 1)
        .map(|step| {
            serde_json::from_value::<ElicitRequestParams>(step.clone())
                .ok()
                .filter(|step| matches!(step, ElicitRequestParams::UrlElicitationParams { .. }))
        })
        .collect::<Option<Vec<_>>>()?;
    (!steps.is_empty()).then_some(steps)
}

impl From<ServiceError> for McpError {
    fn from(err: ServiceError) -> Self {
        // rmcp's send error does not name its cause as its source: look inside.
        let need = match &err {
            ServiceError::TransportSend(sent) => SignInNeeded::find(sent),
            other => SignInNeeded::find(other),
        };
        if let Some(need) = need {
            return McpError::SignIn(need);
        }
        if let ServiceError::TransportSend(sent) = &err
            && session_expired(sent)
        {
            return McpError::SessionExpired;
        }
        match err {
            ServiceError::TransportSend(sent) => match http_status(&sent) {
                Some(refused) => McpError::Refused {
                    status: refused.status,
                    retry_after: refused.retry_after.clone(),
                },
                None if never_connected(&sent) => McpError::Unreachable(sent.error.to_string()),
                None => McpError::Send(sent.error.to_string()),
            },
            ServiceError::TransportClosed => McpError::Closed,
            ServiceError::Timeout { timeout } => McpError::Timeout(timeout),
            ServiceError::Cancelled { .. } => McpError::Cancelled,
            ServiceError::McpError(data) if data.code.0 == URL_ELICITATION_REQUIRED => {
                match url_steps(data.data.as_ref()) {
                    Some(steps) => McpError::UrlRequired {
                        message: data.message.to_string(),
                        steps,
                    },
                    None => McpError::Server(data.message.to_string()),
                }
            }
            ServiceError::McpError(data) => McpError::Server(data.message.to_string()),
            other => McpError::Other(other.to_string()),
        }
    }
}

/// The HTTP status a send failed with (rmcp keeps 429 and 5xx), if any.
fn http_status<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> Option<&'e rmcp::transport::streamable_http_client::HttpStatusError> {
    use rmcp::transport::streamable_http_client::{HttpStatusError, StreamableHttpError};
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(status) = error.downcast_ref::<HttpStatusError>() {
            return Some(status);
        }
        // The variant is transparent: its source is not the status but the status's.
        if let Some(StreamableHttpError::HttpStatus(status)) =
            error.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            return Some(status);
        }
        current = error.source();
    }
    None
}

/// Whether a send failed before any connection to the server was made (refused, no
/// route, a name that does not resolve): only then is it sure the request did not run.
fn never_connected(error: &(dyn std::error::Error + 'static)) -> bool {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(StreamableHttpError::Client(client)) =
            error.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            return client.is_connect();
        }
        if let Some(client) = error.downcast_ref::<reqwest::Error>() {
            return client.is_connect();
        }
        current = error.source();
    }
    false
}

/// What a refusal by HTTP status says: a rate limit did not run the request; a server
/// failure may have come after it ran.
fn refused_words(status: u16, retry_after: Option<&str>) -> String {
    if status == 429 {
        let wait = retry_after
            .map(|after| {
                format!(
                    ", asking to wait {} before trying again",
                    server_words(after, 40)
                )
            })
            .unwrap_or_default();
        format!("the server is busy (HTTP 429{wait}); the request did not run")
    } else {
        format!("the server failed with HTTP {status} instead of answering")
    }
}

/// Whether an error's chain says the HTTP server let the session expire (rmcp's
/// `StreamableHttpError::SessionExpired`, generic over the client: found by its text).
fn session_expired(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(error) = current {
        if error.to_string() == "Session expired (HTTP 404)" {
            return true;
        }
        current = error.source();
    }
    false
}

/// What the server said about itself in the handshake.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ServerDetails {
    pub name: Option<String>,
    pub version: Option<String>,
    pub protocol_version: String,
    pub instructions: Option<String>,
    pub tools: bool,
    pub resources: bool,
    pub prompts: bool,
    /// It completes prompt and resource template arguments.
    pub completions: bool,
}

#[derive(Default)]
struct Shared {
    progress: Mutex<HashMap<ProgressToken, ProgressSink>>,
    /// Progress that arrived before its call registered a sink (a fast server answers
    /// while rmcp is still handing the call back): replayed when the sink comes.
    early: Mutex<HashMap<ProgressToken, Vec<Progress>>>,
    tools_changed: tokio::sync::Notify,
    /// How many times the server said its tools changed (`notifications/tools/list_changed`):
    /// a call of a tool listed before the last one checks its definition first.
    tool_changes: std::sync::atomic::AtomicU64,
    /// Set when the session ended because the HTTP server let it expire.
    session_expired: Arc<SessionExpiry>,
    /// The server runs here (stdio, in process) or its URL names this machine: only then
    /// may its questions send the browser to an http page on this machine.
    on_this_machine: bool,
    /// The entry sends its own `Authorization` header: a refusal is not a sign-in request.
    own_authorization: bool,
    /// A request on the running session refused for want of sign-in (401) or of scope
    /// (403), for the runtime to act on ([`Connection::sign_in_refused`]).
    sign_in_refusal: Mutex<Option<SignInNeeded>>,
    sign_in_refused: tokio::sync::Notify,
    /// How many of the server's questions (a form, a page, a sampling request) wait for
    /// the user: a call's idle timeout does not run meanwhile, as the server waits on them.
    asking: std::sync::atomic::AtomicUsize,
    /// When the last of them was answered: the idle time starts again from there.
    asked_until: Mutex<Option<tokio::time::Instant>>,
    /// The latest elicitation ids the server said were completed
    /// (`notifications/elicitation/complete`), at most [`KEPT_COMPLETIONS`]: a call
    /// waiting on one of its own steps in the browser calls again sooner
    /// ([`Connection::call_tool`]). Only a hint: an id decides nothing else.
    completed_elicitations: Mutex<std::collections::VecDeque<String>>,
    elicitation_completed: tokio::sync::Notify,
    /// The last log messages the server sent (`notifications/message`), for Settings.
    log_messages: StderrTail,
}

/// How much of a log message is kept before its secrets are hidden: room for a secret
/// across the shown cut ([`process::SHOWN_LINE_BYTES`]).
const RAW_LOG_LINE_BYTES: usize = 16 * 1024;

/// How many completed elicitation ids a session keeps.
const KEPT_COMPLETIONS: usize = 32;

/// One of the server's questions waiting for the user, counted in [`Shared::asking`].
struct Asking<'a>(&'a Shared);

impl<'a> Asking<'a> {
    fn begin(shared: &'a Shared) -> Self {
        shared
            .asking
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self(shared)
    }
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        *self.0.asked_until.lock() = Some(tokio::time::Instant::now());
        self.0
            .asking
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Shared {
    /// The server said a step in the browser is done: noted, and each call waiting on
    /// one woken.
    fn elicitation_done(&self, id: &str) {
        {
            let mut done = self.completed_elicitations.lock();
            if done.len() == KEPT_COMPLETIONS {
                done.pop_front();
            }
            done.push_back(conduit_core::content::text_start(id, MAX_ELICITATION_ID).to_owned());
        }
        self.elicitation_completed.notify_waiters();
    }

    /// One of the call's steps the server said is done and the call has not acted on
    /// yet, if any. Nothing is taken away: calls waiting on the same step each see it.
    fn elicitation_newly_done(&self, call: &UrlStepsOfCall) -> Option<String> {
        self.completed_elicitations
            .lock()
            .iter()
            .find(|id| {
                call.asked.contains(&UrlStepKey::Id(id.to_string())) && !call.seen.contains(id)
            })
            .cloned()
    }

    /// The server said its tools changed: counted, and the runtime told to list them
    /// again (a stored permit: a change while nobody waits is not lost).
    fn tool_changed(&self) {
        self.tool_changes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.tools_changed.notify_one();
    }
}

/// The client side of a session: routes progress to calls, notes tool list changes,
/// and hands the server's questions to the frontend's [`Asker`].
#[derive(Clone)]
struct Handler {
    shared: Arc<Shared>,
    asks: Asks,
}

/// Who answers a server's questions, which server it is, the folders offered to it as
/// roots, and where its sign-in is kept.
#[derive(Clone)]
pub struct Asks {
    pub server: String,
    pub asker: Option<Arc<dyn Asker>>,
    /// Where HTTP servers' OAuth tokens are kept; without it no sign-in is used, and a
    /// server that asks for one fails to start saying so.
    pub tokens: Option<Arc<dyn TokenVault>>,
    pub roots: Roots,
    /// What this session's server was started from: its sampling requests carry it, so
    /// an allow is judged by what runs, not by what the file says by then.
    pub running: Option<crate::runtime::RunningFrom>,
}

/// The folders a server is offered as roots, shared with whoever may change them while
/// the session runs; `None` when the entry has no `roots` (then none are declared).
#[derive(Clone, Default)]
pub struct Roots(Arc<parking_lot::RwLock<Option<Vec<std::path::PathBuf>>>>);

impl Roots {
    pub fn new(folders: Option<Vec<std::path::PathBuf>>) -> Self {
        Self(Arc::new(parking_lot::RwLock::new(folders)))
    }

    /// The folders now (`None`: roots are not offered).
    pub fn get(&self) -> Option<Vec<std::path::PathBuf>> {
        self.0.read().clone()
    }

    /// Replaces the folders; whether they changed.
    pub fn set(&self, folders: Option<Vec<std::path::PathBuf>>) -> bool {
        let mut now = self.0.write();
        let changed = *now != folders;
        *now = folders;
        changed
    }

    fn offered(&self) -> bool {
        self.0.read().is_some()
    }

    /// The `roots/list` result now.
    fn to_wire(&self) -> serde_json::Value {
        sampling::roots_to_wire(self.0.read().as_deref().unwrap_or_default())
    }
}

impl Asks {
    /// A session whose questions nobody answers (nothing is declared), without sign-in.
    pub fn nobody(server: &str) -> Self {
        Self {
            server: server.to_owned(),
            asker: None,
            tokens: None,
            roots: Roots::default(),
            running: None,
        }
    }

    /// Questions for `server` go to `asker`; no roots are offered.
    pub fn new(server: &str, asker: Option<Arc<dyn Asker>>) -> Self {
        Self {
            asker,
            ..Self::nobody(server)
        }
    }

    fn samples(&self) -> bool {
        self.asker.as_ref().is_some_and(|asker| asker.samples())
    }

    /// Runs a server's sampling request through the frontend: the result JSON, or the
    /// error the server gets (the spec's user-rejected error for a no).
    async fn sample(
        &self,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, rmcp::ErrorData> {
        let Some(asker) = self.asker.as_ref().filter(|asker| asker.samples()) else {
            return Err(rmcp::ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "this client does not offer sampling",
                None,
            ));
        };
        let mut request = sampling::SamplingRequest::from_wire(&self.server, &params).map_err(|why| {
            tracing::warn!(server = %self.server, %why, "a server's sampling request is malformed; refused");
            rmcp::ErrorData::invalid_params(why, None)
        })?;
        request.running = self.running.clone();
        match asker.sample(request).await {
            SamplingAnswer::Sampled(message) => Ok(message.to_wire()),
            SamplingAnswer::Rejected => Err(rmcp::ErrorData::new(
                rmcp::model::ErrorCode(sampling::USER_REJECTED_CODE),
                sampling::USER_REJECTED,
                None,
            )),
            SamplingAnswer::Failed(why) => Err(rmcp::ErrorData::internal_error(why, None)),
        }
    }

    fn offer(&self) -> ElicitationOffer {
        self.asker
            .as_ref()
            .map(|asker| asker.offers())
            .unwrap_or_default()
    }

    /// Asks the user what the server wants; a question that cannot be shown is declined
    /// and said in the log.
    async fn elicit(
        &self,
        request: ElicitRequestParams,
        server_on_this_machine: bool,
    ) -> ElicitResult {
        let Some(asker) = &self.asker else {
            return ElicitResult::new(ElicitationAction::Decline);
        };
        let offer = asker.offers();
        let (message, kind) = match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } if offer.form => {
                let schema = serde_json::to_value(&requested_schema).unwrap_or_default();
                match elicit::form_fields(&schema) {
                    Ok(fields) => (message, ElicitationKind::Form { fields }),
                    Err(why) => {
                        tracing::warn!(server = %self.server, %why, "a server's form cannot be shown; declined");
                        return ElicitResult::new(ElicitationAction::Decline);
                    }
                }
            }
            ElicitRequestParams::UrlElicitationParams { message, url, .. } if offer.url => {
                (message, ElicitationKind::Url { url })
            }
            _ => return ElicitResult::new(ElicitationAction::Decline),
        };
        let question = Elicitation {
            server: self.server.clone(),
            message,
            kind,
        };
        if let Err(why) = question.check(server_on_this_machine) {
            tracing::warn!(server = %self.server, %why, "a server's question cannot be shown; declined");
            return ElicitResult::new(ElicitationAction::Decline);
        }
        let fields = match &question.kind {
            ElicitationKind::Form { fields } => fields.clone(),
            ElicitationKind::Url { .. } => Vec::new(),
        };
        match asker.elicit(question).await {
            ElicitationAnswer::Accept(values) => {
                // The frontend's answer is checked here, once, whoever gave it.
                if let Err(why) = elicit::check(&fields, &values) {
                    tracing::warn!(server = %self.server, %why, "an answer did not fit the form; declined");
                    return ElicitResult::new(ElicitationAction::Decline);
                }
                let result = ElicitResult::new(ElicitationAction::Accept);
                if fields.is_empty() && values.is_empty() {
                    result
                } else {
                    result.with_content(serde_json::Value::Object(values))
                }
            }
            ElicitationAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
            ElicitationAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        }
    }
}

impl Handler {
    /// A new session's shared state, its handler, and the token its end cancels.
    fn for_session(
        asks: &Asks,
        on_this_machine: bool,
        own_authorization: bool,
    ) -> (Arc<Shared>, Self, CancellationToken) {
        let shared = Arc::new(Shared {
            on_this_machine,
            own_authorization,
            ..Shared::default()
        });
        let handler = Self {
            shared: shared.clone(),
            asks: asks.clone(),
        };
        (shared, handler, CancellationToken::new())
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // Conduit declares only what its frontend can answer.
        let mut capabilities = ClientCapabilities::default();
        let offer = self.asks.offer();
        if offer.form || offer.url {
            let mut elicitation = ElicitationCapability::new();
            if offer.form {
                elicitation = elicitation.with_form(FormElicitationCapability::new());
            }
            if offer.url {
                elicitation = elicitation.with_url(UrlElicitationCapability::new());
            }
            capabilities.elicitation = Some(elicitation);
        }
        if self.asks.samples() {
            // Sampling (with tools: the model's tool uses go back to the server, which runs
            // them) is deprecated by SEP-2577 but still part of the protocol Conduit speaks.
            let mut sampling = rmcp::model::SamplingCapability::default();
            sampling.tools = Some(JsonObject::new());
            capabilities.sampling = Some(sampling);
        }
        if self
            .asks
            .asker
            .as_ref()
            .is_some_and(|asker| asker.shows_views())
        {
            let mut views = JsonObject::new();
            views.insert(
                "mimeTypes".into(),
                serde_json::json!([crate::apps::VIEW_MIME]),
            );
            capabilities.extensions = Some([(crate::apps::EXTENSION.to_owned(), views)].into());
        }
        if self.asks.roots.offered() {
            let mut roots = rmcp::model::RootsCapabilities::default();
            roots.list_changed = Some(true);
            capabilities.roots = Some(roots);
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("conduit", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let _asking = Asking::begin(&self.shared);
        // A question the server withdraws, or whose session ends, leaves the user's
        // screen at once (dropping the wait takes it away).
        Ok(tokio::select! {
            answer = self.asks.elicit(request, self.shared.on_this_machine) => answer,
            () = context.ct.cancelled() => ElicitResult::new(ElicitationAction::Cancel),
        })
    }

    // Sampling and roots are deprecated by SEP-2577 in rmcp 3.9.0 but remain in the
    // protocol (issue 14 asks for both): the types are named only here.
    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        let params = serde_json::to_value(&params)
            .map_err(|e| rmcp::ErrorData::invalid_params(e.to_string(), None))?;
        let _asking = Asking::begin(&self.shared);
        // A request the server withdraws, or whose session ends, leaves the screen.
        let answer = tokio::select! {
            answer = self.asks.sample(params) => answer?,
            () = context.ct.cancelled() => {
                return Err(rmcp::ErrorData::internal_error("the request was cancelled", None));
            }
        };
        serde_json::from_value(answer)
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))
    }

    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        if !self.asks.roots.offered() {
            return Err(rmcp::ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "this client offers no roots to this server",
                None,
            ));
        }
        serde_json::from_value(self.asks.roots.to_wire())
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))
    }

    // MCP logging is deprecated from 2026-07-28 (SEP-2577); servers on 2025-11-25 and
    // earlier still send it, and their developers read it in Settings.
    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let level = format!("{:?}", params.level).to_lowercase();
        let data = match &params.data {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let line = match &params.logger {
            Some(logger) => format!("{level} {logger}: {data}"),
            None => format!("{level}: {data}"),
        };
        // Kept longer than shown: secrets are hidden when the lines are read, and one that
        // runs across the cut would no longer be found whole.
        self.shared.log_messages.push_cut(line, RAW_LOG_LINE_BYTES);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // Conduit's requests carry numbers as progress tokens (rmcp's counter): any other
        // token is no call's, and is not kept waiting for one (a server's string token
        // could be as long as its line).
        if !matches!(
            params.progress_token.0,
            rmcp::model::NumberOrString::Number(_)
        ) {
            return;
        }
        // A server's words about its progress go to the window and may wait for a call that
        // never registers: a line of them is plenty.
        let progress = Progress {
            progress: params.progress,
            total: params.total,
            message: params
                .message
                .map(|message| server_words(&message, MAX_PROGRESS_MESSAGE)),
        };
        let sink = {
            let sinks = self.shared.progress.lock();
            let sink = sinks.get(&params.progress_token).cloned();
            if sink.is_none() {
                // Kept under the sinks' lock, so a call registering now cannot miss it.
                let mut early = self.shared.early.lock();
                if early.len() >= MAX_EARLY_TOKENS && !early.contains_key(&params.progress_token) {
                    early.clear();
                }
                let kept = early.entry(params.progress_token).or_default();
                if kept.len() < MAX_EARLY_PER_TOKEN {
                    kept.push(progress.clone());
                }
            }
            sink
        };
        if let Some(sink) = sink {
            sink(progress);
        }
    }

    /// A request Conduit does not know is answered "method not found" without its method
    /// name: rmcp's default echoes the name, which a server can make hundreds of MiB long
    /// (and rmcp logs each such answer). A request of the server's too large to read
    /// reaches here as the spill's stand-in, and is answered "invalid request", saying
    /// which and why.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CustomResult, rmcp::ErrorData> {
        if request.method == crate::spill::UNREADABLE_REQUEST {
            let params = request.params.unwrap_or_default();
            // A server may send this method itself: what it says is cut, as a method name
            // would be in "method not found".
            let said = |key: &str| {
                conduit_core::content::text_start(
                    params.get(key).and_then(|v| v.as_str()).unwrap_or("?"),
                    512,
                )
            };
            let mib = params.get("mib").and_then(|v| v.as_u64()).unwrap_or(0);
            return Err(rmcp::ErrorData::invalid_request(
                format!(
                    "Conduit could not read this request ({}, {mib} MiB) and did not run it: {}",
                    said("method"),
                    said("reason")
                ),
                None,
            ));
        }
        Err(rmcp::ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            "method not found",
            None,
        ))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.shared.tool_changed();
    }

    /// `notifications/elicitation/complete` (2025-11-25; rmcp does not model it): a step
    /// the server sent the user to in the browser is done. Other unknown notifications
    /// are ignored, as rmcp's default does.
    async fn on_custom_notification(
        &self,
        notification: rmcp::model::CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method != "notifications/elicitation/complete" {
            return;
        }
        let id = notification
            .params
            .as_ref()
            .and_then(|params| params.get("elicitationId"))
            .and_then(serde_json::Value::as_str);
        if let Some(id) = id {
            self.shared.elicitation_done(id);
        }
    }
}

/// The HTTP client of one server's connection, on the process's one TLS context. It
/// follows a redirect only within the server's own origin (scheme, host and port): one
/// elsewhere would carry the entry's headers (all but `Authorization`, which reqwest
/// drops) and, on a 307 or 308, the request itself (a tool call's arguments) to a host the
/// user never named. A redirect it refuses is kept in `refused`, for the connection's error.
fn http_client(refused: &RefusedRedirects) -> Result<reqwest::Client, StartError> {
    let refused = refused.clone();
    conduit_net::client_builder()
        .redirect(conduit_net::same_origin_redirects(move |refusal| {
            let refusal = match refusal {
                conduit_net::Refused::Elsewhere(target) => {
                    RefusedRedirect::Elsewhere(target.origin().ascii_serialization())
                }
                conduit_net::Refused::TooMany => RefusedRedirect::TooMany,
            };
            refused.keep(refusal.clone());
            refusal
        }))
        .build()
        .map_err(|e| StartError::plain(format!("its HTTP client could not be built: {e}")))
}

/// A redirect the connection refused to follow; it names only the target's origin (a
/// URL's path and query may hold a token).
#[derive(Debug, Clone, thiserror::Error)]
enum RefusedRedirect {
    #[error(
        "it redirected to another origin ({0}), and a server's redirects are followed only within its own: check the entry's URL"
    )]
    Elsewhere(String),
    #[error("it redirected more than {} times", conduit_net::MAX_REDIRECTS)]
    TooMany,
}

/// The last redirect a connection refused. rmcp's transport error keeps only reqwest's
/// own text ("error following redirect"), not the policy's reason, so the connection
/// reads the reason here when its start, or a request after it, fails.
#[derive(Clone, Default)]
struct RefusedRedirects(Arc<parking_lot::Mutex<Option<RefusedRedirect>>>);

impl RefusedRedirects {
    fn keep(&self, refusal: RefusedRedirect) {
        *self.0.lock() = Some(refusal);
    }

    /// The redirect refused last, once: a request that failed on it takes its reason.
    fn take(&self) -> Option<RefusedRedirect> {
        self.0.lock().take()
    }

    /// The start error with the refused redirect's reason, when the handshake failed on a
    /// redirect (reqwest's text says so) and not for want of sign-in; else `error` as is.
    fn explain(&self, error: StartError) -> StartError {
        match self.take() {
            Some(refusal) if error.sign_in.is_none() && error.reason.contains("redirect") => {
                StartError {
                    reason: refusal.to_string(),
                    ..error
                }
            }
            _ => error,
        }
    }
}

/// Whether a request failed because a redirect was not followed: reqwest's own words
/// ("error following redirect") somewhere in the transport's error. A server's JSON-RPC
/// error is its own text, never this.
fn failed_on_redirect(error: &ServiceError) -> bool {
    let start: &(dyn std::error::Error + 'static) = match error {
        ServiceError::McpError(_) => return false,
        // rmcp's send error does not name its cause as its source: look inside.
        ServiceError::TransportSend(sent) => sent,
        other => other,
    };
    let mut current = Some(start);
    while let Some(error) = current {
        if error.to_string().contains("redirect") {
            return true;
        }
        current = error.source();
    }
    false
}

/// How a session starts in each era: `server/discover` and per-request metadata
/// (2026-07-28), the `initialize` handshake (2025-11-25), or discover first and the
/// handshake for a server that answers it as a legacy server.
fn lifecycle(era: ProtocolEra) -> ClientLifecycleMode {
    match era {
        ProtocolEra::Auto => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        },
        ProtocolEra::Stateless => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        ProtocolEra::Initialize => ClientLifecycleMode::Initialize,
    }
}

/// How much an in-process session buffers each way before the writer waits.
const IN_PROCESS_BUFFER: usize = 1024 * 1024;

/// A server Conduit runs itself (its built-in tools), reached through the same client
/// as any other: the seam where tool sources other than the `mcpServers` file plug in.
pub trait InProcessServer: Send + Sync {
    /// Serves one session on `transport` until the client closes it.
    fn serve(&self, transport: tokio::io::DuplexStream) -> futures::future::BoxFuture<'static, ()>;
}

/// What a session holds besides rmcp's service.
struct Session {
    asks: Asks,
    process: Option<ServerProcess>,
    stderr: StderrTail,
    spill: Arc<Spill>,
    shared: Arc<Shared>,
    ended: CancellationToken,
    call_timeout: Duration,
    secrets: Redactor,
    /// The redirects an HTTP connection refused (none for stdio or in process).
    refused: RefusedRedirects,
}

impl Session {
    /// A session with no process of Conduit's behind it (HTTP, in process).
    fn without_process(
        asks: Asks,
        shared: Arc<Shared>,
        ended: CancellationToken,
        call_timeout: Duration,
        secrets: Redactor,
    ) -> Self {
        Self {
            spill: Arc::new(Spill::new(&asks.server)),
            asks,
            process: None,
            stderr: StderrTail::default(),
            shared,
            ended,
            call_timeout,
            secrets,
            refused: RefusedRedirects::default(),
        }
    }
}

/// Starts a session on `transport` in `era`, within `start_timeout`.
async fn handshake<T>(
    handler: Handler,
    transport: T,
    era: ProtocolEra,
    start_timeout: Duration,
) -> Result<RunningService<RoleClient, Handler>, StartError>
where
    T: rmcp::transport::Transport<RoleClient> + 'static,
{
    tokio::time::timeout(
        start_timeout,
        handler.serve_with_lifecycle(transport, lifecycle(era)),
    )
    .await
    .map_err(|_| StartError::timed_out(start_timeout))?
    .map_err(|e| StartError::handshake(&e))
}

/// What a session over JSON lines on an in-memory stream is started with, besides the
/// stream: see [`Connection::start_over_json_lines`].
struct JsonLinesStart {
    /// The handshake's era: a legacy HTTP+SSE server knows `initialize` only.
    era: ProtocolEra,
    /// Whether the server runs on this machine (its own process, or a loopback URL).
    on_this_machine: bool,
    /// Whether the entry sends its own `Authorization` header.
    own_authorization: bool,
    call_timeout: Duration,
    secrets: Redactor,
    /// The redirects refused on the way (a legacy server's), to explain a failed start.
    refused: RefusedRedirects,
}

/// An HTTP entry's `headers`, their values marked sensitive (kept out of reqwest's Debug).
fn entry_headers(
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<reqwest::header::HeaderMap, StartError> {
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in headers {
        let name = reqwest::header::HeaderName::try_from(name.as_str())
            .map_err(|_| StartError::plain(format!("bad header name {name:?}")))?;
        let mut value = reqwest::header::HeaderValue::try_from(value.as_str())
            .map_err(|_| StartError::plain(format!("bad value for header {name}")))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

/// How reaching a server over the legacy HTTP+SSE transport failed.
enum LegacyStart {
    /// Its URL serves no legacy event stream (refused, another content type, no
    /// `endpoint` event): it may be a Streamable HTTP server.
    NoEventStream(String),
    Failed(StartError),
}

/// Whether a Streamable HTTP handshake failed as a server of the legacy HTTP+SSE
/// transport fails it: its POST answered 400, 404 or 405 (the spec's backward
/// compatibility then tries a GET for the legacy event stream). Read from rmcp's own
/// words for an unexpected answer, which start with the status, not from anything the
/// server wrote (a JSON-RPC error's message, a session that expired).
fn posted_and_refused(error: &rmcp::service::ClientInitializeError) -> bool {
    use rmcp::service::ClientInitializeError as Failed;
    match error {
        Failed::LegacyFallbackFailed { discover, fallback } => {
            posted_and_refused(discover) || posted_and_refused(fallback)
        }
        Failed::TransportError { error, .. } => {
            let said = error.error.to_string();
            ["400", "404", "405"].iter().any(|status| {
                said.starts_with(&format!("unexpected server response: HTTP {status} "))
            })
        }
        _ => false,
    }
}

/// A transport that says when it is gone: rmcp's session task owns the transport and
/// drops it when the session ends for any reason (end of stream, a failed send, a close),
/// so its drop is the moment the connection ended.
struct EndSignal<T> {
    inner: T,
    ended: CancellationToken,
    /// The spill of a pumped (stdio) connection, told which requests await an answer:
    /// it holds only what answers them.
    spill: Option<Arc<Spill>>,
    /// Messages handed to the transport and not yet written ([`MAX_SENDS_IN_FLIGHT`]).
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
    /// Set when the end came because the HTTP server let the session expire.
    session_expired: Arc<SessionExpiry>,
    /// How long one message may wait to be written before the server counts as gone
    /// ([`PIPE_WRITE_DEADLINE`] for a pipe; HTTP has rmcp's request timeouts).
    write_deadline: Option<Duration>,
}

/// Whether the HTTP server let the session expire, and the requests it refused for it
/// (each answered 404, so none ran; one may still fail as closed, when the connection
/// ends before rmcp hands the send's error to the caller).
#[derive(Default)]
struct SessionExpiry {
    expired: std::sync::atomic::AtomicBool,
    refused: parking_lot::Mutex<std::collections::HashSet<rmcp::model::RequestId>>,
}

/// At most this many messages to a server wait to be written. rmcp answers each request a
/// server sends (a ping, an unknown method) in a task of its own that waits for the
/// writer: a server that sends requests and never reads its stdin would pile up answers
/// without end. Past it the server counts as gone, as when its pipe closes.
const MAX_SENDS_IN_FLIGHT: usize = 1024;

/// How long Stop waits for the cancel notification to be written before the call ends.
const CANCEL_NOTICE_PATIENCE: Duration = Duration::from_secs(1);

/// A message to a server's stdin not written within this long means the server stopped
/// reading: its connection ends. Otherwise a call's write (and rmcp's cancel notification
/// after a timeout, which it awaits) would wait for ever, and neither the call's timeout
/// nor Stop would end it. Only a full pipe (64 KiB unread) makes a write wait: a server
/// that blocks its reading for a minute while a large message waits for it (a second
/// call with large arguments, beside a synchronous tool that holds its loop) is taken as
/// gone too, and restarted.
pub(crate) const PIPE_WRITE_DEADLINE: Duration = Duration::from_secs(60);

/// One message waiting to be written; counted from when it is handed over until it is
/// written or dropped.
struct InFlight(Arc<std::sync::atomic::AtomicUsize>);

impl InFlight {
    fn new(count: Arc<std::sync::atomic::AtomicUsize>) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Self(count)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl<T> Drop for EndSignal<T> {
    fn drop(&mut self) {
        self.ended.cancel();
    }
}

impl<T: rmcp::transport::Transport<RoleClient>> rmcp::transport::Transport<RoleClient>
    for EndSignal<T>
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let (Some(spill), rmcp::model::JsonRpcMessage::Request(request)) = (&self.spill, &item) {
            // Noted before it goes out, so no answer can come first.
            let claims = matches!(
                request.request,
                ClientRequest::CallToolRequest(_) | ClientRequest::ReadResourceRequest(_)
            );
            spill.asked(&request.id, claims);
        }
        if self.in_flight.load(std::sync::atomic::Ordering::Acquire) >= MAX_SENDS_IN_FLIGHT {
            if !self.ended.is_cancelled() {
                tracing::warn!(
                    "an MCP server stopped reading: {MAX_SENDS_IN_FLIGHT} messages wait to be written to it; its connection is ended"
                );
            }
            self.ended.cancel();
            return futures::future::Either::Left(std::future::ready(Ok(())));
        }
        let request = match &item {
            rmcp::model::JsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        if self
            .session_expired
            .expired
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            // The session is gone: nothing more goes out under it (a server behind a load
            // balancer may answer 404 only now and then). A request is noted as refused,
            // so when the connection closes it ends as expired, known not to have run.
            if let Some(request) = request {
                self.session_expired.refused.lock().insert(request);
            }
            return futures::future::Either::Left(std::future::ready(Ok(())));
        }
        let waiting = InFlight::new(self.in_flight.clone());
        let sending = self.inner.send(item);
        let ended = self.ended.clone();
        let expired = self.session_expired.clone();
        let deadline = self.write_deadline;
        futures::future::Either::Right(async move {
            let _waiting = waiting;
            let sent = match deadline {
                None => sending.await,
                Some(deadline) => match tokio::time::timeout(deadline, sending).await {
                    Ok(sent) => sent,
                    Err(_) => {
                        if !ended.is_cancelled() {
                            tracing::warn!(
                                "an MCP server stopped reading: a message waited {deadline:?} to be written to it; its connection is ended"
                            );
                        }
                        // The message is dropped with the connection, which ends it: the
                        // calls waiting on it fail as closed.
                        ended.cancel();
                        return Ok(());
                    }
                },
            };
            // Every later request would meet the same 404: the connection ends, and the
            // runtime connects again (a new session, its tools listed before any runs).
            if let Err(error) = &sent
                && session_expired(error)
            {
                tracing::info!("an HTTP MCP server let its session expire; connecting again");
                if let Some(request) = request {
                    expired.refused.lock().insert(request);
                }
                expired
                    .expired
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                ended.cancel();
            }
            sent
        })
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        let received = self.inner.receive().await;
        match (&self.spill, &received) {
            (_, None) => self.ended.cancel(),
            (Some(spill), Some(rmcp::model::JsonRpcMessage::Response(response))) => {
                spill.answered(&response.id);
            }
            (Some(spill), Some(rmcp::model::JsonRpcMessage::Error(error))) => {
                if let Some(id) = &error.id {
                    spill.answered(id);
                }
            }
            _ => {}
        }
        received
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// The transport of a stdio server's pipes. Large messages reach rmcp through the spill
/// pump (see `spill`), so a 100 MB tool output is parsed once; rmcp's own 16 MiB cap is
/// raised for messages that are large without one huge string.
fn pumped<R, W>(
    server: &str,
    stdout: R,
    stdin: W,
    ended: &CancellationToken,
) -> (
    Arc<Spill>,
    EndSignal<AsyncRwTransport<RoleClient, tokio::io::DuplexStream, W>>,
)
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let spill = swept_spill(server);
    let (pumped, pump_end) = tokio::io::duplex(64 * 1024);
    conduit_core::task::spawn(spill::pump(
        stdout,
        pump_end,
        spill.clone(),
        MAX_STDIO_MESSAGE,
    ));
    let transport = EndSignal {
        inner: AsyncRwTransport::new(pumped, stdin).with_max_line_length(MAX_STDIO_MESSAGE),
        ended: ended.clone(),
        spill: Some(spill.clone()),
        in_flight: Arc::default(),
        session_expired: Arc::default(),
        write_deadline: Some(PIPE_WRITE_DEADLINE),
    };
    (spill, transport)
}

/// A connection's spill, swept while it lives: answers to calls nobody waits for any
/// more are let go even when no other call comes.
fn swept_spill(server: &str) -> Arc<Spill> {
    let spill = Arc::new(Spill::new(server));
    let weak = Arc::downgrade(&spill);
    conduit_core::task::spawn(async move {
        loop {
            tokio::time::sleep(spill::UNCLAIMED / 2).await;
            match weak.upgrade() {
                Some(spill) => spill.sweep(spill::UNCLAIMED),
                None => return,
            }
        }
    });
    spill
}

/// A live session with one server.
pub struct Connection {
    peer: Peer<RoleClient>,
    asks: Asks,
    /// Cancelled when the session has ended.
    ended: CancellationToken,
    service: Mutex<Option<RunningService<RoleClient, Handler>>>,
    shared: Arc<Shared>,
    process: tokio::sync::Mutex<Option<ServerProcess>>,
    stderr: StderrTail,
    spill: Arc<Spill>,
    pub details: ServerDetails,
    call_timeout: Duration,
    secrets: Redactor,
    /// The redirects the connection refused, to say why a request failed on one.
    refused: RefusedRedirects,
    /// How long the last tool listing may be treated as fresh (its cache hint).
    tools_fresh_for: Mutex<Option<Duration>>,
    /// The longest one tool call may take on the server's side, all its rounds together
    /// ([`MAX_CALL_TIME`], or the call timeout where that is longer).
    max_call_time: Duration,
}

impl Connection {
    /// Starts (stdio) or reaches (HTTP) the server and completes the handshake within
    /// `start_timeout`.
    ///
    /// The error carries no secret of the entry: `${VAR}` values, header values and the
    /// URL's query and user info are hidden in its reason and stderr tail.
    pub async fn connect(
        spec: &ServerSpec,
        start_timeout: Duration,
        asks: Asks,
    ) -> Result<Self, StartError> {
        crate::redact::keep_out_of_logs(&spec.secrets);
        let http = matches!(spec.transport, Transport::Http { .. });
        // An entry that says `"type": "sse"` is reached over the legacy transport first.
        if http && spec.legacy_sse {
            match Self::start_legacy_sse(spec, start_timeout, asks.clone()).await {
                Ok(connection) => return Ok(connection),
                Err(LegacyStart::Failed(err)) => return Err(Self::said_safely(spec, err)),
                Err(LegacyStart::NoEventStream(why)) => {
                    tracing::info!(reason = %hidden_and_cut(&spec.secrets, &why), "the server's URL serves no legacy event stream; trying Streamable HTTP");
                }
            }
        }
        let started = match Self::start(spec, start_timeout, asks.clone()).await {
            // A legacy server that answers an unknown method oddly instead of with an
            // error: once more, with the handshake it knows.
            Err(err) if err.confused_by_discover && spec.era == ProtocolEra::Auto => {
                tracing::info!(reason = %hidden_and_cut(&spec.secrets, &err.reason), "the server did not understand server/discover; trying initialize");
                let legacy = ServerSpec {
                    era: ProtocolEra::Initialize,
                    ..spec.clone()
                };
                Self::start(&legacy, start_timeout, asks).await
            }
            // A server of the legacy HTTP+SSE transport refuses the first POST: its GET
            // stream is tried; if it serves none either, the first failure is what is said.
            Err(err) if http && !spec.legacy_sse && err.legacy_hint => {
                match Self::start_legacy_sse(spec, start_timeout, asks).await {
                    Ok(connection) => Ok(connection),
                    Err(LegacyStart::Failed(legacy)) => Err(legacy),
                    Err(LegacyStart::NoEventStream(_)) => Err(err),
                }
            }
            started => started,
        };
        started.map_err(|err| Self::said_safely(spec, err))
    }

    /// A start's error as it may be shown: the reason holds what the server answered
    /// (rmcp's errors quote it whole), so it is cut as a failed call's error is, with the
    /// entry's secrets hidden: it is logged, kept and sent to each window.
    fn said_safely(spec: &ServerSpec, err: StartError) -> StartError {
        StartError {
            reason: hidden_and_cut(&spec.secrets, &err.reason),
            exit_code: err.exit_code,
            stderr_tail: spec.secrets.lines(err.stderr_tail),
            confused_by_discover: false,
            sign_in: err.sign_in,
            legacy_hint: false,
            worth_retrying: err.worth_retrying,
        }
    }

    /// Reaches an HTTP entry's server over MCP's legacy HTTP+SSE transport (2024-11-05):
    /// its event stream at the URL, messages posted where the stream's `endpoint` event
    /// says (on the same origin only), the handshake with `initialize`. No sign-in: a
    /// server that wants one is reached over Streamable HTTP.
    async fn start_legacy_sse(
        spec: &ServerSpec,
        start_timeout: Duration,
        asks: Asks,
    ) -> Result<Self, LegacyStart> {
        let Transport::Http { url, headers } = &spec.transport else {
            return Err(LegacyStart::NoEventStream("not an HTTP entry".into()));
        };
        let deadline = tokio::time::Instant::now() + start_timeout;
        let parsed = reqwest::Url::parse(url).map_err(|e| {
            LegacyStart::Failed(StartError::plain(format!("its url does not parse: {e}")))
        })?;
        let refused = RefusedRedirects::default();
        let client = http_client(&refused).map_err(LegacyStart::Failed)?;
        let headers = entry_headers(headers).map_err(LegacyStart::Failed)?;
        // No event stream in time is no legacy stream: the Streamable HTTP attempt that
        // may follow has its own start time.
        let opened = tokio::time::timeout_at(deadline, legacy_sse::open(client, &parsed, headers))
            .await
            .map_err(|_| {
                LegacyStart::NoEventStream(format!("it named no endpoint within {start_timeout:?}"))
            })?;
        let stream = match opened {
            Ok(stream) => stream,
            Err(
                why @ (LegacySseError::Refused(_)
                | LegacySseError::NotEventStream(_)
                | LegacySseError::NoEndpoint
                | LegacySseError::EndpointLate(_)),
            ) => return Err(LegacyStart::NoEventStream(why.to_string())),
            Err(why) => {
                return Err(LegacyStart::Failed(
                    refused.explain(StartError::plain(why.to_string())),
                ));
            }
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let start = JsonLinesStart {
            // The transport of the 2024-11-05 era: its servers know `initialize` only.
            era: ProtocolEra::Initialize,
            on_this_machine: crate::config::url_on_this_machine(url),
            own_authorization: spec.sends_its_own_authorization(),
            call_timeout: spec.timeout.unwrap_or(DEFAULT_CALL_TIMEOUT),
            secrets: spec.secrets.clone(),
            refused,
        };
        // JSON lines, as to a server in this process: one start for both.
        Self::start_over_json_lines(stream, asks, start, left)
            .await
            .map_err(LegacyStart::Failed)
    }

    /// Starts a session with a server Conduit runs itself, over an in-memory transport:
    /// the same client, handshake and calls as any other server.
    pub async fn connect_in_process(
        server: &dyn InProcessServer,
        start_timeout: Duration,
        asks: Asks,
    ) -> Result<Self, StartError> {
        let (client_end, server_end) = tokio::io::duplex(IN_PROCESS_BUFFER);
        tokio::spawn(server.serve(server_end));
        let start = JsonLinesStart {
            era: ProtocolEra::Auto,
            on_this_machine: true,
            own_authorization: false,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            secrets: Redactor::default(),
            refused: RefusedRedirects::default(),
        };
        Self::start_over_json_lines(client_end, asks, start, start_timeout).await
    }

    /// Starts a session over JSON lines on an in-memory stream: to a server in this
    /// process, and to a legacy HTTP+SSE server through its bridge. One transport type
    /// and one start for both, so the binaries hold one copy of rmcp's session loop and
    /// of the start's future for them.
    async fn start_over_json_lines(
        stream: tokio::io::DuplexStream,
        asks: Asks,
        start: JsonLinesStart,
        start_timeout: Duration,
    ) -> Result<Self, StartError> {
        let (shared, handler, ended) =
            Handler::for_session(&asks, start.on_this_machine, start.own_authorization);
        let (read, write) = tokio::io::split(stream);
        let transport = EndSignal {
            inner: AsyncRwTransport::new(read, write).with_max_line_length(MAX_STDIO_MESSAGE),
            ended: ended.clone(),
            spill: None,
            in_flight: Arc::default(),
            session_expired: Arc::default(),
            write_deadline: Some(PIPE_WRITE_DEADLINE),
        };
        let service = handshake(handler, transport, start.era, start_timeout)
            .await
            .map_err(|e| start.refused.explain(e))?;
        let session =
            Session::without_process(asks, shared, ended, start.call_timeout, start.secrets);
        Ok(Self::ready(
            service,
            Session {
                refused: start.refused,
                ..session
            },
        )
        .await)
    }

    async fn start(
        spec: &ServerSpec,
        start_timeout: Duration,
        asks: Asks,
    ) -> Result<Self, StartError> {
        let on_this_machine = match &spec.transport {
            Transport::Stdio { .. } => true,
            Transport::Http { url, .. } => crate::config::url_on_this_machine(url.as_str()),
        };
        let (shared, handler, ended) =
            Handler::for_session(&asks, on_this_machine, spec.sends_its_own_authorization());
        let call_timeout = spec.timeout.unwrap_or(DEFAULT_CALL_TIMEOUT);
        match &spec.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                // Found as the user's shell finds it, also when Conduit started from a
                // desktop menu: the shell is asked off the async workers, once (again
                // after a minute when it was too slow; each asking may take up to 6 s,
                // and every server starting meanwhile waits for it).
                let path = tokio::task::spawn_blocking(crate::shell_path::login_path)
                    .await
                    .unwrap_or_else(|_| std::env::var_os("PATH").unwrap_or_default());
                let (mut process, stdout, stdin) =
                    process::spawn(command, args, env, cwd.as_ref(), &spec.secrets, &path)
                        .map_err(|e| {
                            StartError::plain(format!(
                                "could not start {command:?}: {}",
                                spawn_message(command, &e)
                            ))
                        })?;
                let stderr = process.stderr.clone();
                let (spill, transport) = pumped(&asks.server, stdout, stdin, &ended);
                let started = tokio::time::timeout(
                    start_timeout,
                    handler.serve_with_lifecycle(transport, lifecycle(spec.era)),
                )
                .await;
                let mut confused_by_discover = false;
                let mut closed_in_handshake = false;
                let mut timed_out = false;
                let reason = match started {
                    Ok(Ok(service)) => {
                        return Ok(Self::ready(
                            service,
                            Session {
                                asks: asks.clone(),
                                process: Some(process),
                                stderr,
                                spill,
                                shared,
                                ended,
                                call_timeout,
                                secrets: spec.secrets.clone(),
                                refused: RefusedRedirects::default(),
                            },
                        )
                        .await);
                    }
                    Ok(Err(err)) => {
                        let said = StartError::handshake(&err);
                        confused_by_discover = said.confused_by_discover;
                        closed_in_handshake = matches!(
                            err,
                            rmcp::service::ClientInitializeError::ConnectionClosed(_)
                                | rmcp::service::ClientInitializeError::TransportError { .. }
                        );
                        said.reason
                    }
                    Err(_) => {
                        timed_out = true;
                        StartError::timed_out(start_timeout).reason
                    }
                };
                // Give a crashing server a moment to finish writing stderr and exit.
                tokio::time::sleep(Duration::from_millis(200)).await;
                let exit = process.exit_status();
                process.shutdown(Duration::ZERO).await;
                // A legacy server that ended at the probe says it wanted `initialize`
                // (rmcp's servers: "expected initialize request"); one that ended at once
                // for its own reasons (an import error, a missing key) is not started twice.
                let wanted_initialize = exit.is_none()
                    || stderr
                        .lines()
                        .iter()
                        .any(|line| line.to_ascii_lowercase().contains("initializ"));
                // When it exited, its exit and stderr say why; rmcp's broken pipe does not.
                let reason = match exit {
                    Some(status) => format!("it exited ({status}) before it was ready"),
                    None => reason,
                };
                Err(StartError {
                    reason,
                    exit_code: exit.and_then(|s| s.code()),
                    stderr_tail: stderr.lines(),
                    // A server that exited after a bad answer was not merely confused;
                    // one that exited (or closed its output) without answering may be a
                    // legacy server that ends at any first message but `initialize` (older
                    // rmcp servers do): the spec's backward compatibility starts it again
                    // with `initialize` (only when the era was found out, `connect`).
                    confused_by_discover: (confused_by_discover && exit.is_none())
                        || (closed_in_handshake && wanted_initialize),
                    sign_in: None,
                    legacy_hint: false,
                    // Still running when its time was up: slow, not broken.
                    worth_retrying: timed_out && exit.is_none(),
                })
            }
            Transport::Http { url, headers } => {
                let custom: HashMap<_, _> = entry_headers(headers)?
                    .into_iter()
                    .filter_map(|(name, value)| Some((name?, value)))
                    .collect();
                // The same cap as stdio: rmcp's default (16 MiB) would drop larger outputs.
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom)
                    .max_sse_event_size(MAX_STDIO_MESSAGE)
                    // rmcp would renew a session the server let expire (a 404) and send
                    // the call again at once; what answers may be another server under the
                    // URL (a deploy), so the connection ends instead and the runtime
                    // connects again, listing the tools before any runs.
                    .reinit_on_expired_session(false);
                // A header the user wrote is their way in; otherwise OAuth, where tokens
                // can be kept: sent when stored (and refreshed), and a 401 asks for them.
                let static_auth = spec.sends_its_own_authorization();
                let listen_stream = ListenStream::default();
                let refused = RefusedRedirects::default();
                // Large events go through the spill, as a stdio server's large lines do.
                let spill = swept_spill(&asks.server);
                // Without stored tokens the plain client does what rmcp's auth client would
                // (the request goes out unauthenticated and a 401 asks for sign-in),
                // without the two HTTP clients rmcp's authorization manager builds at once.
                // Reading the sign-in (a lock other Conduit processes may hold, the
                // server's metadata) counts against the start's time like the handshake.
                let sign_in_late = || {
                    StartError::plain(format!(
                        "its sign-in could not be read within {start_timeout:?}"
                    ))
                };
                let deadline = tokio::time::Instant::now() + start_timeout;
                let vault = match asks.tokens.clone().filter(|_| !static_auth) {
                    Some(vault) => {
                        let signed_in = oauth::is_signed_in(url, &*vault);
                        match tokio::time::timeout_at(deadline, signed_in).await {
                            Ok(Ok(true)) => Some(vault),
                            Ok(Ok(false)) => None,
                            Ok(Err(e)) => {
                                return Err(StartError::plain(format!(
                                    "its sign-in could not be used: {e}"
                                )));
                            }
                            Err(_) => return Err(sign_in_late()),
                        }
                    }
                    None => None,
                };
                let service = match vault {
                    Some(vault) => {
                        let (manager, _signed_in) = tokio::time::timeout_at(
                            deadline,
                            oauth::manager(url, &spec.oauth, vault),
                        )
                        .await
                        .map_err(|_| sign_in_late())?
                        .map_err(|e| {
                            StartError::plain(format!("its sign-in could not be used: {e}"))
                        })?;
                        let client = WatchedClient::new(
                            MaybeSignedIn::SignedIn(AuthClient::new(
                                http_client(&refused)?,
                                manager,
                            )),
                            listen_stream.clone(),
                            spill.clone(),
                        );
                        let transport = EndSignal {
                            inner: StreamableHttpClientTransport::with_client(client, config),
                            ended: ended.clone(),
                            spill: Some(spill.clone()),
                            in_flight: Arc::default(),
                            session_expired: shared.session_expired.clone(),
                            write_deadline: None,
                        };
                        handshake(handler, transport, spec.era, start_timeout)
                            .await
                            .map_err(|e| refused.explain(e))?
                    }
                    None => {
                        let client = WatchedClient::new(
                            MaybeSignedIn::Plain(http_client(&refused)?),
                            listen_stream.clone(),
                            spill.clone(),
                        );
                        let transport = EndSignal {
                            inner: StreamableHttpClientTransport::with_client(client, config),
                            ended: ended.clone(),
                            spill: Some(spill.clone()),
                            in_flight: Arc::default(),
                            session_expired: shared.session_expired.clone(),
                            write_deadline: None,
                        };
                        match handshake(handler, transport, spec.era, start_timeout).await {
                            Ok(service) => service,
                            // Signing in would not help: the entry's own header is refused.
                            Err(err) if err.sign_in.is_some() && static_auth => {
                                return Err(StartError::plain(
                                    "it refused the Authorization header of its entry".into(),
                                ));
                            }
                            Err(err) => return Err(refused.explain(err)),
                        }
                    }
                };
                // What the server sends outside any request goes on its GET stream; a
                // first request before that stream is open loses it (listen_stream.rs).
                if !listen_stream.answered(LISTEN_STREAM_WAIT).await {
                    tracing::debug!(%url, "the server did not answer its GET stream in time; going on without it");
                }
                Ok(Self::ready(
                    service,
                    Session {
                        refused,
                        spill,
                        ..Session::without_process(
                            asks,
                            shared,
                            ended,
                            call_timeout,
                            spec.secrets.clone(),
                        )
                    },
                )
                .await)
            }
        }
    }

    async fn ready(service: RunningService<RoleClient, Handler>, session: Session) -> Self {
        // rmcp's response cache is off. It keeps a page per cursor for the server's
        // `ttlMs` (up to a day): a server naming the same cursor again made a listing
        // loop over the cached page at memory speed. It also hands back a resource read
        // with the spill's markers already claimed, and keeps up to 512 answers of any
        // size. Conduit asks again when a hint runs out on its own (`tools_fresh_for`)
        // and keeps the old list when asking fails, so nothing is lost.
        service
            .peer()
            .set_response_cache_config(ClientCacheConfig::disabled())
            .await;
        let info = service.peer_info();
        // A 2026-07-28 server sends list changes only on a `subscriptions/listen`
        // stream the client opens (older ones send them unasked, to the handler).
        let listens = info.as_ref().is_some_and(|info| {
            !info.protocol_version.has_initialize()
                && info
                    .capabilities
                    .tools
                    .as_ref()
                    .is_some_and(|tools| tools.list_changed == Some(true))
        });
        if listens {
            conduit_core::task::spawn(listen_for_tool_changes(
                service.peer().clone(),
                session.shared.clone(),
                session.ended.clone(),
            ));
        }
        let details = service
            .peer_info()
            // The server's own words, kept in its state and sent to the window with every
            // change of it: each cut to what a real one needs.
            .map(|info| ServerDetails {
                name: info
                    .server_info
                    .as_ref()
                    .map(|i| server_words(&i.name, MAX_SERVER_NAME)),
                version: info
                    .server_info
                    .as_ref()
                    .map(|i| server_words(&i.version, MAX_SERVER_NAME)),
                protocol_version: server_words(&info.protocol_version.to_string(), MAX_SERVER_NAME),
                instructions: info
                    .instructions
                    .as_deref()
                    .map(|text| server_words(text, MAX_INSTRUCTIONS)),
                tools: info.capabilities.tools.is_some(),
                resources: info.capabilities.resources.is_some(),
                prompts: info.capabilities.prompts.is_some(),
                completions: info.capabilities.completions.is_some(),
            })
            .unwrap_or_default();
        Self {
            peer: service.peer().clone(),
            asks: session.asks,
            ended: session.ended,
            service: Mutex::new(Some(service)),
            shared: session.shared,
            process: tokio::sync::Mutex::new(session.process),
            stderr: session.stderr,
            spill: session.spill,
            details,
            call_timeout: session.call_timeout,
            max_call_time: MAX_CALL_TIME.max(session.call_timeout),
            secrets: session.secrets,
            refused: session.refused,
            tools_fresh_for: Mutex::new(None),
        }
    }

    /// The last lines the server wrote to stderr, its secrets hidden.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.secrets.lines(self.stderr.lines())
    }

    /// The last log messages the server sent on this session, its secrets and any bearer
    /// token hidden (a server logging the request it got would show the user's sign-in),
    /// each cut after the hiding.
    pub fn log_messages(&self) -> Vec<String> {
        self.secrets
            .lines(self.shared.log_messages.lines())
            .into_iter()
            .map(|line| {
                process::cut_line(
                    crate::redact::without_bearer_tokens(&line),
                    process::SHOWN_LINE_BYTES,
                )
            })
            .collect()
    }

    /// A server's `text` with its secrets hidden, cut to [`MAX_SERVER_ERROR`]. Secrets are
    /// hidden in a start four times as long, so a key that runs across the cut is hidden
    /// whole before it is cut.
    fn hidden_and_cut(&self, text: &str) -> String {
        hidden_and_cut(&self.secrets, text)
    }

    /// An error as it may leave the crate: no secret of this server in its text. A
    /// request that failed on a redirect the connection refused says where it went and
    /// why (rmcp's error says only that sending failed or the connection closed).
    fn hide(&self, error: ServiceError) -> McpError {
        if failed_on_redirect(&error)
            && let Some(refusal) = self.refused.take()
        {
            return McpError::Other(self.secrets.text(&refusal.to_string()));
        }
        match McpError::from(error) {
            McpError::SignIn(need) => {
                if !self.shared.own_authorization {
                    *self.shared.sign_in_refusal.lock() = Some(need.clone());
                    self.shared.sign_in_refused.notify_one();
                }
                McpError::SignIn(need)
            }
            McpError::Server(message) => match self.spill.own_error(&message) {
                // The pump's own error in place of an answer it dropped: Conduit's words.
                Some(reason) => McpError::Other(reason.to_owned()),
                None => McpError::Server(self.hidden_and_cut(&message)),
            },
            McpError::Other(message) => McpError::Other(self.hidden_and_cut(&message)),
            McpError::Send(message) => McpError::Send(self.hidden_and_cut(&message)),
            McpError::Unreachable(message) => McpError::Unreachable(self.hidden_and_cut(&message)),
            McpError::UrlRequired { message, steps } => McpError::UrlRequired {
                message: self.hidden_and_cut(&message),
                steps,
            },
            other => other,
        }
    }

    pub fn is_closed(&self) -> bool {
        self.ended.is_cancelled() || self.peer.is_transport_closed()
    }

    /// Waits until a request on this session is refused for want of sign-in (401: its
    /// tokens no longer do) or of scope (403 `insufficient_scope`), and gives what the
    /// server said. Never for an entry that sends its own `Authorization` header.
    pub async fn sign_in_refused(&self) -> SignInNeeded {
        loop {
            if let Some(need) = self.shared.sign_in_refusal.lock().take() {
                return need;
            }
            self.shared.sign_in_refused.notified().await;
        }
    }

    /// Resolves once the session has ended: the server exited or closed the connection,
    /// or it was shut down.
    pub async fn ended(&self) {
        self.ended.cancelled().await;
    }

    /// Resolves when the server says its tools changed.
    pub async fn tools_changed(&self) {
        self.shared.tools_changed.notified().await;
    }

    /// Whether the connection has ended (the server exited, closed its output, or its
    /// session expired): nothing sent on it reaches the server.
    pub fn has_ended(&self) -> bool {
        self.ended.is_cancelled()
    }

    /// Whether the session ended because the HTTP server let it expire (a 404): nothing
    /// failed, so the runtime connects again at once.
    pub fn ended_by_expiry(&self) -> bool {
        self.shared
            .session_expired
            .expired
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many times the server has said its tools changed: a tool listed when it was
    /// less may not be what the server has now.
    pub fn tool_changes(&self) -> u64 {
        self.shared
            .tool_changes
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Counts a change of the server's tools that Conduit found itself (a listing asked
    /// for when the cache hint ran out differs from the last), as a `list_changed` notice
    /// counts, without asking for another listing: a tool taken for a turn before it is
    /// checked against the server's list before it is called. The count after it.
    pub fn count_tool_change(&self) -> u64 {
        self.shared
            .tool_changes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1
    }

    /// Makes the next [`Connection::tools_changed`] resolve at once: the list is stale.
    pub fn mark_tools_changed(&self) {
        self.shared.tools_changed.notify_one();
    }

    /// Takes a change said and not yet listed, if any, without waiting: the listing about
    /// to start includes it.
    pub fn take_tools_changed(&self) {
        use futures::FutureExt;
        let _ = self.shared.tools_changed.notified().now_or_never();
    }

    /// Every tool, page by page; the shortest `ttlMs` cache hint of the pages (SEP-2549)
    /// says when the list is to be asked for again (see [`Connection::tools_fresh_for`]).
    pub async fn tools(&self) -> Result<Vec<Tool>, McpError> {
        if !self.details.tools {
            return Ok(Vec::new());
        }
        let peer = &self.peer;
        // A tool list past the caps fails whole ([`Listed::Tools`] is never cut).
        let Listing {
            items: tools,
            fresh_ms,
            ..
        } = self
            .paged(Listed::Tools, None, |params| async move {
                let page = peer.list_tools(Some(params)).await?;
                Ok((page.tools, page.next_cursor, page.ttl_ms))
            })
            .await?;
        let mut names = std::collections::HashSet::with_capacity(tools.len());
        if let Some(twice) = tools.iter().find(|tool| !names.insert(tool.name.as_ref())) {
            return Err(ListError::NamedTwice {
                server: self.asks.server.clone(),
                what: "tools",
                name: server_words(&twice.name, MAX_SERVER_NAME),
            }
            .into());
        }
        *self.tools_fresh_for.lock() = fresh_ms.map(Duration::from_millis);
        Ok(tools)
    }

    /// A whole paged list through [`Pager`], one page after another: a listing stops
    /// with an error when the server repeats a cursor or its list outgrows the caps.
    /// (rmcp's `list_all_*` would follow the server's cursors without end.)
    async fn paged<T, F, Fut>(
        &self,
        listed: Listed,
        deadline: Option<ListDeadline>,
        mut page: F,
    ) -> Result<Listing<T>, McpError>
    where
        T: serde::Serialize,
        F: FnMut(PaginatedRequestParams) -> Fut,
        Fut: Future<Output = Result<(Vec<T>, Option<String>, Option<u64>), ServiceError>>,
    {
        let mut pager = Pager::new(&self.asks.server, listed);
        let mut cursor = None;
        loop {
            let asked = self.answered(page(PaginatedRequestParams::default().with_cursor(cursor)));
            let answered = match deadline {
                Some(deadline) => match tokio::time::timeout_at(deadline.at, asked).await {
                    Ok(answered) => answered,
                    Err(_) => {
                        pager.out_of_time(deadline.patience)?;
                        return Ok(pager.finish());
                    }
                },
                None => asked.await,
            };
            let (items, next, ttl_ms) = answered?;
            match pager.take(items, next, ttl_ms)? {
                Some(next) => cursor = Some(next),
                None => return Ok(pager.finish()),
            }
        }
    }

    /// How long the last tool listing may be treated as fresh: the server's cache hint
    /// (`ttlMs`); `None` when it gave none (then only a change notification makes Conduit
    /// list again).
    pub fn tools_fresh_for(&self) -> Option<Duration> {
        *self.tools_fresh_for.lock()
    }

    /// The server's resources; a list past the caps, or still coming at `deadline`, is
    /// cut (see [`Listing::cut`]).
    pub async fn resources(
        &self,
        deadline: Option<ListDeadline>,
    ) -> Result<Listing<Resource>, McpError> {
        if !self.details.resources {
            return Ok(Listing::default());
        }
        let peer = &self.peer;
        self.paged(Listed::Resources, deadline, |params| async move {
            let page = peer.list_resources(Some(params)).await?;
            Ok((page.resources, page.next_cursor, page.ttl_ms))
        })
        .await
    }

    /// The server's resource templates; cut as [`Connection::resources`] are.
    pub async fn resource_templates(
        &self,
        deadline: Option<ListDeadline>,
    ) -> Result<Listing<ResourceTemplate>, McpError> {
        if !self.details.resources {
            return Ok(Listing::default());
        }
        let peer = &self.peer;
        self.paged(Listed::ResourceTemplates, deadline, |params| async move {
            let page = peer.list_resource_templates(Some(params)).await?;
            Ok((page.resource_templates, page.next_cursor, page.ttl_ms))
        })
        .await
    }

    /// Reads a resource; a 2026-07-28 server may ask the user (or the user's model) first,
    /// in rounds as a tool call's (a view's page behind a sign-in question).
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, McpError> {
        let answer = self
            .in_rounds(&|state, responses| {
                let mut params = ReadResourceRequestParams::new(uri.to_owned());
                params.request_state = state;
                params.input_responses = responses;
                ClientRequest::ReadResourceRequest(rmcp::model::ReadResourceRequest::new(params))
            })
            .await?;
        let ServerResult::ReadResourceResult(mut result) = answer else {
            return Err(McpError::Other(
                "the server answered resources/read with something else".into(),
            ));
        };
        if self.spill.holds_any() || !self.secrets.is_empty() {
            // Claiming reads the held strings back from disk: not on an async worker.
            let spill = self.spill.clone();
            let secrets = self.secrets.clone();
            result = tokio::task::spawn_blocking(move || {
                spill.claim_read_result(&mut result);
                secrets.hide_in_read(&mut result);
                result
            })
            .await
            .map_err(|e| McpError::Other(format!("restoring a large result failed: {e}")))?;
        }
        Ok(result)
    }

    /// The server's prompts; cut as [`Connection::resources`] are.
    pub async fn prompts(
        &self,
        deadline: Option<ListDeadline>,
    ) -> Result<Listing<Prompt>, McpError> {
        if !self.details.prompts {
            return Ok(Listing::default());
        }
        let peer = &self.peer;
        self.paged(Listed::Prompts, deadline, |params| async move {
            let page = peer.list_prompts(Some(params)).await?;
            Ok((page.prompts, page.next_cursor, page.ttl_ms))
        })
        .await
    }

    /// The server's suggestions for an argument of a resource template or a prompt being
    /// typed (`completion/complete`); none when the server offers no completion.
    pub async fn complete(
        &self,
        target: crate::mention::Completed<'_>,
        argument: &str,
        value: &str,
    ) -> Result<Vec<String>, McpError> {
        if !self.details.completions {
            return Ok(Vec::new());
        }
        let reference = match target {
            crate::mention::Completed::Template(uri_template) => {
                rmcp::model::Reference::for_resource(uri_template)
            }
            crate::mention::Completed::Prompt(name) => rmcp::model::Reference::for_prompt(name),
        };
        let request = rmcp::model::CompleteRequestParams::new(
            reference,
            rmcp::model::ArgumentInfo::new(argument, value),
        );
        self.answered(self.peer.complete(request))
            .await
            .map(|result| offered_completions(result.completion.values))
    }

    pub async fn prompt(
        &self,
        name: &str,
        arguments: JsonObject,
    ) -> Result<GetPromptResult, McpError> {
        // A 2026-07-28 server may ask the user first, in rounds as a tool call's.
        let answer = self
            .in_rounds(&|state, responses| {
                let mut params =
                    GetPromptRequestParams::new(name.to_owned()).with_arguments(arguments.clone());
                params.request_state = state;
                params.input_responses = responses;
                ClientRequest::GetPromptRequest(rmcp::model::GetPromptRequest::new(params))
            })
            .await?;
        match answer {
            ServerResult::GetPromptResult(result) => Ok(result),
            _ => Err(McpError::Other(
                "the server answered prompts/get with something else".into(),
            )),
        }
    }

    /// A request that a 2026-07-28 server may answer with `input_required` rounds (a
    /// resource read, a prompt): `request` makes one round's request from the state and
    /// the answers the last round asked for, and the server's final answer is given back.
    /// The rounds together get at most [`MAX_CALL_TIME`] of the server's time, as a tool
    /// call's do. A server that needs the user on its web pages first (-32042) is asked
    /// again once they are done, as a tool call's server is ([`Connection::finish_url_steps`]).
    /// (Not generic: one copy serves every kind of request.)
    async fn in_rounds(
        &self,
        request: &(
             dyn Fn(Option<String>, Option<rmcp::model::InputResponses>) -> ClientRequest + Sync
         ),
    ) -> Result<ServerResult, McpError> {
        let mut budget = CallBudget::new(self.max_call_time);
        let mut state_only_rounds = 0u32;
        let (mut state, mut responses) = (None, None);
        // Nothing stops a read or a prompt but the connection's end and the caps.
        let not_stopped = CancellationToken::new();
        let mut asking_rounds = 0u32;
        let mut url_steps = UrlStepsOfCall::new(Unrun::Request);
        // Nobody watches a read's or a prompt's progress: the page the user was asked to
        // open is what they wait on.
        let unwatched: ProgressSink = Arc::new(|_| {});
        loop {
            if budget.left().is_none() {
                return Err(McpError::Timeout(self.max_call_time));
            }
            let round = request(state.take(), responses.take());
            let answer = match self.answered(self.peer.send_request(round)).await {
                Err(McpError::UrlRequired { message, steps }) => {
                    self.finish_url_steps(
                        &message,
                        steps,
                        &mut url_steps,
                        &unwatched,
                        &mut budget,
                        &not_stopped,
                    )
                    .await?;
                    continue;
                }
                answer => answer?,
            };
            match answer {
                ServerResult::InputRequiredResult(asked) => {
                    // Every round counts here: nothing but the caps stops a read or a
                    // prompt (no Stop reaches it), so a server only handing its state
                    // back gets 16 rounds, not the call's half hour.
                    count_asking_round(&mut asking_rounds, true)?;
                    (state, responses) = self
                        .answer_round(asked, &mut state_only_rounds, &mut budget, &not_stopped)
                        .await?;
                }
                answer => return Ok(answer),
            }
        }
    }

    /// A request other than a tool call (a page of a list, a resource read, a prompt, a
    /// completion), answered within the server's call timeout: one that never answers
    /// must not hold a turn, a view or the window.
    async fn answered<T>(
        &self,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, McpError> {
        match tokio::time::timeout(self.call_timeout, request).await {
            Ok(answer) => answer.map_err(|e| self.hide(e)),
            Err(_) => Err(McpError::Timeout(self.call_timeout)),
        }
    }

    /// Calls a tool. The timeout restarts with each progress notification, but the call's
    /// rounds together get at most [`MAX_CALL_TIME`] of the server's time (the user's time
    /// answering its questions does not count); a timeout or `cancel` sends
    /// `notifications/cancelled`. A server that dies fails the call at once.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: JsonObject,
        progress: ProgressSink,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, McpError> {
        let mut params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        let mut state_only_rounds = 0u32;
        let mut asking_rounds = 0u32;
        let mut budget = CallBudget::new(self.max_call_time);
        // Whether the server began the call in an earlier round (it asked for input).
        let mut began = false;
        let mut url_steps = UrlStepsOfCall::new(Unrun::Call);
        loop {
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            let Some(left) = budget.left() else {
                return Err(McpError::Timeout(self.max_call_time));
            };
            let answer = match self.call_round(request, left, &progress, &cancel).await {
                // Only this round is known not to have run: the server began the call in
                // an earlier one, so the call is not one to send again.
                Err(McpError::SessionExpired) if began => return Err(expired_after_it_began()),
                // The whole call's cap, not this round's share of it, is what ran out.
                Err(McpError::Timeout(_)) if budget.left().is_none() => {
                    return Err(McpError::Timeout(self.max_call_time));
                }
                // The server needs the user on its web pages first, and did not run the
                // call: it goes again once they are done.
                Err(McpError::UrlRequired { message, steps }) => {
                    let finished = self
                        .finish_url_steps(
                            &message,
                            steps,
                            &mut url_steps,
                            &progress,
                            &mut budget,
                            &cancel,
                        )
                        .await;
                    match finished {
                        Err(McpError::SessionExpired) if began => {
                            return Err(expired_after_it_began());
                        }
                        finished => finished?,
                    }
                    continue;
                }
                answer => answer?,
            };
            match answer {
                ServerResult::CallToolResult(mut result) => {
                    let error = result.is_error == Some(true);
                    if self.spill.holds_any() || !self.secrets.is_empty() || error {
                        // Claiming reads the held strings back from disk, and hiding reads
                        // all the text: not on an async worker. What the server was given
                        // as secrets does not reach the model, the history or the window
                        // through what it answers.
                        let spill = self.spill.clone();
                        let secrets = self.secrets.clone();
                        result = tokio::task::spawn_blocking(move || {
                            spill.claim_tool_result(&mut result);
                            secrets.hide_in_result(&mut result);
                            result
                        })
                        .await
                        .map_err(|e| {
                            McpError::Other(format!("restoring a large result failed: {e}"))
                        })?;
                    }
                    return Ok(result);
                }
                // 2026-07-28 (SEP-2322): the server needs another round; its state goes back
                // byte for byte, in a new request with its own id.
                ServerResult::InputRequiredResult(asked) => {
                    // Counted before anything is asked: the user never answers a round
                    // whose answers would not be sent.
                    let asks = asked
                        .input_requests
                        .as_ref()
                        .is_some_and(|requests| !requests.is_empty());
                    count_asking_round(&mut asking_rounds, asks)?;
                    began = true;
                    let (state, responses) = self
                        .answer_round(asked, &mut state_only_rounds, &mut budget, &cancel)
                        .await?;
                    params.request_state = state;
                    params.input_responses = responses;
                }
                _ => {
                    return Err(McpError::Other(
                        "the server answered tools/call with something else".into(),
                    ));
                }
            }
        }
    }

    /// The steps in the browser a server needs before it runs a call (-32042,
    /// `URLElicitationRequiredError`). Each page not yet put to the user in this call is
    /// asked about as the server's own URL question is (the same checks: an `http` page
    /// only from a server on this machine), at most [`MAX_URL_STEPS`] in a call. Then the
    /// call waits until the server says a step is done (`notifications/elicitation/complete`)
    /// or a pause passes (a server need not say), before it goes again; the pauses
    /// lengthen, and after [`URL_STEP_WAIT`] the call ends. A page not opened ends it too.
    /// The call did not run in any of these cases, so the model is told so.
    async fn finish_url_steps(
        &self,
        message: &str,
        steps: Vec<ElicitRequestParams>,
        call: &mut UrlStepsOfCall,
        progress: &ProgressSink,
        budget: &mut CallBudget,
        cancel: &CancellationToken,
    ) -> Result<(), McpError> {
        // What the steps are for, in the server's words (else the error's) and where, for
        // the model and the user when the call ends unrun.
        let about = self.hidden_and_cut(&url_steps_words(message, &steps));
        let unrun = call.unrun;
        // Each page once: one named twice in the error, or again in a later round, is not
        // put to the user again.
        let mut new: Vec<ElicitRequestParams> = Vec::new();
        for step in steps {
            let key = url_step_key(&step);
            if !call.asked.contains(&key) && !new.iter().any(|n| url_step_key(n) == key) {
                new.push(step);
            }
        }
        if call.asked.len() + new.len() > MAX_URL_STEPS {
            return Err(McpError::Other(format!(
                "the server sent you to more than {MAX_URL_STEPS} pages in the browser for one {what}; Conduit stopped there, and the {what} did not run",
                what = unrun.noun()
            )));
        }
        if !new.is_empty() && !self.asks.offer().url {
            return Err(McpError::Other(format!(
                "the server needs you to finish a step in your browser first ({about}), which Conduit cannot show here; the {} did not run",
                unrun.noun()
            )));
        }
        for step in new {
            call.asked.push(url_step_key(&step));
            let asked_at = Instant::now();
            let answer = tokio::select! {
                answer = self.asks.elicit(step, self.shared.on_this_machine) => answer,
                () = cancel.cancelled() => return Err(McpError::Cancelled),
                () = self.ended.cancelled() => return Err(self.ended_unrun(unrun)),
            };
            // The user's time answering is not the server's.
            budget.not_counting(asked_at.elapsed());
            if !matches!(answer.action, ElicitationAction::Accept) {
                return Err(McpError::Other(format!(
                    "the server needs you to finish a step in your browser first ({about}); its page was not opened, so the {} did not run",
                    unrun.noun()
                )));
            }
            // The wait runs from the last page the user opened.
            call.waiting_since = Some(tokio::time::Instant::now());
        }
        let since = *call
            .waiting_since
            .get_or_insert_with(tokio::time::Instant::now);
        if since.elapsed() >= URL_STEP_WAIT {
            return Err(McpError::Other(format!(
                "the server still needs you to finish the step in your browser ({about}) after {} minutes; the {what} did not run: {again} once the step is done",
                URL_STEP_WAIT.as_secs() / 60,
                what = unrun.noun(),
                again = unrun.again()
            )));
        }
        if call.waits == 0 {
            progress(Progress {
                progress: 0.0,
                total: None,
                message: Some("Waiting for you to finish in your browser".into()),
            });
        }
        // The pause, within what the call has left (the next round then says the cap ran
        // out); a completion of one of this call's own steps, each heeded once, ends it
        // early but not before [`URL_STEP_POLL_MIN`]: a server repeating its notices
        // cannot make the call go again and again at once.
        let left = budget.left().unwrap_or_default();
        let now = tokio::time::Instant::now();
        let pause_ends = now
            + Duration::from_secs(2u64 << call.waits.min(4))
                .min(URL_STEP_POLL_MAX)
                .min(left);
        let earliest = now + URL_STEP_POLL_MIN.min(left);
        call.waits += 1;
        loop {
            let completed = self.shared.elicitation_completed.notified();
            tokio::pin!(completed);
            completed.as_mut().enable();
            if let Some(id) = self.shared.elicitation_newly_done(call) {
                call.seen.push(id);
                tokio::select! {
                    () = tokio::time::sleep_until(earliest) => return Ok(()),
                    () = cancel.cancelled() => return Err(McpError::Cancelled),
                    () = self.ended.cancelled() => return Err(self.ended_unrun(unrun)),
                }
            }
            tokio::select! {
                // Some step completed: this call's, or another's (then it waits on).
                () = &mut completed => {}
                () = tokio::time::sleep_until(pause_ends) => return Ok(()),
                () = cancel.cancelled() => return Err(McpError::Cancelled),
                () = self.ended.cancelled() => return Err(self.ended_unrun(unrun)),
            }
        }
    }

    /// The error of a call whose session ended while it waited on the user in the browser:
    /// no round of it ran (each answered -32042), so an expiry is said as one (the call
    /// goes again on the new session) and any other end says the call did not run.
    fn ended_unrun(&self, unrun: Unrun) -> McpError {
        if self.ended_by_expiry() {
            McpError::SessionExpired
        } else {
            McpError::Other(format!(
                "the connection to the server ended while the {what} waited for your step in the browser; the {what} did not run",
                what = unrun.noun()
            ))
        }
    }

    /// Answers a 2026-07-28 server's `input_required` round (SEP-2322) for a tool call, a
    /// resource read or a prompt: each of its input requests in turn, and the state it
    /// hands back; what goes into the next round's request (`request_state`,
    /// `input_responses`). The user's time answering does not count against `budget`.
    async fn answer_round(
        &self,
        asked: rmcp::model::InputRequiredResult,
        state_only_rounds: &mut u32,
        budget: &mut CallBudget,
        cancel: &CancellationToken,
    ) -> Result<(Option<String>, Option<rmcp::model::InputResponses>), McpError> {
        let requests = asked.input_requests.unwrap_or_default();
        if requests.is_empty() && asked.request_state.is_none() {
            return Err(McpError::Other(
                "the server asked for another round without saying for what".into(),
            ));
        }
        // Each is a question to the user or a model run on their key, one after another:
        // a real round asks for one or two.
        if requests.len() > MAX_INPUTS_PER_ROUND {
            return Err(McpError::Other(format!(
                "the server asked for {} inputs in one round; Conduit answers at most {MAX_INPUTS_PER_ROUND}",
                requests.len()
            )));
        }
        let mut responses = rmcp::model::InputResponses::new();
        for (key, request) in requests {
            let asked = Instant::now();
            let answer = tokio::select! {
                answer = self.input_response(request) => answer?,
                () = cancel.cancelled() => return Err(McpError::Cancelled),
                () = self.ended.cancelled() => return Err(McpError::Closed),
            };
            budget.not_counting(asked.elapsed());
            responses.insert(key, answer);
        }
        if responses.is_empty() {
            // A server that only hands its state back is still waiting (on the user's
            // page in a browser, say): it is polled, more slowly each time, for as long
            // as the call's cap and the user allow.
            let pause = 50u64
                .saturating_mul(1 << (*state_only_rounds).min(6))
                .min(STATE_POLL_MAX_MS);
            *state_only_rounds += 1;
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(pause)) => {}
                () = cancel.cancelled() => return Err(McpError::Cancelled),
            }
        }
        // The state goes back exactly as it came, or not at all.
        Ok((
            asked.request_state,
            (!responses.is_empty()).then_some(responses),
        ))
    }

    /// The answer to one of a server's input requests (2026-07-28), given by the same
    /// code as the legacy server-to-client requests. A request Conduit did not declare,
    /// or one the user rejects, fails the call (as rmcp's own client does).
    async fn input_response(
        &self,
        request: rmcp::model::InputRequest,
    ) -> Result<serde_json::Value, McpError> {
        let refused = |kind: &str| {
            McpError::Other(format!(
                "the server asked for {kind}, which Conduit does not offer this server"
            ))
        };
        match request {
            rmcp::model::InputRequest::Elicitation(request) => {
                let answer = self
                    .asks
                    .elicit(request.params, self.shared.on_this_machine)
                    .await;
                serde_json::to_value(answer).map_err(|e| McpError::Other(e.to_string()))
            }
            rmcp::model::InputRequest::CreateMessage(request) => {
                if !self.asks.samples() {
                    return Err(refused("sampling"));
                }
                let params = serde_json::to_value(&request.params)
                    .map_err(|e| McpError::Other(e.to_string()))?;
                // The refusal can quote the request (a tool name it offers twice): it goes to
                // the model, the window and the history cut and with secrets hidden, as a
                // server's own errors do.
                self.asks.sample(params).await.map_err(|error| {
                    McpError::Other(self.hidden_and_cut(&format!(
                        "the server's sampling request was not answered: {}",
                        error.message
                    )))
                })
            }
            rmcp::model::InputRequest::ListRoots(_) => {
                if !self.asks.roots.offered() {
                    return Err(refused("roots"));
                }
                Ok(self.asks.roots.to_wire())
            }
            other => Err(refused(input_kind(&other))),
        }
    }

    /// Tells the server its roots changed (the entry's `roots` were edited). A
    /// 2026-07-28 server asks for roots in each request that needs them, so only a
    /// legacy session is notified.
    pub async fn roots_changed(&self) {
        if !self.asks.roots.offered() {
            return;
        }
        let legacy = self
            .peer
            .peer_info()
            .is_some_and(|info| info.protocol_version.has_initialize());
        if legacy {
            #[allow(deprecated)]
            if let Err(error) = self.peer.notify_roots_list_changed().await {
                tracing::warn!(server = %self.asks.server, %error, "the server could not be told its roots changed");
            }
        }
    }

    /// One request of a tool call, its progress routed to `progress`; `cancel` sends
    /// `notifications/cancelled`.
    async fn call_round(
        &self,
        request: ClientRequest,
        time_left: Duration,
        progress: &ProgressSink,
        cancel: &CancellationToken,
    ) -> Result<ServerResult, McpError> {
        // Stopped before it was sent: nothing goes to the server.
        if cancel.is_cancelled() {
            return Err(McpError::Cancelled);
        }
        // rmcp keeps the whole call's cap; the idle timeout is kept here, so it can wait
        // while the server's own questions wait for the user (it blocks on their
        // answers and sends no progress meanwhile): a form filled in over a minute
        // timed the call out under it.
        let idle = self.call_timeout.min(time_left);
        let options = PeerRequestOptions::no_options().with_max_total_timeout(time_left);
        let handle = match self.peer.send_request_with_option(request, options).await {
            Ok(handle) => handle,
            // Never handed over: the connection had ended, here by the session's expiry.
            Err(ServiceError::TransportClosed) if self.ended_by_expiry() => {
                return Err(McpError::SessionExpired);
            }
            // Never handed over either: said as not run, not as a connection that closed
            // while the server may have run the call.
            Err(ServiceError::TransportClosed) => {
                return Err(McpError::Other(
                    "the connection to the server had ended, so the request was not sent; it did not run".into(),
                ));
            }
            Err(error) => return Err(self.hide(error)),
        };
        let token = handle.progress_token.clone();
        // Each progress of this call sets its idle timeout running again.
        let heard = Arc::new(Mutex::new(tokio::time::Instant::now()));
        let progress: ProgressSink = {
            let (progress, heard) = (progress.clone(), heard.clone());
            Arc::new(move |step| {
                *heard.lock() = tokio::time::Instant::now();
                progress(step);
            })
        };
        let early = {
            let mut sinks = self.shared.progress.lock();
            sinks.insert(token.clone(), progress.clone());
            self.shared.early.lock().remove(&token)
        };
        for step in early.into_iter().flatten() {
            progress(step);
        }
        let forget = ForgetProgress {
            shared: self.shared.clone(),
            token: Some(token),
        };
        let (peer, id) = (handle.peer.clone(), handle.id.clone());
        // Once the call ends (answered, stopped, timed out) a late answer is not held.
        let _awaited = Awaited {
            spill: self.spill.clone(),
            id: id.clone(),
        };
        let mut idle_ends = tokio::time::Instant::now() + idle;
        let response = handle.await_response();
        tokio::pin!(response);
        let response = loop {
            tokio::select! {
                biased;
                response = &mut response => break response,
                () = cancel.cancelled() => {
                    // Told within a moment: the call ends then even if the server has
                    // stopped reading (its write would wait up to [`PIPE_WRITE_DEADLINE`];
                    // what is queued goes out with the connection's next writes).
                    let reason = Some("the user stopped the call".to_owned());
                    let notice = peer.notify_cancelled(CancelledNotificationParam::new(Some(id), reason));
                    let _ = tokio::time::timeout(CANCEL_NOTICE_PATIENCE, notice).await;
                    return Err(McpError::Cancelled);
                }
                () = tokio::time::sleep_until(idle_ends) => {
                    // Progress since, or a question open or answered since: the idle
                    // time runs from the last of them, and not while one is open.
                    let now = tokio::time::Instant::now();
                    if self.shared.asking.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                        idle_ends = now + idle;
                        continue;
                    }
                    let progressed = *heard.lock();
                    let answered = *self.shared.asked_until.lock();
                    let heard = answered.map_or(progressed, |answered| answered.max(progressed));
                    if heard + idle > now {
                        idle_ends = heard + idle;
                        continue;
                    }
                    let reason = Some("the request timed out".to_owned());
                    let notice = peer.notify_cancelled(CancelledNotificationParam::new(Some(id), reason));
                    let _ = tokio::time::timeout(CANCEL_NOTICE_PATIENCE, notice).await;
                    return Err(self.hide(ServiceError::Timeout { timeout: idle }));
                }
            }
        };
        // rmcp hands each notification to its own task, so progress sent just before
        // the result may still be queued: let it run before the call returns, and keep
        // routing late ones a moment longer (the sink is dropped in the background).
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        forget.later();
        match response.map_err(|e| self.hide(e)) {
            // The server answered this very request 404 (so it did not run), and the
            // connection ended before rmcp could say so: said as the expiry it was.
            Err(McpError::Closed) if self.shared.session_expired.refused.lock().contains(&id) => {
                Err(McpError::SessionExpired)
            }
            other => other,
        }
    }

    /// Ends the session and the server process (its whole process group).
    pub async fn shutdown(&self) {
        let service = self.service.lock().take();
        if let Some(mut service) = service {
            let _ = service.close_with_timeout(Duration::from_secs(2)).await;
        }
        if let Some(mut process) = self.process.lock().await.take() {
            process.shutdown(Duration::from_secs(2)).await;
        }
    }

    /// The exit status of a stdio server whose connection ended, once it exits (within
    /// `patience`); `None` for a server that did not exit (or is not a process).
    pub async fn exit_after_end(&self, patience: Duration) -> Option<std::process::ExitStatus> {
        let mut process = self.process.lock().await;
        match process.as_mut() {
            Some(process) => process.exit_within(patience).await,
            None => None,
        }
    }
}

/// Follows a stateless server's tool list changes on a `subscriptions/listen` stream
/// until the session ends, opening the stream again when the server ends it.
async fn listen_for_tool_changes(
    peer: Peer<RoleClient>,
    shared: Arc<Shared>,
    ended: CancellationToken,
) {
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut failures: u32 = 0;
    while !ended.is_cancelled() {
        let listened = tokio::select! {
            listened = peer.listen(filter.clone()) => listened,
            () = ended.cancelled() => return,
        };
        let opened = Instant::now();
        if listened.is_ok() {
            // What changed before the stream was open (between the start and the first
            // listen, or while reopening) was not heard: list once more.
            shared.tools_changed.notify_one();
        }
        match listened {
            Ok(mut subscription) => loop {
                let next = tokio::select! {
                    next = subscription.next() => next,
                    () = ended.cancelled() => return,
                };
                match next {
                    Ok(Some(ServerNotification::ToolListChangedNotification(_))) => {
                        failures = 0;
                        shared.tool_changed();
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(err) => {
                        tracing::warn!(error = %err, "the server's notification stream failed");
                        break;
                    }
                }
            },
            Err(err) => {
                tracing::warn!(error = %err, "the server refused a notification stream");
            }
        }
        // A stream that lived a while ended normally (a server's or proxy's idle end):
        // only refusals and quick ends count toward giving up.
        if opened.elapsed() > LISTEN_BACKOFF.max {
            failures = 0;
        }
        failures += 1;
        if failures > LISTEN_ATTEMPTS {
            tracing::warn!("the server's tool list changes are no longer followed");
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(LISTEN_BACKOFF.delay(failures)) => {}
            () = ended.cancelled() => return,
        }
    }
}

/// Reopening a notification stream waits 1 s, 2 s ... up to 30 s, at most this often
/// in a row.
const LISTEN_BACKOFF: conduit_core::backoff::Backoff =
    conduit_core::backoff::Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
const LISTEN_ATTEMPTS: u32 = 8;

/// How many rounds of one call may ask the user (or the model) something when the
/// server asks for more (2026-07-28). A round that only hands the server's state back
/// (it is still waiting, on a page the user opened, say) is not counted: the call's cap
/// and the user's Stop bound those.
const MAX_INPUT_ROUNDS: u32 = 16;
/// The longest pause before a state-only round is sent back (50 ms, doubling).
const STATE_POLL_MAX_MS: u64 = 2_000;

/// Counts a round about to be answered that asks something (`asks`); an error, before
/// anything is asked, once [`MAX_INPUT_ROUNDS`] were.
fn count_asking_round(asking_rounds: &mut u32, asks: bool) -> Result<(), McpError> {
    if asks {
        if *asking_rounds >= MAX_INPUT_ROUNDS {
            return Err(McpError::Other(format!(
                "the server still wanted more after {MAX_INPUT_ROUNDS} rounds"
            )));
        }
        *asking_rounds += 1;
    }
    Ok(())
}
/// The most input requests (questions, sampling, roots) one round of a call may carry.
const MAX_INPUTS_PER_ROUND: usize = 8;

/// A call's session expired after the server began the call in an earlier round.
fn expired_after_it_began() -> McpError {
    McpError::Other(
        "the server's session expired after it began the call (it had asked for more input); the call may have run in part, so Conduit does not send it again".into(),
    )
}

/// The most pages in the browser one tool call may send the user to (-32042): a real
/// server needs one or two (a sign-in to a third party, a consent); more is a server
/// asking over and over.
const MAX_URL_STEPS: usize = 3;
/// How long a call waits for the user to finish its steps in the browser, from the last
/// page opened; the user can stop it before.
const URL_STEP_WAIT: Duration = Duration::from_secs(10 * 60);
/// The longest pause before a call waiting on a step in the browser goes again, for a
/// server that does not say when a step is done.
const URL_STEP_POLL_MAX: Duration = Duration::from_secs(30);
/// The shortest pause before a call waiting on a step in the browser goes again, even
/// when the server says the step is done.
const URL_STEP_POLL_MIN: Duration = Duration::from_secs(1);
/// The longest elicitation id kept: ids only wake a waiting call sooner.
const MAX_ELICITATION_ID: usize = 256;

/// What waits on the user's steps in the browser, as an error that ends it says it.
#[derive(Debug, Clone, Copy)]
enum Unrun {
    /// A tool call (the model is told, and may call again).
    Call,
    /// A resource read or a prompt (the user, or a view, asked for it).
    Request,
}

impl Unrun {
    fn noun(self) -> &'static str {
        match self {
            Unrun::Call => "call",
            Unrun::Request => "request",
        }
    }

    fn again(self) -> &'static str {
        match self {
            Unrun::Call => "call it again",
            Unrun::Request => "try again",
        }
    }
}

/// What one tool call, resource read or prompt has asked of the user in the browser
/// (-32042).
struct UrlStepsOfCall {
    /// What it is, as its errors say.
    unrun: Unrun,
    /// Each page put to the user: the call waits for the completion of those with an id.
    asked: Vec<UrlStepKey>,
    /// Those whose completion the call has already acted on: a notice repeated for one
    /// does not make the call go again early.
    seen: Vec<String>,
    /// How many times the call has waited (the pauses lengthen).
    waits: u32,
    /// Since when the call has waited on the user.
    waiting_since: Option<tokio::time::Instant>,
}

impl UrlStepsOfCall {
    fn new(unrun: Unrun) -> Self {
        UrlStepsOfCall {
            unrun,
            asked: Vec::new(),
            seen: Vec::new(),
            waits: 0,
            waiting_since: None,
        }
    }
}

/// What the steps in the browser are for, as the server says (each message cut short) and
/// on which site; the error's own message when the steps say nothing. The page's whole
/// address is left out: only the user's browser is sent there, once they agree.
fn url_steps_words(message: &str, steps: &[ElicitRequestParams]) -> String {
    let words: Vec<String> = steps
        .iter()
        .take(MAX_URL_STEPS)
        .filter_map(|step| match step {
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
                let said = conduit_core::content::text_start(message.trim(), 200);
                let site = reqwest::Url::parse(url)
                    .ok()
                    .and_then(|url| url.host_str().map(str::to_owned))
                    .unwrap_or_else(|| "an address that does not parse".to_owned());
                Some(if said.is_empty() {
                    format!("a page on {site}")
                } else {
                    format!("{said}, on {site}")
                })
            }
            _ => None,
        })
        .collect();
    if words.is_empty() {
        message.to_owned()
    } else {
        words.join("; ")
    }
}

/// How a step in the browser is told apart within a call: its elicitation id (cut as a
/// completion notice's is), or its URL where it has none (2026-07-28 dropped the id).
#[derive(Debug, PartialEq, Eq)]
enum UrlStepKey {
    Id(String),
    Url(String),
}

fn url_step_key(step: &ElicitRequestParams) -> UrlStepKey {
    match step {
        ElicitRequestParams::UrlElicitationParams {
            elicitation_id,
            url,
            ..
        } if elicitation_id.is_empty() => UrlStepKey::Url(url.clone()),
        ElicitRequestParams::UrlElicitationParams { elicitation_id, .. } => UrlStepKey::Id(
            conduit_core::content::text_start(elicitation_id, MAX_ELICITATION_ID).to_owned(),
        ),
        // `url_steps` keeps URL elicitations only.
        _ => UrlStepKey::Url(String::new()),
    }
}

/// The server's share of one tool call's time, over all its rounds: a 2026-07-28 server
/// that keeps asking for another round must not stretch a call past its cap round by
/// round. The user's time answering the server's questions is not the server's.
struct CallBudget {
    cap: Duration,
    started: Instant,
    users_time: Duration,
}

impl CallBudget {
    fn new(cap: Duration) -> Self {
        Self {
            cap,
            started: Instant::now(),
            users_time: Duration::ZERO,
        }
    }

    fn not_counting(&mut self, users_time: Duration) {
        self.users_time = self.users_time.saturating_add(users_time);
    }

    /// What the server has left, or `None` once it has had it all.
    fn left(&self) -> Option<Duration> {
        let spent = self.started.elapsed().saturating_sub(self.users_time);
        Some(self.cap.saturating_sub(spent)).filter(|left| !left.is_zero())
    }
}

/// What a server's input request asks for, in words.
fn input_kind(request: &rmcp::model::InputRequest) -> &'static str {
    match request {
        rmcp::model::InputRequest::CreateMessage(_) => "sampling",
        rmcp::model::InputRequest::Elicitation(_) => "elicitation",
        rmcp::model::InputRequest::ListRoots(_) => "roots",
        _ => "an input Conduit does not know",
    }
}

/// Tells the spill a call no longer awaits its answer.
struct Awaited {
    spill: Arc<Spill>,
    id: rmcp::model::RequestId,
}

impl Drop for Awaited {
    fn drop(&mut self) {
        self.spill.answered(&self.id);
    }
}

/// Stops routing progress to a call that finished or was abandoned.
struct ForgetProgress {
    shared: Arc<Shared>,
    token: Option<ProgressToken>,
}

impl ForgetProgress {
    /// Forgets the call's progress after a grace period instead of now.
    fn later(mut self) {
        if let Some(token) = self.token.take() {
            let shared = self.shared.clone();
            conduit_core::task::spawn(async move {
                tokio::time::sleep(PROGRESS_GRACE).await;
                shared.progress.lock().remove(&token);
            });
        }
    }
}

impl Drop for ForgetProgress {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            self.shared.progress.lock().remove(&token);
        }
    }
}

/// The most of a server's error message that is kept (bytes): it becomes a tool's failed
/// result, shown and stored inline (a successful result's text over 1 MiB is a file).
const MAX_SERVER_ERROR: usize = 16 * 1024;
/// The most of a progress notification's message that is kept (bytes).
const MAX_PROGRESS_MESSAGE: usize = 1024;

/// The most of a server's name, version or protocol version kept.
const MAX_SERVER_NAME: usize = 256;
/// The most of a server's instructions kept (real ones are a few paragraphs).
const MAX_INSTRUCTIONS: usize = 64 * 1024;

/// The most completion values offered for one argument (the protocol's own cap), and
/// the longest one offered: each is a value the user may pick, sent to the picker on
/// every key typed, so a server cannot make that megabytes.
const MAX_COMPLETIONS: usize = 100;
const MAX_COMPLETION_BYTES: usize = 1024;

/// The completions offered of what a server suggested: the first [`MAX_COMPLETIONS`]
/// of at most [`MAX_COMPLETION_BYTES`] each (a longer one is left out, not cut: a cut
/// value would be another value).
fn offered_completions(values: Vec<String>) -> Vec<String> {
    values
        .into_iter()
        .filter(|value| value.len() <= MAX_COMPLETION_BYTES)
        .take(MAX_COMPLETIONS)
        .collect()
}

/// A server's `text` with `secrets` hidden, cut to [`MAX_SERVER_ERROR`]. Secrets are
/// hidden in a start four times as long, so a key that runs across the cut is hidden
/// whole before it is cut.
fn hidden_and_cut(secrets: &Redactor, text: &str) -> String {
    if text.len() <= MAX_SERVER_ERROR {
        return secrets.text(text);
    }
    let start = conduit_core::content::text_start(text, 4 * MAX_SERVER_ERROR);
    let hidden = secrets.text(start);
    said_in_part(
        conduit_core::content::text_start(&hidden, MAX_SERVER_ERROR),
        text.len(),
    )
}

/// A server's `text` cut to at most `limit` bytes at a character boundary, saying so.
pub(crate) fn server_words(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    said_in_part(conduit_core::content::text_start(text, limit), text.len())
}

/// The start of a server's message of `total` bytes, saying the rest is left out.
fn said_in_part(start: &str, total: usize) -> String {
    format!("{start}… [the server's message was {total} bytes; the rest is left out]")
}

/// Progress for calls not yet registered is kept for this many calls ...
const MAX_EARLY_TOKENS: usize = 64;
/// ... and this many notifications each.
const MAX_EARLY_PER_TOKEN: usize = 64;

/// How long progress of a finished call is still delivered (it may trail the result).
const PROGRESS_GRACE: Duration = Duration::from_millis(200);

fn spawn_message(command: &str, err: &std::io::Error) -> String {
    if err.kind() == std::io::ErrorKind::NotFound {
        format!("{command} was not found on PATH ({err})")
    } else {
        err.to_string()
    }
}

#[cfg(test)]
mod tests;
