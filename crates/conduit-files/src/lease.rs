//! Leases that tell another process whether the one that wrote something still runs: a
//! lease is a file in a shared folder that its process keeps an advisory lock on for as
//! long as it lives, and the lock goes with the process however it ends.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The ending of a lease's file, after its id.
const LEASE_SUFFIX: &str = ".lease";
/// The ending of a lease's file while it is being taken (locked, not yet named).
const TAKING_SUFFIX: &str = ".taking";
/// Random characters in an id.
const ID_CHARS: usize = 20;
/// How old a file left half-taken (its process ended between creating and naming it) must
/// be before a sweep removes it.
const TAKING_GRACE: Duration = Duration::from_secs(60);

/// A lease this process holds in a folder of leases, until it is dropped (its file is
/// then removed) or the process ends (its lock is then released, and the next sweep
/// removes the file).
#[derive(Debug)]
pub struct Lease {
    id: String,
    path: PathBuf,
    /// Open for the lease's life: the lock lives as long as the open file.
    _file: fs::File,
}

impl Lease {
    /// Takes a new lease in `dir` (created private if missing).
    pub fn take(dir: &Path) -> io::Result<Self> {
        crate::create_private_dir(dir)?;
        let mut builder = tempfile::Builder::new();
        builder
            .prefix("")
            .suffix(TAKING_SUFFIX)
            .rand_bytes(ID_CHARS);
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(
            crate::PRIVATE_FILE_MODE,
        ));
        let taking = builder.tempfile_in(dir)?;
        // Locked before it is named as a lease, so no one ever finds the lease unlocked
        // and takes its process for ended.
        taking.as_file().try_lock().map_err(io::Error::from)?;
        let id = taking
            .path()
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.strip_suffix(TAKING_SUFFIX))
            .filter(|id| is_lease_id(id))
            .map(str::to_owned)
            .ok_or_else(|| io::Error::other("a new lease's file got an unexpected name"))?;
        let path = dir.join(format!("{id}{LEASE_SUFFIX}"));
        let file = taking.persist_noclobber(&path).map_err(|e| e.error)?;
        Ok(Self {
            id,
            path,
            _file: file,
        })
    }

    /// The lease's id, for others to ask [`lease_held`] about.
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Err(error) = fs::remove_file(&self.path)
            && error.kind() != io::ErrorKind::NotFound
        {
            tracing::debug!(%error, path = %self.path.display(), "a lease's file stays (the next sweep removes it)");
        }
    }
}

/// Whether the lease `id` in `dir` is held by a running process (this one included). An
/// id [`Lease::take`] cannot have made is held by no one: ids are read from places other
/// processes wrote, and must not name another file. A lease found not held is removed.
pub fn lease_held(dir: &Path, id: &str) -> io::Result<bool> {
    if !is_lease_id(id) {
        return Ok(false);
    }
    let path = dir.join(format!("{id}{LEASE_SUFFIX}"));
    let file = match fs::File::open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(error),
    };
    match file.try_lock() {
        Err(fs::TryLockError::WouldBlock) => Ok(true),
        Err(fs::TryLockError::Error(error)) => Err(error),
        Ok(()) => {
            // Its process ended without removing it.
            drop(file);
            if let Err(error) = fs::remove_file(&path)
                && error.kind() != io::ErrorKind::NotFound
            {
                tracing::debug!(%error, path = %path.display(), "an ended process's lease stays");
            }
            Ok(false)
        }
    }
}

/// Whether any lease in `dir` is held by a running process (this one's included, if it
/// holds one there): a missing folder has none. A lease found not held is removed.
pub fn any_lease_held(dir: &Path) -> io::Result<bool> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(error),
    };
    for entry in entries {
        let name = entry?.file_name();
        if let Some(id) = name
            .to_str()
            .and_then(|name| name.strip_suffix(LEASE_SUFFIX))
            && lease_held(dir, id)?
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Removes the leases in `dir` whose processes ended without removing them, and files left
/// half-taken more than a minute ago; never `own` (this process's lease: where the file
/// system lends `flock` the process-wide POSIX locks, as NFS does, this process's own
/// check would succeed, and closing it would drop its lock). A missing folder has none.
/// One file that cannot be checked does not stop the others: the first error is reported.
pub fn sweep_leases(dir: &Path, own: Option<&Lease>) -> io::Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    let mut first_error = None;
    for entry in entries {
        if let Err(error) = sweep_entry(dir, entry, own) {
            first_error.get_or_insert(error);
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn sweep_entry(dir: &Path, entry: io::Result<fs::DirEntry>, own: Option<&Lease>) -> io::Result<()> {
    let entry = entry?;
    let name = entry.file_name();
    let Some(name) = name.to_str() else {
        return Ok(());
    };
    if let Some(id) = name.strip_suffix(LEASE_SUFFIX) {
        if own.is_none_or(|own| own.id() != id) {
            lease_held(dir, id)?;
        }
    } else if name.ends_with(TAKING_SUFFIX) {
        let age = entry
            .metadata()?
            .modified()?
            .elapsed()
            .unwrap_or(Duration::ZERO);
        if age > TAKING_GRACE {
            match fs::remove_file(entry.path()) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
                _ => {}
            }
        }
    }
    Ok(())
}

/// Whether `id` is one [`Lease::take`] makes: its random letters and digits.
fn is_lease_id(id: &str) -> bool {
    id.len() == ID_CHARS && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_held_while_it_lives_and_not_after() {
        let dir = tempfile::tempdir().unwrap();
        let leases = dir.path().join("leases");
        let lease = Lease::take(&leases).unwrap();
        let other = Lease::take(&leases).unwrap();
        assert_ne!(lease.id(), other.id());
        assert!(lease_held(&leases, lease.id()).unwrap());
        sweep_leases(&leases, Some(&other)).unwrap();
        assert!(lease_held(&leases, lease.id()).unwrap(), "a sweep keeps it");
        let id = lease.id().to_owned();
        drop(lease);
        assert!(!lease_held(&leases, &id).unwrap());
        assert!(lease_held(&leases, other.id()).unwrap());
    }

    #[test]
    fn a_lease_whose_process_ended_is_not_held_and_is_swept() {
        let dir = tempfile::tempdir().unwrap();
        let lease = Lease::take(dir.path()).unwrap();
        let id = lease.id().to_owned();
        let path = dir.path().join(format!("{id}{LEASE_SUFFIX}"));
        // What a killed process leaves: the file, with no lock on it.
        std::mem::forget(lease);
        let copy = fs::read(&path).unwrap();
        fs::remove_file(&path).unwrap();
        fs::write(&path, copy).unwrap();
        let stale = "a".repeat(ID_CHARS);
        fs::write(dir.path().join(format!("{stale}{LEASE_SUFFIX}")), "").unwrap();
        sweep_leases(dir.path(), None).unwrap();
        assert!(!path.exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(!lease_held(dir.path(), &id).unwrap());
    }

    #[test]
    fn an_id_that_names_another_file_is_held_by_no_one() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.lease");
        fs::write(&outside, "keep").unwrap();
        let leases = dir.path().join("leases");
        let _lease = Lease::take(&leases).unwrap();
        for id in ["../outside", "", "a/b", &"x".repeat(ID_CHARS + 1)] {
            assert!(!lease_held(&leases, id).unwrap(), "{id}");
        }
        assert_eq!(fs::read_to_string(&outside).unwrap(), "keep");
        assert!(!lease_held(&dir.path().join("missing"), &"a".repeat(ID_CHARS)).unwrap());
        sweep_leases(&dir.path().join("missing"), None).unwrap();
    }
}
