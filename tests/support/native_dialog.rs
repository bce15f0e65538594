//! Answers the app's native dialogs (GTK, under Xvfb) as a user would, with `xdotool`:
//! a confirmation by its Allow button's mnemonic or by Escape, a file picker by typing
//! the path. The page cannot reach these dialogs; the tests reach them from outside.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// The title of the app's confirmations (`src-tauri/src/native.rs`).
pub const CONFIRM_TITLE: &str = "Conduit: confirm";
/// The title of the app's import file picker.
pub const PICK_TITLE: &str = "Import MCP servers from";

fn xdotool(args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new("xdotool")
        .args(args)
        .output()
        .context("xdotool is missing: install it (Debian: apt-get install xdotool)")?;
    if !output.status.success() {
        bail!(
            "xdotool {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The X window whose title is exactly `title`, once one is mapped (within `timeout`).
pub fn wait_for_window(title: &str, timeout: Duration) -> anyhow::Result<String> {
    let deadline = Instant::now() + timeout;
    let pattern = format!("^{}$", regex_escape(title));
    loop {
        if let Ok(found) = xdotool(&["search", "--onlyvisible", "--name", &pattern])
            && let Some(id) = found.lines().next()
        {
            return Ok(id.trim().to_owned());
        }
        if Instant::now() > deadline {
            bail!("no window titled {title:?} appeared within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether a window titled `title` is shown now.
pub fn window_shown(title: &str) -> bool {
    let pattern = format!("^{}$", regex_escape(title));
    xdotool(&["search", "--onlyvisible", "--name", &pattern])
        .map(|found| !found.trim().is_empty())
        .unwrap_or(false)
}

/// Whether the window `id`, titled `title`, is shown now.
fn dialog_shown(title: &str, id: &str) -> bool {
    let pattern = format!("^{}$", regex_escape(title));
    xdotool(&["search", "--onlyvisible", "--name", &pattern])
        .map(|found| found.lines().any(|line| line.trim() == id))
        .unwrap_or(false)
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_ascii_alphanumeric() || c == ' ' {
                vec![c]
            } else {
                vec!['\\', c]
            }
        })
        .collect()
}

fn focus(window: &str) -> anyhow::Result<()> {
    xdotool(&["windowfocus", "--sync", window])?;
    Ok(())
}

/// How the user answers a confirmation.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    /// Presses the button whose label starts with this letter (its mnemonic: Alt+letter),
    /// e.g. `'a'` for Allow, `'o'` for Open, `'s'` for Show.
    Press(char),
    /// Escape: the dialog's Cancel.
    Cancel,
}

/// How long the app holds a confirmation's allowing button after it shows or is focused
/// (`ALLOW_DELAY` in `src-tauri/src/native.rs`).
pub const ALLOW_DELAY: Duration = Duration::from_millis(750);

/// Answers the app's confirmation, then waits until the dialog is gone. The allowing
/// button takes no press while the app holds it, so a press is repeated, as a user would
/// click again, until the dialog closes.
pub fn answer_confirmation(answer: Answer, timeout: Duration) -> anyhow::Result<()> {
    let window = wait_for_window(CONFIRM_TITLE, timeout)?;
    focus(&window)?;
    let key = match answer {
        Answer::Press(letter) => format!("alt+{letter}"),
        Answer::Cancel => "Escape".to_owned(),
    };
    let deadline = Instant::now() + timeout;
    // This dialog, by its window: the next confirmation, with the same title, may already
    // be showing when this one closes.
    let still_open = || dialog_shown(CONFIRM_TITLE, &window);
    loop {
        xdotool(&["key", "--clearmodifiers", &key])?;
        let pressed = Instant::now();
        while still_open() && pressed.elapsed() < Duration::from_millis(300) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if !still_open() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the confirmation stayed open after the answer");
        }
    }
}

/// Presses the confirmation's button `letter` as soon as it shows, as a click or a key
/// meant for the window behind would land, and fails unless the dialog is still open
/// afterwards: the app holds that button for [`ALLOW_DELAY`].
pub fn press_as_it_shows(letter: char, timeout: Duration) -> anyhow::Result<()> {
    let window = wait_for_window(CONFIRM_TITLE, timeout)?;
    // The hold began when the dialog was mapped, at most one poll (100 ms) and a search
    // before it was found here; focusing it (if it had no focus yet) holds anew.
    let seen = Instant::now();
    focus(&window)?;
    xdotool(&["key", "--clearmodifiers", &format!("alt+{letter}")])?;
    let pressed_after = seen.elapsed();
    if pressed_after + Duration::from_millis(250) >= ALLOW_DELAY {
        bail!(
            "the press came {pressed_after:?} after the dialog was found, maybe past the hold: \
             this machine is too busy to tell whether an early press is refused"
        );
    }
    // Long enough for GTK to have acted on the press, had it taken it.
    std::thread::sleep(Duration::from_millis(300));
    if !dialog_shown(CONFIRM_TITLE, &window) {
        bail!("the confirmation took a press made {pressed_after:?} after it was found");
    }
    Ok(())
}

/// [`answer_confirmation`] off the async workers, for a test's async body.
pub async fn answer(answer: Answer, timeout: Duration) -> anyhow::Result<()> {
    tokio::task::spawn_blocking(move || answer_confirmation(answer, timeout)).await?
}

/// Picks `file` in the app's native file picker by typing its path.
pub fn pick_file(file: &Path, timeout: Duration) -> anyhow::Result<()> {
    let window = wait_for_window(PICK_TITLE, timeout)?;
    focus(&window)?;
    // Ctrl+L opens the location field; the path then goes in whole. The field completes
    // names as they are typed, which can take the first Return: press it again (a few
    // times at most) until the picker closes.
    xdotool(&["key", "--clearmodifiers", "ctrl+l"])?;
    xdotool(&["key", "--clearmodifiers", "ctrl+a"])?;
    let path = file.display().to_string();
    xdotool(&["type", "--clearmodifiers", "--delay", "20", &path])?;
    for _ in 0..5 {
        xdotool(&["key", "--clearmodifiers", "Return"])?;
        let deadline = Instant::now() + timeout / 5;
        while window_shown(PICK_TITLE) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        if !window_shown(PICK_TITLE) {
            return Ok(());
        }
    }
    bail!("the file picker stayed open after the path was typed")
}
