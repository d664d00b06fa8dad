//! One request to the deployment: made ready, sent (a 429 with `Retry-After` waited out within a
//! budget), recorded, and read whole or left open as a stream.

use std::time::{Duration, Instant};

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::Target;
use crate::exchange::{Exchange, Recorded};
use crate::finding::{Broke, Finding, excerpt};

/// A response, read whole.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
    /// The body as JSON; `Null` when empty or not JSON.
    pub body: Value,
    /// The body as text.
    pub text: String,
}

impl Reply {
    /// Fails unless the status is `expected`.
    pub fn ensure_status(&self, expected: u16, what: &str) -> Result<&Self, Finding> {
        if self.status != expected {
            crate::finding::breaking([Broke::Status {
                what: crate::finding::shape(what),
                expected,
                seen: self.status,
            }]);
        }
        crate::finding::ensure(self.status == expected, || {
            format!(
                "{what}: expected {expected}, got {} {}",
                self.status,
                excerpt(&self.text)
            )
        })?;
        Ok(self)
    }

    /// Fails unless the status is a success (2xx): the document gives no success status in parts
    /// 4.2 and 4.3. That it is 200, the profile's, is a profile assertion.
    pub fn ensure_success(&self, what: &str) -> Result<&Self, Finding> {
        let success = (200..300).contains(&self.status);
        if !success {
            crate::finding::breaking([Broke::Status {
                what: crate::finding::shape(what),
                expected: 200,
                seen: self.status,
            }]);
        }
        crate::finding::ensure(success, || {
            format!(
                "{what}: expected a success (2xx), got {} {}",
                self.status,
                excerpt(&self.text)
            )
        })?;
        crate::finding::profile(self.status == 200, || {
            format!("{what}: {}, where the profile answers 200", self.status)
        });
        Ok(self)
    }

    /// Fails unless the request was refused: a 4xx with an error envelope.
    pub fn ensure_refused(&self, what: &str) -> Result<&Self, Finding> {
        let refused = (400..500).contains(&self.status) && self.body.get("error").is_some();
        crate::finding::ensure(refused, || {
            format!(
                "{what}: {} {}, not a refusal in the error envelope",
                self.status,
                excerpt(&self.text)
            )
        })?;
        Ok(self)
    }

    /// Fails unless the status is `expected` and the body is an error envelope.
    pub fn ensure_envelope(&self, expected: u16, what: &str) -> Result<&Self, Finding> {
        self.ensure_status(expected, what)?;
        crate::finding::ensure(self.body.get("error").is_some(), || {
            format!(
                "{what}: the {expected} has no error envelope: {}",
                excerpt(&self.text)
            )
        })?;
        Ok(self)
    }

    /// Whether the error envelope names `code` anywhere in its `error` (part 7: its content is
    /// not shown).
    pub fn names_error(&self, code: &str) -> bool {
        self.body
            .get("error")
            .is_some_and(|error| names(error, code))
    }

    /// Fails unless the status is `expected` and the error envelope names `code` anywhere in
    /// its `error` (part 7: its content is not shown). That `code` stands where the profile puts
    /// it (`error.code`, or `error` itself) is a profile assertion.
    pub fn ensure_error(&self, expected: u16, code: &str, what: &str) -> Result<&Self, Finding> {
        self.ensure_status(expected, what)?;
        crate::finding::ensure(self.names_error(code), || {
            format!(
                "{what}: expected error `{code}` in the envelope, got {}",
                excerpt(&self.text)
            )
        })?;
        let ours = crate::means::code_at(None, &self.body);
        crate::finding::profile(ours == Some(code), || {
            format!(
                "{what}: `{code}` is not where the profile puts it (`error.code` or `error`): {}",
                excerpt(&self.text)
            )
        });
        Ok(self)
    }
}

/// Whether `value` holds the string `code` at any depth.
fn names(value: &Value, code: &str) -> bool {
    match value {
        Value::String(text) => text == code,
        Value::Array(items) => items.iter().any(|item| names(item, code)),
        Value::Object(members) => members.values().any(|member| names(member, code)),
        _ => false,
    }
}

/// How long one request may wait out 429 answers with `Retry-After`, in all.
pub const RETRY_AFTER_BUDGET: Duration = Duration::from_secs(30);

/// One request being made ready.
pub struct Call<'a> {
    target: &'a Target,
    method: Method,
    path: String,
    builder: reqwest::RequestBuilder,
    /// Whether a 429 with `Retry-After` is waited out and the request sent again.
    patient: bool,
    /// The bearer token sent, so that what the request creates can be removed with it.
    bearer: Option<String>,
    /// The JSON body sent, whole, for judging the answer to it.
    sent: Option<Value>,
}

impl<'a> Call<'a> {
    /// A request to `path` (with its query) at `base`, one of `target`'s addresses.
    pub(super) fn new(target: &'a Target, method: Method, base: &str, path: &str) -> Self {
        Call {
            target,
            method: method.clone(),
            path: path.to_owned(),
            builder: target.http.request(method, format!("{base}{path}")),
            patient: true,
            bearer: None,
            sent: None,
        }
    }

    /// Sends `token` as the bearer.
    pub fn bearer(mut self, token: &str) -> Self {
        self.builder = self.builder.bearer_auth(token);
        self.bearer = Some(token.to_owned());
        self
    }

    /// Sends `body` as JSON.
    pub fn json(mut self, body: &Value) -> Self {
        self.builder = self.builder.json(body);
        self.sent = Some(body.clone());
        self
    }

    /// Sends `pairs` as an `application/x-www-form-urlencoded` body, as OAuth endpoints take.
    pub fn form(mut self, pairs: &[(&str, &str)]) -> Self {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        self.builder = self
            .builder
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body);
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.builder = self.builder.header(name, value);
        self
    }

    /// Takes a 429 as the answer, instead of waiting out its `Retry-After`: for checks of the
    /// rate limit itself.
    pub fn impatient(mut self) -> Self {
        self.patient = false;
        self
    }

    /// Sends the request. A 429 with `Retry-After` in whole seconds is waited out and the request
    /// sent again while [`RETRY_AFTER_BUDGET`] lasts, each time a warning of the running check:
    /// a deployment's rate limit is never a failure of the check that met it.
    async fn dispatch(&self, what: &str) -> Result<(reqwest::Response, Exchange), Finding> {
        let mut waited = Duration::ZERO;
        loop {
            let builder = self
                .builder
                .try_clone()
                .ok_or_else(|| Finding::Error(format!("{what}: a request that cannot be sent")))?;
            let (client, request) = builder.build_split();
            let request = request.map_err(|e| Finding::Error(format!("{what}: {e}")))?;
            let mut exchange = Exchange::sent(&request, |value| self.target.is_secret(value));
            let sent = Instant::now();
            let response = match client.execute(request).await {
                Ok(response) => response,
                Err(e) => {
                    exchange.error = Some(e.to_string());
                    crate::finding::exchanged(exchange);
                    return Err(Finding::Error(format!("{what}: {e}")));
                }
            };
            exchange.answered(
                response.status().as_u16(),
                response.headers(),
                sent.elapsed(),
            );
            let delay = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.trim().parse().ok())
                .map(Duration::from_secs);
            match delay {
                Some(delay)
                    if self.patient
                        && response.status() == reqwest::StatusCode::TOO_MANY_REQUESTS
                        && waited + delay <= RETRY_AFTER_BUDGET =>
                {
                    crate::finding::exchanged(exchange);
                    crate::finding::warn(format!(
                        "{what}: 429, waited out its Retry-After of {} s and sent it again",
                        delay.as_secs()
                    ));
                    tokio::time::sleep(delay).await;
                    waited += delay;
                }
                _ => return Ok((response, exchange)),
            }
        }
    }

    /// Sends the request and returns the response unread, for streams; only its status is
    /// recorded, for the coverage, and its exchange, whose frames the stream `Reader` adds.
    pub async fn open(self) -> Result<reqwest::Response, Finding> {
        let what = format!("{} {}", self.method, self.path);
        let (mut response, exchange) = self.dispatch(&what).await?;
        let status = response.status().as_u16();
        self.target
            .record
            .answered(&self.method, &self.path, status);
        if let Some(place) = crate::finding::exchanged(exchange) {
            response.extensions_mut().insert(Recorded(place));
        }
        Ok(response)
    }

    /// Sends the request and reads the whole response, unless it is an event stream (then its
    /// body is left unread and empty); a transport failure is the suite's error.
    pub async fn send(self) -> Result<Reply, Finding> {
        let what = format!("{} {}", self.method, self.path);
        let (response, mut exchange) = self.dispatch(&what).await?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let streams = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|kind| kind.to_str().ok())
            .is_some_and(|kind| kind.starts_with("text/event-stream"));
        let text = if streams {
            String::new()
        } else {
            response
                .text()
                .await
                .map_err(|e| Finding::Error(format!("{what}: reading the body: {e}")))?
        };
        if !streams {
            exchange.body(&text);
        }
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        self.target.record.response(
            &exchange,
            self.sent.as_ref(),
            (&self.method, &self.path),
            (&body, &text),
        );
        crate::finding::exchanged(exchange);
        if (200..300).contains(&status) {
            let record = &self.target.record;
            let means = &self.target.settings.means;
            record.created((&self.method, &self.path), &body, self.bearer, means);
        }
        Ok(Reply {
            status,
            headers,
            body,
            text,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;
    use crate::finding::tallied;
    use crate::target::{Settings, Tokens};

    const TOO_MANY: &str = "HTTP/1.1 429 Too Many Requests\r\nretry-after: 0\r\n\
                            content-length: 0\r\nconnection: close\r\n\r\n";
    const TOO_LONG: &str = "HTTP/1.1 429 Too Many Requests\r\nretry-after: 31\r\n\
                            content-length: 0\r\nconnection: close\r\n\r\n";
    const OK: &str = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                      content-length: 2\r\nconnection: close\r\n\r\n{}";

    /// A deployment on loopback that answers its connections with `answers`, one each, in order.
    fn scripted(answers: Vec<&'static str>) -> Target {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for answer in answers {
                let (mut stream, _) = listener.accept().unwrap();
                let (mut request, mut buffer) = (Vec::new(), [0; 1024]);
                while !request.windows(4).any(|end| end == b"\r\n\r\n") {
                    let read = stream.read(&mut buffer).unwrap();
                    request.extend_from_slice(&buffer[..read]);
                }
                stream.write_all(answer.as_bytes()).unwrap();
            }
        });
        Target::new(&base, Tokens::default(), Settings::default())
    }

    #[tokio::test]
    async fn a_429_with_retry_after_is_waited_out_and_sent_again_as_a_warning() {
        let target = scripted(vec![TOO_MANY, TOO_MANY, OK]);
        let (reply, tally) = tallied(target.request(Method::GET, "/v1/agent/chat/s").send()).await;
        assert_eq!(reply.unwrap().status, 200);
        let statuses: Vec<_> = tally.exchanges.iter().map(|e| e.status).collect();
        assert_eq!(statuses, [Some(429), Some(429), Some(200)]);
        assert_eq!(tally.warnings.len(), 2, "{:?}", tally.warnings);
        let coverage = target.coverage();
        let events = coverage
            .iter()
            .find(|c| c.path == "/v1/agent/chat/{sessionId}");
        assert_eq!(events.unwrap().statuses, [200], "the answer, not the waits");
    }

    #[tokio::test]
    async fn an_impatient_call_or_a_wait_beyond_the_budget_takes_the_429() {
        let target = scripted(vec![TOO_MANY, TOO_LONG]);
        let impatient = target.request(Method::GET, "/v1/agent/chat/s").impatient();
        let (reply, tally) = tallied(impatient.send()).await;
        assert_eq!(reply.unwrap().status, 429);
        assert_eq!((tally.exchanges.len(), tally.warnings.len()), (1, 0));
        let (reply, tally) = tallied(target.request(Method::GET, "/v1/agent/chat/s").send()).await;
        assert_eq!(reply.unwrap().status, 429);
        assert_eq!((tally.exchanges.len(), tally.warnings.len()), (1, 0));
    }

    #[tokio::test]
    async fn a_deployment_that_cannot_be_reached_is_the_suites_error_with_its_exchange() {
        let target = scripted(Vec::new());
        let (reply, tally) = tallied(target.request(Method::GET, "/v1/agent/chat/s").send()).await;
        assert!(matches!(reply, Err(Finding::Error(_))), "{reply:?}");
        assert!(tally.exchanges[0].error.is_some());
    }
}
