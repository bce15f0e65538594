//! The MCP server side: [`ToolServer`] serves a [`Catalog`] (core tools, resources,
//! prompts and completions) to any MCP client, in process (the agent's own tool source,
//! through [`InProcessServer`]), over stdio or over streamable HTTP (see [`crate::http`]).
//!
//! Tool results go back as MCP content: text, images and audio read from the media
//! store as base64, embedded resources, and structured content as `structuredContent`.
//! A tool that fails becomes an error result, never a protocol error; a client's
//! `notifications/cancelled` cancels the call's token and drops the call; a tool's
//! progress becomes progress notifications; the catalog's change signal becomes
//! `notifications/tools/list_changed` (and resources/prompts alike).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;
use conduit_core::content::ResultPart;
use conduit_core::media::MediaStore;
use conduit_core::tool::{Progress, Tool, ToolContext, ToolOutput};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ErrorCode, GetPromptRequestParams, GetPromptResponse, GetPromptResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerCapabilities, ServerConfig, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use crate::client::InProcessServer;

/// What changed in a catalog, for connected clients to hear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogChange {
    Tools,
    Resources,
    /// One resource's content changed (sent to clients subscribed to it).
    ResourceUpdated(String),
    Prompts,
}

/// Why a catalog request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CatalogError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The client must declare these capabilities (`ClientCapabilities` JSON) first.
    #[error("the client lacks a required capability: {0}")]
    MissingClientCapability(Value),
    #[error("{0}")]
    Failed(String),
}

/// A resource as listed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInfo {
    pub uri: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// A family of resources named by an RFC 6570 template (`conduit://conversation/{id}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplateInfo {
    pub uri_template: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// What a resource holds.
#[derive(Debug, Clone, PartialEq)]
pub enum ResourceData {
    Text(String),
    Binary(Vec<u8>),
}

/// One content of a read resource.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceBody {
    pub uri: String,
    pub mime_type: Option<String>,
    pub data: ResourceData,
}

/// One argument of a prompt.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PromptArgumentInfo {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub required: bool,
}

/// A prompt as listed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PromptInfo {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub arguments: Vec<PromptArgumentInfo>,
}

/// Who says a prompt message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptRole {
    User,
    Assistant,
}

/// The content of one prompt message.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptContent {
    Text(String),
    Image { data: Vec<u8>, mime_type: String },
    Audio { data: Vec<u8>, mime_type: String },
    Resource(ResourceBody),
}

/// A prompt with its arguments filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptBody {
    pub description: Option<String>,
    pub messages: Vec<(PromptRole, PromptContent)>,
}

/// What an argument completion is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionTarget {
    Prompt(String),
    /// A resource template, by its URI template.
    ResourceTemplate(String),
}

/// A request for [`Catalog::answer_raw`].
#[derive(Debug, Clone)]
pub struct RawRequest {
    /// `tools/call` or `prompts/get`.
    pub method: &'static str,
    /// The tool or prompt.
    pub name: String,
    /// The request's `params` as sent.
    pub params: Value,
    /// What the client declared it can do (`ClientCapabilities` JSON, `{}` when nothing).
    pub client_capabilities: Value,
}

/// The most completion values one answer carries (the protocol's cap).
pub const MAX_COMPLETIONS: usize = 100;

/// What a server serves: tools, resources, prompts and completions, and a signal when
/// they change. The host's catalog is the production one; tests bring their own.
#[async_trait]
pub trait Catalog: Send + Sync + 'static {
    /// The server's name in the handshake.
    fn name(&self) -> String {
        "conduit".to_owned()
    }

    fn instructions(&self) -> Option<String> {
        None
    }

    /// The tools served now.
    fn tools(&self) -> Vec<Arc<dyn Tool>>;

    /// A tool's `_meta`, if it has one.
    fn tool_meta(&self, _name: &str) -> Option<Map<String, Value>> {
        None
    }

    /// The client capabilities a tool needs (as MCP's `ClientCapabilities` JSON, e.g.
    /// `{"sampling": {}}`): a client that did not declare them gets
    /// MissingRequiredClientCapability (-32021) instead of a call.
    fn tool_requires(&self, _name: &str) -> Option<Value> {
        None
    }

    /// A `tools/call` or `prompts/get` answered in MCP's own terms (the full `params`,
    /// with `inputResponses` and `requestState`), for catalogs that need the protocol's
    /// multi-round input (`resultType: "input_required"`) that core tools cannot express:
    /// the conformance fixtures. `None` lets the core tool or prompt answer.
    async fn answer_raw(&self, _request: &RawRequest) -> Option<Result<Value, CatalogError>> {
        None
    }

    /// Changes as they happen; `None` when the catalog never changes.
    fn changes(&self) -> Option<broadcast::Receiver<CatalogChange>> {
        None
    }

    async fn resources(&self) -> Result<Vec<ResourceInfo>, CatalogError> {
        Ok(Vec::new())
    }

    fn resource_templates(&self) -> Vec<ResourceTemplateInfo> {
        Vec::new()
    }

    async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceBody>, CatalogError> {
        Err(CatalogError::NotFound(uri.to_owned()))
    }

    fn prompts(&self) -> Vec<PromptInfo> {
        Vec::new()
    }

    async fn get_prompt(
        &self,
        name: &str,
        _arguments: &HashMap<String, String>,
    ) -> Result<PromptBody, CatalogError> {
        Err(CatalogError::NotFound(name.to_owned()))
    }

    /// Values for `argument` starting like `value` (`context` holds the arguments
    /// already chosen), at most [`MAX_COMPLETIONS`] are sent.
    async fn complete(
        &self,
        _target: &CompletionTarget,
        _argument: &str,
        _value: &str,
        _context: &HashMap<String, String>,
    ) -> Result<Vec<String>, CatalogError> {
        Ok(Vec::new())
    }
}

/// MCP's log levels, least severe first.
const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

fn level_rank(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|known| *known == level)
}

/// Which log messages the client of a call wants.
#[derive(Debug, Clone, Copy)]
enum LogThreshold {
    /// A session that never set a level: everything (2025-11-25).
    All,
    /// Messages at this rank or above.
    AtLeast(usize),
    /// A stateless request that did not opt in (`_meta` logLevel): none (2026-07-28).
    None,
}

#[derive(Clone)]
struct Caller {
    peer: Peer<RoleServer>,
    logs: LogThreshold,
}

tokio::task_local! {
    /// The client a tool call runs for: lets fixtures that need the session itself
    /// (logging from a tool, sampling) reach it without widening the core `Tool`.
    static CALLER: Caller;
}

/// The client the current tool call runs for, inside [`ToolServer`]'s call.
pub fn current_caller() -> Option<Peer<RoleServer>> {
    CALLER.try_with(|caller| caller.peer.clone()).ok()
}

/// Sends a log message (`notifications/message`) to the client of the current tool call,
/// if it asked for messages of this level (`logging/setLevel`, or the request's
/// `_meta` log level on 2026-07-28). Does nothing outside a served call.
#[allow(deprecated)]
pub async fn log(level: &str, data: Value) {
    let Ok(caller) = CALLER.try_with(Clone::clone) else {
        return;
    };
    let Some(rank) = level_rank(level) else {
        return;
    };
    let wanted = match caller.logs {
        LogThreshold::All => true,
        LogThreshold::AtLeast(threshold) => rank >= threshold,
        LogThreshold::None => false,
    };
    if !wanted {
        return;
    }
    let Ok(param) = from_json::<rmcp::model::LoggingMessageNotificationParam>(
        json!({ "level": level, "logger": "conduit", "data": data }),
    ) else {
        return;
    };
    let _ = caller.peer.notify_logging_message(param).await;
}

/// The most of one stored file a result or resource carries to a client (16 MiB, ~21 MiB
/// as base64): an attachment may be 64 MiB, and a client asking for many at once must not
/// fill the memory. A larger file is named in the result, not sent.
pub const MAX_SERVED_MEDIA_BYTES: u64 = 16 * 1024 * 1024;
/// Results carrying stored files made at once (each reads its files and encodes them, off
/// the async workers); the others wait their turn.
const MEDIA_RESULTS_AT_ONCE: usize = 2;
/// The most stored-file bytes in results on their way to clients over HTTP at once: a
/// result's files count from when it is made until its response has been written out and
/// the session no longer keeps a copy for a client that reconnects
/// ([`crate::http::COMPLETED_RESPONSE_KEPT`]). A client that asks for many files and never
/// reads them holds this much at most, not 16 MiB a request.
pub const MAX_SERVED_MEDIA_IN_FLIGHT: u64 = 64 * 1024 * 1024;
/// How long a result waits for its files' place among [`MAX_SERVED_MEDIA_IN_FLIGHT`]
/// before the call fails, saying why.
const MEDIA_IN_FLIGHT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// What one HTTP response holds of [`MAX_SERVED_MEDIA_IN_FLIGHT`]. The endpoint puts one in
/// each request and keeps it with the response's body; when the body is gone (written out,
/// or the client left) its places are given back once the session's copy of the response
/// has expired.
#[derive(Default)]
pub struct ResponseHold {
    places: Mutex<Vec<tokio::sync::OwnedSemaphorePermit>>,
}

impl Drop for ResponseHold {
    fn drop(&mut self) {
        let places = std::mem::take(self.places.get_mut());
        if places.is_empty() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(crate::http::COMPLETED_RESPONSE_KEPT).await;
                    drop(places);
                });
            }
            // No runtime left (the process is ending): nothing is kept either.
            Err(_) => drop(places),
        }
    }
}

/// The hold of the response a request is answered in: over HTTP the endpoint puts one in
/// each request (`http::hold_for_response`); over stdio there is none.
fn response_hold(context: &RequestContext<RoleServer>) -> Option<&ResponseHold> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Arc<ResponseHold>>())
        .map(Arc::as_ref)
}

/// The bytes of stored files a result sends, in order: each at most
/// [`MAX_SERVED_MEDIA_BYTES`] and all together at most that too; a file past what is
/// left is named in the result instead.
struct MediaAllowance {
    left: u64,
}

impl MediaAllowance {
    fn new() -> Self {
        Self {
            left: MAX_SERVED_MEDIA_BYTES,
        }
    }

    /// Takes `bytes` from what is left, or says why the file is not sent.
    fn take(&mut self, bytes: u64) -> Result<(), String> {
        if bytes > MAX_SERVED_MEDIA_BYTES {
            return Err(too_large_to_serve(bytes));
        }
        if bytes > self.left {
            return Err(format!(
                "the result's files together pass the {} MiB Conduit sends a client in one result",
                MAX_SERVED_MEDIA_BYTES / (1024 * 1024)
            ));
        }
        self.left -= bytes;
        Ok(())
    }

    /// The stored-file bytes a result of `parts` will send (as stored; the files read are
    /// held to it).
    fn sent_by(parts: &[ResultPart]) -> u64 {
        let mut allowance = Self::new();
        parts
            .iter()
            .filter_map(ResultPart::media)
            .filter(|media| allowance.take(media.bytes).is_ok())
            .map(|media| media.bytes)
            .sum()
    }
}

/// Why a stored file of `bytes` is not sent to a client.
pub fn too_large_to_serve(bytes: u64) -> String {
    format!(
        "it is {:.1} MiB, more than the {} MiB Conduit sends a client",
        bytes as f64 / (1024.0 * 1024.0),
        MAX_SERVED_MEDIA_BYTES / (1024 * 1024)
    )
}

struct Inner {
    catalog: Arc<dyn Catalog>,
    media: Arc<dyn MediaStore>,
    /// Turns for results that carry stored files ([`MEDIA_RESULTS_AT_ONCE`]).
    media_results: tokio::sync::Semaphore,
    /// Places for stored-file bytes on their way to HTTP clients, a KiB each
    /// ([`MAX_SERVED_MEDIA_IN_FLIGHT`]).
    media_in_flight: Arc<tokio::sync::Semaphore>,
    /// Places for 2026-07-28 listen streams, shared by every client of this server.
    listens: Arc<tokio::sync::Semaphore>,
    /// Places for requests running at once, over every client ([`MAX_RUNNING`]).
    running: Arc<tokio::sync::Semaphore>,
}

/// How many tool calls, reads, prompts and completions one session may have running at
/// once. rmcp runs each request of a 2025-11-25 session in its own task and lets it run on
/// when its client hangs up (so the response can be resumed): without a bound, one client
/// could start any number and hold the history's connection and the blocking pool.
pub const MAX_SESSION_RUNNING: usize = 32;
/// The same over every session of the server.
pub const MAX_RUNNING: usize = 256;

/// How many bytes `value` is as JSON, counted without writing it out.
fn json_size(value: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len() as u64;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        // A value that does not write as JSON is not sent either.
        Err(_) => u64::MAX,
    }
}

/// Refuses an answer of `size` bytes past [`MAX_SERVED_MEDIA_BYTES`]: a resource or prompt
/// this large (a very long conversation) is not sent whole, saying why.
fn refuse_past_answer_size(what: &str, size: u64) -> Result<(), ErrorData> {
    if size <= MAX_SERVED_MEDIA_BYTES {
        return Ok(());
    }
    // An internal error: the request was well formed, the answer is what cannot go.
    Err(ErrorData::internal_error(
        format!(
            "{what} is {:.1} MiB, more than the {} MiB this server sends in one answer",
            size as f64 / (1024.0 * 1024.0),
            MAX_SERVED_MEDIA_BYTES / (1024 * 1024)
        ),
        None,
    ))
}

/// How many 2026-07-28 `subscriptions/listen` streams this server keeps open at once, over
/// all its clients. Each holds a task and a receiver of the catalog's changes for as long
/// as its client keeps it; one more is refused, saying so. A client needs one.
pub const MAX_LISTENS: usize = 64;

/// A subscribed resource's URI is at most this long (Conduit's own are under 100 bytes):
/// a client's subscriptions are kept for as long as its session lasts.
const MAX_SUBSCRIBED_URI: usize = 2048;
/// Subscriptions one session may hold.
const MAX_SUBSCRIPTIONS: usize = 1000;

/// Whether `uris` names one URI twice (called with at most [`MAX_SUBSCRIPTIONS`]).
fn has_duplicates(uris: &[String]) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(uris.len());
    !uris.iter().all(|uri| seen.insert(uri.as_str()))
}

/// How often a session's change forwarder looks whether its client went away.
const CLOSED_SESSION_CHECK: std::time::Duration = std::time::Duration::from_secs(30);

/// What a client that missed changes is told: every list changed (a switch in Settings
/// changes the tools, and what resources and prompts are shared).
fn every_list() -> Vec<CatalogChange> {
    vec![
        CatalogChange::Tools,
        CatalogChange::Resources,
        CatalogChange::Prompts,
    ]
}

/// Whether a session holding `held` may subscribe to `uri` too.
fn may_subscribe(held: &BTreeSet<String>, uri: &str) -> Result<(), ErrorData> {
    if uri.len() > MAX_SUBSCRIBED_URI {
        return Err(ErrorData::invalid_params(
            format!("a resource URI is at most {MAX_SUBSCRIBED_URI} bytes"),
            None,
        ));
    }
    if !held.contains(uri) && held.len() >= MAX_SUBSCRIPTIONS {
        return Err(ErrorData::invalid_params(
            format!("a session holds at most {MAX_SUBSCRIPTIONS} subscriptions: unsubscribe first"),
            None,
        ));
    }
    Ok(())
}

/// One session's state.
struct SessionState {
    subscriptions: Mutex<BTreeSet<String>>,
    forwarding: Mutex<bool>,
    /// The level `logging/setLevel` chose (2025-11-25 sessions).
    log_level: Mutex<Option<usize>>,
    /// Places for this session's requests running at once ([`MAX_SESSION_RUNNING`]);
    /// `None` for Conduit's own in-process session, which every conversation, view and
    /// mention of the app shares (its agent bounds its own calls).
    running: Option<Arc<tokio::sync::Semaphore>>,
}

impl Default for SessionState {
    fn default() -> Self {
        Self {
            subscriptions: Mutex::default(),
            forwarding: Mutex::default(),
            log_level: Mutex::default(),
            running: Some(Arc::new(tokio::sync::Semaphore::new(MAX_SESSION_RUNNING))),
        }
    }
}

/// A request's places among those running at once, held while it runs.
struct RunningPlaces {
    _session: Option<tokio::sync::OwnedSemaphorePermit>,
    _server: tokio::sync::OwnedSemaphorePermit,
}

/// An MCP server for a catalog. Cheap to clone; each clone made by [`ToolServer::session`]
/// is one client's session.
#[derive(Clone)]
pub struct ToolServer {
    inner: Arc<Inner>,
    session: Arc<SessionState>,
}

impl ToolServer {
    pub fn new(catalog: Arc<dyn Catalog>, media: Arc<dyn MediaStore>) -> Self {
        Self {
            inner: Arc::new(Inner {
                catalog,
                media,
                media_results: tokio::sync::Semaphore::new(MEDIA_RESULTS_AT_ONCE),
                media_in_flight: Arc::new(tokio::sync::Semaphore::new(
                    (MAX_SERVED_MEDIA_IN_FLIGHT / 1024) as usize,
                )),
                listens: Arc::new(tokio::sync::Semaphore::new(MAX_LISTENS)),
                running: Arc::new(tokio::sync::Semaphore::new(MAX_RUNNING)),
            }),
            session: Arc::new(SessionState::default()),
        }
    }

    /// A place for one more request of this session to run, or why there is none: a
    /// request past the bound is refused at once rather than queued (a queued one would
    /// keep its arguments).
    fn start_running(&self) -> Result<RunningPlaces, ErrorData> {
        let session = match &self.session.running {
            Some(places) => Some(places.clone().try_acquire_owned().map_err(|_| {
                ErrorData::invalid_request(
                    format!(
                        "this session has {MAX_SESSION_RUNNING} requests running, the most it may: wait for one to finish"
                    ),
                    None,
                )
            })?),
            None => None,
        };
        let server = self.inner.running.clone().try_acquire_owned().map_err(|_| {
            ErrorData::invalid_request(
                format!(
                    "this server has {MAX_RUNNING} requests running for its clients, the most it may: try again shortly"
                ),
                None,
            )
        })?;
        Ok(RunningPlaces {
            _session: session,
            _server: server,
        })
    }

    /// A fresh session over the same catalog.
    pub fn session(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            session: Arc::new(SessionState::default()),
        }
    }

    /// Serves one session over stdin and stdout until the client closes it.
    pub async fn serve_stdio(&self) -> Result<(), ServeError> {
        let running = self
            .session()
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| ServeError(e.to_string()))?;
        match running.waiting().await {
            // The session's task failed (a panic in it): not a session that ended well.
            Ok(rmcp::service::QuitReason::JoinError(error)) => Err(ServeError(format!(
                "the session ended with a failure: {error}"
            ))),
            Ok(_) => Ok(()),
            Err(error) => Err(ServeError(error.to_string())),
        }
    }

    /// Forwards the catalog's changes to one client until it goes away (noticed at the
    /// next change, or within [`CLOSED_SESSION_CHECK`]).
    fn forward_changes(&self, peer: Peer<RoleServer>) {
        {
            let mut forwarding = self.session.forwarding.lock();
            if *forwarding {
                return;
            }
            *forwarding = true;
        }
        let Some(mut changes) = self.inner.catalog.changes() else {
            return;
        };
        let session = self.session.clone();
        conduit_core::task::spawn(async move {
            loop {
                let received = tokio::select! {
                    received = changes.recv() => received,
                    // A session that closed while nothing changed: stop holding it.
                    () = tokio::time::sleep(CLOSED_SESSION_CHECK) => {
                        if peer.is_transport_closed() {
                            return;
                        }
                        continue;
                    }
                };
                let now = match received {
                    Ok(change) => vec![change],
                    // Missed changes: say every list changed.
                    Err(broadcast::error::RecvError::Lagged(_)) => every_list(),
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                for change in now {
                    let sent = match change {
                        CatalogChange::Tools => peer.notify_tool_list_changed().await,
                        CatalogChange::Resources => peer.notify_resource_list_changed().await,
                        CatalogChange::Prompts => peer.notify_prompt_list_changed().await,
                        CatalogChange::ResourceUpdated(uri) => {
                            if !session.subscriptions.lock().contains(&uri) {
                                continue;
                            }
                            match from_json(json!({ "uri": uri })) {
                                Ok(params) => peer.notify_resource_updated(params).await,
                                Err(_) => continue,
                            }
                        }
                    };
                    if sent.is_err() || peer.is_transport_closed() {
                        return;
                    }
                }
            }
        });
    }

    fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.inner
            .catalog
            .tools()
            .into_iter()
            .find(|tool| tool.spec().name == name)
    }

    fn listed_tool(&self, tool: &dyn Tool) -> Value {
        let spec = tool.spec();
        let mut listed = json!({
            "name": spec.name,
            "description": spec.description,
            "inputSchema": spec.input_schema,
        });
        if let Some(title) = &spec.title {
            listed["title"] = json!(title);
        }
        if let Some(schema) = &spec.output_schema {
            listed["outputSchema"] = schema.clone();
        }
        let mut annotations = serde_json::to_value(&spec.annotations).unwrap_or(Value::Null);
        if let (Some(title), Value::Object(map)) = (&spec.title, &mut annotations) {
            map.insert("title".into(), json!(title));
        }
        if annotations.as_object().is_some_and(|map| !map.is_empty()) {
            listed["annotations"] = annotations;
        }
        if let Some(meta) = self.inner.catalog.tool_meta(&spec.name) {
            listed["_meta"] = Value::Object(meta);
        }
        listed
    }

    /// A tool's output as an MCP result.
    fn result_json(&self, output: ToolOutput) -> Value {
        let mut content = Vec::new();
        let mut structured = None;
        let mut allowance = MediaAllowance::new();
        for part in output.parts {
            match part {
                ResultPart::Text { text } => content.push(json!({"type": "text", "text": text})),
                ResultPart::Image { media } => {
                    content.push(self.media_block("image", &media, &mut allowance))
                }
                ResultPart::Audio { media } => {
                    content.push(self.media_block("audio", &media, &mut allowance))
                }
                ResultPart::ResourceLink {
                    uri,
                    name,
                    mime,
                    description,
                } => {
                    let mut link = json!({
                        "type": "resource_link",
                        "name": name.unwrap_or_else(|| uri.clone()),
                        "uri": uri,
                    });
                    if let Some(mime) = mime {
                        link["mimeType"] = json!(mime);
                    }
                    if let Some(description) = description {
                        link["description"] = json!(description);
                    }
                    content.push(link);
                }
                ResultPart::Resource {
                    uri,
                    mime,
                    text,
                    media,
                } => {
                    let mut resource = json!({ "uri": uri });
                    if let Some(mime) = &mime {
                        resource["mimeType"] = json!(mime);
                    }
                    match (text, media) {
                        (Some(text), _) => resource["text"] = json!(text),
                        (None, Some(media)) => match self.served_bytes(&media, &mut allowance) {
                            Ok(bytes) => resource["blob"] = json!(base64_of(&bytes)),
                            Err(e) => resource["text"] = json!(format!("[{e}]")),
                        },
                        (None, None) => resource["text"] = json!(""),
                    }
                    content.push(json!({"type": "resource", "resource": resource}));
                }
                ResultPart::Structured { value } => {
                    // Clients that read only content see the JSON as text too.
                    content.push(json!({"type": "text", "text": value.to_string()}));
                    structured = Some(value);
                }
                // Conduit's own tools have no views; a view's structured content is still
                // the result's.
                ResultPart::View {
                    structured: value, ..
                } => {
                    if let Some(value) = value {
                        structured = Some(value);
                    }
                }
                ResultPart::LongText { preview, media } => {
                    let text = match self.served_bytes(&media, &mut allowance) {
                        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                        Err(e) => format!("{preview}\n[the rest is not available: {e}]"),
                    };
                    content.push(json!({"type": "text", "text": text}));
                }
            }
        }
        let mut result = json!({ "content": content, "isError": output.is_error });
        if let Some(value) = structured {
            result["structuredContent"] = value;
        }
        result
    }

    /// A stored file's bytes for a client, taken from `allowance`.
    fn served_bytes(
        &self,
        media: &conduit_core::content::MediaRef,
        allowance: &mut MediaAllowance,
    ) -> Result<Vec<u8>, String> {
        let before = allowance.left;
        allowance.take(media.bytes)?;
        let bytes = self.inner.media.load(media).map_err(|e| e.to_string())?;
        // The reference's size is what was stored and counted; the file is what is read.
        let read = bytes.len() as u64;
        if read > MAX_SERVED_MEDIA_BYTES {
            return Err(too_large_to_serve(read));
        }
        if read > before {
            return Err(format!(
                "it is {read} bytes, not the {} it was stored as",
                media.bytes
            ));
        }
        allowance.left = before - read;
        Ok(bytes)
    }

    /// A tool's output as an MCP result, made off the async workers and a few at a time
    /// when it carries stored files (reading and encoding 16 MiB takes a while). Over HTTP
    /// (`hold` is the response's) the files first wait for their place among
    /// [`MAX_SERVED_MEDIA_IN_FLIGHT`], which the response then holds.
    async fn result_of(
        &self,
        output: ToolOutput,
        hold: Option<&ResponseHold>,
    ) -> Result<Value, ErrorData> {
        let sent = MediaAllowance::sent_by(&output.parts);
        if output.parts.iter().all(|part| part.media().is_none()) {
            return Ok(self.result_json(output));
        }
        if let Some(hold) = hold
            && sent > 0
        {
            let places = self.places_in_flight(sent).await?;
            hold.places.lock().push(places);
        }
        let _turn = self
            .inner
            .media_results
            .acquire()
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let server = self.clone();
        tokio::task::spawn_blocking(move || server.result_json(output))
            .await
            .map_err(|e| ErrorData::internal_error(format!("making the result failed: {e}"), None))
    }

    /// Places among [`MAX_SERVED_MEDIA_IN_FLIGHT`] for `bytes` (at most
    /// [`MAX_SERVED_MEDIA_BYTES`]), waited for at most [`MEDIA_IN_FLIGHT_WAIT`].
    async fn places_in_flight(
        &self,
        bytes: u64,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, ErrorData> {
        // At most 16,384 places, a KiB each.
        let kib = bytes.min(MAX_SERVED_MEDIA_BYTES).div_ceil(1024) as u32;
        let places = Arc::clone(&self.inner.media_in_flight).acquire_many_owned(kib);
        tokio::time::timeout(MEDIA_IN_FLIGHT_WAIT, places)
            .await
            .map_err(|_| {
                ErrorData::internal_error(
                    format!(
                        "Conduit is already sending clients {} MiB of stored files that they \
                         have not finished reading; try again shortly",
                        MAX_SERVED_MEDIA_IN_FLIGHT / (1024 * 1024)
                    ),
                    None,
                )
            })?
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    fn media_block(
        &self,
        kind: &str,
        media: &conduit_core::content::MediaRef,
        allowance: &mut MediaAllowance,
    ) -> Value {
        match self.served_bytes(media, allowance) {
            Ok(bytes) => json!({"type": kind, "data": base64_of(&bytes), "mimeType": media.mime}),
            Err(e) => {
                json!({"type": "text", "text": format!("[the {kind} is not available: {e}]")})
            }
        }
    }

    fn log_threshold(&self, context: &RequestContext<RoleServer>) -> LogThreshold {
        let stateless = context
            .meta
            .protocol_version()
            .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str());
        #[allow(deprecated)]
        let requested = context.meta.log_level().and_then(|level| {
            serde_json::to_value(level)
                .ok()
                .and_then(|v| v.as_str().and_then(level_rank))
        });
        match (requested, *self.session.log_level.lock(), stateless) {
            (Some(rank), _, _) | (None, Some(rank), false) => LogThreshold::AtLeast(rank),
            (None, _, true) => LogThreshold::None,
            (None, None, false) => LogThreshold::All,
        }
    }

    /// Runs `tool` for a client's call, holding `running` (the call's places) until its
    /// work ends: given back with the output, or, for a cancelled call that does not end
    /// within [`CANCEL_GRACE`], kept by the call, which finishes on its own (a tool waiting
    /// on blocking work, as the history's searches, cannot be dropped mid-way, and its
    /// place must not come back while the work goes on).
    async fn run_tool(
        &self,
        tool: Arc<dyn Tool>,
        arguments: Value,
        context: &RequestContext<RoleServer>,
        running: RunningPlaces,
    ) -> (ToolOutput, Option<RunningPlaces>) {
        let progress_token = context.meta.get_progress_token();
        let (sender, mut received) = tokio::sync::mpsc::unbounded_channel::<Progress>();
        // Progress goes out in order, before the result (the forwarder is awaited).
        let peer = context.peer.clone();
        let forwarder = conduit_core::task::spawn(async move {
            while let Some(progress) = received.recv().await {
                let Some(token) = progress_token.clone() else {
                    continue;
                };
                let mut param = ProgressNotificationParam::new(token, progress.progress);
                param.total = progress.total;
                param.message = progress.message;
                if peer.notify_progress(param).await.is_err() {
                    return;
                }
            }
        });
        let sink: conduit_core::tool::ProgressSink = Arc::new(move |progress| {
            let _ = sender.send(progress);
        });
        let cancel = context.ct.child_token();
        let call_context = ToolContext::new(cancel.clone(), sink);
        let caller = Caller {
            peer: context.peer.clone(),
            logs: self.log_threshold(context),
        };
        let name = tool.spec().name.clone();
        let call = CALLER.scope(
            caller,
            async move { tool.call(arguments, call_context).await },
        );
        let mut unfinished = Unfinished(Some(name.clone()));
        let mut call = Box::pin(call);
        let finished = |output: Result<ToolOutput, conduit_core::tool::ToolError>| match output {
            Ok(output) => output,
            Err(e) => ToolOutput::error(e.0),
        };
        let output = tokio::select! {
            biased;
            output = &mut call => Ok(finished(output)),
            () = cancel.cancelled() => {
                // A tool that honours its token ends on its own (and cleans up); one that
                // does not is answered after a grace period and left to finish.
                match tokio::time::timeout(CANCEL_GRACE, &mut call).await {
                    Ok(output) => Ok(finished(output)),
                    Err(_) => Err(ToolOutput::error("the call was cancelled")),
                }
            }
        };
        if cancel.is_cancelled() {
            tracing::info!(tool = %name, "a served tool call stopped: its client cancelled it");
        }
        unfinished.0 = None;
        match output {
            Ok(output) => {
                let _ = forwarder.await;
                (output, Some(running))
            }
            Err(output) => {
                // The call holds the progress sender until it ends: its progress is no
                // longer sent, and the answer does not wait for it.
                forwarder.abort();
                conduit_core::task::spawn(async move {
                    let _ = call.await;
                    tracing::info!(tool = %name, "a cancelled served tool call finished its work");
                    drop(running);
                });
                (output, None)
            }
        }
    }
}

/// How long a cancelled tool may take to end on its own before it is dropped.
const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Notes a call dropped before it finished (its session ended under it).
struct Unfinished(Option<String>);

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(tool) = self.0.take() {
            tracing::info!(%tool, "a served tool call stopped: its session ended");
        }
    }
}

/// Serving failed (the transport could not start or broke).
#[derive(Debug, Clone, thiserror::Error)]
#[error("serving MCP failed: {0}")]
pub struct ServeError(pub String);

fn base64_of(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A value of an rmcp type from its JSON form (rmcp's types are non-exhaustive).
fn from_json<T: DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value)
        .map_err(|e| ErrorData::internal_error(format!("building the answer failed: {e}"), None))
}

/// A result of an rmcp type from its JSON form, marked complete (2026-07-28 requires
/// `resultType`; rmcp strips it for peers of older versions).
fn complete_result<T: DeserializeOwned>(mut value: Value) -> Result<T, ErrorData> {
    if let Value::Object(map) = &mut value {
        map.insert("resultType".into(), json!("complete"));
    }
    from_json(value)
}

fn to_json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn catalog_error(error: CatalogError) -> ErrorData {
    match error {
        CatalogError::NotFound(what) => ErrorData::new(
            ErrorCode::RESOURCE_NOT_FOUND,
            format!("not found: {what}"),
            Some(json!({ "uri": what })),
        ),
        CatalogError::InvalidArguments(message) => ErrorData::invalid_params(message, None),
        CatalogError::MissingClientCapability(required) => match from_json(required) {
            Ok(required) => ErrorData::missing_required_client_capability(required),
            Err(e) => e,
        },
        CatalogError::Failed(message) => ErrorData::internal_error(message, None),
    }
}

fn resource_json(body: ResourceBody) -> Value {
    let mut resource = json!({ "uri": body.uri });
    if let Some(mime) = body.mime_type {
        resource["mimeType"] = json!(mime);
    }
    match body.data {
        ResourceData::Text(text) => resource["text"] = json!(text),
        ResourceData::Binary(bytes) => resource["blob"] = json!(base64_of(&bytes)),
    }
    resource
}

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities: ServerCapabilities = serde_json::from_value(json!({
            "tools": { "listChanged": true },
            "resources": { "listChanged": true, "subscribe": true },
            "prompts": { "listChanged": true },
            "completions": {},
            "logging": {},
        }))
        .unwrap_or_default();
        let mut info = ServerConfig::new(capabilities);
        info.server_info =
            rmcp::model::Implementation::new(self.inner.catalog.name(), env!("CARGO_PKG_VERSION"));
        info.instructions = self.inner.catalog.instructions();
        info
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.forward_changes(context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Value> = self
            .inner
            .catalog
            .tools()
            .iter()
            .map(|tool| self.listed_tool(tool.as_ref()))
            .collect();
        complete_result(json!({ "tools": tools }))
    }

    /// A tool's listing, which rmcp's HTTP transport checks `Mcp-Param-*` headers against
    /// (`x-mcp-header` in the input schema).
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let tool = self.tool(name)?;
        from_json(self.listed_tool(tool.as_ref())).ok()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let running = self.start_running()?;
        let name = request.name.to_string();
        let client_capabilities = context
            .client_capabilities()
            .map(|caps| to_json(&caps))
            .unwrap_or_else(|| json!({}));
        if let Some(required) = self.inner.catalog.tool_requires(&name) {
            let missing = required.as_object().is_some_and(|needed| {
                needed
                    .keys()
                    .any(|key| client_capabilities.get(key).is_none())
            });
            if missing {
                return Err(catalog_error(CatalogError::MissingClientCapability(
                    required,
                )));
            }
        }
        let raw = RawRequest {
            method: "tools/call",
            name: name.clone(),
            params: to_json(&request),
            client_capabilities,
        };
        if let Some(answer) = self.inner.catalog.answer_raw(&raw).await {
            let answer = answer.map_err(catalog_error)?;
            return if answer["resultType"] == "input_required" {
                Ok(CallToolResponse::InputRequired(from_json(answer)?))
            } else {
                Ok(complete_result::<CallToolResult>(answer)?.into())
            };
        }
        let Some(tool) = self.tool(&name) else {
            return Err(ErrorData::invalid_params(
                format!("there is no tool named {name:?}"),
                None,
            ));
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let (output, _running) = self.run_tool(tool, arguments, &context, running).await;
        let result: CallToolResult =
            complete_result(self.result_of(output, response_hold(&context)).await?)?;
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let _running = self.start_running()?;
        let resources = self
            .inner
            .catalog
            .resources()
            .await
            .map_err(catalog_error)?;
        complete_result(json!({ "resources": to_json(&resources) }))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let templates = self.inner.catalog.resource_templates();
        complete_result(json!({ "resourceTemplates": to_json(&templates) }))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let _running = self.start_running()?;
        // Over HTTP a read takes places for the most a resource sends before reading (a
        // stored file, up to 16 MiB) and keeps those its contents need with the response.
        let hold = response_hold(&context);
        let mut places = match hold {
            Some(_) => Some(self.places_in_flight(MAX_SERVED_MEDIA_BYTES).await?),
            None => None,
        };
        let bodies = self
            .inner
            .catalog
            .read_resource(&request.uri)
            .await
            .map_err(catalog_error)?;
        let sent: u64 = bodies
            .iter()
            .map(|body| match &body.data {
                ResourceData::Text(text) => text.len() as u64,
                ResourceData::Binary(bytes) => bytes.len() as u64,
            })
            .sum();
        refuse_past_answer_size("the resource", sent)?;
        if let (Some(hold), Some(mut taken)) = (hold, places.take()) {
            let kept = sent.div_ceil(1024) as usize;
            if let Some(spare) = taken.split(taken.num_permits().saturating_sub(kept)) {
                drop(spare);
            }
            hold.places.lock().push(taken);
        }
        let contents: Vec<Value> = bodies.into_iter().map(resource_json).collect();
        let result: ReadResourceResult = complete_result(json!({ "contents": contents }))?;
        Ok(result.into())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let mut accepted = rmcp::model::SubscriptionFilter::default();
        accepted.tools_list_changed = requested.tools_list_changed;
        accepted.prompts_list_changed = requested.prompts_list_changed;
        accepted.resources_list_changed = requested.resources_list_changed;
        // rmcp keeps each requested URI the accepted list contains, scanning that list for
        // every one: a list past what a session may hold, or one naming a URI twice, is
        // accepted as none (and `listen` refuses it), so neither a million copies of one
        // URI nor a million distinct ones cost more than one pass, nor are copied here.
        accepted.resource_subscriptions = requested.resource_subscriptions.as_ref().map(|uris| {
            if uris.len() > MAX_SUBSCRIPTIONS || has_duplicates(uris) {
                Vec::new()
            } else {
                // What a session may hold (see `subscribe`): the rest is not accepted.
                uris.iter()
                    .filter(|uri| uri.len() <= MAX_SUBSCRIBED_URI)
                    .cloned()
                    .collect()
            }
        });
        Some(accepted)
    }

    /// A 2026-07-28 `subscriptions/listen` stream: the catalog's changes the client asked
    /// for, until it cancels (rmcp filters by what was accepted and tags each one).
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        if let Some(uris) = &context.requested().resource_subscriptions
            && (uris.len() > MAX_SUBSCRIPTIONS || has_duplicates(uris))
        {
            // Refused, not kept open: the request's list goes with it.
            return Err(ErrorData::invalid_params(
                format!(
                    "a listen stream names at most {MAX_SUBSCRIPTIONS} resources, each once ({} named)",
                    uris.len()
                ),
                None,
            ));
        }
        // Held until this stream ends (its client cancels it or goes away).
        let Ok(_place) = self.inner.listens.clone().try_acquire_owned() else {
            return Err(ErrorData::invalid_request(
                format!(
                    "{MAX_LISTENS} listen streams are open, the most this server keeps: cancel one first"
                ),
                None,
            ));
        };
        let Some(mut changes) = self.inner.catalog.changes() else {
            context.cancelled().await;
            return Ok(());
        };
        let wanted = context.accepted();
        loop {
            let change = tokio::select! {
                () = context.cancelled() => return Ok(()),
                change = changes.recv() => change,
            };
            let sink = context.sink();
            let now = match change {
                Ok(change) => vec![change],
                // Missed changes: every list the client asked about changed.
                Err(broadcast::error::RecvError::Lagged(_)) => every_list(),
                Err(broadcast::error::RecvError::Closed) => {
                    context.cancelled().await;
                    return Ok(());
                }
            };
            for change in now {
                let sent = match change {
                    CatalogChange::Tools if wanted.tools_list_changed == Some(true) => {
                        sink.notify_tool_list_changed().await
                    }
                    CatalogChange::Prompts if wanted.prompts_list_changed == Some(true) => {
                        sink.notify_prompt_list_changed().await
                    }
                    CatalogChange::Resources if wanted.resources_list_changed == Some(true) => {
                        sink.notify_resource_list_changed().await
                    }
                    CatalogChange::ResourceUpdated(uri)
                        if wanted
                            .resource_subscriptions
                            .as_ref()
                            .is_some_and(|uris| uris.contains(&uri)) =>
                    {
                        sink.notify_resource_updated(uri).await
                    }
                    _ => Ok(()),
                };
                if sent.is_err() {
                    return Ok(());
                }
            }
        }
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let mut held = self.session.subscriptions.lock();
        may_subscribe(&held, &request.uri)?;
        held.insert(request.uri);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.session.subscriptions.lock().remove(&request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompts = self.inner.catalog.prompts();
        complete_result(json!({ "prompts": to_json(&prompts) }))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let _running = self.start_running()?;
        let raw = RawRequest {
            method: "prompts/get",
            name: request.name.clone(),
            params: to_json(&request),
            client_capabilities: context
                .client_capabilities()
                .map(|caps| to_json(&caps))
                .unwrap_or_else(|| json!({})),
        };
        if let Some(answer) = self.inner.catalog.answer_raw(&raw).await {
            let answer = answer.map_err(catalog_error)?;
            return if answer["resultType"] == "input_required" {
                Ok(GetPromptResponse::InputRequired(from_json(answer)?))
            } else {
                Ok(complete_result::<GetPromptResult>(answer)?.into())
            };
        }
        let mut arguments = HashMap::new();
        for (key, value) in request.arguments.unwrap_or_default() {
            let value = match value {
                Value::String(text) => text,
                other => other.to_string(),
            };
            arguments.insert(key, value);
        }
        let known = self
            .inner
            .catalog
            .prompts()
            .into_iter()
            .find(|prompt| prompt.name == request.name);
        let Some(known) = known else {
            return Err(ErrorData::invalid_params(
                format!("there is no prompt named {:?}", request.name),
                None,
            ));
        };
        if let Some(missing) = known
            .arguments
            .iter()
            .find(|argument| argument.required && !arguments.contains_key(&argument.name))
        {
            return Err(ErrorData::invalid_params(
                format!("the argument {:?} is required", missing.name),
                None,
            ));
        }
        // Over HTTP the answer takes places for the most it may send before it is built,
        // and keeps those it needs with the response (as a resource read does).
        let hold = response_hold(&context);
        let mut places = match hold {
            Some(_) => Some(self.places_in_flight(MAX_SERVED_MEDIA_BYTES).await?),
            None => None,
        };
        let body = self
            .inner
            .catalog
            .get_prompt(&request.name, &arguments)
            .await
            .map_err(|e| match e {
                CatalogError::NotFound(what) => ErrorData::invalid_params(what, None),
                other => catalog_error(other),
            })?;
        let messages: Vec<Value> = body
            .messages
            .into_iter()
            .map(|(role, content)| {
                let role = match role {
                    PromptRole::User => "user",
                    PromptRole::Assistant => "assistant",
                };
                let content = match content {
                    PromptContent::Text(text) => json!({"type": "text", "text": text}),
                    PromptContent::Image { data, mime_type } => {
                        json!({"type": "image", "data": base64_of(&data), "mimeType": mime_type})
                    }
                    PromptContent::Audio { data, mime_type } => {
                        json!({"type": "audio", "data": base64_of(&data), "mimeType": mime_type})
                    }
                    PromptContent::Resource(body) => {
                        json!({"type": "resource", "resource": resource_json(body)})
                    }
                };
                json!({ "role": role, "content": content })
            })
            .collect();
        let mut result = json!({ "messages": messages });
        if let Some(description) = body.description {
            result["description"] = json!(description);
        }
        // A conversation's text can be large: bounded like a resource, and over HTTP it
        // holds its places among the bytes on their way to clients until it is read.
        let size = json_size(&result);
        refuse_past_answer_size("the prompt", size)?;
        if let (Some(hold), Some(mut taken)) = (hold, places.take()) {
            let kept = size.div_ceil(1024) as usize;
            if let Some(spare) = taken.split(taken.num_permits().saturating_sub(kept)) {
                drop(spare);
            }
            hold.places.lock().push(taken);
        }
        let result: GetPromptResult = complete_result(result)?;
        Ok(result.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let _running = self.start_running()?;
        let reference = to_json(&request.r#ref);
        let target = match reference["type"].as_str() {
            Some("ref/prompt") => {
                CompletionTarget::Prompt(reference["name"].as_str().unwrap_or_default().into())
            }
            _ => CompletionTarget::ResourceTemplate(
                reference["uri"].as_str().unwrap_or_default().into(),
            ),
        };
        let context = request
            .context
            .and_then(|context| context.arguments)
            .unwrap_or_default();
        let mut values = self
            .inner
            .catalog
            .complete(
                &target,
                &request.argument.name,
                &request.argument.value,
                &context,
            )
            .await
            .map_err(catalog_error)?;
        let total = values.len();
        values.truncate(MAX_COMPLETIONS);
        complete_result(json!({
            "completion": { "values": values, "total": total, "hasMore": total > MAX_COMPLETIONS }
        }))
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tracing::debug!(level = ?request.level, "an MCP client set its log level");
        let rank = serde_json::to_value(request.level)
            .ok()
            .and_then(|v| v.as_str().and_then(level_rank));
        *self.session.log_level.lock() = rank;
        Ok(())
    }
}

impl InProcessServer for ToolServer {
    fn serve(&self, transport: tokio::io::DuplexStream) -> BoxFuture<'static, ()> {
        let server = Self {
            inner: self.inner.clone(),
            session: Arc::new(SessionState {
                running: None,
                ..SessionState::default()
            }),
        };
        Box::pin(async move {
            match server.serve(transport).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => tracing::warn!(error = %e, "an in-process MCP session failed to start"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;
    use std::time::Duration;

    use conduit_core::tool::Tool;
    use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
    use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceError, ServiceExt};
    use tokio::sync::broadcast;

    use super::{
        Catalog, CatalogChange, MAX_LISTENS, MAX_SERVED_MEDIA_BYTES, MAX_SERVED_MEDIA_IN_FLIGHT,
        MAX_SUBSCRIBED_URI, MAX_SUBSCRIPTIONS, ResponseHold, ResultPart, ToolOutput, ToolServer,
        base64_of, may_subscribe,
    };

    /// No tools; changes sent on `changes` reach listeners.
    struct Changing {
        changes: broadcast::Sender<CatalogChange>,
    }

    #[async_trait::async_trait]
    impl Catalog for Changing {
        fn tools(&self) -> Vec<Arc<dyn Tool>> {
            Vec::new()
        }

        fn changes(&self) -> Option<broadcast::Receiver<CatalogChange>> {
            Some(self.changes.subscribe())
        }
    }

    /// A server over a `Changing` catalog, and the sender of its changes.
    fn changing_server() -> (ToolServer, broadcast::Sender<CatalogChange>) {
        let (changes, _) = broadcast::channel(16);
        let catalog = Arc::new(Changing {
            changes: changes.clone(),
        });
        let server = ToolServer::new(catalog, conduit_core::testing::MemoryMedia::new());
        (server, changes)
    }

    /// A stored file larger than a client is sent is named with its size in the result,
    /// not read and encoded; a smaller one is sent whole.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_result_names_a_stored_file_past_the_served_size_instead_of_sending_it() {
        let (server, _changes) = changing_server();
        let media = server.inner.media.clone();
        let large = media
            .put(
                &vec![0u8; MAX_SERVED_MEDIA_BYTES as usize + 1],
                Some("image/png"),
            )
            .unwrap();
        let small = media.put(b"tiny", Some("image/png")).unwrap();
        let output = ToolOutput {
            parts: vec![
                ResultPart::Image { media: large },
                ResultPart::Image { media: small },
            ],
            is_error: false,
        };
        let result = server.result_of(output, None).await.unwrap();
        let content = result["content"].as_array().unwrap();
        assert_eq!(content[0]["type"], "text");
        let said = content[0]["text"].as_str().unwrap();
        assert!(
            said.contains("the image is not available: it is 16.0 MiB, more than the 16 MiB"),
            "{said}"
        );
        assert_eq!(content[1]["type"], "image");
        assert_eq!(content[1]["data"], base64_of(b"tiny"));
    }

    /// A result's stored files are sent up to 16 MiB together; the next one is named.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_result_s_files_together_stop_at_the_served_size() {
        let (server, _changes) = changing_server();
        let media = server.inner.media.clone();
        let seven_mib = vec![7u8; 7 * 1024 * 1024];
        let parts = (0..3)
            .map(|_| ResultPart::Image {
                media: media.put(&seven_mib, Some("image/png")).unwrap(),
            })
            .collect();
        let output = ToolOutput {
            parts,
            is_error: false,
        };
        let result = server.result_of(output, None).await.unwrap();
        let content = result["content"].as_array().unwrap();
        assert_eq!(content[0]["type"], "image");
        assert_eq!(content[1]["type"], "image");
        assert_eq!(content[2]["type"], "text");
        let said = content[2]["text"].as_str().unwrap();
        assert!(
            said.contains("together pass the 16 MiB Conduit sends a client in one result"),
            "{said}"
        );
    }

    /// Places for stored files in flight over HTTP: used.
    fn in_flight(server: &ToolServer) -> u64 {
        (MAX_SERVED_MEDIA_IN_FLIGHT / 1024
            - server.inner.media_in_flight.available_permits() as u64)
            * 1024
    }

    /// Results whose responses are not read hold 64 MiB of files at most: the next waits
    /// for a place and, after a while, fails saying why; a response gone gives its places
    /// back once the session's copy has expired. (Time is paused: the waits are virtual.)
    #[tokio::test(start_paused = true)]
    async fn files_for_unread_http_responses_are_bounded_and_given_back_when_they_are_gone() {
        let (server, _changes) = changing_server();
        let media = server.inner.media.clone();
        let full = media
            .put(
                &vec![1u8; MAX_SERVED_MEDIA_BYTES as usize],
                Some("image/png"),
            )
            .unwrap();
        let output = || ToolOutput {
            parts: vec![ResultPart::Image {
                media: full.clone(),
            }],
            is_error: false,
        };
        let unread: Vec<ResponseHold> = (0..4).map(|_| ResponseHold::default()).collect();
        for hold in &unread {
            let result = server.result_of(output(), Some(hold)).await.unwrap();
            assert_eq!(result["content"][0]["type"], "image");
        }
        assert_eq!(in_flight(&server), MAX_SERVED_MEDIA_IN_FLIGHT);

        let waited = tokio::time::Instant::now();
        let refused = server
            .result_of(output(), Some(&ResponseHold::default()))
            .await
            .unwrap_err();
        assert!(
            refused
                .message
                .contains("already sending clients 64 MiB of stored files"),
            "{refused:?}"
        );
        assert!(waited.elapsed() >= Duration::from_secs(30));
        // A result without files does not wait.
        let text = ToolOutput {
            parts: vec![ResultPart::Text { text: "hi".into() }],
            is_error: false,
        };
        server
            .result_of(text, Some(&ResponseHold::default()))
            .await
            .unwrap();

        // One response written out: its places come back after the kept copy expires.
        let mut unread = unread;
        drop(unread.pop());
        assert_eq!(in_flight(&server), MAX_SERVED_MEDIA_IN_FLIGHT);
        let next = ResponseHold::default();
        let gone = tokio::time::Instant::now();
        server.result_of(output(), Some(&next)).await.unwrap();
        assert!(gone.elapsed() >= crate::http::COMPLETED_RESPONSE_KEPT);
        // Over stdio (no hold) nothing is counted.
        server.result_of(output(), None).await.unwrap();
        assert_eq!(in_flight(&server), MAX_SERVED_MEDIA_IN_FLIGHT);
    }

    /// Over the HTTP endpoint a tool's files count while its response is on its way and
    /// for as long as the session keeps a copy, then no more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_http_tool_result_holds_its_files_place_until_its_response_has_expired() {
        use rmcp::model::CallToolRequestParams;
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

        /// A tool returning one stored picture.
        struct Picture {
            spec: conduit_core::tool::ToolSpec,
            media: conduit_core::content::MediaRef,
        }
        #[async_trait::async_trait]
        impl Tool for Picture {
            fn spec(&self) -> &conduit_core::tool::ToolSpec {
                &self.spec
            }
            async fn call(
                &self,
                _arguments: serde_json::Value,
                _context: conduit_core::tool::ToolContext,
            ) -> Result<ToolOutput, conduit_core::tool::ToolError> {
                Ok(ToolOutput {
                    parts: vec![ResultPart::Image {
                        media: self.media.clone(),
                    }],
                    is_error: false,
                })
            }
        }
        /// The tool, and a 1 MiB resource at any URI.
        struct Pictures(Arc<dyn Tool>);
        #[async_trait::async_trait]
        impl Catalog for Pictures {
            fn tools(&self) -> Vec<Arc<dyn Tool>> {
                vec![self.0.clone()]
            }
            async fn read_resource(
                &self,
                uri: &str,
            ) -> Result<Vec<super::ResourceBody>, super::CatalogError> {
                Ok(vec![super::ResourceBody {
                    uri: uri.to_owned(),
                    mime_type: Some("image/png".into()),
                    data: super::ResourceData::Binary(vec![3u8; 1024 * 1024]),
                }])
            }
        }

        let media = conduit_core::testing::MemoryMedia::new();
        let picture = conduit_core::media::MediaStore::put(
            &*media,
            &vec![2u8; 4 * 1024 * 1024],
            Some("image/png"),
        )
        .unwrap();
        let tool: Arc<dyn Tool> = Arc::new(Picture {
            spec: conduit_core::testing::tool_spec("picture"),
            media: picture,
        });
        let server = ToolServer::new(Arc::new(Pictures(tool)), media);
        let (url, stop, serving) = served_over_http(&server).await;
        let config =
            StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header("token-1");
        let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
        let result = client
            .call_tool(CallToolRequestParams::new("picture"))
            .await
            .unwrap();
        assert_eq!(
            serde_json::to_value(&result).unwrap()["content"][0]["type"],
            "image"
        );
        // Read by the client; the session keeps its copy a while, and the places with it.
        assert_eq!(in_flight(&server), 4 * 1024 * 1024);
        // A resource read takes 16 MiB of places before reading and keeps what it sends.
        client
            .read_resource(rmcp::model::ReadResourceRequestParams::new(
                "conduit://media/one",
            ))
            .await
            .unwrap();
        assert_eq!(in_flight(&server), 5 * 1024 * 1024);
        let deadline = tokio::time::Instant::now()
            + crate::http::COMPLETED_RESPONSE_KEPT
            + Duration::from_secs(10);
        while in_flight(&server) != 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} bytes still held",
                in_flight(&server)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        client.cancel().await.unwrap();
        stop.cancel();
        serving.await.unwrap().unwrap();
    }

    /// A tool that does not honour its cancel token, its work blocking (as the history's
    /// searches do): a cancelled call of it is let go after the grace period, and keeps its
    /// place until its work ends. It used to hang for good: the answer waited for the
    /// progress forwarder, which waited for the call the answer held.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_call_that_ignores_its_token_keeps_its_place_until_its_work_ends() {
        use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
        use std::sync::atomic::{AtomicBool, Ordering};

        struct Stubborn {
            spec: conduit_core::tool::ToolSpec,
            done: Arc<AtomicBool>,
        }
        #[async_trait::async_trait]
        impl Tool for Stubborn {
            fn spec(&self) -> &conduit_core::tool::ToolSpec {
                &self.spec
            }
            async fn call(
                &self,
                _arguments: serde_json::Value,
                _context: conduit_core::tool::ToolContext,
            ) -> Result<ToolOutput, conduit_core::tool::ToolError> {
                tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_secs(4)))
                    .await
                    .map_err(|e| conduit_core::tool::ToolError(e.to_string()))?;
                self.done.store(true, Ordering::SeqCst);
                Ok(ToolOutput {
                    parts: vec![ResultPart::Text {
                        text: "late".into(),
                    }],
                    is_error: false,
                })
            }
        }
        struct One(Arc<dyn Tool>);
        #[async_trait::async_trait]
        impl Catalog for One {
            fn tools(&self) -> Vec<Arc<dyn Tool>> {
                vec![self.0.clone()]
            }
        }
        let done = Arc::new(AtomicBool::new(false));
        let tool: Arc<dyn Tool> = Arc::new(Stubborn {
            spec: conduit_core::testing::tool_spec("stubborn"),
            done: done.clone(),
        });
        let server = ToolServer::new(
            Arc::new(One(tool)),
            conduit_core::testing::MemoryMedia::new(),
        );
        let places = server.inner.running.clone();
        let all = places.available_permits();
        let (near, far) = tokio::io::duplex(1 << 16);
        let session = server.session();
        tokio::spawn(async move {
            if let Ok(running) = session.serve(far).await {
                let _ = running.waiting().await;
            }
        });
        let client = ().serve(near).await.unwrap();
        let handle = client
            .send_request_with_option(
                ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new(
                    "stubborn",
                ))),
                rmcp::service::PeerRequestOptions::no_options(),
            )
            .await
            .unwrap();
        let started = tokio::time::Instant::now();
        while places.available_permits() == all {
            assert!(started.elapsed() < Duration::from_secs(10), "never ran");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        handle.cancel(Some("enough".into())).await.unwrap();
        // Past the grace period the work goes on, and its place with it.
        tokio::time::sleep(super::CANCEL_GRACE + Duration::from_millis(300)).await;
        assert!(!done.load(Ordering::SeqCst));
        assert_eq!(places.available_permits(), all - 1);
        // Once the work ends, the place comes back.
        while places.available_permits() != all {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the place never came back"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(done.load(Ordering::SeqCst));
        // The server still answers.
        let listed = client.list_all_tools().await.unwrap();
        assert_eq!(listed.len(), 1);
        client.cancel().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn listen_streams_past_the_limit_are_refused_until_one_ends() {
        let (server, changes) = changing_server();
        let probe = server.session();
        let client = client_2026(server).await;
        let tools = SubscriptionFilter::builder().tools_list_changed().build();
        let mut open = Vec::new();
        for _ in 0..MAX_LISTENS {
            open.push(client.listen(tools.clone()).await.unwrap());
        }
        // The acknowledgement comes before the server's side listens: wait for it.
        until_listening(&probe, MAX_LISTENS).await;
        // Every open stream hears a change.
        changes.send(CatalogChange::Tools).unwrap();
        for stream in &mut open {
            hears_tools_changed(stream).await;
        }
        // One more is refused, saying why.
        let mut refused = client.listen(tools.clone()).await.unwrap();
        let said = tokio::time::timeout(Duration::from_secs(10), refused.next())
            .await
            .unwrap()
            .unwrap_err();
        let ServiceError::McpError(error) = said else {
            panic!("{said:?}");
        };
        assert!(
            error.message.contains("64 listen streams are open")
                && error.message.contains("cancel one"),
            "{error:?}"
        );
        // A cancelled stream frees its place (once the server has seen the cancel).
        open[0].cancel().await.unwrap();
        until_listening(&probe, MAX_LISTENS - 1).await;
        let mut again = client.listen(tools.clone()).await.unwrap();
        until_listening(&probe, MAX_LISTENS).await;
        changes.send(CatalogChange::Tools).unwrap();
        hears_tools_changed(&mut again).await;
        again.cancel().await.unwrap();
    }

    /// A listen naming more resources than a session may hold, or one resource twice, is
    /// accepted as naming none (rmcp's intersection with it is one pass, whatever the
    /// request's size) and refused, saying why; a short list is listened to.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_listen_naming_too_many_resources_or_one_twice_is_refused() {
        use rmcp::ServerHandler as _;
        let (server, _changes) = changing_server();
        let naming = |uris: Vec<String>| {
            SubscriptionFilter::builder()
                .tools_list_changed()
                .resource_subscriptions(uris)
                .build()
        };
        let million_of_one = naming(vec!["conduit://a".to_owned(); 1_000_000]);
        let accepted = server
            .accepted_subscription_filter(&million_of_one)
            .unwrap();
        assert_eq!(accepted.resource_subscriptions, Some(Vec::new()));
        assert_eq!(
            million_of_one
                .intersection(&accepted)
                .resource_subscriptions,
            None
        );

        let probe = server.session();
        let client = client_2026(server).await;
        let too_many = (0..=MAX_SUBSCRIPTIONS)
            .map(|n| format!("conduit://conversation/{n}"))
            .collect();
        let twice = vec!["conduit://a".to_owned(), "conduit://a".to_owned()];
        for refused in [naming(too_many), naming(twice)] {
            let mut stream = client.listen(refused).await.unwrap();
            let said = loop {
                match tokio::time::timeout(Duration::from_secs(10), stream.next())
                    .await
                    .unwrap()
                {
                    Ok(Some(_)) => continue,
                    other => break other,
                }
            };
            let Err(ServiceError::McpError(error)) = said else {
                panic!("{said:?}");
            };
            assert!(
                error.message.contains("at most 1000 resources, each once"),
                "{error:?}"
            );
        }
        until_listening(&probe, 0).await;
        let _open = client
            .listen(naming(vec![
                "conduit://a".to_owned(),
                "conduit://b".to_owned(),
            ]))
            .await
            .unwrap();
        until_listening(&probe, 1).await;
    }

    /// A session with [`MAX_SESSION_RUNNING`] requests running is refused one more, saying
    /// why, while another session is not; past [`MAX_RUNNING`] over all sessions, every
    /// session is refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_past_the_running_bounds_are_refused() {
        let (server, _changes) = changing_server();
        let client_of = |session: ToolServer| async move {
            let (near, far) = tokio::io::duplex(1 << 16);
            tokio::spawn(async move {
                if let Ok(running) = session.serve(far).await {
                    let _ = running.waiting().await;
                }
            });
            ().serve(near).await.unwrap()
        };
        let refusal = |said: Result<rmcp::model::CallToolResult, ServiceError>| match said {
            Err(ServiceError::McpError(error)) => error.message.to_string(),
            other => panic!("{other:?}"),
        };
        let busy = server.session();
        let held: Vec<_> = (0..super::MAX_SESSION_RUNNING)
            .map(|_| busy.start_running().unwrap())
            .collect();
        let client = client_of(busy.clone()).await;
        let call = || rmcp::model::CallToolRequestParams::new("no_such_tool");
        let refused = refusal(client.call_tool(call()).await);
        assert!(
            refused.contains("this session has 32 requests running"),
            "{refused}"
        );
        let other = client_of(server.session()).await;
        let answered = refusal(other.call_tool(call()).await);
        assert!(answered.contains("no tool named"), "{answered}");
        drop(held);
        let answered = refusal(client.call_tool(call()).await);
        assert!(answered.contains("no tool named"), "{answered}");

        let sessions: Vec<ToolServer> = (0..super::MAX_RUNNING / super::MAX_SESSION_RUNNING)
            .map(|_| server.session())
            .collect();
        let _all: Vec<_> = sessions
            .iter()
            .flat_map(|session| {
                (0..super::MAX_SESSION_RUNNING).map(|_| session.start_running().unwrap())
            })
            .collect();
        let refused = refusal(other.call_tool(call()).await);
        assert!(
            refused.contains("this server has 256 requests running"),
            "{refused}"
        );
    }

    #[test]
    fn an_answer_past_the_served_size_is_refused_saying_how_large_it_is() {
        assert!(super::refuse_past_answer_size("the prompt", MAX_SERVED_MEDIA_BYTES).is_ok());
        let refused = super::refuse_past_answer_size("the prompt", 40 * 1024 * 1024).unwrap_err();
        // Not "invalid request": the client's request was sound.
        assert_eq!(refused.code, rmcp::model::ErrorCode::INTERNAL_ERROR);
        assert!(
            refused
                .message
                .contains("the prompt is 40.0 MiB, more than the 16 MiB"),
            "{refused:?}"
        );
    }

    /// A 2026-07-28 client of a new session of `server`, served in memory.
    async fn client_2026(
        server: ToolServer,
    ) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
        let (near, far) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            if let Ok(running) = server.session().serve(far).await {
                let _ = running.waiting().await;
            }
        });
        ().serve_with_lifecycle(
            near,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap()
    }

    /// The next thing `stream` hears is that the tool list changed.
    async fn hears_tools_changed(stream: &mut rmcp::service::Subscription) {
        let heard = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(
            heard,
            Some(ServerNotification::ToolListChangedNotification(_))
        ));
    }

    /// `server` served over HTTP on a loopback port (bearer token `token-1`): its URL, the
    /// stop and the serving task.
    async fn served_over_http(
        server: &ToolServer,
    ) -> (
        String,
        tokio_util::sync::CancellationToken,
        tokio::task::JoinHandle<Result<(), super::ServeError>>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let stop = tokio_util::sync::CancellationToken::new();
        let serving = tokio::spawn(crate::http::serve_http(
            server.session(),
            listener,
            "token-1".into(),
            stop.clone(),
        ));
        (url, stop, serving)
    }

    /// Waits until `server` holds `open` listen streams.
    async fn until_listening(server: &ToolServer, open: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while MAX_LISTENS - server.inner.listens.available_permits() != open {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} listen streams open, not {open}",
                MAX_LISTENS - server.inner.listens.available_permits()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_http_client_that_goes_away_frees_its_listen_stream() {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

        let (server, _changes) = changing_server();
        let (url, stop, serving) = served_over_http(&server).await;
        for _ in 0..3 {
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header("token-1");
            let client = ()
                .serve_with_lifecycle(
                    StreamableHttpClientTransport::from_config(config),
                    ClientLifecycleMode::Discover {
                        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                    },
                )
                .await
                .unwrap();
            let _stream = client
                .listen(SubscriptionFilter::builder().tools_list_changed().build())
                .await
                .unwrap();
            until_listening(&server, 1).await;
            // Gone without cancelling: the connection closes.
            client.cancel().await.unwrap();
            until_listening(&server, 0).await;
        }
        stop.cancel();
        serving.await.unwrap().unwrap();
    }

    #[test]
    fn a_session_holds_a_bounded_number_of_short_subscriptions() {
        let mut held = BTreeSet::new();
        let long = format!("conduit://conversation/{}", "x".repeat(MAX_SUBSCRIBED_URI));
        let refused = may_subscribe(&held, &long).unwrap_err();
        assert!(
            refused.message.contains("at most 2048 bytes"),
            "{refused:?}"
        );
        for n in 0..MAX_SUBSCRIPTIONS {
            let uri = format!("conduit://conversation/{n}");
            may_subscribe(&held, &uri).unwrap();
            held.insert(uri);
        }
        let refused = may_subscribe(&held, "conduit://conversation/one-more").unwrap_err();
        assert!(refused.message.contains("unsubscribe first"), "{refused:?}");
        // One already held may be asked for again.
        may_subscribe(&held, "conduit://conversation/7").unwrap();
    }
}
