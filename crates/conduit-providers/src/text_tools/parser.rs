//! The incremental reader of tool calls a model writes as text: answer text passes
//! through as soon as it cannot be the start of a call; a call is given out only once it
//! is closed, so a half-written call is never run.

use serde_json::{Map, Value};

/// The opening tag of an XML call.
pub const OPEN: &str = "<tool_call>";
/// The closing tag of an XML call.
pub const CLOSE: &str = "</tool_call>";

/// The name given to a call whose own name cannot be read.
pub const UNREADABLE: &str = "invalid_tool_call";

/// What the parser makes of the text so far.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// Answer text, shown to the user.
    Text(String),
    /// A complete call, or one that was closed but cannot be used.
    Call(Result<TextCall, MalformedCall>),
}

/// A call written as text, read whole.
#[derive(Debug, Clone, PartialEq)]
pub struct TextCall {
    pub name: String,
    pub arguments: Value,
}

/// A call that cannot be run: the model gets `error` back as the call's result.
#[derive(Debug, Clone, PartialEq)]
pub struct MalformedCall {
    /// The tool's name, when it could be read.
    pub name: Option<String>,
    /// What the model wrote.
    pub raw: String,
    pub error: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Text,
    /// Inside `<tool_call>`: `pending` holds the body; `scanned` bytes of it hold no
    /// closing tag (a long call is not searched again from its start on every piece).
    Xml {
        scanned: usize,
    },
    /// Inside a bare JSON call: `pending` holds the object from its `{`.
    Json {
        scanned: usize,
        depth: usize,
        in_string: bool,
        escaped: bool,
    },
}

/// Reads a streamed answer piece by piece.
#[derive(Debug)]
pub struct CallParser {
    mode: Mode,
    /// Text not given out yet: a possible start of a call, or a call's body.
    pending: String,
    /// Only whitespace since the last line break (a bare JSON call starts a line).
    line_start: bool,
}

impl Default for CallParser {
    fn default() -> Self {
        Self {
            mode: Mode::Text,
            pending: String::new(),
            line_start: true,
        }
    }
}

impl CallParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next piece of streamed text and gives out what is decided.
    pub fn push(&mut self, piece: &str) -> Vec<Parsed> {
        self.pending.push_str(piece);
        let mut out = Vec::new();
        while self.step(&mut out) {}
        out
    }

    /// The stream ended: held text is answer text, and an unclosed call is malformed
    /// (never run).
    pub fn finish(&mut self) -> Vec<Parsed> {
        let rest = std::mem::take(&mut self.pending);
        let mode = std::mem::replace(&mut self.mode, Mode::Text);
        match mode {
            Mode::Text if rest.is_empty() => Vec::new(),
            Mode::Text => vec![Parsed::Text(rest)],
            Mode::Xml { .. } => {
                let raw = format!("{OPEN}{rest}");
                vec![Parsed::Call(Err(MalformedCall {
                    name: xml_element(&rest, "name").map(|n| n.trim().to_owned()),
                    raw,
                    error: format!(
                        "the answer ended before the call was closed with {CLOSE}, so it was not run"
                    ),
                }))]
            }
            Mode::Json { .. } => vec![Parsed::Call(Err(MalformedCall {
                name: None,
                raw: rest,
                error:
                    "the answer ended before the JSON call's object was closed, so it was not run"
                        .into(),
            }))],
        }
    }

    /// Makes one decision; `false` when more text is needed.
    fn step(&mut self, out: &mut Vec<Parsed>) -> bool {
        match self.mode {
            Mode::Text => self.step_text(out),
            Mode::Xml { scanned } => {
                let Some(end) = self.pending[scanned..].find(CLOSE).map(|at| at + scanned) else {
                    // The tag may have begun in the last few bytes: look there again.
                    let mut from = self.pending.len().saturating_sub(CLOSE.len() - 1);
                    while !self.pending.is_char_boundary(from) {
                        from -= 1;
                    }
                    self.mode = Mode::Xml { scanned: from };
                    return false;
                };
                let body: String = self.pending.drain(..end + CLOSE.len()).collect();
                let body = &body[..end];
                out.push(Parsed::Call(read_xml_body(body)));
                self.mode = Mode::Text;
                self.line_start = true;
                true
            }
            Mode::Json { .. } => self.step_json(out),
        }
    }

    fn step_text(&mut self, out: &mut Vec<Parsed>) -> bool {
        let mut line_start = self.line_start;
        for (index, ch) in self.pending.char_indices() {
            let rest = &self.pending[index..];
            if ch == '<' {
                if rest.starts_with(OPEN) {
                    self.give_text(index, out);
                    self.pending.drain(..OPEN.len());
                    self.mode = Mode::Xml { scanned: 0 };
                    return true;
                }
                if OPEN.starts_with(rest) {
                    // Maybe a call's start: hold it until the next piece decides.
                    self.give_text(index, out);
                    self.line_start = line_start;
                    return false;
                }
            }
            if ch == '{' && line_start {
                match json_call_start(rest) {
                    Start::Yes => {
                        self.give_text(index, out);
                        self.mode = Mode::Json {
                            scanned: 0,
                            depth: 0,
                            in_string: false,
                            escaped: false,
                        };
                        return true;
                    }
                    Start::Maybe => {
                        self.give_text(index, out);
                        self.line_start = line_start;
                        return false;
                    }
                    Start::No => {}
                }
            }
            line_start = match ch {
                '\n' => true,
                ' ' | '\t' | '\r' => line_start,
                _ => false,
            };
        }
        let all = self.pending.len();
        self.give_text(all, out);
        self.line_start = line_start;
        false
    }

    /// Gives out `pending[..end]` as answer text.
    fn give_text(&mut self, end: usize, out: &mut Vec<Parsed>) {
        if end == 0 {
            return;
        }
        let text: String = self.pending.drain(..end).collect();
        match out.last_mut() {
            Some(Parsed::Text(last)) => last.push_str(&text),
            _ => out.push(Parsed::Text(text)),
        }
    }

    fn step_json(&mut self, out: &mut Vec<Parsed>) -> bool {
        let Mode::Json {
            mut scanned,
            mut depth,
            mut in_string,
            mut escaped,
        } = self.mode
        else {
            return false;
        };
        let mut end = None;
        for (offset, byte) in self.pending.as_bytes()[scanned..].iter().enumerate() {
            let at = scanned + offset;
            if in_string {
                match (escaped, byte) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = Some(at + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(end) = end else {
            scanned = self.pending.len();
            self.mode = Mode::Json {
                scanned,
                depth,
                in_string,
                escaped,
            };
            return false;
        };
        let object: String = self.pending.drain(..end).collect();
        self.mode = Mode::Text;
        self.line_start = false;
        match read_json_call(&object) {
            JsonCall::Call(call) => out.push(Parsed::Call(call)),
            // JSON that is not a call is part of the answer after all.
            JsonCall::NotACall => out.push(Parsed::Text(object)),
        }
        true
    }
}

enum Start {
    Yes,
    Maybe,
    No,
}

/// The most whitespace between a bare JSON call's `{` and its `"name"`: a model writes a
/// newline and an indent; more is the answer's text.
const MAX_SPACE_BEFORE_NAME: usize = 256;

/// JSON text parsed if it holds at most the values a response's arguments may (counted in
/// the text first: 32 MiB of `[0],` would parse to gigabytes), or what it is instead
/// ("the arguments are …").
fn parse_counted(text: &str) -> Result<Value, String> {
    let limit = conduit_core::agent::MAX_RESPONSE_VALUES;
    if crate::decode::json_values_at_most(text) > limit {
        return Err(format!(
            "more than {limit} JSON values, which Conduit did not read"
        ));
    }
    serde_json::from_str::<Value>(text).map_err(|err| format!("not valid JSON ({err})"))
}

/// Whether `rest` (from a `{` at the start of a line) begins a bare JSON call:
/// `{`, optional whitespace, `"name"`.
fn json_call_start(rest: &str) -> Start {
    let after_brace = &rest[1..];
    // Looked at only so far: a `{` held while its whitespace streams in is looked at again
    // with each piece, and 32 MiB of spaces after one took hours of a core.
    let Some((at, _)) = after_brace
        .char_indices()
        .take(MAX_SPACE_BEFORE_NAME + 1)
        .find(|(_, ch)| !ch.is_whitespace())
    else {
        return if after_brace.len() > MAX_SPACE_BEFORE_NAME {
            Start::No
        } else {
            Start::Maybe
        };
    };
    let trimmed = &after_brace[at..];
    const KEY: &str = "\"name\"";
    if trimmed.starts_with(KEY) {
        Start::Yes
    } else if KEY.starts_with(trimmed) {
        Start::Maybe
    } else {
        Start::No
    }
}

/// The text between `<tag>` and `</tag>`.
fn xml_element<'a>(body: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = body.find(&open)? + open.len();
    let end = body[start..].find(&close)? + start;
    Some(&body[start..end])
}

/// A `<tool_call>` body: `<name>..</name><arguments>{..}</arguments>`, or a JSON object.
fn read_xml_body(body: &str) -> Result<TextCall, MalformedCall> {
    let raw = format!("{OPEN}{body}{CLOSE}");
    let trimmed = body.trim();
    if trimmed.starts_with('{') {
        return match read_json_call(trimmed) {
            JsonCall::Call(call) => call.map_err(|mut malformed| {
                malformed.raw = raw;
                malformed
            }),
            JsonCall::NotACall => Err(MalformedCall {
                name: None,
                raw,
                error: "the JSON inside <tool_call> needs a \"name\" (a string) and \"arguments\" (an object)".into(),
            }),
        };
    }
    let Some(name) = xml_element(body, "name")
        .map(str::trim)
        .filter(|n| !n.is_empty())
    else {
        return Err(MalformedCall {
            name: None,
            raw,
            error: "the call has no <name>TOOL</name> element".into(),
        });
    };
    let arguments = match xml_element(body, "arguments") {
        Some(text) => text.trim(),
        None if body.contains("<arguments>") => {
            return Err(MalformedCall {
                name: Some(name.to_owned()),
                raw,
                error: "the <arguments> element is not closed with </arguments>".into(),
            });
        }
        None => "",
    };
    let arguments = if arguments.is_empty() {
        Value::Object(Map::new())
    } else {
        match parse_counted(arguments) {
            Ok(value @ Value::Object(_)) => value,
            Ok(_) => {
                return Err(MalformedCall {
                    name: Some(name.to_owned()),
                    raw,
                    error: "the arguments must be a JSON object".into(),
                });
            }
            Err(err) => {
                return Err(MalformedCall {
                    name: Some(name.to_owned()),
                    raw,
                    error: format!("the arguments are {err}"),
                });
            }
        }
    };
    Ok(TextCall {
        name: name.to_owned(),
        arguments,
    })
}

enum JsonCall {
    Call(Result<TextCall, MalformedCall>),
    NotACall,
}

/// A JSON call: `{"name": "tool", "arguments": {..}}` (`parameters` is taken too, and
/// arguments written as a JSON string). Valid JSON of another shape is not a call.
fn read_json_call(text: &str) -> JsonCall {
    let value = match parse_counted(text) {
        Ok(value) => value,
        Err(err) => {
            return JsonCall::Call(Err(MalformedCall {
                name: None,
                raw: text.to_owned(),
                error: format!("the call is {err}"),
            }));
        }
    };
    let Value::Object(mut object) = value else {
        return JsonCall::NotACall;
    };
    let Some(Value::String(name)) = object.remove("name") else {
        return JsonCall::NotACall;
    };
    let arguments = object
        .remove("arguments")
        .or_else(|| object.remove("parameters"));
    if !object.is_empty() {
        return JsonCall::NotACall;
    }
    let arguments = match arguments {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(value @ Value::Object(_)) => value,
        Some(Value::String(inner)) => match parse_counted(&inner) {
            Ok(value @ Value::Object(_)) => value,
            Ok(_) => {
                return JsonCall::Call(Err(MalformedCall {
                    name: Some(name),
                    raw: text.to_owned(),
                    error: "the arguments must be a JSON object".into(),
                }));
            }
            Err(err) => {
                return JsonCall::Call(Err(MalformedCall {
                    name: Some(name),
                    raw: text.to_owned(),
                    error: format!("the arguments (a JSON string) are {err}"),
                }));
            }
        },
        Some(_) => {
            return JsonCall::Call(Err(MalformedCall {
                name: Some(name),
                raw: text.to_owned(),
                error: "the arguments must be a JSON object".into(),
            }));
        }
    };
    JsonCall::Call(Ok(TextCall { name, arguments }))
}
