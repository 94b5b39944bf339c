//! Independent simulations on several threads, results in a fixed order.
//!
//! Each run is deterministic on its own (one seeded RNG stream per entity,
//! no shared state), so running several at once cannot change any of
//! them; collecting the results by their index, not by completion, keeps
//! every output byte-identical whatever the thread count. The replay's
//! `--ablation`/`--compare` and `stormbreak sweep` both run on this.
//!
//! Threads take the next index from an atomic counter, so a slow run never
//! holds a thread idle.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Most threads [`map_in_order`] starts, whatever it is asked for.
pub const MAX_THREADS: usize = 256;

/// Applies `f` to every item on up to `jobs` threads and returns the
/// results in the items' order. `on_done` is called (from any thread)
/// after each item, for a progress bar. The first error by index wins;
/// once one is seen no further item is started.
pub fn map_in_order<T: Send, R: Send, E: Send>(
    jobs: usize,
    items: Vec<T>,
    f: impl Fn(T) -> Result<R, E> + Sync,
    on_done: impl Fn() + Sync,
) -> Result<Vec<R>, E> {
    let n = items.len();
    let inputs: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    let outputs: Vec<Mutex<Option<Result<R, E>>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let worker = || {
        loop {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                return;
            }
            let item = inputs[i]
                .lock()
                .expect("no worker panics holding it")
                .take()
                .expect("each index is taken once");
            let r = f(item);
            if r.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            *outputs[i].lock().expect("no worker panics holding it") = Some(r);
            on_done();
        }
    };
    let threads = jobs.clamp(1, MAX_THREADS).min(n.max(1));
    if threads == 1 {
        worker();
    } else {
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(worker);
            }
        });
    }
    let mut results = Vec::with_capacity(n);
    for o in outputs {
        match o.into_inner().expect("no worker panicked") {
            Some(Ok(r)) => results.push(r),
            Some(Err(e)) => return Err(e),
            // Not started because an earlier-started item failed: that
            // error is further on, or already returned.
            None => continue,
        }
    }
    if results.len() < n {
        unreachable!("an item was skipped without an error being recorded");
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_item_order_whatever_the_threads() {
        for jobs in [1, 2, 7] {
            let out: Result<Vec<u64>, ()> = map_in_order(
                jobs,
                (0..50u64).collect(),
                |i| {
                    // Uneven work, so completion order differs from item order.
                    std::hint::black_box((0..(50 - i) * 1000).sum::<u64>());
                    Ok(i)
                },
                || {},
            );
            assert_eq!(out.unwrap(), (0..50).collect::<Vec<_>>());
        }
    }

    #[test]
    fn the_first_error_by_index_is_returned() {
        let out: Result<Vec<u32>, u32> = map_in_order(
            1,
            vec![1, 2, 3, 4],
            |i| if i >= 3 { Err(i) } else { Ok(i) },
            || {},
        );
        assert_eq!(out, Err(3));
    }
}
