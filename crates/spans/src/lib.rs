//! Where a key sits in a TOML text, for errors that name
//! `file:line:column`.
//!
//! The scenario file (`stormbreak-sim`) and the guard config
//! (`stormbreak-guard`) are read into typed structs that keep plain values
//! (a `Spanned<u32>` would change every field their users read), so a
//! check that rejects a value finds its position in a second, untyped view
//! of the same document: `toml`'s span-carrying [`DeTable`]. Paths are
//! dotted, with array indices as numbers; `[i]` is accepted too:
//! `"client.2.step.0.rate"`, `"route[2].retry.backoff.base"`.
//!
//! ```
//! use stormbreak_spans::{Spans, line_col};
//!
//! let text = "[[route]]\nname = \"a\"\n[[route]]\nname = \"b\"\nretry = { max_attempts = 0 }\n";
//! let spans = Spans::parse(text).unwrap();
//! let at = spans.exact("route.1.retry.max_attempts").unwrap();
//! assert_eq!(line_col(text, at.start), (5, 26));
//! // A missing key: the nearest present ancestor (the table it defaults in).
//! assert!(spans.exact("route.1.timeout").is_none());
//! assert_eq!(line_col(text, spans.nearest("route.1.timeout").start).0, 3);
//! ```

use std::ops::Range;

pub use toml::Spanned;
pub use toml::de::{DeTable, DeValue};

/// A parsed TOML document, kept only for the spans of its values.
pub struct Spans<'i> {
    root: Spanned<DeTable<'i>>,
}

impl<'i> Spans<'i> {
    /// The spans of a document parsed by the caller (who may also read its
    /// typed structs from a copy of it, parsing once).
    pub fn new(root: Spanned<DeTable<'i>>) -> Self {
        Spans { root }
    }

    /// Parses `text` for its spans alone.
    pub fn parse(text: &'i str) -> Result<Self, toml::de::Error> {
        DeTable::parse(text).map(Spans::new)
    }

    /// The root table, as parsed.
    pub fn root(&self) -> &Spanned<DeTable<'i>> {
        &self.root
    }

    /// Span of the value at `path` if every step of it is present.
    pub fn exact(&self, path: &str) -> Option<Range<usize>> {
        let (span, complete) = self.walk(path);
        complete.then_some(span)
    }

    /// Span of the value at `path`, or of its nearest present ancestor (a
    /// defaulted field points at its table), or the whole document.
    pub fn nearest(&self, path: &str) -> Range<usize> {
        self.walk(path).0
    }

    /// Walks `path` as far as it goes: the last span reached and whether
    /// the whole path was found.
    fn walk(&self, path: &str) -> (Range<usize>, bool) {
        let mut span = self.root.span();
        let mut here: Option<&DeValue<'i>> = None;
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
                None => return (span, false),
            }
        }
        (span, true)
    }
}

/// 1-based line and column (in characters, as editors count them) of byte
/// `offset` in `text`; an offset past the end is the end, and one inside a
/// character is that character's start.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// A rejected config file: where, and what was expected.
///
/// Displays as `file:line:column: message`, the form editors and CI logs
/// jump to; `line` and `column` are 1-based, `None` when the whole file is
/// at fault (too large, unreadable). The guard's config and the probe's
/// use it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file name as given.
    pub file: String,
    /// 1-based line and column (in characters) of the offending value.
    pub line_col: Option<(usize, usize)>,
    /// What is wrong and what was expected.
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line_col {
            Some((line, col)) => write!(f, "{}:{line}:{col}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// An error about the whole file.
    pub fn whole(file: &str, message: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_owned(),
            line_col: None,
            message: message.into(),
        }
    }

    /// A TOML syntax or type error, at the position it names.
    pub fn from_toml(file: &str, text: &str, e: &toml::de::Error) -> Self {
        ConfigError {
            file: file.to_owned(),
            line_col: e.span().map(|s| line_col(text, s.start)),
            message: e.message().trim().to_owned(),
        }
    }
}

/// "larger than 1 MiB, the limit for a guard config": the message of a
/// config text over `max_bytes`.
pub fn too_large(max_bytes: usize, what: &str) -> String {
    let size = if max_bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", max_bytes >> 20)
    } else {
        format!("{} KiB", max_bytes >> 10)
    };
    format!("larger than {size}, the limit for {what}")
}

/// Reads the config file at `path` whole, refusing one larger than
/// `max_bytes` (`what` names it in the error: "a guard config"); returns
/// its name as given and its text.
pub fn read_config(
    path: &std::path::Path,
    max_bytes: usize,
    what: &str,
) -> Result<(String, String), ConfigError> {
    let file = path.display().to_string();
    let too_large = || ConfigError::whole(&file, too_large(max_bytes, what));
    let meta = std::fs::metadata(path)
        .map_err(|e| ConfigError::whole(&file, format!("cannot read: {e}")))?;
    if meta.len() > max_bytes as u64 {
        return Err(too_large());
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::whole(&file, format!("cannot read: {e}")))?;
    if text.len() > max_bytes {
        return Err(too_large());
    }
    Ok((file, text))
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
        // Inside é (2 bytes from byte 7): é's own column.
        assert_eq!(line_col(text, 8), (2, 2));
    }

    #[test]
    fn paths_walk_tables_and_arrays_in_both_spellings() {
        let text = "[a]\nb = [1, { c = 2 }]\n";
        let s = Spans::parse(text).unwrap();
        let dotted = s.exact("a.b.1.c").unwrap();
        assert_eq!(s.exact("a.b[1].c"), Some(dotted.clone()));
        assert_eq!(&text[dotted], "2");
        assert!(s.exact("a.b.2").is_none());
        assert!(s.exact("a.x").is_none());
        // The nearest ancestor of a missing index is the array.
        assert_eq!(&text[s.nearest("a.b.7.c")], "[1, { c = 2 }]");
        assert_eq!(s.nearest("zzz"), s.root().span());
    }
}
