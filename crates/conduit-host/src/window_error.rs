//! The one shape a failure has in the window: what happened (with its causes) and what the
//! user can do about it. Errors keep their sources in Rust and become this at the edge.

use conduit_core::provider::{ProviderError, ProviderErrorKind};
use serde::Serialize;

use crate::chat::ChatError;
use crate::providers::ProvidersError;

/// A failure as the window shows it: every command rejects with one, and a turn that ends
/// in an error carries one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct CommandError {
    /// The error and its causes, outermost first.
    pub message: String,
    /// Where the user can fix it, when the window can take them there.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub action: Option<ErrorAction>,
}

/// What the window offers beside a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum ErrorAction {
    /// The fix is in Settings (no key, a rejected key, no model).
    OpenSettings,
    /// A sign-in needs a client id the user got from the server's provider.
    EnterClientId,
}

/// Any error becomes its message with its sources; one whose text its parent already
/// quotes is not repeated.
impl<E: std::error::Error> From<E> for CommandError {
    fn from(error: E) -> Self {
        Self::message(chain(&error))
    }
}

/// `error: cause: cause`, skipping a cause the text before it already contains.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.is_empty() && !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

impl CommandError {
    /// A failure with nothing for the window to offer but its text.
    pub fn message(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            action: None,
        }
    }

    /// A sign-in that could not start: one that needs a client id offers to take it.
    pub fn from_sign_in(error: &crate::sign_in::HostSignInError) -> Self {
        let needs_client = matches!(
            error,
            crate::sign_in::HostSignInError::SignIn { source, .. }
                if matches!(**source, conduit_mcp::oauth::SignInError::NeedsClientId)
        );
        Self {
            message: error.window_text(),
            action: needs_client.then_some(ErrorAction::EnterClientId),
        }
    }

    /// A turn that could not start or run: settings problems point to Settings.
    pub fn from_chat(error: &ChatError) -> Self {
        let settings = matches!(
            error,
            ChatError::NoModel(_)
                | ChatError::Providers(ProvidersError::Settings(_))
                | ChatError::Providers(ProvidersError::Secret(_))
                | ChatError::Providers(ProvidersError::MissingKeyEnv(_))
        );
        match error {
            ChatError::Provider(provider) => Self::from_provider(provider),
            other => Self {
                message: chain(other),
                action: settings.then_some(ErrorAction::OpenSettings),
            },
        }
    }

    /// A provider's failure, with a hint for the kinds the user can act on.
    pub fn from_provider(error: &ProviderError) -> Self {
        let action =
            (error.kind == ProviderErrorKind::Authentication).then_some(ErrorAction::OpenSettings);
        let hint = match error.kind {
            ProviderErrorKind::Authentication => " Check the provider's API key in Settings.",
            ProviderErrorKind::RateLimited => " The provider is rate limiting; try again shortly.",
            ProviderErrorKind::Connection => " Check the network and the provider's address.",
            _ => "",
        };
        Self {
            message: format!("{error}{hint}"),
            action,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("cannot read the file")]
        Read(#[source] std::io::Error),
        #[error("cannot parse it: {0}")]
        Parse(#[source] std::io::Error),
    }

    #[test]
    fn the_message_carries_each_cause_once() {
        let read = Outer::Read(std::io::Error::other("disk on fire"));
        assert_eq!(
            CommandError::from(read).message,
            "cannot read the file: disk on fire"
        );
        let parse = Outer::Parse(std::io::Error::other("line 3"));
        assert_eq!(CommandError::from(parse).message, "cannot parse it: line 3");
    }

    #[test]
    fn the_window_sees_camel_case_and_the_action_by_name() {
        let error = CommandError {
            message: "no key".into(),
            action: Some(ErrorAction::OpenSettings),
        };
        assert_eq!(
            serde_json::to_value(&error).ok(),
            Some(serde_json::json!({"message": "no key", "action": "open_settings"}))
        );
        assert_eq!(
            serde_json::to_value(CommandError::message("x")).ok(),
            Some(serde_json::json!({"message": "x"}))
        );
    }
}
