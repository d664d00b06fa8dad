//! A stream the deployment answers (`text/event-stream`), read frame by frame into the running
//! check's record of its exchange.

use std::time::Duration;

use futures_util::StreamExt;

use crate::exchange::Recorded;
use crate::finding::Finding;
use crate::sse::{Decoder, Frame};

/// An open stream.
pub(crate) struct Reader {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    decoder: Decoder,
    /// The stream's exchange in the running check's record, which its frames join.
    recorded: Option<usize>,
}

impl Reader {
    /// Reads `response`'s body as SSE.
    pub(crate) fn new(response: reqwest::Response) -> Self {
        let recorded = response.extensions().get::<Recorded>().map(|place| place.0);
        Self {
            body: response.bytes_stream().boxed(),
            decoder: Decoder::default(),
            recorded,
        }
    }

    /// The next frame, `None` at the end of the stream or when `timeout` passes first.
    pub(crate) async fn next(&mut self, timeout: Duration) -> Result<Option<Frame>, Finding> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(frame) = self.decoder.frame() {
                if frame.is_comment() {
                    continue;
                }
                if let Some(place) = self.recorded {
                    crate::finding::framed(place, &frame);
                }
                return Ok(Some(frame));
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Err(_) | Ok(None) => return Ok(None),
                Ok(Some(Err(e))) => return Err(Finding::Error(format!("reading the stream: {e}"))),
                Ok(Some(Ok(chunk))) => self.decoder.push(&chunk),
            }
        }
    }
}
