//! Managing providers: add, remove, list, ask one for its models, and find local model
//! servers. Keys go to the secret store, never to settings.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use conduit_core::media::MediaStore;
use conduit_core::provider::{ModelInfo, ProviderError};
use conduit_providers::{HttpSettings, Protocol, ProviderConfig, RetryPolicy};
use serde::Serialize;

use crate::secrets::SecretError;
use crate::settings::{ProviderSettings, Settings, SettingsError};
use crate::{Host, provider_secret_name};

#[derive(Debug, thiserror::Error)]
pub enum ProvidersError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error("the environment variable {0} holding the API key is not set")]
    MissingKeyEnv(String),
    #[error(transparent)]
    Mask(#[from] crate::window_guard::MaskError),
    /// Settings name a header whose value the secret store does not have (any more).
    #[error(
        "the value of the header {header:?} of provider {provider:?} is missing from {store}: type it again in Settings"
    )]
    MissingHeader {
        provider: String,
        header: String,
        store: String,
    },
    #[error("the stored header values of provider {provider:?} do not read: {source}")]
    StoredHeaders {
        provider: String,
        #[source]
        source: serde_json::Error,
    },
    /// The window asked to add a "local" server that is not one the host looks for.
    #[error("{0}")]
    NotLocal(String),
    /// The chat window asked to add a local server after the first run.
    #[error(
        "a local model server is added from the chat window only before any provider is set up: add it in Settings"
    )]
    NotFirstRun,
}

/// A provider as a frontend lists it: its settings and where its key is, never the key.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSummary {
    #[serde(flatten)]
    pub settings: ProviderSettings,
    /// `secret store`, `env VAR`, or `none`.
    pub key: String,
}

/// Refuses headers a request could not send (`Bad Name`, a value with a line break): saved,
/// they made every message to the provider fail.
fn headers_sendable<'a>(
    headers: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<(), ProvidersError> {
    for (name, value) in headers {
        conduit_providers::checked_header(name, value.clone())?;
    }
    Ok(())
}

impl Host {
    /// Adds a provider; `api_key`, if given, goes to the secret store.
    pub fn add_provider(
        &self,
        provider: ProviderSettings,
        api_key: Option<&str>,
    ) -> Result<(), ProvidersError> {
        let id = provider.id.clone();
        let mut new_entry = None;
        let added = self.update_settings(|settings| {
            self.add_provider_to(settings, provider, api_key, &mut new_entry)
        });
        if added.is_err() {
            self.drop_headers_entry(&id, new_entry.as_deref());
            // The key this call stored for a provider the settings do not name would be
            // the next provider of that id's (`add_provider_to` stores it only once the
            // id was found free).
            if api_key.is_some() && !self.names_provider(&id) {
                self.drop_key_of_unnamed(&id);
            }
        }
        added?;
        tracing::info!(provider = %id, "provider added");
        Ok(())
    }

    /// Adds `provider` to `settings` (within an update) and stores its key and header
    /// values; `new_entry` is the entry made for the values (for the caller to remove
    /// should the settings write fail).
    fn add_provider_to(
        &self,
        settings: &mut Settings,
        mut provider: ProviderSettings,
        api_key: Option<&str>,
        new_entry: &mut Option<String>,
    ) -> Result<(), ProvidersError> {
        let id = provider.id.clone();
        let headers = std::mem::take(&mut provider.headers);
        headers_sendable(&headers)?;
        let entry = (!headers.is_empty()).then(|| new_headers_entry(&id));
        settings.add_provider(ProviderSettings {
            stored_headers: headers.keys().cloned().collect(),
            headers_secret: entry.clone(),
            ..provider
        })?;
        if let Some(entry) = &entry {
            self.store_headers(&id, entry, &headers)?;
            *new_entry = Some(entry.clone());
        }
        match api_key {
            Some(key) => self.secrets().set(&provider_secret_name(&id), key)?,
            // A key left under this id (a provider removed while its key could not be
            // deleted, or removed from settings by hand) is not this new provider's: it
            // would be sent to whatever server this one names.
            None => self.secrets().delete(&provider_secret_name(&id))?,
        }
        Ok(())
    }

    /// Whether the settings (as on disk now) name provider `id`; unreadable settings
    /// count as naming it, so nothing of it is dropped on a guess.
    fn names_provider(&self, id: &str) -> bool {
        self.settings()
            .map(|settings| settings.providers.iter().any(|p| p.id == id))
            .unwrap_or(true)
    }

    /// Deletes the stored key of provider `id`, which no provider in settings is; a
    /// failure is logged (the next add without a key deletes it again).
    fn drop_key_of_unnamed(&self, id: &str) {
        if let Err(error) = self.secrets().delete(&provider_secret_name(id)) {
            tracing::warn!(provider = %id, %error, "a key no provider names stays in the secret store");
        }
    }

    /// Writes `headers` (provider `id`'s values) to the secret store's `entry`.
    fn store_headers(
        &self,
        id: &str,
        entry: &str,
        headers: &BTreeMap<String, String>,
    ) -> Result<(), ProvidersError> {
        let values =
            serde_json::to_string(headers).map_err(|source| ProvidersError::StoredHeaders {
                provider: id.to_owned(),
                source,
            })?;
        self.secrets().set(entry, &values)?;
        Ok(())
    }

    /// Removes provider `id`'s entry of header values nothing names any more (the values
    /// before a save, or those of a save whose settings write failed); a failure leaves it
    /// unused, logged. A name settings gave that is not such an entry (written by hand:
    /// another secret) is left alone.
    fn drop_headers_entry(&self, id: &str, entry: Option<&str>) {
        if let Some(entry) = entry.filter(|entry| is_headers_entry_of(id, entry))
            && let Err(error) = self.secrets().delete(entry)
        {
            tracing::warn!(%error, "header values no provider names stay in the secret store");
        }
    }

    /// The header values of `saved` the secret store has (a name it has none for is left
    /// out, and an entry that does not read counts as none: the user types them again),
    /// then those written in settings, which win.
    fn saved_headers(
        &self,
        saved: &ProviderSettings,
    ) -> Result<BTreeMap<String, String>, ProvidersError> {
        let mut headers = BTreeMap::new();
        // Only an entry of this provider's: a hand-edited name cannot borrow another
        // secret (a key, a sign-in's tokens) as header values.
        let entry = saved
            .headers_secret
            .as_deref()
            .filter(|entry| is_headers_entry_of(&saved.id, entry));
        if !saved.stored_headers.is_empty()
            && let Some(entry) = entry
            && let Some(text) = self.secrets().get(entry)?
        {
            let mut stored: BTreeMap<String, String> =
                serde_json::from_str(&text).unwrap_or_else(|error| {
                    tracing::warn!(provider = %saved.id, %error, "the stored header values do not read; they count as missing");
                    BTreeMap::new()
                });
            for name in &saved.stored_headers {
                if let Some(value) = stored.remove(name) {
                    headers.insert(name.clone(), value);
                }
            }
        }
        headers.extend(saved.headers.clone());
        Ok(headers)
    }

    /// What the user answers natively before a window removes provider `id` (an unknown
    /// one is an error: nothing is asked).
    pub fn removal_question(&self, id: &str) -> Result<String, ProvidersError> {
        let settings = self.settings()?;
        let provider = settings
            .providers
            .iter()
            .find(|provider| provider.id == id)
            .ok_or_else(|| SettingsError::UnknownProvider(id.to_owned()))?;
        Ok(format!(
            "Remove the provider {:?} ({:?})?\n\nIts settings and its stored API key are deleted. Conversations keep their messages.",
            provider.id,
            crate::window_guard::mask_url(&provider.base_url)
        ))
    }

    /// Removes a provider and its stored key: the key first, so a key that cannot be
    /// deleted (the keychain refused) leaves the provider there to remove again, not a
    /// key under an id the next provider of that name would be given.
    pub fn remove_provider(&self, id: &str) -> Result<(), ProvidersError> {
        self.settings()?.provider(id)?;
        self.secrets().delete(&provider_secret_name(id))?;
        let removed = self.update_settings(|settings| settings.remove_provider(id))?;
        self.drop_headers_entry(id, removed.headers_secret.as_deref());
        tracing::info!(provider = %id, "provider removed");
        Ok(())
    }

    pub fn list_providers(&self) -> Result<Vec<ProviderSummary>, ProvidersError> {
        let settings = self.settings()?;
        settings
            .providers
            .into_iter()
            .map(|provider| {
                let key = match &provider.api_key_env {
                    Some(var) => format!("env {var}"),
                    None if self
                        .secrets()
                        .get(&provider_secret_name(&provider.id))?
                        .is_some() =>
                    {
                        format!("stored in {}", self.secrets().describe())
                    }
                    None => "none".to_owned(),
                };
                // A base URL can carry a key (`https://user:token@proxy/v1`, a key in its
                // path or query): the window sees it masked, as the mcpServers file's URLs,
                // and fields Conduit does not know not at all.
                let names = provider.headers.keys().chain(&provider.stored_headers);
                Ok(ProviderSummary {
                    settings: ProviderSettings {
                        headers: names
                            .map(|name| (name.clone(), MASKED.to_owned()))
                            .collect(),
                        stored_headers: Vec::new(),
                        headers_secret: None,
                        base_url: crate::window_guard::mask_url(&provider.base_url),
                        other: Default::default(),
                        ..provider
                    },
                    key,
                })
            })
            .collect()
    }

    /// Asks a saved provider for its models.
    pub async fn provider_models(&self, id: &str) -> Result<Vec<ModelInfo>, ProvidersError> {
        let (config, _) = self.saved_provider_config(id)?;
        let media: Arc<dyn MediaStore> = self.media.clone();
        let provider = conduit_providers::build(config, media)?;
        Ok(provider.list_models().await?)
    }

    /// The connection settings of a saved provider, its key resolved, and its default model.
    pub(crate) fn saved_provider_config(
        &self,
        id: &str,
    ) -> Result<(ProviderConfig, Option<String>), ProvidersError> {
        let settings = self.settings()?;
        let saved = settings.provider(id)?;
        let api_key = match &saved.api_key_env {
            Some(var) => Some(key_from_env(var)?),
            None => self.secrets().get(&provider_secret_name(id))?,
        };
        let headers = self.saved_headers(saved)?;
        // A stored value gone (the keychain item deleted, another machine's settings):
        // the request would go without it and fail for a reason nobody sees.
        if let Some(missing) = saved
            .stored_headers
            .iter()
            .find(|name| !headers.contains_key(*name))
        {
            return Err(ProvidersError::MissingHeader {
                provider: id.to_owned(),
                header: missing.clone(),
                store: self.secrets().describe(),
            });
        }
        let http = HttpSettings {
            extra_headers: headers.into_iter().collect(),
            clients: Some(self.http_clients.clone()),
            ..HttpSettings::default()
        };
        let config = ProviderConfig {
            protocol: saved.protocol,
            base_url: saved.base_url.clone(),
            api_key,
            http,
        };
        Ok((config, saved.default_model.clone()))
    }
}

/// A base URL the window sent back: a masked part takes the stored URL's value at the
/// same place, on the same server only (see `window_guard::unmask_url`).
fn restored_base_url(sent: &str, saved: Option<&str>) -> Result<String, ProvidersError> {
    Ok(crate::window_guard::unmask_url(
        sent,
        saved,
        "the base URL",
    )?)
}

/// An API key from the environment variable the user named.
pub(crate) fn key_from_env(var: &str) -> Result<String, ProvidersError> {
    std::env::var(var).map_err(|_| ProvidersError::MissingKeyEnv(var.to_owned()))
}

/// What a header's value shows as outside settings: headers often carry tokens.
pub const MASKED: &str = "••••••••";

/// The start of the secret store's names for provider `id`'s header values (one JSON
/// object per save). Not `provider:`, the keys' prefix.
fn header_entry_prefix(id: &str) -> String {
    format!("provider-headers:{id}:")
}

/// Whether `entry` names one of provider `id`'s entries of header values: its prefix and
/// a random id, nothing more. A prefix alone let provider `a` borrow (and delete) the
/// values of provider `a:b` through a hand-written `provider-headers:a:b:<id>`.
fn is_headers_entry_of(id: &str, entry: &str) -> bool {
    entry
        .strip_prefix(&header_entry_prefix(id))
        .is_some_and(|rest| rest.len() == 32 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A new entry name for provider `id`'s header values.
fn new_headers_entry(id: &str) -> String {
    format!(
        "{}{}",
        header_entry_prefix(id),
        uuid::Uuid::new_v4().simple()
    )
}

/// A provider as the settings form sends it. The key, if typed, goes to the secret store
/// and is never sent back; `None` keeps the stored one.
#[derive(Clone, serde::Deserialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ProviderInput {
    pub id: String,
    #[ts(type = "string")]
    pub protocol: Protocol,
    pub base_url: String,
    pub default_model: Option<String>,
    /// A value of [`MASKED`] keeps the stored value of that header.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub api_key: Option<String>,
    /// Set by the Add form: a provider with this id must not exist yet.
    #[serde(default)]
    pub is_new: bool,
}

/// Names the key and the headers without their values: an input logged with `?` (a
/// command traced with its arguments) must not write a key into the log.
impl std::fmt::Debug for ProviderInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderInput")
            .field("id", &self.id)
            .field("protocol", &self.protocol)
            .field("default_model", &self.default_model)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("api_key", &self.api_key.as_ref().map(|_| "••••"))
            .field("is_new", &self.is_new)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// What the user answers natively before a window's save loses a stored secret of
    /// an existing provider: its key replaced, or deleted with the hidden header values as
    /// it moves to another server, or a header value dropped or replaced. `None` when the
    /// save loses nothing stored (a new provider, or an edit that keeps every secret).
    pub fn save_question(&self, input: &ProviderInput) -> Result<Option<String>, ProvidersError> {
        if input.is_new {
            return Ok(None);
        }
        let settings = self.settings()?;
        let Some(saved) = settings.providers.iter().find(|p| p.id == input.id) else {
            return Ok(None);
        };
        // A save that will be refused loses nothing: no question before its error.
        let Ok(base_url) = restored_base_url(&input.base_url, Some(&saved.base_url)) else {
            return Ok(None);
        };
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Ok(None);
        }
        let moved = !conduit_providers::http::same_origin_urls(&saved.base_url, &base_url);
        let new_key = input
            .api_key
            .as_deref()
            .is_some_and(|key| !key.trim().is_empty());
        let mut lost = Vec::new();
        if self
            .secrets()
            .get(&provider_secret_name(&input.id))?
            .is_some()
            && (new_key || moved)
        {
            lost.push("its stored API key".to_owned());
        }
        if (moved || new_key)
            && let Some(variable) = &saved.api_key_env
        {
            lost.push(format!("the key variable it names ({variable:?})"));
        }
        for (name, value) in &self.saved_headers(saved)? {
            let sent = input.headers.get(name).map(String::as_str);
            let kept = sent == Some(value.as_str()) || (sent == Some(MASKED) && !moved);
            if !kept {
                lost.push(format!("its stored header value {name:?}"));
            }
        }
        if lost.is_empty() {
            return Ok(None);
        }
        let place = if moved {
            format!(
                " as it moves to {:?}",
                crate::window_guard::mask_url(&base_url)
            )
        } else {
            String::new()
        };
        Ok(Some(format!(
            "Save the provider {:?}?\n\nIt loses {}{place}.",
            input.id,
            lost.join(", ")
        )))
    }

    /// Adds the provider, or updates the one with its id (fields Conduit does not know are
    /// kept, and a named key variable too unless a key is typed or the provider moves).
    pub fn save_provider(&self, mut input: ProviderInput) -> Result<(), ProvidersError> {
        // A masked value stands for the stored one, which was checked when it was saved.
        headers_sendable(input.headers.iter().filter(|(_, value)| *value != MASKED))?;
        let id = input.id.clone();
        // The entry this save wrote the header values to, and the one it replaces: the new
        // goes if the settings write fails, the old once it succeeded. A key typed for a
        // provider that moves is stored only after settings name the new server.
        let (mut new_entry, mut old_entry) = (None, None);
        let mut key_after = None;
        // The key stored before this save, to be put back if the settings cannot be
        // written, and whether this save stored a new one in its place meanwhile.
        let mut old_key = None;
        let mut replaced_key = false;
        let outcome = self.update_settings(|settings| {
            let saved_url = settings
                .providers
                .iter()
                .find(|p| p.id == input.id && !input.is_new)
                .map(|p| p.base_url.as_str());
            input.base_url = restored_base_url(&input.base_url, saved_url)?;
            let key = input
                .api_key
                .as_deref()
                .map(str::trim)
                .filter(|k| !k.is_empty());
            let default_model = input.default_model.filter(|m| !m.trim().is_empty());
            match settings.providers.iter_mut().find(|p| p.id == input.id) {
                Some(_) if input.is_new => Err(SettingsError::DuplicateProvider(input.id).into()),
                Some(saved) => {
                    let saved_headers = self.saved_headers(saved)?;
                    if !(input.base_url.starts_with("http://")
                        || input.base_url.starts_with("https://"))
                    {
                        // Masked: the URL was restored with the stored secrets the
                        // window never had (a hand-written `HTTPS://user:token@…`).
                        return Err(SettingsError::Invalid(format!(
                            "the base URL {:?} must start with http:// or https://",
                            crate::window_guard::mask_url(&input.base_url)
                        ))
                        .into());
                    }
                    // Secrets saved for one server never go to another: a move to another
                    // origin forgets the stored key and the masked headers, unless this same
                    // save brings new ones.
                    let moved =
                        !conduit_providers::http::same_origin_urls(&saved.base_url, &input.base_url);
                    let mut headers = BTreeMap::new();
                    for (name, value) in input.headers {
                        if value != MASKED {
                            headers.insert(name, value);
                        } else if moved {
                            // Left at the old server.
                        } else if let Some(kept) = saved_headers.get(&name) {
                            headers.insert(name, kept.clone());
                        } else if saved.stored_headers.contains(&name) {
                            // Its value is gone from the store: dropping the header without
                            // a word would send requests without it.
                            return Err(ProvidersError::MissingHeader {
                                provider: input.id.clone(),
                                header: name,
                                store: self.secrets().describe(),
                            });
                        } else {
                            // A header renamed, or one that was never stored: no value
                            // stands behind the mask.
                            return Err(masked_without_value(&name).into());
                        }
                    }
                    // Every value goes to the secret store, those an earlier Conduit or the
                    // user wrote into settings too: to a new entry that this same settings
                    // write names. A write that fails leaves the provider as it was.
                    let entry = (!headers.is_empty()).then(|| new_headers_entry(&input.id));
                    if let Some(entry) = &entry {
                        self.store_headers(&input.id, entry, &headers)?;
                        new_entry = Some(entry.clone());
                    }
                    old_entry = std::mem::replace(&mut saved.headers_secret, entry);
                    saved.protocol = input.protocol;
                    saved.base_url = input.base_url;
                    saved.default_model = default_model;
                    saved.stored_headers = headers.into_keys().collect();
                    saved.headers.clear();
                    let secret_name = provider_secret_name(&input.id);
                    // A key named by a variable wins over a stored one: it would go to the
                    // new server, and a key typed now would never be used.
                    if moved || key.is_some() {
                        saved.api_key_env = None;
                    }
                    if moved {
                        // The old server's key goes now; a new one once settings name the
                        // new server (never while they still name the old). Kept to be
                        // put back if the settings cannot be written.
                        old_key = self.secrets().get(&secret_name)?;
                        self.secrets().delete(&secret_name)?;
                        tracing::info!(provider = %input.id, "provider moved to another server: its stored key was removed");
                        key_after = key.map(str::to_owned);
                    } else if let Some(key) = key {
                        // Stored now (a keychain that refuses leaves the provider as it
                        // was), and put back as it was if the settings write fails (another
                        // program changed the file meanwhile).
                        old_key = self.secrets().get(&secret_name)?;
                        self.secrets().set(&secret_name, key)?;
                        replaced_key = true;
                    }
                    Ok("provider updated")
                }
                None if input.headers.values().any(|value| value == MASKED) => Err(
                    masked_without_value(
                        input
                            .headers
                            .iter()
                            .find(|(_, value)| *value == MASKED)
                            .map_or("", |(name, _)| name.as_str()),
                    )
                    .into(),
                ),
                None => self
                    .add_provider_to(
                        settings,
                        ProviderSettings {
                            headers: input.headers,
                            ..ProviderSettings::plain(
                                input.id,
                                input.protocol,
                                input.base_url,
                                default_model,
                            )
                        },
                        key,
                        &mut new_entry,
                    )
                    .map(|()| "provider added"),
            }
        });
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(error) => {
                self.drop_headers_entry(&id, new_entry.as_deref());
                let name = provider_secret_name(&id);
                let put_back = match old_key {
                    Some(key) => self.secrets().set(&name, &key),
                    None if replaced_key => self.secrets().delete(&name),
                    None => Ok(()),
                };
                if let Err(put_back) = put_back {
                    tracing::error!(provider = %id, error = %put_back, "the provider's key could not be put back after its settings were not written");
                }
                return Err(error);
            }
        };
        self.drop_headers_entry(&id, old_entry.as_deref());
        if let Some(key) = key_after {
            self.secrets().set(&provider_secret_name(&id), &key)?;
        }
        tracing::info!(provider = %id, "{outcome}");
        Ok(())
    }
}

/// A header sent back masked where no stored value stands behind the mask (renamed, or
/// its provider gone meanwhile): saved as it is, the mask itself would go out as the
/// header's value.
fn masked_without_value(header: &str) -> SettingsError {
    SettingsError::Invalid(format!(
        "the header {header:?} holds the hidden value {MASKED:?}, but no value is stored under that name: type its value again"
    ))
}

/// A model server answering on this machine, offered on first run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct LocalProvider {
    /// A suggested provider id: `ollama` or `lm-studio`.
    pub id: String,
    pub name: String,
    #[ts(type = "string")]
    pub protocol: Protocol,
    pub base_url: String,
    pub models: Vec<String>,
}

/// Where Ollama and LM Studio listen by default (their OpenAI-compatible APIs).
pub const LOCAL_SERVERS: [(&str, &str, &str); 2] = [
    ("ollama", "Ollama", "http://127.0.0.1:11434/v1"),
    ("lm-studio", "LM Studio", "http://127.0.0.1:1234/v1"),
];

impl Host {
    /// Saves a local model server as a provider: no key, its first model as the default.
    pub fn add_local_provider(&self, local: LocalProvider) -> Result<(), ProvidersError> {
        // The window may ask for this without Settings: only a server the host looks for,
        // at its own address, spoken to as the host probed it.
        crate::window_guard::known_local_server(&local).map_err(ProvidersError::NotLocal)?;
        self.add_provider(
            ProviderSettings::plain(
                local.id,
                Protocol::OpenAiChat,
                local.base_url,
                local.models.into_iter().next(),
            ),
            None,
        )
    }

    /// As [`Host::add_local_provider`], for the chat window's first-run panel: only while
    /// no provider is set up. A script in the chat page (model and tool output are
    /// rendered there) must not add a new place to send conversations to, such as a port
    /// another user of the machine listens on.
    pub fn add_local_provider_on_first_run(
        &self,
        local: LocalProvider,
    ) -> Result<(), ProvidersError> {
        crate::window_guard::known_local_server(&local).map_err(ProvidersError::NotLocal)?;
        if !self.settings()?.providers.is_empty() {
            return Err(ProvidersError::NotFirstRun);
        }
        self.add_local_provider(local)
    }

    /// The local model servers among `candidates` (id, name, base URL) that answer with
    /// their model list within a second.
    pub async fn detect_local_providers(
        &self,
        candidates: &[(&str, &str, &str)],
    ) -> Vec<LocalProvider> {
        let probes = candidates.iter().map(|(id, name, base_url)| async move {
            // Most machines run neither: a refused connection settles it without an HTTP
            // client, whose TLS context (OpenSSL, its CA store: ~4 MB resident) a first
            // start with no provider never needs otherwise.
            if !accepts_connections(base_url).await {
                return None;
            }
            let config = ProviderConfig {
                protocol: Protocol::OpenAiChat,
                base_url: (*base_url).to_owned(),
                api_key: None,
                http: HttpSettings {
                    connect_timeout: Duration::from_millis(500),
                    read_timeout: Duration::from_secs(1),
                    answer_start_timeout: Duration::from_secs(1),
                    retry: RetryPolicy {
                        max_retries: 0,
                        ..RetryPolicy::default()
                    },
                    extra_headers: Vec::new(),
                    clients: Some(self.http_clients.clone()),
                    url_secrets: Vec::new(),
                },
            };
            let media: Arc<dyn MediaStore> = self.media.clone();
            let provider = conduit_providers::build(config, media).ok()?;
            let models = tokio::time::timeout(Duration::from_secs(1), provider.list_models())
                .await
                .ok()?
                .ok()?;
            Some(LocalProvider {
                id: (*id).to_owned(),
                name: (*name).to_owned(),
                protocol: Protocol::OpenAiChat,
                base_url: (*base_url).to_owned(),
                models: models.into_iter().map(|m| m.id).collect(),
            })
        });
        futures::future::join_all(probes)
            .await
            .into_iter()
            .flatten()
            .collect()
    }
}

/// Whether something accepts a TCP connection at `base_url`'s host and port within the
/// probe's connect timeout. An address that does not read is not probed.
async fn accepts_connections(base_url: &str) -> bool {
    let Ok(url) = url::Url::parse(base_url) else {
        return false;
    };
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return false;
    };
    // An IPv6 host comes bracketed in URLs, not in socket addresses.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    matches!(
        tokio::time::timeout(
            Duration::from_millis(500),
            tokio::net::TcpStream::connect((host, port))
        )
        .await,
        Ok(Ok(_))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use conduit_testing::llm_server::{Dialect, Reply, ScriptedLlm};
    use serde_json::json;

    #[test]
    fn a_base_urls_keys_are_masked_for_the_window_and_stay_with_their_server() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        let url = "https://team:tok3n-s3cret@proxy.example/v1/sk-ak-7f3a9c2e41b8d6f0?key=q-s3cret";
        let input = |url: &str, is_new: bool| ProviderInput {
            id: "p".into(),
            protocol: Protocol::OpenAiChat,
            base_url: url.into(),
            default_model: Some("m".into()),
            headers: BTreeMap::new(),
            api_key: None,
            is_new,
        };
        host.save_provider(input(url, true)).unwrap();
        let file = dir.path().join("settings.json");
        let mut raw: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        raw["providers"][0]["futureField"] = json!("unknown-s3cret");
        std::fs::write(&file, raw.to_string()).unwrap();

        let listed = host.list_providers().unwrap();
        let shown = serde_json::to_string(&listed).unwrap();
        for secret in ["tok3n-s3cret", "sk-ak-7f3a", "q-s3cret", "unknown-s3cret"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        let masked_url = listed[0].settings.base_url.clone();
        assert!(masked_url.starts_with("https://"), "{masked_url}");
        assert!(masked_url.contains("@proxy.example/v1/"), "{masked_url}");

        // Sent back as shown: the stored URL is kept whole, and the field Conduit does not
        // know too.
        assert_eq!(
            host.save_question(&input(&masked_url, false)).unwrap(),
            None
        );
        host.save_provider(input(&masked_url, false)).unwrap();
        let saved = &host.settings().unwrap().providers[0];
        assert_eq!(saved.base_url, url);
        assert_eq!(saved.other["futureField"], "unknown-s3cret");

        // Its masks sent along to another server, or with a new provider: refused, saying
        // why, and nothing written.
        let before = std::fs::read_to_string(&file).unwrap();
        let elsewhere = masked_url.replace("proxy.example", "evil.example");
        for refused in [
            input(&elsewhere, false),
            ProviderInput {
                id: "q".into(),
                ..input(&masked_url, true)
            },
        ] {
            let error = host.save_provider(refused).unwrap_err().to_string();
            assert!(error.contains("type the value again"), "{error}");
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
    }

    #[test]
    fn a_save_that_loses_a_stored_secret_is_asked_about_and_one_that_keeps_them_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        let input = |url: &str, key: Option<&str>, header: &str| ProviderInput {
            id: "p".into(),
            protocol: Protocol::OpenAiChat,
            base_url: url.into(),
            default_model: Some("m".into()),
            headers: [("X-Team".to_owned(), header.to_owned())].into(),
            api_key: key.map(str::to_owned),
            is_new: false,
        };
        let new = ProviderInput {
            is_new: true,
            ..input("https://a.example/v1", Some("sk-1"), "team-s3cret")
        };
        assert_eq!(host.save_question(&new).unwrap(), None, "a new provider");
        host.save_provider(new).unwrap();
        // The form sent back as shown: masks keep the stored values; a model changed.
        assert_eq!(
            host.save_question(&input("https://a.example/v1/", None, MASKED))
                .unwrap(),
            None
        );
        let question = |input: ProviderInput| host.save_question(&input).unwrap().unwrap();
        let replaced = question(input("https://a.example/v1", Some("sk-2"), MASKED));
        assert_eq!(
            replaced,
            "Save the provider \"p\"?\n\nIt loses its stored API key."
        );
        let moved = question(input("https://b.example/v1", None, MASKED));
        assert_eq!(
            moved,
            "Save the provider \"p\"?\n\nIt loses its stored API key, its stored header value \"X-Team\" as it moves to \"https://b.example/v1\"."
        );
        // A provider that takes its key from a variable, moved with a new key typed: the
        // question says the variable goes, and it does (it would win over the new key and
        // go to the new server).
        let file = dir.path().join("settings.json");
        let mut raw: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        raw["providers"][0]["apiKeyEnv"] = serde_json::json!("OPENAI_API_KEY");
        std::fs::write(&file, raw.to_string()).unwrap();
        let moved_with_key = input("https://evil.example/v1", Some("sk-typed"), MASKED);
        assert!(
            question(moved_with_key.clone())
                .contains("the key variable it names (\"OPENAI_API_KEY\")"),
        );
        host.save_provider(moved_with_key).unwrap();
        let saved = &host.settings().unwrap().providers[0];
        assert_eq!(saved.api_key_env, None);
        assert_eq!(saved.base_url, "https://evil.example/v1");
        host.save_provider(input("https://a.example/v1", Some("sk-1"), "team-s3cret"))
            .unwrap();
        // A save that will be refused asks nothing first.
        assert_eq!(
            host.save_question(&input("ftp://a.example", Some("sk-3"), MASKED))
                .unwrap(),
            None
        );
        let header = question(input("https://a.example/v1", None, "other"));
        assert!(header.contains("header value \"X-Team\""), "{header}");
        assert!(!format!("{replaced}{moved}{header}").contains("s3cret"));
    }

    #[test]
    fn removing_a_provider_is_asked_about_by_name_and_address_without_its_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        host.save_provider(ProviderInput {
            id: "gemini".into(),
            protocol: Protocol::Gemini,
            base_url: "https://generativelanguage.example/v1beta?key=AIza-s3cret".into(),
            default_model: None,
            headers: Default::default(),
            api_key: Some("sk-stored".into()),
            is_new: true,
        })
        .unwrap();
        let question = host.removal_question("gemini").unwrap();
        assert!(
            question.starts_with(
                "Remove the provider \"gemini\" (\"https://generativelanguage.example/v1beta?key="
            ),
            "{question}"
        );
        assert!(question.contains("stored API key"), "{question}");
        assert!(
            !question.contains("s3cret") && !question.contains("sk-stored"),
            "{question}"
        );
        // Nothing is asked about a provider that is not there.
        assert!(matches!(
            host.removal_question("other"),
            Err(ProvidersError::Settings(SettingsError::UnknownProvider(_)))
        ));
    }

    #[test]
    fn the_add_form_never_overwrites_a_provider_and_an_edit_keeps_what_it_does_not_show() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        let input = |is_new: bool, url: &str| ProviderInput {
            id: "local".into(),
            protocol: Protocol::OpenAiChat,
            base_url: url.into(),
            default_model: Some("m".into()),
            headers: Default::default(),
            api_key: None,
            is_new,
        };
        host.save_provider(input(true, "http://127.0.0.1:1/v1"))
            .unwrap();
        let again = host.save_provider(input(true, "http://127.0.0.1:2/v1"));
        assert!(
            matches!(
                again,
                Err(ProvidersError::Settings(SettingsError::DuplicateProvider(
                    _
                )))
            ),
            "{again:?}"
        );
        // An edit that sends the mask keeps a header's stored value.
        let mut with_header = input(false, "http://127.0.0.1:1/v1");
        with_header
            .headers
            .insert("Authorization".into(), "Bearer tok-123".into());
        host.save_provider(with_header).unwrap();
        let mut masked_edit = input(false, "http://127.0.0.1:1/v1");
        masked_edit
            .headers
            .insert("Authorization".into(), MASKED.into());
        host.save_provider(masked_edit).unwrap();
        let (config, _) = host.saved_provider_config("local").unwrap();
        assert_eq!(
            config.http.extra_headers,
            [("Authorization".to_owned(), "Bearer tok-123".to_owned())]
        );
        // A mask with no value behind it (the header renamed in the form, or its provider
        // removed meanwhile so the save adds it) is refused, saying why: never stored as
        // the value, never dropped without a word.
        let mut renamed = input(false, "http://127.0.0.1:1/v1");
        renamed.headers.insert("X-Auth".into(), MASKED.into());
        let mut re_added = input(true, "http://127.0.0.1:1/v1");
        re_added.id = "gone".into();
        re_added
            .headers
            .insert("X-Gateway-Token".into(), MASKED.into());
        for refused in [renamed, re_added] {
            let error = host.save_provider(refused).unwrap_err().to_string();
            assert!(error.contains("type its value again"), "{error}");
        }
        assert!(
            host.settings()
                .unwrap()
                .providers
                .iter()
                .all(|p| p.id != "gone")
        );
        let (config, _) = host.saved_provider_config("local").unwrap();
        assert_eq!(
            config.http.extra_headers,
            [("Authorization".to_owned(), "Bearer tok-123".to_owned())]
        );
        // An edit keeps fields it does not manage.
        let file = dir.path().join("settings.json");
        let mut raw: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        raw["providers"][0]["futureField"] = serde_json::json!(7);
        std::fs::write(&file, raw.to_string()).unwrap();
        host.save_provider(input(false, "http://127.0.0.1:3/v1"))
            .unwrap();
        let saved = host.settings().unwrap();
        assert_eq!(saved.providers[0].base_url, "http://127.0.0.1:3/v1");
        assert_eq!(saved.providers[0].other["futureField"], 7);
        let bad = host.save_provider(input(false, "ftp://nope"));
        assert!(bad.is_err());
    }

    /// A provider moved to another server whose settings cannot be written (read-only)
    /// stays as it was, its key included: the key taken from it is put back.
    #[cfg(unix)]
    #[test]
    fn a_move_whose_settings_cannot_be_written_keeps_the_providers_key() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        let input = |url: &str, key: Option<&str>, is_new: bool| ProviderInput {
            id: "p".into(),
            protocol: Protocol::OpenAiChat,
            base_url: url.into(),
            default_model: Some("m".into()),
            headers: BTreeMap::new(),
            api_key: key.map(str::to_owned),
            is_new,
        };
        host.save_provider(input("https://a.example/v1", Some("sk-kept"), true))
            .unwrap();
        let file = dir.path().join("settings.json");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o400)).unwrap();
        let refused = host
            .save_provider(input("https://b.example/v1", Some("sk-new"), false))
            .unwrap_err();
        assert!(refused.to_string().contains("read-only"), "{refused}");
        let (config, _) = host.saved_provider_config("p").unwrap();
        assert_eq!(config.base_url, "https://a.example/v1");
        assert_eq!(config.api_key.as_deref(), Some("sk-kept"));
    }

    #[test]
    fn header_values_live_in_the_secret_store_and_never_in_settings_or_its_backups() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        let settings_file = dir.path().join("settings.json");
        let sent = |host: &Host| {
            host.saved_provider_config("p")
                .map(|(c, _)| c.http.extra_headers)
        };
        let form = |headers: &[(&str, &str)]| ProviderInput {
            id: "p".into(),
            protocol: Protocol::OpenAiChat,
            base_url: "https://gateway.example/v1".into(),
            default_model: None,
            headers: headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
            api_key: None,
            is_new: false,
        };
        host.save_provider(ProviderInput {
            is_new: true,
            ..form(&[("X-Gateway-Token", "gw-s3cret-1")])
        })
        .unwrap();
        let on_disk = |file: &std::path::Path| std::fs::read_to_string(file).unwrap_or_default();
        assert!(
            !on_disk(&settings_file).contains("gw-s3cret"),
            "{}",
            on_disk(&settings_file)
        );
        assert_eq!(
            host.settings().unwrap().providers[0].stored_headers,
            ["X-Gateway-Token"]
        );
        assert_eq!(
            sent(&host).unwrap(),
            [("X-Gateway-Token".to_owned(), "gw-s3cret-1".to_owned())]
        );
        // Listed masked, by name.
        let listed = host.list_providers().unwrap();
        assert_eq!(listed[0].settings.headers["X-Gateway-Token"], MASKED);

        // Replaced: the new value is sent, and neither the file nor any backup of it ever
        // held either value.
        host.save_provider(form(&[("X-Gateway-Token", "gw-s3cret-2")]))
            .unwrap();
        assert_eq!(
            sent(&host).unwrap(),
            [("X-Gateway-Token".to_owned(), "gw-s3cret-2".to_owned())]
        );
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("settings.json")
            {
                assert!(!on_disk(&path).contains("gw-s3cret"), "{}", path.display());
            }
        }

        // A value written into settings by hand (or by an earlier Conduit) is sent, wins
        // over a stored one, and moves to the store with the next save of the provider.
        let mut raw: serde_json::Value = serde_json::from_str(&on_disk(&settings_file)).unwrap();
        raw["providers"][0]["headers"] = json!({"X-Gateway-Token": "hand-s3cret", "X-Team": "t1"});
        std::fs::write(&settings_file, raw.to_string()).unwrap();
        assert_eq!(
            sent(&host).unwrap(),
            [
                ("X-Gateway-Token".to_owned(), "hand-s3cret".to_owned()),
                ("X-Team".to_owned(), "t1".to_owned())
            ]
        );
        assert_eq!(
            host.save_question(&form(&[("X-Gateway-Token", MASKED), ("X-Team", MASKED)]))
                .unwrap(),
            None,
            "sent back as shown, nothing is lost"
        );
        host.save_provider(form(&[("X-Gateway-Token", MASKED), ("X-Team", MASKED)]))
            .unwrap();
        assert!(!on_disk(&settings_file).contains("s3cret"));
        assert!(!on_disk(&settings_file).contains("\"t1\""));
        assert_eq!(
            sent(&host).unwrap(),
            [
                ("X-Gateway-Token".to_owned(), "hand-s3cret".to_owned()),
                ("X-Team".to_owned(), "t1".to_owned())
            ]
        );

        // The store lost the values (a keychain item deleted by hand): using the provider
        // says which header and what to do; typing the value again mends it.
        host.secrets().delete(&entry_of(&host, "p")).unwrap();
        let missing = sent(&host).unwrap_err().to_string();
        assert!(
            missing.contains("\"X-Gateway-Token\" of provider \"p\" is missing")
                && missing.contains("type it again in Settings"),
            "{missing}"
        );
        // Sent back masked, a value the store lost is not silently dropped.
        let masked = host
            .save_provider(form(&[("X-Gateway-Token", MASKED), ("X-Team", "t2")]))
            .unwrap_err();
        assert!(
            matches!(masked, ProvidersError::MissingHeader { .. }),
            "{masked}"
        );
        host.save_provider(form(&[
            ("X-Gateway-Token", "gw-s3cret-3"),
            ("X-Team", "t2"),
        ]))
        .unwrap();
        assert_eq!(sent(&host).unwrap().len(), 2);
        // An entry that does not read counts as missing: named on use, mended by typing.
        host.secrets()
            .set(&entry_of(&host, "p"), "not json")
            .unwrap();
        assert!(matches!(
            sent(&host),
            Err(ProvidersError::MissingHeader { .. })
        ));
        host.save_provider(form(&[
            ("X-Gateway-Token", "gw-s3cret-4"),
            ("X-Team", "t3"),
        ]))
        .unwrap();
        assert_eq!(
            sent(&host).unwrap(),
            [
                ("X-Gateway-Token".to_owned(), "gw-s3cret-4".to_owned()),
                ("X-Team".to_owned(), "t3".to_owned())
            ]
        );
        // A header dropped in the form leaves the store with the save: each save writes a
        // new entry that settings name, and the one before goes.
        host.save_provider(form(&[("X-Team", MASKED)])).unwrap();
        let entries = || {
            let file = std::fs::read_to_string(dir.path().join("secrets.json")).unwrap();
            let secrets: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&file).unwrap();
            secrets
                .into_iter()
                .filter(|(name, _)| name.starts_with("provider-headers:p:"))
                .map(|(name, value)| (name, value.as_str().unwrap().to_owned()))
                .collect::<Vec<_>>()
        };
        let left = entries();
        assert_eq!(left.len(), 1, "{left:?}");
        assert_eq!(left[0].0, entry_of(&host, "p"));
        assert!(!left[0].1.contains("gw-s3cret"), "{left:?}");

        #[cfg(unix)]
        {
            // A settings write that fails (the file made read-only) leaves the provider as it
            // was: the same entry named, its values sent, and no entry of the failed save left.
            let before = entry_of(&host, "p");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&settings_file, std::fs::Permissions::from_mode(0o400))
                .unwrap();
            assert!(host.save_provider(form(&[("X-Team", "t-failed")])).is_err());
            std::fs::set_permissions(&settings_file, std::fs::Permissions::from_mode(0o600))
                .unwrap();
            assert_eq!(entry_of(&host, "p"), before);
            assert_eq!(
                sent(&host).unwrap(),
                [("X-Team".to_owned(), "t3".to_owned())]
            );
            assert_eq!(entries().len(), 1, "{:?}", entries());
        }

        // A name written into settings by hand borrows no other secret as header values,
        // and the next save, replacing it, deletes no other secret either.
        host.secrets().set("provider:p", "sk-p-key").unwrap();
        // The edit leaves this entry unnamed: it stays (nothing deletes what settings no
        // longer name), unused.
        let orphaned = entry_of(&host, "p");
        let mut raw: serde_json::Value = serde_json::from_str(&on_disk(&settings_file)).unwrap();
        raw["providers"][0]["headersSecret"] = json!("provider:p");
        std::fs::write(&settings_file, raw.to_string()).unwrap();
        assert!(matches!(
            sent(&host),
            Err(ProvidersError::MissingHeader { .. })
        ));
        host.save_provider(form(&[("X-Team", "t4")])).unwrap();
        assert_eq!(
            host.secrets().get("provider:p").unwrap().as_deref(),
            Some("sk-p-key")
        );

        // Removed: its stored values go with it.
        host.remove_provider("p").unwrap();
        let left: Vec<String> = entries().into_iter().map(|(name, _)| name).collect();
        assert_eq!(left, [orphaned]);

        // Another provider's entry that starts like this one's (provider `p:q`'s) is
        // not this one's.
        let id = "0123456789abcdef0123456789abcdef";
        assert!(is_headers_entry_of(
            "p",
            &format!("provider-headers:p:{id}")
        ));
        assert!(!is_headers_entry_of(
            "p",
            &format!("provider-headers:p:q:{id}")
        ));
        assert!(!is_headers_entry_of("p", "provider-headers:p:"));
        assert!(!is_headers_entry_of(
            "p",
            &format!("provider-headers:p:{id}0")
        ));
    }

    /// The secret store's entry that settings name for provider `id`'s header values.
    fn entry_of(host: &Host, id: &str) -> String {
        host.settings()
            .unwrap()
            .provider(id)
            .unwrap()
            .headers_secret
            .clone()
            .unwrap()
    }

    #[tokio::test]
    async fn a_local_server_that_lists_models_is_found_and_a_silent_port_is_not() {
        let server = ScriptedLlm::start(Vec::new()).await.unwrap();
        server.answer_models(
            json!({"object": "list", "data": [{"id": "llama3.2", "object": "model"}]}),
        );
        // A port that accepts and never answers: the probe gives up after its timeout.
        let silent_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let closed_port = silent_listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = silent_listener.accept().await {
                held.push(socket);
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        let answering = Dialect::OpenAiChat.base_url(&server.url());
        let silent = format!("http://127.0.0.1:{closed_port}/v1");
        let found = host
            .detect_local_providers(&[
                ("ollama", "Ollama", answering.as_str()),
                ("lm-studio", "LM Studio", silent.as_str()),
            ])
            .await;
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].id, "ollama");
        assert_eq!(found[0].models, ["llama3.2"]);
    }

    #[tokio::test]
    async fn only_a_port_that_accepts_is_probed_over_http() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = listener.local_addr().unwrap().port();
        // A port nothing listens on: bound, then let go.
        let closed = {
            let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            gone.local_addr().unwrap().port()
        };
        assert!(accepts_connections(&format!("http://127.0.0.1:{open}/v1")).await);
        assert!(!accepts_connections(&format!("http://127.0.0.1:{closed}/v1")).await);
        assert!(!accepts_connections("not a url").await);
        assert!(!accepts_connections("file:///tmp/models").await);
        drop(listener);
    }

    /// A loopback model server that lists one model (a few times, each request
    /// recorded), and its base URL.
    async fn recording_server() -> (String, ScriptedLlm) {
        let models = json!({"object": "list", "data": [{"id": "m", "object": "model"}]});
        let server = ScriptedLlm::start(vec![Reply::Json(models); 4])
            .await
            .unwrap();
        (Dialect::OpenAiChat.base_url(&server.url()), server)
    }

    /// The request line and headers of each request `server` received.
    fn heads(server: &ScriptedLlm) -> Vec<String> {
        server
            .requests()
            .iter()
            .map(|r| {
                let headers: Vec<String> = r
                    .headers
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}\r\n"))
                    .collect();
                format!("{} {}\r\n{}", r.method, r.path_and_query, headers.concat())
            })
            .collect()
    }

    /// A host under `home` whose secrets are a file there (no keychain in tests).
    fn host_with_file_secrets(home: &std::path::Path) -> Host {
        let host = Host::new(crate::Paths::under_home(home.to_owned(), None));
        let file_store: Box<dyn crate::secrets::SecretStore> =
            Box::new(crate::secrets::FileSecrets::new(home.join("secrets.json")));
        assert!(host.secrets.set(file_store).is_ok());
        host
    }

    /// A secret store whose first `set` is answered while an editor saves the settings
    /// file (the keychain's unlock prompt stood open meanwhile).
    struct EditedDuringPrompt {
        file: crate::secrets::FileSecrets,
        settings: std::path::PathBuf,
        edited: std::sync::atomic::AtomicBool,
    }

    impl crate::secrets::SecretStore for EditedDuringPrompt {
        fn get(&self, name: &str) -> Result<Option<String>, crate::secrets::SecretError> {
            self.file.get(name)
        }
        fn set(&self, name: &str, value: &str) -> Result<(), crate::secrets::SecretError> {
            if !self.edited.swap(true, std::sync::atomic::Ordering::SeqCst) {
                let text = std::fs::read_to_string(&self.settings).unwrap();
                std::fs::write(&self.settings, text.replace('}', ", \"mine\": 1}")).unwrap();
            }
            self.file.set(name, value)
        }
        fn delete(&self, name: &str) -> Result<(), crate::secrets::SecretError> {
            self.file.delete(name)
        }
        fn describe(&self) -> String {
            self.file.describe()
        }
    }

    /// A new key for the same server, whose save is refused because an editor saved the
    /// settings meanwhile, leaves the old key in place (and a provider that had none, none).
    #[test]
    fn a_refused_save_keeps_the_key_the_provider_had() {
        for old in [Some("sk-old"), None] {
            let dir = tempfile::tempdir().unwrap();
            let host = Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
            let settings = host.paths().settings_file.clone();
            std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
            std::fs::write(
                &settings,
                serde_json::json!({"providers": [{"id": "p", "protocol": "openai-chat", "baseUrl": "https://api.example/v1"}]})
                    .to_string(),
            )
            .unwrap();
            let file = crate::secrets::FileSecrets::new(dir.path().join("secrets.json"));
            if let Some(old) = old {
                crate::secrets::SecretStore::set(&file, &crate::provider_secret_name("p"), old)
                    .unwrap();
            }
            let store: Box<dyn crate::secrets::SecretStore> = Box::new(EditedDuringPrompt {
                file,
                settings: settings.clone(),
                edited: Default::default(),
            });
            assert!(host.secrets.set(store).is_ok());
            let refused = host.save_provider(ProviderInput {
                id: "p".into(),
                protocol: Protocol::OpenAiChat,
                base_url: "https://api.example/v1".into(),
                // Something besides the key changes: the settings are written.
                default_model: Some("m2".into()),
                headers: Default::default(),
                api_key: Some("sk-new".into()),
                is_new: false,
            });
            assert!(
                matches!(
                    refused,
                    Err(ProvidersError::Settings(
                        SettingsError::ChangedMeanwhile { .. }
                    ))
                ),
                "{refused:?}"
            );
            assert_eq!(
                host.secrets()
                    .get(&crate::provider_secret_name("p"))
                    .unwrap()
                    .as_deref(),
                old
            );
        }
    }

    /// A key left under a provider's id (its removal could not delete it, or settings
    /// were edited by hand) is never the key of the next provider of that id: added
    /// without a key, it has none, whatever server it names.
    #[test]
    fn a_provider_added_without_a_key_never_inherits_one_left_under_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let host = host_with_file_secrets(dir.path());
        host.secrets()
            .set(&crate::provider_secret_name("x"), "sk-old")
            .unwrap();
        let provider =
            |url: &str| ProviderSettings::plain("x".into(), Protocol::OpenAiChat, url.into(), None);
        host.add_provider(provider("http://other-host.example/v1"), None)
            .unwrap();
        let (config, _) = host.saved_provider_config("x").unwrap();
        assert_eq!(config.api_key, None);

        // Removed: its key goes first. Added again with a key, then refused as a
        // duplicate: the first one's key stays.
        host.remove_provider("x").unwrap();
        host.add_provider(provider("https://api.example/v1"), Some("sk-new"))
            .unwrap();
        assert!(
            host.add_provider(provider("https://evil.example/v1"), Some("sk-evil"))
                .is_err()
        );
        let (config, _) = host.saved_provider_config("x").unwrap();
        assert_eq!(config.api_key.as_deref(), Some("sk-new"));
        host.remove_provider("x").unwrap();
        assert_eq!(
            host.secrets()
                .get(&crate::provider_secret_name("x"))
                .unwrap(),
            None
        );
        // An unknown provider is an error, and nothing is deleted.
        assert!(host.remove_provider("x").is_err());
    }

    /// A base URL written by hand with its scheme in capitals and a token in it: the
    /// window gets it masked, and a save of it back is refused without the token in the
    /// error (the check ran on the URL restored with its secrets, and printed it whole).
    #[test]
    fn a_refused_base_url_is_named_masked() {
        let dir = tempfile::tempdir().unwrap();
        let host = host_with_file_secrets(dir.path());
        let secret_url = "HTTPS://team:tok-0123456789abcdef@proxy.example/v1";
        std::fs::write(
            &host.paths().settings_file,
            serde_json::json!({"providers": [{"id": "p", "protocol": "openai-chat", "baseUrl": secret_url}]})
                .to_string(),
        )
        .unwrap();
        let shown = host.list_providers().unwrap()[0].settings.base_url.clone();
        assert!(!shown.contains("tok-0123456789abcdef"), "{shown}");
        let refused = host
            .save_provider(ProviderInput {
                id: "p".into(),
                protocol: Protocol::OpenAiChat,
                base_url: shown,
                default_model: None,
                headers: Default::default(),
                api_key: None,
                is_new: false,
            })
            .unwrap_err()
            .to_string();
        assert!(refused.contains("must start with"), "{refused}");
        assert!(!refused.contains("tok-0123456789abcdef"), "{refused}");
    }

    #[tokio::test]
    async fn a_saved_providers_requests_reuse_one_connection() {
        let (url, seen) = recording_server().await;
        let dir = tempfile::tempdir().unwrap();
        let host = host_with_file_secrets(dir.path());
        host.save_provider(ProviderInput {
            id: "local".into(),
            protocol: Protocol::OpenAiChat,
            base_url: url.clone(),
            default_model: Some("m".into()),
            headers: Default::default(),
            api_key: None,
            is_new: true,
        })
        .unwrap();
        // Each call builds its provider anew (as each turn does); they share the host's
        // client, so the second request goes over the first one's connection.
        host.provider_models("local").await.unwrap();
        host.provider_models("local").await.unwrap();
        let peers: Vec<_> = seen.requests().iter().map(|r| r.peer).collect();
        assert_eq!(peers.len(), 2);
        assert_eq!(
            peers[0], peers[1],
            "a new connection for the second request"
        );

        // A provider built without the host's clients opens its own connection.
        let alone = conduit_providers::build(
            ProviderConfig {
                protocol: Protocol::OpenAiChat,
                base_url: url,
                api_key: None,
                http: HttpSettings::default(),
            },
            host.media.clone(),
        )
        .unwrap();
        alone.list_models().await.unwrap();
        let peers: Vec<_> = seen.requests().iter().map(|r| r.peer).collect();
        assert_ne!(peers[2], peers[0]);
    }

    #[tokio::test]
    async fn a_provider_moved_to_another_server_never_sends_it_the_old_key_or_headers() {
        const KEY: &str = "sk-old-server-key-31337";
        const TOKEN: &str = "org-token-for-the-old-server";
        let (old_url, old_seen) = recording_server().await;
        let (new_url, new_seen) = recording_server().await;
        let dir = tempfile::tempdir().unwrap();
        let host = host_with_file_secrets(dir.path());
        let input = |url: &str, key: Option<&str>, token: &str, is_new: bool| ProviderInput {
            id: "p".into(),
            protocol: Protocol::OpenAiChat,
            base_url: url.into(),
            default_model: Some("m".into()),
            headers: [("X-Org-Token".to_owned(), token.to_owned())].into(),
            api_key: key.map(str::to_owned),
            is_new,
        };
        host.save_provider(input(&old_url, Some(KEY), TOKEN, true))
            .unwrap();
        // Another path on the same server keeps the key and the masked header.
        let same_server = old_url.replace("/v1", "/v1/");
        host.save_provider(input(&same_server, None, MASKED, false))
            .unwrap();
        host.provider_models("p").await.unwrap();
        let first = heads(&old_seen).concat();
        assert!(first.contains(KEY) && first.contains(TOKEN), "{first}");

        // The form sends the mask and no key: the new server gets neither.
        host.save_provider(input(&new_url, None, MASKED, false))
            .unwrap();
        host.provider_models("p").await.unwrap();
        let seen = heads(&new_seen).concat();
        assert!(seen.contains("GET /v1/models"), "{seen}");
        assert!(!seen.contains(KEY) && !seen.contains(TOKEN), "{seen}");
        let saved = host.settings().unwrap();
        assert!(saved.providers[0].headers.is_empty());
        let secrets = std::fs::read_to_string(dir.path().join("secrets.json")).unwrap();
        assert!(!secrets.contains(KEY), "{secrets}");

        // A move that brings a new key and header uses them.
        host.save_provider(input(&old_url, Some("sk-new-key"), "new-token", false))
            .unwrap();
        host.provider_models("p").await.unwrap();
        let latest = heads(&old_seen).last().cloned().unwrap();
        assert!(
            latest.contains("sk-new-key") && latest.contains("new-token"),
            "{latest}"
        );

        // A key named by an environment variable does not follow a move either.
        host.update_settings(|settings| {
            settings.providers[0].api_key_env = Some("PATH".into());
            Ok::<_, crate::settings::SettingsError>(())
        })
        .unwrap();
        host.save_provider(input(&new_url, None, MASKED, false))
            .unwrap();
        assert_eq!(host.settings().unwrap().providers[0].api_key_env, None);
        let path = std::env::var("PATH").unwrap();
        host.provider_models("p").await.unwrap();
        let seen = heads(&new_seen).concat();
        assert!(!seen.contains(&path), "{seen}");
    }

    #[test]
    fn the_window_adds_only_a_local_server_the_host_looks_for_as_the_host_speaks_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        let local = |base_url: &str| LocalProvider {
            id: "ollama".into(),
            name: "Ollama".into(),
            protocol: Protocol::Anthropic,
            base_url: base_url.into(),
            models: vec!["llama3".into()],
        };
        let refused = host
            .add_local_provider(local("https://attacker.example/v1"))
            .unwrap_err();
        assert!(
            refused.to_string().contains("not a local model server"),
            "{refused}"
        );
        assert!(host.settings().unwrap().providers.is_empty());
        host.add_local_provider_on_first_run(local("http://127.0.0.1:11434/v1"))
            .unwrap();
        let saved = &host.settings().unwrap().providers[0];
        assert_eq!(saved.protocol, Protocol::OpenAiChat);
        assert_eq!(saved.default_model.as_deref(), Some("llama3"));
        // After the first run the chat window adds none (Settings still may).
        let mut studio = local("http://127.0.0.1:1234/v1");
        studio.id = "lm-studio".into();
        let refused = host
            .add_local_provider_on_first_run(studio.clone())
            .unwrap_err();
        assert!(matches!(refused, ProvidersError::NotFirstRun), "{refused}");
        assert_eq!(host.settings().unwrap().providers.len(), 1);
        host.add_local_provider(studio).unwrap();
        assert_eq!(host.settings().unwrap().providers.len(), 2);
    }
}
