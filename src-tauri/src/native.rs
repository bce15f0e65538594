//! What only Rust may show: native confirmations the page cannot forge or answer, the
//! native file pickers, and the Settings window.

use conduit_host::app::CommandError;
use tauri::Manager;
use tauri_plugin_dialog::{DialogExt, MessageDialogButtons, MessageDialogKind};

/// The title of every confirmation, so the user (and a test) knows it is Conduit's.
pub const CONFIRM_TITLE: &str = "Conduit: confirm";

/// Environment variable, read once at start by debug builds only, that answers every
/// confirmation (`yes` or `no`) without a dialog; for tests. The page cannot set it.
pub const TEST_ANSWER_ENV: &str = "CONDUIT_TEST_CONFIRM";

/// How confirmations are answered: by the user in a native dialog, or (tests) by the
/// answer fixed at start.
#[derive(Debug, Clone, Copy)]
pub enum Confirmer {
    Dialog,
    Fixed(bool),
}

impl Confirmer {
    /// The confirmer for this run: `CONDUIT_TEST_CONFIRM=yes|no` fixes the answer.
    pub fn from_env() -> Self {
        // Release builds always ask: a variable left in a profile must not turn the
        // confirmations off. The tests drive debug builds.
        if !cfg!(debug_assertions) {
            return Self::Dialog;
        }
        match std::env::var(TEST_ANSWER_ENV).as_deref() {
            Ok("yes") => {
                tracing::warn!("confirmations are answered yes by {TEST_ANSWER_ENV} (tests only)");
                Self::Fixed(true)
            }
            Ok("no") => {
                tracing::warn!("confirmations are answered no by {TEST_ANSWER_ENV} (tests only)");
                Self::Fixed(false)
            }
            _ => Self::Dialog,
        }
    }

    /// Asks `question` in a native dialog and waits for the answer. Call it off the main
    /// thread (the dialog runs there). While one confirmation is open, another is declined
    /// at once (see [`OPEN_CONFIRMATION`]).
    pub fn ask(self, app: &tauri::AppHandle, question: &str, allow: &str) -> bool {
        match self {
            Self::Fixed(answer) => answer,
            Self::Dialog => {
                let Some(_open) = OPEN_CONFIRMATION.try_lock() else {
                    tracing::info!("a confirmation was asked for while another was open; declined");
                    return false;
                };
                app.dialog()
                    .message(question)
                    .title(CONFIRM_TITLE)
                    .kind(MessageDialogKind::Warning)
                    .buttons(MessageDialogButtons::OkCancelCustom(
                        mnemonic(allow),
                        "Cancel".to_owned(),
                    ))
                    .blocking_show()
            }
        }
    }
}

/// The one native confirmation open at a time, held while it shows. Dialogs are shown
/// without waiting for each other, so a page or a view asking in a loop (a view's tool
/// calls and links reach the host through the page) would stack them side by side, each
/// to be dismissed, one maybe under the user's next click; a person answers one at a time
/// anyway.
pub static OPEN_CONFIRMATION: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// The button's label with its first letter as the keyboard mnemonic where GTK draws
/// dialogs (Alt+letter presses it); elsewhere the label as is.
fn mnemonic(label: &str) -> String {
    if cfg!(target_os = "linux") {
        format!("_{label}")
    } else {
        label.to_owned()
    }
}

/// Asks where to save a file, in a native dialog over the chat window: `title`, the
/// suggested `file_name` and one filter (its name and extensions); `None` when the user
/// cancels. The page never names the place: the user does, here.
pub async fn choose_save_path(
    app: &tauri::AppHandle,
    title: &str,
    file_name: &str,
    filter: (&str, &[&str]),
) -> Result<Option<std::path::PathBuf>, CommandError> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let mut dialog = app
        .dialog()
        .file()
        .set_title(title)
        .set_file_name(file_name)
        .add_filter(filter.0, filter.1);
    if let Some(window) = app.get_webview_window("main") {
        dialog = dialog.set_parent(&window);
    }
    dialog.save_file(move |chosen| {
        let _ = sender.send(chosen);
    });
    let Some(chosen) = receiver
        .await
        .map_err(|e| CommandError::message(format!("the save dialog went away: {e}")))?
    else {
        return Ok(None);
    };
    chosen
        .into_path()
        .map(Some)
        .map_err(|e| CommandError::message(format!("the chosen place is not a file path: {e}")))
}

/// Lets the user pick a config file to import from; `None` when they cancel.
pub fn pick_config_file(app: &tauri::AppHandle) -> Option<std::path::PathBuf> {
    app.dialog()
        .file()
        .set_title("Import MCP servers from")
        .add_filter("JSON", &["json"])
        .blocking_pick_file()
        .and_then(|file| file.into_path().ok())
}

/// The Settings window's label: its capability lets it edit settings; the chat window's
/// does not.
pub const SETTINGS_LABEL: &str = "settings";

/// Opens the Settings window, or brings it forward.
pub fn open_settings(app: &tauri::AppHandle) -> tauri::Result<()> {
    if let Some(window) = app.get_webview_window(SETTINGS_LABEL) {
        window.unminimize()?;
        return window.set_focus();
    }
    tauri::WebviewWindowBuilder::new(
        app,
        SETTINGS_LABEL,
        tauri::WebviewUrl::App("index.html?window=settings".into()),
    )
    .title("Conduit Settings")
    .inner_size(1000.0, 760.0)
    .min_inner_size(640.0, 480.0)
    .build()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::OPEN_CONFIRMATION;

    #[test]
    fn a_second_confirmation_is_declined_while_one_is_open_and_taken_after() {
        let first = OPEN_CONFIRMATION.try_lock();
        assert!(first.is_some());
        assert!(
            OPEN_CONFIRMATION.try_lock().is_none(),
            "a second one while the first is open"
        );
        drop(first);
        assert!(
            OPEN_CONFIRMATION.try_lock().is_some(),
            "the next one once it is answered"
        );
    }
}
