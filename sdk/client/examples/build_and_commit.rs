//! Builds a native transfer, checks the Build's digest and attestation offline against the
//! server's JWKS, and commits it as received.
//!
//! `INTENT_BASE_URL=... INTENT_PIPELINE_TOKEN=... cargo run -p intent-sdk --example build_and_commit`

use std::sync::Arc;

use intent_sdk::auth::{Authed, StaticToken};
use intent_sdk::build;
use intent_sdk::models::PipelineChain;
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base = std::env::var("INTENT_BASE_URL")?;
    let token = std::env::var("INTENT_PIPELINE_TOKEN")?;
    let pipeline = Authed::new(&base, Arc::new(StaticToken(token)));
    let client = pipeline.client().await?;

    let request = json!({
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
    });
    let sealed = build::request(&client, PipelineChain::Evm, &request).await?;
    let jwks = reqwest::get(format!("{base}/.well-known/jwks.json"))
        .await?
        .json()
        .await?;
    let attestation = build::verify(&sealed, &jwks)?;
    println!(
        "Build {} for {} verifies, expires at {}",
        attestation.digest, attestation.owner, attestation.exp
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    let committed = build::commit(&client, &sealed, now).await?;
    println!("committed: {}", committed["transactions"][0]["id"]);
    Ok(())
}
