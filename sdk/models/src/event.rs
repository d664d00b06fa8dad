//! The entry of a kind this version does not know. The accessors of what every
//! [`AgentEvent`](crate::AgentEvent) carries (`seq()`, `turn_id()`, `kind()`) are generated with
//! it, so that a kind added to openapi.json needs no change here.

use std::num::NonZeroU64;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An event entry of a kind this version does not know. The interface leaves kind names and
/// entry shapes open (parts 2.11 and 6), so the entry is kept whole; only its position in the
/// log and its turn are read, which ordering and following need.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
pub struct UnknownEvent {
    /// The entry's kind (`type`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Position in the session log.
    pub seq: NonZeroU64,
    /// The turn the entry belongs to.
    #[serde(rename = "turnId")]
    pub turn_id: String,
    /// Every other member, as sent.
    #[serde(flatten)]
    pub members: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::{AgentEvent, EventPage, TurnState};

    /// A `tool_result` entry with its `type` first, as a tagged enum writes it, or last.
    fn entry(type_first: bool) -> String {
        let members = r#""seq":3,"turnId":"turn_1","createdAt":1,"toolCallId":"call_1","name":"x","isError":false,"output":{"ok":true}"#;
        if type_first {
            format!(r#"{{"type":"tool_result",{members}}}"#)
        } else {
            format!(r#"{{{members},"type":"tool_result"}}"#)
        }
    }

    #[test]
    fn an_entry_reads_the_same_wherever_its_type_sits_and_from_any_source() {
        let first: AgentEvent = serde_json::from_str(&entry(true)).unwrap();
        let last: AgentEvent = serde_json::from_str(&entry(false)).unwrap();
        let value: AgentEvent =
            serde_json::from_value(serde_json::from_str(&entry(false)).unwrap()).unwrap();
        let bytes: AgentEvent = serde_json::from_slice(entry(true).as_bytes()).unwrap();
        assert!(
            matches!(first, AgentEvent::ToolResult { ref output, .. } if output == &json!({"ok": true}))
        );
        assert_eq!([&last, &value, &bytes], [&first; 3]);
        let written = serde_json::to_string(&first).unwrap();
        assert!(
            written.starts_with(r#"{"type":"tool_result","#),
            "{written}"
        );
        assert_eq!(serde_json::from_str::<AgentEvent>(&written).unwrap(), first);
    }

    #[test]
    fn an_entry_no_kind_fits_is_kept_whole_and_one_without_position_is_refused() {
        // A known kind in a shape of its own (a state this version does not know), and an
        // unknown kind, with the type first and last: each is kept whole.
        for entry in [
            json!({"type": "turn_state", "seq": 2, "turnId": "t", "createdAt": 1, "state": "paused"}),
            json!({"seq": 2, "turnId": "t", "createdAt": 1, "state": "paused", "type": "turn_state"}),
            json!({"type": "reasoning", "seq": 2, "turnId": "t", "text": "..."}),
        ] {
            let text = entry.to_string();
            let read: AgentEvent = serde_json::from_str(&text).unwrap();
            let AgentEvent::Unknown(unknown) = &read else {
                panic!("{read:?} from {text}");
            };
            assert_eq!(
                (unknown.seq.get(), unknown.kind.as_str()),
                (2, entry["type"].as_str().unwrap())
            );
            assert_eq!(serde_json::to_value(&read).unwrap(), entry);
        }
        for refused in [
            json!({"seq": 1, "turnId": "t"}),
            json!({"type": "message", "turnId": "t"}),
            json!([1]),
        ] {
            assert!(
                serde_json::from_value::<AgentEvent>(refused.clone()).is_err(),
                "{refused}"
            );
        }
        let page: EventPage = serde_json::from_value(json!({
            "session_id": "ses_1", "cursor": "c", "has_more": false,
            "events": [{"type": "turn_state", "seq": 1, "turnId": "t", "createdAt": 1, "state": "complete"}]
        }))
        .unwrap();
        assert!(matches!(
            page.events[0],
            AgentEvent::TurnState {
                state: TurnState::Complete,
                ..
            }
        ));
    }
}
