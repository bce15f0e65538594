//! A small MCP client on `conduit-mcp` for the official conformance suite
//! (`@modelcontextprotocol/conformance`): it connects to the URL it is given, lists the
//! tools, and calls the one the scenario (`MCP_CONFORMANCE_SCENARIO`) is about.
//! Usage: conformance_client URL

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use conduit_mcp::client::Connection;
use conduit_mcp::config::{ServerSpec, Transport};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let url = std::env::args()
        .nth(1)
        .expect("usage: conformance_client URL");
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let spec = ServerSpec {
        transport: Transport::Http {
            url,
            headers: BTreeMap::new(),
        },
        timeout: Some(Duration::from_secs(20)),
        secrets: Default::default(),
        era: Default::default(),
    };
    let connection = Connection::connect(&spec, Duration::from_secs(20))
        .await
        .unwrap_or_else(|e| panic!("connect failed: {e}"));
    let tools = connection.tools().await.expect("tools/list");
    let call = |name: &str, arguments: serde_json::Value| {
        let name = name.to_owned();
        let connection = &connection;
        async move {
            connection
                .call_tool(
                    &name,
                    serde_json::from_value(arguments).unwrap(),
                    Arc::new(|_| {}),
                    CancellationToken::new(),
                )
                .await
        }
    };
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    match scenario.as_str() {
        "tools_call" => {
            let result = call("add_numbers", json!({"a": 5, "b": 3}))
                .await
                .expect("tools/call");
            println!("{:?}", result.content);
        }
        "sse-retry" => {
            let result = call("test_reconnection", json!({}))
                .await
                .expect("tools/call");
            println!("{:?}", result.content);
        }
        _ => println!("tools: {names:?}"),
    }
    connection.shutdown().await;
}
