//! A server's sampling request run on one of the user's providers: the request into the
//! conversation model (images stored like attachments, tool uses and results as calls and
//! results), one model response streamed and gathered into the answer the server gets.
//! Tools offered in the request are never run here: the model's tool uses go back to the
//! server, which runs them. Whether a request runs at all is the frontend's decision (see
//! `asks` for the window, the CLI's terminal asker); the per-server policy is in settings.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use conduit_core::content::{Block, Message, ResultPart, Role, ToolCall, ToolResult};
use conduit_core::media::MediaStore;
use conduit_core::provider::{ModelRequest, ProviderEvent, StopReason};
use conduit_core::tool::ToolSpec;
use conduit_mcp::sampling::{
    SampledMessage, SamplingAnswer, SamplingContent, SamplingRequest, SamplingRole, SamplingStop,
    ToolChoice,
};
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::Host;
use crate::settings::ToolPolicy;

/// Which provider and model a sampling request runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ModelPick {
    /// A saved provider's id.
    pub provider: String,
    /// The model; `None` takes the provider's default model.
    pub model: Option<String>,
}

/// What a frontend needs to decide and run sampling requests; the host is one.
#[async_trait]
pub trait Sampler: Send + Sync {
    /// The server's sampling policy from settings (ask by default).
    fn sampling_policy(&self, server: &str) -> ToolPolicy;

    /// The provider and model used when the user picked none: the first saved provider
    /// with a default model (the window's own default).
    fn default_pick(&self) -> Option<ModelPick>;

    /// Runs `request` on `pick`; the error says why it could not run, in words.
    async fn run_sampling(
        &self,
        request: &SamplingRequest,
        pick: &ModelPick,
    ) -> Result<SampledMessage, String>;
}

/// Why a request cannot run when nobody picked a model and none is the default.
pub const NO_SAMPLING_PROVIDER: &str = "no provider with a default model is set up to run it";

/// What the server's sampling policy settles before anyone is asked, in every frontend:
/// a refusal, or the request run unasked on `pick` (else the default model); `None` when
/// the policy is to ask the user.
pub async fn settle_without_asking(
    sampler: &dyn Sampler,
    request: &SamplingRequest,
    pick: Option<ModelPick>,
) -> Option<SamplingAnswer> {
    match sampler.sampling_policy(&request.server) {
        ToolPolicy::Deny => {
            tracing::info!(server = %request.server, "a sampling request was refused by the server's policy");
            Some(SamplingAnswer::Rejected)
        }
        ToolPolicy::Allow => Some(match pick.or_else(|| sampler.default_pick()) {
            None => SamplingAnswer::Failed(NO_SAMPLING_PROVIDER.into()),
            Some(pick) => match sampler.run_sampling(request, &pick).await {
                Ok(message) => SamplingAnswer::Sampled(message),
                Err(error) => SamplingAnswer::Failed(error),
            },
        }),
        ToolPolicy::Ask => None,
    }
}

#[async_trait]
impl Sampler for Host {
    fn sampling_policy(&self, server: &str) -> ToolPolicy {
        match self.settings() {
            Ok(settings) => settings.sampling_policy(server),
            Err(error) => {
                // Settings that cannot be read allow nothing without asking.
                tracing::warn!(%error, "settings unreadable; sampling asks");
                ToolPolicy::Ask
            }
        }
    }

    fn default_pick(&self) -> Option<ModelPick> {
        let settings = self.settings().ok()?;
        settings
            .providers
            .iter()
            .find(|p| p.default_model.is_some())
            .map(|p| ModelPick {
                provider: p.id.clone(),
                model: p.default_model.clone(),
            })
    }

    async fn run_sampling(
        &self,
        request: &SamplingRequest,
        pick: &ModelPick,
    ) -> Result<SampledMessage, String> {
        let (config, default_model) = self
            .saved_provider_config(&pick.provider)
            .map_err(|e| e.to_string())?;
        let model = pick.model.clone().or(default_model).ok_or_else(|| {
            format!(
                "provider {:?} has no default model: pick a model",
                pick.provider
            )
        })?;
        let protocol = config.protocol;
        let media: Arc<dyn MediaStore> = self.media.clone();
        // Built as a turn's is: a provider in text tool mode gets the tools as text.
        let provider = self
            .model_provider(
                &crate::chat::ProviderChoice::Saved(pick.provider.clone()),
                config,
                &model,
            )
            .map_err(|e| e.to_string())?;
        let request = request.clone();
        let (messages, tools) = tokio::task::spawn_blocking(move || {
            let messages = model_messages(&request, media.as_ref())?;
            Ok::<_, String>((
                messages,
                (
                    request.system_prompt.clone(),
                    model_tools(&request),
                    request.max_tokens,
                ),
            ))
        })
        .await
        .map_err(|e| format!("preparing the request failed: {e}"))??;
        let (system, tools, max_tokens) = tools;
        let model_request = ModelRequest {
            model: model.clone(),
            system,
            messages,
            tools,
            max_output_tokens: Some(max_tokens),
            capabilities: conduit_providers::default_capabilities(protocol, &model),
        };
        tracing::info!(provider = %pick.provider, %model, "a server's sampling request runs");
        let events = provider
            .stream(model_request)
            .await
            .map_err(|e| e.to_string())?;
        gather(model, events).await
    }
}

/// The request's messages in the conversation model. Images are stored like attachments;
/// a user message of tool results becomes a tool message (as every protocol wants it).
pub fn model_messages(
    request: &SamplingRequest,
    media: &dyn MediaStore,
) -> Result<Vec<Message>, String> {
    let mut tool_names: HashMap<String, String> = HashMap::new();
    let mut messages = Vec::new();
    for (i, message) in request.messages.iter().enumerate() {
        let mut blocks = Vec::new();
        let mut results = false;
        for content in &message.content {
            let block = match content {
                SamplingContent::Text { text } => Block::text(text.clone()),
                SamplingContent::Image {
                    mime_type, data, ..
                } => {
                    let stored = media
                        .put(data, Some(mime_type))
                        .map_err(|e| format!("message {}: the image is not usable: {e}", i + 1))?;
                    Block::Image { media: stored }
                }
                SamplingContent::Audio { .. } => {
                    return Err(format!(
                        "message {}: audio cannot be sent to a model from Conduit",
                        i + 1
                    ));
                }
                SamplingContent::ToolUse { id, name, input } => {
                    tool_names.insert(id.clone(), name.clone());
                    Block::ToolCall(ToolCall {
                        id: id.clone(),
                        wire_id: Some(id.clone()),
                        name: name.clone(),
                        arguments: serde_json::Value::Object(input.clone()),
                        signature: None,
                        invalid_arguments: None,
                        origin: None,
                    })
                }
                SamplingContent::ToolResult {
                    tool_use_id,
                    text,
                    is_error,
                } => {
                    results = true;
                    Block::ToolResult(ToolResult {
                        call_id: tool_use_id.clone(),
                        wire_id: Some(tool_use_id.clone()),
                        name: tool_names.get(tool_use_id).cloned().unwrap_or_default(),
                        is_error: *is_error,
                        parts: vec![ResultPart::Text { text: text.clone() }],
                    })
                }
            };
            blocks.push(block);
        }
        let role = match (message.role, results) {
            (SamplingRole::User, true) => Role::Tool,
            (SamplingRole::User, false) => Role::User,
            (SamplingRole::Assistant, _) => Role::Assistant,
        };
        messages.push(Message { role, blocks });
    }
    Ok(messages)
}

/// The tools offered to the model: none when the server said `toolChoice: none`.
pub fn model_tools(request: &SamplingRequest) -> Vec<ToolSpec> {
    if request.tool_choice == ToolChoice::None {
        return Vec::new();
    }
    request
        .tools
        .iter()
        .map(|tool| ToolSpec {
            name: tool.name.clone(),
            title: None,
            description: tool.description.clone().unwrap_or_default(),
            input_schema: tool.input_schema.clone(),
            output_schema: None,
            annotations: Default::default(),
        })
        .collect()
}

/// One model response gathered into the answer: its text, and its tool uses with the
/// provider's call ids (the server answers them by id).
pub async fn gather(
    model: String,
    mut events: conduit_core::provider::EventStream,
) -> Result<SampledMessage, String> {
    let mut content: Vec<SamplingContent> = Vec::new();
    let mut stop = SamplingStop::EndTurn;
    while let Some(event) = events.next().await {
        match event.map_err(|e| e.to_string())? {
            ProviderEvent::TextDelta(delta) => match content.last_mut() {
                Some(SamplingContent::Text { text }) => text.push_str(&delta),
                _ => content.push(SamplingContent::Text { text: delta }),
            },
            ProviderEvent::ToolCallDone {
                id,
                name,
                arguments,
                ..
            } => {
                let input = match arguments {
                    Ok(serde_json::Value::Object(input)) => input,
                    Ok(serde_json::Value::Null) => serde_json::Map::new(),
                    Ok(other) => {
                        return Err(format!(
                            "the model gave {name} arguments that are not an object: {other}"
                        ));
                    }
                    Err(invalid) => return Err(invalid.to_string()),
                };
                content.push(SamplingContent::ToolUse { id, name, input });
            }
            ProviderEvent::Stop(reason) => {
                stop = match reason {
                    StopReason::EndTurn => SamplingStop::EndTurn,
                    StopReason::ToolUse => SamplingStop::ToolUse,
                    StopReason::MaxTokens => SamplingStop::MaxTokens,
                    StopReason::Refusal => SamplingStop::Other("refusal".into()),
                    StopReason::Other(other) => SamplingStop::Other(other),
                };
            }
            _ => {}
        }
    }
    // Some protocols end a turn with tool calls as a plain end: say what happened.
    if stop == SamplingStop::EndTurn
        && content
            .iter()
            .any(|c| matches!(c, SamplingContent::ToolUse { .. }))
    {
        stop = SamplingStop::ToolUse;
    }
    Ok(SampledMessage {
        model,
        content,
        stop_reason: stop,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use conduit_core::testing::MemoryMedia;
    use futures::stream;
    use serde_json::json;

    fn request(params: serde_json::Value) -> SamplingRequest {
        SamplingRequest::from_wire("weather", &params).unwrap()
    }

    #[test]
    fn a_request_becomes_the_conversation_a_provider_takes() {
        let media = MemoryMedia::new();
        let request = request(json!({
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Weather?"}, {"type": "image", "data": "iVBORw0K", "mimeType": "image/png"}]},
                {"role": "assistant", "content": {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}}},
                {"role": "user", "content": {"type": "tool_result", "toolUseId": "t1", "content": [{"type": "text", "text": "3C"}]}}
            ],
            "maxTokens": 50,
            "tools": [{"name": "weather", "inputSchema": {"type": "object"}}]
        }));
        let messages = model_messages(&request, media.as_ref()).unwrap();
        assert_eq!(
            messages.iter().map(|m| m.role).collect::<Vec<_>>(),
            [Role::User, Role::Assistant, Role::Tool]
        );
        assert!(matches!(messages[0].blocks[1], Block::Image { .. }));
        assert_eq!(
            media.kept().len(),
            1,
            "the image is stored like an attachment"
        );
        let Block::ToolCall(call) = &messages[1].blocks[0] else {
            panic!("{:?}", messages[1]);
        };
        assert_eq!(
            (call.wire_id(), call.arguments.clone()),
            ("t1", json!({"city": "Oslo"}))
        );
        let Block::ToolResult(result) = &messages[2].blocks[0] else {
            panic!("{:?}", messages[2]);
        };
        assert_eq!((result.wire_id(), result.name.as_str()), ("t1", "weather"));
        assert_eq!(model_tools(&request)[0].name, "weather");
    }

    #[test]
    fn tool_choice_none_offers_no_tools_and_audio_is_refused() {
        let mut params = json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
            "maxTokens": 5,
            "tools": [{"name": "t", "inputSchema": {"type": "object"}}],
            "toolChoice": {"mode": "none"}
        });
        assert!(model_tools(&request(params.clone())).is_empty());
        params["messages"][0]["content"] =
            json!({"type": "audio", "data": "AAAA", "mimeType": "audio/wav"});
        let refused = model_messages(&request(params), MemoryMedia::new().as_ref()).unwrap_err();
        assert!(refused.contains("audio"), "{refused}");
    }

    #[tokio::test]
    async fn the_models_text_and_tool_uses_are_gathered_with_why_it_stopped() {
        let events = stream::iter(vec![
            Ok(ProviderEvent::TextDelta("Let me ".into())),
            Ok(ProviderEvent::TextDelta("check.".into())),
            Ok(ProviderEvent::ToolCallDone {
                id: "toolu_1".into(),
                name: "weather".into(),
                arguments: Ok(json!({"city": "Oslo"})),
                signature: None,
            }),
            Ok(ProviderEvent::Stop(StopReason::ToolUse)),
        ])
        .boxed();
        let answer = gather("m1".into(), events).await.unwrap();
        assert_eq!(
            answer.to_wire(),
            json!({"role": "assistant", "model": "m1", "stopReason": "toolUse", "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}]})
        );
        let failed = gather(
            "m1".into(),
            stream::iter(vec![Err(conduit_core::provider::ProviderError::new(
                conduit_core::provider::ProviderErrorKind::RateLimited,
                "slow down",
            ))])
            .boxed(),
        )
        .await
        .unwrap_err();
        assert!(failed.contains("slow down"), "{failed}");
    }
}
