//! Test fakes shared by every crate's tests, each written once: [`llm_server`], a scripted
//! LLM server on loopback that speaks all four provider protocols.

pub mod llm_server;
