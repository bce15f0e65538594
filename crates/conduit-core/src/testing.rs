//! Test fakes every crate shares, each written once: a scripted provider, an echo tool
//! and an in-memory media store. Compiled for this crate's tests and, with the `testing`
//! feature, for other crates' tests; never in a release.

// Test code: a broken script is a failed test, said loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use async_trait::async_trait;
use futures::{StreamExt, stream};
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::content::MediaRef;
use crate::media::{MediaError, MediaStore};
use crate::provider::{
    EventStream, ModelInfo, ModelRequest, Provider, ProviderError, ProviderEvent,
};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

/// What a scripted provider streams for one request.
pub type Script = Vec<Result<ProviderEvent, ProviderError>>;

/// A provider that replays one script per request, in order, and records the requests.
pub struct ScriptedProvider {
    scripts: Mutex<Vec<(Script, bool)>>,
    requests: Mutex<Vec<ModelRequest>>,
}

impl ScriptedProvider {
    pub fn new(scripts: Vec<Script>) -> Arc<Self> {
        Self::with_hangs(scripts.into_iter().map(|s| (s, false)).collect())
    }

    /// Each script may end by hanging (never closing the stream).
    pub fn with_hangs(scripts: Vec<(Script, bool)>) -> Arc<Self> {
        Arc::new(Self {
            scripts: Mutex::new(scripts.into_iter().rev().collect()),
            requests: Mutex::new(Vec::new()),
        })
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().clone()
    }
}

#[async_trait]
impl Provider for ScriptedProvider {
    fn protocol(&self) -> &'static str {
        "scripted"
    }

    async fn stream(&self, request: ModelRequest) -> Result<EventStream, ProviderError> {
        self.requests.lock().push(request);
        let (script, hang) = self
            .scripts
            .lock()
            .pop()
            .expect("the test scripted enough responses");
        let events = stream::iter(script);
        if hang {
            Ok(events.chain(stream::pending()).boxed())
        } else {
            Ok(events.boxed())
        }
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        Ok(vec![])
    }
}

/// A tool spec named `name` that takes any object.
pub fn tool_spec(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        title: None,
        description: format!("test tool {name}"),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: Default::default(),
    }
}

/// A tool that answers with its `text` argument.
pub struct Echo(pub ToolSpec);

impl Echo {
    pub fn named(name: &str) -> Arc<Self> {
        Arc::new(Self(tool_spec(name)))
    }
}

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, arguments: Value, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(
            arguments["text"].as_str().unwrap_or_default().to_owned(),
        ))
    }
}

/// A media store in memory: what is put can be loaded back, under a made-up hash.
#[derive(Default)]
pub struct MemoryMedia {
    kept: Mutex<Vec<(MediaRef, Vec<u8>)>>,
}

impl MemoryMedia {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Everything put so far, in order.
    pub fn kept(&self) -> Vec<Vec<u8>> {
        self.kept.lock().iter().map(|(_, b)| b.clone()).collect()
    }
}

impl MediaStore for MemoryMedia {
    fn put(&self, bytes: &[u8], declared_mime: Option<&str>) -> Result<MediaRef, MediaError> {
        let mut kept = self.kept.lock();
        let media = MediaRef {
            hash: format!("{:064x}", kept.len() + 1),
            mime: declared_mime
                .unwrap_or("application/octet-stream")
                .to_owned(),
            bytes: bytes.len() as u64,
            width: None,
            height: None,
        };
        kept.push((media.clone(), bytes.to_vec()));
        Ok(media)
    }

    fn load(&self, media: &MediaRef) -> Result<Vec<u8>, MediaError> {
        self.kept
            .lock()
            .iter()
            .find(|(kept, _)| kept.hash == media.hash)
            .map(|(_, bytes)| bytes.clone())
            .ok_or_else(|| MediaError::Missing {
                hash: media.hash.clone(),
            })
    }
}
