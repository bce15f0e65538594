//! The composition root: where Conduit's data lives, logging, settings and secrets, and
//! the services the desktop window and the `conduit` command call.
//!
//! Place in the crate graph: depends on `conduit-core`, `conduit-providers`,
//! `conduit-mcp` and `conduit-store`; `conduit-cli` and `src-tauri` depend on it and
//! hold no logic of their own, so anything a frontend can do, a test can do here.

pub mod app;
pub mod app_views;
pub mod approval;
pub mod asks;
pub mod builtin;
pub mod chat;
pub mod logging;
pub mod mcp;
pub mod mentions;
pub mod paths;
pub mod providers;
mod recorder;
pub mod sampling;
pub mod secrets;
pub mod serve_http;
pub mod served;
pub mod sessions;
pub mod settings;
pub mod sign_in;
pub mod single_instance;
#[cfg(any(test, feature = "test-fixtures"))]
pub mod test_tools;
pub mod toolset;
pub mod window_error;
pub mod window_events;
pub mod window_guard;
pub mod window_state;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use conduit_core::content::MediaRef;
use conduit_store::{FileMediaStore, ScratchMediaStore, Store, StoreError};
use serde::Serialize;

/// The types frontends need from the crates below, so they depend on the host alone.
pub use conduit_core as core;
pub use conduit_mcp as mcp_client;
pub use conduit_providers::Protocol;
pub use conduit_providers::text_tools::ToolMode;
pub use conduit_store as store;
pub use paths::{Paths, PathsError};
pub use settings::{ProviderSettings, Settings, SettingsError};

/// Conduit's version, the same for every crate in the workspace.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What a frontend shows about this installation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
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

/// How much of what built-in tools made for other clients is held in memory: results go
/// out as soon as they are made, and the largest chart is well under 1 MB.
const SERVED_MEDIA_BYTES: usize = 64 * 1024 * 1024;

/// The engine a frontend talks to.
pub struct Host {
    paths: Paths,
    media: Arc<FileMediaStore>,
    /// What built-in tools make for other MCP clients: kept in memory until it is sent,
    /// never in the media folder (no conversation holds it, so nothing would remove it).
    served_media: Arc<ScratchMediaStore>,
    /// Opened on first use, so a frontend that never touches history never opens it.
    store: OnceLock<Arc<Store>>,
    /// Opened on first use: probing the keychain costs time at start-up.
    secrets: OnceLock<Box<dyn secrets::SecretStore>>,
    /// The models that refused native tools in this session (text tool-calling for them).
    tool_modes: Arc<conduit_providers::text_tools::ToolModeMemory>,
    /// The HTTP clients every saved provider's turns and model lists share (one TLS
    /// context, connections kept open between turns).
    http_clients: conduit_providers::http::HttpClients,
    /// The key of every fingerprint the window gets of something holding a secret (the
    /// `mcpServers` file's version, what Settings showed of tools): random per process, so
    /// a script in the page can compare them but test no guess of a secret against them.
    page_key: [u8; 32],
    /// Damage the check of the whole history found while this process has it open
    /// (`None` until then): frontends follow it to tell the user.
    history_damage: tokio::sync::watch::Sender<Option<conduit_store::HistoryDamage>>,
    /// The tools the user allowed for one conversation, until this process ends.
    conversation_allows: Arc<approval::ConversationAllows>,
}

/// 244 random bits (two version-4 UUIDs, from the system's random source) in 32 bytes.
fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key
}

impl Host {
    pub fn new(paths: Paths) -> Self {
        let media = Arc::new(FileMediaStore::new(paths.media_dir.clone()));
        let served_media = Arc::new(ScratchMediaStore::new(
            FileMediaStore::new(paths.media_dir.clone()),
            SERVED_MEDIA_BYTES,
        ));
        Self {
            paths,
            media,
            served_media,
            store: OnceLock::new(),
            secrets: OnceLock::new(),
            tool_modes: Default::default(),
            http_clients: Default::default(),
            page_key: random_key(),
            history_damage: tokio::sync::watch::Sender::new(None),
            conversation_allows: Default::default(),
        }
    }

    /// The tools allowed for one conversation until this process ends ("Allow in this
    /// conversation"): what a turn's approver consults, and what the window lists and
    /// takes back.
    pub fn conversation_allows(&self) -> &approval::ConversationAllows {
        &self.conversation_allows
    }

    /// A fingerprint of `bytes` the window may hold (see `page_key`).
    pub(crate) fn page_fingerprint(&self, bytes: &[u8]) -> String {
        conduit_files::keyed_fingerprint(&self.page_key, bytes)
    }

    /// The history database, opened (and migrated) on first use.
    pub fn store(&self) -> Result<Arc<Store>, StoreError> {
        if let Some(store) = self.store.get() {
            return Ok(store.clone());
        }
        // The host's own media store, shared: the history sees which files this process
        // stored for messages not saved yet.
        let opened = Arc::new(Store::open(
            &self.paths.database_file,
            self.media.as_ref().clone(),
        )?);
        let store = self.store.get_or_init(|| opened.clone()).clone();
        // Once per process, when the history first opens (the window lists conversations
        // at start), on a thread of its own: the whole file is checked for damage, and
        // media no message references (attachments never sent) is removed.
        if Arc::ptr_eq(&store, &opened) {
            let damage = self.history_damage.clone();
            store.upkeep_in_background(conduit_store::sweep::UPKEEP_DELAY, move |found| {
                damage.send_replace(Some(found));
            });
        }
        Ok(store)
    }

    /// Damage found in the history while this process has it open, followed: `None`
    /// until the check in the background finds some (it runs once, 20 s after the
    /// history opens). The file stays in use until the next start moves it aside.
    pub fn history_damage(
        &self,
    ) -> tokio::sync::watch::Receiver<Option<conduit_store::HistoryDamage>> {
        self.history_damage.subscribe()
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

    /// A stored media file by hash (or its thumbnail) and its type, for the window's
    /// `media:` URLs; `None` for anything else.
    pub fn media_file(&self, hash: &str, thumbnail: bool) -> Option<(PathBuf, &'static str)> {
        self.media.find(hash, thumbnail)
    }

    /// The file to show a stored image at `width` pixels wide (see
    /// [`conduit_store::media::FileMediaStore::sized`]); slow the first time (it decodes).
    pub fn media_sized(
        &self,
        hash: &str,
        width: u32,
    ) -> Result<Option<(PathBuf, &'static str)>, conduit_core::media::MediaError> {
        self.media.sized(hash, width)
    }

    /// One of Conduit's own folders by name (`data`, `logs`, `config`), for the window to
    /// open; nothing else.
    pub fn folder(&self, name: &str) -> Option<PathBuf> {
        match name {
            "data" => Some(self.paths.data_dir.clone()),
            "logs" => Some(self.paths.log_dir.clone()),
            "config" => Some(self.paths.config_dir.clone()),
            _ => None,
        }
    }

    /// The file a stored media reference lives in.
    pub fn media_path(&self, media: &MediaRef) -> PathBuf {
        self.media.path_of(media)
    }

    pub fn settings(&self) -> Result<Settings, SettingsError> {
        Settings::load(&self.paths.settings_file)
    }

    /// Changes the settings file through [`Settings::update`], the only way to change it.
    /// [`Host::update_settings`] off the async workers, for async callers: it waits for
    /// the settings' lock, which another change may hold while the keychain asks to be
    /// unlocked (saving a provider), or another Conduit process holds; two such waits on
    /// the workers would stop every stream, server and window event of the app.
    pub async fn update_settings_off_the_workers<T: Send + 'static>(
        self: &Arc<Self>,
        change: impl FnOnce(&mut Settings) -> Result<T, SettingsError> + Send + 'static,
    ) -> Result<T, SettingsError> {
        let host = self.clone();
        tokio::task::spawn_blocking(move || host.update_settings(change))
            .await
            .map_err(|error| {
                SettingsError::Invalid(format!("the settings could not be changed: {error}"))
            })?
    }

    pub fn update_settings<T, E>(
        &self,
        change: impl FnOnce(&mut Settings) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<SettingsError>,
    {
        Settings::update(&self.paths.settings_file, change)
    }
}

/// The native question before opening `url` (one [`external_url`] took): `lead`, the whole
/// link, and for a web link where it leads as a URL parser reads it, saying when it names
/// a user before the host (`https://trusted.example@evil.example/` opens evil.example).
pub fn link_question(lead: &str, url: &str) -> String {
    match where_it_opens(url) {
        Some(host) => format!("{lead}\n\n{url}\n\nIt opens {host}."),
        None => format!("{lead}\n\n{url}"),
    }
}

/// Where a web link leads as a URL parser reads it, saying when it names a user before
/// the host; `None` for a mail link. What every question about opening a link shows.
pub fn where_it_opens(url: &str) -> Option<String> {
    (!url.to_ascii_lowercase().starts_with("mailto:")).then(|| window_guard::host_of(url))
}

/// A link from a message that may open in the system browser: `http`/`https` with a host,
/// or a plain `mailto:` to one address (no query that could fill in a subject, body or
/// more recipients); never `file:`, `javascript:` or an app's own scheme, and nothing
/// with spaces or control characters that could hide part of it.
pub fn external_url(url: &str) -> Result<&str, String> {
    use conduit_core::text::MAX_LINK_BYTES;
    if url.len() > MAX_LINK_BYTES {
        return Err(format!(
            "Conduit opens no link longer than {MAX_LINK_BYTES} bytes (this one has {})",
            url.len()
        ));
    }
    let refuse = || {
        Err(format!(
            "Conduit opens only web links and plain mail links, not {url:?}"
        ))
    };
    // Bidirectional controls could make the URL the user is shown read differently.
    // (Zero-width joiners and non-joiners stay: real Sinhala, Persian or Indic links carry
    // them.)
    let hides =
        |c: char| c.is_whitespace() || c.is_control() || conduit_core::text::is_bidi_control(c);
    if url.is_empty() || url.chars().any(hides) {
        return refuse();
    }
    let lower = url.to_ascii_lowercase();
    if let Some(rest) = ["https://", "http://"]
        .iter()
        .find_map(|scheme| lower.strip_prefix(scheme))
    {
        // A browser reads `\` as `/`: `https://evil.example\@trusted.example/` opens
        // evil.example while it reads as trusted.example. A real link writes it `%5C`.
        if rest.contains('\\') {
            return refuse();
        }
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let host = authority.rsplit('@').next().unwrap_or_default();
        if host.is_empty() || host.starts_with(':') {
            return refuse();
        }
        return Ok(url);
    }
    if let Some(address) = lower.strip_prefix("mailto:") {
        let plain = address.matches('@').count() == 1
            && !address.starts_with('@')
            && !address.ends_with('@')
            && !address.contains(['?', '#', '&', ',', ';', '%', '<', '>', '"', '\\']);
        if plain {
            return Ok(url);
        }
    }
    refuse()
}

/// Whether the window may show this page: only the app's own pages, on this platform's
/// origin (`tauri://localhost` on Linux and macOS, `http(s)://tauri.localhost` on Windows
/// and Android). Anything else a link or a script tries to load is refused; web links open
/// in the system browser instead. The other platform's origin is refused too: on Linux
/// `http://tauri.localhost` is a name the resolver may send to a local web server.
pub fn is_app_page(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    APP_PAGE_ORIGINS.iter().any(|origin| {
        lower
            .strip_prefix(origin)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// The origins Tauri serves the app's own pages from on this platform.
#[cfg(any(windows, target_os = "android"))]
const APP_PAGE_ORIGINS: [&str; 2] = ["http://tauri.localhost", "https://tauri.localhost"];
#[cfg(not(any(windows, target_os = "android")))]
const APP_PAGE_ORIGINS: [&str; 1] = ["tauri://localhost"];

/// An image the user attached, turned upright when it was stored on its side with an Exif
/// tag saying so (a phone's portrait photo; [`conduit_core::images::upright`]): the window
/// and every provider then see it as it was taken. Bytes that cannot be turned, or whose
/// turned copy would be over the attachment cap ([`app::ATTACHMENT_MAX_BYTES`]), are
/// stored as they came, and the store judges them.
pub(crate) fn upright(bytes: Vec<u8>) -> Vec<u8> {
    match conduit_core::images::upright(&bytes) {
        Ok(Some(turned)) if turned.len() <= app::ATTACHMENT_MAX_BYTES => turned,
        Ok(Some(turned)) => {
            tracing::warn!(
                bytes = turned.len(),
                "an attached photo turned upright would be over the attachment cap; it is kept as it came"
            );
            bytes
        }
        Ok(None) => bytes,
        Err(error) => {
            tracing::warn!(%error, "an attached photo could not be turned upright; it is kept as it came");
            bytes
        }
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
    fn the_window_shows_only_the_apps_own_pages() {
        let (own, other) = if cfg!(any(windows, target_os = "android")) {
            ("http://tauri.localhost", "tauri://localhost")
        } else {
            ("tauri://localhost", "http://tauri.localhost")
        };
        assert!(is_app_page(own));
        assert!(is_app_page(&format!("{own}/index.html")));
        assert!(is_app_page(&format!("{}/index.html", own.to_uppercase())));
        // The other platform's origin: on Linux `tauri.localhost` is a host name the
        // resolver may send to a local web server.
        assert!(!is_app_page(&format!("{other}/")));
        for refused in [
            "https://tauri.localhost.evil.com/",
            "https://example.com",
            "http://127.0.0.1:8080/",
            "tauri://localhost.evil.com/",
            "javascript:alert(1)",
            "file:///etc/passwd",
            // A view's page: only frames load it, and it must not reach the commands.
            "mcp-app://localhost/",
            "mcp-app://view/index.html",
            "about:blank",
            "data:text/html,<script>1</script>",
        ] {
            assert!(!is_app_page(refused), "{refused}");
        }
    }

    #[test]
    fn only_web_and_mail_links_open_outside() {
        assert_eq!(
            external_url("https://example.com/a"),
            Ok("https://example.com/a")
        );
        assert!(external_url("mailto:a@example.com").is_ok());
        assert!(external_url("http://127.0.0.1:8080/x?y=1#z").is_ok());
        // Real links in scripts that join letters with U+200D or U+200C open.
        assert!(external_url("https://si.wikipedia.org/wiki/ශ්\u{200d}රී_ලංකාව").is_ok());
        assert!(external_url("https://fa.wikipedia.org/wiki/کتاب\u{200c}ها").is_ok());
        for refused in [
            "mailto:a@example.com?subject=x&body=y",
            "mailto:a@example.com,b@example.com",
            "mailto:?to=a@example.com",
            "mailto:a%40example.com",
            "https://",
            "https:///path",
            "https://example.com/a b",
            "https://example.com/\u{202e}",
            " https://example.com",
            "javascript:alert(1)",
            "file:///etc/passwd",
            "https://evil.example\\@trusted.example/login",
            "https://trusted.example/a\\b",
            "JAVASCRIPT:x",
            "media://localhost/x",
            "/etc",
        ] {
            assert!(external_url(refused).is_err(), "{refused}");
        }
        {
            let long = format!("https://example.com/{}", "a".repeat(9000));
            let refused = external_url(&long).unwrap_err();
            assert!(
                refused.contains("longer than") && refused.len() < 200,
                "{refused}"
            );
        }
        let host = Host::new(Paths::under_home(PathBuf::from("/h"), None));
        assert_eq!(host.folder("logs"), Some(PathBuf::from("/h/logs")));
        assert_eq!(host.folder("../etc"), None);
    }

    #[test]
    fn a_link_question_says_where_a_web_link_leads() {
        let lead = "Open this link in your browser?";
        assert_eq!(
            link_question(lead, "https://trusted.example@evil.example/login"),
            "Open this link in your browser?\n\nhttps://trusted.example@evil.example/login\n\nIt opens evil.example (the address names a user before this host)."
        );
        assert!(
            link_question(lead, "https://docs.example:8443/a?b=c")
                .ends_with("\n\nIt opens docs.example:8443.")
        );
        assert_eq!(
            link_question(lead, "mailto:a@example.com"),
            "Open this link in your browser?\n\nmailto:a@example.com"
        );
    }

    #[test]
    fn app_info_serialises_for_the_window_in_camel_case() {
        let paths = Paths::under_home(PathBuf::from("/h"), None);
        let json = serde_json::to_value(AppInfo::new(paths)).unwrap_or_default();
        assert_eq!(json["version"], VERSION);
        assert_eq!(json["paths"]["dataDir"], "/h");
        assert_eq!(json["paths"]["mcpConfigFile"], "/h/mcp_servers.json");
    }
}
