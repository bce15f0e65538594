//! The commands the window may call; each forwards to `conduit-host`.

use conduit_host::{AppInfo, Paths};

/// What the window's commands share.
pub struct AppState {
    paths: Paths,
}

impl AppState {
    pub fn new(paths: Paths) -> Self {
        Self { paths }
    }
}

/// The app's version and where its data lives.
#[tauri::command]
pub fn app_info(state: tauri::State<'_, AppState>) -> AppInfo {
    AppInfo::new(state.paths.clone())
}
