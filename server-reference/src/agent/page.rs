//! A page of a session's log as it is sent: its events are the JSON text the log stores, so a
//! page is written without decoding them, and reads the same from the head or the store.

use std::sync::Arc;

use intent_models::EventPage;

/// An EventPage (part 2.11) whose events are JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The session.
    pub session_id: String,
    /// Where the next page starts: base64url, as `CursorKey::issue` writes it.
    pub cursor: String,
    /// The events, as stored.
    pub events: Vec<Arc<str>>,
    /// Where its cursor stands: its last event's seq, or where it was read after when it has
    /// none.
    pub after: i64,
    /// Whether more events follow.
    pub has_more: bool,
}

impl Page {
    /// The page as JSON, with the fields and names of an EventPage.
    pub fn to_json(&self) -> String {
        let events: usize = self.events.iter().map(|event| event.len() + 1).sum();
        let mut json = String::with_capacity(events + self.cursor.len() + 128);
        let text = |json: &mut String, value: &str| {
            let quoted = serde_json::to_string(value).expect("a string serializes");
            json.push_str(&quoted);
        };
        // A cursor is base64url, which JSON takes as it is.
        debug_assert!(
            self.cursor
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        json.push_str(r#"{"cursor":""#);
        json.push_str(&self.cursor);
        json.push('"');
        json.push_str(r#","events":["#);
        for (index, event) in self.events.iter().enumerate() {
            if index > 0 {
                json.push(',');
            }
            json.push_str(event);
        }
        json.push_str(r#"],"has_more":"#);
        json.push_str(if self.has_more { "true" } else { "false" });
        json.push_str(r#","session_id":"#);
        text(&mut json, &self.session_id);
        json.push('}');
        json
    }

    /// The page as the model, its events decoded.
    pub fn to_model(&self) -> EventPage {
        serde_json::from_str(&self.to_json()).expect("a page is an EventPage")
    }
}

/// The `seq` of a stored event.
#[cfg(test)]
pub fn seq_of(body: &str) -> i64 {
    #[derive(serde::Deserialize)]
    struct Seq {
        seq: i64,
    }
    serde_json::from_str::<Seq>(body)
        .expect("stored events have a seq")
        .seq
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_reads_as_its_model_and_escapes_its_strings() {
        let event = r#"{"createdAt":1,"role":"user","seq":7,"text":"hi \"there\"","turnId":"t","type":"message"}"#;
        let page = Page {
            session_id: "ses \"1\"".to_owned(),
            cursor: "c".to_owned(),
            events: vec![event.into()],
            after: 7,
            has_more: true,
        };
        let model = page.to_model();
        assert_eq!(model.session_id, "ses \"1\"");
        assert_eq!(model.events[0].seq(), 7);
        assert!(model.has_more);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&page.to_json()).unwrap(),
            serde_json::to_value(&model).unwrap()
        );
        assert_eq!(seq_of(event), 7);
    }
}
