//! Where the simulator meets `stormbreak-policy`: retry decisions, retry
//! budgets and the HPA are the policy crate's own state machines, fed
//! virtual time and a per-entity RNG. Nothing here decides anything itself;
//! it translates simulator facts (a [`Cause`], pod gauges) into the policy
//! crate's inputs.

use rand::Rng;
use serde::Deserialize;
use stormbreak_policy::Nanos;
use stormbreak_policy::autoscale::{
    ContainerSample, Hpa, HpaConfig, MetricId, MetricSpec, MetricTarget, PodStatus, PodTable,
    ResourceName,
};
use stormbreak_policy::budget::{
    AwsRetryQuota, AwsRetryQuotaConfig, GrpcThrottle, GrpcThrottleConfig, RatioBudget,
    RatioBudgetConfig, RetryBudget, Unlimited,
};
use stormbreak_policy::retry::{
    AttemptOutcome, Pushback, RetryConfig, RetryDecision, RetryPolicy, RetryState,
};

use crate::record::Cause;
use crate::scenario::{AutoscalerSpec, ScaleMetric};

/// A scenario's `retry = { … }` table: the policy crate's [`RetryConfig`]
/// as written (see `docs/scenarios.md` and the `retry` module docs).
pub type RetrySpec = RetryConfig;

/// A scenario's `budget = { kind = …, … }` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum BudgetSpec {
    /// Finagle/Linkerd ratio budget.
    Ratio(RatioBudgetConfig),
    /// gRPC retry throttling (gRFC A6).
    Grpc(GrpcThrottleConfig),
    /// AWS SDK standard retry quota.
    Aws(AwsRetryQuotaConfig),
}

impl BudgetSpec {
    /// What is wrong with the parameters, if anything.
    pub fn check(&self) -> Result<(), String> {
        match self {
            BudgetSpec::Ratio(c) => c.validate(),
            BudgetSpec::Grpc(c) => c.validate(),
            BudgetSpec::Aws(c) => c.validate(),
        }
        .map_err(|e| e.to_string())
    }
}

/// Checks a retry table the way the policy crate will build it.
pub fn check_retry(spec: &RetrySpec) -> Result<(), String> {
    RetryPolicy::new(spec)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[derive(Debug)]
enum AnyBudget {
    Unlimited(Unlimited),
    Ratio(RatioBudget),
    Grpc(GrpcThrottle),
    Aws(AwsRetryQuota),
}

impl AnyBudget {
    fn get(&mut self) -> &mut dyn RetryBudget {
        match self {
            AnyBudget::Unlimited(b) => b,
            AnyBudget::Ratio(b) => b,
            AnyBudget::Grpc(b) => b,
            AnyBudget::Aws(b) => b,
        }
    }
}

/// The retry state of one logical call; `None` when the caller never retries.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallState(Option<RetryState>);

/// What a caller does after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Send another attempt at this time.
    RetryAt(Nanos),
    /// Report the failure.
    GiveUp,
}

/// A caller's retry policy and its shared budget: one per client population
/// or gateway.
#[derive(Debug)]
pub struct Caller {
    policy: Option<RetryPolicy>,
    /// Classifies outcomes for callers that act on failures outside a retry
    /// policy (the fan-out bug): the configured policy's, else the default.
    classify: RetryPolicy,
    budget: AnyBudget,
}

/// How a caller sees a simulated failure. `retry_after` is what the
/// response advertised, already dropped by callers that ignore it.
pub fn outcome_of(cause: Cause, retry_after: Option<Nanos>) -> AttemptOutcome {
    match cause {
        Cause::FlowsExhausted => AttemptOutcome::ConnectFailed,
        Cause::Timeout => AttemptOutcome::Timeout,
        Cause::Reset => AttemptOutcome::Reset,
        c => AttemptOutcome::Response {
            status: c.status().unwrap_or(503),
            retry_after,
            pushback: Pushback::None,
        },
    }
}

impl Caller {
    /// Builds the caller; the specs were validated with the scenario.
    pub fn new(retry: Option<&RetrySpec>, budget: Option<&BudgetSpec>) -> Self {
        let budget = match budget {
            None => AnyBudget::Unlimited(Unlimited),
            Some(BudgetSpec::Ratio(c)) => AnyBudget::Ratio(RatioBudget::new(c).expect("validated")),
            Some(BudgetSpec::Grpc(c)) => AnyBudget::Grpc(GrpcThrottle::new(c).expect("validated")),
            Some(BudgetSpec::Aws(c)) => AnyBudget::Aws(AwsRetryQuota::new(c).expect("validated")),
        };
        let policy = retry.map(|r| RetryPolicy::new(r).expect("validated"));
        let classify = policy
            .clone()
            .unwrap_or_else(|| RetryPolicy::new(&RetryConfig::default()).expect("defaults"));
        Caller {
            policy,
            classify,
            budget,
        }
    }

    /// Replaces the retry policy (a timeline action); the budget is kept.
    /// Calls already under way keep their attempt count and deadline and
    /// are judged by the new policy from their next outcome on; a call that
    /// started without a policy stays without retries.
    pub fn set_retry(&mut self, retry: Option<&RetrySpec>) {
        self.policy = retry.map(|r| RetryPolicy::new(r).expect("validated"));
    }

    /// A new logical call starts now (the budget earns its deposit).
    pub fn start(&mut self, now: Nanos) -> CallState {
        let budget = self.budget.get();
        match &self.policy {
            Some(p) => CallState(Some(RetryState::begin(p, now, budget))),
            None => {
                budget.on_request(now);
                CallState(None)
            }
        }
    }

    /// The call's latest attempt succeeded.
    pub fn on_success<R: Rng + ?Sized>(&mut self, st: &mut CallState, now: Nanos, rng: &mut R) {
        match (&self.policy, &mut st.0) {
            (Some(p), Some(s)) => {
                s.on_outcome_budgeted(p, now, AttemptOutcome::status(200), self.budget.get(), rng);
            }
            _ => self.budget.get().on_success(now, None),
        }
    }

    /// Whether this failure is one the caller's classifier retries (a 403
    /// is not: a shed with 403 stops even the fan-out bug).
    pub fn is_retryable(&self, cause: Cause, retry_after: Option<Nanos>) -> bool {
        let c = self.classify.classifier();
        c.is_retried(c.classify(&outcome_of(cause, retry_after)))
    }

    /// A failure that the caller does not route through its retry policy
    /// (the fan-out bug): the budget still hears of it.
    pub fn on_failure(&mut self, now: Nanos, cause: Cause) {
        match cause {
            Cause::Timeout => self.budget.get().on_timeout(now),
            _ => self.budget.get().on_failure(now),
        }
    }

    /// The call's latest attempt failed: retry when, or give up.
    pub fn after_failure<R: Rng + ?Sized>(
        &mut self,
        st: &mut CallState,
        now: Nanos,
        cause: Cause,
        retry_after: Option<Nanos>,
        rng: &mut R,
    ) -> Next {
        let (Some(p), Some(s)) = (&self.policy, &mut st.0) else {
            self.on_failure(now, cause);
            return Next::GiveUp;
        };
        let outcome = outcome_of(cause, retry_after);
        match s.on_outcome_budgeted(p, now, outcome, self.budget.get(), rng) {
            RetryDecision::RetryAt(t) => Next::RetryAt(t.max(now)),
            RetryDecision::GiveUp(_) | RetryDecision::Success => Next::GiveUp,
        }
    }
}

/// What the simulator measured on one pod since the last sync.
#[derive(Debug, Clone, Copy)]
pub struct PodSample {
    /// Ready to serve.
    pub ready: bool,
    /// Time-averaged busy workers / workers.
    pub app_utilisation: f64,
    /// Time-averaged sidecar in-flight / sidecar limit.
    pub sidecar_saturation: f64,
}

/// A service's HPA: the policy crate's [`Hpa`] fed from simulated pods.
///
/// Containers: `app` (CPU request = its worker count, usage = busy workers)
/// and `sidecar` (see [`SIDECAR_CPU_SHARE`]).
#[derive(Debug)]
pub struct Autoscaler {
    hpa: Hpa,
    table: PodTable,
    period: Nanos,
}

/// Assumption: a sidecar's CPU request is this share of the app's, and its
/// usage is proportional to its in-flight share of that. It only matters
/// for the pod-level `Resource` metric, where the app dominates the sum.
pub const SIDECAR_CPU_SHARE: f64 = 0.1;

impl Autoscaler {
    /// Builds the HPA for a validated spec.
    pub fn new(spec: &AutoscalerSpec) -> Self {
        let pct = (spec.target * 100.0).round() as u32;
        let metric = match spec.metric {
            ScaleMetric::AppCpu => MetricSpec::ContainerResource {
                name: ResourceName::Cpu,
                container: "app".into(),
                target: MetricTarget::Utilization {
                    average_utilization: pct,
                },
            },
            ScaleMetric::PodCpu => MetricSpec::cpu_utilization(pct),
            ScaleMetric::SidecarSaturation => MetricSpec::Pods {
                metric: "sidecar_saturation".into(),
                target: MetricTarget::AverageValue {
                    average_value: spec.target,
                },
            },
        };
        let config = HpaConfig {
            min_replicas: spec.min,
            max_replicas: spec.max,
            metrics: vec![metric],
            pod_containers: vec!["app".into(), "sidecar".into()],
            ..HpaConfig::default()
        };
        let period = config.sync_period;
        Autoscaler {
            hpa: Hpa::new(config).expect("validated autoscaler"),
            table: PodTable::with_capacity(spec.max as usize * 2 + 8, 2, 1),
            period,
        }
    }

    /// The HPA sync period.
    pub fn period(&self) -> Nanos {
        self.period
    }

    /// One HPA sync: returns the desired replica count.
    pub fn sync(&mut self, now: Nanos, current: u32, pods: impl Iterator<Item = PodSample>) -> u32 {
        self.table.clear(current);
        for p in pods {
            let status = if p.ready {
                PodStatus::ready(0, now)
            } else {
                PodStatus::ready(0, now).deleting()
            };
            let app = ContainerSample::cpu(p.app_utilisation, 1.0);
            let sidecar =
                ContainerSample::cpu(p.sidecar_saturation * SIDECAR_CPU_SHARE, SIDECAR_CPU_SHARE);
            let i = self.table.push_pod(status, &[app, sidecar]);
            self.table
                .set_pod_metric(i, MetricId(0), p.sidecar_saturation);
        }
        self.hpa.sync(now, &self.table).desired
    }
}
