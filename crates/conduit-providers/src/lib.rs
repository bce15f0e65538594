//! LLM wire protocols (Anthropic Messages, OpenAI Responses, OpenAI Chat Completions,
//! Gemini) behind the core's provider interface.
//!
//! Place in the crate graph: depends on `conduit-core` only; `conduit-host` composes it.
//! Each protocol will live in one module of pure converters plus a streaming client.
