//! API keys and tokens: in the OS keychain where one answers, otherwise in a file only
//! the user can read. Never in settings, the database, logs or events.

use std::collections::BTreeMap;
use std::path::PathBuf;

use parking_lot::Mutex;

use conduit_files as files;

/// Environment variable choosing the store: `keychain`, `file`, or `auto` (the default:
/// the keychain when it answers, else the file).
pub const STORE_ENV: &str = "CONDUIT_SECRET_STORE";

const KEYRING_SERVICE: &str = "dev.conduit.desktop";

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("the keychain failed: {0}")]
    Keychain(#[source] keyring::Error),
    #[error("the secrets file {path} failed: {source}")]
    File {
        path: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Where secrets are kept.
pub trait SecretStore: Send + Sync {
    fn get(&self, name: &str) -> Result<Option<String>, SecretError>;
    fn set(&self, name: &str, value: &str) -> Result<(), SecretError>;
    fn delete(&self, name: &str) -> Result<(), SecretError>;
    /// Where the secrets are, for the settings screen.
    fn describe(&self) -> String;
}

/// Opens the store `CONDUIT_SECRET_STORE` asks for (see [`STORE_ENV`]).
pub fn open(file: PathBuf) -> Box<dyn SecretStore> {
    let choice = std::env::var(STORE_ENV).unwrap_or_default();
    match choice.as_str() {
        "file" => Box::new(FileSecrets::new(file)),
        "keychain" => Box::new(KeychainSecrets::beside(file)),
        _ => {
            if KeychainSecrets::answers() {
                Box::new(KeychainSecrets::beside(file))
            } else {
                tracing::info!(file = %file.display(), "no keychain answers; secrets go to a private file");
                Box::new(FileSecrets::new(file))
            }
        }
    }
}

/// The OS keychain (Secret Service on Linux, Keychain on macOS, Credential Manager on Windows).
pub struct KeychainSecrets {
    /// The private file a process without a keychain (the CLI over SSH, from cron) keeps
    /// its secrets in: a delete reaches it too. Deleted from the keychain alone, a key
    /// the file held went on to the next provider of that id where the file is read.
    file: FileSecrets,
}

impl KeychainSecrets {
    fn beside(file: PathBuf) -> Self {
        Self {
            file: FileSecrets::new(file),
        }
    }

    /// Deletes `name` from the private file, when there is one (none is made). A file
    /// that does not read hands no key to anyone: logged, and the delete stands.
    fn delete_left_in_file(&self, name: &str) -> Result<(), SecretError> {
        if self.file.path.exists()
            && let Err(error) = self.file.delete(name)
        {
            tracing::warn!(%error, "a secret deleted from the keychain could not be deleted from the private file too");
        }
        Ok(())
    }

    fn entry(name: &str) -> Result<keyring::Entry, SecretError> {
        keyring::Entry::new(KEYRING_SERVICE, name).map_err(SecretError::Keychain)
    }

    /// Whether a keychain is there to answer (a read of a name nobody sets).
    fn answers() -> bool {
        keyring::Entry::new(KEYRING_SERVICE, "conduit-probe")
            .is_ok_and(|entry| matches!(entry.get_password(), Ok(_) | Err(keyring::Error::NoEntry)))
    }
}

impl SecretStore for KeychainSecrets {
    fn get(&self, name: &str) -> Result<Option<String>, SecretError> {
        match Self::entry(name)?.get_password() {
            Ok(value) => Ok(Some(value)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(SecretError::Keychain(e)),
        }
    }

    fn set(&self, name: &str, value: &str) -> Result<(), SecretError> {
        Self::entry(name)?
            .set_password(value)
            .map_err(SecretError::Keychain)
    }

    fn delete(&self, name: &str) -> Result<(), SecretError> {
        match Self::entry(name)?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => {}
            Err(e) => return Err(SecretError::Keychain(e)),
        }
        self.delete_left_in_file(name)
    }

    fn describe(&self) -> String {
        "the system keychain".to_owned()
    }
}

/// A JSON file readable and writable by the user alone (mode 0600).
pub struct FileSecrets {
    path: PathBuf,
    lock: Mutex<()>,
}

impl FileSecrets {
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            lock: Mutex::new(()),
        }
    }

    fn error(&self, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> SecretError {
        SecretError::File {
            path: self.path.display().to_string(),
            source: source.into(),
        }
    }

    fn read(&self) -> Result<BTreeMap<String, String>, SecretError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| self.error(e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(self.error(e)),
        }
    }

    fn write(&self, secrets: &BTreeMap<String, String>) -> Result<(), SecretError> {
        let text = serde_json::to_string_pretty(secrets).map_err(|e| self.error(e))?;
        // No backup: it would keep old secrets.
        files::write_secrets_atomically(&self.path, text.as_bytes()).map_err(|e| self.error(e))?;
        // One that an earlier version left.
        let backup = self.path.with_extension("json.bak");
        match std::fs::remove_file(&backup) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(self.error(e)),
            _ => Ok(()),
        }
    }

    /// Reads, changes and writes the file holding the lock beside it, so another process
    /// (the app and the CLI, each refreshing a sign-in) does not write over the change.
    fn change(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, String>) -> bool,
    ) -> Result<(), SecretError> {
        let _in_process = self.lock.lock();
        let _across_processes = files::lock_beside(&self.path).map_err(|e| self.error(e))?;
        let mut secrets = self.read()?;
        if change(&mut secrets) {
            self.write(&secrets)?;
        }
        Ok(())
    }
}

impl SecretStore for FileSecrets {
    fn get(&self, name: &str) -> Result<Option<String>, SecretError> {
        Ok(self.read()?.remove(name))
    }

    fn set(&self, name: &str, value: &str) -> Result<(), SecretError> {
        self.change(|secrets| {
            secrets.insert(name.to_owned(), value.to_owned());
            true
        })
    }

    fn delete(&self, name: &str) -> Result<(), SecretError> {
        self.change(|secrets| secrets.remove(name).is_some())
    }

    fn describe(&self) -> String {
        format!("the private file {}", self.path.display())
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A key the CLI kept in the file (no keychain over SSH) is deleted by the app's
    /// delete too, which used to reach the keychain alone: the next provider of that id
    /// got it wherever the file is read.
    /// (The keychain's own delete needs a keychain, which tests do not have; a mock one
    /// would be the whole process's.)
    #[test]
    fn a_keychain_delete_reaches_the_file_a_process_without_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.json");
        FileSecrets::new(path.clone())
            .set("provider:work", "sk-set-over-ssh")
            .unwrap();
        KeychainSecrets::beside(path.clone())
            .delete_left_in_file("provider:work")
            .unwrap();
        assert_eq!(
            FileSecrets::new(path.clone()).get("provider:work").unwrap(),
            None
        );
        // A file that does not read: the delete stands.
        std::fs::write(&path, "not json").unwrap();
        KeychainSecrets::beside(path.clone())
            .delete_left_in_file("provider:work")
            .unwrap();
        // No file: nothing to delete, and none made.
        let absent = dir.path().join("absent.json");
        KeychainSecrets::beside(absent.clone())
            .delete_left_in_file("x")
            .unwrap();
        assert!(!absent.exists());
    }

    #[test]
    fn the_file_store_keeps_secrets_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.json");
        let store = FileSecrets::new(path.clone());
        assert_eq!(store.get("provider:a").unwrap(), None);
        store.set("provider:a", "sk-one").unwrap();
        store.set("provider:a", "sk-two").unwrap();
        store.set("provider:b", "sk-b").unwrap();
        assert_eq!(store.get("provider:a").unwrap().as_deref(), Some("sk-two"));
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(!dir.path().join("secrets.json.bak").exists());
        store.delete("provider:a").unwrap();
        assert_eq!(store.get("provider:a").unwrap(), None);
        assert_eq!(store.get("provider:b").unwrap().as_deref(), Some("sk-b"));
    }

    /// Two stores on one file, as the app and the CLI are (each with its own in-process
    /// lock), adding secrets at once: none is lost.
    #[test]
    fn two_processes_changing_the_file_at_once_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.json");
        let writers: Vec<_> = ["mcp-oauth", "provider"]
            .into_iter()
            .map(|kind| {
                let store = FileSecrets::new(path.clone());
                std::thread::spawn(move || {
                    for n in 0..100 {
                        store.set(&format!("{kind}:{n}"), "value").unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let kept = FileSecrets::new(path).read().unwrap();
        assert_eq!(kept.len(), 200, "lost: {}", 200 - kept.len());
    }
}
