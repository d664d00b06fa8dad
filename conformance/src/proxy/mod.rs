//! A validation proxy: it forwards an app's traffic to a deployment unchanged, streams
//! included, and judges both directions against openapi.json with the suite's validators and
//! levels ([`judge`]). Each violation is logged as it happens, counted in the answer's
//! `x-intent-violations` header, and kept in a [`Ledger`] that makes the suite's reports.

pub mod judge;
mod ledger;

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame as BodyFrame, Incoming};
use hyper::header::{ACCEPT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::json;
use tokio::net::TcpListener;

pub use judge::{Breach, Side};
pub use ledger::Ledger;

use crate::spec::Operation;
use crate::sse::Decoder;

/// The header that counts what an answer's exchange broke, when it broke anything.
pub const VIOLATIONS_HEADER: &str = "x-intent-violations";

/// The largest request body the proxy reads, as the reference server's default limit.
const BODY_LIMIT: usize = 1 << 20;

/// Headers of one hop only (RFC 9110, 7.6.1), never forwarded.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// A response body: whole, or a stream forwarded chunk by chunk.
type Body = BoxBody<Bytes, std::io::Error>;

/// The proxy of one upstream deployment.
pub struct Proxy {
    upstream: String,
    http: reqwest::Client,
    ledger: Arc<Ledger>,
}

impl Proxy {
    /// A proxy of the deployment at `upstream` (its base URL).
    pub fn new(upstream: &str) -> Self {
        Self {
            upstream: upstream.trim_end_matches('/').to_owned(),
            // A redirect is the app's to follow, as are the OAuth flows that answer with them.
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("an HTTP client"),
            ledger: Arc::default(),
        }
    }

    /// What the proxy saw so far.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The upstream's base URL.
    pub fn upstream(&self) -> &str {
        &self.upstream
    }

    /// Serves connections from `listener` until the task is dropped.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) -> std::io::Result<()> {
        loop {
            let (stream, _) = listener.accept().await?;
            let proxy = self.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let proxy = proxy.clone();
                    async move { Ok::<_, Infallible>(proxy.forward(request).await) }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                // A client that goes away mid-answer ends its connection; nothing to report.
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    }

    /// Forwards one request and its answer, judging both.
    async fn forward(&self, request: Request<Incoming>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let body = match http_body_util::Limited::new(body, BODY_LIMIT)
            .collect()
            .await
        {
            Ok(body) => body.to_bytes(),
            Err(error) => return refusal(StatusCode::BAD_REQUEST, &format!("{error}")),
        };
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let (operation, mut found) = judge::request(&judge::Request {
            method: parts.method.as_str(),
            path,
            headers: &parts.headers,
            body: &body,
        });
        let sent = self
            .http
            .request(parts.method.clone(), format!("{}{path}", self.upstream))
            .headers(without_encodings(forwarded(&parts.headers)))
            .body(body.clone())
            .send()
            .await;
        let answer = match sent {
            Ok(answer) => answer,
            Err(error) => {
                self.note(operation, None, &found);
                let message = format!("the upstream did not answer: {error}");
                return refusal(StatusCode::BAD_GATEWAY, &message);
            }
        };
        let status = answer.status();
        let headers = forwarded(answer.headers());
        let stream = headers
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if stream {
            if let Some(operation) = operation {
                found.extend(judge::response(operation, &body, status.as_u16(), b""));
            }
            self.note(operation, Some(status.as_u16()), &found);
            let body = self.frames(operation, answer);
            return response(status, headers, found.len(), body);
        }
        let answered = match answer.bytes().await {
            Ok(answered) => answered,
            Err(error) => {
                self.note(operation, None, &found);
                let message = format!("the upstream's answer broke off: {error}");
                return refusal(StatusCode::BAD_GATEWAY, &message);
            }
        };
        if let Some(operation) = operation {
            found.extend(judge::response(
                operation,
                &body,
                status.as_u16(),
                &answered,
            ));
        }
        self.note(operation, Some(status.as_u16()), &found);
        let body = Full::new(answered).map_err(|never| match never {}).boxed();
        response(status, headers, found.len(), body)
    }

    /// Notes an exchange in the ledger and logs what it broke, one line each. A request
    /// outside the interface (OAuth, metadata, health) that broke nothing is not its business.
    fn note(&self, operation: Option<&Operation>, status: Option<u16>, found: &[Breach]) {
        if operation.is_none() && found.is_empty() {
            return;
        }
        found.iter().for_each(log);
        self.ledger
            .exchange(operation.map(|o| o.id.as_str()), status, found);
    }

    /// The upstream's event stream, forwarded chunk by chunk as it arrives, each whole frame
    /// judged on the way.
    fn frames(&self, operation: Option<&'static Operation>, answer: reqwest::Response) -> Body {
        let mut decoder = Decoder::default();
        let ledger = self.ledger.clone();
        let chunks = answer.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(std::io::Error::other)?;
            if let Some(operation) = operation {
                decoder.push(&chunk);
                while let Some(frame) = decoder.frame() {
                    let found = judge::frame(operation, &frame);
                    found.iter().for_each(log);
                    ledger.frame(&operation.id, &found);
                }
            }
            Ok(BodyFrame::data(chunk))
        });
        BodyExt::boxed(StreamBody::new(chunks))
    }
}

/// Logs one violation as it happens: it names no value.
fn log(violation: &Breach) {
    eprintln!("VIOLATION {violation}");
}

/// `headers` without those of one hop.
fn forwarded(headers: &HeaderMap) -> HeaderMap {
    let mut out = headers.clone();
    for name in HOP_BY_HOP {
        out.remove(name);
    }
    out
}

/// A request's `headers` asking for the answer as it is: a compressed body could not be judged.
fn without_encodings(mut headers: HeaderMap) -> HeaderMap {
    headers.remove(ACCEPT_ENCODING);
    headers
}

/// The upstream's answer, with the count of violations when there were any.
fn response(
    status: StatusCode,
    mut headers: HeaderMap,
    violations: usize,
    body: Body,
) -> Response<Body> {
    if violations > 0 {
        headers.insert(
            HeaderName::from_static(VIOLATIONS_HEADER),
            HeaderValue::from(violations),
        );
    }
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// The proxy's own refusal, in the error envelope.
fn refusal(status: StatusCode, message: &str) -> Response<Body> {
    let code = if status == StatusCode::BAD_GATEWAY {
        "bad_gateway"
    } else {
        "invalid_request"
    };
    let body = json!({ "error": { "code": code, "message": message } }).to_string();
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let body = Full::new(Bytes::from(body))
        .map_err(|never| match never {})
        .boxed();
    response(status, headers, 0, body)
}
