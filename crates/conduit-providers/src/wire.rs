//! What differs between protocols (paths, auth headers, conversions, decoder, image
//! limits) as one trait, and the one provider that drives any of them over HTTP.

use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use conduit_core::media::MediaStore;
use conduit_core::provider::{
    EventStream, ModelInfo, ModelRequest, Provider, ProviderError, ProviderErrorKind, ProviderEvent,
};
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
    /// The path (and query) of the streaming request, after the base URL's path.
    fn stream_path(model: &str) -> String;
    /// The path (and query) of the model listing, after the base URL's path.
    fn models_path() -> String;
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

/// The PDFs each server's model answered without, once a request that carried them was
/// refused, this session (`base URL\nmodel\nhash`): a compatible server that takes no
/// `file` parts, a PDF past a model's page limit. Later requests leave those PDFs out at
/// once; another PDF is tried again, so one PDF the model could not read does not stop
/// it reading the next.
static REFUSED_DOCUMENTS: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);

/// The PDFs each server's model answered a request with, this session (same keys): when
/// a later request is refused, the PDFs new to it are the ones suspected, and those the
/// model read before stay.
static READ_DOCUMENTS: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);

/// The most of a refusal's message the model reads in place of a PDF.
const REFUSAL_SHOWN: usize = 300;

fn refusal_key(model: &str, hash: &str) -> String {
    format!("{model}\n{hash}")
}

/// Why the PDF `hash` goes to `model` as a note: it was refused earlier this session.
fn refused_earlier(model: &str, hash: &str) -> Option<crate::images::ImageError> {
    REFUSED_DOCUMENTS
        .lock()
        .contains(&refusal_key(model, hash))
        .then_some(crate::images::ImageError::RefusedEarlier)
}

/// The hashes of the PDFs `images` holds ready to send.
pub(crate) fn sendable_documents(images: &PreparedImages) -> HashSet<String> {
    images
        .iter()
        .filter(|(_, prepared)| prepared.is_ok())
        .filter_map(|(key, _)| key.strip_prefix("pdf:").map(str::to_owned))
        .collect()
}

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

/// `path` (with its own query, if any) after the path of `base_url`, and the base's query
/// kept after it: a gateway's `https://gw.example/v1?key=K` or Azure's
/// `…/deployments/x?api-version=…` put the path inside the query when appended to
/// (`…/v1?key=K/chat/completions`: the request went to `/v1`, the key read
/// `K/chat/completions`). A fragment is dropped: it never goes to a server.
pub(crate) fn joined(base_url: &str, path: &str) -> String {
    let base = base_url.split('#').next().unwrap_or_default();
    let (base_path, base_query) = match base.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (base, None),
    };
    let (path, path_query) = match path.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (path, None),
    };
    let mut url = format!("{}{path}", base_path.trim_end_matches('/'));
    let queries: Vec<&str> = [base_query, path_query]
        .into_iter()
        .flatten()
        .filter(|query| !query.is_empty())
        .collect();
    if !queries.is_empty() {
        url.push('?');
        url.push_str(&queries.join("&"));
    }
    url
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
            base_url: base_url.to_owned(),
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

    /// A request that carries PDFs and is refused as it is before any answer (a 4xx: a
    /// 400, a 413) is sent again with a note in place of each PDF the model has not read
    /// before (of each, when it read them all): a compatible server may take no PDF, and
    /// a model refuses one past its page limit. If the request then goes through, this
    /// model gets those PDFs as notes for the rest of the session ([`stream_with_pdfs`]).
    async fn stream(&self, request: ModelRequest) -> Result<EventStream, ProviderError> {
        let provider = Self {
            http: self.http.clone(),
            base_url: self.base_url.clone(),
            api_key: self.api_key.clone(),
            media: self.media.clone(),
            wire: PhantomData,
        };
        let send: Sender =
            Arc::new(move |request, images| provider.stream_prepared(request, images));
        stream_with_pdfs(request, &self.base_url, &self.media, W::IMAGE_LIMITS, send).await
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        let headers = W::auth_headers(self.api_key.as_deref());
        let body = self
            .http
            .get_json(&joined(&self.base_url, &W::models_path()), &headers)
            .await?;
        Ok(W::parse_models(&body))
    }
}

/// Sends a request with its images and PDFs prepared (a protocol's
/// `WireProvider::stream_prepared`).
type Sender =
    Arc<dyn Fn(ModelRequest, PreparedImages) -> Result<EventStream, ProviderError> + Send + Sync>;

/// [`WireProvider::stream`] for every protocol, once: the PDFs' fallback is not
/// written four times into the binaries.
async fn stream_with_pdfs(
    request: ModelRequest,
    base_url: &str,
    media: &Arc<dyn MediaStore>,
    limits: ImageLimits,
    send: Sender,
) -> Result<EventStream, ProviderError> {
    let model = format!("{}\n{}", base_url, request.model);
    let asked = model.clone();
    let images = crate::prepare_images(&request, media, limits, move |hash| {
        refused_earlier(&asked, hash)
    })
    .await?;
    let documents = sendable_documents(&images);
    // Said of this turn's PDFs only (the newest message's, its tools' results): a PDF
    // of an earlier message was said when it was new.
    let recent = recent_documents(&request.messages);
    let earlier: HashSet<String> = refused_documents(&images)
        .intersection(&recent)
        .cloned()
        .collect();
    let too_large: HashSet<String> = recent
        .iter()
        .filter(|hash| {
            matches!(
                images.get(&crate::images::document_key(hash)),
                Some(Err(crate::images::ImageError::TooLarge { .. }
                    | crate::images::ImageError::LeftOut { .. }))
            )
        })
        .cloned()
        .collect();
    let said_earlier = [
        (!earlier.is_empty()).then(|| {
            format!(
                "{} went to the model as a note: its server refused it earlier in this session.",
                document_names(&request.messages, &earlier)
            )
        }),
        (!too_large.is_empty()).then(|| {
            format!(
                "{} went to the model as a note: it does not fit in what this provider takes in one request.",
                document_names(&request.messages, &too_large)
            )
        }),
    ]
    .into_iter()
    .flatten()
    .reduce(|first, second| format!("{first} {second}"));
    if documents.is_empty() {
        let stream = send(request, images)?;
        return Ok(with_left_out(stream, said_earlier));
    }
    // Why the PDFs the first request leaves out are left out: the same, if it is sent
    // again.
    let first_reasons: HashMap<String, String> = images
        .iter()
        .filter_map(|(key, prepared)| {
            let hash = key.strip_prefix("pdf:")?;
            let error = prepared.as_ref().err()?;
            Some((hash.to_owned(), crate::images::document_reason(error)))
        })
        .collect();
    let sent_keys: Vec<String> = documents
        .iter()
        .map(|hash| refusal_key(&model, hash))
        .collect();
    let first = noted_when_answered(
        send(request.clone(), images)?,
        &READ_DOCUMENTS,
        sent_keys,
        None,
    );
    let first = with_left_out(first, said_earlier);
    let media = media.clone();
    Ok(crate::instead_if_refused(
        first,
        |error| {
            matches!(
                error.kind,
                ProviderErrorKind::InvalidRequest | ProviderErrorKind::RequestTooLarge
            )
        },
        move |error| async move {
            tracing::info!(%error, "a request with PDFs was refused: sent again with them left out");
            let message =
                conduit_core::content::text_start(&error.message, REFUSAL_SHOWN).to_owned();
            // The PDFs new to this model are suspected; when it read them all before,
            // all of them.
            let suspects: HashSet<String> = {
                let read = READ_DOCUMENTS.lock();
                let new: HashSet<String> = documents
                    .iter()
                    .filter(|hash| !read.contains(&refusal_key(&model, hash)))
                    .cloned()
                    .collect();
                if new.is_empty() {
                    documents.clone()
                } else {
                    new
                }
            };
            let left_out = suspects.clone();
            // A PDF the first request did not carry (past the request's budget) is not
            // sent now either: it might be refused in turn, with nothing left to try.
            let carried = documents.clone();
            let images = crate::prepare_images(&request, &media, limits, move |hash| {
                if left_out.contains(hash) {
                    Some(crate::images::ImageError::Refused {
                        message: message.clone(),
                    })
                } else if !carried.contains(hash) {
                    Some(match first_reasons.get(hash) {
                        Some(reason) => crate::images::ImageError::AsBefore(reason.clone()),
                        None => crate::images::ImageError::NotRetried,
                    })
                } else {
                    None
                }
            })
            .await?;
            let said = format!(
                "The model's server refused the request with {} ({}): it was sent again without {}, and the model was told.",
                document_names(&request.messages, &suspects),
                conduit_core::content::text_start(&error.message, REFUSAL_SHOWN),
                if suspects.len() == 1 { "it" } else { "them" }
            );
            let stream = send(request, images)?;
            let keys = suspects
                .iter()
                .map(|hash| refusal_key(&model, hash))
                .collect();
            Ok(noted_when_answered(
                stream,
                &REFUSED_DOCUMENTS,
                keys,
                Some(said),
            ))
        },
    ))
}

/// `stream`, noting `keys` in `set` once it answers, and saying `said` then (a refusal
/// of its own notes nothing).
fn noted_when_answered(
    mut stream: EventStream,
    set: &'static LazyLock<Mutex<HashSet<String>>>,
    keys: Vec<String>,
    said: Option<String>,
) -> EventStream {
    use futures::StreamExt;
    Box::pin(async_stream::stream! {
        let mut noting = Some((keys, said));
        while let Some(item) = stream.next().await {
            let answered = matches!(
                &item,
                // Token counts (Anthropic's `message_start`) come before a refusal too.
                Ok(event) if !matches!(
                    event,
                    ProviderEvent::Retrying { .. } | ProviderEvent::LeftOut(_) | ProviderEvent::Usage(_)
                )
            );
            if answered && let Some((keys, said)) = noting.take() {
                set.lock().extend(keys);
                if let Some(said) = said {
                    yield Ok(ProviderEvent::LeftOut(said));
                }
            }
            yield item;
        }
    })
}

/// `stream` after `said`, when there is something to say.
fn with_left_out(stream: EventStream, said: Option<String>) -> EventStream {
    use futures::StreamExt;
    match said {
        Some(said) => futures::stream::once(async move { Ok(ProviderEvent::LeftOut(said)) })
            .chain(stream)
            .boxed(),
        None => stream,
    }
}

/// The PDFs of the newest user message and of what follows it (the turn's tool results).
fn recent_documents(messages: &[conduit_core::content::Message]) -> HashSet<String> {
    use conduit_core::content::{Block, Role};
    let from = messages
        .iter()
        .rposition(|message| message.role == Role::User)
        .unwrap_or(0);
    let mut recent = HashSet::new();
    for message in &messages[from..] {
        for block in &message.blocks {
            match block {
                Block::Document { media, .. } => {
                    recent.insert(media.hash.clone());
                }
                Block::ToolResult(result) => {
                    recent.extend(result.documents().map(|(_, media)| media.hash.clone()));
                }
                _ => {}
            }
        }
    }
    recent
}

/// The hashes of the PDFs `images` leaves out because their server refused them before.
fn refused_documents(images: &PreparedImages) -> HashSet<String> {
    images
        .iter()
        .filter(|(_, prepared)| matches!(prepared, Err(crate::images::ImageError::RefusedEarlier)))
        .filter_map(|(key, _)| key.strip_prefix("pdf:").map(str::to_owned))
        .collect()
}

/// The names the PDFs `hashes` go under in `messages`, sorted, each once: `a.pdf`,
/// `a.pdf and b.pdf`, `a.pdf, b.pdf and c.pdf`.
fn document_names(messages: &[conduit_core::content::Message], hashes: &HashSet<String>) -> String {
    use conduit_core::content::Block;
    let mut names = std::collections::BTreeSet::new();
    for message in messages {
        for block in &message.blocks {
            match block {
                Block::Document { name, media } if hashes.contains(&media.hash) => {
                    names.insert(conduit_core::text::visible(name));
                }
                // A server's name for its PDF, as `documents` keeps it.
                Block::ToolResult(result) => {
                    for (name, media) in result.documents() {
                        if hashes.contains(&media.hash) {
                            names.insert(name);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let names: Vec<String> = names.into_iter().collect();
    match names.split_last() {
        None => "a PDF".to_owned(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

impl<W: Wire> WireProvider<W> {
    /// Sends `request` with its images and PDFs prepared; a request refused for its
    /// optional part ([`Wire::drop_optional`]) is sent again without it.
    fn stream_prepared(
        &self,
        request: ModelRequest,
        images: PreparedImages,
    ) -> Result<EventStream, ProviderError> {
        let base_url = self.base_url.clone();
        let build = move |request: &ModelRequest, images: &PreparedImages, optional: bool| {
            let mut body = W::build_request(request, images);
            W::for_service(&base_url, &mut body);
            if !optional {
                W::drop_optional(&mut body);
            }
            body
        };
        let url = joined(&self.base_url, &W::stream_path(&request.model));
        let headers = W::auth_headers(self.api_key.as_deref());
        let model = format!("{}\n{}", self.base_url, request.model);
        let refused_before = REFUSED_OPTIONAL.lock().contains(&model);
        let body = build(&request, &images, !refused_before);
        if refused_before || !W::has_optional(&body) {
            return self.http.stream(url, &headers, body, W::Decoder::default);
        }
        // Refused before any answer (a 400): the same request goes again without it. The
        // body is built again then, not kept twice (it holds the images).
        let first = self
            .http
            .stream(url.clone(), &headers, body, W::Decoder::default)?;
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
                    W::Decoder::default,
                )
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[test]
    fn a_path_goes_after_the_base_path_and_the_bases_query_stays_a_query() {
        assert_eq!(
            joined("https://api.example/v1", "/chat/completions"),
            "https://api.example/v1/chat/completions"
        );
        assert_eq!(
            joined("https://api.example/v1/", "/models"),
            "https://api.example/v1/models"
        );
        assert_eq!(
            joined("https://gw.example/v1?key=K", "/chat/completions"),
            "https://gw.example/v1/chat/completions?key=K"
        );
        assert_eq!(
            joined(
                "https://x.openai.azure.com/openai/deployments/d/?api-version=2024-10-21",
                "/chat/completions"
            ),
            "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(
            joined(
                "https://gw.example?key=K#frag",
                "/v1beta/models/m:streamGenerateContent?alt=sse"
            ),
            "https://gw.example/v1beta/models/m:streamGenerateContent?key=K&alt=sse"
        );
        assert_eq!(
            joined("https://api.example?", "/v1/models?limit=1000"),
            "https://api.example/v1/models?limit=1000"
        );
    }

    /// Each protocol's requests reach the path they name, with the key a gateway's base
    /// URL carries in its query still a query parameter.
    #[tokio::test]
    async fn every_protocol_keeps_a_base_urls_query_after_its_path() {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
        let record = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let record = record.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let line = String::from_utf8_lossy(&head)
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    record.lock().push(line);
                    let _ = socket
                        .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await;
                });
            }
        });
        let media: Arc<dyn conduit_core::media::MediaStore> =
            Arc::new(conduit_core::testing::MemoryMedia::default());
        let cases = [
            (
                crate::Protocol::OpenAiChat,
                "/v1/chat/completions?key=K",
                "/v1/models?key=K",
            ),
            (
                crate::Protocol::OpenAiResponses,
                "/v1/responses?key=K",
                "/v1/models?key=K",
            ),
            (
                crate::Protocol::Anthropic,
                "/v1/v1/messages?key=K",
                "/v1/v1/models?key=K&limit=1000",
            ),
            (
                crate::Protocol::Gemini,
                "/v1/v1beta/models/m:streamGenerateContent?key=K&alt=sse",
                "/v1/v1beta/models?key=K&pageSize=1000",
            ),
        ];
        for (protocol, stream, models) in cases {
            seen.lock().clear();
            let config = crate::ProviderConfig {
                protocol,
                base_url: format!("http://127.0.0.1:{port}/v1?key=K"),
                api_key: None,
                http: crate::http::HttpSettings {
                    retry: crate::http::RetryPolicy {
                        max_retries: 0,
                        ..crate::http::RetryPolicy::default()
                    },
                    ..crate::http::HttpSettings::default()
                },
            };
            let provider = crate::build(config, media.clone()).unwrap();
            assert!(provider.list_models().await.is_err());
            let mut request =
                crate::test_support::request(vec![conduit_core::content::Message::user_text("hi")]);
            request.model = "m".into();
            if let Ok(mut events) = provider.stream(request).await {
                use futures::StreamExt as _;
                while let Some(event) = events.next().await {
                    if event.is_err() {
                        break;
                    }
                }
            }
            let seen = seen.lock().clone();
            assert_eq!(
                seen,
                [
                    format!("GET {models} HTTP/1.1"),
                    format!("POST {stream} HTTP/1.1")
                ],
                "{protocol:?}"
            );
        }
    }
}
