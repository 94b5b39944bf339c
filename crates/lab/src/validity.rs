//! Is a lab run valid? What distorts a real run on a small shared machine,
//! measured, and the thresholds beyond which the run is marked invalid
//! (`docs/lab.md`, "Validity").

use std::sync::Mutex;

use hdrhistogram::Histogram;
use serde::Serialize;
use stormbreak_policy::Nanos;

/// Kernel listen-queue overflows plus drops (host-wide) during the run
/// beyond which it is invalid: any, since a dropped SYN comes back as a
/// retransmission about a second later and the simulator has no such
/// queue.
pub const MAX_LISTEN_DROPS: u64 = 0;
/// Schedule slip (actual against intended send) p99 beyond which the run
/// is invalid: the generator did not offer the load the scenario says.
pub const MAX_SLIP_P99: Nanos = Nanos::from_millis(10);
/// Timer lateness (a 10 ms probe sleep's overshoot) p99 beyond which the
/// run is invalid: service times and timeouts were not what they said.
/// tokio's timer is about 1 ms late on an idle Linux host (tokio-rs/tokio#5021).
pub const MAX_TIMER_LATE_P99: Nanos = Nanos::from_millis(5);
/// Share of intended sends dropped (in-flight cap) beyond which the run is
/// invalid.
pub const MAX_DROPPED_SHARE: f64 = 0.001;
/// Share of the host's CPU time stolen by a hypervisor beyond which the
/// run is invalid.
pub const MAX_STEAL_SHARE: f64 = 0.05;
/// The probe's sleep.
pub const PROBE_PERIOD: Nanos = Nanos::from_millis(10);

/// Counters read from `/proc` at the start and end of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostCounters {
    /// `TcpExt: ListenOverflows` + `ListenDrops`, when readable.
    pub listen: Option<(u64, u64)>,
    /// (steal, total) jiffies of the `cpu` line of `/proc/stat`.
    pub cpu: Option<(u64, u64)>,
    /// This process's user + system CPU time, seconds.
    pub process_cpu_s: Option<f64>,
}

impl HostCounters {
    /// Reads them now; what cannot be read is `None`.
    pub fn read() -> Self {
        HostCounters {
            listen: std::fs::read_to_string("/proc/net/netstat")
                .ok()
                .and_then(|t| listen_counters(&t)),
            cpu: std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|t| steal_and_total(&t)),
            process_cpu_s: std::fs::read_to_string("/proc/self/stat")
                .ok()
                .and_then(|t| process_cpu(&t)),
        }
    }
}

/// `(ListenOverflows, ListenDrops)` from `/proc/net/netstat`'s `TcpExt`
/// header and value lines.
pub fn listen_counters(text: &str) -> Option<(u64, u64)> {
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let names: Vec<&str> = lines.next()?.split_whitespace().collect();
    let values: Vec<&str> = lines.next()?.split_whitespace().collect();
    let get = |n: &str| {
        let i = names.iter().position(|x| *x == n)?;
        values.get(i)?.parse::<u64>().ok()
    };
    Some((get("ListenOverflows")?, get("ListenDrops")?))
}

/// (steal, total) jiffies from `/proc/stat`'s first `cpu` line.
pub fn steal_and_total(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice]:
    // guest time is already counted in user and nice.
    let total = v.iter().take(8).sum();
    Some((*v.get(7)?, total))
}

/// User + system CPU seconds of this process from `/proc/self/stat`.
/// ASSUMPTION: 100 clock ticks a second (`CLK_TCK`, the value on every
/// mainstream Linux architecture; reading it needs `sysconf`).
pub fn process_cpu(text: &str) -> Option<f64> {
    // The command name may hold spaces: fields start after its ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, utime 14, stime 15 (1-based in proc(5)).
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

/// A histogram of delays in µs, shared by tasks.
#[derive(Debug)]
pub struct Delays(Mutex<Histogram<u64>>);

impl Default for Delays {
    fn default() -> Self {
        Delays(Mutex::new(
            Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("static bounds"),
        ))
    }
}

impl Delays {
    /// Records one delay.
    pub fn record(&self, d: Nanos) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .saturating_record((d.as_nanos() / 1000).max(1));
    }

    /// (count, p99, max), the times in ns.
    pub fn summary(&self) -> (u64, Nanos, Nanos) {
        let h = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if h.is_empty() {
            return (0, Nanos::ZERO, Nanos::ZERO);
        }
        (
            h.len(),
            Nanos::from_micros(h.value_at_quantile(0.99)),
            Nanos::from_micros(h.max()),
        )
    }
}

/// Sleeps [`PROBE_PERIOD`] over and over, recording how late each wake-up
/// is, until the task is dropped.
pub async fn timer_probe(late: std::sync::Arc<Delays>) {
    loop {
        let asked = tokio::time::Instant::now() + std::time::Duration::from(PROBE_PERIOD);
        tokio::time::sleep_until(asked).await;
        late.record(Nanos::from(
            tokio::time::Instant::now().saturating_duration_since(asked),
        ));
    }
}

/// The validity figures of a run and the verdict (`summary.json` `lab`).
#[derive(Debug, Clone, Serialize)]
pub struct Validity {
    /// No threshold was passed and every counter could be read.
    pub valid: bool,
    /// One line per threshold passed or counter missing.
    pub reasons: Vec<String>,
    /// Host-wide `ListenOverflows` during the run.
    pub listen_overflows: Option<u64>,
    /// Host-wide `ListenDrops` during the run.
    pub listen_drops: Option<u64>,
    /// Sends made, and their slip p99 and max, ms.
    pub sends: u64,
    /// Slip p99, ms.
    pub slip_p99_ms: f64,
    /// Slip max, ms.
    pub slip_max_ms: f64,
    /// Probe wake-ups, and their lateness p99 and max, ms.
    pub timer_probes: u64,
    /// Lateness p99, ms.
    pub timer_late_p99_ms: f64,
    /// Lateness max, ms.
    pub timer_late_max_ms: f64,
    /// Intended sends, and the share dropped.
    pub intended: u64,
    /// Dropped sends.
    pub dropped: u64,
    /// `dropped / intended`.
    pub dropped_share: f64,
    /// Host CPU steal share during the run.
    pub steal_share: Option<f64>,
}

fn ms(n: Nanos) -> f64 {
    n.as_nanos() as f64 / 1e6
}

/// Judges a run from its counters before and after and its delays.
pub fn judge(
    before: &HostCounters,
    after: &HostCounters,
    slip: &Delays,
    timer: &Delays,
    intended: u64,
    dropped: u64,
) -> Validity {
    let mut reasons = Vec::new();
    let listen = match (before.listen, after.listen) {
        (Some(b), Some(a)) => Some((a.0.saturating_sub(b.0), a.1.saturating_sub(b.1))),
        _ => {
            reasons.push("cannot read /proc/net/netstat: listen-queue overflows unknown".into());
            None
        }
    };
    if let Some((o, d)) = listen
        && o + d > MAX_LISTEN_DROPS
    {
        reasons.push(format!(
            "the kernel's listen queues overflowed {o} time(s) and dropped {d} SYN(s) during the run (host-wide; limit {MAX_LISTEN_DROPS})"
        ));
    }
    let (sends, slip_p99, slip_max) = slip.summary();
    if slip_p99 > MAX_SLIP_P99 {
        reasons.push(format!(
            "schedule slip p99 {:.1} ms is over {} ms: the load offered was not the scenario's",
            ms(slip_p99),
            ms(MAX_SLIP_P99)
        ));
    }
    let (probes, late_p99, late_max) = timer.summary();
    if late_p99 > MAX_TIMER_LATE_P99 {
        reasons.push(format!(
            "timer lateness p99 {:.1} ms is over {} ms",
            ms(late_p99),
            ms(MAX_TIMER_LATE_P99)
        ));
    }
    let dropped_share = if intended == 0 {
        0.0
    } else {
        dropped as f64 / intended as f64
    };
    if dropped_share > MAX_DROPPED_SHARE {
        reasons.push(format!(
            "{dropped} of {intended} intended sends dropped at the in-flight cap ({:.2}% > {}%)",
            dropped_share * 100.0,
            MAX_DROPPED_SHARE * 100.0
        ));
    }
    let steal_share = match (before.cpu, after.cpu) {
        (Some(b), Some(a)) if a.1 > b.1 => {
            Some(a.0.saturating_sub(b.0) as f64 / (a.1 - b.1) as f64)
        }
        _ => {
            reasons.push("cannot read /proc/stat: CPU steal unknown".into());
            None
        }
    };
    if let Some(s) = steal_share
        && s > MAX_STEAL_SHARE
    {
        reasons.push(format!(
            "CPU steal {:.1}% is over {}%",
            s * 100.0,
            MAX_STEAL_SHARE * 100.0
        ));
    }
    Validity {
        valid: reasons.is_empty(),
        reasons,
        listen_overflows: listen.map(|l| l.0),
        listen_drops: listen.map(|l| l.1),
        sends,
        slip_p99_ms: ms(slip_p99),
        slip_max_ms: ms(slip_max),
        timer_probes: probes,
        timer_late_p99_ms: ms(late_p99),
        timer_late_max_ms: ms(late_max),
        intended,
        dropped,
        dropped_share,
        steal_share,
    }
}
