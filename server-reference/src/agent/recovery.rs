//! Carrying a turn on after its runner is gone: what the turn's log says to run again, and what
//! the run finds recorded.

use std::collections::VecDeque;

use intent_models::{ActionRequest, ActionResult, AgentEvent, AgentEventRole, TurnState};

use super::turn::Recorded;

/// What starts or resumes a turn's runtime.
pub(super) enum Input {
    /// The user's intent.
    Intent(String),
    /// The client resolved the turn's action.
    Resolved {
        request: Box<ActionRequest>,
        result: ActionResult,
    },
}

/// The code of the error event that ends a turn that cannot go on.
pub(super) const UNRESUMABLE: &str = "turn_not_resumable";

/// How to carry on turn `turn_id` from its session's retained log (event bodies with the Unix
/// milliseconds they were appended): the input of its last part (the user's message, or the
/// action's resolution) and that part's events, to replay. The reason it cannot go on, when
/// the log no longer holds what that takes.
pub(super) fn plan(
    turn_id: &str,
    log: &[(String, i64)],
) -> Result<(Input, VecDeque<Recorded>), String> {
    let mut events = Vec::new();
    for (body, at_ms) in log {
        let event: AgentEvent = serde_json::from_str(body)
            .map_err(|error| format!("an event of its log does not parse: {error}"))?;
        if turn_of(&event) == Some(turn_id) {
            events.push(Recorded {
                event,
                at_ms: *at_ms,
            });
        }
    }
    let processing = events
        .iter()
        .rposition(|r| {
            matches!(
                r.event,
                AgentEvent::TurnState {
                    state: TurnState::Processing,
                    ..
                }
            )
        })
        .ok_or("its start left the retained log")?;
    let before = &events[..processing];
    let input = match before.last().map(|r| &r.event) {
        Some(AgentEvent::ActionResult {
            action_id, result, ..
        }) => {
            let request = before
                .iter()
                .find_map(|r| match &r.event {
                    AgentEvent::Action { action, .. } if action.action_id.as_str() == action_id => {
                        Some(action.clone())
                    }
                    _ => None,
                })
                .ok_or("the action it resolved left the retained log")?;
            Input::Resolved {
                request: Box::new(request),
                result: result.clone(),
            }
        }
        _ => before
            .iter()
            .rev()
            .find_map(|r| match &r.event {
                AgentEvent::Message {
                    role: AgentEventRole::User,
                    text,
                    ..
                } => Some(Input::Intent(text.clone())),
                _ => None,
            })
            .ok_or("its message left the retained log")?,
    };
    let replay = events.drain(processing + 1..).collect();
    Ok((input, replay))
}

/// The turn an event belongs to.
fn turn_of(event: &AgentEvent) -> Option<&str> {
    match event {
        AgentEvent::Message { turn_id, .. }
        | AgentEvent::ToolCall { turn_id, .. }
        | AgentEvent::ToolResult { turn_id, .. }
        | AgentEvent::Action { turn_id, .. }
        | AgentEvent::ActionResult { turn_id, .. }
        | AgentEvent::Error { turn_id, .. }
        | AgentEvent::TurnState { turn_id, .. } => Some(turn_id),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn log(events: &[serde_json::Value]) -> Vec<(String, i64)> {
        events
            .iter()
            .enumerate()
            .map(|(i, e)| (e.to_string(), 1_000 * i as i64))
            .collect()
    }

    #[test]
    fn a_turn_goes_on_from_its_message_with_its_steps_to_replay() {
        let turn = |kind: &str, more: serde_json::Value| {
            let mut event = json!({ "type": kind, "seq": 1, "createdAt": 1, "turnId": "t1" });
            event
                .as_object_mut()
                .unwrap()
                .extend(more.as_object().unwrap().clone());
            event
        };
        let events = [
            turn("message", json!({ "role": "user", "text": "wait 10" })),
            turn("turn_state", json!({ "state": "processing" })),
            json!({ "type": "message", "seq": 3, "createdAt": 1, "turnId": "t0", "role": "user", "text": "other" }),
            turn(
                "tool_call",
                json!({ "name": "clock.wait", "input": {}, "toolCallId": "c1" }),
            ),
        ];
        let (input, replay) = plan("t1", &log(&events)).unwrap();
        assert!(matches!(input, Input::Intent(text) if text == "wait 10"));
        assert_eq!(replay.len(), 1);
        assert_eq!(replay[0].at_ms, 3_000);
        assert!(matches!(replay[0].event, AgentEvent::ToolCall { .. }));

        let pruned = plan("t1", &log(&events[3..])).err();
        assert_eq!(pruned.as_deref(), Some("its start left the retained log"));
    }
}
