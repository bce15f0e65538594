//! OAuth 2.1 sign-in for HTTP servers, on rmcp's authorization code (discovery from the
//! server's 401, PKCE S256, resource indicators, scope selection and step-up, issuer
//! checks, registration in the spec's order, refresh): Conduit adds where the tokens live
//! (a [`TokenVault`] the host backs with the keychain), how the user authorizes (an
//! [`Authorize`]: the system browser and a one-shot loopback redirect, or a headless
//! stand-in), sign-out with revocation, and its own errors.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rmcp::transport::AuthError;
use rmcp::transport::auth::{
    AuthorizationCallback, AuthorizationManager, AuthorizationMetadata, AuthorizationRequest,
    AuthorizationSession, CredentialRefreshGuard, CredentialStore, StoredCredentials,
    WWWAuthenticateParams,
};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

mod peer;

/// The name Conduit registers under.
pub const CLIENT_NAME: &str = "Conduit";
/// How long a sign-in waits for the browser to come back.
pub const SIGN_IN_PATIENCE: Duration = Duration::from_secs(5 * 60);
/// The path of the loopback redirect.
const CALLBACK_PATH: &str = "/callback";
/// Where the path of the loopback start page begins, before its random part (the browser
/// is sent there first).
const START_PATH_PREFIX: &str = "/sign-in/";
/// Step-ups (`insufficient_scope`) one call may cause before it gives up.
pub const MAX_STEP_UPS: u32 = 2;

/// How a file entry's `oauth` object sets up sign-in; all optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignInSettings {
    /// A client registered with the authorization server beforehand (`clientId`).
    pub client_id: Option<String>,
    /// Its secret (`clientSecret`), for a confidential client.
    pub client_secret: Option<String>,
    /// Scopes to ask for (`scopes`); by default the server's challenge or metadata says.
    pub scopes: Vec<String>,
    /// An https URL of Conduit's client ID metadata document (`clientMetadataUrl`).
    pub client_metadata_url: Option<String>,
    /// The authorization server the client was registered with (`issuer`): a sign-in
    /// goes only there, so the server cannot send the client's id and secret elsewhere.
    pub issuer: Option<String>,
}

impl SignInSettings {
    /// Reads an entry's `oauth` value, naming what is wrong.
    pub fn from_entry(value: Option<&Value>) -> Result<Self, String> {
        let object = match value {
            None | Some(Value::Null) => return Ok(Self::default()),
            Some(Value::Object(object)) => object,
            Some(_) => return Err("oauth must be an object".into()),
        };
        let text = |key: &str| -> Result<Option<String>, String> {
            match object.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
                Some(_) => Err(format!("oauth.{key} must be a non-empty string")),
            }
        };
        for key in object.keys() {
            if ![
                "clientId",
                "clientSecret",
                "scopes",
                "clientMetadataUrl",
                "issuer",
            ]
            .contains(&key.as_str())
            {
                return Err(format!(
                    "oauth.{key} is not a setting Conduit knows (clientId, clientSecret, scopes, clientMetadataUrl, issuer)"
                ));
            }
        }
        let scopes = match object.get("scopes") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|s| {
                    s.as_str()
                        .filter(|s| !s.is_empty() && !s.contains(' '))
                        .map(str::to_owned)
                        .ok_or("oauth.scopes must be scope names without spaces")
                })
                .collect::<Result<_, _>>()?,
            Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
            Some(_) => return Err("oauth.scopes must be an array of strings".into()),
        };
        let client_metadata_url = text("clientMetadataUrl")?;
        if let Some(url) = &client_metadata_url
            && !url.starts_with("https://")
        {
            return Err("oauth.clientMetadataUrl must be an https:// URL".into());
        }
        let issuer = text("issuer")?;
        if let Some(issuer) = &issuer
            && reqwest::Url::parse(issuer).is_err()
        {
            return Err("oauth.issuer must be the authorization server's issuer URL".into());
        }
        let settings = Self {
            client_id: text("clientId")?,
            client_secret: text("clientSecret")?,
            scopes,
            client_metadata_url,
            issuer,
        };
        if settings.client_secret.is_some() && settings.client_id.is_none() {
            return Err("oauth.clientSecret needs oauth.clientId".into());
        }
        Ok(settings)
    }
}

/// Why a sign-in or sign-out did not work.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("the sign-in was not finished within {0:?}")]
    TimedOut(Duration),
    #[error("the authorization server refused: {0}")]
    Refused(String),
    #[error(
        "the authorization server lets Conduit neither register itself nor use a metadata document: put a client id it gave you in the entry's \"oauth\": {{\"clientId\": ...}}"
    )]
    NeedsClientId,
    #[error("the browser could not be opened: {0}")]
    Browser(String),
    #[error("the sign-in redirect could not be received: {0}")]
    Redirect(#[source] std::io::Error),
    #[error("the token store failed: {0}")]
    Vault(String),
    #[error("signing in failed: {0}")]
    Auth(#[source] AuthError),
    #[error("{0}")]
    Other(String),
}

impl From<AuthError> for SignInError {
    fn from(err: AuthError) -> Self {
        match err {
            // rmcp's words when the server offers neither registration nor a metadata
            // document Conduit could use.
            AuthError::RegistrationFailed(reason)
                if reason.contains("registration not supported") =>
            {
                tracing::info!(%reason, "no way to register with the authorization server");
                SignInError::NeedsClientId
            }
            other => SignInError::Auth(other),
        }
    }
}

/// Where a server's tokens are kept, by key (the host: the keychain or its private
/// secrets file). Values are opaque JSON text; they never reach the window or a log.
#[async_trait]
pub trait TokenVault: Send + Sync {
    async fn load(&self, key: &str) -> Result<Option<String>, String>;
    async fn save(&self, key: &str, value: &str) -> Result<(), String>;
    async fn forget(&self, key: &str) -> Result<(), String>;
    /// Holds off every other process's refresh, sign-in and sign-out of the sign-in under
    /// `key` until the returned guard drops: a rotated refresh token is spent once, and the
    /// app and `conduit` spending it at once would lose the sign-in. `None`: no other
    /// process shares this vault.
    async fn hold(&self, _key: &str) -> Result<Option<Box<dyn Send>>, String> {
        Ok(None)
    }
}

/// Tokens in memory for one run, never written anywhere (the conformance client, tests).
#[derive(Default)]
pub struct MemoryTokens(parking_lot::Mutex<std::collections::HashMap<String, String>>);

#[async_trait]
impl TokenVault for MemoryTokens {
    async fn load(&self, key: &str) -> Result<Option<String>, String> {
        Ok(self.0.lock().get(key).cloned())
    }
    async fn save(&self, key: &str, value: &str) -> Result<(), String> {
        self.0.lock().insert(key.to_owned(), value.to_owned());
        Ok(())
    }
    async fn forget(&self, key: &str) -> Result<(), String> {
        self.0.lock().remove(key);
        Ok(())
    }
}

/// The vault key of a server's tokens: its URL without query or fragment (another URL is
/// another sign-in). rmcp keeps the issuer inside, and drops tokens of another one.
pub fn vault_key(server_url: &str) -> String {
    let base = match reqwest::Url::parse(server_url) {
        Ok(mut url) => {
            url.set_query(None);
            url.set_fragment(None);
            let _ = url.set_password(None);
            let _ = url.set_username("");
            url.to_string()
        }
        Err(_) => server_url.to_owned(),
    };
    format!("mcp-oauth:{base}")
}

/// rmcp's credential store on a [`TokenVault`] key.
struct VaultCredentials {
    vault: Arc<dyn TokenVault>,
    key: String,
    /// Whether a save may store tokens where none are (a sign-in does). A connection's
    /// refresh may only replace tokens still there: one that ends after the user signed
    /// out (or the entry went) must not bring the sign-in back.
    may_create: bool,
}

/// The sign-in stored under `key`, read once for every use; unreadable tokens are as good
/// as none (the user signs in again), and the log says so.
async fn stored(vault: &dyn TokenVault, key: &str) -> Result<Option<StoredCredentials>, String> {
    let Some(text) = vault.load(key).await? else {
        return Ok(None);
    };
    match serde_json::from_str(&text) {
        Ok(credentials) => Ok(Some(credentials)),
        Err(err) => {
            tracing::warn!(error = %err, "stored sign-in unreadable; signing in again");
            Ok(None)
        }
    }
}

/// Where the authorization server took a sign-in's code in (its token endpoint) and would
/// revoke its tokens, as discovered when the user signed in: the tokens go only there. A
/// server that later names other endpoints in its metadata (its own, a private address, a
/// claim to the real issuer's name from a path rmcp cannot check) gets no refresh token;
/// the user signs in again.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct BoundEndpoints {
    token: String,
    revocation: Option<String>,
    /// Where the sign-in found the server's metadata when its challenge named the place
    /// (`resource_metadata`): later connections look there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resource_metadata: Option<String>,
}

/// The field of the stored sign-in that holds its [`BoundEndpoints`] (rmcp reads the rest,
/// and ignores it).
const BOUND_ENDPOINTS: &str = "conduitEndpoints";

impl BoundEndpoints {
    /// The endpoints of `metadata` for a server at `server_url`. Sign-out sends the tokens
    /// and the client's secret to the revocation endpoint with a client of its own (not
    /// the sign-in's, which keeps off private addresses): it is kept only on the token
    /// endpoint's origin, which the sign-in's secrets went to already, and over https (or
    /// http on this machine for a server on it).
    fn of(metadata: &AuthorizationMetadata, server_url: &str) -> Self {
        let origin = |url: &str| reqwest::Url::parse(url).ok().map(|url| url.origin());
        let revocation = metadata
            .additional_fields
            .get("revocation_endpoint")
            .and_then(Value::as_str)
            .filter(|revocation| {
                let kept = origin(revocation).is_some()
                    && origin(revocation) == origin(&metadata.token_endpoint)
                    && carries_secrets_safely(revocation, server_url);
                if !kept {
                    tracing::warn!("the revocation endpoint is not on the token endpoint's origin over https; sign-out will only forget the tokens here");
                }
                kept
            })
            .map(str::to_owned);
        Self {
            token: metadata.token_endpoint.clone(),
            revocation,
            resource_metadata: None,
        }
    }

    /// A challenge that sends discovery where the sign-in found the metadata (the URL
    /// quoted as a `WWW-Authenticate` parameter: its backslashes and quotes escaped).
    fn challenge(&self) -> Option<String> {
        self.resource_metadata.as_ref().map(|url| {
            let quoted = url.replace('\\', "\\\\").replace('"', "\\\"");
            format!("Bearer resource_metadata=\"{quoted}\"")
        })
    }
}

/// The endpoints bound to the sign-in under `key`; none for a sign-in stored before they
/// were kept (or none at all).
async fn bound_endpoints(
    vault: &dyn TokenVault,
    key: &str,
) -> Result<Option<BoundEndpoints>, String> {
    let Some(text) = vault.load(key).await? else {
        return Ok(None);
    };
    Ok(serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|mut stored| stored.get_mut(BOUND_ENDPOINTS).map(Value::take))
        .and_then(|bound| serde_json::from_value(bound).ok()))
}

/// Binds `endpoints` to the sign-in stored under `key` (nothing when none is stored).
async fn bind_endpoints(
    vault: &dyn TokenVault,
    key: &str,
    endpoints: &BoundEndpoints,
) -> Result<(), String> {
    let Some(text) = vault.load(key).await? else {
        return Ok(());
    };
    let mut stored: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let Some(object) = stored.as_object_mut() else {
        return Err("the stored sign-in is not an object".into());
    };
    object.insert(
        BOUND_ENDPOINTS.to_owned(),
        serde_json::to_value(endpoints).map_err(|e| e.to_string())?,
    );
    vault.save(key, &stored.to_string()).await
}

/// The lock of the sign-in stored under `key`, one per key for the process: a refresh
/// (rmcp holds it from reading the tokens to saving the new ones) and a sign-out take
/// turns, so a sign-out revokes the newest tokens and no refresh ends after it.
fn sign_in_lock(key: &str) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: std::sync::OnceLock<
        parking_lot::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    > = std::sync::OnceLock::new();
    LOCKS
        .get_or_init(Default::default)
        .lock()
        .entry(key.to_owned())
        .or_default()
        .clone()
}

/// The sign-in under a key, held in this process and then in every other one sharing the
/// vault (in that order everywhere, so no two holders wait for each other).
struct SignInHold {
    _process: tokio::sync::OwnedMutexGuard<()>,
    _others: Option<Box<dyn Send>>,
}

async fn hold_sign_in(vault: &dyn TokenVault, key: &str) -> Result<SignInHold, String> {
    let process = sign_in_lock(key).lock_owned().await;
    let others = vault.hold(key).await?;
    Ok(SignInHold {
        _process: process,
        _others: others,
    })
}

#[async_trait]
impl CredentialStore for VaultCredentials {
    /// rmcp holds this from reading the tokens to saving the refreshed ones: another
    /// process's refresh waits, then reads the tokens this one saved.
    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let held = hold_sign_in(self.vault.as_ref(), &self.key)
            .await
            .map_err(AuthError::CredentialStoreError)?;
        Ok(Some(CredentialRefreshGuard::new(held)))
    }

    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        stored(self.vault.as_ref(), &self.key)
            .await
            .map_err(AuthError::CredentialStoreError)
    }

    /// Saves rmcp's credentials (a sign-in, a refresh), keeping the endpoints bound to the
    /// sign-in they continue.
    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let failed = |e: String| AuthError::CredentialStoreError(e);
        if !self.may_create && self.vault.load(&self.key).await.map_err(failed)?.is_none() {
            return Err(failed(
                "the sign-in was forgotten (signed out) while its tokens were refreshed".into(),
            ));
        }
        let bound = bound_endpoints(self.vault.as_ref(), &self.key)
            .await
            .map_err(failed)?;
        let mut value = serde_json::to_value(&credentials).map_err(|e| failed(e.to_string()))?;
        if let (Some(bound), Some(object)) = (bound, value.as_object_mut())
            && credentials.token_response.is_some()
        {
            object.insert(
                BOUND_ENDPOINTS.to_owned(),
                serde_json::to_value(bound).map_err(|e| failed(e.to_string()))?,
            );
        }
        self.vault
            .save(&self.key, &value.to_string())
            .await
            .map_err(failed)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.vault
            .forget(&self.key)
            .await
            .map_err(AuthError::CredentialStoreError)
    }
}

/// How the user authorizes: the URL to visit in, the redirect back out.
#[async_trait]
pub trait Authorize: Send + Sync {
    /// Gets ready for one sign-in and returns the redirect URI to register.
    async fn prepare(&self) -> Result<Redirect, SignInError>;
}

/// One sign-in's way back.
#[async_trait]
pub trait RedirectWait: Send {
    /// The redirect URI the authorization server sends the user back to.
    fn uri(&self) -> String;
    /// Has the user visit `authorization_url` and returns the URL they were sent back to.
    async fn visit(self: Box<Self>, authorization_url: &str) -> Result<String, SignInError>;
}

pub type Redirect = Box<dyn RedirectWait>;

/// Opens a URL in the user's browser.
pub type OpenBrowser = Arc<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// Sign-in in the system browser, back through a loopback listener on an ephemeral port
/// that answers one request and closes (RFC 8252).
pub struct BrowserSignIn {
    open: OpenBrowser,
    patience: Duration,
}

impl BrowserSignIn {
    pub fn new(open: OpenBrowser) -> Self {
        Self {
            open,
            patience: SIGN_IN_PATIENCE,
        }
    }

    /// Waits at most `patience` for the browser to come back.
    pub fn with_patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }
}

#[async_trait]
impl Authorize for BrowserSignIn {
    async fn prepare(&self) -> Result<Redirect, SignInError> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(SignInError::Redirect)?;
        let port = listener.local_addr().map_err(SignInError::Redirect)?.port();
        Ok(Box::new(LoopbackRedirect {
            listener,
            port,
            open: self.open.clone(),
            patience: self.patience,
        }))
    }
}

struct LoopbackRedirect {
    listener: TcpListener,
    port: u16,
    open: OpenBrowser,
    patience: Duration,
}

#[async_trait]
impl RedirectWait for LoopbackRedirect {
    fn uri(&self) -> String {
        format!("http://127.0.0.1:{}{CALLBACK_PATH}", self.port)
    }

    async fn visit(self: Box<Self>, authorization_url: &str) -> Result<String, SignInError> {
        let start = StartPage::new(authorization_url)?;
        (self.open)(&format!("http://127.0.0.1:{}{}", self.port, start.path))
            .map_err(SignInError::Browser)?;
        let base = self.uri();
        tokio::time::timeout(
            self.patience,
            receive_redirect(&self.listener, &base, &start),
        )
        .await
        .map_err(|_| SignInError::TimedOut(self.patience))?
    }
}

/// The loopback page the browser is opened at, which sends it on to the authorization
/// page. A browser is started with its URL on the command line (`xdg-open URL`, then the
/// browser's own), which every local user can read in `/proc/PID/cmdline`: the
/// authorization URL there would show the sign-in's `state`, its PKCE challenge and the
/// server's URL in `resource`, keys in its query included. This page's address shows a
/// random path on the listener, which answers only the user's own processes.
struct StartPage {
    /// `/sign-in/` and 128 random bits.
    path: String,
    /// The authorization URL as the `Location` of the redirect: parsed and written out
    /// again, so it holds no line break.
    location: String,
    /// The `state` the authorization URL carries: only a callback with it ends the wait.
    state: Option<String>,
}

impl StartPage {
    fn new(authorization_url: &str) -> Result<Self, SignInError> {
        let parsed = reqwest::Url::parse(authorization_url).map_err(|e| {
            SignInError::Refused(format!("the authorization URL is not a URL: {e}"))
        })?;
        Ok(Self {
            path: format!("{START_PATH_PREFIX}{}", uuid::Uuid::new_v4().simple()),
            state: query_value(parsed.query_pairs(), "state"),
            location: parsed.to_string(),
        })
    }

    /// Whether a callback (its request target) answers this sign-in: it carries the
    /// authorization URL's `state`. Any local process can send `/callback?error=x`; an
    /// answer for no sign-in, or another one, must not end this one.
    fn answers(&self, target: &str) -> bool {
        let Some(expected) = &self.state else {
            return true;
        };
        let query = target.split_once('?').map_or("", |(_, query)| query);
        let query = query.split('#').next().unwrap_or_default();
        query_value(url::form_urlencoded::parse(query.as_bytes()), "state").as_ref()
            == Some(expected)
    }

    /// The `303 See Other` that sends the browser on (no cache, no referrer: the
    /// authorization server need not learn the loopback address).
    fn redirect(&self) -> String {
        format!(
            "HTTP/1.1 303 See Other\r\nlocation: {}\r\ncache-control: no-store\r\nreferrer-policy: no-referrer\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            self.location
        )
    }
}

/// The value of `name` in a URL's query pairs, the first if it repeats.
fn query_value<'a>(
    mut pairs: impl Iterator<Item = (std::borrow::Cow<'a, str>, std::borrow::Cow<'a, str>)>,
    name: &str,
) -> Option<String> {
    pairs
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

/// How long one connection to the redirect listener may take to send its request line:
/// a connection that sends nothing must not keep the browser's answer waiting.
const REQUEST_LINE_PATIENCE: Duration = Duration::from_secs(2);
/// Connections to the redirect listener read at once; past it, the next waits its turn.
const REDIRECT_READERS: usize = 16;

/// Answers requests on the listener until one comes to the callback path (a browser may
/// ask for `/favicon.ico` first), sending the browser on from the `start` page meanwhile;
/// returns the callback's full URL. The listener closes with it.
/// Connections are read side by side, each within [`REQUEST_LINE_PATIENCE`], and only a
/// process of the same user may answer: another user's process that learned the
/// sign-in's `state` (from the start page, or the authorization page) could otherwise
/// hand Conduit a code of the attacker's own account.
async fn receive_redirect(
    listener: &TcpListener,
    base: &str,
    start: &StartPage,
) -> Result<String, SignInError> {
    let local = listener.local_addr().map_err(SignInError::Redirect)?;
    let readers = Arc::new(tokio::sync::Semaphore::new(REDIRECT_READERS));
    let (arrived, mut requests) = tokio::sync::mpsc::channel::<(TcpStream, String)>(4);
    loop {
        // A place to read in, then a connection; requests already read are answered
        // meanwhile.
        let next = async {
            let reader = readers.clone().acquire_owned().await;
            (reader, listener.accept().await)
        };
        tokio::select! {
            (reader, accepted) = next => {
                let reader = reader.map_err(|closed| SignInError::Other(closed.to_string()))?;
                let (stream, peer) = accepted.map_err(SignInError::Redirect)?;
                let arrived = arrived.clone();
                conduit_core::task::spawn(async move {
                    match peer::peer_of(peer, local).await {
                        peer::Peer::OtherUser(uid) => {
                            tracing::warn!(uid, "a sign-in answer came from another user's process; ignored");
                            return;
                        }
                        peer::Peer::NotListed => {
                            tracing::warn!("a sign-in answer came from a connection the kernel no longer lists; ignored");
                            return;
                        }
                        peer::Peer::SameUser | peer::Peer::Unknown => {}
                    }
                    let mut stream = stream;
                    let read =
                        tokio::time::timeout(REQUEST_LINE_PATIENCE, request_target(&mut stream)).await;
                    drop(reader);
                    if let Ok(Some(target)) = read {
                        let _ = arrived.send((stream, target)).await;
                    }
                });
            }
            Some((mut stream, target)) = requests.recv() => {
                let path = target.split(['?', '#']).next().unwrap_or_default();
                if path == start.path {
                    // Answered as often as asked: a launcher may look at the page before
                    // the browser does.
                    let _ = stream.write_all(start.redirect().as_bytes()).await;
                    let _ = stream.shutdown().await;
                    continue;
                }
                if path != CALLBACK_PATH {
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                    continue;
                }
                if !start.answers(&target) {
                    tracing::warn!("an answer for another sign-in came to the sign-in listener; ignored");
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                    continue;
                }
                let page = "<!doctype html><meta charset=utf-8><title>Conduit</title>\
                    <body style=\"font:16px system-ui;margin:3em\">\
                    <h1>Back to Conduit</h1><p>You can close this tab.</p></body>";
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
                let _ = stream.shutdown().await;
                let origin = base.trim_end_matches(CALLBACK_PATH);
                return Ok(format!("{origin}{target}"));
            }
        }
    }
}

/// The target of a request's first line (`GET /callback?code=... HTTP/1.1`), read up to
/// its end (at most 16 KiB); `None` for a connection that ends or fails first.
async fn request_target(stream: &mut TcpStream) -> Option<String> {
    let mut buffer = vec![0u8; 16 * 1024];
    let mut read = 0;
    while read < buffer.len() && !buffer[..read].windows(2).any(|w| w == b"\r\n") {
        match stream.read(&mut buffer[read..]).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => read += n,
        }
    }
    let head = String::from_utf8_lossy(&buffer[..read]);
    head.lines()
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .map(str::to_owned)
}

/// Sign-in without a person: the authorization URL is fetched without following
/// redirects and the code read from where it points (what SDK conformance clients do;
/// for tests only).
pub struct HeadlessSignIn {
    pub redirect_uri: String,
}

#[async_trait]
impl Authorize for HeadlessSignIn {
    async fn prepare(&self) -> Result<Redirect, SignInError> {
        Ok(Box::new(HeadlessRedirect {
            uri: self.redirect_uri.clone(),
        }))
    }
}

struct HeadlessRedirect {
    uri: String,
}

#[async_trait]
impl RedirectWait for HeadlessRedirect {
    fn uri(&self) -> String {
        self.uri.clone()
    }

    async fn visit(self: Box<Self>, authorization_url: &str) -> Result<String, SignInError> {
        let client = conduit_net::client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| SignInError::Other(e.to_string()))?;
        let response = client
            .get(authorization_url)
            .send()
            .await
            .map_err(|e| SignInError::Other(e.to_string()))?;
        response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| {
                SignInError::Refused(format!(
                    "the authorization page answered {} without a redirect",
                    response.status()
                ))
            })
    }
}

/// A manager for `server_url` whose tokens are in `vault`, loaded if there are any.
/// Metadata hosts may be private addresses only when the server's own is (rmcp's rule).
/// Stored tokens are used only while the server's metadata names the token endpoint the
/// sign-in used ([`BoundEndpoints`]); otherwise they are forgotten and the user signs in
/// again. A sign-in stored before endpoints were bound is bound to what the metadata names
/// now.
///
/// A confidential client (the entry's `oauth.clientId` with its `clientSecret`, the client
/// the tokens were issued to) proves itself with its secret when the tokens are refreshed,
/// as at sign-in: rmcp keeps no secret with the tokens, and refreshed without it.
pub async fn manager(
    server_url: &str,
    settings: &SignInSettings,
    vault: Arc<dyn TokenVault>,
) -> Result<(AuthorizationManager, bool), SignInError> {
    check_server_url(server_url)?;
    let key = vault_key(server_url);
    let mut manager = AuthorizationManager::new(server_url).await?;
    manager.set_credential_store(VaultCredentials {
        vault: vault.clone(),
        key: key.clone(),
        may_create: false,
    });
    let holds_tokens = stored(vault.as_ref(), &key)
        .await
        .map_err(SignInError::Vault)?
        .is_some_and(|credentials| credentials.token_response.is_some());
    if !holds_tokens {
        return Ok((manager, false));
    }
    let bound = bound_endpoints(vault.as_ref(), &key)
        .await
        .map_err(SignInError::Vault)?;
    let challenge = bound.as_ref().and_then(BoundEndpoints::challenge);
    let resolution = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await?;
    let metadata = resolution.metadata;
    // The rules a sign-in is held to, for tokens stored before they were checked at
    // sign-in (or before endpoints were bound at all): nothing goes to a token endpoint
    // in clear, nor to an authorization server other than the one the entry pins. Only
    // for metadata found: without it (an outage) nothing is sent anyway, and the
    // branches below say the sign-in is kept for when it can be read.
    if resolution.source.is_discovered() {
        check_endpoints(server_url, &metadata)?;
        check_issuer(settings, &metadata)?;
    }
    let now = BoundEndpoints::of(&metadata, server_url);
    match bound {
        // No metadata found (rmcp made up `/token` on the server's origin): the server or
        // its authorization server is down, or hides its metadata. The tokens are neither
        // sent there nor forgotten.
        Some(bound) if bound.token != now.token && !resolution.source.is_discovered() => {
            return Err(SignInError::Other(
                "the server's authorization metadata could not be read; its sign-in is kept for when it can".into(),
            ));
        }
        Some(bound) if bound.token != now.token => {
            tracing::warn!(
                "the server's metadata names another token endpoint than at sign-in; the sign-in is forgotten"
            );
            vault.forget(&key).await.map_err(SignInError::Vault)?;
            return Ok((manager, false));
        }
        Some(_) => {}
        None if resolution.source.is_discovered() => {
            // A read, change and write of the stored tokens: not while a refresh (here or
            // in another process) saves new ones, which this would overwrite.
            let _held = hold_sign_in(vault.as_ref(), &key)
                .await
                .map_err(SignInError::Vault)?;
            bind_endpoints(vault.as_ref(), &key, &now)
                .await
                .map_err(SignInError::Vault)?
        }
        // A sign-in stored before endpoints were bound, and no metadata to bind it to: its
        // tokens are not sent to made-up endpoints.
        None => {
            return Err(SignInError::Other(
                "the server's authorization metadata could not be read; sign in again (its sign-in is kept for when the metadata can be read)".into(),
            ));
        }
    }
    manager.set_metadata(metadata);
    let signed_in = manager.initialize_from_store().await?;
    if signed_in
        && let (Some(id), Some(secret)) = (&settings.client_id, &settings.client_secret)
        && manager.get_credentials().await?.0 == *id
    {
        manager.configure_client(
            rmcp::transport::auth::OAuthClientConfig::new(id.clone(), server_url)
                .with_client_secret(secret.clone()),
        )?;
    }
    Ok((manager, signed_in))
}

/// Whether tokens for `server_url` are stored (not whether they still work).
pub async fn is_signed_in(server_url: &str, vault: &dyn TokenVault) -> Result<bool, SignInError> {
    let stored = stored(vault, &vault_key(server_url))
        .await
        .map_err(SignInError::Vault)?;
    Ok(stored.is_some_and(|c| c.token_response.is_some()))
}

/// Signs in to the server at `server_url`: discovery (seeded from `challenge`, the
/// `WWW-Authenticate` of its 401 or 403, when there is one), registration, the user's
/// authorization through `authorize`, and the code exchanged for tokens kept in `vault`.
/// `announce` is told the authorization URL before it is visited, so it can be shown.
pub async fn sign_in(
    server_url: &str,
    settings: &SignInSettings,
    challenge: Option<&str>,
    vault: Arc<dyn TokenVault>,
    authorize: &dyn Authorize,
    announce: &(dyn Fn(&str) + Send + Sync),
) -> Result<(), SignInError> {
    check_server_url(server_url)?;
    let mut manager = AuthorizationManager::new(server_url).await?;
    manager.set_credential_store(VaultCredentials {
        vault: vault.clone(),
        key: vault_key(server_url),
        may_create: true,
    });
    // The metadata the flow uses, read once: the code is exchanged at its token endpoint,
    // and the tokens are bound to it (and to where the challenge said to look).
    let resolution = manager.resolve_metadata_from_challenge(challenge).await?;
    check_endpoints(server_url, &resolution.metadata)?;
    check_issuer(settings, &resolution.metadata)?;
    let mut bound = BoundEndpoints::of(&resolution.metadata, server_url);
    bound.resource_metadata = challenge.and_then(|c| {
        let base = reqwest::Url::parse(server_url).ok()?;
        WWWAuthenticateParams::parse(c, &base)
            .resource_metadata_url
            .map(|url| url.to_string())
    });
    manager.set_metadata(resolution.metadata);
    let redirect = authorize.prepare().await?;
    let mut request = AuthorizationRequest::new(redirect.uri()).with_client_name(CLIENT_NAME);
    if let Some(id) = &settings.client_id {
        request = request.with_preregistered_client(id.clone());
        if let Some(secret) = &settings.client_secret {
            request = request.with_client_secret(secret.clone());
        }
    }
    if let Some(url) = &settings.client_metadata_url {
        request = request.with_client_metadata_url(url.clone());
    }
    if let Some(challenge) = challenge {
        request = request.with_challenge(challenge);
    }
    // Signing in again for more (step-up) keeps what was granted (SEP-2350): the scopes
    // held so far and those the challenge asks for, together.
    let challenged = challenge
        .and_then(|c| {
            let base = reqwest::Url::parse(server_url).ok()?;
            WWWAuthenticateParams::parse(c, &base).scope
        })
        .unwrap_or_default();
    let held = held_scopes(&vault, server_url).await;
    let mut scopes: Vec<String> = settings.scopes.clone();
    if !challenged.is_empty() && !held.is_empty() {
        for scope in held
            .iter()
            .map(String::as_str)
            .chain(challenged.split_whitespace())
        {
            if !scopes.iter().any(|s| s == scope) {
                scopes.push(scope.to_owned());
            }
        }
    }
    if scopes.is_empty() {
        request = request.with_initial_scope_selection();
    } else {
        request = request.with_scopes(scopes);
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, error)| error)?;
    let url = session.auth_url.clone();
    // The URL comes from the server's metadata: only a web page is opened.
    check_page_url(&url, server_url)?;
    announce(&url);
    let back = redirect.visit(&url).await?;
    if let Some(refusal) = redirect_error(&back) {
        return Err(SignInError::Refused(refusal));
    }
    let callback = AuthorizationCallback::from_redirect_url(&back)?;
    // A refresh of the connection still running (a step-up) must not save its tokens over
    // these.
    let _held = hold_sign_in(vault.as_ref(), &vault_key(server_url))
        .await
        .map_err(SignInError::Vault)?;
    session
        .handle_callback_with_issuer(
            &callback.code,
            &callback.csrf_token,
            callback.issuer.as_deref(),
        )
        .await?;
    bind_endpoints(vault.as_ref(), &vault_key(server_url), &bound)
        .await
        .map_err(SignInError::Vault)
}

/// Refuses an authorization URL that is not a web page a browser should open for a
/// server at `server_url`: https, or http on this machine for a server on it (a remote
/// server's metadata must not send the browser to a service on the user's machine).
fn check_page_url(url: &str, server_url: &str) -> Result<(), SignInError> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| SignInError::Refused(format!("the authorization URL is not a URL: {e}")))?;
    if carries_secrets_safely(url, server_url) {
        return Ok(());
    }
    Err(SignInError::Refused(format!(
        "the authorization page must be https (or http on this machine, for a server on it), not {}: on {}",
        parsed.scheme(),
        parsed.host_str().unwrap_or("no host"),
    )))
}

/// Refuses to sign in to, or send tokens to, a server reached over plain http on another
/// machine: its every request would carry the bearer token in clear (RFC 6750 §5.3),
/// however well the sign-in itself was protected.
fn check_server_url(server_url: &str) -> Result<(), SignInError> {
    if carries_secrets_safely(server_url, server_url) {
        return Ok(());
    }
    Err(SignInError::Refused(
        "the server's address is not https: Conduit sends no sign-in in clear, and every request would carry its token (http is taken only on this machine); use its https address".into(),
    ))
}

/// Refuses metadata whose endpoints would carry the sign-in's secrets (the code, the PKCE
/// verifier, a client secret, tokens) in clear: the authorization, token and
/// registration endpoints must be https, or http on this machine for a server on it.
fn check_endpoints(server_url: &str, metadata: &AuthorizationMetadata) -> Result<(), SignInError> {
    let endpoints = [
        ("authorization", Some(&metadata.authorization_endpoint)),
        ("token", Some(&metadata.token_endpoint)),
        ("registration", metadata.registration_endpoint.as_ref()),
    ];
    for (what, endpoint) in endpoints {
        if let Some(endpoint) = endpoint
            && !carries_secrets_safely(endpoint, server_url)
        {
            let host = reqwest::Url::parse(endpoint)
                .ok()
                .and_then(|url| url.host_str().map(str::to_owned))
                .unwrap_or_else(|| "no host".to_owned());
            return Err(SignInError::Refused(format!(
                "the authorization server's {what} endpoint (on {host}) is not https: Conduit sends no sign-in in clear (http is taken only on this machine, for a server on it)"
            )));
        }
    }
    Ok(())
}

/// Refuses a sign-in whose authorization server is not the `issuer` the entry names:
/// the client's id and secret were registered there, and the server's metadata must not
/// send them to another.
fn check_issuer(
    settings: &SignInSettings,
    metadata: &AuthorizationMetadata,
) -> Result<(), SignInError> {
    let Some(expected) = &settings.issuer else {
        return Ok(());
    };
    let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
    match metadata.issuer.as_deref() {
        Some(found) if same(found, expected) => Ok(()),
        found => Err(SignInError::Refused(format!(
            "the server's authorization server is {}, not {expected} (its entry's oauth.issuer): Conduit signs in only there",
            found.unwrap_or("unnamed")
        ))),
    }
}

/// Whether `url` may carry a sign-in's secrets for a server at `server_url`: https, or
/// http to this machine when the server is on this machine too.
fn carries_secrets_safely(url: &str, server_url: &str) -> bool {
    use crate::config::url_on_this_machine;
    match reqwest::Url::parse(url).as_ref().map(reqwest::Url::scheme) {
        Ok("https") => true,
        Ok("http") => url_on_this_machine(url) && url_on_this_machine(server_url),
        _ => false,
    }
}

/// The scopes the stored tokens of `server_url` were granted (none when nothing is
/// stored or it cannot be read).
async fn held_scopes(vault: &Arc<dyn TokenVault>, server_url: &str) -> Vec<String> {
    match stored(vault.as_ref(), &vault_key(server_url)).await {
        Ok(credentials) => credentials.map(|c| c.granted_scopes).unwrap_or_default(),
        Err(err) => {
            tracing::warn!(error = %err, "the stored sign-in could not be read");
            Vec::new()
        }
    }
}

/// The `error` (and its description) a redirect carries when the user or the server
/// refused.
fn redirect_error(url: &str) -> Option<String> {
    let url = reqwest::Url::parse(url).ok()?;
    let mut error = None;
    let mut description = None;
    for (key, value) in url.query_pairs() {
        match key.as_ref() {
            "error" => error = Some(value.into_owned()),
            "error_description" => description = Some(value.into_owned()),
            _ => {}
        }
    }
    let error = error?;
    Some(match description {
        Some(description) => format!("{error}: {description}"),
        None => error,
    })
}

/// Signs out of the server at `server_url`: its tokens are forgotten first (a revocation
/// that fails or hangs leaves nothing behind), then revoked at the endpoint bound at
/// sign-in, within [`REVOCATION_PATIENCE`].
pub async fn sign_out(
    server_url: &str,
    settings: &SignInSettings,
    vault: Arc<dyn TokenVault>,
) -> Result<SignedOut, SignInError> {
    let Some((stored, bound)) = forget_stored(server_url, vault.as_ref()).await? else {
        return Ok(SignedOut::NothingStored);
    };
    let revoked = tokio::time::timeout(
        REVOCATION_PATIENCE,
        revoke(server_url, settings, &stored, bound.as_ref()),
    )
    .await;
    Ok(match revoked {
        Ok(Ok(true)) => SignedOut::Revoked,
        Ok(Ok(false)) => SignedOut::Forgotten,
        Ok(Err(reason)) => SignedOut::RevocationFailed(reason),
        Err(_) => SignedOut::RevocationFailed(format!(
            "the authorization server did not answer within {} s",
            REVOCATION_PATIENCE.as_secs()
        )),
    })
}

/// Signs out of the server at `server_url` here only: its tokens are forgotten and its
/// authorization server is not asked to revoke them (`why` says why not). Nothing is sent
/// anywhere.
pub async fn sign_out_here(
    server_url: &str,
    vault: Arc<dyn TokenVault>,
    why: &str,
) -> Result<SignedOut, SignInError> {
    Ok(match forget_stored(server_url, vault.as_ref()).await? {
        None => SignedOut::NothingStored,
        Some(_) => SignedOut::RevocationFailed(why.to_owned()),
    })
}

/// Forgets the sign-in stored for `server_url`; what was stored, and the endpoints bound
/// at sign-in (to revoke at).
async fn forget_stored(
    server_url: &str,
    vault: &dyn TokenVault,
) -> Result<Option<(StoredCredentials, Option<BoundEndpoints>)>, SignInError> {
    let key = vault_key(server_url);
    // Not while a refresh is between reading the tokens and saving new ones (one that takes
    // longer is not waited for: a refresh that ends after the sign-out cannot save).
    let held = match tokio::time::timeout(REVOCATION_PATIENCE, hold_sign_in(vault, &key)).await {
        Ok(Ok(held)) => Some(held),
        Ok(Err(reason)) => {
            tracing::warn!(%reason, "signing out without holding off other processes' refreshes");
            None
        }
        Err(_) => None,
    };
    let stored = stored(vault, &key).await.map_err(SignInError::Vault)?;
    let bound = bound_endpoints(vault, &key)
        .await
        .map_err(SignInError::Vault)?;
    vault.forget(&key).await.map_err(SignInError::Vault)?;
    drop(held);
    Ok(stored.map(|stored| (stored, bound)))
}

/// How long a revocation may take: the tokens are already forgotten, so a server that
/// does not answer only delays the word that they were revoked.
pub const REVOCATION_PATIENCE: Duration = Duration::from_secs(30);

/// What signing out did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, ts_rs::TS)]
#[serde(tag = "kind", content = "reason", rename_all = "snake_case")]
pub enum SignedOut {
    NothingStored,
    /// The authorization server revoked the tokens.
    Revoked,
    /// It offers no revocation: the tokens were forgotten here only.
    Forgotten,
    RevocationFailed(String),
}

/// Where to revoke: the endpoint bound at sign-in; for a sign-in stored before endpoints
/// were bound, the one the metadata names now, only on the token endpoint's origin.
async fn revocation_endpoint(
    server_url: &str,
    bound: Option<&BoundEndpoints>,
) -> Result<Option<String>, String> {
    if let Some(bound) = bound {
        // Bound before revocation endpoints were checked, one may be anywhere: the same
        // rule as at sign-in, now.
        let origin = |url: &str| reqwest::Url::parse(url).ok().map(|url| url.origin());
        return Ok(bound.revocation.clone().filter(|revocation| {
            origin(revocation).is_some()
                && origin(revocation) == origin(&bound.token)
                && carries_secrets_safely(revocation, server_url)
        }));
    }
    let manager = AuthorizationManager::new(server_url)
        .await
        .map_err(|e| e.to_string())?;
    let now = BoundEndpoints::of(
        &manager
            .resolve_metadata()
            .await
            .map_err(|e| e.to_string())?
            .metadata,
        server_url,
    );
    Ok(now.revocation)
}

async fn revoke(
    server_url: &str,
    settings: &SignInSettings,
    stored: &StoredCredentials,
    bound: Option<&BoundEndpoints>,
) -> Result<bool, String> {
    let Some(tokens) = &stored.token_response else {
        return Ok(false);
    };
    // The token response as its wire form: no need for oauth2's traits.
    let tokens = serde_json::to_value(tokens).map_err(|e| e.to_string())?;
    let field = |name: &str| tokens.get(name).and_then(Value::as_str).map(str::to_owned);
    let Some(endpoint) = revocation_endpoint(server_url, bound).await? else {
        return Ok(false);
    };
    let client = conduit_net::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())?;
    let mut revoked_any = false;
    let candidates = [
        (field("refresh_token"), "refresh_token"),
        (field("access_token"), "access_token"),
    ];
    for (token, hint) in candidates
        .into_iter()
        .filter_map(|(token, hint)| token.map(|t| (t, hint)))
    {
        let mut form = vec![
            ("token", token),
            ("token_type_hint", hint.to_owned()),
            ("client_id", stored.client_id.clone()),
        ];
        if let (Some(id), Some(secret)) = (&settings.client_id, &settings.client_secret)
            && *id == stored.client_id
        {
            form.push(("client_secret", secret.clone()));
        }
        let response = client
            .post(&endpoint)
            .form(&form)
            .send()
            .await
            .map_err(|e| format!("revocation at {endpoint} failed: {e}"))?;
        if !response.status().is_success() {
            return Err(format!(
                "revocation at {endpoint} answered {}",
                response.status()
            ));
        }
        revoked_any = true;
    }
    Ok(revoked_any)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn an_entry_s_oauth_settings_are_read_and_bad_ones_named() {
        let settings = SignInSettings::from_entry(Some(&json!({
            "clientId": "abc", "clientSecret": "s3", "scopes": ["read", "write"],
            "clientMetadataUrl": "https://example.com/conduit.json"
        })))
        .unwrap();
        assert_eq!(settings.client_id.as_deref(), Some("abc"));
        assert_eq!(settings.scopes, ["read", "write"]);
        assert_eq!(
            SignInSettings::from_entry(Some(&json!({"scopes": "a b"})))
                .unwrap()
                .scopes,
            ["a", "b"]
        );
        for (bad, says) in [
            (json!("yes"), "oauth must be an object"),
            (json!({"clientSecret": "x"}), "needs oauth.clientId"),
            (json!({"clientId": 3}), "oauth.clientId must be"),
            (json!({"clientMetadataUrl": "http://x/y"}), "https://"),
            (json!({"scope": "x"}), "oauth.scope is not a setting"),
            (json!({"scopes": ["a b"]}), "without spaces"),
            (json!({"issuer": "not a url"}), "oauth.issuer must be"),
        ] {
            let err = SignInSettings::from_entry(Some(&bad)).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn only_web_pages_are_opened_for_sign_in() {
        let (remote, local) = ("https://mcp.example/mcp", "http://127.0.0.1:8000/mcp");
        for (good, server) in [
            ("https://auth.example/authorize?x=1", remote),
            ("https://auth.example/authorize?x=1", local),
            ("http://127.0.0.1:9/authorize", local),
            ("http://localhost:9/a", local),
            ("http://[::1]:9/a", local),
        ] {
            assert!(check_page_url(good, server).is_ok(), "{good} for {server}");
        }
        for (bad, server) in [
            ("http://auth.example/authorize", remote),
            ("http://auth.example/authorize", local),
            // A remote server's metadata must not send the browser to this machine.
            ("http://127.0.0.1:8888/api/delete?all=1", remote),
            ("http://localhost:9/a", remote),
            ("file:///etc/passwd", local),
            ("javascript:alert(1)", local),
            ("ms-settings:", local),
            ("not a url", local),
        ] {
            assert!(check_page_url(bad, server).is_err(), "{bad} for {server}");
        }
    }

    fn metadata(endpoints: Value) -> AuthorizationMetadata {
        serde_json::from_value(endpoints).unwrap()
    }

    #[test]
    fn no_endpoint_takes_a_sign_in_in_clear_and_revocation_stays_with_the_token_endpoint() {
        let remote = "https://mcp.example/mcp";
        let sound = serde_json::json!({
            "authorization_endpoint": "https://auth.example/authorize",
            "token_endpoint": "https://auth.example/token",
            "registration_endpoint": "https://auth.example/register",
            "revocation_endpoint": "https://auth.example/revoke",
        });
        assert!(check_endpoints(remote, &metadata(sound.clone())).is_ok());
        assert_eq!(
            BoundEndpoints::of(&metadata(sound.clone()), remote)
                .revocation
                .as_deref(),
            Some("https://auth.example/revoke")
        );
        for field in [
            "authorization_endpoint",
            "token_endpoint",
            "registration_endpoint",
        ] {
            let mut clear = sound.clone();
            clear[field] = Value::from("http://auth.example/x");
            let refused = check_endpoints(remote, &metadata(clear)).unwrap_err();
            assert!(refused.to_string().contains("is not https"), "{refused}");
        }
        // A server on this machine may use http on it (development, tests).
        let local = serde_json::json!({
            "authorization_endpoint": "http://127.0.0.1:9/authorize",
            "token_endpoint": "http://127.0.0.1:9/token",
            "revocation_endpoint": "http://127.0.0.1:9/revoke",
        });
        assert!(check_endpoints("http://localhost:8000/mcp", &metadata(local.clone())).is_ok());
        assert!(check_endpoints(remote, &metadata(local)).is_err());
        // Revocation elsewhere than the token endpoint, or in clear, is not kept: sign-out
        // then only forgets the tokens.
        for elsewhere in [
            "https://169.254.169.254/latest",
            "https://other.example/revoke",
            "http://auth.example/revoke",
            "http://127.0.0.1:9/revoke",
        ] {
            let mut moved = sound.clone();
            moved["revocation_endpoint"] = Value::from(elsewhere);
            assert_eq!(
                BoundEndpoints::of(&metadata(moved), remote).revocation,
                None,
                "{elsewhere}"
            );
        }
    }

    #[tokio::test]
    async fn a_revocation_endpoint_bound_before_it_was_checked_is_checked_at_sign_out() {
        let bound = |revocation: &str| BoundEndpoints {
            token: "https://auth.example/token".into(),
            revocation: Some(revocation.into()),
            resource_metadata: None,
        };
        let server = "https://mcp.example/mcp";
        for unsafe_place in [
            "http://169.254.169.254/latest",
            "https://other.example/revoke",
            "http://auth.example/revoke",
        ] {
            assert_eq!(
                revocation_endpoint(server, Some(&bound(unsafe_place))).await,
                Ok(None),
                "{unsafe_place}"
            );
        }
        assert_eq!(
            revocation_endpoint(server, Some(&bound("https://auth.example/revoke"))).await,
            Ok(Some("https://auth.example/revoke".to_owned()))
        );
    }

    #[test]
    fn a_sign_in_goes_only_to_the_issuer_its_entry_names() {
        let metadata = |issuer: &str| {
            metadata(serde_json::json!({
                "issuer": issuer,
                "authorization_endpoint": "https://auth.example/authorize",
                "token_endpoint": "https://auth.example/token",
            }))
        };
        let pinned = SignInSettings::from_entry(Some(&json!({
            "clientId": "abc", "clientSecret": "s3", "issuer": "https://auth.example"
        })))
        .unwrap();
        assert!(check_issuer(&pinned, &metadata("https://auth.example/")).is_ok());
        let refused = check_issuer(&pinned, &metadata("https://evil.example")).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("https://evil.example, not https://auth.example"),
            "{refused}"
        );
        // Without `issuer`, any issuer rmcp accepts.
        assert!(
            check_issuer(
                &SignInSettings::default(),
                &metadata("https://evil.example")
            )
            .is_ok()
        );
    }

    #[test]
    fn only_a_callback_with_the_sign_ins_state_answers_it() {
        let start =
            StartPage::new("https://auth.example/authorize?client_id=c&state=s%2B1&x=y").unwrap();
        assert!(start.answers("/callback?code=abc&state=s%2B1"));
        assert!(start.answers("/callback?state=s+1&code=abc".replace('+', "%2B").as_str()));
        assert!(!start.answers("/callback?error=access_denied"));
        assert!(!start.answers("/callback?state=junk&error=x"));
        assert!(!start.answers("/callback"));
    }

    #[test]
    fn the_vault_key_drops_query_and_user_info() {
        assert_eq!(
            vault_key("https://u:p@mcp.example.com/mcp?key=1#x"),
            "mcp-oauth:https://mcp.example.com/mcp"
        );
    }

    #[test]
    fn a_refused_redirect_says_why() {
        assert_eq!(
            redirect_error(
                "http://127.0.0.1:1/callback?error=access_denied&error_description=no+thanks"
            )
            .as_deref(),
            Some("access_denied: no thanks")
        );
        assert_eq!(
            redirect_error("http://127.0.0.1:1/callback?code=1&state=2"),
            None
        );
    }

    #[tokio::test]
    async fn the_loopback_redirect_answers_the_callback_once_and_ignores_other_paths() {
        let opened = Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
        let seen = opened.clone();
        let sign_in = BrowserSignIn::new(Arc::new(move |url: &str| {
            seen.lock().push(url.to_owned());
            Ok(())
        }));
        let redirect = sign_in.prepare().await.unwrap();
        let uri = redirect.uri();
        assert!(uri.starts_with("http://127.0.0.1:") && uri.ends_with("/callback"));
        let authorization = "https://auth.example/authorize?x=1&state=st&resource=https%3A%2F%2Fmcp.example%2Fmcp%3Fkey%3Dsecret";
        let browser = {
            let uri = uri.clone();
            let seen = opened.clone();
            tokio::spawn(async move {
                let origin = uri.trim_end_matches("/callback").to_owned();
                // The browser was opened at a random page of the listener, which sends it
                // on to the authorization page, as often as it is asked.
                let start = loop {
                    if let Some(url) = seen.lock().first().cloned() {
                        break url;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                };
                let path = start.strip_prefix(&origin).unwrap_or_default();
                let random = path.strip_prefix("/sign-in/").unwrap_or_default();
                assert!(
                    random.len() == 32 && random.chars().all(|c| c.is_ascii_hexdigit()),
                    "{start}"
                );
                let no_redirects = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .unwrap();
                for _ in 0..2 {
                    let page = no_redirects.get(&start).send().await.unwrap();
                    assert_eq!(page.status(), 303);
                    assert_eq!(page.headers()["location"], authorization);
                    assert_eq!(page.headers()["referrer-policy"], "no-referrer");
                    assert_eq!(page.headers()["cache-control"], "no-store");
                }
                let other = reqwest::get(format!("{origin}/sign-in/{}", "0".repeat(32)))
                    .await
                    .unwrap();
                assert_eq!(other.status(), 404, "only the sign-in's own page answers");
                let favicon = reqwest::get(format!("{origin}/favicon.ico")).await.unwrap();
                assert_eq!(favicon.status(), 404);
                let page = reqwest::get(format!("{uri}?code=c0de&state=st"))
                    .await
                    .unwrap();
                assert_eq!(page.status(), 200);
                assert!(page.text().await.unwrap().contains("close this tab"));
                // The listener is gone after the one redirect.
                assert!(reqwest::get(format!("{uri}?again=1")).await.is_err());
            })
        };
        let back = redirect.visit(authorization).await.unwrap();
        assert_eq!(back, format!("{uri}?code=c0de&state=st"));
        browser.await.unwrap();
        // What other users can read on the browser's command line: no state, no challenge,
        // nothing of the server's URL or its key.
        let opened = opened.lock().clone();
        assert_eq!(opened.len(), 1);
        for hidden in ["state", "auth.example", "mcp.example", "secret"] {
            assert!(!opened[0].contains(hidden), "{hidden} in {}", opened[0]);
        }
    }

    /// A local process that connects and says nothing, or asks for a path that only
    /// starts like the callback, neither holds up nor stands in for the browser's answer.
    #[tokio::test]
    async fn an_idle_connection_does_not_hold_up_the_browser_and_only_the_exact_path_answers() {
        // Before, the first silent connection was read until the sign-in gave up.
        let sign_in =
            BrowserSignIn::new(Arc::new(|_: &str| Ok(()))).with_patience(Duration::from_secs(30));
        let redirect = sign_in.prepare().await.unwrap();
        let uri = redirect.uri();
        let address = uri
            .trim_start_matches("http://")
            .trim_end_matches("/callback")
            .to_owned();
        let browser = tokio::spawn(async move {
            // Many silent connections, more than are read at once, kept open.
            let mut idle = Vec::new();
            for _ in 0..REDIRECT_READERS + 4 {
                idle.push(TcpStream::connect(&address).await.unwrap());
            }
            let mut lookalike = TcpStream::connect(&address).await.unwrap();
            lookalike
                .write_all(b"GET /callbackX?code=evil&state=st HTTP/1.1\r\n\r\n")
                .await
                .unwrap();
            let mut answer = String::new();
            lookalike.read_to_string(&mut answer).await.unwrap();
            assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
            let page = reqwest::get(format!("http://{address}/callback?code=c0de&state=st"))
                .await
                .unwrap();
            assert_eq!(page.status(), 200);
            idle
        });
        let back = redirect.visit("https://auth.example/a").await.unwrap();
        assert!(back.ends_with("/callback?code=c0de&state=st"), "{back}");
        drop(browser.await.unwrap());
    }

    /// A connection's refresh that ends after the user signed out must not store the
    /// sign-in again; a sign-in may store one where none is.
    #[tokio::test]
    async fn a_refresh_that_ends_after_a_sign_out_does_not_bring_the_sign_in_back() {
        let vault = Arc::new(MemoryTokens::default());
        let key = vault_key("https://mcp.example/mcp");
        let credentials = || StoredCredentials::new("client".into(), None, Vec::new(), None);
        let connection = VaultCredentials {
            vault: vault.clone(),
            key: key.clone(),
            may_create: false,
        };
        let refused = connection.save(credentials()).await.unwrap_err();
        assert!(refused.to_string().contains("signed out"), "{refused}");
        assert!(vault.load(&key).await.unwrap().is_none());

        let signing_in = VaultCredentials {
            vault: vault.clone(),
            key: key.clone(),
            may_create: true,
        };
        signing_in.save(credentials()).await.unwrap();
        assert!(vault.load(&key).await.unwrap().is_some());
        // While it is there, a connection's refresh replaces it.
        connection.save(credentials()).await.unwrap();
        assert!(vault.load(&key).await.unwrap().is_some());
    }

    /// The place the sign-in found the metadata is replayed as a challenge that reads back
    /// as the same URL, backslashes and quotes included.
    #[test]
    fn the_replayed_challenge_names_the_same_metadata_url() {
        for url in [
            "https://mcp.example/.well-known/oauth-protected-resource/mcp",
            r"https://mcp.example/meta?a=x\y",
            r"https://mcp.example/meta?end=\",
        ] {
            let bound = BoundEndpoints {
                token: "https://auth.example/token".into(),
                revocation: None,
                resource_metadata: Some(url.into()),
            };
            let challenge = bound.challenge().unwrap();
            let base = reqwest::Url::parse("https://mcp.example/mcp").unwrap();
            let read = WWWAuthenticateParams::parse(&challenge, &base)
                .resource_metadata_url
                .map(|u| u.to_string());
            assert_eq!(
                read.as_deref(),
                Some(reqwest::Url::parse(url).unwrap().as_str()),
                "{challenge}"
            );
        }
    }

    /// A sign-out waits for a refresh in flight (rmcp holds the guard from reading the
    /// tokens to saving new ones), so it forgets and revokes the newest tokens.
    #[tokio::test]
    async fn a_sign_out_waits_for_a_refresh_in_flight() {
        let vault = Arc::new(MemoryTokens::default());
        let url = "https://refresh.example/mcp";
        let key = vault_key(url);
        let credentials = || StoredCredentials::new("client".into(), None, Vec::new(), None);
        let connection = VaultCredentials {
            vault: vault.clone(),
            key: key.clone(),
            may_create: false,
        };
        vault
            .save(&key, &serde_json::to_string(&credentials()).unwrap())
            .await
            .unwrap();
        let refreshing = connection.acquire_refresh_guard().await.unwrap();
        let signing_out = tokio::spawn({
            let vault: Arc<dyn TokenVault> = vault.clone();
            async move { sign_out(url, &SignInSettings::default(), vault).await }
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            !signing_out.is_finished(),
            "the sign-out waits for the refresh"
        );
        connection.save(credentials()).await.unwrap();
        drop(refreshing);
        let outcome = signing_out.await.unwrap().unwrap();
        assert_eq!(outcome, SignedOut::Forgotten);
        assert!(vault.load(&key).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_browser_that_never_comes_back_times_out() {
        let sign_in =
            BrowserSignIn::new(Arc::new(|_: &str| Ok(()))).with_patience(Duration::from_millis(50));
        let redirect = sign_in.prepare().await.unwrap();
        let err = redirect.visit("https://auth.example/a").await.unwrap_err();
        assert!(matches!(err, SignInError::TimedOut(_)), "{err}");
    }

    /// A server reached over plain http on another machine would get the token in clear
    /// on every request: no sign-in to it, and no stored token sent to it.
    #[tokio::test]
    async fn no_token_goes_to_a_server_over_plain_http_on_another_machine() {
        let vault = Arc::new(MemoryTokens::default());
        let url = "http://mcp.example.com/mcp";
        let refused = sign_in(
            url,
            &SignInSettings::default(),
            None,
            vault.clone(),
            &BrowserSignIn::new(Arc::new(|_: &str| panic!("no browser is opened"))),
            &|_: &str| panic!("no page is announced"),
        )
        .await
        .unwrap_err();
        assert!(matches!(refused, SignInError::Refused(_)), "{refused}");
        assert!(refused.to_string().contains("not https"), "{refused}");
        let key = vault_key(url);
        VaultCredentials {
            vault: vault.clone(),
            key,
            may_create: true,
        }
        .save(StoredCredentials::new(
            "client".into(),
            None,
            Vec::new(),
            None,
        ))
        .await
        .unwrap();
        let refused = manager(url, &SignInSettings::default(), vault.clone())
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(refused.to_string().contains("not https"), "{refused}");
        // On this machine, http is taken.
        assert!(check_server_url("http://127.0.0.1:8080/mcp").is_ok());
        assert!(check_server_url("https://mcp.example.com/mcp").is_ok());
    }

    /// A sign-in stored before endpoints were bound and checked (an older Conduit): its
    /// refresh token is not sent to a token endpoint in clear on another machine, nor to
    /// an authorization server other than the one the entry pins.
    #[tokio::test]
    async fn an_older_sign_in_is_held_to_the_rules_of_a_new_one() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let metadata = Arc::new(parking_lot::Mutex::new(serde_json::json!({
            "issuer": origin,
            "authorization_endpoint": format!("{origin}/authorize"),
            "token_endpoint": "http://auth.example.com/token",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
        })));
        let served = metadata.clone();
        let resource = serde_json::json!({
            "resource": format!("{origin}/mcp"),
            "authorization_servers": [origin],
        });
        let app = axum::Router::new()
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                axum::routing::get(move || async move { axum::Json(resource) }),
            )
            .route(
                "/.well-known/oauth-authorization-server",
                axum::routing::get(move || {
                    let served = served.lock().clone();
                    async move { axum::Json(served) }
                }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await });
        let url = format!("{origin}/mcp");
        let vault = Arc::new(MemoryTokens::default());
        let old_sign_in = serde_json::json!({
            "client_id": "client",
            "token_response": {"access_token": "a", "token_type": "bearer",
                               "refresh_token": "refresh-0", "expires_in": 1},
            "granted_scopes": [],
            "token_received_at": 0,
        });
        vault
            .save(&vault_key(&url), &old_sign_in.to_string())
            .await
            .unwrap();
        let refused = manager(&url, &SignInSettings::default(), vault.clone())
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(refused, SignInError::Refused(_)), "{refused}");
        assert!(refused.to_string().contains("token endpoint"), "{refused}");
        metadata.lock()["token_endpoint"] = "https://auth.example.com/token".into();
        let pinned = SignInSettings {
            issuer: Some("https://login.work.example".into()),
            ..SignInSettings::default()
        };
        let refused = manager(&url, &pinned, vault.clone())
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(refused, SignInError::Refused(_)), "{refused}");
        assert!(refused.to_string().contains("oauth.issuer"), "{refused}");
    }

    #[tokio::test]
    async fn a_browser_that_cannot_open_is_an_error() {
        let sign_in = BrowserSignIn::new(Arc::new(|_: &str| Err("no browser".into())));
        let redirect = sign_in.prepare().await.unwrap();
        let err = redirect.visit("https://auth.example/a").await.unwrap_err();
        assert!(err.to_string().contains("no browser"), "{err}");
    }
}
