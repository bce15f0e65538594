//! Servers that ask back: a Python SDK server's elicitation reaches the frontend's asker
//! as a typed form in both protocol eras (elicitation/create in 2025-11-25, an
//! input_required round in 2026-07-28), the answer goes back and the tool uses it, a
//! decline is a decline, and without an asker nothing is declared.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use conduit_mcp::elicit::{
    Asker, Elicitation, ElicitationAnswer, ElicitationKind, ElicitationOffer, FieldInput,
};
use conduit_mcp::runtime::{McpRuntime, RuntimeOptions};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Answers with what it was told and keeps every question.
struct Scripted {
    answer: ElicitationAnswer,
    asked: Mutex<Vec<Elicitation>>,
}

#[async_trait]
impl Asker for Scripted {
    fn offers(&self) -> ElicitationOffer {
        ElicitationOffer {
            form: true,
            url: false,
        }
    }

    async fn elicit(&self, question: Elicitation) -> ElicitationAnswer {
        self.asked.lock().push(question);
        self.answer.clone()
    }
}

async fn runtime(
    era: Option<&str>,
    asker: Option<Arc<Scripted>>,
) -> (McpRuntime, tempfile::TempDir) {
    let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
    let python = root.join(".venv/bin/python");
    assert!(
        python.is_file(),
        "run `make test`: the Python test servers are missing"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcp_servers.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"dyn": {"command": python, "args": [root.join("fixtures/dynamic_tools.py")],
                                       "protocolVersion": era}}})
        .to_string(),
    )
    .unwrap();
    let mut options = RuntimeOptions::new(&file, Duration::from_secs(20));
    if let Some(asker) = asker {
        options = options.with_asker(asker);
    }
    (McpRuntime::start(options).await.unwrap(), dir)
}

async fn ask_name(runtime: &McpRuntime) -> Result<String, String> {
    let connection = runtime.connection("dyn").unwrap();
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        connection.call_tool(
            "ask_name",
            serde_json::Map::new(),
            Arc::new(|_| {}),
            CancellationToken::new(),
        ),
    )
    .await
    .expect("the call ended");
    let result = result.map_err(|e| e.to_string())?;
    let text = serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if result.is_error == Some(true) {
        Err(text)
    } else {
        Ok(text)
    }
}

fn era_of(runtime: &McpRuntime) -> Value {
    serde_json::to_value(&runtime.statuses()[0]).unwrap()["details"]["protocolVersion"].clone()
}

async fn the_answer_reaches_the_server(era: Option<&str>, spoken: &str) {
    let asker = Arc::new(Scripted {
        answer: ElicitationAnswer::Accept(json!({"name": "Ada"}).as_object().unwrap().clone()),
        asked: Mutex::new(Vec::new()),
    });
    let (servers, _dir) = runtime(era, Some(asker.clone())).await;
    assert_eq!(era_of(&servers), spoken);
    assert_eq!(ask_name(&servers).await, Ok("hello Ada, 30".to_owned()));
    let asked = asker.asked.lock().clone();
    assert_eq!(asked.len(), 1, "asked once");
    assert_eq!(asked[0].server, "dyn");
    assert_eq!(asked[0].message, "Who are you?");
    let ElicitationKind::Form { fields } = &asked[0].kind else {
        panic!("{:?}", asked[0].kind)
    };
    let name = fields.iter().find(|f| f.name == "name").unwrap();
    assert!(name.required);
    assert_eq!(name.title.as_deref(), Some("Your name"));
    let age = fields.iter().find(|f| f.name == "age").unwrap();
    assert!(matches!(
        age.input,
        FieldInput::Number {
            integer: true,
            default: Some(d),
            ..
        } if d == 30.0
    ));
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_is_answered_in_2026_through_an_input_required_round() {
    the_answer_reaches_the_server(None, "2026-07-28").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_is_answered_in_2025_through_elicitation_create() {
    the_answer_reaches_the_server(Some("2025-11-25"), "2025-11-25").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_form_is_declined_in_both_eras() {
    for era in [None, Some("2025-11-25")] {
        let asker = Arc::new(Scripted {
            answer: ElicitationAnswer::Decline,
            asked: Mutex::new(Vec::new()),
        });
        let (servers, _dir) = runtime(era, Some(asker.clone())).await;
        assert_eq!(
            ask_name(&servers).await,
            Ok("decline".to_owned()),
            "{era:?}"
        );
        servers.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_does_not_fit_the_form_is_not_sent() {
    // The asker "accepts" without the required name: Conduit declines instead.
    let asker = Arc::new(Scripted {
        answer: ElicitationAnswer::Accept(json!({"age": 3}).as_object().unwrap().clone()),
        asked: Mutex::new(Vec::new()),
    });
    let (servers, _dir) = runtime(None, Some(asker)).await;
    assert_eq!(ask_name(&servers).await, Ok("decline".to_owned()));
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_asker_nothing_is_declared_and_nothing_asked() {
    for era in [None, Some("2025-11-25")] {
        let (servers, _dir) = runtime(era, None).await;
        let answer = ask_name(&servers).await;
        assert!(
            answer
                .as_ref()
                .is_err_and(|e| e.to_lowercase().contains("elicitation")),
            "{era:?}: {answer:?}"
        );
        servers.shutdown().await;
    }
}

/// The ids of processes whose command line holds `marker`.
fn pids(marker: &str) -> Vec<u32> {
    let out = std::process::Command::new("pgrep")
        .args(["-f", marker])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !check() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_whose_server_dies_leaves_the_window() {
    for era in [None, Some("2025-11-25")] {
        let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
        let dir = tempfile::tempdir().unwrap();
        let marker = format!(
            "elicit-dies-{}",
            dir.path()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .replace('.', "")
        );
        let file = dir.path().join("mcp_servers.json");
        std::fs::write(
            &file,
            json!({"mcpServers": {"dyn": {"command": root.join(".venv/bin/python"),
                   "args": [root.join("fixtures/dynamic_tools.py"), &marker],
                   "protocolVersion": era}}})
            .to_string(),
        )
        .unwrap();
        let asker = conduit_host::asks::WindowAsker::new(conduit_host::asks::ANSWER_WAIT);
        let servers = McpRuntime::start(
            RuntimeOptions::new(&file, Duration::from_secs(20)).with_asker(asker.clone()),
        )
        .await
        .unwrap();
        let connection = servers.connection("dyn").unwrap();
        let call = tokio::spawn(async move {
            connection
                .call_tool(
                    "ask_name",
                    serde_json::Map::new(),
                    Arc::new(|_| {}),
                    CancellationToken::new(),
                )
                .await
        });
        until("the question waits", || asker.questions().len() == 1).await;
        let running = pids(&marker);
        assert_eq!(running.len(), 1, "{era:?}");
        std::process::Command::new("kill")
            .args(["-KILL", &running[0].to_string()])
            .status()
            .unwrap();
        until("the question is gone", || asker.questions().is_empty()).await;
        let ended = tokio::time::timeout(Duration::from_secs(15), call).await;
        assert!(ended.is_ok(), "{era:?}: the call ended with its server");
        servers.shutdown().await;
    }
}

/// `conduit chat` at a terminal, a server's question on it, and Ctrl-C: the turn stops
/// and the process ends (130) without a line typed at the question nobody waits for any
/// more. It waited for one, its read of the terminal still running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_at_a_servers_question_on_the_terminal_ends_the_chat() {
    use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
    let chat = Dialect::OpenAiChat;
    let llm = ScriptedLlm::start(vec![chat.turn(
        &[],
        &[ScriptedCall::new("call_1", "dyn__ask_name", json!({}))],
    )])
    .await
    .unwrap();
    let (python, script) = conduit_e2e::python_fixture("dynamic_tools.py").unwrap();
    let home = conduit_e2e::home_with(&llm, json!({"dyn": {"command": python, "args": [script]}}));
    let argv: Vec<String> = [
        conduit_e2e::binary("conduit")
            .unwrap()
            .display()
            .to_string(),
        "chat".into(),
        "--provider".into(),
        "scripted".into(),
        "--approve".into(),
        "auto".into(),
        "Greet me".into(),
    ]
    .into();
    let env = json!({"CONDUIT_HOME": home.path(), "CONDUIT_SECRET_STORE": "file"});
    let steps = vec![
        json!({"expect": "The MCP server \"dyn\" asks:", "timeout": 60}),
        json!({"expect": "Who are you?", "timeout": 10}),
        json!({"key": "ctrl-c"}),
    ];
    let run = conduit_e2e::cli::on_terminal(home.path(), &argv, env, steps, 15).await;
    assert_eq!(run.failure, None, "{}", run.transcript);
    assert_eq!(run.code, Some(130), "{}", run.transcript);
}

/// Opens each page it is asked to, as a user in the browser would: it says yes, and
/// `after` that the page is visited (the step finished), or never when `visits` is off.
struct Browser {
    visits: bool,
    answer: ElicitationAnswer,
    after: Duration,
    asked: Mutex<Vec<Elicitation>>,
}

#[async_trait]
impl Asker for Browser {
    fn offers(&self) -> ElicitationOffer {
        ElicitationOffer {
            form: false,
            url: true,
        }
    }

    async fn elicit(&self, question: Elicitation) -> ElicitationAnswer {
        if let (ElicitationKind::Url { url }, true) = (&question.kind, self.visits) {
            let (url, after) = (url.clone(), self.after);
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                reqwest::get(url).await.unwrap().error_for_status().unwrap();
            });
        }
        self.asked.lock().push(question);
        self.answer.clone()
    }
}

/// The URL-step server (`url_steps.py`) on a free port, `quiet` or not, and a runtime
/// reaching it in `era` with `browser` as its asker.
async fn url_steps_server(
    quiet: bool,
    era: Option<&str>,
    browser: Arc<Browser>,
) -> (McpRuntime, tokio::process::Child, u16, tempfile::TempDir) {
    let args: &[&str] = if quiet { &["quiet"] } else { &[] };
    let (child, port) = conduit_e2e::python_server_on_a_free_port("url_steps.py", args)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcp_servers.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"steps": {"url": format!("http://127.0.0.1:{port}/mcp"),
                                         "protocolVersion": era}}})
        .to_string(),
    )
    .unwrap();
    let runtime =
        McpRuntime::start(RuntimeOptions::new(&file, Duration::from_secs(20)).with_asker(browser))
            .await
            .unwrap();
    (runtime, child, port, dir)
}

/// A call of `tool` on the URL-step server: its text, `Err` for an error; and what the
/// call reported as progress.
async fn call_steps(runtime: &McpRuntime, tool: &str) -> (Result<String, String>, Vec<String>) {
    let connection = runtime.connection("steps").unwrap();
    let said = Arc::new(Mutex::new(Vec::new()));
    let progress: conduit_core::tool::ProgressSink = {
        let said = said.clone();
        Arc::new(move |step: conduit_core::tool::Progress| {
            said.lock().push(step.message.unwrap_or_default());
        })
    };
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        connection.call_tool(
            tool,
            serde_json::Map::new(),
            progress,
            CancellationToken::new(),
        ),
    )
    .await
    .expect("the call ended");
    let said = said.lock().clone();
    let result = match result {
        Err(error) => Err(error.to_string()),
        Ok(result) => {
            let text = serde_json::to_value(&result.content).unwrap()[0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if result.is_error == Some(true) {
                Err(text)
            } else {
                Ok(text)
            }
        }
    };
    (result, said)
}

async fn runs_of(port: u16) -> String {
    reqwest::get(format!("http://127.0.0.1:{port}/runs"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// A tool whose server needs a step in the browser first (-32042, 2025-11-25): the page
/// is put to the user once, the call waits while they finish there, and runs once when
/// the server says the step is done; a server that does not say is asked again after a
/// pause, and in the 2026-07-28 era as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_needs_a_step_in_the_browser_runs_once_the_user_finished_it() {
    for (quiet, era) in [
        (false, Some("2025-11-25")),
        (true, Some("2025-11-25")),
        (true, None),
    ] {
        let browser = Arc::new(Browser {
            visits: true,
            answer: ElicitationAnswer::Accept(serde_json::Map::new()),
            after: Duration::from_millis(2500),
            asked: Mutex::new(Vec::new()),
        });
        let (servers, _child, port, _dir) = url_steps_server(quiet, era, browser.clone()).await;
        let started = std::time::Instant::now();
        let (result, progress) = call_steps(&servers, "read_calendar").await;
        let took = started.elapsed();
        assert_eq!(
            result,
            Ok("3 meetings today (run 1)".to_owned()),
            "{quiet} {era:?}"
        );
        assert_eq!(runs_of(port).await, "1");
        // Asked once, though the call went to the server more than once.
        let asked = browser.asked.lock().clone();
        assert_eq!(asked.len(), 1, "{quiet} {era:?}: {asked:?}");
        assert_eq!(asked[0].server, "steps");
        assert_eq!(asked[0].message, "Connect your calendar to Conduit");
        assert_eq!(
            asked[0].kind,
            ElicitationKind::Url {
                url: format!("http://127.0.0.1:{port}/consent?id=calendar-1")
            }
        );
        assert_eq!(
            progress,
            vec!["Waiting for you to finish in your browser".to_owned()]
        );
        // It waited for the user's 2.5 s in the browser, and (told) not much longer.
        assert!(took >= Duration::from_millis(2500), "{took:?}");
        if !quiet {
            assert!(took < Duration::from_secs(4), "{took:?}");
        }
        servers.shutdown().await;
    }
}

/// A resource read and a prompt whose server needs a step in the browser first (-32042):
/// each puts its own page to the user once, waits while they finish there, and then gets
/// what it asked for; told by the server or not, in both eras. A page not opened ends the
/// request, saying it did not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_or_a_prompt_that_needs_a_step_in_the_browser_goes_on_once_it_is_done() {
    for (quiet, era) in [(false, Some("2025-11-25")), (true, None)] {
        let browser = Arc::new(Browser {
            visits: true,
            answer: ElicitationAnswer::Accept(serde_json::Map::new()),
            after: Duration::from_millis(1500),
            asked: Mutex::new(Vec::new()),
        });
        let (servers, _child, port, _dir) = url_steps_server(quiet, era, browser.clone()).await;
        let connection = servers.connection("steps").unwrap();
        let read = tokio::time::timeout(
            Duration::from_secs(60),
            connection.read_resource("calendar://day/monday"),
        )
        .await
        .expect("the read ended")
        .unwrap();
        assert_eq!(
            serde_json::to_value(&read.contents).unwrap()[0]["text"],
            "Meetings on monday: standup at 9",
            "{quiet} {era:?}"
        );
        let prompt = tokio::time::timeout(
            Duration::from_secs(60),
            connection.prompt("plan_day", serde_json::Map::new()),
        )
        .await
        .expect("the prompt ended")
        .unwrap();
        assert_eq!(
            serde_json::to_value(&prompt.messages).unwrap()[0]["content"]["text"],
            "Plan my day around the standup at 9",
            "{quiet} {era:?}"
        );
        // Each asked once, its own page.
        let asked: Vec<(String, ElicitationKind)> = browser
            .asked
            .lock()
            .iter()
            .map(|question| (question.message.clone(), question.kind.clone()))
            .collect();
        let page = |step: &str| ElicitationKind::Url {
            url: format!("http://127.0.0.1:{port}/consent?id={step}"),
        };
        assert_eq!(
            asked,
            vec![
                (
                    "Connect your calendar files to Conduit".to_owned(),
                    page("files-1")
                ),
                ("Connect your notes to Conduit".to_owned(), page("notes-1")),
            ],
            "{quiet} {era:?}"
        );
        servers.shutdown().await;
    }

    let declined = Arc::new(Browser {
        visits: false,
        answer: ElicitationAnswer::Decline,
        after: Duration::ZERO,
        asked: Mutex::new(Vec::new()),
    });
    let (servers, _child, _port, _dir) =
        url_steps_server(false, Some("2025-11-25"), declined.clone()).await;
    let connection = servers.connection("steps").unwrap();
    let error = connection
        .read_resource("calendar://day/monday")
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("its page was not opened"), "{error}");
    assert!(
        error.contains("(Connect your calendar files to Conduit, on 127.0.0.1)"),
        "{error}"
    );
    assert!(error.contains("the request did not run"), "{error}");
    let error = connection
        .prompt("plan_day", serde_json::Map::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("the request did not run"), "{error}");
    assert_eq!(declined.asked.lock().len(), 2);
    servers.shutdown().await;
}

/// A page the user does not open, a frontend that cannot show pages, and a server that
/// names more pages than a call may send the user to: each ends the call, which did not
/// run, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_in_the_browser_not_taken_ends_the_call_unrun() {
    let declined = Arc::new(Browser {
        visits: false,
        answer: ElicitationAnswer::Decline,
        after: Duration::ZERO,
        asked: Mutex::new(Vec::new()),
    });
    let (servers, _child, port, _dir) =
        url_steps_server(false, Some("2025-11-25"), declined.clone()).await;
    let (result, _) = call_steps(&servers, "read_calendar").await;
    let error = result.unwrap_err();
    assert!(error.contains("its page was not opened"), "{error}");
    assert!(
        error.contains("(Connect your calendar to Conduit, on 127.0.0.1)"),
        "{error}"
    );
    assert!(error.contains("the call did not run"), "{error}");
    assert_eq!(declined.asked.lock().len(), 1);
    // Four pages at once: more than a call may ask for, and none is put to the user.
    let (result, _) = call_steps(&servers, "many_steps").await;
    let error = result.unwrap_err();
    assert!(error.contains("more than 3 pages"), "{error}");
    assert_eq!(declined.asked.lock().len(), 1);
    assert_eq!(runs_of(port).await, "0");
    servers.shutdown().await;

    // A runtime whose frontend shows no pages (`conduit chat` piped, say).
    let (_child, port) = conduit_e2e::python_server_on_a_free_port("url_steps.py", &[])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcp_servers.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"steps": {"url": format!("http://127.0.0.1:{port}/mcp")}}})
            .to_string(),
    )
    .unwrap();
    let servers = McpRuntime::start(RuntimeOptions::new(&file, Duration::from_secs(20)))
        .await
        .unwrap();
    let (result, _) = call_steps(&servers, "read_calendar").await;
    let error = result.unwrap_err();
    assert!(error.contains("which Conduit cannot show here"), "{error}");
    assert!(
        error.contains("(Connect your calendar to Conduit, on 127.0.0.1)"),
        "{error}"
    );
    assert_eq!(runs_of(port).await, "0");
    servers.shutdown().await;
}
