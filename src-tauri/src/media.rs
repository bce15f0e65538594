//! The `media:` URL scheme: images, audio and long outputs from the media store reach the
//! webview as files by hash (`media://localhost/<hash>`, `.../<hash>/thumb` for an
//! image's thumbnail), never as base64 through IPC.

use conduit_host::Host;
use tauri::http::{Response, StatusCode, header};

pub async fn respond(host: &Host, path: &str) -> Response<Vec<u8>> {
    let path = path.trim_start_matches('/');
    let (hash, thumbnail) = match path.strip_suffix("/thumb") {
        Some(hash) => (hash, true),
        None => (path, false),
    };
    let Some((file, mime)) = host.media_file(hash, thumbnail) else {
        return status(StatusCode::NOT_FOUND);
    };
    match tokio::fs::read(&file).await {
        Ok(bytes) => Response::builder()
            .header(header::CONTENT_TYPE, mime)
            // Content-addressed: a hash always names the same bytes.
            .header(header::CACHE_CONTROL, "max-age=31536000, immutable")
            .header("X-Content-Type-Options", "nosniff")
            .body(bytes)
            .unwrap_or_else(|_| status(StatusCode::INTERNAL_SERVER_ERROR)),
        Err(error) => {
            tracing::warn!(%error, file = %file.display(), "cannot read a media file");
            status(StatusCode::NOT_FOUND)
        }
    }
}

fn status(code: StatusCode) -> Response<Vec<u8>> {
    let mut response = Response::new(Vec::new());
    *response.status_mut() = code;
    response
}
