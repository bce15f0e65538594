//! `conduit providers` as a user runs it: keys go to the secret store and never to
//! settings, logs or output; a saved provider serves `conduit chat` and lists its models.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use conduit_e2e::cli::{conduit, on_terminal, text};
use conduit_e2e::llm_server::{Dialect, Reply, ScriptedLlm};
use serde_json::{Value, json};

const SECRET: &str = "sk-ant-very-secret-0987";
const GATEWAY_TOKEN: &str = "gw-token-5521";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_provider_keeps_its_key_secret_and_serves_chat_and_models() {
    let server = ScriptedLlm::start(vec![
        Reply::Json(json!({"data": [{"type": "model", "id": "claude-test", "display_name": "Claude Test"}], "has_more": false})),
        Dialect::Anthropic.text(&["Hi from the saved provider."]),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let h = home.path();

    let added = conduit(
        h,
        &[
            "providers",
            "add",
            "claude",
            "--kind",
            "anthropic",
            "--base-url",
            &server.url(),
            "--model",
            "claude-test",
            "--api-key-stdin",
            "--header",
            "X-Team: conduit",
            "--header-stdin",
            "X-Gateway-Token",
        ],
        Some(&format!("{SECRET}\n{GATEWAY_TOKEN}\n")),
    );
    assert!(added.status.success(), "{}", text(&added.stderr));

    // Header values are secrets too: settings name the headers only.
    let mut settings: Value =
        serde_json::from_str(&std::fs::read_to_string(h.join("settings.json")).unwrap()).unwrap();
    let entry = settings["providers"][0]
        .as_object_mut()
        .unwrap()
        .remove("headersSecret")
        .unwrap();
    assert!(
        entry
            .as_str()
            .unwrap()
            .starts_with("provider-headers:claude:"),
        "{entry}"
    );
    assert_eq!(
        settings["providers"][0],
        json!({"id": "claude", "protocol": "anthropic", "baseUrl": server.url(),
               "defaultModel": "claude-test", "storedHeaders": ["X-Gateway-Token", "X-Team"]})
    );

    let listed = conduit(h, &["providers", "list", "--json"], None);
    let list: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(list[0]["id"], "claude");
    assert!(
        list[0]["key"]
            .as_str()
            .unwrap()
            .starts_with("stored in the private file")
    );

    let models = conduit(h, &["providers", "models", "claude"], None);
    assert!(models.status.success(), "{}", text(&models.stderr));
    assert!(
        text(&models.stdout).contains("claude-test")
            && text(&models.stdout).contains("Claude Test")
    );

    let chat = conduit(
        h,
        &["chat", "--provider", "claude", "--json", "Hello"],
        None,
    );
    assert!(chat.status.success(), "{}", text(&chat.stderr));
    assert!(text(&chat.stdout).contains("Hi from the saved provider."));

    let requests = server.requests();
    assert_eq!(requests[0].path_and_query, "/v1/models?limit=1000");
    for request in &requests {
        assert_eq!(request.header("x-api-key"), Some(SECRET));
        assert_eq!(request.header("x-team"), Some("conduit"));
        assert_eq!(request.header("x-gateway-token"), Some(GATEWAY_TOKEN));
    }
    assert_eq!(requests[1].body["model"], "claude-test");

    // The key is in the private secrets file and nowhere else under the data folder.
    for output in [&added, &listed, &models, &chat] {
        for secret in [SECRET, GATEWAY_TOKEN] {
            assert!(
                !text(&output.stdout).contains(secret) && !text(&output.stderr).contains(secret)
            );
        }
    }
    let mut holders = Vec::new();
    find_secret(h, &mut holders);
    assert_eq!(
        holders,
        [h.join("secrets.json")],
        "the key and the header's token must live only in secrets.json"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(h.join("secrets.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    let removed = conduit(h, &["providers", "remove", "claude"], None);
    assert!(removed.status.success());
    let mut holders = Vec::new();
    find_secret(h, &mut holders);
    assert!(
        holders.is_empty(),
        "removing the provider removes its key and header values: {holders:?}"
    );
}

/// The files under `dir` that hold `SECRET` or `GATEWAY_TOKEN`.
fn find_secret(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            find_secret(&path, found);
        } else if [SECRET, GATEWAY_TOKEN].iter().any(|secret| {
            std::fs::read(&path)
                .unwrap()
                .windows(secret.len())
                .any(|w| w == secret.as_bytes())
        }) {
            found.push(path);
        }
    }
}

#[test]
fn a_header_read_from_stdin_must_be_there_or_nothing_is_saved() {
    let home = tempfile::tempdir().unwrap();
    let add = |stdin: &str| {
        conduit(
            home.path(),
            &[
                "providers",
                "add",
                "gw",
                "--kind",
                "openai-chat",
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--api-key-stdin",
                "--header-stdin",
                "X-Gateway-Token",
            ],
            Some(stdin),
        )
    };
    // The key's line, and no line for the header.
    let out = add(&format!("{SECRET}\n"));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--header-stdin \"X-Gateway-Token\" read an empty value"),
        "{}",
        text(&out.stderr)
    );
    assert!(!home.path().join("settings.json").exists());
    let mut holders = Vec::new();
    find_secret(home.path(), &mut holders);
    assert!(holders.is_empty(), "{holders:?}");
    let out = add(&format!("{SECRET}\n{GATEWAY_TOKEN}\n"));
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// A header a request could not send (a space in its name, a line break in its value) is
/// refused when the provider is added, saving nothing: saved, it failed every message.
#[test]
fn a_header_no_request_could_send_is_refused_when_added() {
    let home = tempfile::tempdir().unwrap();
    let add = |header: &str| {
        conduit(
            home.path(),
            &[
                "providers",
                "add",
                "gw",
                "--kind",
                "anthropic",
                "--base-url",
                "http://127.0.0.1:9",
                "--model",
                "m",
                "--header",
                header,
            ],
            None,
        )
    };
    let out = add("Bad Name: v");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("bad header name \"Bad Name\""),
        "{}",
        text(&out.stderr)
    );
    assert!(!home.path().join("settings.json").exists());
    let out = add("X-Ok: fine");
    assert!(out.status.success(), "{}", text(&out.stderr));
    // A saved provider uses its own key: another named for the run is refused, not
    // ignored.
    let out = conduit(
        home.path(),
        &[
            "chat",
            "--provider",
            "gw",
            "--api-key-env",
            "OTHER_KEY",
            "hi",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("cannot be used with '--api-key-env"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_broken_settings_file_is_reported_with_line_and_column_and_left_alone() {
    let home = tempfile::tempdir().unwrap();
    let broken = "{\n  \"providers\": [\n    {\"id\": \"x\",}\n  ]\n}\n";
    std::fs::write(home.path().join("settings.json"), broken).unwrap();
    let out = conduit(
        home.path(),
        &[
            "providers",
            "add",
            "y",
            "--kind",
            "openai-chat",
            "--base-url",
            "http://localhost:11434/v1",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("line 3, column"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("settings.json")).unwrap(),
        broken
    );
}

/// `providers add --api-key-stdin` at a terminal: the key typed is not shown, and the
/// terminal shows typing again afterwards, also when Ctrl-C ends the command half-way
/// through the key (SIGINT used to end it with echo still off, so the shell the user went
/// back to showed nothing they typed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_typed_at_a_terminal_is_hidden_and_ctrl_c_gives_the_terminal_back() {
    let home = tempfile::tempdir().unwrap();
    let argv: Vec<String> = [
        conduit_e2e::binary("conduit")
            .unwrap()
            .display()
            .to_string(),
        "providers".into(),
        "add".into(),
        "typed".into(),
        "--kind".into(),
        "openai-chat".into(),
        "--base-url".into(),
        "http://127.0.0.1:9/v1".into(),
        "--api-key-stdin".into(),
    ]
    .into();
    let env = json!({"CONDUIT_HOME": home.path(), "CONDUIT_SECRET_STORE": "file"});
    let asked = json!({"expect": "API key (typing is not shown): ", "timeout": 30});

    // Half a key, then Ctrl-C: the command ends as interrupted, nothing is saved, and
    // the terminal shows typing again.
    let steps = vec![
        asked.clone(),
        json!({"send": &SECRET[..8]}),
        json!({"key": "ctrl-c"}),
    ];
    let run = on_terminal(home.path(), &argv, env.clone(), steps, 30).await;
    assert_eq!(run.failure, None, "{}", run.transcript);
    assert_eq!(run.code, Some(130), "{}", run.transcript);
    assert!(
        run.echo,
        "the terminal was left hiding typing: {}",
        run.transcript
    );
    assert!(!run.transcript.contains(&SECRET[..8]), "{}", run.transcript);
    assert!(!home.path().join("settings.json").exists());

    // The whole key and Enter: saved, never shown, and the terminal as it was.
    let steps = vec![asked, json!({"send": format!("{SECRET}\r")})];
    let run = on_terminal(home.path(), &argv, env, steps, 30).await;
    assert_eq!(run.failure, None, "{}", run.transcript);
    assert_eq!(run.code, Some(0), "{}", run.transcript);
    assert!(run.echo, "{}", run.transcript);
    assert!(!run.transcript.contains(SECRET), "{}", run.transcript);
    let mut holders = Vec::new();
    find_secret(home.path(), &mut holders);
    holders.retain(|path| path.file_name() != Some("pty_script.json".as_ref()));
    assert_eq!(holders, [home.path().join("secrets.json")]);
}
