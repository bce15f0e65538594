//! Generates the window's contract from the Rust definitions: ui/src/lib/bindings.ts (the
//! types the window sees), ui/src/lib/commands.ts (a typed wrapper per command, from its
//! signature) and capabilities/*.json (from commands.list). Fails when a checked-in file is
//! stale; `UPDATE_BINDINGS=1 cargo test --workspace bindings` rewrites them.

use conduit_host::app::{
    AttachedDocument, AttachedFile, CommandError, ErrorAction, McpOverview, SendRequest,
    ServerTools, Started, ToolSetting, TurnEvent, TurnStatus,
};
use conduit_host::approval::{ConversationAllow, Decision};
use conduit_host::asks::{Question, QuestionReply, SamplingQuestion, SamplingReply, SamplingState};
use conduit_host::core::agent::{AgentEvent, StandingAllow};
use conduit_host::core::content::{
    Block, MediaRef, Message, ResultPart, Role, ToolCall, ToolOrigin, ToolResult,
};
use conduit_host::core::context_fit::ContextFit;
use conduit_host::core::provider::{
    ProviderError, ProviderErrorKind, ReasoningEffort, StopReason, Usage,
};
use conduit_host::core::tool::{Progress, ToolAnnotations};
use conduit_host::mcp::{ImportFile, ImportPick, McpFile, McpFileServer, TextProblem};
use conduit_host::mcp_client::client::ServerDetails;
use conduit_host::mcp_client::config::{Edit, ImportCandidate, TransportKind};
use conduit_host::mcp_client::elicit::{
    ChoiceOption, Elicitation, ElicitationKind, FieldInput, FormField,
};
use conduit_host::mcp_client::oauth::SignedOut;
use conduit_host::mcp_client::sampling::{
    SampledMessage, SamplingContent, SamplingMessage, SamplingRequest, SamplingRole, SamplingStop,
    SamplingTool, ToolChoice,
};
use conduit_host::mcp_client::servers::{ServerOutput, ServerState, ServerStatus};
use conduit_host::mentions::{
    CompletionTarget, Mentionables, PromptArgumentChoice, PromptChoice, PromptMention,
    ResourceChoice, ResourceMention, TemplateChoice,
};
use conduit_host::providers::{LocalProvider, ProviderInput, ProviderSummary};
use conduit_host::sampling::ModelPick;
use conduit_host::serve_http::ServeHttpStatus;
use conduit_host::served::ServeSnippets;
use conduit_host::settings::ToolPolicy;
use conduit_host::store::export::Format as ExportFormat;
use conduit_host::store::{Conversation, HistoryDamage, MessageStatus, SearchHit, StoredMessage};
use conduit_host::toolset::{ToolChoices, ToolKey, Toolset, ToolsetServer, ToolsetTool};
use conduit_host::{AppInfo, Paths};
use ts_rs::{Config, TS};

use crate::bindgen::{ArgKind, CommandShape};
use crate::command_list::{self, Command, WINDOWS};
use crate::commands::{Folder, ImportSource};

fn commands() -> Vec<Command> {
    let path = crate::contract_tests::manifest_dir().join("commands.list");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    command_list::parse(&text).unwrap_or_else(|err| panic!("{err}"))
}

const HEADER: &str = "// Generated from the Rust types by src-tauri/src/bindings_tests.rs: do not edit.\n\
// Regenerate with `UPDATE_BINDINGS=1 cargo test --workspace bindings`.\n";

/// The command names, then one `export type` per type, in this order.
fn generate() -> String {
    generate_types(&config())
}

/// The window's numbers (ids, sizes, times in ms) all fit a JavaScript number.
fn config() -> Config {
    Config::new().with_large_int("number")
}

fn generate_types(config: &Config) -> String {
    let declarations = [
        Paths::decl(config),
        AppInfo::decl(config),
        MediaRef::decl(config),
        ToolOrigin::decl(config),
        ToolCall::decl(config),
        ResultPart::decl(config),
        ToolResult::decl(config),
        Block::decl(config),
        Role::decl(config),
        Message::decl(config),
        MessageStatus::decl(config),
        StoredMessage::decl(config),
        Conversation::decl(config),
        SearchHit::decl(config),
        HistoryDamage::decl(config),
        ToolAnnotations::decl(config),
        Progress::decl(config),
        Usage::decl(config),
        StopReason::decl(config),
        ProviderErrorKind::decl(config),
        ProviderError::decl(config),
        StandingAllow::decl(config),
        ContextFit::decl(config),
        ReasoningEffort::decl(config),
        AgentEvent::decl(config),
        ErrorAction::decl(config),
        CommandError::decl(config),
        TurnStatus::decl(config),
        TurnEvent::decl(config),
        Started::decl(config),
        AttachedFile::decl(config),
        AttachedDocument::decl(config),
        SendRequest::decl(config),
        ProviderSummary::decl(config),
        LocalProvider::decl(config),
        ProviderInput::decl(config),
        ServerDetails::decl(config),
        ServerState::decl(config),
        ServerStatus::decl(config),
        ServerOutput::decl(config),
        McpOverview::decl(config),
        Decision::decl(config),
        ConversationAllow::decl(config),
        TextProblem::decl(config),
        TransportKind::decl(config),
        McpFileServer::decl(config),
        McpFile::decl(config),
        Edit::decl(config),
        ImportFile::decl(config),
        Folder::decl(config),
        ImportSource::decl(config),
        ImportPick::decl(config),
        ImportCandidate::decl(config),
        ToolPolicy::decl(config),
        ToolSetting::decl(config),
        ServerTools::decl(config),
        ChoiceOption::decl(config),
        FieldInput::decl(config),
        FormField::decl(config),
        ElicitationKind::decl(config),
        Elicitation::decl(config),
        Question::decl(config),
        QuestionReply::decl(config),
        ModelPick::decl(config),
        SamplingRole::decl(config),
        SamplingContent::decl(config),
        SamplingMessage::decl(config),
        SamplingTool::decl(config),
        ToolChoice::decl(config),
        SamplingRequest::decl(config),
        SamplingStop::decl(config),
        SampledMessage::decl(config),
        SamplingState::decl(config),
        SamplingQuestion::decl(config),
        SamplingReply::decl(config),
        conduit_host::mcp_client::apps::ViewDomains::decl(config),
        conduit_host::app_views::ViewHandle::decl(config),
        conduit_host::app_views::ViewLookup::decl(config),
        conduit_host::app_views::ViewCall::decl(config),
        conduit_host::app_views::ViewCallResult::decl(config),
        ServeSnippets::decl(config),
        ServeHttpStatus::decl(config),
        SignedOut::decl(config),
        ToolKey::decl(config),
        Toolset::decl(config),
        ToolsetTool::decl(config),
        ToolsetServer::decl(config),
        ToolChoices::decl(config),
        ExportFormat::decl(config),
        ResourceChoice::decl(config),
        TemplateChoice::decl(config),
        PromptArgumentChoice::decl(config),
        PromptChoice::decl(config),
        Mentionables::decl(config),
        ResourceMention::decl(config),
        PromptMention::decl(config),
        CompletionTarget::decl(config),
        conduit_host::window_events::WindowEvent::decl(config),
        conduit_host::window_events::EventBatch::decl(config),
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
    out.push_str(&format!(
        "\n/** The most UTF-8 bytes of a view's context the host keeps (conduit_host::app_views::MAX_CONTEXT). */\nexport const MAX_VIEW_CONTEXT = {};\n",
        conduit_host::app_views::MAX_CONTEXT
    ));
    out.push_str(&format!(
        "\n/** The most UTF-8 bytes of a view's message to the model (conduit_host::app_views::MAX_VIEW_MESSAGE). */\nexport const MAX_VIEW_MESSAGE = {};\n",
        conduit_host::app_views::MAX_VIEW_MESSAGE
    ));
    out.push_str(&format!(
        "\n/** The most UTF-8 bytes of a view's tool call's arguments as JSON (conduit_host::app_views::MAX_VIEW_ARGUMENTS). */\nexport const MAX_VIEW_ARGUMENTS = {};\n",
        conduit_host::app_views::MAX_VIEW_ARGUMENTS
    ));
    for declaration in declarations {
        out.push('\n');
        out.push_str("export ");
        out.push_str(&declaration);
        out.push('\n');
    }
    out
}

/// Every command's description, from `window_command!` beside each one, in list order.
fn shapes(cfg: &Config) -> Vec<CommandShape> {
    include!(concat!(env!("OUT_DIR"), "/command_shapes.rs"))
}

fn camel_case(snake: &str) -> String {
    let mut words = snake.split('_');
    let mut out = words.next().unwrap_or_default().to_owned();
    for word in words {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    out
}

/// The names `export type` declares in bindings.ts.
fn declared_types(bindings: &str) -> Vec<&str> {
    bindings
        .lines()
        .filter_map(|line| line.strip_prefix("export type "))
        .filter_map(|rest| rest.split([' ', '<', '=']).next())
        .collect()
}

/// One typed wrapper per command: its arguments by Tauri's (camelCase) names, a channel
/// as a callback, a raw body as a `Blob`, its answer as the promise's type.
fn generate_commands(shapes: &[CommandShape], bindings: &str) -> String {
    let mut body = String::new();
    for shape in shapes {
        let mut params = Vec::new();
        let mut sent = Vec::new();
        let mut setup = String::new();
        let mut raw_body = None;
        let mut streams = Vec::new();
        for (name, kind) in &shape.args {
            let name = camel_case(name);
            match kind {
                ArgKind::Injected => {}
                ArgKind::Value(ts) => {
                    params.push(format!("{name}: {ts}"));
                    sent.push(name);
                }
                ArgKind::Stream(ts) => {
                    params.push(format!("{name}: (message: {ts}) => void"));
                    setup.push_str(&format!(
                        "  const {name}Stream = openStream<{ts}>({name});\n"
                    ));
                    sent.push(format!("{name}: {name}Stream"));
                    streams.push(format!("{name}Stream"));
                }
                ArgKind::RawBody => {
                    params.push(format!("{name}: Blob"));
                    raw_body = Some(name);
                }
            }
        }
        let docs: Vec<String> = shape
            .docs
            .iter()
            .map(|line| line.trim().replace("*/", "*\\/"))
            .collect();
        body.push('\n');
        match docs.as_slice() {
            [] => {}
            [line] => body.push_str(&format!("/** {line} */\n")),
            lines => {
                body.push_str("/**\n");
                for line in lines {
                    body.push_str(&format!(" * {line}\n").replace(" \n", "\n"));
                }
                body.push_str(" */\n");
            }
        }
        let name = shape.name;
        let ok = &shape.ok;
        let args = match (&raw_body, sent.is_empty()) {
            (Some(blob), _) => format!(", new Uint8Array(await {blob}.arrayBuffer())"),
            (None, true) => String::new(),
            (None, false) => format!(", {{ {} }}", sent.join(", ")),
        };
        let asyncness = if raw_body.is_some() { "async " } else { "" };
        // A command refused before the host took its streams never ends them.
        let on_refusal = if streams.is_empty() {
            String::new()
        } else {
            format!(".catch(forgetStreams({}))", streams.join(", "))
        };
        body.push_str(&format!(
            "export {asyncness}function {}({}): Promise<{ok}> {{\n{setup}  return invoke<{ok}>(\"{name}\"{args}){on_refusal};\n}}\n",
            camel_case(name),
            params.join(", "),
        ));
    }
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let used: Vec<&str> = declared_types(bindings)
        .into_iter()
        .filter(|ty| {
            body.match_indices(ty).any(|(at, _)| {
                !body[..at].ends_with(is_word) && !body[at + ty.len()..].starts_with(is_word)
            })
        })
        .collect();
    let streams = if body.contains("openStream<") {
        "import { forgetStreams, openStream } from \"./windowEvents\";\n"
    } else {
        ""
    };
    format!(
        "// Generated from the Rust commands (window_command! in src-tauri) by src-tauri/src/bindings_tests.rs: do not edit.\n\
         // Regenerate with `UPDATE_BINDINGS=1 cargo test --workspace bindings`.\n\
         import {{ invoke }} from \"@tauri-apps/api/core\";\n\
         import type {{ {} }} from \"./bindings\";\n{streams}{body}",
        used.join(", ")
    )
}

/// What each window may call, from commands.list: its commands, nothing else (its events
/// come through `next_window_events`).
fn generate_capability(window: &str, description: &str, commands: &[Command]) -> String {
    let permissions: Vec<String> = commands
        .iter()
        .filter(|command| command.windows.iter().any(|w| w == window))
        .map(|command| format!("allow-{}", command.name.replace('_', "-")))
        .collect();
    let capability = serde_json::json!({
        "$schema": "../gen/schemas/desktop-schema.json",
        "identifier": format!("{window}-window"),
        "description": description,
        "windows": [window],
        "permissions": permissions,
    });
    let mut text = serde_json::to_string_pretty(&capability).unwrap_or_else(|err| panic!("{err}"));
    text.push('\n');
    text
}

/// Writes `generated` to `relative` (under src-tauri) with UPDATE_BINDINGS set; otherwise
/// fails unless the checked-in file is exactly it.
fn check_generated(relative: &str, generated: &str) {
    let path = crate::contract_tests::manifest_dir().join(relative);
    if std::env::var_os("UPDATE_BINDINGS").is_some() {
        std::fs::write(&path, generated).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is stale: run `UPDATE_BINDINGS=1 cargo test --workspace bindings` and commit it",
        path.display()
    );
}

#[test]
fn bindings_ts_is_generated_from_the_rust_types() {
    check_generated("../ui/src/lib/bindings.ts", &generate());
}

/// ui/src/lib/hidingCharacters.ts: the characters `conduit_core::text::hides` names, as a
/// regular expression's character class, so the window shows untrusted text by the host's
/// one list.
fn generate_hiding_characters() -> String {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for c in (0..=u32::from(char::MAX)).filter_map(char::from_u32) {
        if !conduit_host::core::text::hides(c) {
            continue;
        }
        let code = u32::from(c);
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == code => *end = code,
            _ => ranges.push((code, code)),
        }
    }
    let class: String = ranges
        .iter()
        .map(|&(start, end)| {
            if start == end {
                format!("\\\\u{{{start:x}}}")
            } else {
                format!("\\\\u{{{start:x}}}-\\\\u{{{end:x}}}")
            }
        })
        .collect();
    format!(
        "// Generated from conduit_core::text::hides by src-tauri/src/bindings_tests.rs: do not edit.\n\
         // Regenerate with `UPDATE_BINDINGS=1 cargo test --workspace bindings`.\n\n\
         /** The characters that hide or rearrange text rather than show as themselves (controls,\n \
         * bidi controls, format characters), as a character class for a `u`-flagged RegExp. */\n\
         export const HIDING_CHARACTER_CLASS = \"[{class}]\";\n"
    )
}

#[test]
fn bindings_hiding_characters_ts_is_generated_from_the_hosts_list() {
    let generated = generate_hiding_characters();
    assert!(generated.contains("\\\\u{202e}"), "{generated}");
    check_generated("../ui/src/lib/hidingCharacters.ts", &generated);
}

/// ui/src/lib/attachedLimits.ts: how much text one attached file may carry, and how large
/// a PDF may be, so that the page reads and stores no more than the host takes.
#[test]
fn bindings_attached_limits_ts_is_generated_from_core() {
    let generated = format!(
        "// Generated from conduit_core::attached by src-tauri/src/bindings_tests.rs: do not edit.\n\
         // Regenerate with `UPDATE_BINDINGS=1 cargo test --workspace bindings`.\n\n\
         /** The most text one attached file carries, in bytes. */\n\
         export const MAX_FILE_TEXT = {};\n\n\
         /** The most bytes one attached PDF may have. */\n\
         export const MAX_DOCUMENT_BYTES = {};\n",
        conduit_host::core::attached::MAX_FILE_TEXT,
        conduit_host::core::attached::MAX_DOCUMENT_BYTES
    );
    check_generated("../ui/src/lib/attachedLimits.ts", &generated);
}

#[test]
fn bindings_commands_ts_is_generated_from_the_command_signatures() {
    let cfg = config();
    let bindings = generate_types(&cfg);
    check_generated(
        "../ui/src/lib/commands.ts",
        &generate_commands(&shapes(&cfg), &bindings),
    );
}

#[test]
fn bindings_capabilities_are_generated_from_the_command_list() {
    let commands = commands();
    for (window, description) in WINDOWS.iter().zip(command_list::WINDOW_DESCRIPTIONS) {
        check_generated(
            &format!("capabilities/{window}-window.json"),
            &generate_capability(window, description, &commands),
        );
    }
}

#[test]
#[allow(clippy::needless_borrow)] // The borrow is what picks WindowArg over SpecialArg.
fn bindings_cover_each_argument_kind() {
    use crate::bindgen::{Arg, SpecialArg as _, WindowArg as _};
    use conduit_host::app::TurnEvent;
    let cfg = config();
    assert_eq!(
        (&Arg::<Option<i64>>::new()).kind(&cfg),
        ArgKind::Value("number | null".into())
    );
    assert_eq!(
        (&Arg::<tauri::State<'_, crate::commands::AppState>>::new()).kind(&cfg),
        ArgKind::Injected
    );
    assert_eq!(
        (&Arg::<tauri::Webview>::new()).kind(&cfg),
        ArgKind::Injected
    );
    assert_eq!(
        (&Arg::<crate::events::EventStream<TurnEvent>>::new()).kind(&cfg),
        ArgKind::Stream("TurnEvent".into())
    );
    assert_eq!(
        (&Arg::<tauri::ipc::Request<'_>>::new()).kind(&cfg),
        ArgKind::RawBody
    );
    let shape = CommandShape {
        name: "send_it",
        docs: vec![" Sends it."],
        args: vec![
            ("state", ArgKind::Injected),
            ("call_id", ArgKind::Value("string".into())),
            ("on_event", ArgKind::Stream("TurnEvent".into())),
        ],
        ok: "Started".into(),
    };
    let generated = generate_commands(
        &[shape],
        "export type Started = {};\nexport type TurnEvent = {};\n",
    );
    assert!(
        generated.contains(
            "import { invoke } from \"@tauri-apps/api/core\";\nimport type { Started, TurnEvent } from \"./bindings\";\nimport { forgetStreams, openStream } from \"./windowEvents\";\n\n/** Sends it. */\nexport function sendIt(callId: string, onEvent: (message: TurnEvent) => void): Promise<Started> {\n  const onEventStream = openStream<TurnEvent>(onEvent);\n  return invoke<Started>(\"send_it\", { callId, onEvent: onEventStream }).catch(forgetStreams(onEventStream));\n}\n"
        ),
        "{generated}"
    );
}
