//! A page of a session's log as it is sent: its events are the JSON text the log stores, so a
//! page is written without decoding them, and reads the same from the head or the store. A head
//! keeps the last page made from it that reaches the log's end ([`PageMemo`]), for the readers
//! that ask the same.

use std::sync::{Arc, Mutex};

use intent_models::EventPage;

use crate::json::Encoded;

/// An EventPage (part 2.11), written once as JSON.
#[derive(Debug, Clone)]
pub struct Page {
    /// Where the next page starts.
    cursor: String,
    /// Where its cursor stands.
    after: i64,
    /// Whether it holds no event.
    empty: bool,
    /// Whether more events follow it.
    has_more: bool,
    json: Encoded<EventPage>,
}

impl Page {
    /// The page of `session_id` holding `events` (as stored), whose `cursor` (base64url, as
    /// `CursorKey::issue` writes it) stands at `after`: its last event's seq, or where it was
    /// read after when it has none.
    pub fn new(
        session_id: &str,
        cursor: String,
        events: &[Arc<str>],
        after: i64,
        has_more: bool,
    ) -> Self {
        let json = Encoded::written(to_json(session_id, &cursor, events, has_more));
        Self {
            cursor,
            after,
            empty: events.is_empty(),
            has_more,
            json,
        }
    }

    /// Where the next page starts.
    pub fn cursor(&self) -> &str {
        &self.cursor
    }

    /// Where its cursor stands: its last event's seq, or where it was read after when it has
    /// none.
    pub fn after(&self) -> i64 {
        self.after
    }

    /// Whether it holds no event.
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// Whether it reaches the end of its log (`has_more` is false).
    pub fn reaches_end(&self) -> bool {
        !self.has_more
    }

    /// The page as JSON.
    pub fn json(&self) -> &Encoded<EventPage> {
        &self.json
    }

    /// The page as the model, its events decoded.
    pub fn to_model(&self) -> EventPage {
        serde_json::from_str(self.json.text()).expect("a page is an EventPage")
    }
}

/// An EventPage's JSON, with its fields and names, from events that are JSON text already.
fn to_json(session_id: &str, cursor: &str, events: &[Arc<str>], has_more: bool) -> String {
    let size: usize = events.iter().map(|event| event.len() + 1).sum();
    let mut json = String::with_capacity(size + cursor.len() + session_id.len() + 64);
    // A cursor is base64url, which JSON takes as it is.
    debug_assert!(
        cursor
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    );
    json.push_str(r#"{"cursor":""#);
    json.push_str(cursor);
    json.push_str(r#"","events":["#);
    for (index, event) in events.iter().enumerate() {
        if index > 0 {
            json.push(',');
        }
        json.push_str(event);
    }
    json.push_str(r#"],"has_more":"#);
    json.push_str(if has_more { "true" } else { "false" });
    json.push_str(r#","session_id":"#);
    // A session id of the reference server's needs no escaping; any other is written by serde.
    if session_id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        json.push('"');
        json.push_str(session_id);
        json.push('"');
    } else {
        json.push_str(&serde_json::to_string(session_id).expect("a string serializes"));
    }
    json.push('}');
    json
}

/// What a page was made for, besides its head: a page is the same for the same key while its
/// head has not moved on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageKey {
    /// Where its cursor opened, or `None` for the start of the retained log.
    pub after: Option<i64>,
    /// The most events it may hold.
    pub limit: i64,
    /// When its cursor expires, in seconds: pages made in the same second share it.
    pub expires: i64,
}

/// The last page made from a head that reaches the log's end, kept for readers that ask the same
/// while the head stands: many long-polls of a session, woken by one append, read one page. It
/// holds at most what its head holds, once more, as JSON.
#[derive(Debug, Default)]
pub struct PageMemo(Mutex<Option<(PageKey, Arc<Page>)>>);

impl PageMemo {
    /// The page kept for `key`.
    pub fn get(&self, key: &PageKey) -> Option<Arc<Page>> {
        let kept = self.0.lock().expect("a page memo lock");
        kept.as_ref()
            .filter(|(kept, _)| kept == key)
            .map(|(_, page)| page.clone())
    }

    /// Keeps `page`, made for `key`, in place of the last one.
    pub fn keep(&self, key: PageKey, page: Arc<Page>) {
        *self.0.lock().expect("a page memo lock") = Some((key, page));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_reads_as_its_model_and_escapes_its_strings() {
        let event = r#"{"createdAt":1,"role":"user","seq":7,"text":"hi \"there\"","turnId":"t","type":"message"}"#;
        let page = Page::new("ses \"1\"", "c".to_owned(), &[event.into()], 7, true);
        let model = page.to_model();
        assert_eq!(model.session_id, "ses \"1\"");
        assert_eq!(model.cursor, "c");
        assert_eq!(model.events[0].seq(), 7);
        assert!(model.has_more);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(page.json.text()).unwrap(),
            serde_json::to_value(&model).unwrap()
        );
    }

    #[test]
    fn a_memo_answers_only_its_own_key() {
        let memo = PageMemo::default();
        let key = PageKey {
            after: Some(3),
            limit: 20,
            expires: 100,
        };
        assert!(memo.get(&key).is_none());
        memo.keep(key, Arc::new(Page::new("s", "c".to_owned(), &[], 3, false)));
        assert_eq!(memo.get(&key).unwrap().after(), 3);
        for other in [
            PageKey { after: None, ..key },
            PageKey { limit: 21, ..key },
            PageKey {
                expires: 101,
                ..key
            },
        ] {
            assert!(memo.get(&other).is_none(), "{other:?}");
        }
    }
}
