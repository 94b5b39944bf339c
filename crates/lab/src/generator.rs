//! A client population as an **open-loop** generator: it sends at the
//! intended times its schedule draws, whether or not earlier requests were
//! answered, caps its requests in flight and counts an intended send that
//! finds the cap reached as *dropped* (k6's `dropped_iterations`), never
//! sending later instead. Latency is measured from the intended send time
//! (coordinated omission corrected, as wrk2 and oha do) and from the
//! actual one.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::Nanos;
use tokio::sync::watch;
use tokio::time::Instant;

use stormbreak_sim::engine::rate::RateSchedule;

/// Where a generator reports its sends.
pub trait SendLog: Send + Sync {
    /// The schedule meant to send at `intended` (since time zero); `sent`
    /// is false when the in-flight cap dropped it; `slip` is how late the
    /// generator got to it.
    fn intended(&self, intended: Nanos, sent: bool, slip: Nanos);
}

/// Runs the open loop from `origin` until `end` (since `origin`): draws
/// the next intended time from the current schedule (a `set_rate` replaces
/// it through `schedule`, redrawn from that instant), sleeps until it, and
/// spawns `send(intended)` unless `cap` requests are in flight. A send
/// that was due while the generator was busy is made at once, late, and
/// its slip recorded.
pub async fn open_loop<F, Fut>(
    mut schedule: watch::Receiver<Arc<RateSchedule>>,
    seed: u64,
    origin: Instant,
    end: Nanos,
    cap: u32,
    log: Arc<dyn SendLog>,
    send: F,
) where
    F: Fn(Nanos) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let in_flight = Arc::new(AtomicU32::new(0));
    let mut t = Nanos::ZERO;
    let mut current = schedule.borrow_and_update().clone();
    // False once the schedule's sender is gone: no change can come.
    let mut live = true;
    let mut next = current.next_after(t, &mut rng).filter(|&n| n < end);
    loop {
        if next.is_none() && !live {
            return; // nothing more to send, and no rate change can come
        }
        let sleep = async {
            match next {
                Some(n) => tokio::time::sleep_until(origin + std::time::Duration::from(n)).await,
                None => std::future::pending().await,
            }
        };
        let changed = async {
            if live {
                schedule.changed().await.is_ok()
            } else {
                std::future::pending().await
            }
        };
        tokio::select! {
            () = sleep => {}
            ok = changed => {
                if ok {
                    // Redraw under the new rate from now (memoryless).
                    current = schedule.borrow_and_update().clone();
                    t = since(origin).max(t);
                    next = current.next_after(t, &mut rng).filter(|&n| n < end);
                } else if next.is_none() {
                    return;
                } else {
                    live = false;
                }
                continue;
            }
        }
        let sent = next.expect("slept until it");
        t = sent;
        next = current.next_after(t, &mut rng).filter(|&n| n < end);
        let next = sent;
        let due = origin + std::time::Duration::from(next);
        let slip = Nanos::from(Instant::now().saturating_duration_since(due));
        if in_flight.load(Ordering::Relaxed) >= cap {
            log.intended(next, false, slip);
            continue;
        }
        log.intended(next, true, slip);
        in_flight.fetch_add(1, Ordering::Relaxed);
        let fut = send(next);
        let counter = in_flight.clone();
        tokio::spawn(async move {
            fut.await;
            counter.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

fn since(origin: Instant) -> Nanos {
    Nanos::from(Instant::now().saturating_duration_since(origin))
}

#[cfg(test)]
mod tests {
    //! The open loop in virtual time (tokio's paused clock): sends happen
    //! at the intended times whatever the answers, the cap drops instead of
    //! delaying, and a rate change redraws from its instant.

    use std::sync::Mutex;

    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    use super::*;

    #[derive(Default)]
    struct Recorded(Mutex<Vec<(Nanos, bool, Nanos)>>);

    impl SendLog for Recorded {
        fn intended(&self, intended: Nanos, sent: bool, slip: Nanos) {
            self.0.lock().unwrap().push((intended, sent, slip));
        }
    }

    fn schedule(rate: f64) -> watch::Receiver<Arc<RateSchedule>> {
        watch::channel(Arc::new(RateSchedule::new(rate, &[]))).1
    }

    /// The schedule's own draws, for comparison.
    fn draws(rate: f64, seed: u64, end: Nanos) -> Vec<Nanos> {
        let s = RateSchedule::new(rate, &[]);
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let mut t = Nanos::ZERO;
        let mut v = Vec::new();
        while let Some(n) = s.next_after(t, &mut rng).filter(|&n| n < end) {
            v.push(n);
            t = n;
        }
        v
    }

    #[tokio::test(start_paused = true)]
    async fn sends_at_the_intended_times_while_answers_are_slow() {
        let log = Arc::new(Recorded::default());
        let sent_at = Arc::new(Mutex::new(Vec::new()));
        let origin = Instant::now();
        let end = Nanos::from_secs(5);
        let at = sent_at.clone();
        open_loop(
            schedule(100.0),
            3,
            origin,
            end,
            10_000,
            log.clone(),
            move |i| {
                at.lock().unwrap().push((i, Nanos::from(origin.elapsed())));
                // Each answer takes 2 s: a closed loop would slow down.
                tokio::time::sleep(std::time::Duration::from_secs(2))
            },
        )
        .await;
        let want = draws(100.0, 3, end);
        let log = log.0.lock().unwrap();
        assert_eq!(log.iter().map(|e| e.0).collect::<Vec<_>>(), want);
        assert!(log.iter().all(|e| e.1), "nothing dropped under the cap");
        let sent = sent_at.lock().unwrap();
        assert_eq!(sent.len(), want.len());
        for &(intended, actual) in sent.iter() {
            // Virtual time: the send happens at its intended instant, to
            // the timer's millisecond.
            assert!(actual >= intended && actual - intended <= Nanos::from_millis(1));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_in_flight_cap_drops_sends_and_never_delays_them() {
        let log = Arc::new(Recorded::default());
        let origin = Instant::now();
        let end = Nanos::from_secs(10);
        open_loop(schedule(50.0), 4, origin, end, 3, log.clone(), |_| {
            tokio::time::sleep(std::time::Duration::from_secs(1))
        })
        .await;
        let log = log.0.lock().unwrap();
        assert_eq!(log.len(), draws(50.0, 4, end).len());
        // At most 3 in flight, each held 1 s: within any second at most 3
        // sends are made, the others dropped.
        let sent: Vec<Nanos> = log.iter().filter(|e| e.1).map(|e| e.0).collect();
        for (k, &t) in sent.iter().enumerate() {
            let within = sent[k..]
                .iter()
                .take_while(|&&u| u < t + Nanos::SECOND)
                .count();
            assert!(within <= 3, "{within} sends within 1 s of {t}");
        }
        let dropped = log.iter().filter(|e| !e.1).count();
        assert!(dropped > log.len() / 2, "{dropped} of {}", log.len());
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_change_takes_effect_at_its_instant() {
        let log = Arc::new(Recorded::default());
        let origin = Instant::now();
        let (tx, rx) = watch::channel(Arc::new(RateSchedule::new(0.0, &[])));
        let changer = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            tx.send_replace(Arc::new(
                RateSchedule::new(0.0, &[]).constant_from(Nanos::from_secs(2), 200.0),
            ));
            // Keep the sender until the end, so the loop keeps listening.
            tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        });
        let end = Nanos::from_secs(4);
        tokio::time::timeout(
            std::time::Duration::from_secs(20),
            open_loop(rx, 5, origin, end, 10_000, log.clone(), |_| async {}),
        )
        .await
        .unwrap_or(());
        changer.abort();
        let log = log.0.lock().unwrap();
        assert!(log.iter().all(|e| e.0 >= Nanos::from_secs(2) && e.0 < end));
        // Poisson with mean 400 (2 s at 200/s): 5 sd is 100.
        assert!((300..=500).contains(&log.len()), "{}", log.len());
    }
}
