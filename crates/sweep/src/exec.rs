//! Runs a sweep's runs on a fixed number of threads and returns their
//! results in the runs' order, so nothing downstream can depend on which
//! thread finished first.
//!
//! Runs share nothing: each builds its own scenario and engine from the
//! plan and its own seed. Threads take the next run index from an atomic
//! counter (work stealing of the simplest kind: a slow cell never holds a
//! thread idle) and store the result in that index's slot.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Most worker threads.
pub const MAX_THREADS: usize = 256;

/// `f(i)` for every `i < n` on up to `threads` threads, in index order.
/// `on_done` is called after each, from whichever thread ran it. On an
/// error no further index is started and the error of the lowest failing
/// index among those run is returned.
pub fn map_indexed<R: Send>(
    n: usize,
    threads: usize,
    f: impl Fn(usize) -> Result<R, String> + Sync,
    on_done: impl Fn() + Sync,
) -> Result<Vec<R>, String> {
    let slots: Vec<Mutex<Option<Result<R, String>>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let worker = || {
        while !failed.load(Ordering::Relaxed) {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                return;
            }
            let r = f(i);
            if r.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            on_done();
        }
    };
    let threads = threads.clamp(1, MAX_THREADS).min(n.max(1));
    if threads == 1 {
        worker();
    } else {
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(worker);
            }
        });
    }
    let mut out = Vec::with_capacity(n);
    for slot in slots {
        match slot.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(Ok(r)) => out.push(r),
            Some(Err(e)) => return Err(e),
            None => {}
        }
    }
    if out.len() == n {
        Ok(out)
    } else {
        // Only reachable after an error, which the loop has returned.
        Err("a run was not started".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_the_index_order_whatever_the_threads() {
        for threads in [1, 2, 5] {
            let out = map_indexed(
                40,
                threads,
                |i| {
                    std::hint::black_box((0..(40 - i as u64) * 2000).sum::<u64>());
                    Ok(i)
                },
                || {},
            )
            .unwrap();
            assert_eq!(out, (0..40).collect::<Vec<_>>());
        }
    }

    #[test]
    fn an_error_stops_the_sweep() {
        let out = map_indexed(
            10,
            1,
            |i| {
                if i == 3 {
                    Err(format!("run {i}"))
                } else {
                    Ok(i)
                }
            },
            || {},
        );
        assert_eq!(out, Err("run 3".to_owned()));
    }
}
