//! Media files (images, audio) stored once by content hash under the data folder, each
//! checked on the way in: the bytes decide the type, and an image must decode within
//! [`conduit_core::images`]' limits.

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use conduit_core::content::MediaRef;
use conduit_core::images::{self, DecodeError};
use conduit_core::media::{MediaError, MediaStore};

/// Media under one folder: `<root>/<first two hex digits>/<sha256>.<ext>`.
#[derive(Debug, Clone)]
pub struct FileMediaStore {
    root: PathBuf,
    /// Files stored by this process that no saved message uses yet (an attachment while
    /// the user writes, a tool's image while its turn runs), by hash, with when: deleting
    /// a conversation leaves them, however long they wait. Shared by the clones of a
    /// store, so the history's copy sees what the host's stored.
    waiting: Arc<parking_lot::Mutex<HashMap<String, Instant>>>,
}

impl FileMediaStore {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            waiting: Arc::default(),
        }
    }

    /// Notes that these stored files are used by a saved message now.
    pub fn settled<'a>(&self, hashes: impl IntoIterator<Item = &'a str>) {
        let mut waiting = self.waiting.lock();
        for hash in hashes {
            waiting.remove(hash);
        }
    }

    /// Whether this process stored the file of `hash` within `within` for a message not
    /// saved yet.
    pub fn waits_here(&self, hash: &str, within: std::time::Duration) -> bool {
        self.waiting
            .lock()
            .get(hash)
            .is_some_and(|stored| stored.elapsed() < within)
    }

    /// Notes that this process just stored the file of `hash` (see `waiting`); entries
    /// older than a day are dropped on the way, so the map stays small.
    fn stored_here(&self, hash: &str) {
        let mut waiting = self.waiting.lock();
        waiting.retain(|_, stored| stored.elapsed() < crate::sweep::MEDIA_GRACE);
        waiting.insert(hash.to_owned(), Instant::now());
    }

    /// Where the file of `media` lives (it may be missing).
    /// Where a stored file lives. A reference whose hash is not a hash (it came from
    /// outside, say `../..`) names a file that never exists, never a path elsewhere.
    pub fn path_of(&self, media: &MediaRef) -> PathBuf {
        if !is_hash(&media.hash) {
            return self.root.join("invalid-reference");
        }
        self.folder_of(&media.hash)
            .join(format!("{}.{}", media.hash, extension(&media.mime)))
    }

    /// The reference of a stored file, rebuilt from the store itself (type from the file,
    /// size from the disk, an image's dimensions from its header).
    pub fn reference(&self, hash: &str) -> Option<MediaRef> {
        let (path, mime) = self.find(hash, false)?;
        let bytes = fs::metadata(&path).ok()?.len();
        let (width, height) = if mime.starts_with("image/") {
            image::image_dimensions(&path)
                .map(|(w, h)| (Some(w), Some(h)))
                .unwrap_or((None, None))
        } else {
            (None, None)
        };
        Some(MediaRef {
            hash: hash.to_owned(),
            mime: mime.to_owned(),
            bytes,
            width,
            height,
        })
    }

    /// The stored file with this hash and its type, or with `thumbnail` its thumbnail;
    /// `None` for anything that is not a stored hash (a path, `..`) or is missing.
    pub fn find(&self, hash: &str, thumbnail: bool) -> Option<(PathBuf, &'static str)> {
        if !is_hash(hash) {
            return None;
        }
        // Only regular files, never followed through a link: a link or a pipe planted in
        // the folder is not a stored file (a pipe would hold its reader forever).
        if thumbnail {
            let thumb = self.thumbnail_of(hash);
            let regular = fs::symlink_metadata(&thumb).is_ok_and(|meta| meta.is_file());
            return regular.then_some((thumb, "image/png"));
        }
        let prefix = format!("{hash}.");
        fs::read_dir(self.folder_of(hash))
            .ok()?
            .filter_map(Result::ok)
            .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
            .map(|entry| entry.path())
            // `<hash>.<ext>` only: thumbnails are `<hash>.thumb.png` and `<hash>.w<width>.png`.
            .find(|path| {
                path.file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_prefix(&prefix))
                    .is_some_and(|ext| !ext.is_empty() && !ext.contains('.'))
            })
            .map(|path| {
                let mime = path
                    .extension()
                    .and_then(|e| e.to_str())
                    .map_or("application/octet-stream", mime_of_extension);
                (path, mime)
            })
    }

    /// Where the thumbnail of an image lives (a PNG, at most 256 pixels on its long edge).
    pub fn thumbnail_of(&self, hash: &str) -> PathBuf {
        self.folder_of(hash).join(format!("{hash}.thumb.png"))
    }

    /// The file to show an image at `width` pixels wide: the original when it is no wider
    /// (never an upscale), else a PNG that fits `width` × [`SIZED_MAX_HEIGHT`] with the
    /// original's aspect ratio (so `width` wide unless the image is very tall), made once
    /// and kept. `width` must be one of [`THUMBNAIL_WIDTHS`], so what a page asks for
    /// cannot fill the disk. `Ok(None)`: no stored image has this hash. An image over the
    /// limits of [`conduit_core::images`] (stored before they were kept) is an error that
    /// says its size, never a decode.
    pub fn sized(
        &self,
        hash: &str,
        width: u32,
    ) -> Result<Option<(PathBuf, &'static str)>, MediaError> {
        if !THUMBNAIL_WIDTHS.contains(&width) {
            return Err(MediaError::Invalid(format!(
                "{width} is not a thumbnail width (one of {THUMBNAIL_WIDTHS:?})"
            )));
        }
        let Some((original, mime)) = self.find(hash, false) else {
            return Ok(None);
        };
        if !mime.starts_with("image/") {
            return Ok(None);
        }
        let (natural_width, _) = image::image_dimensions(&original)
            .map_err(|e| MediaError::Invalid(format!("the stored image does not decode: {e}")))?;
        // A still PNG of an animation's first frame would lose what it shows: animations
        // are served whole (the window scales them).
        let may_animate = matches!(mime, "image/gif" | "image/webp" | "image/apng");
        if natural_width <= width || may_animate {
            return Ok(Some((original, mime)));
        }
        let sized = self.sized_path(hash, width);
        // Looked for again once a turn is had: of many asking for the same size at once,
        // one makes it and the others find it.
        let turn = (!sized.is_file()).then(images::decode_turn);
        if turn.is_some() && !sized.is_file() {
            let bytes = fs::read(&original).map_err(|e| MediaError::Io(e.to_string()))?;
            let (_, image) = images::decode(&bytes).map_err(|e| invalid("the stored image", &e))?;
            let small = images::shrink_to_fit(
                image,
                width,
                SIZED_MAX_HEIGHT,
                image::imageops::FilterType::CatmullRom,
            );
            let mut png = Vec::new();
            small
                .write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
                .map_err(|e| MediaError::Io(format!("cannot make a thumbnail: {e}")))?;
            write_atomically(&sized, &png).map_err(|e| MediaError::Io(e.to_string()))?;
        }
        Ok(Some((sized, "image/png")))
    }

    fn sized_path(&self, hash: &str, width: u32) -> PathBuf {
        self.folder_of(hash).join(format!("{hash}.w{width}.png"))
    }

    fn folder_of(&self, hash: &str) -> PathBuf {
        self.root.join(hash.get(..2).unwrap_or("00"))
    }

    /// The folder the files are in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every file in the folder named as this store names its files: originals, their
    /// thumbnails and sized copies, and the temporary files a crash left mid-write. Links
    /// and anything named otherwise are left out, so a sweep never acts on a file
    /// Conduit did not write, nor through a link on a file elsewhere. A missing folder
    /// holds nothing; an entry that cannot be read is logged and passed over (kept).
    pub fn stored_files(&self) -> std::io::Result<Vec<StoredFile>> {
        let mut files = Vec::new();
        for entry in readable_entries(&self.root)? {
            let is_bucket = entry.file_name().to_str().is_some_and(is_bucket_name);
            // The entry's own type: a link named like a subfolder is not followed.
            let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
            if !is_bucket || !is_dir {
                continue;
            }
            match files_in(&entry.path(), None) {
                Ok(found) => files.extend(found),
                Err(error) => {
                    tracing::warn!(folder = %entry.path().display(), %error, "a media subfolder cannot be read");
                }
            }
        }
        Ok(files)
    }

    /// The files of one hash (the original, its thumbnail and sized copies, temporary
    /// files), read as [`FileMediaStore::stored_files`] reads them.
    pub fn files_of(&self, hash: &str) -> std::io::Result<Vec<StoredFile>> {
        if !is_lowercase_hash(hash) {
            return Ok(Vec::new());
        }
        let folder = self.folder_of(hash);
        match fs::symlink_metadata(&folder) {
            // A link in place of the subfolder is not followed: nothing of the store is there.
            Ok(meta) if meta.is_dir() => files_in(&folder, Some(hash)),
            Ok(_) => Ok(Vec::new()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Deletes the files of `media` as [`Self::remove`] does, unless its file was stored
    /// (or stored again) within `recent`: the same image attached or returned by a tool
    /// just now, for a message not saved yet, is the same file. The sweep removes it later
    /// if nothing uses it. Whether it was removed.
    pub fn remove_unless_recent(
        &self,
        media: &MediaRef,
        recent: std::time::Duration,
    ) -> std::io::Result<bool> {
        let stored_at = match fs::symlink_metadata(self.path_of(media)) {
            Ok(meta) => meta.modified().ok(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if stored_at.is_some_and(|at| at.elapsed().is_ok_and(|age| age < recent)) {
            return Ok(false);
        }
        self.remove(media)?;
        Ok(true)
    }

    /// Deletes the files of `media` (the file and its thumbnail).
    pub fn remove(&self, media: &MediaRef) -> std::io::Result<()> {
        if !is_hash(&media.hash) {
            return Ok(());
        }
        let sized = THUMBNAIL_WIDTHS.map(|width| self.sized_path(&media.hash, width));
        for path in [self.path_of(media), self.thumbnail_of(&media.hash)]
            .into_iter()
            .chain(sized)
        {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A regular file in the media folder named as the store names its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    pub path: PathBuf,
    /// The hash of the media it is (or is a copy of).
    pub hash: String,
    pub bytes: u64,
    pub modified: SystemTime,
}

/// The entries of a folder of the media folder; none when it is missing, and one that
/// cannot be read is logged and passed over (what it is stays as it is).
fn readable_entries(folder: &Path) -> std::io::Result<Vec<fs::DirEntry>> {
    let entries = match fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(entries
        .filter_map(|entry| {
            entry
                .inspect_err(|error| {
                    tracing::warn!(folder = %folder.display(), %error, "an entry of the media folder cannot be read");
                })
                .ok()
        })
        .collect())
}

/// The regular files in one subfolder (`<first two hex digits>`) whose names are the
/// store's and whose hash belongs in it; with `only`, those of that hash alone.
fn files_in(folder: &Path, only: Option<&str>) -> std::io::Result<Vec<StoredFile>> {
    let Some(bucket) = folder.file_name().and_then(|n| n.to_str()) else {
        return Ok(Vec::new());
    };
    let mut files = Vec::new();
    for entry in readable_entries(folder)? {
        let name = entry.file_name();
        let Some(hash) = name.to_str().and_then(hash_of_name) else {
            continue;
        };
        if !hash.starts_with(bucket) || only.is_some_and(|only| only != hash) {
            continue;
        }
        // `DirEntry::metadata` does not follow a link: a link is no regular file here.
        let meta = match entry.metadata() {
            Ok(meta) if meta.is_file() => meta,
            Ok(_) => continue,
            Err(error) => {
                tracing::warn!(path = %entry.path().display(), %error, "a media file cannot be read");
                continue;
            }
        };
        let modified = match meta.modified() {
            Ok(modified) => modified,
            Err(error) => {
                tracing::warn!(path = %entry.path().display(), %error, "a media file has no modification time");
                continue;
            }
        };
        files.push(StoredFile {
            path: entry.path(),
            hash: hash.to_owned(),
            bytes: meta.len(),
            modified,
        });
    }
    Ok(files)
}

/// The hash in a file name the store writes: `<hash>.<ext>`, `<hash>.thumb.png`,
/// `<hash>.w<width>.png`, or the temporary `.<one of those>.<random>.tmp` a write goes
/// through (`conduit_files::write_new_atomically`). `None` for any other name.
fn hash_of_name(name: &str) -> Option<&str> {
    if let Some(inner) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) {
        let (stored, random) = inner.rsplit_once('.')?;
        let random_ok =
            (1..=32).contains(&random.len()) && random.bytes().all(|b| b.is_ascii_alphanumeric());
        return random_ok.then(|| stored_name_hash(stored)).flatten();
    }
    stored_name_hash(name)
}

fn stored_name_hash(name: &str) -> Option<&str> {
    let (hash, rest) = name.split_at_checked(64)?;
    let suffix = rest.strip_prefix('.')?;
    let known = suffix == "bin"
        || suffix == "thumb.png"
        || TYPES.iter().any(|(_, ext)| *ext == suffix)
        || THUMBNAIL_WIDTHS
            .iter()
            .any(|width| suffix == format!("w{width}.png"));
    (known && is_lowercase_hash(hash)).then_some(hash)
}

/// A subfolder's name: the first two hex digits of a hash, as the store writes them.
fn is_bucket_name(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A hash as the store writes it (lower case): only such files are its own.
fn is_lowercase_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Marks a stored file as put just now: the sweep keeps what was put within its grace
/// period, and an old unreferenced file put again (the same image attached again) is
/// about to be referenced by a message.
fn refresh(path: &Path) {
    let touched = fs::symlink_metadata(path).and_then(|meta| {
        if !meta.is_file() {
            return Ok(());
        }
        fs::OpenOptions::new()
            .write(true)
            .open(path)?
            .set_modified(SystemTime::now())
    });
    if let Err(error) = touched {
        tracing::warn!(path = %path.display(), %error, "a media file put again could not be marked as new");
    }
}

/// The long edge of thumbnails, in pixels.
pub const THUMBNAIL_EDGE: u32 = 256;

/// The widths a window may ask an image at ([`FileMediaStore::sized`]): it picks the
/// smallest at least as wide as the image is shown (times the screen's pixel ratio).
pub const THUMBNAIL_WIDTHS: [u32; 5] = [256, 512, 1024, 1600, 2400];

/// The tallest an image sized for the window is ([`FileMediaStore::sized`]): a card
/// shows an image at most 480 CSS pixels tall (`ToolImages.svelte`), so this is enough at
/// a pixel ratio of 5, and it keeps the resize of a tall screenshot small (a 1280 × 20,000
/// one asked 1024 wide would otherwise be a 1024 × 16,000 PNG).
pub const SIZED_MAX_HEIGHT: u32 = 2400;

/// A refused image as the store reports it: what it is, and why in words.
fn invalid(what: &str, error: &DecodeError) -> MediaError {
    match error {
        // Its size, as the person may read it: "the image is 257×2088000 pixels; ...".
        DecodeError::TooLarge { .. } | DecodeError::TooMuchMemory(_) => {
            MediaError::Invalid(error.to_string())
        }
        DecodeError::UnknownFormat(_) | DecodeError::Corrupt(_) => {
            MediaError::Invalid(format!("{what} does not decode: {}", source_text(error)))
        }
    }
}

/// The image crate's own words for why a decode failed.
fn source_text(error: &DecodeError) -> String {
    std::error::Error::source(error).map_or_else(|| error.to_string(), ToString::to_string)
}

impl MediaStore for FileMediaStore {
    fn reference(&self, hash: &str) -> Option<MediaRef> {
        FileMediaStore::reference(self, hash)
    }

    fn put(&self, bytes: &[u8], declared_mime: Option<&str>) -> Result<MediaRef, MediaError> {
        let hash = sha256_hex(bytes);
        // The same image again (a result repeating one, a server sending it in a loop):
        // these bytes were checked, stored and given a thumbnail already, so they are
        // not decoded again.
        if let Some(stored) = self
            .reference(&hash)
            .filter(|stored| stored.mime.starts_with("image/") && stored.width.is_some())
            && self.thumbnail_of(&hash).is_file()
        {
            refresh(&self.path_of(&stored));
            self.stored_here(&stored.hash);
            return Ok(stored);
        }
        // The decode and the thumbnail made from it, a few at a time in the process.
        let _turn = images::decode_turn();
        let (mime, image) = identify(bytes, declared_mime)?;
        let media = MediaRef {
            hash,
            mime,
            bytes: bytes.len() as u64,
            width: image.as_ref().map(|i| i.width()),
            height: image.as_ref().map(|i| i.height()),
        };
        let io = |e: std::io::Error| MediaError::Io(e.to_string());
        let path = self.path_of(&media);
        if path.exists() {
            refresh(&path);
        } else {
            write_atomically(&path, bytes).map_err(io)?;
        }
        if let Some(image) = image {
            let thumb = self.thumbnail_of(&media.hash);
            if !thumb.exists() {
                let mut png = Vec::new();
                let small = if image.width().max(image.height()) > THUMBNAIL_EDGE {
                    image.thumbnail(THUMBNAIL_EDGE, THUMBNAIL_EDGE)
                } else {
                    image
                };
                small
                    .write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
                    .map_err(|e| MediaError::Io(format!("cannot make a thumbnail: {e}")))?;
                write_atomically(&thumb, &png).map_err(io)?;
            }
        }
        self.stored_here(&media.hash);
        Ok(media)
    }

    fn load(&self, media: &MediaRef) -> Result<Vec<u8>, MediaError> {
        match fs::read(self.path_of(media)) {
            Ok(bytes) => Ok(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(MediaError::Missing {
                hash: media.hash.clone(),
            }),
            Err(e) => Err(MediaError::Io(e.to_string())),
        }
    }
}

/// Media kept in memory for a while, reading through to a [`FileMediaStore`]: for what a
/// tool makes for another MCP client (a chart), which goes out in the tool's result and
/// belongs to no conversation, so the media folder would keep it for good. Holds at most
/// `capacity` bytes; the oldest go first. Checked on the way in as the folder checks.
#[derive(Debug)]
pub struct ScratchMediaStore {
    files: FileMediaStore,
    capacity: usize,
    kept: Mutex<VecDeque<(MediaRef, Vec<u8>)>>,
}

impl ScratchMediaStore {
    pub fn new(files: FileMediaStore, capacity: usize) -> Self {
        Self {
            files,
            capacity,
            kept: Mutex::new(VecDeque::new()),
        }
    }

    /// How many bytes are held in memory now.
    pub fn held(&self) -> usize {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.iter().map(|(_, bytes)| bytes.len()).sum()
    }
}

impl MediaStore for ScratchMediaStore {
    /// What it holds under `hash` (a chart just made for an outside client), else what
    /// the media folder does.
    fn reference(&self, hash: &str) -> Option<MediaRef> {
        let held = {
            let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
            kept.iter()
                .find(|(held, _)| held.hash == hash)
                .map(|(held, _)| held.clone())
        };
        held.or_else(|| self.files.reference(hash))
    }

    fn put(&self, bytes: &[u8], declared_mime: Option<&str>) -> Result<MediaRef, MediaError> {
        if bytes.len() > self.capacity {
            return Err(MediaError::Invalid(format!(
                "{} bytes is more than the {} a result may hold",
                bytes.len(),
                self.capacity
            )));
        }
        let _turn = images::decode_turn();
        let (mime, image) = identify(bytes, declared_mime)?;
        let media = MediaRef {
            hash: sha256_hex(bytes),
            mime,
            bytes: bytes.len() as u64,
            width: image.as_ref().map(|i| i.width()),
            height: image.as_ref().map(|i| i.height()),
        };
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        // The same bytes again: held once, as the newest (they are about to be read).
        let entry = match kept.iter().position(|(held, _)| held.hash == media.hash) {
            Some(index) => kept.remove(index),
            None => None,
        }
        .unwrap_or_else(|| (media.clone(), bytes.to_vec()));
        kept.push_back(entry);
        let mut total: usize = kept.iter().map(|(_, bytes)| bytes.len()).sum();
        while total > self.capacity {
            match kept.pop_front() {
                Some((_, oldest)) => total -= oldest.len(),
                None => break,
            }
        }
        Ok(media)
    }

    fn load(&self, media: &MediaRef) -> Result<Vec<u8>, MediaError> {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        match kept.iter().find(|(held, _)| held.hash == media.hash) {
            Some((_, bytes)) => Ok(bytes.clone()),
            None => {
                drop(kept);
                self.files.load(media)
            }
        }
    }
}

/// The type of `bytes` and, for images, the decoded image. An image that does not
/// decode, or is over the limits of [`conduit_core::images`], is refused with the reason;
/// audio is recognised by its signature.
fn identify(
    bytes: &[u8],
    declared_mime: Option<&str>,
) -> Result<(String, Option<image::DynamicImage>), MediaError> {
    // Long tool output kept as a file: text that says it is text, and is. Checked first:
    // text may start like an image format ("BM", "P1").
    if let Some(text @ ("text/plain" | "application/json")) = declared_mime
        && std::str::from_utf8(bytes).is_ok()
    {
        return Ok((text.to_owned(), None));
    }
    match images::decode(bytes) {
        Ok((format, image)) => return Ok((format.to_mime_type().to_owned(), Some(image))),
        // Not an image: perhaps audio.
        Err(DecodeError::UnknownFormat(_)) => {}
        Err(e) => return Err(invalid("the image", &e)),
    }
    if let Some(audio) = audio_mime(bytes) {
        return Ok((audio.to_owned(), None));
    }
    // A PDF only where one is asked for (an attachment, a server's PDF resource): an
    // image or audio a server declares must not be stored as a PDF and reach a model or
    // a viewer as one.
    if declared_mime.is_some_and(conduit_core::attached::is_pdf_mime)
        && conduit_core::attached::is_pdf(bytes)
    {
        return Ok((conduit_core::attached::PDF_MIME.to_owned(), None));
    }
    let declared = declared_mime.unwrap_or("unknown");
    Err(MediaError::Invalid(format!(
        "the bytes are no image, audio or PDF format Conduit knows (declared as {declared})"
    )))
}

fn audio_mime(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [
            b'R',
            b'I',
            b'F',
            b'F',
            _,
            _,
            _,
            _,
            b'W',
            b'A',
            b'V',
            b'E',
            ..,
        ] => Some("audio/wav"),
        [b'O', b'g', b'g', b'S', ..] => Some("audio/ogg"),
        [b'f', b'L', b'a', b'C', ..] => Some("audio/flac"),
        [b'I', b'D', b'3', ..] | [0xFF, 0xFB | 0xF3 | 0xF2, ..] => Some("audio/mpeg"),
        _ => None,
    }
}

/// A hex SHA-256, as the store names files; anything else never becomes a path.
fn is_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Content types by extension, as the store writes them; anything else is opaque bytes.
const TYPES: [(&str, &str); 11] = [
    ("image/png", "png"),
    ("image/jpeg", "jpg"),
    ("image/gif", "gif"),
    ("image/webp", "webp"),
    ("audio/wav", "wav"),
    ("audio/ogg", "ogg"),
    ("audio/flac", "flac"),
    ("audio/mpeg", "mp3"),
    ("text/plain", "txt"),
    ("application/json", "json"),
    ("application/pdf", "pdf"),
];

fn mime_of_extension(extension: &str) -> &'static str {
    TYPES
        .iter()
        .find(|(_, ext)| *ext == extension)
        .map_or("application/octet-stream", |(mime, _)| mime)
}

fn extension(mime: &str) -> &'static str {
    TYPES
        .iter()
        .find(|(known, _)| *known == mime)
        .map_or("bin", |(_, ext)| ext)
}

fn sha256_hex(bytes: &[u8]) -> String {
    conduit_files::fingerprint_bytes(bytes)
}

/// Writes through a random temporary file and a rename, so a reader never sees half a
/// file; media files and their folders are private to the user.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    conduit_files::write_new_atomically(path, bytes, conduit_files::PRIVATE_FILE_MODE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use conduit_core::testing::{zero_png, zero_png_with};

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut out = Vec::new();
        image::DynamicImage::new_rgba8(width, height)
            .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
            .unwrap();
        out
    }

    #[test]
    fn scratch_media_stays_in_memory_holds_its_capacity_and_reads_through() {
        let dir = tempfile::tempdir().unwrap();
        let files = FileMediaStore::new(dir.path().join("media"));
        let stored = files.put(&png(3, 3), None).unwrap();
        // Five images of about one size; the store holds any two of them, never three.
        let images: Vec<Vec<u8>> = (40..45).map(|width| png(width, 20)).collect();
        let largest = images.iter().map(Vec::len).max().unwrap();
        let smallest = images.iter().map(Vec::len).min().unwrap();
        let capacity = largest * 2;
        assert!(smallest * 3 > capacity);
        let first = images[0].clone();
        let scratch = ScratchMediaStore::new(files, capacity);
        let made = scratch.put(&first, Some("image/png")).unwrap();
        assert_eq!(
            (made.mime.as_str(), made.width, made.height),
            ("image/png", Some(40), Some(20))
        );
        assert_eq!(scratch.load(&made).unwrap(), first);
        // Nothing reached the folder but what the folder was given.
        let files_on_disk = walk(&dir.path().join("media"));
        assert!(
            files_on_disk
                .iter()
                .all(|path| !path.to_string_lossy().contains(&made.hash)),
            "{files_on_disk:?}"
        );
        // The folder's media reads through.
        assert_eq!(scratch.load(&stored).unwrap(), png(3, 3));
        // The same bytes again are held once, as the newest; more than the capacity pushes
        // the oldest out.
        scratch.put(&first, None).unwrap();
        assert_eq!(scratch.held(), first.len());
        let second = scratch.put(&images[1], None).unwrap();
        scratch.put(&first, None).unwrap();
        scratch.put(&images[2], None).unwrap();
        assert!(scratch.held() <= capacity, "{}", scratch.held());
        assert_eq!(scratch.load(&made).unwrap(), first);
        assert!(matches!(
            scratch.load(&second),
            Err(MediaError::Missing { .. })
        ));
        scratch.put(&images[3], None).unwrap();
        scratch.put(&images[4], None).unwrap();
        assert!(matches!(
            scratch.load(&made),
            Err(MediaError::Missing { .. })
        ));
        // What is not an image is refused, and so is more than the whole capacity.
        assert!(matches!(
            scratch.put(b"not an image", None),
            Err(MediaError::Invalid(_))
        ));
        let huge = vec![0_u8; capacity + 1];
        assert!(matches!(
            scratch.put(&huge, None),
            Err(MediaError::Invalid(_))
        ));
    }

    #[test]
    fn an_image_is_stored_once_by_hash_with_its_real_type_and_size() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileMediaStore::new(dir.path());
        let bytes = png(3, 2);
        // Declared as JPEG; the bytes say PNG.
        let first = store.put(&bytes, Some("image/jpeg")).unwrap();
        assert_eq!(first.mime, "image/png");
        assert_eq!((first.width, first.height), (Some(3), Some(2)));
        assert_eq!(first.bytes, bytes.len() as u64);
        let second = store.put(&bytes, None).unwrap();
        assert_eq!(first, second);
        assert_eq!(store.load(&first).unwrap(), bytes);
        let mut files: Vec<_> = walk(dir.path());
        files.sort();
        assert_eq!(files.len(), 2, "the file and its thumbnail: {files:?}");
        assert!(files[0].ends_with(format!("{}.png", first.hash)));
        assert_eq!(
            store.find(&first.hash, false),
            Some((files[0].clone(), "image/png"))
        );
        assert_eq!(
            store.find(&first.hash, true).map(|f| f.1),
            Some("image/png")
        );
        assert_eq!(store.find("../../etc/passwd", false), None);
        // A link or a pipe planted under a stored name is not served (a pipe would hold
        // its reader forever, a link would serve another file).
        let secret = dir.path().join("secret.txt");
        fs::write(&secret, "not media").unwrap();
        let planted = "a".repeat(64);
        let folder = store.folder_of(&planted);
        fs::create_dir_all(&folder).unwrap();
        std::os::unix::fs::symlink(&secret, folder.join(format!("{planted}.png"))).unwrap();
        std::os::unix::fs::symlink(&secret, store.thumbnail_of(&planted)).unwrap();
        assert_eq!(store.find(&planted, false), None);
        assert_eq!(store.find(&planted, true), None);
        let piped = "b".repeat(64);
        fs::create_dir_all(store.folder_of(&piped)).unwrap();
        let pipe = store.folder_of(&piped).join(format!("{piped}.png"));
        let made = std::process::Command::new("mkfifo")
            .arg(&pipe)
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(store.find(&piped, false), None);
        assert_eq!(store.reference(&first.hash), Some(first.clone()));
        let forged = MediaRef {
            hash: "../../secrets".into(),
            ..first.clone()
        };
        assert!(
            !store
                .path_of(&forged)
                .starts_with(dir.path().parent().unwrap().join("secrets"))
        );
        assert!(store.path_of(&forged).starts_with(dir.path()));
        store.remove(&forged).unwrap();
        assert_eq!(store.find(&"0".repeat(64), false), None);
        assert_eq!(files[1], store.thumbnail_of(&first.hash));
        let thumb = image::open(&files[1]).unwrap();
        assert_eq!(
            (thumb.width(), thumb.height()),
            (3, 2),
            "small images keep their size"
        );
    }

    #[test]
    fn corrupt_images_and_unknown_bytes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileMediaStore::new(dir.path());
        let mut broken = png(50, 50);
        broken.truncate(broken.len() / 2);
        let err = store.put(&broken, Some("image/png")).unwrap_err();
        assert!(matches!(err, MediaError::Invalid(_)), "{err}");
        let err = store.put(b"plain text", Some("image/png")).unwrap_err();
        assert!(err.to_string().contains("declared as image/png"), "{err}");
        assert!(walk(dir.path()).is_empty());
    }

    #[test]
    fn long_text_is_kept_when_declared_as_text_and_valid_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileMediaStore::new(dir.path());
        let media = store
            .put("{\"a\": \"é\"}".as_bytes(), Some("application/json"))
            .unwrap();
        assert_eq!(media.mime, "application/json");
        assert!(store.path_of(&media).to_string_lossy().ends_with(".json"));
        let looks_like_bmp = store
            .put(b"BM is how this output starts", Some("text/plain"))
            .unwrap();
        assert_eq!(looks_like_bmp.mime, "text/plain");
        let err = store.put(b"\xff\xfe", Some("text/plain")).unwrap_err();
        assert!(matches!(err, MediaError::Invalid(_)), "{err}");
    }

    #[test]
    fn audio_is_recognised_by_its_signature() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileMediaStore::new(dir.path());
        let mut wav = b"RIFF\x24\x00\x00\x00WAVEfmt ".to_vec();
        wav.extend_from_slice(&[0; 24]);
        let media = store.put(&wav, Some("audio/x-wav")).unwrap();
        assert_eq!(media.mime, "audio/wav");
        assert_eq!(media.width, None);
    }

    #[test]
    fn a_pdf_is_recognised_by_its_header_stored_whole_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileMediaStore::new(dir.path());
        let paper = conduit_core::testing::pdf(12, 1_500_000);
        // Only where a PDF is asked for: declared as an image, or not at all, it is none.
        for declared in [None, Some("image/png")] {
            let err = store.put(&paper, declared).unwrap_err();
            assert!(err.to_string().contains("no image, audio or PDF"), "{err}");
        }
        let media = store
            .put(&paper, Some("Application/PDF; version=1.7"))
            .unwrap();
        assert_eq!(media.mime, "application/pdf");
        assert_eq!((media.bytes, media.width), (paper.len() as u64, None));
        assert!(store.path_of(&media).to_string_lossy().ends_with(".pdf"));
        assert_eq!(store.load(&media).unwrap(), paper);
        assert_eq!(store.reference(&media.hash), Some(media.clone()));
        // Not a PDF however it is declared.
        let err = store
            .put(b"<html>PDF</html>", Some("application/pdf"))
            .unwrap_err();
        assert!(err.to_string().contains("no image, audio or PDF"), "{err}");
    }

    #[test]
    fn a_large_image_gets_a_small_thumbnail() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileMediaStore::new(dir.path());
        let media = store.put(&png(1000, 500), None).unwrap();
        let thumb = image::open(store.thumbnail_of(&media.hash)).unwrap();
        assert_eq!((thumb.width(), thumb.height()), (256, 128));
        store.remove(&media).unwrap();
        assert!(walk(dir.path()).is_empty());
    }

    #[test]
    fn an_image_is_sized_to_an_allowed_width_keeping_its_aspect_and_never_upscaled() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileMediaStore::new(dir.path());
        let wide = store.put(&png(1600, 1000), None).unwrap();
        let (file, mime) = store.sized(&wide.hash, 1024).unwrap().unwrap();
        assert_eq!(mime, "image/png");
        assert_eq!(image::image_dimensions(&file).unwrap(), (1024, 640));
        // Made once, then served from the file.
        let modified = fs::metadata(&file).unwrap().modified().unwrap();
        let (again, _) = store.sized(&wide.hash, 1024).unwrap().unwrap();
        assert_eq!(again, file);
        assert_eq!(fs::metadata(&again).unwrap().modified().unwrap(), modified);
        // Asked wider than the image: the original itself.
        let (original, _) = store.sized(&wide.hash, 2400).unwrap().unwrap();
        assert_eq!(original, store.path_of(&wide));
        assert_eq!(store.sized(&wide.hash, 1600).unwrap().unwrap().0, original);
        // The original is still found by hash with thumbnails beside it.
        assert_eq!(store.find(&wide.hash, false).unwrap().0, original);
        assert_eq!(store.reference(&wide.hash).unwrap(), wide);
        let tall = store.put(&png(800, 3000), None).unwrap();
        let (file, _) = store.sized(&tall.hash, 512).unwrap().unwrap();
        assert_eq!(image::image_dimensions(&file).unwrap(), (512, 1920));

        // An animation is served whole: a resized PNG would keep only its first frame.
        let mut gif = Vec::new();
        image::DynamicImage::new_rgba8(1600, 1000)
            .write_to(&mut Cursor::new(&mut gif), image::ImageFormat::Gif)
            .unwrap();
        let animated = store.put(&gif, None).unwrap();
        let (file, mime) = store.sized(&animated.hash, 512).unwrap().unwrap();
        assert_eq!(
            (file.as_path(), mime),
            (store.path_of(&animated).as_path(), "image/gif")
        );
        store.remove(&animated).unwrap();

        let err = store.sized(&wide.hash, 1000).unwrap_err();
        assert!(err.to_string().contains("not a thumbnail width"), "{err}");
        assert_eq!(store.sized("../../etc/passwd", 512).unwrap(), None);
        assert_eq!(store.sized(&"a".repeat(64), 512).unwrap(), None);
        let text = store.put(b"long output", Some("text/plain")).unwrap();
        assert_eq!(store.sized(&text.hash, 512).unwrap(), None);

        store.remove(&wide).unwrap();
        store.remove(&tall).unwrap();
        store.remove(&text).unwrap();
        assert!(walk(dir.path()).is_empty(), "{:?}", walk(dir.path()));
    }

    #[test]
    fn the_hostile_tall_png_is_refused_with_its_size_and_nothing_is_stored() {
        // 257 × 2,088,000 grayscale: 3.4 MB here; it used to decode (536 MB) and a
        // 256-wide copy asked the resize for 8.5 GB.
        let hostile = zero_png(257, 2_088_000);
        let dir = tempfile::tempdir().unwrap();
        let store = FileMediaStore::new(dir.path());
        let started = std::time::Instant::now();
        let err = store.put(&hostile, Some("image/png")).unwrap_err();
        assert!(matches!(err, MediaError::Invalid(_)), "{err:?}");
        assert!(
            err.to_string()
                .contains("the image is 257×2088000 pixels; the most Conduit reads is 32768"),
            "{err}"
        );
        let scratch = ScratchMediaStore::new(FileMediaStore::new(dir.path()), 8 << 20);
        let err = scratch.put(&hostile, Some("image/png")).unwrap_err();
        assert!(err.to_string().contains("257×2088000"), "{err}");
        assert_eq!(scratch.held(), 0);
        assert!(walk(dir.path()).is_empty(), "{:?}", walk(dir.path()));

        // Stored before the limits were kept: sized for the window, it is refused by its
        // size, and no copy is made.
        let media = MediaRef {
            hash: sha256_hex(&hostile),
            mime: "image/png".into(),
            bytes: hostile.len() as u64,
            width: None,
            height: None,
        };
        write_atomically(&store.path_of(&media), &hostile).unwrap();
        assert_eq!(
            store.reference(&media.hash).map(|r| (r.width, r.height)),
            Some((Some(257), Some(2_088_000))),
            "the header alone is read"
        );
        let err = store.sized(&media.hash, 256).unwrap_err();
        assert!(
            err.to_string().contains("the image is 257×2088000 pixels"),
            "{err}"
        );
        assert_eq!(walk(dir.path()), [store.path_of(&media)]);
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn a_frame_and_a_full_page_screenshot_store_and_size_keeping_their_aspect() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileMediaStore::new(dir.path());
        // A Figma frame.
        let frame = store.put(&png(1600, 1000), None).unwrap();
        assert_eq!((frame.width, frame.height), (Some(1600), Some(1000)));
        let (file, _) = store.sized(&frame.hash, 256).unwrap().unwrap();
        assert_eq!(image::image_dimensions(&file).unwrap(), (256, 160));
        // A full-page screenshot (RGB), 25.6 million pixels.
        let page = store
            .put(&zero_png_with(1280, 20_000, 2, 8), Some("image/png"))
            .unwrap();
        assert_eq!((page.width, page.height), (Some(1280), Some(20_000)));
        let thumb = image::image_dimensions(store.thumbnail_of(&page.hash)).unwrap();
        assert_eq!(thumb, (16, 256));
        // Asked 256 wide it would be 4000 tall: it fits 256 × 2400 instead, the same shape.
        let (file, mime) = store.sized(&page.hash, 256).unwrap().unwrap();
        assert_eq!(mime, "image/png");
        let (width, height) = image::image_dimensions(&file).unwrap();
        assert_eq!((width, height), (154, SIZED_MAX_HEIGHT));
        let (natural, shown) = (1280.0 / 20_000.0, f64::from(width) / f64::from(height));
        assert!((natural - shown).abs() < 0.001, "{natural} vs {shown}");
        let (file, _) = store.sized(&page.hash, 1024).unwrap().unwrap();
        assert_eq!(image::image_dimensions(&file).unwrap(), (154, 2400));
        // Wider than the screenshot: the original.
        let (file, _) = store.sized(&page.hash, 2400).unwrap().unwrap();
        assert_eq!(file, store.path_of(&page));
    }

    #[test]
    fn a_missing_file_is_reported_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileMediaStore::new(dir.path());
        let media = store.put(&png(1, 1), None).unwrap();
        fs::remove_file(store.path_of(&media)).unwrap();
        assert!(matches!(
            store.load(&media),
            Err(MediaError::Missing { .. })
        ));
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
        out
    }
}
