//! The SDK against the real server behind a front that refuses every third GET with 503 and
//! `Retry-After`: calls are retried by the policy, a turn completes, and both streams deliver
//! every event once, in order.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use futures_util::StreamExt;
use intent_conformance::embedded::Embedded;
use intent_conformance::target::Role;
use intent_models::{AgentEvent, TurnState};
use intent_sdk::agent::LogItem;
use intent_sdk::{Intent, Resource, RetryPolicy, StaticToken};

/// Answers every third GET with 503 and `Retry-After: 1`, counting in `gets`.
async fn unavailable(
    State(gets): State<Arc<AtomicUsize>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == Method::GET && gets.fetch_add(1, Ordering::Relaxed) % 3 == 2 {
        let envelope = r#"{"error":{"code":"unavailable","message":"try again"}}"#;
        return Response::builder()
            .status(503)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::RETRY_AFTER, "1")
            .body(Body::from(envelope))
            .expect("a response");
    }
    next.run(request).await
}

/// The events of `stream` up to the one at `seq`.
async fn events_up_to(
    stream: impl futures_util::Stream<Item = Result<LogItem, intent_sdk::Error>>,
    seq: u64,
) -> Vec<AgentEvent> {
    let mut stream = Box::pin(stream);
    let mut events: Vec<AgentEvent> = Vec::new();
    while events.last().is_none_or(|event| event.seq() < seq) {
        let item = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("an item within 20 s")
            .expect("the stream goes on")
            .expect("every failure is retried");
        if let LogItem::Event { event, .. } = item {
            events.push(*event);
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_and_both_streams_go_through_a_front_that_fails_every_third_get() {
    let gets = Arc::new(AtomicUsize::new(0));
    let front = gets.clone();
    let server = Embedded::start_with(move |app| app.layer(from_fn_with_state(front, unavailable)))
        .await
        .expect("the embedded server starts");
    let token = server
        .target()
        .role(Role::Agent)
        .await
        .expect("an agent token");
    let intent = Intent::builder(server.base())
        .token(Resource::Agent, StaticToken::new(token))
        .retry(RetryPolicy::default().max_attempts(4))
        .build()
        .expect("an SDK client");
    let agent = intent.agent();
    let first = agent
        .run_turn("hello", None)
        .await
        .expect("the turn completes");
    assert_eq!(first.state, TurnState::Complete);
    let second = agent
        .run_turn("hello again", Some(&first.session_id))
        .await
        .expect("the second turn completes");
    let last = second.events.last().expect("events").seq();
    let polled = events_up_to(agent.follow(&first.session_id, None), last).await;
    let streamed = events_up_to(agent.follow_sse(&first.session_id, None), last).await;
    let seqs = |events: &[AgentEvent]| events.iter().map(AgentEvent::seq).collect::<Vec<_>>();
    let expected: Vec<u64> = (1..=last).collect();
    assert_eq!(seqs(&polled), expected);
    assert_eq!(seqs(&streamed), expected);
    assert!(
        gets.load(Ordering::Relaxed) >= 6,
        "the front saw {} GETs, so refused fewer than 2",
        gets.load(Ordering::Relaxed)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_retries_the_front_s_503_reaches_the_caller() {
    let gets = Arc::new(AtomicUsize::new(2));
    let front = gets.clone();
    let server = Embedded::start_with(move |app| app.layer(from_fn_with_state(front, unavailable)))
        .await
        .expect("the embedded server starts");
    let token = server
        .target()
        .role(Role::Agent)
        .await
        .expect("an agent token");
    let intent = Intent::builder(server.base())
        .token(Resource::Agent, StaticToken::new(token))
        .retry(RetryPolicy::none())
        .build()
        .expect("an SDK client");
    let error = intent
        .agent()
        .session("ses_missing")
        .await
        .expect_err("the first GET is refused");
    assert_eq!(error.status(), Some(503), "{error:?}");
}
