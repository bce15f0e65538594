//! How text is cut into words for the search index: scripts written without spaces
//! between words (Chinese, Japanese, and Korean within its spaced phrases) are indexed a
//! character at a time, so a search finds a word inside a run of them.
//!
//! FTS5's `unicode61` tokenizer cuts only at spaces and punctuation: a Chinese sentence is
//! one token, and a search for a word in it found nothing unless the word began it (the
//! last word of a query matches as a prefix). There is no dictionary here to find where
//! such words end. Instead a zero-width space goes between every two characters when
//! either is of such a script, in the indexed text and in the query alike: each character
//! is its own token, and a query's run of them is a phrase of adjacent tokens, which
//! matches exactly that run anywhere in the text, as a reader's find does.

use std::borrow::Cow;

/// What parts a character of a script written without spaces from its neighbours: a
/// separator to `unicode61` (its token characters are letters, numbers and private use;
/// this is a format character), invisible where a snippet shows it, and taken out of the
/// snippets the store returns.
pub(crate) const BETWEEN: char = '\u{200B}';

/// Whether `c` belongs to a script written without spaces between its words: Han
/// ideographs (with their iteration marks), kana, bopomofo and Hangul.
pub(crate) fn is_unspaced(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF       // Hangul Jamo
        | 0x3005..=0x3007     // 々 〆 〇
        | 0x3021..=0x3029     // Hangzhou numerals
        | 0x3031..=0x3035     // vertical kana repeat marks
        | 0x303B..=0x303C     // 〻 〼
        | 0x3041..=0x30FF     // Hiragana, Katakana
        | 0x3105..=0x312F     // Bopomofo
        | 0x3131..=0x318E     // Hangul compatibility Jamo
        | 0x31A0..=0x31BF     // Bopomofo extended
        | 0x31F0..=0x31FF     // Katakana phonetic extensions
        | 0x3400..=0x4DBF     // CJK extension A
        | 0x4E00..=0x9FFF     // CJK unified ideographs
        | 0xA960..=0xA97F     // Hangul Jamo extended A
        | 0xAC00..=0xD7AF     // Hangul syllables
        | 0xD7B0..=0xD7FF     // Hangul Jamo extended B
        | 0xF900..=0xFAFF     // CJK compatibility ideographs
        | 0xFF66..=0xFF9F     // halfwidth Katakana
        | 0xFFA0..=0xFFDC     // halfwidth Hangul
        | 0x1B000..=0x1B16F   // kana supplement and extended
        | 0x20000..=0x323AF   // CJK extensions B to H, compatibility supplement
    )
}

/// `text` as the index holds it (and as a query word is matched): a [`BETWEEN`] between
/// every two adjacent characters of which either is [`is_unspaced`]. Text without such
/// characters is returned as it is, not copied.
pub(crate) fn spaced(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unspaced) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() * 2);
    let mut previous: Option<char> = None;
    for c in text.chars() {
        if let Some(previous) = previous
            && (is_unspaced(previous) || is_unspaced(c))
            && !previous.is_whitespace()
            && !c.is_whitespace()
        {
            out.push(BETWEEN);
        }
        out.push(c);
        previous = Some(c);
    }
    Cow::Owned(out)
}

/// A snippet of indexed text as a reader should see it: the [`BETWEEN`]s taken out.
pub(crate) fn unspaced(snippet: String) -> String {
    if snippet.contains(BETWEEN) {
        snippet.replace(BETWEEN, "")
    } else {
        snippet
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_written_without_spaces_are_cut_between_every_character() {
        assert_eq!(
            spaced("東京タワー"),
            "東\u{200B}京\u{200B}タ\u{200B}ワ\u{200B}ー"
        );
        // Beside Latin letters and digits too, so `tokyo東京` is not one token.
        assert_eq!(spaced("v2版本"), "v2\u{200B}版\u{200B}本");
        assert_eq!(
            spaced("서울에서 만나요"),
            "서\u{200B}울\u{200B}에\u{200B}서 만\u{200B}나\u{200B}요"
        );
        // Nothing to cut: the same text, not a copy.
        assert!(matches!(
            spaced("crabs and shells"),
            Cow::Borrowed("crabs and shells")
        ));
        assert_eq!(unspaced(spaced("東京 tower").into_owned()), "東京 tower");
        // The planes past the first (CJK extension B).
        assert!(is_unspaced('𠀋'));
        assert!(!is_unspaced('a'));
        assert!(!is_unspaced('。'));
        assert!(!is_unspaced('Ω'));
    }
}
