//! Managing providers: add, remove, list, and ask one for its models. Keys go to the
//! secret store, never to settings.

use std::sync::Arc;

use conduit_core::media::MediaStore;
use conduit_core::provider::{ModelInfo, ProviderError};
use conduit_providers::{HttpSettings, ProviderConfig};
use serde::Serialize;

use crate::secrets::SecretError;
use crate::settings::{ProviderSettings, SettingsError};
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
}

/// A provider as a frontend lists it: its settings and where its key is, never the key.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSummary {
    #[serde(flatten)]
    pub settings: ProviderSettings,
    /// `secret store`, `env VAR`, or `none`.
    pub key: String,
}

impl Host {
    /// Adds a provider; `api_key`, if given, goes to the secret store.
    pub fn add_provider(
        &self,
        provider: ProviderSettings,
        api_key: Option<&str>,
    ) -> Result<(), ProvidersError> {
        let mut settings = self.settings()?;
        let id = provider.id.clone();
        settings.add_provider(provider)?;
        if let Some(key) = api_key {
            self.secrets().set(&provider_secret_name(&id), key)?;
        }
        settings.save(&self.paths.settings_file)?;
        tracing::info!(provider = %id, "provider added");
        Ok(())
    }

    /// Removes a provider and its stored key.
    pub fn remove_provider(&self, id: &str) -> Result<(), ProvidersError> {
        let mut settings = self.settings()?;
        settings.remove_provider(id)?;
        settings.save(&self.paths.settings_file)?;
        self.secrets().delete(&provider_secret_name(id))?;
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
                Ok(ProviderSummary {
                    settings: provider,
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
        let http = HttpSettings {
            extra_headers: saved
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
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

/// An API key from the environment variable the user named.
pub(crate) fn key_from_env(var: &str) -> Result<String, ProvidersError> {
    std::env::var(var).map_err(|_| ProvidersError::MissingKeyEnv(var.to_owned()))
}
