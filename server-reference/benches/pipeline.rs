//! Pipeline benchmark, in process (release): build plus simulation of a native transfer, an
//! ERC-20 transfer (revm) and an SPL transfer (litesvm), and commit of each (digest,
//! attestation, owner, app and expiry checks, re-simulation, durable record).
//!
//! Run: `cargo bench -p intent-server --bench pipeline`

use std::time::{Duration, Instant};

use intent_server::AppState;
use intent_server::config::Config;
use intent_server::ids::AccountId;
use serde_json::json;

const ROUNDS: usize = 500;

fn summary(name: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
    println!(
        "{name:<28} p50 {:>7.3} ms  p99 {:>7.3} ms  ({} runs)",
        at(0.50).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        times.len()
    );
}

/// Builds `ROUNDS` distinct transfers with `app`'s `operation` from `input` (its `amount`
/// varies), then commits them, timing both.
async fn measure(
    state: &AppState,
    name: &str,
    app: &str,
    operation: &str,
    input: serde_json::Value,
) {
    let chain = intent_server::pipeline::catalog::app(app).unwrap().chain;
    let owner = AccountId::verified("bench");
    let mut builds = Vec::new();
    let mut build_times = Vec::new();
    for round in 0..ROUNDS {
        let mut input = input.clone();
        input["amount"] = format!("0.{:04}", round + 1).into();
        let request = serde_json::from_value(json!({
            "app": app,
            "operations": [{ "operation": operation, "input": input }],
        }))
        .unwrap();
        let began = Instant::now();
        let build = state.pipeline().build(&owner, &request).await.unwrap();
        build_times.push(began.elapsed());
        let serde_json::Value::Object(build) = serde_json::to_value(build).unwrap() else {
            unreachable!("a Build is a JSON object")
        };
        builds.push(build);
    }
    let mut commit_times = Vec::new();
    for build in &builds {
        let began = Instant::now();
        state.pipeline().commit(&owner, chain, build).await.unwrap();
        commit_times.push(began.elapsed());
    }
    summary(&format!("build + simulate ({name})"), build_times);
    summary(&format!("commit ({name})"), commit_times);
}

#[tokio::main]
async fn main() {
    let data_dir = tempfile::tempdir().unwrap();
    let state = AppState::open(Config::new(data_dir.path()), "http://127.0.0.1:1")
        .await
        .unwrap();
    let evm = json!({
        "chainId": 31337,
        "from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
        "to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    });
    measure(
        &state,
        "native",
        "evm-assets",
        "native-transfer",
        evm.clone(),
    )
    .await;
    let mut usdc = evm;
    usdc["token"] = "0x5FbDB2315678afecb367f032d93F642f64180aa3".into();
    measure(&state, "ERC-20", "evm-assets", "erc20-transfer", usdc).await;
    let spl = json!({
        "cluster": "localnet",
        "from": "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM",
        "to": "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T",
        "mint": "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
    });
    measure(&state, "SPL", "svm-assets", "spl-transfer", spl).await;
}
