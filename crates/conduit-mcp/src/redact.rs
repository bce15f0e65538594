//! Keeps a server's secrets out of what leaves this crate: errors, states, stderr tails
//! and log lines never carry a `${VAR}` value, a header value, or a URL's query or user
//! info.

/// What a hidden value shows as.
pub const MASK: &str = "••••";

/// Values shorter than this are not hidden: masking every "1" of a `DEBUG=1` would
/// garble messages and hide nothing worth hiding.
const MIN_SECRET_CHARS: usize = 4;

/// The secret values of one server, and the rule that hides them in text.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Longest first, so a value that contains another is hidden whole.
    values: Vec<String>,
    /// Those of `values` hidden in what a server answers too ([`Redactor::hide_in_result`]):
    /// the ones that look like keys or are named as secrets. Every value of an entry is
    /// hidden in errors and logs, but masking `debug` or a folder's path wherever a
    /// tool's result says it would garble what the model reads.
    in_answers: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Redactor({} values, {} in answers)",
            self.values.len(),
            self.in_answers.len()
        )
    }
}

impl Redactor {
    /// A redactor for these values (empty and very short ones are ignored). Each is also
    /// hidden trimmed, and a header value's credential alone (`Bearer <token>` hides the
    /// token wherever it shows, `Basic <base64>` also what it decodes to): a server
    /// quotes the token, not the header.
    pub fn new(values: impl IntoIterator<Item = String>) -> Self {
        let values = forms_of(values);
        let in_answers = values
            .iter()
            .filter(|value| looks_like_a_key(value))
            .cloned()
            .collect();
        Self { values, in_answers }
    }

    /// Also hides `values` in what a server answers, and everywhere else: values the
    /// entry names as secrets (an `env` variable or a header called `*_KEY`, `*TOKEN*`,
    /// `Authorization`…) whatever they look like.
    pub fn with_named_secrets(mut self, values: impl IntoIterator<Item = String>) -> Self {
        let named = forms_of(values);
        self.values = forms_of(self.values.drain(..).chain(named.iter().cloned()));
        self.in_answers = forms_of(self.in_answers.drain(..).chain(named));
        self
    }

    /// `text` with every secret value masked and every URL without query or user info.
    pub fn text(&self, text: &str) -> String {
        strip_url_secrets(&self.values_hidden(text))
    }

    /// `text` with every secret value masked, as written or form-encoded (as a URL's
    /// query carries it: a sign-in page's address names the server's URL in `resource`),
    /// the rest kept whole: for an address shown to the user in full.
    pub fn values_hidden(&self, text: &str) -> String {
        masked(text, &self.values)
    }

    /// Whether there is nothing to hide.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// A tool's result with this server's secret values hidden in its text, its embedded
    /// text resources and the strings of its structured content. A result that says it is
    /// an error also loses every URL's query and user info: SDKs turn a tool's exception
    /// into such a result, and an HTTP library's message names the URL it called, a key
    /// in its query included.
    pub fn hide_in_result(&self, result: &mut rmcp::model::CallToolResult) {
        let error = result.is_error == Some(true);
        let hide = |text: &mut String| {
            let masked = masked(text, &self.in_answers);
            let hidden = if error {
                strip_url_secrets(&masked)
            } else {
                masked
            };
            if hidden != *text {
                *text = hidden;
            }
        };
        for block in &mut result.content {
            hide_in_block(block, &hide);
        }
        if let Some(structured) = &mut result.structured_content {
            hide_in_json(structured, &hide);
        }
    }

    /// What a server read from a resource, with its secret values hidden in the text.
    pub fn hide_in_read(&self, result: &mut rmcp::model::ReadResourceResult) {
        let hide = |text: &mut String| {
            let hidden = masked(text, &self.in_answers);
            if hidden != *text {
                *text = hidden;
            }
        };
        for contents in &mut result.contents {
            if let rmcp::model::ResourceContents::TextResourceContents { text, .. } = contents {
                hide(text);
            }
        }
    }

    /// The length in bytes of the longest secret value (0 without any).
    pub fn longest(&self) -> usize {
        self.values.first().map_or(0, String::len)
    }

    /// Each line through [`Redactor::text`].
    pub fn lines(&self, lines: Vec<String>) -> Vec<String> {
        lines.iter().map(|line| self.text(line)).collect()
    }
}

/// `text` with each of `values` masked, as written or form-encoded.
fn masked(text: &str, values: &[String]) -> String {
    let mut out = text.to_owned();
    for value in values {
        let encoded: String = url::form_urlencoded::byte_serialize(value.as_bytes()).collect();
        for form in [value.as_str(), encoded.as_str()] {
            if out.contains(form) {
                out = out.replace(form, MASK);
            }
        }
    }
    out
}

/// The forms of `values` to hide: each trimmed and as given, and a header value's
/// credential alone; very short ones left out; longest first, so a value that contains
/// another is hidden whole.
fn forms_of(values: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut forms: Vec<String> = values
        .into_iter()
        .flat_map(|value| {
            let trimmed = value.trim().to_owned();
            let mut forms = credentials_in(&trimmed);
            forms.push(trimmed);
            forms.push(value);
            forms
        })
        .filter(|v| v.trim().chars().count() >= MIN_SECRET_CHARS)
        .collect();
    forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    forms.dedup();
    forms
}

/// Whether a value looks like a key rather than a word, a number or a path: at least 16
/// characters with letters and digits and no space, not a folder or a URL.
fn looks_like_a_key(value: &str) -> bool {
    crate::config::is_secret_path_segment(value)
        && !value.contains(char::is_whitespace)
        && !value.starts_with(['/', '.', '~'])
        && !value.contains("://")
}

/// The credential in a header value, where it has an authorization scheme: the token of
/// `Bearer <token>` or `Token <token>`; of `Basic <base64>` the base64, what it decodes to
/// (`user:password`) and the password.
fn credentials_in(value: &str) -> Vec<String> {
    let Some((scheme, credential)) = value.split_once(' ') else {
        return Vec::new();
    };
    let credential = credential.trim();
    let scheme = scheme.to_ascii_lowercase();
    match scheme.as_str() {
        "bearer" | "token" => vec![credential.to_owned()],
        "basic" => {
            use base64::Engine as _;
            let mut forms = vec![credential.to_owned()];
            if let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(credential)
                && let Ok(decoded) = String::from_utf8(decoded)
            {
                if let Some((_, password)) = decoded.split_once(':') {
                    forms.push(password.to_owned());
                }
                forms.push(decoded);
            }
            forms
        }
        _ => Vec::new(),
    }
}

/// Runs `hide` over the text a content block carries.
fn hide_in_block(block: &mut rmcp::model::ContentBlock, hide: &impl Fn(&mut String)) {
    use rmcp::model::{ContentBlock, ResourceContents};
    match block {
        ContentBlock::Text(text) => hide(&mut text.text),
        ContentBlock::Resource(embedded) => {
            if let ResourceContents::TextResourceContents { text, .. } = &mut embedded.resource {
                hide(text);
            }
        }
        _ => {}
    }
}

/// Runs `hide` over every string in `value`, keys left as they are.
fn hide_in_json(value: &mut serde_json::Value, hide: &impl Fn(&mut String)) {
    match value {
        serde_json::Value::String(text) => hide(text),
        serde_json::Value::Array(items) => {
            for item in items {
                hide_in_json(item, hide);
            }
        }
        serde_json::Value::Object(fields) => {
            for (_, field) in fields.iter_mut() {
                hide_in_json(field, hide);
            }
        }
        _ => {}
    }
}

/// The secrets of every server this process started: libraries log what servers answer
/// (rmcp logs a failed response's body), and a hostile server can echo what it was sent.
static LOGGED_SECRETS: parking_lot::RwLock<Redactor> = parking_lot::RwLock::new(Redactor {
    values: Vec::new(),
    in_answers: Vec::new(),
});

/// Hides `redactor`'s values in every later log line ([`scrub_log_line`]).
pub fn keep_out_of_logs(redactor: &Redactor) {
    if redactor.values.is_empty() {
        return;
    }
    let mut known = LOGGED_SECRETS.write();
    known.values = forms_of(
        known
            .values
            .drain(..)
            .chain(redactor.values.iter().cloned()),
    );
}

/// A log line with the known servers' secrets hidden and URLs stripped of query and
/// user info.
pub fn scrub_log_line(text: &str) -> String {
    LOGGED_SECRETS.read().text(text)
}

/// `text` with the user info, query and fragment of every http(s) URL in it removed
/// (either can hold a key: `https://user:key@host/`, `?api_key=`).
pub fn strip_url_secrets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let start = url_start(rest);
        let Some((at, scheme_len)) = start else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..at + scheme_len]);
        let after = &rest[at + scheme_len..];
        let end = after
            .find(|c: char| {
                c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`' | ')' | ']' | '}')
            })
            .unwrap_or(after.len());
        let url = &after[..end];
        let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
        let (authority, tail) = url.split_at(authority_end);
        out.push_str(
            authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host),
        );
        out.push_str(&tail[..tail.find(['?', '#']).unwrap_or(tail.len())]);
        rest = &after[end..];
    }
}

/// Where the first URL of a scheme that can carry a key starts in `text` (http, https,
/// ws, wss, in any case; also `:\/\/` as JSON escapes it), and the length of its scheme
/// and separator.
fn url_start(text: &str) -> Option<(usize, usize)> {
    const SCHEMES: [&str; 4] = ["https", "http", "wss", "ws"];
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(found) = text[from..].find(':') {
        let colon = from + found;
        let separator = [&b"://"[..], &b":\\/\\/"[..]]
            .into_iter()
            .find(|sep| bytes[colon..].starts_with(sep));
        if let Some(separator) = separator {
            for scheme in SCHEMES {
                let Some(start) = colon.checked_sub(scheme.len()) else {
                    continue;
                };
                let named = text
                    .get(start..colon)
                    .is_some_and(|name| name.eq_ignore_ascii_case(scheme));
                // A whole scheme, not the end of a longer word (`xhttps://`).
                let whole = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
                if named && whole {
                    return Some((start, scheme.len() + separator.len()));
                }
            }
        }
        from = colon + 1;
    }
    None
}

/// `text` with the token after each `Bearer ` (any case) masked: a server that logs the
/// request it got shows the user's sign-in, which is in no entry for the [`Redactor`].
pub fn without_bearer_tokens(text: &str) -> String {
    const WORD: &str = "bearer ";
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(found) = lower[at..].find(WORD) {
        let token_start = at + found + WORD.len();
        out.push_str(&text[at..token_start]);
        let token_len = text[token_start..]
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == ',')
            .unwrap_or(text.len() - token_start);
        if token_len > 0 {
            out.push_str(MASK);
        }
        at = token_start + token_len;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_s_credential_is_hidden_alone_and_a_value_trimmed() {
        use base64::Engine as _;
        let basic = base64::engine::general_purpose::STANDARD.encode("me:hunter2-long");
        let redactor = Redactor::new([
            "Bearer ghp_literal0123456789".to_owned(),
            format!("Basic {basic}"),
            "sk-with-space-0123 ".to_owned(),
        ]);
        for (said, secret) in [
            ("bad token ghp_literal0123456789 is expired", "ghp_literal"),
            ("credentials me:hunter2-long refused", "hunter2"),
            ("password hunter2-long refused", "hunter2"),
            (&format!("header {basic}"), &basic[..8]),
            ("key sk-with-space-0123 refused", "sk-with-space"),
        ] {
            let hidden = redactor.text(said);
            assert!(!hidden.contains(secret), "{said:?} → {hidden:?}");
            assert!(hidden.contains(MASK), "{hidden}");
        }
    }

    #[test]
    fn urls_of_any_case_web_sockets_and_json_escaped_lose_their_query() {
        for (said, kept) in [
            ("see Https://h/p?key=sk-1 now", "see Https://h/p now"),
            ("wss://h/socket?token=t-1", "wss://h/socket"),
            ("WS://me:pw@h/s", "WS://h/s"),
            (
                r#"{"url":"https:\/\/h\/p?key=sk-1"}"#,
                r#"{"url":"https:\/\/h\/p"}"#,
            ),
            ("xhttps://not-a-url?q=1", "xhttps://not-a-url?q=1"),
        ] {
            assert_eq!(strip_url_secrets(said), kept, "{said}");
        }
    }

    #[test]
    fn urls_lose_their_user_info_query_and_fragment() {
        assert_eq!(
            strip_url_secrets(
                "error sending request for url (https://me:pw@mcp.example.com:8443/mcp?key=sk-1&x=2#f): refused"
            ),
            "error sending request for url (https://mcp.example.com:8443/mcp): refused"
        );
        assert_eq!(
            strip_url_secrets("a \"http://h/p?t=1\" and http://other?q and plain text"),
            "a \"http://h/p\" and http://other and plain text"
        );
        assert_eq!(strip_url_secrets("no url here"), "no url here");
    }

    #[test]
    fn an_address_shown_whole_hides_the_values_as_written_and_form_encoded() {
        let redactor = Redactor::new(["sk-ak/7f3a+9c2e41".to_owned()]);
        assert_eq!(
            redactor.values_hidden(
                "https://auth.example/authorize?client_id=c&resource=https%3A%2F%2Fh.example%2Fmcp%2Fsk-ak%2F7f3a%2B9c2e41&state=s"
            ),
            format!("https://auth.example/authorize?client_id=c&resource=https%3A%2F%2Fh.example%2Fmcp%2F{MASK}&state=s")
        );
    }

    #[test]
    fn secret_values_are_masked_longest_first_and_short_ones_left() {
        let redactor = Redactor::new(["sk-abc".to_owned(), "sk-abcdef".to_owned(), "1".to_owned()]);
        assert_eq!(
            redactor.text("tokens sk-abcdef and sk-abc, DEBUG=1"),
            format!("tokens {MASK} and {MASK}, DEBUG=1")
        );
        assert_eq!(format!("{redactor:?}"), "Redactor(2 values, 0 in answers)");
    }

    #[test]
    fn a_bearer_token_in_a_log_line_is_masked() {
        assert_eq!(
            super::without_bearer_tokens(
                r#"got headers {"authorization": "Bearer eyJhbGciOi.x.y", "x": 1}"#
            ),
            r#"got headers {"authorization": "Bearer ••••", "x": 1}"#
        );
        assert_eq!(
            super::without_bearer_tokens("AUTHORIZATION: bearer abc123 then BEARER def"),
            "AUTHORIZATION: bearer •••• then BEARER ••••"
        );
        assert_eq!(
            super::without_bearer_tokens("no token here"),
            "no token here"
        );
        assert_eq!(
            super::without_bearer_tokens("ends with Bearer "),
            "ends with Bearer "
        );
        assert_eq!(super::without_bearer_tokens("Bearer é€"), "Bearer ••••");
    }
}
