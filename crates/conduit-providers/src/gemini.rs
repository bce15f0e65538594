//! Gemini `generateContent`: request building and stream decoding as pure functions, and
//! the streaming client (`:streamGenerateContent?alt=sse`).

use std::borrow::Cow;

use conduit_core::content::{Block, Message, ResultPart, Role, ToolResult, file_for_model};
use conduit_core::provider::{
    ModelInfo, ModelRequest, ProviderError, ProviderErrorKind, ProviderEvent, StopReason, Usage,
};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use crate::decode;
use crate::http::StreamDecoder;
use crate::images::{self, PreparedImages};
use crate::wire::Wire;

pub const PROTOCOL: &str = "gemini";

/// Ids Conduit makes up for calls the model sent without one. They are never sent back:
/// such calls are matched by name and order, as Gemini does for them.
const LOCAL_ID_PREFIX: &str = "gemini-call-";

/// The JSON body of a `generateContent` request.
pub fn build_request(request: &ModelRequest, images: &PreparedImages) -> Value {
    let mut contents: Vec<Value> = Vec::new();
    for message in &request.messages {
        let (role, parts) = match message.role {
            Role::User => ("user", user_parts(message, images)),
            Role::Assistant => ("model", model_parts(message, &request.model)),
            Role::Tool => ("user", function_responses(message, request, images)),
        };
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(existing) = last["parts"].as_array_mut() {
                    existing.extend(parts);
                }
            }
            _ => contents.push(json!({"role": role, "parts": parts})),
        }
    }
    let mut body = json!({"contents": contents});
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        body["systemInstruction"] = json!({"parts": [{"text": system}]});
    }
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "parametersJsonSchema": tool.input_schema,
                })
            })
            .collect();
        body["tools"] = json!([{"functionDeclarations": declarations}]);
    }
    if let Some(max) = request.max_output_tokens {
        body["generationConfig"] = json!({"maxOutputTokens": max});
    }
    if let Some(effort) = request.reasoning {
        // Thoughts come back as parts marked `thought`, shown as the model's thinking.
        body["generationConfig"]["thinkingConfig"] =
            json!({"thinkingBudget": crate::thinking_budget(effort), "includeThoughts": true});
    }
    body
}

/// An image as an `inlineData` part, or a text part saying why it was left out.
fn inline_data(hash: &str, images: &PreparedImages) -> Value {
    prepared_image(hash, images).unwrap_or_else(|note| json!({"text": note}))
}

/// An image as an `inlineData` part, or the note saying why it cannot be sent.
fn prepared_image(hash: &str, images: &PreparedImages) -> Result<Value, String> {
    match images.get(hash) {
        Some(Ok(image)) => {
            Ok(json!({"inlineData": {"mimeType": image.mime, "data": image.base64}}))
        }
        Some(Err(reason)) => Err(images::omitted_note(reason)),
        None => Err(images::omitted_note("it was not loaded")),
    }
}

fn user_parts(message: &Message, images: &PreparedImages) -> Vec<Value> {
    let mut parts = Vec::new();
    for block in &message.blocks {
        match block {
            Block::Text { text } if !text.is_empty() => parts.push(json!({"text": text})),
            Block::File { name, text } => parts.push(json!({"text": file_for_model(name, text)})),
            Block::Image { media } => parts.push(inline_data(&media.hash, images)),
            // A part has no name: the PDF's goes in a text part before it, as a file's.
            Block::Document { name, media } => {
                match images::document_or_note(name, media, images) {
                    Ok(document) => {
                        parts.push(json!({"text": format!("PDF {name}:")}));
                        parts.push(
                            json!({"inlineData": {"mimeType": document.mime, "data": document.base64}}),
                        );
                    }
                    Err(note) => parts.push(json!({"text": note})),
                }
            }
            _ => {}
        }
    }
    parts
}

/// What Gemini 3 takes in place of a call's thought signature when there is none to send
/// back (a call another provider's model made, a sampling request's calls): Google's
/// documented way past its check, which otherwise refuses the whole history with a 400
/// ("Function call is missing a thought_signature") on every later turn.
const NO_SIGNATURE: &str = "skip_thought_signature_validator";

/// Whether `model` is a Gemini 3 model (also as `models/gemini-3…`, as the API names
/// it): the one rule for what Gemini 3 takes (images in function responses) and wants
/// (thought signatures).
pub fn is_gemini_3(model: &str) -> bool {
    model
        .strip_prefix("models/")
        .unwrap_or(model)
        .starts_with("gemini-3")
}

fn model_parts(message: &Message, model: &str) -> Vec<Value> {
    // Gemini 3 wants a signature on the first call of each of its answers (parallel
    // calls after it carry none); a real one is never replaced.
    let needs_signature = is_gemini_3(model)
        && !message
            .blocks
            .iter()
            .any(|block| matches!(block, Block::ToolCall(call) if call.signature.is_some()));
    let mut first_call = true;
    message
        .blocks
        .iter()
        .filter_map(|block| match block {
            Block::Text { text } if !text.is_empty() => Some(json!({"text": text})),
            Block::ToolCall(call) => {
                let mut function_call = json!({"name": call.name, "args": call.arguments});
                if !call.wire_id().starts_with(LOCAL_ID_PREFIX) {
                    function_call["id"] = json!(call.wire_id());
                }
                let mut part = json!({"functionCall": function_call});
                // Gemini 3 rejects a replayed call without the signature it gave.
                if let Some(signature) = &call.signature {
                    part["thoughtSignature"] = json!(signature);
                } else if needs_signature && first_call {
                    part["thoughtSignature"] = json!(NO_SIGNATURE);
                }
                first_call = false;
                Some(part)
            }
            _ => None,
        })
        .collect()
}

/// One `functionResponse` part per result. Images go inside it for models that take
/// that (Gemini 3), otherwise as parts after the responses.
fn function_responses(
    message: &Message,
    request: &ModelRequest,
    images: &PreparedImages,
) -> Vec<Value> {
    let nest = request.capabilities.images_in_tool_results;
    let vision = nest || request.capabilities.vision;
    let mut parts = Vec::new();
    let mut trailing = Vec::new();
    for result in message.tool_results() {
        let fate = if vision {
            result_images(result, images)
        } else {
            ResultImages::NotTaken {
                count: result.images().count(),
                documents: result.documents().count(),
            }
        };
        let mut response = json!({
            "name": result.name,
            "response": response_object(result, &fate),
        });
        if !result.wire_id().starts_with(LOCAL_ID_PREFIX) {
            response["id"] = json!(result.wire_id());
        }
        if let ResultImages::Sent { attached, .. } = fate
            && !attached.is_empty()
        {
            if nest {
                response["parts"] = json!(attached);
            } else {
                trailing.extend(attached);
            }
        }
        parts.push(json!({"functionResponse": response}));
    }
    parts.extend(trailing);
    parts
}

/// What becomes of a tool result's images in the request.
enum ResultImages {
    /// The model takes no images: all of them, and its PDFs, are left out.
    NotTaken { count: usize, documents: usize },
    /// The prepared ones (images, then PDFs) go as `inlineData` parts; each of the
    /// others is a note in the response text, since `functionResponse.parts` takes
    /// nothing but data (Gemini 3 answers a text part there with a 400, on every later
    /// turn too).
    Sent {
        attached: Vec<Value>,
        /// How many of `attached` are PDFs.
        documents: usize,
        omitted: Vec<String>,
    },
}

fn result_images(result: &ToolResult, images: &PreparedImages) -> ResultImages {
    let mut attached = Vec::new();
    let mut omitted = Vec::new();
    for media in result.images() {
        match prepared_image(&media.hash, images) {
            Ok(part) => attached.push(part),
            Err(note) => omitted.push(note),
        }
    }
    let mut documents = 0;
    for (name, media) in result.documents() {
        match images::document_or_note(&name, media, images) {
            Ok(document) => {
                documents += 1;
                attached.push(
                    json!({"inlineData": {"mimeType": document.mime, "data": document.base64}}),
                );
            }
            Err(note) => omitted.push(note),
        }
    }
    ResultImages::Sent {
        attached,
        documents,
        omitted,
    }
}

/// The result's text for `functionResponse.response`, saying what became of its images:
/// the model is told of those attached, and of each left out, not that all are there.
fn response_object(result: &ToolResult, images: &ResultImages) -> Value {
    let mut text = result.text();
    let audio = result
        .parts
        .iter()
        .filter(|p| matches!(p, ResultPart::Audio { .. }))
        .count();
    match images {
        ResultImages::NotTaken { count, documents } => {
            if *count > 0 {
                text.push_str(&format!(
                    "\n[{count} image(s) omitted: this model does not take images]"
                ));
            }
            if *documents > 0 {
                text.push_str(&format!(
                    "\n[{documents} PDF(s) omitted: this model does not take images or PDFs]"
                ));
            }
        }
        ResultImages::Sent {
            attached,
            documents,
            omitted,
        } => {
            let pictures = attached.len() - documents;
            if pictures > 0 {
                text.push_str(&format!("\n[{pictures} image(s) attached]"));
            }
            if *documents > 0 {
                text.push_str(&format!("\n[{documents} PDF(s) attached]"));
            }
            for note in omitted {
                text.push('\n');
                text.push_str(note);
            }
        }
    }
    if audio > 0 {
        text.push_str(&format!("\n[{audio} audio clip(s) omitted]"));
    }
    let text = text.trim_start().to_owned();
    if result.is_error {
        json!({"error": text})
    } else {
        json!({"result": text})
    }
}

/// One streamed `GenerateContentResponse`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    #[serde(default)]
    candidates: Vec<Candidate>,
    usage_metadata: Option<WireUsage>,
    prompt_feedback: Option<PromptFeedback>,
    /// Set (non-null) on an error chunk; read again as JSON then.
    error: Option<IgnoredAny>,
    #[serde(borrow)]
    object: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    /// Absent on a chunk that only finishes (or was blocked).
    content: Option<Content>,
    finish_reason: Option<String>,
    finish_message: Option<String>,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    parts: Vec<Part>,
}

/// A part: text (maybe a thought), a function call, or a kind Conduit does not read.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    text: Option<String>,
    thought: Option<bool>,
    function_call: Option<FunctionCall>,
    thought_signature: Option<String>,
}

#[derive(Deserialize)]
struct FunctionCall {
    /// Gemini sends calls without ids (Conduit numbers those).
    id: Option<String>,
    name: String,
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    #[serde(default)]
    thoughts_token_count: u64,
    #[serde(default)]
    cached_content_token_count: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    block_reason: Option<String>,
    block_reason_message: Option<String>,
}

/// What a `finishReason` means. The decoder reads the reasons that cut an answer off
/// as failures first (see [`cut_off_message`]).
pub fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "STOP" => StopReason::EndTurn,
        "MAX_TOKENS" => StopReason::MaxTokens,
        "SAFETY"
        | "IMAGE_SAFETY"
        | "PROHIBITED_CONTENT"
        | "IMAGE_PROHIBITED_CONTENT"
        | "BLOCKLIST"
        | "SPII" => StopReason::Refusal,
        // FINISH_REASON_UNSPECIFIED and reasons added later, in the provider's words.
        other => StopReason::Other(crate::error_body::code_excerpt(other)),
    }
}

/// Decodes the SSE stream of `GenerateContentResponse` chunks. Function calls arrive
/// whole; the stream ends by closing after a chunk with a `finishReason`.
#[derive(Debug, Default)]
pub struct Decoder {
    calls: u32,
    finish: Option<StopReason>,
    /// A finish reason that means the service stopped the answer, reported at the end.
    cut_off: Option<ProviderError>,
    usage: Option<Usage>,
    done: bool,
}

/// Why Gemini stopped an answer: its own finish message, or what the reason means.
fn cut_off_message(reason: &str, finish_message: Option<&str>) -> String {
    let reason = crate::error_body::code_excerpt(reason);
    if let Some(message) = finish_message.filter(|m| !m.trim().is_empty()) {
        return format!("{reason}: {}", crate::error_body::message_excerpt(message));
    }
    let meaning = match reason.as_str() {
        "SAFETY" | "IMAGE_SAFETY" => "the answer was blocked for safety reasons",
        "RECITATION" | "IMAGE_RECITATION" => {
            "the answer was stopped because it recited protected material"
        }
        "PROHIBITED_CONTENT" | "IMAGE_PROHIBITED_CONTENT" => {
            "the answer was blocked for prohibited content"
        }
        "BLOCKLIST" => "the answer contained a blocked term",
        "SPII" => "the answer contained sensitive personal information",
        "LANGUAGE" => "the answer was in a language the model does not support",
        "MALFORMED_FUNCTION_CALL" => "the model wrote a function call that does not parse",
        "UNEXPECTED_TOOL_CALL" => "the model called a tool it was not given",
        "TOO_MANY_TOOL_CALLS" => "the model made too many tool calls",
        _ => "the service stopped the answer",
    };
    format!("{reason}: {meaning}")
}

impl StreamDecoder for Decoder {
    fn decode(
        &mut self,
        _event: Option<&str>,
        data: &str,
    ) -> Result<Vec<ProviderEvent>, ProviderError> {
        let chunk: Chunk = decode::event(PROTOCOL, data)?;
        if chunk.error.is_some() || chunk.object.as_deref() == Some("error") {
            return Err(decode::stream_error_in(data));
        }
        let mut out = Vec::new();
        if let Some(usage) = chunk.usage_metadata {
            self.usage = Some(Usage {
                input_tokens: usage.prompt_token_count,
                // Counts are the provider's word; a sum past u64 is kept at the largest.
                output_tokens: usage
                    .candidates_token_count
                    .saturating_add(usage.thoughts_token_count),
                cache_read_tokens: usage.cached_content_token_count,
                reasoning_tokens: usage.thoughts_token_count,
            });
        }
        if let Some(feedback) = chunk.prompt_feedback
            && let Some(reason) = feedback.block_reason
        {
            let said = feedback
                .block_reason_message
                .map(|message| format!(" ({})", crate::error_body::message_excerpt(&message)))
                .unwrap_or_default();
            return Err(ProviderError::new(
                ProviderErrorKind::InvalidRequest,
                format!(
                    "the prompt was blocked: {}{said}",
                    crate::error_body::code_excerpt(&reason)
                ),
            ));
        }
        let Some(candidate) = chunk.candidates.into_iter().next() else {
            return Ok(out);
        };
        for part in candidate.content.into_iter().flat_map(|c| c.parts) {
            if let Some(call) = part.function_call {
                let id = match call.id {
                    Some(id) if !id.is_empty() => id,
                    _ => format!("{LOCAL_ID_PREFIX}{}", self.calls),
                };
                self.calls += 1;
                // Arguments are an object, as every other protocol's decoder checks: a
                // call saved with an array would be sent back on every later turn, and
                // Gemini (a Struct) and Anthropic (`input`) refuse the whole request.
                let arguments = match call.args {
                    None | Some(Value::Null) => Ok(Value::Object(Default::default())),
                    Some(args @ Value::Object(_)) => Ok(args),
                    Some(other) => Err(conduit_core::provider::InvalidArguments {
                        raw: other.to_string(),
                        error: format!(
                            "expected a JSON object, got {}",
                            crate::http::json_kind(&other)
                        ),
                    }),
                };
                out.push(ProviderEvent::ToolCallStarted {
                    id: id.clone(),
                    name: call.name.clone(),
                });
                out.push(ProviderEvent::ToolCallDone {
                    id,
                    name: call.name,
                    arguments,
                    signature: part.thought_signature,
                });
            } else if let Some(text) = part.text.filter(|t| !t.is_empty()) {
                if part.thought == Some(true) {
                    out.push(ProviderEvent::ReasoningDelta(text));
                } else {
                    out.push(ProviderEvent::TextDelta(text));
                }
            }
        }
        if let Some(reason) = candidate.finish_reason {
            match reason.as_str() {
                "STOP" if self.calls > 0 => self.finish = Some(StopReason::ToolUse),
                "STOP" | "MAX_TOKENS" | "FINISH_REASON_UNSPECIFIED" => {
                    self.finish = Some(stop_reason(&reason));
                }
                // SAFETY, RECITATION, MALFORMED_FUNCTION_CALL...: the service cut the
                // answer off. The text of this chunk still counts; the failure ends the
                // stream when it closes.
                blocked => {
                    self.cut_off = Some(ProviderError::new(
                        ProviderErrorKind::Stream,
                        cut_off_message(blocked, candidate.finish_message.as_deref()),
                    ));
                }
            }
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<ProviderEvent>, ProviderError> {
        if self.done {
            return Ok(Vec::new());
        }
        if let Some(cut_off) = self.cut_off.take() {
            self.done = true;
            return Err(cut_off);
        }
        let Some(reason) = self.finish.take() else {
            return Err(ProviderError::new(
                ProviderErrorKind::Connection,
                "the stream ended before a finish reason",
            ));
        };
        self.done = true;
        let mut out = Vec::new();
        if let Some(usage) = self.usage.take() {
            out.push(ProviderEvent::Usage(usage));
        }
        out.push(ProviderEvent::Stop(reason));
        Ok(out)
    }
}

/// The models of `GET /v1beta/models` that can generate content.
pub fn parse_models(body: &Value) -> Vec<ModelInfo> {
    body["models"]
        .as_array()
        .map(|models| {
            models
                .iter()
                .filter(|m| {
                    m["supportedGenerationMethods"]
                        .as_array()
                        .is_none_or(|methods| methods.iter().any(|x| x == "generateContent"))
                })
                .filter_map(|m| {
                    let name = m["name"].as_str()?;
                    Some(ModelInfo {
                        id: name.strip_prefix("models/").unwrap_or(name).to_owned(),
                        display_name: m["displayName"].as_str().map(str::to_owned),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The Gemini API at a base URL such as `https://generativelanguage.googleapis.com`.
pub struct Gemini;

impl Wire for Gemini {
    const PROTOCOL: &'static str = PROTOCOL;
    const IMAGE_LIMITS: images::ImageLimits = images::GEMINI;
    type Decoder = Decoder;

    fn auth_headers(api_key: Option<&str>) -> Vec<(&'static str, String)> {
        api_key
            .map(|key| vec![("x-goog-api-key", key.to_owned())])
            .unwrap_or_default()
    }

    /// Google's documentation writes a model as its resource name, `models/gemini-…`,
    /// which the path already holds: taken as it is, it made `/models/models/…`, a 404.
    fn stream_path(model: &str) -> String {
        let model = model.strip_prefix("models/").unwrap_or(model);
        format!("/v1beta/models/{model}:streamGenerateContent?alt=sse")
    }

    fn models_path() -> String {
        "/v1beta/models?pageSize=1000".to_owned()
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
