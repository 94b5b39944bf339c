//! Config errors name the file, line, column and what was expected.

use stormbreak_probe::ProbeConfig;

const GOOD: &str = r#"[probe]
rate = "10/s"
duration = "10m"

[defaults]
timeout = "2s"

[[path]]
name = "token issue"
method = "POST"
url = "https://127.0.0.1:8443/token"
expect = [200, 201]
headers = { Authorization = { env = "PROBE_TOKEN", prefix = "Bearer " } }
body = "{}"
"#;

fn env(k: &str) -> Option<String> {
    (k == "PROBE_TOKEN").then(|| "s3cret".to_owned())
}

fn err(text: &str) -> String {
    ProbeConfig::parse_with_env("p.toml", text, &env)
        .map(|_| ())
        .unwrap_err()
        .to_string()
}

fn ca_config(test: &str) -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("probe-config-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(&ca, cert.cert.pem()).unwrap();
    let text = GOOD.replace(
        "body = \"{}\"",
        &format!(
            "body = \"{{}}\"\ntls = {{ ca_bundle = \"{}\" }}",
            ca.display()
        ),
    );
    (dir, text)
}

#[test]
fn a_good_config_reads_its_header_from_the_environment_and_never_shows_it() {
    let (dir, text) = ca_config("good");
    let c = ProbeConfig::parse_with_env("p.toml", &text, &env).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let p = &c.paths[0];
    assert_eq!(p.headers["authorization"], "Bearer s3cret");
    assert!(p.headers["authorization"].is_sensitive());
    assert!(p.expect_status(201) && !p.expect_status(204));
    assert_eq!(p.timeout, stormbreak_policy::Nanos::from_secs(2));
    assert!(!format!("{c:?}").contains("s3cret"), "{c:?}");
}

#[test]
fn errors_name_the_line_and_the_field() {
    let (dir, text) = ca_config("errors");
    let cases: Vec<(String, &str)> = vec![
        (text.replace("rate = \"10/s\"", "rate = \"fast\""), "p.toml:2:8:"),
        (text.replace("duration = \"10m\"", "duration = \"10 parsecs\""), "p.toml:3:12:"),
        (text.replace("timeout = \"2s\"", "timeout = \"0s\""), "p.toml:6:11: timeout must be"),
        (text.replace("POST", "PO ST"), "p.toml:10:10: path \"token issue\": expected an HTTP method"),
        (text.replace("https://127.0.0.1:8443/token", "ftp://x/"), "p.toml:11:7: path \"token issue\": expected an absolute"),
        (text.replace("https://127.0.0.1:8443/token", "https://u:pw@h/"), "p.toml:11:7: path \"token issue\": credentials in a URL"),
        (text.replace("[200, 201]", "[200, 999]"), "p.toml:12:16: path \"token issue\": expected an HTTP status"),
        (text.replace("PROBE_TOKEN", "NOT_SET"), "p.toml:13:37: path \"token issue\": header Authorization: environment variable \"NOT_SET\" is not set"),
        (text.replace("expect =", "expext ="), "p.toml:12:1: unknown field `expext`"),
        (text.clone() + "[[path]]\nname = \"token issue\"\nurl = \"http://h/\"\n", "path \"token issue\" is defined twice"),
        (text.replace("[probe]\n", "[probe]\ninterval = \"7s\"\n").replace("duration = \"10m\"", "duration = \"700s\""), "window must be a whole number of intervals"),
        (text.clone() + "slo = { error_rate = 1.5 }\n", "error_rate must be at least 0 and below 1"),
        (text.replace("ca.pem", "missing.pem"), "cannot read CA certificates"),
        (text.replace("https://", "http://"), "tls options need an https URL"),
        (text.replace("duration = \"10m\"", "duration = \"10m3s\""), "duration must be a whole number of intervals"),
        (text.clone() + "slo = { error_rate = 0.01, window = \"20m\" }\n", "a window of at most the run's duration"),
        (text.replace("headers = { Authorization", "headers = { Host = { env = \"PROBE_TOKEN\" }, Authorization"), "Host comes from the URL"),
        (text.replace("headers = { Authorization", "headers = { authorization = { env = \"PROBE_TOKEN\" }, Authorization"), "is given twice"),
        (text.replace("tls = { ca_bundle", "tls = { server_name = \"not a name\", ca_bundle"), "expected a DNS name or IP address"),
        ("[probe]\nrate = \"1/s\"\nduration = \"1m\"\n".to_owned(), "p.toml:1:1: at least one [[path]] is needed"),
        (text.replace("duration = \"10m\"", "duration = \"10m\"\nretry = { max_attempts = 0 }"), "p.toml:4:26: retry: max_attempts"),
        (text.replace("duration = \"10m\"", "duration = \"10m\"\nbudget = { kind = \"ratio\", retry_ratio = 0.1, min_retries_per_sec = 0 }"), "p.toml:4:10: a budget needs a retry table"),
        ("[probe]\nrate = \"1/s\"\nduration = \"30d\"\n[[path]]\nname = \"a\"\nurl = \"http://h/\"\n".to_owned(), "p.toml:3:12: duration must be"),
    ];
    for (text, want) in cases {
        let e = err(&text);
        assert!(e.contains(want), "want {want:?} in {e:?}");
        assert!(e.starts_with("p.toml:"), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_target_the_rate_cannot_judge_is_warned_about_before_the_run() {
    let text = GOOD.replace("https://127.0.0.1:8443/token", "http://127.0.0.1:1/")
        + "slo = { error_rate = 0.001, window = \"1m\" }\n";
    let c = ProbeConfig::parse_with_env("p.toml", &text, &env).unwrap();
    let w = c.sample_warnings();
    assert_eq!(w.len(), 1);
    assert!(
        w[0].contains("about 600 probes per 1m window") && w[0].contains("at least 1000"),
        "{w:?}"
    );
}

#[test]
fn the_documented_example_config_is_valid() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/probe.md"))
        .unwrap();
    let start = doc
        .find("```toml\n# probe.toml")
        .expect("the example in docs/probe.md")
        + "```toml\n".len();
    let example = &doc[start..start + doc[start..].find("```").unwrap()];
    // Its https paths trust the system bundle; give it one that exists here.
    let (dir, _) = ca_config("example");
    let text = example.replace(
        "[defaults]\n",
        &format!(
            "[defaults]\ntls = {{ ca_bundle = \"{}\" }}\n",
            dir.join("ca.pem").display()
        ),
    );
    let env = |k: &str| k.starts_with("PROBE_").then(|| "t0ken".to_owned());
    let c = ProbeConfig::parse_with_env("probe.md", &text, &env);
    let _ = std::fs::remove_dir_all(&dir);
    let c = c.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.paths.len(), 7);
    assert!(c.sample_warnings().is_empty(), "{:?}", c.sample_warnings());
    let names: Vec<&str> = c.paths.iter().map(|p| p.name.as_str()).collect();
    for n in names {
        assert!(
            stormbreak_sim::replay::PATHS.iter().any(|p| p.name == n),
            "{n:?} is not one of the replay's paths"
        );
    }
}
