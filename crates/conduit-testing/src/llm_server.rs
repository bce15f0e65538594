//! A scripted LLM server on loopback: it speaks Anthropic Messages, OpenAI Responses,
//! OpenAI Chat Completions and Gemini the way the services do (SSE events, error bodies,
//! `retry-after`), replays one scripted reply per request, and records every request.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};

/// One piece of a streamed reply.
#[derive(Debug, Clone)]
pub enum Chunk {
    /// Bytes sent as they are (whole SSE events, usually).
    Send(String),
    /// A pause before the next chunk.
    Sleep(Duration),
    /// Send nothing more and keep the connection open.
    Hang,
}

/// The reply to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    Stream(Vec<Chunk>),
    /// A 200 with a JSON body (model lists).
    Json(Value),
    Error {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The client's address: requests from one connection share it.
    pub peer: SocketAddr,
    pub method: String,
    pub path_and_query: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    /// When set, `GET .../models` gets this without using up a scripted reply.
    models: Mutex<Option<Value>>,
}

/// The running server; it stops when dropped.
pub struct ScriptedLlm {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl ScriptedLlm {
    /// Starts the server with the replies it gives, in order.
    pub async fn start(replies: Vec<Reply>) -> anyhow::Result<Self> {
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into()),
            requests: Mutex::new(Vec::new()),
            models: Mutex::new(None),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let app = app.into_make_service_with_connect_info::<SocketAddr>();
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, shared, task })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answers model-list requests with `body` from now on, outside the script (an app
    /// asks for them whenever it likes).
    pub fn answer_models(&self, body: Value) {
        if let Ok(mut models) = self.shared.models.lock() {
            *models = Some(body);
        }
    }

    /// A settings file with this server as provider `scripted` (Chat Completions, model
    /// `m`), as the desktop tests give the app.
    pub fn provider_settings(&self) -> Value {
        json!({"providers": [{
            "id": "scripted",
            "protocol": "openai-chat",
            "baseUrl": Dialect::OpenAiChat.base_url(&self.url()),
            "defaultModel": "m"
        }]})
    }

    /// Adds replies to the end of the script.
    pub fn push(&self, replies: Vec<Reply>) {
        if let Ok(mut queue) = self.shared.replies.lock() {
            queue.extend(replies);
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }
}

impl Drop for ScriptedLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = Recorded {
        peer,
        method: method.to_string(),
        path_and_query: uri
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_owned()))
            .collect(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    if method == Method::GET && uri.path().ends_with("/models") {
        let models = shared.models.lock().ok().and_then(|m| m.clone());
        if let Some(models) = models {
            return respond(200, &[], "application/json", Body::from(models.to_string()));
        }
    }
    if let Ok(mut requests) = shared.requests.lock() {
        requests.push(recorded);
    }
    let reply = shared.replies.lock().ok().and_then(|mut r| r.pop_front());
    match reply {
        None => respond(
            500,
            &[],
            "application/json",
            Body::from(r#"{"error":{"message":"the scripted server has no reply left"}}"#),
        ),
        Some(Reply::Json(value)) => {
            respond(200, &[], "application/json", Body::from(value.to_string()))
        }
        Some(Reply::Error {
            status,
            headers,
            body,
        }) => respond(status, &headers, "application/json", Body::from(body)),
        Some(Reply::Stream(chunks)) => {
            let stream = futures::stream::iter(chunks).then(|chunk| async move {
                match chunk {
                    Chunk::Send(text) => Some(Bytes::from(text)),
                    Chunk::Sleep(pause) => {
                        tokio::time::sleep(pause).await;
                        Some(Bytes::new())
                    }
                    Chunk::Hang => {
                        futures::future::pending::<()>().await;
                        None
                    }
                }
            });
            let stream = stream
                .take_while(|chunk| futures::future::ready(chunk.is_some()))
                .filter_map(|chunk| async move {
                    chunk
                        .filter(|b| !b.is_empty())
                        .map(Ok::<_, std::convert::Infallible>)
                });
            respond(200, &[], "text/event-stream", Body::from_stream(stream))
        }
    }
}

fn respond(status: u16, headers: &[(String, String)], content_type: &str, body: Body) -> Response {
    let mut builder = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", content_type);
    for (name, value) in headers {
        builder = builder.header(name, value);
    }
    builder
        .body(body)
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// A tool call a scripted model makes.
#[derive(Debug, Clone)]
pub struct ScriptedCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

impl ScriptedCall {
    pub fn new(id: &str, name: &str, arguments: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }
}

/// One wire protocol as the service speaks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Anthropic,
    OpenAiResponses,
    OpenAiChat,
    Gemini,
}

impl Dialect {
    pub const ALL: [Dialect; 4] = [
        Dialect::Anthropic,
        Dialect::OpenAiResponses,
        Dialect::OpenAiChat,
        Dialect::Gemini,
    ];

    /// The `--kind` that selects it.
    pub fn kind(self) -> &'static str {
        match self {
            Dialect::Anthropic => "anthropic",
            Dialect::OpenAiResponses => "openai-responses",
            Dialect::OpenAiChat => "openai-chat",
            Dialect::Gemini => "gemini",
        }
    }

    /// The base URL a user would give for a server at `root` (OpenAI's includes `/v1`).
    pub fn base_url(self, root: &str) -> String {
        match self {
            Dialect::OpenAiResponses | Dialect::OpenAiChat => format!("{root}/v1"),
            Dialect::Anthropic | Dialect::Gemini => root.to_owned(),
        }
    }

    /// The path a streaming request for `model` goes to.
    pub fn stream_path(self, model: &str) -> String {
        match self {
            Dialect::Anthropic => "/v1/messages".into(),
            Dialect::OpenAiResponses => "/v1/responses".into(),
            Dialect::OpenAiChat => "/v1/chat/completions".into(),
            Dialect::Gemini => format!("/v1beta/models/{model}:streamGenerateContent?alt=sse"),
        }
    }

    /// The header that carries the key, and its value for `key`.
    pub fn auth_header(self, key: &str) -> (&'static str, String) {
        match self {
            Dialect::Anthropic => ("x-api-key", key.to_owned()),
            Dialect::OpenAiResponses | Dialect::OpenAiChat => {
                ("authorization", format!("Bearer {key}"))
            }
            Dialect::Gemini => ("x-goog-api-key", key.to_owned()),
        }
    }

    /// An answer streamed as these text pieces.
    pub fn text(self, pieces: &[&str]) -> Reply {
        self.turn(pieces, &[])
    }

    /// An answer streamed as these text pieces and cut off at the model's output limit,
    /// ending as each protocol says so (`length`, `max_tokens`, `MAX_TOKENS`, an
    /// incomplete response for `max_output_tokens`).
    pub fn cut_off(self, pieces: &[&str]) -> Reply {
        let endings: &[(&str, &str)] = match self {
            Dialect::OpenAiChat => &[(r#""finish_reason":"stop""#, r#""finish_reason":"length""#)],
            Dialect::Anthropic => &[(
                r#""stop_reason":"end_turn""#,
                r#""stop_reason":"max_tokens""#,
            )],
            Dialect::Gemini => &[(r#""finishReason":"STOP""#, r#""finishReason":"MAX_TOKENS""#)],
            Dialect::OpenAiResponses => &[
                ("event: response.completed", "event: response.incomplete"),
                (
                    r#""type":"response.completed","response":{"id":"resp_test","status":"completed""#,
                    r#""type":"response.incomplete","response":{"id":"resp_test","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}"#,
                ),
            ],
        };
        let chunks = self
            .turn_events(pieces, &[], true)
            .into_iter()
            .map(|mut chunk| {
                for (from, to) in endings {
                    chunk = chunk.replace(from, to);
                }
                Chunk::Send(chunk)
            })
            .collect();
        Reply::Stream(chunks)
    }

    /// Text, then tool calls, as one model turn.
    pub fn turn(self, pieces: &[&str], calls: &[ScriptedCall]) -> Reply {
        Reply::Stream(
            self.turn_events(pieces, calls, true)
                .into_iter()
                .map(Chunk::Send)
                .collect(),
        )
    }

    /// An answer that reasons first: Anthropic's thinking block with `opaque` as its
    /// signature, or an OpenAI Responses reasoning item with `opaque` as its encrypted
    /// content; then the text pieces. (Chat Completions and Gemini: the text alone, as
    /// Conduit replays no reasoning to them.)
    pub fn reasoned_text(self, reasoning: &str, opaque: &str, pieces: &[&str]) -> Reply {
        let mut events = self.turn_events(pieces, &[], true);
        let reasoning_events = match self {
            Dialect::Anthropic => {
                // The text block follows at index 1.
                for event in &mut events {
                    *event = event.replace("\"index\":0", "\"index\":1");
                }
                vec![
                    event(
                        "content_block_start",
                        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
                    ),
                    event(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": reasoning}}),
                    ),
                    event(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": opaque}}),
                    ),
                    event(
                        "content_block_stop",
                        json!({"type": "content_block_stop", "index": 0}),
                    ),
                ]
            }
            Dialect::OpenAiResponses => vec![
                event(
                    "response.output_item.added",
                    json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "rs_test", "type": "reasoning", "summary": []}}),
                ),
                event(
                    "response.reasoning_summary_text.delta",
                    json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_test", "output_index": 0, "summary_index": 0, "delta": reasoning}),
                ),
                event(
                    "response.output_item.done",
                    json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "rs_test", "type": "reasoning", "summary": [{"type": "summary_text", "text": reasoning}], "encrypted_content": opaque}}),
                ),
            ],
            Dialect::OpenAiChat | Dialect::Gemini => Vec::new(),
        };
        // After the response's first event (`message_start`, `response.created`).
        let rest = events.split_off(1.min(events.len()));
        events.extend(reasoning_events);
        events.extend(rest);
        Reply::Stream(events.into_iter().map(Chunk::Send).collect())
    }

    /// Text pieces, then the service's error event, as it sends one mid-answer.
    pub fn error_mid_stream(self, pieces: &[&str], message: &str) -> Reply {
        let mut chunks: Vec<Chunk> = self
            .turn_events(pieces, &[], false)
            .into_iter()
            .map(Chunk::Send)
            .collect();
        let error = match self {
            Dialect::Anthropic => event(
                "error",
                json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}),
            ),
            Dialect::OpenAiResponses => event(
                "response.failed",
                json!({"type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error", "message": message}}}),
            ),
            Dialect::OpenAiChat => {
                data(json!({"error": {"message": message, "type": "server_error"}}))
            }
            Dialect::Gemini => {
                data(json!({"error": {"code": 500, "message": message, "status": "INTERNAL"}}))
            }
        };
        chunks.push(Chunk::Send(error));
        Reply::Stream(chunks)
    }

    /// Text pieces, then the failure as the service really sends it where that differs
    /// from its documentation: OpenAI Responses' `error` event with its fields nested
    /// under `error`; OpenRouter's error chunk with the upstream's words in
    /// `metadata.raw`; Anthropic's error event with a `request_id`; Gemini cutting the
    /// answer off with a finish reason and a `finishMessage`.
    pub fn error_as_sent(self, pieces: &[&str], message: &str) -> Reply {
        let mut chunks: Vec<Chunk> = self
            .turn_events(pieces, &[], false)
            .into_iter()
            .map(Chunk::Send)
            .collect();
        let error = match self {
            Dialect::Anthropic => event(
                "error",
                json!({"type": "error", "error": {"details": null, "type": "api_error", "message": message}, "request_id": "req_test"}),
            ),
            Dialect::OpenAiResponses => event(
                "error",
                json!({"type": "error", "sequence_number": 9, "error": {"type": "server_error", "code": "server_error", "message": message, "param": null}}),
            ),
            Dialect::OpenAiChat => data(
                json!({"id": "gen-test", "object": "chat.completion.chunk", "error": {"code": 502, "message": "Provider returned error", "metadata": {"raw": message, "provider_name": "Example"}}, "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]}),
            ),
            Dialect::Gemini => data(
                json!({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "MALFORMED_FUNCTION_CALL", "finishMessage": message, "index": 0}], "modelVersion": "gemini-test"}),
            ),
        };
        chunks.push(Chunk::Send(error));
        Reply::Stream(chunks)
    }

    /// An HTTP error whose body is an HTML page (a proxy's or CDN's), not the service's
    /// JSON.
    pub fn html_error(self, status: u16, title: &str) -> Reply {
        Reply::Error {
            status,
            headers: Vec::new(),
            body: format!(
                "<!DOCTYPE html>\n<html>\n<head><title>{title}</title></head>\n<body><h1>{title}</h1><p>Please try again later.</p></body>\n</html>\n"
            ),
        }
    }

    /// Text pieces, then silence on an open connection.
    pub fn stall_after(self, pieces: &[&str]) -> Reply {
        let mut chunks: Vec<Chunk> = self
            .turn_events(pieces, &[], false)
            .into_iter()
            .map(Chunk::Send)
            .collect();
        chunks.push(Chunk::Hang);
        Reply::Stream(chunks)
    }

    /// An HTTP error with the service's own body.
    pub fn http_error(self, status: u16, message: &str, retry_after: Option<&str>) -> Reply {
        let body = match self {
            Dialect::Anthropic => {
                let kind = match status {
                    401 => "authentication_error",
                    429 => "rate_limit_error",
                    529 => "overloaded_error",
                    500..=599 => "api_error",
                    _ => "invalid_request_error",
                };
                json!({"type": "error", "error": {"type": kind, "message": message}})
            }
            Dialect::OpenAiResponses | Dialect::OpenAiChat => {
                json!({"error": {"message": message, "type": "error", "param": null, "code": null}})
            }
            Dialect::Gemini => {
                json!({"error": {"code": status, "message": message, "status": "ERROR"}})
            }
        };
        Reply::Error {
            status,
            headers: retry_after
                .map(|v| vec![("retry-after".to_owned(), v.to_owned())])
                .unwrap_or_default(),
            body: body.to_string(),
        }
    }

    /// The SSE events of one model turn; `complete` adds the events that end it.
    fn turn_events(self, pieces: &[&str], calls: &[ScriptedCall], complete: bool) -> Vec<String> {
        match self {
            Dialect::Anthropic => anthropic_turn(pieces, calls, complete),
            Dialect::OpenAiResponses => responses_turn(pieces, calls, complete),
            Dialect::OpenAiChat => chat_turn(pieces, calls, complete),
            Dialect::Gemini => gemini_turn(pieces, calls, complete),
        }
    }
}

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn data(data: Value) -> String {
    format!("data: {data}\n\n")
}

fn anthropic_turn(pieces: &[&str], calls: &[ScriptedCall], complete: bool) -> Vec<String> {
    let mut out = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_test", "type": "message", "role": "assistant", "content": [], "model": "claude-test", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 12, "output_tokens": 1}}}),
    )];
    let mut index = 0;
    if !pieces.is_empty() {
        out.push(event("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})));
        out.push(event("ping", json!({"type": "ping"})));
        for piece in pieces {
            out.push(event("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}})));
        }
        if !complete {
            return out;
        }
        out.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        index = 1;
    }
    for call in calls {
        out.push(event("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}})));
        let arguments = call.arguments.to_string();
        let (first, second) = arguments.split_at(arguments.len() / 2);
        for part in ["", first, second] {
            out.push(event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}})));
        }
        out.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    out.push(event("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 20}})));
    out.push(event("message_stop", json!({"type": "message_stop"})));
    out
}

fn responses_turn(pieces: &[&str], calls: &[ScriptedCall], complete: bool) -> Vec<String> {
    let mut out = vec![event(
        "response.created",
        json!({"type": "response.created", "response": {"id": "resp_test", "object": "response", "status": "in_progress", "output": []}}),
    )];
    if !pieces.is_empty() {
        out.push(event("response.output_item.added", json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "msg_test", "type": "message", "status": "in_progress", "role": "assistant", "content": []}})));
        for piece in pieces {
            out.push(event("response.output_text.delta", json!({"type": "response.output_text.delta", "item_id": "msg_test", "output_index": 0, "content_index": 0, "delta": piece})));
        }
        if !complete {
            return out;
        }
        out.push(event("response.output_item.done", json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "msg_test", "type": "message", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": pieces.concat()}]}})));
    }
    for (n, call) in calls.iter().enumerate() {
        let item_id = format!("fc_{n}");
        let arguments = call.arguments.to_string();
        out.push(event("response.output_item.added", json!({"type": "response.output_item.added", "output_index": n + 1, "item": {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": call.id, "name": call.name}})));
        out.push(event("response.function_call_arguments.delta", json!({"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": n + 1, "delta": arguments})));
        out.push(event("response.function_call_arguments.done", json!({"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": n + 1, "arguments": arguments})));
        out.push(event("response.output_item.done", json!({"type": "response.output_item.done", "output_index": n + 1, "item": {"id": item_id, "type": "function_call", "status": "completed", "arguments": arguments, "call_id": call.id, "name": call.name}})));
    }
    out.push(event("response.completed", json!({"type": "response.completed", "response": {"id": "resp_test", "status": "completed", "usage": {"input_tokens": 12, "output_tokens": 20, "total_tokens": 32}}})));
    out
}

fn chat_turn(pieces: &[&str], calls: &[ScriptedCall], complete: bool) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        data(
            json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1694268190, "model": "gpt-test", "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]}),
        )
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for piece in pieces {
        out.push(chunk(json!({"content": piece}), Value::Null));
    }
    if !complete {
        return out;
    }
    for (index, call) in calls.iter().enumerate() {
        out.push(chunk(
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}]}),
            Value::Null,
        ));
        out.push(chunk(
            json!({"tool_calls": [{"index": index, "function": {"arguments": call.arguments.to_string()}}]}),
            Value::Null,
        ));
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    out.push(chunk(json!({}), json!(finish)));
    out.push(data(json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1694268190, "model": "gpt-test", "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 20, "total_tokens": 32}})));
    out.push("data: [DONE]\n\n".to_owned());
    out
}

fn gemini_turn(pieces: &[&str], calls: &[ScriptedCall], complete: bool) -> Vec<String> {
    let chunk = |parts: Value, finish: Option<&str>| {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(reason) = finish {
            candidate["finishReason"] = json!(reason);
        }
        data(
            json!({"candidates": [candidate], "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 20, "totalTokenCount": 32}, "modelVersion": "gemini-test"}),
        )
    };
    let mut out: Vec<String> = pieces
        .iter()
        .map(|piece| chunk(json!([{"text": piece}]), None))
        .collect();
    if !complete {
        return out;
    }
    let parts: Vec<Value> = calls
        .iter()
        .map(|call| {
            json!({"functionCall": {"id": call.id, "name": call.name, "args": call.arguments}, "thoughtSignature": format!("sig-{}", call.id)})
        })
        .collect();
    out.push(chunk(json!(parts), Some("STOP")));
    out
}
