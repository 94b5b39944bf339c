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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
/// from the `defaults` before it.
#[derive(Debug, Clone)]
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

#[derive(Default, Clone)]
struct Defaults {
    maxconn: Option<(u64, u32)>,
    retries: Option<(u32, u32)>,
    retry_on: Option<Vec<String>>,
    redispatch: bool,
    redispatch_interval: i64,
    allbackups: bool,
    timeouts: Vec<(String, Duration)>,
    server_maxconn: Option<u64>,
    server_maxqueue: Option<u64>,
    server_minconn: Option<u64>,
}

enum Section {
    Global,
    Defaults(Defaults),
    Proxy(Box<Proxy>, Box<Defaults>),
    Other,
}

/// Parses an haproxy.cfg. Problems are returned with their lines; the rest
/// of the file is still read.
pub fn parse(file: &Arc<str>, text: &str) -> (Config, Vec<ParseError>) {
    let mut cfg = Config {
        file: file.clone(),
        global_maxconn: None,
        proxies: Vec::new(),
        file_ignores: Vec::new(),
    };
    let mut errors = Vec::new();
    let mut defaults = Defaults::default();
    let mut section = Section::Other;
    let mut pending: Vec<Ignore> = Vec::new();
    for (i, raw) in text.lines().enumerate().take(MAX_LINES) {
        let line_no = i as u32 + 1;
        let err = |m: String| ParseError {
            pos: Pos::new(file, line_no),
            message: m,
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
        let content = match raw.find(" #").or_else(|| raw.find("\t#")) {
            Some(i) => &raw[..i],
            None => raw,
        };
        let words: Vec<&str> = content.split_whitespace().collect();
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
            finish(&mut section, &mut cfg, &mut defaults);
            let name = words.get(1).map(|s| s.to_string()).unwrap_or_default();
            let kind = match words[0] {
                "frontend" => Some(ProxyKind::Frontend),
                "backend" => Some(ProxyKind::Backend),
                "listen" => Some(ProxyKind::Listen),
                _ => None,
            };
            section = match (words[0], kind) {
                ("global", _) => Section::Global,
                ("defaults", _) => Section::Defaults(Defaults::default()),
                (_, Some(kind)) => Section::Proxy(
                    Box::new(Proxy {
                        kind,
                        name,
                        pos: Pos::new(file, line_no),
                        maxconn: defaults.maxconn.filter(|_| kind != ProxyKind::Backend),
                        fullconn: None,
                        retries: defaults.retries,
                        retry_on: defaults.retry_on.clone(),
                        redispatch: defaults.redispatch,
                        redispatch_interval: defaults.redispatch_interval,
                        allbackups: defaults.allbackups,
                        timeouts: defaults.timeouts.clone(),
                        default_backend: None,
                        use_backends: Vec::new(),
                        servers: Vec::new(),
                        ignores: std::mem::take(&mut pending),
                    }),
                    Box::new(defaults.clone()),
                ),
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
                        Err(m) => errors.push(err(m)),
                    }
                }
            }
            Section::Defaults(d) => {
                pending.clear();
                if let Err(m) = defaults_keyword(d, &words, line_no) {
                    errors.push(err(m));
                }
            }
            Section::Proxy(p, d) => {
                p.ignores.append(&mut pending);
                if let Err(m) = proxy_keyword(p, d, &words, file, line_no) {
                    errors.push(err(m));
                }
            }
            Section::Other => pending.clear(),
        }
    }
    finish(&mut section, &mut cfg, &mut defaults);
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

fn finish(section: &mut Section, cfg: &mut Config, defaults: &mut Defaults) {
    match std::mem::replace(section, Section::Other) {
        Section::Defaults(d) => *defaults = d,
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

fn number(words: &[&str], i: usize) -> Result<u64, String> {
    let w = words
        .get(i)
        .ok_or_else(|| format!("`{}` expects a number", words[0]))?;
    w.parse::<u64>()
        .map_err(|_| format!("`{}` expects a whole number, got {w:?}", words[0]))
}

fn timeout(words: &[&str]) -> Result<(String, Duration), String> {
    let name = words.get(1).ok_or("`timeout` expects a name and a time")?;
    let t = words
        .get(2)
        .ok_or_else(|| format!("`timeout {name}` expects a time such as 5s"))?;
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

fn defaults_keyword(d: &mut Defaults, words: &[&str], line: u32) -> Result<(), String> {
    match words[0] {
        "maxconn" => d.maxconn = Some((number(words, 1)?, line)),
        "retries" => d.retries = Some((number(words, 1)? as u32, line)),
        "retry-on" => d.retry_on = Some(words[1..].iter().map(|s| s.to_string()).collect()),
        "timeout" => set_timeout(&mut d.timeouts, timeout(words)?),
        "default-server" => {
            let sp = server_params(&words[1..])?;
            d.server_maxconn = sp.maxconn.or(d.server_maxconn);
            d.server_maxqueue = sp.maxqueue.or(d.server_maxqueue);
            d.server_minconn = sp.minconn.or(d.server_minconn);
        }
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

fn proxy_keyword(
    p: &mut Proxy,
    d: &mut Defaults,
    words: &[&str],
    file: &Arc<str>,
    line: u32,
) -> Result<(), String> {
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
        "timeout" => set_timeout(&mut p.timeouts, timeout(words)?),
        "default_backend" => p.default_backend = words.get(1).map(|s| s.to_string()),
        "use_backend" => {
            if let Some(b) = words.get(1) {
                p.use_backends.push(b.to_string());
            }
        }
        "default-server" => {
            let sp = server_params(&words[1..])?;
            d.server_maxconn = sp.maxconn.or(d.server_maxconn);
            d.server_maxqueue = sp.maxqueue.or(d.server_maxqueue);
            d.server_minconn = sp.minconn.or(d.server_minconn);
        }
        "server" => {
            let name = words
                .get(1)
                .ok_or("`server` expects a name and an address")?;
            let addr = words
                .get(2)
                .ok_or("`server` expects an address after its name")?;
            let sp = server_params(&words[3..])?;
            p.servers.push(Server {
                name: name.to_string(),
                addr: addr.to_string(),
                pos: Pos::new(file, line),
                maxconn: sp.maxconn.or(d.server_maxconn),
                maxqueue: sp.maxqueue.or(d.server_maxqueue),
                minconn: sp.minconn.or(d.server_minconn),
                backup: sp.backup,
                disabled: sp.disabled,
            });
        }
        _ => match option(words) {
            Some((on, "redispatch")) => {
                (p.redispatch, p.redispatch_interval) = redispatch(on, words)?;
            }
            Some((on, "allbackups")) => p.allbackups = on,
            _ => {}
        },
    }
    Ok(())
}

/// What a `server` or `default-server` line sets.
#[derive(Default)]
struct ServerParams {
    maxconn: Option<u64>,
    maxqueue: Option<u64>,
    minconn: Option<u64>,
    backup: bool,
    disabled: bool,
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
        let num = |what: &str| {
            number(words, i + 1).map_err(|_| format!("server `{what}` expects a whole number"))
        };
        match words[i] {
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
