//! Every integration test of this crate in one binary (one link instead
//! of one per file: linking dominates the suite on a 2-core machine).
//! Each former test file is a module; test names are unchanged but for
//! the module prefix.

mod autoscale;
mod autoscale_props;
mod common;
mod limit_bounds;
mod limit_closed_loop;
mod no_alloc_autoscale;
mod no_alloc_limit;
mod no_alloc_misc;
mod no_alloc_retry;
mod no_alloc_shed;
mod ramp_poll;
mod round_trip;
