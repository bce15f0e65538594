//! A conversation longer than the model's context, shortened for the request only: the
//! older tool outputs first, then the earlier messages. What is stored stays whole.
//!
//! The provider says when a request is too long (`ProviderErrorKind::ContextTooLong`);
//! Conduit counts no tokens of its own (each model counts differently, and the window's
//! size is rarely known), so the loop asks again one step shorter, at most three times.

use serde::{Deserialize, Serialize};

use crate::content::{Block, Message, ResultPart, Role, ToolResult, cut_for_model};

/// How much of an older output is kept at the first step (bytes, at a character
/// boundary): enough for the model to recall what the call returned.
pub const KEPT_OF_OLDER_OUTPUT: usize = 2_000;

/// How much of the conversation a request leaves out, step by step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum ContextFit {
    /// Everything, as stored.
    Whole,
    /// Tool outputs, files and images before the user's last message are cut to their
    /// start (images left out), each with a note saying so.
    OlderOutputsCut,
    /// Those outputs, files and images are left out, each with a note.
    OlderOutputsLeftOut,
    /// Only the user's last message and what followed it are sent, its earlier tool
    /// outputs (all but the newest) cut to their start; a note says how many messages
    /// were left out.
    LastMessageOnly,
}

impl ContextFit {
    /// The next shorter step, if there is one.
    pub fn shorter(self) -> Option<Self> {
        match self {
            Self::Whole => Some(Self::OlderOutputsCut),
            Self::OlderOutputsCut => Some(Self::OlderOutputsLeftOut),
            Self::OlderOutputsLeftOut => Some(Self::LastMessageOnly),
            Self::LastMessageOnly => None,
        }
    }

    /// What the user is told the request left out.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Whole => "the whole conversation was sent",
            Self::OlderOutputsCut => {
                "the conversation is longer than the model's context: earlier tool outputs and files were cut to their start for the model (they are kept whole here)"
            }
            Self::OlderOutputsLeftOut => {
                "the conversation is longer than the model's context: earlier tool outputs and files were left out for the model (they are kept whole here)"
            }
            Self::LastMessageOnly => {
                "the conversation is longer than the model's context: the model read only your last message and what followed it (the conversation is kept whole here)"
            }
        }
    }
}

/// `messages` as a request at `fit` sends them. The user's last message and what
/// followed it (the turn running now) are kept, but for `LastMessageOnly`'s cut of the
/// turn's earlier outputs; a history with no user message is sent whole.
pub fn fitted(messages: &[Message], fit: ContextFit) -> Vec<Message> {
    let Some(last_user) = messages.iter().rposition(|m| m.role == Role::User) else {
        return messages.to_vec();
    };
    let (older, current) = messages.split_at(last_user);
    match fit {
        ContextFit::Whole => messages.to_vec(),
        ContextFit::OlderOutputsCut | ContextFit::OlderOutputsLeftOut => older
            .iter()
            .map(|message| shortened(message, fit))
            .chain(current.iter().cloned())
            .collect(),
        ContextFit::LastMessageOnly => {
            let newest_outputs = current.iter().rposition(|m| m.role == Role::Tool);
            let mut kept: Vec<Message> = current
                .iter()
                .enumerate()
                .map(|(index, message)| {
                    if message.role == Role::Tool && Some(index) != newest_outputs {
                        shortened(message, ContextFit::OlderOutputsCut)
                    } else {
                        message.clone()
                    }
                })
                .collect();
            if !older.is_empty()
                && let Some(first) = kept.first_mut()
            {
                first.blocks.insert(
                    0,
                    Block::text(format!(
                        "[The {} earlier messages of this conversation were left out to fit the model's context.]",
                        older.len()
                    )),
                );
            }
            kept
        }
    }
}

/// One older message with its outputs, files and images cut or left out.
fn shortened(message: &Message, fit: ContextFit) -> Message {
    let left_out = fit >= ContextFit::OlderOutputsLeftOut;
    let blocks = message
        .blocks
        .iter()
        .map(|block| match block {
            Block::ToolResult(result) => Block::ToolResult(ToolResult {
                parts: vec![ResultPart::Text {
                    text: result_for_model(result, left_out),
                }],
                ..result.clone()
            }),
            Block::File { name, text } => Block::File {
                name: name.clone(),
                text: if left_out {
                    format!(
                        "[This file ({} bytes) was left out to fit the model's context.]",
                        text.len()
                    )
                } else {
                    cut_for_model(text.clone(), KEPT_OF_OLDER_OUTPUT)
                },
            },
            Block::Image { .. } => {
                Block::text("[An image was left out to fit the model's context.]")
            }
            other => other.clone(),
        })
        .collect();
    Message {
        role: message.role,
        blocks,
    }
}

/// An older result as one text part: its start (with its images counted), or a note.
fn result_for_model(result: &ToolResult, left_out: bool) -> String {
    let text = result.text();
    if left_out {
        return format!(
            "[The output of this earlier call ({} bytes) was left out to fit the model's context.]",
            text.len()
        );
    }
    let mut kept = cut_for_model(text, KEPT_OF_OLDER_OUTPUT);
    let media = result
        .parts
        .iter()
        .filter(|part| matches!(part, ResultPart::Image { .. } | ResultPart::Audio { .. }))
        .count();
    if media > 0 {
        kept.push_str(&format!(
            "\n[{media} image or audio part(s) of this earlier output were left out to fit the model's context.]"
        ));
    }
    kept
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::content::{MediaRef, ToolCall};
    use serde_json::json;

    fn media(hash: &str) -> MediaRef {
        serde_json::from_value(json!({"hash": hash, "mime": "image/png", "bytes": 2_400_000}))
            .unwrap()
    }

    fn call(id: &str) -> Block {
        Block::ToolCall(ToolCall {
            id: id.into(),
            name: "logs__read".into(),
            arguments: json!({}),
            signature: None,
            invalid_arguments: None,
            wire_id: None,
            origin: None,
        })
    }

    fn output(id: &str, text: &str, image: bool) -> Message {
        let mut parts = vec![ResultPart::Text { text: text.into() }];
        if image {
            parts.push(ResultPart::Image {
                media: media("frame"),
            });
        }
        Message {
            role: Role::Tool,
            blocks: vec![Block::ToolResult(ToolResult {
                call_id: id.into(),
                wire_id: None,
                name: "logs__read".into(),
                is_error: false,
                parts,
            })],
        }
    }

    fn assistant(blocks: Vec<Block>) -> Message {
        Message {
            role: Role::Assistant,
            blocks,
        }
    }

    /// A day's conversation: a 60 KB log and a frame read earlier, a 40 KB file
    /// attached, and the turn running now with two outputs of its own.
    fn conversation() -> Vec<Message> {
        let log = "ERROR disk full on /var\n".repeat(2_500);
        vec![
            Message {
                role: Role::User,
                blocks: vec![
                    Block::text("Why did the build fail?"),
                    Block::File {
                        name: "build.log".into(),
                        text: "step ok\n".repeat(5_000),
                    },
                    Block::Image {
                        media: media("screenshot"),
                    },
                ],
            },
            assistant(vec![call("c1")]),
            output("c1", &log, true),
            assistant(vec![Block::text("The disk was full.")]),
            Message::user_text("Clean it and check again"),
            assistant(vec![call("c2")]),
            output("c2", &log, false),
            assistant(vec![call("c3")]),
            output("c3", "42 GB free", false),
        ]
    }

    fn result_text(message: &Message) -> String {
        match &message.blocks[0] {
            Block::ToolResult(result) => result.text(),
            other => panic!("not a result: {other:?}"),
        }
    }

    #[test]
    fn the_whole_conversation_is_sent_until_the_model_says_it_is_too_long() {
        let messages = conversation();
        assert_eq!(fitted(&messages, ContextFit::Whole), messages);
    }

    #[test]
    fn first_the_older_outputs_are_cut_to_their_start_and_the_turn_running_now_is_whole() {
        let messages = conversation();
        let fit = fitted(&messages, ContextFit::OlderOutputsCut);
        assert_eq!(fit.len(), messages.len());
        let older = result_text(&fit[2]);
        assert!(older.starts_with("ERROR disk full on /var\n"), "{older}");
        assert!(older.len() < 2_400, "{}", older.len());
        assert!(older.contains("more bytes were left out for the model"));
        assert!(older.contains("1 image or audio part(s) of this earlier output were left out"));
        match &fit[0].blocks[1] {
            Block::File { name, text } => {
                assert_eq!(name, "build.log");
                assert!(text.len() < 2_200 && text.starts_with("step ok\n"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            fit[0].blocks[2],
            Block::text("[An image was left out to fit the model's context.]")
        );
        // The user's last message and everything after it, as stored.
        assert_eq!(fit[4..], messages[4..]);
        // Calls keep their results, so every protocol still takes the history.
        assert_eq!(fit[1], messages[1]);
    }

    #[test]
    fn then_the_older_outputs_are_left_out_with_a_note_naming_their_size() {
        let messages = conversation();
        let fit = fitted(&messages, ContextFit::OlderOutputsLeftOut);
        assert_eq!(
            result_text(&fit[2]),
            "[The output of this earlier call (60000 bytes) was left out to fit the model's context.]"
        );
        match &fit[0].blocks[1] {
            Block::File { text, .. } => assert_eq!(
                text,
                "[This file (40000 bytes) was left out to fit the model's context.]"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(fit[3], messages[3]);
        assert_eq!(fit[4..], messages[4..]);
    }

    #[test]
    fn last_only_the_users_last_message_and_what_followed_with_a_note() {
        let messages = conversation();
        let fit = fitted(&messages, ContextFit::LastMessageOnly);
        assert_eq!(fit.len(), 5);
        assert_eq!(fit[0].role, Role::User);
        assert_eq!(
            fit[0].blocks,
            vec![
                Block::text(
                    "[The 4 earlier messages of this conversation were left out to fit the model's context.]"
                ),
                Block::text("Clean it and check again"),
            ]
        );
        // The turn's earlier output is cut; its newest is whole.
        assert!(result_text(&fit[2]).len() < 2_400);
        assert_eq!(fit[4], messages[8]);
        assert_eq!(ContextFit::LastMessageOnly.shorter(), None);
    }

    #[test]
    fn a_history_without_a_user_message_is_sent_as_it_is() {
        let messages = vec![assistant(vec![Block::text("Hello")])];
        assert_eq!(fitted(&messages, ContextFit::LastMessageOnly), messages);
    }
}
