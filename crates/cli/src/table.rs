//! Terminal tables.

use std::fmt::Write as _;

use stormbreak_sim::Recording;
use stormbreak_sim::output::route_totals;

/// One line per route: demand, attempts, amplification, errors, peak error rate.
pub fn route_table(rec: &Recording) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<18} {:>12} {:>12} {:>7} {:>12} {:>10}",
        "route", "requests", "attempts", "ampl.", "failed", "peak err"
    );
    for t in route_totals(rec) {
        let _ = writeln!(
            s,
            "{:<18} {:>12} {:>12} {:>6.2}x {:>12} {:>9.1}%",
            t.name,
            t.first_attempts,
            t.attempts,
            t.amplification,
            t.failed,
            t.peak_error_rate * 100.0
        );
    }
    s
}
