//! What a handler answers in JSON.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::encoded::Encoded;

/// A JSON answer, written into one `Vec` that becomes the body: axum's `Json` writes through a
/// `BytesMut` writer, a call per token, which cost a fifth more (700 instructions of a session
/// GET's 33,000, by callgrind, when a session GET serialized its answer).
pub struct Json<T>(pub T);

impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        match serde_json::to_vec(&self.0) {
            Ok(body) => json(body),
            Err(error) => {
                tracing::error!(%error, "an answer does not serialize");
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
        }
    }
}

/// JSON serialized before: its bytes are the body.
impl<T> IntoResponse for Encoded<T> {
    fn into_response(self) -> Response {
        json(self.into_json())
    }
}

/// 200 with `body`, JSON text, built directly: through axum's tuple of headers and body, an
/// answer took 1,000 instructions more (callgrind).
pub fn json(body: impl Into<Body>) -> Response {
    let mut answer = Response::new(body.into());
    answer.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    answer
}
