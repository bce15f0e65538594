//! The official conformance suite (`@modelcontextprotocol/conformance@0.2.0-alpha.12`)
//! against Conduit's MCP client, both frozen requirement sets. The client under test
//! (`examples/conformance_client.rs`) runs the app's own connection, era detection,
//! input_required rounds, elicitation and OAuth sign-in code; only its answers come from
//! the scenario (and the authorization code from the redirect, read headlessly). Every
//! required scenario, authorization included, must pass; the counts are printed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::process::Command;

/// One suite run at a time: two at once (the test harness runs tests in parallel) race
/// for the ports their mock servers take, and authorization scenarios then fail at random.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run_requirements(revision: &str) -> BTreeMap<String, bool> {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let modules = conduit_e2e::workspace_root().join("tests/mcp-servers/node_modules");
    let node22 = modules.join(".bin/node");
    let suite = modules.join("conformance-next/dist/index.js");
    assert!(
        node22.is_file() && suite.is_file(),
        "run `make test`: the conformance suite 0.2.0-alpha.12 is missing"
    );
    let client = conduit_e2e::target_profile_dir()
        .unwrap()
        .join("examples/conformance_client");
    assert!(
        client.is_file(),
        "build the example first (`cargo build --workspace --all-targets`)"
    );
    // Each scenario's checks and the client's own output, to see why one failed.
    let details = conduit_e2e::artifacts_dir("conformance-client").join(revision);
    // Only this run's (the suite adds a folder per scenario and run).
    if details.exists() {
        std::fs::remove_dir_all(&details).unwrap();
    }
    let out = Command::new(&node22)
        .arg(&suite)
        .args(["client", "--requirements", revision, "--output-dir"])
        .arg(&details)
        .arg("--command")
        .arg(&client)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The whole report, to see why a scenario failed.
    let log = conduit_e2e::artifacts_dir("conformance-client").join(format!("{revision}.log"));
    let kept = log
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&log, &text));
    if let Err(e) = kept {
        println!("cannot keep the report at {}: {e}", log.display());
    }
    // One line per scenario: "✓ name: N passed, M failed" or "✗ name: ...".
    let scenarios: BTreeMap<String, bool> = text
        .lines()
        .filter_map(|line| {
            let (passed, rest) = if let Some(rest) = line.strip_prefix("✓ ") {
                (true, rest)
            } else {
                (false, line.strip_prefix("✗ ")?)
            };
            let (name, counts) = rest.split_once(": ")?;
            counts
                .contains(" passed")
                .then(|| (name.to_owned(), passed))
        })
        .collect();
    assert!(!scenarios.is_empty(), "no scenario ran: {text}");
    // What is scored for the revision (the suite prints the unscored ones after this).
    let unscored: Vec<String> = text
        .split("Not scored")
        .nth(1)
        .map(|tail| {
            tail.lines()
                .filter_map(|l| l.trim().strip_prefix("✗ ").or(l.trim().strip_prefix("✓ ")))
                .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default();
    scenarios
        .into_iter()
        .filter(|(name, _)| !unscored.contains(name))
        .collect()
}

fn check(revision: &str) {
    let scenarios = run_requirements(revision);
    let (auth, other): (Vec<_>, Vec<_>) = scenarios
        .iter()
        .partition(|(name, _)| name.starts_with("auth/"));
    let failing: Vec<&String> = other
        .iter()
        .filter(|(_, passed)| !**passed)
        .map(|(name, _)| *name)
        .collect();
    let auth_passed = auth.iter().filter(|(_, passed)| **passed).count();
    println!(
        "{revision}: {} of {} required client scenarios outside authorization pass; authorization {auth_passed} of {}",
        other.len() - failing.len(),
        other.len(),
        auth.len()
    );
    let auth_failing: Vec<&String> = auth
        .iter()
        .filter(|(_, passed)| !**passed)
        .map(|(name, _)| *name)
        .collect();
    assert!(failing.is_empty(), "{revision}: failing {failing:?}");
    assert!(
        auth_failing.is_empty(),
        "{revision}: authorization scenarios failing {auth_failing:?}"
    );
    assert!(!other.is_empty() && !auth.is_empty());
}

#[test]
fn the_2025_11_25_client_requirements_pass() {
    check("2025-11-25");
}

#[test]
fn the_2026_07_28_client_requirements_pass() {
    check("2026-07-28");
}
