//! Tails a session's events over SSE: starts a turn, prints the durable events as they come
//! (snapshots as they are written), and stops when the turn ends.
//!
//! `INTENT_BASE_URL=... INTENT_AGENT_TOKEN=... cargo run -p intent-sdk --example tail_session`

use std::sync::Arc;

use futures_util::StreamExt;
use intent_sdk::agent::{self, StreamItem};
use intent_sdk::auth::{Authed, StaticToken};
use intent_sdk::models::{AgentEvent, ChatStartRequest, TurnState};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base = std::env::var("INTENT_BASE_URL")?;
    let token = std::env::var("INTENT_AGENT_TOKEN")?;
    let agent = Authed::new(&base, Arc::new(StaticToken(token)));
    let request = ChatStartRequest {
        message: "hello".parse()?,
        session_id: None,
    };
    let started = agent
        .call(|client| {
            let request = request.clone();
            async move { client.start_chat(&request).await }
        })
        .await?;
    let client = agent.client().await?;
    let mut events = Box::pin(agent::follow_sse(&client, &started.session_id, None)?);
    while let Some(item) = events.next().await {
        match item {
            Ok(StreamItem::Event(event)) => {
                println!("{:>4} {}", event.seq(), serde_json::to_string(&event)?);
                if let AgentEvent::TurnState { state, .. } = *event
                    && state != TurnState::Processing
                {
                    return Ok(());
                }
            }
            Ok(StreamItem::Snapshot(snapshot)) => println!("   … {}", snapshot.text),
            Ok(StreamItem::Restart) => println!("-- the log restarts; rebuild the view"),
            Err(error) => eprintln!("reconnecting after: {error}"),
        }
    }
    Ok(())
}
