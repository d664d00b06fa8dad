//! Serving the router: each accepted connection is an HTTP/1.1 connection driven by hyper, with
//! its buffers bounded for a server that holds many waiting clients (long-polls and SSE
//! streams), idle connections closed, and a graceful shutdown that lets the open ones finish.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::response::Response;
use axum::serve::Listener;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::{Service, ServiceExt};

/// Longest a client may take to send a request's head, and the longest a kept-alive connection
/// may wait for its next request.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The most a connection buffers to read a request's head or write an answer: twice hyper's
/// floor. A connection starts with 8 KiB each way, and without a bound its read buffer grows
/// (to about 400 KiB) with the reads that fill it, and stays so while the connection waits.
const MAX_BUFFER: usize = 16 * 1024;

/// What an answer's body is: axum's, or one a layer wraps around it.
pub trait AnswerBody: HttpBody<Data = Bytes, Error = axum::Error> + Send + 'static {}

impl<B: HttpBody<Data = Bytes, Error = axum::Error> + Send + 'static> AnswerBody for B {}

/// Serves `service` on `listener` until `shutdown` resolves, then accepts no connection, lets
/// each open one finish its request and close, and returns once all have.
pub async fn serve<S, B>(
    mut listener: TcpListener,
    service: S,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()>
where
    S: Service<Request, Response = Response<B>, Error = Infallible, Future: Send>
        + Clone
        + Send
        + 'static,
    B: AnswerBody,
{
    // hyper's request body becomes axum's, as a `Router` would make it.
    let service = service.map_request(|request: hyper::Request<Incoming>| request.map(Body::new));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_BUFFER);
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
        let service = TowerToHyperService::new(service.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "a connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
