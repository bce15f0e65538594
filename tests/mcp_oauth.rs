//! Sign-in (OAuth) from the command line, against a loopback authorization server with
//! server-everything behind it: a server that needs sign-in says so and how; `conduit
//! mcp login` registers, sends the browser to the authorization page (a stand-in
//! `xdg-open` plays the browser and consents), receives the code on its loopback
//! redirect, and keeps the tokens in the private secrets file only; a later run uses and
//! refreshes them; `conduit mcp logout` revokes and forgets them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use conduit_e2e::cli::text;
use conduit_e2e::oauth_server::{OAuthServer, UNTIL_REFRESH_DUE, browser_dir, path_with};
use serde_json::{Value, json};

fn conduit(home: &Path, browser: &Path, args: &[&str]) -> Output {
    Command::new(conduit_e2e::binary("conduit").unwrap())
        .args(args)
        .env("CONDUIT_HOME", home)
        .env("CONDUIT_SECRET_STORE", "file")
        .env("CONDUIT_LOG", "trace")
        .env("CONDUIT_MCP_START_TIMEOUT", "15")
        .env("PATH", path_with(browser))
        .output()
        .unwrap()
}

fn state_of(home: &Path, browser: &Path, server: &str) -> Value {
    let out = conduit(home, browser, &["mcp", "list", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    list.as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == server)
        .cloned()
        .unwrap_or_else(|| panic!("{server} not listed: {list}"))
}

/// A home whose one server, `tracker`, is server-everything behind the loopback
/// authorization server; its tokens live 31 s (rmcp refreshes a token with less than 30 s
/// left, counted in whole seconds, so any run [`UNTIL_REFRESH_DUE`] after the sign-in
/// refreshes first).
struct Tracker {
    _upstream: tokio::process::Child,
    auth: OAuthServer,
    home: tempfile::TempDir,
    browser: std::path::PathBuf,
    servers_text: String,
}

impl Tracker {
    async fn start() -> Self {
        Self::behind(true).await
    }

    /// With the authorization server letting clients register themselves, or not (then
    /// only [`conduit_e2e::oauth_server::PREREGISTERED_CLIENT`] is known).
    async fn behind(registration: bool) -> Self {
        let (upstream, port) = conduit_e2e::everything_over_http().await.unwrap();
        let upstream_url = format!("http://127.0.0.1:{port}");
        let lifetime = Duration::from_secs(31);
        let auth = if registration {
            OAuthServer::start(&upstream_url, lifetime).await
        } else {
            OAuthServer::without_registration(&upstream_url, lifetime).await
        }
        .unwrap();
        let home = tempfile::tempdir().unwrap();
        let browser = browser_dir(home.path(), true).unwrap();
        let servers = json!({"mcpServers": {"tracker": {"type": "http", "url": auth.mcp_url()}}});
        let servers_text = serde_json::to_string_pretty(&servers).unwrap();
        std::fs::write(home.path().join("mcp_servers.json"), &servers_text).unwrap();
        Self {
            _upstream: upstream,
            auth,
            home,
            browser,
            servers_text,
        }
    }

    /// Runs `conduit` with `args` in this home, off the test's runtime.
    fn runner(
        &self,
    ) -> impl Fn(&'static [&'static str]) -> tokio::task::JoinHandle<Output> + use<> {
        let (home, browser) = (self.home.path().to_owned(), self.browser.clone());
        move |args| {
            let (home, browser) = (home.clone(), browser.clone());
            tokio::task::spawn_blocking(move || conduit(&home, &browser, args))
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_uses_refreshes_and_logout_revokes() {
    let tracker = Tracker::start().await;
    let (auth, home, browser, servers_text) = (
        &tracker.auth,
        &tracker.home,
        &tracker.browser,
        tracker.servers_text.as_str(),
    );
    let run = tracker.runner();

    // Before: the server asks for sign-in, and a call says how to give it.
    let before = run(&["mcp", "list"]).await.unwrap();
    assert!(
        text(&before.stdout).contains("run `conduit mcp login tracker`"),
        "{}",
        text(&before.stdout)
    );
    let (home_path, browser_path) = (home.path().to_owned(), browser.clone());
    let listed =
        tokio::task::spawn_blocking(move || state_of(&home_path, &browser_path, "tracker"))
            .await
            .unwrap();
    assert_eq!(listed["state"], "sign_in_required", "{listed}");
    let call = run(&[
        "mcp",
        "call",
        "tracker",
        "get-sum",
        "--args",
        r#"{"a": 1, "b": 2}"#,
    ])
    .await
    .unwrap();
    assert!(!call.status.success());
    assert!(
        text(&call.stderr).contains("conduit mcp login tracker"),
        "{}",
        text(&call.stderr)
    );
    assert_eq!(auth.count("register"), 0);

    // Sign in.
    let login = run(&["mcp", "login", "tracker"]).await.unwrap();
    assert!(
        login.status.success(),
        "{}{}",
        text(&login.stdout),
        text(&login.stderr)
    );
    assert!(
        text(&login.stdout).contains("Signed in to tracker: ready"),
        "{}",
        text(&login.stdout)
    );
    // The browser's command line, which other users can read, holds only a page with a random path
    // of the loopback listener; the terminal shows the authorization URL in full.
    let opened = std::fs::read_to_string(browser.join("opened.txt")).unwrap();
    let start = opened.lines().next().unwrap();
    assert!(
        start.starts_with("http://127.0.0.1:") && start.contains("/sign-in/"),
        "{start}"
    );
    for hidden in ["state", "code_challenge", "resource", &auth.mcp_url()] {
        assert!(!start.contains(hidden), "{hidden} in {start}");
    }
    let stderr = text(&login.stderr);
    let authorization = stderr
        .lines()
        .skip_while(|line| !line.ends_with("visit:"))
        .nth(1)
        .unwrap_or_else(|| panic!("the URL is shown in full: {stderr}"));
    let url = reqwest::Url::parse(authorization).unwrap();
    let query: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["resource"], auth.mcp_url());
    assert_eq!(query["scope"], conduit_e2e::oauth_server::SCOPE);
    assert!(query["redirect_uri"].starts_with("http://127.0.0.1:"));
    for step in ["register", "authorize", "token:authorization_code"] {
        assert_eq!(auth.count(step), 1, "{step}: {:?}", auth.log());
    }

    // The tokens are in the private secrets file, nowhere else: not in the mcpServers
    // file, not in the logs.
    let login_text = format!("{}{}", text(&login.stdout), text(&login.stderr));
    assert!(
        !login_text.contains("access-"),
        "a token reached the output"
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("mcp_servers.json")).unwrap(),
        servers_text
    );
    let holding: Vec<String> = conduit_e2e::text_files_under(home.path())
        .into_iter()
        .filter(|(_, text)| text.contains("access-"))
        .map(|(path, _)| path)
        .collect();
    assert_eq!(holding.len(), 1, "{holding:?}");
    assert!(holding[0].ends_with("secrets.json"), "{holding:?}");

    // A later run uses the stored tokens, refreshing them first (they are near expiry).
    let until = Instant::now() + UNTIL_REFRESH_DUE;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sum = run(&[
        "mcp",
        "call",
        "tracker",
        "get-sum",
        "--args",
        r#"{"a": 20, "b": 22}"#,
        "--json",
    ])
    .await
    .unwrap();
    assert!(sum.status.success(), "{}", text(&sum.stderr));
    assert!(text(&sum.stdout).contains("42"), "{}", text(&sum.stdout));
    assert!(auth.count("token:refresh_token") >= 1, "{:?}", auth.log());
    assert_eq!(auth.count("authorize"), 1, "no second sign-in");

    // Sign out: revoked at the authorization server and forgotten here.
    let logout = run(&["mcp", "logout", "tracker"]).await.unwrap();
    assert!(logout.status.success(), "{}", text(&logout.stderr));
    assert!(
        text(&logout.stdout).contains("its tokens were revoked"),
        "{}",
        text(&logout.stdout)
    );
    assert!(auth.count("revoke:refresh_token") == 1, "{:?}", auth.log());
    assert!(auth.count("revoke:access_token") == 1, "{:?}", auth.log());
    assert!(
        conduit_e2e::text_files_under(home.path())
            .iter()
            .all(|(_, text)| !text.contains("access-") && !text.contains("mcp-oauth:")),
        "the tokens were not forgotten"
    );
    let (home_path, browser_path) = (home.path().to_owned(), browser.clone());
    let after = tokio::task::spawn_blocking(move || state_of(&home_path, &browser_path, "tracker"))
        .await
        .unwrap();
    assert_eq!(after["state"], "sign_in_required", "{after}");
}

/// The app and `conduit` share the stored sign-in; its refresh token is spent once. Two
/// processes refreshing at once take turns (the second reads what the first saved), so
/// neither spends a token the other already spent and the sign-in is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_refreshing_at_once_keep_the_sign_in() {
    let tracker = Tracker::start().await;
    let auth = &tracker.auth;
    let run = tracker.runner();
    let login = run(&["mcp", "login", "tracker"]).await.unwrap();
    assert!(login.status.success(), "{}", text(&login.stderr));
    // Due to refresh (31 s tokens), and each refresh slow enough that two overlap.
    tokio::time::sleep(UNTIL_REFRESH_DUE).await;
    auth.slow_refreshes(Duration::from_millis(1500));
    let call: &'static [&'static str] = &[
        "mcp",
        "call",
        "tracker",
        "get-sum",
        "--args",
        r#"{"a": 20, "b": 22}"#,
    ];
    let (first, second) = tokio::join!(run(call), run(call));
    for out in [first.unwrap(), second.unwrap()] {
        assert!(
            out.status.success() && text(&out.stdout).contains("42"),
            "{}{}\n{:?}",
            text(&out.stdout),
            text(&out.stderr),
            auth.log()
        );
    }
    // Overlapping, both refresh, one after the other with what the first saved; on a
    // loaded machine the second may start after the first saved and find the token fresh.
    // Either way no refresh spends a token already spent.
    let refreshes = auth.count("token:refresh_token");
    assert!((1..=2).contains(&refreshes), "{:?}", auth.log());
    assert_eq!(
        auth.count("token:refresh_token:unknown"),
        0,
        "{:?}",
        auth.log()
    );
    // The stored refresh token is the last one issued: a later run, due to refresh
    // again, refreshes with it.
    auth.slow_refreshes(Duration::ZERO);
    tokio::time::sleep(UNTIL_REFRESH_DUE).await;
    let later = run(call).await.unwrap();
    assert!(later.status.success(), "{}", text(&later.stderr));
    assert_eq!(
        auth.count("token:refresh_token"),
        refreshes + 1,
        "{:?}",
        auth.log()
    );
    assert_eq!(
        auth.count("token:refresh_token:unknown"),
        0,
        "{:?}",
        auth.log()
    );
    assert_eq!(
        auth.count("authorize"),
        1,
        "no second sign-in: {:?}",
        auth.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_its_own_authorization_header_is_not_signed_in_to() {
    let (_upstream, port) = conduit_e2e::everything_over_http().await.unwrap();
    let auth = OAuthServer::start(&format!("http://127.0.0.1:{port}"), Duration::from_secs(60))
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let browser = browser_dir(home.path(), true).unwrap();
    let servers = json!({"mcpServers": {"keyed": {
        "type": "http", "url": auth.mcp_url(), "headers": {"Authorization": "Bearer wrong"}
    }}});
    std::fs::write(
        home.path().join("mcp_servers.json"),
        serde_json::to_string(&servers).unwrap(),
    )
    .unwrap();
    let (home_path, browser_path) = (home.path().to_owned(), browser.clone());
    let (state, login) = tokio::task::spawn_blocking(move || {
        (
            state_of(&home_path, &browser_path, "keyed"),
            conduit(&home_path, &browser_path, &["mcp", "login", "keyed"]),
        )
    })
    .await
    .unwrap();
    assert_eq!(state["state"], "failed", "{state}");
    assert!(
        state["reason"]
            .as_str()
            .unwrap()
            .contains("refused the Authorization header"),
        "{state}"
    );
    assert!(!login.status.success());
    assert!(
        text(&login.stderr).contains("signs in with that"),
        "{}",
        text(&login.stderr)
    );
    assert_eq!(auth.count("register"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_registration_the_user_is_asked_for_a_client_id_and_a_given_one_signs_in() {
    let tracker = Tracker::behind(false).await;
    let (auth, home, browser) = (&tracker.auth, &tracker.home, &tracker.browser);
    let run = tracker.runner();
    let write = |entry: Value| {
        std::fs::write(
            home.path().join("mcp_servers.json"),
            json!({"mcpServers": {"tracker": entry}}).to_string(),
        )
        .unwrap();
    };
    write(json!({"type": "http", "url": auth.mcp_url()}));
    let refused = run(&["mcp", "login", "tracker"]).await.unwrap();
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains(r#"put a client id it gave you in the entry's "oauth""#),
        "{}",
        text(&refused.stderr)
    );
    assert!(
        !browser.join("opened.txt").exists(),
        "no browser without a client"
    );

    write(json!({"type": "http", "url": auth.mcp_url(),
        "oauth": {"clientId": conduit_e2e::oauth_server::PREREGISTERED_CLIENT}}));
    let login = run(&["mcp", "login", "tracker"]).await.unwrap();
    assert!(
        text(&login.stdout).contains("Signed in to tracker: ready"),
        "{}{}",
        text(&login.stdout),
        text(&login.stderr)
    );
    assert_eq!(auth.count("register"), 0);
    assert_eq!(auth.count("token:authorization_code"), 1);
}

/// A confidential client (`oauth.clientId` and `oauth.clientSecret` in the entry) proves
/// itself with its secret on the refresh too, not only when the code is exchanged: before,
/// every refresh failed with `invalid_client` once the first token expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confidential_client_refreshes_with_its_secret() {
    use conduit_e2e::oauth_server::{CONFIDENTIAL_CLIENT, CONFIDENTIAL_SECRET};
    let tracker = Tracker::behind(false).await;
    let (auth, home) = (&tracker.auth, &tracker.home);
    let run = tracker.runner();
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"tracker": {"type": "http", "url": auth.mcp_url(),
            "oauth": {"clientId": CONFIDENTIAL_CLIENT, "clientSecret": CONFIDENTIAL_SECRET}}}})
        .to_string(),
    )
    .unwrap();
    let login = run(&["mcp", "login", "tracker"]).await.unwrap();
    assert!(
        text(&login.stdout).contains("Signed in to tracker: ready"),
        "{}{}",
        text(&login.stdout),
        text(&login.stderr)
    );
    let until = Instant::now() + UNTIL_REFRESH_DUE;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sum = run(&[
        "mcp",
        "call",
        "tracker",
        "get-sum",
        "--args",
        r#"{"a": 20, "b": 22}"#,
        "--json",
    ])
    .await
    .unwrap();
    assert!(sum.status.success(), "{}", text(&sum.stderr));
    assert!(text(&sum.stdout).contains("42"), "{}", text(&sum.stdout));
    assert_eq!(auth.count("token:refresh_token"), 1, "{:?}", auth.log());
    assert_eq!(auth.count("token:invalid_client"), 0, "{:?}", auth.log());
    assert_eq!(auth.count("authorize"), 1, "no second sign-in");
}

/// A server whose metadata later names other endpoints (as a hostile server would, to be
/// sent the refresh token, or the tokens at sign-out) gets nothing: the tokens go only to
/// the endpoints the sign-in used. A moved token endpoint forgets the sign-in; a moved
/// revocation endpoint is not where a sign-out revokes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_go_only_to_the_endpoints_bound_at_sign_in() {
    let tracker = Tracker::start().await;
    let (auth, home) = (&tracker.auth, &tracker.home);
    let run = tracker.runner();
    let stolen = |auth: &OAuthServer| -> Vec<String> {
        auth.log()
            .into_iter()
            .filter(|e| e.starts_with("steal:"))
            .collect()
    };
    let call = &[
        "mcp",
        "call",
        "tracker",
        "get-sum",
        "--args",
        r#"{"a": 20, "b": 22}"#,
    ];

    let login = run(&["mcp", "login", "tracker"]).await.unwrap();
    assert!(login.status.success(), "{}", text(&login.stderr));

    // Only the revocation endpoint moves: the tokens still work; signing out revokes
    // where the sign-in was made.
    auth.move_endpoints(false, true);
    let sum = run(call).await.unwrap();
    assert!(sum.status.success(), "{}", text(&sum.stderr));
    let logout = run(&["mcp", "logout", "tracker"]).await.unwrap();
    assert!(logout.status.success(), "{}", text(&logout.stderr));
    assert!(
        text(&logout.stdout).contains("its tokens were revoked"),
        "{}",
        text(&logout.stdout)
    );
    assert_eq!(auth.count("revoke:refresh_token"), 1, "{:?}", auth.log());
    assert_eq!(stolen(auth), Vec::<String>::new());

    // Signed in again; while the metadata is down (rmcp then makes up `/token` on the
    // server's origin) the sign-in is neither used nor forgotten, and works once it is back.
    auth.move_endpoints(false, false);
    let login = run(&["mcp", "login", "tracker"]).await.unwrap();
    assert!(login.status.success(), "{}", text(&login.stderr));
    auth.metadata_down(true);
    let down = run(call).await.unwrap();
    assert!(!down.status.success());
    assert!(
        conduit_e2e::text_files_under(home.path())
            .iter()
            .any(|(_, text)| text.contains("mcp-oauth:")),
        "an outage forgot the sign-in"
    );
    auth.metadata_down(false);
    let back = run(call).await.unwrap();
    assert!(back.status.success(), "{}", text(&back.stderr));
    let logout = run(&["mcp", "logout", "tracker"]).await.unwrap();
    assert!(logout.status.success(), "{}", text(&logout.stderr));

    // Signed in again, then the token endpoint moves: the next run, due to refresh,
    // forgets the sign-in instead of sending the refresh token there.
    auth.move_endpoints(false, false);
    let login = run(&["mcp", "login", "tracker"]).await.unwrap();
    assert!(login.status.success(), "{}", text(&login.stderr));
    auth.move_endpoints(true, false);
    let until = Instant::now() + UNTIL_REFRESH_DUE;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let refused = run(call).await.unwrap();
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("conduit mcp login tracker"),
        "{}",
        text(&refused.stderr)
    );
    assert_eq!(stolen(auth), Vec::<String>::new());
    assert!(
        conduit_e2e::text_files_under(home.path())
            .iter()
            .all(|(_, text)| !text.contains("refresh-") && !text.contains("mcp-oauth:")),
        "the sign-in was not forgotten"
    );
}

/// An entry pointed elsewhere while its sign-in waits in the browser: the tokens the
/// browser's answer brings are forgotten as the sign-in ends, so no entry that names the
/// old URL later inherits them, and the sign-in says why it failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_whose_entry_moved_while_the_browser_was_open_is_forgotten() {
    let tracker = Tracker::start().await;
    let (home, browser) = (&tracker.home, &tracker.browser);
    // The browser waits for the user's consent.
    std::fs::remove_file(browser.join("go")).unwrap();
    let run = tracker.runner();
    let login = run(&["mcp", "login", "tracker"]);
    let opened = browser.join("opened.txt");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !opened.exists() {
        assert!(Instant::now() < deadline, "the browser was never opened");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Meanwhile the entry is pointed at another server.
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"tracker": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}})
            .to_string(),
    )
    .unwrap();
    conduit_e2e::oauth_server::consent(browser).unwrap();
    let login = login.await.unwrap();
    assert!(!login.status.success(), "{}", text(&login.stdout));
    assert!(
        text(&login.stderr).contains("pointed elsewhere while it signed in"),
        "{}",
        text(&login.stderr)
    );
    // The browser's answer did reach the token endpoint; its tokens are not kept.
    assert_eq!(tracker.auth.count("token:authorization_code"), 1);
    assert!(
        conduit_e2e::text_files_under(home.path())
            .iter()
            .all(|(_, text)| !text.contains("access-") && !text.contains("mcp-oauth:")),
        "the moved entry's sign-in was kept"
    );
}
