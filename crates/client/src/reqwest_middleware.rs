//! The retry layer's loop as a `reqwest-middleware` middleware.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};

use reqwest_middleware::{Middleware, Next};

use crate::retry::{ByRef, Drive};
use crate::{BoxError, Classify, HttpClassifier, RetryLayer};

/// A [`reqwest_middleware::Middleware`] that retries with a
/// [`RetryLayer`]'s policy, budget and classifier: the same loop as the
/// tower service, so a reqwest client and a tower stack built from one
/// layer share one retry budget.
///
/// A request whose body cannot be cloned (`reqwest::Request::try_clone`
/// returns `None`, as for a streaming body) is sent once, unretried, and
/// counted in [`RetryLayer::passed_through`].
///
/// ```no_run
/// use reqwest_middleware::ClientBuilder;
/// use stormbreak_client::{RetryLayer, RetryMiddleware};
/// use stormbreak_policy::retry::RetryConfig;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let retry = RetryLayer::new(&RetryConfig::default())?;
/// let client = ClientBuilder::new(reqwest::Client::new())
///     .with(RetryMiddleware::new(retry))
///     .build();
/// let token = client.get("http://127.0.0.1:8080/token").send().await?;
/// # let _ = token;
/// # Ok(())
/// # }
/// ```
pub struct RetryMiddleware<C = HttpClassifier, R = crate::CloneBuffered> {
    layer: RetryLayer<C, R>,
}

impl<C, R> RetryMiddleware<C, R> {
    /// A middleware following `layer`'s policy and sharing its budget.
    /// Its cloner is not used: reqwest requests copy themselves.
    pub fn new(layer: RetryLayer<C, R>) -> Self {
        RetryMiddleware { layer }
    }
}

impl<C: fmt::Debug, R> fmt::Debug for RetryMiddleware<C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryMiddleware")
            .field("layer", &self.layer)
            .finish()
    }
}

/// The rest of the middleware chain as the service each attempt calls.
///
/// Each attempt runs the chain with the caller's extensions: they are
/// lent to the attempt's future and come back when it ends, answered or
/// abandoned at its deadline, so the next attempt and the caller see what
/// the chain left in them.
struct NextService<'e> {
    next: Next<'e>,
    extensions: &'e Mutex<http::Extensions>,
}

impl<'e> tower::Service<reqwest::Request> for NextService<'e> {
    type Response = reqwest::Response;
    type Error = reqwest_middleware::Error;
    type Future =
        Pin<Box<dyn Future<Output = reqwest_middleware::Result<reqwest::Response>> + Send + 'e>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: reqwest::Request) -> Self::Future {
        let next = self.next.clone();
        let home = self.extensions;
        Box::pin(async move {
            let mut lent = Lent {
                home,
                extensions: std::mem::take(&mut *lock(home)),
            };
            next.run(request, &mut lent.extensions).await
        })
    }
}

/// The extensions while an attempt has them; put back when it ends.
struct Lent<'e> {
    home: &'e Mutex<http::Extensions>,
    extensions: http::Extensions,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        *lock(self.home) = std::mem::take(&mut self.extensions);
    }
}

fn lock(m: &Mutex<http::Extensions>) -> std::sync::MutexGuard<'_, http::Extensions> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[async_trait::async_trait]
impl<C, R> Middleware for RetryMiddleware<C, R>
where
    C: Classify<reqwest::Response> + Send + Sync + 'static,
    R: Send + Sync + 'static,
{
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut http::Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        let home = Mutex::new(std::mem::take(extensions));
        let service = NextService {
            next,
            extensions: &home,
        };
        let result = Drive::new(
            &**self.layer.shared(),
            ByRef(self.layer.classifier()),
            reqwest::Request::try_clone,
            service,
            request,
        )
        .await;
        *extensions = home.into_inner().unwrap_or_else(PoisonError::into_inner);
        result.map_err(|e| match e.downcast::<reqwest_middleware::Error>() {
            Ok(e) => *e,
            Err(e) => reqwest_middleware::Error::middleware(Boxed(e)),
        })
    }
}

/// A boxed error as a concrete `Error` type, for reqwest-middleware.
struct Boxed(BoxError);

impl fmt::Debug for Boxed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Boxed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Boxed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.0.as_ref())
    }
}
