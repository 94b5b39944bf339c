//! How the audit reads its inputs (issue 40): as Kubernetes, Istio and
//! HAProxy read them. One test binary, one module per class of input.

#[path = "../common/mod.rs"]
mod common;

mod haproxy;
mod inputs;
mod istio_proxy;
mod partial;
