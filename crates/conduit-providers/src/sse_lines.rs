//! A provider's SSE bytes as the SSE parser takes them: lines the specification says to
//! ignore are dropped before it, since `sse-stream` ends the whole stream at them.
//!
//! The specification (WHATWG HTML, "event stream interpretation") ignores a field it does
//! not know and reads a line without a colon as a field with an empty value. `sse-stream`
//! 0.2 fails on both ("invalid line"), so one proxy adding a field of its own would break
//! every turn. Only the start of each line (its field name) is looked at; the rest passes
//! untouched, with its line ending, so the parser sees the same events.

use bytes::{Buf, Bytes};

/// The fields an event stream has; anything else is ignored.
const KNOWN: [&[u8]; 4] = [b"data", b"event", b"id", b"retry"];
/// A field name longer than any known one is not one of them.
const LONGEST_NAME: usize = 5;

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
}

impl Default for SpecLines {
    fn default() -> Self {
        Self {
            place: Place::Name,
            name: Vec::new(),
            after_cr: false,
            dropped_cr: false,
        }
    }
}

impl SpecLines {
    /// The bytes of `chunk` the parser gets.
    pub(crate) fn filter(&mut self, mut chunk: impl Buf) -> Bytes {
        let input = chunk.copy_to_bytes(chunk.remaining());
        let mut out = Vec::with_capacity(input.len());
        for &byte in input.iter() {
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
                    } else if KNOWN.contains(&self.name.as_slice()) {
                        out.extend_from_slice(&self.name);
                        out.push(b':');
                        out.push(byte);
                    } else {
                        self.dropped_cr = byte == b'\r';
                    }
                    self.name.clear();
                }
                Place::Name if byte == b':' => {
                    // A comment (no name) or a known field passes whole.
                    if self.name.is_empty() || KNOWN.contains(&self.name.as_slice()) {
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
    fn filtered(chunks: &[&str]) -> String {
        let mut lines = SpecLines::default();
        let out: Vec<u8> = chunks
            .iter()
            .flat_map(|chunk| lines.filter(chunk.as_bytes()).to_vec())
            .collect();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn known_fields_comments_and_event_ends_pass_untouched() {
        let stream = ": ping\nevent: delta\nid: 7\nretry: 100\ndata: {\"a\": \"b:c\"}\n\n";
        assert_eq!(filtered(&[stream]), stream);
        let crlf = "data: x\r\n\r\ndata: y\r\rdata: z\n\n";
        assert_eq!(filtered(&[crlf]), crlf);
    }

    #[test]
    fn unknown_fields_are_dropped_and_a_bare_name_is_an_empty_field() {
        assert_eq!(
            filtered(&["x-proxy: 1\ndata: a\nfoo\ndata\nverylongfield: z\n\n"]),
            "data: a\ndata:\n\n"
        );
        // With CRLF endings, the dropped line's LF goes with it.
        assert_eq!(
            filtered(&["x-proxy: 1\r\ndata: a\r\n\r\n"]),
            "data: a\r\n\r\n"
        );
    }

    #[test]
    fn the_same_at_every_split_of_the_bytes() {
        let stream = "x-proxy: 1\r\ndata: a\r\nevent: e\r\ndata\r\n\r\n: c\rdata: b\r\r";
        let whole = filtered(&[stream]);
        assert_eq!(
            whole,
            "data: a\r\nevent: e\r\ndata:\r\n\r\n: c\rdata: b\r\r"
        );
        for at in 1..stream.len() {
            let (first, second) = stream.split_at(at);
            assert_eq!(filtered(&[first, second]), whole, "split at {at}");
        }
    }
}
