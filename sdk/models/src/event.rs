//! Accessors of the fields every [`AgentEvent`] variant carries, and the entry of a kind this
//! version does not know.

use std::num::NonZeroU64;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::AgentEvent;

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

impl AgentEvent {
    /// The event's position in its session's log.
    pub fn seq(&self) -> u64 {
        match self {
            Self::Message { seq, .. }
            | Self::ToolCall { seq, .. }
            | Self::ToolResult { seq, .. }
            | Self::Action { seq, .. }
            | Self::ActionResult { seq, .. }
            | Self::Error { seq, .. }
            | Self::TurnState { seq, .. }
            | Self::Unknown(UnknownEvent { seq, .. }) => seq.get(),
        }
    }

    /// The turn the event belongs to.
    pub fn turn_id(&self) -> &str {
        match self {
            Self::Message { turn_id, .. }
            | Self::ToolCall { turn_id, .. }
            | Self::ToolResult { turn_id, .. }
            | Self::Action { turn_id, .. }
            | Self::ActionResult { turn_id, .. }
            | Self::Error { turn_id, .. }
            | Self::TurnState { turn_id, .. }
            | Self::Unknown(UnknownEvent { turn_id, .. }) => turn_id,
        }
    }
}
