//! LLM wire protocols behind the core's [`Provider`] trait: Anthropic Messages, OpenAI
//! Responses, OpenAI Chat Completions (which also serves Ollama, DeepSeek, OpenRouter,
//! LM Studio, vLLM, Groq and Mistral as configuration) and Gemini.
//!
//! Place in the crate graph: depends on `conduit-core` only; `conduit-host` composes it.
//! Each protocol is one module: pure functions from the conversation model to request
//! JSON and from stream events to [`ProviderEvent`]s, plus a client over [`http`].

pub mod anthropic;
mod decode;
pub mod error_body;
pub mod gemini;
pub mod http;
pub mod images;
pub mod openai_chat;
pub mod openai_responses;
mod sse_lines;
pub mod text_tools;
pub mod wire;

use std::sync::Arc;

use conduit_core::media::MediaStore;
use conduit_core::provider::{ModelRequest, Provider, ProviderError, ProviderErrorKind};
use serde::{Deserialize, Serialize};

pub use http::{HttpClient, HttpSettings, RetryPolicy, checked_header};
use wire::WireProvider;

/// A wire protocol, as users name it in settings and on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Protocol {
    #[serde(rename = "anthropic")]
    Anthropic,
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    #[serde(rename = "gemini")]
    Gemini,
}

impl Protocol {
    pub const ALL: [Protocol; 4] = [
        Protocol::Anthropic,
        Protocol::OpenAiResponses,
        Protocol::OpenAiChat,
        Protocol::Gemini,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Anthropic => anthropic::PROTOCOL,
            Protocol::OpenAiResponses => openai_responses::PROTOCOL,
            Protocol::OpenAiChat => openai_chat::PROTOCOL,
            Protocol::Gemini => gemini::PROTOCOL,
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// Everything needed to talk to one provider.
#[derive(Clone)]
pub struct ProviderConfig {
    pub protocol: Protocol,
    /// The service root as its official SDK takes it, e.g. `https://api.anthropic.com`
    /// or `http://localhost:11434/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub http: HttpSettings,
}

/// Names the key and headers without their values: a configuration logged with `?` must
/// not write a key into the log.
impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("protocol", &self.protocol)
            // A base URL can hold a key too (its user name, query, a key-like segment).
            .field("base_url", &secrets_masked(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "••••"))
            .field("http", &self.http)
            .finish()
    }
}

/// A URL's origin (`https://api.openai.com`): where it is, without what may hold a key
/// (the user name, password, path and query); `None` when it is not a URL.
pub fn origin_of(url: &str) -> Option<String> {
    reqwest::Url::parse(url)
        .ok()
        .map(|parsed| parsed.origin().ascii_serialization())
}

/// A base URL as a log may show it: its origin alone (the user name, password, path and
/// query may each hold a key).
fn secrets_masked(url: &str) -> String {
    match origin_of(url) {
        Some(origin) => format!("{origin}/…"),
        None => "(not a URL)".to_owned(),
    }
}

/// `first`, unless it fails before any answer with an error `refused` picks (a model's
/// refusal of part of the request, which comes before any output): then the stream
/// `instead` makes, given that error. Retries `first` announces pass through meanwhile.
/// Text tool-calling (a model that takes no tools) and a request's optional part (a model
/// that refuses it) fall back this one way.
pub(crate) fn instead_if_refused<Instead, Made>(
    mut first: conduit_core::provider::EventStream,
    refused: impl Fn(&ProviderError) -> bool + Send + 'static,
    instead: Instead,
) -> conduit_core::provider::EventStream
where
    Instead: FnOnce(ProviderError) -> Made + Send + 'static,
    Made: std::future::Future<Output = Result<conduit_core::provider::EventStream, ProviderError>>
        + Send,
{
    use conduit_core::provider::ProviderEvent;
    use futures::StreamExt;
    async_stream::stream! {
        let mut answered = false;
        let mut refusal = None;
        while let Some(item) = first.next().await {
            match item {
                Err(error) if !answered && refused(&error) => {
                    refusal = Some(error);
                    break;
                }
                // Token counts (Anthropic's `message_start`) come before a refusal too.
                Ok(
                    event @ (ProviderEvent::Retrying { .. }
                    | ProviderEvent::LeftOut(_)
                    | ProviderEvent::Usage(_)),
                ) => {
                    yield Ok(event)
                }
                other => {
                    answered = true;
                    yield other;
                }
            }
        }
        // What the first request holds (its images and PDFs as base64) goes before the
        // second is made.
        drop(first);
        if let Some(error) = refusal {
            match instead(error).await {
                Ok(mut again) => {
                    while let Some(item) = again.next().await {
                        yield item;
                    }
                }
                Err(error) => yield Err(error),
            }
        }
    }
    .boxed()
}

/// Builds the provider a configuration describes.
pub fn build(
    config: ProviderConfig,
    media: Arc<dyn MediaStore>,
) -> Result<Arc<dyn Provider>, ProviderError> {
    let mut settings = config.http;
    settings.url_secrets = conduit_net::url_secrets(&config.base_url);
    let http = HttpClient::new(settings)?;
    let (base, key) = (config.base_url.as_str(), config.api_key);
    Ok(match config.protocol {
        Protocol::Anthropic => Arc::new(WireProvider::<anthropic::Anthropic>::new(
            http, base, key, media,
        )),
        Protocol::OpenAiResponses => Arc::new(
            WireProvider::<openai_responses::OpenAiResponses>::new(http, base, key, media),
        ),
        Protocol::OpenAiChat => Arc::new(WireProvider::<openai_chat::OpenAiChat>::new(
            http, base, key, media,
        )),
        Protocol::Gemini => Arc::new(WireProvider::<gemini::Gemini>::new(http, base, key, media)),
    })
}

/// Loads and prepares a request's images and PDFs off the async workers; a PDF for which
/// `left_out_document` gives a reason is neither loaded nor sent ([`images::prepare_all`]).
async fn prepare_images(
    request: &ModelRequest,
    media: &Arc<dyn MediaStore>,
    limits: images::ImageLimits,
    left_out_document: impl Fn(&str) -> Option<images::ImageError> + Send + 'static,
) -> Result<images::PreparedImages, ProviderError> {
    if images::referenced_images(&request.messages).is_empty() {
        return Ok(Default::default());
    }
    let mut messages = request.messages.clone();
    if !request.capabilities.vision {
        // A model that takes no images gets a tool's PDFs as notes (each builder says so):
        // they are not loaded, counted, or taken for sent when a request is refused.
        for message in &mut messages {
            for block in &mut message.blocks {
                if let conduit_core::content::Block::ToolResult(result) = block {
                    result.parts.retain(|part| {
                        !matches!(
                            part,
                            conduit_core::content::ResultPart::Resource { media: Some(media), .. }
                                if media.mime == conduit_core::attached::PDF_MIME
                        )
                    });
                }
            }
        }
    }
    let media = media.clone();
    tokio::task::spawn_blocking(move || {
        images::prepare_all(&messages, media.as_ref(), &limits, &left_out_document)
    })
    .await
    .map_err(|e| {
        ProviderError::new(
            ProviderErrorKind::Input,
            format!("preparing images failed: {e}"),
        )
    })
}

#[cfg(test)]
mod test_support;

#[cfg(test)]
mod attached_documents_tests;

#[cfg(test)]
mod attached_files_tests;

#[cfg(test)]
mod call_ids_tests;

#[cfg(test)]
mod thinking_tests;

#[cfg(test)]
mod wire_fields_tests;

/// The tokens a thinking budget gets for a level (Anthropic's `budget_tokens`, at least
/// 1,024; Gemini's `thinkingBudget`, within 2.5 Pro's 128-32,768 and Flash's 0-24,576).
/// High, with the 8,192 kept for the answer, stays under Claude Opus 4's 32,000-token
/// output limit.
pub fn thinking_budget(effort: conduit_core::provider::ReasoningEffort) -> u32 {
    use conduit_core::provider::ReasoningEffort;
    match effort {
        ReasoningEffort::Low => 2_048,
        ReasoningEffort::Medium => 8_192,
        ReasoningEffort::High => 16_384,
    }
}

/// What Conduit assumes a model can do when nothing says otherwise.
pub fn default_capabilities(
    protocol: Protocol,
    model: &str,
) -> conduit_core::provider::ModelCapabilities {
    let images_in_tool_results = match protocol {
        Protocol::Anthropic | Protocol::OpenAiResponses => true,
        // Chat Completions' tool messages are text; images follow in a user message.
        Protocol::OpenAiChat => false,
        // Gemini 3 takes images inside function responses; earlier models do not.
        Protocol::Gemini => gemini::is_gemini_3(model),
    };
    conduit_core::provider::ModelCapabilities {
        images_in_tool_results,
        ..Default::default()
    }
}
