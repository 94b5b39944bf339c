//! TEMPORARY: stand-in until the policy crate's retry/budget/HPA land.
use rand::Rng;
use serde::Deserialize;
use stormbreak_policy::Nanos;

use crate::record::Cause;
use crate::scenario::AutoscalerSpec;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    pub max_attempts: u32,
}
impl RetrySpec {
    pub fn check(&self) -> Result<(), String> {
        Ok(())
    }
}
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSpec {
    pub ratio: f64,
}
impl BudgetSpec {
    pub fn check(&self) -> Result<(), String> {
        Ok(())
    }
}
#[derive(Debug, Clone, Copy, Default)]
pub struct CallState {
    tries: u32,
}
pub enum Next {
    RetryAt(Nanos),
    GiveUp,
}
#[derive(Debug)]
pub struct Caller {
    max: u32,
}
impl Caller {
    pub fn new(r: Option<&RetrySpec>, _b: Option<&BudgetSpec>) -> Self {
        Caller {
            max: r.map_or(1, |r| r.max_attempts),
        }
    }
    pub fn start(&mut self, _now: Nanos) -> CallState {
        CallState { tries: 1 }
    }
    pub fn on_success(&mut self, _now: Nanos) {}
    pub fn on_failure(&mut self, _now: Nanos, _c: Cause) {}
    pub fn after_failure<R: Rng + ?Sized>(
        &mut self,
        st: &mut CallState,
        now: Nanos,
        _c: Cause,
        _rng: &mut R,
    ) -> Next {
        if st.tries < self.max {
            st.tries += 1;
            Next::RetryAt(now)
        } else {
            Next::GiveUp
        }
    }
}
pub struct PodSample {
    pub ready: bool,
    pub app_utilisation: f64,
    pub sidecar_saturation: f64,
}
#[derive(Debug)]
pub struct Autoscaler;
impl Autoscaler {
    pub fn new(_s: &AutoscalerSpec) -> Self {
        Autoscaler
    }
    pub fn period(&self) -> Nanos {
        15_000_000_000
    }
    pub fn sync(&mut self, _now: Nanos, current: u32, _s: impl Iterator<Item = PodSample>) -> u32 {
        current
    }
}
