//! What people read of the models: one line per event, amounts in units, and the questions a
//! client asks of a turn's state.

use std::fmt;

use crate::{
    ActionResult, AgentEvent, Money, PipelineBalanceChange, PipelineBalanceChangeDirection,
    TurnState,
};

impl TurnState {
    /// Whether a client stops waiting on the turn in this state: `awaiting_action`,
    /// `complete`, `failed` or `interrupted` (part 3, rule 3). Only `processing` is not.
    pub fn is_settled(&self) -> bool {
        !matches!(self, Self::Processing)
    }
}

/// One line: the position, the kind and what a person wants to know of it, such as
/// `#3 message assistant: Done.` or `#5 action: Send 0.1 ETH (act_1, revision 1)`.
impl fmt::Display for AgentEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {}", self.seq(), self.kind())?;
        match self {
            Self::Message { role, text, .. } => write!(f, " {role}: {text}"),
            Self::ToolCall { name, .. } => write!(f, ": {name}"),
            Self::ToolResult { name, is_error, .. } => {
                write!(f, ": {name}{}", if *is_error { " failed" } else { "" })
            }
            Self::Action { action, .. } => write!(
                f,
                ": {} ({}, revision {})",
                action.title,
                action.action_id.as_str(),
                action.revision
            ),
            Self::ActionResult { result, .. } => match result {
                ActionResult::Approved { .. } => f.write_str(": approved"),
                ActionResult::Rejected { .. } => f.write_str(": rejected"),
            },
            Self::Error { code, message, .. } => write!(f, ": {code}: {message}"),
            Self::TurnState { state, .. } => write!(f, ": {state}"),
            // A kind without words of its own here (one this version does not know, or one
            // added to openapi.json since): its position and kind say it.
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl PipelineBalanceChange {
    /// The amount in units of the asset: the base-unit `amount` scaled by `decimals`
    /// (`250000000000000000` with 18 decimals is `0.25`), signed by `direction` (`-` out,
    /// `+` in). Without `decimals` it is the amount as sent.
    pub fn amount_in_units(&self) -> String {
        let sign = match self.direction {
            Some(PipelineBalanceChangeDirection::Out) => "-",
            Some(PipelineBalanceChangeDirection::In) => "+",
            None => "",
        };
        let decimals = self
            .decimals
            .and_then(|d| usize::try_from(d).ok())
            .filter(|_| self.amount.bytes().all(|b| b.is_ascii_digit()));
        let Some(decimals) = decimals.filter(|d| *d > 0) else {
            return format!("{sign}{}", self.amount);
        };
        let digits = format!("{:0>width$}", self.amount, width = decimals + 1);
        let (whole, fraction) = digits.split_at(digits.len() - decimals);
        let fraction = fraction.trim_end_matches('0');
        let whole = whole.trim_start_matches('0');
        let whole = if whole.is_empty() { "0" } else { whole };
        match fraction {
            "" => format!("{sign}{whole}"),
            _ => format!("{sign}{whole}.{fraction}"),
        }
    }
}

/// The amount in units and the asset's symbol (else its name): `-0.25 ETH`.
impl fmt::Display for PipelineBalanceChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let asset = self.symbol.as_deref().unwrap_or(&self.asset);
        write!(f, "{} {asset}", self.amount_in_units())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn change(
        amount: &str,
        decimals: Option<i64>,
        direction: Option<&str>,
    ) -> PipelineBalanceChange {
        serde_json::from_value(json!({
            "asset": "native", "amount": amount, "symbol": "ETH",
            "decimals": decimals, "direction": direction,
        }))
        .unwrap()
    }

    #[test]
    fn balance_changes_read_in_units_with_their_direction() {
        let cases = [
            (
                change("250000000000000000", Some(18), Some("out")),
                "-0.25 ETH",
            ),
            (change("5", Some(2), Some("in")), "+0.05 ETH"),
            (change("1000000000", Some(9), None), "1 ETH"),
            (change("7", None, Some("out")), "-7 ETH"),
            (change("12", Some(0), None), "12 ETH"),
        ];
        for (change, expected) in cases {
            assert_eq!(change.to_string(), expected, "{change:?}");
        }
    }

    #[test]
    fn an_event_is_one_line_and_names_its_kind() {
        let event: AgentEvent = serde_json::from_value(json!({
            "type": "turn_state", "seq": 4, "turnId": "turn_1", "createdAt": 1, "state": "complete"
        }))
        .unwrap();
        assert_eq!(
            (event.kind(), event.to_string().as_str()),
            ("turn_state", "#4 turn_state: complete")
        );
        let unknown: AgentEvent = serde_json::from_value(json!({
            "type": "reasoning", "seq": 5, "turnId": "turn_1", "text": "..."
        }))
        .unwrap();
        assert_eq!(
            (unknown.kind(), unknown.to_string().as_str()),
            ("reasoning", "#5 reasoning")
        );
    }

    #[test]
    fn only_processing_is_unsettled() {
        let settled: Vec<bool> = [
            TurnState::Processing,
            TurnState::AwaitingAction,
            TurnState::Complete,
            TurnState::Failed,
            TurnState::Interrupted,
        ]
        .iter()
        .map(TurnState::is_settled)
        .collect();
        assert_eq!(settled, [false, true, true, true, true]);
    }

    #[test]
    fn money_displays_as_its_decimal() {
        let money: Money = "0.030".parse().unwrap();
        assert_eq!(money.to_string(), "0.030");
    }
}
