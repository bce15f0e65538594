//! A server that asks back, in the real app under Xvfb: the Python SDK server's `ask_name`
//! (a 2026-07-28 input_required round) shows its form in the chat naming the server, its
//! field asking for a token flagged as the server's; the name typed there reaches the
//! server and its greeting the model; a second time the user declines and the model
//! hears "decline".

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
