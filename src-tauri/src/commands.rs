//! The commands the window may call; each forwards to `conduit-host`.

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use conduit_host::app::{
    App, CommandError, McpOverview, SendRequest, ServerTools, Started, TurnEvent,
};
use conduit_host::approval::Decision;
use conduit_host::asks::{Question, QuestionReply, SamplingQuestion, SamplingReply};
use conduit_host::core::content::MediaRef;
use conduit_host::mcp::{ImportFile, ImportPick, McpFile, TextProblem};
use conduit_host::mcp_client::config::{Edit, ImportCandidate};
use conduit_host::mcp_client::oauth::SignedOut;
use conduit_host::mentions::{CompletionTarget, Mentionables};
use conduit_host::providers::{LOCAL_SERVERS, LocalProvider, ProviderInput, ProviderSummary};
use conduit_host::serve_http::ServeHttpStatus;
use conduit_host::served::ServeSnippets;
use conduit_host::settings::ToolPolicy;
use conduit_host::store::export::Format as ExportFormat;
use conduit_host::store::{Conversation, HistoryDamage, SearchHit, StoredMessage};
use conduit_host::toolset::{ToolChoices, Toolset};
use conduit_host::window_events::{EventBatch, PULL_WAIT, WindowEvent, WindowMailboxes};
use conduit_host::{AppInfo, Host};
use tauri::ipc::{InvokeBody, Request};

use crate::bindgen::window_command;
use crate::events::{self, EventStream};
use crate::native::{self, Confirmer};

/// What the window's commands share.
pub struct AppState {
    pub app: Arc<App>,
    /// How the user confirms what a page must not decide alone.
    confirmer: Confirmer,
    /// The config file the user last picked to import from (the page never names one).
    picked_import: Mutex<Option<PathBuf>>,
    /// Each window's events, until its page pulls them.
    pub windows: WindowMailboxes,
}

impl AppState {
    pub fn new(host: Host, confirmer: Confirmer) -> Self {
        Self {
            app: App::new(Arc::new(host)),
            confirmer,
            picked_import: Mutex::new(None),
            windows: WindowMailboxes::default(),
        }
    }

    fn host(&self) -> &Host {
        self.app.host()
    }

    /// How the user confirms what a page must not decide alone.
    pub fn confirmer(&self) -> Confirmer {
        self.confirmer
    }
}

/// What every command answers: a value, or a [`CommandError`] (the error's message with
/// its causes, and what the window can offer), made from the host's error at this edge.
pub type Reply<T> = Result<T, CommandError>;

window_command! {
/// The app's version and where its data lives.
#[tauri::command]
pub fn app_info(state: tauri::State<'_, AppState>) -> Reply<AppInfo> {
    Ok(state.host().info())
}
}

window_command! {
/// Damage the check of the whole history found while the app has it open, if any: the
/// file stays in use until the next start moves it aside and begins a new one.
#[tauri::command]
pub fn history_damage(state: tauri::State<'_, AppState>) -> Reply<Option<HistoryDamage>> {
    Ok(state.host().history_damage().borrow().clone())
}
}

window_command! {
/// The `count` most recently updated conversations (the sidebar asks for 500 more each
/// time it shows older ones), at most 20,000.
#[tauri::command(async)]
pub fn list_conversations(
    state: tauri::State<'_, AppState>,
    count: usize,
) -> Reply<Vec<Conversation>> {
    state
        .host()
        .conversations(count.clamp(1, MOST_CONVERSATIONS_LISTED))
        .map_err(CommandError::from)
}
}

/// The most conversations listed at once: a page script asking for more is given these,
/// and older ones are reached through search.
pub const MOST_CONVERSATIONS_LISTED: usize = 20_000;

window_command! {
#[tauri::command(async)]
pub fn search_history(state: tauri::State<'_, AppState>, query: String) -> Reply<Vec<SearchHit>> {
    state.host().search(&query, 50).map_err(CommandError::from)
}
}

window_command! {
/// Up to `limit` messages before message `before` (or the newest), oldest first.
#[tauri::command(async)]
pub fn load_messages(
    state: tauri::State<'_, AppState>,
    conversation: String,
    before: Option<i64>,
    limit: usize,
) -> Reply<Vec<StoredMessage>> {
    state
        .host()
        .conversation_page(&conversation, before, limit.clamp(1, 500))
        .map_err(CommandError::from)
}
}

window_command! {
#[tauri::command(async)]
pub fn rename_conversation(
    state: tauri::State<'_, AppState>,
    conversation: String,
    title: String,
) -> Reply<()> {
    state
        .host()
        .rename_conversation(&conversation, &title)
        .map_err(CommandError::from)
}
}

window_command! {
/// Pins a conversation to the top of the list, or unpins it.
#[tauri::command(async)]
pub fn pin_conversation(
    state: tauri::State<'_, AppState>,
    conversation: String,
    pinned: bool,
) -> Reply<()> {
    state
        .host()
        .pin_conversation(&conversation, pinned)
        .map_err(CommandError::from)
}
}

window_command! {
/// Deletes a conversation after the user confirmed it natively (a page script cannot
/// delete history alone); `false` when the user kept it.
#[tauri::command]
pub async fn delete_conversation(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    conversation: String,
) -> Reply<bool> {
    let (asked, deleting) = (conversation.clone(), conversation.clone());
    let deleted = confirmed(
        &app,
        &state,
        "Delete",
        move |host| Ok(Some(host.deletion_question(&asked)?)),
        move |host| Ok(host.delete_conversation(&deleting)?),
    )
    .await?;
    if deleted {
        state.app.views().close_conversation(&conversation);
    }
    Ok(deleted)
}
}

window_command! {
#[tauri::command(async)]
pub fn list_providers(state: tauri::State<'_, AppState>) -> Reply<Vec<ProviderSummary>> {
    state.host().list_providers().map_err(CommandError::from)
}
}

window_command! {
#[tauri::command]
pub async fn provider_models(
    state: tauri::State<'_, AppState>,
    provider: String,
) -> Reply<Vec<String>> {
    let models = state.host().provider_models(&provider).await?;
    Ok(models.into_iter().map(|m| m.id).collect())
}
}

window_command! {
/// Ollama and LM Studio, if they answer on this machine.
#[tauri::command]
pub async fn detect_local_providers(
    state: tauri::State<'_, AppState>,
) -> Reply<Vec<LocalProvider>> {
    Ok(state.host().detect_local_providers(&LOCAL_SERVERS).await)
}
}

window_command! {
/// Saves a local model server the window found as a provider (no key; its first model
/// is the default).
#[tauri::command]
pub async fn add_local_provider(
    app: tauri::AppHandle,
    webview: tauri::Webview,
    state: tauri::State<'_, AppState>,
    provider: LocalProvider,
) -> Reply<()> {
    // Settings may add one any time; any other window (the chat window's first-run panel)
    // only before a provider is set up. Off the workers: the settings' lock and the
    // secret store may keep it waiting.
    let from_settings = webview.label() == crate::native::SETTINGS_LABEL;
    let engine = state.app.clone();
    blocking(move || {
        let host = engine.host();
        if from_settings {
            host.add_local_provider(provider)?;
        } else {
            host.add_local_provider_on_first_run(provider)?;
        }
        Ok(())
    })
    .await?;
    providers_changed(&app);
    Ok(())
}
}

window_command! {
/// Starts a turn; its events arrive on `on_event`, the last one `ended`. A turn that
/// cannot start is refused with what to do. Async so that the turn's task starts on the
/// app's runtime.
#[tauri::command]
pub async fn send_message(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    request: SendRequest,
    on_event: EventStream<TurnEvent>,
) -> Reply<Started> {
    let sink = Arc::new(move |event: TurnEvent| {
        if crate::native::wants_the_user(&event) {
            crate::native::ask_attention(&app);
        }
        if let Err(error) = on_event.send(event) {
            tracing::debug!(%error, "the window no longer listens to this turn");
        }
    });
    state.app.send(request, sink)
}
}

window_command! {
/// Exports a conversation (Markdown or JSON) to a file the user picks in a native save
/// dialog, its images and long outputs in a folder beside it; `None` when they cancel.
/// The page names only the conversation and the format.
#[tauri::command]
pub async fn export_conversation(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    conversation: String,
    format: ExportFormat,
) -> Reply<Option<String>> {
    let name = state
        .host()
        .export_file_name(&conversation, format)
        .map_err(CommandError::from)?;
    let filter_name = match format {
        ExportFormat::Markdown => "Markdown",
        ExportFormat::Json => "JSON",
    };
    let Some(target) = crate::native::choose_save_path(
        &app,
        "Export conversation",
        &name,
        (filter_name, &[format.extension()]),
    )
    .await?
    else {
        return Ok(None);
    };
    let host = state.app.host_arc();
    let written = tokio::task::spawn_blocking(move || {
        host.export_conversation_as(&conversation, format, &target)
    })
    .await
    .map_err(|e| CommandError::message(format!("the export stopped: {e}")))?
    .map_err(CommandError::from)?;
    tracing::info!(file = %written.display(), "exported a conversation");
    Ok(Some(written.display().to_string()))
}
}

window_command! {
/// What the ready servers offer to mention in a message: resources, resource templates
/// and prompts (the composer's `@` and `/`).
#[tauri::command]
pub async fn mentionables(state: tauri::State<'_, AppState>) -> Reply<Mentionables> {
    Ok(state.app.mentionables().await)
}
}

window_command! {
/// A server's suggestions for an argument of a template or prompt being filled in.
#[tauri::command]
pub async fn complete_mention(
    state: tauri::State<'_, AppState>,
    server: String,
    target: CompletionTarget,
    argument: String,
    value: String,
) -> Reply<Vec<String>> {
    state
        .app
        .complete_mention(&server, target, &argument, &value)
        .await
        .map_err(CommandError::from)
}
}

window_command! {
/// What a toolset offers among the ready servers' tools: `toolset` as the window holds it
/// for a new chat, else the conversation's own.
#[tauri::command]
pub async fn tool_choices(
    state: tauri::State<'_, AppState>,
    conversation: Option<String>,
    toolset: Option<Toolset>,
) -> Reply<ToolChoices> {
    state
        .app
        .tool_choices(conversation, toolset)
        .await
        .map_err(CommandError::from)
}
}

window_command! {
/// Keeps the tools a saved conversation may use.
#[tauri::command(async)]
pub fn set_conversation_toolset(
    state: tauri::State<'_, AppState>,
    conversation: String,
    toolset: Toolset,
) -> Reply<()> {
    state
        .app
        .set_conversation_toolset(&conversation, &toolset)
        .map_err(CommandError::from)
}
}

window_command! {
#[tauri::command(async)]
pub fn stop_turn(state: tauri::State<'_, AppState>, turn: String) -> Reply<()> {
    state.app.stop(&turn);
    Ok(())
}
}

window_command! {
/// A conversation's instructions to the model (empty: none).
#[tauri::command(async)]
pub fn conversation_instructions(
    state: tauri::State<'_, AppState>,
    conversation: String,
) -> Reply<String> {
    state
        .app
        .conversation_instructions(&conversation)
        .map_err(CommandError::from)
}
}

window_command! {
/// Keeps a conversation's instructions to the model for its next turns.
#[tauri::command(async)]
pub fn set_conversation_instructions(
    state: tauri::State<'_, AppState>,
    conversation: String,
    instructions: String,
) -> Reply<()> {
    state
        .app
        .set_conversation_instructions(&conversation, &instructions)
        .map_err(CommandError::from)
}
}

window_command! {
/// The tools allowed in a conversation until Conduit quits.
#[tauri::command(async)]
pub fn conversation_allows(
    state: tauri::State<'_, AppState>,
    conversation: String,
) -> Reply<Vec<conduit_host::approval::ConversationAllow>> {
    Ok(state.app.conversation_allows(&conversation))
}
}

window_command! {
/// Takes back a tool's allow in a conversation; it only takes a permission away.
#[tauri::command(async)]
pub fn revoke_conversation_allow(
    state: tauri::State<'_, AppState>,
    conversation: String,
    server: String,
    tool: String,
) -> Reply<bool> {
    Ok(state
        .app
        .revoke_conversation_allow(&conversation, &server, &tool))
}
}

window_command! {
/// A turn waiting for servers to start begins without them; it only takes tools away.
#[tauri::command(async)]
pub fn answer_without_waiting(state: tauri::State<'_, AppState>, turn: String) -> Reply<()> {
    state.app.answer_without_waiting(&turn);
    Ok(())
}
}

window_command! {
/// Answers a call's approval question; "Always allow" only after the user confirms it
/// natively (a script in the page cannot save an allow alone).
#[tauri::command]
pub async fn answer_approval(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    turn: String,
    call_id: String,
    decision: Decision,
) -> Reply<bool> {
    let confirmer = state.confirmer;
    state
        .app
        .answer(&turn, &call_id, decision, move |question| {
            confirmer.ask(&app, &question, "Always allow")
        })
        .await
        .map_err(CommandError::from)
}
}

window_command! {
/// Stores an image the user attached; the request body is its bytes.
#[tauri::command]
pub async fn store_attachment(
    state: tauri::State<'_, AppState>,
    request: Request<'_>,
) -> Reply<MediaRef> {
    let InvokeBody::Raw(bytes) = request.body() else {
        return Err(CommandError::message(
            "send the image's bytes as the request body",
        ));
    };
    // Over `ATTACHMENT_MAX_BYTES`: refused before the page's body is even copied.
    conduit_host::app::attachment_fits(bytes.len()).map_err(CommandError::from)?;
    state.app.store_attachment(bytes.clone()).await.map_err(CommandError::from)
}
}

window_command! {
#[tauri::command]
pub fn mcp_servers(state: tauri::State<'_, AppState>) -> Reply<McpOverview> {
    Ok(state.app.mcp_servers())
}
}

window_command! {
/// Opens a link from a message in the system browser (never inside the app), after the
/// user saw the whole URL in a native confirmation.
#[tauri::command]
pub async fn open_external(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    url: String,
) -> Reply<()> {
    let url = conduit_host::external_url(&url)
        .map_err(CommandError::message)?
        .to_owned();
    let question = conduit_host::link_question("Open this link in your browser?", &url);
    open_after_asking(app, state.confirmer, question, url).await
}
}

/// Opens `url` (checked by `external_url`) in the system browser once the user said yes to
/// `question` in a native confirmation.
pub(crate) async fn open_after_asking(
    app: tauri::AppHandle,
    confirmer: crate::native::Confirmer,
    question: String,
    url: String,
) -> Reply<()> {
    blocking(move || {
        match confirmer.ask_if_free(&app, &question, "Open") {
            Some(true) => Ok(open::that_detached(&url)?),
            Some(false) => Err(CommandError::message("the link was not opened")),
            // Nobody said no (a view counts the user's refusals, not these): the words
            // `OTHER_CONFIRMATION_OPEN` in ui/src/lib/appView.ts.
            None => Err(CommandError::message(
                "another confirmation is open: answer it, then open the link again",
            )),
        }
    })
    .await
}

window_command! {
/// The questions MCP servers are asking the user (elicitation), oldest first.
#[tauri::command]
pub fn mcp_questions(state: tauri::State<'_, AppState>) -> Reply<Vec<Question>> {
    Ok(state.app.asker().questions())
}
}

window_command! {
/// Answers a server's question. A form's values must fit its schema (the host checks);
/// consent to open a page counts only after the user saw the whole URL in a native
/// confirmation, and the page opens in the system browser through the link policy.
#[tauri::command]
pub async fn answer_question(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    id: String,
    reply: QuestionReply,
) -> Reply<()> {
    let asker = state.app.asker().clone();
    let accepted_url = match (&reply, asker.url_of(&id)) {
        (QuestionReply::Accept { .. }, Some(url)) => Some(url),
        _ => None,
    };
    let Some((server, url)) = accepted_url else {
        return asker.answer(&id, reply).map_err(CommandError::from);
    };
    let confirmer = state.confirmer;
    blocking(move || {
        let url = conduit_host::external_url(&url).map_err(CommandError::message)?.to_owned();
        let question = conduit_host::link_question(
            &format!(
                "The MCP server {} asks you to open this page in your browser:",
                conduit_host::window_guard::quoted_cut(&conduit_host::core::text::visible(&server), 80)
            ),
            &url,
        );
        match confirmer.ask_if_free(&app, &question, "Open") {
            Some(true) => {}
            Some(false) => {
                asker.answer(&id, QuestionReply::Decline)?;
                return Err(CommandError::message("the page was not opened"));
            }
            // Another confirmation was open: the user said nothing, so the server hears
            // nothing and the question waits to be answered again.
            None => {
                return Err(CommandError::message(
                    "another confirmation is open: answer it, then open the page again",
                ));
            }
        }
        asker.answer(&id, reply)?;
        Ok(open::that_detached(&url)?)
    })
    .await
}
}

window_command! {
/// The sampling requests MCP servers sent (a model run they ask for), oldest first, with
/// where each is (asking, running, a result to review, failed).
#[tauri::command]
pub fn mcp_sampling_requests(state: tauri::State<'_, AppState>) -> Reply<Vec<SamplingQuestion>> {
    Ok(state.app.asker().sampling_requests())
}
}

window_command! {
/// Answers a sampling request: run it on a provider and model, send the result shown,
/// or deny it. The host checks that the reply fits where the request is.
#[tauri::command]
pub fn answer_sampling(
    state: tauri::State<'_, AppState>,
    id: String,
    reply: SamplingReply,
) -> Reply<()> {
    Ok(state.app.asker().answer_sampling(&id, reply)?)
}
}

window_command! {
/// Sets what happens to a server's sampling requests (ask, allow, deny); an allow is
/// saved only after the user confirms it natively.
#[tauri::command]
pub async fn set_sampling_policy(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    server: String,
    policy: ToolPolicy,
) -> Reply<()> {
    let confirmer = state.confirmer;
    state
        .app
        .set_sampling_policy(&server, policy, move |question| {
            confirmer.ask(&app, &question, "Allow")
        })
        .await
        .map_err(CommandError::from)
}
}

/// Runs `work` (which may wait for a native dialog) off the async workers.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> Reply<T> + Send + 'static) -> Reply<T> {
    tauri::async_runtime::spawn_blocking(work)
        .await
        .map_err(|e| CommandError::message(format!("the request stopped unexpectedly: {e}")))?
}

/// Does `act` once the user said `allow` to the native question `question` asks (`None`:
/// nothing to ask), off the async workers; `false` when they said no and nothing was done.
async fn confirmed(
    app: &tauri::AppHandle,
    state: &AppState,
    allow: &'static str,
    question: impl FnOnce(&Host) -> Reply<Option<String>> + Send + 'static,
    act: impl FnOnce(&Host) -> Reply<()> + Send + 'static,
) -> Reply<bool> {
    let (engine, confirmer, app) = (state.app.clone(), state.confirmer, app.clone());
    blocking(move || {
        let host = engine.host();
        if let Some(question) = question(host)?
            && !confirmer.ask(&app, &question, allow)
        {
            tracing::info!(
                allow,
                "the user said no to a native confirmation; nothing done"
            );
            return Ok(false);
        }
        act(host)?;
        Ok(true)
    })
    .await
}

window_command! {
/// Opens Settings in its own window: only that window may change settings.
#[tauri::command]
pub async fn open_settings(app: tauri::AppHandle) -> Reply<()> {
    native::open_settings(&app).map_err(CommandError::from)
}
}

/// Tells every window that the providers changed (Settings saves them; the chat lists them).
fn providers_changed(app: &tauri::AppHandle) {
    events::tell_all(app, WindowEvent::ProvidersChanged);
}

window_command! {
/// The calling window's events after number `after` (the `next` of the last answer, 0 at
/// first), waiting for one if there are none yet (at most 25 s, then it answers none).
#[tauri::command]
pub async fn next_window_events(
    webview: tauri::Webview,
    state: tauri::State<'_, AppState>,
    after: u64,
) -> Reply<EventBatch> {
    let mailbox = state.windows.of(webview.label());
    Ok(mailbox.pull(after, PULL_WAIT).await)
}
}

window_command! {
/// Adds or updates a provider; a save that loses a stored secret (the key replaced, or
/// deleted as the provider moves to another server, a header value dropped) is written
/// only after the user confirms it natively, and `false` when they kept it as it was.
#[tauri::command]
pub async fn save_provider(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    provider: ProviderInput,
) -> Reply<bool> {
    let asked = provider.clone();
    let saved = confirmed(
        &app,
        &state,
        "Save",
        move |host| Ok(host.save_question(&asked)?),
        move |host| Ok(host.save_provider(provider)?),
    )
    .await?;
    if saved {
        providers_changed(&app);
    }
    Ok(saved)
}
}

window_command! {
/// Removes a provider and its stored key after the user confirmed it natively; `false`
/// when the user kept it.
#[tauri::command]
pub async fn remove_provider(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    provider: String,
) -> Reply<bool> {
    let asked = provider.clone();
    let removed = confirmed(
        &app,
        &state,
        "Remove",
        move |host| Ok(Some(host.removal_question(&asked)?)),
        move |host| Ok(host.remove_provider(&provider)?),
    )
    .await?;
    if removed {
        providers_changed(&app);
    }
    Ok(removed)
}
}

window_command! {
#[tauri::command(async)]
pub fn mcp_file(state: tauri::State<'_, AppState>) -> Reply<McpFile> {
    state.host().mcp_file().map_err(CommandError::from)
}
}

window_command! {
/// Applies the window's change; one that would start a new or changed command, connect
/// to a new or changed URL or delete a server is written only after the user confirms it
/// natively.
#[tauri::command]
pub async fn edit_mcp_file(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    version: Option<String>,
    edit: Edit,
) -> Reply<McpFile> {
    let engine = state.app.clone();
    let confirmer = state.confirmer;
    blocking(move || {
        let confirm = |question: &str| confirmer.ask(&app, question, "Allow");
        let written = engine
            .host()
            .edit_mcp_file(version, edit, &confirm)
            .map_err(CommandError::from)?;
        engine.apply_mcp_file_soon();
        Ok(written)
    })
    .await
}
}

window_command! {
/// The file with its secret values in clear, after the user confirmed it natively.
#[tauri::command]
pub async fn reveal_mcp_file(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
) -> Reply<McpFile> {
    let engine = state.app.clone();
    let confirmer = state.confirmer;
    blocking(move || {
        let question = "Show the secret values (env and headers, sign-in client secrets, and the user names and query values of URLs) of the mcpServers file in the settings window?";
        if !confirmer.ask(&app, question, "Show") {
            return Err(CommandError::message("the secret values stay hidden"));
        }
        engine.host().mcp_file_revealed().map_err(CommandError::from)
    })
    .await
}
}

window_command! {
#[tauri::command(async)]
pub fn check_mcp_text(
    state: tauri::State<'_, AppState>,
    text: String,
) -> Reply<Option<TextProblem>> {
    Ok(state.host().check_mcp_text(&text))
}
}

/// One of Conduit's own folders the window may open.
#[derive(Debug, Clone, Copy, serde::Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum Folder {
    Data,
    Logs,
    Config,
}

impl Folder {
    fn name(self) -> &'static str {
        match self {
            Self::Data => "data",
            Self::Logs => "logs",
            Self::Config => "config",
        }
    }
}

/// A config file to import from: a known one by id, or the one the user picked.
#[derive(Debug, Clone, serde::Deserialize, ts_rs::TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ImportSource {
    Known { id: String },
    Picked,
}

impl AppState {
    fn import_path(&self, source: &ImportSource) -> Reply<PathBuf> {
        match source {
            ImportSource::Known { id } => {
                self.host().mcp_import_file(id).map_err(CommandError::from)
            }
            ImportSource::Picked => self
                .picked_import
                .lock()
                .clone()
                .ok_or_else(|| CommandError::message("pick a config file first")),
        }
    }
}

window_command! {
/// Where other apps keep their servers on this machine.
#[tauri::command(async)]
pub fn mcp_import_files(state: tauri::State<'_, AppState>) -> Reply<Vec<ImportFile>> {
    Ok(state.host().mcp_import_files())
}
}

window_command! {
/// Lets the user pick a config file in a native dialog; its path stays here. `None` when
/// they cancel.
#[tauri::command]
pub async fn pick_mcp_import_file(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
) -> Reply<Option<String>> {
    let picked = blocking(move || Ok(native::pick_config_file(&app))).await?;
    let name = picked.as_ref().map(|path| path.display().to_string());
    if let Some(path) = picked {
        *state.picked_import.lock() = Some(path);
    }
    Ok(name)
}
}

window_command! {
/// The servers of a known or picked config file, their secret values masked.
#[tauri::command]
pub async fn mcp_import_candidates(
    state: tauri::State<'_, AppState>,
    source: ImportSource,
) -> Reply<Vec<ImportCandidate>> {
    let path = state.import_path(&source)?;
    // Off the workers: a large file (Claude Code's, tens of megabytes) is read through.
    let engine = state.app.clone();
    blocking(move || {
        engine
            .host()
            .mcp_import_candidates(&path)
            .map_err(CommandError::from)
    })
    .await
}
}

window_command! {
/// Adds the picked servers of a known or picked file, after the user confirms what they
/// would start.
#[tauri::command]
pub async fn import_mcp_servers(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    version: Option<String>,
    source: ImportSource,
    picks: Vec<ImportPick>,
) -> Reply<McpFile> {
    let path = state.import_path(&source)?;
    let engine = state.app.clone();
    let confirmer = state.confirmer;
    blocking(move || {
        let confirm = |question: &str| confirmer.ask(&app, question, "Allow");
        let written = engine
            .host()
            .import_mcp_servers(version, &path, picks, &confirm)
            .map_err(CommandError::from)?;
        engine.apply_mcp_file_soon();
        Ok(written)
    })
    .await
}
}

window_command! {
/// What a server wrote to stderr and sent as log messages lately, for Settings' Log.
#[tauri::command(async)]
pub fn mcp_server_output(
    state: tauri::State<'_, AppState>,
    server: String,
) -> Reply<conduit_host::mcp_client::servers::ServerOutput> {
    Ok(state.app.mcp_server_output(&server))
}
}

window_command! {
#[tauri::command]
pub async fn mcp_server_tools(
    state: tauri::State<'_, AppState>,
    server: String,
) -> Reply<ServerTools> {
    state.app.mcp_server_tools(&server).await.map_err(CommandError::from)
}
}

window_command! {
/// How other apps (Claude Desktop, Cursor, VS Code) start Conduit as their MCP server.
#[tauri::command]
pub fn mcp_serve_snippets() -> Reply<ServeSnippets> {
    Ok(ServeSnippets::here())
}
}

window_command! {
/// Whether Conduit serves MCP over HTTP from the app, where, and its token masked.
#[tauri::command]
pub async fn mcp_http_status(state: tauri::State<'_, AppState>) -> Reply<ServeHttpStatus> {
    Ok(state.app.http().status().await)
}
}

window_command! {
/// Starts or stops serving MCP over HTTP on a loopback address (kept in settings).
/// Serving, or serving somewhere new, opens a port to the user's conversations: only
/// after a native confirmation naming the address. Stopping needs none.
#[tauri::command]
pub async fn set_mcp_http(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    enabled: bool,
    address: String,
) -> Reply<ServeHttpStatus> {
    let endpoint = state.app.http();
    let now = endpoint.status().await;
    let opens = enabled && !(now.enabled && now.address == address.trim());
    if opens {
        let confirmer = state.confirmer;
        let question = format!(
            "Serve Conduit's tools and your conversations over HTTP at {}?\n\nApps on this computer that have the access token can use them.",
            address.trim()
        );
        let confirmed = blocking(move || Ok(confirmer.ask(&app, &question, "Serve"))).await?;
        if !confirmed {
            return Err(CommandError::message("nothing was changed: serving was not confirmed"));
        }
    }
    endpoint.set(enabled, &address).await.map_err(CommandError::from)
}
}

window_command! {
/// Copies the HTTP endpoint's token to the clipboard after the user confirmed it
/// natively: the page never holds it.
#[tauri::command]
pub async fn copy_mcp_token(app: tauri::AppHandle, state: tauri::State<'_, AppState>) -> Reply<()> {
    use tauri_plugin_clipboard_manager::ClipboardExt;
    let token = state.host().serve_token().map_err(CommandError::from)?;
    let confirmer = state.confirmer;
    blocking(move || {
        let question = "Copy the access token of Conduit's MCP server to the clipboard?\n\nAn app with this token can read your conversations.";
        if !confirmer.ask(&app, question, "Copy") {
            return Err(CommandError::message("the token was not copied"));
        }
        app.clipboard()
            .write_text(token.token)
            .map_err(CommandError::from)
    })
    .await
}
}

window_command! {
#[tauri::command]
pub async fn restart_mcp_server(state: tauri::State<'_, AppState>, server: String) -> Reply<()> {
    state.app.restart_mcp_server(&server).await;
    Ok(())
}
}

window_command! {
/// Signs in to an HTTP server in the system browser: the authorization URL comes on
/// `on_url`, to be shown in full; resolves once the browser came back and the server
/// started again. The host finds the URL (from the server's metadata, a web page only).
#[tauri::command]
pub async fn mcp_sign_in(
    state: tauri::State<'_, AppState>,
    server: String,
    on_url: EventStream<String>,
) -> Reply<()> {
    let open: conduit_host::mcp_client::oauth::OpenBrowser =
        Arc::new(|url: &str| open::that_detached(url).map_err(|e| e.to_string()));
    let announce = move |url: &str| {
        if let Err(error) = on_url.send(url.to_owned()) {
            tracing::debug!(%error, "the window no longer listens to this sign-in");
        }
    };
    state
        .app
        .sign_in_mcp(&server, open, &announce)
        .await
        .map_err(|error| CommandError::from_sign_in(&error))
}
}

window_command! {
/// Signs out of a server, once the user confirmed it natively (a stored sign-in cannot be
/// had back without the browser): its tokens revoked where offered, and forgotten; `None`
/// when the user kept it.
#[tauri::command]
pub async fn mcp_sign_out(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    server: String,
) -> Reply<Option<SignedOut>> {
    let question = state
        .app
        .sign_out_question(&server)
        .await
        .map_err(|error| CommandError::from_sign_in(&error))?;
    if let Some(question) = question {
        let confirmer = state.confirmer;
        let asked = app.clone();
        let yes = blocking(move || Ok(confirmer.ask(&asked, &question, "Sign out"))).await?;
        if !yes {
            tracing::info!("the user said no to signing out; still signed in");
            return Ok(None);
        }
    }
    state
        .app
        .sign_out_mcp(&server)
        .await
        .map(Some)
        .map_err(|error| CommandError::from_sign_in(&error))
}
}

window_command! {
/// Whether a server's sign-in is stored.
#[tauri::command]
pub async fn mcp_signed_in(state: tauri::State<'_, AppState>, server: String) -> Reply<bool> {
    state
        .app
        .mcp_signed_in(&server)
        .await
        .map_err(|error| CommandError::from_sign_in(&error))
}
}

window_command! {
#[tauri::command]
pub async fn set_tool_enabled(
    state: tauri::State<'_, AppState>,
    server: String,
    tool: String,
    enabled: bool,
) -> Reply<()> {
    // Off the workers: the settings' lock may be held for long (a provider's save at
    // the keychain's prompt, another Conduit process).
    let engine = state.app.clone();
    blocking(move || {
        engine
            .host()
            .set_mcp_tool_enabled(&server, &tool, enabled)
            .map_err(CommandError::from)
    })
    .await
}
}

window_command! {
/// Sets when a tool runs; an allow is refused when the tool is no longer what `shown`
/// (from `mcp_server_tools`) says the window showed, and saved only after the user
/// confirms it natively.
#[tauri::command]
pub async fn set_tool_policy(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    server: String,
    tool: String,
    policy: ToolPolicy,
    shown: String,
) -> Reply<()> {
    let confirmer = state.confirmer;
    state
        .app
        .set_tool_policy(&server, &tool, policy, &shown, move |question| {
            confirmer.ask(&app, &question, "Allow")
        })
        .await
        .map_err(CommandError::from)
}
}

window_command! {
/// Opens one of Conduit's own folders (`data`, `logs`, `config`) in the file manager.
#[tauri::command(async)]
pub fn open_folder(state: tauri::State<'_, AppState>, folder: Folder) -> Reply<()> {
    let name = folder.name();
    let path = state
        .host()
        .folder(name)
        .ok_or_else(|| CommandError::message(format!("no folder called {name:?}")))?;
    Ok(open::that_detached(path)?)
}
}

window_command! {
/// Opens a stored file (a long tool output kept whole, a PDF) in the system's app for its
/// type. A PDF opens only after a native confirmation: the page names the file by hash,
/// and a script there could otherwise open a server's PDF in the system's viewer without
/// a click (a hash it named in a message of its own counts for nothing).
#[tauri::command]
pub async fn open_media(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    media: MediaRef,
) -> Reply<()> {
    let hash = media.hash;
    let (path, mime) = state
        .host()
        .media_file(&hash, false)
        .ok_or_else(|| CommandError::message(format!("no stored file {hash:?}")))?;
    let question = (mime == conduit_host::core::attached::PDF_MIME).then(|| {
        let megabytes = std::fs::metadata(&path).map_or(0.0, |meta| meta.len() as f64 / 1e6);
        format!("Open this PDF ({megabytes:.1} MB) in your PDF viewer?")
    });
    let confirmer = state.confirmer;
    blocking(move || {
        if let Some(question) = question {
            match confirmer.ask_if_free(&app, &question, "Open") {
                Some(true) => {}
                Some(false) => return Err(CommandError::message("the PDF was not opened")),
                None => {
                    return Err(CommandError::message(
                        "another question is open: answer it, then open the PDF again",
                    ));
                }
            }
        }
        Ok(open::that_detached(&path)?)
    })
    .await
}
}

window_command! {
/// Sets when a server's tools run; an allow is refused when its tools are no longer what
/// `shown` (from `mcp_server_tools`) says the window showed, and saved only after the
/// user confirms it natively.
#[tauri::command]
pub async fn set_server_policy(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    server: String,
    policy: ToolPolicy,
    shown: String,
) -> Reply<()> {
    let confirmer = state.confirmer;
    state
        .app
        .set_server_policy(&server, policy, &shown, move |question| {
            confirmer.ask(&app, &question, "Allow")
        })
        .await
        .map_err(CommandError::from)
}
}
