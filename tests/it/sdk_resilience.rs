//! The SDK against the real server behind a front that refuses every third GET with 503 and
//! `Retry-After`: calls are retried by the policy, a turn completes, and both streams deliver
//! every event once, in order.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use futures_util::StreamExt;
use intent_models::{AgentEvent, TurnState};
use intent_sdk::RetryPolicy;

use crate::fronts::{events_up_to, refusal, sdk_behind};

/// Answers every third GET with 503 and `Retry-After: 1`, counting in `gets`.
async fn unavailable(
    State(gets): State<Arc<AtomicUsize>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == Method::GET && gets.fetch_add(1, Ordering::Relaxed) % 3 == 2 {
        return refusal(503, "unavailable", Some("1"));
    }
    next.run(request).await
}

/// The server behind [`unavailable`], counting from `gets`, and a client retrying by `retry`.
async fn behind_unavailable(
    gets: &Arc<AtomicUsize>,
    retry: RetryPolicy,
) -> (intent_conformance::embedded::Embedded, intent_sdk::Intent) {
    let front = gets.clone();
    sdk_behind(
        move |app| app.layer(from_fn_with_state(front, unavailable)),
        retry,
    )
    .await
}

/// Takes a few seconds: each refused GET carries `Retry-After: 1`, which the retry policy waits
/// out before it tries again.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_and_both_streams_go_through_a_front_that_fails_every_third_get() {
    let gets = Arc::new(AtomicUsize::new(0));
    let (_server, intent) = behind_unavailable(&gets, RetryPolicy::default().max_attempts(4)).await;
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
    let within = Duration::from_secs(20);
    let polled = events_up_to(agent.follow(&first.session_id, None), last, within).await;
    let streamed = events_up_to(agent.follow_sse(&first.session_id, None), last, within).await;
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
    let (_server, intent) = behind_unavailable(&gets, RetryPolicy::none()).await;
    let error = intent
        .agent()
        .session("ses_missing")
        .await
        .expect_err("the first GET is refused");
    assert_eq!(error.status(), Some(503), "{error:?}");
}

/// Refuses every GET with 503 (and `Retry-After: 0`), counting them in `sent`.
async fn refuse_gets(
    State(sent): State<Arc<AtomicUsize>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == Method::GET {
        sent.fetch_add(1, Ordering::Relaxed);
        return refusal(503, "unavailable", Some("0"));
    }
    next.run(request).await
}

/// The GETs one session read and one follow send through [`refuse_gets`] under `retry`, and
/// the items the follow yields before it ends (or the first five).
async fn sent_under(retry: RetryPolicy) -> (usize, usize, usize) {
    let sent = Arc::new(AtomicUsize::new(0));
    let front = sent.clone();
    let (_server, intent) = sdk_behind(
        move |app| app.layer(from_fn_with_state(front, refuse_gets)),
        retry,
    )
    .await;
    let agent = intent.agent();
    let error = agent.session("ses_missing").await.expect_err("refused");
    assert_eq!(error.status(), Some(503), "{error:?}");
    let read = sent.swap(0, Ordering::Relaxed);
    let items: Vec<_> = agent.follow("ses_missing", None).take(5).collect().await;
    assert!(items.iter().all(Result::is_err), "{items:?}");
    (read, sent.load(Ordering::Relaxed), items.len())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_retries_nothing_sends_each_call_once_and_its_follow_ends_at_a_failure() {
    let (none, quick) = tokio::join!(
        sent_under(RetryPolicy::none()),
        sent_under(
            RetryPolicy::default().backoff(Duration::from_millis(1), Duration::from_millis(1))
        ),
    );
    // One GET for the read, one for the follow, which ends with its one error.
    assert_eq!(none, (1, 1, 1));
    // The policy's three attempts for a call; a follow hands out what a poll's attempts left
    // and reconnects.
    assert_eq!(quick, (3, 15, 5));
}

/// Refuses the first five GETs with 503 (and `Retry-After: 0`), counting GETs in `gets`.
async fn refuse_five_in_a_row(
    State(gets): State<Arc<AtomicUsize>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == Method::GET && (0..5).contains(&gets.fetch_add(1, Ordering::Relaxed)) {
        return refusal(503, "unavailable", Some("0"));
    }
    next.run(request).await
}

/// A wait is the follower: failures beyond what one call's attempts allow are waited out, not
/// returned, and the turn's outcome is the same.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_waited_for_outlasts_more_failures_in_a_row_than_a_call_s_attempts() {
    let gets = Arc::new(AtomicUsize::new(0));
    let front = gets.clone();
    let quick = RetryPolicy::default().backoff(Duration::from_millis(1), Duration::from_millis(5));
    let (_server, intent) = sdk_behind(
        move |app| app.layer(from_fn_with_state(front, refuse_five_in_a_row)),
        quick,
    )
    .await;
    let agent = intent.agent();
    let turn = agent
        .run_turn("hello", None)
        .await
        .expect("the turn settles");
    assert_eq!(turn.state, TurnState::Complete);
    let seqs: Vec<u64> = turn.events.iter().map(AgentEvent::seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert!(gets.load(Ordering::Relaxed) > 5, "five GETs were refused");
}
