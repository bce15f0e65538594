//! What differs between protocols (paths, auth headers, conversions, decoder, image
//! limits) as one trait, and the one provider that drives any of them over HTTP.

use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use conduit_core::media::MediaStore;
use conduit_core::provider::{
    EventStream, ModelInfo, ModelRequest, Provider, ProviderError, ProviderEvent,
};
use futures::StreamExt;
use parking_lot::Mutex;
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
    /// Takes out of `body` what some models refuse and the request can do without
    /// (Responses' `include` of encrypted reasoning, which only reasoning models take);
    /// whether there was any.
    fn drop_optional(_body: &mut Value) -> bool {
        false
    }
    /// Whether `error` is a model's refusal of what [`Wire::drop_optional`] takes out.
    fn refuses_optional(_error: &ProviderError) -> bool {
        false
    }
}

/// The servers' models (base URL and model) that refused a request's optional part this
/// session: their later requests go without it at once, instead of being refused first.
/// Kept in memory only, as the models that refuse tools are.
static REFUSED_OPTIONAL: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);

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
        let model = format!("{}\n{}", self.base_url, request.model);
        if REFUSED_OPTIONAL.lock().contains(&model) {
            W::drop_optional(&mut body);
            return self.http.stream(url, &headers, body, W::Decoder::default());
        }
        let mut without = body.clone();
        if !W::drop_optional(&mut without) {
            return self.http.stream(url, &headers, body, W::Decoder::default());
        }
        // Refused before any answer (a 400): the same request goes again without it.
        let mut first = self
            .http
            .stream(url.clone(), &headers, body, W::Decoder::default())?;
        let http = self.http.clone();
        Ok(async_stream::stream! {
            let mut answered = false;
            while let Some(item) = first.next().await {
                match item {
                    Err(error) if !answered && W::refuses_optional(&error) => {
                        tracing::info!(%error, "the model refused an optional part of the request: sent again without it, and from now on this session");
                        REFUSED_OPTIONAL.lock().insert(model);
                        match http.stream(url, &headers, without, W::Decoder::default()) {
                            Ok(mut again) => {
                                while let Some(item) = again.next().await {
                                    yield item;
                                }
                            }
                            Err(error) => yield Err(error),
                        }
                        return;
                    }
                    Ok(event @ ProviderEvent::Retrying { .. }) => yield Ok(event),
                    other => {
                        answered = true;
                        yield other;
                    }
                }
            }
        }
        .boxed())
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
