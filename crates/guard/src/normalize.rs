//! One normalised view of a request's path and host, for routing rules to match.
//!
//! Rules (a host plus a path prefix matched on whole segments, perhaps with a 403 shed
//! rule) were bypassed by equivalent spellings of a target: `/public/../admin/x`,
//! `//admin/x`, `/%61dmin/x`, `/%2e%2e/admin`, host `internal.example.` or
//! `INTERNAL.example:443`.  Rules therefore see only what [`path`] and [`host`] return.
//! Backends do not all agree with that view, so [`readings`] lists the other paths a
//! backend may plausibly act on; the proxy refuses a request when any of them routes
//! differently from [`path`]'s.

use std::borrow::Cow;
use std::fmt;
use std::net::Ipv6Addr;

/// Why a request target or host is refused (the proxy answers 400 with this text).
///
/// The text names the broken rule and never echoes the input, so the 400 body cannot be
/// used to reflect attacker-chosen bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// The path is neither `*` nor starts with `/`: not origin-form (RFC 9112 §3.2.1)
    /// nor asterisk-form (RFC 9112 §3.2.4), so no rule could be matched on it.
    PathNotAbsolute,
    /// A `%` not followed by two hex digits (RFC 3986 §2.1); backends disagree on what it
    /// means, so no single reading exists.
    PercentEncoding,
    /// No host: an empty value, only a port, or only a dot.
    EmptyHost,
    /// `user@host`: RFC 9110 §4.2.4 says to treat userinfo as an error, and readers that
    /// split on a different `@` see different hosts.
    UserInfo,
    /// An empty label (`a..b`, `.a`, or more than one trailing dot).
    EmptyLabel,
    /// A character outside reg-name letters, digits, `-`, `.` and `_`.
    HostCharacter,
    /// A bracketed IP literal that is not a plain IPv6 address (no zone, no `IPvFuture`).
    IpLiteral,
    /// A port that is not decimal digits, or is above 65535.
    Port,
}

impl fmt::Display for Malformed {
    /// Writes the short reason sent in the 400 response.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::PathNotAbsolute => "request path does not start with '/'",
            Self::PercentEncoding => "malformed percent-encoding in path",
            Self::EmptyHost => "empty host",
            Self::UserInfo => "userinfo in host",
            Self::EmptyLabel => "empty label in host",
            Self::HostCharacter => "invalid character in host",
            Self::IpLiteral => "malformed IP literal in host",
            Self::Port => "invalid port in host",
        })
    }
}

impl std::error::Error for Malformed {}

/// RFC 3986 §6.2.2 syntax normalisation of an origin-form path (RFC 9112 §3.2.1).
///
/// `raw` is the path alone (`http::Uri::path()`): a `?` or `#` in it is an ordinary byte.
/// In order:
/// 1. percent-encodings of unreserved characters (RFC 3986 §2.3: ALPHA DIGIT `-` `.` `_`
///    `~`) are decoded and the hex of every other one is upper-cased (§6.2.2.1, §6.2.2.2);
///    `%2F` stays encoded, since decoding it would change the segments (§2.2);
/// 2. runs of `/` are merged into one, as nginx's `merge_slashes` and Envoy's
///    `merge_slashes` do, so `//admin` cannot dodge an `/admin` rule;
/// 3. dot segments are removed (§5.2.4, §6.2.2.3); `..` above the root stays at the root.
///
/// Merging before removing dots means `/a//../b` is `/b`; [`readings`] covers backends
/// that do it the other way round.
///
/// Returns `raw` borrowed when it is already normal; one scan and no allocation when it
/// has no `%`, no `//` and no `.` or `..` segment, as almost every real path.
///
/// Exactly `*` (asterisk-form, RFC 9112 §3.2.4) is returned as is.  Anything else not
/// starting with `/` is refused, including the empty path that `http::Uri::path()`
/// gives for authority-form (CONNECT) targets.
pub(crate) fn path(raw: &str) -> Result<Cow<'_, str>, Malformed> {
    if raw == "*" {
        return Ok(Cow::Borrowed(raw));
    }
    if !raw.starts_with('/') {
        return Err(Malformed::PathNotAbsolute);
    }
    if is_normal_path(raw) {
        return Ok(Cow::Borrowed(raw));
    }
    let normal = remove_dot_segments(&decode_unreserved(raw, true)?);
    // A path whose only oddity is an already upper-case `%XX` comes out unchanged;
    // borrowing it keeps `path(path(x))` as cheap as `path(x)`.
    if normal == raw {
        Ok(Cow::Borrowed(raw))
    } else {
        Ok(Cow::Owned(normal))
    }
}

/// The other paths a backend may read from `raw`, so the proxy can check that each one
/// routes where `path(raw)` routes.
///
/// Each element is a whole path, already normal (`path(r)` is `r`), none equal to
/// `path(raw)` and no two equal.  Empty — and no allocation — unless `raw` has a `\`, a
/// `;`, a `//` or an encoded slash or backslash, as almost every real path.  Also empty
/// when [`path`] refuses `raw`: call [`path`] first.
///
/// Readings, and the servers that take them:
/// 1. dot segments removed before slashes are merged (`/a//../b` is `/a/b`, not `/b`):
///    RFC 3986 §5.2.4 treats an empty segment as a segment; Envoy with `normalize_path`
///    and `merge_slashes` (Envoy, "Configuring Envoy as an edge proxy") canonicalises
///    dots first and merges after;
/// 2. `%2F` and `%5C` (either case) decoded and a literal `\` read as `/`, then
///    normalised like [`path`]: Envoy's `path_with_escaped_slashes_action`
///    `UNESCAPE_AND_FORWARD`/`UNESCAPE_AND_REDIRECT`, Apache httpd's
///    `AllowEncodedSlashes On`, Tomcat's `encodedSolidusHandling="decode"`, and IIS and
///    other Windows servers that take `\` for `/`;
/// 3. path parameters stripped (`;` to the end of each segment, so `/public/..;/admin` is
///    `/public/../admin`, which is `/admin`), then normalised: Servlet containers such as
///    Tomcat and Jetty, and Spring, which Orange Tsai's "Breaking Parser Logic"
///    (Black Hat USA 2018) used through `..;/`;
/// 4. 2 and 3 in both orders (a Servlet container with encoded slashes allowed), and each
///    of 2 and 3 with the dot-first order of 1.
///
/// Not covered: double decoding (`%252F`) and reading a leading `//` as an authority.
pub(crate) fn readings(raw: &str) -> Vec<String> {
    let mut escaped_separator = false;
    let mut parameters = false;
    let mut empty_segment = false;
    let bytes = raw.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\\' => escaped_separator = true,
            b';' => parameters = true,
            b'/' if bytes.get(i + 1) == Some(&b'/') => empty_segment = true,
            b'%' => escaped_separator |= encoded_separator(bytes, i).is_some(),
            _ => {}
        }
    }
    if !(escaped_separator || parameters || empty_segment) {
        return Vec::new();
    }
    let Ok(canonical) = path(raw) else {
        return Vec::new();
    };

    let mut spellings: Vec<Cow<'_, str>> = vec![Cow::Borrowed(raw)];
    if escaped_separator {
        spellings.push(Cow::Owned(decode_separators(raw)));
    }
    if parameters {
        let stripped = strip_parameters(raw);
        if escaped_separator {
            spellings.push(Cow::Owned(decode_separators(&stripped)));
            spellings.push(Cow::Owned(strip_parameters(&decode_separators(raw))));
        }
        spellings.push(Cow::Owned(stripped));
    }

    let mut out: Vec<String> = Vec::new();
    let mut keep = |reading: Result<String, Malformed>| {
        if let Some(reading) = reading.ok().filter(|r| *r != canonical && !out.contains(r)) {
            out.push(reading);
        }
    };
    for spelling in &spellings {
        keep(path(spelling).map(Cow::into_owned));
        // Without an empty segment both orders agree, so the second costs nothing useful.
        if spelling.contains("//") {
            keep(dots_before_merge(spelling));
        }
    }
    out
}

/// The host that rules match, from an authority or a `Host` value (RFC 9110 §7.2).
///
/// The port is removed (RFC 3986 §3.2.3; an empty port is allowed, §6.2.3), the name
/// ASCII lower-cased (§3.2.2, §6.2.2.1) and one trailing dot removed (§3.2.2: a fully
/// qualified DNS name may end in a single `.`, which names the same host).
///
/// A bracketed IPv6 literal keeps its brackets, in RFC 5952 §4 canonical text
/// (`[0:0::1]:8080` is `[::1]`): without brackets the result would not parse as a host
/// again, and `http::uri::Authority::host()` keeps them too.
///
/// Refused: an empty host; userinfo (`user@host`, RFC 9110 §4.2.4); an empty label,
/// including more than one trailing dot; any character but letters, digits, `-`, `.`
/// and `_` outside brackets (so no percent-encoded reg-name); an IP literal other than
/// plain IPv6 (no zone, no `IPvFuture`); a port that is not decimal or above 65535.
///
/// Returns a borrowed slice of `authority` when the name is already lower-case with at
/// most a port and one trailing dot to cut, with no allocation.
///
/// The caller checks that an absolute-form target's authority and `Host` agree, or
/// uses the former as RFC 9112 §3.2.2 requires; this function sees one of them.
pub(crate) fn host(authority: &str) -> Result<Cow<'_, str>, Malformed> {
    if authority.contains('@') {
        return Err(Malformed::UserInfo);
    }
    let (name, port) = if authority.starts_with('[') {
        let close = authority.find(']').ok_or(Malformed::IpLiteral)?;
        let (literal, rest) = authority.split_at(close + 1);
        let port = match rest.strip_prefix(':') {
            Some(port) => port,
            None if rest.is_empty() => "",
            None => return Err(Malformed::IpLiteral),
        };
        (literal, port)
    } else {
        authority.split_once(':').unwrap_or((authority, ""))
    };
    // `u16::from_str` alone would take `+80`; digits first keeps one spelling per port.
    if !port.bytes().all(|b| b.is_ascii_digit())
        || (!port.is_empty() && port.parse::<u16>().is_err())
    {
        return Err(Malformed::Port);
    }

    if let Some(inner) = name.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or(Malformed::IpLiteral)?;
        let address: Ipv6Addr = inner.parse().map_err(|_| Malformed::IpLiteral)?;
        let canonical = format!("[{address}]");
        return Ok(if canonical == name {
            Cow::Borrowed(name)
        } else {
            Cow::Owned(canonical)
        });
    }

    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(Malformed::HostCharacter);
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return Err(Malformed::EmptyHost);
    }
    if name.split('.').any(str::is_empty) {
        return Err(Malformed::EmptyLabel);
    }
    Ok(if name.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(name.to_ascii_lowercase())
    } else {
        Cow::Borrowed(name)
    })
}

/// Whether [`path`] would return `raw` unchanged, judged in one scan without allocating;
/// `raw` starts with `/`.
fn is_normal_path(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    let mut segment_start = 1;
    for i in 1..=bytes.len() {
        match bytes.get(i) {
            Some(b'%') => return false,
            Some(b'/') | None => {
                let segment = &bytes[segment_start..i];
                // An empty segment is `//`, except the last one, which is a trailing slash.
                if (segment.is_empty() && i < bytes.len()) || segment == b"." || segment == b".." {
                    return false;
                }
                segment_start = i + 1;
            }
            Some(_) => {}
        }
    }
    true
}

/// RFC 3986 §6.2.2.1 and §6.2.2.2 on `raw`: unreserved percent-encodings decoded, others'
/// hex upper-cased; with `merge`, runs of `/` merged too.
///
/// Decoding never yields `/` (`%2F` is reserved), so merging in the same pass sees the
/// slashes that the final path will have.
fn decode_unreserved(raw: &str, merge: bool) -> Result<String, Malformed> {
    let bytes = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    // Unchanged runs are copied as `&str` slices so non-ASCII bytes pass through intact.
    let mut run_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let (high, low) = hex_pair(bytes, i).ok_or(Malformed::PercentEncoding)?;
                out.push_str(&raw[run_start..i]);
                let byte = high << 4 | low;
                if is_unreserved(byte) {
                    out.push(char::from(byte));
                } else {
                    out.push('%');
                    out.push(upper_hex(high));
                    out.push(upper_hex(low));
                }
                i += 3;
                run_start = i;
            }
            b'/' if merge && i > 0 && bytes[i - 1] == b'/' => {
                out.push_str(&raw[run_start..i]);
                i += 1;
                run_start = i;
            }
            _ => i += 1,
        }
    }
    out.push_str(&raw[run_start..]);
    Ok(out)
}

/// RFC 3986 §5.2.4 `remove_dot_segments` for a path starting with `/`, with empty
/// segments kept as segments, as the RFC's algorithm does.
fn remove_dot_segments(path: &str) -> String {
    let rest = path.strip_prefix('/').unwrap_or(path);
    let mut kept: Vec<&str> = Vec::new();
    let mut segments = rest.split('/').peekable();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        match segment {
            "." | ".." => {
                if segment == ".." {
                    kept.pop();
                }
                // §5.2.4 leaves the slash before a final dot segment: `/a/b/..` is `/a/`.
                if last {
                    kept.push("");
                }
            }
            _ => kept.push(segment),
        }
    }
    let mut out = String::with_capacity(path.len());
    for segment in kept {
        out.push('/');
        out.push_str(segment);
    }
    out
}

/// Reading 1 of [`readings`]: unreserved decoding, then dot segments removed with empty
/// segments counted, then slashes merged.
fn dots_before_merge(spelling: &str) -> Result<String, Malformed> {
    if !spelling.starts_with('/') {
        return Err(Malformed::PathNotAbsolute);
    }
    let without_dots = remove_dot_segments(&decode_unreserved(spelling, false)?);
    let mut out = String::with_capacity(without_dots.len());
    for c in without_dots.chars() {
        if !(c == '/' && out.ends_with('/')) {
            out.push(c);
        }
    }
    Ok(out)
}

/// Reading 2 of [`readings`]: `%2F`, `%5C` and `\` all become `/`.
///
/// Other percent-encodings, malformed ones included, are left for [`path`] to judge.
fn decode_separators(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let mut run_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let width = match bytes[i] {
            b'\\' => 1,
            b'%' if encoded_separator(bytes, i).is_some() => 3,
            // Stepping over a whole triplet keeps `%252F` from being read as `%2F`.
            b'%' if hex_pair(bytes, i).is_some() => {
                i += 3;
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        };
        out.push_str(&raw[run_start..i]);
        out.push('/');
        i += width;
        run_start = i;
    }
    out.push_str(&raw[run_start..]);
    out
}

/// Reading 3 of [`readings`]: each segment cut at its first `;`.
///
/// Only a literal `;` counts: Servlet containers strip parameters before decoding, so
/// `%3B` is data to them.
fn strip_parameters(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for (i, segment) in raw.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(segment.split_once(';').map_or(segment, |(kept, _)| kept));
    }
    out
}

/// The separator that `%2F` or `%5C` (either case) at `bytes[i]` encodes, if it is one.
fn encoded_separator(bytes: &[u8], i: usize) -> Option<u8> {
    match hex_pair(bytes, i)? {
        (2, 0xF) => Some(b'/'),
        (5, 0xC) => Some(b'\\'),
        _ => None,
    }
}

/// The two hex digit values after the `%` at `bytes[i]`, if both are hex digits.
fn hex_pair(bytes: &[u8], i: usize) -> Option<(u8, u8)> {
    Some((
        hex_value(*bytes.get(i + 1)?)?,
        hex_value(*bytes.get(i + 2)?)?,
    ))
}

/// The value of one hex digit, either case.
fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// The upper-case hex digit for a value below 16 (RFC 3986 §2.1 prefers upper case).
fn upper_hex(value: u8) -> char {
    char::from(b"0123456789ABCDEF"[usize::from(value & 0xF)])
}

/// RFC 3986 §2.3 unreserved: ALPHA DIGIT `-` `.` `_` `~`.
fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Asserts `path(raw)` is `Ok(expected)`, with `raw` in the message.
    fn assert_path(raw: &str, expected: &str) {
        assert_eq!(path(raw).as_deref(), Ok(expected), "path({raw:?})");
    }

    /// Asserts `host(raw)` is `Ok(expected)`, with `raw` in the message.
    fn assert_host(raw: &str, expected: &str) {
        assert_eq!(host(raw).as_deref(), Ok(expected), "host({raw:?})");
    }

    /// The path bypasses that prompted this module all land on `/admin`.
    #[test]
    fn path_bypasses_normalise_to_admin() {
        assert_path("/public/../admin/x", "/admin/x");
        assert_path("//admin/x", "/admin/x");
        assert_path("/%61dmin/x", "/admin/x");
        assert_path("/%2e%2e/admin", "/admin");
        assert_path("/%2e%2E/admin", "/admin");
        assert_path("/public/%2E%2e/admin", "/admin");
        assert_path("/public/.%2e/admin", "/admin");
        assert_path("/./admin", "/admin");
        assert_path("/public//..//admin", "/admin");
    }

    /// RFC 3986 §5.2.4's own example and the §5.4 examples that carry dot segments,
    /// each written as the merged path (§5.2.3) against base path `/b/c/d;p`.
    #[test]
    fn rfc3986_dot_segment_examples() {
        assert_path("/a/b/c/./../../g", "/a/g");
        let cases = [
            // §5.4.1 normal examples.
            (".", "/b/c/"),
            ("./", "/b/c/"),
            ("..", "/b/"),
            ("../", "/b/"),
            ("../g", "/b/g"),
            ("../..", "/"),
            ("../../", "/"),
            ("../../g", "/g"),
            ("./g", "/b/c/g"),
            // §5.4.2 abnormal examples.
            ("../../../g", "/g"),
            ("../../../../g", "/g"),
            ("g.", "/b/c/g."),
            (".g", "/b/c/.g"),
            ("g..", "/b/c/g.."),
            ("..g", "/b/c/..g"),
            ("./../g", "/b/g"),
            ("./g/.", "/b/c/g/"),
            ("g/./h", "/b/c/g/h"),
            ("g/../h", "/b/c/h"),
            ("g;x=1/./y", "/b/c/g;x=1/y"),
            ("g;x=1/../y", "/b/c/y"),
        ];
        for (reference, expected) in cases {
            assert_path(&format!("/b/c/{reference}"), expected);
        }
        assert_path("/./g", "/g");
        assert_path("/../g", "/g");
    }

    /// §6.2.2.2: reserved and other non-unreserved encodings stay encoded, hex upper-cased.
    #[test]
    fn reserved_encodings_stay_encoded_in_upper_case() {
        assert_path("/a%2fb", "/a%2Fb");
        assert_path("/a%2Fb", "/a%2Fb");
        assert_path("/%c3%a9t%C3%A9", "/%C3%A9t%C3%A9");
        assert_path("/%25%3b%5c", "/%25%3B%5C");
        assert_path("/%7e%5F%2D%2e%41%7A%30", "/~_-.Az0");
        assert_path("/%2e", "/");
        assert_path("/a/%2e%2e%2f", "/a/..%2F");
    }

    /// §2.1: a `%` must be followed by two hex digits.
    #[test]
    fn malformed_percent_encoding_is_refused() {
        for raw in [
            "/%", "/a%", "/a%4", "/%zz", "/%z1", "/%1z", "/%%41", "/a/%g0/b",
        ] {
            assert_eq!(path(raw), Err(Malformed::PercentEncoding), "{raw:?}");
        }
        assert_eq!(
            Malformed::PercentEncoding.to_string(),
            "malformed percent-encoding in path"
        );
    }

    /// Only origin-form paths and asterisk-form are accepted (RFC 9112 §3.2).
    #[test]
    fn non_origin_form_is_refused_except_asterisk() {
        assert!(matches!(path("*"), Ok(Cow::Borrowed("*"))));
        for raw in ["", "a/b", "**", "%2F", "http://h/"] {
            assert_eq!(path(raw), Err(Malformed::PathNotAbsolute), "{raw:?}");
        }
    }

    /// The hot path borrows; so does a `%`-bearing path that is already normal.
    #[test]
    fn normal_paths_are_borrowed() {
        for raw in [
            "/",
            "/api/v1/users",
            "/api/v1/users/",
            "/.well-known/acme-challenge/x",
            "/a.b/..c/.../c.",
            "/a;b=c/d",
            "/a%2Fb/%C3%A9",
        ] {
            assert!(matches!(path(raw), Ok(Cow::Borrowed(_))), "{raw:?}");
        }
        assert!(matches!(path("/a//b"), Ok(Cow::Owned(_))));
    }

    /// What `http` hands the proxy: `Uri::path()` for each request-target form, and the
    /// bypass targets pass its parser untouched.
    #[test]
    fn http_uri_paths_feed_path() {
        let uri: http::Uri = "/public/..;/admin?q=1".parse().unwrap();
        assert_eq!(uri.path(), "/public/..;/admin");
        assert_eq!(path(uri.path()).as_deref(), Ok("/public/..;/admin"));
        let uri: http::Uri = "/%2e%2E/admin".parse().unwrap();
        assert_path(uri.path(), "/admin");
        let uri: http::Uri = "/a\\..\\admin".parse().unwrap();
        assert_eq!(uri.path(), "/a\\..\\admin");
        let uri: http::Uri = "http://INTERNAL.example.:443".parse().unwrap();
        assert_path(uri.path(), "/");
        assert_host(uri.authority().unwrap().as_str(), "internal.example");
        let uri: http::Uri = "internal.example:443".parse().unwrap();
        assert_eq!(path(uri.path()), Err(Malformed::PathNotAbsolute));
        let uri: http::Uri = "*".parse().unwrap();
        assert_path(uri.path(), "*");
    }

    /// No `%`, `\`, `;` or `//` means no other reading and no allocation.
    #[test]
    fn readings_fast_path_is_empty() {
        for raw in [
            "/",
            "/api/v1/users",
            "/a/./b/../c",
            "/%2e%2e/a",
            "/a%3Bb",
            "*",
            "",
        ] {
            let found = readings(raw);
            assert!(found.is_empty(), "{raw:?}: {found:?}");
            assert_eq!(found.capacity(), 0);
        }
    }

    /// Reading 1: `/a//../b` is `/a/b` when dots go before merging.
    #[test]
    fn reading_dots_before_merge() {
        assert_path("/a//../b", "/b");
        assert_eq!(readings("/a//../b"), ["/a/b"]);
        assert_eq!(readings("/admin//%2e%2e/public"), ["/admin/public"]);
        assert!(readings("//admin/x").is_empty());
    }

    /// Reading 2: encoded slash and backslash, and a literal backslash.
    #[test]
    fn reading_decoded_separators() {
        assert_path("/public/..%2fadmin", "/public/..%2Fadmin");
        assert_eq!(readings("/public/..%2fadmin"), ["/admin"]);
        assert_eq!(readings("/public/..%5Cadmin"), ["/admin"]);
        assert_eq!(readings("/public\\..\\admin"), ["/admin"]);
        assert_eq!(readings("/a%2Fb"), ["/a/b"]);
        // Dot-first order applied to the decoded path.
        assert_eq!(readings("/a/%2F../b"), ["/b", "/a/b"]);
        // `%25` is a whole triplet: `%252F` is not an encoded slash.
        assert!(readings("/a%252Fb").is_empty());
    }

    /// Reading 3: `..;/` (Orange Tsai, "Breaking Parser Logic") and `;jsessionid`.
    #[test]
    fn reading_stripped_parameters() {
        assert_path("/public/..;/admin", "/public/..;/admin");
        assert_eq!(readings("/public/..;/admin"), ["/admin"]);
        assert_eq!(readings("/admin;jsessionid=1/x"), ["/admin/x"]);
        assert_eq!(readings("/public/.;x/admin"), ["/public/admin"]);
    }

    /// Readings 2 and 3 combined, in both orders.
    #[test]
    fn reading_separators_and_parameters_combined() {
        let found = readings("/x;%2F../admin");
        assert!(found.contains(&"/admin".to_owned()), "{found:?}");
        assert!(found.contains(&"/x/admin".to_owned()), "{found:?}");
        let found = readings("/public/..;x%2F..%2Fadmin");
        assert!(found.contains(&"/admin".to_owned()), "{found:?}");
    }

    /// A refused path has no readings to check.
    #[test]
    fn readings_of_refused_path_are_empty() {
        assert!(readings("/a;%zz").is_empty());
        assert!(readings("a//b").is_empty());
    }

    /// The host bypasses that prompted this module: trailing dot, case and port.
    #[test]
    fn host_bypasses_normalise() {
        assert_host("internal.example.", "internal.example");
        assert_host("INTERNAL.example:443", "internal.example");
        assert_host("Internal.Example.:8443", "internal.example");
        assert_host("internal.example:", "internal.example");
        assert_host("127.0.0.1:80", "127.0.0.1");
        assert_host("under_score.example", "under_score.example");
    }

    /// Bracketed IPv6 keeps its brackets in RFC 5952 canonical text; port removed.
    #[test]
    fn host_ipv6_literals() {
        assert_host("[::1]", "[::1]");
        assert_host("[::1]:8080", "[::1]");
        assert_host("[0:0:0:0:0:0:0:1]", "[::1]");
        assert_host("[2001:DB8::A]:443", "[2001:db8::a]");
        assert!(matches!(host("[::1]:80"), Ok(Cow::Borrowed("[::1]"))));
        for raw in [
            "[::1",
            "[]",
            "[zz::1]",
            "[::1]x",
            "[fe80::1%25eth0]",
            "[v1.x]",
        ] {
            assert_eq!(host(raw), Err(Malformed::IpLiteral), "{raw:?}");
        }
        assert_eq!(host("::1"), Err(Malformed::Port));
        assert_eq!(host("[::1]:80]"), Err(Malformed::Port));
    }

    /// Each refusal reason of `host`.
    #[test]
    fn host_refusals() {
        let cases = [
            ("", Malformed::EmptyHost),
            (":80", Malformed::EmptyHost),
            (".", Malformed::EmptyHost),
            (".:80", Malformed::EmptyHost),
            ("user@internal.example", Malformed::UserInfo),
            ("public.example@internal.example", Malformed::UserInfo),
            ("a..b", Malformed::EmptyLabel),
            ("a..", Malformed::EmptyLabel),
            ("..", Malformed::EmptyLabel),
            (".a", Malformed::EmptyLabel),
            ("a b", Malformed::HostCharacter),
            ("a%2eb", Malformed::HostCharacter),
            ("ex\u{e4}mple", Malformed::HostCharacter),
            ("a/b", Malformed::HostCharacter),
            ("host:8o", Malformed::Port),
            ("host:+80", Malformed::Port),
            ("host:65536", Malformed::Port),
            ("host:80:80", Malformed::Port),
            ("host: 80", Malformed::Port),
        ];
        for (raw, expected) in cases {
            assert_eq!(host(raw), Err(expected), "{raw:?}");
        }
        assert_host("host:65535", "host");
        assert_host("host:00080", "host");
    }

    /// Already-normal hosts borrow, also when only a port or trailing dot is cut.
    #[test]
    fn normal_hosts_are_borrowed() {
        for raw in [
            "internal.example",
            "internal.example:443",
            "internal.example.",
        ] {
            assert!(
                matches!(host(raw), Ok(Cow::Borrowed("internal.example"))),
                "{raw:?}"
            );
        }
        assert!(matches!(host("Internal.example"), Ok(Cow::Owned(_))));
    }

    /// Every refusal has a short distinct reason.
    #[test]
    fn reasons_are_distinct() {
        let all = [
            Malformed::PathNotAbsolute,
            Malformed::PercentEncoding,
            Malformed::EmptyHost,
            Malformed::UserInfo,
            Malformed::EmptyLabel,
            Malformed::HostCharacter,
            Malformed::IpLiteral,
            Malformed::Port,
        ];
        let texts: std::collections::HashSet<String> =
            all.iter().map(ToString::to_string).collect();
        assert_eq!(texts.len(), all.len());
        assert!(texts.iter().all(|t| !t.is_empty() && t.len() < 48));
    }

    /// Pieces of canonical segments: unreserved characters (so the spelling can encode
    /// them) and characters `path` must keep as they are.
    const ATOMS: &[&str] = &[
        "a", "d", "m", "i", "n", ".", "-", "_", "~", "%2F", "%3B", "%25", "%5C", ";", "=", "\\",
    ];

    /// Segments the spelling inserts and then cancels with `..`, chosen to look like
    /// route prefixes.
    const DECOYS: &[&str] = &["admin", "public", "a", "..;", "x;y", "%2F", ".a", "..."];

    /// A small deterministic random source, so one proptest seed drives a whole spelling.
    pub(crate) struct Dice(pub(crate) u64);

    impl Dice {
        /// A number in `0..n` (`SplitMix64`; the bias of `%` is irrelevant here).
        fn roll(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) % n
        }

        /// True one time in `n`.
        fn one_in(&mut self, n: u64) -> bool {
            self.roll(n) == 0
        }
    }

    /// A canonical segment: 1–3 atoms, never a dot segment.
    fn segment() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(ATOMS), 1..4)
            .prop_map(|atoms| atoms.concat())
            .prop_filter("dot segment", |s| s != "." && s != "..")
    }

    /// A canonical path's segments: 0–6 segments, the last `""` for a trailing slash;
    /// `[""]` is `/`.
    pub(crate) fn canonical_segments() -> impl Strategy<Value = Vec<String>> {
        (prop::collection::vec(segment(), 0..=6), any::<bool>()).prop_map(|(mut segs, slash)| {
            if slash || segs.is_empty() {
                segs.push(String::new());
            }
            segs
        })
    }

    /// The path `segments` spell with single slashes.
    pub(crate) fn join(segments: &[String]) -> String {
        format!("/{}", segments.join("/"))
    }

    /// `c` as a percent-encoding with each hex digit in a random case.
    fn encode(c: u8, dice: &mut Dice) -> String {
        let mut out = String::from("%");
        for digit in [upper_hex(c >> 4), upper_hex(c & 0xF)] {
            out.push(if dice.one_in(2) {
                digit.to_ascii_lowercase()
            } else {
                digit
            });
        }
        out
    }

    /// Re-spells one segment: random unreserved characters encoded, the hex of existing
    /// encodings in random case.
    fn respell_segment(segment: &str, dice: &mut Dice) -> String {
        let bytes = segment.as_bytes();
        let mut out = String::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                let (high, low) = hex_pair(bytes, i).unwrap();
                out.push_str(&encode(high << 4 | low, dice));
                i += 3;
            } else {
                if is_unreserved(bytes[i]) && dice.one_in(3) {
                    out.push_str(&encode(bytes[i], dice));
                } else {
                    out.push(char::from(bytes[i]));
                }
                i += 1;
            }
        }
        out
    }

    /// A random spelling equivalent under [`path`] to `join(segments)`: `.` segments and
    /// `decoy/..` pairs inserted before existing segments (never after the last, which
    /// would add a trailing slash), `..` above the root, encodings and doubled slashes.
    pub(crate) fn spell(segments: &[String], dice: &mut Dice) -> String {
        let mut parts: Vec<String> = Vec::new();
        for _ in 0..dice.roll(3) {
            parts.push("..".to_owned());
        }
        for segment in segments {
            while dice.one_in(3) {
                if dice.one_in(2) {
                    parts.push(".".to_owned());
                } else {
                    let decoy = DECOYS[usize::try_from(dice.roll(DECOYS.len() as u64)).unwrap()];
                    parts.push(decoy.to_owned());
                    parts.push("..".to_owned());
                }
            }
            parts.push(segment.clone());
        }
        let mut out = String::new();
        for part in parts {
            out.push('/');
            while dice.one_in(4) {
                out.push('/');
            }
            out.push_str(&respell_segment(&part, dice));
        }
        out
    }

    /// A canonical host: 1–4 labels over a small alphabet.
    pub(crate) fn canonical_host() -> impl Strategy<Value = String> {
        prop::collection::vec("[a-z0-9_-]{1,4}", 1..=4).prop_map(|labels| labels.join("."))
    }

    /// A random spelling of `canonical`: random case, maybe a trailing dot, maybe a port.
    pub(crate) fn spell_host(canonical: &str, dice: &mut Dice) -> String {
        let mut out: String = canonical
            .chars()
            .map(|c| {
                if dice.one_in(2) {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect();
        if dice.one_in(2) {
            out.push('.');
        }
        match dice.roll(3) {
            0 => {}
            1 => out.push(':'),
            _ => out.push_str(&format!(":{}", dice.roll(65536))),
        }
        out
    }

    /// Pieces for paths that stress `path`'s rules together, valid or not.
    const PATH_NOISE: &[&str] = &[
        "/", "//", ".", "..", "a", "A", "%", "%2e", "%2E", "%41", "%2f", "%5c", "%zz", ";", "\\",
        "\u{e9}", "?", "%c3%a9",
    ];

    /// Pieces for hosts that stress `host`'s rules together, valid or not.
    const HOST_NOISE: &[&str] = &[
        "a", "B", "-", "_", ".", "..", ":", "8", "0", "[", "]", "::1", "[::1]", "@", "%", " ",
    ];

    proptest! {
        /// `path` is idempotent on noisy input.
        #[test]
        fn path_is_idempotent(pieces in prop::collection::vec(prop::sample::select(PATH_NOISE), 0..12)) {
            let raw = format!("/{}", pieces.concat());
            if let Ok(once) = path(&raw) {
                let twice = path(&once);
                prop_assert!(matches!(twice, Ok(Cow::Borrowed(_))), "{:?} -> {:?}", raw, once);
                prop_assert_eq!(twice.as_deref(), Ok(&*once));
            }
        }

        /// `host` is idempotent on noisy input.
        #[test]
        fn host_is_idempotent(pieces in prop::collection::vec(prop::sample::select(HOST_NOISE), 0..8)) {
            let raw = pieces.concat();
            if let Ok(once) = host(&raw) {
                let twice = host(&once);
                prop_assert!(matches!(twice, Ok(Cow::Borrowed(_))), "{:?} -> {:?}", raw, once);
                prop_assert_eq!(twice.as_deref(), Ok(&*once));
            }
        }

        /// No input makes `path`, `readings` or `host` panic, and readings stay normal.
        #[test]
        fn arbitrary_input_never_panics(raw in any::<String>()) {
            let _ = path(&raw);
            let _ = host(&raw);
            for reading in readings(&raw) {
                let again = path(&reading);
                prop_assert_eq!(again.as_deref(), Ok(reading.as_str()));
            }
        }

        /// Every equivalent spelling of a canonical path normalises to it.
        #[test]
        fn equivalent_path_spellings_normalise_to_canonical(
            segments in canonical_segments(),
            seed in any::<u64>(),
        ) {
            let canonical = join(&segments);
            prop_assert!(matches!(path(&canonical), Ok(Cow::Borrowed(_))), "{:?}", canonical);
            let spelling = spell(&segments, &mut Dice(seed));
            let normal = path(&spelling);
            prop_assert_eq!(normal.as_deref(), Ok(canonical.as_str()), "{:?}", spelling);
        }

        /// Every equivalent spelling of a canonical host normalises to it.
        #[test]
        fn equivalent_host_spellings_normalise_to_canonical(
            canonical in canonical_host(),
            seed in any::<u64>(),
        ) {
            let spelling = spell_host(&canonical, &mut Dice(seed));
            let normal = host(&spelling);
            prop_assert_eq!(normal.as_deref(), Ok(canonical.as_str()), "{:?}", spelling);
        }

        /// Every spelling of an IPv6 literal normalises to its RFC 5952 text in brackets.
        #[test]
        fn equivalent_ipv6_spellings_normalise_to_canonical(
            groups in any::<[u16; 8]>(),
            upper in any::<bool>(),
            port in prop::option::of(any::<u16>()),
        ) {
            let canonical = format!("[{}]", Ipv6Addr::from(groups));
            let full: Vec<String> = groups
                .iter()
                .map(|g| if upper { format!("{g:04X}") } else { format!("{g:x}") })
                .collect();
            let mut spelling = format!("[{}]", full.join(":"));
            if let Some(port) = port {
                spelling.push_str(&format!(":{port}"));
            }
            let normal = host(&spelling);
            prop_assert_eq!(normal.as_deref(), Ok(canonical.as_str()), "{:?}", spelling);
        }

        /// Readings of generated spellings are normal, distinct and differ from `path`'s.
        #[test]
        fn readings_are_normal(segments in canonical_segments(), seed in any::<u64>()) {
            let spelling = spell(&segments, &mut Dice(seed));
            let canonical = path(&spelling).unwrap();
            let found = readings(&spelling);
            for (i, reading) in found.iter().enumerate() {
                prop_assert!(
                    matches!(path(reading), Ok(Cow::Borrowed(_))),
                    "{:?} -> {:?}", spelling, reading
                );
                prop_assert_ne!(reading.as_str(), &*canonical);
                prop_assert!(!found[..i].contains(reading));
            }
        }
    }
}
