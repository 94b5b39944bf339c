//! A minimal discrete-event M/M/c simulator: the baseline of the engine-speed
//! comparison in docs/BENCHMARKS.md ("M/M/10 side by side").
//!
//! It is the simulator one would write in an afternoon for exactly this
//! model, and nothing more: a `std::collections::BinaryHeap` of
//! `(time, sequence, event)` with integer nanosecond times (as Stormbreak's
//! engine uses), two event kinds, a FIFO of waiting arrival times, and a
//! xoshiro256++ generator with exponential draws by inversion (−ln U / rate).
//! It counts what the comparison checks — arrivals, completions and the sum
//! of sojourn times — and records nothing else (no intervals, no outputs).
//!
//! usage: mm10-minimal [--rate PER_S] [--workers C] [--mean-service S]
//!                     [--horizon S] [--seed N]
//! Prints one JSON object on stdout.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

/// xoshiro256++ (Blackman and Vigna), seeded through splitmix64.
struct Rng([u64; 4]);

impl Rng {
    fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Rng([next(), next(), next(), next()])
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let out = (s[0].wrapping_add(s[3])).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// An exponential draw of mean `mean_ns`, in whole nanoseconds (at least 1).
    fn exp_ns(&mut self, mean_ns: f64) -> u64 {
        // U in (0, 1]: 53 random bits, never 0, so ln U is finite.
        let u = ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64);
        ((-u.ln() * mean_ns) as u64).max(1)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrival,
    /// A service ends; carries its customer's arrival time (for the sojourn).
    Departure(u64),
}

/// Largest expected number of arrivals a run may ask for (rate × horizon).
const MAX_ARRIVALS: f64 = 1e11;

struct Args {
    rate: f64,
    workers: u32,
    mean_service: f64,
    horizon: f64,
    seed: u64,
}

/// `val` parsed as a `T`, or an error naming the flag and what was expected.
fn num<T: std::str::FromStr>(flag: &str, val: &str) -> Result<T, String> {
    val.parse::<T>().map_err(|_| {
        format!(
            "{flag}: expected {}, got {val:?}",
            std::any::type_name::<T>()
        )
    })
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        rate: 9000.0,
        workers: 10,
        mean_service: 0.001,
        horizon: 1000.0,
        seed: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let val = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--rate" => a.rate = num(&flag, &val)?,
            "--workers" => a.workers = num(&flag, &val)?,
            "--mean-service" => a.mean_service = num(&flag, &val)?,
            "--horizon" => a.horizon = num(&flag, &val)?,
            "--seed" => a.seed = num(&flag, &val)?,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if !(a.rate > 0.0 && a.mean_service > 0.0 && a.horizon > 0.0 && a.workers >= 1) {
        return Err("rate, mean-service, horizon must be > 0 and workers ≥ 1".into());
    }
    // Bounds the run: about rate × horizon arrivals, each with two events.
    if a.rate * a.horizon > MAX_ARRIVALS {
        return Err(format!(
            "rate × horizon must be at most {MAX_ARRIVALS:e} arrivals"
        ));
    }
    Ok(a)
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("mm10-minimal: {e}");
            std::process::exit(2);
        }
    };
    let t0 = Instant::now();
    let mut rng = Rng::new(a.seed);
    let gap_ns = 1e9 / a.rate;
    let svc_ns = a.mean_service * 1e9;
    let horizon = (a.horizon * 1e9) as u64;

    let mut heap: BinaryHeap<Reverse<(u64, u64, Ev)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut waiting: VecDeque<u64> = VecDeque::new();
    let mut busy = 0u32;
    let (mut arrivals, mut completions, mut sojourn_ns) = (0u64, 0u64, 0u128);
    let mut events = 0u64;

    heap.push(Reverse((rng.exp_ns(gap_ns), seq, Ev::Arrival)));
    while let Some(Reverse((now, _, ev))) = heap.pop() {
        if now > horizon {
            break;
        }
        events += 1;
        match ev {
            Ev::Arrival => {
                arrivals += 1;
                seq += 1;
                heap.push(Reverse((now + rng.exp_ns(gap_ns), seq, Ev::Arrival)));
                if busy < a.workers {
                    busy += 1;
                    seq += 1;
                    heap.push(Reverse((now + rng.exp_ns(svc_ns), seq, Ev::Departure(now))));
                } else {
                    waiting.push_back(now);
                }
            }
            Ev::Departure(arrived) => {
                completions += 1;
                sojourn_ns += u128::from(now - arrived);
                if let Some(arrived) = waiting.pop_front() {
                    seq += 1;
                    heap.push(Reverse((
                        now + rng.exp_ns(svc_ns),
                        seq,
                        Ev::Departure(arrived),
                    )));
                } else {
                    busy -= 1;
                }
            }
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let mean_sojourn = if completions > 0 {
        sojourn_ns as f64 / completions as f64 / 1e9
    } else {
        f64::NAN
    };
    println!(
        "{{\"peer\": \"minimal-rust\", \"horizon_s\": {}, \"workers\": {}, \"rate\": {}, \"arrivals\": {arrivals}, \
         \"completions\": {completions}, \"events\": {events}, \"mean_sojourn_s\": {mean_sojourn}, \"wall_s\": {wall}}}",
        a.horizon, a.workers, a.rate
    );
}
