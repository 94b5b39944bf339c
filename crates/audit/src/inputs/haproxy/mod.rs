//! `haproxy.cfg`: the sections `global`, `defaults`, `frontend`, `backend`
//! and `listen`, and in them the keywords that bound capacity and retries.
//! Other sections (`resolvers`, `peers`, `userlist`, …) and other keywords
//! are skipped. A `defaults` section applies to the proxies after it until
//! the next one, as in HAProxy.
//!
//! Suppressions: a comment `# stormbreak:ignore RULE reason` inside a
//! section, or in the comment block right above its header, applies to
//! that section.
//!
//! Reference: HAProxy Configuration Manual, version 3.0,
//! <https://docs.haproxy.org/3.0/configuration.html>.

mod cond;
mod lex;
mod merge;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::finding::Pos;
use crate::inputs::yaml::ParseError;
use crate::units::parse_haproxy_time;

/// Most lines read from one file (a cap on work; far above real configs).
pub const MAX_LINES: usize = 1_000_000;

/// HAProxy's default `retries` (configuration manual, `retries`).
pub const DEFAULT_RETRIES: u32 = 3;

/// What a proxy section is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProxyKind {
    /// `frontend`.
    Frontend,
    /// `backend`.
    Backend,
    /// `listen` (both).
    Listen,
}

/// One `server` line.
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    /// Server name.
    pub name: String,
    /// Address as written (`host:port`).
    pub addr: String,
    /// Where.
    pub pos: Pos,
    /// `maxconn` (0 or unset = unlimited).
    pub maxconn: Option<u64>,
    /// `maxqueue` (0 or unset = unlimited).
    pub maxqueue: Option<u64>,
    /// `minconn`: with the backend's `fullconn`, makes `maxconn` dynamic
    /// (the server's limit grows from `minconn` to `maxconn` as the
    /// backend's load grows to `fullconn`).
    pub minconn: Option<u64>,
    /// `backup`: used only when every active server is down.
    pub backup: bool,
    /// `disabled`.
    pub disabled: bool,
    /// Settings whose value comes from the environment (unknown), as
    /// `maxconn from environment variable X`; such a setting is read as
    /// not set.
    pub unknown: Vec<String>,
}

/// A suppression comment.
#[derive(Debug, Clone, PartialEq)]
pub struct Ignore {
    /// Rule ID.
    pub rule: String,
    /// The reason given (required).
    pub reason: String,
}

/// One `frontend`, `backend` or `listen` section, with what it inherited
/// from the `defaults` before it (or the one named by `from`).
#[derive(Debug, Clone, PartialEq)]
pub struct Proxy {
    /// Section kind.
    pub kind: ProxyKind,
    /// Section name.
    pub name: String,
    /// Header line.
    pub pos: Pos,
    /// `maxconn` (frontend/listen): concurrent connections accepted.
    pub maxconn: Option<(u64, u32)>,
    /// `fullconn` (backend), with its line.
    pub fullconn: Option<(u64, u32)>,
    /// `retries`, with its line (`None`: HAProxy's default of 3).
    pub retries: Option<(u32, u32)>,
    /// `retry-on` keywords (`None`: HAProxy's default `conn-failure`).
    pub retry_on: Option<Vec<String>>,
    /// `option redispatch`.
    pub redispatch: bool,
    /// `option redispatch <interval>`: -1 (the default) redispatches on
    /// the last retry, N > 0 on every Nth retry, -N on the Nth last; 0
    /// turns it off.
    pub redispatch_interval: i64,
    /// `option allbackups`: all backup servers used at once (else only the first).
    pub allbackups: bool,
    /// `balance` and its arguments.
    pub balance: Option<String>,
    /// `timeout connect|client|server|queue`.
    pub timeouts: Vec<(String, Duration)>,
    /// `default_backend`.
    pub default_backend: Option<String>,
    /// `use_backend` targets.
    pub use_backends: Vec<String>,
    /// `server` lines.
    pub servers: Vec<Server>,
    /// Suppressions.
    pub ignores: Vec<Ignore>,
    /// Settings of the section, its defaults or its servers whose value
    /// comes from the environment (unknown to the audit; read as not set).
    /// They are also named after the section's name, so every finding
    /// and chain about it says so.
    pub unknown: Vec<String>,
}

impl Proxy {
    /// Effective retries on a retry-on condition.
    pub fn retries(&self) -> u32 {
        self.retries.map(|r| r.0).unwrap_or(DEFAULT_RETRIES)
    }

    /// Effective retry-on keywords (`conn-failure` when unset, per the manual).
    pub fn retry_on(&self) -> Vec<String> {
        self.retry_on
            .clone()
            .unwrap_or_else(|| vec!["conn-failure".into()])
    }

    /// A timeout by name.
    pub fn timeout(&self, name: &str) -> Option<Duration> {
        self.timeouts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| *d)
    }

    /// Is this a frontend (or listen)?
    pub fn is_frontend(&self) -> bool {
        matches!(self.kind, ProxyKind::Frontend | ProxyKind::Listen)
    }

    /// Is this a backend (or listen)?
    pub fn is_backend(&self) -> bool {
        matches!(self.kind, ProxyKind::Backend | ProxyKind::Listen)
    }
}

/// One parsed file.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file.
    pub file: Arc<str>,
    /// `global maxconn`, with its line.
    pub global_maxconn: Option<(u64, u32)>,
    /// `global maxconn` set from the environment (unknown), with its line.
    pub global_unknown: Option<(String, u32)>,
    /// Frontends, backends and listens in file order.
    pub proxies: Vec<Proxy>,
    /// Suppressions in `global` (apply to the whole file).
    pub file_ignores: Vec<Ignore>,
}

impl Config {
    /// A backend (or listen) by name.
    pub fn backend(&self, name: &str) -> Option<&Proxy> {
        self.proxies
            .iter()
            .find(|p| p.is_backend() && p.name == name)
    }
}

/// A frontend's connection limit as HAProxy applies it (configuration
/// manual, 4.2 "maxconn": a frontend without its own takes the process's
/// `global maxconn`).
#[derive(Debug, Clone, PartialEq)]
pub enum ConnLimit {
    /// Set in the section or its defaults, with its line.
    Own(u64, u32),
    /// Not set in the section: the process-wide `global maxconn`, with its line.
    Global(u64, u32),
    /// Taken from the environment, e.g. "maxconn from environment variable X".
    Unknown(String),
    /// Set nowhere: HAProxy derives it from the file-descriptor limit at run time.
    Unset,
}

impl ConnLimit {
    /// The limit and its line, when the file says it.
    pub fn known(&self) -> Option<(u64, u32)> {
        match self {
            ConnLimit::Own(n, l) | ConnLimit::Global(n, l) => Some((*n, *l)),
            ConnLimit::Unknown(_) | ConnLimit::Unset => None,
        }
    }
}

impl Config {
    /// The connection limit HAProxy applies to frontend (or listen) `f`.
    /// Invariant: a value taken from the environment is never replaced
    /// by the global one, since HAProxy would not replace it either.
    pub fn frontend_limit(&self, f: &Proxy) -> ConnLimit {
        if let Some((n, l)) = f.maxconn.filter(|(n, _)| *n > 0) {
            return ConnLimit::Own(n, l);
        }
        if let Some(u) = f.unknown.iter().find(|u| u.starts_with("maxconn from ")) {
            return ConnLimit::Unknown(u.clone());
        }
        if let Some((g, l)) = self.global_maxconn.filter(|(g, _)| *g > 0) {
            return ConnLimit::Global(g, l);
        }
        if let Some(u) = f
            .unknown
            .iter()
            .find(|u| u.starts_with("global maxconn from "))
        {
            return ConnLimit::Unknown(u.clone());
        }
        match &self.global_unknown {
            Some((u, _)) => ConnLimit::Unknown(format!("global {u}")),
            None => ConnLimit::Unset,
        }
    }
}

impl Server {
    /// What makes this server's `maxconn` unknown (set from the
    /// environment, here or by a `default-server`), if anything.
    pub fn maxconn_unknown(&self) -> Option<&str> {
        self.unknown
            .iter()
            .find(|u| u.starts_with("server maxconn from "))
            .map(String::as_str)
    }
}

#[derive(Default, Clone)]
struct Defaults {
    maxconn: Option<(u64, u32)>,
    retries: Option<(u32, u32)>,
    retry_on: Option<Vec<String>>,
    redispatch: bool,
    redispatch_interval: i64,
    allbackups: bool,
    balance: Option<String>,
    timeouts: Vec<(String, Duration)>,
    server_maxconn: Option<u64>,
    server_maxqueue: Option<u64>,
    server_minconn: Option<u64>,
    /// Settings whose value comes from the environment, inherited as such.
    unknown: Vec<String>,
}

enum Section {
    Global,
    Defaults(Option<String>, Defaults),
    Proxy(Box<Proxy>, Box<Defaults>),
    Other,
}

/// Parses an haproxy.cfg. Problems are returned with their lines; the rest
/// of the file is still read.
///
/// The file is read once for each combination of the conditions that
/// depend on the environment (`cond`); the readings are then merged
/// (`merge`): a section that reads the same in every combination is
/// kept once under its name, one that differs is kept once per reading,
/// its name followed by the branches it assumes.
pub fn parse(file: &Arc<str>, text: &str) -> (Config, Vec<ParseError>) {
    let lines: Vec<&str> = text.lines().take(MAX_LINES).collect();
    let (choices, cond_errors) = cond::choices(&lines);
    let mut raw: Vec<(u32, String)> = cond_errors;
    let mut readings = Vec::new();
    for world in 0..(1usize << choices.len()) {
        let (active, errs) = cond::active(&lines, &choices, world);
        raw.extend(errs);
        let (cfg, errs) = read(file, &active, &choices);
        raw.extend(errs);
        readings.push(cfg);
    }
    let mut seen = std::collections::HashSet::new();
    raw.retain(|e| seen.insert(e.clone()));
    raw.sort_by_key(|e| e.0);
    let errors = raw
        .into_iter()
        .map(|(line, message)| ParseError {
            pos: Pos::new(file, line),
            message,
        })
        .collect();
    (merge::merge(readings, &choices), errors)
}

/// One reading: the lines read under one combination of choices.
fn read(
    file: &Arc<str>,
    lines: &[cond::Active<'_>],
    choices: &[cond::Choice],
) -> (Config, Vec<(u32, String)>) {
    let mut cfg = Config {
        file: file.clone(),
        global_maxconn: None,
        global_unknown: None,
        proxies: Vec::new(),
        file_ignores: Vec::new(),
    };
    let mut errors = Vec::new();
    let mut defaults = Defaults::default();
    let mut named: HashMap<String, Defaults> = HashMap::new();
    let mut section = Section::Other;
    let mut pending: Vec<Ignore> = Vec::new();
    for a in lines {
        let line_no = a.line;
        let raw = a.text;
        let err = |m: String| {
            if a.assumes.is_empty() {
                (line_no, m)
            } else {
                (
                    line_no,
                    format!("{m} (assuming {})", cond::describe(choices, &a.assumes)),
                )
            }
        };
        let trimmed = raw.trim();
        if let Some(c) = trimmed.strip_prefix('#') {
            if let Some(ig) = parse_ignore(c) {
                match ig {
                    Ok(ig) => pending.push(ig),
                    Err(m) => errors.push(err(m)),
                }
            }
            continue;
        }
        let toks = lex::words(raw);
        let words: Vec<&str> = toks.iter().map(|t| t.text.as_str()).collect();
        if words.is_empty() {
            continue;
        }
        let indented = raw.starts_with([' ', '\t']);
        let header = !indented
            || matches!(
                words[0],
                "global" | "defaults" | "frontend" | "backend" | "listen"
            );
        if header && is_section(words[0]) {
            finish(&mut section, &mut cfg, &mut defaults, &mut named);
            let name = words.get(1).map(|s| s.to_string()).unwrap_or_default();
            // `defaults [<name>] [from <defaults>]`, `backend <name> [from
            // <defaults>]` (4. "Proxies"): the named defaults section
            // instead of the last one before.
            let from = match words.iter().position(|w| *w == "from") {
                Some(i) if i == 2 || (i == 1 && words[0] == "defaults") => match words.get(i + 1) {
                    Some(n) => match named.get(*n) {
                        Some(d) => Some(d.clone()),
                        None => {
                            errors.push(err(format!(
                                    "`{} {name} from {n}`: no defaults section named {n} before this line; read as if `from {n}` were absent. Name the section `defaults {n}` above this one",
                                    words[0]
                                )));
                            None
                        }
                    },
                    None => {
                        errors.push(err(format!(
                            "`{}` … `from` expects the name of a defaults section",
                            words[0]
                        )));
                        None
                    }
                },
                _ => None,
            };
            let kind = match words[0] {
                "frontend" => Some(ProxyKind::Frontend),
                "backend" => Some(ProxyKind::Backend),
                "listen" => Some(ProxyKind::Listen),
                _ => None,
            };
            section = match (words[0], kind) {
                ("global", _) => Section::Global,
                ("defaults", _) => Section::Defaults(
                    words
                        .get(1)
                        .filter(|n| **n != "from")
                        .map(|s| s.to_string()),
                    from.unwrap_or_default(),
                ),
                (_, Some(kind)) => {
                    let d = from.unwrap_or_else(|| defaults.clone());
                    Section::Proxy(
                        Box::new(Proxy {
                            kind,
                            name,
                            pos: Pos::new(file, line_no),
                            maxconn: d.maxconn.filter(|_| kind != ProxyKind::Backend),
                            fullconn: None,
                            retries: d.retries,
                            retry_on: d.retry_on.clone(),
                            redispatch: d.redispatch,
                            redispatch_interval: d.redispatch_interval,
                            allbackups: d.allbackups,
                            balance: d.balance.clone(),
                            timeouts: d.timeouts.clone(),
                            default_backend: None,
                            use_backends: Vec::new(),
                            servers: Vec::new(),
                            ignores: std::mem::take(&mut pending),
                            unknown: d
                                .unknown
                                .iter()
                                .filter(|u| kind != ProxyKind::Backend || !u.starts_with("maxconn"))
                                .cloned()
                                .collect(),
                        }),
                        Box::new(d),
                    )
                }
                _ => Section::Other,
            };
            if matches!(section, Section::Global) {
                cfg.file_ignores.append(&mut pending);
            }
            continue;
        }
        match &mut section {
            Section::Global => {
                cfg.file_ignores.append(&mut pending);
                if words[0] == "maxconn" {
                    match number(&words, 1) {
                        Ok(n) => cfg.global_maxconn = Some((n, line_no)),
                        Err(m) => {
                            if let Some(u) = unknown_note(&words, 1) {
                                cfg.global_unknown = Some((u, line_no));
                            }
                            errors.push(err(m))
                        }
                    }
                }
            }
            Section::Defaults(_, d) => {
                pending.clear();
                if let Err(m) = defaults_keyword(d, &words, line_no) {
                    errors.push(err(m));
                }
            }
            Section::Proxy(p, d) => {
                p.ignores.append(&mut pending);
                for m in proxy_keyword(p, d, &words, file, line_no) {
                    errors.push(err(m));
                }
            }
            Section::Other => pending.clear(),
        }
    }
    finish(&mut section, &mut cfg, &mut defaults, &mut named);
    (cfg, errors)
}

fn is_section(w: &str) -> bool {
    matches!(
        w,
        "global"
            | "defaults"
            | "frontend"
            | "backend"
            | "listen"
            | "resolvers"
            | "peers"
            | "userlist"
            | "program"
            | "cache"
            | "mailers"
            | "http-errors"
            | "ring"
            | "log-forward"
            | "crt-store"
            | "traces"
    )
}

fn finish(
    section: &mut Section,
    cfg: &mut Config,
    defaults: &mut Defaults,
    named: &mut HashMap<String, Defaults>,
) {
    match std::mem::replace(section, Section::Other) {
        Section::Defaults(name, d) => {
            if let Some(n) = name {
                named.insert(n, d.clone());
            }
            *defaults = d;
        }
        Section::Proxy(p, _) => cfg.proxies.push(*p),
        _ => {}
    }
}

fn parse_ignore(comment: &str) -> Option<Result<Ignore, String>> {
    let rest = comment.trim().strip_prefix("stormbreak:ignore")?;
    let mut it = rest.trim().splitn(2, char::is_whitespace);
    let rule = it.next().unwrap_or("").trim().to_string();
    let reason = it.next().unwrap_or("").trim().to_string();
    Some(if rule.is_empty() || reason.is_empty() {
        Err(
            "a suppression must name the rule and give a reason: `# stormbreak:ignore SB202 why`"
                .into(),
        )
    } else {
        Ok(Ignore { rule, reason })
    })
}

/// "maxconn from environment variable X" when the word at `i` takes its
/// value from the environment (the lexer writes it `${X}`).
fn unknown_note(words: &[&str], i: usize) -> Option<String> {
    let w = words.get(i)?;
    let var = w.split("${").nth(1)?.split('}').next()?;
    let kw = if words[0] == "timeout" || words[0] == "server-template" {
        format!("{} {}", words[0], words.get(1).unwrap_or(&""))
    } else {
        words[0].to_string()
    };
    Some(format!("{kw} from environment variable {var}"))
}

fn number(words: &[&str], i: usize) -> Result<u64, String> {
    let w = words
        .get(i)
        .ok_or_else(|| format!("`{}` expects a number", words[0]))?;
    if let Some(u) = unknown_note(words, i) {
        return Err(unknown_message(&u));
    }
    w.parse::<u64>()
        .map_err(|_| format!("`{}` expects a whole number, got {w:?}", words[0]))
}

/// The finding for a setting taken from the environment.
fn unknown_message(note: &str) -> String {
    format!(
        "{note}: its value is unknown to the audit (HAProxy reads it when it starts), so it is read as not set and every limit or finding that depends on it says so; write the value here, or audit the configuration as rendered for each environment"
    )
}

fn timeout(words: &[&str]) -> Result<(String, Duration), String> {
    let name = words.get(1).ok_or("`timeout` expects a name and a time")?;
    let t = words
        .get(2)
        .ok_or_else(|| format!("`timeout {name}` expects a time such as 5s"))?;
    if let Some(u) = unknown_note(words, 2) {
        return Err(unknown_message(&u));
    }
    Ok((
        name.to_string(),
        parse_haproxy_time(t).map_err(|e| format!("timeout {name}: {e}"))?,
    ))
}

fn set_timeout(list: &mut Vec<(String, Duration)>, t: (String, Duration)) {
    list.retain(|(n, _)| *n != t.0);
    list.push(t);
}

fn option<'a>(words: &[&'a str]) -> Option<(bool, &'a str)> {
    match words {
        ["option", name, ..] => Some((true, name)),
        ["no", "option", name, ..] => Some((false, name)),
        _ => None,
    }
}

/// Records that `words[0]` (its value at `at`) is unknown, or known again.
fn note_unknown(list: &mut Vec<String>, words: &[&str], at: usize) {
    let kw = if words[0] == "timeout" {
        format!("timeout {} from ", words.get(1).unwrap_or(&""))
    } else {
        format!("{} from ", words[0])
    };
    list.retain(|u| !u.starts_with(&kw));
    if let Some(u) = unknown_note(words, at) {
        list.push(u);
    }
}

fn push_unique(list: &mut Vec<String>, u: &str) {
    if !list.iter().any(|x| x == u) {
        list.push(u.to_string());
    }
}

/// `default-server` in a defaults or proxy section.
fn default_server(d: &mut Defaults, words: &[&str]) -> Result<(), String> {
    let sp = server_params(&words[1..])?;
    for (field, note) in &sp.unknown {
        d.unknown
            .retain(|u| !u.starts_with(&format!("server {field} from ")));
        d.unknown.push(format!("server {note}"));
    }
    for (field, v) in [
        ("maxconn", sp.maxconn),
        ("maxqueue", sp.maxqueue),
        ("minconn", sp.minconn),
    ] {
        if v.is_some() {
            d.unknown
                .retain(|u| !u.starts_with(&format!("server {field} from ")));
        }
    }
    d.server_maxconn = sp.maxconn.or(d.server_maxconn);
    d.server_maxqueue = sp.maxqueue.or(d.server_maxqueue);
    d.server_minconn = sp.minconn.or(d.server_minconn);
    sp.known("default-server")
}

fn defaults_keyword(d: &mut Defaults, words: &[&str], line: u32) -> Result<(), String> {
    match words[0] {
        "maxconn" | "retries" => note_unknown(&mut d.unknown, words, 1),
        "timeout" => note_unknown(&mut d.unknown, words, 2),
        _ => {}
    }
    match words[0] {
        "maxconn" => d.maxconn = Some((number(words, 1)?, line)),
        "retries" => d.retries = Some((number(words, 1)? as u32, line)),
        "retry-on" => d.retry_on = Some(words[1..].iter().map(|s| s.to_string()).collect()),
        "balance" => d.balance = Some(words[1..].join(" ")),
        "timeout" => set_timeout(&mut d.timeouts, timeout(words)?),
        "default-server" => default_server(d, words)?,
        _ => match option(words) {
            Some((on, "redispatch")) => {
                (d.redispatch, d.redispatch_interval) = redispatch(on, words)?;
            }
            Some((on, "allbackups")) => d.allbackups = on,
            _ => {}
        },
    }
    Ok(())
}

/// Most servers one `server-template` line declares.
pub const MAX_TEMPLATE_SERVERS: u64 = 10_000;

/// `server-template <prefix> <num | first-last> <fqdn>[:<port>]`: the
/// server numbers.
fn template_range(words: &[&str]) -> Result<std::ops::RangeInclusive<u64>, String> {
    let w = words
        .get(2)
        .ok_or("`server-template` expects a prefix, a number of servers and an address")?;
    if let Some(u) = unknown_note(words, 2) {
        return Err(unknown_message(&u));
    }
    let bad = || {
        format!(
            "`server-template {}` expects a number of servers such as 5 or a range such as 1-5, got {w:?}",
            words[1]
        )
    };
    let (a, b) = match w.split_once('-') {
        Some((a, b)) => (
            a.parse::<u64>().map_err(|_| bad())?,
            b.parse::<u64>().map_err(|_| bad())?,
        ),
        None => (1, w.parse::<u64>().map_err(|_| bad())?),
    };
    if a == 0 || b < a {
        return Err(bad());
    }
    if b - a + 1 > MAX_TEMPLATE_SERVERS {
        return Err(format!(
            "`server-template {}` declares {} servers, more than the {MAX_TEMPLATE_SERVERS} the audit reads from one line; not read",
            words[1],
            b - a + 1
        ));
    }
    Ok(a..=b)
}

/// A `server` line's settings, with the defaults applied.
fn server(d: &Defaults, name: String, addr: &str, sp: &ServerParams, pos: Pos) -> Server {
    let unknown_field = |f: &str| sp.unknown.iter().any(|(x, _)| x == f);
    let default_unknown = |f: &str, own: Option<u64>| {
        own.is_none()
            && d.unknown
                .iter()
                .any(|u| u.starts_with(&format!("server {f} from ")))
    };
    let pick = |f: &str, own: Option<u64>, dflt: Option<u64>| {
        if unknown_field(f) || default_unknown(f, own) {
            None
        } else {
            own.or(dflt)
        }
    };
    let mut unknown: Vec<String> = sp
        .unknown
        .iter()
        .map(|(_, n)| format!("server {n}"))
        .collect();
    for (f, own) in [
        ("maxconn", sp.maxconn),
        ("maxqueue", sp.maxqueue),
        ("minconn", sp.minconn),
    ] {
        if default_unknown(f, own)
            && !unknown_field(f)
            && let Some(u) = d
                .unknown
                .iter()
                .find(|u| u.starts_with(&format!("server {f} from ")))
        {
            unknown.push(u.clone());
        }
    }
    Server {
        name,
        addr: addr.to_string(),
        pos,
        maxconn: pick("maxconn", sp.maxconn, d.server_maxconn),
        maxqueue: pick("maxqueue", sp.maxqueue, d.server_maxqueue),
        minconn: pick("minconn", sp.minconn, d.server_minconn),
        backup: sp.backup,
        disabled: sp.disabled,
        unknown,
    }
}

/// Reads one keyword of a proxy section; returns the problems found.
fn proxy_keyword(
    p: &mut Proxy,
    d: &mut Defaults,
    words: &[&str],
    file: &Arc<str>,
    line: u32,
) -> Vec<String> {
    match words[0] {
        "maxconn" | "fullconn" | "retries" => note_unknown(&mut p.unknown, words, 1),
        "timeout" => note_unknown(&mut p.unknown, words, 2),
        _ => {}
    }
    keyword(p, d, words, file, line).err().into_iter().collect()
}

fn keyword(
    p: &mut Proxy,
    d: &mut Defaults,
    words: &[&str],
    file: &Arc<str>,
    line: u32,
) -> Result<(), String> {
    {
        match words[0] {
            "maxconn" => p.maxconn = Some((number(words, 1)?, line)),
            "fullconn" => p.fullconn = Some((number(words, 1)?, line)),
            "retries" => {
                let n = number(words, 1)?;
                p.retries = Some((
                    u32::try_from(n).map_err(|_| format!("retries {n} is out of range"))?,
                    line,
                ));
            }
            "retry-on" => p.retry_on = Some(words[1..].iter().map(|s| s.to_string()).collect()),
            "balance" => p.balance = Some(words[1..].join(" ")),
            "timeout" => set_timeout(&mut p.timeouts, timeout(words)?),
            "default_backend" => p.default_backend = words.get(1).map(|s| s.to_string()),
            "use_backend" => {
                if let Some(b) = words.get(1) {
                    p.use_backends.push(b.to_string());
                }
            }
            "default-server" => {
                let r = default_server(d, words);
                for u in d.unknown.iter().filter(|u| u.starts_with("server ")) {
                    push_unique(&mut p.unknown, u);
                }
                r?;
            }
            "server" => {
                let name = words
                    .get(1)
                    .ok_or("`server` expects a name and an address")?;
                let addr = words
                    .get(2)
                    .ok_or("`server` expects an address after its name")?;
                let sp = server_params(&words[3..])?;
                add_server(
                    p,
                    server(d, name.to_string(), addr, &sp, Pos::new(file, line)),
                );
                sp.known(&format!("server {name}"))?;
            }
            // 5.1 / `server-template`: <num> servers named <prefix>1 to
            // <prefix><num>, or <prefix><first> to <prefix><last>.
            "server-template" => {
                let range = match template_range(words) {
                    Ok(r) => r,
                    Err(m) => {
                        if let Some(u) = unknown_note(words, 2) {
                            push_unique(&mut p.unknown, &format!("{u} (no server counted)"));
                        }
                        return Err(m);
                    }
                };
                let prefix = words[1];
                let addr = words
                    .get(3)
                    .ok_or("`server-template` expects an address after the number of servers")?;
                let sp = server_params(&words[4..])?;
                for i in range {
                    add_server(
                        p,
                        server(d, format!("{prefix}{i}"), addr, &sp, Pos::new(file, line)),
                    );
                }
                sp.known(&format!("server-template {prefix}"))?;
            }
            _ => match option(words) {
                Some((on, "redispatch")) => {
                    (p.redispatch, p.redispatch_interval) = redispatch(on, words)?;
                }
                Some((on, "allbackups")) => p.allbackups = on,
                _ => {}
            },
        }
    }
    Ok(())
}

/// Adds a server to its section, which then names what of it is unknown.
fn add_server(p: &mut Proxy, s: Server) {
    for u in &s.unknown {
        push_unique(&mut p.unknown, u);
    }
    p.servers.push(s);
}

impl ServerParams {
    /// Ok when no setting of the line `what` (e.g. `server web1`) comes
    /// from the environment; else the finding for each that does.
    fn known(&self, what: &str) -> Result<(), String> {
        if self.unknown.is_empty() {
            return Ok(());
        }
        Err(self
            .unknown
            .iter()
            .map(|(_, n)| unknown_message(&format!("{what} {n}")))
            .collect::<Vec<_>>()
            .join("; "))
    }
}

/// What a `server` or `default-server` line sets.
#[derive(Default)]
struct ServerParams {
    maxconn: Option<u64>,
    maxqueue: Option<u64>,
    minconn: Option<u64>,
    backup: bool,
    disabled: bool,
    /// (setting, "maxconn from environment variable X").
    unknown: Vec<(String, String)>,
}

/// `[no] option redispatch [<interval>]`: (on, interval).
fn redispatch(on: bool, words: &[&str]) -> Result<(bool, i64), String> {
    let at = if words[0] == "no" { 3 } else { 2 };
    let interval = match words.get(at) {
        None => -1,
        Some(w) => w.parse::<i64>().map_err(|_| {
            format!("`option redispatch` expects an interval such as -1 or 2, got {w:?}")
        })?,
    };
    Ok((on && interval != 0, if on { interval } else { 0 }))
}

fn server_params(words: &[&str]) -> Result<ServerParams, String> {
    let mut sp = ServerParams::default();
    let mut i = 0;
    while i < words.len() {
        let field = words[i];
        if matches!(field, "maxconn" | "maxqueue" | "minconn")
            && let Some(u) = unknown_note(&[field, words.get(i + 1).unwrap_or(&"")], 1)
        {
            sp.unknown.push((field.to_string(), u));
            i += 2;
            continue;
        }
        let num = |what: &str| {
            number(words, i + 1).map_err(|_| format!("server `{what}` expects a whole number"))
        };
        match field {
            "maxconn" => {
                sp.maxconn = Some(num("maxconn")?);
                i += 1;
            }
            "maxqueue" => {
                sp.maxqueue = Some(num("maxqueue")?);
                i += 1;
            }
            "minconn" => {
                sp.minconn = Some(num("minconn")?);
                i += 1;
            }
            "backup" => sp.backup = true,
            "disabled" => sp.disabled = true,
            _ => {}
        }
        i += 1;
    }
    Ok(sp)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: &str = "\
global
    maxconn 20000
defaults
    retries 2
    timeout connect 5s
    default-server maxconn 100
# stormbreak:ignore SB202 the queue is intended
frontend fe
    maxconn 5000
    default_backend be
backend be
    retry-on conn-failure 503
    option redispatch
    server a 10.0.0.1:80 maxconn 50
    server b 10.0.0.2:80
    server c 10.0.0.3:80 backup maxconn 10 # spare
";

    #[test]
    fn reads_sections_defaults_and_servers() {
        let (c, e) = parse(&Arc::from("h.cfg"), CFG);
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(c.global_maxconn, Some((20000, 2)));
        let fe = &c.proxies[0];
        assert_eq!(fe.maxconn, Some((5000, 9)));
        assert_eq!(fe.ignores.len(), 1);
        let be = c.backend("be").unwrap();
        assert_eq!(be.retries(), 2);
        assert_eq!(be.retry_on(), vec!["conn-failure", "503"]);
        assert!(be.redispatch);
        assert_eq!(be.servers[0].maxconn, Some(50));
        assert_eq!(be.servers[1].maxconn, Some(100), "default-server applies");
        assert!(be.servers[2].backup);
        assert_eq!(be.timeout("connect"), Some(Duration::from_secs(5)));
    }

    #[test]
    fn bad_values_are_located_and_the_rest_is_read() {
        let (c, e) = parse(
            &Arc::from("h.cfg"),
            "frontend fe\n  maxconn lots\n  timeout client 5y\nbackend be\n  server a x:1\n",
        );
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].pos.line, 2);
        assert_eq!(e[1].pos.line, 3);
        assert_eq!(c.proxies.len(), 2);
    }

    #[test]
    fn a_suppression_needs_a_reason() {
        let (_, e) = parse(
            &Arc::from("h.cfg"),
            "frontend fe\n  # stormbreak:ignore SB202\n",
        );
        assert_eq!(e.len(), 1);
        assert!(e[0].message.contains("reason"));
    }
}
