//! The thinking asked for reaches every protocol in the field its API documents, and a
//! request that asks for none carries none of them.

use conduit_core::content::Message;
use conduit_core::provider::ReasoningEffort;
use serde_json::{Value, json};

use crate::images::PreparedImages;
use crate::test_support::request;
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
    assert_eq!(
        anthropic["thinking"],
        json!({"type": "enabled", "budget_tokens": 16384})
    );
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
