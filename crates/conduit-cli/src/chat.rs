//! `conduit chat`: one user message, the agent's streamed answer, readable or as JSON Lines.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use conduit_host::Host;
use conduit_host::Protocol;
use conduit_host::chat::{ApprovalMode, Attachment, ChatError, ChatRequest, ProviderChoice};
use conduit_host::core::agent::{AgentEvent, EventSink, Outcome};
use conduit_host::core::content::ResultPart;
use conduit_host::core::provider::ReasoningEffort;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::terminal::tell;
use crate::terminal::{shown, shown_json};
use crate::{EXIT_FAILURE, EXIT_INTERRUPTED, Failure, usage_error};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Kind {
    Anthropic,
    #[value(name = "openai-responses")]
    OpenaiResponses,
    #[value(name = "openai-chat")]
    OpenaiChat,
    Gemini,
}

impl From<Kind> for Protocol {
    fn from(kind: Kind) -> Self {
        match kind {
            Kind::Anthropic => Protocol::Anthropic,
            Kind::OpenaiResponses => Protocol::OpenAiResponses,
            Kind::OpenaiChat => Protocol::OpenAiChat,
            Kind::Gemini => Protocol::Gemini,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Approve {
    /// Run every tool call Settings allow (one set to Never run, or switched off, is
    /// still refused).
    Auto,
    /// Refuse every tool call; the model is told so.
    Deny,
}

/// Which provider and model a run talks to: a saved provider, or one given on the
/// command line (`conduit chat` and `conduit repl` take the same flags).
#[derive(Debug, Args)]
pub struct ProviderArgs {
    /// A provider from settings (see `conduit providers list`); its saved key is used.
    #[arg(long, conflicts_with_all = ["kind", "base_url", "api_key_env"])]
    pub(crate) provider: Option<String>,
    /// The protocol of a provider given on the command line.
    #[arg(long, value_enum, requires = "base_url")]
    kind: Option<Kind>,
    /// The service root, e.g. https://api.anthropic.com or http://localhost:11434/v1.
    #[arg(long, requires = "kind")]
    base_url: Option<String>,
    /// The environment variable holding the API key (with --kind and --base-url; a saved
    /// provider uses its own key).
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// The model; default: the provider's default model.
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Ask the model to think before it answers: low, medium or high (Anthropic's and
    /// Gemini's thinking budget, OpenAI's reasoning effort); default: the model's own.
    #[arg(long, value_name = "LEVEL", value_parser = clap::value_parser!(ReasoningEffort))]
    pub(crate) thinking: Option<ReasoningEffort>,
}

impl ProviderArgs {
    /// The provider these flags name; a usage error when they name none.
    pub(crate) fn choice(&self) -> Result<ProviderChoice, Failure> {
        match (&self.provider, self.kind, &self.base_url) {
            (Some(id), _, _) => Ok(ProviderChoice::Saved(id.clone())),
            (None, Some(kind), Some(base_url)) => Ok(ProviderChoice::Explicit {
                protocol: kind.into(),
                base_url: base_url.clone(),
                api_key_env: self.api_key_env.clone(),
            }),
            _ => Err(usage_error(
                "say which provider to use: --provider ID, or --kind K --base-url URL",
            )),
        }
    }

    /// Where a server's sampling requests run: this provider and model when the provider
    /// is a saved one.
    pub(crate) fn sampling_pick(&self) -> Option<conduit_host::sampling::ModelPick> {
        self.provider
            .as_ref()
            .map(|id| conduit_host::sampling::ModelPick {
                provider: id.clone(),
                model: self.model.clone(),
            })
    }
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    with: ProviderArgs,
    /// Continue a saved conversation (see `conduit sessions list`).
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// An image, a PDF (up to 32 MiB) or a text file (code, notes, CSV, JSON; up to
    /// 512 KiB) to send with the message (repeatable).
    #[arg(long, value_name = "FILE")]
    attach: Vec<PathBuf>,
    /// What to do with tool calls: there is no window to ask in.
    #[arg(long, value_enum, default_value = "deny")]
    approve: Approve,
    /// Model requests in this run at most.
    #[arg(long, default_value_t = conduit_host::core::agent::DEFAULT_MAX_TURNS, value_parser = clap::value_parser!(u32).range(1..))]
    max_turns: u32,
    /// A system prompt.
    #[arg(long)]
    system: Option<String>,
    /// Fail when the provider sends nothing for this many seconds.
    #[arg(long, value_name = "SECONDS")]
    read_timeout: Option<f64>,
    /// Print JSON Lines events instead of text.
    #[arg(long)]
    json: bool,
    /// The message (may be left out when --attach gives a file).
    #[arg(required_unless_present = "attach")]
    prompt: Option<String>,
}

pub async fn run(host: Arc<Host>, args: ChatArgs) -> Result<u8, Failure> {
    let json = args.json;
    let ran = run_turn(host, args).await;
    // A program reading the lines gets its `error` and `done` last also when the command
    // was refused before any turn (bad usage, no provider); not when the output itself
    // failed.
    if json
        && let Err(failure) = &ran
        && failure
            .error
            .downcast_ref::<crate::terminal::OutputFailed>()
            .is_none()
    {
        // As stderr says it: the error and its causes, each once.
        // The same lines a failed turn ends with, its conversation none. (A write that
        // fails here changes nothing: the command fails already, saying why on stderr.)
        let message = serde_json::Value::String(crate::said_once(&failure.error));
        let _ = crate::terminal::say!(
            "{}\n{{\"type\":\"done\",\"outcome\":\"error\",\"conversation\":null}}",
            shown_json(&format!(
                "{{\"type\":\"error\",\"message\":{message},\"error\":null}}"
            ))
        );
    }
    ran
}

async fn run_turn(host: Arc<Host>, args: ChatArgs) -> Result<u8, Failure> {
    let provider = args.with.choice()?;
    let read_timeout = match args.read_timeout {
        Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Some(Duration::from_secs_f64(s)),
        Some(_) => {
            return Err(usage_error(
                "--read-timeout must be a positive number of seconds, at most 86400",
            ));
        }
        None => None,
    };
    // A server's sampling request runs on the chat's own provider and model.
    let sampling_pick = args.with.sampling_pick();
    let request = ChatRequest {
        conversation: args.conversation,
        provider,
        model: args.with.model,
        prompt: args.prompt.unwrap_or_default(),
        attachments: args.attach.into_iter().map(Attachment::File).collect(),
        approval: match args.approve {
            Approve::Auto => ApprovalMode::Auto,
            Approve::Deny => ApprovalMode::Deny,
        },
        max_turns: args.max_turns,
        system: args.system,
        reasoning: args.with.thinking,
        read_timeout,
        resources: Vec::new(),
        prompt_use: None,
        again: false,
        replace_answer: false,
        replace_message: false,
    };

    let printer = Arc::new(Printer {
        json: args.json,
        denying: matches!(args.approve, Approve::Deny),
        host: host.clone(),
        output_failed: std::sync::Mutex::new(None),
        mid_line: std::sync::atomic::AtomicBool::new(false),
        left_out: std::sync::Mutex::default(),
    });
    let sink_printer = printer.clone();
    let sink: EventSink = Arc::new(move |event| sink_printer.event(&event));
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    conduit_host::core::task::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });

    // Servers may take their start timeout: a Ctrl-C meanwhile ends the command before
    // anything is sent or saved (it was taken, then a conversation was made anyway).
    let started = tokio::select! {
        servers = host.start_mcp(crate::ask::TerminalAsker::if_interactive(
            host.clone(),
            sampling_pick,
        )) => Some(servers),
        () = cancel.cancelled() => None,
    };
    let Some(started) = started else {
        printer.error(
            "stopped while the MCP servers started; nothing was sent or saved",
            None,
            None,
        );
        return Ok(EXIT_INTERRUPTED);
    };
    let run = async {
        let servers = started?;
        let turn = host.prepare_turn(request, &servers).await;
        let result = match turn {
            Ok(turn) => turn.run(sink, cancel).await,
            Err(err) => Err(err),
        };
        servers.shutdown().await;
        result
    };
    let code = match run.await {
        Ok(done) => match done.outcome {
            Ok(outcome) => Ok(printer.outcome(&outcome, &done.conversation)),
            Err(err) => {
                printer.error(
                    &err.to_string(),
                    serde_json::to_value(&err).ok(),
                    Some(&done.conversation),
                );
                Ok(EXIT_FAILURE)
            }
        },
        Err(err @ (ChatError::NoModel(_) | ChatError::EmptyMessage)) => {
            Err(usage_error(err.to_string()))
        }
        Err(err) => {
            printer.error(&err.to_string(), None, None);
            Ok(EXIT_FAILURE)
        }
    };
    // The turn ran and was saved; what it printed did not all arrive.
    if let Some(error) = printer.output_failed() {
        return Err(crate::terminal::OutputFailed(error).into());
    }
    code
}

/// Prints the agent's events as text for people or as JSON Lines for programs. The
/// model's text, tool names, arguments and results and providers' errors are outside
/// text: they pass through [`shown`] (JSON through [`shown_json`]) before they print.
struct Printer {
    json: bool,
    /// `--approve deny` (the default): a denied call says how to let tools run.
    denying: bool,
    host: Arc<Host>,
    /// The first write to stdout that failed (a closed pipe, a full disk): the run goes on
    /// (the turn is saved) and the command fails at its end.
    output_failed: std::sync::Mutex<Option<std::io::Error>>,
    /// Whether the text written last ended mid-line: an error then starts a line of its
    /// own, and an answer that never began leaves stdout empty (`> answer.txt`).
    mid_line: std::sync::atomic::AtomicBool,
    /// What the run said did not reach the model: each said once (a tool loop's every
    /// request says it again).
    left_out: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl Printer {
    fn event(&self, event: &AgentEvent) {
        if self.json {
            let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
            if let AgentEvent::ToolResult { result, .. } = event {
                value["images"] = self.stored_images(result.parts.iter());
                value["files"] = self.long_text_files(result.parts.iter());
            }
            self.json_line(&value);
            return;
        }
        match event {
            AgentEvent::TextDelta { text } => {
                // Each piece is shown alone: only a CRLF spans characters, and one split
                // between pieces merely shows its ␍.
                self.write(&shown(text));
            }
            AgentEvent::ToolCallReady { call } => {
                self.write(&format!(
                    "\n→ {} {}\n",
                    shown(&call.name),
                    shown(&call.arguments.to_string())
                ));
            }
            AgentEvent::ToolResult {
                result,
                duration_ms,
            } => {
                let state = if result.is_error { "failed" } else { "done" };
                let mut line = format!("← {} {state} in {duration_ms} ms", shown(&result.name));
                let text = result.text();
                let first = text.lines().next().unwrap_or_default();
                if !first.is_empty() {
                    line.push_str(&format!(": {}", shown(&truncate(first, 120))));
                }
                for media in result.parts.iter().filter_map(ResultPart::media) {
                    line.push_str(&format!(
                        "\n  {} ({} bytes): {}",
                        shown(&media.mime),
                        media.bytes,
                        self.host.media_path(media).display()
                    ));
                }
                line.push('\n');
                self.write(&line);
            }
            AgentEvent::ToolCallDenied { reason, .. } => {
                // Under --approve auto it was Settings that denied it: the flag is no help.
                let hint = if self.denying {
                    " (pass --approve auto to run tools)"
                } else {
                    ""
                };
                tell!("conduit: tool call denied: {}{hint}", shown(reason));
            }
            AgentEvent::Retrying {
                attempt,
                delay_ms,
                error,
            } => {
                tell!(
                    "conduit: {}; retrying in {:.1} s (attempt {attempt})",
                    shown(&error.to_string()),
                    *delay_ms as f64 / 1000.0
                );
            }
            AgentEvent::ContextShortened { fit } => tell!("conduit: {}", fit.describe()),
            // A PDF's name may be a server's.
            AgentEvent::LeftOut { what } => {
                let new = self
                    .left_out
                    .lock()
                    .is_ok_and(|mut said| said.insert(what.clone()));
                if new {
                    tell!("conduit: {}", crate::terminal::shown_line(what))
                }
            }
            _ => {}
        }
    }

    fn stored_images<'a>(&self, parts: impl Iterator<Item = &'a ResultPart>) -> Value {
        let images: Vec<Value> = parts
            .filter_map(|part| match part {
                ResultPart::Image { media } => Some(json!({
                    "path": self.host.media_path(media),
                    "mime": media.mime,
                    "bytes": media.bytes,
                    "width": media.width,
                    "height": media.height,
                })),
                _ => None,
            })
            .collect();
        Value::Array(images)
    }

    /// Where the whole of each long text output is.
    fn long_text_files<'a>(&self, parts: impl Iterator<Item = &'a ResultPart>) -> Value {
        parts
            .filter_map(|part| match part {
                ResultPart::LongText { media, .. } => Some(json!({
                    "path": self.host.media_path(media),
                    "mime": media.mime,
                    "bytes": media.bytes,
                })),
                _ => None,
            })
            .collect()
    }

    fn json_line(&self, value: &Value) {
        let line = serde_json::to_string(value).unwrap_or_default();
        self.write(&format!("{}\n", shown_json(&line)));
    }

    /// Writes to stdout, keeping the first failure; nothing more is written after one.
    fn write(&self, text: &str) {
        let mut failed = self
            .output_failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if failed.is_some() {
            return;
        }
        let mut out = std::io::stdout().lock();
        if let Err(error) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            *failed = Some(error);
        }
        if let Some(last) = text.chars().last() {
            self.mid_line
                .store(last != '\n', std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn output_failed(&self) -> Option<std::io::Error> {
        self.output_failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Prints how the run ended and returns the exit code.
    fn outcome(&self, outcome: &Outcome, conversation: &str) -> u8 {
        let (name, code, message) = match outcome {
            // Said, not failed: the answer so far is what the model gave.
            Outcome::Finished(_) => ("finished", 0, outcome.cut_short()),
            Outcome::TurnLimit => (
                "turn_limit",
                EXIT_FAILURE,
                Some("stopped: the model kept calling tools past --max-turns"),
            ),
            Outcome::Cancelled => (
                "cancelled",
                EXIT_INTERRUPTED,
                Some("stopped by the user; the partial answer was kept"),
            ),
        };
        if self.json {
            self.json_line(&json!({"type": "done", "outcome": name, "conversation": conversation}));
        } else {
            self.write("\n");
            tell!("conduit: conversation {conversation}");
        }
        if let Some(message) = message {
            tell!("conduit: {message}");
        }
        code
    }

    fn error(&self, message: &str, detail: Option<Value>, conversation: Option<&str>) {
        if self.json {
            self.json_line(&json!({"type": "error", "message": message, "error": detail}));
            self.json_line(
                &json!({"type": "done", "outcome": "error", "conversation": conversation}),
            );
        } else if self.mid_line.load(std::sync::atomic::Ordering::Relaxed) {
            self.write("\n");
        }
        tell!("conduit: {}", shown(message));
        if let Some(id) = conversation.filter(|_| !self.json) {
            tell!("conduit: conversation {id}");
        }
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::ChatArgs;

    #[derive(Debug, Parser)]
    struct Chat {
        #[command(flatten)]
        args: ChatArgs,
    }

    #[test]
    fn max_turns_defaults_to_the_one_limit_core_owns() {
        let chat = Chat::try_parse_from(["chat", "hi"]).unwrap();
        assert_eq!(
            chat.args.max_turns,
            conduit_host::core::agent::DEFAULT_MAX_TURNS
        );
        let chat = Chat::try_parse_from(["chat", "--max-turns", "3", "hi"]).unwrap();
        assert_eq!(chat.args.max_turns, 3);
    }
}
