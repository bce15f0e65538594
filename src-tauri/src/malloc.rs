//! glibc's malloc settings for the app and the WebKit processes it starts, so memory stays flat.
//!
//! glibc raises its mmap threshold each time a large block is freed, after which large
//! blocks (decoded images, painted tiles) come from the heap and the heap keeps what they
//! left in holes; and it gives each thread of a busy process an arena of its own, up to
//! eight per core, each keeping its own free memory. In WebKit's web process the two made
//! resident memory creep up turn after turn (+13.5 to +19 % from turn 100 to 1,000 in
//! `make bench`'s soak) with no more held by the page. A fixed threshold (large blocks
//! are mapped and unmapped, never left in the heap) and two arenas took it to +3 to +8 % over three runs.
//! The web and network processes are started by WebKit from this one, with its
//! environment: they read the settings from `GLIBC_TUNABLES`. MCP servers do not get the
//! variable (their environment is a fixed list).

/// The settings, as `GLIBC_TUNABLES` names them.
const TUNABLES: &[(&str, usize)] = &[
    ("glibc.malloc.mmap_threshold", MMAP_THRESHOLD),
    ("glibc.malloc.arena_max", ARENA_MAX),
];
/// glibc's own starting value, held fixed.
const MMAP_THRESHOLD: usize = 128 * 1024;
const ARENA_MAX: usize = 2;

/// `GLIBC_TUNABLES` with Conduit's settings added to what `existing` holds: a setting the
/// user made is kept.
pub fn tunables(existing: Option<&str>) -> String {
    let mut parts: Vec<String> = existing
        .unwrap_or("")
        .split(':')
        .filter(|part| !part.is_empty())
        .map(str::to_owned)
        .collect();
    for (name, value) in TUNABLES {
        if !parts.iter().any(|part| sets(part, name)) {
            parts.push(format!("{name}={value}"));
        }
    }
    parts.join(":")
}

/// Whether `part` of `GLIBC_TUNABLES` (`name=value`) sets `name`.
fn sets(part: &str, name: &str) -> bool {
    part.strip_prefix(name)
        .is_some_and(|rest| rest.starts_with('='))
}

/// Applies the settings to this process and, through the environment, to the processes
/// WebKit starts. Called first thing in `main`, while the process has one thread; false
/// when glibc refused a setting (its own stays), for the log once there is one.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn configure() -> bool {
    let existing = std::env::var("GLIBC_TUNABLES").ok();
    let user_set = |name: &str| {
        existing
            .as_deref()
            .is_some_and(|value| value.split(':').any(|part| sets(part, name)))
    };
    let options = [
        (TUNABLES[0].0, libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        (TUNABLES[1].0, libc::M_ARENA_MAX, ARENA_MAX),
    ];
    let value = tunables(existing.as_deref());
    // SAFETY: called at the start of `main`, before any other thread exists, so nothing
    // reads the environment while it changes.
    unsafe { std::env::set_var("GLIBC_TUNABLES", value) };
    // This process read GLIBC_TUNABLES when it started (a user's setting already holds):
    // it gets Conduit's other settings by call.
    options
        .into_iter()
        .filter(|(name, _, _)| !user_set(name))
        .map(|(_, option, value)| {
            let value = libc::c_int::try_from(value).unwrap_or(libc::c_int::MAX);
            // SAFETY: mallopt(3) only changes malloc's parameters; a refusal (0) leaves
            // glibc's own.
            unsafe { libc::mallopt(option, value) == 1 }
        })
        // Every setting is tried, even after one is refused.
        .fold(true, |all_taken, taken| all_taken & taken)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn configure() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::tunables;

    #[test]
    fn adds_the_settings_to_an_empty_environment() {
        assert_eq!(
            tunables(None),
            "glibc.malloc.mmap_threshold=131072:glibc.malloc.arena_max=2"
        );
    }

    #[test]
    fn keeps_the_users_settings_and_adds_the_missing_ones() {
        assert_eq!(
            tunables(Some(
                "glibc.malloc.arena_max=8:glibc.rtld.optional_static_tls=512"
            )),
            "glibc.malloc.arena_max=8:glibc.rtld.optional_static_tls=512:glibc.malloc.mmap_threshold=131072"
        );
    }
}
