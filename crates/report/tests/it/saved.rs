//! Saved files as `stormbreak report DIR` reads them: hand-made broken
//! `recording.json` and `report-extras.json` files are refused with an
//! error naming the file and the field, and no file makes it panic.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use stormbreak_report::{
    EXTRAS_FILE, FileError, ReportExtras, Table, load_recording, read_extras, render, write_extras,
};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("saved-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A small consistent recording: 3 intervals of 10 s, two routes (one
/// behind a job queue), a service and a gateway, two actions.
fn recording() -> Value {
    let route = |name: &str, jobs: bool| {
        let mut r = json!({
            "name": name,
            "first_attempts": [10, 12, 11],
            "attempts": [12, 30, 14],
            "successes": [11, 9, 13],
            "errors": [
                [0, 1, 0, 0, 0, 0, 0, 0, 0, 0],
                [0, 0, 0, 20, 1, 0, 0, 0, 0, 0],
                [0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
            ],
            "latency_ms": [[1.0, 2.0, 3.0, 4.0], [5.0, 9.0, 20.0, 50.0], [1.0, 2.0, 3.5, 4.0]],
            "latency_mean_ms": [1.5, 7.0, 1.6]
        });
        if jobs {
            r["job_wait_s"] = json!([0.0, 12.5, 3.0]);
        }
        r
    };
    let component = |name: &str, kind: &str| {
        json!({
            "name": name,
            "kind": kind,
            "arrivals": [12, 30, 14],
            "rejected": [0, 3, 0],
            "in_flight": [1.0, 8.0, 2.0],
            "limit": [8.0, 8.0, 8.0],
            "queue": [0.0, 4.0, 0.0],
            "replicas": [2.0, 2.0, 3.0],
            "app_utilisation": [0.1, 0.4, 0.2],
            "little": {"mean_in_system": 3.0, "throughput_per_s": 1.8, "mean_sojourn_s": 0.02}
        })
    };
    json!({
        "scenario": "saved",
        "seed": 7,
        "scale": 0.01,
        "interval": 10_000_000_000u64,
        "duration": 30_000_000_000u64,
        "clock_origin_s": 48_480,
        "routes": [route("web", false), route("api", true)],
        "components": [component("svc", "service"), component("edge", "gateway")],
        "actions": [
            {"at": 10_000_000_000u64, "what": "pause a node"},
            {"at": 20_000_000_000u64, "what": "resume"}
        ],
        "events": 100,
        "attempts": 56,
        "peak_in_flight": 9
    })
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn load_error(dir: &Path, doc: &Value) -> String {
    let path = write(dir, "recording.json", doc.to_string().as_bytes());
    match load_recording(&path) {
        Ok(_) => panic!("accepted: {doc}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_consistent_recording_loads_and_renders() {
    let dir = scratch("good");
    let path = write(&dir, "recording.json", recording().to_string().as_bytes());
    let rec = load_recording(&path).unwrap();
    let html = render(&[("run", &rec)], &ReportExtras::default());
    assert!(html.contains("<svg class=\"chart\""));
}

#[test]
fn inconsistent_recordings_name_the_file_the_field_and_what_was_expected() {
    let dir = scratch("inconsistent");
    let file = dir.join("recording.json").display().to_string();
    type Mutation = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Mutation, String)> = vec![
        (
            "a short series",
            Box::new(|v| {
                v["routes"][1]["successes"].as_array_mut().unwrap().pop();
            }),
            format!(
                "{file}: routes[1] \"api\": series \"successes\" has 2 values, expected 3 (duration / interval)"
            ),
        ),
        (
            "a zero interval",
            Box::new(|v| v["interval"] = json!(0)),
            format!("{file}: interval: is 0, expected a positive number of nanoseconds"),
        ),
        (
            "a duration that disagrees with the series",
            Box::new(|v| v["duration"] = json!(3_600_000_000_000u64)),
            format!(
                "{file}: duration: 3600000000000 ns at an interval of 10000000000 ns is 360 intervals, but every series has 3 values"
            ),
        ),
        (
            "a negative gauge",
            Box::new(|v| v["components"][0]["queue"][2] = json!(-4.0)),
            format!("{file}: components[0] \"svc\": queue[2] is -4, expected a finite number ≥ 0"),
        ),
        (
            "an unknown component kind",
            Box::new(|v| v["components"][1]["kind"] = json!("proxy")),
            format!(
                "{file}: components[1] \"edge\": kind is \"proxy\", expected one of lb, gateway, service"
            ),
        ),
        (
            "a repeated route name",
            Box::new(|v| v["routes"][1]["name"] = json!("web")),
            format!(
                "{file}: routes[1] \"web\": the name is used by routes[0] too, expected unique names"
            ),
        ),
        (
            "an action after the end",
            Box::new(|v| v["actions"][1]["at"] = json!(40_000_000_000u64)),
            format!(
                "{file}: actions[1]: at 40000000000 ns is after the end of the run, expected at most the duration (30000000000 ns)"
            ),
        ),
    ];
    for (what, mutate, expected) in cases {
        let mut doc = recording();
        mutate(&mut doc);
        assert_eq!(load_error(&dir, &doc), expected, "{what}");
    }
}

#[test]
fn malformed_files_name_the_file_and_where_parsing_stopped() {
    let dir = scratch("malformed");
    let file = dir.join("recording.json").display().to_string();
    let big = recording().to_string().replacen("0.01", "1e999", 1);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "empty",
            Vec::new(),
            "EOF while parsing a value at line 1 column 0",
        ),
        (
            "not JSON",
            b"nope".to_vec(),
            "expected ident at line 1 column 2",
        ),
        ("missing fields", b"{}".to_vec(), "missing field `scenario`"),
        (
            "a string for a count",
            recording()
                .to_string()
                .replacen("\"seed\":7", "\"seed\":\"seven\"", 1)
                .into_bytes(),
            "invalid type: string \"seven\", expected u64",
        ),
        (
            "a negative count",
            recording()
                .to_string()
                .replacen("\"seed\":7", "\"seed\":-7", 1)
                .into_bytes(),
            "invalid value: integer `-7`, expected u64",
        ),
        (
            "an infinite number",
            big.into_bytes(),
            "number out of range",
        ),
        (
            "deep nesting",
            // Unknown fields are refused before the nesting is read.
            format!("{{\"x\": {}", "[".repeat(100_000)).into_bytes(),
            "unknown field `x`",
        ),
        ("binary", vec![0xff, 0xfe, 0x00, 0x01], "expected value"),
    ];
    for (what, bytes, reason) in cases {
        let path = write(&dir, "recording.json", &bytes);
        let err = load_recording(&path).unwrap_err();
        assert!(
            matches!(err, FileError::Unreadable { .. }),
            "{what}: {err:?}"
        );
        let text = err.to_string();
        assert!(text.starts_with(&format!("{file}: ")), "{what}: {text}");
        assert_eq!(
            text.matches(&file).count(),
            1,
            "{what}: path repeated: {text}"
        );
        assert!(text.contains(reason), "{what}: {text}");
    }
    let err = load_recording(&dir.join("absent.json")).unwrap_err();
    assert!(matches!(err, FileError::Missing(_)), "{err:?}");
    let err = load_recording(&dir).unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("{}: cannot read: ", dir.display())),
        "{err}"
    );
}

/// Every field of a valid file replaced by a wrong value, and every array
/// shortened and lengthened: each variant is refused with an error naming
/// the file, or is accepted and renders. None panics.
#[test]
fn no_variant_of_a_recording_panics() {
    let dir = scratch("variants");
    let base = recording();
    let mut pointers = Vec::new();
    fn walk(v: &Value, at: String, out: &mut Vec<(String, bool)>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    walk(v, format!("{at}/{k}"), out);
                }
            }
            Value::Array(a) => {
                out.push((at.clone(), true));
                for (i, v) in a.iter().enumerate() {
                    walk(v, format!("{at}/{i}"), out);
                }
            }
            _ => out.push((at, false)),
        }
    }
    walk(&base, String::new(), &mut pointers);
    let replacements = [
        json!(0),
        json!(1),
        json!(-1),
        json!(u64::MAX),
        json!(1.7e308),
        json!(1e-300),
        json!(0.5),
        json!("x"),
        Value::Null,
        json!([]),
    ];
    let (mut accepted, mut refused) = (0, 0);
    let path = dir.join("recording.json");
    let mut try_doc = |doc: &Value, what: &str| {
        std::fs::write(&path, doc.to_string()).unwrap();
        match load_recording(&path) {
            Ok(rec) => {
                let html = render(&[("a", &rec), ("b", &rec)], &ReportExtras::default());
                assert!(html.trim_end().ends_with("</html>"), "{what}");
                assert!(!html.contains("NaN"), "{what}: NaN in the page");
                accepted += 1;
            }
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.starts_with(&path.display().to_string()),
                    "{what}: {text}"
                );
                refused += 1;
            }
        }
    };
    for (pointer, is_array) in &pointers {
        for r in &replacements {
            let mut doc = base.clone();
            *doc.pointer_mut(pointer).unwrap() = r.clone();
            try_doc(&doc, &format!("{pointer} = {r}"));
        }
        if *is_array {
            let mut doc = base.clone();
            doc.pointer_mut(pointer)
                .unwrap()
                .as_array_mut()
                .unwrap()
                .pop();
            try_doc(&doc, &format!("{pointer} shortened"));
            let mut doc = base.clone();
            let a = doc.pointer_mut(pointer).unwrap().as_array_mut().unwrap();
            if let Some(last) = a.last().cloned() {
                a.push(last);
            }
            try_doc(&doc, &format!("{pointer} lengthened"));
        }
    }
    // Both outcomes happen: the checks neither accept nor refuse everything.
    assert!(accepted > 50 && refused > 50, "{accepted} {refused}");
}

#[test]
fn extras_with_unknown_fields_or_long_rows_are_refused() {
    let dir = scratch("extras");
    let file = dir.join(EXTRAS_FILE).display().to_string();
    let cases = [
        (
            r#"{"title": "t", "tables": [], "subtitle": "s"}"#,
            "unknown field `subtitle`, expected one of `title`, `description`, `tables`",
        ),
        (
            r#"{"tables": [{"title": "t", "columns": ["a"], "rows": [], "notes": "n"}]}"#,
            "unknown field `notes`, expected one of `title`, `columns`, `rows`, `note`",
        ),
        (
            r#"{"tables": [{"title": "t", "rows": []}]}"#,
            "missing field `columns`",
        ),
        (
            r#"{"tables": [{"title": "Ablation", "columns": ["a", "b"], "rows": [["1", "2", "3"]]}]}"#,
            "tables[0] \"Ablation\": rows[0] has 3 cells, expected at most 2 (one per column)",
        ),
    ];
    for (json, reason) in cases {
        write(&dir, EXTRAS_FILE, json.as_bytes());
        let err = read_extras(&dir).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{file}: ")), "{err}");
        assert!(err.contains(reason), "{json}: {err}");
    }
}

/// What `stormbreak replay` saves (every field set) reads back as it was.
#[test]
fn extras_as_written_read_back() {
    let dir = scratch("extras-round-trip");
    let extras = ReportExtras {
        title: Some("GitHub 2026-08-17".into()),
        description: Some("replayed".into()),
        tables: vec![
            Table {
                title: "Headline figures".into(),
                columns: vec!["figure".into(), "as happened".into(), "published".into()],
                rows: vec![vec!["web/API peak".into(), "20%".into(), "≈ 20%".into()]],
                note: Some("n".into()),
            },
            Table {
                title: "Assumptions".into(),
                columns: vec!["where".into(), "assumption".into()],
                rows: vec![vec!["scenario".into()]],
                note: None,
            },
        ],
    };
    write_extras(&dir, &extras).unwrap();
    assert_eq!(read_extras(&dir).unwrap(), Some(extras));
}
