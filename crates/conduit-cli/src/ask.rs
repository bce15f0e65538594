//! A server's questions (elicitation) asked on the terminal: each field prompted with
//! its default, checked, and asked again when wrong; a URL is shown in full and opened
//! only after a yes. A sampling request is shown whole and runs only after a yes, and
//! its result goes back only after another. Without a terminal nothing is offered, so
//! servers do not ask.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use async_trait::async_trait;
use conduit_host::mcp_client::elicit::{
    Asker, Elicitation, ElicitationAnswer, ElicitationKind, ElicitationOffer, FieldInput, FormField,
};
use conduit_host::mcp_client::sampling::{
    SampledMessage, SamplingAnswer, SamplingContent, SamplingRequest,
};
use conduit_host::sampling::{ModelPick, NO_SAMPLING_PROVIDER, Sampler, settle_without_asking};
use serde_json::{Map, Value};

/// Asks on this process's terminal, if it has one.
pub struct TerminalAsker {
    /// One question at a time: two servers asking at once must not interleave.
    lock: tokio::sync::Mutex<()>,
    /// Runs sampling requests (the host), on `pick` or the default provider.
    sampler: Arc<dyn Sampler>,
    pick: Option<ModelPick>,
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
                lock: tokio::sync::Mutex::new(()),
                sampler,
                pick,
            }) as Arc<dyn Asker>
        })
    }

    /// Asks a yes/no question after `shown`, on the terminal, off the async workers.
    async fn confirm(&self, shown: String, prompt: &'static str) -> bool {
        let asked = tokio::task::spawn_blocking(move || {
            let stdin = std::io::stdin();
            let mut input = stdin.lock();
            let mut output = std::io::stderr();
            yes(&shown, prompt, &mut input, &mut output)
        })
        .await;
        match asked {
            Ok(Ok(yes)) => yes,
            Ok(Err(error)) => {
                tracing::warn!(%error, "the terminal could not be asked; rejected");
                false
            }
            Err(error) => {
                tracing::warn!(%error, "asking on the terminal failed; rejected");
                false
            }
        }
    }
}

#[async_trait]
impl Asker for TerminalAsker {
    fn offers(&self) -> ElicitationOffer {
        ElicitationOffer {
            form: true,
            url: true,
        }
    }

    async fn elicit(&self, question: Elicitation) -> ElicitationAnswer {
        let _one_at_a_time = self.lock.lock().await;
        let asked = tokio::task::spawn_blocking(move || {
            let stdin = std::io::stdin();
            let mut input = stdin.lock();
            let mut output = std::io::stderr();
            ask(&question, &mut input, &mut output)
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
        if let Some(answer) =
            settle_without_asking(self.sampler.as_ref(), &request, self.pick.clone()).await
        {
            return answer;
        }
        let Some(pick) = self.pick.clone().or_else(|| self.sampler.default_pick()) else {
            return SamplingAnswer::Failed(NO_SAMPLING_PROVIDER.into());
        };
        let _one_at_a_time = self.lock.lock().await;
        if !self
            .confirm(describe_request(&request, &pick), "Run it? [y/N] ")
            .await
        {
            return SamplingAnswer::Rejected;
        }
        let result = match self.sampler.run_sampling(&request, &pick).await {
            Ok(result) => result,
            Err(error) => return SamplingAnswer::Failed(error),
        };
        if self
            .confirm(describe_result(&result), "Send this to the server? [y/N] ")
            .await
        {
            SamplingAnswer::Sampled(result)
        } else {
            SamplingAnswer::Rejected
        }
    }
}

/// Shows `shown`, asks `prompt`; only a `y` is a yes (the end of input is a no).
pub fn yes(
    shown: &str,
    prompt: &str,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> std::io::Result<bool> {
    write!(output, "{shown}")?;
    Ok(line(input, output, prompt)?.is_some_and(|answer| answer.eq_ignore_ascii_case("y")))
}

/// A sampling request as the terminal shows it: the server, what would run where, the
/// system prompt, every message and the tools offered.
pub fn describe_request(request: &SamplingRequest, pick: &ModelPick) -> String {
    let mut out = format!(
        "\nThe MCP server {:?} asks to run a model (at most {} tokens) on {}{}.\n",
        request.server,
        request.max_tokens,
        pick.provider,
        pick.model
            .as_deref()
            .map(|m| format!(" / {m}"))
            .unwrap_or_default()
    );
    if !request.model_hints.is_empty() {
        out += &format!("It prefers: {}\n", request.model_hints.join(", "));
    }
    if let Some(system) = &request.system_prompt {
        out += &format!("System prompt:\n  {}\n", indent(system));
    }
    for message in &request.messages {
        let role = match message.role {
            conduit_host::mcp_client::sampling::SamplingRole::User => "user",
            conduit_host::mcp_client::sampling::SamplingRole::Assistant => "assistant",
        };
        for content in &message.content {
            out += &format!("[{role}] {}\n", describe_content(content));
        }
    }
    for tool in &request.tools {
        out += &format!(
            "Tool offered: {}{}\n",
            tool.name,
            tool.description
                .as_deref()
                .map(|d| format!(" - {d}"))
                .unwrap_or_default()
        );
    }
    out
}

/// The model's answer as the terminal shows it.
pub fn describe_result(result: &SampledMessage) -> String {
    let mut out = format!("\nThe model {} answered:\n", result.model);
    for content in &result.content {
        out += &format!("  {}\n", describe_content(content));
    }
    out
}

fn describe_content(content: &SamplingContent) -> String {
    match content {
        SamplingContent::Text { text } => indent(text),
        SamplingContent::Image {
            mime_type, bytes, ..
        } => format!("(image, {mime_type}, {bytes} bytes)"),
        SamplingContent::Audio { mime_type, bytes } => {
            format!("(audio, {mime_type}, {bytes} bytes)")
        }
        SamplingContent::ToolUse { name, input, .. } => format!(
            "(asks the server to run {name} with {})",
            serde_json::Value::Object(input.clone())
        ),
        SamplingContent::ToolResult { text, is_error, .. } => format!(
            "({} of a tool) {}",
            if *is_error { "error" } else { "result" },
            indent(text)
        ),
    }
}

fn indent(text: &str) -> String {
    text.replace('\n', "\n  ")
}

/// Asks `question` on `input`/`output`; the end of input cancels.
pub fn ask(
    question: &Elicitation,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> std::io::Result<ElicitationAnswer> {
    writeln!(
        output,
        "\nThe MCP server {:?} asks: {}",
        question.server, question.message
    )?;
    match &question.kind {
        ElicitationKind::Url { url } => {
            writeln!(output, "It wants you to open this page:\n  {url}")?;
            match line(input, output, "Open it in your browser? [y/N/c to cancel] ")? {
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
                            writeln!(output, "{refused}")?;
                            Ok(ElicitationAnswer::Decline)
                        }
                    }
                }
                Some(_) => Ok(ElicitationAnswer::Decline),
            }
        }
        ElicitationKind::Form { fields } => {
            match line(input, output, "Answer? [y/N/c to cancel] ")? {
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

/// One line, trimmed; `None` at the end of input.
fn line(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    prompt: &str,
) -> std::io::Result<Option<String>> {
    write!(output, "{prompt}")?;
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
    let label = field.title.as_deref().unwrap_or(&field.name);
    if let Some(description) = &field.description {
        writeln!(output, "  {description}")?;
    }
    let (hint, default) = describe(&field.input);
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
            Err(why) => writeln!(output, "  {why}")?,
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
            "System prompt:\n  Be brief.",
            "[user] Forecast?",
            "Tool offered: lookup - Looks up",
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
            "\nThe model claude-x answered:\n  Sunny\n"
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
            shown.contains("The MCP server \"github\" asks: Who are you?"),
            "{shown}"
        );
        assert!(shown.contains("type a whole number"), "{shown}");
        assert!(shown.contains("out of range"), "{shown}");
        assert!(shown.contains("not one of the options"), "{shown}");
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
