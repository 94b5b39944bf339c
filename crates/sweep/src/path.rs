//! Scenario paths: `client.users.rate`, `service.db.app.service_time.mean`,
//! `action.cut.for`, `client.users.step.1.rate`.
//!
//! A path is read on the TOML document itself ([`toml_edit`]), before the
//! scenario is built, so a sweep edits exactly the text the user wrote and
//! line numbers of later errors still point into the user's file. An
//! array of tables (`[[client]]`, `[[service]]`, …) is entered by the
//! `name` of an element, or for `[[action]]` by its `id`; any array also
//! by a 0-based index.

use toml_edit::{DocumentMut, Item, Value};

/// Most segments in one path (the deepest scenario field has eight:
/// `service.api.autoscaler.behavior.scale_up.policies.0.period`).
pub const MAX_SEGMENTS: usize = 16;

/// A place in the document: how to get from the root to one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldPath {
    text: String,
    segments: Vec<String>,
}

impl FieldPath {
    /// Splits `text` at dots; refuses empty segments and overlong paths.
    pub fn parse(text: &str) -> Result<FieldPath, String> {
        let segments: Vec<String> = text.split('.').map(str::to_owned).collect();
        if segments.iter().any(|s| s.is_empty()) {
            return Err(format!(
                "path {text:?}: expected dotted names such as client.users.rate, with no empty part"
            ));
        }
        if segments.len() > MAX_SEGMENTS {
            return Err(format!(
                "path {text:?}: more than {MAX_SEGMENTS} parts; no scenario field is that deep"
            ));
        }
        Ok(FieldPath {
            text: text.to_owned(),
            segments,
        })
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The value at this path, or an error naming the first part that does
    /// not exist and what exists there.
    pub fn get<'d>(&self, doc: &'d DocumentMut) -> Result<&'d Value, String> {
        let mut here = Here::Table(doc.as_table());
        let mut walked = String::new();
        for (i, seg) in self.segments.iter().enumerate() {
            let next = self.step(&here, seg, &walked)?;
            if !walked.is_empty() {
                walked.push('.');
            }
            walked.push_str(seg);
            if i + 1 == self.segments.len() {
                return match next {
                    Here::Value(v) if !v.is_inline_table() && !v.is_array() => Ok(v),
                    other => Err(format!(
                        "{}: `{walked}` is {}, not a single value; {}",
                        self.text,
                        other.kind(),
                        other.listing()
                    )),
                };
            }
            here = next;
        }
        unreachable!("a parsed path has at least one segment")
    }

    /// Replaces the value at this path with `value`, keeping the old
    /// value's surrounding whitespace and comments.
    pub fn set(&self, doc: &mut DocumentMut, value: Value) -> Result<(), String> {
        // Resolve immutably first, for the error; the mutable walk below
        // then follows a path known to exist.
        self.get(doc)?;
        let mut here = HereMut::Table(doc.as_table_mut());
        for seg in &self.segments {
            here = here.step(seg).expect("the path resolved a moment ago");
        }
        let HereMut::Value(old) = here else {
            unreachable!("the path resolved to a value a moment ago")
        };
        let decor = old.decor().clone();
        *old = value;
        *old.decor_mut() = decor;
        Ok(())
    }

    fn step<'d>(&self, here: &Here<'d>, seg: &str, walked: &str) -> Result<Here<'d>, String> {
        let at = if walked.is_empty() {
            "the scenario".to_owned()
        } else {
            format!("`{walked}`")
        };
        match here {
            Here::Table(t) => match t.get(seg) {
                Some(item) => Ok(Here::of_item(item)),
                None => Err(format!(
                    "{}: {at} has no `{seg}`; {}. A field left at its default must be written in the scenario to be swept",
                    self.text,
                    here.listing()
                )),
            },
            Here::Inline(t) => match t.get(seg) {
                Some(v) => Ok(Here::Value(v)),
                None => Err(format!(
                    "{}: {at} has no `{seg}`; {}. A field left at its default must be written in the scenario to be swept",
                    self.text,
                    here.listing()
                )),
            },
            Here::Tables(a) => match find_element(a, seg) {
                Some(i) => Ok(Here::Table(a.get(i).expect("found"))),
                None => Err(format!(
                    "{}: {at} has no element {seg:?}; {}",
                    self.text,
                    here.listing()
                )),
            },
            Here::Value(Value::Array(a)) => {
                match seg.parse::<usize>().ok().and_then(|i| a.get(i)) {
                    Some(v) => Ok(Here::Value(v)),
                    None => Err(format!(
                        "{}: {at} is a list of {} values; expected an index 0 to {}, got {seg:?}",
                        self.text,
                        a.len(),
                        a.len().saturating_sub(1)
                    )),
                }
            }
            Here::Value(Value::InlineTable(t)) => Self::step(self, &Here::Inline(t), seg, walked),
            Here::Value(_) | Here::Other => Err(format!(
                "{}: {at} is {}, which has no parts; the path ends before `{seg}`",
                self.text,
                here.kind()
            )),
        }
    }
}

impl std::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Where a mutable walk stands.
enum HereMut<'d> {
    Table(&'d mut toml_edit::Table),
    Inline(&'d mut toml_edit::InlineTable),
    Tables(&'d mut toml_edit::ArrayOfTables),
    Value(&'d mut Value),
}

impl<'d> HereMut<'d> {
    fn of_item(item: &'d mut Item) -> Option<HereMut<'d>> {
        match item {
            Item::Table(t) => Some(HereMut::Table(t)),
            Item::ArrayOfTables(a) => Some(HereMut::Tables(a)),
            Item::Value(Value::InlineTable(t)) => Some(HereMut::Inline(t)),
            Item::Value(v) => Some(HereMut::Value(v)),
            Item::None => None,
        }
    }

    fn step(self, seg: &str) -> Option<HereMut<'d>> {
        match self {
            HereMut::Table(t) => HereMut::of_item(t.get_mut(seg)?),
            HereMut::Inline(t) => HereMut::of_value(t.get_mut(seg)?),
            HereMut::Tables(a) => {
                let i = find_element(a, seg)?;
                Some(HereMut::Table(a.get_mut(i)?))
            }
            HereMut::Value(Value::Array(a)) => HereMut::of_value(a.get_mut(seg.parse().ok()?)?),
            HereMut::Value(Value::InlineTable(t)) => HereMut::of_value(t.get_mut(seg)?),
            HereMut::Value(_) => None,
        }
    }

    fn of_value(v: &'d mut Value) -> Option<HereMut<'d>> {
        Some(match v {
            Value::InlineTable(t) => HereMut::Inline(t),
            v => HereMut::Value(v),
        })
    }
}

/// Where a walk stands.
enum Here<'d> {
    Table(&'d toml_edit::Table),
    Inline(&'d toml_edit::InlineTable),
    Tables(&'d toml_edit::ArrayOfTables),
    Value(&'d Value),
    Other,
}

impl<'d> Here<'d> {
    fn of_item(item: &'d Item) -> Here<'d> {
        match item {
            Item::Table(t) => Here::Table(t),
            Item::ArrayOfTables(a) => Here::Tables(a),
            Item::Value(Value::InlineTable(t)) => Here::Inline(t),
            Item::Value(v) => Here::Value(v),
            Item::None => Here::Other,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Here::Table(_) | Here::Inline(_) | Here::Value(Value::InlineTable(_)) => "a table",
            Here::Tables(_) => "a list of tables",
            Here::Value(Value::Array(_)) => "a list",
            Here::Value(Value::String(_)) => "a string",
            Here::Value(Value::Integer(_)) => "an integer",
            Here::Value(Value::Float(_)) => "a number",
            Here::Value(Value::Boolean(_)) => "a boolean",
            Here::Value(Value::Datetime(_)) => "a date",
            Here::Other => "nothing",
        }
    }

    /// What exists here, for an error.
    fn listing(&self) -> String {
        let keys = |it: &mut dyn Iterator<Item = &str>| {
            let v: Vec<String> = it.map(|k| format!("`{k}`")).collect();
            if v.is_empty() {
                "it has no fields".to_owned()
            } else {
                format!("it has {}", v.join(", "))
            }
        };
        match self {
            Here::Table(t) => keys(&mut t.iter().map(|(k, _)| k)),
            Here::Inline(t) => keys(&mut t.iter().map(|(k, _)| k)),
            Here::Value(Value::InlineTable(t)) => keys(&mut t.iter().map(|(k, _)| k)),
            Here::Tables(a) => {
                let names: Vec<String> = a
                    .iter()
                    .enumerate()
                    .map(|(i, t)| match label(t) {
                        Some(n) => format!("{n:?}"),
                        None => i.to_string(),
                    })
                    .collect();
                format!(
                    "it has {} (by name, or `id` for actions; or an index 0 to {})",
                    if names.is_empty() {
                        "no elements".to_owned()
                    } else {
                        names.join(", ")
                    },
                    a.len().saturating_sub(1)
                )
            }
            Here::Value(Value::Array(a)) => {
                format!("it has indices 0 to {}", a.len().saturating_sub(1))
            }
            _ => "it has no parts".to_owned(),
        }
    }
}

/// An element's `name`, or its `id` (actions).
fn label(t: &toml_edit::Table) -> Option<String> {
    ["name", "id"]
        .iter()
        .find_map(|k| t.get(k).and_then(Item::as_str).map(str::to_owned))
}

/// The element named `seg` (by `name` or `id`), else the one at index `seg`.
fn find_element(a: &toml_edit::ArrayOfTables, seg: &str) -> Option<usize> {
    if let Some(i) = a.iter().position(|t| label(t).as_deref() == Some(seg)) {
        return Some(i);
    }
    let i: usize = seg.parse().ok()?;
    (i < a.len()).then_some(i)
}
