//! Conversation history, media files and full-text search on SQLite.
//!
//! Place in the crate graph: depends on `conduit-core` only; `conduit-host` composes it.
