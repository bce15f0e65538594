//! One rule for paging through a server's lists (tools, resources, resource templates,
//! prompts). The server chooses the cursors, so it alone would decide when a list ends:
//! one that hands back a cursor it gave before, or a new one forever, would keep Conduit
//! asking (and appending) until memory runs out. A listing here stops when a cursor
//! repeats (an error naming the server) or the list outgrows what Conduit takes: a tool
//! list then fails whole, and a list a person picks from (resources, templates, prompts)
//! is cut, its first items kept and the cut said.

use std::collections::HashSet;

/// At most this many pages per tool listing: real servers page by 50 to 1,000 items, so
/// 100 pages holds every tool list under [`MAX_TOOLS`].
pub const MAX_LIST_PAGES: usize = 100;
/// At most this many pages per listing of resources, templates or prompts: a file server
/// paging by 10 still reaches [`MAX_RESOURCES`] within them.
pub const MAX_PICKER_LIST_PAGES: usize = 1_000;
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

    fn max_pages(self) -> usize {
        match self {
            Self::Tools => MAX_LIST_PAGES,
            Self::Prompts | Self::Resources | Self::ResourceTemplates => MAX_PICKER_LIST_PAGES,
        }
    }

    /// Whether a list past the caps is cut (its first items kept) rather than failed: a
    /// person picks from these, and the first ten thousand resources of a large file
    /// server are of use; a tool list cut short would change what the model is offered
    /// with nothing to show for it.
    fn cut_past_caps(self) -> bool {
        !matches!(self, Self::Tools)
    }
}

/// A list the server had more of than Conduit takes: its first items are kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the server {server:?} lists {past}; Conduit offers the first {kept} of its {what}")]
pub struct ListCut {
    pub server: String,
    pub what: &'static str,
    /// Which cap the list went past, in words.
    pub past: String,
    pub kept: usize,
}

/// When a listing stops, cut where lists are cut (a person waits for the picker): at
/// `at`, `patience` after it began (named in the cut).
#[derive(Debug, Clone, Copy)]
pub struct ListDeadline {
    pub at: tokio::time::Instant,
    pub patience: std::time::Duration,
}

impl ListDeadline {
    /// `patience` from now.
    pub fn after(patience: std::time::Duration) -> Self {
        Self {
            at: tokio::time::Instant::now() + patience,
            patience,
        }
    }
}

/// A listing's items, the shortest cache hint of its pages, and whether it was cut.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing<T> {
    pub items: Vec<T>,
    pub fresh_ms: Option<u64>,
    pub cut: Option<ListCut>,
}

impl<T> Default for Listing<T> {
    /// An empty list (a server without the capability).
    fn default() -> Self {
        Self {
            items: Vec::new(),
            fresh_ms: None,
            cut: None,
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
    #[error("the server {server:?} took longer than {seconds} s to list its {what}")]
    TooSlow {
        server: String,
        what: &'static str,
        seconds: u64,
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
    cut: Option<ListCut>,
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
            cut: None,
        }
    }

    /// Stops a list past a cap: a cut, with the items so far, where the list is cut;
    /// `error` otherwise.
    fn past_cap(&mut self, past: String, error: ListError) -> Result<Option<String>, ListError> {
        if !self.listed.cut_past_caps() {
            return Err(error);
        }
        self.cut = Some(ListCut {
            server: self.server.clone(),
            what: self.listed.noun(),
            past,
            kept: self.items.len(),
        });
        Ok(None)
    }

    /// Takes one page: the cursor to ask for next, `None` when the list is whole (or cut:
    /// see [`Listing::cut`]), or why the listing stops here.
    pub(crate) fn take(
        &mut self,
        mut items: Vec<T>,
        next: Option<String>,
        ttl_ms: Option<u64>,
    ) -> Result<Option<String>, ListError> {
        let (server, what) = (self.server.clone(), self.listed.noun());
        self.pages += 1;
        let max = self.listed.max_items();
        // Past the item cap, the page is held to what fits (a tool list then fails), and
        // what is kept still counts against the byte cap below.
        let over_items = self.items.len().saturating_add(items.len()) > max;
        if over_items {
            if !self.listed.cut_past_caps() {
                return Err(ListError::TooManyItems { server, what, max });
            }
            items.truncate(max.saturating_sub(self.items.len()));
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
            let max_mib = MAX_LIST_BYTES / (1024 * 1024);
            return self.past_cap(
                format!("more than {max_mib} MiB of {what}"),
                ListError::TooLarge {
                    server,
                    what,
                    max_mib,
                },
            );
        }
        if over_items {
            self.items.extend(items);
            return self.past_cap(
                format!("more than {max} {what}"),
                ListError::TooManyItems { server, what, max },
            );
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
        let max = self.listed.max_pages();
        if self.pages >= max {
            return self.past_cap(
                format!("its {what} over more than {max} pages"),
                ListError::TooManyPages { server, what, max },
            );
        }
        Ok(Some(next))
    }

    /// Stops the listing where it is because it took longer than `patience`: a cut with
    /// the items so far where the list is cut, an error otherwise.
    pub(crate) fn out_of_time(&mut self, patience: std::time::Duration) -> Result<(), ListError> {
        let (server, what) = (self.server.clone(), self.listed.noun());
        let past = format!("its {what} over more than {} s", patience.as_secs());
        self.past_cap(
            past,
            ListError::TooSlow {
                server,
                what,
                seconds: patience.as_secs(),
            },
        )
        .map(|_| ())
    }

    /// The list (whole, or as far as it was cut) and the shortest cache hint (`ttlMs`)
    /// of its pages.
    pub(crate) fn finish(self) -> Listing<T> {
        Listing {
            items: self.items,
            fresh_ms: self.fresh_ms,
            cut: self.cut,
        }
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
        assert_eq!(
            pager.finish(),
            Listing {
                items: vec![1, 2, 3, 4],
                fresh_ms: Some(100),
                cut: None
            }
        );
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
        let mut pager = Pager::new("s", Listed::Tools);
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

    #[test]
    fn a_list_a_person_picks_from_is_cut_past_its_caps_and_keeps_its_first_items() {
        // Past the item cap: the page that crossed it gives what fits.
        let mut pager = Pager::new("files", Listed::Resources);
        let page = |from: usize| (from..from + 4_000).collect::<Vec<usize>>();
        assert_eq!(
            pager.take(page(0), Some("a".into()), None),
            Ok(Some("a".into()))
        );
        assert_eq!(
            pager.take(page(4_000), Some("b".into()), None),
            Ok(Some("b".into()))
        );
        assert_eq!(pager.take(page(8_000), Some("c".into()), None), Ok(None));
        let listing = pager.finish();
        assert_eq!(listing.items, (0..MAX_RESOURCES).collect::<Vec<_>>());
        let cut = listing.cut.unwrap();
        assert_eq!(cut.kept, MAX_RESOURCES);
        assert_eq!(
            cut.to_string(),
            "the server \"files\" lists more than 10000 resources; Conduit offers the first 10000 of its resources"
        );

        // Past the page cap: a server paging by 5 keeps its first 1,000 pages.
        let mut pager = Pager::new("slow", Listed::Prompts);
        let mut pages = 0;
        while let Some(_next) = pager
            .take(vec![0u8; 1], Some(format!("c{pages}")), None)
            .unwrap()
        {
            pages += 1;
        }
        let listing = pager.finish();
        assert_eq!(listing.items.len(), MAX_PICKER_LIST_PAGES);
        assert!(
            listing
                .cut
                .unwrap()
                .past
                .contains("over more than 1000 pages"),
            "the cut says why"
        );

        // Past the byte cap: the page that crossed it is left out.
        let mut pager = Pager::new("big", Listed::ResourceTemplates);
        let big = "x".repeat(MAX_LIST_BYTES / 2);
        assert!(
            pager
                .take(vec![big.clone()], Some("a".into()), None)
                .unwrap()
                .is_some()
        );
        assert_eq!(pager.take(vec![big], Some("b".into()), None), Ok(None));
        let listing = pager.finish();
        assert_eq!(listing.items.len(), 1);
        assert_eq!(listing.cut.unwrap().kept, 1);

        // The page that crosses the item cap is held to the byte cap too.
        let mut pager = Pager::new("both", Listed::Resources);
        let filler = vec![String::new(); MAX_RESOURCES - 1];
        assert!(
            pager
                .take(filler, Some("a".into()), None)
                .unwrap()
                .is_some()
        );
        let two_big = vec!["x".repeat(MAX_LIST_BYTES), String::new()];
        assert_eq!(pager.take(two_big, None, None), Ok(None));
        let listing = pager.finish();
        assert_eq!(listing.items.len(), MAX_RESOURCES - 1);
        assert!(listing.cut.unwrap().past.contains("MiB"));

        // Out of time: what was listed is kept, a tool list fails.
        let mut pager = Pager::new("slow", Listed::Prompts);
        assert!(
            pager
                .take(vec![1, 2], Some("a".into()), None)
                .unwrap()
                .is_some()
        );
        pager
            .out_of_time(std::time::Duration::from_secs(10))
            .unwrap();
        let listing = pager.finish();
        assert_eq!(listing.items, [1, 2]);
        assert_eq!(
            listing.cut.unwrap().to_string(),
            "the server \"slow\" lists its prompts over more than 10 s; Conduit offers the first 2 of its prompts"
        );
        let mut pager: Pager<u8> = Pager::new("slow", Listed::Tools);
        assert!(matches!(
            pager.out_of_time(std::time::Duration::from_secs(10)),
            Err(ListError::TooSlow { .. })
        ));

        // A repeated cursor is still a broken server, not a long list.
        let mut pager = Pager::new("loop", Listed::Resources);
        assert!(pager.take(vec![1], Some("a".into()), None).is_ok());
        assert!(matches!(
            pager.take(vec![2], Some("a".into()), None),
            Err(ListError::CursorRepeated { .. })
        ));
    }
}
