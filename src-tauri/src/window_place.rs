//! The chat window opens where it was left, and a second start brings it forward.

use std::path::PathBuf;

use conduit_host::window_state::{Area, FILE, WindowPlace};
use parking_lot::Mutex;
use tauri::{Manager, PhysicalPosition, PhysicalSize};

/// The chat window's place as it changes, kept in the data folder when the app ends.
pub struct KeptPlace {
    file: PathBuf,
    latest: Mutex<Option<WindowPlace>>,
}

impl KeptPlace {
    pub fn new(data_dir: &std::path::Path) -> Self {
        Self {
            file: data_dir.join(FILE),
            latest: Mutex::new(None),
        }
    }

    /// Puts the chat window where it was left, if that is still on a monitor; its size
    /// alone otherwise. Start-up, before the page has drawn anything.
    pub fn restore(&self, app: &tauri::AppHandle) {
        let (Some(window), Some(kept)) = (
            app.get_webview_window("main"),
            WindowPlace::load(&self.file),
        ) else {
            return;
        };
        *self.latest.lock() = Some(kept);
        let monitors: Vec<Area> = window
            .available_monitors()
            .unwrap_or_default()
            .iter()
            .map(|monitor| Area {
                x: monitor.position().x,
                y: monitor.position().y,
                width: monitor.size().width,
                height: monitor.size().height,
            })
            .collect();
        let sized = window.set_size(PhysicalSize::new(kept.width, kept.height));
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
        if maximized {
            if let Some(place) = latest.as_mut() {
                place.maximized = true;
            }
            return;
        }
        let (Ok(position), Ok(size)) = (window.outer_position(), window.inner_size()) else {
            return;
        };
        *latest = Some(WindowPlace {
            x: position.x,
            y: position.y,
            width: size.width,
            height: size.height,
            maximized: false,
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

/// Brings the chat window forward for a second start: false when the app is ending (no
/// chat window, or its event loop gone). Called on the single-instance thread; the
/// window is shown on the main thread.
pub fn bring_forward(app: &tauri::AppHandle) -> bool {
    let handle = app.clone();
    let posted = app.run_on_main_thread(move || {
        let Some(window) = handle.get_webview_window("main") else {
            return;
        };
        let shown = window
            .unminimize()
            .and(window.show())
            .and(window.set_focus());
        if let Err(error) = shown {
            tracing::warn!(%error, "the window could not be brought forward");
        }
    });
    match posted {
        Ok(()) => app.get_webview_window("main").is_some(),
        Err(error) => {
            tracing::debug!(%error, "a second start came while the app was ending");
            false
        }
    }
}
