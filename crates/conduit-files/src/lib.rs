//! Writing the user's files safely: through a temporary file and a rename, with a backup
//! of what was there, and the file's permissions kept; and fingerprints that tell whether
//! a file changed since it was read; and following outside edits of them
//! ([`watch_folder`]); and leases that tell whether another process still runs
//! ([`Lease`]).
//!
//! Place in the crate graph: a leaf with no Conduit dependency; `conduit-mcp` (the
//! `mcpServers` file) and `conduit-host` (settings, secrets) write through it.

mod held;
mod lease;
mod replace;

pub use held::HeldFolder;
pub use lease::{Lease, any_lease_held, lease_held, sweep_leases};
pub use replace::{BACKUP_GENERATIONS, ReplaceError};

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Unix permissions of every folder Conduit creates for itself: its user's only.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// Unix permissions of every file Conduit writes: its user's only.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// How many symlinks a write follows before it gives up (as Linux's `ELOOP` does).
const MAX_SYMLINKS: usize = 40;

/// Creates `dir` and its missing parents; the folders this creates are private (0700).
/// Folders that already exist keep their permissions.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(PRIVATE_DIR_MODE);
    }
    builder.create(dir)
}

/// A running folder watch; dropping it stops watching (and its settling thread).
pub struct FolderWatch {
    _watcher: notify::RecommendedWatcher,
}

impl std::fmt::Debug for FolderWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FolderWatch")
    }
}

/// Why a folder cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("the folder cannot be watched: {0}")]
    Watch(#[from] notify::Error),
    #[error("the folder cannot be made: {0}")]
    Folder(#[from] std::io::Error),
    #[error("the folder watch cannot start its thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// How many settling periods a burst of changes may last before it is reported anyway:
/// a file written more often than `settle` (the history during a fast tool loop) is still
/// heard every so often.
const MOST_SETTLES: u32 = 10;

/// Whether an event says a file may have changed. Opening or reading a file changes
/// nothing, and counting it made every read of a watched file (Conduit's own, when it
/// applies the change) the cause of the next one: a loop that kept the app busy at idle.
/// A file closed after writing did change.
fn is_change(kind: &notify::EventKind) -> bool {
    use notify::EventKind;
    use notify::event::{AccessKind, AccessMode};
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// Watches `dir` (not its subfolders; editors replace files by renaming, so a folder is
/// watched rather than a file) and calls `on_change`, on the watch's own thread, once
/// changes to files whose name `ours` accepts have settled for `settle`. A failure to
/// read the events also calls it: the caller reads again rather than miss an edit.
pub fn watch_folder(
    dir: &Path,
    settle: std::time::Duration,
    ours: impl Fn(&std::ffi::OsStr) -> bool + Send + 'static,
    mut on_change: impl FnMut() + Send + 'static,
) -> Result<FolderWatch, WatchError> {
    use notify::Watcher;
    use std::sync::mpsc::{RecvTimeoutError, channel};
    let (changed, changes) = channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let touched = event.map_or(true, |event| {
            // Events were lost (the kernel's queue overflowed): read again.
            event.need_rescan()
                || is_change(&event.kind)
                    && event
                        .paths
                        .iter()
                        .any(|path| path.file_name().is_some_and(&ours))
        });
        if touched {
            // The settling thread has ended only when the watch is being dropped.
            let _ = changed.send(());
        }
    })?;
    watcher.watch(dir, notify::RecursiveMode::NonRecursive)?;
    std::thread::Builder::new()
        .name("folder-watch".into())
        .spawn(move || {
            // A change, then quiet for `settle`: one call for an editor's burst of events
            // (or for a burst that goes on, one every `MOST_SETTLES` periods).
            while changes.recv().is_ok() {
                let deadline = std::time::Instant::now() + settle * MOST_SETTLES;
                loop {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    match changes.recv_timeout(settle.min(left)) {
                        Ok(()) if !left.is_zero() => {}
                        Ok(()) | Err(RecvTimeoutError::Timeout) => break,
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
                on_change();
            }
        })
        .map_err(WatchError::Thread)?;
    Ok(FolderWatch { _watcher: watcher })
}

/// A running watch of one file ([`watch_file`]); dropping it stops watching.
pub struct FileWatch {
    _link: FolderWatch,
    _target: Arc<parking_lot::Mutex<Option<(PathBuf, FolderWatch)>>>,
}

impl std::fmt::Debug for FileWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FileWatch")
    }
}

/// What a file watch calls on a change.
type OnChange = Arc<dyn Fn() + Send + Sync>;

/// Watches the file `path` as [`watch_folder`] watches a folder, and where `path` is a
/// symlink (a config kept in a dotfiles folder), the file it points to as well: writes
/// land on the target, in another folder, which watching `path`'s folder alone never
/// hears. When the link itself changes, the file it now points to is watched instead.
/// (Of a chain of links, the folders of the first link and of the final file are watched:
/// a link in between that is pointed elsewhere is heard at the first link's next change.)
pub fn watch_file(
    path: &Path,
    settle: std::time::Duration,
    on_change: impl Fn() + Send + Sync + 'static,
) -> Result<FileWatch, WatchError> {
    let on_change: OnChange = Arc::new(on_change);
    let target = Arc::new(parking_lot::Mutex::new(None));
    // A link whose target cannot be watched yet (its folder not there: a dotfiles folder
    // not cloned, a drive not mounted) leaves the link's own folder watched: the link's
    // next change tries again.
    if let Err(error) = follow_link(path, settle, &target, &on_change) {
        tracing::warn!(%error, file = %path.display(), "the file a symlink points to cannot be watched yet");
    }
    let dir = folder_of(path);
    fs::create_dir_all(&dir)?;
    let name = path.file_name().map(std::ffi::OsStr::to_owned);
    let link = {
        let (path, target, on_change) = (path.to_owned(), target.clone(), on_change.clone());
        watch_folder(
            &dir,
            settle,
            move |changed| Some(changed) == name.as_deref(),
            move || {
                // A link that now points to a folder that cannot be watched leaves only
                // the link's own folder watched; its next change tries again.
                if follow_link(&path, settle, &target, &on_change).is_err() {
                    *target.lock() = None;
                }
                on_change();
            },
        )?
    };
    Ok(FileWatch {
        _link: link,
        _target: target,
    })
}

/// Watches the file `path` finally names, unless that is `path` itself or already
/// watched.
fn follow_link(
    path: &Path,
    settle: std::time::Duration,
    slot: &parking_lot::Mutex<Option<(PathBuf, FolderWatch)>>,
    on_change: &OnChange,
) -> Result<(), WatchError> {
    let target = resolve_symlinks(path)?;
    let mut slot = slot.lock();
    if target == path {
        *slot = None;
        return Ok(());
    }
    if slot.as_ref().is_some_and(|(watched, _)| *watched == target) {
        return Ok(());
    }
    let name = target.file_name().map(std::ffi::OsStr::to_owned);
    let on_change = on_change.clone();
    let watch = watch_folder(
        &folder_of(&target),
        settle,
        move |changed| Some(changed) == name.as_deref(),
        move || on_change(),
    )?;
    *slot = Some((target, watch));
    Ok(())
}

/// Creates `dir` if needed and makes it private (0700) even if it existed: for the
/// folders that are Conduit's own (data, config, media, logs).
pub fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    create_private_dir(dir)?;
    set_mode(dir, PRIVATE_DIR_MODE)
}

/// Makes an existing file private (0600); a missing file is fine.
pub fn make_private(path: &Path) -> std::io::Result<()> {
    match set_mode(path, PRIVATE_FILE_MODE) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Replaces `path` with `bytes` atomically. The previous content, if any, is kept as
/// `<path>.bak` (and the backups before it as `<path>.bak.1` to `.bak.4`,
/// [`BACKUP_GENERATIONS`]). A new file gets `new_mode` (Unix permissions); an existing one
/// keeps its own, and one its owner may not write is refused.
///
/// A symlink at `path` is written through: its target gets the bytes and the link stays.
/// The temporary file is a fresh file with a random name, created exclusively and swapped
/// into place; the backups are renamed, so a planted file or symlink at a predictable name
/// (a `.tmp` or a `.bak`) is replaced, never followed. The folder is synced after.
pub fn write_atomically(path: &Path, bytes: &[u8], new_mode: u32) -> std::io::Result<()> {
    replace::replace(path, bytes, new_mode, replace::Keep::Backups, None).map_err(|e| match e {
        ReplaceError::Io(e) => e,
        ReplaceError::Changed => std::io::Error::other(e),
    })
}

/// [`write_atomically`] only if the file is still the one whose [`fingerprint`] was
/// `expected` (`None`: there was no file). On Linux the check reads the very file the
/// write swapped out, and a file someone else wrote since is swapped back, so an editor's
/// save is never lost between the check and the write. Two such writes in this process
/// take turns: where the file system cannot swap two files in one step (macOS, Windows,
/// NFS, some FUSE mounts) the check and the write are two steps, and two writes both
/// passing the check would lose the first.
pub fn replace_if_unchanged(
    path: &Path,
    bytes: &[u8],
    new_mode: u32,
    expected: Option<&str>,
) -> Result<(), ReplaceError> {
    static CHECKED_WRITES: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = CHECKED_WRITES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    replace::replace(
        path,
        bytes,
        new_mode,
        replace::Keep::Backups,
        Some(expected),
    )
}

/// [`write_atomically`] for a file of secrets: private (0600), and no backup, so no copy
/// of old values is left behind.
pub fn write_secrets_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace::replace(path, bytes, PRIVATE_FILE_MODE, replace::Keep::Nothing, None).map_err(|e| {
        match e {
            ReplaceError::Io(e) => e,
            ReplaceError::Changed => std::io::Error::other(e),
        }
    })
}

/// Takes the advisory lock on `<path>.lock`, waiting for another process that holds it: a
/// file beside `path`, since `path` itself is replaced by a rename on every write. For a
/// read, change and write of a file that several processes change (the settings, the
/// secrets file); released when the returned file is dropped.
pub fn lock_beside(path: &Path) -> std::io::Result<fs::File> {
    let file = lock_file_beside(path)?;
    file.lock()?;
    Ok(file)
}

/// [`lock_beside`], waiting at most `patience` for the process that holds it (one that
/// hangs holding it must not hang this one): after that, a `TimedOut` error.
pub fn lock_beside_within(path: &Path, patience: std::time::Duration) -> std::io::Result<fs::File> {
    let file = lock_file_beside(path)?;
    let until = std::time::Instant::now() + patience;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(fs::TryLockError::WouldBlock) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "another process held {}.lock for more than {} s",
                        path.display(),
                        patience.as_secs()
                    ),
                ));
            }
            Err(fs::TryLockError::Error(error)) => return Err(error),
        }
    }
}

/// `<path>.lock`, opened (created 0600 in a private folder if needed), not locked yet.
fn lock_file_beside(path: &Path) -> std::io::Result<fs::File> {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let lock_path = PathBuf::from(name);
    create_private_dir(&folder_of(&lock_path))?;
    let mut options = fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, PRIVATE_FILE_MODE);
    options.open(&lock_path)
}

/// Writes `bytes` to `path` through a random temporary file and a rename, without a
/// backup: for files named by their content (media) and exports. The file gets `mode`.
pub fn write_new_atomically(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    replace::fresh_file(path, bytes, mode)?
        .persist(path)
        .map_err(|e| e.error)?;
    Ok(())
}

/// The folder a file is in (`.` for a bare name).
fn folder_of(path: &Path) -> PathBuf {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The file `path` finally names after following symlinks (the target need not exist).
fn resolve_symlinks(path: &Path) -> std::io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_SYMLINKS {
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = fs::read_link(&current)?;
                current = folder_of(&current).join(link);
            }
            Ok(_) => return Ok(current),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(current),
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(format!(
        "{} is a chain of more than {MAX_SYMLINKS} symlinks",
        path.display()
    )))
}

/// The most bytes a file may hold to be fingerprinted: the files Conduit replaces are
/// settings of a few KiB.
pub(crate) const MAX_FINGERPRINTED: u64 = 64 * 1024 * 1024;

/// A fingerprint of a file's bytes (hex SHA-256), or `None` when there is no file. Only a
/// regular file is read (a FIFO put in its place would hold the read, and the write
/// waiting on it, forever).
pub fn fingerprint(path: &Path) -> std::io::Result<Option<String>> {
    match read_regular_file(path, MAX_FINGERPRINTED) {
        Ok(bytes) => Ok(Some(fingerprint_bytes(&bytes))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads a file Conduit keeps its settings in (the `mcpServers` file, say), refusing what
/// is not a regular file (a FIFO put in its place would hold the read forever) or is larger
/// than `max_bytes` (one of gigabytes would be read whole, then shown). A missing file is
/// `NotFound`, as with `fs::read`.
pub fn read_regular_file(path: &Path, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut options = fs::OpenOptions::new();
    options.read(true);
    // Opened without waiting for a writer, then what was opened is checked.
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    }
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(std::io::Error::other(format!(
            "{} is larger than {} KiB, more than Conduit reads of it",
            path.display(),
            max_bytes / 1024
        )));
    }
    Ok(bytes)
}

/// The fingerprint of bytes already read.
pub fn fingerprint_bytes(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex(&Sha256::digest(bytes))
}

/// A fingerprint of `bytes` keyed by `key` (hex HMAC-SHA-256, RFC 2104): what a page may
/// hold of a file with secrets in it. An unkeyed hash would let a script test guesses of a
/// short secret against it offline; without the key it can only compare two fingerprints.
pub fn keyed_fingerprint(key: &[u8; 32], bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    // The key is shorter than SHA-256's 64-byte block: padded with zeros, as RFC 2104 says.
    let mut padded = [0u8; 64];
    padded[..key.len()].copy_from_slice(key);
    let inner_pad: Vec<u8> = padded.iter().map(|b| b ^ 0x36).collect();
    let outer_pad: Vec<u8> = padded.iter().map(|b| b ^ 0x5c).collect();
    let inner = Sha256::new()
        .chain_update(&inner_pad)
        .chain_update(bytes)
        .finalize();
    let outer = Sha256::new()
        .chain_update(&outer_pad)
        .chain_update(inner)
        .finalize();
    hex(&outer)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// A JSON error's message without the "at line L column C" that callers report apart.
pub fn json_error_message(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    text.strip_suffix(&position).unwrap_or(&text).to_owned()
}

#[cfg(unix)]
fn permissions_of(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn permissions_of(_path: &Path) -> Option<u32> {
    None
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_settings_file_is_read_only_when_it_is_a_regular_file_of_bounded_size() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mcp.json");
        fs::write(&file, b"{}").unwrap();
        assert_eq!(read_regular_file(&file, 2).unwrap(), b"{}");
        let err = read_regular_file(&file, 1).unwrap_err();
        assert!(err.to_string().contains("is larger than 0 KiB"), "{err}");
        assert_eq!(
            read_regular_file(&dir.path().join("none"), 2)
                .unwrap_err()
                .kind(),
            std::io::ErrorKind::NotFound
        );
        // A FIFO in its place: refused at once, not waited on, and never written.
        use std::os::unix::fs::FileTypeExt;
        let fifo = dir.path().join("fifo.json");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let err = read_regular_file(&fifo, 1024).unwrap_err();
        assert!(err.to_string().contains("is not a regular file"), "{err}");
        let err = replace_if_unchanged(&fifo, b"{}", 0o600, None).unwrap_err();
        assert!(err.to_string().contains("is not a regular file"), "{err}");
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn a_write_keeps_a_backup_and_the_existing_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        write_atomically(&path, b"one", 0o600).unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        write_atomically(&path, b"two", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(
            fs::read_to_string(dir.path().join("settings.json.bak")).unwrap(),
            "one"
        );
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
    }

    #[allow(clippy::unwrap_used)]
    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_symlinked_backup_is_replaced_and_its_target_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        let path = dir.path().join("settings.json");
        fs::write(&path, "one").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("settings.json.bak")).unwrap();
        write_atomically(&path, b"two", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        let backup = dir.path().join("settings.json.bak");
        assert!(
            !fs::symlink_metadata(&backup)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&backup).unwrap(), "one");
        assert_eq!(mode(&backup), 0o600);
    }

    #[test]
    fn a_symlinked_file_is_written_through_and_stays_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let dotfiles = dir.path().join("dotfiles");
        fs::create_dir(&dotfiles).unwrap();
        let real = dotfiles.join("mcp.json");
        fs::write(&real, "old").unwrap();
        let link = dir.path().join("mcp_servers.json");
        std::os::unix::fs::symlink("dotfiles/mcp.json", &link).unwrap();
        write_atomically(&link, b"new", 0o600).unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
        assert_eq!(
            fs::read_to_string(dotfiles.join("mcp.json.bak")).unwrap(),
            "old"
        );
        assert!(!dir.path().join("mcp_servers.json.bak").exists());
    }

    #[test]
    fn the_temporary_name_is_not_predictable() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        // The names a predictable scheme would use: `.<name>.tmp-<pid>` and friends.
        let planted = dir
            .path()
            .join(format!(".settings.json.tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let path = dir.path().join("settings.json");
        write_atomically(&path, b"one", 0o600).unwrap();
        write_atomically(&path, b"two", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        // Nothing but the file, its backup and what was planted is left behind.
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let planted_name = planted.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            names,
            [
                planted_name.as_str(),
                "settings.json",
                "settings.json.bak",
                "victim"
            ]
        );
    }

    #[test]
    fn five_earlier_versions_are_kept_and_writing_the_same_bytes_twice_keeps_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        for n in 1..=7 {
            write_atomically(&path, format!("v{n}").as_bytes(), 0o600).unwrap();
        }
        assert_eq!(fs::read_to_string(&path).unwrap(), "v7");
        assert_eq!(backup_texts(&path), ["v6", "v5", "v4", "v3", "v2"]);
        assert!(!replace::backup_name(&path, BACKUP_GENERATIONS).exists());
        // The same file written again: its backup is already the newest, nothing moves.
        write_atomically(&path, b"v7", 0o600).unwrap();
        write_atomically(&path, b"v7", 0o600).unwrap();
        assert_eq!(backup_texts(&path), ["v7", "v6", "v5", "v4", "v3"]);
        assert_eq!(mode(&replace::backup_name(&path, 3)), 0o600);
        assert_eq!(temporaries(dir.path()), 0);
    }

    /// A write refused because the file changed keeps every backup where it was; a
    /// missing generation is filled by the next write, and none after it is overwritten.
    #[test]
    fn a_refused_write_keeps_the_backups_and_a_gap_is_filled_not_pushed_through() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        for n in 1..=6 {
            write_atomically(&path, format!("v{n}").as_bytes(), 0o600).unwrap();
        }
        assert_eq!(backup_texts(&path), ["v5", "v4", "v3", "v2", "v1"]);
        let read = fingerprint(&path).unwrap();
        fs::write(&path, "the editor's").unwrap();
        assert!(matches!(
            replace_if_unchanged(&path, b"ours", 0o600, read.as_deref()),
            Err(ReplaceError::Changed)
        ));
        assert_eq!(fs::read_to_string(&path).unwrap(), "the editor's");
        assert_eq!(backup_texts(&path), ["v5", "v4", "v3", "v2", "v1"]);
        assert_eq!(temporaries(dir.path()), 0);
        // A gap (the user deleted .bak.2): the run before it moves into it.
        fs::remove_file(replace::backup_name(&path, 2)).unwrap();
        write_atomically(&path, b"v7", 0o600).unwrap();
        assert_eq!(
            backup_texts(&path),
            ["the editor's", "v5", "v4", "v2", "v1"]
        );
    }

    #[test]
    fn a_file_of_secrets_is_made_private_whatever_its_mode_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.json");
        fs::write(&path, "{}").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        write_secrets_atomically(&path, b"{\"k\": \"v\"}").unwrap();
        assert_eq!(mode(&path), 0o600);
    }

    /// The text of each backup generation of `path`, newest first ("" for a missing one).
    fn backup_texts(path: &Path) -> Vec<String> {
        (0..BACKUP_GENERATIONS)
            .map(|generation| {
                fs::read_to_string(replace::backup_name(path, generation)).unwrap_or_default()
            })
            .collect()
    }

    /// Temporary files left in `dir`.
    #[allow(clippy::unwrap_used)]
    fn temporaries(dir: &Path) -> usize {
        fs::read_dir(dir)
            .unwrap()
            .filter(|entry| {
                entry
                    .as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".tmp")
            })
            .count()
    }

    #[test]
    fn a_file_written_by_someone_else_since_it_was_read_is_left_as_they_wrote_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        write_atomically(&path, b"read", 0o600).unwrap();
        let read = fingerprint(&path).unwrap();
        fs::write(&path, "the editor's").unwrap();
        let refused = replace_if_unchanged(&path, b"ours", 0o600, read.as_deref()).unwrap_err();
        assert!(matches!(refused, ReplaceError::Changed), "{refused:?}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "the editor's");
        assert!(!replace::backup_name(&path, 0).exists());
        assert_eq!(temporaries(dir.path()), 0);
        // Expected missing, found made meanwhile; expected there, found gone.
        let fresh = dir.path().join("new.json");
        fs::write(&fresh, "made meanwhile").unwrap();
        assert!(matches!(
            replace_if_unchanged(&fresh, b"ours", 0o600, None),
            Err(ReplaceError::Changed)
        ));
        assert_eq!(fs::read_to_string(&fresh).unwrap(), "made meanwhile");
        let gone = dir.path().join("gone.json");
        assert!(matches!(
            replace_if_unchanged(&gone, b"ours", 0o600, read.as_deref()),
            Err(ReplaceError::Changed)
        ));
        assert!(!gone.exists());
        // Unchanged: written, the file read kept as the backup.
        let current = fingerprint(&path).unwrap();
        replace_if_unchanged(&path, b"ours", 0o600, current.as_deref()).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "ours");
        assert_eq!(
            fs::read_to_string(replace::backup_name(&path, 0)).unwrap(),
            "the editor's"
        );
    }

    /// An editor saving (by writing a new file and renaming it, as most do) while Conduit
    /// writes: its save is never lost, whichever comes first.
    #[test]
    fn an_editor_saving_at_the_same_moment_never_loses_its_save() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        let mut lost = Vec::new();
        for round in 0..200u64 {
            write_atomically(&path, b"base", 0o600).unwrap();
            let read = fingerprint(&path).unwrap();
            let editor_path = path.clone();
            let editor = std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_micros(round % 7 * 40));
                let staged = editor_path.with_file_name("editor-staging");
                fs::write(&staged, "EDITOR").unwrap();
                fs::rename(&staged, &editor_path).unwrap();
            });
            let ours = replace_if_unchanged(&path, b"ours", 0o600, read.as_deref());
            editor.join().unwrap();
            let now = fs::read_to_string(&path).unwrap();
            match ours {
                Ok(()) | Err(ReplaceError::Changed) if now == "EDITOR" => {}
                other => lost.push((round, format!("{other:?}"), now)),
            }
        }
        assert!(lost.is_empty(), "the editor's save was lost: {lost:?}");
    }

    #[test]
    fn a_file_its_owner_may_not_write_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        fs::write(&path, "locked").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).unwrap();
        let refused = write_atomically(&path, b"ours", 0o600).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(refused.to_string().contains("is read-only"), "{refused}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "locked");
        assert_eq!(temporaries(dir.path()), 0);
    }

    #[test]
    fn a_file_with_other_names_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        fs::write(&path, "shared").unwrap();
        let other = dir.path().join("cursor-mcp.json");
        fs::hard_link(&path, &other).unwrap();
        let refused = write_atomically(&path, b"ours", 0o600).unwrap_err();
        assert!(refused.to_string().contains("hard links"), "{refused}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "shared");
        assert_eq!(fs::read_to_string(&other).unwrap(), "shared");
        assert_eq!(temporaries(dir.path()), 0);
    }

    #[test]
    fn a_file_of_secrets_keeps_no_backup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.json");
        write_secrets_atomically(&path, b"old key").unwrap();
        write_secrets_atomically(&path, b"new key").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new key");
        assert_eq!(mode(&path), 0o600);
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["secrets.json"]);
    }

    #[test]
    fn new_files_and_folders_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b");
        let path = nested.join("media.bin");
        write_new_atomically(&path, b"x", PRIVATE_FILE_MODE).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&nested), 0o700);
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&open).unwrap();
        assert_eq!(mode(&open), 0o700);
    }

    #[test]
    fn fingerprints_change_with_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        assert_eq!(fingerprint(&path).unwrap(), None);
        fs::write(&path, b"a").unwrap();
        let first = fingerprint(&path).unwrap().unwrap();
        assert_eq!(first, fingerprint_bytes(b"a"));
        fs::write(&path, b"b").unwrap();
        assert_ne!(fingerprint(&path).unwrap().unwrap(), first);
    }

    #[test]
    fn a_lock_held_elsewhere_is_waited_for_within_the_patience_given() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sign-ins");
        // Another open file description: as another process's.
        let held = lock_beside(&path).unwrap();
        let waited = lock_beside_within(&path, std::time::Duration::from_millis(100));
        assert_eq!(
            waited.map(drop).unwrap_err().kind(),
            std::io::ErrorKind::TimedOut
        );
        let released = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            drop(held);
        });
        lock_beside_within(&path, std::time::Duration::from_secs(30)).unwrap();
        released.join().unwrap();
    }

    const OPENSSL_HMAC: &str = "4d9d653fcd05f91cd858a20d50c74b604fe38f2cac49d9b0a7099584cf4fb35a";

    #[test]
    fn keyed_fingerprints_are_hmac_sha256() {
        // RFC 4231, test case 2's message with a 32-byte key (0x01..=0x20), checked
        // against `openssl dgst -sha256 -mac HMAC -macopt hexkey:0102…20`.
        let key: [u8; 32] = std::array::from_fn(|i| i as u8 + 1);
        assert_eq!(
            keyed_fingerprint(&key, b"what do ya want for nothing?"),
            OPENSSL_HMAC
        );
        let other: [u8; 32] = std::array::from_fn(|i| i as u8 + 2);
        assert_ne!(
            keyed_fingerprint(&other, b"what do ya want for nothing?"),
            OPENSSL_HMAC
        );
        assert_ne!(
            keyed_fingerprint(&key, b"what do ya want for nothing?"),
            fingerprint_bytes(b"what do ya want for nothing?")
        );
    }

    #[test]
    fn a_watched_folder_reports_edits_of_its_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let (sender, heard) = std::sync::mpsc::channel();
        let _watch = watch_folder(
            dir.path(),
            std::time::Duration::from_millis(50),
            |name| name == "settings.json",
            move || {
                let _ = sender.send(());
            },
        )
        .unwrap();
        fs::write(dir.path().join("other.txt"), "x").unwrap();
        assert!(
            heard
                .recv_timeout(std::time::Duration::from_millis(500))
                .is_err(),
            "another file is not ours"
        );
        write_atomically(&dir.path().join("settings.json"), b"{}", 0o600).unwrap();
        assert!(
            heard
                .recv_timeout(std::time::Duration::from_secs(10))
                .is_ok(),
            "an atomic write (a rename) is heard"
        );
    }

    /// A config kept in a dotfiles folder behind a symlink: a write to it (through the
    /// link, or straight to the file) is heard; after the link is pointed at another
    /// file, that file's writes are heard.
    #[test]
    fn a_symlinked_file_is_watched_where_it_lives() {
        let dir = tempfile::tempdir().unwrap();
        let (config, dotfiles) = (dir.path().join("config"), dir.path().join("dotfiles"));
        fs::create_dir_all(&config).unwrap();
        fs::create_dir_all(&dotfiles).unwrap();
        let (first, second) = (dotfiles.join("mcp.json"), dotfiles.join("other.json"));
        fs::write(&first, "{}").unwrap();
        fs::write(&second, "{}").unwrap();
        let link = config.join("mcp_servers.json");
        std::os::unix::fs::symlink(&first, &link).unwrap();
        let (sender, heard) = std::sync::mpsc::channel();
        let _watch = watch_file(&link, std::time::Duration::from_millis(50), move || {
            let _ = sender.send(());
        })
        .unwrap();
        let wait = |what: &str| {
            assert!(
                heard
                    .recv_timeout(std::time::Duration::from_secs(10))
                    .is_ok(),
                "{what} was not heard"
            );
            while heard
                .recv_timeout(std::time::Duration::from_millis(300))
                .is_ok()
            {}
        };
        write_atomically(&link, b"{\"a\": 1}", 0o600).unwrap();
        wait("a write through the link");
        write_atomically(&first, b"{\"a\": 2}", 0o600).unwrap();
        wait("a write to the file it points to");
        fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&second, &link).unwrap();
        wait("the link pointed elsewhere");
        write_atomically(&second, b"{\"b\": 1}", 0o600).unwrap();
        wait("a write to the file it now points to");
    }

    #[test]
    fn a_burst_of_writes_that_goes_on_is_still_heard_during_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.db");
        let (sender, heard) = std::sync::mpsc::channel();
        let _watch = watch_folder(
            dir.path(),
            std::time::Duration::from_millis(100),
            |name| name == "history.db",
            move || {
                let _ = sender.send(());
            },
        )
        .unwrap();
        // A write every 20 ms for 3 s: never quiet for the settling period.
        let started = std::time::Instant::now();
        let mut heard_during = false;
        while started.elapsed() < std::time::Duration::from_secs(3) {
            fs::write(&path, started.elapsed().as_millis().to_string()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
            heard_during |= heard.try_recv().is_ok();
        }
        assert!(heard_during, "a burst that goes on is heard before it ends");
    }

    #[test]
    fn reading_a_watched_file_is_no_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp_servers.json");
        fs::write(&path, "{}").unwrap();
        let (sender, heard) = std::sync::mpsc::channel();
        let read_again = path.clone();
        // As the app does: each change is applied by reading the file. Were a read a
        // change, this would go on by itself.
        let _watch = watch_folder(
            dir.path(),
            std::time::Duration::from_millis(50),
            |name| name == "mcp_servers.json",
            move || {
                let _ = fs::read(&read_again);
                let _ = sender.send(());
            },
        )
        .unwrap();
        for _ in 0..5 {
            fs::read(&path).unwrap();
        }
        assert!(
            heard
                .recv_timeout(std::time::Duration::from_millis(500))
                .is_err(),
            "reads are no change"
        );
        // An edit in place is one change, applied once; the read that applies it starts
        // nothing more.
        fs::write(&path, "{\"mcpServers\": {}}").unwrap();
        assert!(
            heard
                .recv_timeout(std::time::Duration::from_secs(10))
                .is_ok(),
            "an edit in place is heard"
        );
        assert!(
            heard
                .recv_timeout(std::time::Duration::from_millis(500))
                .is_err(),
            "applying the change is no change"
        );
    }
}
