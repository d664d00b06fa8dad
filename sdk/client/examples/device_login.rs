//! Logs in with the OAuth device flow for the Agent resource and starts a turn with the token.
//!
//! `INTENT_BASE_URL=http://127.0.0.1:8080 cargo run -p intent-sdk --example device_login`

use std::io::Write;
use std::sync::Arc;

use intent_sdk::auth::{Authed, OAuth};
use intent_sdk::models::ChatStartRequest;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base = std::env::var("INTENT_BASE_URL")?;
    let resource = format!("{base}/v1/agent");
    let tokens = OAuth::new(&base, "intent-cli")
        .device(&resource, &["agent:read", "agent:write"], |code| {
            println!(
                "open {} and enter the code {}",
                code.verification_uri, code.user_code
            );
            std::io::stdout().flush().ok();
        })
        .await?;
    let agent = Authed::new(&base, Arc::new(tokens));
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
    println!(
        "logged in; started turn {} in session {}",
        started.turn_id, started.session_id
    );
    Ok(())
}
