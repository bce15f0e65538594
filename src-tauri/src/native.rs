//! What only Rust may show: native confirmations the page cannot forge or answer, the
//! native file pickers, and the Settings window.

use conduit_host::app::CommandError;
use tauri::Manager;
use tauri_plugin_dialog::DialogExt;
#[cfg(not(target_os = "linux"))]
use tauri_plugin_dialog::{MessageDialogButtons, MessageDialogKind};

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
        self.ask_if_free(app, question, allow).unwrap_or(false)
    }

    /// As [`Self::ask`], but `None` when the question was not shown because another was
    /// open: no one said no.
    pub fn ask_if_free(self, app: &tauri::AppHandle, question: &str, allow: &str) -> Option<bool> {
        match self {
            Self::Fixed(answer) => Some(answer),
            Self::Dialog => {
                let Some(_open) = OPEN_CONFIRMATION.try_lock() else {
                    tracing::info!("a confirmation was asked for while another was open; declined");
                    return None;
                };
                Some(ask_in_dialog(app, question, allow))
            }
        }
    }
}

/// How long a confirmation's allowing button stays unusable after the dialog shows or
/// comes back into focus. A page or a view can time a question to appear under the
/// user's pointer mid-click, or while they press keys; a person reads for longer than
/// this before answering. (Firefox holds its security dialogs' buttons for 1 s.)
pub const ALLOW_DELAY: std::time::Duration = std::time::Duration::from_millis(750);

/// Shows the confirmation with GTK directly: the allowing button is insensitive for
/// [`ALLOW_DELAY`] each time the dialog is shown or focused, and Return means Cancel.
/// (The dialog plugin's message box has no way to hold a button.)
#[cfg(target_os = "linux")]
fn ask_in_dialog(app: &tauri::AppHandle, question: &str, allow: &str) -> bool {
    let (sender, receiver) = std::sync::mpsc::channel::<bool>();
    let question = question.to_owned();
    let allow = mnemonic(allow);
    let shown = app.run_on_main_thread(move || {
        show_gtk_confirmation(&question, &allow, sender);
    });
    if let Err(error) = shown {
        tracing::warn!(%error, "the confirmation could not be shown; declined");
        return false;
    }
    // The sender goes with the dialog: a dialog destroyed unanswered (the app closing)
    // reads as Cancel.
    receiver.recv().unwrap_or(false)
}

/// Builds and shows the dialog on the main thread; `answer` gets whether the user allowed.
#[cfg(target_os = "linux")]
fn show_gtk_confirmation(question: &str, allow: &str, answer: std::sync::mpsc::Sender<bool>) {
    use gtk::prelude::*;
    use std::cell::Cell;
    use std::rc::Rc;

    let dialog = gtk::MessageDialog::new(
        None::<&gtk::Window>,
        gtk::DialogFlags::MODAL,
        gtk::MessageType::Warning,
        gtk::ButtonsType::None,
        CONFIRM_TITLE,
    );
    dialog.set_title(CONFIRM_TITLE);
    dialog.set_secondary_text(Some(question));
    dialog.set_keep_above(true);
    // The question can be copied (a server's command, a link), as the plugin's dialog let it.
    if let Ok(area) = dialog.message_area().downcast::<gtk::Container>() {
        for child in area.children() {
            if let Ok(label) = child.downcast::<gtk::Label>() {
                label.set_selectable(true);
            }
        }
    }
    dialog.add_button(allow, gtk::ResponseType::Accept);
    dialog.add_button("Cancel", gtk::ResponseType::Cancel);
    dialog.set_default_response(gtk::ResponseType::Cancel);

    // Each showing or focusing holds the button anew; only the latest hold may release it.
    let holds = Rc::new(Cell::new(0_u64));
    let hold = move |dialog: &gtk::MessageDialog| {
        let this_hold = holds.get().wrapping_add(1);
        holds.set(this_hold);
        dialog.set_response_sensitive(gtk::ResponseType::Accept, false);
        let dialog = dialog.downgrade();
        let holds = Rc::clone(&holds);
        gtk::glib::timeout_add_local_once(ALLOW_DELAY, move || {
            if let Some(dialog) = dialog.upgrade()
                && holds.get() == this_hold
            {
                dialog.set_response_sensitive(gtk::ResponseType::Accept, true);
            }
        });
    };
    let hold = Rc::new(hold);
    let on_map = Rc::clone(&hold);
    dialog.connect_map(move |dialog| on_map(dialog));
    dialog.connect_focus_in_event(move |dialog, _| {
        hold(dialog);
        gtk::glib::Propagation::Proceed
    });
    dialog.connect_response(move |dialog, response| {
        // Only the allowing button allows; GTK does not send its response while it is
        // held. The first answer counts: the asker reads one, and may be gone by a second.
        let _ = answer.send(response == gtk::ResponseType::Accept);
        // Escape and the close button come as a delete event, after which GTK destroys
        // the dialog itself; a button closes it, which comes back here as one.
        if response != gtk::ResponseType::DeleteEvent {
            dialog.close();
        }
    });
    dialog.show_all();
}

/// Elsewhere the plugin's dialog; an allowing answer within [`ALLOW_DELAY`] of asking
/// counts as Cancel, as the button cannot be held there. Cancel is the dialog's first
/// button, which macOS and Windows make the default: Return (the Enter of a message
/// being typed when the dialog came up) cancels, as on Linux. Only the allow button's
/// own answer allows; a dialog closed any other way cancels.
#[cfg(not(target_os = "linux"))]
fn ask_in_dialog(app: &tauri::AppHandle, question: &str, allow: &str) -> bool {
    let asked = std::time::Instant::now();
    let allow = mnemonic(allow);
    let answer = app
        .dialog()
        .message(question)
        .title(CONFIRM_TITLE)
        .kind(MessageDialogKind::Warning)
        .buttons(MessageDialogButtons::OkCancelCustom(
            "Cancel".to_owned(),
            allow.clone(),
        ))
        .blocking_show_with_result();
    let allowed = answered_with(&answer, &allow);
    if allowed && asked.elapsed() < ALLOW_DELAY {
        tracing::info!("a confirmation was allowed before it could be read; taken as Cancel");
        return false;
    }
    allowed
}

/// Whether a dialog's answer is the button labelled `allow`: the plugin names a pressed
/// button by its label, except those it knows ("Ok", "Yes", "Cancel", "No").
#[cfg(any(test, not(target_os = "linux")))]
fn answered_with(answer: &tauri_plugin_dialog::MessageDialogResult, allow: &str) -> bool {
    use tauri_plugin_dialog::MessageDialogResult;
    match answer {
        MessageDialogResult::Custom(label) => label == allow,
        MessageDialogResult::Ok => allow == "Ok",
        MessageDialogResult::Yes => allow == "Yes",
        MessageDialogResult::Cancel | MessageDialogResult::No => false,
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

/// Draws the user to the chat window when it is not the focused one (its taskbar entry is
/// marked, as the desktop shows urgency): a tool call waits for approval, a server asks,
/// an answer ended. Host-side only: the page cannot ask for it.
pub fn ask_attention(app: &tauri::AppHandle) {
    let handle = app.clone();
    // On the main thread, where the window's state is read without a round trip: a turn's
    // task must never wait for it (at quit the main thread waits for the tasks).
    let posted = app.run_on_main_thread(move || {
        let Some(window) = handle.get_webview_window("main") else {
            return;
        };
        match window.is_focused() {
            Ok(true) => {}
            Ok(false) => {
                let asked =
                    window.request_user_attention(Some(tauri::UserAttentionType::Informational));
                if let Err(error) = asked {
                    tracing::debug!(%error, "the desktop was not asked to mark the window");
                }
            }
            Err(error) => tracing::debug!(%error, "whether the window has focus is unknown"),
        }
    });
    if let Err(error) = posted {
        tracing::debug!(%error, "the window's attention could not be asked for");
    }
}

/// Takes the mark away once the user is back (not every desktop does it by itself).
pub fn attention_given(window: &tauri::Window) {
    if let Err(error) = window.request_user_attention(None) {
        tracing::debug!(%error, "the window's mark could not be taken away");
    }
}

/// Whether a turn's event is one the user should come back for: a call waiting for their
/// approval, or the end of a turn that saved its message (a refusal before that, which a
/// script in the page could repeat at will, marks nothing).
pub fn wants_the_user(event: &conduit_host::app::TurnEvent) -> bool {
    use conduit_host::app::TurnEvent;
    use conduit_host::core::agent::AgentEvent;
    match event {
        TurnEvent::Agent { event } => matches!(**event, AgentEvent::ApprovalRequested { .. }),
        TurnEvent::Ended { saved, .. } => *saved,
        TurnEvent::ServersStarting { .. } => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{OPEN_CONFIRMATION, answered_with};
    use tauri_plugin_dialog::MessageDialogResult;

    /// Only the allow button's own answer allows: Cancel (the default button), a dialog
    /// closed, or an "Ok" the plugin reports for another reason does not.
    #[test]
    fn only_the_allow_buttons_answer_allows() {
        assert!(answered_with(
            &MessageDialogResult::Custom("Delete".into()),
            "Delete"
        ));
        for answer in [
            MessageDialogResult::Custom("Cancel".into()),
            MessageDialogResult::Custom("Delete ".into()),
            MessageDialogResult::Cancel,
            MessageDialogResult::No,
            MessageDialogResult::Ok,
            MessageDialogResult::Yes,
        ] {
            assert!(!answered_with(&answer, "Delete"), "{answer:?}");
        }
        assert!(answered_with(&MessageDialogResult::Yes, "Yes"));
    }

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

    #[test]
    fn the_user_is_drawn_back_for_an_approval_or_the_end_only() {
        use conduit_host::app::{TurnEvent, TurnStatus};
        use conduit_host::core::agent::AgentEvent;
        let ended = TurnEvent::Ended {
            status: TurnStatus::Complete,
            error: None,
            saved: true,
            notice: None,
        };
        assert!(super::wants_the_user(&ended));
        let text = TurnEvent::Agent {
            event: Box::new(AgentEvent::TextDelta { text: "Hi".into() }),
        };
        assert!(!super::wants_the_user(&text));
        let starting = TurnEvent::ServersStarting {
            servers: vec!["fs".into()],
        };
        assert!(!super::wants_the_user(&starting));
    }
}
