//! Retries through the real HTTP path (reqwest against a loopback server that writes raw
//! HTTP/1.1, one scripted answer per request): a failure before any of the answer is
//! retried, one after it is not.

use std::sync::Arc;
use std::time::Duration;

use conduit_core::content::Message;
use conduit_core::provider::StopReason;

use super::*;
use crate::test_support::serve_in_turn;

const EVENT_STREAM: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream";

/// Anthropic's documented stream start.
const MESSAGE_START: &str = r#"event: message_start
data: {"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant", "content": [], "model": "claude-opus-4-6", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}

"#;

/// The error event Anthropic documents as the streaming form of a 529.
const OVERLOADED: &str = r#"event: error
data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}

"#;

/// Anthropic's documented text answer after its start.
const HELLO: &str = r#"event: content_block_start
data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 0}

event: message_delta
data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence":null}, "usage": {"output_tokens": 15}}

event: message_stop
data: {"type": "message_stop"}

"#;

fn quick_retries() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_secs(1),
        max_total: Duration::from_secs(20),
    }
}

/// Every item of one Anthropic turn against `url`, through the built provider.
async fn anthropic_turn(
    url: &str,
    retry: RetryPolicy,
) -> Vec<Result<ProviderEvent, ProviderError>> {
    let config = crate::ProviderConfig {
        protocol: crate::Protocol::Anthropic,
        base_url: url.to_owned(),
        api_key: Some("sk-ant-test-0123456789".into()),
        http: HttpSettings {
            retry,
            ..HttpSettings::default()
        },
    };
    let media: Arc<dyn conduit_core::media::MediaStore> =
        Arc::new(conduit_core::testing::MemoryMedia::default());
    let provider = crate::build(config, media).unwrap();
    let request = crate::test_support::request(vec![Message::user_text("hi")]);
    provider
        .stream(request)
        .await
        .unwrap()
        .collect::<Vec<_>>()
        .await
}

fn usage(input_tokens: u64, output_tokens: u64) -> ProviderEvent {
    ProviderEvent::Usage(conduit_core::provider::Usage {
        input_tokens,
        output_tokens,
        ..Default::default()
    })
}

#[tokio::test]
async fn an_overload_sent_before_the_answer_is_retried_and_the_next_answer_arrives() {
    let (url, requests) = serve_in_turn(vec![
        (EVENT_STREAM, format!("{MESSAGE_START}{OVERLOADED}")),
        (EVENT_STREAM, format!("{MESSAGE_START}{HELLO}")),
    ])
    .await;
    let items = anthropic_turn(&url, quick_retries()).await;
    let events: Vec<ProviderEvent> = items.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        events,
        [
            usage(25, 1),
            ProviderEvent::Retrying {
                attempt: 1,
                delay: Duration::from_millis(10),
                error: ProviderError::new(
                    ProviderErrorKind::Overloaded,
                    "overloaded_error: Overloaded"
                ),
            },
            usage(25, 1),
            ProviderEvent::TextDelta("Hello".into()),
            ProviderEvent::TextDelta("!".into()),
            usage(25, 15),
            ProviderEvent::Stop(StopReason::EndTurn),
        ]
    );
    assert_eq!(requests.count(), 2);
}

#[tokio::test]
async fn an_overload_after_text_is_not_retried() {
    let started_text = r#"event: content_block_start
data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}

"#;
    let (url, requests) = serve_in_turn(vec![
        (
            EVENT_STREAM,
            format!("{MESSAGE_START}{started_text}{OVERLOADED}"),
        ),
        (EVENT_STREAM, format!("{MESSAGE_START}{HELLO}")),
    ])
    .await;
    let items = anthropic_turn(&url, quick_retries()).await;
    assert_eq!(
        items,
        [
            Ok(usage(25, 1)),
            Ok(ProviderEvent::TextDelta("Hi".into())),
            Err(ProviderError::new(
                ProviderErrorKind::Overloaded,
                "overloaded_error: Overloaded"
            )),
        ]
    );
    assert_eq!(requests.count(), 1);
}

/// The official SDKs retry a request timeout and a conflict; both go again here too.
#[tokio::test]
async fn a_request_timeout_and_a_conflict_are_retried() {
    // nginx's own 408 page, and a 409 in Google's documented error shape (ABORTED).
    let nginx_408 = "<html>\r\n<head><title>408 Request Time-out</title></head>\r\n<body>\r\n<center><h1>408 Request Time-out</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";
    let aborted =
        r#"{"error":{"code":409,"message":"The operation was aborted.","status":"ABORTED"}}"#;
    let (url, requests) = serve_in_turn(vec![
        (
            "HTTP/1.1 408 Request Timeout\r\ncontent-type: text/html",
            nginx_408.to_owned(),
        ),
        (
            "HTTP/1.1 409 Conflict\r\ncontent-type: application/json",
            aborted.to_owned(),
        ),
        (EVENT_STREAM, format!("{MESSAGE_START}{HELLO}")),
    ])
    .await;
    let events: Vec<ProviderEvent> = anthropic_turn(&url, quick_retries())
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let retried: Vec<(u32, Option<u16>, ProviderErrorKind)> = events
        .iter()
        .filter_map(|event| match event {
            ProviderEvent::Retrying { attempt, error, .. } => {
                Some((*attempt, error.status, error.kind))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        retried,
        [
            (1, Some(408), ProviderErrorKind::Server),
            (2, Some(409), ProviderErrorKind::Server),
        ]
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Stop(StopReason::EndTurn))
    );
    assert!(events.contains(&ProviderEvent::TextDelta("Hello".into())));
    assert_eq!(requests.count(), 3);
}

/// Gemini's 429 says how long to wait in its body (a `RetryInfo` detail), with no
/// `retry-after` header: that is the wait, and past the longest wait the turn ends at once
/// saying how long.
#[tokio::test]
async fn geminis_retry_delay_in_a_429_body_is_the_wait() {
    let body = r#"{
  "error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details.",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
      {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [
          {
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            "quotaValue": "10"
          }
        ]
      },
      {
        "@type": "type.googleapis.com/google.rpc.Help",
        "links": [
          {
            "description": "Learn more about Gemini API quotas",
            "url": "https://ai.google.dev/gemini-api/docs/rate-limits"
          }
        ]
      },
      {
        "@type": "type.googleapis.com/google.rpc.RetryInfo",
        "retryDelay": "47s"
      }
    ]
  }
}
"#;
    let (url, requests) = serve_in_turn(vec![(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json; charset=UTF-8",
        body.to_owned(),
    )])
    .await;
    // The longest wait here is a second: 47 s is past it, so no retry.
    let client = HttpClient::new(HttpSettings {
        retry: quick_retries(),
        ..HttpSettings::default()
    })
    .unwrap();
    let items: Vec<_> = client
        .stream(
            url,
            &[],
            serde_json::json!({}),
            crate::gemini::Decoder::default,
        )
        .unwrap()
        .collect()
        .await;
    assert_eq!(items.len(), 1, "{items:?}");
    let err = items[0].clone().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::RateLimited);
    assert_eq!(err.status, Some(429));
    assert_eq!(err.retry_after, Some(Duration::from_secs(47)));
    assert_eq!(
        err.to_string(),
        "the provider's rate limit was hit (HTTP 429): You exceeded your current quota, please check your plan and billing details. (it asks to wait 47 s)"
    );
    assert_eq!(requests.count(), 1);
    // With the default longest wait (a minute), the retry waits the 47 s asked for.
    assert_eq!(
        Retrier::new(&RetryPolicy::default()).next_delay(&err),
        Some((1, Duration::from_secs(47)))
    );
}
