//! The `conduit` command: Conduit's engine without a window. Parses arguments and calls
//! `conduit-host`; it holds no logic of its own.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use conduit_host::logging::{self, LogOptions};
use conduit_host::{AppInfo, Paths};

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("conduit: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let mut paths = Paths::from_env()?;
    if let Some(file) = cli.mcp_config {
        paths = paths.with_mcp_config_file(file);
    }
    let stderr_level = match cli.verbose {
        0 => None,
        1 => Some(tracing::Level::INFO),
        2 => Some(tracing::Level::DEBUG),
        _ => Some(tracing::Level::TRACE),
    };
    let _log =
        logging::init(&paths, LogOptions { stderr_level }).context("cannot start logging")?;
    tracing::debug!(command = ?cli.command, "conduit started");

    match cli.command {
        Command::Paths { json } => print_paths(&AppInfo::new(paths), json),
    }
}

fn print_paths(info: &AppInfo, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&info.paths)?);
        return Ok(());
    }
    let p = &info.paths;
    for (label, path) in [
        ("data folder", &p.data_dir),
        ("settings file", &p.settings_file),
        ("mcpServers file", &p.mcp_config_file),
        ("log file", &p.log_file),
    ] {
        println!("{label:<16} {}", path.display());
    }
    Ok(())
}
