//! The chat window as a person uses it, in the real app under Xvfb: answers stream in, a
//! tool's image shows as a thumbnail and opens full size, approval (Allow once, Deny,
//! Always allow, which survives a restart), Stop keeps the partial answer, history and
//! search after a restart, and an XSS corpus in model text and tool output stays inert.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::time::Duration;

use conduit_e2e::desktop::Window;
use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
use conduit_e2e::{artifacts_dir, npm_server};
use fantoccini::Locator;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// A 1×1 PNG.
const PIXEL_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Payloads that would set `window.__xss` (or navigate) if any of them ran.
const XSS: &str = r#"<script>window.__xss=1</script> <img src=x onerror="window.__xss=2">
[click me](javascript:window.__xss=3) <a href="javascript:window.__xss=4">a</a>
<svg onload="window.__xss=5"><script>window.__xss=6</script></svg>
<iframe src="javascript:window.__xss=7"></iframe>
<meta http-equiv="refresh" content="0;url=javascript:window.__xss=8">
<details open ontoggle="window.__xss=9">x</details>"#;

struct Fixture {
    home: tempfile::TempDir,
    llm: ScriptedLlm,
    shots: PathBuf,
}

impl Fixture {
    async fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        let llm = ScriptedLlm::start(Vec::new()).await.unwrap();
        llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
        std::fs::write(
            home.path().join("settings.json"),
            llm.provider_settings().to_string(),
        )
        .unwrap();
        let servers = json!({"mcpServers": {"everything": {
            "command": "node",
            "args": [npm_server("server-everything").unwrap(), "stdio"]
        }}});
        std::fs::write(home.path().join("mcp_servers.json"), servers.to_string()).unwrap();
        Self {
            home,
            llm,
            shots: artifacts_dir("desktop-chat"),
        }
    }

    async fn open(&self) -> Window {
        let window = Window::start(&[("CONDUIT_HOME", self.home.path())], WAIT).await;
        // Ready when the provider's model shows in the picker.
        window.model_shown("m").await;
        window
    }

    fn settings(&self) -> Value {
        let text = std::fs::read_to_string(self.home.path().join("settings.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn shot(&self, name: &str) -> PathBuf {
        self.shots.join(name)
    }
}

fn call(id: &str, tool: &str, arguments: Value) -> ScriptedCall {
    ScriptedCall::new(id, &format!("everything__{tool}"), arguments)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_in_the_chat_window() {
    let chat = Dialect::OpenAiChat;
    let fixture = Fixture::new().await;
    fixture.llm.push(vec![
        chat.turn(
            &["Let me look."],
            &[call("c1", "get-tiny-image", json!({}))],
        ),
        chat.text(&["Here is the **tiny** image."]),
    ]);
    let window = fixture.open().await;
    window.send("Show me the tiny image").await;

    // Asked first: every MCP tool needs approval until the user says otherwise.
    window
        .tool_state("get-tiny-image", "Waiting for approval")
        .await;
    window.shot(&fixture.shot("01-approval.png")).await;
    window.click_button("Allow once").await;
    window.answer_contains("Here is the tiny image.").await;
    window.tool_state("get-tiny-image", "Done").await;
    let width = window
        .wait(r#"(() => { const img = document.querySelector('[aria-label="Tool result"] img'); return img && img.complete && img.naturalWidth; })()"#)
        .await;
    assert!(width.as_u64().unwrap() > 0, "the thumbnail decoded");
    window.shot(&fixture.shot("02-tool-image.png")).await;
    // The image went to the model in its next request.
    let second = &fixture.llm.requests()[1].body;
    assert!(second.to_string().contains("image_url"), "{second:.500}");

    window.click_button("Open image full size").await;
    let full = window
        .wait(r#"(() => { const img = document.querySelector('[aria-label="Image viewer"] img'); return img && img.complete && img.naturalWidth; })()"#)
        .await;
    assert!(full.as_u64().unwrap() > 0);
    window.click_button("Zoom in").await;
    window
        .wait(r#"document.querySelector('[aria-label="Zoom level"]').textContent === "125%""#)
        .await;
    window.shot(&fixture.shot("03-image-viewer.png")).await;
    window.click_button("Close image").await;

    // Deny: the model gets a denied result and answers.
    fixture.llm.push(vec![
        chat.turn(&[], &[call("c2", "echo", json!({"message": "secret"}))]),
        chat.text(&["Understood, I will not run it."]),
    ]);
    window.send("Echo something").await;
    window.tool_state("echo", "Waiting for approval").await;
    window.click_button("Deny").await;
    window
        .answer_contains("Understood, I will not run it.")
        .await;
    window.tool_state("echo", "Denied").await;
    let denied = fixture.llm.requests()[3].body.to_string();
    assert!(denied.contains("denied"), "{denied:.800}");

    // Always allow: saved in settings; the next call of the tool runs without asking.
    fixture.llm.push(vec![
        chat.turn(&[], &[call("c3", "echo", json!({"message": "once more"}))]),
        chat.text(&["Echoed."]),
    ]);
    window.send("Echo with always").await;
    window.tool_state("echo", "Waiting for approval").await;
    window.always_allow().await;
    window.answer_contains("Echoed.").await;
    assert_eq!(
        fixture.settings()["mcpServers"]["everything"]["toolApproval"]["echo"],
        "allow"
    );

    // An image attached with the picker goes to the model with the message.
    let picture = fixture.home.path().join("pixel.png");
    std::fs::write(&picture, PIXEL_PNG).unwrap();
    fixture.llm.push(vec![chat.text(&["A single pixel."])]);
    let picker = window
        .session
        .client
        .find(Locator::Css(r#"input[aria-label="Files to attach"]"#))
        .await
        .unwrap();
    picker
        .send_keys(&picture.display().to_string())
        .await
        .unwrap();
    window
        .wait(r#"document.querySelector('[aria-label="Attachments"]')?.textContent.includes("pixel.png")"#)
        .await;
    window.send("What is in this picture?").await;
    window.answer_contains("A single pixel.").await;
    window
        .wait(r#"(() => { const img = [...document.querySelectorAll('[aria-label="Your message"] img')].pop(); return img && img.complete && img.naturalWidth; })()"#)
        .await;
    let asked = fixture.llm.requests().last().unwrap().body.to_string();
    assert!(
        asked.contains("image_url") && asked.contains("What is in this picture?"),
        "{asked:.400}"
    );

    // A text file attached with the same picker (a 601-line CSV) goes to the model as
    // text headed by its name, and shows in the message as the file, its text on request.
    let csv: String = std::iter::once("day,city,temp\n".to_owned())
        .chain((0..600).map(|n| format!("2026-11-{:02},Oslo,{}\n", n % 30 + 1, n % 17)))
        .collect();
    let sheet = fixture.home.path().join("weather.csv");
    std::fs::write(&sheet, &csv).unwrap();
    fixture.llm.push(vec![chat.text(&["Oslo was cold."])]);
    window
        .session
        .client
        .find(Locator::Css(r#"input[aria-label="Files to attach"]"#))
        .await
        .unwrap()
        .send_keys(&sheet.display().to_string())
        .await
        .unwrap();
    window
        .wait(r#"document.querySelector('[aria-label="Attachments"]')?.textContent.includes("weather.csv")"#)
        .await;
    window.send("How cold was it?").await;
    window.answer_contains("Oslo was cold.").await;
    let asked = fixture.llm.requests().last().unwrap().body.to_string();
    let headed =
        serde_json::to_string(&format!("How cold was it?\n\nFile weather.csv:\n\n{csv}")).unwrap();
    assert!(asked.contains(headed.trim_matches('"')), "{asked:.600}");
    window
        .wait(r#"document.querySelector('[aria-label="Attached file weather.csv"]')?.textContent.includes("601 lines")"#)
        .await;
    window
        .js(r#"document.querySelector('[aria-label="Attached file weather.csv"] summary').click(); return null;"#)
        .await;
    window
        .wait(r#"document.querySelector('[aria-label="Attached file weather.csv"] [data-file-text]')?.textContent.includes("2026-11-30,Oslo,")"#)
        .await;
    window.shot(&fixture.shot("03b-text-file.png")).await;

    // The model's context is smaller than the conversation now: it is asked again with
    // the CSV cut to its start, the window says so, and the message keeps the whole file.
    fixture.llm.push(vec![
        chat.http_error(
            400,
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens. Please reduce the length of the messages.",
            None,
        ),
        chat.text(&["Colder still in December."]),
    ]);
    window.send("And in December?").await;
    window.answer_contains("Colder still in December.").await;
    window
        .wait(r#"document.querySelector('[aria-label="How the answer ended"]')?.textContent.includes("earlier tool outputs and files were cut to their start for the model")"#)
        .await;
    let asked = fixture.llm.requests().last().unwrap().body.to_string();
    // 2,000 bytes of the CSV's 14 KB: about a hundred of its 600 rows.
    assert!(
        asked.contains("more bytes were left out for the model")
            && asked.matches(",Oslo,").count() < 150,
        "{asked:.600}"
    );
    window
        .wait(r#"document.querySelector('[aria-label="Attached file weather.csv"] [data-file-text]')?.textContent.includes("2026-11-30,Oslo,")"#)
        .await;
    window
        .shot(&fixture.shot("03c-context-shortened.png"))
        .await;

    // Thinking picked beside the model goes with the message, in the protocol's field;
    // Default asks for none again.
    fixture.llm.push(vec![
        chat.text(&["Thought it over: colder."]),
        chat.text(&["Plainly: colder."]),
    ]);
    window.choose("Thinking", "high").await;
    window
        .wait(r#"document.querySelector('[aria-label="Thinking"]').value === "high""#)
        .await;
    window.send("Think it over").await;
    window.answer_contains("Thought it over: colder.").await;
    assert_eq!(
        fixture.llm.requests().last().unwrap().body["reasoning_effort"],
        "high"
    );
    window.shot(&fixture.shot("03d-thinking-high.png")).await;
    window.choose("Thinking", "").await;
    window.send("Plainly?").await;
    window.answer_contains("Plainly: colder.").await;
    assert_eq!(
        fixture
            .llm
            .requests()
            .last()
            .unwrap()
            .body
            .get("reasoning_effort"),
        None
    );

    // A PDF attached with the same picker (a 40-page paper of 1.2 MB) goes to the model
    // whole, as Chat Completions' file part under its name, and shows in the message as
    // the PDF with its size.
    let paper = conduit_core::testing::pdf(40, 1_200_000);
    let paper_path = fixture
        .home
        .path()
        .join("Attention Is All You Need (2017).pdf");
    std::fs::write(&paper_path, &paper).unwrap();
    fixture
        .llm
        .push(vec![chat.text(&["It introduces the Transformer."])]);
    window
        .session
        .client
        .find(Locator::Css(r#"input[aria-label="Files to attach"]"#))
        .await
        .unwrap()
        .send_keys(&paper_path.display().to_string())
        .await
        .unwrap();
    window
        .wait(r#"document.querySelector('[aria-label="Attachments"]')?.textContent.includes("Attention Is All You Need (2017).pdf")"#)
        .await;
    window.send("What does this paper introduce?").await;
    window
        .answer_contains("It introduces the Transformer.")
        .await;
    let asked = fixture.llm.requests().last().unwrap().body.clone();
    let sent = asked["messages"].as_array().unwrap().last().unwrap()["content"].clone();
    use base64::Engine;
    assert_eq!(
        sent[1],
        json!({"type": "file", "file": {
            "filename": "Attention Is All You Need (2017).pdf",
            "file_data": format!("data:application/pdf;base64,{}", base64::engine::general_purpose::STANDARD.encode(&paper)),
        }})
    );
    window
        .wait(r#"document.querySelector('[aria-label="Attached PDF Attention Is All You Need (2017).pdf"] [data-document-size]')?.textContent === "PDF · 1.2 MB""#)
        .await;
    window.shot(&fixture.shot("03e-pdf.png")).await;

    // Formulas in an answer are drawn (KaTeX's MathML, which the webview renders), in
    // the line and apart; a price stays a price.
    fixture.llm.push(vec![chat.text(&[
        "The roots of $ax^2 + bx + c = 0$ are\n\n$$\nx = \\frac{-b \\pm \\sqrt{b^2 - 4ac}}{2a}\n$$\n\n",
        "and \\(\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}\\). The book costs $5 and the pen $3.",
    ])]);
    window.send("Solve the quadratic").await;
    window
        .answer_contains("The book costs $5 and the pen $3.")
        .await;
    let drawn = window
        .js(r#"const answer = [...document.querySelectorAll('[aria-label="Assistant message"]')].pop();
               return {
                 inline: answer.querySelectorAll('math:not([display="block"])').length,
                 apart: answer.querySelectorAll('math[display="block"]').length,
                 width: Math.round(answer.querySelector('math[display="block"]').getBoundingClientRect().width),
               };"#)
        .await;
    assert_eq!(drawn["inline"], 2, "{drawn}");
    assert_eq!(drawn["apart"], 1, "{drawn}");
    assert!(
        drawn["width"].as_u64().unwrap() > 100,
        "drawn, not collapsed: {drawn}"
    );
    window.shot(&fixture.shot("03f-math.png")).await;

    // XSS in model text and in tool output renders as inert text.
    let tricky = format!("Here:\n\n{XSS}");
    fixture.llm.push(vec![
        chat.turn(&[&tricky], &[call("c4", "echo", json!({"message": XSS}))]),
        chat.text(&[&tricky, "\n\nThe end of the tricky part."]),
    ]);
    window.send("Show me tricky output").await;
    window.answer_contains("The end of the tricky part.").await;
    window.tool_state("echo", "Done").await;
    let verdict = window
        .js(r#"const log = document.querySelector('[role="log"]');
               return {
                 xss: window.__xss === undefined ? null : window.__xss,
                 // Only rendered content counts: the app's own icons are SVG.
                 scripts: log.querySelectorAll('script, iframe, meta, object, embed, .markdown svg, .tool-text svg').length,
                 handlers: [...log.querySelectorAll('*')].filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
                 jsLinks: [...log.querySelectorAll('[href]')].filter(e => /^\s*javascript:/i.test(e.getAttribute('href'))).length,
                 echoed: [...log.querySelectorAll('.tool-text')].some(p => p.textContent.includes('<script>window.__xss=1</script>')),
                 location: location.href
               };"#)
        .await;
    assert_eq!(verdict["xss"], Value::Null, "{verdict}");
    assert_eq!(verdict["scripts"], 0, "{verdict}");
    assert_eq!(verdict["handlers"], 0, "{verdict}");
    assert_eq!(verdict["jsLinks"], 0, "{verdict}");
    assert_eq!(
        verdict["echoed"], true,
        "the tool output shows the payload as text"
    );
    // A click on the javascript: link text does nothing either.
    window
        .js(r#"document.querySelectorAll('[role="log"] a').forEach(a => a.click()); return null;"#)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = window
        .js("return window.__xss === undefined ? null : window.__xss;")
        .await;
    assert_eq!(after, Value::Null);
    window.shot(&fixture.shot("04-xss-inert.png")).await;

    // Not even a script takes the window elsewhere (here a loopback page, not the web).
    window
        .js(&format!(
            "location.href = {:?}; return null;",
            fixture.llm.url()
        ))
        .await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let location = window.js("return location.href;").await;
    assert!(
        location.as_str().unwrap().starts_with("tauri://localhost"),
        "{location}"
    );
    window
        .wait(r#"document.querySelector('textarea[aria-label="Message"]')"#)
        .await;

    // A long tool run shows MCP progress in its card; a 429 shows the retry countdown.
    fixture.llm.push(vec![
        chat.turn(
            &[],
            &[call(
                "c6",
                "trigger-long-running-operation",
                json!({"duration": 3, "steps": 3}),
            )],
        ),
        chat.http_error(429, "Too many requests, slow down", Some("2")),
        chat.text(&["The operation finished."]),
    ]);
    window.send("Run the long operation").await;
    window.allow_call("trigger-long-running-operation").await;
    let progress = window
        .wait(r#"document.querySelector('[aria-label="Tool progress"]')?.getAttribute('aria-valuenow')"#)
        .await;
    assert!(progress.as_str().unwrap().parse::<f64>().unwrap() >= 1.0);
    window.shot(&fixture.shot("05-progress.png")).await;
    window
        .wait(r#"[...document.querySelectorAll('[role="status"]')].some(s => /retrying in \d+ s/.test(s.textContent))"#)
        .await;
    window.shot(&fixture.shot("06-retrying.png")).await;
    window.answer_contains("The operation finished.").await;
    window
        .tool_state("trigger-long-running-operation", "Done")
        .await;

    // Stop mid-stream: the partial answer stays, marked.
    fixture.llm.push(vec![
        chat.stall_after(&["Once upon a time", " there was a story"]),
    ]);
    window.send("Tell me a long story").await;
    window
        .answer_contains("Once upon a time there was a story")
        .await;
    window.shot(&fixture.shot("07-streaming.png")).await;
    window.click_button("Stop").await;
    window
        .wait(r#"[...document.querySelectorAll('[aria-label="Message state"]')].some(e => e.textContent.includes("Stopped"))"#)
        .await;
    window
        .wait(r#"document.querySelector('button[aria-label="Send"]') !== null"#)
        .await;
    window.shot(&fixture.shot("08-stopped.png")).await;
    window.session.close().await.unwrap();

    // After a restart: the conversation is there, search finds it, Always allow holds.
    let window = fixture.open().await;
    window
        .wait(r#"[...document.querySelectorAll('[aria-label="Conversation list"] button')].some(b => b.textContent.includes("Show me the tiny image"))"#)
        .await;
    window
        .js(r#"[...document.querySelectorAll('[aria-label="Conversation list"] button')].find(b => b.textContent.includes("Show me the tiny image")).click(); return null;"#)
        .await;
    window
        .answer_contains("Once upon a time there was a story")
        .await;
    window
        .wait(r#"[...document.querySelectorAll('[aria-label="Message state"]')].some(e => e.textContent.includes("Stopped"))"#)
        .await;
    let search = window
        .session
        .client
        .find(Locator::Css(r#"input[aria-label="Search conversations"]"#))
        .await
        .unwrap();
    search.send_keys("story").await.unwrap();
    window
        .wait(r#"document.querySelector('[aria-label="Search results"] mark')?.textContent.toLowerCase() === "story""#)
        .await;
    window
        .shot(&fixture.shot("07-search-after-restart.png"))
        .await;

    fixture.llm.push(vec![
        chat.turn(
            &[],
            &[call("c5", "echo", json!({"message": "after restart"}))],
        ),
        chat.text(&["Done without asking."]),
    ]);
    window.click_button("New chat").await;
    window.send("Echo after restart").await;
    window.answer_contains("Done without asking.").await;
    window.tool_state("echo", "Done").await;
    let asked = window
        .js(r#"return document.querySelectorAll('[aria-label="Approve tool call"]').length;"#)
        .await;
    assert_eq!(asked, 0, "Always allow held across the restart");
    window
        .wait(r#"[...document.querySelectorAll('[aria-label="How it was allowed"]')].some(p => p.textContent.includes("Allowed without asking: always allowed in Settings"))"#)
        .await;
    window.shot(&fixture.shot("10-always-allowed.png")).await;
    window.session.close().await.unwrap();
}

/// A message sent while a server is still starting (a first `npx` download, here one that
/// never answers) says what it waits for; "Answer without it" begins the answer at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_while_a_server_starts_says_so_and_can_go_without_it() {
    let chat = Dialect::OpenAiChat;
    let fixture = Fixture::new().await;
    let tag = format!(
        "{}-notes",
        fixture
            .home
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace('.', "")
    );
    let servers = json!({"mcpServers": {"notes": {
        "command": "sh",
        "args": ["-c", "exec sleep 600", &tag]
    }}});
    std::fs::write(
        fixture.home.path().join("mcp_servers.json"),
        servers.to_string(),
    )
    .unwrap();
    fixture
        .llm
        .push(vec![chat.text(&["Hello without the notes."])]);
    let window = fixture.open().await;
    // Another program's window has the focus, as when the user went on with other work.
    let _other = another_window_focused().await;
    window.send("Read my notes").await;
    window
        .wait(r#"document.querySelector('[aria-label="Servers starting"]')?.textContent.includes("Waiting for notes to start")"#)
        .await;
    window
        .shot(&fixture.shot("11-waiting-for-a-server.png"))
        .await;
    assert!(
        fixture.llm.requests().is_empty(),
        "the model was asked before the server settled"
    );
    window.click_button("Answer without it").await;
    window.answer_contains("Hello without the notes.").await;
    let notice = window
        .js(r#"return document.querySelectorAll('[aria-label="Servers starting"]').length;"#)
        .await;
    assert_eq!(notice, 0, "the notice went once the answer began");
    // The answer ended while the user was elsewhere: the taskbar marks Conduit's window.
    let deadline = std::time::Instant::now() + WAIT;
    // (Any window: xmessage, the only other one, never asks.)
    while !x_windows_named(None)
        .iter()
        .any(|id| xprop(id, "WM_HINTS").contains("urgency hint bit is set"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the window was not marked"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    window.session.close().await.unwrap();
}

/// A turn that fails mid-answer offers "Try again", which answers the same message again
/// (the failed answer stays, marked); an answer cut off at the output limit says so; a
/// message's Copy takes its text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_is_tried_again_and_a_cut_off_answer_says_so() {
    let chat = Dialect::OpenAiChat;
    let fixture = Fixture::new().await;
    std::fs::write(fixture.home.path().join("mcp_servers.json"), "{}").unwrap();
    let story =
        "Once upon a time, a lighthouse keeper kept a log of every ship that passed. ".repeat(12);
    let cut_off = chat.cut_off(&[&story]);
    fixture.llm.push(vec![
        chat.error_mid_stream(
            &["The lighthouse "],
            "The upstream model crashed (ref 7f3a).",
        ),
        chat.text(&["The lighthouse stood on the northern cape."]),
        cut_off,
        chat.text(&["A keeper, a log, and ships that passed."]),
        chat.text(&["Briefly: a keeper."]),
        chat.text(&["Hello again."]),
    ]);
    let window = fixture.open().await;
    // The new chat's instructions, set before its first message.
    window.click_button("Instructions").await;
    window
        .type_into("Instructions text", "Answer like a lighthouse keeper.")
        .await;
    window.shot(&fixture.shot("14-instructions.png")).await;
    window.click_button("Save").await;
    window
        .wait(r#"[...document.querySelectorAll('button[aria-haspopup="dialog"]')].some(b => b.textContent.trim() === "Instructions on")"#)
        .await;
    window.send("Where was the lighthouse?").await;
    window
        .wait(r#"document.querySelector('[role="alert"]')?.textContent.includes("The upstream model crashed")"#)
        .await;
    window.shot(&fixture.shot("12-failed-try-again.png")).await;
    // Away and back: the error is gone, and the failed answer is still offered again.
    window.click_button("New chat").await;
    window
        .wait(r#"!document.querySelector('[role="alert"]') && !document.querySelector('[aria-label="Last answer"]')"#)
        .await;
    window
        .js(r#"[...document.querySelectorAll('nav button')].find(b => b.textContent.includes("Where was the lighthouse?")).click(); return null;"#)
        .await;
    window
        .wait(r#"document.querySelector('[aria-label="Last answer"]')?.textContent.includes("The last answer did not finish.")"#)
        .await;
    window.shot(&fixture.shot("12b-failed-on-return.png")).await;
    window.click_button("Try again").await;
    window
        .answer_contains("The lighthouse stood on the northern cape.")
        .await;
    // The failed attempt stays above, marked; the model read the question once, without it.
    let failed = window
        .js(r#"return [...document.querySelectorAll('[aria-label="Message state"]')].map(e => e.textContent.trim());"#)
        .await;
    let failed = failed.as_array().unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    let failed = failed[0].as_str().unwrap();
    assert!(
        failed.starts_with("Failed: ") && failed.contains("The upstream model crashed (ref 7f3a)."),
        "{failed}"
    );
    let first = &fixture.llm.requests()[0].body;
    assert_eq!(first["messages"][0]["role"], "system", "{first}");
    assert_eq!(
        first["messages"][0]["content"],
        "Answer like a lighthouse keeper."
    );
    let second = fixture.llm.requests()[1].body.to_string();
    assert!(
        second.contains("Answer like a lighthouse keeper."),
        "{second}"
    );
    assert_eq!(
        second.matches("Where was the lighthouse?").count(),
        1,
        "{second}"
    );
    assert!(!second.contains("The lighthouse \""), "{second}");

    window.send("Tell me its story").await;
    window
        .wait(r#"document.querySelector('[aria-label="How the answer ended"]')?.textContent.includes("The answer was cut off")"#)
        .await;
    window.shot(&fixture.shot("13-cut-off.png")).await;
    window.click_button("Copy message").await;
    window
        .wait(r#"[...document.querySelectorAll('[aria-label="Copy message"]')].some(b => b.textContent === "Copied")"#)
        .await;
    // Answer again: the cut-off story folds away, kept; the model reads the question
    // without it.
    window.click_button("Answer again").await;
    window
        .answer_contains("A keeper, a log, and ships that passed.")
        .await;
    let folded = window
        .wait(r#"(() => { const d = document.querySelector('details[aria-label="Replaced answer"]');
                     return d && !d.open && d.textContent.includes("lighthouse keeper kept a log") ? "folded" : null; })()"#)
        .await;
    assert_eq!(folded, "folded");
    window.shot(&fixture.shot("15-answer-again.png")).await;
    window
        .js(r#"document.querySelector('details[aria-label="Replaced answer"]').open = true; return null;"#)
        .await;
    window
        .shot(&fixture.shot("15b-replaced-answer-open.png"))
        .await;
    let last = fixture.llm.requests().last().unwrap().body.to_string();
    assert!(!last.contains("kept a log of every ship"), "{last}");
    assert_eq!(last.matches("Tell me its story").count(), 1, "{last}");

    // Edit: the last message comes back to the composer; what is sent takes its place,
    // and its answers', which fold away, kept.
    window.click_button("Edit message").await;
    window
        .wait(r#"document.querySelector('[aria-label="Editing"]') !== null"#)
        .await;
    let draft = window
        .js("return document.querySelector('textarea').value;")
        .await;
    assert_eq!(draft, "Tell me its story");
    window.shot(&fixture.shot("16-editing.png")).await;
    window.send(" briefly").await;
    window.answer_contains("Briefly: a keeper.").await;
    window
        .wait(r#"[...document.querySelectorAll('details[aria-label="Replaced answer"]')].some(d => d.textContent.includes("An earlier version of your message"))"#)
        .await;
    window.shot(&fixture.shot("17-edited.png")).await;
    let last = fixture.llm.requests().last().unwrap().body.to_string();
    assert!(last.contains("Tell me its story briefly"), "{last}");
    assert!(
        !last.contains("A keeper, a log") && !last.contains("\"Tell me its story\""),
        "{last}"
    );

    // Pinned, the older conversation heads the list above a newer one.
    window.click_button("New chat").await;
    window.send("A second chat").await;
    window.answer_contains("Hello again.").await;
    let order = r#"[...document.querySelectorAll('ul[aria-label="Conversation list"] li')].map(li => li.querySelector('button').textContent.trim()).join(" | ")"#;
    let before = window
        .wait(&format!(
            "(() => {{ const o = {order}; return o.startsWith('A second chat') ? o : null; }})()"
        ))
        .await;
    assert!(
        before
            .as_str()
            .unwrap()
            .ends_with("Where was the lighthouse?"),
        "{before}"
    );
    window.click_button("Pin Where was the lighthouse?").await;
    window
        .wait(&format!(
            "({order}).startsWith('Where was the lighthouse?')"
        ))
        .await;
    window.shot(&fixture.shot("18-pinned.png")).await;
    window.session.close().await.unwrap();
}

/// The X window ids with a name on this display: all, or those whose WM_NAME is `name`.
fn x_windows_named(name: Option<&str>) -> Vec<String> {
    let found = std::process::Command::new("xdotool")
        .args(["search", "--name", "."])
        .output()
        .unwrap();
    String::from_utf8_lossy(&found.stdout)
        .lines()
        .filter(|id| name.is_none_or(|name| xprop(id, "WM_NAME").contains(&format!("\"{name}\""))))
        .map(str::to_owned)
        .collect()
}

/// What `xprop` says of window `id`'s `property`.
fn xprop(id: &str, property: &str) -> String {
    let said = std::process::Command::new("xprop")
        .args(["-id", id, property])
        .output()
        .unwrap();
    String::from_utf8_lossy(&said.stdout).into_owned()
}

/// Opens another program's window (xmessage) and gives it the focus; it closes when the
/// returned child is dropped.
async fn another_window_focused() -> tokio::process::Child {
    let other = tokio::process::Command::new("xmessage")
        .args(["-geometry", "+600+600", "another program"])
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(id) = x_windows_named(Some("xmessage")).first() {
            let focused = std::process::Command::new("xdotool")
                .args(["windowfocus", "--sync", id])
                .status()
                .unwrap();
            assert!(focused.success());
            return other;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "xmessage never showed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
