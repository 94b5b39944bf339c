//! Durations and quantities as the configs write them: Go/protobuf
//! durations (`"1.5s"`, `"250ms"`, `"1m30s"`), HAProxy times (a bare number
//! is milliseconds) and Kubernetes CPU quantities (`"250m"`, `"2"`).
//!
//! Everything is `std::time::Duration` or `f64` cores; nothing here depends
//! on the simulator's time type.

use std::time::Duration;

/// Longest duration accepted anywhere (30 days): larger values are refused
/// rather than overflowing, matching the scenario format's `MAX_DURATION`.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// Parses a Go or protobuf-JSON duration: one or more `<number><unit>`
/// with units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`; `"0"` alone is zero.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    if t.is_empty() {
        return Err(
            "expected a duration such as \"250ms\" or \"1.5s\", got an empty string".into(),
        );
    }
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_end == 0 {
            return Err(format!(
                "expected a duration such as \"250ms\" or \"1.5s\", got {s:?}"
            ));
        }
        let value: f64 = rest[..num_end]
            .parse()
            .map_err(|_| format!("expected a duration such as \"250ms\" or \"1.5s\", got {s:?}"))?;
        let after = &rest[num_end..];
        let (unit, len) = [
            ("ns", 1e-9),
            ("us", 1e-6),
            ("µs", 1e-6),
            ("ms", 1e-3),
            ("s", 1.0),
            ("m", 60.0),
            ("h", 3600.0),
        ]
        .iter()
        .find(|(u, _)| after.starts_with(u))
        .map(|(u, f)| (*f, u.len()))
        .ok_or_else(|| format!("expected a unit (ns, us, ms, s, m, h) after {value} in {s:?}"))?;
        total += value * unit;
        rest = &after[len..];
    }
    seconds(total, s)
}

/// Parses an HAProxy time: a number with an optional unit `us`, `ms`, `s`,
/// `m`, `h`, `d`; a bare number is milliseconds (HAProxy's default unit).
pub fn parse_haproxy_time(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let num_end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let value: f64 = t[..num_end]
        .parse()
        .map_err(|_| format!("expected a time such as 5s or 500 (milliseconds), got {s:?}"))?;
    let factor = match &t[num_end..] {
        "" | "ms" => 1e-3,
        "us" => 1e-6,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        other => {
            return Err(format!(
                "unknown time unit {other:?} in {s:?} (us, ms, s, m, h, d)"
            ));
        }
    };
    seconds(value * factor, s)
}

fn seconds(total: f64, s: &str) -> Result<Duration, String> {
    if !total.is_finite() || total < 0.0 || total > MAX_DURATION.as_secs_f64() {
        return Err(format!("duration {s:?} is out of range (0 to 30 days)"));
    }
    Ok(Duration::from_secs_f64(total))
}

/// Parses a Kubernetes CPU quantity into cores: `"250m"` → 0.25, `"2"` → 2,
/// `"1.5"` → 1.5 (also `"500000u"`, `"100000000n"`).
pub fn parse_cpu(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, factor) = if let Some(n) = t.strip_suffix('m') {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('u') {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix('n') {
        (n, 1e-9)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("expected a CPU quantity such as \"250m\" or \"2\", got {s:?}"))?;
    let cores = v * factor;
    if !cores.is_finite() || !(0.0..=1e6).contains(&cores) {
        return Err(format!("CPU quantity {s:?} is out of range"));
    }
    Ok(cores)
}

/// Writes a duration the way the scenario format and messages read it
/// (`"1s500ms"`, `"250ms"`, `"7h47m"`): the policy crate's own spelling,
/// which its parser reads back exactly.
pub fn show(d: Duration) -> String {
    stormbreak_policy::units::format_duration(stormbreak_policy::Nanos::from(d))
}

/// A number without trailing zeros (`2`, `0.25`, `1.5`).
pub fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(
            parse_go_duration("1.5s").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_go_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_go_duration("250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_go_duration("5").is_err());
        assert!(parse_go_duration("5x").is_err());
        assert!(parse_go_duration("99999999h").is_err());
    }

    #[test]
    fn haproxy_times() {
        assert_eq!(
            parse_haproxy_time("500").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(parse_haproxy_time("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_haproxy_time("1m").unwrap(), Duration::from_secs(60));
        assert!(parse_haproxy_time("5y").is_err());
    }

    #[test]
    fn cpu() {
        assert_eq!(parse_cpu("250m").unwrap(), 0.25);
        assert_eq!(parse_cpu("2").unwrap(), 2.0);
        assert!(parse_cpu("lots").is_err());
    }

    #[test]
    fn durations_are_written_as_the_policy_crate_reads_them() {
        for d in [
            Duration::from_millis(1500),
            Duration::from_secs(2),
            Duration::ZERO,
            Duration::from_micros(2500),
        ] {
            let back = stormbreak_policy::units::parse_duration(&show(d)).unwrap();
            assert_eq!(Duration::from(back), d, "{}", show(d));
        }
        assert_eq!(show(Duration::from_millis(250)), "250ms");
    }
}
