//! `conduit providers`: list, add, remove, and list a provider's models.

use crate::terminal::say;
use crate::terminal::{tell, tell_part};
use std::io::BufRead;
use std::sync::Arc;

use clap::{Args, Subcommand};
use conduit_host::Protocol;
use conduit_host::{Host, ProviderSettings, ToolMode};

use crate::Failure;
use crate::chat::Kind;
use crate::terminal::{shown, shown_json};

#[derive(Debug, Subcommand)]
pub enum ProvidersCommand {
    /// List the providers and where their keys are.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Add a provider. The key is read from stdin with --api-key-stdin and stored in the
    /// keychain (or the private secrets file), never in settings.
    Add(AddArgs),
    /// Remove a provider and its stored key.
    Remove { id: String },
    /// List the models a provider offers.
    Models {
        id: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// A name for the provider, e.g. `anthropic` or `ollama`.
    id: String,
    #[arg(long, value_enum)]
    kind: Kind,
    /// The service root, e.g. https://api.anthropic.com or http://localhost:11434/v1.
    #[arg(long)]
    base_url: String,
    /// The model used when `conduit chat` names none.
    #[arg(long)]
    model: Option<String>,
    /// Read the API key from the first line of stdin and store it as a secret.
    #[arg(long, conflicts_with = "api_key_env")]
    api_key_stdin: bool,
    /// Take the key from this environment variable each time instead.
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// An extra header sent with every request, `Name: value` (repeatable). Its value is
    /// stored as a secret, but shows in the process list while this runs: use
    /// --header-stdin for a token.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// An extra header whose value is read from stdin (repeatable): a line each, in the
    /// order given, after the API key's line with --api-key-stdin.
    #[arg(long = "header-stdin", value_name = "NAME")]
    header_stdin: Vec<String>,
    /// How its models get tools: `auto` (native, and as text once the service refuses
    /// them), `native`, or `text` (for models without native tool calling).
    #[arg(long, value_enum)]
    tool_mode: Option<ToolModeArg>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ToolModeArg {
    Auto,
    Native,
    Text,
}

impl From<ToolModeArg> for ToolMode {
    fn from(mode: ToolModeArg) -> Self {
        match mode {
            ToolModeArg::Auto => ToolMode::Auto,
            ToolModeArg::Native => ToolMode::Native,
            ToolModeArg::Text => ToolMode::Text,
        }
    }
}

/// The next line of stdin, trimmed; an empty one (or none left) is `empty`'s usage error.
fn stdin_line(stdin: &mut impl BufRead, empty: &str) -> Result<String, Failure> {
    let mut line = String::new();
    stdin.read_line(&mut line)?;
    let value = line.trim().to_owned();
    if value.is_empty() {
        return Err(crate::usage_error(empty));
    }
    Ok(value)
}

pub async fn run(host: Arc<Host>, command: ProvidersCommand) -> Result<u8, Failure> {
    match command {
        ProvidersCommand::List { json } => {
            let providers = host.list_providers()?;
            if json {
                say!("{}", shown_json(&serde_json::to_string_pretty(&providers)?))?;
            } else if providers.is_empty() {
                say!("No providers yet: add one with `conduit providers add`.")?;
            } else {
                for p in providers {
                    let s = &p.settings;
                    // The settings file can be edited by hand or copied from elsewhere.
                    say!(
                        "{:<16} {:<17} {}  model: {}  key: {}",
                        shown(&s.id),
                        s.protocol.name(),
                        shown(&s.base_url),
                        shown(s.default_model.as_deref().unwrap_or("-")),
                        shown(&p.key)
                    )?;
                }
            }
        }
        ProvidersCommand::Add(args) => {
            let mut headers = std::collections::BTreeMap::new();
            for header in &args.headers {
                let Some((name, value)) = header.split_once(':') else {
                    // Not echoed: a header without its colon is likely a value too.
                    return Err(crate::usage_error(
                        "a --header must look like `Name: value` (no colon found)",
                    ));
                };
                headers.insert(name.trim().to_owned(), value.trim().to_owned());
            }
            let mut stdin = std::io::stdin().lock();
            let typing = (args.api_key_stdin || !args.header_stdin.is_empty())
                .then(crate::terminal::TypingHidden::start);
            let hides = typing.as_ref().is_some_and(|t| t.hides());
            // At a terminal, each line is asked for (what is typed does not show).
            let mut typed = |what: &str, empty: &str| {
                if hides {
                    tell_part!("{what} (typing is not shown): ");
                }
                let line = stdin_line(&mut stdin, empty);
                if hides {
                    tell!();
                }
                line
            };
            let key = if args.api_key_stdin {
                Some(typed("API key", "--api-key-stdin read an empty key")?)
            } else {
                None
            };
            for name in &args.header_stdin {
                let value = typed(
                    &format!("{} header", crate::terminal::shown_line(name)),
                    &format!("--header-stdin {name:?} read an empty value"),
                )?;
                headers.insert(name.trim().to_owned(), value);
            }
            drop(typing);
            let settings = ProviderSettings {
                id: args.id.clone(),
                protocol: Protocol::from(args.kind),
                base_url: args.base_url,
                default_model: args.model,
                headers,
                stored_headers: Vec::new(),
                headers_secret: None,
                api_key_env: args.api_key_env,
                tool_mode: args.tool_mode.map(ToolMode::from),
                model_tool_modes: Default::default(),
                other: Default::default(),
            };
            host.add_provider(settings, key.as_deref())?;
            say!("Added provider {}.", args.id)?;
        }
        ProvidersCommand::Remove { id } => {
            host.remove_provider(&id)?;
            say!("Removed provider {id}.")?;
        }
        ProvidersCommand::Models { id, json } => {
            let models = host.provider_models(&id).await?;
            if json {
                say!("{}", shown_json(&serde_json::to_string_pretty(&models)?))?;
            } else {
                // The model list is the provider's.
                for model in models {
                    match model.display_name {
                        Some(name) => say!("{:<40} {}", shown(&model.id), shown(&name))?,
                        None => say!("{}", shown(&model.id))?,
                    }
                }
            }
        }
    }
    Ok(0)
}
