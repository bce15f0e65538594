//! A huge tool output through `conduit mcp call`, from the official Python SDK, which
//! sends it twice (as text and again as `structuredContent`): the whole text arrives
//! intact, and the copy is not kept a second time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Stdio};

use conduit_e2e::binary;
use serde_json::json;

#[test]
fn the_whole_output_arrives_intact_and_its_copy_is_not_kept_twice() {
    let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
    let home = tempfile::tempdir().unwrap();
    let servers = json!({"mcpServers": {"dyn": {
        "command": root.join(".venv/bin/python"),
        "args": [root.join("fixtures/dynamic_tools.py")]
    }}});
    std::fs::write(home.path().join("mcp_servers.json"), servers.to_string()).unwrap();
    let out = Command::new(binary("conduit").unwrap())
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
        .unwrap();
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
