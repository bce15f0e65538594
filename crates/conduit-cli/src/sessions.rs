//! `conduit sessions`: saved conversations: list, show, search, export, rename, delete.
//! What is saved (titles, answers, tool results, errors) was written by models, tools
//! and providers: it is printed through [`shown`] or [`shown_json`].

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Subcommand, ValueEnum};
use conduit_host::Host;
use conduit_host::core::content::{Block, ResultPart};
use conduit_host::store::export::Format;

use crate::Failure;
use crate::terminal::{self, say, shown, shown_json};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    Md,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Conversations: pinned ones first, then the most recent.
    List {
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// A conversation's messages.
    Show {
        id: String,
        /// Only the newest N messages.
        #[arg(long)]
        last: Option<usize>,
        #[arg(long)]
        json: bool,
    },
    /// Search: conversations whose title holds every word (at most 10, their `messageId`
    /// negative in --json), then messages and tool results, newest first.
    Search {
        query: String,
        /// At most this many hits (1 to 1000).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=1000))]
        limit: u16,
        #[arg(long)]
        json: bool,
    },
    /// Write a conversation as Markdown or JSON, images beside the file.
    Export {
        id: String,
        #[arg(long, value_enum, default_value = "md")]
        format: ExportFormat,
        #[arg(long, value_name = "DIR", default_value = ".")]
        out: PathBuf,
    },
    /// Give a conversation another title.
    Rename { id: String, title: String },
    /// Delete a conversation.
    Delete { id: String },
}

pub fn run(host: Arc<Host>, command: SessionsCommand) -> Result<u8, Failure> {
    match command {
        SessionsCommand::List { limit, json } => {
            let conversations = host.conversations(limit)?;
            if json {
                say!(
                    "{}",
                    shown_json(&serde_json::to_string_pretty(&conversations)?)
                )?;
            } else if conversations.is_empty() {
                say!("No conversations yet.")?;
            } else {
                for c in conversations {
                    // Pinned ones come first, as in the window's list, and say so.
                    let pinned = if c.pinned { "[pinned] " } else { "" };
                    say!(
                        "{}  {:>4} messages  {pinned}{}",
                        shown(&c.id),
                        c.message_count,
                        shown(&c.title)
                    )?;
                }
            }
        }
        SessionsCommand::Show { id, last, json } => {
            let (conversation, messages) = host.conversation(&id, last)?;
            if json {
                let value = serde_json::json!({"conversation": conversation, "messages": messages});
                say!("{}", shown_json(&serde_json::to_string_pretty(&value)?))?;
                return Ok(0);
            }
            say!("# {}\n", shown(&conversation.title))?;
            for message in messages {
                let status = match message.status {
                    conduit_host::store::MessageStatus::Complete => String::new(),
                    other => format!(" ({})", format!("{other:?}").to_lowercase()),
                };
                say!("[{:?}]{status}", message.role)?;
                for block in &message.blocks {
                    print_block(&host, block)?;
                }
                if let Some(error) = &message.error {
                    say!("  error: {}", shown(error))?;
                }
                say!()?;
            }
        }
        SessionsCommand::Search { query, limit, json } => {
            let mut hits = host.search(&query, usize::from(limit))?;
            for hit in &mut hits {
                hit.snippet = hit.snippet_bracketed();
            }
            if json {
                say!("{}", shown_json(&serde_json::to_string_pretty(&hits)?))?;
            } else {
                for hit in hits {
                    say!(
                        "{}  {}\n    {}",
                        shown(&hit.conversation_id),
                        shown(&hit.title),
                        shown(&hit.snippet_bracketed())
                    )?;
                }
            }
        }
        SessionsCommand::Export { id, format, out } => {
            let format = match format {
                ExportFormat::Md => Format::Markdown,
                ExportFormat::Json => Format::Json,
            };
            let file = host.export_conversation(&id, format, &out)?;
            // The file is named after the title, which a model may have written.
            say!("{}", shown(&file.display().to_string()))?;
        }
        SessionsCommand::Rename { id, title } => {
            host.rename_conversation(&id, &title)?;
            say!("Renamed {id}.")?;
        }
        SessionsCommand::Delete { id } => {
            host.delete_conversation(&id)?;
            say!("Deleted {id}.")?;
        }
    }
    Ok(0)
}

fn print_block(host: &Host, block: &Block) -> Result<(), terminal::OutputFailed> {
    match block {
        Block::Text { text } => say!("{}", shown(text))?,
        Block::Image { media } => say!(
            "  [image {}: {}]",
            shown(&media.mime),
            image_note(host, media)
        )?,
        Block::File { name, text } => say!("  [{}]", crate::terminal::file_note(name, text))?,
        Block::Document { name, media } => say!(
            "  [{}: {}]",
            crate::terminal::document_note(name, media.bytes),
            image_note(host, media)
        )?,
        Block::Reasoning { text, .. } if !text.is_empty() => {
            say!("  (reasoning) {}", shown(text))?;
        }
        Block::Reasoning { .. } => {}
        Block::ToolCall(call) => say!(
            "→ {} {}",
            shown(&call.name),
            shown(&call.arguments.to_string())
        )?,
        Block::ToolResult(result) => {
            let state = if result.is_error { "failed" } else { "done" };
            say!(
                "← {} {state}: {}",
                shown(&result.name),
                shown(&result.full_text())
            )?;
            for part in &result.parts {
                if let ResultPart::Image { media } = part {
                    say!(
                        "  [image {}: {}]",
                        shown(&media.mime),
                        image_note(host, media)
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// The image's file, or a placeholder when the file is gone.
fn image_note(host: &Host, media: &conduit_host::core::content::MediaRef) -> String {
    let path = host.media_path(media);
    if path.exists() {
        path.display().to_string()
    } else {
        // The reference comes from the history file, as its text does.
        format!("missing file {}", shown(&media.hash))
    }
}
