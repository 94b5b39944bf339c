//! Terminal tables.

use std::fmt::Write as _;

use stormbreak_sim::Recording;
use stormbreak_sim::output::route_totals;

/// One line per route: demand, attempts, amplification, errors, peak error
/// rate, and the longest job wait when a route has a job queue.
pub fn route_table(rec: &Recording) -> String {
    let totals = route_totals(rec);
    let queues = totals.iter().any(|t| t.longest_job_wait_s.is_some());
    let mut s = String::new();
    let _ = write!(
        s,
        "{:<18} {:>12} {:>12} {:>7} {:>12} {:>10}",
        "route", "requests", "attempts", "ampl.", "failed", "peak err"
    );
    if queues {
        let _ = write!(s, " {:>10}", "job wait");
    }
    s.push('\n');
    for t in totals {
        let _ = write!(
            s,
            "{:<18} {:>12} {:>12} {:>6.2}x {:>12} {:>9.1}%",
            t.name,
            t.first_attempts,
            t.attempts,
            t.amplification,
            t.failed,
            t.peak_error_rate * 100.0
        );
        if queues {
            match t.longest_job_wait_s {
                Some(w) => {
                    let _ = write!(s, " {:>8.0} s", w);
                }
                None => {
                    let _ = write!(s, " {:>10}", "—");
                }
            }
        }
        s.push('\n');
    }
    s
}
