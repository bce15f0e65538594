//! Logging with `tracing`: always to a log file under the data folder, rotated by size
//! when a process starts, and to stderr when a frontend asks (the CLI's `-v`).

use std::fs;
use std::io;
use std::path::Path;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

use crate::Paths;

/// Environment variable with a `tracing` filter for the log file, e.g. `conduit=debug`.
pub const LOG_FILTER_ENV: &str = "CONDUIT_LOG";
/// The log file's filter when `CONDUIT_LOG` is not set: the window's libraries and rmcp only
/// warn (rmcp writes every notification a server sends whole at info, so a server sending
/// them in a loop would fill the disk; the file is rotated only when a process starts).
const DEFAULT_FILTER: &str = "info,tao=warn,wry=warn,rmcp=warn";

/// A log file larger than this is moved aside when a process starts.
const ROTATE_AT_BYTES: u64 = 10 * 1024 * 1024;
/// How many moved-aside files are kept: `conduit.log.1` (newest) to `conduit.log.N`.
const KEEP_ROTATED: u32 = 4;
/// Lines waiting for the log writer thread. Its queue is allocated and touched whole when
/// logging starts (32 bytes a line): tracing-appender's default of 128,000 lines kept
/// 3.9 MB resident in every process for a queue that holds a few lines at a time. When
/// it is full, a logging thread waits for the writer instead of the line being dropped
/// without a trace (the cost: a log folder on a stalled network filesystem holds up the
/// threads that log, as it would a synchronous writer).
const LOG_BUFFER_LINES: usize = 8192;

#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("cannot create the folder {path}: {source}")]
    CreateDir { path: String, source: io::Error },
    #[error("cannot open the log file {path}: {source}")]
    OpenFile { path: String, source: io::Error },
    #[error("logging is already set up in this process")]
    AlreadyInitialised,
}

/// How verbose stderr is; `None` keeps stderr quiet.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogOptions {
    pub stderr_level: Option<tracing::Level>,
}

/// Keeps the background log writer alive; dropping it flushes the file.
#[must_use = "dropping the guard stops file logging"]
pub struct LogGuard {
    _file: WorkerGuard,
}

/// Sets up logging for this process: the file always (level `info`, or `CONDUIT_LOG`),
/// stderr at the level asked for.
pub fn init(paths: &Paths, options: LogOptions) -> Result<LogGuard, LoggingError> {
    // Every process starts here, so this is where Conduit's own folders become private.
    paths
        .create_private_dirs()
        .map_err(|(dir, source)| LoggingError::CreateDir {
            path: dir.display().to_string(),
            source,
        })?;
    rotate_if_large(&paths.log_file, ROTATE_AT_BYTES, KEEP_ROTATED);
    let open_failed = |source| LoggingError::OpenFile {
        path: paths.log_file.display().to_string(),
        source,
    };
    let file =
        RotatingFile::open(&paths.log_file, ROTATE_AT_BYTES, KEEP_ROTATED).map_err(open_failed)?;
    // A log written by an older version may be readable by others.
    conduit_files::make_private(&paths.log_file).map_err(open_failed)?;
    for n in 1..=KEEP_ROTATED {
        let mut rotated = paths.log_file.as_os_str().to_owned();
        rotated.push(format!(".{n}"));
        conduit_files::make_private(Path::new(&rotated)).map_err(open_failed)?;
    }
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_BUFFER_LINES)
        .lossy(false)
        .finish(file);

    let (file_filter, bad_filter) = file_filter(std::env::var(LOG_FILTER_ENV).ok().as_deref());
    let file_layer = fmt::layer()
        .with_ansi(false)
        .with_writer(Scrubbed(writer))
        .with_filter(file_filter);
    let stderr_layer = options.stderr_level.map(|level| {
        fmt::layer()
            .with_writer(Scrubbed(io::stderr))
            .with_target(false)
            .with_filter(tracing_subscriber::filter::LevelFilter::from_level(level))
    });
    tracing_subscriber::registry()
        .with(file_layer)
        .with(stderr_layer)
        .try_init()
        .map_err(|_| LoggingError::AlreadyInitialised)?;
    if let Some(problem) = bad_filter {
        tracing::warn!("{LOG_FILTER_ENV} was not used: {problem}; the log uses {DEFAULT_FILTER:?}");
        // Not `eprintln!`, which panics when stderr is gone (a closed pipe); the log
        // above holds the same words.
        let _ = io::Write::write_fmt(
            &mut io::stderr(),
            format_args!("conduit: {LOG_FILTER_ENV} was not used: {problem}\n"),
        );
    }
    Ok(LogGuard { _file: guard })
}

/// The log file's filter: `CONDUIT_LOG` when it reads (a default level and `target=level`
/// pairs, e.g. `info,conduit_mcp=debug`), else the default, with why it did not read.
/// `tracing`'s `Targets` reads it: `EnvFilter`'s span and field filters would bring a
/// regular expression engine into both binaries for a syntax nobody here uses.
fn file_filter(value: Option<&str>) -> (Targets, Option<String>) {
    let default = || DEFAULT_FILTER.parse::<Targets>().unwrap_or_default();
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => (default(), None),
        Some(value) => match value.parse::<Targets>() {
            Ok(targets) => (targets, None),
            Err(err) => (
                default(),
                Some(format!("{value:?} is not a filter ({err})")),
            ),
        },
    }
}

/// A log writer that hides the MCP servers' secrets and removes the query and user info
/// of every URL in a line before it is written: libraries (rmcp, reqwest) log request
/// URLs and server answers, and either can hold a key.
struct Scrubbed<M>(M);

impl<'a, M: fmt::MakeWriter<'a>> fmt::MakeWriter<'a> for Scrubbed<M> {
    type Writer = ScrubbedWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        ScrubbedWriter(self.0.make_writer())
    }
}

/// One event's writer (the formatter writes each event whole).
struct ScrubbedWriter<W>(W);

/// The longest log line written whole. A library may log what a server sent (rmcp writes
/// a message it did not expect whole, at warn), which a server can make hundreds of MiB:
/// one such line would take the log past its size limits at once.
const MAX_LOG_LINE: usize = 16 * 1024;
/// How much of a longer line past the cut is scrubbed before it is cut, so a secret that
/// runs across the cut is masked whole and no part of it stays.
const SCRUBBED_PAST_CUT: usize = 16 * 1024;

/// One log line scrubbed of secrets, cut at [`MAX_LOG_LINE`] bytes (saying so).
fn clean_line(line: &[u8]) -> String {
    if line.len() <= MAX_LOG_LINE {
        return conduit_mcp::redact::scrub_log_line(&String::from_utf8_lossy(line));
    }
    let seen = &line[..line.len().min(MAX_LOG_LINE + SCRUBBED_PAST_CUT)];
    let mut clean = conduit_mcp::redact::scrub_log_line(&String::from_utf8_lossy(seen));
    let mut cut = MAX_LOG_LINE.min(clean.len());
    while !clean.is_char_boundary(cut) {
        cut -= 1;
    }
    clean.truncate(cut);
    clean.push_str(&format!(" … [a line of {} bytes, cut]\n", line.len()));
    clean
}

impl<W: io::Write> io::Write for ScrubbedWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write_all(clean_line(buf).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Moves `file` to `file.1` (and older ones up to `file.keep`) once it exceeds `limit`.
/// Failures are ignored: a log that cannot rotate keeps growing rather than stopping the app.
/// Opens the log file for appending, private to the user.
fn open_log(path: &Path) -> io::Result<fs::File> {
    let mut open = fs::OpenOptions::new();
    open.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        open.mode(conduit_files::PRIVATE_FILE_MODE);
    }
    open.open(path)
}

/// The log file, moved aside and begun afresh once it passes its limit while the process
/// runs, not only when a process starts: a process that logs in a loop for days (a
/// server failing the same way again and again) must not fill the disk.
struct RotatingFile {
    path: std::path::PathBuf,
    file: fs::File,
    /// The file's size as this process knows it.
    written: u64,
    limit: u64,
    keep: u32,
}

impl RotatingFile {
    fn open(path: &Path, limit: u64, keep: u32) -> io::Result<Self> {
        let file = open_log(path)?;
        let written = file.metadata().map(|meta| meta.len()).unwrap_or(0);
        Ok(Self {
            path: path.to_owned(),
            file,
            written,
            limit,
            keep,
        })
    }

    /// Moves the file aside and opens a new one; if that fails, the old handle stays and
    /// the next try comes after another limit's worth of lines.
    fn rotate(&mut self) {
        rotate_if_large(&self.path, self.limit, self.keep);
        match open_log(&self.path) {
            Ok(file) => {
                self.written = file.metadata().map(|meta| meta.len()).unwrap_or(0);
                self.file = file;
            }
            Err(_) => self.written = 0,
        }
    }
}

impl io::Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.written > self.limit {
            self.rotate();
        }
        let written = self.file.write(buf)?;
        self.written += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

fn rotate_if_large(file: &Path, limit: u64, keep: u32) {
    let Ok(meta) = fs::metadata(file) else {
        return;
    };
    if meta.len() <= limit || keep == 0 {
        return;
    }
    let numbered = |n: u32| {
        let mut name = file.as_os_str().to_owned();
        name.push(format!(".{n}"));
        std::path::PathBuf::from(name)
    };
    let _ = fs::remove_file(numbered(keep));
    for n in (1..keep).rev() {
        let _ = fs::rename(numbered(n), numbered(n + 1));
    }
    let _ = fs::rename(file, numbered(1));
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    /// A process that logs past the limit moves the file aside while it runs and goes on
    /// in a new one; the oldest moved-aside file goes once `keep` are kept.
    #[test]
    fn a_log_past_its_limit_is_moved_aside_while_the_process_runs() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conduit.log");
        let mut log = RotatingFile::open(&path, 100, 2).unwrap();
        let line = [b'x'; 60];
        for _ in 0..8 {
            log.write_all(&line).unwrap();
        }
        log.flush().unwrap();
        let size = |name: &str| fs::metadata(dir.path().join(name)).map(|m| m.len()).ok();
        // 8 lines of 60 bytes with a 100-byte limit: files of 120 bytes, the newest last.
        assert_eq!(size("conduit.log"), Some(120));
        assert_eq!(size("conduit.log.1"), Some(120));
        assert_eq!(size("conduit.log.2"), Some(120));
        assert_eq!(size("conduit.log.3"), None, "only two are kept");
    }

    #[test]
    fn the_log_filter_reads_conduit_log_and_says_why_not() {
        let (default, problem) = file_filter(None);
        assert!(problem.is_none());
        assert!(default.would_enable("conduit_host", &Level::INFO));
        assert!(!default.would_enable("conduit_host", &Level::DEBUG));
        assert!(!default.would_enable("wry::webview", &Level::INFO));

        let (chosen, problem) = file_filter(Some("warn,conduit_mcp=debug"));
        assert!(problem.is_none());
        assert!(chosen.would_enable("conduit_mcp::client", &Level::DEBUG));
        assert!(!chosen.would_enable("conduit_host", &Level::INFO));

        let (fallback, problem) = file_filter(Some("conduit=loud"));
        assert!(
            problem
                .unwrap()
                .contains("\"conduit=loud\" is not a filter")
        );
        assert!(fallback.would_enable("conduit_host", &Level::INFO));
    }

    #[test]
    fn a_large_log_is_moved_aside_and_the_oldest_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("conduit.log");
        fs::write(&log, "current-but-large").unwrap();
        fs::write(dir.path().join("conduit.log.1"), "one").unwrap();
        fs::write(dir.path().join("conduit.log.2"), "two").unwrap();

        rotate_if_large(&log, 4, 2);

        assert!(!log.exists());
        let read = |name: &str| fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(read("conduit.log.1"), "current-but-large");
        assert_eq!(read("conduit.log.2"), "one");
        assert!(!dir.path().join("conduit.log.3").exists());
    }

    #[test]
    fn a_huge_line_is_cut_and_a_secret_across_the_cut_is_masked_whole() {
        let secret = "sk-ant-cut-test-0123456789abcdefghij";
        conduit_mcp::redact::keep_out_of_logs(
            &conduit_mcp::redact::Redactor::default().with_named_secrets([secret.to_owned()]),
        );
        let mut line = "a".repeat(MAX_LOG_LINE - 10);
        line.push_str(secret);
        line.push_str(&"b".repeat(200 * 1024 * 1024));
        line.push('\n');
        let clean = clean_line(line.as_bytes());
        assert!(clean.len() < MAX_LOG_LINE + 100, "{}", clean.len());
        assert!(clean.ends_with(&format!("[a line of {} bytes, cut]\n", line.len())));
        assert!(!clean.contains("sk-ant-cu"), "no part of the secret stays");
        let short = format!("short {secret}\n");
        assert_eq!(
            clean_line(short.as_bytes()),
            conduit_mcp::redact::scrub_log_line(&short)
        );
        assert!(!clean_line(short.as_bytes()).contains(secret));
        let wide = "é".repeat(MAX_LOG_LINE);
        assert!(
            clean_line(wide.as_bytes()).starts_with("éé"),
            "cut at a character"
        );
    }

    #[test]
    fn a_small_log_stays() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("conduit.log");
        fs::write(&log, "small").unwrap();
        rotate_if_large(&log, 1024, 2);
        assert_eq!(fs::read_to_string(&log).unwrap(), "small");
    }

    #[test]
    fn init_writes_the_log_file_under_the_data_folder() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::under_home(dir.path().to_owned(), None);
        let guard = init(&paths, LogOptions::default()).unwrap();
        tracing::info!(marker = "written-by-test", "hello");
        // A burst of three queues' worth from four threads: every line is written.
        let per_thread = LOG_BUFFER_LINES * 3 / 4;
        std::thread::scope(|scope| {
            for thread in 0..4 {
                scope.spawn(move || {
                    for line in 0..per_thread {
                        tracing::info!(thread, line, "burst");
                    }
                });
            }
        });
        drop(guard);
        // Dropping the guard waits a while for the writer, not always to the end.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let text = loop {
            let text = fs::read_to_string(&paths.log_file).unwrap();
            if text.matches(" burst").count() >= per_thread * 4 {
                break text;
            }
            assert!(std::time::Instant::now() < deadline, "lines were lost");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(text.contains("written-by-test"), "{text}");
        assert_eq!(text.matches(" burst").count(), per_thread * 4);
    }
}
