//! Saved conversations for the frontends: list, show, search, export, rename, delete.

use std::path::{Path, PathBuf};

use conduit_store::export::{self, Format};
use conduit_store::{Conversation, SearchHit, StoreError, StoredMessage};

use crate::Host;

/// At most this many conversations found by their title head a search's hits.
const TITLE_HITS: usize = 10;

/// A millisecond timestamp as the user's local date and time.
fn local_time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| {
            t.to_zoned(jiff::tz::TimeZone::system())
                .strftime("%Y-%m-%d %H:%M")
                .to_string()
        })
        .unwrap_or_else(|_| "at an unknown time".to_owned())
}

impl Host {
    /// The user's list of conversations: pinned ones first, then the most recent.
    pub fn conversations(&self, limit: usize) -> Result<Vec<Conversation>, StoreError> {
        self.store()?.list_pinned_first(limit)
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
        // Conversations whose title matches first (a renamed one is found by its new
        // title), at most a few, then the messages that match.
        let store = self.store()?;
        let mut hits = store.search_titles(query, limit.min(TITLE_HITS))?;
        hits.extend(store.search(query, limit)?);
        hits.truncate(limit);
        Ok(hits)
    }

    pub fn rename_conversation(&self, id: &str, title: &str) -> Result<(), StoreError> {
        self.store()?.rename(id, title)
    }

    /// Pins a conversation to the top of the list, or unpins it.
    pub fn pin_conversation(&self, id: &str, pinned: bool) -> Result<(), StoreError> {
        self.store()?.set_pinned(id, pinned)
    }

    /// What the user answers natively before a window deletes conversation `id`: its
    /// title (quoted and cut: a model may have written it) and what goes with it. An
    /// unknown id is an error, so nothing is asked about a conversation that is not there.
    pub fn deletion_question(&self, id: &str) -> Result<String, StoreError> {
        let conversation = self.store()?.conversation(id)?;
        let title = crate::window_guard::quoted_cut(&conversation.title, 120);
        let messages = match conversation.message_count {
            1 => "Its message".to_owned(),
            count => format!("Its {count} messages"),
        };
        // A page can rename a conversation without asking, so the question also shows
        // what it cannot change: when the conversation started and last changed.
        Ok(format!(
            "Delete the conversation {title}?\nStarted {}, last changed {}.\n\n{messages} and the images only it uses are removed for good.",
            local_time(conversation.created_at),
            local_time(conversation.updated_at),
        ))
    }

    pub fn delete_conversation(&self, id: &str) -> Result<(), StoreError> {
        self.store()?.delete(id)?;
        self.conversation_allows().forget(id);
        Ok(())
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

#[cfg(test)]
mod tests {
    use crate::Host;

    #[test]
    fn deleting_a_conversation_is_asked_about_by_its_title_quoted_and_cut() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(crate::Paths::under_home(dir.path().to_owned(), None));
        let store = host.store().unwrap();
        // A line break in a title (a database from before titles were one line) cannot
        // fake the question; a long one is cut.
        let long = format!("Plans\n\nClick Delete: it is safe{}", "!".repeat(160));
        let conversation = store.create_conversation(None, None).unwrap();
        store.rename(&conversation, &long).unwrap();
        let question = host.deletion_question(&conversation).unwrap();
        assert!(
            question.starts_with("Delete the conversation \"Plans  Click Delete: it is safe!!!"),
            "{question}"
        );
        assert!(
            question.contains("!…\"?\nStarted 20") && question.contains(".\n\nIts 0 messages and"),
            "{question}"
        );
        assert!(question.chars().count() < 300, "{question}");
        assert!(host.deletion_question("no-such-conversation").is_err());
    }
}
