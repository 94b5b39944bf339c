//! Config errors that name `file:line:column`.

use std::fmt;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

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

/// 1-based line and column of byte `offset` in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The parsed document, kept for the positions of semantic errors.
pub(crate) struct Doc<'a> {
    pub(crate) file: &'a str,
    pub(crate) text: &'a str,
    pub(crate) root: Spanned<DeTable<'a>>,
}

impl Doc<'_> {
    /// Span of the value at dotted `path` (`route.2.retry.backoff.base`), or
    /// of its nearest present ancestor (a defaulted field points at its table).
    pub(crate) fn nearest(&self, path: &str) -> Range<usize> {
        let mut span = self.root.span();
        let mut here: Option<&DeValue<'_>> = None;
        for seg in path.split(['.', '[', ']']).filter(|s| !s.is_empty()) {
            let next = match (here, seg.parse::<usize>()) {
                (None, _) => self.root.get_ref().get(seg),
                (Some(DeValue::Table(t)), _) => t.get(seg),
                (Some(DeValue::Array(a)), Ok(i)) => a.get(i),
                _ => None,
            };
            match next {
                Some(v) => {
                    span = v.span();
                    here = Some(v.get_ref());
                }
                None => break,
            }
        }
        span
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one_in_characters() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 6), (2, 1));
        assert_eq!(line_col(text, text.find('=').unwrap()), (1, 3));
        let second_eq = text.rfind('=').unwrap();
        assert_eq!(line_col(text, second_eq), (2, 4), "é is one column");
        assert_eq!(line_col(text, 999), (3, 1));
    }
}
