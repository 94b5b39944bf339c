//! SB503: locality failover targets without room, both ways.

mod common;

use common::*;

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
