//! Saved conversations for the frontends: list, show, search, export, rename, delete.

use std::path::{Path, PathBuf};

use conduit_store::export::{self, Format};
use conduit_store::{Conversation, SearchHit, StoreError, StoredMessage};

use crate::Host;

impl Host {
    pub fn conversations(&self, limit: usize) -> Result<Vec<Conversation>, StoreError> {
        self.store()?.list(limit)
    }

    /// A conversation and its messages (`newest` keeps only the last N).
    pub fn conversation(
        &self,
        id: &str,
        newest: Option<usize>,
    ) -> Result<(Conversation, Vec<StoredMessage>), StoreError> {
        let store = self.store()?;
        Ok((store.conversation(id)?, store.messages(id, newest)?))
    }

    /// Up to `limit` messages before message `before` (or the newest), oldest first.
    pub fn conversation_page(
        &self,
        id: &str,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        self.store()?.page(id, before, Some(limit))
    }

    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, StoreError> {
        self.store()?.search(query, limit)
    }

    pub fn rename_conversation(&self, id: &str, title: &str) -> Result<(), StoreError> {
        self.store()?.rename(id, title)
    }

    pub fn delete_conversation(&self, id: &str) -> Result<(), StoreError> {
        self.store()?.delete(id)
    }

    pub fn export_conversation(
        &self,
        id: &str,
        format: Format,
        out_dir: &Path,
    ) -> Result<PathBuf, StoreError> {
        export::export(self.store()?.as_ref(), id, format, out_dir)
    }

    /// Exports conversation `id` to `file` (the user chose it), its media beside it.
    pub fn export_conversation_as(
        &self,
        id: &str,
        format: Format,
        file: &Path,
    ) -> Result<PathBuf, StoreError> {
        export::export_as(self.store()?.as_ref(), id, format, file)
    }

    /// The file name an export of conversation `id` is offered under.
    pub fn export_file_name(&self, id: &str, format: Format) -> Result<String, StoreError> {
        let conversation = self.store()?.conversation(id)?;
        Ok(export::default_file_name(&conversation.title, id, format))
    }
}
