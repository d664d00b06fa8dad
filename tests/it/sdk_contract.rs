//! SDK contract tests against wiremock, for what a real server rarely does on demand: a cursor
//! that expires mid-stream, `resync`, a dropped SSE connection, `slow_down`, 429, a retry that
//! must reuse its idempotency key, and a simulation with an extra field.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use intent_sdk::Intent;
use intent_sdk::agent::{Decision, LogItem};
use intent_sdk::auth::OAuth;
use serde_json::{Value, json};
use wiremock::matchers::{method, path, query_param, query_param_is_missing};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SESSION: &str = "ses_1";

fn event(seq: u64) -> Value {
    json!({ "type": "message", "seq": seq, "turnId": "turn_1", "createdAt": 1, "role": "user", "text": "hi" })
}

fn page(cursor: &str, seqs: &[u64]) -> Value {
    json!({
        "session_id": SESSION,
        "cursor": cursor,
        "events": seqs.iter().map(|s| event(*s)).collect::<Vec<_>>(),
        "has_more": false,
    })
}

fn sse_page(cursor: &str, seqs: &[u64]) -> String {
    format!(
        "event: page\nid: {cursor}\ndata: {}\n\n",
        page(cursor, seqs)
    )
}

/// A client of the mock server, with a token for every resource.
fn intent(server: &MockServer) -> Intent {
    let mut builder = Intent::builder(server.uri());
    for resource in intent_sdk::Resource::ALL {
        builder = builder.token(resource, intent_sdk::StaticToken::new("contract-token"));
    }
    builder.build().unwrap()
}

async fn items<T>(stream: &mut (impl futures_util::Stream<Item = T> + Unpin), n: usize) -> Vec<T> {
    let mut items = Vec::new();
    while items.len() < n {
        let item = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("an item within 10 s")
            .expect("the stream goes on");
        items.push(item);
    }
    items
}

#[tokio::test]
async fn a_cursor_expiring_mid_stream_restarts_the_page_follower() {
    let server = MockServer::start().await;
    let events = format!("/v1/agent/chat/{SESSION}");
    Mock::given(method("GET"))
        .and(path(&events))
        .and(query_param("cursor", "c1"))
        .respond_with(
            ResponseTemplate::new(410).set_body_json(json!({ "error": "cursor_expired" })),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(&events))
        .and(query_param("cursor", "c1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(page("c1", &[])))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(&events))
        .and(query_param_is_missing("cursor"))
        .respond_with(ResponseTemplate::new(200).set_body_json(page("c1", &[1, 2])))
        .mount(&server)
        .await;

    let intent = intent(&server);
    let mut stream = Box::pin(intent.agent().follow(SESSION, None));
    let got: Vec<Option<u64>> = items(&mut stream, 5)
        .await
        .into_iter()
        .map(|item| match item.unwrap() {
            LogItem::Event { event, .. } => Some(event.seq()),
            LogItem::Restart => None,
            LogItem::Snapshot(_) => panic!("long-poll pages carry no snapshot"),
        })
        .collect();
    assert_eq!(got, [Some(1), Some(2), None, Some(1), Some(2)]);
}

/// A page that says the log has more is followed by the next one, asked for while the page is
/// decoded; each event comes once and in order, and a page that only seemed to have more (an
/// event's own `has_more` member) leaves the follower where it was.
#[tokio::test]
async fn a_page_follower_reads_ahead_and_gives_each_event_once() {
    let server = MockServer::start().await;
    let events = format!("/v1/agent/chat/{SESSION}");
    let more = |cursor: &str, seqs: &[u64]| {
        let mut page = page(cursor, seqs);
        page["has_more"] = json!(true);
        page
    };
    let mut last = page("c3", &[5]);
    // Tolerated: an event member of a name the page has too.
    last["events"][0]["has_more"] = json!(true);
    let answers = [
        (None, more("c1", &[1, 2])),
        (Some("c1"), more("c2", &[3, 4])),
        (Some("c2"), last),
        (Some("c3"), page("c3", &[])),
    ];
    for (cursor, body) in answers {
        let mock = Mock::given(method("GET")).and(path(&events));
        let mock = match cursor {
            Some(cursor) => mock.and(query_param("cursor", cursor)),
            None => mock.and(query_param_is_missing("cursor")),
        };
        mock.respond_with(ResponseTemplate::new(200).set_body_json(body))
            .mount(&server)
            .await;
    }

    let intent = intent(&server);
    let mut stream = Box::pin(intent.agent().follow(SESSION, None));
    let seqs: Vec<u64> = items(&mut stream, 5)
        .await
        .into_iter()
        .map(|item| match item.unwrap() {
            LogItem::Event { event, .. } => event.seq(),
            other => panic!("only events: {other:?}"),
        })
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    let asked = server.received_requests().await.unwrap();
    let at = |cursor: &str| {
        asked
            .iter()
            .filter(|request| request.url.query().unwrap_or_default().contains(cursor))
            .count()
    };
    assert_eq!(
        (at("cursor=c1"), at("cursor=c2")),
        (1, 1),
        "each page asked once"
    );
}

#[tokio::test]
async fn sse_resync_restarts_and_a_dropped_connection_resumes_from_the_last_page() {
    let server = MockServer::start().await;
    let stream_path = format!("/v1/agent/chat/{SESSION}/stream");
    let first = format!(
        "{}event: resync\ndata: {{\"reason\":\"lagged\"}}\n\n{}",
        sse_page("c1", &[1]),
        sse_page("c2", &[1, 2]),
    );
    // Each body ends: the connection drops after it.
    Mock::given(method("GET"))
        .and(path(&stream_path))
        .and(query_param_is_missing("cursor"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(first, "text/event-stream"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(&stream_path))
        .and(query_param("cursor", "c2"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(sse_page("c3", &[3]), "text/event-stream"),
        )
        .mount(&server)
        .await;

    let intent = intent(&server);
    let mut stream = Box::pin(intent.agent().follow_sse(SESSION, None));
    let got: Vec<String> = items(&mut stream, 5)
        .await
        .into_iter()
        .map(|item| match item {
            Ok(LogItem::Event { event, .. }) => event.seq().to_string(),
            Ok(LogItem::Restart) => "restart".to_owned(),
            Ok(LogItem::Snapshot(_)) => "snapshot".to_owned(),
            Err(error) => format!("error {error}"),
        })
        .collect();
    // The ended connection is reconnected from the last page's cursor without an error.
    assert_eq!(got, ["1", "restart", "1", "2", "3"]);
}

/// Takes about 6 s: the SDK polls after the 1 s interval, gets `slow_down`, and must wait 5 s
/// more before its next poll.
#[tokio::test]
async fn the_device_flow_honours_slow_down() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/auth/device/code"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "device_code": "d", "user_code": "ABCD-EFGH",
            "verification_uri": format!("{}/api/auth/device", server.uri()),
            "expires_in": 60, "interval": 1,
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/auth/oauth2/token"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({ "error": "slow_down" })))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/auth/oauth2/token"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "access_token": "token-a", "token_type": "Bearer", "expires_in": 3600,
        })))
        .mount(&server)
        .await;

    let began = Instant::now();
    let tokens = OAuth::new(&server.uri(), "intent-cli")
        .device(
            &format!("{}/v1/agent", server.uri()),
            &["agent:read"],
            |code| {
                assert_eq!(code.user_code, "ABCD-EFGH");
            },
        )
        .await
        .unwrap();
    use intent_sdk::auth::TokenSource;
    assert_eq!(tokens.token().await.unwrap(), "token-a");
    // One poll after 1 s, slow_down adds 5 s (RFC 8628 §3.5), then the second poll.
    assert!(
        began.elapsed() >= Duration::from_secs(6),
        "{:?}",
        began.elapsed()
    );
}

#[tokio::test]
async fn a_429_is_rate_limited_with_its_retry_after() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/v1/agent/sessions/{SESSION}")))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("Retry-After", "3")
                .set_body_json(json!({ "error": "rate_limited" })),
        )
        .mount(&server)
        .await;
    let error = intent(&server).agent().session(SESSION).await.unwrap_err();
    assert!(
        matches!(error, intent_sdk::Error::RateLimited { retry_after: Some(d), .. } if d == Duration::from_secs(3)),
        "{error:?}"
    );
}

/// The example Build of openapi.json, as a server would send it.
fn example_build() -> Value {
    lifecycle_example("build")
}

/// The example answer `name` of the EVM lifecycle endpoint in openapi.json.
fn lifecycle_example(name: &str) -> Value {
    let pointer = format!(
        "/paths/~1v1~1pipeline~1evm~1build/post/responses/200/content/application~1json/examples/{name}/value"
    );
    intent_tests::openapi()
        .pointer(&pointer)
        .expect("the lifecycle example")
        .clone()
}

/// Resolves an action against a server that answers `first`, then 200: the revision, the
/// idempotency key of each request, and how long the resolution took.
async fn resolve_after(first: ResponseTemplate) -> (u64, Vec<String>, Duration) {
    let server = MockServer::start().await;
    let resolve = format!("/v1/agent/sessions/{SESSION}/actions/act_1/resolve");
    Mock::given(method("POST"))
        .and(path(&resolve))
        .respond_with(first)
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(&resolve))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({ "actionId": "act_1", "revision": 2 })),
        )
        .mount(&server)
        .await;
    let action: intent_models::ActionRequest = serde_json::from_value(json!({
        "actionId": "act_1", "revision": 1, "kind": "approve_build", "title": "t",
        "build": example_build(),
    }))
    .unwrap();
    let intent = intent(&server);
    let started = Instant::now();
    let resolution = intent
        .agent()
        .resolve(SESSION, &action, Decision::Approve)
        .await
        .unwrap();
    let elapsed = started.elapsed();
    let keys = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.headers["idempotency-key"].to_str().unwrap().to_owned())
        .collect();
    (resolution.revision.get(), keys, elapsed)
}

#[tokio::test]
async fn a_resolution_retried_after_in_flight_reuses_its_idempotency_key() {
    let (revision, keys, _) = resolve_after(ResponseTemplate::new(409).set_body_json(json!({
        "error": { "code": "idempotency_in_flight", "message": "in flight" }
    })))
    .await;
    assert_eq!(revision, 2);
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0], keys[1], "the retry reuses the key");
}

/// Takes about 1 s: the SDK waits out the 429's `Retry-After: 1` before it retries, and the
/// check is that it did.
#[tokio::test]
async fn a_rate_limited_resolution_waits_its_retry_after_and_reuses_its_key() {
    let (revision, keys, elapsed) = resolve_after(
        ResponseTemplate::new(429)
            .insert_header("Retry-After", "1")
            .set_body_json(json!({ "error": { "code": "rate_limited", "message": "slow" } })),
    )
    .await;
    assert_eq!(revision, 2);
    assert!(
        elapsed >= Duration::from_secs(1),
        "the retry waited Retry-After"
    );
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0], keys[1], "the retry reuses the key");
}

#[tokio::test]
async fn a_simulation_with_an_extra_field_is_read_by_the_tolerant_types() {
    let server = MockServer::start().await;
    let mut build = example_build();
    build["simulation"]["riskScore"] = json!(7);
    Mock::given(method("POST"))
        .and(path("/v1/pipeline/evm/build"))
        .respond_with(ResponseTemplate::new(200).set_body_json(build))
        .mount(&server)
        .await;
    let client = intent_sdk::raw::Client::new(&server.uri(), Default::default());
    let request: intent_models::PipelineLifecycleRequest = serde_json::from_value(json!({
        "app": "evm-assets",
        "operations": [{ "operation": "native-transfer", "input": {} }],
    }))
    .unwrap();
    let response = client
        .evm_build()
        .body(request)
        .send()
        .await
        .map_err(intent_sdk::Error::from)
        .expect("a member the SDK does not know is read past")
        .into_inner();
    let intent_models::PipelineLifecycleResponse::Build(build) = response else {
        panic!("a Build was answered: {response:?}");
    };
    assert_eq!(json!(build.digest), example_build()["digest"]);
}

#[tokio::test]
async fn a_build_with_members_of_its_own_is_typed_and_committed_as_received() {
    let server = MockServer::start().await;
    // Another deployment: a summary of its own shape (the interface says any JSON value) and a
    // member the SDK does not know, both under the digest.
    let mut sent = example_build();
    sent["summary"] = json!("Send 0.5 ETH to Bob");
    sent["x-region"] = json!({ "zone": "eu-1" });
    sent["expiresAt"] = json!(intent_server::now() + 600);
    let digest = intent_models::digest::build_digest(sent.as_object().unwrap());
    sent["digest"] = json!(digest);
    Mock::given(method("POST"))
        .and(path("/v1/pipeline/evm/build"))
        .and(wiremock::matchers::body_partial_json(
            json!({ "app": "evm-assets" }),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(&sent))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/pipeline/evm/build"))
        .and(wiremock::matchers::body_json(&sent))
        .respond_with(ResponseTemplate::new(200).set_body_json(lifecycle_example("commit")))
        .expect(1)
        .mount(&server)
        .await;
    let request: intent_models::PipelineBuildRequest = serde_json::from_value(json!({
        "app": "evm-assets",
        "operations": [{ "operation": "native-transfer", "input": {} }],
    }))
    .unwrap();
    let intent = intent(&server);
    let pipeline = intent.pipeline();
    let sealed = pipeline
        .build(intent_models::PipelineChain::Evm, &request)
        .await
        .unwrap();
    assert_eq!(
        sealed.summary,
        Some(intent_models::Open::Other(json!("Send 0.5 ETH to Bob")))
    );
    assert_eq!(*sealed.digest, digest);
    assert_eq!(
        serde_json::to_value(&sealed).unwrap(),
        sent,
        "stored as received"
    );
    sealed.verify_digest().unwrap();

    let mut altered = sealed.json().clone();
    altered.insert("expiresAt".to_owned(), json!(intent_server::now() + 3600));
    let altered = intent_sdk::sealed::SealedBuild::from_json(altered.into()).unwrap();
    let error = pipeline.commit(&altered).await.unwrap_err();
    assert!(
        matches!(
            error,
            intent_sdk::Error::Build(intent_sdk::sealed::BuildError::DigestMismatch)
        ),
        "{error:?}"
    );

    let committed = pipeline.commit(&sealed).await.unwrap();
    assert_eq!(
        json!(committed),
        lifecycle_example("commit"),
        "the commit result is typed"
    );
}

#[tokio::test]
async fn a_body_that_does_not_decode_is_an_invalid_response_quoting_it() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/pipeline/apps"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "apps": 7 })))
        .expect(1)
        .mount(&server)
        .await;
    let error = intent(&server).pipeline().apps().await.unwrap_err();
    let intent_sdk::Error::InvalidResponse(message) = &error else {
        panic!("{error:?}");
    };
    assert!(message.contains(r#"the body: {"apps":7}"#), "{message}");
}

/// A Build sealed by the reference server, and the server's JWKS as it publishes it.
async fn a_real_build_and_its_keys() -> (intent_sdk::sealed::SealedBuild, Value) {
    let server = intent_tests::TestServer::start().await;
    let intent = server.intent("alice");
    let request: intent_sdk::models::PipelineBuildRequest = serde_json::from_value(json!({
        "app": "evm-assets",
        "operations": [{ "operation": "native-transfer", "input": {
            "chainId": 31337, "from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
            "to": "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC", "amount": "1" } }],
    }))
    .unwrap();
    let sealed = intent
        .pipeline()
        .build(intent_sdk::models::PipelineChain::Evm, &request)
        .await
        .unwrap();
    let keys = reqwest::get(format!("{}/.well-known/jwks.json", server.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (sealed, keys)
}

#[tokio::test]
async fn published_keys_are_fetched_once_and_builds_verify_offline() {
    let (sealed, keys) = a_real_build_and_its_keys().await;
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/.well-known/jwks.json"))
        .respond_with(ResponseTemplate::new(200).set_body_json(&keys))
        .expect(1)
        .mount(&server)
        .await;
    let intent = intent(&server);
    let pipeline = intent.pipeline();
    let jwks = pipeline.jwks().await.unwrap();
    assert_eq!(
        pipeline.jwks().await.unwrap(),
        jwks,
        "kept, not fetched again"
    );
    pipeline.verify(&sealed).await.unwrap();
    for _ in 0..3 {
        sealed.verify_with(&jwks).unwrap();
    }
    let mut tampered = sealed.json().clone();
    tampered["expiresAt"] = json!(1);
    let tampered = intent_sdk::sealed::SealedBuild::from_json(tampered.into()).unwrap();
    assert!(tampered.verify_with(&jwks).is_err());
    // The mock server checks, as it stops, that it was asked once.
}

#[tokio::test]
async fn keys_are_fetched_again_once_when_an_attestation_names_a_key_they_lack() {
    let (sealed, keys) = a_real_build_and_its_keys().await;
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/.well-known/jwks.json"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "keys": [] })))
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/.well-known/jwks.json"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(&keys)
                .insert_header("x-request-id", "req_keys"),
        )
        .expect(1)
        .mount(&server)
        .await;
    let intent = intent(&server);
    let pipeline = intent.pipeline();
    assert!(pipeline.jwks().await.unwrap().key_ids().next().is_none());
    let attestation = pipeline.verify(&sealed).await.unwrap();
    assert_eq!(attestation.owner, "alice");
    pipeline.verify(&sealed).await.unwrap();
}

#[tokio::test]
async fn an_error_carries_the_request_id_its_answer_named() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/v1/agent/sessions/{SESSION}")))
        .respond_with(
            ResponseTemplate::new(404)
                .insert_header("x-request-id", "req_0123")
                .set_body_json(json!({ "error": "not_found" })),
        )
        .mount(&server)
        .await;
    let error = intent(&server).agent().session(SESSION).await.unwrap_err();
    assert!(matches!(error, intent_sdk::Error::NotFound(_)), "{error:?}");
    assert_eq!(error.request_id(), Some("req_0123"));
    assert_eq!(
        error.to_string(),
        "not found (status 404 not_found (request req_0123))"
    );
    let plain = intent_sdk::Error::InvalidInput("x".into());
    assert_eq!(plain.request_id(), None);
}
