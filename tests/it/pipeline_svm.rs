//! The Pipeline on the SVM devnet end to end: SOL and SPL transfers built, simulated with
//! litesvm and committed, balances changed after the commit and after a restart, the lifecycle
//! examples of openapi.json, and the refusals of Builds that do not belong on the endpoint.

use std::time::Duration;

use intent_models::{PipelineLifecycleRequest, PipelineLifecycleResponse};
use intent_server::auth::resource::Resource;
use intent_server::ids::AccountId;
use intent_tests::TestServer;
use serde_json::{Value, json};

const PAYER: &str = "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM";
const RECIPIENT: &str = "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T";
/// An address the devnet has never seen.
const FRESH: &str = "9SQFPcabgQBVL8jDjoPMbg88MJvHevccVCDArJaZEhj9";
const USDC: &str = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";
const MSOL: &str = "mSoLzYCxHdYgdzU16g5QSh3i5K3z3KZK7ytfqcJm7So";
const SYSTEM_PROGRAM: &str = "11111111111111111111111111111111";

fn sol(to: &str, amount: &str) -> Value {
    json!({
        "app": "svm-assets",
        "operations": [{
            "operation": "sol-transfer",
            "input": { "cluster": "localnet", "from": PAYER, "to": to, "amount": amount },
        }],
    })
}

fn spl(mint: &str, to: &str, amount: &str) -> Value {
    json!({
        "app": "svm-assets",
        "operations": [{
            "operation": "spl-transfer",
            "input": { "cluster": "localnet", "from": PAYER, "mint": mint, "to": to, "amount": amount },
        }],
    })
}

async fn post(server: &TestServer, path: &str, token: &str, body: &Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/pipeline/{path}", server.base_url()))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn stage(server: &TestServer, token: &str, body: &Value) -> (u16, Value) {
    post(server, "svm/stage", token, body).await
}

fn execute(server: &TestServer, account: &str) -> String {
    server.token(account, Resource::Pipeline, &["pipeline:execute"])
}

/// `(asset, account, direction, amount)` of each balance change.
fn changes(build: &Value) -> Vec<(String, String, String, String)> {
    build["simulation"]["balanceChanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (
                text("asset"),
                text("account"),
                text("direction"),
                text("amount"),
            )
        })
        .collect()
}

fn change(
    asset: &str,
    account: &str,
    direction: &str,
    amount: &str,
) -> (String, String, String, String) {
    (
        asset.into(),
        account.into(),
        direction.into(),
        amount.into(),
    )
}

fn guard<'a>(build: &'a Value, name: &str) -> &'a Value {
    build["simulation"]["guards"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == name)
        .unwrap()
}

#[tokio::test]
async fn a_sol_transfer_is_simulated_by_litesvm_and_committed_through_the_client() {
    let server = TestServer::start().await;
    let alice = execute(&server, "alice");
    let client = server.client(&alice);
    let request: PipelineLifecycleRequest = serde_json::from_value(sol(RECIPIENT, "1")).unwrap();
    let PipelineLifecycleResponse::Build(build) = client
        .svm_stage()
        .body(request)
        .send()
        .await
        .unwrap()
        .into_inner()
    else {
        panic!("a build request answers a Build");
    };
    let value = serde_json::to_value(&build).unwrap();
    assert_eq!(value["simulation"]["status"], "passed", "{value}");
    assert_eq!(value["summary"]["network"], "localnet");
    assert_eq!(value["simulation"]["gas"], Value::Null);
    assert_eq!(
        changes(&value),
        [
            change("native", RECIPIENT, "in", "1000000000"),
            change("native", PAYER, "out", "1000000000"),
        ]
    );
    let counterparty = &value["simulation"]["balanceChanges"][0]["counterparty"];
    assert_eq!(counterparty, PAYER);
    let fee = &value["simulation"]["fees"][0];
    assert_eq!(
        (&fee["amount"], &fee["kind"]),
        (&json!("5000"), &json!("signature"))
    );
    let logs = value["simulation"]["logs"].as_array().unwrap();
    assert!(
        logs.iter().any(|l| l["address"] == SYSTEM_PROGRAM
            && l["data"] == format!("Program {SYSTEM_PROGRAM} success")),
        "{logs:#?}"
    );

    // Before the commit all but the fee can move; after it, 1 SOL less.
    let (_, everything) = stage(&server, &alice, &sol(RECIPIENT, "999.99")).await;
    assert_eq!(everything["simulation"]["status"], "passed", "{everything}");
    let commit = PipelineLifecycleRequest::Build(build.clone());
    let PipelineLifecycleResponse::CommitResult(result) = client
        .svm_stage()
        .body(commit)
        .send()
        .await
        .unwrap()
        .into_inner()
    else {
        panic!("a Build answers a commit result");
    };
    assert_eq!(result.chain.to_string(), "svm");
    assert_eq!(*result.digest, *build.digest);
    let signature = &result.transactions[0].id;
    assert!(
        (86..=88).contains(&signature.len()),
        "a base58 signature: {signature}"
    );
    let (_, too_much) = stage(&server, &alice, &sol(RECIPIENT, "999.99")).await;
    assert_eq!(too_much["simulation"]["status"], "failed");
    assert_eq!(
        guard(&too_much, "sufficient_balance")["status"],
        "failed",
        "{too_much}"
    );
}

#[tokio::test]
async fn spl_transfers_move_tokens_create_the_recipient_account_and_survive_a_restart() {
    let server = TestServer::start().await;
    let alice = execute(&server, "alice");
    let (status, usdc) = stage(&server, &alice, &spl(USDC, RECIPIENT, "12.5")).await;
    assert_eq!(status, 200, "{usdc}");
    assert_eq!(usdc["simulation"]["status"], "passed", "{usdc}");
    assert_eq!(
        changes(&usdc),
        [
            change(USDC, RECIPIENT, "in", "12500000"),
            change(USDC, PAYER, "out", "12500000"),
        ],
        "both token accounts exist: no rent is paid"
    );
    let token_change = &usdc["simulation"]["balanceChanges"][0];
    assert_eq!(
        (&token_change["symbol"], &token_change["decimals"]),
        (&json!("USDC"), &json!(6))
    );
    let (status, _) = stage(&server, &alice, &usdc).await;
    assert_eq!(status, 200);

    // A recipient without a token account gets one, paid by the sender.
    let (_, msol) = stage(&server, &alice, &spl(MSOL, FRESH, "0.25")).await;
    assert_eq!(msol["simulation"]["status"], "passed", "{msol}");
    let changes = changes(&msol);
    assert!(
        changes.contains(&change(MSOL, FRESH, "in", "250000000")),
        "{changes:?}"
    );
    assert!(
        changes.contains(&change(MSOL, PAYER, "out", "250000000")),
        "{changes:?}"
    );
    let rent = changes
        .iter()
        .find(|(asset, account, ..)| asset == "native" && account == PAYER)
        .expect("the sender pays the new account's rent");
    assert_eq!((rent.2.as_str(), rent.3.as_str()), ("out", "2039280"));
    let (status, _) = stage(&server, &alice, &msol).await;
    assert_eq!(status, 200);

    // A second process on the same data dir replays the commits: 12.5 USDC are gone.
    let config = server.state().config().clone();
    let reopened = intent_server::AppState::open(config, server.base_url())
        .await
        .unwrap();
    let all: intent_models::PipelineBuildRequest =
        serde_json::from_value(spl(USDC, RECIPIENT, "999987.5")).unwrap();
    let build = reopened
        .pipeline()
        .build(&AccountId::verified("alice"), &all)
        .await
        .unwrap();
    assert_eq!(build.simulation.unwrap().status.to_string(), "passed");
    let more: intent_models::PipelineBuildRequest =
        serde_json::from_value(spl(USDC, RECIPIENT, "999987.500001")).unwrap();
    let build = reopened
        .pipeline()
        .build(&AccountId::verified("alice"), &more)
        .await
        .unwrap();
    let simulation = serde_json::to_value(build.simulation.unwrap()).unwrap();
    assert_eq!(simulation["status"], "failed", "{simulation}");
}

#[tokio::test]
async fn the_svm_lifecycle_examples_of_openapi_json_are_accepted() {
    let server = TestServer::start().await;
    let alice = execute(&server, "alice");
    let examples = intent_tests::openapi()
        .pointer(
            "/paths/~1v1~1pipeline~1svm~1stage/post/requestBody/content/application~1json/examples",
        )
        .unwrap()
        .as_object()
        .unwrap();
    assert_eq!(examples.len(), 3);
    for (name, example) in examples {
        let (status, body) = stage(&server, &alice, &example["value"]).await;
        if name == "commit" {
            // A Build sealed by another server: parsed as a Build, refused on its attestation.
            assert_eq!(
                (status, body["error"]["code"].as_str()),
                (422, Some("build_invalid")),
                "{body}"
            );
        } else {
            assert_eq!(status, 200, "{name}: {body}");
            assert_eq!(body["simulation"]["status"], "passed", "{name}: {body}");
            let (status, committed) = stage(&server, &alice, &body).await;
            assert_eq!(
                (status, &committed["status"]),
                (200, &json!("committed")),
                "{name}: {committed}"
            );
        }
    }
}

/// Needs 2.1 s: on a second server, Builds live 1 s, counted in whole seconds, so a Build is
/// surely expired 2 s on, when the check is that staging it gets `build_expired`. The refusals
/// for chain, tampering and account are judged on a server whose Builds outlive a stalled
/// machine, so that none of them can meet an expired Build first.
#[tokio::test]
async fn builds_stay_on_their_chain_and_are_refused_tampered_or_expired() {
    let server = TestServer::start().await;
    let alice = execute(&server, "alice");
    let (status, error) = post(&server, "evm/build", &alice, &sol(RECIPIENT, "1")).await;
    assert_eq!(
        (status, error["error"]["code"].as_str()),
        (422, Some("chain_mismatch"))
    );

    let (_, build) = stage(&server, &alice, &sol(RECIPIENT, "1")).await;
    let (status, error) = post(&server, "evm/build", &alice, &build).await;
    assert_eq!(
        (status, error["error"]["code"].as_str()),
        (422, Some("chain_mismatch"))
    );

    let mut tampered = build.clone();
    tampered["actions"][0]["instructions"][0]["data"] = "AgAAAAAAAAAAAAAA".into();
    let (status, error) = stage(&server, &alice, &tampered).await;
    assert_eq!(
        (status, error["error"]["code"].as_str()),
        (422, Some("build_invalid"))
    );
    let (status, error) = stage(&server, &execute(&server, "bob"), &build).await;
    assert_eq!(
        (status, error["error"]["code"].as_str()),
        (422, Some("build_invalid"))
    );

    let brief = TestServer::start_with(|config| config.build_ttl(Duration::from_secs(1))).await;
    let alice = execute(&brief, "alice");
    let (status, build) = stage(&brief, &alice, &sol(RECIPIENT, "1")).await;
    assert_eq!(status, 200, "{build}");
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let (status, error) = stage(&brief, &alice, &build).await;
    assert_eq!(
        (status, error["error"]["code"].as_str()),
        (422, Some("build_expired"))
    );
}

#[tokio::test]
async fn unknown_clusters_mints_and_short_balances_fail_their_guards() {
    let server = TestServer::start().await;
    let alice = execute(&server, "alice");
    let mut elsewhere = sol(RECIPIENT, "1");
    elsewhere["operations"][0]["input"]["cluster"] = "mainnet-beta".into();
    let (_, build) = stage(&server, &alice, &elsewhere).await;
    assert_eq!(build["simulation"]["status"], "failed");
    assert_eq!(guard(&build, "known_chain")["status"], "failed");

    let (status, error) = stage(&server, &alice, &spl(FRESH, RECIPIENT, "1")).await;
    assert_eq!(
        (status, error["error"]["code"].as_str()),
        (400, Some("validation_failed"))
    );

    // A payer the cluster has never seen cannot pay the fee.
    let mut broke = sol(RECIPIENT, "1");
    broke["operations"][0]["input"]["from"] = FRESH.into();
    let (_, build) = stage(&server, &alice, &broke).await;
    assert_eq!(
        guard(&build, "sufficient_balance")["status"],
        "failed",
        "{build}"
    );
    assert_eq!(guard(&build, "simulation_succeeded")["status"], "passed");
}
