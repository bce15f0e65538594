//! Builds the Tauri context from the top-level `tauri.conf.json`, with permissions for
//! exactly the app's own commands, and the invoke handler, both from `commands.list`;
//! links the app with packed relative relocations (build-support/relr.rs).

#[path = "src/command_list.rs"]
mod command_list;
#[path = "../build-support/relr.rs"]
mod relr;

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=commands.list");
    println!("cargo:rerun-if-changed=src/command_list.rs");
    println!("cargo:rerun-if-changed=../build-support/relr.rs");
    relr::pack_relative_relocations();
    let commands = match std::fs::read_to_string("commands.list")
        .map_err(|err| format!("commands.list: {err}"))
        .and_then(|text| command_list::parse(&text))
    {
        Ok(commands) => commands,
        Err(err) => {
            println!("cargo:warning={err}");
            std::process::exit(1);
        }
    };
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        println!("cargo:warning=OUT_DIR is not set");
        std::process::exit(1);
    };
    for (file, expression) in [
        (
            "invoke_handler.rs",
            command_list::handler_expression(&commands),
        ),
        (
            "command_shapes.rs",
            command_list::shapes_expression(&commands),
        ),
    ] {
        let file = out_dir.join(file);
        if let Err(err) = std::fs::write(&file, expression) {
            println!("cargo:warning={}: {err}", file.display());
            std::process::exit(1);
        }
    }

    // tauri-build keeps the names for the whole build: a build script may leak them.
    let names: Vec<&'static str> = commands
        .into_iter()
        .map(|c| &*Box::leak(c.name.into_boxed_str()))
        .collect();
    let manifest = tauri_build::AppManifest::new().commands(Box::leak(names.into_boxed_slice()));
    let attributes = tauri_build::Attributes::new()
        .config_path("../tauri.conf.json")
        .app_manifest(manifest)
        .codegen(tauri_build::CodegenContext::new());
    #[allow(clippy::expect_used)] // A build script reports failure by panicking.
    tauri_build::try_build(attributes).expect("tauri-build failed");
}
