//! Saves a chat as it happens: the user's message first, then each block of the answer
//! as it completes, each tool message whole, and how the run ended.

use std::sync::{Arc, Mutex};

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
        let Ok(mut state) = self.state.lock() else {
            return;
        };
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
        let Ok(mut state) = self.state.lock() else {
            return Ok(());
        };
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
        self.state.lock().ok().and_then(|mut s| s.failure.take())
    }
}
