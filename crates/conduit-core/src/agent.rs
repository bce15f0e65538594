//! The agent loop: stream the model's answer, run the tool calls it asks for (approved,
//! concurrently, with a timeout), send the results back, until the model is done.

use std::collections::HashSet;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::content::{
    Block, Message, Role, ToolCall, ToolOrigin, ToolResult, new_call_id, producer, repair_history,
    replayable_to, unique_wire_id, wire_ids_of,
};
use crate::context_fit::{self, ContextFit};
use crate::provider::{
    ModelCapabilities, ModelRequest, Provider, ProviderError, ProviderErrorKind, ProviderEvent,
    StopReason, Usage,
};
use crate::tool::{Progress, ToolContext, ToolRegistry, ToolSpec};

/// What the loop reports while it runs, in order. Frontends render these; `--json`
/// prints them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A model request starts (1 for the first, 2 after the first tool results, ...).
    TurnStarted {
        turn: u32,
    },
    TextDelta {
        text: String,
    },
    ReasoningDelta {
        text: String,
    },
    /// A call begins to stream. `id` is Conduit's own (unique in the conversation);
    /// `origin` names the real server and tool behind `name`.
    ToolCallStarted {
        id: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<ToolOrigin>,
    },
    ToolCallDelta {
        id: String,
        arguments: String,
    },
    /// A block of the assistant message in flight is complete (the next one began, or it
    /// is a tool call): save it now, so a crash loses at most the block in flight.
    BlockDone {
        index: usize,
        block: Block,
    },
    /// The call is complete and about to go through approval.
    ToolCallReady {
        call: ToolCall,
    },
    /// The approval policy asks the user about this call; answer through
    /// [`crate::approval::AskApproval::answer`]. `origin` is the real server and tool
    /// (from the host, not parsed out of the exposed name); `title` is the server's own
    /// label for the tool, secondary; annotations are the tool's hints; `changes` says
    /// what changed since the user last chose "Always allow" for it.
    ApprovalRequested {
        call: ToolCall,
        /// The arguments exactly as the tool gets them, as indented JSON: what the window
        /// shows, since the page's JSON numbers lose digits past 2^53 (an id of
        /// 9007199254740993 would read as …992 on the card and go to the tool whole).
        arguments_text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<ToolOrigin>,
        title: Option<String>,
        annotations: crate::tool::ToolAnnotations,
        /// What the server says the tool does, as the model was shown it: what an allow
        /// is bound to, so the user reads it before allowing (above all when it changed).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        description: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        changes: Vec<String>,
    },
    ToolCallDenied {
        id: String,
        reason: String,
    },
    /// The call is let through without a question because an allow stands (Settings'
    /// "always", the user's "in this conversation", `--approve auto`): the card says which.
    /// Settings are still read again before it starts, and a stop still keeps it back.
    ToolCallAllowed {
        id: String,
        by: StandingAllow,
    },
    /// The call was allowed (its approval question, if any, is answered) and waits for one
    /// of the [`MAX_RUNNING_TOOL_CALLS`] places; `ToolCallRunning` follows, or its result
    /// when the turn was stopped or Settings no longer allow it once a place is free.
    ToolCallQueued {
        id: String,
    },
    /// The call was allowed and runs now (its approval question, if any, is answered).
    ToolCallRunning {
        id: String,
    },
    ToolProgress {
        id: String,
        progress: Progress,
    },
    ToolResult {
        result: ToolResult,
        duration_ms: u64,
    },
    Usage {
        usage: Usage,
    },
    Retrying {
        attempt: u32,
        delay_ms: u64,
        error: ProviderError,
    },
    /// Something of a request did not reach the model as asked (a PDF its server
    /// refused): said to the user when the turn ends.
    LeftOut {
        what: String,
    },
    /// A message is complete and part of the history (save it now).
    MessageDone {
        message: Message,
    },
    /// The model's context is smaller than the conversation: this request, and the rest
    /// of the turn's, leave out what `fit` says (the stored conversation stays whole).
    ContextShortened {
        fit: ContextFit,
    },
    /// The loop hit its turn limit with tool calls still coming.
    TurnLimitReached {
        limit: u32,
    },
    /// The user stopped the turn; partial output is kept, marked interrupted.
    Cancelled,
    /// The model finished.
    Finished {
        reason: StopReason,
    },
}

/// Steps `fit` to the next step that sends `messages` shorter, and says so: false when
/// none does.
fn shorten(fit: &mut ContextFit, messages: &[Message], events: &EventSink) -> bool {
    let Some(shorter) = fit.shorter_for(messages) else {
        return false;
    };
    *fit = shorter;
    events(AgentEvent::ContextShortened { fit: shorter });
    true
}

/// Where the loop sends its events.
pub type EventSink = Arc<dyn Fn(AgentEvent) + Send + Sync>;

/// The answer to "may this tool call run?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// The user's answer to this call's question, or a fixed policy.
    Allow,
    /// Allowed with no question by an allow that stands, which the call's card names.
    Standing(StandingAllow),
    Deny {
        reason: String,
    },
}

/// An allow that lets calls run without a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum StandingAllow {
    /// Settings allow the tool, or its server, always.
    Settings,
    /// The user allowed the tool in this conversation.
    Conversation,
    /// `--approve auto` runs what Settings do not deny.
    Auto,
}

/// Decides whether each tool call may run: a fixed policy, a per-tool setting, or a
/// question to the user that waits for the answer.
#[async_trait]
pub trait Approver: Send + Sync {
    async fn decide(&self, call: &ToolCall, spec: &ToolSpec) -> Approval;

    /// Asked again before a call this approver allowed starts or is sent after a wait
    /// (for one of the places for running calls, or for its MCP server to connect again
    /// after its session expired), by Conduit's call id and the exposed tool name:
    /// `Err(reason)` stops it. What Settings say now decides, as they would for a new call,
    /// except that the user's own answer to this call (or `--approve auto`'s) stands where
    /// Settings would ask.
    fn still_allowed(&self, _call_id: &str, _exposed_name: &str) -> Result<(), String> {
        Ok(())
    }
}

/// One answer for every call (`--approve auto|deny`).
pub struct FixedApproval(pub Approval);

#[async_trait]
impl Approver for FixedApproval {
    async fn decide(&self, _call: &ToolCall, _spec: &ToolSpec) -> Approval {
        self.0.clone()
    }
}

/// How a run ended when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Finished(StopReason),
    TurnLimit,
    Cancelled,
}

impl Outcome {
    /// Why an answer that finished is not all the model meant to say: cut off at its
    /// output limit, or refused. `None` when it ended as the model meant (or was stopped,
    /// or ran into the turn limit, which each frontend words with its own setting).
    pub fn cut_short(&self) -> Option<&'static str> {
        match self {
            Outcome::Finished(StopReason::MaxTokens) => Some(
                "the answer was cut off: it reached the most the model may write in one answer (its output token limit)",
            ),
            Outcome::Finished(StopReason::Refusal) => Some("the model refused to answer"),
            Outcome::Finished(_) | Outcome::TurnLimit | Outcome::Cancelled => None,
        }
    }
}

/// Model requests per run unless the caller says otherwise: the one default the agent,
/// the host's window turns and the CLI's `--max-turns` share.
pub const DEFAULT_MAX_TURNS: u32 = 25;

/// Limits and model settings of a run.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    pub model: String,
    /// The user's name for the provider configuration the model runs on, and where it is
    /// (its base URL's origin): reasoning is stamped with it and the model, and goes back
    /// only to them
    /// ([`crate::content::replayable_to`]). `None`: reasoning goes back to any provider
    /// of the same protocol.
    pub provider: Option<String>,
    pub system: Option<String>,
    pub capabilities: ModelCapabilities,
    pub max_output_tokens: Option<u32>,
    /// Thinking asked of the model; `None` leaves it at its default.
    pub reasoning: Option<crate::provider::ReasoningEffort>,
    /// Model requests per run; the default is [`DEFAULT_MAX_TURNS`].
    pub max_turns: u32,
    /// How long one tool call may take.
    pub tool_timeout: Duration,
}

impl AgentOptions {
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            provider: None,
            system: None,
            capabilities: ModelCapabilities::default(),
            max_output_tokens: None,
            reasoning: None,
            max_turns: DEFAULT_MAX_TURNS,
            tool_timeout: Duration::from_secs(60),
        }
    }
}

/// The most text, reasoning and tool-call arguments one model response may stream, in
/// bytes. The provider (any OpenAI-compatible URL, a proxy) and the model's output are not
/// trusted to stop: a real response is well under a megabyte, a long one a few.
pub const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;

/// The most JSON values (objects, arrays, their entries and elements) one model response's
/// tool arguments may hold. Each parsed value takes 70 bytes and more in memory, and the
/// arguments are kept in the message, its events and every later request: 32 MiB of
/// `[0,0,…]` would be gigabytes. A model writes at most one value a token, and answers
/// are at most about 128,000 tokens long.
pub const MAX_RESPONSE_VALUES: usize = 250_000;

/// The most tool calls one model response may make: they all run, so a response that asks
/// for thousands would start thousands of tools at once. Real responses make a handful.
pub const MAX_RESPONSE_CALLS: usize = 128;

/// The longest tool name or call id a response may give: each is kept with the call, its
/// result and an error that quotes it, and sent back in every later request. Real ones are
/// tens of bytes (providers cap tool names at 64 to 128).
pub const MAX_CALL_LABEL_BYTES: usize = 1024;

/// The least time between two progress reports of one call the window is sent (the one
/// that completes always goes).
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// The most tool calls of one response that run at the same time. Every call's approval
/// question goes up at once; the allowed calls then take turns, so a response of 128
/// calls with tools always allowed does not start 128 servers' work (or processes) at once.
pub const MAX_RUNNING_TOOL_CALLS: usize = 8;

/// How long a tool call goes on running after a stop or its time limit, to see the cancel
/// and end its work (an MCP tool sends its server `notifications/cancelled`), before it is
/// dropped.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

/// `running` to its end, or until `limit` when there is one (`Err` past it).
async fn within<F: Future>(
    limit: Option<Duration>,
    running: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, running).await,
        None => Ok(running.await),
    }
}

/// What one model response streamed so far, against [`MAX_RESPONSE_BYTES`],
/// [`MAX_RESPONSE_VALUES`] and [`MAX_RESPONSE_CALLS`]: the one count a turn and a server's
/// sampling run both keep.
#[derive(Debug, Default)]
pub struct ResponseSize {
    /// Bytes of text, reasoning (its signatures and encrypted content included) and tool
    /// arguments.
    bytes: usize,
    /// JSON values in finished calls' arguments.
    values: usize,
    /// Calls started so far, finished or not.
    calls: usize,
    /// Calls that started and are not done yet: their provider ids (a repeated id is a
    /// call of its own) and the bytes of arguments each streamed, which their finished
    /// arguments are not counted again for.
    open_calls: Vec<(String, usize)>,
    /// A call's id or tool name longer than [`MAX_CALL_LABEL_BYTES`], seen.
    long_label: bool,
}

impl ResponseSize {
    /// Counts what `event` adds to the response.
    pub fn count(&mut self, event: &ProviderEvent) {
        match event {
            ProviderEvent::TextDelta(text) | ProviderEvent::ReasoningDelta(text) => {
                self.add_bytes(text.len());
            }
            ProviderEvent::ReasoningDone {
                signature,
                encrypted,
                id,
            } => {
                for held in [signature, encrypted, id].into_iter().flatten() {
                    self.add_bytes(held.len());
                }
            }
            ProviderEvent::ToolCallStarted { id, name } => {
                self.calls += 1;
                self.labels(id, name);
                self.open_calls.push((id.clone(), 0));
            }
            ProviderEvent::ToolCallDelta { id, arguments } => {
                self.add_bytes(arguments.len());
                match self
                    .open_calls
                    .iter_mut()
                    .rev()
                    .find(|(open, _)| open == id)
                {
                    Some((_, streamed)) => *streamed = streamed.saturating_add(arguments.len()),
                    // A piece for a call that never started opens one.
                    None => {
                        self.calls += 1;
                        self.open_calls.push((id.clone(), arguments.len()));
                    }
                }
            }
            ProviderEvent::ToolCallDone {
                id,
                name,
                arguments,
                signature,
            } => {
                let streamed = match self.open_calls.iter().position(|(open, _)| open == id) {
                    Some(index) => self.open_calls.remove(index).1,
                    None => {
                        self.calls += 1;
                        self.labels(id, name);
                        0
                    }
                };
                self.add_bytes(signature.as_ref().map_or(0, String::len));
                // Arguments that came whole (Gemini, or a final copy that says more than
                // the pieces did): what they hold beyond what streamed.
                let size = match arguments {
                    Ok(value) => {
                        self.values = self
                            .values
                            .saturating_add(crate::content::json_values(value));
                        crate::content::json_size(value)
                    }
                    Err(invalid) => invalid.raw.len(),
                };
                self.add_bytes(size.saturating_sub(streamed));
            }
            _ => {}
        }
    }

    fn add_bytes(&mut self, bytes: usize) {
        self.bytes = self.bytes.saturating_add(bytes);
    }

    /// Counts a call's id and tool name, which are kept and sent back like its arguments.
    fn labels(&mut self, id: &str, name: &str) {
        self.add_bytes(id.len().saturating_add(name.len()));
        self.long_label |= id.len() > MAX_CALL_LABEL_BYTES || name.len() > MAX_CALL_LABEL_BYTES;
    }

    /// The error that ends a response past its limits, naming the limit.
    pub fn over_limit(&self) -> Option<ProviderError> {
        let message = if self.long_label {
            format!(
                "the model gave a tool call an id or tool name longer than {MAX_CALL_LABEL_BYTES} bytes; Conduit stopped the answer"
            )
        } else if self.calls > MAX_RESPONSE_CALLS {
            format!(
                "the model asked for more than {MAX_RESPONSE_CALLS} tool calls in one response; Conduit stopped the answer"
            )
        } else if self.bytes > MAX_RESPONSE_BYTES {
            format!(
                "the model's response is larger than {} MiB of text, reasoning and tool arguments; Conduit stopped the answer",
                MAX_RESPONSE_BYTES / (1024 * 1024)
            )
        } else if self.values > MAX_RESPONSE_VALUES {
            format!(
                "the model's tool arguments hold more than {MAX_RESPONSE_VALUES} JSON values in one response; Conduit stopped the answer"
            )
        } else {
            return None;
        };
        Some(ProviderError::new(ProviderErrorKind::Protocol, message))
    }
}

/// A model, its tools and the approval policy.
pub struct Agent {
    provider: Arc<dyn Provider>,
    tools: ToolRegistry,
    approver: Arc<dyn Approver>,
    options: AgentOptions,
}

impl Agent {
    pub fn new(
        provider: Arc<dyn Provider>,
        tools: ToolRegistry,
        approver: Arc<dyn Approver>,
        options: AgentOptions,
    ) -> Self {
        Self {
            provider,
            tools,
            approver,
            options,
        }
    }

    /// Runs the loop on `history`, whose last message is the user's. Completed messages
    /// are appended as they finish; on return the history is valid for every provider
    /// (each tool call answered), also after an error or a cancel.
    pub async fn run(
        &self,
        history: &mut Vec<Message>,
        events: EventSink,
        cancel: CancellationToken,
    ) -> Result<Outcome, ProviderError> {
        repair_history(history);
        // Once a request had to be shortened, the turn's later ones (longer still) start
        // there, not with a refusal each.
        let mut fit = ContextFit::Whole;
        for turn in 1..=self.options.max_turns {
            events(AgentEvent::TurnStarted { turn });
            let streamed = self.stream_turn(history, &mut fit, &events, &cancel).await;
            let (message, ending) = match streamed {
                Ok(done) => done,
                Err(err) => {
                    repair_history(history);
                    return Err(err);
                }
            };
            let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
            match ending {
                TurnEnding::Cancelled => {
                    self.finish_interrupted(history, &events);
                    return Ok(Outcome::Cancelled);
                }
                TurnEnding::Stopped(reason) if calls.is_empty() => {
                    events(AgentEvent::Finished {
                        reason: reason.clone(),
                    });
                    return Ok(Outcome::Finished(reason));
                }
                // The answer ended as the user stopped: its calls are answered as
                // interrupted, none started.
                TurnEnding::Stopped(_) if cancel.is_cancelled() => {
                    self.finish_interrupted(history, &events);
                    return Ok(Outcome::Cancelled);
                }
                TurnEnding::Stopped(_) => {}
            }
            let results = self.run_tools(&calls, &events, &cancel).await;
            let tool_message = Message {
                role: Role::Tool,
                blocks: results.into_iter().map(Block::ToolResult).collect(),
            };
            history.push(tool_message.clone());
            events(AgentEvent::MessageDone {
                message: tool_message,
            });
            if cancel.is_cancelled() {
                events(AgentEvent::Cancelled);
                return Ok(Outcome::Cancelled);
            }
        }
        events(AgentEvent::TurnLimitReached {
            limit: self.options.max_turns,
        });
        Ok(Outcome::TurnLimit)
    }

    /// Streams one model response into an assistant message appended to `history`. A
    /// request the provider finds longer than the model's context is asked again shorter
    /// (`fit`, kept for the turn's later requests) until the shortest has been refused.
    async fn stream_turn(
        &self,
        history: &mut Vec<Message>,
        fit: &mut ContextFit,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<(Message, TurnEnding), ProviderError> {
        let producer = self
            .options
            .provider
            .as_deref()
            .map(|provider| producer(provider, &self.options.model));
        let replayable = replayable_to(history, producer.as_deref());
        let request = |fit: ContextFit| ModelRequest {
            model: self.options.model.clone(),
            system: self.options.system.clone(),
            messages: context_fit::fitted(&replayable, fit),
            tools: if self.options.capabilities.tool_calling {
                self.tools.specs()
            } else {
                Vec::new()
            },
            max_output_tokens: self.options.max_output_tokens,
            capabilities: self.options.capabilities.clone(),
            reasoning: self.options.reasoning,
        };
        let mut builder = MessageBuilder::new(
            self.provider.protocol(),
            producer.clone(),
            self.tools.clone(),
            wire_ids_of(history),
        );
        // A refusal of the request's length comes before anything streams: as the
        // stream's opening error, or as its first item (after any retries of it).
        let ending = 'request: loop {
            let opened = tokio::select! {
                stream = self.provider.stream(request(*fit)) => stream,
                () = cancel.cancelled() => return Ok((Message { role: Role::Assistant, blocks: vec![] }, TurnEnding::Cancelled)),
            };
            let mut stream = match opened {
                Ok(stream) => stream,
                Err(err) if err.wants_shorter_request() && shorten(fit, &replayable, events) => {
                    continue;
                }
                Err(err) => return Err(self.said_with_thinking(err)),
            };
            let mut streamed = false;
            break loop {
                // Biased: what streams in as the user stops is not taken.
                let next = tokio::select! {
                    biased;
                    () = cancel.cancelled() => break TurnEnding::Cancelled,
                    next = stream.next() => next,
                };
                match next {
                    None => {
                        break TurnEnding::Stopped(StopReason::Other(
                            "the stream ended without a stop reason".into(),
                        ));
                    }
                    Some(Err(err))
                        if !streamed
                            && err.wants_shorter_request()
                            && shorten(fit, &replayable, events) =>
                    {
                        continue 'request;
                    }
                    Some(Err(err)) => {
                        self.keep_partial(history, builder, events);
                        return Err(if streamed {
                            err
                        } else {
                            self.said_with_thinking(err)
                        });
                    }
                    Some(Ok(ProviderEvent::Stop(reason))) => break TurnEnding::Stopped(reason),
                    Some(Ok(event)) => {
                        // Retries and usage counts come before an answer's content does.
                        streamed |= !matches!(
                            event,
                            ProviderEvent::Retrying { .. }
                                | ProviderEvent::Usage(_)
                                | ProviderEvent::LeftOut(_)
                        );
                        let applied = builder.apply(event);
                        for out in applied {
                            events(out);
                        }
                        if let Some(err) = builder.over_limit() {
                            self.keep_partial(history, builder, events);
                            return Err(err);
                        }
                    }
                }
            };
        };
        let message = builder.finish();
        if !message.blocks.is_empty() || matches!(ending, TurnEnding::Stopped(_)) {
            history.push(message.clone());
            events(AgentEvent::MessageDone {
                message: message.clone(),
            });
        }
        Ok((message, ending))
    }

    /// A refused request that asked the model to think, in words about thinking or
    /// reasoning, names the level picked: a model that cannot think refuses it without
    /// naming the Thinking the user chose.
    fn said_with_thinking(&self, mut err: ProviderError) -> ProviderError {
        let about_thinking = {
            let message = err.message.to_ascii_lowercase();
            ["think", "reasoning", "effort", "budget"]
                .iter()
                .any(|word| message.contains(word))
        };
        if let Some(effort) = self.options.reasoning
            && err.kind == ProviderErrorKind::InvalidRequest
            && about_thinking
        {
            err.message.push_str(&format!(
                " (the message asked the model to think ({}): a model that does not think refuses that; pick Thinking: Default, or leave out --thinking)",
                effort.as_str()
            ));
        }
        err
    }

    /// Keeps what streamed before a failure, so the user's partial answer is not lost.
    fn keep_partial(
        &self,
        history: &mut Vec<Message>,
        builder: MessageBuilder,
        events: &EventSink,
    ) {
        let message = builder.finish();
        if !message.blocks.is_empty() {
            history.push(message.clone());
            events(AgentEvent::MessageDone { message });
        }
    }

    fn finish_interrupted(&self, history: &mut Vec<Message>, events: &EventSink) {
        let before = history.len();
        repair_history(history);
        if let Some(added) = history.get(before..) {
            for message in added.iter().cloned() {
                events(AgentEvent::MessageDone { message });
            }
        }
        events(AgentEvent::Cancelled);
    }

    /// Runs one turn's tool calls concurrently, at most [`MAX_RUNNING_TOOL_CALLS`] at a
    /// time; results come back in call order.
    async fn run_tools(
        &self,
        calls: &[ToolCall],
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Vec<ToolResult> {
        let places = Semaphore::new(MAX_RUNNING_TOOL_CALLS);
        let runs = calls
            .iter()
            .map(|call| self.run_tool(call, &places, events, cancel.child_token()));
        futures::future::join_all(runs).await
    }

    async fn run_tool(
        &self,
        call: &ToolCall,
        places: &Semaphore,
        events: &EventSink,
        cancel: CancellationToken,
    ) -> ToolResult {
        let started = Instant::now();
        let result = self.run_tool_inner(call, places, events, cancel).await;
        events(AgentEvent::ToolResult {
            result: result.clone(),
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
        result
    }

    async fn run_tool_inner(
        &self,
        call: &ToolCall,
        places: &Semaphore,
        events: &EventSink,
        cancel: CancellationToken,
    ) -> ToolResult {
        if let Some(invalid) = &call.invalid_arguments {
            return ToolResult::error(
                call,
                format!(
                    "This call was not run: {invalid}. Call the tool again, with its arguments as one JSON object."
                ),
            );
        }
        let Some(tool) = self.tools.get(&call.name) else {
            return ToolResult::error(call, format!("There is no tool named {:?}.", call.name));
        };
        // Biased: an allow that comes as the user stops does not start the call.
        let approval = tokio::select! {
            biased;
            () = cancel.cancelled() => return ToolResult::error(call, "The user stopped the turn before the call was approved."),
            approval = self.approver.decide(call, tool.spec()) => approval,
        };
        match approval {
            Approval::Deny { reason } => {
                events(AgentEvent::ToolCallDenied {
                    id: call.id.clone(),
                    reason: reason.clone(),
                });
                return ToolResult::error(
                    call,
                    format!("The user denied this tool call: {reason}"),
                );
            }
            Approval::Standing(by) => events(AgentEvent::ToolCallAllowed {
                id: call.id.clone(),
                by,
            }),
            Approval::Allow => {}
        }
        let _place = match places.try_acquire() {
            Ok(place) => place,
            Err(_) => {
                events(AgentEvent::ToolCallQueued {
                    id: call.id.clone(),
                });
                // Biased: a place freed by a call the stop ended must not start this one.
                let place = tokio::select! {
                    biased;
                    () = cancel.cancelled() => return ToolResult::error(call, "The user stopped the turn before the call started."),
                    place = places.acquire() => match place {
                        Ok(place) => place,
                        // Never closed while its calls run.
                        Err(closed) => return ToolResult::error(call, format!("The call could not start: {closed}.")),
                    },
                };
                place
            }
        };
        // A question may have stood open for minutes, and the wait for a place been long:
        // Settings are read again, as for a call that waited for its server (a tool set to
        // Never run or switched off meanwhile does not run). Refused, it ends as a call
        // that could not run (as it reads once saved), not as the user's denial.
        if let Err(reason) = self.approver.still_allowed(&call.id, &tool.spec().name) {
            return ToolResult::error(call, format!("This call was not run: {reason}."));
        }
        // Nothing is sent once the user stopped: the grace a running call gets to end its
        // work would otherwise be the call's start.
        if cancel.is_cancelled() {
            return ToolResult::error(call, "The user stopped the turn before the call started.");
        }
        events(AgentEvent::ToolCallRunning {
            id: call.id.clone(),
        });
        let progress_events = events.clone();
        let id = call.id.clone();
        let (approver, call_id, exposed) = (
            self.approver.clone(),
            call.id.clone(),
            tool.spec().name.clone(),
        );
        let pace = ProgressPace::new(Box::new(move |progress| {
            progress_events(AgentEvent::ToolProgress {
                id: id.clone(),
                progress,
            });
        }));
        let reports = pace.clone();
        let context = ToolContext::new(
            cancel.clone(),
            Arc::new(move |progress| reports.report(progress)),
        )
        .rechecked_by(Arc::new(move || approver.still_allowed(&call_id, &exposed)));
        let timeout = self.options.tool_timeout;
        let limit = (!tool.keeps_its_own_time()).then_some(timeout);
        let running = tool.call(call.arguments.clone(), context);
        tokio::pin!(running);
        // Biased: a tool that ends because it saw the cancel still counts as stopped.
        let ended = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            outcome = within(limit, &mut running) => Some(outcome),
        };
        // Progress held back is not sent after the call's end.
        pace.end();
        let outcome = match ended {
            None => {
                // The tool sees the stop and ends its work (an MCP tool tells its server to
                // cancel) before it is dropped.
                let _ = tokio::time::timeout(STOP_GRACE, &mut running).await;
                return ToolResult::error(
                    call,
                    "The user stopped the turn while the tool was running.",
                );
            }
            Some(outcome) => outcome,
        };
        match outcome {
            Ok(Ok(output)) => ToolResult {
                call_id: call.id.clone(),
                wire_id: call.wire_id.clone(),
                name: call.name.clone(),
                is_error: output.is_error,
                parts: output.parts,
            },
            Ok(Err(err)) => ToolResult::error(call, format!("The tool failed: {err}")),
            Err(_) => {
                cancel.cancel();
                let _ = tokio::time::timeout(STOP_GRACE, &mut running).await;
                ToolResult::error(
                    call,
                    format!(
                        "The tool did not finish within {} s.",
                        timeout.as_secs_f32()
                    ),
                )
            }
        }
    }
}

/// One call's progress on its way to the window. A server may send progress in a flood:
/// the window shows the latest, so one report an interval goes (and the one that
/// completes, at once), and a flood does not push other events out of the window's
/// mailbox. The latest report held back goes when its interval ends, unless the call
/// ended first.
struct ProgressPace {
    state: std::sync::Mutex<PaceState>,
    send: Box<dyn Fn(Progress) + Send + Sync>,
}

#[derive(Default)]
struct PaceState {
    shown: Option<Instant>,
    held: Option<Progress>,
    flushing: bool,
    ended: bool,
}

impl ProgressPace {
    fn new(send: Box<dyn Fn(Progress) + Send + Sync>) -> Arc<Self> {
        Arc::new(Self {
            state: std::sync::Mutex::default(),
            send,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PaceState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn report(self: &Arc<Self>, progress: Progress) {
        let complete = progress
            .total
            .is_some_and(|total| progress.progress >= total);
        let mut state = self.lock();
        if state.ended {
            return;
        }
        let due = complete
            || state
                .shown
                .is_none_or(|shown| shown.elapsed() >= PROGRESS_INTERVAL);
        // Sent under the lock: a held report flushed meanwhile never goes after a newer one.
        if due {
            state.shown = Some(Instant::now());
            state.held = None;
            (self.send)(progress);
            return;
        }
        state.held = Some(progress);
        if state.flushing {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // Outside a runtime nothing can wait: the report goes now.
            if let Some(progress) = state.held.take() {
                (self.send)(progress);
            }
            return;
        };
        state.flushing = true;
        let wait = state.shown.map_or(Duration::ZERO, |shown| {
            PROGRESS_INTERVAL.saturating_sub(shown.elapsed())
        });
        drop(state);
        let pace = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep(wait).await;
            pace.flush();
        });
    }

    /// Sends the report held back, if the call goes on.
    fn flush(&self) {
        let mut state = self.lock();
        state.flushing = false;
        if let Some(progress) = state.held.take().filter(|_| !state.ended) {
            state.shown = Some(Instant::now());
            (self.send)(progress);
        }
    }

    fn end(&self) {
        let mut state = self.lock();
        state.ended = true;
        state.held = None;
    }
}

enum TurnEnding {
    Stopped(StopReason),
    Cancelled,
}

/// Builds the assistant message from a model's events, and turns those events into
/// agent events. Each call gets Conduit's own id here; the provider's id is kept for the
/// wire only.
struct MessageBuilder {
    protocol: &'static str,
    /// What reasoning is stamped with ([`producer`]), when the provider is known.
    producer: Option<String>,
    blocks: Vec<Block>,
    /// Blocks before this index were reported complete.
    reported: usize,
    /// The turn's tools, for the origin of each call.
    tools: ToolRegistry,
    /// Calls that started streaming and are not done yet: (provider id, Conduit id), in
    /// the order they started.
    open_calls: Vec<(String, String)>,
    /// What the response streamed so far, against its limits.
    size: ResponseSize,
    /// The provider ids the conversation's calls go back under, this response's included.
    wire_ids: HashSet<String>,
}

impl MessageBuilder {
    fn new(
        protocol: &'static str,
        producer: Option<String>,
        tools: ToolRegistry,
        wire_ids: HashSet<String>,
    ) -> Self {
        Self {
            protocol,
            producer,
            blocks: Vec::new(),
            reported: 0,
            tools,
            open_calls: Vec::new(),
            size: ResponseSize::default(),
            wire_ids,
        }
    }

    /// The error that ends a response past its limits, naming the limit.
    fn over_limit(&self) -> Option<ProviderError> {
        self.size.over_limit()
    }

    /// The open call a streamed piece belongs to: the latest one started under that
    /// provider id (a provider streams one call's arguments before the next one's). A
    /// piece for a call that never started opens one.
    fn streaming_call(&mut self, wire_id: &str) -> String {
        match self
            .open_calls
            .iter()
            .rev()
            .find(|(wire, _)| wire == wire_id)
        {
            Some((_, id)) => id.clone(),
            None => {
                let id = new_call_id();
                self.open_calls.push((wire_id.to_owned(), id.clone()));
                id
            }
        }
    }

    /// Closes the earliest open call under that provider id (calls finish in the order
    /// they started), or gives a call that never streamed its own id.
    fn finished_call(&mut self, wire_id: &str) -> String {
        match self.open_calls.iter().position(|(wire, _)| wire == wire_id) {
            Some(index) => self.open_calls.remove(index).1,
            None => new_call_id(),
        }
    }

    fn origin(&self, name: &str) -> Option<ToolOrigin> {
        self.tools.get(name).and_then(|tool| tool.origin())
    }

    /// Adds a block; the ones before it are complete now.
    fn push(&mut self, block: Block, out: &mut Vec<AgentEvent>) {
        self.report_complete(self.blocks.len(), out);
        self.blocks.push(block);
    }

    fn report_complete(&mut self, up_to: usize, out: &mut Vec<AgentEvent>) {
        while self.reported < up_to {
            if let Some(block) = self.blocks.get(self.reported) {
                out.push(AgentEvent::BlockDone {
                    index: self.reported,
                    block: block.clone(),
                });
            }
            self.reported += 1;
        }
    }

    fn apply(&mut self, event: ProviderEvent) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        self.size.count(&event);
        match event {
            ProviderEvent::TextDelta(text) => {
                let open = self.reported < self.blocks.len();
                match self.blocks.last_mut() {
                    Some(Block::Text { text: last }) if open => last.push_str(&text),
                    _ => self.push(Block::text(text.clone()), &mut out),
                }
                out.push(AgentEvent::TextDelta { text });
            }
            ProviderEvent::ReasoningDelta(text) => {
                let open = self.reported < self.blocks.len();
                match self.blocks.last_mut() {
                    Some(Block::Reasoning {
                        text: last,
                        signature: None,
                        encrypted: None,
                        ..
                    }) if open => last.push_str(&text),
                    _ => {
                        let block = self.reasoning(text.clone());
                        self.push(block, &mut out);
                    }
                }
                out.push(AgentEvent::ReasoningDelta { text });
            }
            ProviderEvent::ReasoningDone {
                signature,
                encrypted,
                id,
            } => {
                let open_reasoning = self.reported < self.blocks.len()
                    && matches!(self.blocks.last(), Some(Block::Reasoning { .. }));
                if !open_reasoning {
                    let block = self.reasoning(String::new());
                    self.push(block, &mut out);
                }
                if let Some(Block::Reasoning {
                    signature: s,
                    encrypted: e,
                    id: i,
                    ..
                }) = self.blocks.last_mut()
                {
                    *s = signature;
                    *e = encrypted;
                    *i = id;
                }
                self.report_complete(self.blocks.len(), &mut out);
            }
            ProviderEvent::ToolCallStarted { id: wire_id, name } => {
                let id = new_call_id();
                self.open_calls.push((wire_id, id.clone()));
                let origin = self.origin(&name);
                out.push(AgentEvent::ToolCallStarted { id, name, origin });
            }
            ProviderEvent::ToolCallDelta {
                id: wire_id,
                arguments,
            } => {
                let id = self.streaming_call(&wire_id);
                out.push(AgentEvent::ToolCallDelta { id, arguments });
            }
            ProviderEvent::ToolCallDone {
                id: wire_id,
                name,
                arguments,
                signature,
            } => {
                let id = self.finished_call(&wire_id);
                let wire_id = unique_wire_id(&mut self.wire_ids, wire_id);
                let origin = self.origin(&name);
                let (arguments, invalid_arguments) = match arguments {
                    Ok(value) => (value, None),
                    Err(invalid) => (Value::Object(Default::default()), Some(invalid.to_string())),
                };
                let call = ToolCall {
                    id,
                    wire_id,
                    name,
                    arguments,
                    signature,
                    invalid_arguments,
                    origin,
                };
                self.push(Block::ToolCall(call.clone()), &mut out);
                self.report_complete(self.blocks.len(), &mut out);
                out.push(AgentEvent::ToolCallReady { call });
            }
            ProviderEvent::Usage(usage) => out.push(AgentEvent::Usage { usage }),
            ProviderEvent::LeftOut(what) => out.push(AgentEvent::LeftOut { what }),
            ProviderEvent::Retrying {
                attempt,
                delay,
                error,
            } => out.push(AgentEvent::Retrying {
                attempt,
                delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                error,
            }),
            ProviderEvent::Stop(_) => {}
        }
        out
    }

    fn reasoning(&self, text: String) -> Block {
        Block::Reasoning {
            text,
            signature: None,
            encrypted: None,
            id: None,
            protocol: Some(self.protocol.to_owned()),
            producer: self.producer.clone(),
        }
    }

    fn finish(self) -> Message {
        Message {
            role: Role::Assistant,
            blocks: self.blocks,
        }
    }
}

#[cfg(test)]
mod tests;
