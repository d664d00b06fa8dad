//! `keys rotate` with a restart in between: tokens, Build attestations and cursors made with the
//! previous keys keep working, and the JWKS keeps publishing the previous signing key, until
//! everything those keys made can have expired; then all of it is refused.

use std::time::Duration;

use intent_sdk::sealed::{Jwks, SealedBuild};
use intent_server::auth::resource::Resource;
use intent_server::config::Config;
use intent_tests::TestServer;
use serde_json::{Value, json};

const SENDER: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
const RECIPIENT: &str = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

/// A server on the data dir of `first`, with `first`'s public address, as after a restart.
async fn restart(first: &TestServer, configure: impl FnOnce(Config) -> Config) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    // The first server's config: its data dir and, on PostgreSQL, its database.
    let config = configure(first.state().config().clone().public_url(first.base_url()));
    let state = intent_server::AppState::open(config, &base).await.unwrap();
    tokio::spawn(intent_server::serve(listener, state));
    base
}

async fn call(method: &str, url: String, token: &str, body: Option<Value>) -> (u16, Value) {
    let client = reqwest::Client::new();
    let request = match method {
        "POST" => client.post(url).json(&body.unwrap_or_default()),
        _ => client.get(url),
    };
    let response = request.bearer_auth(token).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn jwks(base: &str) -> Jwks {
    let url = format!("{base}/.well-known/jwks.json");
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

fn kid(jws: &str) -> String {
    jsonwebtoken::decode_header(jws).unwrap().kid.unwrap()
}

/// What a server made: a session's cursor and a sealed Build, with the tokens used.
struct Made {
    agent: String,
    pipeline: String,
    session: String,
    cursor: String,
    build: SealedBuild,
}

/// Tokens for alice signed with the key `server` started with.
fn tokens_of(server: &TestServer) -> (String, String) {
    let agent = server.token("alice", Resource::Agent, &["agent:read", "agent:write"]);
    let pipeline = server.token("alice", Resource::Pipeline, &["pipeline:execute"]);
    (agent, pipeline)
}

/// Tokens for alice signed with the current key of `server`'s data dir.
fn current_tokens(server: &TestServer) -> (String, String) {
    let mint = |resource: Resource, scopes: &[&str]| {
        let grant = intent_server::auth::token::Grant {
            account: "alice".to_owned(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            resource: resource.identifier(server.base_url()),
            client_id: "intent-tests".to_owned(),
            ttl: Duration::from_secs(3600),
        };
        let now = intent_server::now();
        intent_server::auth::token::mint_with_data_dir(server.data_dir(), &grant, now).unwrap()
    };
    let agent = mint(Resource::Agent, &["agent:read", "agent:write"]);
    (agent, mint(Resource::Pipeline, &["pipeline:execute"]))
}

/// Starts a turn and seals a Build sending `amount` ETH on the server at `base`.
async fn make(base: &str, (agent, pipeline): (String, String), amount: &str) -> Made {
    let url = format!("{base}/v1/agent/chat");
    let (status, started) = call("POST", url, &agent, Some(json!({ "message": "hello" }))).await;
    assert_eq!(status, 202, "{started}");
    let transfer = json!({
        "app": "evm-assets",
        "operations": [{
            "operation": "native-transfer",
            "input": { "chainId": 31337, "from": SENDER, "to": RECIPIENT, "amount": amount },
        }],
    });
    let url = format!("{base}/v1/pipeline/evm/build");
    let (status, build) = call("POST", url, &pipeline, Some(transfer)).await;
    assert_eq!(status, 200, "{build}");
    Made {
        agent,
        pipeline,
        session: started["sessionId"].as_str().unwrap().to_owned(),
        cursor: started["cursor"].as_str().unwrap().to_owned(),
        build: SealedBuild::from_json(build).unwrap(),
    }
}

async fn page(base: &str, made: &Made) -> (u16, Value) {
    let url = format!(
        "{base}/v1/agent/chat/{}?cursor={}",
        made.session, made.cursor
    );
    call("GET", url, &made.agent, None).await
}

async fn commit(base: &str, made: &Made) -> (u16, Value) {
    let url = format!("{base}/v1/pipeline/evm/build");
    call(
        "POST",
        url,
        &made.pipeline,
        Some(Value::Object(made.build.json().clone())),
    )
    .await
}

#[tokio::test]
async fn what_the_previous_keys_made_keeps_working_across_a_rotation_and_a_restart() {
    let server = TestServer::start().await;
    let made = make(server.base_url(), tokens_of(&server), "1").await;
    let old_kid = kid(&made.agent);
    assert_eq!(kid(&made.build.attestation), old_kid);

    let new_kid = intent_server::rotate_keys(server.data_dir(), intent_server::now()).unwrap();
    assert_ne!(new_kid, old_kid);
    let base = restart(&server, |config| config).await;

    let published = jwks(&base).await;
    let kids: Vec<String> = published.key_ids().map(str::to_owned).collect();
    assert_eq!(
        kids,
        [new_kid.clone(), old_kid],
        "the current key first, then the retired one"
    );
    let (status, body) = page(&base, &made).await;
    assert_eq!(status, 200, "the old token and the old cursor: {body}");
    made.build
        .verify_with(&published)
        .expect("the SDK verifies the old attestation");
    let (status, body) = commit(&base, &made).await;
    assert_eq!(status, 200, "the old Build commits: {body}");

    // What the restarted server makes is signed with the new keys, and verifies too.
    let fresh = make(&base, current_tokens(&server), "2").await;
    assert_eq!(kid(&fresh.agent), new_kid);
    assert_eq!(kid(&fresh.build.attestation), new_kid);
    fresh.build.verify_with(&published).unwrap();
    assert_eq!(page(&base, &fresh).await.0, 200);
    let (status, body) = commit(&base, &fresh).await;
    assert_eq!(status, 200, "{body}");
}

/// Needs 2.1 s: the restarted server honours the retired keys for 1 s after the rotation,
/// counted in whole seconds, so they are surely refused 2 s on.
#[tokio::test]
async fn the_previous_keys_are_refused_once_what_they_made_can_have_expired() {
    let server = TestServer::start().await;
    let made = make(server.base_url(), tokens_of(&server), "1").await;
    intent_server::rotate_keys(server.data_dir(), intent_server::now()).unwrap();
    // Tokens, Builds and cursors of the restarted server live one second, so it honours the
    // retired keys for one second after the rotation, although the old token (an hour), Build
    // (ten minutes) and cursor (a day) have not expired.
    let second = Duration::from_secs(1);
    let base = restart(&server, |config| {
        config
            .access_token_ttl(second)
            .build_ttl(second)
            .cursor_ttl(second)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(2100)).await;

    let published = jwks(&base).await;
    assert_eq!(
        published.key_ids().count(),
        1,
        "only the current key is published"
    );
    assert!(made.build.verify_with(&published).is_err());
    let (status, body) = page(&base, &made).await;
    assert_eq!(status, 401, "the old token is refused: {body}");
    let (status, body) = commit(&base, &made).await;
    assert_eq!(status, 401, "{body}");

    // With tokens of the current key, the old cursor and Build are refused on their own keys.
    let (agent, pipeline) = current_tokens(&server);
    let current = Made {
        agent,
        pipeline,
        ..made
    };
    let (status, body) = page(&base, &current).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_cursor")),
        "{body}"
    );
    let (status, body) = commit(&base, &current).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("build_invalid")),
        "{body}"
    );
}
