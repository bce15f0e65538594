//! Access to stored media (images, audio) by reference, so that messages carry hashes and
//! only the code that needs the bytes loads them.

use crate::content::MediaRef;

/// A failure to store or load media.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MediaError {
    #[error("the media file {hash} is missing")]
    Missing { hash: String },
    #[error("the image is not usable: {0}")]
    Invalid(String),
    #[error("cannot read or write media: {0}")]
    Io(String),
}

/// Stores media by content hash and gives the bytes back.
pub trait MediaStore: Send + Sync {
    /// Stores `bytes`; the bytes decide the type, `declared_mime` is only a hint.
    fn put(&self, bytes: &[u8], declared_mime: Option<&str>) -> Result<MediaRef, MediaError>;

    fn load(&self, media: &MediaRef) -> Result<Vec<u8>, MediaError>;

    /// What is stored under `hash` (its type, size and an image's dimensions), without
    /// reading its bytes; `None` when nothing is.
    fn reference(&self, hash: &str) -> Option<MediaRef>;
}
