//! An HTTP server that refuses a request with a status instead of answering it: a rate
//! limit (429, with `Retry-After`) or a failure (503). The call fails saying so, not that
//! the server closed the connection and the call may have run, and the connection goes
//! on: the next call is answered. A refusal for want of scope (403) or of sign-in (401)
//! on the running session reaches the runtime: the first is kept for signing in again
//! with more, the second makes the server wait for the user to sign in.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use conduit_core::media::MediaStore;
use conduit_core::tool::{Tool, ToolContext};
use conduit_mcp::runtime::{McpRuntime, RuntimeOptions};
use conduit_mcp::servers::ServerState;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Server {
    calls: AtomicUsize,
}

fn json_response(body: Value) -> Response {
    (
        [
            ("content-type", "application/json"),
            ("mcp-session-id", "s1"),
        ],
        body.to_string(),
    )
        .into_response()
}

async fn on_post(State(server): State<Arc<Server>>, body: String) -> Response {
    let message: Value = serde_json::from_str(&body).unwrap();
    let id = message["id"].clone();
    let result = match message["method"].as_str() {
        Some("initialize") => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "refuser", "version": "1.0.0"}
        }),
        Some("tools/list") => json!({"tools": [{
            "name": "add",
            "description": "Adds.",
            "inputSchema": {"type": "object", "properties": {}}
        }]}),
        Some("tools/call") if message["params"]["arguments"]["as"] == "short of scope" => {
            return (
                StatusCode::FORBIDDEN,
                [(
                    "www-authenticate",
                    r#"Bearer error="insufficient_scope", scope="notes:read notes:write""#,
                )],
            )
                .into_response();
        }
        Some("tools/call") if message["params"]["arguments"]["as"] == "revoked" => {
            return (
                StatusCode::UNAUTHORIZED,
                [("www-authenticate", r#"Bearer error="invalid_token""#)],
            )
                .into_response();
        }
        Some("tools/call") => match server.calls.fetch_add(1, Ordering::SeqCst) {
            0 => {
                return (
                    StatusCode::TOO_MANY_REQUESTS,
                    [("retry-after", "7")],
                    "slow down",
                )
                    .into_response();
            }
            1 => return (StatusCode::SERVICE_UNAVAILABLE, "down").into_response(),
            _ => json!({"content": [{"type": "text", "text": "42"}]}),
        },
        _ if id.is_null() => return StatusCode::ACCEPTED.into_response(),
        _ => json!({}),
    };
    json_response(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_refused_by_http_status_says_so_and_the_connection_goes_on() {
    let (runtime, _url, server, _dir) = refuser().await;
    let media: Arc<dyn MediaStore> = conduit_core::testing::MemoryMedia::new();
    let tools = runtime.tools(media, &|_, _| true);
    assert_eq!(tools.len(), 1);
    let call = || {
        tools[0].call(
            json!({}),
            ToolContext::new(CancellationToken::new(), Arc::new(|_| {})),
        )
    };

    let busy = call().await.unwrap_err().0;
    assert!(busy.contains("HTTP 429"), "{busy}");
    assert!(busy.contains("wait 7"), "{busy}");
    assert!(busy.contains("did not run"), "{busy}");
    assert!(!busy.contains("closed the connection"), "{busy}");

    let failed = call().await.unwrap_err().0;
    assert!(failed.contains("HTTP 503"), "{failed}");
    assert!(!failed.contains("closed the connection"), "{failed}");

    assert!(!runtime.connection("refuser").unwrap().is_closed());
    let answered = call().await.unwrap();
    assert!(format!("{answered:?}").contains("42"), "{answered:?}");
    assert_eq!(server.calls.load(Ordering::SeqCst), 3);
    runtime.shutdown().await;
}

/// The runtime and tools of one `refuser` server at a new loopback address.
async fn refuser() -> (McpRuntime, String, Arc<Server>, tempfile::TempDir) {
    let server = Arc::new(Server::default());
    let app = Router::new()
        .route(
            "/mcp",
            post(on_post)
                .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
                .delete(|| async { StatusCode::OK }),
        )
        .with_state(server.clone());
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcp_servers.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"refuser": {"type": "http", "url": url, "protocolVersion": "2025-11-25"}}})
            .to_string(),
    )
    .unwrap();
    let runtime = McpRuntime::start(RuntimeOptions::new(&file, Duration::from_secs(20)))
        .await
        .unwrap();
    (runtime, url, server, dir)
}

fn state_of(runtime: &McpRuntime) -> ServerState {
    runtime
        .statuses()
        .into_iter()
        .find(|status| status.name == "refuser")
        .unwrap()
        .state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_for_sign_in_or_scope_on_a_running_session_reaches_the_runtime() {
    let (runtime, url, _server, _dir) = refuser().await;
    let connection = runtime.connection("refuser").unwrap();
    let call = |how: &'static str| {
        let connection = connection.clone();
        async move {
            let mut arguments = serde_json::Map::new();
            arguments.insert("as".into(), how.into());
            connection
                .call_tool("add", arguments, Arc::new(|_| {}), CancellationToken::new())
                .await
        }
    };
    let short = call("short of scope").await.unwrap_err().to_string();
    assert!(short.contains("more access"), "{short}");
    // Kept for signing in again, which asks for the scope the server named; the server
    // goes on for its other requests.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let challenge = loop {
        if let Some(challenge) = runtime.sign_in_challenge("refuser", &url) {
            break challenge;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the challenge was not kept"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(challenge.contains("notes:read notes:write"), "{challenge}");
    assert!(matches!(state_of(&runtime), ServerState::Ready { .. }));
    assert!(
        call("anything").await.is_err(),
        "the first plain call is refused 429"
    );

    let revoked = call("revoked").await.unwrap_err().to_string();
    assert!(revoked.contains("sign in"), "{revoked}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !matches!(state_of(&runtime), ServerState::SignInRequired { .. }) {
        assert!(
            std::time::Instant::now() < deadline,
            "still {:?}",
            state_of(&runtime)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(runtime.connection("refuser").is_none());
    assert!(matches!(
        state_of(&runtime),
        ServerState::SignInRequired {
            more_scope: false,
            ..
        }
    ));
    runtime.shutdown().await;
}
