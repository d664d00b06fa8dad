//! The Pipeline's EVM native transfer end to end: build and simulate, commit with revalidation
//! and re-simulation, and every refusal of a Build that is not exactly what the server sealed.

use std::time::Duration;

use intent_models::{PipelineLifecycleRequest, PipelineLifecycleResponse};
use intent_server::resource::Resource;
use intent_tests::TestServer;
use serde_json::{Value, json};

const SENDER: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
const RECIPIENT: &str = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

fn transfer(amount: &str) -> Value {
    json!({
        "app": "evm-assets",
        "operations": [{
            "operation": "native-transfer",
            "input": { "chainId": 31337, "from": SENDER, "to": RECIPIENT, "amount": amount },
        }],
    })
}

async fn post(server: &TestServer, token: &str, body: &Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/pipeline/evm/build", server.base))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

fn execute(server: &TestServer, account: &str) -> String {
    server.token(account, Resource::Pipeline, &["pipeline:execute"])
}

#[tokio::test]
async fn a_native_transfer_builds_simulates_and_commits_once() {
    let server = TestServer::start().await;
    let client = server.client(&execute(&server, "alice"));
    let request: PipelineLifecycleRequest = serde_json::from_value(transfer("2")).unwrap();
    let PipelineLifecycleResponse::Build(build) =
        client.evm_build(&request).await.unwrap().into_inner()
    else {
        panic!("a build request answers a Build");
    };
    let simulation = build.simulation.clone().unwrap();
    assert_eq!(simulation.status.to_string(), "passed");
    let gas = simulation.gas.clone().unwrap();
    assert_eq!(gas.units.as_deref(), Some("21000"));
    let fee = &simulation.fees[0];
    assert_eq!(fee.amount, "21000000000000");
    let changes: Vec<(Option<String>, String)> = simulation
        .balance_changes
        .iter()
        .map(|c| (c.account.clone(), c.amount.clone()))
        .collect();
    assert!(changes.contains(&(Some(SENDER.into()), "2000000000000000000".into())));
    assert!(changes.contains(&(Some(RECIPIENT.into()), "2000000000000000000".into())));

    let commit = PipelineLifecycleRequest::Build(build.clone());
    let PipelineLifecycleResponse::CommitResult(result) =
        client.evm_build(&commit).await.unwrap().into_inner()
    else {
        panic!("a Build answers a commit result");
    };
    assert_eq!(*result.digest, *build.digest);
    assert_eq!(result.transactions.len(), 1);

    // A second commit of the same Build is refused.
    let (status, body) = post(
        &server,
        &execute(&server, "alice"),
        &serde_json::to_value(&build).unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("build_invalid"))
    );
}

#[tokio::test]
async fn commit_refuses_tampered_foreign_forged_and_expired_builds() {
    let server = TestServer::start_with(|config| config.build_ttl(Duration::from_secs(1))).await;
    let alice = execute(&server, "alice");
    let (status, build) = post(&server, &alice, &transfer("1")).await;
    assert_eq!(status, 200, "{build}");

    let mut tampered = build.clone();
    tampered["actions"][0]["value"] = "2000000000000000000".into();
    let mut forged = build.clone();
    let attestation = forged["attestation"].as_str().unwrap().to_owned();
    forged["attestation"] = format!("{}AA", &attestation[..attestation.len() - 2]).into();
    let mut other_app = build.clone();
    other_app["origin"]["app"] = "svm-assets".into();
    for (name, body, token) in [
        ("tampered", &tampered, &alice),
        ("forged", &forged, &alice),
        ("another app", &other_app, &alice),
        ("another account", &build, &execute(&server, "bob")),
    ] {
        let (status, error) = post(&server, token, body).await;
        assert_eq!(status, 422, "{name}: {error}");
        assert_eq!(error["error"]["code"], "build_invalid", "{name}");
    }

    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let (status, error) = post(&server, &alice, &build).await;
    assert_eq!(
        (status, error["error"]["code"].as_str()),
        (422, Some("build_expired"))
    );
}

#[tokio::test]
async fn bad_inputs_are_refused_with_the_schema_errors() {
    let server = TestServer::start().await;
    let alice = execute(&server, "alice");
    let mut bad = transfer("1");
    bad["operations"][0]["input"]["to"] = "not an address".into();
    let (status, error) = post(&server, &alice, &bad).await;
    assert_eq!(
        (status, error["error"]["code"].as_str()),
        (400, Some("validation_failed"))
    );
    assert!(
        !error["error"]["details"]["errors"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    let mut unknown = transfer("1");
    unknown["app"] = "nowhere".into();
    let (status, _) = post(&server, &alice, &unknown).await;
    assert_eq!(status, 404);

    // Too much: the simulation fails and says why.
    let (status, build) = post(&server, &alice, &transfer("20000")).await;
    assert_eq!(status, 200);
    assert_eq!(build["simulation"]["status"], "failed");
    let guard = build["simulation"]["guards"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "sufficient_balance")
        .unwrap();
    assert_eq!(guard["status"], "failed", "{guard}");
}

#[tokio::test]
async fn the_sdk_verifies_builds_offline_and_commits_them_byte_for_byte() {
    use intent_sdk::build::{self, BuildError};

    let server = TestServer::start_with(|config| config.build_ttl(Duration::from_secs(2))).await;
    let alice = execute(&server, "alice");
    let (_, sealed) = post(&server, &alice, &transfer("1")).await;
    let jwks: jsonwebtoken::jwk::JwkSet =
        reqwest::get(format!("{}/.well-known/jwks.json", server.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let attestation = build::verify(&sealed, &jwks).unwrap();
    assert_eq!(
        (attestation.owner.as_str(), attestation.app.as_str()),
        ("alice", "evm-assets")
    );

    let mut tampered = sealed.clone();
    tampered["summary"]["title"] = "Send 1000 ETH".into();
    assert_eq!(
        build::verify(&tampered, &jwks),
        Err(BuildError::DigestMismatch)
    );
    let mut forged = sealed.clone();
    let token = forged["attestation"].as_str().unwrap().to_owned();
    forged["attestation"] = format!("{}AA", &token[..token.len() - 2]).into();
    assert!(matches!(
        build::verify(&forged, &jwks),
        Err(BuildError::Attestation(_))
    ));

    let client = server.client(&alice);
    let now = intent_server::now();
    let committed = build::commit(&client, &sealed, now).await.unwrap();
    assert_eq!(committed["status"], "committed");
    assert_eq!(committed["digest"], sealed["digest"]);

    // Past `expiresAt` the SDK refuses before sending.
    let (_, late) = post(&server, &alice, &transfer("1")).await;
    let expires_at = late["expiresAt"].as_i64().unwrap();
    let error = build::commit(&client, &late, expires_at + 1)
        .await
        .unwrap_err();
    assert!(
        matches!(error, intent_sdk::Error::InvalidInput(_)),
        "{error:?}"
    );
}
