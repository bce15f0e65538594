//! The webview is untrusted ground, in the real app under Xvfb: the test acts as a hostile
//! script in each window, calling the app's commands through
//! `window.__TAURI_INTERNALS__.invoke`. The chat window cannot call settings commands at
//! all; in the Settings window, edits that would start a program or reach a new URL wait
//! for a native confirmation (answered here with xdotool, as a user would) and a refusal
//! writes nothing and starts nothing; deleting a server, a provider or a conversation
//! waits for one too; secret values never reach the page; import reads only known or
//! picked files; links open only after the user saw them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use conduit_e2e::artifacts_dir;
use conduit_e2e::desktop::{DesktopSession, app_binary};
use conduit_e2e::native_dialog::{Answer, answer_confirmation, press_as_it_shows};
use fantoccini::Locator;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const SECRET: &str = "ghp-CONDUIT-webview-SECRET-9137";
const MASKED: &str = "••••••••";

/// A reply to a command a page script made: its value, or the error it was refused with.
#[derive(Debug)]
struct Reply {
    ok: Option<Value>,
    err: Option<String>,
    raw: String,
}

struct Page<'a> {
    session: &'a DesktopSession,
    /// Every reply the page got, to check that no secret is in any of them.
    seen: std::sync::Mutex<Vec<String>>,
}

impl<'a> Page<'a> {
    fn new(session: &'a DesktopSession) -> Self {
        Self {
            session,
            seen: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn record(&self, raw: Value) -> Reply {
        let text = raw.to_string();
        self.seen.lock().unwrap().push(text.clone());
        Reply {
            ok: raw.get("ok").cloned(),
            err: raw
                .get("err")
                .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_owned)),
            raw: text,
        }
    }

    /// Calls `command` as a script in the page would, and waits for the reply.
    async fn invoke(&self, command: &str, args: Value) -> Reply {
        let script = format!(
            "const done = arguments[arguments.length - 1];\
             window.__TAURI_INTERNALS__.invoke({command:?}, {args})\
               .then(r => done({{ok: r === undefined ? null : r}}),\
                     e => done({{err: typeof e === 'string' ? e : JSON.stringify(e)}}));"
        );
        let raw = self
            .session
            .client
            .execute_async(&script, vec![])
            .await
            .unwrap();
        self.record(raw)
    }

    /// Calls `command`, answers the native confirmation it raises, and returns the reply.
    async fn invoke_confirmed(&self, command: &str, args: Value, answer: Answer) -> Reply {
        let slot = format!("__reply_{}", rand_suffix());
        self.session
            .js(&format!(
                "window.{slot} = null;\
                 window.__TAURI_INTERNALS__.invoke({command:?}, {args})\
                   .then(r => window.{slot} = {{ok: r === undefined ? null : r}},\
                         e => window.{slot} = {{err: typeof e === 'string' ? e : JSON.stringify(e)}});\
                 return null;"
            ))
            .await
            .unwrap();
        tokio::task::spawn_blocking(move || answer_confirmation(answer, WAIT))
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{command}: {e}"));
        let raw = self
            .session
            .wait_js(&format!("window.{slot}"), WAIT)
            .await
            .unwrap();
        self.record(raw)
    }

    async fn dom(&self) -> String {
        self.session
            .js("return document.documentElement.outerHTML + [...document.querySelectorAll('input, textarea')].map(i => i.value).join(' ');")
            .await
            .unwrap()
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn refused(reply: &Reply, what: &str, needle: &str) {
    let err = reply
        .err
        .as_deref()
        .unwrap_or_else(|| panic!("{what} was not refused: {}", reply.raw));
    assert!(
        err.contains(needle),
        "{what}: refused, but not for the expected reason ({needle:?}): {err}"
    );
}

async fn shot(session: &DesktopSession, dir: &Path, name: &str) {
    session.screenshot(&dir.join(name)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_script_cannot_start_programs_read_secrets_or_open_links_unseen() {
    let home = tempfile::tempdir().unwrap();
    let user_home = tempfile::tempdir().unwrap();
    let shots = artifacts_dir("desktop-webview");
    let marker = home.path().join("pwned");
    let settings_file = home.path().join("settings.json");
    std::fs::write(&settings_file, "{}\n").unwrap();
    let mcp_file = home.path().join("mcp_servers.json");
    let file_text = serde_json::to_string_pretty(&json!({"mcpServers": {
        "dormant": {"command": "sh", "args": ["-c", format!("touch {}", marker.display())],
                    "env": {"TOKEN": SECRET}, "disabled": true},
        "remote": {"url": "http://127.0.0.1:9/mcp",
                   "headers": {"Authorization": format!("Bearer {SECRET}")}, "disabled": true}
    }}))
    .unwrap();
    std::fs::write(&mcp_file, &file_text).unwrap();
    let before = std::fs::read(&mcp_file).unwrap();
    // Known config files of other apps: Cursor's is a symlink to /etc/passwd, Claude
    // Desktop's holds a server with a secret.
    let config_dir = user_home.path().join(".config");
    std::fs::create_dir_all(user_home.path().join(".cursor")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", user_home.path().join(".cursor/mcp.json")).unwrap();
    std::fs::create_dir_all(config_dir.join("Claude")).unwrap();
    std::fs::write(
        config_dir.join("Claude/claude_desktop_config.json"),
        json!({"mcpServers": {"gh": {"command": "sh", "args": ["-c", format!("touch {}", marker.display())],
                                      "env": {"GITHUB_TOKEN": SECRET}}}})
        .to_string(),
    )
    .unwrap();

    // A conversation in history, for a page script to try to delete.
    let kept = {
        use conduit_store::{FileMediaStore, MessageStatus, Store};
        let store = Store::open(
            &home.path().join("history.db"),
            FileMediaStore::new(home.path().join("media")),
        )
        .unwrap();
        let id = store.create_conversation(None, None).unwrap();
        store
            .add_message(
                &id,
                &conduit_core::content::Message::user_text("Notes worth keeping"),
                MessageStatus::Complete,
            )
            .unwrap();
        store.rename(&id, "Keep me").unwrap();
        id
    };

    let session = DesktopSession::start(
        &app_binary().unwrap(),
        &[
            ("CONDUIT_HOME", home.path()),
            ("CONDUIT_SECRET_STORE", Path::new("file")),
            ("HOME", user_home.path()),
            ("XDG_CONFIG_HOME", &config_dir),
        ],
    )
    .await
    .unwrap();
    session
        .wait_js("document.querySelector('textarea')", WAIT)
        .await
        .unwrap();
    let main = Page::new(&session);

    // The chat window cannot call settings commands: not even to read the file.
    let attacker = json!({"command": "sh", "args": ["-c", format!("touch {}", marker.display())]});
    for (command, args) in [
        ("mcp_file", json!({})),
        ("reveal_mcp_file", json!({})),
        (
            "edit_mcp_file",
            json!({"version": null, "edit": {"kind": "add", "name": "evil", "entry": attacker}}),
        ),
        ("check_mcp_text", json!({"text": "{}"})),
        ("mcp_import_files", json!({})),
        (
            "mcp_import_candidates",
            json!({"source": {"kind": "known", "id": "claude-desktop"}}),
        ),
        (
            "import_mcp_servers",
            json!({"version": null, "source": {"kind": "known", "id": "claude-desktop"}, "picks": []}),
        ),
        (
            "set_tool_policy",
            json!({"server": "dormant", "tool": "run", "policy": "allow"}),
        ),
        (
            "set_server_policy",
            json!({"server": "dormant", "policy": "allow"}),
        ),
        (
            "set_tool_enabled",
            json!({"server": "dormant", "tool": "run", "enabled": true}),
        ),
        (
            "save_provider",
            json!({"provider": {"id": "x", "protocol": "openai-chat", "baseUrl": "http://127.0.0.1:9/v1"}}),
        ),
        ("remove_provider", json!({"provider": "x"})),
        ("restart_mcp_server", json!({"server": "dormant"})),
        ("open_folder", json!({"folder": "data"})),
        // The dialog plugin is Rust's alone: no window may raise (or fake) its dialogs.
        (
            "plugin:dialog|message",
            json!({"message": "Allow?", "title": "Conduit: confirm"}),
        ),
        ("plugin:dialog|open", json!({"options": {}})),
        // Events come only through the window's own mailbox (next_window_events): a page
        // cannot listen to Tauri's events, nor emit them to another window.
        (
            "plugin:event|listen",
            json!({"event": "mcp-servers", "target": {"kind": "Any"}, "handler": 1}),
        ),
        (
            "plugin:event|emit_to",
            json!({"target": {"kind": "WebviewWindow", "label": "settings"}, "event": "x", "payload": null}),
        ),
    ] {
        let reply = main.invoke(command, args).await;
        refused(
            &reply,
            &format!("{command} from the chat window"),
            "not allowed",
        );
    }

    // The chat window may add a local model server the host looks for, nothing else.
    let reply = main
        .invoke(
            "add_local_provider",
            json!({"provider": {"id": "ollama", "name": "Ollama", "protocol": "openai-chat",
                                "baseUrl": "https://attacker.example/v1", "models": ["m"]}}),
        )
        .await;
    refused(
        &reply,
        "a local provider elsewhere",
        "not a local model server",
    );

    // Links: only http(s) and a plain mailto, and only after the user saw the URL.
    for url in [
        "file:///etc/passwd",
        "javascript:alert(1)",
        "mailto:a@example.com?body=hello&attach=/etc/passwd",
        "https://example.com/\u{202e}txt.exe",
    ] {
        let reply = main.invoke("open_external", json!({"url": url})).await;
        refused(&reply, url, "opens only");
    }
    let reply = main
        .invoke_confirmed(
            "open_external",
            json!({"url": "https://example.com/conduit-webview-test"}),
            Answer::Cancel,
        )
        .await;
    refused(&reply, "a link the user declined", "not opened");

    // History cannot be deleted by a page script alone: the host asks natively, naming
    // the conversation, and a no keeps it. An unknown id is refused without a question.
    let reply = main
        .invoke("delete_conversation", json!({"conversation": "no-such-id"}))
        .await;
    refused(&reply, "an unknown conversation", "no-such-id");
    let reply = main
        .invoke_confirmed(
            "delete_conversation",
            json!({"conversation": kept}),
            Answer::Cancel,
        )
        .await;
    assert_eq!(reply.ok, Some(json!(false)), "{}", reply.raw);
    let listed = main
        .invoke("list_conversations", json!({"count": 500}))
        .await;
    assert_eq!(listed.ok.unwrap()[0]["id"], json!(kept));
    // The user's own click on the sidebar's button raises the same question; Delete.
    session
        .js(r#"document.querySelector('button[aria-label="Delete Keep me"]').click(); return null;"#)
        .await
        .unwrap();
    // A press as the question appears (a click or key meant for the window) is not taken:
    // the Delete button is held a moment; then the user's press deletes.
    tokio::task::spawn_blocking(|| {
        press_as_it_shows('d', WAIT)?;
        answer_confirmation(Answer::Press('d'), WAIT)
    })
    .await
    .unwrap()
    .unwrap();
    session
        .wait_js(
            r#"document.querySelector('button[aria-label="Delete Keep me"]') === null"#,
            WAIT,
        )
        .await
        .unwrap();
    let listed = main
        .invoke("list_conversations", json!({"count": 500}))
        .await;
    assert_eq!(listed.ok, Some(json!([])), "{}", listed.raw);

    // Settings open in their own window, with their own capability.
    let main_handle = session.client.window().await.unwrap();
    let reply = main.invoke("open_settings", json!({})).await;
    assert!(reply.err.is_none(), "{}", reply.raw);
    let deadline = std::time::Instant::now() + WAIT;
    let settings_handle = loop {
        let handles = session.client.windows().await.unwrap();
        if let Some(other) = handles.into_iter().find(|h| *h != main_handle) {
            break other;
        }
        assert!(std::time::Instant::now() < deadline, "no Settings window");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    session
        .client
        .switch_to_window(settings_handle)
        .await
        .unwrap();
    session
        .wait_js(r#"document.querySelector('[aria-label="Settings"]')"#, WAIT)
        .await
        .unwrap();
    let settings = Page::new(&session);

    // What the page receives holds no secret: the file view, its raw text, the list.
    let file = settings.invoke("mcp_file", json!({})).await;
    let file = file.ok.unwrap_or_else(|| panic!("{}", file.raw));
    let text = file["text"].as_str().unwrap().to_owned();
    assert!(text.contains(MASKED), "{text}");
    let version = file["version"].clone();
    session
        .click_xpath(
            "//button[@role='tab' and normalize-space()='MCP servers']",
            WAIT,
        )
        .await
        .unwrap();
    session
        .wait_js(
            r#"document.querySelector('textarea[aria-label="mcpServers JSON"]')?.value.includes("dormant")"#,
            WAIT,
        )
        .await
        .unwrap();
    shot(&session, &shots, "01-settings-masked.png").await;
    let dom = settings.dom().await;
    assert!(!dom.contains(SECRET), "a secret is in the Settings DOM");
    assert!(dom.contains(MASKED));

    // Edits that would run a program or reach a new URL wait for the user; declined,
    // nothing is written and nothing starts.
    let edits = [
        (
            "add",
            json!({"kind": "add", "name": "evil", "entry": attacker}),
        ),
        (
            "enable",
            json!({"kind": "set_disabled", "name": "dormant", "disabled": false}),
        ),
        (
            "new url",
            json!({"kind": "update", "name": "remote", "entry":
                {"url": "http://127.0.0.1:9/attacker"}}),
        ),
        (
            "replace",
            json!({"kind": "replace", "text": text.replace("\"disabled\": true", "\"disabled\": false")}),
        ),
        // Deleting an entry loses it (and its stored secret): asked too.
        ("remove", json!({"kind": "remove", "name": "remote"})),
        (
            "replace dropping every server",
            json!({"kind": "replace", "text": "{\"mcpServers\": {}}"}),
        ),
    ];
    for (what, edit) in edits {
        let reply = settings
            .invoke_confirmed(
                "edit_mcp_file",
                json!({"version": version, "edit": edit}),
                Answer::Cancel,
            )
            .await;
        refused(&reply, what, "not confirmed");
        assert_eq!(
            std::fs::read(&mcp_file).unwrap(),
            before,
            "{what} wrote the file"
        );
    }
    // A mask moved to another server is refused before anything is asked.
    let moved = text.replace("\"remote\"", "\"thief\"");
    let reply = settings
        .invoke(
            "edit_mcp_file",
            json!({"version": version, "edit": {"kind": "replace", "text": moved}}),
        )
        .await;
    refused(&reply, "a moved mask", "no stored value");

    // Import names a known file by id, never a path; what it shows is masked.
    let reply = settings
        .invoke("mcp_import_candidates", json!({"file": "/etc/passwd"}))
        .await;
    assert!(reply.err.is_some(), "a path was accepted: {}", reply.raw);
    let reply = settings
        .invoke(
            "mcp_import_candidates",
            json!({"source": {"kind": "known", "id": "../../../etc/passwd"}}),
        )
        .await;
    refused(&reply, "an unknown source", "no known config file");
    let reply = settings
        .invoke(
            "mcp_import_candidates",
            json!({"source": {"kind": "known", "id": "cursor"}}),
        )
        .await;
    assert!(reply.err.is_some(), "{}", reply.raw);
    assert!(
        !reply.raw.contains("root:"),
        "the target's text leaked: {}",
        reply.raw
    );
    let reply = settings
        .invoke(
            "mcp_import_candidates",
            json!({"source": {"kind": "known", "id": "claude-desktop"}}),
        )
        .await;
    let candidates = reply.ok.unwrap_or_else(|| panic!("{}", reply.raw));
    assert_eq!(candidates[0]["entry"]["env"]["GITHUB_TOKEN"], MASKED);
    let reply = settings
        .invoke_confirmed(
            "import_mcp_servers",
            json!({"version": version, "source": {"kind": "known", "id": "claude-desktop"},
                   "picks": [{"name": "gh", "target": "gh"}]}),
            Answer::Cancel,
        )
        .await;
    refused(&reply, "an import the user declined", "not confirmed");
    assert_eq!(std::fs::read(&mcp_file).unwrap(), before);

    // Revealing the secrets needs the user too.
    let reply = settings
        .invoke_confirmed("reveal_mcp_file", json!({}), Answer::Cancel)
        .await;
    refused(&reply, "a reveal the user declined", "stay hidden");

    assert!(!marker.exists(), "a page script started a program");
    assert_eq!(std::fs::read(&mcp_file).unwrap(), before);
    assert_eq!(std::fs::read_to_string(&settings_file).unwrap(), "{}\n");
    for reply in main
        .seen
        .lock()
        .unwrap()
        .iter()
        .chain(settings.seen.lock().unwrap().iter())
    {
        assert!(
            !reply.contains(SECRET),
            "a secret reached the page: {reply}"
        );
    }
    let dom = settings.dom().await;
    assert!(!dom.contains(SECRET), "a secret is in the Settings DOM");

    // The raw editor's masked text saved back (with a change that starts nothing) keeps
    // the stored values: no question, and the secrets stay on disk, not in the reply.
    let edited = text.replacen('{', "{\n  \"globalShortcut\": \"Ctrl+Space\",", 1);
    let reply = settings
        .invoke(
            "edit_mcp_file",
            json!({"version": version, "edit": {"kind": "replace", "text": edited}}),
        )
        .await;
    assert!(reply.err.is_none(), "{}", reply.raw);
    assert!(!reply.raw.contains(SECRET));
    let on_disk = std::fs::read_to_string(&mcp_file).unwrap();
    assert!(on_disk.contains("Ctrl+Space"), "{on_disk}");
    assert_eq!(on_disk.matches(SECRET).count(), 2, "{on_disk}");

    // The user can still reveal them on purpose: the real dialog, answered Show.
    let reply = settings
        .invoke_confirmed("reveal_mcp_file", json!({}), Answer::Press('s'))
        .await;
    let revealed = reply.ok.unwrap_or_else(|| panic!("{}", reply.raw));
    assert!(revealed["text"].as_str().unwrap().contains(SECRET));
    shot(&session, &shots, "02-after-refusals.png").await;

    session.client.switch_to_window(main_handle).await.unwrap();
    assert!(
        session.client.find(Locator::Css("textarea")).await.is_ok(),
        "the chat window is still there"
    );

    // The chat window adds a local model server only on first run: one while no provider
    // is set up, then not another (a port another user of the machine may listen on).
    let local = |id: &str, name: &str, base_url: &str| {
        json!({"provider": {"id": id, "name": name, "protocol": "openai-chat",
                            "baseUrl": base_url, "models": ["m"]}})
    };
    let reply = main
        .invoke(
            "add_local_provider",
            local("ollama", "Ollama", "http://127.0.0.1:11434/v1"),
        )
        .await;
    assert!(reply.err.is_none(), "{}", reply.raw);
    let reply = main
        .invoke(
            "add_local_provider",
            local("lm-studio", "LM Studio", "http://127.0.0.1:1234/v1"),
        )
        .await;
    refused(
        &reply,
        "a local provider after the first run",
        "only before any provider is set up",
    );
    session.close().await.unwrap();
    assert!(!marker.exists(), "a page script started a program");
}
