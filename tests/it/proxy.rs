//! The validation proxy (`intent-conformance proxy`) between a client and the reference server:
//! an SDK client's traffic breaks nothing; a server that drops a required member and a client
//! that sends a body off its schema are each caught, with the side and the pointer; a stream
//! passes frame by frame.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::middleware::{Next, from_fn};
use axum::response::Response;
use futures_util::StreamExt;
use intent_conformance::checks::Status;
use intent_conformance::embedded::Embedded;
use intent_conformance::proxy::{Breach, Proxy, Side, VIOLATIONS_HEADER};
use intent_conformance::report;
use intent_conformance::spec::Level;
use intent_conformance::target::Role;
use intent_models::{PipelineBuildRequest, PipelineChain, TurnState};
use intent_sdk::agent::{Decision, LogItem};
use intent_sdk::{Intent, Resource, StaticToken};
use serde_json::{Value, json};

/// A proxy of `server` on a free loopback port, serving until the test's runtime ends, and the
/// proxy's base URL.
async fn proxy_of(server: &Embedded) -> (Arc<Proxy>, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let proxy = Arc::new(Proxy::new(server.base()));
    tokio::spawn(proxy.clone().serve(listener));
    (proxy, base)
}

/// Every violation the proxy saw, as the JSON report lists them in its messages.
fn violations(proxy: &Proxy) -> String {
    report::console(&proxy.ledger().report(proxy.upstream(), false))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_sdk_client_through_the_proxy_breaks_nothing() {
    let server = Embedded::start().await.unwrap();
    let (proxy, base) = proxy_of(&server).await;
    let target = server.target();
    let mut builder = Intent::builder(&base);
    for (resource, role) in [
        (Resource::Agent, Role::Agent),
        (Resource::Pipeline, Role::Pipeline),
        (Resource::Account, Role::Account),
    ] {
        let token = target.role(role).await.unwrap();
        builder = builder.token(resource, StaticToken::new(token));
    }
    let intent = builder.build().unwrap();

    // A turn through its action, its log by pages and over SSE, a Build committed, the account.
    let agent = intent.agent();
    let to = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
    let outcome = agent
        .run_turn(&format!("send 0.25 ETH to {to}"), None)
        .await
        .unwrap();
    assert_eq!(outcome.state, TurnState::AwaitingAction);
    let action = outcome.action.clone().unwrap();
    agent
        .resolve(&outcome.session_id, &action, Decision::Approve)
        .await
        .unwrap();
    let done = agent
        .wait_turn(&outcome.session_id, &outcome.turn_id, &outcome.cursor)
        .await
        .unwrap();
    assert_eq!(done.state, TurnState::Complete);
    for stream in [
        agent.follow(&outcome.session_id, None).boxed(),
        agent.follow_sse(&outcome.session_id, None).boxed(),
    ] {
        let items: Vec<_> = stream.take(3).collect().await;
        assert!(items.iter().all(Result::is_ok), "{items:?}");
        assert!(
            items
                .iter()
                .any(|item| matches!(item, Ok(LogItem::Event { .. })))
        );
    }
    let request: PipelineBuildRequest = serde_json::from_value(json!({
        "app": "evm-assets",
        "operations": [{ "operation": "native-transfer", "input": {
            "chainId": 31337, "from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
            "to": to, "amount": "0.5",
        } }],
    }))
    .unwrap();
    let pipeline = intent.pipeline();
    let sealed = pipeline.build(PipelineChain::Evm, &request).await.unwrap();
    pipeline.verify(&sealed).await.unwrap();
    pipeline.commit(&sealed).await.unwrap();
    intent.account().statement(None).await.unwrap();
    intent.account().apps().await.unwrap();

    assert_eq!(proxy.ledger().violations(), 0, "{}", violations(&proxy));
    let report = proxy.ledger().report(proxy.upstream(), false);
    let passed: Vec<&str> = report
        .outcomes
        .iter()
        .filter(|outcome| outcome.status == Status::Pass)
        .map(|outcome| outcome.id.as_str())
        .collect();
    for id in [
        "traffic.startChat",
        "traffic.getChatEvents",
        "traffic.streamChatEvents",
        "traffic.resolveAction",
        "traffic.evmBuild",
        "traffic.getStatement",
    ] {
        assert!(passed.contains(&id), "{id} not among {passed:?}");
    }
    assert!(!report.failed(), "{}", report::console(&report));
}

/// The answer to `request`, with `edit` applied to its JSON body when the request's path ends
/// with `path` and the answer is a success.
async fn edited(request: Request, next: Next, path: &str, edit: fn(&mut Value)) -> Response {
    let matches = request.uri().path().ends_with(path);
    let response = next.run(request).await;
    if !matches || !response.status().is_success() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let mut body: Value = serde_json::from_slice(&bytes).unwrap();
    edit(&mut body);
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body.to_string()))
}

/// Drops the required `turnId` from every answer that starts a turn.
async fn drop_turn_id(request: Request, next: Next) -> Response {
    edited(request, next, "/v1/agent/chat", |body| {
        body.as_object_mut().unwrap().remove("turnId");
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn each_side_that_breaks_the_contract_is_named_with_its_pointer() {
    let server = Embedded::start_with(|app: Router| app.layer(from_fn(drop_turn_id)))
        .await
        .unwrap();
    let (proxy, base) = proxy_of(&server).await;
    let token = server.target().role(Role::Agent).await.unwrap();
    let http = reqwest::Client::new();
    let chat = |body: Value| {
        http.post(format!("{base}/v1/agent/chat"))
            .bearer_auth(&token)
            .json(&body)
            .send()
    };

    // The client's mistake: a message that is no string. The server refuses it too.
    let refused = chat(json!({ "message": 5 })).await.unwrap();
    assert_eq!(refused.status(), 400);
    assert_eq!(refused.headers()[VIOLATIONS_HEADER], "1");
    // The server's: an answer without its turn.
    let started = chat(json!({ "message": "hello" })).await.unwrap();
    assert_eq!(started.status(), 202);
    assert_eq!(started.headers()[VIOLATIONS_HEADER], "1");
    let body: Value = started.json().await.unwrap();
    assert!(body.get("turnId").is_none(), "the proxy changes nothing");

    // A client that forgets its token breaks part 5, which every deployment keeps.
    let session = body["sessionId"].as_str().unwrap();
    let anonymous = http
        .get(format!("{base}/v1/agent/sessions/{session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(anonymous.headers()[VIOLATIONS_HEADER], "1");

    // A browser's CORS preflight is transport, not an operation: not judged.
    let preflight = http
        .request(reqwest::Method::OPTIONS, format!("{base}/v1/agent/chat"))
        .send()
        .await
        .unwrap();
    assert!(preflight.headers().get(VIOLATIONS_HEADER).is_none());

    let normative = proxy.ledger().report(proxy.upstream(), true);
    let outcome = |report: &intent_conformance::suite::Report, id: &str| {
        let outcome = report.outcomes.iter().find(|outcome| outcome.id == id);
        outcome.unwrap().clone()
    };
    let read = outcome(&normative, "traffic.getSession");
    assert_eq!(read.status, Status::Fail);
    let message = read.message.unwrap();
    assert!(
        message.contains("client broke getSession at /header/authorization (security, normative)"),
        "{message}"
    );
    let chat = outcome(&normative, "traffic.startChat");
    assert_eq!(
        chat.status,
        Status::Pass,
        "profile violations are notes here"
    );
    assert_eq!(
        chat.profile_findings.len(),
        2,
        "{:?}",
        chat.profile_findings
    );

    let report = proxy.ledger().report(proxy.upstream(), false);
    let outcome = outcome(&report, "traffic.startChat");
    assert_eq!(outcome.status, Status::Fail);
    let message = outcome.message.clone().unwrap();
    // The interface does not show startChat's body or answers (`x-profile-fills`): what breaks
    // them breaks our profile.
    let expected = [
        Breach {
            side: Side::Client,
            operation: "startChat".into(),
            pointer: "/body/message".into(),
            keyword: "type".into(),
            level: Level::Profile,
        },
        Breach {
            side: Side::Server,
            operation: "startChat".into(),
            pointer: "/body/turnId".into(),
            keyword: "required".into(),
            level: Level::Profile,
        },
    ];
    for violation in &expected {
        assert!(
            message.contains(&violation.to_string()),
            "{violation} not in {message}"
        );
    }
    assert_eq!(proxy.ledger().violations(), 3, "{message}");
    assert!(!message.contains(&token), "no token in a report");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_passes_frame_by_frame() {
    let server = Embedded::start().await.unwrap();
    let (proxy, base) = proxy_of(&server).await;
    let token = server.target().role(Role::Agent).await.unwrap();
    let http = reqwest::Client::new();
    let started: Value = http
        .post(format!("{base}/v1/agent/chat"))
        .bearer_auth(&token)
        .json(&json!({ "message": "hello" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let session = started["sessionId"].as_str().unwrap();
    let stream = http
        .get(format!("{base}/v1/agent/chat/{session}/stream"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    // The stream stays open: its first page arrives only if the proxy forwards as it receives.
    let mut chunks = stream.bytes_stream();
    let mut received = String::new();
    while !received.contains("event: page") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), chunks.next())
            .await
            .expect("a frame within 10 s, with the stream still open")
            .expect("the stream goes on")
            .unwrap();
        received.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert_eq!(proxy.ledger().violations(), 0, "{}", violations(&proxy));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_reaches_the_client_as_the_upstream_sent_it() {
    let server = Embedded::start_with(|app: Router| {
        app.route(
            "/moved",
            axum::routing::get(|| async { axum::response::Redirect::to("/healthz") }),
        )
    })
    .await
    .unwrap();
    let (_proxy, base) = proxy_of(&server).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let moved = client.get(format!("{base}/moved")).send().await.unwrap();
    assert_eq!(moved.status(), 303, "the proxy follows no redirect itself");
    assert_eq!(moved.headers()["location"], "/healthz");
}

/// Drops `gas` from the simulation of every Build the EVM lifecycle endpoint answers.
async fn drop_gas(request: Request, next: Next) -> Response {
    edited(request, next, "/v1/pipeline/evm/build", |body| {
        if let Some(simulation) = body["simulation"].as_object_mut() {
            simulation.remove("gas");
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_build_whose_simulation_lacks_gas_breaks_the_document_and_names_it() {
    let server = Embedded::start_with(|app: Router| app.layer(from_fn(drop_gas)))
        .await
        .unwrap();
    let (proxy, base) = proxy_of(&server).await;
    let token = server.target().role(Role::Pipeline).await.unwrap();
    let request = intent_conformance::spec::spec()
        .request_example("POST", "/v1/pipeline/evm/build", "operations")
        .expect("a build request example");
    let built = reqwest::Client::new()
        .post(format!("{base}/v1/pipeline/evm/build"))
        .bearer_auth(&token)
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(built.status(), 200);
    assert_eq!(built.headers()[VIOLATIONS_HEADER], "1");
    // Part 2.2 requires `gas`: a normative violation, which `--fail-on-violation` exits 1 on
    // (it fails when this normative report does).
    let normative = proxy.ledger().report(proxy.upstream(), true);
    assert!(normative.failed(), "{}", report::console(&normative));
    let violation = Breach {
        side: Side::Server,
        operation: "evmBuild".into(),
        pointer: "/body/simulation/gas".into(),
        keyword: "required".into(),
        level: Level::Normative,
    };
    let message = violations(&proxy);
    assert!(message.contains(&violation.to_string()), "{message}");
}
