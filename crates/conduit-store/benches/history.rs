//! What history costs: opening the newest 50 messages of a 10,000-message conversation,
//! full-text search over 100,000 messages and 10,000 more in Chinese, opening that history
//! again and migrating it from version 5, storing a 4000×4000 PNG with its thumbnail,
//! drawing a sampling request's images for the review and the viewer, and inserts per
//! second. Run with `make bench` (release build). Prints a report.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::io::Cursor;
use std::time::{Duration, Instant};

use conduit_core::content::{Block, Message, Role};
use conduit_core::media::MediaStore;
use conduit_store::{FileMediaStore, MessageStatus, Store};

const WORDS: &[&str] = &[
    "crab",
    "harbour",
    "lighthouse",
    "rust",
    "compiler",
    "tide",
    "anchor",
    "kelp",
    "sonar",
    "reef",
    "shell",
    "current",
    "beacon",
    "trawler",
    "gull",
    "pier",
    "buoy",
    "coral",
];

fn sentence(n: usize) -> String {
    (0..24)
        .map(|i| WORDS[(n * 7 + i * 13 + n / 5) % WORDS.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

const CHINESE_WORDS: &[&str] = &[
    "港口",
    "灯塔",
    "编译器",
    "潮汐",
    "锚",
    "海带",
    "声纳",
    "珊瑚",
    "北京",
    "上海",
    "长城",
    "浮标",
    "码头",
    "海鸥",
    "贝壳",
    "渔船",
];

/// A sentence without spaces, as Chinese is written.
fn chinese_sentence(n: usize) -> String {
    (0..24)
        .map(|i| CHINESE_WORDS[(n * 7 + i * 13 + n / 5) % CHINESE_WORDS.len()])
        .collect::<Vec<_>>()
        .concat()
}

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..runs {
        let started = Instant::now();
        let value = f();
        best = best.min(started.elapsed());
        last = Some(value);
    }
    (best, last.expect("at least one run"))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = Store::open(
        &dir.path().join("history.db"),
        FileMediaStore::new(dir.path().join("media")),
    )
    .expect("the store opens");
    println!("History (release build, SQLite WAL, temp folder)");

    // Inserts: one message per transaction-set, as a chat writes them.
    let long = store
        .create_conversation(Some("bench"), Some("bench"))
        .unwrap();
    let started = Instant::now();
    for n in 0..10_000 {
        let role = if n % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        let message = Message {
            role,
            blocks: vec![Block::text(sentence(n))],
        };
        store
            .add_message(&long, &message, MessageStatus::Complete)
            .unwrap();
    }
    let took = started.elapsed();
    println!(
        "insert 10,000 messages one by one: {:.0} ms ({:.0} messages/s)",
        ms(took),
        10_000.0 / took.as_secs_f64()
    );

    let (took, newest) = best_of(5, || store.messages(&long, Some(50)).unwrap());
    assert_eq!(newest.len(), 50);
    println!(
        "open the newest 50 messages of a 10,000-message conversation: {:.2} ms",
        ms(took)
    );

    // 90,000 more messages across 90 conversations: 100,000 in all.
    for c in 0..90 {
        let id = store.create_conversation(None, None).unwrap();
        for n in 0..1_000 {
            let message = Message::user_text(sentence(c * 1_000 + n));
            store
                .add_message(&id, &message, MessageStatus::Complete)
                .unwrap();
        }
    }
    let marker = store.create_conversation(None, None).unwrap();
    store
        .add_message(
            &marker,
            &Message::user_text("the quartermaster logged a narwhal sighting"),
            MessageStatus::Complete,
        )
        .unwrap();
    for query in ["narwhal", "lighthouse beacon", "cor"] {
        let (took, hits) = best_of(5, || store.search(query, 20).unwrap());
        println!(
            "search {query:?} over 100,001 messages: {:.2} ms ({} hits shown)",
            ms(took),
            hits.len()
        );
    }

    // Chinese, which the index holds a character at a time: 10,000 more messages.
    for c in 0..10 {
        let id = store.create_conversation(None, None).unwrap();
        for n in 0..1_000 {
            let message = Message::user_text(chinese_sentence(c * 1_000 + n));
            store
                .add_message(&id, &message, MessageStatus::Complete)
                .unwrap();
        }
    }
    for query in ["长城", "北京 港口", "灯"] {
        let (took, hits) = best_of(5, || store.search(query, 20).unwrap());
        println!(
            "search {query:?} over 110,001 messages (10,000 Chinese): {:.2} ms ({} hits shown)",
            ms(took),
            hits.len()
        );
    }
    let path = dir.path().join("history.db");
    let bytes = std::fs::metadata(&path).unwrap().len();
    let (took, _) = best_of(3, || {
        Store::open(&path, FileMediaStore::new(dir.path().join("media"))).unwrap()
    });
    println!(
        "open the 110,001-message history again ({:.0} MB; header and schema read): {:.1} ms",
        bytes as f64 / 1e6,
        ms(took)
    );
    let (took, _) = best_of(3, || {
        rusqlite::Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA quick_check", [], |row| row.get::<_, String>(0))
            .unwrap()
    });
    println!(
        "check it whole (PRAGMA quick_check, on the upkeep thread since session 31; each open did it before): {:.1} ms",
        ms(took)
    );
    // Back to version 5, its Chinese rows as that version wrote them, and opened: the
    // migration indexes them again.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "UPDATE search SET text = replace(text, char(8203), '') WHERE text GLOB '*[一-鿿]*';
             ALTER TABLE conversations DROP COLUMN instructions;
             ALTER TABLE conversations DROP COLUMN pinned;
             DROP INDEX conversations_by_pin;
             PRAGMA user_version = 5;",
        )
        .unwrap();
    let started = Instant::now();
    drop(Store::open(&path, FileMediaStore::new(dir.path().join("media"))).unwrap());
    println!(
        "migrate that history from version 5 (10,000 Chinese messages indexed again): {:.0} ms",
        ms(started.elapsed())
    );

    let mut png = Vec::new();
    let noise = image::RgbImage::from_fn(4000, 4000, |x, y| {
        image::Rgb([(x % 251) as u8, (y % 241) as u8, ((x ^ y) % 239) as u8])
    });
    image::DynamicImage::ImageRgb8(noise)
        .write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    let media_root = tempfile::tempdir().unwrap();
    let media = FileMediaStore::new(media_root.path());
    let started = Instant::now();
    let stored = media.put(&png, Some("image/png")).unwrap();
    let took = started.elapsed();
    assert!(media.thumbnail_of(&stored.hash).exists());
    println!(
        "validate + store a 4000x4000 PNG ({:.1} MB) with its thumbnail: {:.0} ms",
        png.len() as f64 / 1e6,
        ms(took)
    );
    // The card's thumbnail of that image at 1024 px: made on first view, then read back.
    let started = Instant::now();
    let (sized, _) = media.sized(&stored.hash, 1024).unwrap().unwrap();
    let first = started.elapsed();
    assert_eq!(image::image_dimensions(&sized).unwrap(), (1024, 1024));
    let started = Instant::now();
    media.sized(&stored.hash, 1024).unwrap().unwrap();
    println!(
        "size that PNG to 1024 px for a card: {:.0} ms the first time, {:.2} ms after",
        ms(first),
        ms(started.elapsed())
    );
    // A sampling request's image as the review draws it (800 px) and as the viewer does
    // (whole): decode, alpha over a checkerboard when it has one, PNG. A request is at
    // most 8 MiB of JSON, so its PNGs compress well; the largest is 64 megapixels.
    let with_alpha = |width: u32, height: u32| {
        let image = image::RgbaImage::from_fn(width, height, |x, y| {
            let alpha = if y % 64 < 32 { 255 } else { 128 };
            image::Rgba([(x % 251) as u8, (y % 241) as u8, 200, alpha])
        });
        let mut png = Vec::new();
        image::DynamicImage::ImageRgba8(image)
            .write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        png
    };
    let screenshot = with_alpha(1280, 20_000);
    let largest = with_alpha(8000, 8000);
    for (name, bytes) in [
        ("1280x20000 RGBA screenshot", &screenshot),
        ("8000x8000 RGBA image (the largest allowed)", &largest),
    ] {
        for (view, edge) in [("800 px", 800), ("whole", conduit_core::images::MAX_SIDE)] {
            let (took, drawn) = best_of(3, || {
                conduit_core::images::preview_png(bytes, edge, edge).unwrap()
            });
            println!(
                "draw a sampling request's {name} ({:.1} MB), {view}: {:.0} ms ({:.1} MB PNG)",
                bytes.len() as f64 / 1e6,
                ms(took),
                drawn.len() as f64 / 1e6
            );
        }
    }
    println!("budgets: search < 50 ms; PNG with thumbnail < 500 ms; first screen < 300 ms");
}
