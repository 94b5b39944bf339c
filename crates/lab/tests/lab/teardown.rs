//! After a run, and after a stopped run, nothing the run opened still
//! listens.

use std::time::Duration;

use stormbreak_lab::{LabError, Stop, run};

use crate::common::{listening, plan};

const RUN: &str = r#"
[scenario]
name = "teardown"
duration = "2s"
interval = "1s"

[[service]]
name = "api"
replicas = 2
sidecar = { limit = 2, queue = 2, queue_timeout = "100ms" }
app = { workers = 1, queue = 5, service_time = { dist = "constant", value = "20ms" } }

[[route]]
name = "r"
path = ["api"]

[[client]]
name = "users"
route = "r"
rate = "50/s"
timeout = "500ms"
"#;

#[test]
fn nothing_listens_after_a_run() {
    let lab = run(&plan(RUN), &Stop::default()).unwrap();
    // Two backends and two sidecars.
    assert_eq!(lab.listened.len(), 4);
    for a in &lab.listened {
        assert!(!listening(*a), "{a} still accepts after the run");
    }
}

#[test]
fn a_stopped_run_tears_everything_down() {
    let long = RUN.replace("duration = \"2s\"", "duration = \"60s\"");
    let p = plan(&long);
    let stop = Stop::default();
    let stopper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            stop.stop();
        })
    };
    // Guards against a hang, not a timing assertion.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(run(&p, &stop)).unwrap());
    let result = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("a stopped run returns");
    stopper.join().unwrap();
    let Err(LabError::Stopped { listened }) = result else {
        panic!("expected Stopped, got {result:?}");
    };
    assert_eq!(listened.len(), 4);
    for a in &listened {
        assert!(!listening(*a), "{a} still accepts after a stop");
    }
}
