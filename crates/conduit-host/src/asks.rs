//! The window's side of servers that ask back (elicitation): each question waits here
//! under the host's own id until the user answers in the window, and the host checks
//! every answer (a form must fit the server's schema; a URL opens only after the user
//! confirmed it natively, outside the page).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use conduit_mcp::elicit::{
    self, Asker, Elicitation, ElicitationAnswer, ElicitationKind, ElicitationOffer,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::{broadcast, oneshot};

/// How long a question waits for the user before it is cancelled.
pub const ANSWER_WAIT: Duration = Duration::from_secs(10 * 60);
/// How many questions one server may have waiting at once; more are declined.
pub const WAITING_PER_SERVER: usize = 3;

/// A question as the window shows it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    /// The host's id for it (never the server's).
    pub id: String,
    pub elicitation: Elicitation,
}

/// What the user did with a question.
#[derive(Debug, Clone, PartialEq, Deserialize, ts_rs::TS)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum QuestionReply {
    /// The form's values; for a URL, consent to open it (confirmed natively first).
    Accept {
        #[serde(default)]
        #[ts(type = "Record<string, unknown>")]
        values: Map<String, Value>,
    },
    Decline,
    Cancel,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AskError {
    #[error("that question is no longer waiting for an answer")]
    NotWaiting,
    #[error("the answer does not fit the form: {0}")]
    DoesNotFit(String),
}

struct Waiting {
    question: Question,
    answer: oneshot::Sender<ElicitationAnswer>,
}

/// The questions the servers ask the window.
pub struct WindowAsker {
    waiting: Mutex<BTreeMap<String, Waiting>>,
    changed: broadcast::Sender<()>,
    wait: Duration,
}

impl WindowAsker {
    pub fn new(wait: Duration) -> Arc<Self> {
        Arc::new(Self {
            waiting: Mutex::new(BTreeMap::new()),
            changed: broadcast::channel(16).0,
            wait,
        })
    }

    /// Fires whenever a question arrives or leaves.
    pub fn subscribe(&self) -> broadcast::Receiver<()> {
        self.changed.subscribe()
    }

    /// The questions waiting, oldest first.
    pub fn questions(&self) -> Vec<Question> {
        self.waiting
            .lock()
            .values()
            .map(|w| w.question.clone())
            .collect()
    }

    /// The URL a waiting URL question would open, for the native confirmation.
    pub fn url_of(&self, id: &str) -> Option<String> {
        match &self.waiting.lock().get(id)?.question.elicitation.kind {
            ElicitationKind::Url { url } => Some(url.clone()),
            ElicitationKind::Form { .. } => None,
        }
    }

    /// Answers the question `id`. A form's values must fit its schema (checked here;
    /// a refused answer leaves the question waiting). Accepting a URL question only
    /// records consent: the caller opens the page after the user confirmed it natively.
    pub fn answer(&self, id: &str, reply: QuestionReply) -> Result<(), AskError> {
        let mut waiting = self.waiting.lock();
        let question = &waiting.get(id).ok_or(AskError::NotWaiting)?.question;
        let answer = match reply {
            QuestionReply::Accept { values } => {
                match &question.elicitation.kind {
                    ElicitationKind::Form { fields } => {
                        elicit::check(fields, &values).map_err(AskError::DoesNotFit)?;
                    }
                    ElicitationKind::Url { .. } if !values.is_empty() => {
                        return Err(AskError::DoesNotFit("a page takes no values".into()));
                    }
                    ElicitationKind::Url { .. } => {}
                }
                ElicitationAnswer::Accept(values)
            }
            QuestionReply::Decline => ElicitationAnswer::Decline,
            QuestionReply::Cancel => ElicitationAnswer::Cancel,
        };
        let Some(waited) = waiting.remove(id) else {
            return Err(AskError::NotWaiting);
        };
        drop(waiting);
        // The server's call may have ended meanwhile: then nobody needs the answer.
        let _ = waited.answer.send(answer);
        let _ = self.changed.send(());
        Ok(())
    }
}

#[async_trait]
impl Asker for WindowAsker {
    fn offers(&self) -> ElicitationOffer {
        ElicitationOffer {
            form: true,
            url: true,
        }
    }

    async fn elicit(&self, elicitation: Elicitation) -> ElicitationAnswer {
        let id = format!("ask_{}", uuid::Uuid::now_v7());
        let (answer, answered) = oneshot::channel();
        {
            let mut waiting = self.waiting.lock();
            let asked = waiting
                .values()
                .filter(|w| w.question.elicitation.server == elicitation.server)
                .count();
            // A server cannot flood the window with questions.
            if asked >= WAITING_PER_SERVER {
                tracing::warn!(server = %elicitation.server, "a server asked more questions than may wait at once; declined");
                return ElicitationAnswer::Decline;
            }
            waiting.insert(
                id.clone(),
                Waiting {
                    question: Question {
                        id: id.clone(),
                        elicitation,
                    },
                    answer,
                },
            );
        }
        let _ = self.changed.send(());
        /// Takes the question away however the wait ends (answered, timed out, or the
        /// server's call dropped).
        struct Forget<'a>(&'a WindowAsker, String);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                if self.0.waiting.lock().remove(&self.1).is_some() {
                    let _ = self.0.changed.send(());
                }
            }
        }
        let _forget = Forget(self, id);
        match tokio::time::timeout(self.wait, answered).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) | Err(_) => ElicitationAnswer::Cancel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> Elicitation {
        Elicitation {
            server: "github".into(),
            message: "Which repository?".into(),
            kind: ElicitationKind::Form {
                fields: elicit::form_fields(&json!({"type": "object",
                    "properties": {"repo": {"type": "string", "minLength": 1}},
                    "required": ["repo"]}))
                .unwrap(),
            },
        }
    }

    async fn until_asked(asker: &WindowAsker) -> Question {
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Some(q) = asker.questions().pop() {
                    return q;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn a_fitting_answer_reaches_the_server_and_a_wrong_one_leaves_it_waiting() {
        let asker = WindowAsker::new(ANSWER_WAIT);
        let waiting = {
            let asker = asker.clone();
            tokio::spawn(async move { asker.elicit(form()).await })
        };
        let question = until_asked(&asker).await;
        assert!(question.id.starts_with("ask_"));
        let wrong = asker.answer(
            &question.id,
            QuestionReply::Accept {
                values: json!({"repo": ""}).as_object().unwrap().clone(),
            },
        );
        assert!(matches!(wrong, Err(AskError::DoesNotFit(_))), "{wrong:?}");
        assert_eq!(asker.questions().len(), 1, "still waiting");
        let values = json!({"repo": "conduit"}).as_object().unwrap().clone();
        asker
            .answer(
                &question.id,
                QuestionReply::Accept {
                    values: values.clone(),
                },
            )
            .unwrap();
        assert_eq!(waiting.await.unwrap(), ElicitationAnswer::Accept(values));
        assert!(asker.questions().is_empty());
        assert_eq!(
            asker.answer(&question.id, QuestionReply::Decline),
            Err(AskError::NotWaiting),
            "answered once"
        );
    }

    #[tokio::test]
    async fn a_server_cannot_flood_the_window_with_questions() {
        let asker = WindowAsker::new(ANSWER_WAIT);
        let mut waiting = Vec::new();
        for _ in 0..WAITING_PER_SERVER {
            let asker = asker.clone();
            waiting.push(tokio::spawn(async move { asker.elicit(form()).await }));
        }
        tokio::time::timeout(Duration::from_secs(5), async {
            while asker.questions().len() < WAITING_PER_SERVER {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
        assert_eq!(asker.elicit(form()).await, ElicitationAnswer::Decline);
        assert_eq!(asker.questions().len(), WAITING_PER_SERVER);
        for handle in waiting {
            handle.abort();
        }
    }

    #[tokio::test]
    async fn a_question_nobody_answers_is_cancelled_and_forgotten() {
        let asker = WindowAsker::new(Duration::from_millis(50));
        assert_eq!(asker.elicit(form()).await, ElicitationAnswer::Cancel);
        assert!(asker.questions().is_empty());
    }

    #[tokio::test]
    async fn a_url_question_takes_consent_only_and_names_its_page() {
        let asker = WindowAsker::new(ANSWER_WAIT);
        let waiting = {
            let asker = asker.clone();
            tokio::spawn(async move {
                asker
                    .elicit(Elicitation {
                        server: "pay".into(),
                        message: "Confirm".into(),
                        kind: ElicitationKind::Url {
                            url: "https://pay.example/c?id=1".into(),
                        },
                    })
                    .await
            })
        };
        let question = until_asked(&asker).await;
        assert_eq!(
            asker.url_of(&question.id).as_deref(),
            Some("https://pay.example/c?id=1")
        );
        let smuggled = asker.answer(
            &question.id,
            QuestionReply::Accept {
                values: json!({"card": "4111"}).as_object().unwrap().clone(),
            },
        );
        assert!(matches!(smuggled, Err(AskError::DoesNotFit(_))));
        asker.answer(&question.id, QuestionReply::Decline).unwrap();
        assert_eq!(waiting.await.unwrap(), ElicitationAnswer::Decline);
    }

    #[test]
    fn replies_read_from_the_window_in_camel_case() {
        let reply: QuestionReply =
            serde_json::from_value(json!({"action": "accept", "values": {"a": 1}})).unwrap();
        assert_eq!(
            reply,
            QuestionReply::Accept {
                values: json!({"a": 1}).as_object().unwrap().clone()
            }
        );
        let decline: QuestionReply = serde_json::from_value(json!({"action": "decline"})).unwrap();
        assert_eq!(decline, QuestionReply::Decline);
    }
}
