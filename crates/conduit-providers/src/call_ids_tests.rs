//! Every protocol sends the provider's own call id (`wire_id`) back, never Conduit's, in a
//! form the protocol takes.

use conduit_core::content::{Block, Message, ResultPart, Role, ToolCall, ToolResult};
use conduit_core::provider::{ModelCapabilities, ModelRequest};
use serde_json::{Value, json};

use crate::images::PreparedImages;

fn request(wire_id: Option<&str>) -> ModelRequest {
    let call = ToolCall {
        id: "call_conduit_own".into(),
        wire_id: wire_id.map(str::to_owned),
        name: "fs__read_file".into(),
        arguments: json!({"path": "notes.txt"}),
        signature: None,
        invalid_arguments: None,
        origin: None,
    };
    ModelRequest {
        model: "m".into(),
        system: None,
        messages: vec![
            Message::user_text("read it"),
            Message {
                role: Role::Assistant,
                blocks: vec![Block::ToolCall(call.clone())],
            },
            Message {
                role: Role::Tool,
                blocks: vec![Block::ToolResult(ToolResult {
                    call_id: call.id.clone(),
                    wire_id: call.wire_id.clone(),
                    name: call.name.clone(),
                    is_error: false,
                    parts: vec![ResultPart::Text {
                        text: "hello".into(),
                    }],
                })],
            },
        ],
        tools: vec![],
        max_output_tokens: None,
        capabilities: ModelCapabilities::default(),
        reasoning: None,
    }
}

fn bodies(request: &ModelRequest) -> Vec<(&'static str, Value)> {
    let images = PreparedImages::new();
    vec![
        (
            "anthropic",
            crate::anthropic::build_request(request, &images),
        ),
        (
            "openai-responses",
            crate::openai_responses::build_request(request, &images),
        ),
        (
            "openai-chat",
            crate::openai_chat::build_request(request, &images),
        ),
        ("gemini", crate::gemini::build_request(request, &images)),
    ]
}

#[test]
fn the_provider_gets_its_own_call_id_back_and_never_conduits() {
    for (protocol, body) in bodies(&request(Some("toolu_wire_1"))) {
        let text = body.to_string();
        assert_eq!(
            text.matches("toolu_wire_1").count(),
            2,
            "{protocol}: the call and its result carry the provider's id: {text}"
        );
        assert!(!text.contains("call_conduit_own"), "{protocol}: {text}");
    }
}

#[test]
fn a_conversation_saved_before_wire_ids_sends_its_stored_id() {
    for (protocol, body) in bodies(&request(None)) {
        let text = body.to_string();
        assert_eq!(
            text.matches("call_conduit_own").count(),
            2,
            "{protocol}: {text}"
        );
    }
}

/// A conversation moved from another provider carries ids this protocol refuses: each is
/// sent as `call_` and a hash of it, the call and its result alike, where it breaks the
/// rules (Anthropic: word characters only; OpenAI: at most 40); an id that fits goes as
/// it is.
#[test]
fn an_id_another_provider_made_is_sent_in_a_form_this_one_takes() {
    let kimi = "functions.fs__read_file:0";
    let vllm = "chatcmpl-tool-0123456789abcdef0123456789abcdef";
    for (protocol, body) in bodies(&request(Some(kimi))) {
        let text = body.to_string();
        match protocol {
            "anthropic" => {
                assert!(!text.contains(kimi), "{protocol}: {text}");
                let id = &body["messages"][1]["content"][0]["id"];
                assert!(id.as_str().unwrap().starts_with("call_"), "{id}");
                assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], *id);
            }
            _ => assert_eq!(text.matches(kimi).count(), 2, "{protocol}: {text}"),
        }
    }
    for (protocol, body) in bodies(&request(Some(vllm))) {
        let text = body.to_string();
        match protocol {
            "openai-chat" | "openai-responses" => {
                assert!(!text.contains(vllm), "{protocol}: {text}");
                let sent = crate::wire::sent_call_id(vllm, crate::wire::OPENAI_CALL_IDS);
                assert_eq!(text.matches(sent.as_ref()).count(), 2, "{protocol}: {text}");
            }
            _ => assert_eq!(text.matches(vllm).count(), 2, "{protocol}: {text}"),
        }
    }
    // The same id gives the same one, another id another.
    let rules = crate::wire::ANTHROPIC_CALL_IDS;
    let once = crate::wire::sent_call_id(kimi, rules).into_owned();
    assert_eq!(crate::wire::sent_call_id(kimi, rules), once);
    assert_ne!(
        crate::wire::sent_call_id("functions.fs__read_file:1", rules),
        once
    );
    assert_eq!(once.len(), 29);
    assert_eq!(crate::wire::sent_call_id("toolu_01A", rules), "toolu_01A");
}
