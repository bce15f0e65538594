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
