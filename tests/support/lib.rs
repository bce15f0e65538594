//! Fixtures shared by Conduit's end-to-end tests: where the built binaries and the test
//! artifacts are, the `conduit` CLI run as a user runs it, a `tauri-driver` session around the real desktop app, and a scripted
//! LLM server that speaks the four provider protocols.

pub mod cli;
pub mod desktop;
pub mod footprint;
pub mod http_gate;
pub use conduit_testing::llm_server;
pub mod native_dialog;

use std::path::PathBuf;

/// The workspace's root folder.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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

/// A workspace binary built beside the tests (`cargo build --workspace` builds them).
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let path = target_profile_dir()?.join(name);
    if !path.is_file() {
        anyhow::bail!(
            "{} is not built: run `cargo build --workspace` (make test does) first",
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
