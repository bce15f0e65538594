//! Resources and prompts in the chat: what the ready servers offer to mention (resources,
//! resource templates, prompts), completion of their arguments, and a mention turned into
//! message content by the host (the page only names the server and the resource or
//! prompt; the host reads it).

use std::time::Duration;

use conduit_core::content::{Block, Message};
use conduit_mcp::mention::{self, MentionError};
use conduit_mcp::paging::{ListDeadline, Listing};
use conduit_mcp::runtime::McpRuntime;
use conduit_mcp::servers::ServerState;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Host;

/// How long listing one server's resources and prompts may take: what is listed by then
/// is offered, the rest cut.
const LIST_PATIENCE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ResourceChoice {
    pub server: String,
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct TemplateChoice {
    pub server: String,
    pub uri_template: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// The names the template asks for, in order.
    pub arguments: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct PromptChoice {
    pub server: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub arguments: Vec<PromptArgumentChoice>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct PromptArgumentChoice {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub required: bool,
}

/// What the ready servers offer to mention, and which could not say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct Mentionables {
    pub resources: Vec<ResourceChoice>,
    pub templates: Vec<TemplateChoice>,
    pub prompts: Vec<PromptChoice>,
    /// Servers whose lists failed, with why.
    pub problems: Vec<String>,
    /// Lists offered cut short (past Conduit's caps, or not listed in time), each saying
    /// how far they go.
    pub notes: Vec<String>,
}

impl Mentionables {
    /// The items of one server's listing; its failure (in `problems`) or cut (in `notes`)
    /// said.
    fn taken<T>(
        &mut self,
        listed: Result<Listing<T>, conduit_mcp::client::McpError>,
        server: &str,
    ) -> Vec<T> {
        match listed {
            Ok(listing) => {
                self.notes.extend(listing.cut.map(|cut| cut.to_string()));
                listing.items
            }
            Err(error) => {
                self.problems.push(format!("{server}: {error}"));
                Vec::new()
            }
        }
    }
}

/// A resource the user attaches to a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ResourceMention {
    Resource {
        server: String,
        uri: String,
    },
    /// A template filled in; the host expands it.
    Template {
        server: String,
        uri_template: String,
        #[ts(type = "Record<string, string>")]
        arguments: Map<String, Value>,
    },
}

/// A prompt the user uses: its messages go into the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct PromptMention {
    pub server: String,
    pub name: String,
    #[ts(type = "Record<string, string>")]
    pub arguments: Map<String, Value>,
}

/// What an argument is completed for.
#[derive(Debug, Clone, PartialEq, Deserialize, ts_rs::TS)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum CompletionTarget {
    Template { uri_template: String },
    Prompt { name: String },
}

#[derive(Debug, thiserror::Error)]
pub enum MentionHostError {
    #[error("{0:?} is not a ready server")]
    NotReady(String),
    #[error("{server:?}: {source}")]
    Server {
        server: String,
        #[source]
        source: conduit_mcp::client::McpError,
    },
    #[error("{what}: {source}")]
    Content {
        what: String,
        #[source]
        source: MentionError,
    },
    #[error("reading the content failed: {0}")]
    Join(#[source] tokio::task::JoinError),
}

impl Host {
    /// The resources, templates and prompts of every ready server (those that support
    /// them); a list that fails is named in `problems`, the others still listed, and a
    /// list cut short (past the caps, or not listed within [`LIST_PATIENCE`] of when the
    /// server's listing began) is offered as far as it goes and named in `notes`.
    pub async fn mentionables(&self, servers: &McpRuntime) -> Mentionables {
        let mut out = Mentionables::default();
        for status in servers.statuses() {
            let ServerState::Ready { details, .. } = &status.state else {
                continue;
            };
            let Some(connection) = servers.connection(&status.name) else {
                continue;
            };
            let server = status.name.clone();
            let deadline = Some(ListDeadline::after(LIST_PATIENCE));
            let resources = if details.resources {
                let resources = connection.resources(deadline).await;
                let templates = connection.resource_templates(deadline).await;
                Some((out.taken(resources, &server), out.taken(templates, &server)))
            } else {
                None
            };
            let prompts = if details.prompts {
                let prompts = connection.prompts(deadline).await;
                out.taken(prompts, &server)
            } else {
                Vec::new()
            };
            if let Some((resources, templates)) = resources {
                out.resources
                    .extend(resources.into_iter().map(|r| ResourceChoice {
                        server: server.clone(),
                        uri: r.uri,
                        name: r.name,
                        title: r.title,
                        description: r.description,
                        mime: r.mime_type,
                    }));
                out.templates
                    .extend(templates.into_iter().map(|t| TemplateChoice {
                        server: server.clone(),
                        arguments: mention::template_arguments(&t.uri_template),
                        uri_template: t.uri_template,
                        name: t.name,
                        title: t.title,
                        description: t.description,
                    }));
            }
            out.prompts.extend(prompts.into_iter().map(|p| {
                PromptChoice {
                    server: server.clone(),
                    name: p.name,
                    title: p.title,
                    description: p.description,
                    arguments: p
                        .arguments
                        .unwrap_or_default()
                        .into_iter()
                        .map(|a| PromptArgumentChoice {
                            name: a.name,
                            title: a.title,
                            description: a.description,
                            required: a.required.unwrap_or(false),
                        })
                        .collect(),
                }
            }));
        }
        out
    }

    /// The server's suggestions for an argument being typed (`completion/complete`);
    /// none when the server offers no completion.
    pub async fn complete_mention(
        &self,
        servers: &McpRuntime,
        server: &str,
        target: CompletionTarget,
        argument: &str,
        value: &str,
    ) -> Result<Vec<String>, MentionHostError> {
        let connection = servers
            .connection(server)
            .ok_or_else(|| MentionHostError::NotReady(server.to_owned()))?;
        let completed = match &target {
            CompletionTarget::Template { uri_template } => {
                mention::Completed::Template(uri_template)
            }
            CompletionTarget::Prompt { name } => mention::Completed::Prompt(name),
        };
        connection
            .complete(completed, argument, value)
            .await
            .map_err(|source| MentionHostError::Server {
                server: server.to_owned(),
                source,
            })
    }

    /// A resource mention read and turned into message blocks.
    pub(crate) async fn mention_blocks(
        &self,
        servers: &McpRuntime,
        mention: &ResourceMention,
    ) -> Result<Vec<Block>, MentionHostError> {
        let (server, uri) = match mention {
            ResourceMention::Resource { server, uri } => (server, uri.clone()),
            ResourceMention::Template {
                server,
                uri_template,
                arguments,
            } => (
                server,
                mention::expand_template(uri_template, arguments).map_err(|source| {
                    MentionHostError::Content {
                        what: uri_template.clone(),
                        source,
                    }
                })?,
            ),
        };
        let connection = servers
            .connection(server)
            .ok_or_else(|| MentionHostError::NotReady(server.clone()))?;
        let read =
            connection
                .read_resource(&uri)
                .await
                .map_err(|source| MentionHostError::Server {
                    server: server.clone(),
                    source,
                })?;
        let media = self.media.clone();
        tokio::task::spawn_blocking(move || {
            mention::resource_blocks(read, media.as_ref())
                .map_err(|source| MentionHostError::Content { what: uri, source })
        })
        .await
        .map_err(MentionHostError::Join)?
    }

    /// A prompt got from its server, its messages as the conversation's own.
    pub(crate) async fn prompt_preface(
        &self,
        servers: &McpRuntime,
        prompt: &PromptMention,
    ) -> Result<Vec<Message>, MentionHostError> {
        let connection = servers
            .connection(&prompt.server)
            .ok_or_else(|| MentionHostError::NotReady(prompt.server.clone()))?;
        let arguments: Map<String, Value> = prompt
            .arguments
            .iter()
            .filter(|(_, v)| !matches!(v, Value::String(s) if s.is_empty()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let got = connection
            .prompt(&prompt.name, arguments)
            .await
            .map_err(|source| MentionHostError::Server {
                server: prompt.server.clone(),
                source,
            })?;
        let media = self.media.clone();
        let name = prompt.name.clone();
        tokio::task::spawn_blocking(move || {
            mention::prompt_messages(got, media.as_ref())
                .map_err(|source| MentionHostError::Content { what: name, source })
        })
        .await
        .map_err(MentionHostError::Join)?
    }
}
