//! `get_image`: a stored image by its content hash, for a client that wants to see what
//! a tool or a message showed earlier.

use std::sync::Arc;

use async_trait::async_trait;
use conduit_core::content::ResultPart;
use conduit_core::media::MediaStore;
use conduit_core::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{blocking, spec};

/// `get_image`: the stored image with a given hash.
pub struct GetImage {
    spec: ToolSpec,
    /// Where the images it returns are: the media folder for Conduit's own agent; for
    /// outside clients, the served media (what they were sent lately, a chart
    /// `render_chart` made for them, in memory) and then the folder.
    media: Arc<dyn MediaStore>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageArguments {
    hash: String,
}

/// Whether `text` is a hash as the media store names files: 64 lowercase hex digits.
fn is_media_hash(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl GetImage {
    pub fn new(media: Arc<dyn MediaStore>) -> Self {
        Self {
            spec: Self::spec(),
            media,
        }
    }

    pub fn spec() -> ToolSpec {
        spec(
            "get_image",
            "Get a stored image",
            "Return an image stored in Conduit's media store, by its SHA-256 hash (64 \
             lowercase hex digits), such as the hashes read_conversation lists for a \
             message's images or a chart render_chart made earlier.",
            json!({
                "type": "object",
                "properties": {
                    "hash": {
                        "type": "string",
                        "pattern": "^[0-9a-f]{64}$",
                        "description": "The image's SHA-256 hash, 64 lowercase hex digits."
                    }
                },
                "required": ["hash"],
                "additionalProperties": false
            }),
            None,
            true,
        )
    }
}

#[async_trait]
impl Tool for GetImage {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: ImageArguments = match super::arguments("get_image", arguments) {
            Ok(args) => args,
            Err(error) => return Ok(error),
        };
        let hash = args.hash;
        if !is_media_hash(&hash) {
            let shown: String = hash.chars().take(80).collect();
            return Ok(ToolOutput::error(format!(
                "{shown:?} is not an image hash: a hash is 64 lowercase hex digits (0-9, a-f)"
            )));
        }
        let media = self.media.clone();
        Ok(blocking("reading a stored image", move || {
            let Some(found) = media.reference(&hash) else {
                return ToolOutput::error(format!("no stored file has the hash {hash}"));
            };
            if !found.mime.starts_with("image/") {
                return ToolOutput::error(format!(
                    "the stored file {hash} is not an image (it is {})",
                    found.mime
                ));
            }
            let size = match (found.width, found.height) {
                (Some(w), Some(h)) => format!(", {w}×{h}"),
                _ => String::new(),
            };
            ToolOutput {
                parts: vec![
                    ResultPart::Text {
                        text: format!(
                            "The stored image {hash} ({}{size}, {} bytes).",
                            found.mime, found.bytes
                        ),
                    },
                    ResultPart::Image { media: found },
                ],
                is_error: false,
            }
        })
        .await)
    }
}
