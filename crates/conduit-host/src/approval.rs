//! Tool approval for the window: each tool's policy from settings (allow, deny, ask;
//! ask by default), the window's question for the rest, and "Always allow" kept in
//! settings so it holds across restarts and can be revoked in Settings.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use conduit_core::agent::{Approval, Approver, EventSink};
use conduit_core::approval::AskApproval;
use conduit_core::content::ToolCall;
use conduit_core::tool::ToolSpec;
use serde::Deserialize;

use crate::settings::{Settings, SettingsError, ToolPolicy};

/// The user's answer to an approval question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    AllowOnce,
    AlwaysAllow,
    Deny,
}

/// Decides a turn's tool calls: settings first, then the window.
pub struct WindowApproval {
    ask: Arc<AskApproval>,
    settings_file: PathBuf,
    /// Exposed tool name → (server, the tool's own name), for MCP tools.
    origins: Mutex<HashMap<String, (String, String)>>,
    /// Calls waiting for an answer → their exposed tool name.
    asked: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for WindowApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowApproval").finish_non_exhaustive()
    }
}

impl WindowApproval {
    /// Questions go to `events` as `ApprovalRequested`.
    pub fn new(events: EventSink, settings_file: PathBuf) -> Arc<Self> {
        Arc::new(Self {
            ask: AskApproval::new(events),
            settings_file,
            origins: Mutex::new(HashMap::new()),
            asked: Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn set_origins(&self, origins: HashMap<String, (String, String)>) {
        if let Ok(mut known) = self.origins.lock() {
            *known = origins;
        }
    }

    fn origin(&self, exposed: &str) -> Option<(String, String)> {
        self.origins.lock().ok()?.get(exposed).cloned()
    }

    /// Answers the question about `call_id`; false when no call waits under that id.
    /// "Always allow" is saved for the tool before the call runs.
    pub fn answer(&self, call_id: &str, decision: Decision) -> Result<bool, SettingsError> {
        if !self.ask.waiting().iter().any(|id| id == call_id) {
            return Ok(false);
        }
        let exposed = self.asked.lock().ok().and_then(|mut a| a.remove(call_id));
        let approval = match decision {
            Decision::AllowOnce => Approval::Allow,
            Decision::AlwaysAllow => {
                if let Some((server, tool)) = exposed.as_deref().and_then(|e| self.origin(e)) {
                    let saved = Settings::load(&self.settings_file).and_then(|mut settings| {
                        settings.set_tool_policy(&server, &tool, ToolPolicy::Allow);
                        settings.save(&self.settings_file)
                    });
                    if let Err(error) = saved {
                        // The call still runs (the user allowed it); the failure is reported.
                        self.ask.answer(call_id, Approval::Allow);
                        return Err(error);
                    }
                }
                Approval::Allow
            }
            Decision::Deny => Approval::Deny {
                reason: "the user chose Deny".into(),
            },
        };
        Ok(self.ask.answer(call_id, approval))
    }
}

#[async_trait]
impl Approver for WindowApproval {
    async fn decide(&self, call: &ToolCall, spec: &ToolSpec) -> Approval {
        if let Some((server, tool)) = self.origin(&spec.name) {
            // Read now, not at the turn's start: a change in Settings applies at once.
            let policy = Settings::load(&self.settings_file)
                .map(|s| s.tool_policy(&server, &tool))
                .unwrap_or_default();
            match policy {
                ToolPolicy::Allow => return Approval::Allow,
                ToolPolicy::Deny => {
                    return Approval::Deny {
                        reason: format!("{tool} of {server} is set to Deny in Settings"),
                    };
                }
                ToolPolicy::Ask => {}
            }
        }
        if let Ok(mut asked) = self.asked.lock() {
            asked.insert(call.id.clone(), spec.name.clone());
        }
        self.ask.decide(call, spec).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conduit_core::agent::AgentEvent;
    use serde_json::json;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            title: None,
            description: String::new(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: Default::default(),
        }
    }

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: json!({}),
            signature: None,
            invalid_arguments: None,
        }
    }

    #[tokio::test]
    async fn always_allow_is_saved_and_later_calls_run_without_asking() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        let asked = Arc::new(Mutex::new(Vec::new()));
        let seen = asked.clone();
        let events: EventSink = Arc::new(move |event| {
            if let AgentEvent::ApprovalRequested { call, .. } = event {
                seen.lock().unwrap().push(call.id);
            }
        });
        let approval = WindowApproval::new(events, file.clone());
        approval.set_origins(HashMap::from([(
            "srv__echo".to_owned(),
            ("srv".to_owned(), "echo".to_owned()),
        )]));

        let waiting = {
            let approval = approval.clone();
            tokio::spawn(async move {
                approval
                    .decide(&call("c1", "srv__echo"), &spec("srv__echo"))
                    .await
            })
        };
        while asked.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        assert!(approval.answer("c1", Decision::AlwaysAllow).unwrap());
        assert_eq!(waiting.await.unwrap(), Approval::Allow);
        let saved = Settings::load(&file).unwrap();
        assert_eq!(saved.tool_policy("srv", "echo"), ToolPolicy::Allow);

        let second = approval
            .decide(&call("c2", "srv__echo"), &spec("srv__echo"))
            .await;
        assert_eq!(second, Approval::Allow);
        assert_eq!(asked.lock().unwrap().len(), 1, "asked only the first time");
        assert!(!approval.answer("nobody", Decision::Deny).unwrap());
    }

    #[tokio::test]
    async fn a_denied_tool_in_settings_is_denied_without_asking() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        let mut settings = Settings::default();
        settings.set_tool_policy("srv", "rm", ToolPolicy::Deny);
        settings.save(&file).unwrap();
        let approval = WindowApproval::new(Arc::new(|_| {}), file);
        approval.set_origins(HashMap::from([(
            "srv__rm".to_owned(),
            ("srv".to_owned(), "rm".to_owned()),
        )]));
        let decided = approval
            .decide(&call("c", "srv__rm"), &spec("srv__rm"))
            .await;
        assert!(matches!(decided, Approval::Deny { .. }), "{decided:?}");
    }
}
