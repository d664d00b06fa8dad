//! A reader of `text/event-stream` frames that keeps each frame's own fields, so that a check
//! can see whether a frame carried an `id` (the EventSource API would carry the last one over).

use std::time::Duration;

use futures_util::StreamExt;

use crate::exchange::Recorded;
use crate::finding::Finding;

/// One dispatched SSE frame.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Frame {
    /// `event:`, `message` when absent.
    pub event: String,
    /// `id:` of this frame, if it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The `data:` lines, joined with newlines.
    pub data: String,
}

/// Bytes of a stream received and not yet dispatched: a frame is decoded only once it is whole,
/// so that a character or a CRLF split across chunks survives.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    buffer: Vec<u8>,
}

impl Decoder {
    /// Takes in the next chunk of the stream.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.buffer.extend_from_slice(chunk);
    }

    /// The next whole frame received, comments (keep-alives) included as empty frames.
    pub(crate) fn frame(&mut self) -> Option<Frame> {
        let mut start = 0;
        let end = loop {
            let newline = start + self.buffer[start..].iter().position(|&b| b == b'\n')?;
            if matches!(&self.buffer[start..newline], b"" | b"\r") {
                break newline + 1;
            }
            start = newline + 1;
        };
        let bytes: Vec<u8> = self.buffer.drain(..end).collect();
        let block = String::from_utf8_lossy(&bytes);
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

impl Frame {
    /// Whether the frame is a comment only, such as a keep-alive.
    pub(crate) fn is_comment(&self) -> bool {
        self.data.is_empty() && self.event.is_empty() && self.id.is_none()
    }
}

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

#[cfg(test)]
mod tests {
    use futures_util::stream;

    use super::*;

    #[tokio::test]
    async fn frames_survive_characters_and_line_ends_split_across_chunks() {
        let text = "event: page\r\nid: c1\r\ndata: {\"text\":\"café\"}\r\n\r\n: keep-alive\n\ndata: hi\n\n";
        let bytes = text.as_bytes();
        let split = text.find('é').unwrap() + 1; // inside the two bytes of `é`
        let crlf = text.find("\r\n\r\n").unwrap() + 3; // between the last CR and LF
        let chunks = [&bytes[..split], &bytes[split..crlf], &bytes[crlf..]]
            .map(|chunk| Ok(bytes::Bytes::copy_from_slice(chunk)));
        let mut reader = Reader {
            body: stream::iter(chunks).boxed(),
            decoder: Decoder::default(),
            recorded: None,
        };
        let timeout = Duration::from_secs(1);
        assert_eq!(
            reader.next(timeout).await.unwrap(),
            Some(Frame {
                event: "page".into(),
                id: Some("c1".into()),
                data: "{\"text\":\"café\"}".into(),
            })
        );
        assert_eq!(
            reader.next(timeout).await.unwrap(),
            Some(Frame {
                event: "message".into(),
                id: None,
                data: "hi".into(),
            })
        );
        assert_eq!(reader.next(timeout).await.unwrap(), None);
    }
}
