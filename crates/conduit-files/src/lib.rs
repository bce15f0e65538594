//! Writing the user's files safely: through a temporary file and a rename, with a backup
//! of what was there, and the file's permissions kept; and fingerprints that tell whether
//! a file changed since it was read.
//!
//! Place in the crate graph: a leaf with no Conduit dependency; `conduit-mcp` (the
//! `mcpServers` file) and `conduit-host` (settings, secrets) write through it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Replaces `path` with `bytes` atomically. The previous content, if any, is kept as
/// `<path>.bak`. A new file gets `new_mode` (Unix permissions); an existing one keeps its own.
pub fn write_atomically(path: &Path, bytes: &[u8], new_mode: u32) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    fs::create_dir_all(&dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let existing_mode = permissions_of(path);
    {
        let mut file = fs::File::create(&tmp)?;
        set_mode(&tmp, existing_mode.unwrap_or(new_mode))?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    if path.exists() {
        let backup = dir.join(format!("{name}.bak"));
        fs::copy(path, &backup)?;
    }
    fs::rename(&tmp, path)
}

/// A fingerprint of a file's bytes (hex SHA-256), or `None` when there is no file.
pub fn fingerprint(path: &Path) -> std::io::Result<Option<String>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(fingerprint_bytes(&bytes))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The fingerprint of bytes already read.
pub fn fingerprint_bytes(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    use std::fmt::Write as _;
    let mut hex = String::with_capacity(64);
    for byte in Sha256::digest(bytes) {
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
}
