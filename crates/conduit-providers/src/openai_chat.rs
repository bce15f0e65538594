//! OpenAI Chat Completions, also spoken by Ollama, DeepSeek, OpenRouter, LM Studio, vLLM,
//! Groq and Mistral: request building and stream decoding as pure functions, and the
//! streaming client.

use std::collections::BTreeMap;

use conduit_core::content::{Block, Message, ResultPart, Role};
use conduit_core::provider::{
    ModelInfo, ModelRequest, ProviderError, ProviderErrorKind, ProviderEvent, StopReason, Usage,
};
use serde_json::{Value, json};

use crate::error_body;
use crate::http::{StreamDecoder, parse_arguments, stop_reason};
use crate::images::{self, PreparedImages};
use crate::wire::Wire;
use crate::wire::bearer;

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
        .any(|b| matches!(b, Block::Image { .. }));
    if !has_images {
        return json!({"role": "user", "content": message.text()});
    }
    let parts: Vec<Value> = message
        .blocks
        .iter()
        .filter_map(|block| match block {
            Block::Text { text } => Some(json!({"type": "text", "text": text})),
            Block::Image { media } => Some(image_part(&media.hash, images)),
            _ => None,
        })
        .collect();
    json!({"role": "user", "content": parts})
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
                "id": call.wire_id(),
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
        out.push(json!({"role": "tool", "tool_call_id": result.wire_id(), "content": content}));
    }
    if !held_images.is_empty() {
        let mut parts =
            vec![json!({"type": "text", "text": "Images returned by the tool calls above:"})];
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

#[derive(Debug, Default)]
struct PendingCall {
    id: String,
    name: String,
    arguments: String,
}

/// Decodes the Chat Completions stream: `choices[0].delta` chunks, tool call deltas
/// assembled by index, a usage chunk, then `data: [DONE]`.
#[derive(Debug, Default)]
pub struct Decoder {
    calls: BTreeMap<u64, PendingCall>,
    finish: Option<StopReason>,
    usage: Option<Usage>,
    done: bool,
}

impl Decoder {
    fn flush_calls(&mut self) -> Vec<ProviderEvent> {
        std::mem::take(&mut self.calls)
            .into_values()
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
        let value: Value = serde_json::from_str(data).map_err(|e| {
            ProviderError::new(
                ProviderErrorKind::Protocol,
                format!("a chunk is not JSON ({e})"),
            )
        })?;
        // OpenAI and compatible servers (OpenRouter, Ollama, vLLM) report a failure
        // mid-answer as a chunk of its own, in several shapes.
        if error_body::is_error_chunk(&value) {
            return Err(ProviderError::new(
                ProviderErrorKind::Stream,
                error_body::event_message(&value, data),
            ));
        }
        let mut out = Vec::new();
        if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(Usage {
                input_tokens: usage["prompt_tokens"].as_u64().unwrap_or_default(),
                output_tokens: usage["completion_tokens"].as_u64().unwrap_or_default(),
                cache_read_tokens: usage["prompt_tokens_details"]["cached_tokens"]
                    .as_u64()
                    .unwrap_or_default(),
                reasoning_tokens: usage["completion_tokens_details"]["reasoning_tokens"]
                    .as_u64()
                    .unwrap_or_default(),
            });
        }
        let Some(choice) = value["choices"].get(0) else {
            return Ok(out);
        };
        let delta = &choice["delta"];
        // DeepSeek and several local servers stream reasoning beside the content.
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta[key].as_str().filter(|t| !t.is_empty()) {
                out.push(ProviderEvent::ReasoningDelta(text.to_owned()));
            }
        }
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            out.push(ProviderEvent::TextDelta(text.to_owned()));
        }
        if let Some(calls) = delta["tool_calls"].as_array() {
            for (position, call) in calls.iter().enumerate() {
                let index = call["index"].as_u64().unwrap_or(position as u64);
                let pending = self.calls.entry(index).or_default();
                let function = &call["function"];
                let is_new = pending.id.is_empty() && pending.name.is_empty();
                if let Some(id) = call["id"].as_str().filter(|s| !s.is_empty()) {
                    pending.id = id.to_owned();
                }
                if let Some(name) = function["name"].as_str().filter(|s| !s.is_empty()) {
                    pending.name.push_str(name);
                }
                if is_new {
                    if pending.id.is_empty() {
                        // Some servers send no id: make one that is stable in the history.
                        pending.id = format!("call_{index}");
                    }
                    out.push(ProviderEvent::ToolCallStarted {
                        id: pending.id.clone(),
                        name: pending.name.clone(),
                    });
                }
                if let Some(arguments) = function["arguments"].as_str().filter(|s| !s.is_empty()) {
                    pending.arguments.push_str(arguments);
                    out.push(ProviderEvent::ToolCallDelta {
                        id: pending.id.clone(),
                        arguments: arguments.to_owned(),
                    });
                }
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish = Some(stop_reason(reason));
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

    fn stream_url(base_url: &str, _model: &str) -> String {
        format!("{base_url}/chat/completions")
    }

    fn models_url(base_url: &str) -> String {
        format!("{base_url}/models")
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
