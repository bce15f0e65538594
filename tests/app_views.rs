//! MCP Apps views through the app's own paths, with a real Python SDK server whose view
//! probes its host: the view is read and served under its own token with a policy that
//! dropped the directives the server tried to smuggle in; a view's tool calls reach only
//! its own server's tools that views may call, under the tools' Settings policy (ask, and
//! deny); an app-only tool never reaches a model's request; and a view opens only for a
//! call the host ran (in this process, or saved with a result that names the view).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use conduit_core::agent::AgentEvent;
use conduit_core::content::{Block, Message, ResultPart, Role, ToolCall, ToolOrigin, ToolResult};
use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
use conduit_host::app::{App, SendRequest, TurnEvent, TurnSink};
use conduit_host::app_views::{ViewCallError, ViewHandle, ViewLookup};
use conduit_host::approval::Decision;
use conduit_host::settings::ToolPolicy;
use conduit_host::{Host, Paths};
use conduit_store::MessageStatus;
use serde_json::{Value, json};

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

/// A new conversation's first message to the scripted model.
fn request(text: &str) -> SendRequest {
    SendRequest {
        conversation: None,
        text: text.into(),
        attachments: Vec::new(),
        files: Vec::new(),
        documents: Vec::new(),
        provider: "scripted".into(),
        model: None,
        toolset: None,
        resources: Vec::new(),
        prompt: None,
        view_context: Vec::new(),
        again: false,
        replace_answer: false,
        replace_message: false,
        instructions: None,
        reasoning: None,
    }
}

/// Scripts the model's next turn: a call of the probe's `tool`, then a short answer.
fn script_call(llm: &ScriptedLlm, tool: &str, arguments: Value) {
    let chat = Dialect::OpenAiChat;
    llm.push(vec![
        chat.turn(
            &[],
            &[ScriptedCall::new(
                "wire_1",
                &format!("probe__{tool}"),
                arguments,
            )],
        ),
        chat.text(&["Done."]),
    ]);
}

/// Conduit's own id of the newest saved call of `tool` in `conversation`.
fn saved_call(app: &App, conversation: &str, tool: &str) -> String {
    let messages = app
        .host()
        .store()
        .unwrap()
        .messages(conversation, None)
        .unwrap();
    messages
        .iter()
        .rev()
        .flat_map(|m| m.blocks.iter())
        .find_map(|block| match block {
            Block::ToolCall(call) if call.name == format!("probe__{tool}") => Some(call.id.clone()),
            _ => None,
        })
        .expect("the call is saved")
}

/// Runs a turn in which the model calls the probe's `tool`, allowed in Settings; returns
/// the conversation and Conduit's id for the call.
async fn ran_call(
    app: &Arc<App>,
    llm: &ScriptedLlm,
    tool: &str,
    arguments: Value,
) -> (String, String) {
    script_call(llm, tool, arguments);
    // An allow is saved for the tool as Settings showed it; one for what Settings did not
    // show (another tool's listing, an old one) is refused and saves nothing.
    let listed = app.mcp_server_tools("probe").await.unwrap();
    let shown = &listed
        .tools
        .iter()
        .find(|t| t.tool.name == tool)
        .unwrap()
        .shown;
    let other = &listed
        .tools
        .iter()
        .find(|t| t.tool.name != tool)
        .unwrap()
        .shown;
    let before = app.host().settings().unwrap();
    for stale in [other.as_str(), "", listed.shown.as_str()] {
        let refused = app
            .set_tool_policy("probe", tool, ToolPolicy::Allow, stale, |_| true)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("changed since Settings showed it"),
            "{refused}"
        );
    }
    let refused = app
        .set_server_policy("probe", ToolPolicy::Allow, shown, |_| true)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("what \"probe\" offers"),
        "{refused}"
    );
    assert_eq!(app.host().settings().unwrap(), before);
    // The allow is saved only after the native question says yes; it names the tool,
    // its server and what the server says the tool does.
    let asked = Arc::new(std::sync::Mutex::new(String::new()));
    let heard = asked.clone();
    let refused = app
        .set_tool_policy("probe", tool, ToolPolicy::Allow, shown, move |question| {
            *heard.lock().unwrap() = question;
            false
        })
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("not allowed"), "{refused}");
    assert_eq!(app.host().settings().unwrap(), before);
    let question = asked.lock().unwrap().clone();
    assert!(
        question.contains(&format!("Always allow {tool} of server probe?"))
            && question.contains("without asking you"),
        "{question}"
    );
    app.set_tool_policy("probe", tool, ToolPolicy::Allow, shown, |_| true)
        .await
        .unwrap();
    let conversation = conduit_e2e::app_turn(app, request("Show it.")).await;
    let call = saved_call(app, &conversation, tool);
    (conversation, call)
}

async fn ready(app: &App, call: &str, conversation: Option<&str>) -> Box<ViewHandle> {
    match app.open_view(call, conversation).await {
        ViewLookup::Ready { view } => view,
        other => panic!("the view is not ready: {other:?}"),
    }
}

async fn probe_view(app: &Arc<App>, llm: &ScriptedLlm) -> Box<ViewHandle> {
    let (conversation, call) = ran_call(app, llm, "show_probe", json!({"gate": "x"})).await;
    ready(app, &call, Some(&conversation)).await
}

/// Starts a turn in which the model calls the probe's `tool`, and waits until the host asks
/// about the call: the turn, its events from then on, and the call asked about.
async fn asked_call(
    app: &Arc<App>,
    llm: &ScriptedLlm,
    tool: &str,
) -> (
    conduit_host::app::Started,
    tokio::sync::mpsc::UnboundedReceiver<TurnEvent>,
    ToolCall,
) {
    script_call(llm, tool, json!({"gate": "x"}));
    let (sender, mut events) = tokio::sync::mpsc::unbounded_channel();
    let sink: TurnSink = Arc::new(move |event| {
        let _ = sender.send(event);
    });
    let started = app.send(request("Show it."), sink).unwrap();
    let asked = loop {
        match next(&mut events).await {
            TurnEvent::Agent { event } => {
                if let AgentEvent::ApprovalRequested { call, .. } = *event {
                    break call;
                }
            }
            TurnEvent::Ended { .. } => panic!("the turn ended without asking"),
            TurnEvent::ServersStarting { .. } => {}
        }
    };
    (started, events, asked)
}

/// A scripted model with nothing queued yet.
async fn scripted() -> ScriptedLlm {
    ScriptedLlm::start(Vec::new()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_is_served_under_its_own_token_with_a_policy_nothing_loosened() {
    let llm = scripted().await;
    let (home, _) = probe_home(Some(&llm));
    let app = app_at(home.path());
    let (conversation, call) = ran_call(&app, &llm, "show_probe", json!({"gate": "x"})).await;
    let view = ready(&app, &call, Some(&conversation)).await;
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

    // The view opened again (the chat shown again) is another origin; a closed one is gone.
    let again = ready(&app, &call, Some(&conversation)).await;
    assert_ne!(again.token, view.token);
    app.views().close(&view.token);
    assert!(app.views().document(&view.token, "/view").is_none());

    // A call of a tool without a view has none.
    let (_, plain) = ran_call(&app, &llm, "model_secret", json!({})).await;
    assert_eq!(app.open_view(&plain, None).await, ViewLookup::None);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_views_calls_reach_only_its_own_app_tools_under_their_policy() {
    let llm = scripted().await;
    let (home, _) = probe_home(Some(&llm));
    let app = app_at(home.path());
    let view = probe_view(&app, &llm).await;
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
    let flood = "x".repeat(conduit_host::app_views::MAX_VIEW_ARGUMENTS);
    let too_large = app
        .call_from_view(
            &view.token,
            "probe_count",
            json!({"text": flood}),
            answer(true),
        )
        .await;
    assert!(
        matches!(too_large, Err(ViewCallError::TooLarge)),
        "{too_large:?}"
    );
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
    app.set_tool_policy("probe", "probe_count", ToolPolicy::Deny, "", |_| false)
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
    app.set_tool_policy("probe", "probe_count", ToolPolicy::Ask, "", |_| false)
        .await
        .unwrap();

    // The entry named "probe" changed (here its environment; another command or URL
    // alike): once the runtime runs the new one, the open view's calls do not go to it.
    let file = home.path().join("mcp_servers.json");
    let mut entries: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let before = app.servers().await.running_from("probe");
    entries["mcpServers"]["probe"]["env"] = json!({"CHANGED": "1"});
    std::fs::write(&file, entries.to_string()).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while app.servers().await.running_from("probe") == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the runtime did not apply the changed entry"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let changed = app
        .call_from_view(&view.token, "probe_count", json!({}), answer(true))
        .await;
    assert!(
        matches!(changed, Err(ViewCallError::ServerChanged(ref server)) if server == "probe"),
        "{changed:?}"
    );
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    app.shutdown().await;
}

/// A view's call still running when the view closes stops with it (the server hears a
/// cancellation), instead of running on to the call's cap for a view nobody sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_views_call_stops_when_the_view_closes() {
    let llm = scripted().await;
    let (home, reports) = probe_home(Some(&llm));
    let app = app_at(home.path());
    let view = probe_view(&app, &llm).await;
    let calling = {
        let (app, token) = (app.clone(), view.token.clone());
        tokio::spawn(async move {
            app.call_from_view(&token, "probe_wait", json!({"seconds": 600}), |_| async {
                true
            })
            .await
        })
    };
    let reported = |what: &str| {
        std::fs::read_to_string(&reports)
            .unwrap_or_default()
            .contains(&format!(r#""what": "{what}""#))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !reported("waiting") {
        assert!(
            std::time::Instant::now() < deadline,
            "the call never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    app.views().close(&view.token);
    let ended = tokio::time::timeout(std::time::Duration::from_secs(60), calling)
        .await
        .expect("the call ended when its view closed")
        .unwrap();
    assert!(ended.is_err(), "{ended:?}");
    while !reported("cancelled") {
        assert!(
            std::time::Instant::now() < deadline,
            "the server never heard the cancellation"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A view firing calls by the dozen has four running at once, and the rest turned away;
/// a result larger than a view is given is refused, not carried into the window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_has_a_few_calls_at_once_and_no_result_larger_than_it_is_given() {
    let llm = scripted().await;
    let (home, reports) = probe_home(Some(&llm));
    let app = app_at(home.path());
    let view = probe_view(&app, &llm).await;
    let calling: Vec<_> = (0..conduit_host::app_views::MAX_VIEW_CALLS)
        .map(|_| {
            let (app, token) = (app.clone(), view.token.clone());
            tokio::spawn(async move {
                app.call_from_view(&token, "probe_wait", json!({"seconds": 600}), |_| async {
                    true
                })
                .await
            })
        })
        .collect();
    let waiting = || {
        std::fs::read_to_string(&reports)
            .unwrap_or_default()
            .matches(r#""what": "waiting""#)
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while waiting() < conduit_host::app_views::MAX_VIEW_CALLS {
        assert!(
            std::time::Instant::now() < deadline,
            "the calls never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let one_more = app
        .call_from_view(&view.token, "probe_count", json!({}), |_| async { true })
        .await;
    assert!(
        matches!(
            one_more,
            Err(conduit_host::app_views::ViewCallError::TooManyAtOnce)
        ),
        "{one_more:?}"
    );
    app.views().close(&view.token);
    for call in calling {
        let ended = tokio::time::timeout(std::time::Duration::from_secs(60), call)
            .await
            .expect("the call ended when its view closed")
            .unwrap();
        assert!(ended.is_err(), "{ended:?}");
    }

    // A view opened again calls again; 9 MiB of text is more than it is given.
    let view = probe_view(&app, &llm).await;
    let big = app
        .call_from_view(
            &view.token,
            "probe_big",
            json!({"megabytes": 9}),
            |_| async { true },
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(big.contains("a view is given at most 8388608"), "{big}");
    let fits = app
        .call_from_view(
            &view.token,
            "probe_big",
            json!({"megabytes": 2}),
            |_| async { true },
        )
        .await
        .unwrap();
    assert_eq!(
        fits["content"][0]["text"].as_str().map(str::len),
        Some(2 * 1024 * 1024)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_only_tools_never_reach_a_model_and_a_views_context_goes_with_the_next_message() {
    let chat = Dialect::OpenAiChat;
    let llm = scripted().await;
    let (home, _) = probe_home(Some(&llm));
    let app = app_at(home.path());
    // The composer's count offers what a model may get: not the app-only tools.
    let choices = app.tool_choices(None, None).await.unwrap();
    let probe = choices.servers.iter().find(|s| s.name == "probe").unwrap();
    let listed: Vec<&str> = probe.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(listed, ["show_probe", "model_secret"]);
    let view = probe_view(&app, &llm).await;
    app.views()
        .set_context(&view.token, "The probe shows 3 items.".into())
        .unwrap();
    llm.push(vec![chat.text(&["Seen."])]);

    conduit_e2e::app_turn(
        &app,
        SendRequest {
            view_context: vec![view.token.clone()],
            ..request("What does it show?")
        },
    )
    .await;
    let requests = llm.requests();
    let request = &requests.last().unwrap().body;
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

/// The next event of a turn, within a minute.
async fn next(events: &mut tokio::sync::mpsc::UnboundedReceiver<TurnEvent>) -> TurnEvent {
    tokio::time::timeout(std::time::Duration::from_secs(60), events.recv())
        .await
        .expect("the turn went quiet for a minute")
        .expect("the turn's events stopped")
}

/// The probe over streamable HTTP behind a gate that can let its sessions expire: the
/// running server and the gate.
async fn probe_over_http(
    reports: &std::path::Path,
) -> (tokio::process::Child, conduit_e2e::http_gate::HttpGate) {
    let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
    let mut attempt = 0;
    let (child, port) = loop {
        attempt += 1;
        let port = conduit_e2e::free_port().unwrap();
        let mut child = tokio::process::Command::new(root.join(".venv/bin/python"))
            .arg(root.join("fixtures/app_probe.py"))
            .arg(reports)
            .args(["--http", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let listening = loop {
            if child.try_wait().unwrap().is_some() {
                break None;
            }
            match conduit_e2e::sole_listener(port, pid).unwrap() {
                Some(sole) => break Some(sole),
                None if std::time::Instant::now() > deadline => panic!("the probe did not listen"),
                None => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            }
        };
        if listening == Some(true) {
            break (child, port);
        }
        // Another process took the port first: try another.
        let _ = child.kill().await;
        assert!(attempt < 3, "no free port for the probe");
    };
    let gate = conduit_e2e::http_gate::HttpGate::start(
        &format!("http://127.0.0.1:{port}"),
        "Bearer tok-view",
    )
    .await
    .unwrap();
    (child, gate)
}

/// A view's call whose session expired did not run (the server answered 404): it goes on
/// the new session after the server is connected again and its tools listed, for the tool
/// as it was checked; changed behind the same URL, it is refused and nothing reaches the
/// server. A call made while the server connects again waits for it, and is checked
/// against the new listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_views_call_whose_session_expired_goes_on_the_new_session_for_the_same_tool() {
    let llm = scripted().await;
    let (home, reports) = probe_home(Some(&llm));
    let (_probe, gate) = probe_over_http(&reports).await;
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"probe": {"type": "http", "url": format!("http://{}/mcp", gate.addr),
            "headers": {"Authorization": "Bearer tok-view"},
            // Sessions are the 2025-11-25 protocol's: the 2026 one has none to expire.
            "protocolVersion": "2025-11-25"}}})
        .to_string(),
    )
    .unwrap();
    let app = app_at(home.path());
    let view = probe_view(&app, &llm).await;
    let count = || async {
        app.call_from_view(&view.token, "probe_count", json!({}), |_| async { true })
            .await
    };
    let counted = |answer: &Value| {
        answer["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(counted(&count().await.unwrap()), "counted 1");

    let before = gate.methods().len();
    gate.expire_sessions();
    assert_eq!(counted(&count().await.unwrap()), "counted 2");
    gate.assert_one_call_after_listing(before);

    // The 404 met by a listing: the view's call made while the server is connecting
    // again (its second expiry within 30 s, so after a pause) waits for the new session.
    gate.expire_sessions();
    let runtime = app.servers().await;
    assert!(runtime.connection("probe").unwrap().tools().await.is_err());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !runtime.restarting("probe") {
        assert!(
            std::time::Instant::now() < deadline,
            "the server never restarted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(counted(&count().await.unwrap()), "counted 3");

    // Changed behind the same URL between the check and the call: refused.
    let before = gate.methods().len();
    gate.rewrite_replies(
        "Count a click (for the view only).",
        "Count a click, and more.",
    );
    gate.expire_sessions();
    let refused = count().await.unwrap_err().to_string();
    assert!(
        refused.contains("session expired") && refused.contains("no longer the one checked"),
        "{refused}"
    );
    gate.assert_no_call_since(before);

    // Set to "never" while the call was on its way: the second send does not go.
    let before = gate.methods().len();
    let refused = app
        .call_from_view(&view.token, "probe_count", json!({}), |_| async {
            app.set_tool_policy("probe", "probe_count", ToolPolicy::Deny, "", |_| false)
                .await
                .unwrap();
            gate.expire_sessions();
            true
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("set to Never run in Settings while the call waited")
            && refused.contains("did not run"),
        "{refused}"
    );
    gate.assert_no_call_since(before);
    app.shutdown().await;
}

/// A call `conduit chat` ran is saved with what ran as its server, as the window's are:
/// the conversation opened in the app shows the call's view, and not once the entry
/// changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_command_line_ran_opens_its_view_in_the_app() {
    let llm = scripted().await;
    let (home, _) = probe_home(Some(&llm));
    script_call(&llm, "show_probe", json!({"gate": "x"}));
    let output = tokio::process::Command::new(conduit_e2e::binary("conduit").unwrap())
        .args([
            "chat",
            "--provider",
            "scripted",
            "--approve",
            "auto",
            "--json",
        ])
        .arg("Show it.")
        .env("CONDUIT_HOME", home.path())
        .env("CONDUIT_SECRET_STORE", "file")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let done = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["type"] == "done")
        .unwrap();
    let conversation = done["conversation"].as_str().unwrap().to_owned();

    let app = app_at(home.path());
    let call = saved_call(&app, &conversation, "show_probe");
    let shown = ready(&app, &call, Some(&conversation)).await;
    assert_eq!(
        (shown.server.as_str(), shown.tool.as_str()),
        ("probe", "show_probe")
    );
    app.shutdown().await;

    // Another server under the name since: the record no longer matches.
    let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"probe": {"command": root.join(".venv/bin/python"),
            "args": [root.join("fixtures/app_probe.py"), home.path().join("other.jsonl")]}}})
        .to_string(),
    )
    .unwrap();
    let app = app_at(home.path());
    match app.open_view(&call, Some(&conversation)).await {
        ViewLookup::Unavailable { reason } => {
            assert!(reason.contains("no longer the one that ran"), "{reason}")
        }
        _ => panic!("a changed entry's server showed the call's view"),
    }
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_opens_only_for_a_call_the_host_ran() {
    let llm = scripted().await;
    let (home, _) = probe_home(Some(&llm));
    let app = app_at(home.path());
    let unavailable = |lookup: ViewLookup| match lookup {
        ViewLookup::Unavailable { reason } => {
            assert!(reason.contains("not available"), "{reason}");
            true
        }
        _ => false,
    };
    // An id the host never made opens nothing.
    assert!(unavailable(app.open_view("call_made_up", None).await));

    // A call waiting for the user's answer has not run: its view opens only once the
    // host lets it run.
    let (started, mut events, asked) = asked_call(&app, &llm, "show_probe").await;
    assert!(unavailable(
        app.open_view(&asked.id, Some(&started.conversation)).await
    ));
    assert!(
        app.answer(&started.turn, &asked.id, Decision::AllowOnce, |_| {
            unreachable!("Allow once asks nothing more")
        })
        .await
        .unwrap()
    );
    loop {
        match next(&mut events).await {
            TurnEvent::Agent { event } => {
                if matches!(&*event, AgentEvent::ToolCallRunning { id } if *id == asked.id) {
                    break;
                }
            }
            TurnEvent::Ended { .. } => panic!("the turn ended before the call ran"),
            TurnEvent::ServersStarting { .. } => {}
        }
    }
    let running = ready(&app, &asked.id, None).await;
    assert_eq!(
        (running.server.as_str(), running.tool.as_str()),
        ("probe", "show_probe")
    );
    while !matches!(next(&mut events).await, TurnEvent::Ended { .. }) {}

    // A call the user denied never ran, though it is saved in its conversation.
    script_call(&llm, "show_probe", json!({"gate": "x"}));
    app.set_tool_policy("probe", "show_probe", ToolPolicy::Deny, "", |_| false)
        .await
        .unwrap();
    let refused_in = conduit_e2e::app_turn(&app, request("Show it again.")).await;
    let refused = saved_call(&app, &refused_in, "show_probe");
    assert_ne!(
        refused, asked.id,
        "the provider's repeated id named both calls"
    );
    assert!(unavailable(
        app.open_view(&refused, Some(&refused_in)).await
    ));
    app.shutdown().await;

    // After a restart the history vouches for a call whose saved result names the view,
    // in its own conversation only.
    let app = app_at(home.path());
    assert!(unavailable(app.open_view(&asked.id, None).await));
    assert!(unavailable(
        app.open_view(&asked.id, Some(&refused_in)).await
    ));
    let shown = ready(&app, &asked.id, Some(&started.conversation)).await;
    assert_eq!(
        (shown.server.as_str(), shown.tool.as_str()),
        ("probe", "show_probe")
    );
    assert!(unavailable(
        app.open_view(&refused, Some(&refused_in)).await
    ));

    // A saved call whose result names a view, but with no server and tool noted (saved
    // before Conduit kept them), opens nothing: the host never takes them from the page.
    let store = app.host().store().unwrap();
    let saved_with_view = |id: &str, origin: Option<ToolOrigin>| {
        let conversation = store.create_conversation(None, None).unwrap();
        let call = ToolCall {
            id: id.into(),
            wire_id: None,
            name: "probe__show_probe".into(),
            arguments: json!({}),
            signature: None,
            invalid_arguments: None,
            origin,
        };
        let result = ToolResult {
            call_id: call.id.clone(),
            wire_id: None,
            name: call.name.clone(),
            is_error: false,
            parts: vec![ResultPart::View {
                uri: "ui://probe/view.html".into(),
                structured: None,
            }],
        };
        for (role, block) in [
            (Role::Assistant, Block::ToolCall(call)),
            (Role::Tool, Block::ToolResult(result)),
        ] {
            let message = Message {
                role,
                blocks: vec![block],
            };
            store
                .add_message(&conversation, &message, MessageStatus::Complete)
                .unwrap();
        }
        conversation
    };
    let old = saved_with_view("call_old", None);
    assert!(unavailable(app.open_view("call_old", Some(&old)).await));

    // Noted, but with no record of what ran as the server (saved before Conduit kept
    // one): not shown either, saying why. The view would get the call's data.
    let unrecorded = saved_with_view(
        "call_unrecorded",
        Some(ToolOrigin {
            server: "probe".into(),
            tool: "show_probe".into(),
        }),
    );
    let refused = app.open_view("call_unrecorded", Some(&unrecorded)).await;
    assert!(
        matches!(&refused, ViewLookup::Unavailable { reason } if reason.contains("without a record of which MCP server ran it")),
        "{refused:?}"
    );

    // The entry named probe changed since the call (another program under the same
    // name): the saved call's view, its arguments and result, is not shown to it.
    let file = home.path().join("mcp_servers.json");
    let mut servers: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    servers["mcpServers"]["probe"]["env"] = json!({"PROBE_BUILD": "2"});
    std::fs::write(&file, servers.to_string()).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let refused = loop {
        match app.open_view(&asked.id, Some(&started.conversation)).await {
            // Shown until the change applies; nothing runs while the server restarts.
            ViewLookup::Ready { .. } if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            ViewLookup::Unavailable { reason }
                if reason.contains("not running") && std::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            other => break other,
        }
    };
    assert!(
        matches!(&refused, ViewLookup::Unavailable { reason } if reason.contains("no longer the one that ran this call")),
        "{refused:?}"
    );

    // Changed to one that cannot start: still said as a change, not as a server that is
    // merely not running.
    servers["mcpServers"]["probe"]["command"] = json!("/nonexistent/probe-server");
    std::fs::write(&file, servers.to_string()).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !app.servers().await.statuses().iter().any(|s| {
        s.name == "probe" && matches!(s.state, conduit_mcp::servers::ServerState::Failed { .. })
    }) {
        assert!(
            std::time::Instant::now() < deadline,
            "the entry never failed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let refused = app.open_view(&asked.id, Some(&started.conversation)).await;
    assert!(
        matches!(&refused, ViewLookup::Unavailable { reason } if reason.contains("no longer the one that ran this call")),
        "{refused:?}"
    );
    app.shutdown().await;
}

/// "Always allow" on a call's card is saved only after the host's native question says
/// yes: a script in the page that answers for the user saves nothing, and the call keeps
/// waiting for a real answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_allow_from_a_card_is_saved_only_after_the_native_question() {
    let llm = scripted().await;
    let (home, _) = probe_home(Some(&llm));
    let app = app_at(home.path());
    let (started, mut events, asked) = asked_call(&app, &llm, "show_probe").await;
    let settings_file = app.host().paths().settings_file.clone();
    let policy = || {
        conduit_host::settings::Settings::load(&settings_file)
            .unwrap()
            .tool_policy("probe", "show_probe")
    };
    let questions = Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
    let heard = questions.clone();
    let declined = app
        .answer(
            &started.turn,
            &asked.id,
            Decision::AlwaysAllow,
            move |question| {
                heard.lock().push(question);
                false
            },
        )
        .await;
    assert!(
        matches!(declined, Err(conduit_host::app::AppError::NotAllowed)),
        "{declined:?}"
    );
    assert_eq!(policy(), ToolPolicy::Ask, "nothing saved");
    let question = questions.lock()[0].clone();
    assert!(
        question.starts_with("Always allow show_probe of server probe?"),
        "{question}"
    );
    // The call still waits: the user's own answer reaches it.
    let heard = questions.clone();
    let allowed = app
        .answer(
            &started.turn,
            &asked.id,
            Decision::AlwaysAllow,
            move |question| {
                heard.lock().push(question);
                true
            },
        )
        .await
        .unwrap();
    assert!(allowed);
    assert_eq!(questions.lock().len(), 2);
    assert_eq!(policy(), ToolPolicy::Allow);
    // Answered, the call no longer waits: a second answer asks nothing (the turn may
    // have ended meanwhile).
    let late = app
        .answer(&started.turn, &asked.id, Decision::AlwaysAllow, |_| {
            unreachable!("no question for a call that no longer waits")
        })
        .await;
    assert!(
        matches!(
            late,
            Ok(false) | Err(conduit_host::app::AppError::NoTurn(_))
        ),
        "{late:?}"
    );
    while !matches!(next(&mut events).await, TurnEvent::Ended { .. }) {}
    app.shutdown().await;
}

/// A view's calls go only to tools its conversation offers: a tool switched off for the
/// conversation (or its whole server) is refused though Settings allow it, and a deleted
/// conversation's view calls nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_views_calls_reach_only_the_tools_its_conversation_offers() {
    let llm = scripted().await;
    let (home, _) = probe_home(Some(&llm));
    let app = app_at(home.path());
    let (conversation, call) = ran_call(&app, &llm, "show_probe", json!({"gate": "x"})).await;
    let view = ready(&app, &call, Some(&conversation)).await;
    let never_asked = |question: String| async move {
        panic!("nothing is asked here: {question}");
        #[allow(unreachable_code)]
        false
    };
    let yes = |_: String| async { true };
    let counted = app
        .call_from_view(&view.token, "probe_count", json!({}), yes)
        .await
        .unwrap();
    assert_eq!(counted["content"][0]["text"], "counted 1");

    let off = |toolset: conduit_host::toolset::Toolset| {
        app.set_conversation_toolset(&conversation, &toolset)
            .unwrap();
    };
    off(conduit_host::toolset::Toolset {
        off_servers: Vec::new(),
        off_tools: vec![conduit_host::toolset::ToolKey {
            server: "probe".into(),
            tool: "probe_count".into(),
        }],
    });
    let refused = app
        .call_from_view(&view.token, "probe_count", json!({}), never_asked)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ViewCallError::NotInConversation { .. }),
        "{refused}"
    );
    assert_eq!(
        refused.to_string(),
        "probe_count of probe is switched off for this conversation (its tools were chosen for it)"
    );
    off(conduit_host::toolset::Toolset {
        off_servers: vec!["probe".into()],
        off_tools: Vec::new(),
    });
    assert!(matches!(
        app.call_from_view(&view.token, "probe_count", json!({}), never_asked)
            .await,
        Err(ViewCallError::NotInConversation { .. })
    ));
    // Everything offered again: the view's call runs.
    off(conduit_host::toolset::Toolset::default());
    let counted = app
        .call_from_view(&view.token, "probe_count", json!({}), yes)
        .await
        .unwrap();
    assert_eq!(counted["content"][0]["text"], "counted 2");
    // A question not shown (another was open) is no one's refusal: it does not count.
    let busy = |_: String| async { conduit_host::app_views::ViewAnswer::NotAsked };
    for _ in 0..5 {
        assert!(matches!(
            app.call_from_view(&view.token, "probe_count", json!({}), busy)
                .await,
            Err(ViewCallError::NotAsked)
        ));
    }
    // Turned down three times, the view asks nothing more until it is opened again.
    let no = |_: String| async { false };
    for _ in 0..3 {
        assert!(matches!(
            app.call_from_view(&view.token, "probe_count", json!({}), no)
                .await,
            Err(ViewCallError::NotAllowed { .. })
        ));
    }
    let quiet = app
        .call_from_view(&view.token, "probe_count", json!({}), never_asked)
        .await
        .unwrap_err();
    assert!(matches!(quiet, ViewCallError::DeclinedTooOften), "{quiet}");
    let reopened = ready(&app, &call, Some(&conversation)).await;
    let counted = app
        .call_from_view(&reopened.token, "probe_count", json!({}), yes)
        .await
        .unwrap();
    assert_eq!(counted["content"][0]["text"], "counted 3");
    // A tool only views may call can be always allowed in Settings: its view's calls
    // then run unasked (before, Settings had no fingerprint of it, so it asked each time).
    let listed = app.mcp_server_tools("probe").await.unwrap();
    let shown = &listed
        .tools
        .iter()
        .find(|t| t.tool.name == "probe_count")
        .unwrap()
        .shown;
    app.set_tool_policy("probe", "probe_count", ToolPolicy::Allow, shown, |_| true)
        .await
        .unwrap();
    let counted = app
        .call_from_view(&reopened.token, "probe_count", json!({}), never_asked)
        .await
        .unwrap();
    assert_eq!(counted["content"][0]["text"], "counted 4");
    // The conversation deleted, its view calls nothing.
    app.host().store().unwrap().delete(&conversation).unwrap();
    let refused = app
        .call_from_view(&view.token, "probe_count", json!({}), never_asked)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("its tools could not be read"),
        "{refused}"
    );
    app.shutdown().await;
}
