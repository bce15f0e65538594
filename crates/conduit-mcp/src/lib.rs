//! The `mcpServers` file, MCP client connections and the MCP server for built-in tools.
//!
//! Place in the crate graph: depends on `conduit-core` only; `conduit-host` composes it.
//! It is the one crate that names `rmcp`, so that library's churn stays here.
