//! Generates ui/src/lib/bindings.ts from the Rust types the window sees, and fails when the
//! checked-in file is stale (`UPDATE_BINDINGS=1 cargo test --workspace bindings` rewrites it).

use std::path::Path;

use conduit_host::app::{
    McpOverview, SendRequest, ServerTools, Started, ToolSetting, TurnAction, TurnError, TurnEvent,
    TurnStatus,
};
use conduit_host::approval::Decision;
use conduit_host::core::agent::AgentEvent;
use conduit_host::core::content::{
    Block, MediaRef, Message, ResultPart, Role, ToolCall, ToolOrigin, ToolResult,
};
use conduit_host::core::provider::{ProviderError, ProviderErrorKind, StopReason, Usage};
use conduit_host::core::tool::{Progress, ToolAnnotations};
use conduit_host::mcp::{ImportFile, ImportPick, McpEdit, McpFile, McpFileServer, TextProblem};
use conduit_host::mcp_client::client::ServerDetails;
use conduit_host::mcp_client::config::{ImportCandidate, TransportKind};
use conduit_host::mcp_client::servers::{ServerState, ServerStatus};
use conduit_host::providers::{LocalProvider, ProviderInput, ProviderSummary};
use conduit_host::settings::ToolPolicy;
use conduit_host::store::{Conversation, MessageStatus, SearchHit, StoredMessage};
use conduit_host::{AppInfo, Paths};
use ts_rs::{Config, TS};

use crate::command_list::{self, Command};
use crate::commands::ImportSource;

fn commands() -> Vec<Command> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("commands.list");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    command_list::parse(&text).unwrap_or_else(|err| panic!("{err}"))
}

const HEADER: &str = "// Generated from the Rust types by src-tauri/src/bindings_tests.rs: do not edit.\n\
// Regenerate with `UPDATE_BINDINGS=1 cargo test --workspace bindings`.\n";

/// The command names, then one `export type` per type, in this order.
fn generate() -> String {
    // The window's numbers (ids, sizes, times in ms) all fit a JavaScript number.
    let config = Config::new().with_large_int("number");
    let declarations = [
        Paths::decl(&config),
        AppInfo::decl(&config),
        MediaRef::decl(&config),
        ToolOrigin::decl(&config),
        ToolCall::decl(&config),
        ResultPart::decl(&config),
        ToolResult::decl(&config),
        Block::decl(&config),
        Role::decl(&config),
        Message::decl(&config),
        MessageStatus::decl(&config),
        StoredMessage::decl(&config),
        Conversation::decl(&config),
        SearchHit::decl(&config),
        ToolAnnotations::decl(&config),
        Progress::decl(&config),
        Usage::decl(&config),
        StopReason::decl(&config),
        ProviderErrorKind::decl(&config),
        ProviderError::decl(&config),
        AgentEvent::decl(&config),
        TurnAction::decl(&config),
        TurnError::decl(&config),
        TurnStatus::decl(&config),
        TurnEvent::decl(&config),
        Started::decl(&config),
        SendRequest::decl(&config),
        ProviderSummary::decl(&config),
        LocalProvider::decl(&config),
        ProviderInput::decl(&config),
        ServerDetails::decl(&config),
        ServerState::decl(&config),
        ServerStatus::decl(&config),
        McpOverview::decl(&config),
        Decision::decl(&config),
        TextProblem::decl(&config),
        TransportKind::decl(&config),
        McpFileServer::decl(&config),
        McpFile::decl(&config),
        McpEdit::decl(&config),
        ImportFile::decl(&config),
        ImportSource::decl(&config),
        ImportPick::decl(&config),
        ImportCandidate::decl(&config),
        ToolPolicy::decl(&config),
        ToolSetting::decl(&config),
        ServerTools::decl(&config),
    ];
    let mut out = String::from(HEADER);
    out.push_str("\n/** The commands of src-tauri/commands.list. */\nexport type CommandName =");
    for command in commands() {
        out.push_str(&format!("\n  | \"{}\"", command.name));
    }
    out.push_str(";\n");
    // Values the window must agree with the host on, from the host's own constants.
    let widths: Vec<String> = conduit_host::store::media::THUMBNAIL_WIDTHS
        .iter()
        .map(u32::to_string)
        .collect();
    out.push_str(&format!(
        "\n/** The widths the host makes thumbnails at (conduit_store::media::THUMBNAIL_WIDTHS). */\nexport const THUMBNAIL_WIDTHS = [{}] as const;\n",
        widths.join(", ")
    ));
    out.push_str(&format!(
        "\n/** What a secret value reads as in what the window receives (conduit_host::providers::MASKED). */\nexport const MASKED = {:?};\n",
        conduit_host::providers::MASKED
    ));
    for declaration in declarations {
        out.push('\n');
        out.push_str("export ");
        out.push_str(&declaration);
        out.push('\n');
    }
    out
}

#[test]
fn bindings_ts_is_generated_from_the_rust_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui/src/lib/bindings.ts");
    let generated = generate();
    if std::env::var_os("UPDATE_BINDINGS").is_some() {
        std::fs::write(&path, &generated).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is stale: run `UPDATE_BINDINGS=1 cargo test --workspace bindings` and commit it",
        path.display()
    );
}
