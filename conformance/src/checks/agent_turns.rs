//! Turns and their states (part 3).

use reqwest::Method;

use super::{
    TERMINAL, TURN_STATES, poll, run, settle, settle_watching, start_turn, start_turn_saying,
    turn_state, turn_states,
};
use crate::checks::{Category, Check};
use crate::finding::{Verdict, ensure, profile, skip};
use crate::target::{Role, Target};

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "agent.turns.terminal".into(),
            category: Category::AgentTurns,
            requirement: "A turn MUST take only the five states of part 3 and reach one of complete, failed, interrupted or awaiting_action (ending once and staying there is a profile assertion).",
            section: "3",
            rests_on: vec!["POST /v1/agent/chat", "GET /v1/agent/chat/{sessionId}"],
            operation: None,
            run: run!(terminal),
        },
        Check {
            id: "agent.turns.interrupt".into(),
            category: Category::AgentTurns,
            requirement: "Interrupting a processing turn MUST end it `interrupted`, and interrupting it again MUST be refused with 409.",
            section: "3",
            rests_on: vec!["POST /v1/agent/sessions/{sessionId}/interrupt"],
            operation: None,
            run: run!(interrupt),
        },
    ]
}

async fn terminal(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let (session, turn) = start_turn(target, token, None, "conformance: hello").await?;
    let (events, cursor) = settle_watching(target, token, (&session, &turn), true).await?;
    let states: Vec<&str> = turn_states(target, &events, &turn).collect();
    ensure(
        states.iter().all(|state| TURN_STATES.contains(state)),
        || format!("turn {turn} went through {states:?}, beyond the five states of part 3"),
    )?;
    let ends = states
        .iter()
        .filter(|state| TERMINAL.contains(state))
        .count();
    // Part 1: a turn is polled until it reaches a terminal state. How it gets there, and
    // whether it leaves it, are transitions part 3 does not show: the profile's.
    ensure(TERMINAL.contains(states.last().unwrap_or(&"")), || {
        format!("turn {turn} went through {states:?} and reached no state that ends polling")
    })?;
    profile(ends == 1, || {
        format!("turn {turn} went through {states:?}: the profile's turns end once")
    });
    let later = poll(target, token, &session, Some(&cursor), "wait=1000").await?;
    later.ensure_success("a poll after the turn ended")?;
    let after = later.body["events"].as_array().cloned().unwrap_or_default();
    profile(turn_state(target, &after, &turn).is_none(), || {
        format!(
            "turn {turn} changed state after it ended: {:?}, where the profile's stay",
            turn_state(target, &after, &turn)
        )
    });
    Ok(())
}

async fn interrupt(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let (session, turn) = start_turn_saying(target, token, None, "wait 5000").await?;
    let path = format!("/v1/agent/sessions/{session}/interrupt");
    let first = target
        .request(Method::POST, &path)
        .bearer(token)
        .send()
        .await?;
    if first.status == 409 {
        return skip(
            "the turn was not processing when interrupted (the runtime ignores `wait <ms>`)",
        );
    }
    first.ensure_status(200, "interrupting a processing turn")?;
    let (events, _) = settle(target, token, &session, &turn).await?;
    ensure(
        turn_state(target, &events, &turn) == Some("interrupted"),
        || {
            format!(
                "the interrupted turn ended {:?}",
                turn_state(target, &events, &turn)
            )
        },
    )?;
    let again = target
        .request(Method::POST, &path)
        .bearer(token)
        .send()
        .await?;
    again.ensure_status(409, "interrupting an ended turn")?;
    Ok(())
}
