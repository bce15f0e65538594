//! Memory over a long day (run by `make bench`, ignored by `make test`): 1,000 turns in one
//! window of the release app (a new conversation every 50), each a scripted model's tool call to a
//! real MCP server (the official Python SDK's) that answers with an image (a new one each
//! turn), then the model's answer. The resident memory of all the app's processes is
//! sampled every 100 turns; what counts is the growth after the first 100.
//! `CONDUIT_SOAK_TURNS` runs fewer turns (a multiple of 100) to try the bench out.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Cursor;
use std::path::Path;
use std::time::{Duration, Instant};

use conduit_e2e::desktop::{DesktopSession, Window};
use conduit_e2e::footprint::{Breakdown, Memory, descendants, release_binary};
use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
use conduit_e2e::{artifacts_dir, workspace_root};
use image::{Rgb, RgbImage};
use serde_json::json;

const EVERY: usize = 100;
/// Turns per conversation: a model gets the whole conversation each turn, images included,
/// so one conversation of 1,000 image turns outgrows any provider's request limit (the
/// scripted server answered 413 at turn 464, near 2 MB of history).
const TURNS_PER_CONVERSATION: usize = 50;
const PATIENCE: Duration = Duration::from_secs(60);
/// Bound on one turn (a busy machine slows the page down).
const TURN_PATIENCE: Duration = Duration::from_secs(180);

fn turns() -> usize {
    std::env::var("CONDUIT_SOAK_TURNS")
        .ok()
        .map(|t| t.parse().expect("CONDUIT_SOAK_TURNS is a number"))
        .unwrap_or(1_000)
}

/// A 480×300 PNG that differs from every other turn's (a colour and a bar per turn).
fn frame_png(turn: usize) -> Vec<u8> {
    let shade = |k: usize| ((turn * k) % 256) as u8;
    let mut img = RgbImage::from_pixel(480, 300, Rgb([shade(37), shade(91), shade(53)]));
    let bar = (turn % 480) as u32;
    for y in 0..300 {
        for x in bar.saturating_sub(8)..(bar + 8).min(480) {
            img.put_pixel(x, y, Rgb([255, 255, 255]));
        }
    }
    let mut png = Vec::new();
    img.write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    png
}

/// The release app's process among this test's descendants.
fn app_pid() -> u32 {
    let found: Vec<u32> = descendants(std::process::id())
        .into_iter()
        .filter(|(_, comm)| comm == "conduit-desktop")
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(found.len(), 1, "one app process expected: {found:?}");
    found[0]
}

/// Waits until the answer of `turn` shows and the last tool card's image has loaded:
/// polled in the page every 20 ms, in rounds shorter than WebDriver's 30 s script limit.
/// On failure it saves a screenshot and shows the page's last answer and the log's end.
async fn wait_for_turn(window: &Window, turn: usize, home: &Path) {
    let script = r#"const [done_text, done] = arguments;
       const deadline = performance.now() + 20000;
       const check = () => {
         const answers = document.querySelectorAll('[aria-label="Assistant message"]');
         const last = answers[answers.length - 1];
         const cards = document.querySelectorAll('article[aria-label="Tool call frames"]');
         const card = cards[cards.length - 1];
         const img = card && card.querySelector('[aria-label="Tool result"] img');
         if (last && last.textContent.includes(done_text) && img && img.complete && img.naturalWidth > 0) done(true);
         else if (performance.now() > deadline) done(false);
         else setTimeout(check, 20);
       };
       check();"#;
    let deadline = Instant::now() + TURN_PATIENCE;
    loop {
        let done = window
            .session
            .client
            .execute_async(script, vec![json!(format!("Done {turn}."))])
            .await
            .unwrap();
        if done == json!(true) {
            return;
        }
        if Instant::now() > deadline {
            let shot = artifacts_dir("bench").join(format!("soak-turn-{turn}-stuck.png"));
            let _ = window.session.screenshot(&shot).await;
            let page = window
                .session
                .js(r#"const a = document.querySelectorAll('[aria-label="Assistant message"]');
                       const cards = document.querySelectorAll('article[aria-label^="Tool call"]');
                       return {answers: a.length, cards: cards.length,
                               last: a.length ? a[a.length - 1].textContent.slice(-300) : null,
                               alerts: [...document.querySelectorAll('[role="alert"]')].map(e => e.textContent.slice(0, 300))};"#)
                .await
                .unwrap_or_default();
            let log = std::fs::read_to_string(home.join("logs/conduit.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            panic!(
                "turn {turn} did not finish within {TURN_PATIENCE:?}; page: {page}; screenshot: {}; log (newest first):\n{}",
                shot.display(),
                tail.join("\n")
            );
        }
    }
}

/// What the page holds: its elements, images, messages, and the IPC callbacks Tauri keeps
/// (a turn that left something behind shows here as a count that grows).
async fn page_size(window: &Window) -> serde_json::Value {
    window
        .session
        .js(r#"return {
             elements: document.getElementsByTagName('*').length,
             images: document.images.length,
             messages: document.querySelectorAll('[role="article"]').length,
             ipc_callbacks: window.__TAURI_INTERNALS__?.callbacks?.size ?? null,
           };"#)
        .await
        .unwrap_or_default()
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_000_000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run by `make bench`"]
async fn a_thousand_tool_image_turns_keep_memory_flat() {
    let turns = turns();
    assert!(
        turns >= EVERY && turns.is_multiple_of(EVERY),
        "CONDUIT_SOAK_TURNS must be a multiple of {EVERY}"
    );
    let home = tempfile::tempdir().unwrap();
    let folder = home.path().join("frames");
    std::fs::create_dir_all(&folder).unwrap();
    for turn in 1..=turns {
        std::fs::write(folder.join(format!("{turn}.png")), frame_png(turn)).unwrap();
    }
    let llm = ScriptedLlm::start(Vec::new()).await.unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    std::fs::write(
        home.path().join("settings.json"),
        llm.provider_settings().to_string(),
    )
    .unwrap();
    let root = workspace_root().join("tests/mcp-servers");
    let python = root.join(".venv/bin/python");
    assert!(
        python.is_file(),
        "run `make setup-test`: the Python test servers are missing"
    );
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"design": {
            "command": python,
            "args": [root.join("fixtures/design_frames.py"), folder]
        }}})
        .to_string(),
    )
    .unwrap();

    let app = release_binary("conduit-desktop");
    let session = DesktopSession::start(&app, &[("CONDUIT_HOME", home.path() as &Path)])
        .await
        .unwrap();
    let window = Window::new(session, PATIENCE);
    window.model_shown("m").await;
    let pid = app_pid();
    let at_start = Memory::of(pid);

    let chat = Dialect::OpenAiChat;
    let mut samples: Vec<(usize, Memory, f64, serde_json::Value)> = Vec::new();
    let started = Instant::now();
    let mut lap = Instant::now();
    for turn in 1..=turns {
        let call = ScriptedCall::new(
            &format!("c{turn}"),
            "design__frames",
            json!({ "names": [format!("{turn}.png")] }),
        );
        llm.push(vec![
            chat.turn(&[&format!("Turn {turn}: the frame.")], &[call]),
            chat.text(&[&format!("Done {turn}.")]),
        ]);
        if turn > 1 && (turn - 1) % TURNS_PER_CONVERSATION == 0 {
            window.click_button("New chat").await;
            window
                .wait(r#"!document.querySelector('[aria-label="Assistant message"]')"#)
                .await;
        }
        window.send(&format!("Frame {turn}, please")).await;
        if turn == 1 {
            // Approval is not what this bench measures: allow the tool once and for all.
            window.click_button("Always allow this tool").await;
        }
        wait_for_turn(&window, turn, home.path()).await;
        if turn % EVERY == 0 {
            let memory = Memory::of(pid);
            let seconds = lap.elapsed().as_secs_f64();
            lap = Instant::now();
            let page = page_size(&window).await;
            println!(
                "soak: turn {turn}: app {:.0} MB, WebKit {:.0} MB, all {:.0} MB (server {:.0} MB); {:.0} ms per turn; page: {page}",
                mb(memory.app),
                mb(memory.webkit),
                mb(memory.all()),
                mb(memory.servers),
                seconds * 1000.0 / EVERY as f64
            );
            // Where WebKit's memory is: the web process's anonymous memory is what grew.
            for (child, comm) in descendants(pid) {
                if comm.starts_with("WebKit") {
                    let kinds = Breakdown::of(child);
                    println!(
                        "soak:   {comm}: anonymous {:.0} MB, shared {:.0} MB, files {:.0} MB",
                        mb(kinds.anonymous),
                        mb(kinds.shared),
                        mb(kinds.files)
                    );
                }
            }
            samples.push((turn, memory, seconds, page));
        }
    }
    window
        .session
        .screenshot(&artifacts_dir("bench").join("soak-last-turn.png"))
        .await
        .unwrap();
    // Whether the growth is the open conversation (its messages and images in the page) or
    // kept after it is left: a new chat, then a sample once WebKit had time to collect.
    window.click_button("New chat").await;
    window
        .wait(r#"!document.querySelector('[aria-label="Assistant message"]')"#)
        .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let after_leaving = Memory::of(pid);
    println!(
        "soak: 10 s after leaving the conversation for a new chat: app {:.0} MB, WebKit {:.0} MB, all {:.0} MB",
        mb(after_leaving.app),
        mb(after_leaving.webkit),
        mb(after_leaving.all()),
    );
    window.session.close().await.unwrap();

    let first = samples[0].1.all();
    let last = samples[samples.len() - 1].1.all();
    let peak = samples.iter().map(|s| s.1.all()).max().unwrap_or(0);
    println!(
        "Soak ({turns} turns with a tool image each, a new conversation every {TURNS_PER_CONVERSATION}, release build, {:.0} s): all processes {:.0} MB before the first turn, {:.0} MB after turn {EVERY}, {:.0} MB after turn {turns} (peak {:.0} MB): growth after the first {EVERY} turns {:+.1} % (goal < 10 %)",
        started.elapsed().as_secs_f64(),
        mb(at_start.all()),
        mb(first),
        mb(last),
        mb(peak),
        (last as f64 / first as f64 - 1.0) * 100.0
    );
    let out = artifacts_dir("bench");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        out.join("soak.json"),
        serde_json::to_string_pretty(&json!({
            "before_first_turn": {"app": at_start.app, "webkit": at_start.webkit, "servers": at_start.servers},
            "after_leaving": {"app": after_leaving.app, "webkit": after_leaving.webkit, "servers": after_leaving.servers},
            "samples": samples.iter().map(|(turn, m, secs, page)| json!({
                "turn": turn, "app": m.app, "webkit": m.webkit, "servers": m.servers, "seconds": secs,
                "page": page,
            })).collect::<Vec<_>>(),
        }))
        .unwrap(),
    )
    .unwrap();
}
