//! The Gemini converters against the API's documented requests and stream chunks.

use conduit_core::content::{Block, Message, ResultPart, Role, ToolCall, ToolResult};
use conduit_core::provider::{ProviderErrorKind, StopReason};
use serde_json::json;

use super::*;
use crate::images::PreparedImage;
use crate::test_support::{media, replay, request};

#[test]
fn a_text_stream_decodes_to_deltas_usage_and_stop() {
    let sse = r#"data: {"candidates": [{"content": {"parts": [{"text": "The"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 1,"totalTokenCount": 9},"modelVersion": "gemini-2.5-flash"}

data: {"candidates": [{"content": {"parts": [{"text": " sky is blue."}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 6,"totalTokenCount": 14},"modelVersion": "gemini-2.5-flash"}

"#;
    let events: Vec<_> = replay(&mut Decoder::default(), sse)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        events,
        [
            ProviderEvent::TextDelta("The".into()),
            ProviderEvent::TextDelta(" sky is blue.".into()),
            ProviderEvent::Usage(Usage {
                input_tokens: 8,
                output_tokens: 6,
                ..Default::default()
            }),
            ProviderEvent::Stop(StopReason::EndTurn),
        ]
    );
}

/// Arguments that are not an object (an array here) make the call's arguments invalid,
/// saying what came, as the other protocols' decoders do; a missing `args` is `{}`.
#[test]
fn function_call_arguments_that_are_not_an_object_are_invalid() {
    let sse = r#"data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"fs__read","args":[1]}},{"functionCall":{"name":"fs__list"}}]},"finishReason":"STOP"}]}

"#;
    let arguments: Vec<_> = replay(&mut Decoder::default(), sse)
        .into_iter()
        .map(Result::unwrap)
        .filter_map(|e| match e {
            ProviderEvent::ToolCallDone { arguments, .. } => Some(arguments),
            _ => None,
        })
        .collect();
    assert_eq!(arguments.len(), 2);
    let invalid = arguments[0].clone().unwrap_err();
    assert_eq!(invalid.raw, "[1]");
    assert_eq!(invalid.error, "expected a JSON object, got an array");
    assert_eq!(arguments[1], Ok(json!({})));
}

#[test]
fn function_calls_keep_ids_and_thought_signatures() {
    let sse = r#"data: {"candidates": [{"content": {"parts": [{"text": "checking", "thought": true}, {"functionCall": {"id": "abc1", "name": "get_weather", "args": {"location": "Paris"}}, "thoughtSignature": "CiQB0e2Kb8"}, {"functionCall": {"name": "get_time", "args": {}}}],"role": "model"},"finishReason": "STOP","index": 0}]}

"#;
    let events: Vec<_> = replay(&mut Decoder::default(), sse)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(events[0], ProviderEvent::ReasoningDelta("checking".into()));
    let done: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::ToolCallDone {
                id,
                name,
                arguments,
                signature,
            } => Some((
                id.clone(),
                name.clone(),
                arguments.clone().unwrap(),
                signature.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        done,
        [
            (
                "abc1".into(),
                "get_weather".into(),
                json!({"location": "Paris"}),
                Some("CiQB0e2Kb8".into())
            ),
            ("gemini-call-1".into(), "get_time".into(), json!({}), None),
        ]
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Stop(StopReason::ToolUse))
    );
}

#[test]
fn errors_and_cut_streams() {
    let sse = "data: {\"error\": {\"code\": 500, \"message\": \"An internal error has occurred.\", \"status\": \"INTERNAL\"}}\n\n";
    let err = replay(&mut Decoder::default(), sse)[0].clone().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Server);
    assert_eq!(err.message, "INTERNAL: An internal error has occurred.");

    let cut = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"The\"}],\"role\": \"model\"},\"index\": 0}]}\n\n";
    let events = replay(&mut Decoder::default(), cut);
    assert_eq!(
        events.last().unwrap().clone().unwrap_err().kind,
        ProviderErrorKind::Connection
    );
}

fn conversation() -> Vec<Message> {
    vec![
        Message::user_text("Show frame 7"),
        Message {
            role: Role::Assistant,
            blocks: vec![
                Block::ToolCall(ToolCall {
                    id: "abc1".into(),
                    name: "figma__frame".into(),
                    arguments: json!({"id": 7}),
                    signature: Some("CiQB0e2Kb8".into()),
                    invalid_arguments: None,
                    wire_id: None,
                    origin: None,
                }),
                Block::ToolCall(ToolCall {
                    id: "gemini-call-1".into(),
                    name: "figma__meta".into(),
                    arguments: json!({}),
                    signature: None,
                    invalid_arguments: None,
                    wire_id: None,
                    origin: None,
                }),
            ],
        },
        Message {
            role: Role::Tool,
            blocks: vec![
                Block::ToolResult(ToolResult {
                    call_id: "abc1".into(),
                    wire_id: None,
                    name: "figma__frame".into(),
                    is_error: false,
                    parts: vec![
                        ResultPart::Text {
                            text: "frame 7".into(),
                        },
                        ResultPart::Image {
                            media: media("img1"),
                        },
                    ],
                }),
                Block::ToolResult(ToolResult {
                    call_id: "gemini-call-1".into(),
                    wire_id: None,
                    name: "figma__meta".into(),
                    is_error: true,
                    parts: vec![ResultPart::Text {
                        text: "no access".into(),
                    }],
                }),
            ],
        },
    ]
}

fn images() -> PreparedImages {
    let mut images = PreparedImages::new();
    images.insert(
        "img1".into(),
        Ok(PreparedImage {
            mime: "image/png",
            base64: "iVBOR==".into(),
        }),
    );
    images
}

#[test]
fn gemini_3_gets_images_inside_the_function_response_and_signatures_back() {
    let mut req = request(conversation());
    req.system = Some("Be brief.".into());
    req.tools = vec![conduit_core::tool::ToolSpec {
        name: "figma__frame".into(),
        title: None,
        description: "Render a frame".into(),
        input_schema: json!({"type": "object", "properties": {"id": {"type": "integer"}}}),
        output_schema: None,
        annotations: Default::default(),
    }];
    req.max_output_tokens = Some(512);
    let body = build_request(&req, &images());
    assert_eq!(
        body,
        json!({
            "contents": [
                {"role": "user", "parts": [{"text": "Show frame 7"}]},
                {"role": "model", "parts": [
                    {"functionCall": {"id": "abc1", "name": "figma__frame", "args": {"id": 7}}, "thoughtSignature": "CiQB0e2Kb8"},
                    {"functionCall": {"name": "figma__meta", "args": {}}}
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"id": "abc1", "name": "figma__frame",
                        "response": {"result": "frame 7\n[1 image(s) attached]"},
                        "parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBOR=="}}]}},
                    {"functionResponse": {"name": "figma__meta", "response": {"error": "no access"}}}
                ]}
            ],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "tools": [{"functionDeclarations": [{"name": "figma__frame", "description": "Render a frame",
                "parametersJsonSchema": {"type": "object", "properties": {"id": {"type": "integer"}}}}]}],
            "generationConfig": {"maxOutputTokens": 512}
        })
    );
}

#[test]
fn older_models_get_images_as_parts_after_the_responses() {
    let mut req = request(conversation());
    req.capabilities.images_in_tool_results = false;
    let body = build_request(&req, &images());
    let parts = body["contents"][2]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 3);
    assert!(parts[0]["functionResponse"].get("parts").is_none());
    assert_eq!(
        parts[2],
        json!({"inlineData": {"mimeType": "image/png", "data": "iVBOR=="}})
    );
}

#[test]
fn a_model_without_vision_is_told_the_images_were_left_out() {
    let mut req = request(conversation());
    req.capabilities.images_in_tool_results = false;
    req.capabilities.vision = false;
    let body = build_request(&req, &images());
    let parts = body["contents"][2]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 2, "no image part: {parts:?}");
    assert_eq!(
        parts[0]["functionResponse"]["response"]["result"],
        "frame 7\n[1 image(s) omitted: this model does not take images]"
    );
}

#[test]
fn models_are_listed_without_the_models_prefix() {
    let body = json!({"models": [
        {"name": "models/gemini-2.5-flash", "displayName": "Gemini 2.5 Flash", "supportedGenerationMethods": ["generateContent", "countTokens"]},
        {"name": "models/text-embedding-004", "supportedGenerationMethods": ["embedContent"]}
    ]});
    assert_eq!(
        parse_models(&body),
        [ModelInfo {
            id: "gemini-2.5-flash".into(),
            display_name: Some("Gemini 2.5 Flash".into())
        }]
    );
}

#[test]
fn an_answer_the_service_cuts_off_is_an_error_in_its_words_after_its_text() {
    let safety = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Here is\"}],\"role\": \"model\"},\"finishReason\": \"SAFETY\",\"index\": 0,\"safetyRatings\": [{\"category\": \"HARM_CATEGORY_DANGEROUS_CONTENT\",\"probability\": \"HIGH\",\"blocked\": true}]}],\"usageMetadata\": {\"promptTokenCount\": 8,\"totalTokenCount\": 8}}\n\n";
    let events = replay(&mut Decoder::default(), safety);
    assert_eq!(events[0], Ok(ProviderEvent::TextDelta("Here is".into())));
    let err = events[1].clone().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Stream);
    assert_eq!(
        err.message,
        "SAFETY: the answer was blocked for safety reasons"
    );
    assert_eq!(events.len(), 2);

    let recitation = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\"}],\"role\": \"model\"},\"finishReason\": \"RECITATION\",\"index\": 0}]}\n\n";
    let err = replay(&mut Decoder::default(), recitation)[0]
        .clone()
        .unwrap_err();
    assert!(err.message.starts_with("RECITATION: "), "{}", err.message);

    let malformed = "data: {\"candidates\": [{\"content\": {},\"finishReason\": \"MALFORMED_FUNCTION_CALL\",\"finishMessage\": \"Malformed function call: print(default_api.get_weather(city=))\",\"index\": 0}]}\n\n";
    let err = replay(&mut Decoder::default(), malformed)[0]
        .clone()
        .unwrap_err();
    assert_eq!(
        err.message,
        "MALFORMED_FUNCTION_CALL: Malformed function call: print(default_api.get_weather(city=))"
    );

    let blocked = "data: {\"promptFeedback\": {\"blockReason\": \"PROHIBITED_CONTENT\",\"blockReasonMessage\": \"The prompt was blocked.\"}}\n\n";
    let err = replay(&mut Decoder::default(), blocked)[0]
        .clone()
        .unwrap_err();
    assert_eq!(
        err.message,
        "the prompt was blocked: PROHIBITED_CONTENT (The prompt was blocked.)"
    );
}

/// A hostile service's finish message, block message and reason words are kept to what
/// such words are: the error is logged, stored and shown.
#[test]
fn a_huge_finish_or_block_message_is_cut_to_a_messages_length() {
    let huge = "blocked ".repeat(200_000);
    let reason = "R".repeat(10_000);
    let cut = format!(
        "data: {{\"candidates\": [{{\"content\": {{}},\"finishReason\": \"SAFETY\",\"finishMessage\": \"{huge}\",\"index\": 0}}]}}\n\n"
    );
    let err = replay(&mut Decoder::default(), &cut)[0]
        .clone()
        .unwrap_err();
    assert!(
        err.message.starts_with("SAFETY: blocked blocked"),
        "{}",
        &err.message[..40]
    );
    assert!(err.message.chars().count() < 2_100, "{}", err.message.len());
    let blocked = format!(
        "data: {{\"promptFeedback\": {{\"blockReason\": \"{reason}\",\"blockReasonMessage\": \"{huge}\"}}}}\n\n"
    );
    let err = replay(&mut Decoder::default(), &blocked)[0]
        .clone()
        .unwrap_err();
    assert!(err.message.chars().count() < 2_200, "{}", err.message.len());
    let other = format!(
        "data: {{\"candidates\": [{{\"content\": {{\"parts\": [{{\"text\": \"Hi\"}}]}},\"finishReason\": \"{reason}\",\"index\": 0}}]}}\n\n"
    );
    let events = replay(&mut Decoder::default(), &other);
    let err = events[1].clone().unwrap_err();
    assert!(err.message.chars().count() < 200, "{}", err.message.len());
    let StopReason::Other(word) = stop_reason(&reason) else {
        panic!("an unknown reason is the service's word");
    };
    assert!(word.chars().count() <= 101, "{}", word.len());
}

#[test]
fn an_error_body_sent_as_an_array_gives_its_message() {
    let body = "[{\n  \"error\": {\n    \"code\": 429,\n    \"message\": \"Resource has been exhausted (e.g. check quota).\",\n    \"status\": \"RESOURCE_EXHAUSTED\"\n  }\n}\n]";
    let err = crate::http::status_error(429, body, None);
    assert_eq!(err.kind, ProviderErrorKind::RateLimited);
    assert_eq!(
        err.message,
        "Resource has been exhausted (e.g. check quota)."
    );
}

#[test]
fn usage_counts_past_u64_do_not_overflow() {
    let sse = concat!(
        r#"data: {"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":18446744073709551615,"thoughtsTokenCount":5}}"#,
        "\n\n",
    );
    let events = replay(&mut Decoder::default(), sse);
    let usage = events
        .into_iter()
        .find_map(|event| match event {
            Ok(ProviderEvent::Usage(usage)) => Some(usage),
            _ => None,
        })
        .unwrap();
    assert_eq!(usage.output_tokens, u64::MAX);
}

#[test]
fn gemini_3_nests_only_prepared_images_and_notes_the_others_in_the_result() {
    let call = |id: &str| {
        Block::ToolCall(ToolCall {
            id: id.into(),
            name: "figma__frame".into(),
            arguments: json!({"id": 7}),
            signature: Some("CiQB0e2Kb8".into()),
            invalid_arguments: None,
            wire_id: None,
            origin: None,
        })
    };
    let result = |id: &str, parts: Vec<ResultPart>| {
        Block::ToolResult(ToolResult {
            call_id: id.into(),
            wire_id: None,
            name: "figma__frame".into(),
            is_error: false,
            parts,
        })
    };
    let image = |hash: &str| ResultPart::Image { media: media(hash) };
    let mut req = request(vec![
        Message::user_text("Show frames 7 and 8"),
        Message {
            role: Role::Assistant,
            blocks: vec![call("abc1"), call("abc2")],
        },
        Message {
            role: Role::Tool,
            blocks: vec![
                result(
                    "abc1",
                    vec![
                        ResultPart::Text {
                            text: "frame 7".into(),
                        },
                        image("img1"),
                        image("gone"),
                    ],
                ),
                result("abc2", vec![image("gone")]),
            ],
        },
    ]);
    req.model = "gemini-3-pro-preview".into();
    let mut prepared = images();
    prepared.insert(
        "gone".into(),
        Err(conduit_core::media::MediaError::Missing {
            hash: "gone".into(),
        }
        .into()),
    );
    let body = build_request(&req, &prepared);
    assert_eq!(
        body["contents"][2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"id": "abc1", "name": "figma__frame",
                "response": {"result": "frame 7\n[1 image(s) attached]\n[An image was omitted: the media file gone is missing]"},
                "parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBOR=="}}]}},
            {"functionResponse": {"id": "abc2", "name": "figma__frame",
                "response": {"result": "[An image was omitted: the media file gone is missing]"}}}
        ]})
    );

    // Earlier models get the prepared images after the responses, and the same notes.
    req.capabilities.images_in_tool_results = false;
    let body = build_request(&req, &prepared);
    let parts = body["contents"][2]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 3, "{parts:?}");
    assert_eq!(
        parts[0]["functionResponse"]["response"]["result"],
        "frame 7\n[1 image(s) attached]\n[An image was omitted: the media file gone is missing]"
    );
    assert_eq!(
        parts[2],
        json!({"inlineData": {"mimeType": "image/png", "data": "iVBOR=="}})
    );
}

/// A conversation whose calls carry no signature (another provider's model made them, or
/// a server's sampling request did) replayed to Gemini 3: the first call of each answer
/// gets Google's documented stand-in, which Gemini 3 would otherwise refuse with a 400 on
/// every later turn; a real signature is never replaced, and other models get none.
#[test]
fn gemini_3_gets_a_stand_in_signature_for_calls_that_have_none() {
    let call = |id: &str, signature: Option<&str>| {
        Block::ToolCall(ToolCall {
            id: id.into(),
            name: "lookup".into(),
            arguments: json!({}),
            signature: signature.map(str::to_owned),
            invalid_arguments: None,
            wire_id: None,
            origin: None,
        })
    };
    let answer = |blocks: Vec<Block>| Message {
        role: Role::Assistant,
        blocks,
    };
    let mut req = request(vec![
        Message::user_text("Look it up"),
        answer(vec![
            Block::text("Looking."),
            call("toolu_1", None),
            call("toolu_2", None),
        ]),
        Message::user_text("Again"),
        answer(vec![call("c3", Some("CiQB0e2Kb8")), call("c4", None)]),
    ]);
    req.model = "gemini-3-flash-preview".into();
    let body = build_request(&req, &PreparedImages::default());
    let signatures = |content: usize| -> Vec<Option<String>> {
        body["contents"][content]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|part| part.get("functionCall").is_some())
            .map(|part| part["thoughtSignature"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(
        signatures(1),
        [Some("skip_thought_signature_validator".into()), None]
    );
    assert_eq!(signatures(3), [Some("CiQB0e2Kb8".into()), None]);
    req.model = "gemini-2.5-flash".into();
    let body = build_request(&req, &PreparedImages::default());
    assert!(
        !body
            .to_string()
            .contains("skip_thought_signature_validator")
    );
}

/// Google's documentation writes a model as `models/gemini-2.5-flash`; the path holds
/// `models/` once either way.
#[test]
fn a_model_written_as_its_resource_name_is_sent_once_under_models() {
    let path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
    assert_eq!(Gemini::stream_path("models/gemini-2.5-flash"), path);
    assert_eq!(Gemini::stream_path("gemini-2.5-flash"), path);
}
