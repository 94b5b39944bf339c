//! The scenario fields `stormbreak sweep` reads and the run ignores:
//! `id` and `role` on `[[action]]`, and `[[slo]]` per route. Each is
//! validated with an error naming file:line:column.

use stormbreak_policy::Nanos;
use stormbreak_sim::Scenario;
use stormbreak_sim::engine::{Engine, RunOptions};
use stormbreak_sim::scenario::{ActionRole, DEFAULT_SLO_WINDOW};

const BASE: &str = r#"[scenario]
name = "ok"
duration = "60s"
interval = "5s"

[[service]]
name = "svc"
replicas = 1
app = { workers = 2, service_time = { dist = "exponential", mean = "1ms" } }

[[route]]
name = "r"
path = ["svc"]

[[client]]
name = "users"
route = "r"
rate = "100/s"
timeout = "1s"
"#;

const MARKED: &str = r#"
[[slo]]
route = "r"
error_rate = 0.05
window = "15s"

[[slo]]
route = "r"
job_wait = "2s"

[[action]]
id = "cut"
role = "trigger"
at = "10s"
for = "5s"
do = "slow_service"
service = "svc"
factor = 2.0

[[action]]
role = "operator"
at = "30s"
do = "set_retry"
target = "users"
"#;

/// `s.toml:LINE:COL:` of the first line of `text` starting with `start`.
fn at(text: &str, start: &str, col: usize) -> String {
    let line = text.lines().position(|l| l.starts_with(start)).unwrap() + 1;
    format!("s.toml:{line}:{col}:")
}

fn err(text: &str) -> String {
    Scenario::parse("s.toml", text)
        .expect_err("should be rejected")
        .to_string()
}

#[test]
fn ids_roles_and_slos_are_read() {
    let sc = Scenario::parse("s.toml", &format!("{BASE}{MARKED}")).unwrap();
    let a: Vec<_> = sc.actions.iter().map(|a| a.get_ref()).collect();
    assert_eq!(a[0].id.as_deref(), Some("cut"));
    assert_eq!(a[0].role, Some(ActionRole::Trigger));
    assert_eq!(a[1].id, None);
    assert_eq!(a[1].role, Some(ActionRole::Operator));
    assert_eq!(sc.slos.len(), 2);
    assert_eq!(sc.slos[0].error_rate, Some(0.05));
    assert_eq!(sc.slos[0].window, Nanos::from_secs(15));
    assert_eq!(sc.slos[1].window, DEFAULT_SLO_WINDOW);
    assert_eq!(sc.slos[1].job_wait, Some(Nanos::from_secs(2)));
}

/// The markers are metadata: the run's event log is the same with them.
#[test]
fn markers_do_not_change_the_run() {
    let digest = |text: &str| {
        let sc = Scenario::parse("s.toml", text).unwrap();
        let mut e = Engine::new(&sc, RunOptions::default());
        e.run_until(sc.scenario.duration).unwrap();
        e.event_digest()
    };
    let marked = format!("{BASE}{MARKED}");
    let plain = marked
        .replace("id = \"cut\"\n", "")
        .replace("role = \"trigger\"\n", "")
        .replace("role = \"operator\"\n", "");
    let plain = plain.split("[[slo]]").next().unwrap().to_owned()
        + &plain[plain.find("[[action]]").unwrap()..];
    assert!(
        !plain.contains("role") && !plain.contains("[[slo]]"),
        "{plain}"
    );
    assert_eq!(digest(&marked), digest(&plain));
}

#[test]
fn a_duplicate_id_names_the_first_use() {
    let text = format!("{BASE}{MARKED}")
        .replace("role = \"operator\"", "role = \"operator\"\nid = \"cut\"");
    let e = err(&text);
    let second = text.match_indices("id = \"cut\"").nth(1).unwrap().0;
    let line = text[..second].lines().count() + 1;
    assert!(e.starts_with(&format!("s.toml:{line}:6:")), "{e}");
    assert!(e.contains("id \"cut\" is already used by action 0"), "{e}");
}

#[test]
fn an_id_that_reads_as_an_index_is_refused() {
    let text = format!("{BASE}{MARKED}").replace("id = \"cut\"", "id = \"12\"");
    let e = err(&text);
    assert!(e.starts_with(&at(&text, "id = ", 6)), "{e}");
    assert!(e.contains("not only digits"), "{e}");
    let e = err(&format!("{BASE}{MARKED}").replace("id = \"cut\"", "id = \"a.b\""));
    assert!(e.contains("letters, digits"), "{e}");
}

#[test]
fn an_unknown_role_says_what_is_expected() {
    let e = err(&format!("{BASE}{MARKED}").replace("\"trigger\"", "\"fault\""));
    assert!(e.contains("expected `trigger` or `operator`"), "{e}");
}

#[test]
fn slo_errors_name_the_field() {
    let text = format!("{BASE}{MARKED}");
    let bad = text.replace("route = \"r\"\nerror_rate", "route = \"q\"\nerror_rate");
    let e = err(&bad);
    assert!(e.starts_with(&at(&bad, "route = \"q\"", 9)), "{e}");
    assert!(e.contains("unknown route \"q\": expected one of r"), "{e}");
    let e = err(&text.replace("error_rate = 0.05", "error_rate = 1.0"));
    assert!(e.starts_with(&at(&text, "error_rate", 14)), "{e}");
    assert!(e.contains("[0, 1)"), "{e}");
    let e = err(&text.replace("window = \"15s\"", "window = \"1s\""));
    assert!(e.contains("window must be at least 5s"), "{e}");
    let e = err(&text.replace("job_wait = \"2s\"", ""));
    assert!(e.contains("expected error_rate, job_wait or both"), "{e}");
    let e = err(&text.replace("window = \"15s\"", "window = \"15s\"\nlatency = \"1s\""));
    assert!(e.contains("unknown field `latency`"), "{e}");
}
