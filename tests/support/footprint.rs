//! Measuring a running app from outside, for the footprint and soak benches: the release
//! binaries, a process tree's resident memory (the app, WebKit's processes, the rest), and
//! an app started in its own process group that waits for its window.

// Measuring steps of a bench: failing loudly is their job, so the test-only lints apply.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::target_profile_dir;

/// Bound on the wait for an app's window.
const WINDOW_PATIENCE: Duration = Duration::from_secs(60);

/// Where the release binaries are: `CONDUIT_RELEASE_DIR`, or `release` beside this test's
/// profile folder.
pub fn release_dir() -> PathBuf {
    std::env::var_os("CONDUIT_RELEASE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_profile_dir().unwrap().with_file_name("release"))
}

/// A release binary of the workspace, which must have been built.
pub fn release_binary(name: &str) -> PathBuf {
    let path = release_dir().join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `make bench` (it builds the release binaries)",
        path.display()
    );
    path
}

/// A process's resident set in bytes (`VmRSS`), or `None` once it is gone.
pub fn rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// A process's proportional set in bytes (`Pss` in smaps_rollup: each shared page divided
/// among the processes that map it), or `None` once it is gone.
pub fn pss(pid: u32) -> Option<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let line = rollup.lines().find(|l| l.starts_with("Pss:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The CPU time a process has used (user and system), in clock ticks, or `None` once it
/// is gone.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields follow the last `)`.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some(user + system)
}

/// The CPU time of the app with its WebKit processes (not the servers it started), in
/// clock ticks.
pub fn app_cpu_ticks(pid: u32) -> u64 {
    cpu_ticks(pid).unwrap_or(0)
        + descendants(pid)
            .into_iter()
            .filter(|(_, comm)| comm.starts_with("WebKit"))
            .filter_map(|(child, _)| cpu_ticks(child))
            .sum::<u64>()
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant of the system; it takes no pointers.
    #[allow(unsafe_code)]
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// Every live descendant of `root` with its command name.
pub fn descendants(root: u32) -> Vec<(u32, String)> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: the name may hold spaces, so split after its `)`.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_owned();
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parents.push((pid, ppid, comm));
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, ppid, comm) in &parents {
            if *ppid == parent {
                found.push((*pid, comm.clone()));
                frontier.push(*pid);
            }
        }
    }
    found
}

/// One sample of an app's memory: its own process, WebKit's processes, everything else
/// it started (MCP servers), in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    pub app: u64,
    pub webkit: u64,
    pub servers: u64,
    /// The app's and WebKit's processes by PSS: a page two of them map (the libraries,
    /// the shared painted surfaces) counts once, where the RSS sum counts it in each.
    pub pss: u64,
}

impl Memory {
    pub fn of(pid: u32) -> Self {
        let mut memory = Self {
            app: rss(pid).unwrap_or(0),
            pss: pss(pid).unwrap_or(0),
            ..Self::default()
        };
        for (child, comm) in descendants(pid) {
            let bytes = rss(child).unwrap_or(0);
            if comm.starts_with("WebKit") {
                memory.webkit += bytes;
                memory.pss += pss(child).unwrap_or(0);
            } else {
                memory.servers += bytes;
            }
        }
        memory
    }

    /// The app with its WebKit processes (not the servers it started).
    pub fn all(&self) -> u64 {
        self.app + self.webkit
    }
}

/// An X client kept connected while apps start and stop: Xvfb resets when its last client
/// leaves and refuses connections meanwhile, so an app started right after another ended
/// could fail to open the display ("Failed to initialize GTK").
pub struct DisplayKeeper(Child);

impl DisplayKeeper {
    pub fn start() -> Self {
        let child = Command::new("xev")
            .args(["-root", "-event", "property"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("xev is missing: `make setup-test` installs x11-utils");
        Self(child)
    }
}

impl Drop for DisplayKeeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A started app in its own process group (ended, with its children, on drop).
pub struct App {
    child: Child,
    stderr: PathBuf,
}

impl App {
    /// Starts `binary` with `envs`; its stderr goes to `stderr` (shown if it fails).
    pub fn spawn(binary: &Path, envs: &[(&str, &OsStr)], stderr: &Path) -> Self {
        let mut command = Command::new(binary);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(stderr).unwrap())
            .process_group(0);
        for (name, value) in envs {
            command.env(name, value);
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        Self {
            child,
            stderr: stderr.to_owned(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the app has a visible top-level window (polled every 5 ms).
    pub fn wait_for_window(&mut self) {
        let deadline = Instant::now() + WINDOW_PATIENCE;
        let pid = self.pid().to_string();
        loop {
            let found = Command::new("xdotool")
                .args(["search", "--onlyvisible", "--pid", &pid])
                .output()
                .expect("xdotool is missing: `make setup-test` installs it");
            if found.status.success() && !found.stdout.is_empty() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "the app ended before its window showed: {status}; its stderr:\n{}",
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no window within {WINDOW_PATIENCE:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for App {
    /// Ends the app and every process of its group (WebKit's outlive a SIGTERM to the app).
    fn drop(&mut self) {
        let group = self.child.id();
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{group}")])
            .status();
        let _ = self.child.wait();
        let deadline = Instant::now() + Duration::from_secs(10);
        while group_alive(group) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Whether a live (not zombie) process is left in process group `group`.
fn group_alive(group: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        let Some(close) = stat.rfind(')') else {
            return false;
        };
        let mut fields = stat[close + 1..].split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|g| g.parse::<u32>().ok());
        pgrp == Some(group) && state != Some("Z")
    })
}

/// Where a process's resident memory is, in bytes (`/proc/PID/smaps`): anonymous memory
/// (malloc's and JavaScript's heaps), shared memory (WebKit's painted surfaces travel in
/// memfd and `/dev/shm`), and mapped files (binaries and libraries).
#[derive(Debug, Default, Clone, Copy)]
pub struct Breakdown {
    pub anonymous: u64,
    pub shared: u64,
    pub files: u64,
}

impl Breakdown {
    /// Zero for a process that is gone.
    pub fn of(pid: u32) -> Self {
        let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
        let mut breakdown = Self::default();
        breakdown.read(&smaps);
        breakdown
    }

    fn read(&mut self, smaps: &str) {
        // A mapping's header (`start-end perms offset dev inode [name]`) says what its
        // following `Rss:` line counts as.
        let mut current: Option<Kind> = None;
        for line in smaps.lines() {
            if let Some(kb) = line.strip_prefix("Rss:") {
                let bytes = kb
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0)
                    * 1024;
                match current {
                    Some(Kind::Anonymous) => self.anonymous += bytes,
                    Some(Kind::Shared) => self.shared += bytes,
                    Some(Kind::File) => self.files += bytes,
                    None => {}
                }
            } else if let Some(kind) = Kind::of_header(line) {
                current = Some(kind);
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Anonymous,
    Shared,
    File,
}

impl Kind {
    /// The kind of the mapping a header line starts; `None` for the lines inside one.
    fn of_header(line: &str) -> Option<Self> {
        let mut fields = line.split_whitespace();
        let range = fields.next()?;
        let (start, end) = range.split_once('-')?;
        if !start
            .chars()
            .chain(end.chars())
            .all(|c| c.is_ascii_hexdigit())
        {
            return None;
        }
        let name = fields.nth(4).unwrap_or("");
        Some(if name.is_empty() || name.starts_with('[') {
            Self::Anonymous
        } else if name.contains("memfd:")
            || name.starts_with("/dev/shm")
            || name.starts_with("/SYSV")
            || name.starts_with("/dev/dri")
        {
            Self::Shared
        } else {
            Self::File
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Breakdown;

    #[test]
    fn smaps_are_summed_by_kind_of_mapping() {
        let smaps = "\
55d0c0a00000-55d0c0c00000 rw-p 00000000 00:00 0                          [heap]
Size:               2048 kB
Rss:                1024 kB
7f00a0000000-7f00a0100000 rw-p 00000000 00:00 0 
Rss:                 512 kB
7f00b0000000-7f00b0100000 rw-s 00000000 00:01 42                         /memfd:wayland-shm (deleted)
Rss:                 256 kB
7f00c0000000-7f00c0100000 r-xp 00000000 08:01 99                         /usr/lib/libwebkit2gtk-4.1.so.0
Rss:                 128 kB
VmFlags: rd ex mr mw me sd
";
        let mut breakdown = Breakdown::default();
        breakdown.read(smaps);
        assert_eq!(breakdown.anonymous, 1536 * 1024);
        assert_eq!(breakdown.shared, 256 * 1024);
        assert_eq!(breakdown.files, 128 * 1024);
    }
}
