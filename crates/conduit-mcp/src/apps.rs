//! MCP Apps (`io.modelcontextprotocol/ui`, spec 2026-01-26): which tools have a view and
//! who may call a tool (the model, a view), a view's `ui://` resource read and checked,
//! and the content security policy built from what the view declares, never looser.

use base64::Engine;
use rmcp::model::{ReadResourceResult, ResourceContents};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::client::{Connection, McpError};

/// The extension's identifier in the client's `extensions` capability.
pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The MIME type of a view's HTML.
pub const VIEW_MIME: &str = "text/html;profile=mcp-app";
/// The largest view Conduit renders (a bundled single-file app is well under this).
pub const MAX_VIEW_BYTES: usize = 8 * 1024 * 1024;

/// The `ui://` resource of a tool's view: `_meta.ui.resourceUri`, or the deprecated flat
/// `_meta["ui/resourceUri"]`; `None` when it has none or names no `ui://` resource.
pub fn view_uri(meta: Option<&Map<String, Value>>) -> Option<String> {
    let meta = meta?;
    let nested = meta
        .get("ui")
        .and_then(|ui| ui.get("resourceUri"))
        .and_then(Value::as_str);
    let uri = nested.or_else(|| meta.get("ui/resourceUri").and_then(Value::as_str))?;
    uri.starts_with("ui://").then(|| uri.to_owned())
}

/// Who a tool is for (`_meta.ui.visibility`; both when it says nothing).
fn visible_to(meta: Option<&Map<String, Value>>, who: &str) -> bool {
    let visibility = meta
        .and_then(|meta| meta.get("ui"))
        .and_then(|ui| ui.get("visibility"))
        .and_then(Value::as_array);
    visibility.is_none_or(|list| list.iter().any(|v| v == who))
}

/// Whether a tool may be offered to a model: not one only a view may call.
pub fn for_models(meta: Option<&Map<String, Value>>) -> bool {
    visible_to(meta, "model")
}

/// Whether a view may call a tool of its own server: not one only the model may call.
pub fn for_views(meta: Option<&Map<String, Value>>) -> bool {
    visible_to(meta, "app")
}

/// A running server's tool as views and their host see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerTool {
    pub name: String,
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
    /// Its view's `ui://` resource, if it has one.
    pub view: Option<String>,
    pub for_models: bool,
    pub for_views: bool,
    /// What else its definition says ([`crate::tool::definition_details`]).
    pub details: String,
}

impl From<&rmcp::model::Tool> for ServerTool {
    fn from(tool: &rmcp::model::Tool) -> Self {
        let meta = tool.meta.as_deref();
        Self {
            name: tool.name.to_string(),
            description: tool.description.as_deref().unwrap_or_default().to_owned(),
            input_schema: Value::Object((*tool.input_schema).clone()),
            view: view_uri(meta),
            for_models: for_models(meta),
            for_views: for_views(meta),
            details: crate::tool::definition_details(tool),
        }
    }
}

/// Calls `tool` for a view and answers what the view gets: the result as MCP's JSON
/// (`content`, `structuredContent`, `isError`), without `_meta` (for neither the view
/// nor the model). A failure is the error the view's request gets. `stop` is the view's:
/// cancelled when it closes, so its calls do not run on to their cap.
pub async fn call_for_view(
    connection: &Connection,
    tool: &str,
    arguments: Value,
    stop: tokio_util::sync::CancellationToken,
) -> Result<Value, McpError> {
    let arguments = match arguments {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        other => {
            return Err(McpError::Other(format!(
                "arguments must be a JSON object, got {other}"
            )));
        }
    };
    let progress: conduit_core::tool::ProgressSink = std::sync::Arc::new(|_| {});
    let result = connection
        .call_tool(tool, arguments, progress, stop)
        .await?;
    let mut json = serde_json::to_value(&result).map_err(|e| McpError::Other(e.to_string()))?;
    if let Some(object) = json.as_object_mut() {
        object.remove("_meta");
    }
    // A view's result crosses into the window whole (and is copied there twice more): one
    // larger than a view could show is refused rather than carried.
    let size = conduit_core::content::json_size(&json);
    if size > MAX_VIEW_RESULT {
        return Err(McpError::Other(format!(
            "its result is {size} bytes; a view is given at most {MAX_VIEW_RESULT}"
        )));
    }
    Ok(json)
}

/// The largest tool result (as MCP's JSON) a view is given: as large as the largest view
/// ([`MAX_VIEW_BYTES`]) and a few images.
pub const MAX_VIEW_RESULT: usize = 8 * 1024 * 1024;

/// The origins a view declares it reaches (`_meta.ui.csp`), each checked: an entry that
/// is not a plain `scheme://host[:port]` origin (with at most a leading `*.` in the
/// host) is dropped, so nothing a server writes can widen the policy beyond the origins
/// it names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ViewDomains {
    /// `fetch`, XHR and WebSocket targets.
    pub connect: Vec<String>,
    /// Scripts, styles, images, fonts and media.
    pub resource: Vec<String>,
    /// Allowed `<base href>` targets.
    pub base_uri: Vec<String>,
    /// The entries dropped as unsafe or malformed, to say so.
    pub dropped: Vec<String>,
}

impl ViewDomains {
    /// Reads `_meta.ui.csp` (`connectDomains`, `resourceDomains`, `baseUriDomains`).
    /// `frameDomains` is dropped whole: the window's navigation guard, which WebKitGTK asks
    /// about every frame's navigation, lets a frame load only the app's pages and open
    /// views, so a page the view embeds from elsewhere could never load, and its header
    /// would name an origin it does not reach (`frame-src` stays `'none'`).
    pub fn from_meta(csp: Option<&Value>) -> Self {
        let mut domains = Self::default();
        let Some(csp) = csp.and_then(Value::as_object) else {
            return domains;
        };
        let mut take = |key: &str| -> Vec<String> {
            let mut kept = Vec::new();
            for entry in csp.get(key).and_then(Value::as_array).into_iter().flatten() {
                match entry.as_str().filter(|e| is_origin(e)) {
                    Some(origin) if !kept.iter().any(|k| k == origin) => {
                        kept.push(origin.to_owned())
                    }
                    Some(_) => {}
                    None => domains.dropped.push(entry.to_string()),
                }
            }
            kept
        };
        let (connect, resource, base_uri) = (
            take("connectDomains"),
            take("resourceDomains"),
            take("baseUriDomains"),
        );
        for entry in csp
            .get("frameDomains")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            domains.dropped.push(entry.to_string());
        }
        Self {
            connect,
            resource,
            base_uri,
            dropped: domains.dropped,
        }
    }

    /// Drops the origins on this machine (`localhost`, `127.0.0.1`, any scheme), and with
    /// `and_its_network` those on the local network (`192.168.1.1`, `nas.local`), naming
    /// them as dropped: the view of a server elsewhere must not reach the user's local
    /// services (a local model server, a database's web console, a router's) or probe
    /// their ports.
    pub fn keep_off_this_machine(&mut self, and_its_network: bool) {
        // The one rule of what is on this machine; a wildcard's `*.` is no URL host.
        let on_this_machine = |origin: &String| {
            let origin = origin.replacen("*.", "", 1);
            crate::config::url_on_this_machine(&origin)
                || (and_its_network && crate::config::url_on_local_network(&origin))
        };
        for list in [&mut self.connect, &mut self.resource, &mut self.base_uri] {
            let (local, kept): (Vec<String>, Vec<String>) =
                list.drain(..).partition(|origin| on_this_machine(origin));
            *list = kept;
            // Written as `from_meta` writes what it drops: the declaration as JSON.
            for origin in local {
                let declared = Value::from(origin).to_string();
                if !self.dropped.contains(&declared) {
                    self.dropped.push(declared);
                }
            }
        }
    }

    /// Whether the view reaches anything beyond itself.
    pub fn third_party(&self) -> bool {
        !(self.connect.is_empty() && self.resource.is_empty())
    }
}

/// `scheme://host[:port]` with `https`, `wss` (or `http`/`ws` for `localhost` and `127.0.0.1` only),
/// a host of letters, digits, `-` and `.` (optionally starting with `*.`), no path.
fn is_origin(entry: &str) -> bool {
    let Some((scheme, rest)) = entry.split_once("://") else {
        return false;
    };
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (rest, None),
    };
    let bare = host.strip_prefix("*.").unwrap_or(host);
    // A wildcard under one label (`*.com`) is every site of a top-level domain.
    let wildcard_ok = bare.len() == host.len() || bare.contains('.');
    let host_ok = wildcard_ok
        && !bare.is_empty()
        && bare.split('.').all(|label| {
            !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    let port_ok =
        port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    // Plain `http`/`ws` only to one exact loopback host: `*.localhost` would take in every
    // name under it, the app's own pages' and IPC's on some platforms among them.
    let loopback = matches!(host, "localhost" | "127.0.0.1");
    let scheme_ok = match scheme {
        "https" | "wss" => true,
        "http" | "ws" => loopback,
        _ => false,
    };
    scheme_ok && host_ok && port_ok
}

/// Device access a view asks for (`_meta.ui.permissions`), as the frame's `allow`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct ViewPermissions {
    pub camera: bool,
    pub microphone: bool,
    pub geolocation: bool,
    pub clipboard_write: bool,
}

impl ViewPermissions {
    fn from_meta(permissions: Option<&Value>) -> Self {
        let asked = |key: &str| {
            permissions
                .and_then(|p| p.get(key))
                .is_some_and(|v| !v.is_null() && v != &Value::Bool(false))
        };
        Self {
            camera: asked("camera"),
            microphone: asked("microphone"),
            geolocation: asked("geolocation"),
            clipboard_write: asked("clipboardWrite"),
        }
    }

    /// The iframe `allow` attribute (Permissions Policy), empty when none is asked.
    pub fn allow_attribute(&self) -> String {
        [
            (self.camera, "camera"),
            (self.microphone, "microphone"),
            (self.geolocation, "geolocation"),
            (self.clipboard_write, "clipboard-write"),
        ]
        .iter()
        .filter(|(asked, _)| *asked)
        .map(|(_, name)| *name)
        .collect::<Vec<_>>()
        .join("; ")
    }
}

/// A view, read from its server and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    pub uri: String,
    pub html: String,
    pub domains: ViewDomains,
    pub permissions: ViewPermissions,
    /// Whether the view wants a visible border (`_meta.ui.prefersBorder`).
    pub prefers_border: Option<bool>,
}

impl View {
    /// The policy the view's document is served with.
    pub fn content_security_policy(&self) -> String {
        content_security_policy(&self.domains)
    }
}

/// Why a view cannot be shown.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("reading the view {uri}: {source}")]
    Read {
        uri: String,
        #[source]
        source: McpError,
    },
    #[error("the server sent no {VIEW_MIME} content for {0}")]
    NotAView(String),
    #[error("the view {uri} is {bytes} bytes; views of at most {MAX_VIEW_BYTES} bytes are shown")]
    TooLarge { uri: String, bytes: usize },
    #[error("the view {uri} is not valid: {why}")]
    Invalid { uri: String, why: String },
}

/// Reads the view `uri` from its server.
pub async fn read_view(connection: &Connection, uri: &str) -> Result<View, ViewError> {
    let read = connection
        .read_resource(uri)
        .await
        .map_err(|source| ViewError::Read {
            uri: uri.to_owned(),
            source,
        })?;
    view_from(uri, read)
}

/// The view in a `resources/read` result: the content of type [`VIEW_MIME`] (text, or
/// base64 `blob`), its `_meta.ui` read for the policy, permissions and border.
pub fn view_from(uri: &str, read: ReadResourceResult) -> Result<View, ViewError> {
    let is_view = |mime: &Option<String>| {
        mime.as_deref()
            .is_some_and(|m| m.replace(' ', "").eq_ignore_ascii_case(VIEW_MIME))
    };
    let invalid = |why: String| ViewError::Invalid {
        uri: uri.to_owned(),
        why,
    };
    let (html, meta) = read
        .contents
        .into_iter()
        .find_map(|content| match content {
            ResourceContents::TextResourceContents {
                mime_type,
                text,
                meta,
                ..
            } if is_view(&mime_type) => Some(Ok((text, meta))),
            ResourceContents::BlobResourceContents {
                mime_type,
                blob,
                meta,
                ..
            } if is_view(&mime_type) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(blob.trim())
                    .map_err(|e| invalid(format!("its base64 does not decode ({e})")))
                    .and_then(|bytes| {
                        String::from_utf8(bytes)
                            .map_err(|_| invalid("its HTML is not UTF-8".into()))
                    })
                    .map(|text| (text, meta)),
            ),
            _ => None,
        })
        .ok_or_else(|| ViewError::NotAView(uri.to_owned()))??;
    if html.len() > MAX_VIEW_BYTES {
        return Err(ViewError::TooLarge {
            uri: uri.to_owned(),
            bytes: html.len(),
        });
    }
    let ui = meta.as_ref().and_then(|meta| meta.0.get("ui"));
    Ok(View {
        uri: uri.to_owned(),
        html,
        domains: ViewDomains::from_meta(ui.and_then(|ui| ui.get("csp"))),
        permissions: ViewPermissions::from_meta(ui.and_then(|ui| ui.get("permissions"))),
        prefers_border: ui
            .and_then(|ui| ui.get("prefersBorder"))
            .and_then(Value::as_bool),
    })
}

/// The policy of a view's document: its own inline code and nothing else unless
/// declared; declared origins only where the spec puts them; never `eval`, plugins,
/// form posts or a base URL elsewhere.
pub fn content_security_policy(domains: &ViewDomains) -> String {
    let with = |base: &str, extra: &[String]| {
        let mut sources = vec![base.to_owned()];
        sources.extend(extra.iter().cloned());
        sources.join(" ")
    };
    let or_none = |extra: &[String]| {
        if extra.is_empty() {
            "'none'".to_owned()
        } else {
            extra.join(" ")
        }
    };
    let resource = &domains.resource;
    [
        "default-src 'none'".to_owned(),
        format!(
            "script-src {}",
            with("'self' 'unsafe-inline' blob:", resource)
        ),
        format!("style-src {}", with("'self' 'unsafe-inline'", resource)),
        format!("img-src {}", with("'self' data: blob:", resource)),
        format!("font-src {}", with("'self' data:", resource)),
        format!("media-src {}", with("'self' data: blob:", resource)),
        format!("worker-src {}", with("'self' blob:", resource)),
        format!("connect-src {}", or_none(&domains.connect)),
        "frame-src 'none'".to_owned(),
        format!("base-uri {}", or_none(&domains.base_uri)),
        "object-src 'none'".to_owned(),
        "form-action 'none'".to_owned(),
    ]
    .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn the_view_uri_is_read_nested_first_then_flat_and_only_as_ui() {
        let nested =
            meta(json!({"ui": {"resourceUri": "ui://a/view.html"}, "ui/resourceUri": "ui://b"}));
        assert_eq!(view_uri(Some(&nested)).as_deref(), Some("ui://a/view.html"));
        let flat = meta(json!({"ui/resourceUri": "ui://b/app"}));
        assert_eq!(view_uri(Some(&flat)).as_deref(), Some("ui://b/app"));
        let web = meta(json!({"ui": {"resourceUri": "https://evil.example/x"}}));
        assert_eq!(view_uri(Some(&web)), None);
        assert_eq!(view_uri(None), None);
    }

    #[test]
    fn visibility_keeps_app_only_tools_from_models_and_model_only_tools_from_views() {
        let app_only = meta(json!({"ui": {"visibility": ["app"]}}));
        let model_only = meta(json!({"ui": {"visibility": ["model"]}}));
        let both = meta(json!({"ui": {"visibility": ["model", "app"]}}));
        assert!(!for_models(Some(&app_only)) && for_views(Some(&app_only)));
        assert!(for_models(Some(&model_only)) && !for_views(Some(&model_only)));
        assert!(for_models(Some(&both)) && for_views(Some(&both)));
        assert!(for_models(None) && for_views(None));
    }

    #[test]
    fn without_declarations_the_policy_reaches_nothing_beyond_the_view() {
        let policy = content_security_policy(&ViewDomains::default());
        assert!(policy.contains("default-src 'none'"));
        assert!(policy.contains("connect-src 'none'"));
        assert!(policy.contains("frame-src 'none'"));
        assert!(policy.contains("base-uri 'none'"));
        assert!(policy.contains("object-src 'none'"));
        assert!(!policy.contains("unsafe-eval"));
        assert!(!policy.contains("http"), "{policy}");
    }

    #[test]
    fn declared_origins_go_where_declared_and_nothing_can_loosen_the_policy() {
        let domains = ViewDomains::from_meta(Some(&json!({
            "connectDomains": ["https://api.example.com", "https://api.example.com", "*", "https:"],
            "resourceDomains": [
                "https://*.tile.openstreetmap.org",
                "https://cdn.example.com; script-src *",
                "'unsafe-eval'",
                "https://a.example.com 'unsafe-eval'",
                "data:",
                "http://cdn.example.com",
                "http://localhost:8080",
                "http://*.localhost",
                "ws://*.localhost:9000",
                "http://*.127.0.0.1",
                7
            ],
            "frameDomains": ["https://www.youtube.com/embed", "https://www.youtube.com"],
        })));
        assert_eq!(domains.connect, ["https://api.example.com"]);
        assert_eq!(
            domains.resource,
            ["https://*.tile.openstreetmap.org", "http://localhost:8080"]
        );
        // Even a plain origin: no frame of a view loads a page from elsewhere.
        assert!(
            domains
                .dropped
                .contains(&r#""https://www.youtube.com""#.to_owned()),
            "{:?}",
            domains.dropped
        );
        assert_eq!(domains.dropped.len(), 13, "{:?}", domains.dropped);
        assert!(domains.third_party());
        let policy = content_security_policy(&domains);
        assert!(policy.contains("connect-src https://api.example.com;"));
        assert!(policy.contains(
            "img-src 'self' data: blob: https://*.tile.openstreetmap.org http://localhost:8080;"
        ));
        for never in [
            "unsafe-eval",
            "script-src *",
            "cdn.example.com",
            " * ",
            "https: ",
        ] {
            assert!(!policy.contains(never), "{never} in {policy}");
        }
        assert_eq!(
            policy.matches(';').count(),
            11,
            "one directive per entry: {policy}"
        );
    }

    #[test]
    fn a_wildcard_under_one_label_is_dropped_and_a_remote_servers_view_stays_off_this_machine() {
        let mut domains = ViewDomains::from_meta(Some(&json!({
            "connectDomains": [
                "https://*.com",
                "https://*.example.com",
                "http://localhost:11434",
                "https://127.0.0.1:8443",
                "ws://localhost",
                "https://LOCALHOST:6443",
                "wss://127.0.0.2:9222",
                "https://0.0.0.0:8443",
                "https://api.localhost",
                "https://*.dev.localhost",
                "https://api.example.com",
            ],
            "resourceDomains": ["http://localhost:8080", "https://cdn.example.com"],
        })));
        assert_eq!(domains.dropped, ["\"https://*.com\""]);
        assert_eq!(domains.connect.len(), 10);
        domains.keep_off_this_machine(true);
        assert_eq!(
            domains.connect,
            ["https://*.example.com", "https://api.example.com"]
        );
        assert_eq!(domains.resource, ["https://cdn.example.com"]);
        assert_eq!(
            domains.dropped,
            [
                "\"https://*.com\"",
                "\"http://localhost:11434\"",
                "\"https://127.0.0.1:8443\"",
                "\"ws://localhost\"",
                "\"https://LOCALHOST:6443\"",
                "\"wss://127.0.0.2:9222\"",
                "\"https://0.0.0.0:8443\"",
                "\"https://api.localhost\"",
                "\"https://*.dev.localhost\"",
                "\"http://localhost:8080\"",
            ]
        );
        let policy = content_security_policy(&domains);
        assert!(
            !policy.contains("localhost") && !policy.contains("127.0.0.1"),
            "{policy}"
        );
    }

    /// A view of a server beyond the local network reaches none of its devices (a
    /// router's console, a NAS, a printer); one of a server on that network may.
    #[test]
    fn a_view_from_beyond_the_local_network_reaches_none_of_it() {
        let declared = || {
            ViewDomains::from_meta(Some(&json!({
                "connectDomains": [
                    "https://192.168.1.1",
                    "https://10.0.0.5:8443",
                    "https://172.20.0.2",
                    "https://100.100.1.1",
                    "https://169.254.169.254",
                    "https://nas.local",
                    "https://router.lan",
                    "https://printer",
                    "https://svc.home.arpa",
                    "https://api.example.com",
                    "https://172.32.0.1",
                ],
            })))
        };
        let mut far = declared();
        far.keep_off_this_machine(true);
        assert_eq!(
            far.connect,
            ["https://api.example.com", "https://172.32.0.1"]
        );
        assert_eq!(far.dropped.len(), 9, "{:?}", far.dropped);
        let mut near = declared();
        near.keep_off_this_machine(false);
        assert_eq!(near.connect.len(), 11);
        for (url, local) in [
            ("https://[fd12::1]/", true),
            ("https://[fe80::1]/", true),
            ("https://[2001:db8::1]/", false),
            ("https://example.com./", false),
        ] {
            assert_eq!(crate::config::url_on_local_network(url), local, "{url}");
        }
    }

    #[test]
    fn permissions_become_the_frames_allow_attribute() {
        let permissions = ViewPermissions::from_meta(Some(&json!({
            "microphone": {}, "clipboardWrite": {}, "camera": false
        })));
        assert_eq!(permissions.allow_attribute(), "microphone; clipboard-write");
        assert_eq!(ViewPermissions::from_meta(None).allow_attribute(), "");
    }

    fn read(contents: Vec<ResourceContents>) -> ReadResourceResult {
        ReadResourceResult::new(contents)
    }

    #[test]
    fn a_view_is_read_from_text_or_blob_with_its_meta_and_anything_else_is_refused() {
        let mut meta_object = rmcp::model::MetaObject::default();
        meta_object.0.insert(
            "ui".into(),
            json!({"csp": {"connectDomains": ["https://api.example.com"]}, "prefersBorder": true, "permissions": {"geolocation": {}}}),
        );
        let text = ResourceContents::TextResourceContents {
            uri: "ui://s/v".into(),
            mime_type: Some(VIEW_MIME.into()),
            text: "<p>hi</p>".into(),
            meta: Some(meta_object),
        };
        let view = view_from("ui://s/v", read(vec![text])).unwrap();
        assert_eq!(view.html, "<p>hi</p>");
        assert_eq!(view.domains.connect, ["https://api.example.com"]);
        assert_eq!(view.prefers_border, Some(true));
        assert!(view.permissions.geolocation);

        let blob = ResourceContents::blob(
            base64::engine::general_purpose::STANDARD.encode("<b>x</b>"),
            "ui://s/v",
        )
        .with_mime_type("text/html; profile=mcp-app");
        assert_eq!(
            view_from("ui://s/v", read(vec![blob])).unwrap().html,
            "<b>x</b>"
        );

        let plain = ResourceContents::text("<p>x</p>", "ui://s/v").with_mime_type("text/html");
        assert!(matches!(
            view_from("ui://s/v", read(vec![plain])),
            Err(ViewError::NotAView(_))
        ));
        let bad = ResourceContents::blob("%%%", "ui://s/v").with_mime_type(VIEW_MIME);
        assert!(matches!(
            view_from("ui://s/v", read(vec![bad])),
            Err(ViewError::Invalid { .. })
        ));
        let huge = ResourceContents::text("x".repeat(MAX_VIEW_BYTES + 1), "ui://s/v")
            .with_mime_type(VIEW_MIME);
        assert!(matches!(
            view_from("ui://s/v", read(vec![huge])),
            Err(ViewError::TooLarge { .. })
        ));
    }
}
