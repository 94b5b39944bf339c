//! Validation of a parsed scenario: every field in range, every name
//! resolved, the model consistent. Every error and warning names
//! `file:line:column`, found through [`Doc`] for fields the typed structs
//! keep without a span.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use stormbreak_policy::budget::BudgetConfig;
use stormbreak_policy::limit::LimitConfig;
use stormbreak_policy::retry::RetryConfig;
use stormbreak_policy::shed::Criticality;

use stormbreak_policy::{Nanos, units};
use toml::Spanned;

use super::hpa::table_field;
use super::{
    ActionKind, ComponentRef, FieldProblem, MAX_DURATION, MAX_ENTITIES, MAX_FANOUT,
    MAX_FANOUT_IN_FLIGHT, MAX_HOPS, MAX_INSTANCES, MAX_INTERVALS, MAX_NODES, MAX_PODS, MAX_RATE,
    MAX_SITES, MAX_SLOTS, MAX_SLOWDOWN, ScaleMetric, Scenario, ScenarioError, ScenarioWarning,
    check_budget, check_limit, check_retry, line_col, parse_clock,
};
use stormbreak_spans::Spans as Doc;

/// Builds errors and collects warnings at positions in one scenario text.
pub(crate) struct Checker<'a> {
    file: &'a str,
    text: &'a str,
    doc: &'a Doc<'a>,
    warnings: RefCell<Vec<ScenarioWarning>>,
}

impl<'a> Checker<'a> {
    pub(crate) fn new(file: &'a str, text: &'a str, doc: &'a Doc<'a>) -> Self {
        Checker {
            file,
            text,
            doc,
            warnings: RefCell::new(Vec::new()),
        }
    }

    pub(crate) fn into_warnings(self) -> Vec<ScenarioWarning> {
        self.warnings.into_inner()
    }

    fn pos(&self, span: Range<usize>) -> Option<(usize, usize)> {
        Some(line_col(self.text, span.start))
    }

    /// An error at `span`.
    fn at(&self, span: Range<usize>, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file.to_owned(),
            line_col: self.pos(span),
            message: message.into(),
        }
    }

    /// An error at the value of `path` (dotted, e.g. `"client.0.rate"`), or
    /// at its nearest written ancestor when the field took its default.
    fn key(&self, path: &str, message: impl Into<String>) -> ScenarioError {
        self.at(self.doc.nearest(path), message)
    }

    /// An error at the first of `paths` that is written in the file, else
    /// as [`Checker::key`] of the first.
    fn first(&self, paths: &[&str], message: impl Into<String>) -> ScenarioError {
        let span = paths
            .iter()
            .find_map(|p| self.doc.exact(p))
            .unwrap_or_else(|| self.doc.nearest(paths.first().copied().unwrap_or("")));
        self.at(span, message)
    }

    fn warn(&self, path: &str, message: String) {
        let span = self.doc.nearest(path);
        self.warnings.borrow_mut().push(ScenarioWarning {
            file: self.file.to_owned(),
            line_col: self.pos(span),
            message,
        });
    }

    /// `v` in `lo..=hi`, else an error at `path` naming `what`.
    fn count(&self, path: &str, what: &str, v: u64, lo: u64, hi: u64) -> Result<(), ScenarioError> {
        if v < lo {
            Err(self.key(path, format!("{what} must be ≥ {lo}, got {v}")))
        } else if v > hi {
            Err(self.key(path, format!("{what} must be at most {hi}, got {v}")))
        } else {
            Ok(())
        }
    }

    /// A duration of at least `min` (0: any) and at most [`MAX_DURATION`].
    fn duration(&self, path: &str, what: &str, v: Nanos, min: Nanos) -> Result<(), ScenarioError> {
        if v < min {
            let bound = if min == Nanos::NANOSECOND {
                "> 0".to_owned()
            } else {
                format!("at least {}", units::format_duration(min))
            };
            return Err(self.key(
                path,
                format!("{what} must be {bound}, got {}", units::format_duration(v)),
            ));
        }
        if v > MAX_DURATION {
            return Err(self.key(
                path,
                format!(
                    "{what} must be at most {} (30 days), got {}",
                    units::format_duration(MAX_DURATION),
                    units::format_duration(v)
                ),
            ));
        }
        Ok(())
    }

    /// A finite fraction in `[0, 1]` (or `[0, 1)` when `open`).
    fn fraction(&self, path: &str, what: &str, v: f64, open: bool) -> Result<(), ScenarioError> {
        let ok = v.is_finite() && v >= 0.0 && if open { v < 1.0 } else { v <= 1.0 };
        if ok {
            return Ok(());
        }
        let range = if open { "[0, 1)" } else { "[0, 1]" };
        Err(self.key(path, format!("{what} must be a number in {range}, got {v}")))
    }

    /// An arrival rate: finite, ≥ 0, at most [`MAX_RATE`]; a positive rate
    /// expecting less than one arrival in the whole run is legal (a
    /// population may be meant to be idle) but earns a warning.
    fn rate(&self, path: &str, what: &str, r: f64, run: Nanos) -> Result<(), ScenarioError> {
        if !(r.is_finite() && r >= 0.0) {
            return Err(self.key(path, format!("{what} must be a finite rate ≥ 0, got {r}")));
        }
        if r > MAX_RATE {
            return Err(self.key(
                path,
                format!(
                    "{what} {r}/s is above 1e9/s (one arrival per nanosecond): \
                     the gap between arrivals cannot be represented"
                ),
            ));
        }
        let expected = r * run.as_secs_f64();
        if r > 0.0 && expected < 1.0 {
            self.warn(
                path,
                format!(
                    "{what} {r}/s expects {expected:.3} arrivals in the whole run ({}): \
                     it will most likely send nothing",
                    units::format_duration(run)
                ),
            );
        }
        Ok(())
    }

    fn retry(&self, table: &str, what: &str, r: &RetryConfig) -> Result<(), ScenarioError> {
        check_retry(r).map_err(|p| self.problem(table, what, "retry", p))
    }

    fn budget(&self, table: &str, what: &str, b: &BudgetConfig) -> Result<(), ScenarioError> {
        check_budget(b).map_err(|p| self.problem(table, what, "budget", p))
    }

    fn limit(&self, table: &str, what: &str, l: &LimitConfig) -> Result<(), ScenarioError> {
        check_limit(l).map_err(|p| self.problem(table, what, "limit", p))
    }

    /// An error about `field` inside the `{table}.{sub}` table.
    fn problem(&self, table: &str, what: &str, sub: &str, p: FieldProblem) -> ScenarioError {
        self.key(
            &format!("{table}.{sub}.{}", p.field),
            format!("{what}: {sub}: {}", p.message),
        )
    }
}

impl Scenario {
    /// `[limits]` may only lower the engine's defaults.
    fn check_limits(&self, ck: &Checker) -> Result<(), ScenarioError> {
        let defaults = crate::engine::Limits::default();
        for (name, v) in self.limits.values() {
            let (Some(v), Some(default)) = (v, defaults.get(name)) else {
                continue;
            };
            if v == 0 {
                return Err(ck.key(
                    &format!("limits.{name}"),
                    format!("limits: {name} must be at least 1, got 0"),
                ));
            }
            if v > default {
                return Err(ck.key(
                    &format!("limits.{name}"),
                    format!(
                        "limits: {name} = {v} is above its default {default}: a scenario may only \
                         lower a limit, so that a shared file cannot lift the bounds protecting the \
                         machine that runs it; raise it on the command line with --limit {name}={v}"
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn validate(&self, ck: &Checker) -> Result<(), ScenarioError> {
        self.check_meta(ck)?;
        self.check_limits(ck)?;
        self.check_counts(ck)?;
        // Unique component names across kinds.
        let mut seen: HashMap<&str, Range<usize>> = HashMap::new();
        let names = self
            .lbs
            .iter()
            .map(|c| &c.name)
            .chain(self.gateways.iter().map(|c| &c.name))
            .chain(self.services.iter().map(|c| &c.name));
        for n in names {
            if seen.insert(n.get_ref(), n.span()).is_some() {
                return Err(ck.at(
                    n.span(),
                    format!("component name {:?} is used twice", n.get_ref()),
                ));
            }
        }
        let comps = self.components();
        for (i, lb) in self.lbs.iter().enumerate() {
            let who = format!("lb {:?}", lb.name.get_ref());
            let nodes = u64::from(lb.nodes);
            let flows = u64::from(lb.flows_per_node);
            ck.count(
                &format!("lb.{i}.nodes"),
                &format!("{who}: nodes"),
                nodes,
                1,
                MAX_NODES.into(),
            )?;
            ck.count(
                &format!("lb.{i}.flows_per_node"),
                &format!("{who}: flows_per_node"),
                flows,
                1,
                MAX_SLOTS.into(),
            )?;
            if let Some(c) = &lb.connections {
                ck.count(
                    &format!("lb.{i}.connections.maxconn"),
                    &format!("{who}: connections.maxconn"),
                    c.maxconn.into(),
                    1,
                    MAX_SLOTS.into(),
                )?;
                ck.duration(
                    &format!("lb.{i}.connections.keepalive_timeout"),
                    &format!("{who}: connections.keepalive_timeout"),
                    c.keepalive_timeout,
                    Nanos::ZERO,
                )?;
            }
        }
        self.check_services(ck)?;
        self.check_routes(ck, &comps)?;
        let route_list = || sorted_names(self.routes.iter().map(|r| r.name.get_ref().as_str()));
        for (i, g) in self.gateways.iter().enumerate() {
            let p = format!("gateway.{i}");
            let who = format!("gateway {:?}", g.name.get_ref());
            if let Some(d) = &g.dependency
                && self.route_index(d.get_ref()).is_none()
            {
                return Err(ck.at(
                    d.span(),
                    format!(
                        "unknown route {:?}: expected one of {}",
                        d.get_ref(),
                        route_list()
                    ),
                ));
            }
            ck.duration(
                &format!("{p}.timeout"),
                &format!("{who}: timeout"),
                g.timeout,
                Nanos::NANOSECOND,
            )?;
            if let Some(r) = &g.retry {
                ck.retry(&p, &who, r)?;
            }
            if let Some(b) = &g.budget {
                ck.budget(&p, &who, b)?;
            }
            ck.count(
                &format!("{p}.instances"),
                &format!("{who}: instances"),
                g.instances.into(),
                1,
                MAX_PODS.into(),
            )?;
            if let Some(l) = &g.limit {
                ck.limit(&p, &who, l)?;
            }
            if let Some(sat) = &g.saturation {
                if g.limit.is_none() {
                    return Err(ck.key(
                        &format!("{p}.saturation"),
                        format!(
                            "{who}: saturation sheds by the fill of the gateway's `limit`: give a `limit` too"
                        ),
                    ));
                }
                sat.validate().map_err(|e| {
                    ck.problem(
                        &p,
                        &who,
                        "saturation",
                        FieldProblem {
                            field: e.field().to_owned(),
                            message: e.to_string(),
                        },
                    )
                })?;
            }
            if let Some(q) = &g.queue {
                if g.limit.is_none() {
                    return Err(ck.key(
                        &format!("{p}.queue"),
                        format!(
                            "{who}: a queue waits for the gateway's `limit`: give a `limit` too"
                        ),
                    ));
                }
                q.validate().map_err(|e| {
                    ck.problem(
                        &p,
                        &who,
                        "queue",
                        FieldProblem {
                            field: e.field().to_owned(),
                            message: e.to_string(),
                        },
                    )
                })?;
                ck.duration(
                    &format!("{p}.queue.timeout"),
                    &format!("{who}: queue.timeout"),
                    q.timeout,
                    Nanos::NANOSECOND,
                )?;
            }
        }
        self.check_clients(ck)?;
        self.check_failovers(ck, &comps)?;
        self.check_dependency_cycles(ck, &comps)?;
        self.check_actions(ck, &comps)?;
        self.check_action_ids(ck)?;
        self.check_slos(ck)
    }

    /// Action `id`s: unique, and spelled so that a sweep path
    /// (`action.<id>.<field>`) cannot mistake one for an index.
    fn check_action_ids(&self, ck: &Checker) -> Result<(), ScenarioError> {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, a) in self.actions.iter().enumerate() {
            let Some(id) = a.get_ref().id.as_deref() else {
                continue;
            };
            let path = format!("action.{i}.id");
            let well_formed = !id.is_empty()
                && id.len() <= 64
                && !id.bytes().all(|b| b.is_ascii_digit())
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !well_formed {
                return Err(ck.key(
                    &path,
                    format!(
                        "action: id {id:?}: expected 1 to 64 letters, digits, `_` or `-`, \
                         not only digits (an index already names the action)"
                    ),
                ));
            }
            if let Some(first) = seen.insert(id, i) {
                return Err(ck.key(
                    &path,
                    format!("action: id {id:?} is already used by action {first} (0-based)"),
                ));
            }
        }
        Ok(())
    }

    fn check_slos(&self, ck: &Checker) -> Result<(), ScenarioError> {
        let m = &self.scenario;
        ck.count(
            "slo",
            "number of [[slo]] tables",
            self.slos.len() as u64,
            0,
            MAX_ENTITIES as u64,
        )?;
        for (i, s) in self.slos.iter().enumerate() {
            let p = format!("slo.{i}");
            let route = s.route.get_ref();
            if self.route_index(route).is_none() {
                return Err(ck.at(
                    s.route.span(),
                    format!(
                        "slo: unknown route {route:?}: expected one of {}",
                        sorted_names(self.routes.iter().map(|r| r.name.get_ref().as_str()))
                    ),
                ));
            }
            let who = format!("slo {route:?}");
            if s.error_rate.is_none() && s.job_wait.is_none() {
                return Err(ck.key(&p, format!("{who}: expected error_rate, job_wait or both")));
            }
            if let Some(e) = s.error_rate {
                // Open: an error rate of 1 could never be exceeded.
                ck.fraction(
                    &format!("{p}.error_rate"),
                    &format!("{who}: error_rate"),
                    e,
                    true,
                )?;
            }
            ck.duration(
                &format!("{p}.window"),
                &format!("{who}: window"),
                s.window,
                m.interval,
            )?;
            if s.window > m.duration {
                return Err(ck.key(
                    &format!("{p}.window"),
                    format!(
                        "{who}: window {} is longer than the run ({})",
                        units::format_duration(s.window),
                        units::format_duration(m.duration)
                    ),
                ));
            }
            if let Some(w) = s.job_wait {
                ck.duration(
                    &format!("{p}.job_wait"),
                    &format!("{who}: job_wait"),
                    w,
                    Nanos::NANOSECOND,
                )?;
            }
        }
        Ok(())
    }

    fn check_meta(&self, ck: &Checker) -> Result<(), ScenarioError> {
        let m = &self.scenario;
        ck.duration(
            "scenario.duration",
            "[scenario] duration",
            m.duration,
            Nanos::NANOSECOND,
        )?;
        if m.interval == Nanos::ZERO {
            return Err(ck.key("scenario.interval", "[scenario] interval must be > 0"));
        }
        // When `interval` is not written its default is what is too long,
        // and the `duration` is what the user can see and change.
        let interval_at = ["scenario.interval", "scenario.duration"];
        let written = ck.doc.exact("scenario.interval").is_some();
        let interval = if written {
            format!("interval ({})", units::format_duration(m.interval))
        } else {
            format!("interval (default {})", units::format_duration(m.interval))
        };
        if m.interval > m.duration {
            return Err(ck.first(
                &interval_at,
                format!(
                    "[scenario] {interval} must be ≤ duration ({})",
                    units::format_duration(m.duration)
                ),
            ));
        }
        let intervals = m.duration.div_ceil(m.interval);
        if intervals > MAX_INTERVALS {
            // The smallest interval that fits, rounded up to a whole unit.
            let min = Nanos::from_nanos(m.duration.as_nanos().div_ceil(MAX_INTERVALS));
            let unit = [
                Nanos::SECOND,
                stormbreak_policy::Nanos::MILLISECOND,
                Nanos::MICROSECOND,
            ]
            .into_iter()
            .find(|u| min >= *u)
            .unwrap_or(Nanos::NANOSECOND);
            let suggest = unit * min.div_ceil(unit);
            return Err(ck.first(
                &interval_at,
                format!(
                    "[scenario] duration {} / {interval} makes {intervals} recording intervals, \
                     at most {MAX_INTERVALS}: use an interval of at least \"{}\"",
                    units::format_duration(m.duration),
                    units::format_duration(suggest)
                ),
            ));
        }
        if let Some(c) = &m.clock_origin
            && parse_clock(c).is_none()
        {
            return Err(ck.key(
                "scenario.clock_origin",
                format!("[scenario] clock_origin: expected \"HH:MM\" (00:00 to 23:59), got {c:?}"),
            ));
        }
        Ok(())
    }

    fn check_counts(&self, ck: &Checker) -> Result<(), ScenarioError> {
        // Components count together; point at the kind that has the most.
        let mut kinds = [
            ("lb", self.lbs.len()),
            ("gateway", self.gateways.len()),
            ("service", self.services.len()),
        ];
        kinds.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        let counts = [
            (
                "components",
                kinds[0].0,
                self.lbs.len() + self.gateways.len() + self.services.len(),
            ),
            ("routes", "route", self.routes.len()),
            ("clients", "client", self.clients.len()),
            ("failovers", "failover", self.failovers.len()),
            ("actions", "action", self.actions.len()),
        ];
        for (what, key, n) in counts {
            if n > MAX_ENTITIES {
                // The first entry past the limit, or the list when the
                // components of several kinds overflow together.
                return Err(ck.key(
                    &format!("{key}.{MAX_ENTITIES}"),
                    format!("at most {MAX_ENTITIES} {what}, got {n}"),
                ));
            }
        }
        Ok(())
    }

    fn check_services(&self, ck: &Checker) -> Result<(), ScenarioError> {
        for (i, s) in self.services.iter().enumerate() {
            let p = format!("service.{i}");
            let who = format!("service {:?}", s.name.get_ref());
            let field = |f: &str| (format!("{p}.{f}"), format!("{who}: {f}"));
            let (path, what) = field("replicas");
            let min_replicas = if s.autoscaler.is_some() { 0 } else { 1 };
            ck.count(
                &path,
                &what,
                s.replicas.into(),
                min_replicas,
                MAX_PODS.into(),
            )?;
            let (path, what) = field("app.workers");
            ck.count(&path, &what, s.app.workers.into(), 1, MAX_SLOTS.into())?;
            if let Some(q) = s.app.queue {
                let (path, what) = field("app.queue");
                ck.count(&path, &what, q.into(), 0, MAX_SLOTS.into())?;
            }
            s.app.service_time.check().map_err(|e| {
                ck.key(
                    &format!("{p}.app.service_time"),
                    format!("{who}: app.service_time: {e}"),
                )
            })?;
            if let Some(sc) = &s.sidecar {
                let (path, what) = field("sidecar.limit");
                ck.count(&path, &what, sc.limit.into(), 1, MAX_SLOTS.into())?;
                let (path, what) = field("sidecar.queue");
                ck.count(&path, &what, sc.queue.into(), 0, MAX_SLOTS.into())?;
                if let Some(t) = sc.queue_timeout {
                    let (path, what) = field("sidecar.queue_timeout");
                    ck.duration(&path, &what, t, Nanos::NANOSECOND)?;
                }
                if sc.queue > 0 && sc.queue_timeout.is_none() {
                    return Err(ck.key(
                        &format!("{p}.sidecar.queue"),
                        format!("{who}: sidecar.queue > 0 needs sidecar.queue_timeout"),
                    ));
                }
            }
            if let Some(t) = s.pod_start {
                let (path, what) = field("pod_start");
                ck.duration(&path, &what, t, Nanos::ZERO)?;
                if let Some(a) = &s.autoscaler
                    && a.pod_start != t
                {
                    return Err(ck.key(
                        &path,
                        format!(
                            "{who}: pod_start {} differs from autoscaler.pod_start {}: a pod starts alike whoever asks for it; give one",
                            units::format_duration(t),
                            units::format_duration(a.pod_start)
                        ),
                    ));
                }
            }
            let (path, what) = field("controller_period");
            ck.duration(&path, &what, s.controller_period, Nanos::NANOSECOND)?;
            let Some(a) = &s.autoscaler else { continue };
            let (path, what) = field("autoscaler.max");
            ck.count(&path, &what, a.max.into(), 1, MAX_PODS.into())?;
            if a.min == 0 || a.min > a.max {
                return Err(ck.key(
                    &format!("{p}.autoscaler.min"),
                    format!(
                        "{who}: autoscaler: expected 1 ≤ min ≤ max, got min {} max {}",
                        a.min, a.max
                    ),
                ));
            }
            if !(a.target.is_finite() && a.target > 0.0) {
                return Err(ck.key(
                    &format!("{p}.autoscaler.target"),
                    format!(
                        "{who}: autoscaler.target must be a finite number > 0, got {}",
                        a.target
                    ),
                ));
            }
            // CPU targets become a whole-percent utilisation, as in an HPA
            // manifest (`averageUtilization`): 0.005 would round to 0%.
            if a.metric != ScaleMetric::SidecarSaturation && a.target < 0.01 {
                return Err(ck.key(
                    &format!("{p}.autoscaler.target"),
                    format!(
                        "{who}: autoscaler.target for a CPU metric is a utilisation of at least 0.01 (1%), got {}",
                        a.target
                    ),
                ));
            }
            if s.replicas < a.min || s.replicas > a.max {
                return Err(ck.key(
                    &format!("{p}.replicas"),
                    format!(
                        "{who}: replicas {} outside the autoscaler's [{}, {}]",
                        s.replicas, a.min, a.max
                    ),
                ));
            }
            // A pod may start at once (pod_start = "0"); the HPA needs a period.
            let (path, what) = field("autoscaler.pod_start");
            ck.duration(&path, &what, a.pod_start, Nanos::ZERO)?;
            let (path, what) = field("autoscaler.sync_period");
            ck.duration(&path, &what, a.sync_period, Nanos::NANOSECOND)?;
            if a.metric == ScaleMetric::SidecarSaturation && s.sidecar.is_none() {
                return Err(ck.key(
                    &format!("{p}.autoscaler.metric"),
                    format!(
                        "{who}: autoscaler.metric sidecar_saturation needs a [service.sidecar]"
                    ),
                ));
            }
            // The configuration the engine will run, checked by the policy
            // crate's own rules (behavior's bounds among them).
            a.hpa_config().validate().map_err(|e| {
                let (dotted, spelt) = table_field(&e);
                ck.key(
                    &format!("{p}.autoscaler.{dotted}"),
                    format!(
                        "{who}: autoscaler.{spelt} must be {}, got {}",
                        e.expected(),
                        e.got()
                    ),
                )
            })?;
        }
        Ok(())
    }

    fn check_routes(
        &self,
        ck: &Checker,
        comps: &HashMap<&str, ComponentRef>,
    ) -> Result<(), ScenarioError> {
        let mut route_names: HashMap<&str, ()> = HashMap::new();
        for r in &self.routes {
            if route_names.insert(r.name.get_ref(), ()).is_some() {
                return Err(ck.at(
                    r.name.span(),
                    format!("route {:?} is defined twice", r.name.get_ref()),
                ));
            }
            if r.path.is_empty() {
                return Err(ck.at(r.name.span(), "route path must name at least one component"));
            }
            if r.path.len() > MAX_HOPS {
                return Err(ck.at(
                    r.name.span(),
                    format!("route path has {} hops; at most {MAX_HOPS}", r.path.len()),
                ));
            }
            for (i, hop) in r.path.iter().enumerate() {
                let last = i + 1 == r.path.len();
                match comps.get(hop.get_ref().as_str()) {
                    None => {
                        return Err(ck.at(
                            hop.span(),
                            format!(
                                "unknown component {:?}: expected one of {}",
                                hop.get_ref(),
                                sorted_names(comps.keys().copied())
                            ),
                        ));
                    }
                    Some(ComponentRef::Service(_)) if !last => {
                        return Err(ck.at(hop.span(), "a service must be the last hop of a route"));
                    }
                    Some(ComponentRef::Lb(_) | ComponentRef::Gateway(_)) if last => {
                        return Err(ck.at(hop.span(), "the last hop of a route must be a service"));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn check_clients(&self, ck: &Checker) -> Result<(), ScenarioError> {
        let run = self.scenario.duration;
        let route_list = || sorted_names(self.routes.iter().map(|r| r.name.get_ref().as_str()));
        let mut sites: Vec<&str> = Vec::new();
        for (i, c) in self.clients.iter().enumerate() {
            let p = format!("client.{i}");
            let who = format!("client {:?}", c.name.get_ref());
            let field = |f: &str| (format!("{p}.{f}"), format!("{who}: {f}"));
            for r in [Some(&c.route), c.failover_route.as_ref()]
                .into_iter()
                .flatten()
            {
                if self.route_index(r.get_ref()).is_none() {
                    return Err(ck.at(
                        r.span(),
                        format!(
                            "unknown route {:?}: expected one of {}",
                            r.get_ref(),
                            route_list()
                        ),
                    ));
                }
            }
            if let Some(conn) = &c.connections {
                let (path, what) = field("connections.instances");
                ck.count(&path, &what, conn.instances.into(), 1, MAX_INSTANCES.into())?;
                let (path, what) = field("connections.idle_timeout");
                ck.duration(&path, &what, conn.idle_timeout, Nanos::ZERO)?;
                if let Some(b) = &conn.reconnect_backoff {
                    b.validate().map_err(|e| {
                        ck.first(
                            &[
                                &format!("{p}.connections.reconnect_backoff.{}", e.field()),
                                &format!("{p}.connections.reconnect_backoff"),
                            ],
                            format!("{who}: connections.reconnect_backoff: {e}"),
                        )
                    })?;
                }
                let first = self
                    .route_index(c.route.get_ref())
                    .and_then(|r| self.routes[r].path.first())
                    .map(|h| h.get_ref().as_str());
                let lb_has_conns = self
                    .lbs
                    .iter()
                    .any(|l| Some(l.name.get_ref().as_str()) == first && l.connections.is_some());
                if !lb_has_conns {
                    return Err(ck.key(
                        &format!("{p}.connections"),
                        format!(
                            "{who}: connections needs its route's first hop to be an [[lb]] with a connections table; route {:?} starts at {:?}",
                            c.route.get_ref(),
                            first.unwrap_or("nothing")
                        ),
                    ));
                }
            }
            let (path, what) = field("rate");
            ck.rate(&path, &what, c.rate, run)?;
            let (path, what) = field("timeout");
            ck.duration(&path, &what, c.timeout, Nanos::NANOSECOND)?;
            let mut last: Nanos = Nanos::ZERO;
            for (j, s) in c.steps.iter().enumerate() {
                let sp = format!("{p}.step.{j}");
                let what = format!("{who}: step {}", j + 1);
                ck.duration(
                    &format!("{sp}.at"),
                    &format!("{what}: at"),
                    s.at,
                    Nanos::ZERO,
                )?;
                ck.duration(
                    &format!("{sp}.ramp"),
                    &format!("{what}: ramp"),
                    s.ramp,
                    Nanos::ZERO,
                )?;
                if s.at < last {
                    return Err(ck.key(
                        &format!("{sp}.at"),
                        format!(
                            "{what}: steps must be in time order (this one starts at {}, \
                             before the previous one ends at {})",
                            units::format_duration(s.at),
                            units::format_duration(last)
                        ),
                    ));
                }
                ck.rate(&format!("{sp}.rate"), &format!("{what}: rate"), s.rate, run)?;
                last = s.at.saturating_add(s.ramp);
            }
            if let Some(d) = &c.diurnal {
                let (path, what) = field("diurnal.amplitude");
                ck.fraction(&path, &what, d.amplitude, true)?;
                let (path, what) = field("diurnal.period");
                ck.duration(&path, &what, d.period, Nanos::NANOSECOND)?;
                let (path, what) = field("diurnal.peak_at");
                ck.duration(&path, &what, d.peak_at, Nanos::ZERO)?;
            }
            let (path, what) = field("fanout");
            ck.count(&path, &what, c.fanout.into(), 0, MAX_FANOUT.into())?;
            if let Some(n) = c.fanout_max_in_flight {
                let (path, what) = field("fanout_max_in_flight");
                ck.count(&path, &what, n.into(), 1, MAX_FANOUT_IN_FLIGHT.into())?;
            }
            // Spawned attempts sent with no delay would all land in the
            // same instant as the failure that spawned them.
            let (path, what) = field("fanout_delay");
            ck.duration(&path, &what, c.fanout_delay, Nanos::MICROSECOND)?;
            if let Some(t) = c.give_up_after {
                let (path, what) = field("give_up_after");
                ck.duration(&path, &what, t, Nanos::NANOSECOND)?;
            }
            if c.fanout > 0 && c.give_up_after.is_none() {
                return Err(ck.key(
                    &format!("{p}.fanout"),
                    format!(
                        "{who}: fanout needs give_up_after \
                         (how long an operation keeps spawning attempts)"
                    ),
                ));
            }
            if let Some(w) = c.workers {
                let (path, what) = field("workers");
                ck.count(&path, &what, w.into(), 1, MAX_SLOTS.into())?;
                if c.fanout > 0 {
                    return Err(ck.key(
                        &path,
                        format!("{who}: workers (a job queue) cannot be combined with fanout"),
                    ));
                }
            }
            if let Some(r) = &c.retry {
                ck.retry(&p, &who, r)?;
            }
            if let Some(b) = &c.budget {
                ck.budget(&p, &who, b)?;
            }
            if let Some(site) = c.site.as_deref()
                && !sites.contains(&site)
            {
                sites.push(site);
                if sites.len() > MAX_SITES {
                    return Err(ck.key(
                        &format!("{p}.site"),
                        format!("at most {MAX_SITES} distinct client sites; {site:?} is one more"),
                    ));
                }
            }
        }
        Ok(())
    }

    fn check_actions(
        &self,
        ck: &Checker,
        comps: &HashMap<&str, ComponentRef>,
    ) -> Result<(), ScenarioError> {
        let m = &self.scenario;
        let route_list = || sorted_names(self.routes.iter().map(|r| r.name.get_ref().as_str()));
        let sites: Vec<&str> = self
            .clients
            .iter()
            .filter_map(|c| c.site.as_deref())
            .collect();
        // Distinct (route, class) shed rules each LB may hold at once; the
        // engine sizes its rule table from the routes, bounded by the
        // policy crate's largest table.
        let mut shed_keys: HashMap<usize, std::collections::HashSet<(usize, Option<Criticality>)>> =
            HashMap::new();
        for (i, spanned) in self.actions.iter().enumerate() {
            let a = spanned.get_ref();
            let p = format!("action.{i}");
            let here = |msg: String| ck.at(spanned.span(), format!("action: {msg}"));
            let at_key =
                |key: &str, msg: String| ck.key(&format!("{p}.{key}"), format!("action: {msg}"));
            let client = |n: &str| {
                self.clients
                    .iter()
                    .position(|c| c.name.get_ref() == n)
                    .ok_or_else(|| {
                        ck.first(
                            &[&format!("{p}.client"), &format!("{p}.clients")],
                            format!("action: unknown client {n:?}"),
                        )
                    })
            };
            let lb = |n: &str| match comps.get(n) {
                Some(ComponentRef::Lb(i)) => Ok(*i),
                _ => Err(at_key("lb", format!("{n:?} is not an lb"))),
            };
            let service = |n: &str| match comps.get(n) {
                Some(ComponentRef::Service(i)) => Ok(*i),
                _ => Err(at_key(
                    "service",
                    format!(
                        "{}: {n:?} is not a service: expected one of {}",
                        a.kind.name(),
                        sorted_names(self.services.iter().map(|s| s.name.get_ref().as_str()))
                    ),
                )),
            };
            let route = |n: &str| {
                self.route_index(n).ok_or_else(|| {
                    at_key(
                        "route",
                        format!("unknown route {n:?}: expected one of {}", route_list()),
                    )
                })
            };
            if a.at > m.duration {
                return Err(at_key(
                    "at",
                    format!(
                        "at {} is after the end of the run ({})",
                        units::format_duration(a.at),
                        units::format_duration(m.duration)
                    ),
                ));
            }
            if let Some(d) = a.lasts {
                if !a.kind.revertible() {
                    return Err(at_key(
                        "for",
                        format!(
                            "{}: `for` is not supported: only pause_nodes, shed, slow_service, set_capacity, kill_pods, fail_pods, stall and set_lb_limit can be undone after a while",
                            a.kind.name()
                        ),
                    ));
                }
                ck.duration(
                    &format!("{p}.for"),
                    &format!("action: {}: for", a.kind.name()),
                    d,
                    Nanos::NANOSECOND,
                )?;
            }
            match &a.kind {
                ActionKind::SlowService {
                    service: name,
                    factor: given,
                    capacity,
                    add,
                } => {
                    service(name)?;
                    if given.is_some() && capacity.is_some() {
                        return Err(at_key(
                            "capacity",
                            "slow_service: give factor or capacity, not both \
                             (capacity = C is factor = 1/C)"
                                .into(),
                        ));
                    }
                    if let Some(c) = *capacity {
                        if !(c.is_finite() && c > 0.0 && c <= 1.0) {
                            return Err(at_key(
                                "capacity",
                                format!(
                                    "slow_service: capacity is the share of capacity that \
                                     remains, a number in (0, 1], got {c}"
                                ),
                            ));
                        }
                        if 1.0 / c > MAX_SLOWDOWN {
                            return Err(at_key(
                                "capacity",
                                format!(
                                    "slow_service: capacity {c} is a slowdown of more than \
                                     {MAX_SLOWDOWN}× (capacity at least {}); beyond it, use stall",
                                    1.0 / MAX_SLOWDOWN
                                ),
                            ));
                        }
                    }
                    let factor = &crate::scenario::slowdown(*given, *capacity);
                    if !(factor.is_finite() && *factor > 0.0 && *factor <= MAX_SLOWDOWN) {
                        return Err(at_key(
                            "factor",
                            format!(
                                "slow_service: factor must be a number in (0, {MAX_SLOWDOWN}], got {factor}"
                            ),
                        ));
                    }
                    ck.duration(
                        &format!("{p}.add"),
                        "action: slow_service: add",
                        *add,
                        Nanos::ZERO,
                    )?;
                    if *factor == 1.0 && *add == Nanos::ZERO {
                        return Err(here(
                            "slow_service: give factor (≠ 1) or add (> 0), or capacity (< 1) \
                             instead of factor; as written it changes nothing"
                                .into(),
                        ));
                    }
                }
                ActionKind::SetCapacity {
                    service: name,
                    workers,
                    sidecar_limit,
                } => {
                    let i = service(name)?;
                    if workers.is_none() && sidecar_limit.is_none() {
                        return Err(here(
                            "set_capacity: give workers, sidecar_limit or both".into(),
                        ));
                    }
                    if let Some(w) = workers {
                        ck.count(
                            &format!("{p}.workers"),
                            "action: set_capacity: workers",
                            (*w).into(),
                            1,
                            MAX_SLOTS.into(),
                        )?;
                    }
                    if let Some(l) = sidecar_limit {
                        if self.services[i].sidecar.is_none() {
                            return Err(at_key(
                                "sidecar_limit",
                                format!("set_capacity: service {name:?} has no sidecar"),
                            ));
                        }
                        ck.count(
                            &format!("{p}.sidecar_limit"),
                            "action: set_capacity: sidecar_limit",
                            (*l).into(),
                            1,
                            MAX_SLOTS.into(),
                        )?;
                    }
                }
                ActionKind::KillPods {
                    service: name,
                    pods,
                }
                | ActionKind::FailPods {
                    service: name,
                    pods,
                } => {
                    service(name)?;
                    ck.count(
                        &format!("{p}.pods"),
                        &format!("action: {}: pods", a.kind.name()),
                        (*pods).into(),
                        1,
                        MAX_PODS.into(),
                    )?;
                }
                ActionKind::Stall { targets, mode: _ } => {
                    if targets.is_empty() {
                        return Err(at_key(
                            "targets",
                            "stall: targets must name at least one component".into(),
                        ));
                    }
                    for (j, t) in targets.iter().enumerate() {
                        if !comps.contains_key(t.as_str()) {
                            return Err(at_key(
                                "targets",
                                format!(
                                    "stall: unknown component {t:?}: expected an lb, gateway or service"
                                ),
                            ));
                        }
                        if targets[..j].contains(t) {
                            return Err(at_key("targets", format!("stall: {t:?} is listed twice")));
                        }
                    }
                }
                ActionKind::SetLbLimit {
                    lb: name,
                    node,
                    flows_per_node,
                    maxconn,
                } => {
                    let i = lb(name)?;
                    if flows_per_node.is_none() && maxconn.is_none() {
                        return Err(here(
                            "set_lb_limit: give flows_per_node, maxconn or both".into(),
                        ));
                    }
                    if let Some(m) = maxconn {
                        if self.lbs[i].connections.is_none() {
                            return Err(at_key(
                                "maxconn",
                                format!("set_lb_limit: lb {name:?} has no connections table"),
                            ));
                        }
                        ck.count(
                            &format!("{p}.maxconn"),
                            "action: set_lb_limit: maxconn",
                            (*m).into(),
                            1,
                            MAX_SLOTS.into(),
                        )?;
                    }
                    if let Some(n) = node
                        && *n >= self.lbs[i].nodes
                    {
                        return Err(at_key(
                            "node",
                            format!(
                                "set_lb_limit: node must be in 0..{} (lb {name:?} has {} nodes), got {n}",
                                self.lbs[i].nodes, self.lbs[i].nodes
                            ),
                        ));
                    }
                    if let Some(f) = flows_per_node {
                        ck.count(
                            &format!("{p}.flows_per_node"),
                            "action: set_lb_limit: flows_per_node",
                            (*f).into(),
                            1,
                            MAX_SLOTS.into(),
                        )?;
                    }
                }
                ActionKind::PauseNodes { lb: name, nodes } => {
                    let i = lb(name)?;
                    if *nodes == 0 || *nodes > self.lbs[i].nodes {
                        return Err(at_key(
                            "nodes",
                            format!(
                                "pause_nodes: nodes must be in 1..={}, got {nodes}",
                                self.lbs[i].nodes
                            ),
                        ));
                    }
                }
                ActionKind::RestartNodes { lb: name } => {
                    lb(name)?;
                }
                ActionKind::SetRetry { target, retry } => {
                    let known = self.clients.iter().any(|c| c.name.get_ref() == target)
                        || self.gateways.iter().any(|g| g.name.get_ref() == target);
                    if !known {
                        return Err(at_key(
                            "target",
                            format!("set_retry: {target:?} is neither a client nor a gateway"),
                        ));
                    }
                    if let Some(r) = retry {
                        check_retry(r).map_err(|e| {
                            ck.key(
                                &format!("{p}.retry.{}", e.field),
                                format!("action: set_retry: {e}"),
                            )
                        })?;
                    }
                }
                ActionKind::Shed {
                    lb: l,
                    route: r,
                    class,
                    status,
                    retry_after,
                } => {
                    let li = lb(l)?;
                    let ri = route(r)?;
                    let rule = stormbreak_policy::shed::ShedRule {
                        route: ri as u32,
                        class: *class,
                        status: *status,
                        retry_after: *retry_after,
                    };
                    rule.validate().map_err(|e| here(e.to_string()))?;
                    let at_lb = shed_keys.entry(li).or_default();
                    at_lb.insert((ri, *class));
                    if at_lb.len() > stormbreak_policy::shed::ShedRules::MAX_CAPACITY {
                        return Err(here(format!(
                            "shed: more than {} distinct (route, class) rules at lb {l:?}",
                            stormbreak_policy::shed::ShedRules::MAX_CAPACITY
                        )));
                    }
                }
                ActionKind::Unshed {
                    lb: l, route: r, ..
                } => {
                    lb(l)?;
                    route(r)?;
                }
                ActionKind::Ramp {
                    lb: l,
                    route: r,
                    sites: ramp_sites,
                    restore,
                    status,
                } => {
                    lb(l)?;
                    route(r)?;
                    restore.validate().map_err(|e| {
                        // Ramp fields sit under `restore.ramp`, the rest
                        // under `restore` itself.
                        ck.first(
                            &[
                                &format!("{p}.restore.ramp.{}", e.field()),
                                &format!("{p}.restore.{}", e.field()),
                                &format!("{p}.restore"),
                            ],
                            format!("action: {e}"),
                        )
                    })?;
                    if ![403, 429, 503].contains(status) {
                        return Err(at_key(
                            "status",
                            format!("ramp: status must be 403, 429 or 503, got {status}"),
                        ));
                    }
                    if ramp_sites.is_empty() {
                        return Err(at_key(
                            "sites",
                            "ramp: sites must name at least one client site".into(),
                        ));
                    }
                    for site in ramp_sites {
                        if !sites.contains(&site.as_str()) {
                            return Err(at_key(
                                "sites",
                                format!("ramp: no client has site {site:?}"),
                            ));
                        }
                    }
                }
                ActionKind::Admit {
                    lb: l,
                    route: r,
                    site,
                    fraction,
                    status,
                } => {
                    lb(l)?;
                    route(r)?;
                    ck.fraction(
                        &format!("{p}.fraction"),
                        "action: admit: fraction",
                        *fraction,
                        false,
                    )?;
                    if ![403, 429, 503].contains(status) {
                        return Err(at_key(
                            "status",
                            format!("admit: status must be 403, 429 or 503, got {status}"),
                        ));
                    }
                    if let Some(site) = site
                        && !sites.contains(&site.as_str())
                    {
                        return Err(at_key(
                            "site",
                            format!("admit: no client has site {site:?}"),
                        ));
                    }
                }
                ActionKind::ShiftTraffic { clients, fraction } => {
                    ck.fraction(
                        &format!("{p}.fraction"),
                        "action: shift_traffic: fraction",
                        *fraction,
                        false,
                    )?;
                    for c in clients {
                        let i = client(c)?;
                        if self.clients[i].failover_route.is_none() {
                            return Err(at_key(
                                "clients",
                                format!("shift_traffic: client {c:?} has no failover_route"),
                            ));
                        }
                    }
                }
                ActionKind::SetRate { client: c, rate } => {
                    client(c)?;
                    ck.rate(
                        &format!("{p}.rate"),
                        "action: set_rate: rate",
                        *rate,
                        m.duration,
                    )?;
                }
            }
        }
        Ok(())
    }
}

impl Scenario {
    fn check_failovers(
        &self,
        ck: &Checker,
        comps: &HashMap<&str, ComponentRef>,
    ) -> Result<(), ScenarioError> {
        let lbs = || sorted_names(self.lbs.iter().map(|l| l.name.get_ref().as_str()));
        for (i, f) in self.failovers.iter().enumerate() {
            let fp = format!("failover.{i}");
            let lb = |n: &Spanned<String>, role: &str| match comps.get(n.get_ref().as_str()) {
                Some(ComponentRef::Lb(i)) => Ok(*i),
                Some(_) => Err(ck.at(
                    n.span(),
                    format!(
                        "failover {role}: {:?} is not an lb; expected one of {}",
                        n.get_ref(),
                        lbs()
                    ),
                )),
                None => Err(ck.at(
                    n.span(),
                    format!(
                        "failover {role}: unknown lb {:?}; expected one of {}",
                        n.get_ref(),
                        lbs()
                    ),
                )),
            };
            let p = lb(&f.primary, "primary")?;
            let s = lb(&f.secondary, "secondary")?;
            if p == s {
                return Err(ck.at(
                    f.secondary.span(),
                    "failover: primary and secondary must be different lbs",
                ));
            }
            if f.clients.is_empty() {
                return Err(ck.at(
                    f.primary.span(),
                    "failover: clients must name at least one client population",
                ));
            }
            for c in &f.clients {
                match self
                    .clients
                    .iter()
                    .find(|x| x.name.get_ref() == c.get_ref())
                {
                    None => {
                        return Err(ck.at(
                            c.span(),
                            format!(
                                "failover: unknown client {:?}; expected one of {}",
                                c.get_ref(),
                                sorted_names(
                                    self.clients.iter().map(|x| x.name.get_ref().as_str())
                                )
                            ),
                        ));
                    }
                    Some(x) if x.failover_route.is_none() => {
                        return Err(ck.at(
                            c.span(),
                            format!("failover: client {:?} has no failover_route", c.get_ref()),
                        ));
                    }
                    Some(_) => {}
                }
            }
            f.policy
                .validate()
                .map_err(|e| ck.key(&format!("{fp}.policy.{}", e.field()), format!("{e}")))?;
            let policy = &f.policy;
            ck.duration(
                &format!("{fp}.period"),
                "failover: period",
                f.period,
                Nanos::NANOSECOND,
            )?;
            ck.duration(
                &format!("{fp}.policy.half_life"),
                "failover policy: half_life",
                policy.half_life,
                Nanos::ZERO,
            )?;
            ck.duration(
                &format!("{fp}.policy.stale_after"),
                "failover policy: stale_after",
                policy.stale_after,
                Nanos::ZERO,
            )?;
        }
        Ok(())
    }

    /// A gateway calls its dependency route before forwarding; if that route
    /// passes through the gateway again (directly or through other
    /// gateways' dependencies), one request would spawn calls without end.
    fn check_dependency_cycles(
        &self,
        ck: &Checker,
        comps: &HashMap<&str, ComponentRef>,
    ) -> Result<(), ScenarioError> {
        // Edges: gateway → every gateway on its dependency route, and every
        // gateway reachable from those by their own dependencies.
        let gateways_on = |route: usize| -> Vec<usize> {
            self.routes[route]
                .path
                .iter()
                .filter_map(|h| match comps.get(h.get_ref().as_str()) {
                    Some(ComponentRef::Gateway(g)) => Some(*g),
                    _ => None,
                })
                .collect()
        };
        let edges: Vec<Vec<usize>> = self
            .gateways
            .iter()
            .map(|g| {
                g.dependency
                    .as_ref()
                    .and_then(|d| self.route_index(d.get_ref()))
                    .map_or_else(Vec::new, gateways_on)
            })
            .collect();
        // Iterative DFS with colours: 0 new, 1 on the stack, 2 done.
        let mut colour = vec![0u8; self.gateways.len()];
        for start in 0..self.gateways.len() {
            if colour[start] != 0 {
                continue;
            }
            let mut stack = vec![(start, 0usize)];
            colour[start] = 1;
            while let Some(&mut (g, ref mut next)) = stack.last_mut() {
                if let Some(&h) = edges[g].get(*next) {
                    *next += 1;
                    match colour[h] {
                        0 => {
                            colour[h] = 1;
                            stack.push((h, 0));
                        }
                        1 => {
                            let mut cycle: Vec<&str> = stack
                                .iter()
                                .skip_while(|(x, _)| *x != h)
                                .map(|(x, _)| self.gateways[*x].name.get_ref().as_str())
                                .collect();
                            cycle.push(self.gateways[h].name.get_ref());
                            let dep = self.gateways[g].dependency.as_ref().expect("has an edge");
                            return Err(ck.at(
                                dep.span(),
                                format!(
                                    "dependency cycle: {} (a gateway's dependency route \
                                     must not lead back to it)",
                                    cycle.join(" → ")
                                ),
                            ));
                        }
                        _ => {}
                    }
                } else {
                    colour[g] = 2;
                    stack.pop();
                }
            }
        }
        Ok(())
    }
}

fn sorted_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut v: Vec<_> = names.collect();
    v.sort_unstable();
    v.join(", ")
}
