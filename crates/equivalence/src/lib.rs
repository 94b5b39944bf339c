//! No code: this crate holds the workspace-level tests that need both the
//! simulator (`stormbreak-sim`) and the guard (`stormbreak-guard`), in
//! `tests/`. See `tests/trace.rs`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
