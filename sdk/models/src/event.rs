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

/// An entry of the log read in one pass, boxed: as [`AgentEvent`](crate::AgentEvent)'s
/// `Deserialize` reads it, but refused when it is of a known kind whose shape it does not fit,
/// which `AgentEvent` keeps whole as `Unknown`. `AgentEvent`'s `Deserialize` (serde's, for a
/// tagged enum with an untagged variant) buffers each entry whole before reading it; this reads
/// an entry whose `type` comes first straight into its kind, about 1.5 times as fast. For a
/// reader that holds the JSON of a whole page: it reads the page with these, and again with
/// `AgentEvent` when one is refused (the SDK's follower does).
#[derive(Clone, Debug, PartialEq)]
pub struct OnePassEvent(pub Box<crate::AgentEvent>);

impl<'de> Deserialize<'de> for OnePassEvent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let event = crate::generated::agent_event_wire::one_pass(deserializer)?;
        Ok(Self(Box::new(event)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::OnePassEvent;
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
    fn an_entry_reads_the_same_in_one_pass_wherever_its_type_sits() {
        let derived: AgentEvent = serde_json::from_str(&entry(false)).unwrap();
        assert!(
            matches!(derived, AgentEvent::ToolResult { ref output, .. } if output == &json!({"ok": true}))
        );
        for text in [entry(true), entry(false)] {
            let one_pass: OnePassEvent = serde_json::from_str(&text).unwrap();
            assert_eq!(*one_pass.0, derived, "{text}");
            let from_value: OnePassEvent =
                serde_json::from_value(serde_json::from_str(&text).unwrap()).unwrap();
            assert_eq!(*from_value.0, derived, "{text}");
        }
        let written = serde_json::to_string(&derived).unwrap();
        assert!(
            written.starts_with(r#"{"type":"tool_result","#),
            "{written}"
        );
    }

    #[test]
    fn one_pass_keeps_an_unknown_kind_whole_and_refuses_a_known_kind_s_other_shape() {
        let one_pass = |entry: &Value| serde_json::from_value::<OnePassEvent>(entry.clone());
        let derived = |entry: &Value| serde_json::from_value::<AgentEvent>(entry.clone());
        for unknown in [
            json!({"type": "reasoning", "seq": 2, "turnId": "t", "text": "..."}),
            json!({"seq": 2, "turnId": "t", "text": "...", "type": "reasoning"}),
        ] {
            let read = one_pass(&unknown).unwrap();
            assert!(matches!(*read.0, AgentEvent::Unknown(ref u) if u.kind == "reasoning"));
            assert_eq!(*read.0, derived(&unknown).unwrap());
            assert_eq!(serde_json::to_value(&*read.0).unwrap(), unknown);
        }
        // A state this version does not know: the derive keeps it whole, one pass refuses it.
        let misfit = json!({"type": "turn_state", "seq": 2, "turnId": "t", "createdAt": 1, "state": "paused"});
        assert!(matches!(derived(&misfit).unwrap(), AgentEvent::Unknown(_)));
        assert!(one_pass(&misfit).is_err());
        for refused in [
            json!({"seq": 1, "turnId": "t"}),
            json!({"type": "message", "turnId": "t"}),
            json!([1]),
        ] {
            assert!(one_pass(&refused).is_err(), "{refused}");
            assert!(derived(&refused).is_err(), "{refused}");
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
