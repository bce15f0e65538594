//! What text tool-calling sends: the tools described in the system prompt with the call
//! format, and a history whose calls and results are text (results in a user message).

use conduit_core::content::{Block, Message, ResultPart, Role, ToolCall, ToolResult};
use conduit_core::tool::ToolSpec;

use super::parser::{CLOSE, OPEN};

/// The system prompt: the caller's own, then the tools and how to call them.
pub fn system_prompt(system: Option<&str>, tools: &[ToolSpec]) -> String {
    let mut out = String::new();
    if let Some(system) = system.filter(|s| !s.trim().is_empty()) {
        out.push_str(system);
        out.push_str("\n\n");
    }
    out.push_str(
        "# Tools\n\
         You can call the tools listed below. To call one, write exactly this, on its own line:\n\
         <tool_call><name>TOOL_NAME</name><arguments>{\"key\": \"value\"}</arguments></tool_call>\n\
         Rules:\n\
         - <arguments> holds one JSON object that matches the tool's input schema; write {} when it takes none.\n\
         - You may write several calls one after another. After your calls, stop writing: the results come \
         back in the next message as <tool_result name=\"TOOL_NAME\">...</tool_result>, in the order of your calls.\n\
         - Never write a <tool_result> yourself, and write <tool_call> only to call a tool.\n\
         - When you need no tool, answer normally.\n\n\
         Available tools:\n",
    );
    for tool in tools {
        out.push_str("<tool>\n<name>");
        out.push_str(&tool.name);
        out.push_str("</name>\n");
        if !tool.description.trim().is_empty() {
            out.push_str("<description>");
            out.push_str(tool.description.trim());
            out.push_str("</description>\n");
        }
        out.push_str("<input_schema>");
        out.push_str(&tool.input_schema.to_string());
        out.push_str("</input_schema>\n</tool>\n");
    }
    out
}

/// A call as the model is asked to write it.
pub fn call_text(call: &ToolCall) -> String {
    format!(
        "{OPEN}<name>{}</name><arguments>{}</arguments>{CLOSE}",
        call.name, call.arguments
    )
}

/// The history as a model without native tool calling reads it: each call is text in
/// its assistant message, each `Tool` message a user message of `<tool_result>`s.
/// Images of results go along as images when `vision` (every protocol takes images in a
/// user message), otherwise a placeholder says what was left out.
pub fn text_history(messages: &[Message], vision: bool) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for message in messages {
        let converted = match message.role {
            Role::Assistant => Message {
                role: Role::Assistant,
                blocks: assistant_blocks(&message.blocks),
            },
            Role::Tool => Message {
                role: Role::User,
                blocks: message
                    .tool_results()
                    .flat_map(|result| result_blocks(result, vision))
                    .collect(),
            },
            Role::User => message.clone(),
        };
        match out.last_mut() {
            // Results and the next user message become one message: protocols want turns
            // to alternate.
            Some(last) if last.role == Role::User && converted.role == Role::User => {
                last.blocks.extend(converted.blocks);
            }
            _ => out.push(converted),
        }
    }
    out
}

fn assistant_blocks(blocks: &[Block]) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::with_capacity(blocks.len());
    for block in blocks {
        let block = match block {
            Block::ToolCall(call) => Block::text(call_text(call)),
            other => other.clone(),
        };
        match (out.last_mut(), block) {
            (Some(Block::Text { text: last }), Block::Text { text }) => {
                if !last.ends_with('\n') {
                    last.push('\n');
                }
                last.push_str(&text);
            }
            (_, block) => out.push(block),
        }
    }
    out
}

fn result_blocks(result: &ToolResult, vision: bool) -> Vec<Block> {
    let error = if result.is_error {
        " error=\"true\""
    } else {
        ""
    };
    let mut text = format!("<tool_result name=\"{}\"{error}>\n", result.name);
    text.push_str(&result.text());
    let mut images = Vec::new();
    for part in &result.parts {
        match part {
            ResultPart::Image { media } if vision => {
                text.push_str(&format!(
                    "\n[image {}: attached after this result]",
                    images.len() + 1
                ));
                images.push(Block::Image {
                    media: media.clone(),
                });
            }
            ResultPart::Image { media } => text.push_str(&format!(
                "\n[an image ({}{}) that this model cannot be shown]",
                media.mime,
                match (media.width, media.height) {
                    (Some(w), Some(h)) => format!(", {w}×{h}"),
                    _ => String::new(),
                }
            )),
            ResultPart::Audio { media } => text.push_str(&format!(
                "\n[audio ({}) that this model cannot be given]",
                media.mime
            )),
            _ => {}
        }
    }
    for (name, media) in result.documents() {
        if vision {
            text.push_str(&format!("\n[PDF {name}: attached after this result]"));
            images.push(Block::Document {
                name: name.clone(),
                media: media.clone(),
            });
        } else {
            text.push_str(&format!(
                "\n[a PDF, {name}, that this model cannot be shown]"
            ));
        }
    }
    text.push_str("\n</tool_result>");
    let mut blocks = vec![Block::text(text)];
    blocks.extend(images);
    blocks
}
