//! The conversation model, tools and the agent loop: pure logic with no I/O of its own.
//!
//! Place in the crate graph: the root. `conduit-providers`, `conduit-mcp` and
//! `conduit-store` build on it; it names no wire format, no database and no window.
//!
//! - [`content`]: messages as lists of blocks (text, image, attached file, reasoning, tool
//!   call, tool result).
//! - [`attached`]: the one check of a text file attached to a message (its name and text).
//! - [`media`]: the store that blocks reference media through.
//! - [`images`]: the one bounded decode and shrink of an image (its size and memory limits).
//! - [`tool`]: the [`tool::Tool`] trait and the registry the loop looks tools up in.
//! - [`provider`]: the [`provider::Provider`] trait and its typed stream events.
//! - [`agent`]: the loop that streams, approves and runs tools, and keeps history valid.
//! - [`approval`]: the policy that asks the user and waits for the answer.
//! - [`backoff`]: the exponential wait before trying again (provider retries, MCP restarts).
//! - [`text`]: the characters that hide or reorder text (what untrusted text may not carry
//!   unseen).
//! - [`task`]: background tasks spawned boxed (one task type for all of them).

pub mod agent;
pub mod approval;
pub mod attached;
pub mod backoff;
pub mod content;
pub mod context_fit;
pub mod images;
pub mod media;
pub mod provider;
pub mod task;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod text;
pub mod tool;
