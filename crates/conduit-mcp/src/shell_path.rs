//! Finding `npx`, `uvx`, `node` and `python` the way the user's login shell does: an app
//! started from a desktop menu gets a bare PATH without nvm, Homebrew, ~/.local/bin, etc.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The PATH of the user's shell (bounded to 3 s; a blocking call: async code asks from
/// `spawn_blocking`), with the folders only the process's own PATH has before it; the
/// process's PATH alone when the shell cannot be asked. Asked once, unless the
/// interactive shell took too long (a profile loading nvm or conda on cold caches, at the
/// first start after login): what was found without it is used for
/// [`PROVISIONAL_FOR`], and then the shell is asked again, rather than missing `npx` until
/// the app restarts; after [`SLOW_ASKS`] answers too slow in a row the last stands. Callers
/// meanwhile wait for the one asking.
pub fn login_path() -> OsString {
    static PATH: Mutex<Option<Found>> = Mutex::new(None);
    let mut found = PATH
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(found) = found.as_ref()
        && found
            .provisional_since
            .is_none_or(|since| since.elapsed() < PROVISIONAL_FOR)
    {
        return found.path.clone();
    }
    let slow_before = found.as_ref().map_or(0, |found| found.slow_asks);
    let own = std::env::var_os("PATH").unwrap_or_default();
    let (shell, too_slow) = match std::env::var_os("SHELL").filter(|s| !s.is_empty()) {
        Some(shell) => path_of_shell(&shell),
        None => (None, false),
    };
    let path = match shell {
        Some(shell) => own_extras_first(&own, &shell),
        None => own,
    };
    let slow_asks = if too_slow { slow_before + 1 } else { 0 };
    *found = Some(Found {
        path: path.clone(),
        provisional_since: (too_slow && slow_asks < SLOW_ASKS).then(Instant::now),
        slow_asks,
    });
    path
}

/// How many times in a row the interactive shell may be too slow before its fallback
/// stands for good (a profile that always hangs costs a few seconds a minute no longer).
const SLOW_ASKS: u32 = 3;

/// How long a PATH found without the interactive shell's answer is used before the shell
/// is asked again.
const PROVISIONAL_FOR: Duration = Duration::from_secs(60);

/// The PATH found, and since when it stands in for the interactive shell's answer.
struct Found {
    path: OsString,
    provisional_since: Option<Instant>,
    /// How many times in a row the interactive shell was too slow.
    slow_asks: u32,
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

/// The PATH `shell -i -l -c` (the user's `$SHELL`) says, between markers so profile
/// chatter is ignored: interactive too, as a terminal's shell is, since nvm, fnm, volta and
/// pyenv put their PATH lines in `~/.bashrc` (which returns early when not interactive) or
/// `~/.zshrc` (which a login shell that is not interactive never reads). Its input is
/// empty, so a profile that asks something reads the end at once. An interactive profile
/// that never gets to the command (`exec tmux`, `exec zsh` in `~/.bashrc`) or takes too
/// long is asked again as a login shell only.
///
/// Also says whether the interactive shell ran out of time (rather than ending without an
/// answer): then another try may get its answer.
fn path_of_shell(shell: &std::ffi::OsStr) -> (Option<OsString>, bool) {
    match ask_shell(shell, &["-i", "-l", "-c"]) {
        Asked::Path(path) => (Some(path), false),
        Asked::TooSlow => (ask_shell(shell, &["-l", "-c"]).path(), true),
        Asked::Nothing => (ask_shell(shell, &["-l", "-c"]).path(), false),
    }
}

/// What a shell said when asked for its PATH.
enum Asked {
    Path(OsString),
    /// It ended, or its answer was cut or empty.
    Nothing,
    /// It had not answered within [`SHELL_PATIENCE`].
    TooSlow,
}

impl Asked {
    fn path(self) -> Option<OsString> {
        match self {
            Asked::Path(path) => Some(path),
            Asked::Nothing | Asked::TooSlow => None,
        }
    }
}

/// How long the shell has to say its PATH.
const SHELL_PATIENCE: Duration = Duration::from_secs(3);

const MARKER: &str = "__CONDUIT_PATH__";

/// `shell flags 'printf …'`'s PATH, read as it comes: the answer is taken once both
/// markers are in, within [`SHELL_PATIENCE`], even when something the profile started in
/// the background keeps the output open; what is still running then is ended.
fn ask_shell(shell: &std::ffi::OsStr, flags: &[&str]) -> Asked {
    let mut command = std::process::Command::new(shell);
    command
        .args(flags)
        .arg(format!("printf '{MARKER}%s{MARKER}' \"$PATH\""))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    without_terminal(&mut command);
    let Ok(mut child) = command.spawn() else {
        return Asked::Nothing;
    };
    let Some(mut stdout) = child.stdout.take() else {
        return Asked::Nothing;
    };
    // Reads until the second marker or the end; left to finish by itself when the
    // output stays open past the patience (its pipe ends with the last writer).
    let reader = std::thread::Builder::new()
        .name("conduit-shell-path".into())
        .spawn(move || {
            let mut out = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                match std::io::Read::read(&mut stdout, &mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(read) => out.extend_from_slice(&chunk[..read]),
                }
                if String::from_utf8_lossy(&out).matches(MARKER).count() >= 2 {
                    break;
                }
            }
            out
        })
        .ok();
    let deadline = std::time::Instant::now() + SHELL_PATIENCE;
    let mut too_slow = false;
    let out = reader.and_then(|reader| {
        while !reader.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        too_slow = !reader.is_finished();
        reader.is_finished().then(|| reader.join().ok()).flatten()
    });
    if !matches!(child.try_wait(), Ok(Some(_))) {
        end_session(&child);
        let _ = child.kill();
    }
    let _ = child.wait();
    if too_slow {
        return Asked::TooSlow;
    }
    let Some(out) = out else {
        return Asked::Nothing;
    };
    let out = String::from_utf8_lossy(&out).into_owned();
    let mut parts = out.split(MARKER);
    // Both markers: a cut answer is no answer.
    match (parts.nth(1), parts.next()) {
        (Some(inner), Some(_)) if !inner.is_empty() => Asked::Path(OsString::from(inner)),
        _ => Asked::Nothing,
    }
}

/// The shell in a session of its own, with no controlling terminal: an interactive shell
/// (zsh above all) opens `/dev/tty` and takes the terminal's foreground for its job
/// control, which would stop `conduit repl` reading the terminal it runs in.
#[cfg(unix)]
#[allow(unsafe_code)]
fn without_terminal(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec; it only calls
    // setsid(2), which is async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
}

#[cfg(not(unix))]
fn without_terminal(_command: &mut std::process::Command) {}

/// Ends the shell's session (what its profile started too) when it took too long.
#[cfg(unix)]
fn end_session(child: &std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[cfg(not(unix))]
fn end_session(_child: &std::process::Child) {}

/// The folders of `own` that `shell` lacks (a virtualenv or a tool's folder the terminal
/// that started Conduit added), then `shell`'s in its order: started from a desktop menu,
/// whose PATH is the system's alone, a command is found where the user's terminal finds
/// it (nvm's `node` before `/usr/bin/node`).
fn own_extras_first(own: &OsString, shell: &OsString) -> OsString {
    let shell_dirs: Vec<PathBuf> = std::env::split_paths(shell).collect();
    let extras = std::env::split_paths(own).filter(|dir| !shell_dirs.contains(dir));
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in extras.chain(shell_dirs.iter().cloned()) {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    std::env::join_paths(dirs).unwrap_or_else(|_| own.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_own_paths_extras_come_first_then_the_shells_order_without_repeats() {
        // Started from a terminal with a virtualenv: its folder first, then the shell's.
        let merged = own_extras_first(
            &OsString::from("/venv/bin:/usr/bin:/home/u/.nvm/bin:/venv/bin"),
            &OsString::from("/home/u/.nvm/bin:/usr/bin:/bin"),
        );
        assert_eq!(
            merged,
            OsString::from("/venv/bin:/home/u/.nvm/bin:/usr/bin:/bin")
        );
        // Started from a desktop menu: the system's PATH only, so the shell's order.
        let merged = own_extras_first(
            &OsString::from("/usr/local/bin:/usr/bin:/bin"),
            &OsString::from("/home/u/.nvm/bin:/usr/local/bin:/usr/bin:/bin"),
        );
        assert_eq!(
            merged,
            OsString::from("/home/u/.nvm/bin:/usr/local/bin:/usr/bin:/bin")
        );
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
        // A shell whose profile adds a folder the process's PATH lacks, asked directly:
        // no test sets the process's SHELL, which other threads may read.
        let dir = tempfile::tempdir().unwrap();
        let shell = fake_shell(
            dir.path(),
            "fake-shell",
            "[ \"$1 $2 $3\" = '-i -l -c' ] || exit 9\necho 'profile chatter'\nPATH=\"/opt/from-profile/bin:$PATH\" exec /bin/sh -c \"$4\"\n",
        );
        let path = path_of_shell(shell.as_os_str()).0.unwrap();
        assert!(
            path.to_string_lossy().starts_with("/opt/from-profile/bin:"),
            "{path:?}"
        );
    }

    /// A fake shell at `dir/name` running `script` (sh).
    #[cfg(unix)]
    fn fake_shell(dir: &Path, name: &str, script: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let shell = dir.join(name);
        std::fs::write(&shell, format!("#!/bin/sh\n{script}")).unwrap();
        std::fs::set_permissions(&shell, std::fs::Permissions::from_mode(0o755)).unwrap();
        shell
    }

    /// An interactive profile that never gets to the command (`exec tmux` in
    /// `~/.bashrc`, here a long sleep) is asked again as a login shell only; one that
    /// leaves a job in the background holding the output open is answered all the same,
    /// within the patience.
    #[cfg(unix)]
    #[test]
    fn a_profile_that_never_runs_the_command_or_holds_the_output_still_answers() {
        let dir = tempfile::tempdir().unwrap();
        let execs_away = fake_shell(
            dir.path(),
            "execs-away",
            "if [ \"$1\" = -i ]; then exec sleep 30; fi\nPATH=\"/opt/login/bin:$PATH\" exec /bin/sh -c \"$3\"\n",
        );
        let (path, too_slow) = path_of_shell(execs_away.as_os_str());
        let path = path.unwrap();
        // It ran out of time: the answer found without it stands in for a while.
        assert!(too_slow);
        assert!(
            path.to_string_lossy().starts_with("/opt/login/bin:"),
            "{path:?}"
        );

        let holds = fake_shell(
            dir.path(),
            "holds-output",
            "sleep 30 &\nPATH=\"/opt/interactive/bin:$PATH\" exec /bin/sh -c \"$4\"\n",
        );
        let path = path_of_shell(holds.as_os_str()).0.unwrap();
        assert!(
            path.to_string_lossy().starts_with("/opt/interactive/bin:"),
            "{path:?}"
        );
    }
}
