//! Where a key sits in the scenario text.
//!
//! The typed structs the engine reads keep plain numbers (a `Spanned<u32>`
//! would change the fields the engine uses), so validation finds positions
//! in a second, untyped view of the same document: `toml`'s span-carrying
//! [`DeTable`]. Paths are dotted, with array indices as numbers:
//! `"client.2.step.0.rate"`.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// The parsed document, kept only for its spans.
pub(crate) struct Doc<'i> {
    root: Spanned<DeTable<'i>>,
}

impl<'i> Doc<'i> {
    pub(crate) fn new(root: Spanned<DeTable<'i>>) -> Self {
        Doc { root }
    }

    /// Span of the value at `path` if every step of it is present.
    pub(crate) fn exact(&self, path: &str) -> Option<Range<usize>> {
        let (span, complete) = self.walk(path);
        complete.then_some(span)
    }

    /// Span of the value at `path`, or of its nearest present ancestor (a
    /// defaulted field points at its table), or the whole document.
    pub(crate) fn nearest(&self, path: &str) -> Range<usize> {
        self.walk(path).0
    }

    /// Walks `path` as far as it goes: the last span reached and whether the
    /// whole path was found.
    fn walk(&self, path: &str) -> (Range<usize>, bool) {
        let mut span = self.root.span();
        let mut here: Option<&DeValue<'i>> = None;
        for seg in path.split('.').filter(|s| !s.is_empty()) {
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
