//! A folder held open by handle, its files written through the handle: a link swapped in
//! for the folder's path once it is open does not lead the writes anywhere else.

use std::io;
use std::path::{Path, PathBuf};

/// A folder opened once (never through a symbolic link at its own name), whose files are
/// then created and renamed relative to the open folder, not to its path. In a folder
/// others can write to (an export into a shared folder), the path may be replaced by a
/// link to a folder of the user's own while the writes run; the handle still names the
/// folder that was checked.
#[derive(Debug)]
pub struct HeldFolder {
    path: PathBuf,
    #[cfg(unix)]
    handle: std::os::fd::OwnedFd,
}

impl HeldFolder {
    /// Opens the folder at `path`. A symbolic link there is refused
    /// (`ErrorKind::InvalidInput`), and so is anything that is not a folder
    /// (`ErrorKind::AlreadyExists`); links in the folders above it are followed.
    pub fn open(path: &Path) -> io::Result<Self> {
        #[cfg(unix)]
        {
            use rustix::fs::{Mode, OFlags};
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            match rustix::fs::openat(rustix::fs::CWD, path, flags, Mode::empty()) {
                Ok(handle) => Ok(Self {
                    path: path.to_owned(),
                    handle,
                }),
                Err(errno) if errno == rustix::io::Errno::LOOP => Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "it is a symbolic link",
                )),
                Err(errno) if errno == rustix::io::Errno::NOTDIR => {
                    // The last name is a link (to anything but a folder) or not a folder.
                    let link = std::fs::symlink_metadata(path)
                        .is_ok_and(|found| found.file_type().is_symlink());
                    Err(if link {
                        io::Error::new(io::ErrorKind::InvalidInput, "it is a symbolic link")
                    } else {
                        io::Error::new(io::ErrorKind::AlreadyExists, "it is not a folder")
                    })
                }
                Err(errno) => Err(errno.into()),
            }
        }
        #[cfg(not(unix))]
        {
            match std::fs::symlink_metadata(path) {
                Ok(found) if found.file_type().is_symlink() => Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "it is a symbolic link",
                )),
                Ok(found) if found.is_dir() => Ok(Self {
                    path: path.to_owned(),
                }),
                Ok(_) => Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "it is not a folder",
                )),
                Err(error) => Err(error),
            }
        }
    }

    /// The path the folder was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bytes` to the file `name` in the folder with `mode`: a new temporary file,
    /// created exclusively, then renamed over `name` (a link there is replaced, not
    /// followed). `name` must be a plain file name.
    pub fn write_new_atomically(&self, name: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name:?} is not a plain file name"),
            ));
        }
        #[cfg(unix)]
        {
            self.write_through_handle(name, bytes, mode)
        }
        #[cfg(not(unix))]
        {
            crate::write_new_atomically(&self.path.join(name), bytes, mode)
        }
    }

    #[cfg(unix)]
    fn write_through_handle(&self, name: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
        use rustix::fs::{Mode, OFlags};
        use std::io::Write;
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);

        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let (temporary, file) = loop {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|since| since.subsec_nanos())
                .unwrap_or_default();
            let temporary = format!(
                ".{name}.{}.{}.{nanos}.tmp",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            );
            match rustix::fs::openat(&self.handle, temporary.as_str(), flags, Mode::from(mode)) {
                Ok(file) => break (temporary, std::fs::File::from(file)),
                // Someone else's file at that name (planted): try another name.
                Err(errno) if errno == rustix::io::Errno::EXIST => continue,
                Err(errno) => return Err(errno.into()),
            }
        };
        let written = (|| {
            // The mode given to openat is cut by the umask; set it exactly.
            rustix::fs::fchmod(&file, Mode::from(mode))?;
            let mut file = file;
            file.write_all(bytes)?;
            file.sync_all()?;
            rustix::fs::renameat(&self.handle, temporary.as_str(), &self.handle, name)?;
            Ok::<(), io::Error>(())
        })();
        if written.is_err() {
            let _ = rustix::fs::unlinkat(
                &self.handle,
                temporary.as_str(),
                rustix::fs::AtFlags::empty(),
            );
        }
        written
    }
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_go_to_the_folder_that_was_opened_even_after_a_link_replaces_it() {
        let shared = tempfile::tempdir().unwrap();
        let users_own = tempfile::tempdir().unwrap();
        let media = shared.path().join("chat-media");
        std::fs::create_dir(&media).unwrap();
        let held = HeldFolder::open(&media).unwrap();
        held.write_new_atomically("a.png", b"first", 0o600).unwrap();

        // Another user swaps the folder for a link into the user's own folder.
        std::fs::rename(&media, shared.path().join("moved-away")).unwrap();
        std::os::unix::fs::symlink(users_own.path(), &media).unwrap();
        held.write_new_atomically("b.png", b"second", 0o600)
            .unwrap();

        assert_eq!(
            std::fs::read_dir(users_own.path()).unwrap().count(),
            0,
            "nothing reached the link's target"
        );
        let moved = shared.path().join("moved-away");
        assert_eq!(std::fs::read(moved.join("a.png")).unwrap(), b"first");
        assert_eq!(std::fs::read(moved.join("b.png")).unwrap(), b"second");
        let mode = std::fs::metadata(moved.join("b.png"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(&moved)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "no temporary file left: {names:?}");
    }

    #[test]
    fn a_link_or_a_file_at_the_folders_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real");
        std::fs::create_dir(&target).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let refused = HeldFolder::open(&link).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(refused.to_string(), "it is a symbolic link");

        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert_eq!(
            HeldFolder::open(&dangling).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );

        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let refused = HeldFolder::open(&file).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::AlreadyExists);
    }

    #[test]
    fn a_link_at_the_files_name_is_replaced_not_followed_and_names_stay_inside() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere.txt");
        std::fs::write(&elsewhere, b"keep").unwrap();
        let media = dir.path().join("media");
        std::fs::create_dir(&media).unwrap();
        std::os::unix::fs::symlink(&elsewhere, media.join("a.png")).unwrap();
        let held = HeldFolder::open(&media).unwrap();
        held.write_new_atomically("a.png", b"new", 0o600).unwrap();
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"keep");
        assert_eq!(std::fs::read(media.join("a.png")).unwrap(), b"new");
        assert!(!media.join("a.png").is_symlink());

        for bad in ["", ".", "..", "../escape.png", "a/b.png"] {
            let refused = held.write_new_atomically(bad, b"x", 0o600).unwrap_err();
            assert_eq!(refused.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        assert!(!dir.path().join("escape.png").exists());
    }
}
