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
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} values)", self.values.len())
    }
}

impl Redactor {
    /// A redactor for these values (empty and very short ones are ignored).
    pub fn new(values: impl IntoIterator<Item = String>) -> Self {
        let mut values: Vec<String> = values
            .into_iter()
            .filter(|v| v.trim().chars().count() >= MIN_SECRET_CHARS)
            .collect();
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        Self { values }
    }

    /// `text` with every secret value masked and every URL without query or user info.
    pub fn text(&self, text: &str) -> String {
        strip_url_secrets(&self.values_hidden(text))
    }

    /// `text` with every secret value masked, as written or form-encoded (as a URL's
    /// query carries it: a sign-in page's address names the server's URL in `resource`),
    /// the rest kept whole: for an address shown to the user in full.
    pub fn values_hidden(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for value in &self.values {
            let encoded: String = url::form_urlencoded::byte_serialize(value.as_bytes()).collect();
            for form in [value.as_str(), encoded.as_str()] {
                if out.contains(form) {
                    out = out.replace(form, MASK);
                }
            }
        }
        out
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

/// The secrets of every server this process started: libraries log what servers answer
/// (rmcp logs a failed response's body), and a hostile server can echo what it was sent.
static LOGGED_SECRETS: parking_lot::RwLock<Redactor> =
    parking_lot::RwLock::new(Redactor { values: Vec::new() });

/// Hides `redactor`'s values in every later log line ([`scrub_log_line`]).
pub fn keep_out_of_logs(redactor: &Redactor) {
    if redactor.values.is_empty() {
        return;
    }
    let mut known = LOGGED_SECRETS.write();
    let values = known.values.iter().chain(&redactor.values).cloned();
    *known = Redactor::new(values.collect::<Vec<_>>());
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
        let start = ["http://", "https://", "HTTP://", "HTTPS://"]
            .iter()
            .filter_map(|scheme| rest.find(scheme).map(|at| (at, scheme.len())))
            .min();
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(format!("{redactor:?}"), "Redactor(2 values)");
    }
}
