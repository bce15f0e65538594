//! History through the real `conduit` binary: every turn saved, conversations continued,
//! listed, searched, exported, renamed and deleted, and a SIGKILL mid-answer that leaves
//! a sound database and a valid next turn (the answer seen streaming by another process
//! until then, interrupted after).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use conduit_e2e::binary;
use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

fn conduit(home: &Path, args: &[&str]) -> Output {
    Command::new(binary("conduit").unwrap())
        .args(args)
        .env("CONDUIT_HOME", home)
        .env("CONDUIT_TEST_TOOLS", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn chat_args<'a>(server: &'a str, extra: &[&'a str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "chat",
        "--kind",
        "anthropic",
        "--base-url",
        server,
        "--model",
        "claude-test",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn run_chat(home: &Path, server: &ScriptedLlm, extra: &[&str]) -> (Output, Vec<Value>) {
    let url = server.url();
    let args = chat_args(&url, extra);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = conduit(home, &refs);
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out, events)
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_turn_is_saved_continued_found_exported_renamed_and_deleted() {
    let dialect = Dialect::Anthropic;
    let server = ScriptedLlm::start(vec![
        dialect.turn(
            &["Let me echo."],
            &[ScriptedCall::new(
                "toolu_1",
                "test__echo",
                json!({"text": "barnacle"}),
            )],
        ),
        dialect.text(&["The echo said barnacle."]),
        dialect.text(&["You asked about barnacles."]),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let h = home.path();

    let (out, events) = run_chat(h, &server, &["--approve", "auto", "Please echo barnacle"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done = events.last().unwrap();
    assert_eq!(done["type"], "done");
    let id = done["conversation"].as_str().unwrap().to_owned();

    let list = json_of(&conduit(h, &["sessions", "list", "--json"]));
    assert_eq!(list[0]["id"], id);
    assert_eq!(list[0]["title"], "Please echo barnacle");
    assert_eq!(list[0]["messageCount"], 4);

    let shown = json_of(&conduit(h, &["sessions", "show", &id, "--json"]));
    let roles: Vec<&str> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    let statuses: Vec<&str> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["complete"; 4]);
    assert_eq!(shown["messages"][1]["blocks"][1]["type"], "tool_call");
    assert_eq!(shown["messages"][3]["usage"]["outputTokens"], 20);

    // Continue the conversation: the whole history goes to the model.
    let (out, _) = run_chat(h, &server, &["--conversation", &id, "What did I ask?"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let third = &server.requests()[2].body;
    let messages = third["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5, "{third}");
    assert_eq!(messages[0]["content"][0]["text"], "Please echo barnacle");
    assert_eq!(messages[4]["content"][0]["text"], "What did I ask?");

    let hits = json_of(&conduit(h, &["sessions", "search", "barnac", "--json"]));
    assert!(hits.as_array().unwrap().len() >= 3, "{hits}");
    assert!(hits[0]["snippet"].as_str().unwrap().contains('['));

    let out_dir = tempfile::tempdir().unwrap();
    let exported = conduit(
        h,
        &[
            "sessions",
            "export",
            &id,
            "--format",
            "md",
            "--out",
            out_dir.path().to_str().unwrap(),
        ],
    );
    assert!(exported.status.success());
    let file = String::from_utf8_lossy(&exported.stdout).trim().to_owned();
    let markdown = std::fs::read_to_string(&file).unwrap();
    assert!(
        markdown.contains("# Please echo barnacle") && markdown.contains("The echo said barnacle.")
    );

    assert!(
        conduit(h, &["sessions", "rename", &id, "Barnacles"])
            .status
            .success()
    );
    assert_eq!(
        json_of(&conduit(h, &["sessions", "list", "--json"]))[0]["title"],
        "Barnacles"
    );
    assert!(conduit(h, &["sessions", "delete", &id]).status.success());
    assert_eq!(
        json_of(&conduit(h, &["sessions", "list", "--json"])),
        json!([])
    );
    let missing = conduit(h, &["sessions", "show", &id]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no conversation"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_answer_leaves_a_sound_database_and_a_valid_next_turn() {
    let dialect = Dialect::Anthropic;
    // Text, then a complete tool call, then the stream stalls before message_stop.
    let mut reply = match dialect.turn(
        &["Checking the logs."],
        &[ScriptedCall::new(
            "toolu_9",
            "test__echo",
            json!({"text": "x"}),
        )],
    ) {
        conduit_e2e::llm_server::Reply::Stream(chunks) => chunks,
        _ => unreachable!(),
    };
    reply.truncate(reply.len() - 2); // drop message_delta and message_stop
    reply.push(conduit_e2e::llm_server::Chunk::Hang);
    let server = ScriptedLlm::start(vec![conduit_e2e::llm_server::Reply::Stream(reply)])
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let h = home.path();

    let url = server.url();
    let mut child = tokio::process::Command::new(binary("conduit").unwrap())
        .args(chat_args(&url, &["--approve", "auto", "Check the logs"]))
        .env("CONDUIT_HOME", h)
        .env("CONDUIT_TEST_TOOLS", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let event: Value = serde_json::from_str(&line).unwrap();
        // The call is announced after its block (and the text before it) were saved.
        if event["type"] == "tool_call_ready" {
            break;
        }
    }
    // Another process reading the history meanwhile sees the answer still streaming: it
    // is not taken for one a crash left.
    let list = json_of(&conduit(h, &["sessions", "list", "--json"]));
    let id = list[0]["id"].as_str().unwrap().to_owned();
    let shown = json_of(&conduit(h, &["sessions", "show", &id, "--json"]));
    assert_eq!(shown["messages"][1]["status"], "streaming", "{shown}");
    child.start_kill().unwrap();
    child.wait().await.unwrap();

    let db = rusqlite::Connection::open(h.join("history.db")).unwrap();
    let check: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    drop(db);

    // Killed, it left its lease's file with no lock on it: the next to open marks it.
    let shown = json_of(&conduit(h, &["sessions", "show", &id, "--json"]));
    let answer = &shown["messages"][1];
    assert_eq!(answer["status"], "interrupted");
    assert_eq!(answer["blocks"][0]["text"], "Checking the logs.");
    // Conduit's own id names the call; the provider's is kept for the wire.
    assert!(
        answer["blocks"][1]["id"]
            .as_str()
            .unwrap()
            .starts_with("call_")
    );
    assert_eq!(answer["blocks"][1]["wire_id"], "toolu_9");
    let readable = conduit(h, &["sessions", "show", &id]);
    assert!(String::from_utf8_lossy(&readable.stdout).contains("(interrupted)"));

    // The next turn sends a valid history: the open call is answered as interrupted.
    let next = ScriptedLlm::start(vec![dialect.text(&["Sorry, that was cut off."])])
        .await
        .unwrap();
    let (out, _) = run_chat(h, &next, &["--conversation", &id, "Try again"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = &next.requests()[0].body;
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[1]["content"][1]["type"], "tool_use", "{body}");
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_9");
    assert_eq!(result["is_error"], true);
    assert_eq!(messages[2]["content"][1]["text"], "Try again");
}

#[test]
fn a_history_database_from_a_newer_conduit_is_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let db = rusqlite::Connection::open(home.path().join("history.db")).unwrap();
    db.pragma_update(None, "user_version", 42).unwrap();
    drop(db);
    let out = conduit(home.path(), &["sessions", "list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("newer Conduit"));
}

/// Output that cannot be written: a reader that went away (`conduit sessions list | head
/// -1`) ends the command quietly, with success; a full disk is an error that says so.
/// Neither panics, and the turn a `conduit chat` ran is saved either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_to_a_closed_pipe_or_a_full_disk_is_handled() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let run = |args: &[&str], stdout: Stdio| {
        Command::new(binary("conduit").unwrap())
            .args(args)
            .env("CONDUIT_HOME", h)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .output()
            .unwrap()
    };
    let closed = || {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        Stdio::from(writer)
    };
    let full = || {
        Stdio::from(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
    };
    let out = run(&["sessions", "list"], closed());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    let out = run(&["sessions", "list", "--json"], full());
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("cannot write the output"), "{said}");
    assert!(!said.contains("panicked"), "{said}");

    let server = ScriptedLlm::start(vec![Dialect::Anthropic.text(&["Saved anyway."])])
        .await
        .unwrap();
    let url = server.url();
    let args = chat_args(&url, &["Hello"]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&refs, full());
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("cannot write the output"), "{said}");
    let list = json_of(&conduit(h, &["sessions", "list", "--json"]));
    assert_eq!(list.as_array().unwrap().len(), 1, "the turn was saved");
}

/// A conversation continued on another model or another provider: the first model's
/// reasoning (its signature, its encrypted content) goes back to that model alone, as any
/// other refuses it ("invalid signature") on every later turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_goes_back_only_to_the_provider_and_model_that_made_it() {
    for dialect in [Dialect::Anthropic, Dialect::OpenAiResponses] {
        let first = ScriptedLlm::start(vec![
            dialect.reasoned_text("Pondering barnacles", "opaque-from-first", &["One."]),
            dialect.text(&["Two."]),
            dialect.text(&["Four."]),
        ])
        .await
        .unwrap();
        let other = ScriptedLlm::start(vec![dialect.text(&["Three."])])
            .await
            .unwrap();
        let home = tempfile::tempdir().unwrap();
        let turn = |server: &ScriptedLlm, model: &str, conversation: Option<&str>| {
            let base_url = dialect.base_url(&server.url());
            let mut args = vec![
                "chat",
                "--kind",
                dialect.kind(),
                "--base-url",
                &base_url,
                "--model",
                model,
                "--json",
            ];
            if let Some(id) = conversation {
                args.extend(["--conversation", id]);
            }
            args.push("Tell me about barnacles");
            let out = conduit(home.path(), &args);
            assert!(
                out.status.success(),
                "{dialect:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let done: Value =
                serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap())
                    .unwrap();
            done["conversation"].as_str().unwrap().to_owned()
        };
        let id = turn(&first, "model-a", None);
        let shown = json_of(&conduit(home.path(), &["sessions", "show", &id, "--json"]));
        assert_eq!(
            shown["messages"][1]["blocks"][0]["producer"],
            format!("{} {}/model-a", dialect.base_url(&first.url()), first.url()),
            "{dialect:?}: {shown}"
        );

        turn(&first, "model-b", Some(&id));
        turn(&other, "model-a", Some(&id));
        turn(&first, "model-a", Some(&id));

        let sent = first.requests();
        assert_eq!(sent.len(), 3, "{dialect:?}");
        let other_sent = other.requests();
        assert_eq!(other_sent.len(), 1, "{dialect:?}");
        for (what, request) in [
            ("another model", &sent[1]),
            ("another provider", &other_sent[0]),
        ] {
            let body = request.body.to_string();
            assert!(body.contains("One."), "{dialect:?}, {what}: {body}");
            assert!(
                !body.contains("opaque-from-first") && !body.contains("Pondering"),
                "{dialect:?}, {what} got the first model's reasoning: {body}"
            );
        }
        let back = sent[2].body.to_string();
        let replayed = match dialect {
            Dialect::Anthropic => {
                json!({"type": "thinking", "thinking": "Pondering barnacles", "signature": "opaque-from-first"})
            }
            _ => {
                json!({"type": "reasoning", "id": "rs_test", "encrypted_content": "opaque-from-first", "summary": [{"type": "summary_text", "text": "Pondering barnacles"}]})
            }
        };
        assert!(
            back.contains(&replayed.to_string()),
            "{dialect:?}: the model that made it gets its reasoning back: {back}"
        );
    }
}
