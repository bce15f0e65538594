//! A provider's SSE bytes as the SSE parser takes them: only what Conduit reads (`data`
//! lines, comments, the empty lines that end events) reaches it, since `sse-stream` ends
//! the whole stream at lines the specification ignores.
//!
//! The specification (WHATWG HTML, "event stream interpretation") ignores a field it does
//! not know and a `retry` that is not a number, takes the last of a repeated `event` or
//! `id`, and reads a line without a colon as a field with an empty value. `sse-stream`
//! 0.2 fails on each ("invalid line", a parse error, "duplicated event line"), so one
//! proxy adding a field of its own would break every turn. Conduit's decoders read only
//! `data` (an answer is never resumed, and each event names its own type), so every other
//! field's lines are dropped. Only the start of each line (its field name) is looked at;
//! the rest passes untouched, with its line ending. A byte order mark at the stream's
//! start, which the parser would have skipped, is skipped here.

use bytes::{Buf, Bytes};

/// The one field Conduit reads.
const DATA: &[u8] = b"data";
/// A field name longer than `data` is not it.
const LONGEST_NAME: usize = DATA.len();
/// A UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Where the filter is in the current line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Reading the field name (kept in `name`).
    Name,
    /// After a known field's colon, or a comment's: the rest of the line passes.
    Passing,
    /// In a line of an unknown field: the rest of it is dropped.
    Dropping,
}

/// The filter's state across chunks.
#[derive(Debug)]
pub(crate) struct SpecLines {
    place: Place,
    /// The field name read so far (at most [`LONGEST_NAME`] + 1 bytes).
    name: Vec<u8>,
    /// The last byte was a CR: a LF right after it ends the same line.
    after_cr: bool,
    /// That CR ended a dropped line: its LF is dropped too.
    dropped_cr: bool,
    /// Nothing but (a start of) a byte order mark has come yet.
    at_start: bool,
}

impl Default for SpecLines {
    fn default() -> Self {
        Self {
            place: Place::Name,
            name: Vec::new(),
            after_cr: false,
            dropped_cr: false,
            at_start: true,
        }
    }
}

impl SpecLines {
    /// The bytes of `chunk` the parser gets.
    pub(crate) fn filter(&mut self, mut chunk: impl Buf) -> Bytes {
        let input = chunk.copy_to_bytes(chunk.remaining());
        let mut out = Vec::with_capacity(input.len());
        for &byte in input.iter() {
            if self.at_start {
                let mut start = self.name.clone();
                start.push(byte);
                if BOM.starts_with(&start) {
                    self.name = start;
                    if self.name == BOM {
                        self.name.clear();
                        self.at_start = false;
                    }
                    continue;
                }
                self.at_start = false;
            }
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            let dropped_cr = std::mem::take(&mut self.dropped_cr);
            if byte == b'\n' && after_cr {
                // The LF of a CRLF whose CR ended the line.
                if !dropped_cr {
                    out.push(byte);
                }
                continue;
            }
            let ends_line = byte == b'\n' || byte == b'\r';
            match self.place {
                Place::Passing => out.push(byte),
                Place::Dropping => {}
                Place::Name if ends_line => {
                    // A line without a colon: an empty line ends an event; a known field
                    // name alone is that field with an empty value; anything else goes.
                    if self.name.is_empty() {
                        out.push(byte);
                    } else if self.name == DATA {
                        out.extend_from_slice(&self.name);
                        out.push(b':');
                        out.push(byte);
                    } else {
                        self.dropped_cr = byte == b'\r';
                    }
                    self.name.clear();
                }
                Place::Name if byte == b':' => {
                    // A comment (no name) or a `data` line passes whole.
                    if self.name.is_empty() || self.name == DATA {
                        out.extend_from_slice(&self.name);
                        out.push(byte);
                        self.place = Place::Passing;
                    } else {
                        self.place = Place::Dropping;
                    }
                    self.name.clear();
                }
                Place::Name => {
                    self.name.push(byte);
                    if self.name.len() > LONGEST_NAME {
                        self.name.clear();
                        self.place = Place::Dropping;
                    }
                }
            }
            if ends_line {
                if self.place == Place::Dropping {
                    self.dropped_cr = byte == b'\r';
                }
                self.place = Place::Name;
            }
        }
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filter's output for `chunks` fed one after another.
    fn filtered(chunks: &[&[u8]]) -> String {
        let mut lines = SpecLines::default();
        let out: Vec<u8> = chunks
            .iter()
            .flat_map(|chunk| lines.filter(*chunk).to_vec())
            .collect();
        String::from_utf8(out).unwrap()
    }

    fn whole(stream: &str) -> String {
        filtered(&[stream.as_bytes()])
    }

    #[test]
    fn data_comments_and_event_ends_pass_untouched() {
        let stream = ": ping\ndata: {\"a\": \"b:c\"}\n\n";
        assert_eq!(whole(stream), stream);
        let crlf = "data: x\r\n\r\ndata: y\r\rdata: z\n\n";
        assert_eq!(whole(crlf), crlf);
    }

    #[test]
    fn other_fields_are_dropped_and_a_bare_data_is_an_empty_one() {
        assert_eq!(
            whole(
                "x-proxy: 1\nevent: a\nevent: b\nid: 7\nretry: 3s\nretry\ndata: a\nfoo\ndata\nverylongfield: z\n\n"
            ),
            "data: a\ndata:\n\n"
        );
        // With CRLF endings, the dropped line's LF goes with it.
        assert_eq!(whole("x-proxy: 1\r\ndata: a\r\n\r\n"), "data: a\r\n\r\n");
    }

    #[test]
    fn a_byte_order_mark_at_the_start_is_skipped() {
        assert_eq!(whole("\u{FEFF}data: first\n\n"), "data: first\n\n");
        // Only at the start: later its bytes are a field name's, and the line goes.
        assert_eq!(whole("data: a\n\n\u{FEFF}data: b\n\n"), "data: a\n\n\n");
    }

    #[test]
    fn the_same_at_every_split_of_the_bytes() {
        let stream = "\u{FEFF}x-proxy: 1\r\ndata: a\r\nevent: e\r\ndata\r\n\r\n: c\rdata: b\r\r";
        let once = whole(stream);
        assert_eq!(once, "data: a\r\ndata:\r\n\r\n: c\rdata: b\r\r");
        let bytes = stream.as_bytes();
        for at in 1..bytes.len() {
            let (first, second) = bytes.split_at(at);
            assert_eq!(filtered(&[first, second]), once, "split at {at}");
        }
    }
}
