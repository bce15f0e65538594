//! `conduit chat --json` shows a provider's failure in the provider's own words, for the
//! shapes the services really send: a mid-answer error in each protocol's observed
//! shape, and an HTML error page where JSON was expected.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Stdio;
use std::time::Duration;

use conduit_e2e::binary;
use conduit_e2e::cli::ChatRun;
use conduit_e2e::llm_server::{Dialect, Reply, ScriptedLlm};

const KEY: &str = "sk-test-key-1234";

async fn chat(dialect: Dialect, replies: Vec<Reply>) -> ChatRun {
    let server = ScriptedLlm::start(replies).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let model = match dialect {
        Dialect::Anthropic => "claude-test",
        Dialect::Gemini => "gemini-test",
        Dialect::OpenAiResponses | Dialect::OpenAiChat => "gpt-test",
    };
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
                model,
                "--json",
                "Hello there",
            ])
            .env("CONDUIT_HOME", home.path())
            .env("CONDUIT_TEST_LLM_KEY", KEY)
            .env("CONDUIT_SECRET_STORE", "file")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("conduit chat finished")
    .unwrap();
    ChatRun::of(&output)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mid_answer_failure_shows_the_providers_message_in_every_shape() {
    let said = "The upstream model crashed while answering (ref 7f3a).";
    for dialect in Dialect::ALL {
        let run = chat(dialect, vec![dialect.error_as_sent(&["Partial "], said)]).await;
        assert_eq!(run.code, Some(1), "{dialect:?}: {}", run.stderr);
        assert_eq!(run.text(), "Partial ", "{dialect:?}");
        let errors = run.of_type("error");
        assert_eq!(errors.len(), 1, "{dialect:?}: {:?}", run.events);
        // The kind its code names (a server error, an overload), else a stream's failure.
        let kind = errors[0]["error"]["kind"].as_str().unwrap();
        assert!(
            ["stream", "server", "overloaded"].contains(&kind),
            "{dialect:?}: {kind}"
        );
        let message = errors[0]["error"]["message"].as_str().unwrap();
        assert!(message.contains(said), "{dialect:?}: {message}");
        assert!(!message.contains("unknown error"), "{dialect:?}: {message}");
        assert!(run.stderr.contains(said), "{dialect:?}: {}", run.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_error_page_shows_its_status_and_title() {
    for dialect in Dialect::ALL {
        let run = chat(
            dialect,
            vec![dialect.html_error(403, "Attention Required! | Cloudflare")],
        )
        .await;
        assert_eq!(run.code, Some(1), "{dialect:?}: {}", run.stderr);
        let error = &run.of_type("error")[0]["error"];
        assert_eq!(error["status"], 403, "{dialect:?}");
        assert_eq!(
            error["message"],
            "an HTML page instead of an error message: \"Attention Required! | Cloudflare\"",
            "{dialect:?}"
        );
        assert!(
            run.stderr.contains("(HTTP 403)") && run.stderr.contains("Cloudflare"),
            "{dialect:?}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("<title>"), "{}", run.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_error_sent_with_status_200_instead_of_a_stream_shows_its_message() {
    for dialect in Dialect::ALL {
        let body = serde_json::json!({"error": {"message": "model 'gpt-9' is not loaded", "code": "model_not_loaded"}});
        let run = chat(dialect, vec![Reply::Json(body)]).await;
        assert_eq!(run.code, Some(1), "{dialect:?}: {}", run.stderr);
        let error = &run.of_type("error")[0]["error"];
        assert_eq!(error["kind"], "protocol", "{dialect:?}");
        assert_eq!(
            error["message"], "model_not_loaded: model 'gpt-9' is not loaded",
            "{dialect:?}"
        );
    }
}

/// `--read-timeout` ("fail when the provider sends nothing for this many seconds") holds
/// before the answer starts too: a server that takes the connection and never answers
/// fails the run as stalled, instead of holding it for the default 10 minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_never_starts_answering_fails_after_the_read_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // Takes each connection and keeps it, saying nothing.
    let held = tokio::spawn(async move {
        let mut kept = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            kept.push(socket);
        }
    });
    let home = tempfile::tempdir().unwrap();
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let run = |json: bool| {
        let mut args = vec![
            "chat",
            "--kind",
            "openai-chat",
            "--base-url",
            &base_url,
            "--model",
            "m",
            "--read-timeout",
            "1",
        ];
        if json {
            args.push("--json");
        }
        args.push("Hello there");
        tokio::time::timeout(
            Duration::from_secs(120),
            tokio::process::Command::new(binary("conduit").unwrap())
                .args(args)
                .env("CONDUIT_HOME", home.path())
                .env("CONDUIT_SECRET_STORE", "file")
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
    };
    let output = run(true)
        .await
        .expect("the run ended after its read timeout, not the default 10 minutes")
        .unwrap();
    let chat = ChatRun::of(&output);
    assert_eq!(chat.code, Some(1), "{}", chat.stderr);
    let error = chat.of_type("error")[0].clone();
    assert_eq!(error["error"]["kind"], "stalled", "{error}");
    assert!(chat.stderr.contains("within 1 s"), "{}", chat.stderr);
    // As text, an answer that never began leaves stdout empty (`> answer.txt`), the
    // error on stderr.
    let output = run(false).await.expect("the run ended").unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty(), "{:?}", output.stdout);
    held.abort();
}

/// An answer the model's output limit cut off ends with exit 0 (it is the answer there
/// is), and says so: before, nothing told it from a whole one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_cut_off_at_the_output_limit_is_said() {
    for dialect in Dialect::ALL {
        let run = chat(dialect, vec![dialect.cut_off(&["Once upon a time"])]).await;
        assert_eq!(run.code, Some(0), "{dialect:?}: {}", run.stderr);
        assert_eq!(run.text(), "Once upon a time", "{dialect:?}");
        assert!(
            run.stderr.contains(
                "the answer was cut off: it reached the most the model may write in one answer"
            ),
            "{dialect:?}: {}",
            run.stderr
        );
    }
}
