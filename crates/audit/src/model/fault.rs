//! A VirtualService's fault injection, as the calling proxy applies it.
//!
//! Istio 1.27 "Virtual Service", `HTTPFaultInjection`
//! (<https://istio.io/v1.27/docs/reference/config/networking/virtual-service/#HTTPFaultInjection>):
//! `delay` holds a share of requests for `fixedDelay`, `abort` answers a
//! share with `httpStatus` (or a gRPC status) without forwarding them;
//! `percentage.value` is the share in percent (absent: 100). Both are
//! applied by Envoy's fault filter in the *calling* proxy, before the
//! router: an aborted request is never sent, so the route's own retries
//! do not retry it; every layer outside the proxy (clients, an edge
//! proxy's retries) sees the abort as an answer from the service (Envoy
//! 1.34 "Fault Injection" filter, "the fault filter must be placed before
//! the router"). A delay happens before the router starts the route's
//! timer, so it counts against the caller's own timeout, not the route's.

use std::time::Duration;

use serde::Serialize;

use super::istio::{FaultAbort, FaultDelay, HttpFault};
use crate::units::{parse_go_duration, show};

/// The faults one route injects.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fault {
    /// Share of requests delayed, in [0, 1], and for how long.
    #[serde(serialize_with = "ser_delay")]
    pub delay: Option<(f64, Duration)>,
    /// Share of requests aborted, in [0, 1], and the status they get
    /// (`None`: a gRPC status).
    pub abort: Option<(f64, Option<u16>)>,
}

fn ser_delay<S: serde::Serializer>(d: &Option<(f64, Duration)>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some((share, t)) => s.serialize_some(&(share, show(*t))),
        None => s.serialize_none(),
    }
}

impl Fault {
    /// Reads a route's `fault`: `Ok(None)` when it injects nothing (no
    /// block, or both shares 0); an error names the field and what was
    /// expected.
    pub fn read(f: &HttpFault) -> Result<Option<Fault>, String> {
        let delay = match &f.delay {
            Some(d) => delay(d)?,
            None => None,
        };
        let abort = match &f.abort {
            Some(a) => abort(a)?,
            None => None,
        };
        if delay.is_none() && abort.is_none() {
            return Ok(None);
        }
        Ok(Some(Fault { delay, abort }))
    }

    /// One line for a report: `20% aborted with 503; 10% delayed 5s`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some((p, status)) = self.abort {
            let what = status.map_or("a gRPC status".to_string(), |s| s.to_string());
            parts.push(format!("{} aborted with {what}", percent(p)));
        }
        if let Some((p, d)) = self.delay {
            parts.push(format!("{} delayed {}", percent(p), show(d)));
        }
        parts.join("; ")
    }
}

fn percent(share: f64) -> String {
    format!("{}%", crate::units::trim(share * 100.0))
}

/// `percentage.value` (or the deprecated integer `percent`) as a share;
/// absent means every request.
fn share(field: &str, value: Option<f64>) -> Result<f64, String> {
    match value {
        None => Ok(1.0),
        Some(v) if v.is_finite() && (0.0..=100.0).contains(&v) => Ok(v / 100.0),
        Some(v) => Err(format!(
            "fault.{field}.percentage.value: expected a percentage from 0 to 100, got {v}"
        )),
    }
}

fn delay(d: &FaultDelay) -> Result<Option<(f64, Duration)>, String> {
    let p = share(
        "delay",
        d.percentage.as_ref().and_then(|p| p.value).or(d.percent),
    )?;
    let Some(text) = &d.fixed_delay else {
        return Err("fault.delay: expected fixedDelay such as 5s".into());
    };
    let t = parse_go_duration(text).map_err(|e| format!("fault.delay.fixedDelay: {e}"))?;
    Ok((p > 0.0 && !t.is_zero()).then_some((p, t)))
}

fn abort(a: &FaultAbort) -> Result<Option<(f64, Option<u16>)>, String> {
    let p = share("abort", a.percentage.as_ref().and_then(|p| p.value))?;
    let status = match (a.http_status, &a.grpc_status) {
        (Some(s), _) if (200..=599).contains(&s) => Some(s as u16),
        (Some(s), _) => {
            return Err(format!(
                "fault.abort.httpStatus: expected an HTTP status from 200 to 599, got {s}"
            ));
        }
        (None, Some(_)) => None,
        (None, None) => {
            return Err("fault.abort: expected httpStatus (such as 503) or grpcStatus".into());
        }
    };
    Ok((p > 0.0).then_some((p, status)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::istio::Percent;

    #[test]
    fn absent_percentage_is_every_request_and_zero_is_none() {
        let f = HttpFault {
            delay: None,
            abort: Some(FaultAbort {
                http_status: Some(503),
                grpc_status: None,
                percentage: None,
            }),
        };
        let got = Fault::read(&f).unwrap().unwrap();
        assert_eq!(got.abort, Some((1.0, Some(503))));
        let zero = HttpFault {
            delay: None,
            abort: Some(FaultAbort {
                http_status: Some(503),
                grpc_status: None,
                percentage: Some(Percent { value: Some(0.0) }),
            }),
        };
        assert_eq!(Fault::read(&zero).unwrap(), None);
    }

    #[test]
    fn a_share_over_100_or_a_missing_status_is_an_error() {
        let bad = HttpFault {
            delay: None,
            abort: Some(FaultAbort {
                http_status: Some(503),
                grpc_status: None,
                percentage: Some(Percent { value: Some(150.0) }),
            }),
        };
        assert!(Fault::read(&bad).unwrap_err().contains("0 to 100"));
        let none = HttpFault {
            delay: None,
            abort: Some(FaultAbort::default()),
        };
        assert!(Fault::read(&none).unwrap_err().contains("httpStatus"));
    }
}
