//! `conduit chat --json` against the scripted LLM server, for each of the four protocols:
//! streaming, parallel tool calls, images in tool results, retries, errors, stalls, the
//! turn limit and cancellation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use conduit_e2e::binary;
use conduit_e2e::cli::{ChatRun, conduit};
use conduit_e2e::llm_server::{Dialect, Recorded, Reply, ScriptedCall, ScriptedLlm};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const KEY: &str = "sk-test-key-1234";

/// A 1×1 PNG.
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn model(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Anthropic => "claude-test",
        Dialect::OpenAiResponses | Dialect::OpenAiChat => "gpt-test",
        // A Gemini 3 model takes images inside function responses.
        Dialect::Gemini => "gemini-3-pro-test",
    }
}

fn command(
    dialect: Dialect,
    server: &ScriptedLlm,
    home: &Path,
    extra: &[&str],
    prompt: &str,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(binary("conduit").unwrap());
    cmd.args([
        "chat",
        "--kind",
        dialect.kind(),
        "--base-url",
        &dialect.base_url(&server.url()),
        "--api-key-env",
        "CONDUIT_TEST_LLM_KEY",
        "--model",
        model(dialect),
        "--json",
    ])
    .args(extra)
    .arg(prompt)
    .env("CONDUIT_HOME", home)
    .env("CONDUIT_TEST_LLM_KEY", KEY)
    .env("CONDUIT_TEST_TOOLS", "1")
    .env("CONDUIT_SECRET_STORE", "file")
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    cmd
}

async fn chat(
    dialect: Dialect,
    replies: Vec<Reply>,
    extra: &[&str],
) -> (ChatRun, Vec<Recorded>, tempfile::TempDir) {
    let server = ScriptedLlm::start(replies).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        command(dialect, &server, home.path(), extra, "Hello there").output(),
    )
    .await
    .expect("conduit chat finished")
    .unwrap();
    let run = ChatRun::of(&output);
    (run, server.requests(), home)
}

/// The last event says how the run ended and names the saved conversation.
fn assert_done(event: &Value, outcome: &str) {
    assert_eq!(event["type"], "done", "{event}");
    assert_eq!(event["outcome"], outcome, "{event}");
    assert!(
        event["conversation"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "{event}"
    );
}

fn calls_of(dialect: Dialect) -> Vec<ScriptedCall> {
    let id = |n: u32| match dialect {
        Dialect::Anthropic => format!("toolu_0{n}"),
        Dialect::Gemini => format!("gem{n}"),
        _ => format!("call_{n}"),
    };
    vec![
        ScriptedCall::new(&id(1), "test__echo", json!({"text": "one"})),
        ScriptedCall::new(&id(2), "test__echo", json!({"text": "two"})),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_answer_streams() {
    for dialect in Dialect::ALL {
        let (run, requests, _home) =
            chat(dialect, vec![dialect.text(&["Hel", "lo ", "world"])], &[]).await;
        assert_eq!(run.code, Some(0), "{dialect:?}: {}", run.stderr);
        assert_eq!(run.text(), "Hello world", "{dialect:?}");
        assert_eq!(
            run.of_type("text_delta").len(),
            3,
            "{dialect:?}: every piece streams"
        );
        assert_done(run.last(), "finished");
        assert!(
            !run.of_type("usage").is_empty(),
            "{dialect:?}: usage reported"
        );

        assert_eq!(requests.len(), 1);
        let request = &requests[0];
        assert_eq!(request.method, "POST");
        assert_eq!(
            request.path_and_query,
            dialect.stream_path(model(dialect)),
            "{dialect:?}"
        );
        let (header, value) = dialect.auth_header(KEY);
        assert_eq!(request.header(header), Some(value.as_str()), "{dialect:?}");
        if dialect == Dialect::Anthropic {
            assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
        }
        assert!(
            request.body.to_string().contains("Hello there"),
            "{dialect:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_then_two_parallel_tool_calls_then_the_answer() {
    for dialect in Dialect::ALL {
        let calls = calls_of(dialect);
        let replies = vec![
            dialect.turn(&["Let me echo."], &calls),
            dialect.text(&["Both echoed."]),
        ];
        let (run, requests, _home) = chat(dialect, replies, &["--approve", "auto"]).await;
        assert_eq!(run.code, Some(0), "{dialect:?}: {}", run.stderr);
        assert_eq!(run.text(), "Let me echo.Both echoed.", "{dialect:?}");
        let results = run.of_type("tool_result");
        assert_eq!(results.len(), 2, "{dialect:?}");
        let mut texts: Vec<_> = results
            .iter()
            .map(|r| r["result"]["parts"][0]["text"].as_str().unwrap().to_owned())
            .collect();
        texts.sort();
        assert_eq!(texts, ["one", "two"], "{dialect:?}");
        assert_eq!(run.of_type("turn_started").len(), 2);
        // Each call says which allow let it run unasked.
        let allowed = run.of_type("tool_call_allowed");
        assert_eq!(allowed.len(), 2, "{dialect:?}");
        assert!(
            allowed.iter().all(|event| event["by"] == "auto"),
            "{dialect:?}: {allowed:?}"
        );

        // The second request carries both calls and both results, in the protocol's form.
        assert_eq!(requests.len(), 2, "{dialect:?}");
        let second = &requests[1].body;
        let results_in_request = tool_results_in(dialect, second);
        assert_eq!(
            results_in_request,
            [
                (calls[0].id.clone(), "one".into()),
                (calls[1].id.clone(), "two".into())
            ],
            "{dialect:?}: {second}"
        );
        assert!(
            requests[0].body.to_string().contains("test__echo"),
            "{dialect:?}: tools offered"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_calls_under_one_provider_id_go_back_under_two() {
    for dialect in Dialect::ALL {
        let id = calls_of(dialect)[0].id.clone();
        let calls = vec![
            ScriptedCall::new(&id, "test__echo", json!({"text": "one"})),
            ScriptedCall::new(&id, "test__echo", json!({"text": "two"})),
        ];
        let replies = vec![dialect.turn(&[], &calls), dialect.text(&["Both echoed."])];
        let (run, requests, _home) = chat(dialect, replies, &["--approve", "auto"]).await;
        assert_eq!(run.code, Some(0), "{dialect:?}: {}", run.stderr);
        assert_eq!(requests.len(), 2, "{dialect:?}");
        // A strict API refuses two calls under one id: the second goes back under its own,
        // its result with it.
        let results = tool_results_in(dialect, &requests[1].body);
        let second_id = format!("{id}_2");
        assert_eq!(
            results,
            [(id.clone(), "one".into()), (second_id, "two".into())],
            "{dialect:?}: {}",
            requests[1].body
        );
    }
}

/// (call id, result text) of each tool result in a recorded request, in order.
fn tool_results_in(dialect: Dialect, body: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    match dialect {
        Dialect::Anthropic => {
            for message in body["messages"].as_array().unwrap() {
                for block in message["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_result" {
                        out.push((
                            block["tool_use_id"].as_str().unwrap().into(),
                            block["content"][0]["text"].as_str().unwrap().into(),
                        ));
                    }
                }
            }
        }
        Dialect::OpenAiResponses => {
            for item in body["input"].as_array().unwrap() {
                if item["type"] == "function_call_output" {
                    out.push((
                        item["call_id"].as_str().unwrap().into(),
                        item["output"][0]["text"].as_str().unwrap().into(),
                    ));
                }
            }
        }
        Dialect::OpenAiChat => {
            for message in body["messages"].as_array().unwrap() {
                if message["role"] == "tool" {
                    out.push((
                        message["tool_call_id"].as_str().unwrap().into(),
                        message["content"]
                            .as_str()
                            .unwrap()
                            .lines()
                            .next()
                            .unwrap()
                            .into(),
                    ));
                }
            }
        }
        Dialect::Gemini => {
            for content in body["contents"].as_array().unwrap() {
                for part in content["parts"].as_array().unwrap() {
                    if let Some(response) = part.get("functionResponse") {
                        out.push((
                            response["id"].as_str().unwrap().into(),
                            response["response"]["result"]
                                .as_str()
                                .unwrap()
                                .lines()
                                .next()
                                .unwrap()
                                .into(),
                        ));
                    }
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_image_reaches_the_next_request_in_the_protocols_form() {
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG_BASE64)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tiny.png");
    std::fs::write(&file, &png).unwrap();
    for dialect in Dialect::ALL {
        let call = ScriptedCall::new("img_call_1", "test__image", json!({"path": file}));
        let replies = vec![dialect.turn(&[], &[call]), dialect.text(&["A tiny image."])];
        let (run, requests, home) = chat(dialect, replies, &["--approve", "auto"]).await;
        assert_eq!(run.code, Some(0), "{dialect:?}: {}", run.stderr);

        // The event lists the image as a stored file with its type and size.
        let result = run.of_type("tool_result")[0].clone();
        let image = &result["images"][0];
        assert_eq!(image["mime"], "image/png");
        assert_eq!(image["bytes"], png.len());
        let stored = Path::new(image["path"].as_str().unwrap());
        assert!(stored.starts_with(home.path()), "{stored:?}");
        assert_eq!(std::fs::read(stored).unwrap(), png);

        let second = &requests[1].body;
        let data_url = format!("data:image/png;base64,{PNG_BASE64}");
        match dialect {
            Dialect::Anthropic => {
                let result = second["messages"][2]["content"][0].clone();
                assert_eq!(result["type"], "tool_result", "{second}");
                assert_eq!(
                    result["content"][1],
                    json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_BASE64}})
                );
            }
            Dialect::OpenAiResponses => {
                let output = second["input"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|i| i["type"] == "function_call_output")
                    .unwrap()["output"]
                    .clone();
                assert_eq!(
                    output[1],
                    json!({"type": "input_image", "image_url": data_url})
                );
            }
            Dialect::OpenAiChat => {
                let messages = second["messages"].as_array().unwrap();
                let tool_at = messages.iter().position(|m| m["role"] == "tool").unwrap();
                let follow = &messages[tool_at + 1];
                assert_eq!(follow["role"], "user", "{second}");
                assert_eq!(
                    follow["content"][1],
                    json!({"type": "image_url", "image_url": {"url": data_url}})
                );
            }
            Dialect::Gemini => {
                let response = &second["contents"][2]["parts"][0]["functionResponse"];
                assert_eq!(
                    response["parts"][0],
                    json!({"inlineData": {"mimeType": "image/png", "data": PNG_BASE64}}),
                    "{second}"
                );
                // The call went back with the thought signature the model gave.
                assert_eq!(
                    second["contents"][1]["parts"][0]["thoughtSignature"],
                    "sig-img_call_1"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_and_server_errors_are_retried() {
    for dialect in Dialect::ALL {
        let replies = vec![
            dialect.http_error(429, "Slow down, please.", Some("1")),
            dialect.http_error(500, "Internal trouble.", None),
            dialect.text(&["Made it."]),
        ];
        let (run, requests, _home) = chat(dialect, replies, &[]).await;
        assert_eq!(run.code, Some(0), "{dialect:?}: {}", run.stderr);
        assert_eq!(run.text(), "Made it.");
        let retries = run.of_type("retrying");
        assert_eq!(retries.len(), 2, "{dialect:?}");
        assert_eq!(
            retries[0]["delay_ms"], 1000,
            "{dialect:?}: retry-after honoured"
        );
        assert_eq!(retries[0]["error"]["kind"], "rate_limited");
        assert_eq!(retries[0]["error"]["message"], "Slow down, please.");
        assert_eq!(retries[1]["error"]["kind"], "server");
        assert_eq!(requests.len(), 3);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_key_fails_with_the_providers_message() {
    for dialect in Dialect::ALL {
        let replies = vec![dialect.http_error(401, "invalid x-api-key", None)];
        let (run, requests, _home) = chat(dialect, replies, &[]).await;
        assert_eq!(run.code, Some(1), "{dialect:?}");
        assert_eq!(requests.len(), 1, "{dialect:?}: a 401 is not retried");
        let error = run.of_type("error")[0].clone();
        assert_eq!(error["error"]["kind"], "authentication");
        assert_eq!(error["error"]["status"], 401);
        assert!(run.stderr.contains("invalid x-api-key"), "{}", run.stderr);
        assert!(run.stderr.contains("API key"), "{}", run.stderr);
        assert!(!run.stderr.contains(KEY), "the key never shows");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_event_mid_stream_fails_and_keeps_the_partial_answer() {
    for dialect in Dialect::ALL {
        let replies = vec![dialect.error_mid_stream(&["Partial "], "Overloaded")];
        let (run, requests, _home) = chat(dialect, replies, &[]).await;
        assert_eq!(run.code, Some(1), "{dialect:?}: {}", run.stderr);
        assert_eq!(run.text(), "Partial ");
        // Once some of the answer went out nothing is retried, whatever the error's kind
        // (the one its code names: an overload, a server error).
        assert_eq!(requests.len(), 1, "{dialect:?}");
        let error = run.of_type("error")[0].clone();
        assert!(
            error["message"].as_str().unwrap().contains("Overloaded"),
            "{error}"
        );
        // The partial answer is part of the history the run produced.
        let done = run.of_type("message_done");
        assert_eq!(done[0]["message"]["blocks"][0]["text"], "Partial ");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_stream_fails_after_the_read_timeout() {
    for dialect in Dialect::ALL {
        let replies = vec![dialect.stall_after(&["Thinking"])];
        let (run, _requests, _home) = chat(dialect, replies, &["--read-timeout", "0.5"]).await;
        assert_eq!(run.code, Some(1), "{dialect:?}: {}", run.stderr);
        assert_eq!(run.text(), "Thinking");
        assert_eq!(
            run.of_type("error")[0]["error"]["kind"],
            "stalled",
            "{dialect:?}"
        );
        assert!(run.stderr.contains("stopped sending"), "{}", run.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_limit_ends_the_run_clearly() {
    for dialect in Dialect::ALL {
        let call = |n: u32| {
            vec![ScriptedCall::new(
                &format!("loop_{n}"),
                "test__echo",
                json!({"text": "again"}),
            )]
        };
        let replies = vec![dialect.turn(&[], &call(1)), dialect.turn(&[], &call(2))];
        let (run, requests, _home) =
            chat(dialect, replies, &["--approve", "auto", "--max-turns", "2"]).await;
        assert_eq!(run.code, Some(1), "{dialect:?}: {}", run.stderr);
        assert_eq!(requests.len(), 2);
        assert_eq!(run.of_type("turn_limit_reached")[0]["limit"], 2);
        assert_done(run.last(), "turn_limit");
        assert!(run.stderr.contains("--max-turns"), "{}", run.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_tool_calls_get_a_denied_result_and_the_model_answers() {
    let dialect = Dialect::Anthropic;
    let calls = calls_of(dialect);
    let replies = vec![
        dialect.turn(&[], &calls[..1]),
        dialect.text(&["Fine, no echo."]),
    ];
    let (run, requests, _home) = chat(dialect, replies, &[]).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.of_type("tool_call_denied").len(), 1);
    let result = &requests[1].body["messages"][2]["content"][0];
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("denied")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_mid_stream_stops_and_keeps_the_partial_answer() {
    for dialect in Dialect::ALL {
        let server = ScriptedLlm::start(vec![dialect.stall_after(&["Half an ans"])])
            .await
            .unwrap();
        let home = tempfile::tempdir().unwrap();
        let mut child = command(dialect, &server, home.path(), &[], "Hello there")
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut events: Vec<Value> = Vec::new();
        while let Some(line) = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .unwrap()
            .unwrap()
        {
            let event: Value = serde_json::from_str(&line).unwrap();
            let is_text = event["type"] == "text_delta";
            events.push(event);
            if is_text {
                let pid = child.id().unwrap().to_string();
                std::process::Command::new("kill")
                    .args(["-INT", &pid])
                    .status()
                    .unwrap();
            }
        }
        let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(status.code(), Some(130), "{dialect:?}");
        let types: Vec<_> = events
            .iter()
            .map(|e| e["type"].as_str().unwrap().to_owned())
            .collect();
        assert!(
            types.contains(&"cancelled".to_owned()),
            "{dialect:?}: {types:?}"
        );
        assert_done(events.last().unwrap(), "cancelled");
        let kept = events.iter().find(|e| e["type"] == "message_done").unwrap();
        assert_eq!(kept["message"]["blocks"][0]["text"], "Half an ans");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_usage_exits_with_2() {
    let home = tempfile::tempdir().unwrap();
    let conduit = binary("conduit").unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(&conduit)
            .args(args)
            .env("CONDUIT_HOME", home.path())
            .output()
            .unwrap()
    };
    assert_eq!(run(&["chat", "hi"]).status.code(), Some(2), "no provider");
    assert_eq!(
        run(&["chat", "--kind", "gemini", "hi"]).status.code(),
        Some(2),
        "kind without URL"
    );
    assert_eq!(
        run(&["chat", "--kind", "nope", "--base-url", "http://x", "hi"])
            .status
            .code(),
        Some(2)
    );
    let no_model = run(&[
        "chat",
        "--kind",
        "anthropic",
        "--base-url",
        "http://127.0.0.1:9",
        "hi",
    ]);
    assert_eq!(no_model.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_model.stderr).contains("--model"));
}

/// `--attach` with a text file (a realistic source file, 400 lines) sends its text headed
/// by its name in every protocol; a binary file that is no image is refused saying what
/// Conduit takes, before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_file_attached_reaches_every_protocol_and_a_binary_one_is_refused() {
    let files = tempfile::tempdir().unwrap();
    let source: String = (0..400)
        .map(|n| format!("fn step_{n}(x: u64) -> u64 {{ x.wrapping_mul({n}) + 1 }}\n"))
        .collect();
    let path = files.path().join("steps.rs");
    std::fs::write(&path, &source).unwrap();
    for dialect in Dialect::ALL {
        let (run, requests, _home) = chat(
            dialect,
            vec![dialect.text(&["Read."])],
            &["--attach", path.to_str().unwrap()],
        )
        .await;
        assert_eq!(run.code, Some(0), "{dialect:?}: {}", run.stderr);
        let body = requests[0].body.to_string();
        let headed = serde_json::to_string(&format!("File steps.rs:\n\n{source}")).unwrap();
        assert!(
            body.contains(headed.trim_matches('"')),
            "{dialect:?}: {body:.600}"
        );
        assert!(body.contains("Hello there"), "{dialect:?}");
    }
    // Text that starts as an image format does ("BM" is a BMP's signature) is text.
    let cars = files.path().join("cars.csv");
    std::fs::write(&cars, "BMW,320i,2019\nAudi,A4,2020\n").unwrap();
    let dialect = Dialect::OpenAiChat;
    let (run, requests, _home) = chat(
        dialect,
        vec![dialect.text(&["Two cars."])],
        &["--attach", cars.to_str().unwrap()],
    )
    .await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let body = requests[0].body.to_string();
    assert!(body.contains(r"File cars.csv:\n\nBMW,320i"), "{body:.600}");

    let blob = files.path().join("model.bin");
    std::fs::write(&blob, [0u8, 159, 146, 150, 255, 1, 2]).unwrap();
    let stderr = refused_attachment(Dialect::OpenAiChat, &blob).await;
    assert!(
        stderr.contains("cannot attach") && stderr.contains("model.bin is not a text file"),
        "{stderr}"
    );
}

/// `--attach` with a PDF (a 40-page paper of 1.2 MB) sends it whole in every protocol's
/// documented form, under its name; one over 32 MiB is refused before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdf_attached_reaches_every_protocol_whole_and_a_huge_one_is_refused() {
    use base64::Engine;
    let files = tempfile::tempdir().unwrap();
    let paper = conduit_core::testing::pdf(40, 1_200_000);
    let path = files.path().join("attention.pdf");
    std::fs::write(&path, &paper).unwrap();
    let data = base64::engine::general_purpose::STANDARD.encode(&paper);
    for dialect in Dialect::ALL {
        let (run, requests, _home) = chat(
            dialect,
            vec![dialect.text(&["Read."])],
            &["--attach", path.to_str().unwrap()],
        )
        .await;
        assert_eq!(run.code, Some(0), "{dialect:?}: {}", run.stderr);
        let body = requests[0].body.to_string();
        assert!(body.contains(&data), "{dialect:?}: the PDF whole");
        let named = match dialect {
            Dialect::Anthropic => {
                r#"{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0x"#
            }
            Dialect::OpenAiResponses => {
                r#"{"type":"input_file","filename":"attention.pdf","file_data":"data:application/pdf;base64,JVBERi0x"#
            }
            Dialect::OpenAiChat => {
                r#"{"type":"file","file":{"filename":"attention.pdf","file_data":"data:application/pdf;base64,JVBERi0x"#
            }
            Dialect::Gemini => {
                r#"{"text":"PDF attention.pdf:"},{"inlineData":{"mimeType":"application/pdf","data":"JVBERi0x"#
            }
        };
        assert!(
            body.contains(named),
            "{dialect:?}: {}",
            &body[..600.min(body.len())]
        );
        if dialect == Dialect::Anthropic {
            assert!(body.contains(r#""title":"attention.pdf""#));
        }
    }

    let mut huge = conduit_core::testing::pdf(1, 0);
    huge.resize(33 * 1024 * 1024, b' ');
    let scan = files.path().join("scan.pdf");
    std::fs::write(&scan, &huge).unwrap();
    let stderr = refused_attachment(Dialect::Anthropic, &scan).await;
    assert!(
        stderr.contains("cannot attach")
            && stderr.contains("scan.pdf is 33 MiB; the largest PDF Conduit attaches is 32 MiB"),
        "{stderr}"
    );
}

/// `conduit chat --attach path`, which must fail before anything is sent: its stderr.
async fn refused_attachment(dialect: Dialect, path: &Path) -> String {
    let home = tempfile::tempdir().unwrap();
    let server = ScriptedLlm::start(vec![]).await.unwrap();
    let output = command(
        dialect,
        &server,
        home.path(),
        &["--attach", path.to_str().unwrap()],
        "look",
    )
    .output()
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(server.requests().is_empty(), "nothing was sent");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_attachment_is_refused_clearly() {
    let files = tempfile::tempdir().unwrap();
    let bad = files.path().join("broken.png");
    std::fs::write(&bad, b"\x89PNG\r\n\x1a\nnot really").unwrap();
    let stderr = refused_attachment(Dialect::Anthropic, &bad).await;
    assert!(
        stderr.contains("cannot attach") && stderr.contains("broken.png"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readable_output_shows_the_text_and_one_line_per_tool_call() {
    let dialect = Dialect::OpenAiChat;
    let server = ScriptedLlm::start(vec![
        dialect.turn(&["Checking."], &calls_of(dialect)[..1]),
        dialect.text(&["It said one."]),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(binary("conduit").unwrap())
        .args([
            "chat",
            "--kind",
            "openai-chat",
            "--base-url",
            &dialect.base_url(&server.url()),
        ])
        .args(["--model", "gpt-test", "--approve", "auto", "Echo one"])
        .env("CONDUIT_HOME", home.path())
        .env("CONDUIT_TEST_TOOLS", "1")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert_eq!(lines[0], "Checking.");
    assert_eq!(lines[1], "→ test__echo {\"text\":\"one\"}");
    assert!(
        lines[2].starts_with("← test__echo done in ") && lines[2].ends_with(" ms: one"),
        "{stdout}"
    );
    assert_eq!(lines[3], "It said one.");
}

/// With `--json`, a command refused before any turn (no provider, no model) still ends
/// with its `error` and `done` lines, and exits 2 for bad usage.
#[test]
fn a_refused_json_chat_still_ends_with_done() {
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(binary("conduit").unwrap())
        .args(["chat", "--json", "hi"])
        .env("CONDUIT_HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["type"], "error");
    assert!(
        lines[0]["message"]
            .as_str()
            .unwrap()
            .contains("say which provider to use"),
        "{lines:?}"
    );
    assert_eq!(lines[1]["type"], "done");
    assert_eq!(lines[1]["outcome"], "error");
    assert_eq!(
        lines[1]["conversation"],
        Value::Null,
        "no conversation was started"
    );
}

/// OpenAI refuses Responses' `include` of encrypted reasoning for a model that does not
/// reason (gpt-4o, gpt-4.1, gpt-5-chat): a 400 "Encrypted content is not supported with
/// this model" (`param: include`), as observed. The request goes again without it, and so
/// does the next request of the same run (after a tool call), without being refused first.
/// Before, every turn with such a model failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_refusing_encrypted_reasoning_is_asked_again_without_it() {
    let dialect = Dialect::OpenAiResponses;
    let refused = Reply::Error {
        status: 400,
        headers: vec![("content-type".into(), "application/json".into())],
        body: json!({"error": {
            "message": "Encrypted content is not supported with this model.",
            "type": "invalid_request_error",
            "param": "include",
            "code": null
        }})
        .to_string(),
    };
    let replies = vec![
        refused,
        dialect.turn(
            &["Let me echo."],
            &[ScriptedCall::new(
                "call_1",
                "test__echo",
                json!({"text": "one"}),
            )],
        ),
        dialect.text(&["Echoed."]),
    ];
    let (run, requests, _home) = chat(dialect, replies, &["--approve", "auto"]).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.text(), "Let me echo.Echoed.");
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests[0].body["include"],
        json!(["reasoning.encrypted_content"])
    );
    assert!(
        requests[1].body.get("include").is_none(),
        "{}",
        requests[1].body
    );
    assert!(
        requests[2].body.get("include").is_none(),
        "{}",
        requests[2].body
    );
    assert_eq!(requests[1].body["input"], requests[0].body["input"]);
    assert!(run.of_type("error").is_empty(), "{:?}", run.events);
}

/// Chat Completions sends the reasoning behind tool calls back with them as
/// `reasoning_content` (DeepSeek's thinking mode refuses the results without it); Groq,
/// which streams reasoning as `reasoning`, refuses the field with a 400 (as observed:
/// "property 'reasoning_content' is unsupported"). The request goes again without it, and
/// the run goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_sent_back_with_calls_is_left_out_for_a_server_that_refuses_it() {
    let dialect = Dialect::OpenAiChat;
    let sse = |data: Value| format!("data: {data}\n\n");
    let reasoned_call = Reply::Stream(
        [
            sse(json!({"choices": [{"index": 0, "delta": {"role": "assistant", "reasoning": "I should echo it."}, "finish_reason": null}]})),
            sse(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_g1", "type": "function", "function": {"name": "test__echo", "arguments": "{\"text\":\"one\"}"}}]}, "finish_reason": null}]})),
            sse(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
            "data: [DONE]\n\n".to_owned(),
        ]
        .into_iter()
        .map(conduit_e2e::llm_server::Chunk::Send)
        .collect(),
    );
    let refused = Reply::Error {
        status: 400,
        headers: vec![("content-type".into(), "application/json".into())],
        body: json!({"error": {
            "message": "'messages.1' : for 'role:assistant' the following must be satisfied[('messages.1' : property 'reasoning_content' is unsupported)]",
            "type": "invalid_request_error"
        }})
        .to_string(),
    };
    let replies = vec![reasoned_call, refused, dialect.text(&["Echoed."])];
    let (run, requests, _home) = chat(dialect, replies, &["--approve", "auto"]).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.text(), "Echoed.");
    assert_eq!(requests.len(), 3);
    let assistant = |request: &Recorded| {
        request.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "assistant")
            .cloned()
            .unwrap()
    };
    assert_eq!(
        assistant(&requests[1])["reasoning_content"],
        "I should echo it."
    );
    assert!(assistant(&requests[2]).get("reasoning_content").is_none());
    assert_eq!(assistant(&requests[2])["tool_calls"][0]["id"], "call_g1");
}

/// Each service's words for a prompt past the model's context, as it sends them.
fn context_refusal(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Anthropic => "prompt is too long: 208310 tokens > 200000 maximum",
        Dialect::OpenAiChat => {
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages."
        }
        Dialect::OpenAiResponses => {
            "Your input exceeds the context window of this model. Please adjust your input and try again."
        }
        Dialect::Gemini => {
            "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
        }
    }
}

/// A conversation continued after a 300 KB log was attached: each protocol's refusal of
/// its length is met by asking again with the log cut to its start, `--json` says so,
/// and the saved conversation keeps the whole log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_past_the_context_is_asked_again_shorter_in_every_protocol() {
    let files = tempfile::tempdir().unwrap();
    let log = files.path().join("build.log");
    std::fs::write(
        &log,
        "2026-12-01T03:00:00Z ERROR no space left on device\n".repeat(6_000),
    )
    .unwrap();
    for dialect in Dialect::ALL {
        let server = ScriptedLlm::start(vec![
            dialect.text(&["The disk is full."]),
            dialect.http_error(400, context_refusal(dialect), None),
            dialect.text(&["Still full."]),
        ])
        .await
        .unwrap();
        let home = tempfile::tempdir().unwrap();
        let run = |extra: Vec<String>, prompt: &'static str| {
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            let mut cmd = command(dialect, &server, home.path(), &extra, prompt);
            async move {
                let output = tokio::time::timeout(Duration::from_secs(60), cmd.output())
                    .await
                    .expect("conduit chat finished")
                    .unwrap();
                ChatRun::of(&output)
            }
        };
        let first = run(
            vec!["--attach".into(), log.display().to_string()],
            "Why did the build fail?",
        )
        .await;
        assert_eq!(first.code, Some(0), "{dialect:?}: {}", first.stderr);
        let conversation = first.last()["conversation"].as_str().unwrap().to_owned();
        let second = run(vec!["--conversation".into(), conversation], "And now?").await;
        assert_eq!(second.code, Some(0), "{dialect:?}: {}", second.stderr);
        assert_eq!(second.text(), "Still full.");
        assert_eq!(
            second.of_type("context_shortened")[0]["fit"],
            "older_outputs_cut"
        );
        let sizes: Vec<usize> = server
            .requests()
            .iter()
            .filter(|r| r.method == "POST")
            .map(|r| r.body.to_string().len())
            .collect();
        assert_eq!(sizes.len(), 3, "{dialect:?}");
        assert!(
            sizes[1] > 300_000 && sizes[2] < 20_000,
            "{dialect:?}: {sizes:?}"
        );
        let conversation = first.last()["conversation"].as_str().unwrap();
        let shown = conduit(home.path(), &["sessions", "show", conversation], None);
        assert!(shown.status.success());
        assert!(
            String::from_utf8_lossy(&shown.stdout).contains("[file build.log, 6000 lines]"),
            "{dialect:?}: the saved log is whole: {}",
            String::from_utf8_lossy(&shown.stdout)
        );
    }
}

/// `--thinking` asks each protocol for thinking in its own field; a level it does not
/// know is a usage error before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_asked_on_the_command_line_reaches_every_protocol() {
    for dialect in Dialect::ALL {
        let (run, requests, _home) = chat(
            dialect,
            vec![dialect.text(&["Planned."])],
            &["--thinking", "medium"],
        )
        .await;
        assert_eq!(run.code, Some(0), "{dialect:?}: {}", run.stderr);
        let body = &requests[0].body;
        match dialect {
            // `claude-test` names no version: a new model, which thinks adaptively.
            Dialect::Anthropic => {
                assert_eq!(body["thinking"], json!({"type": "adaptive"}), "{body}");
                assert_eq!(body["output_config"], json!({"effort": "medium"}), "{body}");
            }
            Dialect::OpenAiResponses => assert_eq!(
                body["reasoning"],
                json!({"effort": "medium", "summary": "auto"}),
                "{body}"
            ),
            Dialect::OpenAiChat => assert_eq!(body["reasoning_effort"], "medium", "{body}"),
            Dialect::Gemini => assert_eq!(
                body["generationConfig"]["thinkingConfig"]["thinkingBudget"], 8192,
                "{body}"
            ),
        }
    }
    let (run, requests, _home) = chat(
        Dialect::Anthropic,
        vec![Dialect::Anthropic.text(&["unused"])],
        &["--thinking", "max"],
    )
    .await;
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("\"max\" is not a thinking level"),
        "{}",
        run.stderr
    );
    assert!(requests.is_empty());
}
