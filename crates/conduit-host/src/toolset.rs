//! Each conversation its own toolset: which servers and tools it may offer a model (what
//! is switched off is kept, so a server or tool added later is on), kept with the
//! conversation, and what the offered definitions cost in tokens.

use conduit_mcp::runtime::McpRuntime;
use conduit_mcp::servers::{ServerState, ToolInfo};
use serde::{Deserialize, Serialize};

use crate::Host;

/// Past this many tools offered, the window warns: models choose worse and answer slower
/// among many tools (providers advise keeping to a few dozen).
pub const MANY_TOOLS: usize = 40;
/// Past this many tokens of tool definitions, the window warns: they are sent with every
/// request and crowd the context.
pub const MANY_TOOL_TOKENS: u32 = 12_000;

/// What a conversation switched off; empty: every enabled tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct Toolset {
    /// Servers none of whose tools are offered.
    #[serde(default)]
    pub off_servers: Vec<String>,
    /// Single tools not offered.
    #[serde(default)]
    pub off_tools: Vec<ToolKey>,
}

/// One tool of one server.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ts_rs::TS)]
pub struct ToolKey {
    pub server: String,
    pub tool: String,
}

impl Toolset {
    /// Whether `server`'s `tool` may be offered.
    pub fn allows(&self, server: &str, tool: &str) -> bool {
        !self.off_servers.iter().any(|s| s == server)
            && !self
                .off_tools
                .iter()
                .any(|key| key.server == server && key.tool == tool)
    }

    fn is_everything(&self) -> bool {
        self.off_servers.is_empty() && self.off_tools.is_empty()
    }
}

/// A server's tools as the composer's tools panel lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ToolsetServer {
    pub name: String,
    pub on: bool,
    pub tools: Vec<ToolsetTool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ToolsetTool {
    pub name: String,
    pub title: Option<String>,
    pub on: bool,
    /// About how many tokens its definition costs in each request.
    pub tokens: u32,
}

/// What a toolset offers: the ready servers' enabled tools, which are on, their count and
/// cost, and whether that is too much.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ToolChoices {
    pub toolset: Toolset,
    pub servers: Vec<ToolsetServer>,
    pub offered: u32,
    pub tokens: u32,
    /// Why so many tools may hurt, when they may; or why the conversation's kept choice
    /// could not be read (it then offers nothing until the user chooses again).
    pub warning: Option<String>,
}

/// About how many tokens a tool's definition costs: its name, description and schema as
/// sent, at four characters a token (the usual rule of thumb for English and JSON).
pub fn definition_tokens(tool: &ToolInfo) -> u32 {
    let schema = serde_json::to_string(&tool.input_schema).unwrap_or_default();
    let chars = tool.name.len() + tool.description.as_deref().map_or(0, str::len) + schema.len();
    u32::try_from(chars.div_ceil(4)).unwrap_or(u32::MAX)
}

#[derive(Debug, thiserror::Error)]
pub enum ToolsetError {
    #[error(transparent)]
    Store(#[from] conduit_store::StoreError),
    #[error("the conversation's toolset cannot be written: {0}")]
    Unwritable(#[source] serde_json::Error),
}

/// A conversation's toolset as read from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptToolset {
    pub toolset: Toolset,
    /// Why the stored choice could not be read; the toolset then switches every server off.
    pub unreadable: Option<String>,
}

impl Host {
    /// The toolset a conversation keeps: every enabled tool when it never chose. A stored
    /// choice that cannot be read offers no tool at all (every server of `servers` off)
    /// until the user chooses again: offering every tool instead would run tools the
    /// user may have switched off for this conversation.
    pub fn conversation_toolset(
        &self,
        conversation: &str,
        servers: &McpRuntime,
    ) -> Result<KeptToolset, ToolsetError> {
        let Some(text) = self.store()?.toolset(conversation)? else {
            return Ok(KeptToolset {
                toolset: Toolset::default(),
                unreadable: None,
            });
        };
        match serde_json::from_str(&text) {
            Ok(toolset) => Ok(KeptToolset {
                toolset,
                unreadable: None,
            }),
            Err(error) => {
                tracing::warn!(%error, conversation, "a conversation's toolset is unreadable: no tool is offered until it is chosen again");
                Ok(KeptToolset {
                    toolset: Toolset {
                        off_servers: servers.statuses().into_iter().map(|s| s.name).collect(),
                        off_tools: Vec::new(),
                    },
                    unreadable: Some(format!(
                        "This conversation's choice of tools could not be read ({error}), so it offers no tool. Switch on what it may use."
                    )),
                })
            }
        }
    }

    /// Keeps a conversation's toolset.
    pub fn set_conversation_toolset(
        &self,
        conversation: &str,
        toolset: &Toolset,
    ) -> Result<(), ToolsetError> {
        let text = if toolset.is_everything() {
            None
        } else {
            Some(serde_json::to_string(toolset).map_err(ToolsetError::Unwritable)?)
        };
        self.store()?.set_toolset(conversation, text.as_deref())?;
        Ok(())
    }

    /// What `toolset` offers among the ready servers' tools that Settings enable;
    /// `unreadable` is why a conversation's kept choice could not be read (the warning).
    pub fn tool_choices(
        &self,
        servers: &McpRuntime,
        toolset: Toolset,
        unreadable: Option<String>,
    ) -> ToolChoices {
        let settings = self.settings().unwrap_or_default();
        let mut ready = Vec::new();
        for status in servers.statuses() {
            if !matches!(status.state, ServerState::Ready { .. }) {
                continue;
            }
            // What a model may be offered: enabled in Settings, and not only for views.
            let tools = servers
                .server_tools(&status.name)
                .unwrap_or_default()
                .iter()
                .filter(|tool| tool.for_models && settings.tool_enabled(&status.name, &tool.name))
                .map(|tool| ToolsetTool {
                    name: tool.name.clone(),
                    title: tool.title.clone(),
                    on: toolset.allows(&status.name, &tool.name),
                    tokens: definition_tokens(tool),
                })
                .collect();
            ready.push(ToolsetServer {
                on: !toolset.off_servers.contains(&status.name),
                tools,
                name: status.name,
            });
        }
        let servers = ready;
        let on = servers.iter().flat_map(|s| s.tools.iter().filter(|t| t.on));
        let offered = u32::try_from(on.clone().count()).unwrap_or(u32::MAX);
        let tokens = on.map(|t| t.tokens).fold(0u32, u32::saturating_add);
        let warning = if unreadable.is_some() {
            unreadable
        } else if offered as usize > MANY_TOOLS {
            Some(format!(
                "{offered} tools are offered: past {MANY_TOOLS}, models pick tools worse and answer slower. Switch off what this conversation does not need."
            ))
        } else if tokens > MANY_TOOL_TOKENS {
            Some(format!(
                "The tools' definitions cost about {tokens} tokens in every request. Switch off what this conversation does not need."
            ))
        } else {
            None
        };
        ToolChoices {
            toolset,
            servers,
            offered,
            tokens,
            warning,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_toolset_switches_off_servers_and_single_tools_and_everything_else_is_on() {
        let toolset = Toolset {
            off_servers: vec!["fs".into()],
            off_tools: vec![ToolKey {
                server: "gh".into(),
                tool: "delete_repo".into(),
            }],
        };
        assert!(!toolset.allows("fs", "read"));
        assert!(!toolset.allows("gh", "delete_repo"));
        assert!(toolset.allows("gh", "list_issues"));
        assert!(toolset.allows("new_server", "anything"));
        assert!(Toolset::default().allows("fs", "read"));
        // The stored form: camelCase, missing lists are empty.
        let read: Toolset = serde_json::from_value(json!({"offServers": ["x"]})).unwrap();
        assert_eq!(read.off_servers, ["x"]);
        assert!(read.off_tools.is_empty());
    }

    #[test]
    fn a_definition_costs_about_a_token_per_four_characters() {
        let tool = ToolInfo {
            name: "get_weather".into(),
            title: None,
            description: Some("Gets the weather for a city.".into()),
            read_only: true,
            destructive: false,
            input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
            for_models: true,
        };
        let chars = "get_weather".len()
            + "Gets the weather for a city.".len()
            + tool.input_schema.to_string().len();
        assert_eq!(definition_tokens(&tool) as usize, chars.div_ceil(4));
    }
}
