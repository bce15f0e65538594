//! Secrets in the real app under Xvfb: a provider moved to another server through the
//! settings form never sends that server its old key or header values; the form says so
//! before the save, and the host asks natively before the stored key is deleted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use conduit_e2e::artifacts_dir;
use conduit_e2e::desktop::{DesktopSession, app_binary};
use conduit_e2e::llm_server::{Dialect, Reply, ScriptedLlm};
use conduit_e2e::native_dialog::{self, Answer};
use fantoccini::Locator;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);
const KEY: &str = "sk-old-server-SECRET-9911";
const HEADER: &str = "hdr-old-server-SECRET-12";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_url_change_to_another_server_never_sends_it_the_old_key() {
    let models = json!({"object": "list", "data": [{"id": "m", "object": "model"}]});
    let old = ScriptedLlm::start(Vec::new()).await.unwrap();
    old.answer_models(models.clone());
    // Scripted replies, not `answer_models`, so every request to it is recorded.
    let new = ScriptedLlm::start(vec![Reply::Json(models); 8])
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();

    // The provider, its key and a header, saved as a user of the CLI would.
    let mut add = Command::new(conduit_e2e::binary("conduit").unwrap())
        .args([
            "providers",
            "add",
            "p",
            "--kind",
            "openai-chat",
            "--base-url",
        ])
        .arg(Dialect::OpenAiChat.base_url(&old.url()))
        .args(["--model", "m", "--api-key-stdin", "--header"])
        .arg(format!("X-Team-Token: {HEADER}"))
        .env("CONDUIT_HOME", home.path())
        .env("CONDUIT_SECRET_STORE", "file")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = add.stdin.take().unwrap();
        writeln!(stdin, "{KEY}").unwrap();
    }
    assert!(add.wait().unwrap().success());

    let session = DesktopSession::start(
        &app_binary().unwrap(),
        &[
            ("CONDUIT_HOME", home.path()),
            ("CONDUIT_SECRET_STORE", Path::new("file")),
        ],
    )
    .await
    .unwrap();
    let shots = artifacts_dir("desktop-secrets");
    // Settings are their own window.
    session.open_settings_window(WAIT).await.unwrap();
    session
        .click_xpath(
            "//li[@aria-label='Provider p']//button[normalize-space()='Edit']",
            WAIT,
        )
        .await
        .unwrap();
    session
        .wait_js(r#"document.querySelector('[aria-label="Base URL"]')"#, WAIT)
        .await
        .unwrap();
    assert_eq!(
        session
            .js(r#"return document.querySelector('[aria-label="Another server"]') === null;"#)
            .await
            .unwrap(),
        json!(true),
        "no warning before the URL changes"
    );
    session
        .js(r#"const i = document.querySelector('[aria-label="Base URL"]'); i.value = ""; i.dispatchEvent(new Event('input', {bubbles: true})); return null;"#)
        .await
        .unwrap();
    session
        .client
        .find(Locator::Css(r#"[aria-label="Base URL"]"#))
        .await
        .unwrap()
        .send_keys(&Dialect::OpenAiChat.base_url(&new.url()))
        .await
        .unwrap();
    session
        .wait_js(
            r#"document.querySelector('[aria-label="Another server"]')?.textContent.includes("removes the stored API key")"#,
            WAIT,
        )
        .await
        .unwrap();
    session
        .screenshot(&shots.join("01-another-server-warning.png"))
        .await
        .unwrap();
    // The stored key is deleted by the move: the host asks natively first. Kept: the
    // form stays open and says so, and nothing changed.
    session.click_button("Save provider", WAIT).await.unwrap();
    tokio::task::spawn_blocking(|| native_dialog::answer_confirmation(Answer::Cancel, WAIT))
        .await
        .unwrap()
        .unwrap();
    session
        .wait_js(
            r#"document.querySelector('[role="alert"]')?.textContent.includes("keeps its stored values")"#,
            WAIT,
        )
        .await
        .unwrap();
    session
        .screenshot(&shots.join("01b-move-kept.png"))
        .await
        .unwrap();
    let settings = std::fs::read_to_string(home.path().join("settings.json")).unwrap();
    assert!(!settings.contains(&new.url()), "{settings}");
    // Then saved.
    session.click_button("Save provider", WAIT).await.unwrap();
    tokio::task::spawn_blocking(|| native_dialog::answer_confirmation(Answer::Press('s'), WAIT))
        .await
        .unwrap()
        .unwrap();
    session
        .wait_js(
            &format!(
                r#"document.querySelector('[aria-label="Provider p"]')?.textContent.includes("{}")"#,
                new.url()
            ),
            WAIT,
        )
        .await
        .unwrap();
    session
        .click_xpath(
            "//li[@aria-label='Provider p']//button[normalize-space()='Test connection']",
            WAIT,
        )
        .await
        .unwrap();
    session
        .wait_js(
            r#"document.querySelector('[aria-label="Connection test"]')?.textContent.includes("Connected")"#,
            WAIT,
        )
        .await
        .unwrap();
    session
        .screenshot(&shots.join("02-moved-and-tested.png"))
        .await
        .unwrap();
    session.close().await.unwrap();

    let requests = new.requests();
    assert!(!requests.is_empty(), "the new server was asked");
    for request in &requests {
        let headers = format!("{:?}", request.headers);
        assert!(
            !headers.contains(KEY) && !headers.contains(HEADER),
            "the new server got the old secrets: {headers}"
        );
    }
    let secrets = std::fs::read_to_string(home.path().join("secrets.json")).unwrap_or_default();
    assert!(!secrets.contains(KEY), "the old key is still stored");
}
