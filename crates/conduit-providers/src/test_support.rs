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

/// What a [`serve_in_turn`] server was sent: each request's body, in order.
#[derive(Clone, Default)]
pub struct Served(std::sync::Arc<parking_lot::Mutex<Vec<String>>>);

impl Served {
    pub fn count(&self) -> usize {
        self.0.lock().len()
    }

    /// The `n`-th request's body as JSON.
    pub fn body(&self, n: usize) -> serde_json::Value {
        serde_json::from_str(&self.0.lock()[n]).unwrap()
    }
}

/// A loopback server answering its n-th request with `answers[n]` (the last one again
/// after), each a whole HTTP/1.1 head without its blank line and a body, then closing.
/// Keeps the bodies it read.
pub async fn serve_in_turn(answers: Vec<(&'static str, String)>) -> (String, Served) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let served = Served::default();
    let kept = served.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            // The whole request, head and body, so closing after the answer resets nothing.
            let mut seen = Vec::new();
            let mut buf = [0u8; 8192];
            let head_end = loop {
                if let Some(at) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                    break at + 4;
                }
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break 0,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            };
            if head_end == 0 {
                continue;
            }
            let head = String::from_utf8_lossy(&seen[..head_end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0);
            while seen.len() < head_end + length {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let n = {
                let mut bodies = kept.0.lock();
                bodies.push(String::from_utf8_lossy(&seen[head_end..]).into_owned());
                bodies.len() - 1
            };
            let (head, body) = &answers[n.min(answers.len() - 1)];
            let answer = format!("{head}\r\nconnection: close\r\n\r\n{body}");
            let _ = socket.write_all(answer.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    (format!("http://{addr}"), served)
}
