//! Builds the Tauri context from the top-level `tauri.conf.json`, with permissions for
//! exactly the app's own commands.

fn main() {
    let manifest = tauri_build::AppManifest::new().commands(&[
        "app_info",
        "list_conversations",
        "search_history",
        "load_messages",
        "rename_conversation",
        "delete_conversation",
        "list_providers",
        "provider_models",
        "detect_local_providers",
        "add_local_provider",
        "send_message",
        "stop_turn",
        "answer_approval",
        "store_attachment",
        "mcp_servers",
        "open_external",
        "open_settings",
        "save_provider",
        "remove_provider",
        "mcp_file",
        "edit_mcp_file",
        "reveal_mcp_file",
        "check_mcp_text",
        "mcp_import_files",
        "pick_mcp_import_file",
        "mcp_import_candidates",
        "import_mcp_servers",
        "mcp_server_tools",
        "restart_mcp_server",
        "set_tool_enabled",
        "set_tool_policy",
        "set_server_policy",
        "open_folder",
        "open_media",
        "copy_image",
        "save_image",
        "clipboard_image",
    ]);
    let attributes = tauri_build::Attributes::new()
        .config_path("../tauri.conf.json")
        .app_manifest(manifest)
        .codegen(tauri_build::CodegenContext::new());
    #[allow(clippy::expect_used)] // A build script reports failure by panicking.
    tauri_build::try_build(attributes).expect("tauri-build failed");
}
