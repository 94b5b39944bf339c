//! [`Nanos`], the one time type every policy takes.
//!
//! A point in time (nanoseconds since a caller-chosen origin: virtual time in
//! the simulator, a monotonic clock's reading in the guard) and a span of
//! time share this type, as they share `u64` in Envoy's and Finagle's
//! timer wheels: the policies subtract readings and add timeouts, and a
//! second type for spans would only add conversions on the hot path. What
//! the newtype buys is that a count (attempts, tokens, replicas) can no
//! longer pass for a time.
//!
//! # Arithmetic
//!
//! `+`, `-` and `*` saturate instead of wrapping:
//!
//! * `Nanos::MAX` reads as "never" (an unset deadline), and `never + 5s` is
//!   still never rather than a time in 1970;
//! * `earlier - later` is zero, as `std::time::Instant`'s subtraction has
//!   been since Rust 1.60, so two readings taken out of order cannot produce
//!   a 584-year wait.
//!
//! `checked_add` and `checked_sub` are there for code that must tell.
//! `u64` nanoseconds cover 584 years, so saturation is never reached by a
//! real clock.
//!
//! ```
//! use std::time::Duration;
//! use stormbreak_policy::Nanos;
//!
//! let per_try = Nanos::from_millis(250);
//! assert_eq!(per_try * 4, Nanos::SECOND);
//! assert_eq!(Duration::from(per_try), Duration::from_millis(250));
//! assert_eq!(format!("{per_try:?}"), "250ms");
//! assert_eq!(Nanos::from_secs(1) - Nanos::from_secs(2), Nanos::ZERO);
//! assert_eq!(Nanos::MAX + Nanos::SECOND, Nanos::MAX);
//! ```
//!
//! # Serde
//!
//! A `Nanos` is written as the duration string a person types (`"250ms"`,
//! `"7h47m"`, see [`crate::units`]) and read back from one; a bare `0` is
//! also accepted, any other bare number is refused as ambiguous. Machine
//! formats whose readers expect an integer count of nanoseconds (the
//! simulator's `recording.json`) use [`count`] instead.

use crate::units;
use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Div, Mul, Rem, Sub, SubAssign};
use std::time::Duration;

/// Nanoseconds: a reading of a caller-chosen clock, or a span between two.
///
/// See the [module docs](self) for why one type serves both and why the
/// arithmetic saturates.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct Nanos(u64);

impl Nanos {
    /// Zero: the origin, or no time at all.
    pub const ZERO: Nanos = Nanos(0);
    /// The largest value; reads as "never" for deadlines.
    pub const MAX: Nanos = Nanos(u64::MAX);
    /// One nanosecond.
    pub const NANOSECOND: Nanos = Nanos(1);
    /// One microsecond.
    pub const MICROSECOND: Nanos = Nanos(1_000);
    /// One millisecond.
    pub const MILLISECOND: Nanos = Nanos(1_000_000);
    /// One second.
    pub const SECOND: Nanos = Nanos(1_000_000_000);
    /// One minute.
    pub const MINUTE: Nanos = Nanos(60_000_000_000);
    /// One hour.
    pub const HOUR: Nanos = Nanos(3_600_000_000_000);

    /// `n` nanoseconds.
    #[inline]
    pub const fn from_nanos(n: u64) -> Nanos {
        Nanos(n)
    }

    /// `n` microseconds, saturating.
    #[inline]
    pub const fn from_micros(n: u64) -> Nanos {
        Nanos(n.saturating_mul(1_000))
    }

    /// `n` milliseconds, saturating.
    #[inline]
    pub const fn from_millis(n: u64) -> Nanos {
        Nanos(n.saturating_mul(1_000_000))
    }

    /// `n` seconds, saturating.
    #[inline]
    pub const fn from_secs(n: u64) -> Nanos {
        Nanos(n.saturating_mul(1_000_000_000))
    }

    /// Fractional seconds, rounded to the nearest nanosecond; negative or NaN
    /// is zero, too large is [`Nanos::MAX`].
    ///
    /// ```
    /// use stormbreak_policy::Nanos;
    /// assert_eq!(Nanos::from_secs_f64(0.25), Nanos::from_millis(250));
    /// assert_eq!(Nanos::from_secs_f64(-1.0), Nanos::ZERO);
    /// ```
    #[inline]
    pub fn from_secs_f64(s: f64) -> Nanos {
        if s.is_nan() || s <= 0.0 {
            Nanos::ZERO
        } else {
            // `as` saturates at u64::MAX for floats out of range.
            Nanos((s * 1e9).round() as u64)
        }
    }

    /// The count of nanoseconds.
    #[inline]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Fractional seconds.
    #[inline]
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// `true` for [`Nanos::ZERO`].
    #[inline]
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// `self + rhs`, or `None` on overflow.
    #[inline]
    pub const fn checked_add(self, rhs: Nanos) -> Option<Nanos> {
        match self.0.checked_add(rhs.0) {
            Some(n) => Some(Nanos(n)),
            None => None,
        }
    }

    /// `self - rhs`, or `None` if `rhs` is larger.
    #[inline]
    pub const fn checked_sub(self, rhs: Nanos) -> Option<Nanos> {
        match self.0.checked_sub(rhs.0) {
            Some(n) => Some(Nanos(n)),
            None => None,
        }
    }

    /// `self + rhs`, at most [`Nanos::MAX`]; what `+` does.
    #[inline]
    pub const fn saturating_add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(rhs.0))
    }

    /// `self - rhs`, at least zero; what `-` does.
    #[inline]
    pub const fn saturating_sub(self, rhs: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(rhs.0))
    }

    /// `self × n`, at most [`Nanos::MAX`]; what `*` does.
    #[inline]
    pub const fn saturating_mul(self, n: u64) -> Nanos {
        Nanos(self.0.saturating_mul(n))
    }

    /// `self × n`, or `None` on overflow.
    #[inline]
    pub const fn checked_mul(self, n: u64) -> Option<Nanos> {
        match self.0.checked_mul(n) {
            Some(n) => Some(Nanos(n)),
            None => None,
        }
    }

    /// How many whole or partial `rhs` cover `self`; panics if `rhs` is zero.
    ///
    /// ```
    /// use stormbreak_policy::Nanos;
    /// assert_eq!(Nanos::from_millis(1500).div_ceil(Nanos::SECOND), 2);
    /// ```
    #[inline]
    pub const fn div_ceil(self, rhs: Nanos) -> u64 {
        self.0.div_ceil(rhs.0)
    }

    /// `self × f`, rounded; negative or NaN `f` gives zero, too large gives
    /// [`Nanos::MAX`].
    ///
    /// ```
    /// use stormbreak_policy::Nanos;
    /// assert_eq!(Nanos::SECOND.mul_f64(1.5), Nanos::from_millis(1500));
    /// ```
    #[inline]
    pub fn mul_f64(self, f: f64) -> Nanos {
        let x = self.0 as f64 * f;
        if x.is_nan() || x <= 0.0 {
            Nanos::ZERO
        } else {
            Nanos(x.round() as u64)
        }
    }

    /// How many times `rhs` fits in `self`, as a float (`self / rhs`).
    ///
    /// ```
    /// use stormbreak_policy::Nanos;
    /// assert_eq!(Nanos::from_millis(500).div_f64(Nanos::SECOND), 0.5);
    /// ```
    #[inline]
    pub fn div_f64(self, rhs: Nanos) -> f64 {
        self.0 as f64 / rhs.0 as f64
    }
}

impl Add for Nanos {
    type Output = Nanos;
    #[inline]
    fn add(self, rhs: Nanos) -> Nanos {
        self.saturating_add(rhs)
    }
}

impl AddAssign for Nanos {
    #[inline]
    fn add_assign(&mut self, rhs: Nanos) {
        *self = *self + rhs;
    }
}

impl Sub for Nanos {
    type Output = Nanos;
    #[inline]
    fn sub(self, rhs: Nanos) -> Nanos {
        self.saturating_sub(rhs)
    }
}

impl SubAssign for Nanos {
    #[inline]
    fn sub_assign(&mut self, rhs: Nanos) {
        *self = *self - rhs;
    }
}

impl Mul<u64> for Nanos {
    type Output = Nanos;
    #[inline]
    fn mul(self, rhs: u64) -> Nanos {
        Nanos(self.0.saturating_mul(rhs))
    }
}

impl Mul<Nanos> for u64 {
    type Output = Nanos;
    #[inline]
    fn mul(self, rhs: Nanos) -> Nanos {
        rhs * self
    }
}

/// Division by a count; panics on zero, as integer division does.
impl Div<u64> for Nanos {
    type Output = Nanos;
    #[inline]
    fn div(self, rhs: u64) -> Nanos {
        Nanos(self.0 / rhs)
    }
}

/// Whole multiples of `rhs` in `self`; panics on zero.
impl Div for Nanos {
    type Output = u64;
    #[inline]
    fn div(self, rhs: Nanos) -> u64 {
        self.0 / rhs.0
    }
}

/// What is left of `self` after whole multiples of `rhs`; panics on zero.
impl Rem for Nanos {
    type Output = Nanos;
    #[inline]
    fn rem(self, rhs: Nanos) -> Nanos {
        Nanos(self.0 % rhs.0)
    }
}

impl Sum for Nanos {
    fn sum<I: Iterator<Item = Nanos>>(iter: I) -> Nanos {
        iter.fold(Nanos::ZERO, Add::add)
    }
}

impl<'a> Sum<&'a Nanos> for Nanos {
    fn sum<I: Iterator<Item = &'a Nanos>>(iter: I) -> Nanos {
        iter.copied().sum()
    }
}

/// Saturates at [`Nanos::MAX`] for durations over 584 years.
impl From<Duration> for Nanos {
    #[inline]
    fn from(d: Duration) -> Nanos {
        Nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

impl From<Nanos> for Duration {
    #[inline]
    fn from(n: Nanos) -> Duration {
        Duration::from_nanos(n.0)
    }
}

/// The duration string a person writes: `250ms`, `7h47m`, `0`.
impl fmt::Debug for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&units::format_duration(*self))
    }
}

/// The same as [`Debug`](fmt::Debug): `250ms`, `7h47m`.
impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&units::format_duration(*self))
    }
}

/// Parses the duration strings of [`crate::units::parse_duration`].
impl std::str::FromStr for Nanos {
    type Err = units::UnitError;
    fn from_str(s: &str) -> Result<Nanos, units::UnitError> {
        units::parse_duration(s)
    }
}

impl serde::Serialize for Nanos {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&units::format_duration(*self))
    }
}

impl<'de> serde::Deserialize<'de> for Nanos {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Nanos, D::Error> {
        d.deserialize_any(NanosVisitor)
    }
}

struct NanosVisitor;

impl serde::de::Visitor<'_> for NanosVisitor {
    type Value = Nanos;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(units::DURATION_EXPECTED)
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Nanos, E> {
        units::parse_duration(s).map_err(E::custom)
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Nanos, E> {
        if n == 0 {
            Ok(Nanos::ZERO)
        } else {
            Err(E::custom(format!(
                "a bare number is ambiguous: expected {}",
                units::DURATION_EXPECTED
            )))
        }
    }

    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Nanos, E> {
        match u64::try_from(n) {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(E::custom(units::DURATION_EXPECTED)),
        }
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Nanos, E> {
        Err(E::custom(format!(
            "a bare number is ambiguous: expected {}",
            units::DURATION_EXPECTED
        )))
    }
}

/// `#[serde(with = "stormbreak_policy::time::count")]`: a [`Nanos`] as a bare
/// integer count of nanoseconds, for machine formats read by other programs.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use stormbreak_policy::Nanos;
///
/// #[derive(Serialize, Deserialize)]
/// struct Row {
///     #[serde(with = "stormbreak_policy::time::count")]
///     at: Nanos,
/// }
/// let row = Row { at: Nanos::from_millis(250) };
/// assert_eq!(serde_json::to_string(&row).unwrap(), r#"{"at":250000000}"#);
/// ```
pub mod count {
    use super::Nanos;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the count of nanoseconds.
    pub fn serialize<S: Serializer>(n: &Nanos, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(n.as_nanos())
    }

    /// Reads a count of nanoseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Nanos, D::Error> {
        u64::deserialize(d).map(Nanos::from_nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        assert_eq!(Nanos::MAX + Nanos::NANOSECOND, Nanos::MAX);
        assert_eq!(Nanos::ZERO - Nanos::SECOND, Nanos::ZERO);
        assert_eq!(Nanos::MAX * 2u64, Nanos::MAX);
        assert_eq!(Nanos::from_secs(u64::MAX), Nanos::MAX);
        assert_eq!(Nanos::SECOND.checked_sub(Nanos::MINUTE), None);
        assert_eq!(Nanos::MAX.checked_add(Nanos::NANOSECOND), None);
        let mut t = Nanos::SECOND;
        t -= Nanos::MINUTE;
        assert_eq!(t, Nanos::ZERO);
    }

    #[test]
    fn converts_with_duration_both_ways() {
        let d = Duration::new(7 * 3600 + 47 * 60, 5);
        assert_eq!(Duration::from(Nanos::from(d)), d);
        assert_eq!(Nanos::from(Duration::MAX), Nanos::MAX);
    }

    #[test]
    fn debug_is_the_duration_a_person_writes() {
        assert_eq!(format!("{:?}", Nanos::from_millis(250)), "250ms");
        assert_eq!(
            format!("{:?}", Nanos::HOUR * 7 + Nanos::MINUTE * 47),
            "7h47m"
        );
        assert_eq!(format!("{:?}", Some(Nanos::ZERO)), "Some(0)");
    }

    #[test]
    fn serde_is_unit_strings() {
        let n: Nanos = serde_json::from_str(r#""7h47m""#).unwrap();
        assert_eq!(n, Nanos::HOUR * 7 + Nanos::MINUTE * 47);
        assert_eq!(serde_json::to_string(&n).unwrap(), r#""7h47m""#);
        assert_eq!(serde_json::from_str::<Nanos>("0").unwrap(), Nanos::ZERO);
        let e = serde_json::from_str::<Nanos>("250").unwrap_err();
        assert!(e.to_string().contains("ambiguous"), "{e}");
        assert!(serde_json::from_str::<Nanos>("-1").is_err());
        assert!(serde_json::from_str::<Nanos>(r#""5 parsecs""#).is_err());
    }

    #[test]
    fn floats_convert_with_rounding_and_clamping() {
        assert_eq!(Nanos::from_secs_f64(f64::NAN), Nanos::ZERO);
        assert_eq!(Nanos::from_secs_f64(1e30), Nanos::MAX);
        assert_eq!(Nanos::from_millis(1500).as_secs_f64(), 1.5);
        assert_eq!(Nanos::SECOND.mul_f64(-2.0), Nanos::ZERO);
        assert_eq!(Nanos::SECOND.mul_f64(0.25), Nanos::from_millis(250));
    }
}
