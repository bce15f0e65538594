//! Characters that change how the text around them reads without showing themselves: the
//! one list every place that shows untrusted text to a person checks against.

/// Unicode's Bidi_Control characters: marks, embeddings, overrides and isolates, which
/// change the order the rest of the line is shown in (`file\u{202e}txt.exe` reads as
/// `fileexe.txt`).
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}

/// Whether `c` hides or rearranges text rather than showing as itself: control
/// characters, the line and paragraph separators, and Unicode's format characters
/// (General_Category Cf: the bidi controls, zero-width spaces and joiners, invisible
/// operators, tags, the byte order mark).
pub fn hides(c: char) -> bool {
    c.is_control()
        || is_bidi_control(c)
        || matches!(
            c,
            '\u{2028}'
                | '\u{2029}'
                | '\u{ad}'
                | '\u{600}'..='\u{605}'
                | '\u{6dd}'
                | '\u{70f}'
                | '\u{890}'..='\u{891}'
                | '\u{8e2}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2060}'..='\u{206f}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{110bd}'
                | '\u{110cd}'
                | '\u{13430}'..='\u{1343f}'
                | '\u{1bca0}'..='\u{1bca3}'
                | '\u{1d173}'..='\u{1d17a}'
                | '\u{e0001}'
                | '\u{e0020}'..='\u{e007f}'
        )
}

/// The longest link Conduit opens in the browser or shows in a question about opening
/// one (a message's, a view's, a server's page): past any link browsers agree to carry,
/// and the question shows the link whole.
pub const MAX_LINK_BYTES: usize = 8 * 1024;

/// How a character that [`hides`] is shown to a person: its code, `\u{202e}`.
pub fn code_of(c: char) -> String {
    format!("\\u{{{:x}}}", u32::from(c))
}

/// `text` with each character that [`hides`] shown as its code: for a question about
/// text someone else chose (a server's tool description, a view's arguments).
pub fn visible(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    for c in text.chars() {
        if hides(c) {
            shown.push_str(&code_of(c));
        } else {
            shown.push(c);
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_controls_and_invisible_characters_hide_and_text_does_not() {
        for c in ['\u{202e}', '\u{2066}', '\u{061c}', '\u{200e}'] {
            assert!(is_bidi_control(c) && hides(c), "{c:?}");
        }
        for c in [
            '\u{0}',
            '\x1b',
            '\u{9b}',
            '\u{7f}',
            '\u{2028}',
            '\u{200b}',
            '\u{feff}',
            '\u{e0041}',
            '\u{ad}',
        ] {
            assert!(hides(c) && !is_bidi_control(c), "{c:?}");
        }
        for c in ['a', 'é', '日', '👍', ' ', '\u{1f3fd}'] {
            assert!(!hides(c), "{c:?}");
        }
    }
}
