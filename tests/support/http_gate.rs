//! A loopback reverse proxy that lets a request through only with the expected
//! `Authorization` header, and records the headers of every request it saw: it puts an
//! MCP server that takes no token behind one that requires it. It can also let the
//! sessions it has seen expire (a 404, as a server restarted behind a load balancer
//! answers), record the JSON-RPC methods it let through, and change the upstream's
//! replies (a tool's definition changed behind the same URL), and require another token
//! from now on (one revoked) or refuse one method to any token.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;

struct Gate {
    upstream: String,
    expected_authorization: Mutex<String>,
    client: reqwest::Client,
    seen: Mutex<Vec<HeaderMap>>,
    /// The JSON-RPC methods of the POSTs let through, in order.
    methods: Mutex<Vec<String>>,
    /// The session ids the upstream gave, and those answered 404 from now on.
    sessions: Mutex<(HashSet<String>, HashSet<String>)>,
    /// Text replaced in the replies to POSTs from now on, when set.
    rewrite: Mutex<Option<(String, String)>>,
    /// JSON-RPC methods answered 401 from now on, whatever the token.
    refused_methods: Mutex<HashSet<String>>,
}

/// The running proxy; it stops when dropped.
pub struct HttpGate {
    pub addr: SocketAddr,
    gate: Arc<Gate>,
    task: tokio::task::JoinHandle<()>,
}

impl HttpGate {
    /// Proxies to `upstream` (e.g. `http://127.0.0.1:3001`) for requests carrying
    /// `Authorization: <expected_authorization>` (no header, when it is empty); others get
    /// a 401.
    pub async fn start(upstream: &str, expected_authorization: &str) -> anyhow::Result<Self> {
        let gate = Arc::new(Gate {
            upstream: upstream.trim_end_matches('/').to_owned(),
            expected_authorization: Mutex::new(expected_authorization.to_owned()),
            client: reqwest::Client::new(),
            seen: Mutex::new(Vec::new()),
            methods: Mutex::new(Vec::new()),
            sessions: Mutex::new(Default::default()),
            rewrite: Mutex::new(None),
            refused_methods: Mutex::new(HashSet::new()),
        });
        let app = Router::new().fallback(forward).with_state(gate.clone());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, gate, task })
    }

    /// The JSON-RPC methods of the POSTs the gate let through, in order.
    pub fn methods(&self) -> Vec<String> {
        self.gate
            .methods
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    /// Asserts that since `before` (a length of [`HttpGate::methods`]) the client connected
    /// again and listed the tools before one call, and only one, reached the server.
    pub fn assert_one_call_after_listing(&self, before: usize) {
        let after: Vec<String> = self.methods()[before..].to_vec();
        let position = |method: &str| after.iter().position(|m| m == method);
        assert_eq!(
            after.iter().filter(|m| *m == "tools/call").count(),
            1,
            "{after:?}"
        );
        assert!(
            position("initialize") < position("tools/list")
                && position("tools/list") < position("tools/call")
                && position("initialize").is_some(),
            "connected and listed before the call reached the server: {after:?}"
        );
    }

    /// Asserts that no tool call reached the server since `before` (a length of
    /// [`HttpGate::methods`]).
    pub fn assert_no_call_since(&self, before: usize) {
        let methods = self.methods();
        assert!(
            !methods[before..].iter().any(|m| m == "tools/call"),
            "{methods:?}"
        );
    }

    /// From now on every session the upstream gave so far is answered 404 (expired); the
    /// upstream itself keeps them.
    pub fn expire_sessions(&self) {
        if let Ok(mut sessions) = self.gate.sessions.lock() {
            let given = sessions.0.clone();
            sessions.1.extend(given);
        }
    }

    /// From now on the replies to POSTs are read whole and `from` replaced by `to` in
    /// them, as if another server answered under the same URL.
    pub fn rewrite_replies(&self, from: &str, to: &str) {
        if let Ok(mut rewrite) = self.gate.rewrite.lock() {
            *rewrite = Some((from.to_owned(), to.to_owned()));
        }
    }

    /// From now on only `Authorization: <expected_authorization>` goes through (a token
    /// revoked: the one the client holds gets a 401).
    pub fn require(&self, expected_authorization: &str) {
        if let Ok(mut expected) = self.gate.expected_authorization.lock() {
            *expected = expected_authorization.to_owned();
        }
    }

    /// From now on a POST of the JSON-RPC `method` is answered 401, whatever its token
    /// (a token that may open a session but not list its tools).
    pub fn refuse_method(&self, method: &str) {
        if let Ok(mut refused) = self.gate.refused_methods.lock() {
            refused.insert(method.to_owned());
        }
    }

    /// The headers of every request that reached the gate, in order.
    pub fn seen(&self) -> Vec<HeaderMap> {
        self.gate.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for HttpGate {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(
    State(gate): State<Arc<Gate>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Ok(mut seen) = gate.seen.lock() {
        seen.push(headers.clone());
    }
    // A session the gate let expire is answered 404 whatever the token: the server
    // no longer knows it, so what it was signed in with is not asked.
    let session = headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let expired = session.as_ref().is_some_and(|id| {
        gate.sessions
            .lock()
            .map(|sessions| sessions.1.contains(id))
            .unwrap_or(false)
    });
    if expired {
        return Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Body::from("session not found"))
            .unwrap_or_default();
    }
    let expected = gate
        .expected_authorization
        .lock()
        .map(|expected| expected.clone())
        .unwrap_or_default();
    let authorized = match headers.get("authorization") {
        Some(given) => given.to_str().is_ok_and(|given| given == expected),
        None => expected.is_empty(),
    };
    if !authorized {
        return Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header("www-authenticate", "Bearer")
            .body(Body::from("missing or wrong bearer token"))
            .unwrap_or_default();
    }
    let called = (method == Method::POST)
        .then(|| serde_json::from_slice::<serde_json::Value>(&body).ok())
        .flatten()
        .and_then(|message| Some(message.get("method")?.as_str()?.to_owned()));
    if let Some(name) = &called {
        let refused = gate
            .refused_methods
            .lock()
            .is_ok_and(|refused| refused.contains(name));
        if refused {
            return Response::builder()
                .status(StatusCode::UNAUTHORIZED)
                .header("www-authenticate", "Bearer")
                .body(Body::from("not allowed with this token"))
                .unwrap_or_default();
        }
        if let Ok(mut methods) = gate.methods.lock() {
            methods.push(name.clone());
        }
    }
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let rewrite = match method {
        Method::POST => gate.rewrite.lock().ok().and_then(|r| r.clone()),
        _ => None,
    };
    let mut request = gate
        .client
        .request(method, format!("{}{path}", gate.upstream))
        .body(body);
    for (name, value) in &headers {
        if name != "host" && name != "content-length" {
            request = request.header(name, value);
        }
    }
    let upstream = match request.send().await {
        Ok(response) => response,
        Err(err) => {
            return Response::builder()
                .status(StatusCode::BAD_GATEWAY)
                .body(Body::from(err.to_string()))
                .unwrap_or_default();
        }
    };
    if let Some(given) = upstream
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        && let Ok(mut sessions) = gate.sessions.lock()
    {
        sessions.0.insert(given.to_owned());
    }
    let mut builder = Response::builder().status(upstream.status().as_u16());
    for (name, value) in upstream.headers() {
        if name != "content-length" && name != "transfer-encoding" {
            builder = builder.header(name.as_str(), value.as_bytes());
        }
    }
    if let Some((from, to)) = rewrite {
        return match upstream.text().await {
            Ok(text) => builder
                .body(Body::from(text.replace(&from, &to)))
                .unwrap_or_default(),
            Err(err) => Response::builder()
                .status(StatusCode::BAD_GATEWAY)
                .body(Body::from(err.to_string()))
                .unwrap_or_default(),
        };
    }
    let stream = upstream
        .bytes_stream()
        .map(|chunk| chunk.map_err(std::io::Error::other));
    builder.body(Body::from_stream(stream)).unwrap_or_default()
}
