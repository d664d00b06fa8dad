//! A reader of `text/event-stream` frames that keeps each frame's own fields, so that a check
//! can see whether a frame carried an `id` (the EventSource API would carry the last one over).

use std::time::Duration;

use futures_util::StreamExt;

use crate::check::Finding;

/// One dispatched SSE frame.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Frame {
    /// `event:`, `message` when absent.
    pub event: String,
    /// `id:` of this frame, if it had one.
    pub id: Option<String>,
    /// The `data:` lines, joined with newlines.
    pub data: String,
}

/// An open stream.
pub(crate) struct Reader {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl Reader {
    /// Reads `response`'s body as SSE.
    pub(crate) fn new(response: reqwest::Response) -> Self {
        Self {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next frame, `None` at the end of the stream or when `timeout` passes first.
    pub(crate) async fn next(&mut self, timeout: Duration) -> Result<Option<Frame>, Finding> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(frame) = self.take_frame() {
                if frame.data.is_empty() && frame.event.is_empty() && frame.id.is_none() {
                    continue; // a comment (keep-alive) only
                }
                return Ok(Some(frame));
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Err(_) | Ok(None) => return Ok(None),
                Ok(Some(Err(e))) => return Err(Finding::Error(format!("reading the stream: {e}"))),
                Ok(Some(Ok(chunk))) => self
                    .buffer
                    .push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n")),
            }
        }
    }

    fn take_frame(&mut self) -> Option<Frame> {
        let end = self.buffer.find("\n\n")?;
        let block: String = self.buffer.drain(..end + 2).collect();
        let mut frame = Frame::default();
        let mut data = Vec::new();
        for line in block.lines() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => frame.event = value.to_owned(),
                "id" => frame.id = Some(value.to_owned()),
                "data" => data.push(value),
                _ => {}
            }
        }
        frame.data = data.join("\n");
        if frame.event.is_empty() && !frame.data.is_empty() {
            frame.event = "message".to_owned();
        }
        Some(frame)
    }
}
