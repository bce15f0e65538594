//! MCP tool results into the core's rich result: text, images and audio (checked and
//! stored as media; the bytes decide), resource links, embedded resources, structured
//! content, and the error flag.

use base64::Engine;
use conduit_core::content::ResultPart;
use conduit_core::media::MediaStore;
use conduit_core::tool::ToolOutput;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// Converts a result; media that cannot be used becomes a note saying why.
pub fn convert(result: CallToolResult, media: &dyn MediaStore) -> ToolOutput {
    let mut parts = Vec::new();
    for block in result.content {
        parts.push(match block {
            ContentBlock::Text(text) => ResultPart::Text { text: text.text },
            ContentBlock::Image(image) => match store(media, &image.data, &image.mime_type) {
                Ok(media) => ResultPart::Image { media },
                Err(note) => ResultPart::Text { text: note },
            },
            ContentBlock::Audio(audio) => match store(media, &audio.data, &audio.mime_type) {
                Ok(media) => ResultPart::Audio { media },
                Err(note) => ResultPart::Text { text: note },
            },
            ContentBlock::ResourceLink(link) => ResultPart::ResourceLink {
                uri: link.uri,
                name: Some(link.name),
                mime: link.mime_type,
                description: link.description,
            },
            ContentBlock::Resource(embedded) => match embedded.resource {
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
                        // Images and audio are kept; other binary content is described.
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
    if let Some(value) = result.structured_content {
        parts.push(ResultPart::Structured { value });
    }
    ToolOutput {
        parts,
        is_error: result.is_error.unwrap_or(false),
    }
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

fn store(
    media: &dyn MediaStore,
    base64_data: &str,
    declared: &str,
) -> Result<conduit_core::content::MediaRef, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(base64_data.trim())
        .map_err(|e| format!("[{declared} content omitted: not valid base64 ({e})]"))?;
    media
        .put(&bytes, Some(declared))
        .map_err(|e| format!("[{declared} content omitted: {e}]"))
}
