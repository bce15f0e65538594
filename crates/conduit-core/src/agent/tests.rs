//! Tests of the agent loop against a scripted provider and test tools.

use std::sync::Mutex;

use serde_json::json;
use tokio::sync::Barrier;

use super::*;
use crate::provider::{InvalidArguments, ProviderErrorKind};
use crate::testing::{Echo, Script, ScriptedProvider, tool_spec};
use crate::tool::{Tool, ToolError, ToolOutput};

fn spec(name: &str) -> ToolSpec {
    tool_spec(name)
}

/// Waits until `n` calls are inside at once: passes only when calls run concurrently.
struct Rendezvous(ToolSpec, Arc<Barrier>);

#[async_trait]
impl Tool for Rendezvous {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        (context.progress)(Progress {
            progress: 1.0,
            total: Some(2.0),
            message: None,
        });
        self.1.wait().await;
        Ok(ToolOutput::text(format!("met {}", arguments["who"])))
    }
}

/// Never finishes until cancelled.
struct Hang(ToolSpec);

#[async_trait]
impl Tool for Hang {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        context.cancel.cancelled().await;
        Err(ToolError("cancelled".into()))
    }
}

struct Fails(ToolSpec);

#[async_trait]
impl Tool for Fails {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(
        &self,
        _arguments: Value,
        _context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Err(ToolError("disk on fire".into()))
    }
}

fn text(t: &str) -> Result<ProviderEvent, ProviderError> {
    Ok(ProviderEvent::TextDelta(t.into()))
}

fn stop(reason: StopReason) -> Result<ProviderEvent, ProviderError> {
    Ok(ProviderEvent::Stop(reason))
}

fn call(id: &str, name: &str, arguments: Value) -> Result<ProviderEvent, ProviderError> {
    Ok(ProviderEvent::ToolCallDone {
        id: id.into(),
        name: name.into(),
        arguments: Ok(arguments),
        signature: None,
    })
}

struct Run {
    outcome: Result<Outcome, ProviderError>,
    history: Vec<Message>,
    events: Vec<AgentEvent>,
}

async fn run_with(
    provider: Arc<ScriptedProvider>,
    tools: Vec<Arc<dyn Tool>>,
    approval: Approval,
    options: AgentOptions,
    cancel: CancellationToken,
) -> Run {
    let mut registry = ToolRegistry::new();
    for tool in tools {
        registry.register(tool);
    }
    let agent = Agent::new(
        provider,
        registry,
        Arc::new(FixedApproval(approval)),
        options,
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = seen.clone();
    let sink: EventSink = Arc::new(move |event| sink_seen.lock().unwrap().push(event));
    let mut history = vec![Message::user_text("hello")];
    let outcome = agent.run(&mut history, sink, cancel).await;
    let events = seen.lock().unwrap().clone();
    Run {
        outcome,
        history,
        events,
    }
}

/// Runs `agent` on one user message, keeping its events.
async fn run_agent(agent: &Agent) -> Run {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = seen.clone();
    let sink: EventSink = Arc::new(move |event| sink_seen.lock().unwrap().push(event));
    let mut history = vec![Message::user_text("hello")];
    let outcome = agent
        .run(&mut history, sink, CancellationToken::new())
        .await;
    let events = seen.lock().unwrap().clone();
    Run {
        outcome,
        history,
        events,
    }
}

async fn run(provider: Arc<ScriptedProvider>, tools: Vec<Arc<dyn Tool>>) -> Run {
    run_with(
        provider,
        tools,
        Approval::Allow,
        AgentOptions::new("m"),
        CancellationToken::new(),
    )
    .await
}

fn results_of(message: &Message) -> Vec<(String, bool, String)> {
    message
        .tool_results()
        .map(|r| (r.wire_id().to_owned(), r.is_error, r.text()))
        .collect()
}

#[tokio::test]
async fn a_plain_answer_streams_and_finishes() {
    let provider = ScriptedProvider::new(vec![vec![
        text("Hel"),
        text("lo!"),
        Ok(ProviderEvent::Usage(Usage {
            input_tokens: 3,
            output_tokens: 2,
            ..Default::default()
        })),
        stop(StopReason::EndTurn),
    ]]);
    let run = run(provider, vec![]).await;
    assert_eq!(run.outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    assert_eq!(run.history.len(), 2);
    assert_eq!(run.history[1].role, Role::Assistant);
    assert_eq!(run.history[1].text(), "Hello!");
    let deltas: Vec<_> = run
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["Hel", "lo!"]);
    assert!(matches!(
        run.events.first(),
        Some(AgentEvent::TurnStarted { turn: 1 })
    ));
    assert!(matches!(
        run.events.last(),
        Some(AgentEvent::Finished {
            reason: StopReason::EndTurn
        })
    ));
}

#[tokio::test]
async fn parallel_tool_calls_run_concurrently_and_answer_in_order() {
    let barrier = Arc::new(Barrier::new(2));
    let provider = ScriptedProvider::new(vec![
        vec![
            text("Let me check."),
            call("c1", "meet", json!({"who": "a"})),
            call("c2", "meet", json!({"who": "b"})),
            stop(StopReason::ToolUse),
        ],
        vec![text("Both met."), stop(StopReason::EndTurn)],
    ]);
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Rendezvous(spec("meet"), barrier))];
    let run = tokio::time::timeout(Duration::from_secs(5), run(provider.clone(), tools))
        .await
        .expect("calls that wait for each other finish only when they run concurrently");
    assert_eq!(run.outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    let roles: Vec<_> = run.history.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(
        results_of(&run.history[2]),
        [
            ("c1".into(), false, "met \"a\"".into()),
            ("c2".into(), false, "met \"b\"".into())
        ]
    );
    // The second request carried the calls and their results.
    let second = &provider.requests()[1];
    assert_eq!(second.messages.len(), 3);
    assert_eq!(second.tools.len(), 1);
    let progress = run
        .events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ToolProgress { .. }))
        .count();
    assert_eq!(progress, 2);
}

/// Reports progress 10,000 times as fast as it can, the last one complete.
struct Flood(ToolSpec);

#[async_trait]
impl Tool for Flood {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        for step in 1..=10_000 {
            (context.progress)(Progress {
                progress: f64::from(step),
                total: Some(10_000.0),
                message: None,
            });
        }
        Ok(ToolOutput::text("flooded"))
    }
}

#[tokio::test]
async fn a_flood_of_progress_reaches_the_window_paced_and_its_completion_always() {
    let provider = ScriptedProvider::new(vec![
        vec![call("c1", "flood", json!({})), stop(StopReason::ToolUse)],
        vec![text("Done."), stop(StopReason::EndTurn)],
    ]);
    let run = run(provider, vec![Arc::new(Flood(spec("flood")))]).await;
    assert_eq!(run.outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    let shown: Vec<f64> = run
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolProgress { progress, .. } => Some(progress.progress),
            _ => None,
        })
        .collect();
    // The first report, one an interval while the loop runs, and the last.
    assert!(
        shown.len() < 100,
        "{} reports reached the window",
        shown.len()
    );
    assert_eq!(shown.first(), Some(&1.0));
    assert_eq!(shown.last(), Some(&10_000.0));
}

/// Says what it starts, then at once what it does next, then works a while.
struct TwoSteps(ToolSpec);

#[async_trait]
impl Tool for TwoSteps {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        for (step, what) in ["Starting", "Uploading"].into_iter().enumerate() {
            (context.progress)(Progress {
                progress: step as f64,
                total: None,
                message: Some(what.into()),
            });
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
        Ok(ToolOutput::text("uploaded"))
    }
}

/// A report held back by the pace is sent when its interval ends: the window does not
/// show "Starting" for the whole upload.
#[tokio::test]
async fn the_latest_progress_held_back_reaches_the_window_within_its_interval() {
    let provider = ScriptedProvider::new(vec![
        vec![call("c1", "upload", json!({})), stop(StopReason::ToolUse)],
        vec![text("Done."), stop(StopReason::EndTurn)],
    ]);
    let run = run(provider, vec![Arc::new(TwoSteps(spec("upload")))]).await;
    let shown: Vec<String> = run
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolProgress { progress, .. } => progress.message.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(shown, ["Starting", "Uploading"]);
}

#[tokio::test]
async fn tool_failures_unknown_tools_and_bad_arguments_become_error_results() {
    let provider = ScriptedProvider::new(vec![
        vec![
            call("c1", "fails", json!({})),
            call("c2", "nope", json!({})),
            Ok(ProviderEvent::ToolCallDone {
                id: "c3".into(),
                name: "echo".into(),
                arguments: Err(InvalidArguments {
                    raw: "{\"text\": ".into(),
                    error: "EOF while parsing".into(),
                }),
                signature: None,
            }),
            stop(StopReason::ToolUse),
        ],
        vec![text("Sorry."), stop(StopReason::EndTurn)],
    ]);
    let tools: Vec<Arc<dyn Tool>> =
        vec![Arc::new(Fails(spec("fails"))), Arc::new(Echo(spec("echo")))];
    let run = run(provider, tools).await;
    assert_eq!(run.outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    let results = results_of(&run.history[2]);
    assert!(results.iter().all(|(_, is_error, _)| *is_error));
    assert!(results[0].2.contains("disk on fire"));
    assert!(results[1].2.contains("no tool named \"nope\""));
    assert!(
        results[2].2.contains("EOF while parsing"),
        "{}",
        results[2].2
    );
    assert!(results[2].2.contains("was not run"), "{}", results[2].2);
    // The call with bad arguments is kept with an empty object, valid for every provider.
    let bad = run.history[1].tool_calls().nth(2).unwrap();
    assert_eq!(bad.arguments, json!({}));
}

#[tokio::test]
async fn a_denied_call_gets_a_denied_result_and_the_model_answers() {
    let provider = ScriptedProvider::new(vec![
        vec![
            call("c1", "echo", json!({"text": "x"})),
            stop(StopReason::ToolUse),
        ],
        vec![text("Understood."), stop(StopReason::EndTurn)],
    ]);
    let run = run_with(
        provider,
        vec![Arc::new(Echo(spec("echo")))],
        Approval::Deny {
            reason: "not now".into(),
        },
        AgentOptions::new("m"),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(run.outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    let results = results_of(&run.history[2]);
    assert!(results[0].1);
    assert!(results[0].2.contains("denied"), "{results:?}");
    assert!(
        run.events
            .iter()
            .any(|e| matches!(e, AgentEvent::ToolCallDenied { .. }))
    );
}

/// A call a standing allow lets run says so before it runs, and runs; one the user
/// answered (a plain allow) says nothing of the kind.
#[tokio::test]
async fn a_standing_allow_is_said_before_the_call_runs() {
    let script = || {
        ScriptedProvider::new(vec![
            vec![
                call("c1", "echo", json!({"text": "x"})),
                stop(StopReason::ToolUse),
            ],
            vec![text("Done."), stop(StopReason::EndTurn)],
        ])
    };
    let standing = run_with(
        script(),
        vec![Arc::new(Echo(spec("echo")))],
        Approval::Standing(StandingAllow::Conversation),
        AgentOptions::new("m"),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(standing.outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    let results = results_of(&standing.history[2]);
    assert!(!results[0].1, "it ran: {results:?}");
    let said = standing
        .events
        .iter()
        .position(|e| {
            matches!(
                e,
                AgentEvent::ToolCallAllowed {
                    by: StandingAllow::Conversation,
                    ..
                }
            )
        })
        .expect("the standing allow is said");
    let running = standing
        .events
        .iter()
        .position(|e| matches!(e, AgentEvent::ToolCallRunning { .. }))
        .expect("the call runs");
    assert!(said < running);
    let answered = run(script(), vec![Arc::new(Echo(spec("echo")))]).await;
    assert!(
        !answered
            .events
            .iter()
            .any(|e| matches!(e, AgentEvent::ToolCallAllowed { .. }))
    );
}

#[tokio::test(start_paused = true)]
async fn a_tool_that_hangs_times_out_and_is_cancelled() {
    let provider = ScriptedProvider::new(vec![
        vec![call("c1", "hang", json!({})), stop(StopReason::ToolUse)],
        vec![text("It timed out."), stop(StopReason::EndTurn)],
    ]);
    let mut options = AgentOptions::new("m");
    options.tool_timeout = Duration::from_secs(2);
    let run = run_with(
        provider,
        vec![Arc::new(Hang(spec("hang")))],
        Approval::Allow,
        options,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(run.outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    let results = results_of(&run.history[2]);
    assert!(
        results[0].2.contains("did not finish within 2 s"),
        "{results:?}"
    );
}

#[tokio::test]
async fn the_turn_limit_ends_the_run_with_a_valid_history() {
    let looping: Vec<Script> = (0..3)
        .map(|i| {
            vec![
                call(&format!("c{i}"), "echo", json!({"text": "again"})),
                stop(StopReason::ToolUse),
            ]
        })
        .collect();
    let provider = ScriptedProvider::new(looping);
    let mut options = AgentOptions::new("m");
    options.max_turns = 3;
    let run = run_with(
        provider,
        vec![Arc::new(Echo(spec("echo")))],
        Approval::Allow,
        options,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(run.outcome, Ok(Outcome::TurnLimit));
    assert!(matches!(
        run.events.last(),
        Some(AgentEvent::TurnLimitReached { limit: 3 })
    ));
    assert_eq!(run.history.len(), 7);
    assert_eq!(run.history.last().map(|m| m.role), Some(Role::Tool));
}

#[tokio::test]
async fn cancelling_mid_stream_keeps_the_partial_answer() {
    let provider = ScriptedProvider::with_hangs(vec![(vec![text("Partial ans")], true)]);
    let cancel = CancellationToken::new();
    let stopper = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        stopper.cancel();
    });
    let run = run_with(
        provider,
        vec![],
        Approval::Allow,
        AgentOptions::new("m"),
        cancel,
    )
    .await;
    assert_eq!(run.outcome, Ok(Outcome::Cancelled));
    assert_eq!(run.history[1].text(), "Partial ans");
    assert!(matches!(run.events.last(), Some(AgentEvent::Cancelled)));
}

#[tokio::test]
async fn cancelling_while_tools_run_answers_every_call() {
    let provider = ScriptedProvider::new(vec![vec![
        call("c1", "hang", json!({})),
        call("c2", "hang", json!({})),
        stop(StopReason::ToolUse),
    ]]);
    let cancel = CancellationToken::new();
    let stopper = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        stopper.cancel();
    });
    let run = run_with(
        provider,
        vec![Arc::new(Hang(spec("hang")))],
        Approval::Allow,
        AgentOptions::new("m"),
        cancel,
    )
    .await;
    assert_eq!(run.outcome, Ok(Outcome::Cancelled));
    let results = results_of(&run.history[2]);
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|(_, e, t)| *e && t.contains("stopped")));
}

#[tokio::test]
async fn an_error_mid_stream_keeps_the_partial_answer_and_a_valid_history() {
    let provider = ScriptedProvider::new(vec![vec![
        text("I will "),
        call("c1", "echo", json!({"text": "x"})),
        Err(ProviderError::new(
            ProviderErrorKind::Stream,
            "overloaded_error",
        )),
    ]]);
    let run = run(provider, vec![Arc::new(Echo(spec("echo")))]).await;
    let err = run.outcome.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Stream);
    assert_eq!(run.history[1].text(), "I will ");
    // The call that streamed before the error is answered as interrupted.
    let results = results_of(&run.history[2]);
    assert_eq!(results[0].0, "c1");
    assert!(results[0].1);
}

#[tokio::test]
async fn reasoning_is_kept_with_its_signature_for_replay() {
    let provider = ScriptedProvider::new(vec![vec![
        Ok(ProviderEvent::ReasoningDelta("think".into())),
        Ok(ProviderEvent::ReasoningDelta("ing".into())),
        Ok(ProviderEvent::ReasoningDone {
            signature: Some("sig".into()),
            encrypted: None,
            id: None,
        }),
        text("Answer"),
        stop(StopReason::EndTurn),
    ]]);
    let run = run(provider, vec![]).await;
    assert_eq!(
        run.history[1].blocks[0],
        Block::Reasoning {
            text: "thinking".into(),
            signature: Some("sig".into()),
            encrypted: None,
            id: None,
            protocol: Some("scripted".into()),
            producer: None,
        }
    );
}

#[tokio::test]
async fn ask_approval_waits_for_each_answer() {
    use crate::approval::AskApproval;

    let provider = ScriptedProvider::new(vec![
        vec![
            call("c1", "echo", json!({"text": "yes"})),
            call("c2", "echo", json!({"text": "no"})),
            stop(StopReason::ToolUse),
        ],
        vec![text("Done."), stop(StopReason::EndTurn)],
    ]);
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let sink: EventSink = Arc::new(move |event| {
        let _ = sender.send(event);
    });
    let ask = AskApproval::new(sink.clone());
    let answering = ask.clone();
    let answerer = tokio::spawn(async move {
        let mut asked = Vec::new();
        while let Some(event) = receiver.recv().await {
            if let AgentEvent::ApprovalRequested { call, .. } = event {
                let approval = if call.wire_id() == "c1" {
                    Approval::Allow
                } else {
                    Approval::Deny {
                        reason: "not this one".into(),
                    }
                };
                assert!(answering.answer(&call.id, approval));
                asked.push(call.wire_id().to_owned());
                if asked.len() == 2 {
                    break;
                }
            }
        }
        asked
    });
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Echo(spec("echo"))));
    let agent = Agent::new(provider, registry, ask.clone(), AgentOptions::new("m"));
    let mut history = vec![Message::user_text("hi")];
    let outcome = agent
        .run(&mut history, sink, CancellationToken::new())
        .await;
    assert_eq!(outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    drop(agent);
    let results = results_of(&history[2]);
    assert_eq!(results[0], ("c1".into(), false, "yes".into()));
    assert!(results[1].1 && results[1].2.contains("not this one"));
    assert!(ask.waiting().is_empty());
    let first_id = history[1].tool_calls().next().unwrap().id.clone();
    assert!(
        !ask.answer(&first_id, Approval::Allow),
        "an answered call cannot be answered twice"
    );
    drop(ask);
    let mut asked = answerer.await.unwrap();
    asked.sort();
    assert_eq!(asked, ["c1", "c2"]);
}

#[tokio::test]
async fn a_stop_while_waiting_for_approval_forgets_the_question() {
    use crate::approval::AskApproval;

    let provider = ScriptedProvider::new(vec![vec![
        call("c1", "echo", json!({"text": "x"})),
        stop(StopReason::ToolUse),
    ]]);
    let sink: EventSink = Arc::new(|_| {});
    let ask = AskApproval::new(sink.clone());
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Echo(spec("echo"))));
    let agent = Agent::new(provider, registry, ask.clone(), AgentOptions::new("m"));
    let cancel = CancellationToken::new();
    let stopper = cancel.clone();
    let watcher = ask.clone();
    tokio::spawn(async move {
        while watcher.waiting().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        stopper.cancel();
    });
    let mut history = vec![Message::user_text("hi")];
    let outcome = agent.run(&mut history, sink, cancel).await;
    assert_eq!(outcome, Ok(Outcome::Cancelled));
    assert!(ask.waiting().is_empty());
    let results = results_of(&history[2]);
    assert!(results[0].1 && results[0].2.contains("before the call was approved"));
}

#[tokio::test]
async fn each_block_is_reported_as_soon_as_it_is_complete() {
    let provider = ScriptedProvider::new(vec![
        vec![
            Ok(ProviderEvent::ReasoningDelta("hmm".into())),
            Ok(ProviderEvent::ReasoningDone {
                signature: Some("s".into()),
                encrypted: None,
                id: None,
            }),
            text("I will "),
            text("echo."),
            call("c1", "echo", json!({"text": "a"})),
            stop(StopReason::ToolUse),
        ],
        vec![text("Done."), stop(StopReason::EndTurn)],
    ]);
    let run = run(provider, vec![Arc::new(Echo(spec("echo")))]).await;
    let done: Vec<(usize, &'static str)> = run
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::BlockDone { index, block } => Some((
                *index,
                match block {
                    Block::Reasoning { .. } => "reasoning",
                    Block::Text { .. } => "text",
                    Block::ToolCall(_) => "tool_call",
                    _ => "other",
                },
            )),
            _ => None,
        })
        .collect();
    // The last text block of the final answer completes with its message instead.
    assert_eq!(done, [(0, "reasoning"), (1, "text"), (2, "tool_call")]);
    let text_done = run
        .events
        .iter()
        .position(|e| matches!(e, AgentEvent::BlockDone { index: 1, .. }))
        .unwrap();
    let call_ready = run
        .events
        .iter()
        .position(|e| matches!(e, AgentEvent::ToolCallReady { .. }))
        .unwrap();
    assert!(text_done < call_ready);
}

#[tokio::test]
async fn every_call_gets_its_own_id_and_a_provider_id_of_its_own_when_the_provider_repeats_one() {
    // Two responses that both number their calls from 0 (Gemini without ids), and one
    // response that repeats an id (a model doing so).
    let provider = ScriptedProvider::new(vec![
        vec![
            call("gemini-call-0", "echo", json!({"text": "a"})),
            stop(StopReason::ToolUse),
        ],
        vec![
            call("gemini-call-0", "echo", json!({"text": "b"})),
            call("gemini-call-0", "echo", json!({"text": "c"})),
            stop(StopReason::ToolUse),
        ],
        vec![text("Done."), stop(StopReason::EndTurn)],
    ]);
    let run = run(provider.clone(), vec![Arc::new(Echo(spec("echo")))]).await;
    assert_eq!(run.outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    let calls: Vec<&ToolCall> = run.history.iter().flat_map(|m| m.tool_calls()).collect();
    assert_eq!(calls.len(), 3);
    let ids: std::collections::HashSet<&str> = calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), 3, "ids unique in the conversation: {calls:?}");
    // The first keeps the provider's id; the repeats go back under ids of their own, as
    // strict APIs refuse two calls under one id.
    let wire: Vec<&str> = calls.iter().map(|c| c.wire_id()).collect();
    assert_eq!(
        wire,
        ["gemini-call-0", "gemini-call-0_2", "gemini-call-0_3"]
    );
    // Each result answers its own call, by Conduit's id, with the provider's id kept.
    for message in run.history.windows(2) {
        let (calls, results) = (&message[0], &message[1]);
        let pairs: Vec<_> = calls
            .tool_calls()
            .zip(results.tool_results())
            .map(|(call, result)| {
                (
                    call.id == result.call_id,
                    result.text() == call.arguments["text"],
                )
            })
            .collect();
        assert!(pairs.iter().all(|(same, text)| *same && *text), "{pairs:?}");
    }
    // The provider got each call back with its result under one id.
    let last = provider.requests().pop().unwrap();
    let sent_calls: Vec<String> = last
        .messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .map(|c| c.wire_id().to_owned())
        .collect();
    let sent_results: Vec<String> = last
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .map(|r| r.wire_id().to_owned())
        .collect();
    assert_eq!(sent_calls, wire);
    assert_eq!(sent_results, wire);
}

#[test]
fn a_suffixed_id_past_40_characters_gives_way_to_conduits_own() {
    use crate::content::{MAX_MADE_WIRE_ID_LEN, unique_wire_id};
    let long = "x".repeat(MAX_MADE_WIRE_ID_LEN - 1);
    let mut used = std::collections::HashSet::new();
    assert_eq!(unique_wire_id(&mut used, long.clone()), Some(long.clone()));
    assert_eq!(unique_wire_id(&mut used, long.clone()), None);
    // The provider's own id is kept however long it is; only a made one is held short.
    let longer = "y".repeat(60);
    assert_eq!(unique_wire_id(&mut used, longer.clone()), Some(longer));
    assert_eq!(
        unique_wire_id(&mut used, "short".into()),
        Some("short".into())
    );
    assert_eq!(
        unique_wire_id(&mut used, "short".into()),
        Some("short_2".into())
    );
}

#[tokio::test]
async fn a_call_with_an_empty_provider_id_goes_back_under_conduits_own() {
    let provider = ScriptedProvider::new(vec![
        vec![
            call("", "echo", json!({"text": "a"})),
            call("", "echo", json!({"text": "b"})),
            stop(StopReason::ToolUse),
        ],
        vec![text("Done."), stop(StopReason::EndTurn)],
    ]);
    let run = run(provider.clone(), vec![Arc::new(Echo(spec("echo")))]).await;
    assert_eq!(run.outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    let calls: Vec<&ToolCall> = run.history.iter().flat_map(|m| m.tool_calls()).collect();
    assert_eq!(calls.len(), 2);
    for call in &calls {
        assert_eq!(call.wire_id, None, "{call:?}");
        assert_eq!(call.wire_id(), call.id);
    }
    let results: Vec<_> = run.history.iter().flat_map(|m| m.tool_results()).collect();
    let answered: Vec<(&str, String)> = results.iter().map(|r| (r.wire_id(), r.text())).collect();
    assert_eq!(
        answered,
        [
            (calls[0].id.as_str(), "a".to_owned()),
            (calls[1].id.as_str(), "b".to_owned())
        ]
    );
}

#[tokio::test]
async fn streamed_pieces_of_calls_under_a_repeated_id_go_to_the_right_call() {
    let started = |id: &str| {
        Ok(ProviderEvent::ToolCallStarted {
            id: id.into(),
            name: "echo".into(),
        })
    };
    let delta = |id: &str, arguments: &str| {
        Ok(ProviderEvent::ToolCallDelta {
            id: id.into(),
            arguments: arguments.into(),
        })
    };
    let provider = ScriptedProvider::new(vec![
        vec![
            started("dup"),
            delta("dup", "{\"text\":\"one\"}"),
            call("dup", "echo", json!({"text": "one"})),
            started("dup"),
            delta("dup", "{\"text\":\"two\"}"),
            call("dup", "echo", json!({"text": "two"})),
            stop(StopReason::ToolUse),
        ],
        vec![text("Done."), stop(StopReason::EndTurn)],
    ]);
    let run = run(provider, vec![Arc::new(Echo(spec("echo")))]).await;
    let mut started_ids = Vec::new();
    let mut deltas = Vec::new();
    let mut ready = Vec::new();
    for event in &run.events {
        match event {
            AgentEvent::ToolCallStarted { id, .. } => started_ids.push(id.clone()),
            AgentEvent::ToolCallDelta { id, arguments } => {
                deltas.push((id.clone(), arguments.clone()))
            }
            AgentEvent::ToolCallReady { call } => {
                ready.push((call.id.clone(), call.arguments["text"].clone()))
            }
            _ => {}
        }
    }
    assert_eq!(started_ids.len(), 2);
    assert_ne!(started_ids[0], started_ids[1]);
    assert_eq!(deltas[0].0, started_ids[0]);
    assert!(deltas[0].1.contains("one"));
    assert_eq!(deltas[1].0, started_ids[1]);
    assert_eq!(ready[0], (started_ids[0].clone(), json!("one")));
    assert_eq!(ready[1], (started_ids[1].clone(), json!("two")));

    // Overlapping: the second call starts before the first is done. A piece goes to the
    // latest call started under the id; calls finish in the order they started.
    let provider = ScriptedProvider::new(vec![
        vec![
            started("dup"),
            delta("dup", "{\"text\":\"one\"}"),
            started("dup"),
            delta("dup", "{\"text\":\"two\"}"),
            call("dup", "echo", json!({"text": "one"})),
            call("dup", "echo", json!({"text": "two"})),
            stop(StopReason::ToolUse),
        ],
        vec![text("Done."), stop(StopReason::EndTurn)],
    ]);
    let overlapping = self::run(provider, vec![Arc::new(Echo(spec("echo")))]).await;
    let started_ids: Vec<String> = overlapping
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCallStarted { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect();
    let deltas: Vec<String> = overlapping
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCallDelta { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect();
    let ready: Vec<String> = overlapping
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCallReady { call } => Some(call.id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        deltas, started_ids,
        "each piece goes to the call started before it"
    );
    assert_eq!(ready, started_ids, "calls finish in the order they started");
}

#[tokio::test]
async fn two_calls_under_one_repeated_id_are_asked_and_answered_apart() {
    use crate::approval::AskApproval;

    let provider = ScriptedProvider::new(vec![
        vec![
            call("dup", "echo", json!({"text": "deny me"})),
            call("dup", "echo", json!({"text": "allow me"})),
            stop(StopReason::ToolUse),
        ],
        vec![text("Done."), stop(StopReason::EndTurn)],
    ]);
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let sink: EventSink = Arc::new(move |event| {
        let _ = sender.send(event);
    });
    let ask = AskApproval::new(sink.clone());
    let answering = ask.clone();
    let answerer = tokio::spawn(async move {
        let mut asked = Vec::new();
        while let Some(event) = receiver.recv().await {
            if let AgentEvent::ApprovalRequested { call, .. } = event {
                let approval = if call.arguments["text"] == "deny me" {
                    Approval::Deny {
                        reason: "not this one".into(),
                    }
                } else {
                    Approval::Allow
                };
                assert!(answering.answer(&call.id, approval), "{call:?}");
                asked.push(call.id);
                if asked.len() == 2 {
                    return asked;
                }
            }
        }
        asked
    });
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Echo(spec("echo"))));
    let agent = Agent::new(provider, registry, ask.clone(), AgentOptions::new("m"));
    let mut history = vec![Message::user_text("hi")];
    // Bounded: with ids that collide, one question would never come (or be answered).
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        agent.run(&mut history, sink, CancellationToken::new()),
    )
    .await
    .expect("both calls were asked about and answered");
    assert_eq!(outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    let asked = tokio::time::timeout(Duration::from_secs(10), answerer)
        .await
        .expect("both questions came")
        .unwrap();
    assert_ne!(asked[0], asked[1], "each question names its own call");
    let results: Vec<(bool, String)> = history[2]
        .tool_results()
        .map(|r| (r.is_error, r.text()))
        .collect();
    assert!(
        results[0].0 && results[0].1.contains("not this one"),
        "{results:?}"
    );
    assert_eq!(results[1], (false, "allow me".to_owned()));
}

#[tokio::test]
async fn a_response_with_too_many_tool_calls_fails_the_turn_and_runs_none() {
    let mut events: Vec<_> = (0..1000)
        .map(|i| call(&format!("c{i}"), "echo", json!({"text": "x"})))
        .collect();
    events.push(stop(StopReason::ToolUse));
    let provider = ScriptedProvider::new(vec![events]);
    let run = run(provider, vec![Arc::new(Echo(spec("echo")))]).await;
    let err = run.outcome.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Protocol);
    assert!(
        err.message
            .contains(&format!("more than {MAX_RESPONSE_CALLS} tool calls")),
        "{}",
        err.message
    );
    assert!(
        !run.events
            .iter()
            .any(|e| matches!(e, AgentEvent::ToolCallRunning { .. })),
        "no call ran"
    );
    // The calls kept from the partial answer are each answered, so the history stays valid.
    let results = results_of(&run.history[2]);
    assert_eq!(results.len(), MAX_RESPONSE_CALLS + 1);
    assert!(results.iter().all(|r| r.1));
}

#[tokio::test]
async fn a_response_past_the_byte_cap_fails_the_turn() {
    // 33 deltas of 1 MiB: the cap is reached without a 32 MiB allocation in the script.
    let piece = "x".repeat(1024 * 1024);
    let mut events: Vec<_> = (0..(MAX_RESPONSE_BYTES / piece.len() + 1))
        .map(|_| text(&piece))
        .collect();
    events.push(stop(StopReason::EndTurn));
    let provider = ScriptedProvider::new(vec![events]);
    let run = run(provider, vec![]).await;
    let err = run.outcome.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Protocol);
    assert!(
        err.message.contains("larger than 32 MiB"),
        "{}",
        err.message
    );
}

/// Whether `events`, counted in order, pass one of a response's limits.
fn over_limit_after(events: &[ProviderEvent]) -> Option<String> {
    let mut size = ResponseSize::default();
    for event in events {
        size.count(event);
    }
    size.over_limit().map(|err| err.message)
}

#[test]
fn reasoning_a_provider_hands_back_counts_against_the_response() {
    let blob = "s".repeat(MAX_RESPONSE_BYTES / 3 + 1);
    let done = |field: usize| ProviderEvent::ReasoningDone {
        signature: (field == 0).then(|| blob.clone()),
        encrypted: (field == 1).then(|| blob.clone()),
        id: (field == 2).then(|| blob.clone()),
    };
    assert_eq!(over_limit_after(&[done(0), done(1)]), None);
    let message = over_limit_after(&[done(0), done(1), done(2)]).unwrap();
    assert!(message.contains("larger than 32 MiB"), "{message}");
}

#[test]
fn whole_arguments_count_beyond_what_their_call_streamed() {
    let started = |id: &str| ProviderEvent::ToolCallStarted {
        id: id.into(),
        name: "echo".into(),
    };
    let whole = json!({"text": "x".repeat(MAX_RESPONSE_BYTES / 2)});
    let done = |id: &str| ProviderEvent::ToolCallDone {
        id: id.into(),
        name: "echo".into(),
        arguments: Ok(whole.clone()),
        signature: None,
    };
    // One call streams a piece; the next two arrive whole: they count in full.
    let events = [
        started("a"),
        ProviderEvent::ToolCallDelta {
            id: "a".into(),
            arguments: "{}".into(),
        },
        started("b"),
        done("b"),
        started("c"),
        done("c"),
    ];
    let message = over_limit_after(&events).unwrap();
    assert!(message.contains("larger than 32 MiB"), "{message}");
    // A call whose pieces streamed is not counted twice when it finishes.
    let streamed = serde_json::to_string(&whole).unwrap();
    let events = [
        started("a"),
        ProviderEvent::ToolCallDelta {
            id: "a".into(),
            arguments: streamed,
        },
        done("a"),
    ];
    assert_eq!(over_limit_after(&events), None);
}

#[test]
fn arguments_of_too_many_values_fail_the_response() {
    let call = |id: &str, values: usize| ProviderEvent::ToolCallDone {
        id: id.into(),
        name: "echo".into(),
        arguments: Ok(json!({ "points": vec![0; values] })),
        signature: None,
    };
    // The object, its array and the array's elements.
    assert_eq!(
        over_limit_after(&[
            call("a", MAX_RESPONSE_VALUES / 2),
            call("b", MAX_RESPONSE_VALUES / 2 - 4)
        ]),
        None
    );
    let message = over_limit_after(&[
        call("a", MAX_RESPONSE_VALUES / 2),
        call("b", MAX_RESPONSE_VALUES / 2 - 3),
    ])
    .unwrap();
    assert!(
        message.contains(&format!("more than {MAX_RESPONSE_VALUES} JSON values")),
        "{message}"
    );
}

/// A call's id and tool name are kept and sent back like its arguments: they count
/// against the response, and one longer than a label can be fails it.
#[test]
fn call_ids_and_names_count_and_a_huge_one_fails_the_response() {
    let started = |id: String, name: String| ProviderEvent::ToolCallStarted { id, name };
    let message =
        over_limit_after(&[started("a".into(), "n".repeat(MAX_CALL_LABEL_BYTES + 1))]).unwrap();
    assert!(message.contains("longer than 1024 bytes"), "{message}");
    let message = over_limit_after(&[ProviderEvent::ToolCallDone {
        id: "i".repeat(MAX_CALL_LABEL_BYTES + 1),
        name: "echo".into(),
        arguments: Ok(json!({})),
        signature: None,
    }])
    .unwrap();
    assert!(message.contains("longer than 1024 bytes"), "{message}");
    assert_eq!(
        over_limit_after(&[started(
            "i".repeat(MAX_CALL_LABEL_BYTES),
            "n".repeat(MAX_CALL_LABEL_BYTES)
        )]),
        None
    );
    // Within the label cap, ids and names still add up against the response's bytes.
    let text = ProviderEvent::TextDelta("t".repeat(MAX_RESPONSE_BYTES - 100));
    assert_eq!(over_limit_after(std::slice::from_ref(&text)), None);
    let message = over_limit_after(&[text, started("i".repeat(60), "n".repeat(60))]).unwrap();
    assert!(message.contains("larger than 32 MiB"), "{message}");
}

/// Counts the calls inside it at once, and the most there ever were.
struct InFlight {
    spec: ToolSpec,
    now: Arc<std::sync::atomic::AtomicUsize>,
    most: Arc<std::sync::atomic::AtomicUsize>,
}

#[async_trait]
impl Tool for InFlight {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, arguments: Value, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        use std::sync::atomic::Ordering;
        let inside = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(inside, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        Ok(ToolOutput::text(format!("ran {}", arguments["n"])))
    }
}

/// Allows a call only once `n` calls are being decided at once: passes only when every
/// approval question is up together.
struct AllowTogether(Arc<Barrier>);

#[async_trait]
impl Approver for AllowTogether {
    async fn decide(&self, _call: &ToolCall, _spec: &ToolSpec) -> Approval {
        self.0.wait().await;
        Approval::Allow
    }
}

fn many_calls(n: usize, name: &str) -> Arc<ScriptedProvider> {
    let mut first: Vec<_> = (0..n)
        .map(|i| call(&format!("c{i}"), name, json!({"n": i})))
        .collect();
    first.push(stop(StopReason::ToolUse));
    ScriptedProvider::new(vec![first, vec![text("Done."), stop(StopReason::EndTurn)]])
}

#[tokio::test]
async fn every_call_is_asked_at_once_but_at_most_eight_run_at_once() {
    let calls = 20;
    let now = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(InFlight {
        spec: spec("count"),
        now: now.clone(),
        most: most.clone(),
    }));
    let agent = Agent::new(
        many_calls(calls, "count"),
        registry,
        Arc::new(AllowTogether(Arc::new(Barrier::new(calls)))),
        AgentOptions::new("m"),
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = seen.clone();
    let sink: EventSink = Arc::new(move |event| sink_seen.lock().unwrap().push(event));
    let mut history = vec![Message::user_text("hello")];
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        agent.run(&mut history, sink, CancellationToken::new()),
    )
    .await
    .expect("every approval question was up at once");
    assert_eq!(outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    assert_eq!(
        most.load(std::sync::atomic::Ordering::SeqCst),
        MAX_RUNNING_TOOL_CALLS
    );
    let results = results_of(&history[2]);
    assert_eq!(results.len(), calls);
    for (i, (wire_id, failed, text)) in results.iter().enumerate() {
        assert_eq!(
            (wire_id.as_str(), *failed),
            (format!("c{i}").as_str(), false)
        );
        assert_eq!(text, &format!("ran {i}"));
    }
    let events = seen.lock().unwrap().clone();
    let queued = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ToolCallQueued { .. }))
        .count();
    let running = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ToolCallRunning { .. }))
        .count();
    assert_eq!((queued, running), (calls - MAX_RUNNING_TOOL_CALLS, calls));
}

#[tokio::test]
async fn a_stop_ends_the_running_calls_and_the_waiting_ones_never_start() {
    let calls = MAX_RUNNING_TOOL_CALLS + 3;
    let cancel = CancellationToken::new();
    let stopper = cancel.clone();
    let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = running.clone();
    let queued = std::sync::atomic::AtomicUsize::new(0);
    // The stop comes once every call is running or waiting for a place.
    let sink: EventSink = Arc::new(move |event| match event {
        AgentEvent::ToolCallRunning { .. } => {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        AgentEvent::ToolCallQueued { .. }
            if queued.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == 3 =>
        {
            stopper.cancel();
        }
        _ => {}
    });
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Hang(spec("hang"))));
    let agent = Agent::new(
        many_calls(calls, "hang"),
        registry,
        Arc::new(FixedApproval(Approval::Allow)),
        AgentOptions::new("m"),
    );
    let mut history = vec![Message::user_text("hello")];
    let outcome = agent.run(&mut history, sink, cancel).await;
    assert_eq!(outcome, Ok(Outcome::Cancelled));
    let results = results_of(&history[2]);
    assert_eq!(results.len(), calls);
    let stopped_running = results
        .iter()
        .filter(|r| r.1 && r.2.contains("while the tool was running"))
        .count();
    let never_started = results
        .iter()
        .filter(|r| r.1 && r.2.contains("before the call started"))
        .count();
    assert_eq!(
        (stopped_running, never_started),
        (MAX_RUNNING_TOOL_CALLS, 3),
        "{results:?}"
    );
    assert_eq!(
        running.load(std::sync::atomic::Ordering::SeqCst),
        MAX_RUNNING_TOOL_CALLS
    );
}

/// Waits for the stop, then takes a moment to end its work (as an MCP tool sends its
/// server `notifications/cancelled`), and notes that it did; or sleeps `takes` and
/// answers, when it keeps its own time.
struct EndsItsWork {
    spec: ToolSpec,
    ended: Arc<std::sync::atomic::AtomicBool>,
    own_time: Option<Duration>,
}

#[async_trait]
impl Tool for EndsItsWork {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn keeps_its_own_time(&self) -> bool {
        self.own_time.is_some()
    }
    async fn call(&self, _arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        if let Some(takes) = self.own_time {
            tokio::time::sleep(takes).await;
            return Ok(ToolOutput::text("done in its own time"));
        }
        context.cancel.cancelled().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.ended.store(true, std::sync::atomic::Ordering::SeqCst);
        Err(ToolError("cancelled".into()))
    }
}

/// Before, a stop dropped the running call at once: an MCP tool never told its server,
/// whose work went on.
#[tokio::test]
async fn a_stopped_or_timed_out_tool_ends_its_work_before_it_is_dropped() {
    for stopped in [true, false] {
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tool = Arc::new(EndsItsWork {
            spec: spec("work"),
            ended: ended.clone(),
            own_time: None,
        });
        let provider = ScriptedProvider::new(vec![
            vec![call("c1", "work", json!({})), stop(StopReason::ToolUse)],
            vec![text("Over."), stop(StopReason::EndTurn)],
        ]);
        let cancel = CancellationToken::new();
        let stopper = cancel.clone();
        let mut options = AgentOptions::new("m");
        if stopped {
            let mut registry = ToolRegistry::new();
            registry.register(tool);
            let agent = Agent::new(
                provider,
                registry,
                Arc::new(FixedApproval(Approval::Allow)),
                options,
            );
            let sink: EventSink = Arc::new(move |event| {
                if matches!(event, AgentEvent::ToolCallRunning { .. }) {
                    stopper.cancel();
                }
            });
            let mut history = vec![Message::user_text("hello")];
            let outcome = agent.run(&mut history, sink, cancel).await;
            assert_eq!(outcome, Ok(Outcome::Cancelled));
        } else {
            options.tool_timeout = Duration::from_millis(50);
            let run = run_with(provider, vec![tool], Approval::Allow, options, cancel).await;
            assert!(
                results_of(&run.history[2])[0].2.contains("did not finish"),
                "{:?}",
                run.history
            );
        }
        assert!(
            ended.load(std::sync::atomic::Ordering::SeqCst),
            "stopped: {stopped}: the tool was dropped before it could end its work"
        );
    }
}

/// An MCP tool's time is its server's timeout, restarted by progress: the agent's own
/// limit does not cut it.
#[tokio::test]
async fn a_tool_that_keeps_its_own_time_is_not_cut_at_the_agents_limit() {
    let provider = ScriptedProvider::new(vec![
        vec![call("c1", "slow", json!({})), stop(StopReason::ToolUse)],
        vec![text("Done."), stop(StopReason::EndTurn)],
    ]);
    let mut options = AgentOptions::new("m");
    options.tool_timeout = Duration::from_millis(20);
    let tool = Arc::new(EndsItsWork {
        spec: spec("slow"),
        ended: Arc::default(),
        own_time: Some(Duration::from_millis(200)),
    });
    let run = run_with(
        provider,
        vec![tool],
        Approval::Allow,
        options,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        results_of(&run.history[2]),
        [("c1".into(), false, "done in its own time".into())]
    );
}

/// Reports what the approver answers when asked again from inside the call.
struct AsksAgain(ToolSpec);

#[async_trait]
impl Tool for AsksAgain {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        match context.still_allowed() {
            Ok(()) => Ok(ToolOutput::text("still allowed")),
            Err(why) => Err(ToolError(why)),
        }
    }
}

/// Allows every call, and its check just before it starts; then refuses it when it is
/// asked about again (from inside the call), noting every question.
#[derive(Default)]
struct TakesItBack(Mutex<Vec<(String, String)>>);

#[async_trait]
impl Approver for TakesItBack {
    async fn decide(&self, _call: &ToolCall, _spec: &ToolSpec) -> Approval {
        Approval::Allow
    }
    fn still_allowed(&self, call_id: &str, exposed_name: &str) -> Result<(), String> {
        let mut asked = self.0.lock().unwrap();
        let again = asked.iter().any(|(id, _)| id == call_id);
        asked.push((call_id.to_owned(), exposed_name.to_owned()));
        if again {
            Err("taken back while it waited".into())
        } else {
            Ok(())
        }
    }
}

/// A tool that waits before it sends its call (an MCP server connecting again) asks the
/// turn's approver again, about its own call by Conduit's id, not the provider's.
#[tokio::test]
async fn a_call_asks_the_turns_approver_again_about_itself() {
    let provider = ScriptedProvider::new(vec![
        vec![call("c1", "again", json!({})), stop(StopReason::ToolUse)],
        vec![text("Understood."), stop(StopReason::EndTurn)],
    ]);
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(AsksAgain(spec("again"))));
    let approver = Arc::new(TakesItBack::default());
    let agent = Agent::new(provider, registry, approver.clone(), AgentOptions::new("m"));
    let Run {
        outcome,
        history,
        events,
    } = run_agent(&agent).await;
    assert_eq!(outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    let results = results_of(&history[2]);
    assert!(
        results[0].1 && results[0].2.contains("taken back while it waited"),
        "{results:?}"
    );
    let running: Vec<String> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallRunning { id } => Some(id.clone()),
            _ => None,
        })
        .collect();
    // Before it started, and from inside it.
    assert_eq!(
        *approver.0.lock().unwrap(),
        [
            (running[0].clone(), "again".to_owned()),
            (running[0].clone(), "again".to_owned())
        ]
    );
    assert_ne!(running[0], "c1", "Conduit's own id, not the provider's");
}

/// Every call is asked about again just before it starts, by Conduit's own id: Settings
/// may have changed while its question stood open or it waited for a free place (a tool
/// set to Never run or switched off meanwhile does not run); the calls that waited, after
/// their wait.
#[tokio::test]
async fn every_call_is_asked_about_again_just_before_it_starts() {
    let calls = 10;
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(InFlight {
        spec: spec("count"),
        now: Arc::default(),
        most: Arc::default(),
    }));
    let approver = Arc::new(TakesItBack::default());
    let agent = Agent::new(
        many_calls(calls, "count"),
        registry,
        approver.clone(),
        AgentOptions::new("m"),
    );
    let Run {
        outcome,
        history,
        events,
    } = run_agent(&agent).await;
    assert_eq!(outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    let results = results_of(&history[2]);
    assert!(results.iter().all(|(_, error, _)| !*error), "{results:?}");
    let ids = |wanted: fn(&AgentEvent) -> Option<&String>| -> Vec<String> {
        events.iter().filter_map(wanted).cloned().collect()
    };
    let queued = ids(|event| match event {
        AgentEvent::ToolCallQueued { id } => Some(id),
        _ => None,
    });
    let mut running = ids(|event| match event {
        AgentEvent::ToolCallRunning { id } => Some(id),
        _ => None,
    });
    assert_eq!(queued.len(), calls - 8);
    assert_eq!(running.len(), calls);
    let mut asked: Vec<String> = approver
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(id, _)| id.clone())
        .collect();
    asked.sort();
    running.sort();
    assert_eq!(asked, running, "each call once, by its own id");
}

/// A call refused when it is asked about again just before it starts never runs: it
/// ends as a call that could not run, not as the user's denial.
#[tokio::test]
async fn a_call_refused_just_before_it_starts_never_runs() {
    struct Revoked;
    #[async_trait]
    impl Approver for Revoked {
        async fn decide(&self, _call: &ToolCall, _spec: &ToolSpec) -> Approval {
            Approval::Allow
        }
        fn still_allowed(&self, _call_id: &str, _exposed_name: &str) -> Result<(), String> {
            Err("it was set to Never run while its question stood open".into())
        }
    }
    let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(InFlight {
        spec: spec("count"),
        now: Arc::default(),
        most: most.clone(),
    }));
    let agent = Agent::new(
        many_calls(3, "count"),
        registry,
        Arc::new(Revoked),
        AgentOptions::new("m"),
    );
    let Run {
        history, events, ..
    } = run_agent(&agent).await;
    let results = results_of(&history[2]);
    assert!(
        results
            .iter()
            .all(|(_, error, text)| *error && text.contains("not run: it was set to Never run")),
        "{results:?}"
    );
    assert_eq!(
        most.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "none ran"
    );
    assert!(
        !events
            .iter()
            .any(|event| matches!(event, AgentEvent::ToolCallRunning { .. }))
    );
}

/// The user's Stop and an allow come at the same moment (an "Always allow" answers at
/// once; a click on Allow as Stop is pressed): the call never starts, so nothing reaches
/// the server. Before, either could win, and the grace a running call gets to end its
/// work was the call's first poll: the server got the call, then its cancel.
#[tokio::test]
async fn a_stop_that_comes_with_the_allow_starts_nothing() {
    struct StopsAsItAllows(CancellationToken);
    #[async_trait]
    impl Approver for StopsAsItAllows {
        async fn decide(&self, _call: &ToolCall, _spec: &ToolSpec) -> Approval {
            self.0.cancel();
            Approval::Allow
        }
    }
    for _ in 0..50 {
        let cancel = CancellationToken::new();
        let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(InFlight {
            spec: spec("count"),
            now: Arc::default(),
            most: ran.clone(),
        }));
        let agent = Agent::new(
            many_calls(3, "count"),
            registry,
            Arc::new(StopsAsItAllows(cancel.clone())),
            AgentOptions::new("m"),
        );
        let mut history = vec![Message::user_text("hello")];
        let outcome = agent.run(&mut history, Arc::new(|_| {}), cancel).await;
        assert_eq!(outcome, Ok(Outcome::Cancelled));
        assert_eq!(
            ran.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "a call ran"
        );
    }
}

/// An answer whose end streams in as the user stops: its calls are answered as
/// interrupted, and none starts.
#[tokio::test]
async fn calls_of_an_answer_ending_as_the_user_stops_never_start() {
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(InFlight {
        spec: spec("count"),
        now: Arc::default(),
        most: ran.clone(),
    }));
    let agent = Agent::new(
        many_calls(2, "count"),
        registry,
        Arc::new(FixedApproval(Approval::Allow)),
        AgentOptions::new("m"),
    );
    // The stop comes as the answer is complete, before its calls start.
    let cancel = CancellationToken::new();
    let stopper = cancel.clone();
    let sink: EventSink = Arc::new(move |event| {
        if matches!(event, AgentEvent::MessageDone { .. }) {
            stopper.cancel();
        }
    });
    let mut history = vec![Message::user_text("hello")];
    let outcome = agent.run(&mut history, sink, cancel).await;
    assert_eq!(outcome, Ok(Outcome::Cancelled));
    assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 0);
    let results = results_of(&history[2]);
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|(_, error, _)| *error), "{results:?}");
}

/// A model whose context holds `limit` bytes of messages: a longer request is refused as
/// the services refuse it (before any answer streams), a shorter one is answered by the
/// script. Records each request's size.
struct SmallContext {
    limit: usize,
    inner: Arc<ScriptedProvider>,
    sizes: Mutex<Vec<usize>>,
}

#[async_trait]
impl Provider for SmallContext {
    fn protocol(&self) -> &'static str {
        "scripted"
    }

    async fn stream(
        &self,
        request: ModelRequest,
    ) -> Result<crate::provider::EventStream, ProviderError> {
        let size = serde_json::to_string(&request.messages).unwrap().len();
        self.sizes.lock().unwrap().push(size);
        if size > self.limit {
            return Err(ProviderError {
                kind: ProviderErrorKind::ContextTooLong,
                status: Some(400),
                message: format!("prompt is too long: {size} > {} maximum", self.limit),
                retry_after: None,
            });
        }
        self.inner.stream(request).await
    }

    async fn list_models(&self) -> Result<Vec<crate::provider::ModelInfo>, ProviderError> {
        Ok(vec![])
    }
}

/// Earlier in the conversation a tool returned a 60 KB log; now the user asks again.
fn long_conversation() -> Vec<Message> {
    vec![
        Message::user_text("Read the build log"),
        Message {
            role: Role::Assistant,
            blocks: vec![Block::ToolCall(ToolCall {
                id: "c0".into(),
                name: "echo".into(),
                arguments: json!({}),
                signature: None,
                invalid_arguments: None,
                wire_id: None,
                origin: None,
            })],
        },
        Message {
            role: Role::Tool,
            blocks: vec![Block::ToolResult(ToolResult {
                call_id: "c0".into(),
                wire_id: None,
                name: "echo".into(),
                is_error: false,
                parts: vec![crate::content::ResultPart::Text {
                    text: "ERROR disk full on /var\n".repeat(2_500),
                }],
            })],
        },
        Message {
            role: Role::Assistant,
            blocks: vec![Block::text("The disk was full.")],
        },
        Message::user_text("Check the disk again"),
    ]
}

async fn run_in_small_context(limit: usize, scripts: Vec<Script>) -> (Run, Vec<usize>) {
    let provider = Arc::new(SmallContext {
        limit,
        inner: ScriptedProvider::new(scripts),
        sizes: Mutex::new(Vec::new()),
    });
    let mut registry = ToolRegistry::new();
    registry.register(Echo::named("echo"));
    let agent = Agent::new(
        provider.clone(),
        registry,
        Arc::new(FixedApproval(Approval::Allow)),
        AgentOptions::new("m"),
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = seen.clone();
    let sink: EventSink = Arc::new(move |event| sink_seen.lock().unwrap().push(event));
    let mut history = long_conversation();
    let outcome = agent
        .run(&mut history, sink, CancellationToken::new())
        .await;
    let events = seen.lock().unwrap().clone();
    let sizes = provider.sizes.lock().unwrap().clone();
    (
        Run {
            outcome,
            history,
            events,
        },
        sizes,
    )
}

fn shortenings(events: &[AgentEvent]) -> Vec<ContextFit> {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ContextShortened { fit } => Some(*fit),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_conversation_longer_than_the_context_is_sent_shorter_and_kept_whole() {
    let (run, sizes) = run_in_small_context(
        20_000,
        vec![
            vec![
                call("c1", "echo", json!({"df": "-h"})),
                stop(StopReason::ToolUse),
            ],
            vec![text("42 GB free now."), stop(StopReason::EndTurn)],
        ],
    )
    .await;
    assert_eq!(run.outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    // Refused whole, answered with the older output cut; the turn's next request starts
    // there instead of being refused again.
    assert_eq!(sizes.len(), 3, "{sizes:?}");
    assert!(
        sizes[0] > 60_000 && sizes[1] < 20_000 && sizes[2] < 20_000,
        "{sizes:?}"
    );
    assert_eq!(shortenings(&run.events), [ContextFit::OlderOutputsCut]);
    // What is kept (and saved) is the whole conversation with the new answer.
    assert_eq!(run.history[..5], long_conversation()[..]);
    assert_eq!(run.history.last().unwrap().text(), "42 GB free now.");
}

#[tokio::test]
async fn a_turn_too_long_even_alone_fails_saying_so_after_each_shorter_try() {
    let (run, sizes) = run_in_small_context(40, vec![]).await;
    let error = run.outcome.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::ContextTooLong);
    assert!(
        error
            .to_string()
            .contains("the conversation is longer than the model's context"),
        "{error}"
    );
    assert_eq!(
        shortenings(&run.events),
        [
            ContextFit::OlderOutputsCut,
            ContextFit::OlderOutputsLeftOut,
            ContextFit::LastMessageOnly
        ]
    );
    assert_eq!(sizes.len(), 4);
    assert!(sizes.windows(2).all(|pair| pair[1] < pair[0]), "{sizes:?}");
    assert_eq!(run.history, long_conversation());
}

fn too_long() -> ProviderError {
    ProviderError {
        kind: ProviderErrorKind::ContextTooLong,
        status: Some(400),
        message: "prompt is too long: 208310 tokens > 200000 maximum".into(),
        retry_after: None,
    }
}

/// The refusal as the stream's first item (after a retry and a usage count, as the HTTP
/// layer yields it) is asked again shorter; after the answer's content began, it is not.
#[tokio::test]
async fn a_refusal_in_the_stream_before_any_content_is_asked_again_shorter() {
    let busy = ProviderError::new(ProviderErrorKind::Overloaded, "busy");
    let provider = ScriptedProvider::new(vec![
        vec![
            Ok(ProviderEvent::Retrying {
                attempt: 1,
                delay: Duration::ZERO,
                error: busy,
            }),
            Ok(ProviderEvent::Usage(Usage::default())),
            Err(too_long()),
        ],
        vec![text("Shorter worked."), stop(StopReason::EndTurn)],
        vec![text("Partly"), Err(too_long())],
    ]);
    let agent = Agent::new(
        provider.clone(),
        ToolRegistry::new(),
        Arc::new(FixedApproval(Approval::Allow)),
        AgentOptions::new("m"),
    );
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let sink: EventSink = Arc::new(move |event| seen.lock().unwrap().push(event));
    let mut history = long_conversation();
    let outcome = agent
        .run(&mut history, sink.clone(), CancellationToken::new())
        .await;
    assert_eq!(outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
    assert_eq!(
        shortenings(&events.lock().unwrap()),
        [ContextFit::OlderOutputsCut]
    );
    let sizes: Vec<usize> = provider
        .requests()
        .iter()
        .map(|r| serde_json::to_string(&r.messages).unwrap().len())
        .collect();
    assert!(sizes[0] > 60_000 && sizes[1] < 10_000, "{sizes:?}");

    // The next message: the answer began, so the refusal ends it (kept as it was).
    events.lock().unwrap().clear();
    history.push(Message::user_text("And now?"));
    let outcome = agent
        .run(&mut history, sink, CancellationToken::new())
        .await;
    assert_eq!(outcome.unwrap_err().kind, ProviderErrorKind::ContextTooLong);
    assert!(shortenings(&events.lock().unwrap()).is_empty());
    assert_eq!(provider.requests().len(), 3);
}

/// A request refused for its thinking while it asked the model to think names the
/// Thinking picked; one that asked for none, or refused for another reason, is told as
/// the provider put it.
#[tokio::test]
async fn a_refusal_of_a_request_asking_to_think_names_the_thinking() {
    let refused = || {
        vec![Err(ProviderError {
            kind: ProviderErrorKind::InvalidRequest,
            status: Some(400),
            message: "Unsupported parameter: 'reasoning_effort'".into(),
            retry_after: None,
        })]
    };
    for reasoning in [Some(crate::provider::ReasoningEffort::High), None] {
        let mut options = AgentOptions::new("m");
        options.reasoning = reasoning;
        let run = run_with(
            ScriptedProvider::new(vec![refused()]),
            vec![],
            Approval::Allow,
            options,
            CancellationToken::new(),
        )
        .await;
        let message = run.outcome.unwrap_err().message;
        assert_eq!(
            message.contains("the message asked the model to think (high)"),
            reasoning.is_some(),
            "{message}"
        );
        assert!(message.starts_with("Unsupported parameter"), "{message}");
    }
    let mut options = AgentOptions::new("m");
    options.reasoning = Some(crate::provider::ReasoningEffort::Low);
    let other = vec![Err(ProviderError {
        kind: ProviderErrorKind::InvalidRequest,
        status: Some(400),
        message: "tools.0.input_schema: JSON schema is invalid".into(),
        retry_after: None,
    })];
    let run = run_with(
        ScriptedProvider::new(vec![other]),
        vec![],
        Approval::Allow,
        options,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        run.outcome.unwrap_err().message,
        "tools.0.input_schema: JSON schema is invalid"
    );
}
