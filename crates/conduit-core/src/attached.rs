//! The one check of a text file attached to a message: its name and its text.
//!
//! The window reads the file the user picked or dropped, the CLI reads a path; both hand
//! the name and the bytes here, and only what passes becomes a [`Block::File`].

use crate::content::Block;
use crate::text;

/// The most text one attached file carries (512 KiB): as much as a server's resource, and
/// about 130,000 tokens, more than most models read in one message.
pub const MAX_FILE_TEXT: usize = 512 * 1024;

/// The longest file name kept, in bytes (most file systems' limit).
pub const MAX_FILE_NAME: usize = 255;

/// Why a file cannot be attached as text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachedFileError {
    #[error("an attached file needs a name")]
    NoName,
    #[error("the file name {shown}… is longer than {MAX_FILE_NAME} bytes")]
    LongName { shown: String },
    #[error(
        "{name} is not a text file: attach images (PNG, JPEG, GIF, WebP) or text (code, Markdown, CSV, JSON, logs)"
    )]
    NotText { name: String },
    #[error("{name} is empty")]
    Empty { name: String },
    #[error(
        "{name} holds {kib} KiB of text; the most Conduit attaches from one file is {max} KiB",
        max = MAX_FILE_TEXT / 1024
    )]
    TooLong { name: String, kib: usize },
}

/// The name a file is attached under: the last part of `raw` (a path from the CLI, or a
/// name the page gives, which may carry folders either way), with characters that would
/// hide or reorder it shown as their codes (`report\u{202e}txt.exe` must not read as
/// `reportexe.txt`).
pub fn file_name(raw: &str) -> Result<String, AttachedFileError> {
    let last = raw.rsplit(['/', '\\']).next().unwrap_or(raw).trim();
    if last.is_empty() || last == "." || last == ".." {
        return Err(AttachedFileError::NoName);
    }
    let shown = text::visible(last);
    if shown.len() > MAX_FILE_NAME {
        return Err(AttachedFileError::LongName {
            shown: crate::content::text_start(&shown, 40).to_owned(),
        });
    }
    Ok(shown)
}

/// A file attached as text: `bytes` must be UTF-8 text (a byte order mark is dropped),
/// not empty, with no NUL (binary formats that happen to decode, such as UTF-16 ASCII),
/// and at most [`MAX_FILE_TEXT`].
pub fn file_block(raw_name: &str, bytes: Vec<u8>) -> Result<Block, AttachedFileError> {
    let name = file_name(raw_name)?;
    if bytes.len() > MAX_FILE_TEXT {
        return Err(AttachedFileError::TooLong {
            name,
            kib: bytes.len().div_ceil(1024),
        });
    }
    let Ok(mut text) = String::from_utf8(bytes) else {
        return Err(AttachedFileError::NotText { name });
    };
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    if text.contains('\0') {
        return Err(AttachedFileError::NotText { name });
    }
    if text.is_empty() {
        return Err(AttachedFileError::Empty { name });
    }
    Ok(Block::File { name, text })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attached(name: &str, bytes: &[u8]) -> Result<Block, AttachedFileError> {
        file_block(name, bytes.to_vec())
    }

    #[test]
    fn a_text_file_is_attached_under_its_last_name_without_its_byte_order_mark() {
        assert_eq!(
            attached(
                "/home/ada/notes/plan.md",
                "\u{feff}# Plan\r\n- ship\r\n".as_bytes()
            ),
            Ok(Block::File {
                name: "plan.md".into(),
                text: "# Plan\r\n- ship\r\n".into()
            })
        );
        assert_eq!(
            attached(r"C:\Users\ada\data.csv", b"a,b\n1,2\n"),
            Ok(Block::File {
                name: "data.csv".into(),
                text: "a,b\n1,2\n".into()
            })
        );
        let exactly_the_most = "x".repeat(MAX_FILE_TEXT);
        assert!(attached("big.txt", exactly_the_most.as_bytes()).is_ok());
    }

    #[test]
    fn binary_empty_long_and_nameless_files_are_refused_saying_why() {
        let png = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0xff, 0x00];
        let error = attached("logo.png", &png).unwrap_err();
        assert_eq!(
            error,
            AttachedFileError::NotText {
                name: "logo.png".into()
            }
        );
        assert!(
            error
                .to_string()
                .starts_with("logo.png is not a text file: attach images")
        );
        // UTF-16 text of ASCII decodes as UTF-8 with a NUL in every other byte.
        let utf16: Vec<u8> = "hi".encode_utf16().flat_map(u16::to_le_bytes).collect();
        assert!(matches!(
            attached("u16.txt", &utf16),
            Err(AttachedFileError::NotText { .. })
        ));
        assert_eq!(
            attached("empty.txt", b"\xef\xbb\xbf")
                .unwrap_err()
                .to_string(),
            "empty.txt is empty"
        );
        let long = "x".repeat(MAX_FILE_TEXT + 1);
        assert_eq!(
            attached("dump.log", long.as_bytes())
                .unwrap_err()
                .to_string(),
            "dump.log holds 513 KiB of text; the most Conduit attaches from one file is 512 KiB"
        );
        for nameless in ["", "  ", "folder/", "..", r"a\."] {
            assert_eq!(
                attached(nameless, b"x"),
                Err(AttachedFileError::NoName),
                "{nameless:?}"
            );
        }
        let long_name = format!("{}.txt", "n".repeat(MAX_FILE_NAME));
        assert!(matches!(
            attached(&long_name, b"x"),
            Err(AttachedFileError::LongName { .. })
        ));
    }

    #[test]
    fn a_name_that_would_hide_or_reorder_itself_shows_its_codes() {
        let Ok(Block::File { name, .. }) = attached("report\u{202e}txt.exe", b"x") else {
            panic!("a text file with a strange name is still a text file");
        };
        assert_eq!(name, r"report\u{202e}txt.exe");
    }
}
