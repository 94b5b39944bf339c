//! Config errors that name `file:line:column`.

use std::ops::Range;

use stormbreak_spans::Spans as TomlSpans;

/// A rejected guard config: where, and what was expected (`file:line:column`).
pub use stormbreak_spans::ConfigError;

pub(crate) use stormbreak_spans::line_col;

/// The parsed document, kept for the positions of semantic errors.
pub(crate) struct Doc<'a> {
    pub(crate) file: &'a str,
    pub(crate) text: &'a str,
    pub(crate) spans: TomlSpans<'a>,
}

impl Doc<'_> {
    /// Span of the value at dotted `path` (`route.2.retry.backoff.base`), or
    /// of its nearest present ancestor (a defaulted field points at its table).
    pub(crate) fn nearest(&self, path: &str) -> Range<usize> {
        self.spans.nearest(path)
    }

    /// An error at the value at `path`.
    pub(crate) fn at(&self, path: &str, message: impl Into<String>) -> ConfigError {
        let span = self.nearest(path);
        ConfigError {
            file: self.file.to_owned(),
            line_col: Some(line_col(self.text, span.start)),
            message: message.into(),
        }
    }
}
