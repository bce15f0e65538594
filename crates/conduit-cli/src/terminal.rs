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

/// Writing the command's output failed: its reader went away (`conduit sessions list |
/// head -1`), or the disk is full (`> /dev/full`). `println!` would panic on both.
#[derive(Debug)]
pub struct OutputFailed(pub std::io::Error);

impl std::fmt::Display for OutputFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot write the output: {}", self.0)
    }
}

impl std::error::Error for OutputFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl OutputFailed {
    /// Whether the reader closed the pipe: not the command's failure, and nothing to say.
    pub fn reader_left(&self) -> bool {
        self.0.kind() == std::io::ErrorKind::BrokenPipe
    }
}

/// Writes one line of the command's output to stdout, reporting a failed write instead of
/// panicking as `println!` does.
pub fn say_line(line: std::fmt::Arguments<'_>) -> Result<(), OutputFailed> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(line)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(OutputFailed)
}

/// `println!` for the command's output, as [`say_line`]: `say!(...)?`.
macro_rules! say {
    () => {
        $crate::terminal::say_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::terminal::say_line(format_args!($($arg)*))
    };
}
pub(crate) use say;

/// Writes what the command says about itself (its notices, errors, questions) to stderr,
/// as `eprint!` does but without its panic when stderr is gone (its reader closed the
/// pipe: `conduit repl 2>&1 | head`), which ended the command with a Rust panic's exit
/// code. A line nobody can read is noted in the log and the command goes on.
pub fn tell_stderr(text: std::fmt::Arguments<'_>, end: &str) {
    let mut err = std::io::stderr().lock();
    let written = err
        .write_fmt(text)
        .and_then(|()| err.write_all(end.as_bytes()))
        .and_then(|()| err.flush());
    if let Err(error) = written {
        tracing::debug!(%error, "a notice could not be written to stderr");
    }
}

/// `eprintln!` without the panic, as [`tell_stderr`].
macro_rules! tell {
    () => {
        $crate::terminal::tell_stderr(format_args!(""), "\n")
    };
    ($($arg:tt)*) => {
        $crate::terminal::tell_stderr(format_args!($($arg)*), "\n")
    };
}
pub(crate) use tell;

/// `eprint!` without the panic (a question's prompt, its answer on the same line).
macro_rules! tell_part {
    ($($arg:tt)*) => {
        $crate::terminal::tell_stderr(format_args!($($arg)*), "")
    };
}
pub(crate) use tell_part;

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

/// The lines typed at the terminal for a server's question, read without a buffer of
/// Conduit's: std's stdin keeps what a read took beyond the line (a paste of several
/// lines) for the next question, which must get only what is typed for it. What was
/// typed before the question is dropped first ([`forget_typed_ahead`]).
pub fn typed_lines() -> std::io::Result<Box<dyn std::io::BufRead>> {
    forget_typed_ahead();
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let stdin = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
        Ok(Box::new(std::io::BufReader::with_capacity(1, stdin)))
    }
    #[cfg(not(unix))]
    {
        Ok(Box::new(std::io::stdin().lock()))
    }
}

/// While it lives, what is typed at the terminal is not shown (a key typed for
/// `--api-key-stdin` must not stay on the screen and in its scrollback); dropped, the
/// terminal is as it was. Does nothing when stdin is not a terminal (a pipe, a file).
///
/// Ctrl-C while typing is hidden ends the command as Ctrl-C does (exit code 130), with
/// the terminal as it was: by default SIGINT ends the process without running `Drop`,
/// which left the shell the user returns to showing nothing they type.
pub struct TypingHidden {
    #[cfg(unix)]
    was: std::sync::Arc<std::sync::Mutex<Option<rustix::termios::Termios>>>,
}

/// The exit code of a command ended by Ctrl-C, as shells report a SIGINT (128 + 2).
#[cfg(unix)]
const INTERRUPTED_EXIT: i32 = 130;

impl TypingHidden {
    pub fn start() -> Self {
        #[cfg(unix)]
        {
            use std::io::IsTerminal;
            let not_hidden = || Self {
                was: std::sync::Arc::default(),
            };
            let stdin = std::io::stdin();
            if !stdin.is_terminal() {
                return not_hidden();
            }
            let was = match rustix::termios::tcgetattr(&stdin) {
                Ok(was) => was,
                Err(error) => {
                    tracing::warn!(%error, "the terminal's echo could not be read; typing shows");
                    return not_hidden();
                }
            };
            // Listening before echo goes off: a Ctrl-C typed the moment it is off must
            // find the terminal's settings to put back.
            let Some(mut interrupts) = Self::interrupts() else {
                return not_hidden();
            };
            let hiding: std::sync::Arc<std::sync::Mutex<Option<rustix::termios::Termios>>> =
                std::sync::Arc::default();
            let restore = hiding.clone();
            // Stays for the rest of the process, hidden or not: SIGINT's default action
            // does not come back once a handler is installed, so a later Ctrl-C must still
            // end the command here.
            tokio::spawn(async move {
                if interrupts.recv().await.is_some() {
                    put_back(&restore);
                    tell!();
                    std::process::exit(INTERRUPTED_EXIT);
                }
            });
            let mut hidden = was.clone();
            hidden.local_modes.remove(rustix::termios::LocalModes::ECHO);
            // Held before echo goes off, so a Ctrl-C that comes between finds it.
            if let Ok(mut slot) = hiding.lock() {
                *slot = Some(was);
            }
            if let Err(error) =
                rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &hidden)
            {
                tracing::warn!(%error, "the terminal's echo could not be turned off; typing shows");
                if let Ok(mut slot) = hiding.lock() {
                    *slot = None;
                }
            }
            Self { was: hiding }
        }
        #[cfg(not(unix))]
        {
            Self {}
        }
    }

    /// Ctrl-C from now on, or `None` (typing then shows) outside a runtime or when the
    /// signal cannot be listened to.
    #[cfg(unix)]
    fn interrupts() -> Option<tokio::signal::unix::Signal> {
        if tokio::runtime::Handle::try_current().is_err() {
            tracing::warn!("no runtime to catch Ctrl-C while typing is hidden; typing shows");
            return None;
        }
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()) {
            Ok(interrupts) => Some(interrupts),
            Err(error) => {
                tracing::warn!(%error, "Ctrl-C cannot be caught while typing is hidden; typing shows");
                None
            }
        }
    }

    /// Whether typing is hidden now (stdin is a terminal).
    pub fn hides(&self) -> bool {
        #[cfg(unix)]
        {
            self.was.lock().is_ok_and(|was| was.is_some())
        }
        #[cfg(not(unix))]
        {
            false
        }
    }
}

/// Puts the terminal's settings in `was` back, once (the other caller finds `None`).
#[cfg(unix)]
fn put_back(was: &std::sync::Mutex<Option<rustix::termios::Termios>>) {
    let taken = match was.lock() {
        Ok(mut was) => was.take(),
        // Only this function holds the lock, and it cannot panic while holding it.
        Err(poisoned) => poisoned.into_inner().take(),
    };
    if let Some(was) = taken
        && let Err(error) = rustix::termios::tcsetattr(
            std::io::stdin(),
            rustix::termios::OptionalActions::Now,
            &was,
        )
    {
        tracing::warn!(%error, "the terminal's echo could not be turned back on");
    }
}

impl Drop for TypingHidden {
    fn drop(&mut self) {
        #[cfg(unix)]
        put_back(&self.was);
    }
}

/// Drops what was typed before a question was asked: a line typed while an answer
/// streamed (meant as the next message) must not answer the approval question that
/// follows it. Nothing to drop when stdin is not a terminal.
/// The user is told when a whole line was dropped (a terminal counts only whole lines as
/// waiting: a half-typed one goes without a word). On Unix; elsewhere nothing is dropped.
pub fn forget_typed_ahead() {
    #[cfg(unix)]
    {
        use std::io::IsTerminal;
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return;
        }
        let waiting = rustix::io::ioctl_fionread(&stdin).unwrap_or(0);
        match rustix::termios::tcflush(&stdin, rustix::termios::QueueSelector::IFlush) {
            Ok(()) if waiting > 0 => {
                crate::terminal::tell!(
                    "  (what was typed before this question was dropped: answer it now)"
                );
            }
            Ok(()) => {}
            Err(error) => {
                tracing::debug!(%error, "what was typed ahead could not be dropped");
            }
        }
    }
}

/// Outside text that must stay on one line (a name, a title, a field's label), as
/// [`shown`] shows it with each line break as `␊`: a server's name or label must not
/// start a line of its own that looks like Conduit's.
pub fn shown_line(text: &str) -> String {
    shown(text).replace('\n', "␊")
}

/// An attached file as the terminal names it instead of printing its text: `file plan.md,
/// 12 lines`.
pub fn file_note(name: &str, text: &str) -> String {
    let lines = text.lines().count();
    let unit = if lines == 1 { "line" } else { "lines" };
    format!("file {}, {lines} {unit}", shown_line(name))
}

/// How an attached PDF is named on a line: `PDF NAME, N KB`.
pub fn document_note(name: &str, bytes: u64) -> String {
    format!("PDF {}, {} KB", shown_line(name), bytes.div_ceil(1000))
}

/// The most lines of outside text [`quoted`] shows, and characters of each.
const QUOTED_LINES: usize = 20;
const QUOTED_LINE_CHARS: usize = 400;

/// Outside text of many lines (a tool's description, a server's message) as [`shown`]
/// shows it, each line behind a `  │ ` gutter, runs of blank lines as one, at most
/// [`QUOTED_LINES`] lines of [`QUOTED_LINE_CHARS`] characters: a server's text cannot
/// push Conduit's question out of sight, nor draw a line that looks like Conduit's own
/// question right above the prompt.
pub fn quoted(text: &str) -> String {
    quoted_within(text, QUOTED_LINES, QUOTED_LINE_CHARS)
}

/// [`quoted`] with every line whole: for text the user approves word for word (what a
/// server would send to the user's model).
pub fn quoted_whole(text: &str) -> String {
    quoted_within(text, usize::MAX, usize::MAX)
}

fn quoted_within(text: &str, most_lines: usize, line_chars: usize) -> String {
    let text = shown(text);
    let mut lines: Vec<&str> = Vec::new();
    for line in text.split('\n') {
        let blank = line.trim().is_empty();
        if blank && lines.last().is_none_or(|last| last.trim().is_empty()) {
            continue;
        }
        lines.push(line);
    }
    while lines.last().is_some_and(|last| last.trim().is_empty()) {
        lines.pop();
    }
    let mut out = String::new();
    for line in lines.iter().take(most_lines) {
        out.push_str("  │ ");
        let mut chars = line.chars();
        out.extend(chars.by_ref().take(line_chars));
        let more = chars.count();
        if more > 0 {
            let _ = write!(out, "[… {more} more characters]");
        }
        out.push('\n');
    }
    if lines.len() > most_lines {
        let _ = writeln!(out, "  │ [… {} more lines]", lines.len() - most_lines);
    }
    out
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
/// A failed write is an [`OutputFailed`] (the reader went away, the disk is full), a
/// failed read the file's own error.
pub fn copy_shown(input: &mut dyn Read, output: &mut dyn Write) -> anyhow::Result<()> {
    let mut buffer = vec![0u8; 64 * 1024];
    let mut pending = Vec::new();
    loop {
        let read = match input.read(&mut buffer) {
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error.into()),
        };
        let end = read == 0;
        pending.extend_from_slice(&buffer[..read]);
        let text = decode(&mut pending, end);
        output
            .write_all(shown(&text).as_bytes())
            .map_err(OutputFailed)?;
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
    fn an_attached_file_is_named_with_its_lines_on_one_line() {
        assert_eq!(file_note("plan.md", "a\nb\nc\n"), "file plan.md, 3 lines");
        assert_eq!(file_note("one.txt", "x"), "file one.txt, 1 line");
        assert_eq!(file_note("a\nb\u{1b}.txt", "x"), "file a␊b␛.txt, 1 line");
    }

    /// A long output copied to a reader that went away (`conduit mcp call … | head -1`)
    /// fails as the output's failure, which ends the command quietly.
    #[test]
    fn a_failed_write_while_copying_is_the_outputs_failure() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let error = copy_shown(&mut &b"a long output"[..], &mut Closed).unwrap_err();
        assert!(
            error
                .chain()
                .filter_map(|cause| cause.downcast_ref::<OutputFailed>())
                .any(OutputFailed::reader_left),
            "{error:?}"
        );
    }

    #[test]
    fn a_name_stays_on_one_line() {
        assert_eq!(
            shown_line("evil\n? read of server notes wants\x1b[8m"),
            "evil␊? read of server notes wants␛[8m"
        );
        assert_eq!(shown_line("plain"), "plain");
    }

    /// A description that pads itself with blank lines and then draws Conduit's question
    /// shows as one quoted block: the fake question behind the gutter, near the top.
    #[test]
    fn quoted_text_keeps_its_gutter_folds_blank_lines_and_is_bounded() {
        let fake = format!(
            "Reads notes.{}? read_note of server notes wants to run with {{}}\n",
            "\n".repeat(80)
        );
        assert_eq!(
            quoted(&fake),
            "  │ Reads notes.\n  │ \n  │ ? read_note of server notes wants to run with {}\n"
        );
        let long = (0..30)
            .map(|n| format!("line {n}"))
            .collect::<Vec<_>>()
            .join("\n");
        let shown = quoted(&long);
        assert_eq!(shown.lines().count(), QUOTED_LINES + 1);
        assert!(shown.ends_with("  │ [… 10 more lines]\n"), "{shown}");
        assert!(
            shown.lines().all(|line| line.starts_with("  │ ")),
            "{shown}"
        );
        let wide = quoted(&"é".repeat(QUOTED_LINE_CHARS + 5));
        assert!(wide.ends_with("é[… 5 more characters]\n"), "{wide}");
        assert_eq!(quoted("\x1b]52;c;eA==\x07"), "  │ ␛]52;c;eA==␇\n");
        assert_eq!(quoted(""), "");
    }

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
