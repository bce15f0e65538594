//! A server's sampling request run on one of the user's providers: the request into the
//! conversation model (images held in memory for the run, tool uses and results as calls and
//! results), one model response streamed and gathered into the answer the server gets.
//! Tools offered in the request are never run here: the model's tool uses go back to the
//! server, which runs them. Whether a request runs at all is the frontend's decision (see
//! `asks` for the window, the CLI's terminal asker); the per-server policy is in settings.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use conduit_core::agent::ResponseSize;
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
    /// The policy for `request`'s server from settings (ask by default): an allow holds
    /// only for a request from a session started from what the allow was given to.
    fn sampling_policy(&self, request: &SamplingRequest) -> ToolPolicy;

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

/// How many sampling requests one server may have in a frontend at once, whatever its
/// policy: asking the user, running, or waiting to be sent. More fail unseen, as
/// questions past [`crate::asks::WAITING_PER_SERVER`] are cancelled: a server allowed to
/// sample could otherwise fire hundreds of requests at once, each billed to the user's key.
pub const SAMPLING_PER_SERVER: usize = crate::asks::WAITING_PER_SERVER;

/// What a sampling request past [`SAMPLING_PER_SERVER`] hears: a failure, not the user's
/// rejection (the user never saw it).
pub const TOO_MANY_SAMPLING: &str =
    "this server already has 3 sampling requests waiting or running; Conduit takes no more at once";

/// The sampling requests each server has in a frontend now. A frontend takes a place
/// before anything else is done with a request ([`settle_without_asking`] included) and
/// holds it until the request ends.
#[derive(Default)]
pub struct SamplingSlots {
    taken: parking_lot::Mutex<HashMap<String, usize>>,
}

/// One request's place, given back when dropped.
pub struct SamplingSlot<'a> {
    slots: &'a SamplingSlots,
    server: String,
}

impl SamplingSlots {
    /// A place for one more of `server`'s requests; else the answer the server gets (a
    /// failure saying why), said in the log.
    pub fn take(&self, server: &str) -> Result<SamplingSlot<'_>, SamplingAnswer> {
        let mut taken = self.taken.lock();
        let count = taken.entry(server.to_owned()).or_default();
        if *count >= SAMPLING_PER_SERVER {
            tracing::warn!(%server, "a server sent more sampling requests than may wait or run at once; refused");
            return Err(SamplingAnswer::Failed(TOO_MANY_SAMPLING.into()));
        }
        *count += 1;
        Ok(SamplingSlot {
            slots: self,
            server: server.to_owned(),
        })
    }
}

impl Drop for SamplingSlot<'_> {
    fn drop(&mut self) {
        let mut taken = self.slots.taken.lock();
        if let Some(count) = taken.get_mut(&self.server) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                taken.remove(&self.server);
            }
        }
    }
}

/// What the server's sampling policy settles before anyone is asked, in every frontend:
/// a refusal, or the request run unasked on `pick` (else the default model); `None` when
/// the policy is to ask the user. `_held` is the request's place, taken by the caller:
/// no frontend gets here, or to a run, without one, so no server has more than
/// [`SAMPLING_PER_SERVER`] requests asked or running whatever its policy.
pub async fn settle_without_asking(
    sampler: &dyn Sampler,
    _held: &SamplingSlot<'_>,
    request: &SamplingRequest,
    pick: Option<ModelPick>,
) -> Option<SamplingAnswer> {
    match sampler.sampling_policy(request) {
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
    fn sampling_policy(&self, request: &SamplingRequest) -> ToolPolicy {
        // What the asking session runs, not what the file says by now: a `conduit repl`
        // started before an edit runs the old entry, and an edit waits to be applied.
        let runs =
            crate::approval::allow_print_of_running(request.running.as_ref(), &request.server);
        match self.settings() {
            Ok(settings) => settings.sampling_policy(&request.server, &runs),
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
        // The request's images are held in memory for this run only: stored in the media
        // folder, no message ever referenced them, so a server sending distinct images
        // kept the disk filling for a day before the sweep.
        let media: Arc<dyn MediaStore> = Arc::new(conduit_store::ScratchMediaStore::new(
            conduit_store::FileMediaStore::new(self.paths.media_dir.clone()),
            SAMPLING_MEDIA_BYTES,
        ));
        // Built as a turn's is: a provider in text tool mode gets the tools as text.
        let provider = self
            .model_provider_with(
                &crate::chat::ProviderChoice::Saved(pick.provider.clone()),
                config,
                &model,
                media.clone(),
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
            // A server's request asks for no thinking: it counts within its `maxTokens`.
            reasoning: None,
        };
        tracing::info!(provider = %pick.provider, %model, "a server's sampling request runs");
        let used_ids = conduit_core::content::wire_ids_of(&model_request.messages);
        let events = provider
            .stream(model_request)
            .await
            .map_err(|e| e.to_string())?;
        gather(model, events, used_ids).await
    }
}

/// The most bytes of images one sampling run holds in memory: a request is at most 8 MiB
/// of JSON, so its images, decoded from base64, are at most 6 MiB.
const SAMPLING_MEDIA_BYTES: usize = 8 * 1024 * 1024;

/// The request's messages in the conversation model. Images go to `media` (the run's own);
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
                    if !stored.mime.starts_with("image/") {
                        return Err(format!(
                            "message {}: the image's bytes are {}",
                            i + 1,
                            stored.mime
                        ));
                    }
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
/// provider's call ids (the server answers them by id, and the next request replays
/// them): an id the request's calls (`used_ids`) or this response already have goes as
/// [`conduit_core::content::unique_wire_id`] makes it, an empty one as a new id. A response past a turn's limits
/// ([`conduit_core::agent::MAX_RESPONSE_BYTES`] of text, reasoning and tool arguments,
/// [`conduit_core::agent::MAX_RESPONSE_CALLS`] tool calls) fails, naming the limit: the provider is not trusted to stop.
pub async fn gather(
    model: String,
    mut events: conduit_core::provider::EventStream,
    mut used_ids: std::collections::HashSet<String>,
) -> Result<SampledMessage, String> {
    let mut content: Vec<SamplingContent> = Vec::new();
    let mut stop = SamplingStop::EndTurn;
    let mut streamed = ResponseSize::default();
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| e.to_string())?;
        streamed.count(&event);
        if let Some(over) = streamed.over_limit() {
            return Err(over.message);
        }
        match event {
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
                let id = conduit_core::content::unique_wire_id(&mut used_ids, id)
                    .unwrap_or_else(conduit_core::content::new_call_id);
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
    use conduit_core::agent::{MAX_RESPONSE_BYTES, MAX_RESPONSE_CALLS};
    use conduit_core::provider::EventStream;
    use conduit_core::testing::MemoryMedia;
    use futures::stream;
    use serde_json::json;

    fn request(params: serde_json::Value) -> SamplingRequest {
        SamplingRequest::from_wire("weather", &params).unwrap()
    }

    /// "Allow" for a server's sampling holds for what the server ran when it was given:
    /// a request from a session started from another command under the name (a `conduit
    /// repl` started before the entry was edited, or a session still running while an
    /// edit waits to be applied) is asked about, whatever the file says by then, and so
    /// is a request from no known session.
    #[test]
    fn a_sampling_allow_holds_only_for_what_the_asking_session_runs() {
        use conduit_mcp::config::Transport;
        use conduit_mcp::runtime::RunningFrom;
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        let stdio = |command: &str| {
            RunningFrom::Entry(Transport::Stdio {
                command: command.into(),
                args: vec!["serve".into()],
                env: Default::default(),
                cwd: None,
            })
        };
        let allowed = stdio("research-server");
        let runs = crate::approval::allow_print_of_running(Some(&allowed), "research");
        assert!(!runs.is_empty());
        host.update_settings(|settings| {
            settings.set_sampling_policy("research", ToolPolicy::Allow, &runs);
            Ok::<_, crate::SettingsError>(())
        })
        .unwrap();
        let from = |running: Option<RunningFrom>| {
            let mut request = SamplingRequest::from_wire(
                "research",
                &json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 10}),
            )
            .unwrap();
            request.running = running;
            request
        };
        // The file names the allowed command: its session is let through, the old one is not.
        std::fs::write(
            &host.paths().mcp_config_file,
            json!({"mcpServers": {"research": {"command": "research-server", "args": ["serve"]}}})
                .to_string(),
        )
        .unwrap();
        assert_eq!(
            Sampler::sampling_policy(&host, &from(Some(allowed.clone()))),
            ToolPolicy::Allow
        );
        assert_eq!(
            Sampler::sampling_policy(&host, &from(Some(stdio("old-server")))),
            ToolPolicy::Ask
        );
        assert_eq!(
            Sampler::sampling_policy(&host, &from(None)),
            ToolPolicy::Ask
        );
        // Another process's session of the allowed command still holds it after the file
        // moved on: what runs is what was allowed.
        std::fs::write(&host.paths().mcp_config_file, r#"{"mcpServers": {}}"#).unwrap();
        assert_eq!(
            Sampler::sampling_policy(&host, &from(Some(allowed))),
            ToolPolicy::Allow
        );
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
        let answer = gather("m1".into(), events, Default::default())
            .await
            .unwrap();
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
            Default::default(),
        )
        .await
        .unwrap_err();
        assert!(failed.contains("slow down"), "{failed}");
    }

    #[tokio::test]
    async fn a_repeated_or_empty_call_id_goes_to_the_server_as_one_of_its_own() {
        let done = |id: &str, city: &str| {
            Ok(ProviderEvent::ToolCallDone {
                id: id.into(),
                name: "weather".into(),
                arguments: Ok(json!({"city": city})),
                signature: None,
            })
        };
        let events = stream::iter(vec![
            done("call_0", "Oslo"),
            done("call_0", "Rome"),
            done("", "Lima"),
            Ok(ProviderEvent::Stop(StopReason::ToolUse)),
        ])
        .boxed();
        // The request's messages already have a call under `call_0` (a server that
        // numbers its calls from 0 in every response).
        let used = std::collections::HashSet::from(["call_0".to_owned()]);
        let answer = gather("m1".into(), events, used).await.unwrap();
        let ids: Vec<String> = answer
            .content
            .iter()
            .filter_map(|c| match c {
                SamplingContent::ToolUse { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(ids[..2], ["call_0_2", "call_0_3"]);
        assert!(ids[2].starts_with("call_") && ids[2].len() == 37, "{ids:?}");
    }

    /// `count` events made by `event` as the stream is read, then the end of the response.
    fn response(
        count: usize,
        event: impl Fn(usize) -> ProviderEvent + Send + 'static,
    ) -> EventStream {
        stream::iter(
            (0..count)
                .map(move |i| Ok(event(i)))
                .chain([Ok(ProviderEvent::Stop(StopReason::EndTurn))]),
        )
        .boxed()
    }

    #[tokio::test]
    async fn a_response_past_a_turns_limits_fails_the_sampling_run_naming_the_limit() {
        // Pieces of 1 MiB, each made as the stream is read, one more than the cap holds.
        fn piece() -> String {
            "x".repeat(1024 * 1024)
        }
        let past_bytes = MAX_RESPONSE_BYTES / piece().len() + 1;
        let past_calls = MAX_RESPONSE_CALLS + 1;
        fn call(i: usize, arguments: serde_json::Value) -> ProviderEvent {
            ProviderEvent::ToolCallDone {
                id: format!("c{i}"),
                name: "weather".into(),
                arguments: Ok(arguments),
                signature: None,
            }
        }
        for (endless, why) in [
            (
                response(past_bytes, |_| ProviderEvent::TextDelta(piece())),
                "larger than 32 MiB",
            ),
            (
                response(past_bytes, |_| ProviderEvent::ReasoningDelta(piece())),
                "larger than 32 MiB",
            ),
            (
                // One call whose arguments never end (the provider buffers them whole).
                response(past_bytes, |_| ProviderEvent::ToolCallDelta {
                    id: "c0".into(),
                    arguments: piece(),
                }),
                "larger than 32 MiB",
            ),
            (
                response(past_bytes, |i| call(i, json!({"city": piece()}))),
                "larger than 32 MiB",
            ),
            (
                response(past_calls, |i| call(i, json!({}))),
                "more than 128 tool calls",
            ),
            (
                response(past_calls, |i| ProviderEvent::ToolCallStarted {
                    id: format!("c{i}"),
                    name: "weather".into(),
                }),
                "more than 128 tool calls",
            ),
        ] {
            // Not `unwrap_err`: an answer gathered would print tens of megabytes.
            let Err(failed) = gather("m1".into(), endless, Default::default()).await else {
                panic!("{why}: the answer was gathered");
            };
            assert!(failed.contains(why), "{why}: {failed}");
        }
        // At the limits the answer is gathered; a call that streamed its start counts once.
        let calls = (0..MAX_RESPONSE_CALLS).flat_map(|i| {
            [
                ProviderEvent::ToolCallStarted {
                    id: format!("c{i}"),
                    name: "weather".into(),
                },
                call(i, json!({})),
            ]
        });
        // The calls' arguments (`{}`) take 2 bytes each, their ids and tool names what they
        // say; text fills the rest to the byte.
        let labels: usize = (0..MAX_RESPONSE_CALLS)
            .map(|i| format!("c{i}").len() + "weather".len())
            .sum();
        let text = (0..past_bytes - 2)
            .map(|_| piece())
            .chain(["x".repeat(piece().len() - 2 * MAX_RESPONSE_CALLS - labels)]);
        let at_limits = calls.chain(text.map(ProviderEvent::TextDelta)).map(Ok);
        let answer = gather(
            "m1".into(),
            stream::iter(at_limits).boxed(),
            Default::default(),
        )
        .await
        .unwrap();
        assert_eq!(answer.content.len(), MAX_RESPONSE_CALLS + 1);
    }

    #[test]
    fn each_server_has_its_own_places_given_back_when_a_request_ends() {
        let slots = SamplingSlots::default();
        let held: Vec<_> = (0..SAMPLING_PER_SERVER)
            .map(|_| slots.take("srv").ok().unwrap())
            .collect();
        assert_eq!(
            slots.take("srv").err(),
            Some(SamplingAnswer::Failed(TOO_MANY_SAMPLING.into()))
        );
        assert!(TOO_MANY_SAMPLING.contains(&SAMPLING_PER_SERVER.to_string()));
        let other = slots.take("other");
        assert!(other.is_ok(), "another server has its own");
        drop(held);
        assert!(slots.take("srv").is_ok(), "given back");
        drop(other);
        assert!(slots.taken.lock().is_empty());
    }
}
