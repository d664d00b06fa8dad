//! What a new app does first: chat to a settled turn (approving the Build it asks for), build a
//! transfer and verify it offline, read the usage statement, and handle an error by its request
//! id.
//!
//! ```text
//! INTENT_BASE_URL=http://127.0.0.1:8080 INTENT_AGENT_TOKEN=... INTENT_PIPELINE_TOKEN=... \
//!   INTENT_ACCOUNT_TOKEN=... cargo run -p intent-sdk --example quickstart
//! ```

use futures_util::StreamExt;
use intent_sdk::agent::{Decision, LogItem, Position};
use intent_sdk::models::{
    AgentEvent, ChatStartRequest, PipelineBuildRequest, PipelineChain, PipelineOperationCall,
};
use intent_sdk::{Error, Intent, Resource, StaticToken};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = |name: &str| std::env::var(name).map_err(|_| format!("set {name}"));
    let intent = Intent::builder(env("INTENT_BASE_URL")?)
        .token(
            Resource::Agent,
            StaticToken::new(env("INTENT_AGENT_TOKEN")?),
        )
        .token(
            Resource::Pipeline,
            StaticToken::new(env("INTENT_PIPELINE_TOKEN")?),
        )
        .token(
            Resource::Account,
            StaticToken::new(env("INTENT_ACCOUNT_TOKEN")?),
        )
        .build()?;

    // 1. Chat to a settled turn, approving the Build it asks for on the way. A Build is its
    // content and its expiry to the second: the same transfer asked for twice within a second
    // is one Build, which commits once.
    let agent = intent.agent();
    let request: ChatStartRequest = ChatStartRequest::builder()
        .message("send 0.2 ETH to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
        .try_into()?;
    let started = agent.start(&request).await?;
    let (session, turn) = (&started.session_id, &started.turn_id);
    let mut from = Position::after_page(started.cursor.as_str());
    loop {
        let mut events = agent.follow_turn_from(session, turn, from.clone());
        let mut awaited = None;
        while let Some(item) = events.next().await {
            let LogItem::Event { event, position } = item? else {
                continue;
            };
            println!("{event}");
            if let AgentEvent::Action { action, .. } = *event {
                awaited = Some(action);
            }
            from = position;
        }
        let Some(action) = awaited else { break };
        for change in action
            .build
            .simulation
            .iter()
            .flat_map(|s| &s.balance_changes)
        {
            println!("  balance change: {change}");
        }
        agent.resolve(session, &action, Decision::Approve).await?;
    }

    // 2. Build a transfer, and verify it offline against the deployment's published keys.
    let pipeline = intent.pipeline();
    let input: serde_json::Map<String, serde_json::Value> = serde_json::from_value(json!({
        "chainId": 31337,
        "from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
        "to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
        "amount": "0.5",
    }))?;
    let transfer: PipelineOperationCall = PipelineOperationCall::builder()
        .operation("native-transfer")
        .input(input)
        .try_into()?;
    let request: PipelineBuildRequest = PipelineBuildRequest::builder()
        .app("evm-assets")
        .operations(vec![transfer])
        .try_into()?;
    let sealed = pipeline.build(PipelineChain::Evm, &request).await?;
    let jwks = pipeline.jwks().await?;
    let attestation = sealed.verify_with(&jwks)?;
    println!(
        "Build {} verifies, for {}",
        attestation.digest, attestation.owner
    );

    // 3. The usage statement, priced.
    let statement = intent.account().statement(None).await?;
    for line in &statement.lines {
        println!("{} x{} = {}", line.meter, line.quantity, line.amount);
    }
    println!("total {} {}", statement.total, statement.currency);

    // 4. An error names the request in the deployment's logs.
    match agent.session("ses_that_does_not_exist").await {
        Err(error @ Error::NotFound(_)) => println!(
            "not found, request {}",
            error.request_id().unwrap_or("without an id")
        ),
        other => return Err(format!("expected a 404, got {other:?}").into()),
    }
    Ok(())
}
