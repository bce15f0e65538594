//! A small MCP client on `conduit-mcp` for the official conformance suite
//! (`@modelcontextprotocol/conformance`): it connects to the URL it is given, lists the
//! tools, and calls the ones the scenario (`MCP_CONFORMANCE_SCENARIO`, with its
//! `MCP_CONFORMANCE_CONTEXT`) is about. A server that asks for sign-in gets the app's
//! OAuth code with a headless authorizer (the code read from the redirect), tokens kept
//! in memory; a call refused for want of scope signs in again with what the server asks
//! (at most [`MAX_STEP_UPS`] times), as the app does when the user presses Sign in. Elicitation and sampling go through the
//! app's own code; only the answers (a form's defaults, a fixed model answer) come from here.
//! Usage: conformance_client URL

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use conduit_mcp::client::{Asks, Connection, McpError};
use conduit_mcp::config::{ServerSpec, Transport};
use conduit_mcp::elicit::{
    Asker, Elicitation, ElicitationAnswer, ElicitationKind, ElicitationOffer, defaults,
};
use conduit_mcp::oauth::{
    self, HeadlessSignIn, MAX_STEP_UPS, MemoryTokens, SignInSettings, TokenVault,
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
    let context: serde_json::Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    // A pre-registered client comes from the scenario, as it would from the file entry.
    let oauth = SignInSettings {
        client_id: context["client_id"].as_str().map(str::to_owned),
        client_secret: context["client_secret"].as_str().map(str::to_owned),
        client_metadata_url: Some(CLIENT_METADATA_URL.into()),
        ..Default::default()
    };
    let spec = ServerSpec {
        transport: Transport::Http {
            url: url.clone(),
            headers: BTreeMap::new(),
        },
        timeout: Some(Duration::from_secs(20)),
        secrets: Default::default(),
        legacy_sse: false,
        era: Default::default(),
        oauth,
        roots: None,
    };
    let vault: Arc<dyn TokenVault> = Arc::new(MemoryTokens::default());
    // Only the answers come from the scenario: the form's defaults, or consent to a URL.
    let asks = Asks {
        tokens: Some(vault.clone()),
        ..Asks::new("conformance", Some(Arc::new(ScenarioAnswers)))
    };
    let sign_in = |challenge: Option<String>| {
        let (url, spec, vault) = (url.clone(), spec.clone(), vault.clone());
        async move {
            let authorize = HeadlessSignIn {
                redirect_uri: REDIRECT_URI.into(),
            };
            oauth::sign_in(
                &url,
                &spec.oauth,
                challenge.as_deref(),
                vault,
                &authorize,
                &|_| {},
            )
            .await
            .unwrap_or_else(|e| panic!("sign-in failed: {e}"));
        }
    };
    let connect = || async {
        match Connection::connect(&spec, Duration::from_secs(20), asks.clone()).await {
            Err(err) if err.sign_in.is_some() => {
                println!("{err}");
                sign_in(err.sign_in.and_then(|need| need.challenge)).await;
                Connection::connect(&spec, Duration::from_secs(20), asks.clone()).await
            }
            connected => connected,
        }
        .unwrap_or_else(|e| panic!("connect failed: {e}"))
    };
    let mut connection = connect().await;
    // Tokens the server stops taking (its authorization server moved): sign in again.
    let tools = match connection.tools().await {
        Err(McpError::SignIn(need)) => {
            connection.shutdown().await;
            sign_in(need.challenge).await;
            connection = connect().await;
            connection.tools().await
        }
        listed => listed,
    }
    .expect("tools/list");
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    println!("tools: {names:?}");
    // The calls a scenario names in its context, else the fixed ones of the older
    // scenarios, else every tool with no arguments.
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
        let mut step_ups = 0;
        loop {
            let arguments = serde_json::from_value(arguments.clone()).unwrap();
            let called = connection
                .call_tool(&name, arguments, Arc::new(|_| {}), CancellationToken::new())
                .await;
            match called {
                Ok(result) => println!("{name}: {:?}", result.content),
                Err(McpError::SignIn(need)) if step_ups < MAX_STEP_UPS => {
                    step_ups += 1;
                    println!("{name}: the server wants sign-in again (step-up {step_ups})");
                    connection.shutdown().await;
                    sign_in(need.challenge).await;
                    connection = connect().await;
                    continue;
                }
                Err(err) => println!("{name} failed: {err}"),
            }
            break;
        }
    }
    connection.shutdown().await;
}

/// Where the conformance suite's authorization server sends the browser back to.
const REDIRECT_URI: &str = "http://localhost:3000/callback";
/// A client ID metadata document URL, for servers that accept one (never fetched by the
/// suite's mock server).
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

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
