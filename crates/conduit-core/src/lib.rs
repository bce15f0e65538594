//! The conversation model, tools and the agent loop: pure logic with no I/O of its own.
//!
//! Place in the crate graph: the root. `conduit-providers`, `conduit-mcp` and
//! `conduit-store` build on it; it names no wire format, no database and no window.
