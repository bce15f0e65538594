//! stdio server processes: each in its own process group, its stderr kept as a tail for
//! the user, killed with its whole group on shutdown, and on Linux killed by the kernel
//! when Conduit dies (the server itself: a child it started outlives a SIGKILL).

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
/// How much of one stderr line is kept (the rest is dropped as it arrives).
const STDERR_LINE_BYTES: usize = 4096;

/// The last lines a server wrote to stderr.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    /// Keeps `line` cut at `limit` bytes ([`cut_line`]), the oldest going once
    /// [`STDERR_LINES`] are kept.
    pub(crate) fn push_cut(&self, line: String, limit: usize) {
        self.push(cut_line(line, limit));
    }

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

/// `line` cut at `limit` bytes, on a character's edge, marked when cut.
pub(crate) fn cut_line(mut line: String, limit: usize) -> String {
    if line.len() > limit {
        let mut end = limit;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line.truncate(end);
        line.push_str(" […]");
    }
    line
}

/// How much of a stderr or log line is shown.
pub(crate) const SHOWN_LINE_BYTES: usize = STDERR_LINE_BYTES;

/// A running server process.
pub struct ServerProcess {
    child: Child,
    /// The server's process group (its pid, as it leads the group), kept from the start:
    /// once the server itself has ended and been waited for, `Child::id` is gone, yet
    /// helpers it started (a browser, an `npx` child) may still run in its group.
    group: Option<u32>,
    pub stderr: StderrTail,
}

/// Starts `command`: stdin/stdout piped for MCP, stderr collected (with `secrets`
/// hidden in each line before it is cut), own process group.
/// `path` is where commands are found (`shell_path::login_path`).
pub fn spawn(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&PathBuf>,
    secrets: &crate::redact::Redactor,
    path: &std::ffi::OsString,
) -> std::io::Result<(ServerProcess, ChildStdout, ChildStdin)> {
    let program =
        crate::shell_path::resolve(command, path).unwrap_or_else(|| PathBuf::from(command));
    let mut cmd = Command::new(program);
    // Not Conduit's whole environment: it holds provider keys the server has no use for.
    cmd.args(args)
        .env_clear()
        .envs(inherited_environment(std::env::vars_os()))
        .env("PATH", path)
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
    conduit_core::task::spawn(keep_tail(stderr, tail.clone(), secrets.clone()));
    Ok((
        ServerProcess {
            group: child.id(),
            child,
            stderr: tail,
        },
        stdout,
        stdin,
    ))
}

/// Reads a server's stderr to its end, keeping the last lines in `tail`: each line cut at
/// [`STDERR_LINE_BYTES`] (a server writing megabytes without a line break cannot grow
/// Conduit), bytes that are not UTF-8 kept as replacement characters. A line's `secrets`
/// are hidden before it is cut (a secret cut in two would no longer be found whole). The
/// pipe is read to the end whatever comes, so a server never blocks on a full stderr.
async fn keep_tail(
    stderr: impl tokio::io::AsyncRead + Unpin,
    tail: StderrTail,
    secrets: crate::redact::Redactor,
) {
    // Room for a secret that starts just before the cut.
    let kept = STDERR_LINE_BYTES + secrets.longest();
    let mut reader = BufReader::new(stderr);
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    let finish = |line: &mut Vec<u8>, cut: &mut bool| {
        while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            line.pop();
        }
        let mut text = secrets.text(&String::from_utf8_lossy(line));
        if text.len() > STDERR_LINE_BYTES {
            let mut end = STDERR_LINE_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            *cut = true;
        }
        if *cut {
            text.push_str(" […]");
        }
        line.clear();
        *cut = false;
        text
    };
    loop {
        let chunk = match reader.fill_buf().await {
            Ok([]) => break,
            Ok(chunk) => chunk,
            Err(error) => {
                tracing::debug!(%error, "a server's stderr could not be read further");
                break;
            }
        };
        let (taken, ends_line) = match chunk.iter().position(|b| *b == b'\n') {
            Some(end) => (end + 1, true),
            None => (chunk.len(), false),
        };
        let room = kept.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..taken.min(room)]);
        // Cut only when something other than the line's end was dropped.
        cut |= chunk[taken.min(room)..taken]
            .iter()
            .any(|b| *b != b'\n' && *b != b'\r');
        reader.consume(taken);
        if ends_line {
            tail.push(finish(&mut line, &mut cut));
        }
    }
    if !line.is_empty() {
        tail.push(finish(&mut line, &mut cut));
    }
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
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            self.kill_group(false);
            if tokio::time::timeout(Duration::from_millis(500), self.child.wait())
                .await
                .is_err()
            {
                self.kill_group(true);
                let _ = self.child.wait().await;
            }
        }
        self.end_group().await;
    }

    /// Ends what is left of the server's group once the server has ended: SIGTERM, a
    /// moment for its helpers to go, then SIGKILL. The group's id is then forgotten: once
    /// the group is empty its number may be reused by another process's group.
    async fn end_group(&mut self) {
        self.kill_group(false);
        for _ in 0..4 {
            if !self.group_alive() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if self.group_alive() {
            self.kill_group(true);
        }
        self.group = None;
    }

    /// Whether any process of the server's group is still there.
    #[cfg(unix)]
    fn group_alive(&self) -> bool {
        self.group.is_some_and(|pid| {
            nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
        })
    }

    #[cfg(not(unix))]
    fn group_alive(&self) -> bool {
        false
    }

    #[cfg(unix)]
    fn kill_group(&self, hard: bool) {
        use nix::sys::signal::{Signal, killpg};
        use nix::unistd::Pid;
        if let Some(pid) = self.group {
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

    /// Whether process `pid` is gone (a zombie no one reaped yet counts as gone).
    #[cfg(target_os = "linux")]
    fn ended(pid: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'))
        })
    }

    /// A server that started a helper and ends by itself when its stdin closes (as most
    /// do) was waited for; its helper, in its group, still ends with it.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_servers_helpers_end_with_it_after_the_server_itself_exited() {
        use tokio::io::AsyncBufReadExt;
        let (mut process, stdout, stdin) = spawn(
            "sh",
            &[
                "-c".to_owned(),
                "sleep 300 & echo $!; cat > /dev/null".to_owned(),
            ],
            &BTreeMap::new(),
            None,
            &Default::default(),
            &std::env::var_os("PATH").unwrap_or_default(),
        )
        .unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let helper = lines.next_line().await.unwrap().unwrap();
        assert!(!ended(&helper), "the helper runs");
        drop(stdin);
        process.shutdown(Duration::from_secs(10)).await;
        assert!(
            process.exit_status().is_some(),
            "the server ended by itself"
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !ended(&helper) {
            assert!(
                std::time::Instant::now() < deadline,
                "the helper {helper} outlived its server"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn a_servers_stderr_tail_is_bounded_and_survives_bytes_that_are_not_utf8() {
        let mut written = b"first\r\n".to_vec();
        written.extend(std::iter::repeat_n(b'x', 5 * 1024 * 1024));
        written.extend(b"\nbad \xff\xfe bytes\n");
        for n in 0..60 {
            written.extend(format!("line {n}\n").as_bytes());
        }
        written.extend(b"no newline at the end");
        let tail = StderrTail::default();
        keep_tail(&written[..], tail.clone(), Default::default()).await;
        let lines = tail.lines();
        assert_eq!(lines.len(), STDERR_LINES);
        assert_eq!(lines.last().unwrap(), "no newline at the end");
        assert_eq!(lines[lines.len() - 2], "line 59");

        let tail = StderrTail::default();
        keep_tail(
            &written[..5 * 1024 * 1024],
            tail.clone(),
            Default::default(),
        )
        .await;
        let lines = tail.lines();
        assert_eq!(lines[0], "first");
        assert_eq!(lines[1].len(), STDERR_LINE_BYTES + " […]".len());
        assert!(lines[1].ends_with(" […]"));

        let tail = StderrTail::default();
        keep_tail(
            &b"bad \xff\xfe bytes\nafter\n"[..],
            tail.clone(),
            Default::default(),
        )
        .await;
        assert_eq!(tail.lines(), ["bad \u{fffd}\u{fffd} bytes", "after"]);

        // A line of exactly the kept size is whole.
        let exact = [vec![b'y'; STDERR_LINE_BYTES], b"\n".to_vec()].concat();
        let tail = StderrTail::default();
        keep_tail(&exact[..], tail.clone(), Default::default()).await;
        assert_eq!(tail.lines(), ["y".repeat(STDERR_LINE_BYTES)]);
        let exact_crlf = [vec![b'y'; STDERR_LINE_BYTES], b"\r\n".to_vec()].concat();
        let tail = StderrTail::default();
        keep_tail(&exact_crlf[..], tail.clone(), Default::default()).await;
        assert_eq!(tail.lines(), ["y".repeat(STDERR_LINE_BYTES)]);

        // A secret across the cut is hidden whole, not left half there.
        let secret = "sk-secret-value-4711";
        let mut long = vec![b'z'; STDERR_LINE_BYTES - 6];
        long.extend(secret.as_bytes());
        long.extend(vec![b'z'; 100]);
        long.push(b'\n');
        let tail = StderrTail::default();
        let secrets = crate::redact::Redactor::new([secret.to_owned()]);
        keep_tail(&long[..], tail.clone(), secrets).await;
        let line = &tail.lines()[0];
        assert!(!line.contains("sk-sec") && line.ends_with(" […]"), "{line}");
    }

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
