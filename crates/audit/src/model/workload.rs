//! Workloads: pods' containers, native sidecars, Istio injection and the
//! proxy's CPU and worker threads.
//!
//! - Native sidecars are `initContainers` with `restartPolicy: Always`
//!   (Kubernetes v1.33 "Sidecar Containers",
//!   <https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/>);
//!   their requests count in the pod's.
//! - Injection (Istio 1.27 "Installing the Sidecar", "Controlling the
//!   injection policy", <https://istio.io/v1.27/docs/setup/additional-setup/sidecar-injection/>):
//!   disabled if either the namespace label `istio-injection` or the pod
//!   label (or legacy annotation) `sidecar.istio.io/inject` disables it;
//!   enabled if either enables it or the namespace has `istio.io/rev`; a
//!   pod that already has an `istio-proxy` container is injected. When the
//!   Namespace is not among the inputs, a pod is taken as injected (said
//!   so, an assumption) if its own annotations configure an Istio proxy or
//!   an Istio object of its namespace configures its sidecar.
//! - Proxy CPU as the injection template writes it (istio/istio 1.27,
//!   `manifests/charts/istio-control/istio-discovery/files/injection-template.yaml`,
//!   template `resources`,
//!   <https://github.com/istio/istio/blob/1.27.0/manifests/charts/istio-control/istio-discovery/files/injection-template.yaml>):
//!   any of `sidecar.istio.io/proxyCPU`, `proxyMemory`, `proxyCPULimit`,
//!   `proxyMemoryLimit` (Istio 1.27 "Resource Annotations",
//!   <https://istio.io/v1.27/docs/reference/config/annotations/>) replaces
//!   the chart defaults `global.proxy.resources` (requests 100m, limits
//!   2000m) whole, so `proxyCPU` alone leaves no CPU limit; without any,
//!   the chart defaults, marked as defaults.
//! - Worker threads: `proxy.istio.io/config` `concurrency`, else a
//!   ProxyConfig or the mesh config ([`super::proxy`]); unset, Istio's
//!   agent takes the CPU limit rounded up (`ISTIO_CPU_LIMIT`,
//!   pilot/cmd/pilot-agent/config/config.go), and with no limit the
//!   node's allocatable CPU (Kubernetes v1.33 "Downward API", fallback for
//!   resource limits): a number no config holds. They bound the proxy's
//!   usable cores.
//! - App workers (not in any Kubernetes field): the pod annotation
//!   `stormbreak.io/workers`, else an environment variable among
//!   [`WORKER_ENV`], else `--workers N` / `-w N` and `--threads N` in the
//!   arguments or `GUNICORN_CMD_ARGS`, split at spaces (a shell line is one
//!   argument); both: workers × threads, as gunicorn runs them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};

use super::{Ignore, Src};
use crate::units::parse_cpu;

/// Istio's chart default proxy CPU request, in cores.
pub const DEFAULT_PROXY_CPU_REQUEST: f64 = 0.1;
/// Istio's chart default proxy CPU limit, in cores.
pub const DEFAULT_PROXY_CPU_LIMIT: f64 = 2.0;
/// Environment variables read as the app's worker count.
pub const WORKER_ENV: [&str; 8] = [
    "WEB_CONCURRENCY",
    "GUNICORN_WORKERS",
    "WORKERS",
    "MAX_WORKERS",
    "PUMA_MAX_THREADS",
    "RAILS_MAX_THREADS",
    "THREADS",
    "UVICORN_WORKERS",
];
/// The annotation that states the app's concurrency when nothing else does.
pub const WORKERS_ANNOTATION: &str = "stormbreak.io/workers";
/// Pod annotation naming the hosts a workload calls (comma-separated), for
/// calls its environment does not show.
pub const CALLS_ANNOTATION: &str = "stormbreak.io/calls";
/// At most this many called hosts are kept per workload (a bound on
/// hostile input; real pods name a handful).
pub const MAX_CALLS: usize = 64;
/// Prefix of suppression annotations: `ignore-check.stormbreak.io/SB101: "reason"`.
pub const IGNORE_PREFIX: &str = "ignore-check.stormbreak.io/";

/// One container.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerInfo {
    /// Name.
    pub name: String,
    /// CPU request, cores.
    pub cpu_request: Option<f64>,
    /// CPU limit, cores.
    pub cpu_limit: Option<f64>,
    /// Resources (`cpu`, `memory`) with a request, written or implied:
    /// Kubernetes sets a missing request to the limit when only the
    /// limit is written ("Resource Management for Pods and Containers").
    pub requested: Vec<String>,
    /// Concurrent requests it can work on, and where that was read.
    pub workers: Option<(u32, String)>,
    /// A native sidecar (`initContainers` with `restartPolicy: Always`).
    pub native_sidecar: bool,
}

/// The Istio proxy of a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct SidecarInfo {
    /// CPU request, cores (None: none, so no pod-level CPU utilisation).
    pub cpu_request: Option<f64>,
    /// CPU limit, cores (None: no limit).
    pub cpu_limit: Option<f64>,
    /// Resources (`cpu`, `memory`) the proxy requests, written or implied.
    pub requested: Vec<String>,
    /// Worker threads as configured (`concurrency`; 0: one per core of
    /// the node). None: not configured, so Istio derives them from the CPU
    /// limit, rounded up, or from the node's cores when there is none.
    pub concurrency: Option<u32>,
    /// Where the numbers come from.
    pub source: String,
    /// True when the CPU numbers are the chart defaults.
    pub defaults: bool,
    /// Why injection is assumed, when no label or container states it.
    pub inferred: Option<String>,
}

impl SidecarInfo {
    /// Cores the proxy can use: its CPU limit, capped by its worker
    /// threads. Unset concurrency follows the limit (`ISTIO_CPU_LIMIT`,
    /// rounded up: never below it); with neither a limit nor a thread
    /// count, Envoy runs a worker per core of a node the configs do not
    /// size, so None.
    pub fn usable_cores(&self) -> Option<(f64, String)> {
        match (self.cpu_limit, self.concurrency.filter(|c| *c > 0)) {
            (Some(l), Some(c)) if (c as f64) < l => Some((
                c as f64,
                format!(
                    "concurrency {c} worker threads (below the CPU limit {})",
                    crate::units::trim(l)
                ),
            )),
            (Some(l), _) => Some((l, format!("CPU limit {} cores", crate::units::trim(l)))),
            (None, Some(c)) => Some((
                c as f64,
                format!("concurrency {c} worker threads (no CPU limit)"),
            )),
            (None, None) => None,
        }
    }

    /// True when an assumption decides the proxy's numbers: the chart
    /// defaults (a cluster may install others) or an inferred injection.
    pub fn assumed(&self) -> bool {
        self.defaults || self.inferred.is_some()
    }
}

/// A Deployment, StatefulSet, DaemonSet or bare Pod.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Source.
    pub src: Src,
    /// Kind.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.replicas` (default 1; a DaemonSet: 1 per node, counted 1).
    pub replicas: u32,
    /// Whether `spec.replicas` is written (not the default): with an
    /// autoscaler, the count the workload was applied at — or, in an
    /// export of a live object, the count the autoscaler last set.
    pub replicas_written: bool,
    /// Pod template labels.
    pub pod_labels: BTreeMap<String, String>,
    /// Pod template annotations.
    pub pod_annotations: BTreeMap<String, String>,
    /// App containers and native sidecars other than the proxy.
    pub containers: Vec<ContainerInfo>,
    /// An explicit `istio-proxy` container (kube-inject output, native sidecar).
    pub proxy_container: Option<ContainerInfo>,
    /// The proxy, once injection is decided ([`super::Inventory`] load).
    pub sidecar: Option<SidecarInfo>,
    /// Hosts the workload calls, as written: from env values that look like
    /// an address (`http://reviews:9080`, `reviews.ns.svc:9080`) and the
    /// [`CALLS_ANNOTATION`]; resolved against Services by
    /// [`super::Inventory::callers`].
    pub calls: Vec<String>,
    /// The region its pods are pinned to (`nodeSelector` or a required
    /// node affinity `In` with one value on `topology.kubernetes.io/region`,
    /// or the labels of the Node named by `nodeName` / `nodeSelector`
    /// `kubernetes.io/hostname`), the locality Istio's failover names.
    pub region: Option<String>,
    /// The zone its pods are pinned to, read the same way from
    /// `topology.kubernetes.io/zone`.
    pub zone: Option<String>,
    /// The node its pods are pinned to (`nodeName`, or `nodeSelector`
    /// `kubernetes.io/hostname`), whose labels may give region and zone.
    pub node: Option<String>,
    /// The earliest a new pod can be ready, in seconds, from its app
    /// container's probes (the larger `initialDelaySeconds` of its startup
    /// and readiness probes; no probe is run, so no success, before it),
    /// and where that was read. None: no probe states a delay.
    pub ready_after: Option<(u32, String)>,
    /// Problems reading annotations, reported as SB001.
    pub problems: Vec<String>,
}

impl Workload {
    /// The key used in findings and suppressions.
    pub fn key(&self) -> String {
        super::key(&self.kind, &self.namespace, &self.name)
    }

    /// The main app container: the first one that is not a sidecar.
    pub fn app(&self) -> Option<&ContainerInfo> {
        self.containers
            .iter()
            .find(|c| !c.native_sidecar)
            .or(self.containers.first())
    }

    /// Sum of CPU requests over every container the HPA's pod-level
    /// Resource metric divides by (app containers, native sidecars, the
    /// proxy); None if any is missing (then the HPA cannot compute a
    /// utilisation at all).
    pub fn pod_cpu_requests(&self) -> Option<f64> {
        let mut sum = 0.0;
        for c in &self.containers {
            sum += c.cpu_request?;
        }
        if let Some(s) = &self.sidecar {
            sum += s.cpu_request?;
        }
        Some(sum)
    }
}

/// Suppression annotations of an object.
pub fn ignores(annotations: &BTreeMap<String, String>) -> Vec<Ignore> {
    annotations
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix(IGNORE_PREFIX).map(|rule| Ignore {
                rule: rule.to_string(),
                reason: v.trim().to_string(),
            })
        })
        .collect()
}

fn cpu(c: &Container, which: &str) -> Result<Option<f64>, String> {
    let map = c.resources.as_ref().and_then(|r| {
        if which == "requests" {
            r.requests.as_ref()
        } else {
            r.limits.as_ref()
        }
    });
    match map.and_then(|m| m.get("cpu")) {
        None => Ok(None),
        Some(q) => parse_cpu(&q.0)
            .map(Some)
            .map_err(|e| format!("container {:?} resources.{which}.cpu: {e}", c.name)),
    }
}

/// The resources a container requests, counting a limit without a
/// request as a request (Kubernetes defaults the one to the other).
fn requested(c: &Container) -> Vec<String> {
    let Some(r) = c.resources.as_ref() else {
        return Vec::new();
    };
    ["cpu", "memory"]
        .into_iter()
        .filter(|name| {
            [r.requests.as_ref(), r.limits.as_ref()]
                .into_iter()
                .flatten()
                .any(|m| m.contains_key(*name))
        })
        .map(String::from)
        .collect()
}

/// The value of the first of `flags` among `tokens` (`--flag N`,
/// `--flag=N`); `min:max` (Puma's `--threads 1:16`) gives the max.
fn flag_value(tokens: &[&str], flags: &[&str]) -> Option<(u32, String)> {
    for (i, a) in tokens.iter().enumerate() {
        for flag in flags {
            let v = if let Some(v) = a.strip_prefix(&format!("{flag}=")) {
                Some(v)
            } else if a == flag {
                tokens.get(i + 1).copied()
            } else {
                None
            };
            let Some(v) = v.map(|v| v.trim_matches(|c| c == '"' || c == '\'')) else {
                continue;
            };
            let max = v.rsplit_once(':').map_or(v, |(_, m)| m);
            if let Some(n) = max.parse::<u32>().ok().filter(|n| *n > 0) {
                return Some((n, format!("{flag} {v}")));
            }
        }
    }
    None
}

fn workers_of(c: &Container) -> Option<(u32, String)> {
    for e in c.env.iter().flatten() {
        if WORKER_ENV.contains(&e.name.as_str())
            && let Some(n) = e
                .value
                .as_deref()
                .and_then(|v| v.trim().parse::<u32>().ok())
                .filter(|n| *n > 0)
        {
            return Some((n, format!("env {}={n} of container {:?}", e.name, c.name)));
        }
    }
    // Each argument split at spaces: a shell line (`sh -c "exec gunicorn
    // --workers 8 app:app"`) or `GUNICORN_CMD_ARGS` is one string.
    let cmd_args = c
        .env
        .iter()
        .flatten()
        .filter(|e| e.name == "GUNICORN_CMD_ARGS")
        .filter_map(|e| e.value.as_deref());
    let tokens: Vec<&str> = c
        .command
        .iter()
        .flatten()
        .chain(c.args.iter().flatten())
        .map(String::as_str)
        .chain(cmd_args)
        .flat_map(str::split_whitespace)
        .collect();
    let workers = flag_value(&tokens, &["--workers", "-w"]);
    let threads = flag_value(&tokens, &["--threads"]);
    let (n, how) = match (workers, threads) {
        // Gunicorn runs `threads` threads in each worker process (more than
        // one thread selects its gthread worker): workers × threads.
        (Some((w, wh)), Some((t, th))) => (w.saturating_mul(t), format!("{wh} × {th}")),
        (Some(one), None) | (None, Some(one)) => one,
        (None, None) => return None,
    };
    Some((n, format!("argument {how} of container {:?}", c.name)))
}

/// The well-known node label of a region.
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
/// The well-known node label of a zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The well-known node label of a node's name.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The value a pod spec pins `label` to: its `nodeSelector`, or a single
/// required node-affinity term with an `In` expression of one value (several
/// terms are ORed, several values are a choice: no single locality).
fn pinned(spec: &k8s_openapi::api::core::v1::PodSpec, label: &str) -> Option<String> {
    if let Some(r) = spec.node_selector.as_ref().and_then(|m| m.get(label)) {
        return Some(r.clone());
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    // One term only: several terms are ORed, so no single region.
    let [term] = terms.as_slice() else {
        return None;
    };
    term.match_expressions.iter().flatten().find_map(|e| {
        match (e.key.as_str(), e.operator.as_str(), e.values.as_deref()) {
            (k, "In", Some([v])) if k == label => Some(v.clone()),
            _ => None,
        }
    })
}

/// The host of an env value that looks like an address: a URL
/// (`scheme://host[:port][/path]`) or `host:port`; a bare word is not taken
/// (`info`, `true`), so a value only counts when it is plainly an address.
pub fn address_host(v: &str) -> Option<String> {
    let v = v.trim();
    let (rest, url) = match v.split_once("://") {
        Some((_, r)) => (r, true),
        None => (v, false),
    };
    let authority = rest.split('/').next()?;
    let authority = authority.rsplit('@').next()?;
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    let port_ok = port.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        && host.bytes().next().is_some_and(|b| b.is_ascii_alphabetic());
    (host_ok && (url || port_ok)).then(|| host.to_ascii_lowercase())
}

fn container(c: &Container, native: bool, problems: &mut Vec<String>) -> ContainerInfo {
    let mut get = |w| {
        cpu(c, w).unwrap_or_else(|e| {
            problems.push(e);
            None
        })
    };
    ContainerInfo {
        name: c.name.clone(),
        cpu_request: get("requests"),
        cpu_limit: get("limits"),
        requested: requested(c),
        workers: workers_of(c),
        native_sidecar: native,
    }
}

/// Reads a pod template into a workload (injection decided later).
pub fn from_template(
    src: Src,
    kind: &str,
    namespace: String,
    name: String,
    replicas: Option<i32>,
    t: &PodTemplateSpec,
) -> Workload {
    let meta = t.metadata.clone().unwrap_or_default();
    let pod_labels = meta.labels.unwrap_or_default();
    let pod_annotations = meta.annotations.unwrap_or_default();
    let mut problems = Vec::new();
    let mut containers = Vec::new();
    let mut proxy_container = None;
    if let Some(spec) = &t.spec {
        let natives = spec
            .init_containers
            .iter()
            .flatten()
            .filter(|c| c.restart_policy.as_deref() == Some("Always"))
            .map(|c| (c, true));
        for (c, native) in spec.containers.iter().map(|c| (c, false)).chain(natives) {
            let info = container(c, native, &mut problems);
            if c.name == "istio-proxy" {
                proxy_container = Some(info);
            } else {
                containers.push(info);
            }
        }
    }
    if let Some(v) = pod_annotations.get(WORKERS_ANNOTATION) {
        match v.trim().parse::<u32>() {
            Ok(n) if n > 0 => {
                if let Some(app) = containers.iter_mut().find(|c| !c.native_sidecar) {
                    app.workers = Some((n, format!("annotation {WORKERS_ANNOTATION}: {n}")));
                }
            }
            _ => problems.push(format!(
                "annotation {WORKERS_ANNOTATION}: expected a whole number ≥ 1, got {v:?}"
            )),
        }
    }
    let ready_after = t.spec.as_ref().and_then(|s| {
        let app = s.containers.iter().find(|c| c.name != "istio-proxy")?;
        [
            ("startupProbe", &app.startup_probe),
            ("readinessProbe", &app.readiness_probe),
        ]
        .into_iter()
        .filter_map(|(what, p)| {
            let d = p.as_ref()?.initial_delay_seconds.filter(|d| *d > 0)?;
            Some((
                d as u32,
                format!("{what}.initialDelaySeconds {d} of container {:?}", app.name),
            ))
        })
        .max_by_key(|(d, _)| *d)
    });
    let region = t.spec.as_ref().and_then(|s| pinned(s, REGION_LABEL));
    let zone = t.spec.as_ref().and_then(|s| pinned(s, ZONE_LABEL));
    let node = t.spec.as_ref().and_then(|s| {
        s.node_name
            .clone()
            .filter(|n| !n.is_empty())
            .or_else(|| pinned(s, HOSTNAME_LABEL))
    });
    let mut calls: Vec<String> = Vec::new();
    if let Some(spec) = &t.spec {
        for c in &spec.containers {
            for e in c.env.iter().flatten() {
                if let Some(h) = e.value.as_deref().and_then(address_host) {
                    calls.push(h);
                }
            }
        }
    }
    if let Some(v) = pod_annotations.get(CALLS_ANNOTATION) {
        calls.extend(
            v.split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(String::from),
        );
    }
    calls.sort();
    calls.dedup();
    calls.truncate(MAX_CALLS);
    let replicas_written = matches!(replicas, Some(r) if r >= 0);
    let replicas = match replicas {
        Some(r) if r < 0 => {
            problems.push(format!("spec.replicas: expected ≥ 0, got {r}"));
            1
        }
        Some(r) => r as u32,
        None => 1,
    };
    Workload {
        src,
        kind: kind.to_string(),
        namespace,
        name,
        replicas,
        replicas_written,
        pod_labels,
        pod_annotations,
        containers,
        proxy_container,
        sidecar: None,
        calls,
        region,
        zone,
        node,
        ready_after,
        problems,
    }
}

/// What decides a pod's injection and proxy settings beyond the pod itself.
#[derive(Debug)]
pub struct MeshView<'a> {
    /// The labels of the pod's namespace (None: the Namespace is not among
    /// the inputs).
    pub ns_labels: Option<&'a BTreeMap<String, String>>,
    /// ProxyConfigs and mesh configs.
    pub settings: &'a super::proxy::ProxySettings<'a>,
    /// An object among the inputs that acts only on this pod's sidecar (a
    /// Sidecar's inbound pool, an inbound EnvoyFilter, a ProxyConfig),
    /// named: evidence that the pod is meshed when its namespace's labels
    /// are not known.
    pub configured_by: Option<String>,
}

/// The four resource annotations of the injection template; any one of
/// them replaces the chart's `global.proxy.resources` whole.
pub const RESOURCE_ANNOTATIONS: [&str; 4] = [
    "sidecar.istio.io/proxyCPU",
    "sidecar.istio.io/proxyMemory",
    "sidecar.istio.io/proxyCPULimit",
    "sidecar.istio.io/proxyMemoryLimit",
];

/// The first pod annotation that configures an Istio proxy (any key of the
/// `sidecar.istio.io`, `*.sidecar.istio.io` or `proxy.istio.io` domains
/// but `sidecar.istio.io/inject`, which also says "no").
fn proxy_annotation(annotations: &BTreeMap<String, String>) -> Option<&str> {
    annotations.keys().map(String::as_str).find(|k| {
        let domain = k.split_once('/').map_or("", |(d, _)| d);
        *k != "sidecar.istio.io/inject"
            && (domain == "sidecar.istio.io"
                || domain.ends_with(".sidecar.istio.io")
                || domain == "proxy.istio.io")
    })
}

/// Whether the pod is injected, and, when that is inferred rather than
/// stated, why.
fn injection(w: &Workload, view: &MeshView<'_>) -> Option<Option<String>> {
    let pod = w
        .pod_labels
        .get("sidecar.istio.io/inject")
        .or_else(|| w.pod_annotations.get("sidecar.istio.io/inject"))
        .map(String::as_str);
    let ns = view
        .ns_labels
        .and_then(|l| l.get("istio-injection"))
        .map(String::as_str);
    let rev = view
        .ns_labels
        .is_some_and(|l| l.contains_key("istio.io/rev"))
        || w.pod_labels.contains_key("istio.io/rev");
    if w.proxy_container.is_some() {
        return Some(None);
    }
    if pod == Some("false") || ns == Some("disabled") {
        return None;
    }
    if pod == Some("true") || ns == Some("enabled") || rev {
        return Some(None);
    }
    if view.ns_labels.is_some() {
        return None;
    }
    // The namespace's labels are not among the inputs (a Helm chart or a
    // folder of one team's objects rarely holds its Namespace): a pod
    // whose own annotations configure its proxy, or that an Istio object
    // configures the sidecar of, is meshed by every sign the inputs give.
    let sign = proxy_annotation(&w.pod_annotations)
        .map(|a| format!("its pod annotation {a} configures an Istio proxy"))
        .or_else(|| view.configured_by.clone())?;
    Some(Some(format!(
        "injection assumed: Namespace {} is not among the inputs to say, and {sign}",
        w.namespace
    )))
}

/// The revision that injects the pod: its namespace's `istio.io/rev`
/// (unless `istio-injection` names the default one), else its own
/// `istio.io/rev` label, else the default (`""`).
fn revision(w: &Workload, ns_labels: Option<&BTreeMap<String, String>>) -> String {
    let ns_rev = ns_labels
        .filter(|l| !l.contains_key("istio-injection"))
        .and_then(|l| l.get("istio.io/rev"));
    ns_rev
        .or_else(|| w.pod_labels.get("istio.io/rev"))
        .cloned()
        .unwrap_or_default()
}

/// The proxy's CPU request and limit as the injection template writes them
/// (istio/istio 1.27, `injection-template.yaml`, template `resources`):
/// an `istio-proxy` container already in the pod is what runs; else any of
/// [`RESOURCE_ANNOTATIONS`] replaces the chart's `global.proxy.resources`
/// whole, each annotation giving its own field only (`proxyCPU` alone: no
/// CPU limit; `proxyMemory` alone: no CPU request nor limit); else the chart
/// defaults. Kubernetes copies a limit into a missing request.
struct Resources {
    request: Option<f64>,
    limit: Option<f64>,
    requested: Vec<String>,
    source: String,
    defaults: bool,
}

fn resources(w: &mut Workload) -> Resources {
    if let Some(p) = &w.proxy_container {
        return Resources {
            request: p.cpu_request.or(p.cpu_limit),
            limit: p.cpu_limit,
            requested: p.requested.clone(),
            source: "the istio-proxy container's resources".into(),
            defaults: false,
        };
    }
    let written: Vec<(&str, String)> = RESOURCE_ANNOTATIONS
        .iter()
        .filter_map(|a| w.pod_annotations.get(*a).map(|v| (*a, v.clone())))
        .collect();
    if written.is_empty() {
        return Resources {
            request: Some(DEFAULT_PROXY_CPU_REQUEST),
            limit: Some(DEFAULT_PROXY_CPU_LIMIT),
            requested: vec!["cpu".into(), "memory".into()],
            source: "Istio chart defaults global.proxy.resources (requests 100m, limits 2000m)"
                .into(),
            defaults: true,
        };
    }
    let mut cpu = |ann: &str| -> Option<f64> {
        let v = w.pod_annotations.get(ann)?;
        parse_cpu(v)
            .map_err(|e| w.problems.push(format!("annotation {ann}: {e}")))
            .ok()
    };
    let (request, limit) = (
        cpu("sidecar.istio.io/proxyCPU"),
        cpu("sidecar.istio.io/proxyCPULimit"),
    );
    let mut requested = Vec::new();
    for (what, a, b) in [
        (
            "cpu",
            "sidecar.istio.io/proxyCPU",
            "sidecar.istio.io/proxyCPULimit",
        ),
        (
            "memory",
            "sidecar.istio.io/proxyMemory",
            "sidecar.istio.io/proxyMemoryLimit",
        ),
    ] {
        if written.iter().any(|(k, _)| *k == a || *k == b) {
            requested.push(what.to_string());
        }
    }
    let mut source: Vec<String> = written.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    if limit.is_none() {
        source.push(
            "no CPU limit (any resource annotation replaces the chart's global.proxy.resources whole)"
                .into(),
        );
    }
    Resources {
        request: request.or(limit),
        limit,
        requested,
        source: source.join(", "),
        defaults: false,
    }
}

/// The worker threads set by the pod's `proxy.istio.io/config` annotation,
/// else a ProxyConfig or the mesh config, and where.
fn configured_concurrency(
    w: &mut Workload,
    view: &MeshView<'_>,
    revision: &str,
) -> Option<(u32, String)> {
    if let Some(cfg) = w.pod_annotations.get("proxy.istio.io/config") {
        let read = serde_saphyr::from_str_with_options::<super::proxy::ProxyConfigFields>(
            cfg,
            crate::inputs::yaml::options(),
        )
        .map_err(|e| e.to_string())
        .and_then(|p| super::proxy::concurrency(p.concurrency));
        match read {
            Ok(Some(c)) => return Some((c, format!("proxy.istio.io/config concurrency: {c}"))),
            Ok(None) => {}
            Err(e) => w
                .problems
                .push(format!("annotation proxy.istio.io/config: {e}")),
        }
    }
    view.settings
        .concurrency(&w.namespace, &w.pod_labels, revision)
}

/// Decides injection and the proxy's settings.
pub fn decide_sidecar(w: &mut Workload, view: &MeshView<'_>) {
    let Some(inferred) = injection(w, view) else {
        return;
    };
    let r = resources(w);
    let revision = revision(w, view.ns_labels);
    let mut sources = vec![r.source];
    let concurrency = configured_concurrency(w, view, &revision).map(|(c, how)| {
        sources.push(how);
        c
    });
    if let Some(why) = &inferred {
        sources.insert(0, why.clone());
    }
    w.sidecar = Some(SidecarInfo {
        cpu_request: r.request,
        cpu_limit: r.limit,
        requested: r.requested,
        concurrency,
        source: sources.join("; "),
        defaults: r.defaults,
        inferred,
    });
}
