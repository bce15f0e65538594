// Generated from conduit_core::text::hides by src-tauri/src/bindings_tests.rs: do not edit.
// Regenerate with `UPDATE_BINDINGS=1 cargo test --workspace bindings`.

/** The characters that hide or rearrange text rather than show as themselves (controls,
 * bidi controls, format characters), as a character class for a `u`-flagged RegExp. */
export const HIDING_CHARACTER_CLASS = "[\\u{0}-\\u{1f}\\u{7f}-\\u{9f}\\u{ad}\\u{600}-\\u{605}\\u{61c}\\u{6dd}\\u{70f}\\u{890}-\\u{891}\\u{8e2}\\u{180e}\\u{200b}-\\u{200f}\\u{2028}-\\u{202e}\\u{2060}-\\u{206f}\\u{feff}\\u{fff9}-\\u{fffb}\\u{110bd}\\u{110cd}\\u{13430}-\\u{1343f}\\u{1bca0}-\\u{1bca3}\\u{1d173}-\\u{1d17a}\\u{e0001}\\u{e0020}-\\u{e007f}]";
