//! Conversations on SQLite: each block written as it completes, full-text search with
//! snippets, a database that survives a crash mid-answer, and media collected when no
//! message references it any more.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, MutexGuard};

use conduit_core::content::{Block, MediaRef, Message, Role, ToolCall, repair_history};
use conduit_core::provider::Usage;
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::media::FileMediaStore;
use crate::schema::{self, VersionProblem};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "the history database {path} was written by a newer Conduit (schema {found}, this one knows {known}); update Conduit, it will not downgrade the file"
    )]
    NewerVersion {
        path: String,
        found: i64,
        known: i64,
    },
    #[error(
        "the history database was corrupt ({reason}); it was moved to {moved_to} untouched, and a new, empty history begins in its place"
    )]
    Corrupt {
        #[source]
        reason: rusqlite::Error,
        moved_to: String,
    },
    #[error("the disk is full: the history could not be saved ({0})")]
    DiskFull(#[source] rusqlite::Error),
    #[error("there is no conversation {0:?}")]
    UnknownConversation(String),
    #[error("a title of {chars} characters is too long: at most {max}")]
    TitleTooLong { chars: usize, max: usize },
    #[error("the history database failed: {0}")]
    Database(#[source] rusqlite::Error),
    #[error(
        "the history database {path} is corrupt ({reason}) and could not be moved aside: {source}"
    )]
    CorruptStuck {
        path: String,
        /// Why it is corrupt (the cause kept is why it could not be moved).
        reason: rusqlite::Error,
        #[source]
        source: std::io::Error,
    },
    /// Corrupt, and another Conduit process has it open: moved aside, that process would
    /// go on writing into the moved file, and remove the new one's journal as it ends.
    #[error(
        "the history database {path} is damaged ({reason}), and another Conduit process has it open (a window, `conduit mcp serve`, another command): close them all, then start again to have it moved aside and a new one made"
    )]
    CorruptInUse {
        path: String,
        #[source]
        reason: rusqlite::Error,
    },
    #[error("cannot encode a message as JSON: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        match err.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DiskFull) => StoreError::DiskFull(err),
            _ => StoreError::Database(err),
        }
    }
}

/// How far a message got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum MessageStatus {
    Complete,
    Streaming,
    Interrupted,
    Error,
    /// An answer the user had written again ("Answer again"): kept and shown, never read
    /// by the model again.
    Replaced,
}

impl MessageStatus {
    fn as_str(self) -> &'static str {
        match self {
            MessageStatus::Complete => "complete",
            MessageStatus::Streaming => "streaming",
            MessageStatus::Interrupted => "interrupted",
            MessageStatus::Error => "error",
            MessageStatus::Replaced => "replaced",
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "complete" => MessageStatus::Complete,
            "streaming" => MessageStatus::Streaming,
            "error" => MessageStatus::Error,
            "replaced" => MessageStatus::Replaced,
            _ => MessageStatus::Interrupted,
        }
    }
}

/// A conversation as lists show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    pub id: String,
    pub title: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub message_count: i64,
    /// Pinned to the top of the list by the user.
    pub pinned: bool,
}

/// A stored message with its status and usage.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct StoredMessage {
    pub id: i64,
    pub role: Role,
    pub status: MessageStatus,
    pub blocks: Vec<Block>,
    pub usage: Option<Usage>,
    pub error: Option<String>,
    pub created_at: i64,
}

impl StoredMessage {
    /// An answer that failed or was stopped with no call in it: one the user may have
    /// answered again (Try again), which the model then no longer reads. Not one still
    /// streaming: another run may be writing it.
    pub fn is_failed_answer(&self) -> bool {
        self.role == Role::Assistant
            && matches!(
                self.status,
                MessageStatus::Error | MessageStatus::Interrupted
            )
            && !self
                .blocks
                .iter()
                .any(|block| matches!(block, Block::ToolCall(_)))
    }
}

/// One search result: where, and the matching text with each match between
/// [`MATCH_START`] and [`MATCH_END`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub conversation_id: String,
    pub title: String,
    pub message_id: i64,
    pub snippet: String,
    pub created_at: i64,
}

/// What opens and closes a match in a snippet: characters of Unicode's private use area,
/// taken out of text as it is indexed, so a bracket the text has (`data[0]`, a Markdown
/// link, JSON) is never taken for a match, as `[` `]` were.
pub const MATCH_START: char = '\u{E000}';
pub const MATCH_END: char = '\u{E001}';

impl SearchHit {
    /// The snippet with each match in `[` `]`, for a terminal or a model.
    pub fn snippet_bracketed(&self) -> String {
        self.snippet
            .replace(MATCH_START, "[")
            .replace(MATCH_END, "]")
    }
}

/// How recently a file must have been stored for a conversation's deletion to leave it,
/// when this process did not store it: another process may hold it for a message it has
/// not saved yet.
const STORED_ELSEWHERE_RECENTLY: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// The history database and the media folder beside it.
pub struct Store {
    conn: Mutex<Connection>,
    media: FileMediaStore,
    /// This process's lease among the file's writers, named in the messages it streams;
    /// `None` when none could be taken (its streaming messages then look left by a crash
    /// to another process opening the file, as every message did before leases).
    writer: Option<conduit_files::Lease>,
    /// The database file: a corrupt one moved aside beside it holds back the media sweep.
    pub(crate) path: PathBuf,
}

const TITLE_CHARS: usize = 60;

/// How many search rows are read for each hit asked for: a message matches in several
/// rows when several of its blocks do.
const ROWS_PER_HIT: usize = 8;

/// The most search rows one search reads to find its hits.
const MAX_SEARCH_ROWS: usize = 100_000;

/// The longest title a user may give a conversation, in characters.
pub const MAX_TITLE_CHARS: usize = 200;

/// Creates the database file private (0600) before SQLite opens it, and makes an existing
/// one and its WAL and shared-memory files private: SQLite gives the WAL and SHM files it
/// creates the database file's permissions. Only permissions change, never a byte.
fn make_database_private(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(conduit_files::PRIVATE_FILE_MODE);
    }
    match options.open(path) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        conduit_files::make_private(Path::new(&name))?;
    }
    Ok(())
}

/// How long opening the history waits for another process opening it (a migration of a
/// large file takes a while; a process that hangs holding the turn must not hang this one).
const OPENING_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// Beside the database, written when a check of the whole file ([`Store::check_whole`])
/// found it damaged, with what the check said: the next open checks the whole file before
/// using it, and moves it aside if it is still damaged.
pub(crate) fn damage_mark(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".damaged");
    PathBuf::from(name)
}

/// `PRAGMA quick_check`: every page of the file read, its structure checked. `Err` with
/// SQLite's `SQLITE_CORRUPT` when it is damaged, saying where.
fn quick_check(conn: &Connection) -> Result<(), rusqlite::Error> {
    let check: String = conn.query_row("PRAGMA quick_check", [], |row| row.get(0))?;
    if check != "ok" {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
            Some(check),
        ));
    }
    Ok(())
}

/// The folder of the leases of the processes writing the database at `path`.
fn writers_dir(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-writers");
    PathBuf::from(name)
}

/// Marks interrupted the messages left streaming by a process that ended (a crash, a
/// kill): those whose writer's lease no one holds. A message another running process
/// (the app, `conduit chat`, `conduit mcp serve`) is streaming stays as it is.
fn mark_interrupted(conn: &Connection, writers: &Path) -> Result<(), StoreError> {
    let mut statement =
        conn.prepare("SELECT DISTINCT writer FROM messages WHERE status = 'streaming'")?;
    let streaming: Vec<Option<String>> = statement
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    let mut interrupted = 0;
    for writer in streaming {
        let running = match &writer {
            None => false,
            Some(id) => conduit_files::lease_held(writers, id).unwrap_or_else(|error| {
                tracing::warn!(%error, "a writer's lease could not be read: its streaming messages are taken for interrupted");
                false
            }),
        };
        if !running {
            interrupted += conn.execute(
                "UPDATE messages SET status = 'interrupted' WHERE status = 'streaming' AND writer IS ?1",
                [&writer],
            )?;
        }
    }
    if interrupted > 0 {
        tracing::warn!(
            interrupted,
            "messages left streaming by a crash are marked interrupted"
        );
    }
    Ok(())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

impl Store {
    /// Opens (or creates) the database at `path`, migrates it, and marks messages left
    /// streaming by a crash as interrupted. A corrupt file is moved aside, never rewritten.
    pub fn open(path: &Path, media: FileMediaStore) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent() {
            conduit_files::create_private_dir(dir).map_err(|source| StoreError::Io {
                path: dir.display().to_string(),
                source,
            })?;
        }
        make_database_private(path).map_err(|source| StoreError::Io {
            path: path.display().to_string(),
            source,
        })?;
        // Processes opening the file take turns until it is checked, migrated and its
        // left-over answers marked: two opening a new file at once had one fail while the
        // other created its search table ("vtable constructor failed: search").
        let _opening =
            conduit_files::lock_beside_within(path, OPENING_PATIENCE).map_err(|source| {
                StoreError::Io {
                    path: path.display().to_string(),
                    source,
                }
            })?;
        let mut conn = match Self::connect(path) {
            Ok(conn) => conn,
            Err(err) if is_corruption(&err) => return Err(move_aside(path, err)),
            Err(err) => return Err(err.into()),
        };
        let found: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        if found > schema::CURRENT {
            return Err(StoreError::NewerVersion {
                path: path.display().to_string(),
                found,
                known: schema::CURRENT,
            });
        }
        Self::configure(&conn)?;
        // The app, `conduit chat` and `conduit mcp serve` share this file. A deferred
        // transaction that reads and then writes fails at once (SQLITE_BUSY, past the
        // busy timeout) when another process committed in between; an immediate one takes
        // the write lock first, waiting for it up to the busy timeout.
        conn.set_transaction_behavior(rusqlite::TransactionBehavior::Immediate);
        match schema::migrate(&mut conn) {
            Ok(Ok(())) => {}
            Ok(Err(VersionProblem::Newer(found))) => {
                return Err(StoreError::NewerVersion {
                    path: path.display().to_string(),
                    found,
                    known: schema::CURRENT,
                });
            }
            Err(err) if is_corruption(&err) => {
                drop(conn);
                return Err(move_aside(path, err));
            }
            Err(err) => return Err(err.into()),
        }
        let writers = writers_dir(path);
        let writer = match conduit_files::Lease::take(&writers) {
            Ok(lease) => Some(lease),
            Err(error) => {
                tracing::warn!(%error, dir = %writers.display(), "no writer's lease: another process opening the history will take this one's streaming messages for interrupted");
                None
            }
        };
        // Not a reason to refuse the history: a write lock another process holds, or a
        // full disk, leaves the marks for the next open (the messages show as they were).
        if let Err(error) = mark_interrupted(&conn, &writers) {
            tracing::warn!(%error, "messages left streaming could not be marked interrupted; the next open tries again");
        }
        if let Err(error) = conduit_files::sweep_leases(&writers, writer.as_ref()) {
            tracing::debug!(%error, "ended writers' leases not swept");
        }
        Ok(Self {
            conn: Mutex::new(conn),
            media,
            writer,
            path: path.to_owned(),
        })
    }

    /// Opens the file and checks it without writing anything: a corrupt file or one from
    /// a newer Conduit stays byte for byte as it was.
    ///
    /// Only the file's header and schema are read here; the whole file is checked only
    /// when a check in the background found it damaged (`damage_mark`). Checking the
    /// whole file at every open held up every start and every `conduit` command: 0.56 s
    /// for a history of 110,000 messages (83 MB), linear in its size ("History" in
    /// ARCHITECTURE.md).
    fn connect(path: &Path) -> Result<Connection, rusqlite::Error> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // Reading the schema fails at once on a file that is not a database, or whose
        // header or schema is damaged.
        conn.query_row("SELECT count(*) FROM sqlite_schema", [], |row| {
            row.get::<_, i64>(0)
        })?;
        let mark = damage_mark(path);
        if mark.exists() {
            quick_check(&conn)?;
            if let Err(error) = std::fs::remove_file(&mark) {
                tracing::warn!(%error, mark = %mark.display(), "the history database checks whole again, but the mark of its damage could not be removed");
            }
        }
        Ok(conn)
    }

    /// Checks the whole file (`PRAGMA quick_check`: every page read) on a connection of
    /// its own, leaving the store's free: a window goes on reading and writing its
    /// history meanwhile. Damage found is written beside the file (`damage_mark`), and
    /// the next open moves the file aside if it is still damaged; `Some` says what the
    /// check found.
    pub fn check_whole(&self) -> Result<Option<String>, StoreError> {
        // Never made anew (a file removed meanwhile), with the umask's permissions.
        let conn = Connection::open_with_flags(
            &self.path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        let found = match quick_check(&conn) {
            Ok(()) => return Ok(None),
            Err(err) if is_corruption(&err) => err.to_string(),
            Err(err) => return Err(err.into()),
        };
        let mark = damage_mark(&self.path);
        std::fs::write(&mark, &found).map_err(|source| StoreError::Io {
            path: mark.display().to_string(),
            source,
        })?;
        tracing::error!(%found, "the history database is damaged: the next start moves it aside and makes a new one");
        Ok(Some(found))
    }

    fn configure(conn: &Connection) -> Result<(), rusqlite::Error> {
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock()
    }

    pub fn media(&self) -> &FileMediaStore {
        &self.media
    }

    /// Caps the database's size in pages: for tests of a full disk.
    pub fn limit_pages(&self, pages: u64) -> Result<(), StoreError> {
        self.lock()
            .pragma_update(None, "max_page_count", pages as i64)?;
        Ok(())
    }

    pub fn create_conversation(
        &self,
        provider: Option<&str>,
        model: Option<&str>,
    ) -> Result<String, StoreError> {
        let id = uuid::Uuid::now_v7().to_string();
        let now = now_ms();
        self.lock().execute(
            "INSERT INTO conversations (id, title, provider, model, created_at, updated_at)
             VALUES (?1, ?5, ?2, ?3, ?4, ?4)",
            params![id, provider, model, now, NEW_TITLE],
        )?;
        Ok(id)
    }

    /// The tools a conversation may use, as its owner wrote them (JSON); `None` when it
    /// never chose (every enabled tool).
    pub fn toolset(&self, conversation: &str) -> Result<Option<String>, StoreError> {
        self.lock()
            .query_row(
                "SELECT toolset FROM conversations WHERE id = ?1",
                [conversation],
                |row| row.get::<_, Option<String>>(0),
            )
            .optional()?
            .ok_or_else(|| StoreError::UnknownConversation(conversation.to_owned()))
    }

    /// Keeps the tools a conversation may use (`None`: every enabled tool again).
    pub fn set_toolset(&self, conversation: &str, toolset: Option<&str>) -> Result<(), StoreError> {
        let changed = self.lock().execute(
            "UPDATE conversations SET toolset = ?2 WHERE id = ?1",
            params![conversation, toolset],
        )?;
        if changed == 0 {
            return Err(StoreError::UnknownConversation(conversation.to_owned()));
        }
        Ok(())
    }

    /// A conversation's instructions to the model (its system prompt); `None`: none.
    pub fn instructions(&self, conversation: &str) -> Result<Option<String>, StoreError> {
        self.lock()
            .query_row(
                "SELECT instructions FROM conversations WHERE id = ?1",
                [conversation],
                |row| row.get::<_, Option<String>>(0),
            )
            .optional()?
            .ok_or_else(|| StoreError::UnknownConversation(conversation.to_owned()))
    }

    /// Keeps a conversation's instructions to the model (`None`: none).
    pub fn set_instructions(
        &self,
        conversation: &str,
        instructions: Option<&str>,
    ) -> Result<(), StoreError> {
        let changed = self.lock().execute(
            "UPDATE conversations SET instructions = ?2 WHERE id = ?1",
            params![conversation, instructions],
        )?;
        if changed == 0 {
            return Err(StoreError::UnknownConversation(conversation.to_owned()));
        }
        Ok(())
    }

    pub fn conversation(&self, id: &str) -> Result<Conversation, StoreError> {
        let conn = self.lock();
        conn.query_row(
            "SELECT c.id, c.title, c.provider, c.model, c.created_at, c.updated_at,
                    (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id), c.pinned
             FROM conversations c WHERE c.id = ?1",
            [id],
            row_to_conversation,
        )
        .optional()?
        .ok_or_else(|| StoreError::UnknownConversation(id.to_owned()))
    }

    /// The saved call `call_id` of `conversation` whose saved result names an MCP Apps
    /// view: the call the host ran and its server answered with a view. `None` when there
    /// is no such call, or when more than one call has that id (conversations saved
    /// before Conduit made its own call ids keep the provider's, which can repeat).
    pub fn call_with_view(
        &self,
        conversation: &str,
        call_id: &str,
    ) -> Result<Option<ToolCall>, StoreError> {
        let conn = self.lock();
        let mut statement = conn.prepare(
            "SELECT b.data FROM blocks b JOIN messages m ON m.id = b.message_id
             WHERE m.conversation_id = ?1 AND b.kind = 'tool_call'
               AND json_extract(b.data, '$.id') = ?2
             LIMIT 2",
        )?;
        let calls = statement
            .query_map(params![conversation, call_id], |row| {
                row.get::<_, String>(0)
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let [call] = calls.as_slice() else {
            return Ok(None);
        };
        let answered_with_view = conn
            .query_row(
                "SELECT 1 FROM blocks b JOIN messages m ON m.id = b.message_id,
                        json_each(b.data, '$.parts') part
                 WHERE m.conversation_id = ?1 AND b.kind = 'tool_result'
                   AND json_extract(b.data, '$.call_id') = ?2
                   AND json_extract(part.value, '$.type') = 'view'
                 LIMIT 1",
                params![conversation, call_id],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if !answered_with_view {
            return Ok(None);
        }
        // A block this version cannot read vouches for nothing: no view is opened for it.
        match serde_json::from_str::<Block>(call) {
            Ok(Block::ToolCall(call)) => Ok(Some(call)),
            _ => Ok(None),
        }
    }

    /// Records that the call `call_id` of `conversation` ran on the server whose entry has
    /// the fingerprint `server_print`. The first record of a call stays.
    pub fn record_call_server(
        &self,
        conversation: &str,
        call_id: &str,
        server_print: &str,
    ) -> Result<(), StoreError> {
        self.lock().execute(
            "INSERT OR IGNORE INTO call_servers (conversation_id, call_id, server_print)
             VALUES (?1, ?2, ?3)",
            params![conversation, call_id, server_print],
        )?;
        Ok(())
    }

    /// The fingerprint of the server the call `call_id` of `conversation` ran on; `None`
    /// for a call saved before Conduit recorded it (or none at all).
    pub fn call_server(
        &self,
        conversation: &str,
        call_id: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(self
            .lock()
            .query_row(
                "SELECT server_print FROM call_servers WHERE conversation_id = ?1 AND call_id = ?2",
                params![conversation, call_id],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// Conversations, most recently updated first.
    pub fn list(&self, limit: usize) -> Result<Vec<Conversation>, StoreError> {
        self.list_by(limit, "c.updated_at DESC, c.id DESC")
    }

    /// The conversations as the user's list shows them: the pinned ones first, then the
    /// rest, each most recently changed first. ([`Store::list`], by recency alone, is what
    /// models and outside clients get: a pin is the user's, not theirs.)
    pub fn list_pinned_first(&self, limit: usize) -> Result<Vec<Conversation>, StoreError> {
        self.list_by(limit, "c.pinned DESC, c.updated_at DESC, c.id DESC")
    }

    /// The first `limit` conversations in `order` (an index serves each order used).
    fn list_by(&self, limit: usize, order: &'static str) -> Result<Vec<Conversation>, StoreError> {
        let conn = self.lock();
        let mut statement = conn.prepare(&format!(
            "SELECT c.id, c.title, c.provider, c.model, c.created_at, c.updated_at,
                    (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id), c.pinned
             FROM conversations c ORDER BY {order} LIMIT ?1"
        ))?;
        let rows = statement.query_map([limit as i64], row_to_conversation)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Starts a message; its blocks follow with [`Store::append_block`].
    pub fn begin_message(
        &self,
        conversation: &str,
        role: Role,
        status: MessageStatus,
    ) -> Result<i64, StoreError> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        let exists: bool = tx
            .query_row(
                "SELECT 1 FROM conversations WHERE id = ?1",
                [conversation],
                |_| Ok(true),
            )
            .optional()?
            .unwrap_or(false);
        if !exists {
            return Err(StoreError::UnknownConversation(conversation.to_owned()));
        }
        let position: i64 = tx.query_row(
            "SELECT coalesce(max(position) + 1, 0) FROM messages WHERE conversation_id = ?1",
            [conversation],
            |row| row.get(0),
        )?;
        let now = now_ms();
        let writer = match status {
            MessageStatus::Streaming => self.writer.as_ref().map(conduit_files::Lease::id),
            _ => None,
        };
        tx.execute(
            "INSERT INTO messages (conversation_id, position, role, status, created_at, writer)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                conversation,
                position,
                role_name(role),
                status.as_str(),
                now,
                writer
            ],
        )?;
        let id = tx.last_insert_rowid();
        tx.execute(
            "UPDATE conversations SET updated_at = ?2 WHERE id = ?1",
            params![conversation, now],
        )?;
        tx.commit()?;
        Ok(id)
    }

    /// Writes one completed block, its search text and media references, in one
    /// transaction. The first user text names an untitled conversation.
    pub fn append_block(&self, message_id: i64, block: &Block) -> Result<(), StoreError> {
        let data = serde_json::to_string(block).map_err(StoreError::Encode)?;
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        let (conversation, role): (String, String) = tx.query_row(
            "SELECT conversation_id, role FROM messages WHERE id = ?1",
            [message_id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        let position: i64 = tx.query_row(
            "SELECT count(*) FROM blocks WHERE message_id = ?1",
            [message_id],
            |row| row.get(0),
        )?;
        tx.execute(
            "INSERT INTO blocks (message_id, position, kind, data) VALUES (?1, ?2, ?3, ?4)",
            params![message_id, position, block_kind(block), data],
        )?;
        let text = searchable_text(block).replace([MATCH_START, MATCH_END], "");
        if !text.is_empty() {
            tx.execute(
                "INSERT INTO search (text, message_id, conversation_id) VALUES (?1, ?2, ?3)",
                params![crate::words::spaced(&text), message_id, conversation],
            )?;
            tx.execute(
                "INSERT INTO search_rows (row, conversation_id) VALUES (?1, ?2)",
                params![tx.last_insert_rowid(), conversation],
            )?;
        }
        for media in block.media() {
            tx.execute(
                "INSERT OR IGNORE INTO media (hash, mime, bytes, width, height) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![media.hash, media.mime, media.bytes as i64, media.width, media.height],
            )?;
            tx.execute(
                "INSERT INTO block_media (message_id, hash) VALUES (?1, ?2)",
                params![message_id, media.hash],
            )?;
        }
        // A message of only a file is named after the file.
        if let (
            Block::Text { text }
            | Block::File { name: text, .. }
            | Block::Document { name: text, .. },
            "user",
        ) = (block, role.as_str())
        {
            tx.execute(
                "UPDATE conversations SET title = ?2 WHERE id = ?1 AND title_is_custom = 0 AND title = ?3",
                params![conversation, derive_title(text), NEW_TITLE],
            )?;
        }
        tx.execute(
            "UPDATE conversations SET updated_at = ?2 WHERE id = ?1",
            params![conversation, now_ms()],
        )?;
        tx.commit()?;
        self.media
            .settled(block.media().into_iter().map(|media| media.hash.as_str()));
        Ok(())
    }

    /// Sets how a message ended, with its usage and error.
    pub fn finish_message(
        &self,
        message_id: i64,
        status: MessageStatus,
        usage: Option<Usage>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.lock().execute(
            "UPDATE messages SET status = ?2, input_tokens = ?3, output_tokens = ?4, error = ?5 WHERE id = ?1",
            params![
                message_id,
                status.as_str(),
                usage.map(|u| u.input_tokens as i64),
                usage.map(|u| u.output_tokens as i64),
                error
            ],
        )?;
        Ok(())
    }

    /// Stores a whole message at once (user messages, tool results).
    pub fn add_message(
        &self,
        conversation: &str,
        message: &Message,
        status: MessageStatus,
    ) -> Result<i64, StoreError> {
        let id = self.begin_message(conversation, message.role, MessageStatus::Streaming)?;
        let written = message
            .blocks
            .iter()
            .try_for_each(|block| self.append_block(id, block))
            .and_then(|()| self.finish_message(id, status, None, None));
        if let Err(error) = written {
            // Not left "streaming" under this process's lease (nothing would mark it while
            // the process runs): what was written of it shows as interrupted, if the store
            // takes that much now.
            if let Err(again) = self.finish_message(id, MessageStatus::Interrupted, None, None) {
                tracing::warn!(error = %again, "a message whose saving failed could not be marked interrupted");
            }
            return Err(error);
        }
        Ok(id)
    }

    /// The messages of a conversation, oldest first; `newest` keeps only the last N.
    pub fn messages(
        &self,
        conversation: &str,
        newest: Option<usize>,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        self.page(conversation, None, newest)
    }

    /// The ids of a conversation's messages, oldest first: where each one is, without
    /// reading any of their blocks.
    pub fn message_ids(&self, conversation: &str) -> Result<Vec<i64>, StoreError> {
        self.conversation(conversation)?;
        let conn = self.lock();
        let mut statement = conn
            .prepare("SELECT id FROM messages WHERE conversation_id = ?1 ORDER BY position ASC")?;
        let ids = statement
            .query_map([conversation], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(ids)
    }

    /// The last `newest` messages (all without a limit) before message `before` (or the
    /// end), oldest first: a window pages back through a long conversation with this.
    pub fn page(
        &self,
        conversation: &str,
        before: Option<i64>,
        newest: Option<usize>,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        self.window(conversation, before, false, newest)
    }

    /// The last `newest` messages up to and including message `last`, oldest first: a page
    /// that ends where a reader saw the conversation end, whatever came after.
    pub fn page_through(
        &self,
        conversation: &str,
        last: i64,
        newest: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        self.window(conversation, Some(last), true, Some(newest))
    }

    /// The last `newest` messages before message `bound` (or up to it, `through`; or the
    /// end), oldest first.
    fn window(
        &self,
        conversation: &str,
        bound: Option<i64>,
        through: bool,
        newest: Option<usize>,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        self.conversation(conversation)?;
        let conn = self.lock();
        let mut statement = conn.prepare(
            "SELECT id, role, status, input_tokens, output_tokens, error, created_at FROM (
                 SELECT * FROM messages WHERE conversation_id = ?1
                 AND (?3 IS NULL OR position < (SELECT position FROM messages WHERE id = ?3) + ?4)
                 ORDER BY position DESC LIMIT ?2
             ) ORDER BY position ASC",
        )?;
        let limit = newest.map(|n| n as i64).unwrap_or(-1);
        let mut messages: Vec<StoredMessage> = statement
            .query_map(
                params![conversation, limit, bound, i64::from(through)],
                |row| {
                    let role: String = row.get(1)?;
                    let status: String = row.get(2)?;
                    let input: Option<i64> = row.get(3)?;
                    let output: Option<i64> = row.get(4)?;
                    Ok(StoredMessage {
                        id: row.get(0)?,
                        role: parse_role(&role),
                        status: MessageStatus::parse(&status),
                        blocks: Vec::new(),
                        usage: match (input, output) {
                            (None, None) => None,
                            (i, o) => Some(Usage {
                                input_tokens: i.unwrap_or_default() as u64,
                                output_tokens: o.unwrap_or_default() as u64,
                                ..Default::default()
                            }),
                        },
                        error: row.get(5)?,
                        created_at: row.get(6)?,
                    })
                },
            )?
            .collect::<Result<_, _>>()?;
        let mut blocks =
            conn.prepare("SELECT data FROM blocks WHERE message_id = ?1 ORDER BY position")?;
        for message in &mut messages {
            let rows = blocks.query_map([message.id], |row| row.get::<_, String>(0))?;
            for data in rows {
                let data = data?;
                match serde_json::from_str::<Block>(&data) {
                    Ok(block) => message.blocks.push(block),
                    Err(err) => message.blocks.push(Block::text(format!(
                        "[a block this version of Conduit cannot read: {err}]"
                    ))),
                }
            }
        }
        Ok(messages)
    }

    /// The conversation as a history to send to a model: every tool call answered, and
    /// an answer that failed or was stopped left out when another answer followed it (the
    /// user had it answered again): it stays stored and shown, but the model reads the
    /// question once, answered once.
    pub fn history(&self, conversation: &str) -> Result<Vec<Message>, StoreError> {
        let stored: Vec<StoredMessage> = self
            .messages(conversation, None)?
            .into_iter()
            .filter(|m| !m.blocks.is_empty() && m.status != MessageStatus::Replaced)
            .collect();
        let answered_again = |at: usize| {
            stored[at].is_failed_answer()
                && stored
                    .get(at + 1)
                    .is_some_and(|next| next.role == Role::Assistant)
        };
        let keep: Vec<bool> = (0..stored.len()).map(|at| !answered_again(at)).collect();
        let mut history: Vec<Message> = stored
            .into_iter()
            .zip(keep)
            .filter(|(_, keep)| *keep)
            .map(|(m, _)| Message {
                role: m.role,
                blocks: m.blocks,
            })
            .collect();
        repair_history(&mut history);
        Ok(history)
    }

    /// Marks what answered the conversation's last user message (every message after it)
    /// as replaced: kept and shown, left out of what the model reads from now on, so the
    /// message can be answered anew. How many messages it marked.
    pub fn replace_answer(&self, conversation: &str) -> Result<usize, StoreError> {
        self.replace_from_last_user(conversation, ">")
    }

    /// Marks the conversation's last user message and what answered it as replaced: a
    /// changed message goes in its place. How many messages it marked. When that was the
    /// conversation's first message, a title made from it goes too (the changed message
    /// names the conversation as it is saved); a title the user gave stays.
    pub fn replace_last_message(&self, conversation: &str) -> Result<usize, StoreError> {
        let marked = self.replace_from_last_user(conversation, ">=")?;
        if marked > 0 {
            self.lock().execute(
                "UPDATE conversations SET title = ?4
                 WHERE id = ?1 AND title_is_custom = 0 AND NOT EXISTS (
                     SELECT 1 FROM messages
                     WHERE conversation_id = ?1 AND role = ?2 AND status <> ?3
                 )",
                params![
                    conversation,
                    role_name(Role::User),
                    MessageStatus::Replaced.as_str(),
                    NEW_TITLE
                ],
            )?;
        }
        Ok(marked)
    }

    /// Marks the messages after (`>`) or from (`>=`) the last user message not replaced
    /// already as replaced; none while one of them is still being written (another
    /// process answers there: replacing the question without its answer would leave the
    /// model an answer to nothing).
    fn replace_from_last_user(
        &self,
        conversation: &str,
        from: &'static str,
    ) -> Result<usize, StoreError> {
        let changed = self.lock().execute(
            &format!(
                "WITH last_user AS (
                     SELECT MAX(position) AS at FROM messages
                     WHERE conversation_id = ?1 AND role = ?3 AND status <> ?2
                 )
                 UPDATE messages SET status = ?2
                 WHERE conversation_id = ?1 AND status <> ?2
                   AND position {from} (SELECT at FROM last_user)
                   AND NOT EXISTS (
                       SELECT 1 FROM messages WHERE conversation_id = ?1 AND status = ?4
                       AND position {from} (SELECT at FROM last_user)
                   )"
            ),
            params![
                conversation,
                MessageStatus::Replaced.as_str(),
                role_name(Role::User),
                MessageStatus::Streaming.as_str()
            ],
        )?;
        Ok(changed)
    }

    /// Pins a conversation to the top of the list, or unpins it.
    pub fn set_pinned(&self, conversation: &str, pinned: bool) -> Result<(), StoreError> {
        let changed = self.lock().execute(
            "UPDATE conversations SET pinned = ?2 WHERE id = ?1",
            params![conversation, pinned],
        )?;
        if changed == 0 {
            return Err(StoreError::UnknownConversation(conversation.to_owned()));
        }
        Ok(())
    }

    pub fn rename(&self, conversation: &str, title: &str) -> Result<(), StoreError> {
        // Every list of conversations carries every title: one of megabytes (a script in
        // the page may send it) would weigh on each refresh. A title is one line.
        let title: String = title
            .trim()
            .chars()
            .map(|c| {
                if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                    ' '
                } else {
                    c
                }
            })
            .collect();
        let chars = title.chars().count();
        if chars > MAX_TITLE_CHARS {
            return Err(StoreError::TitleTooLong {
                chars,
                max: MAX_TITLE_CHARS,
            });
        }
        let changed = self.lock().execute(
            "UPDATE conversations SET title = ?2, title_is_custom = 1 WHERE id = ?1",
            params![conversation, title],
        )?;
        if changed == 0 {
            return Err(StoreError::UnknownConversation(conversation.to_owned()));
        }
        Ok(())
    }

    /// Deletes a conversation, and the media files no other message references. A file
    /// is left to the sweep when the same image may wait for a message not saved yet (an
    /// attachment while the user writes, a tool's image while its turn runs): when this
    /// process stored it for such a message (however long ago, within the sweep's day),
    /// or when it was stored in the last [`STORED_ELSEWHERE_RECENTLY`] (another process,
    /// `conduit chat`, may be the one waiting).
    pub fn delete(&self, conversation: &str) -> Result<(), StoreError> {
        let mut conn = self.lock();
        let orphans: Vec<MediaRef> = {
            let tx = conn.transaction()?;
            // By the indexed rows: `search`'s own conversation column is read row by row.
            tx.execute(
                "DELETE FROM search WHERE rowid IN
                 (SELECT row FROM search_rows WHERE conversation_id = ?1)",
                [conversation],
            )?;
            tx.execute(
                "DELETE FROM search_rows WHERE conversation_id = ?1",
                [conversation],
            )?;
            let deleted = tx.execute("DELETE FROM conversations WHERE id = ?1", [conversation])?;
            if deleted == 0 {
                return Err(StoreError::UnknownConversation(conversation.to_owned()));
            }
            let orphans = {
                let mut statement = tx.prepare(
                    "SELECT hash, mime, bytes, width, height FROM media
                     WHERE hash NOT IN (SELECT hash FROM block_media)",
                )?;
                let rows = statement.query_map([], |row| {
                    Ok(MediaRef {
                        hash: row.get(0)?,
                        mime: row.get(1)?,
                        bytes: row.get::<_, i64>(2)? as u64,
                        width: row.get(3)?,
                        height: row.get(4)?,
                    })
                })?;
                rows.collect::<Result<Vec<_>, _>>()?
            };
            tx.execute(
                "DELETE FROM media WHERE hash NOT IN (SELECT hash FROM block_media)",
                [],
            )?;
            tx.commit()?;
            orphans
        };
        // Files a corrupt history moved aside may reference stay while it is kept (see
        // `Store::sweep_media`).
        if let Some(aside) = self.database_moved_aside() {
            tracing::info!(kept = %aside.display(), "a deleted conversation's media files stay while a corrupt history database is kept beside the history");
            return Ok(());
        }
        // Each file is checked again: a message using it may have been saved since the
        // commit (by another process: this one waits on the connection's lock).
        for media in orphans {
            let used: bool = conn.query_row(
                "SELECT EXISTS(SELECT 1 FROM block_media WHERE hash = ?1)",
                [&media.hash],
                |row| row.get(0),
            )?;
            if used {
                continue;
            }
            if self
                .media
                .waits_here(&media.hash, crate::sweep::MEDIA_GRACE)
            {
                continue;
            }
            if let Err(err) = self
                .media
                .remove_unless_recent(&media, STORED_ELSEWHERE_RECENTLY)
            {
                tracing::warn!(hash = %media.hash, error = %err, "a media file could not be removed");
            }
        }
        Ok(())
    }

    /// Full-text search over messages and tool results, newest first, with snippets.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, StoreError> {
        let fts_query = fts_query(query);
        // No hits asked for (`--limit 0`): the loop below would read no rows forever.
        if fts_query.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        // A snippet's length is counted in tokens, and a Chinese or Japanese token is one
        // character: twelve of them are too little to read the match in.
        let snippet_tokens = if query.chars().any(crate::words::is_unspaced) {
            32
        } else {
            12
        };
        let conn = self.lock();
        // Rows enter the index in the order messages are written, so the newest match
        // has the highest rowid: FTS5 walks rowids backwards and stops at the limit,
        // and snippets are made for the rows shown only.
        let mut statement = conn.prepare(
            "SELECT s.conversation_id, c.title, s.message_id, s.snip, m.created_at
             FROM (
                 SELECT rowid, conversation_id, message_id,
                        snippet(search, 0, char(57344), char(57345), '…', ?3) AS snip
                 FROM search WHERE search MATCH ?1
                 ORDER BY rowid DESC LIMIT ?2
             ) s
             JOIN messages m ON m.id = s.message_id
             JOIN conversations c ON c.id = s.conversation_id
             ORDER BY s.rowid DESC",
        )?;
        // A message has a row per text block or tool result (a turn's parallel calls'
        // results, pieces of an answer): one hit per message, its newest row. Rows are read
        // past the limit, and more when a few messages took them all (a batch of a hundred
        // matching results), up to `MAX_SEARCH_ROWS`.
        let mut rows_read = limit.saturating_mul(ROWS_PER_HIT).min(MAX_SEARCH_ROWS);
        loop {
            let rows = statement.query_map(
                params![fts_query, rows_read as i64, snippet_tokens],
                |row| {
                    Ok(SearchHit {
                        conversation_id: row.get(0)?,
                        title: row.get(1)?,
                        message_id: row.get(2)?,
                        snippet: crate::words::unspaced(row.get(3)?),
                        created_at: row.get(4)?,
                    })
                },
            )?;
            let mut seen = std::collections::HashSet::new();
            let mut hits = Vec::new();
            let mut read = 0;
            for hit in rows {
                let hit = hit?;
                read += 1;
                if seen.insert(hit.message_id) {
                    hits.push(hit);
                    if hits.len() == limit {
                        return Ok(hits);
                    }
                }
            }
            if read < rows_read || rows_read >= MAX_SEARCH_ROWS {
                return Ok(hits);
            }
            rows_read = rows_read.saturating_mul(ROWS_PER_HIT).min(MAX_SEARCH_ROWS);
        }
    }

    /// Conversations whose title holds every word of `query` (any case, for ASCII
    /// letters), most recently updated first: a renamed conversation is found by its
    /// title, which the message index does not hold. Each hit's snippet is its title with
    /// the words marked, and its `message_id` is negative (the conversation's row, not a
    /// message: no message is the match).
    pub fn search_titles(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, StoreError> {
        let words: Vec<&str> = query.split_whitespace().take(MAX_TITLE_WORDS).collect();
        if words.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let like = |word: &str| {
            let escaped = word
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_");
            format!("%{escaped}%")
        };
        let conditions = vec!["title LIKE ? ESCAPE '\\'"; words.len()].join(" AND ");
        let sql = format!(
            "SELECT rowid, id, title, updated_at FROM conversations WHERE {conditions}
             ORDER BY updated_at DESC LIMIT {}",
            limit.min(MAX_SEARCH_ROWS)
        );
        let conn = self.lock();
        let mut statement = conn.prepare(&sql)?;
        let patterns: Vec<String> = words.iter().map(|word| like(word)).collect();
        let rows = statement.query_map(rusqlite::params_from_iter(patterns.iter()), |row| {
            let title: String = row.get(2)?;
            Ok(SearchHit {
                message_id: -row.get::<_, i64>(0)?,
                conversation_id: row.get(1)?,
                snippet: marked(&title, &words),
                title,
                created_at: row.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Checks the database file, as after a crash.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        Ok(self
            .lock()
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))?)
    }

    /// The path of a stored media file, for export and display.
    pub fn media_path(&self, media: &MediaRef) -> PathBuf {
        self.media.path_of(media)
    }
}

fn row_to_conversation(row: &rusqlite::Row<'_>) -> rusqlite::Result<Conversation> {
    Ok(Conversation {
        id: row.get(0)?,
        title: row.get(1)?,
        provider: row.get(2)?,
        model: row.get(3)?,
        created_at: row.get(4)?,
        updated_at: row.get(5)?,
        message_count: row.get(6)?,
        pinned: row.get(7)?,
    })
}

fn is_corruption(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
    )
}

/// What a corrupt database moved aside is named after: `history.db.corrupt-<ms>`.
pub(crate) const MOVED_ASIDE: &str = ".corrupt-";

/// Moves a corrupt database (and its WAL files) aside, never deleting or rewriting it.
fn move_aside(path: &Path, reason: rusqlite::Error) -> StoreError {
    // Not while another process has it open (each holds a writer's lease for as long
    // as it has the history open; this one takes its own only after the checks).
    match conduit_files::any_lease_held(&writers_dir(path)) {
        Ok(true) => {
            tracing::error!(%reason, "the history database is damaged and another Conduit process has it open; left in place");
            return StoreError::CorruptInUse {
                path: path.display().to_string(),
                reason,
            };
        }
        Ok(false) => {}
        Err(error) => {
            tracing::warn!(%error, "whether another process has the history open could not be read; moving it aside");
        }
    }
    let mut aside = path.as_os_str().to_owned();
    aside.push(format!("{MOVED_ASIDE}{}", now_ms()));
    let aside = PathBuf::from(aside);
    let moved = std::fs::rename(path, &aside);
    // Its journal goes with it, and the mark of damage found in the background, saying
    // what was found; none of them when the file itself stayed (its journal is its own,
    // and its mark must still have the next open check it).
    if moved.is_ok() {
        for suffix in ["-wal", "-shm", ".damaged"] {
            let mut from = path.as_os_str().to_owned();
            from.push(suffix);
            let mut to = aside.as_os_str().to_owned();
            to.push(suffix);
            let _ = std::fs::rename(PathBuf::from(from), PathBuf::from(to));
        }
    }
    match moved {
        Ok(()) => {
            tracing::error!(%reason, moved_to = %aside.display(), "corrupt history database moved aside");
            StoreError::Corrupt {
                reason,
                moved_to: aside.display().to_string(),
            }
        }
        Err(source) => StoreError::CorruptStuck {
            path: path.display().to_string(),
            reason,
            source,
        },
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

fn parse_role(text: &str) -> Role {
    match text {
        "user" => Role::User,
        "tool" => Role::Tool,
        _ => Role::Assistant,
    }
}

fn block_kind(block: &Block) -> &'static str {
    match block {
        Block::Text { .. } => "text",
        Block::Image { .. } => "image",
        Block::File { .. } => "file",
        Block::Document { .. } => "document",
        Block::Reasoning { .. } => "reasoning",
        Block::ToolCall(_) => "tool_call",
        Block::ToolResult(_) => "tool_result",
    }
}

/// The text a search should find in a block: message text, attached files (their names
/// too) and tool results.
fn searchable_text(block: &Block) -> String {
    match block {
        Block::Text { text } => text.clone(),
        Block::File { name, text } => format!("{name}\n{text}"),
        Block::Document { name, .. } => name.clone(),
        Block::ToolResult(result) => result.searchable_text(),
        _ => String::new(),
    }
}

/// The title of a conversation its first message has not named yet.
pub const NEW_TITLE: &str = "New chat";

/// A conversation's title from its first user text: one line, at most 60 characters.
pub fn derive_title(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or(NEW_TITLE);
    if line.chars().count() <= TITLE_CHARS {
        return line.to_owned();
    }
    let mut title: String = line.chars().take(TITLE_CHARS - 1).collect();
    title = title.trim_end().to_owned();
    title.push('…');
    title
}

/// A user's words as an FTS5 query: each word quoted (so `-`, `:` or quotes are text),
/// all words required, the last one as a prefix.
/// At most this many words of a query are matched against titles.
const MAX_TITLE_WORDS: usize = 16;

/// `text` with each place one of `words` occurs (any case, for ASCII letters) between
/// [`MATCH_START`] and [`MATCH_END`], overlapping places as one.
fn marked(text: &str, words: &[&str]) -> String {
    let lower = text.to_ascii_lowercase();
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for word in words {
        let word = word.to_ascii_lowercase();
        if word.is_empty() {
            continue;
        }
        let mut from = 0;
        while let Some(at) = lower.get(from..).and_then(|rest| rest.find(&word)) {
            ranges.push((from + at, from + at + word.len()));
            from += at + word.len();
        }
    }
    ranges.sort_unstable();
    let mut out = String::with_capacity(text.len() + 2 * ranges.len());
    let mut last = 0;
    let mut open: Option<(usize, usize)> = None;
    for (start, end) in ranges {
        match &mut open {
            Some((_, open_end)) if start <= *open_end => *open_end = (*open_end).max(end),
            _ => {
                if let Some((open_start, open_end)) = open.take() {
                    out.push_str(text.get(last..open_start).unwrap_or_default());
                    out.push(MATCH_START);
                    out.push_str(text.get(open_start..open_end).unwrap_or_default());
                    out.push(MATCH_END);
                    last = open_end;
                }
                open = Some((start, end));
            }
        }
    }
    if let Some((open_start, open_end)) = open {
        out.push_str(text.get(last..open_start).unwrap_or_default());
        out.push(MATCH_START);
        out.push_str(text.get(open_start..open_end).unwrap_or_default());
        out.push(MATCH_END);
        last = open_end;
    }
    out.push_str(text.get(last..).unwrap_or_default());
    out
}

/// A user's words as an FTS5 query: each a quoted phrase, so its characters are text and
/// not query syntax (a run of Chinese or Japanese a phrase of its characters,
/// `crate::words`), the last one matched as a prefix too.
fn fts_query(query: &str) -> String {
    let words: Vec<String> = query
        .split_whitespace()
        .map(|w| format!("\"{}\"", crate::words::spaced(w).replace('"', "\"\"")))
        .collect();
    match words.split_last() {
        Some((last, rest)) => {
            let mut parts: Vec<String> = rest.to_vec();
            parts.push(format!("{last}*"));
            parts.join(" ")
        }
        None => String::new(),
    }
}

#[cfg(test)]
pub(crate) mod tests;
