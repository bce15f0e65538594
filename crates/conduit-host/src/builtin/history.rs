//! The conversation history tools: full-text search with snippets, reading a
//! conversation page by page, and the list of recent conversations.

use std::sync::Arc;

use async_trait::async_trait;
use conduit_core::content::{Block, ResultPart, Role, text_start};
use conduit_core::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use conduit_store::{Conversation, StoreError, StoredMessage};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{blocking, spec, structured};
use crate::Host;

/// The most hits one search returns.
pub const MAX_SEARCH_HITS: usize = 50;
/// The most messages one read returns.
pub const MAX_READ_MESSAGES: usize = 100;
/// The most conversations one list returns.
pub const MAX_LIST: usize = 100;
/// The most characters of one message a read returns, and the default.
pub const MAX_MESSAGE_CHARS: usize = 20_000;
const DEFAULT_MESSAGE_CHARS: usize = 4_000;
/// The text of one read stays under this many bytes: older messages are left for the
/// next page.
pub const READ_BUDGET: usize = 64_000;
const MAX_QUERY_CHARS: usize = 500;
/// How much of a tool call's arguments a read shows.
const ARGUMENT_CHARS: usize = 500;

/// A millisecond timestamp as RFC 3339 in UTC.
fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| ms.to_string())
}

fn store_error(error: StoreError) -> ToolOutput {
    ToolOutput::error(match error {
        StoreError::UnknownConversation(id) => format!(
            "there is no conversation {id:?}; list_conversations and search_history give the ids"
        ),
        other => format!("the history could not be read: {other}"),
    })
}

/// A conversation as the tools describe it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ConversationInfo {
    id: String,
    title: String,
    created_at: String,
    updated_at: String,
    message_count: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<String>,
}

impl From<Conversation> for ConversationInfo {
    fn from(c: Conversation) -> Self {
        Self {
            created_at: rfc3339(c.created_at),
            updated_at: rfc3339(c.updated_at),
            id: c.id,
            title: c.title,
            message_count: c.message_count,
            provider: c.provider,
            model: c.model,
        }
    }
}

fn conversation_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "title": {"type": "string"},
            "createdAt": {"type": "string", "format": "date-time"},
            "updatedAt": {"type": "string", "format": "date-time"},
            "messageCount": {"type": "integer"},
            "provider": {"type": "string"},
            "model": {"type": "string"}
        },
        "required": ["id", "title", "createdAt", "updatedAt", "messageCount"]
    })
}

// ---------------------------------------------------------------------------------------

/// `search_history`: full-text search over every saved conversation.
pub struct SearchHistory {
    spec: ToolSpec,
    host: Arc<Host>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArguments {
    query: String,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SearchResult {
    query: String,
    hits: Vec<Hit>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Hit {
    conversation_id: String,
    title: String,
    message_id: i64,
    snippet: String,
    created_at: String,
}

impl SearchHistory {
    pub fn new(host: Arc<Host>) -> Self {
        Self {
            spec: Self::spec(),
            host,
        }
    }

    pub fn spec() -> ToolSpec {
        spec(
            "search_history",
            "Search conversation history",
            "Full-text search over the user's saved Conduit conversations (message text and \
             tool results), newest matches first. Each hit gives the conversation id and \
             title, the message id and a snippet with the matching words in [brackets]. \
             Words are matched as whole words or prefixes; all words must occur. Use \
             read_conversation with a hit's conversationId to read around it.",
            json!({
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_QUERY_CHARS,
                        "description": "The words to look for."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_SEARCH_HITS,
                        "default": 10,
                        "description": "How many hits to return at most."
                    }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            Some(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "hits": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "conversationId": {"type": "string"},
                                "title": {"type": "string"},
                                "messageId": {"type": "integer"},
                                "snippet": {"type": "string"},
                                "createdAt": {"type": "string", "format": "date-time"}
                            },
                            "required": ["conversationId", "title", "messageId", "snippet", "createdAt"]
                        }
                    }
                },
                "required": ["query", "hits"]
            })),
            true,
        )
    }
}

#[async_trait]
impl Tool for SearchHistory {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: SearchArguments = match super::arguments("search_history", arguments) {
            Ok(args) => args,
            Err(error) => return Ok(error),
        };
        let query = args.query.trim().to_owned();
        if query.is_empty() {
            return Ok(ToolOutput::error(
                "`query` is empty: give the words to look for",
            ));
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Ok(ToolOutput::error(format!(
                "`query` is longer than {MAX_QUERY_CHARS} characters: search for a few words"
            )));
        }
        let limit = match bounded("limit", args.limit, 10, MAX_SEARCH_HITS) {
            Ok(limit) => limit,
            Err(error) => return Ok(error),
        };
        let host = self.host.clone();
        Ok(blocking("searching the history", move || {
            let hits = match host.store().and_then(|store| store.search(&query, limit)) {
                Ok(hits) => hits,
                Err(e) => return store_error(e),
            };
            let text = if hits.is_empty() {
                format!("No saved message matches {query:?}.")
            } else {
                let mut text = format!("{} matches for {query:?}, newest first:", hits.len());
                for hit in &hits {
                    text.push_str(&format!(
                        "\n- {} (conversation {}, message {}): {}",
                        hit.title,
                        hit.conversation_id,
                        hit.message_id,
                        hit.snippet_bracketed()
                    ));
                }
                text
            };
            let hits = hits
                .into_iter()
                .map(|hit| Hit {
                    snippet: hit.snippet_bracketed(),
                    created_at: rfc3339(hit.created_at),
                    conversation_id: hit.conversation_id,
                    title: hit.title,
                    message_id: hit.message_id,
                })
                .collect();
            structured(text, SearchResult { query, hits })
        })
        .await)
    }
}

/// An optional count: `default` when absent, an error result outside `1..=max`.
fn bounded(
    name: &str,
    value: Option<usize>,
    default: usize,
    max: usize,
) -> Result<usize, ToolOutput> {
    match value {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(ToolOutput::error(format!(
            "`{name}` is {n}; it must be between 1 and {max}"
        ))),
    }
}

// ---------------------------------------------------------------------------------------

/// `read_conversation`: a conversation's messages, a bounded page at a time.
pub struct ReadConversation {
    spec: ToolSpec,
    host: Arc<Host>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArguments {
    conversation_id: String,
    #[serde(default)]
    before_message_id: Option<i64>,
    #[serde(default)]
    after_message_id: Option<i64>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    max_chars_per_message: Option<usize>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReadResult {
    conversation: ConversationInfo,
    messages: Vec<MessageView>,
    /// Set when older messages exist: pass it as `before_message_id` for them.
    #[serde(skip_serializing_if = "Option::is_none")]
    older_before_message_id: Option<i64>,
    /// Set when newer messages exist: pass it as `after_message_id` for them.
    #[serde(skip_serializing_if = "Option::is_none")]
    newer_after_message_id: Option<i64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MessageView {
    id: i64,
    role: &'static str,
    created_at: String,
    status: String,
    text: String,
    /// Set when `text` was cut at the character limit.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    truncated: bool,
    /// Hashes of the images in the message (get_image shows one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    images: Vec<String>,
}

impl ReadConversation {
    pub fn new(host: Arc<Host>) -> Self {
        Self {
            spec: Self::spec(),
            host,
        }
    }

    pub fn spec() -> ToolSpec {
        spec(
            "read_conversation",
            "Read a conversation",
            "Read the messages of one saved Conduit conversation, oldest first. Without \
             before_message_id or after_message_id it returns the newest messages; pass \
             olderBeforeMessageId from a result as before_message_id to page back, or \
             newerAfterMessageId as after_message_id to page forward. Tool calls, tool \
             results and images appear in the text in [brackets]; each message's text is \
             cut at max_chars_per_message, and one page stays under about 64 KB.",
            json!({
                "type": "object",
                "properties": {
                    "conversation_id": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The conversation's id (from list_conversations or search_history)."
                    },
                    "before_message_id": {
                        "type": "integer",
                        "description": "Return the messages just before this message."
                    },
                    "after_message_id": {
                        "type": "integer",
                        "description": "Return the messages just after this message."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_READ_MESSAGES,
                        "default": 20,
                        "description": "How many messages to return at most."
                    },
                    "max_chars_per_message": {
                        "type": "integer",
                        "minimum": 100,
                        "maximum": MAX_MESSAGE_CHARS,
                        "default": DEFAULT_MESSAGE_CHARS,
                        "description": "Cut each message's text after this many characters."
                    }
                },
                "required": ["conversation_id"],
                "additionalProperties": false
            }),
            Some(json!({
                "type": "object",
                "properties": {
                    "conversation": conversation_schema(),
                    "messages": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "integer"},
                                "role": {"type": "string", "enum": ["user", "assistant", "tool"]},
                                "createdAt": {"type": "string", "format": "date-time"},
                                "status": {"type": "string"},
                                "text": {"type": "string"},
                                "truncated": {"type": "boolean"},
                                "images": {"type": "array", "items": {"type": "string"}}
                            },
                            "required": ["id", "role", "createdAt", "status", "text"]
                        }
                    },
                    "olderBeforeMessageId": {"type": "integer"},
                    "newerAfterMessageId": {"type": "integer"}
                },
                "required": ["conversation", "messages"]
            })),
            true,
        )
    }
}

#[async_trait]
impl Tool for ReadConversation {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: ReadArguments = match super::arguments("read_conversation", arguments) {
            Ok(args) => args,
            Err(error) => return Ok(error),
        };
        if args.conversation_id.trim().is_empty() {
            return Ok(ToolOutput::error(
                "`conversation_id` is empty; list_conversations and search_history give the ids",
            ));
        }
        if args.before_message_id.is_some() && args.after_message_id.is_some() {
            return Ok(ToolOutput::error(
                "give before_message_id or after_message_id, not both",
            ));
        }
        let limit = match bounded("limit", args.limit, 20, MAX_READ_MESSAGES) {
            Ok(limit) => limit,
            Err(error) => return Ok(error),
        };
        let max_chars = match args.max_chars_per_message {
            None => DEFAULT_MESSAGE_CHARS,
            Some(n) if (100..=MAX_MESSAGE_CHARS).contains(&n) => n,
            Some(n) => {
                return Ok(ToolOutput::error(format!(
                    "`max_chars_per_message` is {n}; it must be between 100 and {MAX_MESSAGE_CHARS}"
                )));
            }
        };
        let host = self.host.clone();
        Ok(blocking("reading a conversation", move || {
            let store = match host.store() {
                Ok(store) => store,
                Err(e) => return store_error(e),
            };
            let conversation = match store.conversation(&args.conversation_id) {
                Ok(conversation) => conversation,
                Err(e) => return store_error(e),
            };
            // Every message's id, so that one from elsewhere is refused rather than
            // compared with this conversation's positions; only the page's messages are
            // read whole (the store is shared with the app's turns).
            let ids = match store.message_ids(&args.conversation_id) {
                Ok(ids) => ids,
                Err(e) => return store_error(e),
            };
            let position = |id: i64, which: &str| {
                ids.iter().position(|m| *m == id).ok_or_else(|| {
                    ToolOutput::error(format!(
                        "message {id} ({which}) is not in conversation {:?}",
                        args.conversation_id
                    ))
                })
            };
            let (start, end) = match (args.before_message_id, args.after_message_id) {
                (Some(before), _) => match position(before, "before_message_id") {
                    Ok(end) => (end.saturating_sub(limit), end),
                    Err(error) => return error,
                },
                (_, Some(after)) => match position(after, "after_message_id") {
                    Ok(at) => (at + 1, (at + 1 + limit).min(ids.len())),
                    Err(error) => return error,
                },
                (None, None) => (ids.len().saturating_sub(limit), ids.len()),
            };
            // Bounded by the last message of the page as the ids read it: one added since
            // (the app's turn, another client) does not shift the page against them.
            let window = match end.checked_sub(1).and_then(|last| ids.get(last)) {
                Some(&last) if end > start => {
                    store.page_through(&args.conversation_id, last, end - start)
                }
                _ => Ok(Vec::new()),
            };
            let window = match window {
                Ok(window) => window,
                Err(e) => return store_error(e),
            };
            page(
                conversation,
                &ids,
                &window,
                start,
                max_chars,
                args.after_message_id.is_some(),
            )
        })
        .await)
    }
}

/// The messages of `window` (those at `start..` of the conversation whose message ids are
/// `ids`) as a result, cut to [`READ_BUDGET`]: reading back (`forward` false) keeps the
/// newest of them, reading forward the oldest.
fn page(
    conversation: Conversation,
    ids: &[i64],
    window: &[StoredMessage],
    start: usize,
    max_chars: usize,
    forward: bool,
) -> ToolOutput {
    let end = start + window.len();
    let mut views: Vec<MessageView> = Vec::new();
    let mut used = 0usize;
    let (mut first, mut last) = (end, start);
    let order: Box<dyn Iterator<Item = usize>> = if forward {
        Box::new(start..end)
    } else {
        Box::new((start..end).rev())
    };
    for index in order {
        let Some(message) = window.get(index - start) else {
            continue;
        };
        let view = message_view(message, max_chars);
        if !views.is_empty() && used + view.text.len() > READ_BUDGET {
            break;
        }
        used += view.text.len();
        views.push(view);
        first = first.min(index);
        last = last.max(index + 1);
    }
    if !forward {
        views.reverse();
    }
    let (first, last) = if views.is_empty() {
        (start, start)
    } else {
        (first, last)
    };
    // The ids to page on from here: the first shown message (older ones lie before
    // it) and the last shown (newer ones lie after it).
    let older = if first > 0 {
        ids.get(first).copied()
    } else {
        None
    };
    let newer = if last < ids.len() {
        last.checked_sub(1).and_then(|i| ids.get(i)).copied()
    } else {
        None
    };
    let mut text = if views.is_empty() {
        format!(
            "Conversation {:?} ({}) has no messages in this range ({} messages in all).",
            conversation.title,
            conversation.id,
            ids.len()
        )
    } else {
        format!(
            "Conversation {:?} ({}), messages {} to {} of {}:",
            conversation.title,
            conversation.id,
            first + 1,
            last,
            ids.len()
        )
    };
    for view in &views {
        text.push_str(&format!(
            "\n\n[{} {} at {}]\n{}",
            view.role, view.id, view.created_at, view.text
        ));
    }
    if let Some(id) = older {
        text.push_str(&format!("\n\n(older messages: before_message_id {id})"));
    }
    if let Some(id) = newer {
        text.push_str(&format!("\n\n(newer messages: after_message_id {id})"));
    }
    structured(
        text,
        ReadResult {
            conversation: conversation.into(),
            messages: views,
            older_before_message_id: older,
            newer_after_message_id: newer,
        },
    )
}

fn message_view(message: &StoredMessage, max_chars: usize) -> MessageView {
    let mut pieces: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for block in &message.blocks {
        match block {
            Block::Text { text } => pieces.push(text.clone()),
            Block::File { name, text } => {
                pieces.push(conduit_core::content::file_for_model(name, text))
            }
            Block::Image { media } => {
                images.push(media.hash.clone());
                pieces.push(format!("[image {}]", media.hash));
            }
            Block::Document { name, media } => pieces.push(format!(
                "[PDF {name}, {} KB, not read here]",
                media.bytes.div_ceil(1000)
            )),
            // Reasoning is the model's scratch work, not part of the conversation.
            Block::Reasoning { .. } => {}
            Block::ToolCall(call) => {
                let arguments = call.arguments.to_string();
                let cut = text_start(&arguments, ARGUMENT_CHARS);
                let more = if cut.len() < arguments.len() {
                    "…"
                } else {
                    ""
                };
                pieces.push(format!("[called tool {} with {cut}{more}]", call.name));
            }
            Block::ToolResult(result) => {
                for part in &result.parts {
                    if let ResultPart::Image { media } = part {
                        images.push(media.hash.clone());
                    }
                }
                let outcome = if result.is_error {
                    "error from"
                } else {
                    "result of"
                };
                let mut shown = format!("[{outcome} tool {}]\n{}", result.name, result.text());
                for hash in result.images().map(|m| &m.hash) {
                    shown.push_str(&format!("\n[image {hash}]"));
                }
                pieces.push(shown);
            }
        }
    }
    let whole = pieces.join("\n");
    let (text, truncated) = match whole.char_indices().nth(max_chars) {
        Some((cut, _)) => (format!("{}…", &whole[..cut]), true),
        None => (whole, false),
    };
    let mut status = serde_json::to_value(message.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    if let Some(error) = &message.error {
        status.push_str(&format!(": {error}"));
    }
    MessageView {
        id: message.id,
        role: match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        },
        created_at: rfc3339(message.created_at),
        status,
        text,
        truncated,
        images,
    }
}

// ---------------------------------------------------------------------------------------

/// `list_conversations`: the most recently updated conversations.
pub struct ListConversations {
    spec: ToolSpec,
    host: Arc<Host>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArguments {
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Serialize)]
struct ListResult {
    conversations: Vec<ConversationInfo>,
}

impl ListConversations {
    pub fn new(host: Arc<Host>) -> Self {
        Self {
            spec: Self::spec(),
            host,
        }
    }

    pub fn spec() -> ToolSpec {
        spec(
            "list_conversations",
            "List recent conversations",
            "List the user's saved Conduit conversations, most recently updated first, \
             with each one's id, title, dates and number of messages. Pass an id to \
             read_conversation to read it.",
            json!({
                "type": "object",
                "properties": {
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_LIST,
                        "default": 20,
                        "description": "How many conversations to return at most."
                    }
                },
                "additionalProperties": false
            }),
            Some(json!({
                "type": "object",
                "properties": {
                    "conversations": {"type": "array", "items": conversation_schema()}
                },
                "required": ["conversations"]
            })),
            true,
        )
    }
}

#[async_trait]
impl Tool for ListConversations {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: ListArguments = match super::arguments("list_conversations", arguments) {
            Ok(args) => args,
            Err(error) => return Ok(error),
        };
        let limit = match bounded("limit", args.limit, 20, MAX_LIST) {
            Ok(limit) => limit,
            Err(error) => return Ok(error),
        };
        let host = self.host.clone();
        Ok(blocking("listing conversations", move || {
            let conversations = match host.store().and_then(|store| store.list(limit)) {
                Ok(list) => list,
                Err(e) => return store_error(e),
            };
            let mut text = if conversations.is_empty() {
                "There are no saved conversations.".to_owned()
            } else {
                format!("{} conversations, most recent first:", conversations.len())
            };
            let conversations: Vec<ConversationInfo> =
                conversations.into_iter().map(Into::into).collect();
            for c in &conversations {
                text.push_str(&format!(
                    "\n- {} ({}): {} messages, updated {}",
                    c.title, c.id, c.message_count, c.updated_at
                ));
            }
            structured(text, ListResult { conversations })
        })
        .await)
    }
}
