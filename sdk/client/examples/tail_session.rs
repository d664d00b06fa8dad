//! Tails a session's events over SSE: starts a turn, prints the durable events as they come
//! (snapshots as they are written), and stops when the turn ends.
//!
//! `INTENT_BASE_URL=... INTENT_AGENT_TOKEN=... cargo run -p intent-sdk --example tail_session`

use futures_util::StreamExt;
use intent_sdk::Intent;
use intent_sdk::agent::LogItem;
use intent_sdk::auth::{Resource, StaticToken};
use intent_sdk::models::{AgentEvent, ChatStartRequest};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let intent = Intent::builder(std::env::var("INTENT_BASE_URL")?)
        .token(
            Resource::Agent,
            StaticToken::new(std::env::var("INTENT_AGENT_TOKEN")?),
        )
        .build()?;
    let request: ChatStartRequest = ChatStartRequest::builder().message("hello").try_into()?;
    let started = intent.agent().start(&request).await?;
    let mut events = intent.agent().follow_sse(&started.session_id, None);
    while let Some(item) = events.next().await {
        match item {
            Ok(LogItem::Event { event, .. }) => {
                println!("{:>4} {}", event.seq(), serde_json::to_string(&event)?);
                if let AgentEvent::TurnState { state, .. } = *event
                    && state.is_settled()
                {
                    return Ok(());
                }
            }
            Ok(LogItem::Snapshot(snapshot)) => println!("   … {}", snapshot.text),
            Ok(LogItem::Restart) => println!("-- the log restarts; rebuild the view"),
            Err(error) => eprintln!("reconnecting after: {error}"),
        }
    }
    Ok(())
}
