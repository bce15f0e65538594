//! The servers of one `mcpServers` file: started together, each with a start timeout and
//! a visible state, their tools offered under collision-free names.

use std::sync::Arc;
use std::time::Duration;

use conduit_core::media::MediaStore;
use serde::Serialize;

use crate::client::{Connection, ServerDetails};
use crate::config::{ServerEntry, Snapshot};
use crate::naming::ToolNames;
use crate::tool::McpTool;

/// How long a server may take to start by default.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a server is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ServerState {
    Starting,
    Ready {
        details: ServerDetails,
        tool_count: usize,
    },
    Failed {
        reason: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        exit_code: Option<i32>,
        stderr_tail: Vec<String>,
    },
    /// It stopped unexpectedly and starts again after a pause.
    Restarting {
        attempt: u32,
        reason: String,
        stderr_tail: Vec<String>,
    },
    Disabled,
}

/// A server and its state, as lists show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
pub struct ServerStatus {
    pub name: String,
    #[serde(flatten)]
    pub state: ServerState,
}

/// One server after a start attempt.
pub(crate) struct Running {
    pub(crate) name: String,
    pub(crate) state: ServerState,
    pub(crate) connection: Option<Arc<Connection>>,
    pub(crate) tools: Vec<rmcp::model::Tool>,
}

/// The started servers of one file.
pub struct Servers {
    running: Vec<Running>,
}

impl Servers {
    /// Starts every enabled, valid server of `snapshot` at once.
    pub async fn start(snapshot: &Snapshot, start_timeout: Duration) -> Self {
        let starts = snapshot
            .servers
            .iter()
            .map(|entry| start_one(entry, start_timeout));
        Self {
            running: futures::future::join_all(starts).await,
        }
    }

    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.running
            .iter()
            .map(|r| ServerStatus {
                name: r.name.clone(),
                state: r.state.clone(),
            })
            .collect()
    }

    pub fn connection(&self, server: &str) -> Option<Arc<Connection>> {
        self.running
            .iter()
            .find(|r| r.name == server)
            .and_then(|r| r.connection.clone())
    }

    /// The tools of the ready servers that `allow(server, tool)` lets through, under
    /// names unique across all of them.
    pub fn tools(
        &self,
        media: Arc<dyn MediaStore>,
        allow: &dyn Fn(&str, &str) -> bool,
    ) -> Vec<Arc<McpTool>> {
        tools_of(self.running.iter(), media, allow)
    }

    /// The tools of one ready server, as the server names them.
    pub fn server_tools(&self, server: &str) -> Option<&[rmcp::model::Tool]> {
        self.running
            .iter()
            .find(|r| r.name == server)
            .map(|r| r.tools.as_slice())
    }

    /// Ends every session and server process.
    pub async fn shutdown(&self) {
        let stops = self
            .running
            .iter()
            .filter_map(|r| r.connection.as_ref())
            .map(|c| c.shutdown());
        futures::future::join_all(stops).await;
    }
}

/// Core tools for the ready servers among `running` that `allow(server, tool)` lets
/// through, named uniquely across all of them.
pub(crate) fn tools_of<'a>(
    running: impl Iterator<Item = &'a Running> + Clone,
    media: Arc<dyn MediaStore>,
    allow: &dyn Fn(&str, &str) -> bool,
) -> Vec<Arc<McpTool>> {
    let pairs: Vec<(&str, &str)> = running
        .clone()
        .flat_map(|r| {
            r.tools
                .iter()
                .map(move |t| (r.name.as_str(), t.name.as_ref()))
        })
        .filter(|(server, tool)| allow(server, tool))
        .collect();
    let names = ToolNames::assign(pairs);
    let mut out = Vec::new();
    for running in running {
        let Some(connection) = &running.connection else {
            continue;
        };
        for tool in &running.tools {
            if let Some(name) = names.name_of(&running.name, &tool.name) {
                out.push(Arc::new(McpTool::new(
                    name.to_owned(),
                    &running.name,
                    tool,
                    connection.clone(),
                    media.clone(),
                )));
            }
        }
    }
    out
}

/// Starts one server and lists its tools; never fails, the state says what happened.
pub(crate) async fn start_one(entry: &ServerEntry, start_timeout: Duration) -> Running {
    let name = entry.name.clone();
    if entry.disabled {
        return Running {
            name,
            state: ServerState::Disabled,
            connection: None,
            tools: Vec::new(),
        };
    }
    let failed = |reason: String, exit_code: Option<i32>, stderr_tail: Vec<String>| Running {
        name: entry.name.clone(),
        state: ServerState::Failed {
            reason,
            exit_code,
            stderr_tail,
        },
        connection: None,
        tools: Vec::new(),
    };
    let spec = match &entry.spec {
        Ok(spec) => spec,
        Err(reason) => {
            tracing::warn!(server = %entry.name, %reason, "MCP server entry cannot start");
            return failed(reason.clone(), None, Vec::new());
        }
    };
    let timeout = start_timeout;
    let connection = match Connection::connect(spec, timeout).await {
        Ok(connection) => Arc::new(connection),
        Err(err) => {
            tracing::warn!(server = %entry.name, error = %err, "MCP server failed to start");
            return failed(err.reason, err.exit_code, err.stderr_tail);
        }
    };
    match tokio::time::timeout(timeout, connection.tools()).await {
        Ok(Ok(tools)) => {
            tracing::info!(server = %entry.name, tools = tools.len(), "MCP server ready");
            Running {
                name,
                state: ServerState::Ready {
                    details: connection.details.clone(),
                    tool_count: tools.len(),
                },
                connection: Some(connection),
                tools,
            }
        }
        Ok(Err(err)) => {
            let tail = connection.stderr_tail();
            connection.shutdown().await;
            failed(format!("listing its tools failed: {err}"), None, tail)
        }
        Err(_) => {
            let tail = connection.stderr_tail();
            connection.shutdown().await;
            failed(
                format!("listing its tools took longer than {timeout:?}"),
                None,
                tail,
            )
        }
    }
}
