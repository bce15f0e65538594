//! An attached text file reaches every protocol as text headed by its name, after the
//! message's own text and beside its images, in the exact shape each API documents for
//! a user's text.

use conduit_core::content::{Block, Message, Role};
use serde_json::{Value, json};

use crate::images::{PreparedImage, PreparedImages};
use crate::test_support::{media, request};
use crate::{anthropic, gemini, openai_chat, openai_responses};

const HEADED: &str = "File plan.md:\n\n# Plan\n- ship\n";

fn message(with_image: bool) -> Vec<Message> {
    let mut blocks = vec![Block::text("Summarise this")];
    if with_image {
        blocks.push(Block::Image {
            media: media("img1"),
        });
    }
    blocks.push(Block::File {
        name: "plan.md".into(),
        text: "# Plan\n- ship\n".into(),
    });
    vec![Message {
        role: Role::User,
        blocks,
    }]
}

fn prepared() -> PreparedImages {
    let mut images = PreparedImages::new();
    images.insert(
        "img1".into(),
        Ok(PreparedImage {
            mime: "image/png",
            base64: "img1==".into(),
        }),
    );
    images
}

fn first_message(body: &Value, key: &str) -> Value {
    body[key][0].clone()
}

#[test]
fn an_attached_file_goes_to_every_protocol_as_text_headed_by_its_name() {
    let anthropic = anthropic::build_request(&request(message(false)), &prepared());
    assert_eq!(
        first_message(&anthropic, "messages"),
        json!({"role": "user", "content": [
            {"type": "text", "text": "Summarise this"},
            {"type": "text", "text": HEADED, "cache_control": {"type": "ephemeral"}}
        ]})
    );
    let gemini = gemini::build_request(&request(message(false)), &prepared());
    assert_eq!(
        first_message(&gemini, "contents"),
        json!({"role": "user", "parts": [{"text": "Summarise this"}, {"text": HEADED}]})
    );
    let responses = openai_responses::build_request(&request(message(false)), &prepared());
    assert_eq!(
        first_message(&responses, "input"),
        json!({"role": "user", "content": [
            {"type": "input_text", "text": "Summarise this"},
            {"type": "input_text", "text": HEADED}
        ]})
    );
    // Chat Completions takes a message without images as one string (what every
    // OpenAI-compatible server reads); with images, as parts.
    let chat = openai_chat::build_request(&request(message(false)), &prepared());
    assert_eq!(
        first_message(&chat, "messages"),
        json!({"role": "user", "content": format!("Summarise this\n\n{HEADED}")})
    );
    let chat = openai_chat::build_request(&request(message(true)), &prepared());
    assert_eq!(
        first_message(&chat, "messages"),
        json!({"role": "user", "content": [
            {"type": "text", "text": "Summarise this"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,img1=="}},
            {"type": "text", "text": HEADED}
        ]})
    );
}
