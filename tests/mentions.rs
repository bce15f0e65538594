//! Resources and prompts in the chat, through the app's own turn path with server-everything:
//! what can be mentioned is listed, a template's argument is completed by the server, an
//! attached resource (plain and from a template) and a used prompt reach the model's
//! request, and a resource that cannot go into a message fails the turn saying why,
//! without asking the model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use conduit_e2e::llm_server::{Dialect, ScriptedLlm};
use conduit_host::app::{App, SendRequest, TurnEvent, TurnSink};
use conduit_host::mentions::{CompletionTarget, PromptMention, ResourceMention};
use conduit_host::{Host, Paths};
use serde_json::json;
use tokio::sync::mpsc;

async fn run_turn(app: &Arc<App>, request: SendRequest) -> Option<String> {
    let (sender, mut events) = mpsc::unbounded_channel();
    let sink: TurnSink = Arc::new(move |event| {
        let _ = sender.send(event);
    });
    app.send(request, sink).unwrap();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .unwrap()
            .unwrap();
        if let TurnEvent::Ended { error, .. } = event {
            return error.map(|e| e.message);
        }
    }
}

fn request(text: &str) -> SendRequest {
    SendRequest {
        conversation: None,
        text: text.into(),
        attachments: Vec::new(),
        files: Vec::new(),
        documents: Vec::new(),
        provider: "local".into(),
        model: None,
        toolset: None,
        resources: Vec::new(),
        prompt: None,
        view_context: Vec::new(),
        again: false,
        replace_answer: false,
        replace_message: false,
        instructions: None,
        reasoning: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_prompts_reach_the_model() {
    let chat = Dialect::OpenAiChat;
    let llm = ScriptedLlm::start(vec![
        chat.text(&["Read it."]),
        chat.text(&["Weather noted."]),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("settings.json"),
        json!({"providers": [{"id": "local", "protocol": "openai-chat",
            "baseUrl": chat.base_url(&llm.url()), "defaultModel": "m"}]})
        .to_string(),
    )
    .unwrap();
    let everything = conduit_e2e::npm_server("server-everything").unwrap();
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"ev": {"command": "node", "args": [everything, "stdio"]}}})
            .to_string(),
    )
    .unwrap();
    let app = App::new(Arc::new(Host::new(Paths::under_home(
        home.path().to_owned(),
        None,
    ))));

    let offered = app.mentionables().await;
    assert!(offered.problems.is_empty(), "{:?}", offered.problems);
    let architecture = offered
        .resources
        .iter()
        .find(|r| r.uri.ends_with("architecture.md"))
        .unwrap_or_else(|| panic!("{:?}", offered.resources));
    let template = offered
        .templates
        .iter()
        .find(|t| t.uri_template.contains("dynamic/text"))
        .unwrap();
    assert_eq!(template.arguments, ["resourceId"]);
    let args_prompt = offered
        .prompts
        .iter()
        .find(|p| p.name == "args-prompt")
        .unwrap();
    assert!(
        args_prompt
            .arguments
            .iter()
            .any(|a| a.name == "city" && a.required)
    );
    // The server completes a prompt's argument as it is typed.
    let departments = app
        .complete_mention(
            "ev",
            CompletionTarget::Prompt {
                name: "completable-prompt".into(),
            },
            "department",
            "E",
        )
        .await
        .unwrap();
    assert!(
        departments.iter().any(|d| d.starts_with('E')),
        "{departments:?}"
    );

    // A resource and a filled-in template attached to a message.
    let mut attach = request("Summarize these");
    attach.resources = vec![
        ResourceMention::Resource {
            server: "ev".into(),
            uri: architecture.uri.clone(),
        },
        ResourceMention::Template {
            server: "ev".into(),
            uri_template: template.uri_template.clone(),
            arguments: json!({"resourceId": "7"}).as_object().unwrap().clone(),
        },
    ];
    assert_eq!(run_turn(&app, attach).await, None);
    let first = llm.requests()[0].body.to_string();
    assert!(first.contains("Summarize these"), "{first}");
    assert!(
        first.contains(&format!("Resource {}", architecture.uri)),
        "{first}"
    );
    assert!(first.contains("demo://resource/dynamic/text/7"), "{first}");

    // A prompt used with no text of one's own: its messages are the turn.
    let mut prompt = request("");
    prompt.prompt = Some(PromptMention {
        server: "ev".into(),
        name: "args-prompt".into(),
        arguments: json!({"city": "Lyon", "state": ""})
            .as_object()
            .unwrap()
            .clone(),
    });
    assert_eq!(run_turn(&app, prompt).await, None);
    let second = llm.requests()[1].body.to_string();
    assert!(second.contains("Lyon"), "{second}");

    // A binary resource is refused with why, and the model is not asked.
    let mut binary = request("And this");
    binary.resources = vec![ResourceMention::Template {
        server: "ev".into(),
        uri_template: "demo://resource/dynamic/blob/{resourceId}".into(),
        arguments: json!({"resourceId": "1"}).as_object().unwrap().clone(),
    }];
    let refused = run_turn(&app, binary).await.unwrap();
    assert!(
        refused.contains("only text, images and PDFs go into a message"),
        "{refused}"
    );
    assert_eq!(llm.requests().len(), 2, "the model was not asked");
    app.shutdown().await;
}

/// A server that never answers the read of a mentioned resource: Stop ends the turn while
/// it waits (the turn was not running yet, and Stop used to wait for the server), and an
/// entry's `timeout` ends it with an error naming the server; the model is never asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mentioned_resource_that_never_comes_can_be_stopped_and_times_out() {
    let llm = ScriptedLlm::start(vec![]).await.unwrap();
    let (python, script) = conduit_e2e::python_fixture("dynamic_tools.py").unwrap();
    let home = conduit_e2e::home_with(
        &llm,
        json!({
            "slow": {"command": python, "args": [script]},
            "timed": {"command": python, "args": [script], "timeout": 2}
        }),
    );
    let app = App::new(Arc::new(Host::new(Paths::under_home(
        home.path().to_owned(),
        None,
    ))));
    let mention = |server: &str| {
        let mut asked = request("Read it");
        asked.provider = "scripted".into();
        asked.resources = vec![ResourceMention::Resource {
            server: server.into(),
            uri: "hang://forever".into(),
        }];
        asked
    };

    let (sender, mut events) = mpsc::unbounded_channel();
    let sink: TurnSink = Arc::new(move |event| {
        let _ = sender.send(event);
    });
    // The servers are up first, so that Stop comes while the read waits.
    let offered = app.mentionables().await;
    assert!(
        offered.resources.iter().any(|r| r.uri == "hang://forever"),
        "{:?}",
        offered.resources
    );
    let started = app.send(mention("slow"), sink).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    app.stop(&started.turn);
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(TurnEvent::Ended {
                status,
                error,
                saved,
                ..
            }) = events.recv().await
            {
                return (status, error, saved);
            }
        }
    })
    .await
    .expect("Stop ends a turn that waits for a server");
    assert_eq!(
        ended.0,
        conduit_host::app::TurnStatus::Interrupted,
        "{:?}",
        ended.1
    );
    // Stopped before the message was saved: the window gives it back.
    assert!(!ended.2, "nothing was saved");

    let refused = run_turn(&app, mention("timed")).await.unwrap();
    assert!(
        refused.contains("timed") && refused.contains("took longer than 2s"),
        "{refused}"
    );
    assert!(llm.requests().is_empty(), "the model was not asked");
    app.shutdown().await;
}
