//! The window's side of servers that ask back: each question (elicitation) waits here
//! under the host's own id until the user answers in the window, and the host checks
//! every answer (a form must fit the server's schema; a URL opens only after the user
//! confirmed it natively, outside the page). A sampling request waits the same way: it
//! runs only after the user approves it, on the provider and model they pick, and its
//! result goes back only after they confirm it (the server's policy may allow or deny
//! without asking).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use conduit_mcp::elicit::{
    self, Asker, Elicitation, ElicitationAnswer, ElicitationKind, ElicitationOffer,
};
use conduit_mcp::sampling::{SampledMessage, SamplingAnswer, SamplingRequest};

use crate::sampling::{ModelPick, Sampler, SamplingSlots, settle_without_asking};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::{broadcast, mpsc, oneshot};

/// How long a question waits for the user before it is cancelled.
pub const ANSWER_WAIT: Duration = Duration::from_secs(10 * 60);
/// How many questions one server may have waiting at once; more are cancelled unseen.
pub const WAITING_PER_SERVER: usize = 3;
/// How many prompts (questions, and sampling requests shown for approval) one server may
/// have brought up without the user answering them, withdrawn or timed out or still
/// waiting, before its next ones are refused unseen; one more is allowed each
/// [`PROMPT_REFILL`], and a prompt the user answers gives its place back. Each new or
/// gone prompt moves the others and re-arms their consent buttons
/// (`ui/src/lib/consent.ts`): a server that asks and withdraws in a loop would otherwise
/// keep every Approve in the window from taking a click.
pub const PROMPT_BURST: u32 = 10;
/// How long one of a paced server's prompts takes to come back.
pub const PROMPT_REFILL: Duration = Duration::from_secs(6);
/// What a sampling request refused by the pace hears (the user never saw it, so it is no
/// user rejection).
pub const PACED_SAMPLING: &str =
    "this server's recent requests went unanswered; Conduit takes no more from it for now";

/// The longest side of a sampling request's image as the window shows it, in pixels:
/// twice the review's 12rem height on a high-density screen, with room to spare.
pub const SAMPLING_PREVIEW_EDGE: u32 = 800;

/// How the window asks to see a sampling request's image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingView {
    /// Within [`SAMPLING_PREVIEW_EDGE`] pixels a side, for the review.
    Preview,
    /// At the image's own size, for the full-window viewer: small text a server writes
    /// into a large image must be readable before the user approves sending it.
    Whole,
}

impl SamplingView {
    /// The longest side drawn, in pixels (an image past the limits of
    /// [`conduit_core::images`] is never drawn at all).
    fn edge(self) -> u32 {
        match self {
            Self::Preview => SAMPLING_PREVIEW_EDGE,
            Self::Whole => conduit_core::images::MAX_SIDE,
        }
    }
}

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

/// A server's sampling request as the window shows it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct SamplingQuestion {
    /// The host's id for it (never the server's).
    pub id: String,
    pub request: SamplingRequest,
    pub state: SamplingState,
}

/// Where a sampling request is.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum SamplingState {
    /// Waiting for the user to approve it (and pick the model) or deny it.
    Asking,
    /// Running on the model the user picked.
    Running { pick: ModelPick },
    /// The model answered: waiting for the user to send the result or deny it.
    Review {
        pick: ModelPick,
        result: SampledMessage,
    },
    /// The model could not run; the user may pick another model or deny.
    Failed { pick: ModelPick, error: String },
}

/// What the user did with a sampling request.
#[derive(Debug, Clone, PartialEq, Deserialize, ts_rs::TS)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum SamplingReply {
    /// Approve it and run it on this provider and model (again, after a result or a
    /// failure).
    Run { pick: ModelPick },
    /// Send the model's result to the server.
    Send,
    /// Refuse it: the server gets the spec's user-rejected error.
    Deny,
}

/// Why a sampling request's image is not shown.
#[derive(Debug, thiserror::Error)]
pub enum PreviewFailed {
    #[error(transparent)]
    Image(#[from] conduit_core::images::PreviewError),
    #[error("drawing the image stopped: {0}")]
    Stopped(String),
    /// A whole drawing the window asked for before its newest one: the viewer has moved
    /// on, so it is not drawn.
    #[error("the viewer asked for another image since")]
    Superseded,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AskError {
    #[error("that question is no longer waiting for an answer")]
    NotWaiting,
    #[error("the answer does not fit the form: {0}")]
    DoesNotFit(String),
    #[error("the request cannot take that now: {0}")]
    NotNow(&'static str),
}

/// Each server's allowance of prompts not answered by the user: [`PROMPT_BURST`] at
/// most, one back each [`PROMPT_REFILL`] and one back for each answer.
#[derive(Default)]
struct PromptPace {
    servers: Mutex<BTreeMap<String, PaceRow>>,
}

struct PaceRow {
    left: u32,
    /// Where the current refill period started.
    since: tokio::time::Instant,
    /// Whether the refusals in a row were said in the log already (once is enough).
    warned: bool,
}

impl PromptPace {
    /// Takes a place for one of `server`'s prompts; false (said in the log once in a row)
    /// when it has none left.
    fn take(&self, server: &str) -> bool {
        self.settle(server, |row| {
            if row.left == 0 {
                if !row.warned {
                    tracing::warn!(%server, "a server brought up more unanswered prompts than the window allows; refusing them for now");
                    row.warned = true;
                }
                return false;
            }
            row.left -= 1;
            row.warned = false;
            true
        })
    }

    /// Gives back the place of one of `server`'s prompts the user answered.
    fn give_back(&self, server: &str) {
        self.settle(server, |row| row.left = (row.left + 1).min(PROMPT_BURST));
    }

    /// Brings `server`'s allowance up to now, then applies `change` to it.
    fn settle<T>(&self, server: &str, change: impl FnOnce(&mut PaceRow) -> T) -> T {
        let now = tokio::time::Instant::now();
        let mut servers = self.servers.lock();
        let row = servers.entry(server.to_owned()).or_insert(PaceRow {
            left: PROMPT_BURST,
            since: now,
            warned: false,
        });
        let periods = now.duration_since(row.since).as_millis() / PROMPT_REFILL.as_millis();
        let back = u32::try_from(periods).unwrap_or(u32::MAX);
        row.left = row.left.saturating_add(back).min(PROMPT_BURST);
        // A full allowance banks no time; a partial one keeps the rest of its period
        // (`back` is then under PROMPT_BURST: the product is small).
        row.since = if row.left == PROMPT_BURST {
            now
        } else {
            row.since + PROMPT_REFILL * back
        };
        change(row)
    }
}

struct Waiting {
    question: Question,
    answer: oneshot::Sender<ElicitationAnswer>,
}

struct SamplingWaiting {
    question: SamplingQuestion,
    replies: mpsc::UnboundedSender<SamplingReply>,
}

/// The questions and sampling requests the servers send the window.
pub struct WindowAsker {
    waiting: Mutex<BTreeMap<String, Waiting>>,
    sampling: Mutex<BTreeMap<String, SamplingWaiting>>,
    /// Runs sampling requests; without one, sampling is not offered.
    sampler: Option<Arc<dyn Sampler>>,
    /// Each server's sampling requests here now, asked or not.
    sampling_slots: SamplingSlots,
    /// How fast each server may bring up prompts.
    pace: PromptPace,
    /// One sampling image drawn at a time, over all requests.
    previews: tokio::sync::Semaphore,
    /// How many whole drawings the window has asked for: only the newest is drawn, so
    /// stepping through a request's images queues no work for the ones left behind.
    wholes_asked: AtomicU64,
    changed: broadcast::Sender<()>,
    wait: Duration,
}

impl WindowAsker {
    /// Questions only: sampling is not offered.
    pub fn new(wait: Duration) -> Arc<Self> {
        Self::build(wait, None)
    }

    /// Questions, and sampling requests run by `sampler` (the host).
    pub fn with_sampler(wait: Duration, sampler: Arc<dyn Sampler>) -> Arc<Self> {
        Self::build(wait, Some(sampler))
    }

    fn build(wait: Duration, sampler: Option<Arc<dyn Sampler>>) -> Arc<Self> {
        Arc::new(Self {
            waiting: Mutex::new(BTreeMap::new()),
            sampling: Mutex::new(BTreeMap::new()),
            sampler,
            sampling_slots: SamplingSlots::default(),
            pace: PromptPace::default(),
            previews: tokio::sync::Semaphore::new(1),
            wholes_asked: AtomicU64::new(0),
            changed: broadcast::channel(16).0,
            wait,
        })
    }

    /// The sampling requests waiting, oldest first.
    pub fn sampling_requests(&self) -> Vec<SamplingQuestion> {
        self.sampling
            .lock()
            .values()
            .map(|w| w.question.clone())
            .collect()
    }

    /// What the window shows of the `ordinal`th image of the waiting sampling request
    /// `id`: a PNG drawn as `view` asks (alpha over a checkerboard), or why the image
    /// cannot be shown; `None` when no such request waits or it has fewer images. One image is drawn
    /// at a time, off the async workers (a decode may take 256 MiB and seconds), and the
    /// request is looked up once it is this one's turn: fetches for a request answered
    /// meanwhile cost nothing, and a whole drawing asked for before the newest one is
    /// [`PreviewFailed::Superseded`] (the viewer shows one image at a time).
    pub async fn sampling_preview(
        &self,
        id: &str,
        ordinal: usize,
        view: SamplingView,
    ) -> Option<Result<Vec<u8>, PreviewFailed>> {
        let ticket = (view == SamplingView::Whole)
            .then(|| self.wholes_asked.fetch_add(1, Ordering::SeqCst) + 1);
        let _turn = match self.previews.acquire().await {
            Ok(turn) => turn,
            Err(closed) => return Some(Err(PreviewFailed::Stopped(closed.to_string()))),
        };
        if ticket.is_some_and(|ticket| ticket != self.wholes_asked.load(Ordering::SeqCst)) {
            return Some(Err(PreviewFailed::Superseded));
        }
        let bytes = self.sampling_image(id, ordinal)?;
        let drawn = tokio::task::spawn_blocking(move || {
            conduit_core::images::preview_png(&bytes, view.edge(), view.edge())
        })
        .await;
        Some(match drawn {
            Ok(result) => result.map_err(PreviewFailed::Image),
            Err(stopped) => Err(PreviewFailed::Stopped(stopped.to_string())),
        })
    }

    /// The bytes of the `ordinal`th image (counted from 0 through the messages in order)
    /// of the waiting sampling request `id`.
    fn sampling_image(&self, id: &str, ordinal: usize) -> Option<Vec<u8>> {
        let sampling = self.sampling.lock();
        let request = &sampling.get(id)?.question.request;
        request.images().nth(ordinal).map(<[u8]>::to_vec)
    }

    /// Answers the sampling request `id`. Each reply must fit where the request is: a
    /// run while it is not running, a send only with a result to send; a deny always.
    pub fn answer_sampling(&self, id: &str, reply: SamplingReply) -> Result<(), AskError> {
        let mut sampling = self.sampling.lock();
        let waiting = sampling.get_mut(id).ok_or(AskError::NotWaiting)?;
        match (&reply, &waiting.question.state) {
            (SamplingReply::Run { .. }, SamplingState::Running { .. }) => {
                return Err(AskError::NotNow("it is running"));
            }
            (SamplingReply::Send, SamplingState::Review { .. }) => {}
            (SamplingReply::Send, _) => {
                return Err(AskError::NotNow("there is no result to send yet"));
            }
            (SamplingReply::Run { pick }, _) => {
                // Shown as running at once, so a second click cannot start it twice.
                waiting.question.state = SamplingState::Running { pick: pick.clone() };
            }
            (SamplingReply::Deny, _) => {}
        }
        if waiting.replies.send(reply).is_err() {
            sampling.remove(id);
            return Err(AskError::NotWaiting);
        }
        drop(sampling);
        let _ = self.changed.send(());
        Ok(())
    }

    fn set_sampling_state(&self, id: &str, state: SamplingState) {
        if let Some(waiting) = self.sampling.lock().get_mut(id) {
            waiting.question.state = state;
        }
        let _ = self.changed.send(());
    }

    /// The request's whole life in the window: approve (with a model), run, review,
    /// send; a deny, a timeout or the server's withdrawal at any point rejects it.
    async fn sample_in_window(
        &self,
        sampler: &dyn Sampler,
        request: SamplingRequest,
    ) -> SamplingAnswer {
        if !self.pace.take(&request.server) {
            return SamplingAnswer::Failed(PACED_SAMPLING.into());
        }
        let id = format!("sample_{}", uuid::Uuid::now_v7());
        let (replies, mut received) = mpsc::unbounded_channel();
        // The caller holds this request's place: no server has more than its share here.
        self.sampling.lock().insert(
            id.clone(),
            SamplingWaiting {
                question: SamplingQuestion {
                    id: id.clone(),
                    request: request.clone(),
                    state: SamplingState::Asking,
                },
                replies,
            },
        );
        let _ = self.changed.send(());
        /// Takes the request away however the wait ends; one the user answered (approved,
        /// denied or sent) gives its place in its server's pace back.
        struct Forget<'a> {
            asker: &'a WindowAsker,
            id: String,
            server: String,
            answered: bool,
        }
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                if self.asker.sampling.lock().remove(&self.id).is_some() {
                    let _ = self.asker.changed.send(());
                }
                if self.answered {
                    self.asker.pace.give_back(&self.server);
                }
            }
        }
        let mut forget = Forget {
            asker: self,
            id: id.clone(),
            server: request.server.clone(),
            answered: false,
        };
        let deadline = tokio::time::Instant::now() + self.wait;
        let mut result: Option<SampledMessage> = None;
        loop {
            let reply = match tokio::time::timeout_at(deadline, received.recv()).await {
                Ok(Some(reply)) => reply,
                Ok(None) | Err(_) => return SamplingAnswer::Rejected,
            };
            // Every reply is the user's (`answer_sampling`).
            forget.answered = true;
            match reply {
                SamplingReply::Deny => return SamplingAnswer::Rejected,
                SamplingReply::Send => {
                    if let Some(message) = result.take() {
                        return SamplingAnswer::Sampled(message);
                    }
                }
                SamplingReply::Run { pick } => {
                    result = None;
                    let outcome = tokio::select! {
                        outcome = sampler.run_sampling(&request, &pick) => outcome,
                        // While it runs, only a deny is taken.
                        _ = received.recv() => return SamplingAnswer::Rejected,
                        () = tokio::time::sleep_until(deadline) => return SamplingAnswer::Rejected,
                    };
                    let state = match outcome {
                        Ok(message) => {
                            result = Some(message.clone());
                            SamplingState::Review {
                                pick,
                                result: message,
                            }
                        }
                        Err(error) => {
                            tracing::warn!(server = %request.server, %error, "a sampling request failed to run");
                            SamplingState::Failed { pick, error }
                        }
                    };
                    self.set_sampling_state(&id, state);
                }
            }
        }
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
    pub fn url_of(&self, id: &str) -> Option<(String, String)> {
        let waiting = self.waiting.lock();
        let elicitation = &waiting.get(id)?.question.elicitation;
        match &elicitation.kind {
            ElicitationKind::Url { url } => Some((elicitation.server.clone(), url.clone())),
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
        let server = elicitation.server.clone();
        let (answer, answered) = oneshot::channel();
        {
            let mut waiting = self.waiting.lock();
            let asked = waiting
                .values()
                .filter(|w| w.question.elicitation.server == elicitation.server)
                .count();
            // A server cannot flood the window with questions. Refused unseen: the user
            // said nothing, so the server hears a cancel, never a decline.
            if asked >= WAITING_PER_SERVER {
                tracing::warn!(server = %elicitation.server, "a server asked more questions than may wait at once; cancelled");
                return ElicitationAnswer::Cancel;
            }
            if !self.pace.take(&elicitation.server) {
                return ElicitationAnswer::Cancel;
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
        /// server's call dropped). One already gone was answered (the user's answer takes
        /// it away first): its place in its server's pace comes back.
        struct Forget<'a>(&'a WindowAsker, String, String);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                if self.0.waiting.lock().remove(&self.1).is_some() {
                    let _ = self.0.changed.send(());
                } else {
                    self.0.pace.give_back(&self.2);
                }
            }
        }
        let _forget = Forget(self, id, server);
        match tokio::time::timeout(self.wait, answered).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) | Err(_) => ElicitationAnswer::Cancel,
        }
    }

    fn samples(&self) -> bool {
        self.sampler.is_some()
    }

    /// The window renders MCP Apps views (see `crate::app_views`).
    fn shows_views(&self) -> bool {
        true
    }

    async fn sample(&self, request: SamplingRequest) -> SamplingAnswer {
        let Some(sampler) = self.sampler.clone() else {
            return SamplingAnswer::Rejected;
        };
        // A server cannot flood the window, or the user's key, with requests.
        let held = match self.sampling_slots.take(&request.server) {
            Ok(held) => held,
            Err(refused) => return refused,
        };
        match settle_without_asking(sampler.as_ref(), &held, &request, None).await {
            Some(answer) => answer,
            None => self.sample_in_window(sampler.as_ref(), request).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::SAMPLING_PER_SERVER;
    use crate::settings::ToolPolicy;
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
                // A sleep, not a yield: under paused time only a sleep lets the clock
                // (and so the timeout) move.
                tokio::time::sleep(Duration::from_millis(1)).await;
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
        assert_eq!(asker.elicit(form()).await, ElicitationAnswer::Cancel);
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
            asker.url_of(&question.id),
            Some((
                question.elicitation.server.clone(),
                "https://pay.example/c?id=1".to_owned()
            ))
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

    /// Runs every request by echoing its first text, after `gate` opens; records picks.
    struct FakeSampler {
        policy: ToolPolicy,
        picks: Mutex<Vec<ModelPick>>,
        gate: tokio::sync::Semaphore,
    }

    impl FakeSampler {
        fn new(policy: ToolPolicy) -> Arc<Self> {
            Arc::new(Self {
                policy,
                picks: Mutex::new(Vec::new()),
                gate: tokio::sync::Semaphore::new(100),
            })
        }
    }

    #[async_trait]
    impl Sampler for FakeSampler {
        fn sampling_policy(&self, _request: &SamplingRequest) -> ToolPolicy {
            self.policy
        }

        fn default_pick(&self) -> Option<ModelPick> {
            Some(ModelPick {
                provider: "default".into(),
                model: Some("d1".into()),
            })
        }

        async fn run_sampling(
            &self,
            request: &SamplingRequest,
            pick: &ModelPick,
        ) -> Result<SampledMessage, String> {
            self.picks.lock().push(pick.clone());
            let _open = self.gate.acquire().await.map_err(|e| e.to_string())?;
            if pick.provider == "broken" {
                return Err("the provider refused the key".into());
            }
            let conduit_mcp::sampling::SamplingContent::Text { text } =
                &request.messages[0].content[0]
            else {
                return Err("no text".into());
            };
            Ok(SampledMessage {
                model: pick.model.clone().unwrap_or_default(),
                content: vec![conduit_mcp::sampling::SamplingContent::Text {
                    text: format!("echo: {text}"),
                }],
                stop_reason: conduit_mcp::sampling::SamplingStop::EndTurn,
            })
        }
    }

    fn sampling_request(server: &str) -> SamplingRequest {
        SamplingRequest::from_wire(
            server,
            &json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 10}),
        )
        .unwrap()
    }

    async fn until_sampling(
        asker: &WindowAsker,
        fits: impl Fn(&SamplingState) -> bool,
    ) -> SamplingQuestion {
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Some(q) = asker.sampling_requests().pop().filter(|q| fits(&q.state)) {
                    return q;
                }
                // A sleep, not a yield: under paused time only a sleep lets the clock
                // (and so the timeout) move.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .unwrap()
    }

    fn pick(provider: &str) -> ModelPick {
        ModelPick {
            provider: provider.into(),
            model: Some("m1".into()),
        }
    }

    #[tokio::test]
    async fn a_sampling_request_runs_only_when_approved_and_goes_back_only_when_sent() {
        let sampler = FakeSampler::new(ToolPolicy::Ask);
        let asker = WindowAsker::with_sampler(ANSWER_WAIT, sampler.clone());
        assert!(asker.samples());
        let waiting = {
            let asker = asker.clone();
            tokio::spawn(async move { asker.sample(sampling_request("srv")).await })
        };
        let asked = until_sampling(&asker, |s| *s == SamplingState::Asking).await;
        assert!(asked.id.starts_with("sample_"));
        assert!(
            sampler.picks.lock().is_empty(),
            "nothing runs before approval"
        );
        assert_eq!(
            asker.answer_sampling(&asked.id, SamplingReply::Send),
            Err(AskError::NotNow("there is no result to send yet"))
        );
        // A provider that fails leaves the request waiting for another pick.
        asker
            .answer_sampling(
                &asked.id,
                SamplingReply::Run {
                    pick: pick("broken"),
                },
            )
            .unwrap();
        let failed = until_sampling(&asker, |s| matches!(s, SamplingState::Failed { .. })).await;
        assert!(
            matches!(&failed.state, SamplingState::Failed { error, .. } if error.contains("key"))
        );
        asker
            .answer_sampling(&asked.id, SamplingReply::Run { pick: pick("p1") })
            .unwrap();
        let review = until_sampling(&asker, |s| matches!(s, SamplingState::Review { .. })).await;
        let SamplingState::Review { result, pick: used } = &review.state else {
            unreachable!()
        };
        assert_eq!(used.provider, "p1");
        assert_eq!(
            result.content,
            [conduit_mcp::sampling::SamplingContent::Text {
                text: "echo: hi".into()
            }]
        );
        assert!(!waiting.is_finished(), "not sent before the user confirms");
        asker
            .answer_sampling(&asked.id, SamplingReply::Send)
            .unwrap();
        assert_eq!(
            waiting.await.unwrap(),
            SamplingAnswer::Sampled(result.clone())
        );
        assert!(asker.sampling_requests().is_empty());
        assert_eq!(
            asker.answer_sampling(&asked.id, SamplingReply::Deny),
            Err(AskError::NotWaiting)
        );
    }

    /// Brings up one of `server`'s questions, waits until the window has it, and
    /// withdraws it (as a server that cancels its request does).
    async fn ask_and_withdraw(asker: &Arc<WindowAsker>, server: &str) {
        let task = {
            let asker = asker.clone();
            let mut question = form();
            question.server = server.into();
            tokio::spawn(async move { asker.elicit(question).await })
        };
        let shown = until_asked(asker).await;
        assert_eq!(shown.elicitation.server, server);
        task.abort();
        let _ = task.await;
        assert!(asker.questions().is_empty(), "withdrawn");
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_keeps_asking_and_withdrawing_is_paced_and_others_are_not() {
        let asker = WindowAsker::with_sampler(ANSWER_WAIT, FakeSampler::new(ToolPolicy::Ask));
        for _ in 0..PROMPT_BURST {
            ask_and_withdraw(&asker, "github").await;
        }
        // The next is refused at once and never reaches the window: a question hears a
        // cancel (the user said nothing), a sampling request a failure, not a rejection.
        let mut changes = asker.subscribe();
        assert_eq!(asker.elicit(form()).await, ElicitationAnswer::Cancel);
        assert_eq!(
            asker.sample(sampling_request("github")).await,
            SamplingAnswer::Failed(PACED_SAMPLING.into())
        );
        assert!(changes.try_recv().is_err(), "nothing was shown");
        // Another server asks as before.
        ask_and_withdraw(&asker, "linear").await;
        // One comes back after each period, and no more; part of a period is kept.
        tokio::time::advance(PROMPT_REFILL).await;
        ask_and_withdraw(&asker, "github").await;
        assert_eq!(asker.elicit(form()).await, ElicitationAnswer::Cancel);
        tokio::time::advance(PROMPT_REFILL + PROMPT_REFILL / 2).await;
        ask_and_withdraw(&asker, "github").await;
        assert_eq!(asker.elicit(form()).await, ElicitationAnswer::Cancel);
        tokio::time::advance(PROMPT_REFILL / 2).await;
        ask_and_withdraw(&asker, "github").await;
        assert_eq!(asker.elicit(form()).await, ElicitationAnswer::Cancel);
        // A quiet server gets its whole allowance back, never more.
        tokio::time::advance(PROMPT_REFILL * (PROMPT_BURST + 5)).await;
        for _ in 0..PROMPT_BURST {
            ask_and_withdraw(&asker, "github").await;
        }
        assert_eq!(asker.elicit(form()).await, ElicitationAnswer::Cancel);
    }

    #[tokio::test(start_paused = true)]
    async fn prompts_brought_up_at_once_each_take_a_place() {
        let asker = WindowAsker::with_sampler(ANSWER_WAIT, FakeSampler::new(ToolPolicy::Ask));
        for _ in 0..PROMPT_BURST - 2 {
            ask_and_withdraw(&asker, "github").await;
        }
        // Two places left: a question and a sampling request show, the rest do not.
        let question = {
            let asker = asker.clone();
            tokio::spawn(async move { asker.elicit(form()).await })
        };
        until_asked(&asker).await;
        let sampling = {
            let asker = asker.clone();
            tokio::spawn(async move { asker.sample(sampling_request("github")).await })
        };
        until_sampling(&asker, |_| true).await;
        assert_eq!(asker.elicit(form()).await, ElicitationAnswer::Cancel);
        assert_eq!(
            asker.sample(sampling_request("github")).await,
            SamplingAnswer::Failed(PACED_SAMPLING.into())
        );
        assert_eq!(asker.questions().len(), 1);
        assert_eq!(asker.sampling_requests().len(), 1);
        // Withdrawn, they give nothing back; answered, they would have.
        question.abort();
        sampling.abort();
        let _ = (question.await, sampling.await);
        assert_eq!(asker.elicit(form()).await, ElicitationAnswer::Cancel);
    }

    #[tokio::test(start_paused = true)]
    async fn prompts_the_user_answers_never_count_against_the_pace() {
        let asker = WindowAsker::with_sampler(ANSWER_WAIT, FakeSampler::new(ToolPolicy::Ask));
        for round in 0..2 * PROMPT_BURST {
            let waiting = {
                let asker = asker.clone();
                tokio::spawn(async move { asker.elicit(form()).await })
            };
            let question = until_asked(&asker).await;
            asker.answer(&question.id, QuestionReply::Decline).unwrap();
            assert_eq!(
                waiting.await.unwrap(),
                ElicitationAnswer::Decline,
                "{round}"
            );
            let sampled = {
                let asker = asker.clone();
                tokio::spawn(async move { asker.sample(sampling_request("github")).await })
            };
            let asked = until_sampling(&asker, |_| true).await;
            asker
                .answer_sampling(&asked.id, SamplingReply::Deny)
                .unwrap();
            assert_eq!(sampled.await.unwrap(), SamplingAnswer::Rejected, "{round}");
        }
    }

    #[tokio::test]
    async fn a_waiting_requests_images_are_found_by_their_place_and_only_while_it_waits() {
        use base64::Engine as _;
        let asker = WindowAsker::with_sampler(ANSWER_WAIT, FakeSampler::new(ToolPolicy::Ask));
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let frame = conduit_core::testing::zero_png(1600, 1000);
        let request = SamplingRequest::from_wire(
            "srv",
            &json!({"maxTokens": 10, "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "hi"},
                    {"type": "image", "mimeType": "image/png", "data": b64(b"first")}]},
                {"role": "assistant", "content": {"type": "text", "text": "and?"}},
                {"role": "user", "content": {"type": "image", "mimeType": "image/png", "data": b64(&frame)}}
            ]}),
        )
        .unwrap();
        let waiting = {
            let asker = asker.clone();
            tokio::spawn(async move { asker.sample(request).await })
        };
        let asked = until_sampling(&asker, |_| true).await;
        assert_eq!(
            asker.sampling_image(&asked.id, 0).as_deref(),
            Some(&b"first"[..])
        );
        assert_eq!(asker.sampling_image(&asked.id, 1), Some(frame));
        assert_eq!(
            asker.sampling_image(&asked.id, 2),
            None,
            "past the last image"
        );
        assert_eq!(
            asker.sampling_image("sample_other", 0),
            None,
            "no such request"
        );
        // "first" is no image: the preview says so rather than passing the bytes on.
        let refused = asker
            .sampling_preview(&asked.id, 0, SamplingView::Preview)
            .await
            .unwrap()
            .unwrap_err();
        assert!(refused.to_string().contains("no image format"), "{refused}");
        let preview = asker
            .sampling_preview(&asked.id, 1, SamplingView::Preview)
            .await
            .unwrap()
            .unwrap();
        let (format, shown) = conduit_core::images::decode(&preview).unwrap();
        assert_eq!(format, image::ImageFormat::Png);
        assert_eq!(
            (shown.width(), shown.height()),
            (800, 500),
            "within the edge"
        );
        // The whole image, for the viewer: the frame's own size, drawn anew.
        let whole = asker
            .sampling_preview(&asked.id, 1, SamplingView::Whole)
            .await
            .unwrap()
            .unwrap();
        let (format, shown) = conduit_core::images::decode(&whole).unwrap();
        assert_eq!(format, image::ImageFormat::Png);
        assert_eq!(
            (shown.width(), shown.height()),
            (1600, 1000),
            "its own size"
        );
        for view in [SamplingView::Preview, SamplingView::Whole] {
            assert!(asker.sampling_preview(&asked.id, 2, view).await.is_none());
        }
        // Stepping through the viewer while a drawing runs: of the whole drawings queued
        // behind it, only the newest is drawn; a review's preview is not passed over.
        let busy = asker.previews.acquire().await.unwrap();
        let asked_before = asker.wholes_asked.load(Ordering::SeqCst);
        let queue = |ordinal, view| {
            let (asker, id) = (asker.clone(), asked.id.clone());
            tokio::spawn(async move { asker.sampling_preview(&id, ordinal, view).await })
        };
        let left_behind = queue(0, SamplingView::Whole);
        while asker.wholes_asked.load(Ordering::SeqCst) == asked_before {
            tokio::task::yield_now().await;
        }
        let preview = queue(1, SamplingView::Preview);
        let newest = queue(1, SamplingView::Whole);
        while asker.wholes_asked.load(Ordering::SeqCst) < asked_before + 2 {
            tokio::task::yield_now().await;
        }
        drop(busy);
        assert!(matches!(
            left_behind.await.unwrap(),
            Some(Err(PreviewFailed::Superseded))
        ));
        let (_, shown) =
            conduit_core::images::decode(&preview.await.unwrap().unwrap().unwrap()).unwrap();
        assert_eq!((shown.width(), shown.height()), (800, 500));
        let (_, shown) =
            conduit_core::images::decode(&newest.await.unwrap().unwrap().unwrap()).unwrap();
        assert_eq!(
            (shown.width(), shown.height()),
            (1600, 1000),
            "the newest is drawn"
        );
        asker
            .answer_sampling(&asked.id, SamplingReply::Deny)
            .unwrap();
        assert_eq!(waiting.await.unwrap(), SamplingAnswer::Rejected);
        assert_eq!(
            asker.sampling_image(&asked.id, 0),
            None,
            "gone with its request"
        );
    }

    #[tokio::test]
    async fn a_denied_sampling_request_is_rejected_even_while_it_runs() {
        let sampler = FakeSampler::new(ToolPolicy::Ask);
        let asker = WindowAsker::with_sampler(ANSWER_WAIT, sampler.clone());
        let denied = {
            let asker = asker.clone();
            tokio::spawn(async move { asker.sample(sampling_request("srv")).await })
        };
        let asked = until_sampling(&asker, |_| true).await;
        asker
            .answer_sampling(&asked.id, SamplingReply::Deny)
            .unwrap();
        assert_eq!(denied.await.unwrap(), SamplingAnswer::Rejected);

        // Held at the gate: the run cannot finish, and a deny ends it.
        let _held = sampler.gate.acquire_many(100).await.unwrap();
        let running = {
            let asker = asker.clone();
            tokio::spawn(async move { asker.sample(sampling_request("srv")).await })
        };
        let asked = until_sampling(&asker, |_| true).await;
        asker
            .answer_sampling(&asked.id, SamplingReply::Run { pick: pick("p1") })
            .unwrap();
        assert_eq!(
            asker.answer_sampling(&asked.id, SamplingReply::Run { pick: pick("p1") }),
            Err(AskError::NotNow("it is running"))
        );
        asker
            .answer_sampling(&asked.id, SamplingReply::Deny)
            .unwrap();
        assert_eq!(running.await.unwrap(), SamplingAnswer::Rejected);
        assert!(asker.sampling_requests().is_empty());
    }

    #[tokio::test]
    async fn the_servers_policy_allows_or_denies_without_asking_and_floods_are_refused() {
        let allowed = WindowAsker::with_sampler(ANSWER_WAIT, FakeSampler::new(ToolPolicy::Allow));
        let SamplingAnswer::Sampled(message) = allowed.sample(sampling_request("srv")).await else {
            panic!("allowed requests run");
        };
        assert_eq!(message.model, "d1", "on the default provider and model");
        let denied = WindowAsker::with_sampler(ANSWER_WAIT, FakeSampler::new(ToolPolicy::Deny));
        assert_eq!(
            denied.sample(sampling_request("srv")).await,
            SamplingAnswer::Rejected
        );
        assert!(denied.sampling_requests().is_empty(), "never shown");

        let asker = WindowAsker::with_sampler(ANSWER_WAIT, FakeSampler::new(ToolPolicy::Ask));
        let mut waiting = Vec::new();
        for _ in 0..WAITING_PER_SERVER {
            let asker = asker.clone();
            waiting.push(tokio::spawn(async move {
                asker.sample(sampling_request("srv")).await
            }));
        }
        tokio::time::timeout(Duration::from_secs(5), async {
            while asker.sampling_requests().len() < WAITING_PER_SERVER {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
        assert_eq!(
            asker.sample(sampling_request("srv")).await,
            SamplingAnswer::Failed(crate::sampling::TOO_MANY_SAMPLING.into()),
            "refused unseen, never as the user's rejection"
        );
        for handle in waiting {
            handle.abort();
        }
        // Without a sampler nothing is offered.
        assert!(!WindowAsker::new(ANSWER_WAIT).samples());
    }

    #[tokio::test]
    async fn an_allowed_server_runs_at_most_its_share_at_once_and_more_are_rejected_unrun() {
        let sampler = FakeSampler::new(ToolPolicy::Allow);
        let asker = WindowAsker::with_sampler(ANSWER_WAIT, sampler.clone());
        // Held at the gate: the runs cannot finish.
        let held = sampler.gate.acquire_many(100).await.unwrap();
        let running: Vec<_> = (0..SAMPLING_PER_SERVER)
            .map(|_| {
                let asker = asker.clone();
                tokio::spawn(async move { asker.sample(sampling_request("srv")).await })
            })
            .collect();
        let picked = |count: usize| {
            let sampler = sampler.clone();
            tokio::time::timeout(Duration::from_secs(5), async move {
                while sampler.picks.lock().len() < count {
                    tokio::task::yield_now().await;
                }
            })
        };
        picked(SAMPLING_PER_SERVER).await.unwrap();
        // The flood: each one more fails at once (never claiming the user's rejection),
        // and never runs on the user's key.
        for _ in 0..20 {
            let flood = tokio::time::timeout(
                Duration::from_secs(5),
                asker.sample(sampling_request("srv")),
            )
            .await;
            assert_eq!(
                flood,
                Ok(SamplingAnswer::Failed(
                    crate::sampling::TOO_MANY_SAMPLING.into()
                ))
            );
        }
        assert_eq!(sampler.picks.lock().len(), SAMPLING_PER_SERVER);
        assert!(asker.sampling_requests().is_empty(), "never shown");
        // Another server has its own places.
        let other = {
            let asker = asker.clone();
            tokio::spawn(async move { asker.sample(sampling_request("other")).await })
        };
        picked(SAMPLING_PER_SERVER + 1).await.unwrap();
        drop(held);
        for run in running {
            assert!(matches!(run.await.unwrap(), SamplingAnswer::Sampled(_)));
        }
        assert!(matches!(other.await.unwrap(), SamplingAnswer::Sampled(_)));
        // Their places are given back once they end.
        assert!(matches!(
            asker.sample(sampling_request("srv")).await,
            SamplingAnswer::Sampled(_)
        ));
    }

    #[tokio::test]
    async fn a_sampling_request_nobody_answers_is_rejected_and_forgotten() {
        let asker =
            WindowAsker::with_sampler(Duration::from_millis(50), FakeSampler::new(ToolPolicy::Ask));
        assert_eq!(
            asker.sample(sampling_request("srv")).await,
            SamplingAnswer::Rejected
        );
        assert!(asker.sampling_requests().is_empty());
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
