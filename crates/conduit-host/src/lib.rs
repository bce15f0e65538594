//! The composition root: where Conduit's data lives, logging, settings and secrets, and
//! the services the desktop window and the `conduit` command call.
//!
//! Place in the crate graph: depends on `conduit-core`, `conduit-providers`,
//! `conduit-mcp` and `conduit-store`; `conduit-cli` and `src-tauri` depend on it and
//! hold no logic of their own, so anything a frontend can do, a test can do here.

pub mod chat;
mod files;
pub mod logging;
pub mod paths;
pub mod providers;
pub mod secrets;
pub mod settings;
pub mod test_tools;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use conduit_core::content::MediaRef;
use conduit_store::FileMediaStore;
use serde::Serialize;

pub use paths::{Paths, PathsError};
pub use settings::{ProviderSettings, Settings, SettingsError};

/// Conduit's version, the same for every crate in the workspace.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What a frontend shows about this installation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppInfo {
    pub version: String,
    pub paths: Paths,
}

impl AppInfo {
    pub fn new(paths: Paths) -> Self {
        Self {
            version: VERSION.to_owned(),
            paths,
        }
    }
}

/// The engine a frontend talks to.
pub struct Host {
    paths: Paths,
    media: Arc<FileMediaStore>,
    /// Opened on first use: probing the keychain costs time at start-up.
    secrets: OnceLock<Box<dyn secrets::SecretStore>>,
}

impl Host {
    pub fn new(paths: Paths) -> Self {
        let media = Arc::new(FileMediaStore::new(paths.data_dir.join("media")));
        Self {
            paths,
            media,
            secrets: OnceLock::new(),
        }
    }

    fn secrets(&self) -> &dyn secrets::SecretStore {
        self.secrets
            .get_or_init(|| secrets::open(self.paths.config_dir.join("secrets.json")))
            .as_ref()
    }

    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    pub fn info(&self) -> AppInfo {
        AppInfo::new(self.paths.clone())
    }

    /// The file a stored media reference lives in.
    pub fn media_path(&self, media: &MediaRef) -> PathBuf {
        self.media.path_of(media)
    }

    pub fn settings(&self) -> Result<Settings, SettingsError> {
        Settings::load(&self.paths.settings_file)
    }
}

/// The secret store's name for a provider's API key.
fn provider_secret_name(provider_id: &str) -> String {
    format!("provider:{provider_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_info_serialises_for_the_window_in_camel_case() {
        let paths = Paths::under_home(PathBuf::from("/h"), None);
        let json = serde_json::to_value(AppInfo::new(paths)).unwrap_or_default();
        assert_eq!(json["version"], VERSION);
        assert_eq!(json["paths"]["dataDir"], "/h");
        assert_eq!(json["paths"]["mcpConfigFile"], "/h/mcp_servers.json");
    }
}
