//! The media sweep on real files in a temporary folder, against a real history.

use std::path::{Path, PathBuf};

use conduit_core::content::{Block, MediaRef, Message, ResultPart, Role, ToolResult};
use conduit_core::media::MediaStore;

use super::*;
use crate::history::MessageStatus;
use crate::history::tests::{damaged_deep_inside, png};
use crate::media::FileMediaStore;

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

fn open(dir: &Path) -> Arc<Store> {
    Arc::new(
        Store::open(
            &dir.join("history.db"),
            FileMediaStore::new(dir.join("media")),
        )
        .unwrap(),
    )
}

/// Sets a file's modification time to `age` ago.
fn age(path: &Path, age: Duration) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(SystemTime::now() - age)
        .unwrap();
}

/// Every file of `hash` (original, thumbnail, sized copies), made `days` old.
fn age_all(store: &Store, hash: &str, days: u32) -> Vec<PathBuf> {
    let files: Vec<PathBuf> = store
        .media()
        .files_of(hash)
        .unwrap()
        .into_iter()
        .map(|file| file.path)
        .collect();
    for path in &files {
        age(path, DAY * days);
    }
    files
}

fn media_rows(store: &Store, hash: &str) -> i64 {
    store
        .lock()
        .query_row(
            "SELECT count(*) FROM media WHERE hash = ?1",
            [hash],
            |row| row.get(0),
        )
        .unwrap()
}

fn image_message(media: &MediaRef) -> Message {
    Message {
        role: Role::User,
        blocks: vec![Block::Image {
            media: media.clone(),
        }],
    }
}

#[test]
fn an_unreferenced_old_file_goes_with_its_copies_its_leftovers_and_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let media = store.media().put(&png(600, 40, 1), None).unwrap();
    // A sized copy as the window asks for one, and a temporary file a crash left.
    let (sized, _) = store.media().sized(&media.hash, 256).unwrap().unwrap();
    assert_ne!(sized, store.media_path(&media));
    let leftover = store
        .media_path(&media)
        .with_file_name(format!(".{}.png.Ab12Cd.tmp", media.hash));
    std::fs::write(&leftover, b"half").unwrap();
    // A row left behind (as by a message whose save failed half way).
    store
        .lock()
        .execute(
            "INSERT INTO media (hash, mime, bytes) VALUES (?1, 'image/png', ?2)",
            rusqlite::params![media.hash, media.bytes as i64],
        )
        .unwrap();
    let files = age_all(&store, &media.hash, 2);
    assert_eq!(files.len(), 4, "{files:?}");
    let bytes: u64 = files
        .iter()
        .map(|path| std::fs::metadata(path).unwrap().len())
        .sum();

    let sweep = store.sweep_media(MEDIA_GRACE).unwrap();

    assert_eq!(
        sweep,
        MediaSweep {
            files: 4,
            bytes,
            failed: 0
        }
    );
    for path in &files {
        assert!(!path.exists(), "{} was kept", path.display());
    }
    assert_eq!(media_rows(&store, &media.hash), 0);
    assert_eq!(store.media().reference(&media.hash), None);
    // Once more: nothing left to remove.
    assert_eq!(
        store.sweep_media(MEDIA_GRACE).unwrap(),
        MediaSweep::default()
    );
}

#[test]
fn an_unreferenced_fresh_file_is_kept_and_so_is_an_old_one_shown_lately() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let fresh = store.media().put(&png(4, 4, 2), None).unwrap();
    // An old attachment whose sized copy was made an hour ago: shown lately.
    let shown = store.media().put(&png(600, 40, 3), None).unwrap();
    age_all(&store, &shown.hash, 3);
    let (sized, _) = store.media().sized(&shown.hash, 512).unwrap().unwrap();
    age(&sized, Duration::from_secs(60 * 60));

    assert_eq!(
        store.sweep_media(MEDIA_GRACE).unwrap(),
        MediaSweep::default()
    );
    assert!(store.media_path(&fresh).is_file());
    assert!(store.media().thumbnail_of(&fresh.hash).is_file());
    assert!(store.media_path(&shown).is_file());
    assert!(sized.is_file());
}

#[test]
fn an_old_file_put_again_counts_as_new() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let bytes = png(5, 5, 4);
    let media = store.media().put(&bytes, None).unwrap();
    age_all(&store, &media.hash, 30);
    // Attached again: the bytes are there already, and are about to be sent.
    assert_eq!(store.media().put(&bytes, None).unwrap(), media);

    assert_eq!(
        store.sweep_media(MEDIA_GRACE).unwrap(),
        MediaSweep::default()
    );
    assert!(store.media_path(&media).is_file());
}

#[test]
fn a_referenced_file_and_its_copies_stay_however_old() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let image = store.media().put(&png(600, 40, 5), None).unwrap();
    store.media().sized(&image.hash, 256).unwrap().unwrap();
    // A long tool output kept whole, which the window opens with `open_media`.
    let long = store
        .media()
        .put("x".repeat(100_000).as_bytes(), Some("text/plain"))
        .unwrap();
    let tool_image = store.media().put(&png(3, 3, 6), None).unwrap();
    let conversation = store.create_conversation(None, None).unwrap();
    store
        .add_message(
            &conversation,
            &image_message(&image),
            MessageStatus::Complete,
        )
        .unwrap();
    let result = Message {
        role: Role::Tool,
        blocks: vec![Block::ToolResult(ToolResult {
            call_id: "c1".into(),
            wire_id: None,
            name: "srv__tool".into(),
            is_error: false,
            parts: vec![
                ResultPart::LongText {
                    preview: "xxx".into(),
                    media: long.clone(),
                },
                ResultPart::Image {
                    media: tool_image.clone(),
                },
            ],
        })],
    };
    store
        .add_message(&conversation, &result, MessageStatus::Complete)
        .unwrap();
    let mut files = Vec::new();
    for hash in [&image.hash, &long.hash, &tool_image.hash] {
        files.extend(age_all(&store, hash, 400));
    }
    assert_eq!(files.len(), 6, "{files:?}");

    assert_eq!(
        store.sweep_media(MEDIA_GRACE).unwrap(),
        MediaSweep::default()
    );
    for path in &files {
        assert!(path.is_file(), "{} was removed", path.display());
    }
    assert_eq!(media_rows(&store, &image.hash), 1);

    // Once its conversation is gone it is no one's: deleting collects it at once.
    store.delete(&conversation).unwrap();
    assert!(!store.media_path(&image).exists());
}

#[test]
fn foreign_names_and_links_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let root = store.media().root().to_path_buf();
    let hash = "ab".repeat(32);
    let other = "cd".repeat(32);
    let bucket = root.join("ab");
    std::fs::create_dir_all(&bucket).unwrap();
    std::fs::create_dir_all(root.join("zz")).unwrap();
    let foreign = [
        root.join("notes.txt"),
        root.join(format!("{hash}.png")),
        bucket.join(format!("{hash}.exe")),
        bucket.join(format!("{hash}.png.bak")),
        bucket.join(format!("{hash}.w300.png")),
        bucket.join(format!("{}.png", hash.to_uppercase())),
        bucket.join(format!("{other}.png")),
        bucket.join(format!(".{hash}.png.tmp")),
        bucket.join("readme"),
        root.join("zz").join(format!("{hash}.png")),
    ];
    for path in &foreign {
        std::fs::write(path, b"not Conduit's").unwrap();
        age(path, DAY * 10);
    }
    // A folder named as a stored file is no file.
    std::fs::create_dir_all(bucket.join(format!("{hash}.jpg"))).unwrap();

    assert_eq!(
        store.sweep_media(MEDIA_GRACE).unwrap(),
        MediaSweep::default()
    );
    for path in &foreign {
        assert!(path.is_file(), "{} was removed", path.display());
    }
    assert!(bucket.join(format!("{hash}.jpg")).is_dir());
}

#[cfg(unix)]
#[test]
fn links_named_as_stored_files_are_never_followed_nor_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let root = store.media().root().to_path_buf();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let hash = "ab".repeat(32);
    let target = outside.join("precious.png");
    std::fs::write(&target, b"someone's file").unwrap();
    age(&target, DAY * 10);
    // A stored name in its own subfolder, linking out.
    let bucket = root.join("ab");
    std::fs::create_dir_all(&bucket).unwrap();
    let link = bucket.join(format!("{hash}.png"));
    std::os::unix::fs::symlink(&target, &link).unwrap();
    // A whole subfolder linking out, with a stored name inside.
    let other = "cd".repeat(32);
    let outside_bucket = outside.join("cd");
    std::fs::create_dir_all(&outside_bucket).unwrap();
    let behind = outside_bucket.join(format!("{other}.png"));
    std::fs::write(&behind, b"someone else's file").unwrap();
    age(&behind, DAY * 10);
    std::os::unix::fs::symlink(&outside_bucket, root.join("cd")).unwrap();

    assert_eq!(
        store.sweep_media(MEDIA_GRACE).unwrap(),
        MediaSweep::default()
    );
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    assert!(target.is_file());
    assert!(behind.is_file());
    assert!(root.join("cd").symlink_metadata().is_ok());
}

#[test]
fn a_missing_folder_is_nothing_to_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        Store::open(
            &dir.path().join("history.db"),
            FileMediaStore::new(dir.path().join("never-made")),
        )
        .unwrap(),
    );
    assert_eq!(
        store.sweep_media(MEDIA_GRACE).unwrap(),
        MediaSweep::default()
    );
    assert!(!dir.path().join("never-made").exists());
}

#[test]
fn a_time_in_the_future_is_new() {
    let now = SystemTime::now();
    assert!(!is_old(now, now + DAY, MEDIA_GRACE));
    assert!(!is_old(now, now - DAY / 2, MEDIA_GRACE));
    assert!(is_old(now, now - DAY * 2, MEDIA_GRACE));
}

/// A corrupt history is moved aside and a new, empty one made: the media its messages
/// referenced would all read as unreferenced. Nothing is swept while it is kept beside
/// the history; once the user removes it, the sweep goes on.
#[test]
fn nothing_is_swept_while_a_corrupt_history_is_kept_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let media = store.media().put(&png(600, 40, 1), None).unwrap();
    let files = age_all(&store, &media.hash, 2);
    drop(store);
    let database = dir.path().join("history.db");
    std::fs::write(&database, b"this is not a database, it was corrupted").unwrap();
    let opened = Store::open(&database, FileMediaStore::new(dir.path().join("media")));
    let Err(StoreError::Corrupt { moved_to, .. }) = opened else {
        panic!("not refused as corrupt")
    };
    let store = open(dir.path());

    assert_eq!(
        store.sweep_media(MEDIA_GRACE).unwrap(),
        MediaSweep::default()
    );
    for path in &files {
        assert!(path.exists(), "{} was removed", path.display());
    }

    // Nor by deleting a new conversation that used the same image.
    let again = store.media().put(&png(600, 40, 1), None).unwrap();
    let conversation = store.create_conversation(None, None).unwrap();
    store
        .add_message(
            &conversation,
            &image_message(&again),
            MessageStatus::Complete,
        )
        .unwrap();
    age_all(&store, &again.hash, 2);
    store.delete(&conversation).unwrap();
    for path in &files {
        assert!(path.exists(), "{} was removed", path.display());
    }

    std::fs::remove_file(&moved_to).unwrap();
    assert_eq!(store.sweep_media(MEDIA_GRACE).unwrap().files, files.len());
}

/// The upkeep started at once; what it hands over comes on the receiver.
fn upkeep_now(store: &Arc<Store>) -> std::sync::mpsc::Receiver<crate::HistoryDamage> {
    let (found, damage) = std::sync::mpsc::channel();
    store.upkeep_in_background(Duration::ZERO, move |damage| {
        found.send(damage).unwrap();
    });
    damage
}

/// The upkeep hands the damage it found to its caller (the window shows it), with what
/// the check said and which file, and then sweeps nothing.
#[test]
fn the_upkeep_hands_damage_over_and_sweeps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    damaged_deep_inside(dir.path());
    let store = open(dir.path());
    let media = store.media().put(&png(600, 40, 1), None).unwrap();
    let files = age_all(&store, &media.hash, 2);

    let damage = upkeep_now(&store);
    let damage = damage.recv_timeout(Duration::from_secs(60)).unwrap();

    assert!(!damage.found.is_empty());
    assert_eq!(
        std::fs::read_to_string(crate::history::damage_mark(&dir.path().join("history.db")))
            .unwrap(),
        damage.found
    );
    assert_eq!(
        damage.file,
        dir.path().join("history.db").display().to_string()
    );
    for path in &files {
        assert!(path.exists(), "{} was swept", path.display());
    }
}

/// A whole history is swept, and nothing is handed over.
#[test]
fn the_upkeep_of_a_whole_history_sweeps_and_hands_nothing_over() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let media = store.media().put(&png(600, 40, 1), None).unwrap();
    let files = age_all(&store, &media.hash, 2);

    let damage = upkeep_now(&store);
    let deadline = Instant::now() + Duration::from_secs(60);
    while files.iter().any(|path| path.exists()) {
        assert!(Instant::now() < deadline, "never swept");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The thread ended without handing anything over (its sender dropped unused).
    assert!(damage.recv().is_err());
}
