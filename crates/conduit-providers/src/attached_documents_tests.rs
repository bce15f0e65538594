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
    images::prepare_all(messages, media, limits)
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
        json!({"text": format!("[The PDF attention.pdf ({kb} KB) is attached to this message but was not sent: it is 19 MB as base64, more than the 16 MB of files this provider takes in one request.]")})
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
        "[The PDF page.pdf (1 KB) is attached to this message but was not sent: the stored file is not a PDF.]"
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
    let events: Vec<_> = provider
        .stream(request(messages.clone()))
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(texts(&events), "I cannot see the PDF.");
    assert!(events.iter().all(Result::is_ok), "{events:?}");
    assert_eq!(served.count(), 2);
    assert_eq!(second_part(&served.body(0))["type"], "file");
    assert_eq!(
        second_part(&served.body(1)),
        json!({"type": "text", "text": format!("[The PDF attention.pdf ({kb} KB) is attached to this message but was not sent: the model's server refused the request with it (invalid message format).]")})
    );

    let events: Vec<_> = provider
        .stream(request(messages))
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(texts(&events), "I cannot see the PDF.");
    assert_eq!(served.count(), 3, "sent once, without the PDF");
    assert_eq!(
        second_part(&served.body(2))["text"],
        format!(
            "[The PDF attention.pdf ({kb} KB) is attached to this message but was not sent: earlier in this session the model's server refused requests that carried PDFs.]"
        )
    );
}

/// A request refused for something else (a bad key) is refused again without the PDF:
/// that refusal is the error, and the model is not marked as refusing PDFs.
#[tokio::test]
async fn a_refusal_the_pdf_did_not_cause_is_the_error_and_changes_nothing_after() {
    let unauthorized = "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json";
    let (url, served) = serve_in_turn(vec![(
        unauthorized,
        json!({"error": {"message": "model 'qwen3:8b' not found, try pulling it first"}})
            .to_string(),
    )])
    .await;
    let media = MemoryMedia::new();
    let (messages, _) = stored_paper(&media, 300_000);
    let provider = chat_provider(&url, media.clone());
    let events: Vec<_> = provider
        .stream(request(messages.clone()))
        .await
        .unwrap()
        .collect()
        .await;
    let error = events
        .iter()
        .find_map(|event| event.as_ref().err())
        .expect("the refusal is the error");
    assert_eq!(error.kind, ProviderErrorKind::InvalidRequest);
    assert!(error.message.contains("not found"), "{}", error.message);
    assert_eq!(served.count(), 2);
    let _: Vec<_> = provider
        .stream(request(messages))
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(second_part(&served.body(2))["type"], "file", "still sent");
}
