//! The long-lived engine behind the window: MCP servers kept running and in step with the
//! file, turns that run in the background with their events streamed to the window, and
//! stop and approval answers that reach the running turn.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use conduit_core::agent::{AgentEvent, EventSink};
use conduit_core::content::{MediaRef, ToolOrigin};
use conduit_core::context_fit::ContextFit;
use conduit_core::media::MediaStore;
use conduit_core::text::visible;
use conduit_mcp::runtime::McpRuntime;

use crate::asks::WindowAsker;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::Host;
use crate::approval::{ConversationAllow, Decision, WindowApproval};
use crate::chat::{ApprovalMode, Attachment, ChatRequest, ProviderChoice};
use crate::mcp::{ServerState, ServerStatus};

/// What the window sends.
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct SendRequest {
    /// Continue this conversation; `None` starts a new one.
    pub conversation: Option<String>,
    pub text: String,
    /// Hashes of images stored beforehand with [`App::store_attachment`]; their
    /// references are rebuilt from the store, never taken from the window.
    #[serde(default)]
    pub attachments: Vec<String>,
    /// Text files the window read for the message (picked or dropped); the host checks
    /// each ([`conduit_core::attached`]) before anything is saved.
    #[serde(default)]
    #[ts(as = "Option<Vec<AttachedFile>>", optional)]
    pub files: Vec<AttachedFile>,
    /// PDFs stored beforehand with [`App::store_attachment`], by hash, with the names
    /// they were picked or dropped under; checked by
    /// [`conduit_core::attached::check_document`] before anything is saved.
    #[serde(default)]
    #[ts(as = "Option<Vec<AttachedDocument>>", optional)]
    pub documents: Vec<AttachedDocument>,
    /// A provider id from settings.
    pub provider: String,
    /// `None` uses the provider's default model.
    pub model: Option<String>,
    /// For a new conversation: the tools it may use (kept with it). A continued
    /// conversation keeps its own; this is then ignored.
    #[serde(default)]
    #[ts(optional)]
    pub toolset: Option<crate::toolset::Toolset>,
    /// Servers' resources attached to the message; the host reads them.
    #[serde(default)]
    #[ts(as = "Option<Vec<crate::mentions::ResourceMention>>", optional)]
    pub resources: Vec<crate::mentions::ResourceMention>,
    /// A server's prompt used with the message: its messages go first.
    #[serde(default)]
    #[ts(optional)]
    pub prompt: Option<crate::mentions::PromptMention>,
    /// Tokens of the views whose context (`ui/update-model-context`) goes with this
    /// message; the host holds the context itself.
    #[serde(default)]
    #[ts(as = "Option<Vec<String>>", optional)]
    pub view_context: Vec<String>,
    /// Answers the conversation's last message again with no new one (after a turn that
    /// failed); nothing else may come with it.
    #[serde(default)]
    #[ts(as = "Option<bool>", optional)]
    pub again: bool,
    /// With `again`: the last user message is answered anew, whatever answered it before
    /// ("Answer again"); that answer is kept, marked replaced.
    #[serde(default)]
    #[ts(as = "Option<bool>", optional)]
    pub replace_answer: bool,
    /// This message takes the place of the conversation's last message of the user's
    /// and its answer ("Edit"), which are kept, marked replaced.
    #[serde(default)]
    #[ts(as = "Option<bool>", optional)]
    pub replace_message: bool,
    /// For a new conversation: its instructions to the model (kept with it). A continued
    /// conversation keeps its own; this is then ignored.
    #[serde(default)]
    #[ts(optional)]
    pub instructions: Option<String>,
    /// How much the model is asked to think ("Thinking" beside the model picker);
    /// `None` leaves it at its default.
    #[serde(default)]
    #[ts(optional)]
    pub reasoning: Option<conduit_core::provider::ReasoningEffort>,
}

/// A text file the window read: the name it was picked or dropped under, and its text.
#[derive(Debug, Clone, PartialEq, Deserialize, ts_rs::TS)]
pub struct AttachedFile {
    pub name: String,
    pub text: String,
}

/// A PDF the window stored for a message: its hash in the media store and the name it
/// was picked or dropped under.
#[derive(Debug, Clone, PartialEq, Deserialize, ts_rs::TS)]
pub struct AttachedDocument {
    pub hash: String,
    pub name: String,
}

/// A turn that started: where it is saved, and its id for stop and approval answers.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct Started {
    pub conversation: String,
    pub turn: String,
}

/// What the window hears about a turn: the agent's events, then how it ended.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TurnEvent {
    /// The servers whose start the turn waits for before it begins, so that their tools
    /// are offered (a first `npx` downloading its package): sent as the set changes, and
    /// empty once it no longer waits. [`App::answer_without_waiting`] ends the wait.
    ServersStarting { servers: Vec<String> },
    Agent {
        /// Boxed: an agent event is much larger than `Ended`.
        event: Box<AgentEvent>,
    },
    Ended {
        status: TurnStatus,
        #[serde(skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        error: Option<CommandError>,
        /// Whether the user's message was saved: a turn refused or stopped while it was
        /// made ready (a mentioned resource still being read) saved nothing, and the window
        /// gives the message back. The host says so: the page cannot tell an unsaved
        /// "yes" from an earlier one.
        saved: bool,
        /// Why a complete turn's answer is not all it could be: cut off at the model's
        /// output limit, refused, or stopped at the most requests one message may make.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        notice: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Complete,
    Interrupted,
    Error,
}

pub use crate::window_error::{CommandError, ErrorAction};

/// The MCP servers as the window lists them.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct McpOverview {
    pub servers: Vec<ServerStatus>,
    pub config_error: Option<String>,
}

pub use crate::mcp::{ServerTools, ToolSetting};

/// The most characters a conversation's instructions may have: a long system prompt is
/// sent with every request of every turn.
pub const MAX_INSTRUCTIONS: usize = 20_000;

/// Keeps `instructions` as `conversation`'s (blank: none), refused past
/// [`MAX_INSTRUCTIONS`] characters.
fn set_instructions(
    store: &conduit_store::Store,
    conversation: &str,
    instructions: &str,
) -> Result<(), AppError> {
    let count = instructions.chars().count();
    if count > MAX_INSTRUCTIONS {
        return Err(AppError::TooLongInstructions(count));
    }
    let kept = Some(instructions.trim()).filter(|text| !text.is_empty());
    // Kept as written (only blank text is none): leading spaces may be meant.
    store.set_instructions(conversation, kept.map(|_| instructions))?;
    Ok(())
}

/// What the window says of a turn that ended complete but short of a whole answer.
fn notice_of(outcome: &conduit_core::agent::Outcome) -> Option<String> {
    if *outcome == conduit_core::agent::Outcome::TurnLimit {
        return Some(format!(
            "The model stopped after {} requests in a row, the most one message may make. Send another message to let it go on.",
            conduit_core::agent::DEFAULT_MAX_TURNS
        ));
    }
    outcome.cut_short().map(sentence)
}

/// The turn's notice with what its requests left out to fit the model's context, if
/// they had to, and what else did not reach the model (a PDF its server refused): the
/// answer read less than the conversation holds, and the user is told.
fn joined_notices(
    notice: Option<String>,
    fitted: Option<ContextFit>,
    left_out: &[String],
) -> Option<String> {
    let fitted = fitted.map(|fit| sentence(fit.describe()));
    let parts: Vec<String> = notice
        .into_iter()
        .chain(fitted)
        .chain(left_out.iter().cloned())
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// `words` with a capital first letter and a full stop.
fn sentence(words: &str) -> String {
    let mut chars = words.chars();
    let first = chars.next().map(|c| c.to_uppercase().to_string());
    format!("{}{}.", first.unwrap_or_default(), chars.as_str())
}

/// Where a turn's events go.
pub type TurnSink = Arc<dyn Fn(TurnEvent) + Send + Sync>;

struct Turn {
    /// The conversation it runs in: one turn at a time in each.
    conversation: String,
    cancel: CancellationToken,
    /// Cancelled when the user wants the answer without the servers still starting.
    without_waiting: CancellationToken,
    /// Set once the turn is prepared (its tools known); answers before that find no
    /// question.
    approval: Arc<std::sync::OnceLock<Arc<WindowApproval>>>,
}

/// The engine the window talks to.
pub struct App {
    host: Arc<Host>,
    /// Started in the background when the app starts; a turn waits for it.
    servers: std::sync::OnceLock<Arc<McpRuntime>>,
    /// The servers' questions, waiting for the user.
    asker: Arc<WindowAsker>,
    /// Conduit as an MCP server over HTTP, as the settings say.
    http: crate::serve_http::HttpEndpoint,
    turns: Mutex<HashMap<String, Turn>>,
    /// The MCP Apps views the window has open.
    views: crate::app_views::AppViews,
    /// Attachments stored and not yet sent with a message ([`MAX_UNSENT_ATTACHMENTS`]).
    unsent: Mutex<UnsentAttachments>,
}

/// The attachments the window stored that no message has taken yet: by hash, their bytes
/// and when they were stored.
#[derive(Default)]
struct UnsentAttachments {
    by_hash: HashMap<String, (usize, std::time::Instant)>,
    bytes: usize,
}

impl UnsentAttachments {
    /// Forgets attachments stored longer ago than [`UNSENT_COUNTED_FOR`]: the window does
    /// not say when the user takes one out of the composer, or a send that failed is given
    /// up, so they leave the count by time (the sweep removes their files a day later).
    fn forget_old(&mut self) {
        let bytes = &mut self.bytes;
        self.by_hash.retain(|_, (size, stored)| {
            let keep = stored.elapsed() < UNSENT_COUNTED_FOR;
            if !keep {
                *bytes = bytes.saturating_sub(*size);
            }
            keep
        });
    }
}

/// The most the window may have stored as attachments and not sent, in bytes and in
/// number, within [`UNSENT_COUNTED_FOR`]: a page script storing 64 MiB attachments in a
/// loop filled the disk (the sweep removes unsent ones only after a day). A person
/// attaches a few images before sending.
const MAX_UNSENT_ATTACHMENT_BYTES: usize = 1024 * 1024 * 1024;
const MAX_UNSENT_ATTACHMENTS: usize = 200;
const UNSENT_COUNTED_FOR: std::time::Duration = std::time::Duration::from_secs(60 * 60);

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] conduit_store::StoreError),
    #[error(transparent)]
    Media(#[from] conduit_core::media::MediaError),
    #[error(transparent)]
    Settings(#[from] crate::SettingsError),
    #[error("no turn {0} is running")]
    NoTurn(String),
    #[error(
        "an answer is still being written in this conversation: wait for it, or stop it, before sending another message"
    )]
    TurnRunning,
    #[error(
        "the instructions are {0} characters long; at most {MAX_INSTRUCTIONS} are kept (they go with every request)"
    )]
    TooLongInstructions(usize),
    #[error("the message is empty: type something or attach a file")]
    EmptyMessage,
    #[error("the attachment {0} is not in the media store; attach it again")]
    UnknownAttachment(String),
    #[error("the attachment {0} is not an image; attach it again")]
    AttachmentNotAnImage(String),
    #[error(
        "the attachment is {mib:.1} MiB; the most Conduit takes is {max} MiB",
        mib = *bytes as f64 / (1024.0 * 1024.0),
        max = ATTACHMENT_MAX_BYTES / (1024 * 1024)
    )]
    AttachmentTooLarge { bytes: usize },
    #[error(transparent)]
    Toolset(#[from] crate::toolset::ToolsetError),
    #[error(
        "{0} changed since Settings showed it (a server can change its tools at any time): nothing was saved; look at it again"
    )]
    ChangedSinceShown(String),
    #[error("nothing was changed: it was not allowed in Conduit's question")]
    NotAllowed,
    #[error("a message takes at most {max} {what}")]
    TooManyInMessage { what: &'static str, max: usize },
    #[error(
        "the file is neither an image (PNG, JPEG, GIF, WebP and the like), a PDF, nor UTF-8 text (code, Markdown, CSV, JSON, logs)"
    )]
    NotAnImage,
    #[error(transparent)]
    File(#[from] conduit_core::attached::AttachedFileError),
    #[error(
        "{count} attachments ({mib} MiB) were stored in the last hour and not sent, the most Conduit keeps: send the ones you attached, or wait",
        mib = bytes / (1024 * 1024)
    )]
    TooManyUnsent { count: usize, bytes: usize },
}

/// The most images, text files, resources and views' contexts that go with one message. Each is read
/// and copied into the message (a resource up to 512 KB of text): the page asks, and a
/// script there could ask for one resource a hundred thousand times.
const MAX_IMAGES_IN_MESSAGE: usize = 20;
const MAX_FILES_IN_MESSAGE: usize = 20;
const MAX_RESOURCES_IN_MESSAGE: usize = 20;
const MAX_VIEWS_IN_MESSAGE: usize = 20;

/// What goes with a message, each named once, or why it cannot: more than one message
/// takes. The same image, resource or view named again goes once. Views are different:
/// a chat may hold more views that set context than one message takes (an app called
/// 30 times), and refusing would refuse every message of that chat; the newest
/// [`MAX_VIEWS_IN_MESSAGE`] go (the page names them oldest first), and more names than
/// views can be open at once are refused.
fn bounded_request(mut request: SendRequest) -> Result<SendRequest, AppError> {
    for (count, what, max) in [
        (request.attachments.len(), "images", MAX_IMAGES_IN_MESSAGE),
        (request.files.len(), "files", MAX_FILES_IN_MESSAGE),
        (request.documents.len(), "PDFs", MAX_FILES_IN_MESSAGE),
        (
            request.resources.len(),
            "resources",
            MAX_RESOURCES_IN_MESSAGE,
        ),
        (
            request.view_context.len(),
            "views' contexts",
            crate::app_views::MAX_OPEN,
        ),
    ] {
        if count > max {
            return Err(AppError::TooManyInMessage { what, max });
        }
    }
    // Refused before a new conversation is made for them.
    if let Some(instructions) = &request.instructions {
        let count = instructions.chars().count();
        if count > MAX_INSTRUCTIONS {
            return Err(AppError::TooLongInstructions(count));
        }
    }
    fn once<T: PartialEq>(items: &mut Vec<T>) {
        let mut kept: Vec<T> = Vec::with_capacity(items.len());
        for item in items.drain(..) {
            if !kept.contains(&item) {
                kept.push(item);
            }
        }
        *items = kept;
    }
    once(&mut request.attachments);
    once(&mut request.documents);
    once(&mut request.resources);
    once(&mut request.view_context);
    let older = request
        .view_context
        .len()
        .saturating_sub(MAX_VIEWS_IN_MESSAGE);
    if older > 0 {
        tracing::info!(
            left_out = older,
            "the oldest views' contexts were left out of a message"
        );
        request.view_context.drain(..older);
    }
    Ok(request)
}

/// How many of a server's tools an "allow all" question lists by name.
const QUESTION_TOOLS: usize = 8;

/// The native question before `tool` of `server` (which says `said` of itself) is always
/// allowed, from Settings or from a call's card.
fn always_allow_question(server: &str, tool: &str, said: &str) -> String {
    format!(
        "Always allow {} of server {}?\n\nEach call will then run without asking you, \
         with whatever arguments the model or a view chooses, for as long as the tool \
         and the server stay as they are now.\n\n{}",
        visible(tool),
        visible(server),
        tool_line(tool, said),
    )
}

/// A tool and the first line of what its server says it does (at most 200 characters),
/// each hidden character shown as its code.
fn tool_line(tool: &str, said: &str) -> String {
    let first = said.lines().next().unwrap_or_default();
    let mut line: String = first.chars().take(200).collect();
    if line.len() < said.trim_end().len() {
        line.push('…');
    }
    if line.is_empty() {
        return format!("{} (no description)", visible(tool));
    }
    format!("{}: {}", visible(tool), visible(&line))
}

/// Asks `question` through `confirm` (a native dialog, which blocks) off the async
/// workers; a no is [`AppError::NotAllowed`].
async fn ask_off_the_workers(
    confirm: impl FnOnce(String) -> bool + Send + 'static,
    question: String,
) -> Result<(), AppError> {
    let allowed = match tokio::task::spawn_blocking(move || confirm(question)).await {
        Ok(allowed) => allowed,
        // A question that could not be asked allows nothing; the log says why.
        Err(error) => {
            tracing::warn!(%error, "a Settings allow could not be asked about; not allowed");
            false
        }
    };
    if allowed {
        Ok(())
    } else {
        Err(AppError::NotAllowed)
    }
}

/// The most bytes an attachment from the window may have: a camera's photo (a 61-megapixel
/// JPEG is ~30 MB) with room to spare; what goes to a provider is shrunk to what it takes.
/// The page sends whatever it likes, so this is checked before any decode.
pub const ATTACHMENT_MAX_BYTES: usize = 64 * 1024 * 1024;

/// Refuses an attachment of `bytes` over [`ATTACHMENT_MAX_BYTES`]; the command checks it
/// before it even copies the page's body.
pub fn attachment_fits(bytes: usize) -> Result<(), AppError> {
    if bytes > ATTACHMENT_MAX_BYTES {
        return Err(AppError::AttachmentTooLarge { bytes });
    }
    Ok(())
}

impl App {
    pub fn new(host: Arc<Host>) -> Arc<Self> {
        Arc::new(Self {
            http: crate::serve_http::HttpEndpoint::new(host.clone()),
            asker: WindowAsker::with_sampler(crate::asks::ANSWER_WAIT, host.clone()),
            host,
            servers: std::sync::OnceLock::new(),
            turns: Mutex::new(HashMap::new()),
            views: Default::default(),
            unsent: Mutex::default(),
        })
    }

    /// The MCP Apps views the window has open.
    pub fn views(&self) -> &crate::app_views::AppViews {
        &self.views
    }

    /// The host, shared (for work moved off the async workers).
    pub fn host_arc(&self) -> Arc<Host> {
        self.host.clone()
    }

    pub fn host(&self) -> &Host {
        &self.host
    }

    /// Notes that the host let the call `call` of `conversation` run on `origin`, with
    /// what ran as its server as the turn's recorder saved it in the history (for every
    /// turn, the command line's too): kept in memory for the views this process opens.
    fn note_call_ran(&self, conversation: &str, call: &str, origin: ToolOrigin) {
        let saved = self
            .host
            .store()
            .and_then(|store| store.call_server(conversation, call));
        let server_print = match saved {
            Ok(Some(server_print)) => server_print,
            Ok(None) => {
                tracing::warn!("a call ran with no record of its server; its view stays closed");
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "which server ran a call could not be read");
                return;
            }
        };
        self.views.ran(
            call,
            crate::app_views::RanOn {
                origin,
                server_print,
                conversation: conversation.to_owned(),
            },
        );
    }

    /// The MCP runtime, kept in step with the `mcpServers` file; the first call starts it
    /// and this waits until its servers first started (ready or failed).
    pub async fn servers(&self) -> Arc<McpRuntime> {
        let servers = self.runtime();
        servers.until_applied().await;
        servers
    }

    /// The MCP runtime at once, its servers maybe still starting (the first call starts
    /// it): for following its events from the start.
    pub fn runtime(&self) -> Arc<McpRuntime> {
        self.servers
            .get_or_init(|| {
                let asker: Arc<dyn conduit_mcp::elicit::Asker> = self.asker.clone();
                Arc::new(self.host.watch_mcp(Some(asker)))
            })
            .clone()
    }

    /// Applies the `mcpServers` file in the background after the app wrote it. The file's
    /// watcher does so too, but it may not be running (the system's inotify watches used
    /// up), and an edit from Settings must not depend on it; entries that did not change
    /// are left running, so a second apply restarts nothing.
    pub fn apply_mcp_file_soon(&self) {
        let servers = self.runtime();
        conduit_core::task::spawn(async move {
            if let Err(error) = servers.reload().await {
                tracing::warn!(%error, "the mcpServers file written from Settings could not be applied");
            }
        });
    }

    /// Conduit's HTTP endpoint for other MCP clients.
    pub fn http(&self) -> &crate::serve_http::HttpEndpoint {
        &self.http
    }

    /// The servers' questions waiting for the user, and a signal when they change.
    pub fn asker(&self) -> &Arc<WindowAsker> {
        &self.asker
    }

    /// Every server in the file with its state (all `starting` until the first start
    /// finished), and the file's read error if it has one.
    pub fn mcp_servers(&self) -> McpOverview {
        match self.servers.get() {
            Some(servers) => McpOverview {
                servers: servers.statuses(),
                config_error: servers.config_error(),
            },
            None => match self.host.mcp_config() {
                Ok(snapshot) => McpOverview {
                    servers: snapshot
                        .servers
                        .iter()
                        .map(|entry| ServerStatus {
                            name: entry.name.clone(),
                            state: if entry.disabled {
                                ServerState::Disabled
                            } else {
                                ServerState::Starting
                            },
                        })
                        .collect(),
                    config_error: None,
                },
                Err(error) => McpOverview {
                    servers: Vec::new(),
                    config_error: Some(error.to_string()),
                },
            },
        }
    }

    /// Stores an image or a PDF the user attached (pasted, dropped or picked); the bytes
    /// decide its type, and one over [`ATTACHMENT_MAX_BYTES`] (a PDF over
    /// [`conduit_core::attached::MAX_DOCUMENT_BYTES`]), or an image that does not decode
    /// within [`conduit_core::images`]' limits, is refused.
    pub async fn store_attachment(&self, bytes: Vec<u8>) -> Result<MediaRef, AppError> {
        // A PDF's own limit first: one of 70 MiB is told the 32 MiB it may have.
        if conduit_core::attached::is_pdf(&bytes) {
            conduit_core::attached::document_fits("The PDF", bytes.len() as u64)?;
        }
        attachment_fits(bytes.len())?;
        // The store takes audio too (a tool's), by its first bytes and without a decode:
        // an attachment must be an image or a PDF.
        let is_pdf = conduit_core::attached::is_pdf(&bytes);
        if image::guess_format(&bytes).is_err() && !is_pdf {
            return Err(AppError::NotAnImage);
        }
        {
            let mut unsent = self.unsent.lock();
            unsent.forget_old();
            if unsent.by_hash.len() >= MAX_UNSENT_ATTACHMENTS
                || unsent.bytes.saturating_add(bytes.len()) > MAX_UNSENT_ATTACHMENT_BYTES
            {
                return Err(AppError::TooManyUnsent {
                    count: unsent.by_hash.len(),
                    bytes: unsent.bytes,
                });
            }
        }
        let media = self.host.media.clone();
        let declared = is_pdf.then_some(conduit_core::attached::PDF_MIME);
        let stored = tokio::task::spawn_blocking(move || {
            if is_pdf {
                media.put(&bytes, declared)
            } else {
                media.put(&crate::upright(bytes), None)
            }
        })
        .await
        .map_err(|e| conduit_core::media::MediaError::Io(e.to_string()))??;
        // What was stored counts (a photo turned upright is stored anew).
        let size = usize::try_from(stored.bytes).unwrap_or(usize::MAX);
        let mut unsent = self.unsent.lock();
        let now = std::time::Instant::now();
        if unsent
            .by_hash
            .insert(stored.hash.clone(), (size, now))
            .is_none()
        {
            unsent.bytes = unsent.bytes.saturating_add(size);
        }
        Ok(stored)
    }

    /// Attachments a message took no longer count as unsent.
    fn sent_attachments(&self, hashes: &[String]) {
        let mut unsent = self.unsent.lock();
        for hash in hashes {
            if let Some((size, _)) = unsent.by_hash.remove(hash) {
                unsent.bytes = unsent.bytes.saturating_sub(size);
            }
        }
    }

    /// Saves a copy of the stored file `source` at `target`, a place the user chose in a
    /// save dialog: through a new private file renamed into place, as an export is
    /// written, so a failed save leaves no half file and a link at that name is replaced,
    /// not followed.
    pub async fn save_copy(source: PathBuf, target: PathBuf) -> std::io::Result<()> {
        tokio::task::spawn_blocking(move || {
            let bytes = std::fs::read(&source)?;
            conduit_files::write_new_atomically(&target, &bytes, conduit_files::PRIVATE_FILE_MODE)
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// Saves the user's message and runs the turn in the background; events go to `sink`
    /// and end with [`TurnEvent::Ended`].
    /// A turn that cannot start (no key, no model, an empty message) is refused here,
    /// before anything is saved, with what to do about it.
    pub fn send(
        self: &Arc<Self>,
        request: SendRequest,
        sink: TurnSink,
    ) -> Result<Started, CommandError> {
        let nothing_sent = request.text.trim().is_empty()
            && request.attachments.is_empty()
            && request.documents.is_empty()
            && request.files.is_empty()
            && request.resources.is_empty()
            && request.prompt.is_none();
        if request.again
            && (!nothing_sent || !request.view_context.is_empty() || request.conversation.is_none())
        {
            return Err(CommandError::message(
                "Answering again sends no new message, and needs the conversation to answer.",
            ));
        }
        if request.replace_answer && !request.again {
            return Err(CommandError::message(
                "Only an answer given again replaces the one before.",
            ));
        }
        if request.replace_message && (request.again || request.conversation.is_none()) {
            return Err(CommandError::message(
                "A changed message replaces one of a saved conversation, and is a new message.",
            ));
        }
        if nothing_sent && !request.again {
            return Err(CommandError::from(AppError::EmptyMessage));
        }
        self.host
            .check_provider(&request.provider, request.model.as_deref())
            .map_err(|e| CommandError::from_chat(&e))?;
        let mut request = bounded_request(request).map_err(CommandError::from)?;
        let views = std::mem::take(&mut request.view_context);
        if let Some(context) = self.views.context(&views) {
            // Shown in the user's message too: the user sees what the model is told.
            request.text = if request.text.trim().is_empty() {
                context
            } else {
                format!("{}\n\n{context}", request.text)
            };
        }
        let attachments: Vec<String> = request
            .attachments
            .iter()
            .cloned()
            .chain(
                request
                    .documents
                    .iter()
                    .map(|document| document.hash.clone()),
            )
            .collect();
        let started = self.start_turn(request, sink).map_err(CommandError::from)?;
        self.sent_attachments(&attachments);
        // Used once, and only by a turn that started: a refused send loses nothing.
        self.views.forget_context(&views);
        Ok(started)
    }

    fn start_turn(
        self: &Arc<Self>,
        request: SendRequest,
        sink: TurnSink,
    ) -> Result<Started, AppError> {
        let attachments = request
            .attachments
            .iter()
            .map(|hash| {
                let media = self
                    .host
                    .media
                    .reference(hash)
                    .ok_or_else(|| AppError::UnknownAttachment(hash.clone()))?;
                // A PDF (or a tool's audio) named as an image would go to the model as one.
                if !media.mime.starts_with("image/") {
                    return Err(AppError::AttachmentNotAnImage(hash.clone()));
                }
                Ok(media)
            })
            .collect::<Result<Vec<_>, AppError>>()?;
        // Checked before a new conversation is made for them, as files are.
        let documents = request
            .documents
            .iter()
            .map(|document| {
                let media = self
                    .host
                    .media
                    .reference(&document.hash)
                    .ok_or_else(|| AppError::UnknownAttachment(document.hash.clone()))?;
                Ok(conduit_core::attached::check_document(
                    &document.name,
                    media,
                )?)
            })
            .collect::<Result<Vec<_>, AppError>>()?;
        // Checked before a new conversation is made for them: a refused file loses nothing.
        // The same file named twice goes once (as checked: `/a/x.csv` is `x.csv`).
        let mut files: Vec<conduit_core::attached::CheckedFile> = Vec::new();
        for file in request.files {
            let checked = conduit_core::attached::check_file(&file.name, file.text.into_bytes())?;
            if !files.contains(&checked) {
                files.push(checked);
            }
        }
        let store = self.host.store()?;
        let conversation = match request.conversation {
            Some(id) => {
                store.conversation(&id)?;
                id
            }
            None => {
                let id =
                    store.create_conversation(Some(&request.provider), request.model.as_deref())?;
                if let Some(instructions) = &request.instructions {
                    set_instructions(&store, &id, instructions)?;
                }
                if let Some(toolset) = &request.toolset {
                    self.host.set_conversation_toolset(&id, toolset)?;
                }
                id
            }
        };
        let turn = uuid::Uuid::now_v7().to_string();
        let cancel = CancellationToken::new();
        let without_waiting = CancellationToken::new();
        let conversation_of_calls = conversation.clone();
        // How short the turn's requests had to be made, and what else did not reach the
        // model (each said once), said when it ends.
        let fitted = Arc::new(Mutex::new(None::<ContextFit>));
        let left_out = Arc::new(Mutex::new(Vec::<String>::new()));
        let agent_sink: EventSink = {
            let sink = sink.clone();
            let fitted = fitted.clone();
            let left_out = left_out.clone();
            let app = Arc::downgrade(self);
            // The server and tool of each complete call, until the host lets it run: then
            // its view may open (`open_view`).
            let ready = Mutex::new(HashMap::<String, ToolOrigin>::new());
            Arc::new(move |event| {
                match &event {
                    AgentEvent::ContextShortened { fit } => *fitted.lock() = Some(*fit),
                    AgentEvent::LeftOut { what } => {
                        let mut said = left_out.lock();
                        if !said.contains(what) {
                            said.push(what.clone());
                        }
                    }
                    AgentEvent::ToolCallReady { call } => {
                        if let Some(origin) = &call.origin {
                            ready.lock().insert(call.id.clone(), origin.clone());
                        }
                    }
                    AgentEvent::ToolCallRunning { id } => {
                        let origin = ready.lock().remove(id);
                        if let (Some(origin), Some(app)) = (origin, app.upgrade()) {
                            app.note_call_ran(&conversation_of_calls, id, origin);
                        }
                    }
                    _ => {}
                }
                sink(TurnEvent::Agent {
                    event: Box::new(event),
                })
            })
        };
        let approval = Arc::new(std::sync::OnceLock::new());
        {
            // Checked and taken under one lock: two messages sent at once (a double
            // Enter, a view's message while the model answers) would otherwise both run,
            // their answers interleaved in one conversation and each model reading the
            // other's half-written turn.
            let mut turns = self.turns.lock();
            if turns.values().any(|t| t.conversation == conversation) {
                return Err(AppError::TurnRunning);
            }
            turns.insert(
                turn.clone(),
                Turn {
                    conversation: conversation.clone(),
                    cancel: cancel.clone(),
                    without_waiting: without_waiting.clone(),
                    approval: approval.clone(),
                },
            );
        }
        let chat = ChatRequest {
            conversation: Some(conversation.clone()),
            provider: ProviderChoice::Saved(request.provider),
            model: request.model,
            prompt: request.text,
            attachments: attachments
                .into_iter()
                .map(Attachment::Stored)
                .chain(documents.into_iter().map(Attachment::Document))
                .chain(files.into_iter().map(Attachment::Text))
                .collect(),
            approval: ApprovalMode::Window(agent_sink.clone()),
            max_turns: conduit_core::agent::DEFAULT_MAX_TURNS,
            // The conversation's instructions (`prepare_turn` reads them).
            system: None,
            reasoning: request.reasoning,
            read_timeout: None,
            resources: request.resources,
            prompt_use: request.prompt,
            again: request.again,
            replace_answer: request.replace_answer,
            replace_message: request.replace_message,
        };
        let app = self.clone();
        let turn_id = turn.clone();
        let conversation_of_turn = conversation.clone();
        let saved = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let waiting_sink = sink.clone();
        conduit_core::task::spawn(async move {
            // The turn runs in its own task so that even a panic in it ends the turn
            // for the window instead of leaving it waiting.
            let host_app = app.clone();
            let run_cancel = cancel.clone();
            let made_ready = saved.clone();
            let run = tokio::spawn(async move {
                // A server still starting (the app just opened, an entry just added) has
                // no tools yet: the turn waits for it, saying so, unless the user wants
                // the answer without it, or stops. A server this conversation switched
                // off is not waited for.
                let servers = host_app.runtime();
                let off = host_app.servers_switched_off(&conversation_of_turn, &servers);
                let waited = servers.until_started(
                    |server| off.iter().any(|off| off == server),
                    |starting| {
                        waiting_sink(TurnEvent::ServersStarting {
                            servers: starting.to_vec(),
                        });
                    },
                );
                tokio::select! {
                    () = waited => {}
                    () = without_waiting.cancelled() => {
                        waiting_sink(TurnEvent::ServersStarting { servers: Vec::new() });
                    }
                    () = run_cancel.cancelled() => return Err(crate::chat::ChatError::Stopped),
                }
                // And while the turn is made ready: a mentioned resource or prompt is read
                // from its server, which may never answer.
                let prepared = tokio::select! {
                    prepared = host_app.host.prepare_turn(chat, &servers) => prepared?,
                    () = run_cancel.cancelled() => return Err(crate::chat::ChatError::Stopped),
                };
                // A turn made ready has saved the message (and nothing before that has).
                made_ready.store(true, std::sync::atomic::Ordering::SeqCst);
                if let Some(window) = prepared.window_approval() {
                    // Only this turn's task sets it, once.
                    let _ = approval.set(window);
                }
                prepared.run(agent_sink, run_cancel).await
            });
            let result = run.await;
            app.turns.lock().remove(&turn_id);
            let mut notice = None;
            let (status, error) = match result {
                Ok(Ok(done)) => match done.outcome {
                    Ok(_) if cancel.is_cancelled() => (TurnStatus::Interrupted, None),
                    Ok(outcome) => {
                        notice = notice_of(&outcome);
                        (TurnStatus::Complete, None)
                    }
                    Err(error) => (TurnStatus::Error, Some(CommandError::from_provider(&error))),
                },
                Ok(Err(crate::chat::ChatError::Stopped)) => (TurnStatus::Interrupted, None),
                Ok(Err(error)) => {
                    tracing::warn!(%error, "a turn could not run");
                    (TurnStatus::Error, Some(CommandError::from_chat(&error)))
                }
                Err(crashed) => {
                    tracing::error!(error = %crashed, "a turn crashed");
                    let message =
                        format!("The turn stopped unexpectedly ({crashed}); the log has details.");
                    (TurnStatus::Error, Some(CommandError::message(message)))
                }
            };
            // What the model did not read is said however the turn ended.
            let notice = joined_notices(notice, *fitted.lock(), &left_out.lock());
            let saved = saved.load(std::sync::atomic::Ordering::SeqCst);
            sink(TurnEvent::Ended {
                status,
                error,
                saved,
                notice,
            });
        });
        Ok(Started { conversation, turn })
    }

    /// A running turn that waits for servers to start begins at once with the tools of
    /// those ready. A turn past its wait, or ended, has nothing to skip.
    pub fn answer_without_waiting(&self, turn: &str) {
        if let Some(running) = self.turns.lock().get(turn) {
            running.without_waiting.cancel();
        }
    }

    /// The servers `conversation` switched off, which its turns do not wait for (all,
    /// when its choice cannot be read: it then offers no tool); none when the store
    /// fails (waiting is the safe side of that).
    fn servers_switched_off(&self, conversation: &str, servers: &McpRuntime) -> Vec<String> {
        match self.host.conversation_toolset(conversation, servers) {
            Ok(kept) => kept.toolset.off_servers,
            Err(error) => {
                tracing::warn!(%error, "a conversation's toolset could not be read; its turn waits for every server");
                Vec::new()
            }
        }
    }

    /// Stops a running turn; the partial answer is kept, marked interrupted. A turn that
    /// has ended has nothing left to stop: Stop pressed as it ends is no error.
    pub fn stop(&self, turn: &str) {
        if let Some(running) = self.turns.lock().get(turn) {
            running.cancel.cancel();
        }
    }

    /// Answers the approval question about `call_id` in `turn`. "Always allow" is saved
    /// only after `confirm` (a native question the page cannot answer) says yes: the
    /// page only asks, as Settings' allows do, and until then the call keeps waiting.
    pub async fn answer(
        &self,
        turn: &str,
        call_id: &str,
        decision: Decision,
        confirm: impl FnOnce(String) -> bool + Send + 'static,
    ) -> Result<bool, AppError> {
        let approval = self
            .turns
            .lock()
            .get(turn)
            .map(|t| t.approval.get().cloned())
            .ok_or_else(|| AppError::NoTurn(turn.to_owned()))?;
        // Not prepared yet: no question was asked.
        let Some(approval) = approval else {
            return Ok(false);
        };
        if decision == Decision::AlwaysAllow {
            let Some(trust) = approval.waiting_tool(call_id) else {
                return Ok(false);
            };
            let question =
                always_allow_question(&trust.origin.server, &trust.origin.tool, &trust.description);
            ask_off_the_workers(confirm, question).await?;
        }
        // An "always" is saved in Settings, whose lock may be held for long: off the workers.
        let call_id = call_id.to_owned();
        let answered = tokio::task::spawn_blocking(move || approval.answer(&call_id, decision))
            .await
            .map_err(|error| {
                crate::SettingsError::Invalid(format!("the answer could not be given: {error}"))
            })?;
        Ok(answered?)
    }

    /// What `server` wrote to stderr and sent as log messages lately (secrets hidden);
    /// empty for a server that does not run (off, or not started yet).
    pub fn mcp_server_output(&self, server: &str) -> conduit_mcp::servers::ServerOutput {
        self.runtime().output(server).unwrap_or_default()
    }

    /// A server's approval policy and its tools, each with whether it is offered to
    /// models and the policy that applies to it.
    pub async fn mcp_server_tools(&self, server: &str) -> Result<ServerTools, AppError> {
        let servers = self.servers().await;
        Ok(self.host.server_tool_settings(&servers, server)?)
    }

    /// What each of `server`'s running tools is now, by the tool's own name, and what the
    /// server says each does.
    async fn server_trust(
        &self,
        server: &str,
    ) -> (
        HashMap<String, crate::settings::ApprovedTool>,
        BTreeMap<String, String>,
    ) {
        let slot = self.servers().await.slot_now(server);
        let mut trust = HashMap::new();
        let mut descriptions = BTreeMap::new();
        for (tool, (now, said)) in crate::approval::listed_trust(slot.as_ref(), server) {
            descriptions.insert(tool.clone(), said);
            trust.insert(tool, now);
        }
        (trust, descriptions)
    }

    /// Sets whether `tool` of `server` runs without asking, never, or after asking; an
    /// allow is bound to what the server and the tool are now, which must be what the
    /// window showed (`shown`, from [`App::mcp_server_tools`]), and is saved only after
    /// `confirm` (a native question the page cannot answer) says yes.
    pub async fn set_tool_policy(
        &self,
        server: &str,
        tool: &str,
        policy: crate::settings::ToolPolicy,
        shown: &str,
        confirm: impl FnOnce(String) -> bool + Send + 'static,
    ) -> Result<(), AppError> {
        let (trust, descriptions) = self.server_trust(server).await;
        if policy == crate::settings::ToolPolicy::Allow {
            if crate::approval::shown_token(&self.host, trust.get_key_value(tool)) != shown {
                return Err(AppError::ChangedSinceShown(format!(
                    "the tool {tool:?} of {server:?}"
                )));
            }
            let said = descriptions.get(tool).map_or("", String::as_str);
            ask_off_the_workers(confirm, always_allow_question(server, tool, said)).await?;
        }
        let (server, tool) = (server.to_owned(), tool.to_owned());
        self.host
            .update_settings_off_the_workers(move |settings| {
                match (policy, trust.get(&tool)) {
                    (crate::settings::ToolPolicy::Allow, Some(now)) => {
                        settings.allow_tool(&server, &tool, now.clone());
                    }
                    // A tool that is not running cannot be fingerprinted: its allow is asked
                    // about once when it is first called.
                    _ => settings.set_tool_policy(&server, &tool, policy),
                }
                Ok(())
            })
            .await?;
        Ok(())
    }

    /// Sets the policy of `server`'s tools that have none of their own; an allow covers
    /// the tools the server has now, as they are now, which must be what the window
    /// showed (`shown`, from [`App::mcp_server_tools`]).
    pub async fn set_server_policy(
        &self,
        server: &str,
        policy: crate::settings::ToolPolicy,
        shown: &str,
        confirm: impl FnOnce(String) -> bool + Send + 'static,
    ) -> Result<(), AppError> {
        let (trust, descriptions) = self.server_trust(server).await;
        if policy == crate::settings::ToolPolicy::Allow {
            if crate::approval::shown_token(&self.host, &trust) != shown {
                return Err(AppError::ChangedSinceShown(format!(
                    "what {server:?} offers"
                )));
            }
            let listed: Vec<String> = descriptions
                .iter()
                .take(QUESTION_TOOLS)
                .map(|(tool, said)| format!("• {}", tool_line(tool, said)))
                .collect();
            let more = match descriptions.len().saturating_sub(QUESTION_TOOLS) {
                0 => String::new(),
                more => format!("\n… and {more} more"),
            };
            let question = format!(
                "Always allow all {} tools of server {}?\n\nEach call of them will then run \
                 without asking you, with whatever arguments the model or a view chooses, for \
                 as long as the tools and the server stay as they are now (a tool it adds \
                 later is asked about).\n\n{}{more}",
                descriptions.len(),
                visible(server),
                listed.join("\n"),
            );
            ask_off_the_workers(confirm, question).await?;
        }
        let server = server.to_owned();
        self.host
            .update_settings_off_the_workers(move |settings| {
                if policy == crate::settings::ToolPolicy::Allow {
                    settings.allow_server(&server, trust.into_iter().collect());
                } else {
                    settings.set_server_policy(&server, policy);
                }
                Ok(())
            })
            .await?;
        Ok(())
    }

    /// Sets what happens to `server`'s sampling requests: ask, allow (run on the default
    /// provider and model and answer without asking) or deny.
    pub async fn set_sampling_policy(
        &self,
        server: &str,
        policy: crate::settings::ToolPolicy,
        confirm: impl FnOnce(String) -> bool + Send + 'static,
    ) -> Result<(), AppError> {
        // The allow is for what the server runs now (the entry the runtime applied), and
        // a request holds it only when sent by a session started from that; a name the
        // file gives no server that can start is refused before the user is asked.
        let running = self.servers().await.running_from(server);
        let runs = crate::approval::allow_print_of_running(running.as_ref(), server);
        if policy == crate::settings::ToolPolicy::Allow && runs.is_empty() {
            return Err(crate::SettingsError::Invalid(format!(
                "server {} is not running from the mcpServers file (not in it as a server that can start, or not applied yet), so its requests cannot be allowed",
                visible(server)
            ))
            .into());
        }
        if policy == crate::settings::ToolPolicy::Allow {
            let question = format!(
                "Let server {} run your model without asking?\n\nWhenever it asks, Conduit \
                 will send its request (its own prompt and messages) to your default provider \
                 and model and send the server the answer, without showing either to you \
                 first. Its requests use your provider account.",
                visible(server)
            );
            ask_off_the_workers(confirm, question).await?;
        }
        let server = server.to_owned();
        self.host
            .update_settings_off_the_workers(move |settings| {
                settings.set_sampling_policy(&server, policy, &runs);
                Ok(())
            })
            .await?;
        Ok(())
    }

    /// Stops a server and starts it again.
    pub async fn restart_mcp_server(&self, server: &str) {
        self.servers().await.restart_server(server).await;
    }

    /// What a toolset offers among the ready servers' tools: `toolset`, else the
    /// conversation's own (every enabled tool for a new chat).
    pub async fn tool_choices(
        &self,
        conversation: Option<String>,
        toolset: Option<crate::toolset::Toolset>,
    ) -> Result<crate::toolset::ToolChoices, AppError> {
        let servers = self.servers().await;
        let (toolset, unreadable) = match (toolset, conversation) {
            (Some(toolset), _) => (toolset, None),
            (None, Some(id)) => {
                let kept = self.host.conversation_toolset(&id, &servers)?;
                (kept.toolset, kept.unreadable)
            }
            (None, None) => (crate::toolset::Toolset::default(), None),
        };
        Ok(self.host.tool_choices(&servers, toolset, unreadable))
    }

    /// What the ready servers offer to mention in a message: resources, templates, prompts.
    pub async fn mentionables(&self) -> crate::mentions::Mentionables {
        let servers = self.servers().await;
        self.host.mentionables(&servers).await
    }

    /// A server's suggestions for an argument of a template or prompt being filled in.
    pub async fn complete_mention(
        &self,
        server: &str,
        target: crate::mentions::CompletionTarget,
        argument: &str,
        value: &str,
    ) -> Result<Vec<String>, crate::mentions::MentionHostError> {
        let servers = self.servers().await;
        self.host
            .complete_mention(&servers, server, target, argument, value)
            .await
    }

    /// A conversation's instructions to the model (its system prompt); empty: none.
    pub fn conversation_instructions(&self, conversation: &str) -> Result<String, AppError> {
        Ok(self
            .host
            .store()?
            .instructions(conversation)?
            .unwrap_or_default())
    }

    /// Keeps a conversation's instructions to the model, for its next turns; empty or
    /// blank text: none. At most [`MAX_INSTRUCTIONS`] characters.
    pub fn set_conversation_instructions(
        &self,
        conversation: &str,
        instructions: &str,
    ) -> Result<(), AppError> {
        set_instructions(&*self.host.store()?, conversation, instructions)
    }

    /// The tools allowed in `conversation` ("Allow in this conversation") until Conduit
    /// quits.
    pub fn conversation_allows(&self, conversation: &str) -> Vec<ConversationAllow> {
        self.host.conversation_allows().listed(conversation)
    }

    /// Takes back the allow of `tool` of `server` in `conversation`: its next call asks
    /// again. Whether there was one. It only takes a permission away.
    pub fn revoke_conversation_allow(&self, conversation: &str, server: &str, tool: &str) -> bool {
        self.host
            .conversation_allows()
            .revoke(conversation, server, tool)
    }

    /// Keeps the tools a saved conversation may use; its next turn offers only those.
    pub fn set_conversation_toolset(
        &self,
        conversation: &str,
        toolset: &crate::toolset::Toolset,
    ) -> Result<(), AppError> {
        self.host.store()?.conversation(conversation)?;
        Ok(self.host.set_conversation_toolset(conversation, toolset)?)
    }

    /// Signs in to an HTTP server in the system browser (`open`); `announce` gets the
    /// authorization URL to show in full. Resolves once the browser came back and the
    /// server started again with the tokens.
    pub async fn sign_in_mcp(
        &self,
        server: &str,
        open: conduit_mcp::oauth::OpenBrowser,
        announce: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<(), crate::sign_in::HostSignInError> {
        let servers = self.servers().await;
        let authorize = conduit_mcp::oauth::BrowserSignIn::new(open);
        self.host
            .sign_in_mcp(&servers, server, &authorize, announce)
            .await
    }

    /// Signs out of an HTTP server (see [`Host::sign_out_mcp`]).
    pub async fn sign_out_mcp(
        &self,
        server: &str,
    ) -> Result<conduit_mcp::oauth::SignedOut, crate::sign_in::HostSignInError> {
        let servers = self.servers().await;
        self.host.sign_out_mcp(&servers, server).await
    }

    /// The question before signing out of `server` (see [`Host::sign_out_question`]).
    pub async fn sign_out_question(
        &self,
        server: &str,
    ) -> Result<Option<String>, crate::sign_in::HostSignInError> {
        self.host.sign_out_question(server).await
    }

    /// Whether tokens for `server` are stored.
    pub async fn mcp_signed_in(
        &self,
        server: &str,
    ) -> Result<bool, crate::sign_in::HostSignInError> {
        self.host.mcp_signed_in(server).await
    }

    /// Ends every turn and server (the window is closing).
    pub async fn shutdown(&self) {
        for turn in self.turns.lock().values() {
            turn.cancel.cancel();
        }
        if let Some(servers) = self.servers.get() {
            servers.shutdown().await;
        }
        self.http.stop().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conduit_core::content::{Block, Role};
    use conduit_testing::llm_server::{Dialect, ScriptedLlm};
    use serde_json::json;
    use std::time::Duration;
    use tokio::sync::mpsc;

    /// A Chat Completions server that streams "Hello" and ends, or with `stall` sends
    /// "Hel" and then nothing more; it runs while the returned server lives.
    async fn model_server(stall: bool) -> (String, ScriptedLlm) {
        let dialect = Dialect::OpenAiChat;
        let reply = if stall {
            dialect.stall_after(&["Hel"])
        } else {
            dialect.text(&["Hello"])
        };
        let server = ScriptedLlm::start(vec![reply]).await.unwrap();
        (dialect.base_url(&server.url()), server)
    }

    /// Each stored message of `conversation`: who wrote it and how far it got.
    fn roles_and_statuses(
        app: &App,
        conversation: &str,
    ) -> Vec<(Role, conduit_store::MessageStatus)> {
        app.host()
            .store()
            .unwrap()
            .messages(conversation, None)
            .unwrap()
            .iter()
            .map(|m| (m.role, m.status))
            .collect()
    }

    /// An app whose provider is a Chat Completions server answering `replies` in turn;
    /// the server runs while the returned one lives.
    async fn app_answering(
        dir: &std::path::Path,
        replies: Vec<conduit_testing::llm_server::Reply>,
    ) -> (Arc<App>, ScriptedLlm) {
        let server = ScriptedLlm::start(replies).await.unwrap();
        let url = Dialect::OpenAiChat.base_url(&server.url());
        let app = app(
            dir,
            json!({"id": "local", "protocol": "openai-chat", "baseUrl": url, "defaultModel": "m"}),
        );
        (app, server)
    }

    fn app(dir: &std::path::Path, provider: serde_json::Value) -> Arc<App> {
        std::fs::write(
            dir.join("settings.json"),
            json!({"providers": [provider]}).to_string(),
        )
        .unwrap();
        App::new(Arc::new(Host::new(crate::Paths::under_home(
            dir.to_owned(),
            None,
        ))))
    }

    /// Sampling "Allow" is for a server the file names: one it does not is refused
    /// before the user is asked; one it does is asked about, then bound to what it runs.
    #[tokio::test]
    async fn a_sampling_allow_is_asked_for_a_server_the_file_names_only() {
        let dir = tempfile::tempdir().unwrap();
        let app = app(
            dir.path(),
            json!({"id": "local", "protocol": "openai-chat", "baseUrl": "http://127.0.0.1:1/v1"}),
        );
        let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = asked.clone();
        let yes = move |_: String| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            true
        };
        // Before the runtime first reads it (the first policy change starts the runtime).
        std::fs::write(
            &app.host().paths().mcp_config_file,
            r#"{"mcpServers": {"research": {"command": "research-server"}}}"#,
        )
        .unwrap();
        let refused = app
            .set_sampling_policy("ghost", crate::settings::ToolPolicy::Allow, yes.clone())
            .await
            .unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("not running from the mcpServers file"),
            "{refused}"
        );
        assert_eq!(
            asked.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "not asked"
        );
        app.set_sampling_policy("research", crate::settings::ToolPolicy::Allow, yes)
            .await
            .unwrap();
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
        let settings = app.host().settings().unwrap();
        assert_eq!(
            settings.sampling_policy("research", &app.host().print_in_file("research")),
            crate::settings::ToolPolicy::Allow
        );
    }

    /// A policy change waits for the settings' lock (held here as a provider's save holds
    /// it while the keychain asks to be unlocked) off the async workers: on a runtime of
    /// one thread, other tasks still run meanwhile, and the change is made once the lock
    /// is let go.
    #[tokio::test(flavor = "current_thread")]
    async fn a_policy_change_waits_for_the_settings_lock_off_the_workers() {
        let dir = tempfile::tempdir().unwrap();
        let app = app(
            dir.path(),
            json!({"id": "local", "protocol": "openai-chat", "baseUrl": "http://127.0.0.1:1/v1"}),
        );
        let (held, holding) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let file = app.host().paths().settings_file.clone();
        let holder = std::thread::spawn(move || {
            crate::settings::Settings::update(&file, |_| {
                held.send(()).unwrap();
                // Let go in any case after a while, so a regression fails, not hangs.
                let _ = released.recv_timeout(std::time::Duration::from_secs(5));
                Ok::<_, crate::SettingsError>(())
            })
        });
        holding.recv().unwrap();
        let changing = tokio::spawn({
            let app = app.clone();
            async move {
                app.set_sampling_policy("research", crate::settings::ToolPolicy::Deny, |_| true)
                    .await
            }
        });
        // This task runs on the one thread while the change waits.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!changing.is_finished(), "the change waits for the lock");
        release.send(()).unwrap();
        holder.join().unwrap().unwrap();
        changing.await.unwrap().unwrap();
        let settings = app.host().settings().unwrap();
        assert_eq!(
            settings.sampling_policy("research", &app.host().print_in_file("research")),
            crate::settings::ToolPolicy::Deny
        );
    }

    /// The notice of a turn that ended complete; a test fails on any other end.
    fn completed_notice(ended: TurnEvent) -> String {
        match ended {
            TurnEvent::Ended {
                status: TurnStatus::Complete,
                notice: Some(notice),
                ..
            } => notice,
            other => panic!("no notice: {other:?}"),
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

    /// A message in a conversation saved already.
    fn request_in(conversation: &str, text: &str) -> SendRequest {
        SendRequest {
            conversation: Some(conversation.to_owned()),
            ..request(text)
        }
    }

    fn collector() -> (TurnSink, mpsc::UnboundedReceiver<TurnEvent>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let sink: TurnSink = Arc::new(move |event| {
            let _ = sender.send(event);
        });
        (sink, receiver)
    }

    /// Sends `request` and waits for its turn to end: where it went, the text the model
    /// streamed, and how it ended.
    async fn answered(app: &Arc<App>, request: SendRequest) -> (Started, String, TurnEvent) {
        let (sink, mut events) = collector();
        let started = app.send(request, sink).unwrap();
        let (text, ended) = until_ended(&mut events).await;
        (started, text, ended)
    }

    async fn until_ended(events: &mut mpsc::UnboundedReceiver<TurnEvent>) -> (String, TurnEvent) {
        let mut text = String::new();
        loop {
            let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
                .await
                .unwrap()
                .unwrap();
            match &event {
                TurnEvent::Agent { event: agent } => {
                    if let AgentEvent::TextDelta { text: piece } = agent.as_ref() {
                        text.push_str(piece);
                    }
                }
                TurnEvent::ServersStarting { .. } => {}
                TurnEvent::Ended { .. } => return (text, event),
            }
        }
    }

    #[tokio::test]
    async fn a_turn_streams_in_the_background_and_is_saved() {
        let dir = tempfile::tempdir().unwrap();
        let (url, _server) = model_server(false).await;
        let app = app(
            dir.path(),
            json!({"id": "local", "protocol": "openai-chat", "baseUrl": url, "defaultModel": "m"}),
        );
        let (started, text, ended) = answered(&app, request("Say hello")).await;
        assert_eq!(text, "Hello");
        assert!(
            matches!(
                ended,
                TurnEvent::Ended {
                    status: TurnStatus::Complete,
                    error: None,
                    saved: true,
                    notice: None,
                }
            ),
            "{ended:?}"
        );
        let saved = app
            .host()
            .store()
            .unwrap()
            .messages(&started.conversation, None)
            .unwrap();
        assert_eq!(saved.len(), 2, "the question and the answer");
        // The turn is over and gone: stopping it (Stop pressed as it ended) is no error
        // and leaves nothing behind.
        assert!(!app.turns.lock().contains_key(&started.turn));
        app.stop(&started.turn);
        assert!(app.turns.lock().is_empty());
        app.shutdown().await;
    }

    /// Text files the window read go with the message, checked again here; one that is no
    /// text, empty, too long or nameless, or one too many, is refused before anything is
    /// saved (no conversation is made for it). A file alone is a message, and names it.
    #[tokio::test]
    async fn text_files_go_with_the_message_and_bad_ones_are_refused_before_anything_is_saved() {
        let dir = tempfile::tempdir().unwrap();
        let (app, server) =
            app_answering(dir.path(), vec![Dialect::OpenAiChat.text(&["Read it."])]).await;
        let file = |name: &str, text: &str| AttachedFile {
            name: name.into(),
            text: text.into(),
        };
        let too_long = "x".repeat(conduit_core::attached::MAX_FILE_TEXT + 1);
        for (files, says) in [
            (
                vec![file("blob.bin", "a\0b")],
                "blob.bin is not a text file",
            ),
            (vec![file("empty.txt", "")], "empty.txt is empty"),
            (
                vec![file("huge.log", &too_long)],
                "huge.log holds 513 KiB of text",
            ),
            (vec![file("notes/", "x")], "an attached file needs a name"),
            (
                (0..21).map(|n| file(&format!("{n}.txt"), "x")).collect(),
                "a message takes at most 20 files",
            ),
        ] {
            let mut bad = request("");
            bad.files = files;
            let (sink, _events) = collector();
            let err = app.send(bad, sink).unwrap_err();
            assert!(err.message.contains(says), "{says}: {err:?}");
        }
        let store = app.host().store().unwrap();
        assert!(store.list(10).unwrap().is_empty(), "nothing saved");
        assert!(server.requests().is_empty(), "nothing sent");

        let csv = "city,temp\nOslo,4\nLima,19\n";
        let mut sent = request("");
        sent.files = vec![file("/home/ada/weather.csv", csv); 2];
        let (started, text, _) = answered(&app, sent).await;
        assert_eq!(text, "Read it.");
        let saved = store.messages(&started.conversation, None).unwrap();
        assert_eq!(
            saved[0].blocks,
            [Block::File {
                name: "weather.csv".into(),
                text: csv.into()
            }],
            "once, without its folders"
        );
        assert_eq!(
            store.conversation(&started.conversation).unwrap().title,
            "weather.csv"
        );
        let asked = &server.requests()[0].body["messages"];
        assert_eq!(
            asked[asked.as_array().unwrap().len() - 1],
            json!({"role": "user", "content": format!("File weather.csv:\n\n{csv}")})
        );
        app.shutdown().await;
    }

    /// A PDF the window stored goes with the message under its name and reaches the
    /// model whole; a hash the page names as a PDF that is no PDF, a PDF named as an
    /// image, a forged hash, a nameless one and one too many are refused before anything
    /// is saved; a PDF over 32 MiB is not stored.
    #[tokio::test]
    async fn a_stored_pdf_goes_with_the_message_and_forged_ones_are_refused_before_anything_is_saved()
     {
        let dir = tempfile::tempdir().unwrap();
        let (app, server) = app_answering(
            dir.path(),
            vec![Dialect::OpenAiChat.text(&["It is about attention."])],
        )
        .await;
        let paper = conduit_core::testing::pdf(15, 1_200_000);
        let stored = app.store_attachment(paper.clone()).await.unwrap();
        assert_eq!(stored.mime, "application/pdf");
        let mut frame = Vec::new();
        image::DynamicImage::new_rgb8(1600, 1000)
            .write_to(
                &mut std::io::Cursor::new(&mut frame),
                image::ImageFormat::Png,
            )
            .unwrap();
        let image = app.store_attachment(frame).await.unwrap();
        let document = |hash: &str, name: &str| AttachedDocument {
            hash: hash.into(),
            name: name.into(),
        };
        for (documents, images, says) in [
            (
                vec![document(&image.hash, "frame.pdf")],
                vec![],
                "frame.pdf is not a PDF",
            ),
            (vec![], vec![stored.hash.clone()], "is not an image"),
            (
                vec![document(&"0".repeat(64), "x.pdf")],
                vec![],
                "is not in the media store",
            ),
            (
                vec![document(&stored.hash, "papers/")],
                vec![],
                "an attached file needs a name",
            ),
            (
                (0..21)
                    .map(|n| document(&format!("{n:064}"), "x.pdf"))
                    .collect(),
                vec![],
                "a message takes at most 20 PDFs",
            ),
        ] {
            let mut bad = request("");
            bad.documents = documents;
            bad.attachments = images;
            let (sink, _events) = collector();
            let err = app.send(bad, sink).unwrap_err();
            assert!(err.message.contains(says), "{says}: {err:?}");
        }
        let store = app.host().store().unwrap();
        assert!(store.list(10).unwrap().is_empty(), "nothing saved");
        assert!(server.requests().is_empty(), "nothing sent");

        let mut sent = request("What does it claim?");
        sent.documents = vec![document(&stored.hash, "/home/ada/attention.pdf"); 2];
        let (started, text, _) = answered(&app, sent).await;
        assert_eq!(text, "It is about attention.");
        let saved = store.messages(&started.conversation, None).unwrap();
        assert_eq!(
            saved[0].blocks,
            [
                Block::text("What does it claim?"),
                Block::Document {
                    name: "attention.pdf".into(),
                    media: stored.clone()
                }
            ],
            "once, without its folders"
        );
        let asked = &server.requests()[0].body["messages"];
        let last = &asked[asked.as_array().unwrap().len() - 1];
        use base64::Engine;
        assert_eq!(
            last["content"][1],
            json!({"type": "file", "file": {
                "filename": "attention.pdf",
                "file_data": format!("data:application/pdf;base64,{}", base64::engine::general_purpose::STANDARD.encode(&paper)),
            }})
        );

        // A server that takes no PDF (Ollama's answer to a `file` part): answered again
        // with a note in its place, and the turn's end says so.
        server.push(vec![
            Dialect::OpenAiChat.http_error(400, "invalid message format", None),
            Dialect::OpenAiChat.text(&["I cannot read that file."]),
        ]);
        let scan = app
            .store_attachment(conduit_core::testing::pdf(3, 200_000))
            .await
            .unwrap();
        let mut refused = request("And this one?");
        refused.conversation = Some(started.conversation.clone());
        refused.documents = vec![document(&scan.hash, "scan.pdf")];
        let (_, text, ended) = answered(&app, refused).await;
        assert_eq!(text, "I cannot read that file.");
        let TurnEvent::Ended { notice, status, .. } = ended else {
            panic!("{ended:?}")
        };
        assert_eq!(status, TurnStatus::Complete);
        assert_eq!(
            notice.as_deref(),
            Some(
                "The model's server refused the request with scan.pdf (invalid message format): it was sent again without it, and the model was told."
            )
        );
        let asked = server.requests().last().unwrap().body.to_string();
        assert!(
            asked.contains("[The PDF scan.pdf (") && !asked.contains("\"filename\":\"scan.pdf\""),
            "{asked:.600}"
        );

        // Over 32 MiB: refused by its size, nothing stored.
        let mut huge = conduit_core::testing::pdf(1, 0);
        huge.resize(
            conduit_core::attached::MAX_DOCUMENT_BYTES as usize + 1,
            b' ',
        );
        let error = app.store_attachment(huge).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "The PDF is 33 MiB; the largest PDF Conduit attaches is 32 MiB"
        );
        app.shutdown().await;
    }

    /// A page script naming one resource a hundred thousand times is refused before
    /// anything is read or saved; the same one named a few times goes once.
    #[tokio::test]
    async fn a_message_takes_each_thing_once_and_not_without_end() {
        let dir = tempfile::tempdir().unwrap();
        let (url, _server) = model_server(false).await;
        let app = app(
            dir.path(),
            json!({"id": "local", "protocol": "openai-chat", "baseUrl": url, "defaultModel": "m"}),
        );
        let mention = crate::mentions::ResourceMention::Resource {
            server: "files".into(),
            uri: "file:///big".into(),
        };
        let mut flood = request("read this");
        flood.resources = vec![mention.clone(); 100_000];
        let (sink, _events) = collector();
        let err = app.send(flood, sink).unwrap_err();
        assert!(
            err.message.contains("a message takes at most 20 resources"),
            "{err:?}"
        );
        let mut views = request("look");
        views.view_context = vec!["token".into(); 65];
        let (sink, _events) = collector();
        let err = app.send(views, sink).unwrap_err();
        assert!(
            err.message.contains("at most 64 views' contexts"),
            "{err:?}"
        );
        // A chat with 30 views that set context sends the newest 20 (named last).
        let mut many = request("look");
        many.view_context = (0..30).map(|n| format!("view-{n}")).collect();
        let newest = bounded_request(many).unwrap().view_context;
        assert_eq!(newest.len(), MAX_VIEWS_IN_MESSAGE);
        assert_eq!(newest[0], "view-10");
        assert_eq!(newest[19], "view-29");
        assert!(
            app.host().store().unwrap().list(10).unwrap().is_empty(),
            "nothing saved"
        );
        let mut repeated = request("read this");
        repeated.resources = vec![mention.clone(); 3];
        repeated.view_context = vec!["a".into(), "b".into(), "a".into()];
        repeated.attachments = vec!["h".into(), "h".into()];
        let once = bounded_request(repeated).unwrap();
        assert_eq!(once.resources, vec![mention]);
        assert_eq!(once.view_context, vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(once.attachments, vec!["h".to_owned()]);
        app.shutdown().await;
    }

    /// Waits until the turn streams its first text.
    async fn until_first_text(events: &mut mpsc::UnboundedReceiver<TurnEvent>) {
        loop {
            let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
                .await
                .unwrap()
                .unwrap();
            if let TurnEvent::Agent { event } = &event
                && matches!(event.as_ref(), AgentEvent::TextDelta { .. })
            {
                return;
            }
        }
    }

    #[tokio::test]
    async fn a_stopped_turn_ends_interrupted_with_its_partial_answer_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (url, _server) = model_server(true).await;
        let app = app(
            dir.path(),
            json!({"id": "local", "protocol": "openai-chat", "baseUrl": url, "defaultModel": "m"}),
        );
        let (sink, mut events) = collector();
        let started = app.send(request("Tell a long story"), sink).unwrap();
        until_first_text(&mut events).await;
        app.stop(&started.turn);
        let (_, ended) = until_ended(&mut events).await;
        assert!(
            matches!(
                ended,
                TurnEvent::Ended {
                    status: TurnStatus::Interrupted,
                    saved: true,
                    ..
                }
            ),
            "{ended:?}"
        );
        let saved = app
            .host()
            .store()
            .unwrap()
            .messages(&started.conversation, None)
            .unwrap();
        let answer = saved.last().unwrap();
        assert_eq!(answer.status, conduit_store::MessageStatus::Interrupted);
        app.shutdown().await;
    }

    /// A second message to a conversation whose answer is still being written is refused
    /// before anything is saved (two sent at once would both run, interleaved); another
    /// conversation's turn still starts, and once the first ends the next message goes.
    #[tokio::test]
    async fn a_conversation_runs_one_turn_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let dialect = Dialect::OpenAiChat;
        let (app, _server) = app_answering(
            dir.path(),
            vec![
                dialect.stall_after(&["Hel"]),
                dialect.stall_after(&["Hel"]),
                dialect.stall_after(&["Hel"]),
            ],
        )
        .await;
        let (sink, mut events) = collector();
        let started = app.send(request("Tell a long story"), sink).unwrap();
        until_first_text(&mut events).await;
        let messages = |app: &App| {
            app.host()
                .store()
                .unwrap()
                .messages(&started.conversation, None)
                .unwrap()
                .len()
        };
        let before = messages(&app);
        let again = SendRequest {
            conversation: Some(started.conversation.clone()),
            ..request("And another")
        };
        let (second_sink, _second_events) = collector();
        let refused = app.send(again.clone(), second_sink.clone()).unwrap_err();
        assert!(
            refused
                .message
                .contains("still being written in this conversation"),
            "{refused:?}"
        );
        assert_eq!(messages(&app), before, "nothing of the second was saved");
        // Another conversation is not held up.
        let (other_sink, mut other_events) = collector();
        let other = app.send(request("Elsewhere"), other_sink).unwrap();
        assert_ne!(other.conversation, started.conversation);
        until_first_text(&mut other_events).await;
        app.stop(&other.turn);
        until_ended(&mut other_events).await;

        app.stop(&started.turn);
        until_ended(&mut events).await;
        let (third_sink, mut third_events) = collector();
        let third = app.send(again, third_sink).unwrap();
        assert_eq!(third.conversation, started.conversation);
        until_first_text(&mut third_events).await;
        app.stop(&third.turn);
        until_ended(&mut third_events).await;
        app.shutdown().await;
    }

    #[tokio::test]
    async fn a_turn_stays_stoppable_after_a_crash_while_the_turns_lock_was_held() {
        let dir = tempfile::tempdir().unwrap();
        let (url, _server) = model_server(true).await;
        let app = app(
            dir.path(),
            json!({"id": "local", "protocol": "openai-chat", "baseUrl": url, "defaultModel": "m"}),
        );
        let (sink, mut events) = collector();
        let started = app.send(request("Tell a long story"), sink).unwrap();
        until_first_text(&mut events).await;
        let crashed = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let _held = app.turns.lock();
                    panic!("a crash while the turns lock is held");
                })
                .join()
        });
        assert!(crashed.is_err());
        // A poisoned std lock made this turn unstoppable.
        app.stop(&started.turn);
        let (_, ended) = until_ended(&mut events).await;
        assert!(
            matches!(
                ended,
                TurnEvent::Ended {
                    status: TurnStatus::Interrupted,
                    ..
                }
            ),
            "{ended:?}"
        );
        app.shutdown().await;
    }

    #[tokio::test]
    async fn a_turn_that_cannot_start_is_refused_before_anything_is_saved() {
        let dir = tempfile::tempdir().unwrap();
        let app = app(
            dir.path(),
            json!({"id": "local", "protocol": "openai-chat", "baseUrl": "http://127.0.0.1:9/v1",
                   "defaultModel": "m", "apiKeyEnv": "CONDUIT_TEST_NO_SUCH_KEY_VARIABLE"}),
        );
        let (sink, _events) = collector();
        let refused = app.send(request("Hello"), sink.clone()).unwrap_err();
        assert_eq!(
            refused.action,
            Some(ErrorAction::OpenSettings),
            "{refused:?}"
        );
        assert!(
            refused
                .message
                .contains("CONDUIT_TEST_NO_SUCH_KEY_VARIABLE"),
            "{refused:?}"
        );
        let mut forged = request("Look");
        forged.attachments = vec!["../../secrets".into()];
        assert!(app.send(forged, sink.clone()).is_err());
        assert!(app.send(request("  "), sink).is_err(), "an empty message");
        assert!(
            app.host().conversations(10).unwrap().is_empty(),
            "nothing saved"
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_saved_copy_replaces_a_link_at_the_chosen_name_and_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("stored.png");
        std::fs::write(&source, b"the image bytes").unwrap();
        let elsewhere = dir.path().join("someone-elses-file");
        std::fs::write(&elsewhere, b"keep me").unwrap();
        let chosen = dir.path().join("saved.png");
        std::os::unix::fs::symlink(&elsewhere, &chosen).unwrap();
        App::save_copy(source.clone(), chosen.clone())
            .await
            .unwrap();
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"keep me");
        assert!(
            !std::fs::symlink_metadata(&chosen)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&chosen).unwrap(), b"the image bytes");
        // A source that is gone fails and writes nothing.
        let missing = App::save_copy(dir.path().join("gone.png"), dir.path().join("out.png")).await;
        assert!(missing.is_err());
        assert!(!dir.path().join("out.png").exists());
    }

    #[tokio::test]
    async fn a_server_that_is_off_is_not_signed_in_to_and_nothing_is_reached() {
        // A page can add an entry that is off without a question (it starts nothing);
        // signing in would reach its URL with the variables it names filled in.
        let dir = tempfile::tempdir().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::fs::write(
            dir.path().join("mcp_servers.json"),
            json!({"mcpServers": {"evil": {
                "url": format!("http://127.0.0.1:{port}/mcp?k=${{HOME}}"),
                "disabled": true,
                "oauth": {"clientId": "c"}
            }}})
            .to_string(),
        )
        .unwrap();
        let app = App::new(Arc::new(Host::new(crate::Paths::under_home(
            dir.path().to_owned(),
            None,
        ))));
        let opened = Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
        let seen = opened.clone();
        let open: conduit_mcp::oauth::OpenBrowser = Arc::new(move |url: &str| {
            seen.lock().push(url.to_owned());
            Ok(())
        });
        let error = app.sign_in_mcp("evil", open, &|_| {}).await.unwrap_err();
        assert!(
            matches!(error, crate::sign_in::HostSignInError::TurnedOff(_)),
            "{error}"
        );
        assert!(error.to_string().contains("turn it on first"), "{error}");
        assert!(opened.lock().is_empty(), "no browser was opened");
        assert!(
            listener
                .accept()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
            "the server's URL was never reached"
        );
    }

    /// A conversation grown past the model's context (a 300 KB log attached earlier) is
    /// answered from a shorter request, the window is told what the model did not read,
    /// and the stored conversation keeps the whole log.
    #[tokio::test]
    async fn a_conversation_past_the_models_context_is_answered_shorter_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let dialect = Dialect::OpenAiChat;
        let (app, server) = app_answering(
            dir.path(),
            vec![
                dialect.text(&["The build ran out of disk."]),
                dialect.http_error(
                    400,
                    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.",
                    None,
                ),
                dialect.text(&["Still the disk."]),
            ],
        )
        .await;
        let log = "2026-12-01T03:00:00Z ERROR no space left on device\n".repeat(6_000);
        let mut first = request("Why did the build fail?");
        first.files = vec![AttachedFile {
            name: "build.log".into(),
            text: log.clone(),
        }];
        let (started, _, _) = answered(&app, first).await;
        let (_, text, ended) = answered(&app, request_in(&started.conversation, "And now?")).await;
        assert_eq!(text, "Still the disk.", "{ended:?}");
        assert_eq!(
            completed_notice(ended),
            "The conversation is longer than the model's context: earlier tool outputs and files were cut to their start for the model (they are kept whole here)."
        );
        let sent: Vec<String> = server
            .requests()
            .iter()
            .filter(|r| r.method == "POST")
            .map(|r| r.body["messages"].to_string())
            .collect();
        assert_eq!(sent.len(), 3);
        assert!(sent[1].len() > 300_000, "the refused request had it all");
        assert!(sent[2].len() < 10_000, "{}", sent[2].len());
        assert!(sent[2].contains("more bytes were left out for the model"));
        assert!(sent[2].contains("And now?"));
        let saved = app
            .host()
            .store()
            .unwrap()
            .messages(&started.conversation, None)
            .unwrap();
        let kept = saved[0]
            .blocks
            .iter()
            .any(|block| matches!(block, Block::File { text, .. } if *text == log));
        assert!(kept, "the stored message keeps the whole log");
        app.shutdown().await;
    }

    /// An answer the model's output limit cut off, or one it refused, ends complete with a
    /// notice saying so (it ended as if whole before).
    #[tokio::test]
    async fn an_answer_cut_off_at_the_output_limit_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let dialect = Dialect::OpenAiChat;
        let (app, _server) = app_answering(
            dir.path(),
            vec![
                dialect.cut_off(&["Once upon a time"]),
                dialect.text(&["Once upon a time"]),
            ],
        )
        .await;
        let (_, text, ended) = answered(&app, request("Tell me a long story")).await;
        assert_eq!(text, "Once upon a time");
        assert_eq!(
            completed_notice(ended),
            "The answer was cut off: it reached the most the model may write in one answer (its output token limit)."
        );
        // An answer that ended as the model meant says nothing more.
        let (_, _, ended) = answered(&app, request("Again")).await;
        assert!(
            matches!(
                ended,
                TurnEvent::Ended {
                    status: TurnStatus::Complete,
                    notice: None,
                    ..
                }
            ),
            "{ended:?}"
        );
    }

    /// A turn that failed mid-answer is answered again with no new message: the failed
    /// answer stays in the conversation, marked, and the model reads the user's message
    /// without it. A conversation whose last answer is whole has nothing to answer again.
    #[tokio::test]
    async fn a_failed_turn_is_answered_again_without_a_new_message() {
        let dir = tempfile::tempdir().unwrap();
        let dialect = Dialect::OpenAiChat;
        let (app, server) = app_answering(
            dir.path(),
            vec![
                dialect.error_mid_stream(&["Partial "], "the upstream model crashed"),
                dialect.error_mid_stream(&["Partial again "], "the upstream model crashed again"),
                dialect.text(&["A whole answer."]),
                dialect.text(&["And then it ended."]),
            ],
        )
        .await;
        let (started, _, ended) = answered(&app, request("Tell me something")).await;
        assert!(
            matches!(
                ended,
                TurnEvent::Ended {
                    status: TurnStatus::Error,
                    saved: true,
                    ..
                }
            ),
            "{ended:?}"
        );

        let mut again = request_in(&started.conversation, "");
        again.again = true;
        // Failed again: and answered again after that.
        let (_, _, ended) = answered(&app, again.clone()).await;
        assert!(
            matches!(
                ended,
                TurnEvent::Ended {
                    status: TurnStatus::Error,
                    saved: true,
                    ..
                }
            ),
            "{ended:?}"
        );
        let (_, text, ended) = answered(&app, again.clone()).await;
        assert_eq!(text, "A whole answer.");
        assert!(
            matches!(
                ended,
                TurnEvent::Ended {
                    status: TurnStatus::Complete,
                    ..
                }
            ),
            "{ended:?}"
        );
        // The model read the user's message once, without the failed answers.
        for attempt in [1, 2] {
            let body = server.requests()[attempt].body.to_string();
            assert_eq!(body.matches("Tell me something").count(), 1, "{body}");
            assert!(!body.contains("Partial"), "{body}");
        }
        // Both answers are kept, the failed one marked.
        let shown = roles_and_statuses(&app, &started.conversation);
        assert_eq!(
            shown,
            [
                (Role::User, conduit_store::MessageStatus::Complete),
                (Role::Assistant, conduit_store::MessageStatus::Error),
                (Role::Assistant, conduit_store::MessageStatus::Error),
                (Role::Assistant, conduit_store::MessageStatus::Complete),
            ]
        );
        // Nor in the turns after: the question once, answered once.
        let next = request_in(&started.conversation, "And then?");
        let (_, text, _) = answered(&app, next).await;
        assert_eq!(text, "And then it ended.");
        let body = server.requests()[3].body.to_string();
        assert!(!body.contains("Partial"), "{body}");
        assert_eq!(body.matches("Tell me something").count(), 1, "{body}");
        assert_eq!(body.matches("A whole answer.").count(), 1, "{body}");

        // Nothing to answer again now; and answering again sends nothing new.
        let (_, _, ended) = answered(&app, again.clone()).await;
        let TurnEvent::Ended {
            status: TurnStatus::Error,
            error: Some(error),
            saved: false,
            ..
        } = ended
        else {
            panic!("{ended:?}");
        };
        assert!(
            error.message.contains("nothing to answer again"),
            "{}",
            error.message
        );
        let mut with_text = again;
        with_text.text = "more".into();
        let (sink, _events) = collector();
        assert!(app.send(with_text, sink).is_err());
        assert_eq!(server.requests().len(), 4);
    }

    /// "Answer again" writes a whole last answer anew, with the model picked now: the old
    /// one stays, marked replaced, and no model reads it again, in that turn or later.
    #[tokio::test]
    async fn a_whole_answer_is_written_again_and_the_old_one_kept_but_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let dialect = Dialect::OpenAiChat;
        let (app, server) = app_answering(
            dir.path(),
            vec![
                dialect.text(&["Red, surely."]),
                dialect.text(&["Blue, on second thought."]),
                dialect.text(&["Because the sky is."]),
            ],
        )
        .await;
        let started = answered(&app, request("Name a colour")).await.0;

        // Only with `again`, which sends nothing new.
        let mut replace = request_in(&started.conversation, "");
        replace.replace_answer = true;
        let (sink, _events) = collector();
        assert!(app.send(replace.clone(), sink).is_err());

        replace.again = true;
        let (_, text, ended) = answered(&app, replace).await;
        assert_eq!(text, "Blue, on second thought.");
        assert!(
            matches!(
                ended,
                TurnEvent::Ended {
                    status: TurnStatus::Complete,
                    saved: true,
                    ..
                }
            ),
            "{ended:?}"
        );
        let body = server.requests()[1].body.to_string();
        assert_eq!(body.matches("Name a colour").count(), 1, "{body}");
        assert!(!body.contains("Red"), "{body}");
        let shown = roles_and_statuses(&app, &started.conversation);
        assert_eq!(
            shown,
            [
                (Role::User, conduit_store::MessageStatus::Complete),
                (Role::Assistant, conduit_store::MessageStatus::Replaced),
                (Role::Assistant, conduit_store::MessageStatus::Complete),
            ]
        );

        let next = request_in(&started.conversation, "Why?");
        answered(&app, next).await;
        let body = server.requests()[2].body.to_string();
        assert!(!body.contains("Red"), "{body}");
        assert_eq!(
            body.matches("Blue, on second thought.").count(),
            1,
            "{body}"
        );
    }

    /// "Edit": a changed message takes the place of the last one and its answer, both kept,
    /// marked replaced, and never read by the model again.
    #[tokio::test]
    async fn a_changed_message_takes_the_place_of_the_last_one_and_its_answer() {
        let dir = tempfile::tempdir().unwrap();
        let dialect = Dialect::OpenAiChat;
        let (app, server) = app_answering(
            dir.path(),
            vec![
                dialect.text(&["Paris."]),
                dialect.text(&["Red, surely."]),
                dialect.text(&["An apple."]),
            ],
        )
        .await;
        let started = answered(&app, request("Capital of France?")).await.0;
        let next = request_in(&started.conversation, "Name a colour");
        answered(&app, next).await;

        // Only a new message of a saved conversation.
        let mut edit = request("Name a fruit");
        edit.replace_message = true;
        let (sink, _events) = collector();
        assert!(app.send(edit.clone(), sink).is_err());
        edit.conversation = Some(started.conversation.clone());
        let mut again = edit.clone();
        again.again = true;
        again.text = String::new();
        let (sink, _events) = collector();
        assert!(app.send(again, sink).is_err());

        let (_, text, _) = answered(&app, edit).await;
        assert_eq!(text, "An apple.");
        let body = server.requests()[2].body.to_string();
        assert!(
            body.contains("Name a fruit") && body.contains("Paris."),
            "{body}"
        );
        assert!(
            !body.contains("Name a colour") && !body.contains("Red"),
            "{body}"
        );
        let shown = roles_and_statuses(&app, &started.conversation);
        use conduit_store::MessageStatus::{Complete, Replaced};
        assert_eq!(
            shown,
            [
                (Role::User, Complete),
                (Role::Assistant, Complete),
                (Role::User, Replaced),
                (Role::Assistant, Replaced),
                (Role::User, Complete),
                (Role::Assistant, Complete),
            ]
        );
        let store = app.host().store().unwrap();
        let title = |id: &str| store.conversation(id).unwrap().title;
        assert_eq!(title(&started.conversation), "Capital of France?");

        // The first message changed: the conversation is named after the change, unless
        // the user named it.
        server.push(vec![
            dialect.text(&["Hi."]),
            dialect.text(&["Hey."]),
            dialect.text(&["Yo."]),
        ]);
        let first = answered(&app, request("Helo")).await.0;
        assert_eq!(title(&first.conversation), "Helo");
        let mut fixed = request_in(&first.conversation, "Hello there");
        fixed.replace_message = true;
        answered(&app, fixed.clone()).await;
        assert_eq!(title(&first.conversation), "Hello there");
        store.rename(&first.conversation, "Greetings").unwrap();
        fixed.text = "Hello again".into();
        answered(&app, fixed).await;
        assert_eq!(title(&first.conversation), "Greetings");
    }

    /// A conversation's instructions go to the model as its system prompt in every turn:
    /// a new chat's with its first message, changed ones from the next turn; blank text is
    /// none, and too long is refused with the limit.
    #[tokio::test]
    async fn a_conversations_instructions_are_its_system_prompt() {
        let dir = tempfile::tempdir().unwrap();
        let dialect = Dialect::OpenAiChat;
        let (app, server) = app_answering(
            dir.path(),
            vec![
                dialect.text(&["Ahoy."]),
                dialect.text(&["Bonjour."]),
                dialect.text(&["Hello."]),
            ],
        )
        .await;
        let mut first = request("Greet me");
        first.instructions = Some("Answer like a pirate.".into());
        let started = answered(&app, first).await.0;
        let body = &server.requests()[0].body;
        assert_eq!(body["messages"][0]["role"], "system", "{body}");
        assert_eq!(
            body["messages"][0]["content"], "Answer like a pirate.",
            "{body}"
        );
        assert_eq!(
            app.conversation_instructions(&started.conversation)
                .unwrap(),
            "Answer like a pirate."
        );

        app.set_conversation_instructions(&started.conversation, "Answer in French.")
            .unwrap();
        let mut second = request_in(&started.conversation, "Greet me again");
        // Ignored for a conversation that has its own.
        second.instructions = Some("Answer in German.".into());
        answered(&app, second).await;
        let body = server.requests()[1].body.to_string();
        assert!(body.contains("Answer in French."), "{body}");
        assert!(
            !body.contains("pirate") && !body.contains("German"),
            "{body}"
        );

        app.set_conversation_instructions(&started.conversation, "  \n ")
            .unwrap();
        assert_eq!(
            app.conversation_instructions(&started.conversation)
                .unwrap(),
            ""
        );
        let third = request_in(&started.conversation, "Once more");
        answered(&app, third).await;
        assert_ne!(server.requests()[2].body["messages"][0]["role"], "system");

        let long = "x".repeat(MAX_INSTRUCTIONS + 1);
        let error = app
            .set_conversation_instructions(&started.conversation, &long)
            .unwrap_err();
        assert!(error.to_string().contains("at most 20000"), "{error}");
        assert!(app.set_conversation_instructions("no-such", "hi").is_err());
    }

    /// The next event that is not the agent's.
    async fn next_turn_event(events: &mut mpsc::UnboundedReceiver<TurnEvent>) -> TurnEvent {
        loop {
            let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
                .await
                .unwrap()
                .unwrap();
            if !matches!(event, TurnEvent::Agent { .. }) {
                return event;
            }
        }
    }

    /// A turn sent while servers start waits for them, naming them; it begins when they
    /// settled (one failed here), or at once when the user wants the answer without them,
    /// and never waits for a server its conversation switched off.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_turn_waits_for_the_servers_starting_naming_them_unless_told_not_to() {
        let dir = tempfile::tempdir().unwrap();
        let dialect = Dialect::OpenAiChat;
        let (app, _server) = app_answering(
            dir.path(),
            vec![
                dialect.text(&["Hello"]),
                dialect.text(&["Again"]),
                dialect.text(&["Third"]),
            ],
        )
        .await;
        // "hangs" never answers the handshake (starting for the whole start timeout, as
        // a first npx download is for a while); "fails" exits after a second.
        std::fs::write(
            &app.host().paths().mcp_config_file,
            json!({"mcpServers": {
                "hangs": {"command": "sh", "args": ["-c", "exec sleep 120"]},
                "fails": {"command": "sh", "args": ["-c", "sleep 1; exit 3"]},
                "later": {"command": "sh", "args": ["-c", "exec sleep 120"], "disabled": true},
            }})
            .to_string(),
        )
        .unwrap();

        let (sink, mut events) = collector();
        let started = app.send(request("Say hello"), sink).unwrap();
        let TurnEvent::ServersStarting { servers } = next_turn_event(&mut events).await else {
            panic!("the turn did not say what it waits for");
        };
        assert_eq!(servers, ["hangs", "fails"]);
        // "fails" settles by itself; "hangs" is still waited for.
        let TurnEvent::ServersStarting { servers } = next_turn_event(&mut events).await else {
            panic!("the turn did not say what it still waits for");
        };
        assert_eq!(servers, ["hangs"]);
        app.answer_without_waiting(&started.turn);
        let TurnEvent::ServersStarting { servers } = next_turn_event(&mut events).await else {
            panic!("the turn did not say it no longer waits");
        };
        assert!(servers.is_empty());
        let (text, ended) = until_ended(&mut events).await;
        assert_eq!(text, "Hello");
        assert!(
            matches!(
                ended,
                TurnEvent::Ended {
                    status: TurnStatus::Complete,
                    saved: true,
                    ..
                }
            ),
            "{ended:?}"
        );

        // A conversation that switched "hangs" off does not wait for it at all.
        app.host()
            .set_conversation_toolset(
                &started.conversation,
                &crate::toolset::Toolset {
                    off_servers: vec!["hangs".into()],
                    off_tools: Vec::new(),
                },
            )
            .unwrap();
        let (sink, mut events) = collector();
        let again = request_in(&started.conversation, "Say hello");
        app.send(again, sink).unwrap();
        let ended = next_turn_event(&mut events).await;
        assert!(
            matches!(
                ended,
                TurnEvent::Ended {
                    status: TurnStatus::Complete,
                    ..
                }
            ),
            "it waited: {ended:?}"
        );

        // A server starting again (Restart) that settles by itself ends the wait with no
        // one pressing anything.
        let servers = app.runtime();
        let restarting = servers.clone();
        let restart = tokio::spawn(async move { restarting.restart_server("fails").await });
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !servers.statuses().iter().any(|s| {
            s.name == "fails" && matches!(s.state, conduit_mcp::servers::ServerState::Starting)
        }) {
            assert!(
                std::time::Instant::now() < deadline,
                "the restart never began"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (sink, mut events) = collector();
        let third = request_in(&started.conversation, "Say hello");
        app.send(third, sink).unwrap();
        let TurnEvent::ServersStarting { servers: waited } = next_turn_event(&mut events).await
        else {
            panic!("the turn did not wait for the server starting again");
        };
        assert_eq!(waited, ["fails"]);
        let TurnEvent::ServersStarting { servers: waited } = next_turn_event(&mut events).await
        else {
            panic!("the turn did not say it stopped waiting");
        };
        assert!(waited.is_empty());
        let ended = next_turn_event(&mut events).await;
        assert!(
            matches!(
                ended,
                TurnEvent::Ended {
                    status: TurnStatus::Complete,
                    ..
                }
            ),
            "{ended:?}"
        );
        restart.await.unwrap();
        app.shutdown().await;
    }

    /// Every file under `dir` (none when it does not exist).
    fn files_under(dir: &std::path::Path) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .map(|entry| entry.unwrap().path())
            .flat_map(|path| {
                if path.is_dir() {
                    files_under(&path)
                } else {
                    vec![path]
                }
            })
            .collect()
    }

    /// A phone's portrait photo is stored on its side with an Exif tag saying so: the
    /// attachment is stored upright (the window sizes it by its pixels, and a provider may
    /// ignore the tag), and an upright one is stored as it came.
    #[tokio::test]
    async fn a_photo_attached_on_its_side_is_stored_upright() {
        let dir = tempfile::tempdir().unwrap();
        let app = app(
            dir.path(),
            json!({"id": "local", "protocol": "openai-chat"}),
        );
        let sideways = conduit_core::testing::jpeg_with_orientation(1600, 1000, 6);
        let stored = app.store_attachment(sideways).await.unwrap();
        assert_eq!((stored.width, stored.height), (Some(1000), Some(1600)));
        assert_eq!(stored.mime, "image/jpeg");
        let upright = conduit_core::testing::jpeg_with_orientation(1600, 1000, 1);
        let stored = app.store_attachment(upright.clone()).await.unwrap();
        assert_eq!((stored.width, stored.height), (Some(1600), Some(1000)));
        assert_eq!(stored.bytes, upright.len() as u64);
    }

    #[tokio::test]
    async fn an_attachment_over_the_cap_or_the_image_limits_is_refused_and_nothing_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let app = app(
            dir.path(),
            json!({"id": "local", "protocol": "openai-chat"}),
        );
        let media_dir = app.host().paths().media_dir.clone();

        // One byte over the cap: refused by its size before anything reads it.
        let error = app
            .store_attachment(vec![0; ATTACHMENT_MAX_BYTES + 1])
            .await
            .unwrap_err();
        assert!(
            matches!(error, AppError::AttachmentTooLarge { .. }),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "the attachment is 64.0 MiB; the most Conduit takes is 64 MiB"
        );
        assert!(attachment_fits(ATTACHMENT_MAX_BYTES).is_ok());

        // Under the cap, but 257 × 2,088,000 pixels: refused by its size, at once.
        let hostile = conduit_core::testing::zero_png(257, 2_088_000);
        assert!(hostile.len() < ATTACHMENT_MAX_BYTES);
        let error = app.store_attachment(hostile).await.unwrap_err();
        assert!(
            error
                .to_string()
                .contains("the image is 257×2088000 pixels; the most Conduit reads is"),
            "{error}"
        );
        assert!(
            files_under(&media_dir).is_empty(),
            "{:?}",
            files_under(&media_dir)
        );

        // A Figma frame is stored as before.
        let mut frame = Vec::new();
        image::DynamicImage::new_rgb8(1600, 1000)
            .write_to(
                &mut std::io::Cursor::new(&mut frame),
                image::ImageFormat::Png,
            )
            .unwrap();
        let stored = app.store_attachment(frame).await.unwrap();
        assert_eq!((stored.width, stored.height), (Some(1600), Some(1000)));

        // Audio (the store takes a tool's by its first bytes, without a decode) is no
        // attachment, nor is anything else that is not an image.
        let before = files_under(&media_dir);
        let mut mp3 = b"ID3".to_vec();
        mp3.resize(1024 * 1024, 7);
        for bytes in [mp3, b"hello".to_vec()] {
            let error = app.store_attachment(bytes).await.unwrap_err();
            assert!(matches!(error, AppError::NotAnImage), "{error:?}");
        }
        assert_eq!(files_under(&media_dir), before, "nothing more stored");
    }

    /// A page storing attachments in a loop and never sending them is stopped at the
    /// unsent cap; a message that takes them gives their places back.
    #[tokio::test]
    async fn attachments_never_sent_stop_at_a_cap_and_a_send_gives_their_places_back() {
        let dir = tempfile::tempdir().unwrap();
        let (url, _server) = model_server(false).await;
        let app = app(
            dir.path(),
            json!({"id": "local", "protocol": "openai-chat", "baseUrl": url, "defaultModel": "m"}),
        );
        let png = |n: u32| {
            let mut out = Vec::new();
            image::DynamicImage::new_rgb8(n, 1)
                .write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
                .unwrap();
            out
        };
        let mut hashes = Vec::new();
        for n in 1..=MAX_UNSENT_ATTACHMENTS as u32 {
            hashes.push(app.store_attachment(png(n)).await.unwrap().hash);
            if n == 1 {
                // The same image again is not another one.
                app.store_attachment(png(1)).await.unwrap();
                assert_eq!(app.unsent.lock().by_hash.len(), 1);
            }
        }
        let error = app
            .store_attachment(png(MAX_UNSENT_ATTACHMENTS as u32 + 1))
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                AppError::TooManyUnsent {
                    count: MAX_UNSENT_ATTACHMENTS,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error.to_string().contains("not sent"), "{error}");
        // A message takes two: two more may be stored.
        let mut message = request("look");
        message.attachments = hashes[..2].to_vec();
        answered(&app, message).await;
        app.store_attachment(png(MAX_UNSENT_ATTACHMENTS as u32 + 1))
            .await
            .unwrap();
        app.store_attachment(png(MAX_UNSENT_ATTACHMENTS as u32 + 2))
            .await
            .unwrap();
        assert!(
            app.store_attachment(png(MAX_UNSENT_ATTACHMENTS as u32 + 3))
                .await
                .is_err()
        );
        // Those stored over an hour ago (taken out of the composer, or given up) no longer
        // count.
        let hour_ago = std::time::Instant::now() - UNSENT_COUNTED_FOR;
        for (_, stored) in app.unsent.lock().by_hash.values_mut().take(3) {
            *stored = hour_ago;
        }
        for n in 3..6 {
            app.store_attachment(png(MAX_UNSENT_ATTACHMENTS as u32 + n))
                .await
                .unwrap();
        }
        app.shutdown().await;
    }

    #[test]
    fn a_tool_image_over_the_limits_leaves_the_tools_text_and_a_note_for_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let media = conduit_store::media::FileMediaStore::new(dir.path().join("media"));
        let hostile = conduit_core::testing::zero_png(257, 2_088_000);
        // The result as an MCP server sends it (rmcp's type, read from its JSON).
        let result = serde_json::from_value(json!({
            "content": [
                {"type": "text", "text": "Saved the page."},
                {"type": "image", "mimeType": "image/png", "data": base64(&hostile)},
            ],
            "isError": false,
        }))
        .unwrap();
        let output = conduit_mcp::result::convert(result, &media);
        let texts: Vec<&str> = output
            .parts
            .iter()
            .map(|part| match part {
                conduit_core::content::ResultPart::Text { text } => text.as_str(),
                other => panic!("only text is left: {other:?}"),
            })
            .collect();
        assert_eq!(texts[0], "Saved the page.");
        assert!(
            texts[1].contains("the image is 257×2088000 pixels; the most Conduit reads is"),
            "{}",
            texts[1]
        );
        assert!(files_under(&dir.path().join("media")).is_empty());
    }

    /// Standard base64 with padding (the host has no base64 crate of its own).
    fn base64(bytes: &[u8]) -> String {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0_u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
                } else {
                    out.push('=');
                }
            }
        }
        out
    }
}
