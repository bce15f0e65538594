//! Fixtures shared by Conduit's end-to-end tests: where the built binaries and the test
//! artifacts are, the `conduit` CLI run as a user runs it, a `tauri-driver` session around the real desktop app, and a scripted
//! LLM server that speaks the four provider protocols.

pub mod cli;
pub mod desktop;
pub mod footprint;
pub mod http_gate;
pub use conduit_testing::llm_server;
pub mod native_dialog;
pub mod oauth_server;

use std::path::PathBuf;

/// The workspace's root folder: from the folder cargo runs the test in, so that a test
/// built by a checkout elsewhere that shares the target folder (cargo does not rebuild
/// it for a moved checkout) still reads this checkout's files.
pub fn workspace_root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// Where tests keep screenshots and logs for people to look at:
/// `CONDUIT_TEST_ARTIFACTS`, or `test-artifacts/` in the workspace.
pub fn artifacts_dir(suite: &str) -> PathBuf {
    let root = std::env::var_os("CONDUIT_TEST_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("test-artifacts"));
    root.join(suite)
}

/// The folder of the binaries built with this test (`target/<profile>`).
pub fn target_profile_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    // Test executables live in target/<profile>/deps/.
    exe.parent()
        .and_then(|deps| deps.parent())
        .map(PathBuf::from)
        .ok_or_else(|| anyhow::anyhow!("cannot find the target folder from {}", exe.display()))
}

/// A workspace binary built beside the tests (`cargo build --workspace --all-targets`
/// builds them with the test fixtures the tests use; without `--all-targets` they are
/// built as they ship, without them).
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let path = target_profile_dir()?.join(name);
    if !path.is_file() {
        anyhow::bail!(
            "{} is not built: run `cargo build --workspace --all-targets` (make test does) first",
            path.display()
        );
    }
    Ok(path)
}

/// A port on the loopback interface that nothing listens on right now.
pub fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}

/// Serves `app` on a loopback port until the task ends; its base URL and the task.
pub async fn serve_loopback(
    app: axum::Router,
) -> anyhow::Result<(String, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            eprintln!("loopback server on {addr} ended: {error}");
        }
    });
    Ok((format!("http://{addr}"), task))
}

/// The entry script of an npm-installed test MCP server (`tests/mcp-servers`).
pub fn npm_server(package: &str) -> anyhow::Result<PathBuf> {
    let path = workspace_root()
        .join("tests/mcp-servers/node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    if !path.is_file() {
        anyhow::bail!(
            "{} is missing: run `make test` (it runs npm ci in tests/mcp-servers)",
            path.display()
        );
    }
    Ok(path)
}

/// The test Python's interpreter and the path of one of its fixture servers
/// (`tests/mcp-servers/fixtures/<script>`), installed by `make test`.
pub fn python_fixture(script: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    let root = workspace_root().join("tests/mcp-servers");
    let python = root.join(".venv/bin/python");
    if !python.is_file() {
        anyhow::bail!("run `make test`: the Python test servers are missing");
    }
    Ok((python, root.join("fixtures").join(script)))
}

/// A Python fixture server (`tests/mcp-servers/fixtures/<script>`) given a free port and
/// then `args`, once it alone listens there (as [`serving_on_a_free_port`] says); killed
/// when the child is dropped.
pub async fn python_server_on_a_free_port(
    script: &str,
    args: &[&str],
) -> anyhow::Result<(tokio::process::Child, u16)> {
    let (python, path) = python_fixture(script)?;
    serving_on_a_free_port(script, |port| {
        let mut command = tokio::process::Command::new(&python);
        command.arg(&path).arg(port.to_string()).args(args);
        command
    })
    .await
}

/// server-everything over streamable HTTP on a free port, once it listens (within 20 s);
/// killed when the child is dropped. The port is picked free and then handed to the
/// server, so another process can take it in between: node then either exits or listens
/// on the wildcard address beside the other's loopback listener, which takes the test's
/// connections. So the server is ready only when it alone listens on the port, as the
/// kernel's socket tables say; otherwise it is started again on another port, a few
/// times at most.
pub async fn everything_over_http() -> anyhow::Result<(tokio::process::Child, u16)> {
    let server = npm_server("server-everything")?;
    serving_on_a_free_port("server-everything", |port| {
        let mut command = tokio::process::Command::new("node");
        command
            .arg(&server)
            .arg("streamableHttp")
            .env("PORT", port.to_string());
        command
    })
    .await
}

/// The server `command` starts on a free port it is given, once it alone listens there
/// (within 20 s), as [`everything_over_http`] says; killed when the child is dropped.
pub async fn serving_on_a_free_port(
    name: &str,
    command: impl Fn(u16) -> tokio::process::Command,
) -> anyhow::Result<(tokio::process::Child, u16)> {
    let mut attempt = 1;
    loop {
        let port = free_port()?;
        let mut child = command(port)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let pid = child
            .id()
            .ok_or_else(|| anyhow::anyhow!("{name} ended at once"))?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let trouble = loop {
            if let Some(status) = child.try_wait()? {
                break format!("it exited ({status})");
            }
            match sole_listener(port, pid)? {
                Some(true) => return Ok((child, port)),
                Some(false) => break "another process listens there too".to_owned(),
                None if std::time::Instant::now() > deadline => {
                    anyhow::bail!("{name} did not listen on {port} within 20 s")
                }
                None => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            }
        };
        child.kill().await?;
        if attempt == 3 {
            anyhow::bail!("{name} could not have port {port} to itself: {trouble}");
        }
        eprintln!("{name} on port {port}: {trouble}; trying another port");
        attempt += 1;
    }
}

/// Whether `pid` (or a process it started, as a shim that does not `exec` would) alone
/// listens on TCP `port` (IPv4 or IPv6): `None` while nobody does, `Some(false)` when
/// another process does too. Read from `/proc/net/tcp{,6}` (whose listening rows give the
/// socket's inode) and the processes' open descriptors; a table the kernel does not have
/// (IPv6 switched off) is skipped, and without either a connection that succeeds counts.
pub fn sole_listener(port: u16, pid: u32) -> anyhow::Result<Option<bool>> {
    const LISTEN: &str = "0A";
    let mut listening = Vec::new();
    let mut tables = 0;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match std::fs::read_to_string(table) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(error.into()),
        };
        tables += 1;
        // "sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ..."
        for row in text.lines().skip(1) {
            let fields: Vec<&str> = row.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let row_port = local
                .rsplit_once(':')
                .and_then(|(_, hex)| u16::from_str_radix(hex, 16).ok());
            if *state == LISTEN && row_port == Some(port) {
                listening.push(format!("socket:[{inode}]"));
            }
        }
    }
    if tables == 0 {
        // No socket tables (not Linux): a connection is all there is to go by.
        let answered = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
        return Ok(answered.then_some(true));
    }
    if listening.is_empty() {
        return Ok(None);
    }
    // A process that has just ended has no descriptors to read: none of them is its.
    let owned: Vec<String> = family(pid, &processes())
        .into_iter()
        .filter_map(|member| std::fs::read_dir(format!("/proc/{member}/fd")).ok())
        .flat_map(|fds| fds.flatten())
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .collect();
    Ok(Some(listening.iter().all(|socket| owned.contains(socket))))
}

/// One process as the kernel's process table shows it.
#[derive(Debug, Clone, Copy)]
pub struct ProcessRow {
    pub pid: u32,
    pub parent: u32,
    pub group: u32,
    /// Running, not a zombie waiting to be reaped.
    pub live: bool,
}

/// The processes there are now, from `/proc/*/stat`; none where there is no `/proc`.
pub fn processes() -> Vec<ProcessRow> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so
            // the fields are read after its last ')'.
            let (_, rest) = stat.rsplit_once(')')?;
            let mut fields = rest.split_whitespace();
            let state = fields.next()?;
            let parent = fields.next()?.parse().ok()?;
            let group = fields.next()?.parse().ok()?;
            Some(ProcessRow {
                pid,
                parent,
                group,
                live: !matches!(state, "Z" | "X"),
            })
        })
        .collect()
}

/// `pid` and every process it started, and they started, in `table`.
pub fn family(pid: u32, table: &[ProcessRow]) -> Vec<u32> {
    let mut members = vec![pid];
    let mut next = 0;
    while let Some(&parent) = members.get(next) {
        members.extend(
            table
                .iter()
                .filter(|row| row.parent == parent && row.pid != parent)
                .map(|row| row.pid),
        );
        next += 1;
    }
    members
}

/// A fresh `CONDUIT_HOME` whose settings name `llm` as the provider (`scripted`, model
/// `m`) and whose `mcpServers` file holds `servers`.
#[allow(clippy::unwrap_used)]
pub fn home_with(llm: &llm_server::ScriptedLlm, servers: serde_json::Value) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("settings.json"),
        llm.provider_settings().to_string(),
    )
    .unwrap();
    std::fs::write(
        home.path().join("mcp_servers.json"),
        serde_json::json!({ "mcpServers": servers }).to_string(),
    )
    .unwrap();
    home
}

/// A history in `home` of one conversation titled `title`, 400 long messages, closed (its
/// journal written into the file), then a page in the middle of it overwritten: an open
/// reads only the header and schema, so it opens; the check of the whole file, 20 s
/// later, finds the damage. The damaged file's bytes.
#[allow(clippy::unwrap_used)]
pub fn history_damaged_deep_inside(home: &std::path::Path, title: &str) -> Vec<u8> {
    use conduit_store::{FileMediaStore, MessageStatus, Store};
    let database = home.join("history.db");
    {
        let store = Store::open(&database, FileMediaStore::new(home.join("media"))).unwrap();
        let id = store.create_conversation(None, None).unwrap();
        for n in 0..400 {
            let text = format!("message {n}: {}", "words of an old answer ".repeat(40));
            store
                .add_message(
                    &id,
                    &conduit_host::core::content::Message::user_text(text),
                    MessageStatus::Complete,
                )
                .unwrap();
        }
        store.rename(&id, title).unwrap();
    }
    let mut bytes = std::fs::read(&database).unwrap();
    let page = 4096;
    let middle = bytes.len() / page / 2 * page;
    bytes[middle..middle + 64].fill(0xA5);
    std::fs::write(&database, &bytes).unwrap();
    bytes
}

/// Sends `request` through the window's engine and waits (at most a minute) for the turn
/// to end without an error; the conversation it was saved in.
#[allow(clippy::panic)]
pub async fn app_turn(
    app: &std::sync::Arc<conduit_host::app::App>,
    request: conduit_host::app::SendRequest,
) -> String {
    use conduit_host::app::{TurnEvent, TurnSink};
    let (sender, mut events) = tokio::sync::mpsc::unbounded_channel();
    let sink: TurnSink = std::sync::Arc::new(move |event| {
        let _ = sender.send(event);
    });
    let started = match app.send(request, sink) {
        Ok(started) => started,
        Err(error) => panic!("the turn did not start: {error:?}"),
    };
    loop {
        match tokio::time::timeout(std::time::Duration::from_secs(60), events.recv()).await {
            Ok(Some(TurnEvent::Ended { error: None, .. })) => return started.conversation,
            Ok(Some(TurnEvent::Ended { error, .. })) => panic!("the turn failed: {error:?}"),
            Ok(Some(_)) => {}
            Ok(None) => panic!("the turn's events stopped before it ended"),
            Err(_) => panic!("the turn did not end within a minute"),
        }
    }
}

/// Every file under `dir` that reads as text, with its path and text.
pub fn text_files_under(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(text_files_under(&path));
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            out.push((path.display().to_string(), text));
        }
    }
    out
}
