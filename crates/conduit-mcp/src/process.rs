//! stdio server processes: each in its own process group, its stderr kept as a tail for
//! the user, killed with its whole group on shutdown, and on Linux killed by the kernel
//! when Conduit dies, so no server is ever left orphaned.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How many stderr lines are kept per server.
const STDERR_LINES: usize = 40;

/// The last lines a server wrote to stderr.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock();
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    pub fn lines(&self) -> Vec<String> {
        self.0.lock().iter().cloned().collect()
    }
}

/// A running server process.
pub struct ServerProcess {
    child: Child,
    pub stderr: StderrTail,
}

/// Starts `command`: stdin/stdout piped for MCP, stderr collected, own process group.
pub fn spawn(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&PathBuf>,
) -> std::io::Result<(ServerProcess, ChildStdout, ChildStdin)> {
    // Found as the login shell finds it, also when Conduit started from a desktop menu.
    let path = crate::shell_path::login_path();
    let program =
        crate::shell_path::resolve(command, &path).unwrap_or_else(|| PathBuf::from(command));
    let mut cmd = Command::new(program);
    // Not Conduit's whole environment: it holds provider keys the server has no use for.
    cmd.args(args)
        .env_clear()
        .envs(inherited_environment(std::env::vars_os()))
        .env("PATH", &path)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    #[cfg(unix)]
    {
        cmd.process_group(0);
        die_with_parent(&mut cmd);
    }
    let mut child = cmd.spawn()?;
    let (Some(stdout), Some(stdin), Some(stderr)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("the server's pipes were not created"));
    };
    let tail = StderrTail::default();
    let collector = tail.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            collector.push(line);
        }
    });
    Ok((
        ServerProcess {
            child,
            stderr: tail,
        },
        stdout,
        stdin,
    ))
}

/// Variables a server gets from Conduit's environment besides PATH (the one the login
/// shell resolves) and its entry's `env`: who and where the user is, the terminal and the
/// locale (the official TypeScript SDK's default set), plus what servers need to open a
/// browser or reach the network the way the user's other programs do (display, session
/// bus, SSH agent, proxies, extra certificates). No keys or tokens.
const INHERITED: &[&str] = &[
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "TMPDIR",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "DBUS_SESSION_BUS_ADDRESS",
    "SSH_AUTH_SOCK",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "PROCESSOR_ARCHITECTURE",
    // Windows needs these to find the user's folders and the system.
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PROGRAMFILES",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERNAME",
    "USERPROFILE",
    "COMSPEC",
    "PATHEXT",
];

/// The part of `vars` a server inherits: the names in [`INHERITED`], every `LC_*` and
/// every `XDG_*`.
fn inherited_environment(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    vars.filter(|(name, _)| {
        let Some(name) = name.to_str() else {
            return false;
        };
        let upper = name.to_ascii_uppercase();
        INHERITED.contains(&upper.as_str()) || name.starts_with("LC_") || name.starts_with("XDG_")
    })
    .collect()
}

/// On Linux, asks the kernel to SIGKILL the server when the thread that started it dies,
/// which also covers Conduit being killed with SIGKILL.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec; it only calls
    // prctl(2), which is async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
}

#[cfg(all(unix, not(target_os = "linux")))]
fn die_with_parent(_cmd: &mut Command) {}

impl ServerProcess {
    /// The exit code if the process has ended.
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The exit status once the process has ended, waiting up to `patience` for it (a
    /// closed pipe comes a moment before the exit can be seen).
    pub async fn exit_within(&mut self, patience: Duration) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(patience, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Waits up to `grace` for the process to end by itself, then ends its whole group:
    /// SIGTERM, and SIGKILL if it is still there a moment later.
    pub async fn shutdown(&mut self, grace: Duration) {
        if tokio::time::timeout(grace, self.child.wait()).await.is_ok() {
            self.kill_group(false);
            return;
        }
        self.kill_group(false);
        if tokio::time::timeout(Duration::from_millis(500), self.child.wait())
            .await
            .is_err()
        {
            self.kill_group(true);
            let _ = self.child.wait().await;
        }
    }

    #[cfg(unix)]
    fn kill_group(&self, hard: bool) {
        use nix::sys::signal::{Signal, killpg};
        use nix::unistd::Pid;
        if let Some(pid) = self.child.id() {
            let signal = if hard {
                Signal::SIGKILL
            } else {
                Signal::SIGTERM
            };
            // The group may already be gone; that is the goal.
            let _ = killpg(Pid::from_raw(pid as i32), signal);
        }
    }

    #[cfg(not(unix))]
    fn kill_group(&self, _hard: bool) {}
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Helpers the server started share its group: end them with it.
        self.kill_group(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_inherits_the_user_and_locale_but_no_keys() {
        let vars = [
            ("HOME", "/home/u"),
            ("LC_ALL", "C.UTF-8"),
            ("XDG_RUNTIME_DIR", "/run/user/1"),
            ("TERM", "xterm"),
            ("OPENAI_API_KEY", "sk-1"),
            ("ANTHROPIC_API_KEY", "sk-2"),
            ("CONDUIT_HOME", "/data"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("PATH", "/bin"),
        ]
        .map(|(k, v)| (k.into(), v.into()));
        let kept: Vec<String> = inherited_environment(vars.into_iter())
            .into_iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(kept, ["HOME", "LC_ALL", "XDG_RUNTIME_DIR", "TERM"]);
    }
}
