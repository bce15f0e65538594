//! A server that asks for a model run (sampling), in the real app under Xvfb:
//! server-everything's `trigger-sampling-request` shows the request in the chat (the server,
//! its system prompt and message, the model picker on the chat's model); nothing runs until
//! the user approves; the model's answer is shown, and reaches the server (and the chat's
//! model through the tool's result) only after Send. A second request is denied and the
//! server hears the user-rejected error; after the server's sampling is set to "Never" in
//! Settings, a third is refused without being shown. A request with real-size images
//! shows them as the host draws them, and its tool's schema. A folder added to a server's roots in
//! the Settings form is written to its entry and offered to the running server.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use conduit_e2e::artifacts_dir;
use conduit_e2e::desktop::Window;
use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
use conduit_e2e::native_dialog::{self, Answer};
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

const CARD: &str = "section[data-sampling]";

/// One app window at a time: the tests of this file share the display and the driver.
static ONE_WINDOW: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampling_request_is_approved_then_one_is_denied() {
    let _window = ONE_WINDOW.lock().await;
    let chat = Dialect::OpenAiChat;
    let trigger = |id: &str, prompt: &str| {
        chat.turn(
            &[],
            &[ScriptedCall::new(
                id,
                "everything__trigger-sampling-request",
                json!({"prompt": prompt, "maxTokens": 40}),
            )],
        )
    };
    let llm = ScriptedLlm::start(vec![
        trigger("call_1", "the weather in Paris"),
        // The sampling request itself, run on the chat's model after the approval.
        chat.text(&["It is sunny ", "in Paris."]),
        chat.text(&["Sampled."]),
        trigger("call_2", "something else"),
        chat.text(&["Denied."]),
        trigger("call_3", "after the policy"),
        chat.text(&["Refused by policy."]),
    ])
    .await
    .unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    let home = conduit_e2e::home_with(
        &llm,
        json!({"everything": {"command": "node",
            "args": [conduit_e2e::npm_server("server-everything").unwrap(), "stdio"]}}),
    );
    let shots = artifacts_dir("desktop-sampling");
    let window = Window::start(&[("CONDUIT_HOME", home.path())], WAIT).await;
    window.model_shown("m").await;

    window.send("Sample something").await;
    window.allow_call("trigger-sampling-request").await;
    let shown = window
        .wait(&format!(
            r#"document.querySelector('{CARD}')?.textContent.replace(/\s+/g, " ")"#
        ))
        .await;
    let shown = shown.as_str().unwrap();
    assert!(
        shown.contains("The MCP server everything asks to run a model (at most 40 tokens)"),
        "{shown}"
    );
    assert!(shown.contains("You are a helpful test server."), "{shown}");
    assert!(shown.contains("the weather in Paris"), "{shown}");
    let picked = window
        .js(&format!(
            r#"const s = document.querySelector('{CARD} select'); return s.options[s.selectedIndex].text;"#
        ))
        .await;
    assert_eq!(picked, "m", "the picker starts on the chat's model");
    assert_eq!(llm.requests().len(), 1, "nothing runs before the approval");
    window.shot(&shots.join("01-asked.png")).await;

    window.click_button("Approve and run").await;
    let result = window
        .wait(&format!(
            r#"document.querySelector('{CARD} .sampling-result')?.textContent.replace(/\s+/g, " ")"#
        ))
        .await;
    assert!(
        result.as_str().unwrap().contains("It is sunny in Paris."),
        "{result}"
    );
    // The sampled request reached the model with the server's system prompt.
    let sampled = llm.requests()[1].body.clone();
    assert_eq!(sampled["messages"][0]["role"], "system");
    assert!(
        sampled["messages"][0]["content"]
            .to_string()
            .contains("You are a helpful test server."),
        "{sampled}"
    );
    assert_eq!(
        tool_result_sent(&llm),
        "",
        "the result has not gone back yet"
    );
    window.shot(&shots.join("02-result.png")).await;
    window.click_button("Send to everything").await;
    window.answer_contains("Sampled.").await;
    window.tool_state("trigger-sampling-request", "Done").await;
    let sent = tool_result_sent(&llm);
    assert!(sent.contains("It is sunny in Paris."), "{sent}");
    assert_eq!(
        window
            .js(&format!(
                "return document.querySelectorAll('{CARD}').length;"
            ))
            .await,
        0,
        "the sent request is gone"
    );

    window.send("Again").await;
    window.allow_call("trigger-sampling-request").await;
    window
        .wait(&format!("document.querySelector('{CARD}')"))
        .await;
    window.click_button("Deny").await;
    window.answer_contains("Denied.").await;
    let sent = tool_result_sent(&llm);
    assert!(sent.contains("User rejected sampling request"), "{sent}");
    assert_eq!(llm.requests().len(), 5, "the denied request never ran");
    window.shot(&shots.join("03-denied.png")).await;

    // In Settings, the server's sampling is set to never: it is refused without asking.
    let chat_window = window.session.open_settings_window(WAIT).await.unwrap();
    window
        .js(r#"[...document.querySelectorAll('[role="tab"]')].find(t => t.textContent.includes("MCP")).click(); return null;"#)
        .await;
    window
        .click_xpath("//li[@aria-label='Server everything']//button[normalize-space()='Tools']")
        .await;
    window
        .wait(r#"document.querySelector('select[aria-label="Sampling by everything"]')?.value === "ask""#)
        .await;
    window
        .js(r#"const s = document.querySelector('select[aria-label="Sampling by everything"]');
               s.value = "deny"; s.dispatchEvent(new Event('change', {bubbles: true})); return null;"#)
        .await;
    let settings = home.path().join("settings.json");
    let mut policy = serde_json::Value::Null;
    for _ in 0..200 {
        let saved: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
        policy = saved["mcpServers"]["everything"]["sampling"].clone();
        if policy == "deny" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        policy, "deny",
        "the policy is stored where tool policies are"
    );
    window
        .js(r#"document.querySelector('select[aria-label="Sampling by everything"]').scrollIntoView(); return null;"#)
        .await;
    window.shot(&shots.join("04-policy.png")).await;
    window
        .session
        .client
        .switch_to_window(chat_window)
        .await
        .unwrap();
    window.send("Once more").await;
    window.allow_call("trigger-sampling-request").await;
    window.answer_contains("Refused by policy.").await;
    let sent = tool_result_sent(&llm);
    assert!(sent.contains("User rejected sampling request"), "{sent}");
    assert_eq!(
        window
            .js(&format!(
                "return document.querySelectorAll('{CARD}').length;"
            ))
            .await,
        0,
        "never shown"
    );
    assert_eq!(llm.requests().len(), 7, "no model ran for it");
    window.session.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_added_in_the_settings_form_reach_the_server() {
    let _window = ONE_WINDOW.lock().await;
    let chat = Dialect::OpenAiChat;
    let list = |id: &str| chat.turn(&[], &[ScriptedCall::new(id, "py__client_roots", json!({}))]);
    let llm = ScriptedLlm::start(vec![
        list("call_1"),
        chat.text(&["Listed."]),
        list("call_2"),
        chat.text(&["Listed again."]),
    ])
    .await
    .unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    let home = tempfile::tempdir().unwrap();
    let folders = tempfile::tempdir().unwrap();
    let (first, second) = (folders.path().join("first"), folders.path().join("second"));
    std::fs::write(
        home.path().join("settings.json"),
        llm.provider_settings().to_string(),
    )
    .unwrap();
    let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
    let python = root.join(".venv/bin/python");
    assert!(
        python.is_file(),
        "run `make test`: the Python test servers are missing"
    );
    let file = home.path().join("mcp_servers.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"py": {"command": python,
            "args": [root.join("fixtures/sampling_tools.py")],
            "protocolVersion": "2026-07-28", "roots": [first]}}})
        .to_string(),
    )
    .unwrap();
    let shots = artifacts_dir("desktop-sampling");
    let window = Window::start(&[("CONDUIT_HOME", home.path())], WAIT).await;
    window.model_shown("m").await;

    window.send("Which folders?").await;
    window.allow_call("client_roots").await;
    window.answer_contains("Listed.").await;
    let uri = |folder: &std::path::Path| format!("file://{}", folder.display());
    let sent = tool_result_sent(&llm);
    assert!(sent.contains(&uri(&first)), "{sent}");
    assert!(!sent.contains(&uri(&second)), "{sent}");

    // A second folder added in the server's form is written to the file and offered.
    let chat_window = window.session.open_settings_window(WAIT).await.unwrap();
    window
        .js(r#"[...document.querySelectorAll('[role="tab"]')].find(t => t.textContent.includes("MCP")).click(); return null;"#)
        .await;
    window
        .click_xpath("//li[@aria-label='Server py']//button[normalize-space()='Edit']")
        .await;
    window
        .wait(r#"document.querySelector('[aria-label="Root 1"]')?.value !== undefined"#)
        .await;
    let shown = window
        .js(r#"return document.querySelector('[aria-label="Root 1"]').value;"#)
        .await;
    assert_eq!(
        shown,
        first.display().to_string(),
        "the form shows the roots"
    );
    window.click_button("Add root").await;
    window
        .type_into("Root 2", &second.display().to_string())
        .await;
    window.shot(&shots.join("05-roots-form.png")).await;
    window
        .click_xpath("//form[@aria-label='Server form']//button[@type='submit']")
        .await;
    // Another folder is more the server may read: the user allows it natively.
    native_dialog::answer(Answer::Press('a'), Duration::from_secs(30))
        .await
        .unwrap();
    let mut written = serde_json::Value::Null;
    for _ in 0..200 {
        let saved: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        written = saved["mcpServers"]["py"]["roots"].clone();
        if written.as_array().is_some_and(|roots| roots.len() == 2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        written,
        json!([first.display().to_string(), second.display().to_string()])
    );
    window
        .session
        .client
        .switch_to_window(chat_window)
        .await
        .unwrap();
    window.send("And now?").await;
    window.allow_call("client_roots").await;
    window.answer_contains("Listed again.").await;
    let sent = tool_result_sent(&llm);
    assert!(
        sent.contains(&uri(&first)) && sent.contains(&uri(&second)),
        "{sent}"
    );
    window.session.close().await.unwrap();
}

/// A request with two real-size images (a 1600×1000 design frame, a 1280×8000 screenshot)
/// and a tool: the review shows both as the host draws them, whole and in proportion
/// within their box, and the tool's input schema once unfolded; the images reach the
/// model only after the approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requests_images_and_tool_schemas_are_shown_before_it_runs() {
    let _window = ONE_WINDOW.lock().await;
    let chat = Dialect::OpenAiChat;
    let llm = ScriptedLlm::start(vec![
        chat.turn(
            &[],
            &[ScriptedCall::new("call_1", "py__compare_frames", json!({}))],
        ),
        chat.text(&["The frame matches the page's header."]),
        chat.text(&["Compared."]),
    ])
    .await
    .unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    let (python, fixture) = conduit_e2e::python_fixture("sampling_tools.py").unwrap();
    let home = conduit_e2e::home_with(
        &llm,
        json!({"py": {"command": python, "args": [fixture], "protocolVersion": "2026-07-28"}}),
    );
    let shots = artifacts_dir("desktop-sampling");
    let window = Window::start(&[("CONDUIT_HOME", home.path())], WAIT).await;
    window.model_shown("m").await;

    window.send("Does the frame match the page?").await;
    window.allow_call("compare_frames").await;
    // [natural width, natural height, shown width, shown height] of each image once drawn
    // (shown inside its border).
    let drawn = window
        .wait(&format!(
            r#"(() => {{ const shown = [...document.querySelectorAll('{CARD} img')];
                return shown.length === 2 && shown.every(i => i.complete && i.naturalWidth > 0)
                  && shown.map(i => {{ const box = i.getBoundingClientRect(), style = getComputedStyle(i);
                       const border = (side) => parseFloat(style[`border${{side}}Width`]);
                       return [i.naturalWidth, i.naturalHeight,
                               box.width - border("Left") - border("Right"),
                               box.height - border("Top") - border("Bottom")]; }}); }})()"#
        ))
        .await;
    let drawn: Vec<[f64; 4]> = serde_json::from_value(drawn).unwrap();
    // The host's PNGs: within 800 pixels a side, in proportion.
    assert_eq!(drawn[0][..2], [800.0, 500.0], "{drawn:?}");
    assert_eq!(drawn[1][..2], [128.0, 800.0], "{drawn:?}");
    for [natural_w, natural_h, shown_w, shown_h] in &drawn {
        assert!(*shown_h <= 192.0, "at most 12rem tall: {drawn:?}");
        let (natural, shown) = (natural_w / natural_h, shown_w / shown_h);
        assert!(
            (natural - shown).abs() / natural < 0.03,
            "not stretched: {drawn:?}"
        );
    }
    let schema = window
        .js(&format!(
            r#"document.querySelector('{CARD} details').open = true;
               const pre = document.querySelector('[aria-label="Input schema of zoom"]');
               pre.scrollIntoView({{block: "center"}});
               return pre.textContent;"#
        ))
        .await;
    assert!(
        schema.as_str().unwrap().contains("Left edge, in pixels"),
        "{schema}"
    );
    assert_eq!(llm.requests().len(), 1, "nothing runs before the approval");
    window.shot(&shots.join("06-images-and-schema.png")).await;
    window
        .js(&format!(
            r#"document.querySelector('{CARD} details').open = false;
               const list = document.querySelector('{CARD} ol');
               list.scrollTop = list.scrollHeight; return null;"#
        ))
        .await;
    window.shot(&shots.join("07-tall-screenshot.png")).await;

    // Too narrow to read in the review: opened at its own size, drawn whole by the host.
    window
        .js(r#"document.querySelector('[aria-label="Open image 2 at its own size"]').click(); return null;"#)
        .await;
    let whole = window
        .wait(
            r#"(() => { const img = document.querySelector('[aria-label="Image viewer"] img');
                return img && img.complete && img.naturalWidth > 0
                  && [img.getAttribute("src"), img.naturalWidth, img.naturalHeight]; })()"#,
        )
        .await;
    let id = window
        .js(r#"return document.querySelector('[data-sampling]').dataset.sampling;"#)
        .await;
    let whole_url = format!(
        "media://localhost/sampling/{}/1/whole",
        id.as_str().unwrap()
    );
    assert_eq!(
        whole,
        json!([whole_url, 1280, 8000]),
        "the whole screenshot, its own size"
    );
    window.click_button("Actual size").await;
    window
        .shot(&shots.join("08-tall-screenshot-whole.png"))
        .await;
    // Escape with focus gone back to the message box is the viewer's, not the turn's: the
    // tool call and its sampling request keep waiting.
    window
        .js(r#"const box = document.querySelector('[aria-label="Message"]'); box.focus();
               box.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true, cancelable: true}));
               return null;"#)
        .await;
    // A real Escape in the viewer closes it, and only it.
    window.type_into("Image viewer", "\u{E00C}").await;
    window
        .wait(r#"!document.querySelector('[aria-label="Image viewer"]')"#)
        .await;
    let still_waiting = window
        .js(&format!(
            r#"return !!document.querySelector('{CARD}')
                 && [...document.querySelectorAll('button')].some(b => b.textContent.trim() === 'Approve and run');"#
        ))
        .await;
    assert_eq!(still_waiting, json!(true), "the request still waits");
    assert_eq!(llm.requests().len(), 1, "looking runs nothing");

    window.click_button("Approve and run").await;
    window
        .wait(&format!(
            r#"document.querySelector('{CARD} .sampling-result')?.textContent.includes("matches")"#
        ))
        .await;
    let sampled = llm.requests()[1].body.to_string();
    assert_eq!(
        sampled.matches("data:image/").count(),
        2,
        "both images reach the model"
    );
    window.click_button("Send to py").await;
    window.answer_contains("Compared.").await;
    let sent = tool_result_sent(&llm);
    assert!(sent.contains("matches the page"), "{sent}");
    window.session.close().await.unwrap();
}
