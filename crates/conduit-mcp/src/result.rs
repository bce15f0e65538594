//! MCP tool results into the core's rich result: text, images and audio (checked and
//! stored as media; the bytes decide), resource links, embedded resources, structured
//! content, and the error flag. Text or structured content over [`LONG_TEXT`], in one block
//! or in all of a result's blocks together, is stored as a file and carried as a preview.

use base64::Engine;
use conduit_core::content::{LONG_TEXT, MODEL_TEXT_LIMIT, ResultPart, text_start};
use conduit_core::media::MediaStore;
use conduit_core::tool::ToolOutput;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// The most content blocks of one result kept: each goes to the window, the history and
/// the model, and real results have a handful. The rest become one note.
pub const MAX_RESULT_BLOCKS: usize = 1000;

/// The most images, audio clips and binary resources of one result checked and stored:
/// each is decoded (an image of 64 million pixels takes a second and 256 MiB), a few at a
/// time in the process. The rest become notes.
pub const MAX_RESULT_MEDIA: usize = 64;

/// How much of a server's declared media type a note quotes.
const QUOTED_MIME: usize = 100;

/// Converts a result; media that cannot be used becomes a note saying why.
pub fn convert(result: CallToolResult, media: &dyn MediaStore) -> ToolOutput {
    let mut parts = Vec::new();
    let blocks = result.content.len();
    let mut media_left = MAX_RESULT_MEDIA;
    let mut take_media = || {
        let left = media_left > 0;
        media_left = media_left.saturating_sub(1);
        left
    };
    let long_address_note = || ResultPart::Text {
        text:
            "[an embedded resource left out: its address is longer than Conduit keeps of a result]"
                .into(),
    };
    let media_note = || ResultPart::Text {
        text: format!(
            "[content left out: Conduit keeps at most {MAX_RESULT_MEDIA} images, audio clips and files of one result]"
        ),
    };
    // Text kept inline so far: the limit holds for the result, not each block, so that a
    // result of many blocks just under it does not carry them all to the page and the model.
    let mut inline = 0usize;
    let mut fits = |len: usize| {
        let fits = inline.saturating_add(len) <= LONG_TEXT;
        if fits {
            inline += len;
        }
        fits
    };
    // The starts of long texts shown beside their files share one budget too: a result of
    // a thousand long blocks must not carry a thousand previews.
    let mut previews_left = MODEL_TEXT_LIMIT;
    for block in result.content.into_iter().take(MAX_RESULT_BLOCKS) {
        parts.push(match block {
            ContentBlock::Text(text) if !fits(text.text.len()) => {
                if take_media() {
                    long_text(
                        media,
                        text.text.as_bytes(),
                        "text/plain",
                        &mut previews_left,
                    )
                } else {
                    media_note()
                }
            }
            ContentBlock::Text(text) => ResultPart::Text { text: text.text },
            ContentBlock::Image(_) | ContentBlock::Audio(_) if !take_media() => media_note(),
            ContentBlock::Image(image) => {
                match store_as(media, &image.data, &image.mime_type, "image/") {
                    Ok(media) => ResultPart::Image { media },
                    Err(note) => ResultPart::Text { text: note },
                }
            }
            ContentBlock::Audio(audio) => {
                match store_as(media, &audio.data, &audio.mime_type, "audio/") {
                    Ok(media) => ResultPart::Audio { media },
                    Err(note) => ResultPart::Text { text: note },
                }
            }
            // A link is names and an address: one longer than a result's inline text
            // is not a link anyone reads.
            ContentBlock::ResourceLink(link)
                if !fits(
                    link.uri.len()
                        + link.name.len()
                        + link.description.as_ref().map_or(0, String::len)
                        + link.mime_type.as_ref().map_or(0, String::len),
                ) =>
            {
                ResultPart::Text {
                    text: "[a resource link left out: it is longer than Conduit keeps of a result]"
                        .into(),
                }
            }
            ContentBlock::ResourceLink(link) => ResultPart::ResourceLink {
                uri: link.uri,
                name: Some(link.name),
                mime: link.mime_type,
                description: link.description,
            },
            ContentBlock::Resource(embedded) => match embedded.resource {
                ResourceContents::TextResourceContents { text, .. } if !fits(text.len()) => {
                    if take_media() {
                        long_text(media, text.as_bytes(), "text/plain", &mut previews_left)
                    } else {
                        media_note()
                    }
                }
                ResourceContents::TextResourceContents { uri, mime_type, .. }
                    if !fits(uri.len() + mime_type.as_ref().map_or(0, String::len)) =>
                {
                    long_address_note()
                }
                ResourceContents::TextResourceContents {
                    uri,
                    mime_type,
                    text,
                    ..
                } => ResultPart::Resource {
                    uri,
                    mime: mime_type,
                    text: Some(text),
                    media: None,
                },
                ResourceContents::BlobResourceContents { uri, mime_type, .. }
                    if !fits(uri.len() + mime_type.as_ref().map_or(0, String::len)) =>
                {
                    long_address_note()
                }
                ResourceContents::BlobResourceContents { .. } if !take_media() => media_note(),
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => {
                    let declared = mime_type.clone().unwrap_or_default();
                    ResultPart::Resource {
                        uri,
                        mime: mime_type,
                        text: None,
                        // Images, audio and PDFs are kept; other binary content is described.
                        media: store(media, &blob, &declared).ok(),
                    }
                }
                _ => ResultPart::Text {
                    text: "[an embedded resource of a kind Conduit does not know]".into(),
                },
            },
            _ => ResultPart::Text {
                text: "[content of a kind Conduit does not know]".into(),
            },
        });
    }
    if blocks > MAX_RESULT_BLOCKS {
        parts.push(ResultPart::Text {
            text: format!(
                "[{} more content blocks left out: Conduit keeps at most {MAX_RESULT_BLOCKS} of one result]",
                blocks - MAX_RESULT_BLOCKS
            ),
        });
    }
    if let Some(value) = result.structured_content {
        parts.push(if !fits(conduit_core::content::json_size(&value)) {
            let json = json_without_the_value(value);
            long_text(media, &json, "application/json", &mut previews_left)
        } else {
            ResultPart::Structured { value }
        });
    }
    ToolOutput {
        parts,
        is_error: result.is_error.unwrap_or(false),
    }
}

/// Marks a result of a tool with an MCP Apps view: a [`ResultPart::View`] naming it. The
/// structured content moves to the view when the result has text for the model (the
/// spec's split: `content` for the model, `structuredContent` for the view); a result
/// with only structured content keeps it for the model too.
pub fn give_view(output: &mut ToolOutput, uri: &str) {
    let has_text = output
        .parts
        .iter()
        .any(|p| matches!(p, ResultPart::Text { .. } | ResultPart::LongText { .. }));
    let structured = output
        .parts
        .iter()
        .position(|p| matches!(p, ResultPart::Structured { .. }));
    let structured = match structured {
        Some(at) if has_text => match output.parts.remove(at) {
            ResultPart::Structured { value } => Some(value),
            _ => None,
        },
        Some(at) => match &output.parts[at] {
            ResultPart::Structured { value } => Some(value.clone()),
            _ => None,
        },
        None => None,
    };
    output.parts.push(ResultPart::View {
        uri: uri.to_owned(),
        structured,
    });
}

/// [`convert`] on a blocking thread: checking and storing images decodes them.
pub async fn convert_off_thread(
    result: CallToolResult,
    media: std::sync::Arc<dyn MediaStore>,
) -> Result<ToolOutput, String> {
    tokio::task::spawn_blocking(move || convert(result, media.as_ref()))
        .await
        .map_err(|e| format!("reading the result failed: {e}"))
}

/// A long text as a stored file and its start, of at most `previews_left` bytes (taken from
/// it); if it cannot be stored, just its start.
fn long_text(
    media: &dyn MediaStore,
    text: &[u8],
    mime: &str,
    previews_left: &mut usize,
) -> ResultPart {
    let whole = String::from_utf8_lossy(text);
    let preview = text_start(&whole, *previews_left).to_owned();
    *previews_left -= preview.len();
    match media.put(text, Some(mime)) {
        Ok(media) => ResultPart::LongText { preview, media },
        Err(e) => ResultPart::Text {
            text: format!(
                "{preview}\n[The output was {} bytes; only its start is kept: {e}]",
                text.len()
            ),
        },
    }
}

/// `value` as compact JSON, never in memory beside it: written to an unlinked temporary
/// file, the value dropped, then read back (in memory if no file can be made).
fn json_without_the_value(value: serde_json::Value) -> Vec<u8> {
    use std::io::{Read, Seek, Write};
    let written = tempfile::tempfile().and_then(|mut file| {
        let mut writer = std::io::BufWriter::with_capacity(64 * 1024, &mut file);
        serde_json::to_writer(&mut writer, &value)?;
        writer.flush()?;
        drop(writer);
        Ok(file)
    });
    match written {
        Ok(mut file) => {
            drop(value);
            let mut json = Vec::new();
            let read = file
                .seek(std::io::SeekFrom::Start(0))
                .and_then(|_| file.read_to_end(&mut json));
            match read {
                Ok(_) => json,
                Err(error) => {
                    format!("[the structured content could not be read back: {error}]").into_bytes()
                }
            }
        }
        Err(error) => {
            tracing::warn!("structured content is converted in memory: no temporary file: {error}");
            serde_json::to_vec(&value).unwrap_or_default()
        }
    }
}

fn store(
    media: &dyn MediaStore,
    base64_data: &str,
    declared: &str,
) -> Result<conduit_core::content::MediaRef, String> {
    // The type is the server's: quoted in a note, only its start.
    let quoted = text_start(declared, QUOTED_MIME);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(base64_data.trim())
        .map_err(|e| format!("[{quoted} content omitted: not valid base64 ({e})]"))?;
    media
        .put(&bytes, Some(declared))
        .map_err(|e| format!("[{quoted} content omitted: {e}]"))
}

/// [`store`], for content that must be of one kind (`image/` or `audio/`): bytes of
/// another (a PDF, an image called audio) are not kept as that content.
fn store_as(
    media: &dyn MediaStore,
    base64_data: &str,
    declared: &str,
    kind: &str,
) -> Result<conduit_core::content::MediaRef, String> {
    let stored = store(media, base64_data, declared)?;
    if stored.mime.starts_with(kind) {
        return Ok(stored);
    }
    Err(format!(
        "[{} content omitted: the bytes are {}]",
        text_start(declared, QUOTED_MIME),
        stored.mime
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use conduit_core::testing::MemoryMedia;

    #[test]
    fn a_views_structured_content_goes_to_the_view_when_the_model_has_text() {
        let value = serde_json::json!({"time": "12:00"});
        let mut with_text = ToolOutput {
            parts: vec![
                ResultPart::Text {
                    text: "It is noon".into(),
                },
                ResultPart::Structured {
                    value: value.clone(),
                },
            ],
            is_error: false,
        };
        give_view(&mut with_text, "ui://clock/view");
        assert_eq!(
            with_text.parts,
            [
                ResultPart::Text {
                    text: "It is noon".into()
                },
                ResultPart::View {
                    uri: "ui://clock/view".into(),
                    structured: Some(value.clone())
                },
            ]
        );

        let mut only_structured = ToolOutput {
            parts: vec![ResultPart::Structured {
                value: value.clone(),
            }],
            is_error: false,
        };
        give_view(&mut only_structured, "ui://clock/view");
        assert_eq!(
            only_structured.parts,
            [
                ResultPart::Structured {
                    value: value.clone()
                },
                ResultPart::View {
                    uri: "ui://clock/view".into(),
                    structured: Some(value)
                },
            ]
        );
    }

    /// Many blocks each under the limit are held to it together: once the result's inline
    /// text would pass it, the next blocks are files with a preview.
    #[test]
    fn blocks_past_the_limit_together_become_files_too() {
        let block = "y".repeat(LONG_TEXT / 2 + 1);
        let result = CallToolResult::success(vec![
            ContentBlock::text(block.clone()),
            ContentBlock::text(block.clone()),
            ContentBlock::text("short"),
            ContentBlock::text(block.clone()),
        ]);
        let kept = MemoryMedia::default();
        let output = convert(result, &kept);
        assert!(matches!(&output.parts[0], ResultPart::Text { text } if *text == block));
        assert!(
            matches!(&output.parts[1], ResultPart::LongText { media, .. } if media.bytes == block.len() as u64),
            "{:?}",
            output.parts[1]
        );
        // What still fits stays inline.
        assert_eq!(
            output.parts[2],
            ResultPart::Text {
                text: "short".into()
            }
        );
        assert!(matches!(&output.parts[3], ResultPart::LongText { .. }));
        assert_eq!(kept.kept().len(), 2);
    }

    /// A result past the inline budget in many blocks just under the preview's size: the
    /// previews share one budget and the files count as the result's files.
    #[test]
    fn many_long_blocks_share_one_preview_budget_and_the_files_cap() {
        let block = "p".repeat(MODEL_TEXT_LIMIT);
        let mut content = vec![ContentBlock::text("q".repeat(LONG_TEXT))];
        content.extend((0..999).map(|_| ContentBlock::text(block.clone())));
        let kept = MemoryMedia::default();
        let output = convert(CallToolResult::success(content), &kept);
        let previews: usize = output
            .parts
            .iter()
            .map(|part| match part {
                ResultPart::LongText { preview, .. } => preview.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(previews, MODEL_TEXT_LIMIT);
        assert_eq!(kept.kept().len(), MAX_RESULT_MEDIA);
        let inline: usize = output
            .parts
            .iter()
            .map(|part| match part {
                ResultPart::Text { text } => text.len(),
                _ => 0,
            })
            .sum();
        assert!(inline <= LONG_TEXT + 1000 * 200, "{inline}");
    }

    #[test]
    fn long_text_and_structured_content_become_files_with_a_preview() {
        let long = "z".repeat(LONG_TEXT + 1);
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("short"),
            ContentBlock::text(long.clone()),
        ]);
        result.structured_content = Some(serde_json::json!({ "result": long }));
        let kept = MemoryMedia::default();
        let output = convert(result, &kept);
        assert_eq!(
            output.parts[0],
            ResultPart::Text {
                text: "short".into()
            }
        );
        let ResultPart::LongText { preview, media } = &output.parts[1] else {
            panic!("{:?}", output.parts[1])
        };
        assert_eq!(preview.len(), MODEL_TEXT_LIMIT);
        assert_eq!(
            (media.mime.as_str(), media.bytes),
            ("text/plain", long.len() as u64)
        );
        let ResultPart::LongText { media, .. } = &output.parts[2] else {
            panic!("{:?}", output.parts[2])
        };
        assert_eq!(media.mime, "application/json");
        let files = kept.kept();
        assert_eq!(files[0], long.as_bytes());
        let json: serde_json::Value = serde_json::from_slice(&files[1]).unwrap();
        assert_eq!(json["result"], long.as_str());
    }

    #[test]
    fn a_result_of_too_many_blocks_or_images_keeps_its_first_and_says_so() {
        let image = ContentBlock::image("iVBORw0KGgo=", "image/png");
        let mut content = vec![image; MAX_RESULT_MEDIA + 2];
        content.extend((0..MAX_RESULT_BLOCKS).map(|i| ContentBlock::text(format!("{i}"))));
        let total = content.len();
        let kept = MemoryMedia::default();
        let output = convert(CallToolResult::success(content), &kept);
        assert_eq!(
            kept.kept().len(),
            MAX_RESULT_MEDIA,
            "only the first are stored"
        );
        assert_eq!(output.parts.len(), MAX_RESULT_BLOCKS + 1);
        assert!(matches!(
            &output.parts[MAX_RESULT_MEDIA],
            ResultPart::Text { text } if text.contains("at most 64 images, audio clips and files")
        ));
        assert_eq!(
            output.parts.last(),
            Some(&ResultPart::Text {
                text: format!(
                    "[{} more content blocks left out: Conduit keeps at most {MAX_RESULT_BLOCKS} of one result]",
                    total - MAX_RESULT_BLOCKS
                )
            })
        );
    }

    #[test]
    fn a_link_or_an_address_longer_than_a_results_text_is_left_out() {
        let huge = "d".repeat(LONG_TEXT + 1);
        let mut link = rmcp::model::Resource::new("file:///a", "a");
        link.description = Some(huge.clone());
        let result = CallToolResult::success(vec![
            ContentBlock::resource_link(link),
            ContentBlock::text("after"),
        ]);
        let output = convert(result, &MemoryMedia::default());
        assert_eq!(
            output.parts,
            [
                ResultPart::Text {
                    text: "[a resource link left out: it is longer than Conduit keeps of a result]"
                        .into()
                },
                ResultPart::Text {
                    text: "after".into()
                },
            ]
        );
        // A server's declared type is quoted in a note only by its start.
        let bad = ContentBlock::image("not base64!", huge);
        let output = convert(CallToolResult::success(vec![bad]), &MemoryMedia::default());
        let ResultPart::Text { text } = &output.parts[0] else {
            panic!("{:?}", output.parts[0])
        };
        assert!(text.len() < 300, "{} bytes", text.len());
    }
}
