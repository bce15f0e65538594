//! `conduit repl`: a conversation on the terminal. Each message is a turn through the
//! same host path as `conduit chat` and the window (saved as it streams); tool calls are
//! asked about inline through the window's approval policy; lines are edited with
//! rustyline, with a history file.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use conduit_host::Host;
use conduit_host::approval::{Decision, WindowApproval};
use conduit_host::chat::{ApprovalMode, Attachment, ChatError, ChatRequest, ProviderChoice};
use conduit_host::core::agent::{AgentEvent, EventSink, Outcome, StandingAllow};
use conduit_host::core::content::{Block, ResultPart, Role, ToolCall};
use conduit_host::mcp_client::runtime::McpRuntime;
use rustyline::error::ReadlineError;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::chat::ProviderArgs;
use crate::terminal::tell;
use crate::terminal::{OutputFailed, RESET, quoted, say, shown, shown_line};
use crate::{Failure, usage_error};
use conduit_host::core::provider::ReasoningEffort;

#[derive(Debug, Args)]
pub struct ReplArgs {
    /// The provider and model (`/model` changes the model).
    #[command(flatten)]
    with: ProviderArgs,
    /// Continue a saved conversation (see `conduit sessions list`).
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// Model requests per message at most.
    #[arg(long, default_value_t = conduit_host::core::agent::DEFAULT_MAX_TURNS, value_parser = clap::value_parser!(u32).range(1..))]
    max_turns: u32,
    /// A system prompt.
    #[arg(long)]
    system: Option<String>,
    /// What to do with tool calls: ask at the terminal under Settings' per-tool policy
    /// (the window's way), run every call Settings allow, or refuse every call.
    #[arg(long, value_enum, default_value = "ask")]
    approve: ReplApprove,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ReplApprove {
    /// Ask about each call that Settings do not already allow or refuse.
    Ask,
    /// Run every tool call Settings do not refuse, without asking: tools set to Ask and
    /// tools changed since you allowed them too (one set to Never run, or switched off,
    /// is still refused).
    Auto,
    /// Refuse every tool call; the model is told so.
    Deny,
}

const HELP: &str = "\
Commands:
  /model [NAME]       show the model, or use NAME from the next message on
  /thinking [LEVEL]   show how much the model is asked to think, or ask for
                      low, medium, high or default from the next message on
  /tools              the tools the model is offered
  /new                start a new conversation
  /history            this conversation's messages
  /attach PATH        send an image, a PDF or a text file with your next message
  /exit               leave (Ctrl-D does too)
Ctrl-C stops an answer and keeps what it said so far; at the prompt it leaves.";

/// What one read of the terminal gave.
enum Read {
    Line(String),
    /// Ctrl-C.
    Interrupted,
    /// Ctrl-D, or the input ended.
    Eof,
}

/// The line editor on its own thread (rustyline blocks), asked for one line at a time:
/// the prompt and the approval questions share it, so they share its history and its
/// terminal state.
struct Terminal {
    requests: std::sync::mpsc::Sender<LineRequest>,
}

/// The terminal's turn held (see [`crate::terminal::TERMINAL_TURN`]).
type TerminalTurn = tokio::sync::MutexGuard<'static, ()>;

/// A prompt, whether the line goes into the history, and where the read goes.
type LineRequest = (String, bool, oneshot::Sender<Result<Read, ReadlineError>>);

impl Terminal {
    fn start(history_file: PathBuf) -> Result<Self, Failure> {
        let mut editor = rustyline::DefaultEditor::new()?;
        // No history file yet is the usual first run.
        let _ = editor.load_history(&history_file);
        let (requests, incoming) = std::sync::mpsc::channel::<LineRequest>();
        std::thread::Builder::new()
            .name("repl-terminal".into())
            .spawn(move || {
                while let Ok((prompt, remember, reply)) = incoming.recv() {
                    let read = match editor.readline(&prompt) {
                        Ok(line) => {
                            if remember && !line.trim().is_empty() {
                                let _ = editor.add_history_entry(line.as_str());
                                if let Err(err) = save_history(&mut editor, &history_file) {
                                    tracing::warn!(error = %err, "cannot save the REPL history");
                                }
                            }
                            Ok(Read::Line(line))
                        }
                        Err(ReadlineError::Interrupted) => Ok(Read::Interrupted),
                        Err(ReadlineError::Eof) => Ok(Read::Eof),
                        Err(err) => Err(err),
                    };
                    let _ = reply.send(read);
                }
            })?;
        Ok(Self { requests })
    }

    /// Reads one line; `remember` puts it in the history. Waits for a server's question
    /// on the terminal to be answered first (see [`crate::terminal::TERMINAL_TURN`]).
    async fn read(&self, prompt: &str, remember: bool) -> Result<Read, Failure> {
        let turn = crate::terminal::TERMINAL_TURN.lock().await;
        self.read_in_turn(&turn, prompt, remember).await
    }

    /// [`Self::read`] for a caller that holds the terminal's turn (and printed what the
    /// question is about within it).
    async fn read_in_turn(
        &self,
        _turn: &TerminalTurn,
        prompt: &str,
        remember: bool,
    ) -> Result<Read, Failure> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send((prompt.to_owned(), remember, reply))
            .map_err(|_| anyhow::anyhow!("the terminal reader stopped"))?;
        let read = answer
            .await
            .map_err(|_| anyhow::anyhow!("the terminal reader stopped"))?;
        read.map_err(|err| match err {
            // The line editor shows what is typed on stdout, which was closed.
            ReadlineError::Io(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {
                OutputFailed(err).into()
            }
            err => anyhow::anyhow!("cannot read the terminal: {err}").into(),
        })
    }
}

/// Saves the history readable by the user alone (prompts can be private).
fn save_history(
    editor: &mut rustyline::DefaultEditor,
    file: &std::path::Path,
) -> Result<(), ReadlineError> {
    editor.save_history(file)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

/// The session: which provider and model, which conversation, what goes with the next
/// message.
struct Session {
    host: Arc<Host>,
    servers: McpRuntime,
    terminal: Terminal,
    provider: ProviderChoice,
    model: Option<String>,
    conversation: Option<String>,
    attachments: Vec<PathBuf>,
    system: Option<String>,
    reasoning: Option<ReasoningEffort>,
    max_turns: u32,
    approve: ReplApprove,
}

pub async fn run(host: Arc<Host>, args: ReplArgs) -> Result<u8, Failure> {
    let provider = args.with.choice()?;
    if let ProviderChoice::Saved(id) = &provider {
        host.check_provider(id, args.with.model.as_deref())
            .map_err(|err| usage_error(err.to_string()))?;
    }
    if let Some(id) = &args.conversation {
        host.conversation(id, Some(1))?;
    }
    // Stops the answer in flight; installed before anything runs, so a Ctrl-C during a
    // turn never kills the process and loses the answer.
    let mut interrupts = Interrupts::listen();
    // A server's sampling request runs on the session's provider and model.
    let sampling_pick = args.with.sampling_pick();
    // Servers may take their start timeout (30 s, more for a slow `npx`): a Ctrl-C
    // meanwhile ends the REPL there, as at the prompt, rather than being dropped.
    let servers = tokio::select! {
        servers = host.start_mcp(crate::ask::TerminalAsker::if_interactive(
            host.clone(),
            sampling_pick,
        )) => servers?,
        () = interrupts.next() => {
            tell!("conduit: stopped while the MCP servers started");
            return Ok(crate::EXIT_INTERRUPTED);
        }
    };
    let terminal = Terminal::start(host.info().paths.data_dir.join("repl_history"))?;
    let mut session = Session {
        host,
        servers,
        terminal,
        provider,
        model: args.with.model,
        conversation: args.conversation,
        attachments: Vec::new(),
        system: args.system,
        reasoning: args.with.thinking,
        max_turns: args.max_turns,
        approve: args.approve,
    };
    say!("Conduit REPL. /help for commands, Ctrl-D to leave.")?;
    if let Some(id) = &session.conversation {
        say!("Continuing conversation {id}.")?;
    }
    let result = session.run(interrupts).await;
    session.servers.shutdown().await;
    if let Some(id) = &session.conversation {
        tell!("conduit: conversation {id}");
    }
    result
}

impl Session {
    async fn run(&mut self, mut interrupts: Interrupts) -> Result<u8, Failure> {
        loop {
            let line = match self.terminal.read("> ", true).await? {
                Read::Line(line) => line,
                Read::Interrupted | Read::Eof => return Ok(0),
            };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if let Some(command) = line.strip_prefix('/') {
                if !self.command(command).await? {
                    return Ok(0);
                }
                continue;
            }
            self.turn(line, &mut interrupts).await?;
        }
    }

    /// Runs a slash command; `false` means leave.
    async fn command(&mut self, command: &str) -> Result<bool, Failure> {
        let (name, rest) = command
            .split_once(char::is_whitespace)
            .map_or((command, ""), |(n, r)| (n, r.trim()));
        match name {
            "exit" | "quit" => return Ok(false),
            "help" => say!("{HELP}")?,
            "new" => {
                self.conversation = None;
                self.attachments.clear();
                say!("New conversation.")?;
            }
            "model" if rest.is_empty() => match &self.model {
                Some(model) => say!("Model: {model}")?,
                None => say!("Model: the provider's default")?,
            },
            "model" => {
                self.model = Some(rest.to_owned());
                say!("Model: {rest} (from the next message on)")?;
            }
            "thinking" if rest.is_empty() => say!(
                "Thinking: {}",
                self.reasoning
                    .map_or("the model's default", ReasoningEffort::as_str)
            )?,
            "thinking" if rest == "default" => {
                self.reasoning = None;
                say!("Thinking: the model's default (from the next message on)")?;
            }
            "thinking" => match rest.parse::<ReasoningEffort>() {
                Ok(level) => {
                    self.reasoning = Some(level);
                    say!("Thinking: {} (from the next message on)", level.as_str())?;
                }
                Err(error) => say!("{}; or default", shown(&error))?,
            },
            "tools" => match self.host.offered_tools(&self.servers) {
                Ok(tools) if tools.is_empty() => say!("No tools are offered.")?,
                Ok(tools) => {
                    for tool in tools {
                        let about = tool.description.lines().next().unwrap_or_default();
                        say!("  {:<32} {}", shown(&tool.name), shown(about))?;
                    }
                }
                Err(err) => tell!("conduit: {}", shown(&err.to_string())),
            },
            "history" => self.history()?,
            "attach" if rest.is_empty() => say!("Usage: /attach PATH")?,
            "attach" => {
                let path = PathBuf::from(rest);
                match std::fs::metadata(&path) {
                    Ok(meta) if meta.is_file() => {
                        say!("Attached {} (sent with your next message).", path.display())?;
                        self.attachments.push(path);
                    }
                    Ok(_) => tell!("conduit: {} is not a file", path.display()),
                    Err(err) => tell!("conduit: cannot attach {}: {err}", path.display()),
                }
            }
            other => say!("Unknown command /{other}. /help lists them.")?,
        }
        Ok(true)
    }

    fn history(&self) -> Result<(), Failure> {
        let Some(id) = &self.conversation else {
            say!("Nothing yet: this conversation starts with your next message.")?;
            return Ok(());
        };
        let (conversation, messages) = self.host.conversation(id, None)?;
        // Everything saved is outside text: titles and answers were written by models,
        // results by tools.
        say!("# {} ({id})", shown(&conversation.title))?;
        for message in messages {
            let who = match message.role {
                Role::User => "you",
                Role::Assistant => "model",
                Role::Tool => "tools",
            };
            // Replaced in the window (an answer written again, a message changed): said
            // so, as the model no longer reads it.
            let who = if message.status == conduit_host::store::MessageStatus::Replaced {
                format!("{who} (replaced)")
            } else {
                who.to_owned()
            };
            for block in &message.blocks {
                match block {
                    Block::Text { text } => say!("{who}: {}", shown(text))?,
                    Block::Image { media } => say!("{who}: [image {}]", shown(&media.mime))?,
                    Block::File { name, text } => {
                        say!("{who}: [{}]", crate::terminal::file_note(name, text))?
                    }
                    Block::Document { name, media } => say!(
                        "{who}: [{}]",
                        crate::terminal::document_note(name, media.bytes)
                    )?,
                    Block::Reasoning { .. } => {}
                    Block::ToolCall(call) => say!(
                        "{who}: → {} {}",
                        shown(&call.name),
                        shown(&call.arguments.to_string())
                    )?,
                    Block::ToolResult(result) => {
                        let state = if result.is_error { "failed" } else { "done" };
                        say!(
                            "{who}: ← {} {state}: {}",
                            shown(&result.name),
                            shown(&first_line(&result.text()))
                        )?;
                    }
                }
            }
            if let Some(error) = &message.error {
                say!("{who}: (error) {}", shown(error))?;
            }
        }
        Ok(())
    }

    /// Sends one message and shows the answer as it streams, asking about tool calls.
    async fn turn(&mut self, prompt: &str, interrupts: &mut Interrupts) -> Result<(), Failure> {
        let (sender, mut events) = mpsc::unbounded_channel();
        let sink: EventSink = Arc::new(move |event| {
            let _ = sender.send(event);
        });
        let request = ChatRequest {
            conversation: self.conversation.clone(),
            provider: self.provider.clone(),
            model: self.model.clone(),
            prompt: prompt.to_owned(),
            attachments: self
                .attachments
                .iter()
                .cloned()
                .map(Attachment::File)
                .collect(),
            approval: match self.approve {
                ReplApprove::Ask => ApprovalMode::Window(sink.clone()),
                ReplApprove::Auto => ApprovalMode::Auto,
                ReplApprove::Deny => ApprovalMode::Deny,
            },
            max_turns: self.max_turns,
            system: self.system.clone(),
            reasoning: self.reasoning,
            read_timeout: None,
            resources: Vec::new(),
            prompt_use: None,
            again: false,
            replace_answer: false,
            replace_message: false,
        };
        let turn = match self.host.prepare_turn(request, &self.servers).await {
            Ok(turn) => turn,
            // Nothing was sent or saved: say why and keep the session. An image that
            // cannot be sent is dropped, or every later message would fail on it.
            Err(err) => {
                tell!("conduit: {}", shown(&err.to_string()));
                if matches!(err, ChatError::Attachment { .. }) && !self.attachments.is_empty() {
                    self.attachments.clear();
                    tell!("conduit: the attached files were dropped; /attach again to send one");
                }
                return Ok(());
            }
        };
        self.attachments.clear();
        self.conversation = Some(turn.conversation().to_owned());
        let approval = turn.window_approval();
        let cancel = CancellationToken::new();
        let mut running = tokio::spawn(turn.run(sink, cancel.clone()));
        let mut printer = Printer::default();
        interrupts.clear();
        let result = loop {
            tokio::select! {
                Some(event) = events.recv() => {
                    // An approval is printed and read in one turn of the terminal: printed
                    // under a server's question still waiting, its details would invite a
                    // key meant for the approval into that question.
                    let turn = match &event {
                        AgentEvent::ApprovalRequested { .. } => {
                            Some(crate::terminal::TERMINAL_TURN.lock().await)
                        }
                        _ => None,
                    };
                    let mut printed = printer.event(&event).map_err(Failure::from);
                    if let (Ok(()), AgentEvent::ApprovalRequested { call, .. }, Some(turn)) =
                        (&printed, &event, turn)
                    {
                        printed = self.ask(call, approval.as_deref(), &cancel, turn).await;
                    }
                    // The terminal cannot show the turn (its output was closed): it stops,
                    // saved as interrupted, and the REPL ends.
                    if let Err(failure) = printed {
                        cancel.cancel();
                        if let Err(err) = running.await {
                            tracing::warn!(error = %err, "the stopped turn failed");
                        }
                        return Err(failure);
                    }
                }
                () = interrupts.next() => {
                    cancel.cancel();
                }
                done = &mut running => break done,
            }
        };
        while let Ok(event) = events.try_recv() {
            printer.event(&event)?;
        }
        printer.end_line()?;
        match result {
            Ok(Ok(done)) => match done.outcome {
                Ok(finished @ Outcome::Finished(_)) => {
                    if let Some(short) = finished.cut_short() {
                        say!("({short})")?
                    }
                }
                Ok(Outcome::Cancelled) => say!("(stopped; the answer so far was kept)")?,
                Ok(Outcome::TurnLimit) => {
                    say!("(stopped: the model kept calling tools past the turn limit)")?
                }
                Err(err) => tell!("conduit: {}", shown(&err.to_string())),
            },
            Ok(Err(err)) => tell!("conduit: {}", shown(&err.to_string())),
            Err(err) => tell!("conduit: the turn failed: {err}"),
        }
        Ok(())
    }

    /// Asks on the terminal whether `call` may run, and answers through the approval
    /// policy (an "always" is saved there). Ctrl-C denies it and stops the turn.
    async fn ask(
        &self,
        call: &ToolCall,
        approval: Option<&WindowApproval>,
        cancel: &CancellationToken,
        turn: TerminalTurn,
    ) -> Result<(), Failure> {
        let Some(approval) = approval else {
            return Ok(());
        };
        // A call answered before its question came up (an "in this [c]onversation"
        // answer covers its tool's other calls waiting then) is not asked about: the
        // agent says which allow let it (`ToolCallAllowed`).
        if !approval.waiting().contains(&call.id) {
            return Ok(());
        }
        // Only a person at the terminal answers: lines piped in (`printf … | conduit
        // repl`) are messages, never an approval, and never an "always" saved for good.
        if !std::io::stdin().is_terminal() {
            say!("  denied: a tool call is allowed only by an answer typed at a terminal")?;
            if let Err(err) = approval.answer(&call.id, Decision::Deny) {
                tell!("conduit: {}", shown(&err.to_string()));
            }
            return Ok(());
        }
        // An always for a tool the server's views may call covers their calls in the
        // window too (the allow is bound to who may call it): said before it is given.
        let views_too = approval
            .waiting_tool(&call.id)
            .is_some_and(|tool| tool.now.views == Some(true));
        if views_too {
            say!(
                "  its server's views (MCP App pages in the window) may call it too: [a]lways lets their calls run unasked as well"
            )?;
        }
        // The question names the call again: whatever a server printed above it, this
        // line is Conduit's.
        let prompt = format!(
            "  {}: allow [o]nce, in this [c]onversation, [a]lways, or [d]eny? ",
            shown_line(&call.name)
        );
        // Once, before the question is first shown: an answer typed after "Answer o, c,
        // a or d." is the user's.
        crate::terminal::forget_typed_ahead();
        let decision = loop {
            reset_style();
            let read = self.terminal.read_in_turn(&turn, &prompt, false).await?;
            match read {
                Read::Line(answer) => match answer.trim().to_ascii_lowercase().as_str() {
                    "o" | "once" | "y" | "yes" => break Decision::AllowOnce,
                    "c" | "conversation" => break Decision::AllowInConversation,
                    "a" | "always" => break Decision::AlwaysAllow,
                    "d" | "deny" | "n" | "no" => break Decision::Deny,
                    _ => say!("  Answer o, c, a or d.")?,
                },
                Read::Interrupted => {
                    cancel.cancel();
                    break Decision::Deny;
                }
                Read::Eof => break Decision::Deny,
            }
        };
        if let Err(err) = approval.answer(&call.id, decision) {
            tell!("conduit: {}", shown(&err.to_string()));
        }
        Ok(())
    }
}

/// Ctrl-C while a turn runs (at the prompt the line editor reads it as a key).
struct Interrupts {
    received: mpsc::UnboundedReceiver<()>,
}

impl Interrupts {
    fn listen() -> Self {
        let (sender, received) = mpsc::unbounded_channel();
        conduit_host::core::task::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                if sender.send(()).is_err() {
                    break;
                }
            }
        });
        Self { received }
    }

    /// Forgets interrupts from before this turn.
    fn clear(&mut self) {
        while self.received.try_recv().is_ok() {}
    }

    async fn next(&mut self) {
        if self.received.recv().await.is_none() {
            std::future::pending::<()>().await;
        }
    }
}

/// Resets colours and styles before a question, so that nothing printed before it can
/// hide or restyle it; on a terminal only, where there is a style to reset.
fn reset_style() {
    let mut out = std::io::stdout().lock();
    if out.is_terminal() {
        let _ = out.write_all(RESET.as_bytes());
        let _ = out.flush();
    }
}

/// Shows a turn's events on the terminal. The model's text, tool names, arguments and
/// results, servers' names and providers' errors are outside text: they pass through
/// [`shown`] before they print.
#[derive(Default)]
struct Printer {
    /// The cursor is after answer text (not at a line start).
    mid_line: bool,
    /// The last progress message printed: a server that repeats it (with each step of
    /// its count) is not printed again.
    last_progress: Option<String>,
    /// What the turn said did not reach the model: each said once (a tool loop's every
    /// request says it again).
    left_out: std::collections::HashSet<String>,
}

impl Printer {
    fn event(&mut self, event: &AgentEvent) -> Result<(), OutputFailed> {
        match event {
            AgentEvent::TextDelta { text } => {
                // Each piece is shown alone: only a CRLF spans characters, and one split
                // between pieces merely shows its ␍.
                let mut out = std::io::stdout().lock();
                out.write_all(shown(text).as_bytes())
                    .and_then(|()| out.flush())
                    .map_err(OutputFailed)?;
                self.mid_line = !text.ends_with('\n');
            }
            AgentEvent::ToolCallReady { call } => {
                self.end_line()?;
                say!(
                    "→ {} {}",
                    shown(&call.name),
                    shown(&call.arguments.to_string())
                )?;
            }
            AgentEvent::ApprovalRequested {
                call,
                origin,
                changes,
                description,
                ..
            } => {
                // The question starts on its own line, in the terminal's plain style.
                self.end_line()?;
                reset_style();
                let what = match origin {
                    Some(origin) => format!(
                        "{} of server {}",
                        shown_line(&origin.tool),
                        shown_line(&origin.server)
                    ),
                    None => shown_line(&call.name),
                };
                say!(
                    "? {what} wants to run with {}",
                    shown(&call.arguments.to_string())
                )?;
                for change in changes {
                    say!("  changed since you allowed it: {}", shown_line(change))?;
                }
                // What an allow now would be bound to, read before answering: the first
                // time too ("always" pins it; a description may carry instructions to
                // the model).
                if !description.is_empty() {
                    let quoted = quoted(description);
                    let now = if changes.is_empty() { "" } else { " now" };
                    say!(
                        "  it says of itself{now}:\n{}",
                        quoted.trim_end_matches('\n')
                    )?;
                }
            }
            AgentEvent::ToolCallQueued { id: _ } | AgentEvent::ToolCallRunning { id: _ } => {}
            // What a running call says it is doing ("Waiting for you to finish in your
            // browser"), each new message once; a bare count is not printed.
            AgentEvent::ToolProgress { progress, .. } => {
                let Some(message) = progress.message.as_deref().map(str::trim) else {
                    return Ok(());
                };
                if message.is_empty() || self.last_progress.as_deref() == Some(message) {
                    return Ok(());
                }
                self.last_progress = Some(message.to_owned());
                self.end_line()?;
                say!("  … {}", shown(&first_line(message)))?;
            }
            AgentEvent::ToolCallDenied { reason, .. } => {
                self.end_line()?;
                say!("✗ denied: {}", shown(reason))?;
            }
            AgentEvent::ToolCallAllowed { by, .. } => {
                self.end_line()?;
                let by = match by {
                    StandingAllow::Settings => "always allowed in Settings",
                    StandingAllow::Conversation => "allowed in this conversation",
                    StandingAllow::Auto => "--approve auto",
                };
                say!("  ✓ runs without asking: {by}")?;
            }
            AgentEvent::ToolResult {
                result,
                duration_ms,
            } => {
                self.end_line()?;
                let state = if result.is_error { "failed" } else { "done" };
                let text = result.text();
                let first = first_line(&text);
                let mut line = format!("← {} {state} in {duration_ms} ms", shown(&result.name));
                if !first.is_empty() {
                    line.push_str(": ");
                    line.push_str(&shown(&first));
                }
                let images = result
                    .parts
                    .iter()
                    .filter(|p| matches!(p, ResultPart::Image { .. }))
                    .count();
                if images > 0 {
                    line.push_str(&format!(" (+{images} image(s))"));
                }
                say!("{line}")?;
            }
            AgentEvent::Retrying {
                attempt,
                delay_ms,
                error,
            } => {
                self.end_line()?;
                tell!(
                    "conduit: {}; retrying in {:.1} s (attempt {attempt})",
                    shown(&error.to_string()),
                    *delay_ms as f64 / 1000.0
                );
            }
            AgentEvent::ContextShortened { fit } => {
                self.end_line()?;
                tell!("conduit: {}", fit.describe());
            }
            // A PDF's name may be a server's.
            AgentEvent::LeftOut { what } if self.left_out.insert(what.clone()) => {
                self.end_line()?;
                tell!("conduit: {}", shown_line(what));
            }
            _ => {}
        }
        Ok(())
    }

    fn end_line(&mut self) -> Result<(), OutputFailed> {
        if self.mid_line {
            say!()?;
            self.mid_line = false;
        }
        Ok(())
    }
}

/// The first line of `text`, at most 120 characters.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() <= 120 {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(120).collect();
    cut.push('…');
    cut
}
