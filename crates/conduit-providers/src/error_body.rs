//! The provider's own words in a failure: the error shapes services really send, in HTTP
//! error bodies and as events in the middle of a stream, read into one code and message.
//!
//! Shapes read (first match wins):
//! - `{"error": {"message", "code" | "type" | "status"}}`: OpenAI, Anthropic (inside
//!   `{"type":"error", ...}`), Gemini, OpenRouter (with `metadata.raw`, the upstream's own
//!   text), Ollama, vLLM, and the nested OpenAI Responses stream `error` event;
//! - `[{"error": {...}}]`: Gemini sends its error body as a JSON array at times;
//! - `{"error": "text"}`: Ollama, llama.cpp and other compatible servers;
//! - `{"response": {"error": {...}}}`: an OpenAI Responses `response.failed` event;
//! - `{"message", "code"}`: the flat documented Responses `error` event, vLLM's
//!   `{"object":"error", ...}`;
//! - `{"detail": "text"}`: servers built on FastAPI.

use serde_json::Value;

/// How much of a body that is not a known error shape is shown.
const EXCERPT_CHARS: usize = 300;

/// How much of a provider's own error message is kept: real ones are a sentence or two
/// (a context-length error with its numbers is some 300 characters), and the message is
/// logged on every retry, stored and shown, so a hostile one must not be megabytes.
const MESSAGE_CHARS: usize = 2000;

/// How much of an error code is kept: real ones are a word (`rate_limit_exceeded`).
const CODE_CHARS: usize = 100;

/// The codes (or types) services give a prompt longer than the model's context:
/// OpenAI's, in a body and in a Responses stream, and llama.cpp's.
pub const CONTEXT_TOO_LONG_CODES: [&str; 2] =
    ["context_length_exceeded", "exceed_context_size_error"];

/// A provider's error, as it put it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorDetails {
    /// The machine-readable code or type (`rate_limit_exceeded`, `overloaded_error`,
    /// `UNAVAILABLE`), when one is given.
    pub code: Option<String>,
    pub message: String,
}

impl ErrorDetails {
    /// `code: message`, or the message alone.
    pub fn line(&self) -> String {
        match &self.code {
            Some(code) if !self.message.starts_with(code.as_str()) => {
                format!("{code}: {}", self.message)
            }
            _ => self.message.clone(),
        }
    }
}

/// The error a parsed body or event carries, if it carries one in a known shape.
pub fn details(value: &Value) -> Option<ErrorDetails> {
    match value {
        Value::Array(items) => items.iter().find_map(details),
        Value::Object(map) => {
            if let Some(error) = map.get("error") {
                match error {
                    Value::Object(_) => return from_object(error),
                    Value::String(text) if !text.trim().is_empty() => {
                        return Some(ErrorDetails {
                            code: None,
                            message: shorten(text, MESSAGE_CHARS),
                        });
                    }
                    _ => {}
                }
            }
            if let Some(error @ Value::Object(_)) = value.pointer("/response/error") {
                return from_object(error);
            }
            if map.get("message").is_some_and(Value::is_string) {
                return from_object(value);
            }
            map.get("detail")
                .and_then(Value::as_str)
                .filter(|text| !text.trim().is_empty())
                .map(|text| ErrorDetails {
                    code: None,
                    message: shorten(text, MESSAGE_CHARS),
                })
        }
        _ => None,
    }
}

/// Whether a stream chunk is an error rather than part of the answer: it has a non-null
/// `error`, or is vLLM's `{"object": "error", ...}`.
pub fn is_error_chunk(value: &Value) -> bool {
    value.get("error").is_some_and(|error| !error.is_null()) || value["object"] == "error"
}

fn from_object(error: &Value) -> Option<ErrorDetails> {
    let text = |key: &str| {
        error
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|text| !text.is_empty())
    };
    let code = text("code")
        .or_else(|| text("type"))
        .or_else(|| text("status"))
        .map(|code| shorten(code, CODE_CHARS))
        .or_else(|| {
            error
                .get("code")
                .and_then(Value::as_i64)
                .map(|n| n.to_string())
        });
    let mut message = text("message").map(|message| shorten(message, MESSAGE_CHARS));
    // OpenRouter says "Provider returned error" and puts the upstream's words here.
    if let Some(raw) = error
        .pointer("/metadata/raw")
        .and_then(Value::as_str)
        .filter(|raw| !raw.trim().is_empty())
    {
        let raw = excerpt(raw);
        message = Some(match message {
            Some(message) => format!("{message}: {raw}"),
            None => raw,
        });
    }
    match message {
        Some(message) => Some(ErrorDetails { code, message }),
        // The code stays: it is what tells an overload from a refusal.
        None => code.map(|code| ErrorDetails {
            message: format!("{code} (no message given)"),
            code: Some(code),
        }),
    }
}

/// How long an error body or event asks to wait, from Google's `RetryInfo` detail
/// (`{"error": {"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
/// "retryDelay": "47s"}]}}`), which Gemini sends with a 429 instead of a `retry-after`
/// header. The delay is a protobuf Duration in JSON: seconds with up to nine fractional
/// digits and an `s` (`"47s"`, `"0.5s"`, `"1.250s"`).
pub fn retry_delay(value: &Value) -> Option<std::time::Duration> {
    if let Value::Array(items) = value {
        return items.iter().find_map(retry_delay);
    }
    value
        .pointer("/error/details")?
        .as_array()?
        .iter()
        .filter_map(|detail| detail.get("retryDelay")?.as_str())
        .find_map(|delay| {
            let seconds = delay.trim().strip_suffix('s')?;
            // Digits and one point only: `inf` or `1e9` is no Duration.
            let mut parts = seconds.splitn(2, '.');
            let whole = parts.next().unwrap_or_default();
            let fraction = parts.next().unwrap_or("0");
            let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
            if !digits(whole) || !digits(fraction) {
                return None;
            }
            seconds
                .parse::<f64>()
                .ok()
                .map(crate::http::seconds_to_wait)
        })
}

/// The message of an HTTP error body: the provider's message from a known shape, else a
/// short excerpt of what was sent (an HTML page's title, or its text).
pub fn body_message(body: &str) -> String {
    if body.trim().is_empty() {
        return "no details given".to_owned();
    }
    match serde_json::from_str::<Value>(body) {
        Ok(value) => match details(&value) {
            Some(details) => details.message,
            None => excerpt(body),
        },
        Err(_) if looks_like_html(body) => format!(
            "an HTML page instead of an error message: \"{}\"",
            html_excerpt(body)
        ),
        Err(_) => excerpt(body),
    }
}

/// The text of a mid-stream error event: `code: message` from a known shape, else the
/// event itself, shortened.
pub fn event_message(value: &Value, data: &str) -> String {
    details(value).map_or_else(|| excerpt(data), |details| details.line())
}

fn looks_like_html(body: &str) -> bool {
    let start: String = body
        .trim_start()
        .chars()
        .take(15)
        .collect::<String>()
        .to_ascii_lowercase();
    start.starts_with("<!doctype html") || start.starts_with("<html") || start.starts_with("<head")
}

/// An HTML page's title, or its visible text, shortened.
fn html_excerpt(page: &str) -> String {
    let lower = page.to_ascii_lowercase();
    if let Some(start) = lower.find("<title>").map(|at| at + "<title>".len())
        && let Some(length) = lower[start..].find("</title>")
    {
        let title = page.get(start..start + length).unwrap_or_default();
        if !title.trim().is_empty() {
            return excerpt(title);
        }
    }
    let mut text = String::new();
    let mut in_tag = false;
    for c in page.chars() {
        match c {
            '<' => {
                in_tag = true;
                text.push(' ');
            }
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    excerpt(&text)
}

/// `text` on one line with runs of white space as one space, at most [`EXCERPT_CHARS`]
/// characters.
fn excerpt(text: &str) -> String {
    shorten(text, EXCERPT_CHARS)
}

/// A provider's own message put in an error or a note, kept to what such messages are
/// (a sentence or two): a hostile one must not be megabytes where it is logged and shown.
pub(crate) fn message_excerpt(text: &str) -> String {
    shorten(text, MESSAGE_CHARS)
}

/// A provider's code or reason word (a finish reason it added later), kept to a word's
/// length.
pub(crate) fn code_excerpt(text: &str) -> String {
    shorten(text, CODE_CHARS)
}

/// `text` on one line with runs of white space as one space, at most `max` characters
/// (and `…` when cut). Copies no more than `max` characters of a long word, so a
/// megabyte-long message costs no megabyte copy.
fn shorten(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut chars = 0;
    for word in text.split_whitespace() {
        if chars > 0 {
            if chars >= max {
                out.push('…');
                return out;
            }
            out.push(' ');
            chars += 1;
        }
        for c in word.chars() {
            if chars >= max {
                out.push('…');
                return out;
            }
            out.push(c);
            chars += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(json: &str) -> String {
        event_message(&serde_json::from_str(json).unwrap(), json)
    }

    #[test]
    fn stream_error_shapes_read_as_the_provider_put_them() {
        // OpenAI Responses, nested (what the service sends) and flat (what it documents).
        assert_eq!(
            line(
                r#"{"type":"error","sequence_number":2,"error":{"type":"too_many_requests","code":"too_many_requests","message":"Too Many Requests","param":null}}"#
            ),
            "too_many_requests: Too Many Requests"
        );
        assert_eq!(
            line(
                r#"{"type":"error","error":{"type":"service_unavailable_error","code":null,"message":"Unable to verify model access right now. Please retry.","param":null},"sequence_number":2}"#
            ),
            "service_unavailable_error: Unable to verify model access right now. Please retry."
        );
        assert_eq!(
            line(
                r#"{"type":"error","code":"ERR_SOMETHING","message":"Something went wrong","param":null,"sequence_number":1}"#
            ),
            "ERR_SOMETHING: Something went wrong"
        );
        // response.failed.
        assert_eq!(
            line(
                r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."}}}"#
            ),
            "server_error: The model failed to generate a response."
        );
        // Anthropic.
        assert_eq!(
            line(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#),
            "overloaded_error: Overloaded"
        );
        // OpenRouter mid-stream, with the upstream's words.
        assert_eq!(
            line(
                r#"{"id":"gen-1","object":"chat.completion.chunk","error":{"code":502,"message":"Provider returned error","metadata":{"raw":"upstream connect error","provider_name":"Example"}},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}"#
            ),
            "502: Provider returned error: upstream connect error"
        );
        // Ollama and llama.cpp.
        assert_eq!(
            line(r#"{"error":"model 'llama9' not found"}"#),
            "model 'llama9' not found"
        );
        // vLLM.
        assert_eq!(
            line(
                r#"{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}"#
            ),
            "BadRequestError: This model's maximum context length is 4096 tokens."
        );
        // A code and no message; then nothing known at all.
        assert_eq!(
            line(r#"{"type":"error","error":{"code":"overloaded"}}"#),
            "overloaded (no message given)"
        );
        assert_eq!(
            line(r#"{"type":"error","x":1}"#),
            r#"{"type":"error","x":1}"#
        );
    }

    #[test]
    fn http_error_bodies_give_the_message_or_a_short_excerpt() {
        assert_eq!(
            body_message(
                r#"[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}]"#
            ),
            "Resource has been exhausted (e.g. check quota)."
        );
        assert_eq!(
            body_message(r#"{"detail":"Not authenticated"}"#),
            "Not authenticated"
        );
        assert_eq!(
            body_message(
                "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
            ),
            "an HTML page instead of an error message: \"502 Bad Gateway\""
        );
        assert_eq!(
            body_message("<!DOCTYPE html><html><body><p>Upstream   is\n down</p></body></html>"),
            "an HTML page instead of an error message: \"Upstream is down\""
        );
        let long = "x ".repeat(1000);
        let shown = body_message(&long);
        assert_eq!(shown.chars().count(), EXCERPT_CHARS + 1);
        assert!(shown.ends_with('…'));
        assert_eq!(body_message(" \n"), "no details given");
        assert_eq!(body_message("upstream timed out"), "upstream timed out");
    }

    #[test]
    fn a_retry_delay_is_read_from_googles_retry_info() {
        let delay = |sent: &str| {
            let body = format!(
                r#"{{"error":{{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"{sent}"}}]}}}}"#
            );
            retry_delay(&serde_json::from_str(&body).unwrap())
        };
        use std::time::Duration;
        assert_eq!(delay("47s"), Some(Duration::from_secs(47)));
        assert_eq!(delay("0.5s"), Some(Duration::from_millis(500)));
        assert_eq!(delay("1.250s"), Some(Duration::from_millis(1250)));
        // Not a protobuf Duration: no wait read.
        for text in ["47", "-1s", "infs", "1e3s", "s", "1.s"] {
            assert_eq!(delay(text), None, "{text}");
        }
        // Gemini's body as a JSON array, and a body without the detail.
        let array: Value = serde_json::from_str(
            r#"[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"12s"}]}}]"#,
        )
        .unwrap();
        assert_eq!(retry_delay(&array), Some(Duration::from_secs(12)));
        let without: Value = serde_json::from_str(
            r#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#,
        )
        .unwrap();
        assert_eq!(retry_delay(&without), None);
    }

    #[test]
    fn null_errors_are_not_errors() {
        let chunk: Value =
            serde_json::from_str(r#"{"error":null,"choices":[{"delta":{"content":"hi"}}]}"#)
                .unwrap();
        assert!(!is_error_chunk(&chunk));
        assert!(is_error_chunk(&serde_json::json!({"error": "down"})));
        assert!(is_error_chunk(
            &serde_json::json!({"object": "error", "message": "m"})
        ));
    }
}
