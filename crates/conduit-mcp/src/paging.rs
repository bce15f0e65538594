//! One rule for paging through a server's lists (tools, resources, resource templates,
//! prompts). The server chooses the cursors, so it alone would decide when a list ends:
//! one that hands back a cursor it gave before, or a new one forever, would keep Conduit
//! asking (and appending) until memory runs out. A listing here stops, with an error
//! naming the server, when a cursor repeats or the list outgrows what Conduit takes.

use std::collections::HashSet;

/// At most this many pages per listing: real servers page by 50 to 1,000 items, so 100
/// pages already holds every list under the item caps below.
pub const MAX_LIST_PAGES: usize = 100;
/// At most this many tools from one server. Every tool's definition goes to the model
/// on each turn, and providers take far fewer (OpenAI 128 a request): a server past
/// this is broken or hostile, and its list is no use to a model anyway.
pub const MAX_TOOLS: usize = 1_000;
/// At most this many prompts from one server: the same picker as resources, but each
/// is written by hand, so a thousand is already far more than any real server has.
pub const MAX_PROMPTS: usize = 1_000;
/// At most this many resources (and, separately, resource templates) from one server:
/// a file or database server may list a good many, for a person picking one by name.
pub const MAX_RESOURCES: usize = 10_000;
/// At most this many bytes of one listing's items (as JSON) and cursors: 1,000 tools of
/// 64 KB schemas. Page by page, memory stays near this however the server pages.
pub const MAX_LIST_BYTES: usize = 64 * 1024 * 1024;

/// Which list is paged through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    Tools,
    Resources,
    ResourceTemplates,
    Prompts,
}

impl Listed {
    fn noun(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Resources => "resources",
            Self::ResourceTemplates => "resource templates",
            Self::Prompts => "prompts",
        }
    }

    fn max_items(self) -> usize {
        match self {
            Self::Tools => MAX_TOOLS,
            Self::Prompts => MAX_PROMPTS,
            Self::Resources | Self::ResourceTemplates => MAX_RESOURCES,
        }
    }
}

/// Why a listing stopped before the server said it ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListError {
    #[error(
        "the server {server:?} sent a page cursor of its {what} a second time (after {pages} pages): its list would never end"
    )]
    CursorRepeated {
        server: String,
        what: &'static str,
        pages: usize,
    },
    /// Two tools under one name: which one a model calls, the user approves and Settings
    /// shows could differ, so the listing is refused whole.
    #[error(
        "the server {server:?} lists two {what} named {name:?}: Conduit cannot tell which one you would approve"
    )]
    NamedTwice {
        server: String,
        what: &'static str,
        name: String,
    },
    #[error("the server {server:?} lists more than {max} {what}, the most Conduit takes")]
    TooManyItems {
        server: String,
        what: &'static str,
        max: usize,
    },
    #[error(
        "the server {server:?} pages its {what} over more than {max} pages, the most Conduit asks for"
    )]
    TooManyPages {
        server: String,
        what: &'static str,
        max: usize,
    },
    #[error(
        "the server {server:?} lists more than {max_mib} MiB of {what}, the most Conduit takes"
    )]
    TooLarge {
        server: String,
        what: &'static str,
        max_mib: usize,
    },
}

/// One listing in progress: the items so far, the cursors seen, the shortest cache hint.
pub(crate) struct Pager<T> {
    server: String,
    listed: Listed,
    items: Vec<T>,
    pages: usize,
    bytes: usize,
    cursors: HashSet<String>,
    fresh_ms: Option<u64>,
}

impl<T: serde::Serialize> Pager<T> {
    pub(crate) fn new(server: &str, listed: Listed) -> Self {
        Self {
            server: server.to_owned(),
            listed,
            items: Vec::new(),
            pages: 0,
            bytes: 0,
            cursors: HashSet::new(),
            fresh_ms: None,
        }
    }

    /// Takes one page: the cursor to ask for next, `None` when the list is whole, or why
    /// the listing stops here.
    pub(crate) fn take(
        &mut self,
        items: Vec<T>,
        next: Option<String>,
        ttl_ms: Option<u64>,
    ) -> Result<Option<String>, ListError> {
        let (server, what) = (self.server.clone(), self.listed.noun());
        self.pages += 1;
        let max = self.listed.max_items();
        if self.items.len().saturating_add(items.len()) > max {
            return Err(ListError::TooManyItems { server, what, max });
        }
        let page_bytes = items
            .iter()
            .map(conduit_core::content::json_size)
            .sum::<usize>();
        let cursor_bytes = next.as_ref().map_or(0, String::len);
        self.bytes = self
            .bytes
            .saturating_add(page_bytes)
            .saturating_add(cursor_bytes);
        if self.bytes > MAX_LIST_BYTES {
            return Err(ListError::TooLarge {
                server,
                what,
                max_mib: MAX_LIST_BYTES / (1024 * 1024),
            });
        }
        self.items.extend(items);
        if let Some(ttl) = ttl_ms {
            self.fresh_ms = Some(self.fresh_ms.map_or(ttl, |shortest| shortest.min(ttl)));
        }
        let Some(next) = next else {
            return Ok(None);
        };
        if !self.cursors.insert(next.clone()) {
            return Err(ListError::CursorRepeated {
                server,
                what,
                pages: self.pages,
            });
        }
        if self.pages >= MAX_LIST_PAGES {
            return Err(ListError::TooManyPages {
                server,
                what,
                max: MAX_LIST_PAGES,
            });
        }
        Ok(Some(next))
    }

    /// The whole list and the shortest cache hint (`ttlMs`) of its pages.
    pub(crate) fn finish(self) -> (Vec<T>, Option<u64>) {
        (self.items, self.fresh_ms)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_list_ends_when_the_server_says_so_and_keeps_the_shortest_hint() {
        let mut pager = Pager::new("s", Listed::Tools);
        assert_eq!(
            pager.take(vec![1, 2], Some("a".into()), Some(500)),
            Ok(Some("a".into()))
        );
        assert_eq!(
            pager.take(vec![3], Some("b".into()), Some(100)),
            Ok(Some("b".into()))
        );
        assert_eq!(pager.take(vec![4], None, None), Ok(None));
        assert_eq!(pager.finish(), (vec![1, 2, 3, 4], Some(100)));
    }

    #[test]
    fn a_repeated_cursor_stops_the_listing_naming_the_server() {
        let mut pager = Pager::new("evil", Listed::Prompts);
        assert!(pager.take(vec![1], Some("a".into()), None).is_ok());
        assert!(pager.take(vec![2], Some("b".into()), None).is_ok());
        let error = pager.take(vec![3], Some("a".into()), None).unwrap_err();
        assert!(matches!(error, ListError::CursorRepeated { pages: 3, .. }));
        assert!(error.to_string().contains("\"evil\""), "{error}");
    }

    #[test]
    fn pages_items_and_bytes_are_capped() {
        let mut pager = Pager::new("s", Listed::Resources);
        let mut stopped = None;
        for page in 0..=MAX_LIST_PAGES {
            if let Err(error) = pager.take(vec![page], Some(format!("c{page}")), None) {
                stopped = Some((page, error));
                break;
            }
        }
        let (page, error) = stopped.unwrap();
        assert_eq!(page + 1, MAX_LIST_PAGES);
        assert!(matches!(error, ListError::TooManyPages { .. }), "{error}");

        let mut pager = Pager::new("s", Listed::Tools);
        assert!(pager.take(vec![0; 600], Some("a".into()), None).is_ok());
        let error = pager.take(vec![0; 600], None, None).unwrap_err();
        assert!(matches!(
            error,
            ListError::TooManyItems { max: MAX_TOOLS, .. }
        ));

        let mut pager = Pager::new("s", Listed::Tools);
        let big = "x".repeat(MAX_LIST_BYTES / 2);
        assert!(
            pager
                .take(vec![big.clone()], Some("a".into()), None)
                .is_ok()
        );
        let error = pager.take(vec![big], None, None).unwrap_err();
        assert!(matches!(error, ListError::TooLarge { .. }), "{error}");
    }
}
