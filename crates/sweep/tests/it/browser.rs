//! The sweep's report.html in a real headless Chromium, as the run report
//! is checked (`crates/report/tests/it/browser.rs`): the page logs nothing to
//! the console, the heatmap drew every cell with a visible size, and the
//! 50% contour is a visible line; a map of three axes draws one visible
//! heatmap per value of the third.
//!
//! Needs Debian's `chromium` (installed by `.ci/run`; `STORMBREAK_CHROMIUM`
//! names another binary). Without one the test fails when `CI` is set and
//! is skipped with a notice otherwise.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stormbreak_sweep::output;
use stormbreak_sweep::plan::{Plan, SweepSpec};
use stormbreak_sweep::run::{self, Shard};

const SCENARIO: &str = include_str!("../../../../scenarios/capacity-drop.toml");

fn find_chromium() -> Option<String> {
    std::env::var("STORMBREAK_CHROMIUM")
        .ok()
        .into_iter()
        .chain(["chromium", "chromium-browser", "google-chrome"].map(String::from))
        .find(|bin| {
            Command::new(bin)
                .arg("--version")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
}

/// Measures what was drawn and writes it into the DOM for `--dump-dom`.
const PROBE: &str = r#"<script>
(function () {
  var cells = Array.prototype.filter.call(document.querySelectorAll('rect.cell'), function (r) {
    var b = r.getBoundingClientRect(); return b.width > 2 && b.height > 2;
  }).length;
  var contour = Array.prototype.map.call(document.querySelectorAll('path.contour'), function (p) {
    return p.getTotalLength();
  });
  var panels = Array.prototype.map.call(document.querySelectorAll('figure.panel'), function (f) {
    var b = f.querySelector('svg').getBoundingClientRect();
    return { caption: f.querySelector('figcaption').textContent, width: b.width, height: b.height,
             cells: f.querySelectorAll('rect.cell').length };
  });
  var pre = document.createElement('pre');
  pre.textContent = 'PRO' + 'BE:' + JSON.stringify({ cells: cells, contour: contour, panels: panels }) + ':EB' + 'ORP';
  document.body.appendChild(pre);
})();
</script></body>"#;

/// Chromium's bin, or `None` (skipped with a notice) outside CI.
fn chromium_or_skip(test: &str) -> Option<String> {
    let bin = find_chromium();
    if bin.is_none() {
        let msg = "headless Chromium not found (tried $STORMBREAK_CHROMIUM, chromium, \
                   chromium-browser, google-chrome): `apt-get install -y --no-install-recommends chromium`";
        if std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false")) {
            panic!("{msg}; CI is set, so the browser test must run");
        }
        eprintln!("SKIPPED {test}: {msg}");
    }
    bin
}

/// The sweep's report.html for `axes` (one seed per cell).
fn map(axes: &[&str]) -> String {
    let spec = SweepSpec::grid(axes);
    let plan = Plan::new("capacity-drop.toml", SCENARIO, spec).unwrap();
    let results = run::run(&plan, Shard::ALL, 2, || {}).unwrap();
    let set = output::outputs(&plan, &results).unwrap();
    String::from_utf8(set.get("report.html").unwrap().to_vec()).unwrap()
}

/// Loads `html` in headless Chromium with the probe, checks the console is
/// silent, and returns what the probe measured.
fn probe(bin: &str, name: &str, html: &str) -> serde_json::Value {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::write(scratch.join("report.html"), html).unwrap();
    let page = scratch.join("probe.html");
    std::fs::write(&page, html.replacen("</body>", PROBE, 1)).unwrap();

    let (out, err) = (scratch.join("stdout"), scratch.join("stderr"));
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,900",
            "--dump-dom",
        ])
        .arg(format!(
            "--user-data-dir={}",
            scratch.join("profile").display()
        ))
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{bin} did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(status.success(), "{bin} failed: {stderr}");
    let console: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(
        console.is_empty(),
        "console messages:\n{}",
        console.join("\n")
    );
    let dom = std::fs::read_to_string(&out).unwrap();
    let json = dom
        .split("PROBE:")
        .nth(1)
        .and_then(|s| s.split(":EBORP").next())
        .expect("probe output in the DOM");
    serde_json::from_str(json).unwrap()
}

#[test]
fn the_map_renders_in_headless_chromium() {
    let Some(bin) = chromium_or_skip("the_map_renders_in_headless_chromium") else {
        return;
    };
    let html = map(&["action.cut.factor=2..6:4", "action.cut.for=4s..16s:3"]);
    assert!(html.contains("class=\"contour\""), "this map crosses 50%");
    let probe = probe(&bin, "sweep-browser", &html);
    assert_eq!(probe["cells"], 12, "{probe}");
    let contour = probe["contour"].as_array().unwrap();
    assert_eq!(contour.len(), 1, "{probe}");
    assert!(contour[0].as_f64().unwrap() > 50.0, "{probe}");
    assert_eq!(probe["panels"].as_array().unwrap().len(), 0, "{probe}");
}

/// Three axes: small multiples, one visible heatmap per value of the
/// third axis, every cell drawn in its panel.
#[test]
fn a_three_axis_map_renders_as_small_multiples_in_headless_chromium() {
    let Some(bin) =
        chromium_or_skip("a_three_axis_map_renders_as_small_multiples_in_headless_chromium")
    else {
        return;
    };
    let html = map(&[
        "action.cut.factor=2,6",
        "action.cut.for=4s,16s",
        "client.app.rate=600/s,1000/s",
    ]);
    let probe = probe(&bin, "sweep-browser-3", &html);
    assert_eq!(probe["cells"], 8, "{probe}");
    let panels = probe["panels"].as_array().unwrap();
    assert_eq!(panels.len(), 2, "{probe}");
    for (p, rate) in panels.iter().zip(["600/s", "1000/s"]) {
        assert_eq!(p["caption"], format!("client.app.rate = {rate}"), "{probe}");
        assert_eq!(p["cells"], 4, "{probe}");
        assert!(p["width"].as_f64().unwrap() > 200.0, "{probe}");
        assert!(p["height"].as_f64().unwrap() > 150.0, "{probe}");
    }
}
