//! Packs the binaries' relative relocations (DT_RELR), for the build scripts of the binaries.

/// Asks the linker to pack the relative relocations of this package's binaries
/// (`-z pack-relative-relocs`): a Rust binary has one 24-byte relocation per pointer in its
/// read-only data (vtables, string tables), 0.4 MB of the CLI, which the packed form
/// stores in a few kilobytes, and the loader then writes fewer pages at start. The C
/// library must read the packed form: glibc 2.36 and newer (Debian 12, Ubuntu 24.04) does;
/// on an older one (a source build on Ubuntu 22.04) the binaries are linked as before.
pub fn pack_relative_relocations() {
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    if target("CARGO_CFG_TARGET_OS") != "linux" || target("CARGO_CFG_TARGET_ENV") != "gnu" {
        return;
    }
    if glibc_reads_packed_relocations() {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    } else {
        println!(
            "cargo::warning=glibc older than 2.36: binaries linked without packed relocations (larger)"
        );
    }
}

/// Whether this machine's glibc (`getconf GNU_LIBC_VERSION`: "glibc 2.36") is 2.36 or newer.
fn glibc_reads_packed_relocations() -> bool {
    let Ok(output) = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
    else {
        return false;
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let mut numbers = text
        .trim()
        .trim_start_matches("glibc ")
        .split('.')
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let major = numbers.next().unwrap_or(0);
    let minor = numbers.next().unwrap_or(0);
    (major, minor) >= (2, 36)
}
