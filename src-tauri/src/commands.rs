//! The commands the window may call; each forwards to `conduit-host`.

use conduit_host::{AppInfo, Host};

/// What the window's commands share.
pub struct AppState {
    host: Host,
}

impl AppState {
    pub fn new(host: Host) -> Self {
        Self { host }
    }
}

/// The app's version and where its data lives.
#[tauri::command]
pub fn app_info(state: tauri::State<'_, AppState>) -> AppInfo {
    state.host.info()
}
