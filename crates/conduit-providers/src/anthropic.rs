//! Anthropic Messages API: request building and stream decoding as pure functions, and
//! the streaming client.

use std::collections::BTreeMap;

use conduit_core::agent::MAX_RESPONSE_BYTES;
use conduit_core::content::{
    Block, MediaRef, Message, ResultPart, Role, ToolResult, file_for_model,
};
use conduit_core::provider::{
    ModelInfo, ModelRequest, ProviderError, ProviderErrorKind, ProviderEvent, StopReason, Usage,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::decode;
use crate::http::{StreamDecoder, parse_arguments};
use crate::images::{self, PreparedImages};
use crate::wire::{ANTHROPIC_CALL_IDS, Wire, sent_call_id};

pub const PROTOCOL: &str = "anthropic";
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` is required by the API; used when neither request nor model sets one.
const DEFAULT_MAX_TOKENS: u32 = 8192;

/// The JSON body of a streaming Messages request.
pub fn build_request(request: &ModelRequest, images: &PreparedImages) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for message in &request.messages {
        let role = match message.role {
            Role::Assistant => "assistant",
            Role::User | Role::Tool => "user",
        };
        let content = content_blocks(message, images);
        // The API refuses a message without content: one with nothing to send (an answer
        // stopped before any visible text) is left out, and the messages around it, of
        // one role then, join below.
        if content.is_empty() {
            continue;
        }
        // Tool results and a following user message share one user turn.
        match messages.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(blocks) = last["content"].as_array_mut() {
                    blocks.extend(content);
                }
            }
            _ => messages.push(json!({"role": role, "content": content})),
        }
    }
    let max_tokens = request
        .max_output_tokens
        .or(request.capabilities.output_tokens)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    let mut body = json!({
        "model": request.model,
        "max_tokens": max_tokens,
        "stream": true,
        "messages": messages,
    });
    let adaptive = thinks_adaptively(&request.model);
    // Adaptive thinking may skip a step's thinking, so any answer may go on with it; a
    // fixed budget cannot go on from an answer that began without.
    if let Some(effort) = request.reasoning
        && (adaptive || may_think(&body))
    {
        // Thinking counts within `max_tokens`: room is kept for the answer after it.
        let budget = crate::thinking_budget(effort);
        body["max_tokens"] = json!(max_tokens.max(budget.saturating_add(DEFAULT_MAX_TOKENS)));
        if adaptive {
            body["thinking"] = json!({"type": "adaptive"});
            body["output_config"] = json!({"effort": effort.as_str()});
        } else {
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        }
    } else {
        without_trailing_thinking(&mut body);
    }
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        body["system"] = json!(system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                })
            })
            .collect();
    }
    mark_cache_breakpoints(&mut body);
    body
}

/// Whether a Claude model takes adaptive thinking (`thinking: {type: adaptive}` with
/// `output_config.effort`): Claude 4.6 and later, where the fixed budget is deprecated
/// (and refused from Opus 4.7 on). Read from the model's version in its id
/// (`claude-sonnet-4-6`, `claude-opus-4-1-20250805`, `claude-3-7-sonnet-20250219`, a
/// Bedrock `us.anthropic.claude-sonnet-4-5-20250929-v1:0`); a Claude with no version
/// (a new family) is taken as new. A model not named Claude (DeepSeek's, Kimi's, GLM's
/// Anthropic-style endpoints) gets the budget, the form those document.
pub fn thinks_adaptively(model: &str) -> bool {
    let lower = model.to_ascii_lowercase();
    let mut tokens = lower.split(|c: char| !c.is_ascii_alphanumeric());
    if !tokens.any(|token| token == "claude") {
        return false;
    }
    let version: Vec<u32> = tokens
        .take_while(|token| !(token.len() > 2 && token.bytes().all(|b| b.is_ascii_digit())))
        .filter(|token| token.len() <= 2)
        .filter_map(|token| token.parse().ok())
        .take(2)
        .collect();
    match version.as_slice() {
        [] => true,
        [major] => *major > 4,
        [major, minor, ..] => (*major, *minor) >= (4, 6),
    }
}

/// Whether thinking may be asked in this request: a tool loop's last answer that was
/// written without thinking (before Thinking was picked, by another model, or cut off)
/// cannot be continued with it ("a final `assistant` message must start with a thinking
/// block"), so that one request goes without.
fn may_think(body: &Value) -> bool {
    let Some(messages) = body["messages"].as_array() else {
        return true;
    };
    if !ends_in_results(body) {
        return true;
    }
    messages
        .iter()
        .rev()
        .find(|message| message["role"] == "assistant")
        .and_then(|answer| answer["content"][0]["type"].as_str())
        .is_none_or(|first| matches!(first, "thinking" | "redacted_thinking"))
}

/// A request that asks no thinking cannot go on from a tool loop's answer that began
/// with thinking ("When thinking is disabled, an `assistant` message in the final
/// position cannot contain `thinking`"): Thinking set back to Default before *Try
/// again*. That answer's thinking is left out of this request.
fn without_trailing_thinking(body: &mut Value) {
    if may_think(body) && ends_in_results(body) {
        let answer = body["messages"].as_array_mut().and_then(|messages| {
            messages
                .iter_mut()
                .rev()
                .find(|message| message["role"] == "assistant")
        });
        if let Some(blocks) = answer.and_then(|a| a["content"].as_array_mut()) {
            blocks.retain(|block| {
                !matches!(
                    block["type"].as_str(),
                    Some("thinking" | "redacted_thinking")
                )
            });
        }
    }
}

/// Whether the request's last message carries tool results: a tool loop goes on.
fn ends_in_results(body: &Value) -> bool {
    body["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .is_some_and(|last| {
            last["content"]
                .as_array()
                .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
        })
}

/// Anthropic caches a prompt's prefix only up to a block marked `cache_control`, and
/// bills a cached read at a tenth of the input price. A turn that runs tools sends the
/// whole conversation again after every call (up to 25 requests for one message), so
/// three of the four marks the API allows are set: on the last tool definition (tools
/// open every request and change least, so a new conversation with the same servers
/// reads them from the cache), on the last block (the next request of this turn, or the
/// next message within the cache's five minutes, reads everything before it), and on the
/// last block before the model's latest answer, where the previous request ended: the
/// service looks back only 20 blocks for an earlier mark, and a step of many parallel
/// calls adds more. A prefix under the model's minimum (1,024 to 4,096 tokens) is not
/// cached and costs nothing more.
fn mark_cache_breakpoints(body: &mut Value) {
    let ephemeral = json!({"type": "ephemeral"});
    // `get_mut`, not indexing: an index on a missing key would add it as null.
    if let Some(last_tool) = body
        .get_mut("tools")
        .and_then(Value::as_array_mut)
        .and_then(|tools| tools.last_mut())
    {
        last_tool["cache_control"] = ephemeral.clone();
    }
    let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) else {
        return;
    };
    let latest_answer = messages
        .iter()
        .rposition(|message| message["role"] == "assistant");
    let previous_end = latest_answer
        .and_then(|answer| answer.checked_sub(1))
        .filter(|&end| end + 1 < messages.len());
    let last = messages.len().checked_sub(1);
    for index in [previous_end, last].into_iter().flatten() {
        if let Some(block) = messages
            .get_mut(index)
            .and_then(|message| message.get_mut("content"))
            .and_then(Value::as_array_mut)
            .and_then(|blocks| last_cacheable(blocks))
        {
            block["cache_control"] = ephemeral.clone();
        }
    }
}

/// The last block that may carry a cache mark: thinking blocks cannot, the block before
/// them can.
fn last_cacheable(blocks: &mut [Value]) -> Option<&mut Value> {
    blocks.iter_mut().rev().find(|block| {
        !matches!(
            block["type"].as_str(),
            Some("thinking" | "redacted_thinking")
        )
    })
}

fn content_blocks(message: &Message, images: &PreparedImages) -> Vec<Value> {
    let mut out = Vec::new();
    for block in &message.blocks {
        match block {
            Block::Text { text } if has_visible_text(text) => {
                out.push(json!({"type": "text", "text": text}));
            }
            Block::Text { .. } => {}
            Block::File { name, text } => {
                out.push(json!({"type": "text", "text": file_for_model(name, text)}));
            }
            Block::Image { media } => out.push(image_block(&media.hash, images)),
            Block::Document { name, media } => out.push(document_block(name, media, images)),
            Block::Reasoning {
                text,
                signature,
                encrypted,
                protocol,
                ..
            } if protocol.as_deref() == Some(PROTOCOL) => {
                if let Some(data) = encrypted {
                    out.push(json!({"type": "redacted_thinking", "data": data}));
                } else if let Some(signature) = signature {
                    out.push(json!({"type": "thinking", "thinking": text, "signature": signature}));
                }
            }
            Block::Reasoning { .. } => {}
            Block::ToolCall(call) => out.push(json!({
                "type": "tool_use",
                "id": sent_call_id(call.wire_id(), ANTHROPIC_CALL_IDS),
                "name": call.name,
                "input": call.arguments,
            })),
            Block::ToolResult(result) => out.push(tool_result_block(result, images)),
        }
    }
    out
}

fn image_block(hash: &str, images: &PreparedImages) -> Value {
    match images.get(hash) {
        Some(Ok(image)) => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": image.mime, "data": image.base64},
        }),
        Some(Err(reason)) => json!({"type": "text", "text": images::omitted_note(reason)}),
        None => json!({"type": "text", "text": images::omitted_note("it was not loaded")}),
    }
}

/// A PDF as a `document` block under its name, or the note the model reads instead.
fn document_block(name: &str, media: &MediaRef, images: &PreparedImages) -> Value {
    match images::document_or_note(name, media, images) {
        Ok(document) => json!({
            "type": "document",
            "source": {"type": "base64", "media_type": document.mime, "data": document.base64},
            "title": name,
        }),
        Err(note) => json!({"type": "text", "text": note}),
    }
}

/// Anthropic refuses a text block of whitespace alone ("text content blocks must contain
/// non-whitespace text") with a 400; as history is replayed, one such block (an answer
/// stopped after a newline, a tool that printed a blank line) would fail every later turn.
fn has_visible_text(text: &str) -> bool {
    !text.trim().is_empty()
}

/// Anthropic keeps text and images inside the tool result.
fn tool_result_block(result: &ToolResult, images: &PreparedImages) -> Value {
    let mut content: Vec<Value> = Vec::new();
    let text = result.text();
    if has_visible_text(&text) {
        content.push(json!({"type": "text", "text": text}));
    }
    for part in &result.parts {
        match part {
            ResultPart::Image { media } => content.push(image_block(&media.hash, images)),
            ResultPart::Audio { media } => content.push(json!({
                "type": "text",
                "text": format!("[audio {} omitted: this model does not take audio]", media.mime),
            })),
            _ => {}
        }
    }
    for (name, media) in result.documents() {
        content.push(document_block(&name, media, images));
    }
    // Anthropic refuses an error result without content ("content cannot be empty if
    // `is_error` is true"), which a failure with no message, or one of whitespace alone,
    // would otherwise send.
    if result.is_error && content.is_empty() {
        content.push(json!({"type": "text", "text": "The tool failed without a message."}));
    }
    let mut block = json!({
        "type": "tool_result",
        "tool_use_id": sent_call_id(result.wire_id(), ANTHROPIC_CALL_IDS),
        "content": content,
    });
    if result.is_error {
        block["is_error"] = json!(true);
    }
    block
}

/// The Messages stream's events, as documented. Event types added later are ignored, as
/// the API's versioning policy asks of clients.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        index: u64,
        content_block: ContentBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: Delta,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        delta: MessageDelta,
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error,
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct MessageStart {
    usage: Option<WireUsage>,
}

/// A block as it starts. Anthropic starts each empty (`"input":{}`, `"text":""`) and
/// streams its content in deltas; a proxy that turns a whole reply into events may put all
/// of it here and send no delta.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentBlock {
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Option<Value>,
    },
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    /// Server tool blocks, whose content is not streamed as Conduit's own.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: String },
    #[serde(rename = "signature_delta")]
    Signature { signature: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    /// `citations_delta` and delta types added later.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDelta {
    stop_reason: Option<String>,
}

/// Usage counts; each may be absent from a given event (`message_delta` carries only
/// what changed).
#[derive(Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

/// The parts of a prompt's count Anthropic reports apart: its `input_tokens` leaves out
/// what was read from or written to the cache, where the other protocols count the whole
/// prompt and name the cached part within it.
#[derive(Debug, Default, Clone, Copy)]
struct PromptCount {
    uncached: u64,
    cache_read: u64,
    cache_written: u64,
}

impl PromptCount {
    fn whole(&self) -> u64 {
        self.uncached
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_written)
    }
}

/// What a Messages `stop_reason` means.
pub fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" | "stop_sequence" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "refusal" => StopReason::Refusal,
        // `pause_turn` and reasons added later, in the provider's words.
        other => StopReason::Other(crate::error_body::code_excerpt(other)),
    }
}

#[derive(Debug)]
enum OpenBlock {
    Text,
    Thinking {
        signature: Option<String>,
    },
    Redacted {
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        json: String,
        /// The arguments the start carried, as JSON text: used when no delta follows.
        start_json: String,
    },
}

/// Decodes the Messages stream: `message_start`, `content_block_*`, `message_delta`,
/// `message_stop`, `ping` and `error` events.
#[derive(Debug, Default)]
pub struct Decoder {
    blocks: BTreeMap<u64, OpenBlock>,
    /// Bytes of signatures and redacted reasoning received: held in open blocks until
    /// they close, where the core's count of the response cannot see them yet.
    held: usize,
    usage: Usage,
    prompt: PromptCount,
    stop: Option<StopReason>,
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
            Event::MessageStart { message } => {
                self.read_usage(message.usage);
                out.push(ProviderEvent::Usage(self.usage));
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => {
                // A block opened again before it stopped would replace it, and a tool call
                // in it would be started and never done (lost from the saved answer).
                if self.blocks.contains_key(&index) {
                    return Err(ProviderError::new(
                        ProviderErrorKind::Protocol,
                        format!("{PROTOCOL} opened content block {index} again before it stopped"),
                    ));
                }
                if self.blocks.len() >= MAX_OPEN_BLOCKS {
                    return Err(ProviderError::new(
                        ProviderErrorKind::Protocol,
                        format!(
                            "{PROTOCOL} opened more than {MAX_OPEN_BLOCKS} content blocks at once"
                        ),
                    ));
                }
                let open = match content_block {
                    ContentBlock::ToolUse { id, name, input } => {
                        out.push(ProviderEvent::ToolCallStarted {
                            id: id.clone(),
                            name: name.clone(),
                        });
                        // Held until the block stops, where the core cannot count it yet.
                        let start_json = match input {
                            Some(Value::Object(input)) if !input.is_empty() => {
                                Value::Object(input).to_string()
                            }
                            _ => String::new(),
                        };
                        self.hold(start_json.len())?;
                        OpenBlock::ToolUse {
                            id,
                            name,
                            json: String::new(),
                            start_json,
                        }
                    }
                    ContentBlock::Text { text } => {
                        if !text.is_empty() {
                            out.push(ProviderEvent::TextDelta(text));
                        }
                        OpenBlock::Text
                    }
                    ContentBlock::Thinking {
                        thinking,
                        signature,
                    } => {
                        if !thinking.is_empty() {
                            out.push(ProviderEvent::ReasoningDelta(thinking));
                        }
                        self.hold(signature.len())?;
                        OpenBlock::Thinking {
                            signature: (!signature.is_empty()).then_some(signature),
                        }
                    }
                    ContentBlock::RedactedThinking { data } => {
                        self.hold(data.len())?;
                        OpenBlock::Redacted { data }
                    }
                    ContentBlock::Other => OpenBlock::Text,
                };
                self.blocks.insert(index, open);
            }
            Event::ContentBlockDelta { index, delta } => {
                match (delta, self.blocks.get_mut(&index)) {
                    (Delta::Text { text }, _) => out.push(ProviderEvent::TextDelta(text)),
                    (Delta::Thinking { thinking }, _) => {
                        out.push(ProviderEvent::ReasoningDelta(thinking));
                    }
                    (
                        Delta::Signature { signature: part },
                        Some(OpenBlock::Thinking { signature }),
                    ) => {
                        let held = self.held.saturating_add(part.len());
                        if held > MAX_RESPONSE_BYTES {
                            return Err(held_too_much());
                        }
                        self.held = held;
                        signature.get_or_insert_default().push_str(&part);
                    }
                    (
                        Delta::InputJson { partial_json },
                        Some(OpenBlock::ToolUse { id, json, .. }),
                    ) => {
                        json.push_str(&partial_json);
                        out.push(ProviderEvent::ToolCallDelta {
                            id: id.clone(),
                            arguments: partial_json,
                        });
                    }
                    _ => {}
                }
            }
            Event::ContentBlockStop { index } => match self.blocks.remove(&index) {
                Some(OpenBlock::ToolUse {
                    id,
                    name,
                    json,
                    start_json,
                }) => {
                    // Deltas, when any came, are the arguments (Anthropic's start holds
                    // `{}`); else what the start held.
                    let arguments = if json.trim().is_empty() {
                        &start_json
                    } else {
                        &json
                    };
                    out.push(ProviderEvent::ToolCallDone {
                        id,
                        name,
                        arguments: parse_arguments(arguments),
                        signature: None,
                    });
                }
                Some(OpenBlock::Thinking { signature }) => {
                    out.push(ProviderEvent::ReasoningDone {
                        signature,
                        encrypted: None,
                        id: None,
                    });
                }
                Some(OpenBlock::Redacted { data }) => out.push(ProviderEvent::ReasoningDone {
                    signature: None,
                    encrypted: Some(data),
                    id: None,
                }),
                Some(OpenBlock::Text) | None => {}
            },
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.stop = Some(stop_reason(&reason));
                }
                self.read_usage(usage);
                out.push(ProviderEvent::Usage(self.usage));
            }
            Event::MessageStop => {
                // An answer cut at its token limit says so, and keeps that.
                if self.stop != Some(StopReason::MaxTokens)
                    && self
                        .blocks
                        .values()
                        .any(|block| matches!(block, OpenBlock::ToolUse { .. }))
                {
                    return Err(ProviderError::new(
                        ProviderErrorKind::Protocol,
                        format!("{PROTOCOL} ended the answer with a tool call still open"),
                    ));
                }
                self.done = true;
                out.push(ProviderEvent::Stop(
                    self.stop.take().unwrap_or(StopReason::EndTurn),
                ));
            }
            // Retried by the client only while none of the answer went out.
            Event::Error => return Err(decode::stream_error_in(data)),
            Event::Unknown => {} // ping and event types added later
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<ProviderEvent>, ProviderError> {
        if self.done {
            return Ok(Vec::new());
        }
        Err(ProviderError::new(
            ProviderErrorKind::Connection,
            "the stream ended before message_stop",
        ))
    }
}

/// The most content blocks open at once: a real answer opens one at a time.
const MAX_OPEN_BLOCKS: usize = 1024;

fn held_too_much() -> ProviderError {
    ProviderError::new(
        ProviderErrorKind::Protocol,
        format!(
            "{PROTOCOL} sent more than {} MiB of reasoning signatures and redacted reasoning; Conduit stopped the answer",
            MAX_RESPONSE_BYTES / (1024 * 1024)
        ),
    )
}

impl Decoder {
    /// Counts bytes an open block holds back, failing past the response's cap.
    fn hold(&mut self, bytes: usize) -> Result<(), ProviderError> {
        self.held = self.held.saturating_add(bytes);
        if self.held > MAX_RESPONSE_BYTES {
            return Err(held_too_much());
        }
        Ok(())
    }

    fn read_usage(&mut self, usage: Option<WireUsage>) {
        let Some(usage) = usage else { return };
        if let Some(n) = usage.input_tokens {
            self.prompt.uncached = n;
        }
        if let Some(n) = usage.cache_read_input_tokens {
            self.prompt.cache_read = n;
        }
        if let Some(n) = usage.cache_creation_input_tokens {
            self.prompt.cache_written = n;
        }
        if let Some(n) = usage.output_tokens {
            self.usage.output_tokens = n;
        }
        self.usage.input_tokens = self.prompt.whole();
        self.usage.cache_read_tokens = self.prompt.cache_read;
    }
}

/// The models list of `GET /v1/models`.
pub fn parse_models(body: &Value) -> Vec<ModelInfo> {
    body["data"]
        .as_array()
        .map(|models| {
            models
                .iter()
                .filter_map(|m| {
                    Some(ModelInfo {
                        id: m["id"].as_str()?.to_owned(),
                        display_name: m["display_name"].as_str().map(str::to_owned),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The Anthropic Messages API at a base URL such as `https://api.anthropic.com`.
pub struct Anthropic;

impl Wire for Anthropic {
    const PROTOCOL: &'static str = PROTOCOL;
    const IMAGE_LIMITS: images::ImageLimits = images::ANTHROPIC;
    type Decoder = Decoder;

    fn auth_headers(api_key: Option<&str>) -> Vec<(&'static str, String)> {
        let mut headers = vec![("anthropic-version", API_VERSION.to_owned())];
        if let Some(key) = api_key {
            headers.push(("x-api-key", key.to_owned()));
        }
        headers
    }

    fn stream_path(_model: &str) -> String {
        "/v1/messages".to_owned()
    }

    fn models_path() -> String {
        "/v1/models?limit=1000".to_owned()
    }

    fn build_request(request: &ModelRequest, images: &PreparedImages) -> Value {
        build_request(request, images)
    }

    fn parse_models(body: &Value) -> Vec<ModelInfo> {
        parse_models(body)
    }
}

#[cfg(test)]
mod tests;
