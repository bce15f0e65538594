//! Servers kept running for a long-lived app: the `mcpServers` file is watched and an
//! outside edit applies live (only servers whose entry changed restart; a file that does
//! not parse leaves the running servers alone), and a server that stops unexpectedly
//! restarts with backoff.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use std::time::Duration;

use conduit_core::media::MediaStore;
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use serde_json::Value;
use tokio::sync::broadcast;

use crate::client::Connection;
use crate::config::{self, ConfigError, ServerEntry};
use crate::servers::{Running, ServerState, ServerStatus, start_one, tools_of};
use crate::tool::McpTool;

/// Restarts after an unexpected stop wait 1 s, 2 s, 4 s ... up to 30 s.
const RESTART_BACKOFF: conduit_core::backoff::Backoff =
    conduit_core::backoff::Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
/// After this many failed restarts in a row the server stays failed.
const MAX_RESTARTS: u32 = 5;
/// How often a running server is checked for an unexpected stop.
const WATCH_INTERVAL: Duration = Duration::from_millis(200);
/// Edits arriving within this window apply once.
const DEBOUNCE: Duration = Duration::from_millis(150);

/// A server's tool as a settings screen lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub read_only: bool,
    pub destructive: bool,
}

impl From<&rmcp::model::Tool> for ToolInfo {
    fn from(tool: &rmcp::model::Tool) -> Self {
        let hints = tool.annotations.as_ref();
        Self {
            name: tool.name.to_string(),
            title: tool
                .title
                .clone()
                .or_else(|| hints.and_then(|a| a.title.clone())),
            description: tool.description.as_ref().map(|d| d.to_string()),
            read_only: hints.and_then(|a| a.read_only_hint).unwrap_or(false),
            destructive: hints.and_then(|a| a.destructive_hint).unwrap_or(false),
        }
    }
}

/// What changed, for a frontend to refresh.
#[derive(Debug, Clone)]
pub enum LiveEvent {
    Server(ServerStatus),
    /// The file failed to read; the servers from the last good read keep running.
    ConfigError(String),
    /// The file was read and applied.
    ConfigApplied,
}

struct Slot {
    /// The entry as written: a change restarts the server.
    raw: Value,
    entry: ServerEntry,
    running: Running,
    /// Unique to each start, so the watcher of a replaced server stops acting.
    generation: u64,
}

struct Inner {
    path: PathBuf,
    start_timeout: Duration,
    slots: Mutex<BTreeMap<String, Slot>>,
    order: Mutex<Vec<String>>,
    events: broadcast::Sender<LiveEvent>,
    config_error: Mutex<Option<String>>,
    reload_lock: tokio::sync::Mutex<()>,
    next_generation: std::sync::atomic::AtomicU64,
}

/// The servers of one file, kept in step with it.
pub struct LiveServers {
    inner: Arc<Inner>,
    _watcher: Option<RecommendedWatcher>,
}

impl LiveServers {
    /// Reads the file, starts its servers together and starts watching it.
    pub async fn start(path: &Path, start_timeout: Duration) -> Self {
        let (events, _) = broadcast::channel(64);
        let inner = Arc::new(Inner {
            path: path.to_owned(),
            start_timeout,
            slots: Mutex::new(BTreeMap::new()),
            order: Mutex::new(Vec::new()),
            events,
            config_error: Mutex::new(None),
            reload_lock: tokio::sync::Mutex::new(()),
            next_generation: std::sync::atomic::AtomicU64::new(0),
        });
        reload(&inner).await;
        let watcher = watch(path, Arc::downgrade(&inner));
        if let Err(err) = &watcher {
            tracing::warn!(error = %err, "cannot watch the mcpServers file; edits apply on restart");
        }
        Self {
            inner,
            _watcher: watcher.ok(),
        }
    }

    /// Events as servers change state and the file is applied.
    pub fn subscribe(&self) -> broadcast::Receiver<LiveEvent> {
        self.inner.events.subscribe()
    }

    /// Every server in file order, with its state.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        let order = self.inner.order.lock().clone();
        let slots = self.inner.slots.lock();
        // A name in the file without a slot yet is being started.
        order
            .iter()
            .map(|name| match slots.get(name) {
                Some(slot) => status_of(&slot.running),
                None => ServerStatus {
                    name: name.clone(),
                    state: ServerState::Starting,
                },
            })
            .collect()
    }

    /// The last read error of the file, if the last read failed.
    pub fn config_error(&self) -> Option<String> {
        self.inner.config_error.lock().clone()
    }

    /// The connection of a ready server.
    pub fn connection(&self, server: &str) -> Option<Arc<Connection>> {
        self.inner
            .slots
            .lock()
            .get(server)
            .and_then(|s| s.running.connection.clone())
    }

    /// The ready servers' tools that `allow(server, tool)` lets through, under names
    /// unique across them.
    pub fn tools(
        &self,
        media: Arc<dyn MediaStore>,
        allow: &dyn Fn(&str, &str) -> bool,
    ) -> Vec<Arc<McpTool>> {
        let slots = self.inner.slots.lock();
        tools_of(slots.values().map(|s| &s.running), media, allow)
    }

    /// Stops a server and starts it again (the user asked; its entry is unchanged).
    pub async fn restart_server(&self, server: &str) {
        let slot = self.inner.slots.lock().remove(server);
        if let Some(connection) = slot.and_then(|s| s.running.connection) {
            connection.shutdown().await;
        }
        reload(&self.inner).await;
    }

    /// What a ready server's tools are, for a settings screen.
    pub fn server_tools(&self, server: &str) -> Vec<ToolInfo> {
        self.inner
            .slots
            .lock()
            .get(server)
            .map(|slot| slot.running.tools.iter().map(ToolInfo::from).collect())
            .unwrap_or_default()
    }

    /// Applies the file now (the watcher does this by itself after an edit).
    pub async fn reload(&self) {
        reload(&self.inner).await;
    }

    /// Ends every server.
    pub async fn shutdown(&self) {
        let taken = std::mem::take(&mut *self.inner.slots.lock());
        let connections: Vec<Arc<Connection>> = taken
            .into_values()
            .filter_map(|s| s.running.connection)
            .collect();
        futures::future::join_all(connections.iter().map(|c| c.shutdown())).await;
    }
}

fn status_of(running: &Running) -> ServerStatus {
    ServerStatus {
        name: running.name.clone(),
        state: running.state.clone(),
    }
}

fn publish(inner: &Inner, running: &Running) {
    let _ = inner.events.send(LiveEvent::Server(status_of(running)));
}

/// Reads the file and brings the servers in line with it.
async fn reload(inner: &Arc<Inner>) {
    let _serial = inner.reload_lock.lock().await;
    let snapshot = match config::read(&inner.path) {
        Ok(snapshot) => snapshot,
        Err(err) => {
            report_config_error(inner, &err);
            return;
        }
    };
    *inner.config_error.lock() = None;
    let wanted: BTreeMap<String, ServerEntry> = snapshot
        .servers
        .iter()
        .map(|e| (e.name.clone(), e.clone()))
        .collect();
    // Stop servers that are gone or whose entry changed.
    let stopping: Vec<(String, Option<Arc<Connection>>)> = {
        let mut slots = inner.slots.lock();
        let changed: Vec<String> = slots
            .iter()
            .filter(|(name, slot)| wanted.get(*name).is_none_or(|e| e.raw != slot.raw))
            .map(|(name, _)| name.clone())
            .collect();
        changed
            .into_iter()
            .filter_map(|name| slots.remove(&name).map(|s| (name, s.running.connection)))
            .collect()
    };
    for (name, connection) in &stopping {
        tracing::info!(server = %name, "MCP server stops: its entry changed or was removed");
        if let Some(connection) = connection {
            connection.shutdown().await;
        }
    }
    // Start the new and the changed ones, together.
    let to_start: Vec<ServerEntry> = {
        let slots = inner.slots.lock();
        wanted
            .values()
            .filter(|e| !slots.contains_key(&e.name))
            .cloned()
            .collect()
    };
    *inner.order.lock() = snapshot.servers.iter().map(|e| e.name.clone()).collect();
    for entry in &to_start {
        let _ = inner.events.send(LiveEvent::Server(ServerStatus {
            name: entry.name.clone(),
            state: ServerState::Starting,
        }));
    }
    let started = futures::future::join_all(
        to_start
            .iter()
            .map(|entry| start_one(entry, inner.start_timeout)),
    )
    .await;
    for (entry, running) in to_start.into_iter().zip(started) {
        install(inner, entry, running, 0);
    }
    let _ = inner.events.send(LiveEvent::ConfigApplied);
}

fn report_config_error(inner: &Inner, err: &ConfigError) {
    tracing::warn!(error = %err, "the mcpServers file could not be applied; servers keep running");
    *inner.config_error.lock() = Some(err.to_string());
    let _ = inner.events.send(LiveEvent::ConfigError(err.to_string()));
}

/// Puts a started server in its slot and watches it for an unexpected stop.
fn install(inner: &Arc<Inner>, entry: ServerEntry, running: Running, restarts: u32) {
    // Published after the slot holds it, so a listener that looks sees the new state.
    let status = status_of(&running);
    let connection = running.connection.clone();
    let name = entry.name.clone();
    let generation = inner
        .next_generation
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let replaced = inner
        .slots
        .lock()
        .insert(
            name.clone(),
            Slot {
                raw: entry.raw.clone(),
                entry,
                running,
                generation,
            },
        )
        .and_then(|slot| slot.running.connection);
    // Never two instances of one server: one that was in the slot ends.
    if let Some(old) = replaced
        && connection
            .as_ref()
            .is_none_or(|new| !Arc::ptr_eq(new, &old))
    {
        tokio::spawn(async move { old.shutdown().await });
    }
    let _ = inner.events.send(LiveEvent::Server(status));
    if let Some(connection) = connection {
        let weak = Arc::downgrade(inner);
        tokio::spawn(refresh_tools(
            weak.clone(),
            name.clone(),
            generation,
            connection.clone(),
        ));
        tokio::spawn(supervise(weak, name, generation, connection, restarts));
    }
}

/// Lists the tools again each time the server says they changed.
async fn refresh_tools(
    inner: Weak<Inner>,
    name: String,
    generation: u64,
    connection: Arc<Connection>,
) {
    loop {
        connection.tools_changed().await;
        let tools = match connection.tools().await {
            Ok(tools) => tools,
            Err(err) => {
                tracing::warn!(server = %name, error = %err, "re-listing tools failed");
                if connection.is_closed() {
                    return;
                }
                continue;
            }
        };
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let mut slots = inner.slots.lock();
        let Some(slot) = slots.get_mut(&name).filter(|s| s.generation == generation) else {
            return;
        };
        tracing::info!(server = %name, tools = tools.len(), "MCP server's tools changed");
        if let ServerState::Ready { tool_count, .. } = &mut slot.running.state {
            *tool_count = tools.len();
        }
        slot.running.tools = tools;
        let _ = inner
            .events
            .send(LiveEvent::Server(status_of(&slot.running)));
    }
}

/// Waits for the server to stop; if nobody stopped it on purpose, restarts it with backoff.
async fn supervise(
    inner: Weak<Inner>,
    name: String,
    generation: u64,
    connection: Arc<Connection>,
    restarts: u32,
) {
    let mut healthy_for = Duration::ZERO;
    let mut restarts = restarts;
    loop {
        tokio::time::sleep(WATCH_INTERVAL).await;
        healthy_for += WATCH_INTERVAL;
        if healthy_for > RESTART_BACKOFF.max {
            restarts = 0; // A server that ran a while starts its backoff afresh.
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let current = inner.slots.lock().get(&name).map(|s| s.generation);
        if current != Some(generation) {
            return; // Replaced or removed on purpose.
        }
        if !connection.is_closed() {
            continue;
        }
        let exit = connection.exit_status().await;
        let stderr_tail = connection.stderr_tail();
        connection.shutdown().await;
        let reason = match exit {
            Some(status) => format!("it stopped unexpectedly ({status})"),
            None => "it closed the connection unexpectedly".to_owned(),
        };
        tracing::warn!(server = %name, %reason, "MCP server stopped; restarting");
        restart(inner, name, generation, restarts + 1, reason, stderr_tail).await;
        return;
    }
}

/// Whether the slot of `name` is still the start numbered `generation`.
fn holds(inner: &Inner, name: &str, generation: u64) -> bool {
    inner.slots.lock().get(name).map(|s| s.generation) == Some(generation)
}

async fn restart(
    inner: Arc<Inner>,
    name: String,
    generation: u64,
    attempt: u32,
    reason: String,
    stderr_tail: Vec<String>,
) {
    let entry = {
        let mut slots = inner.slots.lock();
        let Some(slot) = slots.get_mut(&name).filter(|s| s.generation == generation) else {
            return;
        };
        slot.running.connection = None;
        slot.running.tools.clear();
        slot.running.state = if attempt > MAX_RESTARTS {
            ServerState::Failed {
                reason: format!("{reason}; gave up after {MAX_RESTARTS} restarts"),
                exit_code: None,
                stderr_tail: stderr_tail.clone(),
            }
        } else {
            ServerState::Restarting {
                attempt,
                reason: reason.clone(),
                stderr_tail: stderr_tail.clone(),
            }
        };
        publish(&inner, &slot.running);
        if attempt > MAX_RESTARTS {
            return;
        }
        slot.entry.clone()
    };
    tokio::time::sleep(RESTART_BACKOFF.delay(attempt)).await;
    if !holds(&inner, &name, generation) {
        return;
    }
    let running = start_one(&entry, inner.start_timeout).await;
    // The slot may have moved on while this start ran (a manual restart, an edit): then
    // this instance is not wanted.
    if !holds(&inner, &name, generation) {
        if let Some(connection) = running.connection {
            connection.shutdown().await;
        }
        return;
    }
    let failed_again = matches!(running.state, ServerState::Failed { .. });
    install(&inner, entry.clone(), running, attempt);
    if failed_again {
        // Try again later, counting this attempt.
        let generation = inner.slots.lock().get(&name).map(|s| s.generation);
        if let Some(generation) = generation {
            Box::pin(restart(
                inner,
                name,
                generation,
                attempt + 1,
                reason,
                stderr_tail,
            ))
            .await;
        }
    }
}

/// Watches the file's folder (editors replace files by renaming) and reloads after edits.
fn watch(path: &Path, inner: Weak<Inner>) -> notify::Result<RecommendedWatcher> {
    let file_name = path.file_name().map(|n| n.to_owned());
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&dir).map_err(notify::Error::io)?;
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else {
            return;
        };
        let ours = event
            .paths
            .iter()
            .any(|p| p.file_name() == file_name.as_deref());
        if ours && !event.kind.is_access() {
            let _ = sender.send(());
        }
    })?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    tokio::spawn(async move {
        while receiver.recv().await.is_some() {
            tokio::time::sleep(DEBOUNCE).await;
            while receiver.try_recv().is_ok() {}
            let Some(inner) = inner.upgrade() else {
                return;
            };
            reload(&inner).await;
        }
    });
    Ok(watcher)
}
