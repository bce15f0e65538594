//! Keeps the huge strings of a large server message out of rmcp's parser and out of
//! memory: a pump between a stdio server's stdout and rmcp parses each large line once
//! (and [`held_events`] each large SSE event of an HTTP server), writes its big result
//! strings to an unlinked temporary file as they are parsed, and passes on a small
//! message with markers that the client swaps back.
//!
//! rmcp parses a message through untagged enums, which copy every string several times:
//! a 50 MB tool output used to peak near 600 MB. Through the pump, a big string exists
//! once in memory: in the parser's buffer while it is read, then only when the client
//! claims it. A string that repeats one already held in the same message (the Python
//! SDK sends a tool's text again as `structuredContent`) is not kept twice: its place
//! says what it was a copy of.
//!
//! The server writes what it likes, so only what the client will claim is held: the
//! answer to a tool call or resource read Conduit sent and still waits for (the
//! connection's transport says which, [`Spill::asked`]). An answer to anything else is
//! let go as soon as it is parsed, and rmcp, which would drop it, never sees it. What
//! is held at once is capped ([`MAX_HELD`]); an answer past the cap is dropped and its
//! call fails saying so.

use std::cell::RefCell;
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::fs::File;
use std::hash::BuildHasher;
use std::io::{BufRead, Read, Seek, SeekFrom, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, ContentBlock, ReadResourceResult, ResourceContents};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio_util::io::SyncIoBridge;

use crate::envelope::Envelope;

/// Lines at least this long are parsed by the pump; shorter ones pass through untouched.
const LARGE_LINE: usize = 1024 * 1024;
/// Strings at least this long in a large line's result are moved aside.
const LARGE_STRING: usize = 64 * 1024;
/// A held string nobody claimed (its call timed out or was stopped) is dropped after this,
/// by the connection's sweeper or the next hold.
pub(crate) const UNCLAIMED: Duration = Duration::from_secs(120);
/// At most this many bytes are held at once, for all of a connection's answers: four
/// answers of the largest size Conduit takes ([`crate::client::MAX_STDIO_MESSAGE`]) in
/// flight at once. It is disk (often RAM-backed `/tmp`), so it is bounded like memory.
pub(crate) const MAX_HELD: usize = 4 * crate::client::MAX_STDIO_MESSAGE;
/// At most this many requests are remembered as awaiting an answer; past it the oldest
/// is forgotten (a server that never answers cannot grow the list).
const MAX_ASKED: usize = 4096;
/// The JSON-RPC code of the error that stands in for an answer past [`MAX_HELD`].
const DROPPED_CODE: i64 = -32603;

/// The method of the small request that stands in for a server's request too large to
/// read: rmcp hands it to the client's handler, which answers the server's `id` with an
/// error naming the method and the reason, instead of leaving the server waiting for an
/// answer that would never come (`client::Handler::on_custom_request`).
pub(crate) const UNREADABLE_REQUEST: &str = "conduit/unreadable-request";

/// The longest method name of a message kept to name it in such an answer.
const MAX_METHOD_NAME: usize = 256;

/// The unlinked temporary file the big strings of one message are written to, one after
/// another; its space is freed when the last string held in it is claimed or dropped.
type SharedFile = Arc<Mutex<File>>;

/// Where the big strings of the message being parsed go: the ids held so far and the
/// file with its end (one file per message, so a message of many strings opens one);
/// the message's `id` once read, and whether the cap was reached during it.
#[derive(Default)]
struct Holding {
    ids: Vec<u64>,
    file: Option<(SharedFile, u64)>,
    id: Option<Value>,
    /// The message's `method` once read (cut to [`MAX_METHOD_NAME`]): a request or a
    /// notification, not an answer.
    method: Option<String>,
    full: bool,
    /// Array elements and object entries parsed so far ([`MAX_VALUES`]).
    values: usize,
    /// Bytes of the strings and keys built as they are (not held), outside any result
    /// ([`MAX_PLAIN_TEXT`]) and in one ([`MAX_RESULT_TEXT`]).
    text_outside_result: usize,
    text_in_result: usize,
}

/// At most this many array elements and object entries in one large message. Its big
/// strings are held aside, but everything else is built as JSON values of 70 bytes and
/// more each (and parsed again by rmcp): a line of 256 MiB of `0,` would be 130 million
/// of them, gigabytes. A message past it is dropped as malformed.
const MAX_VALUES: usize = 1_000_000;

/// At most this many bytes of strings and keys in one large message outside any result
/// (a notification's message, a request's params, an error's text). They are built whole
/// and parsed again by rmcp, at about twelve times their size: a 250 MB progress message
/// took gigabytes. Twice the largest request Conduit takes from a server (a sampling
/// request, 8 MiB); a message past it is dropped as malformed.
const MAX_PLAIN_TEXT: usize = 16 * 1024 * 1024;
/// The same for a result's strings and keys that are not held aside: a listing's names,
/// descriptions and schemas, a content item's fields, small text blocks, structured
/// content's small strings and its keys. The most one listing may bring
/// ([`crate::paging::MAX_LIST_BYTES`]), so no listing that passed before is refused.
const MAX_RESULT_TEXT: usize = crate::paging::MAX_LIST_BYTES;

/// Counts `bytes` more of text built as it is at `place` in the message being parsed,
/// failing past its cap.
fn count_text<E: serde::de::Error>(
    holding: &RefCell<Holding>,
    place: Place,
    bytes: usize,
) -> Result<(), E> {
    text_past_its_cap(holding, place, bytes).map_or(Ok(()), |why| Err(E::custom(why)))
}

/// [`count_text`]'s count, the same for every deserializer: why the message is refused
/// once the text is past its cap.
fn text_past_its_cap(holding: &RefCell<Holding>, place: Place, bytes: usize) -> Option<String> {
    let mut holding = holding.borrow_mut();
    let (counted, cap, what) = match place {
        Place::Message | Place::Plain => (
            &mut holding.text_outside_result,
            MAX_PLAIN_TEXT,
            "outside a result",
        ),
        Place::Result
        | Place::Items
        | Place::Item
        | Place::Resource
        | Place::Big
        | Place::Structured
        | Place::InResult => (
            &mut holding.text_in_result,
            MAX_RESULT_TEXT,
            "in a result that is not held aside",
        ),
    };
    *counted = counted.saturating_add(bytes);
    (*counted > cap).then(|| format!("more than {} MiB of text {what}", cap / (1024 * 1024)))
}

/// Counts one more element or entry of the message being parsed, failing past
/// [`MAX_VALUES`].
fn count_value<E: serde::de::Error>(holding: &RefCell<Holding>) -> Result<(), E> {
    let mut holding = holding.borrow_mut();
    holding.values += 1;
    if holding.values > MAX_VALUES {
        return Err(E::custom(format!(
            "more than {MAX_VALUES} values in one message"
        )));
    }
    Ok(())
}

/// The id of a request Conduit sent, as the server's answer names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum AnswerId {
    Number(i64),
    Text(String),
}

impl AnswerId {
    pub(crate) fn of(id: &rmcp::model::RequestId) -> Self {
        match id {
            rmcp::model::NumberOrString::Number(n) => Self::Number(*n),
            rmcp::model::NumberOrString::String(text) => Self::Text(text.to_string()),
        }
    }

    /// The id an answer names; `None` for one rmcp could not take as an id either.
    fn from_json(value: &Value) -> Option<Self> {
        match value {
            Value::Number(n) => n.as_i64().map(Self::Number),
            Value::String(text) => Some(Self::Text(text.clone())),
            _ => None,
        }
    }
}

/// A request awaiting its answer: when it was sent (in order), and whether the client
/// claims held strings from its answer (a tool call, a resource read).
struct Asked {
    order: u64,
    claims: bool,
}

/// The strings held, and their bytes in all.
#[derive(Default)]
struct Holds {
    by_id: HashMap<u64, Held>,
    bytes: usize,
}

impl Holds {
    fn remove(&mut self, id: u64) -> Option<Held> {
        let held = self.by_id.remove(&id)?;
        self.bytes = self.bytes.saturating_sub(held.bytes);
        Some(held)
    }
}

/// What became of a string to hold.
enum Hold {
    Kept(u64),
    /// Holding it would pass [`MAX_HELD`].
    Full,
    /// It could not be written aside; it stays in the message.
    Failed,
}

/// A string moved aside: `bytes` bytes at `offset` in a message's file.
struct Held {
    since: Instant,
    file: SharedFile,
    offset: u64,
    bytes: usize,
    /// The string's hash under the spill's own keys: a string is compared with a held one
    /// (read back from the file) only when both match, so a message of thousands of
    /// distinct strings of one length does not read each earlier one back for each.
    digest: u64,
}

impl Held {
    fn open(&self) -> std::io::Result<MutexGuard<'_, File>> {
        let mut file = self.file.lock();
        file.seek(SeekFrom::Start(self.offset))?;
        Ok(file)
    }

    fn read(&self) -> std::io::Result<String> {
        let mut file = self.open()?;
        let mut text = String::with_capacity(self.bytes);
        (&mut *file)
            .take(self.bytes as u64)
            .read_to_string(&mut text)?;
        if text.len() != self.bytes {
            return Err(std::io::Error::other(
                "the spill file is shorter than written",
            ));
        }
        Ok(text)
    }

    /// Whether it is exactly `text`, compared in small pieces.
    fn is(&self, text: &str) -> bool {
        if self.bytes != text.len() {
            return false;
        }
        let Ok(mut file) = self.open() else {
            return false;
        };
        let mut piece = vec![0u8; 64 * 1024];
        let mut rest = text.as_bytes();
        while !rest.is_empty() {
            let want = rest.len().min(piece.len());
            if file.read_exact(&mut piece[..want]).is_err() || piece[..want] != rest[..want] {
                return false;
            }
            rest = &rest[want..];
        }
        true
    }
}

/// Appends `text` to the message's file (made on first use) and returns where it is.
fn write_aside(holding: &mut Holding, text: &str, digest: u64) -> std::io::Result<Held> {
    let (file, end) = match &mut holding.file {
        Some(open) => open,
        None => holding
            .file
            .insert((Arc::new(Mutex::new(tempfile::tempfile()?)), 0)),
    };
    {
        let mut writer = file.lock();
        // Comparing a string with one held reads the file: write at its end again.
        writer.seek(SeekFrom::Start(*end))?;
        writer.write_all(text.as_bytes())?;
    }
    let held = Held {
        since: Instant::now(),
        file: file.clone(),
        offset: *end,
        bytes: text.len(),
        digest,
    };
    *end += text.len() as u64;
    Ok(held)
}

/// Strings moved out of messages, waiting for the client to claim them by marker.
pub(crate) struct Spill {
    /// The server's name, for the log.
    server: String,
    prefix: String,
    next: AtomicU64,
    held: Mutex<Holds>,
    max_held: usize,
    asked: Mutex<HashMap<AnswerId, Asked>>,
    asked_order: AtomicU64,
    /// Keys for the held strings' digests, unknown to the server.
    digests: RandomState,
}

impl Spill {
    pub(crate) fn new(server: &str) -> Self {
        Self::with_cap(server, MAX_HELD)
    }

    fn with_cap(server: &str, max_held: usize) -> Self {
        // A marker a server cannot guess, so its own text is never mistaken for one.
        let nonce = RandomState::new().hash_one(Instant::now());
        Self {
            server: server.to_owned(),
            prefix: format!("\u{1}conduit-spill-{nonce:016x}:"),
            next: AtomicU64::new(0),
            held: Mutex::new(Holds::default()),
            max_held,
            asked: Mutex::new(HashMap::new()),
            asked_order: AtomicU64::new(0),
            digests: RandomState::new(),
        }
    }

    /// Notes a request Conduit sent: its answer may be held when `claims` (the client
    /// claims held strings from it), and is passed on at all only while it is awaited.
    pub(crate) fn asked(&self, id: &rmcp::model::RequestId, claims: bool) {
        let order = self.asked_order.fetch_add(1, Ordering::Relaxed);
        let mut asked = self.asked.lock();
        asked.insert(AnswerId::of(id), Asked { order, claims });
        if asked.len() > MAX_ASKED
            && let Some(oldest) = asked
                .iter()
                .min_by_key(|(_, asked)| asked.order)
                .map(|(id, _)| id.clone())
        {
            asked.remove(&oldest);
        }
    }

    /// Forgets a request: its answer came, or nobody waits for it any more.
    pub(crate) fn answered(&self, id: &rmcp::model::RequestId) {
        self.asked.lock().remove(&AnswerId::of(id));
    }

    /// Whether an answer with this id (as the message names it) is awaited.
    fn awaits(&self, id: &Value) -> bool {
        AnswerId::from_json(id).is_some_and(|id| self.asked.lock().contains_key(&id))
    }

    /// Takes the request an answer answers: whether the client claims from it; `None`
    /// when no request of Conduit's awaits it.
    fn take_answer(&self, id: Option<&Value>) -> Option<bool> {
        let id = AnswerId::from_json(id?)?;
        self.asked.lock().remove(&id).map(|asked| asked.claims)
    }

    /// The reason in an error the pump put in place of an answer it dropped; `None` for
    /// a server's own error (it cannot know the marker).
    pub(crate) fn own_error<'a>(&self, message: &'a str) -> Option<&'a str> {
        message.strip_prefix(&self.prefix)
    }

    /// Writes `text` aside (into the message's file) unless that would hold more than
    /// the cap.
    fn hold(&self, text: &str, digest: u64, holding: &mut Holding) -> Hold {
        self.sweep(UNCLAIMED);
        {
            let held = self.held.lock();
            if held.bytes.saturating_add(text.len()) > self.max_held {
                return Hold::Full;
            }
        }
        let held = match write_aside(holding, text, digest) {
            Ok(held) => held,
            Err(error) => {
                tracing::warn!(
                    server = %self.server,
                    bytes = text.len(),
                    "a large string stays in memory: it cannot be written aside: {error}"
                );
                return Hold::Failed;
            }
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        {
            let mut all = self.held.lock();
            all.bytes = all.bytes.saturating_add(held.bytes);
            all.by_id.insert(id, held);
        }
        holding.ids.push(id);
        Hold::Kept(id)
    }

    fn marker(&self, id: u64) -> String {
        format!("{}{id}", self.prefix)
    }

    /// The marker of a string that repeats the held string `id`.
    fn copy_marker(&self, id: u64, bytes: usize) -> String {
        format!("{}copy:{id}:{bytes}", self.prefix)
    }

    /// `text`'s digest under this spill's own keys.
    fn digest(&self, text: &str) -> u64 {
        self.digests.hash_one(text)
    }

    /// The one of `ids` whose string is `text` (whose digest is `digest`).
    fn held_copy_of(&self, text: &str, digest: u64, ids: &[u64]) -> Option<u64> {
        let all = self.held.lock();
        ids.iter().copied().find(|id| {
            all.by_id.get(id).is_some_and(|held| {
                held.bytes == text.len() && held.digest == digest && held.is(text)
            })
        })
    }

    fn release(&self, ids: &[u64]) {
        let mut all = self.held.lock();
        for id in ids {
            all.remove(*id);
        }
    }

    /// Whether any string is held (then a result may need claiming, which reads files).
    pub(crate) fn holds_any(&self) -> bool {
        !self.held.lock().by_id.is_empty()
    }

    /// The bytes held now.
    #[cfg(test)]
    pub(crate) fn held_bytes(&self) -> usize {
        self.held.lock().bytes
    }

    /// Drops what was held longer than `age`: the answer of a call nobody waits for.
    pub(crate) fn sweep(&self, age: Duration) {
        let now = Instant::now();
        let mut all = self.held.lock();
        all.by_id
            .retain(|_, held| now.duration_since(held.since) < age);
        all.bytes = all.by_id.values().map(|held| held.bytes).sum();
    }

    /// Puts the held string back where its marker is; where the marker stands for a
    /// copy of another string of the message, a note says so.
    fn claim(&self, text: &mut String) {
        let Some(rest) = text.strip_prefix(&self.prefix) else {
            return;
        };
        if let Some((_, bytes)) = rest
            .strip_prefix("copy:")
            .and_then(|copy| copy.split_once(':'))
        {
            *text = format!("[a copy of another part of this result ({bytes} bytes), left out]");
            return;
        }
        let Ok(id) = rest.parse::<u64>() else {
            return;
        };
        let Some(held) = self.held.lock().remove(id) else {
            return;
        };
        *text = match held.read() {
            Ok(whole) => whole,
            Err(error) => format!(
                "[{} bytes of this result could not be read back: {error}]",
                held.bytes
            ),
        };
    }
    fn claim_value(&self, value: &mut Value) {
        match value {
            Value::String(text) => self.claim(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.claim_value(item)),
            Value::Object(map) => map.values_mut().for_each(|item| self.claim_value(item)),
            _ => {}
        }
    }

    fn claim_resource(&self, resource: &mut ResourceContents) {
        match resource {
            ResourceContents::TextResourceContents { text, .. } => self.claim(text),
            ResourceContents::BlobResourceContents { blob, .. } => self.claim(blob),
            _ => {}
        }
    }

    /// Restores every string of a tool result that the pump moved aside.
    pub(crate) fn claim_tool_result(&self, result: &mut CallToolResult) {
        for block in &mut result.content {
            match block {
                ContentBlock::Text(text) => self.claim(&mut text.text),
                ContentBlock::Image(image) => self.claim(&mut image.data),
                ContentBlock::Audio(audio) => self.claim(&mut audio.data),
                ContentBlock::Resource(embedded) => self.claim_resource(&mut embedded.resource),
                _ => {}
            }
        }
        if let Some(structured) = &mut result.structured_content {
            self.claim_value(structured);
        }
    }

    pub(crate) fn claim_read_result(&self, result: &mut ReadResourceResult) {
        for resource in &mut result.contents {
            self.claim_resource(resource);
        }
    }
}

/// Where a value sits in a message, as far as holding its strings goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The message itself.
    Message,
    /// Its `result`.
    Result,
    /// `result.content` or `result.contents`.
    Items,
    /// One of those items.
    Item,
    /// An item's `resource`.
    Resource,
    /// A string field that may be big: `text`, `data`, `blob`.
    Big,
    /// Anywhere in `result.structuredContent`.
    Structured,
    /// Anywhere else in `result` (a listing's tools, a prompt's messages): built as it is,
    /// its text held to [`MAX_RESULT_TEXT`].
    InResult,
    /// Anywhere else (a notification's or a request's params, an error): built as it is,
    /// its text held to [`MAX_PLAIN_TEXT`].
    Plain,
}

/// Builds a message as `serde_json::Value` would, except that each big string in the
/// places a result carries them is written aside while it is parsed (its marker takes its
/// place), and one in `structuredContent` that repeats a string already held is not kept
/// at all. Everything else (requests, notifications, small fields) is left as is.
#[derive(Clone, Copy)]
struct Parse<'a> {
    place: Place,
    spill: &'a Spill,
    /// What this message has held so far, and where.
    holding: &'a RefCell<Holding>,
}

impl Parse<'_> {
    fn at(self, place: Place) -> Self {
        Self { place, ..self }
    }

    /// Where the value of `key` in an object here sits.
    fn under_key(self, key: &str) -> Place {
        match (self.place, key) {
            (Place::Message, "result") => Place::Result,
            (Place::Result, "content" | "contents") => Place::Items,
            (Place::Result, "structuredContent") | (Place::Structured, _) => Place::Structured,
            (Place::Item, "text" | "data" | "blob") | (Place::Resource, "text" | "blob") => {
                Place::Big
            }
            (Place::Item, "resource") => Place::Resource,
            (Place::Result | Place::InResult | Place::Item | Place::Resource, _) => Place::InResult,
            _ => Place::Plain,
        }
    }

    /// Where the items of an array here sit.
    fn in_array(self) -> Place {
        match self.place {
            Place::Items => Place::Item,
            Place::Structured => Place::Structured,
            Place::InResult => Place::InResult,
            _ => Place::Plain,
        }
    }

    /// Whether `text` here is held aside rather than built.
    fn holds(self, text: &str) -> bool {
        matches!(self.place, Place::Big | Place::Structured) && text.len() >= LARGE_STRING
    }

    fn string(self, text: &str) -> Value {
        if !self.holds(text) {
            return Value::String(text.to_owned());
        }
        let mut holding = self.holding.borrow_mut();
        // Past the cap the message is dropped: the rest of its big strings are not kept
        // in memory either.
        if holding.full {
            return Value::Null;
        }
        let digest = self.spill.digest(text);
        if self.place == Place::Structured
            && let Some(id) = self.spill.held_copy_of(text, digest, &holding.ids)
        {
            return Value::String(self.spill.copy_marker(id, text.len()));
        }
        match self.spill.hold(text, digest, &mut holding) {
            Hold::Kept(id) => Value::String(self.spill.marker(id)),
            Hold::Full => {
                holding.full = true;
                Value::Null
            }
            Hold::Failed => Value::String(text.to_owned()),
        }
    }

    /// Whether the message read so far is an answer to nothing Conduit awaits (its `id`
    /// came first and names no request): its result need not be read at all.
    fn answers_nothing_awaited(self) -> bool {
        self.place == Place::Message
            && self
                .holding
                .borrow()
                .id
                .as_ref()
                .is_some_and(|id| !self.spill.awaits(id))
    }
}

impl<'de> DeserializeSeed<'de> for Parse<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Parse<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Value, E> {
        // A big string of a result's content is held aside, on disk (`MAX_HELD`).
        if !self.holds(value) {
            count_text::<E>(self.holding, self.place, value.len())?;
        }
        Ok(self.string(value))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        let place = self.in_array();
        while let Some(item) = seq.next_element_seed(self.at(place))? {
            count_value::<A::Error>(self.holding)?;
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            count_value::<A::Error>(self.holding)?;
            // Keys are never held aside: each counts where its value sits.
            count_text::<A::Error>(self.holding, self.under_key(&key), key.len())?;
            if self.place == Place::Message && key == "id" {
                let id = map.next_value_seed(self.at(Place::Plain))?;
                self.holding.borrow_mut().id = Some(id.clone());
                object.insert(key, id);
                continue;
            }
            if self.place == Place::Message && key == "method" {
                let method = map.next_value_seed(self.at(Place::Plain))?;
                self.holding.borrow_mut().method =
                    Some(method_name(method.as_str().unwrap_or("?")));
                object.insert(key, method);
                continue;
            }
            if key == "result" && self.answers_nothing_awaited() {
                // Dropped after parsing anyway: its strings are skipped, not written aside.
                map.next_value::<serde::de::IgnoredAny>()?;
                object.insert(key, Value::Null);
                continue;
            }
            let value = map.next_value_seed(self.at(self.under_key(&key)))?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// Copies `server_stdout` to `to_rmcp` line by line. A line shorter than [`LARGE_LINE`]
/// passes untouched (rmcp decides what to make of it); a longer one is parsed straight
/// from the stream, never held whole, and passed on with its big strings held. A large
/// line that is not JSON or is over `max_line` bytes is dropped (and logged), as rmcp
/// drops what it cannot use. Ends at end of input.
pub(crate) async fn pump<R>(
    server_stdout: R,
    mut to_rmcp: impl AsyncWrite + Unpin,
    spill: Arc<Spill>,
    max_line: usize,
) where
    R: AsyncRead + Unpin + Send + 'static,
{
    let mut reader = BufReader::with_capacity(64 * 1024, server_stdout);
    loop {
        let mut start = Vec::new();
        let out = match read_start(&mut reader, &mut start).await {
            Start::End => return,
            Start::Whole => start,
            Start::Large => {
                let spill = spill.clone();
                let runtime = tokio::runtime::Handle::current();
                // Parsing 100 MB takes a while: not on an async worker.
                let parsed = tokio::task::spawn_blocking(move || {
                    parse_large(reader, start, &spill, max_line, runtime)
                })
                .await;
                let Ok((back, out)) = parsed else { return };
                reader = back;
                match out {
                    Some(out) => out,
                    None => continue,
                }
            }
        };
        if to_rmcp.write_all(&out).await.is_err() {
            return;
        }
    }
}

enum Start {
    /// A whole line (with its newline) was read.
    Whole,
    /// [`LARGE_LINE`] bytes were read without reaching the end of the line.
    Large,
    /// The input ended (a last line without a newline is incomplete and dropped).
    End,
}

async fn read_start<R: AsyncRead + Unpin>(reader: &mut BufReader<R>, line: &mut Vec<u8>) -> Start {
    loop {
        let (consumed, complete) = {
            let available = match reader.fill_buf().await {
                Ok([]) | Err(_) => return Start::End,
                Ok(available) => available,
            };
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            line.extend_from_slice(&available[..take]);
            (take, newline.is_some())
        };
        reader.consume(consumed);
        if complete {
            return Start::Whole;
        }
        if line.len() >= LARGE_LINE {
            return Start::Large;
        }
    }
}

/// Parses the line that began with `start` and continues in `reader`, then hands the
/// reader back with the line rmcp gets, if any.
fn parse_large<R: AsyncRead + Unpin>(
    reader: BufReader<R>,
    start: Vec<u8>,
    spill: &Spill,
    max_line: usize,
    runtime: tokio::runtime::Handle,
) -> (BufReader<R>, Option<Vec<u8>>) {
    let mut rest = UntilNewline {
        read: start.len(),
        inner: SyncIoBridge::new_with_handle(reader, runtime),
        max: max_line,
        ended: false,
        envelope: Envelope::of(&start),
    };
    let holding = RefCell::new(Holding::default());
    let parsed = {
        let input = std::io::BufReader::with_capacity(
            64 * 1024,
            std::io::Cursor::new(start).chain(&mut rest),
        );
        parse_message(
            serde_json::Deserializer::from_reader(input),
            spill,
            &holding,
        )
    };
    // Whatever is left of the line after an error is skipped, not buffered.
    rest.max = usize::MAX;
    let _ = std::io::copy(&mut rest, &mut std::io::sink());
    let holding = holding.into_inner();
    let out = match parsed {
        Ok(message) => settle(spill, message, &holding, rest.read),
        Err(error) => unreadable(spill, &holding, &rest.envelope, &error, rest.read),
    };
    (rest.inner.into_inner(), out)
}

/// An HTTP server's SSE events as rmcp gets them. An event whose data is at least
/// [`LARGE_LINE`] is parsed as the pump parses a large line, off the async workers: its
/// big strings held, at most [`MAX_VALUES`] values. Without it rmcp parses an event of up
/// to 256 MiB through its untagged enums, a dozen times its size in memory. An event is
/// never dropped, as rmcp follows the stream by it (its `id` to resume from, an answer to
/// close a request's stream): a message that is dropped leaves the event without data,
/// or, when it answered a request (one no call waits for any more), with a small error
/// for that request in its place.
pub(crate) fn held_events(
    events: rmcp::transport::common::client_side_sse::BoxedSseResponse,
    spill: Arc<Spill>,
) -> rmcp::transport::common::client_side_sse::BoxedSseResponse {
    use futures::StreamExt;
    events
        .then(move |event| {
            let spill = spill.clone();
            async move {
                let mut sse = match event {
                    Ok(sse)
                        if sse
                            .data
                            .as_ref()
                            .is_some_and(|data| data.len() >= LARGE_LINE) =>
                    {
                        sse
                    }
                    other => return other,
                };
                let data = sse.data.take().unwrap_or_default();
                let parsed =
                    tokio::task::spawn_blocking(move || parse_whole(&spill, data.as_bytes())).await;
                sse.data = match parsed {
                    Ok((Some(message), _)) => String::from_utf8(message).ok(),
                    Ok((None, Some(id))) => Some(
                        serde_json::json!({
                            "jsonrpc": "2.0",
                            "id": id,
                            "error": {"code": DROPPED_CODE, "message": "the answer was dropped"},
                        })
                        .to_string(),
                    ),
                    Ok((None, None)) => None,
                    Err(error) => {
                        tracing::error!(
                            "a large server event's message was dropped: its parse failed ({error})"
                        );
                        None
                    }
                };
                Ok(sse)
            }
        })
        .boxed()
}

/// One large message through the spill's seed, to its end: its big strings held in
/// `holding` as they are parsed.
fn parse_message<'de, R: serde_json::de::Read<'de>>(
    mut deserializer: serde_json::Deserializer<R>,
    spill: &Spill,
    holding: &RefCell<Holding>,
) -> Result<Value, serde_json::Error> {
    let seed = Parse {
        place: Place::Message,
        spill,
        holding,
    };
    seed.deserialize(&mut deserializer)
        .and_then(|message| deserializer.end().map(|()| message))
}

/// Parses one whole large message held in memory (an SSE event's data) as [`parse_large`]
/// parses a line: what rmcp gets of it, if anything, and the message's `id` if one was
/// read.
fn parse_whole(spill: &Spill, data: &[u8]) -> (Option<Vec<u8>>, Option<Value>) {
    let holding = RefCell::new(Holding::default());
    let parsed = parse_message(serde_json::Deserializer::from_slice(data), spill, &holding);
    let holding = holding.into_inner();
    match parsed {
        Ok(message) => {
            let passed = settle(spill, message, &holding, data.len());
            (passed, holding.id)
        }
        Err(error) => {
            let envelope = Envelope::of(data);
            let passed = unreadable(spill, &holding, &envelope, &error, data.len());
            (passed, holding.id.or_else(|| envelope.id()))
        }
    }
}

/// A large message that did not parse (not JSON, too long, too many values) is dropped.
/// When its `id` names a request Conduit awaits, rmcp gets an error for that request in
/// its place, so the call fails saying why instead of waiting out its time. When it is
/// the server's own request (it has a `method` and an `id`), rmcp gets a small
/// [`UNREADABLE_REQUEST`] with the same `id` in its place, so the server is answered
/// with an error rather than never. The two are the parse's when it read them, else the
/// `envelope`'s, which finds them wherever they were written (after the part that failed).
fn unreadable(
    spill: &Spill,
    holding: &Holding,
    envelope: &Envelope,
    error: &serde_json::Error,
    bytes: usize,
) -> Option<Vec<u8>> {
    spill.release(&holding.ids);
    tracing::error!(
        server = %spill.server,
        bytes,
        "a large server message was dropped: {error}"
    );
    let id = holding.id.clone().or_else(|| envelope.id())?;
    let method = holding
        .method
        .clone()
        .or_else(|| envelope.method().map(|whole| method_name(&whole)));
    if let Some(method) = &method {
        let stand_in = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": UNREADABLE_REQUEST,
            "params": {
                "method": method,
                "mib": bytes / (1024 * 1024),
                "reason": error.to_string(),
            },
        });
        let mut line = serde_json::to_vec(&stand_in).unwrap_or_default();
        line.push(b'\n');
        return Some(line);
    }
    spill.take_answer(Some(&id))?;
    let error = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": DROPPED_CODE,
            "message": format!(
                "{}its answer ({} MiB) was dropped: it does not read as a message ({error})",
                spill.prefix,
                bytes / (1024 * 1024)
            ),
        },
    });
    let mut line = serde_json::to_vec(&error).unwrap_or_default();
    line.push(b'\n');
    Some(line)
}

/// What rmcp gets of a parsed large message: an answer the client claims from keeps its
/// held strings (or, past the cap, becomes an error saying why); an answer to another
/// request of Conduit's passes with nothing held; an answer to no request awaited is
/// dropped. Anything else (a request, a notification) passes with nothing held.
fn settle(spill: &Spill, message: Value, holding: &Holding, bytes: usize) -> Option<Vec<u8>> {
    let line = |message: &Value| {
        let mut small = serde_json::to_vec(message).unwrap_or_default();
        small.push(b'\n');
        small
    };
    let is_answer = message.get("method").is_none()
        && (message.get("result").is_some() || message.get("error").is_some());
    if !is_answer {
        spill.release(&holding.ids);
        return Some(line(&message));
    }
    match spill.take_answer(message.get("id")) {
        None => {
            spill.release(&holding.ids);
            tracing::warn!(
                server = %spill.server,
                bytes,
                "a large answer to no request Conduit awaits was dropped"
            );
            None
        }
        Some(false) => {
            spill.release(&holding.ids);
            Some(line(&message))
        }
        Some(true) if holding.full => {
            spill.release(&holding.ids);
            let cap_mib = spill.max_held / (1024 * 1024);
            tracing::warn!(
                server = %spill.server,
                bytes,
                cap_mib,
                "a large answer was dropped: the results waiting to be read would hold too much"
            );
            let reason = format!(
                "its answer ({} MiB) was dropped: with it, the large results waiting to be read would be over {cap_mib} MiB",
                bytes / (1024 * 1024)
            );
            let error = serde_json::json!({
                "jsonrpc": "2.0",
                "id": message.get("id"),
                "error": {"code": DROPPED_CODE, "message": format!("{}{reason}", spill.prefix)},
            });
            Some(line(&error))
        }
        Some(true) => Some(line(&message)),
    }
}

/// A message's method as named in an answer: cut to [`MAX_METHOD_NAME`].
fn method_name(whole: &str) -> String {
    let mut name = conduit_core::content::text_start(whole, MAX_METHOD_NAME).to_owned();
    if name.len() < whole.len() {
        name.push('…');
    }
    name
}

/// Reads up to (and consumes) the next newline, then reports end of input; fails once
/// the line is over `max` bytes. Every byte read goes through `envelope` too.
struct UntilNewline<B> {
    inner: B,
    read: usize,
    max: usize,
    ended: bool,
    envelope: Envelope,
}

impl<B: BufRead> Read for UntilNewline<B> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.ended {
            return Ok(0);
        }
        let available = self.inner.fill_buf()?;
        if available.is_empty() {
            self.ended = true;
            return Ok(0);
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let end = newline.unwrap_or(available.len());
        let n = end.min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.envelope.feed(&available[..n]);
        let at_newline = newline == Some(n);
        self.inner.consume(n + usize::from(at_newline));
        self.ended = at_newline;
        self.read += n;
        if self.read > self.max {
            return Err(std::io::Error::other(format!(
                "the message is over {} bytes",
                self.max
            )));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::RequestId;
    use serde_json::json;

    fn big(byte: char) -> String {
        std::iter::repeat_n(byte, LARGE_LINE).collect()
    }

    #[tokio::test]
    async fn a_large_tool_result_arrives_small_and_is_restored_whole() {
        let text = big('a');
        let blob = big('b');
        let other = big('c');
        let message = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [
                {"type": "text", "text": text},
                {"type": "text", "text": "short"},
                {"type": "resource", "resource": {"uri": "file:///x", "blob": blob}}
            ],
            "structuredContent": {"result": text, "other": [other], "n": 3}
        }});
        let mut input = serde_json::to_vec(&message).unwrap();
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n");
        let spill = Arc::new(Spill::new("test"));
        spill.asked(&RequestId::Number(1), true);
        let mut out = Vec::new();
        pump(
            std::io::Cursor::new(input),
            &mut out,
            spill.clone(),
            usize::MAX,
        )
        .await;

        let lines: Vec<&[u8]> = out
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].len() < 1024, "{} bytes passed on", lines[0].len());
        assert_eq!(lines[1], br#"{"jsonrpc":"2.0","id":2,"result":{}}"#);
        assert_eq!(
            spill.held.lock().by_id.len(),
            3,
            "the text, the blob and the other string; the copy of the text is not kept"
        );

        let small: Value = serde_json::from_slice(lines[0]).unwrap();
        let mut result: CallToolResult = serde_json::from_value(small["result"].clone()).unwrap();
        spill.claim_tool_result(&mut result);
        assert_eq!(result.content[0].as_text().unwrap().text, text);
        assert_eq!(result.content[1].as_text().unwrap().text, "short");
        let ContentBlock::Resource(embedded) = &result.content[2] else {
            panic!("not a resource")
        };
        assert!(
            matches!(&embedded.resource, ResourceContents::BlobResourceContents { blob: b, .. } if *b == blob)
        );
        let copy_note = format!(
            "[a copy of another part of this result ({} bytes), left out]",
            text.len()
        );
        assert_eq!(
            result.structured_content,
            Some(json!({"result": copy_note, "other": [other], "n": 3}))
        );
        assert!(spill.held.lock().by_id.is_empty(), "everything claimed");
    }

    #[test]
    fn a_message_that_does_not_parse_leaves_nothing_held() {
        let spill = Spill::new("test");
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}, oops\n",
            big('a')
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let reader = BufReader::new(std::io::Cursor::new(Vec::new()));
        let (_, out) = runtime.block_on(async {
            tokio::task::spawn_blocking({
                let handle = tokio::runtime::Handle::current();
                move || {
                    let spill = spill;
                    let result = parse_large(reader, line.into_bytes(), &spill, usize::MAX, handle);
                    assert!(spill.held.lock().by_id.is_empty());
                    result
                }
            })
            .await
            .unwrap()
        });
        assert!(out.is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn small_lines_pass_through_and_unusable_large_lines_are_dropped() {
        let spill = Arc::new(Spill::new("test"));
        let input = format!(
            "small garbage\nnot json {}\n{}\n{}\nafter\n",
            big('x').repeat(2),
            big('y').repeat(3),
            json!({"jsonrpc": "2.0", "method": "m", "params": {"p": big('z')}})
        );
        let mut out = Vec::new();
        pump(
            std::io::Cursor::new(input.into_bytes()),
            &mut out,
            spill,
            2 * LARGE_LINE + 100,
        )
        .await;
        let lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
        assert_eq!(lines.len(), 4, "three lines and the end");
        assert_eq!(lines[0], b"small garbage");
        let message: Value = serde_json::from_slice(lines[1]).unwrap();
        assert_eq!(message["params"]["p"], big('z'), "only results are shrunk");
        assert_eq!(lines[2], b"after");
    }

    /// A large answer Conduit awaits that does not read (too many values here) fails its
    /// request at once, saying why, rather than leaving the call to wait out its time.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_awaited_answer_that_does_not_read_fails_its_request_saying_why() {
        let spill = Arc::new(Spill::new("test"));
        spill.asked(&RequestId::Number(7), true);
        let objects = vec!["{}"; MAX_VALUES + 1].join(",");
        let input = format!(
            "{}\n",
            format_args!(
                r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[],"structuredContent":{{"rows":[{objects}]}}}}}}"#
            ),
        );
        let mut out = Vec::new();
        pump(
            std::io::Cursor::new(input.into_bytes()),
            &mut out,
            spill.clone(),
            16 * LARGE_LINE,
        )
        .await;
        let answer: Value = serde_json::from_slice(out.trim_ascii_end()).unwrap();
        assert_eq!(answer["id"], 7);
        let message = answer["error"]["message"].as_str().unwrap();
        let reason = spill.own_error(message).unwrap();
        assert!(
            reason.starts_with("its answer (2 MiB) was dropped: it does not read as a message")
                && reason.contains(&format!("more than {MAX_VALUES} values")),
            "{reason}"
        );
        // Answered once: a second copy of the same answer is dropped as awaited by none.
        assert!(spill.take_answer(Some(&json!(7))).is_none());
    }

    /// An HTTP server's large SSE events go through the spill: an awaited answer arrives
    /// small and is restored whole, one that does not read fails its request, one awaited
    /// by nothing is let go (a small error stands in); small events pass untouched.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn large_sse_events_are_parsed_as_large_lines_are() {
        use futures::StreamExt;
        let spill = Arc::new(Spill::new("test"));
        spill.asked(&RequestId::Number(1), true);
        spill.asked(&RequestId::Number(2), true);
        let text = big('a');
        let event = |data: String| {
            Ok::<_, sse_stream::Error>(sse_stream::Sse {
                event: Some("message".into()),
                data: Some(data),
                id: None,
                retry: None,
            })
        };
        let zeros = vec!["0"; MAX_VALUES + 1].join(",");
        let events = futures::stream::iter([
            event(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#.into()),
            event(
                json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":text}]}})
                    .to_string(),
            ),
            event(format!(
                r#"{{"jsonrpc":"2.0","id":2,"result":{{"structuredContent":{{"z":[{zeros}]}}}}}}"#
            )),
            event(
                json!({"jsonrpc":"2.0","id":99,"result":{"content":[{"type":"text","text":text}]}})
                    .to_string(),
            ),
        ])
        .boxed();
        let passed: Vec<Value> = held_events(events, spill.clone())
            .map(|event| serde_json::from_str(&event.unwrap().data.unwrap()).unwrap())
            .collect()
            .await;
        assert_eq!(
            passed.len(),
            4,
            "every event stays, for rmcp to follow the stream"
        );
        assert_eq!(passed[0]["method"], "notifications/progress");
        let small = serde_json::to_string(&passed[1]).unwrap();
        assert!(small.len() < 1024, "{} bytes passed on", small.len());
        let mut result: CallToolResult =
            serde_json::from_value(passed[1]["result"].clone()).unwrap();
        spill.claim_tool_result(&mut result);
        assert_eq!(result.content[0].as_text().unwrap().text, text);
        assert_eq!(passed[2]["id"], 2);
        assert!(
            passed[2]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("does not read")
        );
        // The answer no call awaits is let go: a small error in its place closes its stream.
        assert_eq!(passed[3]["id"], 99);
        assert_eq!(passed[3]["error"]["message"], "the answer was dropped");
        assert!(spill.held.lock().by_id.is_empty(), "nothing left held");
    }

    /// What the pump passes on of `input`, lines of up to 32 MiB.
    async fn pumped(spill: &Arc<Spill>, input: String) -> Vec<u8> {
        let mut out = Vec::new();
        pump(
            std::io::Cursor::new(input.into_bytes()),
            &mut out,
            spill.clone(),
            32 * LARGE_LINE,
        )
        .await;
        out
    }

    /// A large message whose text outside a result's content is past the cap (a progress
    /// message of megabytes, an awaited error's text, a key) is dropped, not built whole
    /// for rmcp to parse again; an awaited one fails its request saying why. Text inside
    /// a result's content is held aside as before, and the next line still passes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_message_with_too_much_text_outside_a_result_is_dropped() {
        let spill = Arc::new(Spill::new("test"));
        spill.asked(&RequestId::Number(3), true);
        let huge = "m".repeat(MAX_PLAIN_TEXT + 1);
        let input = format!(
            "{}
{}
{}
after
",
            json!({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": 1, "progress": 1, "message": huge}}),
            json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": huge}}),
            format_args!(r#"{{"jsonrpc":"2.0","method":"x","params":{{"{huge}":1}}}}"#),
        );
        let out = pumped(&spill, input).await;
        let lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
        assert_eq!(
            lines.len(),
            3,
            "the awaited error's answer, after, and the end"
        );
        let answer: Value = serde_json::from_slice(lines[0]).unwrap();
        assert_eq!(answer["id"], 3);
        let reason = spill
            .own_error(answer["error"]["message"].as_str().unwrap())
            .unwrap();
        assert!(
            reason.contains("more than 16 MiB of text outside a result"),
            "{reason}"
        );
        assert_eq!(lines[1], b"after");

        // A result's content of many strings each under the size held aside is not
        // counted against it (its values are): 300 blocks of 60 KB pass.
        spill.asked(&RequestId::Number(4), true);
        let blocks: Vec<Value> = (0..300)
            .map(|_| json!({"type": "text", "text": "c".repeat(60 * 1024)}))
            .collect();
        let input = format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": 4, "result": {"content": blocks}})
        );
        let out = pumped(&spill, input).await;
        let answer: Value = serde_json::from_slice(out.trim_ascii_end()).unwrap();
        assert_eq!(answer["result"]["content"].as_array().unwrap().len(), 300);

        // A listing of 20 MiB of descriptions, its `id` and `jsonrpc` written after its
        // `result` (as some SDKs order them), is within the list cap and passes.
        spill.asked(&RequestId::Number(5), false);
        let tools: Vec<Value> = (0..320)
            .map(|n| {
                json!({"name": format!("t{n}"), "description": "d".repeat(64 * 1024),
                       "inputSchema": {"type": "object"}})
            })
            .collect();
        let input = format!(
            "{{\"result\":{},\"id\":5,\"jsonrpc\":\"2.0\"}}\n",
            json!({ "tools": tools })
        );
        let out = pumped(&spill, input).await;
        let answer: Value = serde_json::from_slice(out.trim_ascii_end()).unwrap();
        assert_eq!(answer["result"]["tools"].as_array().unwrap().len(), 320);
    }

    /// A server's own request too large to read (a sampling request of too many values
    /// here) becomes a small stand-in with the same `id`, which the client answers with an
    /// error, instead of vanishing and leaving the server waiting for good. Its `id` is
    /// the server's, not an answer to Conduit's request of the same number.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_request_too_large_to_read_stands_in_as_one_to_answer() {
        let spill = Arc::new(Spill::new("test"));
        spill.asked(&RequestId::Number(5), true);
        let zeros = vec!["0"; MAX_VALUES + 1].join(",");
        let long_method = "m".repeat(1000);
        let input = format!(
            "{}\n{}\n",
            format_args!(
                r#"{{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{{"messages":[{zeros}]}}}}"#
            ),
            format_args!(
                r#"{{"jsonrpc":"2.0","id":"x","method":"{long_method}","params":{{"data":[{zeros}]}}}}"#
            ),
        );
        let lines = pumped_lines_within(&spill, input, 16 * LARGE_LINE).await;
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["id"], 5);
        assert_eq!(lines[0]["method"], UNREADABLE_REQUEST);
        assert_eq!(lines[0]["params"]["method"], "sampling/createMessage");
        assert_eq!(lines[0]["params"]["mib"], 1);
        let reason = lines[0]["params"]["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!("more than {MAX_VALUES} values")),
            "{reason}"
        );
        // The method's name is cut.
        assert_eq!(lines[1]["id"], "x");
        let method = lines[1]["params"]["method"].as_str().unwrap();
        assert_eq!(method, format!("{}…", "m".repeat(MAX_METHOD_NAME)));
        // Conduit's own request 5 still waits for its answer.
        assert!(spill.awaits(&json!(5)));
    }

    /// The TypeScript SDK writes a request's `id` after its `params` and an answer's after
    /// its `result`: a message of that order that fails to parse (too many values, too
    /// long a line) is still answered, the server's request with the stand-in, Conduit's
    /// call with an error, though the parse stopped before reaching either.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_message_too_large_to_read_is_named_by_an_id_written_after_its_body() {
        let spill = Arc::new(Spill::new("test"));
        spill.asked(&RequestId::Number(3), true);
        let zeros = vec!["0"; MAX_VALUES + 1].join(",");
        let long = "x".repeat(3 * LARGE_LINE);
        let input = format!(
            "{}\n{}\n{}\n",
            format_args!(
                r#"{{"method":"sampling/createMessage","params":{{"messages":[{zeros}]}},"jsonrpc":"2.0","id":"ts-1"}}"#
            ),
            format_args!(
                r#"{{"method":"elicitation/create","params":{{"message":"{long}"}},"jsonrpc":"2.0","id":9}}"#
            ),
            format_args!(
                r#"{{"result":{{"structuredContent":{{"rows":[{zeros}]}}}},"jsonrpc":"2.0","id":3}}"#
            ),
        );
        let lines = pumped_lines_within(&spill, input, 2 * LARGE_LINE).await;
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0]["id"], "ts-1");
        assert_eq!(lines[0]["method"], UNREADABLE_REQUEST);
        assert_eq!(lines[0]["params"]["method"], "sampling/createMessage");
        assert_eq!(lines[1]["id"], 9);
        assert_eq!(lines[1]["method"], UNREADABLE_REQUEST);
        assert_eq!(lines[1]["params"]["method"], "elicitation/create");
        assert_eq!(lines[1]["params"]["mib"], 3);
        let reason = lines[1]["params"]["reason"].as_str().unwrap();
        assert!(reason.contains("over"), "{reason}");
        // Conduit's call 3 fails now, saying why, instead of waiting out its time.
        assert_eq!(lines[2]["id"], 3);
        let message = lines[2]["error"]["message"].as_str().unwrap();
        assert!(spill.own_error(message).is_some(), "{message}");
        assert!(!spill.awaits(&json!(3)));
    }

    /// The same for an HTTP server's event: its message's `id` written last still names it.
    #[test]
    fn an_event_too_large_to_read_is_named_by_an_id_written_last() {
        let spill = Spill::new("test");
        let zeros = vec!["0"; MAX_VALUES + 1].join(",");
        let data = format!(
            r#"{{"method":"sampling/createMessage","params":{{"messages":[{zeros}]}},"jsonrpc":"2.0","id":4}}"#
        );
        let (passed, id) = parse_whole(&spill, data.as_bytes());
        assert_eq!(id, Some(json!(4)));
        let stand_in: Value = serde_json::from_slice(&passed.unwrap()).unwrap();
        assert_eq!(stand_in["method"], UNREADABLE_REQUEST);
        assert_eq!(stand_in["id"], 4);
    }

    /// A large message of many small values (a notification whose data is a long array
    /// of zeros, objects in a tool's structured content) is dropped once it passes the
    /// count, not built into gigabytes of values; the next line still passes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_message_of_too_many_small_values_is_dropped() {
        let spill = Arc::new(Spill::new("test"));
        let zeros = vec!["0"; MAX_VALUES + 1].join(",");
        let objects = vec!["{}"; MAX_VALUES + 1].join(",");
        let fits = vec!["0"; LARGE_LINE / 2].join(",");
        let input = format!(
            "{}\n{}\n{}\nafter\n",
            format_args!(
                r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":[{zeros}]}}}}"#
            ),
            format_args!(
                r#"{{"jsonrpc":"2.0","result":{{"content":[],"structuredContent":{{"rows":[{objects}]}}}},"id":1}}"#
            ),
            format_args!(
                r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":[{fits}]}}}}"#
            ),
        );
        let mut out = Vec::new();
        pump(
            std::io::Cursor::new(input.into_bytes()),
            &mut out,
            spill,
            16 * LARGE_LINE,
        )
        .await;
        let lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
        assert_eq!(lines.len(), 3, "the message that fits, after, and the end");
        let message: Value = serde_json::from_slice(lines[0]).unwrap();
        assert_eq!(
            message["params"]["data"].as_array().unwrap().len(),
            LARGE_LINE / 2
        );
        assert_eq!(lines[1], b"after");
    }

    #[test]
    fn strings_nobody_claims_are_dropped() {
        let spill = Spill::new("test");
        let big = "x".repeat(LARGE_STRING);
        let _id = spill.hold(&big, spill.digest(&big), &mut Holding::default());
        spill.sweep(UNCLAIMED);
        assert_eq!(spill.held.lock().by_id.len(), 1, "still fresh");
        spill.sweep(Duration::ZERO);
        assert!(spill.held.lock().by_id.is_empty());
    }

    #[test]
    fn text_that_only_looks_like_a_marker_is_left_alone() {
        let spill = Spill::new("test");
        let mut forged = "\u{1}conduit-spill-0000000000000000:0".to_owned();
        let _held = spill.hold("secret", spill.digest("secret"), &mut Holding::default());
        spill.claim(&mut forged);
        assert_eq!(forged, "\u{1}conduit-spill-0000000000000000:0");
        let mut copy = "\u{1}conduit-spill-0000000000000000:copy:0:6".to_owned();
        spill.claim(&mut copy);
        assert_eq!(copy, "\u{1}conduit-spill-0000000000000000:copy:0:6");
    }

    /// A large answer to `id` whose text is `bytes` long.
    fn answer(id: Value, bytes: usize, fill: char) -> String {
        let text: String = std::iter::repeat_n(fill, bytes).collect();
        format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
        )
    }

    async fn pumped_lines(spill: &Arc<Spill>, input: String) -> Vec<Value> {
        pumped_lines_within(spill, input, usize::MAX).await
    }

    /// What rmcp gets of `input` through the pump, line by line, lines capped at
    /// `max_line` bytes.
    async fn pumped_lines_within(spill: &Arc<Spill>, input: String, max_line: usize) -> Vec<Value> {
        let mut out = Vec::new();
        pump(
            std::io::Cursor::new(input.into_bytes()),
            &mut out,
            spill.clone(),
            max_line,
        )
        .await;
        out.split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| serde_json::from_slice(line).unwrap())
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_answers_the_client_awaits_are_held() {
        let spill = Arc::new(Spill::new("test"));
        spill.asked(&RequestId::Number(1), true);
        spill.asked(&RequestId::Number(2), false);
        // Well over a large line, wherever the reader's chunks end.
        let size = 2 * LARGE_LINE;
        // Never sent, with `id` first (skipped) and last (parsed, then let go); a list's
        // answer (passed on, nothing held); the tool call's answer (held).
        let never_sent_last = format!(
            "{{\"jsonrpc\":\"2.0\",\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}},\"id\":987654}}\n",
            big('q').repeat(2)
        );
        let input = answer(json!(987_653), size, 'a')
            + &never_sent_last
            + &answer(json!(2), size, 'b')
            + &answer(json!(1), size, 'c')
            + &answer(json!(1), size, 'd');
        let lines = pumped_lines(&spill, input).await;
        let ids: Vec<&Value> = lines.iter().map(|line| &line["id"]).collect();
        assert_eq!(
            ids,
            [&json!(2), &json!(1)],
            "the second answer to 1 is not awaited"
        );
        assert_eq!(spill.held_bytes(), size, "only the tool call's text");
        let mut result: CallToolResult =
            serde_json::from_value(lines[1]["result"].clone()).unwrap();
        spill.claim_tool_result(&mut result);
        assert_eq!(result.content[0].as_text().unwrap().text.len(), size);
        assert_eq!(spill.held_bytes(), 0);
    }

    /// The review's hostile server with a smaller cap: answers past it are dropped, the
    /// call they answer fails saying so, and the bytes held never pass the cap.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_is_held_stays_under_the_cap() {
        // Well over a large line, wherever the reader's chunks end.
        let size = 2 * LARGE_LINE;
        let spill = Arc::new(Spill::with_cap("test", 2 * size + 10));
        for id in 1..=4 {
            spill.asked(&RequestId::Number(id), true);
        }
        let input = (1..=4)
            .map(|id| answer(json!(id), size, 'z'))
            .collect::<String>();
        let lines = pumped_lines(&spill, input).await;
        assert_eq!(lines.len(), 4);
        assert_eq!(spill.held_bytes(), 2 * size, "the first two answers");
        for line in &lines[2..] {
            let message = line["error"]["message"].as_str().unwrap();
            let reason = spill.own_error(message).unwrap();
            assert!(reason.contains("was dropped"), "{reason}");
            assert!(line.get("result").is_none());
        }
        // A server cannot forge the pump's words.
        assert!(spill.own_error("was dropped").is_none());
        // Claimed, they make room again.
        for line in &lines[..2] {
            let mut result: CallToolResult =
                serde_json::from_value(line["result"].clone()).unwrap();
            spill.claim_tool_result(&mut result);
        }
        assert_eq!(spill.held_bytes(), 0);
        spill.asked(&RequestId::Number(5), true);
        let lines = pumped_lines(&spill, answer(json!(5), size, 'z')).await;
        assert!(lines[0].get("result").is_some());
    }
}
