//! Stored media in the window: the `media:` URL scheme serves images, audio and long outputs
//! (never a PDF: it opens in the system's viewer) from the media store as files by hash
//! (`media://localhost/<hash>`, `.../<hash>/thumb` for the small thumbnail,
//! `.../<hash>/w/<width>` for an image sized to one of the allowed widths), never as
//! base64 through IPC; a waiting sampling request's images, drawn anew
//! as PNGs, small for the review (`.../sampling/<request id>/<n>`) or whole for the viewer
//! (`.../sampling/<request id>/<n>/whole`); and the commands that copy a stored image to the
//! clipboard or save it through a native save dialog. The page only names a hash; the host
//! checks it and the user picks the path.

use std::sync::Arc;

use conduit_host::app::App;
use conduit_host::asks::{PreviewFailed, SamplingView};
use conduit_host::store::media::THUMBNAIL_WIDTHS;
use tauri::http::{Response, StatusCode, header};
use tauri_plugin_clipboard_manager::ClipboardExt;

use conduit_host::app::CommandError;
use conduit_host::core::content::MediaRef;

use crate::bindgen::window_command;
use crate::commands::{AppState, Reply};

/// What a `media:` path asks for.
#[derive(Debug, PartialEq, Eq)]
enum Wanted<'a> {
    File(&'a str),
    Thumbnail(&'a str),
    Sized(&'a str, u32),
    /// The `n`th image of a waiting sampling request, by the host's id for it.
    SamplingImage(&'a str, usize, SamplingView),
}

/// Reads a `media:` path; `None` for anything else (the hash itself is checked by the store).
fn parse(path: &str) -> Option<Wanted<'_>> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        [hash] => Some(Wanted::File(hash)),
        [hash, "thumb"] => Some(Wanted::Thumbnail(hash)),
        ["sampling", id, n] => Some(Wanted::SamplingImage(
            id,
            n.parse().ok()?,
            SamplingView::Preview,
        )),
        ["sampling", id, n, "whole"] => Some(Wanted::SamplingImage(
            id,
            n.parse().ok()?,
            SamplingView::Whole,
        )),
        [hash, "w", width] => {
            let width: u32 = width.parse().ok()?;
            THUMBNAIL_WIDTHS
                .contains(&width)
                .then_some(Wanted::Sized(hash, width))
        }
        _ => None,
    }
}

/// How many MiB of media files are read at once, over all requests.
const READ_BUDGET_MIB: u32 = 256;
static READING: tokio::sync::Semaphore =
    tokio::sync::Semaphore::const_new(READ_BUDGET_MIB as usize);

/// The origins of Conduit's own pages: WebKitGTK's and macOS's, and WebView2's.
const APP_ORIGINS: [&str; 2] = ["tauri://localhost", "http://tauri.localhost"];

/// Whether the page of `origin` may read the bytes of a stored file of type `mime` (a
/// `fetch`, not only show it): only Conduit's own page, and only audio. WebKitGTK's
/// media player cannot load a custom scheme (WebKit bug 146351: GStreamer has no source
/// for `media:`), so the page fetches a recording and plays it from a `blob:` URL. A
/// view (its own `mcp-app:` origin) reads nothing.
fn readable_by(origin: Option<&str>, mime: &str) -> Option<&'static str> {
    let origin = origin?;
    if !mime.starts_with("audio/") {
        return None;
    }
    APP_ORIGINS.into_iter().find(|own| *own == origin)
}

/// Whether a stored file of type `mime` is served to the window at all. Not a PDF: the
/// window shows one as its name and size, and a page's script framing one would hand a
/// server's PDF to the webview's own viewer.
fn served_to_the_window(mime: &str) -> bool {
    mime != conduit_host::core::attached::PDF_MIME
}

pub async fn respond(app: Arc<App>, path: &str, origin: Option<&str>) -> Response<Vec<u8>> {
    let host = app.host();
    let found = match parse(path) {
        None => return status(StatusCode::BAD_REQUEST),
        Some(Wanted::File(hash)) => host.media_file(hash, false),
        Some(Wanted::Thumbnail(hash)) => host.media_file(hash, true),
        Some(Wanted::SamplingImage(id, n, view)) => {
            return sampling_image(&app, id, n, view).await;
        }
        Some(Wanted::Sized(hash, width)) => {
            // Making a thumbnail decodes the image: off the async workers.
            let (app, hash) = (app.clone(), hash.to_owned());
            match tokio::task::spawn_blocking(move || app.host().media_sized(&hash, width)).await {
                Ok(Ok(found)) => found,
                Ok(Err(error)) => {
                    tracing::warn!(%error, "cannot size a stored image");
                    return status(StatusCode::UNPROCESSABLE_ENTITY);
                }
                Err(error) => {
                    tracing::warn!(%error, "sizing a stored image stopped");
                    return status(StatusCode::INTERNAL_SERVER_ERROR);
                }
            }
        }
    };
    let Some((file, mime)) = found else {
        return status(StatusCode::NOT_FOUND);
    };
    if !served_to_the_window(mime) {
        return status(StatusCode::FORBIDDEN);
    }
    // A long output's file can be hundreds of MiB: however many requests a script in the
    // page makes at once, the files being read weigh at most `READ_BUDGET_MIB` together
    // (or one file alone, when it is larger).
    let size = tokio::fs::metadata(&file)
        .await
        .map_or(0, |meta| meta.len());
    let weight = u32::try_from(size.div_ceil(1024 * 1024))
        .unwrap_or(u32::MAX)
        .clamp(1, READ_BUDGET_MIB);
    let Ok(_reading) = READING.acquire_many(weight).await else {
        return status(StatusCode::SERVICE_UNAVAILABLE);
    };
    match tokio::fs::read(&file).await {
        Ok(bytes) => {
            let mut response = Response::builder()
                .header(header::CONTENT_TYPE, mime)
                // Content-addressed: a hash always names the same bytes.
                .header(header::CACHE_CONTROL, "max-age=31536000, immutable")
                .header("X-Content-Type-Options", "nosniff")
                .header(header::VARY, "Origin");
            if let Some(origin) = readable_by(origin, mime) {
                response = response.header(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            }
            response
                .body(bytes)
                .unwrap_or_else(|_| status(StatusCode::INTERNAL_SERVER_ERROR))
        }
        Err(error) => {
            tracing::warn!(%error, file = %file.display(), "cannot read a media file");
            status(StatusCode::NOT_FOUND)
        }
    }
}

/// A sampling request's image as the review shows it: never cached (it is gone with the
/// request), and never the server's bytes themselves.
async fn sampling_image(app: &App, id: &str, n: usize, view: SamplingView) -> Response<Vec<u8>> {
    match app.asker().sampling_preview(id, n, view).await {
        Some(Ok(png)) => Response::builder()
            .header(header::CONTENT_TYPE, "image/png")
            .header(header::CACHE_CONTROL, "no-store")
            .header("X-Content-Type-Options", "nosniff")
            .body(png)
            .unwrap_or_else(|_| status(StatusCode::INTERNAL_SERVER_ERROR)),
        None => status(StatusCode::NOT_FOUND),
        Some(Err(error @ PreviewFailed::Image(_))) => {
            tracing::warn!(%error, "a sampling request's image cannot be shown");
            status(StatusCode::UNPROCESSABLE_ENTITY)
        }
        Some(Err(error @ PreviewFailed::Stopped(_))) => {
            tracing::warn!(%error, "drawing a sampling request's image stopped");
            status(StatusCode::INTERNAL_SERVER_ERROR)
        }
        // The viewer shows another image now; nobody waits for this one.
        Some(Err(PreviewFailed::Superseded)) => status(StatusCode::CONFLICT),
    }
}

fn status(code: StatusCode) -> Response<Vec<u8>> {
    let mut response = Response::new(Vec::new());
    *response.status_mut() = code;
    response
}

/// The stored image with this hash, or a clear error (not a hash, missing, not an image).
fn stored_image(state: &AppState, hash: &str) -> Reply<(std::path::PathBuf, &'static str)> {
    let (path, mime) = state
        .app
        .host()
        .media_file(hash, false)
        .ok_or_else(|| CommandError::message(format!("no stored image {hash:?}")))?;
    if !mime.starts_with("image/") {
        return Err(CommandError::message(format!(
            "the stored file {hash:?} is no image ({mime})"
        )));
    }
    Ok((path, mime))
}

/// Why a clipboard image could not be copied or pasted (the source kept for the window).
#[derive(Debug, thiserror::Error)]
enum ClipboardError {
    #[error("the stored image cannot be read")]
    Open(#[source] std::io::Error),
    #[error("the stored image does not decode")]
    Decode(#[source] conduit_host::core::images::DecodeError),
    #[error("cannot copy the image")]
    Write(#[source] tauri_plugin_clipboard_manager::Error),
    #[error("no image on the clipboard")]
    Read(#[source] tauri_plugin_clipboard_manager::Error),
    #[error("the clipboard's image has the wrong size")]
    Size,
    #[error("cannot encode the clipboard's image")]
    Encode(#[source] image::ImageError),
}

window_command! {
/// Puts a stored image on the system clipboard (as pixels; the system offers it as PNG).
#[tauri::command]
pub async fn copy_image(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    hash: String,
) -> Reply<()> {
    let (path, _) = stored_image(&state, &hash)?;
    // The read, decode and clipboard write (seconds for a large image) run on the blocking
    // pool, a few decodes at a time in the process: on the async workers two copies at
    // once held up every turn and server.
    tauri::async_runtime::spawn_blocking(move || copy_to_clipboard(&app, &path))
        .await
        .map_err(|e| CommandError::message(format!("copying the image stopped: {e}")))??;
    Ok(())
}
}

/// Decodes the stored image at `path` and puts its pixels on the clipboard.
fn copy_to_clipboard(app: &tauri::AppHandle, path: &std::path::Path) -> Result<(), ClipboardError> {
    let _turn = conduit_host::core::images::decode_turn();
    // Within the limits every image is read with: one stored before they held could
    // decode to gigabytes.
    let bytes = std::fs::read(path).map_err(ClipboardError::Open)?;
    let pixels = conduit_host::core::images::decode(&bytes)
        .map_err(ClipboardError::Decode)?
        .1
        .into_rgba8();
    let (width, height) = pixels.dimensions();
    let image = tauri::image::Image::new_owned(pixels.into_raw(), width, height);
    app.clipboard()
        .write_image(&image)
        .map_err(ClipboardError::Write)
}

window_command! {
/// Stores the image on the system clipboard in the media store, for a paste the webview
/// cannot read itself (WebKitGTK gives a page no image data from the clipboard): the
/// window attaches the stored image like a picked file and never holds its bytes. Off
/// the main thread: reading the clipboard there can deadlock on Linux.
#[tauri::command]
pub async fn clipboard_image(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
) -> Reply<MediaRef> {
    let png = tauri::async_runtime::spawn_blocking(move || clipboard_png(&app))
        .await
        .map_err(|e| CommandError::message(format!("reading the clipboard stopped: {e}")))??;
    Ok(state.app.store_attachment(png).await?)
}
}

/// The clipboard's image as PNG bytes.
fn clipboard_png(app: &tauri::AppHandle) -> Result<Vec<u8>, ClipboardError> {
    let image = app.clipboard().read_image().map_err(ClipboardError::Read)?;
    let pixels = image::RgbaImage::from_raw(image.width(), image.height(), image.rgba().to_vec())
        .ok_or(ClipboardError::Size)?;
    let mut png = Vec::new();
    pixels
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .map_err(ClipboardError::Encode)?;
    Ok(png)
}

window_command! {
/// Asks where to save a stored image with the system's save dialog and copies it there.
/// `Ok(None)` when the person cancels; `Ok(Some(path))` where it was saved.
#[tauri::command]
pub async fn save_image(
    app: tauri::AppHandle,
    state: tauri::State<'_, AppState>,
    hash: String,
) -> Reply<Option<String>> {
    let (path, mime) = stored_image(&state, &hash)?;
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("png")
        .to_owned();
    let short = hash.get(..8).unwrap_or("image");
    let Some(target) = crate::native::choose_save_path(
        &app,
        "Save image",
        &format!("image-{short}.{extension}"),
        (mime, &[extension.as_str()]),
    )
    .await?
    else {
        return Ok(None);
    };
    App::save_copy(path, target.clone()).await.map_err(|e| {
        CommandError::message(format!("cannot save the image to {}: {e}", target.display()))
    })?;
    tracing::info!(file = %target.display(), "saved an image");
    Ok(Some(target.display().to_string()))
}
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Only Conduit's own page reads a stored file's bytes, and only a recording's: not a
    /// view's origin, not a page that names none, not an image.
    #[test]
    fn only_the_apps_own_page_reads_the_bytes_of_a_recording() {
        assert_eq!(
            readable_by(Some("tauri://localhost"), "audio/wav"),
            Some("tauri://localhost")
        );
        assert_eq!(
            readable_by(Some("http://tauri.localhost"), "audio/mpeg"),
            Some("http://tauri.localhost")
        );
        assert_eq!(readable_by(Some("tauri://localhost"), "image/png"), None);
        assert_eq!(readable_by(Some("mcp-app://0123abcd"), "audio/wav"), None);
        assert_eq!(readable_by(Some("null"), "audio/wav"), None);
        assert_eq!(
            readable_by(Some("tauri://localhost.evil"), "audio/wav"),
            None
        );
        assert_eq!(readable_by(None, "audio/wav"), None);
    }

    #[test]
    fn a_pdf_is_never_served_to_the_window() {
        assert!(!served_to_the_window("application/pdf"));
        for shown in ["image/png", "audio/wav", "text/plain", "application/json"] {
            assert!(served_to_the_window(shown), "{shown}");
        }
    }

    #[test]
    fn only_known_shapes_and_allowed_widths_are_asked_for() {
        let hash = "a".repeat(64);
        assert_eq!(parse(&format!("/{hash}")), Some(Wanted::File(&hash)));
        assert_eq!(
            parse(&format!("/{hash}/thumb")),
            Some(Wanted::Thumbnail(&hash))
        );
        assert_eq!(
            parse(&format!("/{hash}/w/1024")),
            Some(Wanted::Sized(&hash, 1024))
        );
        assert_eq!(
            parse("/sampling/sample_0193/2"),
            Some(Wanted::SamplingImage(
                "sample_0193",
                2,
                SamplingView::Preview
            ))
        );
        assert_eq!(
            parse("/sampling/sample_0193/2/whole"),
            Some(Wanted::SamplingImage("sample_0193", 2, SamplingView::Whole))
        );
        for bad in [
            "/sampling/sample_0193/-1".to_owned(),
            "/sampling/sample_0193/x".to_owned(),
            "/sampling/sample_0193".to_owned(),
            "/sampling/sample_0193/0/extra".to_owned(),
            "/sampling/sample_0193/0/whole/extra".to_owned(),
            "/sampling/sample_0193/x/whole".to_owned(),
            format!("/{hash}/w/1000"),
            format!("/{hash}/w/99999999999"),
            format!("/{hash}/w/-1"),
            format!("/{hash}/w/"),
            format!("/{hash}/x"),
            format!("/{hash}/w/512/extra"),
        ] {
            assert_eq!(parse(&bad), None, "{bad}");
        }
    }
}
