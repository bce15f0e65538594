//! The one check of a file attached to a message: a text file's name and text, a PDF's
//! name and bytes.
//!
//! The window reads the file the user picked or dropped, the CLI reads a path; both hand
//! the name and the bytes here, and only what passes ([`CheckedFile`], [`is_pdf`] with
//! [`check_document`]) becomes a [`Block::File`] or [`Block::Document`] of a message.

use crate::content::{Block, MediaRef};
use crate::text;

/// The most bytes one attached PDF may have (32 MiB): Anthropic takes 32 MB in a whole
/// request and OpenAI 50 MB in a file; the provider's own limit on a request's files is
/// applied when it is sent.
pub const MAX_DOCUMENT_BYTES: u64 = 32 * 1024 * 1024;

/// The type a PDF is stored under.
pub const PDF_MIME: &str = "application/pdf";

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
        "{name} is not a text file: attach images (PNG, JPEG, GIF, WebP), PDFs or text (code, Markdown, CSV, JSON, logs)"
    )]
    NotText { name: String },
    #[error("{name} is not a PDF: it does not start as one (%PDF-)")]
    NotPdf { name: String },
    #[error(
        "{name} is {mib} MiB; the largest PDF Conduit attaches is {max} MiB",
        max = MAX_DOCUMENT_BYTES / (1024 * 1024)
    )]
    LargeDocument { name: String, mib: u64 },
    #[error("{name} is empty")]
    Empty { name: String },
    #[error(
        "{name} holds {kib} KiB of text; the most Conduit attaches from one file is {max} KiB",
        max = MAX_FILE_TEXT / 1024
    )]
    TooLong { name: String, kib: usize },
}

/// The name a file is attached under: what follows the last `/` of `raw` (the CLI gives a
/// path's last part and a browser a name without folders, but the page may send any
/// text), with characters that would hide or reorder it shown as their codes
/// (`report\u{202e}txt.exe` must not read as `reportexe.txt`). A name it gave is given
/// again unchanged: Edit sends a stored file back under its stored name.
pub fn file_name(raw: &str) -> Result<String, AttachedFileError> {
    let last = raw.rsplit('/').next().unwrap_or(raw).trim();
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

/// Whether `bytes` are text as Conduit attaches it: UTF-8 with no NUL (binary formats that
/// happen to decode, such as UTF-16 of ASCII, carry NULs). No image format the media store
/// takes is: PNG, JPEG, GIF and WebP all carry bytes UTF-8 refuses, or NULs.
pub fn is_text(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok_and(|text| !text.contains('\0'))
}

/// Whether `bytes` are a PDF: they start with its header (`%PDF-`), as every PDF a
/// provider reads does.
pub fn is_pdf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"%PDF-")
}

/// Whether a PDF of `bytes` bytes may be attached (at most [`MAX_DOCUMENT_BYTES`]), said
/// under `name`: the one limit before it is stored (the window, `--attach`, a server's
/// resource) and after ([`check_document`]).
pub fn document_fits(name: &str, bytes: u64) -> Result<(), AttachedFileError> {
    if bytes > MAX_DOCUMENT_BYTES {
        return Err(AttachedFileError::LargeDocument {
            name: name.to_owned(),
            mib: bytes.div_ceil(1024 * 1024),
        });
    }
    Ok(())
}

/// Whether a declared type is a PDF's (`application/pdf`, in any case, with parameters).
pub fn is_pdf_mime(declared: &str) -> bool {
    declared
        .split(';')
        .next()
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(PDF_MIME))
}

/// A stored PDF that passed [`check_document`]; only this module makes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedDocument {
    name: String,
    media: MediaRef,
}

impl From<CheckedDocument> for Block {
    fn from(document: CheckedDocument) -> Self {
        Block::Document {
            name: document.name,
            media: document.media,
        }
    }
}

/// A stored PDF attached under `raw_name` ([`file_name`]): `media` must have been stored
/// as a PDF (the store decides the type from the bytes) and be at most
/// [`MAX_DOCUMENT_BYTES`].
pub fn check_document(
    raw_name: &str,
    media: MediaRef,
) -> Result<CheckedDocument, AttachedFileError> {
    let name = file_name(raw_name)?;
    if media.mime != PDF_MIME {
        return Err(AttachedFileError::NotPdf { name });
    }
    document_fits(&name, media.bytes)?;
    Ok(CheckedDocument { name, media })
}

/// A text file that passed [`check_file`]; only this module makes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedFile {
    name: String,
    text: String,
}

impl CheckedFile {
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl From<CheckedFile> for Block {
    fn from(file: CheckedFile) -> Self {
        Block::File {
            name: file.name,
            text: file.text,
        }
    }
}

/// A file attached as text: `bytes` must be text ([`is_text`]; a byte order mark is
/// dropped), not empty, and at most [`MAX_FILE_TEXT`].
pub fn check_file(raw_name: &str, bytes: Vec<u8>) -> Result<CheckedFile, AttachedFileError> {
    let name = file_name(raw_name)?;
    // Text first: a large PDF is no text, not too much of it.
    if !is_text(&bytes) {
        return Err(AttachedFileError::NotText { name });
    }
    let Ok(mut text) = String::from_utf8(bytes) else {
        return Err(AttachedFileError::NotText { name });
    };
    if text.len() > MAX_FILE_TEXT {
        return Err(AttachedFileError::TooLong {
            name,
            kib: text.len().div_ceil(1024),
        });
    }
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    if text.is_empty() {
        return Err(AttachedFileError::Empty { name });
    }
    Ok(CheckedFile { name, text })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attached(name: &str, bytes: &[u8]) -> Result<Block, AttachedFileError> {
        check_file(name, bytes.to_vec()).map(Block::from)
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
            attached("/tmp/data.csv", b"a,b\n1,2\n"),
            Ok(Block::File {
                name: "data.csv".into(),
                text: "a,b\n1,2\n".into()
            })
        );
        let exactly_the_most = "x".repeat(MAX_FILE_TEXT);
        assert!(attached("big.txt", exactly_the_most.as_bytes()).is_ok());
    }

    fn stored(mime: &str, bytes: u64) -> MediaRef {
        MediaRef {
            hash: "a".repeat(64),
            mime: mime.into(),
            bytes,
            width: None,
            height: None,
        }
    }

    #[test]
    fn a_pdf_is_attached_under_its_last_name_and_anything_else_is_refused_saying_why() {
        assert!(is_pdf(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj"));
        assert!(!is_pdf(b"PDF-1.7"));
        assert!(!is_pdf(b"\x89PNG\r\n\x1a\n"));
        assert!(is_pdf_mime("application/pdf") && is_pdf_mime(" Application/PDF ; x=1"));
        assert!(!is_pdf_mime("application/pdfx") && !is_pdf_mime("image/png"));
        let paper = stored(PDF_MIME, 2_400_000);
        assert_eq!(
            check_document("/home/ada/papers/attention.pdf", paper.clone()).map(Block::from),
            Ok(Block::Document {
                name: "attention.pdf".into(),
                media: paper.clone()
            })
        );
        let at_most = stored(PDF_MIME, MAX_DOCUMENT_BYTES);
        assert!(check_document("big.pdf", at_most).is_ok());
        let error =
            check_document("scan.pdf", stored(PDF_MIME, MAX_DOCUMENT_BYTES + 1)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "scan.pdf is 33 MiB; the largest PDF Conduit attaches is 32 MiB"
        );
        let error = check_document("logo.pdf", stored("image/png", 900)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "logo.pdf is not a PDF: it does not start as one (%PDF-)"
        );
        assert_eq!(
            check_document("", paper.clone()),
            Err(AttachedFileError::NoName)
        );
        assert_eq!(
            check_document("report\u{202e}fdp.exe", paper).map(Block::from),
            Ok(Block::Document {
                name: "report\\u{202e}fdp.exe".into(),
                media: stored(PDF_MIME, 2_400_000)
            }),
            "a name that would read reversed is shown with its code"
        );
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
        // A large binary file is no text, not too much of it.
        let large_binary = vec![0xffu8; MAX_FILE_TEXT + 1];
        assert_eq!(
            attached("paper.pdf", &large_binary),
            Err(AttachedFileError::NotText {
                name: "paper.pdf".into()
            })
        );
        for nameless in ["", "  ", "folder/", "..", "a/."] {
            assert_eq!(
                attached(nameless, b"x"),
                Err(AttachedFileError::NoName),
                "{nameless:?}"
            );
        }
        let long_name = format!("{}.txt", "n".repeat(MAX_FILE_NAME));
        assert_eq!(
            attached(&long_name, b"x").unwrap_err().to_string(),
            format!("the file name {}… is longer than 255 bytes", "n".repeat(40))
        );
    }

    #[test]
    fn a_name_that_would_hide_or_reorder_itself_shows_its_codes_and_stays_so() {
        for (raw, shown) in [
            ("report\u{202e}txt.exe", r"report\u{202e}txt.exe"),
            ("two\nlines.txt", r"two\u{a}lines.txt"),
            (r"back\slash.txt", r"back\slash.txt"),
        ] {
            let name = file_name(raw).unwrap();
            assert_eq!(name, shown);
            // Edit sends a stored file back under the name it was stored under.
            assert_eq!(file_name(&name).unwrap(), name, "{raw:?}");
        }
    }

    #[test]
    fn text_is_utf8_without_nul_and_no_image_format_is() {
        assert!(
            is_text(b"BMW,320i\nP1 notes\n"),
            "text that starts like BMP or PBM"
        );
        assert!(!is_text(&[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a]));
        assert!(!is_text(&[0xff, 0xd8, 0xff, 0xe0]));
        assert!(!is_text(b"GIF89a\x01\x00\x01\x00\x00"));
        assert!(!is_text(b"RIFF\x1a\x00\x00\x00WEBPVP8 "));
    }
}
