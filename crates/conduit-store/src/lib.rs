//! Conversation history, media files and full-text search.
//!
//! Place in the crate graph: depends on `conduit-core` only; `conduit-host` composes it.
//! - [`history`]: conversations on SQLite (WAL, versioned migrations, FTS5 search),
//!   written block by block so a crash loses at most the block in flight.
//! - [`media`]: files stored once by content hash, their type decided by their bytes,
//!   with thumbnails.
//! - [`export`]: a conversation as Markdown or JSON, images beside the file.

pub mod export;
pub mod history;
pub mod media;
mod schema;

pub use history::{Conversation, MessageStatus, SearchHit, Store, StoreError, StoredMessage};
pub use media::{FileMediaStore, ScratchMediaStore};
