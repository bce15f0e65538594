//! `conduit repl` on a pseudo-terminal (python3's pty module drives it, as a person
//! types): a tool call approved inline, `/history`, `/new`, `/attach`, `/tools`,
//! `/model`, `/thinking`, Ctrl-C stopping an answer with what it said kept, Ctrl-D and Ctrl-C at the
//! prompt leaving, a model without native tools calling one as text, a hostile answer's
//! terminal controls shown as marks, not obeyed (in `conduit chat` and `conduit sessions
//! show` too), output closed mid-answer ending the REPL quietly, and `--approve auto`
//! and `deny` asking nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use conduit_e2e::binary;
use conduit_e2e::cli::{TerminalRun, conduit, on_terminal};
use conduit_e2e::llm_server::{Dialect, Reply, ScriptedCall, ScriptedLlm};
use serde_json::{Value, json};

const KEY: &str = "sk-test-key-1234";

/// A 1×1 PNG.
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// A step of the terminal script.
fn expect(text: &str) -> Value {
    json!({"expect": text, "timeout": 30})
}
fn send(line: &str) -> Value {
    json!({"send": format!("{line}\r")})
}
fn key(name: &str) -> Value {
    json!({"key": name})
}

/// A model turn calling `test__echo` with `text` after saying `before`, then the answer
/// `after`: the script most of these tests run.
fn echo_then(dialect: Dialect, before: &[&str], text: &str, after: &[&str]) -> Vec<Reply> {
    vec![
        dialect.turn(
            before,
            &[ScriptedCall::new(
                "call_1",
                "test__echo",
                json!({"text": text}),
            )],
        ),
        dialect.text(after),
    ]
}

/// Runs `conduit repl` against `server` on a pseudo-terminal through `steps`.
async fn repl(server: &ScriptedLlm, home: &Path, steps: Vec<Value>) -> TerminalRun {
    on_terminal(home, &repl_argv(server), repl_env(home), steps, 30).await
}

/// The command line of `conduit repl` against `server`.
fn repl_argv(server: &ScriptedLlm) -> Vec<String> {
    let dialect = Dialect::OpenAiChat;
    vec![
        binary("conduit").unwrap().display().to_string(),
        "repl".into(),
        "--kind".into(),
        dialect.kind().into(),
        "--base-url".into(),
        dialect.base_url(&server.url()),
        "--api-key-env".into(),
        "CONDUIT_TEST_LLM_KEY".into(),
        "--model".into(),
        "gpt-test".into(),
    ]
}

/// `conduit repl` as `argv` says, in `home`, its standard streams piped (not a terminal).
fn piped_repl(argv: &[String], home: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .env("CONDUIT_HOME", home)
        .env("CONDUIT_TEST_LLM_KEY", KEY)
        .env("CONDUIT_SECRET_STORE", "file")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    command
}

/// The environment of `conduit repl` with `home`.
fn repl_env(home: &Path) -> Value {
    json!({
        "CONDUIT_HOME": home,
        "CONDUIT_TEST_LLM_KEY": KEY,
        "CONDUIT_TEST_TOOLS": "1",
        "CONDUIT_SECRET_STORE": "file",
    })
}

/// The saved messages of the only conversation in `home`, newest last.
fn saved_conversations(home: &Path) -> Vec<Value> {
    let listed = conduit(home, &["sessions", "list", "--json"], None);
    let list: Value = serde_json::from_slice(&listed.stdout).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let id = c["id"].as_str().unwrap();
            let shown = conduit(home, &["sessions", "show", id, "--json"], None);
            serde_json::from_slice(&shown.stdout).unwrap()
        })
        .collect()
}

/// "c" allows the tool for the rest of the conversation: its next call there runs
/// unasked; a new conversation asks again, and nothing was saved for good. (A real MCP
/// server: the allow is bound to what its tool is.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_allowed_in_this_conversation_runs_unasked_there_and_is_asked_about_in_the_next() {
    let dialect = Dialect::OpenAiChat;
    let read = |before: &str, path: &str, after: &str| {
        vec![
            dialect.turn(
                &[before],
                &[ScriptedCall::new(
                    "call_1",
                    "fs__read_file",
                    json!({"path": path}),
                )],
            ),
            dialect.text(&[after]),
        ]
    };
    // The first response calls the tool twice: one answer covers both.
    let mut first = read("First.", "/notes/one.md", "Read one.");
    first[0] = dialect.turn(
        &["First."],
        &[
            ScriptedCall::new("call_1", "fs__read_file", json!({"path": "/notes/one.md"})),
            ScriptedCall::new(
                "call_2",
                "fs__read_file",
                json!({"path": "/notes/one-b.md"}),
            ),
        ],
    );
    let server = ScriptedLlm::start(
        [
            first,
            read("Second.", "/notes/two.md", "Read two."),
            read("Third.", "/notes/three.md", "Not read."),
        ]
        .concat(),
    )
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let (python, script) = conduit_e2e::python_fixture("approval_tools.py").unwrap();
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"fs": {"command": python, "args": [script]}}}).to_string(),
    )
    .unwrap();
    let session = repl(
        &server,
        home.path(),
        vec![
            expect("> "),
            send("read one"),
            expect("allow [o]nce, in this [c]onversation, [a]lways, or [d]eny?"),
            send("c"),
            expect("← fs__read_file done"),
            expect("Read one."),
            expect("> "),
            send("read two"),
            expect("Second."),
            expect("✓ runs without asking: allowed in this conversation"),
            expect("← fs__read_file done"),
            expect("contents of /notes/two.md"),
            expect("Read two."),
            expect("> "),
            send("/new"),
            expect("New conversation."),
            expect("> "),
            send("read three"),
            expect("allow [o]nce, in this [c]onversation, [a]lways, or [d]eny?"),
            send("d"),
            expect("denied"),
            expect("Not read."),
            expect("> "),
            key("ctrl-d"),
        ],
    )
    .await;
    assert_eq!(session.failure, None, "{}", session.transcript);
    assert_eq!(session.code, Some(0), "{}", session.transcript);
    // Asked about the first call and the third message's; the first response's second
    // call, if its question came up at all, was answered already and not asked about:
    // it and the second message's call say which allow let them.
    let questions = session.transcript.matches("wants to run with").count();
    assert!((2..=3).contains(&questions), "{}", session.transcript);
    let allowed = session
        .transcript
        .matches("✓ runs without asking: allowed in this conversation")
        .count();
    assert_eq!(allowed, 2, "{}", session.transcript);
    assert!(
        !session.transcript.contains("Answer o, c"),
        "{}",
        session.transcript
    );
    let after_both = server.requests()[1].body.to_string();
    assert!(
        after_both.contains("contents of /notes/one.md")
            && after_both.contains("contents of /notes/one-b.md"),
        "{after_both}"
    );
    let settings = std::fs::read_to_string(home.path().join("settings.json")).unwrap_or_default();
    assert!(!settings.contains("read_file"), "{settings}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_approved_inline_then_new_then_ctrl_c_keeps_the_partial_answer() {
    let dialect = Dialect::OpenAiChat;
    let server = ScriptedLlm::start(
        [
            echo_then(dialect, &["Let me echo."], "pty hello", &["Echoed ", "it."]),
            vec![
                dialect.text(&["A fresh ", "start."]),
                dialect.stall_after(&["Partial ", "answer"]),
            ],
        ]
        .concat(),
    )
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let session = repl(
        &server,
        home.path(),
        vec![
            expect("Conduit REPL"),
            expect("> "),
            send("please echo"),
            expect("Let me echo."),
            expect("? test__echo wants to run with {\"text\":\"pty hello\"}"),
            // What an "always" would be bound to is shown the first time too.
            expect("  it says of itself:\r\n  │ Echo the text back."),
            expect("allow [o]nce, in this [c]onversation, [a]lways, or [d]eny?"),
            send("o"),
            expect("← test__echo done"),
            expect(": pty hello"),
            expect("Echoed it."),
            expect("> "),
            send("/history"),
            expect("you: please echo"),
            expect("tools: ← test__echo done: pty hello"),
            expect("model: Echoed it."),
            expect("> "),
            send("/new"),
            expect("New conversation."),
            expect("> "),
            send("start over"),
            expect("A fresh start."),
            expect("> "),
            send("say something long"),
            expect("Partial answer"),
            key("ctrl-c"),
            expect("(stopped; the answer so far was kept)"),
            expect("> "),
            send("/history"),
            expect("model: Partial answer"),
            expect("> "),
            key("ctrl-d"),
            expect("conduit: conversation "),
        ],
    )
    .await;
    assert_eq!(session.failure, None, "{}", session.transcript);
    assert_eq!(session.code, Some(0), "{}", session.transcript);

    // The model got the result of the approved call, and /new started afresh.
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{}", session.transcript);
    let second = requests[1].body.to_string();
    assert!(second.contains("pty hello"), "{second}");
    let third = requests[2].body.to_string();
    assert!(third.contains("start over"), "{third}");
    assert!(!third.contains("please echo"), "/new: {third}");
    let fourth = requests[3].body.to_string();
    assert!(fourth.contains("start over"), "same conversation: {fourth}");

    // Both conversations are saved as the window's are; the stopped answer is kept,
    // marked interrupted.
    let conversations = saved_conversations(home.path());
    assert_eq!(conversations.len(), 2);
    let all = serde_json::to_string(&conversations).unwrap();
    assert!(all.contains("\"Echoed it.\""), "{all}");
    let stopped = conversations
        .iter()
        .flat_map(|c| c["messages"].as_array().unwrap())
        .find(|m| m["status"] == "interrupted")
        .unwrap_or_else(|| panic!("an interrupted message: {all}"));
    assert_eq!(stopped["blocks"][0]["text"], "Partial answer", "{stopped}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_then_a_denied_call_is_not_run_and_ctrl_c_at_the_prompt_leaves() {
    let dialect = Dialect::OpenAiChat;
    let files = tempfile::tempdir().unwrap();
    // Neither an image nor text.
    let notes = files.path().join("notes.bin");
    std::fs::write(&notes, [0x00, 0x9f, 0x92, 0x96, 0xff]).unwrap();
    let png = files.path().join("tiny.png");
    std::fs::write(
        &png,
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, PNG_BASE64).unwrap(),
    )
    .unwrap();
    let server = ScriptedLlm::start(echo_then(dialect, &[], "never", &["Understood."]))
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let session = repl(
        &server,
        home.path(),
        vec![
            expect("> "),
            send("/tools"),
            expect("test__echo"),
            expect("> "),
            send("/model"),
            expect("Model: gpt-test"),
            expect("> "),
            send("/thinking"),
            expect("Thinking: the model's default"),
            expect("> "),
            send("/thinking lots"),
            expect("\"lots\" is not a thinking level: use low, medium or high; or default"),
            expect("> "),
            send("/thinking high"),
            expect("Thinking: high (from the next message on)"),
            expect("> "),
            send("/attach /no/such/file.png"),
            expect("cannot attach /no/such/file.png"),
            expect("> "),
            // A file that is neither an image nor text is refused when the message goes, and dropped, so
            // the next message is not refused for it again.
            send(&format!("/attach {}", notes.display())),
            expect("(sent with your next message)"),
            expect("> "),
            send("hi"),
            expect("cannot attach"),
            expect("notes.bin is not a text file"),
            expect("the attached files were dropped"),
            expect("> "),
            send(&format!("/attach {}", png.display())),
            expect("(sent with your next message)"),
            expect("> "),
            send("echo please"),
            expect("allow [o]nce, in this [c]onversation, [a]lways, or [d]eny?"),
            send("maybe"),
            expect("Answer o, c, a or d."),
            send("d"),
            expect("denied"),
            expect("Understood."),
            expect("> "),
            key("ctrl-c"),
        ],
    )
    .await;
    assert_eq!(session.failure, None, "{}", session.transcript);
    assert_eq!(session.code, Some(0), "{}", session.transcript);
    assert!(
        !session.transcript.contains("← test__echo done"),
        "{}",
        session.transcript
    );
    let requests = server.requests();
    let first = requests[0].body.to_string();
    assert!(
        first.contains(PNG_BASE64),
        "the attached image is sent: {first}"
    );
    let second = requests[1].body.to_string();
    assert!(second.contains("denied"), "{second}");
    for asked in &requests {
        assert_eq!(
            asked.body["reasoning_effort"], "high",
            "/thinking high holds"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_without_native_tools_calls_one_as_text_approved_inline_and_a_stop_mid_call_runs_nothing()
 {
    let dialect = Dialect::OpenAiChat;
    let server = ScriptedLlm::start(vec![
        dialect.http_error(
            400,
            "registry.ollama.ai/library/gpt-test does not support tools",
            None,
        ),
        dialect.text(&[
            "Checking. ",
            "<tool_call><name>test__echo</name>",
            "<arguments>{\"text\": \"via text\"}</arguments></tool_call>",
        ]),
        dialect.text(&["Done via text."]),
        dialect.stall_after(&["Let me ", "<tool_call><name>test__echo</name><argu"]),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let session = repl(
        &server,
        home.path(),
        vec![
            expect("> "),
            send("echo via text"),
            expect("Checking."),
            expect("? test__echo wants to run with {\"text\":\"via text\"}"),
            expect("allow [o]nce, in this [c]onversation, [a]lways, or [d]eny?"),
            send("a"),
            expect("← test__echo done"),
            expect("Done via text."),
            expect("> "),
            send("again"),
            expect("Let me"),
            key("ctrl-c"),
            expect("(stopped; the answer so far was kept)"),
            expect("> "),
            key("ctrl-d"),
        ],
    )
    .await;
    assert_eq!(session.failure, None, "{}", session.transcript);
    assert_eq!(session.code, Some(0), "{}", session.transcript);
    assert!(
        !session.transcript.contains("tool_call"),
        "no call text is shown: {}",
        session.transcript
    );
    assert_eq!(
        session.transcript.matches("← test__echo").count(),
        1,
        "the half-written call never ran: {}",
        session.transcript
    );

    // Refused once; the model stays in text mode for the session's next message.
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{}", session.transcript);
    assert!(requests[0].body["tools"].is_array());
    for request in &requests[1..] {
        assert!(request.body.get("tools").is_none(), "{}", request.body);
    }
    let conversations = saved_conversations(home.path());
    let stopped = conversations[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["status"] == "interrupted")
        .unwrap_or_else(|| panic!("an interrupted message: {}", conversations[0]));
    assert_eq!(
        stopped["blocks"],
        json!([{"type": "text", "text": "Let me "}]),
        "{stopped}"
    );
}

/// A prompt-injected answer: a fake approval question, then "invisible from here on"
/// (SGR 8), a clipboard write (OSC 52), a window title (OSC 2), a line erased and a
/// reordered line, streamed in pieces that split the sequences.
const HOSTILE: [&str; 4] = [
    "Run it? allow [o]nce \x1b[8",
    "mhidden\x1b]52;c;cm0gLXJmIH4=\x07\x1b]2;t",
    "itle\x07 \r\x1b[2Kgone \u{202e}txt.exe",
    " \u{9b}8m end",
];
/// The same answer as the terminal must show it.
const HOSTILE_SHOWN: &str = "Run it? allow [o]nce ␛[8mhidden␛]52;c;cm0gLXJmIH4=␇␛]2;title␇ ␍␛[2Kgone <U+202E>txt.exe <U+009B>8m end";

/// What a terminal would obey in the hostile answer (rustyline's own escapes are left
/// out of the search by looking for the answer's sequences only).
fn obeyed(output: &str) -> Vec<&'static str> {
    [
        "\x1b[8m",
        "\x1b]52",
        "\x1b]2;",
        "\x07",
        "\r\x1b[2Kgone",
        "\u{202e}",
        "\u{9b}",
    ]
    .into_iter()
    .filter(|raw| output.contains(raw))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_answer_is_shown_inert_and_the_real_approval_question_starts_plain() {
    let dialect = Dialect::OpenAiChat;
    let server = ScriptedLlm::start(echo_then(dialect, &HOSTILE, "\x1b[8mquiet", &["Done."]))
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let session = repl(
        &server,
        home.path(),
        vec![
            expect("> "),
            send("hello"),
            expect(HOSTILE_SHOWN),
            // The real question: after a style reset, on a line of its own.
            expect("\n\x1b[0m? test__echo wants to run with {\"text\":\"\\u001b[8mquiet\"}"),
            expect("allow [o]nce, in this [c]onversation, [a]lways, or [d]eny?"),
            send("d"),
            expect("Done."),
            expect("> "),
            send("/history"),
            expect(&format!("model: {HOSTILE_SHOWN}")),
            expect("> "),
            key("ctrl-d"),
        ],
    )
    .await;
    assert_eq!(session.failure, None, "{:?}", session.transcript);
    assert_eq!(session.code, Some(0), "{:?}", session.transcript);
    assert_eq!(
        obeyed(&session.transcript),
        Vec::<&str>::new(),
        "{:?}",
        session.transcript
    );
    // The approval prompt itself comes after a reset too (rustyline may put its cursor
    // query between them).
    let asked = session
        .transcript
        .find("  test__echo: allow [o]nce, in this [c]onversation, [a]lways, or [d]eny?")
        .unwrap();
    let before = &session.transcript[..asked];
    let reset = before.rfind("\x1b[0m").unwrap();
    let header = before.rfind("? test__echo wants to run").unwrap();
    assert!(reset > header, "{:?}", session.transcript);

    // What was saved is the answer as the model sent it; shown, it is inert.
    let conversations = saved_conversations(home.path());
    let saved = &conversations[0]["messages"][1]["blocks"][0]["text"];
    assert_eq!(saved.as_str().unwrap(), HOSTILE.concat(), "{saved}");
    let id = conversations[0]["conversation"]["id"].as_str().unwrap();
    let shown = conduit(home.path(), &["sessions", "show", id], None);
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(shown.contains(HOSTILE_SHOWN), "{shown:?}");
    assert_eq!(obeyed(&shown), Vec::<&str>::new(), "{shown:?}");
    let json = conduit(home.path(), &["sessions", "show", id, "--json"], None);
    let json = String::from_utf8(json.stdout).unwrap();
    assert_eq!(obeyed(&json), Vec::<&str>::new(), "{json:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conduit_chat_shows_a_hostile_answer_inert_as_text_and_as_json() {
    let dialect = Dialect::OpenAiChat;
    for json_lines in [false, true] {
        let server = ScriptedLlm::start(echo_then(
            dialect,
            &HOSTILE,
            "\x1b]52;c;eA==\x07",
            &["\x1b[8mDone."],
        ))
        .await
        .unwrap();
        let home = tempfile::tempdir().unwrap();
        let mut args = vec![
            "chat".to_owned(),
            "--kind".to_owned(),
            dialect.kind().to_owned(),
            "--base-url".to_owned(),
            dialect.base_url(&server.url()),
            "--model".to_owned(),
            "gpt-test".to_owned(),
            "--approve".to_owned(),
            "auto".to_owned(),
        ];
        if json_lines {
            args.push("--json".to_owned());
        }
        args.push("echo".to_owned());
        let output = tokio::process::Command::new(binary("conduit").unwrap())
            .args(&args)
            .env("CONDUIT_HOME", home.path())
            .env("CONDUIT_TEST_TOOLS", "1")
            .env("CONDUIT_SECRET_STORE", "file")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(Duration::from_secs(60), output)
            .await
            .unwrap()
            .unwrap();
        let stdout = String::from_utf8(output.stdout).unwrap();
        assert_eq!(output.status.code(), Some(0), "{stdout:?}");
        assert_eq!(obeyed(&stdout), Vec::<&str>::new(), "{stdout:?}");
        if json_lines {
            // The JSON still carries the answer exactly; only its form is inert.
            let text: String = stdout
                .lines()
                .map(|line| serde_json::from_str::<Value>(line).unwrap())
                .filter(|event| event["type"] == "text_delta")
                .map(|event| event["text"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(text, format!("{}\x1b[8mDone.", HOSTILE.concat()));
        } else {
            assert!(stdout.contains(HOSTILE_SHOWN), "{stdout:?}");
            assert!(
                stdout.contains("← test__echo done in ") && stdout.contains(" ms: ␛]52;c;eA==␇"),
                "{stdout:?}"
            );
            assert!(stdout.contains("␛[8mDone."), "{stdout:?}");
        }
    }
}

/// Lines piped into `conduit repl` are messages, never an approval: a call the model makes
/// is denied without reading a line for it, and no "always" is saved for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_lines_never_answer_an_approval() {
    let dialect = Dialect::OpenAiChat;
    let server = ScriptedLlm::start(
        [
            echo_then(dialect, &[], "piped", &["It was denied."]),
            vec![dialect.text(&["Second answer."])],
        ]
        .concat(),
    )
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let url = dialect.base_url(&server.url());
    let output = tokio::task::spawn_blocking({
        let home = home.path().to_owned();
        move || {
            let mut child = std::process::Command::new(binary("conduit").unwrap())
                .args([
                    "repl",
                    "--kind",
                    dialect.kind(),
                    "--base-url",
                    &url,
                    "--api-key-env",
                    "CONDUIT_TEST_LLM_KEY",
                    "--model",
                    "gpt-test",
                ])
                .env("CONDUIT_HOME", &home)
                .env("CONDUIT_TEST_LLM_KEY", KEY)
                .env("CONDUIT_TEST_TOOLS", "1")
                .env("CONDUIT_SECRET_STORE", "file")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"please echo\nalways\n")
                .unwrap();
            child.wait_with_output().unwrap()
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("denied: a tool call is allowed only by an answer typed at a terminal"),
        "{stdout}"
    );
    assert!(stdout.contains("It was denied."), "{stdout}");
    // The line after the question was the next message, not its answer.
    assert!(stdout.contains("Second answer."), "{stdout}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "{stdout}");
    assert!(
        requests[2].body.to_string().contains("always"),
        "the piped line went to the model as a message"
    );
    let settings = std::fs::read_to_string(home.path().join("settings.json")).unwrap_or_default();
    assert!(
        !settings.contains("test__echo") && !settings.contains("echo\""),
        "{settings}"
    );
}

/// The REPL's output goes to a pipe whose reader leaves in the middle of an answer
/// (`conduit repl | less`, and `less` quit): the REPL ends quietly, as a command whose
/// reader left does, with the answer so far saved. It used to panic at its next line
/// (`println!` on a closed pipe).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repl_ends_quietly_when_its_output_is_closed_mid_answer() {
    let dialect = Dialect::OpenAiChat;
    let server = ScriptedLlm::start(vec![dialect.stall_after(&["Partial ", "answer"])])
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    // The reader takes the output until the answer so far has come (the model then
    // stalls: the Ctrl-C below must not come before its second piece is in, which on a
    // loaded machine it did), then closes it; it says
    // on the terminal when the prompt came and when it left; it ignores Ctrl-C, which the terminal sends to the whole group.
    let reader = r#"
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
seen = b""
def read_until(text):
    global seen
    while text not in seen:
        chunk = os.read(0, 4096)
        if not chunk:
            sys.exit("the output ended before " + repr(text))
        seen += chunk
read_until(b"> ")
sys.stderr.write("PROMPT-SHOWN\n")
sys.stderr.flush()
read_until(b"Partial answer")
os.close(0)
sys.stderr.write("READER-GONE\n")
sys.stderr.flush()
time.sleep(2)
"#;
    let mut argv: Vec<String> = vec![
        "bash".into(),
        "-c".into(),
        r#"set -o pipefail; "$@" | python3 -c "$READER""#.into(),
        "bash".into(),
    ];
    argv.extend(repl_argv(&server));
    let mut env = repl_env(home.path());
    env["READER"] = json!(reader);
    let steps = vec![
        // The prompt is drawn on the pipe, so the reader says when it came.
        expect("PROMPT-SHOWN"),
        send("say something long"),
        expect("READER-GONE"),
        key("ctrl-c"),
    ];
    let run = on_terminal(home.path(), &argv, env, steps, 30).await;
    assert_eq!(run.failure, None, "{}", run.transcript);
    assert_eq!(run.code, Some(0), "{}", run.transcript);
    assert!(!run.transcript.contains("panicked"), "{}", run.transcript);
    assert!(run.echo, "{}", run.transcript);
    let saved = saved_conversations(home.path());
    assert_eq!(saved.len(), 1, "{}", run.transcript);
    let text = saved[0].to_string();
    assert!(text.contains("Partial answer"), "{text}");
}

/// The REPL's stderr goes to a pipe nobody reads any more (`conduit repl 2>&1 | head`,
/// `head` done): its notices cannot be written, and it goes on with the conversation and
/// ends as usual. It used to end with a Rust panic's exit code (101) at its first notice
/// (`eprintln!` on a closed pipe).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repl_goes_on_when_its_stderr_is_closed() {
    let dialect = Dialect::OpenAiChat;
    let server = ScriptedLlm::start(vec![dialect.text(&["Still ", "here."])])
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let argv = repl_argv(&server);
    let output = tokio::task::spawn_blocking({
        let home = home.path().to_owned();
        move || {
            let mut child = piped_repl(&argv, &home).spawn().unwrap();
            // The reader of its stderr leaves before anything is written there.
            drop(child.stderr.take());
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"/attach /no/such/file.png\nare you there?\n")
                .unwrap();
            child.wait_with_output().unwrap()
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("Still here."), "{stdout}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{stdout}");
    assert!(
        requests[0].body.to_string().contains("are you there?"),
        "{stdout}"
    );
}

/// `--approve auto` runs a call Settings allow without asking; `--approve deny` refuses
/// every call, and the model is told so; neither asks at the terminal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_auto_runs_calls_unasked_and_deny_refuses_them() {
    let dialect = Dialect::OpenAiChat;
    for (approve, shown) in [("auto", "← test__echo done"), ("deny", "✗ denied")] {
        let server =
            ScriptedLlm::start(echo_then(dialect, &["Let me echo."], "unasked", &["Over."]))
                .await
                .unwrap();
        let home = tempfile::tempdir().unwrap();
        let mut argv = repl_argv(&server);
        argv.extend(["--approve".to_owned(), approve.to_owned()]);
        let steps = vec![
            expect("Conduit REPL"),
            expect("> "),
            send("please echo"),
            expect(shown),
            expect("Over."),
            expect("> "),
            key("ctrl-d"),
        ];
        let run = on_terminal(home.path(), &argv, repl_env(home.path()), steps, 30).await;
        assert_eq!(run.failure, None, "{approve}: {}", run.transcript);
        assert_eq!(run.code, Some(0), "{approve}: {}", run.transcript);
        assert!(
            !run.transcript.contains("allow [o]nce"),
            "{approve}: {}",
            run.transcript
        );
        // What the model was told of the call.
        let second = server.requests()[1].body.clone();
        let told = second["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool")
            .map(|m| m["content"].to_string())
            .unwrap();
        match approve {
            "auto" => assert_eq!(told, "\"unasked\"", "{second}"),
            _ => assert!(
                told.contains("denied") && !told.contains("unasked"),
                "{told}"
            ),
        }
    }
}

/// A server slow to start (here one that never answers): Ctrl-C while the servers start
/// ends `conduit repl` and `conduit chat` there (130), and the chat sends and saves
/// nothing. The REPL dropped the Ctrl-C and opened after the start timeout; the chat made
/// its conversation anyway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_the_servers_start_ends_the_command() {
    let server = ScriptedLlm::start(vec![Dialect::OpenAiChat.text(&["never asked"])])
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    // The server says it started on the terminal itself (it shares it), then never
    // answers: the sign that the command waits for it, its Ctrl-C handler in place. Its
    // own child (as `npx` starts `node`) is not killed with the shell by the parent's
    // death: only with the server's process group, as the server is dropped.
    let marker = format!("600.{}", std::process::id());
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"slow": {"command": "sh",
            "args": ["-c", format!("echo slow-server-started > /dev/tty; sleep {marker} & wait")]}}})
        .to_string(),
    )
    .unwrap();
    let left_behind = || {
        let found = std::process::Command::new("pgrep")
            .args(["-f", &format!("sleep {marker}")])
            .output()
            .unwrap();
        !found.stdout.is_empty()
    };
    let gone = || async {
        for _ in 0..50 {
            if !left_behind() {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        false
    };
    let mut env = repl_env(home.path());
    env["CONDUIT_MCP_START_TIMEOUT"] = json!("60");
    let steps = vec![expect("slow-server-started"), key("ctrl-c")];
    let run = on_terminal(
        home.path(),
        &repl_argv(&server),
        env.clone(),
        steps.clone(),
        10,
    )
    .await;
    assert_eq!(run.failure, None, "{}", run.transcript);
    assert_eq!(run.code, Some(130), "{}", run.transcript);
    assert!(
        run.transcript
            .contains("stopped while the MCP servers started"),
        "{}",
        run.transcript
    );
    assert!(gone().await, "the server's child outlived conduit repl");

    let mut chat = repl_argv(&server);
    chat[1] = "chat".into();
    chat.push("hello".into());
    let run = on_terminal(home.path(), &chat, env, steps, 10).await;
    assert_eq!(run.failure, None, "{}", run.transcript);
    assert_eq!(run.code, Some(130), "{}", run.transcript);
    assert!(server.requests().is_empty(), "nothing was sent");
    assert!(gone().await, "the server's child outlived conduit chat");
    let listed = conduit(home.path(), &["sessions", "list", "--json"], None);
    assert_eq!(
        serde_json::from_slice::<Value>(&listed.stdout).unwrap(),
        json!([]),
        "nothing was saved"
    );
}

/// A history damaged deep inside opens for `conduit repl` (an open reads only its header
/// and schema); the check of the whole file, 20 s later, finds it and the REPL says so on
/// stderr, with the file and what the next start does, and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repl_says_when_the_history_is_found_damaged_while_it_runs() {
    let dialect = Dialect::OpenAiChat;
    let server = ScriptedLlm::start(vec![dialect.text(&["First answer."])])
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    conduit_e2e::history_damaged_deep_inside(home.path(), "Notes worth keeping");
    let argv = repl_argv(&server);
    let said = tokio::task::spawn_blocking({
        let home = home.path().to_owned();
        move || {
            use std::io::{BufRead, Write};
            let mut child = piped_repl(&argv, &home)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(b"hello\n").unwrap();
            // Until the line comes or the REPL ends (its stderr closes).
            let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
            let said = stderr
                .by_ref()
                .map_while(Result::ok)
                .find(|line| line.contains("is damaged"));
            drop(stdin);
            let rest: Vec<String> = stderr.map_while(Result::ok).collect();
            let status = child.wait().unwrap();
            (said, (status, rest))
        }
    })
    .await
    .unwrap();
    let (said, (status, rest)) = said;
    let said = said.expect("the REPL never said the history is damaged");
    let file = home.path().join("history.db");
    assert!(said.contains(&file.display().to_string()), "{said}");
    assert!(said.contains("the next start moves it aside"), "{said}");
    assert!(status.success(), "{status:?}: {rest:?}");
    assert_eq!(server.requests().len(), 1, "the message went on meanwhile");
}

/// A tool the server's views (MCP App pages) may call too: the question says so before
/// an "always" is given, as that allow covers their calls in the window as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_for_a_tool_views_may_call_says_so_first() {
    let dialect = Dialect::OpenAiChat;
    let server = ScriptedLlm::start(vec![
        dialect.turn(
            &[],
            &[ScriptedCall::new(
                "call_view",
                "probe__show_probe",
                json!({"gate": "open"}),
            )],
        ),
        dialect.text(&["Denied, fine."]),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let (python, script) = conduit_e2e::python_fixture("app_probe.py").unwrap();
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"probe": {"command": python,
            "args": [script, home.path().join("reports.jsonl")]}}})
        .to_string(),
    )
    .unwrap();
    let session = repl(
        &server,
        home.path(),
        vec![
            expect("> "),
            send("show the probe"),
            expect("? show_probe of server probe wants to run"),
            expect("its server's views (MCP App pages in the window) may call it too"),
            expect("allow [o]nce, in this [c]onversation, [a]lways, or [d]eny?"),
            send("d"),
            expect("Denied, fine."),
            expect("> "),
            key("ctrl-d"),
        ],
    )
    .await;
    assert_eq!(session.failure, None, "{}", session.transcript);
}

/// A tool whose server needs a step in the browser first (-32042) from the REPL: the page
/// is asked about on the terminal, opens in the browser on a yes, the REPL says the call
/// waits for the user there, and the call runs once the step is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_in_the_browser_is_asked_on_the_terminal_and_the_wait_is_said() {
    let dialect = Dialect::OpenAiChat;
    let server = ScriptedLlm::start(vec![
        dialect.turn(
            &[],
            &[ScriptedCall::new(
                "call_1",
                "steps__read_calendar",
                json!({}),
            )],
        ),
        dialect.text(&["You have three meetings."]),
    ])
    .await
    .unwrap();
    let (_steps, port) = conduit_e2e::python_server_on_a_free_port("url_steps.py", &[])
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"steps": {"url": format!("http://127.0.0.1:{port}/mcp"),
                                         "protocolVersion": "2025-11-25"}}})
        .to_string(),
    )
    .unwrap();
    // The browser goes to each page it is given at once (the user finishing the step).
    let browser = conduit_e2e::oauth_server::browser_dir(home.path(), true).unwrap();
    let mut env = repl_env(home.path());
    env["PATH"] = json!(
        conduit_e2e::oauth_server::path_with(&browser)
            .to_string_lossy()
            .into_owned()
    );
    let page = format!("http://127.0.0.1:{port}/consent?id=calendar-1");
    let steps = vec![
        expect("> "),
        send("what is on my calendar?"),
        expect("? read_calendar of server steps wants to run"),
        expect("allow [o]nce, in this [c]onversation, [a]lways, or [d]eny?"),
        send("o"),
        expect("Connect your calendar to Conduit"),
        expect(&page),
        expect("[y/N/c to cancel] "),
        send("y"),
        expect("  … Waiting for you to finish in your browser"),
        expect("← steps__read_calendar done"),
        expect(": 3 meetings today (run 1)"),
        expect("You have three meetings."),
        expect("> "),
        key("ctrl-d"),
    ];
    let run = on_terminal(home.path(), &repl_argv(&server), env, steps, 60).await;
    assert_eq!(run.failure, None, "{}", run.transcript);
    assert_eq!(run.code, Some(0), "{}", run.transcript);
    let opened = std::fs::read_to_string(browser.join("opened.txt")).unwrap();
    assert_eq!(opened.trim(), page);
    // Said once, though the server was asked again.
    assert_eq!(
        run.transcript
            .matches("Waiting for you to finish in your browser")
            .count(),
        1,
        "{}",
        run.transcript
    );
}

/// A conversation grown past the model's context (a 300 KB log attached earlier): the
/// REPL says the model read a shorter one, and the answer comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_past_the_models_context_is_answered_shorter_and_said_so() {
    let dialect = Dialect::OpenAiChat;
    let server = ScriptedLlm::start(vec![
        dialect.text(&["The disk is full."]),
        dialect.http_error(
            400,
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.",
            None,
        ),
        dialect.text(&["Still full."]),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let log = home.path().join("build.log");
    std::fs::write(
        &log,
        "2026-12-01T03:00:00Z ERROR no space left on device\n".repeat(6_000),
    )
    .unwrap();
    let session = repl(
        &server,
        home.path(),
        vec![
            expect("> "),
            send(&format!("/attach {}", log.display())),
            expect("(sent with your next message)"),
            expect("> "),
            send("Why did the build fail?"),
            expect("The disk is full."),
            expect("> "),
            send("And now?"),
            expect("conduit: the conversation is longer than the model's context: earlier tool outputs and files were cut to their start for the model (they are kept whole here)"),
            expect("Still full."),
            expect("> "),
            key("ctrl-d"),
        ],
    )
    .await;
    assert_eq!(session.failure, None, "{}", session.transcript);
    assert_eq!(session.code, Some(0), "{}", session.transcript);
}
