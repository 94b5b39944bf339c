//! The retry layer's loop as a `reqwest-middleware` middleware.

use std::fmt;

use reqwest_middleware::{Middleware, Next};

use crate::retry::{Attempt, drive};
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

/// The rest of the middleware chain, as one attempt.
struct NextAttempt<'a> {
    next: Next<'a>,
    extensions: &'a mut http::Extensions,
}

impl Attempt<reqwest::Request> for NextAttempt<'_> {
    type Response = reqwest::Response;

    fn send(
        &mut self,
        request: reqwest::Request,
    ) -> impl Future<Output = Result<reqwest::Response, BoxError>> + Send + '_ {
        let call = self.next.clone().run(request, self.extensions);
        async move { call.await.map_err(|e| Box::new(e) as BoxError) }
    }
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
        let attempt = NextAttempt { next, extensions };
        drive(
            &**self.layer.shared(),
            ByRef(self.layer.classifier()),
            request,
            reqwest::Request::try_clone,
            attempt,
        )
        .await
        .map_err(|e| match e.downcast::<reqwest_middleware::Error>() {
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

/// The layer's classifier, lent to [`drive`] (which owns its classifier).
struct ByRef<'a, C>(&'a C);

impl<Res, C: Classify<Res>> Classify<Res> for ByRef<'_, C> {
    fn response(&self, response: &Res) -> stormbreak_policy::retry::AttemptOutcome {
        self.0.response(response)
    }

    fn error(&self, error: &BoxError) -> stormbreak_policy::retry::AttemptOutcome {
        self.0.error(error)
    }
}
