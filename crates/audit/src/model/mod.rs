//! The inventory: every object the audit understands, typed, with its
//! position; unknown kinds counted; objects that fail to parse reported.

pub mod behavior;
pub mod calls;
pub mod fault;
pub mod gateway_api;
pub mod istio;
mod load;
pub mod pool;
pub mod proxy;
pub mod retry;
pub mod vs_order;
pub mod workload;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

pub use load::load;
pub use pool::{Limit, PoolLimits};
pub use retry::{FailureClass, Redispatch, RetryLayer};
pub use workload::{ContainerInfo, SidecarInfo, Workload};

use crate::finding::{Finding, Pos};
use crate::inputs::haproxy;

/// Where an object came from, able to point at one of its fields.
#[derive(Debug, Clone)]
pub struct Src {
    /// The object's first line.
    pub pos: Pos,
    /// Its document text and the file line of the text's first line.
    pub text: Option<(Arc<str>, u32)>,
}

impl Src {
    /// The line of the first `key:` in the object, the key plain or
    /// quoted (`"key":`, as annotation keys with a `/` often are); its own
    /// line if absent.
    pub fn line_of(&self, key: &str) -> Pos {
        let keyed = |t: &str| {
            let quoted = |q: char| {
                t.strip_prefix(q)
                    .and_then(|r| r.strip_prefix(key))
                    .and_then(|r| r.strip_prefix(q))
            };
            t.strip_prefix(key)
                .or_else(|| quoted('"'))
                .or_else(|| quoted('\''))
                .is_some_and(|r| r.starts_with(':'))
        };
        if let Some((text, first)) = &self.text {
            for (i, line) in text.lines().enumerate() {
                let t = line.trim_start().trim_start_matches("- ").trim_start();
                if keyed(t) {
                    return Pos::new(&self.pos.file, first + i as u32);
                }
            }
        }
        self.pos.clone()
    }
}

/// A suppression: rule ID and reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Ignore {
    /// Rule ID.
    pub rule: String,
    /// Reason.
    pub reason: String,
}

/// A Kubernetes Service.
#[derive(Debug, Clone)]
pub struct Service {
    /// Source.
    pub src: Src,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Pod selector.
    pub selector: BTreeMap<String, String>,
    /// The `networking.istio.io/exportTo` annotation's entries, trimmed
    /// (empty: not set, every namespace; at most [`workload::MAX_CALLS`]).
    pub export_to: Vec<String>,
}

/// The annotation by which a Kubernetes Service says which namespaces'
/// proxies see it (Istio 1.27 "Resource Annotations",
/// `networking.istio.io/exportTo`).
pub const EXPORT_TO_ANNOTATION: &str = "networking.istio.io/exportTo";

impl Service {
    /// The Service's FQDN, `name.ns.svc.cluster.local`: its host in the
    /// mesh's registry.
    pub fn fqdn(&self) -> String {
        format!("{}.{}.svc.{CLUSTER_DOMAIN}", self.name, self.namespace)
    }

    /// Is the Service in the registry of a proxy in `client_ns`? (Its
    /// `networking.istio.io/exportTo` annotation, read as [`exported`].)
    pub fn visible_to(&self, client_ns: &str) -> bool {
        exported(&self.export_to, &self.namespace, client_ns)
    }
}

/// What an autoscaler metric watches.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// Pod-level `Resource` (sum of all containers' usage over requests).
    Resource {
        /// `cpu` or `memory`.
        resource: String,
        /// Target utilisation as a fraction, when the target is a utilisation.
        utilization: Option<f64>,
    },
    /// `ContainerResource` of one container.
    ContainerResource {
        /// Container name.
        container: String,
        /// `cpu` or `memory`.
        resource: String,
        /// Target utilisation as a fraction.
        utilization: Option<f64>,
    },
    /// A per-pod custom metric (requests per pod, sidecar saturation…).
    Pods(String),
    /// An object metric.
    Object(String),
    /// An external metric or a KEDA scaler (queue length, rate…).
    External(String),
}

impl Metric {
    /// Short description.
    pub fn describe(&self) -> String {
        let pct = |u: &Option<f64>| {
            u.map(|u| format!(" at {}%", crate::units::trim(u * 100.0)))
                .unwrap_or_default()
        };
        match self {
            Metric::Resource {
                resource,
                utilization,
            } => format!("pod-level Resource {resource}{}", pct(utilization)),
            Metric::ContainerResource {
                container,
                resource,
                utilization,
            } => {
                format!(
                    "ContainerResource {resource} of container {container:?}{}",
                    pct(utilization)
                )
            }
            Metric::Pods(n) => format!("Pods metric {n:?}"),
            Metric::Object(n) => format!("Object metric {n:?}"),
            Metric::External(n) => format!("External metric {n:?}"),
        }
    }
}

/// An HPA (autoscaling/v1 or v2) or a KEDA ScaledObject.
#[derive(Debug, Clone)]
pub struct Autoscaler {
    /// Source.
    pub src: Src,
    /// `HorizontalPodAutoscaler` or `ScaledObject`.
    pub kind: &'static str,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Target kind and name.
    pub target: (String, String),
    /// minReplicas.
    pub min: u32,
    /// maxReplicas.
    pub max: u32,
    /// Metrics (the HPA scales to the largest of their proposals).
    pub metrics: Vec<Metric>,
    /// HPA `behavior`, Kubernetes' defaults filled in: an `autoscaling/v2`
    /// (or `v2beta2`) HPA's `spec.behavior`, a KEDA ScaledObject's
    /// `spec.advanced.horizontalPodAutoscalerConfig.behavior` (which KEDA
    /// passes to the HPA it creates), the defaults for `autoscaling/v1`.
    /// None: no behavior is known.
    pub behavior: Option<behavior::Behavior>,
    /// Fields written in the object that its API version does not have,
    /// so the API server drops them (an `autoscaling/v1` HPA's `metrics`
    /// or `behavior`).
    pub dropped_fields: Vec<&'static str>,
    /// An HPA's `status.currentReplicas`, when the object carries a status
    /// (an export of the live object, `kubectl get -o yaml`) and it is
    /// above 0: the count the controller last saw the target running at.
    pub current: Option<u32>,
}

/// Outlier detection, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Outlier {
    /// `maxEjectionPercent` (default 10).
    pub max_ejection_percent: f64,
    /// `minHealthPercent` (default 0).
    pub min_health_percent: f64,
}

/// A DestinationRule.
#[derive(Debug, Clone)]
pub struct DestinationRule {
    /// Source.
    pub src: Src,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Host as written.
    pub host: String,
    /// `exportTo` as written (empty: exported to every namespace).
    pub export_to: Vec<String>,
    /// Host-level pool.
    pub pool: PoolLimits,
    /// Subset pools.
    pub subsets: Vec<(String, PoolLimits)>,
    /// Every subset's name and the pod labels that pick its endpoints
    /// (Istio 1.27 "Destination Rule", `Subset.labels`), at most
    /// [`MAX_SUBSETS`], whether or not the subset overrides the pool.
    pub subset_labels: Vec<(String, BTreeMap<String, String>)>,
    /// Outlier detection.
    pub outlier: Option<Outlier>,
    /// Locality failover (`localityLbSetting`, when present and not
    /// `enabled: false`; its `failover` and `failoverPriority` may be empty:
    /// zones then fail over within their region, Istio's default priority).
    pub failover: Option<LocalityFailover>,
}

/// At most this many subsets are kept per DestinationRule, with a
/// finding when there are more (a bound on hostile input).
pub const MAX_SUBSETS: usize = 64;

/// At most this many `failover` pairs and `failoverPriority` labels are
/// kept per DestinationRule (a bound on hostile input).
pub const MAX_FAILOVER: usize = 64;

/// Locality failover of a DestinationRule, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalityFailover {
    /// `failover` pairs (from region, to region).
    pub pairs: Vec<(String, String)>,
    /// `failoverPriority` labels.
    pub priority: Vec<String>,
}

/// One HTTP route of a VirtualService or a Gateway API HTTPRoute rule.
#[derive(Debug, Clone)]
pub struct HttpRouteInfo {
    /// Index in its object.
    pub index: usize,
    /// Destination hosts, resolved as the proxy names them: a
    /// VirtualService `destination.host` by [`config_host`] in the
    /// VirtualService's namespace (a short name is
    /// `name.<vs-ns>.svc.cluster.local`, a dotted host is taken as
    /// written); an HTTPRoute `backendRef` as its Service's FQDN. Looked up
    /// exactly ([`Inventory::service_for_fqdn`]), never DNS-expanded.
    pub destinations: Vec<String>,
    /// The subset of each destination (VirtualService `destination.subset`).
    pub subsets: Vec<Option<String>>,
    /// Route (overall) timeout.
    pub timeout: Option<Duration>,
    /// The retry layer this route applies.
    pub retry: RetryLayer,
    /// Where the route is written.
    pub pos: Pos,
    /// True when the route has no match condition: it takes every
    /// request that reaches it, so no route after it (in its object or
    /// in one merged after it) is ever used.
    pub catch_all: bool,
    /// Faults the calling proxy injects on this route (a VirtualService's
    /// `fault`).
    pub fault: Option<fault::Fault>,
    /// A Gateway API rule as written, until the implementation that runs
    /// it is known ([`gateway_api::resolve`]); None for a VirtualService.
    pub gateway_api: Option<gateway_api::RuleSpec>,
}

/// A VirtualService or Gateway API HTTPRoute.
#[derive(Debug, Clone)]
pub struct RouteObject {
    /// Source.
    pub src: Src,
    /// `VirtualService` or `HTTPRoute`.
    pub kind: &'static str,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// A VirtualService's `hosts` resolved by [`config_host`] in its
    /// namespace (a short name is `name.<vs-ns>.svc.cluster.local`, a
    /// dotted host is taken as written), as its destinations are; an
    /// HTTPRoute's `hostnames` as written.
    pub hosts: Vec<String>,
    /// Bound to a gateway (edge) rather than the mesh.
    pub at_gateway: bool,
    /// `exportTo` as written (empty: every namespace; HTTPRoute has none).
    pub export_to: Vec<String>,
    /// The routes.
    pub routes: Vec<HttpRouteInfo>,
    /// A VirtualService's `gateways` as written (empty: `mesh`).
    pub gateways: Vec<String>,
    /// `metadata.creationTimestamp` (absent in most manifests): Istio
    /// orders VirtualServices by it, then by name and namespace.
    pub created: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// An HTTPRoute's `parentRefs` as (kind, namespace, name), defaults
    /// applied.
    pub parents: Vec<(String, String, String)>,
}

impl RouteObject {
    /// Is the route object visible to a proxy (sidecar or gateway) in
    /// `client_ns`? (VirtualService `exportTo`, see [`exported`].)
    pub fn visible_to(&self, client_ns: &str) -> bool {
        exported(&self.export_to, &self.namespace, client_ns)
    }
}

/// What bounds a pod's inbound side, as written.
#[derive(Debug, Clone, PartialEq)]
pub enum InboundKind {
    /// A Sidecar resource's `inboundConnectionPool`.
    Pool(PoolLimits),
    /// An EnvoyFilter local rate limit: tokens per second per pod.
    RateLimit(f64),
    /// An EnvoyFilter adaptive concurrency filter: its `max_concurrency_limit`.
    Adaptive(u64),
    /// An EnvoyFilter inbound cluster circuit breaker `max_requests`.
    MaxRequests(u64),
}

/// A Sidecar resource's inbound pool, or an EnvoyFilter's inbound limit.
#[derive(Debug, Clone)]
pub struct InboundLimit {
    /// Source.
    pub src: Src,
    /// `Sidecar` or `EnvoyFilter`.
    pub kind: &'static str,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Workload selector (None: the whole namespace).
    pub selector: Option<BTreeMap<String, String>>,
    /// The limit.
    pub limit: InboundKind,
}

/// A Sidecar resource's egress hosts: what the selected proxies can reach.
#[derive(Debug, Clone)]
pub struct SidecarEgress {
    /// Source.
    pub src: Src,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Workload selector (None: the namespace's default Sidecar).
    pub selector: Option<BTreeMap<String, String>>,
    /// `egress[].hosts` as (namespace part, dnsName), at most
    /// [`workload::MAX_CALLS`] of them.
    pub hosts: Vec<(String, String)>,
}

/// A ServiceEntry: hosts added to the registry, and the Services whose
/// pods serve them (when the configs show it).
#[derive(Debug, Clone)]
pub struct ServiceEntry {
    /// Source.
    pub src: Src,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `hosts` as written (at most [`workload::MAX_CALLS`]).
    pub hosts: Vec<String>,
    /// `location: MESH_INTERNAL`.
    pub internal: bool,
    /// `workloadSelector` labels (MESH_INTERNAL).
    pub selector: Option<BTreeMap<String, String>>,
    /// `endpoints[].address` values (at most [`workload::MAX_CALLS`]).
    pub endpoints: Vec<String>,
    /// `exportTo` as written (empty: every namespace; at most
    /// [`workload::MAX_CALLS`]).
    pub export_to: Vec<String>,
}

impl ServiceEntry {
    /// Are the entry's hosts visible to a proxy in `client_ns`? (`exportTo`,
    /// see [`exported`].)
    pub fn visible_to(&self, client_ns: &str) -> bool {
        exported(&self.export_to, &self.namespace, client_ns)
    }
}

/// Counts by kind.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Counts {
    /// Objects understood, by kind.
    pub read: BTreeMap<String, usize>,
    /// Objects skipped (unknown kinds and CRDs), by kind.
    pub skipped: BTreeMap<String, usize>,
}

/// Everything understood.
#[derive(Debug, Default)]
pub struct Inventory {
    /// Namespace labels.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// Node labels, by node name (their region and zone place the pods
    /// pinned to them).
    pub nodes: BTreeMap<String, BTreeMap<String, String>>,
    /// Deployments, StatefulSets, DaemonSets, bare Pods.
    pub workloads: Vec<Workload>,
    /// Services.
    pub services: Vec<Service>,
    /// HPAs and ScaledObjects.
    pub autoscalers: Vec<Autoscaler>,
    /// DestinationRules.
    pub destination_rules: Vec<DestinationRule>,
    /// VirtualServices and HTTPRoutes.
    pub routes: Vec<RouteObject>,
    /// Sidecar and EnvoyFilter inbound limits.
    pub inbound: Vec<InboundLimit>,
    /// Sidecar resources with egress hosts.
    pub sidecars: Vec<SidecarEgress>,
    /// ProxyConfig resources that set `concurrency`.
    pub proxy_configs: Vec<proxy::ProxyConfigObject>,
    /// Mesh configs' proxy defaults (the `istio` ConfigMap, IstioOperators).
    pub mesh_defaults: Vec<proxy::MeshDefaults>,
    /// ServiceEntries.
    pub service_entries: Vec<ServiceEntry>,
    /// HAProxy configs.
    pub haproxy: Vec<haproxy::Config>,
    /// Gateway API Gateways: (namespace, name) → `gatewayClassName`.
    pub gateway_classes: BTreeMap<(String, String), String>,
    /// Suppressions by object key (`Kind namespace/name`).
    pub ignores: BTreeMap<String, Vec<Ignore>>,
    /// Counts.
    pub counts: Counts,
    /// Parse findings (SB001).
    pub findings: Vec<Finding>,
    /// Lookup tables, built by [`Inventory::reindex`] (so lookups stay
    /// linear in the inventory, not quadratic).
    pub index: Index,
}

/// Lookup tables over an [`Inventory`].
#[derive(Debug, Default)]
pub struct Index {
    services: HashMap<String, usize>,
    dr_exact: HashMap<String, Vec<usize>>,
    dr_wild: Vec<(String, usize)>,
    workloads_by_ns: HashMap<String, Vec<usize>>,
    /// Workloads by (namespace, pod label key, value): a selector's
    /// candidates without a scan of its namespace (a namespace of 27 000
    /// Services made that scan quadratic).
    workloads_by_label: HashMap<(String, String, String), Vec<usize>>,
    /// Workloads by (namespace, kind, name): an autoscaler's target.
    workloads_by_name: HashMap<(String, String, String), usize>,
    inbound_by_ns: HashMap<String, Vec<usize>>,
    sidecars_by_ns: HashMap<String, Vec<usize>>,
    autoscalers: HashMap<(String, String, String), Vec<usize>>,
}

/// The cluster DNS domain services are resolved in.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// Istio's root configuration namespace (`meshConfig.rootNamespace`,
/// default `istio-system`): the last step of the DestinationRule lookup.
pub const ROOT_NAMESPACE: &str = "istio-system";

/// Istio's `exportTo` visibility, the same for DestinationRules,
/// VirtualServices and ServiceEntries: is an object in namespace `own`
/// with this `exportTo` visible to a proxy in `client_ns`? Empty or `*`
/// means every namespace, `.` the object's own, a name that namespace;
/// `~` (or anything else) exports to nobody else. Istio 1.27 reference,
/// field `exportTo` of "Destination Rule", "Virtual Service" and "Service
/// Entry" (<https://istio.io/v1.27/docs/reference/config/networking/virtual-service/#VirtualService>).
pub fn exported(export_to: &[String], own: &str, client_ns: &str) -> bool {
    export_to.is_empty()
        || export_to
            .iter()
            .any(|e| e == "*" || (e == "." && own == client_ns) || e == client_ns)
}

/// Reads a `networking.istio.io/exportTo` annotation value: entries
/// separated by commas, each trimmed, as Istio's Kubernetes registry reads
/// it. Returns the entries (at most [`workload::MAX_CALLS`]; an empty value
/// is no annotation) and, for each entry that is neither `.`, `*`, `~` nor
/// a namespace name (an RFC 1123 label), what is wrong with it. Such an
/// entry is kept: Istio keeps it too, and it matches no namespace, so a
/// value with no valid entry hides the Service from every namespace.
pub fn read_export_to(value: &str) -> (Vec<String>, Vec<String>) {
    let mut entries = Vec::new();
    let mut problems = Vec::new();
    if value.trim().is_empty() {
        return (entries, problems);
    }
    for e in value.split(',').take(workload::MAX_CALLS) {
        let e = e.trim();
        if e.is_empty() {
            problems.push("an empty entry (two commas, or one at an end)".to_string());
        } else if !matches!(e, "." | "*" | "~") && !is_namespace_name(e) {
            problems.push(format!(
                "{e:?} is not \".\", \"*\", \"~\" or a namespace name (lower-case letters, digits and '-', at most 63)"
            ));
        }
        entries.push(e.to_string());
    }
    (entries, problems)
}

/// Is `s` a valid namespace name (an RFC 1123 label: 1–63 lower-case
/// letters, digits and `-`, starting and ending with a letter or digit)?
fn is_namespace_name(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=63).contains(&b.len())
        && b.first().is_some_and(edge)
        && b.last().is_some_and(edge)
        && b.iter().all(|c| edge(c) || *c == b'-')
}

impl DestinationRule {
    /// Is the rule visible to a client in `client_ns`? ([`exported`].)
    pub fn visible_to(&self, client_ns: &str) -> bool {
        exported(&self.export_to, &self.namespace, client_ns)
    }
}

/// An object's key in findings and suppressions.
pub fn key(kind: &str, namespace: &str, name: &str) -> String {
    format!("{kind} {namespace}/{name}")
}

/// Does a selector match these labels? An empty selector matches nothing
/// (a Service without a selector has no pods of its own).
pub fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

impl Inventory {
    /// Builds the lookup tables; call after changing the object lists.
    pub fn reindex(&mut self) {
        let mut ix = Index::default();
        for (i, s) in self.services.iter().enumerate() {
            ix.services.entry(s.fqdn()).or_insert(i);
        }
        for (i, dr) in self.destination_rules.iter().enumerate() {
            let h = config_host(&dr.host, &dr.namespace);
            match h.strip_prefix('*') {
                Some(suffix) => ix.dr_wild.push((suffix.to_string(), i)),
                None => ix.dr_exact.entry(h).or_default().push(i),
            }
        }
        for (i, w) in self.workloads.iter().enumerate() {
            ix.workloads_by_ns
                .entry(w.namespace.clone())
                .or_default()
                .push(i);
            ix.workloads_by_name
                .entry((w.namespace.clone(), w.kind.clone(), w.name.clone()))
                .or_insert(i);
            for (k, v) in &w.pod_labels {
                ix.workloads_by_label
                    .entry((w.namespace.clone(), k.clone(), v.clone()))
                    .or_default()
                    .push(i);
            }
        }
        for (i, l) in self.inbound.iter().enumerate() {
            ix.inbound_by_ns
                .entry(l.namespace.clone())
                .or_default()
                .push(i);
        }
        for (i, sc) in self.sidecars.iter().enumerate() {
            ix.sidecars_by_ns
                .entry(sc.namespace.clone())
                .or_default()
                .push(i);
        }
        for (i, a) in self.autoscalers.iter().enumerate() {
            ix.autoscalers
                .entry((a.namespace.clone(), a.target.0.clone(), a.target.1.clone()))
                .or_default()
                .push(i);
        }
        self.index = ix;
    }

    /// Workloads in a namespace, as indices.
    /// Its length is counted as work ([`crate::inputs::work`]): a caller
    /// that scans a namespace per object shows as quadratic in a test.
    pub fn workloads_in(&self, ns: &str) -> &[usize] {
        let all = self
            .index
            .workloads_by_ns
            .get(ns)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        crate::inputs::work::lookups(all.len() as u64 + 1);
        all
    }

    /// The workload of this kind and name in `ns` (the first given, when
    /// duplicates were reported).
    pub fn workload(&self, ns: &str, kind: &str, name: &str) -> Option<&Workload> {
        crate::inputs::work::lookups(1);
        self.index
            .workloads_by_name
            .get(&(ns.to_owned(), kind.to_owned(), name.to_owned()))
            .map(|&i| &self.workloads[i])
    }

    /// Sidecar resources with egress hosts in a namespace.
    pub fn sidecars_in(&self, ns: &str) -> impl Iterator<Item = &SidecarEgress> {
        self.index
            .sidecars_by_ns
            .get(ns)
            .into_iter()
            .flatten()
            .map(|i| &self.sidecars[*i])
    }

    /// Sidecar and EnvoyFilter inbound limits in a namespace.
    pub fn inbound_in(&self, ns: &str) -> impl Iterator<Item = &InboundLimit> {
        self.index
            .inbound_by_ns
            .get(ns)
            .into_iter()
            .flatten()
            .map(|i| &self.inbound[*i])
    }

    /// The workloads a Service selects.
    pub fn backing(&self, svc: &Service) -> Vec<&Workload> {
        self.selected(&svc.namespace, &svc.selector)
            .into_iter()
            .map(|i| &self.workloads[i])
            .collect()
    }

    /// Indices of the workloads in `ns` whose pod labels `selector`
    /// selects ([`selects`]), in inventory order: the candidates of the
    /// selector's rarest pair, each checked whole. Its steps are counted
    /// ([`crate::inputs::work`]), so a test can bound its growth.
    pub fn selected(&self, ns: &str, selector: &BTreeMap<String, String>) -> Vec<usize> {
        let key = |(k, v): (&String, &String)| (ns.to_owned(), k.clone(), v.clone());
        let Some(candidates) = selector
            .iter()
            .map(|pair| {
                self.index
                    .workloads_by_label
                    .get(&key(pair))
                    .map_or(&[][..], Vec::as_slice)
            })
            .min_by_key(|c| c.len())
        else {
            // An empty selector selects nothing.
            return Vec::new();
        };
        crate::inputs::work::lookups(candidates.len() as u64 + 1);
        candidates
            .iter()
            .copied()
            .filter(|&i| selects(selector, &self.workloads[i].pod_labels))
            .collect()
    }

    /// The autoscalers targeting a workload.
    pub fn autoscalers_of(&self, w: &Workload) -> Vec<&Autoscaler> {
        self.index
            .autoscalers
            .get(&(w.namespace.clone(), w.kind.clone(), w.name.clone()))
            .into_iter()
            .flatten()
            .map(|i| &self.autoscalers[*i])
            .collect()
    }

    /// The Service a host an application calls resolves to, by the
    /// Kubernetes DNS search path ([`fqdn`]: a short name is in `from_ns`;
    /// `name.ns`, `name.ns.svc` and the FQDN are accepted). Not for hosts
    /// written in Istio config, which Istio resolves by [`config_host`].
    pub fn service_for_host(&self, host: &str, from_ns: &str) -> Option<&Service> {
        self.index
            .services
            .get(&fqdn(host, from_ns))
            .map(|i| &self.services[*i])
    }

    /// The Service whose FQDN (`name.ns.svc.cluster.local`) is exactly
    /// `host` (case-insensitive): how a resolved VirtualService or
    /// HTTPRoute destination is looked up.
    pub fn service_for_fqdn(&self, host: &str) -> Option<&Service> {
        let found = self.index.services.get(host).or_else(|| {
            self.index
                .services
                .get(&host.trim_end_matches('.').to_ascii_lowercase())
        });
        found.map(|i| &self.services[*i])
    }

    /// The registry host a call to `called` from a pod in `from_ns` lands
    /// on in the caller's proxy, which is what a VirtualService host must
    /// equal to route the call: the FQDN of the Service the caller's DNS
    /// names ([`Inventory::service_for_host`]: `cart`, `cart.shop`,
    /// `cart.shop.svc` all land on `cart.shop.svc.cluster.local`, whose
    /// virtual host answers to those names), else the host as written (a
    /// ServiceEntry host, or one only a VirtualService names). Istio
    /// attaches a VirtualService to a Service only when one of its hosts,
    /// read by [`config_host`], is the Service's hostname, so a
    /// VirtualService host `reviews.prod` routes no call to Service
    /// `reviews` in `prod` (Istio 1.27 "Virtual Service", `hosts`).
    pub fn registry_host(&self, called: &str, from_ns: &str) -> String {
        match self.service_for_host(called, from_ns) {
            Some(s) => s.fqdn(),
            None => called.trim_end_matches('.').to_ascii_lowercase(),
        }
    }

    /// Does a VirtualService host (as resolved, [`RouteObject::hosts`])
    /// name a host calls can land on ([`Inventory::registry_host`])? A
    /// dotted host that the Kubernetes DNS path would complete to a
    /// Service's FQDN but that is not that FQDN (`reviews.prod`) does not:
    /// the calls land on the Service's own host, which the VirtualService
    /// does not name.
    pub fn vs_host_applies(&self, host: &str) -> bool {
        // A resolved host has a dot (or is a wildcard), so the namespace
        // the DNS path would complete a short name in is never used.
        self.registry_host(host, "") == host
    }

    /// The DestinationRule a client in `client_ns` applies to a service,
    /// in Istio's lookup order: the client's namespace, then the service's
    /// namespace, then the root namespace ([`ROOT_NAMESPACE`]); the first
    /// namespace holding a rule that is exported to the client and whose
    /// host matches wins. Within a namespace an exact host beats the
    /// longest matching wildcard. `None` for the client means it is not
    /// known: the lookup starts at the service's namespace.
    pub fn destination_rule_for(
        &self,
        svc: &Service,
        client_ns: Option<&str>,
    ) -> Option<&DestinationRule> {
        self.destination_rule_for_host(&svc.fqdn(), &svc.namespace, client_ns)
    }

    /// [`Inventory::destination_rule_for`] for any host: `target` is the
    /// FQDN the caller's proxy names the cluster by (a Service's, or a
    /// ServiceEntry host), `home` the namespace that defines it.
    pub fn destination_rule_for_host(
        &self,
        target: &str,
        home: &str,
        client_ns: Option<&str>,
    ) -> Option<&DestinationRule> {
        // The client's visibility is what exportTo filters; an unknown
        // client is taken to sit in the service's namespace.
        let viewer = client_ns.unwrap_or(home);
        let exact = self
            .index
            .dr_exact
            .get(target)
            .into_iter()
            .flatten()
            .map(|i| (*i, usize::MAX));
        let wild = self
            .index
            .dr_wild
            .iter()
            .filter(|(suffix, _)| target.ends_with(suffix.as_str()))
            .map(|(suffix, i)| (*i, suffix.len()));
        let candidates: Vec<(usize, usize)> = exact
            .chain(wild)
            .filter(|(i, _)| self.destination_rules[*i].visible_to(viewer))
            .collect();
        let order = [client_ns, Some(home), Some(ROOT_NAMESPACE)];
        for ns in order.into_iter().flatten() {
            let best = candidates
                .iter()
                .filter(|(i, _)| self.destination_rules[*i].namespace == ns)
                .max_by_key(|(i, score)| (*score, std::cmp::Reverse(*i)));
            if let Some((i, _)) = best {
                return Some(&self.destination_rules[*i]);
            }
        }
        None
    }
}

/// A host written in Istio config (a DestinationRule's `host`), as Istio
/// resolves it: only a name without a dot is short for
/// `name.<namespace>.svc.cluster.local`; a dotted name (`reviews.prod`,
/// `cart.internal`) and a wildcard are taken as written — istio/istio
/// `ResolveShortnameToFQDN` (pkg/config/model.go). Unlike [`fqdn`], which
/// follows the Kubernetes DNS search path a workload's own address uses.
pub fn config_host(host: &str, ns: &str) -> String {
    if host.contains('.') || host.starts_with('*') {
        host.to_ascii_lowercase()
    } else {
        fqdn(host, ns)
    }
}

/// A host as a workload's DNS lookup resolves it (the Kubernetes search
/// path of a pod in `ns`): a name without a dot is
/// `name.<ns>.svc.cluster.local`; `name.ns` and `name.ns.svc` are completed
/// to the FQDN; wildcards are kept. Hosts an application calls, and the
/// names a sidecar's routes answer to, follow it; hosts written in Istio
/// config follow [`config_host`].
pub fn fqdn(host: &str, ns: &str) -> String {
    if host.starts_with('*') {
        return host.to_string();
    }
    let parts: Vec<&str> = host.split('.').collect();
    match parts.len() {
        1 => format!("{host}.{ns}.svc.{CLUSTER_DOMAIN}"),
        2 => format!("{host}.svc.{CLUSTER_DOMAIN}"),
        3 if parts[2] == "svc" => format!("{host}.{CLUSTER_DOMAIN}"),
        _ => host.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_hosts_expand_only_names_without_a_dot() {
        assert_eq!(
            config_host("reviews", "bookinfo"),
            "reviews.bookinfo.svc.cluster.local"
        );
        assert_eq!(config_host("reviews.prod", "x"), "reviews.prod");
        assert_eq!(config_host("Cart.Internal", "x"), "cart.internal");
        assert_eq!(
            config_host("*.prod.svc.cluster.local", "x"),
            "*.prod.svc.cluster.local"
        );
    }

    #[test]
    fn export_to_annotation_values() {
        let ok = |v: &str| {
            let (e, p) = read_export_to(v);
            assert!(p.is_empty(), "{v:?}: {p:?}");
            e
        };
        assert!(ok("").is_empty());
        assert!(ok("  ").is_empty());
        assert_eq!(ok(" . , web,*,~,a-1"), [".", "web", "*", "~", "a-1"]);
        assert!(exported(&ok("."), "shop", "shop"));
        assert!(!exported(&ok("."), "shop", "web"));
        assert!(!exported(&ok("~"), "shop", "shop"));
        for bad in ["a,,b", "web,", "-web", "web-", "Web", "w_b", "a/b"] {
            let (e, p) = read_export_to(bad);
            assert_eq!(p.len(), 1, "{bad:?}: {p:?}");
            assert!(!e.is_empty(), "kept, so it still hides: {bad:?}");
        }
        let (e, _) = read_export_to(&"x,".repeat(1000));
        assert_eq!(e.len(), workload::MAX_CALLS, "bounded");
    }

    #[test]
    fn line_of_finds_plain_and_quoted_keys() {
        let src = Src {
            pos: Pos::new(&"f.yaml".into(), 10),
            text: Some((
                "metadata:\n  annotations:\n    \"a.io/x\": \"1\"\n    'b.io/y': 2\n    c: 3\n"
                    .into(),
                10,
            )),
        };
        assert_eq!(src.line_of("a.io/x").line, 12);
        assert_eq!(src.line_of("b.io/y").line, 13);
        assert_eq!(src.line_of("c").line, 14);
        assert_eq!(src.line_of("a.io").line, 10, "a prefix is not the key");
    }

    #[test]
    fn istio_host_resolution() {
        assert_eq!(
            fqdn("reviews", "bookinfo"),
            "reviews.bookinfo.svc.cluster.local"
        );
        assert_eq!(fqdn("reviews.prod", "x"), "reviews.prod.svc.cluster.local");
        assert_eq!(
            fqdn("reviews.prod.svc.cluster.local", "x"),
            "reviews.prod.svc.cluster.local"
        );
        assert_eq!(
            fqdn("*.prod.svc.cluster.local", "x"),
            "*.prod.svc.cluster.local"
        );
    }
}
