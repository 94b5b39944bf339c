//! What servers say about *when* to retry, parsed into delays.
//!
//! * `Retry-After` (RFC 9110 §10.2.3) is `HTTP-date / delay-seconds`.
//!   `delay-seconds` is `1*DIGIT`; values too large to represent are taken as
//!   2³¹ s, as RFC 9111 §1.2.2 prescribes for `delta-seconds`. `HTTP-date`
//!   (RFC 9110 §5.6.7) is the IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`;
//!   recipients must also accept the obsolete RFC 850
//!   (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
//!   (`Sun Nov  6 08:49:37 1994`) forms, and so do we.
//! * Rate-limit reset headers such as GitHub's `x-ratelimit-reset` carry the
//!   reset instant in Unix epoch seconds; the 2026-08-17 post-mortem asks
//!   clients to honour them.
//! * gRPC's `grpc-retry-pushback-ms` (gRFC A6) is a signed 32-bit integer of
//!   milliseconds without unnecessary leading zeros; a negative or unparseable
//!   value means "do not retry".
//!
//! Every function is pure: the caller passes the current wall-clock second
//! when a date must be turned into a delay. A date in the past means "retry
//! now" (`Some(0)`); malformed input gives `None` (no constraint), except for
//! pushback where the law says malformed means stop.

use super::Pushback;
use crate::Nanos;

/// RFC 9111 §1.2.2: an overflowing delta-seconds is taken as 2³¹ seconds.
const DELTA_SECONDS_CEILING: u64 = 1 << 31;

/// Parses `Retry-After: <delay-seconds>` into a delay.
///
/// ```
/// use stormbreak_policy::retry::retry_after_from_delta_seconds;
/// use stormbreak_policy::Nanos;
/// assert_eq!(retry_after_from_delta_seconds("120"), Some(Nanos::from_secs(120)));
/// assert_eq!(retry_after_from_delta_seconds("1.5"), None);
/// ```
pub fn retry_after_from_delta_seconds(value: &str) -> Option<Nanos> {
    let digits = value.trim_matches([' ', '\t']);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut seconds: u64 = 0;
    for b in digits.bytes() {
        seconds = seconds * 10 + u64::from(b - b'0');
        if seconds >= DELTA_SECONDS_CEILING {
            seconds = DELTA_SECONDS_CEILING;
            break;
        }
    }
    Some(seconds * Nanos::SECOND)
}

/// Parses `Retry-After: <HTTP-date>` into the delay from `now_unix_secs`.
///
/// ```
/// use stormbreak_policy::retry::retry_after_from_http_date;
/// use stormbreak_policy::Nanos;
/// // The RFC's example date is Unix second 784_111_777.
/// let d = retry_after_from_http_date("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777 - 30);
/// assert_eq!(d, Some(Nanos::from_secs(30)));
/// ```
pub fn retry_after_from_http_date(date: &str, now_unix_secs: u64) -> Option<Nanos> {
    let at = http_date_to_unix_secs(date, now_unix_secs)?;
    Some(Nanos::from_secs(at.saturating_sub(now_unix_secs)))
}

/// Parses a whole `Retry-After` value, whichever of its two forms it takes.
pub fn retry_after_from_header(value: &str, now_unix_secs: u64) -> Option<Nanos> {
    retry_after_from_delta_seconds(value)
        .or_else(|| retry_after_from_http_date(value, now_unix_secs))
}

/// Parses a rate-limit reset instant in Unix epoch seconds (GitHub's
/// `x-ratelimit-reset`) into the delay from `now_unix_secs`.
///
/// ```
/// use stormbreak_policy::retry::retry_after_from_reset_epoch;
/// use stormbreak_policy::Nanos;
/// assert_eq!(retry_after_from_reset_epoch("1786973400", 1786973340), Some(Nanos::from_secs(60)));
/// assert_eq!(retry_after_from_reset_epoch("1786973400", 1786973500), Some(Nanos::ZERO));
/// ```
pub fn retry_after_from_reset_epoch(value: &str, now_unix_secs: u64) -> Option<Nanos> {
    let digits = value.trim_matches([' ', '\t']);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let reset: u64 = digits.parse().ok()?;
    Some(Nanos::from_secs(reset.saturating_sub(now_unix_secs)))
}

impl Pushback {
    /// Interprets a received `grpc-retry-pushback-ms` value (gRFC A6).
    ///
    /// ```
    /// use stormbreak_policy::retry::Pushback;
    /// use stormbreak_policy::Nanos;
    /// assert_eq!(Pushback::from_grpc_header("250"), Pushback::RetryAfter(Nanos::from_millis(250)));
    /// assert_eq!(Pushback::from_grpc_header("-1"), Pushback::DoNotRetry);
    /// assert_eq!(Pushback::from_grpc_header("soon"), Pushback::DoNotRetry);
    /// ```
    pub fn from_grpc_header(value: &str) -> Pushback {
        // Only a canonical non-negative integer is a delay; "-1", "-0", "007"
        // and anything unparseable all mean stop.
        let canonical = !value.is_empty()
            && value.bytes().all(|b| b.is_ascii_digit())
            && (value == "0" || !value.starts_with('0'));
        match value.parse::<i32>() {
            Ok(ms) if canonical => Pushback::RetryAfter(ms as u64 * Nanos::MILLISECOND),
            _ => Pushback::DoNotRetry,
        }
    }
}

/// Parses an HTTP-date in any of its three forms into Unix seconds.
///
/// `now_unix_secs` is only read for the two-digit years of RFC 850 dates,
/// which RFC 9110 §5.6.7 resolves to the most recent matching year that is not
/// more than 50 years in the future. Dates before 1970 give 0. The weekday
/// must be spelled correctly but is not checked against the date: the
/// instant is what the server meant, a wrong weekday is only a typo.
///
/// ```
/// use stormbreak_policy::retry::http_date_to_unix_secs;
/// let now = 1_786_973_400; // 2026-08-17
/// for form in ["Sun, 06 Nov 1994 08:49:37 GMT",
///              "Sunday, 06-Nov-94 08:49:37 GMT",
///              "Sun Nov  6 08:49:37 1994"] {
///     assert_eq!(http_date_to_unix_secs(form, now), Some(784_111_777));
/// }
/// ```
pub fn http_date_to_unix_secs(value: &str, now_unix_secs: u64) -> Option<u64> {
    let s = value.trim_matches([' ', '\t']).as_bytes();
    let civil = parse_imf_fixdate(s)
        .or_else(|| parse_rfc850(s, now_unix_secs))
        .or_else(|| parse_asctime(s))?;
    civil.to_unix_secs()
}

const SHORT_DAYS: [&[u8]; 7] = [b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun"];
const LONG_DAYS: [&[u8]; 7] = [
    b"Monday",
    b"Tuesday",
    b"Wednesday",
    b"Thursday",
    b"Friday",
    b"Saturday",
    b"Sunday",
];
const MONTHS: [&[u8]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// A calendar instant in UTC, fields as written in the header.
struct Civil {
    year: i64,
    month: u32, // 1..=12
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

impl Civil {
    fn to_unix_secs(&self) -> Option<u64> {
        if self.day == 0 || self.day > days_in_month(self.year, self.month) {
            return None;
        }
        if self.hour > 23 || self.minute > 59 || self.second > 60 {
            return None;
        }
        let days = days_from_civil(self.year, self.month, self.day);
        let secs = days * 86_400
            + i64::from(self.hour) * 3_600
            + i64::from(self.minute) * 60
            + i64::from(self.second);
        Some(secs.max(0) as u64)
    }
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`
fn parse_imf_fixdate(s: &[u8]) -> Option<Civil> {
    if s.len() != 29 || &s[3..5] != b", " || s[7] != b' ' || s[11] != b' ' || s[16] != b' ' {
        return None;
    }
    if !SHORT_DAYS.contains(&&s[0..3]) || &s[25..29] != b" GMT" {
        return None;
    }
    let (hour, minute, second) = time_of_day(&s[17..25])?;
    Some(Civil {
        year: digits(&s[12..16])? as i64,
        month: month(&s[8..11])?,
        day: digits(&s[5..7])?,
        hour,
        minute,
        second,
    })
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`
fn parse_rfc850(s: &[u8], now_unix_secs: u64) -> Option<Civil> {
    let comma = s.iter().position(|&b| b == b',')?;
    if !LONG_DAYS.contains(&&s[..comma]) {
        return None;
    }
    let rest = &s[comma..];
    // ", 06-Nov-94 08:49:37 GMT"
    if rest.len() != 24 || &rest[..2] != b", " || rest[4] != b'-' || rest[8] != b'-' {
        return None;
    }
    if rest[11] != b' ' || &rest[20..24] != b" GMT" {
        return None;
    }
    let (hour, minute, second) = time_of_day(&rest[12..20])?;
    let yy = i64::from(digits(&rest[9..11])?);
    let this_year = year_of_unix_secs(now_unix_secs);
    let mut year = this_year - this_year.rem_euclid(100) + yy;
    if year > this_year + 50 {
        year -= 100;
    }
    Some(Civil {
        year,
        month: month(&rest[5..8])?,
        day: digits(&rest[2..4])?,
        hour,
        minute,
        second,
    })
}

/// `Sun Nov  6 08:49:37 1994`
fn parse_asctime(s: &[u8]) -> Option<Civil> {
    if s.len() != 24 || s[3] != b' ' || s[7] != b' ' || s[10] != b' ' || s[19] != b' ' {
        return None;
    }
    if !SHORT_DAYS.contains(&&s[0..3]) {
        return None;
    }
    let day = match s[8] {
        b' ' => digits(&s[9..10])?,
        _ => digits(&s[8..10])?,
    };
    let (hour, minute, second) = time_of_day(&s[11..19])?;
    Some(Civil {
        year: digits(&s[20..24])? as i64,
        month: month(&s[4..7])?,
        day,
        hour,
        minute,
        second,
    })
}

fn time_of_day(s: &[u8]) -> Option<(u32, u32, u32)> {
    if s.len() != 8 || s[2] != b':' || s[5] != b':' {
        return None;
    }
    Some((digits(&s[0..2])?, digits(&s[3..5])?, digits(&s[6..8])?))
}

fn month(s: &[u8]) -> Option<u32> {
    MONTHS.iter().position(|m| *m == s).map(|i| i as u32 + 1)
}

fn digits(s: &[u8]) -> Option<u32> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0, |n, &b| n * 10 + u32::from(b - b'0')))
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's
/// `days_from_civil`): count whole 400-year eras, then years from March so
/// that the leap day falls at the end of the counted year.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = i64::from((month + 9) % 12);
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The civil year of a Unix second (inverse of [`days_from_civil`], year only).
fn year_of_unix_secs(secs: u64) -> i64 {
    let days = (secs / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    // Years are counted from March: January and February belong to the next one.
    year_of_era + era * 400 + i64::from(month_from_march >= 10)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;

    /// 1994-11-06 08:49:37 UTC: 9075 days after 1970-01-01 (24 years with 6
    /// leap days = 8766 days, plus Jan..Oct 1994 = 304 days, plus 5) →
    /// 9075·86400 + 8·3600 + 49·60 + 37 = 784 111 777.
    const RFC_EXAMPLE: u64 = 784_111_777;
    const AUG_17_2026: u64 = 1_786_924_800; // 2026-08-17 00:00:00 UTC

    #[test]
    fn rfc_9110_example_in_all_three_forms() {
        for form in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "  Sun, 06 Nov 1994 08:49:37 GMT ",
        ] {
            assert_eq!(
                http_date_to_unix_secs(form, AUG_17_2026),
                Some(RFC_EXAMPLE),
                "{form}"
            );
        }
    }

    #[test]
    fn days_from_civil_matches_hand_counts() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(1994, 11, 6), 9_075);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017); // 30 years, 7 leap days, + Jan 31 + Feb 29
        // 2026-08-17: 56 years with 14 leap days = 20 454 days, + 228 days (Jan..Jul = 212, + 16).
        assert_eq!(days_from_civil(2026, 8, 17) * 86_400, AUG_17_2026 as i64);
        assert_eq!(year_of_unix_secs(AUG_17_2026), 2026);
        assert_eq!(year_of_unix_secs(0), 1970);
        assert_eq!(
            year_of_unix_secs(days_from_civil(2000, 2, 29) as u64 * 86_400),
            2000
        );
        assert_eq!(
            year_of_unix_secs(days_from_civil(2001, 1, 1) as u64 * 86_400 - 1),
            2000
        );
        assert_eq!(
            year_of_unix_secs(days_from_civil(2001, 1, 1) as u64 * 86_400),
            2001
        );
    }

    #[test]
    fn incident_day_retry_after_date() {
        // 13:28:00 on the incident day, and a server asking to wait until 13:30:00.
        let now = AUG_17_2026 + 13 * 3600 + 28 * 60;
        assert_eq!(
            retry_after_from_http_date("Mon, 17 Aug 2026 13:30:00 GMT", now),
            Some(Nanos::from_secs(120))
        );
        assert_eq!(
            retry_after_from_http_date("Mon, 17 Aug 2026 13:00:00 GMT", now),
            Some(Nanos::ZERO),
            "a date in the past means retry now"
        );
    }

    #[test]
    fn malformed_dates_are_rejected() {
        for bad in [
            "",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "sun, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 nov 1994 08:49:37 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 29 Feb 1900 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 06 Nov 19x4 08:49:37 GMT",
            "Sundae, 06-Nov-94 08:49:37 GMT",
            "Sun Nov 6 08:49:37 1994",
            "120",
        ] {
            assert_eq!(http_date_to_unix_secs(bad, AUG_17_2026), None, "{bad:?}");
        }
        assert_eq!(
            http_date_to_unix_secs("Thu, 29 Feb 2024 00:00:00 GMT", AUG_17_2026),
            Some(days_from_civil(2024, 2, 29) as u64 * 86_400),
            "leap day of a leap year is valid"
        );
        assert_eq!(
            http_date_to_unix_secs("Wed, 31 Dec 1969 23:59:59 GMT", AUG_17_2026),
            Some(0),
            "pre-epoch dates clamp to 0"
        );
    }

    #[test]
    fn rfc850_two_digit_years_resolve_within_fifty_years() {
        // In 2026, "76" is 2076 (exactly 50 years ahead is not *more* than 50),
        // "77" is 1977.
        let y2076 = http_date_to_unix_secs("Saturday, 01-Jan-76 00:00:00 GMT", AUG_17_2026);
        assert_eq!(y2076, Some(days_from_civil(2076, 1, 1) as u64 * 86_400));
        let y1977 = http_date_to_unix_secs("Saturday, 01-Jan-77 00:00:00 GMT", AUG_17_2026);
        assert_eq!(y1977, Some(days_from_civil(1977, 1, 1) as u64 * 86_400));
    }

    #[test]
    fn delta_seconds() {
        assert_eq!(retry_after_from_delta_seconds("0"), Some(Nanos::ZERO));
        assert_eq!(
            retry_after_from_delta_seconds("120"),
            Some(Nanos::from_secs(120))
        );
        assert_eq!(
            retry_after_from_delta_seconds(" 5 "),
            Some(Nanos::from_secs(5))
        );
        for bad in ["", "-1", "1.5", "5s", "+5", "١٢"] {
            assert_eq!(retry_after_from_delta_seconds(bad), None, "{bad:?}");
        }
        // RFC 9111 §1.2.2: overflow is taken as 2^31 s.
        assert_eq!(
            retry_after_from_delta_seconds("99999999999999999999999999"),
            Some(Nanos::from_secs(2_147_483_648))
        );
    }

    #[test]
    fn header_accepts_either_form() {
        assert_eq!(retry_after_from_header("7", 0), Some(Nanos::from_secs(7)));
        assert_eq!(
            retry_after_from_header("Sun, 06 Nov 1994 08:49:37 GMT", RFC_EXAMPLE - 7),
            Some(Nanos::from_secs(7))
        );
        assert_eq!(retry_after_from_header("later", 0), None);
    }

    #[test]
    fn reset_epoch() {
        assert_eq!(
            retry_after_from_reset_epoch("1000", 940),
            Some(Nanos::from_secs(60))
        );
        assert_eq!(
            retry_after_from_reset_epoch("1000", 2000),
            Some(Nanos::ZERO)
        );
        assert_eq!(retry_after_from_reset_epoch("soon", 0), None);
        assert_eq!(retry_after_from_reset_epoch("-5", 0), None);
    }

    #[test]
    fn grpc_pushback_follows_a6() {
        assert_eq!(
            Pushback::from_grpc_header("0"),
            Pushback::RetryAfter(Nanos::ZERO)
        );
        assert_eq!(
            Pushback::from_grpc_header("1500"),
            Pushback::RetryAfter(Nanos::from_secs(3) / 2)
        );
        assert_eq!(
            Pushback::from_grpc_header("2147483647"),
            Pushback::RetryAfter(2_147_483_647 * Nanos::MILLISECOND)
        );
        for stop in [
            "-1",
            "-0",
            "007",
            "",
            "1e3",
            "2147483648",
            " 5",
            "abc",
            "+5",
        ] {
            assert_eq!(
                Pushback::from_grpc_header(stop),
                Pushback::DoNotRetry,
                "{stop:?}"
            );
        }
    }
}
