//! Reads `commands.list`, the one list of the window's commands (shared by build.rs and tests).

/// The windows a command can be granted to, each with its own capability file.
pub const WINDOWS: [&str; 2] = ["main", "settings"];

/// What each window's capability file says it is for (generated into `capabilities/`).
#[allow(dead_code)] // The tests generate the files; build.rs only reads the list.
pub const WINDOW_DESCRIPTIONS: [&str; 2] = [
    "The chat window: conversations, turns and their approvals, and opening Settings. It cannot change settings, the mcpServers file or tool policies: a script in this page must not gain those.",
    "The Settings window: providers, the mcpServers file (its edits that start a program are confirmed natively by Rust), import, tool policies and Conduit's folders. It shows no model or tool output.",
];

/// One command: where its function is, the name the page invokes, and who may invoke it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The Rust path from the crate root, e.g. `commands::app_info`.
    pub path: String,
    /// The command's name, the path's last segment.
    pub name: String,
    /// The windows (of [`WINDOWS`]) whose capability grants it.
    pub windows: Vec<String>,
}

/// Parses the list: one command per line, `path window...`; `#` starts a comment line.
/// A line with no window, an unknown window, or a name listed twice is an error naming the line.
pub fn parse(text: &str) -> Result<Vec<Command>, String> {
    let mut commands: Vec<Command> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line_number = index + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let Some(path) = words.next() else { continue };
        let name = path.rsplit("::").next().unwrap_or(path);
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            return Err(format!(
                "commands.list line {line_number}: `{path}` is not a command path"
            ));
        }
        let windows: Vec<String> = words.map(str::to_owned).collect();
        if windows.is_empty() {
            return Err(format!(
                "commands.list line {line_number}: `{name}` names no window"
            ));
        }
        if let Some(unknown) = windows.iter().find(|w| !WINDOWS.contains(&w.as_str())) {
            return Err(format!(
                "commands.list line {line_number}: unknown window `{unknown}` (known: {})",
                WINDOWS.join(", ")
            ));
        }
        if commands.iter().any(|c| c.name == name) {
            return Err(format!(
                "commands.list line {line_number}: `{name}` is listed twice"
            ));
        }
        commands.push(Command {
            path: path.to_owned(),
            name: name.to_owned(),
            windows,
        });
    }
    Ok(commands)
}

/// The Rust expression that registers every command: `tauri::generate_handler![...]`.
pub fn handler_expression(commands: &[Command]) -> String {
    let paths: Vec<&str> = commands.iter().map(|c| c.path.as_str()).collect();
    format!(
        "::tauri::generate_handler![\n    crate::{}\n]\n",
        paths.join(",\n    crate::")
    )
}

/// The Rust expression that lists every command's description for the generated wrappers
/// (`bindgen::window_command!` puts `describe` beside each command).
pub fn shapes_expression(commands: &[Command]) -> String {
    let calls: Vec<String> = commands
        .iter()
        .map(|c| format!("crate::{}::describe(cfg)", c.path))
        .collect();
    format!("vec![\n    {}\n]\n", calls.join(",\n    "))
}
