//! The real app, ended by the system (SIGTERM at logout or shutdown, `kill`), ends its MCP
//! servers as its own Quit does: also what a server started (`npx`'s node, a child it
//! forked), which hears nothing of its parent's death.

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
    until("the server's child ended with the app", || {
        pids(&grandchild).is_empty()
    })
    .await;
    // The driver's session went with the app.
    drop(window);
}
