//! Builds the bare window's Tauri context from its own `tauri.conf.json`, linked as
//! Conduit's binaries are (packed relative relocations, build-support/relr.rs).

#[path = "../../build-support/relr.rs"]
mod relr;

fn main() {
    println!("cargo::rerun-if-changed=../../build-support/relr.rs");
    relr::pack_relative_relocations();
    tauri_build::build();
}
