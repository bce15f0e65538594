//! Conduit's MCP server in process: a catalog of core tools served by `ToolServer` and
//! reached through the one `McpRuntime`, as the agent reaches it: exposed names, calls,
//! an image that arrives as stored media, errors as error results, progress,
//! cancellation that stops the tool, and the tool list following the catalog.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use conduit_core::content::ResultPart;
use conduit_core::media::MediaStore;
use conduit_core::tool::{
    Progress, Tool, ToolAnnotations, ToolContext, ToolError, ToolOutput, ToolSpec,
};
use conduit_mcp::runtime::{McpRuntime, RuntimeOptions};
use conduit_mcp::server::{Catalog, CatalogChange, ToolServer};
use conduit_store::FileMediaStore;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

type Behaviour = Box<
    dyn Fn(Value, ToolContext) -> futures::future::BoxFuture<'static, Result<ToolOutput, ToolError>>
        + Send
        + Sync,
>;

struct TestTool {
    spec: ToolSpec,
    run: Behaviour,
}

#[async_trait]
impl Tool for TestTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        (self.run)(arguments, context).await
    }
}

fn tool(name: &str, run: Behaviour) -> Arc<dyn Tool> {
    Arc::new(TestTool {
        spec: ToolSpec {
            name: name.into(),
            title: Some(format!("The {name} tool")),
            description: format!("{name} for tests"),
            input_schema: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
            output_schema: None,
            annotations: ToolAnnotations {
                read_only_hint: Some(true),
                ..Default::default()
            },
        },
        run,
    })
}

struct TestCatalog {
    tools: Mutex<Vec<Arc<dyn Tool>>>,
    changes: broadcast::Sender<CatalogChange>,
}

#[async_trait]
impl Catalog for TestCatalog {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.lock().clone()
    }

    fn changes(&self) -> Option<broadcast::Receiver<CatalogChange>> {
        Some(self.changes.subscribe())
    }
}

fn png() -> Vec<u8> {
    let image = image::RgbImage::from_pixel(3, 2, image::Rgb([200, 10, 10]));
    let mut bytes = std::io::Cursor::new(Vec::new());
    image.write_to(&mut bytes, image::ImageFormat::Png).unwrap();
    bytes.into_inner()
}

struct Fixture {
    runtime: McpRuntime,
    media: Arc<dyn MediaStore>,
    catalog: Arc<TestCatalog>,
    stopped: Arc<AtomicBool>,
    started: Arc<Notify>,
    stopped_signal: Arc<Notify>,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let media: Arc<dyn MediaStore> = Arc::new(FileMediaStore::new(dir.path().join("media")));
    let picture = media.put(&png(), Some("image/png")).unwrap();
    let stopped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Notify::new());
    let stopped_signal = Arc::new(Notify::new());
    let tools = vec![
        tool(
            "echo",
            Box::new(|args, _| {
                Box::pin(async move {
                    Ok(ToolOutput::text(format!(
                        "echo: {}",
                        args["text"].as_str().unwrap_or("")
                    )))
                })
            }),
        ),
        tool(
            "picture",
            Box::new(move |_, _| {
                let media = picture.clone();
                Box::pin(async move {
                    Ok(ToolOutput {
                        parts: vec![
                            ResultPart::Text {
                                text: "a red picture".into(),
                            },
                            ResultPart::Image { media },
                            ResultPart::Structured {
                                value: json!({"width": 3}),
                            },
                        ],
                        is_error: false,
                    })
                })
            }),
        ),
        tool(
            "fails",
            Box::new(|_, _| Box::pin(async { Err(ToolError("the disk is on fire".into())) })),
        ),
        tool(
            "counts",
            Box::new(|_, context: ToolContext| {
                Box::pin(async move {
                    for step in 1..=3 {
                        (context.progress)(Progress {
                            progress: f64::from(step),
                            total: Some(3.0),
                            message: Some(format!("step {step}")),
                        });
                    }
                    Ok(ToolOutput::text("counted"))
                })
            }),
        ),
        {
            let (stopped, started, signal) =
                (stopped.clone(), started.clone(), stopped_signal.clone());
            tool(
                "waits",
                Box::new(move |_, context: ToolContext| {
                    let (stopped, started, signal) =
                        (stopped.clone(), started.clone(), signal.clone());
                    Box::pin(async move {
                        started.notify_one();
                        context.cancel.cancelled().await;
                        stopped.store(true, Ordering::SeqCst);
                        signal.notify_one();
                        Ok(ToolOutput::text("stopped"))
                    })
                }),
            )
        },
    ];
    let (changes, _) = broadcast::channel(8);
    let catalog = Arc::new(TestCatalog {
        tools: Mutex::new(tools),
        changes,
    });
    let file = dir.path().join("mcp.json");
    std::fs::write(&file, r#"{"mcpServers": {}}"#).unwrap();
    let server = ToolServer::new(catalog.clone(), media.clone());
    let options = RuntimeOptions::new(&file, Duration::from_secs(20))
        .with_in_process("conduit", Arc::new(server));
    let runtime = McpRuntime::start(options).await.unwrap();
    Fixture {
        runtime,
        media,
        catalog,
        stopped,
        started,
        stopped_signal,
        _dir: dir,
    }
}

/// A tool context: the progress it saw (and a signal for each), and its cancel token.
fn context_with_progress() -> (
    ToolContext,
    Arc<Mutex<Vec<Progress>>>,
    Arc<Notify>,
    CancellationToken,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let signal = Arc::new(Notify::new());
    let (sink, notify) = (seen.clone(), signal.clone());
    let cancel = CancellationToken::new();
    let context = ToolContext::new(
        cancel.clone(),
        Arc::new(move |p| {
            sink.lock().push(p);
            notify.notify_one();
        }),
    );
    (context, seen, signal, cancel)
}

fn context() -> (ToolContext, Arc<Mutex<Vec<Progress>>>, CancellationToken) {
    let (context, seen, _, cancel) = context_with_progress();
    (context, seen, cancel)
}

impl Fixture {
    fn tool(&self, name: &str) -> Arc<conduit_mcp::tool::McpTool> {
        self.runtime
            .tools(self.media.clone(), &|_, _| true)
            .into_iter()
            .find(|t| t.spec().name == name)
            .unwrap_or_else(|| panic!("{name} is not offered"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_reaches_served_tools_through_the_runtime() {
    let f = fixture().await;
    let mut names: Vec<String> = f
        .runtime
        .tools(f.media.clone(), &|_, _| true)
        .iter()
        .map(|t| t.spec().name.clone())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "conduit__counts",
            "conduit__echo",
            "conduit__fails",
            "conduit__picture",
            "conduit__waits"
        ]
    );
    let echo = f.tool("conduit__echo");
    assert_eq!(echo.spec().title.as_deref(), Some("The echo tool"));
    assert_eq!(echo.spec().annotations.read_only_hint, Some(true));
    assert_eq!(
        echo.spec().input_schema["properties"]["text"]["type"],
        "string"
    );

    let (ctx, _, _) = context();
    let out = echo.call(json!({"text": "hi"}), ctx).await.unwrap();
    assert_eq!(
        out.parts,
        vec![ResultPart::Text {
            text: "echo: hi".into()
        }]
    );
    assert!(!out.is_error);

    // The image comes back through MCP as base64 and is stored again as media.
    let (ctx, _, _) = context();
    let out = f
        .tool("conduit__picture")
        .call(json!({}), ctx)
        .await
        .unwrap();
    let media = out
        .parts
        .iter()
        .find_map(|p| match p {
            ResultPart::Image { media } => Some(media.clone()),
            _ => None,
        })
        .expect("an image part");
    assert_eq!(media.mime, "image/png");
    assert_eq!((media.width, media.height), (Some(3), Some(2)));
    assert_eq!(f.media.load(&media).unwrap(), png());
    assert!(out.parts.contains(&ResultPart::Structured {
        value: json!({"width": 3})
    }));

    // A failing tool is an error result, and the session goes on.
    let (ctx, _, _) = context();
    let out = f.tool("conduit__fails").call(json!({}), ctx).await.unwrap();
    assert!(out.is_error);
    assert_eq!(
        out.parts,
        vec![ResultPart::Text {
            text: "the disk is on fire".into()
        }]
    );

    let (ctx, progress, progress_seen, _) = context_with_progress();
    let out = f
        .tool("conduit__counts")
        .call(json!({}), ctx)
        .await
        .unwrap();
    assert_eq!(
        out.parts,
        vec![ResultPart::Text {
            text: "counted".into()
        }]
    );
    // Progress may trail the result a moment (the client routes each notification in its
    // own task): wait for all three, bounded.
    tokio::time::timeout(Duration::from_secs(10), async {
        while progress.lock().len() < 3 {
            progress_seen.notified().await;
        }
    })
    .await
    .expect("three progress notifications arrived");
    // The server sends them in order; rmcp's client hands each to its own task, so
    // they may arrive in any order.
    let mut steps: Vec<(u32, String)> = progress
        .lock()
        .iter()
        .map(|p| (p.progress as u32, p.message.clone().unwrap_or_default()))
        .collect();
    steps.sort();
    assert_eq!(
        steps,
        [
            (1, "step 1".into()),
            (2, "step 2".into()),
            (3, "step 3".into())
        ]
    );
    f.runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_stops_the_served_tool() {
    let f = fixture().await;
    let waits = f.tool("conduit__waits");
    let (ctx, _, cancel) = context();
    let started = f.started.clone();
    let call = tokio::spawn(async move { waits.call(json!({}), ctx).await });
    started.notified().await;
    assert!(!f.stopped.load(Ordering::SeqCst));
    cancel.cancel();
    let out = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the call ends")
        .unwrap();
    assert!(out.is_err() || out.as_ref().unwrap().is_error, "{out:?}");
    // The server's tool saw its token cancelled (notifications/cancelled reached it).
    tokio::time::timeout(Duration::from_secs(10), f.stopped_signal.notified())
        .await
        .expect("the tool stopped");
    assert!(f.stopped.load(Ordering::SeqCst));
    f.runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_list_follows_the_catalog() {
    let f = fixture().await;
    let mut events = f.runtime.subscribe();
    // The client follows changes once its notification stream is open: wait for it.
    tokio::time::timeout(Duration::from_secs(10), async {
        while f.catalog.changes.receiver_count() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the client listens");
    f.catalog.tools.lock().retain(|t| t.spec().name != "fails");
    f.catalog.changes.send(CatalogChange::Tools).unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let names: Vec<String> = f
                .runtime
                .tools(f.media.clone(), &|_, _| true)
                .iter()
                .map(|t| t.spec().name.clone())
                .collect();
            if !names.contains(&"conduit__fails".to_owned()) {
                return;
            }
            let _ = events.recv().await;
        }
    })
    .await
    .expect("the runtime saw tools/list_changed and listed again");
    f.runtime.shutdown().await;
}
