//! What MCP costs: connect + initialize + list tools; ten servers started at once against
//! the slowest alone; Conduit's overhead per tool call over a raw JSON-RPC round trip on
//! the same kind of pipe; and 1,000 `echo` calls through Conduit beside the official
//! TypeScript and Python SDK clients, against the same server in the same run.
//! Run with `make bench` (release build, after `make setup-test`). Prints a report.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use conduit_mcp::client::Connection;
use conduit_mcp::config::{ServerEntry, ServerSpec, Snapshot, Transport};
use conduit_mcp::servers::Servers;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const CALLS: usize = 1000;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn everything() -> PathBuf {
    root().join(
        "tests/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    )
}

fn spec() -> ServerSpec {
    ServerSpec {
        transport: Transport::Stdio {
            command: "node".into(),
            args: vec![everything().display().to_string(), "stdio".into()],
            env: BTreeMap::new(),
            cwd: None,
        },
        timeout: None,
    }
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
        let connection = Connection::connect(&spec(), Duration::from_secs(30))
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

    // Ten at once against the slowest alone: one file with ten entries.
    let entry = |name: String| ServerEntry {
        name,
        disabled: false,
        raw: Value::Null,
        spec: Ok(spec()),
    };
    let snapshot = Snapshot::for_servers((0..10).map(|n| entry(format!("s{n}"))).collect());
    let started = Instant::now();
    let servers = Servers::start(&snapshot, Duration::from_secs(60)).await;
    let ten = started.elapsed();
    servers.shutdown().await;
    let slowest_alone = connects.iter().max().copied().unwrap_or_default();
    println!(
        "10 servers started at once: {:.0} ms; the slowest single start: {:.0} ms (budget: within it + 50 ms on 2 cores)",
        ms(ten),
        ms(slowest_alone)
    );

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
    let connection = Connection::connect(&spec(), Duration::from_secs(30))
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
    let bench_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/clients");
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
