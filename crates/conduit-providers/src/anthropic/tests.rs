//! The Anthropic converters against the API's documented requests and stream bytes.

use conduit_core::agent::MAX_RESPONSE_BYTES;
use conduit_core::content::{Block, Message, ResultPart, Role, ToolCall, ToolResult};
use conduit_core::provider::{InvalidArguments, ProviderErrorKind, StopReason};
use conduit_core::tool::ToolSpec;
use serde_json::json;

use super::*;
use crate::images::PreparedImage;
use crate::test_support::{first_protocol_error, media, replay, request};

const TEXT_STREAM: &str = r#"event: message_start
data: {"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant", "content": [], "model": "claude-opus-4-6", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}

event: content_block_start
data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 0}

event: message_delta
data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence":null}, "usage": {"output_tokens": 15}}

event: message_stop
data: {"type": "message_stop"}

"#;

#[test]
fn a_text_stream_decodes_to_deltas_usage_and_stop() {
    let events: Vec<_> = replay(&mut Decoder::default(), TEXT_STREAM)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let usage = Usage {
        input_tokens: 25,
        output_tokens: 15,
        ..Default::default()
    };
    assert_eq!(
        events,
        [
            ProviderEvent::Usage(Usage {
                input_tokens: 25,
                output_tokens: 1,
                ..Default::default()
            }),
            ProviderEvent::TextDelta("Hello".into()),
            ProviderEvent::TextDelta("!".into()),
            ProviderEvent::Usage(usage),
            ProviderEvent::Stop(StopReason::EndTurn),
        ]
    );
}

#[test]
fn a_tool_use_stream_assembles_the_arguments() {
    let sse = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-opus-4-6","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay, let me check."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San Francisco, CA\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"#;
    let events: Vec<_> = replay(&mut Decoder::default(), sse)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(events.contains(&ProviderEvent::ToolCallStarted {
        id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
        name: "get_weather".into(),
    }));
    assert!(events.contains(&ProviderEvent::ToolCallDone {
        id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
        name: "get_weather".into(),
        arguments: Ok(json!({"location": "San Francisco, CA"})),
        signature: None,
    }));
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Stop(StopReason::ToolUse))
    );
}

#[test]
fn thinking_keeps_its_signature_and_redacted_thinking_its_data() {
    let sse = r#"event: content_block_start
data: {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me solve this step by step"}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 0}

event: content_block_start
data: {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 1}

event: message_stop
data: {"type": "message_stop"}

"#;
    let events: Vec<_> = replay(&mut Decoder::default(), sse)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        events,
        [
            ProviderEvent::ReasoningDelta("Let me solve this step by step".into()),
            ProviderEvent::ReasoningDone {
                signature: Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds".into()),
                encrypted: None,
                id: None,
            },
            ProviderEvent::ReasoningDone {
                signature: None,
                encrypted: Some("EmwKAhgBEgy3va3pzix".into()),
                id: None,
            },
            ProviderEvent::Stop(StopReason::EndTurn),
        ]
    );
}

#[test]
fn an_error_event_mid_stream_carries_the_providers_message() {
    let sse = "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"text_delta\", \"text\": \"Hi\"}}\n\nevent: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n";
    let events = replay(&mut Decoder::default(), sse);
    assert_eq!(events[0], Ok(ProviderEvent::TextDelta("Hi".into())));
    let err = events[1].clone().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Overloaded);
    assert_eq!(err.message, "overloaded_error: Overloaded");
}

#[test]
fn a_stream_cut_before_message_stop_is_an_error() {
    let cut = TEXT_STREAM.split("event: message_delta").next().unwrap();
    let events = replay(&mut Decoder::default(), cut);
    let err = events.last().unwrap().clone().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Connection);
}

/// A block opened again before it stopped, or an answer ending with a tool call still
/// open, is a protocol error: the call was started and would never be done, lost from the
/// saved answer while the stream read as complete.
#[test]
fn a_tool_call_reopened_or_left_open_fails_the_answer() {
    let reopened = r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"a","name":"f","input":{}}}

data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"b","name":"g","input":{}}}

"#;
    let err = first_protocol_error(&mut Decoder::default(), reopened);
    assert_eq!(
        err.message,
        "anthropic opened content block 0 again before it stopped"
    );

    let left_open = r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"a","name":"f","input":{}}}

data: {"type":"message_stop"}

"#;
    let err = first_protocol_error(&mut Decoder::default(), left_open);
    assert_eq!(
        err.message,
        "anthropic ended the answer with a tool call still open"
    );
}

#[test]
fn invalid_tool_json_is_a_typed_error_not_a_panic() {
    let sse = r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}}

data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\": tru"}}

data: {"type":"content_block_stop","index":0}

"#;
    let events = replay(&mut Decoder::default(), sse);
    let done = events
        .iter()
        .find_map(|e| match e {
            Ok(ProviderEvent::ToolCallDone { arguments, .. }) => Some(arguments.clone()),
            _ => None,
        })
        .unwrap();
    let Err(InvalidArguments { raw, .. }) = done else {
        panic!("expected invalid arguments");
    };
    assert_eq!(raw, "{\"a\": tru");
}

#[test]
fn the_request_keeps_images_inside_tool_results_and_replays_thinking() {
    let mut req = request(vec![
        Message {
            role: Role::User,
            blocks: vec![
                Block::text("What is in this?"),
                Block::Image {
                    media: media("img1"),
                },
            ],
        },
        Message {
            role: Role::Assistant,
            blocks: vec![
                Block::Reasoning {
                    text: "look at it".into(),
                    signature: Some("sig".into()),
                    encrypted: None,
                    id: None,
                    protocol: Some("anthropic".into()),
                    producer: None,
                },
                Block::Reasoning {
                    text: "from another provider".into(),
                    signature: None,
                    encrypted: Some("enc".into()),
                    id: Some("rs_1".into()),
                    protocol: Some("openai-responses".into()),
                    producer: None,
                },
                Block::text("Let me zoom."),
                Block::ToolCall(ToolCall {
                    id: "toolu_1".into(),
                    name: "figma__frame".into(),
                    arguments: json!({"id": 7}),
                    signature: None,
                    invalid_arguments: None,
                    wire_id: None,
                    origin: None,
                }),
            ],
        },
        Message {
            role: Role::Tool,
            blocks: vec![Block::ToolResult(ToolResult {
                call_id: "toolu_1".into(),
                wire_id: None,
                name: "figma__frame".into(),
                is_error: false,
                parts: vec![
                    ResultPart::Text {
                        text: "frame 7".into(),
                    },
                    ResultPart::Image {
                        media: media("img2"),
                    },
                ],
            })],
        },
        Message::user_text("And now?"),
    ]);
    // Thinking asked (adaptive, Claude 4.6): the loop's answer keeps its signed thinking.
    req.model = "claude-sonnet-4-6".into();
    req.reasoning = Some(conduit_core::provider::ReasoningEffort::Medium);
    req.system = Some("Be brief.".into());
    req.tools = vec![ToolSpec {
        name: "figma__frame".into(),
        title: None,
        description: "Render a frame".into(),
        input_schema: json!({"type": "object", "properties": {"id": {"type": "integer"}}}),
        output_schema: None,
        annotations: Default::default(),
    }];
    let mut images = PreparedImages::new();
    images.insert(
        "img1".into(),
        Ok(PreparedImage {
            mime: "image/png",
            base64: "AAA=".into(),
        }),
    );
    images.insert(
        "img2".into(),
        Err(conduit_core::media::MediaError::Missing {
            hash: "img2".into(),
        }
        .into()),
    );

    let body = build_request(&req, &images);
    assert_eq!(
        body,
        json!({
            "model": "claude-sonnet-4-6",
            "max_tokens": 8192 + 8192,
            "stream": true,
            "thinking": {"type": "adaptive"},
            "output_config": {"effort": "medium"},
            "system": "Be brief.",
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "What is in this?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA="}, "cache_control": {"type": "ephemeral"}}
                ]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "look at it", "signature": "sig"},
                    {"type": "text", "text": "Let me zoom."},
                    {"type": "tool_use", "id": "toolu_1", "name": "figma__frame", "input": {"id": 7}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                        {"type": "text", "text": "frame 7"},
                        {"type": "text", "text": "[An image was omitted: the media file img2 is missing]"}
                    ]},
                    {"type": "text", "text": "And now?", "cache_control": {"type": "ephemeral"}}
                ]}
            ],
            "tools": [{
                "name": "figma__frame",
                "description": "Render a frame",
                "input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}},
                "cache_control": {"type": "ephemeral"}
            }]
        })
    );
}

#[test]
fn error_results_are_flagged() {
    let req = request(vec![Message {
        role: Role::Tool,
        blocks: vec![Block::ToolResult(ToolResult {
            call_id: "t".into(),
            wire_id: None,
            name: "x".into(),
            is_error: true,
            parts: vec![ResultPart::Text {
                text: "boom".into(),
            }],
        })],
    }]);
    let body = build_request(&req, &PreparedImages::new());
    assert_eq!(
        body["messages"][0]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "t", "is_error": true, "content": [{"type": "text", "text": "boom"}], "cache_control": {"type": "ephemeral"}})
    );
}

#[test]
fn models_are_listed_with_display_names() {
    let body = json!({"data": [{"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5", "created_at": "2025-09-29T00:00:00Z"}], "has_more": false});
    assert_eq!(
        parse_models(&body),
        [ModelInfo {
            id: "claude-sonnet-4-5".into(),
            display_name: Some("Claude Sonnet 4.5".into())
        }]
    );
}

#[test]
fn error_events_and_bodies_in_the_services_shapes() {
    let sse = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"details\":null,\"type\":\"api_error\",\"message\":\"Internal server error\"},\"request_id\":\"req_011CSHoEeqs5C35K2UUqR7Fy\"}\n\n";
    let events = replay(&mut Decoder::default(), sse);
    let err = events.last().unwrap().clone().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Server);
    assert_eq!(err.message, "api_error: Internal server error");

    let no_message =
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n";
    let err = replay(&mut Decoder::default(), no_message)[0]
        .clone()
        .unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Overloaded);
    assert_eq!(err.message, "overloaded_error (no message given)");

    let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}"#;
    let err = crate::http::status_error(529, body, None);
    assert_eq!(err.kind, ProviderErrorKind::Overloaded);
    assert_eq!(err.message, "Overloaded");
}

#[test]
fn blocks_that_never_close_cannot_hold_the_answer_without_end() {
    let start = |index: usize, block: serde_json::Value| {
        format!(
            "event: content_block_start\ndata: {}\n\n",
            json!({"type":"content_block_start","index":index,"content_block":block})
        )
    };
    // Open blocks: a real answer opens one at a time.
    let many: String = (0..=MAX_OPEN_BLOCKS)
        .map(|i| start(i, json!({"type":"text","text":""})))
        .collect();
    let err = first_protocol_error(&mut Decoder::default(), &many);
    assert_eq!(
        err.message,
        "anthropic opened more than 1024 content blocks at once"
    );

    // Redacted reasoning and signatures held in open blocks count against the cap.
    let blob = "r".repeat(MAX_RESPONSE_BYTES / 2);
    let redacted: String = (0..3)
        .map(|i| start(i, json!({"type":"redacted_thinking","data":blob})))
        .collect();
    let signature = format!(
        "{}{}",
        start(0, json!({"type":"thinking","thinking":""})),
        (0..3)
            .map(|_| format!(
                "event: content_block_delta\ndata: {}\n\n",
                json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":blob}})
            ))
            .collect::<String>()
    );
    for sse in [redacted, signature] {
        let err = first_protocol_error(&mut Decoder::default(), &sse);
        assert_eq!(
            err.message,
            "anthropic sent more than 32 MiB of reasoning signatures and redacted reasoning; Conduit stopped the answer"
        );
    }
}

#[test]
fn whitespace_only_text_is_never_sent_and_leaves_no_empty_message() {
    let call = |id: &str, command: &str| {
        Block::ToolCall(ToolCall {
            id: id.into(),
            name: "shell__run".into(),
            arguments: json!({"command": command}),
            signature: None,
            invalid_arguments: None,
            wire_id: None,
            origin: None,
        })
    };
    let result = |id: &str, is_error: bool, text: &str| {
        Block::ToolResult(ToolResult {
            call_id: id.into(),
            wire_id: None,
            name: "shell__run".into(),
            is_error,
            parts: vec![ResultPart::Text { text: text.into() }],
        })
    };
    let req = request(vec![
        Message::user_text("Summarise the build log"),
        // Stopped after the model's first newlines: nothing visible was said.
        Message {
            role: Role::Assistant,
            blocks: vec![Block::text("\n\n")],
        },
        Message::user_text("Run the tests first"),
        Message {
            role: Role::Assistant,
            blocks: vec![
                Block::text(" \n"),
                call("toolu_01A", "cargo test"),
                call("toolu_01B", "false"),
            ],
        },
        Message {
            role: Role::Tool,
            blocks: vec![
                result("toolu_01A", false, "\n"),
                result("toolu_01B", true, "  \n\t"),
            ],
        },
        Message::user_text("Thanks"),
    ]);
    let body = build_request(&req, &PreparedImages::new());
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "Summarise the build log"},
                {"type": "text", "text": "Run the tests first", "cache_control": {"type": "ephemeral"}}
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_01A", "name": "shell__run", "input": {"command": "cargo test"}},
                {"type": "tool_use", "id": "toolu_01B", "name": "shell__run", "input": {"command": "false"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "content": []},
                {"type": "tool_result", "tool_use_id": "toolu_01B", "is_error": true, "content": [
                    {"type": "text", "text": "The tool failed without a message."}
                ]},
                {"type": "text", "text": "Thanks", "cache_control": {"type": "ephemeral"}}
            ]}
        ])
    );
}

/// A proxy that turns a whole (non-streamed) reply into events puts each block's content
/// in its start and sends no delta: the text, the reasoning with its signature and the
/// call's arguments are kept, not lost (a tool run with `{}`).
#[test]
fn a_whole_reply_sent_in_block_starts_keeps_its_content() {
    let sse = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":410,"output_tokens":0}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"The user wants a.txt read.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":"I'll read the file."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t1","name":"read_file","input":{"path":"a.txt"}}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":74}}

event: message_stop
data: {"type":"message_stop"}

"#;
    let events: Vec<_> = replay(&mut Decoder::default(), sse)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let usage = |output_tokens| {
        ProviderEvent::Usage(Usage {
            input_tokens: 410,
            output_tokens,
            ..Usage::default()
        })
    };
    assert_eq!(
        events,
        [
            usage(0),
            ProviderEvent::ReasoningDelta("The user wants a.txt read.".into()),
            ProviderEvent::ReasoningDone {
                signature: Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds".into()),
                encrypted: None,
                id: None,
            },
            ProviderEvent::TextDelta("I'll read the file.".into()),
            ProviderEvent::ToolCallStarted {
                id: "t1".into(),
                name: "read_file".into(),
            },
            ProviderEvent::ToolCallDone {
                id: "t1".into(),
                name: "read_file".into(),
                arguments: Ok(json!({"path": "a.txt"})),
                signature: None,
            },
            usage(74),
            ProviderEvent::Stop(StopReason::ToolUse),
        ]
    );
}

/// Anthropic's own starts are empty (`"input":{}`, `"text":""`, `"thinking":""`) and
/// the content follows in deltas: no event comes from the start, and a call with no
/// arguments (one empty `input_json_delta`) still has `{}`.
#[test]
fn anthropics_empty_block_starts_add_nothing() {
    let sse = r#"event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Just list it."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01A","name":"list_files","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_stop
data: {"type":"message_stop"}

"#;
    let events: Vec<_> = replay(&mut Decoder::default(), sse)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        events,
        [
            ProviderEvent::ReasoningDelta("Just list it.".into()),
            ProviderEvent::ReasoningDone {
                signature: Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds".into()),
                encrypted: None,
                id: None,
            },
            ProviderEvent::ToolCallStarted {
                id: "toolu_01A".into(),
                name: "list_files".into(),
            },
            ProviderEvent::ToolCallDelta {
                id: "toolu_01A".into(),
                arguments: String::new(),
            },
            ProviderEvent::ToolCallDone {
                id: "toolu_01A".into(),
                name: "list_files".into(),
                arguments: Ok(json!({})),
                signature: None,
            },
            ProviderEvent::Stop(StopReason::EndTurn),
        ]
    );
}

/// A turn that runs tools sends the conversation again after each call: the last tool
/// definition, the last block, and the last block before the model's latest answer are
/// marked for the prompt cache; a trailing thinking block (which cannot carry the mark)
/// passes it to the block before.
#[test]
fn the_tools_and_the_conversation_so_far_are_marked_for_the_prompt_cache() {
    let tool = |name: &str| ToolSpec {
        name: name.into(),
        title: None,
        description: format!("{name} a file"),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: Default::default(),
    };
    let mut req = request(vec![
        Message::user_text("Read the notes"),
        Message {
            role: Role::Assistant,
            blocks: vec![
                Block::text("Reading."),
                Block::Reasoning {
                    text: "then summarise".into(),
                    signature: Some("sig".into()),
                    encrypted: None,
                    id: None,
                    protocol: Some("anthropic".into()),
                    producer: None,
                },
            ],
        },
    ]);
    req.tools = vec![tool("files__read"), tool("files__write")];
    let body = build_request(&req, &PreparedImages::new());
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(body["tools"][0].get("cache_control"), None);
    assert_eq!(body["tools"][1]["cache_control"], ephemeral);
    // Where the previous request ended, before the model's latest answer.
    assert_eq!(
        body["messages"][0]["content"][0]["cache_control"],
        ephemeral
    );
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "text", "text": "Reading.", "cache_control": {"type": "ephemeral"}},
            {"type": "thinking", "thinking": "then summarise", "signature": "sig"}
        ])
    );
    // Without tools only the conversation is marked; with no messages, nothing.
    req.tools.clear();
    let body = build_request(&req, &PreparedImages::new());
    assert_eq!(body.get("tools"), None);
    assert_eq!(
        body["messages"][1]["content"][0]["cache_control"],
        ephemeral
    );
    let empty = build_request(&request(Vec::new()), &PreparedImages::new());
    assert_eq!(empty["messages"], json!([]));
}

/// Anthropic's `input_tokens` leaves out the prompt read from and written to the cache
/// (its documented usage fields); Conduit counts the whole prompt, as the other
/// protocols do, and names the part read from the cache.
#[test]
fn a_cached_prompt_is_counted_whole_with_its_cached_part() {
    let stream = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":1830,"cache_read_input_tokens":24410,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Done."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":6}}

event: message_stop
data: {"type":"message_stop"}

"#;
    let usages: Vec<Usage> = replay(&mut Decoder::default(), stream)
        .into_iter()
        .filter_map(|event| match event {
            Ok(ProviderEvent::Usage(usage)) => Some(usage),
            _ => None,
        })
        .collect();
    let whole = |output_tokens| Usage {
        input_tokens: 12 + 1830 + 24410,
        output_tokens,
        cache_read_tokens: 24410,
        reasoning_tokens: 0,
    };
    assert_eq!(usages, [whole(1), whole(6)]);
}

/// A step of many parallel calls puts the previous request's end more than 20 blocks
/// back: it keeps a mark of its own, so the service finds the cached prefix.
#[test]
fn the_previous_requests_end_keeps_a_mark_past_twenty_blocks() {
    let calls: Vec<Block> = (0..12)
        .map(|n| {
            Block::ToolCall(ToolCall {
                id: format!("toolu_{n}"),
                name: "files__read".into(),
                arguments: json!({"n": n}),
                signature: None,
                invalid_arguments: None,
                wire_id: None,
                origin: None,
            })
        })
        .collect();
    let results: Vec<Block> = (0..12)
        .map(|n| {
            Block::ToolResult(ToolResult {
                call_id: format!("toolu_{n}"),
                wire_id: None,
                name: "files__read".into(),
                is_error: false,
                parts: vec![ResultPart::Text {
                    text: format!("file {n}"),
                }],
            })
        })
        .collect();
    let req = request(vec![
        Message::user_text("Read all twelve files"),
        Message {
            role: Role::Assistant,
            blocks: calls,
        },
        Message {
            role: Role::Tool,
            blocks: results,
        },
    ]);
    let body = build_request(&req, &PreparedImages::new());
    let marked: Vec<(usize, usize)> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .flat_map(|(m, message)| {
            message["content"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
                .filter(|(_, block)| block.get("cache_control").is_some())
                .map(move |(b, _)| (m, b))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(marked, [(0, 0), (2, 11)]);
}
