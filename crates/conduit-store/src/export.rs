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
/// the end of its id. Not the start: ids are UUIDv7, whose first 8 digits are the time
/// and stay the same for a minute, so two conversations of one title started within it
/// (a script's loop) were exported to one file, the second replacing the first.
pub fn default_file_name(title: &str, id: &str, format: Format) -> String {
    format!(
        "{}-{}.{}",
        slug(title),
        id.get(id.len().saturating_sub(8)..).unwrap_or(id),
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
    let instructions = store.instructions(id)?;
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
    let mut used: BTreeMap<String, &MediaRef> = BTreeMap::new();
    for media in messages
        .iter()
        .flat_map(|m| m.blocks.iter())
        .flat_map(Block::media)
    {
        used.entry(media.hash.clone()).or_insert(media);
    }
    let mut files: BTreeMap<String, Option<String>> = BTreeMap::new();
    if !used.is_empty() {
        let target_dir = out_dir.join(&media_dir_name);
        let held = media_folder(&target_dir).map_err(|e| io(&target_dir, e))?;
        for (hash, media) in used {
            let source = store.media_path(media);
            let name = source
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| hash.clone());
            let copied = std::fs::read(&source).is_ok_and(|bytes| {
                held.write_new_atomically(&name, &bytes, conduit_files::PRIVATE_FILE_MODE)
                    .is_ok()
            });
            files.insert(hash, copied.then(|| format!("{media_dir_name}/{name}")));
        }
    }

    let text = match format {
        Format::Markdown => markdown(
            &conversation.title,
            instructions.as_deref(),
            &messages,
            &files,
        ),
        Format::Json => {
            let value = json!({
                "conversation": conversation,
                "instructions": instructions,
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

/// Makes the folder beside an export for its media, private, and holds it open: the files
/// go through the handle. A folder already there (an earlier export to the same name) is
/// used as it is, and a symbolic link never: in a shared folder another user could have
/// planted it, or swap it in while the export runs, to lead the files into a folder of the
/// user's own.
fn media_folder(dir: &Path) -> std::io::Result<conduit_files::HeldFolder> {
    match std::fs::symlink_metadata(dir) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            conduit_files::create_private_dir(dir)?;
        }
        Err(error) => return Err(error),
        Ok(_) => {}
    }
    conduit_files::HeldFolder::open(dir).map_err(|error| match error.kind() {
        std::io::ErrorKind::InvalidInput => std::io::Error::new(
            error.kind(),
            "it is a symbolic link; export under another name",
        ),
        std::io::ErrorKind::AlreadyExists => std::io::Error::new(
            error.kind(),
            "something other than a folder has that name; export under another name",
        ),
        _ => error,
    })
}

/// A relative path as a Markdown link's destination: a byte other than letters, digits,
/// `-._~` and `/` percent-encoded, so a file name the user chose with spaces or brackets
/// ("Q3 plans (1).md") still makes a link a viewer follows.
fn link_destination(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn markdown(
    title: &str,
    instructions: Option<&str>,
    messages: &[StoredMessage],
    files: &BTreeMap<String, Option<String>>,
) -> String {
    let link =
        |kind: &str, media: &MediaRef| match files.get(&media.hash).and_then(|f| f.as_deref()) {
            Some(path) if kind == "image" => format!("![image]({})", link_destination(path)),
            Some(path) => format!("[{kind}]({})", link_destination(path)),
            None => format!(
                "*[{kind} {} missing]*",
                media.hash.get(..12).unwrap_or(&media.hash)
            ),
        };
    markdown_with(title, instructions, messages, &link)
}

/// Conversation `id` as Markdown, each referenced media written by `link(kind, media)`
/// (e.g. as a URI another program can read it at), for another model to read: its
/// messages as the model reads them (not its instructions, nor what was replaced).
pub fn conversation_markdown(
    store: &Store,
    id: &str,
    link: &dyn Fn(&str, &MediaRef) -> String,
) -> Result<String, StoreError> {
    let conversation = store.conversation(id)?;
    // Without what was replaced (an answer written again, a message changed): no model
    // reads those again. An export keeps them, marked.
    let messages: Vec<StoredMessage> = store
        .messages(id, None)?
        .into_iter()
        .filter(|message| message.status != crate::history::MessageStatus::Replaced)
        .collect();
    // Without the conversation's instructions: this Markdown goes to other models (Conduit's
    // own tools and prompts, outside MCP clients), which must not read one conversation's
    // system prompt as orders of their own. An export carries them.
    Ok(markdown_with(&conversation.title, None, &messages, link))
}

/// The Markdown of a conversation: its title, the instructions it gives the model (its
/// system prompt, which shaped every answer), then its messages.
fn markdown_with(
    title: &str,
    instructions: Option<&str>,
    messages: &[StoredMessage],
    link: &dyn Fn(&str, &MediaRef) -> String,
) -> String {
    let mut out = format!("# {}\n", escape_html_and_images(&one_line(title)));
    if let Some(instructions) = instructions.filter(|text| !text.trim().is_empty()) {
        out.push_str(&format!(
            "\n## Instructions\n\n{}\n\n",
            inert_markdown(instructions)
        ));
    }
    for message in messages {
        let who = match message.role {
            Role::User => "You",
            Role::Assistant => "Assistant",
            Role::Tool => "Tool results",
        };
        out.push_str(&format!("\n## {who}\n\n"));
        for block in &message.blocks {
            match block {
                Block::Text { text } => out.push_str(&format!("{}\n\n", inert_markdown(text))),
                Block::Image { media } => {
                    out.push_str(&format!("{}\n\n", link("image", media)));
                }
                Block::File { name, text } => out.push_str(&format!(
                    "**File** {}\n\n{}\n\n",
                    inline_code(name),
                    fenced("", text)
                )),
                Block::Document { name, media } => out.push_str(&format!(
                    "**PDF** {} {}\n\n",
                    inline_code(name),
                    link("PDF", media)
                )),
                Block::Reasoning { text, .. } if !text.is_empty() => {
                    for line in line_ending_normalised(text).lines() {
                        out.push_str(&format!("> {}\n", inert_line(line)));
                    }
                    out.push('\n');
                }
                Block::Reasoning { .. } => {}
                Block::ToolCall(call) => out.push_str(&format!(
                    "**Tool call** {}\n\n{}\n\n",
                    inline_code(&call.name),
                    fenced(
                        "json",
                        &serde_json::to_string_pretty(&call.arguments).unwrap_or_default()
                    )
                )),
                Block::ToolResult(result) => {
                    let state = if result.is_error { "failed" } else { "result" };
                    out.push_str(&format!("**{} {state}**\n\n", inline_code(&result.name)));
                    let text = result.full_text();
                    if !text.is_empty() {
                        out.push_str(&format!("{}\n\n", fenced("", &text)));
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

// What a conversation holds was written by a model, a tool or a page: in the Markdown it
// must stay text inside its turn. Otherwise a message could write its own `## You` turn
// (which a later model reading the conversation, as Conduit's own tools give it, takes for
// the user's), close the fence around a tool's output, or load a remote image (a URL
// carrying what it read) when the export is opened in a viewer.

/// `text` on one line: line breaks and other control characters become spaces.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `\r\n` and a lone `\r` (a line ending to CommonMark, not to `str::lines`) as `\n`.
fn line_ending_normalised(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// A message's own Markdown, kept as Markdown but unable to leave its turn: no line of it
/// starts a heading (ATX `#`, or a setext underline under a paragraph) or an HTML block,
/// no image of it loads (`![…](…)` and `<img` are written as text), and a code fence it
/// opens and leaves open is closed at its end, so the turns after it stay turns.
fn inert_markdown(text: &str) -> String {
    let text = line_ending_normalised(text);
    let mut out = Vec::new();
    // The fence a code block of the message opened: its character and length.
    let mut open_fence: Option<(char, usize)> = None;
    for line in text.split('\n') {
        match open_fence {
            // Only a fence at the start of a line opens code here: an indented one may
            // belong to a list item, which a line that is not indented ends, so the lines
            // after it would be no code. An indented fence is escaped like any line (its
            // code may show a backslash here and there).
            None => match fence_of(line) {
                Some(fence) if line.starts_with(['`', '~']) => {
                    open_fence = Some(fence);
                    out.push(line.to_owned());
                }
                _ => out.push(inert_line(line)),
            },
            // A closing fence may be indented up to three spaces.
            Some((c, n)) => {
                if fence_of(line).is_some_and(|(d, m)| d == c && m >= n) && is_bare_fence(line) {
                    open_fence = None;
                }
                out.push(line.to_owned());
            }
        }
    }
    if let Some((c, n)) = open_fence {
        out.push(std::iter::repeat_n(c, n).collect());
    }
    out.join("\n")
}

/// One line of a message outside code: a heading, setext underline, HTML block start or
/// indented code fence escaped with a backslash, and images and links written as text.
fn inert_line(line: &str) -> String {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    let line = if let Some((fence_char, length)) = fence_of(line) {
        // An indented fence opens code for a viewer but not here (see `inert_markdown`):
        // each of its characters escaped, it opens nothing anywhere.
        let escaped = format!("\\{fence_char}").repeat(length);
        format!("{}{escaped}{}", &line[..indent], &rest[length..])
    } else if indent <= 3
        && (rest.starts_with('#')
            || rest.starts_with('<')
            || (!rest.is_empty() && rest.trim_end().chars().all(|c| c == '=' || c == '-')))
    {
        format!("{}\\{rest}", &line[..indent])
    } else {
        line.to_owned()
    };
    escape_html_and_images(&line)
}

/// `![` as `\![`, every `[` as `\[` and every `<` that could start a tag as `\<`: text,
/// not an image or an element (`<img>`, `<video poster>`, `<svg><image>`, `<iframe>`) a
/// viewer fetches, nor a link (`[x](javascript:…)`, `[r]: file:///…`) a click follows.
/// A `!`, `[` or `<` after an odd run of backslashes is escaped already; after an even one
/// the backslashes escape each other, so it still needs its own.
fn escape_html_and_images(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(['!', '<', '[']) {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let backslashes = before.len() - before.trim_end_matches('\\').len();
        let already = backslashes % 2 == 1;
        let opens = from.starts_with("![")
            || from.starts_with('[')
            || (from.starts_with('<')
                && from[1..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '/' | '!' | '?')));
        if opens && !already {
            out.push('\\');
        }
        let first = from.chars().next().map_or(1, char::len_utf8);
        out.push_str(&from[..first]);
        rest = &from[first..];
    }
    out.push_str(rest);
    out
}

/// A code fence opening or closing at `line` (up to three spaces in): its character and
/// length.
fn fence_of(line: &str) -> Option<(char, usize)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let c = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = rest.chars().take_while(|x| *x == c).count();
    // A backtick fence's info string cannot hold a backtick.
    (n >= 3 && !(c == '`' && rest[n..].contains('`'))).then_some((c, n))
}

/// Whether a fence line is only the fence (a closing fence has no info string): up to
/// three spaces, the fence, then only spaces and tabs, as CommonMark reads it (not
/// `str::trim`, which would take a no-break space after a fence for a closing one).
fn is_bare_fence(line: &str) -> bool {
    let rest = line.trim_start_matches(' ').trim_end_matches([' ', '\t']);
    rest.chars()
        .all(|c| c == rest.chars().next().unwrap_or('`'))
}

/// `text` in a fenced code block whose fence is longer than any run of backticks in it,
/// so nothing in it closes the block.
fn fenced(info: &str, text: &str) -> String {
    let fence = "`".repeat(longest_backtick_run(text).max(2) + 1);
    format!("{fence}{info}\n{}\n{fence}", line_ending_normalised(text))
}

/// `text` as inline code whose delimiters are longer than any run of backticks in it.
fn inline_code(text: &str) -> String {
    let text = one_line(text);
    let ticks = "`".repeat(longest_backtick_run(&text) + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{text}{pad}{ticks}")
}

fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
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
