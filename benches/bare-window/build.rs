//! Builds the bare windows' Tauri contexts from their own configs (`tauri.conf.json`,
//! `page/tauri.conf.json`), linked as Conduit's binaries are (packed relative relocations, build-support/relr.rs).

#[path = "../../build-support/relr.rs"]
mod relr;

fn main() {
    println!("cargo::rerun-if-changed=../../build-support/relr.rs");
    // `bare-window-page` embeds Conduit's built page through its own config, which
    // tauri-build does not watch.
    println!("cargo::rerun-if-changed=page/tauri.conf.json");
    println!("cargo::rerun-if-changed=../../ui/dist");
    relr::pack_relative_relocations();
    tauri_build::build();
}
