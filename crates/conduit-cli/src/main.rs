//! The `conduit` command: Conduit's engine without a window. Parses arguments and calls
//! `conduit-host`; it holds no logic of its own.

mod ask;
mod chat;
mod mcp;
mod providers;
mod repl;
mod sessions;
mod terminal;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use conduit_host::logging::{self, LogOptions};
use conduit_host::{Host, Paths};
use terminal::say;
use terminal::tell;

#[derive(Debug, Parser)]
#[command(
    name = "conduit",
    version,
    about = "Conduit: an AI assistant with MCP tools, headless"
)]
struct Cli {
    /// Log to stderr too: -v info, -vv debug, -vvv trace. The log file is always written.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,

    /// The mcpServers file to use instead of CONDUIT_MCP_CONFIG or the default.
    #[arg(long, global = true, value_name = "FILE")]
    mcp_config: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print where Conduit keeps its data, settings, mcpServers file and log.
    Paths {
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Send one message to a model and stream its answer, running the tools it calls.
    Chat(chat::ChatArgs),
    /// A conversation on the terminal: streamed answers, tools approved inline, /commands.
    Repl(repl::ReplArgs),
    /// Manage the LLM providers in settings.
    Providers {
        #[command(subcommand)]
        command: providers::ProvidersCommand,
    },
    /// MCP servers from the mcpServers file: list, tools, call, resources, prompts, sign-in,
    /// and serving Conduit's own tools to other apps.
    Mcp {
        #[command(subcommand)]
        command: mcp::McpCommand,
    },
    /// Saved conversations: list, show, search, export, rename, delete.
    Sessions {
        #[command(subcommand)]
        command: sessions::SessionsCommand,
    },
}

impl Command {
    /// The subcommand's name, for the log.
    fn name(&self) -> &'static str {
        match self {
            Command::Paths { .. } => "paths",
            Command::Chat(_) => "chat",
            Command::Repl(_) => "repl",
            Command::Providers { .. } => "providers",
            Command::Mcp { .. } => "mcp",
            Command::Sessions { .. } => "sessions",
        }
    }
}

/// Exit code of a failure the command explained.
const EXIT_FAILURE: u8 = 1;
/// Exit code of bad usage (clap uses the same).
const EXIT_USAGE: u8 = 2;
/// Exit code when the user stopped the run (Ctrl-C), as shells report SIGINT.
const EXIT_INTERRUPTED: u8 = 130;
/// How long the end of a command waits for the runtime's work to stop (see `main`).
const EXIT_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// A failure with the exit code it should produce.
#[derive(Debug)]
struct Failure {
    code: u8,
    error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Self {
        Self {
            code: EXIT_FAILURE,
            error: error.into(),
        }
    }
}

fn usage_error(message: impl Into<String>) -> Failure {
    Failure {
        code: EXIT_USAGE,
        error: anyhow::anyhow!(message.into()),
    }
}

/// An error and its causes, each said once: an error whose text already ends with its
/// cause's (`server "x": the server closed the connection`) or quotes it in brackets
/// (`the disk is full (…)`) does not repeat it. A cause that only happens to appear
/// inside other words is still said.
pub(crate) fn said_once(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        let said = text == part
            || text.ends_with(&format!(": {part}"))
            || text.contains(&format!("({part})"));
        if part.is_empty() || said {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tell!("conduit: cannot start: {err}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(cli));
    // Waited for a moment only: a terminal read of a server's question
    // (`spawn_blocking`) that nobody waits for any more (the server gave up, the turn
    // ended or was stopped) goes on until a line comes, and dropping the runtime would
    // wait for it, the answer already given and Ctrl-C already taken by the turn. The
    // moment lets the workers drop their tasks first: a server process a task still
    // holds (one starting when Ctrl-C came) is killed with its process group as it is
    // dropped, and must not outlive `conduit`.
    runtime.shutdown_timeout(EXIT_PATIENCE);
    match outcome {
        Ok(code) => ExitCode::from(code),
        // The reader of the output went away (`| head -1`): it has what it wanted.
        Err(failure)
            if failure
                .error
                .chain()
                .filter_map(|cause| cause.downcast_ref::<terminal::OutputFailed>())
                .any(terminal::OutputFailed::reader_left) =>
        {
            ExitCode::SUCCESS
        }
        Err(failure) => {
            // Errors carry providers' and servers' messages.
            tell!("conduit: {}", terminal::shown(&said_once(&failure.error)));
            ExitCode::from(failure.code)
        }
    }
}

async fn run(cli: Cli) -> Result<u8, Failure> {
    let mut paths = Paths::from_env()?;
    // A file the user named that is not there is most likely a typo: said, as the run
    // goes on without its servers (the default file may well not exist yet).
    let named = cli.mcp_config.is_some()
        || std::env::var_os(conduit_host::paths::MCP_CONFIG_ENV).is_some_and(|v| !v.is_empty());
    if let Some(file) = cli.mcp_config {
        paths = paths.with_mcp_config_file(file);
    }
    if named && !paths.mcp_config_file.exists() {
        tell!(
            "conduit: the mcpServers file {} does not exist; no MCP servers are started from it",
            terminal::shown(&paths.mcp_config_file.display().to_string())
        );
    }
    let stderr_level = match cli.verbose {
        0 => None,
        1 => Some(tracing::Level::INFO),
        2 => Some(tracing::Level::DEBUG),
        _ => Some(tracing::Level::TRACE),
    };
    let _log =
        logging::init(&paths, LogOptions { stderr_level }).context("cannot start logging")?;
    // Only the command's name: its arguments can hold header values and prompts.
    tracing::debug!(command = cli.command.name(), "conduit started");
    let host = Arc::new(Host::new(paths));
    tokio::spawn(tell_of_history_damage(host.history_damage()));

    match cli.command {
        Command::Paths { json } => {
            print_paths(&host.info().paths, json)?;
            Ok(0)
        }
        Command::Chat(args) => chat::run(host, args).await,
        Command::Repl(args) => repl::run(host, args).await,
        Command::Providers { command } => providers::run(host, command).await,
        Command::Sessions { command } => sessions::run(host, command),
        Command::Mcp { command } => mcp::run(host, command).await,
    }
}

/// Says on stderr when the check of the whole history, 20 s after a command opened it
/// (`conduit repl`, `conduit mcp serve` run that long), finds it damaged: the file is used
/// until the command ends, and the next start moves it aside.
async fn tell_of_history_damage(
    mut damage: tokio::sync::watch::Receiver<Option<conduit_host::store::HistoryDamage>>,
) {
    let Ok(found) = damage.wait_for(Option::is_some).await else {
        return;
    };
    if let Some(found) = found.as_ref() {
        tell!(
            "conduit: the history file {} is damaged ({}): the next start moves it aside (kept, not deleted) and begins a new one; export what you want to keep first (conduit sessions export)",
            terminal::shown(&found.file),
            terminal::shown_line(&found.found)
        );
    }
}

fn print_paths(paths: &Paths, json: bool) -> anyhow::Result<()> {
    if json {
        say!("{}", serde_json::to_string_pretty(paths)?)?;
        return Ok(());
    }
    for (label, path) in [
        ("data folder", &paths.data_dir),
        ("settings file", &paths.settings_file),
        ("mcpServers file", &paths.mcp_config_file),
        ("log file", &paths.log_file),
    ] {
        say!("{label:<16} {}", path.display())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::said_once;

    #[test]
    fn an_error_says_each_cause_once() {
        // A cause already in its error's text is not said again.
        let repeated = anyhow::anyhow!("the server closed the connection")
            .context("server \"mover\": the server closed the connection");
        assert_eq!(
            said_once(&repeated),
            "server \"mover\": the server closed the connection"
        );
        // A cause the error does not carry is.
        let chained = anyhow::anyhow!("no space left on device").context("saving failed");
        assert_eq!(
            said_once(&chained),
            "saving failed: no space left on device"
        );
    }
}
