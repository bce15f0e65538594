//! Outside text made safe to print on a terminal: controls shown as marks, not obeyed.
//!
//! Models, tool results, MCP servers, their stderr and saved conversations are all
//! outside text: an escape sequence in them could hide or rewrite what Conduit asks
//! (`ESC[8m` makes the following text invisible, `\r ESC[2K` erases the line), write
//! the clipboard (OSC 52) or set the window title (OSC 0/2). Every printer passes such
//! text through [`shown`] (or [`shown_json`] for JSON, [`copy_shown`] for a file).
//!
//! What is shown instead of a character:
//! - `\n` and `\t` pass, and a `\r` right before a `\n` is dropped: a CRLF line ending
//!   moves the cursor nowhere the `\n` alone would not;
//! - every other C0 control (U+0000–U+001F) and DEL becomes its Unicode control
//!   picture: ESC `␛`, a lone `\r` `␍`, BEL `␇`, backspace `␈`, DEL `␡`;
//! - C1 controls (U+0080–U+009F, which some terminals obey as 8-bit CSI, OSC, …) and the
//!   bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069, which
//!   reorder what follows them) become `<U+XXXX>`, e.g. `<U+202E>`.
//!
//! Everything else, including other scripts, emoji and their joiners, passes unchanged.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{Read, Write};

/// Whose turn it is to read the terminal: the REPL's line editor (its prompt and a tool
/// call's approval question) and a server's questions (elicitation, sampling) read the
/// same keys, on different threads. Each prints its question and reads only while holding
/// this (the blocking read itself holds it, so a question its server withdrew keeps the
/// turn until its line comes), so a key typed for one question never answers another (a
/// `y` meant for a server's "Run it?" could allow a tool call the REPL was asking about at
/// the same moment). A server's question that comes while the REPL waits at its `> `
/// prompt is asked once the user has entered that line.
pub static TERMINAL_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Resets colours and styles (SGR 0). Printed before each question the user answers, so
/// that nothing printed before it can leave the question invisible or restyled.
/// (Conduit's own CLI text uses no colour, so the reset undoes nothing of Conduit's.)
pub const RESET: &str = "\x1b[0m";

/// `text` as it may reach a terminal (see the module's list). Apart from a CRLF, each
/// character is judged alone, so text that arrives in pieces (a streamed answer) is
/// shown correctly piece by piece; a CRLF split between two pieces shows its `␍`.
pub fn shown(text: &str) -> Cow<'_, str> {
    if !text.chars().any(acts) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            continue;
        }
        push_shown(&mut out, c);
    }
    Cow::Owned(out)
}

/// JSON text (from serde_json) as it may reach a terminal. serde_json already escapes
/// C0 controls inside strings but writes DEL, C1 and bidirectional controls raw; they
/// are escaped here as `\uXXXX`, which leaves the same JSON value (such characters can
/// only be inside strings, and all of them are in the Basic Multilingual Plane).
pub fn shown_json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(acts) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if acts(c) {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Copies `input` to `output` as [`shown`] shows it, a piece at a time (a long tool
/// output is not held whole). Bytes that are not UTF-8 become U+FFFD, as a lossy
/// decoding would; a character or CRLF split between reads is put back together.
pub fn copy_shown(input: &mut dyn Read, output: &mut dyn Write) -> std::io::Result<()> {
    let mut buffer = vec![0u8; 64 * 1024];
    let mut pending = Vec::new();
    loop {
        let read = match input.read(&mut buffer) {
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        let end = read == 0;
        pending.extend_from_slice(&buffer[..read]);
        let text = decode(&mut pending, end);
        output.write_all(shown(&text).as_bytes())?;
        if end {
            return Ok(());
        }
    }
}

/// The text of `pending` decoded, leaving in it what may be completed by the next read:
/// an unfinished UTF-8 sequence, and a final `\r` (it may start a CRLF). At the `end`
/// nothing is left.
fn decode(pending: &mut Vec<u8>, end: bool) -> String {
    let mut text = String::with_capacity(pending.len());
    let mut rest: &[u8] = pending;
    loop {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                text.push_str(valid);
                rest = &[];
                break;
            }
            Err(error) => {
                let (valid, after) = rest.split_at(error.valid_up_to());
                text.push_str(&String::from_utf8_lossy(valid));
                match error.error_len() {
                    Some(bad) => {
                        text.push(char::REPLACEMENT_CHARACTER);
                        rest = after.get(bad..).unwrap_or_default();
                    }
                    None if end => {
                        text.push(char::REPLACEMENT_CHARACTER);
                        rest = &[];
                        break;
                    }
                    None => {
                        rest = after;
                        break;
                    }
                }
            }
        }
    }
    let mut kept = rest.to_vec();
    if !end && text.ends_with('\r') {
        text.pop();
        kept.insert(0, b'\r');
    }
    *pending = kept;
    text
}

/// Whether `c` would act on the terminal or reorder the text around it.
fn acts(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\u{0}'..='\u{1f}' | '\u{7f}' | '\u{80}'..='\u{9f}' => true,
        c => conduit_host::core::text::is_bidi_control(c),
    }
}

fn push_shown(out: &mut String, c: char) {
    match c {
        // The control pictures block has one picture per C0 control, in the same order.
        '\u{0}'..='\u{1f}' if acts(c) => {
            out.push(char::from_u32(0x2400 + u32::from(c)).unwrap_or(char::REPLACEMENT_CHARACTER))
        }
        '\u{7f}' => out.push('\u{2421}'),
        c if acts(c) => {
            // Writing to a String cannot fail.
            let _ = write!(out, "<U+{:04X}>", u32::from(c));
        }
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_text_emoji_newlines_and_tabs_pass_unchanged() {
        for text in [
            "",
            "Hello, world.\n\tIndented line\n",
            "Grüße, naïve café, 日本語, Ελληνικά, עברית, العربية",
            "emoji 👍🏽 👨‍👩‍👧 🏳️‍🌈 🇩🇪 and a ZWNJ: می‌خواهم",
            "box ┌─┐ arrows → ← ✓ ✗ …",
            "a literal backslash \\x1b[31m is only text",
        ] {
            assert!(matches!(shown(text), Cow::Borrowed(_)), "{text:?}");
            assert_eq!(shown(text), text);
            assert!(matches!(shown_json(text), Cow::Borrowed(_)), "{text:?}");
        }
    }

    #[test]
    fn escape_sequences_become_visible() {
        // Invisible text, then a fake question; colour; erase the line; cursor up.
        assert_eq!(
            shown("ok\x1b[8mhidden\x1b[0m"),
            "ok\u{241b}[8mhidden\u{241b}[0m"
        );
        assert_eq!(shown("\x1b[31mred"), "␛[31mred");
        assert_eq!(shown("\x1b[1A\x1b[2Kgone"), "␛[1A␛[2Kgone");
        assert!(!shown("x\x1b[8my").contains('\x1b'));
    }

    #[test]
    fn osc_sequences_for_clipboard_and_title_become_visible() {
        // OSC 52 writes the clipboard; OSC 0 and 2 set the title; BEL or ST ends them.
        assert_eq!(shown("\x1b]52;c;cm0gLXJmIH4=\x07"), "␛]52;c;cm0gLXJmIH4=␇");
        assert_eq!(shown("\x1b]0;pwned\x1b\\"), "␛]0;pwned␛\\");
        assert_eq!(shown("\x1b]2;title\x07"), "␛]2;title␇");
    }

    #[test]
    fn carriage_returns_bel_backspace_nul_and_del_become_visible() {
        assert_eq!(shown("server a\r\x1b[2Kserver b"), "server a␍␛[2Kserver b");
        assert_eq!(shown("lone\r"), "lone␍");
        assert_eq!(shown("\rstart"), "␍start");
        assert_eq!(shown("ding\x07"), "ding␇");
        assert_eq!(shown("abc\x08\x08\x08xyz"), "abc␈␈␈xyz");
        assert_eq!(shown("nul\0"), "nul␀");
        assert_eq!(shown("del\x7f"), "del␡");
        assert_eq!(shown("\x0b\x0c"), "␋␌");
        // A CRLF line ending is a line ending.
        assert_eq!(shown("one\r\ntwo\r\n"), "one\ntwo\n");
        assert_eq!(shown("\r\r\n"), "␍\n");
    }

    #[test]
    fn c1_controls_become_visible() {
        // U+009B is an 8-bit CSI, U+009D an 8-bit OSC, U+0085 next line.
        assert_eq!(shown("a\u{9b}8mb"), "a<U+009B>8mb");
        assert_eq!(shown("\u{9d}52;c;eA==\u{9c}"), "<U+009D>52;c;eA==<U+009C>");
        assert_eq!(shown("\u{80}\u{85}\u{9f}"), "<U+0080><U+0085><U+009F>");
        // The printable Latin-1 characters just past them pass.
        assert_eq!(shown("\u{a0}é¿"), "\u{a0}é¿");
    }

    #[test]
    fn bidirectional_controls_become_visible() {
        // "Trojan source": an override makes `exe.txt` read as `txt.exe`.
        assert_eq!(shown("file\u{202e}txt.exe"), "file<U+202E>txt.exe");
        for c in [
            '\u{061c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}',
            '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
        ] {
            let text = format!("a{c}b");
            assert_eq!(shown(&text), format!("a<U+{:04X}>b", u32::from(c)), "{c:?}");
        }
        // Joiners that emoji and scripts need are not reordering characters.
        assert_eq!(
            shown("\u{200c}\u{200d}\u{fe0f}"),
            "\u{200c}\u{200d}\u{fe0f}"
        );
    }

    #[test]
    fn a_streamed_answer_is_shown_the_same_piece_by_piece() {
        let whole = "Approve? [y/N] \x1b[8m then \u{202e}rl\x1b]52;c;eA==\x07 日本 👍🏽\n";
        // Every split point of the characters: each piece alone gives the same.
        let chars: Vec<char> = whole.chars().collect();
        for at in 0..=chars.len() {
            let first: String = chars[..at].iter().collect();
            let second: String = chars[at..].iter().collect();
            assert_eq!(
                format!("{}{}", shown(&first), shown(&second)),
                shown(whole),
                "split at {at}"
            );
        }
        assert!(!shown(whole).contains(['\x1b', '\x07', '\u{202e}']));
    }

    #[test]
    fn json_keeps_its_value_and_loses_the_raw_controls() {
        let value = serde_json::json!({
            "text": "a\x1b[8mb\u{9b}c\u{202e}d\x7fe\r\n日本 👍",
            "list": [1, "\u{2066}"],
        });
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let json = shown_json(&pretty);
        assert!(
            !json.contains(['\x1b', '\u{9b}', '\u{202e}', '\x7f', '\u{2066}', '\r']),
            "{json}"
        );
        assert!(
            json.contains("\\u009b") && json.contains("\\u202e"),
            "{json}"
        );
        assert!(json.contains("日本 👍"), "{json}");
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back, value);
    }

    /// Hands out its bytes `step` at a time, as a pipe or a slow file might.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(self.bytes.len()).min(buffer.len());
            buffer[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_file_is_copied_shown_whatever_its_reads_split() {
        let text = "línea\r\n\x1b]52;c;eA==\x07 日本 👍🏽\u{202e}\rend";
        let expected = shown(text).into_owned();
        for step in 1..=8 {
            let mut input = Trickle {
                bytes: text.as_bytes(),
                step,
            };
            let mut output = Vec::new();
            copy_shown(&mut input, &mut output).unwrap();
            assert_eq!(String::from_utf8(output).unwrap(), expected, "step {step}");
        }
        // Bytes that are not UTF-8, in the middle and cut off at the end.
        let mut input: &[u8] = b"ok\xff\x1b[8m\xe6\x97";
        let mut output = Vec::new();
        copy_shown(&mut input, &mut output).unwrap();
        assert_eq!(String::from_utf8(output).unwrap(), "ok\u{fffd}␛[8m\u{fffd}");
    }
}
