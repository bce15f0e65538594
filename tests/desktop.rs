//! The real desktop app in a real window (Xvfb, tauri-driver, WebKitWebDriver): the frame
//! renders and shows what the Rust backend sent over IPC.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use conduit_e2e::artifacts_dir;
use conduit_e2e::desktop::{DesktopSession, app_binary};
use fantoccini::Locator;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_frame_renders_with_data_from_the_backend() {
    let app = app_binary().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mcp_file = home.path().join("elsewhere").join("servers.json");
    let session = DesktopSession::start(
        &app,
        &[
            ("CONDUIT_HOME", home.path()),
            ("CONDUIT_MCP_CONFIG", &mcp_file),
        ],
    )
    .await
    .unwrap();
    let shots = artifacts_dir("desktop");

    // The version appears only once the backend answered the app_info command.
    let version = session
        .wait_for_text(
            r#"[aria-label="Conduit version"]"#,
            Duration::from_secs(30),
            |t| t != "…" && !t.is_empty(),
        )
        .await
        .unwrap();
    assert_eq!(version, env!("CARGO_PKG_VERSION"));

    let c = &session.client;
    for css in [
        r#"nav[aria-label="Sidebar"]"#,
        r#"ul[aria-label="Conversation list"]"#,
        r#"section[aria-label="Chat"]"#,
        r#"textarea[aria-label="Message"]"#,
    ] {
        c.find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"));
    }
    let new_chat = c
        .find(Locator::XPath("//button[normalize-space()='New chat']"))
        .await;
    assert!(new_chat.is_ok(), "New chat button missing");
    session
        .screenshot(&shots.join("01-chat.png"))
        .await
        .unwrap();

    // Settings (their own window) show paths that only the backend knows: the temp
    // folder this test made.
    let main_window = c.window().await.unwrap();
    c.find(Locator::XPath("//button[normalize-space()='Settings']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let settings_window = loop {
        let handles = c.windows().await.unwrap();
        if let Some(other) = handles.into_iter().find(|h| *h != main_window) {
            break other;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Settings opened no window"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    c.switch_to_window(settings_window).await.unwrap();
    session
        .click_xpath(
            "//button[@role='tab' and normalize-space()='General']",
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    let data_dir = session
        .wait_for_text(
            r#"dd[aria-label="Data folder"]"#,
            Duration::from_secs(10),
            |t| !t.is_empty(),
        )
        .await
        .unwrap();
    assert_eq!(data_dir, home.path().display().to_string());
    let mcp = c
        .find(Locator::Css(r#"dd[aria-label="mcpServers file"]"#))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(mcp, mcp_file.display().to_string());
    session
        .screenshot(&shots.join("02-settings.png"))
        .await
        .unwrap();

    // Capabilities expose the app's own commands only: a core command is refused.
    let refused = c
        .execute_async(
            "const done = arguments[arguments.length - 1];\
             window.__TAURI_INTERNALS__.invoke('plugin:app|version')\
               .then(v => done('allowed: ' + v), e => done('refused: ' + e));",
            vec![],
        )
        .await
        .unwrap();
    let refused = refused.as_str().unwrap_or_default().to_owned();
    assert!(refused.starts_with("refused: "), "{refused}");
    assert!(refused.contains("not allowed"), "{refused}");

    // The app's log file is written under the data folder.
    assert!(home.path().join("logs").join("conduit.log").is_file());

    session.close().await.unwrap();
}

/// On a cold machine `WebKitWebDriver` answered seconds after `tauri-driver` listened, and
/// the first session failed ("webdriver server did not respond"). A native driver that
/// starts 4 s late must be waited for, not raced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_driver_that_starts_late_is_waited_for() {
    use std::os::unix::fs::PermissionsExt;

    let app = app_binary().unwrap();
    let home = tempfile::tempdir().unwrap();
    let slow = home.path().join("slow-driver");
    std::fs::create_dir_all(&slow).unwrap();
    let real = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|dir| dir.join("WebKitWebDriver"))
        .find(|path| path.is_file())
        .unwrap();
    let wrapper = slow.join("WebKitWebDriver");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nsleep 4\nexec '{}' \"$@\"\n", real.display()),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    // tauri-driver finds the native driver on its PATH: the slow one comes first.
    let path = std::env::join_paths(
        std::iter::once(slow.clone())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let session = DesktopSession::start(
        &app,
        &[
            ("CONDUIT_HOME", home.path()),
            ("PATH", std::path::Path::new(&path)),
        ],
    )
    .await
    .unwrap();
    let version = session
        .wait_for_text(
            r#"[aria-label="Conduit version"]"#,
            Duration::from_secs(30),
            |t| t != "…" && !t.is_empty(),
        )
        .await
        .unwrap();
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    session.close().await.unwrap();
}
