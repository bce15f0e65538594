//! Approval that asks: each tool call raises an `ApprovalRequested` event and waits until
//! a frontend answers (the window's Allow / Deny), or the turn is stopped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::oneshot;

use crate::agent::{AgentEvent, Approval, Approver, EventSink};
use crate::content::ToolCall;
use crate::tool::ToolSpec;

/// Asks through the event sink and waits for [`AskApproval::answer`].
pub struct AskApproval {
    events: EventSink,
    pending: Mutex<HashMap<String, oneshot::Sender<Approval>>>,
}

impl AskApproval {
    pub fn new(events: EventSink) -> Arc<Self> {
        Arc::new(Self {
            events,
            pending: Mutex::new(HashMap::new()),
        })
    }

    /// Answers the question about call `call_id`; false when no call waits under that id.
    pub fn answer(&self, call_id: &str, approval: Approval) -> bool {
        let waiting = self
            .pending
            .lock()
            .ok()
            .and_then(|mut pending| pending.remove(call_id));
        waiting.is_some_and(|sender| sender.send(approval).is_ok())
    }

    /// The calls waiting for an answer.
    pub fn waiting(&self) -> Vec<String> {
        self.pending
            .lock()
            .map(|pending| pending.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// Removes a question that will never be answered (the turn was stopped).
struct Forget<'a> {
    owner: &'a AskApproval,
    call_id: String,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        if let Ok(mut pending) = self.owner.pending.lock() {
            pending.remove(&self.call_id);
        }
    }
}

#[async_trait]
impl Approver for AskApproval {
    async fn decide(&self, call: &ToolCall, spec: &ToolSpec) -> Approval {
        let (sender, receiver) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(call.id.clone(), sender);
        }
        let _forget = Forget {
            owner: self,
            call_id: call.id.clone(),
        };
        (self.events)(AgentEvent::ApprovalRequested {
            call: call.clone(),
            title: spec.title.clone(),
            annotations: spec.annotations.clone(),
        });
        receiver.await.unwrap_or(Approval::Deny {
            reason: "nobody answered the approval question".into(),
        })
    }
}
