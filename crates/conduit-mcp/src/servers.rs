//! One server's start and state, and the tools of ready servers under collision-free
//! names; [`crate::runtime`] keeps them running.

use std::sync::Arc;
use std::time::Duration;

use conduit_core::media::MediaStore;
use serde::Serialize;

use crate::client::{Asks, Connection, InProcessServer, Roots, ServerDetails};
use crate::config::ServerEntry;
use crate::elicit::Asker;
use crate::naming::ToolNames;
use crate::oauth::TokenVault;
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
    /// It asks the user to sign in (OAuth) before it serves anything.
    SignInRequired {
        reason: String,
        /// Signed in, but the server wants more access than was granted.
        more_scope: bool,
    },
}

/// A server and its state, as lists show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
pub struct ServerStatus {
    pub name: String,
    #[serde(flatten)]
    pub state: ServerState,
}

/// What a server said on the side, as Settings shows it: the last lines it wrote to
/// stderr (stdio servers) and the last log messages it sent over MCP, secrets hidden.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ServerOutput {
    pub stderr: Vec<String>,
    pub log_messages: Vec<String>,
}

/// A server's tool as a settings screen lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub read_only: bool,
    pub destructive: bool,
    /// JSON Schema of its arguments.
    #[ts(type = "Record<string, unknown>")]
    pub input_schema: serde_json::Value,
    /// Whether a model may be offered it (not a tool only an MCP Apps view may call).
    #[serde(skip)]
    #[ts(skip)]
    pub for_models: bool,
}

impl From<&rmcp::model::Tool> for ToolInfo {
    fn from(tool: &rmcp::model::Tool) -> Self {
        let hints = tool.annotations.as_ref();
        Self {
            name: tool.name.to_string(),
            title: tool
                .title
                .clone()
                .or_else(|| hints.and_then(|a| a.title.clone())),
            description: tool.description.as_ref().map(|d| d.to_string()),
            read_only: hints.and_then(|a| a.read_only_hint).unwrap_or(false),
            destructive: hints.and_then(|a| a.destructive_hint).unwrap_or(false),
            input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
            for_models: for_models(tool),
        }
    }
}

/// Where a server comes from: an entry of the `mcpServers` file, or Conduit itself.
#[derive(Clone)]
pub enum Source {
    File(Box<ServerEntry>),
    InProcess(Arc<dyn InProcessServer>),
}

impl Source {
    /// What runs from it: an entry's transport (`None` for an entry that is not valid),
    /// or Conduit itself.
    pub(crate) fn running_from(&self) -> Option<crate::runtime::RunningFrom> {
        match self {
            Source::File(entry) => entry
                .spec
                .as_ref()
                .ok()
                .map(|spec| crate::runtime::RunningFrom::Entry(spec.transport.clone())),
            Source::InProcess(_) => Some(crate::runtime::RunningFrom::InProcess),
        }
    }

    /// The folders the entry offers as roots (`None`: roots are not declared).
    pub(crate) fn roots(&self) -> Option<Vec<std::path::PathBuf>> {
        match self {
            Source::File(entry) => entry.spec.as_ref().ok().and_then(|spec| spec.roots.clone()),
            Source::InProcess(_) => None,
        }
    }

    /// Whether `self` differs from `other` only in the list of roots, both valid and
    /// both offering roots: then the running server is told instead of restarted (its
    /// capabilities, fixed when it started, stay true).
    pub(crate) fn only_roots_differ(&self, other: &Source) -> bool {
        let (Source::File(a), Source::File(b)) = (self, other) else {
            return false;
        };
        let without_roots = |raw: &serde_json::Value| {
            let mut raw = raw.clone();
            if let Some(object) = raw.as_object_mut() {
                object.remove("roots");
            }
            raw
        };
        a.raw != b.raw
            && a.disabled == b.disabled
            && self.roots().is_some()
            && other.roots().is_some()
            && without_roots(&a.raw) == without_roots(&b.raw)
    }

    /// Whether `self` runs something other than `other` (then it restarts).
    pub(crate) fn differs_from(&self, other: &Source) -> bool {
        match (self, other) {
            (Source::File(a), Source::File(b)) => a.raw != b.raw,
            (Source::InProcess(a), Source::InProcess(b)) => !Arc::ptr_eq(a, b),
            _ => true,
        }
    }
}

/// One server after a start attempt.
pub(crate) struct Running {
    pub(crate) name: String,
    pub(crate) state: ServerState,
    pub(crate) connection: Option<Arc<Connection>>,
    pub(crate) tools: Vec<rmcp::model::Tool>,
    /// How many tool changes the server had said when `tools` was asked for
    /// ([`Connection::tool_changes`]): a call of a tool listed before a later one checks
    /// the definition first.
    pub(crate) tools_listed_at: u64,
    /// The challenge of a server that needs sign-in, for the sign-in to start from.
    pub(crate) sign_in_challenge: Option<String>,
    /// A failed start that may succeed when tried again ([`StartError::worth_retrying`]).
    pub(crate) worth_retrying: bool,
}

impl Running {
    pub(crate) fn failed(
        name: &str,
        reason: String,
        exit_code: Option<i32>,
        stderr_tail: Vec<String>,
    ) -> Self {
        Self {
            name: name.to_owned(),
            state: ServerState::Failed {
                reason,
                exit_code,
                stderr_tail,
            },
            connection: None,
            tools: Vec::new(),
            tools_listed_at: 0,
            sign_in_challenge: None,
            worth_retrying: false,
        }
    }

    pub(crate) fn status(&self) -> ServerStatus {
        ServerStatus {
            name: self.name.clone(),
            state: self.state.clone(),
        }
    }
}

/// What runs behind a server's tools, and for an HTTP server how a call finds it again.
pub(crate) type SlotOfTools = (
    Option<crate::runtime::RunningFrom>,
    Option<crate::runtime::Reconnect>,
);

/// Core tools for the ready servers among `running` that `allow(server, tool)` lets
/// through, named uniquely across all of them.
pub(crate) fn tools_of<'a>(
    running: impl Iterator<Item = &'a Running> + Clone,
    media: Arc<dyn MediaStore>,
    allow: &dyn Fn(&str, &str) -> bool,
    slot_of: &dyn Fn(&str) -> SlotOfTools,
) -> Vec<Arc<McpTool>> {
    let pairs: Vec<(&str, &str)> = running
        .clone()
        .flat_map(|r| {
            r.tools
                .iter()
                .filter(|t| for_models(t))
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
        let (from, reconnect) = slot_of(&running.name);
        for tool in &running.tools {
            if let Some(name) = names.name_of(&running.name, &tool.name) {
                let mut made = McpTool::new(
                    name.to_owned(),
                    &running.name,
                    tool,
                    connection.clone(),
                    media.clone(),
                )
                .running_from(from.clone())
                .listed_at(running.tools_listed_at);
                if let Some(reconnect) = &reconnect {
                    made = made.reconnecting_by(reconnect.clone());
                }
                out.push(Arc::new(made));
            }
        }
    }
    out
}

/// Whether a tool may be offered to a model: not one an MCP App's view alone may call
/// (`_meta.ui.visibility` without `"model"`, io.modelcontextprotocol/ui).
pub(crate) fn for_models(tool: &rmcp::model::Tool) -> bool {
    crate::apps::for_models(tool.meta.as_deref())
}

/// Starts one server and lists its tools; never fails, the state says what happened.
pub(crate) async fn start_one(
    name: &str,
    source: &Source,
    start_timeout: Duration,
    asker: Option<Arc<dyn Asker>>,
    tokens: Option<Arc<dyn TokenVault>>,
    roots: Roots,
) -> Running {
    let asks = Asks {
        server: name.to_owned(),
        asker,
        tokens,
        roots,
        running: source.running_from(),
    };
    let entry = match source {
        Source::File(entry) => entry,
        Source::InProcess(server) => {
            let connected =
                Connection::connect_in_process(server.as_ref(), start_timeout, asks).await;
            return list_tools(name, connected, start_timeout, false).await;
        }
    };
    // The slot's name: the entry's, unless the runtime had to rename it.
    let name = name.to_owned();
    if entry.disabled {
        return Running {
            name,
            state: ServerState::Disabled,
            connection: None,
            tools: Vec::new(),
            tools_listed_at: 0,
            sign_in_challenge: None,
            worth_retrying: false,
        };
    }
    let spec = match &entry.spec {
        Ok(spec) => spec,
        Err(reason) => {
            tracing::warn!(server = %entry.name, %reason, "MCP server entry cannot start");
            return Running::failed(&name, reason.clone(), None, Vec::new());
        }
    };
    list_tools(
        &name,
        Connection::connect(spec, start_timeout, asks).await,
        start_timeout,
        spec.sends_its_own_authorization(),
    )
    .await
}

/// Lists a started server's tools within `timeout`: then it is ready. `own_authorization`:
/// the entry gives its own `Authorization` header, so a refusal is not a sign-in request.
async fn list_tools(
    name: &str,
    connected: Result<Connection, crate::client::StartError>,
    timeout: Duration,
    own_authorization: bool,
) -> Running {
    let failed =
        |reason, exit_code, stderr_tail| Running::failed(name, reason, exit_code, stderr_tail);
    let connection = match connected {
        Ok(connection) => Arc::new(connection),
        Err(err) => {
            if let Some(need) = err.sign_in {
                tracing::info!(server = %name, more_scope = need.more_scope, "MCP server needs sign-in");
                return Running {
                    name: name.to_owned(),
                    state: ServerState::SignInRequired {
                        reason: err.reason,
                        more_scope: need.more_scope,
                    },
                    connection: None,
                    tools: Vec::new(),
                    tools_listed_at: 0,
                    sign_in_challenge: need.challenge,
                    worth_retrying: false,
                };
            }
            tracing::warn!(server = %name, error = %err, "MCP server failed to start");
            return Running {
                worth_retrying: err.worth_retrying,
                ..failed(err.reason, err.exit_code, err.stderr_tail)
            };
        }
    };
    let listed_at = connection.tool_changes();
    match tokio::time::timeout(timeout, connection.tools()).await {
        Ok(Ok(tools)) => {
            tracing::info!(server = %name, tools = tools.len(), "MCP server ready");
            Running {
                name: name.to_owned(),
                state: ServerState::Ready {
                    details: connection.details.clone(),
                    tool_count: tools.len(),
                },
                connection: Some(connection),
                tools,
                tools_listed_at: listed_at,
                sign_in_challenge: None,
                worth_retrying: false,
            }
        }
        // Signing in would not help: the entry's own header is refused (as the handshake
        // says when it is refused there).
        Ok(Err(crate::client::McpError::SignIn(_))) if own_authorization => {
            let tail = connection.stderr_tail();
            connection.shutdown().await;
            failed(
                "it refused the Authorization header of its entry".to_owned(),
                None,
                tail,
            )
        }
        Ok(Err(crate::client::McpError::SignIn(need))) => {
            // Its tokens no longer do (revoked, or its authorization server moved).
            connection.shutdown().await;
            tracing::info!(server = %name, "MCP server needs sign-in again");
            Running {
                name: name.to_owned(),
                state: ServerState::SignInRequired {
                    reason: crate::client::McpError::SignIn(need.clone()).to_string(),
                    more_scope: need.more_scope,
                },
                connection: None,
                tools: Vec::new(),
                tools_listed_at: 0,
                sign_in_challenge: need.challenge,
                worth_retrying: false,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(raw: serde_json::Value) -> Source {
        let env = |name: &str| (name == "HOME").then(|| "/home/u".to_owned());
        Source::File(Box::new(ServerEntry {
            name: "s".into(),
            disabled: false,
            spec: crate::config::spec_of(&raw, &env),
            raw,
        }))
    }

    #[test]
    fn only_a_change_of_an_existing_roots_list_keeps_the_server_running() {
        let before = file(json!({"command": "srv", "roots": ["/a"]}));
        let more = file(json!({"command": "srv", "roots": ["/a", "~/b"]}));
        assert!(more.only_roots_differ(&before));
        assert_eq!(
            more.roots(),
            Some(vec![
                std::path::PathBuf::from("/a"),
                std::path::PathBuf::from("/home/u/b")
            ])
        );
        // Anything else changed, roots added or removed (capabilities change), or a list
        // that no longer reads: a restart.
        for after in [
            json!({"command": "srv2", "roots": ["/a", "/b"]}),
            json!({"command": "srv"}),
            json!({"command": "srv", "roots": ["relative"]}),
        ] {
            assert!(!file(after.clone()).only_roots_differ(&before), "{after}");
        }
        assert!(!before.only_roots_differ(&file(json!({"command": "srv"}))));
        assert!(!before.only_roots_differ(&before), "nothing changed");
    }
}

#[cfg(test)]
mod visibility_tests {
    #![allow(clippy::unwrap_used)]
    use super::for_models;
    use serde_json::json;

    fn tool(meta: serde_json::Value) -> rmcp::model::Tool {
        serde_json::from_value(
            json!({"name": "t", "inputSchema": {"type": "object"}, "_meta": meta}),
        )
        .unwrap()
    }

    #[test]
    fn a_tool_only_an_apps_view_may_call_is_never_offered_to_a_model() {
        assert!(!for_models(&tool(json!({"ui": {"visibility": ["app"]}}))));
        assert!(for_models(&tool(
            json!({"ui": {"visibility": ["model", "app"]}})
        )));
        assert!(for_models(&tool(
            json!({"ui": {"resourceUri": "ui://x/view.html"}})
        )));
        assert!(for_models(&tool(json!({}))));
    }
}
