//! Conduit's own tools in the real app under Xvfb: a model calls `conduit__render_chart`,
//! the chart shows inline in the chat, and its PNG reaches the model; Settings list the
//! built-in tools with their switches and the config other apps need.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use conduit_e2e::artifacts_dir;
use conduit_e2e::desktop::Window;
use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
use conduit_e2e::native_dialog::{Answer, answer_confirmation};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_models_chart_shows_in_the_chat_and_settings_list_the_built_in_tools() {
    let chat = Dialect::OpenAiChat;
    let llm = ScriptedLlm::start(vec![
        chat.turn(
            &[],
            &[ScriptedCall::new(
                "call_chart",
                "conduit__render_chart",
                json!({"kind": "line", "title": "Temperature this week", "x_label": "day", "y_label": "°C",
                       "labels": ["Mon", "Tue", "Wed", "Thu", "Fri"],
                       "series": [{"name": "Oslo", "y": [3.5, 4.0, 2.5, 5.0, 6.5]},
                                  {"name": "Rome", "y": [14.0, 15.5, 13.0, 16.0, 17.5]}]}),
            )],
        ),
        chat.text(&["Rome is warmer."]),
    ])
    .await
    .unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    let home = conduit_e2e::home_with(&llm, json!({}));
    let shots = artifacts_dir("desktop-builtin");
    let window = Window::start(&[("CONDUIT_HOME", home.path())], WAIT).await;
    window.model_shown("m").await;

    window.send("Chart the temperatures").await;
    window
        .tool_state("render_chart", "Waiting for approval")
        .await;
    let server = window
        .js(r#"return document.querySelector('article[aria-label="Tool call render_chart"] [aria-label="Server name"]')?.textContent.trim();"#)
        .await;
    assert_eq!(server, "conduit", "the built-in tools' server is named");
    window.click_button("Allow once").await;
    window.answer_contains("Rome is warmer.").await;
    let width = window
        .wait(r#"(() => { const img = document.querySelector('article[aria-label="Tool call render_chart"] [aria-label="Tool result"] img'); return img && img.complete && img.naturalWidth; })()"#)
        .await;
    assert!(width.as_u64().unwrap() > 0, "the chart decodes: {width}");
    window.shot(&shots.join("01-chart-inline.png")).await;
    // The model got the PNG (as an image after the tool message, in Chat Completions).
    let second = llm.requests()[1].body.to_string();
    assert!(
        second.contains("data:image/png;base64,"),
        "the chart reached the model"
    );

    // Settings list Conduit's own tools and how other apps start it.
    let chat_window = window.session.open_settings_window(WAIT).await.unwrap();
    window
        .wait(r#"document.querySelector('[role="tab"]')"#)
        .await;
    window
        .js(r#"[...document.querySelectorAll('[role="tab"]')].find(t => t.textContent.includes("MCP")).click(); return null;"#)
        .await;
    window
        .wait(r#"document.querySelector('[aria-label="Conduit\'s own tools"]')?.textContent.includes("render_chart")"#)
        .await;
    let snippet = window
        .wait(r#"document.querySelector('[aria-label="Config snippet"]')?.textContent"#)
        .await;
    let snippet: serde_json::Value = serde_json::from_str(snippet.as_str().unwrap()).unwrap();
    assert_eq!(
        snippet["mcpServers"]["conduit"]["args"],
        json!(["mcp", "serve"])
    );
    window
        .js(r#"document.querySelector('[aria-label="Conduit\'s own tools"]').scrollIntoView(); return null;"#)
        .await;
    window.shot(&shots.join("02-settings.png")).await;

    // Serving over HTTP from the app opens a port: only after a native confirmation.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    window
        .js(&format!(
            r#"const a = document.querySelector('[aria-label="HTTP address"]'); a.value = "127.0.0.1:{port}";
               a.dispatchEvent(new Event('input', {{bubbles: true}})); return null;"#
        ))
        .await;
    let flip =
        r#"document.querySelector('input[aria-label="Serve over HTTP"]').click(); return null;"#;
    window.js(flip).await;
    tokio::task::spawn_blocking(|| answer_confirmation(Answer::Cancel, WAIT))
        .await
        .unwrap()
        .unwrap();
    let refused = window
        .wait(r#"[...document.querySelectorAll('[aria-label="Conduit\'s own tools"] [role="alert"]')].map(e => e.textContent).join(" ")"#)
        .await;
    assert!(
        refused.as_str().unwrap().contains("not confirmed"),
        "{refused}"
    );
    let url = format!("http://127.0.0.1:{port}/mcp");
    assert!(
        reqwest::Client::new().post(&url).send().await.is_err(),
        "nothing listens after a no"
    );
    window.js(flip).await;
    tokio::task::spawn_blocking(|| answer_confirmation(Answer::Press('s'), WAIT))
        .await
        .unwrap()
        .unwrap();
    window
        .wait(&format!(
            r#"document.querySelector('[aria-label="Conduit\'s own tools"]')?.textContent.includes("{url}")"#
        ))
        .await;
    let token_shown = window
        .js(r#"return document.querySelector('[aria-label="Token"]').textContent;"#)
        .await;
    assert!(
        !token_shown
            .as_str()
            .unwrap()
            .chars()
            .any(|c| c.is_ascii_alphanumeric()),
        "masked: {token_shown}"
    );
    let answer = reqwest::Client::new()
        .post(&url)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 401, "served, and only with the token");
    window
        .js(r#"document.querySelector('[aria-label="Serve over HTTP"]').scrollIntoView(); return null;"#)
        .await;
    window.shot(&shots.join("03-serving-over-http.png")).await;

    // The theme chosen in Settings (a window of its own) reaches the chat window at once.
    window
        .js(r#"[...document.querySelectorAll('[role="tab"]')].find(t => t.textContent.includes("General")).click(); return null;"#)
        .await;
    window
        .wait(r#"document.querySelector('select[aria-label="Theme"]')"#)
        .await;
    window
        .js(
            r#"const s = document.querySelector('select[aria-label="Theme"]'); s.value = "dark";
               s.dispatchEvent(new Event('change', {bubbles: true})); return null;"#,
        )
        .await;
    window
        .wait("document.documentElement.classList.contains('dark')")
        .await;
    window
        .session
        .client
        .switch_to_window(chat_window)
        .await
        .unwrap();
    window
        .wait("document.documentElement.classList.contains('dark')")
        .await;
    window.shot(&shots.join("04-dark-from-settings.png")).await;
    window.session.close().await.unwrap();
}
