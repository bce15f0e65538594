//! What MCP costs: connect + initialize + list tools; ten servers started at once against
//! the slowest alone; Conduit's overhead per tool call over a raw JSON-RPC round trip on
//! the same kind of pipe; and 1,000 `echo` calls through Conduit beside the official
//! TypeScript and Python SDK clients, against the same server in the same run; and the
//! memory a 100 MB tool output costs, in the library and through the release `conduit`
//! binary as a person runs it (`conduit mcp call`, and `conduit chat` with a model that
//! calls the tool).
//! Run with `make bench` (release build, after `make setup-test`). Prints a report.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use conduit_core::content::{MediaRef, ResultPart};
use conduit_core::media::{MediaError, MediaStore};
use conduit_mcp::client::{Asks, Connection};
use conduit_mcp::config::{ServerSpec, Transport};
use conduit_mcp::result::convert_off_thread;
use conduit_mcp::runtime::{McpRuntime, RuntimeOptions};
use conduit_mcp::servers::ServerState;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const CALLS: usize = 1000;

/// This crate's folder, from where cargo runs the bench (a binary shared with a checkout
/// elsewhere keeps the path it was built at).
fn crate_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

fn root() -> PathBuf {
    crate_dir().join("../..")
}

fn everything() -> PathBuf {
    root().join(
        "tests/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    )
}

fn stdio(command: &str, args: Vec<String>) -> ServerSpec {
    ServerSpec {
        transport: Transport::Stdio {
            command: command.into(),
            args,
            env: BTreeMap::new(),
            cwd: None,
        },
        timeout: None,
        secrets: Default::default(),
        legacy_sse: false,
        era: Default::default(),
        oauth: Default::default(),
        roots: None,
    }
}

fn spec() -> ServerSpec {
    stdio(
        "node",
        vec![everything().display().to_string(), "stdio".into()],
    )
}

fn python() -> String {
    root()
        .join("tests/mcp-servers/.venv/bin/python")
        .display()
        .to_string()
}

fn minimal() -> ServerSpec {
    let script = crate_dir().join("benches/servers/minimal.py");
    stdio("python3", vec![script.display().to_string()])
}

/// Ten servers of one kind at once, against the slowest of five single starts.
async fn ten_at_once(kind: &str, spec: fn() -> ServerSpec) {
    let mut alone = Duration::ZERO;
    for _ in 0..5 {
        let started = Instant::now();
        let connection =
            Connection::connect(&spec(), Duration::from_secs(30), Asks::nobody("bench"))
                .await
                .unwrap();
        connection.tools().await.unwrap();
        alone = alone.max(started.elapsed());
        connection.shutdown().await;
    }
    // The same ten servers the app would run, from an mcpServers file.
    let Transport::Stdio { command, args, .. } = spec().transport else {
        unreachable!("the bench servers are stdio servers")
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcp_servers.json");
    let entries: serde_json::Map<String, Value> = (0..10)
        .map(|n| (format!("s{n}"), json!({"command": command, "args": args})))
        .collect();
    std::fs::write(&file, json!({"mcpServers": entries}).to_string()).unwrap();
    let started = Instant::now();
    let servers = McpRuntime::start(RuntimeOptions::new(&file, Duration::from_secs(60)))
        .await
        .unwrap();
    let ten = started.elapsed();
    let ready = servers
        .statuses()
        .iter()
        .filter(|s| matches!(s.state, ServerState::Ready { .. }))
        .count();
    servers.shutdown().await;
    // The machine's own limit: the same ten processes started bare, run until they see
    // their input end.
    let Transport::Stdio { command, args, .. } = spec().transport else {
        unreachable!()
    };
    let bare_started = Instant::now();
    let children: Vec<_> = (0..10)
        .map(|_| {
            std::process::Command::new(&command)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        child.wait().unwrap();
    }
    let bare = bare_started.elapsed();
    println!(
        "10 {kind} started at once: {:.0} ms ({ready} ready); the slowest single start: {:.0} ms (budget: within it + 50 ms); the same 10 processes started bare: {:.0} ms",
        ms(ten),
        ms(alone),
        ms(bare)
    );
}

/// Keeps long outputs as files in a temporary folder, as the host's media store does.
struct Files(tempfile::TempDir);

impl MediaStore for Files {
    fn put(&self, bytes: &[u8], mime: Option<&str>) -> Result<MediaRef, MediaError> {
        let name = format!("{}", self.0.path().read_dir().unwrap().count());
        std::fs::write(self.0.path().join(&name), bytes).unwrap();
        Ok(MediaRef {
            hash: name,
            mime: mime.unwrap_or_default().into(),
            bytes: bytes.len() as u64,
            width: None,
            height: None,
        })
    }
    fn load(&self, media: &MediaRef) -> Result<Vec<u8>, MediaError> {
        Err(MediaError::Missing {
            hash: media.hash.clone(),
        })
    }
    fn reference(&self, _hash: &str) -> Option<MediaRef> {
        None
    }
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The memory a huge tool output costs: peak RSS above the level before the call.
async fn huge_output(mb: u64) {
    let fixture = root().join("tests/mcp-servers/fixtures/dynamic_tools.py");
    let spec = stdio(
        &python(),
        vec![fixture.display().to_string(), "bench".into()],
    );
    let connection = Connection::connect(&spec, Duration::from_secs(30), Asks::nobody("bench"))
        .await
        .unwrap();
    let before = status_kib("VmRSS:");
    // Resets the peak (VmHWM) to the current size, so the figure is this call's alone.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let mut arguments = serde_json::Map::new();
    arguments.insert("mb".into(), json!(mb));
    let started = Instant::now();
    let result = connection
        .call_tool(
            "big_output",
            arguments,
            Arc::new(|_| {}),
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap();
    let media: Arc<dyn MediaStore> = Arc::new(Files(tempfile::tempdir().unwrap()));
    let output = convert_off_thread(result, media).await.unwrap();
    let took = started.elapsed();
    let peak = status_kib("VmHWM:");
    let kept: u64 = output
        .parts
        .iter()
        .map(|part| match part {
            ResultPart::LongText { media, .. } => media.bytes,
            _ => 0,
        })
        .sum();
    println!(
        "a {mb} MB tool output (Python SDK: sent as text and again as structuredContent, {} MB kept as files): {:.0} ms, peak memory {:.0} MB above the {:.0} MB before",
        kept / 1_000_000,
        ms(took),
        peak.saturating_sub(before) as f64 / 1024.0,
        before as f64 / 1024.0
    );
    connection.shutdown().await;
}

/// The release `conduit` binary (`make bench` builds it first).
fn conduit_binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let binary = target.join("release/conduit");
    assert!(
        binary.is_file(),
        "{} is missing: run `cargo build --workspace --release --bin conduit` (make bench does)",
        binary.display()
    );
    binary
}

/// A Conduit home whose mcpServers file names the Python SDK fixture as `dyn`.
fn home_with_fixture() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let fixture = root().join("tests/mcp-servers/fixtures/dynamic_tools.py");
    let servers = json!({"mcpServers": {"dyn": {"command": python(), "args": [fixture]}}});
    std::fs::write(home.path().join("mcp_servers.json"), servers.to_string()).unwrap();
    home
}

/// Runs `command` to its end and returns how long it took and its peak RSS in KiB (its
/// VmHWM, read every 10 ms; the servers it starts are not counted).
async fn peak_of(mut command: tokio::process::Command) -> (Duration, u64) {
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let status_file = format!("/proc/{}/status", child.id().unwrap());
    let mut stderr = child.stderr.take().unwrap();
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut text).await;
        text
    });
    let mut peak = 0;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let text = std::fs::read_to_string(&status_file).unwrap_or_default();
        let hwm = text
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        peak = peak.max(hwm);
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let took = started.elapsed();
    assert!(
        status.success(),
        "conduit failed: {}",
        errors.await.unwrap()
    );
    (took, peak)
}

/// A model on loopback speaking Chat Completions: the first request gets a call of
/// `dyn__big_output`, every later one a short answer. Returns its base URL.
async fn scripted_model(mb: u64) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut answered = 0;
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            // Reads the request: headers, then the body its content-length gives.
            let mut request = Vec::new();
            let mut buffer = [0u8; 64 * 1024];
            let body_end = loop {
                let n = tokio::io::AsyncReadExt::read(&mut socket, &mut buffer)
                    .await
                    .unwrap_or(0);
                if n == 0 {
                    break None;
                }
                request.extend_from_slice(&buffer[..n]);
                let text = String::from_utf8_lossy(&request);
                if let Some(at) = text.find("\r\n\r\n") {
                    let length: usize = text[..at]
                        .lines()
                        .find_map(|line| {
                            let (name, value) = line.split_once(':')?;
                            name.eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    if request.len() >= at + 4 + length {
                        break Some(());
                    }
                }
            };
            if body_end.is_none() {
                continue;
            }
            let chunk = |delta: Value, finish: Value| {
                format!(
                    "data: {}\n\n",
                    json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                )
            };
            let arguments = json!({"mb": mb}).to_string();
            let events = if answered == 0 {
                chunk(
                    json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_big", "type": "function", "function": {"name": "dyn__big_output", "arguments": arguments}}]}),
                    json!("tool_calls"),
                )
            } else {
                chunk(
                    json!({"role": "assistant", "content": "It was long."}),
                    json!("stop"),
                )
            };
            answered += 1;
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{events}data: [DONE]\n\n"
            );
            let _ = socket.write_all(reply.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    url
}

/// The same huge output through the release binary, as a person gets it: printed by
/// `conduit mcp call`, and returned to a model in `conduit chat` (kept as a file, saved
/// in the conversation).
async fn huge_output_through_the_cli(mb: u64) {
    let binary = conduit_binary();
    let home = home_with_fixture();
    let mut call = tokio::process::Command::new(&binary);
    call.args(["mcp", "call", "dyn", "big_output", "--args"])
        .arg(json!({"mb": mb}).to_string())
        .env("CONDUIT_HOME", home.path())
        .env("CONDUIT_SECRET_STORE", "file");
    let (took, peak) = peak_of(call).await;
    println!(
        "a {mb} MB tool output through `conduit mcp call` (release, printed whole): {:.1} s, peak RSS of conduit {:.0} MB",
        took.as_secs_f64(),
        peak as f64 / 1024.0
    );
    let url = scripted_model(mb).await;
    let mut chat = tokio::process::Command::new(&binary);
    chat.args([
        "chat",
        "--kind",
        "openai-chat",
        "--base-url",
        &url,
        "--model",
        "m",
        "--approve",
        "auto",
        "--json",
        "Make a lot of output",
    ])
    .env("CONDUIT_HOME", home.path())
    .env("CONDUIT_SECRET_STORE", "file");
    let (took, peak) = peak_of(chat).await;
    println!(
        "the same output returned to a model in `conduit chat` (release; the model gets 100 KB, the whole output is a file): {:.1} s, peak RSS of conduit {:.0} MB",
        took.as_secs_f64(),
        peak as f64 / 1024.0
    );
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A raw JSON-RPC client: one line out, read lines until the matching id comes back.
struct Raw {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
}

impl Raw {
    async fn start() -> Self {
        let mut child = tokio::process::Command::new("node")
            .arg(everything())
            .arg("stdio")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut raw = Self {
            child,
            stdin,
            lines,
            next_id: 1,
        };
        raw.request("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}})).await;
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        raw
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let line = self.lines.next_line().await.unwrap().expect("a response");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }
}

async fn conduit_echo_calls(connection: &Connection, calls: usize) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(calls);
    for i in 0..calls {
        let args = serde_json::from_value(json!({"message": format!("m{i}")})).unwrap();
        let started = Instant::now();
        connection
            .call_tool(
                "echo",
                args,
                Arc::new(|_| {}),
                tokio_util::sync::CancellationToken::new(),
            )
            .await
            .unwrap();
        samples.push(started.elapsed());
    }
    samples
}

fn run_client(program: &str, args: &[String]) -> Option<Value> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!("{program} failed: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last()?).ok()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    assert!(
        everything().is_file(),
        "run `make setup-test` first: {} is missing",
        everything().display()
    );
    println!("MCP (release build, @modelcontextprotocol/server-everything over stdio)");

    // Connect + initialize + list tools, one server.
    let mut connects = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let connection =
            Connection::connect(&spec(), Duration::from_secs(30), Asks::nobody("bench"))
                .await
                .unwrap();
        let tools = connection.tools().await.unwrap();
        connects.push(started.elapsed());
        assert!(!tools.is_empty());
        connection.shutdown().await;
    }
    println!(
        "connect + initialize + list tools: {:.0} ms median of 5",
        ms(median(connects.clone()))
    );

    // Ten at once against the slowest alone: with a server that costs little CPU to
    // start, this measures Conduit's parallel start; with server-everything, ten Node.js
    // start-ups share the machine's cores.
    ten_at_once("minimal Python servers", minimal).await;
    ten_at_once("server-everything (Node.js)", spec).await;

    huge_output(100).await;
    huge_output_through_the_cli(100).await;

    // Overhead per call: Conduit's client against a raw JSON-RPC loop, same server kind.
    let mut raw = Raw::start().await;
    let mut raw_samples = Vec::new();
    for i in 0..CALLS {
        let started = Instant::now();
        let reply = raw
            .request(
                "tools/call",
                json!({"name": "echo", "arguments": {"message": format!("m{i}")}}),
            )
            .await;
        raw_samples.push(started.elapsed());
        assert!(reply.get("result").is_some());
    }
    let _ = raw.child.kill().await;
    let connection = Connection::connect(&spec(), Duration::from_secs(30), Asks::nobody("bench"))
        .await
        .unwrap();
    let conduit_samples = conduit_echo_calls(&connection, CALLS).await;
    connection.shutdown().await;
    let raw_total: Duration = raw_samples.iter().sum();
    let conduit_total: Duration = conduit_samples.iter().sum();
    let (raw_median, conduit_median) = (median(raw_samples), median(conduit_samples));
    println!(
        "echo round trip, median of {CALLS}: raw JSON-RPC {:.3} ms, Conduit {:.3} ms: overhead {:.3} ms (budget < 1 ms)",
        ms(raw_median),
        ms(conduit_median),
        ms(conduit_median.saturating_sub(raw_median))
    );

    // The official SDK clients, same calls, same server.
    println!("{CALLS} sequential echo calls:");
    println!("  Conduit (rmcp)        {:>8.0} ms", ms(conduit_total));
    println!("  raw JSON-RPC loop     {:>8.0} ms", ms(raw_total));
    let bench_dir = crate_dir().join("benches/clients");
    let sdk = root().join("tests/mcp-servers/node_modules/@modelcontextprotocol/sdk");
    let ts = run_client(
        "node",
        &[
            bench_dir.join("ts_echo.mjs").display().to_string(),
            sdk.display().to_string(),
            everything().display().to_string(),
            CALLS.to_string(),
        ],
    );
    match ts {
        Some(v) => println!(
            "  TypeScript SDK        {:>8.0} ms",
            v["calls_ms"].as_f64().unwrap_or(f64::NAN)
        ),
        None => println!("  TypeScript SDK        (could not run)"),
    }
    let python = root().join("tests/mcp-servers/.venv/bin/python");
    let py = run_client(
        &python.display().to_string(),
        &[
            bench_dir.join("py_echo.py").display().to_string(),
            everything().display().to_string(),
            CALLS.to_string(),
        ],
    );
    match py {
        Some(v) => println!(
            "  Python SDK            {:>8.0} ms",
            v["calls_ms"].as_f64().unwrap_or(f64::NAN)
        ),
        None => println!("  Python SDK            (could not run)"),
    }
}
