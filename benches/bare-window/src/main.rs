//! An empty Tauri window: the floor `make bench` measures Conduit's footprint against.

#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() -> std::process::ExitCode {
    match tauri::Builder::default().run(tauri::generate_context!()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bare-window: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}
