//! The seed grammar every command shares: `sweep --seeds`, the sweep spec
//! file (`--spec`, `--emit-k8s-job`) and its shards, and `replay
//! --sensitivity --seeds`.
//!
//! ```text
//! SEEDS := N                       a count: N runs, on seeds derived for them
//!        | SEED "," SEED { "," SEED }   these seeds
//!        | SEED ","                one chosen seed
//!        | SEED "..=" SEED         every seed from the first to the last, both included
//! ```
//!
//! `3` is a count (three runs); `1,2,3` and `1..=3` choose seeds 1, 2 and
//! 3; a single chosen seed is written `7,` or `7..=7`. A chosen seed is the
//! simulator's own seed: run on it, a cell makes the run `stormbreak
//! simulate --seed 7` makes of the cell's scenario. Which seeds a count
//! derives is each command's (a sweep's depend on the sweep seed and the
//! cell, see `docs/sweep.md`).

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// What a user asked for with `--seeds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seeds {
    /// This many runs, on derived seeds.
    Count(u32),
    /// These seeds, in this order, none twice.
    Chosen(Vec<u64>),
}

/// What the grammar looks like, for errors.
pub const EXPECTED: &str = "a count such as 3, a list such as 1,2,3, or a range such as 1..=10 \
                            (one chosen seed: 7..=7, or 7 with a trailing comma: 7,)";

impl Seeds {
    /// Parses `s` (see the module docs), allowing 1 to `max` runs.
    pub fn parse(s: &str, max: u32) -> Result<Seeds, String> {
        let t = s.trim();
        let bad = |why: &str| format!("--seeds {s:?}: {why}; expected {EXPECTED}");
        let seed = |p: &str| {
            p.trim().parse::<u64>().map_err(|_| {
                bad(&format!(
                    "{:?} is not a seed (a whole number 0 to {})",
                    p.trim(),
                    u64::MAX
                ))
            })
        };
        let seeds = if let Some((lo, hi)) = t.split_once("..") {
            let Some(hi) = hi.strip_prefix('=') else {
                return Err(bad("a range includes both ends and is written A..=B"));
            };
            let (lo, hi) = (seed(lo)?, seed(hi)?);
            if lo > hi {
                return Err(bad(&format!("the range runs backwards ({lo} > {hi})")));
            }
            if hi - lo >= u64::from(max) {
                return Err(bad(&format!(
                    "the range holds {} seeds, more than {max}",
                    u128::from(hi - lo) + 1
                )));
            }
            (lo..=hi).collect()
        } else if t.contains(',') {
            let mut out: Vec<u64> = Vec::new();
            let parts: Vec<&str> = t.split(',').collect();
            // One trailing comma marks a list of one; any other empty part is a typo.
            let last = parts.len() - 1;
            for (i, p) in parts.iter().enumerate() {
                if p.trim().is_empty() {
                    if i == last && i > 0 {
                        continue;
                    }
                    return Err(bad("a list has an empty part"));
                }
                let n = seed(p)?;
                if out.contains(&n) {
                    return Err(bad(&format!("seed {n} is listed twice")));
                }
                if out.len() as u64 >= u64::from(max) {
                    return Err(bad(&format!("more than {max} seeds")));
                }
                out.push(n);
            }
            out
        } else {
            let n: u32 = t
                .parse()
                .map_err(|_| bad(&format!("{t:?} is not a count (a whole number 1 to {max})")))?;
            if !(1..=max).contains(&n) {
                return Err(bad(&format!("a count must be 1 to {max}, got {n}")));
            }
            return Ok(Seeds::Count(n));
        };
        Ok(Seeds::Chosen(seeds))
    }

    /// Runs asked for.
    pub fn len(&self) -> u32 {
        match self {
            Seeds::Count(n) => *n,
            // Parsing and `Plan::new` bound a list far below `u32::MAX`.
            Seeds::Chosen(v) => u32::try_from(v.len()).unwrap_or(u32::MAX),
        }
    }

    /// Whether no run is asked for (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The seed of run `k`: the chosen one, or `derived(k)` for a count.
    pub fn seed(&self, k: u32, derived: impl FnOnce(u32) -> u64) -> u64 {
        match self {
            Seeds::Count(_) => derived(k),
            Seeds::Chosen(v) => v[k as usize],
        }
    }

    /// Every run's seed, `derived(k)` for a count.
    pub fn all(&self, derived: impl Fn(u32) -> u64) -> Vec<u64> {
        (0..self.len()).map(|k| self.seed(k, &derived)).collect()
    }
}

impl From<u32> for Seeds {
    fn from(n: u32) -> Seeds {
        Seeds::Count(n)
    }
}

/// A count is written as the number it is (so a spec of `"seeds": 3` reads
/// as before), chosen seeds as a list of numbers.
impl Serialize for Seeds {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Seeds::Count(n) => s.serialize_u32(*n),
            Seeds::Chosen(v) => v.serialize(s),
        }
    }
}

/// Reads a count (a number), a list of seeds (an array), or the grammar as
/// text (`"1..=10"`), bounded by [`crate::plan::MAX_SEEDS`].
impl<'de> Deserialize<'de> for Seeds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Seeds, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Seeds;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "seeds: {EXPECTED}, as a number, a list or a string")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Seeds, E> {
                u32::try_from(n)
                    .map(Seeds::Count)
                    .map_err(|_| E::custom(format!("a count of {n} seeds is too many")))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Seeds, E> {
                Err(E::custom(format!("a count of seeds cannot be {n}")))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Seeds, E> {
                Seeds::parse(s, crate::plan::MAX_SEEDS).map_err(E::custom)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<Seeds, A::Error> {
                let mut v: Vec<u64> = Vec::new();
                while let Some(n) = a.next_element::<u64>()? {
                    if v.contains(&n) {
                        return Err(de::Error::custom(format!("seed {n} is listed twice")));
                    }
                    if v.len() >= crate::plan::MAX_SEEDS as usize {
                        return Err(de::Error::custom(format!(
                            "more than {} seeds",
                            crate::plan::MAX_SEEDS
                        )));
                    }
                    v.push(n);
                }
                Ok(Seeds::Chosen(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// Run `k`'s seed of a count asked of one base seed (`replay --sensitivity
/// --seeds N`): the base itself first, so a count of 1 is the default run,
/// then SplitMix64 mixes of the base and `k`.
pub fn derived(base: u64, k: u32) -> u64 {
    if k == 0 {
        return base;
    }
    crate::plan::splitmix(base ^ u64::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Seeds, String> {
        Seeds::parse(s, 1000)
    }

    #[test]
    fn a_count_a_list_or_a_range() {
        assert_eq!(p("3"), Ok(Seeds::Count(3)));
        assert_eq!(p(" 1,2, 3 "), Ok(Seeds::Chosen(vec![1, 2, 3])));
        assert_eq!(p("1..=4"), Ok(Seeds::Chosen(vec![1, 2, 3, 4])));
        assert_eq!(p("7,"), Ok(Seeds::Chosen(vec![7])));
        assert_eq!(p("7..=7"), Ok(Seeds::Chosen(vec![7])));
        assert_eq!(
            p(&format!("{}..={}", u64::MAX - 1, u64::MAX)),
            Ok(Seeds::Chosen(vec![u64::MAX - 1, u64::MAX]))
        );
    }

    #[test]
    fn mistakes_say_what_is_expected() {
        for (bad, why) in [
            ("0", "a count must be 1 to 1000"),
            ("1001", "a count must be 1 to 1000"),
            ("1..3", "written A..=B"),
            ("3..=1", "runs backwards"),
            ("1..=1001", "holds 1001 seeds, more than 1000"),
            ("0..=18446744073709551615", "more than 1000"),
            ("1,,2", "empty part"),
            (",", "empty part"),
            ("1,2,1", "seed 1 is listed twice"),
            ("-1,2", "\"-1\" is not a seed"),
            ("x", "\"x\" is not a count"),
        ] {
            let e = p(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(
                e.contains("one chosen seed: 7..=7, or 7 with a trailing comma: 7,"),
                "{bad}: {e}"
            );
        }
        assert!(p("1..=1000").is_ok());
    }

    #[test]
    fn a_count_reads_and_writes_as_a_number_and_chosen_seeds_as_a_list() {
        let j = |s: &Seeds| serde_json::to_string(s).unwrap();
        assert_eq!(j(&Seeds::Count(3)), "3");
        assert_eq!(j(&Seeds::Chosen(vec![1, 2])), "[1,2]");
        let r = |s: &str| serde_json::from_str::<Seeds>(s).map_err(|e| e.to_string());
        assert_eq!(r("3"), Ok(Seeds::Count(3)));
        assert_eq!(r("[1,2]"), Ok(Seeds::Chosen(vec![1, 2])));
        assert_eq!(r("\"1..=3\""), Ok(Seeds::Chosen(vec![1, 2, 3])));
        assert!(r("[1,1]").unwrap_err().contains("listed twice"));
        assert!(r("-2").is_err());
    }

    #[test]
    fn a_count_from_one_base_starts_with_the_base() {
        assert_eq!(derived(42, 0), 42);
        assert_ne!(derived(42, 1), derived(42, 2));
        assert_eq!(Seeds::Count(2).all(|k| derived(9, k))[0], 9);
        assert_eq!(Seeds::Chosen(vec![5, 6]).all(|k| derived(9, k)), [5, 6]);
    }
}
