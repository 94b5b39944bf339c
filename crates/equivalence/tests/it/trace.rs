//! Trace equivalence (issue 14, item 4; issue 42, item 2): one seeded
//! synthetic trace of requests and attempt outcomes, driven through the
//! guard's retry path (`stormbreak_guard::trace::RetryPath`: the proxy's
//! own retry loop, waiting on tokio's paused clock), through
//! `stormbreak-client`'s `RetryLayer` (a tower service answering from the
//! trace, its answers read by the client's own `HttpClassifier` and
//! transport-error classification) and through the simulator's glue (the
//! simulator's `engine::caller::Caller`, fed virtual time by a small event
//! loop), must give identical decisions: which requests are admitted to a
//! retry by the budget, when each retry is sent (to the nanosecond), which
//! outcomes are never retried (403, a `Retry-After` beyond the overall
//! deadline) and when a request gives up.
//!
//! The simulator's side is its engine's own glue
//! (`stormbreak_sim::engine::caller`, public for this test), not a copy.
//!
//! Two things are modelled the same on both sides, being inputs rather than
//! decisions:
//! * tokio's timer wakes on whole milliseconds (it rounds a deadline up), so
//!   the event loop starts a retry decided for time `t` at `t` rounded up
//!   to the millisecond, as the guard's `sleep_until` does; every other
//!   time in the trace is a whole millisecond.
//! * outcomes that meet at one instant reach the shared budget in (time,
//!   request) order on both sides: the guard side's requests take turns
//!   through a small gate, since tokio does not promise an order among
//!   timers of one tick.
//!
//! Timeouts are outcomes of the trace (the simulator applies a hop's
//! `timeout` in its engine, not the retry policy's per-try deadline), so
//! the retry blocks here set no per-try or overall timeout; the guard's own
//! deadlines are tested in `crates/guard/tests/it/policies.rs`.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use stormbreak_guard::trace::{Answer, RetryPath};
use stormbreak_policy::Nanos;
use stormbreak_policy::budget::BudgetConfig;
use stormbreak_policy::retry::RetryConfig;
use stormbreak_sim::record::Cause;
use tokio::sync::Notify;

use stormbreak_sim::engine::caller::{self, Caller, Next};
use tower::{Layer, ServiceExt};

const REQUESTS: usize = 3000;
const JITTER_SEED: u64 = 0x5eed;

/// One attempt's outcome in the trace: a latency and what came back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Ok,
    Fail(Cause, Option<u64>),
}

impl Outcome {
    /// As the guard's attempt answers it.
    fn answer(self) -> Answer {
        match self {
            Outcome::Ok => Answer::Status {
                status: 200,
                retry_after_secs: None,
            },
            Outcome::Fail(Cause::Timeout, _) => Answer::Timeout,
            Outcome::Fail(Cause::Reset, _) => Answer::Reset,
            Outcome::Fail(Cause::FlowsExhausted, _) => Answer::ConnectFailed,
            Outcome::Fail(cause, retry_after_secs) => Answer::Status {
                status: cause.status().expect("a cause with a status"),
                retry_after_secs,
            },
        }
    }
}

/// A request of the trace: arrival, and the outcome of each attempt it may
/// make (more than any policy here allows).
#[derive(Clone, Debug)]
struct Request {
    arrival: Nanos,
    attempts: Vec<(Nanos, Outcome)>,
}

/// What happened to one request: each attempt's start, and how it ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Decided {
    starts: Vec<Nanos>,
    succeeded: bool,
}

/// A storm in three phases: healthy, then 80 % failing for the middle
/// third (the budget runs dry), then healthy again; failures of every kind
/// the policy tells apart, some with `Retry-After`.
fn trace(seed: u64) -> Vec<Request> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut at = Nanos::ZERO;
    (0..REQUESTS)
        .map(|i| {
            at += Nanos::from_millis(rng.random_range(1..=12));
            let storm = (REQUESTS / 3..2 * REQUESTS / 3).contains(&i);
            let p_fail = if storm { 0.8 } else { 0.1 };
            let attempts = (0..8)
                .map(|_| {
                    let latency = Nanos::from_millis(rng.random_range(1..=40));
                    let outcome = if rng.random_bool(p_fail) {
                        let cause = match rng.random_range(0..8) {
                            0 => Cause::Shed403,
                            1 => Cause::Shed429,
                            2 => Cause::Timeout,
                            3 => Cause::Reset,
                            4 => Cause::FlowsExhausted,
                            5 => Cause::DependencyFailed,
                            _ => Cause::Shed503,
                        };
                        let retry_after = match cause {
                            Cause::Shed429 | Cause::Shed503 if rng.random_bool(0.3) => {
                                Some(rng.random_range(0..=2))
                            }
                            _ => None,
                        };
                        Outcome::Fail(cause, retry_after)
                    } else {
                        Outcome::Ok
                    };
                    (latency, outcome)
                })
                .collect();
            Request {
                arrival: at,
                attempts,
            }
        })
        .collect()
}

fn ceil_ms(t: Nanos) -> Nanos {
    t.div_ceil(Nanos::from_millis(1)) * Nanos::from_millis(1)
}

/// The simulator's side: its `Caller` in an event loop over virtual time.
fn simulate(retry: &RetryConfig, budget: Option<&BudgetConfig>, trace: &[Request]) -> Vec<Decided> {
    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Ev {
        /// The request arrives (budget deposit).
        Start,
        /// Attempt `n` ends with its outcome.
        End(usize),
        /// Attempt `n` starts.
        Send(usize),
    }
    let mut caller = Caller::new(Some(retry), budget);
    let mut rng = Pcg64Mcg::seed_from_u64(JITTER_SEED);
    let mut states = vec![caller::CallState::default(); trace.len()];
    let mut out = vec![Decided::default(); trace.len()];
    let mut queue = BinaryHeap::new();
    for (i, r) in trace.iter().enumerate() {
        queue.push(Reverse((r.arrival, i, Ev::Start)));
    }
    while let Some(Reverse((now, i, ev))) = queue.pop() {
        match ev {
            Ev::Start => {
                states[i] = caller.start(now);
                queue.push(Reverse((now, i, Ev::Send(0))));
            }
            Ev::Send(n) => {
                out[i].starts.push(now);
                queue.push(Reverse((now + trace[i].attempts[n].0, i, Ev::End(n))));
            }
            Ev::End(n) => match trace[i].attempts[n].1 {
                Outcome::Ok => {
                    caller.on_success(&mut states[i], now, &mut rng);
                    out[i].succeeded = true;
                }
                Outcome::Fail(cause, secs) => {
                    let retry_after = secs.map(Nanos::from_secs);
                    match caller.after_failure(&mut states[i], now, cause, retry_after, &mut rng) {
                        // tokio's timer: a wake-up for `t` comes at `t` rounded up to the millisecond.
                        Next::RetryAt(t) => {
                            let at = if t > now { ceil_ms(t) } else { now };
                            queue.push(Reverse((at, i, Ev::Send(n + 1))));
                        }
                        Next::GiveUp => {}
                    }
                }
            },
        }
    }
    out
}

/// Lets the guard side's requests reach the budget in (time, request)
/// order when several meet at one instant. Every turn is announced before
/// its instant comes (arrivals up front, an attempt's end when it starts,
/// at least 1 ms earlier), so at each instant the least pending turn is
/// known.
#[derive(Default)]
struct Gate {
    pending: Mutex<BTreeSet<(Nanos, usize)>>,
    turn: Notify,
}

impl Gate {
    fn announce(&self, key: (Nanos, usize)) {
        assert!(self.pending.lock().unwrap().insert(key), "{key:?} twice");
    }

    /// Waits until `key` is the least pending turn, then takes it. The
    /// caller touches the budget before it next yields, so the following
    /// turn runs after it.
    async fn take(&self, key: (Nanos, usize)) {
        loop {
            let notified = self.turn.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut p = self.pending.lock().unwrap();
                if p.first() == Some(&key) {
                    p.remove(&key);
                    drop(p);
                    self.turn.notify_waiters();
                    return;
                }
            }
            notified.await;
        }
    }
}

/// The guard's side: every request a task on tokio's paused clock, through
/// `RetryPath::call`, the proxy's retry loop.
async fn guard(
    retry: &RetryConfig,
    budget: Option<&BudgetConfig>,
    trace: &[Request],
) -> Vec<Decided> {
    // First, before any time passes: the path's clock starts with tokio's.
    let path = Arc::new(RetryPath::new(retry, budget, JITTER_SEED).unwrap());
    let gate = Arc::new(Gate::default());
    for (i, r) in trace.iter().enumerate() {
        gate.announce((r.arrival, i));
    }
    let start = tokio::time::Instant::now();
    let tasks: Vec<_> = trace
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, r)| {
            let (path, gate) = (path.clone(), gate.clone());
            tokio::spawn(async move {
                tokio::time::sleep_until(start + r.arrival.into()).await;
                gate.take((r.arrival, i)).await;
                let decided = Mutex::new(Decided::default());
                let answer = path
                    .call(|_deadline| {
                        let now = path.now();
                        let mut d = decided.lock().unwrap();
                        let (latency, outcome) = r.attempts[d.starts.len()];
                        d.starts.push(now);
                        let end = now + latency;
                        gate.announce((end, i));
                        let gate = gate.clone();
                        async move {
                            tokio::time::sleep_until(start + end.into()).await;
                            gate.take((end, i)).await;
                            outcome.answer()
                        }
                    })
                    .await;
                let mut d = decided.into_inner().unwrap();
                d.succeeded = answer == Outcome::Ok.answer();
                d
            })
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// The error a trace's transport failure reaches the client's layer as:
/// the I/O error a hyper or reqwest stack carries in its source chain.
fn transport_error(answer: Answer) -> std::io::Error {
    std::io::Error::from(match answer {
        Answer::Timeout => std::io::ErrorKind::TimedOut,
        Answer::ConnectFailed => std::io::ErrorKind::ConnectionRefused,
        _ => std::io::ErrorKind::ConnectionReset,
    })
}

/// The client's side: every request a task on tokio's paused clock,
/// through one `stormbreak_client::RetryLayer` (budget and jitter seed as
/// the other sides), the trace's answers as HTTP responses or transport
/// errors, classified by the client's own code.
async fn client(
    retry: &RetryConfig,
    budget: Option<&BudgetConfig>,
    trace: &[Request],
) -> Vec<Decided> {
    let mut builder = stormbreak_client::RetryLayer::builder(retry)
        .unwrap()
        .seed(JITTER_SEED)
        .clone_with(|r: &usize| Some(*r));
    if let Some(b) = budget {
        builder = builder.budget_config(b).unwrap();
    }
    // Built before any time passes: the layer's clock starts with tokio's.
    let layer = builder.build();
    let origin = tokio::time::Instant::now();
    let now = move || Nanos::from(tokio::time::Instant::now() - origin);
    let gate = Arc::new(Gate::default());
    for (i, r) in trace.iter().enumerate() {
        gate.announce((r.arrival, i));
    }
    let tasks: Vec<_> = trace
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, r)| {
            let (gate, ends) = (gate.clone(), gate.clone());
            let decided = Arc::new(Mutex::new(Decided::default()));
            let seen = decided.clone();
            let service = layer.layer(tower::service_fn(move |_: usize| {
                let t = now();
                let mut d = seen.lock().unwrap();
                let (latency, outcome) = r.attempts[d.starts.len()];
                d.starts.push(t);
                let end = t + latency;
                ends.announce((end, i));
                let gate = ends.clone();
                async move {
                    tokio::time::sleep_until(origin + end.into()).await;
                    gate.take((end, i)).await;
                    match outcome.answer() {
                        Answer::Status {
                            status,
                            retry_after_secs,
                        } => {
                            let mut response = http::Response::builder().status(status);
                            if let Some(s) = retry_after_secs {
                                response = response.header("retry-after", s.to_string());
                            }
                            Ok(response.body(()).unwrap())
                        }
                        failed => Err(transport_error(failed)),
                    }
                }
            }));
            let arrival = r.arrival;
            tokio::spawn(async move {
                tokio::time::sleep_until(origin + arrival.into()).await;
                gate.take((arrival, i)).await;
                let answer = service.oneshot(i).await;
                let succeeded = matches!(&answer, Ok(r) if r.status() == 200);
                let mut d = std::mem::take(&mut *decided.lock().unwrap());
                d.succeeded = succeeded;
                d
            })
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

fn block<T: serde::de::DeserializeOwned>(text: &str) -> T {
    toml::from_str(text).unwrap()
}

async fn equivalent(retry: &str, budget: &str) {
    let (retry, budget): (RetryConfig, BudgetConfig) = (block(retry), block(budget));
    let trace = trace(14);
    let sim = simulate(&retry, Some(&budget), &trace);
    let guard = guard(&retry, Some(&budget), &trace).await;
    let client = client(&retry, Some(&budget), &trace).await;
    let attempts = |d: &[Decided]| d.iter().map(|d| d.starts.len()).sum::<usize>();
    let (a, ok) = (attempts(&sim), sim.iter().filter(|d| d.succeeded).count());
    eprintln!("{budget:?}: {a} attempts for {REQUESTS} requests, {ok} succeeded");
    // The trace must exercise the policy: retries taken (the storm's
    // failures alone would allow over 1 500 more without a budget).
    assert!(a > REQUESTS + 50, "{a} attempts: too few retries");
    for (i, (s, g)) in sim.iter().zip(&guard).enumerate() {
        assert_eq!(s, g, "request {i} ({:?}): simulator vs guard", trace[i]);
    }
    for (i, (s, c)) in sim.iter().zip(&client).enumerate() {
        assert_eq!(s, c, "request {i} ({:?}): simulator vs client", trace[i]);
    }
}

/// A `retry` block without `budget`: the simulator runs it unbudgeted,
/// the guard under the ratio budget's defaults (docs/guard.md, "Same
/// decisions as the simulator"). Pinned here: the guard without a budget
/// decides as the simulator does with `budget = { kind = "ratio" }`, and
/// not as the unbudgeted simulator.
#[tokio::test(start_paused = true)]
async fn without_a_budget_the_guard_is_the_simulator_under_the_default_ratio_budget() {
    let retry: RetryConfig = block(RETRY);
    let trace = trace(14);
    let guard = guard(&retry, None, &trace).await;
    let ratio = simulate(&retry, Some(&block(r#"kind = "ratio""#)), &trace);
    assert_eq!(guard, ratio);
    // The client's layer without a budget: the same default.
    assert_eq!(client(&retry, None, &trace).await, ratio);
    // The unbudgeted simulator retries every retryable failure of the
    // storm; the guard does not.
    let attempts = |d: &[Decided]| d.iter().map(|d| d.starts.len()).sum::<usize>();
    let free = simulate(&retry, None, &trace);
    assert!(
        attempts(&free) > attempts(&guard),
        "{} vs {}",
        attempts(&free),
        attempts(&guard)
    );
}

/// Every retry block of the incident scenario's callers with jitter (so the
/// seeded RNG is in the comparison), under each kind of budget.
const RETRY: &str = r#"max_attempts = 3
backoff = { kind = "exponential", base = "200ms", jitter = "full" }"#;

#[tokio::test(start_paused = true)]
async fn the_ratio_budget_decides_the_same_in_the_guard_and_the_simulator() {
    equivalent(RETRY, r#"kind = "ratio""#).await;
}

#[tokio::test(start_paused = true)]
async fn the_grpc_throttle_decides_the_same_in_the_guard_and_the_simulator() {
    equivalent(RETRY, r#"kind = "grpc""#).await;
}

#[tokio::test(start_paused = true)]
async fn the_aws_quota_decides_the_same_in_the_guard_and_the_simulator() {
    equivalent(RETRY, r#"kind = "aws""#).await;
}

#[tokio::test(start_paused = true)]
async fn the_token_bucket_decides_the_same_in_the_guard_and_the_simulator() {
    equivalent(RETRY, r#"kind = "bucket""#).await;
}

#[tokio::test(start_paused = true)]
async fn decorrelated_jitter_with_many_attempts_decides_the_same() {
    equivalent(
        r#"max_attempts = 5
backoff = { kind = "exponential", base = "50ms", max = "2s", jitter = "decorrelated" }"#,
        r#"kind = "ratio"
retry_ratio = 0.1"#,
    )
    .await;
}
