//! Config errors that name `file:line:column`.

use std::fmt;
use std::ops::Range;

use stormbreak_spans::Spans as TomlSpans;

/// A rejected guard config: where, and what was expected.
///
/// Displays as `file:line:column: message`, the form editors and CI logs
/// jump to; `line` and `column` are 1-based, `None` when the whole file is
/// at fault (too large, unreadable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file name as given.
    pub file: String,
    /// 1-based line and column (in characters) of the offending value.
    pub line_col: Option<(usize, usize)>,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line_col {
            Some((line, col)) => write!(f, "{}:{line}:{col}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

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
