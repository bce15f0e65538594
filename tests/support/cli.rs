//! Running the `conduit` CLI as a user does, and reading what `--json` prints.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::binary;

/// Runs `conduit args` with `home` as `CONDUIT_HOME`, the file secret store, trace logs
/// (so a test sees what would be logged) and `stdin` as its input.
// A test step: failing loudly is its job, so the test-only lints apply here too.
#[allow(clippy::unwrap_used)]
pub fn conduit(home: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(binary("conduit").unwrap())
        .args(args)
        .env("CONDUIT_HOME", home)
        .env("CONDUIT_SECRET_STORE", "file")
        .env("CONDUIT_LOG", "trace")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A finished `conduit chat --json`: its exit code, the events it printed, its stderr.
pub struct ChatRun {
    pub code: Option<i32>,
    pub events: Vec<Value>,
    pub stderr: String,
}

// A test step: failing loudly is its job, so the test-only lints apply here too.
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
impl ChatRun {
    /// Reads the run from its output; a stdout line that is not JSON fails the test.
    pub fn of(output: &Output) -> Self {
        let stdout = String::from_utf8_lossy(&output.stdout);
        Self {
            code: output.status.code(),
            events: stdout
                .lines()
                .map(|line| {
                    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
                })
                .collect(),
            stderr: text(&output.stderr),
        }
    }

    /// The events of one `type`, in order.
    pub fn of_type(&self, kind: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["type"] == kind).collect()
    }

    /// The answer's text: every `text_delta` joined.
    pub fn text(&self) -> String {
        self.of_type("text_delta")
            .iter()
            .map(|e| e["text"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The last event (how the run ended).
    pub fn last(&self) -> &Value {
        self.events.last().expect("some events")
    }
}

/// What a program run on a pseudo-terminal did (`tests/support/pty_driver.py`).
pub struct TerminalRun {
    /// Everything the terminal showed.
    pub transcript: String,
    /// The exit code, or `None` when it had to be killed.
    pub code: Option<i64>,
    /// The first step whose text did not come in time.
    pub failure: Option<String>,
    /// Whether the terminal showed what is typed once the program had ended.
    pub echo: bool,
}

/// Runs `argv` with `env` on a pseudo-terminal, as a person at a terminal would, through
/// `steps` (`{"expect": TEXT, "timeout": S}`, `{"send": TEXT}`, `{"key": "ctrl-c"}`);
/// the script is written in `dir`. The transcript is printed (seen with `--nocapture`).
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub async fn on_terminal(
    dir: &Path,
    argv: &[String],
    env: Value,
    steps: Vec<Value>,
    exit_timeout_s: u64,
) -> TerminalRun {
    let script = serde_json::json!({
        "argv": argv,
        "env": env,
        "steps": steps,
        "exit_timeout": exit_timeout_s,
    });
    let file = dir.join("pty_script.json");
    std::fs::write(&file, script.to_string()).unwrap();
    let driver = crate::workspace_root().join("tests/support/pty_driver.py");
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(180),
        tokio::process::Command::new("python3")
            .arg(driver)
            .arg(&file)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the pty driver finished")
    .unwrap();
    assert!(output.status.success(), "driver: {}", text(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let transcript = report["transcript"].as_str().unwrap().to_owned();
    eprintln!("{transcript}");
    TerminalRun {
        transcript,
        code: report["code"].as_i64(),
        failure: report["failure"].as_str().map(str::to_owned),
        echo: report["echo"].as_bool().unwrap(),
    }
}
