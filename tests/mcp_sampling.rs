//! Servers that ask back for a model run (sampling) and for the client's folders (roots),
//! against real servers: server-everything (`trigger-sampling-request`, `get-roots-list`)
//! and a Python SDK server in both protocol eras (`sampling/createMessage` and `roots/list`
//! in 2025-11-25, input_required rounds in 2026-07-28). Sampling goes through the window's
//! asker and the host's provider machinery to the scripted LLM server, so what the server
//! gets back is the scripted model's answer; a deny is the spec's user-rejected error.
//! Roots come from the entry, and an edit of them reaches the running server without a
//! restart.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use conduit_host::asks::{
    ANSWER_WAIT, SamplingQuestion, SamplingReply, SamplingState, WindowAsker,
};
use conduit_host::mcp_client::runtime::{McpRuntime, RuntimeOptions};
use conduit_host::mcp_client::sampling::SamplingContent;
use conduit_host::sampling::ModelPick;
use conduit_host::{Host, Paths};
use conduit_testing::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// Waits, within a bound, for `check` to hold.
async fn until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Setup {
    servers: McpRuntime,
    asker: Arc<WindowAsker>,
    llm: ScriptedLlm,
    file: PathBuf,
    _home: tempfile::TempDir,
}

/// A host whose only provider is the scripted LLM server (`scripted`, model `m`), the
/// window's asker on it, and the servers of `entries`.
async fn setup(entries: Value, replies: Vec<conduit_testing::llm_server::Reply>) -> Setup {
    setup_with(entries, replies, None).await
}

/// [`setup`], the provider in `tool_mode` when given (`text`: tools as text).
async fn setup_with(
    entries: Value,
    replies: Vec<conduit_testing::llm_server::Reply>,
    tool_mode: Option<&str>,
) -> Setup {
    let llm = ScriptedLlm::start(replies).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("mcp_servers.json");
    std::fs::write(&file, json!({"mcpServers": entries}).to_string()).unwrap();
    let host = Arc::new(Host::new(Paths::under_home(
        home.path().to_owned(),
        Some(file.clone()),
    )));
    let settings = host.paths().settings_file.clone();
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let mut provider_settings = llm.provider_settings();
    if let Some(mode) = tool_mode {
        provider_settings["providers"][0]["toolMode"] = mode.into();
    }
    std::fs::write(&settings, provider_settings.to_string()).unwrap();
    let asker = WindowAsker::with_sampler(ANSWER_WAIT, host.clone());
    let servers = McpRuntime::start(
        RuntimeOptions::new(&file, Duration::from_secs(30)).with_asker(asker.clone()),
    )
    .await
    .unwrap();
    Setup {
        servers,
        asker,
        llm,
        file,
        _home: home,
    }
}

fn everything(extra: Value) -> Value {
    let mut entry = json!({"command": "node",
        "args": [conduit_e2e::npm_server("server-everything").unwrap(), "stdio"]});
    if let (Some(entry), Some(extra)) = (entry.as_object_mut(), extra.as_object()) {
        entry.extend(extra.clone());
    }
    entry
}

fn python_server(era: &str, extra: Value) -> Value {
    let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
    let python = root.join(".venv/bin/python");
    assert!(
        python.is_file(),
        "run `make test`: the Python test servers are missing"
    );
    let mut entry = json!({"command": python, "args": [root.join("fixtures/sampling_tools.py")],
        "protocolVersion": era});
    if let (Some(entry), Some(extra)) = (entry.as_object_mut(), extra.as_object()) {
        entry.extend(extra.clone());
    }
    entry
}

/// Calls `tool` on `server`; the text of its result, `Err` for an error result or a
/// failed call.
fn call(
    servers: &McpRuntime,
    server: &str,
    tool: &str,
    arguments: Value,
) -> tokio::task::JoinHandle<Result<String, String>> {
    let connection = servers.connection(server).expect("the server runs");
    let tool = tool.to_owned();
    tokio::spawn(async move {
        let arguments: Map<String, Value> = serde_json::from_value(arguments).unwrap();
        let result = tokio::time::timeout(
            Duration::from_secs(60),
            connection.call_tool(&tool, arguments, Arc::new(|_| {}), CancellationToken::new()),
        )
        .await
        .expect("the call ended")
        .map_err(|e| e.to_string())?;
        let text = serde_json::to_value(&result.content).unwrap()[0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if result.is_error == Some(true) {
            Err(text)
        } else {
            Ok(text)
        }
    })
}

async fn asked(asker: &WindowAsker) -> SamplingQuestion {
    until("a sampling request waits", || {
        asker
            .sampling_requests()
            .into_iter()
            .find(|q| q.state == SamplingState::Asking)
    })
    .await
}

fn scripted() -> ModelPick {
    ModelPick {
        provider: "scripted".into(),
        model: Some("m".into()),
    }
}

/// Approves the waiting request on the scripted model, waits for its result, and sends it.
async fn approve(asker: &WindowAsker, question: &SamplingQuestion) -> Vec<SamplingContent> {
    asker
        .answer_sampling(&question.id, SamplingReply::Run { pick: scripted() })
        .unwrap();
    let result = until("the model's answer is shown", || {
        asker
            .sampling_requests()
            .into_iter()
            .find_map(|q| match q.state {
                SamplingState::Review { result, .. } if q.id == question.id => Some(result),
                SamplingState::Failed { error, .. } => panic!("the run failed: {error}"),
                _ => None,
            })
    })
    .await;
    asker
        .answer_sampling(&question.id, SamplingReply::Send)
        .unwrap();
    result.content
}

fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_samples_on_the_users_model_only_when_approved() {
    let setup = setup(
        json!({"everything": everything(json!({}))}),
        vec![Dialect::OpenAiChat.text(&["Paris is ", "sunny today."])],
    )
    .await;
    let running = call(
        &setup.servers,
        "everything",
        "trigger-sampling-request",
        json!({"prompt": "the weather in Paris", "maxTokens": 50}),
    );
    let question = asked(&setup.asker).await;
    let request = &question.request;
    assert_eq!(request.server, "everything");
    assert_eq!(
        request.system_prompt.as_deref(),
        Some("You are a helpful test server.")
    );
    assert_eq!(request.max_tokens, 50);
    assert!(
        matches!(&request.messages[0].content[0], SamplingContent::Text { text } if text.contains("the weather in Paris")),
        "{request:?}"
    );
    assert!(
        setup.llm.requests().is_empty(),
        "nothing runs before the user approves"
    );
    let content = approve(&setup.asker, &question).await;
    assert_eq!(
        content,
        [SamplingContent::Text {
            text: "Paris is sunny today.".into()
        }]
    );
    let answer = running.await.unwrap().unwrap();
    assert!(answer.contains("Paris is sunny today."), "{answer}");
    assert!(answer.contains("\"model\": \"m\""), "{answer}");
    // The model saw the server's system prompt and message, within its token limit.
    let sent = &setup.llm.requests()[0].body;
    assert_eq!(sent["model"], "m");
    assert_eq!(sent["messages"][0]["role"], "system");
    assert_eq!(
        text_of(&sent["messages"][0]),
        "You are a helpful test server."
    );
    assert!(text_of(&sent["messages"][1]).contains("the weather in Paris"));
    let limit = sent
        .get("max_completion_tokens")
        .or(sent.get("max_tokens"))
        .cloned();
    assert_eq!(limit, Some(json!(50)), "{sent}");

    // Denied: the server hears the spec's user-rejected error and no model runs.
    let running = call(
        &setup.servers,
        "everything",
        "trigger-sampling-request",
        json!({"prompt": "again"}),
    );
    let question = asked(&setup.asker).await;
    setup
        .asker
        .answer_sampling(&question.id, SamplingReply::Deny)
        .unwrap();
    let refused = running.await.unwrap().unwrap_err();
    assert!(
        refused.contains("User rejected sampling request"),
        "{refused}"
    );
    assert_eq!(setup.llm.requests().len(), 1);
    setup.servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_server_samples_with_tools_in_both_eras() {
    for era in ["2025-11-25", "2026-07-28"] {
        let setup = setup(
            json!({"py": python_server(era, json!({}))}),
            vec![Dialect::OpenAiChat.turn(
                &["Let me check."],
                &[ScriptedCall::new(
                    "call_1",
                    "forecast",
                    json!({"city": "Paris"}),
                )],
            )],
        )
        .await;
        let running = call(&setup.servers, "py", "ask_model", json!({}));
        let question = asked(&setup.asker).await;
        let request = &question.request;
        assert_eq!(request.model_hints, ["claude-sonnet"], "{era}");
        assert_eq!(request.intelligence_priority, Some(0.8), "{era}");
        assert_eq!(request.tools[0].name, "forecast", "{era}");
        approve(&setup.asker, &question).await;
        let answer: Value = serde_json::from_str(&running.await.unwrap().unwrap()).unwrap();
        assert_eq!(answer["model"], "m", "{era}: {answer}");
        assert_eq!(answer["stopReason"], "toolUse", "{era}: {answer}");
        let uses: Vec<&Value> = answer["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["type"] == "tool_use")
            .collect();
        assert_eq!(uses.len(), 1, "{era}: {answer}");
        assert_eq!(uses[0]["name"], "forecast");
        assert_eq!(uses[0]["input"], json!({"city": "Paris"}));
        // The tool was offered to the model, and Conduit did not run it.
        let sent = &setup.llm.requests()[0].body;
        assert_eq!(sent["tools"][0]["function"]["name"], "forecast", "{sent}");
        assert_eq!(setup.llm.requests().len(), 1);

        let running = call(&setup.servers, "py", "ask_model", json!({}));
        let question = asked(&setup.asker).await;
        setup
            .asker
            .answer_sampling(&question.id, SamplingReply::Deny)
            .unwrap();
        let refused = running.await.unwrap().unwrap_err();
        assert!(
            refused.contains("User rejected sampling request"),
            "{era}: {refused}"
        );
        setup.servers.shutdown().await;
    }
}

/// A request's real-size images reach the model, and leave nothing in the media folder:
/// stored there, no message ever referenced them, and a server sending distinct images
/// filled the disk for a day before the sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampling_requests_images_reach_the_model_and_leave_no_files() {
    let setup = setup(
        json!({"py": python_server("2025-11-25", json!({}))}),
        vec![Dialect::OpenAiChat.text(&["They match."])],
    )
    .await;
    let running = call(&setup.servers, "py", "compare_frames", json!({}));
    let question = asked(&setup.asker).await;
    approve(&setup.asker, &question).await;
    running.await.unwrap().unwrap();
    let sent = serde_json::to_string(&setup.llm.requests()[0].body).unwrap();
    assert_eq!(
        sent.matches("data:image/png;base64,").count(),
        2,
        "both images went to the model"
    );
    let media = setup._home.path().join("media");
    let files: Vec<_> = std::fs::read_dir(&media)
        .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
        .unwrap_or_default();
    assert!(files.is_empty(), "{files:?}");
    setup.servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_in_text_tool_mode_gets_a_sampling_requests_tools_as_text() {
    let setup = setup_with(
        json!({"py": python_server("2025-11-25", json!({}))}),
        vec![Dialect::OpenAiChat.text(&[
            "<tool_call><name>forecast</name><arguments>{\"city\": \"Paris\"}</arguments></tool_call>",
        ])],
        Some("text"),
    )
    .await;
    let running = call(&setup.servers, "py", "ask_model", json!({}));
    let question = asked(&setup.asker).await;
    approve(&setup.asker, &question).await;
    let answer: Value = serde_json::from_str(&running.await.unwrap().unwrap()).unwrap();
    // The request carried no native tools; the model's text call came back as a tool use.
    let sent = &setup.llm.requests()[0].body;
    assert!(sent.get("tools").is_none(), "{sent}");
    assert!(sent.to_string().contains("forecast"), "{sent}");
    // One block comes back as the content itself.
    assert_eq!(answer["stopReason"], "toolUse", "{answer}");
    assert_eq!(answer["content"]["type"], "tool_use", "{answer}");
    assert_eq!(answer["content"]["name"], "forecast", "{answer}");
    assert_eq!(answer["content"]["input"], json!({"city": "Paris"}));
    setup.servers.shutdown().await;
}

fn uri(folder: &Path) -> String {
    format!("file://{}", folder.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entrys_roots_are_offered_and_an_edit_reaches_the_running_server() {
    let folders = tempfile::tempdir().unwrap();
    let (first, second) = (folders.path().join("first"), folders.path().join("second"));
    let entries = |roots: Vec<&PathBuf>| {
        json!({
            "everything": everything(json!({"roots": roots})),
            "py": python_server("2026-07-28", json!({"roots": roots})),
            "plain": everything(json!({})),
        })
    };
    let setup = setup(entries(vec![&first]), Vec::new()).await;
    let listed = call(&setup.servers, "everything", "get-roots-list", json!({}))
        .await
        .unwrap()
        .unwrap();
    assert!(listed.contains(&uri(&first)), "{listed}");
    let listed = call(&setup.servers, "py", "client_roots", json!({}))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(listed, uri(&first));
    // An entry without roots declares none: the server offers no roots tool.
    let plain = setup.servers.server_tools("plain").unwrap();
    assert!(!plain.iter().any(|t| t.name == "get-roots-list"));

    let before = setup.servers.connection("everything").unwrap();
    std::fs::write(
        &setup.file,
        json!({"mcpServers": entries(vec![&first, &second])}).to_string(),
    )
    .unwrap();
    setup.servers.reload().await.unwrap();
    let after = setup.servers.connection("everything").unwrap();
    assert!(Arc::ptr_eq(&before, &after), "told, not restarted");
    // server-everything asks again when told the list changed; wait for it to have.
    let mut listed = String::new();
    for _ in 0..100 {
        listed = call(&setup.servers, "everything", "get-roots-list", json!({}))
            .await
            .unwrap()
            .unwrap();
        if listed.contains(&uri(&second)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        listed.contains(&uri(&first)) && listed.contains(&uri(&second)),
        "{listed}"
    );
    let listed = call(&setup.servers, "py", "client_roots", json!({}))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(listed, format!("{}\n{}", uri(&first), uri(&second)));
    setup.servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_sampler_sampling_is_not_declared() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("mcp_servers.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"everything": everything(json!({}))}}).to_string(),
    )
    .unwrap();
    // The window's asker without a sampler answers questions only.
    let servers = McpRuntime::start(
        RuntimeOptions::new(&file, Duration::from_secs(30))
            .with_asker(WindowAsker::new(ANSWER_WAIT)),
    )
    .await
    .unwrap();
    let tools = servers.server_tools("everything").unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"));
    assert!(
        !tools.iter().any(|t| t.name == "trigger-sampling-request"),
        "{tools:?}"
    );
    servers.shutdown().await;
}

/// Runs `conduit mcp call everything trigger-sampling-request` with `home`: on a
/// pseudo-terminal (`tests/support/pty_driver.py`), answering each question once it is
/// shown, as a person does (what is typed before a question is dropped), or without a
/// terminal.
async fn cli_sampling(home: &Path, answers: &[(&str, &str)], terminal: bool) -> (bool, String) {
    let conduit = conduit_e2e::binary("conduit").unwrap();
    let args = [
        "mcp",
        "call",
        "everything",
        "trigger-sampling-request",
        "--args",
        r#"{"prompt":"from the terminal","maxTokens":30}"#,
    ];
    if !terminal {
        let out = tokio::process::Command::new(conduit)
            .args(args)
            .env("CONDUIT_HOME", home)
            .env("CONDUIT_SECRET_STORE", "file")
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap();
        return (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        );
    }
    let mut argv = vec![conduit.display().to_string()];
    argv.extend(args.iter().map(|arg| (*arg).to_owned()));
    let steps: Vec<serde_json::Value> = answers
        .iter()
        .flat_map(|(question, answer)| {
            [
                json!({"expect": question, "timeout": 60}),
                json!({"send": format!("{answer}\r")}),
            ]
        })
        .collect();
    let env = json!({"CONDUIT_HOME": home, "CONDUIT_SECRET_STORE": "file"});
    let run = conduit_e2e::cli::on_terminal(home, &argv, env, steps, 60).await;
    assert_eq!(run.failure, None, "{}", run.transcript);
    (run.code == Some(0), run.transcript)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_asks_on_a_terminal_and_offers_nothing_without_one() {
    let llm = ScriptedLlm::start(vec![Dialect::OpenAiChat.text(&["Terminal answer."])])
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"everything": everything(json!({}))}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        home.path().join("settings.json"),
        llm.provider_settings().to_string(),
    )
    .unwrap();
    let run = |answers: &'static [(&'static str, &'static str)], terminal: bool| {
        cli_sampling(home.path(), answers, terminal)
    };
    const RUN_IT: &str = "Run it for \"everything\"? [y/N]";
    const SEND_IT: &str = "Send this to \"everything\"? [y/N]";

    // A no: nothing runs, the server hears the user-rejected error.
    let (_, shown) = run(&[(RUN_IT, "n")], true).await;
    assert!(
        shown.contains("\"everything\" asks to run a model (at most 30 tokens) on scripted / m"),
        "{shown}"
    );
    assert!(shown.contains("You are a helpful test server."), "{shown}");
    assert!(shown.contains("User rejected sampling request"), "{shown}");
    assert!(llm.requests().is_empty(), "nothing ran");

    // Yes to run, yes to send: the scripted model's answer reaches the server.
    let (ok, shown) = run(&[(RUN_IT, "y"), (SEND_IT, "y")], true).await;
    assert!(ok, "{shown}");
    assert!(
        shown.contains("The model m answered:\r\n  │ Terminal answer."),
        "{shown}"
    );
    assert!(shown.contains("\"text\": \"Terminal answer.\""), "{shown}");
    assert_eq!(llm.requests().len(), 1);

    // Without a terminal sampling is not declared, so the server has no such tool.
    let (ok, shown) = run(&[], false).await;
    assert!(!ok, "{shown}");
    assert!(shown.contains("trigger-sampling-request"), "{shown}");
    assert_eq!(llm.requests().len(), 1);
}
