//! Saves a chat as it happens: the user's message first, then each block of the answer
//! as it completes, each tool message whole, which server each call ran on, and how the
//! run ended.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use conduit_core::agent::{AgentEvent, EventSink};
use conduit_core::content::Role;
use conduit_core::provider::Usage;
use conduit_store::{MessageStatus, Store, StoreError};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct State {
    /// The assistant message being written, and how many of its blocks are saved.
    streaming: Option<(i64, usize)>,
    /// The last assistant message, to mark how the run ended.
    last_assistant: Option<i64>,
    usage: Option<Usage>,
    /// The first write that failed; the run is stopped when it happens.
    failure: Option<StoreError>,
    /// The MCP server of each complete call (by Conduit's id) until it runs.
    ready: HashMap<String, String>,
}

/// An event sink that writes to the store, then passes every event on.
pub struct Recorder {
    store: Arc<Store>,
    conversation: String,
    state: Mutex<State>,
    stop_run: CancellationToken,
    /// The fingerprint of what ran as each MCP server whose tools the run was given
    /// (`approval::print_of_running`), saved with each call that runs: a call's view opens
    /// only while that server still runs under its name.
    server_prints: HashMap<String, String>,
}

impl Recorder {
    pub fn new(
        store: Arc<Store>,
        conversation: String,
        stop_run: CancellationToken,
        server_prints: HashMap<String, String>,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            conversation,
            state: Mutex::new(State::default()),
            stop_run,
            server_prints,
        })
    }

    /// A sink that records, then forwards to `next`.
    pub fn sink(self: &Arc<Self>, next: EventSink) -> EventSink {
        let recorder = self.clone();
        Arc::new(move |event| {
            recorder.record(&event);
            next(event);
        })
    }

    fn record(&self, event: &AgentEvent) {
        let mut state = self.state.lock();
        if state.failure.is_some() {
            return;
        }
        if let Err(err) = self.write(&mut state, event) {
            tracing::error!(error = %err, "saving the conversation failed; stopping the run");
            state.failure = Some(err);
            self.stop_run.cancel();
        }
    }

    fn write(&self, state: &mut State, event: &AgentEvent) -> Result<(), StoreError> {
        match event {
            AgentEvent::TurnStarted { .. } => {
                let id = self.store.begin_message(
                    &self.conversation,
                    Role::Assistant,
                    MessageStatus::Streaming,
                )?;
                state.streaming = Some((id, 0));
                state.last_assistant = Some(id);
                state.usage = None;
            }
            AgentEvent::BlockDone { block, .. } => {
                if let Some((id, saved)) = state.streaming.as_mut() {
                    self.store.append_block(*id, block)?;
                    *saved += 1;
                }
            }
            AgentEvent::Usage { usage } => state.usage = Some(*usage),
            AgentEvent::MessageDone { message } if message.role == Role::Assistant => {
                if let Some((id, saved)) = state.streaming.take() {
                    for block in message.blocks.iter().skip(saved) {
                        self.store.append_block(id, block)?;
                    }
                    self.store
                        .finish_message(id, MessageStatus::Complete, state.usage, None)?;
                }
            }
            AgentEvent::MessageDone { message } => {
                self.store
                    .add_message(&self.conversation, message, MessageStatus::Complete)?;
            }
            AgentEvent::Cancelled => {
                let id = state
                    .streaming
                    .take()
                    .map(|(id, _)| id)
                    .or(state.last_assistant);
                if let Some(id) = id {
                    self.store
                        .finish_message(id, MessageStatus::Interrupted, state.usage, None)?;
                }
            }
            AgentEvent::ToolCallReady { call } => {
                if let Some(origin) = &call.origin {
                    state.ready.insert(call.id.clone(), origin.server.clone());
                }
            }
            AgentEvent::ToolCallRunning { id } => {
                if let Some(server) = state.ready.remove(id) {
                    // Empty (matching no server) for one the run was not given.
                    let print = self.server_prints.get(&server).map_or("", String::as_str);
                    self.store
                        .record_call_server(&self.conversation, id, print)?;
                }
            }
            AgentEvent::ToolCallDenied { id, .. } => {
                state.ready.remove(id);
            }
            _ => {}
        }
        Ok(())
    }

    /// Marks the answer in flight as failed with `error`.
    pub fn failed(&self, error: &str) -> Result<(), StoreError> {
        let mut state = self.state.lock();
        let id = state
            .streaming
            .take()
            .map(|(id, _)| id)
            .or(state.last_assistant);
        match id {
            Some(id) => {
                self.store
                    .finish_message(id, MessageStatus::Error, state.usage, Some(error))
            }
            None => Ok(()),
        }
    }

    /// After a failed write: marks the answer still being written, if one is, as failed
    /// with `error` (never an earlier one, saved complete).
    pub fn failed_in_flight(&self, error: &str) -> Result<(), StoreError> {
        let streaming = self.state.lock().streaming.take();
        match streaming {
            Some((id, _)) => self
                .store
                .finish_message(id, MessageStatus::Error, None, Some(error)),
            None => Ok(()),
        }
    }

    /// The write that failed, if one did.
    pub fn take_failure(&self) -> Option<StoreError> {
        self.state.lock().failure.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conduit_core::content::{Block, Message};
    use conduit_store::FileMediaStore;

    fn store(dir: &std::path::Path) -> Arc<Store> {
        Arc::new(Store::open(&dir.join("h.db"), FileMediaStore::new(dir.join("m"))).unwrap())
    }

    #[test]
    fn a_full_disk_stops_the_run_with_a_clear_error_and_keeps_what_was_saved() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let id = store.create_conversation(None, None).unwrap();
        store
            .add_message(&id, &Message::user_text("first"), MessageStatus::Complete)
            .unwrap();
        let stop = CancellationToken::new();
        let recorder = Recorder::new(store.clone(), id.clone(), stop.clone(), HashMap::new());
        let seen = Arc::new(Mutex::new(0));
        let counter = seen.clone();
        let sink = recorder.sink(Arc::new(move |_| *counter.lock() += 1));
        sink(AgentEvent::TurnStarted { turn: 1 });
        sink(AgentEvent::BlockDone {
            index: 0,
            block: Block::text("a short block"),
        });
        // SQLite cannot shrink the cap below the file's size: this caps it where it is,
        // so the next large block cannot fit.
        store.limit_pages(1).unwrap();
        sink(AgentEvent::BlockDone {
            index: 1,
            block: Block::text("x".repeat(500_000)),
        });
        assert!(stop.is_cancelled(), "the run is stopped");
        let failure = recorder.take_failure().unwrap();
        assert!(failure.to_string().contains("disk is full"), "{failure}");
        assert_eq!(*seen.lock(), 3, "events still reach the frontend");
        let messages = store.messages(&id, None).unwrap();
        assert_eq!(messages[0].blocks, [Block::text("first")]);
        assert_eq!(messages[1].blocks, [Block::text("a short block")]);
        // Marked as failed once more (what the turn does): not left "streaming". The cap
        // is lifted as the user frees space.
        store.limit_pages(1_000_000).unwrap();
        recorder
            .failed_in_flight(&format!("saving the answer failed: {failure}"))
            .unwrap();
        let messages = store.messages(&id, None).unwrap();
        assert_eq!(messages[1].status, MessageStatus::Error);
    }

    /// A tool message that does not fit leaves the answer before it complete (it was), and
    /// itself interrupted, not "streaming".
    #[test]
    fn a_tool_message_that_cannot_be_saved_marks_nothing_saved_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let id = store.create_conversation(None, None).unwrap();
        let stop = CancellationToken::new();
        let recorder = Recorder::new(store.clone(), id.clone(), stop, HashMap::new());
        let sink = recorder.sink(Arc::new(|_| {}));
        sink(AgentEvent::TurnStarted { turn: 1 });
        sink(AgentEvent::MessageDone {
            message: Message {
                role: Role::Assistant,
                blocks: vec![Block::text("I will look it up.")],
            },
        });
        store.limit_pages(1).unwrap();
        sink(AgentEvent::MessageDone {
            message: Message {
                role: Role::Tool,
                blocks: vec![Block::text("x".repeat(500_000))],
            },
        });
        let failure = recorder.take_failure().unwrap();
        store.limit_pages(1_000_000).unwrap();
        recorder
            .failed_in_flight(&format!("saving the answer failed: {failure}"))
            .unwrap();
        let messages = store.messages(&id, None).unwrap();
        assert_eq!(messages[0].status, MessageStatus::Complete);
        assert!(
            messages
                .iter()
                .all(|m| m.status != MessageStatus::Streaming),
            "{messages:?}"
        );
    }

    #[test]
    fn a_stopped_answer_is_saved_as_interrupted_and_a_failed_one_as_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let id = store.create_conversation(None, None).unwrap();
        let recorder = Recorder::new(
            store.clone(),
            id.clone(),
            CancellationToken::new(),
            HashMap::new(),
        );
        let sink = recorder.sink(Arc::new(|_| {}));
        sink(AgentEvent::TurnStarted { turn: 1 });
        sink(AgentEvent::MessageDone {
            message: Message {
                role: Role::Assistant,
                blocks: vec![Block::text("partial")],
            },
        });
        sink(AgentEvent::Cancelled);
        sink(AgentEvent::TurnStarted { turn: 1 });
        recorder.failed("the provider refused the API key").unwrap();
        let messages = store.messages(&id, None).unwrap();
        assert_eq!(messages[0].status, MessageStatus::Interrupted);
        assert_eq!(messages[0].blocks, [Block::text("partial")]);
        assert_eq!(messages[1].status, MessageStatus::Error);
        assert_eq!(
            messages[1].error.as_deref(),
            Some("the provider refused the API key")
        );
    }

    /// Every turn saves which server each call ran on (the window's and the command
    /// line's alike): a call's view later opens only from that server.
    #[test]
    fn each_call_that_runs_is_saved_with_what_ran_as_its_server() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let id = store.create_conversation(None, None).unwrap();
        let prints = HashMap::from([("charts".to_owned(), "print-of-charts".to_owned())]);
        let recorder = Recorder::new(store.clone(), id.clone(), CancellationToken::new(), prints);
        let sink = recorder.sink(Arc::new(|_| {}));
        let call = |id: &str, server: Option<&str>| conduit_core::content::ToolCall {
            id: id.to_owned(),
            wire_id: Some("call_0".to_owned()),
            name: "draw".to_owned(),
            arguments: serde_json::json!({}),
            signature: None,
            invalid_arguments: None,
            origin: server.map(|server| conduit_core::content::ToolOrigin {
                server: server.to_owned(),
                tool: "draw".to_owned(),
            }),
        };
        for (id, server) in [
            ("ran", Some("charts")),
            ("denied", Some("charts")),
            ("unknown-server", Some("gone")),
            ("built-in", None),
        ] {
            sink(AgentEvent::ToolCallReady {
                call: call(id, server),
            });
        }
        sink(AgentEvent::ToolCallDenied {
            id: "denied".to_owned(),
            reason: "no".to_owned(),
        });
        for id in ["ran", "denied", "unknown-server", "built-in"] {
            sink(AgentEvent::ToolCallRunning { id: id.to_owned() });
        }
        assert_eq!(
            store.call_server(&id, "ran").unwrap().as_deref(),
            Some("print-of-charts")
        );
        assert_eq!(store.call_server(&id, "denied").unwrap(), None);
        assert_eq!(
            store.call_server(&id, "unknown-server").unwrap().as_deref(),
            Some(""),
            "a server the turn was not given matches none"
        );
        assert_eq!(store.call_server(&id, "built-in").unwrap(), None);
        assert!(recorder.take_failure().is_none());
    }
}
