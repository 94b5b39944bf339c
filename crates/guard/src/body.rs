//! The body types of the request path.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

/// Any error a body can end with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every request and response the guard forwards or makes.
///
/// The two kinds every passthrough request has — a buffered request body
/// sent upstream, the upstream's answer sent back — are held as they are;
/// anything else (a streamed client body behind its limits and watch) is
/// boxed. A box per body was two allocations and a virtual call per
/// frame on every request (issue 43: "no body boxing where the body type
/// is known").
pub struct Body {
    kind: Kind,
}

enum Kind {
    Full(Full<Bytes>),
    Upstream(Incoming),
    Boxed(BoxBody<Bytes, BoxError>),
}

impl Body {
    /// A body of any other type, boxed.
    pub fn boxed<B>(body: B) -> Body
    where
        B: http_body::Body<Data = Bytes> + Send + Sync + 'static,
        B::Error: Into<BoxError>,
    {
        Body {
            kind: Kind::Boxed(body.map_err(Into::into).boxed()),
        }
    }

    /// An upstream's answer, forwarded as it arrives.
    pub(crate) fn upstream(body: Incoming) -> Body {
        Body {
            kind: Kind::Upstream(body),
        }
    }
}

impl Default for Body {
    fn default() -> Body {
        empty()
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            Kind::Full(_) => "full",
            Kind::Upstream(_) => "upstream",
            Kind::Boxed(_) => "boxed",
        };
        f.debug_struct("Body").field("kind", &kind).finish()
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        // Every kind is `Unpin`.
        match &mut self.get_mut().kind {
            Kind::Full(b) => Pin::new(b).poll_frame(cx).map_err(|never| match never {}),
            Kind::Upstream(b) => Pin::new(b).poll_frame(cx).map_err(BoxError::from),
            Kind::Boxed(b) => Pin::new(b).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Full(b) => b.is_end_stream(),
            Kind::Upstream(b) => b.is_end_stream(),
            Kind::Boxed(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(b) => b.size_hint(),
            Kind::Upstream(b) => b.size_hint(),
            Kind::Boxed(b) => b.size_hint(),
        }
    }
}

/// A body holding `bytes`.
pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Body {
        kind: Kind::Full(Full::new(bytes.into())),
    }
}

/// An empty body.
pub(crate) fn empty() -> Body {
    full(Bytes::new())
}
