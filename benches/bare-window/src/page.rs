//! The bare Tauri window showing Conduit's built page (`ui/dist`) with none of Conduit's
//! engine behind it: `make bench` sets it beside Conduit to tell the page's memory from the
//! engine's. The page's commands are unknown here, so it shows its "did not answer" notice.

#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() -> std::process::ExitCode {
    match tauri::Builder::default().run(tauri::generate_context!("page/tauri.conf.json")) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bare-window-page: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}
