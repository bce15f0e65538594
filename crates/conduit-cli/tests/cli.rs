//! The `conduit` binary as a user runs it: version, help, paths, exit codes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

fn conduit(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_conduit"))
        .args(args)
        .env("CONDUIT_HOME", home)
        .env_remove("CONDUIT_MCP_CONFIG")
        .output()
        .expect("the conduit binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn version_prints_the_workspace_version() {
    let home = tempfile::tempdir().unwrap();
    let out = conduit(home.path(), &["--version"]);
    assert!(out.status.success());
    assert_eq!(
        stdout(&out).trim(),
        format!("conduit {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn help_lists_the_commands() {
    let home = tempfile::tempdir().unwrap();
    let out = conduit(home.path(), &["--help"]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.contains("paths"), "{text}");
    assert!(text.contains("--verbose"), "{text}");
}

#[test]
fn paths_honour_conduit_home_and_the_log_file_is_written() {
    let home = tempfile::tempdir().unwrap();
    let out = conduit(home.path(), &["paths", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let paths: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let under_home = |name: &str| home.path().join(name).display().to_string();
    assert_eq!(paths["dataDir"], home.path().display().to_string());
    assert_eq!(paths["settingsFile"], under_home("settings.json"));
    assert_eq!(paths["mcpConfigFile"], under_home("mcp_servers.json"));
    assert_eq!(paths["logFile"], under_home("logs/conduit.log"));
    assert!(home.path().join("logs/conduit.log").exists());
}

#[test]
fn paths_in_plain_text_name_each_file() {
    let home = tempfile::tempdir().unwrap();
    let out = conduit(home.path(), &["paths"]);
    assert!(out.status.success());
    let text = stdout(&out);
    for label in [
        "data folder",
        "settings file",
        "mcpServers file",
        "log file",
    ] {
        assert!(text.contains(label), "{label} missing in {text}");
    }
    assert!(text.contains(&home.path().display().to_string()));
}

#[test]
fn mcp_config_flag_beats_the_environment() {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_conduit"))
        .args(["paths", "--json", "--mcp-config", "/tmp/flag.json"])
        .env("CONDUIT_HOME", home.path())
        .env("CONDUIT_MCP_CONFIG", "/tmp/env.json")
        .output()
        .unwrap();
    let paths: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(paths["mcpConfigFile"], "/tmp/flag.json");

    let out = Command::new(env!("CARGO_BIN_EXE_conduit"))
        .args(["paths", "--json"])
        .env("CONDUIT_HOME", home.path())
        .env("CONDUIT_MCP_CONFIG", "/tmp/env.json")
        .output()
        .unwrap();
    let paths: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(paths["mcpConfigFile"], "/tmp/env.json");
}

#[test]
fn verbose_logs_reach_stderr() {
    let home = tempfile::tempdir().unwrap();
    let out = conduit(home.path(), &["-vv", "paths"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("conduit started"));
    let quiet = conduit(home.path(), &["paths"]);
    assert!(quiet.stderr.is_empty());
}

#[test]
fn bad_usage_exits_with_2() {
    let home = tempfile::tempdir().unwrap();
    let out = conduit(home.path(), &["no-such-command"]);
    assert_eq!(out.status.code(), Some(2));
}
