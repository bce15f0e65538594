//! `conduit mcp serve` over stdio and streamable HTTP: the official TypeScript and Python
//! SDK clients list and call tools, read a conversation, get prompts and complete their
//! arguments, and cancel a call; the HTTP endpoint refuses a foreign `Origin`, a missing
//! or wrong token and a non-loopback bind; and the official conformance suite
//! (0.2.0-alpha.12) runs its server scenarios for 2025-11-25 and 2026-07-28.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use conduit_core::content::{Block, Message, Role};
use conduit_e2e::binary;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long the server may take to say where it listens.
const READY: Duration = Duration::from_secs(30);

fn mcp_servers() -> PathBuf {
    conduit_e2e::workspace_root().join("tests/mcp-servers")
}

/// A PNG the `test__image` tool returns.
fn write_png(dir: &Path) -> PathBuf {
    let image = image::RgbImage::from_pixel(4, 3, image::Rgb([10, 200, 10]));
    let path = dir.join("green.png");
    image.save(&path).unwrap();
    path
}

/// A home with one conversation in its history; the conversation's id.
fn home_with_conversation(home: &Path) -> String {
    let store = conduit_store::Store::open(
        &home.join("history.db"),
        conduit_store::FileMediaStore::new(home.join("media")),
    )
    .unwrap();
    let id = store.create_conversation(Some("test"), Some("m")).unwrap();
    store
        .add_message(
            &id,
            &Message::user_text("What is the capital of Norway?"),
            conduit_store::MessageStatus::Complete,
        )
        .unwrap();
    store
        .add_message(
            &id,
            &Message {
                role: Role::Assistant,
                blocks: vec![Block::text("Oslo is the capital of Norway.")],
            },
            conduit_store::MessageStatus::Complete,
        )
        .unwrap();
    id
}

fn conduit_command(home: &Path) -> Command {
    let mut command = Command::new(binary("conduit").unwrap());
    command
        .env("CONDUIT_HOME", home)
        .env("CONDUIT_SECRET_STORE", "file")
        .env("CONDUIT_LOG", "trace")
        .env("CONDUIT_TEST_TOOLS", "1")
        .kill_on_drop(true);
    command
}

/// `conduit mcp serve --http` running: its URL, and its token when it printed one.
struct Served {
    url: String,
    token: Option<String>,
    _child: Child,
}

async fn serve_http(home: &Path, extra_env: &[(&str, &str)]) -> Served {
    let mut command = conduit_command(home);
    command
        .args(["mcp", "serve", "--http", "127.0.0.1:0"])
        .envs(extra_env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = command.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (url, token) = tokio::time::timeout(READY, async {
        let first = lines.next_line().await.unwrap().unwrap();
        let url = first
            .strip_prefix("Serving MCP at ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_owned();
        // A new token is announced on the next lines; a known one is never printed.
        let mut token = None;
        if let Ok(Ok(Some(line))) =
            tokio::time::timeout(Duration::from_millis(500), lines.next_line()).await
        {
            assert!(line.starts_with("A bearer token was made"), "{line}");
            token = Some(lines.next_line().await.unwrap().unwrap());
        }
        (url, token)
    })
    .await
    .expect("the server said where it listens");
    Served {
        url,
        token,
        _child: child,
    }
}

/// Runs a client to its end: the JSON it printed last, and its stderr.
async fn run_json_and_stderr(command: &mut Command) -> (Value, String) {
    let out = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("the client finished")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    (value, String::from_utf8_lossy(&out.stderr).into_owned())
}

async fn run_json(command: &mut Command) -> Value {
    run_json_and_stderr(command).await.0
}

fn node22() -> PathBuf {
    let node = mcp_servers().join("node_modules/.bin/node");
    assert!(node.is_file(), "run `make test`: Node 22 is missing");
    node
}

fn python() -> PathBuf {
    let python = mcp_servers().join(".venv/bin/python");
    assert!(
        python.is_file(),
        "run `make test`: the Python SDK is missing"
    );
    python
}

/// Every built-in tool (switched on by default) and the end-to-end test tools, sorted.
fn served_tools() -> Value {
    json!([
        "convert_time",
        "get_image",
        "list_conversations",
        "read_conversation",
        "render_chart",
        "search_history",
        "test__echo",
        "test__image",
        "test__sleep",
        "time_now"
    ])
}

fn png_of(result: &Value) -> image::DynamicImage {
    use base64::Engine;
    let block = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "image")
        .unwrap_or_else(|| panic!("no image in {result}"));
    assert_eq!(block["mimeType"], "image/png");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(block["data"].as_str().unwrap())
        .unwrap();
    image::load_from_memory(&bytes).unwrap()
}

fn assert_typescript_saw(out: &Value, conversation: &str) {
    assert_eq!(out["server"]["name"], "conduit");
    assert_eq!(
        out["tools"],
        served_tools(),
        "the built-in tools and the test tools"
    );
    let chart = png_of(&out["chart"]);
    assert_eq!(
        (chart.width(), chart.height()),
        (1200, 700),
        "the chart is a PNG that decodes"
    );
    assert_eq!(out["echo"]["content"][0]["text"], "hello from ts");
    assert_eq!(out["echo"]["isError"], false);
    let png = png_of(&out["image"]);
    assert_eq!((png.width(), png.height()), (4, 3));
    // A tool that fails is an error result, not a protocol error.
    assert_eq!(out["badArgs"]["isError"], true, "{}", out["badArgs"]);
    assert_eq!(
        out["resources"],
        json!([format!("conduit://conversation/{conversation}")])
    );
    assert_eq!(
        out["templates"],
        json!(["conduit://conversation/{id}", "conduit://media/{hash}"])
    );
    let markdown = &out["conversation"]["contents"][0];
    assert_eq!(markdown["mimeType"], "text/markdown");
    let text = markdown["text"].as_str().unwrap();
    assert!(
        text.contains("What is the capital of Norway?") && text.contains("Oslo is the capital"),
        "{text}"
    );
    let media = &out["media"]["contents"][0];
    assert_eq!(media["mimeType"], "image/png");
    let stored = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(media["blob"].as_str().unwrap())
            .unwrap()
    };
    assert_eq!(image::load_from_memory(&stored).unwrap().width(), 4);
    // Unknown or hostile URIs are clear errors, never a read.
    for answer in out["badReads"].as_array().unwrap() {
        let answer = answer.as_str().unwrap();
        assert!(answer.contains("not found"), "{answer}");
    }
    let without = out["promptWithoutArgument"].as_str().unwrap();
    assert!(
        without.contains("\"conversation\" is required"),
        "{without}"
    );
    assert_eq!(
        out["prompts"],
        json!(["continue_conversation", "summarize_conversation"])
    );
    let messages = out["prompt"]["messages"].as_array().unwrap();
    assert_eq!(messages[0]["content"]["type"], "resource");
    assert!(
        messages[0]["content"]["resource"]["text"]
            .as_str()
            .unwrap()
            .contains("Oslo")
    );
    assert!(
        messages[1]["content"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Summarize")
    );
    assert_eq!(
        out["completion"]["completion"]["values"],
        json!([conversation])
    );
    let cancelled = out["cancelled"].as_str().unwrap();
    assert!(cancelled.contains("the user stopped it"), "{cancelled}");
    assert!(out["cancelSeconds"].as_f64().unwrap() < 60.0);
    assert_eq!(out["after"]["content"][0]["text"], "still here");
}

fn assert_python_saw(out: &Value) {
    assert_eq!(
        out["tools"],
        served_tools(),
        "the built-in tools and the test tools"
    );
    let chart = png_of(&out["chart"]);
    assert_eq!(
        (chart.width(), chart.height()),
        (1200, 700),
        "the chart is a PNG that decodes"
    );
    assert_eq!(out["echo"]["content"][0]["text"], "hello from python");
    let png = png_of(&out["image"]);
    assert_eq!((png.width(), png.height()), (4, 3));
    assert!(
        out["conversation"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Oslo is the capital")
    );
    let messages = out["prompt"]["messages"].as_array().unwrap();
    assert!(
        messages[1]["content"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Continue")
    );
}

/// Waits (bounded) until the server's log says the cancelled call's tool stopped (by the
/// client's `notifications/cancelled`, or with the session when the client closed it
/// first: both drop the call).
async fn assert_logged_cancel(home: &Path) {
    let log = home.join("logs");
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let text: String = std::fs::read_dir(&log)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .collect();
            if text.contains("a served tool call stopped: ") {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(seen.is_ok(), "the server never logged the cancellation");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_uses_conduit_over_stdio() {
    let home = tempfile::tempdir().unwrap();
    let conversation = home_with_conversation(home.path());
    let png = write_png(home.path());
    let mut command = Command::new(node22());
    command
        .arg(mcp_servers().join("fixtures/serve_client.mjs"))
        .arg("stdio")
        .arg(binary("conduit").unwrap())
        .arg(&png)
        .arg(&conversation)
        .env("CONDUIT_HOME", home.path())
        .env("CONDUIT_SECRET_STORE", "file")
        .env("CONDUIT_LOG", "trace")
        .env("CONDUIT_TEST_TOOLS", "1")
        .env("CONDUIT_SERVE_VERBOSE", "1");
    let (out, stderr) = run_json_and_stderr(&mut command).await;
    assert_typescript_saw(&out, &conversation);
    // The server's stderr (`-v`) reaches the client's: the cancelled tool stopped.
    assert!(stderr.contains("a served tool call stopped: "), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_uses_conduit_over_http() {
    let home = tempfile::tempdir().unwrap();
    let conversation = home_with_conversation(home.path());
    let png = write_png(home.path());
    let served = serve_http(home.path(), &[]).await;
    let token = served.token.clone().expect("a new token is shown");
    let mut command = Command::new(node22());
    command
        .arg(mcp_servers().join("fixtures/serve_client.mjs"))
        .args(["http", &served.url, &token])
        .arg(&png)
        .arg(&conversation);
    let out = run_json(&mut command).await;
    assert_typescript_saw(&out, &conversation);
    assert_logged_cancel(home.path()).await;
    // The token is never written to the log.
    let logs: String = std::fs::read_dir(home.path().join("logs"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect();
    assert!(!logs.contains(&token));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_uses_conduit_over_stdio_and_http() {
    let home = tempfile::tempdir().unwrap();
    let conversation = home_with_conversation(home.path());
    let png = write_png(home.path());
    let script = mcp_servers().join("fixtures/serve_client.py");

    let mut command = Command::new(python());
    command
        .arg(&script)
        .arg("stdio")
        .arg(binary("conduit").unwrap())
        .arg(&png)
        .arg(&conversation)
        .env("CONDUIT_HOME", home.path())
        .env("CONDUIT_SECRET_STORE", "file")
        .env("CONDUIT_TEST_TOOLS", "1");
    let out = run_json(&mut command).await;
    assert_python_saw(&out);

    let served = serve_http(home.path(), &[]).await;
    let token = served.token.clone().expect("a new token is shown");
    let mut command = Command::new(python());
    command
        .arg(&script)
        .args(["http", &served.url, &token])
        .arg(&png)
        .arg(&conversation);
    let out = run_json(&mut command).await;
    assert_python_saw(&out);
    // The Python SDK probes server/discover first: this is the stateless era.
    assert_eq!(out["protocol"], "2026-07-28", "{out}");
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}
    }})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_endpoint_refuses_strangers() {
    let home = tempfile::tempdir().unwrap();
    let served = serve_http(home.path(), &[]).await;
    let token = served.token.clone().expect("a new token is shown");
    let http = reqwest::Client::new();
    let post = |origin: Option<&str>, auth: Option<String>| {
        let mut request = http
            .post(&served.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(initialize().to_string());
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        request.send()
    };
    let ok = post(None, Some(format!("Bearer {token}"))).await.unwrap();
    assert_eq!(ok.status(), 200);
    assert!(ok.headers().get("mcp-session-id").is_some());

    let no_token = post(None, None).await.unwrap();
    assert_eq!(no_token.status(), 401);
    assert_eq!(no_token.headers()["www-authenticate"], "Bearer");
    let wrong = post(None, Some("Bearer not-the-token".into()))
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);

    let foreign = post(
        Some("https://evil.example"),
        Some(format!("Bearer {token}")),
    )
    .await
    .unwrap();
    assert_eq!(foreign.status(), 403);
    let same_machine = post(
        Some("http://localhost:5173"),
        Some(format!("Bearer {token}")),
    )
    .await
    .unwrap();
    assert_eq!(same_machine.status(), 200);

    // DNS rebinding: a foreign name resolving to this machine.
    let port = served
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let rebound = http
        .post(&served.url)
        .header("host", format!("evil.example:{port}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .body(initialize().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);

    // A second start keeps the token and does not print it again.
    drop(served);
    let again = serve_http(home.path(), &[]).await;
    assert_eq!(again.token, None);
    let ok = http
        .post(&again.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .body(initialize().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_endpoint_keeps_a_bounded_number_of_sessions() {
    let home = tempfile::tempdir().unwrap();
    let served = serve_http(home.path(), &[]).await;
    let token = served.token.clone().expect("a new token is shown");
    let http = reqwest::Client::new();
    let open = || {
        http.post(&served.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {token}"))
            .body(initialize().to_string())
            .send()
    };
    let mut sessions = Vec::new();
    for n in 0..conduit_mcp::http::MAX_SESSIONS {
        let response = open().await.unwrap();
        assert_eq!(response.status(), 200, "session {n}");
        sessions.push(response.headers()["mcp-session-id"].clone());
    }
    // One more is refused, saying why and what to do.
    let refused = open().await.unwrap();
    assert_eq!(refused.status(), 500);
    assert!(refused.headers().get("mcp-session-id").is_none());
    let text = refused.text().await.unwrap();
    assert!(
        text.contains("64 MCP sessions are open") && text.contains("end one"),
        "{text}"
    );
    // The sessions already open keep working.
    let listed = http
        .post(&served.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .header("mcp-session-id", sessions[0].clone())
        .header("mcp-protocol-version", "2025-11-25")
        .body(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
    let answer = listed.text().await.unwrap();
    assert!(
        answer.contains(r#""id":2"#) && answer.contains(r#""result""#),
        "{answer}"
    );
    // A client that ends its session frees its place.
    let ended = http
        .delete(&served.url)
        .header("authorization", format!("Bearer {token}"))
        .header("mcp-session-id", sessions[1].clone())
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert!(ended.status().is_success(), "{}", ended.status());
    let again = open().await.unwrap();
    assert_eq!(again.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_address_needs_an_explicit_flag() {
    let home = tempfile::tempdir().unwrap();
    let refused = |args: &'static [&'static str]| {
        let home = home.path().to_owned();
        async move {
            let out = conduit_command(&home)
                .args(["mcp", "serve", "--http"])
                .args(args)
                .output()
                .await
                .unwrap();
            assert!(!out.status.success());
            String::from_utf8_lossy(&out.stderr).into_owned()
        }
    };
    let stderr = refused(&["192.0.2.1:0"]).await;
    assert!(
        stderr.contains("not a loopback address") && stderr.contains("--allow-remote"),
        "{stderr}"
    );
    // A wildcard address even with the flag: other machines' requests would name an
    // address Conduit cannot know to accept, each refused while it said it was reachable.
    let stderr = refused(&["0.0.0.0:8765", "--allow-remote"]).await;
    assert!(
        stderr.contains("every address of this machine") && stderr.contains("192.168.1.5:8765"),
        "{stderr}"
    );
    // Nothing was made: no token for an endpoint that never ran.
    assert!(!home.path().join("secrets.json").exists());
}

/// Forwards every request to `target`, adding the bearer token: the conformance suite
/// cannot send one, and the server under test keeps requiring it.
async fn token_proxy(target: String, token: String) -> (String, tokio::task::JoinHandle<()>) {
    use axum::body::Body;
    use axum::extract::Request;
    use axum::response::Response;
    let http = reqwest::Client::new();
    let app = axum::Router::new().fallback(move |request: Request| {
        let (http, target, token) = (http.clone(), target.clone(), token.clone());
        async move {
            let (parts, body) = request.into_parts();
            let body = axum::body::to_bytes(body, usize::MAX)
                .await
                .unwrap_or_default();
            let mut forwarded = http.request(parts.method, format!("{target}{}", parts.uri.path()));
            for (name, value) in &parts.headers {
                forwarded = forwarded.header(name, value);
            }
            let answer = forwarded
                .header("authorization", format!("Bearer {token}"))
                .body(body)
                .send()
                .await;
            match answer {
                Ok(answer) => {
                    let mut response = Response::builder().status(answer.status());
                    for (name, value) in answer.headers() {
                        response = response.header(name, value);
                    }
                    response
                        .body(Body::from_stream(answer.bytes_stream()))
                        .unwrap()
                }
                Err(e) => Response::builder()
                    .status(502)
                    .body(Body::from(e.to_string()))
                    .unwrap(),
            }
        }
    });
    conduit_e2e::serve_loopback(app).await.unwrap()
}

/// The server scenarios a requirement set of the suite lists as required.
fn required_scenarios(requirements: &str) -> Vec<String> {
    let file = mcp_servers().join(format!(
        "node_modules/conformance-next/requirements/{requirements}.yaml"
    ));
    let text = std::fs::read_to_string(&file).unwrap();
    let mut in_server = false;
    let mut names = Vec::new();
    for line in text.lines() {
        if !line.starts_with(' ') && !line.starts_with('#') && !line.is_empty() {
            in_server = line.trim() == "server:";
            continue;
        }
        if in_server && let Some(name) = line.strip_prefix("  - ") {
            names.push(name.trim().to_owned());
        }
    }
    assert!(names.len() > 20, "{names:?}");
    names
}

/// Runs the suite's server scenarios of `requirements` against `conduit mcp serve --http`
/// serving the fixtures; every required scenario must pass.
async fn conformance(requirements: &str) {
    let home = tempfile::tempdir().unwrap();
    let served = serve_http(home.path(), &[("CONDUIT_MCP_CONFORMANCE", "1")]).await;
    let origin = served.url.trim_end_matches("/mcp").to_owned();
    let (proxy, proxy_task) = token_proxy(origin, served.token.clone().unwrap()).await;
    let suite = mcp_servers().join("node_modules/conformance-next/dist/index.js");
    assert!(
        suite.is_file(),
        "run `make test`: the conformance suite is missing"
    );
    let mut command = Command::new(node22());
    command
        .arg(&suite)
        .args([
            "server",
            "--url",
            &format!("{}/mcp", proxy.trim_end_matches('/')),
        ])
        .args(["--requirements", requirements]);
    let out = tokio::time::timeout(Duration::from_secs(600), command.output())
        .await
        .expect("the suite finished")
        .unwrap();
    proxy_task.abort();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = text
        .split("=== SUMMARY ===")
        .nth(1)
        .unwrap_or(&text)
        .to_owned();
    println!("conformance {requirements}:{summary}");
    let required = required_scenarios(requirements);
    let failing: Vec<&String> = required
        .iter()
        .filter(|name| {
            !summary
                .lines()
                .any(|line| line.starts_with(&format!("✓ {name}: ")) && line.ends_with(" 0 failed"))
        })
        .collect();
    assert!(
        failing.is_empty(),
        "{requirements}: required scenarios not passing: {failing:?}\n{summary}"
    );
    // Beyond the required set, the suite's pending and newer scenarios pass too; only the
    // optional tasks extension (SEP-2663), which Conduit does not implement, fails.
    let other_failures: Vec<&str> = summary
        .lines()
        .filter(|line| line.starts_with("✗ ") && !line.starts_with("✗ tasks-"))
        .collect();
    assert!(
        other_failures.is_empty(),
        "{requirements}: {other_failures:?}\n{summary}"
    );
    assert!(out.status.success(), "{requirements}: {summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_passes_for_2025_11_25() {
    conformance("2025-11-25").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_passes_for_2026_07_28() {
    conformance("2026-07-28").await;
}
