//! Policies on real traffic: retry budget, no retry of 403, shed answers
//! with Retry-After, keyed rate limits under a unique-key flood; a route's
//! dependency check (`dependency`).

mod dependency;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::common::*;
use bytes::Bytes;
use http::Request;
use http_body_util::Full;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_total_failure_attempts_stay_within_the_ratio_budget() {
    // Ratio 0.2 + 10 retries/s over a 10 s ttl (the defaults, spelled out):
    // the published bound is retries ≤ 0.2 × requests + 10/s × (elapsed + 10 s).
    let b = backend(|_| status(503)).await;
    let g = guard(&one_route(
        &b,
        r#"retry = { max_attempts = 3, backoff = { kind = "constant", base = "0" } }
budget = { kind = "ratio", retry_ratio = 0.2, min_retries_per_sec = 10, ttl = "10s" }"#,
        "",
    ))
    .await;
    let edge = g.local_addr("edge").unwrap();
    let requests: u64 = 10_000;
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let workers: Vec<_> = (0..32)
        .map(|_| {
            let next = next.clone();
            tokio::spawn(async move {
                let client = http1_client();
                while next.fetch_add(1, Ordering::Relaxed) < requests {
                    let (parts, _) = send(&client, get(edge, "/")).await;
                    assert_eq!(parts.status, 503);
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    let elapsed = start.elapsed().as_secs_f64().ceil();
    let attempts = b.hits();
    let retries = attempts - requests;
    let bound = 0.2 * requests as f64 + 10.0 * (elapsed + 10.0);
    eprintln!(
        "{requests} requests, {attempts} attempts ({:.3} per request) in ≤ {elapsed} s; bound {bound} retries",
        attempts as f64 / requests as f64
    );
    assert_eq!(
        g.stats().attempts(),
        attempts,
        "the guard counted what the backend saw"
    );
    assert!(retries as f64 <= bound, "{retries} retries > {bound}");
    // The budget did let retries through: 20 % of requests plus the reserve, less rounding.
    assert!(retries >= 2000, "{retries}");
    // Within one ttl the reserve is spent once: ≤ 0.2 + 100/10 000 = 1.21 attempts per request.
    if elapsed < 10.0 {
        assert!(
            attempts * 100 <= requests * 121,
            "{attempts} attempts for {requests} requests"
        );
    }
}

#[tokio::test]
async fn a_403_is_never_retried_and_a_500_is_retried_up_to_max_attempts() {
    let b = backend(|seen| {
        status(if seen.head.uri.path() == "/forbidden" {
            403
        } else {
            500
        })
    })
    .await;
    let g = guard(&one_route(
        &b,
        r#"retry = { max_attempts = 3, backoff = { kind = "constant", base = "1ms" } }"#,
        "",
    ))
    .await;
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();
    for _ in 0..10 {
        assert_eq!(send(&client, get(edge, "/forbidden")).await.0.status, 403);
    }
    assert_eq!(b.hits(), 10, "one attempt per 403");
    assert_eq!(send(&client, get(edge, "/fail")).await.0.status, 500);
    assert_eq!(b.hits(), 13, "500: three attempts");
    // POST is not idempotent: sent once.
    let post = Request::post(format!("http://{edge}/fail"))
        .body(Full::new(Bytes::from_static(b"x")))
        .unwrap();
    assert_eq!(send(&client, post).await.0.status, 500);
    assert_eq!(b.hits(), 14);
}

#[tokio::test]
async fn a_buffered_body_is_replayed_on_retry() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let b = backend(move |s| {
        let mut l = log.lock().unwrap();
        l.push(s.body.clone());
        status(if l.len() < 2 { 503 } else { 200 })
    })
    .await;
    let g = guard(&one_route(
        &b,
        r#"retry = { max_attempts = 3, backoff = { kind = "constant", base = "1ms" } }"#,
        "",
    ))
    .await;
    let edge = g.local_addr("edge").unwrap();
    let put = Request::put(format!("http://{edge}/doc"))
        .body(Full::new(Bytes::from_static(b"payload")))
        .unwrap();
    assert_eq!(send(&http1_client(), put).await.0.status, 200);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|b| &b[..] == b"payload"), "{seen:?}");
}

#[tokio::test]
async fn operator_shed_rules_answer_at_once_with_their_status_and_retry_after() {
    let b = backend(|_| status(200)).await;
    let toml = Config::edge()
        .cluster("app", &[b.addr], "")
        .route(
            "token",
            "app",
            "match = { path_prefix = \"/token\" }\nretry = { max_attempts = 3 }",
        )
        .route(
            "batch",
            "app",
            "match = { path_prefix = \"/batch\" }\ncriticality = \"sheddable\"",
        )
        .route("web", "app", "")
        .tail(
            r#"[[shed]]
route = "token"
status = 403

[[shed]]
route = "batch"
class = "sheddable"
status = 429
retry_after = "30s""#,
        )
        .toml();
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();
    let (p, _) = send(&client, get(edge, "/token/x")).await;
    assert_eq!(p.status, 403);
    assert!(
        !p.headers.contains_key("retry-after"),
        "403 means do not retry"
    );
    let (p, _) = send(&client, get(edge, "/batch")).await;
    assert_eq!(p.status, 429);
    assert_eq!(p.headers["retry-after"], "30");
    assert_eq!(send(&client, get(edge, "/web")).await.0.status, 200);
    assert_eq!(
        b.hits(),
        1,
        "shed requests never reach the upstream, retry policy or not"
    );
    assert_eq!(g.stats().shed(), 2);
}

#[tokio::test]
async fn saturation_sheds_sheddable_first_with_503_and_retry_after() {
    // A backend that holds requests until released; a fixed limit of 4 with
    // a queue of 6: room 10. Sheddable sheds at 80 %, critical at 100 %.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let held = gate.clone();
    let b = backend_async(move |_| {
        let held = held.clone();
        async move {
            let _ = held.acquire().await.map(|p| p.forget());
            status(200)
        }
    })
    .await;
    let toml = Config::new()
        .listener("edge", r#"trusted_proxies = ["127.0.0.1"]"#)
        .cluster("app", &[b.addr], "")
        .route(
            "app",
            "app",
            r#"limit = { kind = "fixed", limit = 4 }
queue = { size = 6, timeout = "10s" }"#,
        )
        .toml();
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let class_get = move |class: &str| {
        Request::get(format!("http://{edge}/"))
            .header("x-stormbreak-criticality", class)
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    // Eight critical requests in flight or queued: saturation 0.8.
    let mut pending = Vec::new();
    for _ in 0..8 {
        let req = class_get("critical");
        pending.push(tokio::spawn(async move {
            send(&http1_client(), req).await.0.status
        }));
    }
    let client = http1_client();
    // Wait (bounded) until all eight are admitted or queued.
    for _ in 0..200 {
        if g.stats().requests() >= 8 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (p, _) = send(&client, class_get("sheddable")).await;
    assert_eq!(p.status, 503);
    assert_eq!(p.headers["retry-after"], "1");
    gate.add_permits(1000);
    for t in pending {
        assert_eq!(t.await.unwrap(), 200);
    }
}

#[tokio::test]
async fn a_queue_timeout_is_told_apart_from_a_full_limit() {
    // Limit 1 with a one-slot queue of 300 ms: the first request holds the
    // slot, the second waits and times out, a third finds the queue full.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let held = gate.clone();
    let b = backend_async(move |_| {
        let held = held.clone();
        async move {
            let _ = held.acquire().await.map(|p| p.forget());
            status(200)
        }
    })
    .await;
    let toml = Config::edge()
        .cluster("app", &[b.addr], "")
        .route(
            "app",
            "app",
            r#"limit = { kind = "fixed", limit = 1 }
queue = { size = 1, timeout = "300ms" }"#,
        )
        .toml();
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let first = tokio::spawn(async move { send(&http1_client(), get(edge, "/")).await.0 });
    // Bounded waits for the guard to see each request (not timing asserts).
    let seen = |n: u64| {
        let g = &g;
        async move {
            for _ in 0..500 {
                if g.stats().requests() >= n {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            panic!("the guard never saw {n} requests");
        }
    };
    seen(1).await;
    let second = tokio::spawn(async move { send(&http1_client(), get(edge, "/")).await.0 });
    seen(2).await;
    // The queue is full: saturation 1.0 sheds the (critical by default)
    // request before it reaches the limit, and says so.
    let (third, _) = send(&http1_client(), get(edge, "/")).await;
    assert_eq!(third.status, 503);
    assert_eq!(third.headers["x-stormbreak-refused"], "saturation");
    let second = second.await.unwrap();
    assert_eq!(second.status, 503);
    assert_eq!(second.headers["x-stormbreak-refused"], "queue_timeout");
    gate.add_permits(10);
    let first = first.await.unwrap();
    assert_eq!(first.status, 200);
    assert!(first.headers.get("x-stormbreak-refused").is_none());
    let text = g.metrics_text();
    for (reason, n) in [("limit", 0), ("queue_timeout", 1)] {
        let line = format!(
            "stormbreak_guard_limit_refused_total{{route=\"app\",reason=\"{reason}\"}} {n}"
        );
        assert!(text.contains(&line), "{line} in\n{text}");
    }
}

#[tokio::test]
async fn a_unique_key_flood_keeps_the_rate_limiter_within_its_key_cap() {
    let b = backend(|_| status(200)).await;
    let g = guard(&one_route(
        &b,
        r#"rate_limit = { rate = "1/s", burst = 2, max_keys = 64 }
rate_limit_key = { header = "x-client" }"#,
        "",
    ))
    .await;
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();
    let keyed = |key: String| {
        Request::get(format!("http://{edge}/"))
            .header("x-client", key)
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    for i in 0..2_000 {
        let (p, _) = send(&client, keyed(format!("flood-{i}"))).await;
        assert_eq!(p.status, 200, "a new key has its burst");
        let (held, cap) = g.rate_limit_keys("app").unwrap();
        assert!(held <= cap && cap == 64, "{held} keys of {cap}");
    }
    // One key over its burst: 429 with Retry-After.
    for _ in 0..2 {
        assert_eq!(send(&client, keyed("steady".into())).await.0.status, 200);
    }
    let (p, _) = send(&client, keyed("steady".into())).await;
    assert_eq!(p.status, 429);
    assert_eq!(p.headers["retry-after"], "1");
    assert_eq!(g.stats().rate_limited(), 1);
}

#[tokio::test]
async fn a_failing_endpoint_is_ejected_and_p2c_sends_the_rest_to_the_healthy_one() {
    let bad = backend(|_| status(503)).await;
    let good = backend(|_| status(200)).await;
    let toml = Config::edge()
        .cluster(
            "app",
            &[bad.addr, good.addr],
            r#"outlier = { consecutive_failures = 3, base_ejection_time = "60s", max_ejection_percent = 50 }"#,
        )
        .route("app", "app", "")
        .toml();
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();
    for _ in 0..100 {
        let _ = send(&client, get(edge, "/")).await;
    }
    // Successes elsewhere do not reset the bad endpoint's count: its third
    // failure ejects it for 60 s, longer than this test.
    assert_eq!(bad.hits(), 3);
    assert_eq!(good.hits(), 97);
}

#[tokio::test]
async fn with_every_primary_endpoint_ejected_the_route_fails_over() {
    let bad = backend(|_| status(503)).await;
    let west = backend(|_| status(200)).await;
    let toml = Config::edge()
        .cluster(
            "east",
            &[bad.addr],
            r#"outlier = { consecutive_failures = 2, base_ejection_time = "60s" }"#,
        )
        .cluster("west", &[west.addr], "")
        .route("app", "east", r#"failover = "west""#)
        .toml();
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();
    let statuses: Vec<u16> = {
        let mut v = Vec::new();
        for _ in 0..10 {
            v.push(send(&client, get(edge, "/")).await.0.status.as_u16());
        }
        v
    };
    assert_eq!(statuses, [503, 503, 200, 200, 200, 200, 200, 200, 200, 200]);
    assert_eq!((bad.hits(), west.hits()), (2, 8));
}

#[tokio::test]
async fn a_cluster_limit_bounds_attempts_in_flight_across_routes() {
    // Two routes share a cluster whose fixed limit is 1: while one request
    // holds it, an attempt from the other route is refused (503, not sent).
    let gate = Arc::new(tokio::sync::Notify::new());
    let held = gate.clone();
    let b = backend_async(move |_| {
        let held = held.clone();
        async move {
            held.notified().await;
            status(200)
        }
    })
    .await;
    let hits = b.hits.clone();
    let toml = Config::edge()
        .cluster("app", &[b.addr], r#"limit = { kind = "fixed", limit = 1 }"#)
        .route("a", "app", r#"match = { path_prefix = "/a" }"#)
        .route("b", "app", "")
        .toml();
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let first = tokio::spawn(async move { send(&http1_client(), get(edge, "/a")).await.0.status });
    for _ in 0..500 {
        if hits.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(send(&http1_client(), get(edge, "/b")).await.0.status, 503);
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "the refused attempt was not sent"
    );
    gate.notify_one();
    assert_eq!(first.await.unwrap(), 200);
}

#[tokio::test]
async fn an_endpoint_failing_its_health_checks_gets_no_traffic_until_it_recovers() {
    let sick = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (probes, work) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (flag, p, w) = (sick.clone(), probes.clone(), work.clone());
    let flaky = backend(move |seen| {
        if seen.head.uri.path() == "/healthz" {
            p.fetch_add(1, Ordering::SeqCst);
            status(if flag.load(Ordering::SeqCst) {
                503
            } else {
                200
            })
        } else {
            w.fetch_add(1, Ordering::SeqCst);
            status(200)
        }
    })
    .await;
    let steady = backend(|_| status(200)).await;
    let toml = Config::edge()
        .cluster(
            "app",
            &[flaky.addr, steady.addr],
            r#"health_check = { path = "/healthz", interval = "20ms", timeout = "10ms", unhealthy_threshold = 2, healthy_threshold = 2 }"#,
        )
        .route("app", "app", "")
        .toml();
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    // Wait (bounded, 5 s) for a third probe: one endpoint's probes run one
    // after another, so by then the second failure has been recorded.
    for _ in 0..500 {
        if probes.load(Ordering::SeqCst) >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(probes.load(Ordering::SeqCst) >= 3);
    let client = http1_client();
    for _ in 0..50 {
        assert_eq!(send(&client, get(edge, "/work")).await.0.status, 200);
    }
    assert_eq!(
        work.load(Ordering::SeqCst),
        0,
        "no request went to the unhealthy endpoint"
    );
    // Recovery: two healthy probes bring it back (bounded: 5 s).
    sick.store(false, Ordering::SeqCst);
    for _ in 0..1000 {
        if work.load(Ordering::SeqCst) > 0 {
            break;
        }
        let _ = send(&client, get(edge, "/work")).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        work.load(Ordering::SeqCst) > 0,
        "the recovered endpoint got traffic again"
    );
}

#[tokio::test]
async fn an_open_breaker_fails_fast_with_retry_after_and_timeouts_trip_it() {
    // The backend answers after 1 s; the per-try timeout is 50 ms, so every
    // attempt times out, and three timeouts in a row open the breaker.
    let b = backend_async(|_| async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        status(200)
    })
    .await;
    let hits = b.hits.clone();
    let toml = Config::edge()
        .cluster(
            "app",
            &[b.addr],
            r#"breaker = { consecutive_failures = 3, sliding_window_size = 0, wait_duration_in_open_state = "30s" }"#,
        )
        .route(
            "app",
            "app",
            r#"retry = { max_attempts = 1, per_try_timeout = "50ms" }"#,
        )
        .toml();
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();
    for _ in 0..3 {
        assert_eq!(send(&client, get(edge, "/")).await.0.status, 504);
    }
    let (p, _) = send(&client, get(edge, "/")).await;
    assert_eq!(p.status, 503, "open: fail fast");
    assert_eq!(p.headers["retry-after"], "30");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        3,
        "the open breaker sent nothing"
    );
}

#[tokio::test]
async fn the_spill_law_sends_the_primarys_excess_to_a_secondary_with_headroom() {
    let east = backend(|_| status(200)).await;
    let west = backend(|_| status(200)).await;
    let toml = Config::edge()
        .cluster("east", &[east.addr], r#"endpoint_capacity = "2/s""#)
        .cluster("west", &[west.addr], r#"endpoint_capacity = "1k/s""#)
        .route(
            "app",
            "east",
            r#"failover = "west"
failover_policy = { half_life = "0", deadband = 0 }"#,
        )
        .toml();
    let g = guard(&toml).await;
    let edge = g.local_addr("edge").unwrap();
    let client = http1_client();
    // Far more than 2/s: once the law has seen a second of it (observed
    // each second), most attempts spill west. Bounded at 20 000 requests.
    for _ in 0..20_000 {
        assert_eq!(send(&client, get(edge, "/")).await.0.status, 200);
        if west.hits() >= 50 {
            break;
        }
    }
    assert!(
        west.hits() >= 50,
        "nothing spilled: east {} west {}",
        east.hits(),
        west.hits()
    );
    assert!(east.hits() > 0, "the primary keeps what it can serve");
}

#[tokio::test]
async fn a_staged_restore_admits_the_first_sites_fraction_and_nothing_at_the_next() {
    let b = backend(|_| status(200)).await;
    let toml = Config::new()
        .listener("site-a", "")
        .listener("site-b", "")
        .cluster("app", &[b.addr], "")
        .route(
            "token",
            "app",
            r#"restore = { ramp = { steps = [0.5, 1.0], hold = "1h", step_back_after = "0" } }
restore_sites = ["site-a", "site-b"]"#,
        )
        .toml();
    let g = guard(&toml).await;
    let (a, bsite) = (
        g.local_addr("site-a").unwrap(),
        g.local_addr("site-b").unwrap(),
    );
    let client = http1_client();
    let mut admitted = 0;
    for _ in 0..400 {
        let (p, _) = send(&client, get(a, "/")).await;
        match p.status.as_u16() {
            200 => admitted += 1,
            503 => assert_eq!(p.headers["retry-after"], "1"),
            other => panic!("{other}"),
        }
    }
    // Site A is at its first step, 50 %: 200 ± 5 standard deviations of 10.
    assert!((150..=250).contains(&admitted), "{admitted} of 400");
    assert_eq!(b.hits(), admitted);
    // Site B has not started: it admits nothing until A is fully restored.
    for _ in 0..20 {
        assert_eq!(send(&client, get(bsite, "/")).await.0.status, 503);
    }
    assert_eq!(b.hits(), admitted);
}

#[tokio::test]
async fn a_restore_started_in_process_answers_what_its_route_says() {
    let b = backend(|_| status(200)).await;
    let toml = Config::new()
        .listener("site-a", "")
        .listener("site-b", "")
        .cluster("app", &[b.addr], "")
        .route(
            "token",
            "app",
            r#"restore_sites = ["site-a", "site-b"]
restore_answer = { status = 403 }"#,
        )
        .toml();
    let g = guard(&toml).await;
    let (a, bsite) = (
        g.local_addr("site-a").unwrap(),
        g.local_addr("site-b").unwrap(),
    );
    let client = http1_client();
    // No restore yet: both sites admit everything.
    assert_eq!(send(&client, get(bsite, "/")).await.0.status, 200);
    let ramp: stormbreak_policy::ramp::StagedRestoreConfig =
        toml::from_str("ramp = { steps = [0.5, 1.0], hold = \"1h\", step_back_after = \"0\" }")
            .unwrap();
    g.start_restore("token", Some(&ramp)).unwrap();
    assert!(g.start_restore("nope", Some(&ramp)).is_err());
    // Site B waits for site A: refused with the route's answer, a 403
    // without Retry-After, not the [saturation] table's 503.
    for _ in 0..20 {
        let (p, _) = send(&client, get(bsite, "/")).await;
        assert_eq!(p.status, 403);
        assert!(p.headers.get("retry-after").is_none(), "{p:?}");
        assert_eq!(p.headers[stormbreak_guard::REFUSED_HEADER], "restore");
    }
    let mut admitted = 0;
    for _ in 0..200 {
        admitted += u32::from(send(&client, get(a, "/")).await.0.status == 200);
    }
    assert!((50..=150).contains(&admitted), "{admitted} of 200 at 50 %");
}
