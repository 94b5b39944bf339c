//! A layer that reads request bodies into memory up to a cap, so the retry
//! layer behind it can replay them; larger bodies pass through, sent once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use http_body::Body;
use tower::{Layer, Service};

use crate::clone::read_body;
use crate::{BoxError, PrefixedBody};

/// Reads each request's body into memory, up to `cap` bytes, before the
/// service behind it sees the request, so that a [`RetryLayer`] behind it
/// can replay streaming bodies (hyper's `Incoming`, a stream) as well as
/// buffered ones.
///
/// Every request leaves it with one body type, [`PrefixedBody<B>`]: held in
/// memory when it fit (copyable, so [`CloneBuffered`], the retry layer's
/// default cloner, retries it), or the bytes read so far followed by the
/// rest of the stream when it did not (not copyable: sent once, unretried,
/// and counted by [`RetryLayer::passed_through`] and
/// [`BufferBodyLayer::too_large`]). Memory per request is bounded by `cap`
/// plus one frame; a body whose size hint already exceeds `cap` is not read
/// at all.
///
/// Put it outside the retry layer: `BufferBody → Retry → transport`.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use bytes::Bytes;
/// use http_body_util::{BodyExt, StreamBody};
/// use stormbreak_client::{BoxError, BufferBodyLayer, PrefixedBody, RetryLayer};
/// use stormbreak_policy::retry::RetryConfig;
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), BoxError> {
/// let calls = Arc::new(AtomicU32::new(0));
/// let seen = calls.clone();
/// let transport = service_fn(move |req: http::Request<PrefixedBody<_>>| {
///     let n = seen.fetch_add(1, Ordering::SeqCst);
///     async move {
///         let body = req.into_body().collect().await?.to_bytes();
///         assert_eq!(body, "grant_type=refresh_token");
///         let status = if n < 2 { 503 } else { 200 };
///         Ok::<_, BoxError>(http::Response::builder().status(status).body(())?)
///     }
/// });
/// let client = ServiceBuilder::new()
///     .layer(BufferBodyLayer::new(64 * 1024))
///     .layer(RetryLayer::new(&RetryConfig::default())?)
///     .service(transport);
/// // A streaming body: not copyable until buffered.
/// let frames = futures_util::stream::iter([
///     Ok::<_, std::io::Error>(http_body::Frame::data(Bytes::from_static(b"grant_type="))),
///     Ok(http_body::Frame::data(Bytes::from_static(b"refresh_token"))),
/// ]);
/// let request = http::Request::post("http://token.internal/refresh").body(StreamBody::new(frames))?;
/// let response = client.oneshot(request).await?;
/// assert_eq!(response.status(), 200);
/// assert_eq!(calls.load(Ordering::SeqCst), 3, "retried twice with the same bytes");
/// # Ok(())
/// # }
/// ```
///
/// [`RetryLayer`]: crate::RetryLayer
/// [`RetryLayer::passed_through`]: crate::RetryLayer::passed_through
/// [`CloneBuffered`]: crate::CloneBuffered
#[derive(Clone, Debug)]
pub struct BufferBodyLayer {
    cap: usize,
    too_large: Arc<AtomicU64>,
}

impl BufferBodyLayer {
    /// Buffers bodies of at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        BufferBodyLayer {
            cap,
            too_large: Arc::default(),
        }
    }

    /// Requests whose body was over the cap (sent once, streaming), across
    /// every service this layer made.
    pub fn too_large(&self) -> u64 {
        self.too_large.load(Ordering::Relaxed)
    }
}

impl<S> Layer<S> for BufferBodyLayer {
    type Service = BufferBody<S>;

    fn layer(&self, inner: S) -> BufferBody<S> {
        BufferBody {
            inner,
            cap: self.cap,
            too_large: self.too_large.clone(),
        }
    }
}

/// The service made by [`BufferBodyLayer`].
#[derive(Clone, Debug)]
pub struct BufferBody<S> {
    inner: S,
    cap: usize,
    too_large: Arc<AtomicU64>,
}

impl<S, B> Service<http::Request<B>> for BufferBody<S>
where
    S: Service<http::Request<PrefixedBody<B>>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: Body + Unpin + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    // Boxed: reading the body is I/O, and one allocation per request is
    // small beside it.
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // The service that was made ready goes with this request; a clone
        // stays for the next one (tower's usual hand-over).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (cap, too_large) = (self.cap, self.too_large.clone());
        Box::pin(async move {
            let request = match read_body(request, cap).await? {
                Ok((parts, bytes)) => {
                    http::Request::from_parts(parts, PrefixedBody::full(bytes, None))
                }
                Err(over) => {
                    too_large.fetch_add(1, Ordering::Relaxed);
                    over.request
                }
            };
            inner.call(request).await.map_err(Into::into)
        })
    }
}
