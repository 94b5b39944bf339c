//! The body types of the request path.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};

/// Any error a body can end with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every request and response the guard forwards or makes.
pub type Body = BoxBody<Bytes, BoxError>;

/// A body holding `bytes`.
pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// An empty body.
pub(crate) fn empty() -> Body {
    full(Bytes::new())
}
