//! Text tool-calling: tools for models without native tool calling, over any protocol.
//! A [`TextTools`] provider wraps any provider: the tools go into the system prompt with
//! a call format, the request goes without `tools`, and the calls the model writes in
//! its text become ordinary tool-call events (the call text never reaches the answer).
//! In `auto` mode a service that refuses tools ([`ProviderErrorKind::ToolsUnsupported`])
//! gets the same turn again in text mode, and the model is remembered for the session.

pub mod parser;
pub mod prompt;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use conduit_core::agent::MAX_RESPONSE_BYTES;
use conduit_core::content::new_call_id;
use conduit_core::provider::{
    EventStream, InvalidArguments, ModelInfo, ModelRequest, Provider, ProviderError,
    ProviderErrorKind, ProviderEvent, StopReason,
};
use futures::StreamExt;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use parser::{CallParser, Parsed, UNREADABLE};

/// How a model gets its tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolMode {
    /// Native tool calling, and text mode once the service refuses tools.
    #[default]
    Auto,
    /// Native tool calling only.
    Native,
    /// Tools described in the prompt, calls read from the text.
    Text,
}

/// The models that refused native tools in this session (by provider and model), so
/// later turns go to text mode at once. Kept in memory only: a model served later by a
/// newer server may take tools.
#[derive(Debug, Default)]
pub struct ToolModeMemory {
    refused: Mutex<HashSet<String>>,
}

impl ToolModeMemory {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    pub fn refused(&self, key: &str) -> bool {
        self.refused.lock().contains(key)
    }

    fn remember(&self, key: String) {
        self.refused.lock().insert(key);
    }
}

/// A provider whose tools may go as text.
pub struct TextTools {
    inner: Arc<dyn Provider>,
    mode: ToolMode,
    memory: Arc<ToolModeMemory>,
    /// Names the provider in the memory (with the model).
    provider_key: String,
}

impl TextTools {
    /// Wraps `inner`; `provider_key` names it in `memory` (a settings id or base URL).
    pub fn wrap(
        inner: Arc<dyn Provider>,
        mode: ToolMode,
        memory: Arc<ToolModeMemory>,
        provider_key: impl Into<String>,
    ) -> Arc<dyn Provider> {
        Arc::new(Self {
            inner,
            mode,
            memory,
            provider_key: provider_key.into(),
        })
    }

    fn memory_key(&self, model: &str) -> String {
        format!("{}\n{model}", self.provider_key)
    }
}

#[async_trait]
impl Provider for TextTools {
    fn protocol(&self) -> &'static str {
        self.inner.protocol()
    }

    async fn stream(&self, request: ModelRequest) -> Result<EventStream, ProviderError> {
        if request.tools.is_empty() {
            return self.inner.stream(request).await;
        }
        let key = self.memory_key(&request.model);
        let text_mode = match self.mode {
            ToolMode::Text => true,
            ToolMode::Native => false,
            ToolMode::Auto => self.memory.refused(&key),
        };
        if text_mode {
            return text_stream(&self.inner, request).await;
        }
        if self.mode == ToolMode::Native {
            return self.inner.stream(request).await;
        }
        let native = match self.inner.stream(request.clone()).await {
            Err(err) if err.kind == ProviderErrorKind::ToolsUnsupported => {
                self.refused(key, &err);
                return text_stream(&self.inner, request).await;
            }
            other => other?,
        };
        Ok(fall_back_on_refusal(
            native,
            self.inner.clone(),
            request,
            self.memory.clone(),
            key,
        ))
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        self.inner.list_models().await
    }
}

impl TextTools {
    fn refused(&self, key: String, err: &ProviderError) {
        tracing::info!(error = %err, "the model refused native tools: text tool-calling from now on this session");
        self.memory.remember(key);
    }
}

/// The native stream, unless its answer is a refusal of tools (it comes before any
/// output): then the same request in text mode.
fn fall_back_on_refusal(
    native: EventStream,
    inner: Arc<dyn Provider>,
    request: ModelRequest,
    memory: Arc<ToolModeMemory>,
    key: String,
) -> EventStream {
    crate::instead_if_refused(
        native,
        |err| err.kind == ProviderErrorKind::ToolsUnsupported,
        move |err| async move {
            tracing::info!(error = %err, "the model refused native tools: text tool-calling from now on this session");
            memory.remember(key);
            text_stream(&inner, request).await
        },
    )
}

/// Sends `request` with its tools in the system prompt and reads calls from the text.
async fn text_stream(
    inner: &Arc<dyn Provider>,
    request: ModelRequest,
) -> Result<EventStream, ProviderError> {
    let vision = request.capabilities.vision;
    let request = ModelRequest {
        system: Some(prompt::system_prompt(
            request.system.as_deref(),
            &request.tools,
        )),
        messages: prompt::text_history(&request.messages, vision),
        tools: Vec::new(),
        ..request
    };
    let mut events = inner.stream(request).await?;
    Ok(async_stream::stream! {
        let mut reader = CallReader::default();
        let mut stopped = false;
        // The reader holds a call's text until it closes, out of the core's count of the
        // response: the text read is counted here, against the same cap.
        let mut read: usize = 0;
        while let Some(item) = events.next().await {
            match item {
                Ok(ProviderEvent::TextDelta(text)) => {
                    read = read.saturating_add(text.len());
                    if read > MAX_RESPONSE_BYTES {
                        yield Err(ProviderError::new(
                            ProviderErrorKind::Protocol,
                            format!(
                                "the model's response is larger than {} MiB of text; Conduit stopped the answer",
                                MAX_RESPONSE_BYTES / (1024 * 1024)
                            ),
                        ));
                        return;
                    }
                    for event in reader.push(&text) {
                        yield Ok(event);
                    }
                }
                Ok(ProviderEvent::Stop(reason)) => {
                    stopped = true;
                    for event in reader.finish(Some(reason)) {
                        yield Ok(event);
                    }
                }
                Err(err) => {
                    // A failure mid-answer: what was held back is not given out (a call
                    // in it is half-written), and the stream ends with the error.
                    stopped = true;
                    yield Err(err);
                }
                other => yield other,
            }
        }
        if !stopped {
            // Ended without a stop reason: the held text is still the answer's.
            for event in reader.finish(None) {
                yield Ok(event);
            }
        }
    }
    .boxed())
}

/// Turns a text answer into text and tool-call events, giving each call a wire id of its
/// own (the agent gives it Conduit's id, as for native calls).
#[derive(Default)]
struct CallReader {
    parser: CallParser,
    calls: usize,
}

impl CallReader {
    fn push(&mut self, text: &str) -> Vec<ProviderEvent> {
        let parsed = self.parser.push(text);
        self.events(parsed)
    }

    /// The answer ended: what was held is decided, and a turn that called tools stops
    /// for their results.
    fn finish(&mut self, reason: Option<StopReason>) -> Vec<ProviderEvent> {
        let parsed = self.parser.finish();
        let mut out = self.events(parsed);
        let reason = match reason {
            Some(StopReason::EndTurn) if self.calls > 0 => Some(StopReason::ToolUse),
            other => other,
        };
        out.extend(reason.map(ProviderEvent::Stop));
        out
    }

    fn events(&mut self, parsed: Vec<Parsed>) -> Vec<ProviderEvent> {
        let mut out = Vec::new();
        for item in parsed {
            match item {
                Parsed::Text(text) => out.push(ProviderEvent::TextDelta(text)),
                Parsed::Call(call) => {
                    self.calls += 1;
                    // Unique, so a conversation that later goes native never sends a
                    // provider two calls with one id.
                    let id = new_call_id();
                    let (name, arguments) = match call {
                        Ok(call) => (call.name, Ok(call.arguments)),
                        Err(malformed) => (
                            malformed.name.unwrap_or_else(|| UNREADABLE.to_owned()),
                            Err(InvalidArguments {
                                raw: malformed.raw,
                                error: malformed.error,
                            }),
                        ),
                    };
                    out.push(ProviderEvent::ToolCallStarted {
                        id: id.clone(),
                        name: name.clone(),
                    });
                    out.push(ProviderEvent::ToolCallDone {
                        id,
                        name,
                        arguments,
                        signature: None,
                    });
                }
            }
        }
        out
    }
}
