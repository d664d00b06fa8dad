//! The largest request body axum's extractors read, set only on requests that carry one.
//!
//! axum's `DefaultBodyLimit` inserts its limit into every request's extensions: an allocation,
//! and on a session or page GET the fourth extension, which makes their map grow. A request
//! without a body (every GET) has nothing to limit, so it goes on without it.

use std::task::{Context, Poll};

use axum::body::HttpBody;
use axum::extract::DefaultBodyLimit;
use axum::http::Request;
use tower::{Layer, Service};

/// The layer: bodies over `max` bytes are refused with 413 by the extractors that read them.
#[derive(Clone, Copy)]
pub struct BodyLimit {
    pub max: usize,
}

impl<S: Clone> Layer<S> for BodyLimit {
    type Service = Limited<S>;

    fn layer(&self, inner: S) -> Limited<S> {
        Limited {
            limited: DefaultBodyLimit::max(self.max).layer(inner.clone()),
            inner,
        }
    }
}

/// A service behind [`BodyLimit`].
#[derive(Clone)]
pub struct Limited<S> {
    inner: S,
    limited: <DefaultBodyLimit as Layer<S>>::Service,
}

impl<S, B> Service<Request<B>> for Limited<S>
where
    S: Service<Request<B>>,
    <DefaultBodyLimit as Layer<S>>::Service:
        Service<Request<B>, Response = S::Response, Error = S::Error, Future = S::Future>,
    B: HttpBody,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        // Both wrap the one inner service's clones; each is readied before it is called.
        match self.inner.poll_ready(cx) {
            Poll::Ready(Ok(())) => self.limited.poll_ready(cx),
            other => other,
        }
    }

    fn call(&mut self, request: Request<B>) -> S::Future {
        if request.body().is_end_stream() {
            self.inner.call(request)
        } else {
            self.limited.call(request)
        }
    }
}
