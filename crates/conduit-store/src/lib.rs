//! Conversation history, media files and full-text search.
//!
//! Place in the crate graph: depends on `conduit-core` only; `conduit-host` composes it.
//! - [`history`]: conversations on SQLite (WAL, versioned migrations, FTS5 search),
//!   written block by block so a crash loses at most the block in flight.
//! - [`media`]: files stored once by content hash, their type decided by their bytes,
//!   with thumbnails.
//! - [`export`]: a conversation as Markdown or JSON, images beside the file.
//! - `words`: how text is cut into words for search (Chinese and Japanese a character
//!   at a time).
//! - [`sweep`]: media files no stored message references removed after a grace period.

pub mod export;
pub mod history;
pub mod media;
mod schema;
pub mod sweep;
mod words;

pub use history::{Conversation, MessageStatus, SearchHit, Store, StoreError, StoredMessage};
pub use media::{FileMediaStore, ScratchMediaStore};
pub use sweep::{HistoryDamage, MEDIA_GRACE, MediaSweep};
