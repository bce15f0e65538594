//! Conduit's desktop window: Tauri commands and events over `conduit-host`, nothing else.

#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

mod app_views;
mod bindgen;
#[cfg(test)]
mod bindings_tests;
#[cfg(test)]
mod command_list;
mod commands;
#[cfg(test)]
mod contract_tests;
mod events;
mod malloc;
mod media;
mod native;
mod window_place;

use tauri::Manager;

use conduit_host::logging::{self, LogOptions};
use conduit_host::single_instance::{self, Claim};
use conduit_host::{Host, Paths};

/// Worker threads of the app's async runtime (Tauri's default is one per core). The app
/// mostly waits (on providers, MCP servers, the disk); the CPU work (images, long outputs)
/// runs on the runtime's blocking pool, so more workers would add threads and their memory
/// arenas and nothing else.
const RUNTIME_WORKERS: usize = 2;

/// How long a second start waits for the running app to answer, or to end and leave it
/// the data folder (a quit followed at once by a start).
const INSTANCE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

fn main() -> std::process::ExitCode {
    let malloc_configured = malloc::configure();
    let paths = match Paths::from_env() {
        Ok(paths) => paths,
        Err(err) => {
            eprintln!("conduit-desktop: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let _log = match logging::init(&paths, LogOptions::default()) {
        Ok(guard) => guard,
        Err(err) => {
            eprintln!("conduit-desktop: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    tracing::info!(version = conduit_host::VERSION, "desktop app starting");
    let instance = match single_instance::claim(&paths.data_dir, INSTANCE_PATIENCE) {
        Ok(Claim::First(first)) => std::sync::Arc::new(first),
        Ok(Claim::Shown) => {
            tracing::info!("Conduit was already running: its window was brought forward");
            eprintln!(
                "conduit-desktop: Conduit is already running; its window was brought forward"
            );
            return std::process::ExitCode::SUCCESS;
        }
        Err(err) => {
            tracing::error!(error = %err, "the data folder is held by another app");
            eprintln!("conduit-desktop: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let place = std::sync::Arc::new(window_place::KeptPlace::new(&paths.data_dir));
    if !malloc_configured {
        tracing::warn!("glibc refused a malloc setting: its own stays (memory may creep up)");
    }
    // Set before anything uses Tauri's runtime (which would start its default one).
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(RUNTIME_WORKERS)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!(error = %err, "the async runtime could not start");
            eprintln!("conduit-desktop: the async runtime could not start: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    tauri::async_runtime::set(runtime.handle().clone());

    let state = commands::AppState::new(Host::new(paths), native::Confirmer::from_env());
    let app = state.app.clone();
    let media_app = state.app.clone();
    let views_app = state.app.clone();
    // The window never leaves the app: a page elsewhere could be anything. Its frames may
    // load only the pages of the MCP Apps views the host opened (WebKitGTK asks about
    // frames' navigations here too).
    let guard_views = state.app.clone();
    let (following, restoring, keeping) = (place.clone(), place.clone(), place);
    let (serving_instance, closing_instance, ending_instance) =
        (instance.clone(), instance.clone(), instance);
    let navigation_guard = tauri::plugin::Builder::<tauri::Wry>::new("navigation-guard")
        .on_navigation(move |_, url| {
            let allowed = conduit_host::is_app_page(url.as_str())
                || guard_views.views().is_view_page(url.as_str());
            if !allowed {
                tracing::warn!(%url, "the window was kept from leaving the app");
            }
            allowed
        })
        .build();
    let built = tauri::Builder::default()
        .plugin(navigation_guard)
        // Used from Rust only: no window's capability grants the dialog or clipboard plugins'
        // commands (copy and save an image, native confirmations, file pickers).
        .plugin(tauri_plugin_clipboard_manager::init())
        .plugin(tauri_plugin_dialog::init())
        .manage(state)
        .register_asynchronous_uri_scheme_protocol("media", move |_ctx, request, responder| {
            let app = media_app.clone();
            tauri::async_runtime::spawn(async move {
                let origin = request
                    .headers()
                    .get(tauri::http::header::ORIGIN)
                    .and_then(|origin| origin.to_str().ok())
                    .map(str::to_owned);
                responder
                    .respond(media::respond(app, request.uri().path(), origin.as_deref()).await);
            });
        })
        // MCP Apps views: each on its own origin, mcp-app://<token>/.
        .register_uri_scheme_protocol(conduit_host::app_views::SCHEME, move |_ctx, request| {
            app_views::respond(&views_app, request.uri())
        })
        // Settings belong to the chat window: they close with it. A closed window's
        // events are forgotten.
        .on_window_event(move |window, event| {
            if window.label() == "main" {
                following.follow(window, event);
                // The app ends with its chat window: a start from now on takes its place.
                if matches!(event, tauri::WindowEvent::Destroyed) {
                    closing_instance.ending();
                }
            }
            if window.label() == "main" && matches!(event, tauri::WindowEvent::Focused(true)) {
                native::attention_given(window);
            }
            if matches!(event, tauri::WindowEvent::Destroyed)
                && let Some(state) = window.try_state::<commands::AppState>()
            {
                state.windows.remove(window.label());
            }
            if window.label() == "main"
                && matches!(event, tauri::WindowEvent::Destroyed)
                && let Some(settings) = window
                    .app_handle()
                    .get_webview_window(native::SETTINGS_LABEL)
                && let Err(error) = settings.close()
            {
                tracing::warn!(%error, "the Settings window did not close with the chat");
            }
        })
        .setup(move |handle| {
            let handle = handle.handle().clone();
            restoring.restore(&handle);
            let showing = handle.clone();
            serving_instance.serve(move || window_place::bring_forward(&showing));
            cache_only_what_is_shown(&handle);
            tauri::async_runtime::spawn(question_events(app.clone(), handle.clone()));
            tauri::async_runtime::spawn(history_events(app.clone(), handle.clone()));
            // Serve MCP over HTTP if the settings say so.
            let serving = app.clone();
            tauri::async_runtime::spawn(async move {
                serving.http().apply().await;
            });
            tauri::async_runtime::spawn(ended_by_the_system(handle.clone()));
            tauri::async_runtime::spawn(mcp_events(app, handle));
            Ok(())
        })
        // Every command in commands.list, which also feeds the app manifest (build.rs).
        .invoke_handler(only_from_app_pages(include!(concat!(
            env!("OUT_DIR"),
            "/invoke_handler.rs"
        ))))
        .build(tauri_context());
    let app = match built {
        Ok(app) => app,
        Err(err) => {
            tracing::error!(error = %err, "the window could not start");
            eprintln!("conduit-desktop: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    app.run(move |handle, event| {
        if let tauri::RunEvent::ExitRequested { .. } = event {
            // A start from now on waits for this app to end and takes its place.
            ending_instance.ending();
        }
        if let tauri::RunEvent::Exit = event {
            ending_instance.ending();
            keeping.keep();
            // No server outlives the app: end turns and servers before exiting.
            let state = handle.state::<commands::AppState>();
            tauri::async_runtime::block_on(state.app.shutdown());
            ending_instance.ended();
        }
    });
    // Turns and servers ended on Exit above: nothing left to wait for.
    runtime.shutdown_background();
    std::process::ExitCode::SUCCESS
}

/// Ends the app as its own Quit does when the system asks it to end (SIGTERM at logout or
/// shutdown, `kill`; SIGHUP when its terminal closes): the Exit event ends turns and the
/// MCP servers' process groups. Without it the process died at once, and what a server
/// started (`npx`'s node, `uvx`'s python) outlived it: only the direct child hears of its
/// parent's death.
async fn ended_by_the_system(handle: tauri::AppHandle) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (terminate, hangup) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        );
        let (Ok(mut terminate), Ok(mut hangup)) = (terminate, hangup) else {
            tracing::warn!(
                "the system's requests to end cannot be heard; servers may outlive a kill"
            );
            return;
        };
        tokio::select! {
            _ = terminate.recv() => tracing::info!("asked to end (SIGTERM)"),
            _ = hangup.recv() => tracing::info!("asked to end (SIGHUP)"),
        }
        handle.exit(0);
    }
    #[cfg(not(unix))]
    drop(handle);
}

/// WebKit's default cache model (a web browser's) keeps resources no page uses any more, tool
/// images included, in memory for going back: up to half of a 128 MB cache, which grew the
/// web process by ~100 MB over a long day of tool images (ARCHITECTURE.md, "Footprint").
/// The window is one page that navigates nowhere, so it caches only what it shows: a
/// document viewer's model (no dead resources kept, no back/forward cache). The model
/// belongs to the web context every window of the app shares.
fn cache_only_what_is_shown(handle: &tauri::AppHandle) {
    #[cfg(target_os = "linux")]
    if let Some(window) = handle.get_webview_window("main") {
        let set = window.with_webview(|webview| {
            use webkit2gtk::{WebContextExt, WebViewExt};
            match webview.inner().context() {
                Some(context) => context.set_cache_model(webkit2gtk::CacheModel::DocumentViewer),
                None => tracing::warn!(
                    "the window has no web context: WebKit's cache model is its default"
                ),
            }
        });
        if let Err(error) = set {
            tracing::warn!(%error, "WebKit's cache model could not be set: it keeps its default");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = handle;
}

/// Starts the MCP servers and tells the windows whenever one changes state or the file is
/// applied or fails to read (`McpServers`: they ask for the list).
async fn mcp_events(app: std::sync::Arc<conduit_host::app::App>, handle: tauri::AppHandle) {
    use conduit_host::window_events::WindowEvent;
    // Following from the start: servers show as starting, then ready or failed.
    let servers = app.runtime();
    let mut changes = servers.subscribe();
    events::tell_all(&handle, WindowEvent::McpServers);
    loop {
        match changes.recv().await {
            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                events::tell_all(&handle, WindowEvent::McpServers);
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Tells the chat window when the check of the whole history finds it damaged
/// (`HistoryDamaged`: it asks what was found).
async fn history_events(app: std::sync::Arc<conduit_host::app::App>, handle: tauri::AppHandle) {
    use conduit_host::window_events::WindowEvent;
    let mut damage = app.host().history_damage();
    // Found once per process at most; a closed sender is the app ending.
    if damage.wait_for(Option::is_some).await.is_ok() {
        events::tell(&handle, "main", WindowEvent::HistoryDamaged);
    }
}

/// Tells the chat window whenever a server's question arrives or leaves (`McpQuestions`:
/// it asks for the open ones).
async fn question_events(app: std::sync::Arc<conduit_host::app::App>, handle: tauri::AppHandle) {
    use conduit_host::window_events::WindowEvent;
    let mut changes = app.asker().subscribe();
    let waiting = |app: &conduit_host::app::App| {
        app.asker().questions().len() + app.asker().sampling_requests().len()
    };
    let mut before = waiting(&app);
    loop {
        match changes.recv().await {
            Ok(()) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                events::tell(&handle, "main", WindowEvent::McpQuestions);
                // A new question draws the user to the window; one answered does not.
                let now = waiting(&app);
                if now > before {
                    native::ask_attention(&handle);
                }
                before = now;
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Wraps the commands' handler so only the app's own pages reach them. Tauri counts a page
/// of any registered scheme as local, so a window's main frame led to a view's
/// `mcp-app://` page (only frames may load those, and only the outer sandbox keeps a view
/// from leading its window there) would hold the window's commands: refused here, by the
/// address of the page that asks.
fn only_from_app_pages(
    commands: impl Fn(tauri::ipc::Invoke<tauri::Wry>) -> bool + Send + Sync + 'static,
) -> impl Fn(tauri::ipc::Invoke<tauri::Wry>) -> bool + Send + Sync + 'static {
    move |invoke| {
        let from_app = invoke
            .message
            .webview_ref()
            .url()
            .is_ok_and(|url| conduit_host::is_app_page(url.as_str()));
        if from_app {
            return commands(invoke);
        }
        tracing::warn!(
            command = invoke.message.command(),
            "a command from a page that is not the app's was refused"
        );
        invoke
            .resolver
            .reject("only Conduit's own pages may call its commands");
        true
    }
}

/// The context tauri-build generated from `tauri.conf.json`. Its generated code unwraps
/// values that the build already validated; this is startup, where that is allowed.
#[allow(clippy::unwrap_used, clippy::expect_used)]
fn tauri_context() -> tauri::Context {
    tauri::tauri_build_context!()
}
