//! Sampling and roots: a server's `sampling/createMessage` in Conduit's own types (read
//! from the wire, the answer written back), no provider named here (the frontend decides
//! whether and on which model it runs); and the folders offered as roots, as `file://` URIs.
//!
//! Both features are deprecated by SEP-2577 in rmcp 3.9.0 but remain in the protocol
//! Conduit speaks; the wire is read and written as JSON here, so rmcp's deprecated types
//! are named only where the client hands them over.

use std::path::{Path, PathBuf};

use base64::Engine;
use conduit_core::content::json_size;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The error code and message the spec gives a sampling request the user rejected.
pub const USER_REJECTED_CODE: i32 = -1;
pub const USER_REJECTED: &str = "User rejected sampling request";

/// The largest `maxTokens` Conduit passes on; a server asking more gets this.
pub const MAX_SAMPLING_TOKENS: u32 = 64 * 1024;

// A request waits in the host until the user answers, and every waiting request goes to
// the window again each time one arrives or leaves: without these caps a stdio server
// could park three requests of the transport's 256 MiB each and make every reload copy
// them into the page. Each is refused as it is read, the server told which cap it broke.

/// The largest sampling request, as the server sent it (its JSON, images and audio in
/// base64), checked before anything of it is copied or decoded. Room for a long
/// conversation and a few screenshots (Anthropic takes at most 5 MB an image).
pub const MAX_SAMPLING_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// The most text one sampling request carries, counted as the window is sent it (the
/// request's JSON without image and audio bytes, which stay on the host, and without its
/// tools, capped on their own). About 250,000 tokens: more than most models take at once.
pub const MAX_SAMPLING_TEXT_BYTES: usize = 1024 * 1024;

/// The most messages in one sampling request: a server's own tool loop of hundreds of
/// rounds fits (each round is two messages).
pub const MAX_SAMPLING_MESSAGES: usize = 1_000;

/// The most images one sampling request carries: several screenshots to compare. The
/// review draws each (a decode of up to 256 MiB), so their number is bounded as well as
/// their bytes: a small PNG may decode to 64 million pixels.
pub const MAX_SAMPLING_IMAGES: usize = 20;

/// The most tools one sampling request offers: as many as OpenAI's API takes in a request.
pub const MAX_SAMPLING_TOOLS: usize = 128;

/// The most JSON a sampling request's tools take in all (names, descriptions, input
/// schemas): a real tool's is a few KiB.
pub const MAX_SAMPLING_TOOLS_BYTES: usize = 1024 * 1024;

/// The bytes of `messages`' images, in order.
fn images_of(messages: &[SamplingMessage]) -> impl Iterator<Item = &[u8]> {
    messages
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|content| match content {
            SamplingContent::Image { data, .. } => Some(data.as_slice()),
            _ => None,
        })
}

/// `bytes` in MiB, for the refusals' words.
fn mib(bytes: usize) -> usize {
    bytes / (1024 * 1024)
}

/// The most model hints a request keeps, and the most bytes of each: the window shows
/// them as the names of models the server prefers.
const MAX_MODEL_HINTS: usize = 10;
const MAX_MODEL_HINT_BYTES: usize = 100;

/// A server's request to run a model, as the user sees it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct SamplingRequest {
    /// The server that asks (the name in the `mcpServers` file).
    pub server: String,
    pub messages: Vec<SamplingMessage>,
    pub system_prompt: Option<String>,
    /// Tools the model may ask for; Conduit never runs them, the server does.
    pub tools: Vec<SamplingTool>,
    pub tool_choice: ToolChoice,
    /// Model names or families the server prefers, in its order.
    pub model_hints: Vec<String>,
    pub cost_priority: Option<f32>,
    pub speed_priority: Option<f32>,
    pub intelligence_priority: Option<f32>,
    pub max_tokens: u32,
    /// What context the server asked to include; Conduit includes none (and does not
    /// declare the `context` capability).
    pub include_context: Option<String>,
    pub temperature: Option<f32>,
    pub stop_sequences: Vec<String>,
    /// What the asking server was started from (its session's), never shown: an allow
    /// given to the server holds only for what it ran then.
    #[serde(skip)]
    #[ts(skip)]
    pub running: Option<crate::runtime::RunningFrom>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "lowercase")]
pub enum SamplingRole {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct SamplingMessage {
    pub role: SamplingRole,
    pub content: Vec<SamplingContent>,
}

/// One piece of a sampling message.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum SamplingContent {
    Text {
        text: String,
    },
    /// An image: its bytes stay on the host (the window is told the type and size).
    Image {
        mime_type: String,
        #[serde(skip)]
        #[ts(skip)]
        data: Vec<u8>,
        bytes: usize,
    },
    /// Audio: shown, but no provider of Conduit's takes it.
    Audio {
        mime_type: String,
        bytes: usize,
    },
    /// The model asks the server to run a tool (assistant messages, and the answer).
    ToolUse {
        id: String,
        name: String,
        #[ts(type = "Record<string, unknown>")]
        input: Map<String, Value>,
    },
    /// The server's result of a tool the model asked for (user messages); its text parts.
    ToolResult {
        tool_use_id: String,
        text: String,
        is_error: bool,
    },
}

/// A tool offered to the model in a sampling request.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct SamplingTool {
    pub name: String,
    pub description: Option<String>,
    #[ts(type = "Record<string, unknown>")]
    pub input_schema: Value,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    #[default]
    Auto,
    Required,
    None,
}

/// Why the model stopped, in the spec's words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub enum SamplingStop {
    EndTurn,
    MaxTokens,
    ToolUse,
    StopSequence,
    Other(String),
}

impl SamplingStop {
    fn wire(&self) -> &str {
        match self {
            Self::EndTurn => "endTurn",
            Self::MaxTokens => "maxTokens",
            Self::ToolUse => "toolUse",
            Self::StopSequence => "stopSequence",
            Self::Other(other) => other,
        }
    }
}

/// What the model answered: text and tool uses only.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct SampledMessage {
    /// The model that answered, as its provider names it.
    pub model: String,
    pub content: Vec<SamplingContent>,
    pub stop_reason: SamplingStop,
}

/// How a frontend ended a sampling request.
#[derive(Debug, Clone, PartialEq)]
pub enum SamplingAnswer {
    /// The user approved the request and its result: this goes back.
    Sampled(SampledMessage),
    /// The user (or a policy) said no: the server gets the spec's user-rejected error.
    Rejected,
    /// The model could not be run; the reason goes back as an error.
    Failed(String),
}

/// The wire's request, as much as Conduit reads of it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireRequest {
    messages: Vec<WireMessage>,
    #[serde(default)]
    model_preferences: Option<WirePreferences>,
    #[serde(default)]
    system_prompt: Option<String>,
    #[serde(default)]
    include_context: Option<String>,
    #[serde(default)]
    temperature: Option<f32>,
    max_tokens: u32,
    #[serde(default)]
    stop_sequences: Option<Vec<String>>,
    #[serde(default)]
    tools: Option<Vec<WireTool>>,
    #[serde(default)]
    tool_choice: Option<WireToolChoice>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePreferences {
    #[serde(default)]
    hints: Option<Vec<WireHint>>,
    #[serde(default)]
    cost_priority: Option<f32>,
    #[serde(default)]
    speed_priority: Option<f32>,
    #[serde(default)]
    intelligence_priority: Option<f32>,
}

#[derive(Deserialize)]
struct WireHint {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    role: String,
    content: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireTool {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    input_schema: Option<Value>,
}

#[derive(Deserialize)]
struct WireToolChoice {
    #[serde(default)]
    mode: Option<String>,
}

impl SamplingRequest {
    /// Reads `sampling/createMessage` params (their JSON). A request that breaks the
    /// spec's rules (an unknown role or content type, a tool use in a user message, a
    /// tool result beside other content, an image that is not base64) or one of
    /// Conduit's caps (its size, text, messages, tools) is refused, saying what is wrong.
    /// The bytes of the request's images, through its messages in order: the order the
    /// window numbers them in.
    pub fn images(&self) -> impl Iterator<Item = &[u8]> {
        images_of(&self.messages)
    }

    pub fn from_wire(server: &str, params: &Value) -> Result<Self, String> {
        if json_size(params) > MAX_SAMPLING_REQUEST_BYTES {
            return Err(format!(
                "the sampling request is larger than {} MiB; Conduit takes at most that",
                mib(MAX_SAMPLING_REQUEST_BYTES)
            ));
        }
        let wire = WireRequest::deserialize(params)
            .map_err(|e| format!("the sampling request does not parse: {e}"))?;
        if wire.messages.is_empty() {
            return Err("the sampling request has no messages".into());
        }
        if wire.messages.len() > MAX_SAMPLING_MESSAGES {
            return Err(format!(
                "the sampling request has {} messages; Conduit takes at most {MAX_SAMPLING_MESSAGES}",
                wire.messages.len()
            ));
        }
        let offered = wire.tools.as_ref().map_or(0, Vec::len);
        if offered > MAX_SAMPLING_TOOLS {
            return Err(format!(
                "the sampling request offers {offered} tools; Conduit takes at most {MAX_SAMPLING_TOOLS}"
            ));
        }
        // A model provider refuses two tools of one name, and the window lists them by name.
        if let Some(tools) = &wire.tools {
            let mut names = std::collections::HashSet::new();
            if let Some(twice) = tools.iter().find(|t| !names.insert(t.name.as_str())) {
                return Err(format!(
                    "the sampling request offers the tool {:?} twice",
                    twice.name
                ));
            }
        }
        if wire.max_tokens == 0 {
            return Err("maxTokens must be at least 1".into());
        }
        // The spec's three values; anything else would be the server's words in the
        // window's sentence about what it asked for.
        if let Some(context) = &wire.include_context
            && !["none", "thisServer", "allServers"].contains(&context.as_str())
        {
            return Err(format!(
                "includeContext must be none, thisServer or allServers, not {:?}",
                crate::client::server_words(context, 80)
            ));
        }
        let messages = wire
            .messages
            .iter()
            .enumerate()
            .map(|(i, m)| message(m).map_err(|why| format!("message {}: {why}", i + 1)))
            .collect::<Result<Vec<_>, _>>()?;
        let images = images_of(&messages).count();
        if images > MAX_SAMPLING_IMAGES {
            return Err(format!(
                "the sampling request has {images} images; Conduit takes at most {MAX_SAMPLING_IMAGES}"
            ));
        }
        let preferences = wire.model_preferences;
        let tool_choice = match wire.tool_choice.and_then(|c| c.mode).as_deref() {
            None | Some("auto") => ToolChoice::Auto,
            Some("required") => ToolChoice::Required,
            Some("none") => ToolChoice::None,
            Some(other) => {
                return Err(format!(
                    "toolChoice mode {other:?} is not auto, required or none"
                ));
            }
        };
        let tools = wire
            .tools
            .unwrap_or_default()
            .into_iter()
            .map(|t| SamplingTool {
                name: t.name,
                description: t.description,
                input_schema: t.input_schema.unwrap_or_else(|| json!({"type": "object"})),
            })
            .collect();
        let request = Self {
            server: server.to_owned(),
            messages,
            system_prompt: wire.system_prompt,
            tools,
            tool_choice,
            model_hints: preferences
                .as_ref()
                .and_then(|p| p.hints.as_ref())
                .map(|hints| {
                    // Shown to the user as names of models: a few, each short.
                    hints
                        .iter()
                        .filter_map(|h| h.name.as_deref())
                        .take(MAX_MODEL_HINTS)
                        .map(|name| {
                            conduit_core::content::text_start(name, MAX_MODEL_HINT_BYTES).to_owned()
                        })
                        .collect()
                })
                .unwrap_or_default(),
            cost_priority: preferences.as_ref().and_then(|p| p.cost_priority),
            speed_priority: preferences.as_ref().and_then(|p| p.speed_priority),
            intelligence_priority: preferences.as_ref().and_then(|p| p.intelligence_priority),
            max_tokens: wire.max_tokens.min(MAX_SAMPLING_TOKENS),
            include_context: wire.include_context,
            temperature: wire.temperature,
            stop_sequences: wire.stop_sequences.unwrap_or_default(),
            running: None,
        };
        let tools_size = json_size(&request.tools);
        if tools_size > MAX_SAMPLING_TOOLS_BYTES {
            return Err(format!(
                "the sampling request's tools are larger than {} MiB of JSON; Conduit takes at most that",
                mib(MAX_SAMPLING_TOOLS_BYTES)
            ));
        }
        if json_size(&request).saturating_sub(tools_size) > MAX_SAMPLING_TEXT_BYTES {
            return Err(format!(
                "the sampling request's text is larger than {} MiB; Conduit takes at most that",
                mib(MAX_SAMPLING_TEXT_BYTES)
            ));
        }
        Ok(request)
    }
}

fn message(wire: &WireMessage) -> Result<SamplingMessage, String> {
    let role = match wire.role.as_str() {
        "user" => SamplingRole::User,
        "assistant" => SamplingRole::Assistant,
        other => return Err(format!("role {other:?} is not user or assistant")),
    };
    let blocks: Vec<&Value> = match &wire.content {
        Value::Array(items) => items.iter().collect(),
        single => vec![single],
    };
    let content = blocks
        .into_iter()
        .map(content)
        .collect::<Result<Vec<_>, _>>()?;
    for block in &content {
        match (block, role) {
            (SamplingContent::ToolUse { .. }, SamplingRole::User) => {
                return Err("a tool use belongs in an assistant message".into());
            }
            (SamplingContent::ToolResult { .. }, SamplingRole::Assistant) => {
                return Err("a tool result belongs in a user message".into());
            }
            _ => {}
        }
    }
    let results = content
        .iter()
        .filter(|c| matches!(c, SamplingContent::ToolResult { .. }))
        .count();
    if results > 0 && results < content.len() {
        return Err("a message with tool results may hold nothing else".into());
    }
    Ok(SamplingMessage { role, content })
}

fn string(value: &Value, key: &str) -> Result<String, String> {
    value
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("{key} must be a string"))
}

fn decoded(value: &Value) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(string(value, "data")?)
        .map_err(|e| format!("data is not base64 ({e})"))
}

fn content(value: &Value) -> Result<SamplingContent, String> {
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .ok_or("a content block has no type")?;
    match kind {
        "text" => Ok(SamplingContent::Text {
            text: string(value, "text")?,
        }),
        "image" => {
            let data = decoded(value)?;
            Ok(SamplingContent::Image {
                mime_type: string(value, "mimeType")?,
                bytes: data.len(),
                data,
            })
        }
        "audio" => Ok(SamplingContent::Audio {
            mime_type: string(value, "mimeType")?,
            bytes: decoded(value)?.len(),
        }),
        "tool_use" => Ok(SamplingContent::ToolUse {
            id: string(value, "id")?,
            name: string(value, "name")?,
            input: match value.get("input") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(input)) => input.clone(),
                Some(_) => return Err("a tool use's input must be an object".into()),
            },
        }),
        "tool_result" => {
            let parts = match value.get("content") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(parts)) => parts.clone(),
                Some(_) => return Err("a tool result's content must be an array".into()),
            };
            let text = parts
                .iter()
                .map(|part| match part.get("type").and_then(Value::as_str) {
                    Some("text") => part
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    Some(other) => format!("[{other} content left out]"),
                    None => "[content without a type left out]".to_owned(),
                })
                .collect::<Vec<_>>()
                .join("\n");
            Ok(SamplingContent::ToolResult {
                tool_use_id: string(value, "toolUseId")?,
                text,
                is_error: value
                    .get("isError")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        }
        other => Err(format!("content type {other:?} is not one sampling knows")),
    }
}

impl SampledMessage {
    /// The `sampling/createMessage` result: an assistant message of text and tool uses
    /// (a single block stays a single block, as older servers expect).
    pub fn to_wire(&self) -> Value {
        let mut blocks: Vec<Value> = self
            .content
            .iter()
            .filter_map(|block| match block {
                SamplingContent::Text { text } => Some(json!({"type": "text", "text": text})),
                SamplingContent::ToolUse { id, name, input } => {
                    Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
                }
                _ => None,
            })
            .collect();
        let content = if blocks.len() == 1 {
            blocks.remove(0)
        } else if blocks.is_empty() {
            json!({"type": "text", "text": ""})
        } else {
            Value::Array(blocks)
        };
        json!({
            "role": "assistant",
            "content": content,
            "model": self.model,
            "stopReason": self.stop_reason.wire(),
        })
    }
}

/// Reads a server entry's `roots`: folders, absolute or starting with `~` (the user's
/// home, `home`). Anything else is refused, naming the entry.
pub fn roots_of(value: &Value, home: Option<&Path>) -> Result<Vec<PathBuf>, String> {
    let items = value
        .as_array()
        .ok_or("roots must be an array of folders")?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let text = item
                .as_str()
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| format!("roots[{i}] must be a folder's path"))?;
            let path = match text.strip_prefix('~') {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                    let home = home.ok_or_else(|| {
                        format!("roots[{i}] {text:?} starts with ~ but there is no home folder")
                    })?;
                    home.join(rest.trim_start_matches('/'))
                }
                _ => PathBuf::from(text),
            };
            if !path.is_absolute() {
                return Err(format!(
                    "roots[{i}] {text:?} must be an absolute folder or start with ~/"
                ));
            }
            Ok(path)
        })
        .collect()
}

/// The `roots/list` result for `folders`: each a `file://` URI named by its last part.
pub fn roots_to_wire(folders: &[PathBuf]) -> Value {
    let roots: Vec<Value> = folders
        .iter()
        .filter_map(|folder| {
            let uri = reqwest::Url::from_directory_path(folder).ok()?;
            // The URI without the trailing slash `from_directory_path` adds, as servers
            // compare it with paths.
            let uri = uri.as_str().trim_end_matches('/').to_owned();
            let uri = if uri == "file://" {
                "file:///".to_owned()
            } else {
                uri
            };
            let mut root = Map::new();
            root.insert("uri".into(), Value::String(uri));
            if let Some(name) = folder.file_name().and_then(|n| n.to_str()) {
                root.insert("name".into(), Value::String(name.to_owned()));
            }
            Some(Value::Object(root))
        })
        .collect();
    json!({ "roots": roots })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request with every field the spec defines (2025-11-25, SEP-1577 tools).
    fn full_request() -> Value {
        json!({
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "What's the weather?"}},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Paris"}}]},
                {"role": "user", "content": [{"type": "tool_result", "toolUseId": "t1",
                    "content": [{"type": "text", "text": "18C"}, {"type": "image", "data": "AA==", "mimeType": "image/png"}]}]},
                {"role": "user", "content": [{"type": "text", "text": "and this?"}, {"type": "image", "data": "iVBORw0K", "mimeType": "image/png"}]}
            ],
            "systemPrompt": "Be brief.",
            "modelPreferences": {"hints": [{"name": "claude-3-sonnet"}, {}, {"name": "gpt"}], "costPriority": 0.2, "intelligencePriority": 0.9},
            "includeContext": "thisServer",
            "temperature": 0.5,
            "maxTokens": 200,
            "stopSequences": ["END"],
            "tools": [{"name": "weather", "description": "Weather by city", "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            "toolChoice": {"mode": "required"}
        })
    }

    #[test]
    fn every_field_of_a_request_is_read() {
        let request = SamplingRequest::from_wire("weather", &full_request()).unwrap();
        assert_eq!(request.server, "weather");
        assert_eq!(request.system_prompt.as_deref(), Some("Be brief."));
        assert_eq!(request.model_hints, ["claude-3-sonnet", "gpt"]);
        assert_eq!(request.cost_priority, Some(0.2));
        assert_eq!(request.intelligence_priority, Some(0.9));
        assert_eq!(request.speed_priority, None);
        assert_eq!(request.max_tokens, 200);
        assert_eq!(request.include_context.as_deref(), Some("thisServer"));
        assert_eq!(request.stop_sequences, ["END"]);
        assert_eq!(request.tool_choice, ToolChoice::Required);
        assert_eq!(request.tools.len(), 1);
        assert_eq!(request.tools[0].name, "weather");
        assert_eq!(request.messages.len(), 4);
        assert_eq!(
            request.messages[0].content,
            [SamplingContent::Text {
                text: "What's the weather?".into()
            }]
        );
        assert_eq!(
            request.messages[1].content,
            [SamplingContent::ToolUse {
                id: "t1".into(),
                name: "weather".into(),
                input: json!({"city": "Paris"}).as_object().unwrap().clone()
            }]
        );
        assert_eq!(
            request.messages[2].content,
            [SamplingContent::ToolResult {
                tool_use_id: "t1".into(),
                text: "18C\n[image content left out]".into(),
                is_error: false
            }]
        );
        let SamplingContent::Image {
            mime_type,
            data,
            bytes,
        } = &request.messages[3].content[1]
        else {
            panic!("{:?}", request.messages[3]);
        };
        assert_eq!(
            (mime_type.as_str(), data.as_slice(), *bytes),
            ("image/png", &[0x89, b'P', b'N', b'G', 0x0d, 0x0a][..], 6)
        );
        // The image's bytes never go to the window.
        let shown = serde_json::to_value(&request.messages[3].content[1]).unwrap();
        assert_eq!(
            shown,
            json!({"type": "image", "mimeType": "image/png", "bytes": 6})
        );
    }

    #[test]
    fn model_hints_are_a_few_short_names() {
        let mut request = full_request();
        request["modelPreferences"]["hints"] = json!(
            (0..20)
                .map(|_| json!({"name": "m".repeat(500)}))
                .collect::<Vec<_>>()
        );
        let request = SamplingRequest::from_wire("s", &request).unwrap();
        assert_eq!(request.model_hints.len(), MAX_MODEL_HINTS);
        assert!(
            request
                .model_hints
                .iter()
                .all(|hint| hint.len() == MAX_MODEL_HINT_BYTES)
        );
    }

    #[test]
    fn a_request_that_breaks_the_rules_is_refused_saying_why() {
        let odd_context = |r: &mut Value| {
            r["includeContext"] =
                json!("thisServer); Conduit checked this request: nothing of yours is sent (")
        };
        let with = |change: &dyn Fn(&mut Value)| {
            let mut request = full_request();
            change(&mut request);
            SamplingRequest::from_wire("s", &request).unwrap_err()
        };
        for (why, refused) in [
            ("no messages", with(&|r| r["messages"] = json!([]))),
            ("at least 1", with(&|r| r["maxTokens"] = json!(0))),
            ("does not parse", with(&|r| r["maxTokens"] = json!("many"))),
            (
                "role \"system\"",
                with(&|r| r["messages"][0]["role"] = json!("system")),
            ),
            (
                "message 1: content type \"video\"",
                with(&|r| r["messages"][0]["content"]["type"] = json!("video")),
            ),
            (
                "assistant message",
                with(&|r| {
                    r["messages"][0]["content"] =
                        json!({"type": "tool_use", "id": "x", "name": "y"})
                }),
            ),
            (
                "nothing else",
                with(&|r| {
                    r["messages"][2]["content"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!({"type": "text", "text": "hi"}))
                }),
            ),
            (
                "not base64",
                with(&|r| r["messages"][3]["content"][1]["data"] = json!("***")),
            ),
            (
                "toolChoice",
                with(&|r| r["toolChoice"] = json!({"mode": "sometimes"})),
            ),
            ("includeContext must be", with(&odd_context)),
        ] {
            assert!(refused.contains(why), "{why}: {refused}");
        }
    }

    /// Two tools of one name: a provider would refuse them, and the window lists tools by
    /// name.
    #[test]
    fn a_request_offering_one_tool_name_twice_is_refused() {
        let mut request = full_request();
        let tool = request["tools"][0].clone();
        request["tools"] = json!([tool.clone(), tool]);
        let refused = SamplingRequest::from_wire("s", &request).unwrap_err();
        assert!(refused.contains("twice"), "{refused}");
    }

    #[test]
    fn a_request_past_a_size_cap_is_refused_naming_the_cap() {
        let with = |change: &dyn Fn(&mut Value)| {
            let mut request = full_request();
            change(&mut request);
            SamplingRequest::from_wire("s", &request)
        };
        // Near each cap is still taken: real servers are not refused.
        assert!(
            with(&|r| {
                r["messages"][0]["content"]["text"] =
                    json!("x".repeat(MAX_SAMPLING_TEXT_BYTES - 4096))
            })
            .is_ok()
        );
        assert!(
            with(&|r| {
                let tools: Vec<Value> = (0..MAX_SAMPLING_TOOLS)
                    .map(|i| {
                        let mut tool = r["tools"][0].clone();
                        tool["name"] = json!(format!("tool{i}"));
                        tool
                    })
                    .collect();
                r["tools"] = json!(tools);
            })
            .is_ok()
        );
        let text_past_cap = "x".repeat(MAX_SAMPLING_TEXT_BYTES + 1);
        for (why, refused) in [
            (
                "larger than 8 MiB",
                // An image of 9 MiB in base64: refused before it is decoded.
                with(&|r| {
                    r["messages"][3]["content"][1]["data"] = json!("A".repeat(9 * 1024 * 1024))
                }),
            ),
            (
                "text is larger than 1 MiB",
                with(&|r| r["messages"][0]["content"]["text"] = json!(text_past_cap)),
            ),
            (
                "text is larger than 1 MiB",
                with(&|r| r["systemPrompt"] = json!(text_past_cap)),
            ),
            (
                "text is larger than 1 MiB",
                with(&|r| r["stopSequences"] = json!(vec!["x".repeat(1024); 1100])),
            ),
            (
                "text is larger than 1 MiB",
                with(&|r| {
                    r["messages"][2]["content"][0]["content"][0]["text"] = json!(text_past_cap)
                }),
            ),
            (
                "1001 messages; Conduit takes at most 1000",
                with(&|r| {
                    r["messages"] = json!(vec![r["messages"][0].clone(); MAX_SAMPLING_MESSAGES + 1])
                }),
            ),
            (
                "21 images; Conduit takes at most 20",
                with(&|r| {
                    r["messages"][3]["content"] = json!(vec![
                        r["messages"][3]["content"][1].clone();
                        MAX_SAMPLING_IMAGES + 1
                    ])
                }),
            ),
            (
                "129 tools; Conduit takes at most 128",
                with(&|r| r["tools"] = json!(vec![r["tools"][0].clone(); MAX_SAMPLING_TOOLS + 1])),
            ),
            (
                "tools are larger than 1 MiB of JSON",
                with(&|r| r["tools"][0]["description"] = json!(text_past_cap)),
            ),
        ] {
            // Not `unwrap_err`: a request taken would print megabytes.
            let Err(refused) = refused else {
                panic!("{why}: the request was taken");
            };
            assert!(refused.contains(why), "{why}: {refused}");
        }
    }

    #[test]
    fn a_huge_max_tokens_is_capped() {
        let mut request = full_request();
        request["maxTokens"] = json!(u32::MAX);
        assert_eq!(
            SamplingRequest::from_wire("s", &request)
                .unwrap()
                .max_tokens,
            MAX_SAMPLING_TOKENS
        );
    }

    #[test]
    fn the_answer_goes_back_as_the_spec_writes_it() {
        let text = SampledMessage {
            model: "claude-x".into(),
            content: vec![SamplingContent::Text {
                text: "Sunny".into(),
            }],
            stop_reason: SamplingStop::EndTurn,
        };
        assert_eq!(
            text.to_wire(),
            json!({"role": "assistant", "content": {"type": "text", "text": "Sunny"},
                   "model": "claude-x", "stopReason": "endTurn"})
        );
        let tools = SampledMessage {
            model: "m".into(),
            content: vec![
                SamplingContent::Text {
                    text: "Let me look".into(),
                },
                SamplingContent::ToolUse {
                    id: "c1".into(),
                    name: "weather".into(),
                    input: json!({"city": "Oslo"}).as_object().unwrap().clone(),
                },
            ],
            stop_reason: SamplingStop::ToolUse,
        };
        assert_eq!(
            tools.to_wire(),
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "Let me look"},
                {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Oslo"}}],
                "model": "m", "stopReason": "toolUse"})
        );
    }

    #[test]
    fn roots_are_absolute_folders_or_under_home_and_go_out_as_file_uris() {
        let home = Path::new("/home/ann");
        let roots = roots_of(&json!(["/srv/data", "~", "~/My Projects/app"]), Some(home)).unwrap();
        assert_eq!(
            roots,
            [
                PathBuf::from("/srv/data"),
                PathBuf::from("/home/ann"),
                PathBuf::from("/home/ann/My Projects/app")
            ]
        );
        assert_eq!(
            roots_to_wire(&roots),
            json!({"roots": [
                {"uri": "file:///srv/data", "name": "data"},
                {"uri": "file:///home/ann", "name": "ann"},
                {"uri": "file:///home/ann/My%20Projects/app", "name": "app"}
            ]})
        );
        for (bad, why) in [
            (json!("/srv"), "an array"),
            (
                json!(["relative/dir"]),
                "roots[0] \"relative/dir\" must be an absolute",
            ),
            (json!(["/ok", ""]), "roots[1] must be a folder"),
            (json!([3]), "roots[0] must be a folder"),
            (json!(["~bob/x"]), "must be an absolute"),
        ] {
            let refused = roots_of(&bad, Some(home)).unwrap_err();
            assert!(refused.contains(why), "{bad}: {refused}");
        }
        assert!(
            roots_of(&json!(["~/x"]), None)
                .unwrap_err()
                .contains("no home")
        );
    }
}
