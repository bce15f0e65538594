//! The conversation model: messages as ordered lists of blocks, the same for every provider.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message. Tool results travel in their own `Tool` message right after the
/// assistant message whose calls they answer; each protocol maps that to its own form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    Tool,
}

/// A stored media file (image or audio), referenced by its content hash. Bytes never
/// travel inside messages; providers and the window load them from the media store.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
pub struct MediaRef {
    /// Hex SHA-256 of the bytes.
    pub hash: String,
    /// The type the bytes have (detected from them, not taken from a declaration).
    pub mime: String,
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text {
        text: String,
    },
    Image {
        media: MediaRef,
    },
    /// A text file the user attached (code, notes, a CSV): its name, without folders, and
    /// its text, checked by [`crate::attached`]. Models read it as its text headed by its
    /// name ([`file_for_model`]); the window shows it as the file.
    File {
        name: String,
        text: String,
    },
    /// A PDF the user attached: its name, without folders, and the stored file, checked by
    /// [`crate::attached::check_document`]. Models that read PDFs get the file itself
    /// (pages as text and images); the window shows it as the file.
    Document {
        name: String,
        media: MediaRef,
    },
    /// The model's reasoning, with what its provider needs to accept it back.
    Reasoning {
        text: String,
        /// Anthropic's thinking signature.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        /// OpenAI Responses' encrypted reasoning, or Anthropic's redacted thinking data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encrypted: Option<String>,
        /// The provider's id for the reasoning item (OpenAI Responses).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The protocol that produced it; replay goes only to the same protocol.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        protocol: Option<String>,
        /// The provider configuration and model that produced it (`provider/model`; see
        /// [`producer`]): its signature and encrypted content are valid only there (an
        /// OpenAI organisation's encrypted reasoning is refused by Azure). `None` in
        /// conversations saved before it existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        producer: Option<String>,
    },
    ToolCall(ToolCall),
    ToolResult(ToolResult),
}

impl Block {
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// Every stored file this block references (images, audio, long outputs, binary
    /// resources), in order: the one answer history (media kept alive) and export
    /// (media copied out) share.
    pub fn media(&self) -> Vec<&MediaRef> {
        match self {
            Self::Image { media } | Self::Document { media, .. } => vec![media],
            Self::ToolResult(result) => result.parts.iter().filter_map(ResultPart::media).collect(),
            Self::Text { .. } | Self::File { .. } | Self::Reasoning { .. } | Self::ToolCall(_) => {
                Vec::new()
            }
        }
    }
}

/// Text attached to a user's message as every model reads it: what it is and its name,
/// then the text (`Resource file:///notes.md:`, `File plan.md:`), so that models read a
/// server's resource and a file alike.
pub fn headed(kind: &str, name: &str, text: &str) -> String {
    format!("{kind} {name}:\n\n{text}")
}

/// An attached file as every model reads it ([`headed`]).
pub fn file_for_model(name: &str, text: &str) -> String {
    headed("File", name, text)
}

/// What a model reads in place of an attached PDF it is not given, and why (`reason`).
pub fn document_not_read(name: &str, media: &MediaRef, reason: &str) -> String {
    format!(
        "[The PDF {name} ({} KB) was not sent: {reason}.]",
        media.bytes.div_ceil(1000)
    )
}

/// A model's request to run a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct ToolCall {
    /// Conduit's own id for the call, unique in the conversation: every event, result,
    /// approval and window state names the call by it. (In conversations saved before
    /// `wire_id` existed it is the provider's id.)
    pub id: String,
    /// The provider's id for the call, which only goes back to the provider: providers
    /// repeat ids (per response counters, a model repeating one), so it names nothing
    /// in Conduit. `None` in conversations saved before it existed: `id` is then the
    /// provider's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_id: Option<String>,
    /// The exposed name the model called.
    pub name: String,
    /// The arguments as the model wrote them, parsed; `{}` when it wrote none.
    #[ts(type = "unknown")]
    pub arguments: Value,
    /// A provider's opaque token that must be sent back with the call (Gemini's
    /// `thoughtSignature`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Set when the model's arguments were not valid JSON (`arguments` is then `{}`):
    /// the call is answered with this error instead of running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_arguments: Option<String>,
    /// The real server and tool behind the exposed name, as the host knows them when
    /// the call is made (`None` for built-in tools and unknown names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<ToolOrigin>,
}

impl ToolCall {
    /// The id to send to the provider with this call.
    pub fn wire_id(&self) -> &str {
        self.wire_id.as_deref().unwrap_or(&self.id)
    }
}

/// Where a tool comes from: an MCP server and the tool's own name on it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
pub struct ToolOrigin {
    pub server: String,
    pub tool: String,
}

/// A new call id, unique in the conversation (and beyond): `call_` and a UUID v7.
pub fn new_call_id() -> String {
    format!("call_{}", uuid::Uuid::now_v7().simple())
}

/// The longest call id Conduit makes for a provider: OpenAI's Chat Completions refuses a
/// longer `tool_calls[].id` (seen through proxies that repeat ids; Conduit's own are 37).
pub const MAX_MADE_WIRE_ID_LEN: usize = 40;

/// The provider ids the calls in `messages` go back to the provider under.
pub fn wire_ids_of(messages: &[Message]) -> HashSet<String> {
    messages
        .iter()
        .flat_map(Message::tool_calls)
        .map(|call| call.wire_id().to_owned())
        .collect()
}

/// The id a finished call goes back to the provider under, `used` holding the ids the
/// conversation's calls already go under (this one is added): the provider's own, unless
/// a call already goes under it (a model repeating an id in one response, a server that
/// numbers its calls from 0 in every response), which strict APIs refuse; then that id
/// with the first free `_2`, `_3`, ... after it. An empty id, or a suffixed one past
/// [`MAX_MADE_WIRE_ID_LEN`], gives way to Conduit's own (`None`).
pub fn unique_wire_id(used: &mut HashSet<String>, wire_id: String) -> Option<String> {
    if wire_id.is_empty() {
        return None;
    }
    let mut unique = wire_id.clone();
    let mut suffix = 2u64;
    while used.contains(&unique) {
        unique = format!("{wire_id}_{suffix}");
        suffix += 1;
    }
    if unique != wire_id && unique.len() > MAX_MADE_WIRE_ID_LEN {
        return None;
    }
    used.insert(unique.clone());
    Some(unique)
}

/// How much of a tool's text output goes to a model (100 KB).
pub const MODEL_TEXT_LIMIT: usize = 100 * 1024;

/// Tool output text longer than this is kept as a file with a preview (1 MiB).
pub const LONG_TEXT: usize = 1024 * 1024;

/// The start of `text`: at most `limit` bytes, cut at a character boundary.
pub fn text_start(text: &str, limit: usize) -> &str {
    let mut cut = limit.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// `text` cut to at most `limit` bytes (at a character boundary) with a note saying so.
pub fn cut_for_model(mut text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let cut = text_start(&text, limit).len();
    let dropped = text.len() - cut;
    text.truncate(cut);
    text.push_str(&cut_note(dropped));
    text
}

fn cut_note(dropped: usize) -> String {
    format!(
        "\n[Output cut here: {dropped} more bytes were left out for the model. The whole output is kept in Conduit.]"
    )
}

/// The outcome of one tool call. Every call gets exactly one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct ToolResult {
    /// The call's [`ToolCall::id`].
    pub call_id: String,
    /// The call's [`ToolCall::wire_id`], which goes to the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_id: Option<String>,
    /// The tool's name, which some protocols (Gemini) repeat in the result.
    pub name: String,
    pub is_error: bool,
    pub parts: Vec<ResultPart>,
}

impl ToolResult {
    /// An error result carrying one text part.
    pub fn error(call: &ToolCall, message: impl Into<String>) -> Self {
        Self {
            call_id: call.id.clone(),
            wire_id: call.wire_id.clone(),
            name: call.name.clone(),
            is_error: true,
            parts: vec![ResultPart::Text {
                text: message.into(),
            }],
        }
    }

    /// The call id to send to the provider with this result.
    pub fn wire_id(&self) -> &str {
        self.wire_id.as_deref().unwrap_or(&self.call_id)
    }

    /// The text parts joined, as protocols that carry only text need them, cut at
    /// [`MODEL_TEXT_LIMIT`] with a note (the parts keep the whole text for display).
    /// A huge output is never copied whole: only what the model gets is built.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let mut dropped = 0usize;
        for (piece, left_out) in self.text_pieces() {
            let separator = usize::from(!out.is_empty());
            let room = MODEL_TEXT_LIMIT.saturating_sub(out.len() + separator);
            let kept = if dropped == 0 {
                text_start(&piece, room)
            } else {
                ""
            };
            if kept.is_empty() && !piece.is_empty() {
                dropped += separator + piece.len();
            } else {
                if separator == 1 {
                    out.push('\n');
                }
                out.push_str(kept);
                dropped += piece.len() - kept.len();
            }
            dropped += left_out;
        }
        if dropped > 0 {
            out.push_str(&cut_note(dropped));
        }
        out
    }

    /// The text parts joined, uncut (a long text as its preview and a note).
    pub fn full_text(&self) -> String {
        self.text_pieces()
            .map(|(piece, left_out)| match left_out {
                0 => piece,
                n => format!("{piece}\n[{n} more bytes are in the whole output file]").into(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The text of every part whole (a long output's preview, whose file is not read),
    /// without the notes the model gets about what was cut: what a search of the history
    /// finds. [`ToolResult::text`] stops at the model's limit.
    pub fn searchable_text(&self) -> String {
        self.text_pieces()
            .map(|(piece, _)| piece)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Each part as the text a text-only protocol carries (media parts give none), with
    /// how many bytes of it are not in the piece (a long text's rest).
    fn text_pieces(&self) -> impl Iterator<Item = (std::borrow::Cow<'_, str>, usize)> {
        use std::borrow::Cow;
        self.parts.iter().filter_map(|part| {
            if let ResultPart::LongText { preview, media } = part {
                let rest = usize::try_from(media.bytes)
                    .unwrap_or(usize::MAX)
                    .saturating_sub(preview.len());
                return Some((Cow::Borrowed(preview.as_str()), rest));
            }
            let piece = match part {
                ResultPart::Text { text } => Cow::Borrowed(text.as_str()),
                ResultPart::Structured { value } => Cow::Owned(value.to_string()),
                ResultPart::ResourceLink { uri, name, .. } => Cow::Owned(format!(
                    "[resource {}: {uri}]",
                    name.as_deref().unwrap_or("link")
                )),
                ResultPart::Resource {
                    uri, text: Some(t), ..
                } => Cow::Owned(format!("[resource {uri}]\n{t}")),
                ResultPart::Resource { uri, mime, .. } => Cow::Owned(format!(
                    "[resource {uri}: {} binary content]",
                    mime.as_deref().unwrap_or("unknown")
                )),
                ResultPart::Image { .. }
                | ResultPart::Audio { .. }
                | ResultPart::LongText { .. }
                | ResultPart::View { .. } => return None,
            };
            Some((piece, 0))
        })
    }

    /// The images among the parts, in order.
    pub fn images(&self) -> impl Iterator<Item = &MediaRef> {
        self.parts.iter().filter_map(|part| match part {
            ResultPart::Image { media } => Some(media),
            _ => None,
        })
    }

    /// The PDFs among the embedded resources, in order, each with the name its URI ends
    /// in ([`resource_document_name`]: `drive://files/Q3%20report.pdf?rev=2` is
    /// `Q3 report.pdf`).
    pub fn documents(&self) -> impl Iterator<Item = (String, &MediaRef)> {
        self.parts.iter().filter_map(|part| match part {
            ResultPart::Resource {
                uri,
                media: Some(media),
                ..
            } if media.mime == crate::attached::PDF_MIME => {
                Some((resource_document_name(uri), media))
            }
            _ => None,
        })
    }
}

/// The name a server's PDF goes under: its URI's last path part, percent-decoded, as an
/// attached file's name is kept ([`crate::attached::file_name`]: what hides or reorders
/// text shown as codes, at most 255 bytes), or `document.pdf` when that leaves none.
pub fn resource_document_name(uri: &str) -> String {
    let decoded = percent_encoding::percent_decode_str(resource_name(uri)).decode_utf8_lossy();
    crate::attached::file_name(&decoded).unwrap_or_else(|_| "document.pdf".to_owned())
}

/// The last part of a resource's URI's path, or the whole URI when it has none.
pub fn resource_name(uri: &str) -> &str {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    match path.trim_end_matches('/').rsplit('/').next() {
        Some(last) if !last.is_empty() => last,
        _ => uri,
    }
}

/// One piece of a tool's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResultPart {
    Text {
        text: String,
    },
    Image {
        media: MediaRef,
    },
    Audio {
        media: MediaRef,
    },
    /// A link to a resource the server offers.
    ResourceLink {
        uri: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// A resource embedded in the result: text, or binary content stored as media.
    Resource {
        uri: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media: Option<MediaRef>,
    },
    /// Structured JSON content (MCP `structuredContent`).
    Structured {
        #[ts(type = "unknown")]
        value: Value,
    },
    /// Text over [`LONG_TEXT`] (or structured content that large, as JSON): its start,
    /// and the whole of it as a stored file (`text/plain` or `application/json`), so a
    /// huge output is not carried through events, history and the database.
    LongText {
        preview: String,
        media: MediaRef,
    },
    /// The tool has an interactive view (MCP Apps, `io.modelcontextprotocol/ui`): its
    /// `ui://` resource on the tool's server, and the structured content only the view
    /// gets (the model gets the text content). Never sent to a model.
    View {
        uri: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(type = "unknown")]
        structured: Option<Value>,
    },
}

impl ResultPart {
    /// The stored file this part references, if any.
    pub fn media(&self) -> Option<&MediaRef> {
        match self {
            Self::Image { media } | Self::Audio { media } | Self::LongText { media, .. } => {
                Some(media)
            }
            Self::Resource { media, .. } => media.as_ref(),
            Self::Text { .. }
            | Self::ResourceLink { .. }
            | Self::Structured { .. }
            | Self::View { .. } => None,
        }
    }
}

/// A message: who wrote it and its blocks, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Message {
    pub role: Role,
    pub blocks: Vec<Block>,
}

impl Message {
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            blocks: vec![Block::text(text)],
        }
    }

    /// The text blocks joined.
    pub fn text(&self) -> String {
        self.blocks
            .iter()
            .filter_map(|block| match block {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("")
    }

    /// The text blocks and the attached files as one text, for a protocol that takes a
    /// user's message as a string: text blocks joined as [`Message::text`] joins them,
    /// each file apart from what is around it by a blank line ([`file_for_model`]).
    pub fn text_with_files(&self) -> String {
        let mut pieces: Vec<String> = Vec::new();
        let mut text_open = false;
        for block in &self.blocks {
            match block {
                Block::Text { text } => match pieces.last_mut() {
                    Some(last) if text_open => last.push_str(text),
                    _ => {
                        pieces.push(text.clone());
                        text_open = true;
                    }
                },
                Block::File { name, text } => {
                    pieces.push(file_for_model(name, text));
                    text_open = false;
                }
                Block::Document { name, media } => {
                    pieces.push(document_not_read(name, media, "this model reads text only"));
                    text_open = false;
                }
                _ => {}
            }
        }
        pieces.retain(|piece| !piece.is_empty());
        pieces.join("\n\n")
    }

    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.blocks.iter().filter_map(|block| match block {
            Block::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResult> {
        self.blocks.iter().filter_map(|block| match block {
            Block::ToolResult(result) => Some(result),
            _ => None,
        })
    }
}

/// The name reasoning is stamped with: the user's name for the provider configuration and
/// the model, which together say where its signature and encrypted content are valid.
pub fn producer(provider: &str, model: &str) -> String {
    format!("{provider}/{model}")
}

/// `messages` as they go to `producer`: reasoning another provider or model produced (or
/// a conversation saved before reasoning was stamped) is left out, as its signature or
/// encrypted content would be refused there ("invalid signature" on every later turn).
/// Every message goes as it is when the producer is not known.
pub fn replayable_to(messages: &[Message], producer: Option<&str>) -> Vec<Message> {
    let Some(producer) = producer else {
        return messages.to_vec();
    };
    messages
        .iter()
        .map(|message| Message {
            role: message.role,
            blocks: message
                .blocks
                .iter()
                .filter(|block| match block {
                    Block::Reasoning {
                        producer: made_by, ..
                    } => made_by.as_deref() == Some(producer),
                    _ => true,
                })
                .cloned()
                .collect(),
        })
        .collect()
}

/// Makes a history valid for every provider: each tool call gets a result, in a `Tool`
/// message right after its assistant message. Calls without one (a crash, a stop) get
/// an error result saying the call was interrupted.
pub fn repair_history(messages: &mut Vec<Message>) {
    let mut index = 0;
    while index < messages.len() {
        let calls: Vec<ToolCall> = match messages.get(index) {
            Some(message) if message.role == Role::Assistant => {
                message.tool_calls().cloned().collect()
            }
            _ => Vec::new(),
        };
        if calls.is_empty() {
            index += 1;
            continue;
        }
        let next_is_tool = messages
            .get(index + 1)
            .is_some_and(|next| next.role == Role::Tool);
        if !next_is_tool {
            messages.insert(
                index + 1,
                Message {
                    role: Role::Tool,
                    blocks: Vec::new(),
                },
            );
        }
        if let Some(results) = messages.get_mut(index + 1) {
            for call in &calls {
                let answered = results.tool_results().any(|r| r.call_id == call.id);
                if !answered {
                    results.blocks.push(Block::ToolResult(ToolResult::error(
                        call,
                        "The tool call was interrupted before it finished.",
                    )));
                }
            }
        }
        index += 2;
    }
}

/// The size of `value` as compact JSON, counted without building the text: for limits on
/// what a model or a server sends.
pub fn json_size<T: serde::Serialize>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(bytes.len());
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail; a value that will not serialize counts what was
    // written before it stopped.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// How many JSON values `value` is: itself and everything inside it.
pub fn json_values(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::Array(items) => {
            items.iter().map(json_values).fold(1, usize::saturating_add)
        }
        serde_json::Value::Object(entries) => entries
            .values()
            .map(json_values)
            .fold(1, usize::saturating_add),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "srv__echo".into(),
            arguments: json!({"x": 1}),
            signature: None,
            invalid_arguments: None,
            wire_id: None,
            origin: None,
        }
    }

    fn assistant_with_calls(ids: &[&str]) -> Message {
        Message {
            role: Role::Assistant,
            blocks: ids.iter().map(|id| Block::ToolCall(call(id))).collect(),
        }
    }

    #[test]
    fn reasoning_goes_back_only_to_its_producer() {
        let reasoning = |producer: Option<&str>| Block::Reasoning {
            text: "hmm".into(),
            signature: Some("sig".into()),
            encrypted: None,
            id: None,
            protocol: Some("anthropic".into()),
            producer: producer.map(str::to_owned),
        };
        let messages = vec![
            Message::user_text("hi"),
            Message {
                role: Role::Assistant,
                blocks: vec![
                    reasoning(Some("work/claude-a")),
                    reasoning(Some("work/claude-b")),
                    reasoning(None),
                    Block::text("answer"),
                ],
            },
        ];
        let to_a = replayable_to(&messages, Some(&producer("work", "claude-a")));
        assert_eq!(to_a[0], messages[0]);
        assert_eq!(
            to_a[1].blocks,
            [reasoning(Some("work/claude-a")), Block::text("answer")],
            "another model's, and unstamped reasoning, are left out"
        );
        let to_other = replayable_to(&messages, Some("home/claude-a"));
        assert_eq!(to_other[1].blocks, [Block::text("answer")]);
        assert_eq!(replayable_to(&messages, None), messages);
    }

    #[test]
    fn a_results_pdfs_are_its_pdf_resources_named_by_their_uris_last_part() {
        let media = |mime: &str| MediaRef {
            hash: "a".repeat(64),
            mime: mime.into(),
            bytes: 250_000,
            width: None,
            height: None,
        };
        let resource = |uri: &str, mime: &str| ResultPart::Resource {
            uri: uri.into(),
            mime: Some(mime.into()),
            text: None,
            media: Some(media(mime)),
        };
        let result = ToolResult {
            call_id: "c".into(),
            wire_id: None,
            name: "export".into(),
            is_error: false,
            parts: vec![
                resource("drive://files/q3.pdf?rev=2#page=4", "application/pdf"),
                resource("drive://files/chart.png", "image/png"),
                resource("file:///reports/", "application/pdf"),
            ],
        };
        let names: Vec<String> = result.documents().map(|(name, _)| name).collect();
        assert_eq!(names, ["q3.pdf", "reports"]);
        assert_eq!(
            resource_document_name("drive://f/Q3%20report%E2%80%AE.pdf"),
            "Q3 report\\u{202e}.pdf"
        );
        assert_eq!(resource_document_name("drive://f/%2e%2e"), "document.pdf");
        assert_eq!(resource_name("x:report.pdf"), "x:report.pdf");
        assert_eq!(resource_name("///"), "///");
    }

    #[test]
    fn a_message_with_files_reads_as_one_text_with_each_file_apart() {
        let file = |name: &str, text: &str| Block::File {
            name: name.into(),
            text: text.into(),
        };
        let message = Message {
            role: Role::User,
            blocks: vec![
                Block::text("@notes "),
                Block::text("compare these"),
                file("a.txt", "one"),
                file("b.csv", "x,y\n"),
            ],
        };
        assert_eq!(
            message.text_with_files(),
            "@notes compare these\n\nFile a.txt:\n\none\n\nFile b.csv:\n\nx,y\n"
        );
        assert_eq!(
            message.text(),
            "@notes compare these",
            "text alone leaves files out"
        );
        let only_a_file = Message {
            role: Role::User,
            blocks: vec![file("a.txt", "one")],
        };
        assert_eq!(only_a_file.text_with_files(), "File a.txt:\n\none");
        let stored = serde_json::to_value(&only_a_file.blocks[0]).unwrap();
        assert_eq!(
            stored,
            serde_json::json!({"type": "file", "name": "a.txt", "text": "one"})
        );
    }

    #[test]
    fn blocks_serialise_with_a_type_tag() {
        let message = Message {
            role: Role::Assistant,
            blocks: vec![Block::text("hi"), Block::ToolCall(call("c1"))],
        };
        let json = serde_json::to_value(&message).unwrap();
        assert_eq!(
            json,
            json!({"role": "assistant", "blocks": [
                {"type": "text", "text": "hi"},
                {"type": "tool_call", "id": "c1", "name": "srv__echo", "arguments": {"x": 1}}
            ]})
        );
        let back: Message = serde_json::from_value(json).unwrap();
        assert_eq!(back, message);
    }

    #[test]
    fn every_block_kind_round_trips() {
        let media = MediaRef {
            hash: "ab".into(),
            mime: "image/png".into(),
            bytes: 3,
            width: Some(1),
            height: Some(1),
        };
        let message = Message {
            role: Role::Tool,
            blocks: vec![
                Block::Image {
                    media: media.clone(),
                },
                Block::Reasoning {
                    text: "hmm".into(),
                    signature: Some("sig".into()),
                    encrypted: None,
                    id: None,
                    protocol: Some("anthropic".into()),
                    producer: None,
                },
                Block::ToolResult(ToolResult {
                    call_id: "c1".into(),
                    wire_id: None,
                    name: "t".into(),
                    is_error: false,
                    parts: vec![
                        ResultPart::Text { text: "a".into() },
                        ResultPart::Image {
                            media: media.clone(),
                        },
                        ResultPart::Audio {
                            media: media.clone(),
                        },
                        ResultPart::ResourceLink {
                            uri: "file:///x".into(),
                            name: Some("x".into()),
                            mime: None,
                            description: None,
                        },
                        ResultPart::Resource {
                            uri: "mem://r".into(),
                            mime: Some("text/plain".into()),
                            text: Some("body".into()),
                            media: None,
                        },
                        ResultPart::Structured {
                            value: json!({"sum": 3}),
                        },
                    ],
                }),
            ],
        };
        let text = serde_json::to_string(&message).unwrap();
        let back: Message = serde_json::from_str(&text).unwrap();
        assert_eq!(back, message);
    }

    #[test]
    fn result_text_describes_non_text_parts_and_skips_media() {
        let result = ToolResult {
            call_id: "c".into(),
            wire_id: None,
            name: "t".into(),
            is_error: false,
            parts: vec![
                ResultPart::Text { text: "one".into() },
                ResultPart::Structured {
                    value: json!({"a": 1}),
                },
                ResultPart::ResourceLink {
                    uri: "file:///r".into(),
                    name: Some("r".into()),
                    mime: None,
                    description: None,
                },
            ],
        };
        assert_eq!(result.text(), "one\n{\"a\":1}\n[resource r: file:///r]");
    }

    #[test]
    fn long_output_is_cut_for_the_model_and_kept_whole_in_the_parts() {
        let long = "é".repeat(60 * 1024); // 120 KB of two-byte characters
        let result = ToolResult {
            call_id: "c".into(),
            wire_id: None,
            name: "t".into(),
            is_error: false,
            parts: vec![ResultPart::Text { text: long.clone() }],
        };
        let for_model = result.text();
        assert!(for_model.len() < MODEL_TEXT_LIMIT + 200);
        assert!(for_model.contains("Output cut here"), "note present");
        assert!(for_model.starts_with("éé"));
        assert_eq!(result.full_text(), long);
        assert_eq!(cut_for_model("short".into(), 10), "short");
        // Several parts: what fits goes whole, the part that crosses the limit is cut.
        let parts = ToolResult {
            call_id: "c".into(),
            wire_id: None,
            name: "t".into(),
            is_error: false,
            parts: vec![
                ResultPart::Text {
                    text: "head".into(),
                },
                ResultPart::Text {
                    text: "x".repeat(MODEL_TEXT_LIMIT),
                },
                ResultPart::Text {
                    text: "tail".into(),
                },
            ],
        };
        let text = parts.text();
        assert!(text.starts_with("head\nxxx"));
        assert!(!text.contains("tail"));
        assert!(
            text.contains("Output cut here: 10 more bytes"),
            "{}",
            &text[text.len() - 120..]
        );
    }

    #[test]
    fn a_long_text_goes_to_the_model_as_its_preview_with_the_size_of_the_rest() {
        let preview = "p".repeat(1000);
        let result = ToolResult {
            call_id: "c".into(),
            wire_id: None,
            name: "t".into(),
            is_error: false,
            parts: vec![
                ResultPart::LongText {
                    preview: preview.clone(),
                    media: MediaRef {
                        hash: "h".into(),
                        mime: "text/plain".into(),
                        bytes: 5000,
                        width: None,
                        height: None,
                    },
                },
                ResultPart::Text {
                    text: "after".into(),
                },
            ],
        };
        assert_eq!(
            result.text(),
            format!("{preview}{}", cut_note(4000 + 1 + 5))
        );
        assert_eq!(
            result.full_text(),
            format!("{preview}\n[4000 more bytes are in the whole output file]\nafter")
        );
    }

    #[test]
    fn repair_answers_calls_left_without_results() {
        let mut history = vec![
            Message::user_text("hi"),
            assistant_with_calls(&["a", "b"]),
            Message {
                role: Role::Tool,
                blocks: vec![Block::ToolResult(ToolResult {
                    call_id: "a".into(),
                    wire_id: None,
                    name: "srv__echo".into(),
                    is_error: false,
                    parts: vec![],
                })],
            },
            assistant_with_calls(&["c"]),
        ];
        repair_history(&mut history);
        assert_eq!(history.len(), 5);
        let first: Vec<_> = history[2]
            .tool_results()
            .map(|r| r.call_id.clone())
            .collect();
        assert_eq!(first, ["a", "b"]);
        let last = history[4].tool_results().next().unwrap();
        assert_eq!(last.call_id, "c");
        assert!(last.is_error);
    }

    #[test]
    fn repair_leaves_a_valid_history_alone() {
        let mut history = vec![Message::user_text("hi"), Message::user_text("again")];
        let before = history.clone();
        repair_history(&mut history);
        assert_eq!(history, before);
    }
}
