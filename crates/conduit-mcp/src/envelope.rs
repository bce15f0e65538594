//! Finds a JSON-RPC message's top-level `id` and `method` in its bytes as they pass,
//! building nothing else: what names a large message that failed to parse (too long,
//! too many values), wherever in it the two were written.
//!
//! The parse that fails stops where it fails, and the TypeScript SDK writes a request's
//! `id` after its `params` (`{method, params, jsonrpc, id}`) and an answer's after its
//! `result`: without this, such a message too large to read named nothing, and the
//! server (or Conduit's call) waited for an answer that never came.

/// The most bytes of an `id`'s or a `method`'s value kept as written.
const MAX_RAW: usize = 4096;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Field {
    Id,
    Method,
    Other,
}

/// A string or value being kept as it is read: a key at the top level, or the value of
/// a top-level `id` or `method`. `cut` when it was longer than [`MAX_RAW`].
#[derive(Debug)]
enum Capture {
    Nothing,
    Key {
        raw: Vec<u8>,
        cut: bool,
    },
    Value {
        field: Field,
        raw: Vec<u8>,
        cut: bool,
    },
}

/// The scan of one message's bytes, fed in pieces in order.
#[derive(Debug)]
pub(crate) struct Envelope {
    /// How deep in objects and arrays the next byte is (1: inside the top-level object).
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// Inside the top-level object, the next string is a key (after `{` or `,`).
    expect_key: bool,
    /// The top-level key whose `:` was just read: its value starts at the next byte that
    /// is not white space.
    value_of: Option<Field>,
    capture: Capture,
    id: Option<(Vec<u8>, bool)>,
    method: Option<(Vec<u8>, bool)>,
    /// The top level is not an object, its end was passed, or both fields were found.
    done: bool,
}

impl Default for Envelope {
    fn default() -> Self {
        Self {
            depth: 0,
            in_string: false,
            escaped: false,
            expect_key: false,
            value_of: None,
            capture: Capture::Nothing,
            id: None,
            method: None,
            done: false,
        }
    }
}

impl Envelope {
    /// The scan of one whole message.
    pub(crate) fn of(message: &[u8]) -> Self {
        let mut envelope = Self::default();
        envelope.feed(message);
        envelope
    }

    /// Reads the next bytes of the message.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && !self.done {
            if self.in_string {
                bytes = self.in_string_bytes(bytes);
            } else {
                let byte = bytes[0];
                bytes = &bytes[1..];
                self.structure(byte);
            }
        }
    }

    /// The message's `id`, if a string or number was read for it.
    pub(crate) fn id(&self) -> Option<serde_json::Value> {
        let (raw, cut) = self.id.as_ref()?;
        if *cut {
            return None;
        }
        serde_json::from_slice::<serde_json::Value>(raw)
            .ok()
            .filter(|id| id.is_string() || id.is_number())
    }

    /// The message's `method`, if a string was read for it: whole, or as far as it was
    /// kept when it was too long (unescaped then; it only names the message).
    pub(crate) fn method(&self) -> Option<String> {
        let (raw, cut) = self.method.as_ref()?;
        if *cut {
            let text = String::from_utf8_lossy(raw.strip_prefix(b"\"").unwrap_or(raw));
            return Some(text.into_owned());
        }
        serde_json::from_slice::<String>(raw).ok()
    }

    /// Bytes inside a string, up to and including its closing quote (or all of them):
    /// skipped fast unless the string is kept.
    fn in_string_bytes<'b>(&mut self, bytes: &'b [u8]) -> &'b [u8] {
        if self.escaped {
            self.escaped = false;
            self.keep(&bytes[..1]);
            return &bytes[1..];
        }
        let Some(at) = memchr::memchr2(b'"', b'\\', bytes) else {
            self.keep(bytes);
            return &[];
        };
        self.keep(&bytes[..=at]);
        if bytes[at] == b'\\' {
            self.escaped = true;
        } else {
            self.in_string = false;
            self.string_ended();
        }
        &bytes[at + 1..]
    }

    fn keep(&mut self, bytes: &[u8]) {
        let (raw, cut) = match &mut self.capture {
            Capture::Nothing => return,
            Capture::Key { raw, cut } | Capture::Value { raw, cut, .. } => (raw, cut),
        };
        let room = MAX_RAW.saturating_sub(raw.len());
        raw.extend_from_slice(&bytes[..bytes.len().min(room)]);
        *cut |= bytes.len() > room;
    }

    fn string_ended(&mut self) {
        if matches!(self.capture, Capture::Value { .. }) {
            self.value_ended();
        }
        // A key stays captured until its `:`.
    }

    /// One byte outside any string.
    fn structure(&mut self, byte: u8) {
        if self.depth == 0 {
            match byte {
                b' ' | b'\t' | b'\r' | b'\n' => {}
                b'{' => {
                    self.depth = 1;
                    self.expect_key = true;
                }
                _ => self.done = true,
            }
            return;
        }
        if self.depth > 1 {
            match byte {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => self.depth -= 1,
                _ => {}
            }
            return;
        }
        let scalar = matches!(self.capture, Capture::Value { .. });
        match byte {
            b' ' | b'\t' | b'\r' | b'\n' if scalar => self.value_ended(),
            b' ' | b'\t' | b'\r' | b'\n' => {}
            b'"' => {
                self.in_string = true;
                if std::mem::take(&mut self.expect_key) {
                    self.capture = Capture::Key {
                        raw: vec![byte],
                        cut: false,
                    };
                } else if let Some(field) = self.kept_value() {
                    self.capture = Capture::Value {
                        field,
                        raw: vec![byte],
                        cut: false,
                    };
                }
            }
            b':' => {
                if let Capture::Key { raw, cut } =
                    std::mem::replace(&mut self.capture, Capture::Nothing)
                {
                    self.value_of = Some(field_named(&raw, cut));
                }
            }
            b',' => {
                if scalar {
                    self.value_ended();
                }
                self.value_of = None;
                self.expect_key = true;
            }
            b'{' | b'[' => {
                self.value_of = None;
                self.depth += 1;
            }
            b'}' => {
                if scalar {
                    self.value_ended();
                }
                self.done = true;
            }
            _ if scalar => self.keep(&[byte]),
            _ => {
                if let Some(field) = self.kept_value() {
                    self.capture = Capture::Value {
                        field,
                        raw: vec![byte],
                        cut: false,
                    };
                }
            }
        }
    }

    /// The field whose value starts here, if it is one kept (`id` or `method`).
    fn kept_value(&mut self) -> Option<Field> {
        self.value_of.take().filter(|field| *field != Field::Other)
    }

    /// The kept value of a top-level key ended: the first `id` and the first `method`
    /// are the message's.
    fn value_ended(&mut self) {
        if let Capture::Value { field, raw, cut } =
            std::mem::replace(&mut self.capture, Capture::Nothing)
        {
            let slot = match field {
                Field::Id => &mut self.id,
                Field::Method => &mut self.method,
                Field::Other => return,
            };
            if slot.is_none() {
                *slot = Some((raw, cut));
            }
        }
        self.done = self.id.is_some() && self.method.is_some();
    }
}

/// Which field a top-level key (as written, quotes and all) names.
fn field_named(raw: &[u8], cut: bool) -> Field {
    if cut {
        return Field::Other;
    }
    match serde_json::from_slice::<String>(raw).as_deref() {
        Ok("id") => Field::Id,
        Ok("method") => Field::Method,
        _ => Field::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The scan fed in pieces of every size finds what it finds fed whole.
    fn scanned(message: &str) -> (Option<serde_json::Value>, Option<String>) {
        let whole = Envelope::of(message.as_bytes());
        for size in 1..=7 {
            let mut pieces = Envelope::default();
            for piece in message.as_bytes().chunks(size) {
                pieces.feed(piece);
            }
            assert_eq!(
                (pieces.id(), pieces.method()),
                (whole.id(), whole.method()),
                "fed {size} bytes at a time: {message}"
            );
        }
        (whole.id(), whole.method())
    }

    #[test]
    fn finds_the_id_and_method_wherever_the_sender_wrote_them() {
        // The TypeScript SDK's order: params first, id last.
        assert_eq!(
            scanned(
                r#"{"method":"sampling/createMessage","params":{"id":"inner","method":"no","a":[1,{"b":"}"}]},"jsonrpc":"2.0","id":42}"#
            ),
            (Some(json!(42)), Some("sampling/createMessage".into()))
        );
        assert_eq!(
            scanned(
                " {\n \"params\" : {\"x\": \"\\\"}\"} , \"id\" : \"a\\\"b\" ,\"method\":\"elicitation/create\"}"
            ),
            (Some(json!("a\"b")), Some("elicitation/create".into()))
        );
        // An answer: an id and no method.
        assert_eq!(
            scanned(
                r#"{"result":{"content":[{"type":"text","text":"\\"}]},"jsonrpc":"2.0","id":7}"#
            ),
            (Some(json!(7)), None)
        );
        // A key written with escapes is still the key.
        assert_eq!(
            scanned(r#"{"\u0069d":-3,"method":"m"}"#),
            (Some(json!(-3)), Some("m".into()))
        );
    }

    #[test]
    fn an_id_that_is_no_string_or_number_or_a_message_cut_short_names_nothing_wrong() {
        assert_eq!(
            scanned(r#"{"id":{"x":1},"method":"m"}"#),
            (None, Some("m".into()))
        );
        assert_eq!(scanned(r#"{"id":null,"method":["m"]}"#), (None, None));
        assert_eq!(scanned(r#"[{"id":1,"method":"m"}]"#), (None, None));
        assert_eq!(scanned(r#"{"params":{"id":1,"method":"m"#), (None, None));
        // The first of a key written twice counts.
        assert_eq!(
            scanned(r#"{"id":1,"id":2,"method":"m"}"#),
            (Some(json!(1)), Some("m".into()))
        );
        // Past the top-level object's end nothing more is read.
        assert_eq!(scanned(r#"{"a":1} {"id":1,"method":"m"}"#), (None, None));
        // A number cut short by the end of input is not an id.
        assert_eq!(
            scanned(r#"{"method":"m","id":12"#),
            (None, Some("m".into()))
        );
    }

    #[test]
    fn a_very_long_method_is_kept_in_part_and_a_very_long_id_not_at_all() {
        let long = "m".repeat(MAX_RAW * 2);
        let (id, method) = scanned(&format!(r#"{{"method":"{long}","id":"{long}"}}"#));
        assert_eq!(id, None);
        assert_eq!(method.unwrap(), "m".repeat(MAX_RAW - 1));
    }
}
