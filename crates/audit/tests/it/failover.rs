//! SB503: locality failover targets without room, both ways.

use crate::common::*;

fn fixture(west: u32) -> String {
    read("failover/reviews.yaml").replace("replicas: WEST", &format!("replicas: {west}"))
}

#[test]
fn sb503_failover_to_a_smaller_region() {
    let r = audit_texts(&[("reviews.yaml", &fixture(2))]);
    let f = of(&r, "SB503");
    assert_eq!(f.len(), 1, "east → west only: {:?}", r.findings);
    let m = &f[0].message;
    assert!(
        m.contains("ejects region us-east (reviews-east 6 × 10 = 60"),
        "{m}"
    );
    assert!(
        m.contains("fails over to us-west (reviews-west 2 × 10 = 20)"),
        "{m}"
    );
    assert_eq!(f[0].pos.line, 66, "points at localityLbSetting");
}

#[test]
fn sb503_quiet_with_room_or_without_outlier_detection() {
    // Equal regions: each can take the other's load at its capacity.
    assert!(of(&audit_texts(&[("reviews.yaml", &fixture(6))]), "SB503").is_empty());
    // Without outlier detection Istio never fails over.
    let text = fixture(2);
    let start = text.find("    outlierDetection:").unwrap();
    let end = text.find("    loadBalancer:").unwrap();
    let no_od = format!("{}{}", &text[..start], &text[end..]);
    assert!(of(&audit_texts(&[("reviews.yaml", &no_od)]), "SB503").is_empty());
    // Disabled locality load balancing.
    let off = fixture(2).replace("enabled: true", "enabled: false");
    assert!(of(&audit_texts(&[("reviews.yaml", &off)]), "SB503").is_empty());
}

#[test]
fn sb503_failover_priority_by_region_counts_the_other_regions() {
    let prio = fixture(2).replace(
        "        failover:\n        - {from: us-east, to: us-west}\n        - {from: us-west, to: us-east}\n",
        "        failoverPriority: [topology.kubernetes.io/region]\n",
    );
    assert!(prio.contains("failoverPriority"));
    let r = audit_texts(&[("reviews.yaml", &prio)]);
    let f = of(&r, "SB503");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert!(
        f[0].message.contains("ejects region us-east"),
        "{}",
        f[0].message
    );
    // A priority on zones only says nothing about regions: quiet.
    let zones = prio.replace(
        "[topology.kubernetes.io/region]",
        "[topology.kubernetes.io/zone]",
    );
    assert!(of(&audit_texts(&[("reviews.yaml", &zones)]), "SB503").is_empty());
}

fn zones(b: u32, c: u32) -> String {
    read("zones/reviews.yaml")
        .replace("replicas: B", &format!("replicas: {b}"))
        .replace("replicas: C", &format!("replicas: {c}"))
}

#[test]
fn sb503_a_zone_fails_over_to_smaller_zones_of_its_region() {
    // us-east-1a: 6 × 10 = 60; the other zones 1 × 10 each = 20 < 60.
    let r = audit_texts(&[("reviews.yaml", &zones(1, 1))]);
    let f = of(&r, "SB503");
    assert_eq!(
        f.len(),
        1,
        "only 1a's failover lacks room: {:?}",
        r.findings
    );
    let m = &f[0].message;
    assert!(
        m.contains("ejects region us-east zone us-east-1a (reviews-a 6 × 10 = 60"),
        "{m}"
    );
    // 1b from its one node-affinity term, 1c from its Node's labels.
    assert!(
        m.contains("region us-east zone us-east-1b: reviews-b 1 × 10"),
        "{m}"
    );
    assert!(
        m.contains("region us-east zone us-east-1c: reviews-c 1 × 10; together 20"),
        "{m}"
    );
    assert_eq!(f[0].pos.line, 88, "points at localityLbSetting");
    assert_eq!(r.counts.read.get("Node"), Some(&1));
}

#[test]
fn sb503_zones_quiet_with_room_unknown_zones_or_disabled() {
    // 3 + 3 pods in the other zones: 60 ≥ 60.
    assert!(of(&audit_texts(&[("reviews.yaml", &zones(3, 3))]), "SB503").is_empty());
    // Without the Node, reviews-c's zone is unknown: no claim.
    let text = zones(1, 1);
    let start = text.find("apiVersion: v1\nkind: Node").unwrap();
    let end = text[start..].find("---\n").unwrap() + start + 4;
    let no_node = format!("{}{}", &text[..start], &text[end..]);
    assert!(of(&audit_texts(&[("reviews.yaml", &no_node)]), "SB503").is_empty());
    // Locality load balancing off, or no outlier detection: no failover.
    let off = zones(1, 1).replace("enabled: true", "enabled: false");
    assert!(of(&audit_texts(&[("reviews.yaml", &off)]), "SB503").is_empty());
    let no_od = zones(1, 1).replace("    outlierDetection:\n", "    outlierDetectionX:\n");
    assert!(of(&audit_texts(&[("reviews.yaml", &no_od)]), "SB503").is_empty());
    // A priority on a custom label says nothing the audit can place.
    let custom = zones(1, 1).replace(
        "        enabled: true\n",
        "        enabled: true\n        failoverPriority: [example.com/rack]\n",
    );
    assert!(of(&audit_texts(&[("reviews.yaml", &custom)]), "SB503").is_empty());
}

#[test]
fn sb503_failover_priority_on_zones_reads_zones() {
    let prio = |labels: &str| {
        zones(1, 1).replace(
            "        enabled: true\n",
            &format!("        enabled: true\n        failoverPriority: [{labels}]\n"),
        )
    };
    for labels in [
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region, topology.kubernetes.io/zone",
    ] {
        let r = audit_texts(&[("reviews.yaml", &prio(labels))]);
        let f = of(&r, "SB503");
        assert_eq!(f.len(), 1, "{labels}: {:?}", r.findings);
        assert!(f[0].message.contains("zone us-east-1a"), "{}", f[0].message);
    }
    // A priority on regions alone: one region, nothing to fail over to.
    let r = audit_texts(&[("reviews.yaml", &prio("topology.kubernetes.io/region"))]);
    assert!(of(&r, "SB503").is_empty(), "{:?}", r.findings);
}
