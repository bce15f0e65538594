//! The `.deb` that `make package` builds, as a user's machine would get it: unpacked with
//! `dpkg-deb -x` into a temporary root, its files, control data and desktop entry checked,
//! the unpacked `conduit --version` run and the unpacked app started in a real window; and
//! an MCP Apps view rendered by the packaged (release) app, where hosts' views have gone
//! blank before (the shell's policy or navigation rules refusing the view's frames).
//! Run by `make package-test` (it needs the package: `CONDUIT_DEB` names it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use conduit_e2e::artifacts_dir;
use conduit_e2e::desktop::DesktopSession;

/// The environment variable naming the package under test.
const DEB_ENV: &str = "CONDUIT_DEB";
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn deb() -> PathBuf {
    let path = std::env::var_os(DEB_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{DEB_ENV} is not set: run `make package-test`"));
    assert!(
        path.is_file(),
        "{} is missing: run `make package`",
        path.display()
    );
    path
}

/// Runs a command and returns its stdout, failing the test with its stderr otherwise.
fn run(program: &str, args: &[&std::ffi::OsStr]) -> String {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `Key=Value` lines of the `[Desktop Entry]` group.
fn desktop_entry(text: &str) -> BTreeMap<String, String> {
    let mut entries = BTreeMap::new();
    let mut in_group = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_group = line == "[Desktop Entry]";
        } else if in_group && let Some((key, value)) = line.split_once('=') {
            entries.insert(key.trim().to_owned(), value.trim().to_owned());
        }
    }
    entries
}

fn assert_executable(path: &Path) {
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        meta.is_file() && meta.permissions().mode() & 0o111 == 0o111,
        "{} is not an executable file (mode {:o})",
        path.display(),
        meta.permissions().mode()
    );
    let head = std::fs::read(path).unwrap();
    assert_eq!(
        &head[..4],
        b"\x7fELF",
        "{} is not an ELF binary",
        path.display()
    );
}

#[test]
#[ignore = "needs the package: run by `make package-test`"]
fn control_data_names_the_package_its_version_and_dependencies() {
    let deb = deb();
    let field = |name: &str| run("dpkg-deb", &["-f".as_ref(), deb.as_os_str(), name.as_ref()]);
    assert_eq!(field("Package").trim(), "conduit");
    assert_eq!(field("Version").trim(), VERSION);
    assert_eq!(field("Architecture").trim(), "amd64");
    let depends = field("Depends");
    // What the binaries link (`ldd`), named so that Debian 12 and Ubuntu 24.04 both resolve
    // them (Ubuntu renamed some libraries with a `t64` suffix), and the zone database the
    // time tools read.
    for library in [
        "libwebkit2gtk-4.1-0",
        "libgtk-3-0",
        "libssl3",
        "libdbus-1-3",
        "tzdata",
        // A tool's recording plays through WebKit's GStreamer: WAV and MP3 are parsed by
        // plugins-good, decoded and sent to the sound card by plugins-base (declared, not
        // left to what WebKit's own package happens to depend on).
        "gstreamer1.0-plugins-base",
        "gstreamer1.0-plugins-good",
        // The binaries' packed relocations need glibc 2.36 (build-support/relr.rs).
        "libc6 (>= 2.36)",
    ] {
        assert!(
            depends.contains(library),
            "Depends lacks {library}: {depends}"
        );
    }
    assert!(
        !field("Description").trim().is_empty(),
        "the package has no description"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the package: run by `make package-test`"]
async fn the_unpacked_package_has_its_files_and_starts() {
    let deb = deb();
    let root = tempfile::tempdir().unwrap();
    run(
        "dpkg-deb",
        &["-x".as_ref(), deb.as_os_str(), root.path().as_os_str()],
    );

    // The app and the CLI, side by side on PATH.
    let app = root.path().join("usr/bin/conduit-desktop");
    let cli = root.path().join("usr/bin/conduit");
    assert_executable(&app);
    assert_executable(&cli);
    // Neither ships the test fixtures, nor reads the variables that switch them on: the
    // end-to-end test tools, the conformance suite's fixtures.
    for binary in [&app, &cli] {
        for fixture in [
            "CONDUIT_TEST_TOOLS",
            "test__echo",
            "CONDUIT_MCP_CONFORMANCE",
            "test_simple_text",
        ] {
            let found = Command::new("grep")
                .args(["-q", "-a", "-F", fixture])
                .arg(binary)
                .status()
                .unwrap();
            assert_eq!(
                found.code(),
                Some(1),
                "{} holds {fixture:?}",
                binary.display()
            );
        }
    }

    // The desktop entry: valid, starting the app, with an icon that ships.
    let entry_file = root.path().join("usr/share/applications/Conduit.desktop");
    let entry_text = std::fs::read_to_string(&entry_file)
        .unwrap_or_else(|e| panic!("{}: {e}", entry_file.display()));
    run("desktop-file-validate", &[entry_file.as_os_str()]);
    let entry = desktop_entry(&entry_text);
    assert_eq!(entry.get("Type").map(String::as_str), Some("Application"));
    assert_eq!(entry.get("Name").map(String::as_str), Some("Conduit"));
    assert_eq!(
        entry.get("Exec").map(String::as_str),
        Some("conduit-desktop")
    );
    let icon = entry.get("Icon").expect("the desktop entry names no icon");
    let icons = root.path().join("usr/share/icons/hicolor");
    for size in ["32x32", "128x128"] {
        let png = icons.join(size).join("apps").join(format!("{icon}.png"));
        let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
        assert_eq!(
            &bytes[..8],
            b"\x89PNG\r\n\x1a\n",
            "{} is not a PNG",
            png.display()
        );
    }
    // Each icon is as wide as its folder says (`256x256@2` is 512 pixels): a 256-pixel
    // icon under `@2` showed blurred on high-density screens.
    for folder in std::fs::read_dir(&icons).unwrap().flatten() {
        let name = folder.file_name().to_string_lossy().into_owned();
        let (size, scale) = name.split_once('@').unwrap_or((&name, "1"));
        let width: u32 = size.split('x').next().unwrap().parse().unwrap();
        let scale: u32 = scale.parse().unwrap();
        let png = folder.path().join("apps").join(format!("{icon}.png"));
        let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
        let actual = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
        assert_eq!(actual, width * scale, "{}", png.display());
    }

    // The unpacked CLI runs and says its version.
    let home = tempfile::tempdir().unwrap();
    let version = Command::new(&cli)
        .arg("--version")
        .env("CONDUIT_HOME", home.path())
        .output()
        .unwrap();
    assert!(version.status.success(), "{version:?}");
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("conduit {VERSION}")
    );

    // The unpacked app opens its window, titled, and its page hears from the backend.
    let session = DesktopSession::start(&app, &[("CONDUIT_HOME", home.path())])
        .await
        .unwrap();
    let shown = session
        .wait_for_text(
            r#"[aria-label="Conduit version"]"#,
            Duration::from_secs(30),
            |t| t == VERSION,
        )
        .await
        .unwrap();
    assert_eq!(shown, VERSION);
    let window = Command::new("timeout")
        .args([
            "30",
            "xdotool",
            "search",
            "--sync",
            "--onlyvisible",
            "--name",
            "^Conduit$",
        ])
        .output()
        .unwrap();
    assert!(
        window.status.success() && !window.stdout.is_empty(),
        "no visible window titled Conduit: {window:?}"
    );
    session
        .screenshot(&artifacts_dir("package").join("01-unpacked-app.png"))
        .await
        .unwrap();
    session.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the package: run by `make package-test`"]
async fn the_packaged_app_renders_an_mcp_apps_view() {
    use conduit_e2e::desktop::Window;
    use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
    use serde_json::json;

    let root = tempfile::tempdir().unwrap();
    run(
        "dpkg-deb",
        &["-x".as_ref(), deb().as_os_str(), root.path().as_os_str()],
    );
    let chat = Dialect::OpenAiChat;
    let llm = ScriptedLlm::start(vec![
        chat.turn(
            &[],
            &[ScriptedCall::new("t1", "react__get-time", json!({}))],
        ),
        chat.text(&["The time is shown."]),
    ])
    .await
    .unwrap();
    llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
    let react = conduit_e2e::npm_server("server-basic-react").unwrap();
    let home = conduit_e2e::home_with(
        &llm,
        json!({"react": {"command": "node", "args": [react, "--stdio"]}}),
    );
    let app = root.path().join("usr/bin/conduit-desktop");
    let session = DesktopSession::start(&app, &[("CONDUIT_HOME", home.path())])
        .await
        .unwrap();
    let window = Window::new(session, Duration::from_secs(40));
    window.model_shown("m").await;
    window.send("What time is it on the server?").await;
    window.allow_call("get-time").await;
    window.answer_contains("The time is shown.").await;
    let view = r#"section[data-app-view="react"]"#;
    window
        .wait(&format!(
            "document.querySelector('{view}')?.dataset.viewStatus === 'result'"
        ))
        .await;
    // Inside the view: the time the tool returned.
    window
        .wait_in_view(
            0,
            r#"const t = document.querySelector('code[class*="serverTime"]')?.textContent; return t && /^\d{4}-/.test(t) ? t : null;"#,
        )
        .await;
    window
        .shot(&artifacts_dir("package").join("02-packaged-view.png"))
        .await;
    window.session.close().await.unwrap();
}
