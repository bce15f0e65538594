//! The thinking asked for reaches every protocol in the field its API documents, and a
//! request that asks for none carries none of them.

use conduit_core::content::{Block, Message, ResultPart, Role, ToolCall, ToolResult};
use conduit_core::provider::{ProviderError, ProviderErrorKind, ReasoningEffort};
use serde_json::{Value, json};

use crate::images::PreparedImages;
use crate::test_support::request;
use crate::wire::Wire;
use crate::{anthropic, gemini, openai_chat, openai_responses};

fn bodies(reasoning: Option<ReasoningEffort>) -> [Value; 4] {
    let mut asked = request(vec![Message::user_text("Plan the migration")]);
    asked.reasoning = reasoning;
    let images = PreparedImages::new();
    [
        anthropic::build_request(&asked, &images),
        openai_responses::build_request(&asked, &images),
        openai_chat::build_request(&asked, &images),
        gemini::build_request(&asked, &images),
    ]
}

#[test]
fn thinking_goes_to_each_protocol_in_its_own_field() {
    let [anthropic, responses, chat, gemini] = bodies(Some(ReasoningEffort::High));
    // `test-model` is not named Claude: the budget, as Anthropic-style endpoints take it.
    assert_eq!(
        anthropic["thinking"],
        json!({"type": "enabled", "budget_tokens": 16384})
    );
    assert_eq!(anthropic.get("output_config"), None);
    // The budget counts within max_tokens, which keeps room for the answer.
    assert_eq!(anthropic["max_tokens"], 16384 + 8192);
    assert_eq!(
        responses["reasoning"],
        json!({"effort": "high", "summary": "auto"})
    );
    assert_eq!(chat["reasoning_effort"], "high");
    assert_eq!(
        gemini["generationConfig"]["thinkingConfig"],
        json!({"thinkingBudget": 16384, "includeThoughts": true})
    );

    let [anthropic, responses, chat, gemini] = bodies(Some(ReasoningEffort::Low));
    assert_eq!(anthropic["thinking"]["budget_tokens"], 2048);
    assert_eq!(responses["reasoning"]["effort"], "low");
    assert_eq!(chat["reasoning_effort"], "low");
    assert_eq!(
        gemini["generationConfig"]["thinkingConfig"]["thinkingBudget"],
        2048
    );
}

#[test]
fn a_larger_output_limit_is_kept_and_no_thinking_asks_for_none() {
    let mut asked = request(vec![Message::user_text("Plan the migration")]);
    asked.reasoning = Some(ReasoningEffort::Medium);
    asked.max_output_tokens = Some(64_000);
    let anthropic = anthropic::build_request(&asked, &PreparedImages::new());
    assert_eq!(anthropic["max_tokens"], 64_000);

    let [anthropic, responses, chat, gemini] = bodies(None);
    assert_eq!(anthropic.get("thinking"), None);
    assert_eq!(anthropic["max_tokens"], 8192);
    assert_eq!(responses.get("reasoning"), None);
    assert_eq!(chat.get("reasoning_effort"), None);
    assert_eq!(gemini.get("generationConfig"), None);
}

#[test]
fn a_level_is_read_from_its_word_only() {
    assert_eq!("medium".parse(), Ok(ReasoningEffort::Medium));
    let refused = "max".parse::<ReasoningEffort>().unwrap_err();
    assert_eq!(
        refused,
        "\"max\" is not a thinking level: use low, medium or high"
    );
}

/// Claude 4.6 and later think adaptively (the fixed budget is deprecated there and
/// refused from Opus 4.7 on); older models take the budget.
#[test]
fn each_claude_is_asked_to_think_in_the_form_it_takes() {
    for (model, adaptive) in [
        ("claude-sonnet-4-6", true),
        ("claude-opus-4-7", true),
        ("anthropic.claude-opus-4-6-v1", true),
        ("claude-mythos-preview", true),
        ("claude-sonnet-5", true),
        ("claude-next", true),
        ("deepseek-chat", false),
        ("my-proxy-alias", false),
        ("claude-sonnet-4-5-20250929", false),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", false),
        ("claude-opus-4-1-20250805", false),
        ("claude-opus-4-20250514", false),
        ("claude-haiku-4-5", false),
        ("claude-3-7-sonnet-20250219", false),
        ("claude-3-7-sonnet-latest", false),
    ] {
        assert_eq!(anthropic::thinks_adaptively(model), adaptive, "{model}");
    }
    let mut asked = request(vec![Message::user_text("Plan the migration")]);
    asked.model = "claude-3-7-sonnet-20250219".into();
    asked.reasoning = Some(ReasoningEffort::High);
    let body = anthropic::build_request(&asked, &PreparedImages::new());
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 16384})
    );
    assert_eq!(body.get("output_config"), None);
    assert_eq!(body["max_tokens"], 16384 + 8192);
}

/// A tool loop (the model's answer, then its tools' results) as a request asks it.
fn tool_loop(
    model: &str,
    answer_starts_thinking: bool,
    reasoning: Option<ReasoningEffort>,
) -> Value {
    let mut blocks = Vec::new();
    if answer_starts_thinking {
        blocks.push(Block::Reasoning {
            text: "read it first".into(),
            signature: Some("sig".into()),
            encrypted: None,
            id: None,
            protocol: Some("anthropic".into()),
            producer: None,
        });
    }
    blocks.push(Block::ToolCall(ToolCall {
        id: "toolu_1".into(),
        name: "files__read".into(),
        arguments: json!({}),
        signature: None,
        invalid_arguments: None,
        wire_id: None,
        origin: None,
    }));
    let mut asked = request(vec![
        Message::user_text("Read the plan"),
        Message {
            role: Role::Assistant,
            blocks,
        },
        Message {
            role: Role::Tool,
            blocks: vec![Block::ToolResult(ToolResult {
                call_id: "toolu_1".into(),
                wire_id: None,
                name: "files__read".into(),
                is_error: false,
                parts: vec![ResultPart::Text {
                    text: "the plan".into(),
                }],
            })],
        },
    ]);
    asked.model = model.into();
    asked.reasoning = reasoning;
    anthropic::build_request(&asked, &PreparedImages::new())
}

/// With a fixed budget, a tool loop whose last answer was written without thinking
/// (Thinking picked after it failed, then *Try again*) goes on without it; one whose
/// answer began with its thinking keeps it. Adaptive thinking may skip a step, so it
/// goes on either way.
#[test]
fn a_tool_loop_answered_without_thinking_goes_on_as_the_api_allows() {
    let older = "claude-sonnet-4-5-20250929";
    let medium = Some(ReasoningEffort::Medium);
    assert_eq!(tool_loop(older, false, medium).get("thinking"), None);
    assert_eq!(
        tool_loop(older, true, medium)["thinking"]["type"],
        "enabled"
    );
    assert_eq!(
        tool_loop("claude-sonnet-4-6", false, medium)["thinking"],
        json!({"type": "adaptive"})
    );
}

/// Thinking set back to Default before *Try again*: the loop's answer that began with
/// its thinking goes without it, as a request that asks none must.
#[test]
fn a_tool_loop_asked_without_thinking_leaves_the_answers_thinking_out() {
    let body = tool_loop("claude-sonnet-4-6", true, None);
    assert_eq!(body.get("thinking"), None);
    assert_eq!(
        body["messages"][1]["content"][0]["type"], "tool_use",
        "{body}"
    );
    // Thinking earlier in the conversation, not at its end, is sent as it was.
    let mut asked = request(vec![
        Message {
            role: Role::Assistant,
            blocks: vec![
                Block::Reasoning {
                    text: "hm".into(),
                    signature: Some("sig".into()),
                    encrypted: None,
                    id: None,
                    protocol: Some("anthropic".into()),
                    producer: None,
                },
                Block::text("Done."),
            ],
        },
        Message::user_text("Thanks"),
    ]);
    asked.model = "claude-sonnet-4-6".into();
    let body = anthropic::build_request(&asked, &PreparedImages::new());
    assert_eq!(body["messages"][0]["content"][0]["type"], "thinking");
}

/// An organisation OpenAI has not verified may not have reasoning summaries: the request
/// goes again without the summary (and without encrypted reasoning), keeping the effort.
#[test]
fn a_refused_reasoning_summary_is_dropped_and_the_effort_kept() {
    use openai_responses::OpenAiResponses as Responses;
    let [_, mut responses, _, _] = bodies(Some(ReasoningEffort::Medium));
    assert!(Responses::has_optional(&responses));
    let refusal = ProviderError {
        kind: ProviderErrorKind::InvalidRequest,
        status: Some(400),
        message: "Your organization must be verified to generate reasoning summaries. Please go to: https://platform.openai.com/settings/organization/general and click on Verify Organization.".into(),
        retry_after: None,
    };
    assert!(Responses::refuses_optional(&refusal));
    Responses::drop_optional(&mut responses);
    assert_eq!(responses["reasoning"], json!({"effort": "medium"}));
    assert_eq!(responses.get("include"), None);
    assert!(!Responses::has_optional(&responses));
}
