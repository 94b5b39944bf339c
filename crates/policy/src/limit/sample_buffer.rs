//! A fixed-capacity latency sample window with an exact percentile.
//!
//! Envoy keeps every sample of a window in a log-linear histogram
//! (circllhist) and reads an approximate quantile. Here the buffer is
//! allocated once from config and reused; when a window sees more samples
//! than it holds, reservoir sampling (Vitter's Algorithm R) keeps a uniform
//! subset, so the percentile stays unbiased without growing.

use crate::Nanos;
use rand::Rng;

#[derive(Clone, Debug)]
pub(crate) struct SampleBuffer {
    slots: Box<[Nanos]>,
    len: usize,
    seen: u64,
}

impl SampleBuffer {
    /// `capacity` must be at least 1 (checked by the owning config).
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        SampleBuffer {
            slots: vec![Nanos::ZERO; capacity.max(1)].into_boxed_slice(),
            len: 0,
            seen: 0,
        }
    }

    /// Samples offered since the last clear, kept or not.
    pub(crate) fn seen(&self) -> u64 {
        self.seen
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.seen = 0;
    }

    /// Adds a sample; draws from `rng` only once the buffer is full.
    pub(crate) fn push<R: Rng + ?Sized>(&mut self, value: Nanos, rng: &mut R) {
        self.seen += 1;
        if self.len < self.slots.len() {
            self.slots[self.len] = value;
            self.len += 1;
        } else {
            let j = rng.random_range(0..self.seen);
            if let Some(slot) = self.slots.get_mut(j as usize) {
                *slot = value;
            }
        }
    }

    /// Nearest-rank percentile, `p` in `[0, 1]`: the smallest kept sample
    /// with at least `p` of the kept samples at or below it. Reorders the
    /// kept samples in place (linear-time selection, no allocation).
    pub(crate) fn percentile(&mut self, p: f64) -> Option<Nanos> {
        if self.len == 0 {
            return None;
        }
        let rank = (p * self.len as f64).ceil() as usize;
        let index = rank.clamp(1, self.len) - 1;
        let kept = &mut self.slots[..self.len];
        let (_, value, _) = kept.select_nth_unstable(index);
        Some(*value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    #[test]
    fn nearest_rank_percentiles() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let mut b = SampleBuffer::with_capacity(16);
        for v in [50, 10, 40, 20, 30].map(Nanos::from_nanos) {
            b.push(v, &mut rng);
        }
        // n = 5: p50 → rank ceil(2.5) = 3 → 30; p90 → rank 5 → 50; p0 → rank 1 → 10
        assert_eq!(b.percentile(0.5), Some(Nanos::from_nanos(30)));
        assert_eq!(b.percentile(0.9), Some(Nanos::from_nanos(50)));
        assert_eq!(b.percentile(0.0), Some(Nanos::from_nanos(10)));
        assert_eq!(b.percentile(0.2), Some(Nanos::from_nanos(10))); // rank ceil(1.0) = 1
        assert_eq!(b.percentile(1.0), Some(Nanos::from_nanos(50)));
    }

    #[test]
    fn empty_has_no_percentile_and_clear_empties() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let mut b = SampleBuffer::with_capacity(4);
        assert_eq!(b.percentile(0.5), None);
        b.push(Nanos::from_nanos(7), &mut rng);
        b.clear();
        assert_eq!(b.seen(), 0);
        assert_eq!(b.percentile(0.5), None);
    }

    #[test]
    fn reservoir_keeps_a_uniform_subset() {
        // 10 000 samples 0..10 000 through 1000 slots: the kept median
        // should be near 5000. The standard error of a sample median of
        // 1000 uniform draws is about 0.5/√1000·10 000 ≈ 160, so ±800 is
        // five standard errors.
        let mut rng = Pcg64Mcg::seed_from_u64(42);
        let mut b = SampleBuffer::with_capacity(1000);
        for v in (0..10_000).map(Nanos::from_nanos) {
            b.push(v, &mut rng);
        }
        assert_eq!(b.seen(), 10_000);
        let median = b.percentile(0.5).unwrap();
        assert!(
            (4200..=5800).contains(&median.as_nanos()),
            "median {median}"
        );
    }
}
