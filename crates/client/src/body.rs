//! A body made of bytes already read, then whatever is left of the
//! original body.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// Bytes already in memory, then trailers already read, then the rest
    /// of a streaming body (if any).
    ///
    /// What [`SingleFlight`](crate::SingleFlight) answers with (a shared,
    /// buffered response has no rest; one too large to share keeps
    /// streaming), and what [`buffer_request`](crate::buffer_request) hands
    /// back for a body over its cap.
    #[derive(Debug)]
    pub struct PrefixedBody<B> {
        prefix: Option<Bytes>,
        // Boxed: trailers are rare, and a response carrying this body is
        // moved between futures on every request.
        trailers: Option<Box<HeaderMap>>,
        #[pin]
        rest: Option<B>,
    }
}

impl<B> PrefixedBody<B> {
    /// `prefix`, then `rest`.
    pub fn new(prefix: Bytes, rest: B) -> Self {
        PrefixedBody {
            prefix: Some(prefix),
            trailers: None,
            rest: Some(rest),
        }
    }

    /// A body held entirely in memory.
    pub fn full(data: Bytes, trailers: Option<HeaderMap>) -> Self {
        PrefixedBody {
            prefix: Some(data),
            trailers: trailers.map(Box::new),
            rest: None,
        }
    }

    /// A body held entirely in memory, its trailers already boxed.
    pub(crate) fn full_boxed(data: Bytes, trailers: Option<Box<HeaderMap>>) -> Self {
        PrefixedBody {
            prefix: Some(data),
            trailers,
            rest: None,
        }
    }

    /// Trailers to send after the prefix, before the rest.
    pub(crate) fn with_trailers(mut self, trailers: HeaderMap) -> Self {
        self.trailers = Some(Box::new(trailers));
        self
    }

    /// A body that is entirely `rest`.
    pub fn streaming(rest: B) -> Self {
        PrefixedBody {
            prefix: None,
            trailers: None,
            rest: Some(rest),
        }
    }
}

impl<B> Body for PrefixedBody<B>
where
    B: Body,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let mut this = self.project();
        if let Some(prefix) = this.prefix.take()
            && !prefix.is_empty()
        {
            return Poll::Ready(Some(Ok(Frame::data(prefix))));
        }
        if let Some(trailers) = this.trailers.take() {
            return Poll::Ready(Some(Ok(Frame::trailers(*trailers))));
        }
        let Some(rest) = this.rest.as_mut().as_pin_mut() else {
            return Poll::Ready(None);
        };
        match rest.poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                this.rest.set(None);
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(
                frame.map_data(|mut d| d.copy_to_bytes(d.remaining()))
            ))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.as_ref().is_none_or(Bytes::is_empty)
            && self.trailers.is_none()
            && self.rest.as_ref().is_none_or(B::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let prefix = self.prefix.as_ref().map_or(0, |p| p.len() as u64);
        let mut hint = self
            .rest
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), B::size_hint);
        let lower = hint.lower().saturating_add(prefix);
        let upper = hint.upper().map(|u| u.saturating_add(prefix));
        hint = SizeHint::new();
        hint.set_lower(lower);
        if let Some(u) = upper {
            hint.set_upper(u);
        }
        hint
    }
}

/// A body held entirely in memory is copyable; one with a rest still to
/// stream is not (sent once, unretried).
impl<B> crate::BufferedBody for PrefixedBody<B> {
    fn try_clone_body(&self) -> Option<Self> {
        if self.rest.is_some() {
            return None;
        }
        Some(PrefixedBody {
            prefix: self.prefix.clone(),
            trailers: self.trailers.clone(),
            rest: None,
        })
    }
}
