//! The prober against a scripted in-test server on loopback: what it
//! answers depends on the path and the time since it started.
//!
//! Real sockets and real time (a paused clock would let tokio jump timers
//! while a socket waits): each run lasts one to three seconds, and the
//! assertions read counts that the timing noise of a loaded machine cannot
//! move across them.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use stormbreak_probe::timeline::Verdict;
use stormbreak_probe::{ProbeConfig, RunOptions};
use stormbreak_sim::recovery::WindowState;
use tokio::net::TcpListener;
use tokio::time::Instant;

/// What the server does with one request.
#[derive(Clone, Copy, Debug)]
pub enum Reply {
    /// Answer this status, with `Retry-After: N` when given.
    Status(u16, Option<u32>),
    /// Never answer.
    Hang,
}

type Script = dyn Fn(&str, Duration) -> Reply + Send + Sync;

/// A server on 127.0.0.1, ended when dropped.
pub struct Scripted {
    pub addr: SocketAddr,
    /// Every request's path and time since the server started.
    pub arrivals: Arc<Mutex<Vec<(String, Duration)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Scripted {
    pub async fn start(
        script: impl Fn(&str, Duration) -> Reply + Send + Sync + 'static,
    ) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let start = Instant::now();
        let log = Arc::clone(&arrivals);
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (script, log) = (Arc::clone(&script), Arc::clone(&log));
                conns.spawn(async move {
                    let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let (script, log) = (Arc::clone(&script), Arc::clone(&log));
                        async move {
                            let at = start.elapsed();
                            let path = req.uri().path().to_owned();
                            log.lock().unwrap().push((path.clone(), at));
                            match script(&path, at) {
                                Reply::Hang => {
                                    // Longer than any probe's timeout; the task is
                                    // dropped with the server.
                                    tokio::time::sleep(Duration::from_secs(3600)).await;
                                    unreachable!()
                                }
                                Reply::Status(s, retry_after) => {
                                    let mut r =
                                        http::Response::new(Full::new(Bytes::from_static(b"x")));
                                    *r.status_mut() = http::StatusCode::from_u16(s).unwrap();
                                    if let Some(n) = retry_after {
                                        r.headers_mut().insert(http::header::RETRY_AFTER, n.into());
                                    }
                                    Ok::<_, Infallible>(r)
                                }
                            }
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Scripted {
            addr,
            arrivals,
            task,
        }
    }

    /// Requests to `path` that arrived in `[from, to)`.
    pub fn count(&self, path: &str, from: Duration, to: Duration) -> usize {
        self.arrivals
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, at)| p == path && *at >= from && *at < to)
            .count()
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A config with `[probe]` settings `run` and paths `(name, url, slo)`.
pub fn config(run: &str, paths: &[(&str, String, &str)]) -> ProbeConfig {
    let mut text = format!("[probe]\n{run}\n");
    for (name, url, slo) in paths {
        text.push_str(&format!(
            "[[path]]\nname = \"{name}\"\nurl = \"{url}\"\ntimeout = \"300ms\"\nslo = {{ {slo} }}\n"
        ));
    }
    ProbeConfig::parse("test.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn opts(seed: u64) -> RunOptions {
    RunOptions {
        seed,
        ..RunOptions::default()
    }
}

#[tokio::test]
async fn the_probe_rate_stays_flat_while_the_target_fails() {
    // Answers 500 on both paths from 1 s to 2 s, 200 otherwise.
    let server = Scripted::start(|_, at| {
        if at >= ms(1000) && at < ms(2000) {
            Reply::Status(500, None)
        } else {
            Reply::Status(200, None)
        }
    })
    .await;
    let url = |p: &str| format!("http://{}/{p}", server.addr);
    let c = config(
        "rate = \"200/s\"\nduration = \"3s\"\ninterval = \"100ms\"\nseed = 5\nhysteresis = 2",
        &[
            ("a", url("a"), "error_rate = 0.05, window = \"500ms\""),
            ("b", url("b"), "error_rate = 0.05, window = \"500ms\""),
        ],
    );
    let run = stormbreak_probe::run(&c, opts(0)).await.unwrap();
    let total =
        |from, to| server.count("/a", ms(from), ms(to)) + server.count("/b", ms(from), ms(to));
    let (before, during, after) = (total(0, 1000), total(1000, 2000), total(2000, 3000));
    // 200 a second either way (Poisson: sd about 14): failures raise nothing.
    for n in [before, during, after] {
        assert!((150..=250).contains(&n), "{before} / {during} / {after}");
    }
    assert!(
        during <= before + 60 && during <= after + 60,
        "{before} / {during} / {after}"
    );
    assert_eq!(run.verdict, Verdict::Breached);
    assert_eq!(run.exit_code, 99);
    for p in &run.paths {
        assert_eq!(p.totals.paused, 0, "a 500 is not a request to back off");
        let degraded = p.degraded_at_s.expect("degraded");
        let recovered = p.recovered_at_s.expect("recovered");
        // The first window holding a failure ends after 1 s; the last bad
        // one ends just after 2 s, and recovery starts 0.5 s before the
        // next window's end.
        assert!((1.0..=1.3).contains(&degraded), "{p:?}");
        assert!((1.5..=2.0).contains(&recovered), "{p:?}");
        assert!(
            p.confirmed_at_s.unwrap() >= recovered + 0.9,
            "two windows: {p:?}"
        );
        assert_eq!(p.reasons.keys().copied().collect::<Vec<_>>(), ["status"]);
        assert!(p.worst_error_rate.unwrap() > 0.9, "{p:?}");
    }
}

#[tokio::test]
async fn retry_after_pauses_the_path_and_its_windows_are_never_up() {
    // Path a is always overloaded and asks for a 1 s pause; b is fine.
    let server = Scripted::start(|p, _| {
        if p == "/a" {
            Reply::Status(503, Some(1))
        } else {
            Reply::Status(200, None)
        }
    })
    .await;
    let url = |p: &str| format!("http://{}/{p}", server.addr);
    let c = config(
        "rate = \"100/s\"\nduration = \"2500ms\"\ninterval = \"100ms\"\nseed = 11",
        &[
            ("a", url("a"), "error_rate = 0.5, window = \"500ms\""),
            ("b", url("b"), "error_rate = 0.5, window = \"500ms\""),
        ],
    );
    let run = stormbreak_probe::run(&c, opts(0)).await.unwrap();
    let a = server.count("/a", ms(0), ms(5000));
    let b = server.count("/b", ms(0), ms(5000));
    // One probe, then a 1 s pause, three times in 2.5 s; a slot that falls
    // between a probe's send and its 503 still goes out (the pause starts
    // at the answer), so a few more, never a share of the rate.
    assert!((2..=6).contains(&a), "a: {a}, b: {b}");
    assert!((90..=160).contains(&b), "b keeps its own share only: {b}");
    let ra = &run.paths[0];
    assert!(ra.totals.paused > 80, "{ra:?}");
    let rows = &run.timeline.0[0].1;
    assert!(
        rows.iter().all(|r| r.state != WindowState::Good),
        "a paused path is never up: {rows:?}"
    );
    assert_eq!(run.paths[1].verdict, Verdict::Met, "{:?}", run.paths[1]);
    assert_ne!(run.verdict, Verdict::Met);
}

#[tokio::test]
async fn every_failure_has_its_reason_and_the_run_stays_bounded() {
    let server = Scripted::start(|p, _| match p {
        "/hang" => Reply::Hang,
        "/teapot" => Reply::Status(418, None),
        _ => Reply::Status(200, None),
    })
    .await;
    // A port with nothing listening: bind, note, close.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let tls_dir = std::env::temp_dir().join(format!("probe-ca-{}", std::process::id()));
    std::fs::create_dir_all(&tls_dir).unwrap();
    let ca = tls_dir.join("ca.pem");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(&ca, cert.cert.pem()).unwrap();
    let slo = "error_rate = 0.5, window = \"500ms\"";
    let text = format!(
        "[probe]\nrate = \"50/s\"\nduration = \"1s\"\ninterval = \"100ms\"\nseed = 2\n\
         [[path]]\nname = \"refused\"\nurl = \"http://{closed}/\"\nslo = {{ {slo} }}\n\
         [[path]]\nname = \"hang\"\nurl = \"http://{a}/hang\"\ntimeout = \"200ms\"\nslo = {{ {slo} }}\n\
         [[path]]\nname = \"teapot\"\nurl = \"http://{a}/teapot\"\nslo = {{ {slo} }}\n\
         [[path]]\nname = \"tls\"\nurl = \"https://{a}/\"\ntls = {{ ca_bundle = \"{ca}\", server_name = \"localhost\" }}\nslo = {{ {slo} }}\n\
         [[path]]\nname = \"fine\"\nurl = \"http://{a}/\"\nconnection = \"reuse\"\nslo = {{ {slo} }}\n",
        a = server.addr,
        ca = ca.display()
    );
    let c = ProbeConfig::parse("t.toml", &text).unwrap();
    // A hang guard only: the run ends at its second plus one timeout.
    let run = tokio::time::timeout(Duration::from_secs(60), stormbreak_probe::run(&c, opts(0)))
        .await
        .expect("the run ends by itself")
        .unwrap();
    let _ = std::fs::remove_dir_all(&tls_dir);
    // Bounded by its duration: one second of intervals, not one more.
    assert_eq!(run.ran_s, 1.0);
    assert!(!run.stopped_early);
    let reasons: Vec<Vec<&str>> = run
        .paths
        .iter()
        .map(|p| p.reasons.keys().copied().collect())
        .collect();
    assert_eq!(
        reasons,
        [
            vec!["connect_refused"],
            vec!["timeout"],
            vec!["status"],
            vec!["tls"],
            vec![]
        ],
        "{:?}",
        run.paths
    );
    for p in &run.paths[..4] {
        assert_eq!(p.totals.failed, p.totals.probes, "{p:?}");
        assert!(p.totals.probes >= 5, "{p:?}");
    }
    // Every probe sent is in the timeline, those that ended after the
    // run's last second included (the hung ones time out 200 ms later).
    let counted: u64 = run.paths.iter().map(|p| p.totals.probes).sum();
    assert_eq!(counted, run.probes_sent);
    let hang = &run.paths[1];
    assert!(
        hang.p50_ms.unwrap() >= 200.0 && hang.p50_ms.unwrap() < 400.0,
        "{hang:?}"
    );
    assert_eq!(run.paths[4].totals.failed, 0);
    assert_eq!(run.verdict, Verdict::Breached);
}

#[tokio::test]
async fn an_https_path_verifies_the_server_against_its_ca_bundle() {
    use std::sync::Arc as StdArc;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let dir = std::env::temp_dir().join(format!("probe-https-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, cert.cert.pem()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let server_config = rustls::ServerConfig::builder_with_provider(StdArc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(StdArc::new(server_config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            conns.spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = service_fn(|_req: http::Request<hyper::body::Incoming>| async {
                    Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from_static(b"ok"))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    let slo = "error_rate = 0.5, window = \"200ms\"";
    let text = format!(
        "[probe]\nrate = \"40/s\"\nduration = \"600ms\"\ninterval = \"100ms\"\nseed = 6\n\
         [[path]]\nname = \"new\"\nurl = \"https://{addr}/\"\ntls = {{ ca_bundle = \"{ca}\", server_name = \"localhost\" }}\nslo = {{ {slo} }}\n\
         [[path]]\nname = \"reuse\"\nurl = \"https://{addr}/\"\nconnection = \"reuse\"\ntls = {{ ca_bundle = \"{ca}\", server_name = \"localhost\" }}\nslo = {{ {slo} }}\n\
         [[path]]\nname = \"wrong name\"\nurl = \"https://{addr}/\"\ntls = {{ ca_bundle = \"{ca}\", server_name = \"example.com\" }}\nslo = {{ {slo} }}\n",
        ca = ca.display()
    );
    let c = ProbeConfig::parse("t.toml", &text).unwrap();
    let run = stormbreak_probe::run(&c, opts(0)).await.unwrap();
    server.abort();
    let _ = std::fs::remove_dir_all(&dir);
    for p in &run.paths[..2] {
        assert!(p.totals.probes >= 3 && p.totals.failed == 0, "{p:?}");
    }
    let wrong = &run.paths[2];
    assert_eq!(wrong.totals.failed, wrong.totals.probes, "{wrong:?}");
    assert_eq!(wrong.reasons.keys().copied().collect::<Vec<_>>(), ["tls"]);
}

/// Runs `c` and stops it after 1.5 s; guards against a hang, not a timing figure.
async fn stopped_after_a_while(c: &ProbeConfig) -> stormbreak_probe::ProbeRun {
    let stop = stormbreak_probe::StopSignal::default();
    let stopper = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(ms(1500)).await;
        stopper.stop();
    });
    let run = stormbreak_probe::run(
        c,
        RunOptions {
            stop,
            ..RunOptions::default()
        },
    );
    // A hang guard only: a stop that waited for the next slot (an hour
    // away) or for the hung probes (60 s) would trip it.
    let run = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("a stop must not wait")
        .unwrap();
    assert!(run.stopped_early);
    run
}

#[tokio::test]
async fn a_stop_ends_the_run_between_slots_and_drops_the_probes_out() {
    let server = Scripted::start(|_, _| Reply::Hang).await;
    let url = format!("http://{}/", server.addr);
    let slo = "error_rate = 0.5, window = \"10s\"";
    // The next slot an hour away on average: the stop must not wait for it.
    let sparse = config(
        "rate = \"1/h\"\nduration = \"24h\"\ninterval = \"1s\"",
        &[("p", url.clone(), slo)],
    );
    let run = stopped_after_a_while(&sparse).await;
    assert_eq!(run.probes_sent, 0, "{run:?}");
    // Two a second into a server that never answers, each allowed 60 s:
    // the hung probes are dropped, not awaited and not counted.
    let mut busy = config(
        "rate = \"2/s\"\nduration = \"1h\"\ninterval = \"1s\"\nseed = 2",
        &[("p", url, slo)],
    );
    busy.paths[0].timeout = stormbreak_policy::Nanos::from_secs(60);
    let run = stopped_after_a_while(&busy).await;
    assert!(run.probes_sent >= 1, "{run:?}");
    assert_eq!(run.paths[0].totals.probes, 0, "{run:?}");
}

#[tokio::test]
async fn a_hanging_path_fills_only_its_share_of_the_in_flight_cap() {
    let server = Scripted::start(|p, _| {
        if p == "/hang" {
            Reply::Hang
        } else {
            Reply::Status(200, None)
        }
    })
    .await;
    let slo = "error_rate = 0.5, window = \"500ms\"";
    let mut c = config(
        "rate = \"60/s\"\nduration = \"1s\"\ninterval = \"100ms\"\nseed = 3\nmax_in_flight = 4",
        &[
            ("hang", format!("http://{}/hang", server.addr), slo),
            ("fine", format!("http://{}/fine", server.addr), slo),
        ],
    );
    c.paths[0].timeout = stormbreak_policy::Nanos::from_millis(900);
    let run = stormbreak_probe::run(&c, opts(0)).await.unwrap();
    let (hang, fine) = (&run.paths[0], &run.paths[1]);
    assert!(hang.totals.skipped > 10, "{hang:?}");
    // Its share of 4 is 2 at a time: two, and two more once they time out.
    assert!((2..=4).contains(&hang.totals.probes), "{hang:?}");
    assert_eq!(fine.totals.skipped, 0, "{fine:?}");
    assert!(fine.totals.probes >= 20, "{fine:?}");
}
