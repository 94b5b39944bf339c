//! Freed heap handed back to the OS after a burst of connections ends.
//!
//! glibc's `malloc` keeps what a burst of connections freed: their buffers
//! and tasks are small chunks spread over the heap, too scattered for the
//! heap's top to shrink, so RSS stays near the burst's peak and ratchets
//! up burst after burst (issue 43, item 3; `benches/guard.sh --only burst`
//! measured 153 MiB after the first burst of 5 000 connections and 208 MiB
//! after the sixth, all of them closed). `malloc_trim(0)` walks every
//! arena and returns the whole free pages inside it. The guard calls it
//! when the process's open connections have fallen to at most half of
//! their peak since the last trim, and by at least [`MIN_CLOSED`]: after a
//! burst, never in a steady state. OpenResty's `lua_malloc_trim` directive
//! (lua-nginx-module) answers the same glibc behaviour with a trim every N
//! requests; tying it to the fall in connections keeps the steady state
//! free of it.
//!
//! Bounds: at most one trim per [`CHECK_EVERY`], run on tokio's blocking
//! pool (a trim walks the arenas under their locks: milliseconds on a
//! large heap, which must not stall a worker thread). On other
//! allocators or C libraries, [`release`] does nothing.
//!
//! The counts are process-wide, as the heap is: several guards in one
//! process (the tests) share them, and one trim serves them all.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// How often the trimmer looks at the counts.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The fewest connections that must have closed since the peak before a
/// trim: about 20 KiB each, so at least ~20 MiB can come back.
pub(crate) const MIN_CLOSED: u64 = 1024;

/// Connections open and their peak since the last trim.
pub(crate) struct Counts {
    open: AtomicU64,
    peak: AtomicU64,
}

/// The process's counts: every listener of every guard in it.
static COUNTS: Counts = Counts::new();

impl Counts {
    const fn new() -> Counts {
        Counts {
            open: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        }
    }

    /// Counts one connection open until the returned value is dropped.
    #[must_use = "the connection counts as open only while this lives"]
    fn opened(&self) -> Opened<'_> {
        let now = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
        Opened(self)
    }

    /// Claims a trim when one is [`due`]: of several trimmers watching the
    /// same counts, one wins, and the peak starts again from what is open.
    fn claim(&self) -> bool {
        let (peak, open) = (
            self.peak.load(Ordering::Relaxed),
            self.open.load(Ordering::Relaxed),
        );
        due(peak, open)
            && self
                .peak
                .compare_exchange(peak, open, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

/// Counts one connection open in the process until the returned value is
/// dropped.
#[must_use = "the connection counts as open only while this lives"]
pub(crate) fn opened() -> Opened<'static> {
    COUNTS.opened()
}

/// One open connection (see [`opened`]).
pub(crate) struct Opened<'a>(&'a Counts);

impl Drop for Opened<'_> {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether a trim is due with `open` connections open now and `peak` at
/// most since the last one.
pub(crate) fn due(peak: u64, open: u64) -> bool {
    peak.saturating_sub(open) >= MIN_CLOSED && open <= peak / 2
}

/// Checks the process's counts every [`CHECK_EVERY`] until `stopped`
/// turns true, and hands the free heap back when a trim is [`due`].
pub(crate) async fn run(stopped: watch::Receiver<bool>) {
    watch_counts(&COUNTS, stopped, || async {
        let _ = tokio::task::spawn_blocking(release).await;
    })
    .await;
}

/// [`run`] over any counts and any release (the tests' seam).
async fn watch_counts<F, Fut>(counts: &Counts, mut stopped: watch::Receiver<bool>, mut trim: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut tick = tokio::time::interval(CHECK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        if counts.claim() {
            trim().await;
        }
    }
}

/// Returns the heap's free pages to the OS (glibc's `malloc_trim(0)`).
#[allow(unsafe_code)]
pub(crate) fn release() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only takes glibc's arena locks and releases
    // free pages; it reads no memory of ours.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn a_burst_that_has_closed_is_trimmed_a_steady_state_never() {
        // 5 000 opened, all closed: due.
        assert!(due(5000, 0));
        // Half of them still open: due; more than half: not yet.
        assert!(due(5000, 2500));
        assert!(!due(5000, 2501));
        // A small burst is not worth a trim.
        assert!(!due(1000, 0));
        assert!(due(1024, 0));
        // A steady state (the peak is what is open) never is.
        assert!(!due(50_000, 50_000));
        assert!(!due(0, 0));
    }

    /// The trimmer over its own counts, in virtual time: a steady load
    /// never trims, a burst's end trims once within a check, and the next
    /// burst is measured from what stayed open.
    #[tokio::test(start_paused = true)]
    async fn the_trimmer_trims_once_after_each_burst_and_never_in_a_steady_state() {
        let counts = Counts::new();
        let trims = Cell::new(0u32);
        let (stop, stopped) = watch::channel(false);
        let trimmer = watch_counts(&counts, stopped, || {
            trims.set(trims.get() + 1);
            std::future::ready(())
        });
        let load = async {
            let wait = |s| tokio::time::sleep(Duration::from_secs(s));
            // A steady 3 000 connections for a minute: no trim.
            let steady: Vec<_> = (0..3000).map(|_| counts.opened()).collect();
            wait(60).await;
            assert_eq!(trims.get(), 0, "a steady state trimmed");
            // A burst of 5 000 more, then closed: one trim, within a check.
            let burst: Vec<_> = (0..5000).map(|_| counts.opened()).collect();
            wait(5).await;
            assert_eq!(trims.get(), 0, "trimmed while the burst was open");
            drop(burst);
            wait(CHECK_EVERY.as_secs() + 1).await;
            assert_eq!(trims.get(), 1, "the burst's end");
            wait(30).await;
            assert_eq!(trims.get(), 1, "trimmed again with nothing closed since");
            // The steady connections close too: 3 000 below the new peak.
            drop(steady);
            wait(CHECK_EVERY.as_secs() + 1).await;
            assert_eq!(trims.get(), 2, "the steady connections' end");
            stop.send(true).unwrap();
        };
        let ((), ()) = tokio::join!(trimmer, load);
    }
}
