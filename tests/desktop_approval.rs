//! Approval answers exactly the call it shows, in the real app under Xvfb: a Gemini-protocol
//! model whose calls come without ids (so the provider numbers each response's calls
//! from 0 again) gets one card per call, the Allow buttons only on the pending call,
//! "Always allow" saved for that call's tool, a stale answer refused, the real server and
//! tool named, long arguments shown whole, an allow asked again after the server
//! changed, and the calls of one response past eight waiting to run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use conduit_e2e::artifacts_dir;
use conduit_e2e::desktop::Window;
use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const KEY_VAR: &str = "CONDUIT_TEST_APPROVAL_GEMINI_KEY";

struct Fixture {
    home: tempfile::TempDir,
    llm: ScriptedLlm,
    shots: PathBuf,
}

impl Fixture {
    async fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        let llm = ScriptedLlm::start(Vec::new()).await.unwrap();
        llm.answer_models(json!({"models": [{"name": "models/m", "supportedGenerationMethods": ["generateContent"]}]}));
        let settings = json!({"providers": [{
            "id": "gemini",
            "protocol": "gemini",
            "baseUrl": Dialect::Gemini.base_url(&llm.url()),
            "defaultModel": "m",
            "apiKeyEnv": KEY_VAR
        }]});
        std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
        let fixture = Self {
            home,
            llm,
            shots: artifacts_dir("desktop-approval"),
        };
        fixture.write_servers("");
        fixture
    }

    /// Servers `fs` and `sh`, both the approval test server; `extra` changes `sh`'s
    /// arguments and its `run` tool's description.
    fn write_servers(&self, extra: &str) {
        let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
        let python = root.join(".venv/bin/python");
        assert!(
            python.is_file(),
            "run `make test`: the Python test servers are missing"
        );
        let script = root.join("fixtures/approval_tools.py");
        let mut sh_args = vec![json!(script)];
        if !extra.is_empty() {
            sh_args.push(json!(extra));
        }
        let servers = json!({"mcpServers": {
            "fs": {"command": python, "args": [script]},
            "sh": {"command": python, "args": sh_args}
        }});
        std::fs::write(
            self.home.path().join("mcp_servers.json"),
            servers.to_string(),
        )
        .unwrap();
    }

    async fn open(&self) -> Window {
        let window = Window::start(
            &[
                ("CONDUIT_HOME", self.home.path()),
                (KEY_VAR, Path::new("test-gemini-key")),
            ],
            WAIT,
        )
        .await;
        // Ready when the provider's model shows in the picker.
        window.model_shown("m").await;
        window
    }

    fn settings(&self) -> Value {
        let text = std::fs::read_to_string(self.home.path().join("settings.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn shot(&self, name: &str) -> PathBuf {
        self.shots.join(name)
    }
}

fn no_id_call(name: &str, arguments: Value) -> ScriptedCall {
    // An empty id is what a Gemini call without one decodes to: Conduit numbers it.
    ScriptedCall::new("", name, arguments)
}

/// Every card: its call id, tool, server, state and whether it has approval controls.
async fn cards(window: &Window) -> Vec<Value> {
    let cards = window
        .js(r#"return [...document.querySelectorAll('article[data-call-id]')].map(card => ({
                 id: card.dataset.callId,
                 tool: card.querySelector('[aria-label="Tool name"]')?.textContent.trim(),
                 server: card.querySelector('[aria-label="Server name"]')?.textContent.trim() ?? null,
                 state: card.dataset.state,
                 controls: card.querySelectorAll('[aria-label="Approve tool call"] button').length
               }));"#)
        .await;
    cards.as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_answers_exactly_the_call_it_shows() {
    let gemini = Dialect::Gemini;
    let fixture = Fixture::new().await;
    // A long command: it must show whole, scrolling, while approval is pending.
    let long_command = (1..=80)
        .map(|n| format!("echo line {n} of a long command that goes on and on"))
        .collect::<Vec<_>>()
        .join(" && ")
        + " && echo THE-END-OF-THE-COMMAND";
    fixture.llm.push(vec![
        gemini.turn(
            &[],
            &[no_id_call("fs__read_file", json!({"path": "notes.txt"}))],
        ),
        gemini.turn(
            &[],
            &[no_id_call("sh__run", json!({"command": long_command}))],
        ),
        gemini.text(&["Read and ran."]),
    ]);
    let window = fixture.open().await;
    window.send("Read my notes, then run the command").await;

    window.tool_state("read_file", "Waiting for approval").await;
    let first = cards(&window).await;
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["server"], "fs", "the real server: {first:?}");
    let question = window
        .js(r#"return document.querySelector('[aria-label="Approval question"]').textContent.replace(/\s+/g, " ").trim();"#)
        .await;
    assert!(
        question
            .as_str()
            .unwrap()
            .contains("run read_file of server fs"),
        "{question}"
    );
    window.shot(&fixture.shot("01-first-call.png")).await;
    window.click_button("Allow once").await;

    // The next response numbers its call from 0 again; it gets its own card and id.
    window.tool_state("run", "Waiting for approval").await;
    window.tool_state("read_file", "Done").await;
    let cards = cards(&window).await;
    assert_eq!(cards.len(), 2, "{cards:?}");
    let (read, run) = (&cards[0], &cards[1]);
    assert_ne!(read["id"], run["id"], "{cards:?}");
    assert_eq!(read["tool"], "read_file");
    assert_eq!(read["state"], "done");
    assert_eq!(
        read["controls"], 0,
        "the old card has no buttons: {cards:?}"
    );
    assert_eq!(run["tool"], "run");
    assert_eq!(run["server"], "sh");
    assert_eq!(run["controls"], 4, "{cards:?}");
    assert_eq!(
        window
            .js(r#"return document.querySelectorAll('[aria-label="Approve tool call"]').length;"#)
            .await,
        1
    );

    // The arguments show whole while pending: not folded, the end is there, and the box
    // scrolls.
    let shown = window
        .js(r#"const pre = document.querySelector('article[data-state="approval"] pre[aria-label="Arguments"]');
               return { folded: pre.closest('details') !== null,
                        whole: pre.textContent.includes("THE-END-OF-THE-COMMAND"),
                        scrolls: pre.scrollHeight > pre.clientHeight,
                        overflow: getComputedStyle(pre).overflowY };"#)
        .await;
    assert_eq!(shown["folded"], false, "{shown}");
    assert_eq!(shown["whole"], true, "{shown}");
    assert_eq!(shown["scrolls"], true, "{shown}");
    assert_eq!(shown["overflow"], "auto", "{shown}");
    window
        .js(r#"document.querySelector('article[data-state="approval"]').scrollIntoView(); return null;"#)
        .await;
    window.shot(&fixture.shot("02-long-arguments.png")).await;
    window
        .js(r#"const pre = document.querySelector('article[data-state="approval"] pre[aria-label="Arguments"]');
               pre.scrollTop = pre.scrollHeight; return null;"#)
        .await;
    window
        .shot(&fixture.shot("03-long-arguments-scrolled.png"))
        .await;

    // A stale answer, for the call already answered, is refused and saves nothing.
    let read_id = read["id"].as_str().unwrap();
    // The running turn's id, as a page script could learn it.
    let turn = window
        .wait(r#"document.querySelector('[role="log"]').dataset.turn"#)
        .await;
    window
        .js(&format!(
            r#"window.__TAURI_INTERNALS__.invoke("answer_approval",
                 {{ turn: {turn}, callId: {read_id:?}, decision: "always_allow" }})
                 .then(r => window.__stale = JSON.stringify(r), e => window.__stale = "error: " + e);
               return null;"#
        ))
        .await;
    let stale = window.wait("window.__stale").await;
    assert_eq!(stale, "false", "a stale answer is refused");
    assert!(fixture.settings().get("mcpServers").is_none());

    // A script answering "Always allow" for the pending call only raises the native
    // question; cancelled there, nothing is saved and the call keeps waiting.
    let run_id = run["id"].as_str().unwrap();
    window
        .js(&format!(
            r#"window.__TAURI_INTERNALS__.invoke("answer_approval",
                 {{ turn: {turn}, callId: {run_id:?}, decision: "always_allow" }})
                 .then(r => window.__scripted = JSON.stringify(r), e => window.__scripted = "error: " + JSON.stringify(e));
               return null;"#
        ))
        .await;
    conduit_e2e::native_dialog::answer(conduit_e2e::native_dialog::Answer::Cancel, WAIT)
        .await
        .unwrap();
    let scripted = window.wait("window.__scripted").await;
    assert!(
        scripted
            .as_str()
            .unwrap()
            .contains("not allowed in Conduit's question"),
        "{scripted}"
    );
    assert!(fixture.settings().get("mcpServers").is_none());
    window.tool_state("run", "Waiting for approval").await;

    // "Always allow" acts on the pending call alone and saves its own tool, once the
    // user confirms it in the native question.
    window.click_button("Always allow this tool").await;
    conduit_e2e::native_dialog::answer(conduit_e2e::native_dialog::Answer::Press('a'), WAIT)
        .await
        .unwrap();
    window.answer_contains("Read and ran.").await;
    window.tool_state("run", "Done").await;
    let settings = fixture.settings();
    assert_eq!(
        settings["mcpServers"]["sh"]["toolApproval"]["run"], "allow",
        "{settings}"
    );
    assert!(
        settings["mcpServers"]["sh"]["approved"]["run"]["server"].is_string(),
        "{settings}"
    );
    assert!(
        settings["mcpServers"].get("fs").is_none(),
        "nothing saved for read_file: {settings}"
    );
    // Each result went back to the model with the call it answers, without made-up ids.
    let last = fixture.llm.requests().last().unwrap().body.clone();
    let responses: Vec<&Value> = last["contents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["parts"].as_array().unwrap())
        .filter_map(|p| p.get("functionResponse"))
        .collect();
    assert_eq!(responses.len(), 2, "{last}");
    assert_eq!(responses[0]["name"], "fs__read_file");
    assert!(responses[0].to_string().contains("contents of notes.txt"));
    assert_eq!(responses[1]["name"], "sh__run");
    assert!(responses[1].to_string().contains("would run: echo line 1"));
    assert!(
        !last.to_string().contains("gemini-call-"),
        "Conduit's numbering never goes to the wire"
    );
    let run_id = run["id"].as_str().unwrap();
    assert!(
        !last.to_string().contains(read_id) && !last.to_string().contains(run_id),
        "nor Conduit's own ids"
    );
    window.shot(&fixture.shot("04-allowed.png")).await;

    // The server changes after "always" (another command line, another description): the
    // next call is asked about again, and the card says what changed.
    fixture.write_servers("CHANGED");
    // Wait until the watcher restarted `sh` with the new definition, as Settings list it
    // (the Settings window: the chat window may not call settings commands).
    let chat_window = window.session.open_settings_window(WAIT).await.unwrap();
    window
        .js(r#"window.__changed = false;
               const poll = () => window.__TAURI_INTERNALS__.invoke("mcp_server_tools", { server: "sh" })
                 .then(listed => {
                   const run = listed.tools.find(t => t.name === "run");
                   if (run && run.description.includes("CHANGED")) window.__changed = listed;
                   else setTimeout(poll, 100);
                 }, () => setTimeout(poll, 100));
               poll();
               return null;"#)
        .await;
    let listed = window.wait("window.__changed").await;
    let settings_window = window.session.client.window().await.unwrap();
    // Settings marks the allow as needing re-approval, and says why.
    let run_setting = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "run")
        .unwrap();
    let why = run_setting["reapproval"].to_string();
    assert!(
        why.contains("command and arguments") && why.contains("description"),
        "{run_setting}"
    );
    window
        .session
        .client
        .switch_to_window(chat_window)
        .await
        .unwrap();
    fixture.llm.push(vec![
        gemini.turn(&[], &[no_id_call("sh__run", json!({"command": "ls"}))]),
        gemini.text(&["Not run."]),
    ]);
    window.send("Run ls").await;
    window.tool_state("run", "Waiting for approval").await;
    let changed = window
        .wait(r#"document.querySelector('[aria-label="What changed"]')?.textContent"#)
        .await;
    assert!(
        changed.as_str().unwrap().contains("command and arguments"),
        "{changed}"
    );
    window
        .js(r#"document.querySelector('article[data-state="approval"]').scrollIntoView(); return null;"#)
        .await;
    window
        .shot(&fixture.shot("05-asked-again-after-a-change.png"))
        .await;
    window.click_button("Deny").await;
    window.answer_contains("Not run.").await;
    window.tool_state("run", "Denied").await;

    // Settings shows the allow as needing re-approval, and why; allowing it again binds
    // it to what the server and tool are now.
    let before = fixture.settings()["mcpServers"]["sh"]["approved"]["run"].clone();
    window
        .session
        .client
        .switch_to_window(settings_window)
        .await
        .unwrap();
    window
        .session
        .click_xpath(
            "//button[@role='tab' and normalize-space()='MCP servers']",
            WAIT,
        )
        .await
        .unwrap();
    window
        .session
        .click_xpath(
            "//li[@aria-label='Server sh']//button[normalize-space()='Tools']",
            WAIT,
        )
        .await
        .unwrap();
    let flagged = window
        .wait(r#"document.querySelector('[aria-label="run needs re-approval"]')?.textContent"#)
        .await;
    assert!(
        flagged.as_str().unwrap().contains("Needs re-approval")
            && flagged
                .as_str()
                .unwrap()
                .contains("description of run changed"),
        "{flagged}"
    );
    window
        .js(r#"document.querySelector('[aria-label="run needs re-approval"]').closest('tr').scrollIntoView({block: "center"}); return null;"#)
        .await;
    window
        .shot(&fixture.shot("06-settings-needs-reapproval.png"))
        .await;
    window.click_button("Allow it as it is now").await;
    // An allow from Settings is confirmed natively.
    conduit_e2e::native_dialog::answer(conduit_e2e::native_dialog::Answer::Press('a'), WAIT)
        .await
        .unwrap();
    window
        .wait(r#"document.querySelector('tr[aria-label="Tool run"]') && !document.querySelector('[aria-label="run needs re-approval"]')"#)
        .await;
    let after = fixture.settings()["mcpServers"]["sh"]["approved"]["run"].clone();
    assert_ne!(
        before, after,
        "the allow is bound to the changed server and tool"
    );
    assert_eq!(
        fixture.settings()["mcpServers"]["sh"]["toolApproval"]["run"],
        "allow"
    );
    window.session.close().await.unwrap();
}

/// "Allow in this conversation": the tool's next call there runs unasked, nothing is
/// saved in Settings, the tools panel lists it, and "Ask again" there takes it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_allowed_in_this_conversation_runs_unasked_there_until_taken_back() {
    let gemini = Dialect::Gemini;
    let fixture = Fixture::new().await;
    fixture.llm.push(vec![
        gemini.turn(
            &[],
            &[no_id_call("fs__read_file", json!({"path": "notes.txt"}))],
        ),
        gemini.turn(
            &[],
            &[no_id_call("fs__read_file", json!({"path": "todo.txt"}))],
        ),
        gemini.text(&["Read both."]),
        gemini.turn(
            &[],
            &[no_id_call("fs__read_file", json!({"path": "diary.txt"}))],
        ),
        gemini.text(&["Not read."]),
    ]);
    let window = fixture.open().await;
    window.send("Read my notes and my list").await;
    window.tool_state("read_file", "Waiting for approval").await;
    window.click_button("Allow in this conversation").await;
    window.answer_contains("Read both.").await;
    let done = cards(&window).await;
    assert_eq!(done.len(), 2, "{done:?}");
    assert!(done.iter().all(|card| card["state"] == "done"), "{done:?}");
    assert!(fixture.settings().get("mcpServers").is_none());
    // The card of the call that ran unasked says why, also once the turn's messages are
    // read back (Answer again comes from them); the one asked about says nothing.
    window
        .wait(r#"[...document.querySelectorAll('button')].some(b => b.textContent.trim() === "Answer again")"#)
        .await;
    let said = window
        .js(r#"return [...document.querySelectorAll('[aria-label="How it was allowed"]')].map(p => p.textContent.trim());"#)
        .await;
    assert_eq!(
        said,
        json!(["Allowed without asking: allowed in this conversation"])
    );

    window.click_button("Tools").await;
    let listed = window
        .wait(r#"document.querySelector('[aria-label="Allowed in this conversation"]')?.textContent.replace(/\s+/g, " ")"#)
        .await;
    assert!(
        listed.as_str().unwrap().contains("read_file of fs"),
        "{listed}"
    );
    window
        .shot(&fixture.shot("06-allowed-in-conversation.png"))
        .await;
    window.click_button("Ask again").await;
    window
        .wait(r#"!document.querySelector('[aria-label="Allowed in this conversation"]')"#)
        .await;
    window.click_button("Tools").await;

    window.send("Now my diary").await;
    window
        .wait(r#"document.querySelectorAll('article[data-state="approval"]').length === 1"#)
        .await;
    window.click_button("Deny").await;
    window.answer_contains("Not read.").await;
    let requests = fixture.llm.requests();
    assert_eq!(requests.len(), 5);
    assert!(
        requests[2]
            .body
            .to_string()
            .contains("contents of todo.txt"),
        "the second call ran unasked"
    );
    window.session.close().await.unwrap();
}

/// A response of ten calls, each allowed: eight run, two show "Waiting to run" without
/// approval controls, and Stop ends the running ones while the waiting ones never start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_calls_past_eight_wait_to_run_and_a_stop_starts_none_of_them() {
    let gemini = Dialect::Gemini;
    let fixture = Fixture::new().await;
    let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
    let servers = json!({"mcpServers": {"dyn": {
        "command": root.join(".venv/bin/python"),
        "args": [root.join("fixtures/dynamic_tools.py")]
    }}});
    std::fs::write(
        fixture.home.path().join("mcp_servers.json"),
        servers.to_string(),
    )
    .unwrap();
    let markers = tempfile::tempdir().unwrap();
    let calls: Vec<ScriptedCall> = (0..10)
        .map(|n| {
            let marker = markers.path().join(format!("call-{n}"));
            no_id_call("dyn__hang", json!({"marker_file": marker}))
        })
        .collect();
    fixture.llm.push(vec![gemini.turn(&[], &calls)]);
    let window = fixture.open().await;
    window.send("Wait ten times").await;
    window
        .wait(r#"document.querySelectorAll('article[data-state="approval"]').length === 10"#)
        .await;
    // Each answer moves the other questions, which take no click for 500 ms again: a
    // click that lands in that moment is ignored, and the user (here, the test) clicks
    // again.
    // A card just answered still says "approval" until the host moves its call on, and
    // shows no buttons meanwhile: only a card with buttons is clicked.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let shown = cards(&window).await;
        let asking = shown.iter().filter(|card| card["state"] == "approval");
        let (with_buttons, answered): (Vec<&Value>, Vec<&Value>) =
            asking.partition(|card| card["controls"].as_u64().unwrap_or(0) > 0);
        if with_buttons.is_empty() && answered.is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{shown:?}");
        if !with_buttons.is_empty() {
            window.click_button("Allow once").await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    window
        .wait(
            r#"document.querySelectorAll('article[data-state="running"]').length === 8
                 && document.querySelectorAll('article[data-state="queued"]').length === 2"#,
        )
        .await;
    let shown = cards(&window).await;
    let waiting: Vec<&Value> = shown.iter().filter(|c| c["state"] == "queued").collect();
    assert_eq!(waiting.len(), 2, "{shown:?}");
    assert!(waiting.iter().all(|c| c["controls"] == 0), "{shown:?}");
    let label = window
        .js(r#"return document.querySelector('article[data-state="queued"] [aria-label="Tool state"]').textContent.trim();"#)
        .await;
    assert_eq!(label, "Waiting to run");
    window
        .js(r#"document.querySelector('article[data-state="queued"]').scrollIntoView({block: "center"}); return null;"#)
        .await;
    window
        .shot(&fixture.shot("07-two-calls-wait-to-run.png"))
        .await;

    window.click_button("Stop").await;
    window
        .wait(r#"document.querySelectorAll('article[data-state="interrupted"]').length === 10"#)
        .await;
    // The eight running calls were cancelled at their server; the two waiting never ran.
    let cancelled = || {
        std::fs::read_dir(markers.path())
            .unwrap()
            .filter(|entry| {
                std::fs::read_to_string(entry.as_ref().unwrap().path()).unwrap_or_default()
                    == "cancelled"
            })
            .count()
    };
    let until = std::time::Instant::now() + WAIT;
    while cancelled() < 8 && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cancelled(), 8);
    assert_eq!(std::fs::read_dir(markers.path()).unwrap().count(), 8);
    window.session.close().await.unwrap();
}
