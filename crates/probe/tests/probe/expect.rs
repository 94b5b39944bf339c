//! `--expect`: predicted against observed recovery per path.

use stormbreak_probe::expect::{load, table, versus};
use stormbreak_probe::timeline::{Counts, PathReport, Verdict};

use crate::scripted::config;

fn observed(path: &str, degraded: Option<f64>, recovered: Option<f64>) -> PathReport {
    PathReport {
        path: path.to_owned(),
        verdict: Verdict::Breached,
        degraded_at_s: degraded,
        recovered_at_s: recovered,
        confirmed_at_s: None,
        worst_error_rate: None,
        worst_quantile_ms: None,
        p50_ms: None,
        p99_ms: None,
        totals: Counts::default(),
        unknown_windows: 0,
        reasons: Default::default(),
    }
}

#[test]
fn a_route_table_and_a_replay_summary_both_predict() {
    let dir = std::env::temp_dir().join(format!("probe-expect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let recovery = dir.join("recovery.json");
    std::fs::write(
        &recovery,
        r#"{"schema": "stormbreak.recovery/1", "window_s": 5.0,
            "slo": {"error_rate": 0.01, "job_wait_s": 300.0},
            "routes": [
              {"path": "web", "degraded_at_s": 25.0, "recovered_at_s": 66.0, "worst_error_rate": 0.9},
              {"path": "token", "degraded_at_s": 30.0, "recovered_at_s": 86.0, "worst_error_rate": 1.0}
            ]}"#,
    )
    .unwrap();
    let summary = dir.join("summary.json");
    std::fs::write(
        &summary,
        r#"{"schema": "stormbreak.summary/1", "replay": {"runs": [
             {"label": "as it happened", "paths": [
               {"path": "web", "degraded_at_s": 60.0, "recovered_at_s": null, "worst_error_rate": 0.2}]}]}}"#,
    )
    .unwrap();
    let wrong = dir.join("wrong.json");
    std::fs::write(&wrong, r#"{"schema": "stormbreak.lab/1"}"#).unwrap();

    let c = config(
        "rate = \"10/s\"\nduration = \"100s\"\ninterval = \"1s\"",
        &[
            (
                "web",
                "http://127.0.0.1:1/".to_owned(),
                "error_rate = 0.01, window = \"5s\"",
            ),
            (
                "tokens",
                "http://127.0.0.1:1/t".to_owned(),
                "error_rate = 0.01, window = \"5s\"",
            ),
        ],
    );
    let mut c = c;
    c.paths[1].predicted_as = Some("token".to_owned());
    let seen = [
        observed("web", Some(5.0), Some(50.0)),
        observed("tokens", Some(12.0), None),
    ];

    let e = load(&recovery).unwrap();
    let v = versus(&c, &e, &seen, 20.0);
    assert_eq!(v[0].predicted_as.as_deref(), Some("web"));
    assert_eq!(
        v[0].observed_degraded_at_s,
        Some(25.0),
        "moved by the offset"
    );
    assert_eq!(v[0].recovered_late_by_s, Some(4.0));
    assert_eq!(v[1].predicted_as.as_deref(), Some("token"));
    assert_eq!(v[1].predicted_recovered_at_s, Some(86.0));
    assert_eq!(
        v[1].recovered_late_by_s, None,
        "not recovered when the probe ended"
    );
    let text = table(&e, &v, &[5.0, 5.0]);
    assert!(text.contains("+4.0 s") && !text.contains("note:"), "{text}");

    let r = load(&summary).unwrap();
    assert_eq!(r.window_s, 300.0);
    let v = versus(&c, &r, &seen, 0.0);
    assert_eq!(v[0].predicted_degraded_at_s, Some(60.0));
    assert_eq!(v[1].predicted_as, None, "no token row in this replay");
    let text = table(&r, &v, &[5.0, 5.0]);
    assert!(
        text.contains("(no such row)") && text.contains("note: the prediction's windows are 300 s"),
        "{text}"
    );

    let err = load(&wrong).unwrap_err();
    assert!(
        err.contains("wrong.json") && err.contains("expected a recovery.json"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
