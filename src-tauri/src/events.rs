//! The windows' events, pulled by each page (`next_window_events`) from its mailbox in
//! `conduit_host::window_events`, and the stream a command sends a page messages on.
//!
//! Tauri's own events and channels are scripts evaluated in the page, and WebKitGTK keeps
//! a JavaScript engine running in the app's process for them (+5.4 MB, ARCHITECTURE.md,
//! "Footprint"); a pull is an ordinary command whose answer comes back as its response.

use std::marker::PhantomData;

use conduit_host::window_events::{SendError, StreamSender, WindowEvent};
use serde::{Deserialize, Serialize};
use tauri::ipc::{CommandArg, CommandItem, InvokeError};
use tauri::{Manager, Runtime};

use crate::commands::AppState;

/// A stream of `T` to the page that called the command: the page passes the number it
/// chose for it (its wrapper does), and routes what arrives by it. Dropping it (the turn
/// ended, the sign-in finished) tells the page the stream ended.
pub struct EventStream<T> {
    sender: StreamSender,
    message: PhantomData<fn(T)>,
}

impl<T: Serialize> EventStream<T> {
    /// Queues the next message for the page.
    pub fn send(&self, message: T) -> Result<(), SendError> {
        self.sender.send(message)
    }
}

impl<'de, R: Runtime, T> CommandArg<'de, R> for EventStream<T> {
    /// The stream's number from the page; the mailbox is the calling window's own, so a
    /// page can only ever send to itself.
    fn from_command(command: CommandItem<'de, R>) -> Result<Self, InvokeError> {
        let (name, key) = (command.name, command.key);
        let webview = command.message.webview();
        let stream = u32::deserialize(command).map_err(|e| {
            InvokeError::from(format!("{name}: `{key}` is not a stream number: {e}"))
        })?;
        let state = webview
            .try_state::<AppState>()
            .ok_or_else(|| InvokeError::from("the app is not ready"))?;
        Ok(Self {
            sender: state.windows.of(webview.label()).stream(stream),
            message: PhantomData,
        })
    }
}

/// Posts `event` to every open window.
pub fn tell_all<R: Runtime>(app: &tauri::AppHandle<R>, event: WindowEvent) {
    let Some(state) = app.try_state::<AppState>() else {
        return;
    };
    let windows = app.webview_windows();
    state
        .windows
        .post_to_each(windows.keys().map(String::as_str), &event);
}

/// Posts `event` to window `label`, if it is open.
pub fn tell<R: Runtime>(app: &tauri::AppHandle<R>, label: &str, event: WindowEvent) {
    if app.get_webview_window(label).is_none() {
        return;
    }
    if let Some(state) = app.try_state::<AppState>() {
        state.windows.of(label).post(event);
    }
}
