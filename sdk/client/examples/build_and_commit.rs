//! Builds a native transfer, checks the Build's digest and attestation against the server's
//! published keys, and commits it as received.
//!
//! `INTENT_BASE_URL=... INTENT_PIPELINE_TOKEN=... cargo run -p intent-sdk --example build_and_commit`

use intent_sdk::Intent;
use intent_sdk::auth::{Resource, StaticToken};
use intent_sdk::models::{PipelineBuildRequest, PipelineChain};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let intent = Intent::builder(std::env::var("INTENT_BASE_URL")?)
        .token(
            Resource::Pipeline,
            StaticToken::new(std::env::var("INTENT_PIPELINE_TOKEN")?),
        )
        .build()?;
    let pipeline = intent.pipeline();

    let request: PipelineBuildRequest = serde_json::from_value(json!({
        "app": "evm-assets",
        "operations": [{
            "operation": "native-transfer",
            "input": {
                "chainId": 31337,
                "from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
                "to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
                "amount": "0.5",
            },
        }],
    }))?;
    let sealed = pipeline.build(PipelineChain::Evm, &request).await?;
    let attestation = pipeline.verify(&sealed).await?;
    println!(
        "Build {} for {} verifies, expires at {}",
        attestation.digest, attestation.owner, attestation.exp
    );
    let committed = pipeline.commit(&sealed).await?;
    for transaction in &committed.transactions {
        println!("committed step {}: {}", transaction.step, transaction.id);
    }
    Ok(())
}
