//! Every protocol's decoder against exact bytes: a field the protocol requires that is
//! missing is a protocol error naming the field, never a silent default; the documented
//! or observed tolerances (calls without ids, unknown event and item types) still decode.

use conduit_core::provider::{ProviderError, ProviderErrorKind, ProviderEvent, StopReason};
use serde_json::json;

use crate::http::StreamDecoder;
use crate::test_support::replay;
use crate::{anthropic, gemini, openai_chat, openai_responses};

/// The stream's last item, which must be a protocol error; its message.
fn protocol_error(events: Vec<Result<ProviderEvent, ProviderError>>) -> String {
    match events.last() {
        Some(Err(err)) if err.kind == ProviderErrorKind::Protocol => err.message.clone(),
        other => panic!("expected a protocol error, got {other:?} in {events:?}"),
    }
}

fn all_ok(events: Vec<Result<ProviderEvent, ProviderError>>) -> Vec<ProviderEvent> {
    events
        .into_iter()
        .map(|event| event.unwrap_or_else(|err| panic!("unexpected error: {err:?}")))
        .collect()
}

fn assert_names(message: &str, field: &str) {
    assert!(
        message.contains(field),
        "the error names `{field}`: {message}"
    );
}

// --- Anthropic Messages ---

fn anthropic_errors(sse: &str) -> String {
    protocol_error(replay(&mut anthropic::Decoder::default(), sse))
}

#[test]
fn anthropic_required_fields_missing_are_errors_naming_them() {
    let no_block_type = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{}}}\n\n";
    assert_names(&anthropic_errors(no_block_type), "`type`");
    let no_name = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"input\":{}}}\n\n";
    assert_names(&anthropic_errors(no_name), "`name`");
    let no_id = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"name\":\"get_weather\",\"input\":{}}}\n\n";
    assert_names(&anthropic_errors(no_id), "`id`");
    let no_index = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n";
    assert_names(&anthropic_errors(no_index), "`index`");
    let no_text = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\"}}\n\n";
    assert_names(&anthropic_errors(no_text), "`text`");
    let no_event_type =
        "data: {\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n";
    assert_names(&anthropic_errors(no_event_type), "`type`");
}

#[test]
fn anthropic_unknown_event_block_and_delta_types_are_ignored() {
    let sse = "event: ping\ndata: {\"type\":\"ping\"}\n\n\
event: future_event\ndata: {\"type\":\"future_event\",\"whatever\":[1]}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"web_search\",\"input\":{}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"citations_delta\",\"citation\":{}}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let events = all_ok(replay(&mut anthropic::Decoder::default(), sse));
    assert!(
        !events.iter().any(|e| matches!(
            e,
            ProviderEvent::ToolCallStarted { .. } | ProviderEvent::ToolCallDone { .. }
        )),
        "a server tool is not Conduit's call: {events:?}"
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Stop(StopReason::EndTurn))
    );
}

#[test]
fn anthropic_stop_reasons_map_by_its_table() {
    use anthropic::stop_reason;
    assert_eq!(stop_reason("end_turn"), StopReason::EndTurn);
    assert_eq!(stop_reason("stop_sequence"), StopReason::EndTurn);
    assert_eq!(stop_reason("tool_use"), StopReason::ToolUse);
    assert_eq!(stop_reason("max_tokens"), StopReason::MaxTokens);
    assert_eq!(
        stop_reason("model_context_window_exceeded"),
        StopReason::MaxTokens
    );
    assert_eq!(stop_reason("refusal"), StopReason::Refusal);
    assert_eq!(
        stop_reason("pause_turn"),
        StopReason::Other("pause_turn".into())
    );
    // Another protocol's words are not this one's.
    assert_eq!(stop_reason("STOP"), StopReason::Other("STOP".into()));
}

// --- OpenAI Responses ---

fn responses_errors(sse: &str) -> String {
    protocol_error(replay(&mut openai_responses::Decoder::default(), sse))
}

#[test]
fn responses_required_fields_missing_are_errors_naming_them() {
    let no_call_id = "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"arguments\":\"\",\"name\":\"get_weather\"}}\n\n";
    assert_names(&responses_errors(no_call_id), "`call_id`");
    let no_name = "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"arguments\":\"{}\",\"call_id\":\"call_1\"}}\n\n";
    assert_names(&responses_errors(no_name), "`name`");
    let no_item_type = "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"get_weather\"}}\n\n";
    assert_names(&responses_errors(no_item_type), "`type`");
    let no_delta = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0}\n\n";
    assert_names(&responses_errors(no_delta), "`delta`");
    let no_status = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"usage\":null}}\n\n";
    assert_names(&responses_errors(no_status), "`status`");
}

#[test]
fn responses_unknown_events_and_items_are_ignored_and_a_call_needs_no_item_id() {
    let sse = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\n\
event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"ws_1\",\"type\":\"web_search_call\",\"status\":\"in_progress\"}}\n\n\
event: response.future_event\ndata: {\"type\":\"response.future_event\"}\n\n\
event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":{\"type\":\"function_call\",\"arguments\":\"{\\\"q\\\":1}\",\"call_id\":\"call_1\",\"name\":\"search\"}}\n\n\
event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}}\n\n";
    let events = all_ok(replay(&mut openai_responses::Decoder::default(), sse));
    assert!(
        events.contains(&ProviderEvent::ToolCallDone {
            id: "call_1".into(),
            name: "search".into(),
            arguments: Ok(json!({"q": 1})),
            signature: None,
        }),
        "{events:?}"
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Stop(StopReason::ToolUse))
    );
}

#[test]
fn responses_incomplete_reasons_map_by_its_table() {
    use openai_responses::stop_reason;
    assert_eq!(stop_reason("max_output_tokens"), StopReason::MaxTokens);
    assert_eq!(stop_reason("content_filter"), StopReason::Refusal);
    assert_eq!(
        stop_reason("interrupted"),
        StopReason::Other("interrupted".into())
    );
}

// --- OpenAI Chat Completions ---

fn chat_errors(sse: &str) -> String {
    protocol_error(replay(&mut openai_chat::Decoder::default(), sse))
}

#[test]
fn chat_required_fields_missing_are_errors_naming_them() {
    let no_name = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_abc\",\"type\":\"function\",\"function\":{\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\n";
    assert_names(&chat_errors(no_name), "function.name");
    let not_json = "data: {\"choices\":[\n\n";
    assert!(chat_errors(not_json).contains("not JSON"));
}

#[test]
fn chat_calls_without_ids_and_choices_without_deltas_decode() {
    let sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\"}}]},\"finish_reason\":null}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Paris\\\"}\"}}]},\"finish_reason\":null}]}\n\n\
data: {\"choices\":[{\"index\":0,\"finish_reason\":\"tool_calls\"}],\"usage\":null}\n\n\
data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7}}\n\n\
data: [DONE]\n\n";
    let events = all_ok(replay(&mut openai_chat::Decoder::default(), sse));
    assert!(
        events.contains(&ProviderEvent::ToolCallDone {
            id: "call_0".into(),
            name: "get_weather".into(),
            arguments: Ok(json!({"city": "Paris"})),
            signature: None,
        }),
        "{events:?}"
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Stop(StopReason::ToolUse))
    );
}

/// Gemini's OpenAI-compatible endpoint has been seen to send whole calls without
/// `index`: each named piece starts the next call, in one chunk or across chunks.
#[test]
fn chat_calls_without_an_index_each_start_the_next_call() {
    let sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"first\",\"arguments\":\"{}\"}},{\"id\":\"b\",\"type\":\"function\",\"function\":{\"name\":\"second\",\"arguments\":\"{\\\"x\\\":1}\"}}]},\"finish_reason\":null}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"third\",\"arguments\":\"{\"}}]},\"finish_reason\":null}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n\
data: [DONE]\n\n";
    let events = all_ok(replay(&mut openai_chat::Decoder::default(), sse));
    let done: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::ToolCallDone {
                id,
                name,
                arguments,
                ..
            } => Some((id.clone(), name.clone(), arguments.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        done,
        vec![
            ("a".to_owned(), "first".to_owned(), Ok(json!({}))),
            ("b".to_owned(), "second".to_owned(), Ok(json!({"x": 1}))),
            ("c".to_owned(), "third".to_owned(), Ok(json!({}))),
        ],
        "{events:?}"
    );
}

#[test]
fn chat_content_sent_as_parts_keeps_its_text() {
    // Mistral's reasoning models stream `content` as a list of parts.
    let sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":[{\"type\":\"thinking\",\"thinking\":[{\"type\":\"text\",\"text\":\"Hmm\"}]},{\"type\":\"text\",\"text\":\"Yes\"}]},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let events = all_ok(replay(&mut openai_chat::Decoder::default(), sse));
    assert_eq!(
        events,
        vec![
            ProviderEvent::TextDelta("Yes".into()),
            ProviderEvent::Stop(StopReason::EndTurn)
        ]
    );
}

#[test]
fn chat_finish_reasons_map_by_its_table() {
    use openai_chat::stop_reason;
    assert_eq!(stop_reason("stop"), StopReason::EndTurn);
    assert_eq!(stop_reason("tool_calls"), StopReason::ToolUse);
    assert_eq!(stop_reason("function_call"), StopReason::ToolUse);
    assert_eq!(stop_reason("length"), StopReason::MaxTokens);
    assert_eq!(stop_reason("content_filter"), StopReason::Refusal);
    assert_eq!(stop_reason("error"), StopReason::Other("error".into()));
    assert_eq!(
        stop_reason("end_turn"),
        StopReason::Other("end_turn".into())
    );
}

// --- Gemini ---

#[test]
fn gemini_a_function_call_without_a_name_is_an_error_naming_it() {
    let sse = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"args\":{\"city\":\"Paris\"}}}],\"role\":\"model\"},\"index\":0}]}\n\n";
    let message = protocol_error(replay(&mut gemini::Decoder::default(), sse));
    assert_names(&message, "`name`");
}

#[test]
fn gemini_calls_without_ids_are_numbered_and_other_parts_ignored() {
    let sse = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"executableCode\":{\"language\":\"PYTHON\",\"code\":\"1\"}},{\"functionCall\":{\"name\":\"get_weather\",\"args\":{\"city\":\"Paris\"}}},{\"functionCall\":{\"name\":\"get_time\"}}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":3,\"candidatesTokenCount\":4}}\n\n";
    let events = all_ok(replay(&mut gemini::Decoder::default(), sse));
    let done: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::ToolCallDone {
                id,
                name,
                arguments,
                ..
            } => Some((id.as_str(), name.as_str(), arguments.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        done,
        vec![
            ("gemini-call-0", "get_weather", Ok(json!({"city": "Paris"}))),
            ("gemini-call-1", "get_time", Ok(json!({}))),
        ]
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Stop(StopReason::ToolUse))
    );
}

#[test]
fn gemini_finish_reasons_map_by_its_table() {
    use gemini::stop_reason;
    assert_eq!(stop_reason("STOP"), StopReason::EndTurn);
    assert_eq!(stop_reason("MAX_TOKENS"), StopReason::MaxTokens);
    assert_eq!(stop_reason("SAFETY"), StopReason::Refusal);
    assert_eq!(
        stop_reason("FINISH_REASON_UNSPECIFIED"),
        StopReason::Other("FINISH_REASON_UNSPECIFIED".into())
    );
    assert_eq!(stop_reason("stop"), StopReason::Other("stop".into()));
}

#[test]
fn every_decoder_reads_an_error_it_does_not_describe_as_the_services_error() {
    // An error event whose other fields do not fit the protocol's shape is still the
    // service's failure, not a protocol error.
    let data =
        "{\"error\":{\"message\":\"overloaded\",\"code\":\"busy\"},\"choices\":7,\"candidates\":7}";
    let decoders: Vec<Box<dyn StreamDecoder>> = vec![
        Box::new(openai_chat::Decoder::default()),
        Box::new(gemini::Decoder::default()),
    ];
    for mut decoder in decoders {
        let err = decoder.decode(None, data).unwrap_err();
        assert_eq!(err.kind, ProviderErrorKind::Stream);
        assert_eq!(err.message, "busy: overloaded");
    }
}
