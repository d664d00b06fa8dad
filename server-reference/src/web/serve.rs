//! Serving the router: each accepted connection is an HTTP/1.1 connection driven by hyper, with
//! its buffers bounded for a server that holds many waiting clients (long-polls and SSE
//! streams), idle connections closed, and a graceful shutdown that lets the open ones finish.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::response::Response;
use axum::serve::Listener;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::{Service, ServiceExt};

/// How long a connection may go without a request in flight before it is closed (by a fifth
/// more, as [`IDLE_CHECKS`] says): a client has at least that long to send a request's head, and
/// a kept-alive connection its next request. An answer is no longer in flight once hyper has
/// taken its body whole, so a client that does not read it within that time is cut off too.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How many times per idle timeout a connection's watch looks at it.
const IDLE_CHECKS: u32 = 10;

/// The most a connection buffers to read a request's head or write an answer: twice hyper's
/// floor. A connection starts with 8 KiB each way, and without a bound its read buffer grows
/// (to about 400 KiB) with the reads that fill it, and stays so while the connection waits.
const MAX_BUFFER: usize = 16 * 1024;

/// What an answer's body is: axum's, or one a layer wraps around it.
pub trait AnswerBody: HttpBody<Data = Bytes, Error = axum::Error> + Send + Unpin + 'static {}

impl<B: HttpBody<Data = Bytes, Error = axum::Error> + Send + Unpin + 'static> AnswerBody for B {}

/// What [`serve`] serves, shared by every connection: the router behind its layers, whose
/// answers a connection polls in place.
pub trait AnswerService:
    Service<Request, Error = Infallible, Future: Send + Unpin> + Clone + Send + Sync + 'static
{
}

impl<S> AnswerService for S where
    S: Service<Request, Error = Infallible, Future: Send + Unpin> + Clone + Send + Sync + 'static
{
}

/// Serves `service` on `listener` until `shutdown` resolves, then accepts no connection, lets
/// each open one finish its request and close, and returns once all have. A connection with no
/// request in flight for `idle` (to `idle` and a fifth) is closed.
pub async fn serve<S, B>(
    mut listener: TcpListener,
    service: S,
    shutdown: impl Future<Output = ()>,
    idle: Duration,
) -> std::io::Result<()>
where
    S: AnswerService<Response = Response<B>>,
    B: AnswerBody,
{
    // hyper's request body becomes axum's, as a `Router` would make it.
    let service = service.map_request(|request: hyper::Request<Incoming>| request.map(Body::new));
    let mut http = http1::Builder::new();
    // The connection's watch (`Activity`) bounds a head's reading; hyper's own timeout would
    // arm a timer for every request.
    http.header_read_timeout(None).max_buf_size(MAX_BUFFER);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // axum's `Listener` retries failed accepts (a full file table) after a pause.
        let (stream, _) = tokio::select! {
            accepted = Listener::accept(&mut listener) => accepted,
            () = &mut shutdown => break,
        };
        // An answer is written whole at once: Nagle's delay would only hold its last segment.
        stream.set_nodelay(true)?;
        let activity = Arc::new(Activity::default());
        let watched = Watched {
            inner: service.clone(),
            activity: activity.clone(),
        };
        let service = TowerToHyperService::new(watched);
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            tokio::select! {
                ended = connection => if let Err(error) = ended {
                    tracing::debug!(%error, "a connection ended with an error");
                },
                () = activity.idle(idle) => tracing::debug!("closed an idle connection"),
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// A connection's requests: how many it has begun, and how many are in flight (from the call
/// of the service to the drop of the answer's body). hyper's own header read timeout arms a
/// timer for every request, which took 1,700 of a session GET's 26,000 instructions; a
/// connection's watch sleeps a tenth of the idle timeout at a time instead.
#[derive(Default)]
struct Activity {
    begun: AtomicUsize,
    in_flight: AtomicUsize,
}

impl Activity {
    /// Resolves once the connection has had no request in flight, and begun none, for `idle`:
    /// after `idle` to `idle` and a fifth of it, as it is looked at [`IDLE_CHECKS`] times
    /// per `idle`.
    async fn idle(&self, idle: Duration) {
        let every = idle / IDLE_CHECKS;
        let (mut quiet, mut seen) = (0, self.begun.load(Ordering::Relaxed));
        // A request may end just after a look that found it in flight: the connection has been
        // idle for one look fewer than the looks that found it so.
        while quiet <= IDLE_CHECKS {
            tokio::time::sleep(every).await;
            let begun = self.begun.load(Ordering::Relaxed);
            if begun != seen || self.in_flight.load(Ordering::Relaxed) > 0 {
                (quiet, seen) = (0, begun);
            } else {
                quiet += 1;
            }
        }
    }
}

/// A request in flight, until its answer's body is dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn begin(activity: &Arc<Activity>) -> Self {
        activity.begun.fetch_add(1, Ordering::Relaxed);
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        Self(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection's service, counting its requests in [`Activity`].
#[derive(Clone)]
struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S, R, B> Service<R> for Watched<S>
where
    S: Service<R, Response = Response<B>, Future: Unpin>,
{
    type Response = Response<Tracked<B>>;
    type Error = S::Error;
    type Future = Answering<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        Answering {
            in_flight: Some(InFlight::begin(&self.activity)),
            answer: self.inner.call(request),
        }
    }
}

/// The answer of a [`Watched`] service, whose body holds its request in flight.
struct Answering<F> {
    answer: F,
    in_flight: Option<InFlight>,
}

impl<F, B, E> Future for Answering<F>
where
    F: Future<Output = Result<Response<B>, E>> + Unpin,
{
    type Output = Result<Response<Tracked<B>>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let answer = ready!(Pin::new(&mut self.answer).poll(cx))?;
        let in_flight = self
            .in_flight
            .take()
            .expect("an answer is polled until it is ready");
        Poll::Ready(Ok(answer.map(|body| Tracked {
            body,
            _in_flight: in_flight,
        })))
    }
}

/// An answer's body, holding its request in flight until dropped.
struct Tracked<B> {
    body: B,
    _in_flight: InFlight,
}

impl<B: HttpBody + Unpin> HttpBody for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Instant;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    const IDLE: Duration = Duration::from_millis(400);

    /// A server closing connections idle for [`IDLE`], whose `/slow` answers after twice that.
    async fn server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let service = tower::service_fn(|request: Request| {
            Box::pin(async move {
                if request.uri().path() == "/slow" {
                    tokio::time::sleep(IDLE * 2).await;
                }
                Ok::<_, Infallible>(Response::new(Body::from("done")))
            })
        });
        tokio::spawn(serve(listener, service, std::future::pending(), IDLE));
        addr
    }

    /// What the server sends until it closes the connection, which it must within eight times
    /// [`IDLE`].
    async fn until_closed(stream: &mut TcpStream) -> String {
        let mut sent = Vec::new();
        let read = stream.read_to_end(&mut sent);
        let _ = tokio::time::timeout(IDLE * 8, read)
            .await
            .expect("the server closes the connection");
        String::from_utf8_lossy(&sent).into_owned()
    }

    #[tokio::test]
    async fn a_connection_that_sends_nothing_is_closed_once_idle() {
        let mut stream = TcpStream::connect(server().await).await.unwrap();
        let opened = Instant::now();
        assert_eq!(until_closed(&mut stream).await, "");
        let open = opened.elapsed();
        assert!(open >= IDLE && open < IDLE * 3, "closed after {open:?}");
    }

    #[tokio::test]
    async fn a_head_sent_a_line_at_a_time_is_cut_off_once_idle() {
        let mut stream = TcpStream::connect(server().await).await.unwrap();
        let opened = Instant::now();
        let (mut reading, mut writing) = stream.split();
        let slow_head = async {
            let _ = writing.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n").await;
            for line in 0.. {
                tokio::time::sleep(IDLE / 4).await;
                let header = format!("x-{line}: y\r\n");
                if writing.write_all(header.as_bytes()).await.is_err() {
                    break;
                }
            }
        };
        let mut sent = Vec::new();
        tokio::select! {
            _ = reading.read_to_end(&mut sent) => {}
            () = slow_head => {}
            () = tokio::time::sleep(IDLE * 8) => panic!("the server keeps reading the head"),
        }
        let open = opened.elapsed();
        assert!(sent.is_empty(), "{}", String::from_utf8_lossy(&sent));
        assert!(open >= IDLE && open < IDLE * 3, "closed after {open:?}");
    }

    #[tokio::test]
    async fn a_request_in_flight_longer_than_the_idle_time_is_answered_and_kept_alive() {
        let mut stream = TcpStream::connect(server().await).await.unwrap();
        let opened = Instant::now();
        stream
            .write_all(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let sent = until_closed(&mut stream).await;
        assert!(
            sent.starts_with("HTTP/1.1 200") && sent.ends_with("done"),
            "{sent}"
        );
        // Twice IDLE in flight, then IDLE idle.
        let open = opened.elapsed();
        assert!(open >= IDLE * 3 && open < IDLE * 6, "closed after {open:?}");
    }

    #[tokio::test]
    async fn requests_closer_than_the_idle_time_keep_a_connection_open() {
        let mut stream = TcpStream::connect(server().await).await.unwrap();
        for _ in 0..6 {
            stream
                .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
                .await
                .unwrap();
            let mut sent = Vec::new();
            while !sent.ends_with(b"done") {
                let mut more = [0; 256];
                let read = stream.read(&mut more).await.unwrap();
                assert!(read > 0, "closed after {}", String::from_utf8_lossy(&sent));
                sent.extend_from_slice(&more[..read]);
            }
            assert!(sent.starts_with(b"HTTP/1.1 200"));
            tokio::time::sleep(IDLE / 2).await;
        }
    }
}
