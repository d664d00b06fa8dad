//! What names a request in its answer and in the logs: the `x-request-id` header, the request's
//! own or a new one, copied to the answer; a request span at debug level, which the gateway
//! completes with the operation's name; and a log line at error level for every answer with a
//! server error, naming its request id.
//!
//! The span is at debug level, as tower-http's own default is, so that a request pays for no span
//! under the default `info` filter: making, entering and closing one cost about 8 µs per request,
//! a quarter of a page GET. A server error is still found from the id its client was given.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use axum::http::{HeaderName, HeaderValue, Request, Response};
use tower::{Layer, Service};
use tracing::Instrument;
use tracing::instrument::Instrumented;

/// The header that names a request in the logs and in its answer.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The layer: the service it wraps sees every request in a span that names its `x-request-id`.
#[derive(Clone, Copy)]
pub struct RequestLog;

impl<S> Layer<S> for RequestLog {
    type Service = Logged<S>;

    fn layer(&self, inner: S) -> Logged<S> {
        Logged(inner)
    }
}

/// A service behind [`RequestLog`].
#[derive(Clone)]
pub struct Logged<S>(S);

impl<S, B, R> Service<Request<B>> for Logged<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Unpin,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Answer<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Answer<S::Future> {
        // A new id goes to the span and the answer only: nothing after this layer reads the
        // request's header, and writing it there cost a header insertion and a copy of the id.
        let id = request
            .headers()
            .get(REQUEST_ID)
            .cloned()
            .unwrap_or_else(new_id);
        let span = tracing::debug_span!(
            "request",
            method = %request.method(),
            uri = %request.uri(),
            request_id = id.to_str().unwrap_or_default(),
            // The gateway records the operation it finds.
            operation = tracing::field::Empty,
        );
        let started = Instant::now();
        let answer = span.in_scope(|| self.0.call(request));
        Answer {
            answer: answer.instrument(span),
            id: Some(id),
            started,
        }
    }
}

/// The future of a [`Logged`] answer.
pub struct Answer<F> {
    answer: Instrumented<F>,
    /// The request's id, until the answer carries it.
    id: Option<HeaderValue>,
    started: Instant,
}

impl<F, R, E> Future for Answer<F>
where
    F: Future<Output = Result<Response<R>, E>> + Unpin,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut response = ready!(Pin::new(&mut self.answer).poll(cx))?;
        let status = response.status();
        if let Some(id) = self.id.take() {
            let _span = self.answer.span().enter();
            // In milliseconds, a number a log's reader can compare; read only for a line that
            // is written.
            let latency_ms = || self.started.elapsed().as_secs_f64() * 1000.0;
            if status.is_server_error() {
                let request_id = id.to_str().unwrap_or_default();
                tracing::error!(
                    status = status.as_u16(),
                    request_id,
                    latency_ms = latency_ms(),
                    "answered with a server error"
                );
            } else {
                tracing::debug!(
                    status = status.as_u16(),
                    latency_ms = latency_ms(),
                    "answered"
                );
            }
            response.headers_mut().entry(REQUEST_ID).or_insert(id);
        }
        Poll::Ready(Ok(response))
    }
}

/// Request ids a thread takes from the process's count at a time.
const IDS_PER_THREAD: u64 = 1 << 16;

/// A request id for a request that came without one: `req_` and 32 hex digits, 16 random to the
/// process and 16 counting its requests, so that ids are unique without asking the operating
/// system for randomness on every request. Each thread counts within a block of ids it takes
/// from the process's count, so that threads do not write one count on every request.
fn new_id() -> HeaderValue {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};
    /// `req_` and the process's 16 random hex digits.
    static PROCESS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let mut prefix = "req_".to_owned();
        crate::random::push_hex(&mut prefix, &crate::random::bytes::<8>());
        prefix
    });
    static BLOCKS: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        /// The thread's next id and the end of its block.
        static NEXT: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }
    let count = NEXT.with(|next| {
        let (mut count, mut end) = next.get();
        if count == end {
            count = BLOCKS.fetch_add(IDS_PER_THREAD, Ordering::Relaxed);
            end = count + IDS_PER_THREAD;
        }
        next.set((count + 1, end));
        count
    });
    let mut id = String::with_capacity(36);
    id.push_str(&PROCESS);
    crate::random::push_hex(&mut id, &count.to_be_bytes());
    HeaderValue::try_from(id).expect("hex digits are a header value")
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    use axum::http::StatusCode;
    use tower::ServiceExt;

    use super::*;

    /// What a log writes, shared with the test.
    #[derive(Clone, Default)]
    struct Written(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Written {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The answer of a service answering `status` behind [`RequestLog`] to a request with `id`,
    /// and what the server's default `info` filter logs.
    async fn answer(status: StatusCode, id: Option<&'static str>) -> (Response<()>, String) {
        let written = Written::default();
        let writer = written.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .finish();
        let _default = tracing::subscriber::set_default(subscriber);
        let service = RequestLog.layer(tower::service_fn(move |_: Request<()>| {
            let answer = Response::builder().status(status).body(()).unwrap();
            std::future::ready(Ok::<_, Infallible>(answer))
        }));
        let mut request = Request::new(());
        if let Some(id) = id {
            request
                .headers_mut()
                .insert(REQUEST_ID, HeaderValue::from_static(id));
        }
        let response = service.oneshot(request).await.unwrap();
        let log = String::from_utf8(written.0.lock().unwrap().clone()).unwrap();
        (response, log)
    }

    #[tokio::test]
    async fn a_server_error_is_logged_at_error_level_with_the_request_id_its_answer_carries() {
        let (response, log) = answer(StatusCode::SERVICE_UNAVAILABLE, Some("req_given")).await;
        assert_eq!(response.headers()[REQUEST_ID], "req_given");
        assert!(log.contains("ERROR"), "{log}");
        assert!(log.contains("answered with a server error"), "{log}");
        assert!(log.contains("request_id=\"req_given\""), "{log}");
        assert!(log.contains("status=503"), "{log}");
    }

    #[test]
    fn threads_count_request_ids_apart() {
        let ids = || (0..3).map(|_| new_id()).collect::<Vec<_>>();
        let mut all = ids();
        all.extend(std::thread::spawn(ids).join().unwrap());
        all.extend(ids());
        let distinct: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len(), "{all:?}");
    }

    #[tokio::test]
    async fn another_answer_gets_a_new_id_and_logs_nothing_at_info_level() {
        let (first, log) = answer(StatusCode::NOT_FOUND, None).await;
        let (second, _) = answer(StatusCode::OK, None).await;
        assert_eq!(log, "");
        let (first, second) = (&first.headers()[REQUEST_ID], &second.headers()[REQUEST_ID]);
        assert_ne!(first, second);
        for id in [first, second] {
            let id = id.to_str().unwrap();
            assert!(id.starts_with("req_") && id.len() == 36, "{id}");
            assert!(id[4..].bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        }
    }
}
