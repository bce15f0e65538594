//! The history database's schema and its migrations, versioned by `PRAGMA user_version`.

use rusqlite::{Connection, Transaction};

/// One step of the schema: SQL, or code for what SQL alone cannot do.
pub enum Migration {
    Sql(&'static str),
    Code(fn(&Transaction<'_>) -> rusqlite::Result<()>),
}

impl Migration {
    pub fn apply(&self, tx: &Transaction<'_>) -> rusqlite::Result<()> {
        match self {
            Migration::Sql(sql) => tx.execute_batch(sql),
            Migration::Code(step) => step(tx),
        }
    }
}

/// Each entry moves the schema from version `index` to `index + 1`.
pub const MIGRATIONS: &[Migration] = &[
    // 1: conversations, messages as ordered blocks, media references, full-text search.
    Migration::Sql(
        r#"
    CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL,
        title_is_custom INTEGER NOT NULL DEFAULT 0,
        provider TEXT,
        model TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX conversations_by_update ON conversations(updated_at DESC);

    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        role TEXT NOT NULL,
        status TEXT NOT NULL,
        input_tokens INTEGER,
        output_tokens INTEGER,
        error TEXT,
        created_at INTEGER NOT NULL,
        UNIQUE (conversation_id, position)
    );

    CREATE TABLE blocks (
        message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        kind TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (message_id, position)
    ) WITHOUT ROWID;

    CREATE TABLE media (
        hash TEXT PRIMARY KEY,
        mime TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        width INTEGER,
        height INTEGER
    ) WITHOUT ROWID;

    CREATE TABLE block_media (
        message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        hash TEXT NOT NULL REFERENCES media(hash)
    );
    CREATE INDEX block_media_by_hash ON block_media(hash);
    CREATE INDEX block_media_by_message ON block_media(message_id);

    CREATE VIRTUAL TABLE search USING fts5(
        text,
        message_id UNINDEXED,
        conversation_id UNINDEXED,
        tokenize = 'unicode61 remove_diacritics 2'
    );
    "#,
    ),
    // 2: the tools a conversation may use (JSON; NULL: every enabled tool).
    Migration::Sql(
        r#"
    ALTER TABLE conversations ADD COLUMN toolset TEXT;
    "#,
    ),
    // 3: what ran each MCP call (the fingerprint of its server's entry), apart from the
    // messages the window reads: a saved call's view opens only from that same server.
    Migration::Sql(
        r#"
    CREATE TABLE call_servers (
        conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        call_id TEXT NOT NULL,
        server_print TEXT NOT NULL,
        PRIMARY KEY (conversation_id, call_id)
    ) WITHOUT ROWID;
    "#,
    ),
    // 4: the lease of the process writing a streaming message, so another process opening
    // the file tells a message still being written from one a crash left (NULL: unknown,
    // as for every message written before).
    Migration::Sql(
        r#"
    ALTER TABLE messages ADD COLUMN writer TEXT;
    "#,
    ),
    // 5: which conversation each search row belongs to, indexed: the index's own column
    // is UNINDEXED (FTS5 filters on it by reading every row, text and all), so deleting a
    // conversation read the whole history's index while holding every lock.
    Migration::Sql(
        r#"
    CREATE TABLE search_rows (
        row INTEGER PRIMARY KEY,
        conversation_id TEXT NOT NULL
    );
    CREATE INDEX search_rows_by_conversation ON search_rows(conversation_id);
    INSERT INTO search_rows (row, conversation_id) SELECT rowid, conversation_id FROM search;
    "#,
    ),
    // 6: text in scripts written without spaces indexed a character at a time
    // (`crate::words`): a search for a Chinese or Japanese word inside a sentence found
    // nothing.
    Migration::Code(space_unspaced_scripts),
    // 7: a conversation's instructions to the model (its system prompt; NULL: none).
    Migration::Sql(
        r#"
    ALTER TABLE conversations ADD COLUMN instructions TEXT;
    "#,
    ),
    // 8: conversations the user pinned to the top of the list.
    Migration::Sql(
        r#"
    ALTER TABLE conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX conversations_by_pin ON conversations(pinned DESC, updated_at DESC, id DESC);
    "#,
    ),
];

/// Indexes again every search row holding text of a script written without spaces, as
/// [`crate::words::spaced`] cuts it. The rows' ids stay (`search_rows` names them). The
/// rows are found first by id only, so a history of such text is not held in memory.
fn space_unspaced_scripts(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    let mut rows = Vec::new();
    {
        let mut statement = tx.prepare("SELECT rowid, text FROM search")?;
        let mut found = statement.query([])?;
        while let Some(row) = found.next()? {
            let text = row.get_ref(1)?.as_str().unwrap_or_default();
            if text.chars().any(crate::words::is_unspaced) {
                rows.push(row.get::<_, i64>(0)?);
            }
        }
    }
    let mut read = tx.prepare("SELECT text FROM search WHERE rowid = ?1")?;
    let mut write = tx.prepare("UPDATE search SET text = ?1 WHERE rowid = ?2")?;
    for row in &rows {
        let text: String = read.query_row([row], |found| found.get(0))?;
        write.execute(rusqlite::params![crate::words::spaced(&text), row])?;
    }
    if !rows.is_empty() {
        tracing::info!(
            rows = rows.len(),
            "search rows of unspaced scripts indexed again"
        );
    }
    Ok(())
}

/// The schema version this build writes.
pub const CURRENT: i64 = MIGRATIONS.len() as i64;

/// A database the migrations cannot bring to [`CURRENT`].
#[derive(Debug, PartialEq, Eq)]
pub enum VersionProblem {
    /// Made by a newer Conduit; never downgraded.
    Newer(i64),
}

/// Brings the schema to [`CURRENT`], each step in its own immediate transaction that reads
/// the version again once it holds the write lock: two processes opening a new file at
/// once take turns, and the second finds the first's steps done.
pub fn migrate(conn: &mut Connection) -> Result<Result<(), VersionProblem>, rusqlite::Error> {
    // A file already current is only read: taking the write lock to find that out made
    // every open wait for another process's write (up to the busy timeout, then fail,
    // the whole history unavailable).
    let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if version == CURRENT {
        return Ok(Ok(()));
    }
    loop {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let version: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        if version > CURRENT {
            return Ok(Err(VersionProblem::Newer(version)));
        }
        let Some(step) = usize::try_from(version)
            .ok()
            .and_then(|version| MIGRATIONS.get(version))
        else {
            return Ok(Ok(()));
        };
        step.apply(&tx)?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
        tracing::info!(version = version + 1, "history database migrated");
    }
}
