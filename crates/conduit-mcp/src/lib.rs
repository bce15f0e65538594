//! The `mcpServers` file, MCP client connections, and the MCP server that serves Conduit's
//! own tools, resources and prompts.
//!
//! Place in the crate graph: depends on `conduit-core` (and `conduit-files` for safe
//! writes); `conduit-host` composes it. It is the one crate that names `rmcp`, so that
//! library's churn stays here.
//!
//! - [`config`]: the file in Claude Desktop's format, read without loss, written safely.
//! - [`naming`]: collision-free tool names every provider accepts, mapped back exactly.
//! - [`client`]: one session with a server over stdio or streamable HTTP; `spill` keeps
//!   the huge strings of large stdio messages out of rmcp's parser; [`paging`]: the one
//!   bounded way through a server's paged lists.
//! - [`result`]: MCP results into the core's rich result; [`tool`]: MCP tools as core tools.
//! - [`elicit`]: what a server asks the user (elicitation), read and checked, and the
//!   [`elicit::Asker`] seam a frontend answers through.
//! - [`sampling`]: a server's request to run a model (sampling), and roots, in Conduit's
//!   own types; the frontend decides through the same [`elicit::Asker`].
//! - [`redact`]: secrets kept out of errors, states and logs.
//! - [`apps`]: MCP Apps: which tools have a view, who may call a tool, a view read and
//!   its content security policy.
//! - [`runtime`]: the one runtime of the app and the command line: the file's servers and
//!   Conduit's own in-process ones ([`client::InProcessServer`], the tool-source seam),
//!   each supervised, restarted after a crash, and (with a watcher) kept in step with the
//!   file; [`servers`]: one server's start and state, tools under collision-free names.
//! - [`server`]: `ToolServer`, any [`server::Catalog`] served as MCP (in process, stdio);
//!   [`http`]: the same over streamable HTTP with a bearer token and DNS-rebinding checks;
//!   [`conformance`]: the official suite's fixtures (tests only).

pub mod apps;
pub mod client;
pub mod config;
#[cfg(any(test, feature = "conformance-fixtures"))]
pub mod conformance;
pub mod elicit;
mod envelope;
pub mod http;
mod legacy_sse;
mod listen_stream;
pub mod mention;
pub mod naming;
pub mod oauth;
pub mod paging;
mod process;
pub mod redact;
pub mod result;
pub mod runtime;
pub mod sampling;
pub mod server;
pub mod servers;
pub mod shell_path;
mod spill;
pub mod tool;
