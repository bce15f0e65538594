//! Exporting a conversation from the window, in the real app under Xvfb: a chat whose
//! tool drew a chart is exported as Markdown to a file picked in the native save dialog,
//! with the chart's PNG in a folder beside it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use conduit_e2e::desktop::Window;
use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
use conduit_e2e::{artifacts_dir, workspace_root};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_is_exported_with_its_images_beside_it() {
    let chat = Dialect::OpenAiChat;
    let llm = ScriptedLlm::start(vec![
        chat.turn(
            &[],
            &[ScriptedCall::new(
                "call_1",
                "conduit__render_chart",
                json!({"kind": "bar", "title": "Sales", "labels": ["Q1", "Q2"],
                       "series": [{"name": "EU", "y": [3, 5]}]}),
            )],
        ),
        chat.text(&["Here is the chart."]),
    ])
    .await
    .unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    let home = conduit_e2e::home_with(&llm, json!({}));
    let window = Window::start(&[("CONDUIT_HOME", home.path())], WAIT).await;
    window.model_shown("m").await;
    window.send("Chart my sales").await;
    window.allow_call("render_chart").await;
    window.answer_contains("Here is the chart.").await;

    // The dialog is typed into key by key: a lower-case path.
    let folder = std::path::PathBuf::from(format!("/tmp/conduit-export-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let target = folder.join("sales-talk.md");
    window.click_button("Export conversation").await;
    window
        .js(r#"[...document.querySelectorAll('[role="menuitem"]')].find(b => b.textContent.includes("Markdown")).click(); return null;"#)
        .await;
    let typed = tokio::process::Command::new("python3")
        .arg(workspace_root().join("tests/support/type_in_dialog.py"))
        .arg("Export conversation")
        .arg(&target)
        .output()
        .await
        .unwrap();
    assert!(
        typed.status.success(),
        "typing into the save dialog failed: {}",
        String::from_utf8_lossy(&typed.stderr)
    );
    window
        .wait(&format!(
            r#"document.querySelector('[role="status"]')?.textContent === "Exported to {}""#,
            target.display()
        ))
        .await;
    window
        .shot(&artifacts_dir("desktop-export").join("01-exported.png"))
        .await;
    let text = std::fs::read_to_string(&target).unwrap();
    assert!(text.contains("Chart my sales"), "{text}");
    assert!(text.contains("Here is the chart."), "{text}");
    let image = text
        .split("](")
        .map(|rest| rest.split(')').next().unwrap_or_default())
        .find(|link| link.starts_with("sales-talk-media/"))
        .unwrap_or_else(|| panic!("no image link beside the file: {text}"));
    let png = std::fs::read(folder.join(image)).unwrap();
    assert_eq!(&png[1..4], b"PNG", "the chart is beside the export");
    std::fs::remove_dir_all(&folder).unwrap();
    window.session.close().await.unwrap();
}

/// A history damaged deep inside opens (an open reads its header and schema only); the
/// check of the whole file, 20 s later, finds it, and the window says so: what was found,
/// the file, what the next start does, and to export first. The conversations still open
/// meanwhile. The next start moves the file aside and says where it went.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_found_damaged_while_open_is_shown_and_moved_aside_at_the_next_start() {
    let home = tempfile::tempdir().unwrap();
    let database = home.path().join("history.db");
    let bytes = conduit_e2e::history_damaged_deep_inside(home.path(), "Notes worth keeping");

    // The check runs 20 s after the history opens.
    let patience = Duration::from_secs(90);
    let window = Window::start(&[("CONDUIT_HOME", home.path())], patience).await;
    window
        .wait(r#"document.body.innerText.includes("Notes worth keeping")"#)
        .await;
    let alert = window
        .wait(r#"[...document.querySelectorAll('[role="alert"]')].map(a => a.innerText).find(t => t.includes("Your history file is damaged."))"#)
        .await;
    let alert = alert.as_str().unwrap_or_default().to_owned();
    assert!(alert.contains(&database.display().to_string()), "{alert}");
    assert!(
        alert.contains("At the next start the damaged file is moved aside"),
        "{alert}"
    );
    let shots = artifacts_dir("desktop-export");
    window.shot(&shots.join("02-history-damaged.png")).await;
    // Still read meanwhile: the conversation opens.
    window
        .js(r#"[...document.querySelectorAll('nav button')].find(b => b.textContent.includes("Notes worth keeping")).click(); return null;"#)
        .await;
    window
        .wait(r#"document.body.innerText.includes("message 399: words of an old answer")"#)
        .await;
    window.session.close().await.unwrap();

    let window = Window::start(&[("CONDUIT_HOME", home.path())], patience).await;
    let said = window
        .wait(r#"[...document.querySelectorAll('[role="alert"]')].map(a => a.innerText).find(t => t.includes("corrupt"))"#)
        .await;
    window.shot(&shots.join("03-history-moved-aside.png")).await;
    let moved: Vec<_> = std::fs::read_dir(home.path())
        .unwrap()
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| {
            name.starts_with("history.db.corrupt-")
                && !name.contains(".damaged")
                && !name.ends_with("-wal")
                && !name.ends_with("-shm")
        })
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(
        std::fs::read(home.path().join(&moved[0])).unwrap(),
        bytes,
        "moved aside untouched"
    );
    assert!(
        said.as_str().unwrap_or_default().contains(&moved[0]),
        "{said}"
    );
    window.session.close().await.unwrap();
}
