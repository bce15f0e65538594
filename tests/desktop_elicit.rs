//! A server that asks back, in the real app under Xvfb: the Python SDK server's `ask_name`
//! (a 2026-07-28 input_required round) shows its form in the chat naming the server, its
//! field asking for a token flagged as the server's; the name typed there reaches the
//! server and its greeting the model; a second time the user declines and the model
//! hears "decline". A tool whose server needs a step in the browser first (-32042): the
//! page is put to the user in the chat, the call waits (saying so) while they finish it
//! in the browser, and then runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use conduit_e2e::artifacts_dir;
use conduit_e2e::desktop::Window;
use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
use fantoccini::Locator;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

/// What the last request told the model about the tool's result.
fn tool_result_sent(llm: &ScriptedLlm) -> String {
    let last = llm.requests().last().unwrap().body.clone();
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_form_is_answered_and_declined_in_the_chat() {
    let chat = Dialect::OpenAiChat;
    let llm = ScriptedLlm::start(vec![
        chat.turn(
            &[],
            &[ScriptedCall::new("call_1", "dyn__ask_name", json!({}))],
        ),
        chat.text(&["Greeted."]),
        chat.turn(
            &[],
            &[ScriptedCall::new("call_2", "dyn__ask_name", json!({}))],
        ),
        chat.text(&["Declined."]),
    ])
    .await
    .unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    let (python, script) = conduit_e2e::python_fixture("dynamic_tools.py").unwrap();
    let home = conduit_e2e::home_with(&llm, json!({"dyn": {"command": python, "args": [script]}}));
    let shots = artifacts_dir("desktop-elicit");
    let window = Window::start(&[("CONDUIT_HOME", home.path())], WAIT).await;
    window.model_shown("m").await;

    window.send("Greet me").await;
    window.tool_state("ask_name", "Waiting for approval").await;
    window.click_button("Allow once").await;
    // The call runs (no approval buttons left) while the server waits for the answer.
    window.tool_state("ask_name", "Running").await;

    // The form shows in the chat, naming the server that asks.
    let asked = window
        .wait(
            r#"document.querySelector('section[data-question]')?.textContent.replace(/\s+/g, " ")"#,
        )
        .await;
    let asked = asked.as_str().unwrap();
    assert!(asked.contains("The MCP server dyn asks:"), "{asked}");
    assert!(asked.contains("Who are you?"), "{asked}");
    let age = window
        .js(r#"return document.querySelector('section[data-question] input[name="age"]').value;"#)
        .await;
    assert_eq!(age, "30", "the default is filled in");
    // The field asking for a token is flagged as the server's, naming it; the others
    // are not.
    let flagged = window
        .js(
            r#"return [...document.querySelectorAll('section[data-question] label')]
                .filter((label) => label.querySelector('[role="note"][aria-label="Asks for a secret"]'))
                .map((label) => label.textContent.replace(/\s+/g, " ").trim());"#,
        )
        .await;
    let flagged = flagged.as_array().unwrap();
    assert_eq!(flagged.len(), 1, "{flagged:?}");
    let flagged = flagged[0].as_str().unwrap();
    assert!(
        flagged.starts_with("Your API token")
            && flagged.contains("This asks for a secret.")
            && flagged.contains("dyn receives what you type."),
        "{flagged}"
    );
    window
        .session
        .client
        .find(Locator::Css(r#"section[data-question] input[name="name"]"#))
        .await
        .unwrap()
        .send_keys("Ada")
        .await
        .unwrap();
    window.shot(&shots.join("01-form.png")).await;
    window.click_button("Submit to dyn").await;
    window.answer_contains("Greeted.").await;
    window.tool_state("ask_name", "Done").await;
    assert!(
        tool_result_sent(&llm).contains("hello Ada, 30"),
        "{}",
        tool_result_sent(&llm)
    );
    assert_eq!(
        window
            .js("return document.querySelectorAll('section[data-question]').length;")
            .await,
        0,
        "the answered question is gone"
    );

    window.send("Again").await;
    window.tool_state("ask_name", "Waiting for approval").await;
    window.click_button("Allow once").await;
    window
        .wait("document.querySelector('section[data-question]')")
        .await;
    window.click_button("Decline").await;
    window.answer_contains("Declined.").await;
    assert!(
        tool_result_sent(&llm).contains("decline"),
        "{}",
        tool_result_sent(&llm)
    );
    window.shot(&shots.join("02-declined.png")).await;
    window.session.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_in_the_browser_is_opened_then_the_call_runs_once_it_is_done() {
    let chat = Dialect::OpenAiChat;
    let llm = ScriptedLlm::start(vec![
        chat.turn(
            &[],
            &[ScriptedCall::new(
                "call_1",
                "steps__read_calendar",
                json!({}),
            )],
        ),
        chat.text(&["You have three meetings."]),
    ])
    .await
    .unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    let (_server, port) = conduit_e2e::python_server_on_a_free_port("url_steps.py", &[])
        .await
        .unwrap();
    let home = conduit_e2e::home_with(
        &llm,
        json!({"steps": {"url": format!("http://127.0.0.1:{port}/mcp"), "protocolVersion": "2025-11-25"}}),
    );
    // The browser notes the page it is given and goes there only once told to (the user
    // finishing the step).
    let browser = conduit_e2e::oauth_server::browser_dir(home.path(), false).unwrap();
    let path = conduit_e2e::oauth_server::path_with(&browser);
    let shots = artifacts_dir("desktop-elicit");
    let window = Window::start(
        &[
            ("CONDUIT_HOME", home.path()),
            ("PATH", std::path::Path::new(&path)),
            ("CONDUIT_TEST_CONFIRM", std::path::Path::new("yes")),
        ],
        WAIT,
    )
    .await;
    window.model_shown("m").await;

    window.send("What is on my calendar today?").await;
    window
        .tool_state("read_calendar", "Waiting for approval")
        .await;
    window.click_button("Allow once").await;
    // The server answered -32042: its page is put to the user in the chat.
    let asked = window
        .wait(
            r#"document.querySelector('section[data-question]')?.textContent.replace(/\s+/g, " ")"#,
        )
        .await;
    let asked = asked.as_str().unwrap();
    let page = format!("http://127.0.0.1:{port}/consent?id=calendar-1");
    assert!(asked.contains("The MCP server steps asks:"), "{asked}");
    assert!(
        asked.contains("Connect your calendar to Conduit"),
        "{asked}"
    );
    assert!(asked.contains(&page), "{asked}");
    window.shot(&shots.join("03-browser-step.png")).await;
    window.click_button("Open in browser").await;
    // The page went to the browser; the call waits, saying for what.
    let opened = browser.join("opened.txt");
    let deadline = std::time::Instant::now() + WAIT;
    while std::fs::read_to_string(&opened).unwrap_or_default().trim() != page {
        assert!(
            std::time::Instant::now() < deadline,
            "the page was not opened"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let waiting = window
        .wait(
            r#"(() => { const t = document.querySelector('[aria-label="Tool progress"]')?.parentElement?.textContent ?? "";
                       return t.includes("Waiting for you to finish in your browser") ? t : null; })()"#,
        )
        .await;
    assert!(waiting.is_string(), "{waiting}");
    window.tool_state("read_calendar", "Running").await;
    window
        .shot(&shots.join("04-waiting-for-the-browser.png"))
        .await;
    // The user finishes in the browser: the server says so, and the call runs.
    conduit_e2e::oauth_server::consent(&browser).unwrap();
    window.answer_contains("You have three meetings.").await;
    window.tool_state("read_calendar", "Done").await;
    assert!(
        tool_result_sent(&llm).contains("3 meetings today (run 1)"),
        "{}",
        tool_result_sent(&llm)
    );
    window.shot(&shots.join("05-browser-step-done.png")).await;
    window.session.close().await.unwrap();
}
