//! A huge tool output through `conduit mcp call`, from the official Python SDK, which
//! sends it twice (as text and again as `structuredContent`): the whole text arrives
//! intact, and the copy is not kept a second time; over stdio and over streamable HTTP
//! (where it is one SSE event of 40 MB). Sent whole as JSON (how the Python SDK answers a
//! 2026-07-28 request), an answer past rmcp's 16 MiB fails its call saying so.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use conduit_e2e::binary;
use serde_json::json;

#[test]
fn the_whole_output_arrives_intact_and_its_copy_is_not_kept_twice() {
    let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
    the_output_arrives_whole(json!({
        "command": root.join(".venv/bin/python"),
        "args": [root.join("fixtures/dynamic_tools.py")]
    }));
}

#[test]
fn over_http_the_whole_output_arrives_intact_and_its_copy_is_not_kept_twice() {
    let (_server, port) = dynamic_tools_over_http();
    let url = format!("http://127.0.0.1:{port}/mcp");
    // A 2025-11-25 session: the SDK streams its answer as one SSE event.
    the_output_arrives_whole(json!({"url": url, "protocolVersion": "2025-11-25"}));

    // 2026-07-28: the same answer comes whole as JSON, past what Conduit reads of one.
    let out = big_output_of(json!({"url": url}));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "its answer, sent whole, is larger than 16 MiB, the most Conduit reads of one"
        ),
        "{stderr}"
    );
}

/// A server process ended when the test ends, passed or not.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The Python fixture serving streamable HTTP on a free loopback port, listening.
fn dynamic_tools_over_http() -> (Server, u16) {
    let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
    for _ in 0..3 {
        let port = conduit_e2e::free_port().unwrap();
        let mut child = Command::new(root.join(".venv/bin/python"))
            .arg(root.join("fixtures/dynamic_tools.py"))
            .args(["--http", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let listening = loop {
            if child.try_wait().unwrap().is_some() {
                break None;
            }
            match conduit_e2e::sole_listener(port, child.id()).unwrap() {
                Some(sole) => break Some(sole),
                None if Instant::now() > deadline => panic!("the server did not listen"),
                None => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        if listening == Some(true) {
            return (Server(child), port);
        }
        // Another process took the port first: try another.
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("no free port for the server");
}

/// `conduit mcp call` of the fixture's `big_output` (20 MB) on the server `entry` names.
fn big_output_of(entry: serde_json::Value) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    let servers = json!({"mcpServers": {"dyn": entry}});
    std::fs::write(home.path().join("mcp_servers.json"), servers.to_string()).unwrap();
    Command::new(binary("conduit").unwrap())
        .args([
            "mcp",
            "call",
            "dyn",
            "big_output",
            "--args",
            r#"{"mb": 20}"#,
        ])
        .env("CONDUIT_HOME", home.path())
        .env_remove("CONDUIT_MCP_CONFIG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn the_output_arrives_whole(entry: serde_json::Value) {
    let out = big_output_of(entry);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // What the fixture returns, byte for byte.
    let line = "0123456789abcdef".repeat(4) + "\n";
    let expected = line.repeat(20 * 1024 * 1024 / line.len());
    let stdout = out.stdout;
    assert!(
        stdout.len() > expected.len(),
        "{} bytes printed",
        stdout.len()
    );
    let (text, rest) = stdout.split_at(expected.len());
    assert!(text == expected.as_bytes(), "the text arrived altered");
    let rest = String::from_utf8(rest.to_vec()).unwrap();
    // The structuredContent copy is named, not printed (or kept) a second time.
    let structured: serde_json::Value = serde_json::from_str(rest.trim()).unwrap();
    assert_eq!(
        structured,
        json!({"result": format!(
            "[a copy of another part of this result ({} bytes), left out]",
            expected.len()
        )}),
    );
}
