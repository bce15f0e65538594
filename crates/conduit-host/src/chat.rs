//! One run of the agent for a frontend: resolve the provider and its key, store the
//! attachments, offer the tools, stream the events, and keep the history valid.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use conduit_core::agent::{
    Agent, AgentOptions, Approval, Approver, EventSink, FixedApproval, Outcome,
};
use conduit_core::content::{Block, MediaRef, Message, Role};
use conduit_core::media::{MediaError, MediaStore};
use conduit_core::provider::ProviderError;
use conduit_core::tool::{ToolRegistry, ToolSpec};
use conduit_mcp::runtime::McpRuntime;
use conduit_mcp::tool::McpTool;
use conduit_providers::text_tools::{TextTools, ToolMode};
use conduit_providers::{HttpSettings, Protocol, ProviderConfig};
use tokio_util::sync::CancellationToken;

use crate::Host;
use crate::approval::{AutoApproval, WindowApproval};
use crate::providers::{ProvidersError, key_from_env};
use crate::recorder::Recorder;
use conduit_store::{MessageStatus, Store, StoreError};

/// Which provider a chat uses.
#[derive(Debug, Clone)]
pub enum ProviderChoice {
    /// One from settings, by id.
    Saved(String),
    /// Given on the command line.
    Explicit {
        protocol: Protocol,
        base_url: String,
        api_key_env: Option<String>,
    },
}

/// Who decides whether a tool call runs.
#[derive(Clone)]
pub enum ApprovalMode {
    /// Every call runs (`conduit chat --approve auto`).
    Auto,
    /// No call runs (the CLI's default: there is nobody to ask).
    Deny,
    /// The settings' per-tool policy, and the window asks about the rest: its questions
    /// go to these events.
    Window(EventSink),
}

/// Something the user attaches to a message.
#[derive(Debug, Clone)]
pub enum Attachment {
    /// A file to read: an image is stored, text is attached as a file (the bytes decide).
    File(PathBuf),
    /// Media already in the store (the window uploads before sending).
    Stored(MediaRef),
    /// A text file the window read, checked by [`conduit_core::attached`].
    Text(conduit_core::attached::CheckedFile),
    /// A PDF the window stored, checked by [`conduit_core::attached::check_document`].
    Document(conduit_core::attached::CheckedDocument),
}

/// What a frontend asks for.
#[derive(Clone)]
pub struct ChatRequest {
    /// Continue this saved conversation; `None` starts a new one.
    pub conversation: Option<String>,
    pub provider: ProviderChoice,
    pub model: Option<String>,
    pub prompt: String,
    pub attachments: Vec<Attachment>,
    pub approval: ApprovalMode,
    pub max_turns: u32,
    pub system: Option<String>,
    /// Thinking asked of the model; `None` leaves it at its default.
    pub reasoning: Option<conduit_core::provider::ReasoningEffort>,
    /// Overrides the provider's read timeout (a stream silent this long fails).
    pub read_timeout: Option<Duration>,
    /// Servers' resources attached to the message (read by the host when the turn starts).
    pub resources: Vec<crate::mentions::ResourceMention>,
    /// A server's prompt whose messages go into the conversation before the message.
    pub prompt_use: Option<crate::mentions::PromptMention>,
    /// Answers the conversation's last message again, with no new one (after a turn that
    /// failed); the prompt, attachments, resources and prompt use are then empty.
    pub again: bool,
    /// With `again`: answers the last user message anew, whatever answered it before
    /// (whole or not), which is kept, marked replaced, and never read by the model again.
    pub replace_answer: bool,
    /// The message takes the place of the conversation's last user message and whatever
    /// answered it, kept and marked replaced ("Edit").
    pub replace_message: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error(transparent)]
    Providers(#[from] ProvidersError),
    #[error(
        "no model given: pass --model, or set a default model for provider {0:?} (`conduit providers add ... --model M`)"
    )]
    NoModel(String),
    #[error("cannot attach {path}: {source}")]
    Attachment {
        path: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("the message is empty: give a prompt or an attachment")]
    EmptyMessage,
    #[error("the prompt ends with the assistant's words: add a message of your own")]
    PromptEndsWithAssistant,
    #[error(
        "there is nothing to answer again: the conversation's last answer is whole; send a new message"
    )]
    NothingToAnswerAgain,
    #[error(
        "there is no message of yours in this conversation to answer again or change: send a new one"
    )]
    NothingToReplace,
    #[error(transparent)]
    Mention(#[from] crate::mentions::MentionHostError),
    #[error("the turn was stopped before it started")]
    Stopped,
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    McpConfig(#[from] conduit_mcp::config::ConfigError),
    #[error(transparent)]
    Toolset(#[from] crate::toolset::ToolsetError),
}

/// A turn ready to run (see [`crate::Host::prepare_turn`]).
pub struct PreparedTurn {
    agent: Agent,
    conversation: String,
    history: Vec<Message>,
    store: Arc<Store>,
    window_approval: Option<Arc<WindowApproval>>,
    protocol: &'static str,
    model: String,
    /// What runs as each MCP server whose tools the turn was given, saved with its calls.
    server_prints: HashMap<String, String>,
}

impl PreparedTurn {
    pub fn conversation(&self) -> &str {
        &self.conversation
    }

    /// The window's approver of this turn, to route the user's answers to.
    pub fn window_approval(&self) -> Option<Arc<WindowApproval>> {
        self.window_approval.clone()
    }

    /// Runs the agent, saving the conversation as it goes and streaming events to
    /// `events`; a provider failure is saved with the message and returned in the
    /// outcome.
    pub async fn run(
        mut self,
        events: EventSink,
        cancel: CancellationToken,
    ) -> Result<ChatResult, ChatError> {
        let run_cancel = cancel.child_token();
        let recorder = Recorder::new(
            self.store.clone(),
            self.conversation.clone(),
            run_cancel.clone(),
            self.server_prints,
        );
        tracing::info!(protocol = self.protocol, model = %self.model, conversation = %self.conversation, "chat turn starts");
        let outcome = self
            .agent
            .run(&mut self.history, recorder.sink(events), run_cancel)
            .await;
        if let Some(err) = recorder.take_failure() {
            // The answer is not left "streaming" (its process's lease is held, so nothing
            // would mark it until the app closed): once more, it is marked as failed.
            if let Err(again) =
                recorder.failed_in_flight(&format!("saving the answer failed: {err}"))
            {
                tracing::warn!(error = %again, "the answer whose saving failed could not be marked as failed either");
            }
            return Err(ChatError::Store(err));
        }
        if let Err(err) = &outcome {
            tracing::warn!(error = %err, "chat turn failed");
            recorder.failed(&err.to_string())?;
        }
        Ok(ChatResult {
            conversation: self.conversation,
            outcome,
        })
    }
}

/// How the run ended, in which conversation.
pub struct ChatResult {
    pub conversation: String,
    /// How the agent ended; a provider's failure mid-run is here, saved with the message.
    pub outcome: Result<Outcome, ProviderError>,
}

impl Host {
    /// Whether a chat with saved provider `id` can start: its settings and key resolve and
    /// there is a model. The window asks before it saves anything.
    pub fn check_provider(&self, id: &str, model: Option<&str>) -> Result<(), ChatError> {
        let (config, default_model) = self.saved_provider_config(id)?;
        if model.is_none() && default_model.is_none() {
            return Err(ChatError::NoModel(id.to_owned()));
        }
        // Building it checks the rest (headers that are not valid HTTP, say).
        let media: Arc<dyn MediaStore> = self.media.clone();
        conduit_providers::build(config, media)?;
        Ok(())
    }

    /// Gets one user message's turn ready: resolves the provider and model, saves the
    /// message (and its conversation, when new), and fixes the tools `servers` offer now
    /// with what each really is, and who approves their calls. Refused before anything is
    /// saved when the provider, model or attachments are not usable.
    pub async fn prepare_turn(
        &self,
        request: ChatRequest,
        servers: &McpRuntime,
    ) -> Result<PreparedTurn, ChatError> {
        let (config, default_model) = self.provider_config(&request)?;
        let model = request
            .model
            .clone()
            .or(default_model)
            .ok_or_else(|| ChatError::NoModel(provider_label(&request.provider)))?;
        let store = self.store()?;
        let mut history = match &request.conversation {
            Some(id) => store.history(id)?,
            None => Vec::new(),
        };
        if request.replace_message {
            // What the model reads ends before that message; the store marks it and its
            // answer once nothing can refuse the turn any more.
            let last_user = history
                .iter()
                .rposition(|message| message.role == Role::User)
                .ok_or(ChatError::NothingToReplace)?;
            history.truncate(last_user);
        }
        if request.again {
            let conversation = request
                .conversation
                .as_deref()
                .ok_or(ChatError::NothingToAnswerAgain)?;
            if request.replace_answer {
                // What the model reads ends with that message; the store marks the rest
                // once nothing can refuse the turn any more.
                let last_user = history
                    .iter()
                    .rposition(|message| message.role == Role::User)
                    .ok_or(ChatError::NothingToReplace)?;
                history.truncate(last_user + 1);
            } else {
                answer_again(&store, conversation, &mut history)?;
            }
        }
        // A prompt's messages come first; the typed message (with its attachments and
        // resources) follows, unless there is none and the prompt ends with the user.
        let mut preface = match &request.prompt_use {
            Some(prompt) => self.prompt_preface(servers, prompt).await?,
            None => Vec::new(),
        };
        let mut resource_blocks = Vec::new();
        for mention in &request.resources {
            resource_blocks.extend(self.mention_blocks(servers, mention).await?);
        }
        let user = if request.again {
            None
        } else {
            match self.user_message(&request).await {
                Ok(mut user) => {
                    user.blocks.extend(resource_blocks);
                    Some(user)
                }
                Err(ChatError::EmptyMessage) if !resource_blocks.is_empty() => Some(Message {
                    role: Role::User,
                    blocks: resource_blocks,
                }),
                Err(ChatError::EmptyMessage) if !preface.is_empty() => None,
                Err(error) => return Err(error),
            }
        };
        if user.is_none() && preface.last().is_some_and(|m| m.role != Role::User) {
            return Err(ChatError::PromptEndsWithAssistant);
        }
        let protocol = config.protocol;
        let origin = conduit_providers::origin_of(&config.base_url);
        let provider = self.model_provider(&request.provider, config, &model)?;

        let conversation = match &request.conversation {
            Some(id) => id.clone(),
            None => {
                store.create_conversation(Some(&provider_label(&request.provider)), Some(&model))?
            }
        };
        // Everything that may refuse the turn comes before its messages are saved: a turn
        // refused is one whose message the window gives back.
        let mcp_tools = self.mcp_tools(servers, Some(&conversation))?;
        // This run's own system prompt (the CLI's `--system`), else the conversation's
        // instructions: a conversation continued from the CLI keeps them. Read before
        // anything is saved or marked, since a failed read refuses the turn.
        let system = match request.system.clone() {
            Some(system) => Some(system),
            None => store.instructions(&conversation)?,
        };
        if request.again && request.replace_answer {
            store.replace_answer(&conversation)?;
        }
        if request.replace_message {
            store.replace_last_message(&conversation)?;
        }
        for message in preface.drain(..).chain(user) {
            store.add_message(&conversation, &message, MessageStatus::Complete)?;
            history.push(message);
        }

        // What ran as each server when the runtime listed its tools (read under one lock
        // with them): the turn's calls run there or nowhere.
        let server_prints: HashMap<String, String> = mcp_tools
            .iter()
            .map(|tool| {
                let print = crate::approval::print_of_running(tool.server_from(), tool.server());
                (tool.server().to_owned(), print)
            })
            .collect();
        let mut window_approval = None;
        let approver: Arc<dyn Approver> = match request.approval {
            ApprovalMode::Auto => {
                let trust = crate::approval::tool_trust(&mcp_tools);
                Arc::new(AutoApproval::new(self.paths.settings_file.clone(), trust))
            }
            ApprovalMode::Deny => Arc::new(FixedApproval(Approval::Deny {
                reason: "tool calls are denied in this run (--approve deny)".into(),
            })),
            ApprovalMode::Window(events) => {
                // What each tool and its server are now, which an "allow" must still match.
                let trust = crate::approval::tool_trust(&mcp_tools);
                let window = WindowApproval::in_conversation(
                    events,
                    self.paths.settings_file.clone(),
                    trust,
                    self.conversation_allows.clone(),
                    conversation.clone(),
                );
                window_approval = Some(window.clone());
                window
            }
        };
        let tools = self.tool_registry(mcp_tools);
        let mut options = AgentOptions::new(model.clone());
        // The provider's name and where it is: a provider moved to another server under
        // the same name (OpenAI to Azure) is another producer of reasoning.
        options.provider = Some(match origin {
            Some(origin) => format!("{} {origin}", provider_label(&request.provider)),
            None => provider_label(&request.provider),
        });
        options.capabilities = conduit_providers::default_capabilities(protocol, &model);
        options.system = system;
        options.reasoning = request.reasoning;
        options.max_turns = request.max_turns;
        Ok(PreparedTurn {
            agent: Agent::new(provider, tools, approver, options),
            conversation,
            history,
            store,
            window_approval,
            protocol: protocol.name(),
            model,
            server_prints,
        })
    }

    /// The tools a turn started now would offer (what `/tools` lists in the REPL).
    pub fn offered_tools(&self, servers: &McpRuntime) -> Result<Vec<ToolSpec>, ChatError> {
        Ok(self.tool_registry(self.mcp_tools(servers, None)?).specs())
    }

    /// The enabled tools of the running MCP servers.
    /// What Settings enable, narrowed by what `conversation` chose (when given).
    fn mcp_tools(
        &self,
        servers: &McpRuntime,
        conversation: Option<&str>,
    ) -> Result<Vec<Arc<McpTool>>, ChatError> {
        let settings = self.settings().map_err(ProvidersError::from)?;
        let toolset = match conversation {
            Some(id) => self.conversation_toolset(id, servers)?.toolset,
            None => crate::toolset::Toolset::default(),
        };
        let allow = |server: &str, tool: &str| {
            settings.tool_enabled(server, tool) && toolset.allows(server, tool)
        };
        // A failed server is logged once when its state changes (in `conduit-mcp`), not
        // again on every turn.
        Ok(servers.tools(self.media.clone(), &allow))
    }

    /// A turn's tools: the MCP tools, and the test tools when they are switched on (test
    /// builds only). The test tools go in first, so an MCP tool exposed under the same
    /// name (a server named `test` with a tool `echo`) is the one that runs, as its
    /// approval names it.
    fn tool_registry(&self, mcp_tools: Vec<Arc<McpTool>>) -> ToolRegistry {
        let mut tools = ToolRegistry::new();
        #[cfg(any(test, feature = "test-fixtures"))]
        if crate::test_tools::enabled() {
            crate::test_tools::register(&mut tools, self.media.clone());
        }
        for tool in mcp_tools {
            tools.register(tool);
        }
        tools
    }

    fn provider_config(
        &self,
        request: &ChatRequest,
    ) -> Result<(ProviderConfig, Option<String>), ChatError> {
        let (mut config, default_model) = match &request.provider {
            ProviderChoice::Explicit {
                protocol,
                base_url,
                api_key_env,
            } => {
                let api_key = api_key_env.as_deref().map(key_from_env).transpose()?;
                let config = ProviderConfig {
                    protocol: *protocol,
                    base_url: base_url.clone(),
                    api_key,
                    http: HttpSettings::default(),
                };
                (config, None)
            }
            ProviderChoice::Saved(id) => self.saved_provider_config(id)?,
        };
        if let Some(timeout) = request.read_timeout {
            // "Nothing for this long" holds before the answer starts too: a provider that
            // takes the connection and never answers waited the default 10 minutes (a
            // script's `--read-timeout 2` hung its CI job).
            config.http.read_timeout = timeout;
            config.http.answer_start_timeout = timeout;
        }
        Ok((config, default_model))
    }

    async fn user_message(&self, request: &ChatRequest) -> Result<Message, ChatError> {
        let mut blocks = Vec::new();
        if !request.prompt.trim().is_empty() {
            blocks.push(Block::text(request.prompt.clone()));
        }
        for attachment in &request.attachments {
            let path = match attachment {
                Attachment::Stored(media) => {
                    blocks.push(Block::Image {
                        media: media.clone(),
                    });
                    continue;
                }
                Attachment::Text(file) => {
                    blocks.push(file.clone().into());
                    continue;
                }
                Attachment::Document(document) => {
                    blocks.push(document.clone().into());
                    continue;
                }
                Attachment::File(path) => path,
            };
            let attachment_error =
                |source: Box<dyn std::error::Error + Send + Sync>| ChatError::Attachment {
                    path: path.display().to_string(),
                    source,
                };
            let bytes = tokio::fs::read(path)
                .await
                .map_err(|e| attachment_error(e.into()))?;
            let name = path
                .file_name()
                .unwrap_or(path.as_os_str())
                .to_string_lossy()
                .into_owned();
            // A PDF first: one may be all ASCII, and so read as text.
            if conduit_core::attached::is_pdf(&bytes) {
                conduit_core::attached::document_fits(&name, bytes.len() as u64)
                    .map_err(|e| attachment_error(e.into()))?;
                let media = self.media.clone();
                let stored = tokio::task::spawn_blocking(move || {
                    media.put(&bytes, Some(conduit_core::attached::PDF_MIME))
                })
                .await
                .map_err(|e| attachment_error(e.into()))?
                .map_err(|e: MediaError| attachment_error(e.into()))?;
                let document = conduit_core::attached::check_document(&name, stored)
                    .map_err(|e| attachment_error(e.into()))?;
                blocks.push(document.into());
                continue;
            }
            // Text (code, notes, a CSV: one may start "BMW," as a BMP starts "BM"), else
            // an image; what is neither is refused as no text, saying what Conduit takes.
            if conduit_core::attached::is_text(&bytes) || image::guess_format(&bytes).is_err() {
                let file = conduit_core::attached::check_file(&name, bytes)
                    .map_err(|e| attachment_error(e.into()))?;
                blocks.push(file.into());
                continue;
            }
            let media = self.media.clone();
            let stored =
                tokio::task::spawn_blocking(move || media.put(&crate::upright(bytes), None))
                    .await
                    .map_err(|e| attachment_error(e.into()))?
                    .map_err(|e: MediaError| attachment_error(e.into()))?;
            blocks.push(Block::Image { media: stored });
        }
        if blocks.is_empty() {
            return Err(ChatError::EmptyMessage);
        }
        Ok(Message {
            role: Role::User,
            blocks,
        })
    }
}

impl Host {
    /// The provider a model run goes to: built from `config`, and wrapped for text
    /// tool-calling as the saved provider's tool mode for `model` says. Text tool-calling
    /// sits above the four protocols, so every run (a turn, a server's sampling request)
    /// gets its provider here.
    pub(crate) fn model_provider(
        &self,
        choice: &ProviderChoice,
        config: ProviderConfig,
        model: &str,
    ) -> Result<Arc<dyn conduit_core::provider::Provider>, ChatError> {
        self.model_provider_with(choice, config, model, self.media.clone())
    }

    /// [`Host::model_provider`] reading its images from `media` (a sampling run's own).
    pub(crate) fn model_provider_with(
        &self,
        choice: &ProviderChoice,
        config: ProviderConfig,
        model: &str,
        media: Arc<dyn conduit_core::media::MediaStore>,
    ) -> Result<Arc<dyn conduit_core::provider::Provider>, ChatError> {
        let tool_mode = match choice {
            ProviderChoice::Saved(id) => self
                .settings()
                .map_err(ProvidersError::from)?
                .provider(id)
                .map_err(ProvidersError::from)?
                .tool_mode_of(model),
            ProviderChoice::Explicit { .. } => ToolMode::Auto,
        };
        Ok(TextTools::wrap(
            conduit_providers::build(config, media)?,
            tool_mode,
            self.tool_modes.clone(),
            provider_label(choice),
        ))
    }
}

/// The provider as a conversation records it and errors name it: a saved one by its id,
/// one given on the command line by its base URL with its secrets masked (the URL can hold
/// a user and password or a key, and the label is stored, listed and shown).
fn provider_label(choice: &ProviderChoice) -> String {
    match choice {
        ProviderChoice::Saved(id) => id.clone(),
        ProviderChoice::Explicit { base_url, .. } => crate::window_guard::mask_url(base_url),
    }
}

/// Makes `history` end where the conversation's last message can be answered again: a
/// last answer that failed or was stopped, with no call in it, is left out of what the
/// model reads (it stays in the conversation, marked); what is left must end with the
/// user's message or tool results, else there is nothing to answer again.
fn answer_again(
    store: &conduit_store::Store,
    conversation: &str,
    history: &mut Vec<Message>,
) -> Result<(), ChatError> {
    let last_stored = store
        .messages(conversation, None)?
        .into_iter()
        .rev()
        .find(|message| !message.blocks.is_empty());
    let failed_answer = last_stored.is_some_and(|message| message.is_failed_answer());
    if failed_answer && history.last().is_some_and(|m| m.role == Role::Assistant) {
        history.pop();
    }
    match history.last() {
        Some(message) if message.role != Role::Assistant => Ok(()),
        _ => Err(ChatError::NothingToAnswerAgain),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A base URL given on the command line is recorded with the conversation (stored,
    /// listed by `sessions`, sent to the window) and named in errors: its user, password
    /// and query keys masked, as a saved provider's are.
    #[test]
    fn a_command_line_base_url_is_labelled_without_its_secrets() {
        let choice = ProviderChoice::Explicit {
            protocol: Protocol::OpenAiChat,
            base_url: "https://team:tok3n-secret@proxy.example/v1?key=q-s3cret-value".into(),
            api_key_env: None,
        };
        let label = provider_label(&choice);
        assert!(
            !label.contains("tok3n") && !label.contains("q-s3cret"),
            "{label}"
        );
        assert!(label.contains("proxy.example/v1"), "{label}");
        let error = ChatError::NoModel(label).to_string();
        assert!(!error.contains("tok3n"), "{error}");
        assert_eq!(
            provider_label(&ProviderChoice::Saved("work".into())),
            "work"
        );
    }
}
