//! Saves a chat as it happens: the user's message first, then each block of the answer
//! as it completes, each tool message whole, and how the run ended.

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
}

/// An event sink that writes to the store, then passes every event on.
pub struct Recorder {
    store: Arc<Store>,
    conversation: String,
    state: Mutex<State>,
    stop_run: CancellationToken,
}

impl Recorder {
    pub fn new(store: Arc<Store>, conversation: String, stop_run: CancellationToken) -> Arc<Self> {
        Arc::new(Self {
            store,
            conversation,
            state: Mutex::new(State::default()),
            stop_run,
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
        let recorder = Recorder::new(store.clone(), id.clone(), stop.clone());
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
    }

    #[test]
    fn a_stopped_answer_is_saved_as_interrupted_and_a_failed_one_as_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let id = store.create_conversation(None, None).unwrap();
        let recorder = Recorder::new(store.clone(), id.clone(), CancellationToken::new());
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
}
