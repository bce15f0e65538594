// Generated from conduit_core::attached by src-tauri/src/bindings_tests.rs: do not edit.
// Regenerate with `UPDATE_BINDINGS=1 cargo test --workspace bindings`.

/** The most text one attached file carries, in bytes. */
export const MAX_FILE_TEXT = 524288;

/** The most bytes one attached PDF may have. */
export const MAX_DOCUMENT_BYTES = 33554432;
