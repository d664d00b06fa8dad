//! Logs in with the OAuth device flow for the Agent resource and starts a turn with the token.
//!
//! `INTENT_BASE_URL=http://127.0.0.1:8080 cargo run -p intent-sdk --example device_login`

use std::io::Write;

use intent_sdk::Intent;
use intent_sdk::auth::Resource;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base = std::env::var("INTENT_BASE_URL")?;
    let intent = Intent::login_device(
        &base,
        "intent-cli",
        &[Resource::Agent],
        &["agent:read", "agent:write"],
        |login| {
            println!(
                "code {} of {}: open {} and enter the code {}",
                login.step, login.of, login.code.verification_uri, login.code.user_code
            );
            std::io::stdout().flush().ok();
        },
    )
    .await?;
    let outcome = intent.agent().run_turn("hello", None).await?;
    println!(
        "logged in; turn {} in session {} is {}",
        outcome.turn_id, outcome.session_id, outcome.state
    );
    Ok(())
}
