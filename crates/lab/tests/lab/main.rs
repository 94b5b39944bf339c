//! The lab's one integration-test binary: short real runs on loopback
//! (a few seconds, tiny rates) and the refusals.

mod actions;
mod answers;
mod common;
mod fanout;
mod gateways;
mod incident;
mod mapping;
mod pools;
mod refusals;
mod scaling;
mod teardown;
