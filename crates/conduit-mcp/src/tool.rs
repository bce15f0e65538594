//! An MCP server's tool as a core `Tool`: the exposed name, the server's schema and
//! annotations, and calls that go through the connection.

use std::sync::Arc;

use async_trait::async_trait;
use conduit_core::media::MediaStore;
use conduit_core::tool::{Tool, ToolAnnotations, ToolContext, ToolError, ToolOutput, ToolSpec};
use serde_json::Value;

use crate::client::{Connection, McpError};
use crate::result;
use crate::runtime::{Reconnect, RunningFrom};

/// One tool of one server.
pub struct McpTool {
    spec: ToolSpec,
    server: String,
    /// The tool's own name on its server.
    tool: String,
    connection: Arc<Connection>,
    media: Arc<dyn MediaStore>,
    /// The tool's MCP Apps view (`ui://`), if it has one.
    view: Option<String>,
    /// Whether views may call it too (`_meta.ui.visibility` names `app`).
    for_views: bool,
    /// The definition as the server listed it, which the model was shown and the call
    /// approved under: a call sent again on a new session needs the same one there.
    definition: rmcp::model::Tool,
    /// How to find the server again when its HTTP session expires or it was started again
    /// (every server of the file; not Conduit's own).
    reconnect: Option<Reconnect>,
    /// What ran as the server when the tool was listed for the turn (`None`: unknown).
    from: Option<RunningFrom>,
    /// How many tool changes the server had said when the list this tool comes from was
    /// asked for: a call after a later one checks the definition the server has now. The
    /// list's own count, not the connection's when the turn took the tool: a change said
    /// while the list was being asked for again is after this definition.
    changes_when_listed: u64,
}

impl McpTool {
    pub fn new(
        exposed_name: String,
        server: &str,
        tool: &rmcp::model::Tool,
        connection: Arc<Connection>,
        media: Arc<dyn MediaStore>,
    ) -> Self {
        let annotations = tool
            .annotations
            .as_ref()
            .map(|a| ToolAnnotations {
                read_only_hint: a.read_only_hint,
                destructive_hint: a.destructive_hint,
                idempotent_hint: a.idempotent_hint,
                open_world_hint: a.open_world_hint,
            })
            .unwrap_or_default();
        let spec = ToolSpec {
            name: exposed_name,
            title: tool
                .title
                .clone()
                .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone())),
            description: tool.description.as_deref().unwrap_or_default().to_owned(),
            input_schema: Value::Object((*tool.input_schema).clone()),
            output_schema: tool
                .output_schema
                .as_ref()
                .map(|schema| Value::Object((**schema).clone())),
            annotations,
        };
        Self {
            spec,
            server: server.to_owned(),
            tool: tool.name.to_string(),
            media,
            view: crate::apps::view_uri(tool.meta.as_deref()),
            for_views: crate::apps::for_views(tool.meta.as_deref()),
            definition: tool.clone(),
            reconnect: None,
            from: None,
            changes_when_listed: 0,
            connection,
        }
    }

    /// Notes what runs as the server, as the runtime read it with the tool list.
    pub fn running_from(mut self, from: Option<RunningFrom>) -> Self {
        self.from = from;
        self
    }

    /// How many tool changes the server had said when the list this tool comes from was
    /// asked for ([`Connection::tool_changes`]); 0 (every change after) when not known.
    pub fn listed_at(mut self, changes: u64) -> Self {
        self.changes_when_listed = changes;
        self
    }

    /// What ran as the server when the tool was listed: the call runs on that server or
    /// on none (a changed entry's server is another slot, another connection).
    pub fn server_from(&self) -> Option<&RunningFrom> {
        self.from.as_ref()
    }

    /// Lets a call whose session expired wait for the server to connect again and, when
    /// the tool's definition there is unchanged, be sent once more on the new session.
    pub fn reconnecting_by(mut self, reconnect: Reconnect) -> Self {
        self.reconnect = Some(reconnect);
        self
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    /// The tool's own name on its server.
    pub fn tool_name(&self) -> &str {
        &self.tool
    }

    /// Whether views (MCP Apps) may call it as well as the model.
    pub fn for_views(&self) -> bool {
        self.for_views
    }

    /// What the definition says beyond its name, description and arguments (see
    /// [`definition_details`]).
    pub fn details(&self) -> String {
        definition_details(&self.definition)
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn origin(&self) -> Option<conduit_core::content::ToolOrigin> {
        Some(conduit_core::content::ToolOrigin {
            server: self.server.clone(),
            tool: self.tool.clone(),
        })
    }

    /// The server's timeout (restarted by progress) and the call's cap
    /// ([`crate::client::MAX_CALL_TIME`]) are the connection's to keep.
    fn keeps_its_own_time(&self) -> bool {
        true
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments = match arguments {
            Value::Object(map) => map,
            Value::Null => Default::default(),
            other => {
                return Err(ToolError(format!(
                    "arguments must be a JSON object, got {other}"
                )));
            }
        };
        let (connection, again) = match &self.reconnect {
            // The session expired since the turn took its tools (a re-listing or another
            // call met the 404), or a server on this machine stopped (crashed, or stopped
            // reading) and the runtime starts it again: nothing is sent on the ended
            // connection, and the call goes to the new one for the tool as shown.
            Some(reconnect) if self.connection.ended_by_expiry() || self.connection.has_ended() => {
                (self.connected_again(reconnect, &context).await?, None)
            }
            // Kept while a second send may be needed (a session that expires mid-call).
            Some(reconnect) => {
                self.unchanged_since_listed(&context).await?;
                (
                    self.connection.clone(),
                    Some((reconnect, arguments.clone())),
                )
            }
            None => {
                self.unchanged_since_listed(&context).await?;
                (self.connection.clone(), None)
            }
        };
        let called = connection
            .call_tool(
                &self.tool,
                arguments,
                context.progress.clone(),
                context.cancel.clone(),
            )
            .await;
        let called = match (called, again) {
            // A 404 for the session: the call did not run. Not `Closed`: a call under way
            // when the connection ended may have run.
            (Err(McpError::SessionExpired), Some((reconnect, arguments))) => {
                self.connected_again(reconnect, &context)
                    .await?
                    .call_tool(&self.tool, arguments, context.progress, context.cancel)
                    .await
            }
            (called, _) => called,
        };
        match called {
            Ok(result) => {
                let mut output = result::convert_off_thread(result, self.media.clone())
                    .await
                    .map_err(ToolError)?;
                if let Some(uri) = &self.view {
                    result::give_view(&mut output, uri);
                }
                Ok(output)
            }
            Err(McpError::Closed) => Err(ToolError(format!(
                "the MCP server {:?} closed the connection before answering the call (it may have run)",
                self.server
            ))),
            Err(err) => Err(ToolError(format!("MCP server {:?}: {err}", self.server))),
        }
    }
}

impl McpTool {
    /// Refuses the call when the server said its tools changed since this one was taken
    /// for the turn and its definition is not the one the model was shown and the call
    /// approved under (a description, a schema, hints changed: a "rug pull" within a run).
    /// The server's list is asked for only after such a change.
    /// A server that does not answer the listing holds the call no longer than the
    /// runtime waits for one ([`crate::runtime::RELIST_TIMEOUT`]), and a stop ends it.
    async fn unchanged_since_listed(&self, context: &ToolContext) -> Result<(), ToolError> {
        self.unchanged_on(&self.connection, self.changes_when_listed, context)
            .await
    }

    /// [`McpTool::unchanged_since_listed`] on `connection`, whose tools the call's were
    /// compared with when its change count was `listed_at`.
    async fn unchanged_on(
        &self,
        connection: &Connection,
        listed_at: u64,
        context: &ToolContext,
    ) -> Result<(), ToolError> {
        if connection.tool_changes() == listed_at {
            return Ok(());
        }
        let (server, tool) = (&self.server, &self.tool);
        let failed = |why: String| {
            ToolError(format!(
                "MCP server {server:?} said its tools changed, and listing them again {why}; the call did not run"
            ))
        };
        let listed = tokio::select! {
            listed = tokio::time::timeout(crate::runtime::RELIST_TIMEOUT, connection.tools()) => listed,
            () = context.cancel.cancelled() => return Err(failed("was stopped".into())),
        };
        let listed = match listed {
            Ok(Ok(listed)) => listed,
            Ok(Err(err)) => return Err(failed(format!("failed ({err})"))),
            Err(_) => {
                return Err(failed(format!(
                    "took longer than {} s",
                    crate::runtime::RELIST_TIMEOUT.as_secs()
                )));
            }
        };
        match listed.iter().find(|now| now.name == self.definition.name) {
            // The listing may have been slow: Settings are read again, as for a new call
            // (the tool switched off or set to Never run meanwhile).
            Some(now) if *now == self.definition => context.still_allowed().map_err(|why| {
                ToolError(format!(
                    "MCP server {server:?} said its tools changed, and while they were listed again {why}; the call did not run"
                ))
            }),
            Some(_) => Err(ToolError(format!(
                "MCP server {server:?} changed its tool {tool:?} since you were shown it; the call did not run. Its new definition is offered from the next message on"
            ))),
            None => Err(ToolError(format!(
                "MCP server {server:?} no longer offers the tool {tool:?}; the call did not run"
            ))),
        }
    }

    /// After the session expired (the server answered 404, so the call did not run): the
    /// server's new connection, once it is ready and lists this tool exactly as the model
    /// was shown it, and the approver still allows the call as Settings are now. A changed
    /// or missing tool is refused, never run under the approval of the old definition.
    async fn connected_again(
        &self,
        reconnect: &Reconnect,
        context: &ToolContext,
    ) -> Result<Arc<Connection>, ToolError> {
        let server = &self.server;
        // What happened to the connection the turn took the tool on.
        let before = if self.connection.ended_by_expiry() {
            "its session expired before the call ran"
        } else {
            "it stopped before the call ran"
        };
        let (connection, tools) = reconnect
            .connected_again(Some(&self.connection), &context.cancel)
            .await
            .map_err(|why| ToolError(format!("MCP server {server:?}: {before}, and {why}")))?;
        match tools.iter().find(|tool| tool.name == self.definition.name) {
            // The wait may have been long: Settings are read again, as for a new call; and
            // a change the new session said since it listed the tools (its count starts
            // at 0) is checked as on the old one.
            Some(now) if *now == self.definition => match self
                .unchanged_on(&connection, 0, context)
                .await
                .map(|()| context.still_allowed())?
            {
                Ok(()) => {
                    tracing::info!(server = %server, tool = %self.tool, %before, "the call goes on the new connection, the tool unchanged");
                    Ok(connection)
                }
                Err(why) => Err(ToolError(format!(
                    "MCP server {server:?}: {before}, and when it connected again {why}; it did not run"
                ))),
            },
            Some(_) => Err(ToolError(format!(
                "MCP server {server:?}: {before}, and when it connected again its tool {:?} was no longer the one you were shown; it did not run. Its new definition is offered from the next message on",
                self.tool
            ))),
            None => Err(ToolError(format!(
                "MCP server {server:?}: {before}, and when it connected again it no longer offered the tool {:?}; it did not run",
                self.tool
            ))),
        }
    }
}

/// Everything a tool's definition says beyond its name, description and input schema
/// (each pinned on its own): its title, annotations, output schema, icons, `_meta` (its
/// view, who may call it) and any field a later protocol adds, as one text. An "Always
/// allow" is bound to it too: a tool that turns destructive, renames itself or gains a
/// view is asked about again.
pub fn definition_details(tool: &rmcp::model::Tool) -> String {
    match serde_json::to_value(tool) {
        Ok(Value::Object(mut fields)) => {
            for pinned_apart in ["name", "description", "inputSchema"] {
                fields.remove(pinned_apart);
            }
            Value::Object(fields).to_string()
        }
        // A definition that does not serialise matches no allow.
        Ok(_) | Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::definition_details;

    fn tool(value: serde_json::Value) -> rmcp::model::Tool {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_details_change_with_everything_but_the_name_description_and_arguments() {
        let base = json!({
            "name": "read",
            "description": "Reads a file.",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true},
        });
        let details = definition_details(&tool(base.clone()));
        assert!(details.contains("readOnlyHint"), "{details}");
        assert!(!details.contains("Reads a file."), "{details}");
        let mut renamed = base.clone();
        renamed["name"] = json!("other");
        renamed["description"] = json!("Something else.");
        renamed["inputSchema"] = json!({"type": "object", "properties": {}});
        assert_eq!(definition_details(&tool(renamed)), details);
        for (field, value) in [
            (
                "annotations",
                json!({"readOnlyHint": false, "destructiveHint": true}),
            ),
            ("title", json!("Delete everything")),
            ("outputSchema", json!({"type": "object"})),
            ("_meta", json!({"ui": {"resourceUri": "ui://x/view.html"}})),
        ] {
            let mut changed = base.clone();
            changed[field] = value;
            assert_ne!(definition_details(&tool(changed)), details, "{field}");
        }
    }
}
