//! A long conversation in the real window (under Xvfb): once a turn ends with the reader at
//! the newest message, only the newest 50 stored messages stay in the page (a long day's
//! messages and their tool images would otherwise all stay drawn); "Show earlier messages"
//! brings the older ones back on demand.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use conduit_e2e::artifacts_dir;
use conduit_e2e::desktop::Window;
use conduit_e2e::llm_server::{Dialect, ScriptedLlm};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);
/// Text turns sent: two stored messages each, so 60 messages, 10 more than the page keeps.
const TURNS: usize = 30;
/// The stored messages a conversation keeps in the page (the UI's PAGE).
const KEPT: usize = 50;

/// The texts of the messages in the page, oldest first (without their Copy and tokens).
const SHOWN: &str = r#"return [...document.querySelectorAll('[role="log"] [role="article"]')]
    .map(m => { const c = m.cloneNode(true);
                c.querySelectorAll('[data-message-footer]').forEach(f => f.remove());
                return c.textContent.trim(); });"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_conversation_keeps_its_newest_messages_in_the_page() {
    let home = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::start(Vec::new()).await.unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    std::fs::write(
        home.path().join("settings.json"),
        llm.provider_settings().to_string(),
    )
    .unwrap();
    let window = Window::start(&[("CONDUIT_HOME", home.path())], WAIT).await;
    window.model_shown("m").await;

    let chat = Dialect::OpenAiChat;
    for turn in 1..=TURNS {
        llm.push(vec![chat.text(&[&format!("Answer {turn}.")])]);
        window.send(&format!("Question {turn}")).await;
        window.answer_contains(&format!("Answer {turn}.")).await;
        // The turn ended (no running turn on the log) and the page reloaded its messages.
        window
            .wait(&format!(
                r#"!document.querySelector('[role="log"][data-turn]')
                   && [...document.querySelectorAll('[role="log"] [role="article"]')]
                        .every(m => m.dataset.status === "complete")
                   && document.querySelectorAll('[role="log"] [role="article"]').length
                        === Math.min({turn} * 2, {KEPT})"#
            ))
            .await;
    }
    window
        .shot(&artifacts_dir("desktop-chat-window").join("newest-kept.png"))
        .await;

    // The newest 50 stay: the first five exchanges left the page.
    let shown = window.js(SHOWN).await;
    let shown: Vec<String> = serde_json::from_value(shown).unwrap();
    assert_eq!(shown.len(), KEPT, "{shown:?}");
    assert_eq!(shown[0], "Question 6", "{shown:?}");
    assert!(
        shown[KEPT - 1].contains(&format!("Answer {TURNS}.")),
        "{shown:?}"
    );

    // On demand, the earlier ones come back, oldest first, above what was shown.
    window.click_button("Show earlier messages").await;
    window
        .wait(&format!(
            r#"document.querySelectorAll('[role="log"] [role="article"]').length === {}"#,
            TURNS * 2
        ))
        .await;
    let shown: Vec<String> = serde_json::from_value(window.js(SHOWN).await).unwrap();
    assert_eq!(shown[0], "Question 1", "{shown:?}");
    assert!(shown[1].contains("Answer 1."), "{shown:?}");
    assert_eq!(shown[10], "Question 6", "{shown:?}");
    // Everything is loaded: the control is gone.
    window
        .wait(r#"![...document.querySelectorAll('button')].some(b => b.textContent.trim() === "Show earlier messages")"#)
        .await;
    window
        .shot(&artifacts_dir("desktop-chat-window").join("earlier-shown.png"))
        .await;
    window.session.close().await.unwrap();
}
