//! OpenAI Chat Completions, also spoken by Ollama, DeepSeek, OpenRouter, LM Studio, vLLM,
//! Groq and Mistral: request building and stream decoding as pure functions, and the
//! streaming client.

use std::borrow::Cow;
use std::collections::BTreeMap;

use conduit_core::content::{Block, MediaRef, Message, ResultPart, Role, file_for_model};
use conduit_core::provider::{
    ModelInfo, ModelRequest, ProviderError, ProviderErrorKind, ProviderEvent, StopReason, Usage,
};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use crate::decode;
use crate::http::{StreamDecoder, parse_arguments};
use crate::images::{self, PreparedImages};
use crate::wire::bearer;
use crate::wire::{OPENAI_CALL_IDS, Wire, sent_call_id};

pub const PROTOCOL: &str = "openai-chat";

/// The JSON body of a streaming Chat Completions request.
pub fn build_request(request: &ModelRequest, images: &PreparedImages) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        match message.role {
            Role::User => messages.push(user_message(message, images)),
            Role::Assistant => {
                if let Some(assistant) = assistant_message(message) {
                    messages.push(assistant);
                }
            }
            Role::Tool => tool_messages(message, request, images, &mut messages),
        }
    }
    let mut body = json!({
        "model": request.model,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": messages,
    });
    if let Some(max) = request.max_output_tokens {
        body["max_tokens"] = json!(max);
    }
    if let Some(effort) = request.reasoning {
        body["reasoning_effort"] = json!(effort.as_str());
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.input_schema,
                    },
                })
            })
            .collect();
    }
    body
}

fn user_message(message: &Message, images: &PreparedImages) -> Value {
    let has_images = message
        .blocks
        .iter()
        .any(|b| matches!(b, Block::Image { .. } | Block::Document { .. }));
    if !has_images {
        return json!({"role": "user", "content": message.text_with_files()});
    }
    let parts: Vec<Value> = message
        .blocks
        .iter()
        .filter_map(|block| match block {
            Block::Text { text } => Some(json!({"type": "text", "text": text})),
            Block::File { name, text } => {
                Some(json!({"type": "text", "text": file_for_model(name, text)}))
            }
            Block::Image { media } => Some(image_part(&media.hash, images)),
            // OpenAI's form; a compatible server that refuses it gets the request again
            // with a note in its place (`WireProvider::stream`).
            Block::Document { name, media } => Some(file_part(name, media, images)),
            _ => None,
        })
        .collect();
    json!({"role": "user", "content": parts})
}

/// A PDF as a `file` part under its name, or the note the model reads instead.
fn file_part(name: &str, media: &MediaRef, images: &PreparedImages) -> Value {
    match images::document_or_note(name, media, images) {
        Ok(document) => json!({
            "type": "file",
            "file": {"filename": name, "file_data": document.data_url()},
        }),
        Err(note) => json!({"type": "text", "text": note}),
    }
}

fn image_part(hash: &str, images: &PreparedImages) -> Value {
    match images.get(hash) {
        Some(Ok(image)) => json!({"type": "image_url", "image_url": {"url": image.data_url()}}),
        Some(Err(reason)) => json!({"type": "text", "text": images::omitted_note(reason)}),
        None => json!({"type": "text", "text": images::omitted_note("it was not loaded")}),
    }
}

fn assistant_message(message: &Message) -> Option<Value> {
    let text = message.text();
    let calls: Vec<Value> = message
        .tool_calls()
        .map(|call| {
            json!({
                "id": sent_call_id(call.wire_id(), OPENAI_CALL_IDS),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments.to_string()},
            })
        })
        .collect();
    if text.is_empty() && calls.is_empty() {
        return None;
    }
    let mut out = json!({
        "role": "assistant",
        "content": if text.is_empty() { Value::Null } else { json!(text) },
    });
    if !calls.is_empty() {
        out["tool_calls"] = json!(calls);
        // The reasoning that led to the calls goes back with them: DeepSeek's thinking
        // mode refuses the request carrying their results without it (a 400), and Kimi
        // and GLM take it the same way. Only this protocol's, from this provider and
        // model (`replayable_to` left out the rest); a message without calls goes
        // without (DeepSeek's reasoner refuses it there). A server that refuses the
        // field (Groq) gets the request again without it (`Wire::refuses_optional`).
        let reasoning: String = message
            .blocks
            .iter()
            .filter_map(|block| match block {
                Block::Reasoning { text, protocol, .. }
                    if protocol.as_deref() == Some(PROTOCOL) =>
                {
                    Some(text.as_str())
                }
                _ => None,
            })
            .collect();
        if !reasoning.is_empty() {
            out["reasoning_content"] = json!(reasoning);
        }
    }
    Some(out)
}

/// Tool messages carry text only. Their images follow in one user message after all the
/// results of the turn (strict servers reject anything between tool messages), or a note
/// says they were left out when the model has no vision.
fn tool_messages(
    message: &Message,
    request: &ModelRequest,
    images: &PreparedImages,
    out: &mut Vec<Value>,
) {
    let mut held_images: Vec<Value> = Vec::new();
    let mut held_documents = false;
    for result in message.tool_results() {
        let mut content = result.text();
        let image_count = result.images().count();
        if image_count > 0 {
            let note = if request.capabilities.vision {
                for media in result.images() {
                    held_images.push(image_part(&media.hash, images));
                }
                format!("[{image_count} image(s) from this result follow in the next message]")
            } else {
                format!("[{image_count} image(s) omitted: this model does not take images]")
            };
            content = join_lines(&content, &note);
        }
        let document_count = result.documents().count();
        if document_count > 0 {
            let note = if request.capabilities.vision {
                held_documents = true;
                for (name, media) in result.documents() {
                    held_images.push(file_part(&name, media, images));
                }
                format!("[{document_count} PDF(s) from this result follow in the next message]")
            } else {
                format!(
                    "[{document_count} PDF(s) omitted: this model does not take images or PDFs]"
                )
            };
            content = join_lines(&content, &note);
        }
        let audio = result
            .parts
            .iter()
            .filter(|p| matches!(p, ResultPart::Audio { .. }))
            .count();
        if audio > 0 {
            content = join_lines(&content, &format!("[{audio} audio clip(s) omitted]"));
        }
        if result.is_error && !content.starts_with("Error") {
            content = format!("Error: {content}");
        }
        out.push(json!({"role": "tool", "tool_call_id": sent_call_id(result.wire_id(), OPENAI_CALL_IDS), "content": content}));
    }
    if !held_images.is_empty() {
        let returned = if held_documents {
            "Images and PDFs returned by the tool calls above:"
        } else {
            "Images returned by the tool calls above:"
        };
        let mut parts = vec![json!({"type": "text", "text": returned})];
        parts.extend(held_images);
        out.push(json!({"role": "user", "content": parts}));
    }
}

fn join_lines(first: &str, second: &str) -> String {
    if first.is_empty() {
        second.to_owned()
    } else {
        format!("{first}\n{second}")
    }
}

/// One streamed chunk. Compatible servers add fields of their own; those are ignored.
#[derive(Deserialize)]
struct Chunk<'a> {
    /// Absent or empty on the final usage chunk and on Azure's prompt-filter chunk.
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
    /// Set (non-null) on an error chunk, whatever its shape; read again as JSON then.
    error: Option<IgnoredAny>,
    #[serde(borrow)]
    object: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Choice {
    /// Some compatible servers send the finishing choice without a delta.
    #[serde(default)]
    delta: Delta,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    content: Option<DeltaContent>,
    /// DeepSeek and several local servers stream reasoning beside the content.
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    /// The model declining, in its words: shown as its answer.
    refusal: Option<String>,
    tool_calls: Option<Vec<ToolCallDelta>>,
}

/// A delta's `content`: text, or (Mistral's reasoning models) a list of parts, whose
/// `text` parts are the answer.
#[derive(Deserialize)]
#[serde(untagged)]
enum DeltaContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl DeltaContent {
    fn into_text(self) -> String {
        match self {
            DeltaContent::Text(text) => text,
            DeltaContent::Parts(parts) => parts
                .into_iter()
                .filter_map(|part| match part {
                    ContentPart::Text { text } => Some(text),
                    ContentPart::Other => None,
                })
                .collect(),
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentPart {
    Text {
        text: String,
    },
    /// `thinking` parts and kinds added later.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    /// Documented as required, but Gemini's OpenAI-compatible endpoint has been seen to
    /// leave it out: a named piece then starts the next call, a nameless one continues
    /// the latest.
    index: Option<u64>,
    /// Sent on a call's first chunk; some compatible servers send none at all.
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    /// Required on a call's first chunk (checked there), absent after.
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

/// What a Chat Completions `finish_reason` means.
pub fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "stop" => StopReason::EndTurn,
        // `function_call` is the deprecated single-function form.
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        // OpenRouter's `error` and reasons added later, in the provider's words.
        other => StopReason::Other(crate::error_body::code_excerpt(other)),
    }
}

/// The longest tool name a streamed call may build from its pieces: Conduit's own names
/// are at most 64 characters, as OpenAI's API allows.
const MAX_TOOL_NAME_BYTES: usize = 256;

fn name_too_long() -> ProviderError {
    ProviderError::new(
        ProviderErrorKind::Protocol,
        format!("{PROTOCOL} sent a tool name longer than {MAX_TOOL_NAME_BYTES} bytes"),
    )
}

#[derive(Debug, Default)]
struct PendingCall {
    id: String,
    /// False when the server sent no id and Conduit made one up: a later piece that does
    /// bring an id is then no sign of another call.
    id_was_sent: bool,
    name: String,
    arguments: String,
}

impl PendingCall {
    /// Whether a piece sent under `id` (naming a tool, or not) at this call's index
    /// continues it. Ollama, SGLang, dynamo and LiteLLM send every parallel call at index
    /// 0, each under its own id and with its name, so another id with a name starts another
    /// call; a piece with no name continues the call whatever its id (some servers send a
    /// new id with every piece).
    fn continues_with(&self, id: Option<&str>, names_a_tool: bool) -> bool {
        match id {
            Some(id) if names_a_tool => !self.id_was_sent || id == self.id,
            _ => true,
        }
    }
}

/// Decodes the Chat Completions stream: `choices[0].delta` chunks, tool call deltas
/// assembled by index, a usage chunk, then `data: [DONE]`.
#[derive(Debug, Default)]
pub struct Decoder {
    /// The calls of each index in the order they started: one per index from servers
    /// that number their calls, several at index 0 from those that do not.
    calls: BTreeMap<u64, Vec<PendingCall>>,
    finish: Option<StopReason>,
    usage: Option<Usage>,
    done: bool,
}

impl Decoder {
    fn flush_calls(&mut self) -> Vec<ProviderEvent> {
        std::mem::take(&mut self.calls)
            .into_values()
            .flatten()
            .map(|call| ProviderEvent::ToolCallDone {
                arguments: parse_arguments(&call.arguments),
                id: call.id,
                name: call.name,
                signature: None,
            })
            .collect()
    }

    fn end(&mut self) -> Vec<ProviderEvent> {
        let mut out = self.flush_calls();
        if let Some(usage) = self.usage.take() {
            out.push(ProviderEvent::Usage(usage));
        }
        self.done = true;
        out.push(ProviderEvent::Stop(
            self.finish.take().unwrap_or(StopReason::EndTurn),
        ));
        out
    }

    fn tool_call(
        &mut self,
        call: ToolCallDelta,
        data: &str,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        let (name, arguments) = call
            .function
            .map_or((None, None), |f| (f.name, f.arguments));
        let name = name.filter(|s| !s.is_empty());
        // Without an index, a named piece starts the next call and a nameless one
        // continues the latest.
        let latest = self.calls.keys().next_back().copied();
        let index = match (call.index, &name) {
            (Some(index), _) => index,
            // The call after one at index u64::MAX has no index of its own.
            (None, Some(_)) => match latest {
                None => 0,
                Some(index) => index.checked_add(1).ok_or_else(|| {
                    ProviderError::new(
                        ProviderErrorKind::Protocol,
                        "a tool call follows one at the largest index",
                    )
                })?,
            },
            (None, None) => latest.unwrap_or(0),
        };
        let id = call.id.filter(|s| !s.is_empty());
        let arguments = arguments.filter(|s| !s.is_empty());
        let calls = self.calls.entry(index).or_default();
        // The id a call started under stays its id: later pieces only add arguments.
        let call_id = match calls
            .last_mut()
            .filter(|pending| pending.continues_with(id.as_deref(), name.is_some()))
        {
            Some(pending) => {
                // Some servers send a name in pieces, others repeat it whole in every
                // piece; neither makes a name longer than any tool's.
                if let Some(name) = name.filter(|name| *name != pending.name) {
                    if pending.name.len().saturating_add(name.len()) > MAX_TOOL_NAME_BYTES {
                        return Err(name_too_long());
                    }
                    pending.name.push_str(&name);
                }
                if let Some(arguments) = &arguments {
                    pending.arguments.push_str(arguments);
                }
                pending.id.clone()
            }
            None => {
                let Some(name) = name else {
                    return Err(decode::missing(
                        PROTOCOL,
                        "choices[].delta.tool_calls[].function.name",
                        data,
                    ));
                };
                if name.len() > MAX_TOOL_NAME_BYTES {
                    return Err(name_too_long());
                }
                let id_was_sent = id.is_some();
                // Some servers send no id: make one that is stable in the history.
                let id = id.unwrap_or_else(|| format!("call_{index}"));
                out.push(ProviderEvent::ToolCallStarted {
                    id: id.clone(),
                    name: name.clone(),
                });
                calls.push(PendingCall {
                    id: id.clone(),
                    id_was_sent,
                    name,
                    arguments: arguments.clone().unwrap_or_default(),
                });
                id
            }
        };
        if let Some(arguments) = arguments {
            out.push(ProviderEvent::ToolCallDelta {
                id: call_id,
                arguments,
            });
        }
        Ok(())
    }
}

impl StreamDecoder for Decoder {
    fn decode(
        &mut self,
        _event: Option<&str>,
        data: &str,
    ) -> Result<Vec<ProviderEvent>, ProviderError> {
        if data.trim() == "[DONE]" {
            return Ok(self.end());
        }
        let chunk: Chunk = decode::event(PROTOCOL, data)?;
        // OpenAI and compatible servers (OpenRouter, Ollama, vLLM) report a failure
        // mid-answer as a chunk of its own, in several shapes.
        if chunk.error.is_some() || chunk.object.as_deref() == Some("error") {
            return Err(decode::stream_error_in(data));
        }
        let mut out = Vec::new();
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
                cache_read_tokens: usage
                    .prompt_tokens_details
                    .and_then(|d| d.cached_tokens)
                    .unwrap_or_default(),
                reasoning_tokens: usage
                    .completion_tokens_details
                    .and_then(|d| d.reasoning_tokens)
                    .unwrap_or_default(),
            });
        }
        let Some(choice) = chunk.choices.into_iter().next() else {
            return Ok(out);
        };
        let delta = choice.delta;
        // DeepSeek and vLLM write `reasoning_content`, Ollama and OpenRouter `reasoning`;
        // some servers (mlx-vlm) write the same text under both, which showed twice and
        // went back twice. One of them, `reasoning_content` first.
        let reasoning = delta
            .reasoning_content
            .filter(|text| !text.is_empty())
            .or(delta.reasoning.filter(|text| !text.is_empty()));
        if let Some(text) = reasoning {
            out.push(ProviderEvent::ReasoningDelta(text));
        }
        if let Some(text) = delta
            .content
            .map(DeltaContent::into_text)
            .filter(|t| !t.is_empty())
        {
            out.push(ProviderEvent::TextDelta(text));
        }
        if let Some(text) = delta.refusal.filter(|t| !t.is_empty()) {
            out.push(ProviderEvent::TextDelta(text));
        }
        for call in delta.tool_calls.into_iter().flatten() {
            self.tool_call(call, data, &mut out)?;
        }
        if let Some(reason) = choice.finish_reason {
            self.finish = Some(stop_reason(&reason));
            out.extend(self.flush_calls());
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<ProviderEvent>, ProviderError> {
        if self.done {
            return Ok(Vec::new());
        }
        // Some compatible servers close without `[DONE]` after a finish reason.
        if self.finish.is_some() {
            return Ok(self.end());
        }
        Err(ProviderError::new(
            ProviderErrorKind::Connection,
            "the stream ended before the answer was complete",
        ))
    }
}

/// The models list of `GET /models`.
pub fn parse_models(body: &Value) -> Vec<ModelInfo> {
    body["data"]
        .as_array()
        .map(|models| {
            models
                .iter()
                .filter_map(|m| {
                    Some(ModelInfo {
                        id: m["id"].as_str()?.to_owned(),
                        display_name: None,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A Chat Completions service at a base URL such as `https://api.openai.com/v1`.
pub struct OpenAiChat;

impl Wire for OpenAiChat {
    const PROTOCOL: &'static str = PROTOCOL;
    const IMAGE_LIMITS: images::ImageLimits = images::OPENAI;
    type Decoder = Decoder;

    fn auth_headers(api_key: Option<&str>) -> Vec<(&'static str, String)> {
        bearer(api_key)
    }

    fn stream_path(_model: &str) -> String {
        "/chat/completions".to_owned()
    }

    fn models_path() -> String {
        "/models".to_owned()
    }

    fn build_request(request: &ModelRequest, images: &PreparedImages) -> Value {
        build_request(request, images)
    }

    fn for_service(base_url: &str, body: &mut Value) {
        for_service(base_url, body);
    }

    fn parse_models(body: &Value) -> Vec<ModelInfo> {
        parse_models(body)
    }

    fn has_optional(body: &Value) -> bool {
        messages_of(body).any(|message| message.get("reasoning_content").is_some())
    }

    fn drop_optional(body: &mut Value) {
        if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
            for message in messages.iter_mut().filter_map(Value::as_object_mut) {
                message.remove("reasoning_content");
            }
        }
    }

    /// Groq answers 400 "property 'reasoning_content' is unsupported" for reasoning it
    /// streamed itself (as `reasoning`); others say "unknown", "unrecognized" or "extra".
    fn refuses_optional(error: &ProviderError) -> bool {
        let message = error.message.to_ascii_lowercase();
        error.kind == ProviderErrorKind::InvalidRequest
            && message.contains("reasoning_content")
            && [
                "unsupported",
                "not supported",
                "unknown",
                "unrecognized",
                "extra",
                "not permitted",
                "not allowed",
            ]
            .iter()
            .any(|word| message.contains(word))
    }
}

/// The messages of a request body.
fn messages_of(body: &Value) -> impl Iterator<Item = &Value> {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// OpenAI's own service (and Azure OpenAI's and Foundry's hosts) takes the output cap as
/// `max_completion_tokens`:
/// its reasoning models (o-series, GPT-5) refuse `max_tokens` ("Unsupported parameter"),
/// which a server's sampling request always sets. Compatible servers (Ollama, vLLM,
/// LM Studio) read `max_tokens`, so it stays for them.
pub fn for_service(base_url: &str, body: &mut Value) {
    let host = reqwest::Url::parse(base_url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_ascii_lowercase));
    // api.mistral.ai and codestral.mistral.ai.
    if host
        .as_deref()
        .is_some_and(|host| host == "mistral.ai" || host.ends_with(".mistral.ai"))
    {
        mistral_call_ids(body);
    }
    let openai = host.is_some_and(|host| {
        host == "api.openai.com"
            || [
                ".openai.azure.com",
                ".cognitiveservices.azure.com",
                ".services.ai.azure.com",
            ]
            .iter()
            .any(|azure| host.ends_with(azure))
    });
    if let Some(body) = body.as_object_mut().filter(|_| openai)
        && let Some(max) = body.remove("max_tokens")
    {
        body.insert("max_completion_tokens".into(), max);
    }
}

/// Mistral's API refuses any call id that is not 9 ASCII letters and digits ("Tool call
/// id was … but must be a-z, A-Z, 0-9, with a length of 9"): a conversation that
/// moved from another provider, a text-mode call's id, or an id made for a repeated one
/// failed every later turn. Each other id is sent as 9 characters of its hash, so a call
/// and its result still pair; Mistral's own ids go as they are.
fn mistral_call_ids(body: &mut Value) {
    fn fitted(id: &str) -> Option<String> {
        if id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return None;
        }
        use sha2::Digest;
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let digest = sha2::Sha256::digest(id.as_bytes());
        Some(
            digest[..9]
                .iter()
                .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
                .collect(),
        )
    }
    let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) else {
        return;
    };
    for message in messages {
        if let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) {
            for call in calls {
                if let Some(id) = call.get("id").and_then(Value::as_str).and_then(fitted) {
                    call["id"] = Value::String(id);
                }
            }
        }
        if let Some(id) = message
            .get("tool_call_id")
            .and_then(Value::as_str)
            .and_then(fitted)
        {
            message["tool_call_id"] = Value::String(id);
        }
    }
}

#[cfg(test)]
mod tests;
