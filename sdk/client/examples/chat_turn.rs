//! A chat turn through an action: ask for a transfer, review the simulated Build, approve it,
//! and wait for the turn to complete.
//!
//! `INTENT_BASE_URL=http://127.0.0.1:8080 INTENT_AGENT_TOKEN=... cargo run -p intent-sdk --example chat_turn`

use intent_sdk::Intent;
use intent_sdk::agent::Decision;
use intent_sdk::auth::{Resource, StaticToken};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let intent = Intent::builder(std::env::var("INTENT_BASE_URL")?)
        .token(
            Resource::Agent,
            StaticToken::new(std::env::var("INTENT_AGENT_TOKEN")?),
        )
        .build()?;
    let agent = intent.agent();

    let ask = "send 0.1 ETH to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
    let outcome = agent.run_turn(ask, None).await?;
    println!("turn {} is {}", outcome.turn_id, outcome.state);
    let action = outcome.action.ok_or("the turn asked for no action")?;
    let simulation = action
        .build
        .simulation
        .as_ref()
        .ok_or("the Build is not simulated")?;
    println!("review: {} ({})", action.title, simulation.status);
    for change in &simulation.balance_changes {
        println!(
            "  {} {} {}",
            change.account.as_deref().unwrap_or("?"),
            change.amount,
            change.symbol.as_deref().unwrap_or("")
        );
    }
    agent
        .resolve(&outcome.session_id, &action, Decision::Approve)
        .await?;
    let done = agent
        .wait_turn(&outcome.session_id, &outcome.turn_id, &outcome.cursor)
        .await?;
    println!("turn {} is {}", done.turn_id, done.state);
    if done.state != intent_sdk::models::TurnState::Complete {
        return Err(format!("the turn ended {}", done.state).into());
    }
    Ok(())
}
