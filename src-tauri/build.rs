//! Builds the Tauri context from the top-level `tauri.conf.json`, with permissions for
//! exactly the app's own commands.

fn main() {
    let manifest = tauri_build::AppManifest::new().commands(&["app_info"]);
    let attributes = tauri_build::Attributes::new()
        .config_path("../tauri.conf.json")
        .app_manifest(manifest)
        .codegen(tauri_build::CodegenContext::new());
    #[allow(clippy::expect_used)] // A build script reports failure by panicking.
    tauri_build::try_build(attributes).expect("tauri-build failed");
}
