//! Which requests can be copied for a retry (tower's
//! `Policy::clone_request`), and a way to make a streaming body copyable.

use bytes::{Buf, Bytes, BytesMut};
use http_body::Body;
use http_body_util::{BodyExt, Empty, Full};

use crate::BoxError;

/// Copies a request for a retry, or declines: a declined request is sent
/// once and not retried, as tower's `Policy::clone_request` returning
/// `None`.
///
/// Implemented by [`CloneBuffered`] (the default), [`CloneAll`] and any
/// `Fn(&Req) -> Option<Req>`.
pub trait CloneRequest<Req> {
    /// A copy of `request` to send as a retry, or `None` to send it once.
    fn clone_request(&self, request: &Req) -> Option<Req>;
}

impl<Req, F: Fn(&Req) -> Option<Req>> CloneRequest<Req> for F {
    fn clone_request(&self, request: &Req) -> Option<Req> {
        self(request)
    }
}

/// Copies any `Clone` request: for services whose requests are plain values.
#[derive(Clone, Copy, Debug, Default)]
pub struct CloneAll;

impl<Req: Clone> CloneRequest<Req> for CloneAll {
    fn clone_request(&self, request: &Req) -> Option<Req> {
        Some(request.clone())
    }
}

/// Copies an `http::Request` whose body is already in memory
/// ([`BufferedBody`]): method, URI, version, headers and body. Extensions
/// are not copied (they need not be `Clone`), so a retry carries none.
///
/// A streaming body (hyper's `Incoming`, a boxed stream) has no
/// [`BufferedBody`] impl; wrap the service with a cloner that declines, or
/// collect the body first with [`buffer_request`], which keeps bodies up
/// to a cap.
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::Full;
/// use stormbreak_client::{CloneBuffered, CloneRequest};
///
/// let req = http::Request::post("http://token.internal/refresh")
///     .body(Full::new(Bytes::from_static(b"grant_type=refresh_token")))
///     .unwrap();
/// let copy = CloneBuffered.clone_request(&req).unwrap();
/// assert_eq!(copy.uri(), req.uri());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct CloneBuffered;

impl<B: BufferedBody> CloneRequest<http::Request<B>> for CloneBuffered {
    fn clone_request(&self, request: &http::Request<B>) -> Option<http::Request<B>> {
        let body = request.body().try_clone_body()?;
        let mut copy = http::Request::new(body);
        *copy.method_mut() = request.method().clone();
        *copy.uri_mut() = request.uri().clone();
        *copy.version_mut() = request.version();
        *copy.headers_mut() = request.headers().clone();
        Some(copy)
    }
}

/// A request body that can be copied for a retry: one held in memory.
pub trait BufferedBody: Sized {
    /// A copy, or `None` if this body cannot be replayed.
    fn try_clone_body(&self) -> Option<Self>;
}

macro_rules! buffered_by_clone {
    ($($t:ty),* $(,)?) => {
        $(impl BufferedBody for $t {
            fn try_clone_body(&self) -> Option<Self> {
                Some(self.clone())
            }
        })*
    };
}

buffered_by_clone!(
    (),
    Bytes,
    String,
    Vec<u8>,
    &'static str,
    &'static [u8],
    Full<Bytes>,
    Empty<Bytes>
);

/// `Option<B>`: `None` is an empty body; `Some` is as copyable as `B`.
impl<B: BufferedBody> BufferedBody for Option<B> {
    fn try_clone_body(&self) -> Option<Self> {
        match self {
            None => Some(None),
            Some(b) => b.try_clone_body().map(Some),
        }
    }
}

/// The body of a request was larger than [`buffer_request`]'s cap.
#[derive(Debug)]
pub struct BodyTooLarge<B> {
    /// The request, with the bytes read so far put back in front of the
    /// rest of its body, so it can still be sent once.
    pub request: http::Request<PrefixedBody<B>>,
    /// The cap that was exceeded.
    pub cap: usize,
}

impl<B> std::fmt::Display for BodyTooLarge<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "request body larger than {} bytes", self.cap)
    }
}

impl<B: std::fmt::Debug> std::error::Error for BodyTooLarge<B> {}

use crate::PrefixedBody;

/// Reads a streaming request body into memory, up to `cap` bytes, so the
/// request can be retried ([`Full<Bytes>`] is a [`BufferedBody`]).
///
/// A body declared (by its size hint) or found larger than `cap` is not
/// buffered: [`BodyTooLarge`] hands the request back with what was read
/// put back in front, to send once. A body that fails while being read is
/// an error. Memory is bounded by `cap` plus one frame.
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::{BodyExt, Full};
/// use stormbreak_client::buffer_request;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let req = http::Request::new(Full::new(Bytes::from_static(b"hello")));
/// let buffered = buffer_request(req, 1024).await.unwrap().unwrap();
/// let body = buffered.into_body().collect().await.unwrap().to_bytes();
/// assert_eq!(body, "hello");
///
/// let big = http::Request::new(Full::new(Bytes::from(vec![0u8; 4096])));
/// let too_large = buffer_request(big, 1024).await.unwrap().unwrap_err();
/// assert_eq!(too_large.cap, 1024);
/// # }
/// ```
pub async fn buffer_request<B>(
    request: http::Request<B>,
    cap: usize,
) -> Result<Result<http::Request<Full<Bytes>>, BodyTooLarge<B>>, BoxError>
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    Ok(read_body(request, cap)
        .await?
        .map(|(parts, bytes)| http::Request::from_parts(parts, Full::new(bytes))))
}

/// [`buffer_request`]'s work: the request's parts and its whole body, or
/// the request handed back with what was read put back in front.
pub(crate) async fn read_body<B>(
    request: http::Request<B>,
    cap: usize,
) -> Result<Result<(http::request::Parts, Bytes), BodyTooLarge<B>>, BoxError>
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    let (parts, mut body) = request.into_parts();
    if body.size_hint().lower() > cap as u64 {
        return Ok(Err(BodyTooLarge {
            request: http::Request::from_parts(parts, PrefixedBody::new(Bytes::new(), body)),
            cap,
        }));
    }
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(Into::into)?;
        // Trailers on a request are rare; a body with them is not
        // replayable as `Full`, so it is sent once.
        let mut data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                let mut rest = PrefixedBody::new(buf.freeze(), body);
                if let Ok(trailers) = frame.into_trailers() {
                    rest = rest.with_trailers(trailers);
                }
                return Ok(Err(BodyTooLarge {
                    request: http::Request::from_parts(parts, rest),
                    cap,
                }));
            }
        };
        if buf.len() + data.remaining() > cap {
            buf.extend_from_slice(&data.copy_to_bytes(data.remaining()));
            return Ok(Err(BodyTooLarge {
                request: http::Request::from_parts(parts, PrefixedBody::new(buf.freeze(), body)),
                cap,
            }));
        }
        while data.has_remaining() {
            let chunk = data.chunk();
            let n = chunk.len();
            buf.extend_from_slice(chunk);
            data.advance(n);
        }
    }
    Ok(Ok((parts, buf.freeze())))
}
