//! MCP for the frontends: the `mcpServers` file, starting its servers, and calling their
//! tools, resources and prompts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use conduit_core::media::MediaStore;
use conduit_core::tool::{ProgressSink, ToolOutput};
use conduit_mcp::client::McpError;
use conduit_mcp::config::{self, ConfigError, Edit, Snapshot};
use conduit_mcp::elicit::Asker;
use conduit_mcp::runtime::{McpRuntime, RuntimeOptions};
use conduit_mcp::servers::{DEFAULT_START_TIMEOUT, ToolInfo};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::Host;
use crate::settings::{ApprovedTool, ToolPolicy, Verdict};
use crate::window_guard::Loss;

/// Environment variable with the start timeout of MCP servers, in seconds.
pub const START_TIMEOUT_ENV: &str = "CONDUIT_MCP_START_TIMEOUT";

pub use conduit_mcp::servers::{ServerState, ServerStatus};

/// A server's tools as Settings lists them, with the server's own policy.
#[derive(Debug, Clone, serde::Serialize, ts_rs::TS)]
pub struct ServerTools {
    pub policy: crate::settings::ToolPolicy,
    /// What happens to the server's sampling requests.
    pub sampling: crate::settings::ToolPolicy,
    pub tools: Vec<ToolSetting>,
    /// What the server's running tools were as listed, sent back with a server-wide
    /// "allow" (see [`crate::approval::shown_token`]).
    pub shown: String,
}

/// A tool as Settings lists it: what it is, whether models see it, when it may run.
#[derive(Debug, Clone, serde::Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ToolSetting {
    #[serde(flatten)]
    pub tool: ToolInfo,
    pub enabled: bool,
    pub policy: crate::settings::ToolPolicy,
    /// Why an "allow" no longer holds (the server or the tool changed since, or the tool
    /// is new): its calls are asked about again. Empty when nothing needs re-approval.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[ts(as = "Option<Vec<String>>", optional)]
    pub reapproval: Vec<String>,
    /// What the tool and its server were as listed, sent back with an "allow".
    pub shown: String,
}

#[derive(Debug, thiserror::Error)]
pub enum HostMcpError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("there is no ready server named {0:?}")]
    NoServer(String),
    #[error(
        "{0:?} needs you to sign in: run `conduit mcp login {0}`, or press Sign in for it in Settings"
    )]
    NeedsSignIn(String),
    #[error("server {server:?}: {error}")]
    Call {
        server: String,
        #[source]
        error: McpError,
    },
    #[error("{0}")]
    Arguments(String),
    #[error("{0}")]
    Result(String),
}

/// The session of a ready server; a server waiting for sign-in says how to give it.
pub fn ready_connection(
    servers: &McpRuntime,
    server: &str,
) -> Result<Arc<conduit_mcp::client::Connection>, HostMcpError> {
    servers
        .connection(server)
        .ok_or_else(|| not_ready(servers, server))
}

/// Why `server` has no session to use: it waits for sign-in (and says how to give it),
/// or no ready server has that name.
fn not_ready(servers: &McpRuntime, server: &str) -> HostMcpError {
    let waiting = servers
        .statuses()
        .into_iter()
        .any(|s| s.name == server && matches!(s.state, ServerState::SignInRequired { .. }));
    if waiting {
        HostMcpError::NeedsSignIn(server.to_owned())
    } else {
        HostMcpError::NoServer(server.to_owned())
    }
}

impl Host {
    /// The `mcpServers` file as it is now.
    pub fn mcp_config(&self) -> Result<Snapshot, ConfigError> {
        config::read(&self.paths.mcp_config_file)
    }

    /// Changes the file (see [`Edit`]) if it has not changed since `snapshot` was read.
    pub fn edit_mcp_config(
        &self,
        snapshot: &Snapshot,
        edit: Edit,
    ) -> Result<Snapshot, ConfigError> {
        config::apply(snapshot, edit)
    }

    /// The MCP runtime for one command line run: every enabled server of the file
    /// started at once, each within the start timeout (`CONDUIT_MCP_START_TIMEOUT`
    /// seconds, default 30), and kept running; a file that cannot be read is an error.
    /// The servers' questions go to `asker` (none are declared without one).
    pub async fn start_mcp(
        self: &Arc<Self>,
        asker: Option<Arc<dyn Asker>>,
    ) -> Result<McpRuntime, ConfigError> {
        let mut options = self.mcp_runtime_options();
        options.asker = asker;
        McpRuntime::start(options).await
    }

    /// The MCP runtime for the app: as [`Host::start_mcp`], following outside edits of
    /// the file; a read error is shown, not fatal. It returns while the servers start
    /// (`McpRuntime::until_applied` waits for them), so the app can end them any time.
    pub fn watch_mcp(self: &Arc<Self>, asker: Option<Arc<dyn Asker>>) -> McpRuntime {
        let mut options = self.mcp_runtime_options();
        options.asker = asker;
        McpRuntime::watch_in_background(options)
    }

    /// The file's servers, and Conduit's built-in tools as its own in-process server
    /// (`conduit`), offered and approved like any server's; HTTP servers sign in with
    /// tokens from the secret store.
    fn mcp_runtime_options(self: &Arc<Self>) -> RuntimeOptions {
        RuntimeOptions::new(&self.paths.mcp_config_file, self.mcp_start_timeout())
            .with_in_process(
                crate::builtin::BUILTIN_SERVER,
                Arc::new(self.builtin_server()),
            )
            .with_tokens(self.token_vault())
    }

    /// How long a server may take to start: `CONDUIT_MCP_START_TIMEOUT` seconds, or 30.
    pub fn mcp_start_timeout(&self) -> Duration {
        std::env::var(START_TIMEOUT_ENV)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            // At most a day: longer is a mistake, and past what a deadline can count to.
            .map_or(DEFAULT_START_TIMEOUT, |s| {
                Duration::from_secs_f64(s.min(86_400.0))
            })
    }

    /// `server`'s tools joined with the settings: whether each is offered to models, the
    /// policy that applies to it, and why an "allow" no longer holds. The one join the
    /// window's Settings and `conduit mcp tools` both list; `trust` is what each of the
    /// server's running tools is now ([`crate::approval::listed_trust`]).
    pub fn tool_settings(
        &self,
        server: &str,
        tools: Vec<ToolInfo>,
        trust: &HashMap<String, ApprovedTool>,
    ) -> Result<ServerTools, crate::SettingsError> {
        let settings = self.settings()?;
        let tools = tools
            .into_iter()
            .map(|tool| {
                let policy = settings.tool_policy(server, &tool.name);
                let reapproval = match trust
                    .get(&tool.name)
                    .map(|now| settings.verdict(server, &tool.name, now))
                {
                    Some(Verdict::Ask { changes }) if policy == ToolPolicy::Allow => changes,
                    _ => Vec::new(),
                };
                let shown = crate::approval::shown_token(self, trust.get_key_value(&tool.name));
                ToolSetting {
                    enabled: settings.tool_enabled(server, &tool.name),
                    policy,
                    reapproval,
                    shown,
                    tool,
                }
            })
            .collect();
        Ok(ServerTools {
            policy: settings.server_policy(server),
            sampling: settings.sampling_policy(server, &self.print_in_file(server)),
            tools,
            shown: crate::approval::shown_token(self, trust),
        })
    }

    /// [`Host::tool_settings`] for a server of `servers`: its policy, and its tools
    /// while it runs (none while it does not).
    pub fn server_tool_settings(
        &self,
        servers: &McpRuntime,
        server: &str,
    ) -> Result<ServerTools, crate::SettingsError> {
        let tools = servers.server_tools(server).unwrap_or_default();
        let trust = crate::approval::listed_trust(servers.slot_now(server).as_ref(), server)
            .into_iter()
            .map(|(tool, (now, _))| (tool, now))
            .collect();
        self.tool_settings(server, tools, &trust)
    }

    /// Refuses a tool named by hand (`conduit mcp disable-tool`) that no server can have:
    /// a server not in the mcpServers file, a built-in tool Conduit does not have, or a
    /// name as a model sees it (`server__tool`), which the server does not list. Without
    /// this, a typo was "kept from models" while the tool meant stayed offered. Another
    /// tool name of a file server is taken as it is: its server may not be running to ask.
    pub fn check_tool_named(&self, server: &str, tool: &str) -> Result<(), crate::SettingsError> {
        let refused = |why: String| Err(crate::SettingsError::Invalid(why));
        if server == crate::builtin::BUILTIN_SERVER {
            let names = crate::builtin::builtin_tool_names();
            if !names.iter().any(|name| name == tool) {
                return refused(format!(
                    "Conduit has no built-in tool {tool:?} (it has {})",
                    names.join(", ")
                ));
            }
            return Ok(());
        }
        let env = |name: &str| std::env::var(name).ok();
        let in_file = match self.mcp_file_bytes() {
            Ok(Some(bytes)) => config::snapshot_of(&self.paths.mcp_config_file, &bytes, &env)
                .map(|snapshot| snapshot.server(server).is_some())
                .unwrap_or(false),
            _ => false,
        };
        if !in_file {
            return refused(format!(
                "there is no server named {server:?} in the mcpServers file"
            ));
        }
        if let Some(own) = tool.strip_prefix(&format!("{server}__")) {
            return refused(format!(
                "{tool:?} is the name a model sees; name the tool as its server lists it: {own:?}"
            ));
        }
        Ok(())
    }

    /// Lets a model use `tool` of `server`, or not (kept in settings).
    pub fn set_mcp_tool_enabled(
        &self,
        server: &str,
        tool: &str,
        enabled: bool,
    ) -> Result<(), crate::SettingsError> {
        self.update_settings(|settings| {
            settings.set_tool_enabled(server, tool, enabled);
            Ok(())
        })
    }

    /// Calls `tool` on `server` directly (not through a model).
    pub async fn call_mcp_tool(
        &self,
        servers: &McpRuntime,
        server: &str,
        tool: &str,
        arguments: Value,
        progress: ProgressSink,
        cancel: CancellationToken,
    ) -> Result<ToolOutput, HostMcpError> {
        let arguments = as_object(arguments)?;
        // The connection and how to find the same server again, in one look.
        let (connection, reconnect) = match servers.slot_now(server) {
            Some(conduit_mcp::runtime::SlotNow {
                connection: Some(connection),
                reconnect,
                ..
            }) => (connection, reconnect),
            _ => return Err(not_ready(servers, server)),
        };
        let failed = |error| HostMcpError::Call {
            server: server.to_owned(),
            error,
        };
        // An HTTP server's session may expire: the call did not run then, and goes once
        // more on the new session the runtime opens (the user named the tool, not a
        // definition, so only its presence there is checked).
        let again = reconnect.as_ref().map(|_| arguments.clone());
        let called = if connection.ended_by_expiry() {
            Err(McpError::SessionExpired)
        } else {
            connection
                .call_tool(tool, arguments, progress.clone(), cancel.clone())
                .await
        };
        let result = match (called, reconnect, again) {
            (Err(McpError::SessionExpired), Some(reconnect), Some(arguments)) => {
                let (connection, tools) = reconnect
                    .connected_again(Some(&connection), &cancel)
                    .await
                    .map_err(|why| {
                        failed(McpError::Other(format!(
                            "its session expired before the call ran, and {why}"
                        )))
                    })?;
                if !tools.iter().any(|listed| listed.name == tool) {
                    return Err(failed(McpError::Other(format!(
                        "its session expired before the call ran, and when it connected again it no longer offered the tool {tool:?}; it did not run"
                    ))));
                }
                connection
                    .call_tool(tool, arguments, progress, cancel)
                    .await
                    .map_err(failed)?
            }
            (called, _, _) => called.map_err(failed)?,
        };
        let media: Arc<dyn MediaStore> = self.media.clone();
        conduit_mcp::result::convert_off_thread(result, media)
            .await
            .map_err(HostMcpError::Result)
    }
}

/// Tool and prompt arguments must be a JSON object (or nothing).
pub fn as_object(value: Value) -> Result<Map<String, Value>, HostMcpError> {
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        other => Err(HostMcpError::Arguments(format!(
            "arguments must be a JSON object, not {other}"
        ))),
    }
}

/// The `mcpServers` file as the settings screen shows it.
#[derive(Debug, Clone, serde::Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct McpFile {
    pub path: String,
    /// The file's text (a starting document when there is no file).
    pub text: String,
    /// Names this version of the file; a change must name the version it is based on.
    /// Keyed per process (`Host::page_fingerprint`): the bytes hold secrets the window
    /// sees only masked, and a plain hash of them would let a script test its guesses.
    pub version: Option<String>,
    pub servers: Vec<McpFileServer>,
    /// Why the file cannot be read as it is (its servers are then not listed).
    pub problem: Option<TextProblem>,
}

#[derive(Debug, Clone, serde::Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct McpFileServer {
    pub name: String,
    pub disabled: bool,
    /// The entry as written, unknown fields included.
    #[ts(type = "Record<string, unknown>")]
    pub entry: Value,
    /// The transport the entry names, every app's `type` spelling read the one way
    /// ([`config::TransportKind::of_entry`]); `None` when it names none.
    pub transport: Option<config::TransportKind>,
    /// Why the entry cannot start, if it cannot.
    pub problem: Option<String>,
}

/// A problem with the file's text, with where it is when it is a JSON syntax error.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct TextProblem {
    pub message: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl From<&ConfigError> for TextProblem {
    fn from(error: &ConfigError) -> Self {
        match error {
            // The editor shows where; the message says what.
            ConfigError::Parse {
                line,
                column,
                message,
                ..
            } => Self {
                message: message.clone(),
                line: Some(*line),
                column: Some(*column),
            },
            other => Self {
                message: other.to_string(),
                line: None,
                column: None,
            },
        }
    }
}

/// What a new file starts as.
const EMPTY_FILE: &str = "{\n  \"mcpServers\": {}\n}\n";

/// Why the window's change to the file was not made.
#[derive(Debug, thiserror::Error)]
pub enum McpEditError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Mask(#[from] crate::window_guard::MaskError),
    #[error(transparent)]
    Import(#[from] crate::window_guard::ImportFileError),
    #[error("nothing was changed: the change was not confirmed")]
    NotConfirmed,
    #[error("{file} has no server named {name:?}")]
    NoCandidate { file: String, name: String },
    #[error("the name {0:?} is taken by Conduit's own tools; give the server another name")]
    ReservedName(String),
}

/// Another app's servers with the one named as Conduit's own server marked as not to be
/// imported: it is most likely Conduit itself, as Settings' snippet told that app to run
/// it (offered checked, it made the whole import fail on the reserved name).
fn reserved_marked(mut candidates: Vec<config::ImportCandidate>) -> Vec<config::ImportCandidate> {
    for candidate in &mut candidates {
        if candidate.problem.is_none()
            && candidate
                .name
                .eq_ignore_ascii_case(crate::builtin::BUILTIN_SERVER)
        {
            candidate.problem = Some(format!(
                "{:?} is the name of Conduit's own tools: this entry most likely starts Conduit itself",
                candidate.name
            ));
        }
    }
    candidates
}

/// Asks the user, outside the page, to confirm what the host shows; `true` is a yes.
pub type Confirm<'a> = &'a (dyn Fn(&str) -> bool + Sync);

/// A server to import from another app's file, and the name to give it here.
#[derive(Debug, Clone, serde::Deserialize, ts_rs::TS)]
pub struct ImportPick {
    pub name: String,
    pub target: String,
}

/// A known config file of another app, as the window lists it.
#[derive(Debug, Clone, serde::Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ImportFile {
    #[serde(flatten)]
    pub file: crate::window_guard::KnownImportFile,
    pub exists: bool,
}

impl Host {
    /// The file's text, version and servers, with every secret value (`env`, `headers`)
    /// masked; a file that does not parse comes with its problem (line and column) so the
    /// raw editor can show both.
    pub fn mcp_file(&self) -> Result<McpFile, ConfigError> {
        self.read_mcp_file(true)
    }

    /// The file with its secret values in clear, for the raw editor after the user
    /// confirmed the reveal outside the page.
    pub fn mcp_file_revealed(&self) -> Result<McpFile, ConfigError> {
        self.read_mcp_file(false)
    }

    /// The fingerprint of what the `mcpServers` file says `server` runs now
    /// ([`crate::approval::server_fingerprint`]); empty when the file cannot be read or
    /// names no such server that can start, which no allow matches.
    pub(crate) fn print_in_file(&self, server: &str) -> String {
        let Ok(Some(bytes)) = self.mcp_file_bytes() else {
            return String::new();
        };
        let env = |name: &str| std::env::var(name).ok();
        let Ok(snapshot) = config::snapshot_of(&self.paths.mcp_config_file, &bytes, &env) else {
            return String::new();
        };
        match snapshot.server(server).map(|entry| &entry.spec) {
            Some(Ok(spec)) => crate::approval::server_fingerprint(Some(&spec.transport)),
            _ => String::new(),
        }
    }

    /// The `mcpServers` file's bytes, `None` when there is no file yet.
    fn mcp_file_bytes(&self) -> Result<Option<Vec<u8>>, ConfigError> {
        let path = &self.paths.mcp_config_file;
        match conduit_mcp::config::read_file(path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ConfigError::read(path, e)),
        }
    }

    fn read_mcp_file(&self, mask: bool) -> Result<McpFile, ConfigError> {
        let path = &self.paths.mcp_config_file;
        // One read: the text shown, its version and its servers are the same contents.
        let Some(bytes) = self.mcp_file_bytes()? else {
            return Ok(McpFile {
                path: path.display().to_string(),
                text: EMPTY_FILE.to_owned(),
                version: None,
                servers: Vec::new(),
                problem: None,
            });
        };
        let version = Some(self.page_fingerprint(&bytes));
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let env = |name: &str| std::env::var(name).ok();
        let (servers, problem) = match config::snapshot_of(path, &bytes, &env) {
            Ok(snapshot) => (
                snapshot
                    .servers
                    .into_iter()
                    .map(|entry| McpFileServer {
                        name: entry.name,
                        disabled: entry.disabled,
                        transport: config::TransportKind::of_entry(&entry.raw),
                        entry: if mask {
                            crate::window_guard::mask_entry(&entry.raw)
                        } else {
                            entry.raw
                        },
                        problem: entry.spec.err(),
                    })
                    .collect(),
                None,
            ),
            Err(error) => (Vec::new(), Some(TextProblem::from(&error))),
        };
        Ok(McpFile {
            path: path.display().to_string(),
            text: if mask {
                crate::window_guard::mask_text(&text)
            } else {
                text
            },
            version,
            servers,
            problem,
        })
    }

    /// The file's own fingerprint, after checking that `version` (as the window holds it,
    /// keyed: see [`McpFile::version`]) names the file's current bytes.
    fn version_from_window(&self, version: &Option<String>) -> Result<Option<String>, ConfigError> {
        let bytes = self.mcp_file_bytes()?;
        if bytes.as_deref().map(|b| self.page_fingerprint(b)) != *version {
            return Err(ConfigError::Conflict {
                path: self.paths.mcp_config_file.display().to_string(),
            });
        }
        Ok(bytes.as_deref().map(conduit_files::fingerprint_bytes))
    }

    /// The file's current text (none when there is no file) after checking that it is
    /// still `version`.
    fn current_text(&self, version: &Option<String>) -> Result<String, ConfigError> {
        let path = &self.paths.mcp_config_file;
        let bytes = self.mcp_file_bytes()?;
        let current = bytes.as_deref().map(conduit_files::fingerprint_bytes);
        if &current != version {
            return Err(ConfigError::Conflict {
                path: path.display().to_string(),
            });
        }
        // Bytes that are not UTF-8 do not read (as the runtime finds): shown with
        // replacement characters, they name no servers, so a save of them asks as for new.
        Ok(bytes
            .map(|b| {
                String::from_utf8(b).unwrap_or_else(|not_utf8| {
                    format!("\u{fffd}{}", String::from_utf8_lossy(not_utf8.as_bytes()))
                })
            })
            .unwrap_or_default())
    }

    /// Applies a change the window made on `version` of the file; refused (nothing
    /// written) when the file changed since, when the change is invalid, when it moves a
    /// masked secret, or when it would start a new or changed command or connect to a new
    /// or changed URL and `confirm` (asked outside the page) says no. Masked secrets sent
    /// back keep their stored values.
    pub fn edit_mcp_file(
        &self,
        version: Option<String>,
        edit: Edit,
        confirm: Confirm<'_>,
    ) -> Result<McpFile, McpEditError> {
        use crate::window_guard::unmask_entry;
        let version = self.version_from_window(&version)?;
        let (snapshot, old) = match edit {
            Edit::Replace { text } => return self.replace_mcp_text(&version, &text, confirm),
            _ => self.snapshot_at(&version)?,
        };
        let edit = match edit {
            Edit::Add { name, entry } => Edit::Add {
                entry: unmask_entry(&name, entry, None)?,
                name,
            },
            Edit::Update { name, entry } => {
                let mut entry = unmask_entry(&name, entry, old.get(&name))?;
                if let Some(stored) = old.get(&name) {
                    crate::window_guard::keep_numbers_the_page_rounded(&mut entry, stored);
                }
                Edit::Update { entry, name }
            }
            other => other,
        };
        self.apply_edits(&snapshot, &old, vec![edit], confirm)
    }

    /// The file as the raw editor saves it: it may be mending a file that does not parse,
    /// so there is no snapshot; the text is checked whole.
    fn replace_mcp_text(
        &self,
        version: &Option<String>,
        text: &str,
        confirm: Confirm<'_>,
    ) -> Result<McpFile, McpEditError> {
        use crate::window_guard::{servers_of, unmask_text};
        let path = &self.paths.mcp_config_file;
        let old_text = self.current_text(version)?;
        let old = servers_of(&old_text);
        // Stored without a byte order mark: every reader of the file then sees the same
        // text (the servers below are read as the runtime reads them either way).
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        // A text that does not read says so, not that its masks moved.
        config::document_of_text(text)?;
        let text = unmask_text(text, &old_text)?;
        config::check_text(path, &text)?;
        let replaced = servers_of(&text);
        let file_losses = file_losses(&old_text, &text);
        self.confirm_changes(&old, &replaced, file_losses, confirm)?;
        // The same text again is not written: a backup would go for nothing.
        if text == old_text {
            return Ok(self.mcp_file()?);
        }
        // Not changed while the user was asked, nor as it is swapped out: the write is
        // still based on `version`.
        config::write_if_unchanged(path, &text, version.as_deref())?;
        // A server the new text no longer has takes its tool policies with it, and a
        // sign-in no entry reaches any more goes.
        for server in old.keys().filter(|name| !replaced.contains_key(*name)) {
            self.forget_server_policies(server);
        }
        self.forget_sign_ins_left_behind(&old, &replaced);
        Ok(self.mcp_file()?)
    }

    /// The file read once, refused unless it is still `version` (the one version check of
    /// an edit), with its entries as written by name.
    fn snapshot_at(
        &self,
        version: &Option<String>,
    ) -> Result<(config::Snapshot, Map<String, Value>), ConfigError> {
        let path = &self.paths.mcp_config_file;
        let snapshot = config::read(path)?;
        if snapshot.version() != version.as_deref() {
            return Err(ConfigError::Conflict {
                path: path.display().to_string(),
            });
        }
        let entries = snapshot
            .servers
            .iter()
            .map(|entry| (entry.name.clone(), entry.raw.clone()))
            .collect();
        Ok((snapshot, entries))
    }

    /// The end of every change to the file: confirms what `edits` would start that the
    /// file (`old`) does not and the servers they delete, applies them to `snapshot` (refused if the file changed while
    /// the user was asked), and drops the tool policies of removed servers.
    fn apply_edits(
        &self,
        snapshot: &config::Snapshot,
        old: &Map<String, Value>,
        edits: Vec<Edit>,
        confirm: Confirm<'_>,
    ) -> Result<McpFile, McpEditError> {
        let mut new = old.clone();
        for edit in &edits {
            match edit {
                Edit::Add { name, entry } | Edit::Update { name, entry } => {
                    new.insert(name.clone(), entry.clone());
                }
                Edit::Remove { name } => {
                    new.shift_remove(name);
                }
                Edit::SetDisabled { name, disabled } => {
                    if let Some(Value::Object(entry)) = new.get_mut(name) {
                        if *disabled {
                            entry.insert("disabled".into(), Value::Bool(true));
                        } else {
                            entry.shift_remove("disabled");
                        }
                    }
                }
                Edit::Replace { .. } => {}
            }
        }
        // Every edit is checked before the user is asked, so a yes is never followed by a
        // refusal (and an import of several entries writes none when one is bad).
        for edit in &edits {
            config::check_edit(&snapshot.path, edit)?;
        }
        config::check_writable(snapshot, &edits)?;
        self.confirm_changes(old, &new, Vec::new(), confirm)?;
        // One write for all of them: one version of the file, one backup.
        let current = config::apply_all(snapshot, edits)?;
        for server in old.keys().filter(|name| !new.contains_key(*name)) {
            self.forget_server_policies(server);
        }
        // The entries as written (a mask the window sent back is the stored value).
        let written: Map<String, Value> = current
            .servers
            .iter()
            .map(|entry| (entry.name.clone(), entry.raw.clone()))
            .collect();
        self.forget_sign_ins_left_behind(old, &written);
        Ok(self.mcp_file()?)
    }

    /// Asks `confirm` about what `new` would start that `old` does not, and about what it
    /// loses of `old` (with `file_losses`, what a raw text loses of the file besides its
    /// servers); a no refuses.
    fn confirm_changes(
        &self,
        old: &Map<String, Value>,
        new: &Map<String, Value>,
        file_losses: Vec<Loss>,
        confirm: Confirm<'_>,
    ) -> Result<(), McpEditError> {
        // The name of Conduit's own tools, in any case (a server named "Conduit" would ask
        // its questions under Conduit's name), is no new entry's: by the form, the raw
        // editor or an import alike.
        if let Some(taken) = new.keys().find(|name| {
            name.eq_ignore_ascii_case(crate::builtin::BUILTIN_SERVER) && !old.contains_key(*name)
        }) {
            return Err(McpEditError::ReservedName(taken.clone()));
        }
        let launches = crate::window_guard::launches_to_confirm(old, new);
        let mut losses = crate::window_guard::losses_to_confirm(old, new);
        losses.extend(file_losses);
        if launches.is_empty() && losses.is_empty() {
            return Ok(());
        }
        let question = crate::window_guard::confirmation_text(&launches, &losses);
        if confirm(&question) {
            tracing::info!(
                started = launches.len(),
                lost = losses.len(),
                "the user confirmed the change to the mcpServers file"
            );
            Ok(())
        } else {
            tracing::warn!(
                started = launches.len(),
                lost = losses.len(),
                "the change to the mcpServers file was not confirmed; nothing written"
            );
            Err(McpEditError::NotConfirmed)
        }
    }

    /// The problem the raw editor's text has, if any.
    pub fn check_mcp_text(&self, text: &str) -> Option<TextProblem> {
        config::check_text(&self.paths.mcp_config_file, text)
            .err()
            .map(|e| TextProblem::from(&e))
    }

    /// Where other apps keep their servers on this machine; the window names one by id.
    pub fn mcp_import_files(&self) -> Vec<ImportFile> {
        let Some(dirs) = directories::BaseDirs::new() else {
            return Vec::new();
        };
        crate::window_guard::known_import_files(dirs.home_dir(), dirs.config_dir())
            .into_iter()
            .map(|file| ImportFile {
                exists: file.path.is_file(),
                file,
            })
            .collect()
    }

    /// The path of the known config file `id`; nothing else can be named.
    pub fn mcp_import_file(
        &self,
        id: &str,
    ) -> Result<std::path::PathBuf, crate::window_guard::ImportFileError> {
        self.mcp_import_files()
            .into_iter()
            .find(|known| known.file.id == id)
            .map(|known| known.file.path)
            .ok_or_else(|| crate::window_guard::ImportFileError::UnknownSource(id.to_owned()))
    }

    /// The servers another app's config file (Claude Desktop, Cursor, VS Code) holds,
    /// their secret values masked. `file` is one the user picked or a known one: the
    /// window never names a path.
    pub fn mcp_import_candidates(
        &self,
        file: &std::path::Path,
    ) -> Result<Vec<config::ImportCandidate>, McpEditError> {
        let text = crate::window_guard::read_import_file(file)?;
        Ok(reserved_marked(config::import_candidates(file, &text)?)
            .into_iter()
            .map(|mut candidate| {
                candidate.entry = crate::window_guard::mask_entry(&candidate.entry);
                candidate
            })
            .collect())
    }

    /// Adds the picked servers of `file` (read again now, secrets and all) to the file at
    /// `version`, after `confirm` for what they would start.
    pub fn import_mcp_servers(
        &self,
        version: Option<String>,
        file: &std::path::Path,
        picks: Vec<ImportPick>,
        confirm: Confirm<'_>,
    ) -> Result<McpFile, McpEditError> {
        let version = self.version_from_window(&version)?;
        let text = crate::window_guard::read_import_file(file)?;
        let candidates = reserved_marked(config::import_candidates(file, &text)?);
        let (snapshot, old) = self.snapshot_at(&version)?;
        let mut edits = Vec::new();
        for pick in picks {
            let candidate = candidates
                .iter()
                .find(|c| c.name == pick.name)
                .ok_or_else(|| McpEditError::NoCandidate {
                    file: file.display().to_string(),
                    name: pick.name.clone(),
                })?;
            // What the window was told cannot be imported is not, whatever it picks.
            if let Some(problem) = &candidate.problem {
                return Err(ConfigError::InvalidServer {
                    server: pick.name,
                    message: problem.clone(),
                }
                .into());
            }
            let taken = |name: &str| {
                old.contains_key(name)
                    || edits
                        .iter()
                        .any(|e| matches!(e, Edit::Add { name: added, .. } if added == name))
            };
            if taken(&pick.target) {
                return Err(ConfigError::DuplicateServer(pick.target).into());
            }
            edits.push(Edit::Add {
                name: pick.target,
                entry: candidate.entry.clone(),
            });
        }
        self.apply_edits(&snapshot, &old, edits, confirm)
    }
}

/// What a raw text loses of the file besides its servers: all of it when the file on
/// disk does not read as JSON (a file being mended), or the top-level fields it drops.
fn file_losses(old_text: &str, new_text: &str) -> Vec<Loss> {
    if old_text.trim().is_empty() {
        return Vec::new();
    }
    // Not JSON, or not a file of servers Conduit can read: all of it goes. Read as the
    // runtime reads the file (a byte order mark skipped).
    let Ok(Value::Object(old)) = config::document_of_text(old_text) else {
        return vec![Loss::Unreadable];
    };
    let new = match config::document_of_text(new_text) {
        Ok(Value::Object(new)) => new,
        _ => Map::new(),
    };
    let names: Vec<String> = old
        .keys()
        .filter(|name| *name != "mcpServers" && !new.contains_key(*name))
        .cloned()
        .collect();
    if names.is_empty() {
        Vec::new()
    } else {
        vec![Loss::Fields { names }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window_guard::MASKED;
    use serde_json::json;

    fn host(dir: &std::path::Path) -> Host {
        Host::new(crate::Paths::under_home(dir.to_owned(), None))
    }

    #[test]
    fn a_stored_header_sent_along_to_a_new_url_is_refused_before_anything_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        let file = dir.path().join("mcp_servers.json");
        std::fs::write(
            &file,
            json!({"mcpServers": {"remote": {"url": "http://127.0.0.1:9/mcp",
                "headers": {"Authorization": "Bearer s3cret"}, "disabled": true}}})
            .to_string(),
        )
        .unwrap();
        let version = host.mcp_file().unwrap().version;
        let refused = host
            .edit_mcp_file(
                version,
                Edit::Update {
                    name: "remote".into(),
                    entry: json!({"url": "http://127.0.0.1:9/attacker",
                        "headers": {"Authorization": MASKED}}),
                },
                &|question: &str| panic!("asked: {question}"),
            )
            .unwrap_err();
        assert!(refused.to_string().contains("no stored value"), "{refused}");
    }

    /// Deleting an entry, or pointing it elsewhere, forgets its sign-in: a later entry
    /// that names the old URL must not inherit the tokens unasked. An entry still reaching
    /// the URL (another name, or off) keeps them.
    #[tokio::test]
    async fn a_deleted_or_moved_entry_takes_its_sign_in_with_it() {
        use conduit_mcp::oauth::vault_key;
        let yes: fn(&str) -> bool = |_| true;
        let dir = tempfile::tempdir().unwrap();
        let host = std::sync::Arc::new(host(dir.path()));
        let file = dir.path().join("mcp_servers.json");
        std::fs::write(
            &file,
            json!({"mcpServers": {
                "gone": {"url": "https://gone.example/mcp"},
                "moved": {"url": "https://old.example/mcp?k=1"},
                "kept": {"url": "https://kept.example/mcp", "disabled": true},
                "twin": {"url": "https://twin.example/mcp"},
                "twin-too": {"url": "https://twin.example/mcp"},
                "header": {"url": "https://header.example/mcp"}
            }})
            .to_string(),
        )
        .unwrap();
        let vault = host.token_vault();
        let urls = [
            "https://gone.example/mcp",
            "https://old.example/mcp",
            "https://kept.example/mcp",
            "https://twin.example/mcp",
            "https://header.example/mcp",
        ];
        for url in urls {
            vault
                .save(&vault_key(url), r#"{"client_id": "c"}"#)
                .await
                .unwrap();
        }
        let version = host.mcp_file().unwrap().version;
        let after_remove = host
            .edit_mcp_file(
                version,
                Edit::Remove {
                    name: "gone".into(),
                },
                &yes,
            )
            .unwrap();
        let after_move = host
            .edit_mcp_file(
                after_remove.version,
                Edit::Update {
                    name: "moved".into(),
                    entry: json!({"url": "https://new.example/mcp"}),
                },
                &yes,
            )
            .unwrap();
        let after_twin = host
            .edit_mcp_file(
                after_move.version,
                Edit::Remove {
                    name: "twin".into(),
                },
                &yes,
            )
            .unwrap();
        // A header taking a variable that is not set leaves the URL as it was.
        host.edit_mcp_file(
            after_twin.version,
            Edit::Update {
                name: "header".into(),
                entry: json!({"url": "https://header.example/mcp",
                    "headers": {"X-Team": "${CONDUIT_TEST_SURELY_UNSET_VARIABLE}"}}),
            },
            &yes,
        )
        .unwrap();
        let mut held = Vec::new();
        for url in urls {
            if vault.load(&vault_key(url)).await.unwrap().is_some() {
                held.push(url);
            }
        }
        assert_eq!(
            held,
            [
                "https://kept.example/mcp",
                "https://twin.example/mcp",
                "https://header.example/mcp"
            ],
            "the deleted and the moved entries' sign-ins are forgotten"
        );
    }

    #[test]
    fn a_server_cannot_take_the_name_of_conduits_own_tools() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let refused = host
            .edit_mcp_file(
                None,
                Edit::Add {
                    name: crate::builtin::BUILTIN_SERVER.into(),
                    entry: json!({"command": "conduit", "args": ["mcp", "serve"]}),
                },
                &YES,
            )
            .unwrap_err();
        assert!(
            matches!(refused, McpEditError::ReservedName(_)),
            "{refused}"
        );
        assert!(refused.to_string().contains("another name"), "{refused}");
        assert!(
            !dir.path().join("mcp_servers.json").exists(),
            "nothing written"
        );
        // In any case, and in the raw editor too: its questions would come under Conduit's
        // own name.
        for edit in [
            Edit::Add {
                name: "Conduit".into(),
                entry: json!({"command": "evil"}),
            },
            Edit::Replace {
                text: r#"{"mcpServers": {"CONDUIT": {"command": "evil"}}}"#.into(),
            },
        ] {
            let refused = host.edit_mcp_file(None, edit, &YES).unwrap_err();
            assert!(
                matches!(refused, McpEditError::ReservedName(_)),
                "{refused}"
            );
        }
    }

    /// A file entry named `conduit` (Conduit's own "use in other apps" entry pasted from
    /// another app's file) never runs; removing it, or renaming it as the runtime asks,
    /// keeps the built-in tools' preferences, which are kept under that name.
    #[test]
    fn removing_a_file_entry_named_conduit_keeps_the_built_in_tools_preferences() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let file = dir.path().join("mcp_servers.json");
        let pasted =
            r#"{"mcpServers": {"conduit": {"command": "conduit", "args": ["mcp", "serve"]}}}"#;
        let switched_off = |host: &Host| {
            !crate::settings::Settings::load(&host.paths().settings_file)
                .unwrap()
                .tool_enabled(crate::builtin::BUILTIN_SERVER, "read_conversation")
        };
        for edit in [
            Edit::Remove {
                name: crate::builtin::BUILTIN_SERVER.into(),
            },
            Edit::Replace {
                text: pasted.replace("\"conduit\": {", "\"conduit-elsewhere\": {"),
            },
        ] {
            std::fs::write(&file, pasted).unwrap();
            assert!(
                host.set_builtin_tool_enabled("read_conversation", false)
                    .is_ok()
            );
            assert!(switched_off(&host));
            let version = host.mcp_file().unwrap().version;
            host.edit_mcp_file(version, edit, &YES).unwrap();
            let servers = crate::window_guard::servers_of(&std::fs::read_to_string(&file).unwrap());
            assert!(!servers.contains_key("conduit"), "{servers:?}");
            assert!(switched_off(&host), "the built-in tool came back on");
        }
    }

    #[test]
    fn the_version_the_window_holds_tests_no_guess_of_a_masked_secret() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let file = dir.path().join("mcp_servers.json");
        // A short secret a script could enumerate if the version were a plain hash.
        let text = r#"{"mcpServers": {"db": {"command": "db-mcp", "env": {"DB_PIN": "4711"}}}}"#;
        std::fs::write(&file, text).unwrap();
        let shown = host.mcp_file().unwrap();
        assert!(!shown.text.contains("4711"), "{}", shown.text);
        let version = shown.version.clone().unwrap();
        for guess in (0..10_000).map(|pin| text.replace("4711", &format!("{pin:04}"))) {
            assert_ne!(version, conduit_files::fingerprint_bytes(guess.as_bytes()));
        }
        // Another host's (another process's) version of the same bytes names nothing here.
        let other = Host::new(crate::Paths::under_home(dir.path().to_owned(), None))
            .mcp_file()
            .unwrap()
            .version;
        assert_ne!(other, shown.version);
        let refused = host.edit_mcp_file(other, Edit::Remove { name: "db".into() }, &YES);
        assert!(
            matches!(
                refused,
                Err(McpEditError::Config(ConfigError::Conflict { .. }))
            ),
            "{refused:?}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
        // Its own version still edits.
        let removed = host
            .edit_mcp_file(shown.version, Edit::Remove { name: "db".into() }, &YES)
            .unwrap();
        assert!(removed.servers.is_empty());
    }

    #[test]
    fn edits_name_the_version_they_are_based_on_and_bad_text_is_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let empty = host.mcp_file().unwrap();
        assert_eq!(empty.version, None, "no file yet");
        let added = host
            .edit_mcp_file(
                None,
                Edit::Add {
                    name: "time".into(),
                    entry: json!({"command": "uvx", "args": ["mcp-server-time"]}),
                },
                &YES,
            )
            .unwrap();
        assert_eq!(added.servers[0].name, "time");
        let file = dir.path().join("mcp_servers.json");
        let before = std::fs::read(&file).unwrap();

        // A change based on an older version is refused: nothing written.
        let stale = host.edit_mcp_file(
            None,
            Edit::Remove {
                name: "time".into(),
            },
            &YES,
        );
        assert!(
            matches!(
                stale,
                Err(McpEditError::Config(ConfigError::Conflict { .. }))
            ),
            "{stale:?}"
        );
        // Broken text is refused with line and column: nothing written.
        let broken = host.edit_mcp_file(
            added.version.clone(),
            Edit::Replace {
                text: "{\n  \"mcpServers\": {,}\n}".into(),
            },
            &YES,
        );
        assert!(
            matches!(
                broken,
                Err(McpEditError::Config(ConfigError::Parse { line: 2, .. }))
            ),
            "{broken:?}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), before);
        let problem = host.check_mcp_text("{\n  \"mcpServers\": {,}\n}").unwrap();
        assert_eq!((problem.line, problem.column), (Some(2), Some(18)));
        assert!(
            !problem.message.contains("mcp_servers.json"),
            "{}",
            problem.message
        );

        // A file that does not parse still opens in the editor, with its problem.
        std::fs::write(&file, "{ not json").unwrap();
        let shown = host.mcp_file().unwrap();
        assert_eq!(shown.text, "{ not json");
        assert!(shown.problem.is_some() && shown.servers.is_empty());
        let mended = host
            .edit_mcp_file(
                shown.version,
                Edit::Replace {
                    text: "{\"mcpServers\": {}}\n".into(),
                },
                &YES,
            )
            .unwrap();
        assert!(mended.problem.is_none());
    }

    /// A user who says yes, and one who says no and remembers what was asked.
    const YES: fn(&str) -> bool = |_| true;

    struct Asked(std::sync::Mutex<Vec<String>>);
    impl Asked {
        fn new() -> Self {
            Self(std::sync::Mutex::new(Vec::new()))
        }
        fn no(&self) -> impl Fn(&str) -> bool + Sync + '_ {
            |question: &str| {
                self.0.lock().unwrap().push(question.to_owned());
                false
            }
        }
        fn questions(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }
    }

    #[test]
    fn the_windows_edits_that_start_a_command_need_a_yes_and_a_no_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let file = dir.path().join("mcp_servers.json");
        std::fs::write(
            &file,
            r#"{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"], "disabled": true}}}"#,
        )
        .unwrap();
        let before = std::fs::read(&file).unwrap();
        let version = host.mcp_file().unwrap().version;
        let asked = Asked::new();
        let edits = [
            Edit::Add {
                name: "evil".into(),
                entry: json!({"command": "sh", "args": ["-c", "touch /tmp/pwned"]}),
            },
            Edit::Update {
                name: "time".into(),
                entry: json!({"command": "sh", "args": ["-c", "id"]}),
            },
            Edit::SetDisabled {
                name: "time".into(),
                disabled: false,
            },
            Edit::Replace {
                text: r#"{"mcpServers": {"web": {"url": "http://127.0.0.1:9/mcp"}}}"#.into(),
            },
        ];
        for edit in edits {
            let refused = host.edit_mcp_file(version.clone(), edit, &asked.no());
            assert!(
                matches!(refused, Err(McpEditError::NotConfirmed)),
                "{refused:?}"
            );
            assert_eq!(std::fs::read(&file).unwrap(), before, "nothing written");
        }
        let questions = asked.questions();
        assert_eq!(questions.len(), 4);
        assert!(
            questions[0].contains("\"touch /tmp/pwned\""),
            "{}",
            questions[0]
        );
        assert!(
            questions[2].contains("\"mcp-server-time\""),
            "{}",
            questions[2]
        );
        assert!(
            questions[3].contains("http://127.0.0.1:9/mcp"),
            "{}",
            questions[3]
        );

        // Disabling starts nothing and loses nothing: nobody is asked.
        let disabled = host
            .edit_mcp_file(
                version,
                Edit::SetDisabled {
                    name: "time".into(),
                    disabled: true,
                },
                &asked.no(),
            )
            .unwrap();
        assert_eq!(asked.questions().len(), 4);

        // Deleting an entry loses it: asked, by name, in the form and in the raw text.
        let deletions = [
            Edit::Remove {
                name: "time".into(),
            },
            Edit::Replace {
                text: r#"{"mcpServers": {}}"#.into(),
            },
        ];
        let before = std::fs::read(&file).unwrap();
        for edit in deletions {
            let refused = host.edit_mcp_file(disabled.version.clone(), edit, &asked.no());
            assert!(
                matches!(refused, Err(McpEditError::NotConfirmed)),
                "{refused:?}"
            );
            assert_eq!(std::fs::read(&file).unwrap(), before, "nothing written");
        }
        let questions = asked.questions();
        assert_eq!(questions.len(), 6);
        for question in &questions[4..] {
            assert!(
                question.contains("Delete from the mcpServers file")
                    && question.contains("\"time\""),
                "{question}"
            );
        }
        let removed = host
            .edit_mcp_file(
                disabled.version,
                Edit::Remove {
                    name: "time".into(),
                },
                &YES,
            )
            .unwrap();
        assert!(removed.servers.is_empty());
    }

    /// The raw text is read as the runtime reads it: a byte order mark before a new
    /// command does not hide it from the question (the host once read such a text as
    /// naming no servers, while the runtime skipped the mark and started the command), and
    /// the text is saved without the mark.
    #[test]
    fn a_raw_text_behind_a_byte_order_mark_still_asks_before_a_command_starts() {
        for before in [
            None,
            Some(r#"{"mcpServers": {"web": {"url": "http://127.0.0.1:9/mcp"}}}"#),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let host = host(dir.path());
            let file = dir.path().join("mcp_servers.json");
            if let Some(before) = before {
                std::fs::write(&file, before).unwrap();
            }
            let version = host.mcp_file().unwrap().version;
            let asked = Asked::new();
            let text = "\u{feff}{\"mcpServers\": {\"web\": {\"url\": \"http://127.0.0.1:9/mcp\"}, \"evil\": {\"command\": \"sh\", \"args\": [\"-c\", \"touch /tmp/pwned\"]}}}";
            let refused = host.edit_mcp_file(
                version.clone(),
                Edit::Replace { text: text.into() },
                &asked.no(),
            );
            assert!(
                matches!(refused, Err(McpEditError::NotConfirmed)),
                "{refused:?}"
            );
            let questions = asked.questions();
            assert_eq!(questions.len(), 1, "{questions:?}");
            assert!(
                questions[0].contains("\"touch /tmp/pwned\"") && !questions[0].contains("Delete"),
                "{}",
                questions[0]
            );
            let saved = host
                .edit_mcp_file(version, Edit::Replace { text: text.into() }, &YES)
                .unwrap();
            assert_eq!(saved.servers.len(), 2);
            assert!(
                !std::fs::read_to_string(&file)
                    .unwrap()
                    .starts_with('\u{feff}')
            );
        }
    }

    #[test]
    fn a_raw_text_replacing_a_broken_file_or_dropping_fields_is_asked_about() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let file = dir.path().join("mcp_servers.json");
        let asked = Asked::new();
        // A file being mended by hand: the new text replaces what could not be read.
        let broken = r#"{"mcpServers": {"time": {"command": "uvx"}"#;
        std::fs::write(&file, broken).unwrap();
        let version = host.mcp_file().unwrap().version;
        let mended = r#"{"mcpServers": {}}"#;
        let refused = host.edit_mcp_file(
            version.clone(),
            Edit::Replace {
                text: mended.into(),
            },
            &asked.no(),
        );
        assert!(
            matches!(refused, Err(McpEditError::NotConfirmed)),
            "{refused:?}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), broken);
        assert!(
            asked.questions()[0].contains("does not read as JSON: all of it is replaced"),
            "{:?}",
            asked.questions()
        );
        host.edit_mcp_file(
            version,
            Edit::Replace {
                text: mended.into(),
            },
            &YES,
        )
        .unwrap();
        // Fields besides the servers, dropped: named.
        let with_fields = r#"{"globalShortcut": "Ctrl+Space", "theme": "dark", "mcpServers": {}}"#;
        std::fs::write(&file, with_fields).unwrap();
        let version = host.mcp_file().unwrap().version;
        let refused = host.edit_mcp_file(
            version,
            Edit::Replace {
                text: r#"{"theme": "dark", "mcpServers": {}}"#.into(),
            },
            &asked.no(),
        );
        assert!(
            matches!(refused, Err(McpEditError::NotConfirmed)),
            "{refused:?}"
        );
        assert!(
            asked.questions()[1]
                .contains("Drop these fields from the mcpServers file: \"globalShortcut\"\n"),
            "{:?}",
            asked.questions()
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), with_fields);
    }

    #[test]
    fn a_bad_entry_is_refused_before_anyone_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let file = dir.path().join("mcp_servers.json");
        let before = r#"{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}"#;
        std::fs::write(&file, before).unwrap();
        let version = host.mcp_file().unwrap().version;
        let asked = Asked::new();
        let hidden = format!(
            "https://trusted.example{}@evil.example/mcp",
            "\n".repeat(50)
        );
        let refused = host.edit_mcp_file(
            version,
            Edit::Add {
                name: "web".into(),
                entry: json!({"url": hidden}),
            },
            &asked.no(),
        );
        assert!(
            matches!(refused, Err(McpEditError::Config(_))),
            "{refused:?}"
        );
        assert!(
            asked.questions().is_empty(),
            "asked about an entry it then refused"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
    }

    #[test]
    fn numbers_the_page_rounded_are_written_back_as_stored_and_long_ones_kept_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let file = dir.path().join("mcp_servers.json");
        std::fs::write(
            &file,
            r#"{"mcpServers": {"fs": {"command": "fs-mcp", "x-build": 9007199254740993, "x-ratio": 100.0, "x-limit": 5, "x-list": [9007199254740995]}}}"#,
        )
        .unwrap();
        let shown = host.mcp_file().unwrap();
        // As the page sends it: its numbers went through doubles.
        let mut entry = json!({"command": "fs-mcp", "x-build": 9007199254740992u64, "x-ratio": 100,
            "x-limit": 6, "x-list": [9007199254740996u64]});
        entry["disabled"] = json!(true);
        host.edit_mcp_file(
            shown.version,
            Edit::Update {
                name: "fs".into(),
                entry,
            },
            &YES,
        )
        .unwrap();
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let fs = &written["mcpServers"]["fs"];
        assert_eq!(fs["x-build"], json!(9007199254740993u64), "{written}");
        assert_eq!(fs["x-ratio"], json!(100.0), "{written}");
        assert_eq!(fs["x-list"], json!([9007199254740995u64]), "{written}");
        assert_eq!(fs["x-limit"], json!(6), "a change is a change: {written}");
        assert_eq!(fs["disabled"], json!(true));

        // A number past 64 bits is kept as written: the edit is made in the file's text
        // (before, it could not be written back exactly and the edit was refused).
        let text =
            r#"{"mcpServers": {"fs": {"command": "fs-mcp", "x-build": 18446744073709551617}}}"#;
        std::fs::write(&file, text).unwrap();
        let shown = host.mcp_file().unwrap();
        let asked = Asked::new();
        host.edit_mcp_file(
            shown.version,
            Edit::SetDisabled {
                name: "fs".into(),
                disabled: true,
            },
            &asked.no(),
        )
        .unwrap();
        assert!(asked.questions().is_empty(), "switching off asks nothing");
        let now = std::fs::read_to_string(&file).unwrap();
        assert!(now.contains(r#""x-build": 18446744073709551617"#), "{now}");
        assert!(now.contains(r#""disabled": true"#), "{now}");
        // An edit that changes nothing writes nothing and is no error.
        let shown = host.mcp_file().unwrap();
        host.edit_mcp_file(
            shown.version,
            Edit::SetDisabled {
                name: "fs".into(),
                disabled: true,
            },
            &asked.no(),
        )
        .unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), now);
    }

    #[test]
    fn secrets_reach_the_window_masked_and_a_mask_sent_back_keeps_the_stored_value() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let file = dir.path().join("mcp_servers.json");
        let secret = "sk-live-very-secret";
        std::fs::write(
            &file,
            format!(
                r#"{{"mcpServers": {{"gh": {{"command": "gh-mcp", "env": {{"TOKEN": "{secret}"}}}},
                    "web": {{"url": "https://h/mcp", "headers": {{"Authorization": "Bearer {secret}"}}}}}}}}"#
            ),
        )
        .unwrap();
        let shown = host.mcp_file().unwrap();
        let json = serde_json::to_string(&serde_json::json!({"text": shown.text,
            "servers": shown.servers.iter().map(|s| s.entry.clone()).collect::<Vec<_>>()}))
        .unwrap();
        assert!(!json.contains(secret), "{json}");
        assert!(host.mcp_file_revealed().unwrap().text.contains(secret));

        // The form sends the entry back masked with another argument: the token stays.
        let mut entry = shown.servers[0].entry.clone();
        entry["args"] = json!(["--verbose"]);
        let asked = Asked::new();
        let refused = host.edit_mcp_file(
            shown.version.clone(),
            Edit::Update {
                name: "gh".into(),
                entry: entry.clone(),
            },
            &asked.no(),
        );
        assert!(
            matches!(refused, Err(McpEditError::NotConfirmed)),
            "new arguments need a yes"
        );
        assert!(!asked.questions()[0].contains(secret));
        let saved = host
            .edit_mcp_file(
                shown.version.clone(),
                Edit::Update {
                    name: "gh".into(),
                    entry,
                },
                &YES,
            )
            .unwrap();
        let written = std::fs::read_to_string(&file).unwrap();
        assert!(
            written.contains(&format!("\"TOKEN\": \"{secret}\"")),
            "{written}"
        );
        assert!(written.contains("Bearer"), "{written}");

        // The raw editor's masked text saved as is keeps both values; a mask moved to a
        // new server is refused.
        let same = host
            .edit_mcp_file(
                saved.version.clone(),
                Edit::Replace {
                    text: saved.text.clone(),
                },
                &YES,
            )
            .unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), written);
        let moved = saved.text.replace("\"gh\"", "\"gh2\"");
        let refused = host.edit_mcp_file(same.version.clone(), Edit::Replace { text: moved }, &YES);
        assert!(matches!(refused, Err(McpEditError::Mask(_))), "{refused:?}");
        let stolen = host.edit_mcp_file(
            same.version,
            Edit::Add {
                name: "thief".into(),
                entry: json!({"url": "http://127.0.0.1:9/", "headers": {"Authorization": MASKED}}),
            },
            &YES,
        );
        assert!(matches!(stolen, Err(McpEditError::Mask(_))), "{stolen:?}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), written);
    }

    #[test]
    fn import_masks_what_it_shows_and_writes_the_real_entries_after_a_yes() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let other = dir.path().join("claude.json");
        std::fs::write(
            &other,
            r#"{"mcpServers": {"gh": {"command": "gh-mcp", "env": {"TOKEN": "s3cret"}}}}"#,
        )
        .unwrap();
        let candidates = host.mcp_import_candidates(&other).unwrap();
        assert_eq!(candidates[0].entry["env"]["TOKEN"], MASKED);
        assert_eq!(candidates[0].problem, None);
        // Conduit itself, as Settings' snippet has other apps run it, is not offered.
        let with_conduit = dir.path().join("claude-with-conduit.json");
        std::fs::write(
            &with_conduit,
            r#"{"mcpServers": {"Conduit": {"command": "conduit", "args": ["mcp", "serve"]}, "gh": {"command": "gh-mcp"}}}"#,
        )
        .unwrap();
        let offered = host.mcp_import_candidates(&with_conduit).unwrap();
        let conduit = offered.iter().find(|c| c.name == "Conduit").unwrap();
        assert!(
            conduit
                .problem
                .as_deref()
                .is_some_and(|p| p.contains("starts Conduit itself")),
            "{conduit:?}"
        );
        assert_eq!(
            offered.iter().find(|c| c.name == "gh").unwrap().problem,
            None
        );
        let pick = || {
            vec![ImportPick {
                name: "gh".into(),
                target: "github".into(),
            }]
        };
        let asked = Asked::new();
        let refused = host.import_mcp_servers(None, &other, pick(), &asked.no());
        assert!(
            matches!(refused, Err(McpEditError::NotConfirmed)),
            "{refused:?}"
        );
        assert!(asked.questions()[0].contains("\"gh-mcp\""));
        assert!(
            !dir.path().join("mcp_servers.json").exists(),
            "nothing written"
        );
        host.import_mcp_servers(None, &other, pick(), &YES).unwrap();
        let written = std::fs::read_to_string(dir.path().join("mcp_servers.json")).unwrap();
        assert!(
            written.contains("\"github\"") && written.contains("s3cret"),
            "{written}"
        );

        assert!(matches!(
            host.mcp_import_file("../../etc/passwd"),
            Err(crate::window_guard::ImportFileError::UnknownSource(_))
        ));
        // A config path that is a symlink to a file like /etc/passwd is read as its
        // target and refused as not JSON, without its text in the error.
        let passwd = dir.path().join("passwd");
        std::fs::write(&passwd, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
        let link = dir.path().join("mcp.json");
        std::os::unix::fs::symlink(&passwd, &link).unwrap();
        let refused = host.mcp_import_candidates(&link).unwrap_err().to_string();
        assert!(!refused.contains("root:"), "{refused}");

        // An entry the window was told cannot be imported is refused when picked anyway.
        std::fs::write(
            &other,
            r#"{"mcpServers": {"big": {"command": "b", "x-id": 18446744073709551617}}}"#,
        )
        .unwrap();
        let before = std::fs::read_to_string(dir.path().join("mcp_servers.json")).unwrap();
        let version = host.mcp_file().unwrap().version;
        let picked = vec![ImportPick {
            name: "big".into(),
            target: "big".into(),
        }];
        let refused = host
            .import_mcp_servers(version, &other, picked, &YES)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("18446744073709551617"), "{refused}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("mcp_servers.json")).unwrap(),
            before
        );
    }

    fn info(name: &str) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            title: None,
            description: None,
            read_only: false,
            destructive: false,
            input_schema: serde_json::json!({"type": "object"}),
            for_models: true,
        }
    }

    /// A page script cannot write a file Conduit would not read back (past its 4 MiB):
    /// a disabled entry, an unknown field or the raw text, each asking nothing, is
    /// refused before anyone is asked, and the file is kept as it was.
    #[test]
    fn an_edit_that_would_make_the_file_too_large_to_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let file = dir.path().join("mcp_servers.json");
        std::fs::write(
            &file,
            r#"{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}"#,
        )
        .unwrap();
        let before = std::fs::read(&file).unwrap();
        let shown = host.mcp_file().unwrap();
        let junk = "A".repeat(5 << 20);
        let asked = Asked::new();
        let mut grown = shown.servers[0].entry.clone();
        grown["junk"] = json!(junk);
        for edit in [
            Edit::Add {
                name: "x".into(),
                entry: json!({"command": "true", "disabled": true, "junk": junk}),
            },
            Edit::Update {
                name: "time".into(),
                entry: grown,
            },
            Edit::Replace {
                text: format!(
                    r#"{{"junk": "{junk}", "mcpServers": {{"time": {{"command": "uvx", "args": ["mcp-server-time"]}}}}}}"#
                ),
            },
        ] {
            let refused = host.edit_mcp_file(shown.version.clone(), edit, &asked.no());
            assert!(
                matches!(
                    &refused,
                    Err(McpEditError::Config(ConfigError::TooLarge { .. }))
                ),
                "{refused:?}"
            );
            let message = refused.unwrap_err().to_string();
            assert!(
                message.contains("more than the 4096 KiB Conduit reads"),
                "{message}"
            );
        }
        assert!(asked.questions().is_empty(), "{:?}", asked.questions());
        assert_eq!(std::fs::read(&file).unwrap(), before);
        assert_eq!(host.mcp_file().unwrap().servers.len(), 1, "still read");
    }

    #[test]
    fn the_tool_settings_join_gives_each_tool_its_switch_and_policy_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        host.update_settings(|settings| {
            settings.set_tool_enabled("srv", "quiet", false);
            settings.set_server_policy("srv", ToolPolicy::Deny);
            settings.set_tool_policy("srv", "trusted", ToolPolicy::Allow);
            settings.set_tool_enabled("other", "loud", false);
            Ok::<_, crate::SettingsError>(())
        })
        .unwrap();

        let joined = host
            .tool_settings(
                "srv",
                vec![info("loud"), info("quiet"), info("trusted")],
                &HashMap::new(),
            )
            .unwrap();
        assert_eq!(joined.policy, ToolPolicy::Deny);
        let rows: Vec<(&str, bool, ToolPolicy)> = joined
            .tools
            .iter()
            .map(|t| (t.tool.name.as_str(), t.enabled, t.policy))
            .collect();
        assert_eq!(
            rows,
            [
                ("loud", true, ToolPolicy::Deny),
                ("quiet", false, ToolPolicy::Deny),
                ("trusted", true, ToolPolicy::Allow),
            ]
        );
        // Not running: nothing to compare an allow with, so nothing to re-approve.
        assert!(joined.tools.iter().all(|t| t.reapproval.is_empty()));
    }
}
