//! `conduit mcp` and MCP tools in a chat, against real servers nobody here wrote
//! (`@modelcontextprotocol/server-everything`, `server-filesystem`), and against servers
//! that fail in every way: exit at start, print garbage, crash mid-call, hang.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
use conduit_e2e::{binary, npm_server};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// A temp home with an mcpServers file; `marker` appears in every server's command line
/// so the test can find leftover processes.
struct Setup {
    home: tempfile::TempDir,
    marker: String,
}

impl Setup {
    fn new(servers: Value) -> Self {
        let home = tempfile::tempdir().unwrap();
        let marker = format!(
            "conduit-test-{}",
            home.path().file_name().unwrap().to_string_lossy()
        );
        let text = serde_json::to_string_pretty(&json!({"mcpServers": servers}))
            .unwrap()
            .replace("MARKER", &marker);
        std::fs::write(home.path().join("mcp_servers.json"), text).unwrap();
        Self { home, marker }
    }

    fn path(&self) -> &Path {
        self.home.path()
    }

    fn conduit(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(binary("conduit").unwrap());
        cmd.args(args)
            .env("CONDUIT_HOME", self.path())
            .env_remove("CONDUIT_MCP_CONFIG")
            .env("CONDUIT_MCP_START_TIMEOUT", "5")
            .env("CONDUIT_TEST_TOKEN", "tok-123")
            .stdin(Stdio::null());
        cmd
    }

    /// Server processes of this test still running.
    fn leftovers(&self) -> Vec<String> {
        let out = Command::new("pgrep")
            .args(["-af", &self.marker])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.contains("pgrep"))
            .map(str::to_owned)
            .collect()
    }

    fn assert_no_leftovers(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.leftovers().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(
            self.leftovers(),
            Vec::<String>::new(),
            "server processes were left behind"
        );
    }
}

fn everything() -> Value {
    json!({"command": "node", "args": [npm_server("server-everything").unwrap(), "stdio", "MARKER"]})
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_out(out: &Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

#[test]
fn servers_start_together_and_each_shows_its_state() {
    let setup = Setup::new(json!({
        "everything": everything(),
        "dies": {"command": "sh", "args": ["-c", "echo 'fatal: missing API_KEY' >&2; exit 3", "MARKER"]},
        "silent": {"command": "sh", "args": ["-c", "echo 'not json at all'; exec sleep 30", "MARKER"]},
        "off": {"command": "nope", "disabled": true},
        "no-command": {"args": ["x"]},
        "missing-binary": {"command": "conduit-no-such-binary-xyz"}
    }));
    let started = Instant::now();
    let list = json_out(&setup.conduit(&["mcp", "list", "--json"]));
    // All start at once: the slow one (5 s timeout) bounds the whole start.
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
    let by_name = |name: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };

    let ready = by_name("everything");
    assert_eq!(ready["state"], "ready");
    assert_eq!(ready["details"]["name"], "mcp-servers/everything");
    assert!(ready["tool_count"].as_u64().unwrap() >= 10);
    assert!(ready["details"]["tools"].as_bool().unwrap());

    let dies = by_name("dies");
    assert_eq!(dies["state"], "failed");
    assert_eq!(dies["exit_code"], 3);
    assert_eq!(dies["stderr_tail"], json!(["fatal: missing API_KEY"]));

    // Slow, not broken: it is started again.
    let silent = by_name("silent");
    assert_eq!(silent["state"], "restarting", "{silent}");
    assert_eq!(silent["attempt"], 1, "{silent}");
    assert!(
        silent["reason"]
            .as_str()
            .unwrap()
            .contains("did not finish starting"),
        "{silent}"
    );

    assert_eq!(by_name("off")["state"], "disabled");
    assert!(
        by_name("no-command")["reason"]
            .as_str()
            .unwrap()
            .contains("needs a command")
    );
    assert!(
        by_name("missing-binary")["reason"]
            .as_str()
            .unwrap()
            .contains("not found")
    );

    let readable = stdout(&setup.conduit(&["mcp", "list"]));
    assert!(
        readable.contains("stderr: fatal: missing API_KEY"),
        "{readable}"
    );
    setup.assert_no_leftovers();
}

#[test]
fn tools_of_server_everything_are_called_with_rich_results() {
    let setup = Setup::new(json!({"everything": everything()}));
    let tools = json_out(&setup.conduit(&["mcp", "tools", "everything", "--json"]));
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for expected in [
        "echo",
        "get-sum",
        "get-tiny-image",
        "trigger-long-running-operation",
        "get-structured-content",
    ] {
        assert!(names.contains(&expected), "{names:?}");
    }

    let echo = json_out(&setup.conduit(&[
        "mcp",
        "call",
        "everything",
        "echo",
        "--args",
        r#"{"message": "hi there"}"#,
        "--json",
    ]));
    assert_eq!(echo["parts"][0]["text"], "Echo: hi there");

    let sum = json_out(&setup.conduit(&[
        "mcp",
        "call",
        "everything",
        "get-sum",
        "--args",
        r#"{"a": 2, "b": 40}"#,
        "--json",
    ]));
    assert!(sum["parts"][0]["text"].as_str().unwrap().contains("42"));

    let image =
        json_out(&setup.conduit(&["mcp", "call", "everything", "get-tiny-image", "--json"]));
    let file = &image["files"][0];
    assert_eq!(file["mime"], "image/png");
    let bytes = std::fs::read(file["path"].as_str().unwrap()).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(Path::new(file["path"].as_str().unwrap()).starts_with(setup.path()));

    let structured = json_out(&setup.conduit(&[
        "mcp",
        "call",
        "everything",
        "get-structured-content",
        "--args",
        r#"{"location": "Chicago"}"#,
        "--json",
    ]));
    let parts = structured["parts"].as_array().unwrap();
    let value = parts.iter().find(|p| p["type"] == "structured").unwrap();
    assert!(value["value"]["temperature"].is_number(), "{structured}");

    let links = json_out(&setup.conduit(&[
        "mcp",
        "call",
        "everything",
        "get-resource-links",
        "--args",
        r#"{"count": 3}"#,
        "--json",
    ]));
    let link_count = links["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "resource_link")
        .count();
    assert_eq!(link_count, 3);

    let reference = json_out(&setup.conduit(&[
        "mcp",
        "call",
        "everything",
        "get-resource-reference",
        "--args",
        r#"{"resourceType": "Text", "resourceId": 2}"#,
        "--json",
    ]));
    let resource = reference["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "resource")
        .unwrap()
        .clone();
    assert_eq!(resource["uri"], "demo://resource/dynamic/text/2");
    assert!(resource["text"].as_str().unwrap().contains("Resource 2"));

    // Invalid arguments come back as an isError result: exit 1, the server's words shown.
    let invalid = setup.conduit(&[
        "mcp",
        "call",
        "everything",
        "echo",
        "--args",
        r#"{"wrong": 1}"#,
        "--json",
    ]);
    assert_eq!(invalid.status.code(), Some(1));
    let result: Value = serde_json::from_slice(&invalid.stdout).unwrap();
    assert_eq!(result["isError"], true);
    assert!(
        result["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("message"),
        "{result}"
    );
    setup.assert_no_leftovers();
}

#[test]
fn progress_arrives_n_of_n_matched_to_the_call() {
    let setup = Setup::new(json!({"everything": everything()}));
    let out = setup.conduit(&[
        "mcp",
        "call",
        "everything",
        "trigger-long-running-operation",
        "--args",
        r#"{"duration": 1, "steps": 4}"#,
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let progress: Vec<Value> = text
        .lines()
        .filter(|l| l.starts_with("{\"type\":\"progress\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let steps: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"]["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(steps, [1.0, 2.0, 3.0, 4.0], "{text}");
    assert!(progress.iter().all(|p| p["progress"]["total"] == 4.0));
    setup.assert_no_leftovers();
}

#[test]
fn resources_and_prompts_are_listed_read_and_got() {
    let setup = Setup::new(json!({"everything": everything()}));
    let resources = json_out(&setup.conduit(&["mcp", "resources", "everything"]));
    assert!(
        !resources["resources"].as_array().unwrap().is_empty(),
        "{resources}"
    );
    assert!(
        !resources["templates"].as_array().unwrap().is_empty(),
        "{resources}"
    );
    let read = json_out(&setup.conduit(&[
        "mcp",
        "read",
        "everything",
        "demo://resource/dynamic/text/1",
    ]));
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Resource 1"),
        "{read}"
    );
    let prompts = json_out(&setup.conduit(&["mcp", "prompts", "everything"]));
    let names: Vec<&str> = prompts
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"args-prompt"), "{names:?}");
    let prompt = json_out(&setup.conduit(&[
        "mcp",
        "prompt",
        "everything",
        "args-prompt",
        "--args",
        r#"{"city": "Oslo"}"#,
    ]));
    assert!(prompt.to_string().contains("Oslo"), "{prompt}");
    setup.assert_no_leftovers();
}

#[test]
fn server_filesystem_lists_a_temp_folder() {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("notes.txt"), "hello").unwrap();
    // server-filesystem takes every argument as an allowed folder, so no marker here.
    let setup = Setup::new(json!({"fs": {
        "command": "node",
        "args": [npm_server("server-filesystem").unwrap(), folder.path()]
    }}));

    let out = json_out(&setup.conduit(&[
        "mcp",
        "call",
        "fs",
        "list_directory",
        "--args",
        &json!({"path": folder.path()}).to_string(),
        "--json",
    ]));
    assert!(
        out["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("notes.txt"),
        "{out}"
    );
}

#[test]
fn a_syntax_error_in_the_file_is_reported_and_the_file_left_alone() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("mcp_servers.json");
    let broken = "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n";
    std::fs::write(&path, broken).unwrap();
    let out = Command::new(binary("conduit").unwrap())
        .args(["mcp", "list"])
        .env("CONDUIT_HOME", home.path())
        .env_remove("CONDUIT_MCP_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let message = stderr(&out);
    assert!(message.contains("line 3, column 26"), "{message}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);
}

/// Arguments that are not JSON are refused before any server starts: a typo does not cost
/// a server's whole start.
#[test]
fn arguments_that_are_not_json_are_refused_before_any_server_starts() {
    let started = tempfile::tempdir().unwrap();
    let mark = started.path().join("started");
    let setup = Setup::new(json!({
        "slow": {"command": "sh", "args": ["-c", format!("touch '{}'; exec sleep 30", mark.display()), "MARKER"]}
    }));
    for args in [
        &["mcp", "call", "slow", "echo", "--args", "{bad"][..],
        &["mcp", "prompt", "slow", "p", "--args", "[1,"][..],
    ] {
        let out = setup.conduit(args);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("--args is not JSON"),
            "{}",
            stderr(&out)
        );
    }
    assert!(!mark.exists(), "no server was started");
}

/// A file named with --mcp-config or CONDUIT_MCP_CONFIG that is not there (a typo) is
/// said; the default file not there yet is not.
#[test]
fn a_named_mcp_servers_file_that_is_missing_is_said() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("typo/mcp.json");
    let run = |args: &[&str], env: Option<&Path>| {
        let mut command = Command::new(binary("conduit").unwrap());
        command
            .args(args)
            .env("CONDUIT_HOME", home.path())
            .env_remove("CONDUIT_MCP_CONFIG");
        if let Some(file) = env {
            command.env("CONDUIT_MCP_CONFIG", file);
        }
        command.output().unwrap()
    };
    let flag = missing.to_str().unwrap();
    for out in [
        run(&["--mcp-config", flag, "mcp", "list"], None),
        run(&["mcp", "list"], Some(&missing)),
    ] {
        assert!(out.status.success(), "{}", stderr(&out));
        let said = stderr(&out);
        assert!(
            said.contains("does not exist; no MCP servers are started from it")
                && said.contains("typo/mcp.json"),
            "{said}"
        );
    }
    let out = run(&["mcp", "list"], None);
    assert!(!stderr(&out).contains("does not exist"), "{}", stderr(&out));
}

#[test]
fn garbage_on_stdout_before_the_protocol_is_tolerated() {
    let script = format!(
        "echo 'banner: not json'; exec node {} stdio MARKER",
        npm_server("server-everything").unwrap().display()
    );
    let setup = Setup::new(json!({"chatty": {"command": "sh", "args": ["-c", script]}}));
    let out = json_out(&setup.conduit(&[
        "mcp",
        "call",
        "chatty",
        "get-sum",
        "--args",
        r#"{"a": 1, "b": 1}"#,
        "--json",
    ]));
    assert!(out["parts"][0]["text"].as_str().unwrap().contains('2'));
    setup.assert_no_leftovers();
}

/// `conduit mcp call` of a 30 s operation, returned once its first progress arrived.
async fn long_call_in_progress(setup: &Setup) -> tokio::process::Child {
    let mut child = tokio::process::Command::from(setup.command(&[
        "mcp",
        "call",
        "everything",
        "trigger-long-running-operation",
        "--args",
        r#"{"duration": 30, "steps": 30}"#,
        "--json",
    ]))
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .kill_on_drop(true)
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.contains("progress"), "{first}");
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_crashes_mid_call_fails_the_call_at_once() {
    let setup = Setup::new(json!({"everything": everything()}));
    let mut child = long_call_in_progress(&setup).await;
    // Kill the server (not conduit): the call in flight must fail promptly.
    let killed = Instant::now();
    let pkill = Command::new("pkill")
        .args(["-KILL", "-f", &format!("stdio {}", setup.marker)])
        .status()
        .unwrap();
    assert!(pkill.success());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(
        killed.elapsed() < Duration::from_secs(2),
        "took {:?}",
        killed.elapsed()
    );
    assert_eq!(status.code(), Some(1));
    let mut err = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut child.stderr.take().unwrap(), &mut err)
        .await
        .unwrap();
    assert!(err.contains("closed the connection"), "{err}");
    setup.assert_no_leftovers();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_hangs_times_out() {
    let mut entry = everything();
    entry["timeout"] = json!(1);
    let setup = Setup::new(json!({"everything": entry}));
    let started = Instant::now();
    // Progress every 10 s is slower than the 1 s timeout.
    let out = setup.conduit(&[
        "mcp",
        "call",
        "everything",
        "trigger-long-running-operation",
        "--args",
        r#"{"duration": 20, "steps": 2}"#,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("took longer than"),
        "{}",
        stderr(&out)
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    setup.assert_no_leftovers();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_conduit_leaves_no_server_behind() {
    let setup = Setup::new(json!({"everything": everything()}));
    let mut child = long_call_in_progress(&setup).await;
    assert!(
        !setup.leftovers().is_empty(),
        "the server runs while conduit does"
    );
    child.start_kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().await.unwrap();
    setup.assert_no_leftovers();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_calls_get_tiny_image_and_the_image_reaches_the_next_request() {
    let setup = Setup::new(json!({"everything": everything()}));
    let dialect = Dialect::Anthropic;
    let server = ScriptedLlm::start(vec![
        dialect.turn(
            &[],
            &[ScriptedCall::new(
                "toolu_img",
                "everything__get-tiny-image",
                json!({}),
            )],
        ),
        dialect.text(&["It is the MCP logo."]),
    ])
    .await
    .unwrap();
    let url = server.url();
    let out = setup.conduit(&[
        "chat",
        "--kind",
        "anthropic",
        "--base-url",
        &url,
        "--model",
        "claude-test",
        "--approve",
        "auto",
        "--json",
        "Show me the tiny image",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let requests = server.requests();
    let offered: Vec<String> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        offered.contains(&"everything__get-tiny-image".to_owned()),
        "{offered:?}"
    );
    let result = &requests[1].body["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    let image = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "image")
        .unwrap();
    assert_eq!(image["source"]["media_type"], "image/png");
    let stored: Vec<PathBuf> = walk(&setup.path().join("media"))
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains("thumb"))
        .collect();
    let expected = base64_of(&std::fs::read(&stored[0]).unwrap());
    assert_eq!(image["source"]["data"], expected);
    setup.assert_no_leftovers();
}

/// A PDF a real MCP server (the Python SDK's) returns as an embedded resource is stored,
/// and reaches the next request whole, inside the tool result, under its name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdf_a_server_returns_reaches_the_next_request_inside_the_result() {
    let folder = tempfile::tempdir().unwrap();
    let report = conduit_core::testing::pdf(24, 800_000);
    std::fs::write(folder.path().join("q3-report.pdf"), &report).unwrap();
    let (python, script) = conduit_e2e::python_fixture("design_frames.py").unwrap();
    let setup = Setup::new(json!({"reports": {
        "command": python,
        "args": [script, folder.path(), "MARKER"],
    }}));
    let dialect = Dialect::Anthropic;
    let server = ScriptedLlm::start(vec![
        dialect.turn(
            &[],
            &[ScriptedCall::new(
                "toolu_pdf",
                "reports__document",
                json!({"name": "q3-report.pdf"}),
            )],
        ),
        dialect.text(&["Revenue grew 12%."]),
    ])
    .await
    .unwrap();
    let url = server.url();
    let out = setup.conduit(&[
        "chat",
        "--kind",
        "anthropic",
        "--base-url",
        &url,
        "--model",
        "claude-test",
        "--approve",
        "auto",
        "Sum up the Q3 report",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Revenue grew 12%."));
    let requests = server.requests();
    let result = &requests[1].body["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    let document = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "document")
        .unwrap_or_else(|| panic!("{result:.600}"));
    assert_eq!(document["title"], "q3-report.pdf");
    assert_eq!(document["source"]["media_type"], "application/pdf");
    assert_eq!(document["source"]["data"], base64_of(&report));
    setup.assert_no_leftovers();
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

async fn everything_over_http() -> (tokio::process::Child, u16) {
    conduit_e2e::everything_over_http().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_with_a_bearer_token_from_the_environment() {
    let (_server, port) = everything_over_http().await;
    let gate = conduit_e2e::http_gate::HttpGate::start(
        &format!("http://127.0.0.1:{port}"),
        "Bearer tok-123",
    )
    .await
    .unwrap();
    let url = format!("http://{}/mcp", gate.addr);
    let setup = Setup::new(json!({
        "remote": {"type": "http", "url": url, "headers": {"Authorization": "Bearer ${CONDUIT_TEST_TOKEN}"}},
        "wrong-token": {"type": "http", "url": url, "headers": {"Authorization": "Bearer nope"}}
    }));
    let setup_path = setup.path().to_owned();
    let (list, sum, image, progress) = tokio::task::spawn_blocking(move || {
        let run = |args: &[&str]| {
            let mut cmd = Command::new(binary("conduit").unwrap());
            cmd.args(args)
                .env("CONDUIT_HOME", &setup_path)
                .env_remove("CONDUIT_MCP_CONFIG")
                .env("CONDUIT_MCP_START_TIMEOUT", "10")
                .env("CONDUIT_TEST_TOKEN", "tok-123");
            cmd.output().unwrap()
        };
        (
            run(&["mcp", "list", "--json"]),
            run(&[
                "mcp",
                "call",
                "remote",
                "get-sum",
                "--args",
                r#"{"a": 20, "b": 22}"#,
                "--json",
            ]),
            run(&["mcp", "call", "remote", "get-tiny-image", "--json"]),
            run(&[
                "mcp",
                "call",
                "remote",
                "trigger-long-running-operation",
                "--args",
                r#"{"duration": 1, "steps": 3}"#,
                "--json",
            ]),
        )
    })
    .await
    .unwrap();
    let list = json_out(&list);
    let remote = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "remote")
        .unwrap();
    assert_eq!(remote["state"], "ready", "{list}");
    let wrong = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "wrong-token")
        .unwrap();
    assert_eq!(wrong["state"], "failed", "{list}");
    assert!(
        json_out(&sum)["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("42")
    );
    assert_eq!(json_out(&image)["files"][0]["mime"], "image/png");
    let steps = stdout(&progress)
        .lines()
        .filter(|l| l.starts_with("{\"type\":\"progress\""))
        .count();
    assert_eq!(steps, 3, "{}", stdout(&progress));

    // The token went with every request of the good server; the session id was kept.
    let seen = gate.seen();
    let good: Vec<_> = seen
        .iter()
        .filter(|h| {
            h.get("authorization")
                .is_some_and(|v| v == "Bearer tok-123")
        })
        .collect();
    assert!(good.len() >= 6, "{}", good.len());
    assert!(
        good.iter().any(|h| h.get("mcp-session-id").is_some()),
        "the session id is sent back"
    );
}

#[test]
fn mcp_server_time_from_pypi_answers() {
    let server = conduit_e2e::workspace_root().join("tests/mcp-servers/.venv/bin/mcp-server-time");
    assert!(
        server.is_file(),
        "{} is missing: run `make test` (it installs it)",
        server.display()
    );
    let setup = Setup::new(
        json!({"time": {"command": server, "args": ["--local-timezone", "UTC"], "env": {"MARKER": "MARKER"}}}),
    );
    let tools = json_out(&setup.conduit(&["mcp", "tools", "time", "--json"]));
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"get_current_time") && names.contains(&"convert_time"),
        "{names:?}"
    );
    let now = json_out(&setup.conduit(&[
        "mcp",
        "call",
        "time",
        "get_current_time",
        "--args",
        r#"{"timezone": "Europe/Oslo"}"#,
        "--json",
    ]));
    let text = now["parts"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("Europe/Oslo") && text.contains("datetime"),
        "{text}"
    );
}

/// A server asked for by name that is not ready says why and fails, not `[]` with exit 0
/// as if it had no tools.
#[test]
fn the_tools_of_a_server_that_is_not_ready_are_an_error_saying_why() {
    let setup = Setup::new(json!({"off": {"command": "never-run", "disabled": true}}));
    let listed = setup.conduit(&["mcp", "tools", "off", "--json"]);
    assert_eq!(listed.status.code(), Some(1), "{}", stderr(&listed));
    assert!(
        stderr(&listed).contains("switched off"),
        "{}",
        stderr(&listed)
    );
    assert!(listed.stdout.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_tool_is_not_offered_to_the_model() {
    let setup = Setup::new(json!({"everything": everything()}));
    // Names no server can have are refused, nothing kept: the name a model sees, a
    // server not in the file, a built-in tool Conduit does not have.
    for (args, said) in [
        (
            ["everything", "everything__echo"],
            "name the tool as its server lists it: \"echo\"",
        ),
        (["evrything", "echo"], "no server named \"evrything\""),
        (
            ["conduit", "read_conversations"],
            "no built-in tool \"read_conversations\"",
        ),
    ] {
        let refused = setup.conduit(&["mcp", "disable-tool", args[0], args[1]]);
        assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
        assert!(stderr(&refused).contains(said), "{}", stderr(&refused));
    }
    let off = setup.conduit(&["mcp", "disable-tool", "everything", "echo"]);
    assert!(off.status.success(), "{}", stderr(&off));
    let listed = json_out(&setup.conduit(&["mcp", "tools", "everything", "--json"]));
    let echo = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .unwrap();
    assert_eq!(echo["enabled"], false);
    assert_eq!(echo["policy"], "ask", "the host's join, with the policy");

    let dialect = Dialect::Anthropic;
    let server = ScriptedLlm::start(vec![dialect.text(&["ok"]), dialect.text(&["ok"])])
        .await
        .unwrap();
    let url = server.url();
    let chat = |setup: &Setup| {
        setup.conduit(&[
            "chat",
            "--kind",
            "anthropic",
            "--base-url",
            &url,
            "--model",
            "m",
            "--json",
            "hi",
        ])
    };
    assert!(chat(&setup).status.success());
    assert!(
        setup
            .conduit(&["mcp", "enable-tool", "everything", "echo"])
            .status
            .success()
    );
    assert!(chat(&setup).status.success());
    let offered = |n: usize| -> Vec<String> {
        server.requests()[n].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(!offered(0).contains(&"everything__echo".to_owned()));
    assert!(offered(0).contains(&"everything__get-sum".to_owned()));
    assert!(offered(1).contains(&"everything__echo".to_owned()));
    setup.assert_no_leftovers();
}

#[test]
fn the_official_conformance_suite_passes_initialize_tools_call_and_sse_retry() {
    let servers = conduit_e2e::workspace_root().join("tests/mcp-servers/node_modules");
    let node22 = servers.join(".bin/node");
    let suite = servers.join("@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node22.is_file() && suite.is_file(),
        "run `make test`: the conformance suite is missing"
    );
    let client = conduit_e2e::target_profile_dir()
        .unwrap()
        .join("examples/conformance_client");
    assert!(
        client.is_file(),
        "build the example first (`cargo build --workspace --all-targets`)"
    );
    for scenario in ["initialize", "tools_call", "sse-retry"] {
        let out = Command::new(&node22)
            .arg(&suite)
            .args(["client", "--scenario", scenario, "--command"])
            .arg(&client)
            .output()
            .unwrap();
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(out.status.success(), "{scenario}: {text}");
        assert!(
            text.contains("OVERALL: PASSED") && text.contains(" 0 failed"),
            "{scenario}: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_tool_output_is_cut_for_the_model_and_kept_whole() {
    let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
    let setup = Setup::new(json!({"dyn": {
        "command": root.join(".venv/bin/python"),
        "args": [root.join("fixtures/dynamic_tools.py"), "MARKER"]
    }}));
    let dialect = Dialect::OpenAiChat;
    let server = ScriptedLlm::start(vec![
        dialect.turn(
            &[],
            &[ScriptedCall::new(
                "call_big",
                "dyn__big_output",
                json!({"mb": 20}),
            )],
        ),
        dialect.text(&["That was long."]),
    ])
    .await
    .unwrap();
    let url = dialect.base_url(&server.url());
    let out = setup.conduit(&[
        "chat",
        "--kind",
        "openai-chat",
        "--base-url",
        &url,
        "--model",
        "m",
        "--approve",
        "auto",
        "--json",
        "Make a lot of output",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let second = &server.requests()[1].body;
    let tool = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let sent = tool["content"].as_str().unwrap();
    assert!(
        sent.len() < 110 * 1024,
        "{} bytes went to the model",
        sent.len()
    );
    assert!(
        sent.contains("Output cut here"),
        "the model is told the output was cut"
    );

    // The whole output is kept for display, as a file beside the history.
    let events: Vec<Value> = stdout(&out)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let result = events.iter().find(|e| e["type"] == "tool_result").unwrap();
    let file = result["files"][0]["path"].as_str().unwrap();
    let whole = std::fs::read_to_string(file).unwrap();
    assert!(
        whole.len() >= 20 * 1024 * 1024 - 100,
        "{} bytes kept",
        whole.len()
    );
    assert!(whole.starts_with("0123456789abcdef") && whole.ends_with("cdef\n"));
    let id = events.last().unwrap()["conversation"].as_str().unwrap();
    let shown = json_out(&setup.conduit(&["sessions", "show", id, "--json"]));
    let part = &shown["messages"][2]["blocks"][0]["parts"][0];
    assert_eq!(part["type"], "long_text", "{part:.300}");
    assert_eq!(part["media"]["bytes"], whole.len());
    assert!(
        part["preview"]
            .as_str()
            .unwrap()
            .starts_with("0123456789abcdef")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_under_a_hashed_name_names_its_real_server_and_tool() {
    // A space is not allowed in a tool name: the exposed name is cleaned and hashed, and
    // nothing parses it back; the call takes its origin from the tool the host made.
    let setup = Setup::new(json!({"my server": everything()}));
    let exposed = conduit_mcp::naming::exposed_name("my server", "echo");
    assert!(exposed.starts_with("my_server__echo_"), "{exposed}");
    let dialect = Dialect::Anthropic;
    let server = ScriptedLlm::start(vec![
        dialect.turn(
            &[],
            &[ScriptedCall::new(
                "toolu_1",
                &exposed,
                json!({"message": "hi"}),
            )],
        ),
        dialect.text(&["Echoed."]),
    ])
    .await
    .unwrap();
    let url = server.url();
    let out = setup.conduit(&[
        "chat",
        "--kind",
        "anthropic",
        "--base-url",
        &url,
        "--model",
        "claude-test",
        "--approve",
        "auto",
        "--json",
        "Echo hi",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let events: Vec<Value> = stdout(&out)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let ready = events
        .iter()
        .find(|e| e["type"] == "tool_call_ready")
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(ready["call"]["name"], exposed.as_str());
    assert_eq!(
        ready["call"]["origin"],
        json!({"server": "my server", "tool": "echo"})
    );
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(result["result"]["is_error"], false, "{result}");
    setup.assert_no_leftovers();
}

/// A legacy server that ends at any first message but `initialize` (servers built on
/// older rmcp do) is started again with `initialize` after Conduit's `server/discover`
/// probe ended it, and its tools work.
#[test]
fn a_legacy_server_that_ends_at_the_discovery_probe_is_started_again_with_initialize() {
    let (python, script) = conduit_e2e::python_fixture("initialize_only.py").unwrap();
    let setup = Setup::new(json!({"legacy": {"command": python, "args": [script, "MARKER"]}}));
    let out = json_out(&setup.conduit(&[
        "mcp",
        "call",
        "legacy",
        "echo",
        "--args",
        r#"{"text": "still here"}"#,
        "--json",
    ]));
    assert_eq!(out["parts"][0]["text"], "echo: still here", "{out}");
    setup.assert_no_leftovers();
}

/// A server of MCP's legacy HTTP+SSE transport (2024-11-05; the Python SDK's `sse`) is
/// reached: an entry that says `"type": "sse"` opens its event stream first; an entry
/// with only the URL tries Streamable HTTP, whose POST the server refuses (405), then
/// the event stream. An entry that says `"type": "sse"` of a Streamable HTTP server
/// still reaches it, when its URL serves no legacy stream: server-everything refuses the
/// GET, and a stateless Python server answers it with a stream that names no endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_sse_server_is_reached_by_its_type_or_when_it_refuses_streamable_http() {
    let (_legacy, port) = conduit_e2e::python_server_on_a_free_port("legacy_sse.py", &[])
        .await
        .unwrap();
    let (_everything, everything_port) = everything_over_http().await;
    let (_stateless, stateless_port) =
        conduit_e2e::python_server_on_a_free_port("legacy_sse.py", &["stateless"])
            .await
            .unwrap();
    let sse = format!("http://127.0.0.1:{port}/sse");
    let setup = Setup::new(json!({
        "typed": {"type": "sse", "url": sse},
        "untyped": {"url": sse},
        "mislabelled": {"type": "sse", "url": format!("http://127.0.0.1:{everything_port}/mcp")},
        "stateless": {"type": "sse", "url": format!("http://127.0.0.1:{stateless_port}/mcp")}
    }));
    let home = setup.path().to_owned();
    let (typed, untyped, stateless, mislabelled) = tokio::task::spawn_blocking(move || {
        let run = |args: &[&str]| {
            Command::new(binary("conduit").unwrap())
                .args(args)
                .env("CONDUIT_HOME", &home)
                .env_remove("CONDUIT_MCP_CONFIG")
                .env("CONDUIT_MCP_START_TIMEOUT", "20")
                .output()
                .unwrap()
        };
        let echo = |server: &str| {
            run(&[
                "mcp",
                "call",
                server,
                "echo",
                "--args",
                r#"{"text": "over sse"}"#,
                "--json",
            ])
        };
        (
            echo("typed"),
            echo("untyped"),
            echo("stateless"),
            run(&[
                "mcp",
                "call",
                "mislabelled",
                "get-sum",
                "--args",
                r#"{"a": 2, "b": 3}"#,
                "--json",
            ]),
        )
    })
    .await
    .unwrap();
    for out in [&typed, &untyped, &stateless] {
        let out = json_out(out);
        assert_eq!(out["parts"][0]["text"], "echo: over sse", "{out}");
    }
    let mislabelled = json_out(&mislabelled);
    assert!(
        mislabelled["parts"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains('5'),
        "{mislabelled}"
    );
}
