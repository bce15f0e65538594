//! Each conversation its own toolset, through the app's own turn path: a new chat limited
//! to one server offers the model only that server's tools, a tool switched off is not
//! offered, the choice is kept with the conversation (and its next turn follows it), and
//! the composer's count and token estimate follow the choice.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use conduit_e2e::llm_server::{Dialect, ScriptedLlm};
use conduit_host::app::{App, SendRequest};
use conduit_host::toolset::{ToolKey, Toolset};
use conduit_host::{Host, Paths};
use serde_json::json;

fn offered(llm: &ScriptedLlm, request: usize) -> Vec<String> {
    llm.requests()[request].body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

async fn run_turn(
    app: &Arc<App>,
    conversation: Option<String>,
    toolset: Option<Toolset>,
) -> String {
    conduit_e2e::app_turn(
        app,
        SendRequest {
            conversation,
            text: "Hello".into(),
            attachments: Vec::new(),
            files: Vec::new(),
            documents: Vec::new(),
            provider: "local".into(),
            model: None,
            toolset,
            resources: Vec::new(),
            prompt: None,
            view_context: Vec::new(),
            again: false,
            replace_answer: false,
            replace_message: false,
            instructions: None,
            reasoning: None,
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_offers_only_the_tools_it_chose() {
    let chat = Dialect::OpenAiChat;
    let llm = ScriptedLlm::start(vec![
        chat.text(&["one"]),
        chat.text(&["two"]),
        chat.text(&["three"]),
        chat.text(&["four"]),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("settings.json"),
        json!({"providers": [{"id": "local", "protocol": "openai-chat",
            "baseUrl": chat.base_url(&llm.url()), "defaultModel": "m"}]})
        .to_string(),
    )
    .unwrap();
    let root = conduit_e2e::workspace_root().join("tests/mcp-servers");
    let python = root.join(".venv/bin/python");
    assert!(
        python.is_file(),
        "run `make test`: the Python test servers are missing"
    );
    std::fs::write(
        home.path().join("mcp_servers.json"),
        json!({"mcpServers": {"dyn": {"command": python, "args": [root.join("fixtures/dynamic_tools.py")]}}})
            .to_string(),
    )
    .unwrap();
    let app = App::new(Arc::new(Host::new(Paths::under_home(
        home.path().to_owned(),
        None,
    ))));

    // Everything: both servers' tools.
    let all = app.tool_choices(None, None).await.unwrap();
    let names: Vec<&str> = all.servers.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names.contains(&"dyn") && names.contains(&"conduit"),
        "{names:?}"
    );
    assert!(all.offered > 2 && all.tokens > 0, "{all:?}");

    // A new chat limited to the file's server, one of its tools off.
    let dyn_tools: Vec<String> = all
        .servers
        .iter()
        .find(|s| s.name == "dyn")
        .unwrap()
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(dyn_tools.len() >= 2, "{dyn_tools:?}");
    let toolset = Toolset {
        off_servers: vec!["conduit".into()],
        off_tools: vec![ToolKey {
            server: "dyn".into(),
            tool: dyn_tools[0].clone(),
        }],
    };
    let choices = app.tool_choices(None, Some(toolset.clone())).await.unwrap();
    assert_eq!(choices.offered as usize, dyn_tools.len() - 1, "{choices:?}");
    assert!(choices.tokens < all.tokens);
    let conversation = run_turn(&app, None, Some(toolset.clone())).await;
    let first = offered(&llm, 0);
    let expected: Vec<String> = dyn_tools[1..].iter().map(|t| format!("dyn__{t}")).collect();
    assert_eq!(
        first, expected,
        "only the chosen server's tools, without the one switched off"
    );

    // Kept with the conversation: its next turn offers the same, whatever the window sends.
    let choices = app
        .tool_choices(Some(conversation.clone()), None)
        .await
        .unwrap();
    assert_eq!(choices.toolset, toolset);
    run_turn(&app, Some(conversation.clone()), None).await;
    assert_eq!(offered(&llm, 1), expected);

    // Switched back to everything: the conduit tools come back.
    app.set_conversation_toolset(&conversation, &Toolset::default())
        .unwrap();
    run_turn(&app, Some(conversation.clone()), None).await;
    let third = offered(&llm, 2);
    assert!(
        third.iter().any(|t| t.starts_with("conduit__")),
        "{third:?}"
    );
    assert!(
        third.contains(&format!("dyn__{}", dyn_tools[0])),
        "{third:?}"
    );

    // A kept choice that cannot be read (a damaged database, an older version's format)
    // offers no tool, and the panel says why, rather than offering every tool.
    app.set_conversation_toolset(&conversation, &toolset)
        .unwrap();
    app.host()
        .store()
        .unwrap()
        .set_toolset(&conversation, Some("{\"offServers\": \"dyn\"}"))
        .unwrap();
    let damaged = app
        .tool_choices(Some(conversation.clone()), None)
        .await
        .unwrap();
    assert_eq!(damaged.offered, 0, "{damaged:?}");
    assert!(damaged.servers.iter().all(|s| !s.on), "{damaged:?}");
    let warning = damaged.warning.clone().unwrap();
    assert!(
        warning.contains("could not be read") && warning.contains("offers no tool"),
        "{warning}"
    );
    run_turn(&app, Some(conversation.clone()), None).await;
    assert!(offered(&llm, 3).is_empty(), "{:?}", offered(&llm, 3));
    // Switching a server on in the panel (what it sends) makes a readable choice again.
    let mut chosen = damaged.toolset.clone();
    chosen.off_servers.retain(|s| s != "dyn");
    app.set_conversation_toolset(&conversation, &chosen)
        .unwrap();
    let restored = app.tool_choices(Some(conversation), None).await.unwrap();
    assert!(restored.warning.is_none(), "{restored:?}");
    assert_eq!(restored.offered as usize, dyn_tools.len(), "{restored:?}");
    app.shutdown().await;
}
