//! Class 3 of issue 40: HAProxy configs read as HAProxy 2.6–3.x reads them
//! (Configuration Manual 2.2 quoting, 2.3 environment variables, 2.4
//! conditional blocks, 4 named defaults and `from`, `server-template`).

use std::sync::Arc;
use std::time::Duration;

use stormbreak_audit::chain::{Chain, ChainOptions};
use stormbreak_audit::inputs::haproxy;
use stormbreak_audit::inputs::{self, InputOptions};
use stormbreak_audit::{Report, audit};

use crate::common::{audit_fixture, audit_texts, of};

fn chain<'a>(r: &'a Report, route_start: &str) -> Vec<&'a Chain> {
    r.chains
        .iter()
        .filter(|c| c.route.starts_with(route_start))
        .collect()
}

fn haproxy_retries(c: &Chain) -> u32 {
    c.retries
        .iter()
        .find(|l| l.what.starts_with("HAProxy"))
        .expect("an HAProxy retry layer")
        .retries
}

fn parse(text: &str) -> (haproxy::Config, Vec<String>) {
    let (c, e) = haproxy::parse(&Arc::from("h.cfg"), text);
    (c, e.into_iter().map(|e| e.message).collect())
}

const PROD: &str = "`.if defined(PROD)` (line 21) is";

// ---- 2.4 Conditional blocks ----

#[test]
fn an_environment_condition_is_audited_both_ways_and_the_finding_names_its_branch() {
    let r = audit_fixture("haproxy-conditional");
    let sb202 = of(&r, "SB202");
    // Production: 20000 connections on 400 server slots.
    assert_eq!(sb202.len(), 1, "{:#?}", r.findings);
    let f = sb202[0];
    assert_eq!(f.pos.line, 22, "{f:?}");
    assert!(f.message.contains("accepts 20000"), "{}", f.message);
    assert!(
        f.message.contains(&format!("assuming {PROD} true")),
        "{}",
        f.message
    );
    // Both readings have a chain, each naming the branch it assumes.
    let www = chain(&r, "haproxy www");
    assert_eq!(www.len(), 2, "{:#?}", r.chains);
    assert!(
        www.iter()
            .any(|c| c.route.contains(&format!("{PROD} true")))
    );
    assert!(
        www.iter()
            .any(|c| c.route.contains(&format!("{PROD} false")))
    );
}

#[test]
fn a_condition_false_everywhere_is_not_read_and_a_true_one_is_read_plainly() {
    let r = audit_fixture("haproxy-conditional");
    // `retries 7` inside `.if 0` is not read: HAProxy's default of 3.
    for c in chain(&r, "haproxy www") {
        assert_eq!(haproxy_retries(c), 3, "{c:?}");
        // The backend does not depend on PROD: its name is plain.
        assert!(c.route.ends_with("/app"), "{}", c.route);
    }
    // `.if version_atleast(2.5)` holds for every HAProxy read: no choice.
    assert!(
        r.findings
            .iter()
            .all(|f| !f.message.contains("version_atleast")),
        "{:#?}",
        r.findings
    );
}

#[test]
fn retries_inside_a_defined_branch_make_two_chains_each_naming_its_branch() {
    let c = inputs::collect(
        &[],
        &[crate::common::fixtures().join("haproxy-conditional/retries.cfg")],
        &InputOptions::default(),
        &mut std::io::empty(),
    )
    .unwrap();
    let opts = ChainOptions {
        client_attempts: 2,
        ..ChainOptions::default()
    };
    let r = audit(c, &opts).0;
    let canary = "assuming `.if defined(CANARY)` (line 14) is";
    let api = chain(&r, "haproxy api");
    assert_eq!(api.len(), 2, "{:#?}", r.chains);
    let on = api
        .iter()
        .find(|c| c.route.contains(&format!("{canary} true")));
    let off = api
        .iter()
        .find(|c| c.route.contains(&format!("{canary} false")));
    assert_eq!(haproxy_retries(on.unwrap()), 5);
    assert_eq!(haproxy_retries(off.unwrap()), 3);
    // The amplification found in the CANARY reading says so.
    let sb301 = of(&r, "SB301");
    assert!(
        sb301
            .iter()
            .any(|f| f.message.contains(&format!("{canary} true"))
                && f.message.contains("12 attempts")),
        "{sb301:#?}"
    );
    assert!(
        sb301.iter().all(|f| f.message.contains(canary)),
        "{sb301:#?}"
    );
}

#[test]
fn a_retries_line_only_inside_if_0_changes_nothing() {
    let base = "frontend f\n  maxconn 100\n  default_backend b\nbackend b\n";
    let plain = audit_texts(&[(
        "h.cfg",
        &format!("{base}  server s 10.0.0.1:80 maxconn 50\n"),
    )]);
    let dead = audit_texts(&[(
        "h.cfg",
        &format!(
            "{base}.if 0\n  retries 9\n  retry-on all-retryable-errors\n.endif\n  server s 10.0.0.1:80 maxconn 50\n"
        ),
    )]);
    assert_eq!(plain.findings, dead.findings);
    assert_eq!(haproxy_retries(&dead.chains[0]), 3);
    assert_eq!(dead.chains[0].route, "haproxy f/b");
}

#[test]
fn unbalanced_blocks_and_unknown_predicates_are_reported_at_their_line() {
    let (_, e) = parse("backend b\n.if bogus(1)\n  retries 1\n.endif\n.endif\n.if 1\n");
    assert!(e.iter().any(|m| m.contains("bogus")), "{e:?}");
    assert!(e.iter().any(|m| m.contains(".endif without")), "{e:?}");
    assert!(e.iter().any(|m| m.contains(".if without")), "{e:?}");
}

// ---- 4. Proxies: named defaults and `from` ----

#[test]
fn named_defaults_and_from_are_inherited() {
    let (c, e) = parse(&crate::common::read("haproxy-defaults/haproxy.cfg"));
    assert!(e.is_empty(), "{e:?}");
    let p = |n: &str| c.proxies.iter().find(|p| p.name == n).unwrap();
    let site = p("site");
    assert_eq!(site.retries(), 2);
    assert!(site.redispatch);
    assert_eq!(site.balance.as_deref(), Some("leastconn"));
    assert_eq!(site.timeout("server"), Some(Duration::from_secs(60)));
    let orders = p("orders");
    assert_eq!(orders.retries(), 6, "api overrides web");
    assert_eq!(
        orders.retry_on(),
        ["conn-failure", "empty-response", "response-timeout"]
    );
    assert!(orders.redispatch, "api inherits web's option redispatch");
    assert_eq!(orders.balance.as_deref(), Some("leastconn"));
    assert_eq!(orders.timeout("server"), Some(Duration::from_secs(10)));
    assert_eq!(orders.timeout("connect"), Some(Duration::from_secs(4)));
    assert_eq!(p("internal").maxconn, Some((8000, 8)));
    // Without `from`, the last defaults section before: the unnamed one.
    let plain = p("plain");
    assert_eq!(plain.retries(), 3);
    assert!(!plain.redispatch);
    assert_eq!(plain.balance, None);
    assert_eq!(p("public").maxconn, None);
    assert_eq!(plain.timeout("server"), Some(Duration::from_secs(30)));
}

#[test]
fn a_frontend_from_named_defaults_is_judged_on_its_inherited_maxconn() {
    let r = audit_fixture("haproxy-defaults");
    let internal: Vec<_> = of(&r, "SB202")
        .into_iter()
        .filter(|f| f.object.contains("frontend internal"))
        .collect();
    assert_eq!(internal.len(), 1, "{:#?}", r.findings);
    assert_eq!(internal[0].pos.line, 8);
    assert!(
        internal[0].message.contains("accepts 8000"),
        "{}",
        internal[0].message
    );
    let orders = chain(&r, "haproxy internal/orders");
    assert_eq!(haproxy_retries(orders[0]), 6);
    assert_eq!(orders[0].timeout, Some(Duration::from_secs(10)));
    assert!(
        r.findings.iter().all(|f| f.rule != "SB001"),
        "{:#?}",
        r.findings
    );
}

#[test]
fn from_an_unknown_defaults_section_is_reported_and_not_guessed() {
    let (c, e) = parse("defaults\n  retries 4\nbackend b from nowhere\n  server s x:1\n");
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].contains("no defaults section named nowhere"), "{e:?}");
    assert_eq!(c.proxies[0].name, "b");
    // As the message says: the defaults section before it.
    assert_eq!(c.proxies[0].retries(), 4);
}

// ---- server-template ----

#[test]
fn server_template_declares_its_servers() {
    let r = audit_fixture("haproxy-template");
    let sb202 = of(&r, "SB202");
    assert!(
        sb202
            .iter()
            .any(|f| f.message.contains("backend pool has 1000 server slots")),
        "{sb202:#?}"
    );
    assert!(
        sb202
            .iter()
            .any(|f| f.message.contains("backend batch has 200 server slots")),
        "{sb202:#?}"
    );
    let (c, _) = parse(&crate::common::read("haproxy-template/haproxy.cfg"));
    let batch = c.backend("batch").unwrap();
    let names: Vec<_> = batch.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["job3", "job4", "job5", "job6"]);
}

#[test]
fn enough_templated_servers_leave_no_finding() {
    let cfg = "frontend f\n  maxconn 10000\n  default_backend b\nbackend b\n  server-template s 30 app.internal:80 maxconn 100\n";
    let r = audit_texts(&[("h.cfg", cfg)]);
    assert!(of(&r, "SB202").is_empty(), "{:#?}", r.findings);
    let (_, e) = parse(
        "backend b\n  server-template s 0 x:1\n  server-template t 5-2 x:1\n  server-template u 1-99999999 x:1\n",
    );
    assert_eq!(e.len(), 3, "{e:?}");
}

// ---- 2.2 Quoting and escaping, 2.3 Environment variables ----

#[test]
fn quoted_numbers_are_numbers() {
    let r = audit_fixture("haproxy-quoting");
    for line in [4, 8, 11, 14, 18] {
        assert!(
            r.findings
                .iter()
                .all(|f| f.rule != "SB001" || f.pos.line != line),
            "line {line}: {:#?}",
            r.findings
        );
    }
    let sb202 = of(&r, "SB202");
    assert!(
        sb202.iter().any(|f| f.message.starts_with(
            "frontend quoted accepts 4000 connections but backend quoted_servers has 100 server slots"
        )),
        "{sb202:#?}"
    );
}

#[test]
fn environment_values_are_unknown_never_zero_nor_literal() {
    let r = audit_fixture("haproxy-quoting");
    for (line, var) in [(22, "FE_MAXCONN"), (26, "RETRIES"), (28, "SRV_MAXCONN")] {
        let f = r
            .findings
            .iter()
            .find(|f| f.rule == "SB001" && f.pos.line == line)
            .unwrap_or_else(|| panic!("line {line}: {:#?}", r.findings));
        assert!(
            f.message.contains(&format!("environment variable {var}"))
                && f.message.contains("unknown"),
            "{}",
            f.message
        );
    }
    // Every chain through the environment's sections says so.
    let env = chain(&r, "haproxy from_env");
    assert_eq!(env.len(), 1, "{:#?}", r.chains);
    for what in ["FE_MAXCONN", "RETRIES", "SRV_MAXCONN"] {
        assert!(env[0].route.contains(what), "{}", env[0].route);
    }
    assert!(env[0].route.contains("unknown"), "{}", env[0].route);
    // Never 0 (which HAProxy reads as unlimited) and never dropped.
    let (c, _) = parse(&crate::common::read("haproxy-quoting/haproxy.cfg"));
    let b = c
        .proxies
        .iter()
        .find(|p| p.name.starts_with("env_servers"))
        .unwrap();
    assert_eq!(b.servers.len(), 2);
    assert_eq!(b.servers[1].maxconn, None);
    assert!(of(&r, "SB401").is_empty(), "{:#?}", r.findings);
}

#[test]
fn a_limit_from_the_environment_is_an_unknown_hop_never_the_global_one() {
    use stormbreak_audit::chain::HopKind;
    let r = audit_fixture("haproxy-quoting");
    let hop = |route: &str, kind: HopKind| {
        let c = chain(&r, route);
        assert_eq!(c.len(), 1, "{route}: {:#?}", r.chains);
        c[0].hops
            .iter()
            .find(|h| h.kind == kind)
            .cloned()
            .unwrap_or_else(|| panic!("{route}: no {kind:?} hop: {:#?}", c[0].hops))
    };
    // The frontend's own maxconn is unknown: HAProxy would not use the
    // global 30000 in its place, so neither does the chain.
    for (route, var) in [
        ("haproxy from_env", "FE_MAXCONN"),
        ("haproxy env_edge", "EDGE_MAXCONN"),
    ] {
        let f = hop(route, HopKind::Frontend);
        assert!(f.unknown && f.limit.is_none(), "{route}: {f:#?}");
        assert!(f.how.contains(var) && !f.how.contains("30000"), "{}", f.how);
    }
    // One server's maxconn is unknown, so the backend's sum is unknown
    // (not "unlimited"), and the hop points at that server's line.
    let b = hop("haproxy from_env", HopKind::Backend);
    assert!(b.unknown && b.limit.is_none(), "{b:#?}");
    assert!(
        b.how.contains("SRV_MAXCONN") && !b.how.contains("unlimited"),
        "{}",
        b.how
    );
    assert_eq!(b.pos.line, 28);
    // A frontend whose limit is unknown is not compared with its servers
    // on the strength of the global maxconn.
    assert!(
        !of(&r, "SB202")
            .iter()
            .any(|f| f.object.contains("env_edge")),
        "{:#?}",
        of(&r, "SB202")
    );
    // The quoted frontend keeps its own 4000.
    let q = hop("haproxy quoted", HopKind::Frontend);
    assert_eq!(q.limit, Some(4000.0), "{q:#?}");
}
