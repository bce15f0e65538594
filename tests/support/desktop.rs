//! Drives the real desktop app in a real window through `tauri-driver` and
//! `WebKitWebDriver`, as the desktop end-to-end tests need it.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

use crate::free_port;

/// Environment variable naming the app binary; default: `conduit-desktop` beside the tests.
pub const APP_BIN_ENV: &str = "CONDUIT_DESKTOP_BIN";
/// Environment variable naming the `tauri-driver` binary; default: the one on `PATH`.
pub const DRIVER_BIN_ENV: &str = "TAURI_DRIVER_BIN";

/// The app binary under test, which must have been built before the test runs.
pub fn app_binary() -> anyhow::Result<PathBuf> {
    let path = match std::env::var_os(APP_BIN_ENV) {
        Some(path) => PathBuf::from(path),
        None => crate::target_profile_dir()?.join("conduit-desktop"),
    };
    if !path.is_file() {
        bail!(
            "the desktop app is not built at {}: run `make test-desktop` (or build `conduit-desktop` first)",
            path.display()
        );
    }
    Ok(path)
}

/// A running `tauri-driver` with one WebDriver session on the app; both end on drop.
pub struct DesktopSession {
    pub client: Client,
    driver: Child,
    /// WebKit's storage and cache (`XDG_DATA_HOME`, `XDG_CACHE_HOME`), which
    /// `CONDUIT_HOME` does not move: a test never reads nor writes the user's.
    _web_storage: tempfile::TempDir,
}

impl DesktopSession {
    /// Starts `tauri-driver` and opens the app with `envs` set (e.g. `CONDUIT_HOME`).
    ///
    /// The two ports are picked free and then handed to the drivers, so another process
    /// can take one in between: WebKitWebDriver then exits ("Unable to listen") while
    /// tauri-driver, which does not watch it, keeps listening; tauri-driver itself then
    /// does not listen and says nothing. Such a start is seen and made again on fresh
    /// ports, a few times at most.
    pub async fn start(app: &Path, envs: &[(&str, &Path)]) -> anyhow::Result<Self> {
        if std::env::var_os("DISPLAY").is_none() && std::env::var_os("WAYLAND_DISPLAY").is_none() {
            bail!("no display: run the desktop tests under Xvfb (`make test-desktop` does)");
        }
        require_native_driver()?;
        let mut attempt = 1;
        loop {
            match Self::start_once(app, envs).await {
                Err(error)
                    if attempt < DRIVER_STARTS
                        && error.downcast_ref::<DriverPortLost>().is_some() =>
                {
                    eprintln!(
                        "desktop: {error:#} (start {attempt}); starting again on fresh ports"
                    );
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn start_once(app: &Path, envs: &[(&str, &Path)]) -> anyhow::Result<Self> {
        let driver_bin = std::env::var_os(DRIVER_BIN_ENV).unwrap_or_else(|| "tauri-driver".into());
        let port = free_port()?;
        let native_port = free_port()?;
        let web_storage = tempfile::tempdir().context("no folder for WebKit's storage")?;
        let mut command = Command::new(&driver_bin);
        command
            .args([
                "--port",
                &port.to_string(),
                "--native-port",
                &native_port.to_string(),
            ])
            .stdin(Stdio::null())
            .process_group(0)
            // Never the user's keychain (a desktop session's D-Bus reaches through the
            // drivers): a test that means the keychain says so in `envs`.
            .env("CONDUIT_SECRET_STORE", "file")
            .env("XDG_DATA_HOME", web_storage.path().join("data"))
            .env("XDG_CACHE_HOME", web_storage.path().join("cache"));
        for (name, value) in envs {
            command.env(name, value);
        }
        let driver = command.spawn().with_context(|| {
            format!(
                "cannot start {:?}: install it with `cargo install tauri-driver --locked`",
                driver_bin
            )
        })?;
        let mut guard = DriverGuard(Some(driver));
        // tauri-driver listens before the WebKitWebDriver it starts does: on a cold machine
        // the first session request used to reach a native driver that was not up yet
        // ("webdriver server did not respond"). Wait for both to answer.
        let deadline = Instant::now() + READY_TIMEOUT;
        wait_for_port(port, deadline, &mut guard).await?;
        wait_for_native_driver(native_port, deadline, &mut guard).await?;

        let capabilities = json!({
            "tauri:options": { "application": app },
            "browserName": "wry",
        });
        let capabilities = match capabilities {
            serde_json::Value::Object(map) => map,
            _ => bail!("capabilities must be a JSON object"),
        };
        let mut attempt = 1;
        let client = loop {
            // WebKitWebDriver gives each app it starts a port for its inspector; two started
            // at once can be given the same one, and then the session request is never
            // answered (seen on a fresh clone's package test: "Failed to start remote
            // inspector server … Address already in use"). Such a start is made again.
            let opened = tokio::time::timeout(
                SESSION_PATIENCE,
                ClientBuilder::new(HttpConnector::new())
                    .capabilities(capabilities.clone())
                    .connect(&format!("http://127.0.0.1:{port}")),
            )
            .await
            .map_err(|_| {
                anyhow::Error::new(DriverPortLost(format!(
                    "the session request was not answered within {SESSION_PATIENCE:?}"
                )))
            })?;
            match opened {
                Ok(client) => break client,
                Err(error) if attempt < SESSION_ATTEMPTS && Instant::now() < deadline => {
                    eprintln!(
                        "desktop: opening the WebDriver session failed (attempt {attempt}): {error}; retrying"
                    );
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(error) => {
                    return Err(error).with_context(|| {
                        format!(
                            "tauri-driver did not open a session on the app ({attempt} attempts)"
                        )
                    });
                }
            }
        };
        let driver = guard.0.take().context("driver handle lost")?;
        Ok(Self {
            client,
            driver,
            _web_storage: web_storage,
        })
    }

    /// Waits until the element found by `css` shows text that `accept` takes, and returns it.
    pub async fn wait_for_text(
        &self,
        css: &str,
        timeout: Duration,
        accept: impl Fn(&str) -> bool,
    ) -> anyhow::Result<String> {
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        loop {
            if let Ok(element) = self.client.find(Locator::Css(css)).await {
                last = element.text().await.unwrap_or_default();
                if accept(&last) {
                    return Ok(last);
                }
            }
            if Instant::now() > deadline {
                bail!("{css} never showed the expected text; last seen: {last:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the JavaScript expression is truthy and returns its value.
    pub async fn wait_js(&self, expression: &str, timeout: Duration) -> anyhow::Result<Value> {
        let deadline = Instant::now() + timeout;
        let script = format!("return ({expression}) || null;");
        loop {
            let value = self
                .client
                .execute(&script, vec![])
                .await
                .unwrap_or(Value::Null);
            if !value.is_null() && value != Value::Bool(false) {
                return Ok(value);
            }
            if Instant::now() > deadline {
                bail!("never true within {timeout:?}: {expression}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Runs a script in the page and returns what it returns.
    pub async fn js(&self, script: &str) -> anyhow::Result<Value> {
        Ok(self.client.execute(script, vec![]).await?)
    }

    /// Clicks the element at `xpath` once it exists and takes the click.
    pub async fn click_xpath(&self, xpath: &str, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            // A disabled element (a consent button still arming) is waited for: a click
            // on it would be lost.
            if let Ok(element) = self.client.find(Locator::XPath(xpath)).await
                && element.is_enabled().await.unwrap_or(false)
                && element.click().await.is_ok()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("nothing to click at {xpath} within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the button with this text or accessible label.
    pub async fn click_button(&self, name: &str, timeout: Duration) -> anyhow::Result<()> {
        self.click_xpath(
            &format!("//button[normalize-space()='{name}' or @aria-label='{name}']"),
            timeout,
        )
        .await
    }

    /// Clicks the chat window's Settings button, switches the session to the Settings
    /// window once it shows, and returns the chat window's handle to switch back with.
    pub async fn open_settings_window(
        &self,
        timeout: Duration,
    ) -> anyhow::Result<fantoccini::wd::WindowHandle> {
        let main = self.client.window().await?;
        self.click_button("Settings", timeout).await?;
        let deadline = Instant::now() + timeout;
        let settings = loop {
            let handles = self.client.windows().await?;
            if let Some(other) = handles.into_iter().find(|h| *h != main) {
                break other;
            }
            if Instant::now() > deadline {
                bail!("the Settings window did not open within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        self.client.switch_to_window(settings).await?;
        self.wait_js(
            r#"document.querySelector('[aria-label="Settings"]')"#,
            timeout,
        )
        .await?;
        Ok(main)
    }

    /// Saves a PNG of the window's content.
    pub async fn screenshot(&self, file: &Path) -> anyhow::Result<()> {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        // WebKit can snapshot the frame painted before the last DOM change: wait two frames.
        self.client
            .execute_async(
                "const done = arguments[arguments.length - 1];\
                 requestAnimationFrame(() => requestAnimationFrame(() => done(null)));",
                vec![],
            )
            .await?;
        let png = self.client.screenshot().await?;
        std::fs::write(file, png).with_context(|| format!("cannot write {}", file.display()))
    }

    /// Ends the session (closing the app) and the driver.
    pub async fn close(mut self) -> anyhow::Result<()> {
        let closed = self.client.clone().close().await;
        stop_process_group(&mut self.driver);
        closed.context("closing the WebDriver session failed")
    }
}

/// The app's window as the desktop tests drive it, with the steps they all take. Each step
/// waits up to the window's patience; one that cannot be done fails the test that took
/// it, naming what it waited for.
pub struct Window {
    pub session: DesktopSession,
    patience: Duration,
    /// The app's `CONDUIT_HOME`, when the test gave one: its log says what the app did.
    home: Option<PathBuf>,
}

// A test step: failing loudly is its job, so the test-only lints apply here too.
#[allow(clippy::unwrap_used, clippy::panic)]
impl Window {
    pub fn new(session: DesktopSession, patience: Duration) -> Self {
        Self {
            session,
            patience,
            home: None,
        }
    }

    /// Starts the app with `envs` set (e.g. `CONDUIT_HOME`).
    pub async fn start(envs: &[(&str, &Path)], patience: Duration) -> Self {
        let app = app_binary().unwrap_or_else(|err| panic!("{err:#}"));
        match DesktopSession::start(&app, envs).await {
            Ok(session) => Self {
                home: envs
                    .iter()
                    .find(|(name, _)| *name == "CONDUIT_HOME")
                    .map(|(_, home)| home.to_path_buf()),
                ..Self::new(session, patience)
            },
            Err(err) => panic!("{err:#}"),
        }
    }

    /// Waits until the chat's model picker shows a model whose id ends with `model`: the
    /// window has loaded its providers and can send.
    pub async fn model_shown(&self, model: &str) {
        let model = serde_json::to_string(model).unwrap();
        self.wait(&format!(
            r#"document.querySelector('select[aria-label="Model"]')?.value.endsWith({model})"#
        ))
        .await;
    }

    /// The value of `expression` once it is truthy.
    pub async fn wait(&self, expression: &str) -> Value {
        match self.session.wait_js(expression, self.patience).await {
            Ok(value) => value,
            Err(err) => self.fail(&format!("{err:#}")).await,
        }
    }

    /// Fails the test with `reason` and what the window shows: its text in the panic
    /// message and a screenshot under `test-artifacts/failures/`, so a step that fails
    /// on one machine only (a fresh clone under load) says where the window was.
    pub async fn fail(&self, reason: &str) -> ! {
        let text = self
            .session
            .js("return document.body.innerText;")
            .await
            .ok()
            .and_then(|text| text.as_str().map(str::to_owned))
            .unwrap_or_else(|| "(the page's text could not be read)".to_owned());
        let tail: String = {
            let chars: Vec<char> = text.chars().collect();
            chars[chars.len().saturating_sub(4000)..].iter().collect()
        };
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|since| since.as_millis())
            .unwrap_or_default();
        let shot = crate::artifacts_dir("failures").join(format!("{stamp}.png"));
        let saved = match self.session.screenshot(&shot).await {
            Ok(()) => format!("screenshot: {}", shot.display()),
            Err(err) => format!("no screenshot: {err:#}"),
        };
        // The app's own account of the moment: its log's last lines, and whether it runs
        // (a window that answers nothing may have ended, or hang).
        let log = self
            .home
            .as_ref()
            .map(|home| home.join("logs/conduit.log"))
            .and_then(|file| std::fs::read_to_string(file).ok())
            .map(|text| {
                let lines: Vec<&str> = text.lines().collect();
                lines[lines.len().saturating_sub(40)..].join("\n")
            })
            .unwrap_or_else(|| "(no log)".to_owned());
        let running = Command::new("pgrep")
            .args(["-f", "conduit-desktop"])
            .output()
            .map(|out| {
                String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .replace('\n', " ")
            })
            .unwrap_or_default();
        panic!(
            "{reason}\n{saved}\nthe window's text ends with:\n{tail}\nconduit-desktop processes: [{running}]\nthe app's log ends with:\n{log}"
        );
    }

    /// Runs `script` (a function body: `return` gives the value).
    pub async fn js(&self, script: &str) -> Value {
        self.session.js(script).await.unwrap()
    }

    /// The composer's message box.
    pub async fn message_box(&self) -> fantoccini::elements::Element {
        self.session
            .client
            .find(Locator::Css(r#"textarea[aria-label="Message"]"#))
            .await
            .unwrap()
    }

    /// Types `text` into the composer and presses Enter.
    pub async fn send(&self, text: &str) {
        self.keys_to_composer(text).await;
        self.keys_to_composer("\u{E007}").await; // Enter
    }

    /// Sends `keys` to the composer. WebKitWebDriver first asks the page whether the
    /// element takes files, and on a loaded machine that question can come back empty
    /// ("Could not parse element file upload information", or an error with no message at
    /// all, seen on a fresh clone's `make test`) before any key was sent: then the box is
    /// found again and the keys sent again, a few times at most.
    async fn keys_to_composer(&self, keys: &str) {
        for attempt in 1.. {
            match self.message_box().await.send_keys(keys).await {
                Ok(()) => return,
                Err(fantoccini::error::CmdError::Standard(error))
                    if attempt < 5
                        && (error.message.contains("file upload information")
                            || error.message.trim().is_empty()) =>
                {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(error) => panic!("typing into the composer: {error}"),
            }
        }
    }

    /// Clicks the button with this text or accessible name once it can be clicked.
    pub async fn click_button(&self, name: &str) {
        if let Err(err) = self.session.click_button(name, self.patience).await {
            self.fail(&format!("button {name:?}: {err:#}")).await;
        }
    }

    /// Clicks the element at `xpath` once it can be clicked.
    pub async fn click_xpath(&self, xpath: &str) {
        if let Err(err) = self.session.click_xpath(xpath, self.patience).await {
            self.fail(&format!("{xpath}: {err:#}")).await;
        }
    }

    /// Types `text` into the element with this accessible name.
    pub async fn type_into(&self, label: &str, text: &str) {
        let element = self
            .session
            .client
            .find(Locator::Css(&format!(r#"[aria-label="{label}"]"#)))
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        element.send_keys(text).await.unwrap();
    }

    /// Sets a select's value the way a user's choice does (an input and a change event).
    pub async fn choose(&self, label: &str, value: &str) {
        self.wait(&format!(
            r#"document.querySelector('[aria-label="{label}"]')"#
        ))
        .await;
        self.js(&format!(
            r#"const s = document.querySelector('[aria-label="{label}"]'); s.value = "{value}";
               s.dispatchEvent(new Event('input', {{bubbles: true}}));
               s.dispatchEvent(new Event('change', {{bubbles: true}})); return null;"#
        ))
        .await;
    }

    /// Waits until an assistant message contains `expected`.
    pub async fn answer_contains(&self, expected: &str) {
        let expected = serde_json::to_string(expected).unwrap();
        self.wait(&format!(
            r#"[...document.querySelectorAll('[aria-label="Assistant message"]')].some(m => m.textContent.includes({expected}))"#
        ))
        .await;
    }

    /// Waits until the last card of `tool` shows `state`.
    pub async fn tool_state(&self, tool: &str, state: &str) {
        self.wait(&format!(
            r#"(() => {{ const cards = document.querySelectorAll('article[aria-label="Tool call {tool}"]');
                const card = cards[cards.length - 1];
                return card && card.querySelector('[aria-label="Tool state"]').textContent.trim() === "{state}"; }})()"#
        ))
        .await;
    }

    /// Runs `script` (a function body) inside the MCP Apps view of the `nth` view frame on
    /// the page (the view is the inner frame of Conduit's sandbox proxy).
    pub async fn in_view(&self, nth: u16, script: &str) -> Value {
        let client = &self.session.client;
        client.enter_frame(nth).await.unwrap();
        client.enter_frame(0).await.unwrap();
        let value = self.session.js(script).await;
        client.enter_parent_frame().await.unwrap();
        client.enter_parent_frame().await.unwrap();
        value.unwrap()
    }

    /// Waits until `script` (a function body run in the `nth` view) returns something
    /// truthy, and gives it.
    pub async fn wait_in_view(&self, nth: u16, script: &str) -> Value {
        let deadline = Instant::now() + self.patience;
        loop {
            let value = self.in_view(nth, script).await;
            if !(value.is_null() || value == json!(false) || value == json!("")) {
                return value;
            }
            if Instant::now() > deadline {
                self.fail(&format!(
                    "never true within {:?} in view {nth}: {script}",
                    self.patience
                ))
                .await;
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }

    /// Answers the waiting call's card with "Always allow", confirmed in the app's native
    /// question as the user would.
    pub async fn always_allow(&self) {
        self.click_button("Always allow this tool").await;
        if let Err(err) =
            crate::native_dialog::answer(crate::native_dialog::Answer::Press('a'), self.patience)
                .await
        {
            self.fail(&format!("the native Always allow question: {err:#}"))
                .await;
        }
    }

    /// Waits until the last card of `tool` asks for approval, then allows it once.
    pub async fn allow_call(&self, tool: &str) {
        self.tool_state(tool, "Waiting for approval").await;
        self.click_button("Allow once").await;
    }

    /// Saves a screenshot of the window to `file`.
    pub async fn shot(&self, file: &Path) {
        self.session.screenshot(file).await.unwrap();
    }
}

impl Drop for DesktopSession {
    fn drop(&mut self) {
        stop_process_group(&mut self.driver);
    }
}

/// Ends a driver that failed before a session existed.
struct DriverGuard(Option<Child>);

impl Drop for DriverGuard {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            stop_process_group(child);
        }
    }
}

/// Ends `tauri-driver`, the `WebKitWebDriver` it started and the app, which share its group.
/// The group is signalled even when tauri-driver has ended: it ends by itself when it
/// cannot listen, leaving its WebKitWebDriver running.
fn stop_process_group(child: &mut Child) {
    let group = format!("-{}", child.id());
    let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        let leader_running = matches!(child.try_wait(), Ok(None));
        // Zombies are not counted: once tauri-driver has ended, its children's are
        // reaped by init, as slowly as it likes. Without a process table, only
        // tauri-driver itself can be watched.
        let table = crate::processes();
        let group_alive = if table.is_empty() {
            leader_running
        } else {
            table.iter().any(|row| row.group == child.id() && row.live)
        };
        if !group_alive {
            // tauri-driver itself is no longer running either: this does not block.
            let _ = child.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
    let _ = child.wait();
}

/// How long tauri-driver and WebKitWebDriver may take to start on a cold machine.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a session request may wait for the app to open its window.
const SESSION_PATIENCE: Duration = Duration::from_secs(90);
/// Session requests tried before the failure is reported.
const SESSION_ATTEMPTS: u32 = 3;
/// Starts of both drivers tried when WebKitWebDriver exits at once (its port taken).
const DRIVER_STARTS: u32 = 3;
/// How long tauri-driver may take to fork WebKitWebDriver before its absence counts.
const NATIVE_DRIVER_GRACE: Duration = Duration::from_secs(2);

/// Fails early, with the package to install, when `WebKitWebDriver` is not on `PATH`.
fn require_native_driver() -> anyhow::Result<()> {
    let found = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("WebKitWebDriver").is_file())
    });
    if !found {
        bail!(
            "WebKitWebDriver is not on PATH: install the Debian package webkit2gtk-driver (`make setup-test` does)"
        );
    }
    Ok(())
}

/// Fails at once when the driver process ended instead of waiting out the bound.
fn check_driver_alive(guard: &mut DriverGuard) -> anyhow::Result<()> {
    if let Some(child) = guard.0.as_mut()
        && let Ok(Some(status)) = child.try_wait()
    {
        bail!("tauri-driver exited before it was ready ({status})");
    }
    Ok(())
}

/// Waits until tauri-driver alone listens on `port`. Its port may have been taken after
/// it was picked; tauri-driver then does not listen at all (and says nothing), and a
/// connection would reach the port's new owner.
async fn wait_for_port(
    port: u16,
    deadline: Instant,
    guard: &mut DriverGuard,
) -> anyhow::Result<()> {
    let driver_pid = guard
        .0
        .as_ref()
        .map(Child::id)
        .context("driver handle lost")?;
    loop {
        match crate::sole_listener(port, driver_pid)? {
            Some(true) => return Ok(()),
            Some(false) => {
                return Err(anyhow::Error::new(DriverPortLost(format!(
                    "another process listens on tauri-driver's port {port}"
                ))));
            }
            None => {}
        }
        // tauri-driver that cannot bind its port ends at once (with status 0).
        if let Some(child) = guard.0.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            return Err(anyhow::Error::new(DriverPortLost(format!(
                "tauri-driver ended before it listened on port {port} ({status}; its port taken?)"
            ))));
        }
        if Instant::now() > deadline {
            bail!("tauri-driver did not listen on port {port} within {READY_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until WebKitWebDriver answers its `/status` endpoint with `ready: true`.
async fn wait_for_native_driver(
    port: u16,
    deadline: Instant,
    guard: &mut DriverGuard,
) -> anyhow::Result<()> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    let url = format!("http://127.0.0.1:{port}/status");
    let driver_pid = guard
        .0
        .as_ref()
        .map(Child::id)
        .context("driver handle lost")?;
    let started = Instant::now();
    let mut last: String;
    loop {
        match http.get(&url).send().await {
            Ok(response) => match response.json::<Value>().await {
                Ok(status) if status["value"]["ready"] == Value::Bool(true) => return Ok(()),
                Ok(status) => last = format!("not ready: {status}"),
                Err(error) => last = format!("unreadable status: {error}"),
            },
            Err(error) => last = error.to_string(),
        }
        check_driver_alive(guard)?;
        // tauri-driver starts WebKitWebDriver before it listens, so by now the native
        // driver is its child; none alive (after a moment for a slow fork) means it exited.
        if started.elapsed() > NATIVE_DRIVER_GRACE && !has_live_child(driver_pid) {
            return Err(anyhow::Error::new(DriverPortLost(format!(
                "WebKitWebDriver (started by tauri-driver on port {port}) exited without answering (its port taken?): {last}"
            ))));
        }
        if Instant::now() > deadline {
            bail!(
                "WebKitWebDriver (started by tauri-driver on port {port}) was not ready within {READY_TIMEOUT:?}: {last}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A driver, or the app it started, could not have the port picked for it: another
/// process took it first.
#[derive(Debug)]
struct DriverPortLost(String);

impl std::fmt::Display for DriverPortLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DriverPortLost {}

/// Whether a process whose parent is `parent` is running (a zombie is not); true where
/// there is no process table to read, leaving it to the deadline.
fn has_live_child(parent: u32) -> bool {
    let table = crate::processes();
    table.is_empty() || table.iter().any(|row| row.parent == parent && row.live)
}
