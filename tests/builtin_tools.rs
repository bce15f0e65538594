//! Conduit's built-in tools, served once and used twice: the agent reaches them as the
//! in-process server `conduit` (a model's chart arrives as a PNG in its next request),
//! and a client connected to Conduit's MCP server hears a tool switched off in Settings
//! as a list change.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use conduit_core::media::MediaStore;
use conduit_core::tool::Tool;
use conduit_e2e::cli::{ChatRun, conduit, text};
use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
use conduit_host::{Host, Paths};
use conduit_mcp::runtime::{McpRuntime, RuntimeOptions};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_models_chart_reaches_it_as_an_image() {
    let home = tempfile::tempdir().unwrap();
    let chat = Dialect::Anthropic;
    let llm = ScriptedLlm::start(vec![
        chat.turn(
            &[],
            &[ScriptedCall::new(
                "toolu_1",
                "conduit__render_chart",
                json!({"kind": "bar", "title": "Sales", "labels": ["Q1", "Q2"],
                       "series": [{"name": "EU", "y": [3, 5]}]}),
            )],
        ),
        chat.text(&["Here is your chart."]),
    ])
    .await
    .unwrap();
    let url = chat.base_url(&llm.url());
    let home_path = home.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        conduit(
            &home_path,
            &[
                "chat",
                "--kind",
                "anthropic",
                "--base-url",
                &url,
                "--model",
                "m",
                "--approve",
                "auto",
                "--json",
                "Chart my sales",
            ],
            None,
        )
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run = ChatRun::of(&out);
    assert!(run.text().contains("Here is your chart."), "{}", run.text());
    let requests = llm.requests();
    let offered: Vec<String> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    for name in [
        "conduit__render_chart",
        "conduit__search_history",
        "conduit__time_now",
    ] {
        assert!(offered.contains(&name.to_owned()), "{offered:?}");
    }
    // The chart is in the tool result the model gets next, as a PNG that decodes.
    let image = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["type"] == "tool_result")
        .flat_map(|c| c["content"].as_array().cloned().unwrap_or_default())
        .find(|c| c["type"] == "image")
        .expect("an image in the tool result");
    assert_eq!(image["source"]["media_type"], "image/png");
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(image["source"]["data"].as_str().unwrap())
        .unwrap();
    let png = image::load_from_memory(&bytes).unwrap();
    assert_eq!((png.width(), png.height()), (1200, 700));
}

/// A host in a temporary home and a client of its MCP server (the one `conduit mcp serve`
/// runs), in process, as `served`; media the client receives is kept in memory.
async fn served_client() -> (
    tempfile::TempDir,
    Arc<Host>,
    McpRuntime,
    Arc<dyn MediaStore>,
) {
    let home = tempfile::tempdir().unwrap();
    let host = Arc::new(Host::new(Paths::under_home(home.path().to_owned(), None)));
    let served = Arc::new(host.tool_server().unwrap());
    let media: Arc<dyn MediaStore> = conduit_core::testing::MemoryMedia::new();
    let client = McpRuntime::start(
        RuntimeOptions::new(home.path().join("none.json"), Duration::from_secs(20))
            .with_in_process("served", served),
    )
    .await
    .unwrap();
    (home, host, client, media)
}

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_switched_off_in_settings_leaves_connected_clients() {
    let (home, _host, client, media) = served_client().await;
    let names = || -> Vec<String> {
        client
            .tools(media.clone(), &|_, _| true)
            .iter()
            .map(|t| t.spec().name.clone())
            .collect()
    };
    assert!(
        names().contains(&"served__time_now".to_owned()),
        "{:?}",
        names()
    );

    // Another process (Settings) switches it off in the settings file.
    let other = Host::new(Paths::under_home(home.path().to_owned(), None));
    assert!(other.set_builtin_tool_enabled("time_now", false).unwrap());
    until("time_now is gone", || {
        !names().contains(&"served__time_now".to_owned())
    })
    .await;
    assert!(names().contains(&"served__render_chart".to_owned()));
    assert!(other.set_builtin_tool_enabled("time_now", true).unwrap());
    until("time_now is back", || {
        names().contains(&"served__time_now".to_owned())
    })
    .await;
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_entry_cannot_take_the_built_in_servers_name() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("mcp_servers.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"conduit": {"command": "sh", "args": ["-c", "exit 1"]}}}).to_string(),
    )
    .unwrap();
    let host = Arc::new(Host::new(Paths::under_home(home.path().to_owned(), None)));
    let servers = McpRuntime::start(
        RuntimeOptions::new(&file, Duration::from_secs(20))
            .with_in_process("conduit", Arc::new(host.builtin_server())),
    )
    .await
    .unwrap();
    let statuses = serde_json::to_value(servers.statuses()).unwrap();
    assert_eq!(statuses[0]["name"], "conduit");
    assert_eq!(statuses[0]["state"], "ready", "{statuses}");
    assert_eq!(statuses[1]["name"], "conduit (file)");
    assert_eq!(statuses[1]["state"], "failed");
    assert!(
        statuses[1]["reason"]
            .as_str()
            .unwrap()
            .contains("taken by Conduit's own server"),
        "{statuses}"
    );
    servers.shutdown().await;
}

#[test]
fn another_conduit_uses_this_one_through_a_claude_desktop_style_entry() {
    let served_home = tempfile::tempdir().unwrap();
    let client_home = tempfile::tempdir().unwrap();
    let binary = conduit_e2e::binary("conduit").unwrap();
    // The entry Settings offers for Claude Desktop, under another name, with its own home.
    std::fs::write(
        client_home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"other-conduit": {
            "command": binary, "args": ["mcp", "serve"],
            "env": {"CONDUIT_HOME": served_home.path(), "CONDUIT_SECRET_STORE": "file"}
        }}})
        .to_string(),
    )
    .unwrap();
    let listed = conduit(
        client_home.path(),
        &["mcp", "tools", "other-conduit", "--json"],
        None,
    );
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let tools: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"render_chart") && names.contains(&"time_now"),
        "{names:?}"
    );
    let called = conduit(
        client_home.path(),
        &[
            "mcp",
            "call",
            "other-conduit",
            "convert_time",
            "--args",
            r#"{"time": "2026-07-01T12:00", "from_time_zone": "Europe/Oslo", "to_time_zone": "UTC"}"#,
            "--json",
        ],
        None,
    );
    assert!(called.status.success(), "{}", text(&called.stderr));
    let out = text(&called.stdout);
    assert!(out.contains("10:00"), "{out}");
}

/// Every file under `dir` (none when it does not exist).
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charts_drawn_for_another_client_reach_it_and_stay_out_of_the_media_folder() {
    let (_home, host, client, media) = served_client().await;
    let chart = client
        .tools(media.clone(), &|_, _| true)
        .into_iter()
        .find(|tool| tool.spec().name == "served__render_chart")
        .unwrap();
    // A client drawing one chart after another, several at once.
    let calls = (0..6).map(|n| {
        let chart = chart.clone();
        async move {
            let context = conduit_core::tool::ToolContext::new(
                tokio_util::sync::CancellationToken::new(),
                Arc::new(|_| {}),
            );
            chart
                .call(
                    json!({"kind": "bar", "labels": ["a", "b"], "series": [{"y": [1.0, f64::from(n)]}], "width": 2400, "height": 1600}),
                    context,
                )
                .await
                .unwrap()
        }
    });
    for output in futures::future::join_all(calls).await {
        assert!(!output.is_error, "{output:?}");
        let image = output
            .parts
            .iter()
            .find_map(|part| match part {
                conduit_core::content::ResultPart::Image { media } => Some(media.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no chart in {:?}", output.parts));
        let png = image::load_from_memory(&media.load(&image).unwrap()).unwrap();
        assert_eq!((png.width(), png.height()), (2400, 1600));
    }
    // No conversation holds them: nothing was left behind in the user's media folder.
    let left = files_under(&host.paths().media_dir);
    assert!(left.is_empty(), "{left:?}");
    client.shutdown().await;
}
