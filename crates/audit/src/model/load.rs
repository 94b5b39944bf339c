//! Sources → [`Inventory`]: each object typed by its kind and apiVersion.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::{v1 as hpa1, v2 as hpa2};
use k8s_openapi::api::core::v1::{Namespace, Pod, PodTemplateSpec, Service as K8sService};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

use super::istio::{self, Object};
use super::proxy::{self, ProxySettings};
use super::workload::{self, decide_sidecar, ignores};
use super::*;
use crate::finding::Severity;
use crate::inputs::yaml::{self, Body, ParseError, RawObject};
use crate::inputs::{Format, Source};
use crate::units::parse_go_duration;

/// Reads every source into an inventory. Never fails: what cannot be read
/// becomes an SB001 finding with its position.
pub fn load(sources: &[Source]) -> Inventory {
    let mut inv = read_sources(sources);
    report_duplicates(&mut inv);
    let namespaces = std::mem::take(&mut inv.namespaces);
    let mut workloads = std::mem::take(&mut inv.workloads);
    let settings = ProxySettings::new(&inv.proxy_configs, &inv.mesh_defaults);
    let mut inbound_by_ns: BTreeMap<&str, Vec<&InboundLimit>> = BTreeMap::new();
    for l in &inv.inbound {
        inbound_by_ns
            .entry(l.namespace.as_str())
            .or_default()
            .push(l);
    }
    for w in &mut workloads {
        let ns_labels = namespaces.get(&w.namespace);
        let configured_by = ns_labels
            .is_none()
            .then(|| sidecar_configured_by(w, &inbound_by_ns, &settings))
            .flatten();
        let view = workload::MeshView {
            ns_labels,
            settings: &settings,
            configured_by,
        };
        decide_sidecar(w, &view);
        // A pod pinned to a node is where that node's labels say; what the
        // pod spec pins itself wins.
        if let Some(labels) = w.node.as_ref().and_then(|n| inv.nodes.get(n)) {
            if w.region.is_none() {
                w.region = labels.get(workload::REGION_LABEL).cloned();
            }
            if w.zone.is_none() {
                w.zone = labels.get(workload::ZONE_LABEL).cloned();
            }
        }
        for p in std::mem::take(&mut w.problems) {
            inv.findings
                .push(parse_finding(w.src.pos.clone(), &w.key(), p));
        }
    }
    drop(settings);
    inv.workloads = workloads;
    inv.namespaces = namespaces;
    super::gateway_api::resolve(&mut inv);
    inv.reindex();
    inv
}

/// The first object among the inputs that configures the sidecar of `w`
/// in its own namespace (an inbound limit or a ProxyConfig that selects
/// it or covers its namespace), named: such an object acts on injected
/// pods only. The root namespace's ProxyConfig covers every namespace and
/// so says nothing of this one.
fn sidecar_configured_by(
    w: &Workload,
    inbound_by_ns: &BTreeMap<&str, Vec<&InboundLimit>>,
    settings: &ProxySettings<'_>,
) -> Option<String> {
    let applies =
        |sel: Option<&BTreeMap<String, String>>| sel.is_none_or(|s| selects(s, &w.pod_labels));
    if let Some(l) = inbound_by_ns
        .get(w.namespace.as_str())
        .into_iter()
        .flatten()
        .find(|l| applies(l.selector.as_ref()))
    {
        return Some(format!(
            "{} {}/{} sets an inbound limit on its sidecar",
            l.kind, l.namespace, l.name
        ));
    }
    let root = settings.root_namespace("");
    (w.namespace != root)
        .then(|| settings.applying_in(&w.namespace, &w.pod_labels))
        .flatten()
        .map(|c| {
            format!(
                "ProxyConfig {}/{} configures its proxy",
                c.namespace, c.name
            )
        })
}

/// The same object (kind, namespace, name) defined in two files: a warning
/// at each later definition naming the first, since which one the cluster
/// holds depends on the order they are applied in. Both stay read.
/// Several definitions in one file (a generated stress input, a List) are
/// the file's own business and not reported.
fn report_duplicates(inv: &mut Inventory) {
    let mut all: Vec<(String, &Pos)> = Vec::new();
    all.extend(
        inv.workloads
            .iter()
            .map(|w| (key(&w.kind, &w.namespace, &w.name), &w.src.pos)),
    );
    all.extend(
        inv.services
            .iter()
            .map(|s| (key("Service", &s.namespace, &s.name), &s.src.pos)),
    );
    all.extend(
        inv.autoscalers
            .iter()
            .map(|a| (key(a.kind, &a.namespace, &a.name), &a.src.pos)),
    );
    all.extend(
        inv.destination_rules
            .iter()
            .map(|d| (key("DestinationRule", &d.namespace, &d.name), &d.src.pos)),
    );
    all.extend(
        inv.routes
            .iter()
            .map(|r| (key(r.kind, &r.namespace, &r.name), &r.src.pos)),
    );
    all.extend(
        inv.service_entries
            .iter()
            .map(|e| (key("ServiceEntry", &e.namespace, &e.name), &e.src.pos)),
    );
    all.extend(
        inv.inbound
            .iter()
            .map(|l| (key(l.kind, &l.namespace, &l.name), &l.src.pos)),
    );
    all.extend(
        inv.sidecars
            .iter()
            .map(|c| (key("Sidecar", &c.namespace, &c.name), &c.src.pos)),
    );
    // First definition of each key, and the files already reported for it.
    let mut first: std::collections::HashMap<&str, (&Pos, Vec<&str>)> =
        std::collections::HashMap::new();
    let mut found = Vec::new();
    for (k, pos) in &all {
        match first.get_mut(k.as_str()) {
            None => {
                first.insert(k, (*pos, vec![&*pos.file]));
            }
            Some((p0, files)) => {
                if files.contains(&&*pos.file) {
                    continue;
                }
                files.push(&pos.file);
                found.push(Finding {
                    rule: crate::rules::PARSE_ERROR,
                    severity: Severity::Warning,
                    pos: (*pos).clone(),
                    object: k.clone(),
                    message: format!(
                        "{k} is defined twice: here and at {p0}; both were read, so it counts twice, and the cluster keeps whichever is applied last (keep one definition, or audit one of the two files)"
                    ),
                });
            }
        }
    }
    drop(first);
    inv.findings.extend(found);
}

/// The API versions read for each kind, by API group (`""` is the core
/// group). An object of one of these group/kind pairs at another version
/// is reported and not read: its fields may mean something else there
/// (`autoscaling/v2beta1` metrics, an Istio version to come). A group
/// listed with no version (`extensions`) is a kind's old home.
pub const KNOWN_VERSIONS: &[(&str, &str, &[&str])] = &[
    ("", "Namespace", &["v1"]),
    ("", "Node", &["v1"]),
    ("", "Pod", &["v1"]),
    ("", "Service", &["v1"]),
    ("", "ConfigMap", &["v1"]),
    ("apps", "Deployment", &["v1"]),
    ("apps", "StatefulSet", &["v1"]),
    ("apps", "DaemonSet", &["v1"]),
    ("extensions", "Deployment", &[]),
    ("extensions", "DaemonSet", &[]),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        &["v1", "v2", "v2beta2"],
    ),
    ("keda.sh", "ScaledObject", &["v1alpha1"]),
    ("networking.istio.io", "DestinationRule", ISTIO_VERSIONS),
    ("networking.istio.io", "VirtualService", ISTIO_VERSIONS),
    ("networking.istio.io", "Sidecar", ISTIO_VERSIONS),
    ("networking.istio.io", "ServiceEntry", ISTIO_VERSIONS),
    // EnvoyFilter was never promoted past v1alpha3 (Istio 1.27 reference).
    ("networking.istio.io", "EnvoyFilter", &["v1alpha3"]),
    // ProxyConfig exists at v1beta1 only (istio/api, proxy_config.proto).
    ("networking.istio.io", "ProxyConfig", &["v1beta1"]),
    ("install.istio.io", "IstioOperator", &["v1alpha1"]),
    (
        "gateway.networking.k8s.io",
        "HTTPRoute",
        &["v1", "v1beta1", "v1alpha2"],
    ),
    (
        "gateway.networking.k8s.io",
        "Gateway",
        &["v1", "v1beta1", "v1alpha2"],
    ),
];

/// Istio's `networking.istio.io` versions (v1 since Istio 1.22).
const ISTIO_VERSIONS: &[&str] = &["v1", "v1beta1", "v1alpha3"];

/// For an object of a known kind at a version the audit does not read,
/// the versions it does read (of the kind's current group).
fn unknown_version(api: &str, kind: &str) -> Option<String> {
    let (group, version) = api.rsplit_once('/').unwrap_or(("", api));
    let (_, _, versions) = KNOWN_VERSIONS
        .iter()
        .find(|(g, k, _)| *g == group && *k == kind)?;
    if versions.contains(&version) {
        return None;
    }
    let (g, _, current) = KNOWN_VERSIONS
        .iter()
        .find(|(g, k, v)| *k == kind && !v.is_empty() && (*g == group || group == "extensions"))?;
    let list = current
        .iter()
        .map(|v| {
            if g.is_empty() {
                v.to_string()
            } else {
                format!("{g}/{v}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    Some(list)
}

/// Reports an object of a known kind at an unknown version (info) and
/// counts it as skipped.
fn not_read_version(inv: &mut Inventory, raw: &RawObject, versions: String) {
    #[derive(serde::Deserialize, Default)]
    struct Named {
        #[serde(default)]
        metadata: ObjectMeta,
    }
    let object = match raw.parse::<Named>() {
        Ok(n) => {
            let (ns, name) = names(&n.metadata);
            key(&raw.kind, &ns, &name)
        }
        Err(_) => raw.kind.clone(),
    };
    inv.findings.push(Finding {
        rule: crate::rules::PARSE_ERROR,
        severity: Severity::Info,
        pos: Pos::new(&raw.pos.file, raw.line_of("apiVersion")),
        object,
        message: format!(
            "apiVersion {} is not a version of {} the audit reads; this object was not read and no rule looked at it (write it as {versions})",
            raw.api_version, raw.kind
        ),
    });
    *inv.counts
        .skipped
        .entry(format!("{} ({})", raw.kind, raw.api_version))
        .or_default() += 1;
}

/// At most this many threads read sources (a bound; the machine's
/// available parallelism when smaller).
pub const MAX_READERS: usize = 8;

/// Reads every source into one inventory, in source order. YAML parsing is
/// nearly all of an audit's time (docs/BENCHMARKS.md §8), and sources are
/// independent until the inventory is complete, so contiguous runs of
/// sources (balanced by bytes) are read on up to [`MAX_READERS`] threads
/// and the partial inventories appended in order: the result is the one a
/// single thread would build, object for object.
fn read_sources(sources: &[Source]) -> Inventory {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_READERS)
        .min(sources.len());
    if threads <= 1 {
        let mut inv = Inventory::default();
        for s in sources {
            read_source(&mut inv, s);
        }
        return inv;
    }
    let total: usize = sources.iter().map(|s| s.bytes.len()).sum();
    let share = total.div_ceil(threads).max(1);
    let mut runs: Vec<&[Source]> = Vec::with_capacity(threads);
    let (mut from, mut bytes) = (0, 0);
    for (i, s) in sources.iter().enumerate() {
        bytes += s.bytes.len();
        if bytes >= share && runs.len() + 1 < threads {
            runs.push(&sources[from..=i]);
            (from, bytes) = (i + 1, 0);
        }
    }
    if from < sources.len() {
        runs.push(&sources[from..]);
    }
    let parts: Vec<Inventory> = std::thread::scope(|scope| {
        let handles: Vec<_> = runs
            .iter()
            .map(|run| {
                scope.spawn(move || {
                    let mut inv = Inventory::default();
                    for s in *run {
                        read_source(&mut inv, s);
                    }
                    inv
                })
            })
            .collect();
        handles
            .into_iter()
            // A reader that panicked would have panicked on one thread
            // too: pass the same panic on rather than inventing another.
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let mut inv = Inventory::default();
    for p in parts {
        inv.append(p);
    }
    inv
}

impl Inventory {
    /// Appends a later part of the inputs (maps: the later entry wins, as
    /// when one thread reads both).
    fn append(&mut self, p: Inventory) {
        // Destructured, so a new field cannot be forgotten here.
        let Inventory {
            mut namespaces,
            mut nodes,
            mut workloads,
            mut services,
            mut autoscalers,
            mut destination_rules,
            mut routes,
            mut inbound,
            mut sidecars,
            mut proxy_configs,
            mut mesh_defaults,
            mut service_entries,
            mut haproxy,
            mut gateway_classes,
            ignores,
            counts,
            mut findings,
            index: _,
        } = p;
        self.namespaces.append(&mut namespaces);
        self.nodes.append(&mut nodes);
        self.workloads.append(&mut workloads);
        self.services.append(&mut services);
        self.autoscalers.append(&mut autoscalers);
        self.destination_rules.append(&mut destination_rules);
        self.routes.append(&mut routes);
        self.inbound.append(&mut inbound);
        self.sidecars.append(&mut sidecars);
        self.proxy_configs.append(&mut proxy_configs);
        self.mesh_defaults.append(&mut mesh_defaults);
        self.service_entries.append(&mut service_entries);
        self.haproxy.append(&mut haproxy);
        self.gateway_classes.append(&mut gateway_classes);
        for (k, v) in ignores {
            self.ignores.entry(k).or_default().extend(v);
        }
        for (k, n) in counts.read {
            *self.counts.read.entry(k).or_default() += n;
        }
        for (k, n) in counts.skipped {
            *self.counts.skipped.entry(k).or_default() += n;
        }
        self.findings.append(&mut findings);
    }
}

/// Reads one source into the inventory.
fn read_source(inv: &mut Inventory, s: &Source) {
    let text = match std::str::from_utf8(&s.bytes) {
        Ok(t) => t,
        Err(e) => {
            let line = s.bytes[..e.valid_up_to()]
                .iter()
                .filter(|b| **b == b'\n')
                .count() as u32
                + 1;
            inv.findings.push(parse_finding(
                Pos::new(&s.name, line),
                "file",
                format!("not UTF-8 text: invalid byte at offset {}", e.valid_up_to()),
            ));
            return;
        }
    };
    match s.format {
        Format::Haproxy => {
            let (cfg, errors) = haproxy::parse(&s.name, text);
            for e in errors {
                inv.findings
                    .push(parse_finding(e.pos, "haproxy.cfg", e.message));
            }
            *inv.counts.read.entry("haproxy.cfg".into()).or_default() += 1;
            inv.haproxy.push(cfg);
        }
        Format::Yaml => {
            let stream = yaml::read_stream(&s.name, text);
            for e in stream.errors {
                inv.findings
                    .push(parse_finding(e.pos, "document", e.message));
            }
            for raw in &stream.objects {
                object(inv, raw);
            }
        }
    }
}

fn parse_finding(pos: Pos, object: &str, message: String) -> Finding {
    Finding {
        rule: crate::rules::PARSE_ERROR,
        severity: Severity::Error,
        pos,
        object: object.to_string(),
        message,
    }
}

fn src(raw: &RawObject) -> Src {
    Src {
        pos: raw.pos.clone(),
        text: match &raw.body {
            Body::Text { text, first_line } => Some((text.clone(), *first_line)),
            Body::Value(_) => None,
        },
    }
}

fn typed<T: DeserializeOwned>(inv: &mut Inventory, raw: &RawObject) -> Option<T> {
    match raw.parse::<T>() {
        Ok(v) => Some(v),
        Err(ParseError { pos, message }) => {
            inv.findings.push(parse_finding(
                pos,
                &raw.kind,
                format!("{} {}: {message}", raw.api_version, raw.kind),
            ));
            None
        }
    }
}

fn names(meta: &ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_else(|| "default".into()),
        meta.name.clone().unwrap_or_default(),
    )
}

fn count(inv: &mut Inventory, kind: &str) {
    *inv.counts.read.entry(kind.to_string()).or_default() += 1;
}

fn record_ignores(
    inv: &mut Inventory,
    kind: &str,
    meta: &ObjectMeta,
    extra: Option<&BTreeMap<String, String>>,
) {
    let (ns, name) = names(meta);
    let mut list = meta.annotations.as_ref().map(ignores).unwrap_or_default();
    if let Some(e) = extra {
        list.extend(ignores(e));
    }
    if !list.is_empty() {
        inv.ignores
            .entry(key(kind, &ns, &name))
            .or_default()
            .extend(list);
    }
}

fn group(api: &str) -> &str {
    api.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

fn object(inv: &mut Inventory, raw: &RawObject) {
    let api = raw.api_version.as_str();
    if let Some(list) = unknown_version(api, &raw.kind) {
        not_read_version(inv, raw, list);
        return;
    }
    match (group(api), api, raw.kind.as_str()) {
        (_, "v1", "Namespace") => {
            if let Some(n) = typed::<Namespace>(inv, raw) {
                count(inv, "Namespace");
                let name = n.metadata.name.clone().unwrap_or_default();
                inv.namespaces
                    .insert(name, n.metadata.labels.unwrap_or_default());
            }
        }
        (_, "v1", "Node") => {
            if let Some(n) = typed::<k8s_openapi::api::core::v1::Node>(inv, raw) {
                count(inv, "Node");
                let name = n.metadata.name.clone().unwrap_or_default();
                inv.nodes
                    .insert(name, n.metadata.labels.unwrap_or_default());
            }
        }
        (_, "apps/v1", "Deployment") => {
            if let Some(d) = typed::<Deployment>(inv, raw) {
                let spec = d.spec.unwrap_or_default();
                workload(
                    inv,
                    raw,
                    "Deployment",
                    &d.metadata,
                    spec.replicas,
                    &spec.template,
                );
            }
        }
        (_, "apps/v1", "StatefulSet") => {
            if let Some(d) = typed::<StatefulSet>(inv, raw) {
                let spec = d.spec.unwrap_or_default();
                workload(
                    inv,
                    raw,
                    "StatefulSet",
                    &d.metadata,
                    spec.replicas,
                    &spec.template,
                );
            }
        }
        (_, "apps/v1", "DaemonSet") => {
            if let Some(d) = typed::<DaemonSet>(inv, raw) {
                let spec = d.spec.unwrap_or_default();
                workload(inv, raw, "DaemonSet", &d.metadata, None, &spec.template);
            }
        }
        (_, "v1", "Pod") => {
            if let Some(p) = typed::<Pod>(inv, raw) {
                let t = PodTemplateSpec {
                    metadata: Some(p.metadata.clone()),
                    spec: p.spec,
                };
                workload(inv, raw, "Pod", &p.metadata, None, &t);
            }
        }
        (_, "v1", "Service") => {
            if let Some(s) = typed::<K8sService>(inv, raw) {
                count(inv, "Service");
                record_ignores(inv, "Service", &s.metadata, None);
                let (namespace, name) = names(&s.metadata);
                let source = src(raw);
                let written = s
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(EXPORT_TO_ANNOTATION));
                let (export_to, problems) = read_export_to(written.map_or("", String::as_str));
                if !problems.is_empty() {
                    inv.findings.push(parse_finding(
                        source.line_of(EXPORT_TO_ANNOTATION),
                        &key("Service", &namespace, &name),
                        format!(
                            "annotation {EXPORT_TO_ANNOTATION}: {} (expected namespaces separated by commas, \".\" for the Service's own or \"*\" for all; an entry that names no namespace matches none)",
                            problems.join("; ")
                        ),
                    ));
                }
                inv.services.push(Service {
                    src: source,
                    namespace,
                    name,
                    selector: s.spec.and_then(|s| s.selector).unwrap_or_default(),
                    export_to,
                });
            }
        }
        (_, "autoscaling/v1", "HorizontalPodAutoscaler") => {
            if let Some(h) = typed::<hpa1::HorizontalPodAutoscaler>(inv, raw) {
                let current = current_replicas(
                    inv,
                    raw,
                    &h.metadata,
                    h.status.as_ref().map(|s| i64::from(s.current_replicas)),
                );
                let spec = h.spec.unwrap_or_default();
                let util = spec.target_cpu_utilization_percentage.unwrap_or(80) as f64 / 100.0;
                autoscaler(
                    inv,
                    raw,
                    "HorizontalPodAutoscaler",
                    &h.metadata,
                    (spec.scale_target_ref.kind, spec.scale_target_ref.name),
                    spec.min_replicas.map(i64::from),
                    Some(spec.max_replicas as i64),
                    vec![Metric::Resource {
                        resource: "cpu".into(),
                        utilization: Some(util),
                    }],
                    // v1 has no behavior field; the controller applies
                    // the defaults to it all the same.
                    Some(super::behavior::Behavior::default()),
                    current,
                );
                if let Some(a) = inv.autoscalers.last_mut() {
                    a.dropped_fields = v2_fields_in_v1(raw);
                }
            }
        }
        // v2beta2 has the same schema as v2 for every field read here
        // (metrics, min/max, behavior); read both through v2's spec.
        (_, "autoscaling/v2" | "autoscaling/v2beta2", "HorizontalPodAutoscaler") => {
            if let Some(h) = typed::<HpaV2>(inv, raw) {
                let current = current_replicas(
                    inv,
                    raw,
                    &h.metadata,
                    h.status.and_then(|s| s.current_replicas),
                );
                let spec = h.spec;
                let mut metrics: Vec<Metric> = spec.metrics.iter().flatten().map(metric).collect();
                if metrics.is_empty() {
                    // Kubernetes' default: 80% average CPU utilisation.
                    metrics.push(Metric::Resource {
                        resource: "cpu".into(),
                        utilization: Some(0.8),
                    });
                }
                let behavior = match super::behavior::Behavior::read(spec.behavior.as_ref()) {
                    Ok(b) => Some(b),
                    Err(e) => {
                        let (ns, name) = names(&h.metadata);
                        inv.findings.push(parse_finding(
                            src(raw).line_of("behavior"),
                            &key("HorizontalPodAutoscaler", &ns, &name),
                            e,
                        ));
                        Some(super::behavior::Behavior::default())
                    }
                };
                autoscaler(
                    inv,
                    raw,
                    "HorizontalPodAutoscaler",
                    &h.metadata,
                    (spec.scale_target_ref.kind, spec.scale_target_ref.name),
                    spec.min_replicas.map(i64::from),
                    Some(spec.max_replicas as i64),
                    metrics,
                    behavior,
                    current,
                );
            }
        }
        ("keda.sh", _, "ScaledObject") => {
            if let Some(o) = typed::<Object<istio::ScaledObjectSpec>>(inv, raw) {
                let s = o.spec;
                let metrics = s.triggers.iter().map(keda_metric).collect();
                let kind = s
                    .scale_target_ref
                    .kind
                    .clone()
                    .unwrap_or_else(|| "Deployment".into());
                // KEDA writes `advanced.horizontalPodAutoscalerConfig
                // .behavior` into the HPA it creates, as is; without it the
                // HPA has none, and the controller applies Kubernetes'
                // defaults, as to any HPA (KEDA 2.17 "ScaledObject
                // specification", `advanced`).
                let written = s
                    .advanced
                    .as_ref()
                    .and_then(|a| a.horizontal_pod_autoscaler_config.as_ref())
                    .and_then(|h| h.behavior.as_ref());
                let behavior = match super::behavior::Behavior::read(written) {
                    Ok(b) => b,
                    Err(e) => {
                        let (ns, name) = names(&o.metadata);
                        inv.findings.push(parse_finding(
                            src(raw).line_of("behavior"),
                            &key("ScaledObject", &ns, &name),
                            format!("advanced.horizontalPodAutoscalerConfig.{e}"),
                        ));
                        super::behavior::Behavior::default()
                    }
                };
                // KEDA's defaults: minReplicaCount 0, maxReplicaCount 100.
                autoscaler(
                    inv,
                    raw,
                    "ScaledObject",
                    &o.metadata,
                    (kind, s.scale_target_ref.name.clone()),
                    Some(s.min_replica_count.unwrap_or(0)),
                    Some(s.max_replica_count.unwrap_or(100)),
                    metrics,
                    Some(behavior),
                    // A ScaledObject's status has no replica count (the
                    // HPA KEDA creates has, read when exported with it).
                    None,
                );
            }
        }
        ("networking.istio.io", _, "DestinationRule") => {
            if let Some(o) = typed::<Object<istio::DestinationRuleSpec>>(inv, raw) {
                destination_rule(inv, raw, o);
            }
        }
        ("networking.istio.io", _, "VirtualService") => {
            if let Some(o) = typed::<Object<istio::VirtualServiceSpec>>(inv, raw) {
                virtual_service(inv, raw, o);
            }
        }
        ("gateway.networking.k8s.io", _, "Gateway") => {
            if let Some(o) = typed::<Object<istio::GatewaySpec>>(inv, raw) {
                count(inv, "Gateway");
                record_ignores(inv, "Gateway", &o.metadata, None);
                let (namespace, name) = names(&o.metadata);
                inv.gateway_classes
                    .insert((namespace, name), o.spec.gateway_class_name);
            }
        }
        ("gateway.networking.k8s.io", _, "HTTPRoute") => {
            if let Some(o) = typed::<Object<istio::HttpRouteSpec>>(inv, raw) {
                http_route(inv, raw, o);
            }
        }
        ("networking.istio.io", _, "Sidecar") => {
            if let Some(o) = typed::<Object<istio::SidecarSpec>>(inv, raw) {
                count(inv, "Sidecar");
                record_ignores(inv, "Sidecar", &o.metadata, None);
                sidecar_egress(inv, raw, &o);
                if o.spec.inbound_connection_pool.is_some() {
                    match PoolLimits::read(o.spec.inbound_connection_pool.as_ref()) {
                        Ok(pool) => {
                            let (namespace, name) = names(&o.metadata);
                            inv.inbound.push(InboundLimit {
                                src: src(raw),
                                kind: "Sidecar",
                                namespace,
                                name,
                                selector: o.spec.workload_selector.map(|s| s.labels),
                                limit: InboundKind::Pool(pool),
                            });
                        }
                        Err(e) => inv
                            .findings
                            .push(parse_finding(raw.pos.clone(), "Sidecar", e)),
                    }
                }
            }
        }
        ("networking.istio.io", _, "ServiceEntry") => {
            if let Some(o) = typed::<Object<istio::ServiceEntrySpec>>(inv, raw) {
                service_entry(inv, raw, o);
            }
        }
        ("networking.istio.io", _, "ProxyConfig") => {
            if let Some(o) = typed::<Object<proxy::ProxyConfigSpec>>(inv, raw) {
                proxy_config(inv, raw, o);
            }
        }
        (_, "v1", "ConfigMap") => mesh_config_map(inv, raw),
        ("install.istio.io", _, "IstioOperator") => {
            if let Some(o) = typed::<Object<proxy::IstioOperatorSpec>>(inv, raw) {
                count(inv, "IstioOperator");
                let (namespace, name) = names(&o.metadata);
                if let Some(mc) = o.spec.mesh_config {
                    mesh_defaults(
                        inv,
                        raw,
                        format!("IstioOperator {namespace}/{name}"),
                        o.spec.revision.unwrap_or_default(),
                        mc,
                    );
                }
            }
        }
        ("networking.istio.io", _, "EnvoyFilter") => {
            if let Some(o) = typed::<Object<istio::EnvoyFilterSpec>>(inv, raw) {
                envoy_filter(inv, raw, o);
            }
        }
        _ => {
            *inv.counts
                .skipped
                .entry(format!("{} ({})", raw.kind, raw.api_version))
                .or_default() += 1;
        }
    }
}

fn proxy_config(inv: &mut Inventory, raw: &RawObject, o: Object<proxy::ProxyConfigSpec>) {
    count(inv, "ProxyConfig");
    let (namespace, name) = names(&o.metadata);
    let source = src(raw);
    let concurrency = match proxy::concurrency(o.spec.concurrency) {
        Ok(c) => c,
        Err(e) => {
            inv.findings.push(parse_finding(
                source.line_of("concurrency"),
                &key("ProxyConfig", &namespace, &name),
                format!("ProxyConfig spec.{e}"),
            ));
            None
        }
    };
    inv.proxy_configs.push(proxy::ProxyConfigObject {
        src: source,
        namespace,
        name,
        selector: o.spec.selector.map(|s| s.match_labels),
        concurrency,
    });
}

/// The `istio` (or `istio-<revision>`) ConfigMap's `mesh` key: the mesh
/// config istiod reads. Any other ConfigMap is skipped, as before.
fn mesh_config_map(inv: &mut Inventory, raw: &RawObject) {
    #[derive(serde::Deserialize, Default)]
    struct Named {
        #[serde(default)]
        metadata: ObjectMeta,
        #[serde(default)]
        data: BTreeMap<String, String>,
    }
    let named = raw.parse::<Named>().ok();
    let revision = named
        .as_ref()
        .and_then(|n| n.metadata.name.as_deref())
        .and_then(proxy::mesh_config_map_revision);
    let (Some(n), Some(revision)) = (named, revision) else {
        *inv.counts
            .skipped
            .entry(format!("{} ({})", raw.kind, raw.api_version))
            .or_default() += 1;
        return;
    };
    let Some(text) = n.data.get("mesh") else {
        *inv.counts
            .skipped
            .entry(format!("{} ({})", raw.kind, raw.api_version))
            .or_default() += 1;
        return;
    };
    count(inv, "ConfigMap");
    let (namespace, name) = names(&n.metadata);
    let what = format!("ConfigMap {namespace}/{name}");
    match serde_saphyr::from_str_with_options::<proxy::MeshConfig>(text, yaml::options()) {
        Ok(mc) => mesh_defaults(inv, raw, what, revision, mc),
        Err(e) => inv.findings.push(parse_finding(
            src(raw).line_of("mesh"),
            &key("ConfigMap", &namespace, &name),
            format!("data.mesh (Istio mesh config): {e}"),
        )),
    }
}

fn mesh_defaults(
    inv: &mut Inventory,
    raw: &RawObject,
    what: String,
    revision: String,
    mc: proxy::MeshConfig,
) {
    let source = src(raw);
    let written = mc.default_config.and_then(|d| d.concurrency);
    let concurrency = proxy::concurrency(written).unwrap_or_else(|e| {
        inv.findings.push(parse_finding(
            source.line_of("concurrency"),
            &what,
            format!("meshConfig.defaultConfig.{e}"),
        ));
        None
    });
    inv.mesh_defaults.push(proxy::MeshDefaults {
        src: source,
        what,
        revision,
        root_namespace: mc.root_namespace.filter(|r| !r.is_empty()),
        concurrency,
    });
}

fn workload(
    inv: &mut Inventory,
    raw: &RawObject,
    kind: &str,
    meta: &ObjectMeta,
    replicas: Option<i32>,
    t: &PodTemplateSpec,
) {
    count(inv, kind);
    let pod_ann = t.metadata.as_ref().and_then(|m| m.annotations.clone());
    record_ignores(inv, kind, meta, pod_ann.as_ref());
    let (namespace, name) = names(meta);
    inv.workloads.push(workload::from_template(
        src(raw),
        kind,
        namespace,
        name,
        replicas,
        t,
    ));
}

fn utilization(t: &hpa2::MetricTarget) -> Option<f64> {
    (t.type_ == "Utilization")
        .then_some(t.average_utilization.map(|u| u as f64 / 100.0))
        .flatten()
}

fn metric(m: &hpa2::MetricSpec) -> Metric {
    if let Some(r) = &m.resource {
        return Metric::Resource {
            resource: r.name.clone(),
            utilization: utilization(&r.target),
        };
    }
    if let Some(c) = &m.container_resource {
        return Metric::ContainerResource {
            container: c.container.clone(),
            resource: c.name.clone(),
            utilization: utilization(&c.target),
        };
    }
    if let Some(p) = &m.pods {
        return Metric::Pods(p.metric.name.clone());
    }
    if let Some(o) = &m.object {
        return Metric::Object(o.metric.name.clone());
    }
    if let Some(e) = &m.external {
        return Metric::External(e.metric.name.clone());
    }
    Metric::External(m.type_.clone())
}

fn keda_metric(t: &istio::KedaTrigger) -> Metric {
    let meta = |k: &str| {
        t.metadata.get(k).map(|v| {
            v.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string())
        })
    };
    if t.kind == "cpu" || t.kind == "memory" {
        let kind = t
            .metric_type
            .clone()
            .or_else(|| meta("type"))
            .unwrap_or_else(|| "Utilization".into());
        let util = (kind == "Utilization")
            .then(|| {
                meta("value")
                    .and_then(|v| v.parse::<f64>().ok())
                    .map(|v| v / 100.0)
            })
            .flatten();
        return match meta("containerName").filter(|c| !c.is_empty()) {
            Some(container) => Metric::ContainerResource {
                container,
                resource: t.kind.clone(),
                utilization: util,
            },
            None => Metric::Resource {
                resource: t.kind.clone(),
                utilization: util,
            },
        };
    }
    Metric::External(format!("KEDA {} scaler", t.kind))
}

#[allow(clippy::too_many_arguments)]
fn autoscaler(
    inv: &mut Inventory,
    raw: &RawObject,
    kind: &'static str,
    meta: &ObjectMeta,
    target: (String, String),
    min: Option<i64>,
    max: Option<i64>,
    metrics: Vec<Metric>,
    behavior: Option<super::behavior::Behavior>,
    current: Option<u32>,
) {
    count(inv, kind);
    record_ignores(inv, kind, meta, None);
    let (namespace, name) = names(meta);
    let min = min.unwrap_or(1).clamp(0, u32::MAX as i64) as u32;
    let max = max.unwrap_or(min as i64).clamp(0, u32::MAX as i64) as u32;
    if max < min {
        inv.findings.push(parse_finding(
            raw.pos.clone(),
            &key(kind, &namespace, &name),
            format!("maxReplicas {max} is below minReplicas {min}"),
        ));
    }
    inv.autoscalers.push(Autoscaler {
        src: src(raw),
        kind,
        namespace,
        name,
        target,
        min,
        max: max.max(min),
        metrics,
        behavior,
        dropped_fields: Vec::new(),
        current,
    });
}

/// `spec` fields of `autoscaling/v2` an `autoscaling/v1` HPA may carry by
/// mistake; v1's schema has none of them, so the API server drops them.
#[derive(Default, serde::Deserialize)]
struct V2FieldsInV1 {
    #[serde(default)]
    spec: V2FieldsSpec,
}

#[derive(Default, serde::Deserialize)]
struct V2FieldsSpec {
    #[serde(default)]
    metrics: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    behavior: Option<serde::de::IgnoredAny>,
}

/// Which of v2's `metrics` and `behavior` an `autoscaling/v1` HPA writes.
fn v2_fields_in_v1(raw: &RawObject) -> Vec<&'static str> {
    let Ok(v) = raw.parse::<V2FieldsInV1>() else {
        return Vec::new();
    };
    [
        ("metrics", v.spec.metrics.is_some()),
        ("behavior", v.spec.behavior.is_some()),
    ]
    .into_iter()
    .filter_map(|(f, written)| written.then_some(f))
    .collect()
}

/// An `autoscaling/v2` (or `v2beta2`) HPA: k8s-openapi's spec, and of its
/// status only `currentReplicas`, so that a status field the audit does
/// not use (conditions, current metrics, which differ between v2beta2 and
/// v2) can never make the HPA unreadable.
#[derive(serde::Deserialize)]
struct HpaV2 {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: hpa2::HorizontalPodAutoscalerSpec,
    #[serde(default)]
    status: Option<ReplicaStatus>,
}

/// `HorizontalPodAutoscalerStatus`, the one field read.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReplicaStatus {
    #[serde(default)]
    current_replicas: Option<i64>,
}

/// An HPA's `status.currentReplicas` as evidence of the count it runs at:
/// 0 (a status written before the controller's first sync, or a target
/// scaled to zero) is none; a negative count is an SB001 at its line.
fn current_replicas(
    inv: &mut Inventory,
    raw: &RawObject,
    meta: &ObjectMeta,
    n: Option<i64>,
) -> Option<u32> {
    match n? {
        n if n < 0 => {
            let (ns, name) = names(meta);
            inv.findings.push(parse_finding(
                src(raw).line_of("currentReplicas"),
                &key("HorizontalPodAutoscaler", &ns, &name),
                format!("status.currentReplicas: expected a count of 0 or more, got {n}"),
            ));
            None
        }
        0 => None,
        n => Some(n.min(i64::from(u32::MAX)) as u32),
    }
}

fn destination_rule(inv: &mut Inventory, raw: &RawObject, o: Object<istio::DestinationRuleSpec>) {
    count(inv, "DestinationRule");
    record_ignores(inv, "DestinationRule", &o.metadata, None);
    let (namespace, name) = names(&o.metadata);
    let policy = o.spec.traffic_policy.clone().unwrap_or_default();
    let read = |p: Option<&istio::ConnectionPool>| PoolLimits::read(p);
    let pool = match read(policy.connection_pool.as_ref()) {
        Ok(p) => p,
        Err(e) => {
            inv.findings.push(parse_finding(
                src(raw).line_of(e.split(':').next().unwrap_or("")),
                &key("DestinationRule", &namespace, &name),
                e,
            ));
            return;
        }
    };
    let mut subsets = Vec::new();
    for s in &o.spec.subsets {
        if let Some(tp) = s
            .traffic_policy
            .as_ref()
            .filter(|tp| tp.connection_pool.is_some())
        {
            match read(tp.connection_pool.as_ref()) {
                Ok(p) => subsets.push((s.name.clone(), p)),
                Err(e) => inv.findings.push(parse_finding(
                    raw.pos.clone(),
                    &key("DestinationRule", &namespace, &name),
                    format!("subset {}: {e}", s.name),
                )),
            }
        }
    }
    if o.spec.subsets.len() > super::MAX_SUBSETS {
        inv.findings.push(parse_finding(
            raw.pos.clone(),
            &key("DestinationRule", &namespace, &name),
            format!(
                "{} subsets, more than the {} the audit reads from one DestinationRule; the first {} are read",
                o.spec.subsets.len(),
                super::MAX_SUBSETS,
                super::MAX_SUBSETS
            ),
        ));
    }
    let subset_labels = o
        .spec
        .subsets
        .iter()
        .take(super::MAX_SUBSETS)
        .map(|s| (s.name.clone(), s.labels.clone()))
        .collect();
    let outlier = policy.outlier_detection.as_ref().map(|od| Outlier {
        max_ejection_percent: od.max_ejection_percent.unwrap_or(10).clamp(0, 100) as f64,
        min_health_percent: od.min_health_percent.unwrap_or(0).clamp(0, 100) as f64,
    });
    let failover = policy
        .load_balancer
        .as_ref()
        .and_then(|lb| lb.locality_lb_setting.as_ref())
        .filter(|l| l.enabled != Some(false))
        .map(|l| super::LocalityFailover {
            pairs: l
                .failover
                .iter()
                .take(super::MAX_FAILOVER)
                .map(|f| (f.from.clone(), f.to.clone()))
                .collect(),
            priority: l
                .failover_priority
                .iter()
                .take(super::MAX_FAILOVER)
                .cloned()
                .collect(),
        });
    inv.destination_rules.push(DestinationRule {
        src: src(raw),
        namespace,
        name,
        host: o.spec.host.clone(),
        export_to: o.spec.export_to.clone(),
        pool,
        subsets,
        subset_labels,
        outlier,
        failover,
    });
}

fn duration_field(
    inv: &mut Inventory,
    s: &Src,
    object: &str,
    field: &str,
    v: Option<&String>,
) -> Option<Duration> {
    let v = v?;
    match parse_go_duration(v) {
        Ok(d) => Some(d),
        Err(e) => {
            inv.findings.push(parse_finding(
                s.line_of(field),
                object,
                format!("{field}: {e}"),
            ));
            None
        }
    }
}

fn virtual_service(inv: &mut Inventory, raw: &RawObject, o: Object<istio::VirtualServiceSpec>) {
    count(inv, "VirtualService");
    record_ignores(inv, "VirtualService", &o.metadata, None);
    let (namespace, name) = names(&o.metadata);
    let k = key("VirtualService", &namespace, &name);
    let s = src(raw);
    let at_gateway = !o.spec.gateways.is_empty() && o.spec.gateways.iter().any(|g| g != "mesh");
    let mut routes = Vec::new();
    for (index, r) in o.spec.http.iter().enumerate() {
        let timeout = duration_field(inv, &s, &k, "timeout", r.timeout.as_ref());
        let retry = match &r.retries {
            None => RetryLayer::istio_default(),
            Some(rt) => {
                let per_try =
                    duration_field(inv, &s, &k, "perTryTimeout", rt.per_try_timeout.as_ref());
                match RetryLayer::istio(rt.attempts, rt.retry_on.as_deref(), per_try) {
                    Ok(l) => l,
                    Err(e) => {
                        inv.findings
                            .push(parse_finding(s.line_of("attempts"), &k, e));
                        RetryLayer::istio_default()
                    }
                }
            }
        };
        let pos = if r.retries.is_some() {
            s.line_of("retries")
        } else {
            s.pos.clone()
        };
        let fault = match r.fault.as_ref().map(super::fault::Fault::read) {
            Some(Ok(f)) => f,
            Some(Err(e)) => {
                inv.findings.push(parse_finding(
                    s.line_of("fault"),
                    &k,
                    format!("http[{index}].{e}"),
                ));
                None
            }
            None => None,
        };
        routes.push(HttpRouteInfo {
            index,
            // Istio reads a destination host as its own config does: a
            // short name in the VirtualService's namespace, a dotted host
            // as written (Istio 1.27 "Virtual Service", `Destination.host`).
            destinations: r
                .route
                .iter()
                .filter(|d| !d.destination.host.is_empty())
                .map(|d| super::config_host(&d.destination.host, &namespace))
                .collect(),
            subsets: r
                .route
                .iter()
                .filter(|d| !d.destination.host.is_empty())
                .map(|d| d.destination.subset.clone())
                .collect(),
            timeout,
            retry,
            pos,
            catch_all: r.matches.is_empty(),
            fault,
            gateway_api: None,
        });
    }
    // Read as the destinations are: Istio resolves every host of its own
    // config by the same rule (Istio 1.27 "Virtual Service", `hosts`).
    let hosts = o
        .spec
        .hosts
        .iter()
        .map(|h| super::config_host(h, &namespace))
        .collect();
    inv.routes.push(RouteObject {
        src: s,
        kind: "VirtualService",
        namespace,
        name,
        hosts,
        at_gateway,
        export_to: o
            .spec
            .export_to
            .iter()
            .take(workload::MAX_CALLS)
            .cloned()
            .collect(),
        routes,
        gateways: o
            .spec
            .gateways
            .iter()
            .take(workload::MAX_CALLS)
            .cloned()
            .collect(),
        created: o.metadata.creation_timestamp.clone(),
        parents: Vec::new(),
    });
}

fn http_route(inv: &mut Inventory, raw: &RawObject, o: Object<istio::HttpRouteSpec>) {
    count(inv, "HTTPRoute");
    record_ignores(inv, "HTTPRoute", &o.metadata, None);
    let (namespace, name) = names(&o.metadata);
    let k = key("HTTPRoute", &namespace, &name);
    let s = src(raw);
    let mut routes = Vec::new();
    for (index, r) in o.spec.rules.iter().enumerate() {
        let t = r.timeouts.clone().unwrap_or_default();
        // `0s` disables a Gateway API timeout (GEP-1742).
        let timeout =
            duration_field(inv, &s, &k, "request", t.request.as_ref()).filter(|d| !d.is_zero());
        let per_try = duration_field(inv, &s, &k, "backendRequest", t.backend_request.as_ref())
            .filter(|d| !d.is_zero());
        if let (Some(req), Some(be)) = (timeout, per_try)
            && be > req
        {
            inv.findings.push(parse_finding(
                s.line_of("backendRequest"),
                &k,
                format!(
                    "rules[{index}].timeouts.backendRequest {} must be no more than timeouts.request {} (Gateway API HTTPRouteTimeouts)",
                    crate::units::show(be),
                    crate::units::show(req)
                ),
            ));
        }
        let backoff = r
            .retry
            .as_ref()
            .and_then(|rt| duration_field(inv, &s, &k, "backoff", rt.backoff.as_ref()));
        // Who runs the route decides what an unset retry means; known only
        // once every Gateway is read (`gateway_api::resolve`).
        let spec = super::gateway_api::RuleSpec {
            retry: r
                .retry
                .as_ref()
                .map(|rt| (rt.attempts, rt.codes.clone(), backoff)),
            request: timeout,
            backend_request: per_try,
        };
        routes.push(HttpRouteInfo {
            index,
            destinations: r
                .backend_refs
                .iter()
                // A backendRef names a Service in its namespace (default:
                // the route's), never a DNS name.
                .map(|b| {
                    let ns = b.namespace.as_deref().unwrap_or(&namespace);
                    format!("{}.{ns}.svc.{}", b.name, super::CLUSTER_DOMAIN)
                })
                .collect(),
            subsets: vec![None; r.backend_refs.len()],
            timeout,
            retry: RetryLayer::none("HTTPRoute (implementation not yet known)"),
            pos: s.pos.clone(),
            // Gateway API picks a rule by match specificity, not order.
            catch_all: false,
            fault: None,
            gateway_api: Some(spec),
        });
    }
    let parents: Vec<(String, String, String)> = o
        .spec
        .parent_refs
        .iter()
        .take(workload::MAX_CALLS)
        .map(|p| {
            let kind = p.kind.clone().unwrap_or_else(|| "Gateway".into());
            let ns = p.namespace.clone().unwrap_or_else(|| namespace.clone());
            (kind, ns, p.name.clone())
        })
        .collect();
    // Attached only to Services (GAMMA), the route is applied by the
    // callers' sidecars, as a mesh VirtualService is.
    let at_gateway = parents.is_empty() || parents.iter().any(|p| p.0 != "Service");
    inv.routes.push(RouteObject {
        src: s,
        kind: "HTTPRoute",
        namespace,
        name,
        hosts: o.spec.hostnames.clone(),
        at_gateway,
        export_to: Vec::new(),
        routes,
        gateways: Vec::new(),
        created: o.metadata.creation_timestamp.clone(),
        parents,
    });
}

/// Depth-bounded search for a key in a JSON value.
fn find<'a>(v: &'a serde_json::Value, key: &str, depth: usize) -> Option<&'a serde_json::Value> {
    if depth > yaml::MAX_DEPTH {
        return None;
    }
    match v {
        serde_json::Value::Object(m) => m
            .get(key)
            .or_else(|| m.values().find_map(|x| find(x, key, depth + 1))),
        serde_json::Value::Array(a) => a.iter().find_map(|x| find(x, key, depth + 1)),
        _ => None,
    }
}

fn num(v: Option<&serde_json::Value>) -> Option<f64> {
    v.and_then(|v| {
        v.as_f64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    })
}

fn envoy_filter(inv: &mut Inventory, raw: &RawObject, o: Object<istio::EnvoyFilterSpec>) {
    count(inv, "EnvoyFilter");
    record_ignores(inv, "EnvoyFilter", &o.metadata, None);
    let (namespace, name) = names(&o.metadata);
    let selector = o.spec.workload_selector.clone().map(|s| s.labels);
    for patch in &o.spec.config_patches {
        let context = find(patch, "context", 0)
            .and_then(|c| c.as_str())
            .unwrap_or("ANY");
        if context != "SIDECAR_INBOUND" {
            continue;
        }
        let filter = patch
            .get("patch")
            .and_then(|p| p.get("value"))
            .and_then(|v| v.get("name"))
            .and_then(|n| n.as_str())
            .unwrap_or("");
        let limit = match filter {
            "envoy.filters.http.local_ratelimit" => {
                let Some(tb) = find(patch, "token_bucket", 0) else {
                    continue;
                };
                let per_fill = num(tb.get("tokens_per_fill")).unwrap_or(1.0);
                let interval = tb
                    .get("fill_interval")
                    .and_then(|v| v.as_str())
                    .and_then(|s| parse_go_duration(s).ok());
                match interval.filter(|d| !d.is_zero()) {
                    Some(d) => InboundKind::RateLimit(per_fill / d.as_secs_f64()),
                    None => {
                        inv.findings.push(parse_finding(
                            src(raw).line_of("fill_interval"),
                            &key("EnvoyFilter", &namespace, &name),
                            "token_bucket.fill_interval: expected a duration such as \"1s\"".into(),
                        ));
                        continue;
                    }
                }
            }
            "envoy.filters.http.adaptive_concurrency" => InboundKind::Adaptive(
                num(find(patch, "max_concurrency_limit", 0))
                    .unwrap_or(1000.0)
                    .max(1.0) as u64,
            ),
            _ => match num(find(patch, "max_requests", 0)) {
                Some(n) if find(patch, "circuit_breakers", 0).is_some() && n >= 1.0 => {
                    InboundKind::MaxRequests(n as u64)
                }
                _ => continue,
            },
        };
        inv.inbound.push(InboundLimit {
            src: src(raw),
            kind: "EnvoyFilter",
            namespace: namespace.clone(),
            name: name.clone(),
            selector: selector.clone(),
            limit,
        });
    }
}

/// A Sidecar's `egress[].hosts`, each `namespace/dnsName`; a host without
/// the `/` is an SB001 (Istio rejects it), at most
/// [`workload::MAX_CALLS`] kept.
fn sidecar_egress(inv: &mut Inventory, raw: &RawObject, o: &Object<istio::SidecarSpec>) {
    let (namespace, name) = names(&o.metadata);
    let k = key("Sidecar", &namespace, &name);
    let s = src(raw);
    let mut hosts = Vec::new();
    for h in o.spec.egress.iter().flat_map(|e| &e.hosts) {
        match h.split_once('/') {
            Some((ns, dns)) if !ns.is_empty() && !dns.is_empty() && !dns.contains('/') => {
                hosts.push((ns.to_string(), dns.to_ascii_lowercase()))
            }
            _ => inv.findings.push(parse_finding(
                s.line_of("hosts"),
                &k,
                format!(
                    "egress[].hosts: expected namespace/dnsName such as \"./reviews.prod.svc.cluster.local\" or \"istio-system/*\", got {h:?}"
                ),
            )),
        }
    }
    hosts.truncate(workload::MAX_CALLS);
    if hosts.is_empty() {
        return;
    }
    inv.sidecars.push(SidecarEgress {
        src: s,
        namespace,
        name,
        selector: o.spec.workload_selector.as_ref().map(|w| w.labels.clone()),
        hosts,
    });
}

fn service_entry(inv: &mut Inventory, raw: &RawObject, o: Object<istio::ServiceEntrySpec>) {
    count(inv, "ServiceEntry");
    record_ignores(inv, "ServiceEntry", &o.metadata, None);
    let (namespace, name) = names(&o.metadata);
    let internal = match o.spec.location.as_deref() {
        None | Some("MESH_EXTERNAL") => false,
        Some("MESH_INTERNAL") => true,
        Some(other) => {
            inv.findings.push(parse_finding(
                src(raw).line_of("location"),
                &key("ServiceEntry", &namespace, &name),
                format!("location: expected MESH_EXTERNAL or MESH_INTERNAL, got {other:?}"),
            ));
            false
        }
    };
    let mut hosts = o.spec.hosts;
    hosts.truncate(workload::MAX_CALLS);
    let mut endpoints: Vec<String> = o
        .spec
        .endpoints
        .into_iter()
        .map(|e| e.address)
        .filter(|a| !a.is_empty())
        .collect();
    endpoints.truncate(workload::MAX_CALLS);
    let mut export_to = o.spec.export_to;
    export_to.truncate(workload::MAX_CALLS);
    inv.service_entries.push(ServiceEntry {
        src: src(raw),
        namespace,
        name,
        hosts,
        internal,
        selector: o.spec.workload_selector.map(|w| w.labels),
        endpoints,
        export_to,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many small sources, some broken, some annotated, a namespace
    /// written twice: the threaded read equals the one-thread read.
    #[test]
    fn reading_on_threads_builds_the_same_inventory_as_one_thread() {
        let sources: Vec<Source> = (0..40)
            .map(|i| Source {
                name: format!("f{i}.yaml").into(),
                format: Format::Yaml,
                bytes: match i % 4 {
                    0 => format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop, labels: {{n: \"{i}\"}}}}\n"),
                    1 => format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d{i}, namespace: shop, annotations: {{ignore-check.stormbreak.io/SB105: \"r{i}\"}}}}\nspec: {{replicas: {i}, selector: {{matchLabels: {{app: d}}}}, template: {{metadata: {{labels: {{app: d}}}}, spec: {{containers: [{{name: a, image: a}}]}}}}}}\n"),
                    2 => "kind: [broken\n".to_string(),
                    _ => format!("apiVersion: example.com/v1\nkind: Widget{}\nmetadata: {{name: w}}\n", i % 3),
                }
                .into_bytes(),
            })
            .collect();
        let mut one = Inventory::default();
        for s in &sources {
            read_source(&mut one, s);
        }
        let many = read_sources(&sources);
        let names = |inv: &Inventory| -> Vec<(String, u32)> {
            inv.workloads
                .iter()
                .map(|w| (w.name.clone(), w.replicas))
                .collect()
        };
        assert_eq!(names(&many), names(&one));
        assert_eq!(many.workloads.len(), 10);
        assert_eq!(many.namespaces, one.namespaces);
        assert_eq!(many.namespaces["shop"]["n"], "36", "the last one wins");
        assert_eq!(many.ignores, one.ignores);
        assert_eq!(many.counts.read, one.counts.read);
        assert_eq!(many.counts.skipped, one.counts.skipped);
        let msgs = |inv: &Inventory| -> Vec<String> {
            inv.findings
                .iter()
                .map(|f| format!("{}:{} {}", f.pos.file, f.pos.line, f.message))
                .collect()
        };
        assert_eq!(msgs(&many), msgs(&one));
        assert!(many.findings.len() >= 10, "{}", many.findings.len());
    }
}
