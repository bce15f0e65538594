//! Tool approval for the window: each tool's policy from settings (allow, deny, ask;
//! ask by default), the window's question for the rest, and "Always allow" kept in
//! settings, bound to fingerprints of the server entry and the tool it was given to, so
//! it holds across restarts, can be revoked in Settings, and is asked again when the
//! server or the tool changed. "Allow in this conversation" is bound the same way, kept
//! in memory for one conversation until the process ends.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use async_trait::async_trait;
use conduit_core::agent::{Approval, Approver, EventSink, StandingAllow};
use conduit_core::approval::AskApproval;
use conduit_core::content::{ToolCall, ToolOrigin};
use conduit_core::tool::{Tool, ToolSpec};
use conduit_mcp::config::Transport;
use conduit_mcp::tool::McpTool;
use serde::Deserialize;
use serde_json::json;

use crate::settings::{ApprovedTool, Settings, SettingsError, Verdict};

/// The user's answer to an approval question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    AllowOnce,
    /// This call, and the tool's later calls in the same conversation while it is what
    /// it is now, until Conduit quits.
    AllowInConversation,
    AlwaysAllow,
    Deny,
}

/// A tool allowed in one conversation: which, and what it and its server were then.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AllowedHere {
    server: String,
    tool: String,
    now: ApprovedTool,
}

/// A tool allowed in a conversation, as the window lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, ts_rs::TS)]
pub struct ConversationAllow {
    pub server: String,
    pub tool: String,
}

/// The tools the user allowed for one conversation ("Allow in this conversation"), kept
/// in memory only: they end when the process does, and hold only while the tool and its
/// server are exactly what they were when allowed (a changed description, schema, command
/// or environment asks again, as an "Always allow" does).
#[derive(Debug, Default)]
pub struct ConversationAllows {
    allowed: Mutex<HashMap<String, Vec<AllowedHere>>>,
}

impl ConversationAllows {
    fn allow(&self, conversation: &str, trust: &ToolTrust) {
        // Nothing known runs as the server (no entry, or not Conduit's own): an empty
        // print matches no allow, in Settings or here.
        if trust.now.server.is_empty() {
            return;
        }
        let here = AllowedHere {
            server: trust.origin.server.clone(),
            tool: trust.origin.tool.clone(),
            now: trust.now.clone(),
        };
        let mut allowed = self.allowed.lock();
        let list = allowed.entry(conversation.to_owned()).or_default();
        // One allow per tool: the newest binds it to what it is now.
        list.retain(|kept| kept.server != here.server || kept.tool != here.tool);
        list.push(here);
    }

    /// Whether `trust`'s tool is allowed in `conversation` as it is now.
    fn allows(&self, conversation: &str, trust: &ToolTrust) -> bool {
        if trust.now.server.is_empty() {
            return false;
        }
        self.allowed.lock().get(conversation).is_some_and(|list| {
            list.iter().any(|kept| {
                kept.server == trust.origin.server
                    && kept.tool == trust.origin.tool
                    && kept.now == trust.now
            })
        })
    }

    /// The tools allowed in `conversation`, in the order they were allowed.
    pub fn listed(&self, conversation: &str) -> Vec<ConversationAllow> {
        self.allowed
            .lock()
            .get(conversation)
            .map(|list| {
                list.iter()
                    .map(|kept| ConversationAllow {
                        server: kept.server.clone(),
                        tool: kept.tool.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Takes back the allow of `tool` of `server` in `conversation`: its next call asks
    /// again. Whether there was one.
    pub fn revoke(&self, conversation: &str, server: &str, tool: &str) -> bool {
        let mut allowed = self.allowed.lock();
        let Some(list) = allowed.get_mut(conversation) else {
            return false;
        };
        let before = list.len();
        list.retain(|kept| kept.server != server || kept.tool != tool);
        let revoked = list.len() != before;
        if list.is_empty() {
            allowed.remove(conversation);
        }
        revoked
    }

    /// Forgets a deleted conversation's allows.
    pub fn forget(&self, conversation: &str) {
        self.allowed.lock().remove(conversation);
    }

    /// Forgets a removed server's allows in every conversation: one added later under
    /// the same name starts from "ask".
    pub fn forget_server(&self, server: &str) {
        let mut allowed = self.allowed.lock();
        for list in allowed.values_mut() {
            list.retain(|kept| kept.server != server);
        }
        allowed.retain(|_, list| !list.is_empty());
    }
}

/// What the host knows about an exposed tool name: the real server and tool behind it,
/// and what they are now (the fingerprints an "allow" is bound to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolTrust {
    pub origin: ToolOrigin,
    pub now: ApprovedTool,
    /// What the tool says it does, as listed with `now`: what an "Always allow" asks about.
    pub description: String,
}

/// The fingerprint of what runs as `server`, started from `from` (as the runtime started
/// it, not as the file may say since): a call's record and its view are bound to it.
/// Empty when nothing runs under that name.
pub(crate) fn print_of_running(
    from: Option<&conduit_mcp::runtime::RunningFrom>,
    server: &str,
) -> String {
    match from {
        Some(conduit_mcp::runtime::RunningFrom::Entry(transport)) => {
            server_fingerprint(Some(transport))
        }
        Some(conduit_mcp::runtime::RunningFrom::InProcess) => format!("in-process:{server}"),
        None => String::new(),
    }
}

/// The fingerprint of what a server runs: its command, arguments, environment and folder
/// (an env such as `NODE_OPTIONS` or another folder changes what runs as much as the
/// command does; values are only hashed), or its URL. Not an HTTP entry's headers: their
/// values are keys that rotate (a `${TOKEN}`), and the same print binds saved calls to
/// their views; a change of headers from the window is confirmed natively instead
/// (`window_guard`). A server the file no longer names (or cannot start) has none that
/// any allow matches.
pub fn server_fingerprint(transport: Option<&Transport>) -> String {
    let described = match transport {
        Some(Transport::Stdio {
            command,
            args,
            env,
            cwd,
        }) => {
            json!({"command": command, "args": args, "env": env, "cwd": cwd})
        }
        Some(Transport::Http { url, .. }) => json!({"url": url}),
        None => return String::new(),
    };
    conduit_files::fingerprint_bytes(described.to_string().as_bytes())
}

/// The server fingerprint an "allow" of a tool is bound to, for the server as it runs
/// (started from `from`), never as the file says since: between an edit and its
/// application the old process still answers, and must not pass for the new entry.
/// Conduit's own tools run no command of the file: they are what they are. Empty (no
/// allow matches) when nothing runs under that name.
pub(crate) fn allow_print_of_running(
    from: Option<&conduit_mcp::runtime::RunningFrom>,
    server: &str,
) -> String {
    match from {
        Some(conduit_mcp::runtime::RunningFrom::InProcess)
            if server == crate::builtin::BUILTIN_SERVER =>
        {
            conduit_files::fingerprint_bytes(b"conduit built-in tools")
        }
        Some(conduit_mcp::runtime::RunningFrom::InProcess) | None => String::new(),
        Some(conduit_mcp::runtime::RunningFrom::Entry(transport)) => {
            server_fingerprint(Some(transport))
        }
    }
}

/// What a tool is now: its server's fingerprint, and fingerprints of its description,
/// argument schema and the rest of its definition (`details`, from
/// `conduit_mcp::tool::definition_details`): what an "allow" is bound to.
pub fn approved_tool(
    server_print: String,
    description: &str,
    input_schema: &serde_json::Value,
    for_views: bool,
    details: &str,
) -> ApprovedTool {
    ApprovedTool {
        server: server_print,
        description: conduit_files::fingerprint_bytes(description.as_bytes()),
        input_schema: conduit_files::fingerprint_bytes(input_schema.to_string().as_bytes()),
        views: Some(for_views),
        details: Some(conduit_files::fingerprint_bytes(details.as_bytes())),
        other: Default::default(),
    }
}

/// What Settings showed of tools (each by its own name, with what it and its server were),
/// as one token the window sends back with an "allow": a server can change a tool between
/// the list and the click, and an allow saved then would cover what nobody saw.
pub fn shown_token<'a>(
    host: &crate::Host,
    tools: impl IntoIterator<Item = (&'a String, &'a ApprovedTool)>,
) -> String {
    let mut lines: Vec<String> = tools
        .into_iter()
        .map(|(name, tool)| {
            format!(
                "{name:?} {} {} {} {:?} {:?}",
                tool.server, tool.description, tool.input_schema, tool.views, tool.details
            )
        })
        .collect();
    lines.sort();
    // Keyed: the server's fingerprint hashes its env values, secrets among them.
    host.page_fingerprint(lines.join("\n").as_bytes())
}

/// What each tool `server` lists now is (by the tool's own name), as an allow would bind
/// it, and what the server says it does: every listed tool, those only its views may call
/// among them, read in one look with what runs (`slot`). The same fingerprints as
/// [`tool_trust`] gives a turn's tools.
pub fn listed_trust(
    slot: Option<&conduit_mcp::runtime::SlotNow>,
    server: &str,
) -> HashMap<String, (ApprovedTool, String)> {
    let Some(slot) = slot else {
        return HashMap::new();
    };
    let server_print = allow_print_of_running(slot.from.as_ref(), server);
    slot.tools
        .iter()
        .map(conduit_mcp::apps::ServerTool::from)
        .map(|tool| {
            let now = approved_tool(
                server_print.clone(),
                &tool.description,
                &tool.input_schema,
                tool.for_views,
                &tool.details,
            );
            (tool.name, (now, tool.description))
        })
        .collect()
}

/// Each MCP tool's origin and fingerprints, by exposed name; the server's is of what
/// runs, as the tool was listed ([`allow_print_of_running`]).
pub fn tool_trust(tools: &[Arc<McpTool>]) -> HashMap<String, ToolTrust> {
    let mut servers: HashMap<&str, String> = HashMap::new();
    let mut out = HashMap::new();
    for tool in tools {
        let server = tool.server();
        let server_print = servers
            .entry(server)
            .or_insert_with(|| allow_print_of_running(tool.server_from(), server))
            .clone();
        let spec = tool.spec();
        out.insert(
            spec.name.clone(),
            ToolTrust {
                origin: ToolOrigin {
                    server: server.to_owned(),
                    tool: tool.tool_name().to_owned(),
                },
                now: approved_tool(
                    server_print,
                    &spec.description,
                    &spec.input_schema,
                    tool.for_views(),
                    &tool.details(),
                ),
                description: spec.description.clone(),
            },
        );
    }
    out
}

impl crate::Host {
    /// Drops a removed server's tool preferences, its "allow"s among them, so a server
    /// added later under the same name starts from "ask". A failure (the settings file
    /// read-only or unreadable) is logged, not returned: the server is gone already. Its
    /// allows then stay, and hold again only for the very same command, arguments and
    /// environment added back under that name.
    ///
    /// A file entry named `conduit` never ran as itself (the name is Conduit's own tools'),
    /// and the preferences kept under that name are the built-in tools' (switched off,
    /// Never run, shared with outside clients): removing or renaming the entry keeps them.
    pub fn forget_server_policies(&self, server: &str) {
        if server == crate::builtin::BUILTIN_SERVER {
            return;
        }
        self.conversation_allows().forget_server(server);
        let file = &self.paths().settings_file;
        let forgotten = Settings::update(file, |settings| {
            settings.forget_server(server);
            Ok::<_, SettingsError>(())
        });
        if let Err(error) = forgotten {
            tracing::warn!(%server, %error, "the removed server's tool policies could not be dropped");
        }
    }
}

/// What a call of `tool` of `server` (now as `now`) gets before anyone is asked, by the
/// settings read now (a change in Settings applies at once): a tool switched off in
/// Settings is refused; settings that cannot be read mean asking. The one rule for a
/// model's calls and an MCP Apps view's.
pub fn verdict_now(
    settings_file: &std::path::Path,
    server: &str,
    tool: &str,
    now: &ApprovedTool,
) -> Verdict {
    verdict_of(&Settings::load(settings_file), server, tool, now)
}

/// [`verdict_now`] by settings already read (or not: `loaded` says why).
fn verdict_of(
    loaded: &Result<Settings, SettingsError>,
    server: &str,
    tool: &str,
    now: &ApprovedTool,
) -> Verdict {
    match loaded {
        Ok(settings) if !settings.tool_enabled(server, tool) => Verdict::Deny,
        Ok(settings) => settings.verdict(server, tool, now),
        Err(error) => Verdict::Ask {
            changes: vec![format!("the settings could not be read ({error})")],
        },
    }
}

/// How a call was allowed before it waited, which decides what may stop it after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowedBy {
    /// Settings let it run unasked: it stops when they would now ask.
    Settings,
    /// The user allowed this very call: the answer stands unless Settings that can be
    /// read now say Never run or the tool is switched off.
    Answer,
    /// `--approve auto`: as an answer, but settings that cannot be read stop it, as they
    /// stop a call under the flag before it is allowed.
    AutoFlag,
    /// An "Allow in this conversation" given earlier: as the flag (settings that cannot
    /// be read stop it; no Never run can be told apart then).
    Conversation,
}

/// Whether a call of `tool` of `server` (now as `now`) allowed before a wait may still be
/// sent after it, by the settings read now: refused when the tool was switched off or set
/// to Never run; where Settings would ask, or cannot be read, it depends on how it was
/// allowed (`allowed`). The one rule for a model's calls, under every approval mode, and
/// a view's.
pub fn still_allowed_now(
    settings_file: &std::path::Path,
    server: &str,
    tool: &str,
    now: &ApprovedTool,
    allowed: AllowedBy,
) -> Result<(), String> {
    let settings = match Settings::load(settings_file) {
        Ok(settings) => settings,
        Err(_) if allowed == AllowedBy::Answer => return Ok(()),
        Err(error) => {
            return Err(format!(
                "the settings could not be read ({error}), so Conduit cannot tell whether {tool} of {server} was set to Never run while the call waited"
            ));
        }
    };
    if !settings.tool_enabled(server, tool) {
        return Err(format!(
            "{tool} of {server} was switched off in Settings while the call waited"
        ));
    }
    match settings.verdict(server, tool, now) {
        Verdict::Allow => Ok(()),
        Verdict::Deny => Err(format!(
            "{tool} of {server} was set to Never run in Settings while the call waited"
        )),
        Verdict::Ask { .. } if allowed != AllowedBy::Settings => Ok(()),
        // Allowed by Settings, which would now ask: asked or not, it is not this call.
        Verdict::Ask { changes } if changes.is_empty() => Err(format!(
            "Settings now ask before {tool} of {server} runs (its Always allow was taken back while the call waited)"
        )),
        Verdict::Ask { changes } => Err(format!(
            "Settings now ask before {tool} of {server} runs ({})",
            changes.join("; ")
        )),
    }
}

/// `--approve auto`: every call runs unasked, except one of a tool Settings switched off
/// or set to Deny ("Never run"), also when that happens while the call waits: the user's
/// Settings decide over the flag. A call whose settings cannot be read is denied, since
/// Conduit cannot tell whether it was set so.
pub struct AutoApproval {
    settings_file: PathBuf,
    /// As [`WindowApproval`]'s: exposed tool name → the real server and tool.
    trust: HashMap<String, ToolTrust>,
}

impl AutoApproval {
    pub fn new(settings_file: PathBuf, trust: HashMap<String, ToolTrust>) -> Self {
        Self {
            settings_file,
            trust,
        }
    }
}

#[async_trait]
impl Approver for AutoApproval {
    async fn decide(&self, _call: &ToolCall, spec: &ToolSpec) -> Approval {
        let Some(trust) = self.trust.get(&spec.name) else {
            return Approval::Standing(StandingAllow::Auto);
        };
        let (server, tool) = (&trust.origin.server, &trust.origin.tool);
        match Settings::load(&self.settings_file) {
            Ok(settings) if !settings.tool_enabled(server, tool) => Approval::Deny {
                reason: format!("{tool} of {server} is switched off in Settings"),
            },
            Ok(settings) => match settings.verdict(server, tool, &trust.now) {
                Verdict::Deny => Approval::Deny {
                    reason: format!(
                        "{tool} of {server} is set to Never run in Settings (--approve auto runs what Settings do not deny)"
                    ),
                },
                Verdict::Allow => Approval::Standing(StandingAllow::Settings),
                Verdict::Ask { .. } => Approval::Standing(StandingAllow::Auto),
            },
            Err(error) => Approval::Deny {
                reason: format!(
                    "the settings could not be read ({error}), so Conduit cannot tell whether {tool} of {server} is set to Never run"
                ),
            },
        }
    }

    /// `--approve auto` answered for the user: only what Settings deny stops the call.
    fn still_allowed(&self, _call_id: &str, exposed_name: &str) -> Result<(), String> {
        let Some(trust) = self.trust.get(exposed_name) else {
            return Ok(());
        };
        let (server, tool) = (&trust.origin.server, &trust.origin.tool);
        still_allowed_now(
            &self.settings_file,
            server,
            tool,
            &trust.now,
            AllowedBy::AutoFlag,
        )
    }
}

/// Decides a turn's tool calls: settings first, then the window.
pub struct WindowApproval {
    ask: Arc<AskApproval>,
    settings_file: PathBuf,
    /// Exposed tool name → the real server and tool, and what they are now: fixed for
    /// the turn, from the tools it offers.
    trust: HashMap<String, ToolTrust>,
    /// Calls waiting for an answer (by Conduit's call id) → their exposed tool name.
    asked: Mutex<HashMap<String, String>>,
    /// Calls the user allowed by answering (Conduit's call ids, unique per host): their
    /// answer stands if Settings would ask when the call is checked again.
    answered: Mutex<HashSet<String>>,
    /// Calls that ran unasked under an "Allow in this conversation": checked again before
    /// they are sent, so an allow taken back meanwhile stops them.
    by_conversation: Mutex<HashSet<String>>,
    /// The conversation the turn answers, and the tools allowed in it: consulted before
    /// asking, and where "Allow in this conversation" is kept. None: no such scope (the
    /// answer then allows the call once).
    here: Option<(Arc<ConversationAllows>, String)>,
}

impl std::fmt::Debug for WindowApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowApproval").finish_non_exhaustive()
    }
}

impl WindowApproval {
    /// Questions go to `events` as `ApprovalRequested`; `trust` says what each tool the
    /// turn offers really is (see [`tool_trust`]).
    pub fn new(
        events: EventSink,
        settings_file: PathBuf,
        trust: HashMap<String, ToolTrust>,
    ) -> Arc<Self> {
        Self::with_scope(events, settings_file, trust, None)
    }

    /// As [`WindowApproval::new`], for a turn of `conversation`: what the user allowed
    /// in it (`allows`) runs unasked while the tool is what it was.
    pub fn in_conversation(
        events: EventSink,
        settings_file: PathBuf,
        trust: HashMap<String, ToolTrust>,
        allows: Arc<ConversationAllows>,
        conversation: String,
    ) -> Arc<Self> {
        Self::with_scope(events, settings_file, trust, Some((allows, conversation)))
    }

    fn with_scope(
        events: EventSink,
        settings_file: PathBuf,
        trust: HashMap<String, ToolTrust>,
        here: Option<(Arc<ConversationAllows>, String)>,
    ) -> Arc<Self> {
        Arc::new(Self {
            ask: AskApproval::new(events),
            settings_file,
            trust,
            asked: Mutex::new(HashMap::new()),
            answered: Mutex::new(HashSet::new()),
            by_conversation: Mutex::new(HashSet::new()),
            here,
        })
    }

    fn trust_of(&self, exposed: &str) -> Option<ToolTrust> {
        self.trust.get(exposed).cloned()
    }

    /// The calls waiting for an answer, by Conduit's call id.
    pub fn waiting(&self) -> Vec<String> {
        self.ask.waiting()
    }

    /// The real server and tool of the call `call_id` (Conduit's id) while it waits for
    /// an answer: what a native "Always allow" question names.
    pub fn waiting_tool(&self, call_id: &str) -> Option<ToolTrust> {
        if !self.ask.waiting().iter().any(|id| id == call_id) {
            return None;
        }
        let exposed = self.asked.lock().get(call_id).cloned()?;
        self.trust_of(&exposed)
    }

    /// Answers the question about the call `call_id` (Conduit's id); false, and nothing
    /// changes, when that call is not the one waiting (answered already, stopped, or
    /// never asked). "Always allow" is saved for exactly that call's tool, bound to what
    /// the server and tool are now, before the call runs. The question is taken first:
    /// of two answers at once, only the one that took it saves anything.
    pub fn answer(&self, call_id: &str, decision: Decision) -> Result<bool, SettingsError> {
        let Some(waiting) = self.ask.take(call_id) else {
            return Ok(false);
        };
        let exposed = self.asked.lock().remove(call_id);
        let approval = match decision {
            Decision::AllowOnce => Approval::Allow,
            Decision::AllowInConversation => {
                // A server nothing known runs as (an empty print) gets no allow that lasts:
                // the answer allows this call once.
                let trust = exposed
                    .as_deref()
                    .and_then(|e| self.trust_of(e))
                    .filter(|trust| !trust.now.server.is_empty());
                if let (Some(trust), Some((allows, conversation))) = (trust, &self.here) {
                    // Kept only if the call still waited for it (not stopped meanwhile).
                    if !waiting.answer(Approval::Allow) {
                        return Ok(false);
                    }
                    allows.allow(conversation, &trust);
                    // The same tool's other calls waiting now are covered too: the answer
                    // was for every call of it here.
                    self.allow_waiting_calls_of(&trust);
                    return Ok(true);
                }
                Approval::Allow
            }
            Decision::AlwaysAllow => {
                if let Some(trust) = exposed.as_deref().and_then(|e| self.trust_of(e)) {
                    let saved = Settings::update(&self.settings_file, |settings| {
                        settings.allow_tool(&trust.origin.server, &trust.origin.tool, trust.now);
                        Ok::<_, SettingsError>(())
                    });
                    if let Err(error) = saved {
                        // The call still runs (the user allowed it); the failure is reported.
                        waiting.answer(Approval::Allow);
                        return Err(error);
                    }
                }
                Approval::Allow
            }
            Decision::Deny => Approval::Deny {
                reason: "the user chose Deny".into(),
            },
        };
        Ok(waiting.answer(approval))
    }
}

impl WindowApproval {
    /// Allows every call still waiting whose tool is `trust`'s, as it is now.
    fn allow_waiting_calls_of(&self, trust: &ToolTrust) {
        for call_id in self.ask.waiting() {
            let exposed = self.asked.lock().get(&call_id).cloned();
            let same = exposed
                .and_then(|exposed| self.trust_of(&exposed))
                .is_some_and(|other| other.origin == trust.origin && other.now == trust.now);
            if !same {
                continue;
            }
            if let Some(waiting) = self.ask.take(&call_id) {
                self.asked.lock().remove(&call_id);
                // Let through by the allow, not answered one by one: a revoke before it is
                // sent stops it, and its card says which allow let it.
                self.by_conversation.lock().insert(call_id.clone());
                waiting.answer(Approval::Standing(StandingAllow::Conversation));
            }
        }
    }
}

#[async_trait]
impl Approver for WindowApproval {
    async fn decide(&self, call: &ToolCall, spec: &ToolSpec) -> Approval {
        let trust = self.trust_of(&spec.name);
        let mut changes = Vec::new();
        if let Some(trust) = &trust {
            let (server, tool) = (&trust.origin.server, &trust.origin.tool);
            let loaded = Settings::load(&self.settings_file);
            let verdict = verdict_of(&loaded, server, tool, &trust.now);
            match verdict {
                Verdict::Allow => return Approval::Standing(StandingAllow::Settings),
                Verdict::Deny => {
                    return Approval::Deny {
                        reason: format!(
                            "{tool} of {server} is set to Never run or switched off in Settings"
                        ),
                    };
                }
                Verdict::Ask { changes: why } => changes = why,
            }
            // Allowed in this conversation, as it is now, and Settings read (unread, a
            // Never run could not be told apart): runs unasked, checked again before sent.
            if let Some((allows, conversation)) = &self.here
                && loaded.is_ok()
                && allows.allows(conversation, trust)
            {
                self.by_conversation.lock().insert(call.id.clone());
                return Approval::Standing(StandingAllow::Conversation);
            }
        }
        self.asked.lock().insert(call.id.clone(), spec.name.clone());
        let origin = trust.map(|t| t.origin);
        let approval = self.ask.ask(call, spec, origin, changes).await;
        self.asked.lock().remove(&call.id);
        if approval == Approval::Allow && !self.by_conversation.lock().contains(&call.id) {
            self.answered.lock().insert(call.id.clone());
        }
        approval
    }

    fn still_allowed(&self, call_id: &str, exposed_name: &str) -> Result<(), String> {
        // A tool the turn's trust map lacks has no server or policy to check again.
        let Some(trust) = self.trust_of(exposed_name) else {
            return Ok(());
        };
        let (server, tool) = (&trust.origin.server, &trust.origin.tool);
        if self.by_conversation.lock().contains(call_id) {
            let still_here = self
                .here
                .as_ref()
                .is_some_and(|(allows, conversation)| allows.allows(conversation, &trust));
            if !still_here {
                return Err(format!(
                    "{tool} of {server} is no longer allowed in this conversation (taken back while the call waited)"
                ));
            }
            return still_allowed_now(
                &self.settings_file,
                server,
                tool,
                &trust.now,
                AllowedBy::Conversation,
            );
        }
        let allowed = if self.answered.lock().contains(call_id) {
            AllowedBy::Answer
        } else {
            AllowedBy::Settings
        };
        still_allowed_now(&self.settings_file, server, tool, &trust.now, allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conduit_core::agent::{Agent, AgentEvent, AgentOptions, Outcome};
    use conduit_core::content::{Message, ToolResult};
    use conduit_core::provider::{ProviderEvent, StopReason};
    use conduit_core::testing::{Echo, ScriptedProvider, tool_spec as spec};
    use conduit_core::tool::ToolRegistry;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use crate::settings::ToolPolicy;

    #[test]
    fn what_settings_showed_changes_with_the_tool_its_server_and_the_set() {
        let tool = |server: &str, description: &str| {
            approved_tool(
                server.into(),
                description,
                &json!({"type": "object"}),
                false,
                "{}",
            )
        };
        let dir = tempfile::tempdir().unwrap();
        let host = crate::Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        let (read, write) = ("read".to_owned(), "write".to_owned());
        let shown = shown_token(&host, [(&read, &tool("s1", "Reads a file."))]);
        assert_eq!(
            shown,
            shown_token(&host, [(&read, &tool("s1", "Reads a file."))])
        );
        for changed in [
            shown_token(
                &host,
                [(&read, &tool("s1", "Reads a file. Then mails it."))],
            ),
            shown_token(&host, [(&read, &tool("s2", "Reads a file."))]),
            shown_token(&host, [(&write, &tool("s1", "Reads a file."))]),
            shown_token(
                &host,
                [
                    (&read, &tool("s1", "Reads a file.")),
                    (&write, &tool("s1", "Writes a file.")),
                ],
            ),
            shown_token(&host, []),
        ] {
            assert_ne!(shown, changed);
        }
        // Order does not matter: the window lists tools in the server's order.
        let (a, b) = (tool("s1", "A"), tool("s1", "B"));
        assert_eq!(
            shown_token(&host, [(&read, &a), (&write, &b)]),
            shown_token(&host, [(&write, &b), (&read, &a)])
        );
        // Keyed per process: what one host showed means nothing to another, and a script
        // cannot compute the token for a guess of a server's secret env value.
        let other = crate::Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        assert_ne!(
            shown,
            shown_token(&other, [(&read, &tool("s1", "Reads a file."))])
        );
    }

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            wire_id: None,
            name: name.into(),
            arguments: json!({}),
            signature: None,
            invalid_arguments: None,
            origin: None,
        }
    }

    #[test]
    fn the_server_fingerprint_covers_what_runs_env_and_folder_included() {
        let stdio = |env: &[(&str, &str)], cwd: Option<&str>| {
            server_fingerprint(Some(&Transport::Stdio {
                command: "node".into(),
                args: vec!["server.js".into()],
                env: env
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                cwd: cwd.map(Into::into),
            }))
        };
        let base = stdio(&[], None);
        assert_eq!(base, stdio(&[], None));
        assert_ne!(
            base,
            stdio(&[("NODE_OPTIONS", "--require /tmp/x.js")], None)
        );
        assert_ne!(base, stdio(&[], Some("/tmp/elsewhere")));
        assert_eq!(server_fingerprint(None), "");
    }

    #[test]
    fn an_allow_is_bound_to_the_server_that_runs_not_to_what_the_file_says_since() {
        use conduit_mcp::runtime::RunningFrom;
        let started = |command: &str| {
            RunningFrom::Entry(Transport::Stdio {
                command: command.into(),
                args: Vec::new(),
                env: Default::default(),
                cwd: None,
            })
        };
        // The print of what runs is the print of the entry it was started from; a process
        // of an older entry keeps its own print until the new one is running.
        let old = allow_print_of_running(Some(&started("old-server")), "s");
        let new = allow_print_of_running(Some(&started("trusted-server")), "s");
        assert_ne!(old, new);
        assert_eq!(
            new,
            server_fingerprint(Some(&Transport::Stdio {
                command: "trusted-server".into(),
                args: Vec::new(),
                env: Default::default(),
                cwd: None,
            }))
        );
        // Conduit's own tools keep the print their allows were saved with; nothing else
        // in-process, and nothing unknown, matches any allow.
        assert_eq!(
            allow_print_of_running(
                Some(&RunningFrom::InProcess),
                crate::builtin::BUILTIN_SERVER
            ),
            conduit_files::fingerprint_bytes(b"conduit built-in tools")
        );
        assert_eq!(
            allow_print_of_running(Some(&RunningFrom::InProcess), "s"),
            ""
        );
        assert_eq!(allow_print_of_running(None, "s"), "");
    }

    fn trust(server: &str, tool: &str, command: &str, description: &str) -> ToolTrust {
        ToolTrust {
            origin: ToolOrigin {
                server: server.into(),
                tool: tool.into(),
            },
            now: ApprovedTool {
                server: server_fingerprint(Some(&Transport::Stdio {
                    command: command.into(),
                    args: vec![],
                    env: Default::default(),
                    cwd: None,
                })),
                description: conduit_files::fingerprint_bytes(description.as_bytes()),
                input_schema: "schema".into(),
                views: Some(false),
                details: Some("details".into()),
                other: Default::default(),
            },
            description: description.into(),
        }
    }

    /// A window that records each question (call id, origin, what changed).
    type Asked = Arc<Mutex<Vec<(String, Option<ToolOrigin>, Vec<String>)>>>;

    /// The window's side: where questions go, and what was asked.
    fn asking() -> (EventSink, Asked) {
        let asked: Asked = Arc::new(Mutex::new(Vec::new()));
        let seen = asked.clone();
        let events: EventSink = Arc::new(move |event| {
            if let AgentEvent::ApprovalRequested {
                call,
                origin,
                changes,
                ..
            } = event
            {
                seen.lock().push((call.id, origin, changes));
            }
        });
        (events, asked)
    }

    /// Decides a call of `tool` with id `id` on another task: it waits there for an answer.
    fn decide_in_background(
        approval: &Arc<WindowApproval>,
        id: &str,
        tool: &str,
    ) -> tokio::task::JoinHandle<Approval> {
        let (approval, id, tool) = (approval.clone(), id.to_owned(), tool.to_owned());
        tokio::spawn(async move { approval.decide(&call(&id, &tool), &spec(&tool)).await })
    }

    async fn until_asked(asked: &Asked, count: usize) {
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while asked.lock().len() < count {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
    }

    /// "Allow in this conversation": the tool's later calls there run unasked, in this
    /// turn and the next, while it and its server are as they were; nothing is saved;
    /// another conversation, a changed tool, a taken-back allow and Never run in Settings
    /// each stop it.
    #[tokio::test]
    async fn allow_in_this_conversation_holds_there_only_while_the_tool_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        let (events, asked) = asking();
        let allows = Arc::new(ConversationAllows::default());
        let turn = |conversation: &str, command: &str| {
            WindowApproval::in_conversation(
                events.clone(),
                file.clone(),
                HashMap::from([(
                    "srv__echo".to_owned(),
                    trust("srv", "echo", command, "echoes"),
                )]),
                allows.clone(),
                conversation.to_owned(),
            )
        };
        let decide_later = |approval: &Arc<WindowApproval>, id: &str| {
            decide_in_background(approval, id, "srv__echo")
        };

        let first = turn("conv-a", "node");
        let waiting = decide_later(&first, "c1");
        until_asked(&asked, 1).await;
        assert!(first.answer("c1", Decision::AllowInConversation).unwrap());
        assert_eq!(waiting.await.unwrap(), Approval::Allow);
        assert!(!file.exists(), "nothing is saved in Settings");
        assert_eq!(
            allows.listed("conv-a"),
            [ConversationAllow {
                server: "srv".into(),
                tool: "echo".into()
            }]
        );
        // The same turn and the next one in that conversation: unasked, and the call
        // counts as answered (Settings that would ask do not stop it once it waited).
        let again = first
            .decide(&call("c2", "srv__echo"), &spec("srv__echo"))
            .await;
        assert_eq!(again, Approval::Standing(StandingAllow::Conversation));
        assert_eq!(first.still_allowed("c2", "srv__echo"), Ok(()));
        let next = turn("conv-a", "node");
        assert_eq!(
            next.decide(&call("c3", "srv__echo"), &spec("srv__echo"))
                .await,
            Approval::Standing(StandingAllow::Conversation)
        );
        assert_eq!(asked.lock().len(), 1);

        // Another conversation asks.
        let other = turn("conv-b", "node");
        let waiting = decide_later(&other, "c4");
        until_asked(&asked, 2).await;
        assert!(other.answer("c4", Decision::Deny).unwrap());
        assert!(matches!(waiting.await.unwrap(), Approval::Deny { .. }));

        // The server's command changed: asked again in the same conversation.
        let changed = turn("conv-a", "/tmp/evil");
        let waiting = decide_later(&changed, "c5");
        until_asked(&asked, 3).await;
        assert_eq!(asked.lock()[2].0, "c5");
        assert!(changed.answer("c5", Decision::Deny).unwrap());
        assert!(matches!(waiting.await.unwrap(), Approval::Deny { .. }));

        // Never run in Settings wins over it.
        Settings::update(&file, |settings| {
            settings.set_tool_policy("srv", "echo", ToolPolicy::Deny);
            Ok::<_, SettingsError>(())
        })
        .unwrap();
        let denied = turn("conv-a", "node");
        assert!(matches!(
            denied
                .decide(&call("c6", "srv__echo"), &spec("srv__echo"))
                .await,
            Approval::Deny { .. }
        ));
        Settings::update(&file, |settings| {
            settings.set_tool_policy("srv", "echo", ToolPolicy::Ask);
            Ok::<_, SettingsError>(())
        })
        .unwrap();

        // Taken back: asked again.
        assert!(allows.revoke("conv-a", "srv", "echo"));
        assert!(!allows.revoke("conv-a", "srv", "echo"));
        assert!(allows.listed("conv-a").is_empty());
        let revoked = turn("conv-a", "node");
        let waiting = decide_later(&revoked, "c7");
        until_asked(&asked, 4).await;
        assert!(revoked.answer("c7", Decision::AllowOnce).unwrap());
        assert_eq!(waiting.await.unwrap(), Approval::Allow);
        assert!(allows.listed("conv-a").is_empty(), "once is not kept");

        // A turn without a conversation's scope allows the call once.
        let unscoped = WindowApproval::new(
            events.clone(),
            file.clone(),
            HashMap::from([(
                "srv__echo".to_owned(),
                trust("srv", "echo", "node", "echoes"),
            )]),
        );
        let waiting = decide_later(&unscoped, "c8");
        until_asked(&asked, 5).await;
        assert!(
            unscoped
                .answer("c8", Decision::AllowInConversation)
                .unwrap()
        );
        assert_eq!(waiting.await.unwrap(), Approval::Allow);
        assert!(allows.listed("conv-a").is_empty());

        // Two calls of the tool waiting at once (one response's): the answer to one
        // covers the other, which counts as answered.
        let both = turn("conv-c", "node");
        let (one, two) = (decide_later(&both, "c9"), decide_later(&both, "c10"));
        until_asked(&asked, 7).await;
        assert!(both.answer("c9", Decision::AllowInConversation).unwrap());
        assert_eq!(one.await.unwrap(), Approval::Allow);
        assert_eq!(
            two.await.unwrap(),
            Approval::Standing(StandingAllow::Conversation),
            "its card says which allow let it"
        );
        assert!(both.waiting().is_empty());
        assert_eq!(both.still_allowed("c10", "srv__echo"), Ok(()));
        // The call the user answered stands; the one the allow let through is checked
        // again, so a revoke before it is sent stops it.
        assert!(allows.revoke("conv-c", "srv", "echo"));
        assert!(both.still_allowed("c10", "srv__echo").is_err());
        assert_eq!(both.still_allowed("c9", "srv__echo"), Ok(()));
        assert!(
            !both.answer("c10", Decision::Deny).unwrap(),
            "answered already"
        );
    }

    /// What stops a call an "Allow in this conversation" let through: settings that
    /// cannot be read (asked instead: a Never run could not be told apart), the allow
    /// taken back while the call waited to be sent, the server removed; and a server
    /// nothing known runs as is never allowed this way.
    #[tokio::test]
    async fn an_allow_in_this_conversation_yields_to_unread_settings_a_revoke_and_a_removal() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        let (events, asked) = asking();
        let allows = Arc::new(ConversationAllows::default());
        let echo = trust("srv", "echo", "node", "echoes");
        let turn = |trust: ToolTrust| {
            WindowApproval::in_conversation(
                events.clone(),
                file.clone(),
                HashMap::from([("srv__echo".to_owned(), trust)]),
                allows.clone(),
                "conv".to_owned(),
            )
        };
        allows.allow("conv", &echo);

        // Unreadable settings: asked, not run.
        std::fs::write(&file, "{ not json").unwrap();
        let unread = turn(echo.clone());
        let waiting = decide_in_background(&unread, "c1", "srv__echo");
        until_asked(&asked, 1).await;
        assert!(unread.answer("c1", Decision::Deny).unwrap());
        assert!(matches!(waiting.await.unwrap(), Approval::Deny { .. }));
        std::fs::remove_file(&file).unwrap();

        // Let through, then taken back before it was sent: stopped.
        let revoked = turn(echo.clone());
        assert_eq!(
            revoked
                .decide(&call("c2", "srv__echo"), &spec("srv__echo"))
                .await,
            Approval::Standing(StandingAllow::Conversation)
        );
        assert!(allows.revoke("conv", "srv", "echo"));
        let stopped = revoked.still_allowed("c2", "srv__echo").unwrap_err();
        assert!(stopped.contains("no longer allowed"), "{stopped}");

        // Let through, then the settings became unreadable before it was sent: stopped.
        allows.allow("conv", &echo);
        let later = turn(echo.clone());
        assert_eq!(
            later
                .decide(&call("c3", "srv__echo"), &spec("srv__echo"))
                .await,
            Approval::Standing(StandingAllow::Conversation)
        );
        std::fs::write(&file, "{ not json").unwrap();
        assert!(later.still_allowed("c3", "srv__echo").is_err());
        std::fs::remove_file(&file).unwrap();

        // A removed server's allows go in every conversation.
        allows.allow("other", &echo);
        let host = crate::Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        host.conversation_allows().allow("conv", &echo);
        host.forget_server_policies("srv");
        assert!(host.conversation_allows().listed("conv").is_empty());
        allows.forget_server("srv");
        assert!(allows.listed("conv").is_empty() && allows.listed("other").is_empty());

        // Nothing known runs as the server: no allow is kept for it.
        let mut unknown = echo.clone();
        unknown.now.server = String::new();
        allows.allow("conv", &unknown);
        assert!(allows.listed("conv").is_empty());
        assert!(!allows.allows("conv", &unknown));
        // So the answer allows that call once, and covers no other waiting call.
        let once = turn(unknown);
        let (first, second) = (
            decide_in_background(&once, "c4", "srv__echo"),
            decide_in_background(&once, "c5", "srv__echo"),
        );
        until_asked(&asked, 3).await;
        assert!(once.answer("c4", Decision::AllowInConversation).unwrap());
        assert_eq!(first.await.unwrap(), Approval::Allow);
        assert_eq!(once.waiting(), ["c5"]);
        assert!(once.answer("c5", Decision::Deny).unwrap());
        assert!(matches!(second.await.unwrap(), Approval::Deny { .. }));
        assert!(allows.listed("conv").is_empty());
    }

    #[tokio::test]
    async fn always_allow_is_saved_for_what_was_approved_and_asked_again_after_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        let (events, asked) = asking();
        let approval = WindowApproval::new(
            events.clone(),
            file.clone(),
            HashMap::from([(
                "srv__echo".to_owned(),
                trust("srv", "echo", "node", "echoes"),
            )]),
        );

        let waiting = {
            let approval = approval.clone();
            tokio::spawn(async move {
                approval
                    .decide(&call("c1", "srv__echo"), &spec("srv__echo"))
                    .await
            })
        };
        until_asked(&asked, 1).await;
        let (_, origin, changes) = asked.lock()[0].clone();
        assert_eq!(
            origin,
            Some(ToolOrigin {
                server: "srv".into(),
                tool: "echo".into()
            }),
            "the question names the real server and tool"
        );
        assert!(changes.is_empty());
        assert!(approval.answer("c1", Decision::AlwaysAllow).unwrap());
        assert_eq!(waiting.await.unwrap(), Approval::Allow);
        let saved = Settings::load(&file).unwrap();
        assert_eq!(saved.tool_policy("srv", "echo"), ToolPolicy::Allow);
        assert_eq!(
            saved.mcp_servers["srv"].approved["echo"],
            trust("srv", "echo", "node", "echoes").now
        );

        let second = approval
            .decide(&call("c2", "srv__echo"), &spec("srv__echo"))
            .await;
        assert_eq!(second, Approval::Standing(StandingAllow::Settings));
        assert_eq!(asked.lock().len(), 1, "asked only the first time");
        assert!(!approval.answer("nobody", Decision::Deny).unwrap());

        // The server's command changed ("rug pull"): the next turn asks again, saying
        // what changed.
        let approval = WindowApproval::new(
            events,
            file.clone(),
            HashMap::from([(
                "srv__echo".to_owned(),
                trust("srv", "echo", "/tmp/evil", "echoes"),
            )]),
        );
        let third = {
            let approval = approval.clone();
            tokio::spawn(async move {
                approval
                    .decide(&call("c3", "srv__echo"), &spec("srv__echo"))
                    .await
            })
        };
        until_asked(&asked, 2).await;
        let (id, _, changes) = asked.lock()[1].clone();
        assert_eq!(id, "c3");
        assert!(changes[0].contains("command and arguments"), "{changes:?}");
        assert!(approval.answer("c3", Decision::Deny).unwrap());
        assert!(matches!(third.await.unwrap(), Approval::Deny { .. }));
    }

    #[tokio::test]
    async fn an_answer_reaches_only_the_pending_call_and_a_stale_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        let (events, asked) = asking();
        let approval = WindowApproval::new(
            events,
            file.clone(),
            HashMap::from([
                (
                    "fs__read_file".to_owned(),
                    trust("fs", "read_file", "fs-server", "reads"),
                ),
                (
                    "sh__run".to_owned(),
                    trust("sh", "run", "sh-server", "runs"),
                ),
            ]),
        );
        // The first call is answered once; the second one then waits.
        let first = {
            let approval = approval.clone();
            tokio::spawn(async move {
                approval
                    .decide(&call("call_a", "fs__read_file"), &spec("fs__read_file"))
                    .await
            })
        };
        until_asked(&asked, 1).await;
        assert!(approval.answer("call_a", Decision::AllowOnce).unwrap());
        assert_eq!(first.await.unwrap(), Approval::Allow);
        let second = {
            let approval = approval.clone();
            tokio::spawn(async move {
                approval
                    .decide(&call("call_b", "sh__run"), &spec("sh__run"))
                    .await
            })
        };
        until_asked(&asked, 2).await;
        // A stale answer for the answered call changes nothing: no policy, no answer.
        assert!(!approval.answer("call_a", Decision::AlwaysAllow).unwrap());
        assert!(!file.exists(), "nothing saved for a stale answer");
        assert_eq!(approval.waiting(), ["call_b"]);
        // "Always allow" on the pending call saves that call's tool, and only it.
        assert!(approval.answer("call_b", Decision::AlwaysAllow).unwrap());
        assert_eq!(second.await.unwrap(), Approval::Allow);
        let saved = Settings::load(&file).unwrap();
        assert_eq!(saved.tool_policy("sh", "run"), ToolPolicy::Allow);
        assert_eq!(saved.tool_policy("fs", "read_file"), ToolPolicy::Ask);
    }

    /// A call allowed before its server's session expired is checked again before it is
    /// sent on the new session: allowed by Settings, it stops when Settings now deny it or
    /// would ask; allowed by the user's answer, only Deny stops it. `--approve auto` stops
    /// only at Deny, or at settings it cannot read.
    #[tokio::test]
    async fn a_call_checked_again_after_a_wait_follows_settings_as_they_are_now() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        let set = |policy: ToolPolicy| {
            Settings::update(&file, |settings| {
                settings.set_tool_policy("srv", "echo", policy);
                Ok::<_, SettingsError>(())
            })
            .unwrap();
        };
        let echo = trust("srv", "echo", "node", "echoes");
        let (events, asked) = asking();
        let approval = WindowApproval::new(
            events,
            file.clone(),
            HashMap::from([("srv__echo".to_owned(), echo.clone())]),
        );
        Settings::update(&file, |settings| {
            settings.allow_tool("srv", "echo", echo.now.clone());
            Ok::<_, SettingsError>(())
        })
        .unwrap();
        let by_settings = approval
            .decide(&call("c1", "srv__echo"), &spec("srv__echo"))
            .await;
        assert_eq!(by_settings, Approval::Standing(StandingAllow::Settings));
        assert_eq!(approval.still_allowed("c1", "srv__echo"), Ok(()));
        set(ToolPolicy::Ask);
        let taken_back = approval.still_allowed("c1", "srv__echo").unwrap_err();
        assert!(
            taken_back.contains("Always allow was taken back"),
            "{taken_back}"
        );

        // Answered by the user: the answer stands where Settings ask, not against Deny.
        let answered = {
            let approval = approval.clone();
            tokio::spawn(async move {
                approval
                    .decide(&call("c2", "srv__echo"), &spec("srv__echo"))
                    .await
            })
        };
        until_asked(&asked, 1).await;
        assert!(approval.answer("c2", Decision::AllowOnce).unwrap());
        assert_eq!(answered.await.unwrap(), Approval::Allow);
        assert_eq!(approval.still_allowed("c2", "srv__echo"), Ok(()));
        assert!(
            approval.still_allowed("c1", "srv__echo").is_err(),
            "one call's answer is not another's"
        );
        set(ToolPolicy::Deny);
        let denied = approval.still_allowed("c2", "srv__echo").unwrap_err();
        assert!(denied.contains("set to Never run"), "{denied}");
        set(ToolPolicy::Ask);
        Settings::update(&file, |settings| {
            settings.set_tool_enabled("srv", "echo", false);
            Ok::<_, SettingsError>(())
        })
        .unwrap();
        let off = approval.still_allowed("c2", "srv__echo").unwrap_err();
        assert!(off.contains("switched off in Settings"), "{off}");
        Settings::update(&file, |settings| {
            settings.set_tool_enabled("srv", "echo", true);
            Ok::<_, SettingsError>(())
        })
        .unwrap();
        assert_eq!(approval.still_allowed("c2", "srv__echo"), Ok(()));
        // Settings that cannot be read say nothing against the user's answer, and cannot
        // say a call Settings allowed is still allowed.
        let kept = std::fs::read(&file).unwrap();
        std::fs::write(&file, "{ not json").unwrap();
        assert_eq!(approval.still_allowed("c2", "srv__echo"), Ok(()));
        let unread = approval.still_allowed("c1", "srv__echo").unwrap_err();
        assert!(unread.contains("could not be read"), "{unread}");
        std::fs::write(&file, kept).unwrap();
        // A name the turn's trust map lacks has no server or policy to check.
        assert_eq!(approval.still_allowed("c3", "read_text"), Ok(()));

        let auto = AutoApproval::new(
            file.clone(),
            HashMap::from([("srv__echo".to_owned(), echo)]),
        );
        set(ToolPolicy::Deny);
        assert!(
            auto.still_allowed("c4", "srv__echo")
                .unwrap_err()
                .contains("Never run")
        );
        set(ToolPolicy::Ask);
        assert_eq!(auto.still_allowed("c4", "srv__echo"), Ok(()));
        Settings::update(&file, |settings| {
            settings.set_tool_enabled("srv", "echo", false);
            Ok::<_, SettingsError>(())
        })
        .unwrap();
        assert!(
            auto.still_allowed("c4", "srv__echo")
                .unwrap_err()
                .contains("switched off")
        );
        let decided = auto
            .decide(&call("c5", "srv__echo"), &spec("srv__echo"))
            .await;
        assert!(
            matches!(&decided, Approval::Deny { reason } if reason.contains("switched off")),
            "{decided:?}"
        );
        std::fs::write(&file, "{ not json").unwrap();
        assert!(
            auto.still_allowed("c4", "srv__echo")
                .unwrap_err()
                .contains("could not be read")
        );
    }

    /// A settings file in a fresh folder where `rm` of `srv` is set to Never run.
    fn settings_denying_rm() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        Settings::update(&file, |settings| {
            settings.set_tool_policy("srv", "rm", ToolPolicy::Deny);
            Ok::<_, SettingsError>(())
        })
        .unwrap();
        (dir, file)
    }

    #[tokio::test]
    async fn a_denied_tool_in_settings_is_denied_without_asking() {
        let (_dir, file) = settings_denying_rm();
        let approval = WindowApproval::new(
            Arc::new(|_| {}),
            file,
            HashMap::from([("srv__rm".to_owned(), trust("srv", "rm", "node", "removes"))]),
        );
        let decided = approval
            .decide(&call("c", "srv__rm"), &spec("srv__rm"))
            .await;
        assert!(matches!(decided, Approval::Deny { .. }), "{decided:?}");
    }

    /// `--approve auto` runs what Settings do not deny; a tool set to Never run is denied,
    /// and so is every MCP call when the settings cannot be read.
    #[tokio::test]
    async fn auto_approval_still_denies_what_settings_set_to_never_run() {
        let (_dir, file) = settings_denying_rm();
        let ls_now = trust("srv", "ls", "node", "lists").now;
        let trust = HashMap::from([
            ("srv__rm".to_owned(), trust("srv", "rm", "node", "removes")),
            ("srv__ls".to_owned(), trust("srv", "ls", "node", "lists")),
        ]);
        let auto = AutoApproval::new(file.clone(), trust);
        let decided = auto.decide(&call("c1", "srv__rm"), &spec("srv__rm")).await;
        let Approval::Deny { reason } = decided else {
            panic!("a tool set to Never run ran under --approve auto: {decided:?}");
        };
        assert!(reason.contains("Never run"), "{reason}");
        let decided = auto.decide(&call("c2", "srv__ls"), &spec("srv__ls")).await;
        assert_eq!(decided, Approval::Standing(StandingAllow::Auto));
        // Conduit's own tools (no MCP origin) run as before.
        let decided = auto
            .decide(&call("c3", "read_text"), &spec("read_text"))
            .await;
        assert_eq!(decided, Approval::Standing(StandingAllow::Auto));
        // A tool Settings allow always runs by that allow, and says so.
        Settings::update(&file, |settings| {
            settings.allow_tool("srv", "ls", ls_now);
            Ok::<_, SettingsError>(())
        })
        .unwrap();
        let decided = auto.decide(&call("c5", "srv__ls"), &spec("srv__ls")).await;
        assert_eq!(decided, Approval::Standing(StandingAllow::Settings));

        std::fs::write(&file, "{ not json").unwrap();
        let decided = auto.decide(&call("c4", "srv__ls"), &spec("srv__ls")).await;
        let Approval::Deny { reason } = decided else {
            panic!("unreadable settings must not run an MCP call: {decided:?}");
        };
        assert!(reason.contains("could not be read"), "{reason}");
    }

    #[test]
    fn removing_a_server_in_the_window_drops_its_policies() {
        let dir = tempfile::tempdir().unwrap();
        let host = crate::Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        let file = &host.paths().mcp_config_file;
        std::fs::write(
            file,
            json!({"mcpServers": {"gone": {"command": "a"}, "kept": {"command": "b"}}}).to_string(),
        )
        .unwrap();
        host.update_settings(|settings| {
            settings.allow_tool("gone", "run", trust("gone", "run", "a", "d").now);
            settings.allow_tool("kept", "run", trust("kept", "run", "b", "d").now);
            Ok::<_, SettingsError>(())
        })
        .unwrap();
        let version = host.mcp_file().unwrap().version;
        host.edit_mcp_file(
            version,
            conduit_mcp::config::Edit::Remove {
                name: "gone".into(),
            },
            &|_| true,
        )
        .unwrap();
        let saved = host.settings().unwrap();
        assert!(!saved.mcp_servers.contains_key("gone"), "{saved:?}");
        assert_eq!(saved.tool_policy("kept", "run"), ToolPolicy::Allow);
    }

    /// One response with two calls under the same provider id, then the end.
    fn repeats_an_id() -> Arc<ScriptedProvider> {
        let done = |text: &str| {
            Ok(ProviderEvent::ToolCallDone {
                id: "dup".into(),
                name: "srv__echo".into(),
                arguments: Ok(json!({"text": text})),
                signature: None,
            })
        };
        ScriptedProvider::new(vec![
            vec![
                done("first"),
                done("second"),
                Ok(ProviderEvent::Stop(StopReason::ToolUse)),
            ],
            vec![Ok(ProviderEvent::Stop(StopReason::EndTurn))],
        ])
    }

    #[tokio::test]
    async fn a_model_repeating_a_call_id_gets_two_calls_answered_apart() {
        let dir = tempfile::tempdir().unwrap();
        let (events, asked) = asking();
        let approval =
            WindowApproval::new(events, dir.path().join("settings.json"), HashMap::new());
        let mut tools = ToolRegistry::new();
        tools.register(Echo::named("srv__echo"));
        let agent = Agent::new(
            repeats_an_id(),
            tools,
            approval.clone(),
            AgentOptions::new("m"),
        );
        let answerer = {
            let approval = approval.clone();
            let asked = asked.clone();
            tokio::spawn(async move {
                until_asked(&asked, 2).await;
                let ids: Vec<String> = asked.lock().iter().map(|a| a.0.clone()).collect();
                assert_ne!(ids[0], ids[1], "each call has its own id");
                // Deny one, allow the other: neither answer reaches the other call.
                assert!(approval.answer(&ids[0], Decision::Deny).unwrap());
                assert!(approval.answer(&ids[1], Decision::AllowOnce).unwrap());
                ids
            })
        };
        let mut history = vec![Message::user_text("twice")];
        // Bounded: with ids that collide, a question would go unanswered for ever.
        let outcome = tokio::time::timeout(
            std::time::Duration::from_secs(15),
            agent.run(&mut history, Arc::new(|_| {}), CancellationToken::new()),
        )
        .await
        .expect("both calls were answered");
        assert_eq!(outcome, Ok(Outcome::Finished(StopReason::EndTurn)));
        let ids = answerer.await.unwrap();
        let calls: Vec<ToolCall> = history[1].tool_calls().cloned().collect();
        let results: Vec<ToolResult> = history[2].tool_results().cloned().collect();
        let by_id = |id: &str| results.iter().find(|r| r.call_id == id).unwrap().clone();
        let denied = by_id(&ids[0]);
        let allowed = by_id(&ids[1]);
        assert!(
            denied.is_error && denied.text().contains("denied"),
            "{denied:?}"
        );
        assert!(!allowed.is_error, "{allowed:?}");
        let allowed_call = calls.iter().find(|c| c.id == ids[1]).unwrap();
        assert_eq!(
            allowed.text(),
            allowed_call.arguments["text"].as_str().unwrap()
        );
        // The provider's id goes back with the first, one of its own with the second (a
        // strict API refuses two calls under one id), each result with its call.
        let wire: Vec<&str> = calls.iter().map(ToolCall::wire_id).collect();
        assert_eq!(wire, ["dup", "dup_2"]);
        for call in &calls {
            assert_eq!(by_id(&call.id).wire_id(), call.wire_id());
        }
    }
}
