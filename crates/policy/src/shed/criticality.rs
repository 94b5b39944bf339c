//! Request criticality classes.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How much it hurts to drop a request: the four classes of the Google SRE book,
/// ch. 21 "Handling Overload", section *Criticality*.
///
/// Ordered by importance (`Sheddable < SheddablePlus < Critical < CriticalPlus`),
/// so lower classes are shed first. The default is [`Criticality::Critical`],
/// as in the book ("the default value for requests sent from production jobs").
/// Serde names are `critical_plus`, `critical`, `sheddable_plus`, `sheddable`.
///
/// ```
/// use stormbreak_policy::shed::Criticality;
/// assert!(Criticality::Sheddable < Criticality::CriticalPlus);
/// let c: Criticality = serde_json::from_str("\"sheddable_plus\"").unwrap();
/// assert_eq!(c, Criticality::SheddablePlus);
/// ```
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Criticality {
    /// Traffic for which frequent partial and occasional full unavailability is expected; shed first.
    Sheddable,
    /// Traffic for which partial unavailability is expected, such as batch jobs that can retry much later.
    SheddablePlus,
    /// Production traffic whose failure users see.
    #[default]
    Critical,
    /// The most critical requests: serious user-visible impact if they fail.
    CriticalPlus,
}

impl Criticality {
    /// All classes, least important first.
    pub const ALL: [Criticality; 4] = [
        Criticality::Sheddable,
        Criticality::SheddablePlus,
        Criticality::Critical,
        Criticality::CriticalPlus,
    ];

    /// Position in [`Criticality::ALL`], for per-class arrays.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The serde / config name, e.g. `"sheddable_plus"`.
    pub const fn name(self) -> &'static str {
        match self {
            Criticality::Sheddable => "sheddable",
            Criticality::SheddablePlus => "sheddable_plus",
            Criticality::Critical => "critical",
            Criticality::CriticalPlus => "critical_plus",
        }
    }
}

impl fmt::Display for Criticality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_matches_position_in_all_and_order_is_by_importance() {
        for (i, c) in Criticality::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
        assert!(Criticality::ALL.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn serde_names_round_trip_and_match_name() {
        for c in Criticality::ALL {
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.name()));
            assert_eq!(serde_json::from_str::<Criticality>(&json).unwrap(), c);
        }
        assert!(serde_json::from_str::<Criticality>("\"CRITICAL\"").is_err());
    }

    #[test]
    fn default_is_critical_as_in_the_book() {
        assert_eq!(Criticality::default(), Criticality::Critical);
    }
}
