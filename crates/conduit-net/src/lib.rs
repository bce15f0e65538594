//! What every HTTP client of the process shares: one TLS context, the rule that a
//! redirect is followed only within the origin the request started at, and where in a URL
//! a key may travel ([`url_secrets`]), for MCP servers' and providers' errors alike.
//!
//! Each reqwest client built the usual way makes its own TLS context and reads the
//! system's CA store into it: about 0.9 MB and 60 ms of CPU per client here, for every MCP
//! server over HTTP, every provider client and every sign-in helper. Clients built with
//! [`client_builder`] share one, made on first use as reqwest makes its own (certificates
//! and host names verified, the system's roots, SNI, ALPN `http/1.1`). The CA store is
//! read once per process: a root added while the app runs counts after a restart.

use std::sync::OnceLock;

/// How many same-origin redirects one request may follow.
pub const MAX_REDIRECTS: usize = 10;

/// A redirect [`same_origin_redirects`] refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// To another origin (scheme, host and port; https to http on the same host is
    /// another origin): where the server pointed.
    Elsewhere(reqwest::Url),
    /// More than [`MAX_REDIRECTS`] in a row.
    TooMany,
}

/// The process's TLS context, made once. `None` when it cannot be made (no usable
/// OpenSSL configuration): each client then builds its own, and reqwest reports why.
fn shared_tls() -> Option<&'static native_tls::TlsConnector> {
    static TLS: OnceLock<Option<native_tls::TlsConnector>> = OnceLock::new();
    TLS.get_or_init(|| {
        native_tls::TlsConnector::builder()
            // What reqwest asks for with its own context (HTTP/2 is not built in).
            .request_alpns(&["http/1.1"])
            .build()
            .ok()
    })
    .as_ref()
}

/// A reqwest client builder on the process's one TLS context. TLS settings made on it
/// afterwards (roots, identities, versions) are ignored, as the context is already made:
/// none of Conduit's clients makes one.
pub fn client_builder() -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder();
    match shared_tls() {
        Some(tls) => builder.tls_backend_preconfigured(tls.clone()),
        // reqwest builds its own context and its `build()` says why if it cannot.
        None => builder,
    }
}

/// A redirect policy that follows redirects only within the origin of the first
/// request, so a key, a header or a request body never goes to a server the user did not
/// name, and https is never downgraded. Anything else fails the request with the error
/// `refuse` makes of it.
pub fn same_origin_redirects<E>(
    refuse: impl Fn(Refused) -> E + Send + Sync + 'static,
) -> reqwest::redirect::Policy
where
    E: std::error::Error + Send + Sync + 'static,
{
    reqwest::redirect::Policy::custom(move |attempt| {
        let Some(first) = attempt.previous().first() else {
            return attempt.stop();
        };
        let refusal = if first.origin() != attempt.url().origin() {
            Refused::Elsewhere(attempt.url().clone())
        } else if attempt.previous().len() > MAX_REDIRECTS {
            Refused::TooMany
        } else {
            return attempt.follow();
        };
        let error = refuse(refusal);
        attempt.error(error)
    })
}

/// Whether a URL's path segment looks like a key, as some services put one there
/// (`https://mcp.example/api/sk-ak-…/sse`, a UUID that is the credential): at least 16
/// characters with both letters and digits, and no `${NAME}`. The one rule for what the
/// settings window masks in a URL and what errors and logs hide; a segment masked that was
/// no key only stays hidden until the user shows the file's secrets.
pub fn is_secret_path_segment(segment: &str) -> bool {
    segment.chars().count() >= 16
        && !segment.contains("${")
        && segment.chars().any(|c| c.is_ascii_digit())
        && segment.chars().any(|c| c.is_ascii_alphabetic())
}

/// The parts of a URL that can hold a key: its user name, password, query (whole and
/// each value) and path segments that look like keys, so they are hidden wherever the
/// URL is quoted in part.
pub fn url_secrets(url: &str) -> Vec<String> {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return Vec::new();
    };
    let mut secrets = vec![parsed.username().to_owned()];
    secrets.extend(parsed.password().map(str::to_owned));
    secrets.extend(
        parsed
            .path_segments()
            .into_iter()
            .flatten()
            .filter(|segment| is_secret_path_segment(segment))
            .map(str::to_owned),
    );
    if let Some(query) = parsed.query() {
        secrets.push(query.to_owned());
        secrets.extend(parsed.query_pairs().map(|(_, value)| value.into_owned()));
    }
    secrets
}

#[cfg(test)]
mod tests;
