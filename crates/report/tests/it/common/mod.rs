//! A synthetic, deterministic storm shaped like 2026-08-17, built directly
//! as a `Recording` (no simulation), so report tests are fast and do not
//! depend on the engine's calibration.

#![allow(dead_code)]

use stormbreak_policy::Nanos;
use stormbreak_report::{ReportExtras, Table};
use stormbreak_sim::Recording;
use stormbreak_sim::record::{AppliedAction, Cause, ComponentSeries, RouteSeries};

const S: Nanos = Nanos::SECOND;

/// Seconds after 13:00 of `hh:mm`.
fn at(h: u64, m: u64) -> f64 {
    ((h - 13) * 3600 + m * 60) as f64
}

/// 0 before `a`, 1 after `b`, smooth in between.
fn ramp(t: f64, a: f64, b: f64) -> f64 {
    if t <= a {
        0.0
    } else if t >= b {
        1.0
    } else {
        let x = (t - a) / (b - a);
        x * x * (3.0 - 2.0 * x)
    }
}

/// Deterministic noise in [-1, 1].
fn noise(i: usize, salt: u64) -> f64 {
    let mut z =
        (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z % 20_001) as f64 / 10_000.0 - 1.0
}

struct RouteShape {
    name: &'static str,
    rate: f64,
    /// Peak error rate of the storm and when the route recovers.
    err: f64,
    recover: f64,
    /// Peak amplification during the storm.
    amp: f64,
}

/// The storm as it happened (`fixed = false`) or with the follow-ups
/// applied to the same trigger (`fixed = true`). Eight and a half hours
/// from 13:00 at `interval_s` resolution.
pub fn storm(fixed: bool, interval_s: u64) -> Recording {
    let duration_s = 8 * 3600 + 30 * 60;
    let n = (duration_s / interval_s) as usize;
    let dt = interval_s as f64;
    let trigger = (at(13, 28), at(13, 58));
    let shapes = [
        RouteShape {
            name: "web",
            rate: 4000.0,
            err: 0.2,
            recover: at(16, 36),
            amp: 2.6,
        },
        RouteShape {
            name: "api <v3>",
            rate: 3000.0,
            err: 0.21,
            recover: at(16, 36),
            amp: 2.4,
        },
        RouteShape {
            name: "archive",
            rate: 600.0,
            err: 0.5,
            recover: at(16, 36),
            amp: 3.2,
        },
        RouteShape {
            name: "auth",
            rate: 7000.0,
            err: 0.25,
            recover: at(16, 36),
            amp: 2.0,
        },
        RouteShape {
            name: "actions",
            rate: 900.0,
            err: 0.2,
            recover: at(18, 3),
            amp: 2.0,
        },
        RouteShape {
            name: "token",
            rate: 8000.0,
            err: 0.55,
            recover: at(21, 2),
            amp: 10.5,
        },
    ];
    let mut routes = Vec::new();
    for (ri, sh) in shapes.iter().enumerate() {
        let mut r = RouteSeries {
            name: sh.name.into(),
            ..Default::default()
        };
        for i in 0..n {
            let t = (i + 1) as f64 * dt;
            let peak = ramp(t, trigger.0, trigger.0 + 300.0)
                * (1.0 - ramp(t, trigger.1, trigger.1 + 300.0));
            let demand = sh.rate * (1.0 + 0.35 * peak) * (1.0 + 0.03 * noise(i, ri as u64));
            let storm = if fixed {
                // A short, bounded bump that recovers on its own.
                0.15 * peak
            } else {
                let on = ramp(t, trigger.0, trigger.0 + 900.0);
                let off = 1.0 - ramp(t, sh.recover - 120.0, sh.recover + 120.0);
                let shed = sh.name == "token" && t >= at(17, 30) && t < at(19, 0);
                if shed { 1.6 } else { on * off }
            };
            let err = (sh.err * storm * (1.0 + 0.08 * noise(i, 100 + ri as u64))).clamp(0.0, 0.98)
                + 0.002 * (1.0 + noise(i, 200 + ri as u64));
            let retries_cut = if !fixed && t >= at(14, 10) && sh.name != "token" {
                0.5
            } else {
                1.0
            };
            let amp = if fixed {
                1.0 + 0.1 * peak
            } else {
                1.0 + (sh.amp - 1.0) * storm.min(1.0) * retries_cut
            };
            let first = demand * dt;
            let attempts = first * amp;
            let failed = (attempts * err.min(1.0)).round() as u64;
            let attempts = attempts.round() as u64;
            let mut errors = [0u64; Cause::ALL.len()];
            if sh.name == "token" && storm > 1.0 {
                errors[Cause::Shed403 as usize] = failed;
            } else {
                errors[Cause::Timeout as usize] = failed * 6 / 10;
                errors[Cause::FlowsExhausted as usize] = failed - failed * 6 / 10;
            }
            r.first_attempts.push(first.round() as u64);
            r.attempts.push(attempts);
            r.successes.push(attempts.saturating_sub(failed));
            r.errors.push(errors);
            let slow = storm.min(1.0);
            let p50 = 18.0 + 300.0 * slow + 2.0 * noise(i, 300 + ri as u64);
            let p99 = 110.0 + 2900.0 * slow + 10.0 * noise(i, 400 + ri as u64);
            r.latency_ms.push([p50, (p50 + p99) / 2.0, p99, p99 * 1.4]);
            r.latency_mean_ms.push(p50 * 1.2);
        }
        routes.push(r);
    }

    let mut components = Vec::new();
    let comp = |name: &str, kind: &str| ComponentSeries {
        name: name.into(),
        kind: kind.into(),
        ..Default::default()
    };
    let mut lb = comp("haproxy-cus", "lb");
    let mut gw = comp("gateway", "gateway");
    let mut auth = comp("auth-svc", "service");
    let mut token = comp("token-svc", "service");
    let mut web = comp("web-svc", "service");
    for i in 0..n {
        let t = (i + 1) as f64 * dt;
        let peak =
            ramp(t, trigger.0, trigger.0 + 300.0) * (1.0 - ramp(t, trigger.1, trigger.1 + 300.0));
        let stormy = |until: f64| {
            if fixed {
                0.0
            } else {
                ramp(t, trigger.0, trigger.0 + 600.0) * (1.0 - ramp(t, until - 60.0, until + 60.0))
            }
        };
        let wobble = |salt| 0.03 * noise(i, salt);
        // LB: 4 nodes × 1000 flows; paused 16:36–16:40 in the incident.
        let paused = !fixed && t > at(16, 36) && t <= at(16, 40);
        let nodes = if paused { 0.0 } else { 4.0 };
        lb.limit.push(nodes * 1000.0);
        lb.replicas.push(nodes);
        let lb_sat = (0.45 + 0.3 * peak + 0.55 * stormy(at(16, 36)) + wobble(1)).min(1.0);
        lb.in_flight
            .push(if paused { 0.0 } else { lb_sat * 4000.0 });
        lb.queue.push(0.0);
        lb.app_utilisation.push(0.0);
        // Gateway: no limits recorded.
        for v in [
            &mut gw.in_flight,
            &mut gw.limit,
            &mut gw.queue,
            &mut gw.replicas,
            &mut gw.app_utilisation,
        ] {
            v.push(0.0);
        }
        // Auth: the sidecar fills while the app idles (blind autoscaler);
        // with the fix it scales on sidecar saturation.
        let auth_pods = if fixed {
            6.0 + (8.0
                * ramp(t, trigger.0 + 120.0, trigger.0 + 600.0)
                * (1.0 - ramp(t, trigger.1 + 900.0, trigger.1 + 1800.0)))
            .round()
        } else {
            6.0
        };
        let auth_sat = (0.5
            + 0.35 * peak * if fixed { 0.6 } else { 1.0 }
            + 0.5 * stormy(at(16, 36))
            + wobble(2))
        .min(1.0);
        auth.limit.push(auth_pods * 100.0);
        auth.in_flight.push(auth_sat * auth_pods * 100.0);
        auth.queue.push(if auth_sat >= 1.0 {
            200.0 + 50.0 * noise(i, 3)
        } else {
            0.0
        });
        auth.replicas.push(auth_pods);
        auth.app_utilisation
            .push((0.42 + 0.1 * peak - 0.12 * stormy(at(16, 36)) + wobble(4)).max(0.0));
        // Token: autoscaled on CPU, which does see the storm.
        let tok_storm = stormy(at(21, 2));
        let tok_pods = (10.0 + 20.0 * tok_storm + if fixed { 3.0 * peak } else { 0.0 }).round();
        token.limit.push(tok_pods * 200.0);
        token
            .in_flight
            .push((0.4 + 0.6 * tok_storm + wobble(5)).min(1.0) * tok_pods * 200.0);
        token.queue.push(500.0 * tok_storm);
        token.replicas.push(tok_pods);
        token
            .app_utilisation
            .push((0.45 + 0.5 * tok_storm + wobble(6)).min(1.0));
        // Web: fixed replicas, no sidecar.
        web.limit.push(12.0 * 64.0);
        web.in_flight
            .push((0.35 + 0.3 * peak + 0.4 * stormy(at(16, 36)) + wobble(7)).min(1.0) * 768.0);
        web.queue.push(0.0);
        web.replicas.push(12.0);
        web.app_utilisation
            .push((0.35 + 0.3 * peak + 0.4 * stormy(at(16, 36)) + wobble(8)).min(1.0));
    }
    for c in [&mut lb, &mut gw, &mut auth, &mut token, &mut web] {
        c.arrivals = (0..n).map(|i| 10_000 + (i as u64 % 7) * 100).collect();
        c.rejected = (0..n).map(|i| (i as u64 % 5) * 10).collect();
        components.push(c.clone());
    }

    let mut actions = Vec::new();
    if !fixed {
        let mut act = |h, m, what: &str| {
            actions.push(AppliedAction {
                at: S * at(h, m) as u64,
                what: what.into(),
            })
        };
        act(14, 10, "set retry of gateway: 1 attempt");
        act(16, 36, "pause 4 node(s) of haproxy-cus");
        act(16, 40, "restart nodes of haproxy-cus");
        act(17, 30, "shed token at haproxy-cus with 403");
        act(17, 31, "set retry of editor-clients: \"none\" & <backoff>");
        act(19, 0, "ramp token at haproxy-cus, sites: east, west");
    }

    Recording {
        scenario: "github-2026-08-17".into(),
        seed: 1,
        scale: 1.0,
        interval: S * interval_s,
        duration: S * duration_s,
        clock_origin_s: 13 * 3600,
        routes,
        components,
        actions,
        events: 123_456_789,
        attempts: 98_765_432,
        peak_in_flight: 54_321,
        peak_events_per_s: 0.0,
        peak_job_backlog: 0,
        bounds_hit: Vec::new(),
    }
}

/// Tables of the kind the replay command adds.
pub fn extras() -> ReportExtras {
    let t = |title: &str, columns: &[&str], rows: &[&[&str]], note: Option<&str>| Table {
        title: title.into(),
        columns: columns.iter().map(|s| s.to_string()).collect(),
        rows: rows
            .iter()
            .map(|r| r.iter().map(|s| s.to_string()).collect())
            .collect(),
        note: note.map(str::to_owned),
    };
    ReportExtras {
        title: Some("Replay of 2026-08-17 <as happened> & with fixes".into()),
        description: Some(
            "A synthetic recording shaped like the incident, used by the report's browser test."
                .into(),
        ),
        tables: vec![
            t(
                "Headline: reported vs replayed",
                &["figure", "reported", "replayed"],
                &[
                    &["peak error rate, web + API", "≈ 20%", "21%"],
                    &["peak error rate, archive", "≈ 50%", "52%"],
                    &["token service arrivals", "70–100 k/s", "84k/s"],
                ],
                Some("Reported figures from the incident digest."),
            ),
            t(
                "Per-path recovery",
                &["path", "reported", "replayed"],
                &[
                    &["repository read", "16:36", "16:38"],
                    &["Actions", "~18:03", "18:05"],
                    &["Copilot token", "21:02", "21:04"],
                ],
                None,
            ),
            t(
                "Ablation: each follow-up alone",
                &["follow-up", "peak error", "metastable"],
                &[
                    &["sidecar-aware autoscaling", "6.1%", "no"],
                    &["retry budgets", "12%", "no"],
                    &["client fan-out fix", "19%", "yes"],
                ],
                None,
            ),
            t(
                "Assumptions (numbers the reports do not give)",
                &["assumption", "value"],
                &[
                    &["sidecar concurrency limit per pod", "100"],
                    &["HAProxy flows per node", "1000"],
                    &["<script>alert('not run')</script>", "escaped"],
                ],
                None,
            ),
        ],
    }
}
