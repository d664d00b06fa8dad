//! The services under the HTTP layer, called directly as a second front door would call them:
//! a turn started through `Turns`, streamed and paged through the `EventLog`, and resolved with
//! an idempotency key, with no HTTP request in between.

use std::pin::pin;
use std::time::Duration;

use futures_util::StreamExt;
use intent_models::{
    ActionRequest, ActionResolutionRequest, ActionResult, AgentEvent, ChatStartRequest, TurnState,
};
use intent_server::AppState;
use intent_server::agent::{Error, PageRequest, Refusal, StreamItem};
use intent_server::ids::{AccountId, ActionId, SessionId};
use intent_tests::TestServer;

const RECIPIENT: &str = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

fn alice() -> AccountId {
    AccountId::verified("alice")
}

/// Follows `session` of `alice` from `cursor` until its turn leaves `processing`: the events
/// seen and the state reached. Snapshots are counted, never kept.
async fn follow_until_settled(
    state: &AppState,
    session: &SessionId,
    cursor: Option<&str>,
) -> (Vec<AgentEvent>, TurnState, usize) {
    let followed = state
        .log()
        .stream(&alice(), session, cursor, None)
        .await
        .unwrap();
    let mut followed = pin!(followed);
    let (mut events, mut snapshots) = (Vec::new(), 0);
    let mut turn_state = TurnState::Processing;
    while turn_state == TurnState::Processing {
        let item = tokio::time::timeout(Duration::from_secs(20), followed.next())
            .await
            .expect("the log moves on")
            .expect("the stream lasts while the session does");
        match item {
            StreamItem::Page(page) => {
                for event in page.to_model().events {
                    if let AgentEvent::TurnState { state, .. } = &event {
                        turn_state = *state;
                    }
                    events.push(event);
                }
            }
            StreamItem::Snapshot(_) => snapshots += 1,
            StreamItem::Resync(reason) => panic!("an unexpected resync: {reason:?}"),
            StreamItem::Closing => panic!("the log drained"),
        }
    }
    (events, turn_state, snapshots)
}

fn action_of(events: &[AgentEvent]) -> ActionRequest {
    events
        .iter()
        .find_map(|event| match event {
            AgentEvent::Action { action, .. } => Some(action.clone()),
            _ => None,
        })
        .expect("the turn asked for an action")
}

fn action_id(action: &ActionRequest) -> ActionId {
    action.action_id.to_string().try_into().unwrap()
}

fn approval(action: &ActionRequest, revision: u64) -> ActionResolutionRequest {
    ActionResolutionRequest::builder()
        .revision(revision)
        .result(ActionResult::Approved {
            digest: action.build.digest.to_string().parse().unwrap(),
        })
        .try_into()
        .unwrap()
}

async fn start_transfer(state: &AppState) -> (SessionId, ActionRequest) {
    let request: ChatStartRequest = ChatStartRequest::builder()
        .message(format!("send 1 ETH to {RECIPIENT}"))
        .try_into()
        .unwrap();
    let started = state.turns().start(&alice(), &request).await.unwrap();
    let session = started.session_id.parse().unwrap();
    let (events, turn_state, _) = follow_until_settled(state, &session, None).await;
    assert_eq!(turn_state, TurnState::AwaitingAction);
    (session, action_of(&events))
}

#[tokio::test]
async fn a_turn_runs_through_the_services_alone() {
    let server = TestServer::start().await;
    let state = &server.state();
    let (session, action) = start_transfer(state).await;
    let first_page = state
        .log()
        .page(&alice(), &session, &PageRequest::default())
        .await
        .unwrap()
        .to_model();
    let resolution = state
        .turns()
        .resolve(
            &alice(),
            &session,
            &action_id(&action),
            "k",
            approval(&action, 1),
        )
        .await
        .unwrap();
    assert_eq!(resolution.revision.get(), 2);
    let (events, turn_state, snapshots) =
        follow_until_settled(state, &session, Some(&first_page.cursor)).await;
    assert_eq!(turn_state, TurnState::Complete, "{events:#?}");
    assert!(snapshots > 0, "the reply was streamed as snapshots");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::ActionResult { .. })),
        "{events:#?}"
    );

    // The whole log, paged from the start, is one gapless sequence.
    let whole = state
        .log()
        .page(&alice(), &session, &PageRequest::default())
        .await
        .unwrap()
        .to_model();
    let seqs: Vec<u64> = whole.events.iter().map(AgentEvent::seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(whole.events.len(), first_page.events.len() + events.len());
    assert!(!whole.has_more);

    // Another account finds nothing, and a cursor of alice's is no cursor of bob's.
    let bob = state
        .log()
        .page(
            &AccountId::verified("bob"),
            &session,
            &PageRequest::default(),
        )
        .await;
    assert!(matches!(bob, Err(Error::NoSession(_))), "{bob:?}");
    let foreign = PageRequest {
        cursor: Some(whole.cursor.clone()),
        ..PageRequest::default()
    };
    let other_session = state
        .turns()
        .start(
            &alice(),
            &ChatStartRequest::builder()
                .message("hello")
                .try_into()
                .unwrap(),
        )
        .await
        .unwrap()
        .session_id
        .parse()
        .unwrap();
    let refused = state.log().page(&alice(), &other_session, &foreign).await;
    assert!(matches!(refused, Err(Error::InvalidCursor)), "{refused:?}");
}

#[tokio::test]
async fn a_refused_resolution_is_replayed_under_its_key() {
    let server = TestServer::start().await;
    let state = &server.state();
    let (session, action) = start_transfer(state).await;
    let resolve = async |key: &str, revision: u64| {
        state
            .turns()
            .resolve(
                &alice(),
                &session,
                &action_id(&action),
                key,
                approval(&action, revision),
            )
            .await
    };
    let stale = resolve("k-stale", 7).await;
    assert!(
        matches!(stale, Err(Error::Refused(Refusal::Stale { current: 1 }))),
        "{stale:?}"
    );
    resolve("k-ok", 1).await.unwrap();
    // Run again, the request would now meet revision 2; the key replays the first refusal.
    let replayed = resolve("k-stale", 7).await;
    assert!(
        matches!(replayed, Err(Error::Refused(Refusal::Stale { current: 1 }))),
        "{replayed:?}"
    );
    let late = resolve("k-late", 2).await;
    assert!(
        matches!(late, Err(Error::Refused(Refusal::NotPending))),
        "{late:?}"
    );
}
