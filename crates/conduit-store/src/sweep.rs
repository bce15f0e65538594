//! The media folder swept of files no stored message references.
//!
//! A file enters the media folder when it is put (an attachment the window stored, a
//! tool's image during a turn), but the history references it only once a message that
//! uses it is saved, and [`Store::delete`] collects only what a deleted message used. An
//! attachment never sent, or the images of a turn that crashed before its message was
//! saved, would stay on disk for good: a page could fill the disk with them. The sweep
//! removes such files once they are older than a grace period.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::history::{Store, StoreError};

/// How long after the history opens its upkeep (the whole-file check, the media sweep)
/// starts.
pub const UPKEEP_DELAY: Duration = Duration::from_secs(20);

/// How old an unreferenced media file must be before the sweep removes it. A file is
/// unreferenced while it waits for its message: an attachment while the user writes, a
/// tool's image while its turn runs, in this process or in another one (the `conduit`
/// command and the app share the data folder, and either may sweep while the other
/// works). A day is far longer than any of those waits; a put refreshes the time of a
/// file that already exists, so an old file attached again counts as new.
pub const MEDIA_GRACE: Duration = Duration::from_secs(24 * 60 * 60);

/// What a sweep removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MediaSweep {
    /// Files removed (originals, their copies, temporary files).
    pub files: usize,
    pub bytes: u64,
    /// Files that could not be removed or read (each logged); they stay.
    pub failed: usize,
}

impl Store {
    /// Removes the media files no stored message references whose newest file (the
    /// original, a thumbnail, a sized copy) is older than `grace`, with their `media`
    /// rows. A referenced file keeps all its copies however old; links and files named
    /// otherwise than the store names them are never touched. A file that cannot be
    /// removed is logged and the sweep goes on; a database error ends it (what was not
    /// reached stays). A missing folder holds nothing to sweep.
    pub fn sweep_media(&self, grace: Duration) -> Result<MediaSweep, StoreError> {
        // The media of a corrupt database moved aside would all read as unreferenced by
        // the new, empty one: nothing is swept while one is kept beside it, so it can be
        // mended (`sqlite3 .recover`) and put back with its images.
        if let Some(aside) = self.database_moved_aside() {
            tracing::info!(kept = %aside.display(), "the media folder is not swept while a corrupt history database is kept beside the history");
            return Ok(MediaSweep::default());
        }
        let now = SystemTime::now();
        let files = self
            .media()
            .stored_files()
            .map_err(|source| StoreError::Io {
                path: self.media().root().display().to_string(),
                source,
            })?;
        // A media is as new as its newest file: a sized copy made lately means it was
        // shown lately.
        let mut newest: BTreeMap<String, SystemTime> = BTreeMap::new();
        for file in files {
            newest
                .entry(file.hash)
                .and_modify(|time| *time = (*time).max(file.modified))
                .or_insert(file.modified);
        }
        let referenced: HashSet<String> = {
            let conn = self.lock();
            let mut statement = conn.prepare("SELECT DISTINCT hash FROM block_media")?;
            let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
            rows.collect::<Result<_, _>>()?
        };
        let mut sweep = MediaSweep::default();
        for (hash, modified) in newest {
            if is_old(now, modified, grace) && !referenced.contains(&hash) {
                self.sweep_one(&hash, now, grace, &mut sweep)?;
            }
        }
        Ok(sweep)
    }

    /// A corrupt database moved aside beside this one (see `history::move_aside`): while
    /// it is kept, no media file is removed, as its messages may reference any.
    pub(crate) fn database_moved_aside(&self) -> Option<std::path::PathBuf> {
        let name = self.path.file_name()?.to_str()?;
        let prefix = format!("{name}{}", crate::history::MOVED_ASIDE);
        std::fs::read_dir(self.path.parent()?)
            .ok()?
            .filter_map(Result::ok)
            .find(|entry| {
                entry
                    .file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(&prefix))
            })
            .map(|entry| entry.path())
    }

    /// Removes the files of one hash if it is still unreferenced and old.
    fn sweep_one(
        &self,
        hash: &str,
        now: SystemTime,
        grace: Duration,
        sweep: &mut MediaSweep,
    ) -> Result<(), StoreError> {
        // Held until the files are gone: a message saved by this process meanwhile
        // cannot come to reference them between the check and the removal.
        let conn = self.lock();
        let referenced: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM block_media WHERE hash = ?1)",
            [hash],
            |row| row.get(0),
        )?;
        if referenced {
            return Ok(());
        }
        // Read again: a put since the walk (the same image attached again) made it new,
        // and a copy may have been made.
        let files = match self.media().files_of(hash) {
            Ok(files) => files,
            Err(error) => {
                tracing::warn!(hash, %error, "the files of an unreferenced media cannot be read");
                sweep.failed += 1;
                return Ok(());
            }
        };
        if files.iter().any(|file| !is_old(now, file.modified, grace)) {
            return Ok(());
        }
        conn.execute(
            "DELETE FROM media WHERE hash = ?1
             AND NOT EXISTS (SELECT 1 FROM block_media WHERE hash = ?1)",
            [hash],
        )?;
        for file in files {
            match fs::remove_file(&file.path) {
                Ok(()) => {
                    sweep.files += 1;
                    sweep.bytes += file.bytes;
                }
                // Removed meanwhile (a conversation deleted, another process's sweep).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => {
                    tracing::warn!(path = %file.path.display(), %error, "an unreferenced media file could not be removed");
                    sweep.failed += 1;
                }
            }
        }
        Ok(())
    }

    /// Once per process, `after` the history opened ([`UPKEEP_DELAY`]), on a thread of its
    /// own (they read the whole file and the whole folder, which must neither hold up the
    /// window nor take an async worker): checks the whole database
    /// ([`Store::check_whole`]), then sweeps the media folder ([`Store::sweep_media`] with
    /// [`MEDIA_GRACE`]) unless the database was found damaged (its references may not all
    /// read). What each did is logged, and damage found is handed to `on_damage` with
    /// what the check said (the window shows it: until the next start the history is
    /// still read and written, and the user may want to export from it first).
    pub fn upkeep_in_background(
        self: &Arc<Self>,
        after: Duration,
        on_damage: impl FnOnce(HistoryDamage) + Send + 'static,
    ) {
        // Held weakly while it waits: a store dropped meanwhile (a command that ended)
        // gets no upkeep, and keeps no lease open for it.
        let store = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("conduit-history-upkeep".into())
            .spawn(move || {
                // After the start has settled: reading a history of gigabytes competed
                // with the window's start for the disk and the cores, and a `conduit`
                // command of a few seconds ends before it, its reading wasted.
                std::thread::sleep(after);
                let Some(store) = store.upgrade() else {
                    return;
                };
                let started = Instant::now();
                match store.check_whole() {
                    Ok(None) => tracing::info!(
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "the history database checks whole"
                    ),
                    // Logged as it was found, with what the next start does.
                    Ok(Some(found)) => {
                        on_damage(HistoryDamage {
                            found,
                            file: store.path.display().to_string(),
                        });
                        return;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "the history database could not be checked whole");
                    }
                }
                let started = Instant::now();
                match store.sweep_media(MEDIA_GRACE) {
                    Ok(sweep) => tracing::info!(
                        files = sweep.files,
                        bytes = sweep.bytes,
                        failed = sweep.failed,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "media folder swept of files no message references"
                    ),
                    Err(error) => {
                        tracing::warn!(%error, "the media folder could not be swept");
                    }
                }
            });
        if let Err(error) = spawned {
            tracing::warn!(%error, "the history's upkeep (its check, the media sweep) could not start");
        }
    }
}

/// Damage the check of the whole history found while it was open: the next start moves
/// the file aside (kept, never deleted) and begins a new one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct HistoryDamage {
    /// What SQLite's check said, as it said it.
    pub found: String,
    /// The damaged file.
    pub file: String,
}

/// Whether a file modified at `modified` is older than `grace`. A time in the future (a
/// clock set back) is new: the sweep keeps what it cannot date.
fn is_old(now: SystemTime, modified: SystemTime, grace: Duration) -> bool {
    now.duration_since(modified).is_ok_and(|age| age >= grace)
}

#[cfg(test)]
mod tests;
