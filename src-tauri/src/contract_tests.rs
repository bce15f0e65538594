//! Checks that the UI's command wrappers agree with `commands.list`, that nothing else in
//! the UI invokes a command, and how the list is read. (The capability files and the
//! wrappers are generated and checked in `bindings_tests.rs`; a listed command not written
//! in `window_command!` does not compile, since its description is missing.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::command_list::{self, Command};

/// This crate's folder, from where cargo runs the test (a test binary built by a checkout
/// elsewhere that shares the target folder is not rebuilt for this one).
pub(crate) fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

fn crate_file(relative: &str) -> String {
    let path = manifest_dir().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn listed() -> Vec<Command> {
    command_list::parse(&crate_file("commands.list")).unwrap_or_else(|err| panic!("{err}"))
}

/// The command names a TypeScript source passes to `invoke(...)` or `invoke<T>(...)`.
fn invoked_in(source: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in source.match_indices("invoke") {
        let rest = &source[at + "invoke".len()..];
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

/// The UI's own sources (not the generated ones, not tests), with their paths.
fn ui_sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
        for entry in entries {
            let path = entry.unwrap_or_else(|err| panic!("{err}")).path();
            let name = path.to_string_lossy().into_owned();
            if path.is_dir() {
                walk(&path, out);
            } else if (name.ends_with(".ts") || name.ends_with(".svelte"))
                && !name.ends_with(".test.ts")
                && !name.ends_with("lib/commands.ts")
            {
                let text =
                    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{name}: {err}"));
                out.push((name, text));
            }
        }
    }
    let mut out = Vec::new();
    walk(&manifest_dir().join("../ui/src"), &mut out);
    out
}

#[test]
fn the_generated_wrappers_invoke_exactly_the_listed_commands() {
    let listed: BTreeSet<String> = listed().into_iter().map(|c| c.name).collect();
    let invoked = invoked_in(&crate_file("../ui/src/lib/commands.ts"));
    assert_eq!(
        invoked, listed,
        "ui/src/lib/commands.ts disagrees with commands.list"
    );
}

#[test]
fn no_hand_written_ui_code_invokes_a_command() {
    let sources = ui_sources();
    assert!(sources.iter().any(|(name, _)| name.ends_with("lib/api.ts")));
    for (name, text) in sources {
        assert!(
            !text.contains("@tauri-apps/api/core"),
            "{name} reaches Tauri's invoke itself: call the generated wrapper from lib/api instead"
        );
    }
}

#[test]
fn the_invoke_scan_reads_plain_and_typed_calls() {
    let names = invoked_in(r#"invoke("a_b"); invoke<string | null>("c", { x }); invoke(name)"#);
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
    assert_eq!(
        command_list::shapes_expression(&commands),
        "vec![\n    crate::commands::a::describe(cfg),\n    crate::media::b::describe(cfg)\n]\n"
    );
}
