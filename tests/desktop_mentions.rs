//! Resources and prompts in the real window under Xvfb, with server-everything: `@` in
//! the composer offers the server's resources and the chosen one is attached; `/` offers
//! its prompts and the chosen one's argument is filled in; both reach the model's request.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use conduit_e2e::artifacts_dir;
use conduit_e2e::desktop::Window;
use conduit_e2e::llm_server::{Dialect, ScriptedLlm};
use fantoccini::Locator;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_and_a_prompt_chosen_in_the_composer_reach_the_model() {
    let chat = Dialect::OpenAiChat;
    let llm = ScriptedLlm::start(vec![chat.text(&["Noted."])])
        .await
        .unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    let everything = conduit_e2e::npm_server("server-everything").unwrap();
    let home = conduit_e2e::home_with(
        &llm,
        json!({"ev": {"command": "node", "args": [everything, "stdio"]}}),
    );
    let shots = artifacts_dir("desktop-mentions");
    let window = Window::start(&[("CONDUIT_HOME", home.path())], WAIT).await;
    window.model_shown("m").await;
    // The servers are ready once the tools button counts their tools.
    window
        .wait(
            r#"parseInt(document.querySelector('[aria-label="Tools offered"]')?.textContent) > 10"#,
        )
        .await;
    let message = window.message_box().await;

    // `/` offers the prompts; the chosen one asks for its argument.
    message.send_keys("/args").await.unwrap();
    window
        .wait(r#"document.querySelector('[role="listbox"][aria-label="Prompts"]')?.textContent.includes("args-prompt")"#)
        .await;
    window
        .js(r#"[...document.querySelectorAll('[role="option"]')].find(o => o.textContent.includes("args-prompt")).click(); return null;"#)
        .await;
    window
        .session
        .client
        .find(Locator::Css(r#"input[aria-label="Argument city"]"#))
        .await
        .unwrap()
        .send_keys("Lyon")
        .await
        .unwrap();
    window.click_button("Use").await;

    // `@` offers the resources; the chosen one is attached.
    message.send_keys("Summarize @archi").await.unwrap();
    window
        .wait(r#"document.querySelector('[role="listbox"][aria-label="Resources"]')?.textContent.includes("architecture.md")"#)
        .await;
    window
        .js(r#"[...document.querySelectorAll('[role="option"]')].find(o => o.textContent.includes("architecture.md")).click(); return null;"#)
        .await;
    let chips = window
        .wait(r#"document.querySelector('[aria-label="Attached to the message"]')?.textContent.replace(/\s+/g, " ")"#)
        .await;
    let chips = chips.as_str().unwrap();
    assert!(
        chips.contains("/ev: Arguments Prompt") && chips.contains("@ev: architecture.md"),
        "{chips}"
    );
    let typed = window
        .js(r#"return document.querySelector('textarea[aria-label="Message"]').value;"#)
        .await;
    assert_eq!(typed, "Summarize ", "the @query left the text");
    window.shot(&shots.join("01-chosen.png")).await;

    window.click_button("Send").await;
    window.answer_contains("Noted.").await;
    let sent = llm.requests()[0].body.to_string();
    assert!(
        sent.contains("Lyon"),
        "the prompt's message reached the model: {sent}"
    );
    assert!(
        sent.contains("Resource demo://resource/static/document/architecture.md"),
        "the resource reached the model: {sent}"
    );
    assert!(sent.contains("Summarize"), "{sent}");
    window.shot(&shots.join("02-sent.png")).await;
    window.session.close().await.unwrap();
}

/// A server listing more resources than the picker takes (10,001 against 10,000): `@`
/// offers the first ones, and the cut is named beside the picker, muted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_list_past_the_cap_is_offered_cut_and_says_so() {
    let chat = Dialect::OpenAiChat;
    let llm = ScriptedLlm::start(vec![chat.text(&["Noted."])])
        .await
        .unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    let (python, script) = conduit_e2e::python_fixture("many_resources.py").unwrap();
    let home = conduit_e2e::home_with(
        &llm,
        json!({"many": {"command": python, "args": [script],
            "protocolVersion": "2025-11-25"}}),
    );
    let shots = artifacts_dir("desktop-mentions");
    let window = Window::start(&[("CONDUIT_HOME", home.path())], WAIT).await;
    window.model_shown("m").await;
    // The picker lists the ready servers' resources on `@` (waiting for them to start).
    let message = window.message_box().await;
    message.send_keys("Read @note").await.unwrap();
    let note = window
        .wait(
            r#"[...document.querySelectorAll('p')].map(p => p.textContent).find(t => t.includes("Conduit offers the first"))"#,
        )
        .await;
    let note = note.as_str().unwrap();
    assert!(note.contains("many"), "{note}");
    assert!(note.contains("the first 10000"), "{note}");
    window
        .wait(r#"document.querySelector('[role="listbox"]')?.textContent.includes("note 00001")"#)
        .await;
    window.shot(&shots.join("03-list-cut.png")).await;
}
