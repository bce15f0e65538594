//! Tools the model can call: the `Tool` trait that built-in and MCP tools share, and the
//! registry the agent loop looks them up in.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::content::{ResultPart, ToolOrigin};

/// What a tool tells the model and the user about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by: `[A-Za-z0-9_-]`, at most 64 characters.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default)]
    pub annotations: ToolAnnotations,
}

/// Hints a tool gives about its behaviour (MCP's annotations): shown to the user,
/// never trusted for a decision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// What a tool returns: parts (text, images, ...) and whether it is an error.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    pub parts: Vec<ResultPart>,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            parts: vec![ResultPart::Text { text: text.into() }],
            is_error: false,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        Self {
            parts: vec![ResultPart::Text { text: text.into() }],
            is_error: true,
        }
    }
}

/// Progress a running tool reports (MCP progress notifications).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Progress {
    pub progress: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Where a tool reports progress.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// Asks again whether a call already approved may still run: `Err(reason)` stops it.
pub type StillAllowed = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// What a running tool gets besides its arguments.
#[derive(Clone)]
pub struct ToolContext {
    /// Cancelled when the user stops the turn or the call times out.
    pub cancel: CancellationToken,
    pub progress: ProgressSink,
    /// For a tool that waits before it sends the call (an MCP server connecting again
    /// after its session expired): Settings may have changed meanwhile.
    still_allowed: StillAllowed,
}

impl ToolContext {
    /// A context whose call stays allowed once approved.
    pub fn new(cancel: CancellationToken, progress: ProgressSink) -> Self {
        Self {
            cancel,
            progress,
            still_allowed: Arc::new(|| Ok(())),
        }
    }

    /// Asks `still_allowed` before a call sent after a wait.
    pub fn rechecked_by(mut self, still_allowed: StillAllowed) -> Self {
        self.still_allowed = still_allowed;
        self
    }

    /// Whether the call may still run now: the approver's answer as Settings are now.
    pub fn still_allowed(&self) -> Result<(), String> {
        (self.still_allowed)()
    }
}

/// A failure to run a tool at all; the agent loop turns it into an error result.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

/// A tool the model can call. Built-in tools and MCP servers' tools both implement it.
#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> &ToolSpec;

    /// The real server and tool behind the exposed name (MCP tools); `None` for
    /// built-in tools.
    fn origin(&self) -> Option<ToolOrigin> {
        None
    }

    /// Whether the tool keeps its own time: then the agent does not cut its calls at its
    /// own limit (an MCP tool has its server's timeout, restarted by progress, within a
    /// cap of its own). Stop ends every call either way.
    fn keeps_its_own_time(&self) -> bool {
        false
    }

    /// Runs the tool. It should stop soon after `context.cancel` fires: the agent goes on
    /// running it for a moment after a stop or its time limit (see
    /// [`crate::agent::STOP_GRACE`]), so it can end its work (an MCP tool tells its server),
    /// then drops it.
    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError>;
}

/// The tools offered to the model in one turn, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool; one with the same name is replaced.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.spec().name.clone(), tool);
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .values()
            .map(|tool| tool.spec().clone())
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }
}
