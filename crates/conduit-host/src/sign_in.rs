//! Signing in to HTTP MCP servers (OAuth) for the window and the command line: tokens in
//! the secret store (keychain or private file) under the server's URL, never in the
//! `mcpServers` file, the window or a log; sign-in from the server's own challenge; and
//! the server started again with what was granted.

use std::sync::Arc;

use async_trait::async_trait;
use conduit_mcp::config::Transport;
use conduit_mcp::oauth::{self, Authorize, SignInError, SignedOut, TokenVault};
use conduit_mcp::runtime::McpRuntime;

use crate::Host;

/// Why signing in or out of a server could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum HostSignInError {
    #[error("there is no server named {0:?} in the mcpServers file")]
    NoServer(String),
    #[error("{0:?} is not reached over HTTP: only HTTP servers sign in")]
    NotHttp(String),
    #[error("{server:?} cannot start: {reason}")]
    BadEntry { server: String, reason: String },
    #[error("{0:?} is turned off: turn it on first (Conduit asks before it reaches a new server)")]
    TurnedOff(String),
    #[error("{server:?} has an Authorization header in its entry: it signs in with that")]
    StaticHeader { server: String },
    #[error(
        "{0:?} was deleted, turned off or pointed elsewhere while it signed in: the sign-in was forgotten; sign in again"
    )]
    ChangedDuringSignIn(String),
    #[error(transparent)]
    Config(#[from] conduit_mcp::config::ConfigError),
    #[error("signing in to {server:?} failed: {source}")]
    SignIn {
        server: String,
        #[source]
        source: Box<SignInError>,
        /// The server's secrets: its URL's keys can be in what the source says (a
        /// metadata address), so text for a window goes through them (`window_text`).
        secrets: conduit_mcp::redact::Redactor,
    },
}

impl HostSignInError {
    /// The error and its causes for a window: the server's secrets hidden (a metadata
    /// address the source names can hold its URL's keys).
    pub fn window_text(&self) -> String {
        let text = crate::window_error::chain(self);
        match self {
            Self::SignIn { secrets, .. } => secrets.text(&text),
            _ => text,
        }
    }
}

/// Tokens in the host's secret store, read and written off the async workers (the
/// keychain answers over D-Bus).
struct HostTokens(Arc<Host>);

#[async_trait]
impl TokenVault for HostTokens {
    async fn load(&self, key: &str) -> Result<Option<String>, String> {
        let (host, key) = (self.0.clone(), key.to_owned());
        tokio::task::spawn_blocking(move || host.secrets().get(&key).map_err(|e| e.to_string()))
            .await
            .map_err(|e| e.to_string())?
    }

    async fn save(&self, key: &str, value: &str) -> Result<(), String> {
        let (host, key, value) = (self.0.clone(), key.to_owned(), value.to_owned());
        tokio::task::spawn_blocking(move || {
            host.secrets().set(&key, &value).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())?
    }

    async fn forget(&self, key: &str) -> Result<(), String> {
        let (host, key) = (self.0.clone(), key.to_owned());
        tokio::task::spawn_blocking(move || host.secrets().delete(&key).map_err(|e| e.to_string()))
            .await
            .map_err(|e| e.to_string())?
    }

    /// A lock file per sign-in (`sign-in-locks/<hash of the key>.lock` in the config
    /// folder), shared by the app and `conduit`. A folder that cannot hold locks (a file
    /// system without them) leaves each process its own lock, as before: logged.
    async fn hold(&self, key: &str) -> Result<Option<Box<dyn Send>>, String> {
        let path = self.0.sign_in_lock_path(key);
        let held = tokio::task::spawn_blocking(move || {
            conduit_files::lock_beside_within(&path, SIGN_IN_LOCK_PATIENCE)
        })
        .await
        .map_err(|e| e.to_string())?;
        match held {
            Ok(held) => Ok(Some(Box::new(held))),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                Err(format!("the sign-in is busy in another process: {e}"))
            }
            Err(e) => {
                tracing::warn!(error = %e, "the sign-in lock cannot be taken; other processes' refreshes are not held off");
                Ok(None)
            }
        }
    }
}

/// How long a refresh, sign-in or sign-out waits for another process's before it fails:
/// a token request that hangs there must not hang this process's too.
const SIGN_IN_LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(45);

/// The token vault key of each entry of `servers` that names a URL, by name, on or off
/// (its URL with `${NAME}`s filled in, as a connection reads it); `None` for one whose URL
/// cannot be filled in now (a variable not set).
fn sign_in_keys(
    servers: &serde_json::Map<String, serde_json::Value>,
) -> std::collections::BTreeMap<&str, Option<String>> {
    let env = |name: &str| std::env::var(name).ok();
    servers
        .iter()
        .filter_map(|(name, entry)| {
            let url = entry.get("url")?.as_str()?;
            let key = conduit_mcp::config::expand(url, &env)
                .ok()
                .map(|url| oauth::vault_key(&url));
            Some((name.as_str(), key))
        })
        .collect()
}

/// A server that signs in: its URL, the entry's `oauth` settings, and its secrets (to
/// hide in what a window is shown).
struct SignInTarget {
    url: String,
    settings: oauth::SignInSettings,
    secrets: conduit_mcp::redact::Redactor,
}

impl SignInTarget {
    /// A failed sign-in step of `server`, with the secrets to hide from a window.
    fn failed(&self, server: &str) -> impl Fn(SignInError) -> HostSignInError {
        let (server, secrets) = (server.to_owned(), self.secrets.clone());
        move |source| HostSignInError::SignIn {
            server: server.clone(),
            source: Box::new(source),
            secrets: secrets.clone(),
        }
    }
}

impl Host {
    /// Where HTTP servers' sign-in tokens are kept.
    pub(crate) fn token_vault(self: &Arc<Self>) -> Arc<dyn TokenVault> {
        Arc::new(HostTokens(self.clone()))
    }

    /// [`Self::sign_in_target`] of an entry that is on. An entry that is off was never
    /// confirmed (adding or importing one asks nothing, as it starts nothing); signing in
    /// reaches its URL and authorization server with the variables it names filled in (a
    /// client secret `${…}` too), so it waits until the entry is turned on, which asks.
    fn turned_on_target(&self, server: &str) -> Result<SignInTarget, HostSignInError> {
        if self.is_turned_off(server)? {
            return Err(HostSignInError::TurnedOff(server.to_owned()));
        }
        self.sign_in_target(server)
    }

    fn sign_in_target(&self, server: &str) -> Result<SignInTarget, HostSignInError> {
        let snapshot = self.mcp_config()?;
        let entry = snapshot
            .server(server)
            .ok_or_else(|| HostSignInError::NoServer(server.to_owned()))?;
        let spec = entry
            .spec
            .as_ref()
            .map_err(|reason| HostSignInError::BadEntry {
                server: server.to_owned(),
                reason: reason.clone(),
            })?;
        match &spec.transport {
            Transport::Http { url, headers } => {
                if headers
                    .keys()
                    .any(|name| name.eq_ignore_ascii_case("authorization"))
                {
                    return Err(HostSignInError::StaticHeader {
                        server: server.to_owned(),
                    });
                }
                Ok(SignInTarget {
                    url: url.clone(),
                    settings: spec.oauth.clone(),
                    secrets: spec.secrets.clone(),
                })
            }
            Transport::Stdio { .. } => Err(HostSignInError::NotHttp(server.to_owned())),
        }
    }

    /// Signs in to `server` through `authorize` (the system browser, for a person), from
    /// the challenge it answered with when it started; `announce` is told the
    /// authorization URL so it can be shown in full. Then the server starts again.
    pub async fn sign_in_mcp(
        self: &Arc<Self>,
        servers: &McpRuntime,
        server: &str,
        authorize: &dyn Authorize,
        announce: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<(), HostSignInError> {
        let target = self.turned_on_target(server)?;
        let challenge = servers.sign_in_challenge(server, &target.url);
        // The address is shown whole, but it names the server's URL (`resource`), whose
        // keys stay hidden from the window.
        let shown = |url: &str| announce(&target.secrets.values_hidden(url));
        oauth::sign_in(
            &target.url,
            &target.settings,
            challenge.as_deref(),
            self.token_vault(),
            authorize,
            &shown,
        )
        .await
        .map_err(target.failed(server))?;
        // The browser may have taken minutes: an entry deleted, turned off or pointed
        // elsewhere meanwhile must not leave these tokens for whatever names the URL next.
        let still_named = self
            .turned_on_target(server)
            .is_ok_and(|now| now.url == target.url);
        if !still_named {
            let forgotten = oauth::sign_out_here(
                &target.url,
                self.token_vault(),
                "the entry changed while its sign-in ran",
            )
            .await;
            if let Err(error) = forgotten {
                tracing::warn!(server, %error, "a sign-in whose entry changed could not be forgotten");
            }
            return Err(HostSignInError::ChangedDuringSignIn(server.to_owned()));
        }
        tracing::info!(server, "signed in to an MCP server");
        servers.restart_server(server).await;
        Ok(())
    }

    /// The native question before signing out of `server`; `None` when it has no sign-in
    /// stored, as signing out then loses nothing. A page can ask for a sign-out, so the
    /// host asks the person first: the tokens cannot be had back without the browser.
    pub async fn sign_out_question(
        self: &Arc<Self>,
        server: &str,
    ) -> Result<Option<String>, HostSignInError> {
        let target = self.sign_in_target(server)?;
        let stored = oauth::is_signed_in(&target.url, self.token_vault().as_ref())
            .await
            .map_err(target.failed(server))?;
        let what = if self.is_turned_off(server)? {
            "Its sign-in is forgotten here. Its authorization server is not asked to revoke it: the entry is turned off (turn it on and sign out to revoke it)."
        } else {
            "Its sign-in is revoked with its authorization server and forgotten here."
        };
        Ok(stored.then(|| {
            format!(
                "Sign out of {}?\n{}\n\n{what} Its tools stop working until you sign in again in the browser.",
                crate::window_guard::quoted_cut(server, 80),
                crate::window_guard::mask_url(&target.url),
            )
        }))
    }

    /// Whether `server`'s entry is turned off (never confirmed: see
    /// [`Self::turned_on_target`]).
    fn is_turned_off(&self, server: &str) -> Result<bool, HostSignInError> {
        Ok(self
            .mcp_config()?
            .server(server)
            .is_some_and(|entry| entry.disabled))
    }

    /// Signs out of `server`: its tokens revoked where the authorization server offers
    /// it, and forgotten; the server starts again without them.
    pub async fn sign_out_mcp(
        self: &Arc<Self>,
        servers: &McpRuntime,
        server: &str,
    ) -> Result<SignedOut, HostSignInError> {
        let target = self.sign_in_target(server)?;
        // An entry that is off was never confirmed: revoking would send what it names (a
        // client secret taken from Conduit's environment) to its authorization server, so
        // its sign-in is only forgotten here.
        let outcome = if self.is_turned_off(server)? {
            oauth::sign_out_here(
                &target.url,
                self.token_vault(),
                "the entry is turned off, so its authorization server was not asked to revoke the tokens",
            )
            .await
        } else {
            oauth::sign_out(&target.url, &target.settings, self.token_vault()).await
        }
        .map_err(target.failed(server))?;
        let outcome = match outcome {
            SignedOut::RevocationFailed(reason) => {
                let reason = target.secrets.text(&reason);
                tracing::warn!(server, %reason, "revoking an MCP server's tokens failed; forgotten here");
                SignedOut::RevocationFailed(reason)
            }
            other => other,
        };
        servers.restart_server(server).await;
        Ok(outcome)
    }

    /// Forgets the sign-ins an edit of the file left behind: the tokens for a URL an entry
    /// of `before` reached and no entry of `after` does (the entry deleted, or pointed
    /// elsewhere), so that no later entry that happens to name that URL inherits them
    /// unasked. They are forgotten here, not revoked (Sign out revokes, with the server's
    /// answer); a failure is logged, and the edit stands.
    pub(crate) fn forget_sign_ins_left_behind(
        &self,
        before: &serde_json::Map<String, serde_json::Value>,
        after: &serde_json::Map<String, serde_json::Value>,
    ) {
        let was = sign_in_keys(before);
        // An entry whose URL cannot be filled in now keeps the sign-in it had.
        let now = sign_in_keys(after);
        let kept: std::collections::BTreeSet<&String> = now
            .iter()
            .filter_map(|(name, key)| match key {
                Some(key) => Some(key),
                None => was.get(name).and_then(Option::as_ref),
            })
            .collect();
        for key in was.values().flatten().filter(|key| !kept.contains(key)) {
            // Not while a process refreshes it (its save would bring it back); one that
            // takes long is not waited for.
            let held = conduit_files::lock_beside_within(
                &self.sign_in_lock_path(key),
                std::time::Duration::from_secs(5),
            )
            .inspect_err(|error| tracing::warn!(%error, "forgetting a sign-in without its lock"));
            if let Err(error) = self.secrets().delete(key) {
                tracing::warn!(%error, "a removed server's sign-in could not be forgotten");
            }
            drop(held);
        }
    }

    /// Where the lock of the sign-in stored under `key` is (see [`TokenVault::hold`]).
    fn sign_in_lock_path(&self, key: &str) -> std::path::PathBuf {
        let name = &conduit_files::fingerprint_bytes(key.as_bytes())[..32];
        self.paths.config_dir.join("sign-in-locks").join(name)
    }

    /// Whether tokens for `server` are stored (not whether the server still takes them).
    pub async fn mcp_signed_in(self: &Arc<Self>, server: &str) -> Result<bool, HostSignInError> {
        let target = self.sign_in_target(server)?;
        oauth::is_signed_in(&target.url, self.token_vault().as_ref())
            .await
            .map_err(target.failed(server))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sign_in_error_for_a_window_hides_the_servers_url_keys() {
        let snapshot = conduit_mcp::config::snapshot_of(
            std::path::Path::new("mcp_servers.json"),
            br#"{"mcpServers": {"zap": {"url": "https://mcp.example/api/sk-ak-7f3a9c2e41b8d6f0/mcp?key=q-s3cret-value"}}}"#,
            &|_| None,
        )
        .unwrap();
        let spec = snapshot.server("zap").unwrap().spec.clone().unwrap();
        let error = HostSignInError::SignIn {
            server: "zap".into(),
            source: Box::new(SignInError::Refused(
                "no metadata at https://mcp.example/.well-known/oauth-protected-resource/api/sk-ak-7f3a9c2e41b8d6f0/mcp?key=q-s3cret-value"
                    .into(),
            )),
            secrets: spec.secrets,
        };
        let text = error.window_text();
        assert!(
            !text.contains("sk-ak-7f3a") && !text.contains("q-s3cret"),
            "{text}"
        );
        assert!(text.contains("oauth-protected-resource/api/"), "{text}");
    }

    #[tokio::test]
    async fn signing_out_asks_only_when_a_sign_in_is_stored_and_names_the_server() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("mcp_servers.json"),
            br#"{"mcpServers": {"tracker": {"url": "https://mcp.example/api/sk-ak-7f3a9c2e41b8d6f0/mcp"}, "local": {"command": "true"},
                "copy": {"url": "https://mcp.example/api/sk-ak-7f3a9c2e41b8d6f0/mcp", "disabled": true, "oauth": {"clientId": "c", "clientSecret": "${HOME}"}}}}"#,
        )
        .unwrap();
        let host = Arc::new(Host::new(crate::Paths::under_home(
            dir.path().to_owned(),
            None,
        )));
        assert_eq!(host.sign_out_question("tracker").await.unwrap(), None);
        host.secrets()
            .set(
                &oauth::vault_key("https://mcp.example/api/sk-ak-7f3a9c2e41b8d6f0/mcp"),
                r#"{"client_id": "c", "token_response": {"access_token": "a", "token_type": "bearer"}}"#,
            )
            .unwrap();
        let question = host.sign_out_question("tracker").await.unwrap().unwrap();
        assert!(
            question.starts_with("Sign out of \"tracker\"?"),
            "{question}"
        );
        assert!(question.contains("https://mcp.example/api/"), "{question}");
        assert!(!question.contains("sk-ak-7f3a"), "{question}");
        assert!(question.contains("sign in again"), "{question}");
        for (server, says) in [("nobody", "no server"), ("local", "only HTTP servers")] {
            let error = host.sign_out_question(server).await.unwrap_err();
            assert!(error.to_string().contains(says), "{error}");
        }
        // An entry that is off (added unasked, naming the same URL and a client secret
        // from Conduit's environment, here `HOME`, which every test has) signs out here
        // only: a revocation would send the secret. (Its revocation endpoint would be this
        // unreachable example.)
        let question = host.sign_out_question("copy").await.unwrap().unwrap();
        assert!(question.contains("is not asked to revoke it"), "{question}");
        let runtime = McpRuntime::start(conduit_mcp::runtime::RuntimeOptions::new(
            dir.path().join("none.json"),
            std::time::Duration::from_secs(5),
        ))
        .await
        .unwrap();
        let outcome = host.sign_out_mcp(&runtime, "copy").await.unwrap();
        assert!(
            matches!(&outcome, SignedOut::RevocationFailed(why) if why.contains("turned off")),
            "{outcome:?}"
        );
        assert!(
            !oauth::is_signed_in(
                "https://mcp.example/api/sk-ak-7f3a9c2e41b8d6f0/mcp",
                host.token_vault().as_ref()
            )
            .await
            .unwrap(),
            "the sign-in is forgotten"
        );
    }
}
