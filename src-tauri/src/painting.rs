//! How WebKit paints the window: its tiles on the CPU (Skia's raster), composited by the GPU.
//!
//! WebKitGTK 2.50 paints a page's tiles with Skia on the GPU by default: a painting thread
//! with a GL context of its own, Skia's GPU caches, and a shader compiled for each kind of
//! drawing the page does (rounded corners, icons' paths, text). For a chat window that is
//! memory spent on little work. Measured under Xvfb (Mesa's software GL, as on virtual
//! machines and machines without a GPU driver), `make bench`: the window's processes are
//! ~27 MB smaller at idle, and the chat window is faster, not slower (the first screen of a
//! 10,000-message conversation in 91-121 ms instead of 163-176 ms; while an answer streams,
//! 257-263 frames instead of 187-204 and 20 over 50 ms instead of 36-48). WebKit still
//! composites the tiles with GL, so scrolling and moving layers stay on the GPU. Other
//! WebKitGTK apps set the same to avoid GPU painting bugs on some NVIDIA and AMD drivers.
//!
//! WebKit's web process reads `WEBKIT_SKIA_ENABLE_CPU_RENDERING` when it starts, and it
//! starts with this process's environment. A value the user set is kept: `0` gives GPU
//! painting back.

/// The variable WebKit's web process reads: any value but `0` paints on the CPU.
pub const VARIABLE: &str = "WEBKIT_SKIA_ENABLE_CPU_RENDERING";

/// The value Conduit sets when the user has set none.
const CPU: &str = "1";

/// What to set, given what the environment holds: nothing when the user chose.
pub fn value_to_set(existing: Option<&std::ffi::OsStr>) -> Option<&'static str> {
    match existing {
        Some(_) => None,
        None => Some(CPU),
    }
}

/// Whether WebKit will paint on the CPU with `value` in the environment (its own rule).
pub fn paints_on_cpu(value: Option<&std::ffi::OsStr>) -> bool {
    value.is_some_and(|value| value != "0")
}

/// Sets the variable unless the user did, and says whether tiles will be painted on the
/// CPU. Called first thing in `main`, while the process has one thread.
#[allow(unsafe_code)]
pub fn configure() -> bool {
    let existing = std::env::var_os(VARIABLE);
    if let Some(value) = value_to_set(existing.as_deref()) {
        // SAFETY: called at the start of `main`, before any other thread exists, so nothing
        // reads the environment while it changes.
        unsafe { std::env::set_var(VARIABLE, value) };
    }
    paints_on_cpu(std::env::var_os(VARIABLE).as_deref())
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;

    #[test]
    fn conduit_asks_for_cpu_painting_only_when_the_user_chose_nothing() {
        assert_eq!(value_to_set(None), Some("1"));
        assert!(paints_on_cpu(value_to_set(None).map(OsStr::new)));
        // The user's choice stands, either way.
        assert_eq!(value_to_set(Some(OsStr::new("0"))), None);
        assert_eq!(value_to_set(Some(OsStr::new("1"))), None);
        assert_eq!(value_to_set(Some(OsStr::new(""))), None);
    }

    #[test]
    fn only_zero_keeps_gpu_painting_as_webkit_reads_it() {
        assert!(!paints_on_cpu(None));
        assert!(!paints_on_cpu(Some(OsStr::new("0"))));
        assert!(paints_on_cpu(Some(OsStr::new("1"))));
        assert!(paints_on_cpu(Some(OsStr::new("yes"))));
        assert!(paints_on_cpu(Some(OsStr::new(""))));
    }
}
