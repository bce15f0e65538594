//! What Conduit serves as an MCP server (`conduit mcp serve`, and in process to its own
//! agent): its tools, conversations as `conduit://conversation/{id}` resources (Markdown),
//! stored media as binary `conduit://media/{hash}` resources, and prompts to summarize or
//! continue a conversation, with completion of conversation ids. The HTTP endpoint's
//! bearer token lives in the secret store.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use conduit_core::content::MediaRef;
use conduit_core::media::MediaStore;
use conduit_core::tool::Tool;
use conduit_mcp::server::{
    Catalog, CatalogChange, CatalogError, CompletionTarget, PromptArgumentInfo, PromptBody,
    PromptContent, PromptInfo, PromptRole, ResourceBody, ResourceData, ResourceInfo,
    ResourceTemplateInfo, ToolServer,
};
use conduit_store::StoreError;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::Host;
use crate::secrets::SecretError;

/// The secret-store name of the HTTP endpoint's bearer token.
pub const TOKEN_SECRET: &str = "mcp-serve-token";

/// Environment variable that serves the MCP conformance suite's fixtures instead of
/// Conduit's own catalog (`1`); read by test builds only (the `test-fixtures` feature).
#[cfg(feature = "test-fixtures")]
pub const CONFORMANCE_ENV: &str = "CONDUIT_MCP_CONFORMANCE";

const CONVERSATION_PREFIX: &str = "conduit://conversation/";
const MEDIA_PREFIX: &str = "conduit://media/";
/// How many recent conversations are listed as resources and offered as completions.
const RECENT: usize = 50;

const SUMMARIZE: &str = "summarize_conversation";
const CONTINUE: &str = "continue_conversation";

/// Who a catalog serves: Conduit's own agent (in process: every built-in tool, the
/// agent offers the enabled ones like any server's), or other MCP clients (only the
/// enabled ones, and in test builds the end-to-end test tools when
/// `CONDUIT_TEST_TOOLS=1`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Audience {
    OwnAgent,
    Clients,
}

/// The tools Conduit serves to other clients, read afresh (a switch in Settings holds
/// at once): the enabled built-in tools, and in test builds the end-to-end test tools
/// when `CONDUIT_TEST_TOOLS=1`.
fn tools_for_clients(host: &Arc<Host>) -> Vec<Arc<dyn Tool>> {
    #[cfg_attr(not(any(test, feature = "test-fixtures")), expect(unused_mut))]
    let mut tools = crate::builtin::enabled_builtin_tools(host).unwrap_or_else(|error| {
        // Serving nothing is the safe reading of settings that cannot be read.
        tracing::warn!(%error, "the settings could not be read: no built-in tool is served");
        Vec::new()
    });
    #[cfg(any(test, feature = "test-fixtures"))]
    if crate::test_tools::enabled() {
        let mut registry = conduit_core::tool::ToolRegistry::new();
        let media: Arc<dyn MediaStore> = host.media.clone();
        crate::test_tools::register(&mut registry, media);
        for spec in registry.specs() {
            if let Some(tool) = registry.get(&spec.name) {
                tools.push(tool.clone());
            }
        }
    }
    tools
}

/// How another app starts Conduit as its MCP server (stdio): ready entries for the
/// config files of Claude Desktop and Cursor (`mcpServers`) and VS Code (`servers`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ServeSnippets {
    pub command: String,
    pub args: Vec<String>,
    pub claude_desktop: String,
    pub cursor: String,
    pub vs_code: String,
}

impl ServeSnippets {
    /// The entries for `command` (the `conduit` binary).
    pub fn for_command(command: String) -> Self {
        let args = vec!["mcp".to_owned(), "serve".to_owned()];
        let pretty =
            |value: serde_json::Value| serde_json::to_string_pretty(&value).unwrap_or_default();
        let entry = serde_json::json!({"command": command, "args": args});
        let mcp_servers = pretty(serde_json::json!({"mcpServers": {"conduit": entry}}));
        Self {
            claude_desktop: mcp_servers.clone(),
            cursor: mcp_servers,
            vs_code: pretty(serde_json::json!({"servers": {"conduit": {
                "type": "stdio", "command": command, "args": args}}})),
            command,
            args,
        }
    }

    /// The entries for the `conduit` binary beside this program, or on PATH.
    pub fn here() -> Self {
        let beside = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|dir| dir.join("conduit")))
            .filter(|path| path.is_file());
        Self::for_command(
            beside.map_or_else(|| "conduit".to_owned(), |path| path.display().to_string()),
        )
    }
}

/// The bearer token of the served HTTP endpoint, and whether it was just created.
pub struct ServeToken {
    pub token: String,
    pub created: bool,
}

impl std::fmt::Debug for ServeToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeToken")
            .field("token", &"[hidden]")
            .field("created", &self.created)
            .finish()
    }
}

impl Host {
    /// The MCP server of what Conduit serves to other clients (in test builds, the
    /// conformance fixtures instead when `CONFORMANCE_ENV` is `1`). A built-in tool
    /// switched on or off in Settings (another process, maybe) reaches connected clients
    /// as a list change.
    pub fn tool_server(self: &Arc<Self>) -> Result<ToolServer, ServedError> {
        // What the tools make for clients is read from memory, what the history holds
        // from the media folder.
        let media: Arc<dyn MediaStore> = self.served_media.clone();
        #[cfg(feature = "test-fixtures")]
        if std::env::var(CONFORMANCE_ENV).is_ok_and(|value| value == "1") {
            let catalog = conduit_mcp::conformance::ConformanceCatalog::new(media.as_ref())?;
            return Ok(ToolServer::new(Arc::new(catalog), media));
        }
        let catalog: Arc<dyn Catalog> = HostCatalog::new(self.clone(), Audience::Clients);
        Ok(ToolServer::new(catalog, media))
    }

    /// The in-process server of Conduit's built-in tools for its own agent (the MCP
    /// runtime's `conduit` server).
    pub fn builtin_server(self: &Arc<Self>) -> ToolServer {
        let media: Arc<dyn MediaStore> = self.media.clone();
        ToolServer::new(HostCatalog::new(self.clone(), Audience::OwnAgent), media)
    }

    /// Serves MCP over stdin and stdout until the client closes the session.
    pub async fn serve_mcp_stdio(self: &Arc<Self>) -> Result<(), ServedError> {
        self.tool_server()?.serve_stdio().await?;
        Ok(())
    }

    /// Starts serving MCP over streamable HTTP on `addr` (loopback unless
    /// `allow_remote`), until `stop` is cancelled.
    pub async fn start_mcp_http(
        self: &Arc<Self>,
        addr: SocketAddr,
        allow_remote: bool,
        stop: CancellationToken,
    ) -> Result<HttpServing, ServedError> {
        conduit_mcp::http::check_bind(addr, allow_remote)?;
        let server = self.tool_server()?;
        let token = self.serve_token()?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| ServedError::Io(format!("cannot listen on {addr}: {e}")))?;
        let bound = listener
            .local_addr()
            .map_err(|e| ServedError::Io(e.to_string()))?;
        let url = served_url(bound);
        tracing::info!(%url, "serving MCP over HTTP");
        let task = tokio::spawn(conduit_mcp::http::serve_http(
            server,
            listener,
            token.token.clone(),
            stop,
        ));
        Ok(HttpServing { url, token, task })
    }

    /// The served HTTP endpoint's bearer token, made (random, 244 bits) and kept in the
    /// secret store on first use.
    pub fn serve_token(&self) -> Result<ServeToken, SecretError> {
        if let Some(token) = self.secrets().get(TOKEN_SECRET)?
            && !token.is_empty()
        {
            return Ok(ServeToken {
                token,
                created: false,
            });
        }
        let token = format!(
            "cdt_{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        self.secrets().set(TOKEN_SECRET, &token)?;
        Ok(ServeToken {
            token,
            created: true,
        })
    }
}

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
pub enum ServedError {
    #[error(transparent)]
    Bind(#[from] conduit_mcp::http::BindError),
    #[error("{0}")]
    Io(String),
    #[error("the bearer token could not be kept: {0}")]
    Secret(#[from] SecretError),
    #[error("the served catalog could not be made: {0}")]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Serve(#[from] conduit_mcp::server::ServeError),
}

/// An HTTP endpoint being served.
pub struct HttpServing {
    /// Where clients reach it.
    pub url: String,
    pub token: ServeToken,
    task: tokio::task::JoinHandle<Result<(), conduit_mcp::server::ServeError>>,
}

impl HttpServing {
    /// Waits up to `patience` for serving to end after `stop` (open streams close),
    /// then ends it regardless; the address is free once this returns.
    pub async fn end_within(mut self, patience: std::time::Duration) -> Result<(), ServedError> {
        match tokio::time::timeout(patience, &mut self.task).await {
            Ok(Ok(result)) => Ok(result?),
            Ok(Err(e)) => Err(ServedError::Io(format!("the server task failed: {e}"))),
            Err(_) => {
                self.task.abort();
                // An aborted task has let go of its listener once it is reaped.
                let _ = (&mut self.task).await;
                Ok(())
            }
        }
    }

    /// Resolves when serving has ended (after `stop`, or on a failure).
    pub async fn finished(self) -> Result<(), ServedError> {
        match self.task.await {
            Ok(result) => Ok(result?),
            Err(e) => Err(ServedError::Io(format!("the server task failed: {e}"))),
        }
    }
}

/// Conduit's own catalog.
struct HostCatalog {
    host: Arc<Host>,
    audience: Audience,
    /// Conduit's own agent gets every built-in tool, made once (the turn offers the
    /// enabled ones); other clients' list is read afresh on each call.
    own_tools: Option<Vec<Arc<dyn Tool>>>,
    changes: broadcast::Sender<CatalogChange>,
    /// Follows the settings file for other clients (the switches of built-in tools).
    _settings_watch: Option<FileWatch>,
    /// Follows the history for other clients (conversations as resources).
    _history_watch: Option<FolderWatch>,
}

impl HostCatalog {
    fn new(host: Arc<Host>, audience: Audience) -> Arc<Self> {
        let changes = broadcast::channel(16).0;
        let own_tools =
            (audience == Audience::OwnAgent).then(|| crate::builtin::builtin_tools(&host));
        let (switches, history) = match audience {
            Audience::OwnAgent => (None, None),
            Audience::Clients => (
                watch_switches(&host, changes.clone()),
                watch_history(&host, changes.clone()),
            ),
        };
        Arc::new(Self {
            host,
            audience,
            own_tools,
            changes,
            _settings_watch: switches,
            _history_watch: history,
        })
    }
}

use conduit_files::{FileWatch, FolderWatch};

/// Watches `dir` (see [`conduit_files::watch_folder`]); `None`, and a warning naming
/// `what` is not followed, when it cannot.
fn watch_folder(
    dir: &std::path::Path,
    settle: std::time::Duration,
    ours: impl Fn(&std::ffi::OsStr) -> bool + Send + 'static,
    on_change: impl FnMut() + Send + 'static,
    what: &str,
) -> Option<FolderWatch> {
    match conduit_files::watch_folder(dir, settle, ours, on_change) {
        Ok(watch) => Some(watch),
        Err(error) => {
            tracing::warn!(%error, "{what} cannot be watched: clients see changes when they list again");
            None
        }
    }
}

/// Sends a resource list change, and an update of each conversation resource that
/// changed, whenever the history database is written (by this process or the app).
fn watch_history(
    host: &Arc<Host>,
    changes: broadcast::Sender<CatalogChange>,
) -> Option<FolderWatch> {
    let database = host.paths().database_file.clone();
    let dir = database.parent()?.to_owned();
    let stem = database.file_name()?.to_string_lossy().into_owned();
    if let Err(error) = conduit_files::create_private_dir(&dir) {
        tracing::warn!(%error, "the data folder cannot be made: the history is not watched");
        return None;
    }
    let weak = Arc::downgrade(host);
    // Each recent conversation's last change, to tell which ones changed.
    let seen = |host: &Arc<Host>| -> HashMap<String, i64> {
        host.store()
            .and_then(|store| store.list(RECENT))
            .map(|list| list.into_iter().map(|c| (c.id, c.updated_at)).collect())
            .unwrap_or_default()
    };
    let mut last = seen(host);
    watch_folder(
        &dir,
        std::time::Duration::from_millis(300),
        // The database and its journal (history.db, history.db-wal, -shm).
        move |name| name.to_string_lossy().starts_with(&stem),
        move || {
            let Some(host) = weak.upgrade() else {
                return;
            };
            let now = seen(&host);
            if now == last {
                return;
            }
            if !shared_with_clients(&host, SHARES_CONVERSATIONS) {
                // Not shared: clients hear nothing of the conversations' comings and goings.
                last = now;
                return;
            }
            let listed_changed =
                now.len() != last.len() || now.keys().any(|id| !last.contains_key(id));
            for (id, updated) in &now {
                if last.get(id).is_some_and(|before| before != updated) {
                    let _ = changes.send(CatalogChange::ResourceUpdated(format!(
                        "{CONVERSATION_PREFIX}{id}"
                    )));
                }
            }
            if listed_changed {
                let _ = changes.send(CatalogChange::Resources);
            }
            last = now;
        },
        "the history",
    )
}

/// Sends a tool list change whenever the settings file changes (Settings may switch a
/// built-in tool in another process), followed through a symlink.
fn watch_switches(
    host: &Arc<Host>,
    changes: broadcast::Sender<CatalogChange>,
) -> Option<FileWatch> {
    let file = host.paths().settings_file.clone();
    // Every change of the settings file is announced, not only those that change the
    // list as this watcher last read it: a client may have read the list in between
    // (each listing reads the settings afresh), so a switch off and on again within one
    // batch of events would otherwise leave it with the list it read in between.
    // Clients list again; settings change rarely.
    let watched =
        conduit_files::watch_file(&file, std::time::Duration::from_millis(150), move || {
            // Nobody connected is fine: the next list is read fresh anyway.
            // A switch may also share or withhold the conversations and media.
            for change in [
                CatalogChange::Tools,
                CatalogChange::Resources,
                CatalogChange::Prompts,
            ] {
                let _ = changes.send(change);
            }
        });
    match watched {
        Ok(watch) => Some(watch),
        Err(error) => {
            tracing::warn!(%error, "the settings cannot be watched: clients see changes when they list again");
            None
        }
    }
}

/// Runs a history read on the blocking pool: SQLite blocks, and in the app the served
/// endpoint shares the runtime and the database with the window, whose commands would
/// wait behind a client reading long conversations.
async fn off_the_workers<T: Send + 'static>(
    read: impl FnOnce() -> Result<T, CatalogError> + Send + 'static,
) -> Result<T, CatalogError> {
    tokio::task::spawn_blocking(read)
        .await
        .map_err(|e| CatalogError::Failed(format!("reading the history failed: {e}")))?
}

fn store_error(error: StoreError) -> CatalogError {
    match error {
        StoreError::UnknownConversation(id) => {
            CatalogError::NotFound(format!("{CONVERSATION_PREFIX}{id}"))
        }
        other => CatalogError::Failed(other.to_string()),
    }
}

fn media_link(kind: &str, media: &MediaRef) -> String {
    let uri = format!("{MEDIA_PREFIX}{}", media.hash);
    if kind == "image" {
        format!("![image]({uri})")
    } else {
        format!("[{kind}]({uri})")
    }
}

/// The built-in tool whose switch in Settings also shares the conversations with other
/// clients (as resources, prompts and completions), and the one that shares stored media.
const SHARES_CONVERSATIONS: &str = "read_conversation";
const SHARES_MEDIA: &str = "get_image";

/// Whether the settings share with other clients what `tool`'s switch covers (settings
/// that cannot be read share nothing).
fn shared_with_clients(host: &Host, tool: &str) -> bool {
    host.settings()
        .is_ok_and(|settings| settings.tool_enabled(crate::builtin::BUILTIN_SERVER, tool))
}

impl HostCatalog {
    /// Whether other clients get what `tool`'s switch covers: switched off, the
    /// conversations (or media) are not served as resources either. Conduit's own agent
    /// always does (the user mentions them). Settings that cannot be read share nothing.
    fn shares(&self, tool: &str) -> bool {
        match self.audience {
            Audience::OwnAgent => true,
            Audience::Clients => shared_with_clients(&self.host, tool),
        }
    }

    /// A conversation as a Markdown resource, read off the async workers.
    async fn conversation_body(&self, id: &str) -> Result<ResourceBody, CatalogError> {
        let (host, id) = (self.host.clone(), id.to_owned());
        off_the_workers(move || {
            let store = host.store().map_err(store_error)?;
            let markdown = conduit_store::export::conversation_markdown(&store, &id, &media_link)
                .map_err(store_error)?;
            Ok(ResourceBody {
                uri: format!("{CONVERSATION_PREFIX}{id}"),
                mime_type: Some("text/markdown".into()),
                data: ResourceData::Text(markdown),
            })
        })
        .await
    }

    /// Recent conversations whose id starts with, or title contains, `starting`.
    async fn conversation_ids(&self, starting: &str) -> Result<Vec<String>, CatalogError> {
        let (host, starting) = (self.host.clone(), starting.to_owned());
        off_the_workers(move || {
            let store = host.store().map_err(store_error)?;
            let wanted = starting.to_lowercase();
            Ok(store
                .list(RECENT)
                .map_err(store_error)?
                .into_iter()
                .filter(|c| c.id.starts_with(&starting) || c.title.to_lowercase().contains(&wanted))
                .map(|c| c.id)
                .collect())
        })
        .await
    }
}

fn conversation_argument() -> Vec<PromptArgumentInfo> {
    vec![PromptArgumentInfo {
        name: "conversation".into(),
        description: Some("The conversation's id (completion offers recent ones)".into()),
        required: true,
    }]
}

#[async_trait]
impl Catalog for HostCatalog {
    fn instructions(&self) -> Option<String> {
        Some(
            "Conduit's tools, its conversations as conduit://conversation/{id} resources and \
             its stored media as conduit://media/{hash} resources."
                .into(),
        )
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        match &self.own_tools {
            Some(tools) => tools.clone(),
            None => tools_for_clients(&self.host),
        }
    }

    fn changes(&self) -> Option<broadcast::Receiver<CatalogChange>> {
        Some(self.changes.subscribe())
    }

    async fn resources(&self) -> Result<Vec<ResourceInfo>, CatalogError> {
        if !self.shares(SHARES_CONVERSATIONS) {
            return Ok(Vec::new());
        }
        let host = self.host.clone();
        let recent = off_the_workers(move || {
            let store = host.store().map_err(store_error)?;
            store.list(RECENT).map_err(store_error)
        })
        .await?;
        Ok(recent
            .into_iter()
            .map(|c| ResourceInfo {
                uri: format!("{CONVERSATION_PREFIX}{}", c.id),
                name: c.title.clone(),
                title: Some(c.title),
                description: Some(format!("A conversation of {} messages", c.message_count)),
                mime_type: Some("text/markdown".into()),
                size: None,
            })
            .collect())
    }

    fn resource_templates(&self) -> Vec<ResourceTemplateInfo> {
        let conversations = self.shares(SHARES_CONVERSATIONS);
        let media = self.shares(SHARES_MEDIA);
        [
            (
                conversations,
                ResourceTemplateInfo {
                    uri_template: format!("{CONVERSATION_PREFIX}{{id}}"),
                    name: "conversation".into(),
                    title: Some("A conversation".into()),
                    description: Some("A conversation of Conduit's history, as Markdown".into()),
                    mime_type: Some("text/markdown".into()),
                },
            ),
            (
                media,
                ResourceTemplateInfo {
                    uri_template: format!("{MEDIA_PREFIX}{{hash}}"),
                    name: "media".into(),
                    title: Some("Stored media".into()),
                    description: Some(
                        "An image, audio or file Conduit stored, by its SHA-256".into(),
                    ),
                    mime_type: None,
                },
            ),
        ]
        .into_iter()
        .filter_map(|(shared, template)| shared.then_some(template))
        .collect()
    }

    async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceBody>, CatalogError> {
        if let Some(id) = uri.strip_prefix(CONVERSATION_PREFIX)
            && self.shares(SHARES_CONVERSATIONS)
        {
            return Ok(vec![self.conversation_body(id).await?]);
        }
        if let Some(hash) = uri.strip_prefix(MEDIA_PREFIX)
            && self.shares(SHARES_MEDIA)
        {
            let Some((path, mime)) = self.host.media_file(hash, false) else {
                return Err(CatalogError::NotFound(uri.to_owned()));
            };
            // The switch shares the images and outputs of tools; the user's own PDFs (their
            // papers, their contracts) are not among them.
            if mime == conduit_core::attached::PDF_MIME {
                return Err(CatalogError::NotFound(uri.to_owned()));
            }
            let failed =
                |e: std::io::Error| CatalogError::Failed(format!("reading {uri} failed: {e}"));
            let size = tokio::fs::metadata(&path).await.map_err(failed)?.len();
            if size > conduit_mcp::server::MAX_SERVED_MEDIA_BYTES {
                return Err(CatalogError::Failed(format!(
                    "{uri} is not sent: {}",
                    conduit_mcp::server::too_large_to_serve(size)
                )));
            }
            let bytes = tokio::fs::read(&path).await.map_err(failed)?;
            return Ok(vec![ResourceBody {
                uri: uri.to_owned(),
                mime_type: Some(mime.to_owned()),
                data: ResourceData::Binary(bytes),
            }]);
        }
        Err(CatalogError::NotFound(uri.to_owned()))
    }

    fn prompts(&self) -> Vec<PromptInfo> {
        if !self.shares(SHARES_CONVERSATIONS) {
            return Vec::new();
        }
        vec![
            PromptInfo {
                name: SUMMARIZE.into(),
                title: Some("Summarize a conversation".into()),
                description: Some("Summarize one of Conduit's conversations".into()),
                arguments: conversation_argument(),
            },
            PromptInfo {
                name: CONTINUE.into(),
                title: Some("Continue from a conversation".into()),
                description: Some("Pick up where one of Conduit's conversations left off".into()),
                arguments: conversation_argument(),
            },
        ]
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: &HashMap<String, String>,
    ) -> Result<PromptBody, CatalogError> {
        let ask = match name {
            SUMMARIZE => {
                "Summarize the conversation above: its question, what was found, \
                          and what is still open."
            }
            CONTINUE => "Continue from where the conversation above left off.",
            _ => return Err(CatalogError::NotFound(name.to_owned())),
        };
        if !self.shares(SHARES_CONVERSATIONS) {
            return Err(CatalogError::NotFound(name.to_owned()));
        }
        let id = arguments
            .get("conversation")
            .ok_or_else(|| CatalogError::InvalidArguments("conversation is required".into()))?;
        let body = self.conversation_body(id).await.map_err(|e| match e {
            CatalogError::NotFound(_) => {
                CatalogError::InvalidArguments(format!("there is no conversation {id:?}"))
            }
            other => other,
        })?;
        Ok(PromptBody {
            description: None,
            messages: vec![
                (PromptRole::User, PromptContent::Resource(body)),
                (PromptRole::User, PromptContent::Text(ask.into())),
            ],
        })
    }

    async fn complete(
        &self,
        target: &CompletionTarget,
        argument: &str,
        value: &str,
        _context: &HashMap<String, String>,
    ) -> Result<Vec<String>, CatalogError> {
        let wants_conversation = match target {
            CompletionTarget::Prompt(name) => {
                (name == SUMMARIZE || name == CONTINUE) && argument == "conversation"
            }
            CompletionTarget::ResourceTemplate(template) => {
                template.starts_with(CONVERSATION_PREFIX) && argument == "id"
            }
        };
        if wants_conversation && self.shares(SHARES_CONVERSATIONS) {
            self.conversation_ids(value).await
        } else {
            Ok(Vec::new())
        }
    }
}

/// The URL a client reaches the endpoint bound at `bound` by. A wildcard bind (0.0.0.0,
/// `::`) is no address to connect to, and its Host is refused (only loopback names are
/// taken there): the URL names loopback.
fn served_url(bound: SocketAddr) -> String {
    let shown = match bound.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, bound.port()))
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, bound.port()))
        }
        _ => bound,
    };
    format!("http://{shown}{}", conduit_mcp::http::MCP_PATH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_bind_is_reached_at_loopback() {
        for (bound, url) in [
            ("0.0.0.0:8765", "http://127.0.0.1:8765/mcp"),
            ("[::]:8765", "http://[::1]:8765/mcp"),
            ("127.0.0.1:9000", "http://127.0.0.1:9000/mcp"),
            ("192.168.1.5:9000", "http://192.168.1.5:9000/mcp"),
        ] {
            assert_eq!(served_url(bound.parse().unwrap()), url);
        }
    }

    /// A host in a temporary home, and its history.
    fn temp_host() -> (tempfile::TempDir, Arc<Host>, Arc<conduit_store::Store>) {
        let dir = tempfile::tempdir().unwrap();
        let host = Arc::new(Host::new(crate::Paths::under_home(
            dir.path().to_owned(),
            None,
        )));
        let store = host.store().unwrap();
        (dir, host, store)
    }

    /// Adds the user's `text` to conversation `id`.
    fn say(store: &conduit_store::Store, id: &str, text: &str) {
        store
            .add_message(
                id,
                &conduit_core::content::Message::user_text(text),
                conduit_store::MessageStatus::Complete,
            )
            .unwrap();
    }

    async fn next_change(changes: &mut broadcast::Receiver<CatalogChange>) -> CatalogChange {
        tokio::time::timeout(std::time::Duration::from_secs(10), changes.recv())
            .await
            .expect("a change within 10 s")
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn clients_hear_of_new_and_changed_conversations() {
        let (_dir, host, store) = temp_host();
        let catalog = HostCatalog::new(host.clone(), Audience::Clients);
        let mut changes = catalog.changes().unwrap();
        let id = store.create_conversation(Some("p"), Some("m")).unwrap();
        assert_eq!(next_change(&mut changes).await, CatalogChange::Resources);
        say(&store, &id, "hello");
        assert_eq!(
            next_change(&mut changes).await,
            CatalogChange::ResourceUpdated(format!("{CONVERSATION_PREFIX}{id}"))
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn clients_hear_nothing_of_conversations_not_shared_with_them() {
        let (_dir, host, store) = temp_host();
        let id = store.create_conversation(Some("p"), Some("m")).unwrap();
        host.set_builtin_tool_enabled(SHARES_CONVERSATIONS, false)
            .unwrap();
        let catalog = HostCatalog::new(host.clone(), Audience::Clients);
        let mut changes = catalog.changes().unwrap();
        say(&store, &id, "private");
        // The history watcher settles in 300 ms; a conversation's update would be sent
        // then. Only list changes of the settings may come.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(3);
        while let Ok(Ok(change)) = tokio::time::timeout_at(deadline, changes.recv()).await {
            assert!(
                !matches!(change, CatalogChange::ResourceUpdated(_)),
                "{change:?}"
            );
        }
    }

    /// A stored file larger than a client is sent (an attachment may be 64 MiB) is refused
    /// by name and size, not read into memory.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stored_file_past_the_served_size_is_refused_saying_why() {
        let (_dir, host, _store) = temp_host();
        // A recording (a WAV header and silence) stands in for any large stored file.
        let mut large = b"RIFF\x24\x00\x00\x00WAVEfmt ".to_vec();
        large.resize(conduit_mcp::server::MAX_SERVED_MEDIA_BYTES as usize + 1, 0);
        let media =
            conduit_core::media::MediaStore::put(host.media.as_ref(), &large, None).unwrap();
        let mut png = Vec::new();
        image::DynamicImage::new_rgb8(4, 4)
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        let small = conduit_core::media::MediaStore::put(host.media.as_ref(), &png, None).unwrap();
        let clients = HostCatalog::new(host.clone(), Audience::Clients);
        let refused = clients
            .read_resource(&format!("{MEDIA_PREFIX}{}", media.hash))
            .await
            .unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("16.0 MiB, more than the 16 MiB"),
            "{refused}"
        );
        let read = clients
            .read_resource(&format!("{MEDIA_PREFIX}{}", small.hash))
            .await
            .unwrap();
        assert!(matches!(&read[0].data, ResourceData::Binary(bytes) if *bytes == png));
    }

    /// The user's PDFs are their documents, not a tool's output: a client reading the
    /// media the switch shares never gets one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_users_pdf_is_never_served_to_a_client() {
        let (_dir, host, _store) = temp_host();
        let paper = conduit_core::media::MediaStore::put(
            host.media.as_ref(),
            &conduit_core::testing::pdf(3, 50_000),
            Some("application/pdf"),
        )
        .unwrap();
        let clients = HostCatalog::new(host.clone(), Audience::Clients);
        let refused = clients
            .read_resource(&format!("{MEDIA_PREFIX}{}", paper.hash))
            .await
            .unwrap_err();
        assert!(matches!(refused, CatalogError::NotFound(_)), "{refused}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn switched_off_history_tools_withhold_the_conversations_and_media_from_clients() {
        let (_dir, host, store) = temp_host();
        let id = store.create_conversation(Some("p"), Some("m")).unwrap();
        say(&store, &id, "the plan");
        let mut png = Vec::new();
        image::DynamicImage::new_rgb8(4, 4)
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        let media = conduit_core::media::MediaStore::put(host.media.as_ref(), &png, None).unwrap();
        let conversation = format!("{CONVERSATION_PREFIX}{id}");
        let image = format!("{MEDIA_PREFIX}{}", media.hash);
        let clients = HostCatalog::new(host.clone(), Audience::Clients);
        let own = HostCatalog::new(host.clone(), Audience::OwnAgent);
        let by_id = HashMap::from([("conversation".to_owned(), id.clone())]);
        let target = CompletionTarget::Prompt(SUMMARIZE.into());

        // Shared by default.
        assert_eq!(clients.resources().await.unwrap().len(), 1);
        assert!(clients.read_resource(&conversation).await.is_ok());
        assert!(clients.read_resource(&image).await.is_ok());

        host.set_builtin_tool_enabled(SHARES_CONVERSATIONS, false)
            .unwrap();
        host.set_builtin_tool_enabled(SHARES_MEDIA, false).unwrap();
        assert!(clients.resources().await.unwrap().is_empty());
        assert!(clients.resource_templates().is_empty());
        assert!(matches!(
            clients.read_resource(&conversation).await,
            Err(CatalogError::NotFound(_))
        ));
        assert!(matches!(
            clients.read_resource(&image).await,
            Err(CatalogError::NotFound(_))
        ));
        assert!(clients.prompts().is_empty());
        assert!(clients.get_prompt(SUMMARIZE, &by_id).await.is_err());
        let offered = clients
            .complete(&target, "conversation", "", &HashMap::new())
            .await;
        assert!(offered.unwrap().is_empty());
        // Conduit's own agent still reads them: the user mentions them.
        assert!(own.read_resource(&conversation).await.is_ok());
        assert!(own.read_resource(&image).await.is_ok());

        // Media alone shared again.
        host.set_builtin_tool_enabled(SHARES_MEDIA, true).unwrap();
        assert!(clients.read_resource(&image).await.is_ok());
        assert!(clients.read_resource(&conversation).await.is_err());
    }

    #[test]
    fn the_snippets_start_conduit_as_each_app_expects() {
        let snippets = ServeSnippets::for_command("/opt/conduit/conduit".into());
        let claude: serde_json::Value = serde_json::from_str(&snippets.claude_desktop).unwrap();
        assert_eq!(
            claude["mcpServers"]["conduit"]["command"],
            "/opt/conduit/conduit"
        );
        assert_eq!(
            claude["mcpServers"]["conduit"]["args"],
            serde_json::json!(["mcp", "serve"])
        );
        let vs_code: serde_json::Value = serde_json::from_str(&snippets.vs_code).unwrap();
        assert_eq!(vs_code["servers"]["conduit"]["type"], "stdio");
        // The mcpServers form Conduit itself reads: another Conduit can add this one.
        let read = conduit_mcp::config::spec_of(&claude["mcpServers"]["conduit"], &|_| None);
        assert!(read.is_ok(), "{read:?}");
    }
}
