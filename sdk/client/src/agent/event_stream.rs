//! The `text/event-stream` format (the HTML standard's server-sent events), read from a body's
//! chunks as they come: a byte order mark at the start is left out; lines end with CRLF, LF or
//! CR; a line starting with `:` is a comment; `event` names an event and `data` lines make its
//! data; a blank line dispatches it. The `id` and `retry` fields are not read: the follower
//! resumes from a `page` event's own cursor.

/// One dispatched event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Event {
    /// Its `event` field, or `message` without one (or with an empty one).
    pub(crate) name: String,
    /// Its `data` lines, joined by LF.
    pub(crate) data: Vec<u8>,
}

/// Reads events from the chunks it is fed.
#[derive(Debug, Default)]
pub(crate) struct Parser {
    /// What was fed and not yet read, from `start`.
    buffer: Vec<u8>,
    start: usize,
    /// The last line ended with CR: an LF right after it belongs to that line's end.
    after_cr: bool,
    /// The stream's start was read past (and a byte order mark there left out).
    started: bool,
    /// The event being read.
    name: Option<String>,
    data: Vec<u8>,
    has_data: bool,
}

impl Parser {
    /// Appends a chunk of the body.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        if self.start == self.buffer.len() {
            self.buffer.clear();
            self.start = 0;
        } else if self.start > 0 {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        self.buffer.extend_from_slice(chunk);
    }

    /// The next event whose blank line was fed, if any.
    pub(crate) fn next_event(&mut self) -> Option<Event> {
        if !self.started {
            const BOM: &[u8] = b"\xEF\xBB\xBF";
            let head = &self.buffer[self.start..];
            if head.len() < BOM.len() && BOM.starts_with(head) {
                return None;
            }
            if head.starts_with(BOM) {
                self.start += BOM.len();
            }
            self.started = true;
        }
        loop {
            if self.after_cr {
                match self.buffer.get(self.start) {
                    None => return None,
                    Some(b'\n') => self.start += 1,
                    Some(_) => {}
                }
                self.after_cr = false;
            }
            let rest = &self.buffer[self.start..];
            let end = memchr::memchr2(b'\n', b'\r', rest)?;
            let line = self.start..self.start + end;
            self.after_cr = rest[end] == b'\r';
            self.start += end + 1;
            if line.is_empty() {
                if let Some(event) = self.dispatch() {
                    return Some(event);
                }
                continue;
            }
            let line = &self.buffer[line];
            let (field, value) = match memchr::memchr(b':', line) {
                Some(0) => continue,
                Some(colon) => {
                    let value = &line[colon + 1..];
                    (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (line, &[][..]),
            };
            match field {
                b"event" => self.name = Some(String::from_utf8_lossy(value).into_owned()),
                b"data" => {
                    if self.has_data {
                        self.data.push(b'\n');
                    }
                    self.data.extend_from_slice(value);
                    self.has_data = true;
                }
                _ => {}
            }
        }
    }

    /// The event read so far, if it has data; the next starts afresh either way.
    fn dispatch(&mut self) -> Option<Event> {
        let name = self.name.take().filter(|name| !name.is_empty());
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(Event {
            name: name.unwrap_or_else(|| "message".to_owned()),
            data: std::mem::take(&mut self.data),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, data: &str) -> Event {
        Event {
            name: name.to_owned(),
            data: data.as_bytes().to_vec(),
        }
    }

    /// The events of `body` fed in chunks of `size` bytes.
    fn events(body: &str, size: usize) -> Vec<Event> {
        let mut parser = Parser::default();
        let mut out = Vec::new();
        for chunk in body.as_bytes().chunks(size) {
            parser.feed(chunk);
            while let Some(event) = parser.next_event() {
                out.push(event);
            }
        }
        out
    }

    #[test]
    fn events_read_the_same_whatever_the_chunks_and_line_ends() {
        let body = "\u{FEFF}: a comment\nevent: page\nid: c1\ndata: {\"a\":\ndata:1}\n\n\
                    data:no space\r\n\r\nevent: resync\rdata: \r\revent: none\n\n\
                    retry: 10\ndata\n\nevent:\ndata: unnamed\n\nevent: late\ndata: x";
        let expected = [
            event("page", "{\"a\":\n1}"),
            event("message", "no space"),
            event("resync", ""),
            event("message", ""),
            event("message", "unnamed"),
        ];
        for size in [1, 2, 3, 7, body.len()] {
            assert_eq!(events(body, size), expected, "chunks of {size}");
        }
    }
}
