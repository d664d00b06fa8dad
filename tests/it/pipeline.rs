//! The Pipeline's EVM native transfer end to end: build and simulate, commit with revalidation
//! and re-simulation, and every refusal of a Build that is not exactly what the server sealed.

use std::time::Duration;

use intent_models::{PipelineLifecycleRequest, PipelineLifecycleResponse};
use intent_server::auth::resource::Resource;
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
        .post(format!("{}/v1/pipeline/evm/build", server.base_url()))
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

/// `attestation` (a JWS) with the first character of its signature changed, which, unlike its
/// last character, carries no padding bits and so always changes the signature.
fn forge(attestation: &str) -> String {
    let (signed, signature) = attestation.rsplit_once('.').unwrap();
    let other = if signature.starts_with('A') { 'B' } else { 'A' };
    format!("{signed}.{other}{}", &signature[1..])
}

#[tokio::test]
async fn a_native_transfer_builds_simulates_and_commits_once() {
    let server = TestServer::start().await;
    let client = server.client(&execute(&server, "alice"));
    let request: PipelineLifecycleRequest = serde_json::from_value(transfer("2")).unwrap();
    let PipelineLifecycleResponse::Build(build) = client
        .evm_build()
        .body(request)
        .send()
        .await
        .unwrap()
        .into_inner()
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
    let PipelineLifecycleResponse::CommitResult(result) = client
        .evm_build()
        .body(commit)
        .send()
        .await
        .unwrap()
        .into_inner()
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

/// Needs 2.1 s: Builds live 1 s here, counted in whole seconds, so the Build is surely expired
/// 2 s on, when the check is that its commit gets `build_expired`.
#[tokio::test]
async fn commit_refuses_tampered_foreign_forged_and_expired_builds() {
    let server = TestServer::start_with(|config| config.build_ttl(Duration::from_secs(1))).await;
    let alice = execute(&server, "alice");
    let (status, build) = post(&server, &alice, &transfer("1")).await;
    assert_eq!(status, 200, "{build}");

    let mut tampered = build.clone();
    tampered["actions"][0]["value"] = "2000000000000000000".into();
    let mut forged = build.clone();
    forged["attestation"] = forge(forged["attestation"].as_str().unwrap()).into();
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

    // A name in the body that names nothing refuses the body; 404 is for paths.
    let mut unknown = transfer("1");
    unknown["app"] = "nowhere".into();
    let (status, error) = post(&server, &alice, &unknown).await;
    assert_eq!(
        (status, &error["error"]["code"]),
        (400, &json!("validation_failed"))
    );
    let mut unknown = transfer("1");
    unknown["operations"][0]["operation"] = "0".into();
    let (status, error) = post(&server, &alice, &unknown).await;
    assert_eq!(
        (status, &error["error"]["code"]),
        (400, &json!("validation_failed"))
    );

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
    use intent_models::PipelineChain;
    use intent_sdk::sealed::{BuildError, SealedBuild};

    let server = TestServer::start_with(|config| config.build_ttl(Duration::from_secs(2))).await;
    let alice = execute(&server, "alice");
    let (_, json) = post(&server, &alice, &transfer("1")).await;
    let sealed = SealedBuild::from_json(json.clone()).unwrap();
    let jwks: intent_sdk::sealed::Jwks =
        reqwest::get(format!("{}/.well-known/jwks.json", server.base_url()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let attestation = sealed.verify_with(&jwks).unwrap();
    assert_eq!(
        (attestation.owner.as_str(), attestation.app.as_str()),
        ("alice", "evm-assets")
    );

    let mut tampered = json.clone();
    tampered["summary"]["title"] = "Send 1000 ETH".into();
    let tampered = SealedBuild::from_json(tampered).unwrap();
    assert_eq!(tampered.verify_with(&jwks), Err(BuildError::DigestMismatch));
    let mut forged = json.clone();
    forged["attestation"] = forge(forged["attestation"].as_str().unwrap()).into();
    let forged = SealedBuild::from_json(forged).unwrap();
    assert!(matches!(
        forged.verify_with(&jwks),
        Err(BuildError::Attestation(_))
    ));

    let committed = server
        .intent("alice")
        .pipeline()
        .commit(&sealed)
        .await
        .unwrap();
    assert_eq!(*committed.digest, *sealed.digest);
    assert_eq!(committed.transactions.len(), sealed.actions.len());

    // Past `expiresAt` the SDK refuses before sending; a tampered Build first of all.
    let (_, late) = post(&server, &alice, &transfer("1")).await;
    let late = SealedBuild::from_json(late).unwrap();
    let expires_at = late.expires_at;
    assert_eq!(late.committable(expires_at), Ok(PipelineChain::Evm));
    assert_eq!(
        late.committable(expires_at + 1),
        Err(BuildError::Expired(expires_at))
    );
    assert_eq!(
        tampered.committable(expires_at),
        Err(BuildError::DigestMismatch)
    );
}

fn catalog(server: &TestServer) -> String {
    server.token("alice", Resource::Pipeline, &["pipeline:catalog"])
}

#[tokio::test]
async fn the_catalog_lists_apps_and_skills_and_describes_operations() {
    let server = TestServer::start().await;
    let token = catalog(&server);
    let schemas = intent_models::schema::Schemas::from_openapi(intent_tests::openapi()).unwrap();
    let apps: Value = server
        .get("/v1/pipeline/apps", &token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        schemas.component("PipelineAppList").unwrap().errors(&apps),
        Vec::<String>::new()
    );
    assert_eq!(apps["apps"][0]["name"], "evm-assets");
    let skills: Value = server
        .get("/v1/pipeline/skills", &token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        schemas
            .component("PipelineSkillList")
            .unwrap()
            .errors(&skills),
        Vec::<String>::new()
    );

    let response = server
        .get(
            "/v1/pipeline/apps/evm-assets/operations/native-transfer",
            &token,
        )
        .await;
    assert_eq!(response.status(), 200);
    let descriptor: Value = response.json().await.unwrap();
    assert_eq!(
        schemas
            .component("OperationDescriptor")
            .unwrap()
            .errors(&descriptor),
        Vec::<String>::new()
    );
    assert_eq!(descriptor["href"], "/v1/pipeline/evm/build");
    assert_eq!(
        descriptor["inputSchema"]["required"],
        json!(["chainId", "from", "to", "amount"])
    );
    let long = "a".repeat(161);
    for (path, status) in [
        (
            "/v1/pipeline/apps/nowhere/operations/native-transfer".to_owned(),
            404,
        ),
        (
            "/v1/pipeline/apps/evm-assets/operations/nothing".to_owned(),
            404,
        ),
        (
            format!("/v1/pipeline/apps/{long}/operations/native-transfer"),
            400,
        ),
    ] {
        assert_eq!(server.get(&path, &token).await.status(), status, "{path}");
    }
}

#[tokio::test]
async fn skill_operations_check_their_input_against_its_schema() {
    let server = TestServer::start().await;
    let token = catalog(&server);
    let call = async |path: &str, body: Value| {
        let response = reqwest::Client::new()
            .post(format!("{}/v1/pipeline/skills/{path}", server.base_url()))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .unwrap();
        (
            response.status().as_u16(),
            response.json::<Value>().await.unwrap(),
        )
    };
    let (status, body) = call(
        "address/operations/validate",
        json!({ "address": SENDER.to_lowercase() }),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        body["result"],
        json!({ "valid": true, "chain": "evm", "checksummed": SENDER })
    );
    let wrong_checksum = SENDER.replace('F', "f").replacen('a', "A", 1);
    let (_, body) = call(
        "address/operations/validate",
        json!({ "address": wrong_checksum }),
    )
    .await;
    assert_eq!(body["result"]["valid"], false);
    let (_, body) = call("fees/operations/quote", json!({ "chainId": 31337 })).await;
    assert_eq!(body["result"]["nativeCost"], "21000000000000");

    let (status, body) = call(
        "address/operations/validate",
        json!({ "address": 7, "extra": true }),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "validation_failed");
    assert_eq!(
        body["error"]["details"]["errors"].as_array().unwrap().len(),
        2
    );
    let (status, _) = call("nowhere/operations/validate", json!({})).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_stage_input_is_simulated_sealed_and_committed() {
    let server = TestServer::start().await;
    let alice = execute(&server, "alice");
    let example = intent_tests::openapi()
        .pointer("/paths/~1v1~1pipeline~1evm~1build/post/requestBody/content/application~1json/examples/stageInput/value")
        .unwrap()
        .clone();
    let (status, build) = post(&server, &alice, &example).await;
    assert_eq!(status, 200, "{build}");
    assert_eq!(build["simulation"]["status"], "passed");
    assert_eq!(build["origin"]["operations"], json!([]));
    let (status, committed) = post(&server, &alice, &build).await;
    assert_eq!(
        (status, committed["status"].as_str()),
        (200, Some("committed"))
    );

    let mut svm_in_evm = example.clone();
    svm_in_evm["actions"][0]["step"] = 2.into();
    let (status, error) = post(&server, &alice, &svm_in_evm).await;
    assert_eq!(
        (status, error["error"]["code"].as_str()),
        (400, Some("validation_failed"))
    );
}

#[tokio::test]
async fn commit_refuses_a_build_with_any_byte_flipped() {
    let server = TestServer::start().await;
    let alice = execute(&server, "alice");
    let (_, build) = post(&server, &alice, &transfer("1")).await;
    let text = serde_json::to_string(&build).unwrap();
    let http = reqwest::Client::new();
    let url = format!("{}/v1/pipeline/evm/build", server.base_url());
    let mut refused = 0;
    for i in 0..text.len() {
        let mut bytes = text.clone().into_bytes();
        bytes[i] ^= 0x01;
        let response = http
            .post(&url)
            .bearer_auth(&alice)
            .header("content-type", "application/json")
            .body(bytes)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        assert!(
            (400..500).contains(&status),
            "byte {i} flipped was answered {status}"
        );
        refused += 1;
    }
    assert_eq!(refused, text.len());
    // The untouched Build still commits: the refusals did not consume it.
    let (status, _) = post(&server, &alice, &build).await;
    assert_eq!(status, 200);
}

const USDC: &str = "0x5FbDB2315678afecb367f032d93F642f64180aa3";

fn erc20(operation: &str, input: Value) -> Value {
    json!({ "app": "evm-assets", "operations": [{ "operation": operation, "input": input }] })
}

#[tokio::test]
async fn an_erc20_transfer_is_decoded_from_its_logs_and_changes_balances_once_committed() {
    let server = TestServer::start().await;
    let alice = execute(&server, "alice");
    let send = |amount: &str| {
        erc20(
            "erc20-transfer",
            json!({ "chainId": 31337, "from": SENDER, "token": USDC, "to": RECIPIENT, "amount": amount }),
        )
    };
    // The whole supply of the sender can move before the commit...
    let (_, everything) = post(&server, &alice, &send("1000000")).await;
    assert_eq!(everything["simulation"]["status"], "passed", "{everything}");

    let (status, build) = post(&server, &alice, &send("25.5")).await;
    assert_eq!(status, 200, "{build}");
    let simulation = &build["simulation"];
    assert_eq!(simulation["status"], "passed");
    let changes = simulation["balanceChanges"].as_array().unwrap();
    assert_eq!(changes.len(), 2, "{changes:#?}");
    for change in changes {
        assert_eq!(
            (
                &change["asset"],
                &change["amount"],
                &change["standard"],
                &change["symbol"],
                &change["decimals"]
            ),
            (
                &json!(USDC),
                &json!("25500000"),
                &json!("erc20"),
                &json!("USDC"),
                &json!(6)
            )
        );
    }
    assert_eq!(simulation["logs"][0]["topics"].as_array().unwrap().len(), 3);
    let (status, _) = post(&server, &alice, &build).await;
    assert_eq!(status, 200);

    // ...but not after 25.5 of it left.
    let (_, again) = post(&server, &alice, &send("1000000")).await;
    assert_eq!(again["simulation"]["status"], "failed", "{again}");
}

#[tokio::test]
async fn an_unlimited_approval_is_reported_and_warned_about() {
    let server = TestServer::start().await;
    let alice = execute(&server, "alice");
    let approve = |amount: &str| {
        erc20(
            "erc20-approve",
            json!({ "chainId": 31337, "from": SENDER, "token": USDC, "spender": RECIPIENT, "amount": amount }),
        )
    };
    let (_, limited) = post(&server, &alice, &approve("10")).await;
    let approval = &limited["simulation"]["approvals"][0];
    assert_eq!(
        (&approval["amount"], &approval["unlimited"]),
        (&json!("10000000"), &json!(false))
    );
    let (_, unlimited) = post(&server, &alice, &approve("unlimited")).await;
    let simulation = &unlimited["simulation"];
    assert_eq!(simulation["approvals"][0]["unlimited"], true);
    assert_eq!(simulation["approvals"][0]["kind"], "allowance");
    assert_eq!(simulation["warnings"].as_array().unwrap().len(), 1);
    let guard = simulation["guards"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "unlimited_approval")
        .unwrap();
    assert_eq!(guard["status"], "warning");
    assert_eq!(
        simulation["status"], "passed",
        "a warning does not fail the simulation"
    );
}

#[tokio::test]
async fn the_evm_lifecycle_examples_of_openapi_json_are_accepted() {
    let server = TestServer::start().await;
    let alice = execute(&server, "alice");
    let examples = intent_tests::openapi()
        .pointer(
            "/paths/~1v1~1pipeline~1evm~1build/post/requestBody/content/application~1json/examples",
        )
        .unwrap()
        .as_object()
        .unwrap();
    for (name, example) in examples {
        let (status, body) = post(&server, &alice, &example["value"]).await;
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
        }
    }
}

const COLLECTIBLE: &str = "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0";
const ITEMS: &str = "0xCf7Ed3AccA5a467e9e704C703E8D87F634fB0Fc9";

fn changes_of(build: &Value) -> Vec<(String, String, String, String)> {
    build["simulation"]["balanceChanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (
                text("standard"),
                text("direction"),
                text("tokenId"),
                text("amount"),
            )
        })
        .collect()
}

#[tokio::test]
async fn nft_and_multi_token_transfers_and_operator_approvals_are_decoded() {
    let server = TestServer::start().await;
    let alice = execute(&server, "alice");
    let input = |extra: Value| {
        let mut input = json!({ "chainId": 31337, "from": SENDER });
        input
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        input
    };

    // The sender owns collectibles 1 to 3.
    let (_, nft) = post(
        &server,
        &alice,
        &erc20(
            "erc721-transfer",
            input(json!({ "token": COLLECTIBLE, "to": RECIPIENT, "tokenId": "2" })),
        ),
    )
    .await;
    assert_eq!(nft["simulation"]["status"], "passed", "{nft}");
    assert_eq!(
        changes_of(&nft),
        [
            ("erc721".into(), "out".into(), "2".into(), "1".into()),
            ("erc721".into(), "in".into(), "2".into(), "1".into())
        ]
    );
    assert_eq!(
        nft["simulation"]["logs"][0]["topics"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    // Token 4 belongs to the second account: the transfer reverts.
    let (_, foreign) = post(
        &server,
        &alice,
        &erc20(
            "erc721-transfer",
            input(json!({ "token": COLLECTIBLE, "to": RECIPIENT, "tokenId": "4" })),
        ),
    )
    .await;
    assert_eq!(foreign["simulation"]["status"], "failed");

    let (_, items) = post(
        &server,
        &alice,
        &erc20(
            "erc1155-transfer",
            input(json!({ "token": ITEMS, "to": RECIPIENT, "id": "1", "amount": "7" })),
        ),
    )
    .await;
    assert_eq!(items["simulation"]["status"], "passed", "{items}");
    assert_eq!(
        changes_of(&items),
        [
            ("erc1155".into(), "out".into(), "1".into(), "7".into()),
            ("erc1155".into(), "in".into(), "1".into(), "7".into())
        ]
    );

    for (token, standard) in [(COLLECTIBLE, "erc721"), (ITEMS, "erc1155")] {
        let (_, operator) = post(
            &server,
            &alice,
            &erc20(
                "set-approval-for-all",
                input(json!({ "token": token, "operator": RECIPIENT, "approved": true })),
            ),
        )
        .await;
        let approval = &operator["simulation"]["approvals"][0];
        assert_eq!(
            (
                &approval["kind"],
                &approval["standard"],
                &approval["approved"]
            ),
            (&json!("operator"), &json!(standard), &json!(true)),
            "{operator}"
        );
        assert_eq!(
            operator["simulation"]["warnings"].as_array().unwrap().len(),
            1
        );
    }

    // An operation names a contract of the wrong standard: 400.
    let (status, error) = post(
        &server,
        &alice,
        &erc20(
            "erc721-transfer",
            input(json!({ "token": USDC, "to": RECIPIENT, "tokenId": "1" })),
        ),
    )
    .await;
    assert_eq!(
        (status, error["error"]["code"].as_str()),
        (400, Some("validation_failed"))
    );
}
