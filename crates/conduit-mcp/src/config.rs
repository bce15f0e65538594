//! The `mcpServers` file in Claude Desktop's format: read without losing anything, each
//! server checked on its own, `${VAR}` expanded, and written atomically with a backup,
//! never over a change made since it was read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

/// The key that holds the servers.
const SERVERS: &str = "mcpServers";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not valid JSON (line {line}, column {column}): {message}. The file was left as it is."
    )]
    Parse {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path} must hold a JSON object with an \"mcpServers\" object")]
    Shape { path: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} changed on disk since it was read; nothing was written. Read it again and redo the change."
    )]
    Conflict { path: String },
    #[error("there is no server named {0:?}")]
    UnknownServer(String),
    #[error("a server named {0:?} exists already")]
    DuplicateServer(String),
    #[error("server {server:?}: {message}")]
    InvalidServer { server: String, message: String },
    #[error(
        "{path} holds the number {number}, which a change made here would write back as another number (JSON numbers past 64 bits, and decimals a double does not hold exactly, are read approximately); nothing was written. Change the file as text (Settings' text editor or any editor)."
    )]
    InexactNumber { path: String, number: String },
    #[error(
        "{path} would hold {kib} KiB, more than the {max_kib} KiB Conduit reads; nothing was written",
        kib = bytes.div_ceil(1024),
        max_kib = MAX_FILE_BYTES / 1024
    )]
    TooLarge { path: String, bytes: usize },
}

impl ConfigError {
    pub fn read(path: &Path, source: std::io::Error) -> Self {
        Self::Read {
            path: path.display().to_string(),
            source,
        }
    }

    pub fn write(path: &Path, source: std::io::Error) -> Self {
        Self::Write {
            path: path.display().to_string(),
            source,
        }
    }
}

/// How Conduit reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// Which of the two ways in [`Transport`] an entry names, before anything else in it is
/// checked: what a form shows for the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, ts_rs::TS)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    Stdio,
    Http,
}

impl TransportKind {
    /// The transport a `type` names, in any app's spelling (`sse`, `streamable-http`,
    /// `streamableHttp` are HTTP); `None` for a type Conduit does not know. The one
    /// alias table: the parser and the window both read it.
    pub fn of_type(name: &str) -> Option<Self> {
        match name {
            "stdio" => Some(Self::Stdio),
            "http" | "streamable-http" | "streamableHttp" | "sse" => Some(Self::Http),
            _ => None,
        }
    }

    /// The transport of an entry as written: its `type`, else stdio when it has a
    /// `command` and HTTP when it has only a `url`; `None` when it names none.
    pub fn of_entry(raw: &Value) -> Option<Self> {
        let object = raw.as_object()?;
        if let Some(name) = object.get("type").and_then(Value::as_str) {
            return Self::of_type(name);
        }
        match (object.get("command"), object.get("url")) {
            (Some(_), _) => Some(Self::Stdio),
            (None, Some(_)) => Some(Self::Http),
            (None, None) => None,
        }
    }
}

/// One server as the file describes it, checked and with `${VAR}` expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    pub transport: Transport,
    /// Per-call timeout (`timeout`, in seconds or milliseconds as the file says).
    pub timeout: Option<Duration>,
    /// The protocol era to speak (`protocolVersion`); found out per server by default.
    pub era: ProtocolEra,
    /// How to sign in to an HTTP server that asks for OAuth (`oauth`).
    pub oauth: crate::oauth::SignInSettings,
    /// The folders offered to the server as roots (`roots`: absolute or `~/`); `None`
    /// when the entry has none, and then roots are not declared.
    pub roots: Option<Vec<PathBuf>>,
    /// Hides what must not leave the crate: the `${VAR}` values, header values and the
    /// URL's query and user info.
    pub secrets: crate::redact::Redactor,
    /// The entry says `"type": "sse"`: the server is reached first over MCP's legacy
    /// HTTP+SSE transport (2024-11-05), then over Streamable HTTP if it serves no
    /// event stream. Any other HTTP entry tries them the other way round.
    pub legacy_sse: bool,
}

impl ServerSpec {
    /// Whether the entry gives its own `Authorization` header: the user's way in, where
    /// OAuth's sign-in would not help when the server refuses it.
    pub fn sends_its_own_authorization(&self) -> bool {
        match &self.transport {
            Transport::Http { headers, .. } => headers
                .keys()
                .any(|name| name.eq_ignore_ascii_case("authorization")),
            Transport::Stdio { .. } => false,
        }
    }
}

/// Which era of the MCP protocol Conduit speaks with a server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ProtocolEra {
    /// Ask with `server/discover` (2026-07-28); a server that does not know it gets the
    /// `initialize` handshake (2025-11-25) instead.
    #[default]
    Auto,
    /// 2026-07-28: stateless, no handshake (`"protocolVersion": "2026-07-28"`).
    Stateless,
    /// 2025-11-25 and before: the `initialize` handshake (`"protocolVersion": "2025-11-25"`).
    Initialize,
}

impl ProtocolEra {
    /// The era a file's `protocolVersion` value pins.
    pub fn from_file(value: &str) -> Option<Self> {
        match value {
            "auto" => Some(Self::Auto),
            "2026-07-28" => Some(Self::Stateless),
            "2025-11-25" | "2025-06-18" | "2025-03-26" | "2024-11-05" => Some(Self::Initialize),
            _ => None,
        }
    }
}

/// One entry of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerEntry {
    pub name: String,
    pub disabled: bool,
    /// The entry as written, unknown fields included.
    pub raw: Value,
    /// The checked spec, or why the entry cannot start (naming what is wrong).
    pub spec: Result<ServerSpec, String>,
}

/// The file as read: its servers in order, the whole document, and its fingerprint.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub path: PathBuf,
    pub servers: Vec<ServerEntry>,
    document: Value,
    /// The file's text, without a byte order mark: edits are made in it, so what they do
    /// not change keeps the user's layout. `None` when the file does not exist.
    text: Option<String>,
    /// `None` when the file does not exist.
    fingerprint: Option<String>,
    /// The numbers in the file that writing `document` back would change, as written and
    /// as read.
    inexact_numbers: Vec<(String, serde_json::Number)>,
}

impl Snapshot {
    pub fn server(&self, name: &str) -> Option<&ServerEntry> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// Names this version of the file (`None`: there was no file), so a window can say
    /// which version its change is based on.
    pub fn version(&self) -> Option<&str> {
        self.fingerprint.as_deref()
    }

    /// Whether the file on disk is still the one this snapshot read.
    pub fn is_current(&self) -> Result<bool, ConfigError> {
        let now =
            conduit_files::fingerprint(&self.path).map_err(|e| ConfigError::read(&self.path, e))?;
        Ok(now == self.fingerprint)
    }
}

/// The most bytes the `mcpServers` file may hold: real ones are a few KiB, and the file is
/// read whole on every change and sent, masked, to Settings.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Whether `url` names this machine: `localhost` and any name under it, a loopback
/// address (all of 127/8, `::1`) or the unspecified one (`0.0.0.0`, `::`, which reach this
/// machine too), in any case. A server there may reach this machine's services, and use
/// http with them; one elsewhere may not. A public name that resolves here cannot be told
/// by its name.
pub fn url_on_this_machine(url: &str) -> bool {
    match reqwest::Url::parse(url)
        .ok()
        .as_ref()
        .and_then(reqwest::Url::host)
    {
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.');
            name.eq_ignore_ascii_case("localhost")
                || name.to_ascii_lowercase().ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_unspecified(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback() || ip.is_unspecified(),
        None => false,
    }
}

/// Whether `url` names the local network: a private, shared (100.64/10) or link-local
/// IPv4 address, a unique-local or link-local IPv6 one, or a name only a local resolver
/// answers (one label, or under `.local`, `.lan`, `.internal`, `.home.arpa`,
/// `.localdomain`). A router's or a NAS's console, a printer.
pub fn url_on_local_network(url: &str) -> bool {
    match reqwest::Url::parse(url)
        .ok()
        .as_ref()
        .and_then(reqwest::Url::host)
    {
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            !name.contains('.')
                || [".local", ".lan", ".internal", ".home.arpa", ".localdomain"]
                    .iter()
                    .any(|suffix| name.ends_with(suffix))
        }
        Some(url::Host::Ipv4(ip)) => {
            let [a, b, ..] = ip.octets();
            ip.is_private() || ip.is_link_local() || (a == 100 && (64..128).contains(&b))
        }
        Some(url::Host::Ipv6(ip)) => {
            let first = ip.segments()[0];
            (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80
        }
        None => false,
    }
}

/// The file's bytes, if it is a regular file of at most [`MAX_FILE_BYTES`].
pub fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    conduit_files::read_regular_file(path, MAX_FILE_BYTES)
}

/// Reads the file with the process environment for `${VAR}`. A missing file has no servers.
pub fn read(path: &Path) -> Result<Snapshot, ConfigError> {
    read_with(path, &|name| std::env::var(name).ok())
}

/// Reads the file, expanding `${VAR}` through `env`.
pub fn read_with(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Snapshot, ConfigError> {
    let bytes = match read_file(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Snapshot {
                path: path.to_owned(),
                servers: Vec::new(),
                document: Value::Object(Map::new()),
                text: None,
                fingerprint: None,
                inexact_numbers: Vec::new(),
            });
        }
        Err(e) => return Err(ConfigError::read(path, e)),
    };
    snapshot_of(path, &bytes, env)
}

/// The snapshot of the file at `path` whose contents are `bytes` (already read).
pub fn snapshot_of(
    path: &Path,
    bytes: &[u8],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Snapshot, ConfigError> {
    let document = parse(path, bytes)?;
    let servers = entries(&document, env);
    Ok(Snapshot {
        path: path.to_owned(),
        servers,
        document,
        // It parsed, so it is UTF-8.
        text: std::str::from_utf8(without_bom(bytes))
            .ok()
            .map(str::to_owned),
        fingerprint: Some(conduit_files::fingerprint_bytes(bytes)),
        inexact_numbers: std::str::from_utf8(without_bom(bytes))
            .map(numbers::inexact)
            .unwrap_or_default(),
    })
}

/// `bytes` without a leading UTF-8 byte order mark: an editor (Notepad) may write one,
/// and JSON parsers refuse it at line 1, column 1, where the raw editor cannot show it.
fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

/// [`without_bom`] for text.
fn without_bom_text(text: &str) -> &str {
    text.strip_prefix('\u{FEFF}').unwrap_or(text)
}

fn parse(path: &Path, bytes: &[u8]) -> Result<Value, ConfigError> {
    let unique::UniqueKeys(document) =
        serde_json::from_slice(without_bom(bytes)).map_err(|e| ConfigError::Parse {
            path: path.display().to_string(),
            line: e.line(),
            column: e.column(),
            message: conduit_files::json_error_message(&e),
        })?;
    let shape_ok = match &document {
        Value::Object(map) => map.get(SERVERS).is_none_or(Value::is_object),
        _ => false,
    };
    if !shape_ok {
        return Err(ConfigError::Shape {
            path: path.display().to_string(),
        });
    }
    Ok(document)
}

fn entries(document: &Value, env: &dyn Fn(&str) -> Option<String>) -> Vec<ServerEntry> {
    let Some(servers) = document.get(SERVERS).and_then(Value::as_object) else {
        return Vec::new();
    };
    servers
        .iter()
        .map(|(name, raw)| ServerEntry {
            name: name.clone(),
            disabled: raw
                .get("disabled")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            raw: raw.clone(),
            spec: spec_of(raw, env),
        })
        .collect()
}

/// The longest `timeout` an entry may give.
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// Checks one entry and expands `${VAR}` in `env`, `url` and `headers`.
pub fn spec_of(raw: &Value, env: &dyn Fn(&str) -> Option<String>) -> Result<ServerSpec, String> {
    let home = env("HOME").map(PathBuf::from);
    // Every value a `${VAR}` brings in is a secret; messages use the template instead.
    let expanded = std::cell::RefCell::new(Vec::new());
    let recording = |name: &str| {
        let value = env(name);
        if let (Some(value), Ok(mut seen)) = (&value, expanded.try_borrow_mut()) {
            seen.push(value.clone());
        }
        value
    };
    let env: &dyn Fn(&str) -> Option<String> = &recording;
    let object = raw.as_object().ok_or("the entry must be a JSON object")?;
    let strings = |key: &str| -> Result<BTreeMap<String, String>, String> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((
                        k.clone(),
                        expand(s, env).map_err(|error| format!("{key}.{k} {error}"))?,
                    )),
                    _ => Err(format!("{key}.{k} must be a string")),
                })
                .collect(),
            Some(_) => Err(format!("{key} must be an object of strings")),
        }
    };
    let timeout = match object.get("timeout") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => {
            let value = n
                .as_f64()
                .filter(|v| *v > 0.0)
                .ok_or("timeout must be a positive number")?;
            // Claude Desktop-style files give seconds; values over 1000 are milliseconds.
            let seconds = if value > 1000.0 {
                value / 1000.0
            } else {
                value
            };
            // Longer than a day is a mistake, and too long for the clock a call's
            // deadline is counted on.
            if seconds > MAX_TIMEOUT.as_secs_f64() {
                return Err("timeout is too large: at most a day (86400 seconds)".into());
            }
            Some(Duration::from_secs_f64(seconds))
        }
        Some(_) => return Err("timeout must be a number".into()),
    };
    let era = match object.get("protocolVersion") {
        None | Some(Value::Null) => ProtocolEra::Auto,
        Some(Value::String(value)) => ProtocolEra::from_file(value).ok_or_else(|| {
            format!(
                "protocolVersion {value:?} is not one Conduit speaks (\"auto\", \"2026-07-28\", \"2025-11-25\")"
            )
        })?,
        Some(_) => return Err("protocolVersion must be a string".into()),
    };
    let roots = match object.get("roots") {
        None | Some(Value::Null) => None,
        Some(roots) => Some(crate::sampling::roots_of(roots, home.as_deref())?),
    };
    let transport_type = object.get("type").and_then(Value::as_str);
    let kind = match transport_type {
        None => None,
        Some(name) => Some(
            TransportKind::of_type(name)
                .ok_or_else(|| format!("type {name:?} is not one Conduit knows (stdio, http)"))?,
        ),
    };
    let url = object.get("url");
    let command = object.get("command");
    let transport = match (kind, command, url) {
        (Some(TransportKind::Stdio) | None, Some(command), _) => {
            let command = command
                .as_str()
                .filter(|c| !c.trim().is_empty())
                .ok_or("command must be a non-empty string")?;
            let args = match object.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|a| a.as_str().map(str::to_owned).ok_or("args must be strings"))
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err("args must be an array of strings".into()),
            };
            let cwd = match object.get("cwd") {
                None | Some(Value::Null) => None,
                Some(Value::String(dir)) => Some(PathBuf::from(dir)),
                Some(_) => return Err("cwd must be a string".into()),
            };
            Transport::Stdio {
                command: command.to_owned(),
                args,
                env: strings("env")?,
                cwd,
            }
        }
        (Some(TransportKind::Http) | None, None, Some(url)) => {
            let template = url.as_str().ok_or("url must be a string")?;
            let url = expand(template, env).map_err(|error| format!("url {error}"))?;
            // The URL is not quoted: one without a scheme Conduit knows may hold a key
            // where the redactor does not look for one.
            if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 10 {
                return Err("url must be an http:// or https:// URL".into());
            }
            // A URL parser drops tabs and line breaks, so what a question shows and where
            // Conduit connects could differ.
            if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err("url must not contain spaces, tabs or line breaks".into());
            }
            // A URL parser reads a backslash as a slash: `https://evil.example\@host/`
            // leads to evil.example, though it reads as a user name before `host`.
            if url.contains('\\') {
                return Err("url must not contain a backslash (write / instead)".into());
            }
            Transport::Http {
                url,
                headers: strings("headers")?,
            }
        }
        _ => return Err("the entry needs a command (stdio) or a url (http)".into()),
    };
    let mut oauth = crate::oauth::SignInSettings::from_entry(object.get("oauth"))?;
    if object.get("oauth").is_some_and(|v| !v.is_null())
        && !matches!(transport, Transport::Http { .. })
    {
        return Err("oauth is for servers reached over http".into());
    }
    if let Some(secret) = &oauth.client_secret {
        oauth.client_secret =
            Some(expand(secret, env).map_err(|error| format!("oauth.clientSecret {error}"))?);
    }
    let mut secrets = expanded.take();
    // Named as secrets: hidden in what the server answers too, whatever they look like.
    let mut named: Vec<String> = oauth.client_secret.iter().cloned().collect();
    match &transport {
        Transport::Http { url, headers } => {
            secrets.extend(headers.values().cloned());
            secrets.extend(url_secrets(url));
            named.extend(secret_named(headers));
            named.extend(
                reqwest::Url::parse(url)
                    .ok()
                    .and_then(|u| u.password().map(str::to_owned)),
            );
        }
        // Keys are most often written straight into `env` (Claude Desktop's own examples).
        Transport::Stdio { env, .. } => {
            secrets.extend(env.values().cloned());
            named.extend(secret_named(env));
        }
    }
    Ok(ServerSpec {
        transport,
        timeout,
        era,
        oauth,
        roots,
        secrets: crate::redact::Redactor::new(secrets).with_named_secrets(named),
        legacy_sse: matches!(transport_type, Some("sse")),
    })
}

/// The values of `variables` (an entry's `env` or headers) whose names say they are
/// secrets: a word of the name (split at `_` and `-`) is `KEY`, `APIKEY`, `TOKEN`,
/// `SECRET`, `PASSWORD`, `PASS`, `AUTH`, `AUTHORIZATION`, `CREDENTIAL(S)`, `COOKIE`,
/// `SESSION`, `PRIVATE` or `PAT`, or ends in `KEY`, `TOKEN` or `SECRET` (`ACCESSTOKEN`).
/// Whole words, so `MAX_TOKENS`, `GIT_AUTHOR_NAME` or `KEYWORDS` are not; and a number
/// or `true`/`false` is no secret whatever its name.
fn secret_named(variables: &std::collections::BTreeMap<String, String>) -> Vec<String> {
    variables
        .iter()
        .filter(|(name, value)| is_secret_variable(name, value))
        .map(|(_, value)| value.clone())
        .collect()
}

/// Whether a variable's (or header's) value is a secret by its name, as
/// [`secret_named`] decides: what a question the user answers shows only by name.
pub fn is_secret_variable(name: &str, value: &str) -> bool {
    const WORDS: [&str; 15] = [
        "KEY",
        "APIKEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "AUTH",
        "AUTHORIZATION",
        "CREDENTIAL",
        "CREDENTIALS",
        "COOKIE",
        "SESSION",
        "PRIVATE",
        "PAT",
    ];
    let named = |name: &str| {
        name.to_ascii_uppercase().split(['_', '-']).any(|word| {
            WORDS.contains(&word)
                || ["KEY", "TOKEN", "SECRET"]
                    .iter()
                    .any(|end| word.len() > end.len() && word.ends_with(end))
        })
    };
    let plain = |value: &str| {
        let value = value.trim();
        value.parse::<f64>().is_ok()
            || value.eq_ignore_ascii_case("true")
            || value.eq_ignore_ascii_case("false")
    };
    named(name) && !plain(value)
}

pub use conduit_net::{is_secret_path_segment, url_secrets};

/// What a `${NAME}` is taken to be when an entry's shape is checked before a write, where
/// the values do not matter (the runtime fills in the real ones): a URL, so that an entry
/// whose `url` is a variable (`"${REMOTE_URL}"`, `"${BASE}/mcp"`) is not refused as no URL,
/// and for `HOME` (which roots written `~/…` are read against) an absolute folder.
fn shape_only(name: &str) -> Option<String> {
    Some(if name == "HOME" {
        "/home/user".to_owned()
    } else {
        "https://variable.invalid".to_owned()
    })
}

/// The names of the variables `text` takes values from (`${NAME}`), in order: what
/// [`expand`] would fill in.
pub fn variables_in(text: &str) -> Vec<String> {
    let names = std::cell::RefCell::new(Vec::new());
    let _ = expand(text, &|name| {
        names.borrow_mut().push(name.to_owned());
        Some(String::new())
    });
    names.into_inner()
}

/// The longest a value may grow to once its `${NAME}`s are filled in: a file of a
/// mebibyte repeating a long variable would otherwise expand to hundreds of megabytes,
/// each a secret to look for in every log line.
pub const MAX_EXPANDED: usize = 64 * 1024;

/// Why a value's `${NAME}`s could not be filled in; said after the value's place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("uses ${{{0}}}, which is not set")]
    Unset(String),
    #[error("is longer than {} KiB once its variables are filled in", MAX_EXPANDED / 1024)]
    TooLong,
}

/// Replaces each `${NAME}` with its value; the first unset name is the error, and so is a
/// value that grows past [`MAX_EXPANDED`].
pub fn expand(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len().min(MAX_EXPANDED));
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let name = &after[..end];
        let value = env(name).ok_or_else(|| ExpandError::Unset(name.to_owned()))?;
        if out.len() + value.len() > MAX_EXPANDED {
            return Err(ExpandError::TooLong);
        }
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The document `text` holds, read exactly as the runtime reads the file (a leading byte
/// order mark skipped, a key written twice refused, `mcpServers` an object): what the host
/// decides about a text must be what will run from it.
pub fn document_of_text(text: &str) -> Result<Value, ConfigError> {
    let path = Path::new("the text");
    fits(path, text)?;
    parse(path, text.as_bytes())
}

/// Refuses a text for the file that Conduit would not read back (past [`MAX_FILE_BYTES`]):
/// written, it would leave no server running and Settings unable to show or mend it.
fn fits(path: &Path, text: &str) -> Result<(), ConfigError> {
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(ConfigError::TooLarge {
            path: path.display().to_string(),
            bytes: text.len(),
        });
    }
    Ok(())
}

/// Checks text for the raw editor as it is typed: the error a save would give, if any.
pub fn check_text(path: &Path, text: &str) -> Result<(), ConfigError> {
    fits(path, text)?;
    let document = parse(path, text.as_bytes())?;
    for entry in entries(&document, &shape_only) {
        if let Err(message) = entry.spec {
            return Err(ConfigError::InvalidServer {
                server: entry.name,
                message,
            });
        }
    }
    Ok(())
}

/// A server found in another app's config file, and why it cannot be imported, if so.
#[derive(Debug, Clone, PartialEq, serde::Serialize, ts_rs::TS)]
pub struct ImportCandidate {
    pub name: String,
    #[ts(type = "Record<string, unknown>")]
    pub entry: Value,
    pub problem: Option<String>,
}

/// The servers in another app's MCP config: Claude Desktop's and Cursor's `mcpServers`,
/// VS Code's `servers` (`mcp.json`) or `mcp.servers` (`settings.json`), and Claude Code's
/// servers of each project (`projects.<folder>.mcpServers` in `~/.claude.json`, besides
/// its own `mcpServers`). A project's server whose name another server has is offered as
/// `name (folder)`, the folder's last part, or its whole path when that is taken too.
///
/// A server named twice in it is an error naming it (JSON keeps the last, so one would be
/// left out without a word), and a leading byte order mark (Notepad's) is skipped.
pub fn import_candidates(path: &Path, text: &str) -> Result<Vec<ImportCandidate>, ConfigError> {
    let unique::UniqueKeys(document) = serde_json::from_slice(without_bom(text.as_bytes()))
        .map_err(|e| ConfigError::Parse {
            path: path.display().to_string(),
            line: e.line(),
            column: e.column(),
            message: conduit_files::json_error_message(&e),
        })?;
    let places: [&[&str]; 3] = [&[SERVERS], &["servers"], &["mcp", "servers"]];
    let found = places.into_iter().find_map(|place| {
        let found = place
            .iter()
            .try_fold(&document, |value, key| value.get(key))?;
        Some((found.as_object()?, place))
    });
    let projects: Vec<(&String, &Map<String, Value>)> = document
        .get(CLAUDE_CODE_PROJECTS)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(folder, project)| Some((folder, project.get(SERVERS)?.as_object()?)))
        .collect();
    if found.is_none() && projects.is_empty() {
        return Err(ConfigError::Shape {
            path: path.display().to_string(),
        });
    }
    let env = |name: &str| std::env::var(name).ok().or(Some(String::new()));
    let candidate = |name: String,
                     entry: &Value,
                     inexact: &std::collections::HashMap<String, String>,
                     key: &str| {
        ImportCandidate {
            entry: entry.clone(),
            problem: spec_of(entry, &env).err().or_else(|| {
                inexact.get(key).map(|number| {
                    format!(
                        "its entry holds the number {number}, which Conduit would write as another number (past 64 bits, or a decimal a double does not hold exactly): copy it by hand"
                    )
                })
            }),
            name,
        }
    };
    let mut candidates = Vec::new();
    if let Some((servers, place)) = found {
        let inexact = numbers::inexact_in_entries(text, place);
        for (name, entry) in servers {
            candidates.push(candidate(name.clone(), entry, &inexact, name));
        }
    }
    for (folder, servers) in projects {
        let inexact =
            numbers::inexact_in_entries(text, &[CLAUDE_CODE_PROJECTS, folder.as_str(), SERVERS]);
        let last_part = Path::new(folder).file_name().map_or_else(
            || folder.clone(),
            |name| name.to_string_lossy().into_owned(),
        );
        for (name, entry) in servers {
            let taken = |wanted: &str| {
                candidates
                    .iter()
                    .any(|c: &ImportCandidate| c.name == wanted)
            };
            let shown = [
                name.clone(),
                format!("{name} ({last_part})"),
                format!("{name} ({folder})"),
            ]
            .into_iter()
            .find(|wanted| !taken(wanted));
            // Two entries of one project with one name are refused as written twice.
            let Some(shown) = shown else { continue };
            candidates.push(candidate(shown, entry, &inexact, name));
        }
    }
    Ok(candidates)
}

/// Where Claude Code keeps each project's settings, its servers among them.
const CLAUDE_CODE_PROJECTS: &str = "projects";

/// The places of servers in a config file too large to read whole (Claude Code's
/// `~/.claude.json` holds each project's history and often grows to tens of megabytes):
/// the file is read as it streams, everything but those places skipped unbuilt, and a
/// small text of just them is given back for [`import_candidates`], each entry exactly as
/// written. A byte order mark is skipped.
pub fn import_excerpt(reader: impl std::io::BufRead) -> Result<String, serde_json::Error> {
    use serde_json::value::RawValue;
    #[derive(serde::Deserialize)]
    struct Section {
        servers: Option<Box<RawValue>>,
    }
    #[derive(serde::Deserialize)]
    struct Project {
        #[serde(rename = "mcpServers")]
        mcp_servers: Option<Box<RawValue>>,
    }
    /// The projects in the order the file has them, a folder written twice refused (as
    /// [`import_candidates`] reads a file read whole: the same names for the same file).
    struct Projects(Vec<(String, Project)>);
    impl<'de> serde::Deserialize<'de> for Projects {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Projects;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an object of projects")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Projects, A::Error> {
                    let mut projects: Vec<(String, Project)> = Vec::new();
                    while let Some(folder) = map.next_key::<String>()? {
                        if projects.iter().any(|(seen, _)| *seen == folder) {
                            return Err(serde::de::Error::custom(format!(
                                "the project {folder:?} is written twice"
                            )));
                        }
                        projects.push((folder, map.next_value()?));
                    }
                    Ok(Projects(projects))
                }
            }
            deserializer.deserialize_map(Visit)
        }
    }
    #[derive(serde::Deserialize)]
    struct Places {
        #[serde(rename = "mcpServers")]
        mcp_servers: Option<Box<RawValue>>,
        servers: Option<Box<RawValue>>,
        mcp: Option<Section>,
        projects: Option<Projects>,
    }
    let mut reader = reader;
    if reader
        .fill_buf()
        .map_err(serde_json::Error::io)?
        .starts_with(b"\xEF\xBB\xBF")
    {
        reader.consume(3);
    }
    let places: Places = serde_json::from_reader(reader)?;
    let mut text = String::from("{");
    let mut field = |name: &str, value: &str| {
        if text.len() > 1 {
            text.push(',');
        }
        text.push_str(&Value::String(name.to_owned()).to_string());
        text.push(':');
        text.push_str(value);
    };
    if let Some(servers) = &places.mcp_servers {
        field(SERVERS, servers.get());
    }
    if let Some(servers) = &places.servers {
        field("servers", servers.get());
    }
    if let Some(servers) = places.mcp.as_ref().and_then(|mcp| mcp.servers.as_ref()) {
        field("mcp", &format!("{{\"servers\":{}}}", servers.get()));
    }
    let projects: Vec<String> = places
        .projects
        .iter()
        .flat_map(|projects| projects.0.iter())
        .filter_map(|(folder, project)| {
            let servers = project.mcp_servers.as_ref()?;
            Some(format!(
                "{}:{{\"mcpServers\":{}}}",
                Value::String(folder.clone()),
                servers.get()
            ))
        })
        .collect();
    if !projects.is_empty() {
        field(CLAUDE_CODE_PROJECTS, &format!("{{{}}}", projects.join(",")));
    }
    text.push('}');
    Ok(text)
}

/// A change to the file (the settings window sends these as they are).
#[derive(Debug, Clone, serde::Deserialize, ts_rs::TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Edit {
    Add {
        name: String,
        #[ts(type = "Record<string, unknown>")]
        entry: Value,
    },
    Update {
        name: String,
        #[ts(type = "Record<string, unknown>")]
        entry: Value,
    },
    Remove {
        name: String,
    },
    SetDisabled {
        name: String,
        disabled: bool,
    },
    /// The whole document, as the raw editor saves it.
    Replace {
        text: String,
    },
}

/// Checks an edit as [`apply`] would, without the file: an added or changed entry, or
/// the whole text that replaces the file. Callers that ask the user about an edit check
/// it first, so a yes is never followed by a refusal.
pub fn check_edit(path: &Path, edit: &Edit) -> Result<(), ConfigError> {
    match edit {
        Edit::Add { name, entry } | Edit::Update { name, entry } => {
            check_entry(name, entry, &shape_only)
        }
        Edit::Replace { text } => check_text(path, text),
        Edit::Remove { .. } | Edit::SetDisabled { .. } => Ok(()),
    }
}

/// Refuses `edits` on the file `snapshot` read when what they would write could not be
/// read back as written: larger than [`MAX_FILE_BYTES`], or changing a number in it (see
/// [`numbers::inexact`]: an integer past 64 bits is held as a double, which matters where
/// the edits rewrite it or the file's layout cannot be kept and the document is written
/// whole). Edits that change nothing write nothing and pass, as do edits that
/// take such a number out (the entry holding it removed). Callers that ask the user check
/// it first; [`apply_all`] refuses the same.
pub fn check_writable(snapshot: &Snapshot, edits: &[Edit]) -> Result<(), ConfigError> {
    let Some((text, document)) = planned(snapshot, edits.to_vec())? else {
        return Ok(());
    };
    fits(&snapshot.path, &text)?;
    kept_exactly(
        snapshot,
        &inexact_numbers(snapshot, edits),
        &document,
        &text,
    )
}

/// The numbers the document `edits` start from would hold approximately: those of the
/// last whole text they put in, or else of the file.
fn inexact_numbers(snapshot: &Snapshot, edits: &[Edit]) -> Vec<(String, serde_json::Number)> {
    let replaced = edits.iter().rev().find_map(|edit| match edit {
        Edit::Replace { text } => Some(text),
        _ => None,
    });
    match replaced {
        Some(text) => numbers::inexact(text),
        None => snapshot.inexact_numbers.clone(),
    }
}

/// Refuses `document`, to be written as `text`, if it holds one of the `inexact` numbers
/// as read in more places than `text` still spells such a number as it was written: at
/// least one of them would change. Counted, not looked for: with the same number in two
/// places, one rewritten must not pass because the other is kept. Text the edits left as
/// the file had it (see [`planned`]) keeps such numbers exactly.
fn kept_exactly(
    snapshot: &Snapshot,
    inexact: &[(String, serde_json::Number)],
    document: &Value,
    text: &str,
) -> Result<(), ConfigError> {
    let still_written = numbers::inexact(text);
    match inexact.iter().find(|(_, read)| {
        let kept = still_written
            .iter()
            .filter(|(spelled, kept)| {
                kept == read && inexact.iter().any(|(written, _)| written == spelled)
            })
            .count();
        numbers::times_held(document, read) > kept
    }) {
        Some((written, _)) => Err(ConfigError::InexactNumber {
            path: snapshot.path.display().to_string(),
            number: written.clone(),
        }),
        None => Ok(()),
    }
}

/// The text `edits` would write over the file `snapshot` read, and its document, checked;
/// `None` when they change nothing (a server switched to the state it has, a form saved
/// as it was): a write would take a backup's place for nothing.
///
/// The edits are made in the file's own text ([`layout::edited`]), so everything they do
/// not change stays as the user laid it out; that text is used only when it reads back as
/// exactly the document they make, and otherwise (or with no file yet) the document is
/// written whole, pretty-printed.
fn planned(snapshot: &Snapshot, edits: Vec<Edit>) -> Result<Option<(String, Value)>, ConfigError> {
    let path = &snapshot.path;
    let laid_out = snapshot
        .text
        .as_deref()
        .and_then(|original| layout::edited(original, &edits));
    let mut document = snapshot.document.clone();
    for edit in edits {
        apply_to(path, &mut document, edit)?;
    }
    if let Some(text) = laid_out {
        // Equal maps may differ in order; the servers' order is the order they show in.
        let servers_in_order = |document: &Value| {
            document
                .get(SERVERS)
                .and_then(Value::as_object)
                .map(|servers| servers.keys().cloned().collect::<Vec<_>>())
        };
        let same = |read: Value| {
            servers_in_order(&read) == servers_in_order(&document) && read == document
        };
        if parse(path, text.as_bytes()).is_ok_and(same) {
            let unchanged = snapshot.text.as_deref() == Some(text.as_str());
            return Ok((!unchanged).then_some((text, document)));
        }
        tracing::warn!(
            "an edit of the mcpServers file could not keep its layout; it is written whole"
        );
    }
    let pretty = |document: &Value| {
        serde_json::to_string_pretty(document)
            .map(|text| text + "\n")
            .map_err(|e| ConfigError::write(path, std::io::Error::other(e)))
    };
    let text = pretty(&document)?;
    // Compared as written, so a new order of the same keys is a change.
    Ok((text != pretty(&snapshot.document)?).then_some((text, document)))
}

/// Applies `edit` to the file `snapshot` read, if the file is unchanged since: validated,
/// written atomically (permissions kept, previous file as `.bak`), fields and order of
/// everything else kept. Returns the new snapshot.
pub fn apply(snapshot: &Snapshot, edit: Edit) -> Result<Snapshot, ConfigError> {
    apply_all(snapshot, vec![edit])
}

/// Applies `edits` in order as one write (an import of several entries is one version of
/// the file, and one backup), as [`apply`] does one. None is written if one is refused.
pub fn apply_all(snapshot: &Snapshot, edits: Vec<Edit>) -> Result<Snapshot, ConfigError> {
    let path = &snapshot.path;
    if !snapshot.is_current()? {
        return Err(ConfigError::Conflict {
            path: path.display().to_string(),
        });
    }
    let inexact = inexact_numbers(snapshot, &edits);
    let Some((text, document)) = planned(snapshot, edits)? else {
        return read(path);
    };
    fits(path, &text)?;
    kept_exactly(snapshot, &inexact, &document, &text)?;
    // The file is checked again as it is swapped out: an editor's save since the check
    // above is kept, and this write refused.
    write_if_unchanged(path, &text, snapshot.version())?;
    read(path)
}

/// Writes `text` over the file if it is still the `version` read (see
/// [`Snapshot::version`]); a file changed since is left as it is and the write refused.
pub fn write_if_unchanged(
    path: &Path,
    text: &str,
    version: Option<&str>,
) -> Result<(), ConfigError> {
    conduit_files::replace_if_unchanged(path, text.as_bytes(), 0o600, version).map_err(
        |e| match e {
            conduit_files::ReplaceError::Changed => ConfigError::Conflict {
                path: path.display().to_string(),
            },
            conduit_files::ReplaceError::Io(e) => ConfigError::write(path, e),
        },
    )
}

fn apply_to(path: &Path, document: &mut Value, edit: Edit) -> Result<(), ConfigError> {
    match edit {
        Edit::Replace { text } => {
            *document = parse(path, text.as_bytes())?;
        }
        Edit::Add { name, entry } => {
            check_entry(&name, &entry, &shape_only)?;
            let servers = servers_mut(document, path)?;
            if servers.contains_key(&name) {
                return Err(ConfigError::DuplicateServer(name));
            }
            servers.insert(name, entry);
        }
        Edit::Update { name, entry } => {
            check_entry(&name, &entry, &shape_only)?;
            let servers = servers_mut(document, path)?;
            let slot = servers
                .get_mut(&name)
                .ok_or_else(|| ConfigError::UnknownServer(name.clone()))?;
            *slot = entry;
        }
        Edit::Remove { name } => {
            servers_mut(document, path)?
                .shift_remove(&name)
                .ok_or(ConfigError::UnknownServer(name))?;
        }
        Edit::SetDisabled { name, disabled } => {
            let entry = servers_mut(document, path)?
                .get_mut(&name)
                .and_then(Value::as_object_mut)
                .ok_or_else(|| ConfigError::UnknownServer(name.clone()))?;
            if disabled {
                entry.insert("disabled".into(), Value::Bool(true));
            } else {
                entry.shift_remove("disabled");
            }
        }
    }
    Ok(())
}

fn check_entry(
    name: &str,
    entry: &Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    if name.trim().is_empty() {
        return Err(ConfigError::InvalidServer {
            server: name.to_owned(),
            message: "a server needs a name".into(),
        });
    }
    spec_of(entry, env)
        .map(|_| ())
        .map_err(|message| ConfigError::InvalidServer {
            server: name.to_owned(),
            message,
        })
}

fn servers_mut<'a>(
    document: &'a mut Value,
    path: &Path,
) -> Result<&'a mut Map<String, Value>, ConfigError> {
    if !document.is_object() {
        *document = Value::Object(Map::new());
    }
    if !document[SERVERS].is_object() {
        document[SERVERS] = Value::Object(Map::new());
    }
    document[SERVERS]
        .as_object_mut()
        .ok_or_else(|| ConfigError::Shape {
            path: path.display().to_string(),
        })
}

mod layout;
mod numbers;
mod unique;

#[cfg(test)]
mod tests;
