//! The Chat Completions converters against the API's documented requests and stream bytes.

use conduit_core::content::{Block, Message, ResultPart, Role, ToolCall, ToolResult};
use conduit_core::provider::{ProviderErrorKind, StopReason};
use serde_json::json;

use super::*;
use crate::images::PreparedImage;
use crate::test_support::{first_protocol_error, media, replay, request};

#[test]
fn a_text_stream_decodes_to_deltas_usage_and_stop() {
    let sse = r#"data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini", "system_fingerprint": "fp_44709d6fcb", "choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini", "system_fingerprint": "fp_44709d6fcb", "choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini", "system_fingerprint": "fp_44709d6fcb", "choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini", "system_fingerprint": "fp_44709d6fcb", "choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}

data: [DONE]

"#;
    let events: Vec<_> = replay(&mut Decoder::default(), sse)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        events,
        [
            ProviderEvent::TextDelta("Hello".into()),
            ProviderEvent::Usage(Usage {
                input_tokens: 9,
                output_tokens: 12,
                ..Default::default()
            }),
            ProviderEvent::Stop(StopReason::EndTurn),
        ]
    );
}

#[test]
fn parallel_tool_call_deltas_are_assembled_by_index() {
    let sse = r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\":"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_def","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"#;
    let events: Vec<_> = replay(&mut Decoder::default(), sse)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let done: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::ToolCallDone {
                id,
                name,
                arguments,
                ..
            } => Some((id.as_str(), name.as_str(), arguments.clone().unwrap())),
            _ => None,
        })
        .collect();
    assert_eq!(
        done,
        [
            ("call_abc", "get_weather", json!({"location": "Paris"})),
            ("call_def", "get_time", json!({})),
        ]
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Stop(StopReason::ToolUse))
    );
    let started = events
        .iter()
        .filter(|e| matches!(e, ProviderEvent::ToolCallStarted { .. }))
        .count();
    assert_eq!(started, 2);
}

#[test]
fn deepseek_reasoning_content_streams_as_reasoning() {
    let sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Hmm\"},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Yes\"},\"finish_reason\":\"stop\"}]}\n\n";
    let events: Vec<_> = replay(&mut Decoder::default(), sse)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    // This server closed without [DONE] after a finish reason: still a complete answer.
    assert_eq!(
        events,
        [
            ProviderEvent::ReasoningDelta("Hmm".into()),
            ProviderEvent::TextDelta("Yes".into()),
            ProviderEvent::Stop(StopReason::EndTurn),
        ]
    );
}

/// A refusal streams as the answer, not as an empty one.
#[test]
fn a_refusal_streams_as_the_answer() {
    let sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"refusal\":\"I can't help with that.\"},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
    let events: Vec<_> = replay(&mut Decoder::default(), sse)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        events,
        [
            ProviderEvent::TextDelta("I can't help with that.".into()),
            ProviderEvent::Stop(StopReason::EndTurn),
        ]
    );
}

/// Ollama's `reasoning` streams as reasoning; a server writing the same text under both
/// names (mlx-vlm) shows it once.
#[test]
fn reasoning_under_either_name_or_both_streams_once() {
    let sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"Let me \"},\"finish_reason\":null}]}\n\n\
               data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think\",\"reasoning\":\"think\"},\"finish_reason\":null}]}\n\n\
               data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"\",\"reasoning\":\".\"},\"finish_reason\":null}]}\n\n\
               data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Yes\"},\"finish_reason\":\"stop\"}]}\n\n";
    let events: Vec<_> = replay(&mut Decoder::default(), sse)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        events,
        [
            ProviderEvent::ReasoningDelta("Let me ".into()),
            ProviderEvent::ReasoningDelta("think".into()),
            ProviderEvent::ReasoningDelta(".".into()),
            ProviderEvent::TextDelta("Yes".into()),
            ProviderEvent::Stop(StopReason::EndTurn),
        ]
    );
}

#[test]
fn an_error_chunk_mid_stream_and_a_cut_stream_are_errors() {
    let sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\ndata: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\"}}\n\n";
    let events = replay(&mut Decoder::default(), sse);
    let err = events[1].clone().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Server);
    assert_eq!(
        err.message,
        "server_error: The server had an error while processing your request."
    );

    let cut = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n";
    let events = replay(&mut Decoder::default(), cut);
    assert_eq!(
        events.last().unwrap().clone().unwrap_err().kind,
        ProviderErrorKind::Connection
    );
}

fn turn_with_image_results() -> Vec<Message> {
    let call = |id: &str| {
        Block::ToolCall(ToolCall {
            id: id.into(),
            name: "charts__plot".into(),
            arguments: json!({"n": 1}),
            signature: None,
            invalid_arguments: None,
            wire_id: None,
            origin: None,
        })
    };
    let result = |id: &str, img: &str| {
        Block::ToolResult(ToolResult {
            call_id: id.into(),
            wire_id: None,
            name: "charts__plot".into(),
            is_error: false,
            parts: vec![
                ResultPart::Text {
                    text: format!("chart {id}"),
                },
                ResultPart::Image { media: media(img) },
            ],
        })
    };
    vec![
        Message::user_text("Plot two charts"),
        Message {
            role: Role::Assistant,
            blocks: vec![call("c1"), call("c2")],
        },
        Message {
            role: Role::Tool,
            blocks: vec![result("c1", "img1"), result("c2", "img2")],
        },
    ]
}

fn prepared() -> PreparedImages {
    let mut images = PreparedImages::new();
    for hash in ["img1", "img2"] {
        images.insert(
            hash.into(),
            Ok(PreparedImage {
                mime: "image/png",
                base64: format!("{hash}=="),
            }),
        );
    }
    images
}

#[test]
fn tool_images_follow_all_tool_messages_in_one_user_message() {
    let mut req = request(turn_with_image_results());
    req.system = Some("sys".into());
    let body = build_request(&req, &prepared());
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "Plot two charts"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "charts__plot", "arguments": "{\"n\":1}"}},
                {"id": "c2", "type": "function", "function": {"name": "charts__plot", "arguments": "{\"n\":1}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "chart c1\n[1 image(s) from this result follow in the next message]"},
            {"role": "tool", "tool_call_id": "c2", "content": "chart c2\n[1 image(s) from this result follow in the next message]"},
            {"role": "user", "content": [
                {"type": "text", "text": "Images returned by the tool calls above:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,img1=="}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,img2=="}}
            ]}
        ])
    );
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["stream"], json!(true));
}

/// DeepSeek's thinking mode wants the reasoning that led to tool calls sent back with
/// them (its request carrying their results is refused without it); a message without
/// calls, and another protocol's reasoning, go without.
#[test]
fn the_reasoning_behind_tool_calls_goes_back_with_them() {
    let reasoning = |text: &str, protocol: &str| Block::Reasoning {
        text: text.into(),
        signature: None,
        encrypted: None,
        id: None,
        protocol: Some(protocol.into()),
        producer: None,
    };
    let mut messages = turn_with_image_results();
    messages[1]
        .blocks
        .insert(0, reasoning("I should plot ", PROTOCOL));
    messages[1].blocks.insert(1, reasoning("both.", PROTOCOL));
    messages[1]
        .blocks
        .insert(2, reasoning("other", "anthropic"));
    messages.push(Message {
        role: Role::Assistant,
        blocks: vec![
            reasoning("Done thinking.", PROTOCOL),
            Block::text("Plotted."),
        ],
    });
    let body = build_request(&request(messages), &prepared());
    let sent = body["messages"].as_array().unwrap();
    assert_eq!(sent[1]["reasoning_content"], "I should plot both.");
    let last = sent.last().unwrap();
    assert_eq!(last["content"], "Plotted.");
    assert!(last.get("reasoning_content").is_none(), "{last}");
}

#[test]
fn a_model_without_vision_gets_a_note_instead_of_images() {
    let mut req = request(turn_with_image_results());
    req.capabilities.vision = false;
    let body = build_request(&req, &prepared());
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(
        messages[2]["content"],
        "chart c1\n[1 image(s) omitted: this model does not take images]"
    );
}

#[test]
fn tools_use_the_nested_function_shape() {
    let mut req = request(vec![Message::user_text("hi")]);
    req.tools = vec![conduit_core::tool::ToolSpec {
        name: "t".into(),
        title: None,
        description: "d".into(),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: Default::default(),
    }];
    req.max_output_tokens = Some(100);
    let body = build_request(&req, &PreparedImages::new());
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "t", "description": "d", "parameters": {"type": "object"}}}])
    );
    assert_eq!(body["max_tokens"], 100);
}

#[test]
fn compatible_servers_error_chunks_read_in_their_words() {
    // OpenRouter: the upstream's own words sit in `metadata.raw`.
    let openrouter = "data: {\"id\":\"gen-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\ndata: {\"id\":\"gen-1\",\"object\":\"chat.completion.chunk\",\"error\":{\"code\":502,\"message\":\"Provider returned error\",\"metadata\":{\"raw\":\"upstream connect error or disconnect/reset before headers\",\"provider_name\":\"Example\"}},\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}\n\n";
    let events = replay(&mut Decoder::default(), openrouter);
    assert_eq!(events[0], Ok(ProviderEvent::TextDelta("Hi".into())));
    let err = events[1].clone().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Server);
    assert_eq!(
        err.message,
        "502: Provider returned error: upstream connect error or disconnect/reset before headers"
    );
    // Ollama.
    let ollama = "data: {\"error\":\"an error was encountered while running the model: unexpected EOF\"}\n\n";
    let err = replay(&mut Decoder::default(), ollama)[0]
        .clone()
        .unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Stream);
    assert_eq!(
        err.message,
        "an error was encountered while running the model: unexpected EOF"
    );
    // vLLM.
    let vllm = "data: {\"object\":\"error\",\"message\":\"This model's maximum context length is 4096 tokens.\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}\n\n";
    let err = replay(&mut Decoder::default(), vllm)[0]
        .clone()
        .unwrap_err();
    assert_eq!(
        err.message,
        "BadRequestError: This model's maximum context length is 4096 tokens."
    );
    // A null error is no error.
    let fine = "data: {\"error\":null,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let events = replay(&mut Decoder::default(), fine);
    assert_eq!(events[0], Ok(ProviderEvent::TextDelta("ok".into())));
    assert_eq!(
        events.last(),
        Some(&Ok(ProviderEvent::Stop(StopReason::EndTurn)))
    );
}

#[test]
fn an_html_error_page_shows_its_status_and_title() {
    let page = "<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n<center><h1>504 Gateway Time-out</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";
    let err = crate::http::status_error(504, page, None);
    assert_eq!(err.kind, ProviderErrorKind::Server);
    assert_eq!(
        err.to_string(),
        "the provider had an internal error (HTTP 504): an HTML page instead of an error message: \"504 Gateway Time-out\""
    );
}

#[test]
fn a_call_after_the_largest_index_is_an_error_not_an_overflow() {
    let sse = concat!(
        r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":18446744073709551615,"id":"a","function":{"name":"f","arguments":""}}]}}]}"#,
        "\n\n",
        r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":""}}]}}]}"#,
        "\n\n",
    );
    let events = replay(&mut Decoder::default(), sse);
    let err = events.into_iter().find_map(Result::err).unwrap();
    assert_eq!(err.kind, ProviderErrorKind::Protocol);
    assert!(err.message.contains("largest index"), "{}", err.message);
}

#[test]
fn a_name_repeated_in_every_piece_is_one_name_and_an_endless_one_is_an_error() {
    let piece = |name: &str, arguments: &str| {
        format!(
            "data: {}\n\n",
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":name,"arguments":arguments}}]}}]})
        )
    };
    let finished = |pieces: &[String]| -> Vec<(String, serde_json::Value)> {
        let end = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
        replay(&mut Decoder::default(), &(pieces.concat() + end))
            .into_iter()
            .filter_map(|event| match event.unwrap() {
                ProviderEvent::ToolCallDone {
                    name, arguments, ..
                } => Some((name, arguments.unwrap())),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        finished(&[piece("get_weather", "{\"a\":"), piece("get_weather", "1}")]),
        [("get_weather".to_owned(), json!({"a": 1}))]
    );
    // A name sent in pieces is joined, up to the longest a tool name may be.
    assert_eq!(
        finished(&[piece("get_", ""), piece("weather", "{}")]),
        [("get_weather".to_owned(), json!({}))]
    );
    let endless: String = (0..100).map(|i| piece(&format!("{i:08}"), "")).collect();
    let whole = piece(&"n".repeat(257), "");
    for sse in [endless, whole] {
        let err = first_protocol_error(&mut Decoder::default(), &sse);
        assert_eq!(
            err.message,
            "openai-chat sent a tool name longer than 256 bytes"
        );
    }
}

/// Mistral takes only 9 letters and digits as a call id: another provider's ids, a
/// text-mode call's, are sent as 9 of their hash (a call and its result alike); its own
/// go as they are, and other services get every id unchanged.
#[test]
fn mistral_gets_call_ids_of_nine_letters_and_digits() {
    let call = |id: &str| ToolCall {
        id: id.into(),
        name: "files__read".into(),
        arguments: json!({"path": "a"}),
        signature: None,
        invalid_arguments: None,
        wire_id: None,
        origin: None,
    };
    let result = |id: &str| ToolResult {
        call_id: id.into(),
        wire_id: None,
        name: "files__read".into(),
        is_error: false,
        parts: vec![ResultPart::Text { text: "ok".into() }],
    };
    let req = request(vec![
        Message::user_text("read a, twice"),
        Message {
            role: Role::Assistant,
            blocks: vec![
                Block::ToolCall(call("toolu_01A09q90qw90lq917835lq9")),
                Block::ToolCall(call("Ab3dE6gH9")),
            ],
        },
        Message {
            role: Role::Tool,
            blocks: vec![
                Block::ToolResult(result("toolu_01A09q90qw90lq917835lq9")),
                Block::ToolResult(result("Ab3dE6gH9")),
            ],
        },
    ]);
    let mut codestral = build_request(&req, &PreparedImages::new());
    for_service("https://codestral.mistral.ai/v1", &mut codestral);
    let mut body = build_request(&req, &PreparedImages::new());
    for_service("https://api.mistral.ai/v1", &mut body);
    assert_eq!(codestral, body);
    let calls = body["messages"][1]["tool_calls"].as_array().unwrap();
    let made = calls[0]["id"].as_str().unwrap();
    assert_eq!(made.len(), 9);
    assert!(made.bytes().all(|b| b.is_ascii_alphanumeric()), "{made}");
    assert_eq!(calls[1]["id"], "Ab3dE6gH9");
    assert_eq!(body["messages"][2]["tool_call_id"], made);
    assert_eq!(body["messages"][3]["tool_call_id"], "Ab3dE6gH9");
    let mut elsewhere = build_request(&req, &PreparedImages::new());
    for_service("https://openrouter.ai/api/v1", &mut elsewhere);
    assert_eq!(
        elsewhere["messages"][1]["tool_calls"][0]["id"],
        "toolu_01A09q90qw90lq917835lq9"
    );
}

#[test]
fn openai_itself_gets_max_completion_tokens_and_compatible_servers_max_tokens() {
    let mut req = request(vec![Message::user_text("hi")]);
    req.max_output_tokens = Some(256);
    let body = |base: &str| {
        let mut body = build_request(&req, &PreparedImages::new());
        for_service(base, &mut body);
        (
            body.get("max_tokens").cloned(),
            body.get("max_completion_tokens").cloned(),
        )
    };
    for openai in [
        "https://api.openai.com/v1",
        "https://API.OpenAI.com/v1/",
        "https://my-team.openai.azure.com/openai/deployments/gpt-5",
        "https://my-team.cognitiveservices.azure.com/openai/v1",
        "https://my-project.services.ai.azure.com/openai/v1",
    ] {
        assert_eq!(body(openai), (None, Some(json!(256))), "{openai}");
    }
    for compatible in [
        "http://localhost:11434/v1",
        "https://openrouter.ai/api/v1",
        "https://api.openai.com.evil.example/v1",
        "not a url",
    ] {
        assert_eq!(body(compatible), (Some(json!(256)), None), "{compatible}");
    }
}

/// The finished calls of a replayed stream, as (id, name, arguments).
fn finished_calls(sse: &str) -> Vec<(String, String, serde_json::Value)> {
    replay(&mut Decoder::default(), sse)
        .into_iter()
        .filter_map(|event| match event.unwrap() {
            ProviderEvent::ToolCallDone {
                id,
                name,
                arguments,
                ..
            } => Some((id, name, arguments.unwrap())),
            _ => None,
        })
        .collect()
}

#[test]
fn parallel_calls_ollama_sends_all_at_index_0_stay_separate_calls() {
    // Ollama 0.20 (ollama#15457): each parallel call comes whole at index 0 under its own id.
    let sse = r#"data: {"id":"chatcmpl-458","object":"chat.completion.chunk","created":1775031220,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_a","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-458","object":"chat.completion.chunk","created":1775031220,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_b","index":0,"type":"function","function":{"name":"get_time","arguments":"{\"timezone\":\"Europe/Paris\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-458","object":"chat.completion.chunk","created":1775031221,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}

data: {"id":"chatcmpl-458","object":"chat.completion.chunk","created":1775031221,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":182,"completion_tokens":41,"total_tokens":223}}

data: [DONE]

"#;
    assert_eq!(
        finished_calls(sse),
        [
            (
                "call_a".to_owned(),
                "get_weather".to_owned(),
                json!({"city": "Paris"})
            ),
            (
                "call_b".to_owned(),
                "get_time".to_owned(),
                json!({"timezone": "Europe/Paris"})
            ),
        ]
    );
}

#[test]
fn pieces_after_a_new_id_at_a_taken_index_continue_the_new_call() {
    // SGLang and LiteLLM stream arguments in pieces, every call at index 0: the pieces
    // without an id belong to the call started last there.
    let sse = r#"data: {"id":"9f1c","object":"chat.completion.chunk","created":1775031300,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","index":0,"type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}

data: {"id":"9f1c","object":"chat.completion.chunk","created":1775031300,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\": "}}]},"finish_reason":null}]}

data: {"id":"9f1c","object":"chat.completion.chunk","created":1775031300,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.txt\"}"}}]},"finish_reason":null}]}

data: {"id":"9f1c","object":"chat.completion.chunk","created":1775031300,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_b","index":0,"type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}

data: {"id":"9f1c","object":"chat.completion.chunk","created":1775031300,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","function":{"arguments":"{\"path\": "}}]},"finish_reason":null}]}

data: {"id":"9f1c","object":"chat.completion.chunk","created":1775031300,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"b.txt\"}"}}]},"finish_reason":null}]}

data: {"id":"9f1c","object":"chat.completion.chunk","created":1775031301,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":null},"finish_reason":"tool_calls"}]}

data: [DONE]

"#;
    let events: Vec<_> = replay(&mut Decoder::default(), sse)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let started: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::ToolCallStarted { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, ["call_a", "call_b"]);
    assert_eq!(
        finished_calls(sse),
        [
            (
                "call_a".to_owned(),
                "read_file".to_owned(),
                json!({"path": "a.txt"})
            ),
            (
                "call_b".to_owned(),
                "read_file".to_owned(),
                json!({"path": "b.txt"})
            ),
        ]
    );
}

/// A server that sends a new id with every piece of one call, the name only in the
/// first: the pieces are still one call (a new id starts a call only with a name).
#[test]
fn pieces_under_new_ids_without_a_name_continue_the_call() {
    let sse = r#"data: {"id":"c1","object":"chat.completion.chunk","created":1775031300,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"t-1","index":0,"type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1775031300,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"t-2","index":0,"function":{"arguments":"{\"path\": "}}]},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1775031300,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"t-3","index":0,"function":{"arguments":"\"a.txt\"}"}}]},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1775031301,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"#;
    assert_eq!(
        finished_calls(sse),
        [(
            "t-1".to_owned(),
            "read_file".to_owned(),
            json!({"path": "a.txt"})
        )]
    );
}
