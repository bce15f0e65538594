//! Helpers for protocol tests: replay documented SSE bytes through a decoder with the
//! same SSE parser the client uses, and build requests from the conversation model.

use conduit_core::content::{MediaRef, Message};
use conduit_core::provider::{ModelCapabilities, ModelRequest, ProviderError, ProviderEvent};
use futures::StreamExt;
use sse_stream::SseStream;

use crate::http::StreamDecoder;

/// The first error `decoder` gives for `sse`, which must be a protocol error.
pub fn first_protocol_error(decoder: &mut dyn StreamDecoder, sse: &str) -> ProviderError {
    let err = replay(decoder, sse)
        .into_iter()
        .find_map(Result::err)
        .expect("the stream fails");
    assert_eq!(
        err.kind,
        conduit_core::provider::ProviderErrorKind::Protocol,
        "{}",
        err.message
    );
    err
}

/// Feeds `sse` (the bytes a service sends) through `decoder`, then ends the stream.
pub fn replay(
    decoder: &mut dyn StreamDecoder,
    sse: &str,
) -> Vec<Result<ProviderEvent, ProviderError>> {
    let chunks =
        futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(sse.to_owned()))]);
    let events: Vec<_> =
        futures::executor::block_on(SseStream::from_bytes_stream(chunks).collect::<Vec<_>>());
    let mut out = Vec::new();
    for event in events {
        let event = event.unwrap();
        let Some(data) = event.data.as_deref() else {
            continue;
        };
        match decoder.decode(event.event.as_deref(), data) {
            Ok(events) => out.extend(events.into_iter().map(Ok)),
            Err(err) => {
                out.push(Err(err));
                return out;
            }
        }
    }
    match decoder.finish() {
        Ok(events) => out.extend(events.into_iter().map(Ok)),
        Err(err) => out.push(Err(err)),
    }
    out
}

pub fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        model: "test-model".into(),
        system: None,
        messages,
        tools: vec![],
        max_output_tokens: None,
        capabilities: ModelCapabilities::default(),
        reasoning: None,
    }
}

pub fn media(hash: &str) -> MediaRef {
    MediaRef {
        hash: hash.into(),
        mime: "image/png".into(),
        bytes: 10,
        width: Some(1),
        height: Some(1),
    }
}
