//! What the audit reports: a [`Finding`] of one rule at one position.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

/// How serious a finding is. Ordered: `Info < Warning < Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; no action needed.
    Info,
    /// Likely to hurt under load.
    Warning,
    /// The configuration cannot do what it is meant to, or could not be read.
    Error,
}

impl Severity {
    /// Parses `info`, `warning` or `error`.
    pub fn parse(s: &str) -> Option<Severity> {
        match s {
            "info" => Some(Severity::Info),
            "warning" => Some(Severity::Warning),
            "error" => Some(Severity::Error),
            _ => None,
        }
    }

    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A position in an input: file (as given on the command line, `-` for
/// stdin) and 1-based line (0 when the whole file is meant).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Pos {
    /// The file as named on the command line or found under a directory.
    pub file: Arc<str>,
    /// 1-based line; 0 for the file as a whole.
    pub line: u32,
}

impl Pos {
    /// A position.
    pub fn new(file: &Arc<str>, line: u32) -> Pos {
        Pos {
            file: file.clone(),
            line,
        }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.file)
        } else {
            write!(f, "{}:{}", self.file, self.line)
        }
    }
}

/// One rule's verdict about one object or route.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable rule ID (`SB101`).
    pub rule: &'static str,
    /// Severity of this finding (a rule may report at more than one).
    pub severity: Severity,
    /// Where to look.
    pub pos: Pos,
    /// The object it is about, as `Kind namespace/name` (or the route).
    pub object: String,
    /// What is wrong, with the numbers that show it.
    pub message: String,
}
