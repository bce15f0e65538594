//! Tools for end-to-end tests of the agent loop, offered only when `CONDUIT_TEST_TOOLS=1`:
//! an echo, an image from a file, and a sleep that honours cancellation.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use conduit_core::content::ResultPart;
use conduit_core::media::MediaStore;
use conduit_core::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSpec};
use serde_json::{Value, json};

/// Environment variable that turns the test tools on.
pub const ENV: &str = "CONDUIT_TEST_TOOLS";

/// Whether this process should offer the test tools.
pub fn enabled() -> bool {
    std::env::var(ENV).is_ok_and(|v| v == "1")
}

/// Adds the test tools to `registry`.
pub fn register(registry: &mut ToolRegistry, media: Arc<dyn MediaStore>) {
    registry.register(Arc::new(Echo(spec(
        "test__echo",
        "Echo the text back.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
    ))));
    registry.register(Arc::new(ImageFile {
        spec: spec(
            "test__image",
            "Return the image stored in a file.",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        ),
        media,
    }));
    registry.register(Arc::new(Sleep(spec(
        "test__sleep",
        "Wait for some milliseconds.",
        json!({"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]}),
    ))));
}

fn spec(name: &str, description: &str, input_schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        title: None,
        description: description.to_owned(),
        input_schema,
        output_schema: None,
        annotations: Default::default(),
    }
}

struct Echo(ToolSpec);

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, arguments: Value, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        let text = arguments["text"]
            .as_str()
            .ok_or_else(|| ToolError("`text` must be a string".into()))?;
        Ok(ToolOutput::text(text))
    }
}

struct ImageFile {
    spec: ToolSpec,
    media: Arc<dyn MediaStore>,
}

#[async_trait]
impl Tool for ImageFile {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        let path = arguments["path"]
            .as_str()
            .ok_or_else(|| ToolError("`path` must be a string".into()))?;
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|e| ToolError(format!("cannot read {path}: {e}")))?;
        let media = self
            .media
            .put(&bytes, None)
            .map_err(|e| ToolError(e.to_string()))?;
        Ok(ToolOutput {
            parts: vec![
                ResultPart::Text {
                    text: format!("The image in {path}."),
                },
                ResultPart::Image { media },
            ],
            is_error: false,
        })
    }
}

struct Sleep(ToolSpec);

#[async_trait]
impl Tool for Sleep {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let ms = arguments["ms"].as_u64().unwrap_or(0);
        // Says it is running, so a test can cancel a call known to have started.
        (context.progress)(conduit_core::tool::Progress {
            progress: 0.0,
            total: Some(ms as f64),
            message: Some(format!("sleeping {ms} ms")),
        });
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(ToolOutput::text(format!("slept {ms} ms"))),
            () = context.cancel.cancelled() => Err(ToolError("cancelled".into())),
        }
    }
}
