//! Servers kept in step with the mcpServers file: outside edits apply live and restart
//! only the servers whose entry changed, a broken file leaves them running, a disabled
//! server's process ends, and a crashed server comes back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use conduit_core::media::MediaStore;
use conduit_core::tool::Tool;
use conduit_e2e::npm_server;
use conduit_mcp::runtime::{LiveEvent, McpRuntime, RuntimeOptions};
use serde_json::{Value, json};

fn entry(marker: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        json!(npm_server("server-everything").unwrap()),
        json!("stdio"),
        json!(marker),
    ];
    args.extend(extra.iter().map(|a| json!(a)));
    json!({"command": "node", "args": args})
}

fn write(path: &Path, servers: Value) {
    std::fs::write(
        path,
        serde_json::to_string_pretty(&json!({"mcpServers": servers})).unwrap(),
    )
    .unwrap();
}

/// The pids of processes whose command line holds `marker` (exactly, as its own word).
fn pids(marker: &str) -> Vec<u32> {
    let out = Command::new("pgrep")
        .args(["-f", &format!("stdio {marker}( |$)")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

async fn wait_until(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The file's servers, watched as the app runs them.
async fn start(file: &Path) -> McpRuntime {
    McpRuntime::watch(RuntimeOptions::new(file, Duration::from_secs(20))).await
}

fn state_of(live: &McpRuntime, name: &str) -> String {
    live.statuses()
        .into_iter()
        .find(|s| s.name == name)
        .map(|s| {
            serde_json::to_value(&s).unwrap()["state"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .unwrap_or_else(|| "absent".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_edits_apply_live_and_restart_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let tag = dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .replace('.', "");
    let (a, b, c) = (format!("{tag}-a"), format!("{tag}-b"), format!("{tag}-c"));
    let file = dir.path().join("mcp_servers.json");
    write(&file, json!({"a": entry(&a, &[]), "b": entry(&b, &[])}));

    let live = start(&file).await;
    assert_eq!(state_of(&live, "a"), "ready");
    assert_eq!(state_of(&live, "b"), "ready");
    let (pid_a, pid_b) = (pids(&a), pids(&b));
    assert_eq!((pid_a.len(), pid_b.len()), (1, 1));

    // Change b and add c: a keeps running untouched; c shows as starting first.
    let mut events = live.subscribe();
    write(
        &file,
        json!({"a": entry(&a, &[]), "b": entry(&b, &["changed"]), "c": entry(&c, &[])}),
    );
    wait_until("c is ready", Duration::from_secs(20), || {
        state_of(&live, "c") == "ready"
    })
    .await;
    wait_until("b restarted", Duration::from_secs(20), || {
        let now = pids(&b);
        now.len() == 1 && now != pid_b && state_of(&live, "b") == "ready"
    })
    .await;
    assert_eq!(pids(&a), pid_a, "a was not restarted");
    let mut states_of_c = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let LiveEvent::Server(status) = event
            && status.name == "c"
        {
            states_of_c.push(serde_json::to_value(&status).unwrap()["state"].clone());
        }
    }
    assert_eq!(
        states_of_c.first(),
        Some(&json!("starting")),
        "{states_of_c:?}"
    );
    assert_eq!(states_of_c.last(), Some(&json!("ready")), "{states_of_c:?}");
    assert_eq!(
        live.statuses()
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
    assert!(
        live.tools(media(), &|_, _| true).len() >= 30,
        "tools of three servers"
    );

    // A broken file changes nothing and says why.
    std::fs::write(&file, "{\"mcpServers\": {\"a\": ").unwrap();
    wait_until("the error is known", Duration::from_secs(10), || {
        live.config_error().is_some()
    })
    .await;
    assert!(
        live.config_error().unwrap().contains("line 1"),
        "{:?}",
        live.config_error()
    );
    assert_eq!(pids(&a), pid_a);
    assert_eq!(state_of(&live, "c"), "ready");

    // Disable c and remove b: their processes end.
    let mut disabled = entry(&c, &[]);
    disabled["disabled"] = json!(true);
    write(&file, json!({"a": entry(&a, &[]), "c": disabled}));
    wait_until("c disabled", Duration::from_secs(20), || {
        state_of(&live, "c") == "disabled"
    })
    .await;
    wait_until("b and c gone", Duration::from_secs(10), || {
        pids(&b).is_empty() && pids(&c).is_empty()
    })
    .await;
    assert!(live.config_error().is_none());
    assert_eq!(state_of(&live, "b"), "absent");
    assert_eq!(pids(&a), pid_a);

    live.shutdown().await;
    wait_until("a gone", Duration::from_secs(10), || pids(&a).is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_server_is_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let tag = format!(
        "{}-crash",
        dir.path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace('.', "")
    );
    let file = dir.path().join("mcp_servers.json");
    write(&file, json!({"s": entry(&tag, &[])}));
    let live = start(&file).await;
    let mut events = live.subscribe();
    let before = pids(&tag);
    assert_eq!(before.len(), 1);
    // A turn took its tools before the crash.
    let taken = live
        .tools(media(), &|_, _| true)
        .into_iter()
        .find(|tool| tool.tool_name() == "get-sum")
        .unwrap();

    Command::new("kill")
        .args(["-KILL", &before[0].to_string()])
        .status()
        .unwrap();
    let mut saw_restarting = false;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Ok(LiveEvent::Server(status))) =
            tokio::time::timeout(Duration::from_millis(200), events.recv()).await
        {
            let state = serde_json::to_value(&status).unwrap();
            if state["state"] == "restarting" {
                saw_restarting = true;
                assert!(
                    state["reason"]
                        .as_str()
                        .unwrap()
                        .contains("stopped unexpectedly"),
                    "{state}"
                );
            }
            if saw_restarting && state["state"] == "ready" {
                break;
            }
        }
    }
    assert!(saw_restarting);
    assert_eq!(state_of(&live, "s"), "ready");
    let after = pids(&tag);
    assert_eq!(after.len(), 1);
    assert_ne!(after, before);
    // The new connection serves calls.
    let connection = live.connection("s").unwrap();
    let result = connection
        .call_tool(
            "get-sum",
            serde_json::from_value(json!({"a": 1, "b": 2})).unwrap(),
            std::sync::Arc::new(|_| {}),
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(format!("{:?}", result.content).contains('3'));
    // The turn's tool, taken on the connection that ended, goes to the new process (its
    // definition unchanged) instead of failing as "closed, may have run".
    let output = sum_20_and_22(taken).await.unwrap();
    assert!(format!("{output:?}").contains("42"), "{output:?}");
    live.shutdown().await;
}

/// A first start that only ran out of time (a first `npx` downloading, a `docker run`
/// pulling) or found no server at its URL (the network not up yet at login) is tried
/// again with the restarts' backoff, and the server is ready once it comes; one that
/// exits is not tried again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_start_that_ran_out_of_time_or_found_no_server_is_tried_again() {
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("downloaded");
    let everything = npm_server("server-everything").unwrap();
    // Slow the first time only, as npx is while it downloads its package.
    let slow_first = format!(
        "if [ -e '{mark}' ]; then exec node '{everything}' stdio; else touch '{mark}'; exec sleep 60; fi",
        mark = mark.display(),
        everything = everything.display()
    );
    let port = conduit_e2e::free_port().unwrap();
    let file = dir.path().join("mcp_servers.json");
    write(
        &file,
        json!({
            "slow": {"command": "sh", "args": ["-c", slow_first]},
            "later": {"url": format!("http://127.0.0.1:{port}/mcp")},
            "exits": {"command": "sh", "args": ["-c", "exit 3"]},
        }),
    );
    let live = McpRuntime::watch(RuntimeOptions::new(&file, Duration::from_secs(3))).await;
    let status = |name: &str| {
        live.statuses()
            .into_iter()
            .find(|s| s.name == name)
            .map(|s| serde_json::to_value(&s).unwrap())
            .unwrap()
    };
    // The first starts settled: each slow or unreachable one is starting again.
    let slow = status("slow");
    assert_eq!(slow["state"], "restarting", "{slow}");
    assert!(
        slow["reason"]
            .as_str()
            .unwrap()
            .contains("did not finish starting"),
        "{slow}"
    );
    let later = status("later");
    assert_eq!(later["state"], "restarting", "{later}");
    assert_eq!(status("exits")["state"], "failed");

    // The server at the URL comes up; both are ready on a later try.
    let _server = tokio::process::Command::new("node")
        .arg(&everything)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_until("both are ready", Duration::from_secs(60), || {
        state_of(&live, "slow") == "ready" && state_of(&live, "later") == "ready"
    })
    .await;
    assert!(live.connection("slow").is_some());
    assert_eq!(status("exits")["state"], "failed");
    live.shutdown().await;
}

/// A media store for tests.
fn media() -> std::sync::Arc<dyn MediaStore> {
    conduit_core::testing::MemoryMedia::new()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_again_when_a_2026_server_says_they_changed() {
    // Found out by itself: the Python SDK speaks 2026-07-28, so changes come on a
    // subscriptions/listen stream.
    tools_are_listed_again_when_the_server_says_they_changed(None, "2026-07-28").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_again_when_a_server_pinned_to_2025_says_they_changed() {
    tools_are_listed_again_when_the_server_says_they_changed(Some("2025-11-25"), "2025-11-25")
        .await;
}

async fn tools_are_listed_again_when_the_server_says_they_changed(
    pinned: Option<&str>,
    spoken: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
    let python = root.join(".venv/bin/python");
    assert!(
        python.is_file(),
        "run `make test`: the Python test servers are missing"
    );
    let file = dir.path().join("mcp_servers.json");
    write(
        &file,
        json!({"dyn": {"command": python, "args": [root.join("fixtures/dynamic_tools.py")],
                       "protocolVersion": pinned}}),
    );
    let live = start(&file).await;
    let status = serde_json::to_value(&live.statuses()[0]).unwrap();
    assert_eq!(status["details"]["protocolVersion"], spoken, "{status}");
    let names = |live: &McpRuntime| -> Vec<String> {
        live.tools(media(), &|_, _| true)
            .iter()
            .map(|t| t.spec().name.clone())
            .collect()
    };
    let before = names(&live);
    assert!(before.contains(&"dyn__add_tool".to_owned()), "{before:?}");
    assert!(!before.contains(&"dyn__zeta".to_owned()));
    let connection = live.connection("dyn").unwrap();
    connection
        .call_tool(
            "add_tool",
            serde_json::from_value(json!({"name": "zeta"})).unwrap(),
            std::sync::Arc::new(|_| {}),
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap();
    wait_until("the new tool is listed", Duration::from_secs(10), || {
        names(&live).contains(&"dyn__zeta".to_owned())
    })
    .await;
    let status = serde_json::to_value(&live.statuses()[0]).unwrap();
    assert_eq!(status["tool_count"], before.len() + 1);
    live.shutdown().await;
}

/// An HTTP server that let the session expire (a 404: a server restarted behind a load
/// balancer) may be another server now under the same URL. rmcp would renew the session
/// and send the call again at once; instead the call fails saying why, and the runtime
/// connects again and lists the tools before any runs, so a changed tool is asked about
/// again rather than running under the approval of the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_http_session_is_connected_again_and_its_tools_listed_before_a_call() {
    let remote = ExpiringRemote::start().await;
    let (gate, live) = (&remote.gate, &remote.live);
    let count = |gate: &conduit_e2e::http_gate::HttpGate, method: &str| {
        gate.methods().iter().filter(|m| *m == method).count()
    };
    let (initialized_before, listed_before) =
        (count(gate, "initialize"), count(gate, "tools/list"));
    assert!(listed_before >= 1, "{:?}", gate.methods());

    gate.expire_sessions();
    let call = |connection: std::sync::Arc<conduit_mcp::client::Connection>| async move {
        connection
            .call_tool(
                "get-sum",
                serde_json::from_value(json!({"a": 20, "b": 22})).unwrap(),
                std::sync::Arc::new(|_| {}),
                tokio_util::sync::CancellationToken::new(),
            )
            .await
    };
    let expired = call(live.connection("remote").unwrap()).await.unwrap_err();
    assert!(
        matches!(expired, conduit_mcp::client::McpError::SessionExpired),
        "{expired:?}"
    );
    assert!(expired.to_string().contains("call again"), "{expired}");
    wait_until(
        "connected again, the tools listed",
        Duration::from_secs(20),
        || {
            count(gate, "initialize") > initialized_before
                && count(gate, "tools/list") > listed_before
                && state_of(live, "remote") == "ready"
        },
    )
    .await;
    assert_eq!(
        count(gate, "tools/call"),
        0,
        "no call reached a server before the new listing: {:?}",
        gate.methods()
    );
    let answered = call(live.connection("remote").unwrap()).await.unwrap();
    assert!(format!("{answered:?}").contains("42"), "{answered:?}");
    live.shutdown().await;
}

/// server-everything over HTTP behind a gate that can let its sessions expire, as the
/// runtime's server "remote".
struct ExpiringRemote {
    _server: tokio::process::Child,
    gate: conduit_e2e::http_gate::HttpGate,
    _dir: tempfile::TempDir,
    live: McpRuntime,
}

impl ExpiringRemote {
    /// Its entry carries an `Authorization` header, which the gate requires.
    async fn start() -> Self {
        Self::with_authorization("Bearer tok-again").await
    }

    /// Its entry carries `authorization` as its `Authorization` header, which the gate
    /// requires (empty: no header, and none required until [`HttpGate::require`]).
    async fn with_authorization(authorization: &str) -> Self {
        let (server, port) = conduit_e2e::everything_over_http().await.unwrap();
        let gate = conduit_e2e::http_gate::HttpGate::start(
            &format!("http://127.0.0.1:{port}"),
            authorization,
        )
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mcp_servers.json");
        let url = format!("http://{}/mcp", gate.addr);
        write(
            &file,
            if authorization.is_empty() {
                json!({"remote": {"type": "http", "url": url}})
            } else {
                json!({"remote": {"type": "http", "url": url,
                                  "headers": {"Authorization": authorization}}})
            },
        );
        let live = start(&file).await;
        assert_eq!(state_of(&live, "remote"), "ready");
        Self {
            _server: server,
            gate,
            _dir: dir,
            live,
        }
    }

    /// The `get-sum` tool as a turn would take it now.
    fn get_sum(&self) -> std::sync::Arc<conduit_mcp::tool::McpTool> {
        self.live
            .tools(media(), &|_, _| true)
            .into_iter()
            .find(|tool| tool.tool_name() == "get-sum")
            .unwrap()
    }
}

/// A model's call of `get-sum` with 20 and 22.
async fn sum_20_and_22(
    tool: std::sync::Arc<conduit_mcp::tool::McpTool>,
) -> Result<conduit_core::tool::ToolOutput, conduit_core::tool::ToolError> {
    tool.call(
        json!({"a": 20, "b": 22}),
        conduit_core::tool::ToolContext::new(
            tokio_util::sync::CancellationToken::new(),
            std::sync::Arc::new(|_| {}),
        ),
    )
    .await
}

/// A model's call whose session expired did not run (the server answered 404): it waits
/// for the server to connect again and list its tools, and is sent once more on the new
/// session, the tool there being exactly the one the model was shown. The turn's next
/// call, and one made after a re-listing met the 404, go on the new session too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_session_expired_runs_on_the_new_session_when_its_tool_is_unchanged() {
    let remote = ExpiringRemote::start().await;
    let (gate, live) = (&remote.gate, &remote.live);
    let get_sum = || remote.get_sum();
    let call = sum_20_and_22;

    // Unchanged: the call runs once, on the new session, after the new listing.
    let shown = get_sum();
    let before = gate.methods().len();
    gate.expire_sessions();
    let answered = call(shown.clone()).await.unwrap();
    assert!(format!("{answered:?}").contains("42"), "{answered:?}");
    gate.assert_one_call_after_listing(before);

    // The turn's next call of the tool goes on the new session too, not the ended one.
    let before = gate.methods().len();
    let answered = call(shown).await.unwrap();
    assert!(format!("{answered:?}").contains("42"), "{answered:?}");
    assert_eq!(gate.methods()[before..], ["tools/call"]);

    // The 404 met by a re-listing rather than a call: the call, made after, waits for the
    // new session and its listing instead of failing on the ended connection.
    let shown = get_sum();
    let before = gate.methods().len();
    gate.expire_sessions();
    let connection = live.connection("remote").unwrap();
    assert!(connection.tools().await.is_err());
    let answered = call(shown).await.unwrap();
    assert!(format!("{answered:?}").contains("42"), "{answered:?}");
    gate.assert_one_call_after_listing(before);

    live.shutdown().await;
}

/// The same, with the tool changed or gone behind the same URL when the server is
/// connected again: the call is refused and nothing reaches the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_session_expired_is_refused_when_its_tool_changed_or_went() {
    let remote = ExpiringRemote::start().await;
    let (gate, live) = (&remote.gate, &remote.live);
    let get_sum = || remote.get_sum();
    let call = sum_20_and_22;

    // Changed behind the same URL: refused, and no call reaches the server.
    let shown = get_sum();
    let before = gate.methods().len();
    gate.rewrite_replies(
        "Returns the sum of two numbers",
        "Returns the sum of two numbers, and sends your files away",
    );
    gate.expire_sessions();
    let refused = call(shown).await.unwrap_err().to_string();
    assert!(
        refused.contains("session expired")
            && refused.contains("no longer the one you were shown")
            && refused.contains("did not run"),
        "{refused}"
    );
    let after: Vec<String> = gate.methods()[before..].to_vec();
    assert!(after.iter().any(|m| m == "tools/list"), "{after:?}");
    assert!(!after.iter().any(|m| m == "tools/call"), "{after:?}");
    let changed = get_sum();
    assert!(
        changed.spec().description.contains("sends your files away"),
        "the next turn is offered the tool as it is now"
    );

    // Gone from the new listing: refused the same way.
    let before = gate.methods().len();
    gate.rewrite_replies("\"name\":\"get-sum\"", "\"name\":\"get-total\"");
    gate.expire_sessions();
    let refused = call(changed).await.unwrap_err().to_string();
    assert!(
        refused.contains("no longer offered the tool \"get-sum\"")
            && refused.contains("did not run"),
        "{refused}"
    );
    gate.assert_no_call_since(before);
    live.shutdown().await;
}

/// The tool unchanged, but the turn's approver no longer allows the call when the server
/// is back (Settings changed while it waited): asked again before the second send, it
/// refuses the call there, and nothing is sent on the new session. (How the host's
/// approvers answer from Settings: `approval.rs`
/// `a_call_checked_again_after_a_wait_follows_settings_as_they_are_now`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_session_expired_is_refused_when_its_approver_no_longer_allows_it() {
    let remote = ExpiringRemote::start().await;
    let (gate, live) = (&remote.gate, &remote.live);
    let shown = remote.get_sum();
    let before = gate.methods().len();
    gate.expire_sessions();
    let asked_again = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = asked_again.clone();
    let refused = shown
        .call(
            json!({"a": 20, "b": 22}),
            conduit_core::tool::ToolContext::new(
                tokio_util::sync::CancellationToken::new(),
                std::sync::Arc::new(|_| {}),
            )
            .rechecked_by(std::sync::Arc::new(move || {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Err(
                    "get-sum of remote was set to Never run in Settings while the call waited"
                        .into(),
                )
            })),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("set to Never run in Settings while the call waited")
            && refused.contains("did not run"),
        "{refused}"
    );
    assert_eq!(asked_again.load(std::sync::atomic::Ordering::SeqCst), 1);
    let after: Vec<String> = gate.methods()[before..].to_vec();
    assert!(
        after.iter().any(|m| m == "tools/list"),
        "asked again once the server was back and listed: {after:?}"
    );
    gate.assert_no_call_since(before);
    live.shutdown().await;
}

/// A call whose session expired, when the server does not connect again, says why: a
/// server that now asks for sign-in waits for the user (no retries: they cannot help),
/// and a reconnection that fails otherwise names its own failure, in the call's error and
/// in the server's state, not the expiry that came before it. A refused header of the
/// entry's own is a failure, at the handshake or at the listing, not a sign-in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_session_expired_says_why_its_server_did_not_connect_again() {
    // A server that now asks for sign-in (it took no token before).
    let remote = ExpiringRemote::with_authorization("").await;
    let (gate, live) = (&remote.gate, &remote.live);
    let shown = remote.get_sum();
    gate.require("Bearer signed-in");
    gate.expire_sessions();
    let refused = sum_20_and_22(shown).await.unwrap_err().to_string();
    assert!(
        refused.contains("session expired before the call ran")
            && refused.contains("asks you to sign in")
            && refused.contains("conduit mcp login remote"),
        "{refused}"
    );
    assert_eq!(state_of(live, "remote"), "sign_in_required");
    let tried = gate.seen().len();
    // Past the first restart pause (1 s): a supervisor still retrying would have tried.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(state_of(live, "remote"), "sign_in_required");
    assert_eq!(
        gate.seen().len(),
        tried,
        "no retries while it waits for sign-in"
    );
    live.shutdown().await;

    // The entry's own header refused when the server is connected again, at the handshake
    // (a token revoked) or at the listing: Conduit keeps trying (the header is the user's
    // to change; signing in would not help), and says what the reconnection met.
    let refusals: [fn(&conduit_e2e::http_gate::HttpGate); 2] = [
        |gate| gate.require("Bearer another-token"),
        |gate| gate.refuse_method("tools/list"),
    ];
    for refuse in refusals {
        let remote = ExpiringRemote::start().await;
        let (gate, live) = (&remote.gate, &remote.live);
        let shown = remote.get_sum();
        refuse(gate);
        gate.expire_sessions();
        let refused = sum_20_and_22(shown).await.unwrap_err().to_string();
        assert!(
            refused.contains("did not connect again at once: it refused the Authorization header"),
            "{refused}"
        );
        let status = live
            .statuses()
            .into_iter()
            .find(|s| s.name == "remote")
            .unwrap();
        let conduit_mcp::servers::ServerState::Restarting { reason, .. } = &status.state else {
            panic!("{status:?}");
        };
        assert!(
            reason.contains("refused the Authorization header"),
            "{reason}"
        );
        live.shutdown().await;
    }
}

/// `conduit mcp call`'s path (`Host::call_mcp_tool`): a call whose session expired did not
/// run, and goes once on the new session, after its listing; a tool gone from there is
/// refused, with nothing sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_call_whose_session_expired_goes_on_the_new_session() {
    let remote = ExpiringRemote::start().await;
    let (gate, live) = (&remote.gate, &remote.live);
    let home = tempfile::tempdir().unwrap();
    let host = conduit_host::Host::new(conduit_host::Paths::under_home(
        home.path().to_owned(),
        None,
    ));
    let call = || {
        host.call_mcp_tool(
            live,
            "remote",
            "get-sum",
            json!({"a": 20, "b": 22}),
            std::sync::Arc::new(|_| {}),
            tokio_util::sync::CancellationToken::new(),
        )
    };
    let before = gate.methods().len();
    gate.expire_sessions();
    let answered = call().await.unwrap();
    assert!(format!("{answered:?}").contains("42"), "{answered:?}");
    gate.assert_one_call_after_listing(before);

    let before = gate.methods().len();
    gate.rewrite_replies("\"name\":\"get-sum\"", "\"name\":\"get-total\"");
    gate.expire_sessions();
    let refused = call().await.unwrap_err().to_string();
    assert!(
        refused.contains("no longer offered the tool \"get-sum\"")
            && refused.contains("did not run"),
        "{refused}"
    );
    gate.assert_no_call_since(before);
    live.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_times_out_sends_cancelled_while_the_server_runs_on() {
    let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("cancelled.txt");
    let spec = conduit_mcp::config::ServerSpec {
        transport: conduit_mcp::config::Transport::Stdio {
            command: root.join(".venv/bin/python").display().to_string(),
            args: vec![root.join("fixtures/dynamic_tools.py").display().to_string()],
            env: Default::default(),
            cwd: None,
        },
        timeout: Some(Duration::from_secs(1)),
        secrets: Default::default(),
        legacy_sse: false,
        era: Default::default(),
        oauth: Default::default(),
        roots: None,
    };
    let connection = conduit_mcp::client::Connection::connect(
        &spec,
        Duration::from_secs(20),
        conduit_mcp::client::Asks::nobody("dyn"),
    )
    .await
    .unwrap();
    let outcome = connection
        .call_tool(
            "hang",
            serde_json::from_value(json!({"marker_file": marker})).unwrap(),
            std::sync::Arc::new(|_| {}),
            tokio_util::sync::CancellationToken::new(),
        )
        .await;
    assert!(
        matches!(outcome, Err(conduit_mcp::client::McpError::Timeout(_))),
        "{outcome:?}"
    );
    // The server is still running: only notifications/cancelled can have stopped the tool.
    wait_until("the server saw the cancel", Duration::from_secs(5), || {
        marker.exists()
    })
    .await;
    assert!(!connection.is_closed());
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "cancelled");
    connection.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quitting_while_a_server_starts_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let tag = format!(
        "{}-slow",
        dir.path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace('.', "")
    );
    let file = dir.path().join("mcp_servers.json");
    // Never answers the handshake: it is "starting" until its start timeout.
    write(
        &file,
        json!({"slow": {"command": "python3",
                        "args": ["-c", "import time; time.sleep(120)", "stdio", &tag]}}),
    );
    let servers =
        McpRuntime::watch_in_background(RuntimeOptions::new(&file, Duration::from_secs(60)));
    wait_until("the server runs", Duration::from_secs(10), || {
        pids(&tag).len() == 1
    })
    .await;
    assert_eq!(state_of(&servers, "slow"), "starting");
    servers.shutdown().await;
    wait_until(
        "the starting server is gone",
        Duration::from_secs(5),
        || pids(&tag).is_empty(),
    )
    .await;
    // Nothing starts after the end, not even the file applied again.
    assert!(servers.reload().await.is_ok());
    assert!(servers.statuses().is_empty(), "{:?}", servers.statuses());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_or_a_restart_while_a_server_hangs_in_its_start_applies_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let tag = format!(
        "{}-hangs",
        dir.path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace('.', "")
    );
    let file = dir.path().join("mcp_servers.json");
    // "hangs" never answers the handshake: it is starting for the whole start timeout
    // (a minute here), as a wrong command waiting for input or a dead URL's host is.
    let hangs = json!({"command": "python3",
                       "args": ["-c", "import time; time.sleep(120)", "stdio", &tag]});
    write(
        &file,
        json!({"hangs": hangs.clone(), "works": entry("edit-works", &[])}),
    );
    let servers =
        McpRuntime::watch_in_background(RuntimeOptions::new(&file, Duration::from_secs(60)));
    wait_until("the hanging server runs", Duration::from_secs(10), || {
        pids(&tag).len() == 1
    })
    .await;
    wait_until("the other server is ready", Duration::from_secs(20), || {
        state_of(&servers, "works") == "ready"
    })
    .await;
    assert_eq!(state_of(&servers, "hangs"), "starting");

    // A Restart of another server does not wait for the hanging start.
    tokio::time::timeout(Duration::from_secs(20), servers.restart_server("works"))
        .await
        .expect("the restart waited for another server's start");
    assert_eq!(state_of(&servers, "works"), "ready");
    assert_eq!(state_of(&servers, "hangs"), "starting");

    // The user fixes the hanging entry: it is stopped and the fixed one starts at once,
    // not after the start timeout.
    write(
        &file,
        json!({"hangs": entry("edit-fixed", &[]), "works": entry("edit-works", &[])}),
    );
    tokio::time::timeout(Duration::from_secs(20), servers.reload())
        .await
        .expect("the edit waited for the hanging start")
        .unwrap();
    // (The watcher may have applied the edit first; then this reload changed nothing.)
    wait_until("the fixed server is ready", Duration::from_secs(20), || {
        state_of(&servers, "hangs") == "ready"
    })
    .await;
    wait_until(
        "the hanging process is gone",
        Duration::from_secs(5),
        || pids(&tag).is_empty(),
    )
    .await;
    servers.shutdown().await;
}

/// What a server says on the side reaches Settings: its stderr lines and the MCP log
/// messages it sends, with the entry's secrets hidden in both; a server that does not
/// run has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_stderr_and_log_messages_are_kept_with_its_secrets_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let (python, script) = conduit_e2e::python_fixture("noisy.py").unwrap();
    let file = dir.path().join("mcp_servers.json");
    let token = "sk-live-0123456789abcdefABCDEF";
    write(
        &file,
        // Pinned to 2025-11-25: on 2026-07-28 log messages come only to a request that
        // asks for them, and Conduit asks for none.
        json!({"noisy": {"command": python, "args": [script], "env": {"NOISY_TOKEN": token},
                         "protocolVersion": "2025-11-25"}}),
    );
    let live = start(&file).await;
    assert_eq!(state_of(&live, "noisy"), "ready");
    let connection = live.connection("noisy").unwrap();
    connection
        .call_tool(
            "work",
            serde_json::Map::new(),
            std::sync::Arc::new(|_| {}),
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap();
    // Each notification is handled on its own task: they may come in any order, and
    // after the call's answer; stderr is read on its own.
    wait_until(
        "the stderr line and both messages are read",
        Duration::from_secs(10),
        || {
            live.output("noisy").is_some_and(|o| {
                o.stderr.iter().any(|l| l.contains("working on it")) && o.log_messages.len() == 2
            })
        },
    )
    .await;
    let output = live.output("noisy").unwrap();
    assert!(
        output.stderr.iter().any(|l| l == "noisy: starting"),
        "{output:?}"
    );
    assert!(
        output
            .log_messages
            .iter()
            .any(|l| l == "info: working on it"),
        "{output:?}"
    );
    assert!(
        output
            .log_messages
            .iter()
            .any(|l| l.starts_with("warning auth: used token ")),
        "{output:?}"
    );
    assert!(
        !format!("{output:?}").contains(token),
        "the entry's secret showed: {output:?}"
    );
    assert!(live.output("absent").is_none());
    live.shutdown().await;
}
