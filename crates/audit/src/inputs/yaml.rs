//! YAML and JSON streams: split into documents, each object found with its
//! position, parsed through serde-saphyr within its budgets.
//!
//! A stream is split at document markers (`---` or `...` at column 0, which
//! YAML forbids inside any scalar), so one broken document costs only
//! itself. The `kind` and `apiVersion` of a block-style document are read
//! from its top-level lines without parsing it, so unknown kinds cost no
//! parse; flow-style and JSON documents, and `kind: List`, are parsed once
//! into a generic value.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_saphyr::{Budget, Options, Spanned};

use crate::finding::Pos;

/// Deepest nesting of mappings and sequences accepted in one document.
pub const MAX_DEPTH: usize = 64;
/// Most parser events in one document (a 2 KB manifest has a few hundred).
pub const MAX_EVENTS: usize = 1_000_000;
/// Most alias references (`*a`) in one document: Kubernetes manifests use
/// none, so a handful is generous and an alias bomb is cut off at once.
pub const MAX_ALIASES: usize = 1_000;
/// Most objects in one `kind: List` (nested Lists included).
pub const MAX_LIST_ITEMS: usize = 100_000;
/// Deepest `List` inside a `List` flattened (`kubectl` flattens any depth;
/// rendered manifests nest one or two).
pub const MAX_LIST_NESTING: usize = 8;

/// The serde-saphyr options every document is parsed with.
pub fn options() -> Options {
    let mut budget = Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.max_events = MAX_EVENTS;
    budget.max_aliases = MAX_ALIASES;
    budget.max_anchors = MAX_ALIASES;
    budget.max_documents = 1;
    let mut o = Options::default();
    o.budget = Some(budget);
    o.with_snippet = false;
    o
}

/// One Kubernetes-style object found in a stream.
#[derive(Debug, Clone)]
pub struct RawObject {
    /// Where the object starts.
    pub pos: Pos,
    /// `apiVersion` as written.
    pub api_version: String,
    /// `kind` as written.
    pub kind: String,
    /// How to deserialize it.
    pub body: Body,
}

/// The object's text, or its parsed value (lists, flow style, JSON).
#[derive(Debug, Clone)]
pub enum Body {
    /// The document's text; `first_line` is the file line of its first line.
    Text {
        /// The document text.
        text: Arc<str>,
        /// File line of the text's first line (1-based).
        first_line: u32,
    },
    /// A generic value, from a `List` item or a flow/JSON document.
    Value(serde_json::Value),
}

/// A located problem: file line and message.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    /// Where.
    pub pos: Pos,
    /// What was expected.
    pub message: String,
}

impl RawObject {
    /// Deserializes the object as `T`, with the position of the first
    /// problem on failure.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ParseError> {
        match &self.body {
            Body::Text { text, first_line } => {
                serde_saphyr::from_str_with_options::<T>(text, options())
                    .map_err(|e| located(&self.pos.file, *first_line, text, &e))
            }
            Body::Value(v) => T::deserialize(v).map_err(|e| ParseError {
                pos: self.pos.clone(),
                message: clean_message(&e.to_string()),
            }),
        }
    }

    /// The file line of the first top-level-or-nested key `key:` at or
    /// after the object's start, for pointing at a field; the object's own
    /// line when the key is not found (or the object came from a value).
    pub fn line_of(&self, key: &str) -> u32 {
        if let Body::Text { text, first_line } = &self.body {
            for (i, line) in text.lines().enumerate() {
                let t = line.trim_start().trim_start_matches("- ");
                if let Some(rest) = t.strip_prefix(key)
                    && rest.starts_with(':')
                {
                    return first_line + i as u32;
                }
            }
        }
        self.pos.line
    }
}

fn located(file: &Arc<str>, first_line: u32, doc: &str, e: &serde_saphyr::Error) -> ParseError {
    let in_doc = e.location().map(|l| l.line() as u32).filter(|l| *l > 0);
    let line = in_doc.map(|l| first_line + l - 1).unwrap_or(first_line);
    let mut message = clean_message(&e.to_string());
    if let Some(text) = in_doc.and_then(|l| doc.lines().nth(l as usize - 1)) {
        let t: String = text.trim().chars().take(80).collect();
        if !t.is_empty() {
            message = format!("{message}, at `{t}`");
        }
    }
    ParseError {
        pos: Pos::new(file, line),
        message,
    }
}

/// serde-saphyr's message without its own position suffix (we print ours,
/// shifted to the file's line) and without Rust type names.
fn clean_message(s: &str) -> String {
    let first = s.lines().next().unwrap_or(s).trim();
    let cut = first
        .find(" at line ")
        .map(|i| &first[..i])
        .unwrap_or(first);
    let mut m = cut.trim_end_matches(':').to_string();
    if let Some(i) = m.find("budget breached") {
        return format!("{}{}", &m[..i], over_limit(&m[i..]));
    }
    for (rust, plain) in [
        ("invalid i32", "expected a whole number"),
        ("invalid i64", "expected a whole number"),
        ("invalid u32", "expected a whole number ≥ 0"),
        ("invalid u64", "expected a whole number ≥ 0"),
        ("expected i32", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected u32", "expected a whole number ≥ 0"),
        ("expected u64", "expected a whole number ≥ 0"),
        ("expected u16", "expected a whole number ≥ 0"),
        ("expected f64", "expected a number"),
        ("expected usize", "expected a whole number ≥ 0"),
        ("expected a string", "expected text"),
    ] {
        m = m.replace(rust, plain);
    }
    m
}

/// A reading limit's breach, said in the audit's words (the library's
/// names for its limits mean nothing to the reader).
fn over_limit(breach: &str) -> String {
    let what = if breach.contains("Depth") {
        format!("mappings and sequences nested more than {MAX_DEPTH} deep")
    } else if breach.contains("Alias") || breach.contains("Anchor") || breach.contains("MergeKeys")
    {
        format!("more than {MAX_ALIASES} anchors or aliases (`&a`, `*a`)")
    } else if breach.contains("Documents") {
        "more than one document where one was expected".to_string()
    } else {
        format!("more than {MAX_EVENTS} values")
    };
    format!(
        "the document has {what}, over the audit's limit; not read (split it or remove the nesting)"
    )
}

/// Splits `text` into documents: `(file line of first line, text)`.
pub fn split_documents(text: &str) -> Vec<(u32, &str)> {
    let mut docs = Vec::new();
    let mut start = 0usize;
    let mut start_line = 1u32;
    let mut offset = 0usize;
    for (line_no, line) in (1u32..).zip(text.split_inclusive('\n')) {
        // Only a line starting `---` or `...` can be a marker: most lines
        // are rejected by their first byte.
        if !line.starts_with(['-', '.']) {
            offset += line.len();
            continue;
        }
        let bare = line.trim_end_matches(['\n', '\r']);
        let marker = |m: &str| {
            bare == m
                || bare
                    .strip_prefix(m)
                    .is_some_and(|r| r.starts_with([' ', '\t']))
        };
        if marker("---") || marker("...") {
            docs.push((start_line, &text[start..offset]));
            // Content may follow `--- ` on the same line (`--- {a: 1}`).
            let after = if marker("---") {
                bare[3..].trim_start()
            } else {
                ""
            };
            if after.is_empty() || after.starts_with('#') {
                start = offset + line.len();
                start_line = line_no + 1;
            } else {
                start = offset + (line.len() - line.trim_start_matches("---").len()) + 3;
                start_line = line_no;
            }
        }
        offset += line.len();
    }
    docs.push((start_line, &text[start..]));
    docs.retain(|(_, d)| !is_blank(d));
    docs
}

fn is_blank(doc: &str) -> bool {
    doc.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#') || t.starts_with('%')
    })
}

/// Top-level `kind:` and `apiVersion:` of a block-style document, read
/// from its unindented lines; `None` when either is missing there.
fn scan_header(doc: &str) -> Option<(String, String, u32)> {
    let mut kind = None;
    let mut api = None;
    let mut first = None;
    for (i, line) in doc.lines().enumerate() {
        let t = line.trim_end();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        first.get_or_insert(i as u32);
        if t.starts_with(['{', '[', '"', '\'']) {
            return None;
        }
        if let Some(v) = t.strip_prefix("kind:") {
            kind = Some(scalar(v));
        } else if let Some(v) = t.strip_prefix("apiVersion:") {
            api = Some(scalar(v));
        }
        // Both found at the top level: the document is block style, and
        // the rest of its lines (most of it) need not be scanned.
        if kind.is_some() && api.is_some() {
            break;
        }
    }
    Some((kind?, api?, first.unwrap_or(0)))
}

fn scalar(v: &str) -> String {
    let v = v.split(" #").next().unwrap_or(v).trim();
    v.trim_matches(|c| c == '"' || c == '\'').to_string()
}

/// Everything one stream yielded.
#[derive(Debug, Default)]
pub struct Stream {
    /// Objects with a kind and apiVersion.
    pub objects: Vec<RawObject>,
    /// Documents or items that could not be read.
    pub errors: Vec<ParseError>,
}

/// Reads one YAML/JSON file's text into objects.
pub fn read_stream(file: &Arc<str>, text: &str) -> Stream {
    let mut out = Stream::default();
    for (first_line, doc) in split_documents(text) {
        match scan_header(doc) {
            Some((kind, api_version, first)) if !is_list_kind(&kind) => {
                out.objects.push(RawObject {
                    pos: Pos::new(file, first_line + first),
                    api_version,
                    kind,
                    body: Body::Text {
                        text: doc.into(),
                        first_line,
                    },
                })
            }
            _ => read_generic(file, first_line, doc, &mut out),
        }
    }
    out
}

/// The shape of a `kind: List` (no `flatten`, which would drop spans).
#[derive(serde::Deserialize)]
struct ListShape {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    items: Option<Vec<Spanned<serde_json::Value>>>,
}

/// Is the document a null (`~`, `null`, `!!null`), which `kubectl` skips
/// as it skips an empty one?
fn is_null_document(doc: &str) -> bool {
    let mut content = doc.lines().map(str::trim).filter_map(|t| {
        if t.starts_with('#') || t.starts_with('%') {
            return None;
        }
        // A comment starts at ` #`.
        let t = t.find(" #").map_or(t, |i| t[..i].trim_end());
        (!t.is_empty()).then_some(t)
    });
    let (Some(only), None) = (content.next(), content.next()) else {
        return false;
    };
    let only = only.strip_prefix("!!null").map_or(only, str::trim_start);
    matches!(only, "" | "~" | "null" | "Null" | "NULL")
}

fn read_generic(file: &Arc<str>, first_line: u32, doc: &str, out: &mut Stream) {
    if is_null_document(doc) {
        return;
    }
    let line_in_doc = |l: u64| first_line + (l.max(1) as u32) - 1;
    let shape: Spanned<ListShape> = match serde_saphyr::from_str_with_options(doc, options()) {
        Ok(g) => g,
        Err(e) => {
            out.errors.push(located(file, first_line, doc, &e));
            return;
        }
    };
    let pos = Pos::new(file, line_in_doc(shape.referenced.line()));
    if let (Some(k), Some(items)) = (shape.value.kind.as_deref(), shape.value.items)
        && is_list_kind(k)
    {
        if items.len() > MAX_LIST_ITEMS {
            out.errors.push(ParseError {
                pos,
                message: format!(
                    "a List of {} items is over the limit of {MAX_LIST_ITEMS}; split it into several Lists or files",
                    items.len()
                ),
            });
            return;
        }
        let mut budget = MAX_LIST_ITEMS as i64;
        for item in items {
            let ipos = Pos::new(file, line_in_doc(item.referenced.line()));
            push_item(ipos, item.value, 1, &mut budget, out);
        }
        return;
    }
    match serde_saphyr::from_str_with_options::<serde_json::Value>(doc, options()) {
        // `null` written some other way (a tag, a flow `null`): skipped.
        Ok(serde_json::Value::Null) => {}
        Ok(v) => push_value(pos, v, out),
        Err(e) => out.errors.push(located(file, first_line, doc, &e)),
    }
}

fn is_list_kind(k: &str) -> bool {
    k == "List" || k.ends_with("List")
}

/// One `List` item: an object, or a `List` flattened into its items (all
/// at the outer item's line, the nearest one known), at most
/// [`MAX_LIST_NESTING`] deep and [`MAX_LIST_ITEMS`] in all; a null item is
/// skipped as `kubectl` skips it.
fn push_item(pos: Pos, v: serde_json::Value, depth: usize, budget: &mut i64, out: &mut Stream) {
    if v.is_null() {
        return;
    }
    let nested = v
        .get("kind")
        .and_then(|k| k.as_str())
        .is_some_and(is_list_kind)
        && v.get("items").is_some_and(|i| i.is_array() || i.is_null());
    if !nested {
        if *budget == 0 {
            *budget = -1;
            out.errors.push(ParseError {
                pos: pos.clone(),
                message: format!(
                    "the Lists in this document hold more than {MAX_LIST_ITEMS} items; the rest were not read (split them into several files)"
                ),
            });
        }
        if *budget < 0 {
            return;
        }
        *budget -= 1;
        push_value(pos, v, out);
        return;
    }
    if depth >= MAX_LIST_NESTING {
        out.errors.push(ParseError {
            pos,
            message: format!(
                "a List nested more than {MAX_LIST_NESTING} Lists deep; not read (write its items into the outer List)"
            ),
        });
        return;
    }
    let serde_json::Value::Object(mut m) = v else {
        return;
    };
    if let Some(serde_json::Value::Array(items)) = m.remove("items") {
        for item in items {
            push_item(pos.clone(), item, depth + 1, budget, out);
        }
    }
}

fn push_value(pos: Pos, v: serde_json::Value, out: &mut Stream) {
    let kind = v.get("kind").and_then(|k| k.as_str()).map(str::to_string);
    let api = v
        .get("apiVersion")
        .and_then(|k| k.as_str())
        .map(str::to_string);
    match (kind, api) {
        (Some(kind), Some(api_version)) => out.objects.push(RawObject {
            pos,
            api_version,
            kind,
            body: Body::Value(v),
        }),
        _ => out.errors.push(ParseError {
            pos,
            message: "expected a Kubernetes object with `apiVersion` and `kind`".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_markers_only_at_column_zero() {
        let t = "a: 1\n---\nb: |\n  --- not a marker\n...\n---\n# only a comment\n---\nc: 3\n";
        let d = split_documents(t);
        assert_eq!(d.len(), 3);
        assert_eq!(d[0], (1, "a: 1\n"));
        assert_eq!(d[1].0, 3);
        assert!(d[1].1.contains("not a marker"));
        assert_eq!(d[2], (9, "c: 3\n"));
    }

    #[test]
    fn header_scan_reads_top_level_only() {
        let doc = "# c\napiVersion: v1\nkind: \"Service\"\nspec:\n  kind: nested\n";
        assert_eq!(scan_header(doc), Some(("Service".into(), "v1".into(), 1)));
        assert_eq!(scan_header("{\"kind\": \"Service\"}"), None);
    }

    #[test]
    fn header_scan_stops_once_both_keys_are_found() {
        // A quoted top-level key after the header no longer matters: the
        // document is block style once `kind` and `apiVersion` are read.
        let doc = "apiVersion: v1\nkind: Service\n\"metadata\": {name: a}\n";
        assert_eq!(scan_header(doc), Some(("Service".into(), "v1".into(), 0)));
        assert_eq!(scan_header("kind: Service\n{a: 1}\n"), None);
    }

    #[test]
    fn only_dashes_or_dots_alone_at_column_zero_are_markers() {
        let t = "a:\n- 1\n----\n-- x\n.x\n--- # c\nb: 2\n...\n";
        let d = split_documents(t);
        assert_eq!(d, vec![(1, "a:\n- 1\n----\n-- x\n.x\n"), (7, "b: 2\n")]);
    }

    #[test]
    fn list_items_have_their_own_lines() {
        let t = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: a}\n- apiVersion: v1\n  kind: Service\n  metadata: {name: b}\n";
        let s = read_stream(&Arc::from("f.yaml"), t);
        assert!(s.errors.is_empty(), "{:?}", s.errors);
        let lines: Vec<u32> = s.objects.iter().map(|o| o.pos.line).collect();
        assert_eq!(lines, vec![4, 7]);
    }
}
