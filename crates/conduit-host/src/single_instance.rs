//! One desktop app per data folder: a second start brings the running window forward.
//!
//! Two apps on one data folder would start every MCP server twice (two browsers for
//! Playwright, two writers of Memory's graph) and race on the history and the settings.
//! The first app holds an advisory lock on `desktop.lock` in the data folder for its whole
//! life and listens on `desktop.sock` beside it; a second start finds the lock held,
//! asks the first over the socket to show its window, and ends. The socket's only words
//! are `show` and two answers: a page, a server or another local program that reaches it
//! can do nothing more than bring the window forward. Unix only (Conduit ships for Linux);
//! elsewhere the lock alone keeps a second app out.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The lock the running app holds, in the data folder.
pub const LOCK_FILE: &str = "desktop.lock";
/// The socket the running app listens on, beside the lock.
pub const SOCKET_FILE: &str = "desktop.sock";

const SHOW: &str = "show";
const SHOWN: &str = "shown";
const ENDING: &str = "ending";
/// The longest line either side reads: a longer one is not Conduit's.
const MAX_LINE: u64 = 16;
/// How long one side waits for the other's line.
const ANSWER_PATIENCE: Duration = Duration::from_secs(5);
/// How often a second start looks again while the first is starting or ending.
const RETRY_EVERY: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error("cannot open {path}: {source}", path = .path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "Conduit is already running for {folder} and did not answer within {seconds} s; \
         if no Conduit window is open, end the process that holds {lock}",
        folder = .folder.display(),
        lock = .lock.display(),
        seconds = .patience.as_secs()
    )]
    NoAnswer {
        folder: PathBuf,
        lock: PathBuf,
        patience: Duration,
    },
}

/// What a start found.
#[derive(Debug)]
pub enum Claim {
    /// No other app holds the data folder: this one does now.
    First(FirstInstance),
    /// The running app was asked to show its window, and did.
    Shown,
}

/// The running app's hold on its data folder: the lock is kept while this lives.
#[derive(Debug)]
pub struct FirstInstance {
    _lock: File,
    socket: PathBuf,
    #[cfg(unix)]
    listener: parking_lot::Mutex<Option<std::os::unix::net::UnixListener>>,
    ending: Arc<AtomicBool>,
}

/// Claims `data_dir` for this app, or asks the app that holds it to show its window.
/// While the holder is starting (not listening yet) or ending (it answers so), this waits,
/// up to `patience`, to be asked again or to take the lock itself: a quit followed at once
/// by a start gets a window, not an error.
pub fn claim(data_dir: &Path, patience: Duration) -> Result<Claim, InstanceError> {
    let lock_path = data_dir.join(LOCK_FILE);
    let lock_error = |source| InstanceError::Lock {
        path: lock_path.clone(),
        source,
    };
    conduit_files::ensure_private_dir(data_dir).map_err(lock_error)?;
    let lock = open_lock(&lock_path).map_err(lock_error)?;
    let socket = data_dir.join(SOCKET_FILE);
    let until = Instant::now() + patience;
    let mut said_waiting = false;
    loop {
        match lock.try_lock() {
            Ok(()) => return Ok(Claim::First(FirstInstance::listen(lock, &socket))),
            Err(std::fs::TryLockError::Error(source)) => return Err(lock_error(source)),
            Err(std::fs::TryLockError::WouldBlock) => {}
        }
        let left = until
            .saturating_duration_since(Instant::now())
            .clamp(RETRY_EVERY, ANSWER_PATIENCE);
        match ask_to_show(&socket, left) {
            Ok(true) => return Ok(Claim::Shown),
            Ok(false) if !said_waiting => {
                said_waiting = true;
                tracing::info!("the running app is ending: waiting to take its place");
            }
            Ok(false) => {}
            Err(error) => tracing::debug!(%error, "the running app did not answer yet"),
        }
        if Instant::now() >= until {
            return Err(InstanceError::NoAnswer {
                folder: data_dir.to_owned(),
                lock: lock_path,
                patience,
            });
        }
        std::thread::sleep(RETRY_EVERY);
    }
}

fn open_lock(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, conduit_files::PRIVATE_FILE_MODE);
    options.open(path)
}

impl FirstInstance {
    #[cfg(unix)]
    fn listen(lock: File, socket: &Path) -> Self {
        // The lock is held: a socket file left there is a crashed app's.
        if let Err(error) = std::fs::remove_file(socket)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(%error, socket = %socket.display(), "an old socket could not be removed");
        }
        let listener = match std::os::unix::net::UnixListener::bind(socket) {
            Ok(listener) => {
                if let Err(error) = conduit_files::make_private(socket) {
                    tracing::warn!(%error, "the instance socket could not be made private");
                }
                Some(listener)
            }
            Err(error) => {
                // A second start then waits and says the app is running, without a window.
                tracing::warn!(%error, socket = %socket.display(), "a second start cannot ask this app to show its window");
                None
            }
        };
        Self {
            _lock: lock,
            socket: socket.to_owned(),
            listener: parking_lot::Mutex::new(listener),
            ending: Arc::new(AtomicBool::new(false)),
        }
    }

    #[cfg(not(unix))]
    fn listen(lock: File, socket: &Path) -> Self {
        Self {
            _lock: lock,
            socket: socket.to_owned(),
            ending: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Answers later starts on a thread of its own: `show` runs for each one that asks
    /// and says whether the window was brought forward (false: the app is ending). Once:
    /// a second call has nothing left to serve.
    pub fn serve(&self, show: impl Fn() -> bool + Send + 'static) {
        #[cfg(unix)]
        if let Some(listener) = self.listener.lock().take() {
            let ending = self.ending.clone();
            let spawned = std::thread::Builder::new()
                .name("single-instance".into())
                .spawn(move || {
                    for stream in listener.incoming() {
                        match stream {
                            Ok(stream) => answer(stream, &ending, &show),
                            Err(error) => {
                                // Out of descriptors, say: the call stays queued, so wait
                                // before taking it again rather than spin.
                                tracing::debug!(%error, "a second start's call failed");
                                std::thread::sleep(RETRY_EVERY);
                            }
                        }
                    }
                });
            if let Err(error) = spawned {
                tracing::warn!(%error, "a second start cannot ask this app to show its window");
            }
        }
        #[cfg(not(unix))]
        drop(show);
    }

    /// From now on a second start is told this app is ending, and waits to take its place.
    pub fn ending(&self) {
        self.ending.store(true, Ordering::SeqCst);
    }

    /// Removes the socket as the app ends (the lock is still held, so it is this app's;
    /// a start waiting meanwhile takes the lock once the process is gone).
    pub fn ended(&self) {
        self.ending();
        if let Err(error) = std::fs::remove_file(&self.socket)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::debug!(%error, "the instance socket was left behind");
        }
    }
}

/// One caller's line and the answer. The whole line must come within
/// [`ANSWER_PATIENCE`] (a caller sending a byte at a time cannot hold the socket), and a
/// `show` that panics answers `ending` and leaves the socket answering the next one.
#[cfg(unix)]
fn answer(stream: std::os::unix::net::UnixStream, ending: &AtomicBool, show: &dyn Fn() -> bool) {
    let deadline = Instant::now() + ANSWER_PATIENCE;
    let is_show = line_within(&stream, deadline).is_ok_and(|line| line == SHOW);
    if !is_show {
        tracing::debug!("a call on the instance socket that was not Conduit's was ignored");
        return;
    }
    let shown = !ending.load(Ordering::SeqCst)
        && std::panic::catch_unwind(std::panic::AssertUnwindSafe(show)).unwrap_or_else(|_| {
            tracing::error!("bringing the window forward failed");
            false
        });
    let reply = if shown { SHOWN } else { ENDING };
    if let Err(error) = (&stream).write_all(format!("{reply}\n").as_bytes()) {
        tracing::debug!(%error, "a second start left before its answer");
    }
}

/// A line of at most [`MAX_LINE`] bytes, without its newline, read by `deadline`.
#[cfg(unix)]
fn line_within(
    stream: &std::os::unix::net::UnixStream,
    deadline: Instant,
) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || line.len() as u64 >= MAX_LINE {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no whole line in time",
            ));
        }
        stream.set_read_timeout(Some(left))?;
        match (&*stream).read(&mut byte)? {
            // Closed: what came is the line.
            0 => break,
            _ if byte[0] == b'\n' => break,
            _ => line.push(byte[0]),
        }
    }
    String::from_utf8(line)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "the line is not text"))
}

/// Asks the running app to show its window, waiting up to `patience` for its answer: true
/// when it did, false when it is ending.
#[cfg(unix)]
fn ask_to_show(socket: &Path, patience: Duration) -> std::io::Result<bool> {
    let stream = std::os::unix::net::UnixStream::connect(socket)?;
    stream.set_write_timeout(Some(patience))?;
    (&stream).write_all(format!("{SHOW}\n").as_bytes())?;
    let line = line_within(&stream, Instant::now() + patience)?;
    match line.as_str() {
        SHOWN => Ok(true),
        // Closed without a word: the app ended while it was asked.
        ENDING | "" => Ok(false),
        other => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the instance socket answered {other:?}"),
        )),
    }
}

#[cfg(not(unix))]
fn ask_to_show(_socket: &Path, _patience: Duration) -> std::io::Result<bool> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "a running app cannot be asked to show its window on this system",
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    fn first(dir: &Path) -> FirstInstance {
        match claim(dir, Duration::ZERO).unwrap() {
            Claim::First(first) => first,
            Claim::Shown => panic!("the folder was free"),
        }
    }

    /// A `show` that counts its calls and answers `answer`.
    fn counted(answer: bool) -> (Arc<AtomicUsize>, impl Fn() -> bool + Send + 'static) {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        (calls, move || {
            counter.fetch_add(1, Ordering::SeqCst);
            answer
        })
    }

    #[test]
    fn a_second_start_asks_the_first_to_show_its_window_and_ends() {
        let dir = tempfile::tempdir().unwrap();
        let running = first(dir.path());
        let (shown, show) = counted(true);
        running.serve(show);
        for _ in 0..2 {
            assert!(matches!(
                claim(dir.path(), Duration::from_secs(10)).unwrap(),
                Claim::Shown
            ));
        }
        assert_eq!(shown.load(Ordering::SeqCst), 2);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(SOCKET_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn a_start_while_the_first_ends_waits_and_takes_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let running = first(dir.path());
        let (shown, show) = counted(true);
        running.serve(show);
        running.ending();
        let folder = dir.path().to_owned();
        let second = std::thread::spawn(move || claim(&folder, Duration::from_secs(20)));
        std::thread::sleep(Duration::from_millis(300));
        // The app's last step: its socket goes, then the process (and the lock).
        running.ended();
        assert!(!dir.path().join(SOCKET_FILE).exists());
        std::thread::sleep(Duration::from_millis(300));
        drop(running);
        assert!(matches!(second.join().unwrap().unwrap(), Claim::First(_)));
        assert_eq!(
            shown.load(Ordering::SeqCst),
            0,
            "an ending app shows nothing"
        );
    }

    /// A window that could not be brought forward (the app closing it) is answered as
    /// ending, and so is a `show` that panics; the socket answers the next start after.
    #[test]
    fn a_window_not_brought_forward_is_not_called_shown() {
        let dir = tempfile::tempdir().unwrap();
        let running = first(dir.path());
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        running.serve(move || match counter.fetch_add(1, Ordering::SeqCst) {
            0 => false,
            1 => panic!("the window is gone"),
            _ => true,
        });
        let socket = dir.path().join(SOCKET_FILE);
        let patience = Duration::from_secs(5);
        assert!(!ask_to_show(&socket, patience).unwrap());
        assert!(!ask_to_show(&socket, patience).unwrap());
        assert!(ask_to_show(&socket, patience).unwrap());
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_holder_that_never_answers_is_named_after_the_patience() {
        let dir = tempfile::tempdir().unwrap();
        // Holds the lock and never serves: a hung app, or one starting too slowly.
        let _running = first(dir.path());
        let started = Instant::now();
        let error = claim(dir.path(), Duration::from_millis(300)).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("already running") && message.contains(LOCK_FILE),
            "{message}"
        );
        // The wait for an answer is cut to the patience left, not five seconds more.
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    /// Other words get no answer and `show` is not run; a caller that sends its line a
    /// byte at a time is cut off at the line's deadline, and the next start is answered.
    #[cfg(unix)]
    #[test]
    fn a_stale_socket_is_replaced_and_only_a_whole_show_line_is_answered() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SOCKET_FILE), b"left by a crash").unwrap();
        let running = first(dir.path());
        let (shown, show) = counted(true);
        running.serve(show);
        let socket = dir.path().join(SOCKET_FILE);
        let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        stream.write_all(b"run rm -rf ~\n").unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        assert_eq!(reply, "");
        assert_eq!(shown.load(Ordering::SeqCst), 0);

        let mut slow = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        slow.write_all(b"sh").unwrap();
        assert!(ask_to_show(&socket, Duration::from_secs(10)).unwrap());
        assert_eq!(shown.load(Ordering::SeqCst), 1);
        drop(slow);
    }
}
