//! The text-call parser at every split point, and the wrapper over a scripted provider:
//! text mode, the fall-back on a refusal, and what goes back to the model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use conduit_core::agent::MAX_RESPONSE_BYTES;
use conduit_core::content::{Block, MediaRef, Message, ResultPart, Role, ToolCall, ToolResult};
use conduit_core::provider::{
    ModelCapabilities, ModelRequest, Provider, ProviderError, ProviderErrorKind, ProviderEvent,
    StopReason,
};
use conduit_core::testing::{ScriptedProvider, tool_spec};
use futures::StreamExt;
use serde_json::json;

use super::parser::{CallParser, Parsed, TextCall};
use super::prompt::text_history;
use super::{TextTools, ToolMode, ToolModeMemory};

/// Feeds `pieces` and joins what comes out: the shown text, and the calls.
fn parse(pieces: &[&str]) -> (String, Vec<Parsed>) {
    let mut parser = CallParser::new();
    let mut out = Vec::new();
    for piece in pieces {
        out.extend(parser.push(piece));
    }
    out.extend(parser.finish());
    let text = out
        .iter()
        .filter_map(|p| match p {
            Parsed::Text(t) => Some(t.as_str()),
            Parsed::Call(_) => None,
        })
        .collect();
    let calls = out
        .into_iter()
        .filter(|p| matches!(p, Parsed::Call(_)))
        .collect();
    (text, calls)
}

fn ok_call(name: &str, arguments: serde_json::Value) -> Parsed {
    Parsed::Call(Ok(TextCall {
        name: name.into(),
        arguments,
    }))
}

/// Every way to cut `text` in two and in three pieces gives the same result as whole,
/// and no piece of call text is ever shown.
fn same_at_every_split(text: &str, shown: &str, calls: &[Parsed]) {
    let whole = parse(&[text]);
    assert_eq!(whole.0, shown, "whole");
    assert_eq!(whole.1, calls, "whole");
    let bounds: Vec<usize> = (0..=text.len())
        .filter(|i| text.is_char_boundary(*i))
        .collect();
    for &a in &bounds {
        let got = parse(&[&text[..a], &text[a..]]);
        assert_eq!(got.0, shown, "split at {a}");
        assert_eq!(got.1, calls, "split at {a}");
        for &b in bounds.iter().filter(|b| **b >= a).step_by(3) {
            let got = parse(&[&text[..a], &text[a..b], &text[b..]]);
            assert_eq!(got.0, shown, "split at {a} and {b}");
            assert_eq!(got.1, calls, "split at {a} and {b}");
        }
    }
    // One character at a time, as the slowest stream sends it.
    let chars: Vec<String> = text.chars().map(String::from).collect();
    let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
    let got = parse(&pieces);
    assert_eq!(got.0, shown, "char by char");
    assert_eq!(got.1, calls, "char by char");
}

#[test]
fn an_xml_call_is_read_at_every_split_point_and_never_shown() {
    same_at_every_split(
        "Let me look. <tool_call><name>echo</name><arguments>{\"text\": \"a <b> }\"}</arguments></tool_call>",
        "Let me look. ",
        &[ok_call("echo", json!({"text": "a <b> }"}))],
    );
}

#[test]
fn a_json_call_on_its_own_line_is_read_at_every_split_point() {
    same_at_every_split(
        "Checking é…\n{\"name\": \"echo\", \"arguments\": {\"text\": \"}{\\\"\"}}\nDone.",
        "Checking é…\n\nDone.",
        &[ok_call("echo", json!({"text": "}{\""}))],
    );
}

#[test]
fn json_inside_the_xml_tags_and_several_calls_in_one_answer() {
    same_at_every_split(
        "<tool_call>{\"name\": \"a\", \"parameters\": {\"x\": 1}}</tool_call>\n<tool_call><name>b</name></tool_call>",
        "\n",
        &[ok_call("a", json!({"x": 1})), ok_call("b", json!({}))],
    );
}

#[test]
fn text_that_only_looks_like_a_call_start_is_shown_whole() {
    for text in [
        "a < b and <tool> and <tool_cal",
        "x {\"name\": \"not at a line start\"}",
        "{\"name\": \"Bob\", \"age\": 3}\nJSON that is not a call",
        "{ \"other\": 1 }",
        "{",
        "<",
    ] {
        same_at_every_split(text, text, &[]);
    }
}

/// A `{` followed by a flood of whitespace, streamed in small pieces, is the answer's
/// text once the whitespace runs past a call's indent: it is not looked at again from the
/// brace for every piece (32 MiB of spaces took hours of a core). A call after a newline
/// and an indent is still a call.
#[test]
fn a_brace_followed_by_endless_space_is_text_and_an_indented_call_is_a_call() {
    let mut pieces = vec!["{".to_owned()];
    pieces.extend(std::iter::repeat_n(" ".repeat(64), 20_000));
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let (text, calls) = parse(&refs);
    assert!(calls.is_empty());
    assert_eq!(text.len(), 1 + 64 * 20_000);
    same_at_every_split(
        "{\n    \"name\": \"echo\", \"arguments\": {}}",
        "",
        &[ok_call("echo", json!({}))],
    );
}

/// Arguments of too many JSON values are counted before they are parsed, in each form a
/// text call takes, and the call fails instead of building them.
#[test]
fn text_call_arguments_of_too_many_values_are_refused_unparsed() {
    let many = format!(
        "[{}0]",
        "0,".repeat(conduit_core::agent::MAX_RESPONSE_VALUES)
    );
    for text in [
        format!("<tool_call><name>x</name><arguments>{{\"a\": {many}}}</arguments></tool_call>"),
        format!("{{\"name\": \"x\", \"arguments\": {{\"a\": {many}}}}}"),
        format!(
            "{{\"name\": \"x\", \"arguments\": {}}}",
            serde_json::to_string(&format!("{{\"a\": {many}}}")).unwrap()
        ),
    ] {
        let (_, calls) = parse(&[&text]);
        let [Parsed::Call(Err(malformed))] = calls.as_slice() else {
            panic!("{calls:?}")
        };
        assert!(
            malformed.error.contains("more than 250000 JSON values"),
            "{}",
            malformed.error
        );
    }
}

#[test]
fn malformed_calls_are_calls_that_fail_and_never_text() {
    let cases = [
        (
            "<tool_call><name>echo</name><arguments>{\"text\": }</arguments></tool_call>",
            Some("echo"),
            "not valid JSON",
        ),
        (
            "<tool_call><arguments>{}</arguments></tool_call>",
            None,
            "no <name>",
        ),
        (
            "<tool_call><name>echo</name><arguments>[1]</arguments></tool_call>",
            Some("echo"),
            "JSON object",
        ),
        (
            "<tool_call><name>echo</name><arguments>{}</tool_call>",
            Some("echo"),
            "not closed",
        ),
        // Half-written when the answer ended: never run.
        (
            "<tool_call><name>echo</name><arguments>{\"text\": \"hi\"}</arguments>",
            Some("echo"),
            "ended before",
        ),
        (
            "{\"name\": \"echo\", \"arguments\": {\"text\"",
            None,
            "ended before",
        ),
        (
            "{\"name\": \"echo\" \"arguments\": {}}",
            None,
            "not valid JSON",
        ),
    ];
    for (text, name, error) in cases {
        let (shown, calls) = parse(&[text]);
        assert_eq!(shown, "", "{text}");
        let [Parsed::Call(Err(malformed))] = calls.as_slice() else {
            panic!("{text}: {calls:?}");
        };
        assert_eq!(malformed.name.as_deref(), name, "{text}");
        assert!(
            malformed.error.contains(error),
            "{text}: {}",
            malformed.error
        );
        assert!(!malformed.raw.is_empty());
    }
}

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        model: "small".into(),
        system: Some("Be brief.".into()),
        messages,
        tools: vec![tool_spec("echo")],
        max_output_tokens: None,
        capabilities: ModelCapabilities::default(),
        reasoning: None,
    }
}

/// Every item of a turn's stream for "hi", errors included.
async fn items_of(provider: &Arc<dyn Provider>) -> Vec<Result<ProviderEvent, ProviderError>> {
    provider
        .stream(request(vec![Message::user_text("hi")]))
        .await
        .unwrap()
        .collect()
        .await
}

async fn collect(provider: &Arc<dyn Provider>, request: ModelRequest) -> Vec<ProviderEvent> {
    let stream = provider.stream(request).await.unwrap();
    stream.map(|item| item.unwrap()).collect().await
}

fn refusal() -> ProviderError {
    let mut err = ProviderError::new(
        ProviderErrorKind::ToolsUnsupported,
        "registry.ollama.ai/library/gemma:2b does not support tools",
    );
    err.status = Some(400);
    err
}

#[tokio::test]
async fn auto_mode_answers_a_refusal_with_text_mode_and_remembers_the_model() {
    let scripted = ScriptedProvider::new(vec![
        vec![Err(refusal())],
        vec![
            Ok(ProviderEvent::TextDelta("Sure. <tool".into())),
            Ok(ProviderEvent::TextDelta(
                "_call><name>echo</name><arguments>{\"text\":\"hi\"}</arguments></tool_call>"
                    .into(),
            )),
            Ok(ProviderEvent::Stop(StopReason::EndTurn)),
        ],
        vec![
            Ok(ProviderEvent::TextDelta("again".into())),
            Ok(ProviderEvent::Stop(StopReason::EndTurn)),
        ],
    ]);
    let memory = ToolModeMemory::new();
    let provider = TextTools::wrap(scripted.clone(), ToolMode::Auto, memory.clone(), "ollama");
    let events = collect(&provider, request(vec![Message::user_text("hi")])).await;
    assert_eq!(events[0], ProviderEvent::TextDelta("Sure. ".into()));
    assert!(matches!(
        &events[1],
        ProviderEvent::ToolCallStarted { id, name } if id.starts_with("call_") && name == "echo"
    ));
    assert!(matches!(
        &events[2],
        ProviderEvent::ToolCallDone { name, arguments: Ok(args), .. }
            if name == "echo" && *args == json!({"text": "hi"})
    ));
    assert_eq!(events[3], ProviderEvent::Stop(StopReason::ToolUse));
    assert!(memory.refused("ollama\nsmall"));

    // The next request goes to text mode at once: no second refusal is needed.
    collect(&provider, request(vec![Message::user_text("more")])).await;
    let sent = scripted.requests();
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0].tools.len(), 1, "native first");
    for text_request in &sent[1..] {
        assert!(text_request.tools.is_empty());
        let system = text_request.system.as_deref().unwrap();
        assert!(system.starts_with("Be brief.\n\n# Tools"), "{system}");
        assert!(system.contains("<name>echo</name>"), "{system}");
        assert!(
            system.contains("<tool_call><name>TOOL_NAME</name>"),
            "{system}"
        );
    }
}

#[tokio::test]
async fn native_mode_shows_the_refusal_and_other_errors_are_not_a_refusal() {
    let scripted = ScriptedProvider::new(vec![vec![Err(refusal())]]);
    let provider = TextTools::wrap(
        scripted.clone(),
        ToolMode::Native,
        ToolModeMemory::new(),
        "p",
    );
    let mut stream = provider
        .stream(request(vec![Message::user_text("hi")]))
        .await
        .unwrap();
    let err = stream.next().await.unwrap().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::ToolsUnsupported);
    assert!(err.to_string().contains("toolMode"), "{err}");

    let other = ProviderError::new(ProviderErrorKind::InvalidRequest, "bad");
    let scripted = ScriptedProvider::new(vec![vec![Err(other.clone())]]);
    let memory = ToolModeMemory::new();
    let provider = TextTools::wrap(scripted.clone(), ToolMode::Auto, memory.clone(), "p");
    let mut stream = provider
        .stream(request(vec![Message::user_text("hi")]))
        .await
        .unwrap();
    assert_eq!(stream.next().await.unwrap().unwrap_err(), other);
    assert!(!memory.refused("p\nsmall"));
    assert_eq!(scripted.requests().len(), 1);
}

#[test]
fn a_refusal_is_classified_once_where_status_errors_are() {
    let body = json!({"error": {"message": "registry.ollama.ai/library/gemma:2b does not support tools", "type": "api_error"}});
    let err = crate::http::status_error(400, &body.to_string(), None);
    assert_eq!(err.kind, ProviderErrorKind::ToolsUnsupported);
    let ollama_native = json!({"error": "gemma:2b does not support tools"});
    let err = crate::http::status_error(400, &ollama_native.to_string(), None);
    assert_eq!(err.kind, ProviderErrorKind::ToolsUnsupported);
    let err = crate::http::status_error(400, "{\"error\": \"bad image\"}", None);
    assert_eq!(err.kind, ProviderErrorKind::InvalidRequest);
    let err = crate::http::status_error(500, "does not support tools", None);
    assert_eq!(err.kind, ProviderErrorKind::Server);
}

fn image(hash: &str) -> MediaRef {
    MediaRef {
        hash: hash.into(),
        mime: "image/png".into(),
        bytes: 10,
        width: Some(4),
        height: Some(3),
    }
}

#[test]
fn calls_and_results_go_back_as_text_with_images_attached_or_described() {
    let call = ToolCall {
        id: "call_1".into(),
        wire_id: Some("text_call_1".into()),
        name: "shot".into(),
        arguments: json!({"x": 1}),
        signature: None,
        invalid_arguments: None,
        origin: None,
    };
    let history = vec![
        Message::user_text("take a shot"),
        Message {
            role: Role::Assistant,
            blocks: vec![Block::text("Taking it."), Block::ToolCall(call.clone())],
        },
        Message {
            role: Role::Tool,
            blocks: vec![Block::ToolResult(ToolResult {
                call_id: "call_1".into(),
                wire_id: Some("text_call_1".into()),
                name: "shot".into(),
                is_error: false,
                parts: vec![
                    ResultPart::Text {
                        text: "here".into(),
                    },
                    ResultPart::Image { media: image("aa") },
                ],
            })],
        },
        Message::user_text("thanks"),
    ];
    let with_vision = text_history(&history, true);
    assert_eq!(
        with_vision.len(),
        3,
        "results and the next message are one user turn"
    );
    assert_eq!(
        with_vision[1].blocks,
        vec![Block::text(
            "Taking it.\n<tool_call><name>shot</name><arguments>{\"x\":1}</arguments></tool_call>"
        )]
    );
    assert_eq!(with_vision[2].role, Role::User);
    let Block::Text { text } = &with_vision[2].blocks[0] else {
        panic!()
    };
    assert!(
        text.starts_with("<tool_result name=\"shot\">\nhere"),
        "{text}"
    );
    assert!(text.ends_with("</tool_result>"), "{text}");
    assert_eq!(
        with_vision[2].blocks[1],
        Block::Image { media: image("aa") }
    );
    assert_eq!(with_vision[2].blocks[2], Block::text("thanks"));

    let without = text_history(&history, false);
    assert!(
        without[2]
            .blocks
            .iter()
            .all(|b| !matches!(b, Block::Image { .. }))
    );
    let Block::Text { text } = &without[2].blocks[0] else {
        panic!()
    };
    assert!(
        text.contains("an image (image/png, 4×3) that this model cannot be shown"),
        "{text}"
    );
}

#[tokio::test]
async fn a_failure_mid_call_runs_nothing_and_an_answer_without_a_stop_keeps_its_text() {
    let failure = ProviderError::new(ProviderErrorKind::Stream, "overloaded mid-answer");
    let scripted = ScriptedProvider::new(vec![
        vec![
            Ok(ProviderEvent::TextDelta(
                "Hi <tool_call><name>echo</name>".into(),
            )),
            Err(failure.clone()),
        ],
        vec![Ok(ProviderEvent::TextDelta("Plain <tool".into()))],
    ]);
    let provider = TextTools::wrap(scripted, ToolMode::Text, ToolModeMemory::new(), "p");
    let items = items_of(&provider).await;
    assert_eq!(
        items,
        vec![Ok(ProviderEvent::TextDelta("Hi ".into())), Err(failure)]
    );
    // No stop reason: the held text is given out when the stream ends.
    let events = collect(&provider, request(vec![Message::user_text("hi")])).await;
    assert_eq!(
        events,
        vec![
            ProviderEvent::TextDelta("Plain ".into()),
            ProviderEvent::TextDelta("<tool".into())
        ]
    );
}

#[tokio::test]
async fn a_call_that_never_closes_ends_at_the_response_cap() {
    // 33 pieces of 1 MiB after an opened call: the reader holds them all, unseen by
    // the core's count, until the cap here stops the answer.
    let piece = "x".repeat(1024 * 1024);
    let mut script = vec![Ok(ProviderEvent::TextDelta(
        "<tool_call><name>echo</name><arguments>".into(),
    ))];
    script.extend(
        (0..MAX_RESPONSE_BYTES / piece.len() + 1)
            .map(|_| Ok(ProviderEvent::TextDelta(piece.clone()))),
    );
    script.push(Ok(ProviderEvent::Stop(StopReason::EndTurn)));
    let provider = TextTools::wrap(
        ScriptedProvider::new(vec![script]),
        ToolMode::Text,
        ToolModeMemory::new(),
        "p",
    );
    let items = items_of(&provider).await;
    let [Err(err)] = items.as_slice() else {
        panic!("{} items", items.len());
    };
    assert_eq!(err.kind, ProviderErrorKind::Protocol);
    assert_eq!(
        err.message,
        "the model's response is larger than 32 MiB of text; Conduit stopped the answer"
    );
}
