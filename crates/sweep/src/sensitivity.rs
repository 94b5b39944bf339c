//! Sensitivity of the built-in replay's verdict to its ASSUMPTION numbers
//! (`stormbreak replay --sensitivity`).
//!
//! The replay's scenario (`scenarios/github-2026-08-17.toml`) marks every
//! number the incident reports do not give with an `# ASSUMPTION` comment.
//! This module finds those numbers on the TOML document itself (the
//! [`path`](crate::path) grammar of sweeps, so an assumption is named like
//! an axis: `service.auth-cus.app.service_time.mean`), varies each one at
//! a time by the [`Change`]s asked for, and runs every variant as it
//! happened and with all five follow-ups, on each seed asked for. Per
//! variant it reports whether the as-it-happened run stays metastable,
//! which headline figures leave their bands ([`replay::BANDS`]), and
//! whether the fixed run still recovers.
//!
//! # Which numbers count as assumptions
//!
//! The rule is mechanical, so a new `# ASSUMPTION` in the scenario is
//! picked up without a code change, and the two explicit tables below say
//! where it is corrected:
//!
//! 1. every non-zero number (integer, float, duration or rate string) of a
//!    scenario element (`[[lb]]`, `[[service]]`, `[[client]]`,
//!    `[[action]]`, …) whose comment block — the comments directly above
//!    it — contains `ASSUMPTION`, including numbers inside its inline
//!    tables and lists of inline tables (`step.1.rate`); lists of plain
//!    numbers (a ramp's steps) are a schedule and are not varied; zero is
//!    not varied (±x% of nothing is nothing);
//! 2. plus [`ADDED`]: numbers an ASSUMPTION comment covers although they
//!    sit in a later element (the rates of every client, stated once);
//! 3. minus [`EXCLUDED`]: numbers in a marked element that are facts, or
//!    not model quantities, each with its reason.
//!
//! An assumption in [`LINKED`] elements is varied on all of them at once
//! (the three editor sites share one client model), each from its own
//! base value.
//!
//! # Determinism
//!
//! Runs go to any number of threads through [`stormbreak_sim::parallel::map_in_order`]
//! and come back in job order; nothing in the outputs depends on the
//! thread count or the wall clock.

use serde::Serialize;
use serde_json::json;
use stormbreak_sim::Scenario;
use stormbreak_sim::engine::{Engine, RunOptions};
use stormbreak_sim::replay::{self, Fix, Headline};
use toml_edit::{DocumentMut, Item, Table, Value};

use crate::path::FieldPath;
use crate::value::{Kind, display, tidy};
use stormbreak_sim::parallel::map_in_order;

/// The comment word that marks an assumption.
pub const MARK: &str = "ASSUMPTION";

/// The JSON schema of `sensitivity.json`.
pub const SCHEMA: &str = "stormbreak.replay-sensitivity/1";

/// The output file's name.
pub const FILE: &str = "sensitivity.json";

/// Numbers an ASSUMPTION comment covers outside the element it sits on,
/// with the comment that covers them.
pub const ADDED: &[(&str, &str)] = &[
    ("client.browsers-nva.rate", "ASSUMPTION (all rates)"),
    ("client.api-clients-nva.rate", "ASSUMPTION (all rates)"),
    ("client.git-clients.rate", "ASSUMPTION (all rates)"),
    ("client.sso-users.rate", "ASSUMPTION (all rates)"),
    ("client.scim-sync.rate", "ASSUMPTION (all rates)"),
    (
        "client.actions-workflow-defs.rate",
        "ASSUMPTION (all rates)",
    ),
    ("client.archive-users.rate", "ASSUMPTION (all rates)"),
    ("client.scrapers.rate", "ASSUMPTION (all rates)"),
];

/// Numbers of marked elements that are not assumptions (`*` matches any
/// one part), with the reason.
pub const EXCLUDED: &[(&str, &str)] = &[
    (
        "scenario.*",
        "the run's frame (length, recording interval, seed), not the model; the file's header mentions ASSUMPTION",
    ),
    (
        "lb.haproxy-cus.nodes",
        "fact: four HAProxy nodes exhausted their flows",
    ),
    (
        "client.*.step.0.at",
        "fact: the traffic peak starts at 13:28",
    ),
    (
        "client.*.step.1.rate",
        "the peak's end: back to the client's normal `rate`, which is varied itself",
    ),
    (
        "service.web-cus.replicas",
        "100 small pods is a modelling device (one whole pod at --scale 0.01); capacity varies through workers and service time",
    ),
    (
        "service.codeload-cus.replicas",
        "100 small pods is a modelling device; capacity varies through workers and service time",
    ),
    (
        "service.token-cus.replicas",
        "100 small pods is a modelling device; capacity varies through workers and service time",
    ),
    (
        "service.web-api-nva.replicas",
        "100 small pods is a modelling device; capacity varies through workers and service time",
    ),
    (
        "action.*.*",
        "operator actions come after 14:28: they cannot change whether the run is metastable (read at 14:28) nor --fixed (which drops them); they shape the paths' recovery times only",
    ),
    ("action.*.*.*", "operator actions (as above)"),
    ("action.*.*.*.*", "operator actions (as above)"),
];

/// Elements varied together: an assumption of the first is applied to the
/// same field of the others (each from its own value).
pub const LINKED: &[(&str, &[&str])] = &[(
    "client.editors-a",
    &["client.editors-b", "client.editors-c"],
)];

/// Most assumptions one run of the analysis accepts (the scenario has
/// about fifty; the bound keeps a hostile file from planning millions of
/// runs).
pub const MAX_ASSUMPTIONS: usize = 500;
/// Most seeds.
pub const MAX_SEEDS: usize = 100;
/// Most changes per assumption.
pub const MAX_CHANGES: usize = 16;

/// One assumption: a number the scenario marks, addressed by its path.
#[derive(Debug, Clone, Serialize)]
pub struct Assumption {
    /// The path, as `--only` takes it.
    pub name: String,
    /// Its value in the file, as written.
    pub base: String,
    /// Fields varied with it (from [`LINKED`]).
    pub linked: Vec<String>,
    #[serde(skip)]
    kind: Kind,
    #[serde(skip)]
    number: f64,
}

/// A relative change of an assumption: `-25%`, `+10%`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change(pub f64);

impl Change {
    /// The default changes: ±10% and ±25%.
    pub const DEFAULT: [Change; 4] = [Change(-0.25), Change(-0.10), Change(0.10), Change(0.25)];

    /// Parses `+10%`, `-25%`, `10%` (−90% to +900%, not 0).
    pub fn parse(s: &str) -> Result<Change, String> {
        let bad =
            || format!("expected a change such as -25% or +10% (−90% to +900%, not 0), got {s:?}");
        let n: f64 = s
            .trim()
            .strip_suffix('%')
            .ok_or_else(bad)?
            .trim_start_matches('+')
            .parse()
            .map_err(|_| bad())?;
        if !n.is_finite() || n == 0.0 || !(-90.0..=900.0).contains(&n) {
            return Err(bad());
        }
        Ok(Change(n / 100.0))
    }

    /// Parses a comma-separated list (duplicates removed, order kept).
    pub fn parse_list(s: &str) -> Result<Vec<Change>, String> {
        let mut out: Vec<Change> = Vec::new();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let c = Change::parse(part)?;
            if !out.contains(&c) {
                out.push(c);
            }
        }
        if out.is_empty() || out.len() > MAX_CHANGES {
            return Err(format!(
                "expected 1 to {MAX_CHANGES} changes such as -25%,+10%, got {s:?}"
            ));
        }
        Ok(out)
    }

    /// `-25%`, `+10%`.
    pub fn label(self) -> String {
        format!("{:+}%", tidy(self.0 * 100.0))
    }
}

/// Whether a path's parts match a pattern's (`*` matches one part).
fn matches(pattern: &str, path: &str) -> bool {
    let (p, q): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), path.split('.').collect());
    p.len() == q.len() && p.iter().zip(&q).all(|(a, b)| *a == "*" || a == b)
}

fn marked(t: &Table) -> bool {
    t.decor()
        .prefix()
        .and_then(|p| p.as_str())
        .is_some_and(|p| p.contains(MARK))
}

/// An element's name in a path: its `name`, its `id`, else its index.
fn element_label(t: &Table, i: usize) -> String {
    ["name", "id"]
        .iter()
        .find_map(|k| t.get(k).and_then(Item::as_str).map(str::to_owned))
        .unwrap_or_else(|| i.to_string())
}

fn item_leaves(at: &str, item: &Item, out: &mut Vec<String>) {
    match item {
        Item::Table(t) => {
            for (k, it) in t.iter() {
                item_leaves(&format!("{at}.{k}"), it, out);
            }
        }
        Item::Value(v) => value_leaves(at, v, out),
        _ => {}
    }
}

fn value_leaves(at: &str, v: &Value, out: &mut Vec<String>) {
    match v {
        Value::InlineTable(t) => {
            for (k, v) in t.iter() {
                value_leaves(&format!("{at}.{k}"), v, out);
            }
        }
        Value::Array(a) if a.iter().all(Value::is_inline_table) => {
            for (i, v) in a.iter().enumerate() {
                value_leaves(&format!("{at}.{i}"), v, out);
            }
        }
        Value::Array(_) => {}
        v => {
            if let Ok((kind, Some(n))) = Kind::of(v)
                && kind.numeric()
                && n != 0.0
            {
                out.push(at.to_owned());
            }
        }
    }
}

/// The assumptions of scenario `text`, in the file's order (then
/// [`ADDED`]'s), by the rule of the module docs.
pub fn assumptions(text: &str) -> Result<Vec<Assumption>, String> {
    let doc: DocumentMut = text
        .parse()
        .map_err(|e| format!("the scenario is not TOML: {e}"))?;
    let mut paths = Vec::new();
    for (key, item) in doc.as_table().iter() {
        match item {
            Item::Table(t) if marked(t) => item_leaves(key, item, &mut paths),
            Item::ArrayOfTables(a) => {
                for (i, t) in a.iter().enumerate() {
                    if marked(t) {
                        let at = format!("{key}.{}", element_label(t, i));
                        for (k, it) in t.iter() {
                            item_leaves(&format!("{at}.{k}"), it, &mut paths);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    paths.retain(|p| !EXCLUDED.iter().any(|(pat, _)| matches(pat, p)));
    for (p, _) in ADDED {
        if !paths.iter().any(|q| q == p) {
            paths.push((*p).to_owned());
        }
    }
    // A linked element's own fields are varied through the first one's.
    paths.retain(|p| {
        !LINKED
            .iter()
            .flat_map(|(_, others)| others.iter())
            .any(|o| p.starts_with(&format!("{o}.")))
    });
    if paths.len() > MAX_ASSUMPTIONS {
        return Err(format!(
            "{} assumptions, more than the {MAX_ASSUMPTIONS} this analysis plans for",
            paths.len()
        ));
    }
    paths
        .into_iter()
        .map(|p| {
            let path = FieldPath::parse(&p)?;
            let v = path.get(&doc)?;
            let (kind, number) = Kind::of(v).map_err(|k| format!("{p} is {k}"))?;
            let number = number.ok_or_else(|| format!("{p}: not a number"))?;
            let linked = LINKED
                .iter()
                .filter_map(|(first, others)| {
                    let rest = p.strip_prefix(&format!("{first}."))?;
                    Some(others.iter().map(move |o| format!("{o}.{rest}")))
                })
                .flatten()
                .collect();
            Ok(Assumption {
                name: p,
                base: display(v),
                linked,
                kind,
                number,
            })
        })
        .collect()
}

/// The value `change` makes of `base` for a field of kind `kind`.
/// Integers round to the nearest whole number that differs from the base
/// (a whole step in the change's direction when rounding lands on it).
pub fn changed(kind: Kind, base: f64, change: Change) -> Value {
    let v = base * (1.0 + change.0);
    if kind == Kind::Integer {
        let mut r = v.round();
        if r == base {
            r = base + change.0.signum();
        }
        return kind.write(r);
    }
    kind.write(v)
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The scenario file's name (for errors).
    pub file: String,
    /// Its text.
    pub text: String,
    /// `--scale`.
    pub scale: f64,
    /// Seeds: every variant runs on each.
    pub seeds: Vec<u64>,
    /// Changes applied to each assumption.
    pub changes: Vec<Change>,
    /// Only these assumptions (all when empty).
    pub only: Vec<String>,
}

/// One variant of the scenario: an assumption changed (or none: the base).
#[derive(Debug, Clone)]
struct Variant {
    assumption: Option<usize>,
    change: Option<Change>,
    value: Option<String>,
    text: Result<String, String>,
}

/// The analysis, planned: every variant built and validated.
#[derive(Debug)]
pub struct Plan {
    spec: Spec,
    assumptions: Vec<Assumption>,
    variants: Vec<Variant>,
}

impl Plan {
    /// Finds the assumptions, keeps those in `spec.only`, and builds and
    /// validates every variant's scenario. A variant the scenario refuses
    /// (a value out of its field's range) is kept, with the error, and not
    /// run.
    pub fn new(spec: Spec) -> Result<Plan, String> {
        if spec.seeds.is_empty() || spec.seeds.len() > MAX_SEEDS {
            return Err(format!("expected 1 to {MAX_SEEDS} seeds"));
        }
        let mut all = assumptions(&spec.text)?;
        if !spec.only.is_empty() {
            for name in &spec.only {
                if !all.iter().any(|a| &a.name == name) {
                    return Err(format!(
                        "--only: {name:?} is not an assumption of {}; they are: {}",
                        spec.file,
                        all.iter()
                            .map(|a| a.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
            all.retain(|a| spec.only.contains(&a.name));
        }
        let base = Scenario::parse(&spec.file, &spec.text).map_err(|e| e.to_string())?;
        drop(base);
        let mut variants = vec![Variant {
            assumption: None,
            change: None,
            value: None,
            text: Ok(spec.text.clone()),
        }];
        for (i, a) in all.iter().enumerate() {
            for &c in &spec.changes {
                let value = changed(a.kind, a.number, c);
                let text = edit(&spec.text, a, c).and_then(|t| {
                    Scenario::parse(&spec.file, &t)
                        .map(|_| t)
                        .map_err(|e| e.to_string())
                });
                variants.push(Variant {
                    assumption: Some(i),
                    change: Some(c),
                    value: Some(display(&value)),
                    text,
                });
            }
        }
        Ok(Plan {
            spec,
            assumptions: all,
            variants,
        })
    }

    /// The assumptions analysed.
    pub fn assumptions(&self) -> &[Assumption] {
        &self.assumptions
    }

    /// The simulations to run: per runnable variant, per seed, as it
    /// happened and fixed.
    fn jobs(&self) -> Vec<(usize, u64, bool)> {
        let mut jobs = Vec::new();
        for (v, var) in self.variants.iter().enumerate() {
            if var.text.is_err() {
                continue;
            }
            for &seed in &self.spec.seeds {
                for fixed in [false, true] {
                    jobs.push((v, seed, fixed));
                }
            }
        }
        jobs
    }

    /// How many simulations [`Plan::run`] runs.
    pub fn runs(&self) -> usize {
        self.jobs().len()
    }

    /// Runs everything on `threads` threads; `on_done` after each run.
    pub fn run(&self, threads: usize, on_done: impl Fn() + Sync) -> Result<Report<'_>, String> {
        let jobs = self.jobs();
        let heads = map_in_order(
            threads,
            jobs.clone(),
            |(v, seed, fixed)| {
                let text = self.variants[v].text.as_ref().expect("runnable");
                let mut sc = Scenario::parse(&self.spec.file, text).map_err(|e| e.to_string())?;
                let fixes: &[Fix] = if fixed { &Fix::ALL } else { &[] };
                replay::apply(&mut sc, fixes);
                let rec = Engine::new(
                    &sc,
                    RunOptions {
                        seed: Some(seed),
                        scale: self.spec.scale,
                    },
                )
                .run()
                .map_err(|e| format!("{}: {e}", self.label(v)))?;
                Ok::<_, String>(replay::summarize(&rec, fixes).headline)
            },
            on_done,
        )?;
        let mut by_job = jobs.iter().zip(heads);
        let mut outcomes: Vec<Vec<SeedOutcome>> = vec![Vec::new(); self.variants.len()];
        while let (Some(((v, seed, _), happened)), Some((_, fixed))) =
            (by_job.next(), by_job.next())
        {
            outcomes[*v].push(SeedOutcome {
                seed: *seed,
                metastable: happened.metastable,
                bands_left: replay::bands_left(&happened),
                fixed_recovers: !fixed.metastable,
                happened,
                fixed,
            });
        }
        Ok(Report {
            plan: self,
            outcomes,
        })
    }

    fn label(&self, v: usize) -> String {
        let var = &self.variants[v];
        match (var.assumption, var.change) {
            (Some(a), Some(c)) => format!(
                "{} {} ({})",
                self.assumptions[a].name,
                c.label(),
                var.value.as_deref().unwrap_or("")
            ),
            _ => "the scenario as written".to_owned(),
        }
    }
}

/// The scenario text with assumption `a` changed by `c` (and its linked
/// fields, each from its own value).
fn edit(text: &str, a: &Assumption, c: Change) -> Result<String, String> {
    let mut doc: DocumentMut = text.parse().map_err(|e| format!("{e}"))?;
    let path = FieldPath::parse(&a.name)?;
    path.set(&mut doc, changed(a.kind, a.number, c))?;
    for other in &a.linked {
        let p = FieldPath::parse(other)?;
        let (kind, n) = Kind::of(p.get(&doc)?).map_err(|k| format!("{other} is {k}"))?;
        let n = n.ok_or_else(|| format!("{other}: not a number"))?;
        p.set(&mut doc, changed(kind, n, c))?;
    }
    Ok(doc.to_string())
}

/// One seed's outcome for one variant.
#[derive(Debug, Clone, Serialize)]
pub struct SeedOutcome {
    /// The seed.
    pub seed: u64,
    /// The as-it-happened run is metastable.
    pub metastable: bool,
    /// Keys of the headline bands the as-it-happened run leaves.
    pub bands_left: Vec<&'static str>,
    /// The run with all five follow-ups is not metastable.
    pub fixed_recovers: bool,
    /// The as-it-happened headline.
    pub happened: Headline,
    /// The fixed run's headline.
    pub fixed: Headline,
}

/// The results of a [`Plan`].
#[derive(Debug)]
pub struct Report<'p> {
    plan: &'p Plan,
    outcomes: Vec<Vec<SeedOutcome>>,
}

/// A variant's verdict over its seeds.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// Seeds on which the as-it-happened run is metastable.
    pub metastable_seeds: usize,
    /// Seeds on which the fixed run recovers.
    pub fixed_recovers_seeds: usize,
    /// Bands left on any seed, in [`replay::BANDS`] order.
    pub bands_left: Vec<&'static str>,
    /// Not metastable on some seed, or the fix fails on some seed.
    pub flips: bool,
}

fn verdict(outcomes: &[SeedOutcome]) -> Verdict {
    let n = outcomes.len();
    let metastable_seeds = outcomes.iter().filter(|o| o.metastable).count();
    let fixed_recovers_seeds = outcomes.iter().filter(|o| o.fixed_recovers).count();
    let bands_left = replay::BANDS
        .iter()
        .map(|b| b.key)
        .filter(|k| outcomes.iter().any(|o| o.bands_left.contains(k)))
        .collect();
    Verdict {
        metastable_seeds,
        fixed_recovers_seeds,
        bands_left,
        flips: metastable_seeds < n || fixed_recovers_seeds < n,
    }
}

impl Report<'_> {
    /// Assumption indices, those whose change flips the verdict first,
    /// then those that move most figures out of their bands, then in the
    /// file's order.
    fn order(&self) -> Vec<usize> {
        let score = |a: usize| {
            let vs: Vec<Verdict> = self
                .plan
                .variants
                .iter()
                .enumerate()
                .filter(|(_, v)| v.assumption == Some(a))
                .map(|(i, _)| verdict(&self.outcomes[i]))
                .collect();
            let flips = vs.iter().filter(|v| v.flips).count();
            let bands: usize = vs.iter().map(|v| v.bands_left.len()).sum();
            (flips, bands)
        };
        let mut idx: Vec<usize> = (0..self.plan.assumptions.len()).collect();
        idx.sort_by_key(|&a| {
            let (f, b) = score(a);
            (std::cmp::Reverse(f), std::cmp::Reverse(b), a)
        });
        idx
    }

    fn variants_of(&self, a: usize) -> impl Iterator<Item = (usize, &Variant)> {
        self.plan
            .variants
            .iter()
            .enumerate()
            .filter(move |(_, v)| v.assumption == Some(a))
    }

    /// `sensitivity.json` (schema [`SCHEMA`]).
    pub fn json(&self) -> serde_json::Value {
        let spec = &self.plan.spec;
        let variant = |i: usize, v: &Variant| {
            let a = &self.plan.assumptions[v.assumption.expect("an assumption's")];
            let change = v.change.expect("an assumption's");
            let value = v.value.clone().unwrap_or_default();
            let mut o = json!({
                "change": change.label(),
                "value": value,
                "effective_change": effective(a, &value),
            });
            match &v.text {
                Err(e) => o["refused"] = json!(e),
                Ok(_) => {
                    o["verdict"] = json!(verdict(&self.outcomes[i]));
                    o["seeds"] = json!(self.outcomes[i]);
                }
            }
            o
        };
        json!({
            "schema": SCHEMA,
            "scenario": spec.file,
            "scale": spec.scale,
            "seeds": spec.seeds,
            "changes": spec.changes.iter().map(|c| c.label()).collect::<Vec<_>>(),
            "bands": replay::BANDS.iter().map(|b| json!({"key": b.key, "lo": b.lo, "hi": b.hi})).collect::<Vec<_>>(),
            "rule": {
                "mark": MARK,
                "added": ADDED.iter().map(|(p, why)| json!({"path": p, "why": why})).collect::<Vec<_>>(),
                "excluded": EXCLUDED.iter().map(|(p, why)| json!({"path": p, "why": why})).collect::<Vec<_>>(),
            },
            "baseline": {
                "verdict": verdict(&self.outcomes[0]),
                "seeds": self.outcomes[0],
            },
            "assumptions": self.order().into_iter().map(|a| {
                let asm = &self.plan.assumptions[a];
                json!({
                    "name": asm.name,
                    "base": asm.base,
                    "linked": asm.linked,
                    "variants": self.variants_of(a).map(|(i, v)| variant(i, v)).collect::<Vec<_>>(),
                })
            }).collect::<Vec<_>>(),
        })
    }

    /// The table for standard output (and `docs/replay.md`).
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let spec = &self.plan.spec;
        let n = spec.seeds.len();
        let seeds: Vec<String> = spec.seeds.iter().map(u64::to_string).collect();
        let mut s = format!(
            "Sensitivity of the replay to its assumptions (scale {}, seeds {}; {} assumptions × {} changes)\n",
            spec.scale,
            seeds.join(","),
            self.plan.assumptions.len(),
            spec.changes.len()
        );
        let row = |s: &mut String, cells: [&str; 6]| {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                cells[0], cells[1], cells[2], cells[3], cells[4], cells[5]
            );
        };
        row(
            &mut s,
            [
                "assumption",
                "base",
                "change → value",
                "metastable as it happened",
                "figures out of band",
                "--fixed recovers",
            ],
        );
        row(&mut s, ["---", "---", "---", "---", "---", "---"]);
        let count = |k: usize| {
            if k == n {
                "yes".to_owned()
            } else if k == 0 {
                "**no**".to_owned()
            } else {
                format!("**{k}/{n} seeds**")
            }
        };
        let base = verdict(&self.outcomes[0]);
        let bands = |b: &[&str], outcomes: &[SeedOutcome]| {
            if b.is_empty() {
                "—".to_owned()
            } else {
                b.iter()
                    .map(|k| band_left(k, outcomes))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        row(
            &mut s,
            [
                "(as written)",
                "",
                "",
                &count(base.metastable_seeds),
                &bands(&base.bands_left, &self.outcomes[0]),
                &count(base.fixed_recovers_seeds),
            ],
        );
        for a in self.order() {
            let asm = &self.plan.assumptions[a];
            let mut first = true;
            for (i, v) in self.variants_of(a) {
                let change = v.change.expect("an assumption's");
                let value = v.value.clone().unwrap_or_default();
                let eff = effective(asm, &value);
                let shown = if (eff - change.0).abs() > 0.005 {
                    format!("{} → {value} ({:+.0}%)", change.label(), eff * 100.0)
                } else {
                    format!("{} → {value}", change.label())
                };
                let name = if first {
                    let mut n = format!("`{}`", asm.name);
                    if !asm.linked.is_empty() {
                        n.push_str(" (with the other sites)");
                    }
                    n
                } else {
                    String::new()
                };
                let base = if first {
                    asm.base.clone()
                } else {
                    String::new()
                };
                first = false;
                match &v.text {
                    Err(e) => {
                        let e = e.replace('|', "/");
                        row(&mut s, [&name, &base, &shown, "refused", &e, ""]);
                    }
                    Ok(_) => {
                        let vd = verdict(&self.outcomes[i]);
                        row(
                            &mut s,
                            [
                                &name,
                                &base,
                                &shown,
                                &count(vd.metastable_seeds),
                                &bands(&vd.bands_left, &self.outcomes[i]),
                                &count(vd.fixed_recovers_seeds),
                            ],
                        );
                    }
                }
            }
        }
        s
    }
}

/// How a figure left its band over `outcomes`, for the table: the band's
/// key, an arrow for the side (↑ above, ↓ below) and the farthest value on
/// that side, as `archive_peak_error_rate ↑ 63.2%`. Seeds that left on
/// opposite sides give both.
fn band_left(key: &str, outcomes: &[SeedOutcome]) -> String {
    use std::cmp::Ordering;
    let Some(band) = replay::BANDS.iter().find(|b| b.key == key) else {
        return key.to_owned();
    };
    let side = |o: Ordering| {
        outcomes
            .iter()
            .filter(move |s| band.side(&s.happened) == o)
            .map(|s| band.value(&s.happened))
    };
    let mut out = key.to_owned();
    if let Some(lo) = side(Ordering::Less).reduce(f64::min) {
        out.push_str(&format!(" ↓ {}", band.format(lo)));
    }
    if let Some(hi) = side(Ordering::Greater).reduce(f64::max) {
        out.push_str(&format!(" ↑ {}", band.format(hi)));
    }
    out
}

/// The change the written value really makes (integers round).
fn effective(a: &Assumption, value: &str) -> f64 {
    let v = match a.kind {
        Kind::Integer | Kind::Float => value.parse::<f64>().ok(),
        k => k.parse(value).ok(),
    };
    v.map_or(f64::NAN, |v| tidy(v / a.number - 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        assumptions(replay::SCENARIO_TOML)
            .unwrap()
            .into_iter()
            .map(|a| a.name)
            .collect()
    }

    #[test]
    fn the_replays_assumptions_are_its_marked_numbers() {
        let n = names();
        for want in [
            "service.auth-cus.app.service_time.mean",
            "service.auth-cus.sidecar.limit",
            "lb.haproxy-cus.flows_per_node",
            "service.token-cus.sidecar.queue",
            "client.browsers-cus.step.0.rate",
            "client.editors-a.fanout",
            "client.scrapers.rate",
            "gateway.gateway-cus.timeout",
        ] {
            assert!(n.iter().any(|x| x == want), "{want} missing from {n:?}");
        }
        for not in [
            // Facts, the run's frame, a status code, a zero, linked sites.
            "lb.haproxy-cus.nodes",
            "scenario.duration",
            "client.browsers-cus.step.0.at",
            "action.3.status",
            "action.0.at",
            "action.5.restore.ramp.hold",
            "gateway.gateway-cus.retry.backoff.base",
            "client.editors-b.fanout",
            // An element with no ASSUMPTION comment.
            "service.api-cus.replicas",
        ] {
            assert!(!n.iter().any(|x| x == not), "{not} should not be in {n:?}");
        }
    }

    #[test]
    fn every_explicit_entry_still_names_something() {
        let doc: DocumentMut = replay::SCENARIO_TOML.parse().unwrap();
        for (p, _) in ADDED {
            FieldPath::parse(p).unwrap().get(&doc).unwrap();
        }
        let mut all = Vec::new();
        for (key, item) in doc.as_table().iter() {
            item_leaves(key, item, &mut all);
            if let Item::ArrayOfTables(a) = item {
                for (i, t) in a.iter().enumerate() {
                    let at = format!("{key}.{}", element_label(t, i));
                    for (k, it) in t.iter() {
                        item_leaves(&format!("{at}.{k}"), it, &mut all);
                    }
                }
            }
        }
        for (pat, _) in EXCLUDED {
            assert!(all.iter().any(|p| matches(pat, p)), "{pat} matches nothing");
        }
    }

    #[test]
    fn a_figure_out_of_band_says_its_side_and_farthest_value() {
        let seed = |seed, archive: f64| {
            let h = Headline {
                web_api_peak_error_rate: 0.2,
                archive_peak_error_rate: archive,
                token_arrivals_before_per_s: 8_000.0,
                token_arrivals_peak_per_s: 90_000.0,
                token_demand_per_s: 8_000.0,
                token_demand_peak_per_s: 8_000.0,
                web_api_error_rate_30m_after_trigger: 0.1,
                metastable: true,
                token_storm_from_s: Some(1860.0),
            };
            SeedOutcome {
                seed,
                metastable: true,
                bands_left: replay::bands_left(&h),
                fixed_recovers: true,
                happened: h.clone(),
                fixed: h,
            }
        };
        let key = "archive_peak_error_rate";
        assert_eq!(
            band_left(key, &[seed(1, 0.62), seed(2, 0.5), seed(3, 0.655)]),
            "archive_peak_error_rate ↑ 65.5%"
        );
        assert_eq!(
            band_left(key, &[seed(1, 0.339), seed(2, 0.7)]),
            "archive_peak_error_rate ↓ 33.9% ↑ 70.0%"
        );
    }

    #[test]
    fn integers_move_by_at_least_one() {
        assert_eq!(display(&changed(Kind::Integer, 4.0, Change(0.10))), "5");
        assert_eq!(display(&changed(Kind::Integer, 4.0, Change(-0.10))), "3");
        assert_eq!(display(&changed(Kind::Integer, 4.0, Change(-0.25))), "3");
        assert_eq!(display(&changed(Kind::Integer, 40.0, Change(0.10))), "44");
        assert_eq!(
            display(&changed(Kind::Duration, 35e6, Change(-0.10))),
            "31ms500us"
        );
        assert_eq!(
            display(&changed(Kind::Rate, 2700.0, Change(0.25))),
            "3375/s"
        );
    }

    #[test]
    fn changes_parse_with_their_bounds() {
        assert_eq!(
            Change::parse_list("-25%,+10%,10%").unwrap(),
            vec![Change(-0.25), Change(0.10)]
        );
        assert_eq!(Change(-0.25).label(), "-25%");
        assert_eq!(Change(0.1).label(), "+10%");
        for bad in ["10", "0%", "-95%", "x%", ""] {
            assert!(Change::parse_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn linked_sites_change_together_and_unknown_names_are_refused() {
        let a = assumptions(replay::SCENARIO_TOML)
            .unwrap()
            .into_iter()
            .find(|a| a.name == "client.editors-a.rate")
            .unwrap();
        let t = edit(replay::SCENARIO_TOML, &a, Change(0.10)).unwrap();
        let doc: DocumentMut = t.parse().unwrap();
        let get = |p: &str| display(FieldPath::parse(p).unwrap().get(&doc).unwrap());
        assert_eq!(get("client.editors-a.rate"), "2970/s");
        assert_eq!(get("client.editors-c.rate"), "2860/s");
        // The edit keeps the comments.
        assert!(t.contains("# ASSUMPTION: 3 new attempts per failure"));
        let e = Plan::new(Spec {
            file: replay::SCENARIO_FILE.into(),
            text: replay::SCENARIO_TOML.into(),
            scale: 0.01,
            seeds: vec![1],
            changes: Change::DEFAULT.to_vec(),
            only: vec!["client.nobody.rate".into()],
        })
        .unwrap_err();
        assert!(
            e.contains("\"client.nobody.rate\" is not an assumption")
                && e.contains("lb.haproxy-cus.flows_per_node"),
            "{e}"
        );
    }
}
