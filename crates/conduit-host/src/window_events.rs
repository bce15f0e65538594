//! What the host tells a window, queued until that window's page asks for it.
//!
//! A window's page pulls its events (one request waits until there are some) instead of
//! the host pushing them as scripts evaluated in the page: WebKitGTK's UI process starts a
//! JavaScript engine of its own for the first evaluated script that reports back, which
//! is how Tauri's events and channels are delivered (ARCHITECTURE.md, "Footprint").
//! Nothing here knows a window toolkit: the desktop app maps its windows to mailboxes.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::Notify;

/// One thing a window is told.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum WindowEvent {
    /// A server changed state, or the mcpServers file was applied or failed to read: the
    /// window asks for the list again.
    McpServers,
    /// The providers changed (Settings saved one): the window asks for them again.
    ProvidersChanged,
    /// A server's question arrived or left: the window asks for the open ones.
    McpQuestions,
    /// The check of the whole history found it damaged: the window asks what was found
    /// (`history_damage`).
    HistoryDamaged,
    /// The next message of a stream a command opened (a turn's events, a sign-in's URL),
    /// in the order they were sent.
    #[serde(rename_all = "camelCase")]
    Stream {
        stream: u32,
        #[ts(type = "unknown")]
        message: serde_json::Value,
    },
    /// The stream ended: nothing more comes on it.
    #[serde(rename_all = "camelCase")]
    StreamEnded { stream: u32 },
}

impl WindowEvent {
    /// A change the window answers by asking again: one queued is as good as many.
    fn is_notice(&self) -> bool {
        matches!(
            self,
            Self::McpServers | Self::ProvidersChanged | Self::McpQuestions | Self::HistoryDamaged
        )
    }
}

/// What one pull answers: the events after the one the page last had, and the number to
/// ask after next time.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct EventBatch {
    pub events: Vec<WindowEvent>,
    /// The last event's number in its window's mailbox (1, 2, ...; 0 before the first).
    pub next: u64,
}

/// How long a pull waits for an event before it answers with none (the page asks again).
/// A page that went away leaves at most one such request behind, for at most this long.
pub const PULL_WAIT: Duration = Duration::from_secs(25);

/// Events a mailbox keeps for a page that does not ask: beyond this the oldest go, and
/// a warning is logged (a page that stopped pulling must not grow the app without end; a
/// turn it was showing is in the history).
pub const MAILBOX_LIMIT: usize = 20_000;

#[derive(Default)]
struct Queue {
    /// The number the last event was given (the first is 1).
    last: u64,
    events: VecDeque<(u64, WindowEvent)>,
    /// The last number a pull answered with: the page may hold those events already.
    given: u64,
    /// Whether dropping for the limit was already logged (once per mailbox).
    overflowed: bool,
}

/// One window's events, numbered in the order they were posted.
#[derive(Default)]
pub struct Mailbox {
    queue: Mutex<Queue>,
    posted: Notify,
}

impl Mailbox {
    /// Queues `event` and wakes the pull waiting for it. A notice that no pull has answered
    /// with yet is not queued twice (one given to the page may be handled already).
    pub fn post(&self, event: WindowEvent) {
        {
            let mut queue = self.queue.lock();
            let given = queue.given;
            if event.is_notice()
                && queue
                    .events
                    .iter()
                    .any(|(number, queued)| *number > given && *queued == event)
            {
                return;
            }
            queue.last += 1;
            let number = queue.last;
            queue.events.push_back((number, event));
            if queue.events.len() > MAILBOX_LIMIT {
                queue.events.pop_front();
                if !queue.overflowed {
                    queue.overflowed = true;
                    tracing::warn!(
                        limit = MAILBOX_LIMIT,
                        "a window stopped taking its events: the oldest are dropped"
                    );
                }
            }
        }
        self.posted.notify_waiters();
    }

    /// The events after number `after` (those up to it the page has: they are forgotten),
    /// waiting up to `wait` for one to be posted; none if none came.
    pub async fn pull(&self, after: u64, wait: Duration) -> EventBatch {
        let deadline = tokio::time::Instant::now() + wait;
        // A page that starts again asks after 0; a number past the last one (a mailbox made
        // again for a page still counting from the old one) is taken as the last one, once:
        // events posted while this pull waits are past it.
        let after = after.min(self.queue.lock().last);
        loop {
            let posted = self.posted.notified();
            tokio::pin!(posted);
            // Registered before the queue is read: a post in between still wakes this pull.
            posted.as_mut().enable();
            {
                let mut queue = self.queue.lock();
                while queue.events.front().is_some_and(|(n, _)| *n <= after) {
                    queue.events.pop_front();
                }
                if !queue.events.is_empty() {
                    queue.given = queue.last;
                    return EventBatch {
                        events: queue.events.iter().map(|(_, e)| e.clone()).collect(),
                        next: queue.last,
                    };
                }
            }
            if tokio::time::timeout_at(deadline, posted).await.is_err() {
                return EventBatch {
                    events: Vec::new(),
                    next: after,
                };
            }
        }
    }

    /// A stream on this mailbox with the number the page chose for it (the page only
    /// routes its own messages by it). Dropping the sender ends the stream.
    pub fn stream(self: &Arc<Self>, stream: u32) -> StreamSender {
        StreamSender {
            stream,
            mailbox: Arc::clone(self),
        }
    }
}

/// A stream message that could not be written as JSON.
#[derive(Debug, thiserror::Error)]
#[error("the message could not be written for the window")]
pub struct SendError(#[from] serde_json::Error);

/// Sends one stream's messages to its window; when dropped, tells the window it ended.
pub struct StreamSender {
    stream: u32,
    mailbox: Arc<Mailbox>,
}

impl StreamSender {
    /// Queues the next message of the stream.
    pub fn send(&self, message: impl Serialize) -> Result<(), SendError> {
        let message = serde_json::to_value(message)?;
        self.mailbox.post(WindowEvent::Stream {
            stream: self.stream,
            message,
        });
        Ok(())
    }
}

impl Drop for StreamSender {
    fn drop(&mut self) {
        self.mailbox.post(WindowEvent::StreamEnded {
            stream: self.stream,
        });
    }
}

/// Every window's mailbox, by the window's name.
#[derive(Default)]
pub struct WindowMailboxes {
    windows: Mutex<HashMap<String, Arc<Mailbox>>>,
}

impl WindowMailboxes {
    /// The mailbox of window `window`, made on first use.
    pub fn of(&self, window: &str) -> Arc<Mailbox> {
        Arc::clone(self.windows.lock().entry(window.to_owned()).or_default())
    }

    /// Posts `event` to each of `windows` (the windows open now).
    pub fn post_to_each<'a>(
        &self,
        windows: impl IntoIterator<Item = &'a str>,
        event: &WindowEvent,
    ) {
        for window in windows {
            self.of(window).post(event.clone());
        }
    }

    /// Forgets a closed window's mailbox (a pull still waiting on it ends at its wait).
    pub fn remove(&self, window: &str) {
        self.windows.lock().remove(window);
    }

    /// How many windows have a mailbox.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.windows.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_WAIT: Duration = Duration::ZERO;

    fn turn(n: u32) -> serde_json::Value {
        serde_json::json!({ "delta": n })
    }

    #[tokio::test]
    async fn events_come_in_order_and_are_forgotten_once_the_page_has_them() {
        let mailbox = Arc::new(Mailbox::default());
        let stream = mailbox.stream(7);
        stream.send(turn(1)).unwrap();
        mailbox.post(WindowEvent::McpServers);
        stream.send(turn(2)).unwrap();

        let first = mailbox.pull(0, NO_WAIT).await;
        assert_eq!(first.next, 3);
        assert_eq!(
            first.events,
            vec![
                WindowEvent::Stream {
                    stream: 7,
                    message: turn(1)
                },
                WindowEvent::McpServers,
                WindowEvent::Stream {
                    stream: 7,
                    message: turn(2)
                },
            ]
        );
        // Asked again without the page confirming: the same events (a lost answer loses nothing).
        assert_eq!(mailbox.pull(0, NO_WAIT).await, first);

        drop(stream);
        let second = mailbox.pull(first.next, NO_WAIT).await;
        assert_eq!(second.events, vec![WindowEvent::StreamEnded { stream: 7 }]);
        assert_eq!(second.next, 4);
        let none = mailbox.pull(second.next, NO_WAIT).await;
        assert!(none.events.is_empty());
        assert_eq!(none.next, 4);
    }

    #[tokio::test]
    async fn a_notice_waiting_to_be_pulled_is_not_queued_twice() {
        let mailbox = Mailbox::default();
        for _ in 0..100 {
            mailbox.post(WindowEvent::McpServers);
            mailbox.post(WindowEvent::McpQuestions);
        }
        let batch = mailbox.pull(0, NO_WAIT).await;
        assert_eq!(
            batch.events,
            vec![WindowEvent::McpServers, WindowEvent::McpQuestions]
        );
        // Once given to the page (which may have handled it already), the next change is
        // news again.
        mailbox.post(WindowEvent::McpServers);
        let next = mailbox.pull(batch.next, NO_WAIT).await;
        assert_eq!(next.events, vec![WindowEvent::McpServers]);
    }

    #[tokio::test]
    async fn a_waiting_pull_answers_when_an_event_is_posted() {
        let mailbox = Arc::new(Mailbox::default());
        let waiting = tokio::spawn({
            let mailbox = Arc::clone(&mailbox);
            async move { mailbox.pull(0, Duration::from_secs(30)).await }
        });
        // The pull is waiting (not answered with nothing) until the post.
        tokio::task::yield_now().await;
        mailbox.post(WindowEvent::ProvidersChanged);
        let batch = waiting.await.unwrap();
        assert_eq!(batch.events, vec![WindowEvent::ProvidersChanged]);
    }

    #[tokio::test]
    async fn a_pull_with_nothing_to_say_answers_empty_after_its_wait() {
        let mailbox = Mailbox::default();
        mailbox.post(WindowEvent::McpServers);
        let had = mailbox.pull(0, NO_WAIT).await;
        let batch = mailbox.pull(had.next, Duration::from_millis(20)).await;
        assert!(batch.events.is_empty());
        assert_eq!(batch.next, had.next);
    }

    #[tokio::test]
    async fn a_number_past_the_last_one_is_answered_from_the_last() {
        let mailbox = Arc::new(Mailbox::default());
        mailbox.post(WindowEvent::McpServers);
        let batch = mailbox.pull(1_000, NO_WAIT).await;
        assert!(batch.events.is_empty());
        assert_eq!(batch.next, 1);
        // While such a pull waits, what is posted (numbers 2, 3, ... below its 1,000)
        // still reaches it.
        let waiting = tokio::spawn({
            let mailbox = Arc::clone(&mailbox);
            async move { mailbox.pull(1_000, Duration::from_secs(30)).await }
        });
        tokio::task::yield_now().await;
        mailbox.post(WindowEvent::ProvidersChanged);
        let batch = waiting.await.unwrap();
        assert_eq!(batch.events, vec![WindowEvent::ProvidersChanged]);
        assert_eq!(batch.next, 2);
    }

    #[tokio::test]
    async fn a_page_that_never_pulls_keeps_only_the_newest_events() {
        let mailbox = Arc::new(Mailbox::default());
        let stream = mailbox.stream(1);
        for n in 0..(MAILBOX_LIMIT as u32 + 10) {
            stream.send(turn(n)).unwrap();
        }
        let batch = mailbox.pull(0, NO_WAIT).await;
        assert_eq!(batch.events.len(), MAILBOX_LIMIT);
        assert_eq!(
            batch.events[0],
            WindowEvent::Stream {
                stream: 1,
                message: turn(10)
            }
        );
        assert_eq!(batch.next, MAILBOX_LIMIT as u64 + 10);
    }

    #[tokio::test]
    async fn each_window_has_its_own_mailbox_until_it_closes() {
        let windows = WindowMailboxes::default();
        windows.post_to_each(["main", "settings"], &WindowEvent::McpServers);
        windows.of("main").post(WindowEvent::McpQuestions);
        let main = windows.of("main").pull(0, NO_WAIT).await;
        assert_eq!(
            main.events,
            vec![WindowEvent::McpServers, WindowEvent::McpQuestions]
        );
        let settings = windows.of("settings").pull(0, NO_WAIT).await;
        assert_eq!(settings.events, vec![WindowEvent::McpServers]);
        windows.remove("settings");
        assert_eq!(windows.len(), 1);
        // A Settings window opened again starts with an empty mailbox.
        assert!(
            windows
                .of("settings")
                .pull(0, NO_WAIT)
                .await
                .events
                .is_empty()
        );
    }

    #[test]
    fn events_read_as_the_page_expects() {
        let event = WindowEvent::Stream {
            stream: 3,
            message: serde_json::json!("https://example.invalid/authorize"),
        };
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            serde_json::json!({"kind": "stream", "stream": 3, "message": "https://example.invalid/authorize"})
        );
        assert_eq!(
            serde_json::to_value(WindowEvent::StreamEnded { stream: 3 }).unwrap(),
            serde_json::json!({"kind": "streamEnded", "stream": 3})
        );
        assert_eq!(
            serde_json::to_value(WindowEvent::McpServers).unwrap(),
            serde_json::json!({"kind": "mcpServers"})
        );
    }
}
