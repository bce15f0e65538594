//! Builds the bare window's Tauri context from its own `tauri.conf.json`, linked as
//! Conduit's binaries are (packed relative relocations, build-support/relr.rs).

#[path = "../../build-support/relr.rs"]
mod relr;

fn main() {
    relr::pack_relative_relocations();
    tauri_build::build();
}
