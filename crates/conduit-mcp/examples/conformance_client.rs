//! A small MCP client on `conduit-mcp` for the official conformance suite
//! (`@modelcontextprotocol/conformance`): it connects to the URL it is given, lists the
//! tools, and calls the ones the scenario (`MCP_CONFORMANCE_SCENARIO`, with its
//! `MCP_CONFORMANCE_CONTEXT`) is about. Elicitation and sampling go through the app's own
//! code; only the answers (a form's defaults, a fixed model answer) come from here.
//! Usage: conformance_client URL

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use conduit_mcp::client::{Asks, Connection};
use conduit_mcp::config::{ServerSpec, Transport};
use conduit_mcp::elicit::{
    Asker, Elicitation, ElicitationAnswer, ElicitationKind, ElicitationOffer, defaults,
};
use conduit_mcp::sampling::{
    SampledMessage, SamplingAnswer, SamplingContent, SamplingRequest, SamplingStop,
};
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
        roots: None,
    };
    // Only the answers come from the scenario: the form's defaults, or consent to a URL.
    let asks = Asks::new("conformance", Some(Arc::new(ScenarioAnswers)));
    let connection = Connection::connect(&spec, Duration::from_secs(20), asks)
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
    println!("tools: {names:?}");
    // The calls a scenario names in its context, else the fixed ones of the older
    // scenarios, else every tool with no arguments.
    let context: serde_json::Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let mut calls: Vec<(String, serde_json::Value)> = context["toolCalls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|c| {
                    let name = c["name"].as_str().unwrap_or_default().to_owned();
                    let arguments = match &c["arguments"] {
                        serde_json::Value::Null => json!({}),
                        given => given.clone(),
                    };
                    (name, arguments)
                })
                .collect()
        })
        .unwrap_or_default();
    if calls.is_empty() {
        calls = match scenario.as_str() {
            "tools_call" => vec![("add_numbers".into(), json!({"a": 5, "b": 3}))],
            "sse-retry" => vec![("test_reconnection".into(), json!({}))],
            "initialize" => Vec::new(),
            _ => names.iter().map(|name| (name.clone(), json!({}))).collect(),
        };
    }
    for (name, arguments) in calls {
        match call(&name, arguments).await {
            Ok(result) => println!("{name}: {:?}", result.content),
            Err(err) => println!("{name} failed: {err}"),
        }
    }
    connection.shutdown().await;
}

/// Answers every question as a user who accepts what is offered would.
struct ScenarioAnswers;

#[async_trait::async_trait]
impl Asker for ScenarioAnswers {
    fn offers(&self) -> ElicitationOffer {
        ElicitationOffer {
            form: true,
            url: true,
        }
    }

    async fn elicit(&self, question: Elicitation) -> ElicitationAnswer {
        match question.kind {
            ElicitationKind::Form { fields } => ElicitationAnswer::Accept(defaults(&fields)),
            ElicitationKind::Url { .. } => ElicitationAnswer::Accept(Default::default()),
        }
    }

    fn samples(&self) -> bool {
        true
    }

    /// A user who approves the request and its result; the model is a fixed answer.
    async fn sample(&self, request: SamplingRequest) -> SamplingAnswer {
        SamplingAnswer::Sampled(SampledMessage {
            model: "conformance-model".into(),
            content: vec![SamplingContent::Text {
                text: format!("A sampled answer to {} messages.", request.messages.len()),
            }],
            stop_reason: SamplingStop::EndTurn,
        })
    }
}
