//! The interface every LLM protocol implements: a request in the conversation model, a
//! stream of typed events out, and the models a provider offers.

use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::content::Message;
use crate::tool::ToolSpec;

/// What a model can do; conversions and the agent loop adapt to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCapabilities {
    pub vision: bool,
    pub tool_calling: bool,
    /// Images may sit inside a tool result (otherwise they follow in a user message).
    pub images_in_tool_results: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u32>,
}

impl Default for ModelCapabilities {
    fn default() -> Self {
        Self {
            vision: true,
            tool_calling: true,
            images_in_tool_results: true,
            context_tokens: None,
            output_tokens: None,
        }
    }
}

/// A model a provider offers, for the model picker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

/// How much the model is asked to think before it answers ("Thinking" in the window,
/// `--thinking` on the command line). Each protocol says it its own way (an effort, a
/// budget of tokens); not asking leaves each model at its own default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    /// The level's name, as `--thinking` and the window's storage write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

impl std::str::FromStr for ReasoningEffort {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "low" => Ok(Self::Low),
            "medium" => Ok(Self::Medium),
            "high" => Ok(Self::High),
            other => Err(format!(
                "{other:?} is not a thinking level: use low, medium or high"
            )),
        }
    }
}

/// One request to a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    pub model: String,
    pub system: Option<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_output_tokens: Option<u32>,
    pub capabilities: ModelCapabilities,
    /// Thinking asked for; `None` leaves the model at its default.
    pub reasoning: Option<ReasoningEffort>,
}

/// Token counts of one model response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Adds `other` where a protocol reports counts in pieces.
    pub fn merge_max(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.max(other.input_tokens);
        self.output_tokens = self.output_tokens.max(other.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.max(other.cache_read_tokens);
        self.reasoning_tokens = self.reasoning_tokens.max(other.reasoning_tokens);
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    Refusal,
    Other(String),
}

/// A call the model wrote that cannot be run: arguments that are not a JSON object, or
/// (text tool-calling) a call whose form is broken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("the call could not be read ({error}): {raw}")]
pub struct InvalidArguments {
    pub raw: String,
    pub error: String,
}

/// What a model's stream says, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    TextDelta(String),
    ReasoningDelta(String),
    /// A reasoning block ended, with what the provider needs to accept it back.
    ReasoningDone {
        signature: Option<String>,
        encrypted: Option<String>,
        id: Option<String>,
    },
    ToolCallStarted {
        id: String,
        name: String,
    },
    ToolCallDelta {
        id: String,
        arguments: String,
    },
    ToolCallDone {
        id: String,
        name: String,
        arguments: Result<Value, InvalidArguments>,
        signature: Option<String>,
    },
    Usage(Usage),
    /// Something of the request did not reach the model as asked, which the user should
    /// know (a PDF the model's server refused, sent again as a note); no content.
    LeftOut(String),
    /// The request failed in a way worth trying again; the client waits `delay` first.
    Retrying {
        attempt: u32,
        delay: Duration,
        error: ProviderError,
    },
    Stop(StopReason),
}

/// What kind of failure a provider reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum ProviderErrorKind {
    /// 400, 404, 413 and other requests the provider will not take as they are.
    InvalidRequest,
    /// 401, 403: the key is missing, wrong or lacks access.
    Authentication,
    NotFound,
    RequestTooLarge,
    /// 429.
    RateLimited,
    /// 500, 503, 529 and other failures on the provider's side.
    Server,
    Overloaded,
    /// The connection failed or was reset.
    Connection,
    /// The stream stopped sending for longer than the read timeout.
    Stalled,
    /// An error event in the middle of a stream.
    Stream,
    /// The provider sent something that is not its documented format.
    Protocol,
    /// A local problem preparing the request (an image that will not decode...).
    Input,
    /// The service refused a request with tools: the model has no native tool calling
    /// (Ollama's HTTP 400 "... does not support tools"). Text tool-calling answers it.
    ToolsUnsupported,
    /// The request is longer than the model's context window (Anthropic's "prompt is too
    /// long", OpenAI's `context_length_exceeded`, Gemini's "input token count exceeds"):
    /// the loop asks again with the conversation shortened (`context_fit`).
    ContextTooLong,
}

/// A provider's failure, with the provider's own message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error, ts_rs::TS)]
#[error("{}", self.describe())]
pub struct ProviderError {
    pub kind: ProviderErrorKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    pub message: String,
    /// How long the provider asked to wait before trying again.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "duration_millis"
    )]
    #[ts(type = "number")]
    pub retry_after: Option<Duration>,
}

impl ProviderError {
    pub fn new(kind: ProviderErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            status: None,
            message: message.into(),
            retry_after: None,
        }
    }

    /// Whether a shorter request may work: the model's context, or the provider's limit
    /// on a request's size (images), was exceeded.
    pub fn wants_shorter_request(&self) -> bool {
        matches!(
            self.kind,
            ProviderErrorKind::ContextTooLong | ProviderErrorKind::RequestTooLarge
        )
    }

    /// Whether trying the same request again may work.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind,
            ProviderErrorKind::RateLimited
                | ProviderErrorKind::Server
                | ProviderErrorKind::Overloaded
                | ProviderErrorKind::Connection
        )
    }

    fn describe(&self) -> String {
        let what = match self.kind {
            ProviderErrorKind::InvalidRequest => "the provider rejected the request",
            ProviderErrorKind::Authentication => {
                "the provider refused the API key (check the key in the provider's settings)"
            }
            ProviderErrorKind::NotFound => "the provider does not know this model or address",
            ProviderErrorKind::RequestTooLarge => "the request is too large for the provider",
            ProviderErrorKind::RateLimited => "the provider's rate limit was hit",
            ProviderErrorKind::Server => "the provider had an internal error",
            ProviderErrorKind::Overloaded => "the provider is overloaded",
            ProviderErrorKind::Connection => "cannot reach the provider",
            ProviderErrorKind::Stalled => "the provider stopped sending",
            ProviderErrorKind::Stream => "the provider reported an error mid-answer",
            ProviderErrorKind::Protocol => "the provider sent something unexpected",
            ProviderErrorKind::Input => "cannot prepare the request",
            ProviderErrorKind::ContextTooLong => {
                "the conversation is longer than the model's context (start a new chat, or pick a model with a larger context)"
            }
            ProviderErrorKind::ToolsUnsupported => {
                "the model has no native tool calling (set its \"toolMode\" to \"text\" or \"auto\" in the provider's settings)"
            }
        };
        let said = match self.status {
            Some(status) => format!("{what} (HTTP {status}): {}", self.message),
            None => format!("{what}: {}", self.message),
        };
        // A wait longer than a retry waits ends the turn at once: say when to come back.
        match self.retry_after {
            Some(after) if after.as_secs() >= 120 => {
                format!(
                    "{said} (it asks to wait {} min)",
                    after.as_secs().div_ceil(60)
                )
            }
            Some(after) if after.as_secs() > 0 => {
                format!("{said} (it asks to wait {} s)", after.as_secs())
            }
            _ => said,
        }
    }
}

mod duration_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

/// A stream of a model's events; it ends after `Stop` or an error.
pub type EventStream = BoxStream<'static, Result<ProviderEvent, ProviderError>>;

/// An LLM service speaking one protocol.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The protocol's name (`anthropic`, `openai-chat`, ...), stamped on reasoning blocks.
    fn protocol(&self) -> &'static str;

    /// Streams one model response. Retries happen inside, visible as `Retrying` events.
    async fn stream(&self, request: ModelRequest) -> Result<EventStream, ProviderError>;

    /// The models this provider offers.
    async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_explain_themselves_with_the_providers_message() {
        let mut err = ProviderError::new(ProviderErrorKind::Authentication, "invalid x-api-key");
        err.status = Some(401);
        let text = err.to_string();
        assert!(text.contains("HTTP 401"), "{text}");
        assert!(text.contains("invalid x-api-key"), "{text}");
        assert!(!err.is_retryable());
        assert!(ProviderError::new(ProviderErrorKind::RateLimited, "slow down").is_retryable());
        let mut later = ProviderError::new(ProviderErrorKind::RateLimited, "daily limit");
        later.status = Some(429);
        later.retry_after = Some(Duration::from_secs(3600));
        assert_eq!(
            later.to_string(),
            "the provider's rate limit was hit (HTTP 429): daily limit (it asks to wait 60 min)"
        );
        later.retry_after = Some(Duration::from_secs(90));
        assert!(later.to_string().ends_with("(it asks to wait 90 s)"));
    }

    #[test]
    fn errors_serialise_retry_after_in_milliseconds() {
        let mut err = ProviderError::new(ProviderErrorKind::RateLimited, "wait");
        err.retry_after = Some(Duration::from_millis(1500));
        let json = serde_json::to_value(&err).unwrap();
        assert_eq!(json["retry_after"], 1500);
        let back: ProviderError = serde_json::from_value(json).unwrap();
        assert_eq!(back, err);
    }
}
