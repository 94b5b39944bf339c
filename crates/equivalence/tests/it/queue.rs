//! Admission-queue equivalence (issue 14, item 4, with the route `queue`):
//! one seeded trace of requests of mixed classes through the guard's route
//! admission with a queue (`stormbreak_guard::trace::LimitPath`: the
//! proxy's shed step and `ConcurrencyLimit`, whose waiters are real tasks
//! parked on its `Notify`, on tokio's paused clock) and through the
//! simulator's gateway admission with a queue
//! (`stormbreak_sim::engine::admission`, driven as the engine's
//! `gateway.rs` drives it: a slot coming back wakes the oldest waiter, one
//! that finds no slot waits again at the back). Both must admit, queue and
//! refuse the same requests, give each refusal the same answer, and agree
//! on (in flight, limit, waiting) after every event, under every limit
//! algorithm.
//!
//! Time is laid out so that the two clocks can agree exactly. tokio's
//! timers fire on whole milliseconds (rounded up), so every arrival is at
//! a half millisecond and every latency and the queue timeout are whole
//! milliseconds: arrivals, completions and wake-ups all fall on half
//! milliseconds, and a wait times out on the whole millisecond after its
//! deadline, never at the same instant as another event. The simulator
//! side times a wait out at that same instant; the engine itself times it
//! out at the deadline (`crates/sim/tests/it/gateway_limit.rs`). A waiter
//! woken by a release runs before the next event, as the engine admits it
//! within the release.

use std::cmp::Reverse;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use stormbreak_equivalence::{Answer, Request, arrivals, draw_class, paused_runtime};
use stormbreak_guard::trace::{self, LimitPath};
use stormbreak_policy::Nanos;
use stormbreak_policy::limit::{LimitConfig, QueueConfig};
use stormbreak_sim::engine::Res;
use stormbreak_sim::engine::admission::{Admission, Admitted, Slot};
use stormbreak_sim::record::Cause;

const REQUESTS: usize = 3000;
const LIMITER_SEED: u64 = 0x9_0e0e;
const HALF_MS: Nanos = Nanos::from_micros(500);

/// Arrivals 1–3 ms apart on half milliseconds; whole-millisecond
/// latencies that quadruple for a while (the queue fills and waits time
/// out), then a phase of mostly 503s (loss-based limits back off), then
/// healthy again.
fn trace(seed: u64) -> Vec<Request> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut t = HALF_MS;
    (0..REQUESTS)
        .map(|i| {
            t += Nanos::from_millis(rng.random_range(1..=3));
            let status = if (1_500..2_200).contains(&i) && rng.random_bool(0.8) {
                503
            } else {
                200
            };
            let slow = if (400..1_200).contains(&i) { 4 } else { 1 };
            let class = draw_class(&mut rng);
            Request {
                at: t,
                class,
                latency: Nanos::from_millis(rng.random_range(4..=12) * slow),
                status,
            }
        })
        .collect()
}

fn queue() -> QueueConfig {
    QueueConfig {
        size: 8,
        timeout: Nanos::from_millis(20),
    }
}

#[derive(Debug)]
struct Decisions {
    /// Per request: the refusal's answer, `None` when admitted.
    refused: Vec<Option<Answer>>,
    /// Per request: when it was admitted.
    admitted_at: Vec<Option<Nanos>>,
    /// (time, in flight, limit, waiting) after every arrival and completion.
    states: Vec<(Nanos, u64, u64, u64)>,
}

impl Decisions {
    fn new(n: usize) -> Self {
        Decisions {
            refused: vec![None; n],
            admitted_at: vec![None; n],
            states: Vec::new(),
        }
    }
}

const COMPLETION: u8 = 0;
const ARRIVAL: u8 = 1;
const DEADLINE: u8 = 2;

fn sim_side(config: &LimitConfig, reqs: &[Request], seed: u64) -> Decisions {
    let q = queue();
    let mut adm = Admission::new(config, None, Some(&q), 1, Pcg64Mcg::seed_from_u64(seed)).unwrap();
    let mut slots: Vec<Option<Slot>> = vec![None; reqs.len()];
    let mut waiting: Vec<bool> = vec![false; reqs.len()];
    let mut waiters: VecDeque<usize> = VecDeque::new();
    let mut out = Decisions::new(reqs.len());
    let mut events = arrivals(reqs.iter().map(|r| r.at), ARRIVAL);
    while let Some(Reverse((now, kind, i))) = events.pop() {
        match kind {
            ARRIVAL => match adm.admit(now, reqs[i].class) {
                Ok(Admitted::Now(slot)) => {
                    slots[i] = Some(slot);
                    out.admitted_at[i] = Some(now);
                    events.push(Reverse((now + reqs[i].latency, COMPLETION, i)));
                }
                Ok(Admitted::Queued { .. }) => {
                    waiting[i] = true;
                    waiters.push_back(i);
                    // The first whole millisecond at or after the deadline.
                    let deadline = now + q.timeout;
                    let ms = Nanos::from_millis(1);
                    events.push(Reverse((deadline.div_ceil(ms) * ms, DEADLINE, i)));
                }
                Err(r) => out.refused[i] = Some(r.answer()),
            },
            COMPLETION => {
                let res = if reqs[i].status == 200 {
                    Res::Ok
                } else {
                    Res::Err(Cause::Shed503, None)
                };
                let slot = slots[i].take().expect("admitted");
                adm.finish(now, slot, Admission::outcome(res, false));
                // The engine's wake_waiter: the oldest live waiter tries.
                if adm.waiting_of(0) > 0 {
                    while let Some(w) = waiters.pop_front() {
                        if !waiting[w] {
                            continue;
                        }
                        match adm.wake(now, 0) {
                            Some(slot) => {
                                waiting[w] = false;
                                slots[w] = Some(slot);
                                out.admitted_at[w] = Some(now);
                                events.push(Reverse((now + reqs[w].latency, COMPLETION, w)));
                            }
                            None => waiters.push_back(w),
                        }
                        break;
                    }
                }
            }
            _ => {
                if waiting[i] {
                    waiting[i] = false;
                    adm.leave_queue(0);
                    out.refused[i] = Some(adm.refusal_answer());
                }
                continue;
            }
        }
        out.states.push((
            now,
            u64::from(adm.inflight()),
            adm.limit(),
            u64::from(adm.waiting()),
        ));
    }
    out
}

/// What a request's admission task reported.
enum Report {
    Admitted(usize, trace::Admitted),
    Refused(usize, trace::Refused),
}

fn guard_side(config: &LimitConfig, reqs: &[Request], seed: u64) -> Decisions {
    let rt = paused_runtime();
    rt.block_on(async {
        let path = Arc::new(LimitPath::new(config, None, Some(&queue()), seed).unwrap());
        let origin = tokio::time::Instant::now();
        let now = || Nanos::from(tokio::time::Instant::now() - origin);
        let reports: Arc<Mutex<Vec<Report>>> = Arc::default();
        let mut held: Vec<Option<trace::Admitted>> = (0..reqs.len()).map(|_| None).collect();
        let mut out = Decisions::new(reqs.len());
        let mut events = arrivals(reqs.iter().map(|r| r.at), ARRIVAL);
        // Lets every woken task (a waiter the release notified, one whose
        // wait timed out, a new arrival) run before the loop goes on.
        async fn settle() {
            for _ in 0..8 {
                tokio::task::yield_now().await;
            }
        }
        while let Some(Reverse((at, kind, i))) = events.pop() {
            // Through the whole milliseconds first, so the waits that time
            // out before `at` do, in order; then to the half millisecond.
            let ms = Nanos::from_millis(1);
            let floor = at / ms * ms;
            if floor > now() {
                tokio::time::sleep_until(origin + Duration::from(floor)).await;
                settle().await;
            }
            tokio::time::advance(Duration::from(at - now())).await;
            assert_eq!(now(), at, "the clock reaches each event exactly");
            if kind == ARRIVAL {
                let (path, reports, class) = (path.clone(), reports.clone(), reqs[i].class);
                tokio::spawn(async move {
                    let report = match path.admit(class).await {
                        Ok(a) => Report::Admitted(i, a),
                        Err(r) => Report::Refused(i, r),
                    };
                    reports.lock().unwrap().push(report);
                });
            } else {
                held[i].take().expect("admitted").finish(reqs[i].status);
            }
            settle().await;
            for report in reports.lock().unwrap().drain(..) {
                match report {
                    Report::Admitted(j, a) => {
                        held[j] = Some(a);
                        out.admitted_at[j] = Some(at);
                        events.push(Reverse((at + reqs[j].latency, COMPLETION, j)));
                    }
                    Report::Refused(j, r) => out.refused[j] = Some((r.status, r.retry_after)),
                }
            }
            out.states
                .push((at, path.inflight(), u64::from(path.limit()), path.waiting()));
        }
        // Waits still running at the end time out by themselves.
        tokio::time::sleep(Duration::from(queue().timeout) * 2).await;
        settle().await;
        for report in reports.lock().unwrap().drain(..) {
            if let Report::Refused(j, r) = report {
                out.refused[j] = Some((r.status, r.retry_after));
            }
        }
        out
    })
}

fn first_difference(reqs: &[Request], sim: &Decisions, guard: &Decisions) -> Option<String> {
    let k = (0..sim.states.len().max(guard.states.len()))
        .find(|&k| sim.states.get(k) != guard.states.get(k));
    let i = (0..reqs.len()).find(|&i| {
        sim.refused[i] != guard.refused[i] || sim.admitted_at[i] != guard.admitted_at[i]
    });
    match (k, i) {
        (None, None) => None,
        (k, i) => Some(format!(
            "first state difference {:?}: simulator (t, in flight, limit, waiting) {:?}, guard {:?}; \
             first request difference {:?}: simulator refused {:?} admitted at {:?}, guard {:?} {:?}",
            k,
            k.and_then(|k| sim.states.get(k)),
            k.and_then(|k| guard.states.get(k)),
            i,
            i.map(|i| sim.refused[i]),
            i.map(|i| sim.admitted_at[i]),
            i.map(|i| guard.refused[i]),
            i.map(|i| guard.admitted_at[i]),
        )),
    }
}

const CONFIGS: [&str; 5] = [
    "kind = \"fixed\"\nlimit = 12",
    "kind = \"aimd\"\ninitial_limit = 10\nmin_limit = 1\ntimeout = \"30ms\"",
    "kind = \"vegas\"\ninitial_limit = 10",
    "kind = \"gradient2\"\ninitial_limit = 10\nmin_limit = 1",
    "kind = \"envoy_gradient\"",
];

fn config(text: &str) -> LimitConfig {
    toml::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn the_guard_and_the_simulator_queue_admit_and_time_out_the_same_requests() {
    let reqs = trace(3);
    for text in CONFIGS {
        let c = config(text);
        let sim = sim_side(&c, &reqs, LIMITER_SEED);
        let guard = guard_side(&c, &reqs, LIMITER_SEED);
        // The queue is used, waits are admitted from it and others time
        // out, so every part of the path is compared.
        let queued = sim.states.iter().filter(|s| s.3 > 0).count();
        let late = (0..reqs.len())
            .filter(|&i| sim.admitted_at[i].is_some_and(|t| t > reqs[i].at))
            .count();
        let timed_out = (0..reqs.len())
            .filter(|&i| sim.refused[i].is_some() && sim.admitted_at[i].is_none())
            .count();
        assert!(
            queued > 0 && late > 0 && timed_out > 0,
            "{text}: {queued} {late} {timed_out}"
        );
        if let Some(d) = first_difference(&reqs, &sim, &guard) {
            panic!("{text}: {d}");
        }
    }
}
