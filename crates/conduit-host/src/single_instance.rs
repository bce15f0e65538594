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
use std::io::{BufRead, BufReader, Read, Write};
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
    loop {
        match lock.try_lock() {
            Ok(()) => return Ok(Claim::First(FirstInstance::listen(lock, &socket))),
            Err(std::fs::TryLockError::Error(source)) => return Err(lock_error(source)),
            Err(std::fs::TryLockError::WouldBlock) => {}
        }
        match ask_to_show(&socket) {
            Ok(true) => return Ok(Claim::Shown),
            Ok(false) => tracing::info!("the running app is ending: waiting to take its place"),
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
            listener: parking_lot::Mutex::new(listener),
            ending: Arc::new(AtomicBool::new(false)),
        }
    }

    #[cfg(not(unix))]
    fn listen(lock: File, _socket: &Path) -> Self {
        Self {
            _lock: lock,
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
                            Err(error) => tracing::debug!(%error, "a second start's call failed"),
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
}

#[cfg(unix)]
fn answer(stream: std::os::unix::net::UnixStream, ending: &AtomicBool, show: &dyn Fn() -> bool) {
    if stream.set_read_timeout(Some(ANSWER_PATIENCE)).is_err() {
        return;
    }
    let mut line = String::new();
    let mut reader = BufReader::new((&stream).take(MAX_LINE));
    if reader.read_line(&mut line).is_err() || line.trim_end() != SHOW {
        tracing::debug!("a call on the instance socket that was not Conduit's was ignored");
        return;
    }
    let reply = if !ending.load(Ordering::SeqCst) && show() {
        SHOWN
    } else {
        ENDING
    };
    if let Err(error) = (&stream).write_all(format!("{reply}\n").as_bytes()) {
        tracing::debug!(%error, "a second start left before its answer");
    }
}

/// Asks the running app to show its window: true when it did, false when it is ending.
#[cfg(unix)]
fn ask_to_show(socket: &Path) -> std::io::Result<bool> {
    let mut stream = std::os::unix::net::UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(ANSWER_PATIENCE))?;
    stream.set_write_timeout(Some(ANSWER_PATIENCE))?;
    stream.write_all(format!("{SHOW}\n").as_bytes())?;
    let mut line = String::new();
    BufReader::new((&stream).take(MAX_LINE)).read_line(&mut line)?;
    match line.trim_end() {
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
fn ask_to_show(_socket: &Path) -> std::io::Result<bool> {
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

    #[test]
    fn a_second_start_asks_the_first_to_show_its_window_and_ends() {
        let dir = tempfile::tempdir().unwrap();
        let running = first(dir.path());
        let shown = Arc::new(AtomicUsize::new(0));
        let counter = shown.clone();
        running.serve(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            true
        });
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
        running.serve(|| panic!("an ending app shows no window"));
        running.ending();
        let folder = dir.path().to_owned();
        let second = std::thread::spawn(move || claim(&folder, Duration::from_secs(20)));
        std::thread::sleep(Duration::from_millis(300));
        drop(running);
        assert!(matches!(second.join().unwrap().unwrap(), Claim::First(_)));
    }

    #[test]
    fn a_holder_that_never_answers_is_named_after_the_patience() {
        let dir = tempfile::tempdir().unwrap();
        // Holds the lock and never serves: a hung app, or one starting too slowly.
        let _running = first(dir.path());
        let error = claim(dir.path(), Duration::from_millis(300)).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("already running") && message.contains(LOCK_FILE),
            "{message}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_stale_socket_is_replaced_and_other_words_get_no_answer() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SOCKET_FILE), b"left by a crash").unwrap();
        let running = first(dir.path());
        running.serve(|| panic!("only `show` shows the window"));
        let mut stream =
            std::os::unix::net::UnixStream::connect(dir.path().join(SOCKET_FILE)).unwrap();
        stream.write_all(b"run rm -rf ~\n").unwrap();
        let mut reply = String::new();
        BufReader::new(&stream).read_line(&mut reply).unwrap();
        assert_eq!(reply, "");
    }
}
