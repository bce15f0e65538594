//! MCP for the frontends: the `mcpServers` file, starting its servers, and calling their
//! tools, resources and prompts.

use std::sync::Arc;
use std::time::Duration;

use conduit_core::media::MediaStore;
use conduit_core::tool::{ProgressSink, ToolOutput};
use conduit_mcp::client::McpError;
use conduit_mcp::config::{self, ConfigError, Edit, Snapshot};
use conduit_mcp::servers::{DEFAULT_START_TIMEOUT, Servers};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::Host;

/// Environment variable with the start timeout of MCP servers, in seconds.
pub const START_TIMEOUT_ENV: &str = "CONDUIT_MCP_START_TIMEOUT";

pub use conduit_mcp::servers::{ServerState, ServerStatus};

#[derive(Debug, thiserror::Error)]
pub enum HostMcpError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("there is no ready server named {0:?}")]
    NoServer(String),
    #[error("server {server:?}: {error}")]
    Call { server: String, error: McpError },
    #[error("{0}")]
    Arguments(String),
    #[error("{0}")]
    Result(String),
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

    /// Starts every enabled server of the file, all at once, each within the start
    /// timeout (`CONDUIT_MCP_START_TIMEOUT` seconds, default 30).
    pub async fn start_mcp(&self) -> Result<Servers, ConfigError> {
        let snapshot = self.mcp_config()?;
        Ok(Servers::start(&snapshot, self.mcp_start_timeout()).await)
    }

    /// How long a server may take to start: `CONDUIT_MCP_START_TIMEOUT` seconds, or 30.
    pub fn mcp_start_timeout(&self) -> Duration {
        std::env::var(START_TIMEOUT_ENV)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .map_or(DEFAULT_START_TIMEOUT, Duration::from_secs_f64)
    }

    /// Lets a model use `tool` of `server`, or not (kept in settings).
    pub fn set_mcp_tool_enabled(
        &self,
        server: &str,
        tool: &str,
        enabled: bool,
    ) -> Result<(), crate::SettingsError> {
        let mut settings = self.settings()?;
        settings.set_tool_enabled(server, tool, enabled);
        settings.save(&self.paths.settings_file)
    }

    /// Calls `tool` on `server` directly (not through a model).
    pub async fn call_mcp_tool(
        &self,
        servers: &Servers,
        server: &str,
        tool: &str,
        arguments: Value,
        progress: ProgressSink,
        cancel: CancellationToken,
    ) -> Result<ToolOutput, HostMcpError> {
        let connection = servers
            .connection(server)
            .ok_or_else(|| HostMcpError::NoServer(server.to_owned()))?;
        let arguments = as_object(arguments)?;
        let result = connection
            .call_tool(tool, arguments, progress, cancel)
            .await
            .map_err(|error| HostMcpError::Call {
                server: server.to_owned(),
                error,
            })?;
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
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpFile {
    pub path: String,
    /// The file's text (a starting document when there is no file).
    pub text: String,
    /// Names this version of the file; a change must name the version it is based on.
    pub version: Option<String>,
    pub servers: Vec<McpFileServer>,
    /// Why the file cannot be read as it is (its servers are then not listed).
    pub problem: Option<TextProblem>,
}

#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpFileServer {
    pub name: String,
    pub disabled: bool,
    /// The entry as written, unknown fields included.
    pub entry: Value,
    /// Why the entry cannot start, if it cannot.
    pub problem: Option<String>,
}

/// A problem with the file's text, with where it is when it is a JSON syntax error.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
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

/// A change the settings screen makes to the file.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum McpEdit {
    Add { name: String, entry: Value },
    Update { name: String, entry: Value },
    Remove { name: String },
    SetDisabled { name: String, disabled: bool },
    Replace { text: String },
}

/// What a new file starts as.
const EMPTY_FILE: &str = "{\n  \"mcpServers\": {}\n}\n";

impl Host {
    /// The file's text, version and servers; a file that does not parse comes with its
    /// problem (line and column) so the raw editor can show both.
    pub fn mcp_file(&self) -> Result<McpFile, ConfigError> {
        let path = &self.paths.mcp_config_file;
        let read_error = |e: std::io::Error| ConfigError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        // One read: the text shown, its version and its servers are the same contents.
        let bytes = match std::fs::read(path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(read_error(e)),
        };
        let Some(bytes) = bytes else {
            return Ok(McpFile {
                path: path.display().to_string(),
                text: EMPTY_FILE.to_owned(),
                version: None,
                servers: Vec::new(),
                problem: None,
            });
        };
        let version = Some(conduit_files::fingerprint_bytes(&bytes));
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
                        entry: entry.raw,
                        problem: entry.spec.err(),
                    })
                    .collect(),
                None,
            ),
            Err(error) => (Vec::new(), Some(TextProblem::from(&error))),
        };
        Ok(McpFile {
            path: path.display().to_string(),
            text,
            version,
            servers,
            problem,
        })
    }

    /// Applies a change made on `version` of the file; refused (nothing written) when the
    /// file changed since, or when the change is invalid.
    pub fn edit_mcp_file(
        &self,
        version: Option<String>,
        edit: McpEdit,
    ) -> Result<McpFile, ConfigError> {
        let path = &self.paths.mcp_config_file;
        let conflict = || ConfigError::Conflict {
            path: path.display().to_string(),
        };
        let current = conduit_files::fingerprint(path).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        if current != version {
            return Err(conflict());
        }
        let mut removed = None;
        let edit = match edit {
            McpEdit::Replace { text } => {
                // The raw editor may be mending a file that does not parse: no snapshot.
                config::check_text(path, &text)?;
                conduit_files::write_atomically(path, text.as_bytes(), 0o600).map_err(|e| {
                    ConfigError::Write {
                        path: path.display().to_string(),
                        message: e.to_string(),
                    }
                })?;
                return self.mcp_file();
            }
            McpEdit::Add { name, entry } => Edit::Add { name, entry },
            McpEdit::Update { name, entry } => Edit::Update { name, entry },
            McpEdit::Remove { name } => {
                removed = Some(name.clone());
                Edit::Remove { name }
            }
            McpEdit::SetDisabled { name, disabled } => Edit::SetDisabled { name, disabled },
        };
        let snapshot = config::read(path)?;
        if snapshot.version().map(str::to_owned) != version {
            return Err(conflict());
        }
        config::apply(&snapshot, edit)?;
        if let Some(server) = removed {
            self.forget_server_policies(&server);
        }
        self.mcp_file()
    }

    /// The problem the raw editor's text has, if any.
    pub fn check_mcp_text(&self, text: &str) -> Option<TextProblem> {
        config::check_text(&self.paths.mcp_config_file, text)
            .err()
            .map(|e| TextProblem::from(&e))
    }

    /// The servers another app's config file (Claude Desktop, Cursor, VS Code) holds.
    pub fn mcp_import_candidates(
        &self,
        file: &std::path::Path,
    ) -> Result<Vec<config::ImportCandidate>, ConfigError> {
        // Paths as other apps document them start with `~`.
        let expanded = match (file.strip_prefix("~"), directories::BaseDirs::new()) {
            (Ok(rest), Some(dirs)) => dirs.home_dir().join(rest),
            _ => file.to_owned(),
        };
        let text = std::fs::read_to_string(&expanded).map_err(|e| ConfigError::Read {
            path: expanded.display().to_string(),
            message: e.to_string(),
        })?;
        config::import_candidates(&expanded, &text)
    }

    /// Sets the approval policy of `server`'s tools that have none of their own.
    pub fn set_mcp_server_policy(
        &self,
        server: &str,
        policy: crate::settings::ToolPolicy,
    ) -> Result<(), crate::SettingsError> {
        let mut settings = self.settings()?;
        settings.set_server_policy(server, policy);
        settings.save(&self.paths.settings_file)
    }

    /// Sets whether `tool` of `server` runs without asking, never, or after asking.
    pub fn set_mcp_tool_policy(
        &self,
        server: &str,
        tool: &str,
        policy: crate::settings::ToolPolicy,
    ) -> Result<(), crate::SettingsError> {
        let mut settings = self.settings()?;
        settings.set_tool_policy(server, tool, policy);
        settings.save(&self.paths.settings_file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn host(dir: &std::path::Path) -> Host {
        Host::new(crate::Paths::under_home(dir.to_owned(), None))
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
                McpEdit::Add {
                    name: "time".into(),
                    entry: json!({"command": "uvx", "args": ["mcp-server-time"]}),
                },
            )
            .unwrap();
        assert_eq!(added.servers[0].name, "time");
        let file = dir.path().join("mcp_servers.json");
        let before = std::fs::read(&file).unwrap();

        // A change based on an older version is refused: nothing written.
        let stale = host.edit_mcp_file(
            None,
            McpEdit::Remove {
                name: "time".into(),
            },
        );
        assert!(
            matches!(stale, Err(ConfigError::Conflict { .. })),
            "{stale:?}"
        );
        // Broken text is refused with line and column: nothing written.
        let broken = host.edit_mcp_file(
            added.version.clone(),
            McpEdit::Replace {
                text: "{\n  \"mcpServers\": {,}\n}".into(),
            },
        );
        assert!(
            matches!(broken, Err(ConfigError::Parse { line: 2, .. })),
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
                McpEdit::Replace {
                    text: "{\"mcpServers\": {}}\n".into(),
                },
            )
            .unwrap();
        assert!(mended.problem.is_none());
    }

    #[test]
    fn import_reads_paths_that_start_with_the_home_folder() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let missing =
            host.mcp_import_candidates(std::path::Path::new("~/no-such-conduit-file.json"));
        let Err(ConfigError::Read { path, .. }) = missing else {
            panic!("{missing:?}")
        };
        assert!(!path.starts_with('~'), "{path}");
    }
}
