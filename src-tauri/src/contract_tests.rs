//! Checks that the capability files and the UI's command wrappers agree with `commands.list`.

use std::collections::BTreeSet;
use std::path::Path;

use crate::command_list::{self, Command, WINDOWS};

fn crate_file(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn listed() -> Vec<Command> {
    command_list::parse(&crate_file("commands.list")).unwrap_or_else(|err| panic!("{err}"))
}

/// The names the UI passes to `command(...)`, api.ts's one caller of `invoke`.
fn invoked_in(source: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in source.match_indices("command") {
        let rest = &source[at + "command".len()..];
        // `command("name"` or `command<Type>("name"`.
        let rest = match rest.strip_prefix('<') {
            Some(generic) => generic.split_once(">(").map_or("", |(_, after)| after),
            None => rest.strip_prefix('(').unwrap_or(""),
        };
        if let Some(quoted) = rest.strip_prefix('"')
            && let Some((name, _)) = quoted.split_once('"')
        {
            names.insert(name.to_owned());
        }
    }
    names
}

#[test]
fn each_window_capability_grants_exactly_its_listed_commands() {
    let commands = listed();
    for window in WINDOWS {
        let file = format!("capabilities/{window}-window.json");
        let capability: serde_json::Value =
            serde_json::from_str(&crate_file(&file)).unwrap_or_else(|err| panic!("{file}: {err}"));
        assert_eq!(
            capability["windows"],
            serde_json::json!([window]),
            "{file} must apply to the {window} window only"
        );
        let granted: BTreeSet<String> = capability["permissions"]
            .as_array()
            .unwrap_or_else(|| panic!("{file}: no permissions"))
            .iter()
            .filter_map(|permission| permission.as_str())
            .filter(|permission| !permission.contains(':'))
            .map(str::to_owned)
            .collect();
        let expected: BTreeSet<String> = commands
            .iter()
            .filter(|command| command.windows.iter().any(|w| w == window))
            .map(|command| format!("allow-{}", command.name.replace('_', "-")))
            .collect();
        assert_eq!(granted, expected, "{file} disagrees with commands.list");
    }
}

#[test]
fn the_ui_invokes_exactly_the_listed_commands() {
    let listed: BTreeSet<String> = listed().into_iter().map(|c| c.name).collect();
    let invoked = invoked_in(&crate_file("../ui/src/lib/api.ts"));
    assert_eq!(
        invoked, listed,
        "ui/src/lib/api.ts disagrees with commands.list"
    );
}

#[test]
fn the_invoke_scan_reads_plain_and_typed_calls() {
    let names = invoked_in(r#"command("a_b"); command<string | null>("c", { x }); command(name)"#);
    assert_eq!(names, BTreeSet::from(["a_b".to_owned(), "c".to_owned()]));
}

#[test]
fn a_bad_list_is_an_error_naming_the_line() {
    let cases = [
        (
            "commands::a main\ncommands::a settings\n",
            "line 2: `a` is listed twice",
        ),
        ("# c\ncommands::a\n", "line 2: `a` names no window"),
        ("commands::a chat\n", "line 1: unknown window `chat`"),
        (
            "commands::A main\n",
            "line 1: `commands::A` is not a command path",
        ),
    ];
    for (text, expected) in cases {
        match command_list::parse(text) {
            Ok(commands) => panic!("{text:?} was accepted as {commands:?}"),
            Err(err) => assert!(err.contains(expected), "{err} should say {expected}"),
        }
    }
}

#[test]
fn the_handler_lists_every_command_by_path() {
    let commands = command_list::parse("commands::a main\nmedia::b main settings\n")
        .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(
        command_list::handler_expression(&commands),
        "::tauri::generate_handler![\n    crate::commands::a,\n    crate::media::b\n]\n"
    );
}
