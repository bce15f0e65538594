//! Keeps the huge strings of a large stdio message out of rmcp's parser: a pump between
//! the server's stdout and rmcp parses each large line once, moves its big text and blob
//! strings aside, and passes on a small line with markers that the client swaps back.
//!
//! rmcp parses a message through untagged enums, which copy every string several times:
//! a 50 MB tool output used to peak near 600 MB. Through the pump, the strings are parsed
//! once and then only moved.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::io::{BufRead, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, ContentBlock, ReadResourceResult, ResourceContents};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio_util::io::SyncIoBridge;

/// Lines at least this long are parsed by the pump; shorter ones pass through untouched.
const LARGE_LINE: usize = 1024 * 1024;
/// Strings at least this long in a large line's result are moved aside.
const LARGE_STRING: usize = 64 * 1024;
/// A held string nobody claimed (its call timed out or was stopped) is dropped after this,
/// by the connection's sweeper or the next hold.
pub(crate) const UNCLAIMED: Duration = Duration::from_secs(120);

/// Strings moved out of messages, waiting for the client to claim them by marker.
pub(crate) struct Spill {
    prefix: String,
    next: AtomicU64,
    held: Mutex<HashMap<u64, (Instant, String)>>,
}

impl Spill {
    pub(crate) fn new() -> Self {
        // A marker a server cannot guess, so its own text is never mistaken for one.
        let nonce = RandomState::new().hash_one(Instant::now());
        Self {
            prefix: format!("\u{1}conduit-spill-{nonce:016x}:"),
            next: AtomicU64::new(0),
            held: Mutex::new(HashMap::new()),
        }
    }

    fn hold(&self, text: String) -> String {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.sweep(UNCLAIMED);
        if let Ok(mut held) = self.held.lock() {
            held.insert(id, (Instant::now(), text));
        }
        format!("{}{id}", self.prefix)
    }

    /// Drops what was held longer than `age`: the answer of a call nobody waits for.
    pub(crate) fn sweep(&self, age: Duration) {
        if let Ok(mut held) = self.held.lock() {
            let now = Instant::now();
            held.retain(|_, (since, _)| now.duration_since(*since) < age);
        }
    }

    /// Puts the held string back where its marker is.
    fn claim(&self, text: &mut String) {
        let Some(id) = text
            .strip_prefix(&self.prefix)
            .and_then(|id| id.parse::<u64>().ok())
        else {
            return;
        };
        if let Some((_, held)) = self.held.lock().ok().and_then(|mut h| h.remove(&id)) {
            *text = held;
        }
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

    /// Moves the big strings of a response's result aside; anything else is left as is.
    fn shrink(&self, message: &mut Value) {
        let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) else {
            return;
        };
        for key in ["content", "contents"] {
            if let Some(Value::Array(items)) = result.get_mut(key) {
                for item in items {
                    for field in ["text", "data", "blob"] {
                        self.hold_field(item.get_mut(field));
                    }
                    if let Some(resource) = item.get_mut("resource") {
                        self.hold_field(resource.get_mut("text"));
                        self.hold_field(resource.get_mut("blob"));
                    }
                }
            }
        }
        if let Some(structured) = result.get_mut("structuredContent") {
            self.hold_all(structured);
        }
    }

    fn hold_field(&self, field: Option<&mut Value>) {
        if let Some(Value::String(text)) = field
            && text.len() >= LARGE_STRING
        {
            *text = self.hold(std::mem::take(text));
        }
    }

    fn hold_all(&self, value: &mut Value) {
        match value {
            Value::String(_) => self.hold_field(Some(value)),
            Value::Array(items) => items.iter_mut().for_each(|item| self.hold_all(item)),
            Value::Object(map) => map.values_mut().for_each(|item| self.hold_all(item)),
            _ => {}
        }
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
    };
    let parsed = serde_json::from_reader::<_, Value>(std::io::BufReader::with_capacity(
        64 * 1024,
        std::io::Cursor::new(start).chain(&mut rest),
    ));
    // Whatever is left of the line after an error is skipped, not buffered.
    rest.max = usize::MAX;
    let _ = std::io::copy(&mut rest, &mut std::io::sink());
    let out = match parsed {
        Ok(mut message) => {
            spill.shrink(&mut message);
            let mut small = serde_json::to_vec(&message).unwrap_or_default();
            small.push(b'\n');
            Some(small)
        }
        Err(error) => {
            tracing::error!(
                bytes = rest.read,
                "a large server message was dropped: {error}"
            );
            None
        }
    };
    (rest.inner.into_inner(), out)
}

/// Reads up to (and consumes) the next newline, then reports end of input; fails once
/// the line is over `max` bytes.
struct UntilNewline<B> {
    inner: B,
    read: usize,
    max: usize,
    ended: bool,
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
    use serde_json::json;

    fn big(byte: char) -> String {
        std::iter::repeat_n(byte, LARGE_LINE).collect()
    }

    #[tokio::test]
    async fn a_large_tool_result_arrives_small_and_is_restored_whole() {
        let text = big('a');
        let blob = big('b');
        let message = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [
                {"type": "text", "text": text},
                {"type": "text", "text": "short"},
                {"type": "resource", "resource": {"uri": "file:///x", "blob": blob}}
            ],
            "structuredContent": {"result": text, "n": 3}
        }});
        let mut input = serde_json::to_vec(&message).unwrap();
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n");
        let spill = Arc::new(Spill::new());
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
        assert_eq!(
            result.structured_content,
            Some(json!({"result": text, "n": 3}))
        );
        assert!(spill.held.lock().unwrap().is_empty(), "everything claimed");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn small_lines_pass_through_and_unusable_large_lines_are_dropped() {
        let spill = Arc::new(Spill::new());
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

    #[test]
    fn strings_nobody_claims_are_dropped() {
        let spill = Spill::new();
        let _marker = spill.hold("x".repeat(LARGE_STRING));
        spill.sweep(UNCLAIMED);
        assert_eq!(spill.held.lock().unwrap().len(), 1, "still fresh");
        spill.sweep(Duration::ZERO);
        assert!(spill.held.lock().unwrap().is_empty());
    }

    #[test]
    fn text_that_only_looks_like_a_marker_is_left_alone() {
        let spill = Spill::new();
        let mut forged = "\u{1}conduit-spill-0000000000000000:0".to_owned();
        let _held = spill.hold("secret".into());
        spill.claim(&mut forged);
        assert_eq!(forged, "\u{1}conduit-spill-0000000000000000:0");
    }
}
