//! What differs between protocols (paths, auth headers, conversions, decoder, image
//! limits) as one trait, and the one provider that drives any of them over HTTP.

use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use conduit_core::media::MediaStore;
use conduit_core::provider::{EventStream, ModelInfo, ModelRequest, Provider, ProviderError};
use serde_json::Value;

use crate::http::{HttpClient, StreamDecoder};
use crate::images::{ImageLimits, PreparedImages};

/// One wire protocol: pure functions and constants, no I/O.
pub trait Wire: Send + Sync + 'static {
    /// The protocol's name, stamped on reasoning blocks for replay.
    const PROTOCOL: &'static str;
    const IMAGE_LIMITS: ImageLimits;
    type Decoder: StreamDecoder + Default;

    fn auth_headers(api_key: Option<&str>) -> Vec<(&'static str, String)>;
    fn stream_url(base_url: &str, model: &str) -> String;
    fn models_url(base_url: &str) -> String;
    fn build_request(request: &ModelRequest, images: &PreparedImages) -> Value;
    /// What one service at `base_url` wants different in a request body (a field it
    /// names its own way); most take the protocol's body as it is.
    fn for_service(_base_url: &str, _body: &mut Value) {}
    fn parse_models(body: &Value) -> Vec<ModelInfo>;
}

/// `Authorization: Bearer <key>`, as OpenAI and compatible servers take it.
pub fn bearer(api_key: Option<&str>) -> Vec<(&'static str, String)> {
    api_key
        .map(|key| vec![("authorization", format!("Bearer {key}"))])
        .unwrap_or_default()
}

/// A provider speaking protocol `W` at a base URL.
pub struct WireProvider<W: Wire> {
    http: HttpClient,
    base_url: String,
    api_key: Option<String>,
    media: Arc<dyn MediaStore>,
    wire: PhantomData<W>,
}

impl<W: Wire> WireProvider<W> {
    pub fn new(
        http: HttpClient,
        base_url: &str,
        api_key: Option<String>,
        media: Arc<dyn MediaStore>,
    ) -> Self {
        Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            media,
            wire: PhantomData,
        }
    }
}

#[async_trait]
impl<W: Wire> Provider for WireProvider<W> {
    fn protocol(&self) -> &'static str {
        W::PROTOCOL
    }

    async fn stream(&self, request: ModelRequest) -> Result<EventStream, ProviderError> {
        let images = crate::prepare_images(&request, &self.media, W::IMAGE_LIMITS).await?;
        let mut body = W::build_request(&request, &images);
        W::for_service(&self.base_url, &mut body);
        let url = W::stream_url(&self.base_url, &request.model);
        let headers = W::auth_headers(self.api_key.as_deref());
        self.http.stream(url, &headers, body, W::Decoder::default())
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        let headers = W::auth_headers(self.api_key.as_deref());
        let body = self
            .http
            .get_json(&W::models_url(&self.base_url), &headers)
            .await?;
        Ok(W::parse_models(&body))
    }
}
