//! An MCP server's tool as a core `Tool`: the exposed name, the server's schema and
//! annotations, and calls that go through the connection.

use std::sync::Arc;

use async_trait::async_trait;
use conduit_core::media::MediaStore;
use conduit_core::tool::{Tool, ToolAnnotations, ToolContext, ToolError, ToolOutput, ToolSpec};
use serde_json::Value;

use crate::client::{Connection, McpError};
use crate::result;

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
            connection,
            media,
            view: crate::apps::view_uri(tool.meta.as_deref()),
            for_views: crate::apps::for_views(tool.meta.as_deref()),
        }
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
        let called = self
            .connection
            .call_tool(&self.tool, arguments, context.progress, context.cancel)
            .await;
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
                "the MCP server {:?} stopped during the call",
                self.server
            ))),
            Err(err) => Err(ToolError(format!("MCP server {:?}: {err}", self.server))),
        }
    }
}
