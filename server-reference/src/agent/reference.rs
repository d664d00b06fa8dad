//! The reference server's runtime: deterministic, with no model behind it. It understands a
//! small grammar (words are case-insensitive):
//!
//! - `send <amount> <ETH|USDC|DAI> to <0x address> [from <0x address>] [on <chain id>]`: builds
//!   and simulates a native or ERC-20 transfer through the Pipeline (app `evm-assets`, operation
//!   `native-transfer` or `erc20-transfer`) and asks the client to approve the Build; approval
//!   commits it.
//! - `wait <milliseconds>`: pauses (interruptible), then replies.
//! - anything else: a plain reply that says what it understands.

use std::time::Duration;

use async_trait::async_trait;
use intent_models::{
    ActionRequest, ActionResult, PipelineBuild, PipelineBuildRequest, PipelineChain,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::runtime::Runtime;
use super::turn::{RunEnd, ToolOutput, Turn, TurnError};
use crate::pipeline::erc20;

/// The deterministic runtime of the reference server.
pub struct ReferenceRuntime;

/// The sender of transfers that name none: the devnet's first funded account.
const DEFAULT_SENDER: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";

/// The devnet chain transfers go to unless `on <chain id>` says otherwise.
const DEFAULT_CHAIN_ID: u64 = 31337;

/// Longest accepted `wait`.
const MAX_WAIT_MS: u64 = 60_000;

/// What the reference grammar understood.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Intent {
    Send {
        amount: String,
        /// `ETH`, or the symbol of a devnet ERC-20 (`USDC`, `DAI`).
        asset: String,
        to: String,
        from: String,
        chain_id: u64,
    },
    Wait(Duration),
    Other,
}

fn parse(intent: &str) -> Intent {
    let words: Vec<String> = intent
        .split_whitespace()
        .map(|w| w.trim_end_matches(['.', '!', '?']).to_owned())
        .collect();
    let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
    let lower: Vec<&str> = lower.iter().map(String::as_str).collect();
    match lower.as_slice() {
        ["wait", ms] | ["wait", ms, "ms"] => match ms.trim_end_matches("ms").parse::<u64>() {
            Ok(ms) if ms <= MAX_WAIT_MS => Intent::Wait(Duration::from_millis(ms)),
            _ => Intent::Other,
        },
        ["send", _, asset, "to", _, rest @ ..] if *asset == "eth" || erc20(asset).is_some() => {
            let mut from = DEFAULT_SENDER.to_owned();
            let mut chain_id = DEFAULT_CHAIN_ID;
            let mut rest = rest.iter().enumerate().map(|(i, w)| (i + 5, *w));
            while let Some((_, word)) = rest.next() {
                match (word, rest.next()) {
                    ("from", Some((i, _))) => from = words[i].clone(),
                    ("on", Some((_, id))) => match id.parse() {
                        Ok(id) => chain_id = id,
                        Err(_) => return Intent::Other,
                    },
                    _ => return Intent::Other,
                }
            }
            Intent::Send {
                amount: words[1].clone(),
                asset: asset.to_ascii_uppercase(),
                to: words[4].clone(),
                from,
                chain_id,
            }
        }
        _ => Intent::Other,
    }
}

const HELP: &str = "I can send ETH, USDC or DAI on the devnet: say \"send 0.5 ETH to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8\". I can also \"wait 500\" milliseconds.";

#[async_trait]
impl Runtime for ReferenceRuntime {
    async fn start(&self, turn: &Turn, intent: &str) -> Result<RunEnd, TurnError> {
        match parse(intent) {
            Intent::Other => {
                turn.say(HELP).await?;
                Ok(RunEnd::Complete)
            }
            Intent::Wait(duration) => {
                let ms = duration.as_millis() as u64;
                let input = object(json!({ "milliseconds": ms }));
                // The wait ends when it would have had the turn never stopped: a turn carried on
                // after a restart waits what is left of it.
                turn.tool("clock.wait", input, |step| async move {
                    turn.pause_until(step.called_at_ms.saturating_add_unsigned(ms))
                        .await?;
                    Ok(succeeded(json!({ "waited": true })))
                })
                .await?;
                turn.say(&format!("Waited {ms} ms.")).await?;
                Ok(RunEnd::Complete)
            }
            Intent::Send {
                amount,
                asset,
                to,
                from,
                chain_id,
            } => {
                let mut input =
                    json!({ "chainId": chain_id, "from": from, "to": to, "amount": amount });
                let operation = match erc20(&asset) {
                    Some(token) => {
                        input["token"] = token.address.into();
                        "erc20-transfer"
                    }
                    None => "native-transfer",
                };
                let request = json!({
                    "app": "evm-assets",
                    "operations": [{ "operation": operation, "input": input }],
                });
                let built = turn
                    .tool("pipeline.evm.build", object(request.clone()), |_| async {
                        let built = match serde_json::from_value::<PipelineBuildRequest>(request) {
                            Ok(request) => turn.build(&request).await,
                            Err(e) => Err(crate::pipeline::Error::Invalid(e.to_string())),
                        };
                        Ok(match built {
                            Ok(build) => {
                                succeeded(serde_json::to_value(&build).expect("a Build serializes"))
                            }
                            Err(error) => failed(&error),
                        })
                    })
                    .await?;
                let build = output::<PipelineBuild>(built)?;
                let passed = build
                    .simulation
                    .as_ref()
                    .is_some_and(|s| s.status == intent_models::PipelineSimulationStatus::Passed);
                if !passed {
                    return Err(TurnError::Failed {
                        code: "simulation_failed".to_owned(),
                        message: format!("the transfer of {amount} {asset} to {to} would fail"),
                    });
                }
                turn.say(&format!(
                    "Review the transfer of {amount} {asset} to {to} and approve it to commit."
                ))
                .await?;
                Ok(RunEnd::AwaitAction {
                    title: format!("Send {amount} {asset} to {to}"),
                    build: Box::new(build),
                })
            }
        }
    }

    async fn resume(
        &self,
        turn: &Turn,
        request: &ActionRequest,
        result: &ActionResult,
    ) -> Result<RunEnd, TurnError> {
        if let ActionResult::Rejected { .. } = result {
            turn.say("Cancelled: nothing was sent.").await?;
            return Ok(RunEnd::Complete);
        }
        let digest = request.build.digest.to_string();
        let input = object(json!({ "digest": digest }));
        let committed = turn
            .tool("pipeline.evm.commit", input, |_| async {
                Ok(
                    match turn.commit(PipelineChain::Evm, &request.build).await {
                        Ok(committed) => succeeded(
                            serde_json::to_value(&committed).expect("a commit result serializes"),
                        ),
                        // The step ran before, up to the commit, in a process that stopped then.
                        Err(crate::pipeline::Error::AlreadyCommitted) => {
                            succeeded(json!({ "digest": digest, "status": "committed" }))
                        }
                        Err(error) => failed(&error),
                    },
                )
            })
            .await?;
        let committed = output::<Value>(committed)?;
        let transaction = committed["transactions"][0]["id"].as_str();
        let said = match transaction {
            Some(id) => format!("Committed {}: transaction {id}.", request.title),
            None => format!("Committed {}.", request.title),
        };
        turn.say(&said).await?;
        Ok(RunEnd::Complete)
    }
}

/// A tool's successful output.
fn succeeded(output: Value) -> ToolOutput {
    ToolOutput {
        output,
        is_error: false,
    }
}

/// A tool's output for a Pipeline failure: its code and message.
fn failed(error: &crate::pipeline::Error) -> ToolOutput {
    ToolOutput {
        output: json!({ "code": error.code(), "message": error.to_string() }),
        is_error: true,
    }
}

/// What a tool returned, as a `T`; a tool that failed fails the turn with its code and message.
fn output<T: DeserializeOwned>(returned: ToolOutput) -> Result<T, TurnError> {
    let text = |key: &str| returned.output[key].as_str().unwrap_or_default().to_owned();
    if returned.is_error {
        return Err(TurnError::Failed {
            code: text("code"),
            message: text("message"),
        });
    }
    serde_json::from_value(returned.output).map_err(|error| {
        TurnError::Unresumable(format!("a tool's recorded output does not parse: {error}"))
    })
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar_reads_transfers_waits_and_the_rest() {
        assert_eq!(
            parse("Send 0.5 ETH to 0xabc."),
            Intent::Send {
                amount: "0.5".into(),
                asset: "ETH".into(),
                to: "0xabc".into(),
                from: DEFAULT_SENDER.into(),
                chain_id: DEFAULT_CHAIN_ID,
            }
        );
        assert_eq!(
            parse("send 1 eth to 0xB from 0xA on 5"),
            Intent::Send {
                amount: "1".into(),
                asset: "ETH".into(),
                to: "0xB".into(),
                from: "0xA".into(),
                chain_id: 5,
            }
        );
        assert_eq!(parse("wait 250"), Intent::Wait(Duration::from_millis(250)));
        assert_eq!(
            parse("wait 250ms"),
            Intent::Wait(Duration::from_millis(250))
        );
        assert_eq!(parse("wait forever"), Intent::Other);
        assert_eq!(parse("send 1 eth to 0xB from"), Intent::Other);
        assert_eq!(parse("hello"), Intent::Other);
        assert!(
            matches!(parse("send 2 usdc to 0xB"), Intent::Send { asset, .. } if asset == "USDC")
        );
        assert_eq!(parse("send 2 DOGE to 0xB"), Intent::Other);
    }
}
