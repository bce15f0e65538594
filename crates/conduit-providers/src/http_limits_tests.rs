//! Hostile answers through the real HTTP path (reqwest against a loopback server that
//! writes raw HTTP/1.1): bodies that never end, events that never end, huge messages, and
//! URLs that carry a key. Each stays within a small read timeout or a cap.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// How a scripted connection answers after its head.
#[derive(Clone)]
enum Body {
    /// These bytes, then the connection closes.
    Once(Vec<u8>),
    /// These bytes, then the same filler forever.
    Endless(Vec<u8>),
    /// These bytes, then nothing while the connection stays open.
    Hang(Vec<u8>),
}

/// A loopback server answering every request with `head` (status line and headers,
/// without the blank line) and `body`; close-delimited, so no length is promised.
async fn serve(head: &'static str, body: Body) -> String {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let body = body.clone();
            tokio::spawn(async move {
                // The request's head; its body (if any) is left unread, which a server may.
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!("{head}\r\nconnection: close\r\n\r\n");
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                match body {
                    Body::Once(bytes) => {
                        let _ = socket.write_all(&bytes).await;
                    }
                    Body::Endless(start) => {
                        if socket.write_all(&start).await.is_err() {
                            return;
                        }
                        let filler = vec![b'A'; 64 * 1024];
                        while socket.write_all(&filler).await.is_ok() {}
                    }
                    Body::Hang(start) => {
                        let _ = socket.write_all(&start).await;
                        futures::future::pending::<()>().await;
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

fn client(read_timeout: Duration) -> HttpClient {
    HttpClient::new(HttpSettings {
        read_timeout,
        retry: RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        },
        ..HttpSettings::default()
    })
    .unwrap()
}

/// Every text delta is what the event said.
struct Echo;

impl StreamDecoder for Echo {
    fn decode(
        &mut self,
        _event: Option<&str>,
        data: &str,
    ) -> Result<Vec<ProviderEvent>, ProviderError> {
        Ok(vec![ProviderEvent::TextDelta(data.to_owned())])
    }

    fn finish(&mut self) -> Result<Vec<ProviderEvent>, ProviderError> {
        Ok(Vec::new())
    }
}

/// The first error of a turn against `url`.
async fn turn_error(client: &HttpClient, url: &str) -> ProviderError {
    let mut events = client
        .stream(url.to_owned(), &[], serde_json::json!({}), || Echo)
        .unwrap();
    while let Some(item) = events.next().await {
        if let Err(err) = item {
            return err;
        }
    }
    panic!("the turn ended without an error");
}

#[tokio::test]
async fn an_endless_error_body_is_cut_at_the_cap_with_an_excerpt() {
    let url = serve(
        "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain",
        Body::Endless(b"upstream exploded ".to_vec()),
    )
    .await;
    let started = Instant::now();
    let err = turn_error(&client(Duration::from_secs(10)), &url).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(err.kind, ProviderErrorKind::Server);
    assert_eq!(err.status, Some(500));
    assert!(
        err.message.starts_with("upstream exploded AAAA"),
        "{}",
        err.message
    );
    assert!(
        err.message.ends_with("(the error body was cut at 64 KiB)"),
        "{}",
        err.message
    );
    assert!(err.message.len() < 1000, "{}", err.message.len());
}

#[tokio::test]
async fn an_error_body_that_never_ends_fails_within_the_read_timeout() {
    let url = serve(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json",
        Body::Hang(br#"{"error":{"message":"busy"#.to_vec()),
    )
    .await;
    let started = Instant::now();
    let err = turn_error(&client(Duration::from_millis(300)), &url).await;
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(err.kind, ProviderErrorKind::Overloaded);
    assert!(err.message.contains("busy"), "{}", err.message);
    assert!(
        err.message
            .ends_with("(the error body did not end within 0.3 s)"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_huge_error_message_is_cut() {
    let said = "word ".repeat(10_000);
    let body = serde_json::json!({"error": {"message": said, "code": "x".repeat(5000)}});
    let url = serve(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json",
        Body::Once(body.to_string().into_bytes()),
    )
    .await;
    let err = turn_error(&client(Duration::from_secs(10)), &url).await;
    assert_eq!(err.kind, ProviderErrorKind::InvalidRequest);
    assert!(err.message.starts_with("word word"), "{}", err.message);
    assert!(err.message.ends_with('…'), "{}", err.message);
    assert!(err.message.chars().count() <= 2001, "{}", err.message.len());

    // The same as a mid-stream error event and as a JSON error sent with status 200.
    let details = crate::error_body::details(
        &serde_json::json!({"error": {"message": said, "code": "y".repeat(5000)}}),
    )
    .unwrap();
    assert!(details.line().chars().count() <= 2200);
    let url = serve(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json",
        Body::Once(body.to_string().into_bytes()),
    )
    .await;
    let err = turn_error(&client(Duration::from_secs(10)), &url).await;
    assert_eq!(err.status, Some(200));
    assert!(err.message.chars().count() <= 2200, "{}", err.message.len());
}

#[tokio::test]
async fn an_event_that_never_ends_fails_at_the_cap() {
    let url = serve(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream",
        Body::Endless(b"data: first\n\ndata: ".to_vec()),
    )
    .await;
    let client = client(Duration::from_secs(10)).with_limits(Limits {
        sse_event: MIB,
        ..Limits::default()
    });
    let mut events = client
        .stream(url, &[], serde_json::json!({}), || Echo)
        .unwrap();
    let started = Instant::now();
    let first = events.next().await.unwrap().unwrap();
    assert!(matches!(first, ProviderEvent::TextDelta(text) if text == "first"));
    let err = events.next().await.unwrap().unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(err.kind, ProviderErrorKind::Protocol);
    assert!(
        err.message
            .starts_with("the provider sent an event larger than 1 MiB"),
        "{}",
        err.message
    );
    assert!(events.next().await.is_none());
}

#[tokio::test]
async fn many_small_events_never_reach_the_event_cap() {
    // 1,000 events of 100 bytes, one a chunk: far more than the 4 KiB cap in all, each
    // well under it.
    let event = format!("data: {}\n\n", "b".repeat(92));
    let chunks = futures::stream::iter(
        (0..1000).map(move |_| Ok::<_, std::io::Error>(bytes::Bytes::from(event.clone()))),
    );
    let limits = Limits {
        sse_event: 4096,
        ..Limits::default()
    };
    let events: Vec<_> = decode_sse_limited(chunks, Echo, Duration::from_secs(5), limits)
        .collect()
        .await;
    assert_eq!(events.len(), 1000);
    assert!(events.iter().all(Result::is_ok));
}

/// A field the SSE parser does not know (a proxy's own), a `retry` that is not a number
/// and an empty event are ignored, as the specification says, after a byte order mark,
/// instead of ending the answer ("the stream broke: invalid line").
#[tokio::test]
async fn a_field_a_proxy_adds_does_not_break_the_answer() {
    let chunks = futures::stream::iter(
        [
            "\u{FEFF}x-proxy-trace: 42\r\nretry: soon\r\ndata: first\r\n\r\ndata\n\nda",
            "ta: second\n\n",
        ]
        .map(|chunk| Ok::<_, std::io::Error>(bytes::Bytes::from(chunk))),
    );
    let events: Vec<_> = decode_sse(chunks, Echo, Duration::from_secs(5))
        .collect()
        .await;
    let texts: Vec<_> = events
        .into_iter()
        .map(|event| match event.unwrap() {
            ProviderEvent::TextDelta(text) => text,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(texts, ["first", "second"]);
}

#[tokio::test]
async fn an_answer_whose_events_carry_too_much_in_all_fails_at_the_cap() {
    // Events of 92 bytes of data, each well under the event cap: the 45th passes 4 KiB
    // in all, and nothing after it is decoded.
    let event = format!("data: {}\n\n", "b".repeat(92));
    let chunks = futures::stream::iter(
        (0..1000).map(move |_| Ok::<_, std::io::Error>(bytes::Bytes::from(event.clone()))),
    );
    let limits = Limits {
        sse_event: 4096,
        sse_response: 4096,
        ..Limits::default()
    };
    let events: Vec<_> = decode_sse_limited(chunks, Echo, Duration::from_secs(5), limits)
        .collect()
        .await;
    assert_eq!(events.len(), 4096 / 92 + 1);
    let err = events.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Protocol);
    assert_eq!(
        err.message,
        "the provider's answer is larger than 4 KiB; Conduit stopped reading it"
    );
}

#[tokio::test]
async fn an_endless_model_list_fails_at_the_cap() {
    let url = serve(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json",
        Body::Endless(br#"{"data":[""#.to_vec()),
    )
    .await;
    let client = client(Duration::from_secs(10)).with_limits(Limits {
        whole_body: MIB,
        ..Limits::default()
    });
    let err = client.get_json(&url, &[]).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Protocol);
    assert_eq!(
        err.message,
        "the answer is larger than 1 MiB; Conduit stopped reading it"
    );

    // The same as the 200 answer of a turn labelled JSON.
    let err = turn_error(&client, &url).await;
    assert_eq!(err.kind, ProviderErrorKind::Protocol);
    assert!(err.message.contains("larger than 1 MiB"), "{}", err.message);
    assert!(err.message.len() < 1000, "{}", err.message.len());
}

/// Events under a JSON label (a proxy's) are streamed as they come: read whole, a long
/// answer showed nothing until it ended, and failed after the read timeout.
#[tokio::test]
async fn events_labelled_json_stream_as_they_come() {
    let url = serve(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json",
        Body::Hang(b"\ndata: first words\n\n".to_vec()),
    )
    .await;
    let client = client(Duration::from_millis(1500));
    let mut events = client
        .stream(url, &[], serde_json::json!({}), || Echo)
        .unwrap();
    let first = events.next().await.unwrap().unwrap();
    assert_eq!(first, ProviderEvent::TextDelta("first words".into()));
    // Then the silence is a stall, as for any stream.
    let err = events.next().await.unwrap().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Stalled, "{}", err.message);
    assert!(starts_like_events(b": keep-alive\n"));
    assert!(!starts_like_events(b"{\"data\": 1}"));
    assert!(!starts_like_events(b"   "));
}

/// A model list within the size cap made of more tiny values than a stream's event may
/// hold is refused before it is parsed (it would take hundreds of megabytes as values).
#[tokio::test]
async fn a_model_list_of_too_many_tiny_values_is_refused_unparsed() {
    let limit = conduit_core::agent::MAX_RESPONSE_VALUES;
    let tiny = format!("[{}]", vec!["[0]"; limit].join(","));
    let tiny: &'static str = Box::leak(tiny.into_boxed_str());
    let url = serve(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json",
        Body::Once(tiny.as_bytes().to_vec()),
    )
    .await;
    let client = client(Duration::from_secs(10));
    let err = client.get_json(&url, &[]).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Protocol);
    assert_eq!(
        err.message,
        format!("the answer has more than {limit} JSON values; Conduit did not read it")
    );
}

#[tokio::test]
async fn a_model_list_that_never_starts_or_ends_fails_within_the_read_timeout() {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let silent = format!("http://{}", listener.local_addr().unwrap());
    // Accepted by the backlog, never answered.
    let err = client(Duration::from_millis(300))
        .get_json(&silent, &[])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Stalled);
    assert!(err.message.contains("did not start"), "{}", err.message);

    let url = serve(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json",
        Body::Hang(b"{".to_vec()),
    )
    .await;
    let err = client(Duration::from_millis(300))
        .get_json(&url, &[])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Stalled);
    assert_eq!(err.message, "the answer did not end within 0.3 s");
    drop(listener);
}

/// A server that takes the request and never answers (a hung proxy, a wedged local
/// server) held the turn until Stop: now the answer must start within its own limit.
#[tokio::test]
async fn a_turn_whose_answer_never_starts_fails_within_its_limit() {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let silent = format!("http://{}", listener.local_addr().unwrap());
    let client = HttpClient::new(HttpSettings {
        read_timeout: Duration::from_millis(100),
        answer_start_timeout: Duration::from_millis(400),
        retry: RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        },
        ..HttpSettings::default()
    })
    .unwrap();
    let started = Instant::now();
    let err = turn_error(&client, &silent).await;
    assert_eq!(err.kind, ProviderErrorKind::Stalled);
    assert_eq!(
        err.message,
        "the provider did not start answering within 0.4 s"
    );
    // The silence limit does not apply before the answer starts: a model loading is not
    // a stalled stream.
    assert!(started.elapsed() >= Duration::from_millis(400));
    drop(listener);
}

#[tokio::test]
async fn a_key_in_the_url_stays_out_of_connection_errors() {
    // A port nothing listens on: bound, then released.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let url = format!("http://{addr}/sk-secret-path-key/v1/chat?key=sk-secret-query");
    let err = turn_error(&client(Duration::from_secs(5)), &url).await;
    assert_eq!(err.kind, ProviderErrorKind::Connection);
    assert!(!err.message.contains("sk-secret"), "{}", err.message);
    assert!(
        err.message.contains(&format!("(at http://{addr})")),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn comments_while_a_model_thinks_are_not_a_stall() {
    // A proxy's keep-alive comment every 100 ms for three times the read timeout, then
    // the answer: alive all along. Then silence: a stall.
    let chunks = async_stream::stream! {
        for _ in 0..15 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            yield Ok::<_, std::io::Error>(bytes::Bytes::from_static(b": PROCESSING\n\n"));
        }
        yield Ok(bytes::Bytes::from_static(b"data: thought it through\n\n"));
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    let events: Vec<_> = decode_sse(chunks, Echo, Duration::from_millis(500))
        .collect()
        .await;
    assert!(
        matches!(&events[0], Ok(ProviderEvent::TextDelta(text)) if text == "thought it through"),
        "{events:?}"
    );
    assert!(
        matches!(&events[1], Err(err) if err.kind == ProviderErrorKind::Stalled),
        "{events:?}"
    );
    assert_eq!(events.len(), 2);
}

#[tokio::test]
async fn a_reader_that_paused_gets_what_arrived_before_any_stall() {
    // The answer arrives at once; its reader comes back after twice the read timeout.
    let chunks = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from_static(
        b"data: one\n\ndata: two\n\n",
    ))])
    .chain(futures::stream::pending());
    let mut events = decode_sse(chunks, Echo, Duration::from_millis(300));
    assert!(matches!(events.next().await, Some(Ok(ProviderEvent::TextDelta(t))) if t == "one"));
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(matches!(events.next().await, Some(Ok(ProviderEvent::TextDelta(t))) if t == "two"));
    assert!(
        matches!(events.next().await, Some(Err(err)) if err.kind == ProviderErrorKind::Stalled)
    );
}

/// A provider or a gateway that quotes the key it was sent, in an error status's body, in
/// a JSON error sent with status 200 or in a model list's error, does not get it into the
/// error (which is logged, stored and shown); nor an extra header's value.
#[tokio::test]
async fn a_key_the_provider_quotes_back_is_hidden_in_its_error() {
    let key = "sk-echo-0123456789abcdef";
    let gateway = "gw-secret-9876543210";
    let client = HttpClient::new(HttpSettings {
        retry: RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        },
        extra_headers: vec![("Helicone-Auth".into(), format!("Bearer {gateway}"))],
        ..HttpSettings::default()
    })
    .unwrap();
    let headers = [("authorization", format!("Bearer {key}"))];
    let quoted = format!(r#"{{"error": {{"message": "invalid key {key} (with {gateway})"}}}}"#);
    let quoted: &'static str = Box::leak(quoted.into_boxed_str());
    for head in [
        "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json",
        "HTTP/1.1 200 OK\r\ncontent-type: application/json",
    ] {
        let url = serve(head, Body::Once(quoted.as_bytes().to_vec())).await;
        let mut events = client
            .stream(url, &headers, serde_json::json!({}), || Echo)
            .unwrap();
        let mut err = None;
        while let Some(item) = events.next().await {
            if let Err(e) = item {
                err = Some(e);
                break;
            }
        }
        let err = err.expect("the turn failed");
        assert!(err.message.contains("invalid key ••••"), "{}", err.message);
        assert!(
            !err.message.contains(key) && !err.message.contains(gateway),
            "{}",
            err.message
        );
    }
    let url = serve(
        "HTTP/1.1 403 Forbidden\r\ncontent-type: application/json",
        Body::Once(quoted.as_bytes().to_vec()),
    )
    .await;
    let err = client.get_json(&url, &headers).await.unwrap_err();
    assert!(!err.message.contains(key), "{}", err.message);
}

/// A gateway whose key is in its base URL (a path segment, a query value) and that quotes
/// the path it was asked for in its 404, as OpenAI's "Invalid URL (POST /v1/…)" does,
/// does not get the key into the error.
#[tokio::test]
async fn a_key_in_the_url_the_provider_quotes_back_is_hidden_in_its_error() {
    let in_path = "sk-ak-0123456789abcdefXYZ";
    let in_query = "q-secret-5555aaaa";
    let quoted = format!(
        r#"{{"error": {{"message": "Invalid URL (POST /v1/{in_path}/chat/completions?key={in_query})"}}}}"#
    );
    let quoted: &'static str = Box::leak(quoted.into_boxed_str());
    let base = serve(
        "HTTP/1.1 404 Not Found\r\ncontent-type: application/json",
        Body::Once(quoted.as_bytes().to_vec()),
    )
    .await;
    let base_url = format!("{base}/v1/{in_path}/?key={in_query}");
    let client = HttpClient::new(HttpSettings {
        retry: RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        },
        // What `crate::build` fills in from the provider's base URL.
        url_secrets: conduit_net::url_secrets(&base_url),
        ..HttpSettings::default()
    })
    .unwrap();
    let url = format!("{base}/v1/{in_path}/chat/completions?key={in_query}");
    let mut events = client
        .stream(url, &[], serde_json::json!({}), || Echo)
        .unwrap();
    let mut err = None;
    while let Some(item) = events.next().await {
        if let Err(e) = item {
            err = Some(e);
            break;
        }
    }
    let err = err.expect("the turn failed");
    assert!(err.message.contains("Invalid URL"), "{}", err.message);
    assert!(
        !err.message.contains(in_path) && !err.message.contains(in_query),
        "{}",
        err.message
    );
}

/// A configuration printed with `?` shows its base URL without what may be a key in it.
#[test]
fn a_configurations_debug_shows_no_key_of_its_base_url() {
    let config = crate::ProviderConfig {
        protocol: crate::Protocol::OpenAiChat,
        base_url: "https://bob:hunter2@gw.example/v1/sk-ak-0123456789abcdef?key=q-5555aaaa&page=1"
            .into(),
        api_key: Some("sk-real".into()),
        http: HttpSettings::default(),
    };
    let shown = format!("{config:?}");
    for secret in [
        "hunter2",
        "bob",
        "sk-ak-0123456789abcdef",
        "q-5555aaaa",
        "sk-real",
    ] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("\"https://gw.example/…\""), "{shown}");
}

/// A provider built from its configuration hides its base URL's key in what its answers
/// quote: `build` hands the base URL's secrets to its client.
#[tokio::test]
async fn a_built_provider_hides_its_base_urls_key_in_a_quoted_error() {
    let in_path = "sk-ak-9876543210fedcbaXYZ";
    let quoted = format!(r#"{{"error": {{"message": "Invalid URL (GET /v1/{in_path}/models)"}}}}"#);
    let quoted: &'static str = Box::leak(quoted.into_boxed_str());
    let base = serve(
        "HTTP/1.1 404 Not Found\r\ncontent-type: application/json",
        Body::Once(quoted.as_bytes().to_vec()),
    )
    .await;
    let config = crate::ProviderConfig {
        protocol: crate::Protocol::OpenAiChat,
        base_url: format!("{}/v1/{in_path}", base.trim_end_matches('/')),
        api_key: None,
        http: HttpSettings {
            retry: RetryPolicy {
                max_retries: 0,
                ..RetryPolicy::default()
            },
            ..HttpSettings::default()
        },
    };
    let media: std::sync::Arc<dyn conduit_core::media::MediaStore> =
        std::sync::Arc::new(conduit_core::testing::MemoryMedia::default());
    let provider = crate::build(config, media).unwrap();
    let err = provider.list_models().await.unwrap_err();
    assert!(err.message.contains("Invalid URL"), "{}", err.message);
    assert!(!err.message.contains(in_path), "{}", err.message);
}
