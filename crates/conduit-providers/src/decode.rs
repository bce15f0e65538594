//! Reading one stream event into a protocol's typed event: a field the protocol requires
//! that is missing (or of the wrong type) is a protocol error naming it, never a default.

use conduit_core::agent::MAX_RESPONSE_VALUES;
use conduit_core::provider::{ProviderError, ProviderErrorKind};
use serde::Deserialize;
use serde_json::Value;

use crate::error_body;

/// How much of an event that does not decode is shown.
const EXCERPT_CHARS: usize = 200;

/// Decodes `data` as `T`. An error the service sent in a shape `T` does not describe is
/// still read as the service's error (a stream error), not as a protocol error.
pub(crate) fn event<'a, T: Deserialize<'a>>(
    protocol: &str,
    data: &'a str,
) -> Result<T, ProviderError> {
    // Parsed values take 70 bytes and more each: an event of 16 MiB of `[0,0,…]` in a
    // field read as JSON (Gemini's arguments) would take gigabytes.
    if json_values_at_most(data) > MAX_RESPONSE_VALUES {
        return Err(ProviderError::new(
            ProviderErrorKind::Protocol,
            format!(
                "{protocol} sent an event of more than {MAX_RESPONSE_VALUES} JSON values; Conduit stopped reading the answer"
            ),
        ));
    }
    serde_json::from_str(data).map_err(|e| {
        if let Ok(value) = serde_json::from_str::<Value>(data)
            && error_body::is_error_chunk(&value)
        {
            return stream_error(&value, data);
        }
        let what = if e.is_data() {
            "an event Conduit cannot read"
        } else {
            "an event that is not JSON"
        };
        ProviderError::new(
            ProviderErrorKind::Protocol,
            format!(
                "{protocol} sent {what} ({e}): {}",
                data.chars().take(EXCERPT_CHARS).collect::<String>()
            ),
        )
    })
}

/// A failure the service reported in the middle of an answer, in its words. An overload, a
/// rate limit or a server failure is typed as the same failure sent as an HTTP status
/// would be: sent before any of the answer, it is retried as that status is.
pub(crate) fn stream_error(value: &Value, data: &str) -> ProviderError {
    let kind = error_body::details(value)
        .and_then(|details| details.code)
        .map_or(ProviderErrorKind::Stream, |code| stream_error_kind(&code));
    let mut err = ProviderError::new(kind, error_body::event_message(value, data));
    err.retry_after = error_body::retry_delay(value);
    err
}

/// What an error event's code or type says failed. Codes not listed (a refused request, a
/// content filter) stay a stream error, which is not retried.
fn stream_error_kind(code: &str) -> ProviderErrorKind {
    match code {
        // Anthropic's error types, its statuses 429, 500, 504 and 529 sent in the stream.
        "rate_limit_error" => ProviderErrorKind::RateLimited,
        "api_error" | "timeout_error" => ProviderErrorKind::Server,
        "overloaded_error" => ProviderErrorKind::Overloaded,
        // OpenAI: the Responses error codes (`response.failed`), and the types its `error`
        // events carry (`too_many_requests`, `service_unavailable_error`); OpenRouter
        // writes `server_error` in the chunk that ends a failed answer.
        "rate_limit_exceeded" | "too_many_requests" => ProviderErrorKind::RateLimited,
        "server_error" => ProviderErrorKind::Server,
        "service_unavailable_error" => ProviderErrorKind::Overloaded,
        // A prompt past the model's context (OpenAI Responses' `response.failed`,
        // llama.cpp): the agent asks again shorter.
        code if error_body::CONTEXT_TOO_LONG_CODES.contains(&code) => {
            ProviderErrorKind::ContextTooLong
        }
        // Gemini's statuses, the names of google.rpc.Code for 429, 500, 503 and 504.
        "RESOURCE_EXHAUSTED" => ProviderErrorKind::RateLimited,
        "INTERNAL" | "DEADLINE_EXCEEDED" => ProviderErrorKind::Server,
        "UNAVAILABLE" => ProviderErrorKind::Overloaded,
        // An HTTP status as the code (OpenRouter's `"code": 502`): what that status says
        // of an overload, a rate limit or a server failure, as the names above.
        other => match other.parse::<u16>().map(crate::http::status_kind) {
            Ok(
                kind @ (ProviderErrorKind::RateLimited
                | ProviderErrorKind::Overloaded
                | ProviderErrorKind::Server),
            ) => kind,
            _ => ProviderErrorKind::Stream,
        },
    }
}

/// The same, for an event decoded as typed: read once more as JSON for its details.
pub(crate) fn stream_error_in(data: &str) -> ProviderError {
    let value = serde_json::from_str::<Value>(data).unwrap_or(Value::Null);
    stream_error(&value, data)
}

/// A protocol error for a field the protocol requires that an event left out.
pub(crate) fn missing(protocol: &str, field: &str, data: &str) -> ProviderError {
    ProviderError::new(
        ProviderErrorKind::Protocol,
        format!(
            "{protocol} sent an event without the required field `{field}`: {}",
            data.chars().take(EXCERPT_CHARS).collect::<String>()
        ),
    )
}

/// At least as many as the JSON values `text` holds, counted without parsing it: one, and
/// one more for each `[`, `{` and `,` outside strings. Cheap enough for every event.
pub(crate) fn json_values_at_most(text: &str) -> usize {
    let (mut values, mut in_string, mut escaped) = (1usize, false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match byte {
                b'"' => in_string = true,
                b'[' | b'{' | b',' => values += 1,
                _ => {}
            }
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_counted_outside_strings_only() {
        assert_eq!(json_values_at_most("7"), 1);
        assert_eq!(json_values_at_most(r#"{"a":[1,2,3]}"#), 5);
        assert_eq!(json_values_at_most(r#"{"a":"[1,{2},3]\",,"}"#), 2);
        let parsed: Value = serde_json::from_str(r#"{"a":[1,2,{"b":[]}],"c":"d,e"}"#).unwrap();
        assert!(
            json_values_at_most(r#"{"a":[1,2,{"b":[]}],"c":"d,e"}"#)
                >= conduit_core::content::json_values(&parsed)
        );
    }

    #[test]
    fn an_event_of_too_many_values_is_refused_before_it_is_parsed() {
        let data = format!(r#"{{"args":[{}0]}}"#, "0,".repeat(MAX_RESPONSE_VALUES));
        let err = event::<Value>("Gemini", &data).unwrap_err();
        assert_eq!(err.kind, ProviderErrorKind::Protocol);
        assert_eq!(
            err.message,
            format!(
                "Gemini sent an event of more than {MAX_RESPONSE_VALUES} JSON values; Conduit stopped reading the answer"
            )
        );
        let fits = format!(r#"{{"args":[{}0]}}"#, "0,".repeat(MAX_RESPONSE_VALUES - 3));
        assert!(event::<Value>("Gemini", &fits).is_ok());
    }
}
