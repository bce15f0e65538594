//! Tool images as a person looks at them, in the real app under Xvfb at real sizes: a
//! 1600×1000 design frame, a 4000×4000 PNG and a tall 800×3000 screenshot from an MCP
//! server keep their aspect ratio in the card with a thumbnail at least as wide as shown;
//! the viewer opens fitted, every edge is reachable at actual size (by scrolling and by
//! dragging), the keyboard zooms and steps through a result's images; an image copied from
//! a card and pasted into the composer, and one dropped on it, reach the model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use conduit_e2e::desktop;
use conduit_e2e::llm_server::{Dialect, ScriptedCall, ScriptedLlm};
use conduit_e2e::{artifacts_dir, workspace_root};
use fantoccini::Locator;
use fantoccini::actions::{
    InputSource, MOUSE_BUTTON_LEFT, MouseActions, PointerAction, WheelAction, WheelActions,
};
use image::{Rgb, RgbImage};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

/// One app window at a time: the tests of this file share the display and the driver.
static ONE_WINDOW: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const FRAME: &str = "frame-1600x1000.png";
const LARGE: &str = "frame-4000x4000.png";
const TALL: &str = "screenshot-800x3000.png";
const MEMO: &str = "voice-memo-20s.wav";

/// A 20-second voice memo's length and shape: 16-bit mono at 22,050 Hz (861 KiB), a tone
/// whose pitch rises each second, so a place in it is a second of its own.
fn voice_memo() -> Vec<u8> {
    let rate: u32 = 22_050;
    let samples: Vec<i16> = (0..rate * 20)
        .map(|n| {
            let second = f64::from(n / rate);
            let t = f64::from(n) / f64::from(rate);
            ((t * (220.0 + 20.0 * second) * std::f64::consts::TAU).sin() * 8000.0) as i16
        })
        .collect();
    let data_bytes = (samples.len() * 2) as u32;
    let mut wav = Vec::with_capacity(44 + data_bytes as usize);
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + data_bytes).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes());
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&rate.to_le_bytes());
    wav.extend_from_slice(&(rate * 2).to_le_bytes());
    wav.extend_from_slice(&2u16.to_le_bytes());
    wav.extend_from_slice(&16u16.to_le_bytes());
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&data_bytes.to_le_bytes());
    for sample in samples {
        wav.extend_from_slice(&sample.to_le_bytes());
    }
    wav
}

/// A 5×7 pixel font for the few letters the pictures carry.
fn glyph(c: char) -> [&'static str; 7] {
    match c {
        'A' => [
            ".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#",
        ],
        'C' => [
            ".###.", "#...#", "#....", "#....", "#....", "#...#", ".###.",
        ],
        'D' => [
            "####.", "#...#", "#...#", "#...#", "#...#", "#...#", "####.",
        ],
        'E' => [
            "#####", "#....", "#....", "####.", "#....", "#....", "#####",
        ],
        'F' => [
            "#####", "#....", "#....", "####.", "#....", "#....", "#....",
        ],
        'G' => [
            ".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".###.",
        ],
        'I' => [
            "#####", "..#..", "..#..", "..#..", "..#..", "..#..", "#####",
        ],
        'L' => [
            "#....", "#....", "#....", "#....", "#....", "#....", "#####",
        ],
        'M' => [
            "#...#", "##.##", "#.#.#", "#.#.#", "#...#", "#...#", "#...#",
        ],
        'N' => [
            "#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#", "#...#",
        ],
        'O' => [
            ".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###.",
        ],
        'R' => [
            "####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#",
        ],
        'S' => [
            ".####", "#....", "#....", ".###.", "....#", "....#", "####.",
        ],
        'T' => [
            "#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#..",
        ],
        'U' => [
            "#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###.",
        ],
        'W' => [
            "#...#", "#...#", "#...#", "#.#.#", "#.#.#", "##.##", "#...#",
        ],
        'X' => [
            "#...#", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "#...#",
        ],
        '0' => [
            ".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###.",
        ],
        '1' => [
            "..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###.",
        ],
        '3' => [
            "####.", "....#", "....#", ".###.", "....#", "....#", "####.",
        ],
        '4' => [
            "...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#.",
        ],
        '6' => [
            ".###.", "#....", "#....", "####.", "#...#", "#...#", ".###.",
        ],
        '8' => [
            ".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###.",
        ],
        _ => [
            ".....", ".....", ".....", ".....", ".....", ".....", ".....",
        ],
    }
}

fn fill(image: &mut RgbImage, x: u32, y: u32, w: u32, h: u32, color: [u8; 3]) {
    for py in y..(y + h).min(image.height()) {
        for px in x..(x + w).min(image.width()) {
            image.put_pixel(px, py, Rgb(color));
        }
    }
}

fn circle(image: &mut RgbImage, cx: i64, cy: i64, r: i64, color: [u8; 3]) {
    for py in (cy - r).max(0)..(cy + r).min(i64::from(image.height())) {
        for px in (cx - r).max(0)..(cx + r).min(i64::from(image.width())) {
            if (px - cx).pow(2) + (py - cy).pow(2) <= r * r {
                image.put_pixel(px as u32, py as u32, Rgb(color));
            }
        }
    }
}

fn text(image: &mut RgbImage, x: u32, y: u32, scale: u32, words: &str, color: [u8; 3]) {
    for (i, c) in words.chars().enumerate() {
        for (row, line) in glyph(c).iter().enumerate() {
            for (col, bit) in line.chars().enumerate() {
                if bit == '#' {
                    let px = x + (i as u32 * 6 + col as u32) * scale;
                    fill(image, px, y + row as u32 * scale, scale, scale, color);
                }
            }
        }
    }
}

/// A design frame: a title bar, a headline, cards with text lines and shapes, and a
/// coloured square in each corner (red, green, blue, orange) so each edge can be seen.
fn design_frame(width: u32, height: u32, title: &str) -> Vec<u8> {
    let mut image = RgbImage::from_pixel(width, height, Rgb([248, 250, 252]));
    let unit = (width / 100).max(4);
    fill(&mut image, 0, 0, width, unit * 6, [49, 46, 129]);
    text(
        &mut image,
        unit * 7,
        unit * 2,
        unit / 3,
        "CONDUIT",
        [255, 255, 255],
    );
    text(&mut image, unit * 4, unit * 10, unit, title, [30, 41, 59]);
    let cards = 3;
    let card_width = (width - unit * 4 * (cards + 1)) / cards;
    for i in 0..cards {
        let x = unit * 4 + i * (card_width + unit * 4);
        let y = unit * 22;
        fill(&mut image, x, y, card_width, height / 2, [226, 232, 240]);
        circle(
            &mut image,
            i64::from(x + card_width / 2),
            i64::from(y + height / 8),
            i64::from(height / 12),
            [[99, 102, 241], [16, 185, 129], [244, 63, 94]][i as usize],
        );
        for line in 0..5 {
            fill(
                &mut image,
                x + unit * 2,
                y + height / 4 + line * unit * 2,
                card_width - unit * (4 + line * 3),
                unit,
                [100, 116, 139],
            );
        }
    }
    let corner = unit * 5;
    fill(&mut image, 0, 0, corner, corner, [220, 38, 38]);
    fill(&mut image, width - corner, 0, corner, corner, [22, 163, 74]);
    fill(
        &mut image,
        0,
        height - corner,
        corner,
        corner,
        [37, 99, 235],
    );
    fill(
        &mut image,
        width - corner,
        height - corner,
        corner,
        corner,
        [234, 88, 12],
    );
    png(&image)
}

/// A tall screenshot: a header, then rows of a list, each with an avatar and two lines.
fn tall_screenshot(width: u32, height: u32) -> Vec<u8> {
    let mut image = RgbImage::from_pixel(width, height, Rgb([255, 255, 255]));
    fill(&mut image, 0, 0, width, 80, [24, 24, 27]);
    text(&mut image, 24, 24, 5, "MESSAGES", [255, 255, 255]);
    let mut y = 100;
    let mut row = 0;
    while y + 90 < height - 60 {
        circle(
            &mut image,
            60,
            i64::from(y + 40),
            28,
            [[99, 102, 241], [16, 185, 129], [244, 63, 94]][row % 3],
        );
        fill(
            &mut image,
            110,
            y + 18,
            width - 220 - (row as u32 % 4) * 60,
            16,
            [63, 63, 70],
        );
        fill(&mut image, 110, y + 48, width - 300, 12, [161, 161, 170]);
        fill(&mut image, 0, y + 88, width, 2, [228, 228, 231]);
        y += 100;
        row += 1;
    }
    fill(&mut image, 0, height - 60, width, 60, [49, 46, 129]);
    text(&mut image, 24, height - 45, 4, "END", [255, 255, 255]);
    fill(&mut image, 0, 0, 40, 40, [220, 38, 38]);
    fill(&mut image, width - 40, height - 40, 40, 40, [234, 88, 12]);
    png(&image)
}

fn png(image: &RgbImage) -> Vec<u8> {
    let mut out = Vec::new();
    image
        .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

struct Fixture {
    home: tempfile::TempDir,
    llm: ScriptedLlm,
    shots: PathBuf,
}

impl Fixture {
    async fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        let folder = home.path().join("frames");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join(FRAME),
            design_frame(1600, 1000, "FRAME 1600X1000"),
        )
        .unwrap();
        std::fs::write(
            folder.join(LARGE),
            design_frame(4000, 4000, "LARGE 4000X4000"),
        )
        .unwrap();
        std::fs::write(folder.join(TALL), tall_screenshot(800, 3000)).unwrap();
        std::fs::write(folder.join(MEMO), voice_memo()).unwrap();

        let llm = ScriptedLlm::start(Vec::new()).await.unwrap();
        llm.answer_models(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}));
        let settings = llm.provider_settings();
        std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
        let root = workspace_root().join("tests/mcp-servers");
        let python = root.join(".venv/bin/python");
        assert!(
            python.is_file(),
            "run `make test`: the Python test servers are missing"
        );
        let servers = json!({"mcpServers": {"design": {
            "command": python,
            "args": [root.join("fixtures/design_frames.py"), folder]
        }}});
        std::fs::write(home.path().join("mcp_servers.json"), servers.to_string()).unwrap();
        Self {
            home,
            llm,
            shots: artifacts_dir("desktop-images"),
        }
    }

    async fn open(&self) -> Window {
        self.open_with(&[]).await
    }

    /// Opens the app with more environment (e.g. `GDK_SCALE` for a high-density screen).
    async fn open_with(&self, envs: &[(&str, &Path)]) -> Window {
        let mut all = vec![("CONDUIT_HOME", self.home.path())];
        all.extend_from_slice(envs);
        let window = Window {
            ui: desktop::Window::start(&all, WAIT).await,
        };
        window.model_shown("m").await;
        window
    }

    fn shot(&self, name: &str) -> PathBuf {
        self.shots.join(name)
    }
}

/// The shared window, with the image steps of this file.
struct Window {
    ui: desktop::Window,
}

impl std::ops::Deref for Window {
    type Target = desktop::Window;

    fn deref(&self) -> &desktop::Window {
        &self.ui
    }
}

/// What the card shows of one image: its box on screen, its loaded size and URL.
#[derive(Debug)]
struct CardImage {
    width: f64,
    height: f64,
    natural_width: f64,
    src: String,
    pixel_ratio: f64,
}

/// The viewer's image area (its visible part) and the image's box, in window pixels.
#[derive(Debug)]
struct ViewerState {
    area: [f64; 4],
    image: [f64; 4],
    zoom: String,
    position: Option<String>,
}

impl ViewerState {
    fn image_width(&self) -> f64 {
        self.image[2] - self.image[0]
    }
    fn image_height(&self) -> f64 {
        self.image[3] - self.image[1]
    }
}

const VIEWER_STATE: &str = r#"(() => {
  const v = document.querySelector('[aria-label="Image viewer"]');
  if (!v) return null;
  const area = v.querySelector('[aria-label="Image area"]');
  const img = area && area.querySelector('img');
  if (!img || !img.complete || !img.naturalWidth) return null;
  const a = area.getBoundingClientRect();
  const r = img.getBoundingClientRect();
  return {
    area: [a.left, a.top, a.left + area.clientWidth, a.top + area.clientHeight],
    image: [r.left, r.top, r.right, r.bottom],
    zoom: v.querySelector('[aria-label="Zoom level"]').textContent.trim(),
    position: v.querySelector('[aria-label="Image position"]')?.textContent.trim() ?? null,
  };
})()"#;

impl Window {
    /// The images of the last `frames` card once `count` of them have loaded.
    async fn card_images(&self, count: usize) -> Vec<CardImage> {
        let value = self
            .wait(&format!(
                r#"(() => {{
  const cards = document.querySelectorAll('article[aria-label="Tool call frames"]');
  const card = cards[cards.length - 1];
  const imgs = card ? [...card.querySelectorAll('[aria-label="Tool result"] img')] : [];
  if (imgs.length !== {count} || !imgs.every(i => i.complete && i.naturalWidth > 0)) return null;
  return imgs.map(i => {{ const r = i.getBoundingClientRect();
    return [r.width, r.height, i.naturalWidth, i.currentSrc || i.src, devicePixelRatio]; }});
}})()"#
            ))
            .await;
        value
            .as_array()
            .unwrap()
            .iter()
            .map(|v| CardImage {
                width: v[0].as_f64().unwrap(),
                height: v[1].as_f64().unwrap(),
                natural_width: v[2].as_f64().unwrap(),
                src: v[3].as_str().unwrap().to_owned(),
                pixel_ratio: v[4].as_f64().unwrap(),
            })
            .collect()
    }

    async fn viewer(&self) -> ViewerState {
        // Two frames, so a zoom or scroll just made is laid out.
        self.session
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1];\
                 requestAnimationFrame(() => requestAnimationFrame(() => done(null)));",
                vec![],
            )
            .await
            .unwrap();
        let v = self.wait(VIEWER_STATE).await;
        let four = |key: &str| -> [f64; 4] {
            let a = v[key].as_array().unwrap();
            [0, 1, 2, 3].map(|i| a[i].as_f64().unwrap())
        };
        ViewerState {
            area: four("area"),
            image: four("image"),
            zoom: v["zoom"].as_str().unwrap().to_owned(),
            position: v["position"].as_str().map(str::to_owned),
        }
    }

    /// Scrolls the viewer's image area to `(x, y)` (clamped by the browser; `1e9` is the end).
    async fn scroll_viewer(&self, x: f64, y: f64) {
        self.js(&format!(
            r#"const a = document.querySelector('[aria-label="Image area"]'); a.scrollLeft = {x}; a.scrollTop = {y};"#
        ))
        .await;
    }

    async fn key(&self, key: &str) {
        let dialog = self
            .session
            .client
            .find(Locator::Css(r#"[aria-label="Image viewer"]"#))
            .await
            .unwrap();
        dialog.send_keys(key).await.unwrap();
    }
}

fn call(id: &str, names: &[&str]) -> ScriptedCall {
    ScriptedCall::new(id, "design__frames", json!({ "names": names }))
}

fn assert_aspect(what: &str, width: f64, height: f64, natural: (f64, f64)) {
    let shown = width / height;
    let real = natural.0 / natural.1;
    assert!(
        (shown - real).abs() / real < 0.02,
        "{what}: shown {width}×{height} ({shown:.3}) vs the image's {real:.3}"
    );
}

fn assert_card_image(what: &str, image: &CardImage, natural: (f64, f64)) {
    assert_aspect(what, image.width, image.height, natural);
    assert!(
        image.natural_width >= (image.width * image.pixel_ratio).floor(),
        "{what}: the thumbnail ({} px) is narrower than shown ({} css px × {})",
        image.natural_width,
        image.width,
        image.pixel_ratio
    );
    assert!(image.width > 0.0 && image.width <= natural.0);
}

/// The image fits inside the viewer's area, touching it on one axis (a large image).
fn assert_fitted(what: &str, v: &ViewerState, natural: (f64, f64)) {
    let [al, at, ar, ab] = v.area;
    let [il, it, ir, ib] = v.image;
    assert!(
        il >= al - 1.0 && it >= at - 1.0 && ir <= ar + 1.0 && ib <= ab + 1.0,
        "{what}: the fitted image {:?} leaves the area {:?}",
        v.image,
        v.area
    );
    let touches =
        (v.image_width() - (ar - al)).abs() <= 2.0 || (v.image_height() - (ab - at)).abs() <= 2.0;
    assert!(touches, "{what}: fitted but touching no edge: {v:?}");
    assert_aspect(what, v.image_width(), v.image_height(), natural);
}

/// At actual size, the top-left and the bottom-right of the image can each be scrolled
/// into the area.
async fn assert_every_edge_reachable(window: &Window, what: &str, natural: (f64, f64)) {
    window.click_button("Actual size").await;
    let v = window.viewer().await;
    assert_eq!(v.zoom, "100%", "{what}");
    assert!(
        (v.image_width() - natural.0).abs() <= 1.0 && (v.image_height() - natural.1).abs() <= 1.0,
        "{what}: actual size is {}×{}",
        v.image_width(),
        v.image_height()
    );
    window.scroll_viewer(0.0, 0.0).await;
    let start = window.viewer().await;
    // An edge is reachable when it shows inside the area (a side narrower than the area is
    // centred; a wider one then starts exactly at the area's edge).
    assert!(
        start.image[0] >= start.area[0] - 1.0
            && start.image[1] >= start.area[1] - 1.0
            && start.image[0] < start.area[2]
            && start.image[1] < start.area[3],
        "{what}: the left and top edges are not reachable: {start:?}"
    );
    window.scroll_viewer(1e9, 1e9).await;
    let end = window.viewer().await;
    assert!(
        end.image[2] <= end.area[2] + 1.0
            && end.image[3] <= end.area[3] + 1.0
            && end.image[2] > end.area[0]
            && end.image[3] > end.area[1],
        "{what}: the right and bottom edges are not reachable: {end:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_images_at_real_sizes() {
    let _window = ONE_WINDOW.lock().await;
    let chat = Dialect::OpenAiChat;
    let fixture = Fixture::new().await;
    fixture.llm.push(vec![
        chat.turn(&["Here is the frame."], &[call("c1", &[FRAME])]),
        chat.text(&["That is the 1600 by 1000 frame."]),
    ]);
    let window = fixture.open().await;
    window.send("Show me the frame").await;
    // Approval is not what these tests look at: allow the tool once and for all.
    window.always_allow().await;
    window
        .answer_contains("That is the 1600 by 1000 frame.")
        .await;

    // One frame: as wide as the card, its aspect ratio kept, a thumbnail made for it.
    let card = window.card_images(1).await;
    let frame = &card[0];
    assert_card_image("the frame in its card", frame, (1600.0, 1000.0));
    assert!(frame.width > 600.0, "the frame is shown large: {frame:?}");
    assert!(
        frame.src.contains("/w/"),
        "a sized thumbnail, not the original: {frame:?}"
    );
    assert!(frame.natural_width < 1600.0, "{frame:?}");
    window
        .js(r#"document.querySelector('article[aria-label="Tool call frames"]').scrollIntoView({ block: "center" })"#)
        .await;
    window.shot(&fixture.shot("01-frame-in-card.png")).await;

    // The viewer opens fitted to the window; actual size reaches every edge.
    window.click_button("Open image full size").await;
    let opened = window.viewer().await;
    assert_fitted("the frame", &opened, (1600.0, 1000.0));
    assert_ne!(
        opened.zoom, "100%",
        "a frame larger than the window opens fitted"
    );
    window.shot(&fixture.shot("02-viewer-fitted.png")).await;
    assert_every_edge_reachable(&window, "the frame", (1600.0, 1000.0)).await;
    window
        .shot(&fixture.shot("03-viewer-actual-size-end.png"))
        .await;

    // Dragging pans: from the top-left, drag left and up by 300×200.
    window.scroll_viewer(0.0, 0.0).await;
    let before = window.viewer().await;
    let area = window
        .session
        .client
        .find(Locator::Css(r#"[aria-label="Image area"]"#))
        .await
        .unwrap();
    let drag = MouseActions::new("mouse".into())
        .then(PointerAction::MoveToElement {
            element: area,
            duration: None,
            x: 0.0,
            y: 0.0,
        })
        .then(PointerAction::Down {
            button: MOUSE_BUTTON_LEFT,
        })
        .then(PointerAction::MoveBy {
            duration: Some(Duration::from_millis(200)),
            x: -300.0,
            y: -200.0,
        })
        .then(PointerAction::Up {
            button: MOUSE_BUTTON_LEFT,
        });
    window.session.client.perform_actions(drag).await.unwrap();
    let after = window.viewer().await;
    assert!(
        (before.image[0] - after.image[0] - 300.0).abs() <= 2.0
            && (before.image[1] - after.image[1] - 200.0).abs() <= 2.0,
        "dragging moved the image by 300×200: {before:?} -> {after:?}"
    );

    // Keys: 0 fits, + zooms in, 1 is actual size, Escape closes.
    window.key("0").await;
    assert_eq!(window.viewer().await.zoom, opened.zoom);
    // The wheel zooms around the pointer: the image point under it stays under it.
    let fitted = window.viewer().await;
    let (px, py) = (
        (fitted.image[0] + fitted.image_width() * 0.25).round(),
        (fitted.image[1] + fitted.image_height() * 0.3).round(),
    );
    let fraction = |v: &ViewerState| {
        (
            (px - v.image[0]) / v.image_width(),
            (py - v.image[1]) / v.image_height(),
        )
    };
    let under = fraction(&fitted);
    let wheel = WheelActions::new("wheel".into()).then(WheelAction::Scroll {
        duration: None,
        x: px as i64,
        y: py as i64,
        delta_x: 0,
        delta_y: -120,
    });
    window.session.client.perform_actions(wheel).await.unwrap();
    let wheeled = window.viewer().await;
    assert!(
        wheeled.image_width() > fitted.image_width() * 1.2,
        "the wheel zoomed in: {fitted:?} -> {wheeled:?}"
    );
    let still = fraction(&wheeled);
    assert!(
        (still.0 - under.0).abs() < 0.005 && (still.1 - under.1).abs() < 0.005,
        "the point under the pointer moved: {under:?} -> {still:?}"
    );
    window.key("+").await;
    let zoomed = window.viewer().await;
    assert!(
        zoomed.image_width() > opened.image_width() * 1.2,
        "{zoomed:?}"
    );
    window.key("1").await;
    assert_eq!(window.viewer().await.zoom, "100%");
    window.key("\u{E00C}").await; // Escape
    window
        .wait(r#"!document.querySelector('[aria-label="Image viewer"]')"#)
        .await;

    // Three images in one result: a row of thumbnails; the viewer steps through them.
    fixture.llm.push(vec![
        chat.turn(&[], &[call("c2", &[FRAME, LARGE, TALL])]),
        chat.text(&["Three pictures."]),
    ]);
    window.send("Show me all three").await;
    window.answer_contains("Three pictures.").await;
    let row = window.card_images(3).await;
    let sizes = [(1600.0, 1000.0), (4000.0, 4000.0), (800.0, 3000.0)];
    for (image, natural) in row.iter().zip(sizes) {
        assert_card_image("a thumbnail in the row", image, natural);
        assert!(
            (image.height - 160.0).abs() <= 1.0,
            "one row height: {image:?}"
        );
    }
    window.shot(&fixture.shot("04-row-of-three.png")).await;

    window.click_button("Open image 2 of 3").await;
    let large = window.viewer().await;
    assert_eq!(large.position.as_deref(), Some("2 of 3"));
    assert_fitted("the 4000×4000 image", &large, (4000.0, 4000.0));
    window
        .shot(&fixture.shot("05-viewer-large-fitted.png"))
        .await;
    assert_every_edge_reachable(&window, "the 4000×4000 image", (4000.0, 4000.0)).await;
    window
        .shot(&fixture.shot("06-viewer-large-actual-end.png"))
        .await;

    window.key("\u{E014}").await; // Arrow right
    let tall = window.viewer().await;
    assert_eq!(tall.position.as_deref(), Some("3 of 3"));
    assert_fitted("the tall screenshot", &tall, (800.0, 3000.0));
    window
        .shot(&fixture.shot("07-viewer-tall-fitted.png"))
        .await;
    assert_every_edge_reachable(&window, "the tall screenshot", (800.0, 3000.0)).await;
    window.key("\u{E012}").await; // Arrow left
    assert_eq!(window.viewer().await.position.as_deref(), Some("2 of 3"));
    window.click_button("Close image").await;

    // Save the frame from its card through the native save dialog: typed into it as a
    // person would, the file is the stored image, byte for byte.
    let folder = PathBuf::from(format!("/tmp/conduit-save-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let target = folder.join("frame.png");
    window
        .session
        .click_xpath(
            "(//article[@aria-label='Tool call frames'])[1]//button[@aria-label='Save image']",
            WAIT,
        )
        .await
        .unwrap();
    let script = workspace_root().join("tests/support/type_in_dialog.py");
    let typed = tokio::process::Command::new("python3")
        .arg(&script)
        .arg("Save image")
        .arg(&target)
        .output()
        .await
        .unwrap();
    assert!(
        typed.status.success(),
        "typing into the save dialog failed: {}",
        String::from_utf8_lossy(&typed.stderr)
    );
    window
        .wait(&format!(
            r#"[...document.querySelectorAll('[aria-label="Image action"]')].some(s => s.textContent === "Saved to {}")"#,
            target.display()
        ))
        .await;
    let saved = std::fs::read(&target).unwrap();
    let stored = std::fs::read(fixture.home.path().join("frames").join(FRAME)).unwrap();
    assert!(saved == stored, "the saved file is the stored image");
    std::fs::remove_dir_all(&folder).unwrap();

    // Copy the frame from its card, paste it into the composer: it reaches the model.
    window
        .session
        .click_xpath(
            "(//article[@aria-label='Tool call frames'])[1]//button[@aria-label='Copy image']",
            WAIT,
        )
        .await
        .unwrap();
    window
        .wait(r#"[...document.querySelectorAll('[aria-label="Image action"]')].some(s => s.textContent === "Copied")"#)
        .await;
    // What the page got from the paste, for the failure message.
    window
        .js(
            r#"document.addEventListener("paste", (e) => { const d = e.clipboardData;
            window.__pasted = { types: [...d.types], files: d.files.length,
              items: [...d.items].map((i) => `${i.kind}:${i.type}`) }; }, true);"#,
        )
        .await;
    let message = window.message_box().await;
    message.click().await.unwrap();
    message.send_keys("\u{E009}v\u{E000}").await.unwrap(); // Ctrl+V
    let attached = window
        .session
        .wait_js(
            r#"document.querySelectorAll('[aria-label="Attachments"] li').length === 1"#,
            WAIT,
        )
        .await;
    if attached.is_err() {
        let seen = window.js("return window.__pasted ?? null").await;
        let host = window
            .session
            .client
            .execute_async(
                r#"const done = arguments[arguments.length - 1];
                   window.__TAURI_INTERNALS__.invoke("clipboard_image")
                     .then((m) => done(JSON.stringify(m)), (e) => done(`error: ${JSON.stringify(e)}`));"#,
                vec![],
            )
            .await;
        panic!(
            "the pasted image was not attached; the paste carried {seen}; the host's clipboard: {host:?}"
        );
    }
    // The host stored the clipboard's image and told the page only its reference.
    let reply = window
        .session
        .client
        .execute_async(
            r#"const done = arguments[arguments.length - 1];
               window.__TAURI_INTERNALS__.invoke("clipboard_image")
                 .then((m) => done({ok: m}), (e) => done({err: JSON.stringify(e)}));"#,
            vec![],
        )
        .await
        .unwrap();
    let media = &reply["ok"];
    assert!(
        media["hash"].as_str().is_some_and(|h| h.len() == 64) && media["mime"] == "image/png",
        "{reply}"
    );
    let asked = fixture.llm.requests().len();
    fixture.llm.push(vec![chat.text(&["A pasted frame."])]);
    window.send("What did I paste?").await;
    window.answer_contains("A pasted frame.").await;
    let pasted = fixture.llm.requests()[asked].body.to_string();
    assert!(pasted.contains("image_url"), "{pasted:.400}");

    // Drop an image on the composer: it reaches the model too.
    let dropped = base64::engine::general_purpose::STANDARD.encode(tall_screenshot(400, 600));
    window
        .js(&format!(
            r#"const bytes = Uint8Array.from(atob("{dropped}"), c => c.charCodeAt(0));
               const data = new DataTransfer();
               data.items.add(new File([bytes], "dropped.png", {{ type: "image/png" }}));
               const form = document.querySelector('form[aria-label="Composer"]');
               form.dispatchEvent(new DragEvent("dragover", {{ dataTransfer: data, bubbles: true, cancelable: true }}));
               form.dispatchEvent(new DragEvent("drop", {{ dataTransfer: data, bubbles: true, cancelable: true }}));"#
        ))
        .await;
    window
        .wait(r#"[...document.querySelectorAll('[aria-label="Attachments"] li')].some(li => li.textContent.includes("dropped.png"))"#)
        .await;
    let asked = fixture.llm.requests().len();
    fixture
        .llm
        .push(vec![chat.text(&["A dropped screenshot."])]);
    window.send("And this one?").await;
    window.answer_contains("A dropped screenshot.").await;
    let body = fixture.llm.requests()[asked].body.to_string();
    assert!(body.contains("image_url"), "{body:.400}");
    window
        .shot(&fixture.shot("08-pasted-and-dropped.png"))
        .await;

    window.ui.session.close().await.unwrap();
}

/// On a screen with two device pixels per CSS pixel the card loads a thumbnail twice as
/// wide as it shows the frame (here the original: no allowed width lies between).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_density_screen_gets_a_thumbnail_twice_as_wide() {
    let _window = ONE_WINDOW.lock().await;
    let chat = Dialect::OpenAiChat;
    let fixture = Fixture::new().await;
    fixture.llm.push(vec![
        chat.turn(&[], &[call("c1", &[LARGE])]),
        chat.text(&["The large frame."]),
    ]);
    let window = fixture.open_with(&[("GDK_SCALE", Path::new("2"))]).await;
    window.send("Show me the large frame").await;
    // Approval is not what these tests look at: allow the tool once and for all.
    window.always_allow().await;
    window.answer_contains("The large frame.").await;
    let card = window.card_images(1).await;
    let large = &card[0];
    assert_eq!(
        large.pixel_ratio, 2.0,
        "GDK_SCALE=2 gives the page two pixels per CSS pixel"
    );
    assert_card_image("the 4000×4000 frame at 2×", large, (4000.0, 4000.0));
    // 480 CSS px tall and wide (the card's height limit), so 960 device pixels: 1024.
    assert!(large.src.ends_with("/w/1024"), "{large:?}");
    window.shot(&fixture.shot("09-high-density.png")).await;
    window.ui.session.close().await.unwrap();
}

/// A voice memo a tool returns plays in its card, as a person plays it: read when Play is
/// pressed, its length known, a jump to its middle lands there, and it plays on from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_recording_plays_in_its_card_and_seeks() {
    let _window = ONE_WINDOW.lock().await;
    let chat = Dialect::OpenAiChat;
    let fixture = Fixture::new().await;
    fixture.llm.push(vec![
        chat.turn(
            &[],
            &[ScriptedCall::new(
                "c1",
                "design__recording",
                json!({ "name": MEMO }),
            )],
        ),
        chat.text(&["That is the memo."]),
    ]);
    let window = fixture.open().await;
    window.send("Play me the memo").await;
    window.always_allow().await;
    window.answer_contains("That is the memo.").await;
    // Nothing is read until it is played.
    window
        .js(r#"document.querySelector('button[aria-label="Play Audio from recording"]').scrollIntoView({ block: "center" }); return null;"#)
        .await;
    window
        .shot(&fixture.shot("10-recording-before-play.png"))
        .await;
    window.click_button("Play Audio from recording").await;
    let audio = r#"document.querySelector('audio[aria-label="Audio from recording"]')"#;
    let duration = window
        .wait(&format!(
            "(() => {{ const a = {audio}; return a && (a.error ? `error ${{a.error.code}}: ${{a.error.message}}` : (a.readyState >= 1 && isFinite(a.duration) && a.duration)); }})()"
        ))
        .await;
    let Some(duration) = duration.as_f64() else {
        window
            .fail(&format!("the memo does not load: {duration}"))
            .await
    };
    assert!(
        (duration - 20.0).abs() < 0.1,
        "the memo is 20 s: {duration}"
    );
    // It plays at once; paused, a jump to 15 s lands there.
    window
        .js(&format!(
            "const a = {audio}; a.muted = true; a.pause(); a.currentTime = 15; return null;"
        ))
        .await;
    let landed = window
        .wait(&format!(
            "(() => {{ const a = {audio}; return !a.seeking && a.currentTime >= 14.9 && a.currentTime; }})()"
        ))
        .await;
    assert!(landed.as_f64().unwrap() < 16.0, "{landed}");
    window
        .js(&format!("{audio}.play().catch(() => {{}}); return null;"))
        .await;
    let playing = window
        .wait(&format!(
            "(() => {{ const a = {audio}; return a.error ? 'error ' + a.error.code : (a.currentTime > 15.5 && a.currentTime); }})()"
        ))
        .await;
    assert!(playing.is_f64(), "the memo plays on: {playing}");
    window
        .js(&format!(
            "const a = {audio}; a.pause(); a.scrollIntoView({{ block: 'center' }}); return null;"
        ))
        .await;
    window.shot(&fixture.shot("11-recording-in-card.png")).await;
    window.ui.session.close().await.unwrap();
}
