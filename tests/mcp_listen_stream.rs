//! A server that asks on its own stream: an HTTP server with a session sends an
//! `elicitation/create` it does not relate to the tool call, so it goes on the stream the
//! client opened with GET, and a message for a stream that is not open yet is lost (as
//! the TypeScript SDK drops it). This server answers the GET 300 ms late, as a loaded
//! machine may: the connection waits for it before its first request, so the question
//! still reaches the asker and its answer the tool.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use conduit_mcp::elicit::{
    Asker, Elicitation, ElicitationAnswer, ElicitationKind, ElicitationOffer, defaults,
};
use conduit_mcp::runtime::{McpRuntime, RuntimeOptions};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// How late the server answers the client's GET.
const GET_DELAY: Duration = Duration::from_millis(300);

#[derive(Default)]
struct Server {
    /// The open GET stream, once the server answered it.
    stream: Mutex<Option<mpsc::UnboundedSender<Bytes>>>,
    /// The tool call waiting for the client's answer to its question.
    answer: Mutex<Option<oneshot::Sender<Value>>>,
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
    let Some(method) = message["method"].as_str() else {
        // The client's answer to the question.
        if let Some(waiting) = server.answer.lock().take() {
            let _ = waiting.send(message["result"].clone());
        }
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match method {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "late-get", "version": "1.0.0"}
        }),
        "tools/list" => json!({"tools": [{
            "name": "ask",
            "description": "Asks the user a name on the server's own stream.",
            "inputSchema": {"type": "object", "properties": {}}
        }]}),
        "tools/call" => {
            let stream = server.stream.lock().clone();
            let Some(stream) = stream else {
                return json_response(json!({"jsonrpc": "2.0", "id": id, "result": {
                    "content": [{"type": "text", "text": "lost: the GET stream was not open"}],
                    "isError": true
                }}));
            };
            let (answered, answer) = oneshot::channel();
            *server.answer.lock() = Some(answered);
            let question = json!({"jsonrpc": "2.0", "id": "q1", "method": "elicitation/create",
                "params": {"message": "Your name?", "requestedSchema": {"type": "object",
                    "properties": {"name": {"type": "string", "default": "Ada"}}}}});
            stream
                .send(Bytes::from(format!("data: {question}\n\n")))
                .unwrap();
            let answer = tokio::time::timeout(Duration::from_secs(20), answer)
                .await
                .unwrap()
                .unwrap();
            json!({"content": [{"type": "text", "text": format!("answered: {answer}")}]})
        }
        _ if id.is_null() => return StatusCode::ACCEPTED.into_response(),
        _ => json!({}),
    };
    json_response(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

async fn on_get(State(server): State<Arc<Server>>, headers: HeaderMap) -> Response {
    assert_eq!(
        headers.get("mcp-session-id").and_then(|v| v.to_str().ok()),
        Some("s1")
    );
    tokio::time::sleep(GET_DELAY).await;
    let (sender, receiver) = mpsc::unbounded_channel::<Bytes>();
    *server.stream.lock() = Some(sender);
    let body = futures::stream::unfold(receiver, |mut receiver| async move {
        receiver
            .recv()
            .await
            .map(|bytes| (Ok::<_, Infallible>(bytes), receiver))
    });
    (
        [("content-type", "text/event-stream")],
        Body::from_stream(body),
    )
        .into_response()
}

/// Accepts each form with its defaults.
struct Defaults;

#[async_trait]
impl Asker for Defaults {
    fn offers(&self) -> ElicitationOffer {
        ElicitationOffer {
            form: true,
            url: false,
        }
    }

    async fn elicit(&self, question: Elicitation) -> ElicitationAnswer {
        match question.kind {
            ElicitationKind::Form { fields } => ElicitationAnswer::Accept(defaults(&fields)),
            ElicitationKind::Url { .. } => ElicitationAnswer::Decline,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_on_a_late_get_stream_still_reaches_the_asker() {
    let server = Arc::new(Server::default());
    let app = Router::new()
        .route(
            "/mcp",
            post(on_post)
                .get(on_get)
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
        json!({"mcpServers": {"late": {"type": "http", "url": url, "protocolVersion": "2025-11-25"}}})
            .to_string(),
    )
    .unwrap();
    let options =
        RuntimeOptions::new(&file, Duration::from_secs(20)).with_asker(Arc::new(Defaults));
    let runtime = McpRuntime::start(options).await.unwrap();
    let connection = runtime.connection("late").unwrap();
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        connection.call_tool(
            "ask",
            serde_json::Map::new(),
            Arc::new(|_| {}),
            CancellationToken::new(),
        ),
    )
    .await
    .expect("the call ended")
    .unwrap();
    let text = format!("{:?}", result.content);
    assert!(text.contains("answered") && text.contains("Ada"), "{text}");
    runtime.shutdown().await;
}
