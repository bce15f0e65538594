//! The Responses converters against the API's documented requests and stream events.

use conduit_core::content::{Block, Message, ResultPart, Role, ToolCall, ToolResult};
use conduit_core::provider::{ProviderErrorKind, StopReason};
use serde_json::json;

use super::*;
use crate::images::PreparedImage;
use crate::test_support::{first_protocol_error, media, replay, request};

const TOOL_STREAM: &str = r#"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}

event: response.reasoning_summary_text.delta
data: {"type":"response.reasoning_summary_text.delta","sequence_number":2,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Need weather."}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"rs_1","type":"reasoning","encrypted_content":"gAAAAB-enc","summary":[{"type":"summary_text","text":"Need weather."}]}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"get_weather"}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":5,"item_id":"fc_1","output_index":1,"delta":"{\"location\":"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_1","output_index":1,"delta":"\"Paris\"}"}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","sequence_number":7,"item_id":"fc_1","output_index":1,"arguments":"{\"location\":\"Paris\"}"}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":8,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris\"}","call_id":"call_1","name":"get_weather"}}

event: response.completed
data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","status":"completed","usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":0},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":123}}}

"#;

#[test]
fn a_function_call_stream_with_reasoning_decodes_in_order() {
    let events: Vec<_> = replay(&mut Decoder::default(), TOOL_STREAM)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        events,
        [
            ProviderEvent::ReasoningDelta("Need weather.".into()),
            ProviderEvent::ReasoningDone {
                signature: None,
                encrypted: Some("gAAAAB-enc".into()),
                id: Some("rs_1".into()),
            },
            ProviderEvent::ToolCallStarted {
                id: "call_1".into(),
                name: "get_weather".into()
            },
            ProviderEvent::ToolCallDelta {
                id: "call_1".into(),
                arguments: "{\"location\":".into()
            },
            ProviderEvent::ToolCallDelta {
                id: "call_1".into(),
                arguments: "\"Paris\"}".into()
            },
            ProviderEvent::ToolCallDone {
                id: "call_1".into(),
                name: "get_weather".into(),
                arguments: Ok(json!({"location": "Paris"})),
                signature: None,
            },
            ProviderEvent::Usage(Usage {
                input_tokens: 36,
                output_tokens: 87,
                cache_read_tokens: 0,
                reasoning_tokens: 64,
            }),
            ProviderEvent::Stop(StopReason::ToolUse),
        ]
    );
}

#[test]
fn text_deltas_and_failures() {
    let sse = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}\n\nevent: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"The model failed to generate a response.\"}}}\n\n";
    let events = replay(&mut Decoder::default(), sse);
    assert_eq!(events[0], Ok(ProviderEvent::TextDelta("Hi".into())));
    let err = events[1].clone().unwrap_err();
    // A server failure, as its status would be; after text the client does not retry it.
    assert_eq!(err.kind, ProviderErrorKind::Server);
    assert_eq!(
        err.message,
        "server_error: The model failed to generate a response."
    );

    let sse = "event: error\ndata: {\"type\":\"error\",\"code\":\"ERR_SOMETHING\",\"message\":\"Something went wrong\",\"param\":null,\"sequence_number\":1}\n\n";
    let err = replay(&mut Decoder::default(), sse)[0].clone().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Stream);
    assert_eq!(err.message, "ERR_SOMETHING: Something went wrong");
    // A prompt past the model's context, failed in the stream: the agent asks again
    // shorter.
    let sse = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of this model. Please adjust your input and try again.\"}}}\n\n";
    let err = replay(&mut Decoder::default(), sse)[0].clone().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::ContextTooLong);
}

/// A refusal streams as the answer, not as nothing; an empty tool result goes as an
/// empty string (the output is a string or a non-empty list).
#[test]
fn a_refusal_is_the_answer_and_an_empty_result_is_an_empty_string() {
    let sse = "event: response.refusal.delta\ndata: {\"type\":\"response.refusal.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"I can't help with that.\"}\n\n";
    let events = replay(&mut Decoder::default(), sse);
    assert_eq!(
        events[0],
        Ok(ProviderEvent::TextDelta("I can't help with that.".into()))
    );
    let req = request(vec![
        Message::user_text("Clear it"),
        Message {
            role: Role::Assistant,
            blocks: vec![Block::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "cache__clear".into(),
                arguments: json!({}),
                signature: None,
                invalid_arguments: None,
                wire_id: None,
                origin: None,
            })],
        },
        Message {
            role: Role::Tool,
            blocks: vec![Block::ToolResult(ToolResult {
                call_id: "call_1".into(),
                wire_id: None,
                name: "cache__clear".into(),
                is_error: false,
                parts: vec![],
            })],
        },
    ]);
    let body = build_request(&req, &PreparedImages::new());
    assert_eq!(body["input"][2]["type"], "function_call_output");
    assert_eq!(body["input"][2]["output"], "");
}

#[test]
fn an_incomplete_response_stops_for_max_tokens() {
    let sse = "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}}\n\n";
    let events = replay(&mut Decoder::default(), sse);
    assert_eq!(
        events.last(),
        Some(&Ok(ProviderEvent::Stop(StopReason::MaxTokens)))
    );
}

#[test]
fn the_request_uses_flat_tools_function_call_items_and_image_outputs() {
    let mut req = request(vec![
        Message::user_text("Weather and map?"),
        Message {
            role: Role::Assistant,
            blocks: vec![
                Block::Reasoning {
                    text: "Need weather.".into(),
                    signature: None,
                    encrypted: Some("gAAAAB-enc".into()),
                    id: Some("rs_1".into()),
                    protocol: Some(PROTOCOL.into()),
                    producer: None,
                },
                Block::ToolCall(ToolCall {
                    id: "call_1".into(),
                    name: "maps__render".into(),
                    arguments: json!({"city": "Paris"}),
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
                call_id: "call_1".into(),
                wire_id: None,
                name: "maps__render".into(),
                is_error: false,
                parts: vec![
                    ResultPart::Text {
                        text: "map of Paris".into(),
                    },
                    ResultPart::Image {
                        media: media("img1"),
                    },
                ],
            })],
        },
    ]);
    req.system = Some("Be brief.".into());
    req.tools = vec![conduit_core::tool::ToolSpec {
        name: "maps__render".into(),
        title: None,
        description: "Render a map".into(),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: Default::default(),
    }];
    let mut images = PreparedImages::new();
    images.insert(
        "img1".into(),
        Ok(PreparedImage {
            mime: "image/png",
            base64: "iVBOR==".into(),
        }),
    );
    let body = build_request(&req, &images);
    assert_eq!(
        body,
        json!({
            "model": "test-model",
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "instructions": "Be brief.",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "Weather and map?"}]},
                {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAB-enc",
                 "summary": [{"type": "summary_text", "text": "Need weather."}]},
                {"type": "function_call", "call_id": "call_1", "name": "maps__render",
                 "arguments": "{\"city\":\"Paris\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": [
                    {"type": "input_text", "text": "map of Paris"},
                    {"type": "input_image", "image_url": "data:image/png;base64,iVBOR=="}
                ]}
            ],
            "tools": [{"type": "function", "name": "maps__render", "description": "Render a map",
                       "parameters": {"type": "object"}, "strict": false}]
        })
    );
}

#[test]
fn an_error_event_nested_as_the_service_sends_it_gives_its_message() {
    let sse = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}\n\nevent: error\ndata: {\"type\":\"error\",\"sequence_number\":2,\"error\":{\"type\":\"too_many_requests\",\"code\":\"too_many_requests\",\"message\":\"Too Many Requests\",\"param\":null}}\n\n";
    let events = replay(&mut Decoder::default(), sse);
    assert_eq!(events[0], Ok(ProviderEvent::TextDelta("Hi".into())));
    let err = events[1].clone().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::RateLimited);
    assert_eq!(err.message, "too_many_requests: Too Many Requests");

    let null_code = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"service_unavailable_error\",\"code\":null,\"message\":\"Unable to verify model access right now. Please retry.\",\"param\":null},\"sequence_number\":2}\n\n";
    let err = replay(&mut Decoder::default(), null_code)[0]
        .clone()
        .unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Overloaded);
    assert_eq!(
        err.message,
        "service_unavailable_error: Unable to verify model access right now. Please retry."
    );
}

#[test]
fn an_incomplete_response_for_another_reason_says_which() {
    let sse = "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"content_filter\"},\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}}\n\n";
    assert_eq!(
        replay(&mut Decoder::default(), sse).last(),
        Some(&Ok(ProviderEvent::Stop(StopReason::Refusal)))
    );
    let sse = "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"interrupted\"},\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}}\n\n";
    assert_eq!(
        replay(&mut Decoder::default(), sse).last(),
        Some(&Ok(ProviderEvent::Stop(StopReason::Other(
            "interrupted".into()
        ))))
    );
}

#[test]
fn calls_without_item_ids_keep_their_own_arguments() {
    let event = |value: serde_json::Value| format!("data: {value}\n\n");
    let added = |call: &str| {
        event(
            json!({"type":"response.output_item.added","item":{"type":"function_call","call_id":call,"name":"echo","arguments":""}}),
        )
    };
    let done = |call: &str, arguments: Option<&str>| {
        event(
            json!({"type":"response.output_item.done","item":{"type":"function_call","call_id":call,"name":"echo","arguments":arguments}}),
        )
    };
    // The pieces of a call without an item id name it by its call id.
    let piece = |call: &str, delta: &str| {
        event(json!({"type":"response.function_call_arguments.delta","item_id":call,"delta":delta}))
    };
    let sse = [
        added("call_a"),
        added("call_b"),
        piece("call_a", r#"{"text":"a"}"#),
        done("call_b", Some(r#"{"text":"b"}"#)),
        done("call_a", None),
    ]
    .concat();
    let mut decoder = Decoder::default();
    let finished: Vec<_> = replay(&mut decoder, &sse)
        .into_iter()
        .filter_map(|event| match event {
            // The stream is cut after the calls: its end is an error of its own.
            Ok(ProviderEvent::ToolCallDone { id, arguments, .. }) => Some((id, arguments.unwrap())),
            _ => None,
        })
        .collect();
    assert_eq!(
        finished,
        [
            ("call_b".to_owned(), json!({"text": "b"})),
            ("call_a".to_owned(), json!({"text": "a"})),
        ]
    );
    assert!(decoder.calls.is_empty());
}

/// A call item added twice under one key, or a completed response with a call still
/// open, fails the answer: the calls would trade arguments, or one would be lost from the
/// saved answer while it read as complete. A response cut short (incomplete) says so.
#[test]
fn a_call_item_added_twice_or_left_open_fails_the_answer() {
    let event = |value: serde_json::Value| format!("data: {value}\n\n");
    let added = event(
        json!({"type":"response.output_item.added","item":{"type":"function_call","id":"fc_1","call_id":"call_a","name":"echo","arguments":""}}),
    );
    let twice = [added.clone(), added.clone()].concat();
    let err = first_protocol_error(&mut Decoder::default(), &twice);
    assert_eq!(
        err.message,
        "openai-responses added the call item fc_1 again before it was done"
    );

    let completed =
        event(json!({"type":"response.completed","response":{"status":"completed","usage":null}}));
    let left_open = [added.clone(), completed].concat();
    let err = first_protocol_error(&mut Decoder::default(), &left_open);
    assert_eq!(
        err.message,
        "openai-responses ended the response with a call item still open"
    );

    let incomplete = event(
        json!({"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":null}}),
    );
    let cut_short = [added, incomplete].concat();
    let events: Vec<_> = replay(&mut Decoder::default(), &cut_short)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Stop(StopReason::MaxTokens))
    );
}

#[test]
fn reasoning_with_nothing_after_it_is_not_replayed() {
    let reasoning = |id: &str, summary: &str| Block::Reasoning {
        text: summary.into(),
        signature: None,
        encrypted: Some(format!("gAAAAB-{id}")),
        id: Some(id.into()),
        protocol: Some(PROTOCOL.into()),
        producer: None,
    };
    let req = request(vec![
        Message::user_text("How many r's are in strawberry?"),
        // Stop was pressed once the reasoning had finished, before any answer.
        Message {
            role: Role::Assistant,
            blocks: vec![reasoning("rs_1", "Counting letters.")],
        },
        Message::user_text("Just the number, please."),
        // The answer, then more reasoning cut off by max_output_tokens.
        Message {
            role: Role::Assistant,
            blocks: vec![
                reasoning("rs_2", "Count again."),
                Block::text("3"),
                reasoning("rs_3", ""),
            ],
        },
        Message::user_text("Thanks"),
    ]);
    let body = build_request(&req, &PreparedImages::new());
    assert_eq!(
        body["input"],
        json!([
            {"role": "user", "content": [{"type": "input_text", "text": "How many r's are in strawberry?"}]},
            {"role": "user", "content": [{"type": "input_text", "text": "Just the number, please."}]},
            {"type": "reasoning", "id": "rs_2", "encrypted_content": "gAAAAB-rs_2",
             "summary": [{"type": "summary_text", "text": "Count again."}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "3"}]},
            {"role": "user", "content": [{"type": "input_text", "text": "Thanks"}]}
        ])
    );
}

/// A summary of two parts (each a paragraph under its own heading) reads as two
/// paragraphs, not the second heading run on from the first part's last sentence.
#[test]
fn the_parts_of_a_reasoning_summary_are_paragraphs_of_their_own() {
    let sse = r#"event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","type":"reasoning","summary":[]}}

event: response.reasoning_summary_part.added
data: {"type":"response.reasoning_summary_part.added","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""},"sequence_number":3}

event: response.reasoning_summary_text.delta
data: {"type":"response.reasoning_summary_text.delta","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":0,"delta":"**Responding to a greeting**\n\nThe user just said, \"Hello!\"","sequence_number":4}

event: response.reasoning_summary_text.delta
data: {"type":"response.reasoning_summary_text.delta","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":0,"delta":" So, it seems I should engage.","sequence_number":5}

event: response.reasoning_summary_text.done
data: {"type":"response.reasoning_summary_text.done","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":0,"text":"**Responding to a greeting**\n\nThe user just said, \"Hello!\" So, it seems I should engage.","sequence_number":6}

event: response.reasoning_summary_part.done
data: {"type":"response.reasoning_summary_part.done","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":"**Responding to a greeting**\n\nThe user just said, \"Hello!\" So, it seems I should engage."},"sequence_number":7}

event: response.reasoning_summary_part.added
data: {"type":"response.reasoning_summary_part.added","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":1,"part":{"type":"summary_text","text":""},"sequence_number":8}

event: response.reasoning_summary_text.delta
data: {"type":"response.reasoning_summary_text.delta","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":1,"delta":"**Offering help**","sequence_number":9}

event: response.reasoning_summary_text.delta
data: {"type":"response.reasoning_summary_text.delta","item_id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"summary_index":1,"delta":"\n\nI will ask how I can help.","sequence_number":10}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":11,"output_index":0,"item":{"id":"rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","type":"reasoning","encrypted_content":"gAAAAB-enc","summary":[{"type":"summary_text","text":"**Responding to a greeting**\n\nThe user just said, \"Hello!\" So, it seems I should engage."},{"type":"summary_text","text":"**Offering help**\n\nI will ask how I can help."}]}}

event: response.completed
data: {"type":"response.completed","sequence_number":12,"response":{"id":"resp_1","status":"completed","usage":{"input_tokens":8,"input_tokens_details":{"cached_tokens":0},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":32},"total_tokens":48}}}

"#;
    let events = replay(&mut Decoder::default(), sse);
    let reasoning: String = events
        .iter()
        .filter_map(|event| match event {
            Ok(ProviderEvent::ReasoningDelta(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasoning,
        "**Responding to a greeting**\n\nThe user just said, \"Hello!\" So, it seems I should engage.\n\n**Offering help**\n\nI will ask how I can help."
    );
    assert_eq!(
        events[4],
        Ok(ProviderEvent::ReasoningDone {
            signature: None,
            encrypted: Some("gAAAAB-enc".into()),
            id: Some("rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476".into()),
        })
    );
    assert_eq!(events.len(), 7);
    assert_eq!(events[6], Ok(ProviderEvent::Stop(StopReason::EndTurn)));
}
