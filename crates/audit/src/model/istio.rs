//! Istio, Gateway API and KEDA objects, defined with serde: only the fields
//! the audit reads; unknown fields are ignored (real objects carry many),
//! but a field of the wrong type is an error with its line.
//!
//! References: Istio 1.27 reference docs, "Destination Rule"
//! <https://istio.io/v1.27/docs/reference/config/networking/destination-rule/>,
//! "Virtual Service" <https://istio.io/v1.27/docs/reference/config/networking/virtual-service/>,
//! "Sidecar" <https://istio.io/v1.27/docs/reference/config/networking/sidecar/>,
//! "Service Entry" <https://istio.io/v1.27/docs/reference/config/networking/service-entry/>;
//! Gateway API v1.7 "HTTPRoute" <https://gateway-api.sigs.k8s.io/reference/spec/>
//! (`rules[].timeouts.request`, `rules[].timeouts.backendRequest`, GEP-1742;
//! `rules[].retry` with `attempts`, `codes`, `backoff`, GEP-1731, in the
//! Standard channel since v1.7.0: "HTTP retries"
//! <https://gateway-api.sigs.k8s.io/guides/user-guides/http-retries/>);
//! KEDA 2.17 "ScaledObject specification" <https://keda.sh/docs/2.17/reference/scaledobject-spec/>.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

/// Any namespaced object: its metadata and a typed spec.
#[derive(Debug, Clone, Deserialize)]
pub struct Object<S> {
    /// Metadata (name, namespace, labels, annotations).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The spec.
    #[serde(default)]
    pub spec: S,
}

/// `DestinationRule.spec`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DestinationRuleSpec {
    /// Destination host (short name, FQDN or wildcard).
    #[serde(default)]
    pub host: String,
    /// Policy for the whole host.
    #[serde(default)]
    pub traffic_policy: Option<TrafficPolicy>,
    /// Named subsets, each with an optional policy override.
    #[serde(default)]
    pub subsets: Vec<Subset>,
    /// Namespaces the rule is visible to (`.`: its own, `*`: all; empty:
    /// all, Istio's default).
    #[serde(default)]
    pub export_to: Vec<String>,
}

/// `TrafficPolicy`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrafficPolicy {
    /// Connection pool limits (per caller proxy, per upstream cluster).
    #[serde(default)]
    pub connection_pool: Option<ConnectionPool>,
    /// Outlier detection (passive health checking).
    #[serde(default)]
    pub outlier_detection: Option<OutlierDetection>,
    /// Load balancer settings (only `localityLbSetting` is read).
    #[serde(default)]
    pub load_balancer: Option<LoadBalancer>,
}

/// `LoadBalancerSettings`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancer {
    /// Locality-weighted load balancing and failover.
    #[serde(default)]
    pub locality_lb_setting: Option<LocalityLbSetting>,
}

/// `LocalityLoadBalancerSetting`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalityLbSetting {
    /// `enabled` (unset: on, per mesh config).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Explicit failover: traffic from one region goes to another when the
    /// local endpoints are unhealthy.
    #[serde(default)]
    pub failover: Vec<Failover>,
    /// Labels ordering endpoints by priority (e.g.
    /// `topology.kubernetes.io/region`).
    #[serde(default)]
    pub failover_priority: Vec<String>,
}

/// `LocalityLoadBalancerSetting.Failover`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Failover {
    /// Origin region.
    #[serde(default)]
    pub from: String,
    /// Destination region.
    #[serde(default)]
    pub to: String,
}

/// `Subset`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subset {
    /// Subset name.
    #[serde(default)]
    pub name: String,
    /// The pod labels that pick the subset's endpoints among the host's
    /// (Istio 1.27 "Destination Rule", `Subset.labels`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Overrides of the host's policy.
    #[serde(default)]
    pub traffic_policy: Option<TrafficPolicy>,
}

/// `ConnectionPoolSettings`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionPool {
    /// TCP settings.
    #[serde(default)]
    pub tcp: Option<TcpPool>,
    /// HTTP settings.
    #[serde(default)]
    pub http: Option<HttpPool>,
}

/// `ConnectionPoolSettings.TCPSettings`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TcpPool {
    /// `maxConnections` (unset: 2³²−1).
    #[serde(default)]
    pub max_connections: Option<i64>,
}

/// `ConnectionPoolSettings.HTTPSettings`. In Istio, 0 or unset means the
/// default (2³²−1, i.e. unlimited) for every field here.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpPool {
    /// Requests queued while waiting for a connection.
    #[serde(default)]
    pub http1_max_pending_requests: Option<i64>,
    /// Concurrent requests to the destination.
    #[serde(default)]
    pub http2_max_requests: Option<i64>,
    /// Requests per connection before it is closed (0: unlimited).
    #[serde(default)]
    pub max_requests_per_connection: Option<i64>,
    /// Concurrent retries outstanding to the destination.
    #[serde(default)]
    pub max_retries: Option<i64>,
}

/// `OutlierDetection`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutlierDetection {
    /// Consecutive 5xx before ejection.
    #[serde(default, rename = "consecutive5xxErrors")]
    pub consecutive_5xx_errors: Option<i64>,
    /// Consecutive gateway errors before ejection.
    #[serde(default)]
    pub consecutive_gateway_errors: Option<i64>,
    /// Deprecated spelling of consecutive errors.
    #[serde(default)]
    pub consecutive_errors: Option<i64>,
    /// Largest share of hosts that may be ejected (default 10).
    #[serde(default)]
    pub max_ejection_percent: Option<i64>,
    /// Outlier detection is off below this share of healthy hosts (default 0).
    #[serde(default)]
    pub min_health_percent: Option<i64>,
    /// Ejection time.
    #[serde(default)]
    pub base_ejection_time: Option<String>,
}

/// `VirtualService.spec`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualServiceSpec {
    /// Hosts the rules apply to.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Gateways (`mesh` or absent: sidecars).
    #[serde(default)]
    pub gateways: Vec<String>,
    /// HTTP routes, first match wins.
    #[serde(default)]
    pub http: Vec<VsHttpRoute>,
    /// Namespaces whose sidecars and gateways see the VirtualService (`.`:
    /// its own, `*`: all; empty: all, Istio's default).
    #[serde(default)]
    pub export_to: Vec<String>,
}

/// `HTTPRoute` of a VirtualService.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VsHttpRoute {
    /// Optional name.
    #[serde(default)]
    pub name: Option<String>,
    /// Weighted destinations.
    #[serde(default)]
    pub route: Vec<VsDestinationWeight>,
    /// Route timeout (unset: disabled).
    #[serde(default)]
    pub timeout: Option<String>,
    /// Retry policy (unset: Istio's default policy).
    #[serde(default)]
    pub retries: Option<HttpRetry>,
    /// Match conditions (empty: the route matches every request).
    #[serde(default, rename = "match")]
    pub matches: Vec<serde_json::Value>,
    /// Fault injection at the calling proxy.
    #[serde(default)]
    pub fault: Option<HttpFault>,
}

/// `HTTPFaultInjection`: delays and aborts the calling proxy injects
/// before the request is routed (Istio 1.27 "Virtual Service",
/// `HTTPFaultInjection`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpFault {
    /// `delay`.
    #[serde(default)]
    pub delay: Option<FaultDelay>,
    /// `abort`.
    #[serde(default)]
    pub abort: Option<FaultAbort>,
}

/// `HTTPFaultInjection.Delay`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultDelay {
    /// `fixedDelay` (a duration such as `5s`).
    #[serde(default)]
    pub fixed_delay: Option<String>,
    /// `percentage.value`.
    #[serde(default)]
    pub percentage: Option<Percent>,
    /// Deprecated integer `percent`.
    #[serde(default)]
    pub percent: Option<f64>,
}

/// `HTTPFaultInjection.Abort`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultAbort {
    /// `httpStatus`.
    #[serde(default)]
    pub http_status: Option<i64>,
    /// `grpcStatus` (a gRPC status name).
    #[serde(default)]
    pub grpc_status: Option<String>,
    /// `percentage.value`.
    #[serde(default)]
    pub percentage: Option<Percent>,
}

/// `Percent`: `value` in [0, 100].
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Percent {
    /// The percentage.
    #[serde(default)]
    pub value: Option<f64>,
}

/// `HTTPRouteDestination`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VsDestinationWeight {
    /// Destination.
    #[serde(default)]
    pub destination: VsDestination,
    /// Weight.
    #[serde(default)]
    pub weight: Option<i64>,
}

/// `Destination`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VsDestination {
    /// Host.
    #[serde(default)]
    pub host: String,
    /// Subset.
    #[serde(default)]
    pub subset: Option<String>,
}

/// `HTTPRetry`: `attempts` is the number of retries (Envoy's `num_retries`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRetry {
    /// Retries (0 disables retries).
    #[serde(default)]
    pub attempts: Option<i64>,
    /// Timeout per attempt.
    #[serde(default)]
    pub per_try_timeout: Option<String>,
    /// Envoy retry-on conditions, comma-separated; status codes allowed.
    #[serde(default)]
    pub retry_on: Option<String>,
}

/// `Sidecar.spec` (the parts that bound the inbound side).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSpec {
    /// Workloads it applies to (absent: the whole namespace).
    #[serde(default)]
    pub workload_selector: Option<WorkloadSelector>,
    /// Inbound connection pool of the selected workloads' sidecars.
    #[serde(default)]
    pub inbound_connection_pool: Option<ConnectionPool>,
    /// Egress listeners: the hosts the selected workloads' proxies are
    /// configured to reach (absent: every host in the mesh).
    #[serde(default)]
    pub egress: Vec<EgressListener>,
}

/// `IstioEgressListener` (only `hosts` is read).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EgressListener {
    /// Hosts in `namespace/dnsName` form (`*`, `.` and `~` namespaces;
    /// a `*` or `*.suffix` dnsName).
    #[serde(default)]
    pub hosts: Vec<String>,
}

/// `ServiceEntry.spec` (the parts that say which workloads serve its hosts).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceEntrySpec {
    /// Hosts added to the mesh's registry.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// `MESH_EXTERNAL` (the default) or `MESH_INTERNAL`.
    #[serde(default)]
    pub location: Option<String>,
    /// Static or DNS endpoints.
    #[serde(default)]
    pub endpoints: Vec<ServiceEntryEndpoint>,
    /// Pods (or WorkloadEntries) serving the hosts (`MESH_INTERNAL` only).
    #[serde(default)]
    pub workload_selector: Option<WorkloadSelector>,
    /// Namespaces whose proxies see the entry's hosts (`.`: its own, `*`:
    /// all; empty: all, Istio's default).
    #[serde(default)]
    pub export_to: Vec<String>,
}

/// `WorkloadEntry` as an endpoint of a ServiceEntry (only `address`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ServiceEntryEndpoint {
    /// An IP or a DNS name (with `resolution: DNS`).
    #[serde(default)]
    pub address: String,
}

/// `WorkloadSelector`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct WorkloadSelector {
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// `EnvoyFilter.spec`: kept as values; only local rate limiting, adaptive
/// concurrency and inbound circuit breakers are read from the patches.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvoyFilterSpec {
    /// Workloads it applies to.
    #[serde(default)]
    pub workload_selector: Option<WorkloadSelector>,
    /// Patches.
    #[serde(default)]
    pub config_patches: Vec<serde_json::Value>,
}

/// Gateway API `HTTPRoute.spec`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteSpec {
    /// Hostnames.
    #[serde(default)]
    pub hostnames: Vec<String>,
    /// What the route attaches to: Gateways, or a Service (GAMMA mesh
    /// routing).
    #[serde(default)]
    pub parent_refs: Vec<ParentRef>,
    /// Rules.
    #[serde(default)]
    pub rules: Vec<HttpRouteRule>,
}

/// `HTTPRouteRule`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteRule {
    /// Backends (Services).
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
    /// `timeouts.request` / `timeouts.backendRequest`.
    #[serde(default)]
    pub timeouts: Option<HttpRouteTimeouts>,
    /// `retry` (GEP-1731; Standard channel since Gateway API v1.7.0).
    #[serde(default)]
    pub retry: Option<HttpRouteRetry>,
}

/// `ParentReference` (Gateway API v1.3): `group` defaults to
/// `gateway.networking.k8s.io`, `kind` to `Gateway`, `namespace` to the
/// route's.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ParentRef {
    /// API group (absent: `gateway.networking.k8s.io`; `""` for a Service).
    #[serde(default)]
    pub group: Option<String>,
    /// Kind (absent: `Gateway`).
    #[serde(default)]
    pub kind: Option<String>,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Namespace (absent: the route's).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Gateway API `Gateway.spec` (only the class is read).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    /// `gatewayClassName`: which implementation runs the Gateway.
    #[serde(default)]
    pub gateway_class_name: String,
}

/// `HTTPBackendRef`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct BackendRef {
    /// Service name.
    #[serde(default)]
    pub name: String,
    /// Namespace (default: the route's).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `HTTPRouteTimeouts` (GEP-1742). Both are Gateway API Durations
/// (GEP-2257); `0s` disables the timeout.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteTimeouts {
    /// `request`: the whole client transaction, retries included.
    #[serde(default)]
    pub request: Option<String>,
    /// `backendRequest`: one request from the gateway to a backend (one
    /// attempt); must be no more than `request`.
    #[serde(default)]
    pub backend_request: Option<String>,
}

/// `HTTPRouteRetry` (GEP-1731).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HttpRouteRetry {
    /// `attempts`: the maximum number of retries of one backend request
    /// (unset: implementation-specific).
    #[serde(default)]
    pub attempts: Option<i64>,
    /// `codes`: HTTP status codes retried.
    #[serde(default)]
    pub codes: Vec<i64>,
    /// `backoff`: the minimum wait between attempts (a Gateway API Duration).
    #[serde(default)]
    pub backoff: Option<String>,
}

/// KEDA `ScaledObject.spec`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaledObjectSpec {
    /// Target workload.
    #[serde(default)]
    pub scale_target_ref: ScaleTargetRef,
    /// Replicas bounds.
    #[serde(default)]
    pub min_replica_count: Option<i64>,
    /// Replicas bounds.
    #[serde(default)]
    pub max_replica_count: Option<i64>,
    /// Triggers.
    #[serde(default)]
    pub triggers: Vec<KedaTrigger>,
    /// `advanced` (only `horizontalPodAutoscalerConfig.behavior` is read).
    #[serde(default)]
    pub advanced: Option<KedaAdvanced>,
}

/// KEDA `spec.advanced`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KedaAdvanced {
    /// The HPA KEDA creates.
    #[serde(default)]
    pub horizontal_pod_autoscaler_config: Option<KedaHpaConfig>,
}

/// KEDA `spec.advanced.horizontalPodAutoscalerConfig`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct KedaHpaConfig {
    /// The HPA `behavior` KEDA writes into the HPA it creates, as is
    /// (KEDA 2.17 "ScaledObject specification", `advanced`); the same
    /// type as an `autoscaling/v2` HPA's.
    #[serde(default)]
    pub behavior: Option<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior>,
}

/// `scaleTargetRef`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ScaleTargetRef {
    /// Kind (default Deployment).
    #[serde(default)]
    pub kind: Option<String>,
    /// Name.
    #[serde(default)]
    pub name: String,
}

/// A KEDA trigger.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KedaTrigger {
    /// Scaler type (`cpu`, `prometheus`, `rabbitmq`, …).
    #[serde(default, rename = "type")]
    pub kind: String,
    /// `Utilization` or `AverageValue` (cpu/memory).
    #[serde(default)]
    pub metric_type: Option<String>,
    /// Scaler metadata (strings).
    #[serde(default)]
    pub metadata: BTreeMap<String, serde_json::Value>,
}
