//! The real app's start and end. Ended by the system (SIGTERM at logout or shutdown,
//! `kill`), it ends its MCP servers as its own Quit does: also what a server started
//! (`npx`'s node, a child it forked), which hears nothing of its parent's death. A second
//! start brings the running window forward instead of starting every server again, and
//! the window opens where it was left.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use conduit_e2e::desktop::Window;
use conduit_e2e::llm_server::{Dialect, ScriptedLlm};
use conduit_e2e::npm_server;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

/// The pids of processes whose command line matches `pattern` (pgrep -f).
fn pids(pattern: &str) -> Vec<u32> {
    let out = Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// The app's process: the one of its binary whose environment names `home`.
fn app_pid(home: &Path) -> Option<u32> {
    let app = conduit_e2e::desktop::app_binary().unwrap();
    let wanted = format!("CONDUIT_HOME={}", home.display());
    pids(&app.display().to_string()).into_iter().find(|pid| {
        std::fs::read(format!("/proc/{pid}/environ"))
            .map(|env| env.split(|b| *b == 0).any(|var| var == wanted.as_bytes()))
            .unwrap_or(false)
    })
}

/// The ids of the app's shown windows named Conduit (GTK's hidden leader window has the
/// name too).
fn windows_of(pid: u32) -> Vec<String> {
    let out = Command::new("xdotool")
        .args([
            "search",
            "--onlyvisible",
            "--pid",
            &pid.to_string(),
            "--name",
            "^Conduit$",
        ])
        .output()
        .expect("xdotool is missing: `make setup-test` installs it");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Sends the app SIGTERM, as a logout or `kill` does, and waits until it has ended.
async fn end_as_the_system_does(app: u32) {
    Command::new("kill")
        .args(["-TERM", &app.to_string()])
        .status()
        .unwrap();
    until("the app ended", || {
        !Path::new(&format!("/proc/{app}")).exists()
            || std::fs::read_to_string(format!("/proc/{app}/stat"))
                .is_ok_and(|stat| stat.contains(") Z "))
    })
    .await;
}

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigterm_ends_the_servers_and_what_they_started() {
    let llm = ScriptedLlm::start(vec![Dialect::OpenAiChat.text(&["unused"])])
        .await
        .unwrap();
    // A server that forks a child of its own before it serves, as npx forks node: a
    // sleep with a length no other process has.
    let marker = format!("{}.{}", 600 + std::process::id() % 100, std::process::id());
    let everything = npm_server("server-everything").unwrap();
    let home = conduit_e2e::home_with(
        &llm,
        json!({"forks": {"command": "sh", "args": ["-c",
            format!("sleep {marker} & exec node '{}' stdio", everything.display())]}}),
    );
    let window = Window::start(&[("CONDUIT_HOME", home.path())], WAIT).await;
    let grandchild = format!("sleep {marker}");
    until("the server's child runs", || !pids(&grandchild).is_empty()).await;
    let app = app_pid(home.path()).expect("the app runs");

    end_as_the_system_does(app).await;
    until("the server's child ended with the app", || {
        pids(&grandchild).is_empty()
    })
    .await;
    // The driver's session went with the app.
    drop(window);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_start_shows_the_running_window_and_a_restart_opens_it_where_it_was_left() {
    let llm = ScriptedLlm::start(vec![Dialect::OpenAiChat.text(&["unused"])])
        .await
        .unwrap();
    // A server that writes a line each time it starts.
    let starts_dir = tempfile::tempdir().unwrap();
    let starts = starts_dir.path().join("starts");
    let count_starts = || {
        std::fs::read_to_string(&starts)
            .map(|text| text.lines().count())
            .unwrap_or(0)
    };
    let everything = npm_server("server-everything").unwrap();
    let home = conduit_e2e::home_with(
        &llm,
        json!({"counted": {"command": "sh", "args": ["-c",
            format!("echo started >> '{}'; exec node '{}' stdio", starts.display(), everything.display())]}}),
    );
    let shots = conduit_e2e::artifacts_dir("desktop-quit");
    std::fs::create_dir_all(&shots).unwrap();
    let window = Window::start(&[("CONDUIT_HOME", home.path())], WAIT).await;
    until("the server started", || count_starts() == 1).await;
    let app = app_pid(home.path()).expect("the app runs");

    // The user moves the window and makes it smaller (no window manager under Xvfb:
    // xdotool moves it as one would).
    // GTK may still apply the window's first size just after it shows, and the window
    // xdotool found may be replaced as it is mapped (both seen under load): the window is
    // found and moved again until the page has the new size.
    let mut resized = false;
    let mut said = String::new();
    for _ in 0..10 {
        let Some(window_id) = windows_of(app).pop() else {
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        };
        let moved = Command::new("xdotool")
            .args([
                "windowsize",
                &window_id,
                "1000",
                "700",
                "windowmove",
                &window_id,
                "40",
                "30",
            ])
            .output()
            .unwrap();
        said = String::from_utf8_lossy(&moved.stderr).into_owned();
        let deadline = Instant::now() + Duration::from_secs(3);
        while moved.status.success() && !resized && Instant::now() < deadline {
            resized = window
                .js("return window.innerWidth === 1000 && window.innerHeight === 700;")
                .await
                == serde_json::Value::Bool(true);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if resized {
            break;
        }
    }
    assert!(resized, "the window took the size xdotool gave it: {said}");

    // Started again from the menu: the running window comes forward, and nothing starts
    // twice.
    let binary = conduit_e2e::desktop::app_binary().unwrap();
    let second = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new(&binary)
            .env("CONDUIT_HOME", home.path())
            .env("CONDUIT_SECRET_STORE", "file")
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("a second start ends at once")
    .unwrap();
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{said}");
    assert!(
        said.contains("Conduit is already running; its window was brought forward"),
        "{said}"
    );
    assert_eq!(app_pid(home.path()), Some(app), "one app for the folder");
    assert_eq!(count_starts(), 1, "the server was not started again");
    assert_eq!(windows_of(app).len(), 1);
    // The running window still answers.
    window.wait("document.readyState === 'complete'").await;

    // Ended by the system; started again: the window is where it was left.
    end_as_the_system_does(app).await;
    drop(window);
    let kept: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.path().join("window.json")).unwrap()).unwrap();
    assert_eq!(
        kept,
        json!({"x": 40, "y": 30, "width": 1000, "height": 700, "maximized": false})
    );
    let window = Window::start(&[("CONDUIT_HOME", home.path())], WAIT).await;
    window
        .wait("window.innerWidth === 1000 && window.innerHeight === 700")
        .await;
    let again = app_pid(home.path()).expect("the app runs again");
    let found = windows_of(again);
    assert!(!found.is_empty(), "the window shows again");
    let geometry = Command::new("xdotool")
        .args(["getwindowgeometry", &found[0]])
        .output()
        .unwrap();
    let geometry = String::from_utf8_lossy(&geometry.stdout);
    assert!(
        geometry.contains("Position: 40,30") && geometry.contains("Geometry: 1000x700"),
        "{geometry}"
    );
    window
        .shot(&shots.join("01-opened-where-it-was-left.png"))
        .await;
}
