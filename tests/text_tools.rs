//! Text tool-calling through the real `conduit chat --json` against the scripted LLM
//! server: a model whose service refuses tools (HTTP 400 "does not support tools") gets
//! them in the system prompt over each protocol (Chat Completions and Anthropic's as
//! the issue asks, Responses and Gemini too, since it sits above them), calls one
//! with XML and one with JSON (split across many stream chunks), a malformed call is
//! answered with an error, and no call text is shown or saved as answer text.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Stdio;
use std::time::Duration;

use conduit_e2e::binary;
use conduit_e2e::cli::{ChatRun, conduit};
use conduit_e2e::llm_server::{Dialect, Recorded, Reply, ScriptedLlm};
use serde_json::Value;

const KEY: &str = "sk-test-key-1234";

const XML_CALL: &str =
    "<tool_call><name>test__echo</name><arguments>{\"text\": \"from xml\"}</arguments></tool_call>";
const JSON_CALL: &str = "{\"name\": \"test__echo\", \"arguments\": {\"text\": \"from json\"}}";
const BAD_CALL: &str =
    "<tool_call><name>test__echo</name><arguments>{\"text\": }</arguments></tool_call>";

/// `text` cut into pieces of `size` characters, each its own stream chunk.
fn chunks(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn model(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Anthropic => "claude-small",
        _ => "gemma:2b",
    }
}

async fn chat(
    dialect: Dialect,
    replies: Vec<Reply>,
) -> (ChatRun, Vec<Recorded>, tempfile::TempDir) {
    let server = ScriptedLlm::start(replies).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(binary("conduit").unwrap())
            .args([
                "chat",
                "--kind",
                dialect.kind(),
                "--base-url",
                &dialect.base_url(&server.url()),
                "--api-key-env",
                "CONDUIT_TEST_LLM_KEY",
                "--model",
                model(dialect),
                "--approve",
                "auto",
                "--json",
                "Echo twice",
            ])
            .env("CONDUIT_HOME", home.path())
            .env("CONDUIT_TEST_LLM_KEY", KEY)
            .env("CONDUIT_TEST_TOOLS", "1")
            .env("CONDUIT_SECRET_STORE", "file")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("conduit chat finished")
    .unwrap();
    (ChatRun::of(&output), server.requests(), home)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_refuses_tools_gets_them_as_text_over_every_protocol() {
    for dialect in Dialect::ALL {
        let first = format!("I will echo. {XML_CALL}\n{JSON_CALL}\n");
        let mut pieces = chunks(&first, 3);
        pieces.push("Then I stop.".into());
        let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let replies = vec![
            dialect.http_error(
                400,
                &format!(
                    "registry.ollama.ai/library/{} does not support tools",
                    model(dialect)
                ),
                None,
            ),
            dialect.text(&pieces),
            dialect.text(&["Oops: ", BAD_CALL]),
            dialect.text(&["Both ", "echoed."]),
        ];
        let (run, requests, home) = chat(dialect, replies).await;
        assert_eq!(run.code, Some(0), "{dialect:?}: {}", run.stderr);

        // Nothing of a call is shown as answer text.
        let shown = run.text();
        assert_eq!(
            shown, "I will echo. \n\nThen I stop.Oops: Both echoed.",
            "{dialect:?}"
        );

        // Three calls: two ran, the malformed one was answered with an error.
        let results = run.of_type("tool_result");
        assert_eq!(results.len(), 3, "{dialect:?}");
        let text_of = |r: &Value| r["result"]["parts"][0]["text"].as_str().unwrap().to_owned();
        assert_eq!(text_of(results[0]), "from xml");
        assert_eq!(text_of(results[1]), "from json");
        assert_eq!(results[2]["result"]["is_error"], true);
        assert!(
            text_of(results[2]).contains("not valid JSON"),
            "{}",
            text_of(results[2])
        );
        // Each call has Conduit's own id, whatever the text said.
        let ids: Vec<&str> = run
            .of_type("tool_call_ready")
            .iter()
            .map(|e| e["call"]["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), 3);
        assert!(ids.iter().all(|id| id.starts_with("call_")), "{ids:?}");
        assert!(ids[0] != ids[2], "a call in each of two answers: two calls");

        // One refused native request, then text mode for the rest of the run.
        assert_eq!(requests.len(), 4, "{dialect:?}");
        assert!(
            requests[0].body["tools"].is_array(),
            "{dialect:?}: native first"
        );
        for request in &requests[1..] {
            assert!(
                request.body.get("tools").is_none(),
                "{dialect:?}: {}",
                request.body
            );
            // The tools and the call format are in the system prompt.
            let body = request.body.to_string();
            assert!(body.contains("<name>test__echo</name>"), "{body}");
            assert!(body.contains("<tool_call><name>TOOL_NAME</name>"), "{body}");
        }
        // The results went back as text in a user message, and the calls as text.
        let second = requests[2].body.to_string();
        assert!(
            second.contains("<tool_result name=\\\"test__echo\\\">\\nfrom xml"),
            "{second}"
        );
        assert!(second.contains("from json"), "{second}");
        let third = requests[3].body.to_string();
        assert!(third.contains("error=\\\"true\\\""), "{third}");

        // The saved answer holds no call text either: calls are tool-call blocks.
        let conversation = run.last()["conversation"].as_str().unwrap().to_owned();
        let shown = conduit(
            home.path(),
            &["sessions", "show", &conversation, "--json"],
            None,
        );
        let saved: Value = serde_json::from_slice(&shown.stdout).unwrap();
        let mut saved_text = String::new();
        let mut saved_calls = 0;
        for message in saved["messages"].as_array().unwrap() {
            let message = message.get("message").unwrap_or(message);
            if message["role"] != "assistant" {
                continue;
            }
            for block in message["blocks"].as_array().unwrap() {
                match block["type"].as_str() {
                    Some("text") => saved_text.push_str(block["text"].as_str().unwrap()),
                    Some("tool_call") => saved_calls += 1,
                    _ => {}
                }
            }
        }
        assert_eq!(saved_calls, 3, "{dialect:?}: {saved}");
        assert!(!saved_text.contains("tool_call"), "{saved_text}");
        assert!(!saved_text.contains("\"name\""), "{saved_text}");
        assert!(saved_text.contains("Both echoed."), "{saved_text}");
    }
}

/// A 1×1 PNG.
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_mode_calls_image_goes_back_attached_to_the_results_user_message() {
    use base64::Engine;
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG_BASE64)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tiny.png");
    std::fs::write(&file, &png).unwrap();
    for dialect in [Dialect::OpenAiChat, Dialect::Anthropic] {
        let call = format!(
            "<tool_call><name>test__image</name><arguments>{}</arguments></tool_call>",
            serde_json::json!({"path": file})
        );
        let replies = vec![
            dialect.http_error(400, "this model does not support tools", None),
            dialect.text(&[&call]),
            dialect.text(&["A tiny image."]),
        ];
        let (run, requests, _home) = chat(dialect, replies).await;
        assert_eq!(run.code, Some(0), "{dialect:?}: {}", run.stderr);
        assert_eq!(run.text(), "A tiny image.", "{dialect:?}");
        assert_eq!(run.of_type("tool_result").len(), 1);

        // The result is text in a user message, and the image rides along with it.
        let third = &requests[2].body;
        let messages = third["messages"].as_array().unwrap();
        let last = messages.last().unwrap();
        assert_eq!(last["role"], "user", "{third}");
        let content = last["content"].to_string();
        assert!(
            content.contains("<tool_result name=\\\"test__image\\\">"),
            "{content}"
        );
        assert!(content.contains("attached after this result"), "{content}");
        assert!(
            content.contains(PNG_BASE64),
            "{dialect:?}: the image is sent: {content}"
        );
        assert!(third.get("tools").is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_mode_text_in_settings_sends_no_tools_from_the_first_request_and_a_model_can_override_it()
 {
    let dialect = Dialect::OpenAiChat;
    let server = ScriptedLlm::start(vec![
        dialect.text(&["Text mode answer."]),
        dialect.text(&["Native answer."]),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut settings = server.provider_settings();
    settings["providers"][0]["toolMode"] = "text".into();
    settings["providers"][0]["modelToolModes"] = serde_json::json!({"big": "native"});
    std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
    for model in ["m", "big"] {
        let output = tokio::process::Command::new(binary("conduit").unwrap())
            .args([
                "chat",
                "--provider",
                "scripted",
                "--model",
                model,
                "--json",
                "Hi",
            ])
            .env("CONDUIT_HOME", home.path())
            .env("CONDUIT_TEST_TOOLS", "1")
            .env("CONDUIT_SECRET_STORE", "file")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .unwrap();
        let run = ChatRun::of(&output);
        assert_eq!(run.code, Some(0), "{model}: {}", run.stderr);
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[0].body.get("tools").is_none(),
        "{}",
        requests[0].body
    );
    assert!(
        requests[0]
            .body
            .to_string()
            .contains("<name>test__echo</name>"),
        "{}",
        requests[0].body
    );
    assert!(requests[1].body["tools"].is_array(), "{}", requests[1].body);
}

#[test]
fn providers_add_writes_the_tool_mode() {
    let home = tempfile::tempdir().unwrap();
    let added = conduit(
        home.path(),
        &[
            "providers",
            "add",
            "gemma",
            "--kind",
            "openai-chat",
            "--base-url",
            "http://127.0.0.1:11434/v1",
            "--model",
            "gemma3:4b",
            "--tool-mode",
            "text",
        ],
        None,
    );
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join("settings.json")).unwrap())
            .unwrap();
    assert_eq!(settings["providers"][0]["toolMode"], "text", "{settings}");
    let refused = conduit(
        home.path(),
        &[
            "providers",
            "add",
            "x",
            "--kind",
            "openai-chat",
            "--base-url",
            "http://127.0.0.1:1/v1",
            "--tool-mode",
            "xml",
        ],
        None,
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("possible values: auto, native, text")
    );
}
