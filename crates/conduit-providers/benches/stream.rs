//! What streaming costs: provider SSE bytes in, agent events out, per event, for each
//! protocol; and the process's peak memory while a 100,000-token answer streams.
//! Run with `make bench` (release build). Prints a report.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use conduit_core::agent::{Agent, AgentOptions, Approval, EventSink, FixedApproval};
use conduit_core::content::Message;
use conduit_core::provider::{EventStream, ModelInfo, ModelRequest, Provider, ProviderError};
use conduit_core::tool::ToolRegistry;
use conduit_providers::http::{StreamDecoder, decode_sse};
use conduit_providers::{anthropic, gemini, openai_chat, openai_responses};
use futures::StreamExt;

const TOKENS: usize = 100_000;

#[derive(Clone, Copy)]
enum Wire {
    Anthropic,
    Responses,
    Chat,
    Gemini,
}

impl Wire {
    fn name(self) -> &'static str {
        match self {
            Wire::Anthropic => "anthropic",
            Wire::Responses => "openai-responses",
            Wire::Chat => "openai-chat",
            Wire::Gemini => "gemini",
        }
    }

    fn decoder(self) -> Box<dyn StreamDecoder> {
        match self {
            Wire::Anthropic => Box::new(anthropic::Decoder::default()),
            Wire::Responses => Box::new(openai_responses::Decoder::default()),
            Wire::Chat => Box::new(openai_chat::Decoder::default()),
            Wire::Gemini => Box::new(gemini::Decoder::default()),
        }
    }

    /// The SSE event carrying token `i`, as the service sends it.
    fn delta(self, i: usize) -> String {
        let token = format!("tok{} ", i % 1000);
        match self {
            Wire::Anthropic => format!(
                "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{token}\"}}}}\n\n"
            ),
            Wire::Responses => format!(
                "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"{token}\",\"sequence_number\":{i}}}\n\n"
            ),
            Wire::Chat => format!(
                "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{token}\"}},\"finish_reason\":null}}]}}\n\n"
            ),
            Wire::Gemini => format!(
                "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"{token}\"}}],\"role\":\"model\"}},\"index\":0}}]}}\n\n"
            ),
        }
    }

    fn end(self) -> String {
        match self {
            Wire::Anthropic => "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":100000}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into(),
            Wire::Responses => "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":100000}}}\n\n".into(),
            Wire::Chat => "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n".into(),
            Wire::Gemini => "data: {\"candidates\":[{\"content\":{\"parts\":[],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}]}\n\n".into(),
        }
    }

    /// The whole answer as a byte stream made on the fly, one SSE event per chunk.
    fn bytes(
        self,
        tokens: usize,
    ) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
        futures::stream::iter((0..=tokens).map(move |i| {
            let text = if i == tokens {
                self.end()
            } else {
                self.delta(i)
            };
            Ok(Bytes::from(text))
        }))
    }
}

struct Boxed(Box<dyn StreamDecoder>);

impl StreamDecoder for Boxed {
    fn decode(
        &mut self,
        event: Option<&str>,
        data: &str,
    ) -> Result<Vec<conduit_core::provider::ProviderEvent>, ProviderError> {
        self.0.decode(event, data)
    }
    fn finish(&mut self) -> Result<Vec<conduit_core::provider::ProviderEvent>, ProviderError> {
        self.0.finish()
    }
}

/// A provider whose answer is the prepared byte stream, decoded as the real client does.
struct Replay {
    wire: Wire,
    tokens: usize,
}

#[async_trait]
impl Provider for Replay {
    fn protocol(&self) -> &'static str {
        self.wire.name()
    }

    async fn stream(&self, _request: ModelRequest) -> Result<EventStream, ProviderError> {
        Ok(decode_sse(
            self.wire.bytes(self.tokens),
            Boxed(self.wire.decoder()),
            Duration::from_secs(60),
        ))
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        Ok(Vec::new())
    }
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Bytes to decoded provider events only.
async fn decode_only(wire: Wire, tokens: usize) -> (u64, Duration) {
    let started = Instant::now();
    let mut stream = decode_sse(
        wire.bytes(tokens),
        Boxed(wire.decoder()),
        Duration::from_secs(60),
    );
    let mut events = 0u64;
    while let Some(item) = stream.next().await {
        if item.is_ok() {
            events += 1;
        }
    }
    (events, started.elapsed())
}

/// Bytes through the agent loop to the events a frontend receives.
async fn through_agent(wire: Wire, tokens: usize) -> (u64, Duration) {
    let count = Arc::new(AtomicU64::new(0));
    let seen = count.clone();
    let sink: EventSink = Arc::new(move |_event| {
        seen.fetch_add(1, Ordering::Relaxed);
    });
    let agent = Agent::new(
        Arc::new(Replay { wire, tokens }),
        ToolRegistry::new(),
        Arc::new(FixedApproval(Approval::Allow)),
        AgentOptions::new("bench"),
    );
    let mut history = vec![Message::user_text("Write a lot.")];
    let started = Instant::now();
    let outcome = agent
        .run(
            &mut history,
            sink,
            tokio_util::sync::CancellationToken::new(),
        )
        .await;
    let elapsed = started.elapsed();
    assert!(outcome.is_ok(), "{outcome:?}");
    (count.load(Ordering::Relaxed), elapsed)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let baseline = peak_rss_kib();
    println!("Streaming cost, {TOKENS} text deltas per answer (release build)");
    println!(
        "{:<18} {:>22} {:>26}",
        "protocol", "bytes→provider event", "bytes→agent event (UI)"
    );
    for wire in [Wire::Anthropic, Wire::Responses, Wire::Chat, Wire::Gemini] {
        // One warm-up pass, then the best of three.
        runtime.block_on(decode_only(wire, 10_000));
        let mut best_decode = f64::MAX;
        let mut best_agent = f64::MAX;
        for _ in 0..3 {
            let (events, took) = runtime.block_on(decode_only(wire, TOKENS));
            best_decode = best_decode.min(took.as_secs_f64() * 1e6 / events as f64);
            let (events, took) = runtime.block_on(through_agent(wire, TOKENS));
            best_agent = best_agent.min(took.as_secs_f64() * 1e6 / events as f64);
        }
        println!(
            "{:<18} {:>19.2} µs {:>23.2} µs",
            wire.name(),
            best_decode,
            best_agent
        );
    }
    let peak = peak_rss_kib();
    println!(
        "peak RSS of this process: {:.1} MiB (before streaming: {:.1} MiB); budget per event: 50 µs",
        peak as f64 / 1024.0,
        baseline as f64 / 1024.0
    );
}
