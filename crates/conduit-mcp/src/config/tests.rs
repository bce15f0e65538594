//! The mcpServers file: Claude Desktop's format, errors that name line, column or server,
//! `${VAR}` expansion, and writes that keep everything and refuse lost updates.

use super::*;
use serde_json::json;

fn env(name: &str) -> Option<String> {
    match name {
        "TOKEN" => Some("s3cret".into()),
        "HOME" => Some("/home/u".into()),
        _ => None,
    }
}

const CLAUDE_DESKTOP: &str = r#"{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/Desktop"],
      "env": {"DEBUG": "1", "PATH_HINT": "${HOME}/bin"},
      "someFutureField": {"keep": true}
    },
    "remote": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}, "timeout": 30},
    "off": {"command": "uvx", "args": ["mcp-server-time"], "disabled": true},
    "broken": {"args": ["x"]},
    "badurl": {"url": "ftp://nope"},
    "needs-var": {"command": "srv", "env": {"KEY": "${MISSING_VAR}"}}
  }
}
"#;

fn write(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("mcp_servers.json");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn claude_desktop_files_read_with_each_server_checked_alone() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = read_with(&write(dir.path(), CLAUDE_DESKTOP), &env).unwrap();
    let names: Vec<&str> = snapshot.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "filesystem",
            "remote",
            "off",
            "broken",
            "badurl",
            "needs-var"
        ]
    );

    let fs = snapshot.server("filesystem").unwrap();
    assert_eq!(
        fs.spec,
        Ok(ServerSpec {
            transport: Transport::Stdio {
                command: "npx".into(),
                args: vec![
                    "-y".into(),
                    "@modelcontextprotocol/server-filesystem".into(),
                    "${HOME}/Desktop".into()
                ],
                env: BTreeMap::from([
                    ("DEBUG".into(), "1".into()),
                    ("PATH_HINT".into(), "/home/u/bin".into())
                ]),
                cwd: None,
            },
            timeout: None,
            era: Default::default(),
            oauth: Default::default(),
            roots: None,
            // The value `${HOME}` brought in and the entry's own `env` values (long
            // enough to be secrets) are hidden in what leaves the crate.
            secrets: crate::redact::Redactor::new([
                "/home/u".to_owned(),
                "1".to_owned(),
                "/home/u/bin".to_owned()
            ]),
            legacy_sse: false,
        })
    );
    let remote = snapshot.server("remote").unwrap().spec.clone().unwrap();
    assert_eq!(
        remote.transport,
        Transport::Http {
            url: "https://mcp.example.com/mcp".into(),
            headers: BTreeMap::from([("Authorization".into(), "Bearer s3cret".into())]),
        }
    );
    assert_eq!(remote.timeout, Some(Duration::from_secs(30)));
    assert_eq!(
        remote.secrets.text("401 for Bearer s3cret, then s3cret"),
        "401 for ••••, then ••••"
    );
    assert!(snapshot.server("off").unwrap().disabled);
    assert!(
        snapshot
            .server("broken")
            .unwrap()
            .spec
            .clone()
            .unwrap_err()
            .contains("command")
    );
    assert!(
        snapshot
            .server("badurl")
            .unwrap()
            .spec
            .clone()
            .unwrap_err()
            .contains("url must be an http:// or https:// URL")
    );
    assert!(
        snapshot
            .server("needs-var")
            .unwrap()
            .spec
            .clone()
            .unwrap_err()
            .contains("MISSING_VAR")
    );
}

#[test]
fn a_missing_file_has_no_servers_and_a_broken_one_names_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let none = read(&dir.path().join("absent.json")).unwrap();
    assert!(none.servers.is_empty());

    let broken = "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n";
    let path = write(dir.path(), broken);
    let err = read(&path).unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::Parse {
                line: 3,
                column: 26,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);

    let path = write(dir.path(), r#"{"mcpServers": []}"#);
    assert!(matches!(read(&path), Err(ConfigError::Shape { .. })));
}

#[test]
fn an_entry_may_pin_its_protocol_era_and_a_wrong_one_is_named() {
    let era = |value: serde_json::Value| {
        spec_of(
            &serde_json::json!({"command": "x", "protocolVersion": value}),
            &env,
        )
        .map(|spec| spec.era)
    };
    assert_eq!(era(serde_json::Value::Null), Ok(ProtocolEra::Auto));
    assert_eq!(era("auto".into()), Ok(ProtocolEra::Auto));
    assert_eq!(era("2026-07-28".into()), Ok(ProtocolEra::Stateless));
    assert_eq!(era("2025-11-25".into()), Ok(ProtocolEra::Initialize));
    let wrong = era("2027-01-01".into()).unwrap_err();
    assert!(
        wrong.contains("2027-01-01") && wrong.contains("2026-07-28"),
        "{wrong}"
    );
    assert_eq!(
        era(7.into()).unwrap_err(),
        "protocolVersion must be a string"
    );
}

#[test]
fn expansion_replaces_variables_and_names_the_first_missing_one() {
    assert_eq!(
        expand("a ${TOKEN} b ${HOME}", &env).unwrap(),
        "a s3cret b /home/u"
    );
    assert_eq!(
        expand("no vars, ${ unclosed", &env).unwrap(),
        "no vars, ${ unclosed"
    );
    assert_eq!(
        expand("${NOPE}", &env).unwrap_err(),
        ExpandError::Unset("NOPE".into())
    );
    // A value that repeats a long variable stops growing at the limit, saying so.
    let long = |_: &str| Some("x".repeat(1500));
    let repeated = "${LS_COLORS}".repeat(100);
    assert_eq!(expand(&repeated, &long).unwrap_err(), ExpandError::TooLong);
    assert_eq!(expand(&"${A}".repeat(40), &long).unwrap().len(), 60_000);
}

#[test]
fn writes_keep_unknown_fields_and_order_and_leave_a_backup() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), CLAUDE_DESKTOP);
    let snapshot = read(&path).unwrap();
    let added = apply(
        &snapshot,
        Edit::Add {
            name: "everything".into(),
            entry: json!({"command": "mcp-server-everything", "args": ["stdio"]}),
        },
    )
    .unwrap();
    let disabled = apply(
        &added,
        Edit::SetDisabled {
            name: "filesystem".into(),
            disabled: true,
        },
    )
    .unwrap();
    let removed = apply(
        &disabled,
        Edit::Remove {
            name: "badurl".into(),
        },
    )
    .unwrap();

    let text = std::fs::read_to_string(&path).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["globalShortcut"], "Ctrl+Space");
    assert_eq!(
        value["mcpServers"]["filesystem"]["someFutureField"],
        json!({"keep": true})
    );
    assert_eq!(value["mcpServers"]["filesystem"]["disabled"], true);
    let names: Vec<&str> = removed.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "filesystem",
            "remote",
            "off",
            "broken",
            "needs-var",
            "everything"
        ]
    );
    let backup: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("mcp_servers.json.bak")).unwrap(),
    )
    .unwrap();
    assert!(
        backup["mcpServers"].get("badurl").is_some(),
        "the backup is the file before the last write"
    );

    let enabled = apply(
        &removed,
        Edit::SetDisabled {
            name: "filesystem".into(),
            disabled: false,
        },
    )
    .unwrap();
    assert!(!enabled.server("filesystem").unwrap().disabled);
}

#[test]
fn re_enabling_a_server_keeps_its_fields_in_their_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        r#"{"mcpServers": {"a": {"disabled": true, "command": "x", "args": ["1"], "env": {"K": "v"}}}}"#,
    );
    let enabled = apply(
        &read(&path).unwrap(),
        Edit::SetDisabled {
            name: "a".into(),
            disabled: false,
        },
    )
    .unwrap();
    let keys: Vec<&String> = enabled
        .server("a")
        .unwrap()
        .raw
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["command", "args", "env"]);
}

#[test]
fn several_edits_are_one_write_whose_backup_is_the_file_before_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), CLAUDE_DESKTOP);
    let before = std::fs::read(&path).unwrap();
    let edits = ["one", "two", "three"]
        .map(|name| Edit::Add {
            name: name.into(),
            entry: json!({"command": name}),
        })
        .to_vec();
    let written = apply_all(&read(&path).unwrap(), edits).unwrap();
    assert!(
        ["one", "two", "three"]
            .iter()
            .all(|name| written.server(name).is_some())
    );
    assert_eq!(
        std::fs::read(dir.path().join("mcp_servers.json.bak")).unwrap(),
        before
    );
    assert!(!dir.path().join("mcp_servers.json.bak.1").exists());
    // One refused edit among them: nothing is written.
    let now = std::fs::read(&path).unwrap();
    let refused = apply_all(
        &written,
        vec![
            Edit::Add {
                name: "four".into(),
                entry: json!({"command": "four"}),
            },
            Edit::Add {
                name: "bad".into(),
                entry: json!({"args": []}),
            },
        ],
    );
    assert!(
        matches!(refused, Err(ConfigError::InvalidServer { .. })),
        "{refused:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), now);
}

/// An edit that changes nothing writes nothing: the file keeps its own bytes, and the
/// backups are not moved (five such saves used to push the user's own file out of them).
#[test]
fn an_edit_that_changes_nothing_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // The user's own formatting, which a write would have made pretty.
    let mine = r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "server-filesystem"]}}}"#;
    let path = write(dir.path(), mine);
    for _ in 0..6 {
        let snapshot = read(&path).unwrap();
        apply(
            &snapshot,
            Edit::SetDisabled {
                name: "fs".into(),
                disabled: false,
            },
        )
        .unwrap();
        apply(&read(&path).unwrap(), Edit::Replace { text: mine.into() }).unwrap();
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), mine);
    assert!(!dir.path().join("mcp_servers.json.bak").exists());
    // The raw editor's text is written as typed, its layout too.
    let typed = mine.replace(' ', "\n");
    apply(
        &read(&path).unwrap(),
        Edit::Replace {
            text: typed.clone(),
        },
    )
    .unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), typed);
}

#[test]
fn a_number_past_what_a_double_holds_is_kept_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let mine = r#"{"mcpServers": {"fs": {"command": "npx", "x-build": 18446744073709551616, "x-ratio": 0.1}}, "x-seed": 12345678901234567890123}"#;
    let path = write(dir.path(), mine);
    let snapshot = read(&path).unwrap();
    // Switched off, and the form saved with another command: the edits are made in the
    // text, so the numbers stay as written (the document holds them as doubles).
    let disable = Edit::SetDisabled {
        name: "fs".into(),
        disabled: true,
    };
    check_writable(&snapshot, std::slice::from_ref(&disable)).unwrap();
    apply(&snapshot, disable).unwrap();
    let snapshot = read(&path).unwrap();
    let mut entry = snapshot.document["mcpServers"]["fs"].clone();
    entry["command"] = json!("uvx");
    apply(
        &snapshot,
        Edit::Update {
            name: "fs".into(),
            entry,
        },
    )
    .unwrap();
    // (A field added to an object on one line spreads it over lines, as the CST does.)
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with(r#"{"mcpServers": {"fs": {"#), "{text}");
    assert!(
        text.contains(r#""x-build": 18446744073709551616,"#),
        "{text}"
    );
    assert!(
        text.ends_with(r#"}}, "x-seed": 12345678901234567890123}"#),
        "{text}"
    );
    let document: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(document["mcpServers"]["fs"]["command"], json!("uvx"));
    assert_eq!(document["mcpServers"]["fs"]["disabled"], json!(true));

    // A whole new text is written as typed, such numbers too.
    let typed = r#"{"mcpServers": {}, "x": 1.00000000000000000001}"#;
    apply(&read(&path).unwrap(), Edit::Replace { text: typed.into() }).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), typed);

    // Written whole (the layout could not be kept), the document would change such a
    // number: refused, saying which.
    let snapshot = read(&path).unwrap();
    let whole = serde_json::to_string_pretty(&snapshot.document).unwrap();
    let error = kept_exactly(
        &snapshot,
        &snapshot.inexact_numbers,
        &snapshot.document,
        &whole,
    )
    .unwrap_err();
    assert!(
        matches!(error, ConfigError::InexactNumber { ref number, .. } if number == "1.00000000000000000001"),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("which a change made here would write back as another number"),
        "{error}"
    );

    // The same number in two places, one rewritten by an edit (a list a form changed):
    // refused, though the other place still spells it.
    let twice = r#"{"mcpServers": {"a": {"command": "a", "x": 18446744073709551617}, "b": {"command": "b", "x-list": [18446744073709551617, 1]}}}"#;
    std::fs::write(&path, twice).unwrap();
    let snapshot = read(&path).unwrap();
    let mut b = snapshot.document["mcpServers"]["b"].clone();
    b["x-list"][1] = json!(2);
    let error = apply(
        &snapshot,
        Edit::Update {
            name: "b".into(),
            entry: b,
        },
    )
    .unwrap_err();
    assert!(
        matches!(error, ConfigError::InexactNumber { ref number, .. } if number == "18446744073709551617"),
        "{error}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), twice);

    // Removing the entry that holds such a number loses nothing of it.
    let two = r#"{"mcpServers": {"keep": {"command": "a"}, "big": {"command": "b", "x": 18446744073709551616}}}"#;
    std::fs::write(&path, two).unwrap();
    let snapshot = read(&path).unwrap();
    let remove = Edit::Remove { name: "big".into() };
    check_writable(&snapshot, std::slice::from_ref(&remove)).unwrap();
    apply(&snapshot, remove).unwrap();
    let now: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(now, json!({"mcpServers": {"keep": {"command": "a"}}}));
}

/// A file laid out by hand keeps its layout through every kind of edit Settings makes:
/// only what changed is written differently.
#[test]
fn edits_keep_the_files_own_layout() {
    let dir = tempfile::tempdir().unwrap();
    let mine = "{\n\t\"mcpServers\": {\n\t\t\"fs\": { \"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/home/me\"] },\n\n\t\t\"github\": {\n\t\t\t\"command\": \"docker\",\n\t\t\t\"args\": [\"run\", \"-i\", \"ghcr.io/github/github-mcp-server\"],\n\t\t\t\"env\": { \"GITHUB_TOKEN\": \"${GITHUB_TOKEN}\" }\n\t\t}\n\t},\n\t\"x-mine\": \"caf\\u00e9\"\n}\n";
    let path = write(dir.path(), mine);

    let edit = |edit: Edit| {
        apply(&read(&path).unwrap(), edit).unwrap();
        std::fs::read_to_string(&path).unwrap()
    };
    // Switched off and on again: the file is as it was.
    let off = edit(Edit::SetDisabled {
        name: "github".into(),
        disabled: true,
    });
    assert!(
        off.contains(
            "\"env\": { \"GITHUB_TOKEN\": \"${GITHUB_TOKEN}\" },\n\t\t\t\"disabled\": true\n"
        ),
        "{off}"
    );
    let on = edit(Edit::SetDisabled {
        name: "github".into(),
        disabled: false,
    });
    assert_eq!(on, mine);

    // A form changes one argument and adds a variable: the rest of the entry, and the
    // other entries, are as they were; the escaped "é" stays escaped.
    let mut github = read(&path).unwrap().document["mcpServers"]["github"].clone();
    github["args"][2] = json!("ghcr.io/github/github-mcp-server:v1");
    github["env"]["GITHUB_HOST"] = json!("github.example.com");
    let updated = edit(Edit::Update {
        name: "github".into(),
        entry: github,
    });
    assert!(updated.starts_with("{\n\t\"mcpServers\": {\n\t\t\"fs\": { \"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/home/me\"] },\n\n\t\t\"github\": {\n\t\t\t\"command\": \"docker\",\n"), "{updated}");
    assert!(
        updated.contains("ghcr.io/github/github-mcp-server:v1"),
        "{updated}"
    );
    assert!(
        updated.contains("\"GITHUB_HOST\": \"github.example.com\""),
        "{updated}"
    );
    assert!(
        updated.ends_with("\t\"x-mine\": \"caf\\u00e9\"\n}\n"),
        "{updated}"
    );

    // Added and removed: the others keep their layout.
    let added = edit(Edit::Add {
        name: "time".into(),
        entry: json!({"command": "uvx", "args": ["mcp-server-time"]}),
    });
    assert!(added.contains("\"time\""), "{added}");
    let removed = edit(Edit::Remove {
        name: "time".into(),
    });
    assert_eq!(removed, updated);
    let removed = edit(Edit::Remove { name: "fs".into() });
    assert!(removed.starts_with("{\n\t\"mcpServers\": {\n"), "{removed}");
    assert!(
        removed.contains("\t\t\"github\": {\n\t\t\t\"command\": \"docker\",\n"),
        "{removed}"
    );

    // Every step read back as the document the edits make.
    let document: Value = serde_json::from_str(&removed).unwrap();
    assert_eq!(document["mcpServers"].as_object().unwrap().len(), 1);
    assert_eq!(document["x-mine"], json!("café"));
}

/// A file that had no servers yet, or was empty of them, gets them, laid out.
#[test]
fn servers_added_to_a_file_without_any_are_laid_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "{\"theme\": \"dark\"}\n");
    apply(
        &read(&path).unwrap(),
        Edit::Add {
            name: "fs".into(),
            entry: json!({"command": "npx", "args": ["-y", "x"]}),
        },
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{\n  \"theme\": \"dark\",\n  \"mcpServers\": {\n    \"fs\": {\n      \"command\": \"npx\",\n      \"args\": [\"-y\", \"x\"]\n    }\n  }\n}\n"
    );
    // One whose servers are an empty object, on Windows' line ends: kept.
    std::fs::write(&path, "{\r\n    \"mcpServers\": {}\r\n}\r\n").unwrap();
    apply(
        &read(&path).unwrap(),
        Edit::Add {
            name: "fs".into(),
            entry: json!({"command": "npx"}),
        },
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{\r\n    \"mcpServers\": {\r\n        \"fs\": {\r\n            \"command\": \"npx\"\r\n        }\r\n    }\r\n}\r\n"
    );
    // And a file that does not exist yet is written pretty.
    let new = dir.path().join("new.json");
    apply(
        &read(&new).unwrap(),
        Edit::Add {
            name: "fs".into(),
            entry: json!({"command": "npx"}),
        },
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(&new).unwrap(),
        "{\n  \"mcpServers\": {\n    \"fs\": {\n      \"command\": \"npx\"\n    }\n  }\n}\n"
    );
}

#[test]
fn a_file_saved_elsewhere_since_it_was_read_is_kept_and_the_edit_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), CLAUDE_DESKTOP);
    let snapshot = read(&path).unwrap();
    std::fs::write(&path, r#"{"mcpServers": {"edited": {"command": "x"}}}"#).unwrap();
    let refused = apply(
        &snapshot,
        Edit::Remove {
            name: "remote".into(),
        },
    );
    assert!(
        matches!(refused, Err(ConfigError::Conflict { .. })),
        "{refused:?}"
    );
    assert!(std::fs::read_to_string(&path).unwrap().contains("edited"));
    let refused = write_if_unchanged(&path, "{}", snapshot.version());
    assert!(
        matches!(refused, Err(ConfigError::Conflict { .. })),
        "{refused:?}"
    );
    assert!(std::fs::read_to_string(&path).unwrap().contains("edited"));
}

#[test]
fn invalid_entries_and_unknown_names_are_refused_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), CLAUDE_DESKTOP);
    let snapshot = read(&path).unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = apply(
        &snapshot,
        Edit::Add {
            name: "x".into(),
            entry: json!({"args": []}),
        },
    )
    .unwrap_err();
    assert!(matches!(err, ConfigError::InvalidServer { .. }), "{err}");
    assert!(matches!(
        apply(
            &snapshot,
            Edit::Add {
                name: "remote".into(),
                entry: json!({"command": "a"})
            }
        ),
        Err(ConfigError::DuplicateServer(_))
    ));
    assert!(matches!(
        apply(
            &snapshot,
            Edit::Remove {
                name: "ghost".into()
            }
        ),
        Err(ConfigError::UnknownServer(_))
    ));
    let err = apply(
        &snapshot,
        Edit::Replace {
            text: "{\"mcpServers\": {".into(),
        },
    )
    .unwrap_err();
    assert!(matches!(err, ConfigError::Parse { .. }));
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn a_change_on_disk_since_the_read_refuses_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), CLAUDE_DESKTOP);
    let snapshot = read(&path).unwrap();
    let outside = CLAUDE_DESKTOP.replace("Ctrl+Space", "Alt+Space");
    std::fs::write(&path, &outside).unwrap();
    let err = apply(&snapshot, Edit::Remove { name: "off".into() }).unwrap_err();
    assert!(matches!(err, ConfigError::Conflict { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), outside);
}

#[cfg(unix)]
#[test]
fn a_write_keeps_the_files_permissions_and_creates_a_missing_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new").join("mcp_servers.json");
    let snapshot = read(&path).unwrap();
    apply(
        &snapshot,
        Edit::Add {
            name: "a".into(),
            entry: json!({"command": "a"}),
        },
    )
    .unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let snapshot = read(&path).unwrap();
    apply(&snapshot, Edit::Remove { name: "a".into() }).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o644
    );
}

#[test]
fn the_raw_editor_check_names_line_and_column_or_the_bad_server() {
    let path = Path::new("/x/mcp_servers.json");
    let err = check_text(path, "{\n  \"mcpServers\": {,}\n}").unwrap_err();
    assert!(matches!(err, ConfigError::Parse { line: 2, .. }), "{err}");
    let err = check_text(path, r#"{"mcpServers": {"a": {"args": []}}}"#).unwrap_err();
    assert!(
        matches!(&err, ConfigError::InvalidServer { server, .. } if server == "a"),
        "{err}"
    );
    check_text(
        path,
        CLAUDE_DESKTOP
            .replace(r#""broken": {"args": ["x"]},"#, "")
            .replace(r#""badurl": {"url": "ftp://nope"},"#, "")
            .as_str(),
    )
    .unwrap();
}

#[test]
fn servers_import_from_claude_desktop_cursor_and_vs_code_files() {
    let path = Path::new("/x/config.json");
    let claude = import_candidates(path, CLAUDE_DESKTOP).unwrap();
    let names: Vec<&str> = claude.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "filesystem",
            "remote",
            "off",
            "broken",
            "badurl",
            "needs-var"
        ]
    );
    assert!(claude[0].problem.is_none());
    assert!(
        claude[3].problem.as_deref().unwrap().contains("command"),
        "{:?}",
        claude[3]
    );
    assert_eq!(
        claude[0].entry["someFutureField"]["keep"], true,
        "entries come whole"
    );

    let vscode = r#"{"servers": {"time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}}}"#;
    let found = import_candidates(path, vscode).unwrap();
    assert_eq!(
        (found[0].name.as_str(), found[0].problem.as_ref()),
        ("time", None)
    );
    let settings = r#"{"editor.fontSize": 14, "mcp": {"servers": {"web": {"type": "http", "url": "https://x.example/mcp"}}}}"#;
    assert_eq!(import_candidates(path, settings).unwrap()[0].name, "web");
    // An entry holding a number a write would change is named, the others offered.
    let numbered = r#"{"editor.seed": 123456789012345678901234567890, "mcp": {"servers": {
        "web": {"type": "http", "url": "https://x.example/mcp"},
        "big": {"type": "http", "url": "https://y.example/mcp", "x-id": 18446744073709551617}}}}"#;
    let found = import_candidates(path, numbered).unwrap();
    assert!(found[0].problem.is_none(), "{:?}", found[0]);
    let problem = found[1].problem.as_deref().unwrap();
    assert!(
        problem.contains("18446744073709551617") && problem.contains("copy it by hand"),
        "{problem}"
    );
    assert!(matches!(
        import_candidates(path, r#"{"other": 1}"#),
        Err(ConfigError::Shape { .. })
    ));
    // A server named twice is an error naming it, not one left out without a word.
    let twice = r#"{"mcpServers": {"github": {"command": "a"}, "github": {"command": "b"}}}"#;
    let refused = import_candidates(path, twice).unwrap_err();
    assert!(
        refused.to_string().contains("\"github\" is written twice"),
        "{refused}"
    );
    // Claude Code's file: its own servers and each project's; a project's server whose
    // name is taken is offered under its folder's name, or its whole path.
    let claude_code = r#"{"mcpServers": {"github": {"command": "gh-mcp"}},
        "projects": {
            "/home/u/site": {"history": [], "mcpServers": {
                "github": {"command": "gh-mcp", "args": ["--repo", "site"]},
                "db": {"command": "db-mcp", "x-id": 18446744073709551617}}},
            "/srv/site": {"mcpServers": {"github": {"command": "gh-enterprise"}}},
            "/home/u/empty": {"allowedTools": []}}}"#;
    let found = import_candidates(path, claude_code).unwrap();
    let names: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["github", "github (site)", "db", "github (/srv/site)"]
    );
    assert_eq!(found[1].entry["args"][1], "site");
    assert_eq!(found[3].entry["command"], "gh-enterprise");
    assert!(
        found[2]
            .problem
            .as_deref()
            .unwrap()
            .contains("18446744073709551617")
    );
    // Projects alone are enough; a project's server written twice is refused.
    let only = r#"{"projects": {"/p": {"mcpServers": {"a": {"command": "x"}}}}}"#;
    assert_eq!(import_candidates(path, only).unwrap()[0].name, "a");
    let twice =
        r#"{"projects": {"/p": {"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}}}"#;
    assert!(import_candidates(path, twice).is_err());
    // The excerpt of a large file reads the same, its projects in the file's order (not
    // sorted: which one keeps a taken name must not depend on the file's size).
    let excerpt = import_excerpt(std::io::Cursor::new(format!("\u{feff}{claude_code}"))).unwrap();
    assert_eq!(import_candidates(path, &excerpt).unwrap(), found);
    let unsorted = r#"{"projects": {"/z": {"mcpServers": {"a": {"command": "z"}}},
        "/b": {"mcpServers": {"a": {"command": "b"}}}}}"#;
    let whole = import_candidates(path, unsorted).unwrap();
    assert_eq!(whole[0].entry["command"], "z");
    let excerpt = import_excerpt(std::io::Cursor::new(unsorted)).unwrap();
    assert_eq!(import_candidates(path, &excerpt).unwrap(), whole);
    let folder_twice = r#"{"projects": {"/p": {}, "/p": {"mcpServers": {}}}}"#;
    let refused = import_excerpt(std::io::Cursor::new(folder_twice)).unwrap_err();
    assert!(
        refused.to_string().contains("\"/p\" is written twice"),
        "{refused}"
    );
    // Notepad's byte order mark is skipped, here and in Conduit's own file.
    let marked = "\u{feff}{\"mcpServers\": {\"a\": {\"command\": \"x\"}}}";
    assert_eq!(import_candidates(path, marked).unwrap()[0].name, "a");
    let dir = tempfile::tempdir().unwrap();
    let own = write(dir.path(), marked);
    assert_eq!(read(&own).unwrap().servers[0].name, "a");
}

#[test]
fn every_apps_spelling_of_a_transport_is_read_the_one_way() {
    for (entry, kind) in [
        (
            json!({"type": "stdio", "command": "x"}),
            Some(TransportKind::Stdio),
        ),
        (json!({"command": "x"}), Some(TransportKind::Stdio)),
        (
            json!({"command": "x", "url": "http://h/"}),
            Some(TransportKind::Stdio),
        ),
        (json!({"url": "http://h/"}), Some(TransportKind::Http)),
        (json!({"type": "http"}), Some(TransportKind::Http)),
        (
            json!({"type": "sse", "command": "x"}),
            Some(TransportKind::Http),
        ),
        (
            json!({"type": "streamable-http"}),
            Some(TransportKind::Http),
        ),
        (json!({"type": "streamableHttp"}), Some(TransportKind::Http)),
        (json!({"type": "websocket", "url": "ws://h/"}), None),
        (json!({"disabled": true}), None),
        (json!("not an object"), None),
    ] {
        assert_eq!(TransportKind::of_entry(&entry), kind, "{entry}");
    }
    assert_eq!(
        serde_json::to_value(TransportKind::Http).unwrap(),
        json!("http")
    );
}

#[test]
fn an_entrys_roots_are_read_and_a_bad_one_fails_only_that_entry() {
    let env = |name: &str| (name == "HOME").then(|| "/home/u".to_owned());
    let spec = spec_of(
        &json!({"command": "srv", "roots": ["~/code", "/data"]}),
        &env,
    )
    .unwrap();
    assert_eq!(
        spec.roots,
        Some(vec![PathBuf::from("/home/u/code"), PathBuf::from("/data")])
    );
    assert_eq!(
        spec_of(&json!({"command": "srv"}), &env).unwrap().roots,
        None
    );
    assert_eq!(
        spec_of(&json!({"command": "srv", "roots": []}), &env)
            .unwrap()
            .roots,
        Some(Vec::new()),
        "an empty list still offers roots (none yet)"
    );
    let refused = spec_of(&json!({"command": "srv", "roots": ["code"]}), &env).unwrap_err();
    assert!(
        refused.contains("roots[0] \"code\" must be an absolute folder"),
        "{refused}"
    );
    let refused = spec_of(
        &json!({"url": "https://x.example/mcp", "roots": "/data"}),
        &env,
    )
    .unwrap_err();
    assert!(refused.contains("roots must be an array"), "{refused}");
}

#[test]
fn bad_timeouts_and_urls_fail_their_entry_with_a_clear_error_and_no_secret() {
    let spec = |entry: Value| spec_of(&entry, &env);
    // A timeout too large for a duration (it used to panic the whole read).
    let huge = spec(serde_json::json!({"command": "x", "timeout": 1e23})).unwrap_err();
    assert!(huge.contains("timeout is too large"), "{huge}");
    assert!(spec(serde_json::json!({"command": "x", "timeout": 1.7e308})).is_err());
    // Within a duration but past what a call's deadline can be counted to.
    assert!(spec(serde_json::json!({"command": "x", "timeout": 1e22})).is_err());
    assert!(spec(serde_json::json!({"command": "x", "timeout": 90_000})).is_ok());
    // A URL whose line breaks a parser drops: the question and the connection would differ.
    let hidden = format!(
        "https://api.githubcopilot.com{}@evil.example/mcp",
        "\n".repeat(200)
    );
    let refused = spec(serde_json::json!({"url": hidden})).unwrap_err();
    assert!(refused.contains("line breaks"), "{refused}");
    assert!(spec(serde_json::json!({"url": "https://h.example/a b"})).is_err());
    // A backslash is a slash to a URL parser: the host shown and the host reached differ.
    let slashed =
        spec(serde_json::json!({"url": "https://evil.example\\@h.example/mcp"})).unwrap_err();
    assert!(slashed.contains("backslash"), "{slashed}");
    // A URL without a scheme Conduit knows is not quoted: it may hold a key.
    for url in [
        "mcp.example.com/mcp?key=LITERAL_SECRET",
        "Https://u:LITERAL_SECRET@h.example/",
        "wss://h.example/mcp?token=LITERAL_SECRET",
    ] {
        let error = spec(serde_json::json!({"url": url})).unwrap_err();
        assert!(!error.contains("LITERAL_SECRET"), "{error}");
        assert!(error.contains("http:// or https://"), "{error}");
    }
}

#[test]
fn the_variables_an_entry_takes_are_named_in_order_each_time() {
    assert_eq!(
        variables_in("Bearer ${A_KEY}-${B}/${A_KEY}"),
        ["A_KEY", "B", "A_KEY"]
    );
    assert!(variables_in("no variables, ${ unclosed").is_empty());
}

#[test]
fn a_key_in_a_urls_path_is_hidden_in_what_leaves_the_crate() {
    let spec = spec_of(
        &serde_json::json!({"url": "https://actions.example.com/mcp/sk-ak-7f3a9c2e41b8d6f0/sse"}),
        &env,
    )
    .unwrap();
    assert_eq!(
        spec.secrets.text(
            "error sending request for url (https://actions.example.com/mcp/sk-ak-7f3a9c2e41b8d6f0/sse)"
        ),
        "error sending request for url (https://actions.example.com/mcp/••••/sse)"
    );
    // The rule: long, letters and digits, no variable. Names and versions are no keys.
    for key in [
        "sk-ak-7f3a9c2e41b8d6f0",
        "123e4567-e89b-12d3-a456-426614174000",
    ] {
        assert!(is_secret_path_segment(key), "{key}");
    }
    for plain in [
        "mcp",
        "sse",
        "v1",
        "server-github",
        "modelcontextprotocol",
        "2025-06-18",
        "${ZAPIER_KEY}-and-more-1234",
    ] {
        assert!(!is_secret_path_segment(plain), "{plain}");
    }
}

#[test]
fn a_key_written_twice_is_refused_with_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_servers.json");
    let twice = "{\n  \"mcpServers\": {\n    \"files\": {\"command\": \"a\"},\n    \"files\": {\"command\": \"b\"}\n  }\n}\n";
    let refused = check_text(&path, twice).unwrap_err();
    assert!(
        matches!(refused, ConfigError::Parse { line: 4, .. }),
        "{refused:?}"
    );
    let message = refused.to_string();
    assert!(
        message.contains("\"files\" is written twice in the same object"),
        "{message}"
    );
    // At any depth: two values for one variable.
    let nested = r#"{"mcpServers": {"files": {"command": "a", "env": {"K": "1", "K": "2"}}}}"#;
    assert!(
        check_text(&path, nested)
            .unwrap_err()
            .to_string()
            .contains("\"K\"")
    );
    // A file on disk written so is read as a problem, and nothing is lost by a write.
    let path = write(dir.path(), twice);
    assert!(matches!(read(&path), Err(ConfigError::Parse { .. })));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), twice);
    // Everything else reads as before: numbers, nulls, arrays, nesting.
    check_text(
        &path,
        r#"{"n": [1, -2, 3.5, null, true, {"a": {"a": 1}}], "mcpServers": {"x": {"command": "c", "timeout": 5}}}"#,
    )
    .unwrap();
}

/// What a server answers has the entry's named secrets and key-like values hidden, not
/// every value of its `env`: `debug` or a folder stays readable.
#[test]
fn an_entrys_named_secrets_are_hidden_in_answers_and_plain_settings_are_not() {
    let spec = spec_of(
        &json!({"command": "x", "env": {
            "API_TOKEN": "short-tok",
            "MAX_TOKENS": "4096",
            "GIT_AUTHOR_NAME": "Ada Lovelace",
            "LOG_LEVEL": "debug",
            "NOTES_DIR": "/home/me/notes2024",
            "OTHER": "abcdef0123456789abcdef"
        }}),
        &|_| None,
    )
    .unwrap();
    let mut result = rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(
        "token short-tok, level debug, dir /home/me/notes2024, id abcdef0123456789abcdef, 4096 tokens by Ada Lovelace",
    )]);
    spec.secrets.hide_in_result(&mut result);
    let text = &result.content[0].as_text().unwrap().text;
    assert_eq!(
        text,
        "token ••••, level debug, dir /home/me/notes2024, id ••••, 4096 tokens by Ada Lovelace"
    );
    // In an error, every value of the entry is hidden.
    assert!(!spec.secrets.text("level debug").contains("debug"));
}

/// An entry whose URL is a variable (the runtime fills it in), or with a root under `~/`,
/// is saved by the text editor and the form like any other; a URL that is no URL whatever
/// the variables say is still refused.
#[test]
fn an_entry_whose_url_is_a_variable_can_be_saved() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), r#"{"mcpServers": {}}"#);
    let text = r#"{"mcpServers": {"a": {"url": "${REMOTE_URL}"}, "b": {"url": "${BASE}/mcp"},
        "c": {"command": "srv", "roots": ["~/code", "/srv/data"]}}}"#;
    check_text(&path, text).unwrap();
    let edit = Edit::Add {
        name: "c".into(),
        entry: json!({"type": "http", "url": "${REMOTE_URL}"}),
    };
    check_edit(&path, &edit).unwrap();
    let snapshot = read(&path).unwrap();
    apply(&snapshot, edit).unwrap();
    let err = check_text(
        &path,
        r#"{"mcpServers": {"d": {"url": "ftp://${HOST}/x"}}}"#,
    )
    .unwrap_err();
    assert!(err.to_string().contains("http:// or https://"), "{err}");
}
