//! Reading one stream event into a protocol's typed event: a field the protocol requires
//! that is missing (or of the wrong type) is a protocol error naming it, never a default.

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

/// A failure the service reported in the middle of an answer, in its words.
pub(crate) fn stream_error(value: &Value, data: &str) -> ProviderError {
    ProviderError::new(
        ProviderErrorKind::Stream,
        error_body::event_message(value, data),
    )
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
