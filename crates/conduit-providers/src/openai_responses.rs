//! OpenAI Responses API: request building and stream decoding as pure functions, and the
//! streaming client. Requests are stateless (`store: false`): reasoning travels back as
//! encrypted content.

use std::collections::BTreeMap;

use conduit_core::content::{Block, Message, ResultPart, Role};
use conduit_core::provider::{
    ModelInfo, ModelRequest, ProviderError, ProviderErrorKind, ProviderEvent, StopReason, Usage,
};
use serde_json::{Value, json};

use crate::error_body;
use crate::http::{StreamDecoder, parse_arguments};
use crate::images::{self, PreparedImages};
use crate::openai_chat;
use crate::wire::Wire;
use crate::wire::bearer;

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
                    input.push(json!({
                        "type": "function_call_output",
                        "call_id": result.wire_id(),
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
            Block::Image { media } => Some(image_part(&media.hash, images)),
            _ => None,
        })
        .collect()
}

fn image_part(hash: &str, images: &PreparedImages) -> Value {
    match images.get(hash) {
        Some(Ok(image)) => json!({"type": "input_image", "image_url": image.data_url()}),
        Some(Err(reason)) => json!({"type": "input_text", "text": images::omitted_note(reason)}),
        None => json!({"type": "input_text", "text": images::omitted_note("it was not loaded")}),
    }
}

fn assistant_items(message: &Message, input: &mut Vec<Value>) {
    for block in &message.blocks {
        match block {
            Block::Reasoning {
                text,
                encrypted: Some(encrypted),
                id: Some(id),
                protocol,
                ..
            } if protocol.as_deref() == Some(PROTOCOL) => {
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
                "call_id": call.wire_id(),
                "name": call.name,
                "arguments": call.arguments.to_string(),
            })),
            _ => {}
        }
    }
}

#[derive(Debug)]
struct PendingCall {
    call_id: String,
    name: String,
    arguments: String,
}

/// Decodes the Responses stream's `response.*` events.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Function calls in progress, by output item id.
    calls: BTreeMap<String, PendingCall>,
    saw_call: bool,
    done: bool,
}

impl StreamDecoder for Decoder {
    fn decode(
        &mut self,
        _event: Option<&str>,
        data: &str,
    ) -> Result<Vec<ProviderEvent>, ProviderError> {
        let value: Value = serde_json::from_str(data).map_err(|e| {
            ProviderError::new(
                ProviderErrorKind::Protocol,
                format!("an event is not JSON ({e})"),
            )
        })?;
        let text = |key: &str| value[key].as_str().unwrap_or_default().to_owned();
        let mut out = Vec::new();
        match value["type"].as_str().unwrap_or_default() {
            "response.output_text.delta" => out.push(ProviderEvent::TextDelta(text("delta"))),
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                out.push(ProviderEvent::ReasoningDelta(text("delta")));
            }
            "response.output_item.added" => {
                let item = &value["item"];
                if item["type"] == "function_call" {
                    let call = PendingCall {
                        call_id: item["call_id"].as_str().unwrap_or_default().to_owned(),
                        name: item["name"].as_str().unwrap_or_default().to_owned(),
                        arguments: String::new(),
                    };
                    out.push(ProviderEvent::ToolCallStarted {
                        id: call.call_id.clone(),
                        name: call.name.clone(),
                    });
                    let item_id = item["id"].as_str().unwrap_or_default().to_owned();
                    self.calls.insert(item_id, call);
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(call) = self.calls.get_mut(&text("item_id")) {
                    let delta = text("delta");
                    call.arguments.push_str(&delta);
                    out.push(ProviderEvent::ToolCallDelta {
                        id: call.call_id.clone(),
                        arguments: delta,
                    });
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(call) = self.calls.get_mut(&text("item_id")) {
                    call.arguments = text("arguments");
                }
            }
            "response.output_item.done" => {
                let item = &value["item"];
                match item["type"].as_str().unwrap_or_default() {
                    "function_call" => {
                        let item_id = item["id"].as_str().unwrap_or_default();
                        let pending = self.calls.remove(item_id);
                        let arguments = item["arguments"]
                            .as_str()
                            .map(str::to_owned)
                            .or_else(|| pending.as_ref().map(|p| p.arguments.clone()))
                            .unwrap_or_default();
                        let call_id = item["call_id"].as_str().map(str::to_owned);
                        let name = item["name"].as_str().map(str::to_owned);
                        self.saw_call = true;
                        out.push(ProviderEvent::ToolCallDone {
                            id: call_id
                                .or_else(|| pending.as_ref().map(|p| p.call_id.clone()))
                                .unwrap_or_default(),
                            name: name
                                .or_else(|| pending.as_ref().map(|p| p.name.clone()))
                                .unwrap_or_default(),
                            arguments: parse_arguments(&arguments),
                            signature: None,
                        });
                    }
                    "reasoning" => out.push(ProviderEvent::ReasoningDone {
                        signature: None,
                        encrypted: item["encrypted_content"].as_str().map(str::to_owned),
                        id: item["id"].as_str().map(str::to_owned),
                    }),
                    _ => {}
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = &value["response"];
                out.push(ProviderEvent::Usage(read_usage(&response["usage"])));
                let reason = if response["status"] == "incomplete" {
                    match response["incomplete_details"]["reason"].as_str() {
                        Some("content_filter") => StopReason::Refusal,
                        Some("max_output_tokens") | None => StopReason::MaxTokens,
                        // A reason added later, in the provider's words.
                        Some(other) => StopReason::Other(other.to_owned()),
                    }
                } else if self.saw_call {
                    StopReason::ToolUse
                } else {
                    StopReason::EndTurn
                };
                self.done = true;
                out.push(ProviderEvent::Stop(reason));
            }
            // A failure mid-answer: `response.failed` carries it at `response.error`, the
            // `error` event nested under `error` (as the service sends it) or flat (as
            // it is documented). Both read the same way.
            "response.failed" | "error" => {
                return Err(ProviderError::new(
                    ProviderErrorKind::Stream,
                    error_body::event_message(&value, data),
                ));
            }
            _ => {}
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

fn read_usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: usage["input_tokens"].as_u64().unwrap_or_default(),
        output_tokens: usage["output_tokens"].as_u64().unwrap_or_default(),
        cache_read_tokens: usage["input_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or_default(),
        reasoning_tokens: usage["output_tokens_details"]["reasoning_tokens"]
            .as_u64()
            .unwrap_or_default(),
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

    fn stream_url(base_url: &str, _model: &str) -> String {
        format!("{base_url}/responses")
    }

    fn models_url(base_url: &str) -> String {
        format!("{base_url}/models")
    }

    fn build_request(request: &ModelRequest, images: &PreparedImages) -> Value {
        build_request(request, images)
    }

    fn parse_models(body: &Value) -> Vec<ModelInfo> {
        openai_chat::parse_models(body)
    }
}

#[cfg(test)]
mod tests;
