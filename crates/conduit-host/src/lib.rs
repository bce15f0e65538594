//! The composition root: where Conduit's data lives, logging, and the services the
//! desktop window and the `conduit` command call.
//!
//! Place in the crate graph: depends on `conduit-core`, `conduit-providers`,
//! `conduit-mcp` and `conduit-store`; `conduit-cli` and `src-tauri` depend on it and
//! hold no logic of their own, so anything a frontend can do, a test can do here.

pub mod logging;
pub mod paths;

use serde::Serialize;

pub use paths::{Paths, PathsError};

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn app_info_serialises_for_the_window_in_camel_case() {
        let paths = Paths::under_home(PathBuf::from("/h"), None);
        let json = serde_json::to_value(AppInfo::new(paths)).unwrap_or_default();
        assert_eq!(json["version"], VERSION);
        assert_eq!(json["paths"]["dataDir"], "/h");
        assert_eq!(json["paths"]["mcpConfigFile"], "/h/mcp_servers.json");
    }
}
