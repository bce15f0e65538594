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
