//! A server's questions (elicitation) asked on the terminal: each field prompted with
//! its default, checked, and asked again when wrong; a URL is shown in full and opened
//! only after a yes. A sampling request is shown whole and runs only after a yes, and
//! its result goes back only after another. Without a terminal nothing is offered, so
//! servers do not ask. Everything a server or model wrote is shown through
//! [`shown`], and each question starts on its own line after a style reset, so that
//! nothing printed before it can hide, rewrite or restyle it.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use async_trait::async_trait;
use conduit_host::asks::{ANSWER_WAIT, WAITING_PER_SERVER};
use conduit_host::mcp_client::elicit::{
    Asker, Elicitation, ElicitationAnswer, ElicitationKind, ElicitationOffer, FieldInput, FormField,
};
use conduit_host::mcp_client::sampling::{
    SampledMessage, SamplingAnswer, SamplingContent, SamplingRequest,
};
use conduit_host::sampling::{
    ModelPick, NO_SAMPLING_PROVIDER, Sampler, SamplingSlots, settle_without_asking,
};
use serde_json::{Map, Value};

use crate::terminal::{RESET, TERMINAL_TURN, quoted, quoted_whole, shown, shown_line};

/// Asks on this process's terminal, if it has one.
pub struct TerminalAsker {
    /// Runs sampling requests (the host), on `pick` or the default provider.
    sampler: Arc<dyn Sampler>,
    pick: Option<ModelPick>,
    /// Each server's sampling requests here now, asked or not.
    sampling_slots: SamplingSlots,
    /// How many of each server's questions are here now (asked, or waiting for the
    /// terminal): past [`WAITING_PER_SERVER`] the next are cancelled unseen, as in the
    /// window, so a server asking in a loop queues no endless prompts.
    waiting: std::sync::Mutex<std::collections::HashMap<String, usize>>,
}

/// A server's question's place among its waiting ones, given back when dropped.
struct WaitingPlace<'a> {
    waiting: &'a std::sync::Mutex<std::collections::HashMap<String, usize>>,
    server: String,
}

impl Drop for WaitingPlace<'_> {
    fn drop(&mut self) {
        let mut waiting = self
            .waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = waiting.get_mut(&self.server) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                waiting.remove(&self.server);
            }
        }
    }
}

impl TerminalAsker {
    /// `None` when stdin or stderr is not a terminal (a pipe, CI): nobody could answer.
    /// Sampling requests run on `pick` (the chat's provider and model) or, without one,
    /// the first provider with a default model.
    pub fn if_interactive(
        sampler: Arc<dyn Sampler>,
        pick: Option<ModelPick>,
    ) -> Option<Arc<dyn Asker>> {
        let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        interactive.then(|| {
            Arc::new(Self {
                sampler,
                pick,
                sampling_slots: SamplingSlots::default(),
                waiting: Default::default(),
            }) as Arc<dyn Asker>
        })
    }

    /// A place for one of `server`'s questions; `None` when it has
    /// [`WAITING_PER_SERVER`] here already.
    fn waiting_place(&self, server: &str) -> Option<WaitingPlace<'_>> {
        let mut waiting = self
            .waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = waiting.entry(server.to_owned()).or_default();
        if *count >= WAITING_PER_SERVER {
            return None;
        }
        *count += 1;
        Some(WaitingPlace {
            waiting: &self.waiting,
            server: server.to_owned(),
        })
    }

    /// Asks a yes/no question after `described`, on the terminal, off the async workers,
    /// in the terminal's `turn` (given back with the answer). The read holds the turn
    /// itself: if the server withdraws its request, the read goes on until a line comes,
    /// and the REPL's line editor waits for it instead of reading beside it.
    async fn confirm(
        &self,
        turn: TerminalTurn,
        described: String,
        prompt: String,
    ) -> (bool, Option<TerminalTurn>) {
        let asked = tokio::task::spawn_blocking(move || {
            let mut output = std::io::stderr();
            let asked = crate::terminal::typed_lines()
                .and_then(|mut input| yes(&described, &prompt, &mut input, &mut output));
            (asked, turn)
        })
        .await;
        let (asked, turn) = match asked {
            Ok((asked, turn)) => (Ok(asked), Some(turn)),
            Err(error) => (Err(error), None),
        };
        let yes = match asked {
            Ok(Ok(yes)) => yes,
            Ok(Err(error)) => {
                tracing::warn!(%error, "the terminal could not be asked; rejected");
                false
            }
            Err(error) => {
                tracing::warn!(%error, "asking on the terminal failed; rejected");
                false
            }
        };
        (yes, turn)
    }
}

/// The terminal's turn held (see [`TERMINAL_TURN`]).
type TerminalTurn = tokio::sync::MutexGuard<'static, ()>;

#[async_trait]
impl Asker for TerminalAsker {
    fn offers(&self) -> ElicitationOffer {
        ElicitationOffer {
            form: true,
            url: true,
        }
    }

    async fn elicit(&self, question: Elicitation) -> ElicitationAnswer {
        let Some(_place) = self.waiting_place(&question.server) else {
            tracing::info!(server = %question.server, "a server's question was cancelled unseen: it has {WAITING_PER_SERVER} waiting already");
            return ElicitationAnswer::Cancel;
        };
        // One question at a time, and never while the REPL reads the terminal; the read
        // holds the turn itself (see `confirm`). One that waits for its turn longer than a
        // question may wait in the window is cancelled unseen.
        let Ok(turn) = tokio::time::timeout(ANSWER_WAIT, TERMINAL_TURN.lock()).await else {
            tracing::info!(server = %question.server, "a server's question waited too long for the terminal and was cancelled unseen");
            return ElicitationAnswer::Cancel;
        };
        let asked = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            let mut output = std::io::stderr();
            crate::terminal::typed_lines()
                .and_then(|mut input| ask(&question, &mut input, &mut output))
        })
        .await;
        match asked {
            Ok(Ok(answer)) => answer,
            Ok(Err(error)) => {
                tracing::warn!(%error, "the terminal could not be asked; declined");
                ElicitationAnswer::Decline
            }
            Err(error) => {
                tracing::warn!(%error, "asking on the terminal failed; declined");
                ElicitationAnswer::Decline
            }
        }
    }

    fn samples(&self) -> bool {
        true
    }

    async fn sample(&self, request: SamplingRequest) -> SamplingAnswer {
        let held = match self.sampling_slots.take(&request.server) {
            Ok(held) => held,
            Err(refused) => return refused,
        };
        if let Some(answer) =
            settle_without_asking(self.sampler.as_ref(), &held, &request, self.pick.clone()).await
        {
            return answer;
        }
        let Some(pick) = self.pick.clone().or_else(|| self.sampler.default_pick()) else {
            return SamplingAnswer::Failed(NO_SAMPLING_PROVIDER.into());
        };
        // One question at a time, and never while the REPL reads the terminal; held
        // from the request's question to its result's. One that waits for its turn
        // longer than a question may wait in the window is rejected unseen, as a
        // question is cancelled (the REPL idle at its prompt holds the terminal).
        let Ok(turn) = tokio::time::timeout(ANSWER_WAIT, TERMINAL_TURN.lock()).await else {
            tracing::info!(server = %request.server, "a sampling request waited too long for the terminal and was rejected unseen");
            return SamplingAnswer::Rejected;
        };
        let (run, turn) = self
            .confirm(
                turn,
                describe_request(&request, &pick),
                format!("Run it for {:?}? [y/N] ", shown_line(&request.server)),
            )
            .await;
        let Some(turn) = turn.filter(|_| run) else {
            return SamplingAnswer::Rejected;
        };
        let result = match self.sampler.run_sampling(&request, &pick).await {
            Ok(result) => result,
            Err(error) => return SamplingAnswer::Failed(error),
        };
        let (send, _turn) = self
            .confirm(
                turn,
                describe_result(&result),
                format!("Send this to {:?}? [y/N] ", shown_line(&request.server)),
            )
            .await;
        if send {
            SamplingAnswer::Sampled(result)
        } else {
            SamplingAnswer::Rejected
        }
    }
}

/// Shows `described` (made by [`describe_request`] or [`describe_result`], its outside
/// text already shown safely), asks `prompt` on a line of its own; only a `y` is a yes
/// (the end of input is a no).
pub fn yes(
    described: &str,
    prompt: &str,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> std::io::Result<bool> {
    let own_line = if described.ends_with('\n') { "" } else { "\n" };
    write!(output, "{RESET}{described}{own_line}")?;
    Ok(line(input, output, prompt)?.is_some_and(|answer| answer.eq_ignore_ascii_case("y")))
}

/// A sampling request as the terminal shows it: the server, what would run where, the
/// system prompt, every message and the tools offered. All of it but the frame is the
/// server's, shown through [`shown`].
pub fn describe_request(request: &SamplingRequest, pick: &ModelPick) -> String {
    let mut out = format!(
        "\nThe MCP server {:?} asks to run a model (at most {} tokens) on {}{}.\n",
        shown(&request.server),
        request.max_tokens,
        shown(&pick.provider),
        pick.model
            .as_deref()
            .map(|m| format!(" / {}", shown(m)))
            .unwrap_or_default()
    );
    if !request.model_hints.is_empty() {
        out += &format!(
            "It prefers: {}\n",
            shown_line(&request.model_hints.join(", "))
        );
    }
    // Every word that goes to the model is shown whole: the user approves it all.
    if let Some(system) = &request.system_prompt {
        out += &format!("System prompt:\n{}", quoted_whole(system));
    }
    for message in &request.messages {
        let role = match message.role {
            conduit_host::mcp_client::sampling::SamplingRole::User => "user",
            conduit_host::mcp_client::sampling::SamplingRole::Assistant => "assistant",
        };
        for content in &message.content {
            out += &format!("[{role}]\n{}", describe_content(content));
        }
    }
    for tool in &request.tools {
        let schema =
            serde_json::to_string_pretty(&tool.input_schema).unwrap_or_else(|e| e.to_string());
        out += &format!(
            "Tool offered: {}\n{}Its input schema, which the model reads too:\n{}",
            shown_line(&tool.name),
            tool.description
                .as_deref()
                .map(quoted_whole)
                .unwrap_or_default(),
            quoted_whole(&schema)
        );
    }
    let characters = conduit_host::core::content::json_size(request);
    out += &format!(
        "In all about {characters} characters go to the model (about {} tokens), besides any images or audio.\n",
        characters.div_ceil(4)
    );
    out
}

/// The model's answer as the terminal shows it (the model's words through [`shown`]).
pub fn describe_result(result: &SampledMessage) -> String {
    let mut out = format!("\nThe model {} answered:\n", shown_line(&result.model));
    for content in &result.content {
        out += &describe_content(content);
    }
    out
}

/// One part of a sampling message, on lines of its own. Text is shown whole (the user
/// approves every word that goes to the model), behind the gutter.
fn describe_content(content: &SamplingContent) -> String {
    match content {
        SamplingContent::Text { text } => quoted_whole(text),
        SamplingContent::Image {
            mime_type, bytes, ..
        } => format!("  (image, {}, {bytes} bytes)\n", shown_line(mime_type)),
        SamplingContent::Audio { mime_type, bytes } => {
            format!("  (audio, {}, {bytes} bytes)\n", shown_line(mime_type))
        }
        SamplingContent::ToolUse { name, input, .. } => format!(
            "  (asks the server to run {} with {})\n",
            shown_line(name),
            shown(&serde_json::Value::Object(input.clone()).to_string())
        ),
        SamplingContent::ToolResult { text, is_error, .. } => format!(
            "  ({} of a tool)\n{}",
            if *is_error { "error" } else { "result" },
            quoted_whole(text)
        ),
    }
}

/// Asks `question` on `input`/`output`; the end of input cancels.
pub fn ask(
    question: &Elicitation,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> std::io::Result<ElicitationAnswer> {
    let server = shown_line(&question.server);
    write!(
        output,
        "{RESET}\nThe MCP server {server:?} asks:\n{}",
        quoted(&question.message)
    )?;
    match &question.kind {
        ElicitationKind::Url { url } => {
            writeln!(
                output,
                "It wants you to open this page:\n  {}",
                shown_line(url)
            )?;
            if let Some(host) = conduit_host::where_it_opens(url) {
                writeln!(output, "It opens {}.", shown_line(&host))?;
            }
            let prompt = format!("Open {server:?}'s page in your browser? [y/N/c to cancel] ");
            match line(input, output, &prompt)? {
                None => Ok(ElicitationAnswer::Cancel),
                Some(answer) if answer.eq_ignore_ascii_case("c") => Ok(ElicitationAnswer::Cancel),
                Some(answer) if answer.eq_ignore_ascii_case("y") => {
                    // The host's link policy decides what may open, here as in the window.
                    match conduit_host::external_url(url) {
                        Ok(url) => {
                            if let Err(error) = open::that_detached(url) {
                                writeln!(
                                    output,
                                    "Could not open the browser ({error}); open the page yourself."
                                )?;
                            }
                            Ok(ElicitationAnswer::Accept(Map::new()))
                        }
                        Err(refused) => {
                            writeln!(output, "{}", shown(&refused))?;
                            Ok(ElicitationAnswer::Decline)
                        }
                    }
                }
                Some(_) => Ok(ElicitationAnswer::Decline),
            }
        }
        ElicitationKind::Form { fields } => {
            match line(
                input,
                output,
                &format!("Answer {server:?}? [y/N/c to cancel] "),
            )? {
                None => return Ok(ElicitationAnswer::Cancel),
                Some(answer) if answer.eq_ignore_ascii_case("c") => {
                    return Ok(ElicitationAnswer::Cancel);
                }
                Some(answer) if !answer.eq_ignore_ascii_case("y") => {
                    return Ok(ElicitationAnswer::Decline);
                }
                Some(_) => {}
            }
            let mut values = Map::new();
            for field in fields {
                match field_value(field, input, output)? {
                    Asked::Value(Some(value)) => {
                        values.insert(field.name.clone(), value);
                    }
                    Asked::Value(None) => {}
                    Asked::Ended => return Ok(ElicitationAnswer::Cancel),
                }
            }
            Ok(ElicitationAnswer::Accept(values))
        }
    }
}

enum Asked {
    Value(Option<Value>),
    Ended,
}

/// One line, trimmed; `None` at the end of input. The prompt comes after a style reset
/// (the callers start it on a line of its own).
fn line(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    prompt: &str,
) -> std::io::Result<Option<String>> {
    write!(output, "{RESET}{prompt}")?;
    output.flush()?;
    let mut text = String::new();
    if input.read_line(&mut text)? == 0 {
        return Ok(None);
    }
    Ok(Some(text.trim().to_owned()))
}

/// Asks one field until its answer fits; an empty line takes the default (or leaves an
/// optional field out).
fn field_value(
    field: &FormField,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> std::io::Result<Asked> {
    let label = shown_line(field.title.as_deref().unwrap_or(&field.name));
    if let Some(description) = &field.description {
        write!(output, "{}", quoted(description))?;
    }
    let (hint, default) = describe(&field.input);
    let hint = shown_line(&hint);
    let required = if field.required { " (required)" } else { "" };
    loop {
        let Some(text) = line(input, output, &format!("{label}{required}{hint}: "))? else {
            return Ok(Asked::Ended);
        };
        let value = if text.is_empty() {
            match &default {
                Some(value) => Ok(value.clone()),
                None if !field.required => return Ok(Asked::Value(None)),
                None => Err("an answer is needed".to_owned()),
            }
        } else {
            parse(&field.input, &text)
        };
        let checked = value.and_then(|value| {
            let one = Map::from_iter([(field.name.clone(), value.clone())]);
            conduit_host::mcp_client::elicit::check(std::slice::from_ref(field), &one)
                .map(|()| value)
        });
        match checked {
            Ok(value) => return Ok(Asked::Value(Some(value))),
            // The reason can quote the server's options and limits.
            Err(why) => writeln!(output, "  {}", shown(&why))?,
        }
    }
}

/// The prompt's hint (options, default) and the default's value.
fn describe(input: &FieldInput) -> (String, Option<Value>) {
    let titled = |options: &[conduit_host::mcp_client::elicit::ChoiceOption]| {
        options
            .iter()
            .map(|o| match &o.title {
                Some(title) => format!("{} = {title}", o.value),
                None => o.value.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    match input {
        FieldInput::Text {
            default, format, ..
        } => {
            let format = format
                .as_ref()
                .map(|f| format!(" ({f})"))
                .unwrap_or_default();
            let shown = default
                .as_ref()
                .map(|d| format!(" [{d}]"))
                .unwrap_or_default();
            (
                format!("{format}{shown}"),
                default.clone().map(Value::String),
            )
        }
        FieldInput::Number {
            default, integer, ..
        } => (
            default.map(|d| format!(" [{d}]")).unwrap_or_default(),
            default.map(|d| {
                if *integer {
                    Value::from(d as i64)
                } else {
                    Value::from(d)
                }
            }),
        ),
        FieldInput::Boolean { default } => (
            match default {
                Some(true) => " [Y/n]".to_owned(),
                Some(false) => " [y/N]".to_owned(),
                None => " [y/n]".to_owned(),
            },
            default.map(Value::Bool),
        ),
        FieldInput::Choice { options, default } => (
            format!(
                " ({}){}",
                titled(options),
                default
                    .as_ref()
                    .map(|d| format!(" [{d}]"))
                    .unwrap_or_default()
            ),
            default.clone().map(Value::String),
        ),
        FieldInput::Choices {
            options, default, ..
        } => (
            format!(
                " (comma-separated: {}){}",
                titled(options),
                if default.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", default.join(","))
                }
            ),
            (!default.is_empty())
                .then(|| Value::Array(default.iter().cloned().map(Value::String).collect())),
        ),
    }
}

/// A typed line as the field's value.
fn parse(input: &FieldInput, text: &str) -> Result<Value, String> {
    match input {
        FieldInput::Text { .. } | FieldInput::Choice { .. } => Ok(Value::String(text.to_owned())),
        FieldInput::Number { integer: true, .. } => text
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| "type a whole number".to_owned()),
        FieldInput::Number { .. } => text
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .map(Value::from)
            .ok_or_else(|| "type a number".to_owned()),
        FieldInput::Boolean { .. } => match text.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Value::Bool(true)),
            "n" | "no" | "false" => Ok(Value::Bool(false)),
            _ => Err("type y or n".to_owned()),
        },
        FieldInput::Choices { .. } => Ok(Value::Array(
            text.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_owned()))
                .collect(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conduit_host::mcp_client::elicit::form_fields;
    use serde_json::json;

    fn question(schema: Value) -> Elicitation {
        Elicitation {
            server: "github".into(),
            message: "Who are you?".into(),
            kind: ElicitationKind::Form {
                fields: form_fields(&schema).unwrap(),
            },
        }
    }

    fn run(question: &Elicitation, typed: &str) -> (ElicitationAnswer, String) {
        let mut input = std::io::Cursor::new(typed.as_bytes().to_vec());
        let mut output = Vec::new();
        let answer = ask(question, &mut input, &mut output).unwrap();
        (answer, String::from_utf8(output).unwrap())
    }

    /// A server asking in a loop has at most three questions here; the next are
    /// cancelled unseen, and a place comes back when one is answered.
    #[test]
    fn a_server_has_at_most_three_questions_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let host =
            conduit_host::Host::new(conduit_host::Paths::under_home(dir.path().to_owned(), None));
        let asker = TerminalAsker {
            sampler: Arc::new(host),
            pick: None,
            sampling_slots: SamplingSlots::default(),
            waiting: Default::default(),
        };
        let places: Vec<_> = (0..WAITING_PER_SERVER)
            .map(|_| asker.waiting_place("flood").unwrap())
            .collect();
        assert!(asker.waiting_place("flood").is_none());
        assert!(asker.waiting_place("other").is_some(), "each server apart");
        drop(places);
        assert!(asker.waiting_place("flood").is_some());
    }

    #[test]
    fn a_sampling_request_is_shown_whole_and_only_y_runs_it() {
        let request = SamplingRequest::from_wire(
            "weather",
            &json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Forecast?"}}],
                    "systemPrompt": "Be brief.", "maxTokens": 40,
                    "modelPreferences": {"hints": [{"name": "claude"}]},
                    "tools": [{"name": "lookup", "description": "Looks up", "inputSchema": {"type": "object"}}]}),
        )
        .unwrap();
        let pick = ModelPick {
            provider: "anthropic".into(),
            model: Some("claude-x".into()),
        };
        let shown = describe_request(&request, &pick);
        for part in [
            "\"weather\" asks to run a model (at most 40 tokens) on anthropic / claude-x",
            "It prefers: claude",
            "System prompt:\n  │ Be brief.\n",
            "[user]\n  │ Forecast?\n",
            "Tool offered: lookup\n  │ Looks up\n",
        ] {
            assert!(shown.contains(part), "{part:?} in {shown}");
        }
        for (typed, expected) in [
            ("y\n", true),
            ("Y\n", true),
            ("\n", false),
            ("yes please\n", false),
            ("", false),
        ] {
            let mut input = std::io::Cursor::new(typed.as_bytes().to_vec());
            let mut output = Vec::new();
            assert_eq!(
                yes(&shown, "Run it? [y/N] ", &mut input, &mut output).unwrap(),
                expected,
                "{typed:?}"
            );
        }
        let result = SampledMessage {
            model: "claude-x".into(),
            content: vec![SamplingContent::Text {
                text: "Sunny".into(),
            }],
            stop_reason: conduit_host::mcp_client::sampling::SamplingStop::EndTurn,
        };
        assert_eq!(
            describe_result(&result),
            "\nThe model claude-x answered:\n  │ Sunny\n"
        );
    }

    #[test]
    fn a_form_is_filled_in_with_defaults_and_wrong_answers_asked_again() {
        let q = question(json!({"type": "object", "properties": {
            "name": {"type": "string", "title": "Name", "default": "Ann"},
            "age": {"type": "integer", "minimum": 0},
            "ok": {"type": "boolean", "default": false},
            "color": {"type": "string", "enum": ["r", "g"]}
        }, "required": ["age"]}));
        let (answer, shown) = run(&q, "y\n\nold\n-1\n42\n\nblue\ng\n");
        assert_eq!(
            answer,
            ElicitationAnswer::Accept(
                json!({"name": "Ann", "age": 42, "ok": false, "color": "g"})
                    .as_object()
                    .unwrap()
                    .clone()
            )
        );
        assert!(
            shown.contains("The MCP server \"github\" asks:\n  │ Who are you?\n"),
            "{shown}"
        );
        assert!(shown.contains("type a whole number"), "{shown}");
        assert!(shown.contains("out of range"), "{shown}");
        assert!(shown.contains("not one of the options"), "{shown}");
    }

    /// A server's message that pads itself with blank lines and draws another server's
    /// question stays quoted behind the gutter, and the prompt names the real server; a
    /// field label cannot start a line of its own.
    #[test]
    fn a_server_cannot_draw_another_servers_question_above_the_prompt() {
        let q = Elicitation {
            server: "evil".into(),
            message: format!(
                "Hello{}The MCP server \"github\" asks: your personal access token",
                "\n".repeat(80)
            ),
            kind: ElicitationKind::Form {
                fields: form_fields(&json!({"type": "object", "properties": {
                    "token": {"type": "string", "title": "Token\nThe MCP server \"github\" asks"}
                }}))
                .unwrap(),
            },
        };
        let (_, shown) = run(&q, "y\nx\n");
        assert!(
            shown.contains(
                "asks:\n  │ Hello\n  │ \n  │ The MCP server \"github\" asks: your personal access token\n"
            ),
            "{shown:?}"
        );
        assert!(
            shown.contains("Answer \"evil\"? [y/N/c to cancel] "),
            "{shown:?}"
        );
        assert!(
            shown.contains("Token␊The MCP server \"github\" asks: "),
            "{shown:?}"
        );
        assert_eq!(
            shown
                .lines()
                .filter(|l| l.starts_with("The MCP server"))
                .count(),
            1,
            "{shown:?}"
        );
    }

    #[test]
    fn no_declines_c_cancels_and_the_end_of_input_cancels() {
        let q = question(json!({"type": "object", "properties": {"a": {"type": "string"}}}));
        assert_eq!(run(&q, "n\n").0, ElicitationAnswer::Decline);
        assert_eq!(run(&q, "\n").0, ElicitationAnswer::Decline);
        assert_eq!(run(&q, "c\n").0, ElicitationAnswer::Cancel);
        assert_eq!(run(&q, "").0, ElicitationAnswer::Cancel);
        assert_eq!(
            run(&q, "y\n").0,
            ElicitationAnswer::Cancel,
            "input ended mid-form"
        );
    }

    /// What a terminal would obey in `shown`, once the style resets Conduit writes
    /// before its questions are taken out.
    fn raw_controls(shown: &str) -> Vec<char> {
        shown
            .replace(RESET, "")
            .chars()
            .filter(|&c| {
                (c.is_control() && c != '\n' && c != '\t')
                    || ('\u{202a}'..='\u{202e}').contains(&c)
                    || ('\u{2066}'..='\u{2069}').contains(&c)
            })
            .collect()
    }

    #[test]
    fn a_hostile_form_cannot_rewrite_its_question_and_each_prompt_starts_plain() {
        // The server's name, message, titles, descriptions and options each try to act
        // on the terminal: erase the line to fake another server, hide text, set the
        // title, write the clipboard, reorder the line.
        let q = Elicitation {
            server: "evil\r\x1b[2Kgithub".into(),
            message: "Who are you?\x1b[8m".into(),
            kind: ElicitationKind::Form {
                fields: form_fields(&json!({"type": "object", "properties": {
                    "name": {"type": "string", "title": "Name\x1b]0;pwned\x07",
                             "description": "Your\u{202e}eman\x1b]52;c;eA==\x07"},
                    "size": {"type": "string", "oneOf": [
                        {"const": "s", "title": "Small\x1b[1A"},
                        {"const": "l\u{9b}", "title": "Large"}]}
                }}))
                .unwrap(),
            },
        };
        let (answer, shown) = run(&q, "y\nAnn\nxl\ns\n");
        assert!(matches!(answer, ElicitationAnswer::Accept(_)), "{answer:?}");
        assert_eq!(raw_controls(&shown), Vec::<char>::new(), "{shown:?}");
        assert!(
            shown.starts_with(
                "\x1b[0m\nThe MCP server \"evil␍␛[2Kgithub\" asks:\n  │ Who are you?␛[8m\n"
            ),
            "{shown:?}"
        );
        assert!(shown.contains("Your<U+202E>eman␛]52;c;eA==␇"), "{shown:?}");
        // Every prompt comes after a reset, at the start of a line.
        for prompt in [
            "\n\x1b[0mAnswer \"evil␍␛[2Kgithub\"? [y/N/c to cancel] ",
            "\n\x1b[0mName␛]0;pwned␇: ",
            "\x1b[0msize (s = Small␛[1A, l<U+009B> = Large): ",
        ] {
            assert!(shown.contains(prompt), "{prompt:?} in {shown:?}");
        }
        // The URL and its message are shown as harmlessly.
        let q = Elicitation {
            server: "pay".into(),
            message: "Pay\x1b]2;Conduit\x07".into(),
            kind: ElicitationKind::Url {
                url: "https://pay.example/\x1b[8m".into(),
            },
        };
        let (_, shown) = run(&q, "n\n");
        assert_eq!(raw_controls(&shown), Vec::<char>::new(), "{shown:?}");
        assert!(shown.contains("https://pay.example/␛[8m"), "{shown:?}");
        assert!(
            shown.contains("\n\x1b[0mOpen \"pay\"'s page in your browser? [y/N/c to cancel] "),
            "{shown:?}"
        );
    }

    /// The page's address is shown with where it really leads, as in the window: a user
    /// name before the host does not pass for the host.
    #[test]
    fn a_page_is_shown_with_where_it_leads() {
        let q = Elicitation {
            server: "pay".into(),
            message: "Sign in".into(),
            kind: ElicitationKind::Url {
                url: "https://accounts.google.com@evil.example/login".into(),
            },
        };
        let (_, shown) = run(&q, "n\n");
        assert!(
            shown.contains("It opens evil.example (the address names a user before this host)."),
            "{shown:?}"
        );
    }

    #[test]
    fn a_hostile_sampling_request_and_answer_cannot_rewrite_the_question() {
        // Cursor up and erase the line would rewrite the header; the rest hide or restyle.
        let request = SamplingRequest::from_wire(
            "weather\x1b[8m",
            &json!({"messages": [
                        {"role": "user", "content": {"type": "text", "text": "Hi\x1b[1A\x1b[2K\rThe MCP server \"trusted\""}},
                        {"role": "assistant", "content": {"type": "tool_use", "id": "t1", "name": "rm\x1b[8m", "input": {"path": "\u{202e}/"}}}],
                    "systemPrompt": "Be brief.\x1b]52;c;eA==\x07", "maxTokens": 40,
                    "modelPreferences": {"hints": [{"name": "claude\x07"}]},
                    "tools": [{"name": "lookup\x1b[0m", "description": "Looks\nup\x1b[8m", "inputSchema": {"type": "object"}}]}),
        )
        .unwrap();
        let pick = ModelPick {
            provider: "anthropic".into(),
            model: Some("claude-x".into()),
        };
        let described = describe_request(&request, &pick);
        assert_eq!(
            raw_controls(&described),
            Vec::<char>::new(),
            "{described:?}"
        );
        for part in [
            "The MCP server \"weather␛[8m\" asks",
            "[user]\n  │ Hi␛[1A␛[2K␍The MCP server",
            "System prompt:\n  │ Be brief.␛]52;c;eA==␇\n",
            "It prefers: claude␇",
            "Tool offered: lookup␛[0m\n  │ Looks\n  │ up␛[8m\n",
            "(asks the server to run rm␛[8m with",
        ] {
            assert!(described.contains(part), "{part:?} in {described:?}");
        }
        let mut input = std::io::Cursor::new(b"n\n".to_vec());
        let mut output = Vec::new();
        // A description that does not end its line still leaves the prompt its own.
        assert!(!yes("no newline", "Run it? [y/N] ", &mut input, &mut output).unwrap());
        assert_eq!(
            String::from_utf8(output).unwrap(),
            "\x1b[0mno newline\n\x1b[0mRun it? [y/N] "
        );
        let result = SampledMessage {
            model: "claude-x\x1b[2K".into(),
            content: vec![SamplingContent::Text {
                text: "Sunny\u{9d}0;t\u{9c}".into(),
            }],
            stop_reason: conduit_host::mcp_client::sampling::SamplingStop::EndTurn,
        };
        assert_eq!(
            describe_result(&result),
            "\nThe model claude-x␛[2K answered:\n  │ Sunny<U+009D>0;t<U+009C>\n"
        );
    }

    #[test]
    fn a_url_is_shown_whole_and_declined_unless_the_user_says_yes() {
        let q = Elicitation {
            server: "pay".into(),
            message: "Confirm the payment".into(),
            kind: ElicitationKind::Url {
                url: "https://pay.example/confirm?id=7".into(),
            },
        };
        let (answer, shown) = run(&q, "n\n");
        assert_eq!(answer, ElicitationAnswer::Decline);
        assert!(
            shown.contains("https://pay.example/confirm?id=7"),
            "{shown}"
        );
        assert_eq!(run(&q, "c\n").0, ElicitationAnswer::Cancel);
        // A page the link policy refuses is not opened, even after a yes.
        let hostile = Elicitation {
            kind: ElicitationKind::Url {
                url: "file:///etc/passwd".into(),
            },
            ..q
        };
        let (answer, shown) = run(&hostile, "y\n");
        assert_eq!(answer, ElicitationAnswer::Decline);
        assert!(shown.contains("only web links"), "{shown}");
    }
}
