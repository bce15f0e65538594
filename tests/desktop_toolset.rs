//! Each conversation its own toolset, in the real app under Xvfb: the composer's Tools
//! button counts the offered tools and their token cost; switching Conduit's own server
//! off for a new chat leaves the model only the file server's tools, and the choice stays
//! with the conversation; a kept choice that no longer reads offers nothing and says why.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use conduit_e2e::artifacts_dir;
use conduit_e2e::desktop::Window;
use conduit_e2e::llm_server::{Dialect, ScriptedLlm};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

fn offered(llm: &ScriptedLlm, request: usize) -> Vec<String> {
    llm.requests()[request].body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_chat_limited_to_one_server_offers_only_its_tools() {
    let chat = Dialect::OpenAiChat;
    let llm = ScriptedLlm::start(vec![chat.text(&["First."]), chat.text(&["Second."])])
        .await
        .unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    let (python, script) = conduit_e2e::python_fixture("dynamic_tools.py").unwrap();
    let home = conduit_e2e::home_with(&llm, json!({"dyn": {"command": python, "args": [script]}}));
    let shots = artifacts_dir("desktop-toolset");
    let window = Window::start(&[("CONDUIT_HOME", home.path())], WAIT).await;
    window.model_shown("m").await;

    // Both servers ready: the button counts every tool.
    let everything = window
        .wait(r#"(() => { const n = document.querySelector('[aria-label="Tools offered"]')?.textContent; return n && parseInt(n) > 8 ? parseInt(n) : null; })()"#)
        .await
        .as_u64()
        .unwrap();
    window.click_button("Tools").await;
    window
        .wait(r#"document.querySelector('input[aria-label="Use conduit"]')"#)
        .await;
    window
        .js(r#"document.querySelector('input[aria-label="Use conduit"]').click(); return null;"#)
        .await;
    let fewer = window
        .wait(&format!(
            r#"(() => {{ const n = parseInt(document.querySelector('[aria-label="Tools offered"]')?.textContent); return n < {everything} ? n : null; }})()"#
        ))
        .await
        .as_u64()
        .unwrap();
    window.shot(&shots.join("01-tools-panel.png")).await;

    window.send("Hello").await;
    window.answer_contains("First.").await;
    let first = offered(&llm, 0);
    assert_eq!(first.len() as u64, fewer, "{first:?}");
    assert!(first.iter().all(|t| t.starts_with("dyn__")), "{first:?}");

    // The next turn of the same conversation keeps the choice.
    window.send("Again").await;
    window.answer_contains("Second.").await;
    assert_eq!(offered(&llm, 1), first);
    let shown = window
        .js(r#"return parseInt(document.querySelector('[aria-label="Tools offered"]').textContent);"#)
        .await;
    assert_eq!(
        shown.as_u64(),
        Some(fewer),
        "the saved chat shows its own choice"
    );
    window.shot(&shots.join("02-kept.png")).await;

    // A kept choice that no longer reads (a damaged database, another version's format):
    // reopened, the conversation offers no tool and the panel says why.
    let db = rusqlite::Connection::open(home.path().join("history.db")).unwrap();
    let damaged = db
        .execute(
            r#"UPDATE conversations SET toolset = '{"offServers": "dyn"}'"#,
            [],
        )
        .unwrap();
    assert_eq!(damaged, 1);
    window.click_button("New chat").await;
    window
        .js(r#"[...document.querySelectorAll('[aria-label="Conversation list"] button')].find(b => b.textContent.includes("Hello")).click(); return null;"#)
        .await;
    window
        .wait(
            r#"document.querySelector('[aria-label="Tools offered"]')?.textContent === "0 tools""#,
        )
        .await;
    // The panel stays as it was left (open, from the first choice).
    window
        .js(r#"const b = document.querySelector('button[aria-label="Tools"]'); if (b.getAttribute("aria-expanded") !== "true") b.click(); return null;"#)
        .await;
    let warning = window
        .wait(r#"document.querySelector('[aria-label="Tools for this conversation"] [role="alert"]')?.textContent"#)
        .await;
    let warning = warning.as_str().unwrap();
    assert!(
        warning.contains("could not be read") && warning.contains("offers no tool"),
        "{warning}"
    );
    window.shot(&shots.join("03-unreadable.png")).await;
    window.session.close().await.unwrap();
}
