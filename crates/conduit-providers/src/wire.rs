//! What differs between protocols (paths, auth headers, conversions, decoder, image
//! limits) as one trait, and the one provider that drives any of them over HTTP.

use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use conduit_core::media::MediaStore;
use conduit_core::provider::{EventStream, ModelInfo, ModelRequest, Provider, ProviderError};
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
    /// Whether `body` holds what some models refuse and the request can do without
    /// (Responses' `include` of encrypted reasoning, which only reasoning models take;
    /// Chat Completions' `reasoning_content` sent back, which Groq refuses).
    fn has_optional(_body: &Value) -> bool {
        false
    }
    /// Takes that out of `body`.
    fn drop_optional(_body: &mut Value) {}
    /// Whether `error` is a model's refusal of what [`Wire::drop_optional`] takes out.
    fn refuses_optional(_error: &ProviderError) -> bool {
        false
    }
}

/// The servers' models (base URL and model) that refused a request's optional part this
/// session: their later requests go without it at once, instead of being refused first.
/// Kept in memory only, as the models that refuse tools are.
static REFUSED_OPTIONAL: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);

/// What call ids a protocol takes. A call's id goes back to the provider it came from, but
/// a conversation may move to another provider, whose rules it may break: Kimi's
/// `functions.get_weather:0` is refused by Anthropic (`^[a-zA-Z0-9_-]+$`), vLLM's
/// `chatcmpl-tool-` and 32 hex digits (46 characters) by OpenAI (at most 40).
#[derive(Debug, Clone, Copy)]
pub struct CallIds {
    pub max_len: usize,
    /// Only ASCII letters, digits, `_` and `-`.
    pub word_chars_only: bool,
}

/// Anthropic's `tool_use.id` (its own are `toolu_` and 24 characters).
pub const ANTHROPIC_CALL_IDS: CallIds = CallIds {
    max_len: 64,
    word_chars_only: true,
};

/// OpenAI's `tool_calls[].id` and `call_id`.
pub const OPENAI_CALL_IDS: CallIds = CallIds {
    max_len: conduit_core::content::MAX_MADE_WIRE_ID_LEN,
    word_chars_only: false,
};

/// `id` as a call's id goes to a protocol with `rules`: as it is when it fits them, else
/// `call_` and a hash of it (29 characters). The same id always gives the same one, so a
/// call and its result still pair, and two ids give two.
pub fn sent_call_id(id: &str, rules: CallIds) -> std::borrow::Cow<'_, str> {
    let fits = !id.is_empty()
        && id.len() <= rules.max_len
        && (!rules.word_chars_only
            || id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
    if fits {
        return std::borrow::Cow::Borrowed(id);
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(id.as_bytes());
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    std::borrow::Cow::Owned(format!("call_{hex}"))
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
        let base_url = self.base_url.clone();
        let build = move |request: &ModelRequest, images: &PreparedImages, optional: bool| {
            let mut body = W::build_request(request, images);
            W::for_service(&base_url, &mut body);
            if !optional {
                W::drop_optional(&mut body);
            }
            body
        };
        let url = W::stream_url(&self.base_url, &request.model);
        let headers = W::auth_headers(self.api_key.as_deref());
        let model = format!("{}\n{}", self.base_url, request.model);
        let refused_before = REFUSED_OPTIONAL.lock().contains(&model);
        let body = build(&request, &images, !refused_before);
        if refused_before || !W::has_optional(&body) {
            return self.http.stream(url, &headers, body, W::Decoder::default());
        }
        // Refused before any answer (a 400): the same request goes again without it. The
        // body is built again then, not kept twice (it holds the images).
        let first = self
            .http
            .stream(url.clone(), &headers, body, W::Decoder::default())?;
        let http = self.http.clone();
        Ok(crate::instead_if_refused(
            first,
            W::refuses_optional,
            move |error| async move {
                tracing::info!(%error, "the model refused an optional part of the request: sent again without it, and from now on this session");
                REFUSED_OPTIONAL.lock().insert(model);
                http.stream(
                    url,
                    &headers,
                    build(&request, &images, false),
                    W::Decoder::default(),
                )
            },
        ))
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
