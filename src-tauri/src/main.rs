//! Conduit's desktop window: Tauri commands and events over `conduit-host`, nothing else.

#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

mod commands;

use conduit_host::logging::{self, LogOptions};
use conduit_host::{Host, Paths};

fn main() -> std::process::ExitCode {
    let paths = match Paths::from_env() {
        Ok(paths) => paths,
        Err(err) => {
            eprintln!("conduit-desktop: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let _log = match logging::init(&paths, LogOptions::default()) {
        Ok(guard) => guard,
        Err(err) => {
            eprintln!("conduit-desktop: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    tracing::info!(version = conduit_host::VERSION, "desktop app starting");

    let result = tauri::Builder::default()
        .manage(commands::AppState::new(Host::new(paths)))
        .invoke_handler(tauri::generate_handler![commands::app_info])
        .run(tauri_context());
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "the window could not run");
            eprintln!("conduit-desktop: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The context tauri-build generated from `tauri.conf.json`. Its generated code unwraps
/// values that the build already validated; this is startup, where that is allowed.
#[allow(clippy::unwrap_used, clippy::expect_used)]
fn tauri_context() -> tauri::Context {
    tauri::tauri_build_context!()
}
