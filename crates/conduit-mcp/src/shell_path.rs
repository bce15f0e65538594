//! Finding `npx`, `uvx`, `node` and `python` the way the user's login shell does: an app
//! started from a desktop menu gets a bare PATH without nvm, Homebrew, ~/.local/bin, etc.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// The PATH of the user's login shell, asked once (bounded to 3 s), merged after the
/// process's own PATH; the process's PATH alone when the shell cannot be asked.
pub fn login_path() -> OsString {
    static PATH: OnceLock<OsString> = OnceLock::new();
    PATH.get_or_init(|| {
        let own = std::env::var_os("PATH").unwrap_or_default();
        match shell_path() {
            Some(shell) => merge(&own, &shell),
            None => own,
        }
    })
    .clone()
}

/// `command` as given when it has a slash; otherwise its full path on `path`, if found.
pub fn resolve(command: &str, path: &OsString) -> Option<PathBuf> {
    if command.contains('/') {
        return Some(PathBuf::from(command));
    }
    std::env::split_paths(path)
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// Asks `$SHELL -l -c` for its PATH, between markers so profile chatter is ignored.
fn shell_path() -> Option<OsString> {
    let shell = std::env::var_os("SHELL").filter(|s| !s.is_empty())?;
    let mut child = std::process::Command::new(shell)
        .args([
            "-l",
            "-c",
            "printf '__CONDUIT_PATH__%s__CONDUIT_PATH__' \"$PATH\"",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    let inner = out.split("__CONDUIT_PATH__").nth(1)?;
    (!inner.is_empty()).then(|| OsString::from(inner))
}

/// `first`'s entries, then `second`'s that `first` lacks.
fn merge(first: &OsString, second: &OsString) -> OsString {
    let mut dirs: Vec<PathBuf> = std::env::split_paths(first).collect();
    for dir in std::env::split_paths(second) {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    std::env::join_paths(dirs).unwrap_or_else(|_| first.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_merge_without_repeats_keeping_the_first_order() {
        let merged = merge(&OsString::from("/a:/b"), &OsString::from("/b:/c"));
        assert_eq!(merged, OsString::from("/a:/b:/c"));
    }

    #[cfg(unix)]
    #[test]
    fn commands_resolve_on_the_given_path_only_when_executable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("my-npx");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        let path = OsString::from(dir.path());
        assert_eq!(resolve("my-npx", &path), None, "not executable yet");
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(resolve("my-npx", &path), Some(tool));
        assert_eq!(resolve("/bin/sh", &path), Some(PathBuf::from("/bin/sh")));
    }

    #[cfg(unix)]
    #[test]
    fn the_login_shell_is_asked_for_its_path() {
        // A shell whose profile adds a folder the process's PATH lacks.
        let dir = tempfile::tempdir().unwrap();
        let fake_shell = dir.path().join("fake-shell");
        std::fs::write(
            &fake_shell,
            "#!/bin/sh\necho 'profile chatter'\nPATH=\"/opt/from-profile/bin:$PATH\" exec /bin/sh -c \"$3\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake_shell, std::fs::Permissions::from_mode(0o755)).unwrap();
        let saved = std::env::var_os("SHELL");
        // SAFETY of the test: no other test in this crate reads SHELL.
        unsafe_set_shell(Some(fake_shell.as_os_str()));
        let path = shell_path();
        unsafe_set_shell(saved.as_deref());
        let path = path.unwrap();
        assert!(
            path.to_string_lossy().starts_with("/opt/from-profile/bin:"),
            "{path:?}"
        );
    }

    #[allow(unsafe_code)]
    fn unsafe_set_shell(value: Option<&std::ffi::OsStr>) {
        // SAFETY: set_var is unsafe in edition 2024 because other threads may read the
        // environment; this test's crate reads SHELL nowhere else.
        unsafe {
            match value {
                Some(v) => std::env::set_var("SHELL", v),
                None => std::env::remove_var("SHELL"),
            }
        }
    }
}
