//! One configuration line split into words as HAProxy splits it
//! (Configuration Manual, 2.2 "Quoting and escaping" and 2.3 "Environment
//! variables"): whitespace separates words; `"…"` groups and still
//! expands `$VAR`/`${VAR}` and backslash escapes; `'…'` groups literally;
//! outside single quotes a backslash escapes the next character; an
//! unquoted, unescaped `#` starts a comment.
//!
//! The audit does not know the environment HAProxy will start in, so a
//! word that takes anything from an environment variable is marked with
//! the variable's name: its value is unknown, never read as empty, 0 or
//! the literal `${VAR}`.

/// One word of a line.
#[derive(Debug, Clone, PartialEq)]
pub struct Word {
    /// The text, with quotes and escapes resolved; an environment variable
    /// appears as `${NAME}`.
    pub text: String,
    /// The first environment variable the word takes its value from.
    pub env: Option<String>,
}

/// Splits one line into words; the rest of the line after an unquoted `#`
/// is dropped.
pub fn words(line: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut cur: Option<Word> = None;
    let mut chars = line.chars().peekable();
    let (mut squote, mut dquote) = (false, false);
    fn start(cur: &mut Option<Word>) -> &mut Word {
        cur.get_or_insert_with(|| Word {
            text: String::new(),
            env: None,
        })
    }
    while let Some(c) = chars.next() {
        if squote {
            if c == '\'' {
                squote = false;
            } else {
                start(&mut cur).text.push(c);
            }
            continue;
        }
        match c {
            '\'' if !dquote => {
                squote = true;
                start(&mut cur);
            }
            '"' => {
                dquote = !dquote;
                start(&mut cur);
            }
            '\\' => {
                let w = start(&mut cur);
                match chars.next() {
                    Some('n') => w.text.push('\n'),
                    Some('r') => w.text.push('\r'),
                    Some('t') => w.text.push('\t'),
                    Some(other) => w.text.push(other),
                    None => {}
                }
            }
            '$' => {
                let braced = chars.peek() == Some(&'{');
                if braced {
                    chars.next();
                }
                let mut name = String::new();
                while let Some(&n) = chars.peek() {
                    if n.is_ascii_alphanumeric() || n == '_' {
                        name.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                if braced {
                    // `${NAME-default}`, `${NAME[*]}`: the whole reference.
                    for n in chars.by_ref() {
                        if n == '}' {
                            break;
                        }
                    }
                }
                let w = start(&mut cur);
                if name.is_empty() {
                    w.text.push('$');
                } else {
                    w.text.push_str(&format!("${{{name}}}"));
                    w.env.get_or_insert(name);
                }
            }
            '#' if !dquote => break,
            c if c.is_whitespace() && !dquote => {
                if let Some(w) = cur.take() {
                    out.push(w);
                }
            }
            c => start(&mut cur).text.push(c),
        }
    }
    if let Some(w) = cur {
        out.push(w);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(l: &str) -> Vec<String> {
        words(l).into_iter().map(|w| w.text).collect()
    }

    #[test]
    fn quotes_escapes_and_comments() {
        assert_eq!(texts(r#"  maxconn "1000""#), ["maxconn", "1000"]);
        assert_eq!(texts("  maxconn '1000' # note"), ["maxconn", "1000"]);
        assert_eq!(texts(r"  x a\ b \#c d#e"), ["x", "a b", "#c", "d"]);
        assert_eq!(texts(r#"x "a # b" 'c"d' """#), ["x", "a # b", "c\"d", ""]);
        assert_eq!(texts(r#"x "a\"b""#), ["x", "a\"b"]);
    }

    #[test]
    fn environment_variables_are_marked_not_expanded() {
        let w = words(r#"maxconn "${FE_MAXCONN}" $RETRIES '${LIT}' ${X-10}"#);
        assert_eq!(w[1].env.as_deref(), Some("FE_MAXCONN"));
        assert_eq!(w[2].env.as_deref(), Some("RETRIES"));
        assert_eq!((w[3].text.as_str(), w[3].env.as_deref()), ("${LIT}", None));
        assert_eq!(w[4].env.as_deref(), Some("X"));
    }
}
