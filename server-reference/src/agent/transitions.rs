//! The states a turn moves through, and the transitions between them.

use intent_models::TurnState;

/// Whether a turn in state `from` may enter `to`, as `TurnState.x-transitions` in
/// openapi.json says. Terminal states go nowhere. The session cache checks every transition here.
pub fn can_become(from: TurnState, to: TurnState) -> bool {
    use TurnState::*;
    matches!(
        (from, to),
        (Processing, Complete | Failed | Interrupted | AwaitingAction)
            | (AwaitingAction, Processing | Interrupted)
    )
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn transitions_follow_the_profile_in_openapi_json() {
        let table = &crate::interface::document().schema("TurnState").unwrap()["x-transitions"];
        let states = [
            TurnState::Processing,
            TurnState::Complete,
            TurnState::Failed,
            TurnState::Interrupted,
            TurnState::AwaitingAction,
        ];
        for from in states {
            for to in states {
                let listed = table[from.to_string()]
                    .as_array()
                    .unwrap()
                    .contains(&Value::from(to.to_string()));
                assert_eq!(can_become(from, to), listed, "{from} -> {to}");
            }
        }
    }
}
