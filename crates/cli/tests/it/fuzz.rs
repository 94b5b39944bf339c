//! A deterministic fuzz harness over the real binary (issue 10).
//!
//! Seed scenarios — the docs' example, the 100 k benchmark, the GitHub
//! replay scenario and the small hand-written ones in `tests/fuzz_cases/` —
//! are shortened to at most two simulated minutes, then mutated by a seeded
//! PCG: numbers replaced by hostile values (0, -1, 1e-300, 1e308, 2³², NaN,
//! …), durations by `"1ns"` or centuries, rates by `1e-12/s` or `1e308/s`,
//! names swapped so references dangle or form cycles, lines deleted, tables
//! duplicated, the file truncated, garbage bytes inserted. Each mutant runs
//! as `stormbreak simulate FILE --out DIR --scale S` in a subprocess bounded
//! to about 2 GB of address space and a 20 s hang guard (see
//! `fuzz_cases/bounded.rs`).
//!
//! A case passes when the binary finishes (exit 0) or refuses the input
//! with an error that is not a panic and names the file. It fails on a
//! panic, a death by signal (an allocation failure under the memory bound
//! aborts), or the hang guard. Failing inputs are written to
//! `target/fuzz-failures/` with their mutations and stderr.
//!
//! Everything derives from [`FUZZ_SEED`] and the case number, so a failure
//! reproduces exactly: `STORMBREAK_FUZZ_CASE=N` runs case N alone, and
//! `STORMBREAK_FUZZ_CASES=K` runs K cases instead of [`CASES`] (e.g. a long
//! soak run).

use crate::bounded;

use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use bounded::{HANG_GUARD, TempDir, Verdict, run_bounded};

/// The fixed seed every mutant derives from. Change it only on purpose:
/// failures reported against a seed reproduce only with that seed.
const FUZZ_SEED: u64 = 0x5702_b4ea_0010_f022;

/// Mutants per run. An unmutated seed runs in well under a second and most
/// mutants are refused in milliseconds: on 2 cores the cases that pass
/// take about 27 s of wall time together (measured 2026-12-01), inside the
/// harness's 60 s budget. Each case the hang guard kills adds up to 10 s.
const CASES: usize = 240;

/// Cases run on this many threads (the CI machine has 2 cores).
const THREADS: usize = 2;

/// Simulated run length the seeds are shortened to.
const MAX_DURATION_NS: u64 = 120 * 1_000_000_000;

/// A seed scenario and the `--scale` it runs at (chosen so an unmutated run
/// offers at most ~1 000 requests/s and takes well under a second).
struct Seed {
    label: &'static str,
    text: String,
    scale: f64,
}

fn seeds() -> Vec<Seed> {
    let docs = include_str!("../../../../docs/scenarios.md");
    let example = docs
        .split("## The smallest useful scenario")
        .nth(1)
        .and_then(|s| s.split("```toml\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("docs/scenarios.md still has its smallest-scenario example in a ```toml block");
    let raw: [(&'static str, &str, f64); 6] = [
        ("docs-example", example, 0.1),
        (
            "metastable-100k",
            include_str!("../../../../benches/scenarios/metastable-100k.toml"),
            0.01,
        ),
        (
            "github-2026-08-17",
            include_str!("../../../../scenarios/github-2026-08-17.toml"),
            0.01,
        ),
        ("gateways", include_str!("fuzz_cases/gateways.toml"), 1.0),
        ("failover", include_str!("fuzz_cases/failover.toml"), 1.0),
        (
            "fanout-jobs",
            include_str!("fuzz_cases/fanout-jobs.toml"),
            1.0,
        ),
    ];
    raw.into_iter()
        .map(|(label, text, scale)| Seed {
            label,
            text: shorten(text),
            scale,
        })
        .collect()
}

// ------------------------------------------------------------------- PCG

/// PCG-XSH-RR 64/32 (O'Neill 2014), written out so the harness needs no
/// dependency and its sequence can never change under a crate upgrade.
struct Pcg32 {
    state: u64,
    inc: u64,
}

impl Pcg32 {
    fn new(seed: u64, stream: u64) -> Pcg32 {
        let mut p = Pcg32 {
            state: 0,
            inc: (stream << 1) | 1,
        };
        p.next_u32();
        p.state = p.state.wrapping_add(seed);
        p.next_u32();
        p
    }

    fn next_u32(&mut self) -> u32 {
        let old = self.state;
        self.state = old
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(self.inc);
        let xorshifted = (((old >> 18) ^ old) >> 27) as u32;
        let rot = (old >> 59) as u32;
        xorshifted.rotate_right(rot)
    }

    /// Uniform in `0..n` (n > 0); the tiny modulo bias does not matter here.
    fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        (self.next_u32() as usize) % n
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

// ----------------------------------------------------------------- lexing

/// What kind of value a [`Site`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    Num,
    Bool,
}

/// A scalar value in the TOML text: which table and key it belongs to (for
/// array elements, the array's key) and its byte range (quotes included).
#[derive(Debug, Clone)]
struct Site {
    header: String,
    key: String,
    range: Range<usize>,
    kind: Kind,
}

impl Site {
    /// The value without its quotes.
    fn content<'a>(&self, text: &'a str) -> &'a str {
        let raw = &text[self.range.clone()];
        if self.kind == Kind::Str {
            &raw[1..raw.len() - 1]
        } else {
            raw
        }
    }
}

/// A `[[array.table]]` header and the byte range of its block (up to the
/// next header).
#[derive(Debug, Clone)]
struct Table {
    name: String,
    block: Range<usize>,
}

/// A small TOML scanner: just enough of the grammar (bare keys, basic
/// strings, numbers, booleans, inline tables and arrays, comments, table
/// headers) to find the values of the seed files. It never fails: on a
/// mutant it has already damaged it finds what it can.
fn lex(text: &str) -> (Vec<Site>, Vec<Table>) {
    let b = text.as_bytes();
    let mut sites = Vec::new();
    let mut headers: Vec<(String, usize, bool)> = Vec::new();
    let mut header = String::new();
    let mut key = String::new();
    // Open brackets: (is an array, the key it is the value of).
    let mut stack: Vec<(bool, String)> = Vec::new();
    let mut prev = b'\n';
    let mut i = 0;
    let delim = |c: u8| c.is_ascii_whitespace() || b",]}=#[{\"".contains(&c);
    while i < b.len() {
        let c = b[i];
        let in_array = stack.last().is_some_and(|(a, _)| *a);
        let value_key = || match stack.last() {
            Some((true, k)) => k.clone(),
            _ => key.clone(),
        };
        let value_position = prev == b'=' || (in_array && (prev == b'[' || prev == b','));
        match c {
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\n' => {
                if stack.is_empty() {
                    prev = b'\n';
                }
            }
            c if c.is_ascii_whitespace() => {}
            b'[' if stack.is_empty() && prev == b'\n' => {
                let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
                let line = text[i..end].split('#').next().unwrap_or("").trim();
                let array = line.starts_with("[[");
                header = line
                    .trim_matches(|c| c == '[' || c == ']')
                    .trim()
                    .to_owned();
                headers.push((header.clone(), i, array));
                i = end;
                continue;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' && b[j] != b'\n' {
                    if b[j] == b'\\' {
                        j += 1;
                    }
                    j += 1;
                }
                let end = (j + 1).min(b.len());
                if value_position && j < b.len() && b[j] == b'"' {
                    sites.push(Site {
                        header: header.clone(),
                        key: value_key(),
                        range: i..end,
                        kind: Kind::Str,
                    });
                }
                prev = b'"';
                i = end;
                continue;
            }
            b'[' | b'{' => {
                stack.push((c == b'[', value_key()));
                prev = c;
            }
            b']' | b'}' => {
                stack.pop();
                prev = c;
            }
            b'=' | b',' => prev = c,
            _ => {
                let mut j = i;
                while j < b.len() && !delim(b[j]) {
                    j += 1;
                }
                let j = j.max(i + 1);
                let token = &text[i..j];
                let next = text[j..].trim_start_matches([' ', '\t']).bytes().next();
                if next == Some(b'=') {
                    key = token.to_owned();
                } else if value_position {
                    let kind = if token == "true" || token == "false" {
                        Kind::Bool
                    } else {
                        Kind::Num
                    };
                    sites.push(Site {
                        header: header.clone(),
                        key: value_key(),
                        range: i..j,
                        kind,
                    });
                }
                prev = b'a';
                i = j;
                continue;
            }
        }
        i += 1;
    }
    let mut tables = Vec::new();
    for (n, (name, start, array)) in headers.iter().enumerate() {
        if *array {
            let end = headers.get(n + 1).map_or(text.len(), |h| h.1);
            tables.push(Table {
                name: name.clone(),
                block: *start..end,
            });
        }
    }
    (sites, tables)
}

/// Nanoseconds of a duration string (`"7h47m"`, `"250ms"`, `"0"`), or None.
/// The harness's own reading, used to shorten seeds and to tell durations
/// from names; it need not match the simulator's on odd inputs.
fn duration_ns(s: &str) -> Option<u64> {
    if s == "0" {
        return Some(0);
    }
    let mut rest = s;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let n = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        if n == 0 {
            return None;
        }
        let v: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "ns" => 1e0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "d" => 86400e9,
            _ => return None,
        };
        total += v * scale;
        rest = &rest[u..];
    }
    Some(total as u64)
}

/// Replaces `range` of `text` with `with`.
fn splice(text: &str, range: Range<usize>, with: &str) -> String {
    let mut out = String::with_capacity(text.len() + with.len());
    out.push_str(&text[..range.start]);
    out.push_str(with);
    out.push_str(&text[range.end..]);
    out
}

/// Shortens a seed to at most [`MAX_DURATION_NS`] of simulated time, with
/// its timeline (`at`, and the `ramp` of rate steps) compressed alike so
/// that actions stay inside the run and steps in order, and its SLO
/// windows and job waits too, so none is longer than the run.
fn shorten(text: &str) -> String {
    let (sites, _) = lex(text);
    let Some(d) = sites
        .iter()
        .find(|s| s.header == "scenario" && s.key == "duration")
    else {
        return text.to_owned();
    };
    let Some(old) = duration_ns(d.content(text)) else {
        return text.to_owned();
    };
    if old <= MAX_DURATION_NS {
        return text.to_owned();
    }
    let factor = MAX_DURATION_NS as f64 / old as f64;
    let interval = sites
        .iter()
        .find(|s| s.header == "scenario" && s.key == "interval")
        .and_then(|s| duration_ns(s.content(text)))
        .unwrap_or(1_000_000_000);
    let mut out = text.to_owned();
    // Back to front, so earlier ranges stay valid.
    for s in sites.iter().rev() {
        let new = if std::ptr::eq(s, d) {
            Some(format!("\"{MAX_DURATION_NS}ns\""))
        } else if s.kind == Kind::Str
            && s.header == "slo"
            && (s.key == "window" || s.key == "job_wait")
        {
            // Compressed alike, but an SLO window spans at least one
            // recording interval.
            duration_ns(s.content(text))
                .map(|v| format!("\"{}ns\"", ((v as f64 * factor) as u64).max(interval)))
        } else if s.kind == Kind::Str && (s.key == "at" || s.key == "ramp") {
            // Rounding down keeps `at + ramp` of a step ≤ the next `at`.
            duration_ns(s.content(text))
                .map(|v| format!("\"{}ns\"", (v as f64 * factor).floor() as u64))
        } else {
            None
        };
        if let Some(new) = new {
            out = splice(&out, s.range.clone(), &new);
        }
    }
    out
}

// -------------------------------------------------------------- mutation

/// Values for a number: zero, negative, denormal-small, near-overflow, past
/// `u32`, the `u32`/`i32` edges, huge counts, non-finite.
const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1e-300",
    "1e308",
    "4294967296",
    "4294967295",
    "2147483648",
    "100000000",
    "1000000000",
    "nan",
    "-inf",
    "0.5",
    "18446744073709551615",
];

/// Values for a duration (not the run's length; see [`RUN_LENGTHS`]).
const DURATIONS: &[&str] = &[
    "\"1ns\"",
    "\"0\"",
    "\"0.4ns\"",
    "\"1us\"",
    "\"200000d\"",
    "\"213504d\"",
    "\"99999h\"",
    "0",
    "1",
    "\"-1s\"",
];

/// Values for `[scenario] duration`: only short or invalid ones, so a
/// mutant's run stays within the harness's budget (a legitimately long run
/// is not a bug, and would only trip the hang guard).
const RUN_LENGTHS: &[&str] = &["\"1ns\"", "\"0\"", "\"1s\"", "\"0.4ns\"", "\"10s\""];

/// Values for a rate.
const RATES: &[&str] = &[
    "\"1e-12/s\"",
    "\"0/s\"",
    "\"1e12/s\"",
    "\"1e308/s\"",
    "\"1.8e308/s\"",
    "\"4294967296/s\"",
    "1e308",
    "1e-300",
    "nan",
    "-1",
    "\"5/ms\"",
];

/// `--scale` values tried now and then instead of the seed's.
const SCALES: &[f64] = &[1e-15, 1e-9, 1e-3];

/// Keys whose string values are names or references to names.
const NAME_KEYS: &[&str] = &[
    "name",
    "route",
    "dependency",
    "failover_route",
    "path",
    "target",
    "lb",
    "client",
    "clients",
    "primary",
    "secondary",
    "site",
    "sites",
];

/// Which kind of name a key holds, so a swap within a namespace makes a
/// reference that type-checks but points elsewhere (a dependency that
/// passes through its own gateway: a cycle), and one across namespaces a
/// dangling or ill-typed one.
fn namespace(header: &str, key: &str) -> &'static str {
    match (header, key) {
        ("lb" | "gateway" | "service", "name") => "component",
        (_, "path" | "lb" | "primary" | "secondary") => "component",
        ("route", "name") => "route",
        (_, "route" | "dependency" | "failover_route") => "route",
        ("client", "name") => "client",
        (_, "client" | "clients" | "target") => "client",
        _ => "other",
    }
}

/// One generated case.
struct Mutant {
    seed: usize,
    bytes: Vec<u8>,
    scale: f64,
    /// What was done, in order, for the failure report.
    log: Vec<String>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Applies one text mutation; returns None when the seed offers no target
/// for the chosen kind (the caller then tries another).
fn mutate_text(rng: &mut Pcg32, text: &str) -> Option<(String, String)> {
    let (sites, tables) = lex(text);
    let kind = rng.below(100);
    let of = |pred: &dyn Fn(&Site) -> bool| -> Vec<Site> {
        sites.iter().filter(|s| pred(s)).cloned().collect()
    };
    let is_duration = |s: &Site| s.kind == Kind::Str && duration_ns(s.content(text)).is_some();
    let is_rate = |s: &Site| {
        s.kind == Kind::Str && s.content(text).contains('/')
            || s.key == "rate" && s.kind == Kind::Num
    };
    let describe = |s: &Site, new: &str| {
        format!(
            "line {}: [{}] {} = {} → {}",
            line_of(text, s.range.start),
            s.header,
            s.key,
            &text[s.range.clone()],
            new
        )
    };
    match kind {
        // A number.
        0..=24 => {
            let nums = of(&|s| s.kind == Kind::Num && !is_rate(s));
            if nums.is_empty() {
                return None;
            }
            let s = rng.pick(&nums).clone();
            let new = *rng.pick(NUMBERS);
            Some((splice(text, s.range.clone(), new), describe(&s, new)))
        }
        // A duration.
        25..=41 => {
            let durs = of(&is_duration);
            if durs.is_empty() {
                return None;
            }
            let s = rng.pick(&durs).clone();
            let pool = if s.header == "scenario" && s.key == "duration" {
                RUN_LENGTHS
            } else {
                DURATIONS
            };
            let new = *rng.pick(pool);
            Some((splice(text, s.range.clone(), new), describe(&s, new)))
        }
        // A rate.
        42..=51 => {
            let rates = of(&is_rate);
            if rates.is_empty() {
                return None;
            }
            let s = rng.pick(&rates).clone();
            let new = *rng.pick(RATES);
            Some((splice(text, s.range.clone(), new), describe(&s, new)))
        }
        // A name: within its namespace (two in three) or from anywhere.
        52..=71 => {
            let names = of(&|s| s.kind == Kind::Str && NAME_KEYS.contains(&s.key.as_str()));
            if names.len() < 2 {
                return None;
            }
            let s = rng.pick(&names).clone();
            let ns = namespace(&s.header, &s.key);
            let old = s.content(text);
            let same: Vec<&Site> = names
                .iter()
                .filter(|o| namespace(&o.header, &o.key) == ns && o.content(text) != old)
                .collect();
            let new = if !same.is_empty() && rng.chance(67) {
                rng.pick(&same).content(text).to_owned()
            } else if rng.chance(80) {
                rng.pick(&names).content(text).to_owned()
            } else {
                rng.pick(&["", "nowhere", "../x"]).to_string()
            };
            let new = format!("\"{new}\"");
            Some((splice(text, s.range.clone(), &new), describe(&s, &new)))
        }
        // A line deleted.
        72..=83 => {
            let mut starts = vec![0];
            starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
            let lines: Vec<Range<usize>> = starts
                .iter()
                .map(|&s| s..text[s..].find('\n').map_or(text.len(), |n| s + n + 1))
                .filter(|r| {
                    let l = text[r.clone()].trim();
                    !l.is_empty() && !l.starts_with('#')
                })
                .collect();
            if lines.is_empty() {
                return None;
            }
            let r = rng.pick(&lines).clone();
            let what = format!(
                "line {} deleted: {}",
                line_of(text, r.start),
                text[r.clone()].trim()
            );
            Some((splice(text, r, ""), what))
        }
        // A `[[table]]` duplicated in place.
        _ => {
            if tables.is_empty() {
                return None;
            }
            let t = rng.pick(&tables).clone();
            let mut block = text[t.block.clone()].to_owned();
            if !block.ends_with('\n') {
                block.push('\n');
            }
            let mut out = text[..t.block.end].to_owned();
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&block);
            out.push_str(&text[t.block.end..]);
            let what = format!(
                "[[{}]] at line {} duplicated",
                t.name,
                line_of(text, t.block.start)
            );
            Some((out, what))
        }
    }
}

/// Bytes a garbage insertion draws from: NUL, invalid and partial UTF-8,
/// and TOML's structural characters.
const GARBAGE: &[u8] = b"\0\xff\xc3\xe2\"[]{}=\n#\\,.x9- \t'";

/// Builds case `case` from the seeds, deterministically.
fn mutant(case: usize, seeds: &[Seed]) -> Mutant {
    let mut rng = Pcg32::new(FUZZ_SEED, case as u64);
    let seed = case % seeds.len();
    let mut text = seeds[seed].text.clone();
    let mut log = Vec::new();
    // One mutation usually, sometimes two or three (compound damage finds
    // what a single change cannot, e.g. two swapped dependencies A→B→A).
    let count = *rng.pick(&[1, 1, 1, 2, 2, 3]);
    let mut tries = 0;
    while log.len() < count && tries < 50 {
        tries += 1;
        if let Some((t, what)) = mutate_text(&mut rng, &text) {
            text = t;
            log.push(what);
        }
    }
    let mut bytes = text.into_bytes();
    // Byte-level damage last: after it the text may not even be UTF-8.
    match rng.below(100) {
        0..=5 => {
            let at = rng.below(bytes.len().max(1));
            bytes.truncate(at);
            log.push(format!("truncated to {at} bytes"));
        }
        6..=11 => {
            let at = rng.below(bytes.len() + 1);
            let junk: Vec<u8> = (0..1 + rng.below(8)).map(|_| *rng.pick(GARBAGE)).collect();
            log.push(format!("garbage {junk:?} inserted at byte {at}"));
            bytes.splice(at..at, junk);
        }
        _ => {}
    }
    let mut scale = seeds[seed].scale;
    if rng.chance(4) {
        scale = *rng.pick(SCALES);
        log.push(format!("--scale {scale}"));
    }
    Mutant {
        seed,
        bytes,
        scale,
        log,
    }
}

// ----------------------------------------------------------------- running

struct Outcome {
    case: usize,
    verdict: Result<Verdict, String>,
    stderr_tail: String,
    /// Wall time, reported (for tuning [`CASES`]), never asserted on.
    elapsed: std::time::Duration,
}

fn run_case(case: usize, m: &Mutant, work: &Path) -> Outcome {
    let dir = work.join(format!("case-{case}"));
    std::fs::create_dir_all(&dir).expect("case dir");
    let file = dir.join("scenario.toml");
    std::fs::write(&file, &m.bytes).expect("write mutant");
    let scale = m.scale.to_string();
    let out = dir.join("out");
    let args: [&std::ffi::OsStr; 7] = [
        "simulate".as_ref(),
        file.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
        "--scale".as_ref(),
        scale.as_ref(),
        "--quiet".as_ref(),
    ];
    let run = run_bounded(&args, &dir, HANG_GUARD);
    let verdict = run.judge(&file);
    let _ = std::fs::remove_dir_all(&dir);
    Outcome {
        case,
        verdict,
        stderr_tail: run.stderr_tail(8),
        elapsed: run.elapsed,
    }
}

/// Where failing inputs are kept: `target/fuzz-failures/`.
fn failures_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is target/tmp")
        .join("fuzz-failures")
}

// Found, before the scenario caps and the run bounds: huge replicas / LB
// nodes (allocation failure, an overflow in the recorder), rates of 1e12/s
// and 1e308/s (hang or allocation failure) and a 1 ns interval.
#[test]
fn mutated_scenarios_never_panic_abort_or_hang() {
    let started = Instant::now();
    let seeds = seeds();
    let only: Option<usize> = std::env::var("STORMBREAK_FUZZ_CASE")
        .ok()
        .map(|s| s.parse().expect("STORMBREAK_FUZZ_CASE: a case number"));
    let count: usize = std::env::var("STORMBREAK_FUZZ_CASES")
        .ok()
        .map_or(CASES, |s| {
            s.parse().expect("STORMBREAK_FUZZ_CASES: a count")
        });
    let cases: Vec<usize> = match only {
        Some(n) => vec![n],
        None => (0..count).collect(),
    };
    let work = TempDir::new("fuzz");
    // Failures of an earlier run must not be mistaken for this run's.
    let _ = std::fs::remove_dir_all(failures_dir());

    // The unmutated (shortened) seeds must run to the end: otherwise every
    // mutant would only exercise the parser's first error, and the harness
    // would pass without testing the engine at all.
    for (i, s) in seeds.iter().enumerate() {
        let dir = work.path().join(format!("seed-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!("{}.toml", s.label));
        std::fs::write(&file, &s.text).unwrap();
        let scale = s.scale.to_string();
        let out = dir.join("out");
        let args = [
            "simulate".as_ref(),
            file.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
            "--scale".as_ref(),
            std::ffi::OsStr::new(&scale),
            "--quiet".as_ref(),
        ];
        let run = run_bounded(&args, &dir, HANG_GUARD);
        assert_eq!(
            run.judge(&file),
            Ok(Verdict::Ran),
            "seed {} must run cleanly before it is mutated:\n{}",
            s.label,
            run.stderr_tail(8)
        );
    }

    let mutants: Vec<Mutant> = cases.iter().map(|&c| mutant(c, &seeds)).collect();
    let next = AtomicUsize::new(0);
    let outcomes = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..THREADS {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(m) = mutants.get(i) else { break };
                    let o = run_case(cases[i], m, work.path());
                    outcomes.lock().unwrap().push((i, o));
                }
            });
        }
    });
    let mut outcomes = outcomes.into_inner().unwrap();
    outcomes.sort_by_key(|(i, _)| *i);

    let ran = outcomes
        .iter()
        .filter(|(_, o)| o.verdict == Ok(Verdict::Ran))
        .count();
    let refused = outcomes
        .iter()
        .filter(|(_, o)| o.verdict == Ok(Verdict::Refused))
        .count();
    let failed: Vec<&(usize, Outcome)> = outcomes
        .iter()
        .filter(|(_, o)| o.verdict.is_err())
        .collect();
    println!(
        "fuzz: {} cases from {} seeds (seed {FUZZ_SEED:#x}): {} ok ({ran} ran, {refused} refused), \
         {} failed, {:.1} s",
        outcomes.len(),
        seeds.len(),
        ran + refused,
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    let mut slowest: Vec<&(usize, Outcome)> = outcomes.iter().collect();
    slowest.sort_by_key(|(_, o)| std::cmp::Reverse(o.elapsed));
    let slowest: Vec<String> = slowest
        .iter()
        .take(3)
        .map(|(_, o)| format!("case {} {:.1} s", o.case, o.elapsed.as_secs_f64()))
        .collect();
    println!("fuzz: slowest {}", slowest.join(", "));
    if failed.is_empty() {
        return;
    }
    let dir = failures_dir();
    std::fs::create_dir_all(&dir).expect("create target/fuzz-failures");
    let mut report = String::new();
    for (i, o) in &failed {
        let m = &mutants[*i];
        let seed = &seeds[m.seed];
        let stem = format!("case-{}-{}", o.case, seed.label);
        let input = dir.join(format!("{stem}.toml"));
        std::fs::write(&input, &m.bytes).expect("write failing input");
        let mut text = format!(
            "case {} (seed {}, --scale {}): {}\n",
            o.case,
            seed.label,
            m.scale,
            o.verdict.as_ref().unwrap_err()
        );
        for what in &m.log {
            let _ = writeln!(text, "  mutation: {what}");
        }
        let _ = writeln!(
            text,
            "  reproduce: {} simulate {} --out /tmp/x --scale {} --quiet\n  \
             (or STORMBREAK_FUZZ_CASE={} cargo test -p stormbreak --test fuzz)",
            bounded::binary(),
            input.display(),
            m.scale,
            o.case
        );
        for line in o.stderr_tail.lines() {
            let _ = writeln!(text, "  stderr: {line}");
        }
        std::fs::write(dir.join(format!("{stem}.txt")), &text).expect("write failure notes");
        report.push_str(&text);
    }
    panic!(
        "{} of {} fuzz cases failed (inputs in {}):\n{report}",
        failed.len(),
        outcomes.len(),
        dir.display()
    );
}

/// The scanner finds what the mutations target in every seed; if it
/// silently found nothing, the harness would mutate only lines and bytes.
#[test]
fn the_scanner_finds_values_in_every_seed() {
    for s in seeds() {
        let (sites, tables) = lex(&s.text);
        let count = |k: Kind| sites.iter().filter(|x| x.kind == k).count();
        assert!(count(Kind::Num) >= 2, "{}: numbers", s.label);
        assert!(count(Kind::Str) >= 5, "{}: strings", s.label);
        assert!(!tables.is_empty(), "{}: [[tables]]", s.label);
        let dur = sites
            .iter()
            .find(|x| x.header == "scenario" && x.key == "duration")
            .unwrap_or_else(|| panic!("{}: [scenario] duration", s.label));
        assert!(
            duration_ns(dur.content(&s.text)).unwrap() <= MAX_DURATION_NS,
            "{}: shortened",
            s.label
        );
        assert!(
            sites
                .iter()
                .any(|x| x.header == "route" && x.key == "path" && x.kind == Kind::Str),
            "{}: route path elements",
            s.label
        );
    }
}

/// Mutants are a pure function of the case number (a failure reproduces).
#[test]
fn mutants_are_deterministic() {
    let seeds = seeds();
    for case in [0, 7, 123] {
        let (a, b) = (mutant(case, &seeds), mutant(case, &seeds));
        assert_eq!(a.bytes, b.bytes);
        assert_eq!(a.log, b.log);
    }
}
