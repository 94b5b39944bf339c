//! The prober against the lab (its test bed): two routes whose pods fail
//! from 1 s, one for 2 s and one for 3.5 s. The probe, aimed at the doors
//! the lab writes to its entries file, sees both degrade and recover in
//! that order, at the times the lab's own recording reads by the same code
//! (`stormbreak_sim::recovery`). Real time, six seconds.

use std::time::Duration;

use stormbreak_lab::{LabOptions, LabPlan, Stop};
use stormbreak_policy::Nanos;
use stormbreak_probe::{ProbeConfig, RunOptions};
use stormbreak_sim::Scenario;

const BED: &str = r#"
[scenario]
name = "probe-bed"
duration = "6s"
interval = "100ms"

[[service]]
name = "a"
replicas = 1
app = { workers = 8, service_time = { dist = "constant", value = "5ms" } }

[[service]]
name = "b"
replicas = 1
app = { workers = 8, service_time = { dist = "constant", value = "5ms" } }

[[route]]
name = "ra"
path = ["a"]

[[route]]
name = "rb"
path = ["b"]

[[client]]
name = "users-a"
route = "ra"
rate = "20/s"
timeout = "500ms"

[[client]]
name = "users-b"
route = "rb"
rate = "20/s"
timeout = "500ms"

[[action]]
at = "1s"
for = "2s"
do = "fail_pods"
service = "a"
pods = 1

[[action]]
at = "1s"
for = "3500ms"
do = "fail_pods"
service = "b"
pods = 1
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn paths_recover_in_the_labs_order_at_the_labs_times() {
    let dir = std::env::temp_dir().join(format!("probe-lab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let entries = dir.join("entries.json");
    let scenario = Scenario::parse("bed.toml", BED).unwrap();
    let plan = LabPlan::new(
        &scenario,
        &LabOptions {
            entries: Some(entries.clone()),
            ..LabOptions::default()
        },
    )
    .unwrap();
    let stop = Stop::default();
    let lab = {
        let stop = stop.clone();
        std::thread::spawn(move || stormbreak_lab::run(&plan, &stop))
    };
    // The doors, once the lab's clock starts (a bound, not a timing assert).
    let mut doc = None;
    for _ in 0..1000 {
        if let Ok(bytes) = std::fs::read(&entries) {
            doc = Some(serde_json::from_slice::<serde_json::Value>(&bytes).unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let doc = doc.expect("the lab wrote its entries");
    let started_ms = doc["started_unix_ms"].as_u64().unwrap();
    let url = |route: &str| {
        doc["routes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["route"] == route)
            .unwrap()["urls"][0]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let slo = "slo = { error_rate = 0.1, window = \"500ms\" }";
    let text = format!(
        "[probe]\nrate = \"100/s\"\nduration = \"5500ms\"\ninterval = \"100ms\"\nseed = 1\n\
         overload_pause = \"20ms\"\n\
         [[path]]\nname = \"a\"\nurl = \"{}\"\ntimeout = \"400ms\"\n{slo}\n\
         [[path]]\nname = \"b\"\nurl = \"{}\"\ntimeout = \"400ms\"\n{slo}\n",
        url("ra"),
        url("rb")
    );
    let config = ProbeConfig::parse("probe.toml", &text).unwrap();
    let probe_started_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let run = stormbreak_probe::run(&config, RunOptions::default()).await;
    let lab = lab.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let run = run.unwrap();
    let lab = lab.unwrap();
    // The probe's times moved onto the lab's clock.
    let offset = (probe_started_ms.saturating_sub(started_ms)) as f64 / 1e3;

    let (a, b) = (&run.paths[0], &run.paths[1]);
    for p in [a, b] {
        let degraded = p.degraded_at_s.expect("degraded") + offset;
        assert!((1.0..=1.8).contains(&degraded), "{p:?}");
    }
    let ra = a.recovered_at_s.expect("a recovered") + offset;
    let rb = b.recovered_at_s.expect("b recovered") + offset;
    assert!(rb - ra > 1.0 && rb - ra < 2.0, "a at {ra}, b at {rb}");
    // The lab's own recording, read by the same code over the same windows.
    let table = stormbreak_sim::recovery::route_table(&lab.recording, Nanos::from_millis(500));
    for (observed, route) in [(ra, "ra"), (rb, "rb")] {
        let row = table.routes.iter().find(|r| r.path == route).unwrap();
        let predicted = row.recovered_at_s.expect("the lab's route recovered");
        assert!(
            (observed - predicted).abs() <= 0.5,
            "{route}: probe {observed}, lab {predicted}"
        );
    }
}
