//! Independent simulations on every core, results in a fixed order.
//!
//! Each run is deterministic on its own (one seeded RNG stream per entity,
//! no shared state), so running several at once cannot change any of
//! them; collecting the results by their index, not by completion, keeps
//! every output byte-identical whatever `--jobs` says (tested in
//! `tests/cli.rs`).

use std::num::NonZeroUsize;

pub use stormbreak_sim::parallel::map_in_order;

/// Most worker threads `--jobs` accepts.
pub const MAX_JOBS: usize = stormbreak_sim::parallel::MAX_THREADS;

/// The default `--jobs`: the machine's available parallelism.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, NonZeroUsize::get)
}

/// Parses `--jobs N` (1 ≤ N ≤ [`MAX_JOBS`]).
pub fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=MAX_JOBS).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a whole number of threads from 1 to {MAX_JOBS}, got {s:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_parsed_with_their_bounds() {
        assert_eq!(parse_jobs("2"), Ok(2));
        assert!(parse_jobs("0").unwrap_err().contains("from 1 to 256"));
        assert!(parse_jobs("x").is_err());
        assert!(parse_jobs("257").is_err());
    }
}
