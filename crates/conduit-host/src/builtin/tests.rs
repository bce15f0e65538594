//! Tests of the built-in tools against a real history database and media folder in a
//! temporary directory: what each returns, and an error result for every bad input.

use std::io::Cursor;
use std::sync::Arc;

use conduit_core::content::{Block, Message, ResultPart, Role, ToolCall, ToolResult};
use conduit_core::media::MediaStore;
use conduit_core::tool::{Tool, ToolContext, ToolOutput};
use conduit_store::MessageStatus;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::Paths;

fn host() -> (tempfile::TempDir, Arc<Host>) {
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(Host::new(Paths::under_home(dir.path().to_owned(), None)));
    (dir, host)
}

fn tool(host: &Arc<Host>, name: &str) -> Arc<dyn Tool> {
    builtin_tools(host)
        .into_iter()
        .find(|tool| tool.spec().name == name)
        .unwrap()
}

async fn call(tool: &dyn Tool, arguments: Value) -> ToolOutput {
    let context = ToolContext::new(CancellationToken::new(), Arc::new(|_| {}));
    tool.call(arguments, context).await.unwrap()
}

fn text(output: &ToolOutput) -> String {
    output
        .parts
        .iter()
        .filter_map(|part| match part {
            ResultPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn structured(output: &ToolOutput) -> Value {
    assert!(!output.is_error, "{}", text(output));
    output
        .parts
        .iter()
        .find_map(|part| match part {
            ResultPart::Structured { value } => Some(value.clone()),
            _ => None,
        })
        .unwrap()
}

/// Calls `name` with `arguments` and expects an error result whose text contains `says`.
async fn refused(host: &Arc<Host>, name: &str, arguments: Value, says: &str) {
    let output = call(tool(host, name).as_ref(), arguments.clone()).await;
    assert!(
        output.is_error,
        "{name} {arguments} should fail: {}",
        text(&output)
    );
    let message = text(&output);
    assert!(
        message.contains(says),
        "{name} {arguments}: {message:?} should say {says:?}"
    );
}

fn png(width: u32, height: u32, shade: u8) -> Vec<u8> {
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(image::RgbImage::from_pixel(
        width,
        height,
        image::Rgb([shade, 10, 10]),
    ))
    .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
    .unwrap();
    out
}

// --- the registry and its settings ----------------------------------------------------

#[test]
fn every_tool_has_a_name_title_schemas_and_honest_annotations() {
    let (_dir, host) = host();
    let tools = builtin_tools(&host);
    let names: Vec<String> = tools.iter().map(|t| t.spec().name.clone()).collect();
    assert_eq!(
        names,
        [
            "search_history",
            "read_conversation",
            "list_conversations",
            "time_now",
            "convert_time",
            "render_chart",
            "get_image"
        ]
    );
    assert_eq!(builtin_tool_names(), names);
    for tool in &tools {
        let spec = tool.spec();
        assert!(
            spec.name.len() <= 64
                && spec
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{}",
            spec.name
        );
        assert!(spec.title.as_deref().is_some_and(|t| !t.is_empty()));
        assert!(spec.description.len() > 80, "{}", spec.name);
        assert_eq!(spec.input_schema["type"], "object", "{}", spec.name);
        assert_eq!(spec.input_schema["additionalProperties"], false);
        if let Some(output) = &spec.output_schema {
            assert_eq!(output["type"], "object", "{}", spec.name);
        }
        assert!(tool.origin().is_none());
        let hints = &spec.annotations;
        assert_eq!(hints.open_world_hint, Some(false), "{}", spec.name);
        assert_eq!(hints.destructive_hint, Some(false), "{}", spec.name);
        // Only the chart writes (a PNG into the media store).
        assert_eq!(
            hints.read_only_hint,
            Some(spec.name != "render_chart"),
            "{}",
            spec.name
        );
    }
    let structured: Vec<&str> = tools
        .iter()
        .filter(|t| t.spec().output_schema.is_some())
        .map(|t| t.spec().name.as_str())
        .collect();
    assert_eq!(
        structured,
        [
            "search_history",
            "read_conversation",
            "list_conversations",
            "time_now",
            "convert_time"
        ]
    );
}

#[test]
fn built_in_tools_are_enabled_and_disabled_in_settings_like_a_servers_tools() {
    let (dir, host) = host();
    assert!(
        host.builtin_tool_states()
            .unwrap()
            .iter()
            .all(|t| t.enabled)
    );
    assert_eq!(enabled_builtin_tools(&host).unwrap().len(), 7);

    assert!(
        host.set_builtin_tool_enabled("render_chart", false)
            .unwrap()
    );
    assert!(
        !host
            .set_builtin_tool_enabled("render_chart", false)
            .unwrap()
    );
    let states = host.builtin_tool_states().unwrap();
    let chart = states.iter().find(|t| t.name == "render_chart").unwrap();
    assert!(!chart.enabled);
    assert_eq!(chart.title, "Render a chart");
    assert_eq!(states.iter().filter(|t| t.enabled).count(), 6);
    let enabled: Vec<String> = enabled_builtin_tools(&host)
        .unwrap()
        .iter()
        .map(|t| t.spec().name.clone())
        .collect();
    assert!(!enabled.contains(&"render_chart".to_owned()), "{enabled:?}");

    // The same shape as an MCP server's switches, under the reserved name.
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("settings.json")).unwrap())
            .unwrap();
    assert_eq!(
        saved["mcpServers"][BUILTIN_SERVER]["disabledTools"],
        json!(["render_chart"])
    );

    let unknown = host.set_builtin_tool_enabled("rm_rf", false).unwrap_err();
    assert!(
        unknown.to_string().contains("no built-in tool"),
        "{unknown}"
    );

    assert!(host.set_builtin_tool_enabled("render_chart", true).unwrap());
    assert!(host.settings().unwrap().mcp_servers.is_empty());
    assert_eq!(enabled_builtin_tools(&host).unwrap().len(), 7);
}

#[test]
fn a_switch_keeps_everything_else_in_the_settings_file() {
    let (dir, host) = host();
    let file = dir.path().join("settings.json");
    std::fs::write(
        &file,
        r#"{"providers": [], "theme": "dark", "mcpServers": {"everything": {"disabledTools": ["echo"], "approval": "allow"}, "conduit": {"futureField": 1}}}"#,
    )
    .unwrap();
    host.set_builtin_tool_enabled("time_now", false).unwrap();
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(saved["theme"], "dark");
    assert_eq!(
        saved["mcpServers"]["everything"]["disabledTools"],
        json!(["echo"])
    );
    assert_eq!(saved["mcpServers"]["everything"]["approval"], "allow");
    assert_eq!(saved["mcpServers"]["conduit"]["futureField"], 1);
    assert_eq!(
        saved["mcpServers"]["conduit"]["disabledTools"],
        json!(["time_now"])
    );
    // Another server's switch of a tool with the same name changes nothing here.
    host.update_settings(|settings| {
        settings.set_tool_enabled("everything", "get_image", false);
        Ok::<_, SettingsError>(())
    })
    .unwrap();
    let states = host.builtin_tool_states().unwrap();
    assert!(
        states
            .iter()
            .find(|t| t.name == "get_image")
            .unwrap()
            .enabled
    );
    assert!(
        !states
            .iter()
            .find(|t| t.name == "time_now")
            .unwrap()
            .enabled
    );
}

#[test]
fn a_broken_settings_file_is_an_error_not_all_tools_enabled() {
    let (dir, host) = host();
    std::fs::write(dir.path().join("settings.json"), "{ not json").unwrap();
    assert!(host.builtin_tool_states().is_err());
    assert!(enabled_builtin_tools(&host).is_err());
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_refused_by_every_tool() {
    let (_dir, host) = host();
    for tool in builtin_tools(&host) {
        for bad in [json!([1, 2]), json!("text"), json!(3)] {
            let output = call(tool.as_ref(), bad.clone()).await;
            assert!(output.is_error, "{} {bad}", tool.spec().name);
            assert!(text(&output).contains("JSON object"), "{}", text(&output));
        }
        let output = call(tool.as_ref(), json!({"unexpected": 1})).await;
        assert!(output.is_error, "{}", tool.spec().name);
        assert!(
            text(&output).contains("unknown field") || text(&output).contains("missing field"),
            "{}",
            text(&output)
        );
    }
}

// --- history ---------------------------------------------------------------------------

/// A conversation titled `title` with `messages` user/assistant texts from `text(i)`.
fn seed(
    host: &Host,
    title: &str,
    messages: usize,
    text: impl Fn(usize) -> String,
) -> (String, Vec<i64>) {
    let store = host.store().unwrap();
    let id = store.create_conversation(Some("p"), Some("m")).unwrap();
    let ids = (0..messages)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            let message = Message {
                role,
                blocks: vec![Block::text(text(i))],
            };
            store
                .add_message(&id, &message, MessageStatus::Complete)
                .unwrap()
        })
        .collect();
    store.rename(&id, title).unwrap();
    (id, ids)
}

#[tokio::test]
async fn search_finds_a_seeded_message_with_a_snippet() {
    let (_dir, host) = host();
    seed(&host, "Cooking", 2, |i| format!("message {i} about pasta"));
    let (crabs, ids) = seed(&host, "Crustaceans", 3, |i| match i {
        1 => "Hermit crabs change shells as they grow.".to_owned(),
        _ => format!("filler {i}"),
    });
    let output = call(
        tool(&host, "search_history").as_ref(),
        json!({"query": "hermit"}),
    )
    .await;
    let value = structured(&output);
    assert_eq!(value["query"], "hermit");
    let hits = value["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{value}");
    assert_eq!(hits[0]["conversationId"], crabs.as_str());
    assert_eq!(hits[0]["title"], "Crustaceans");
    assert_eq!(hits[0]["messageId"], ids[1]);
    let snippet = hits[0]["snippet"].as_str().unwrap();
    assert!(snippet.contains("[Hermit]"), "{snippet}");
    assert!(hits[0]["createdAt"].as_str().unwrap().ends_with('Z'));
    assert!(
        text(&output).contains("[Hermit] crabs"),
        "{}",
        text(&output)
    );

    let output = call(
        tool(&host, "search_history").as_ref(),
        json!({"query": "pasta", "limit": 1}),
    )
    .await;
    assert_eq!(structured(&output)["hits"].as_array().unwrap().len(), 1);

    let none = call(
        tool(&host, "search_history").as_ref(),
        json!({"query": "zeppelin"}),
    )
    .await;
    assert_eq!(structured(&none)["hits"], json!([]));
    assert!(text(&none).contains("No saved message"));

    // Query syntax is the user's words, never FTS5 operators.
    let output = call(
        tool(&host, "search_history").as_ref(),
        json!({"query": "\"hermit AND NEAR(( * -"}),
    )
    .await;
    assert!(!output.is_error, "{}", text(&output));
}

#[tokio::test]
async fn search_refuses_bad_arguments() {
    let (_dir, host) = host();
    refused(&host, "search_history", json!({}), "missing field `query`").await;
    refused(&host, "search_history", json!({"query": "   "}), "empty").await;
    refused(&host, "search_history", json!({"query": 5}), "invalid type").await;
    refused(
        &host,
        "search_history",
        json!({"query": "x".repeat(501)}),
        "longer than 500",
    )
    .await;
    refused(
        &host,
        "search_history",
        json!({"query": "a", "limit": 0}),
        "between 1 and 50",
    )
    .await;
    refused(
        &host,
        "search_history",
        json!({"query": "a", "limit": 51}),
        "between 1 and 50",
    )
    .await;
    refused(
        &host,
        "search_history",
        json!({"query": "a", "limit": -1}),
        "invalid value",
    )
    .await;
}

#[tokio::test]
async fn read_conversation_pages_back_and_forward() {
    let (_dir, host) = host();
    let (id, ids) = seed(&host, "Long talk", 30, |i| format!("line {i}"));
    let read = tool(&host, "read_conversation");

    let newest = structured(&call(read.as_ref(), json!({"conversation_id": id})).await);
    let messages = newest["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 20);
    assert_eq!(messages[0]["id"], ids[10]);
    assert_eq!(messages[19]["text"], "line 29");
    assert_eq!(messages[19]["role"], "assistant");
    assert_eq!(messages[18]["role"], "user");
    assert_eq!(messages[0]["status"], "complete");
    assert_eq!(newest["conversation"]["title"], "Long talk");
    assert_eq!(newest["conversation"]["messageCount"], 30);
    assert_eq!(newest["olderBeforeMessageId"], ids[10]);
    assert!(newest.get("newerAfterMessageId").is_none());

    let older = structured(
        &call(
            read.as_ref(),
            json!({"conversation_id": id, "before_message_id": ids[10]}),
        )
        .await,
    );
    let messages = older["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 10);
    assert_eq!(messages[0]["text"], "line 0");
    assert!(older.get("olderBeforeMessageId").is_none());
    assert_eq!(older["newerAfterMessageId"], ids[9]);

    let range = call(
        read.as_ref(),
        json!({"conversation_id": id, "after_message_id": ids[4], "limit": 3}),
    )
    .await;
    let value = structured(&range);
    let texts: Vec<&str> = value["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["line 5", "line 6", "line 7"]);
    assert_eq!(value["olderBeforeMessageId"], ids[5]);
    assert_eq!(value["newerAfterMessageId"], ids[7]);
    assert!(
        text(&range).contains("messages 6 to 8 of 30"),
        "{}",
        text(&range)
    );

    let end = structured(
        &call(
            read.as_ref(),
            json!({"conversation_id": id, "after_message_id": ids[29]}),
        )
        .await,
    );
    assert_eq!(end["messages"], json!([]));
    assert!(end.get("newerAfterMessageId").is_none());
}

#[tokio::test]
async fn read_conversation_keeps_a_page_bounded() {
    let (_dir, host) = host();
    let (id, ids) = seed(&host, "Big", 10, |i| format!("{i}{}", "x".repeat(30_000)));
    let read = tool(&host, "read_conversation");
    let output = call(
        read.as_ref(),
        json!({"conversation_id": id, "max_chars_per_message": 20000}),
    )
    .await;
    let value = structured(&output);
    let messages = value["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "64 KB of 20 000-character messages");
    assert!(messages.iter().all(|m| m["truncated"] == true));
    assert_eq!(
        messages[2]["text"].as_str().unwrap().chars().count(),
        20_001
    );
    assert_eq!(value["olderBeforeMessageId"], ids[7]);
    assert!(text(&output).len() < 70_000);

    let short = structured(&call(read.as_ref(), json!({"conversation_id": id})).await);
    assert_eq!(
        short["messages"][0]["text"]
            .as_str()
            .unwrap()
            .chars()
            .count(),
        4_001
    );
}

#[tokio::test]
async fn read_conversation_shows_tool_calls_results_and_images() {
    let (_dir, host) = host();
    let media = host.media.put(&png(8, 8, 200), None).unwrap();
    let store = host.store().unwrap();
    let id = store.create_conversation(None, None).unwrap();
    let call_block = ToolCall {
        id: "call_1".into(),
        wire_id: None,
        name: "weather".into(),
        arguments: json!({"city": "Oslo"}),
        signature: None,
        invalid_arguments: None,
        origin: None,
    };
    store
        .add_message(
            &id,
            &Message {
                role: Role::Assistant,
                blocks: vec![
                    Block::Reasoning {
                        text: "secret scratch work".into(),
                        signature: None,
                        encrypted: None,
                        id: None,
                        protocol: None,
                        producer: None,
                    },
                    Block::ToolCall(call_block),
                ],
            },
            MessageStatus::Complete,
        )
        .unwrap();
    store
        .add_message(
            &id,
            &Message {
                role: Role::Tool,
                blocks: vec![Block::ToolResult(ToolResult {
                    call_id: "call_1".into(),
                    wire_id: None,
                    name: "weather".into(),
                    is_error: false,
                    parts: vec![
                        ResultPart::Text {
                            text: "Rain, 4 °C".into(),
                        },
                        ResultPart::Image {
                            media: media.clone(),
                        },
                    ],
                })],
            },
            MessageStatus::Complete,
        )
        .unwrap();
    let value = structured(
        &call(
            tool(&host, "read_conversation").as_ref(),
            json!({"conversation_id": id}),
        )
        .await,
    );
    let messages = value["messages"].as_array().unwrap();
    let called = messages[0]["text"].as_str().unwrap();
    assert!(
        called.contains("[called tool weather with {\"city\":\"Oslo\"}]"),
        "{called}"
    );
    assert!(!called.contains("secret scratch work"), "{called}");
    let result = messages[1]["text"].as_str().unwrap();
    assert!(
        result.contains("[result of tool weather]\nRain, 4 °C"),
        "{result}"
    );
    assert!(
        result.contains(&format!("[image {}]", media.hash)),
        "{result}"
    );
    assert_eq!(messages[1]["images"], json!([media.hash]));
    assert_eq!(messages[1]["role"], "tool");
}

#[tokio::test]
async fn read_conversation_refuses_bad_arguments() {
    let (_dir, host) = host();
    let (id, _) = seed(&host, "One", 3, |i| format!("m{i}"));
    let (_, other_ids) = seed(&host, "Two", 3, |i| format!("n{i}"));
    let name = "read_conversation";
    refused(&host, name, json!({}), "missing field `conversation_id`").await;
    refused(&host, name, json!({"conversation_id": ""}), "empty").await;
    refused(
        &host,
        name,
        json!({"conversation_id": "no-such-id"}),
        "there is no conversation \"no-such-id\"",
    )
    .await;
    refused(
        &host,
        name,
        json!({"conversation_id": id, "before_message_id": other_ids[1]}),
        "is not in conversation",
    )
    .await;
    refused(
        &host,
        name,
        json!({"conversation_id": id, "after_message_id": 999_999}),
        "is not in conversation",
    )
    .await;
    refused(
        &host,
        name,
        json!({"conversation_id": id, "before_message_id": 1, "after_message_id": 2}),
        "not both",
    )
    .await;
    refused(
        &host,
        name,
        json!({"conversation_id": id, "limit": 0}),
        "between 1 and 100",
    )
    .await;
    refused(
        &host,
        name,
        json!({"conversation_id": id, "limit": 101}),
        "between 1 and 100",
    )
    .await;
    refused(
        &host,
        name,
        json!({"conversation_id": id, "max_chars_per_message": 99}),
        "between 100 and 20000",
    )
    .await;
    refused(
        &host,
        name,
        json!({"conversation_id": id, "before_message_id": "3"}),
        "invalid type",
    )
    .await;
}

#[tokio::test]
async fn list_conversations_newest_first_and_bounded() {
    let (_dir, host) = host();
    let empty = call(tool(&host, "list_conversations").as_ref(), json!({})).await;
    assert_eq!(structured(&empty)["conversations"], json!([]));
    assert!(text(&empty).contains("no saved conversations"));

    let (first, _) = seed(&host, "First", 1, |_| "a".into());
    let (second, _) = seed(&host, "Second", 2, |_| "b".into());
    let list = tool(&host, "list_conversations");
    let value = structured(&call(list.as_ref(), Value::Null).await);
    let conversations = value["conversations"].as_array().unwrap();
    assert_eq!(conversations.len(), 2);
    assert_eq!(conversations[0]["id"], second.as_str());
    assert_eq!(conversations[0]["title"], "Second");
    assert_eq!(conversations[0]["messageCount"], 2);
    assert_eq!(conversations[0]["provider"], "p");
    assert_eq!(conversations[1]["id"], first.as_str());
    let one = structured(&call(list.as_ref(), json!({"limit": 1})).await);
    assert_eq!(one["conversations"].as_array().unwrap().len(), 1);
    refused(
        &host,
        "list_conversations",
        json!({"limit": 0}),
        "between 1 and 100",
    )
    .await;
    refused(
        &host,
        "list_conversations",
        json!({"limit": 1000}),
        "between 1 and 100",
    )
    .await;
}

#[tokio::test]
async fn a_newer_history_database_is_an_error_result() {
    let (dir, host) = host();
    let db = newer_database(dir.path());
    assert!(db.exists());
    let output = call(tool(&host, "list_conversations").as_ref(), json!({})).await;
    assert!(output.is_error);
    assert!(
        text(&output).contains("history could not be read"),
        "{}",
        text(&output)
    );
}

/// A history database that says a much newer Conduit wrote it: one made by this
/// version, with the `user_version` in SQLite's file header raised.
fn newer_database(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("history.db");
    drop(
        conduit_store::Store::open(&path, conduit_store::FileMediaStore::new(dir.join("media")))
            .unwrap(),
    );
    let mut bytes = std::fs::read(&path).unwrap();
    // The user_version is the big-endian integer at offset 60 of the header.
    bytes[60..64].copy_from_slice(&9999u32.to_be_bytes());
    std::fs::write(&path, bytes).unwrap();
    path
}

// --- time ------------------------------------------------------------------------------

fn fixed_summer() -> jiff::Timestamp {
    "2026-07-01T12:00:00.123456Z".parse().unwrap()
}

fn fixed_winter() -> jiff::Timestamp {
    "2026-01-15T23:30:00Z".parse().unwrap()
}

#[tokio::test]
async fn time_now_in_a_zone_with_and_without_daylight_saving() {
    let now = time::TimeNow::with_clock(fixed_summer);
    let value = structured(&call(&now, json!({"time_zone": "Europe/Berlin"})).await);
    assert_eq!(value["timeZone"], "Europe/Berlin");
    assert_eq!(value["local"], "2026-07-01T14:00:00");
    assert_eq!(value["utc"], "2026-07-01T12:00:00Z");
    assert_eq!(value["offset"], "+02:00");
    assert_eq!(value["abbreviation"], "CEST");
    assert_eq!(value["dst"], true);
    assert_eq!(value["weekday"], "Wednesday");
    assert_eq!(
        value["datetime"],
        "2026-07-01T14:00:00+02:00[Europe/Berlin]"
    );

    let winter = time::TimeNow::with_clock(fixed_winter);
    let value = structured(&call(&winter, json!({"time_zone": "Asia/Tokyo"})).await);
    assert_eq!(value["local"], "2026-01-16T08:30:00");
    assert_eq!(value["dst"], false);
    assert_eq!(value["weekday"], "Friday");
    let value = structured(&call(&winter, json!({"time_zone": "Australia/Sydney"})).await);
    assert_eq!(value["dst"], true, "January is summer in Sydney");
    assert_eq!(value["offset"], "+11:00");

    // Without a zone: the computer's own, whatever it is.
    let local = call(&winter, json!({})).await;
    assert!(structured(&local)["utc"] == "2026-01-15T23:30:00Z");
}

#[tokio::test]
async fn time_zones_are_names_never_paths() {
    let (_dir, host) = host();
    for (zone, says) in [
        ("Mars/Olympus_Mons", "not a time zone Conduit knows"),
        ("../../etc/passwd", "is not a time zone name"),
        ("/etc/localtime", "is not a time zone name"),
        ("Europe/Berlin; rm -rf", "is not a time zone name"),
        ("", "empty"),
    ] {
        refused(&host, "time_now", json!({"time_zone": zone}), says).await;
        refused(
            &host,
            "convert_time",
            json!({"time": "2026-01-01T10:00", "from_time_zone": "UTC", "to_time_zone": zone}),
            says,
        )
        .await;
    }
    refused(&host, "time_now", json!({"time_zone": 3}), "invalid type").await;
}

async fn convert(arguments: Value) -> Value {
    let tool = time::ConvertTime::with_clock(fixed_summer);
    structured(&call(&tool, arguments).await)
}

#[tokio::test]
async fn convert_time_across_daylight_saving_changes() {
    // Berlin before and after the spring change on 2026-03-29.
    let before = convert(json!({"time": "2026-03-29T01:30", "from_time_zone": "Europe/Berlin", "to_time_zone": "UTC"})).await;
    assert_eq!(before["to"]["local"], "2026-03-29T00:30:00");
    assert_eq!(before["from"]["abbreviation"], "CET");
    assert!(before.get("note").is_none());
    let after = convert(json!({"time": "2026-03-29 03:30", "from_time_zone": "Europe/Berlin", "to_time_zone": "UTC"})).await;
    assert_eq!(after["to"]["local"], "2026-03-29T01:30:00");
    assert_eq!(after["from"]["abbreviation"], "CEST");
    assert_eq!(after["from"]["dst"], true);

    // The weeks when New York has changed and London has not: 4 hours apart, not 5.
    let gap_weeks = convert(json!({"time": "2026-03-20T09:00", "from_time_zone": "America/New_York", "to_time_zone": "Europe/London"})).await;
    assert_eq!(gap_weeks["to"]["local"], "2026-03-20T13:00:00");
    assert_eq!(gap_weeks["from"]["abbreviation"], "EDT");
    assert_eq!(gap_weeks["to"]["abbreviation"], "GMT");
    let summer = convert(json!({"time": "2026-07-20T09:00", "from_time_zone": "America/New_York", "to_time_zone": "Europe/London"})).await;
    assert_eq!(summer["to"]["local"], "2026-07-20T14:00:00");

    // Across the date line.
    let tokyo = convert(json!({"time": "2026-12-31T20:00", "from_time_zone": "America/Los_Angeles", "to_time_zone": "Asia/Tokyo"})).await;
    assert_eq!(tokyo["to"]["local"], "2027-01-01T13:00:00");
    assert_eq!(tokyo["to"]["weekday"], "Friday");
}

#[tokio::test]
async fn convert_time_explains_skipped_and_repeated_hours() {
    let skipped = convert(json!({"time": "2026-03-29T02:30", "from_time_zone": "Europe/Berlin", "to_time_zone": "UTC"})).await;
    assert_eq!(skipped["from"]["local"], "2026-03-29T03:30:00");
    assert_eq!(skipped["to"]["local"], "2026-03-29T01:30:00");
    let note = skipped["note"].as_str().unwrap();
    assert!(
        note.contains("does not exist in Europe/Berlin")
            && note.contains("from UTC+01:00 to UTC+02:00")
            && note.ends_with("read as 2026-03-29T03:30:00"),
        "{note}"
    );

    let repeated = convert(json!({"time": "2026-10-25T02:30", "from_time_zone": "Europe/Berlin", "to_time_zone": "UTC"})).await;
    assert_eq!(
        repeated["to"]["local"], "2026-10-25T00:30:00",
        "the first 02:30 (CEST)"
    );
    let note = repeated["note"].as_str().unwrap();
    assert!(note.contains("happens twice"), "{note}");
    assert_eq!(repeated["from"]["abbreviation"], "CEST");
}

#[tokio::test]
async fn convert_time_reads_instants_zones_and_times_of_day() {
    let offset =
        convert(json!({"time": "2026-03-29T14:30:00+02:00", "to_time_zone": "Asia/Tokyo"})).await;
    assert_eq!(offset["to"]["local"], "2026-03-29T21:30:00");
    assert_eq!(offset["from"]["timeZone"], "UTC+02:00");
    assert_eq!(offset["from"]["local"], "2026-03-29T14:30:00");

    let zulu =
        convert(json!({"time": "2026-03-29T14:30:00Z", "to_time_zone": "America/New_York"})).await;
    assert_eq!(zulu["to"]["local"], "2026-03-29T10:30:00");
    assert_eq!(zulu["from"]["timeZone"], "UTC");

    let zoned =
        convert(json!({"time": "2026-03-29T14:30:00+02:00[Europe/Paris]", "to_time_zone": "UTC"}))
            .await;
    assert_eq!(zoned["from"]["timeZone"], "Europe/Paris");
    assert_eq!(zoned["to"]["local"], "2026-03-29T12:30:00");

    // A time of day is today in the zone it is read in (the clock says 2026-07-01).
    let today =
        convert(json!({"time": "09:15", "from_time_zone": "Asia/Kolkata", "to_time_zone": "UTC"}))
            .await;
    assert_eq!(today["from"]["local"], "2026-07-01T09:15:00");
    assert_eq!(today["to"]["local"], "2026-07-01T03:45:00");
    assert_eq!(today["from"]["offset"], "+05:30");
}

#[tokio::test]
async fn convert_time_refuses_bad_arguments() {
    let (_dir, host) = host();
    let name = "convert_time";
    refused(
        &host,
        name,
        json!({"time": "10:00"}),
        "missing field `to_time_zone`",
    )
    .await;
    refused(
        &host,
        name,
        json!({"to_time_zone": "UTC"}),
        "missing field `time`",
    )
    .await;
    refused(
        &host,
        name,
        json!({"time": " ", "to_time_zone": "UTC"}),
        "empty",
    )
    .await;
    for unreadable in [
        "yesterday",
        "2026-13-01T10:00",
        "2026-02-30 10:00",
        "25:00",
        "10:00 PM",
    ] {
        refused(
            &host,
            name,
            json!({"time": unreadable, "from_time_zone": "UTC", "to_time_zone": "UTC"}),
            "is not a time Conduit can read",
        )
        .await;
    }
    refused(
        &host,
        name,
        json!({"time": "2026-03-29T14:30:00+02:00", "from_time_zone": "Europe/Berlin", "to_time_zone": "UTC"}),
        "leave from_time_zone out",
    )
    .await;
    refused(
        &host,
        name,
        json!({"time": "2026-03-29T14:30:00[Nowhere/Land]", "to_time_zone": "UTC"}),
        "is not a time Conduit can read",
    )
    .await;
    refused(
        &host,
        name,
        json!({"time": "x".repeat(101), "to_time_zone": "UTC"}),
        "longer than 100",
    )
    .await;
}

// --- charts ----------------------------------------------------------------------------

/// Keeps a rendered chart where people look at test output: `CONDUIT_TEST_ARTIFACTS`,
/// or `test-artifacts/` in the workspace.
fn keep_for_people(name: &str, png: &[u8]) {
    let root = std::env::var_os("CONDUIT_TEST_ARTIFACTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            // Where cargo runs the test: a binary shared with a checkout elsewhere keeps
            // the path it was built at.
            std::env::var_os("CARGO_MANIFEST_DIR")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
                .join("../../test-artifacts")
        });
    let dir = root.join("builtin_tools");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

/// Renders a chart and returns the decoded image and the result.
async fn chart(host: &Arc<Host>, arguments: Value) -> (image::RgbImage, ToolOutput) {
    let kept = arguments["title"].as_str().map(|title| {
        title
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect::<String>()
    });
    let output = call(tool(host, "render_chart").as_ref(), arguments).await;
    assert!(!output.is_error, "{}", text(&output));
    let media = output
        .parts
        .iter()
        .find_map(|part| match part {
            ResultPart::Image { media } => Some(media.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(media.mime, "image/png");
    let bytes = host.media.load(&media).unwrap();
    assert_eq!(bytes.len() as u64, media.bytes);
    if let Some(name) = kept {
        keep_for_people(&name, &bytes);
    }
    let decoded = image::load_from_memory_with_format(&bytes, image::ImageFormat::Png)
        .unwrap()
        .to_rgb8();
    assert_eq!(
        (media.width, media.height),
        (Some(decoded.width()), Some(decoded.height()))
    );
    (decoded, output)
}

fn pixels_of(image: &image::RgbImage, color: [u8; 3]) -> usize {
    image.pixels().filter(|p| p.0 == color).count()
}

/// Pixels that are neither white nor light grey (text, axes, data).
fn dark_pixels(image: &image::RgbImage, rows: std::ops::Range<u32>) -> usize {
    rows.flat_map(|y| (0..image.width()).map(move |x| (x, y)))
        .filter(|&(x, y)| image.get_pixel(x, y).0.iter().all(|&c| c < 120))
        .count()
}

#[tokio::test]
async fn a_line_chart_is_a_png_that_decodes_and_shows_its_series_and_text() {
    let (_dir, host) = host();
    let (image, output) = chart(
        &host,
        json!({
            "kind": "line",
            "title": "Temperature",
            "x_label": "Hour",
            "y_label": "°C",
            "x": [0, 1, 2, 3, 4, 5],
            "series": [
                {"name": "Oslo", "y": [1, 2, 4, 3, 2, 1]},
                {"name": "Rome", "y": [11, 13, 16, 18, 15, 12]}
            ]
        }),
    )
    .await;
    assert_eq!(image.dimensions(), (DEFAULT_WIDTH, DEFAULT_HEIGHT));
    assert!(
        pixels_of(&image, [31, 119, 180]) > 500,
        "the first series is drawn"
    );
    assert!(
        pixels_of(&image, [255, 127, 14]) > 500,
        "the second series is drawn"
    );
    // The title's text is drawn with the embedded font: dark pixels in the top band.
    assert!(dark_pixels(&image, 0..60) > 200);
    let said = text(&output);
    assert!(
        said.contains("line chart \"Temperature\" of 2 series (Oslo, Rome) with 12 points"),
        "{said}"
    );

    // Without a title the top band stays empty: the text above was the title.
    let (untitled, _) = chart(
        &host,
        json!({"kind": "line", "series": [{"y": [1, 2, 4, 3, 2, 1]}]}),
    )
    .await;
    assert_eq!(dark_pixels(&untitled, 0..20), 0);
}

#[tokio::test]
async fn bar_and_scatter_charts_render_at_the_asked_size() {
    let (_dir, host) = host();
    let (bars, _) = chart(
        &host,
        json!({
            "kind": "bar",
            "title": "Sales",
            "labels": ["Q1", "Q2", "Q3", "Q4"],
            "series": [
                {"name": "2025", "y": [10, 20, -5, 40]},
                {"name": "2026", "y": [12, 25, 30, 45]}
            ],
            "width": 800,
            "height": 500
        }),
    )
    .await;
    assert_eq!(bars.dimensions(), (800, 500));
    assert!(pixels_of(&bars, [31, 119, 180]) > 2000);
    assert!(pixels_of(&bars, [255, 127, 14]) > 2000);

    let (scatter, _) = chart(
        &host,
        json!({
            "kind": "scatter",
            "title": "Scatter",
            "series": [
                {"name": "a", "x": [0.5, 1.5, 2.5], "y": [3, 1, 2]},
                {"name": "b", "x": [1, 2], "y": [-1, 1e6]}
            ],
            "width": 400,
            "height": 300
        }),
    )
    .await;
    assert_eq!(scatter.dimensions(), (400, 300));
    assert!(pixels_of(&scatter, [255, 127, 14]) > 10);

    // One point, one value repeated: a range is made around it.
    chart(&host, json!({"kind": "line", "series": [{"y": [7]}]})).await;
    chart(&host, json!({"kind": "bar", "series": [{"y": [0, 0, 0]}]})).await;
    chart(
        &host,
        json!({"kind": "line", "labels": ["Mon", "Tue"], "series": [{"y": [1, 2]}]}),
    )
    .await;
}

#[tokio::test]
async fn charts_at_the_edges_of_the_limits_still_draw() {
    let (_dir, host) = host();
    let labels: Vec<String> = (0..chart::MAX_CATEGORIES)
        .map(|i| format!("category {i}"))
        .collect();
    let series: Vec<Value> = (0..chart::MAX_SERIES)
        .map(|s| json!({"name": format!("s{s}"), "y": (0..chart::MAX_CATEGORIES).map(|i| (i * s) as f64 - 50.0).collect::<Vec<_>>()}))
        .collect();
    chart(
        &host,
        json!({"kind": "bar", "labels": labels, "series": series, "width": 200, "height": 200}),
    )
    .await;
    let long: Vec<f64> = (0..chart::MAX_POINTS_PER_SERIES)
        .map(|i| (i as f64 / 100.0).sin())
        .collect();
    chart(
        &host,
        json!({"kind": "line", "series": [{"y": long}], "width": 2400, "height": 1600}),
    )
    .await;
    for y in [
        json!([1e-300, 2e-300]),
        json!([1e15, 1e15 + 1.0]),
        json!([-1e300, 1e300]),
        json!([0.1, 0.1000000001]),
    ] {
        chart(&host, json!({"kind": "scatter", "series": [{"y": y}]})).await;
    }
    chart(
        &host,
        json!({"kind": "line", "title": "雨 ☔ ünïcödé", "labels": ["ß", "😀"], "series": [{"name": "名前", "y": [1, 2]}, {"y": [2, 1]}]}),
    )
    .await;
}

#[tokio::test]
async fn the_same_chart_is_stored_once() {
    let (dir, host) = host();
    let arguments = json!({"kind": "bar", "series": [{"y": [1, 2, 3]}]});
    let (_, first) = chart(&host, arguments.clone()).await;
    let (_, second) = chart(&host, arguments).await;
    assert_eq!(first.parts, second.parts);
    let files = walk(&dir.path().join("media"))
        .into_iter()
        .filter(|p| {
            p.extension().is_some_and(|e| e == "png") && !p.to_string_lossy().contains(".thumb.")
        })
        .count();
    assert_eq!(files, 1);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[tokio::test]
async fn bad_chart_data_gets_a_clear_error() {
    let (_dir, host) = host();
    let name = "render_chart";
    let line = |series: Value| json!({"kind": "line", "series": series});
    refused(
        &host,
        name,
        json!({"series": [{"y": [1]}]}),
        "missing field `kind`",
    )
    .await;
    refused(
        &host,
        name,
        json!({"kind": "pie", "series": [{"y": [1]}]}),
        "unknown variant `pie`",
    )
    .await;
    refused(&host, name, line(json!([])), "`series` is empty").await;
    refused(
        &host,
        name,
        line(json!([{"y": []}])),
        "series 1 (\"series 1\") has no y values",
    )
    .await;
    refused(
        &host,
        name,
        line(json!([{"y": [1, "two", 3]}])),
        "y[1] is \"two\", not a number",
    )
    .await;
    refused(
        &host,
        name,
        line(json!([{"y": [1, null]}])),
        "y[1] is null, not a number",
    )
    .await;
    refused(&host, name, line(json!([{"y": ["NaN"]}])), "not a number").await;
    refused(
        &host,
        name,
        line(json!([{"name": "a", "y": [1, 2, 3], "x": [1, 2]}])),
        "has 3 y values but 2 x values",
    )
    .await;
    refused(
        &host,
        name,
        json!({"kind": "line", "x": [1, 2], "series": [{"y": [1, 2, 3]}]}),
        "3 y values but 2 x values",
    )
    .await;
    refused(
        &host,
        name,
        line(json!([{"y": vec![1; chart::MAX_POINTS_PER_SERIES + 1]}])),
        "more than 10000",
    )
    .await;
    let many: Vec<Value> = (0..6).map(|_| json!({"y": vec![1; 9_000]})).collect();
    refused(&host, name, line(Value::Array(many)), "more than 50000").await;
    let eleven: Vec<Value> = (0..11).map(|_| json!({"y": [1]})).collect();
    refused(&host, name, line(Value::Array(eleven)), "more than 10").await;
    refused(
        &host,
        name,
        json!({"kind": "bar", "series": [{"y": [1]}], "width": 10000}),
        "`width` is 10000",
    )
    .await;
    refused(
        &host,
        name,
        json!({"kind": "bar", "series": [{"y": [1]}], "height": 10}),
        "`height` is 10",
    )
    .await;
    refused(
        &host,
        name,
        json!({"kind": "bar", "series": [{"y": [1]}], "width": -5}),
        "invalid value",
    )
    .await;
    refused(
        &host,
        name,
        json!({"kind": "bar", "labels": ["a", "b"], "series": [{"y": [1]}]}),
        "1 y values but there are 2 labels",
    )
    .await;
    refused(
        &host,
        name,
        json!({"kind": "bar", "series": [{"y": [1, 2]}, {"y": [1]}]}),
        "series 2",
    )
    .await;
    refused(
        &host,
        name,
        json!({"kind": "bar", "x": [1], "series": [{"y": [1]}]}),
        "not `x`",
    )
    .await;
    refused(
        &host,
        name,
        json!({"kind": "scatter", "labels": ["a"], "series": [{"y": [1]}]}),
        "not `labels`",
    )
    .await;
    refused(
        &host,
        name,
        json!({"kind": "line", "labels": ["a"], "x": [1], "series": [{"y": [1]}]}),
        "not both",
    )
    .await;
    refused(
        &host,
        name,
        json!({"kind": "line", "labels": [], "series": [{"y": [1]}]}),
        "`labels` is empty",
    )
    .await;
    refused(
        &host,
        name,
        json!({"kind": "line", "title": "t".repeat(201), "series": [{"y": [1]}]}),
        "`title` is longer",
    )
    .await;
    refused(
        &host,
        name,
        line(json!([{"y": [1], "colour": "red"}])),
        "unknown field `colour`",
    )
    .await;
    refused(
        &host,
        name,
        line(json!([{"y": [-1.7e308, 1.7e308]}])),
        "too far apart",
    )
    .await;
}

// --- images ----------------------------------------------------------------------------

#[tokio::test]
async fn get_image_returns_a_stored_image_by_hash() {
    let (_dir, host) = host();
    let stored = host.media.put(&png(30, 20, 99), None).unwrap();
    let output = call(
        tool(&host, "get_image").as_ref(),
        json!({"hash": stored.hash}),
    )
    .await;
    assert!(!output.is_error, "{}", text(&output));
    assert_eq!(
        output.parts[1],
        ResultPart::Image {
            media: stored.clone()
        }
    );
    assert!(
        text(&output).contains("image/png, 30×20"),
        "{}",
        text(&output)
    );
}

/// An outside client (`conduit mcp serve`) gets a chart `render_chart` made for it back
/// by its hash, as `get_image` promises: the chart is held in the served media, not the
/// media folder.
#[tokio::test]
async fn an_outside_client_gets_back_the_chart_render_chart_made_for_it() {
    let (_dir, host) = host();
    let served = enabled_builtin_tools(&host).unwrap();
    let served_tool = |name: &str| {
        served
            .iter()
            .find(|tool| tool.spec().name == name)
            .unwrap()
            .clone()
    };
    let chart = call(
        served_tool("render_chart").as_ref(),
        json!({"kind": "bar", "labels": ["a", "b"], "series": [{"y": [1, 2]}]}),
    )
    .await;
    let Some(ResultPart::Image { media }) = chart
        .parts
        .iter()
        .find(|part| matches!(part, ResultPart::Image { .. }))
    else {
        panic!("no chart: {chart:?}")
    };
    assert!(host.media.reference(&media.hash).is_none(), "not on disk");
    let output = call(
        served_tool("get_image").as_ref(),
        json!({"hash": media.hash}),
    )
    .await;
    assert!(!output.is_error, "{}", text(&output));
    assert_eq!(
        output.parts[1],
        ResultPart::Image {
            media: media.clone()
        }
    );
    // An image in the media folder is found too.
    let stored = host.media.put(&png(30, 20, 99), None).unwrap();
    let output = call(
        served_tool("get_image").as_ref(),
        json!({"hash": stored.hash}),
    )
    .await;
    assert!(!output.is_error, "{}", text(&output));
}

#[tokio::test]
async fn get_image_refuses_anything_but_a_stored_image_hash() {
    let (_dir, host) = host();
    let stored = host.media.put(&png(4, 4, 1), None).unwrap();
    let text_file = host
        .media
        .put(b"just some words", Some("text/plain"))
        .unwrap();
    let name = "get_image";
    for bad in [
        stored.hash.to_uppercase(),
        stored.hash[..63].to_owned(),
        format!("{}0", stored.hash),
        "../../etc/passwd".to_owned(),
        format!("{}/../x", &stored.hash[..58]),
        String::new(),
    ] {
        refused(&host, name, json!({"hash": bad}), "is not an image hash").await;
    }
    refused(
        &host,
        name,
        json!({"hash": "f".repeat(64)}),
        "no stored file has the hash",
    )
    .await;
    refused(
        &host,
        name,
        json!({"hash": text_file.hash}),
        "is not an image (it is text/plain)",
    )
    .await;
    refused(&host, name, json!({}), "missing field `hash`").await;
    refused(&host, name, json!({"hash": 12}), "invalid type").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chart_waits_while_two_are_drawing() {
    let (_dir, host) = host();
    // Two drawings under way (held here): a third call waits for one to end.
    let both = chart::DRAWING.acquire_many(2).await.unwrap();
    let tool = tool(&host, "render_chart");
    let waiting = tokio::spawn(async move {
        call(
            tool.as_ref(),
            json!({"kind": "bar", "labels": ["a"], "series": [{"y": [1.0]}], "width": 320, "height": 240}),
        )
        .await
    });
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(
        !waiting.is_finished(),
        "a third chart drew while two were drawing"
    );
    drop(both);
    let output = waiting.await.unwrap();
    assert!(!output.is_error, "{}", text(&output));
}
