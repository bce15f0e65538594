//! What the window may not do on its own say-so: the host decides which of its edits start
//! a program or reach a new address (the user must confirm them), hides secret values
//! from it, and reads only the config files the user picked or the host knows.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde_json::{Map, Value};

pub use crate::providers::MASKED;

/// The key of the servers object in an `mcpServers` file.
const SERVERS: &str = "mcpServers";
/// The entry sections whose values are secrets.
const SECRET_SECTIONS: [&str; 2] = ["env", "headers"];

/// Whether `key` of `section` of an entry holds a secret: every `env` and `headers` value,
/// and the sign-in's client secret.
fn is_secret(section: &str, key: &str) -> bool {
    SECRET_SECTIONS.contains(&section) || (section == "oauth" && key == "clientSecret")
}

/// A server the window's edit would start (or connect to) in a way the user has not
/// confirmed yet: what exactly would run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    Stdio {
        server: String,
        command: String,
        args: Vec<String>,
        /// Each variable of its `env`, with its value unless its name says it is a secret
        /// ([`conduit_mcp::config::is_secret_variable`]): a value such as
        /// `NODE_OPTIONS=--require /tmp/x.js` or `npm_config_registry=https://evil/`
        /// changes what runs as much as the command does, and the page shows every value
        /// masked.
        env: Vec<(String, Option<String>)>,
        /// The variables among `env` whose values the file already held for this
        /// server and that go along to what now runs (its arguments or folder changed).
        kept_values: Vec<String>,
        cwd: Option<String>,
        /// The variables of Conduit's own environment whose values it would be given
        /// (`${NAME}` in its `env`).
        variables: Vec<String>,
        /// The folders it is offered as roots (a filesystem server serves what its roots
        /// name).
        roots: Vec<String>,
    },
    Remote {
        server: String,
        url: String,
        /// Where Conduit would connect, as a URL parser reads the address.
        host: String,
        /// Names only: the values may be secrets.
        header_names: Vec<String>,
        /// The variables of Conduit's own environment whose values would be sent
        /// (`${NAME}` in its URL, headers or sign-in client secret).
        variables: Vec<String>,
        /// It gives a sign-in client secret to its authorization server.
        client_secret: bool,
        /// The access its sign-in asks for (`oauth.scopes`), when the entry names it.
        sign_in_scopes: Vec<String>,
        /// The client metadata its sign-in names Conduit by (`oauth.clientMetadataUrl`).
        client_metadata_url: Option<String>,
        /// The folders it is offered as roots.
        roots: Vec<String>,
        /// The authorization server its sign-in is pinned to (`oauth.issuer`), and the one
        /// it was pinned to before when the edit drops the pin.
        issuer: Option<String>,
        dropped_issuer: Option<String>,
    },
}

/// The parts of an entry that decide what runs, where Conduit connects and what it sends.
#[derive(Debug, Clone, PartialEq)]
struct LaunchSpec<'a> {
    kind: Option<&'a Value>,
    command: Option<&'a Value>,
    args: Option<&'a Value>,
    env: Option<&'a Value>,
    cwd: Option<&'a Value>,
    url: Option<&'a Value>,
    headers: Option<&'a Value>,
    /// The secret of the sign-in settings, the access it asks for and who it says Conduit
    /// is: a page must not widen what a sign-in grants, unseen, on an authorization server
    /// that remembers the user's consent. A client id sends nothing of the user's (and the
    /// sign-in flow writes one without asking).
    client_secret: Option<&'a Value>,
    scopes: Option<&'a Value>,
    client_metadata_url: Option<&'a Value>,
    /// The folders offered as roots, and the authorization server sign-in is pinned to: a
    /// page must not widen what a server may read, or unpin its sign-in, unseen.
    roots: Option<&'a Value>,
    issuer: Option<&'a Value>,
}

/// What an entry would run or reach; `None` when it is off (it starts nothing).
fn launch_spec(entry: &Value) -> Option<LaunchSpec<'_>> {
    if is_off(entry) {
        return None;
    }
    entry_spec(entry)
}

fn is_off(entry: &Value) -> bool {
    entry.get("disabled").and_then(Value::as_bool) == Some(true)
}

/// What an entry would run or reach, on or off.
fn entry_spec(entry: &Value) -> Option<LaunchSpec<'_>> {
    let object = entry.as_object()?;
    Some(LaunchSpec {
        kind: object.get("type"),
        command: object.get("command"),
        args: object.get("args"),
        env: object.get("env"),
        cwd: object.get("cwd"),
        url: object.get("url"),
        headers: object.get("headers"),
        client_secret: object
            .get("oauth")
            .and_then(|oauth| oauth.get("clientSecret")),
        scopes: object.get("oauth").and_then(|oauth| oauth.get("scopes")),
        client_metadata_url: object
            .get("oauth")
            .and_then(|oauth| oauth.get("clientMetadataUrl")),
        roots: object.get("roots"),
        issuer: object.get("oauth").and_then(|oauth| oauth.get("issuer")),
    })
}

fn strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// The names of an object's keys.
fn keys(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_object)
        .map(|object| object.keys().cloned().collect())
        .unwrap_or_default()
}

/// An `env` object's variables, each with its value unless its name says it is a secret.
fn shown_env(value: Option<&Value>) -> Vec<(String, Option<String>)> {
    value
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(key, value)| {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            let shown = (!conduit_mcp::config::is_secret_variable(key, &text)).then_some(text);
            (key.clone(), shown)
        })
        .collect()
}

/// The variables (`${NAME}`) the strings among `values` take, each once, in order.
fn variables<'a>(values: impl IntoIterator<Item = &'a Value>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for value in values {
        for name in value
            .as_str()
            .map(conduit_mcp::config::variables_in)
            .unwrap_or_default()
        {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// The values of an object, or none.
fn values(value: Option<&Value>) -> impl Iterator<Item = &Value> {
    value
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|o| o.values())
}

/// Where a URL leads, as a URL parser reads it (what Conduit will connect to), and whether
/// it names a user before the host (`https://trusted.example@other.example/` leads to
/// `other.example`).
pub(crate) fn host_of(url: &str) -> String {
    let address = url.split_once("://").map_or(url, |(_, rest)| rest);
    let address = address.split(['/', '?', '#']).next().unwrap_or_default();
    if address.contains("${") {
        return "set by a variable of Conduit's environment (named below)".to_owned();
    }
    match url::Url::parse(url) {
        Ok(parsed) => {
            let host = parsed.host_str().unwrap_or("(none)");
            let place = match parsed.port() {
                Some(port) => format!("{host}:{port}"),
                None => host.to_owned(),
            };
            if parsed.username().is_empty() && parsed.password().is_none() {
                place
            } else {
                format!("{place} (the address names a user before this host)")
            }
        }
        Err(_) => "not an address Conduit can read".to_owned(),
    }
}

/// The names of `env` whose values `old_env` holds as they are, written out (a
/// `${NAME}` is named as a variable instead).
fn kept_values(env: Option<&Value>, old_env: Option<&Value>) -> Vec<String> {
    let (Some(env), Some(old_env)) = (
        env.and_then(Value::as_object),
        old_env.and_then(Value::as_object),
    ) else {
        return Vec::new();
    };
    env.iter()
        .filter(|(key, value)| {
            old_env.get(*key) == Some(*value)
                && value
                    .as_str()
                    .is_some_and(|text| conduit_mcp::config::variables_in(text).is_empty())
        })
        .map(|(key, _)| key.clone())
        .collect()
}

/// The servers of `new` that would start or connect differently than in `old`: new
/// enabled entries, entries enabled again, and entries whose command, arguments,
/// environment, working folder, type, URL, headers or sign-in client secret changed.
/// Disabling needs nothing; what an edit loses is asked about apart (`losses_to_confirm`).
pub fn launches_to_confirm(old: &Map<String, Value>, new: &Map<String, Value>) -> Vec<Launch> {
    new.iter()
        .filter_map(|(name, entry)| {
            let spec = launch_spec(entry)?;
            if old.get(name).and_then(launch_spec).as_ref() == Some(&spec) {
                return None;
            }
            let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
            Some(match (text(spec.command), text(spec.url)) {
                (Some(command), _) => Launch::Stdio {
                    server: name.clone(),
                    command,
                    args: strings(spec.args),
                    env: shown_env(spec.env),
                    kept_values: kept_values(
                        spec.env,
                        old.get(name).and_then(|entry| entry.get("env")),
                    ),
                    cwd: text(spec.cwd),
                    variables: variables(values(spec.env)),
                    roots: strings(spec.roots),
                },
                (None, Some(url)) => Launch::Remote {
                    server: name.clone(),
                    host: host_of(&url),
                    header_names: keys(spec.headers),
                    variables: variables(
                        spec.url
                            .into_iter()
                            .chain(values(spec.headers))
                            .chain(spec.client_secret),
                    ),
                    client_secret: spec.client_secret.is_some(),
                    sign_in_scopes: strings(spec.scopes),
                    client_metadata_url: text(spec.client_metadata_url),
                    roots: strings(spec.roots),
                    issuer: text(spec.issuer),
                    dropped_issuer: old
                        .get(name)
                        .and_then(entry_spec)
                        .and_then(|old| text(old.issuer))
                        .filter(|_| spec.issuer.is_none()),
                    url,
                },
                // Neither a command nor a URL: the entry cannot start; the file's own
                // check says why.
                (None, None) => return None,
            })
        })
        .collect()
}

/// `text` for a native question: quoted (it could hold a line break or a comma of its
/// own, or come from a model) and cut at `most` characters, so a page cannot push what
/// follows off the dialog behind a long one.
pub fn quoted_cut(text: &str, most: usize) -> String {
    let mut cut: String = text.chars().take(most).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

/// A name in a question, quoted and cut at 80 characters.
fn name(name: &str) -> String {
    quoted_cut(name, 80)
}

/// Every one of `names`, each quoted and cut: for what an entry takes or sends, where
/// the one a page wants unseen could be the last.
fn all_named(names: &[String]) -> String {
    names.iter().map(|n| name(n)).collect::<Vec<_>>().join(", ")
}

/// Servers' or fields' names, quoted and cut, at most 20 and then how many more (the
/// question lists each server's details apart).
fn quoted(names: &[String]) -> String {
    const MOST_NAMES: usize = 20;
    let mut listed: Vec<String> = names.iter().take(MOST_NAMES).map(|n| name(n)).collect();
    if names.len() > MOST_NAMES {
        listed.push(format!("and {} more", names.len() - MOST_NAMES));
    }
    listed.join(", ")
}

/// What an edit loses that the page cannot give back: the user confirms it, as the file
/// keeps one backup and a page could write twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loss {
    /// The entry is deleted, with its settings, stored secrets and approved tools.
    Deleted { server: String },
    /// The entry stays, but loses stored secret values the page never saw (`lost`: it
    /// drops or replaces them) or, being off (so its change starts nothing and is asked
    /// about nowhere else), has what it would run or reach rewritten (`rewritten_off`).
    Changed {
        server: String,
        rewritten_off: bool,
        lost: Vec<String>,
    },
    /// The file on disk does not read as JSON: the new text replaces all of it.
    Unreadable,
    /// Top-level fields of the file the new text drops (other than `mcpServers`).
    Fields { names: Vec<String> },
}

/// The stored secret values of `old` that `new` drops or replaces: `env` and `headers`
/// values written out (a `${NAME}` holds none), the sign-in client secret, and a URL's
/// userinfo, query values and path keys.
fn lost_values(old: &Value, new: &Value) -> Vec<String> {
    let mut lost = Vec::new();
    for (section, label) in [("env", "env value"), ("headers", "header value")] {
        let Some(stored) = old.get(section).and_then(Value::as_object) else {
            continue;
        };
        for (key, value) in stored {
            let written_out = value
                .as_str()
                .is_some_and(|v| !v.is_empty() && !is_reference(v));
            if written_out && new.get(section).and_then(|values| values.get(key)) != Some(value) {
                lost.push(format!("{label} {}", name(key)));
            }
        }
    }
    let client_secret = |entry: &Value| {
        entry
            .get("oauth")
            .and_then(|oauth| oauth.get("clientSecret"))
            .cloned()
    };
    if client_secret(old)
        .as_ref()
        .and_then(Value::as_str)
        .is_some_and(|v| !v.is_empty() && !is_reference(v))
        && client_secret(old) != client_secret(new)
    {
        lost.push("sign-in client secret".to_owned());
    }
    if let Some(url) = old.get("url").and_then(Value::as_str)
        && mask_url(url) != url
        && new.get("url").and_then(Value::as_str) != Some(url)
    {
        lost.push("URL keys".to_owned());
    }
    lost
}

/// What `new` loses of `old`'s servers: entries deleted, stored secret values dropped or
/// replaced, and entries that are off rewritten.
pub fn losses_to_confirm(old: &Map<String, Value>, new: &Map<String, Value>) -> Vec<Loss> {
    old.iter()
        .filter_map(|(name, old_entry)| {
            let Some(new_entry) = new.get(name) else {
                return Some(Loss::Deleted {
                    server: name.clone(),
                });
            };
            let lost = lost_values(old_entry, new_entry);
            let rewritten_off = is_off(new_entry) && entry_spec(old_entry) != entry_spec(new_entry);
            (rewritten_off || !lost.is_empty()).then(|| Loss::Changed {
                server: name.clone(),
                rewritten_off,
                lost,
            })
        })
        .collect()
}

/// The question the user answers before the window's edit is written: what it loses,
/// then what it would run or reach.
pub fn confirmation_text(launches: &[Launch], losses: &[Loss]) -> String {
    let mut text = String::from(
        "Conduit's settings window asks to make the following change. Allow only if you made it yourself.\n",
    );
    let deleted: Vec<String> = losses
        .iter()
        .filter_map(|loss| match loss {
            Loss::Deleted { server } => Some(server.clone()),
            _ => None,
        })
        .collect();
    // First what it touches, by name: the details below can run long.
    let started: Vec<String> = launches
        .iter()
        .map(|launch| match launch {
            Launch::Stdio { server, .. } | Launch::Remote { server, .. } => server.clone(),
        })
        .collect();
    if launches.len() + losses.len() > 1 && !started.is_empty() {
        text.push_str(&format!(
            "\nServers it starts or changes: {}\n",
            quoted(&started)
        ));
    }
    if !deleted.is_empty() {
        text.push_str(&format!(
            "\nDelete from the mcpServers file, with their settings, stored secrets and approved tools:\n  {}\n",
            quoted(&deleted)
        ));
    }
    for loss in losses {
        match loss {
            Loss::Deleted { .. } => {}
            Loss::Changed {
                server,
                rewritten_off,
                lost,
            } => {
                let server = name(server);
                if *rewritten_off {
                    text.push_str(&format!(
                        "\nServer {server}, which is off, has what it would run or reach rewritten.\n"
                    ));
                }
                if !lost.is_empty() {
                    text.push_str(&format!(
                        "\nServer {server} loses its stored {}.\n",
                        lost.join(", ")
                    ));
                }
            }
            Loss::Unreadable => text.push_str(
                "\nThe mcpServers file on disk does not read as JSON: all of it is replaced.\n",
            ),
            Loss::Fields { names } => text.push_str(&format!(
                "\nDrop these fields from the mcpServers file: {}\n",
                quoted(names)
            )),
        }
    }
    let given = |variables: &[String]| {
        format!(
            "with the values of these variables of Conduit's own environment: {}\n",
            all_named(variables)
        )
    };
    for launch in launches {
        match launch {
            Launch::Stdio {
                server,
                command,
                args,
                env,
                kept_values,
                cwd,
                variables,
                roots,
            } => {
                text.push_str(&format!(
                    "\nServer {} will run the program:\n  {command:?}\n",
                    name(server)
                ));
                if args.is_empty() {
                    text.push_str("with no arguments\n");
                } else {
                    let quoted: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
                    text.push_str(&format!("with the arguments:\n  {}\n", quoted.join(" ")));
                }
                if !env.is_empty() {
                    text.push_str("with the environment variables:\n");
                    for (key, value) in env {
                        let shown = match value {
                            Some(value) => format!("={value:?}"),
                            None => {
                                " (its value not shown: the name says it is a secret)".to_owned()
                            }
                        };
                        text.push_str(&format!("  {}{shown}\n", name(key)));
                    }
                }
                if !kept_values.is_empty() {
                    text.push_str(&format!(
                        "keeping the values already stored for: {}\n",
                        all_named(kept_values)
                    ));
                }
                if !variables.is_empty() {
                    text.push_str(&given(variables));
                }
                if let Some(cwd) = cwd {
                    text.push_str(&format!("in the folder {cwd:?}\n"));
                }
                offered_roots(&mut text, roots);
            }
            Launch::Remote {
                server,
                url,
                host,
                header_names,
                variables,
                client_secret,
                sign_in_scopes,
                client_metadata_url,
                roots,
                issuer,
                dropped_issuer,
            } => {
                text.push_str(&format!(
                    "\nServer {} will connect to:\n  {url:?}\nthat is, to the host: {host}\n",
                    name(server)
                ));
                if !header_names.is_empty() {
                    text.push_str(&format!(
                        "sending the headers: {}\n",
                        all_named(header_names)
                    ));
                }
                if *client_secret {
                    text.push_str("giving a sign-in client secret to its authorization server\n");
                }
                if !sign_in_scopes.is_empty() {
                    text.push_str(&format!(
                        "asking at sign-in for the access (scopes): {}\n",
                        all_named(sign_in_scopes)
                    ));
                }
                if let Some(metadata) = client_metadata_url {
                    text.push_str(&format!(
                        "naming Conduit at sign-in by the client metadata at {metadata:?}\n"
                    ));
                }
                if let Some(issuer) = issuer {
                    text.push_str(&format!(
                        "signing in only at the authorization server {issuer:?}\n"
                    ));
                }
                if let Some(dropped) = dropped_issuer {
                    text.push_str(&format!(
                        "no longer holding its sign-in to the authorization server {dropped:?}: any the server names is trusted\n"
                    ));
                }
                offered_roots(&mut text, roots);
                if !variables.is_empty() {
                    text.push_str(&given(variables));
                }
            }
        }
    }
    text
}

/// The folders a server is offered, for the question: each one it may read or change.
fn offered_roots(text: &mut String, roots: &[String]) {
    if !roots.is_empty() {
        text.push_str(&format!(
            "offering it these folders to work in (roots): {}\n",
            roots
                .iter()
                .map(|root| format!("{root:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
}

/// The servers object of a file's text, read as the runtime reads it; empty when the text
/// does not parse or has none.
pub fn servers_of(text: &str) -> Map<String, Value> {
    servers_in(conduit_mcp::config::document_of_text(text).ok())
}

/// The entries as a loose reading finds them (a byte order mark skipped, the last of a key
/// written twice kept): where masked values are taken back from, so a file with a key
/// written twice can be mended in the raw editor without typing its secrets again. Never
/// for deciding what runs ([`servers_of`] is); a secret only carries over to an entry with
/// the same command or URL.
fn servers_loosely_of(text: &str) -> Map<String, Value> {
    servers_in(serde_json::from_str(text.strip_prefix('\u{feff}').unwrap_or(text)).ok())
}

/// The servers object of a parsed file, if it has one.
fn servers_in(document: Option<Value>) -> Map<String, Value> {
    document
        .and_then(|mut document| document.get_mut(SERVERS).map(Value::take))
        .and_then(|servers| match servers {
            Value::Object(map) => Some(map),
            _ => None,
        })
        .unwrap_or_default()
}

/// Why a masked value cannot be saved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MaskError {
    #[error(
        "{place} holds the hidden value {MASKED:?}, but there is no stored value there to keep: type the value again"
    )]
    Moved { place: String },
    #[error(
        "{place} holds the hidden value {MASKED:?}, but the file has two different values there (its server written twice): type the value again"
    )]
    TwoValues { place: String },
}

/// A value the window may see as is: a reference to a variable (`${NAME}`) holds no
/// secret itself.
fn is_reference(value: &str) -> bool {
    value
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .is_some_and(|name| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

fn mask_value(value: &str) -> &str {
    if is_reference(value) { value } else { MASKED }
}

/// A URL split where its secrets are: `scheme://`, the userinfo before `@`, the host and
/// path, the query's `key=value` pairs, and the `#fragment`; split by hand so that the
/// text is kept exactly as written (a parser would re-encode it).
#[derive(Debug, Clone, PartialEq, Eq)]
struct UrlParts<'a> {
    scheme: &'a str,
    userinfo: Option<&'a str>,
    host_path: &'a str,
    query: Option<Vec<(&'a str, Option<&'a str>)>>,
    fragment: Option<&'a str>,
}

impl<'a> UrlParts<'a> {
    fn split(url: &'a str) -> Self {
        let (rest, fragment) = match url.split_once('#') {
            Some((rest, fragment)) => (rest, Some(fragment)),
            None => (url, None),
        };
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (
                rest,
                Some(
                    query
                        .split('&')
                        .map(|pair| match pair.split_once('=') {
                            Some((key, value)) => (key, Some(value)),
                            None => (pair, None),
                        })
                        .collect(),
                ),
            ),
            None => (rest, None),
        };
        let (scheme, rest) = match rest.find("://") {
            Some(at) => rest.split_at(at + 3),
            None => ("", rest),
        };
        // A URL parser ends the authority at a backslash too.
        let authority_end = rest.find(['/', '\\']).unwrap_or(rest.len());
        let (userinfo, host_path) = match rest[..authority_end].rfind('@') {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        Self {
            scheme,
            userinfo,
            host_path,
            query,
            fragment,
        }
    }

    fn join(&self) -> String {
        let mut url = self.scheme.to_owned();
        if let Some(userinfo) = self.userinfo {
            url.push_str(userinfo);
            url.push('@');
        }
        url.push_str(self.host_path);
        if let Some(query) = &self.query {
            url.push('?');
            let pairs: Vec<String> = query
                .iter()
                .map(|(key, value)| match value {
                    Some(value) => format!("{key}={value}"),
                    None => (*key).to_owned(),
                })
                .collect();
            url.push_str(&pairs.join("&"));
        }
        if let Some(fragment) = self.fragment {
            url.push('#');
            url.push_str(fragment);
        }
        url
    }
}

/// The host and path with each path segment that looks like a key masked
/// (`conduit_mcp::config::is_secret_path_segment`).
fn mask_path(host_path: &str) -> String {
    path_segments(host_path)
        .into_iter()
        .enumerate()
        .map(|(index, (segment, separator))| {
            let segment = if index > 0 && conduit_mcp::config::is_secret_path_segment(segment) {
                MASKED
            } else {
                segment
            };
            format!("{segment}{separator}")
        })
        .collect()
}

/// The host and each path segment, with the separator after it (`/`, or a backslash,
/// which a URL parser reads as one; empty at the end).
fn path_segments(host_path: &str) -> Vec<(&str, &str)> {
    host_path
        .split_inclusive(['/', '\\'])
        .map(|piece| match piece.strip_suffix(['/', '\\']) {
            Some(segment) => (segment, &piece[segment.len()..]),
            None => (piece, ""),
        })
        .collect()
}

/// The host and path the window sent back with each masked segment taking the stored
/// one at the same place; `None` when anything else differs (another host, another
/// segment, one more or fewer) or a mask stands where no key was stored.
fn unmask_path(new: &str, old: &str) -> Option<String> {
    let new = path_segments(new);
    let old = path_segments(old);
    if new.len() != old.len() {
        return None;
    }
    new.iter()
        .zip(&old)
        .enumerate()
        .map(|(index, ((new, separator), (old, old_separator)))| {
            if separator != old_separator {
                None
            } else if new == old && !new.contains(MASKED) {
                Some(format!("{new}{separator}"))
            } else if index > 0
                && *new == MASKED
                && conduit_mcp::config::is_secret_path_segment(old)
            {
                Some(format!("{old}{separator}"))
            } else {
                None
            }
        })
        .collect()
}

/// A server URL with its userinfo, each query value and each path segment that looks
/// like a key masked (a `${NAME}` reference and an empty value are shown as they are):
/// tokens travel there as often as in headers (`/mcp/sk-…/sse`).
pub fn mask_url(url: &str) -> String {
    let host_path = mask_path(UrlParts::split(url).host_path);
    let mut parts = UrlParts::split(url);
    parts.host_path = &host_path;
    if parts.userinfo.is_some_and(|userinfo| !userinfo.is_empty()) {
        parts.userinfo = Some(MASKED);
    }
    if let Some(query) = &mut parts.query {
        for (_, value) in query.iter_mut() {
            if let Some(v) = *value
                && !v.is_empty()
            {
                *value = Some(mask_value(v));
            }
        }
    }
    parts.join()
}

/// A URL the window sent back: a masked userinfo, query value or path segment takes the
/// stored one of `old` at the same place (the same query key, counted in order; the same
/// segment), and only when the scheme, host and the rest of the path are unchanged; a
/// mask anywhere else is refused.
pub(crate) fn unmask_url(url: &str, old: Option<&str>, place: &str) -> Result<String, MaskError> {
    if !url.contains(MASKED) {
        return Ok(url.to_owned());
    }
    let moved = || MaskError::Moved {
        place: place.to_owned(),
    };
    let new = UrlParts::split(url);
    let old = old.map(UrlParts::split);
    let old = old
        .filter(|old| old.scheme == new.scheme)
        .ok_or_else(moved)?;
    let host_path = unmask_path(new.host_path, old.host_path).ok_or_else(moved)?;
    if new.scheme.contains(MASKED) || new.fragment.is_some_and(|f| f.contains(MASKED)) {
        return Err(moved());
    }
    let mut restored = new.clone();
    restored.host_path = &host_path;
    if restored.userinfo == Some(MASKED) {
        restored.userinfo = Some(old.userinfo.ok_or_else(moved)?);
    } else if restored.userinfo.is_some_and(|u| u.contains(MASKED)) {
        return Err(moved());
    }
    if let Some(query) = &mut restored.query {
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (key, value) in query.iter_mut() {
            let nth = seen.entry(*key).or_default();
            let index = *nth;
            *nth += 1;
            if key.contains(MASKED) {
                return Err(moved());
            }
            match value {
                Some(v) if *v == MASKED => {
                    let stored = old
                        .query
                        .iter()
                        .flatten()
                        .filter(|(old_key, _)| old_key == key)
                        .nth(index)
                        .and_then(|(_, old_value)| *old_value)
                        .ok_or_else(moved)?;
                    *value = Some(stored);
                }
                Some(v) if v.contains(MASKED) => return Err(moved()),
                _ => {}
            }
        }
    }
    Ok(restored.join())
}

/// An entry with its `env` and `headers` values, its sign-in client secret and its URL's
/// secrets masked.
pub fn mask_entry(entry: &Value) -> Value {
    let mut entry = entry.clone();
    if let Some(object) = entry.as_object_mut() {
        if let Some(Value::String(url)) = object.get_mut("url") {
            *url = mask_url(url);
        }
        for section in SECRET_SECTIONS {
            if let Some(Value::Object(values)) = object.get_mut(section) {
                for value in values.values_mut() {
                    if let Value::String(s) = value {
                        *s = mask_value(s).to_owned();
                    }
                }
            }
        }
        if let Some(Value::String(secret)) = object
            .get_mut("oauth")
            .and_then(|oauth| oauth.get_mut("clientSecret"))
        {
            *secret = mask_value(secret).to_owned();
        }
    }
    entry
}

/// Puts back into an entry the window sent the stored numbers the page rounded: the page
/// reads JSON numbers as doubles, so an integer past 2^53 (or a decimal with more digits
/// than a double holds) comes back as the nearest double. A number that is that rounding
/// of the stored one, at the same place, is the stored one; any other change is kept.
pub fn keep_numbers_the_page_rounded(entry: &mut Value, stored: &Value) {
    match (entry, stored) {
        (Value::Number(sent), Value::Number(kept))
            if sent != kept && sent.as_f64().is_some() && sent.as_f64() == kept.as_f64() =>
        {
            *sent = kept.clone();
        }
        (Value::Object(sent), Value::Object(kept)) => {
            for (key, value) in sent.iter_mut() {
                if let Some(stored) = kept.get(key) {
                    keep_numbers_the_page_rounded(value, stored);
                }
            }
        }
        (Value::Array(sent), Value::Array(kept)) => {
            for (value, stored) in sent.iter_mut().zip(kept) {
                keep_numbers_the_page_rounded(value, stored);
            }
        }
        _ => {}
    }
}

/// An entry the window sent back: each masked `env`/`headers` value takes the stored
/// value of the same server, section and key (`old`); a mask anywhere else is refused.
pub fn unmask_entry(server: &str, entry: Value, old: Option<&Value>) -> Result<Value, MaskError> {
    let mut entry = entry;
    // The URL first: its masks are judged by its own parts, and the rest by the whole URL.
    if let Some(Value::String(url)) = entry.get_mut("url") {
        let stored = old.and_then(|o| o.get("url")).and_then(Value::as_str);
        *url = unmask_url(url, stored, &format!("{server}.url"))?;
    }
    // Stored secrets stay with what they were given to: an entry that now runs another
    // command or reaches another URL gets none of them (a mask is then refused).
    let old = old.filter(|old| same_target(old, &entry));
    fn walk(
        value: &mut Value,
        path: &mut Vec<String>,
        old: Option<&Value>,
        server: &str,
    ) -> Result<(), MaskError> {
        match value {
            Value::String(s) if s == MASKED => {
                let kept = match path.as_slice() {
                    [section, key] if is_secret(section, key) => old
                        .and_then(|o| o.get(section))
                        .and_then(|s| s.get(key))
                        .and_then(Value::as_str),
                    _ => None,
                };
                match kept {
                    Some(kept) => {
                        *s = kept.to_owned();
                        Ok(())
                    }
                    None => Err(MaskError::Moved {
                        place: format!("{server}.{}", path.join(".")),
                    }),
                }
            }
            Value::Object(map) => {
                if map.keys().any(|k| k == MASKED) {
                    return Err(MaskError::Moved {
                        place: format!("a name in {server}.{}", path.join(".")),
                    });
                }
                for (key, child) in map.iter_mut() {
                    path.push(key.clone());
                    walk(child, path, old, server)?;
                    path.pop();
                }
                Ok(())
            }
            Value::Array(items) => {
                for (index, child) in items.iter_mut().enumerate() {
                    path.push(index.to_string());
                    walk(child, path, old, server)?;
                    path.pop();
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
    walk(&mut entry, &mut Vec::new(), old, server)?;
    Ok(entry)
}

/// How many levels of a string's path are kept: the places masking reads are at most
/// `[mcpServers, server, section, key]`.
const KEPT_PATH: usize = 4;

/// A string in JSON text: where its literal is, its value, and the object keys leading
/// to it (array items count as `[]`), the first [`KEPT_PATH`] of `depth`.
#[derive(Debug, Clone)]
struct StringToken {
    range: std::ops::Range<usize>,
    value: String,
    path: Vec<Rc<str>>,
    depth: usize,
    is_key: bool,
}

impl StringToken {
    /// The path when it is exactly `levels` deep.
    fn path_of_depth(&self, levels: usize) -> Option<&[Rc<str>]> {
        (self.depth == levels).then_some(self.path.as_slice())
    }

    /// The path as an error names it.
    fn place(&self) -> String {
        let mut place = self.path.join(".");
        if self.depth > self.path.len() {
            place.push_str(".…");
        }
        place
    }
}

/// Every string of `text` with its path that `keep` keeps. Tolerant: text that does not parse still yields
/// its strings, so a broken file is masked too. A key is shared by the paths under it,
/// and only their first levels are kept: a file of 200,000 strings under a 400 KB key
/// (under the size cap) once took tens of gigabytes here, each path a copy of the key.
fn string_tokens(text: &str, keep: fn(&StringToken) -> bool) -> Vec<StringToken> {
    /// A level of nesting; an object's key, once read, is on `path` until its `,`.
    enum Frame {
        Object { has_key: bool, want_key: bool },
        Array,
    }
    let item: Rc<str> = Rc::from("[]");
    let bytes = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    // The keys (and `[]`s) leading to the next byte: kept beside the frames, so a
    // string's path and depth cost the same however deep a broken file nests.
    let mut path: Vec<Rc<str>> = Vec::new();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => stack.push(Frame::Object {
                has_key: false,
                want_key: true,
            }),
            b'[' => {
                stack.push(Frame::Array);
                path.push(item.clone());
            }
            b'}' | b']' => {
                if let Some(Frame::Array | Frame::Object { has_key: true, .. }) = stack.pop() {
                    path.pop();
                }
            }
            b',' => {
                if let Some(Frame::Object { has_key, want_key }) = stack.last_mut() {
                    if std::mem::take(has_key) {
                        path.pop();
                    }
                    *want_key = true;
                }
            }
            b':' => {
                if let Some(Frame::Object { want_key, .. }) = stack.last_mut() {
                    *want_key = false;
                }
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                let end = (i + 1).min(bytes.len());
                let literal = text.get(start..end).unwrap_or_default();
                let value = serde_json::from_str::<String>(literal)
                    .unwrap_or_else(|_| literal.trim_matches('"').to_owned());
                let is_key = matches!(stack.last(), Some(Frame::Object { want_key: true, .. }));
                let token = StringToken {
                    range: start..end,
                    path: path.iter().take(KEPT_PATH).cloned().collect(),
                    depth: path.len(),
                    is_key,
                    value,
                };
                if is_key && let Some(Frame::Object { has_key, .. }) = stack.last_mut() {
                    // A second key before a `,` (a broken file) takes the first's place.
                    if std::mem::replace(has_key, true) {
                        path.pop();
                    }
                    path.push(Rc::from(token.value.as_str()));
                }
                if keep(&token) {
                    tokens.push(token);
                }
            }
            _ => {}
        }
        i += 1;
    }
    tokens
}

/// `[mcpServers, server]` and the key `url`: a server's URL.
fn url_place(token: &StringToken) -> Option<&str> {
    match token.path_of_depth(3)? {
        [root, server, key] if !token.is_key && &**root == SERVERS && &**key == "url" => {
            Some(&**server)
        }
        _ => None,
    }
}

/// A string's JSON literal.
fn json_literal(value: &str) -> String {
    Value::String(value.to_owned()).to_string()
}

/// `[mcpServers, server, env|headers, key]` or `[mcpServers, server, oauth,
/// clientSecret]`: a secret value's place.
fn secret_place(token: &StringToken) -> Option<(&str, &str, &str)> {
    match token.path_of_depth(4)? {
        [root, server, section, key]
            if !token.is_key && &**root == SERVERS && is_secret(section, key) =>
        {
            Some((&**server, &**section, &**key))
        }
        _ => None,
    }
}

fn replace_ranges(text: &str, mut replacements: Vec<(std::ops::Range<usize>, String)>) -> String {
    replacements.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
    let mut out = text.to_owned();
    for (range, with) in replacements {
        out.replace_range(range, &with);
    }
    out
}

/// The file's text with every `env` and `headers` value and sign-in client secret of its
/// servers masked, the rest as written. Text that is not JSON (a quote left open, a
/// brace missing, a file saved as UTF-16) cannot be placed: where its secrets are is
/// unknown, so every string value is masked, and when even its strings cannot be told
/// (a string running past its line, which JSON never has, or NULs and bytes that are not
/// UTF-8) the whole text is. The page's "Reveal" (a native question) shows it as it is.
pub fn mask_text(text: &str) -> String {
    let json = text.strip_prefix('\u{feff}').unwrap_or(text);
    if serde_json::from_str::<serde::de::IgnoredAny>(json).is_err() {
        return mask_unparsed_text(text);
    }
    let replacements = string_tokens(text, |token| {
        secret_place(token).is_some() || url_place(token).is_some()
    })
    .into_iter()
    .filter_map(|token| {
        if secret_place(&token).is_some() && !is_reference(&token.value) {
            Some((token.range, format!("\"{MASKED}\"")))
        } else if url_place(&token).is_some() {
            let masked = mask_url(&token.value);
            (masked != token.value).then(|| (token.range, json_literal(&masked)))
        } else {
            None
        }
    })
    .collect();
    replace_ranges(text, replacements)
}

/// Text that does not parse, for the page: every string that is not a key masked, or
/// all of it when its strings cannot be told apart.
fn mask_unparsed_text(text: &str) -> String {
    let tokens = string_tokens(text, |_| true);
    let lost_track = text.contains(['\0', '\u{fffd}'])
        || tokens.iter().any(|token| {
            text.get(token.range.clone())
                .is_none_or(|t| t.contains(['\n', '\r']))
        });
    if lost_track {
        return format!("\"{MASKED}\"\n");
    }
    // A key is a string a colon follows: in a broken file the tokenizer's idea of where
    // keys are can be wrong (`{"API_KEY" "sk-…"}`, a colon left out, reads the value as a
    // key), and a value read as a key must not pass unmasked.
    let followed_by_colon = |end: usize| {
        text.get(end..)
            .and_then(|rest| rest.trim_start().chars().next())
            == Some(':')
    };
    let replacements = tokens
        .into_iter()
        .filter(|token| {
            let key = token.is_key && followed_by_colon(token.range.end);
            !key && !is_reference(&token.value)
        })
        .map(|token| (token.range, format!("\"{MASKED}\"")))
        .collect();
    replace_ranges(text, replacements)
}

/// Text the raw editor sent back: each mask takes the stored value at the same server,
/// section and key of `old`; a mask anywhere else is refused.
pub fn unmask_text(new: &str, old: &str) -> Result<String, MaskError> {
    let old_servers = servers_loosely_of(old);
    let stored_url = |server: &str| {
        old_servers
            .get(server)
            .and_then(|entry| entry.get("url"))
            .and_then(Value::as_str)
    };
    // The URLs each server has in the old text: a server written twice with two URLs
    // has no one URL whose parts a mask stands for.
    let mut old_urls: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for token in string_tokens(old, |token| url_place(token).is_some()) {
        if let Some(server) = url_place(&token) {
            old_urls
                .entry(server.to_owned())
                .or_default()
                .insert(token.value.clone());
        }
    }
    // URLs first: each masked part takes the stored one, or the text is refused.
    let mut url_replacements = Vec::new();
    for token in string_tokens(new, |token| url_place(token).is_some()) {
        if let Some(server) = url_place(&token)
            && token.value.contains(MASKED)
        {
            if old_urls.get(server).is_some_and(|urls| urls.len() > 1) {
                return Err(MaskError::TwoValues {
                    place: token.place(),
                });
            }
            let url = unmask_url(&token.value, stored_url(server), &token.place())?;
            url_replacements.push((token.range, json_literal(&url)));
        }
    }
    let new = &replace_ranges(new, url_replacements);
    let new_servers = servers_loosely_of(new);
    let kept_target = |server: &str| match (old_servers.get(server), new_servers.get(server)) {
        (Some(old), Some(new)) => same_target(old, new),
        _ => false,
    };
    // A place written twice (a server whose key is in the file twice) with two values
    // keeps neither: which one a mask stood for cannot be told.
    let mut stored: BTreeMap<(String, String, String), Option<std::ops::Range<usize>>> =
        BTreeMap::new();
    for token in string_tokens(old, |token| secret_place(token).is_some()) {
        let Some((server, section, key)) = secret_place(&token) else {
            continue;
        };
        if !kept_target(server) {
            continue;
        }
        let place = (server.to_owned(), section.to_owned(), key.to_owned());
        let literal = old.get(token.range.clone());
        stored
            .entry(place)
            .and_modify(|kept| {
                if kept.as_ref().and_then(|range| old.get(range.clone())) != literal {
                    *kept = None;
                }
            })
            .or_insert(Some(token.range));
    }
    let mut replacements = Vec::new();
    for token in string_tokens(new, |token| token.value == MASKED) {
        if token.value != MASKED || url_place(&token).is_some() {
            continue;
        }
        let kept = secret_place(&token).and_then(|(server, section, key)| {
            stored.get(&(server.to_owned(), section.to_owned(), key.to_owned()))
        });
        let place = || token.place();
        match kept {
            Some(Some(range)) => match old.get(range.clone()) {
                Some(literal) => replacements.push((token.range.clone(), literal.to_owned())),
                None => return Err(MaskError::Moved { place: place() }),
            },
            Some(None) => return Err(MaskError::TwoValues { place: place() }),
            None => return Err(MaskError::Moved { place: place() }),
        }
    }
    Ok(replace_ranges(new, replacements))
}

/// Whether two entries run the same command or reach the same URL: only then may a
/// stored secret carry over from one to the other. (New arguments or another folder keep
/// them: the confirmation shows both, with the variables' names.)
fn same_target(old: &Value, new: &Value) -> bool {
    old.get("command") == new.get("command") && old.get("url") == new.get("url")
}

/// Whether a local model server the window asks to save is one the host looks for
/// ([`crate::providers::LOCAL_SERVERS`]) at its own address: the chat window may add
/// those without Settings, but never a provider pointing elsewhere.
pub fn known_local_server(local: &crate::providers::LocalProvider) -> Result<(), String> {
    let known = crate::providers::LOCAL_SERVERS
        .iter()
        .any(|(id, _, base_url)| *id == local.id && *base_url == local.base_url);
    if known {
        Ok(())
    } else {
        Err(format!(
            "{:?} at {} is not a local model server Conduit looks for; add other providers in Settings",
            local.id, local.base_url
        ))
    }
}

/// Largest config file Conduit reads whole to import from.
pub const IMPORT_MAX_BYTES: u64 = 1024 * 1024;
/// Largest config file Conduit imports from: one past [`IMPORT_MAX_BYTES`] is read as it
/// streams, only its servers kept (`config::import_excerpt`): Claude Code's
/// `~/.claude.json` keeps each project's history beside them, often tens of megabytes.
pub const IMPORT_MAX_STREAMED: u64 = 512 * 1024 * 1024;

/// Another app's MCP config file at a place the host knows; the window names it by id.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct KnownImportFile {
    pub id: &'static str,
    pub app: &'static str,
    pub path: PathBuf,
}

/// Where other apps keep their servers, under `home` and the platform's config folder.
pub fn known_import_files(home: &Path, config_dir: &Path) -> Vec<KnownImportFile> {
    vec![
        KnownImportFile {
            id: "claude-desktop",
            app: "Claude Desktop",
            path: config_dir.join("Claude").join("claude_desktop_config.json"),
        },
        KnownImportFile {
            id: "claude-code",
            app: "Claude Code",
            path: home.join(".claude.json"),
        },
        KnownImportFile {
            id: "cursor",
            app: "Cursor",
            path: home.join(".cursor").join("mcp.json"),
        },
        KnownImportFile {
            id: "vscode",
            app: "VS Code",
            path: config_dir.join("Code").join("User").join("mcp.json"),
        },
        KnownImportFile {
            id: "windsurf",
            app: "Windsurf",
            path: home
                .join(".codeium")
                .join("windsurf")
                .join("mcp_config.json"),
        },
    ]
}

#[derive(Debug, thiserror::Error)]
pub enum ImportFileError {
    #[error("there is no known config file called {0:?}")]
    UnknownSource(String),
    #[error("{path}: there is no such file")]
    Missing { path: String },
    #[error("{path} is not a regular file (a folder, device or pipe); pick a config file")]
    NotAFile { path: String },
    #[error(
        "{path} is larger than 512 MiB, or its servers alone are larger than 1 MiB; Conduit imports only config files"
    )]
    TooLarge { path: String },
    #[error("{path} does not read as JSON: {message}")]
    NotJson { path: String, message: String },
    #[error("{path} is not UTF-8 text")]
    NotText { path: String },
    #[error("{path} could not be read: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The text of a config file to import from: a regular file (a symlink counts as its
/// target) of at most 1 MiB, or of a larger one (up to [`IMPORT_MAX_STREAMED`]) the
/// places of its servers alone. Folders, devices and pipes are refused before they are
/// opened; the file is opened without waiting and what was opened is checked again, so
/// one swapped in between never blocks the read.
pub fn read_import_file(path: &Path) -> Result<String, ImportFileError> {
    let shown = path.display().to_string();
    let io = |source: std::io::Error| ImportFileError::Io {
        path: shown.clone(),
        source,
    };
    let check = |metadata: &std::fs::Metadata| {
        if !metadata.is_file() {
            Err(ImportFileError::NotAFile {
                path: shown.clone(),
            })
        } else if metadata.len() > IMPORT_MAX_STREAMED {
            Err(ImportFileError::TooLarge {
                path: shown.clone(),
            })
        } else {
            Ok(())
        }
    };
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ImportFileError::Missing {
                path: shown.clone(),
            });
        }
        Err(e) => return Err(io(e)),
    };
    check(&metadata)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // A FIFO swapped in since the check would block the open until a writer came: open
    // without waiting, then check what was opened.
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(io)?;
    // The file may have been swapped since: check what was opened.
    let opened = file.metadata().map_err(io)?;
    check(&opened)?;
    if opened.len() > IMPORT_MAX_BYTES {
        let streamed = std::io::BufReader::new(file.take(IMPORT_MAX_STREAMED));
        let excerpt = conduit_mcp::config::import_excerpt(streamed).map_err(|error| {
            ImportFileError::NotJson {
                path: shown.clone(),
                message: format!(
                    "{} (line {}, column {})",
                    conduit_files::json_error_message(&error),
                    error.line(),
                    error.column()
                ),
            }
        })?;
        if excerpt.len() as u64 > IMPORT_MAX_BYTES {
            return Err(ImportFileError::TooLarge { path: shown });
        }
        return Ok(excerpt);
    }
    let mut bytes = Vec::new();
    file.take(IMPORT_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > IMPORT_MAX_BYTES {
        return Err(ImportFileError::TooLarge { path: shown });
    }
    String::from_utf8(bytes).map_err(|_| ImportFileError::NotText { path: shown })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn servers(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn new_changed_and_re_enabled_launches_need_confirming_and_nothing_else() {
        let old = servers(json!({
            "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
            "web": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer a"}},
            "off": {"command": "node", "args": ["x.js"], "disabled": true},
            "gone": {"command": "rm"},
        }));
        // The same file, reordered and with a timeout changed: nothing to ask.
        let same = servers(json!({
            "web": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer a"}, "timeout": 5},
            "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
            "off": {"command": "node", "args": ["x.js"], "disabled": true},
        }));
        assert_eq!(launches_to_confirm(&old, &same), vec![]);

        let changed = servers(json!({
            "time": {"command": "uvx", "args": ["mcp-server-time", "--evil"], "env": {"TZ": "UTC"}},
            "web": {"url": "https://attacker.example/mcp"},
            "off": {"command": "node", "args": ["x.js"]},
            "new": {"command": "sh", "args": ["-c", "curl x | sh"], "env": {"TOKEN": "s3cret"}, "cwd": "/tmp"},
            "envchange": {"command": "rm"},
        }));
        let mut old_with_envchange = old.clone();
        old_with_envchange.insert(
            "envchange".into(),
            json!({"command": "rm", "env": {"LD_PRELOAD": "x"}}),
        );
        let launches = launches_to_confirm(&old_with_envchange, &changed);
        assert_eq!(
            launches,
            vec![
                Launch::Stdio {
                    server: "time".into(),
                    command: "uvx".into(),
                    args: vec!["mcp-server-time".into(), "--evil".into()],
                    env: vec![("TZ".into(), Some("UTC".into()))],
                    kept_values: vec!["TZ".into()],
                    cwd: None,
                    variables: vec![],
                    roots: vec![],
                },
                Launch::Remote {
                    server: "web".into(),
                    url: "https://attacker.example/mcp".into(),
                    host: "attacker.example".into(),
                    header_names: vec![],
                    variables: vec![],
                    client_secret: false,
                    sign_in_scopes: vec![],
                    client_metadata_url: None,
                    roots: vec![],
                    issuer: None,
                    dropped_issuer: None,
                },
                Launch::Stdio {
                    server: "off".into(),
                    command: "node".into(),
                    args: vec!["x.js".into()],
                    env: vec![],
                    kept_values: vec![],
                    cwd: None,
                    variables: vec![],
                    roots: vec![],
                },
                Launch::Stdio {
                    server: "new".into(),
                    command: "sh".into(),
                    args: vec!["-c".into(), "curl x | sh".into()],
                    env: vec![("TOKEN".into(), None)],
                    kept_values: vec![],
                    cwd: Some("/tmp".into()),
                    variables: vec![],
                    roots: vec![],
                },
                Launch::Stdio {
                    server: "envchange".into(),
                    command: "rm".into(),
                    args: vec![],
                    env: vec![],
                    kept_values: vec![],
                    cwd: None,
                    variables: vec![],
                    roots: vec![],
                },
            ]
        );
        let text = confirmation_text(&launches, &[]);
        assert!(
            text.contains("\"sh\"") && text.contains("\"curl x | sh\""),
            "{text}"
        );
        assert!(text.contains("https://attacker.example/mcp"), "{text}");
        assert!(text.contains("TOKEN") && !text.contains("s3cret"), "{text}");

        // Disabling or removing starts nothing.
        let disabled = servers(json!({"time": {"command": "uvx", "disabled": true}}));
        assert_eq!(launches_to_confirm(&old, &disabled), vec![]);
        assert_eq!(launches_to_confirm(&old, &Map::new()), vec![]);
    }

    #[test]
    fn removals_and_stored_values_going_to_new_arguments_are_asked_about() {
        let old = servers(json!({
            "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
                "env": {"GITHUB_TOKEN": "ghp_s3cret", "HOME_DIR": "${HOME}"}},
            "time": {"command": "uvx", "args": ["mcp-server-time"]},
            "off": {"command": "node", "disabled": true},
        }));
        // The same command with other arguments: the stored token goes along, and the
        // question says so (by name; never the value).
        let mut moved = old.clone();
        moved["github"]["args"] = json!(["-y", "evil-package"]);
        let launches = launches_to_confirm(&old, &moved);
        assert_eq!(launches.len(), 1, "{launches:?}");
        let text = confirmation_text(&launches, &[]);
        assert!(
            text.contains("keeping the values already stored for: \"GITHUB_TOKEN\"\n"),
            "{text}"
        );
        assert!(!text.contains("ghp_s3cret"), "{text}");
        // A variable is named as one, not as a stored value.
        assert!(text.contains("environment: \"HOME\""), "{text}");

        // Deleting entries, enabled or not, is asked about, each by name; keeping,
        // disabling and reordering are not.
        let mut fewer = old.clone();
        fewer.remove("time");
        fewer.remove("off");
        let deleted = |name: &str| Loss::Deleted {
            server: name.to_owned(),
        };
        assert_eq!(
            losses_to_confirm(&old, &fewer),
            vec![deleted("time"), deleted("off")]
        );
        let mut disabled = old.clone();
        disabled["time"]["disabled"] = json!(true);
        assert!(losses_to_confirm(&old, &disabled).is_empty());
        let mut reordered = Map::new();
        for name in ["off", "time", "github"] {
            reordered.insert(name.to_owned(), old[name].clone());
        }
        assert!(losses_to_confirm(&old, &reordered).is_empty());
        let text = confirmation_text(&[], &losses_to_confirm(&old, &Map::new()));
        assert!(
            text.contains("Delete from the mcpServers file, with their settings, stored secrets and approved tools:\n  \"github\", \"time\", \"off\"\n"),
            "{text}"
        );
        assert!(!text.contains("will run"), "{text}");

        // An entry that is off, emptied: nothing starts, so no launch is asked about,
        // but what it held is lost, so that is.
        let mut emptied = old.clone();
        emptied["github"] = json!({"command": "x", "disabled": true});
        assert!(launches_to_confirm(&old, &emptied).is_empty());
        let losses = losses_to_confirm(&old, &emptied);
        assert_eq!(
            losses,
            vec![Loss::Changed {
                server: "github".into(),
                rewritten_off: true,
                lost: vec!["env value \"GITHUB_TOKEN\"".into()],
            }]
        );
        let text = confirmation_text(&[], &losses);
        assert!(
            text.contains(
                "Server \"github\", which is off, has what it would run or reach rewritten."
            ) && text.contains("Server \"github\" loses its stored env value \"GITHUB_TOKEN\"."),
            "{text}"
        );
        // An entry that is off changed only in a way that keeps its values: asked as
        // rewritten; one turned off alone: not asked.
        let mut other_args = old.clone();
        other_args["off"]["args"] = json!(["other.js"]);
        assert_eq!(
            losses_to_confirm(&old, &other_args),
            vec![Loss::Changed {
                server: "off".into(),
                rewritten_off: true,
                lost: vec![],
            }]
        );
        // An enabled entry whose header, client secret and URL key are replaced: the
        // launch is asked about, and the loss named with it.
        let remote = servers(json!({"web": {
            "url": "https://h.example/mcp/sk-ak-7f3a9c2e41b8d6f0/sse",
            "headers": {"Authorization": "Bearer s3cret", "X-Ref": "${TOKEN}"},
            "oauth": {"clientSecret": "cs-1"}}}));
        let replaced = servers(json!({"web": {
            "url": "https://h.example/mcp/sse",
            "headers": {"X-Ref": "${OTHER}"},
            "oauth": {"clientSecret": "cs-2"}}}));
        assert_eq!(
            losses_to_confirm(&remote, &replaced),
            vec![Loss::Changed {
                server: "web".into(),
                rewritten_off: false,
                lost: vec![
                    "header value \"Authorization\"".into(),
                    "sign-in client secret".into(),
                    "URL keys".into()
                ],
            }]
        );
        // What an entry takes from Conduit's environment is listed whole, however many.
        let mut taking = Map::new();
        let env: serde_json::Map<String, Value> = (0..25)
            .map(|n| (format!("V{n}"), json!(format!("${{HOME_{n}}}"))))
            .chain([("LAST".to_owned(), json!("${AWS_SECRET_ACCESS_KEY}"))])
            .collect();
        taking.insert("t".into(), json!({"command": "x", "env": env}));
        let text = confirmation_text(&launches_to_confirm(&Map::new(), &taking), &[]);
        assert!(
            text.contains("\"AWS_SECRET_ACCESS_KEY\"")
                && text.contains("\"LAST\"")
                && !text.contains("more"),
            "{text}"
        );
        // Many or long names are cut, so none can push another off the dialog.
        let mut many = Map::new();
        for n in 0..25 {
            many.insert(format!("{}{n}", "x".repeat(200)), json!({"command": "a"}));
        }
        let text = confirmation_text(&[], &losses_to_confirm(&many, &Map::new()));
        assert!(
            text.contains("…\", ") && text.ends_with("and 5 more\n"),
            "{text}"
        );
        assert!(text.len() < 2500, "{}", text.len());
    }

    /// A filesystem server's "Always allow" holds for what its roots name: wider roots, an
    /// unpinned sign-in, or an environment value that changes what runs (the page shows
    /// every value masked) are asked about, with the values in the question.
    #[test]
    fn roots_an_unpinned_sign_in_and_environment_values_are_asked_about_with_what_they_are() {
        let old = servers(json!({
            "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem"],
                "roots": ["~/projects"]},
            "work": {"url": "https://mcp.work.example/mcp",
                "oauth": {"issuer": "https://login.work.example"}},
        }));
        let mut widened = old.clone();
        widened["files"]["roots"] = json!(["/"]);
        widened["files"]["env"] = json!({
            "npm_config_registry": "https://registry.evil.example/",
            "GITHUB_TOKEN": "ghp_s3cret",
        });
        widened["work"]["oauth"] = json!({});
        let launches = launches_to_confirm(&old, &widened);
        assert_eq!(launches.len(), 2, "{launches:?}");
        let text = confirmation_text(&launches, &[]);
        for expected in [
            "offering it these folders to work in (roots): \"/\"\n",
            "  \"npm_config_registry\"=\"https://registry.evil.example/\"\n",
            "  \"GITHUB_TOKEN\" (its value not shown: the name says it is a secret)\n",
            "no longer holding its sign-in to the authorization server \"https://login.work.example\"",
        ] {
            assert!(text.contains(expected), "{expected} not in: {text}");
        }
        assert!(!text.contains("ghp_s3cret"), "{text}");

        // Roots alone, and a pin to another issuer, are asked about too.
        let mut roots_only = old.clone();
        roots_only["files"]["roots"] = json!(["~/projects", "~/.ssh"]);
        let launches = launches_to_confirm(&old, &roots_only);
        assert_eq!(launches.len(), 1, "{launches:?}");
        assert!(
            confirmation_text(&launches, &[]).contains("\"~/projects\", \"~/.ssh\""),
            "{launches:?}"
        );
        let mut repinned = old.clone();
        repinned["work"]["oauth"]["issuer"] = json!("https://login.evil.example");
        let text = confirmation_text(&launches_to_confirm(&old, &repinned), &[]);
        assert!(
            text.contains(
                "signing in only at the authorization server \"https://login.evil.example\""
            ),
            "{text}"
        );
        assert!(!text.contains("no longer holding"), "{text}");
        assert_eq!(launches_to_confirm(&old, &old.clone()), vec![]);

        // What runs is shown whole, however long: harmless flags padding a value or a
        // folder put what matters past any cut.
        let padding = "--max-old-space-size=4096 ".repeat(12);
        let mut padded = old.clone();
        padded["files"]["env"] =
            json!({"NODE_OPTIONS": format!("{padding}--import=data:text/javascript,evil()")});
        padded["files"]["roots"] =
            json!([format!("/home/u/projects{}/../../..", "/.".repeat(150))]);
        let text = confirmation_text(&launches_to_confirm(&old, &padded), &[]);
        assert!(
            text.contains("--import=data:text/javascript,evil()\"\n"),
            "{text}"
        );
        assert!(text.contains("/../../..\""), "{text}");
        assert!(!text.contains('…'), "{text}");
    }

    #[test]
    fn what_an_entry_sends_and_takes_from_conduits_environment_is_asked_about() {
        let old = servers(json!({
            "weather": {"url": "https://weather.example/mcp"},
            "tool": {"command": "npx", "args": ["-y", "tool"]},
        }));
        // Only headers added, one taking a provider key from Conduit's environment; only
        // an environment value taking one; only the sign-in's client secret changed.
        let new = servers(json!({
            "weather": {"url": "https://weather.example/mcp",
                "headers": {"X-Client": "c-${ANTHROPIC_API_KEY}"}},
            "tool": {"command": "npx", "args": ["-y", "tool"], "env": {"TZ": "${OPENAI_API_KEY}"}},
            "signed": {"url": "https://${HOST}/mcp", "oauth": {"clientId": "a", "clientSecret": "${CLIENT_SECRET}"}},
        }));
        let launches = launches_to_confirm(&old, &new);
        assert_eq!(launches.len(), 3, "{launches:?}");
        let text = confirmation_text(&launches, &[]);
        for expected in [
            "sending the headers: \"X-Client\"",
            "\"ANTHROPIC_API_KEY\"",
            "with the environment variables:\n  \"TZ\"=\"${OPENAI_API_KEY}\"\n",
            "\"OPENAI_API_KEY\"",
            "\"HOST\", \"CLIENT_SECRET\"",
        ] {
            assert!(text.contains(expected), "{expected} not in: {text}");
        }
        assert!(text.contains("giving a sign-in client secret"), "{text}");
        assert!(
            text.contains("to the host: set by a variable of Conduit's environment"),
            "{text}"
        );
        let mut signed_in_again = new.clone();
        signed_in_again["signed"]["oauth"]["clientSecret"] = json!("literal");
        assert_eq!(launches_to_confirm(&new, &signed_in_again).len(), 1);
        // A client id the sign-in flow writes sends nothing: not asked.
        let mut with_client_id = new.clone();
        with_client_id["weather"]["oauth"] = json!({"clientId": "conduit"});
        assert_eq!(launches_to_confirm(&new, &with_client_id), vec![]);
        // Wider access for the sign-in, or another client metadata document, is asked
        // about, with the scopes and the URL in the question.
        let mut wider = with_client_id.clone();
        wider["weather"]["oauth"]["scopes"] = json!(["read", "admin", "delete_repo"]);
        let launches = launches_to_confirm(&with_client_id, &wider);
        assert_eq!(launches.len(), 1, "{launches:?}");
        let text = confirmation_text(&launches, &[]);
        assert!(
            text.contains(
                "asking at sign-in for the access (scopes): \"read\", \"admin\", \"delete_repo\""
            ),
            "{text}"
        );
        let mut metadata = with_client_id.clone();
        metadata["weather"]["oauth"]["clientMetadataUrl"] =
            json!("https://evil.example/client.json");
        let text = confirmation_text(&launches_to_confirm(&with_client_id, &metadata), &[]);
        assert!(
            text.contains("by the client metadata at \"https://evil.example/client.json\""),
            "{text}"
        );
        // A header value changed alone asks; so does a header changed while the entry
        // was off, when it is enabled.
        let mut header_value = new.clone();
        header_value["weather"]["headers"]["X-Client"] = json!("c-${OPENAI_API_KEY}");
        assert_eq!(launches_to_confirm(&new, &header_value).len(), 1);
        let mut off = new.clone();
        off["weather"]["disabled"] = json!(true);
        off["weather"]["headers"]["X-Client"] = json!("other");
        assert_eq!(launches_to_confirm(&new, &off), vec![]);
        let mut on_again = off.clone();
        on_again["weather"]["disabled"] = json!(false);
        assert_eq!(launches_to_confirm(&off, &on_again).len(), 1);

        // The host a URL parser reads is shown, whatever the text looks like first.
        let tricked = servers(json!({
            "gh": {"url": "https://api.githubcopilot.com@evil.example/mcp"},
        }));
        let text = confirmation_text(&launches_to_confirm(&Map::new(), &tricked), &[]);
        assert!(
            text.contains(
                "that is, to the host: evil.example (the address names a user before this host)"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_sign_in_client_secret_is_masked_and_stays_with_its_server() {
        let stored = json!({"url": "https://mcp.example/mcp",
            "oauth": {"clientId": "conduit-app", "clientSecret": "s3cret"}});
        let masked = mask_entry(&stored);
        assert_eq!(masked["oauth"]["clientSecret"], MASKED);
        assert_eq!(
            masked["oauth"]["clientId"], "conduit-app",
            "an id is no secret"
        );
        assert_eq!(
            unmask_entry("srv", masked.clone(), Some(&stored)).unwrap(),
            stored
        );
        // Pointed at another server, the stored secret does not follow.
        let mut moved = masked.clone();
        moved["url"] = json!("https://other.example/mcp");
        assert!(unmask_entry("srv", moved, Some(&stored)).is_err());
        // A mask moved into the client id or the scopes finds nothing to keep.
        let mut into_id = masked.clone();
        into_id["oauth"]["clientId"] = json!(MASKED);
        assert!(unmask_entry("srv", into_id, Some(&stored)).is_err());
        let mut into_scopes = masked.clone();
        into_scopes["oauth"]["scopes"] = json!([MASKED]);
        assert!(unmask_entry("srv", into_scopes, Some(&stored)).is_err());
        // The raw editor's text: masked, and kept on the way back.
        let file = json!({"mcpServers": {"srv": stored}}).to_string();
        let text = mask_text(&file);
        assert!(
            !text.contains("s3cret") && text.contains("conduit-app"),
            "{text}"
        );
        assert_eq!(unmask_text(&text, &file).unwrap(), file);
        let into_id = text.replace("\"conduit-app\"", &format!("\"{MASKED}\""));
        assert!(unmask_text(&into_id, &file).is_err());
    }

    #[test]
    fn secrets_are_masked_in_entries_and_a_mask_sent_back_keeps_the_stored_value() {
        let stored = json!({"command": "x", "args": ["a"],
            "env": {"TOKEN": "s3cret", "HOME_REF": "${HOME}"},
            "headers": {"Authorization": "Bearer s3cret"}});
        let masked = mask_entry(&stored);
        assert_eq!(masked["env"]["TOKEN"], MASKED);
        assert_eq!(
            masked["env"]["HOME_REF"], "${HOME}",
            "a reference is no secret"
        );
        assert_eq!(masked["headers"]["Authorization"], MASKED);
        assert!(!masked.to_string().contains("s3cret"));

        let back = unmask_entry("srv", masked.clone(), Some(&stored)).unwrap();
        assert_eq!(back, stored);

        // A mask moved to another key, section, server or into the arguments is refused.
        let mut moved = masked.clone();
        moved["env"]["OTHER"] = json!(MASKED);
        assert!(unmask_entry("srv", moved, Some(&stored)).is_err());
        let mut into_args = masked.clone();
        into_args["args"] = json!([MASKED]);
        assert!(unmask_entry("srv", into_args, Some(&stored)).is_err());
        assert!(
            unmask_entry("other", masked, None).is_err(),
            "a new server has no stored values"
        );
    }

    #[test]
    fn a_urls_userinfo_and_query_values_are_masked_and_a_mask_sent_back_keeps_them() {
        let stored = json!({"url": "https://me:pa55@mcp.example/v1?key=s3cret&ref=${TOKEN}&flag&empty=#top",
            "headers": {"Authorization": "Bearer t0k"}});
        let masked = mask_entry(&stored);
        assert_eq!(
            masked["url"],
            format!("https://{MASKED}@mcp.example/v1?key={MASKED}&ref=${{TOKEN}}&flag&empty=#top")
        );
        assert!(
            !masked.to_string().contains("s3cret") && !masked.to_string().contains("pa55"),
            "{masked}"
        );
        // Sent back as it was: the stored URL and header come back.
        assert_eq!(
            unmask_entry("srv", masked.clone(), Some(&stored)).unwrap(),
            stored
        );
        // Another value typed in beside a mask: kept, the mask takes the stored one.
        let mut edited = masked.clone();
        edited["url"] = json!(format!(
            "https://{MASKED}@mcp.example/v1?key={MASKED}&ref=${{TOKEN}}&flag&empty=#top"
        ));
        assert_eq!(
            unmask_entry("srv", edited, Some(&stored)).unwrap()["url"],
            stored["url"]
        );

        // A mask moved to another host, another key, or into the path is refused.
        for moved in [
            format!("https://{MASKED}@attacker.example/v1?key={MASKED}"),
            format!("https://mcp.example/v1?other={MASKED}"),
            format!("https://mcp.example/v1/{MASKED}?key=x"),
            format!("https://mcp.example/v1?key={MASKED}&key={MASKED}"),
            format!("https://mcp.example/v1?key=a{MASKED}"),
        ] {
            let mut entry = masked.clone();
            entry["url"] = json!(moved);
            let refused = unmask_entry("srv", entry, Some(&stored));
            assert!(
                matches!(refused, Err(MaskError::Moved { .. })),
                "{moved}: {refused:?}"
            );
        }
        assert!(
            unmask_entry("new", masked, None).is_err(),
            "a new server has no stored URL"
        );
    }

    #[test]
    fn a_key_in_a_urls_path_is_masked_and_a_mask_sent_back_keeps_it_in_its_place() {
        let url = "https://actions.example.com/mcp/sk-ak-7f3a9c2e41b8d6f0/sse";
        let stored = json!({"url": url});
        let masked = mask_entry(&stored);
        assert_eq!(
            masked["url"],
            format!("https://actions.example.com/mcp/{MASKED}/sse")
        );
        assert_eq!(
            unmask_entry("zap", masked.clone(), Some(&stored)).unwrap(),
            stored
        );
        // A backslash is a slash to a URL parser: a key after one is masked too, and a
        // user name cannot hide a host before one (such a URL is refused on saving).
        assert_eq!(
            mask_url("https://h.example\\mcp\\sk-ak-7f3a9c2e41b8d6f0\\sse"),
            format!("https://h.example\\mcp\\{MASKED}\\sse")
        );
        assert_eq!(
            mask_url("https://evil.example\\@h.example/?key=s3cret"),
            format!("https://evil.example\\@h.example/?key={MASKED}")
        );
        // Names and versions in a path stay readable.
        assert_eq!(
            mask_url("https://h.example/v1/server-github/mcp"),
            "https://h.example/v1/server-github/mcp"
        );
        // The mask cannot move: to another segment, another host, another path, or
        // a place where no key was stored.
        for moved in [
            format!("https://actions.example.com/mcp/sse/{MASKED}"),
            format!("https://evil.example/mcp/{MASKED}/sse"),
            format!("https://actions.example.com/v2/{MASKED}/sse"),
            format!("https://actions.example.com/mcp/{MASKED}/sse/more"),
            format!("https://actions.example.com/{MASKED}/{MASKED}/sse"),
            format!("https://{MASKED}/mcp/{MASKED}/sse"),
            format!("https://actions.example.com/mcp\\{MASKED}/sse"),
        ] {
            assert!(
                unmask_entry("zap", json!({"url": moved}), Some(&stored)).is_err(),
                "{moved}"
            );
        }
        // In the raw text too.
        let file = json!({"mcpServers": {"zap": stored}}).to_string();
        let text = mask_text(&file);
        assert!(!text.contains("sk-ak-7f3a"), "{text}");
        assert_eq!(unmask_text(&text, &file).unwrap(), file);
    }

    /// A file that does not parse is masked whole where its strings cannot be told apart
    /// (a quote left open, UTF-16), and every string value where they can: no secret
    /// reaches the page by the file being broken.
    #[test]
    fn a_file_that_does_not_parse_shows_no_secret() {
        let open_quote = "{\"mcpServers\": {\"x\": {\"command\": \"node\", \"env\": {\n  \"A\": \"sk-first-secret,\n  \"B\": \"sk-second-secret\"\n}}}}";
        let missing_brace = "{\"mcpServers\": {\"x\": {\"command\": \"node\", \"env\": \"API_KEY\": \"sk-third-secret\", \"url\": \"${HOME}\"}}}";
        let utf16: String = "{\"mcpServers\": {\"x\": {\"env\": {\"K\": \"sk-fourth-secret\"}}}}"
            .chars()
            .flat_map(|c| [c, '\0'])
            .collect();
        let colon_left_out = "{\"mcpServers\":{\"x\":{\"command\":\"node\",\"env\":{\"API_KEY\" \"sk-sixth-secret\"}}}}";
        let trailing_comma =
            "{\"mcpServers\": {\"x\": {\"command\": \"node\", \"args\": [\"sk-fifth-secret\",]}}}";
        for (text, secret) in [
            (open_quote, "sk-second-secret"),
            (missing_brace, "sk-third-secret"),
            (utf16.as_str(), "sk-fourth"),
            (trailing_comma, "sk-fifth-secret"),
            (colon_left_out, "sk-sixth-secret"),
        ] {
            let masked = mask_text(text);
            assert!(!masked.contains(secret), "{masked}");
            assert!(!masked.contains("sk-"), "{masked}");
            assert!(masked.contains(MASKED), "{masked}");
        }
        // Where strings can be told, the keys stay to show where the problem is; a
        // variable reference stays as it is.
        let masked = mask_text(missing_brace);
        assert!(
            masked.contains("\"mcpServers\"") && masked.contains("\"${HOME}\""),
            "{masked}"
        );
        assert_eq!(mask_text(open_quote), format!("\"{MASKED}\"\n"));
    }

    /// A file with a key written twice (an entry copied and not renamed) does not run, and
    /// is mended in the raw editor: its masks still take their stored values back, read
    /// loosely, while what runs is decided from the strict reading.
    #[test]
    fn a_file_with_a_key_written_twice_is_mended_without_typing_its_secrets_again() {
        let old = "{\"mcpServers\": {\"r\": {\"command\": \"x\", \"env\": {\"KEY\": \"sk-one-secret-value\"}}, \"r\": {\"command\": \"x\", \"env\": {\"KEY\": \"sk-one-secret-value\"}}}}";
        assert!(servers_of(old).is_empty(), "the runtime does not read it");
        let masked = mask_text(old);
        assert!(!masked.contains("sk-one-secret-value"), "{masked}");
        // The second copy deleted from the masked text.
        let single = "{\"mcpServers\": {\"r\": {\"command\": \"x\", \"env\": {\"KEY\": \"sk-one-secret-value\"}}}}";
        let mended = mask_text(single);
        assert!(
            masked.starts_with(mended.trim_end_matches("}}")),
            "{masked}"
        );
        let saved = unmask_text(&mended, old).unwrap();
        assert_eq!(saved, single);
        assert_eq!(servers_of(&saved).len(), 1);
    }

    /// The two copies hold different secrets: which one the mask stood for cannot be
    /// told, so neither is taken back (the last one used to be, for the first copy kept).
    #[test]
    fn a_key_written_twice_with_two_secrets_gives_neither_to_a_mask() {
        let old = "{\"mcpServers\": {\"gh\": {\"command\": \"npx\", \"env\": {\"TOKEN\": \"ghp-first-secret-aaaa\"}}, \"gh\": {\"command\": \"npx\", \"env\": {\"TOKEN\": \"ghp-second-secret-bbbb\"}}}}";
        let kept_first = mask_text(
            "{\"mcpServers\": {\"gh\": {\"command\": \"npx\", \"env\": {\"TOKEN\": \"ghp-first-secret-aaaa\"}}}}",
        );
        assert!(kept_first.contains(MASKED), "{kept_first}");
        assert_eq!(
            unmask_text(&kept_first, old),
            Err(MaskError::TwoValues {
                place: "mcpServers.gh.env.TOKEN".into()
            })
        );
        // The same for a URL's secret.
        let old = "{\"mcpServers\": {\"r\": {\"url\": \"https://h/mcp?token=first-secret\"}, \"r\": {\"url\": \"https://h/mcp?token=second-secret\"}}}";
        let kept_first =
            mask_text("{\"mcpServers\": {\"r\": {\"url\": \"https://h/mcp?token=first-secret\"}}}");
        assert!(matches!(
            unmask_text(&kept_first, old),
            Err(MaskError::TwoValues { .. })
        ));
    }

    #[test]
    fn the_raw_text_masks_a_urls_secrets_and_takes_them_back() {
        let old = "{\"mcpServers\": {\"r\": {\"url\": \"https://u:p@h/mcp?token=s3cret\", \"headers\": {\"A\": \"t0k\"}}}}";
        let masked = mask_text(old);
        assert!(
            !masked.contains("s3cret") && !masked.contains("u:p") && !masked.contains("t0k"),
            "{masked}"
        );
        assert_eq!(unmask_text(&masked, old).unwrap(), old);
        let moved = masked.replace("https://", "http://");
        assert!(unmask_text(&moved, old).is_err(), "{moved}");
    }

    #[test]
    fn stored_secrets_do_not_follow_an_entry_to_another_command_or_url() {
        let old =
            json!({"url": "https://mcp.example/", "headers": {"Authorization": "Bearer s3cret"}});
        let moved =
            json!({"url": "https://attacker.example/", "headers": {"Authorization": MASKED}});
        assert!(unmask_entry("remote", moved, Some(&old)).is_err());
        let kept = json!({"url": "https://mcp.example/", "headers": {"Authorization": MASKED}});
        assert_eq!(
            unmask_entry("remote", kept, Some(&old)).unwrap()["headers"]["Authorization"],
            "Bearer s3cret"
        );
        let old_text =
            r#"{"mcpServers": {"run": {"command": "node", "env": {"TOKEN": "s3cret"}}}}"#;
        let moved_text = format!(
            r#"{{"mcpServers": {{"run": {{"command": "sh", "env": {{"TOKEN": "{MASKED}"}}}}}}}}"#
        );
        assert!(unmask_text(&moved_text, old_text).is_err());
        let kept_text = moved_text.replace("\"sh\"", "\"node\"");
        assert!(
            unmask_text(&kept_text, old_text)
                .unwrap()
                .contains("s3cret")
        );
    }

    #[test]
    fn the_raw_text_is_masked_in_place_and_masks_sent_back_take_the_stored_values() {
        let old = "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\", \"env\": {\"K\": \"s3\\\"cret\", \"R\": \"${HOME}\"}},\n    \"b\": {\"url\": \"https://h/mcp\", \"headers\": {\"Authorization\": \"Bearer t0k\"}}\n  }\n}\n";
        let masked = mask_text(old);
        assert!(
            !masked.contains("s3") && !masked.contains("t0k"),
            "{masked}"
        );
        assert!(
            masked.contains("${HOME}") && masked.contains("\"command\": \"x\""),
            "{masked}"
        );
        assert_eq!(unmask_text(&masked, old).unwrap(), old);

        // An edit elsewhere keeps the values (another command does not: see
        // stored_secrets_do_not_follow_an_entry_to_another_command_or_url); moving a mask
        // to another server is refused.
        let with_cwd = "\"command\": \"x\", \"cwd\": \"/tmp\"";
        let edited = masked.replace("\"command\": \"x\"", with_cwd);
        assert_eq!(
            unmask_text(&edited, old).unwrap(),
            old.replace("\"command\": \"x\"", with_cwd)
        );
        let moved = masked.replace("\"b\"", "\"c\"");
        assert!(unmask_text(&moved, old).is_err());
        let into_args = masked.replace(
            "\"command\": \"x\"",
            &format!("\"command\": \"x\", \"args\": [\"{MASKED}\"]"),
        );
        assert!(unmask_text(&into_args, old).is_err());

        // A file that does not parse is masked too.
        let broken = "{\"mcpServers\": {\"a\": {\"env\": {\"K\": \"s3cret\"}, }";
        assert!(!mask_text(broken).contains("s3cret"));
    }

    /// A file within the size cap of many strings under one long key (an entry switched
    /// off, so nothing asked about it when it was imported): each string's path shares
    /// the key and keeps only the levels masking reads, so masking it costs about its
    /// size, not the key's size for every string (tens of gigabytes before). A string
    /// deep in an entry is never taken for a secret at the place its first levels name.
    #[test]
    fn masking_a_file_of_many_strings_under_a_long_key_shares_the_key() {
        let key = "k".repeat(64 * 1024);
        let strings = vec!["\"\""; 20_000].join(",");
        let text = format!(
            r#"{{"mcpServers": {{"{key}": {{"disabled": true, "command": "x", "args": [{strings}], "env": {{"TOKEN": "s3cret", "deep": {{"TOKEN": ["n0t"]}}}}}}}}}}"#
        );
        let tokens = string_tokens(&text, |_| true);
        let under_key: Vec<_> = tokens.iter().filter(|t| t.depth >= 3).collect();
        assert!(under_key.len() > 20_000);
        assert!(
            under_key
                .iter()
                .all(|t| Rc::ptr_eq(&t.path[1], &under_key[0].path[1]))
        );
        let deep = tokens.iter().find(|t| t.value == "n0t").unwrap();
        assert_eq!((deep.depth, deep.path.len()), (6, KEPT_PATH));
        assert!(deep.place().ends_with(".env.deep.…"), "{}", deep.place());
        assert_eq!(secret_place(deep), None);

        let masked = mask_text(&text);
        assert!(!masked.contains("s3cret") && masked.contains("n0t"));
        assert_eq!(unmask_text(&masked, &text).unwrap(), text);
    }

    /// A file that does not parse, nested deeper than any parse allows: each string's
    /// path and depth are read off the keys kept beside the frames (counting the whole
    /// stack for each string was quadratic in the nesting), and its strings are masked.
    #[test]
    fn a_broken_file_nested_deep_is_masked_string_by_string() {
        let text = format!(
            "{}{}{{\"env\": {{\"K\": \"s3cret\"",
            "[".repeat(200_000),
            "\"x\",".repeat(50_000)
        );
        let tokens = string_tokens(&text, |_| true);
        assert_eq!(tokens.len(), 50_003);
        assert_eq!(tokens[0].depth, 200_000);
        let secret = tokens.last().unwrap();
        assert_eq!((secret.value.as_str(), secret.depth), ("s3cret", 200_002));
        assert!(!mask_text(&text).contains("s3cret"));
    }

    /// The raw editor's text past the file's size cap is refused before anything is
    /// built from it.
    #[test]
    fn text_for_the_file_past_its_cap_is_refused_unread() {
        let text = format!(
            r#"{{"mcpServers": {{}}, "pad": "{}"}}"#,
            "x".repeat(conduit_mcp::config::MAX_FILE_BYTES as usize)
        );
        let error = conduit_mcp::config::document_of_text(&text).unwrap_err();
        assert!(
            matches!(error, conduit_mcp::config::ConfigError::TooLarge { .. }),
            "{error}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn import_reads_only_regular_files_up_to_a_mebibyte() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.json");
        std::fs::write(&good, "{\"mcpServers\": {}}").unwrap();
        assert!(read_import_file(&good).is_ok());

        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        assert!(
            read_import_file(&link).is_ok(),
            "a symlink counts as its target"
        );

        // Past a mebibyte only the places of its servers are read (Claude Code's file of
        // project histories); what is not JSON says where, servers of more than a
        // mebibyte are refused.
        let big = dir.path().join("big.json");
        std::fs::write(&big, vec![b' '; (IMPORT_MAX_BYTES + 1) as usize]).unwrap();
        let refused = read_import_file(&big).unwrap_err();
        assert!(
            matches!(refused, ImportFileError::NotJson { .. }),
            "{refused}"
        );
        assert!(refused.to_string().contains("line 1"), "{refused}");
        let history = format!(
            r#"{{"numStartups": 1, "projects": {{"/home/u/site": {{"history": ["{}"], "mcpServers": {{"db": {{"command": "db-mcp", "x": 1.10}}}}}}}}, "mcpServers": {{"web": {{"url": "https://x.example/mcp"}}}}}}"#,
            "h".repeat(IMPORT_MAX_BYTES as usize * 2)
        );
        std::fs::write(&big, history).unwrap();
        let excerpt = read_import_file(&big).unwrap();
        assert_eq!(
            excerpt,
            r#"{"mcpServers":{"web": {"url": "https://x.example/mcp"}},"projects":{"/home/u/site":{"mcpServers":{"db": {"command": "db-mcp", "x": 1.10}}}}}"#
        );
        let servers = format!(
            r#"{{"history": [], "mcpServers": {{"a": {{"command": "{}"}}}}}}"#,
            "a".repeat(IMPORT_MAX_BYTES as usize * 2)
        );
        std::fs::write(&big, servers).unwrap();
        assert!(matches!(
            read_import_file(&big),
            Err(ImportFileError::TooLarge { .. })
        ));

        assert!(matches!(
            read_import_file(dir.path()),
            Err(ImportFileError::NotAFile { .. })
        ));
        assert!(matches!(
            read_import_file(Path::new("/dev/zero")),
            Err(ImportFileError::NotAFile { .. })
        ));
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Refused before it is opened: opening a pipe with no writer would block.
        assert!(matches!(
            read_import_file(&fifo),
            Err(ImportFileError::NotAFile { .. })
        ));
        assert!(matches!(
            read_import_file(&dir.path().join("missing.json")),
            Err(ImportFileError::Missing { .. })
        ));
    }

    #[test]
    fn only_the_local_servers_the_host_looks_for_can_be_added_from_the_chat() {
        let local = |id: &str, base_url: &str| crate::providers::LocalProvider {
            id: id.into(),
            name: "x".into(),
            protocol: conduit_providers::Protocol::OpenAiChat,
            base_url: base_url.into(),
            models: vec![],
        };
        assert!(known_local_server(&local("ollama", "http://127.0.0.1:11434/v1")).is_ok());
        assert!(known_local_server(&local("ollama", "https://attacker.example/v1")).is_err());
        assert!(known_local_server(&local("anthropic", "http://127.0.0.1:11434/v1")).is_err());
    }

    #[test]
    fn the_known_files_are_under_home_and_the_config_folder_only() {
        let known = known_import_files(Path::new("/home/u"), Path::new("/home/u/.config"));
        assert!(known.iter().any(|k| k.id == "claude-desktop"
            && k.path == Path::new("/home/u/.config/Claude/claude_desktop_config.json")));
        assert!(known.iter().all(|k| k.path.starts_with("/home/u")));
    }
}
