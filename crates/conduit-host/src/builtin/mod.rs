//! Conduit's own tools (history, time, charts, stored images): one registry, each tool
//! enabled or disabled in settings under the reserved server name [`BUILTIN_SERVER`].
//!
//! The tools are plain [`Tool`]s; serving them (in process and as an MCP server) is the
//! MCP server's job. Every bad argument comes back as an error result that says what
//! to send instead, never as a panic or a protocol failure.

mod chart;
mod history;
mod images;
mod time;

use std::sync::Arc;

use conduit_core::content::ResultPart;
use conduit_core::media::MediaStore;
use conduit_core::tool::{Tool, ToolAnnotations, ToolOutput, ToolSpec};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{Host, SettingsError};

pub use chart::{DEFAULT_HEIGHT, DEFAULT_WIDTH, MAX_HEIGHT, MAX_WIDTH};

/// The server name the built-in tools' preferences are kept under in settings.json
/// (`mcpServers.conduit.disabledTools`, the same shape as an MCP server's tools).
pub const BUILTIN_SERVER: &str = "conduit";

/// Makes a built-in tool; what the tool makes (a chart) goes into the media store given.
type MakeTool = fn(&Arc<Host>, Arc<dyn MediaStore>) -> Arc<dyn Tool>;

/// One built-in tool: how to describe it and how to make it for a host.
struct Entry {
    spec: fn() -> ToolSpec,
    make: MakeTool,
}

/// Every built-in tool, once.
const ENTRIES: [Entry; 7] = [
    Entry {
        spec: history::SearchHistory::spec,
        make: |host, _| Arc::new(history::SearchHistory::new(host.clone())),
    },
    Entry {
        spec: history::ReadConversation::spec,
        make: |host, _| Arc::new(history::ReadConversation::new(host.clone())),
    },
    Entry {
        spec: history::ListConversations::spec,
        make: |host, _| Arc::new(history::ListConversations::new(host.clone())),
    },
    Entry {
        spec: time::TimeNow::spec,
        make: |_, _| Arc::new(time::TimeNow::new()),
    },
    Entry {
        spec: time::ConvertTime::spec,
        make: |_, _| Arc::new(time::ConvertTime::new()),
    },
    Entry {
        spec: chart::RenderChart::spec,
        make: |_, made| Arc::new(chart::RenderChart::new(made)),
    },
    Entry {
        spec: images::GetImage::spec,
        make: |_, made| Arc::new(images::GetImage::new(made)),
    },
];

/// Every built-in tool, each putting what it makes into `media`.
fn made_with(host: &Arc<Host>, media: Arc<dyn MediaStore>) -> impl Iterator<Item = Arc<dyn Tool>> {
    ENTRIES
        .iter()
        .map(move |entry| (entry.make)(host, media.clone()))
}

/// Every built-in tool, enabled or not, for Conduit's own agent: what they make is kept
/// in the media folder, with the conversation that holds it.
pub fn builtin_tools(host: &Arc<Host>) -> Vec<Arc<dyn Tool>> {
    made_with(host, host.media.clone()).collect()
}

/// The built-in tools the settings leave enabled (all of them by default), for other MCP
/// clients: what they make is held in memory until it is sent (the host's served media),
/// as no conversation holds it.
pub fn enabled_builtin_tools(host: &Arc<Host>) -> Result<Vec<Arc<dyn Tool>>, SettingsError> {
    let settings = host.settings()?;
    Ok(made_with(host, host.served_media.clone())
        .filter(|tool| settings.tool_enabled(BUILTIN_SERVER, &tool.spec().name))
        .collect())
}

/// The names of the built-in tools.
pub fn builtin_tool_names() -> Vec<String> {
    ENTRIES.iter().map(|entry| (entry.spec)().name).collect()
}

/// A built-in tool as Settings lists it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct BuiltinToolState {
    pub name: String,
    pub title: String,
    pub description: String,
    pub annotations: ToolAnnotations,
    pub enabled: bool,
}

impl Host {
    /// Every built-in tool with whether the settings enable it.
    pub fn builtin_tool_states(&self) -> Result<Vec<BuiltinToolState>, SettingsError> {
        let settings = self.settings()?;
        Ok(ENTRIES
            .iter()
            .map(|entry| {
                let spec = (entry.spec)();
                BuiltinToolState {
                    enabled: settings.tool_enabled(BUILTIN_SERVER, &spec.name),
                    title: spec.title.unwrap_or_else(|| spec.name.clone()),
                    name: spec.name,
                    description: spec.description,
                    annotations: spec.annotations,
                }
            })
            .collect())
    }

    /// Enables or disables one built-in tool; `Ok(true)` when that changed something
    /// (the caller then tells connected clients the tool list changed).
    pub fn set_builtin_tool_enabled(
        &self,
        name: &str,
        enabled: bool,
    ) -> Result<bool, SettingsError> {
        if !builtin_tool_names().iter().any(|known| known == name) {
            return Err(SettingsError::Invalid(format!(
                "there is no built-in tool {name:?} (there are {})",
                builtin_tool_names().join(", ")
            )));
        }
        self.update_settings(|settings| {
            let before = settings.tool_enabled(BUILTIN_SERVER, name);
            settings.set_tool_enabled(BUILTIN_SERVER, name, enabled);
            Ok(before != enabled)
        })
    }
}

/// A spec with the annotations every built-in tool shares: it touches nothing outside
/// Conduit (not open-world) and destroys nothing.
fn spec(
    name: &str,
    title: &str,
    description: &str,
    input_schema: Value,
    output_schema: Option<Value>,
    read_only: bool,
) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        title: Some(title.to_owned()),
        description: description.to_owned(),
        input_schema,
        output_schema,
        annotations: ToolAnnotations {
            read_only_hint: Some(read_only),
            destructive_hint: Some(false),
            idempotent_hint: Some(true),
            open_world_hint: Some(false),
        },
    }
}

/// The arguments as `T`, or an error result naming what is wrong with them. A missing
/// or `null` argument object counts as `{}`.
fn arguments<T: DeserializeOwned>(tool: &str, arguments: Value) -> Result<T, ToolOutput> {
    let arguments = match arguments {
        Value::Null => Value::Object(Default::default()),
        other => other,
    };
    if !arguments.is_object() {
        return Err(ToolOutput::error(format!(
            "{tool} takes its arguments as a JSON object, not {}",
            json_kind(&arguments)
        )));
    }
    serde_json::from_value(arguments)
        .map_err(|e| ToolOutput::error(format!("invalid arguments for {tool}: {e}")))
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A result with a short text for people and models, and the same facts as structured
/// content matching the tool's output schema.
fn structured(text: impl Into<String>, value: impl Serialize) -> ToolOutput {
    match serde_json::to_value(value) {
        Ok(value) => ToolOutput {
            parts: vec![
                ResultPart::Text { text: text.into() },
                ResultPart::Structured { value },
            ],
            is_error: false,
        },
        Err(e) => ToolOutput::error(format!("the result could not be written as JSON: {e}")),
    }
}

/// Runs blocking work (SQLite, image encoding) off the async workers; a panic in it is
/// an error result, not a crash of the caller.
async fn blocking<F>(what: &str, work: F) -> ToolOutput
where
    F: FnOnce() -> ToolOutput + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(output) => output,
        Err(e) => {
            tracing::error!(error = %e, "a built-in tool failed while {what}");
            ToolOutput::error(format!("Conduit failed while {what}: {e}"))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
