//! The generated [`Client`]'s hooks, over the [`ClientContext`] every call carries: each request
//! gets its resource's token as it is sent, a 401 is answered by renewing the token once, a
//! failure the [`RetryPolicy`] retries (a keyed call's duplicate still in flight among them) is
//! sent again, each call gets its timeout, and each sending is a `tracing` span.

use std::time::Duration;

use progenitor_client::{ClientHooks, ClientInfo, OperationInfo};
use reqwest::header::{AUTHORIZATION, HeaderValue};
use reqwest::{Request, Response, ResponseBuilderExt, StatusCode};
use serde_json::Value;

use crate::Error;
use crate::context::ClientContext;
use crate::error::{request_id, undecodable};
use crate::raw::Client;
use crate::retry::{Attempt, RetryPolicy};

/// Operations whose answer is a stream: no timeout cuts them.
const STREAMS: &[&str] = &["stream_chat_events"];

impl ClientContext {
    /// The timeout of one sending of `request`: none for a stream; for a long-poll, the
    /// timeout beyond its `wait`.
    fn timeout_of(&self, request: &Request, info: &OperationInfo) -> Option<Duration> {
        let timeout = self.timeout?;
        if STREAMS.contains(&info.operation_id) {
            return None;
        }
        let wait = request
            .url()
            .query_pairs()
            .find(|(name, _)| name == "wait")
            .and_then(|(_, value)| value.parse().ok())
            .map_or(Duration::ZERO, Duration::from_millis);
        Some(timeout + wait)
    }
}

impl ClientHooks<ClientContext> for Client {
    async fn pre<E>(
        &self,
        request: &mut Request,
        info: &OperationInfo,
    ) -> Result<(), progenitor_client::Error<E>> {
        if let Some(timeout) = self.inner().timeout_of(request, info) {
            *request.timeout_mut() = Some(timeout);
        }
        let source = match self.inner().tokens.source_for(request.url()) {
            Ok(Some(source)) => source,
            Ok(None) => return Ok(()),
            Err(resource) => {
                return Err(progenitor_client::Error::Custom(crate::error::no_token(
                    resource,
                )));
            }
        };
        let token = source
            .token()
            .await
            .map_err(|e| progenitor_client::Error::Custom(token_failure(e)))?;
        bear(request, &token).map_err(|e| progenitor_client::Error::Custom(token_failure(e)))
    }

    async fn exec(&self, mut request: Request, info: &OperationInfo) -> reqwest::Result<Response> {
        let retry = &self.inner().retry;
        let method = request.method().clone();
        // Only an unsafe method's key makes a call repeatable or a 409 a duplicate in flight.
        let keyed = !method.is_safe() && request.headers().contains_key("idempotency-key");
        let mut attempt = 1;
        loop {
            let again = retry.retries().then(|| copy_of(&request)).flatten();
            let sent = self.traced(request, again.as_ref(), info, attempt).await;
            let (sent, in_flight) = match sent {
                Ok(response) if keyed && response.status() == StatusCode::CONFLICT => {
                    Box::pin(in_flight(response)).await
                }
                other => (other, false),
            };
            let outcome = if in_flight {
                Attempt::InFlight
            } else {
                Attempt::of(&sent)
            };
            let delay = retry.delay(attempt, &method, keyed, outcome);
            match (again, delay) {
                (Some(again), Some(delay)) => {
                    tokio::time::sleep(delay).await;
                    request = again;
                    attempt += 1;
                }
                _ => return sent,
            }
        }
    }
}

impl Client {
    /// This client with the same tokens and timeouts, sending each call once.
    pub(crate) fn sending_once(&self) -> Self {
        let mut once = self.clone();
        once.inner.retry = RetryPolicy::none();
        once
    }

    /// Sends `request` as attempt `attempt` of `info`'s operation in a `tracing` span `request`
    /// with the method, the operation (its openapi.json operationId, `startChat`), the attempt,
    /// and once answered the status and the deployment's request id. `spare` is a copy of
    /// `request` kept for a retry, if any.
    async fn traced(
        &self,
        request: Request,
        spare: Option<&Request>,
        info: &OperationInfo,
        attempt: u32,
    ) -> reqwest::Result<Response> {
        let span = tracing::debug_span!(
            "request",
            method = %request.method(),
            operation = %operation_id(info.operation_id),
            attempt,
            status = tracing::field::Empty,
            request_id = tracing::field::Empty,
        );
        let sent =
            tracing::Instrument::instrument(self.authorized(request, spare), span.clone()).await;
        match &sent {
            Ok(response) => {
                if !span.is_disabled() {
                    span.record("status", response.status().as_u16());
                    if let Some(id) = request_id(response.headers()) {
                        span.record("request_id", id);
                    }
                }
                // The event carries both too, for a subscriber (or `log`) that takes no spans.
                tracing::debug!(
                    parent: &span,
                    status = response.status().as_u16(),
                    request_id = request_id(response.headers()),
                    "answered"
                );
            }
            Err(error) => tracing::debug!(parent: &span, %error, "not answered"),
        }
        sent
    }

    /// Sends `request`; a 401 to a bearer token is answered by renewing the token and sending
    /// the request once more (a copy of `spare` when there is one, else of `request` made
    /// before sending).
    async fn authorized(
        &self,
        request: Request,
        spare: Option<&Request>,
    ) -> reqwest::Result<Response> {
        if !request.headers().contains_key(AUTHORIZATION) {
            return self.client().execute(request).await;
        }
        let copy = if spare.is_some() {
            None
        } else {
            copy_of(&request)
        };
        let response = self.client().execute(request).await?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        match copy.or_else(|| spare.and_then(copy_of)) {
            Some(again) => Box::pin(self.renewed(again, response)).await,
            None => Ok(response),
        }
    }

    /// `again`, a copy of a request `rejected` with a 401, sent once more with the token its
    /// resource's source renews; a renewal that fails leaves the 401 as the answer (the next
    /// request's `pre` runs the source again and reports its error).
    async fn renewed(&self, mut again: Request, rejected: Response) -> reqwest::Result<Response> {
        let Ok(Some(source)) = self.inner().tokens.source_for(again.url()) else {
            return Ok(rejected);
        };
        let Some(sent) = again.headers().get(AUTHORIZATION).and_then(bearer) else {
            return Ok(rejected);
        };
        let sent = sent.to_owned();
        match source.refresh(&sent).await {
            Ok(Some(fresh)) if bear(&mut again, &fresh).is_ok() => {
                self.client().execute(again).await
            }
            _ => Ok(rejected),
        }
    }
}

/// A copy of `request` to send again, or `None` when its body is a stream. Without a body, it
/// is made here: reqwest's `try_clone` gives each copy extensions of its own even where there
/// are none (a call's only extension is its timeout). With one, `try_clone` shares its bytes.
fn copy_of(request: &Request) -> Option<Request> {
    if request.body().is_some() {
        return request.try_clone();
    }
    let mut copy = Request::new(request.method().clone(), request.url().clone());
    *copy.headers_mut() = request.headers().clone();
    *copy.version_mut() = request.version();
    if let Some(timeout) = request.timeout() {
        *copy.timeout_mut() = Some(*timeout);
    }
    Some(copy)
}

/// `conflict` read whole, and whether it is a 409 `idempotency_in_flight`; the answer is handed
/// on as it came (its body kept in memory).
async fn in_flight(conflict: Response) -> (reqwest::Result<Response>, bool) {
    let (status, version, headers, url) = (
        conflict.status(),
        conflict.version(),
        conflict.headers().clone(),
        conflict.url().clone(),
    );
    let body = match conflict.bytes().await {
        Ok(body) => body,
        Err(error) => return (Err(error), false),
    };
    let envelope: Option<intent_models::ErrorEnvelope> = serde_json::from_slice(&body).ok();
    let in_flight = envelope.is_some_and(|envelope| {
        Error::from_response(status.as_u16(), &headers, envelope.error).code()
            == Some("idempotency_in_flight")
    });
    let mut whole = http::Response::builder()
        .status(status)
        .version(version)
        .url(url)
        .body(body)
        .expect("the parts of an answer received make an answer");
    *whole.headers_mut() = headers;
    (Ok(Response::from(whole)), in_flight)
}

/// Sends a request built outside the generated methods through the same hooks, as
/// `operation_id` (the openapi.json operationId it sends, or what it fetches), and reads the
/// answer with `read`, or the error it names.
pub(crate) async fn call<T>(
    client: &Client,
    request: Request,
    operation_id: &'static str,
    read: fn(&[u8]) -> serde_json::Result<T>,
) -> Result<T, Error> {
    let (status, body) = send(client, request, operation_id).await?;
    read(&body).map_err(|e| undecodable(Some(status), e, &body))
}

/// Sends `request` as [`call`] does: the status and body of a success, or the error an answer
/// of 400 or more names.
pub(crate) async fn send(
    client: &Client,
    mut request: Request,
    operation_id: &'static str,
) -> Result<(u16, Vec<u8>), Error> {
    let info = OperationInfo { operation_id };
    client
        .pre::<intent_models::ErrorEnvelope>(&mut request, &info)
        .await?;
    let response = client
        .exec(request, &info)
        .await
        .map_err(Error::Transport)?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.map_err(Error::Transport)?;
    if status >= 400 {
        let body: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        return Err(Error::from_response(
            status,
            &headers,
            body.get("error").cloned().unwrap_or(body),
        ));
    }
    Ok((status, bytes.into()))
}

/// The openapi.json operationId of progenitor's method name: `start_chat` is `startChat`.
fn operation_id(method: &str) -> String {
    let mut words = method.split('_');
    let first = words.next().unwrap_or_default().to_owned();
    words.fold(first, |mut id, word| {
        let mut chars = word.chars();
        if let Some(initial) = chars.next() {
            id.extend(initial.to_uppercase());
            id.push_str(chars.as_str());
        }
        id
    })
}

fn bear(request: &mut Request, token: &str) -> Result<(), Error> {
    let mut header = String::with_capacity("Bearer ".len() + token.len());
    header.push_str("Bearer ");
    header.push_str(token);
    let mut value = HeaderValue::try_from(header)
        .map_err(|_| Error::Token("the token is not a valid header value".to_owned()))?;
    value.set_sensitive(true);
    request.headers_mut().insert(AUTHORIZATION, value);
    Ok(())
}

fn bearer(value: &HeaderValue) -> Option<&str> {
    value.to_str().ok()?.strip_prefix("Bearer ")
}

/// The message of a source's error, carried through progenitor's `Custom` to [`Error::Token`].
fn token_failure(error: Error) -> String {
    match error {
        Error::Token(message) => message,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn spans_name_operations_by_their_operation_id() {
        assert_eq!(super::operation_id("start_chat"), "startChat");
        assert_eq!(super::operation_id("get_chat_events"), "getChatEvents");
        assert_eq!(super::operation_id("evmBuild"), "evmBuild");
    }
}
