//! OpenAI Responses API: request building and stream decoding as pure functions, and the
//! streaming client. Requests are stateless (`store: false`): reasoning travels back as
//! encrypted content.

use std::collections::BTreeMap;

use conduit_core::content::{Block, MediaRef, Message, ResultPart, Role, file_for_model};
use conduit_core::provider::{
    ModelInfo, ModelRequest, ProviderError, ProviderErrorKind, ProviderEvent, StopReason, Usage,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::decode;
use crate::http::{StreamDecoder, parse_arguments};
use crate::images::{self, PreparedImages};
use crate::openai_chat;
use crate::wire::bearer;
use crate::wire::{OPENAI_CALL_IDS, Wire, sent_call_id};

pub const PROTOCOL: &str = "openai-responses";

/// The JSON body of a streaming Responses request.
pub fn build_request(request: &ModelRequest, images: &PreparedImages) -> Value {
    let mut input: Vec<Value> = Vec::new();
    for message in &request.messages {
        match message.role {
            Role::User => input.push(json!({
                "role": "user",
                "content": user_content(message, images),
            })),
            Role::Assistant => assistant_items(message, &mut input),
            Role::Tool => {
                for result in message.tool_results() {
                    let mut output = Vec::new();
                    let text = result.text();
                    let text = if result.is_error {
                        format!("Error: {text}")
                    } else {
                        text
                    };
                    if !text.is_empty() {
                        output.push(json!({"type": "input_text", "text": text}));
                    }
                    for part in &result.parts {
                        match part {
                            ResultPart::Image { media } => {
                                output.push(image_part(&media.hash, images));
                            }
                            ResultPart::Audio { media } => output.push(json!({
                                "type": "input_text",
                                "text": format!("[audio {} omitted]", media.mime),
                            })),
                            _ => {}
                        }
                    }
                    for (name, media) in result.documents() {
                        output.push(file_part(&name, media, images));
                    }
                    // An empty result is an empty string: the service documents the
                    // output as a string or a non-empty list of parts.
                    let output = if output.is_empty() {
                        json!("")
                    } else {
                        Value::Array(output)
                    };
                    input.push(json!({
                        "type": "function_call_output",
                        "call_id": sent_call_id(result.wire_id(), OPENAI_CALL_IDS),
                        "output": output,
                    }));
                }
            }
        }
    }
    let mut body = json!({
        "model": request.model,
        "stream": true,
        "store": false,
        "include": ["reasoning.encrypted_content"],
        "input": input,
    });
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        body["instructions"] = json!(system);
    }
    if let Some(max) = request.max_output_tokens {
        body["max_output_tokens"] = json!(max);
    }
    if let Some(effort) = request.reasoning {
        // A summary of the reasoning streams as the model's thinking.
        body["reasoning"] = json!({"effort": effort.as_str(), "summary": "auto"});
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.input_schema,
                    "strict": false,
                })
            })
            .collect();
    }
    body
}

fn user_content(message: &Message, images: &PreparedImages) -> Vec<Value> {
    message
        .blocks
        .iter()
        .filter_map(|block| match block {
            Block::Text { text } => Some(json!({"type": "input_text", "text": text})),
            Block::File { name, text } => Some(json!({
                "type": "input_text",
                "text": file_for_model(name, text),
            })),
            Block::Image { media } => Some(image_part(&media.hash, images)),
            Block::Document { name, media } => Some(file_part(name, media, images)),
            _ => None,
        })
        .collect()
}

/// A PDF as an `input_file` part under its name, or the note the model reads instead.
fn file_part(name: &str, media: &MediaRef, images: &PreparedImages) -> Value {
    match images::document_or_note(name, media, images) {
        Ok(document) => json!({
            "type": "input_file",
            "filename": name,
            "file_data": document.data_url(),
        }),
        Err(note) => json!({"type": "input_text", "text": note}),
    }
}

fn image_part(hash: &str, images: &PreparedImages) -> Value {
    match images.get(hash) {
        Some(Ok(image)) => json!({"type": "input_image", "image_url": image.data_url()}),
        Some(Err(reason)) => json!({"type": "input_text", "text": images::omitted_note(reason)}),
        None => json!({"type": "input_text", "text": images::omitted_note("it was not loaded")}),
    }
}

/// Whether a block of an assistant message is sent as a `message` or `function_call`
/// item, the items a reasoning item must be followed by.
fn is_output_item(block: &Block) -> bool {
    match block {
        Block::Text { text } => !text.is_empty(),
        Block::ToolCall(_) => true,
        _ => false,
    }
}

fn assistant_items(message: &Message, input: &mut Vec<Value>) {
    // The API refuses reasoning with nothing after it ("Item 'rs_…' of type 'reasoning'
    // was provided without its required following item"), which an answer stopped or cut
    // off by max_output_tokens after its reasoning ends with: such reasoning is left out.
    let last_output = message.blocks.iter().rposition(is_output_item);
    for (position, block) in message.blocks.iter().enumerate() {
        match block {
            Block::Reasoning {
                text,
                encrypted: Some(encrypted),
                id: Some(id),
                protocol,
                ..
            } if protocol.as_deref() == Some(PROTOCOL)
                && last_output.is_some_and(|last| position < last) =>
            {
                let summary: Vec<Value> = if text.is_empty() {
                    Vec::new()
                } else {
                    vec![json!({"type": "summary_text", "text": text})]
                };
                input.push(json!({
                    "type": "reasoning",
                    "id": id,
                    "encrypted_content": encrypted,
                    "summary": summary,
                }));
            }
            Block::Text { text } if !text.is_empty() => input.push(json!({
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            })),
            Block::ToolCall(call) => input.push(json!({
                "type": "function_call",
                "call_id": sent_call_id(call.wire_id(), OPENAI_CALL_IDS),
                "name": call.name,
                "arguments": call.arguments.to_string(),
            })),
            _ => {}
        }
    }
}

/// The Responses stream's events that Conduit reads. The service documents that new event
/// and item types may appear; those are ignored.
#[derive(Deserialize)]
#[serde(tag = "type")]
enum Event {
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta { delta: String },
    /// The model declining, in its words: shown as its answer (dropped, the refusal read
    /// as an empty answer that ended normally).
    #[serde(rename = "response.refusal.delta")]
    RefusalDelta { delta: String },
    /// `summary_index` numbers the parts of one reasoning item's summary, each a
    /// paragraph with its own heading.
    #[serde(rename = "response.reasoning_summary_text.delta")]
    ReasoningSummaryDelta {
        delta: String,
        item_id: Option<String>,
        summary_index: Option<u64>,
    },
    #[serde(rename = "response.reasoning_text.delta")]
    ReasoningTextDelta { delta: String },
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded { item: Item },
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta { item_id: String, delta: String },
    #[serde(rename = "response.function_call_arguments.done")]
    ArgumentsDone { item_id: String, arguments: String },
    #[serde(rename = "response.output_item.done")]
    OutputItemDone { item: Item },
    #[serde(rename = "response.completed")]
    Completed { response: Response },
    #[serde(rename = "response.incomplete")]
    Incomplete { response: Response },
    /// A failure mid-answer: `response.failed` carries it at `response.error`, the
    /// `error` event nested under `error` (as the service sends it) or flat (as it is
    /// documented). Both read the same way.
    #[serde(rename = "response.failed")]
    Failed,
    #[serde(rename = "error")]
    Error,
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Item {
    FunctionCall {
        /// The output item's id; documented as optional on function calls.
        id: Option<String>,
        call_id: String,
        name: String,
        /// Empty when the item is added, whole when it is done.
        arguments: Option<String>,
    },
    Reasoning {
        id: Option<String>,
        encrypted_content: Option<String>,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct Response {
    status: String,
    incomplete_details: Option<IncompleteDetails>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct IncompleteDetails {
    reason: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    input_tokens: u64,
    output_tokens: u64,
    input_tokens_details: Option<InputDetails>,
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: u64,
}

#[derive(Deserialize)]
struct OutputDetails {
    #[serde(default)]
    reasoning_tokens: u64,
}

/// What an `incomplete_details.reason` means (a completed response ends the turn, or
/// asks for tools when it made calls).
pub fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "max_output_tokens" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        // A reason added later, in the provider's words.
        other => StopReason::Other(crate::error_body::code_excerpt(other)),
    }
}

#[derive(Debug)]
struct PendingCall {
    call_id: String,
    arguments: String,
}

/// Decodes the Responses stream's `response.*` events.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Function calls in progress, by output item id.
    calls: BTreeMap<String, PendingCall>,
    /// The reasoning item and summary part the last summary text belonged to.
    summary_part: Option<(Option<String>, u64)>,
    saw_call: bool,
    done: bool,
}

impl StreamDecoder for Decoder {
    fn decode(
        &mut self,
        _event: Option<&str>,
        data: &str,
    ) -> Result<Vec<ProviderEvent>, ProviderError> {
        let mut out = Vec::new();
        match decode::event::<Event>(PROTOCOL, data)? {
            Event::OutputTextDelta { delta } | Event::RefusalDelta { delta } => {
                out.push(ProviderEvent::TextDelta(delta))
            }
            Event::ReasoningSummaryDelta {
                delta,
                item_id,
                summary_index,
            } => {
                // A later part of a summary starts a paragraph of its own: its heading ran
                // on from the last sentence of the part before.
                let part = (item_id, summary_index.unwrap_or_default());
                let starts_part = part.1 > 0 && self.summary_part.as_ref() != Some(&part);
                self.summary_part = Some(part);
                out.push(ProviderEvent::ReasoningDelta(if starts_part {
                    format!("\n\n{delta}")
                } else {
                    delta
                }));
            }
            Event::ReasoningTextDelta { delta } => {
                out.push(ProviderEvent::ReasoningDelta(delta));
            }
            Event::OutputItemAdded {
                item:
                    Item::FunctionCall {
                        id, call_id, name, ..
                    },
            } => {
                // An item without an id of its own is found by its call id: two such
                // items must not share one place and trade arguments.
                let key = id.unwrap_or_else(|| call_id.clone());
                if self.calls.contains_key(&key) {
                    return Err(ProviderError::new(
                        ProviderErrorKind::Protocol,
                        format!("{PROTOCOL} added the call item {key} again before it was done"),
                    ));
                }
                out.push(ProviderEvent::ToolCallStarted {
                    id: call_id.clone(),
                    name,
                });
                let call = PendingCall {
                    call_id,
                    arguments: String::new(),
                };
                self.calls.insert(key, call);
            }
            Event::OutputItemAdded { .. } => {}
            Event::ArgumentsDelta { item_id, delta } => {
                if let Some(call) = self.calls.get_mut(&item_id) {
                    call.arguments.push_str(&delta);
                    out.push(ProviderEvent::ToolCallDelta {
                        id: call.call_id.clone(),
                        arguments: delta,
                    });
                }
            }
            Event::ArgumentsDone { item_id, arguments } => {
                if let Some(call) = self.calls.get_mut(&item_id) {
                    call.arguments = arguments;
                }
            }
            Event::OutputItemDone { item } => match item {
                Item::FunctionCall {
                    id,
                    call_id,
                    name,
                    arguments,
                } => {
                    let pending = self.calls.remove(id.as_deref().unwrap_or(&call_id));
                    let arguments = arguments
                        .or_else(|| pending.map(|p| p.arguments))
                        .unwrap_or_default();
                    self.saw_call = true;
                    out.push(ProviderEvent::ToolCallDone {
                        id: call_id,
                        name,
                        arguments: parse_arguments(&arguments),
                        signature: None,
                    });
                }
                Item::Reasoning {
                    id,
                    encrypted_content,
                } => out.push(ProviderEvent::ReasoningDone {
                    signature: None,
                    encrypted: encrypted_content,
                    id,
                }),
                Item::Other => {}
            },
            Event::Completed { response } | Event::Incomplete { response } => {
                // A call started and never done would be lost from the saved answer while
                // it read as complete (a response cut short says so, and keeps that).
                if response.status == "completed" && !self.calls.is_empty() {
                    return Err(ProviderError::new(
                        ProviderErrorKind::Protocol,
                        format!("{PROTOCOL} ended the response with a call item still open"),
                    ));
                }
                out.push(ProviderEvent::Usage(
                    response.usage.map(usage).unwrap_or_default(),
                ));
                let reason = if response.status == "incomplete" {
                    response
                        .incomplete_details
                        .and_then(|details| details.reason)
                        .map_or(StopReason::MaxTokens, |reason| stop_reason(&reason))
                } else if self.saw_call {
                    StopReason::ToolUse
                } else {
                    StopReason::EndTurn
                };
                self.done = true;
                out.push(ProviderEvent::Stop(reason));
            }
            Event::Failed | Event::Error => return Err(decode::stream_error_in(data)),
            Event::Unknown => {}
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<ProviderEvent>, ProviderError> {
        if self.done {
            return Ok(Vec::new());
        }
        Err(ProviderError::new(
            ProviderErrorKind::Connection,
            "the stream ended before response.completed",
        ))
    }
}

fn usage(usage: WireUsage) -> Usage {
    Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cache_read_tokens: usage.input_tokens_details.map_or(0, |d| d.cached_tokens),
        reasoning_tokens: usage
            .output_tokens_details
            .map_or(0, |d| d.reasoning_tokens),
    }
}

/// The Responses API at a base URL such as `https://api.openai.com/v1`.
pub struct OpenAiResponses;

impl Wire for OpenAiResponses {
    const PROTOCOL: &'static str = PROTOCOL;
    const IMAGE_LIMITS: images::ImageLimits = images::OPENAI;
    type Decoder = Decoder;

    fn auth_headers(api_key: Option<&str>) -> Vec<(&'static str, String)> {
        bearer(api_key)
    }

    fn stream_path(_model: &str) -> String {
        "/responses".to_owned()
    }

    fn models_path() -> String {
        "/models".to_owned()
    }

    fn build_request(request: &ModelRequest, images: &PreparedImages) -> Value {
        build_request(request, images)
    }

    /// Encrypted reasoning is asked for so that a reasoning model's reasoning goes back
    /// with its calls (`store: false`); a model that does not reason (gpt-4o, gpt-4.1,
    /// gpt-5-chat) refuses the request with it: "Encrypted content is not supported with
    /// this model" (`param: include`).
    fn has_optional(body: &Value) -> bool {
        body.get("include").is_some() || body["reasoning"].get("summary").is_some()
    }

    /// Also the reasoning's summary (Thinking picked), which an organisation OpenAI has
    /// not verified may not have: "Your organization must be verified to generate
    /// reasoning summaries" (`param: reasoning.summary`). The effort stays.
    fn drop_optional(body: &mut Value) {
        if let Some(body) = body.as_object_mut() {
            body.remove("include");
            if let Some(reasoning) = body.get_mut("reasoning").and_then(Value::as_object_mut) {
                reasoning.remove("summary");
            }
        }
    }

    /// Only those refusals: "The encrypted content … could not be verified" (reasoning
    /// from another organisation) is another error, which dropping `include` does not
    /// mend.
    fn refuses_optional(error: &ProviderError) -> bool {
        let message = error.message.to_ascii_lowercase();
        error.kind == ProviderErrorKind::InvalidRequest
            && (message.contains("encrypted content is not supported")
                || message.contains("verified to generate reasoning summar"))
    }

    fn parse_models(body: &Value) -> Vec<ModelInfo> {
        openai_chat::parse_models(body)
    }
}

#[cfg(test)]
mod tests;
