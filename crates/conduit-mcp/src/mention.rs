//! A server's resources and prompts as message content: a resource the user attaches (its
//! text, or its image or PDF stored as media; other binary content is refused, naming its
//! type),
//! a resource template filled in (RFC 6570 simple expansion), and a prompt's messages as
//! the conversation's own.

use base64::Engine;
use conduit_core::content::{Block, Message, Role, headed};
use conduit_core::media::MediaStore;
use rmcp::model::{ContentBlock, GetPromptResult, ReadResourceResult, ResourceContents};
use serde_json::{Map, Value};

/// The most text one attached resource, or one prompt, may bring into a message (all its
/// contents together: a server may split a resource into any number of parts): as much as
/// one attached file.
pub const MAX_ATTACHED_TEXT: usize = conduit_core::attached::MAX_FILE_TEXT;
/// The most images one attached resource, or one prompt, may bring into a message.
pub const MAX_ATTACHED_IMAGES: usize = 20;
/// The most blocks one attached resource, or one prompt, may bring into a message (each
/// note of a part left out is one too).
pub const MAX_ATTACHED_BLOCKS: usize = 1000;
/// The most of a server's address or type a note about it quotes.
const QUOTED_CHARS: usize = 200;

/// What one resource or prompt has brought so far, against its caps.
struct Brought {
    what: String,
    text: usize,
    images: usize,
    blocks: usize,
}

impl Brought {
    fn new(what: &str) -> Self {
        Self {
            what: quoted(what),
            text: 0,
            images: 0,
            blocks: 0,
        }
    }

    /// A text block of `text`, counted whole (with the address that heads it) against the
    /// caps.
    fn text_block(&mut self, text: String) -> Result<Block, MentionError> {
        self.block()?;
        self.text(text.len())?;
        Ok(Block::text(text))
    }

    fn block(&mut self) -> Result<(), MentionError> {
        self.blocks += 1;
        if self.blocks > MAX_ATTACHED_BLOCKS {
            return Err(MentionError(format!(
                "{} has more than {MAX_ATTACHED_BLOCKS} parts, more than a message takes",
                self.what
            )));
        }
        Ok(())
    }

    fn text(&mut self, len: usize) -> Result<(), MentionError> {
        self.text = self.text.saturating_add(len);
        if self.text > MAX_ATTACHED_TEXT {
            return Err(MentionError(format!(
                "{} is more than {} KB of text, more than a message takes",
                self.what,
                MAX_ATTACHED_TEXT / 1024
            )));
        }
        Ok(())
    }

    fn image(&mut self) -> Result<(), MentionError> {
        self.block()?;
        self.images += 1;
        if self.images > MAX_ATTACHED_IMAGES {
            return Err(MentionError(format!(
                "{} has more than {MAX_ATTACHED_IMAGES} images and PDFs, more than a message takes",
                self.what
            )));
        }
        Ok(())
    }
}

/// What an argument being typed belongs to, for the server's completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completed<'a> {
    /// A resource template, by its URI template.
    Template(&'a str),
    /// A prompt, by its name.
    Prompt(&'a str),
}

/// Why a resource or prompt cannot go into a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MentionError(pub String);

/// The blocks a read resource becomes in the user's message: each text content as text
/// headed by its URI, each image stored as media, each PDF stored and attached under its
/// URI's last part.
pub fn resource_blocks(
    read: ReadResourceResult,
    media: &dyn MediaStore,
) -> Result<Vec<Block>, MentionError> {
    let mut blocks = Vec::new();
    let mut brought = Brought::new(match read.contents.first() {
        Some(
            ResourceContents::TextResourceContents { uri, .. }
            | ResourceContents::BlobResourceContents { uri, .. },
        ) => uri.as_str(),
        _ => "the resource",
    });
    for contents in read.contents {
        match contents {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                blocks.push(brought.text_block(headed("Resource", &uri, &text))?);
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => {
                let mime = mime_type.unwrap_or_else(|| "application/octet-stream".into());
                if conduit_core::attached::is_pdf_mime(&mime) {
                    brought.image()?;
                    blocks.push(stored_document(media, &blob, &uri)?);
                    continue;
                }
                if !mime.starts_with("image/") {
                    return Err(MentionError(format!(
                        "{} is {}: only text, images and PDFs go into a message",
                        quoted(&uri),
                        quoted(&mime)
                    )));
                }
                brought.image()?;
                blocks.push(Block::Image {
                    media: store_image(media, &blob, &mime, &quoted(&uri))?,
                });
            }
            _ => {
                return Err(MentionError(
                    "the resource has content of a kind Conduit does not know".into(),
                ));
            }
        }
    }
    if blocks.is_empty() {
        return Err(MentionError("the resource is empty".into()));
    }
    Ok(blocks)
}

/// A resource's PDF stored and attached under the last part of its URI
/// ([`conduit_core::content::resource_document_name`]), as the user's own PDF is checked.
fn stored_document(media: &dyn MediaStore, base64: &str, uri: &str) -> Result<Block, MentionError> {
    let what = quoted(uri);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(base64.trim())
        .map_err(|e| MentionError(format!("{what}: the PDF is not valid base64: {e}")))?;
    if !conduit_core::attached::is_pdf(&bytes) {
        return Err(MentionError(format!(
            "{what} is declared a PDF but does not start as one"
        )));
    }
    conduit_core::attached::document_fits(&what, bytes.len() as u64)
        .map_err(|e| MentionError(e.to_string()))?;
    let stored = media
        .put(&bytes, Some(conduit_core::attached::PDF_MIME))
        .map_err(|e| MentionError(format!("{what}: the PDF cannot be used: {e}")))?;
    let name = conduit_core::content::resource_document_name(uri);
    conduit_core::attached::check_document(&name, stored)
        .map(Block::from)
        .map_err(|e| MentionError(format!("{what}: {e}")))
}

/// Stores an image; the store checks the bytes (the declared type is a hint).
fn store_image(
    media: &dyn MediaStore,
    base64: &str,
    mime: &str,
    what: &str,
) -> Result<conduit_core::content::MediaRef, MentionError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(base64.trim())
        .map_err(|e| MentionError(format!("{what}: the image is not valid base64: {e}")))?;
    let stored = media
        .put(&bytes, Some(mime))
        .map_err(|e| MentionError(format!("{what}: the image cannot be used: {e}")))?;
    // A declared type may say PDF (or audio): what goes in as an image is an image.
    if !stored.mime.starts_with("image/") {
        return Err(MentionError(format!(
            "{what}: the image's bytes are {}",
            stored.mime
        )));
    }
    Ok(stored)
}

/// A prompt's messages as the conversation's own: text, images (stored), embedded text
/// resources and links; consecutive messages of one role are joined.
pub fn prompt_messages(
    prompt: GetPromptResult,
    media: &dyn MediaStore,
) -> Result<Vec<Message>, MentionError> {
    let mut out: Vec<Message> = Vec::new();
    let mut brought = Brought::new("the prompt");
    for message in prompt.messages {
        let role = match message.role {
            rmcp::model::Role::User => Role::User,
            rmcp::model::Role::Assistant => Role::Assistant,
        };
        let block = match message.content {
            ContentBlock::Text(text) => brought.text_block(text.text)?,
            ContentBlock::Image(image) if role == Role::User => {
                brought.image()?;
                Block::Image {
                    media: store_image(media, &image.data, &image.mime_type, "the prompt's image")?,
                }
            }
            ContentBlock::Image(_) => brought
                .text_block("[an image the prompt gives the assistant is not kept]".into())?,
            ContentBlock::Resource(embedded) => match embedded.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    brought.text_block(headed("Resource", &uri, &text))?
                }
                ResourceContents::BlobResourceContents { uri, mime_type, .. } => brought
                    .text_block(format!(
                        "[resource {} ({}) is not text]",
                        quoted(&uri),
                        quoted(&mime_type.unwrap_or_default())
                    ))?,
                _ => brought
                    .text_block("[an embedded resource of a kind Conduit does not know]".into())?,
            },
            ContentBlock::ResourceLink(link) => {
                brought.text_block(format!("[resource {}]", quoted(&link.uri)))?
            }
            ContentBlock::Audio(_) => {
                brought.text_block("[audio from the prompt is not kept]".into())?
            }
            _ => brought.text_block("[content of a kind Conduit does not know]".into())?,
        };
        match out.last_mut() {
            Some(last) if last.role == role => last.blocks.push(block),
            _ => out.push(Message {
                role,
                blocks: vec![block],
            }),
        }
    }
    if out.is_empty() {
        return Err(MentionError("the prompt has no messages".into()));
    }
    Ok(out)
}

/// A server's address or type as a note quotes it: its start, if it is long, saying so.
fn quoted(text: &str) -> String {
    crate::client::server_words(text, QUOTED_CHARS)
}

/// The names a URI template asks for (`{name}`, `{+name}`, `{#name}`...), in order.
pub fn template_arguments(template: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        let Some(end) = rest[start..].find('}') else {
            break;
        };
        let inner = &rest[start + 1..start + end];
        for name in inner
            .trim_start_matches(['+', '#', '.', '/', ';', '?', '&'])
            .split(',')
        {
            let name = name.trim_end_matches('*');
            if !name.is_empty() && !names.iter().any(|n| n == name) {
                names.push(name.to_owned());
            }
        }
        rest = &rest[start + end + 1..];
    }
    names
}

/// The longest URI a template is filled in to. The template and the values come from the
/// page (a script there can send any), and each `{name}` repeats its value: unbounded,
/// a small request would expand to gigabytes.
pub const MAX_EXPANDED_URI: usize = 16 * 1024;

/// Fills in a URI template's `{name}` (each value percent-encoded; `{+name}` keeps
/// reserved characters such as `/`); a name without a value is an error naming it, and so
/// is a URI that would be longer than [`MAX_EXPANDED_URI`].
pub fn expand_template(
    template: &str,
    values: &Map<String, Value>,
) -> Result<String, MentionError> {
    let too_long = || {
        MentionError(format!(
            "the template filled in is longer than {} KB, more than a resource's address takes",
            MAX_EXPANDED_URI / 1024
        ))
    };
    if template.len() > MAX_EXPANDED_URI {
        return Err(too_long());
    }
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find('}')
            .ok_or_else(|| MentionError(format!("the template {template} has an open brace")))?;
        let inner = &rest[start + 1..start + end];
        let (reserved, name) = match inner.strip_prefix('+') {
            Some(name) => (true, name),
            None => (false, inner),
        };
        let value = match values.get(name) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => return Err(MentionError(format!("fill in {name}"))),
        };
        for c in value.chars() {
            let keep = c.is_ascii_alphanumeric()
                || "-._~".contains(c)
                || (reserved && ":/?#[]@!$&'()*+,;=".contains(c));
            if keep {
                out.push(c);
            } else {
                let mut buf = [0u8; 4];
                for byte in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{byte:02X}"));
                }
            }
            if out.len() > MAX_EXPANDED_URI {
                return Err(too_long());
            }
        }
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    if out.len() > MAX_EXPANDED_URI {
        return Err(too_long());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use conduit_core::testing::MemoryMedia;
    use serde_json::json;

    fn png() -> String {
        let mut out = Vec::new();
        image::DynamicImage::ImageRgb8(image::RgbImage::from_pixel(3, 2, image::Rgb([9, 9, 9])))
            .write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
            .unwrap();
        base64::engine::general_purpose::STANDARD.encode(out)
    }

    #[test]
    fn a_text_resource_becomes_text_headed_by_its_uri_and_an_image_is_stored() {
        let media = MemoryMedia::default();
        let read: ReadResourceResult = serde_json::from_value(json!({"contents": [
            {"uri": "file:///notes.md", "mimeType": "text/markdown", "text": "# Notes"},
            {"uri": "file:///plot.png", "mimeType": "image/png", "blob": png()}
        ]}))
        .unwrap();
        let blocks = resource_blocks(read, &media).unwrap();
        assert_eq!(
            blocks[0],
            Block::text("Resource file:///notes.md:\n\n# Notes")
        );
        assert!(matches!(&blocks[1], Block::Image { media } if media.mime == "image/png"));
    }

    /// A server's PDF (a drive's report) is stored and attached under its URI's last part,
    /// decoded; one too large is refused saying so.
    #[test]
    fn a_pdf_resource_is_attached_under_its_name() {
        let media = MemoryMedia::default();
        let paper = conduit_core::testing::pdf(8, 400_000);
        let read: ReadResourceResult = serde_json::from_value(json!({"contents": [{
            "uri": "drive://files/Q3%20report.pdf?rev=4",
            "mimeType": "application/pdf",
            "blob": base64::engine::general_purpose::STANDARD.encode(&paper),
        }]}))
        .unwrap();
        let blocks = resource_blocks(read, &media).unwrap();
        match &blocks[..] {
            [
                Block::Document {
                    name,
                    media: stored,
                },
            ] => {
                assert_eq!(name, "Q3 report.pdf");
                assert_eq!(media.load(stored).unwrap(), paper);
            }
            other => panic!("{other:?}"),
        }
        let mut huge = conduit_core::testing::pdf(1, 0);
        huge.resize(33 * 1024 * 1024, b' ');
        let read: ReadResourceResult = serde_json::from_value(json!({"contents": [{
            "uri": "drive://files/scan.pdf",
            "mimeType": "application/pdf",
            "blob": base64::engine::general_purpose::STANDARD.encode(&huge),
        }]}))
        .unwrap();
        let err = resource_blocks(read, &media).unwrap_err();
        assert!(
            err.0
                .ends_with("is 33 MiB; the largest PDF Conduit attaches is 32 MiB"),
            "{err}"
        );
    }

    #[test]
    fn binary_too_long_broken_and_empty_resources_are_refused_saying_why() {
        let media = MemoryMedia::default();
        let read = |contents: Value| -> ReadResourceResult {
            serde_json::from_value(json!({ "contents": contents })).unwrap()
        };
        for (contents, says) in [
            (
                json!([{"uri": "x:/a.zip", "mimeType": "application/zip", "blob": "AAAA"}]),
                "x:/a.zip is application/zip: only text, images and PDFs go into a message",
            ),
            (
                json!([{"uri": "x:/a.pdf", "mimeType": "application/pdf", "blob": "AAAA"}]),
                "x:/a.pdf is declared a PDF but does not start as one",
            ),
            (
                json!([{"uri": "x:/big", "text": "a".repeat(MAX_ATTACHED_TEXT + 1)}]),
                "more than a message takes",
            ),
            (
                json!([{"uri": "x:/i.png", "mimeType": "image/png", "blob": "***"}]),
                "not valid base64",
            ),
            (json!([]), "empty"),
        ] {
            let err = resource_blocks(read(contents), &media).unwrap_err();
            assert!(err.0.contains(says), "{err}");
        }
    }

    #[test]
    fn a_resource_split_into_many_parts_is_held_to_one_resources_caps() {
        let media = MemoryMedia::default();
        let parts: Vec<Value> = (0..500)
            .map(|n| json!({"uri": format!("x:/part{n}"), "text": "a".repeat(100 * 1024)}))
            .collect();
        let read: ReadResourceResult =
            serde_json::from_value(json!({ "contents": parts })).unwrap();
        let err = resource_blocks(read, &media).unwrap_err();
        assert!(err.0.contains("x:/part0 is more than 512 KB"), "{err}");
        let images: Vec<Value> = (0..=MAX_ATTACHED_IMAGES)
            .map(|n| json!({"uri": format!("x:/{n}.png"), "mimeType": "image/png", "blob": png()}))
            .collect();
        let read: ReadResourceResult =
            serde_json::from_value(json!({ "contents": images })).unwrap();
        let err = resource_blocks(read, &media).unwrap_err();
        assert!(err.0.contains("more than 20 images"), "{err}");
        // Up to the caps, all of it goes in.
        let parts: Vec<Value> = (0..5)
            .map(|n| json!({"uri": format!("x:/part{n}"), "text": "a".repeat(100 * 1024)}))
            .collect();
        let read: ReadResourceResult =
            serde_json::from_value(json!({ "contents": parts })).unwrap();
        assert_eq!(resource_blocks(read, &media).unwrap().len(), 5);
    }

    /// What a server names counts as what it sends: an address of megabytes heading an
    /// empty text, links and notes past the caps, an address quoted in an error.
    #[test]
    fn a_servers_addresses_and_notes_count_against_the_caps() {
        let media = MemoryMedia::default();
        let long_uri = format!("x:/{}", "u".repeat(MAX_ATTACHED_TEXT));
        let read: ReadResourceResult =
            serde_json::from_value(json!({"contents": [{"uri": long_uri, "text": ""}]})).unwrap();
        let err = resource_blocks(read, &media).unwrap_err();
        assert!(err.0.contains("more than 512 KB"), "{err}");
        assert!(
            err.0.len() < 400,
            "the address is quoted cut: {} bytes",
            err.0.len()
        );
        let read: ReadResourceResult = serde_json::from_value(json!({"contents": [
            {"uri": long_uri, "mimeType": "application/pdf", "blob": "AAAA"}
        ]}))
        .unwrap();
        let err = resource_blocks(read, &media).unwrap_err();
        assert!(err.0.len() < 600, "{} bytes", err.0.len());

        let link = |uri: &str| json!({"role": "user", "content": {"type": "resource_link", "uri": uri, "name": "n"}});
        let prompt: GetPromptResult =
            serde_json::from_value(json!({ "messages": [link(&long_uri)] })).unwrap();
        let messages = prompt_messages(prompt, &media).unwrap();
        assert!(
            messages[0].text().len() < 300,
            "{}",
            messages[0].text().len()
        );
        let audio = json!({"role": "user", "content": {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}});
        let prompt: GetPromptResult = serde_json::from_value(json!({
            "messages": vec![audio; MAX_ATTACHED_BLOCKS + 1]
        }))
        .unwrap();
        let err = prompt_messages(prompt, &media).unwrap_err();
        assert!(err.0.contains("more than 1000 parts"), "{err}");
    }

    #[test]
    fn a_prompt_past_the_caps_is_refused_saying_why() {
        let media = MemoryMedia::default();
        let text =
            |n: usize| json!({"role": "user", "content": {"type": "text", "text": "p".repeat(n)}});
        let prompt: GetPromptResult = serde_json::from_value(json!({"messages": [
            text(300 * 1024),
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "file:///a", "text": "r".repeat(300 * 1024)}}}
        ]}))
        .unwrap();
        let err = prompt_messages(prompt, &media).unwrap_err();
        assert!(err.0.contains("the prompt is more than 512 KB"), "{err}");
        let image = json!({"role": "user", "content": {"type": "image", "data": png(), "mimeType": "image/png"}});
        let prompt: GetPromptResult = serde_json::from_value(json!({
            "messages": vec![image; MAX_ATTACHED_IMAGES + 1]
        }))
        .unwrap();
        let err = prompt_messages(prompt, &media).unwrap_err();
        assert!(err.0.contains("more than 20 images"), "{err}");
        let prompt: GetPromptResult =
            serde_json::from_value(json!({"messages": [text(400 * 1024)]})).unwrap();
        assert_eq!(prompt_messages(prompt, &media).unwrap().len(), 1);
    }

    #[test]
    fn a_template_is_filled_in_to_a_bounded_address() {
        let huge = json!({"a": " ".repeat(200_000)});
        let err = expand_template(&"{a}".repeat(200_000), huge.as_object().unwrap()).unwrap_err();
        assert!(err.0.contains("longer than 16 KB"), "{err}");
        let err = expand_template("x:/{a}", huge.as_object().unwrap()).unwrap_err();
        assert!(err.0.contains("longer than 16 KB"), "{err}");
        let long = json!({"a": "b".repeat(MAX_EXPANDED_URI - 10)});
        let uri = expand_template("x:/{a}", long.as_object().unwrap()).unwrap();
        assert_eq!(uri.len(), MAX_EXPANDED_URI - 7);
        // What follows the last value counts too.
        let tail = format!("x:/{{a}}{}", "t".repeat(10));
        let err = expand_template(&tail, long.as_object().unwrap()).unwrap_err();
        assert!(err.0.contains("longer than 16 KB"), "{err}");
    }

    #[test]
    fn a_prompts_messages_keep_their_roles_joined_by_role() {
        let media = MemoryMedia::default();
        let prompt: GetPromptResult = serde_json::from_value(json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "Review this:"}},
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "file:///a.rs", "text": "fn main() {}"}}},
            {"role": "assistant", "content": {"type": "text", "text": "Sure."}},
            {"role": "user", "content": {"type": "image", "data": png(), "mimeType": "image/png"}}
        ]}))
        .unwrap();
        let messages = prompt_messages(prompt, &media).unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[0].role, Role::User);
        assert_eq!(
            messages[0].blocks,
            [
                Block::text("Review this:"),
                Block::text("Resource file:///a.rs:\n\nfn main() {}")
            ]
        );
        assert_eq!(messages[1].role, Role::Assistant);
        assert!(matches!(messages[2].blocks[0], Block::Image { .. }));
    }

    #[test]
    fn templates_name_their_arguments_and_expand_with_encoding() {
        assert_eq!(
            template_arguments("repo://{owner}/{repo}/issues{?state}"),
            ["owner", "repo", "state"]
        );
        let values = json!({"owner": "a b", "repo": "x/y", "path": "src/lib.rs"});
        let values = values.as_object().unwrap();
        assert_eq!(
            expand_template("repo://{owner}/{repo}", values).unwrap(),
            "repo://a%20b/x%2Fy"
        );
        assert_eq!(
            expand_template("file:///{+path}", values).unwrap(),
            "file:///src/lib.rs"
        );
        assert_eq!(
            expand_template("test://static/resource/{id}", values)
                .unwrap_err()
                .0,
            "fill in id"
        );
    }
}
