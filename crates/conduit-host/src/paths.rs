//! Where Conduit keeps its settings, database, media and logs, from `CONDUIT_HOME`,
//! `CONDUIT_MCP_CONFIG` and the platform's folders.

use std::ffi::OsString;
use std::path::PathBuf;

use serde::Serialize;

/// Environment variable naming the one folder for all of Conduit's data.
pub const HOME_ENV: &str = "CONDUIT_HOME";
/// Environment variable naming the `mcpServers` file.
pub const MCP_CONFIG_ENV: &str = "CONDUIT_MCP_CONFIG";

const APP_DIR: &str = "conduit";

#[derive(Debug, thiserror::Error)]
pub enum PathsError {
    #[error(
        "cannot find a home folder for Conduit's data: set {HOME_ENV} to the folder Conduit should use"
    )]
    NoHome,
}

/// Every file and folder Conduit reads or writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct Paths {
    /// Database, media and logs.
    pub data_dir: PathBuf,
    /// Settings and the default `mcpServers` file.
    pub config_dir: PathBuf,
    pub settings_file: PathBuf,
    pub mcp_config_file: PathBuf,
    /// The history database.
    pub database_file: PathBuf,
    /// Images and audio, stored once by content hash.
    pub media_dir: PathBuf,
    pub log_dir: PathBuf,
    pub log_file: PathBuf,
}

impl Paths {
    /// Resolves the paths from the process environment and the platform's folders.
    pub fn from_env() -> Result<Self, PathsError> {
        Self::resolve(|name| std::env::var_os(name), platform_dirs)
    }

    /// Resolves the paths from an environment lookup; `platform` gives the platform's
    /// (config, data) folders when `CONDUIT_HOME` is not set.
    pub fn resolve(
        env: impl Fn(&str) -> Option<OsString>,
        platform: impl FnOnce() -> Option<(PathBuf, PathBuf)>,
    ) -> Result<Self, PathsError> {
        let non_empty = |name: &str| env(name).filter(|value| !value.is_empty());
        let mcp_override = non_empty(MCP_CONFIG_ENV).map(PathBuf::from);
        if let Some(home) = non_empty(HOME_ENV) {
            return Ok(Self::under_home(PathBuf::from(home), mcp_override));
        }
        let (config_root, data_root) = platform().ok_or(PathsError::NoHome)?;
        Ok(Self::from_dirs(
            config_root.join(APP_DIR),
            data_root.join(APP_DIR),
            mcp_override,
        ))
    }

    /// All data under one folder, as `CONDUIT_HOME` asks.
    pub fn under_home(home: PathBuf, mcp_override: Option<PathBuf>) -> Self {
        Self::from_dirs(home.clone(), home, mcp_override)
    }

    fn from_dirs(config_dir: PathBuf, data_dir: PathBuf, mcp_override: Option<PathBuf>) -> Self {
        let log_dir = data_dir.join("logs");
        Self {
            settings_file: config_dir.join("settings.json"),
            mcp_config_file: mcp_override.unwrap_or_else(|| config_dir.join("mcp_servers.json")),
            log_file: log_dir.join("conduit.log"),
            database_file: data_dir.join("history.db"),
            media_dir: data_dir.join("media"),
            log_dir,
            config_dir,
            data_dir,
        }
    }

    /// Creates Conduit's own folders (data, config, media, logs) and makes them private
    /// (0700), also when an older version left them open to other users. On failure,
    /// the folder that failed.
    pub fn create_private_dirs(&self) -> Result<(), (PathBuf, std::io::Error)> {
        for dir in [
            &self.config_dir,
            &self.data_dir,
            &self.media_dir,
            &self.log_dir,
        ] {
            conduit_files::ensure_private_dir(dir).map_err(|e| (dir.clone(), e))?;
        }
        Ok(())
    }

    /// Replaces the `mcpServers` file, as a `--mcp-config` flag does.
    pub fn with_mcp_config_file(mut self, file: PathBuf) -> Self {
        self.mcp_config_file = file;
        self
    }
}

fn platform_dirs() -> Option<(PathBuf, PathBuf)> {
    let dirs = directories::BaseDirs::new()?;
    Some((dirs.config_dir().to_owned(), dirs.data_dir().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn platform() -> Option<(PathBuf, PathBuf)> {
        Some((PathBuf::from("/cfg"), PathBuf::from("/data")))
    }

    #[test]
    fn conduit_home_holds_everything() {
        let paths = Paths::resolve(env_of(&[(HOME_ENV, "/h")]), platform).unwrap();
        assert_eq!(paths.data_dir, PathBuf::from("/h"));
        assert_eq!(paths.config_dir, PathBuf::from("/h"));
        assert_eq!(paths.settings_file, PathBuf::from("/h/settings.json"));
        assert_eq!(paths.mcp_config_file, PathBuf::from("/h/mcp_servers.json"));
        assert_eq!(paths.log_file, PathBuf::from("/h/logs/conduit.log"));
        assert_eq!(paths.database_file, PathBuf::from("/h/history.db"));
        assert_eq!(paths.media_dir, PathBuf::from("/h/media"));
    }

    #[test]
    fn platform_folders_split_config_and_data() {
        let paths = Paths::resolve(env_of(&[]), platform).unwrap();
        assert_eq!(
            paths.settings_file,
            PathBuf::from("/cfg/conduit/settings.json")
        );
        assert_eq!(
            paths.mcp_config_file,
            PathBuf::from("/cfg/conduit/mcp_servers.json")
        );
        assert_eq!(paths.log_dir, PathBuf::from("/data/conduit/logs"));
    }

    #[test]
    fn mcp_config_env_wins_over_home_and_flag_wins_over_env() {
        let env = env_of(&[
            (HOME_ENV, "/h"),
            (MCP_CONFIG_ENV, "/elsewhere/servers.json"),
        ]);
        let paths = Paths::resolve(env, platform).unwrap();
        assert_eq!(
            paths.mcp_config_file,
            PathBuf::from("/elsewhere/servers.json")
        );
        let flagged = paths.with_mcp_config_file(PathBuf::from("/flag.json"));
        assert_eq!(flagged.mcp_config_file, PathBuf::from("/flag.json"));
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let env = env_of(&[(HOME_ENV, ""), (MCP_CONFIG_ENV, "")]);
        let paths = Paths::resolve(env, platform).unwrap();
        assert_eq!(paths.data_dir, PathBuf::from("/data/conduit"));
    }

    #[test]
    fn no_home_anywhere_is_a_clear_error() {
        let err = Paths::resolve(env_of(&[]), || None).unwrap_err();
        assert!(err.to_string().contains(HOME_ENV));
    }
}
