//! Approval that asks: each tool call raises an `ApprovalRequested` event and waits until
//! a frontend answers (the window's Allow / Deny), or the turn is stopped.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use async_trait::async_trait;
use tokio::sync::oneshot;

use crate::agent::{AgentEvent, Approval, Approver, EventSink};
use crate::content::{ToolCall, ToolOrigin};
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
        self.take(call_id)
            .is_some_and(|waiting| waiting.answer(approval))
    }

    /// Takes the question about call `call_id` to answer it, so that no other answer can
    /// (two answers at once: only the one that took it decides); `None` when no call waits
    /// under that id.
    pub fn take(&self, call_id: &str) -> Option<WaitingCall> {
        self.pending.lock().remove(call_id).map(WaitingCall)
    }

    /// The calls waiting for an answer.
    pub fn waiting(&self) -> Vec<String> {
        self.pending.lock().keys().cloned().collect()
    }
}

/// A question taken to be answered ([`AskApproval::take`]).
#[derive(Debug)]
pub struct WaitingCall(oneshot::Sender<Approval>);

impl WaitingCall {
    /// Gives the call its answer; false when the call stopped waiting meanwhile.
    pub fn answer(self, approval: Approval) -> bool {
        self.0.send(approval).is_ok()
    }
}

/// Removes a question that will never be answered (the turn was stopped).
struct Forget<'a> {
    owner: &'a AskApproval,
    call_id: String,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.owner.pending.lock().remove(&self.call_id);
    }
}

impl AskApproval {
    /// Asks about `call` of the tool `spec` (from `origin`), saying what changed since
    /// the user last allowed it, and waits for the answer.
    pub async fn ask(
        &self,
        call: &ToolCall,
        spec: &ToolSpec,
        origin: Option<ToolOrigin>,
        changes: Vec<String>,
    ) -> Approval {
        let (sender, receiver) = oneshot::channel();
        let fresh = {
            let mut pending = self.pending.lock();
            let fresh = !pending.contains_key(&call.id);
            if fresh {
                pending.insert(call.id.clone(), sender);
            }
            fresh
        };
        if !fresh {
            // Ids are the host's own and unique; a second question under one id would let
            // one answer reach the wrong call, so it is refused instead.
            return Approval::Deny {
                reason: "another call is already waiting for approval under the same id".into(),
            };
        }
        let _forget = Forget {
            owner: self,
            call_id: call.id.clone(),
        };
        (self.events)(AgentEvent::ApprovalRequested {
            arguments_text: serde_json::to_string_pretty(&call.arguments)
                .unwrap_or_else(|_| call.arguments.to_string()),
            call: call.clone(),
            origin,
            title: spec.title.clone(),
            annotations: spec.annotations.clone(),
            description: spec.description.clone(),
            changes,
        });
        receiver.await.unwrap_or(Approval::Deny {
            reason: "nobody answered the approval question".into(),
        })
    }
}

#[async_trait]
impl Approver for AskApproval {
    async fn decide(&self, call: &ToolCall, spec: &ToolSpec) -> Approval {
        self.ask(call, spec, call.origin.clone(), Vec::new()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_while_the_lock_is_held_loses_no_question() {
        let ask = AskApproval::new(Arc::new(|_| {}));
        let (sender, mut receiver) = oneshot::channel();
        ask.pending.lock().insert("c1".to_owned(), sender);
        let crashed = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let _held = ask.pending.lock();
                    panic!("a crash while the lock is held");
                })
                .join()
        });
        assert!(crashed.is_err());
        // A std lock would now be poisoned and the question silently dropped.
        assert_eq!(ask.waiting(), vec!["c1".to_owned()]);
        assert!(ask.answer("c1", Approval::Allow));
        assert!(matches!(receiver.try_recv(), Ok(Approval::Allow)));
    }

    /// The question carries the arguments as text written from the exact value: a page
    /// that parses JSON numbers would show 2^53 + 1 as 2^53.
    #[tokio::test]
    async fn the_question_writes_the_arguments_out_exactly() {
        let heard = Arc::new(parking_lot::Mutex::new(None));
        let keep = heard.clone();
        let ask = AskApproval::new(Arc::new(move |event| {
            if let AgentEvent::ApprovalRequested { arguments_text, .. } = event {
                *keep.lock() = Some(arguments_text);
            }
        }));
        let call = ToolCall {
            id: "c1".into(),
            wire_id: None,
            name: "delete".into(),
            arguments: serde_json::from_str(r#"{"id": 9007199254740993}"#).unwrap(),
            signature: None,
            invalid_arguments: None,
            origin: None,
        };
        let spec = crate::testing::tool_spec("delete");
        let asking = ask.ask(&call, &spec, None, Vec::new());
        let answering = async {
            while ask.waiting().is_empty() {
                tokio::task::yield_now().await;
            }
            ask.answer("c1", Approval::Allow);
        };
        let (approval, ()) = tokio::join!(asking, answering);
        assert_eq!(approval, Approval::Allow);
        let text = heard.lock().clone().unwrap();
        assert!(text.contains("9007199254740993"), "{text}");
    }
}
