//! Conduit's footprint beside the floor (run by `make bench`, ignored by `make test`): the
//! release `conduit-desktop` and a bare Tauri window of the same Tauri version and release
//! profile (`benches/bare-window`), each started under Xvfb: start to visible window,
//! the app process's RSS and that of all its processes (WebKit's included) idle 8 s after
//! the window showed, and the binaries' sizes; Conduit also with 1 and 5 stdio MCP servers
//! connected (their own processes counted apart); and the bare window showing Conduit's
//! built page with no engine behind it (`bare-window-page`), which tells the page's share
//! of the difference from the engine's. The bare window and Conduit are also measured with
//! WebKit painting their tiles on the CPU (`WEBKIT_SKIA_ENABLE_CPU_RENDERING=1`, a choice
//! the user can make; ARCHITECTURE.md, "Footprint", session 17). Ratios matter, not
//! absolute times: all run in the same session on the same machine. And the `conduit` CLI reaching MCP servers over HTTP
//! (`conduit mcp list` against a loopback `conduit mcp serve --http`): its peak memory
//! and time with 0 to 10 servers, signed in by a header or waiting for sign-in.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};

use conduit_e2e::footprint::{
    App, DisplayKeeper, Memory, app_cpu_ticks, release_binary, ticks_per_second,
};
use conduit_e2e::{artifacts_dir, workspace_root};
use serde_json::json;

/// Runs per configuration (the median start and memory are reported).
const RUNS: usize = 3;
/// How long after its window showed an app is measured idle.
const IDLE: Duration = Duration::from_secs(8);
/// How long the CPU an idle app uses is counted, after `IDLE`.
const IDLE_CPU: Duration = Duration::from_secs(10);
/// Bound on any wait for a window or for servers.
const PATIENCE: Duration = Duration::from_secs(60);

/// Counts the "MCP server ready" lines of Conduit's log under `home`.
fn servers_ready(home: &Path) -> usize {
    std::fs::read_to_string(home.join("logs/conduit.log"))
        .map(|log| log.matches("MCP server ready").count())
        .unwrap_or(0)
}

/// A `CONDUIT_HOME` with `servers` stdio MCP servers (the official Python SDK's, one tool).
fn conduit_home(servers: usize) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let root = workspace_root().join("tests/mcp-servers");
    let python = root.join(".venv/bin/python");
    assert!(
        python.is_file(),
        "run `make setup-test`: the Python test servers are missing"
    );
    let folder = home.path().join("frames");
    std::fs::create_dir_all(&folder).unwrap();
    let entries: serde_json::Map<String, serde_json::Value> = (1..=servers)
        .map(|n| {
            (
                format!("frames{n}"),
                json!({"command": python, "args": [root.join("fixtures/design_frames.py"), folder]}),
            )
        })
        .collect();
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({ "mcpServers": entries }).to_string(),
    )
    .unwrap();
    home
}

/// What one configuration measured: start times and memory of every run.
struct Row {
    name: String,
    starts_ms: Vec<f64>,
    /// The run whose app and WebKit processes held the median amount (all processes).
    /// WebKit's painted buffers make a window's memory take one of two levels, about
    /// 17 MB apart, from one run to the next: the median is the level most runs took.
    memory: Memory,
    /// CPU seconds per minute the app and WebKit's processes used idle, each run.
    idle_cpu: Vec<f64>,
}

impl Row {
    fn idle_cpu(&self) -> f64 {
        let mut sorted = self.idle_cpu.clone();
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    }

    fn start_ms(&self) -> f64 {
        let mut sorted = self.starts_ms.clone();
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    }
}

fn measure(name: &str, binary: &Path, servers: Option<usize>, env: &[(&str, &OsStr)]) -> Row {
    let mut starts_ms = Vec::new();
    let mut memories = Vec::new();
    let mut idle_cpu = Vec::new();
    for _ in 0..RUNS {
        let home = conduit_home(servers.unwrap_or(0));
        let started = Instant::now();
        let mut envs = vec![("CONDUIT_HOME", home.path().as_os_str())];
        envs.extend_from_slice(env);
        let mut app = App::spawn(binary, &envs, &home.path().join("stderr.txt"));
        app.wait_for_window();
        let shown = Instant::now();
        starts_ms.push((shown - started).as_secs_f64() * 1000.0);
        if let Some(count) = servers {
            let deadline = Instant::now() + PATIENCE;
            while servers_ready(home.path()) < count {
                assert!(
                    Instant::now() < deadline,
                    "{name}: only {} of {count} servers ready within {PATIENCE:?}",
                    servers_ready(home.path())
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        std::thread::sleep(IDLE.saturating_sub(shown.elapsed()));
        memories.push(Memory::of(app.pid()));
        // Idle should be idle: a window with nothing to do uses next to no CPU.
        let before = app_cpu_ticks(app.pid());
        std::thread::sleep(IDLE_CPU);
        let used = app_cpu_ticks(app.pid()).saturating_sub(before) as f64 / ticks_per_second();
        idle_cpu.push(used * 60.0 / IDLE_CPU.as_secs_f64());
        drop(app);
    }
    memories.sort_by_key(Memory::all);
    Row {
        name: name.to_owned(),
        starts_ms,
        memory: memories.swap_remove(memories.len() / 2),
        idle_cpu,
    }
}

/// How much more one row's memory is than another's, in MB.
struct Gap {
    app: f64,
    all: f64,
    pss: f64,
}

impl Gap {
    fn between(row: &Row, base: &Row) -> Self {
        Self {
            app: mb(row.memory.app) - mb(base.memory.app),
            all: mb(row.memory.all()) - mb(base.memory.all()),
            pss: mb(row.memory.pss) - mb(base.memory.pss),
        }
    }
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_000_000.0
}

#[test]
#[ignore = "a benchmark: run by `make bench`"]
fn footprint_beside_a_bare_tauri_window() {
    assert!(
        std::env::var_os("DISPLAY").is_some(),
        "no display: run under Xvfb (`make bench` does)"
    );
    let _display = DisplayKeeper::start();
    let bare = release_binary("bare-window");
    let bare_with_page = release_binary("bare-window-page");
    let desktop = release_binary("conduit-desktop");
    let cli = release_binary("conduit");
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();

    // The floor before and after Conduit: a busy moment of the machine shows as a gap
    // between the two.
    // WebKit paints tiles on the GPU by default (and with the variable at 0, whatever the
    // shell running the bench set); the rows marked so paint them on the CPU.
    let painting = |value: &'static str| [("WEBKIT_SKIA_ENABLE_CPU_RENDERING", OsStr::new(value))];
    let (gpu, cpu) = (painting("0"), painting("1"));
    let floor = measure("bare Tauri window", &bare, None, &gpu);
    let floor_cpu = measure("bare window, CPU painting", &bare, None, &cpu);
    let page = measure("bare window, Conduit's page", &bare_with_page, None, &gpu);
    let rows = [
        measure("Conduit, no servers", &desktop, Some(0), &gpu),
        measure("Conduit, 1 stdio server", &desktop, Some(1), &gpu),
        measure("Conduit, 5 stdio servers", &desktop, Some(5), &gpu),
    ];
    let conduit_cpu = measure("Conduit, CPU painting", &desktop, Some(0), &cpu);
    let floor_again = measure("bare Tauri window (again)", &bare, None, &gpu);

    println!(
        "Footprint (release builds under Xvfb; RSS idle {} s after the window showed; median of {RUNS} runs)",
        IDLE.as_secs()
    );
    println!(
        "| {:<28} | {:>16} | {:>15} | {:>22} | {:>20} | {:>12} | {:>14} |",
        "",
        "start to window",
        "app process",
        "with WebKit processes",
        "same, by PSS",
        "MCP servers",
        "idle CPU"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut report = Vec::new();
    for row in [
        &floor,
        &floor_cpu,
        &page,
        &rows[0],
        &rows[1],
        &rows[2],
        &conduit_cpu,
        &floor_again,
    ] {
        let ratio = |a: f64, b: f64| format!("{:.2}×", a / b);
        println!(
            "| {:<28} | {:>6.0} ms {:>6} | {:>6.0} MB {:>5} | {:>6.0} MB {:>12} | {:>6.0} MB {:>10} | {:>9.0} MB | {:>7.2} s/min |",
            row.name,
            row.start_ms(),
            ratio(row.start_ms(), floor.start_ms()),
            mb(row.memory.app),
            ratio(mb(row.memory.app), mb(floor.memory.app)),
            mb(row.memory.all()),
            ratio(mb(row.memory.all()), mb(floor.memory.all())),
            mb(row.memory.pss),
            ratio(mb(row.memory.pss), mb(floor.memory.pss)),
            mb(row.memory.servers),
            row.idle_cpu(),
        );
        report.push(json!({
            "name": row.name, "start_ms": row.starts_ms, "app_rss": row.memory.app,
            "webkit_rss": row.memory.webkit, "servers_rss": row.memory.servers,
            "app_and_webkit_pss": row.memory.pss, "idle_cpu_s_per_min": row.idle_cpu,
        }));
    }
    let conduit = &rows[0];
    let goals = Gap::between(conduit, &floor);
    println!(
        "differences with no servers: start {:+.0} ms (goal ≤ +50), app process {:+.0} MB (goal ≤ +20), all processes {:+.0} MB (goal ≤ +40; by PSS {:+.0} MB)",
        conduit.start_ms() - floor.start_ms(),
        goals.app,
        goals.all,
        goals.pss,
    );
    let both_cpu = Gap::between(&conduit_cpu, &floor_cpu);
    println!(
        "both painting tiles on the CPU (WEBKIT_SKIA_ENABLE_CPU_RENDERING=1): app process {:+.0} MB, all processes {:+.0} MB (by PSS {:+.0} MB); Conduit painting on the CPU beside the bare window as shipped: all processes {:+.0} MB",
        both_cpu.app,
        both_cpu.all,
        both_cpu.pss,
        Gap::between(&conduit_cpu, &floor).all,
    );
    let (page_share, engine_share) = (Gap::between(&page, &floor), Gap::between(conduit, &page));
    println!(
        "of which Conduit's page (in the bare window, no engine): app process {:+.0} MB, all processes {:+.0} MB; Conduit beside its page: app process {:+.0} MB, all processes {:+.0} MB",
        page_share.app, page_share.all, engine_share.app, engine_share.all,
    );
    println!(
        "binaries: conduit-desktop {:.1} MB, bare window {:.1} MB ({:.2}×, goal ≤ 2×); conduit CLI {:.1} MB (goal ≤ 12 MB)",
        mb(size(&desktop)),
        mb(size(&bare)),
        size(&desktop) as f64 / size(&bare) as f64,
        mb(size(&cli)),
    );
    let out = artifacts_dir("bench");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        out.join("footprint.json"),
        serde_json::to_string_pretty(&json!({
            "rows": report,
            "binaries": {"conduit-desktop": size(&desktop), "bare-window": size(&bare), "conduit": size(&cli)},
        }))
        .unwrap(),
    )
    .unwrap();
}

/// Runs `conduit` with `args` under `home` to its end: its peak resident memory (bytes,
/// from `wait4`, which std's `Child` does not expose) and how long it took.
/// `conduit` with `args` under `home` (secrets in a file, no config from the environment),
/// nothing on its stdin or stderr.
fn cli_command(cli: &Path, home: &Path, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(cli);
    command
        .args(args)
        .env("CONDUIT_HOME", home)
        .env("CONDUIT_SECRET_STORE", "file")
        .env_remove("CONDUIT_MCP_CONFIG")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    command
}

// The child is reaped by wait4, which clippy cannot see.
#[allow(unsafe_code, clippy::zombie_processes)]
fn peak_of(cli: &Path, home: &Path, args: &[&str]) -> (u64, Duration) {
    let started = Instant::now();
    let child = cli_command(cli, home, args)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is this process's own child, not yet waited for; both pointers are to
    // live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let took = started.elapsed();
    assert_eq!(waited, pid, "wait4 failed");
    // Linux gives ru_maxrss in kilobytes.
    (u64::try_from(usage.ru_maxrss).unwrap() * 1024, took)
}

#[test]
#[ignore = "a benchmark: run by `make bench`"]
fn the_cli_reaching_mcp_servers_over_http() {
    let cli = release_binary("conduit");
    // The server: Conduit's own, on loopback, with its token.
    let served_home = tempfile::tempdir().unwrap();
    let mut server = cli_command(
        &cli,
        served_home.path(),
        &["mcp", "serve", "--http", "127.0.0.1:0"],
    )
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(server.stdout.take().unwrap()));
    let url = lines
        .next()
        .unwrap()
        .unwrap()
        .strip_prefix("Serving MCP at ")
        .expect("the server says where it listens")
        .to_owned();
    let token = lines
        .nth(1)
        .expect("a new server shows its token once")
        .unwrap();

    let home = tempfile::tempdir().unwrap();
    let configs = [
        ("no servers", 0, true),
        ("1 over HTTP", 1, true),
        ("5 over HTTP", 5, true),
        ("10 over HTTP", 10, true),
        ("10 waiting for sign-in", 10, false),
    ];
    println!(
        "`conduit mcp list` against `conduit mcp serve --http` on loopback (release build; median of {RUNS} runs)"
    );
    println!("| {:<24} | {:>9} | {:>8} |", "", "peak RSS", "time");
    println!("| --- | ---: | ---: |");
    let mut report = Vec::new();
    for (name, count, with_token) in configs {
        let servers: serde_json::Map<String, serde_json::Value> = (0..count)
            .map(|n| {
                let entry = if with_token {
                    json!({"type": "http", "url": url, "headers": {"Authorization": format!("Bearer {token}")}})
                } else {
                    // A URL of its own each: tokens are kept by URL.
                    json!({"type": "http", "url": format!("{url}?n={n}")})
                };
                (format!("s{n}"), entry)
            })
            .collect();
        let file = home
            .path()
            .join(format!("servers-{count}-{with_token}.json"));
        std::fs::write(&file, json!({"mcpServers": servers}).to_string()).unwrap();
        let file = file.to_string_lossy().into_owned();
        let mut runs: Vec<(u64, Duration)> = (0..RUNS)
            .map(|_| peak_of(&cli, home.path(), &["mcp", "list", "--mcp-config", &file]))
            .collect();
        runs.sort();
        let (peak, _) = runs[RUNS / 2];
        let mut times: Vec<Duration> = runs.iter().map(|(_, t)| *t).collect();
        times.sort();
        let took = times[RUNS / 2];
        println!(
            "| {name:<24} | {:>6.1} MB | {:>5.2} s |",
            mb(peak),
            took.as_secs_f64()
        );
        report.push(json!({"name": name, "peak_rss": peak, "seconds": took.as_secs_f64()}));
    }
    let _ = server.kill();
    let _ = server.wait();
    let out = artifacts_dir("bench");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        out.join("cli_http_servers.json"),
        serde_json::to_string_pretty(&report).unwrap(),
    )
    .unwrap();
}
