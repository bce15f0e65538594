//! Conduit as an MCP server over HTTP from the running app: whether it serves and on
//! which loopback address is a setting (`serveHttp`), applied at start and when changed;
//! the window sees the state and a masked token, never the token itself.

use std::net::SocketAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::Host;
use crate::served::ServedError;
use crate::settings::SettingsError;

/// The address the app serves on unless the user picks another.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:8765";

/// The `serveHttp` setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ServeHttpSettings {
    pub enabled: bool,
    pub address: String,
}

impl Default for ServeHttpSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            address: DEFAULT_ADDRESS.to_owned(),
        }
    }
}

/// What the window shows about the served endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ServeHttpStatus {
    pub enabled: bool,
    pub address: String,
    /// Where clients reach it, while it serves.
    pub url: Option<String>,
    /// Why it does not serve although it should.
    pub error: Option<String>,
    /// The token as the window may see it: masked (copy it with the host's command).
    pub token: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeHttpError {
    #[error("{0:?} is not an address like 127.0.0.1:8765")]
    Address(String),
    #[error("the app serves only on this machine (a loopback address), not on {0}")]
    NotLoopback(SocketAddr),
    #[error(transparent)]
    Settings(#[from] SettingsError),
}

/// What the window sees of `setting` and what is serving (the token masked).
fn status_of(
    setting: ServeHttpSettings,
    serving: &(Option<Serving>, Option<String>),
) -> ServeHttpStatus {
    ServeHttpStatus {
        enabled: setting.enabled,
        address: setting.address,
        url: serving.0.as_ref().map(|s| s.url.clone()),
        error: serving.1.clone(),
        token: crate::providers::MASKED.to_owned(),
    }
}

struct Serving {
    url: String,
    stop: CancellationToken,
    serving: crate::served::HttpServing,
}

impl Serving {
    /// Stops serving and waits until the address is free again.
    async fn end(self) {
        self.stop.cancel();
        // A client's open stream may hold the graceful end up: not for long.
        let ended = self
            .serving
            .end_within(std::time::Duration::from_secs(3))
            .await;
        if let Err(error) = ended {
            tracing::warn!(%error, "serving MCP over HTTP ended with an error");
        }
    }
}

/// The app's HTTP endpoint, started and stopped as the setting says.
pub struct HttpEndpoint {
    host: Arc<Host>,
    serving: tokio::sync::Mutex<(Option<Serving>, Option<String>)>,
}

impl HttpEndpoint {
    pub fn new(host: Arc<Host>) -> Self {
        Self {
            host,
            serving: tokio::sync::Mutex::new((None, None)),
        }
    }

    fn setting(&self) -> Result<ServeHttpSettings, SettingsError> {
        let settings = self.host.settings()?;
        Ok(settings
            .other
            .get("serveHttp")
            .and_then(|value| serde_json::from_value(value.clone()).ok())
            .unwrap_or_default())
    }

    /// Serves, or stops serving, as the setting says now. The setting is read under the
    /// lock, so of two changes in quick succession the last one holds.
    pub async fn apply(&self) -> ServeHttpStatus {
        let mut serving = self.serving.lock().await;
        if let Some(old) = serving.0.take() {
            old.end().await;
        }
        serving.1 = None;
        let setting = match self.setting() {
            Ok(setting) => setting,
            Err(error) => {
                // Settings that cannot be read serve nothing.
                serving.1 = Some(error.to_string());
                return status_of(ServeHttpSettings::default(), &serving);
            }
        };
        if setting.enabled {
            match self.start(&setting.address).await {
                Ok(started) => serving.0 = Some(started),
                Err(error) => {
                    tracing::warn!(%error, "serving MCP over HTTP failed");
                    serving.1 = Some(error);
                }
            }
        }
        status_of(setting, &serving)
    }

    async fn start(&self, address: &str) -> Result<Serving, String> {
        let addr: SocketAddr = address
            .parse()
            .map_err(|_| ServeHttpError::Address(address.to_owned()).to_string())?;
        let stop = CancellationToken::new();
        let serving = self
            .host
            .start_mcp_http(addr, false, stop.clone())
            .await
            .map_err(|e: ServedError| e.to_string())?;
        Ok(Serving {
            url: serving.url.clone(),
            stop,
            serving,
        })
    }

    /// The state now, without changing anything.
    pub async fn status(&self) -> ServeHttpStatus {
        let setting = self.setting().unwrap_or_default();
        status_of(setting, &*self.serving.lock().await)
    }

    /// Changes the setting (a loopback address only) and applies it.
    pub async fn set(
        &self,
        enabled: bool,
        address: &str,
    ) -> Result<ServeHttpStatus, ServeHttpError> {
        let addr: SocketAddr = address
            .trim()
            .parse()
            .map_err(|_| ServeHttpError::Address(address.to_owned()))?;
        if !addr.ip().is_loopback() {
            return Err(ServeHttpError::NotLoopback(addr));
        }
        let setting = ServeHttpSettings {
            enabled,
            address: addr.to_string(),
        };
        // Off the async workers: the settings' lock may be held for long (another
        // change waiting on the keychain, another Conduit process).
        self.host
            .update_settings_off_the_workers(move |settings| {
                settings.other.insert(
                    "serveHttp".into(),
                    serde_json::to_value(&setting).unwrap_or_default(),
                );
                Ok(())
            })
            .await?;
        Ok(self.apply().await)
    }

    /// Stops serving (the app is closing).
    pub async fn stop(&self) {
        let old = self.serving.lock().await.0.take();
        if let Some(old) = old {
            old.end().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(dir: &std::path::Path) -> Arc<Host> {
        // The file secret store: no keychain in tests.
        let host = Host::new(crate::Paths::under_home(dir.to_owned(), None));
        let file: Box<dyn crate::secrets::SecretStore> =
            Box::new(crate::secrets::FileSecrets::new(dir.join("secrets.json")));
        assert!(host.secrets.set(file).is_ok());
        Arc::new(host)
    }

    #[tokio::test]
    async fn the_app_serves_when_the_setting_says_so_and_stops_when_it_is_off() {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = HttpEndpoint::new(host(dir.path()));
        assert_eq!(endpoint.apply().await.url, None, "off by default");

        let on = endpoint.set(true, "127.0.0.1:0").await.unwrap();
        let url = on.url.clone().expect("serving");
        assert_eq!(
            on.token,
            crate::providers::MASKED,
            "the window never sees the token"
        );
        let client = reqwest::Client::new();
        let refused = client.post(&url).body("{}").send().await.unwrap();
        assert_eq!(refused.status(), 401, "no token, no answer");

        let off = endpoint.set(false, "127.0.0.1:0").await.unwrap();
        assert_eq!(off.url, None);
        let gone = tokio::time::timeout(std::time::Duration::from_secs(5), async {
            loop {
                if client.post(&url).body("{}").send().await.is_err() {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        })
        .await;
        assert!(gone.is_ok(), "the endpoint stopped");
        let saved = std::fs::read_to_string(dir.path().join("settings.json")).unwrap();
        assert!(saved.contains("serveHttp"), "{saved}");
    }

    #[tokio::test]
    async fn serving_again_on_the_same_address_finds_it_free() {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = HttpEndpoint::new(host(dir.path()));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = format!("127.0.0.1:{port}");
        let first = endpoint.set(true, &address).await.unwrap();
        assert!(first.url.is_some(), "{first:?}");
        // Applied again (the user pressed the switch twice): the old one ends first.
        let again = endpoint.set(true, &address).await.unwrap();
        assert_eq!(again.error, None);
        assert_eq!(again.url, first.url);
        endpoint.stop().await;
    }

    #[tokio::test]
    async fn only_a_loopback_address_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = HttpEndpoint::new(host(dir.path()));
        assert!(matches!(
            endpoint.set(true, "0.0.0.0:8765").await,
            Err(ServeHttpError::NotLoopback(_))
        ));
        assert!(matches!(
            endpoint.set(true, "not an address").await,
            Err(ServeHttpError::Address(_))
        ));
        assert!(!dir.path().join("settings.json").exists(), "nothing saved");
    }
}
