//! Sign-in (OAuth) in the real app under Xvfb, against a loopback authorization server
//! with server-everything behind it: the chat says the server asks for sign-in; Settings
//! shows "Sign-in needed" and Sign in; the browser (a stand-in `xdg-open` that consents)
//! is sent to the authorization URL, shown in full while it is out; the server becomes
//! ready, a model's call of its tool runs on a refreshed token, and Sign out, once
//! confirmed in the native dialog, revokes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use conduit_e2e::artifacts_dir;
use conduit_e2e::desktop::Window;
use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
use conduit_e2e::native_dialog::{self, Answer};
use conduit_e2e::oauth_server::{OAuthServer, browser_dir, consent, path_with};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

/// Answers the app's native confirmation as a user would, from outside the page.
async fn answer_in_native_dialog(answer: Answer) {
    native_dialog::answer(answer, WAIT).await.unwrap();
}

const ROW: &str = r#"document.querySelector('[aria-label="Server tracker"]')"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_call_a_tool_on_a_refreshed_token_and_sign_out() {
    let (_upstream, port) = conduit_e2e::everything_over_http().await.unwrap();
    // Tokens live 31 s: rmcp refreshes one with less than 30 s left (in whole seconds), so
    // a call `UNTIL_REFRESH_DUE` after the sign-in refreshes first.
    let auth = OAuthServer::start(&format!("http://127.0.0.1:{port}"), Duration::from_secs(31))
        .await
        .unwrap();
    let chat = Dialect::OpenAiChat;
    let llm = ScriptedLlm::start(vec![
        chat.turn(
            &[],
            &[ScriptedCall::new(
                "call_1",
                "tracker__get-sum",
                json!({"a": 20, "b": 22}),
            )],
        ),
        chat.text(&["The sum is in."]),
    ])
    .await
    .unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("settings.json"),
        llm.provider_settings().to_string(),
    )
    .unwrap();
    let servers = json!({"mcpServers": {"tracker": {"type": "http", "url": auth.mcp_url()}}});
    let servers_text = servers.to_string();
    std::fs::write(home.path().join("mcp_servers.json"), &servers_text).unwrap();
    let browser = browser_dir(home.path(), false).unwrap();
    let path = path_with(&browser);
    let shots = artifacts_dir("desktop-oauth");
    let window = Window::start(
        &[
            ("CONDUIT_HOME", home.path()),
            ("CONDUIT_SECRET_STORE", std::path::Path::new("file")),
            ("PATH", std::path::Path::new(&path)),
        ],
        WAIT,
    )
    .await;
    window.model_shown("m").await;

    // The chat says which server asks for sign-in.
    let problem = window
        .wait(r#"document.querySelector('[aria-label="MCP server problems"]')?.textContent.replace(/\s+/g, " ")"#)
        .await;
    assert!(
        problem
            .as_str()
            .unwrap()
            .contains("tracker asks you to sign in"),
        "{problem}"
    );
    window.shot(&shots.join("01-chat-asks-sign-in.png")).await;

    // Settings: "Sign-in needed", and Sign in sends the browser to the authorization page,
    // whose URL is shown in full while the browser is out.
    let main = window.session.open_settings_window(WAIT).await.unwrap();
    window
        .js(r#"[...document.querySelectorAll('[role="tab"]')].find(t => t.textContent.includes("MCP")).click(); return null;"#)
        .await;
    window
        .wait(&format!(
            r#"{ROW}?.querySelector('[aria-label="Server state"]')?.textContent === "Sign-in needed""#
        ))
        .await;
    window
        .js(&format!(
            r#"[...{ROW}.querySelectorAll('button')].find(b => b.textContent.trim() === "Sign in").click(); return null;"#
        ))
        .await;
    let shown = window
        .wait(r#"document.querySelector('[aria-label="Authorization URL"]')?.textContent"#)
        .await;
    let shown = shown.as_str().unwrap().to_owned();
    // The browser is opened at a loopback page with a random path that sends it on to the page
    // shown: its command line, which other users can read, holds nothing of the sign-in.
    let opened = std::fs::read_to_string(browser.join("opened.txt")).unwrap();
    let start = opened.trim();
    assert!(
        start.starts_with("http://127.0.0.1:") && start.contains("/sign-in/"),
        "{start}"
    );
    for hidden in ["state", "code_challenge", "resource"] {
        assert!(!start.contains(hidden), "{hidden} in {start}");
    }
    let to = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(start)
        .send()
        .await
        .unwrap();
    assert_eq!(to.status(), 303);
    assert_eq!(
        to.headers()["location"],
        shown.as_str(),
        "it leads to the page shown, in full"
    );
    assert!(shown.contains("code_challenge_method=S256"), "{shown}");
    show_row(&window).await;
    window.shot(&shots.join("02-waiting-for-browser.png")).await;

    // The user consents in the browser: the server is ready with the granted tokens.
    consent(&browser).unwrap();
    window
        .wait(&format!(
            r#"{ROW}?.querySelector('[aria-label="Server state"]')?.textContent === "Ready""#
        ))
        .await;
    let signed_in = Instant::now();
    window
        .wait(&format!(
            r#"{ROW}?.textContent.includes("Signed in to tracker.")"#
        ))
        .await;
    show_row(&window).await;
    window.shot(&shots.join("03-signed-in.png")).await;
    for step in ["register", "authorize", "token:authorization_code"] {
        assert_eq!(auth.count(step), 1, "{step}: {:?}", auth.log());
    }
    let files: Vec<String> = conduit_e2e::text_files_under(home.path())
        .into_iter()
        .filter(|(_, text)| text.contains("access-"))
        .map(|(path, _)| path)
        .collect();
    assert!(
        files.len() == 1 && files[0].ends_with("secrets.json"),
        "tokens only in the private secrets file: {files:?}"
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("mcp_servers.json")).unwrap(),
        servers_text
    );

    // A model's call of the server's tool, two seconds later: the token is
    // refreshed first, and the result reaches the model.
    window
        .session
        .client
        .switch_to_window(main.clone())
        .await
        .unwrap();
    while signed_in.elapsed() < conduit_e2e::oauth_server::UNTIL_REFRESH_DUE {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    window.send("Add 20 and 22").await;
    window.tool_state("get-sum", "Waiting for approval").await;
    window.click_button("Allow once").await;
    window.answer_contains("The sum is in.").await;
    let sent = llm.requests().last().unwrap().body.to_string();
    assert!(sent.contains("42"), "the result reached the model: {sent}");
    assert!(auth.count("token:refresh_token") >= 1, "{:?}", auth.log());
    assert_eq!(auth.count("authorize"), 1, "no second sign-in");
    window.shot(&shots.join("04-tool-called.png")).await;

    // Sign out: revoked and forgotten; the server asks again.
    let settings = window
        .session
        .client
        .windows()
        .await
        .unwrap()
        .into_iter()
        .find(|h| *h != main)
        .unwrap();
    window
        .session
        .client
        .switch_to_window(settings)
        .await
        .unwrap();
    // Sign out asks natively first (the tokens cannot be had back without the browser):
    // kept on a no, then revoked and forgotten on a yes; the server asks again.
    let sign_out = format!(
        r#"[...{ROW}.querySelectorAll('button')].find(b => b.textContent.trim() === "Sign out").click(); return null;"#
    );
    window.js(&sign_out).await;
    answer_in_native_dialog(Answer::Cancel).await;
    window
        .wait(&format!(
            r#"{ROW}?.textContent.includes("Still signed in to tracker: the sign-out was not confirmed.")"#
        ))
        .await;
    assert_eq!(auth.count("revoke:refresh_token"), 0, "{:?}", auth.log());
    assert!(
        conduit_e2e::text_files_under(home.path())
            .iter()
            .any(|(_, text)| text.contains("mcp-oauth:")),
        "the tokens are kept"
    );
    show_row(&window).await;
    window.shot(&shots.join("04b-sign-out-kept.png")).await;
    window.js(&sign_out).await;
    answer_in_native_dialog(Answer::Press('s')).await;
    window
        .wait(&format!(
            r#"{ROW}?.textContent.includes("its tokens were revoked")"#
        ))
        .await;
    window
        .wait(&format!(
            r#"{ROW}?.querySelector('[aria-label="Server state"]')?.textContent === "Sign-in needed""#
        ))
        .await;
    assert_eq!(auth.count("revoke:refresh_token"), 1, "{:?}", auth.log());
    assert_eq!(auth.count("revoke:access_token"), 1, "{:?}", auth.log());
    assert!(
        conduit_e2e::text_files_under(home.path())
            .iter()
            .all(|(_, text)| !text.contains("mcp-oauth:")),
        "the tokens are forgotten"
    );
    show_row(&window).await;
    window.shot(&shots.join("05-signed-out.png")).await;
    window.session.close().await.unwrap();
}

/// Scrolls the server's row to the top of the Settings window, for a screenshot.
async fn show_row(window: &Window) {
    window
        .js(&format!(
            r#"{ROW}.scrollIntoView({{block: "start"}}); return null;"#
        ))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_id_is_asked_for_when_the_server_lets_nobody_register() {
    let (_upstream, port) = conduit_e2e::everything_over_http().await.unwrap();
    let auth = OAuthServer::without_registration(
        &format!("http://127.0.0.1:{port}"),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"tracker": {"type": "http", "url": auth.mcp_url()}}}).to_string(),
    )
    .unwrap();
    let browser = browser_dir(home.path(), true).unwrap();
    let path = path_with(&browser);
    let shots = artifacts_dir("desktop-oauth");
    let window = Window::start(
        &[
            ("CONDUIT_HOME", home.path()),
            ("CONDUIT_SECRET_STORE", std::path::Path::new("file")),
            ("PATH", std::path::Path::new(&path)),
        ],
        WAIT,
    )
    .await;
    window.session.open_settings_window(WAIT).await.unwrap();
    window
        .js(r#"[...document.querySelectorAll('[role="tab"]')].find(t => t.textContent.includes("MCP")).click(); return null;"#)
        .await;
    window
        .wait(&format!(
            r#"{ROW}?.querySelector('[aria-label="Server state"]')?.textContent === "Sign-in needed""#
        ))
        .await;
    window
        .js(&format!(
            r#"[...{ROW}.querySelectorAll('button')].find(b => b.textContent.trim() === "Sign in").click(); return null;"#
        ))
        .await;
    window
        .wait(&format!(
            r#"{ROW}?.querySelector('input[aria-label="Client id"]')"#
        ))
        .await;
    let said = window
        .js(&format!(
            r#"return {ROW}.querySelector('[role="alert"]').textContent;"#
        ))
        .await;
    assert!(said.as_str().unwrap().contains("client id"), "{said}");
    assert!(
        !browser.join("opened.txt").exists(),
        "no browser without a client"
    );
    window
        .session
        .client
        .find(fantoccini::Locator::Css(r#"input[aria-label="Client id"]"#))
        .await
        .unwrap()
        .send_keys(conduit_e2e::oauth_server::PREREGISTERED_CLIENT)
        .await
        .unwrap();
    show_row(&window).await;
    window.shot(&shots.join("06-client-id-asked.png")).await;
    window
        .js(&format!(
            r#"[...{ROW}.querySelectorAll('button')].find(b => b.textContent.trim() === "Save and sign in").click(); return null;"#
        ))
        .await;
    window
        .wait(&format!(
            r#"{ROW}?.querySelector('[aria-label="Server state"]')?.textContent === "Ready""#
        ))
        .await;
    let file = std::fs::read_to_string(home.path().join("mcp_servers.json")).unwrap();
    let file: serde_json::Value = serde_json::from_str(&file).unwrap();
    assert_eq!(
        file["mcpServers"]["tracker"]["oauth"]["clientId"],
        conduit_e2e::oauth_server::PREREGISTERED_CLIENT
    );
    assert_eq!(auth.count("register"), 0);
    assert_eq!(auth.count("token:authorization_code"), 1);
    show_row(&window).await;
    window.shot(&shots.join("07-client-id-signed-in.png")).await;
    window.session.close().await.unwrap();
}
