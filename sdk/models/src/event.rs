//! Accessors of the fields every [`AgentEvent`] variant carries.

use crate::AgentEvent;

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
            | Self::TurnState { seq, .. } => seq.get(),
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
            | Self::TurnState { turn_id, .. } => turn_id,
        }
    }
}
