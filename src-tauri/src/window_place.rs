//! The chat window opens where it was left, and a second start brings it forward.

use std::path::PathBuf;

use conduit_host::window_state::{Area, FILE, WindowPlace};
use parking_lot::Mutex;
use tauri::{Manager, PhysicalPosition, PhysicalSize};

/// The chat window's place as it changes, kept in the data folder when the app ends.
pub struct KeptPlace {
    file: PathBuf,
    latest: Mutex<Option<WindowPlace>>,
    /// What GTK's `inner_size` counts beyond the size `set_size` takes: with client-side
    /// decorations (GNOME on Wayland) the title bar and shadow. Taken off what is kept, or
    /// the window would grow by it at every start.
    decorations: Mutex<PhysicalSize<u32>>,
}

impl KeptPlace {
    pub fn new(data_dir: &std::path::Path) -> Self {
        Self {
            file: data_dir.join(FILE),
            latest: Mutex::new(None),
            decorations: Mutex::new(PhysicalSize::new(0, 0)),
        }
    }

    /// Puts the chat window where it was left, if that is still on a monitor (its size
    /// alone otherwise, no larger than the largest monitor). Start-up, before the page
    /// has drawn anything.
    pub fn restore(&self, app: &tauri::AppHandle) {
        let Some(window) = app.get_webview_window("main") else {
            return;
        };
        self.measure_decorations(app, &window);
        let Some(kept) = WindowPlace::load(&self.file) else {
            return;
        };
        *self.latest.lock() = Some(kept);
        let monitors: Vec<Area> = match window.available_monitors() {
            Ok(monitors) => monitors
                .iter()
                .map(|monitor| Area {
                    x: monitor.position().x,
                    y: monitor.position().y,
                    width: monitor.size().width,
                    height: monitor.size().height,
                })
                .collect(),
            Err(error) => {
                tracing::warn!(%error, "the monitors could not be listed: the desktop places the window");
                Vec::new()
            }
        };
        let (width, height) = monitors
            .iter()
            .map(|m| (m.width, m.height))
            .max()
            .map_or((kept.width, kept.height), |(w, h)| {
                (kept.width.min(w), kept.height.min(h))
            });
        let sized = window.set_size(PhysicalSize::new(width, height));
        let placed = if kept.is_reachable_on(&monitors) {
            window.set_position(PhysicalPosition::new(kept.x, kept.y))
        } else {
            tracing::info!("the window's last place is on no monitor now: the desktop places it");
            Ok(())
        };
        let maximized = if kept.maximized {
            window.maximize()
        } else {
            Ok(())
        };
        if let Err(error) = sized.and(placed).and(maximized) {
            tracing::warn!(%error, "the window could not be put where it was left");
        }
    }

    /// The window opened at the size the configuration gives: what its inner size says
    /// beyond that is decoration.
    fn measure_decorations(&self, app: &tauri::AppHandle, window: &tauri::WebviewWindow) {
        let Some(config) = app.config().app.windows.iter().find(|w| w.label == "main") else {
            return;
        };
        let (Ok(scale), Ok(reported)) = (window.scale_factor(), window.inner_size()) else {
            return;
        };
        let asked: PhysicalSize<u32> =
            tauri::LogicalSize::new(config.width, config.height).to_physical(scale);
        *self.decorations.lock() = PhysicalSize::new(
            reported.width.saturating_sub(asked.width),
            reported.height.saturating_sub(asked.height),
        );
    }

    /// Follows the chat window's moves and resizes. A maximized window keeps the size and
    /// place it returns to.
    pub fn follow(&self, window: &tauri::Window, event: &tauri::WindowEvent) {
        if !matches!(
            event,
            tauri::WindowEvent::Resized(_) | tauri::WindowEvent::Moved(_)
        ) {
            return;
        }
        let (Ok(maximized), Ok(minimized)) = (window.is_maximized(), window.is_minimized()) else {
            return;
        };
        if minimized {
            return;
        }
        let mut latest = self.latest.lock();
        if maximized && let Some(place) = latest.as_mut() {
            place.maximized = true;
            return;
        }
        // Maximized before any other move: the maximized place is all there is to return
        // to, and the window opens maximized again.
        let (Ok(position), Ok(size)) = (window.outer_position(), window.inner_size()) else {
            return;
        };
        let decorations = *self.decorations.lock();
        *latest = Some(WindowPlace {
            x: position.x,
            y: position.y,
            width: size.width.saturating_sub(decorations.width),
            height: size.height.saturating_sub(decorations.height),
            maximized,
        });
    }

    /// Writes the last place down: the app is ending.
    pub fn keep(&self) {
        let Some(place) = *self.latest.lock() else {
            return;
        };
        if let Err(error) = place.save(&self.file) {
            tracing::warn!(%error, file = %self.file.display(), "the window's place could not be kept");
        }
    }
}

/// How long a second start's answer waits for the main thread to bring the window
/// forward.
const SHOW_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Brings the chat window forward for a second start: true once it was, on the main
/// thread; false when there is no chat window, the event loop is gone (the app is
/// ending), or the main thread did not do it within [`SHOW_PATIENCE`]. Called on the
/// single-instance thread, never on the main one.
pub fn bring_forward(app: &tauri::AppHandle) -> bool {
    let handle = app.clone();
    let (done, outcome) = std::sync::mpsc::channel();
    let posted = app.run_on_main_thread(move || {
        let shown = match handle.get_webview_window("main") {
            Some(window) => match window
                .unminimize()
                .and(window.show())
                .and(window.set_focus())
            {
                Ok(()) => true,
                Err(error) => {
                    tracing::warn!(%error, "the window could not be brought forward");
                    false
                }
            },
            None => false,
        };
        // The caller may have stopped waiting.
        let _ = done.send(shown);
    });
    if let Err(error) = posted {
        tracing::debug!(%error, "a second start came while the app was ending");
        return false;
    }
    outcome.recv_timeout(SHOW_PATIENCE).unwrap_or(false)
}
