//! MCP Apps views in the window: the `mcp-app:` scheme that serves each open view's sandbox
//! proxy and document (with the view's policy as a header), and the commands the chat
//! calls for a view. The host decides every call; the page only relays what a view asks.

use std::sync::Arc;

use conduit_host::app::{App, CommandError};
use conduit_host::app_views::{ViewAnswer, ViewCall, ViewCallResult, ViewLookup};
use tauri::http::{Response, StatusCode, header};

use crate::bindgen::window_command;
use crate::commands::{AppState, Reply};

/// Answers `mcp-app://<token>/<path>`.
pub fn respond(app: &Arc<App>, uri: &tauri::http::Uri) -> Response<Vec<u8>> {
    let token = uri.host().unwrap_or_default();
    let Some(document) = app.views().document(token, uri.path()) else {
        return Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Vec::new())
            .unwrap_or_default();
    };
    Response::builder()
        .header(header::CONTENT_TYPE, document.mime)
        .header("Content-Security-Policy", document.csp)
        .header("X-Content-Type-Options", "nosniff")
        .header(header::CACHE_CONTROL, "no-store")
        .body(document.body)
        .unwrap_or_else(|_| {
            Response::builder()
                .status(StatusCode::INTERNAL_SERVER_ERROR)
                .body(Vec::new())
                .unwrap_or_default()
        })
}

window_command! {
/// The view of the call `call` (Conduit's id) in `conversation`, opened under a new token;
/// or why there is none. The host decides whether it ran that call, and on which server
/// and tool; the page only names it.
#[tauri::command]
pub async fn open_app_view(
    state: tauri::State<'_, AppState>,
    call: String,
    conversation: Option<String>,
) -> Reply<ViewLookup> {
    Ok(state.app.open_view(&call, conversation.as_deref()).await)
}
}

window_command! {
/// Forgets a view the window unmounted.
#[tauri::command]
pub fn close_app_view(state: tauri::State<'_, AppState>, token: String) -> Reply<()> {
    state.app.views().close(&token);
    Ok(())
}
}

window_command! {
/// Runs a view's `tools/call`: only its own server's tools that views may call, by the
/// tool's policy in Settings; "ask" is a native confirmation the page cannot answer.
#[tauri::command]
pub async fn app_view_call_tool(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    token: String,
    call: ViewCall,
) -> Reply<ViewCallResult> {
    let confirmer = state.confirmer();
    let confirm = |question: String| async move {
        let asked = tauri::async_runtime::spawn_blocking(move || {
            confirmer.ask_if_free(&app, &question, "Run")
        })
        .await;
        match asked {
            Ok(Some(true)) => ViewAnswer::Run,
            Ok(Some(false)) => ViewAnswer::Refused,
            // Another question was open, or it could not be asked: no one refused.
            Ok(None) | Err(_) => ViewAnswer::NotAsked,
        }
    };
    state
        .app
        .call_from_view(&token, &call.tool, call.arguments, confirm)
        .await
        .map(|result| ViewCallResult { result })
        .map_err(CommandError::from)
}
}

window_command! {
/// Opens a link a view asks for (`ui/open-link`) in the system browser, after a native
/// confirmation that names the view's server and shows the whole URL.
#[tauri::command]
pub async fn app_view_open_link(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    token: String,
    url: String,
) -> Reply<()> {
    let url = conduit_host::external_url(&url)
        .map_err(CommandError::message)?
        .to_owned();
    let question = state
        .app
        .views()
        .link_question(&token, &url)
        .ok_or_else(|| CommandError::message("this view is closed"))?;
    crate::commands::open_after_asking(app, state.confirmer(), question, url).await
}
}

window_command! {
/// Keeps what a view wants the model to know (`ui/update-model-context`) for the next
/// message that names the view.
#[tauri::command]
pub fn set_app_view_context(
    state: tauri::State<'_, AppState>,
    token: String,
    text: String,
) -> Reply<()> {
    state
        .app
        .views()
        .set_context(&token, text)
        .map_err(CommandError::from)
}
}
