//! A loopback OAuth 2.1 authorization server with an MCP server behind it, as a real
//! remote server is set up: `/mcp` answers 401 with a `WWW-Authenticate` challenge
//! without a valid bearer token (and forwards to an upstream MCP server with one),
//! protected resource metadata (RFC 9728), authorization server metadata (RFC 8414),
//! dynamic registration (RFC 7591), an authorization endpoint that consents at once and
//! redirects with the code (the user pressing "Allow"), PKCE S256 checked at the token
//! endpoint, refresh tokens (rotated), and revocation (RFC 7009). Every step is recorded.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};
use sha2::Digest;

/// How long after tokens of a 31 s lifetime are issued a run is sure to find them due
/// for refresh: rmcp refreshes a token with less than 30 s left, counting in whole
/// seconds (`token_received_at`), so 1.5 s can still count as one second and leave 30.
pub const UNTIL_REFRESH_DUE: Duration = Duration::from_millis(2100);
/// The scope the server asks for.
pub const SCOPE: &str = "mcp:tools";
/// The client id registered beforehand with a server that offers no registration.
pub const PREREGISTERED_CLIENT: &str = "conduit-preregistered";
/// A confidential client registered beforehand (with any server): the token endpoint
/// takes its codes and refresh tokens only with [`CONFIDENTIAL_SECRET`] (HTTP Basic or
/// the form), and answers `invalid_client` without.
pub const CONFIDENTIAL_CLIENT: &str = "conduit-confidential";
pub const CONFIDENTIAL_SECRET: &str = "confidential-s3cret";

struct Code {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    resource: Option<String>,
}

#[derive(Default)]
struct Issued {
    clients: HashMap<String, Vec<String>>,
    codes: HashMap<String, Code>,
    access: HashMap<String, Instant>,
    /// Each live refresh token and the client it was issued to.
    refresh: HashMap<String, String>,
    counter: u64,
}

struct AuthState {
    origin: String,
    upstream: String,
    token_lifetime: Duration,
    /// Whether clients may register themselves (RFC 7591).
    registration: bool,
    client: reqwest::Client,
    issued: Mutex<Issued>,
    log: Mutex<Vec<String>>,
    /// The metadata names the attacker's endpoints (`/steal/...`) instead of the real
    /// ones: token, revocation.
    moved: Mutex<(bool, bool)>,
    /// The metadata answers 503 (an outage).
    down: Mutex<bool>,
    /// How long a refresh takes after its token is spent (a slow authorization server).
    refresh_delay: Mutex<Duration>,
}

impl AuthState {
    fn note(&self, event: impl Into<String>) {
        if let Ok(mut log) = self.log.lock() {
            log.push(event.into());
        }
    }

    fn next(&self, prefix: &str) -> String {
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        issued.counter += 1;
        format!(
            "{prefix}-{}-{}",
            issued.counter,
            uuid::Uuid::new_v4().simple()
        )
    }
}

/// The running server; it stops when dropped.
pub struct OAuthServer {
    pub addr: SocketAddr,
    state: Arc<AuthState>,
    task: tokio::task::JoinHandle<()>,
}

impl OAuthServer {
    /// Serves on a loopback port, `/mcp` forwarding to `upstream` (e.g.
    /// `http://127.0.0.1:3001`) for valid tokens, which live `token_lifetime`.
    pub async fn start(upstream: &str, token_lifetime: Duration) -> anyhow::Result<Self> {
        Self::start_with(upstream, token_lifetime, true).await
    }

    /// As [`OAuthServer::start`], but without dynamic registration: only the client
    /// [`PREREGISTERED_CLIENT`] (any loopback redirect) is known.
    pub async fn without_registration(
        upstream: &str,
        token_lifetime: Duration,
    ) -> anyhow::Result<Self> {
        Self::start_with(upstream, token_lifetime, false).await
    }

    async fn start_with(
        upstream: &str,
        token_lifetime: Duration,
        registration: bool,
    ) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(AuthState {
            origin: format!("http://127.0.0.1:{}", addr.port()),
            upstream: upstream.trim_end_matches('/').to_owned(),
            token_lifetime,
            registration,
            client: reqwest::Client::new(),
            issued: Mutex::new(Issued::default()),
            log: Mutex::new(Vec::new()),
            moved: Mutex::new((false, false)),
            down: Mutex::new(false),
            refresh_delay: Mutex::new(Duration::ZERO),
        });
        let app = Router::new()
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                get(resource_metadata),
            )
            .route(
                "/.well-known/oauth-protected-resource",
                get(resource_metadata),
            )
            .route(
                "/.well-known/oauth-authorization-server",
                get(server_metadata),
            )
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/revoke", post(revoke))
            .route("/steal/{what}", post(steal))
            .fallback(mcp)
            .with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, state, task })
    }

    /// The MCP endpoint's URL.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.state.origin)
    }

    /// What happened, in order: `register`, `authorize`, `token:authorization_code`,
    /// `token:refresh_token` (`token:refresh_token:unknown` for one spent or never issued),
    /// `revoke:<hint>`, `mcp:401`, `mcp:ok`.
    pub fn log(&self) -> Vec<String> {
        self.state.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// How many times `event` happened.
    pub fn count(&self, event: &str) -> usize {
        self.log().iter().filter(|e| *e == event).count()
    }

    /// From now on the metadata names other endpoints (as a hostile server would, to be
    /// sent the tokens): for the token endpoint, for revocation, or both. What reaches
    /// them is logged as `steal:<endpoint>:<what the form carried>`.
    pub fn move_endpoints(&self, token: bool, revocation: bool) {
        *self.state.moved.lock().unwrap_or_else(|e| e.into_inner()) = (token, revocation);
    }

    /// From now on (or no longer) the metadata documents answer 503, as in an outage.
    pub fn metadata_down(&self, down: bool) {
        *self.state.down.lock().unwrap_or_else(|e| e.into_inner()) = down;
    }

    /// From now on a refresh answers `delay` after it spent the refresh token, so two
    /// clients refreshing at once overlap.
    pub fn slow_refreshes(&self, delay: Duration) {
        *self
            .state
            .refresh_delay
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = delay;
    }

    /// Whether any token is still valid (none after a revocation of all of them).
    pub fn live_tokens(&self) -> usize {
        let issued = self.state.issued.lock().unwrap_or_else(|e| e.into_inner());
        issued.access.len() + issued.refresh.len()
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn is_down(state: &AuthState) -> bool {
    *state.down.lock().unwrap_or_else(|e| e.into_inner())
}

async fn resource_metadata(State(state): State<Arc<AuthState>>) -> Response {
    if is_down(&state) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    axum::Json(json!({
        "resource": format!("{}/mcp", state.origin),
        "authorization_servers": [state.origin],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
    }))
    .into_response()
}

async fn server_metadata(State(state): State<Arc<AuthState>>) -> Response {
    if is_down(&state) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let origin = &state.origin;
    let (token_moved, revocation_moved) = *state.moved.lock().unwrap_or_else(|e| e.into_inner());
    let token = if token_moved { "steal/token" } else { "token" };
    let revocation = if revocation_moved {
        "steal/revoke"
    } else {
        "revoke"
    };
    let mut metadata = json!({
        "issuer": origin,
        "authorization_endpoint": format!("{origin}/authorize"),
        "token_endpoint": format!("{origin}/{token}"),
        "registration_endpoint": format!("{origin}/register"),
        "revocation_endpoint": format!("{origin}/{revocation}"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": [SCOPE],
        "authorization_response_iss_parameter_supported": true,
    });
    if !state.registration
        && let Some(fields) = metadata.as_object_mut()
    {
        fields.remove("registration_endpoint");
    }
    axum::Json(metadata).into_response()
}

fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

async fn register(State(state): State<Arc<AuthState>>, body: Bytes) -> Response {
    if !state.registration {
        return StatusCode::NOT_FOUND.into_response();
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_client_metadata",
            "not JSON",
        );
    };
    let redirect_uris: Vec<String> = request["redirect_uris"]
        .as_array()
        .map(|uris| {
            uris.iter()
                .filter_map(|u| u.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if redirect_uris.is_empty()
        || !redirect_uris
            .iter()
            .all(|u| u.starts_with("http://127.0.0.1:") || u.starts_with("http://localhost:"))
    {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_redirect_uri",
            "a native client redirects to loopback",
        );
    }
    let client_id = state.next("client");
    state
        .issued
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clients
        .insert(client_id.clone(), redirect_uris.clone());
    state.note("register");
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "client_id": client_id,
            "redirect_uris": redirect_uris,
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "client_name": request["client_name"],
        })),
    )
        .into_response()
}

async fn authorize(
    State(state): State<Arc<AuthState>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let field = |name: &str| query.get(name).cloned().unwrap_or_default();
    let (client_id, redirect_uri) = (field("client_id"), field("redirect_uri"));
    let loopback = redirect_uri.starts_with("http://127.0.0.1:");
    let known = ([PREREGISTERED_CLIENT, CONFIDENTIAL_CLIENT].contains(&client_id.as_str())
        && loopback)
        || state
            .issued
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clients
            .get(&client_id)
            .is_some_and(|uris| uris.contains(&redirect_uri));
    if !known {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "unknown client or redirect URI",
        );
    }
    if field("response_type") != "code" || field("code_challenge_method") != "S256" {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "code flow with PKCE S256 only",
        );
    }
    let code = state.next("code");
    state
        .issued
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .codes
        .insert(
            code.clone(),
            Code {
                client_id,
                redirect_uri: redirect_uri.clone(),
                challenge: field("code_challenge"),
                resource: query.get("resource").cloned(),
            },
        );
    state.note("authorize");
    let mut target = match reqwest::Url::parse(&redirect_uri) {
        Ok(url) => url,
        Err(_) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "bad redirect URI",
            );
        }
    };
    target
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &field("state"))
        .append_pair("iss", &state.origin);
    Response::builder()
        .status(StatusCode::FOUND)
        .header("location", target.as_str())
        .body(Body::empty())
        .unwrap_or_default()
}

fn tokens(state: &AuthState, client_id: String) -> Value {
    let access = state.next("access");
    let refresh = state.next("refresh");
    let mut issued = state.issued.lock().unwrap_or_else(|e| e.into_inner());
    issued
        .access
        .insert(access.clone(), Instant::now() + state.token_lifetime);
    issued.refresh.insert(refresh.clone(), client_id);
    json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": state.token_lifetime.as_secs(),
        "refresh_token": refresh,
        "scope": SCOPE,
    })
}

/// The client a token request comes from, as HTTP Basic (RFC 6749 §2.3.1) or the form
/// names it, and whether it proved itself: the confidential client only with its secret.
fn client_of(headers: &HeaderMap, form: &HashMap<String, String>) -> (String, bool) {
    let basic = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Basic "))
        .and_then(|encoded| {
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()
        })
        .and_then(|decoded| String::from_utf8(decoded).ok())
        .and_then(|pair| {
            pair.split_once(':')
                .map(|(id, secret)| (id.to_owned(), Some(secret.to_owned())))
        });
    let (id, secret) = basic.unwrap_or_else(|| {
        (
            form.get("client_id").cloned().unwrap_or_default(),
            form.get("client_secret").cloned(),
        )
    });
    let proven = id != CONFIDENTIAL_CLIENT || secret.as_deref() == Some(CONFIDENTIAL_SECRET);
    (id, proven)
}

async fn token(State(state): State<Arc<AuthState>>, headers: HeaderMap, body: Bytes) -> Response {
    let form: HashMap<String, String> = url_form(&body);
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    let (client_id, proven) = client_of(&headers, &form);
    if !proven {
        state.note("token:invalid_client");
        return oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "the client's secret is missing or wrong",
        );
    }
    match field("grant_type").as_str() {
        "authorization_code" => {
            let Some(code) = state
                .issued
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .codes
                .remove(&field("code"))
            else {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", "unknown code");
            };
            let verifier = field("code_verifier");
            let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(sha2::Sha256::digest(verifier.as_bytes()));
            if computed != code.challenge
                || code.client_id != client_id
                || code.redirect_uri != field("redirect_uri")
            {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "PKCE, client or redirect mismatch",
                );
            }
            if code.resource.as_deref() != Some(&format!("{}/mcp", state.origin)) {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_target",
                    "resource must name the MCP server",
                );
            }
            state.note("token:authorization_code");
            axum::Json(tokens(&state, client_id)).into_response()
        }
        "refresh_token" => {
            let issued_to = state
                .issued
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .refresh
                .remove(&field("refresh_token"));
            if issued_to.as_deref() != Some(client_id.as_str()) {
                state.note("token:refresh_token:unknown");
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "unknown refresh token",
                );
            }
            state.note("token:refresh_token");
            let delay = *state
                .refresh_delay
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            tokio::time::sleep(delay).await;
            axum::Json(tokens(&state, client_id)).into_response()
        }
        other => oauth_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            &format!("not {other}"),
        ),
    }
}

async fn revoke(State(state): State<Arc<AuthState>>, body: Bytes) -> Response {
    let form = url_form(&body);
    let token = form.get("token").cloned().unwrap_or_default();
    {
        let mut issued = state.issued.lock().unwrap_or_else(|e| e.into_inner());
        issued.access.remove(&token);
        issued.refresh.remove(&token);
    }
    state.note(format!(
        "revoke:{}",
        form.get("token_type_hint").cloned().unwrap_or_default()
    ));
    StatusCode::OK.into_response()
}

/// An endpoint the metadata names once it is moved: notes what it was sent.
async fn steal(
    State(state): State<Arc<AuthState>>,
    axum::extract::Path(what): axum::extract::Path<String>,
    body: Bytes,
) -> Response {
    let form = url_form(&body);
    let mut carried: Vec<&str> = ["refresh_token", "token", "code"]
        .into_iter()
        .filter(|field| form.contains_key(*field))
        .collect();
    carried.sort_unstable();
    state.note(format!("steal:{what}:{}", carried.join(",")));
    StatusCode::BAD_REQUEST.into_response()
}

fn url_form(body: &[u8]) -> HashMap<String, String> {
    let text = String::from_utf8_lossy(body);
    reqwest::Url::parse(&format!("http://x/?{text}"))
        .map(|url| url.query_pairs().into_owned().collect())
        .unwrap_or_default()
}

async fn mcp(
    State(state): State<Arc<AuthState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    let valid = state
        .issued
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .access
        .get(&token)
        .is_some_and(|expiry| Instant::now() < *expiry);
    if !valid {
        state.note("mcp:401");
        let challenge = format!(
            "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\", scope=\"{SCOPE}\"",
            state.origin
        );
        return Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header("www-authenticate", challenge)
            .body(Body::from("sign in first"))
            .unwrap_or_default();
    }
    state.note("mcp:ok");
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut request = state
        .client
        .request(method, format!("{}{path}", state.upstream))
        .body(body);
    for (name, value) in &headers {
        if name != "host" && name != "content-length" && name != "authorization" {
            request = request.header(name, value);
        }
    }
    let upstream = match request.send().await {
        Ok(response) => response,
        Err(err) => {
            return Response::builder()
                .status(StatusCode::BAD_GATEWAY)
                .body(Body::from(err.to_string()))
                .unwrap_or_default();
        }
    };
    let mut builder = Response::builder().status(upstream.status().as_u16());
    for (name, value) in upstream.headers() {
        if name != "content-length" && name != "transfer-encoding" {
            builder = builder.header(name.as_str(), value.as_bytes());
        }
    }
    let stream = upstream
        .bytes_stream()
        .map(|chunk| chunk.map_err(std::io::Error::other));
    builder.body(Body::from_stream(stream)).unwrap_or_default()
}

/// A directory holding a stand-in `xdg-open` that plays the user's browser: it notes
/// each URL it was given in `opened.txt` and, once the file `go` exists in the directory
/// (at once when `go` is true; [`consent`] makes it later, so a test can look at the
/// waiting state), follows the authorization page's redirects back to Conduit's loopback
/// listener. Put it first on `PATH`.
pub fn browser_dir(root: &std::path::Path, go: bool) -> anyhow::Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let dir = root.join("browser");
    std::fs::create_dir_all(&dir)?;
    if go {
        consent(&dir)?;
    }
    let script = dir.join("xdg-open");
    let (opened, gate) = (dir.join("opened.txt"), dir.join("go"));
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$1\" >> '{opened}'\n(\n  n=0\n  while [ ! -e '{gate}' ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done\n  curl -sSL --max-time 20 -o /dev/null \"$1\" >/dev/null 2>&1\n) &\nexit 0\n",
            opened = opened.display(),
            gate = gate.display()
        ),
    )?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// Lets the stand-in browser of `dir` go on to the authorization page (the user consents).
pub fn consent(dir: &std::path::Path) -> anyhow::Result<()> {
    std::fs::write(dir.join("go"), b"")?;
    Ok(())
}

/// `PATH` with `dir` first.
pub fn path_with(dir: &std::path::Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    if let Some(path) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(paths).unwrap_or_default()
}
