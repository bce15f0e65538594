//! An attached PDF reaches every protocol whole, in the form each API documents for a
//! document (Anthropic's `document` block, Responses' `input_file`, Chat Completions'
//! `file` part, Gemini's `inlineData`); one past the provider's request budget, or one a
//! server refuses, becomes a note the model reads in its place.

use std::sync::Arc;

use base64::Engine;
use conduit_core::content::{Block, Message, Role};
use conduit_core::media::MediaStore;
use conduit_core::provider::{ProviderErrorKind, ProviderEvent};
use conduit_core::testing::MemoryMedia;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::images::{self, PreparedImages};
use crate::test_support::{request, serve_in_turn};
use crate::{anthropic, gemini, openai_chat, openai_responses};

/// A 40-page paper of 2 MB, stored as the window stores it.
fn stored_paper(media: &MemoryMedia, size: usize) -> (Vec<Message>, Vec<u8>) {
    let bytes = conduit_core::testing::pdf(40, size);
    let stored = media.put(&bytes, Some("application/pdf")).unwrap();
    let messages = vec![Message {
        role: Role::User,
        blocks: vec![
            Block::text("What does section 3 claim?"),
            Block::Document {
                name: "attention.pdf".into(),
                media: stored,
            },
        ],
    }];
    (messages, bytes)
}

fn prepared(
    messages: &[Message],
    media: &MemoryMedia,
    limits: &images::ImageLimits,
) -> PreparedImages {
    images::prepare_all(messages, media, limits, &|_| None)
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn a_pdf_goes_to_each_protocol_whole_in_its_documented_form() {
    let media = MemoryMedia::default();
    let (messages, bytes) = stored_paper(&media, 2_000_000);
    assert!(bytes.len() >= 2_000_000);
    let data = base64(&bytes);
    let data_url = format!("data:application/pdf;base64,{data}");

    let body = anthropic::build_request(
        &request(messages.clone()),
        &prepared(&messages, &media, &images::ANTHROPIC),
    );
    assert_eq!(
        body["messages"][0]["content"],
        json!([
            {"type": "text", "text": "What does section 3 claim?"},
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": data},
                "title": "attention.pdf",
                "cache_control": {"type": "ephemeral"}
            }
        ])
    );

    let body = openai_responses::build_request(
        &request(messages.clone()),
        &prepared(&messages, &media, &images::OPENAI),
    );
    assert_eq!(
        body["input"][0]["content"],
        json!([
            {"type": "input_text", "text": "What does section 3 claim?"},
            {"type": "input_file", "filename": "attention.pdf", "file_data": data_url}
        ])
    );

    let body = openai_chat::build_request(
        &request(messages.clone()),
        &prepared(&messages, &media, &images::OPENAI),
    );
    assert_eq!(
        body["messages"][0]["content"],
        json!([
            {"type": "text", "text": "What does section 3 claim?"},
            {"type": "file", "file": {"filename": "attention.pdf", "file_data": data_url}}
        ])
    );

    let body = gemini::build_request(
        &request(messages.clone()),
        &prepared(&messages, &media, &images::GEMINI),
    );
    assert_eq!(
        body["contents"][0]["parts"],
        json!([
            {"text": "What does section 3 claim?"},
            {"text": "PDF attention.pdf:"},
            {"inlineData": {"mimeType": "application/pdf", "data": data}}
        ])
    );
}

/// A 14 MB scan is 18.7 MB as base64: more than Gemini takes inline in one request, well
/// within OpenAI's 50 MB.
#[test]
fn a_pdf_past_the_providers_request_budget_is_a_note_naming_its_size() {
    let media = MemoryMedia::default();
    let (messages, bytes) = stored_paper(&media, 14_000_000);
    let kb = bytes.len().div_ceil(1000);
    let body = gemini::build_request(
        &request(messages.clone()),
        &prepared(&messages, &media, &images::GEMINI),
    );
    assert_eq!(
        body["contents"][0]["parts"][1],
        json!({"text": format!("[The PDF attention.pdf ({kb} KB) was not sent: it is 18.7 MB as base64, more than the 16.8 MB of files this provider takes in one request.]")})
    );
    let body = openai_chat::build_request(
        &request(messages.clone()),
        &prepared(&messages, &media, &images::OPENAI),
    );
    assert_eq!(body["messages"][0]["content"][1]["type"], "file");
}

/// A file whose bytes are not a PDF (a record damaged by hand) is never sent as one.
#[test]
fn a_stored_file_that_is_no_pdf_is_a_note() {
    let media = MemoryMedia::default();
    let stored = media
        .put(b"<html>not a pdf</html>", Some("application/pdf"))
        .unwrap();
    let messages = vec![Message {
        role: Role::User,
        blocks: vec![Block::Document {
            name: "page.pdf".into(),
            media: stored,
        }],
    }];
    let body = anthropic::build_request(
        &request(messages.clone()),
        &prepared(&messages, &media, &images::ANTHROPIC),
    );
    assert_eq!(
        body["messages"][0]["content"][0]["text"],
        "[The PDF page.pdf (1 KB) was not sent: the stored file is not a PDF.]"
    );
}

const EVENT_STREAM: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream";
const BAD_REQUEST: &str = "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json";

fn chat_answer(text: &str) -> String {
    format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]}),
        json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    )
}

fn chat_provider(url: &str, media: Arc<MemoryMedia>) -> Arc<dyn conduit_core::provider::Provider> {
    let config = crate::ProviderConfig {
        protocol: crate::Protocol::OpenAiChat,
        base_url: url.to_owned(),
        api_key: None,
        http: crate::http::HttpSettings::default(),
    };
    crate::build(config, media).unwrap()
}

fn texts(events: &[Result<ProviderEvent, conduit_core::provider::ProviderError>]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            Ok(ProviderEvent::TextDelta(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Everything `provider` streams for a request of `messages`.
async fn streamed(
    provider: &Arc<dyn conduit_core::provider::Provider>,
    messages: Vec<Message>,
) -> Vec<Result<ProviderEvent, conduit_core::provider::ProviderError>> {
    provider
        .stream(request(messages))
        .await
        .unwrap()
        .collect()
        .await
}

/// What the stream said did not reach the model.
fn left_out(
    events: &[Result<ProviderEvent, conduit_core::provider::ProviderError>],
) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            Ok(ProviderEvent::LeftOut(what)) => Some(what.clone()),
            _ => None,
        })
        .collect()
}

fn second_part(body: &Value) -> Value {
    body["messages"][0]["content"][1].clone()
}

/// Ollama answers a `file` part with a 400 ("invalid message format"): the request goes
/// again with a note in the PDF's place, the model answers, and the rest of the session
/// sends that model its PDFs as notes at once.
#[tokio::test]
async fn a_server_that_refuses_pdfs_gets_a_note_and_the_session_remembers() {
    let (url, served) = serve_in_turn(vec![
        (BAD_REQUEST, json!({"error": {"message": "invalid message format", "type": "invalid_request_error"}}).to_string()),
        (EVENT_STREAM, chat_answer("I cannot see the PDF.")),
    ])
    .await;
    let media = MemoryMedia::new();
    let (messages, bytes) = stored_paper(&media, 300_000);
    let kb = bytes.len().div_ceil(1000);
    let provider = chat_provider(&url, media.clone());
    let events = streamed(&provider, messages.clone()).await;
    assert_eq!(texts(&events), "I cannot see the PDF.");
    assert!(events.iter().all(Result::is_ok), "{events:?}");
    assert_eq!(
        left_out(&events),
        [
            "The model's server refused the request with attention.pdf (invalid message format): it was sent again without it, and the model was told."
        ]
    );
    assert_eq!(served.count(), 2);
    assert_eq!(second_part(&served.body(0))["type"], "file");
    assert_eq!(
        second_part(&served.body(1)),
        json!({"type": "text", "text": format!("[The PDF attention.pdf ({kb} KB) was not sent: the model's server refused the request with it (invalid message format).]")})
    );

    let events = streamed(&provider, messages).await;
    assert_eq!(texts(&events), "I cannot see the PDF.");
    assert_eq!(
        left_out(&events),
        [
            "attention.pdf went to the model as a note: its server refused it earlier in this session."
        ]
    );
    assert_eq!(served.count(), 3, "sent once, without the PDF");
    assert_eq!(
        second_part(&served.body(2))["text"],
        format!(
            "[The PDF attention.pdf ({kb} KB) was not sent: earlier in this session the model's server refused the request that carried it.]"
        )
    );

    // Another PDF is tried again: one the model could not read does not stop the next.
    let (other, _) = stored_paper(&media, 120_000);
    let events = streamed(&provider, other).await;
    assert!(events.iter().all(Result::is_ok), "{events:?}");
    assert_eq!(served.count(), 4);
    assert_eq!(second_part(&served.body(3))["type"], "file");
}

/// Anthropic answers a request past its size with a 413: the request goes again with the
/// PDF as a note, so the conversation goes on.
#[tokio::test]
async fn a_request_too_large_with_its_pdf_goes_again_without_it() {
    let too_large = "HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json";
    let (url, served) = serve_in_turn(vec![
        (too_large, json!({"type": "error", "error": {"type": "request_too_large", "message": "Request exceeds the maximum allowed number of bytes."}}).to_string()),
        (EVENT_STREAM, format!(
            "event: message_start\ndata: {}\n\nevent: content_block_start\ndata: {}\n\nevent: content_block_delta\ndata: {}\n\nevent: message_stop\ndata: {{\"type\": \"message_stop\"}}\n\n",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-6", "usage": {"input_tokens": 10, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "The file was too large to read."}}),
        )),
    ])
    .await;
    let media = MemoryMedia::new();
    let (messages, _) = stored_paper(&media, 400_000);
    let config = crate::ProviderConfig {
        protocol: crate::Protocol::Anthropic,
        base_url: url,
        api_key: Some("sk-ant-test-0123456789".into()),
        http: crate::http::HttpSettings::default(),
    };
    let provider = crate::build(config, media.clone()).unwrap();
    let events = streamed(&provider, messages).await;
    assert_eq!(texts(&events), "The file was too large to read.");
    assert_eq!(served.count(), 2);
    assert_eq!(
        served.body(0)["messages"][0]["content"][1]["type"],
        "document"
    );
    let note = served.body(1)["messages"][0]["content"][1]["text"].clone();
    assert!(
        note.as_str().unwrap().ends_with("was not sent: the model's server refused the request with it (Request exceeds the maximum allowed number of bytes.).]"),
        "{note}"
    );
}

/// Bytes of a PDF named as an image (a server's forged content) are never sent as a
/// PDF, and cost no request: the image is a note.
#[test]
fn a_pdf_named_as_an_image_is_no_image_and_no_pdf() {
    let media = MemoryMedia::default();
    let forged = media
        .put(&conduit_core::testing::pdf(2, 5_000), Some("image/png"))
        .unwrap();
    let messages = vec![Message {
        role: Role::User,
        blocks: vec![Block::Image { media: forged }],
    }];
    let prepared = prepared(&messages, &media, &images::ANTHROPIC);
    assert!(crate::wire::sendable_documents(&prepared).is_empty());
    let body = anthropic::build_request(&request(messages), &prepared);
    assert_eq!(
        body["messages"][0]["content"][0]["text"],
        "[An image was omitted: the file is not an image in a known format]"
    );
}

/// A request refused for something else (a model not pulled) is refused again without the PDF:
/// that refusal is the error, and the model is not marked as refusing PDFs.
#[tokio::test]
async fn a_refusal_the_pdf_did_not_cause_is_the_error_and_changes_nothing_after() {
    let (url, served) = serve_in_turn(vec![(
        BAD_REQUEST,
        json!({"error": {"message": "model 'qwen3:8b' not found, try pulling it first"}})
            .to_string(),
    )])
    .await;
    let media = MemoryMedia::new();
    let (messages, _) = stored_paper(&media, 300_000);
    let provider = chat_provider(&url, media.clone());
    let events = streamed(&provider, messages.clone()).await;
    let error = events
        .iter()
        .find_map(|event| event.as_ref().err())
        .expect("the refusal is the error");
    assert_eq!(error.kind, ProviderErrorKind::InvalidRequest);
    assert!(error.message.contains("not found"), "{}", error.message);
    assert_eq!(served.count(), 2);
    assert!(
        left_out(&events).is_empty(),
        "nothing was left out in the end"
    );
    let _ = streamed(&provider, messages).await;
    assert_eq!(second_part(&served.body(2))["type"], "file", "still sent");
}

/// A tool's result embedding a PDF (a drive server's report): in the result for
/// Anthropic, Responses and Gemini, in the user message after the results for Chat
/// Completions (tool messages carry text only), each named by its URI's last part.
#[test]
fn a_pdf_a_tool_returns_reaches_every_protocol_under_its_name() {
    use conduit_core::content::{ResultPart, ToolCall, ToolResult};
    let media = MemoryMedia::default();
    let report = conduit_core::testing::pdf(6, 250_000);
    let stored = media.put(&report, Some("application/pdf")).unwrap();
    let data = base64(&report);
    let call = ToolCall {
        id: "c1".into(),
        wire_id: Some("call_1".into()),
        name: "drive__export".into(),
        arguments: json!({"file": "q3"}),
        signature: None,
        invalid_arguments: None,
        origin: None,
    };
    let messages = vec![
        Message::user_text("Export the Q3 report and sum it up"),
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
                parts: vec![
                    ResultPart::Text {
                        text: "Exported.".into(),
                    },
                    ResultPart::Resource {
                        uri: "drive://files/q3.pdf?rev=2".into(),
                        mime: Some("application/pdf".into()),
                        text: None,
                        media: Some(stored),
                    },
                ],
            })],
        },
    ];
    let asked = request(messages.clone());

    let body = anthropic::build_request(&asked, &prepared(&messages, &media, &images::ANTHROPIC));
    let result = &body["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(
        result["content"][1],
        json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}, "title": "q3.pdf"})
    );

    let body =
        openai_responses::build_request(&asked, &prepared(&messages, &media, &images::OPENAI));
    let output = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "function_call_output")
        .unwrap()["output"]
        .clone();
    assert_eq!(
        output[1],
        json!({"type": "input_file", "filename": "q3.pdf", "file_data": format!("data:application/pdf;base64,{data}")})
    );

    let body = openai_chat::build_request(&asked, &prepared(&messages, &media, &images::OPENAI));
    let sent = body["messages"].as_array().unwrap();
    let tool = sent.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .ends_with("[1 PDF(s) from this result follow in the next message]"),
        "{tool}"
    );
    assert_eq!(
        sent.last().unwrap()["content"],
        json!([
            {"type": "text", "text": "Images and PDFs returned by the tool calls above:"},
            {"type": "file", "file": {"filename": "q3.pdf", "file_data": format!("data:application/pdf;base64,{data}")}}
        ])
    );

    let body = gemini::build_request(&asked, &prepared(&messages, &media, &images::GEMINI));
    let response = &body["contents"][2]["parts"][0]["functionResponse"];
    assert_eq!(
        response["parts"],
        json!([{"inlineData": {"mimeType": "application/pdf", "data": data}}])
    );
    assert!(
        response["response"]
            .to_string()
            .contains("[1 PDF(s) attached]"),
        "{response}"
    );

    // A model that takes no images gets neither the PDF nor a broken request.
    let mut blind = asked.clone();
    blind.capabilities.vision = false;
    blind.capabilities.images_in_tool_results = false;
    let body = openai_chat::build_request(&blind, &prepared(&messages, &media, &images::OPENAI));
    let sent = body["messages"].as_array().unwrap();
    assert_eq!(sent.last().unwrap()["role"], "tool");
    assert!(
        sent.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .ends_with("[1 PDF(s) omitted: this model does not take images or PDFs]")
    );
}

/// A PDF the model read before stays when a request with a new one is refused: only the
/// new one (past the model's page limit, say) becomes a note, and only it is remembered.
#[tokio::test]
async fn a_refusal_suspects_the_new_pdf_not_one_the_model_read_before() {
    let (url, served) = serve_in_turn(vec![
        (EVENT_STREAM, chat_answer("Read the first.")),
        (
            BAD_REQUEST,
            json!({"error": {"message": "A maximum of 100 PDF pages may be provided."}})
                .to_string(),
        ),
        (EVENT_STREAM, chat_answer("Read the first again.")),
    ])
    .await;
    let media = MemoryMedia::new();
    let (mut messages, _) = stored_paper(&media, 150_000);
    let provider = chat_provider(&url, media.clone());
    let _ = streamed(&provider, messages.clone()).await;
    let thick = media
        .put(
            &conduit_core::testing::pdf(140, 200_000),
            Some("application/pdf"),
        )
        .unwrap();
    messages[0].blocks.push(Block::Document {
        name: "thesis.pdf".into(),
        media: thick,
    });
    let events = streamed(&provider, messages).await;
    assert_eq!(texts(&events), "Read the first again.");
    assert_eq!(
        left_out(&events),
        [
            "The model's server refused the request with thesis.pdf (A maximum of 100 PDF pages may be provided.): it was sent again without it, and the model was told."
        ]
    );
    let retried = served.body(2)["messages"][0]["content"].clone();
    assert_eq!(
        retried[1]["type"], "file",
        "the PDF read before stays: {retried:.300}"
    );
    assert!(
        retried[2]["text"]
            .as_str()
            .unwrap()
            .starts_with("[The PDF thesis.pdf (")
    );
}
