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

/// Connections open now, on every listener of every guard in the process.
static OPEN: AtomicU64 = AtomicU64::new(0);
/// The most open at once since the last trim.
static PEAK: AtomicU64 = AtomicU64::new(0);

/// Counts one connection open until the returned value is dropped.
#[must_use = "the connection counts as open only while this lives"]
pub(crate) fn opened() -> Opened {
    let now = OPEN.fetch_add(1, Ordering::Relaxed) + 1;
    PEAK.fetch_max(now, Ordering::Relaxed);
    Opened(())
}

/// One open connection (see [`opened`]).
pub(crate) struct Opened(());

impl Drop for Opened {
    fn drop(&mut self) {
        OPEN.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether a trim is due with `open` connections open now and `peak` at
/// most since the last one.
pub(crate) fn due(peak: u64, open: u64) -> bool {
    peak.saturating_sub(open) >= MIN_CLOSED && open <= peak / 2
}

/// Checks every [`CHECK_EVERY`] until `stopped` turns true, and trims when
/// [`due`].
pub(crate) async fn run(mut stopped: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(CHECK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        let (peak, open) = (PEAK.load(Ordering::Relaxed), OPEN.load(Ordering::Relaxed));
        // Claim the trim: of several guards in one process, one trims, and
        // the peak starts again from what is open now.
        if due(peak, open)
            && PEAK
                .compare_exchange(peak, open, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let _ = tokio::task::spawn_blocking(release).await;
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
}
