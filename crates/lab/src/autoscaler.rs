//! A service's autoscaler in a lab run: the simulator's own
//! [`Autoscaler`] (the policy crate's HPA with the simulator's pod table)
//! fed from real pods on the HPA's own clock, its decision handed to the
//! fleet's replica controller (`fleet.rs`).
//!
//! Readings, as `docs/scenarios.md` defines them for the simulator:
//! * app CPU: busy workers / workers, time-averaged since the last sync
//!   from the backend's own counts (`App::take_sync_utilisation`);
//! * sidecar saturation: the guard's `stormbreak_guard_inflight` gauge
//!   (its OpenMetrics text, in process) read every [`SIDECAR_SAMPLE`] and
//!   averaged over the sync, over the sidecar's limit.

use std::sync::Arc;
use std::time::Duration;

use stormbreak_policy::Nanos;
use stormbreak_sim::engine::autoscale::Autoscaler;
use stormbreak_sim::scenario::AutoscalerSpec;
use tokio::time::Instant;

use crate::fleet::Fleet;

/// How often a sidecar's in-flight gauge is sampled for the HPA: the
/// simulator integrates it exactly; the lab's mean of samples 100 ms apart
/// is within one request of it over a sync period of seconds.
pub const SIDECAR_SAMPLE: Duration = Duration::from_millis(100);

/// Runs `spec`'s HPA (already at scale) over `fleet` from `start` until
/// the task is aborted: at each sync the Deployment's replicas and every
/// live pod's readings go to [`Autoscaler::sync`], and its desired count
/// to the replica controller.
pub async fn run(fleet: Arc<Fleet>, spec: AutoscalerSpec, start: Instant) {
    let mut hpa = Autoscaler::new(&spec);
    let sidecar = fleet.plan().sidecar.is_some();
    loop {
        let due = start + Duration::from(hpa.poll_timeout());
        loop {
            let next = if sidecar {
                (Instant::now() + SIDECAR_SAMPLE).min(due)
            } else {
                due
            };
            tokio::time::sleep_until(next).await;
            if sidecar {
                fleet.sample_sidecars();
            }
            if next >= due {
                break;
            }
        }
        let now = Nanos::from(start.elapsed());
        let (current, samples) = fleet.hpa_view();
        let desired = hpa.sync(now, current, samples.into_iter());
        fleet.set_desired(desired);
    }
}
