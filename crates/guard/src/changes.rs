//! Runtime changes to the proxy in force: the admin API's mutations as one
//! typed enum, parsed once from a call's path and JSON body
//! ([`Change::parse`]) and applied by one function ([`Change::apply`]),
//! and the [`Override`] each becomes in the list `/state` shows and a
//! reload replays (the value itself, not a stored path and JSON). Both
//! `admin` (which makes them) and `live` (which keeps and replays them)
//! depend on this module; neither depends on the other for it.

use std::sync::PoisonError;

use serde::Deserialize;
use stormbreak_policy::ramp::StagedRestoreConfig;
use stormbreak_policy::retry::RetryConfig;
use stormbreak_policy::shed::{Criticality, ShedRule};

use crate::proxy::Proxy;

/// One mutation of the proxy in force.
#[derive(Clone, Debug)]
pub(crate) enum Change {
    /// `POST /shed/add`: an operator shed rule.
    ShedAdd(ShedAdd),
    /// `POST /shed/remove`.
    ShedRemove(ShedKey),
    /// `POST /retry`: a route's retry policy, its budget kept.
    RetrySet(RetrySet),
    /// `POST /restore/start`: a staged restore from its first site.
    RestoreStart(RestoreStart),
    /// `POST /restore/step`: the latest started site steps.
    RestoreStep(RouteKey),
    /// `POST /restore/stop`: every site admits all.
    RestoreStop(RouteKey),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShedAdd {
    route: String,
    #[serde(default)]
    class: Option<Criticality>,
    status: u16,
    #[serde(default)]
    retry_after: Option<stormbreak_policy::Nanos>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShedKey {
    route: String,
    #[serde(default)]
    class: Option<Criticality>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RouteKey {
    route: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetrySet {
    route: String,
    retry: RetryConfig,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RestoreStart {
    route: String,
    #[serde(default)]
    restore: Option<StagedRestoreConfig>,
}

impl Change {
    /// The mutation an admin call names: `Err((status, message))` for an
    /// unknown path (404) or a body that does not fit it (400).
    pub(crate) fn parse(path: &str, body: serde_json::Value) -> Result<Change, (u16, String)> {
        let bad = |e: serde_json::Error| (400, format!("body: {e}"));
        Ok(match path {
            "/shed/add" => Change::ShedAdd(serde_json::from_value(body).map_err(bad)?),
            "/shed/remove" => Change::ShedRemove(serde_json::from_value(body).map_err(bad)?),
            "/retry" => Change::RetrySet(serde_json::from_value(body).map_err(bad)?),
            "/restore/start" => Change::RestoreStart(serde_json::from_value(body).map_err(bad)?),
            "/restore/step" => Change::RestoreStep(serde_json::from_value(body).map_err(bad)?),
            "/restore/stop" => Change::RestoreStop(serde_json::from_value(body).map_err(bad)?),
            _ => {
                return Err((
                    404,
                    "no such admin call (docs/guard.md lists them)".to_owned(),
                ));
            }
        })
    }

    /// A staged restore of `route` from its first site, with `restore` or
    /// the route's own config.
    pub(crate) fn restore_start(route: &str, restore: Option<StagedRestoreConfig>) -> Change {
        Change::RestoreStart(RestoreStart {
            route: route.to_owned(),
            restore,
        })
    }

    /// Its name in `/state`'s overrides and the admin log.
    pub(crate) fn what(&self) -> &'static str {
        match self {
            Change::ShedAdd(_) => "shed.add",
            Change::ShedRemove(_) => "shed.remove",
            Change::RetrySet(_) => "retry.set",
            Change::RestoreStart(_) => "restore.start",
            Change::RestoreStep(_) => "restore.step",
            Change::RestoreStop(_) => "restore.stop",
        }
    }

    /// Whether it outlives a reload: shed rules and retry policies are
    /// replayed onto the new proxy; restores are kept with their route, or
    /// start afresh with a changed one.
    pub(crate) fn replayed(&self) -> bool {
        matches!(
            self,
            Change::ShedAdd(_) | Change::ShedRemove(_) | Change::RetrySet(_)
        )
    }

    /// Applies it to `p`; `Err((status, message))` when refused.
    pub(crate) fn apply(&self, p: &Proxy) -> Result<(), (u16, String)> {
        let route = |name: &str| {
            p.route_index(name)
                .ok_or((404, format!("no route named {name:?}")))
        };
        let now = p.clock.now();
        match self {
            Change::ShedAdd(add) => {
                let rule = ShedRule {
                    route: route(&add.route)? as u32,
                    class: add.class,
                    status: add.status,
                    retry_after: add.retry_after.filter(|n| !n.is_zero()),
                };
                rule.validate().map_err(|e| (400, e.to_string()))?;
                p.shedder
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .add_rule(rule)
                    .map_err(|e| (409, format!("{e:?}")))?;
            }
            Change::ShedRemove(key) => {
                let index = route(&key.route)? as u32;
                p.shedder
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove_rule(index, key.class)
                    .ok_or((404, "no such shed rule".to_owned()))?;
            }
            Change::RetrySet(set) => {
                let r = &p.routes[route(&set.route)?];
                let retry = r.retry.as_ref().ok_or((
                    409,
                    format!(
                        "route {:?} has no retry policy to change (set `retry` in its config)",
                        set.route
                    ),
                ))?;
                retry
                    .set_policy(&set.retry)
                    .map_err(|e| (400, format!("retry: {e}")))?;
            }
            Change::RestoreStart(start) => {
                let r = &p.routes[route(&start.route)?];
                r.restore
                    .start(now, start.restore.clone())
                    .map_err(|e| (400, e))?;
            }
            Change::RestoreStep(key) => {
                let r = &p.routes[route(&key.route)?];
                r.restore.step(now).map_err(|e| (409, e))?;
            }
            Change::RestoreStop(key) => {
                let r = &p.routes[route(&key.route)?];
                if !r.restore.stop() {
                    return Err((409, "no restore is running".to_owned()));
                }
            }
        }
        Ok(())
    }
}

/// One change made through the admin API.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Override {
    /// Seconds since the Unix epoch.
    pub(crate) at_unix: u64,
    /// Peer address, and the operator header when sent.
    pub(crate) who: String,
    /// `shed.add`, `shed.remove`, `retry.set`, `restore.start`, `restore.step`, `restore.stop`.
    pub(crate) what: &'static str,
    /// The change itself, to replay it.
    #[serde(skip)]
    pub(crate) change: Change,
    /// The request body as given.
    pub(crate) detail: serde_json::Value,
}

impl Override {
    /// `change`, made now by `who`; `detail` as the call gave it.
    pub(crate) fn new(who: String, change: Change, detail: serde_json::Value) -> Override {
        Override {
            at_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            who,
            what: change.what(),
            change,
            detail,
        }
    }
}
