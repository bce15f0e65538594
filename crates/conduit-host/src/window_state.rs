//! Where the chat window was and how large, kept in the data folder so the next start
//! opens it there.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The file in the data folder.
pub const FILE: &str = "window.json";
/// The largest side kept (a bigger one is not a real window's).
const MAX_SIDE: u32 = 16_384;
/// How much of the window's title bar must lie on a monitor for the place to be kept:
/// enough to grab it with the mouse.
const GRIP: i64 = 64;

/// The window's place in physical pixels: its outer top-left corner, its inner size, and
/// whether it was maximized (the size and place are then the ones it returns to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowPlace {
    pub x: i32,
    pub y: i32,
    pub width: u32,
    pub height: u32,
    #[serde(default)]
    pub maximized: bool,
}

/// A monitor's area in physical pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Area {
    pub x: i32,
    pub y: i32,
    pub width: u32,
    pub height: u32,
}

impl WindowPlace {
    /// The place kept in `file`: none when there is no file yet, and none (said in the
    /// log) when it cannot be read or holds no real window's size: the window then opens
    /// at its default.
    pub fn load(file: &Path) -> Option<Self> {
        let bytes = match conduit_files::read_regular_file(file, 4096) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
            Err(error) => {
                tracing::warn!(%error, file = %file.display(), "the window's place could not be read");
                return None;
            }
        };
        match serde_json::from_slice::<Self>(&bytes) {
            Ok(place) if place.has_real_size() => Some(place),
            Ok(_) => {
                tracing::warn!(file = %file.display(), "the window's kept size is not a window's");
                None
            }
            Err(error) => {
                tracing::warn!(error = %conduit_files::json_error_message(&error), file = %file.display(), "the window's place could not be read");
                None
            }
        }
    }

    /// Keeps the place in `file` (replaced whole, private to the user).
    pub fn save(&self, file: &Path) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        conduit_files::write_new_atomically(file, &bytes, conduit_files::PRIVATE_FILE_MODE)
    }

    fn has_real_size(&self) -> bool {
        (1..=MAX_SIDE).contains(&self.width) && (1..=MAX_SIDE).contains(&self.height)
    }

    /// Whether the window's title bar would be within reach on one of `monitors`: a
    /// place kept on a monitor since unplugged is not used (the window would open where
    /// nobody can see or move it).
    pub fn is_reachable_on(&self, monitors: &[Area]) -> bool {
        let (left, top) = (i64::from(self.x), i64::from(self.y));
        let bar_right = left + i64::from(self.width).min(GRIP * 4);
        monitors.iter().any(|monitor| {
            let (m_left, m_top) = (i64::from(monitor.x), i64::from(monitor.y));
            let (m_right, m_bottom) = (
                m_left + i64::from(monitor.width),
                m_top + i64::from(monitor.height),
            );
            let overlap = bar_right.min(m_right) - left.max(m_left);
            overlap >= GRIP && top >= m_top && top + GRIP <= m_bottom
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const SCREEN: Area = Area {
        x: 0,
        y: 0,
        width: 1920,
        height: 1080,
    };
    const LEFT_SCREEN: Area = Area {
        x: -2560,
        y: 0,
        width: 2560,
        height: 1440,
    };

    fn place(x: i32, y: i32) -> WindowPlace {
        WindowPlace {
            x,
            y,
            width: 1400,
            height: 900,
            maximized: false,
        }
    }

    #[test]
    fn a_place_is_kept_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(FILE);
        assert_eq!(WindowPlace::load(&file), None);
        let kept = WindowPlace {
            maximized: true,
            ..place(-2400, 120)
        };
        kept.save(&file).unwrap();
        assert_eq!(WindowPlace::load(&file), Some(kept));
        place(10, 20).save(&file).unwrap();
        assert_eq!(WindowPlace::load(&file), Some(place(10, 20)));
    }

    #[test]
    fn a_damaged_or_impossible_file_opens_the_window_at_its_default() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(FILE);
        for bytes in [
            &b"{\"x\": 1, \"y\""[..],
            b"[]",
            b"{\"x\":0,\"y\":0,\"width\":0,\"height\":800}",
            b"{\"x\":0,\"y\":0,\"width\":1200,\"height\":99999}",
            b"{\"x\":0,\"y\":0,\"width\":-5,\"height\":800}",
        ] {
            std::fs::write(&file, bytes).unwrap();
            assert_eq!(
                WindowPlace::load(&file),
                None,
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        std::fs::remove_file(&file).unwrap();
        std::fs::create_dir(&file).unwrap();
        assert_eq!(WindowPlace::load(&file), None);
    }

    #[test]
    fn a_place_off_every_monitor_is_not_used() {
        assert!(place(100, 50).is_reachable_on(&[SCREEN]));
        assert!(place(-2400, 100).is_reachable_on(&[SCREEN, LEFT_SCREEN]));
        // The left monitor was unplugged.
        assert!(!place(-2400, 100).is_reachable_on(&[SCREEN]));
        // Title bar above the top, or below the bottom.
        assert!(!place(100, -40).is_reachable_on(&[SCREEN]));
        assert!(!place(100, 1050).is_reachable_on(&[SCREEN]));
        // Only a sliver at the right edge.
        assert!(!place(1900, 100).is_reachable_on(&[SCREEN]));
        assert!(!place(0, 0).is_reachable_on(&[]));
    }
}
