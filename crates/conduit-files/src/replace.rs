//! Replacing a file whole: the new bytes through a synced temporary file, swapped into
//! place, the file swapped out kept as the newest of a few backups, and the folder synced.

use std::fs;
use std::path::{Path, PathBuf};

use crate::{
    PRIVATE_FILE_MODE, create_private_dir, fingerprint, folder_of, permissions_of,
    resolve_symlinks, set_mode,
};

/// How many earlier versions of a file a write keeps: `<name>.bak` (the one just
/// replaced), then `<name>.bak.1` to `<name>.bak.4`, older each. One was too few: a raw
/// replace and a toggle after it left nothing of the file the user had made.
pub const BACKUP_GENERATIONS: usize = 5;

/// Why a file was not replaced.
#[derive(Debug, thiserror::Error)]
pub enum ReplaceError {
    /// The file is not the one the caller read: someone else wrote it since. It is left
    /// as they wrote it.
    #[error("the file changed since it was read")]
    Changed,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What a replace keeps of the file it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// The replaced file becomes the newest backup.
    Backups,
    /// Nothing (a file of secrets: no copy of old values is left behind).
    Nothing,
}

/// Replaces the file `path` names (through symlinks) with `bytes`. `expected` is the
/// fingerprint the file must still have (`Some(None)`: there must be no file); `None`
/// replaces whatever is there. A new file gets `new_mode`; an existing one keeps its own,
/// and one its owner may not write is refused.
pub(crate) fn replace(
    path: &Path,
    bytes: &[u8],
    new_mode: u32,
    keep: Keep,
    expected: Option<Option<&str>>,
) -> Result<(), ReplaceError> {
    let target = resolve_symlinks(path)?;
    let existing_mode = permissions_of(&target);
    if let Some(mode) = existing_mode
        && mode & 0o200 == 0
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} is read-only (its owner may not write it), so Conduit leaves it as it is",
                target.display()
            ),
        )
        .into());
    }
    refuse_hard_links(&target)?;
    // Only a regular file is replaced: a FIFO or a device in its place would be swapped
    // out, then read forever (or read from) by the check.
    if fs::symlink_metadata(&target).is_ok_and(|meta| !meta.is_file()) {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file, so Conduit does not write it",
            target.display()
        ))
        .into());
    }
    let dir = folder_of(&target);
    // A file of secrets is private whatever its mode was; others keep theirs.
    let mode = match keep {
        Keep::Nothing => PRIVATE_FILE_MODE,
        Keep::Backups => existing_mode.unwrap_or(new_mode),
    };
    let ours = crate::fingerprint_bytes(bytes);
    let fresh = fresh_file(&target, bytes, mode)?;
    let exists = fs::symlink_metadata(&target).is_ok();
    if !exists {
        if matches!(expected, Some(Some(_))) {
            return Err(ReplaceError::Changed);
        }
        if expected.is_some() {
            // A file made meanwhile is someone else's: not replaced.
            match fresh.persist_noclobber(&target) {
                Ok(_) => {}
                Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(ReplaceError::Changed);
                }
                Err(e) => return Err(e.error.into()),
            }
        } else {
            fresh.persist(&target).map_err(|e| e.error)?;
        }
        sync_folder(&dir);
        return Ok(());
    }
    let fresh = fresh.into_temp_path();
    match exchange(&fresh, &target) {
        Ok(()) => {
            // `fresh` now names the file that was replaced: what the check reads is
            // exactly what was swapped out, with no moment between check and replace.
            let checked = match expected {
                Some(expected) => fingerprint(&fresh).map(|now| now.as_deref() == expected),
                None => Ok(true),
            };
            match checked {
                Ok(true) => {}
                Ok(false) => return Err(put_back(fresh, &target, &ours, ReplaceError::Changed)),
                Err(e) => return Err(put_back(fresh, &target, &ours, e.into())),
            }
            if keep == Keep::Backups {
                // Either the file before becomes the newest backup, or the write is undone:
                // a write is never reported failed while it stands, nor done without it.
                let kept = rotate_backups(&target, &fresh)
                    .and_then(|()| set_mode(&fresh, PRIVATE_FILE_MODE))
                    .and_then(|()| fs::rename(&fresh, backup_name(&target, 0)));
                if let Err(e) = kept {
                    return Err(put_back(fresh, &target, &ours, e.into()));
                }
                // Renamed away: nothing is left at the temporary name to remove.
                let _ = fresh.keep();
            }
            // Without backups, dropping `fresh` removes the file before.
        }
        // Where the file system cannot swap two names, read and then rename: an outside
        // write in between is lost, as with any editor.
        Err(e) if cannot_exchange(&e) => {
            let previous = crate::read_regular_file(&target, crate::MAX_FINGERPRINTED)?;
            if let Some(expected) = expected
                && Some(crate::fingerprint_bytes(&previous)).as_deref() != expected
            {
                return Err(ReplaceError::Changed);
            }
            if keep == Keep::Backups {
                let copy = fresh_file(&target, &previous, PRIVATE_FILE_MODE)?.into_temp_path();
                rotate_backups(&target, &copy)?;
                copy.persist(backup_name(&target, 0)).map_err(|e| e.error)?;
            }
            fresh.persist(&target).map_err(|e| e.error)?;
        }
        Err(e) => return Err(e.into()),
    }
    sync_folder(&dir);
    Ok(())
}

/// Swaps the file before (now at `swapped`) back into `target` after `why` stopped the
/// write, so nothing is lost. What comes back at `swapped` is removed only if it is this
/// write's own file (`ours`, its fingerprint): an editor may have saved over ours in the
/// meantime, and that save is then kept under the temporary name, the error saying
/// where. Where the swap back fails, the file before is kept under its temporary name.
fn put_back(
    swapped: tempfile::TempPath,
    target: &Path,
    ours: &str,
    why: ReplaceError,
) -> ReplaceError {
    let keep = |swapped: tempfile::TempPath| {
        swapped
            .keep()
            .map_or_else(|k| k.error.to_string(), |p| p.display().to_string())
    };
    match exchange(&swapped, target) {
        Ok(()) => match fingerprint(&swapped) {
            // Ours: dropping `swapped` removes it.
            Ok(Some(now)) if now == ours => why,
            _ => {
                let kept = keep(swapped);
                std::io::Error::other(format!(
                    "{why}; {} was saved again meanwhile: that save is kept as {kept}",
                    target.display()
                ))
                .into()
            }
        },
        Err(back) => {
            let kept = keep(swapped);
            std::io::Error::other(format!(
                "{why}; and the file before could not be put back at {} ({back}): it is kept as {kept}",
                target.display()
            ))
            .into()
        }
    }
}

/// Refuses a file with other names (hard links): replacing it whole would leave the
/// other names with the old file, as another app sharing it would then read.
#[cfg(unix)]
fn refuse_hard_links(target: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    match fs::metadata(target) {
        Ok(meta) if meta.is_file() && meta.nlink() > 1 => Err(std::io::Error::other(format!(
            "{} has {} names (hard links), and Conduit replaces a file whole, which would \
             leave the other names with the old file: make the others symbolic links to it",
            target.display(),
            meta.nlink()
        ))),
        _ => Ok(()),
    }
}

#[cfg(not(unix))]
fn refuse_hard_links(_target: &Path) -> std::io::Result<()> {
    Ok(())
}

/// `<name>.bak` for 0, `<name>.bak.<n>` after it.
pub(crate) fn backup_name(target: &Path, generation: usize) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    if generation == 0 {
        target.with_file_name(format!("{name}.bak"))
    } else {
        target.with_file_name(format!("{name}.bak.{generation}"))
    }
}

/// Moves the backups one older to make room for the file `replaced` at `.bak`, unless
/// the newest already holds the same bytes (writing the same file twice keeps the
/// others). Only the unbroken run from `.bak` moves, so a missing generation is filled,
/// never a kept one overwritten; past the last generation the oldest goes.
fn rotate_backups(target: &Path, replaced: &Path) -> std::io::Result<()> {
    let newest = backup_name(target, 0);
    if fs::symlink_metadata(&newest).is_err() {
        return Ok(());
    }
    let newest_is_regular = fs::symlink_metadata(&newest).is_ok_and(|m| m.is_file());
    if newest_is_regular && fingerprint(&newest)? == fingerprint(replaced)? {
        // Replaced by the rename that follows: the same bytes.
        return Ok(());
    }
    let run = (0..BACKUP_GENERATIONS)
        .take_while(|&generation| fs::symlink_metadata(backup_name(target, generation)).is_ok())
        .count();
    // Renaming moves a planted symlink itself, never what it points to.
    for generation in (1..=run.min(BACKUP_GENERATIONS - 1)).rev() {
        fs::rename(
            backup_name(target, generation - 1),
            backup_name(target, generation),
        )?;
    }
    Ok(())
}

/// A fresh, exclusively created temporary file beside `target` holding `bytes`, synced.
pub(crate) fn fresh_file(
    target: &Path,
    bytes: &[u8],
    mode: u32,
) -> std::io::Result<tempfile::NamedTempFile> {
    use std::io::Write as _;
    let dir = folder_of(target);
    create_private_dir(&dir)?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let mut fresh = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(&dir)?;
    set_mode(fresh.path(), mode)?;
    fresh.write_all(bytes)?;
    fresh.as_file().sync_all()?;
    Ok(fresh)
}

/// Swaps the names `a` and `b` in one step.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).map_err(std::io::Error::from)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn exchange(_a: &Path, _b: &Path) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

/// Whether `error` says the file system (or the system) cannot swap names.
fn cannot_exchange(error: &std::io::Error) -> bool {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let code = error.raw_os_error();
        if code == Some(rustix::io::Errno::INVAL.raw_os_error())
            || code == Some(rustix::io::Errno::NOSYS.raw_os_error())
            || code == Some(rustix::io::Errno::OPNOTSUPP.raw_os_error())
        {
            return true;
        }
    }
    error.kind() == std::io::ErrorKind::Unsupported
}

/// Syncs the folder so the renames in it survive a power loss, not only the files' bytes.
/// The write stands either way, so a failure is logged, not returned (some file systems
/// cannot sync a folder at all).
#[cfg(unix)]
fn sync_folder(dir: &Path) {
    match fs::File::open(dir).and_then(|folder| folder.sync_all()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {}
        Err(error) => {
            tracing::warn!(%error, folder = %dir.display(), "the folder could not be synced after a write");
        }
    }
}

#[cfg(not(unix))]
fn sync_folder(_dir: &Path) {}
