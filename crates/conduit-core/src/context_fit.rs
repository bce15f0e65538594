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

/// How much of the conversation a request leaves out, step by step. "Earlier outputs" are
/// the results of every tool call but the newest ones (what the model asked for last,
/// which it needs now); "earlier files and images" are those before the user's last
/// message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum ContextFit {
    /// Everything, as stored.
    Whole,
    /// Earlier outputs and files cut to their start (images left out), each with a note.
    OlderOutputsCut,
    /// Earlier outputs, files and images left out, each with a note naming its size.
    OlderOutputsLeftOut,
    /// Only the user's last message and what followed it, earlier outputs left out; a
    /// note says how many messages were left out.
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

    /// The next step that sends `messages` shorter than this one does: a step that would
    /// send the same request (no earlier outputs to cut, no earlier messages) is passed
    /// over, so the provider is not asked the same thing again.
    pub fn shorter_for(self, messages: &[Message]) -> Option<Self> {
        let now = fitted(messages, self);
        let mut next = self.shorter();
        while let Some(step) = next {
            if fitted(messages, step) != now {
                return Some(step);
            }
            next = step.shorter();
        }
        None
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
                "the conversation is longer than the model's context: the model read only your last message and what followed it, without earlier tool outputs (the conversation is kept whole here)"
            }
        }
    }
}

/// `messages` as a request at `fit` sends them. The newest tool outputs of the turn
/// running now are always whole.
pub fn fitted(messages: &[Message], fit: ContextFit) -> Vec<Message> {
    if fit == ContextFit::Whole {
        return messages.to_vec();
    }
    let last_user = messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .unwrap_or(0);
    // The outputs the model asked for last in this turn; a turn that has none yet keeps
    // no earlier turn's output whole.
    let newest_outputs = messages
        .iter()
        .rposition(|m| m.role == Role::Tool)
        .filter(|&index| index > last_user);
    let left_out = fit >= ContextFit::OlderOutputsLeftOut;
    let shortened = messages.iter().enumerate().map(|(index, message)| {
        let earlier_outputs = Some(index) != newest_outputs;
        let earlier_attachments = index < last_user;
        shortened(message, earlier_outputs, earlier_attachments, left_out)
    });
    if fit < ContextFit::LastMessageOnly {
        return shortened.collect();
    }
    let mut kept: Vec<Message> = shortened.skip(last_user).collect();
    if last_user > 0
        && let Some(first) = kept.first_mut()
    {
        let note = match last_user {
            1 => "[The earlier message of this conversation was left out to fit the model's context.]".to_owned(),
            n => format!("[The {n} earlier messages of this conversation were left out to fit the model's context.]"),
        };
        first.blocks.insert(0, Block::text(note));
    }
    kept
}

/// One message with its earlier outputs, and its files and images when it is before the
/// user's last message, cut (or `left_out`).
fn shortened(
    message: &Message,
    earlier_outputs: bool,
    earlier_attachments: bool,
    left_out: bool,
) -> Message {
    let blocks = message
        .blocks
        .iter()
        .map(|block| match block {
            Block::ToolResult(result) if earlier_outputs => Block::ToolResult(ToolResult {
                parts: vec![ResultPart::Text {
                    text: result_for_model(result, left_out),
                }],
                ..result.clone()
            }),
            Block::File { name, text } if earlier_attachments => Block::File {
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
            Block::Image { .. } if earlier_attachments => {
                Block::text("[An image was left out to fit the model's context.]")
            }
            Block::Document { name, media } if earlier_attachments => {
                Block::text(crate::content::document_not_read(
                    name,
                    media,
                    "it was left out to fit the model's context",
                ))
            }
            other => other.clone(),
        })
        .collect();
    Message {
        role: message.role,
        blocks,
    }
}

/// The size of a result's output as the tool gave it, in bytes (a long output kept as a
/// file counts whole; images and audio count apart).
fn output_bytes(result: &ToolResult) -> u64 {
    result
        .parts
        .iter()
        .map(|part| match part {
            ResultPart::Text { text } => text.len() as u64,
            ResultPart::Structured { value } => value.to_string().len() as u64,
            ResultPart::Resource {
                text: Some(text), ..
            } => text.len() as u64,
            ResultPart::LongText { media, .. } => media.bytes,
            _ => 0,
        })
        .sum()
}

/// An earlier result as one text part: its start (with its images counted), or a note.
fn result_for_model(result: &ToolResult, left_out: bool) -> String {
    let media = result
        .parts
        .iter()
        .filter(|part| matches!(part, ResultPart::Image { .. } | ResultPart::Audio { .. }))
        .count();
    let documents = result.documents().count();
    if left_out {
        let images = match media {
            0 => String::new(),
            n => format!(" and {n} image or audio part(s)"),
        };
        let images = match documents {
            0 => images,
            n => format!("{images} and {n} PDF(s)"),
        };
        return format!(
            "[The output of this earlier call ({} bytes{images}) was left out to fit the model's context.]",
            output_bytes(result)
        );
    }
    let mut kept = cut_for_model(result.text(), KEPT_OF_OLDER_OUTPUT);
    if media > 0 {
        kept.push_str(&format!(
            "\n[{media} image or audio part(s) of this earlier output were left out to fit the model's context.]"
        ));
    }
    if documents > 0 {
        kept.push_str(&format!(
            "\n[{documents} PDF(s) of this earlier output were left out to fit the model's context.]"
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
                    Block::Document {
                        name: "manual.pdf".into(),
                        media: media("manual"),
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
    fn first_the_earlier_outputs_are_cut_to_their_start_and_the_newest_are_whole() {
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
        assert_eq!(
            fit[0].blocks[3],
            Block::text(
                "[The PDF manual.pdf (2400 KB) was not sent: it was left out to fit the model's context.]"
            )
        );
        // This turn's earlier output is cut too; its newest, the messages and the calls
        // are as stored (every call keeps its result, so every protocol takes it).
        assert!(result_text(&fit[6]).len() < 2_400);
        for same in [1, 3, 4, 5, 7, 8] {
            assert_eq!(fit[same], messages[same], "message {same}");
        }
    }

    #[test]
    fn then_the_earlier_outputs_are_left_out_with_a_note_naming_their_size() {
        let messages = conversation();
        let fit = fitted(&messages, ContextFit::OlderOutputsLeftOut);
        assert_eq!(
            result_text(&fit[2]),
            "[The output of this earlier call (60000 bytes and 1 image or audio part(s)) was left out to fit the model's context.]"
        );
        assert_eq!(
            result_text(&fit[6]),
            "[The output of this earlier call (60000 bytes) was left out to fit the model's context.]"
        );
        match &fit[0].blocks[1] {
            Block::File { text, .. } => assert_eq!(
                text,
                "[This file (40000 bytes) was left out to fit the model's context.]"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(fit[8], messages[8]);
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
        assert!(result_text(&fit[2]).starts_with("[The output of this earlier call"));
        assert_eq!(fit[4], messages[8]);
        assert_eq!(ContextFit::LastMessageOnly.shorter(), None);
    }

    /// A step that would send the same request is passed over: a first message whose one
    /// tool output is the newest has nothing earlier to cut, only to leave out.
    #[test]
    fn a_step_that_changes_nothing_is_passed_over() {
        let one_turn = vec![
            Message::user_text("Read the log"),
            assistant(vec![call("c1")]),
            output("c1", &"x".repeat(90_000), false),
        ];
        assert_eq!(ContextFit::Whole.shorter_for(&one_turn), None);
        let two_calls = [
            one_turn.clone(),
            vec![assistant(vec![call("c2")]), output("c2", "small", false)],
        ]
        .concat();
        assert_eq!(
            ContextFit::Whole.shorter_for(&two_calls),
            Some(ContextFit::OlderOutputsCut)
        );
        assert_eq!(
            ContextFit::OlderOutputsLeftOut.shorter_for(&two_calls),
            None,
            "one user message: nothing earlier to leave out"
        );
        let messages = conversation();
        assert_eq!(
            ContextFit::OlderOutputsLeftOut.shorter_for(&messages),
            Some(ContextFit::LastMessageOnly)
        );
        let one = vec![
            Message::user_text("Hello"),
            assistant(vec![Block::text("Hi")]),
        ];
        let note = fitted(
            &[one.clone(), vec![Message::user_text("Again")]].concat(),
            ContextFit::LastMessageOnly,
        );
        assert_eq!(
            note[0].blocks[0],
            Block::text(
                "[The 2 earlier messages of this conversation were left out to fit the model's context.]"
            )
        );
    }

    #[test]
    fn a_history_without_a_user_message_is_sent_as_it_is() {
        let messages = vec![assistant(vec![Block::text("Hello")])];
        assert_eq!(fitted(&messages, ContextFit::LastMessageOnly), messages);
    }
}
