//! Conditional blocks (Configuration Manual, 2.4 "Conditional blocks"):
//! `.if`, `.elif`, `.else`, `.endif`, with the condition language of the
//! manual (`0`, non-zero integers, predicates, `!`, `&&`, `||`, parentheses).
//!
//! What does not depend on where HAProxy runs is evaluated: integers,
//! `streq`/`strneq`/`strstr` of literal strings, and `version_atleast` /
//! `version_before` when every HAProxy from 2.6 to 3.x gives the same
//! answer. What does (`defined(VAR)`, anything with `$VAR`, `feature()`,
//! the TLS library predicates, `enabled()`, versions inside 2.6–3.x) is a
//! *choice*: the file is read once per combination of choices and every
//! combination is audited (see [`super::merge`]).

/// Deepest nesting of conditional blocks read; lines in a deeper block
/// are not read (with a finding).
pub const MAX_NESTING: usize = 10;
/// Most distinct environment-dependent conditions in one file: every
/// combination is read, so at most 2^4 = 16 readings.
pub const MAX_CHOICES: usize = 4;

/// A condition the audit cannot decide, as written at its first use.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// `.if` or `.elif`.
    pub directive: String,
    /// The condition, whitespace-normalised.
    pub expr: String,
    /// First line.
    pub line: u32,
}

/// The choices a line's reading depends on: (choice index, value).
pub type Assumption = Vec<(usize, bool)>;

/// "`.if defined(PROD)` (line 3) is true and …".
pub fn describe(choices: &[Choice], a: &[(usize, bool)]) -> String {
    a.iter()
        .map(|(i, v)| {
            let c = &choices[*i];
            format!("`{} {}` (line {}) is {v}", c.directive, c.expr, c.line)
        })
        .collect::<Vec<_>>()
        .join(" and ")
}

/// A condition's value: decided, or depending on the environment.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tri {
    Known(bool),
    Env,
}

/// Is this trimmed line a directive? (`.if`, `.diag`, …)
pub fn directive(trimmed: &str) -> Option<(&str, &str)> {
    let rest = trimmed.strip_prefix('.')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let name = &rest[..end];
    matches!(
        name,
        "if" | "elif" | "else" | "endif" | "diag" | "notice" | "warning" | "alert"
    )
    .then(|| (name, rest[end..].trim()))
}

fn normalise(expr: &str) -> String {
    expr.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Evaluates a condition. `Err` for what cannot be read at all.
fn eval(expr: &str) -> Result<Tri, String> {
    let toks = tokens(expr)?;
    if toks.is_empty() {
        return Ok(Tri::Known(false));
    }
    let mut p = Parser { toks, at: 0 };
    let v = p.or()?;
    if p.at != p.toks.len() {
        return Err(format!("cannot read the condition `{expr}`"));
    }
    Ok(v)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Not,
    And,
    Or,
    Open,
    Close,
    Atom(String),
}

fn tokens(expr: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let b: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            c if c.is_whitespace() => i += 1,
            '!' => {
                out.push(Tok::Not);
                i += 1;
            }
            '(' => {
                out.push(Tok::Open);
                i += 1;
            }
            ')' => {
                out.push(Tok::Close);
                i += 1;
            }
            '&' | '|' => {
                if b.get(i + 1) != Some(&b[i]) {
                    return Err(format!("`{}` must be doubled in `{expr}`", b[i]));
                }
                out.push(if b[i] == '&' { Tok::And } else { Tok::Or });
                i += 2;
            }
            _ => {
                // An atom: a word, a quoted string, or `name(args)`.
                let start = i;
                let mut depth = 0;
                let mut quote: Option<char> = None;
                while i < b.len() {
                    let c = b[i];
                    if let Some(q) = quote {
                        if c == '\\' {
                            i += 1;
                        } else if c == q {
                            quote = None;
                        }
                    } else if c == '"' || c == '\'' {
                        quote = Some(c);
                    } else if c == '(' {
                        depth += 1;
                    } else if c == ')' {
                        if depth == 0 {
                            break;
                        }
                        depth -= 1;
                        if depth == 0 {
                            i += 1;
                            break;
                        }
                    } else if depth == 0 && (c.is_whitespace() || "!&|".contains(c)) {
                        break;
                    }
                    i += 1;
                }
                out.push(Tok::Atom(b[start..i.min(b.len())].iter().collect()));
            }
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

impl Parser {
    fn or(&mut self) -> Result<Tri, String> {
        let mut v = self.and()?;
        while self.toks.get(self.at) == Some(&Tok::Or) {
            self.at += 1;
            let r = self.and()?;
            v = match (v, r) {
                (Tri::Known(true), _) | (_, Tri::Known(true)) => Tri::Known(true),
                (Tri::Known(false), x) | (x, Tri::Known(false)) => x,
                _ => Tri::Env,
            };
        }
        Ok(v)
    }

    fn and(&mut self) -> Result<Tri, String> {
        let mut v = self.not()?;
        while self.toks.get(self.at) == Some(&Tok::And) {
            self.at += 1;
            let r = self.not()?;
            v = match (v, r) {
                (Tri::Known(false), _) | (_, Tri::Known(false)) => Tri::Known(false),
                (Tri::Known(true), x) | (x, Tri::Known(true)) => x,
                _ => Tri::Env,
            };
        }
        Ok(v)
    }

    fn not(&mut self) -> Result<Tri, String> {
        match self.toks.get(self.at).cloned() {
            Some(Tok::Not) => {
                self.at += 1;
                Ok(match self.not()? {
                    Tri::Known(b) => Tri::Known(!b),
                    Tri::Env => Tri::Env,
                })
            }
            Some(Tok::Open) => {
                self.at += 1;
                let v = self.or()?;
                if self.toks.get(self.at) != Some(&Tok::Close) {
                    return Err("a `(` is not closed".into());
                }
                self.at += 1;
                Ok(v)
            }
            Some(Tok::Atom(a)) => {
                self.at += 1;
                atom(&a)
            }
            _ => Err("a condition is missing".into()),
        }
    }
}

/// Oldest and (exclusive) newest HAProxy versions the audit reads for.
const OLDEST: (u32, u32) = (2, 6);
const BEYOND: (u32, u32) = (4, 0);

fn version(v: &str) -> Option<(u32, u32)> {
    let mut it = v
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>());
    let major = it.next()?.ok()?;
    let minor = it.next().and_then(|m| m.ok()).unwrap_or(0);
    Some((major, minor))
}

fn unquote(s: &str) -> String {
    let s = s.trim();
    let w = super::lex::words(s);
    w.into_iter().map(|w| w.text).collect::<Vec<_>>().join(" ")
}

fn atom(a: &str) -> Result<Tri, String> {
    if a.contains('$') {
        return Ok(Tri::Env);
    }
    if let Ok(n) = a.parse::<i64>() {
        return Ok(Tri::Known(n != 0));
    }
    let Some((name, args)) = a.split_once('(') else {
        return Err(format!(
            "`{a}` is not a condition HAProxy knows (expected 0, 1, or a predicate such as defined(NAME))"
        ));
    };
    let args = args.strip_suffix(')').unwrap_or(args);
    let two = || {
        args.split_once(',')
            .map(|(x, y)| (unquote(x), unquote(y)))
            .ok_or_else(|| format!("`{name}` takes two strings"))
    };
    Ok(match name {
        "defined" | "feature" | "enabled" => Tri::Env,
        "streq" => two().map(|(x, y)| Tri::Known(x == y))?,
        "strneq" => two().map(|(x, y)| Tri::Known(x != y))?,
        "strstr" => two().map(|(x, y)| Tri::Known(x.contains(&y)))?,
        "version_atleast" | "version_before" => {
            let v = version(args.trim())
                .ok_or_else(|| format!("`{name}` expects a version such as 2.8"))?;
            let atleast = if v <= OLDEST {
                Tri::Known(true)
            } else if v >= BEYOND {
                Tri::Known(false)
            } else {
                Tri::Env
            };
            match (name, atleast) {
                ("version_before", Tri::Known(b)) => Tri::Known(!b),
                (_, t) => t,
            }
        }
        n if n.starts_with("openssl_") || n.starts_with("ssllib_") || n.starts_with("awslc_") => {
            Tri::Env
        }
        _ => {
            return Err(format!(
                "`{name}()` is not a predicate of HAProxy 2.6–3.x; both branches are read"
            ));
        }
    })
}

/// One line as read in one combination of choices.
pub struct Active<'a> {
    /// 1-based line.
    pub line: u32,
    /// Its text.
    pub text: &'a str,
    /// The choices on the way to it.
    pub assumes: Assumption,
}

/// The choices of a file, in order of first use (at most [`MAX_CHOICES`]),
/// and the problems found with its directives.
pub fn choices(lines: &[&str]) -> (Vec<Choice>, Vec<(u32, String)>) {
    let mut out: Vec<Choice> = Vec::new();
    let mut errors = Vec::new();
    for (i, raw) in lines.iter().enumerate() {
        let Some((name @ ("if" | "elif"), expr)) = directive(raw.trim()) else {
            continue;
        };
        let line = i as u32 + 1;
        let e = normalise(expr);
        let t = match eval(expr) {
            Ok(t) => t,
            Err(m) => {
                errors.push((line, format!(".{name}: {m}")));
                Tri::Env
            }
        };
        if t == Tri::Env && !out.iter().any(|c| c.expr == e) {
            if out.len() == MAX_CHOICES {
                errors.push((line, format!(
                    ".{name} {e}: more than {MAX_CHOICES} conditions depend on the environment in this file; this one is read as false (only its other branch is audited). Audit the configuration as rendered for each environment, or split it"
                )));
                continue;
            }
            out.push(Choice {
                directive: format!(".{name}"),
                expr: e,
                line,
            });
        }
    }
    (out, errors)
}

struct Frame {
    line: u32,
    /// The enclosing block is read.
    parent: bool,
    /// A branch of this block has been read (or decided).
    taken: bool,
    /// The current branch is read.
    active: bool,
    seen_else: bool,
    /// Length of the assumption when the block opened.
    mark: usize,
}

/// The lines read under one combination of choices (`world`: bit i is
/// choice i's value), and the directive problems (line, message).
pub fn active<'a>(
    lines: &[&'a str],
    choices: &[Choice],
    world: usize,
) -> (Vec<Active<'a>>, Vec<(u32, String)>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut assumes: Assumption = Vec::new();
    let decide = |expr: &str, assumes: &mut Assumption| -> bool {
        match eval(expr) {
            Ok(Tri::Known(b)) => b,
            _ => {
                let e = normalise(expr);
                match choices.iter().position(|c| c.expr == e) {
                    Some(i) => {
                        let v = world & (1 << i) != 0;
                        assumes.push((i, v));
                        v
                    }
                    None => false,
                }
            }
        }
    };
    for (i, raw) in lines.iter().enumerate() {
        let line = i as u32 + 1;
        let reading = stack.last().is_none_or(|f| f.active);
        let Some((name, arg)) = directive(raw.trim()) else {
            if reading {
                out.push(Active {
                    line,
                    text: raw,
                    assumes: assumes.clone(),
                });
            }
            continue;
        };
        match name {
            "if" => {
                let mark = assumes.len();
                let deep = stack.len() >= MAX_NESTING;
                if deep && reading {
                    errors.push((line, format!(
                        "conditional blocks nested deeper than {MAX_NESTING} levels: the lines up to the matching .endif are not read"
                    )));
                }
                let v = reading && !deep && decide(arg, &mut assumes);
                stack.push(Frame {
                    line,
                    parent: reading && !deep,
                    taken: v,
                    active: v,
                    seen_else: false,
                    mark,
                });
            }
            "elif" | "else" => {
                let Some(f) = stack.last_mut() else {
                    errors.push((line, format!(".{name} without a matching .if")));
                    continue;
                };
                if f.seen_else {
                    errors.push((
                        line,
                        format!(".{name} after .else in the block opened at line {}", f.line),
                    ));
                }
                if name == "else" {
                    f.seen_else = true;
                }
                if !f.parent || f.taken {
                    f.active = false;
                    continue;
                }
                let v = name == "else" || decide(arg, &mut assumes);
                f.active = v;
                f.taken = v;
            }
            "endif" => match stack.pop() {
                Some(f) => assumes.truncate(f.mark),
                None => errors.push((line, ".endif without a matching .if".into())),
            },
            _ => {}
        }
    }
    for f in stack {
        errors.push((
            f.line,
            ".if without a matching .endif: the lines after it were read as in its branches".into(),
        ));
    }
    (out, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_evaluated_or_left_to_the_environment() {
        assert_eq!(eval("1"), Ok(Tri::Known(true)));
        assert_eq!(eval("0"), Ok(Tri::Known(false)));
        assert_eq!(eval(""), Ok(Tri::Known(false)));
        assert_eq!(eval("defined(PROD)"), Ok(Tri::Env));
        assert_eq!(eval("\"$PROD\""), Ok(Tri::Env));
        assert_eq!(eval("0 && defined(PROD)"), Ok(Tri::Known(false)));
        assert_eq!(eval("!(1 || defined(PROD))"), Ok(Tri::Known(false)));
        assert_eq!(eval("streq(a,a)"), Ok(Tri::Known(true)));
        assert_eq!(eval("strneq(\"a\",'a')"), Ok(Tri::Known(false)));
        assert_eq!(eval("streq(${X},a)"), Ok(Tri::Env));
        assert_eq!(eval("version_atleast(2.4)"), Ok(Tri::Known(true)));
        assert_eq!(eval("version_atleast(3.0)"), Ok(Tri::Env));
        assert_eq!(eval("version_before(2.6)"), Ok(Tri::Known(false)));
        assert_eq!(eval("version_atleast(4.1)"), Ok(Tri::Known(false)));
        assert_eq!(eval("feature(QUIC)"), Ok(Tri::Env));
        assert!(eval("bogus(1)").is_err());
        assert!(eval("1 & 0").is_err());
    }

    #[test]
    fn branches_per_world() {
        let text = ".if defined(A)\na\n.elif 1\nb\n.else\nc\n.endif\n.if 0\nd\n.endif\ne";
        let lines: Vec<&str> = text.lines().collect();
        let (ch, e) = choices(&lines);
        assert!(e.is_empty());
        assert_eq!(ch.len(), 1);
        let read = |w| {
            active(&lines, &ch, w)
                .0
                .iter()
                .map(|a| a.text)
                .collect::<Vec<_>>()
        };
        assert_eq!(read(1), ["a", "e"]);
        assert_eq!(read(0), ["b", "e"]);
        let (a, _) = active(&lines, &ch, 1);
        assert_eq!(a[0].assumes, vec![(0, true)]);
        assert!(a[1].assumes.is_empty());
    }

    #[test]
    fn nesting_is_bounded_and_unbalanced_blocks_reported() {
        let deep = ".if 1\n".repeat(MAX_NESTING + 1) + "x\n" + &".endif\n".repeat(MAX_NESTING + 1);
        let lines: Vec<&str> = deep.lines().collect();
        let (a, e) = active(&lines, &[], 0);
        assert!(a.is_empty());
        assert_eq!(e.len(), 1);
        let (_, e) = active(&[".endif", ".if 1"], &[], 0);
        assert_eq!(e.len(), 2);
    }
}
