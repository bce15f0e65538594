//! `conduit mcp serve` over stdio and streamable HTTP, reached by the official SDK clients.
