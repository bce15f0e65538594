//! Conversation history, media files and full-text search.
//!
//! Place in the crate graph: depends on `conduit-core` only; `conduit-host` composes it.
//! Today it holds the media store: files stored once by content hash, their type
//! decided by their bytes. SQLite history and search come next.

pub mod media;

pub use media::FileMediaStore;
