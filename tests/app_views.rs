//! MCP Apps views through the app's own paths, with a real Python SDK server whose view
//! probes its host: the view is read and served under its own token with a policy that
//! dropped the directives the server tried to smuggle in; a view's tool calls reach only
//! its own server's tools that views may call, under the tools' Settings policy (ask, and
//! deny); and an app-only tool never reaches a model's request.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use conduit_e2e::llm_server::{Dialect, ScriptedLlm};
use conduit_host::app::{App, SendRequest};
use conduit_host::app_views::{ViewCallError, ViewLookup};
use conduit_host::settings::ToolPolicy;
use conduit_host::{Host, Paths};
use serde_json::json;

fn probe_home(llm: Option<&ScriptedLlm>) -> (tempfile::TempDir, std::path::PathBuf) {
    let home = tempfile::tempdir().unwrap();
    let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
    let python = root.join(".venv/bin/python");
    assert!(
        python.is_file(),
        "run `make test`: the Python test servers are missing"
    );
    let reports = home.path().join("reports.jsonl");
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"probe": {"command": python, "args": [root.join("fixtures/app_probe.py"), &reports]}}})
            .to_string(),
    )
    .unwrap();
    if let Some(llm) = llm {
        std::fs::write(
            home.path().join("settings.json"),
            llm.provider_settings().to_string(),
        )
        .unwrap();
    }
    (home, reports)
}

fn app_at(home: &std::path::Path) -> Arc<App> {
    App::new(Arc::new(Host::new(Paths::under_home(
        home.to_owned(),
        None,
    ))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_is_served_under_its_own_token_with_a_policy_nothing_loosened() {
    let (home, _) = probe_home(None);
    let app = app_at(home.path());
    let ViewLookup::Ready { view } = app.open_view("probe", "show_probe").await else {
        panic!("the probe's view is not ready")
    };
    assert!(view.url.starts_with("mcp-app://") && view.url.ends_with('/'));
    assert!(view.url.contains(&view.token));
    assert_eq!(view.uri, "ui://probe/view.html");
    // The smuggled connect directives are dropped; the one plain origin stays a resource.
    assert!(view.domains.connect.is_empty(), "{:?}", view.domains);
    assert_eq!(view.domains.resource, ["https://cdn.example.com"]);
    assert_eq!(view.domains.dropped.len(), 3, "{:?}", view.domains.dropped);
    assert!(view.csp.contains("connect-src 'none'"), "{}", view.csp);
    assert!(!view.csp.contains("unsafe-eval") && !view.csp.contains(" * "));

    let document = app.views().document(&view.token, "/view").unwrap();
    assert!(String::from_utf8_lossy(&document.body).contains("Conduit probe view"));
    assert_eq!(document.csp, view.csp);
    let proxy = app.views().document(&view.token, "/").unwrap();
    assert!(proxy.csp.contains("script-src 'self'") && proxy.csp.contains("frame-src 'self'"));

    // A second call's view is another origin; a closed one is gone.
    let ViewLookup::Ready { view: again } = app.open_view("probe", "show_probe").await else {
        panic!()
    };
    assert_ne!(again.token, view.token);
    app.views().close(&view.token);
    assert!(app.views().document(&view.token, "/view").is_none());

    assert_eq!(
        app.open_view("probe", "model_secret").await,
        ViewLookup::None
    );
    assert!(matches!(
        app.open_view("gone", "show_probe").await,
        ViewLookup::Unavailable { .. }
    ));
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_views_calls_reach_only_its_own_app_tools_under_their_policy() {
    let (home, _) = probe_home(None);
    let app = app_at(home.path());
    let ViewLookup::Ready { view } = app.open_view("probe", "show_probe").await else {
        panic!("the probe's view is not ready")
    };
    let asked = Arc::new(AtomicUsize::new(0));
    let answer = |yes: bool| {
        let asked = asked.clone();
        move |question: String| {
            asked.fetch_add(1, Ordering::SeqCst);
            assert!(
                question.contains("probe") && question.contains("probe_count"),
                "{question}"
            );
            async move { yes }
        }
    };

    // Ask (the default): the user is asked, and a yes runs it.
    let result = app
        .call_from_view(&view.token, "probe_count", json!({}), answer(true))
        .await
        .unwrap();
    assert_eq!(result["content"][0]["text"], "counted 1");
    assert!(result.get("_meta").is_none());
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    // A no does not run it.
    let refused = app
        .call_from_view(&view.token, "probe_count", json!({}), answer(false))
        .await;
    assert!(
        matches!(refused, Err(ViewCallError::NotAllowed { .. })),
        "{refused:?}"
    );

    // Never asked: a model-only tool, a tool its server does not have (another server's),
    // a closed view.
    let model_only = app
        .call_from_view(&view.token, "model_secret", json!({}), answer(true))
        .await;
    assert!(
        matches!(model_only, Err(ViewCallError::ModelOnly { .. })),
        "{model_only:?}"
    );
    let other = app
        .call_from_view(
            &view.token,
            "search_history",
            json!({"query": "x"}),
            answer(true),
        )
        .await;
    assert!(
        matches!(other, Err(ViewCallError::NoTool { .. })),
        "{other:?}"
    );
    let closed = app
        .call_from_view("not-a-token", "probe_count", json!({}), answer(true))
        .await;
    assert!(matches!(closed, Err(ViewCallError::Closed)), "{closed:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 2);

    // A tool switched off in Settings is refused without asking.
    app.host()
        .set_mcp_tool_enabled("probe", "probe_count", false)
        .unwrap();
    let off = app
        .call_from_view(&view.token, "probe_count", json!({}), answer(true))
        .await;
    assert!(matches!(off, Err(ViewCallError::Denied { .. })), "{off:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    app.host()
        .set_mcp_tool_enabled("probe", "probe_count", true)
        .unwrap();

    // Deny in Settings holds for views as for the model, without asking.
    app.set_tool_policy("probe", "probe_count", ToolPolicy::Deny)
        .await
        .unwrap();
    let denied = app
        .call_from_view(&view.token, "probe_count", json!({}), answer(true))
        .await;
    assert!(
        matches!(denied, Err(ViewCallError::Denied { .. })),
        "{denied:?}"
    );
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_only_tools_never_reach_a_model_and_a_views_context_goes_with_the_next_message() {
    let chat = Dialect::OpenAiChat;
    let llm = ScriptedLlm::start(vec![chat.text(&["Seen."])])
        .await
        .unwrap();
    let (home, _) = probe_home(Some(&llm));
    let app = app_at(home.path());
    // The composer's count offers what a model may get: not the app-only tools.
    let choices = app.tool_choices(None, None).await.unwrap();
    let probe = choices.servers.iter().find(|s| s.name == "probe").unwrap();
    let listed: Vec<&str> = probe.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(listed, ["show_probe", "model_secret"]);
    let ViewLookup::Ready { view } = app.open_view("probe", "show_probe").await else {
        panic!("the probe's view is not ready")
    };
    app.views()
        .set_context(&view.token, "The probe shows 3 items.".into())
        .unwrap();

    conduit_e2e::app_turn(
        &app,
        SendRequest {
            conversation: None,
            text: "What does it show?".into(),
            attachments: Vec::new(),
            provider: "scripted".into(),
            model: None,
            toolset: None,
            resources: Vec::new(),
            prompt: None,
            view_context: vec![view.token.clone()],
        },
    )
    .await;
    let request = &llm.requests()[0].body;
    let offered: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        offered.iter().any(|t| t.ends_with("show_probe")),
        "{offered:?}"
    );
    assert!(
        offered.iter().any(|t| t.ends_with("model_secret")),
        "{offered:?}"
    );
    assert!(
        !offered
            .iter()
            .any(|t| t.contains("probe_report") || t.contains("probe_count")),
        "app-only tools reached the model: {offered:?}"
    );
    let user = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .to_string();
    assert!(user.contains("What does it show?"), "{user}");
    assert!(
        user.contains("[Context from the view of probe (show_probe):]")
            && user.contains("The probe shows 3 items."),
        "{user}"
    );
    // Taken: it does not go with a later message.
    assert_eq!(app.views().context(std::slice::from_ref(&view.token)), None);
    app.shutdown().await;
}
