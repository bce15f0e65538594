//! `conduit mcp`: the servers of the mcpServers file, their tools, resources and prompts.
//! Server names (the mcpServers file may come from anywhere), what servers report, their
//! stderr and their results are outside text: printed through [`shown`] or
//! [`shown_json`].

use crate::terminal::say;
use crate::terminal::tell;
use std::io::Write;
use std::sync::Arc;

use clap::Subcommand;
use conduit_host::Host;
use conduit_host::core::content::ResultPart;
use conduit_host::mcp::ServerStatus;
use conduit_host::mcp::{ServerState, as_object, ready_connection};
use conduit_host::mcp_client::oauth::{BrowserSignIn, SignedOut};
use conduit_host::mcp_client::runtime::McpRuntime;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::terminal::{copy_shown, shown, shown_json};
use crate::{EXIT_FAILURE, Failure, usage_error};

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Each server, its state, tool count and error.
    List {
        #[arg(long)]
        json: bool,
    },
    /// The tools of every ready server, or of one.
    Tools {
        server: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Call a tool; images in the result are saved and their paths printed. Arguments go
    /// in --args: `conduit mcp call files read_file --args '{"path": "a.txt"}'`.
    Call {
        server: String,
        tool: String,
        /// The arguments as a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Offer a tool to models again.
    EnableTool { server: String, tool: String },
    /// Never offer a tool to models (kept in settings).
    DisableTool { server: String, tool: String },
    /// The resources (and resource templates) of a server.
    Resources { server: String },
    /// Read a resource.
    Read { server: String, uri: String },
    /// The prompts of a server.
    Prompts { server: String },
    /// Get a prompt with arguments.
    Prompt {
        server: String,
        name: String,
        #[arg(long, default_value = "{}")]
        args: String,
    },
    /// Sign in to an HTTP server that asks for it (OAuth): the authorization page opens
    /// in the browser, and the tokens are kept in the keychain (or the private file).
    Login { server: String },
    /// Sign out of a server: its tokens are revoked where the server offers it, and
    /// forgotten.
    Logout { server: String },
    /// Serve Conduit's tools, conversations and prompts as an MCP server: over stdio, or
    /// with --http as streamable HTTP (bearer token required; made and shown once).
    Serve {
        /// Serve streamable HTTP on this address (e.g. 127.0.0.1:8765) at /mcp.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// Allow an address other machines can reach (the default is loopback only). The
        /// endpoint speaks plain HTTP: the bearer token and every answer cross the network
        /// unencrypted, so put a TLS proxy in front of it beyond a network you trust.
        #[arg(long, requires = "http")]
        allow_remote: bool,
    },
}

pub async fn run(host: Arc<Host>, command: McpCommand) -> Result<u8, Failure> {
    match &command {
        McpCommand::EnableTool { server, tool } | McpCommand::DisableTool { server, tool } => {
            let enabled = matches!(command, McpCommand::EnableTool { .. });
            if let Err(refused) = host.check_tool_named(server, tool) {
                return Err(usage_error(refused.to_string()));
            }
            host.set_mcp_tool_enabled(server, tool, enabled)?;
            let state = if enabled { "offered to" } else { "kept from" };
            say!("{server}/{tool} is {state} models.")?;
            return Ok(0);
        }
        McpCommand::Serve { http, allow_remote } => {
            return serve(&host, *http, *allow_remote).await;
        }
        // Arguments that are not JSON are said before any server starts (which may take
        // the whole start timeout).
        McpCommand::Call { args, .. } | McpCommand::Prompt { args, .. } => {
            parse_args(args)?;
        }
        _ => {}
    }
    let servers = host
        .start_mcp(crate::ask::TerminalAsker::if_interactive(
            host.clone(),
            None,
        ))
        .await?;
    let result = run_with(&host, &servers, command).await;
    servers.shutdown().await;
    result
}

/// `conduit mcp serve`: stdio until the client leaves, or HTTP until Ctrl-C.
async fn serve(
    host: &Arc<Host>,
    http: Option<std::net::SocketAddr>,
    allow_remote: bool,
) -> Result<u8, Failure> {
    let Some(addr) = http else {
        host.serve_mcp_stdio().await?;
        return Ok(0);
    };
    let stop = CancellationToken::new();
    let serving = host
        .start_mcp_http(addr, allow_remote, stop.clone())
        .await?;
    say!("Serving MCP at {}", serving.url)?;
    if !addr.ip().is_loopback() {
        tell!(
            "Warning: {addr} is reachable from other machines over plain HTTP: the bearer \
             token and every answer (conversations and files, if shared) cross the network \
             unencrypted. Put a TLS proxy in front of it beyond a network you trust."
        );
    }
    if serving.token.created {
        // The only time the token is shown: it is never logged.
        say!(
            "A bearer token was made for it and kept in the secret store; clients send \
             `Authorization: Bearer <token>`. It is shown only now:\n{}",
            serving.token.token
        )?;
    }
    conduit_host::core::task::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    serving.finished().await?;
    Ok(0)
}

fn parse_args(text: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|e| usage_error(format!("--args is not JSON: {e}")))
}

async fn run_with(
    host: &Arc<Host>,
    servers: &McpRuntime,
    command: McpCommand,
) -> Result<u8, Failure> {
    match command {
        McpCommand::List { json } => {
            let statuses = servers.statuses();
            if json {
                say!("{}", shown_json(&serde_json::to_string_pretty(&statuses)?))?;
                return Ok(0);
            }
            if statuses.is_empty() {
                say!(
                    "No MCP servers in {}.",
                    host.paths().mcp_config_file.display()
                )?;
            }
            for status in statuses {
                let name = shown(&status.name);
                match &status.state {
                    ServerState::Ready {
                        details,
                        tool_count,
                    } => say!(
                        "{:<20} ready     {tool_count} {}  ({} {})",
                        name,
                        if *tool_count == 1 { "tool " } else { "tools" },
                        shown(details.name.as_deref().unwrap_or("?")),
                        shown(details.version.as_deref().unwrap_or(""))
                    )?,
                    ServerState::Failed {
                        reason,
                        exit_code,
                        stderr_tail,
                    } => {
                        say!("{:<20} failed    {}", name, shown(reason))?;
                        if let Some(code) = exit_code {
                            say!("{:<20}           exit code {code}", "")?;
                        }
                        for line in stderr_tail.iter().rev().take(5).rev() {
                            say!("{:<20}   stderr: {}", "", shown(line))?;
                        }
                    }
                    ServerState::Restarting {
                        attempt, reason, ..
                    } => say!(
                        "{:<20} restarting (attempt {attempt}): {}",
                        name,
                        shown(reason)
                    )?,
                    ServerState::Disabled => say!("{:<20} disabled", name)?,
                    ServerState::SignInRequired { reason, .. } => say!(
                        "{:<20} sign-in   {}: run `conduit mcp login {}`",
                        name,
                        shown(reason),
                        name
                    )?,
                    ServerState::Starting => say!("{:<20} starting", name)?,
                }
            }
        }
        McpCommand::EnableTool { .. }
        | McpCommand::DisableTool { .. }
        | McpCommand::Serve { .. } => {}
        McpCommand::Login { server } => {
            let authorize = BrowserSignIn::new(Arc::new(|url: &str| {
                open::that_detached(url).map_err(|e| e.to_string())
            }));
            // The authorization page's address is the authorization server's.
            let announce = |url: &str| {
                tell!(
                    "Sign in to {} in your browser; if it does not open, visit:\n{}",
                    shown(&server),
                    shown(url)
                );
            };
            host.sign_in_mcp(servers, &server, &authorize, &announce)
                .await?;
            match servers.statuses().into_iter().find(|s| s.name == server) {
                Some(ServerStatus {
                    state: ServerState::Ready { tool_count, .. },
                    ..
                }) => say!(
                    "Signed in to {}: ready, {tool_count} tool{}.",
                    shown(&server),
                    if tool_count == 1 { "" } else { "s" }
                )?,
                Some(status) => say!(
                    "Signed in to {}, but it is not ready: {}",
                    shown(&server),
                    shown_json(&serde_json::to_string(&status.state)?)
                )?,
                None => say!("Signed in to {}.", shown(&server))?,
            }
        }
        McpCommand::Logout { server } => {
            let outcome = host.sign_out_mcp(servers, &server).await?;
            let said = match outcome {
                SignedOut::NothingStored => format!("{server} had no sign-in stored."),
                SignedOut::Revoked => format!("Signed out of {server}; its tokens were revoked."),
                SignedOut::Forgotten => format!(
                    "Signed out of {server}; its authorization server offers no revocation, so the tokens were forgotten here."
                ),
                SignedOut::RevocationFailed(reason) => format!(
                    "Signed out of {server}; revoking its tokens failed ({reason}), so they were forgotten here only."
                ),
            };
            // The failure's reason is the authorization server's.
            say!("{}", shown(&said))?;
        }
        McpCommand::Tools { server, json } => {
            let names: Vec<String> = match &server {
                Some(name) => vec![name.clone()],
                None => servers.statuses().into_iter().map(|s| s.name).collect(),
            };
            let mut listed = Vec::new();
            for name in names {
                let Some(status) = servers.statuses().into_iter().find(|s| s.name == name) else {
                    return Err(Failure::from(anyhow::anyhow!(
                        "there is no server named {name:?}"
                    )));
                };
                // A server asked for by name that is not ready says why, rather than
                // listing nothing as if it had no tools (`[]` with exit 0 for a script).
                if server.is_some() {
                    let why = match &status.state {
                        ServerState::Ready { .. } => None,
                        ServerState::Failed { reason, .. } => {
                            Some(format!("{name} did not start: {reason}"))
                        }
                        ServerState::SignInRequired { .. } => Some(format!(
                            "{name} asks you to sign in first: run `conduit mcp login {name}`"
                        )),
                        ServerState::Disabled => Some(format!(
                            "{name} is switched off in the mcpServers file (\"disabled\": true)"
                        )),
                        ServerState::Restarting { reason, .. } => {
                            Some(format!("{name} is starting again: {reason}"))
                        }
                        ServerState::Starting => Some(format!("{name} did not finish starting")),
                    };
                    if let Some(why) = why {
                        return Err(Failure::from(anyhow::anyhow!("{}", shown(&why))));
                    }
                }
                // Whether each tool is offered and its policy are the host's answer.
                for setting in host.server_tool_settings(servers, &name)?.tools {
                    listed.push(json!({
                        "server": name,
                        "name": setting.tool.name,
                        "enabled": setting.enabled,
                        "policy": setting.policy,
                        "description": setting.tool.description,
                        "inputSchema": setting.tool.input_schema,
                    }));
                }
            }
            if json {
                say!("{}", shown_json(&serde_json::to_string_pretty(&listed)?))?;
            } else {
                for tool in listed {
                    let description = tool["description"].as_str().unwrap_or_default();
                    let first = description.lines().next().unwrap_or_default();
                    say!(
                        "{}/{}  {}",
                        shown(tool["server"].as_str().unwrap_or_default()),
                        shown(tool["name"].as_str().unwrap_or_default()),
                        shown(first)
                    )?;
                }
            }
        }
        McpCommand::Call {
            server,
            tool,
            args,
            json,
        } => {
            let arguments = parse_args(&args)?;
            let progress_json = json;
            let progress = Arc::new(move |p: conduit_host::core::tool::Progress| {
                if progress_json {
                    let line = json!({"type": "progress", "progress": p}).to_string();
                    // A failed write shows again, and fails the command, when the result
                    // is written.
                    let _ = say!("{}", shown_json(&line));
                } else {
                    let total = p.total.map(|t| format!("/{t}")).unwrap_or_default();
                    tell!(
                        "progress {}{total} {}",
                        p.progress,
                        shown(&p.message.unwrap_or_default())
                    );
                }
            });
            let output = host
                .call_mcp_tool(
                    servers,
                    &server,
                    &tool,
                    arguments,
                    progress,
                    CancellationToken::new(),
                )
                .await?;
            print_output(host, &output.parts, output.is_error, json)?;
            return Ok(if output.is_error { EXIT_FAILURE } else { 0 });
        }
        McpCommand::Resources { server } => {
            let connection = ready_connection(servers, &server)?;
            let resources = connection
                .resources(None)
                .await
                .map_err(anyhow::Error::from)?;
            let templates = connection
                .resource_templates(None)
                .await
                .map_err(anyhow::Error::from)?;
            say!(
                "{}",
                shown_json(&serde_json::to_string_pretty(
                    &json!({"resources": resources.items, "templates": templates.items})
                )?)
            )?;
            note_cut(&resources.cut);
            note_cut(&templates.cut);
        }
        McpCommand::Read { server, uri } => {
            let connection = ready_connection(servers, &server)?;
            let read = connection
                .read_resource(&uri)
                .await
                .map_err(anyhow::Error::from)?;
            say!("{}", shown_json(&serde_json::to_string_pretty(&read)?))?;
        }
        McpCommand::Prompts { server } => {
            let connection = ready_connection(servers, &server)?;
            let prompts = connection
                .prompts(None)
                .await
                .map_err(anyhow::Error::from)?;
            say!(
                "{}",
                shown_json(&serde_json::to_string_pretty(&prompts.items)?)
            )?;
            note_cut(&prompts.cut);
        }
        McpCommand::Prompt { server, name, args } => {
            let connection = ready_connection(servers, &server)?;
            let arguments = as_object(parse_args(&args)?)?;
            let prompt = connection
                .prompt(&name, arguments)
                .await
                .map_err(anyhow::Error::from)?;
            say!("{}", shown_json(&serde_json::to_string_pretty(&prompt)?))?;
        }
    }
    Ok(0)
}

fn print_output(
    host: &Host,
    parts: &[ResultPart],
    is_error: bool,
    json: bool,
) -> Result<(), Failure> {
    if json {
        let images: Vec<Value> = parts
            .iter()
            .filter_map(|p| match p {
                ResultPart::Image { media }
                | ResultPart::Audio { media }
                | ResultPart::LongText { media, .. } => Some(json!({
                    "path": host.media_path(media), "mime": media.mime, "bytes": media.bytes,
                })),
                _ => None,
            })
            .collect();
        // One line, as the progress lines before it: the output is JSON Lines, the result
        // last (alone, it is one JSON document too).
        say!(
            "{}",
            shown_json(&serde_json::to_string(
                &json!({"type": "result", "isError": is_error, "parts": parts, "files": images})
            )?)
        )?;
        return Ok(());
    }
    if is_error {
        tell!("conduit: the tool reported an error");
    }
    for part in parts {
        match part {
            ResultPart::Text { text } => say!("{}", shown(text))?,
            ResultPart::Image { media } | ResultPart::Audio { media } => {
                say!(
                    "{} ({} bytes): {}",
                    shown(&media.mime),
                    media.bytes,
                    host.media_path(media).display()
                )?;
            }
            ResultPart::ResourceLink { uri, name, .. } => {
                say!(
                    "link: {} {}",
                    shown(name.as_deref().unwrap_or("")),
                    shown(uri)
                )?;
            }
            ResultPart::Resource {
                uri, text, mime, ..
            } => {
                say!(
                    "resource {} ({})",
                    shown(uri),
                    shown(mime.as_deref().unwrap_or("?"))
                )?;
                if let Some(text) = text {
                    say!("{}", shown(text))?;
                }
            }
            ResultPart::Structured { value } => {
                say!("{}", shown_json(&serde_json::to_string_pretty(value)?))?;
            }
            ResultPart::View { uri, structured } => {
                // A terminal shows no view: say there is one, and print what it would get.
                say!(
                    "[an interactive view ({}) the desktop app shows]",
                    shown(uri)
                )?;
                if let Some(value) = structured {
                    say!("{}", shown_json(&serde_json::to_string_pretty(value)?))?;
                }
            }
            ResultPart::LongText { media, .. } => {
                // The whole output from its file, shown safely a piece at a time.
                let mut file = std::fs::File::open(host.media_path(media))?;
                let mut out = std::io::stdout().lock();
                copy_shown(&mut file, &mut out)?;
                out.write_all(b"\n")
                    .and_then(|()| out.flush())
                    .map_err(crate::terminal::OutputFailed)?;
            }
        }
    }
    Ok(())
}

/// Says on stderr that a list was cut (its first items were printed).
fn note_cut(cut: &Option<conduit_host::mcp_client::paging::ListCut>) {
    if let Some(cut) = cut {
        tell!("note: {cut}");
    }
}
