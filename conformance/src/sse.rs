//! A decoder of `text/event-stream` frames that keeps each frame's own fields, so that a check
//! can see whether a frame carried an `id` (the EventSource API would carry the last one over).

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_survive_characters_and_line_ends_split_across_chunks() {
        let text = "event: page\r\nid: c1\r\ndata: {\"text\":\"café\"}\r\n\r\n: keep-alive\n\ndata: hi\n\n";
        let bytes = text.as_bytes();
        let split = text.find('é').unwrap() + 1; // inside the two bytes of `é`
        let crlf = text.find("\r\n\r\n").unwrap() + 3; // between the last CR and LF
        let mut decoder = Decoder::default();
        let mut frames = Vec::new();
        for chunk in [&bytes[..split], &bytes[split..crlf], &bytes[crlf..]] {
            decoder.push(chunk);
            frames.extend(std::iter::from_fn(|| decoder.frame()).filter(|f| !f.is_comment()));
        }
        assert_eq!(
            frames,
            [
                Frame {
                    event: "page".into(),
                    id: Some("c1".into()),
                    data: "{\"text\":\"café\"}".into(),
                },
                Frame {
                    event: "message".into(),
                    id: None,
                    data: "hi".into(),
                },
            ]
        );
    }
}
