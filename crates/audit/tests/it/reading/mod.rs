//! How the audit reads its inputs (issue 40): as Kubernetes, Istio and
//! HAProxy read them. One module per class of input.

mod haproxy;
mod inputs;
mod istio_proxy;
mod partial;
