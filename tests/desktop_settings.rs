//! Settings in the real app under Xvfb: a provider added through the form (its key never
//! shown again, nor in IPC replies, logs or the database), an MCP server added through the
//! form becomes ready with its tools, the raw editor refuses broken JSON and leaves the
//! file byte-identical, an outside edit shows up, disabling a server ends its process,
//! and servers import from a Claude Desktop config file picked in the native file picker.
//! Settings are their own window; starting a server, deleting one and removing a provider
//! each wait for the native confirmation, answered here with xdotool as a user would.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use conduit_e2e::desktop::Window;
use conduit_e2e::llm_server::{Dialect, ScriptedLlm};
use conduit_e2e::native_dialog::{self, Answer};
use conduit_e2e::{artifacts_dir, npm_server};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const KEY: &str = "sk-conduit-SECRET-4242-never-shown";
/// Header values often carry tokens too: kept in settings, never shown again.
const HEADER: &str = "hdr-SECRET-77";

/// Waits until the Settings row of `server` shows `state`.
async fn server_state(window: &Window, server: &str, state: &str) {
    window
        .wait(&format!(
            r#"document.querySelector('[aria-label="Server {server}"] [aria-label="Server state"]')?.textContent.trim() === "{state}""#
        ))
        .await;
}

/// Waits for the app's native confirmation and presses Allow, as the user would.
async fn answer_in_native_dialog(answer: Answer) {
    native_dialog::answer(answer, WAIT).await.unwrap();
}

async fn allow_in_native_dialog() {
    answer_in_native_dialog(Answer::Press('a')).await;
}

fn running(marker: &str) -> bool {
    Command::new("pgrep")
        .args(["-f", marker])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn pids(marker: &str) -> String {
    Command::new("pgrep")
        .args(["-f", marker])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else if path.is_file() {
            // Not the running window's socket, which cannot be read.
            out.push(path);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_manage_providers_and_the_mcp_servers_file() {
    let home = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::start(Vec::new()).await.unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    let mcp_file = home.path().join("mcp_servers.json");
    std::fs::write(
        &mcp_file,
        "{\n  \"globalShortcut\": \"Ctrl+Space\",\n  \"mcpServers\": {}\n}\n",
    )
    .unwrap();
    let marker = format!("MARKER-{}", std::process::id());
    let everything = npm_server("server-everything").unwrap();
    // This run's `npx` runs a package pinned in tests/mcp-servers (no test reaches the
    // registry), so that a server from the catalog starts as the catalog writes it.
    let shims = tempfile::tempdir().unwrap();
    let packages = npm_server("server-filesystem")
        .unwrap()
        .ancestors()
        .nth(4)
        .unwrap()
        .to_owned();
    let npx = shims.path().join("npx");
    std::fs::write(
        &npx,
        format!(
            "#!/bin/sh\ntouch \"{}\"\nif [ \"$1\" = \"-y\" ]; then shift; fi\npackage=$1\nshift\nexec node \"{}/$package/dist/index.js\" \"$@\"\n",
            shims.path().join("ran").display(),
            packages.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &npx,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    let path = std::env::join_paths(std::iter::once(shims.path().to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let documents = tempfile::tempdir().unwrap();
    std::fs::write(documents.path().join("notes.txt"), "Buy milk.\n").unwrap();

    let window = Window::start(
        &[
            ("CONDUIT_HOME", home.path()),
            ("CONDUIT_SECRET_STORE", Path::new("file")),
            ("PATH", Path::new(&path)),
            // The PATH as given: a login shell's (nvm's, volta's) could find the real npx.
            ("SHELL", Path::new("")),
        ],
        WAIT,
    )
    .await;
    let shots = artifacts_dir("desktop-settings");
    // Settings open in their own window.
    let main_window = window.session.client.window().await.unwrap();
    window.click_button("Settings").await;
    let deadline = Instant::now() + WAIT;
    let settings_window = loop {
        let handles = window.session.client.windows().await.unwrap();
        if let Some(other) = handles.into_iter().find(|h| *h != main_window) {
            break other;
        }
        assert!(Instant::now() < deadline, "Settings did not open a window");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    window
        .session
        .client
        .switch_to_window(settings_window)
        .await
        .unwrap();

    // A provider through the form; its key goes in and never comes back out.
    window.click_button("Add provider").await;
    window.choose("Protocol", "openai-chat").await;
    window.type_into("Provider id", "scripted").await;
    window
        .js(r#"const i = document.querySelector('[aria-label="Base URL"]'); i.value = ""; i.dispatchEvent(new Event('input', {bubbles: true})); return null;"#)
        .await;
    window
        .type_into("Base URL", &Dialect::OpenAiChat.base_url(&llm.url()))
        .await;
    window.type_into("API key", KEY).await;
    window.type_into("Default model", "m").await;
    window.click_button("Add header").await;
    window.type_into("Header name 1", "X-Team-Token").await;
    window.type_into("Header value 1", HEADER).await;
    window.shot(&shots.join("01-provider-form.png")).await;
    window.click_button("Save provider").await;
    window
        .wait(r#"document.querySelector('[aria-label="Provider scripted"]')"#)
        .await;
    window.click_button("Test connection").await;
    window
        .wait(r#"document.querySelector('[aria-label="Connection test"]')?.textContent.includes("Connected: 1 models (m)")"#)
        .await;
    window.shot(&shots.join("02-provider-saved.png")).await;
    let page = window
        .js("return document.documentElement.outerHTML + [...document.querySelectorAll('input, textarea')].map(i => i.value).join(' ');")
        .await;
    assert!(
        !page.as_str().unwrap().contains(KEY),
        "the key is in the DOM"
    );
    let reply = window
        .session
        .client
        .execute_async(
            "const done = arguments[0];\
             window.__TAURI_INTERNALS__.invoke('list_providers').then(r => done(JSON.stringify(r)), e => done(String(e)));",
            vec![],
        )
        .await
        .unwrap();
    let reply = reply.as_str().unwrap();
    assert!(
        reply.contains("scripted") && !reply.contains(KEY),
        "{reply}"
    );

    // The chat window hears of the new provider: its model picker offers it.
    window
        .session
        .client
        .switch_to_window(main_window.clone())
        .await
        .unwrap();
    window
        .wait(r#"document.querySelector('select[aria-label="Model"] optgroup[label="scripted"]')"#)
        .await;
    let settings_window = window
        .session
        .client
        .windows()
        .await
        .unwrap()
        .into_iter()
        .find(|h| *h != main_window)
        .unwrap();
    window
        .session
        .client
        .switch_to_window(settings_window)
        .await
        .unwrap();

    // An MCP server through the form: the file gets it (and keeps what it had), it
    // becomes ready, and its tools are listed.
    window
        .click_xpath("//button[@role='tab' and normalize-space()='MCP servers']")
        .await;
    window.click_button("Add server").await;
    window.type_into("Server name", "everything").await;
    window.type_into("Command", "node").await;
    for (index, arg) in [
        everything.display().to_string(),
        "stdio".into(),
        marker.clone(),
    ]
    .iter()
    .enumerate()
    {
        if index > 0
            || window
                .js(r#"return document.querySelector('[aria-label="Argument 1"]') === null;"#)
                .await
                == json!(true)
        {
            window.click_button("Add argument").await;
        }
        window
            .type_into(&format!("Argument {}", index + 1), arg)
            .await;
    }
    window.shot(&shots.join("03-server-form.png")).await;
    window
        .click_xpath("//form[@aria-label='Server form']//button[@type='submit']")
        .await;
    // A new command runs only after the user allows it in Conduit's native dialog.
    allow_in_native_dialog().await;
    server_state(&window, "everything", "Ready").await;
    let on_disk: Value =
        serde_json::from_str(&std::fs::read_to_string(&mcp_file).unwrap()).unwrap();
    assert_eq!(
        on_disk["globalShortcut"], "Ctrl+Space",
        "unknown fields kept"
    );
    assert_eq!(on_disk["mcpServers"]["everything"]["command"], "node");
    assert_eq!(
        on_disk["mcpServers"]["everything"]["args"][2],
        marker.as_str()
    );
    assert!(running(&marker), "the server runs");
    window
        .click_xpath("//li[@aria-label='Server everything']//button[normalize-space()='Tools']")
        .await;
    window
        .wait(r#"document.querySelector('tr[aria-label="Tool echo"]')"#)
        .await;
    // Approval policy per tool: set here, kept in settings, revocable. An allow is asked
    // about natively first; declined, nothing is saved and the choice goes back.
    let settings_file = home.path().join("settings.json");
    window.choose("Approval for echo", "allow").await;
    answer_in_native_dialog(Answer::Cancel).await;
    window
        .wait(r#"document.querySelector('[aria-label="Approval for echo"]').value !== "allow""#)
        .await;
    assert!(
        !std::fs::read_to_string(&settings_file)
            .unwrap_or_default()
            .contains("\"echo\": \"allow\""),
        "a declined allow was saved"
    );
    window.choose("Approval for echo", "allow").await;
    answer_in_native_dialog(Answer::Press('a')).await;
    let deadline = Instant::now() + WAIT;
    while !std::fs::read_to_string(&settings_file)
        .unwrap_or_default()
        .contains("\"echo\": \"allow\"")
    {
        assert!(Instant::now() < deadline, "the policy was not saved");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A server-wide policy covers the tools without their own; echo keeps "allow".
    window
        .choose("Approval for all tools of everything", "deny")
        .await;
    let deadline = Instant::now() + WAIT;
    loop {
        let settings: Value =
            serde_json::from_str(&std::fs::read_to_string(&settings_file).unwrap_or_default())
                .unwrap_or(Value::Null);
        let server = &settings["mcpServers"]["everything"];
        if server["approval"] == "deny" {
            assert_eq!(server["toolApproval"]["echo"], "allow");
            break;
        }
        assert!(Instant::now() < deadline, "the server policy was not saved");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    window.shot(&shots.join("04-server-ready-tools.png")).await;

    // Restart: a new process takes the old one's place.
    let before_pid = pids(&marker);
    window
        .click_xpath("//li[@aria-label='Server everything']//button[normalize-space()='Restart']")
        .await;
    let deadline = Instant::now() + WAIT;
    loop {
        let now = pids(&marker);
        if !now.is_empty() && now != before_pid {
            break;
        }
        assert!(Instant::now() < deadline, "the server did not restart");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server_state(&window, "everything", "Ready").await;
    // Its output: what the running server wrote to stderr (server-everything says it
    // started there).
    window
        .click_xpath("//li[@aria-label='Server everything']//button[normalize-space()='Output']")
        .await;
    window
        .wait(r#"document.querySelector('[aria-label="Output of everything"] [aria-label="Standard error"]')?.textContent.length > 0"#)
        .await;
    window.shot(&shots.join("04b-server-output.png")).await;

    // Broken JSON in the raw editor: the error names line and column; the file stays.
    let before = std::fs::read(&mcp_file).unwrap();
    window
        .js(r#"const t = document.querySelector('textarea[aria-label="mcpServers JSON"]');
               t.scrollIntoView(); t.focus(); t.setSelectionRange(t.value.length, t.value.length); return null;"#)
        .await;
    window.type_into("mcpServers JSON", "oops").await;
    let problem = window
        .wait(r#"document.querySelector('[aria-label="JSON problem"]')?.textContent"#)
        .await;
    let problem = problem.as_str().unwrap().to_owned();
    assert!(
        problem.contains("Line ") && problem.contains("column "),
        "{problem}"
    );
    let save_disabled = window
        .js(r#"return [...document.querySelectorAll('button')].find(b => b.textContent.trim() === "Save file").disabled;"#)
        .await;
    assert_eq!(save_disabled, json!(true));
    window.shot(&shots.join("05-raw-editor-error.png")).await;
    assert_eq!(
        std::fs::read(&mcp_file).unwrap(),
        before,
        "the file is byte-identical"
    );
    window.click_button("Revert").await;

    // An outside edit shows up: a server added by another program appears (and fails:
    // its command does not exist).
    let mut document: Value = serde_json::from_slice(&before).unwrap();
    document["mcpServers"]["ghost"] = json!({"command": "conduit-no-such-command-xyz"});
    std::fs::write(&mcp_file, serde_json::to_string_pretty(&document).unwrap()).unwrap();
    server_state(&window, "ghost", "Failed").await;
    window
        .wait(r#"document.querySelector('textarea[aria-label="mcpServers JSON"]').value.includes("ghost")"#)
        .await;
    window.shot(&shots.join("06-outside-edit.png")).await;

    // Disable a server: its process ends.
    window
        .click_xpath("//input[@aria-label='Enabled everything']")
        .await;
    server_state(&window, "everything", "Disabled").await;
    let deadline = Instant::now() + WAIT;
    while running(&marker) {
        assert!(Instant::now() < deadline, "the disabled server still runs");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let on_disk: Value =
        serde_json::from_str(&std::fs::read_to_string(&mcp_file).unwrap()).unwrap();
    assert_eq!(on_disk["mcpServers"]["everything"]["disabled"], true);

    // Import from a Claude Desktop config file.
    let claude = tempfile::tempdir().unwrap();
    let claude_file = claude.path().join("claude_desktop_config.json");
    let filesystem = npm_server("server-filesystem").unwrap();
    std::fs::write(
        &claude_file,
        json!({"mcpServers": {
            "everything": {"command": "node", "args": [everything, "stdio"]},
            "files": {"command": "node", "args": [filesystem, claude.path()]}
        }})
        .to_string(),
    )
    .unwrap();
    window.click_button("Choose a file…").await;
    let picked = claude_file.clone();
    tokio::task::spawn_blocking(move || native_dialog::pick_file(&picked, WAIT))
        .await
        .unwrap()
        .unwrap();
    window
        .wait(r#"document.querySelector('[aria-label="Import files"]')"#)
        .await;
    let clash = window
        .js(r#"return document.querySelector('[aria-label="New name for everything"]')?.value ?? null;"#)
        .await;
    assert_eq!(
        clash,
        json!("everything-imported"),
        "the name clash is offered a new name"
    );
    let checked = window
        .js(r#"return document.querySelector('[aria-label="Import files"]').checked;"#)
        .await;
    if checked != json!(true) {
        window
            .click_xpath("//input[@aria-label='Import files']")
            .await;
    }
    window.shot(&shots.join("07-import-preview.png")).await;
    window.click_button("Import selected").await;
    allow_in_native_dialog().await;
    server_state(&window, "files", "Ready").await;
    let on_disk: Value =
        serde_json::from_str(&std::fs::read_to_string(&mcp_file).unwrap()).unwrap();
    assert_eq!(on_disk["mcpServers"]["files"]["command"], "node");
    assert_eq!(on_disk["globalShortcut"], "Ctrl+Space");
    window.shot(&shots.join("08-imported.png")).await;

    // A well-known server from the catalog: the form comes filled in and says what to
    // change; changed and saved, it starts as the catalog wrote it.
    window
        .js(r#"document.querySelector('[aria-label="Well-known servers"]').scrollIntoView(); return null;"#)
        .await;
    let marked = window
        .js(r#"return [...document.querySelectorAll('[aria-label="Well-known servers"] li')].filter(li => li.textContent.includes("In your file")).length;"#)
        .await;
    assert_eq!(
        marked,
        json!(0),
        "nothing of the catalog is in the file yet"
    );
    window.shot(&shots.join("08a-catalog.png")).await;
    window.click_button("Add Filesystem").await;
    window
        .wait(r#"document.querySelector('[aria-label="Server name"]')?.value === "filesystem""#)
        .await;
    let filled = window
        .js(r#"return [...document.querySelectorAll('form[aria-label="Server form"] input')].map(i => i.value);"#)
        .await;
    assert_eq!(
        filled,
        json!([
            "filesystem",
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "~/Documents",
            ""
        ]),
        "name, command, arguments, working folder"
    );
    window
        .wait(r#"document.querySelector('[data-fill-in]')?.textContent.includes("Change ~/Documents")"#)
        .await;
    window.shot(&shots.join("08b-catalog-form.png")).await;
    window
        .js(r#"const i = document.querySelector('[aria-label="Argument 3"]'); i.value = ""; i.dispatchEvent(new Event('input', {bubbles: true})); return null;"#)
        .await;
    window
        .type_into("Argument 3", &documents.path().display().to_string())
        .await;
    window
        .click_xpath("//form[@aria-label='Server form']//button[@type='submit']")
        .await;
    allow_in_native_dialog().await;
    server_state(&window, "filesystem", "Ready").await;
    assert!(
        shims.path().join("ran").exists(),
        "the stand-in npx ran, not the registry's"
    );
    let on_disk: Value =
        serde_json::from_str(&std::fs::read_to_string(&mcp_file).unwrap()).unwrap();
    assert_eq!(
        on_disk["mcpServers"]["filesystem"],
        json!({"command": "npx", "args": [
            "-y",
            "@modelcontextprotocol/server-filesystem",
            documents.path().display().to_string()
        ]})
    );
    window
        .click_xpath("//li[@aria-label='Server filesystem']//button[normalize-space()='Tools']")
        .await;
    window
        .wait(r#"document.querySelector('tr[aria-label="Tool list_allowed_directories"]')"#)
        .await;
    window
        .wait(r#"[...document.querySelectorAll('[aria-label="Well-known servers"] li')].find(li => li.textContent.includes("Filesystem"))?.textContent.includes("In your file")"#)
        .await;
    window
        .js(r#"document.querySelector('[aria-label="Well-known servers"]').scrollIntoView(); return null;"#)
        .await;
    window.shot(&shots.join("08c-catalog-added.png")).await;

    // Deleting loses what an entry holds: the host asks natively (the page has no dialog
    // of its own that a script could answer). Kept first, then deleted.
    let delete_ghost = "//li[@aria-label='Server ghost']//button[normalize-space()='Delete']";
    window.click_xpath(delete_ghost).await;
    answer_in_native_dialog(Answer::Cancel).await;
    window
        .wait(r#"document.querySelector('li[aria-label="Server ghost"] [role="alert"]')?.textContent.includes("not confirmed")"#)
        .await;
    let on_disk: Value =
        serde_json::from_str(&std::fs::read_to_string(&mcp_file).unwrap()).unwrap();
    assert!(on_disk["mcpServers"]["ghost"].is_object(), "{on_disk}");
    window.click_xpath(delete_ghost).await;
    allow_in_native_dialog().await;
    window
        .wait(r#"document.querySelector('li[aria-label="Server ghost"]') === null"#)
        .await;
    let on_disk: Value =
        serde_json::from_str(&std::fs::read_to_string(&mcp_file).unwrap()).unwrap();
    assert!(on_disk["mcpServers"].get("ghost").is_none(), "{on_disk}");
    assert_eq!(on_disk["mcpServers"]["files"]["command"], "node");

    // Removing a provider deletes its stored key: asked natively too.
    window
        .click_xpath("//button[@role='tab' and normalize-space()='Providers']")
        .await;
    let remove = "//li[@aria-label='Provider scripted']//button[normalize-space()='Remove']";
    window.click_xpath(remove).await;
    answer_in_native_dialog(Answer::Cancel).await;
    let secrets = home.path().join("secrets.json");
    assert!(std::fs::read_to_string(&secrets).unwrap().contains(KEY));
    window.click_xpath(remove).await;
    answer_in_native_dialog(Answer::Press('r')).await;
    window
        .wait(r#"document.querySelector('[aria-label="Provider scripted"]') === null"#)
        .await;
    assert!(!std::fs::read_to_string(&secrets).unwrap().contains(KEY));

    window.session.close().await.unwrap();

    // The key is only in the private secrets file: not in settings, logs or the database.
    for file in files_under(home.path()) {
        if file.file_name().is_some_and(|n| n == "secrets.json") {
            continue;
        }
        let bytes = std::fs::read(&file).unwrap();
        let found = bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes());
        assert!(!found, "the key leaked into {}", file.display());
    }
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&secrets).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(!running(&marker), "no server outlives the app");
}
