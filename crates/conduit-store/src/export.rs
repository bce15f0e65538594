//! A conversation exported as Markdown or JSON, the media its blocks reference (images,
//! audio, long outputs, binary resources) copied into a folder beside the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use conduit_core::content::{Block, MediaRef, ResultPart, Role};
use serde_json::json;

use crate::history::{Store, StoreError, StoredMessage};

/// The export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Markdown,
    Json,
}

impl Format {
    /// The file name extension of an export in this format.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Markdown => "md",
            Format::Json => "json",
        }
    }
}

/// The file name an export of conversation `id` gets by default: its title as a slug and
/// the start of its id.
pub fn default_file_name(title: &str, id: &str, format: Format) -> String {
    format!(
        "{}-{}.{}",
        slug(title),
        id.get(..8).unwrap_or(id),
        format.extension()
    )
}

/// Writes conversation `id` into `out_dir` under its default name; returns the file
/// written.
pub fn export(
    store: &Store,
    id: &str,
    format: Format,
    out_dir: &Path,
) -> Result<PathBuf, StoreError> {
    let conversation = store.conversation(id)?;
    let file = out_dir.join(default_file_name(&conversation.title, id, format));
    export_as(store, id, format, &file)
}

/// Writes conversation `id` to `file` (replacing it), its images and long outputs in a
/// folder `<file stem>-media` beside it; returns the file written.
pub fn export_as(
    store: &Store,
    id: &str,
    format: Format,
    file: &Path,
) -> Result<PathBuf, StoreError> {
    let conversation = store.conversation(id)?;
    let messages = store.messages(id, None)?;
    let out_dir = file.parent().unwrap_or(Path::new("."));
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "conversation".to_owned());
    let media_dir_name = format!("{stem}-media");
    let io = |path: &Path, source: std::io::Error| StoreError::Io {
        path: path.display().to_string(),
        source,
    };
    // A folder the export creates is private; one the user chose keeps its permissions.
    conduit_files::create_private_dir(out_dir).map_err(|e| io(out_dir, e))?;

    // Copy each referenced file once; a missing file is noted, not fatal.
    let mut files: BTreeMap<String, Option<String>> = BTreeMap::new();
    for media in messages
        .iter()
        .flat_map(|m| m.blocks.iter())
        .flat_map(Block::media)
    {
        if files.contains_key(&media.hash) {
            continue;
        }
        let source = store.media_path(media);
        let name = source
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| media.hash.clone());
        let target_dir = out_dir.join(&media_dir_name);
        media_folder(&target_dir).map_err(|e| io(&target_dir, e))?;
        let copied = std::fs::read(&source).is_ok_and(|bytes| {
            conduit_files::write_new_atomically(
                &target_dir.join(&name),
                &bytes,
                conduit_files::PRIVATE_FILE_MODE,
            )
            .is_ok()
        });
        files.insert(
            media.hash.clone(),
            copied.then(|| format!("{media_dir_name}/{name}")),
        );
    }

    let text = match format {
        Format::Markdown => markdown(&conversation.title, &messages, &files),
        Format::Json => {
            let value = json!({
                "conversation": conversation,
                "messages": messages,
                "media": files,
            });
            serde_json::to_string_pretty(&value).map_err(StoreError::Encode)?
        }
    };
    conduit_files::write_new_atomically(file, text.as_bytes(), conduit_files::PRIVATE_FILE_MODE)
        .map_err(|e| io(file, e))?;
    Ok(file.to_owned())
}

/// Makes the folder beside an export for its media, private; a folder already there (an
/// earlier export to the same name) is used as it is, and a symbolic link never: in a
/// shared folder another user could have planted it to lead the files, and a change of
/// permissions, into a folder of the user's own.
fn media_folder(dir: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(found) if found.file_type().is_symlink() => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it is a symbolic link; export under another name",
        )),
        Ok(found) if found.is_dir() => Ok(()),
        Ok(_) => Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "something other than a folder has that name; export under another name",
        )),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            conduit_files::create_private_dir(dir)
        }
        Err(error) => Err(error),
    }
}

fn markdown(
    title: &str,
    messages: &[StoredMessage],
    files: &BTreeMap<String, Option<String>>,
) -> String {
    let link =
        |kind: &str, media: &MediaRef| match files.get(&media.hash).and_then(|f| f.as_deref()) {
            Some(path) if kind == "image" => format!("![image]({path})"),
            Some(path) => format!("[{kind}]({path})"),
            None => format!(
                "*[{kind} {} missing]*",
                media.hash.get(..12).unwrap_or(&media.hash)
            ),
        };
    markdown_with(title, messages, &link)
}

/// Conversation `id` as Markdown, each referenced media written by `link(kind, media)`
/// (e.g. as a URI another program can read it at).
pub fn conversation_markdown(
    store: &Store,
    id: &str,
    link: &dyn Fn(&str, &MediaRef) -> String,
) -> Result<String, StoreError> {
    let conversation = store.conversation(id)?;
    let messages = store.messages(id, None)?;
    Ok(markdown_with(&conversation.title, &messages, link))
}

fn markdown_with(
    title: &str,
    messages: &[StoredMessage],
    link: &dyn Fn(&str, &MediaRef) -> String,
) -> String {
    let mut out = format!("# {title}\n");
    for message in messages {
        let who = match message.role {
            Role::User => "You",
            Role::Assistant => "Assistant",
            Role::Tool => "Tool results",
        };
        out.push_str(&format!("\n## {who}\n\n"));
        for block in &message.blocks {
            match block {
                Block::Text { text } => out.push_str(&format!("{text}\n\n")),
                Block::Image { media } => {
                    out.push_str(&format!("{}\n\n", link("image", media)));
                }
                Block::Reasoning { text, .. } if !text.is_empty() => {
                    for line in text.lines() {
                        out.push_str(&format!("> {line}\n"));
                    }
                    out.push('\n');
                }
                Block::Reasoning { .. } => {}
                Block::ToolCall(call) => out.push_str(&format!(
                    "**Tool call** `{}`\n\n```json\n{}\n```\n\n",
                    call.name,
                    serde_json::to_string_pretty(&call.arguments).unwrap_or_default()
                )),
                Block::ToolResult(result) => {
                    let state = if result.is_error { "failed" } else { "result" };
                    out.push_str(&format!("**`{}` {state}**\n\n", result.name));
                    let text = result.full_text();
                    if !text.is_empty() {
                        out.push_str(&format!("```\n{text}\n```\n\n"));
                    }
                    for part in &result.parts {
                        let kind = match part {
                            ResultPart::Image { .. } => "image",
                            ResultPart::Audio { .. } => "audio",
                            ResultPart::LongText { .. } => "whole output",
                            _ => "resource",
                        };
                        if let Some(media) = part.media() {
                            out.push_str(&format!("{}\n\n", link(kind, media)));
                        }
                    }
                }
            }
        }
        if message.status != crate::history::MessageStatus::Complete {
            out.push_str(&format!("*({:?})*\n\n", message.status).to_lowercase());
        }
    }
    out
}

fn slug(title: &str) -> String {
    let slug: String = title
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let slug = slug
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    if slug.is_empty() {
        "conversation".to_owned()
    } else {
        slug.chars().take(40).collect()
    }
}
