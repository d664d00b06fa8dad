//! The HTTP exchanges a check makes, kept with its outcome: what was sent, what came back, and a
//! `curl` line that sends the request again. Credentials never enter a record: the bearer token
//! is written `$TOKEN` and cookies `[redacted]`; the report redacts the bodies (see
//! [`crate::report::redacted`]).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;
use serde::Serialize;

use crate::sse::Frame;

/// How much of a body, or of a stream's frames, a record keeps.
pub const BODY_LIMIT: usize = 4096;

/// One request and what answered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Exchange {
    /// Upper-case HTTP method.
    pub method: String,
    /// The whole URL, query included.
    pub url: String,
    /// The request's headers, lower-case names; `Authorization` as `Bearer $TOKEN`.
    pub request_headers: BTreeMap<String, String>,
    /// The request's body, cut at [`BODY_LIMIT`] bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_body: Option<String>,
    /// When it was sent, Unix milliseconds.
    pub sent: u64,
    /// How long the answer took to arrive (its headers, for a stream), in milliseconds.
    pub millis: u64,
    /// The status; absent when no answer came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The answer's headers.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub response_headers: BTreeMap<String, String>,
    /// The answer's body, cut at [`BODY_LIMIT`] bytes; absent for a stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_body: Option<String>,
    /// The frames a stream delivered while the check read it, up to [`BODY_LIMIT`] bytes of data.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<Frame>,
    /// Frames received beyond what `frames` keeps.
    #[serde(skip_serializing_if = "is_zero")]
    pub frames_omitted: usize,
    /// Why no answer came (a transport error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where [`crate::target::Call::open`] kept a stream's exchange, carried in the response's
/// extensions so that the reader of the stream adds its frames there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recorded(pub usize);

fn is_zero(count: &usize) -> bool {
    *count == 0
}

impl Exchange {
    /// The record of `request`, about to be sent; a bearer credential that `is_token` (one of
    /// the run's) is written `$TOKEN`.
    pub(crate) fn sent(request: &reqwest::Request, is_token: impl Fn(&str) -> bool) -> Self {
        let request_body = request
            .body()
            .and_then(reqwest::Body::as_bytes)
            .map(|bytes| cut(&String::from_utf8_lossy(bytes)));
        Self {
            method: request.method().to_string(),
            url: request.url().to_string(),
            request_headers: headers(request.headers(), &is_token),
            request_body,
            sent: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |now| now.as_millis() as u64),
            millis: 0,
            status: None,
            response_headers: BTreeMap::new(),
            response_body: None,
            frames: Vec::new(),
            frames_omitted: 0,
            error: None,
        }
    }

    /// Notes the answer's status and headers, `took` after sending.
    pub(crate) fn answered(&mut self, status: u16, headers: &HeaderMap, took: Duration) {
        self.status = Some(status);
        self.response_headers = self::headers(headers, &|_| false);
        self.millis = took.as_millis() as u64;
    }

    /// Notes the answer's body.
    pub(crate) fn body(&mut self, text: &str) {
        self.response_body = Some(cut(text));
    }

    /// Notes a frame of the stream, while the frames kept stay under [`BODY_LIMIT`] bytes.
    pub(crate) fn frame(&mut self, frame: &Frame) {
        let kept: usize = self.frames.iter().map(|frame| frame.data.len()).sum();
        if kept + frame.data.len() <= BODY_LIMIT {
            self.frames.push(frame.clone());
        } else {
            self.frames_omitted += 1;
        }
    }

    /// A `curl` command line that sends the request again, with the token as `$TOKEN`.
    pub fn curl(&self) -> String {
        let mut line = format!("curl -sS -X {} {}", self.method, quoted(&self.url));
        for (name, value) in &self.request_headers {
            if name == "authorization" {
                // In double quotes, so that the shell puts in the token.
                line.push_str(&format!(" -H \"{name}: {value}\""));
            } else {
                line.push_str(&format!(" -H {}", quoted(&format!("{name}: {value}"))));
            }
        }
        if let Some(body) = &self.request_body {
            line.push_str(&format!(" --data-raw {}", quoted(body)));
        }
        line
    }

    /// One line: `METHOD url -> status in N ms` (or the transport error).
    pub fn summary(&self) -> String {
        let answer = match (self.status, &self.error) {
            (Some(status), _) => status.to_string(),
            (None, Some(error)) => error.clone(),
            (None, None) => "no answer".into(),
        };
        format!(
            "{} {} -> {answer} in {} ms",
            self.method, self.url, self.millis
        )
    }
}

/// `exchanges` as text, the way an HTTP transcript reads: each request line with its headers
/// (`>`) and body, then the answer's headers (`<`) and body or frames.
pub fn transcript(exchanges: &[Exchange]) -> String {
    let mut out = String::new();
    for exchange in exchanges {
        out.push_str(&exchange.summary());
        out.push('\n');
        for (name, value) in &exchange.request_headers {
            out.push_str(&format!("> {name}: {value}\n"));
        }
        if let Some(body) = &exchange.request_body {
            out.push_str(&format!("{body}\n"));
        }
        for (name, value) in &exchange.response_headers {
            out.push_str(&format!("< {name}: {value}\n"));
        }
        if let Some(body) = &exchange.response_body {
            out.push_str(&format!("{body}\n"));
        }
        for frame in &exchange.frames {
            let id = frame
                .id
                .as_deref()
                .map(|id| format!(" id {id}"))
                .unwrap_or_default();
            out.push_str(&format!("event {}{id}: {}\n", frame.event, frame.data));
        }
        if exchange.frames_omitted > 0 {
            out.push_str(&format!("and {} more frames\n", exchange.frames_omitted));
        }
        out.push('\n');
    }
    out
}

/// `headers` by lower-case name, repeated ones joined with `, `; a bearer credential that
/// `is_token` (or shaped like a JWT) written `$TOKEN`, cookies `[redacted]`. Any other
/// credential is kept as sent (a check's malformed or foreign one, which a reproduction must
/// send again); the report still redacts what looks like a secret.
fn headers(headers: &HeaderMap, is_token: &dyn Fn(&str) -> bool) -> BTreeMap<String, String> {
    let mut map: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
        let value = match name.as_str() {
            "authorization" | "proxy-authorization" => match text.split_once(' ') {
                Some((scheme, credential))
                    if scheme.eq_ignore_ascii_case("bearer")
                        && (is_token(credential) || credential.starts_with("eyJ")) =>
                {
                    "Bearer $TOKEN".to_owned()
                }
                _ => text,
            },
            "cookie" | "set-cookie" => "[redacted]".to_owned(),
            _ => text,
        };
        map.entry(name.as_str().to_owned())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(&value);
            })
            .or_insert(value);
    }
    map
}

/// The first [`BODY_LIMIT`] bytes of `text` (on a character boundary), saying how many more
/// there were.
fn cut(text: &str) -> String {
    if text.len() <= BODY_LIMIT {
        return text.to_owned();
    }
    let end = (0..=BODY_LIMIT)
        .rev()
        .find(|&at| text.is_char_boundary(at))
        .unwrap_or(0);
    format!("{}… ({} more bytes)", &text[..end], text.len() - end)
}

/// `text` in single quotes for a POSIX shell.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: &str) -> reqwest::Request {
        reqwest::Client::new()
            .post("http://127.0.0.1:9/v1/agent/chat?x=1")
            .bearer_auth("eyJhbGciOiJIUzI1NiJ9.secret.sig")
            .header("cookie", "sid=42")
            .header("content-type", "application/json")
            .body(body.to_owned())
            .build()
            .unwrap()
    }

    #[test]
    fn a_record_holds_no_credential_and_its_curl_line_sends_the_same_request() {
        let exchange = Exchange::sent(&request(r#"{"message":"it's"}"#), |_| false);
        let text = serde_json::to_string(&exchange).unwrap();
        assert!(!text.contains("eyJ") && !text.contains("sid=42"), "{text}");
        assert_eq!(
            exchange.curl(),
            "curl -sS -X POST 'http://127.0.0.1:9/v1/agent/chat?x=1' \
             -H \"authorization: Bearer $TOKEN\" -H 'content-type: application/json' \
             -H 'cookie: [redacted]' --data-raw '{\"message\":\"it'\\''s\"}'"
        );
    }

    #[test]
    fn a_run_token_is_written_token_and_a_malformed_credential_kept_as_sent() {
        let sent = |value: &str| {
            let request = reqwest::Client::new()
                .get("http://127.0.0.1:9/")
                .header("authorization", value)
                .build()
                .unwrap();
            let exchange = Exchange::sent(&request, |value| value == "opaque-run-token");
            exchange.request_headers["authorization"].clone()
        };
        assert_eq!(sent("Bearer opaque-run-token"), "Bearer $TOKEN");
        assert_eq!(sent("Basic Y29uZm9ybWFuY2U="), "Basic Y29uZm9ybWFuY2U=");
        assert_eq!(sent("Bearer not-a.token"), "Bearer not-a.token");
    }

    #[test]
    fn bodies_and_frames_are_cut_at_the_limit() {
        let mut exchange = Exchange::sent(&request(&"é".repeat(BODY_LIMIT)), |_| false);
        let body = exchange.request_body.clone().unwrap();
        assert!(
            body.ends_with(&format!("… ({} more bytes)", BODY_LIMIT)),
            "{body}"
        );
        let frame = Frame {
            event: "page".into(),
            id: Some("c1".into()),
            data: "x".repeat(BODY_LIMIT / 3),
        };
        for _ in 0..5 {
            exchange.frame(&frame);
        }
        assert_eq!((exchange.frames.len(), exchange.frames_omitted), (3, 2));
    }
}
