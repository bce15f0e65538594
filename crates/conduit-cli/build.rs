//! Links the `conduit` binary with packed relative relocations (see build-support/relr.rs).

#[path = "../../build-support/relr.rs"]
mod relr;

fn main() {
    println!("cargo::rerun-if-changed=../../build-support/relr.rs");
    relr::pack_relative_relocations();
}
