//! `stormbreak replay --sensitivity` as CI can afford it: two assumptions,
//! one change, one seed, at `--scale 0.01` (a fifth of the default's
//! cost) — the same bytes whatever `--jobs`, a verdict for each variant,
//! and bad names refused before anything runs. The full analysis is
//! `benches/sensitivity.sh`.

use std::path::Path;
use std::process::Command;

const ONLY: &str = "service.auth-cus.app.service_time.mean,lb.haproxy-cus.flows_per_node";

fn stormbreak() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stormbreak"))
}

fn sensitivity(out: &Path, jobs: &str) -> String {
    let o = stormbreak()
        .args(["replay", "--sensitivity", "--only", ONLY])
        .args([
            "--changes",
            "+10%",
            "--seeds",
            // One chosen seed (a bare number is a count).
            "20260817,",
            "--scale",
            "0.01",
            "--quiet",
        ])
        .args(["--jobs", jobs, "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn two_assumptions_same_bytes_whatever_the_jobs_and_a_verdict_each() {
    let dir = crate::common::temp_dir("stormbreak-sensitivity", "jobs");
    let table = sensitivity(&dir.join("one"), "1");
    sensitivity(&dir.join("two"), "2");
    for f in ["sensitivity.json", "sensitivity.md"] {
        let (a, b) = (
            std::fs::read(dir.join("one").join(f)).unwrap(),
            std::fs::read(dir.join("two").join(f)).unwrap(),
        );
        assert!(a == b, "{f} differs between --jobs 1 and 2");
    }
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("one/sensitivity.json")).unwrap()).unwrap();
    assert_eq!(j["schema"], "stormbreak.replay-sensitivity/1");
    assert_eq!(j["scale"], 0.01);
    assert_eq!(j["seeds"], serde_json::json!([20260817]));
    assert_eq!(j["bands"].as_array().unwrap().len(), 5);
    // The scenario as written is the replay the bands were set on.
    assert_eq!(j["baseline"]["verdict"]["metastable_seeds"], 1);
    assert_eq!(j["baseline"]["verdict"]["fixed_recovers_seeds"], 1);
    let names: Vec<&str> = j["assumptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "lb.haproxy-cus.flows_per_node",
            "service.auth-cus.app.service_time.mean"
        ]
    );
    let mean = j["assumptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "service.auth-cus.app.service_time.mean")
        .unwrap();
    assert_eq!(mean["base"], "35ms");
    let v = &mean["variants"][0];
    assert_eq!(v["change"], "+10%");
    assert_eq!(v["value"], "38ms500us");
    let seed = &v["seeds"][0];
    assert_eq!(seed["seed"], 20260817);
    // The verdict is what the headlines say, not a separate guess.
    assert_eq!(seed["metastable"], seed["happened"]["metastable"]);
    assert_eq!(
        seed["fixed_recovers"].as_bool().unwrap(),
        !seed["fixed"]["metastable"].as_bool().unwrap()
    );
    assert!(v["verdict"]["flips"].is_boolean());
    // The table on stdout is the file's, and names both assumptions.
    assert!(table.starts_with(&std::fs::read_to_string(dir.join("one/sensitivity.md")).unwrap()));
    for n in names {
        assert!(table.contains(&format!("`{n}`")), "{table}");
    }
    assert!(table.contains("+10% → 38ms500us"), "{table}");
}

#[test]
fn assumptions_are_listed_by_name_and_unknown_ones_refused() {
    let o = stormbreak()
        .args(["replay", "--sensitivity", "--list-assumptions"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let list = String::from_utf8(o.stdout).unwrap();
    assert!(
        list.contains("service.auth-cus.app.service_time.mean = 35ms\n"),
        "{list}"
    );
    assert!(
        list.contains(
            "client.editors-a.fanout = 3  (with client.editors-b.fanout, client.editors-c.fanout)"
        ),
        "{list}"
    );
    assert!(!list.contains("lb.haproxy-cus.nodes"), "a fact: {list}");

    let dir = crate::common::temp_dir("stormbreak-sensitivity", "refused");
    let o = stormbreak()
        .args([
            "replay",
            "--sensitivity",
            "--only",
            "service.auth-cus.app.workerz",
            "--out",
        ])
        .arg(dir.join("x"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("\"service.auth-cus.app.workerz\" is not an assumption")
            && e.contains("service.auth-cus.app.workers"),
        "{e}"
    );
    assert!(!dir.join("x").exists(), "refused before any output");

    let o = stormbreak()
        .args(["replay", "--sensitivity", "--changes", "+0%"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected a change such as -25% or +10%"));
    let o = stormbreak()
        .args(["replay", "--only", "lb.haproxy-cus.flows_per_node"])
        .output()
        .unwrap();
    assert!(!o.status.success(), "--only needs --sensitivity");
}
