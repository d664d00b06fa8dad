//! The Agent end to end, through the generated client against the reference server on
//! loopback: turns in every state, the event log and its cursors, long-polls, sessions, and
//! action resolution with idempotency keys.

use std::time::{Duration, Instant};

use intent_models::{
    ActionRequest, ActionResolutionRequest, ActionResult, AgentEvent, ChatStartRequest,
    ChatStartResponse, EventPage, SessionUpdate, TurnState,
};
use intent_sdk::raw::Client;
use intent_server::auth::resource::Resource;
use intent_server::ids::AccountId;
use intent_tests::TestServer;
use serde_json::{Value, json};

const RECIPIENT: &str = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

const SCOPES: &[&str] = &["agent:read", "agent:write", "agent:actions:resolve"];

/// A server and a client of one account with every Agent scope.
pub(crate) struct Agent {
    pub(crate) server: TestServer,
    pub(crate) client: Client,
}

impl Agent {
    async fn start() -> Self {
        Self::with(TestServer::start().await)
    }

    pub(crate) fn with(server: TestServer) -> Self {
        let token = server.token("alice", Resource::Agent, SCOPES);
        let client = server.client(&token);
        Self { server, client }
    }

    pub(crate) async fn chat(&self, message: &str, session: Option<&str>) -> ChatStartResponse {
        self.try_chat(message, session).await.unwrap()
    }

    pub(crate) async fn try_chat(
        &self,
        message: &str,
        session: Option<&str>,
    ) -> Result<ChatStartResponse, intent_sdk::Error> {
        let request: ChatStartRequest = ChatStartRequest::builder()
            .message(message)
            .session_id(session.map(|s| s.parse().unwrap()))
            .try_into()
            .unwrap();
        self.client
            .start_chat()
            .body(request)
            .send()
            .await
            .map(|r| r.into_inner())
            .map_err(intent_sdk::Error::from)
    }

    pub(crate) async fn page(
        &self,
        session: &str,
        cursor: Option<&str>,
        wait: i64,
    ) -> Result<EventPage, intent_sdk::Error> {
        let mut request = self.client.get_chat_events().session_id(session).wait(wait);
        if let Some(cursor) = cursor {
            request = request.cursor(cursor);
        }
        request
            .send()
            .await
            .map(|r| r.into_inner())
            .map_err(intent_sdk::Error::from)
    }

    /// Polls from `cursor` until the latest turn state is not `processing` and nothing more is
    /// ready (part 3, rules 3 and 4); the events read, the state, and the last cursor.
    pub(crate) async fn settle(
        &self,
        session: &str,
        cursor: &str,
    ) -> (Vec<AgentEvent>, TurnState, String) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut cursor = cursor.to_owned();
        let mut events = Vec::new();
        let mut state = TurnState::Processing;
        while Instant::now() < deadline {
            let page = self.page(session, Some(&cursor), 5_000).await.unwrap();
            for event in &page.events {
                if let AgentEvent::TurnState { state: s, .. } = event {
                    state = *s;
                }
            }
            events.extend(page.events);
            cursor = page.cursor;
            if state != TurnState::Processing && !page.has_more {
                return (events, state, cursor);
            }
        }
        panic!("the turn did not settle; events: {events:#?}");
    }

    pub(crate) async fn resolve(
        &self,
        session: &str,
        action: &str,
        key: &str,
        revision: u64,
        result: ActionResult,
    ) -> Result<u64, intent_sdk::Error> {
        let body: ActionResolutionRequest = ActionResolutionRequest::builder()
            .revision(revision)
            .result(result)
            .try_into()
            .unwrap();
        self.client
            .resolve_action()
            .session_id(session)
            .action_id(action)
            .idempotency_key(key)
            .body(body)
            .send()
            .await
            .map(|r| r.into_inner().revision.get())
            .map_err(intent_sdk::Error::from)
    }
}

/// A chat start with `message` in `session`.
fn chat_request(message: &str, session: &str) -> ChatStartRequest {
    ChatStartRequest::builder()
        .message(message)
        .session_id(Some(session.parse().unwrap()))
        .try_into()
        .unwrap()
}

fn kinds(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            AgentEvent::TurnState { state, .. } => format!("turn_state:{state}"),
            other => serde_json::to_value(other).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned(),
        })
        .collect()
}

fn assert_contiguous(events: &[AgentEvent], first: u64) {
    let seqs: Vec<u64> = events.iter().map(AgentEvent::seq).collect();
    let expected: Vec<u64> = (first..first + seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "sequence numbers are contiguous");
}

pub(crate) fn code(error: &intent_sdk::Error) -> (u16, String) {
    (
        error.status().unwrap_or_default(),
        error.code().unwrap_or_default().to_owned(),
    )
}

pub(crate) fn pending_action(events: &[AgentEvent]) -> ActionRequest {
    events
        .iter()
        .rev()
        .find_map(|e| match e {
            AgentEvent::Action { action, .. } => Some(action.clone()),
            _ => None,
        })
        .expect("an action event")
}

pub(crate) fn approve(action: &ActionRequest) -> ActionResult {
    ActionResult::Approved {
        digest: action.build.digest.to_string().parse().unwrap(),
    }
}

#[tokio::test]
async fn a_plain_intent_completes_with_one_durable_reply() {
    let agent = Agent::start().await;
    let started = agent.chat("hello there", None).await;
    assert_eq!(started.state, TurnState::Processing);
    let (events, state, _) = agent.settle(&started.session_id, &started.cursor).await;
    assert_eq!(state, TurnState::Complete);
    assert_eq!(
        kinds(&events),
        [
            "message",
            "turn_state:processing",
            "message",
            "turn_state:complete"
        ]
    );
    assert_contiguous(&events, 1);
    match &events[2] {
        AgentEvent::Message { text, .. } => assert!(text.contains("send"), "{text}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_transfer_awaits_approval_then_commits_and_completes() {
    let agent = Agent::start().await;
    let started = agent
        .chat(&format!("send 1.5 ETH to {RECIPIENT}"), None)
        .await;
    let session = &started.session_id;
    let (events, state, cursor) = agent.settle(session, &started.cursor).await;
    assert_eq!(state, TurnState::AwaitingAction, "{events:#?}");
    let action = pending_action(&events);
    assert_eq!(action.revision.get(), 1);
    let simulation = action.build.simulation.as_ref().unwrap();
    assert_eq!(simulation.status.to_string(), "passed");
    assert!(
        simulation
            .balance_changes
            .iter()
            .any(|c| c.amount == "1500000000000000000" && c.account.as_deref() == Some(RECIPIENT)),
        "{simulation:#?}"
    );

    // A start while the action is pending is refused.
    let busy = agent
        .client
        .start_chat()
        .body(chat_request("hello", session))
        .send()
        .await
        .map_err(intent_sdk::Error::from)
        .unwrap_err();
    assert_eq!(code(&busy), (409, "turn_in_progress".into()));

    let revision = agent
        .resolve(session, &action.action_id, "key-1", 1, approve(&action))
        .await
        .unwrap();
    assert_eq!(revision, 2);
    let (events, state, _) = agent.settle(session, &cursor).await;
    assert_eq!(state, TurnState::Complete, "{events:#?}");
    let kinds = kinds(&events);
    assert_eq!(kinds[..2], ["action_result", "turn_state:processing"]);
    assert!(kinds.contains(&"tool_result".to_owned()));
    let committed = events.iter().find_map(|e| match e {
        AgentEvent::ToolResult {
            name,
            output,
            is_error,
            ..
        } if name == "pipeline.evm.commit" => Some((output.clone(), *is_error)),
        _ => None,
    });
    let (output, is_error) = committed.expect("a commit tool result");
    assert!(!is_error, "{output}");
    assert_eq!(output["digest"], json!(action.build.digest.to_string()));
    assert_eq!(output["status"], "committed");
}

#[tokio::test]
async fn a_token_transfer_goes_through_the_erc20_operation() {
    let agent = Agent::start().await;
    let started = agent
        .chat(&format!("send 12.5 USDC to {RECIPIENT}"), None)
        .await;
    let (events, state, _) = agent.settle(&started.session_id, &started.cursor).await;
    assert_eq!(state, TurnState::AwaitingAction, "{events:#?}");
    let action = pending_action(&events);
    assert_eq!(action.title, format!("Send 12.5 USDC to {RECIPIENT}"));
    let simulation = action.build.simulation.as_ref().unwrap();
    assert!(
        simulation
            .balance_changes
            .iter()
            .any(|c| c.amount == "12500000" && c.symbol.as_deref() == Some("USDC")),
        "{simulation:#?}"
    );
}

#[tokio::test]
async fn a_rejected_action_completes_without_a_commit() {
    let agent = Agent::start().await;
    let started = agent
        .chat(&format!("send 1 ETH to {RECIPIENT}"), None)
        .await;
    let session = &started.session_id;
    let (events, _, cursor) = agent.settle(session, &started.cursor).await;
    let action = pending_action(&events);
    let rejected = ActionResult::Rejected {
        digest: action.build.digest.to_string().parse().unwrap(),
        reason: Some("changed my mind".parse().unwrap()),
    };
    agent
        .resolve(session, &action.action_id, "key-r", 1, rejected)
        .await
        .unwrap();
    let (events, state, _) = agent.settle(session, &cursor).await;
    assert_eq!(state, TurnState::Complete);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AgentEvent::ToolCall { .. }))
    );
}

#[tokio::test]
async fn a_failing_simulation_fails_the_turn_with_an_error_event() {
    let agent = Agent::start().await;
    let started = agent
        .chat(&format!("send 99999999 ETH to {RECIPIENT}"), None)
        .await;
    let (events, state, _) = agent.settle(&started.session_id, &started.cursor).await;
    assert_eq!(state, TurnState::Failed, "{events:#?}");
    let kinds = kinds(&events);
    assert_eq!(kinds[kinds.len() - 2..], ["error", "turn_state:failed"]);
}

/// Spends 0.3 s: a 300 ms long-poll after the interrupt checks that nothing follows the
/// terminal state.
#[tokio::test]
async fn interrupt_ends_a_processing_turn_for_good() {
    let agent = Agent::start().await;
    let started = agent.chat("wait 10000", None).await;
    let session: intent_models::SessionId = started.session_id.parse().unwrap();
    // Let the runtime begin: its tool call shows up in the log.
    let page = agent
        .page(&started.session_id, Some(&started.cursor), 5_000)
        .await
        .unwrap();
    assert!(!page.events.is_empty());

    let status = agent
        .client
        .interrupt_turn()
        .session_id(session.clone())
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.state, TurnState::Interrupted);
    assert_eq!(status.turn_id, started.turn_id);
    let again = agent
        .client
        .interrupt_turn()
        .session_id(session.clone())
        .send()
        .await
        .map_err(intent_sdk::Error::from)
        .unwrap_err();
    assert_eq!(code(&again), (409, "turn_not_active".into()));

    let (events, state, cursor) = agent.settle(&started.session_id, &started.cursor).await;
    assert_eq!(state, TurnState::Interrupted);
    assert_eq!(kinds(&events).last().unwrap(), "turn_state:interrupted");
    // The terminal state stays: nothing follows it.
    let after = agent
        .page(&started.session_id, Some(&cursor), 300)
        .await
        .unwrap();
    assert!(after.events.is_empty(), "{:#?}", after.events);

    // The session takes a new turn.
    let next = agent.chat("hello", Some(&started.session_id)).await;
    let (_, state, _) = agent.settle(&started.session_id, &next.cursor).await;
    assert_eq!(state, TurnState::Complete);
}

#[tokio::test]
async fn a_second_start_while_processing_is_a_conflict() {
    let agent = Agent::start().await;
    let started = agent.chat("wait 2000", None).await;
    let error = agent
        .client
        .start_chat()
        .body(chat_request("hello", &started.session_id))
        .send()
        .await
        .map_err(intent_sdk::Error::from)
        .unwrap_err();
    assert_eq!(code(&error), (409, "turn_in_progress".into()));
}

/// Needs about 0.7 s: a 400 ms long-poll must run out empty, and a 300 ms pause lets the second
/// long-poll start waiting before the append that wakes it.
#[tokio::test]
async fn a_waiting_long_poll_returns_as_soon_as_an_event_is_appended() {
    let agent = Agent::start().await;
    let first = agent.chat("hello", None).await;
    let session = first.session_id.clone();
    let (_, _, cursor) = agent.settle(&session, &first.cursor).await;

    // Nothing happens: the wait runs out with an empty page at the same position.
    let began = Instant::now();
    let idle = agent.page(&session, Some(&cursor), 400).await.unwrap();
    assert!(began.elapsed() >= Duration::from_millis(400));
    assert!(idle.events.is_empty() && !idle.has_more);
    let same = agent.page(&session, Some(&idle.cursor), 0).await.unwrap();
    assert!(same.events.is_empty());

    // An append wakes a 20-second wait at once.
    let poller = {
        let client = agent.client.clone();
        let (session, cursor) = (session.clone(), cursor.clone());
        tokio::spawn(async move {
            let began = Instant::now();
            let page = client
                .get_chat_events()
                .session_id(session.as_str())
                .cursor(cursor.as_str())
                .wait(20_000)
                .send()
                .await
                .unwrap()
                .into_inner();
            (page, began.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    agent.chat("hello again", Some(&session)).await;
    let (page, waited) = poller.await.unwrap();
    assert!(!page.events.is_empty());
    assert!(waited < Duration::from_secs(5), "woke after {waited:?}");
}

#[tokio::test]
async fn pages_follow_cursors_without_gaps_or_duplicates() {
    let agent = Agent::start().await;
    let mut session = None;
    for _ in 0..3 {
        let started = agent.chat("hello", session.as_deref()).await;
        agent.settle(&started.session_id, &started.cursor).await;
        session = Some(started.session_id);
    }
    let session = session.unwrap();
    let whole = agent.page(&session, None, 0).await.unwrap();
    assert_contiguous(&whole.events, 1);
    assert!(!whole.has_more);

    let mut cursor: Option<String> = None;
    let mut seen = Vec::new();
    loop {
        let mut request = agent
            .client
            .get_chat_events()
            .session_id(session.as_str())
            .limit(5u64);
        if let Some(cursor) = &cursor {
            request = request.cursor(cursor.as_str());
        }
        let page = request.send().await.unwrap().into_inner();
        assert!(page.events.len() <= 5);
        seen.extend(page.events);
        cursor = Some(page.cursor);
        if !page.has_more {
            break;
        }
    }
    assert_eq!(seen, whole.events);
}

/// Needs 2.1 s: cursors live 1 s here, counted in whole seconds, so the first one is surely
/// expired 2 s after it was issued, when the check is that it gets 410.
#[tokio::test]
async fn bad_cursors_are_400_expired_ones_410_and_reconcile_works() {
    let agent = Agent::with(
        TestServer::start_with(|config| config.cursor_ttl(Duration::from_secs(1))).await,
    );
    let first = agent.chat("hello", None).await;
    let (_, _, cursor) = agent.settle(&first.session_id, &first.cursor).await;
    let other = agent.chat("hello", None).await;

    for bad in ["garbage", &cursor[..cursor.len() - 2], &other.cursor] {
        let error = agent
            .page(&first.session_id, Some(bad), 0)
            .await
            .unwrap_err();
        assert_eq!(code(&error), (400, "invalid_cursor".into()), "{bad}");
        assert!(matches!(error, intent_sdk::Error::InvalidCursor(_)));
    }

    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let error = agent
        .page(&first.session_id, Some(&cursor), 0)
        .await
        .unwrap_err();
    assert_eq!(code(&error), (410, "cursor_expired".into()));
    let reconciled = agent.page(&first.session_id, None, 0).await.unwrap();
    assert_contiguous(&reconciled.events, 1);
    assert_eq!(reconciled.events.len(), 4);
}

/// Needs 1.2 s: the log keeps events 1 s here, so the second turn's append prunes the first
/// turn's events, and the check is that a cursor among them is then 410.
#[tokio::test]
async fn a_cursor_older_than_the_retained_log_is_410() {
    let agent = Agent::with(
        TestServer::start_with(|config| config.event_retention(Duration::from_secs(1))).await,
    );
    let first = agent.chat("hello", None).await;
    let session = first.session_id.clone();
    agent.settle(&session, &first.cursor).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let second = agent.chat("hello", Some(&session)).await;
    agent.settle(&session, &second.cursor).await;

    let error = agent
        .page(&session, Some(&first.cursor), 0)
        .await
        .unwrap_err();
    assert_eq!(code(&error), (410, "cursor_expired".into()));
    let reconciled = agent.page(&session, None, 0).await.unwrap();
    let first_seq = reconciled.events[0].seq();
    assert!(first_seq > 4, "the first turn's events left the log");
    assert_contiguous(&reconciled.events, first_seq);
}

#[tokio::test]
async fn wait_and_limit_are_bounded() {
    let agent = Agent::start().await;
    let started = agent.chat("hello", None).await;
    for query in ["wait=30001", "wait=-1", "limit=0", "limit=501", "wait=soon"] {
        let token = agent.server.token("alice", Resource::Agent, SCOPES);
        let response = agent
            .server
            .get(
                &format!("/v1/agent/chat/{}?{query}", started.session_id),
                &token,
            )
            .await;
        assert_eq!(response.status(), 400, "{query}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_parameter", "{query}");
    }
    let page = agent.page(&started.session_id, None, 30_000).await;
    assert!(page.is_ok());
}

#[tokio::test]
async fn sessions_are_read_updated_and_deleted_by_their_owner_only() {
    let agent = Agent::start().await;
    let started = agent.chat("hello", None).await;
    let id: intent_models::SessionId = started.session_id.parse().unwrap();
    let session = agent
        .client
        .get_session()
        .session_id(id.clone())
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(session.title, "hello");
    assert!(!session.archived);

    let update = |title: Option<&str>, archived: Option<bool>| -> SessionUpdate {
        SessionUpdate::builder()
            .title(title.map(|t| t.parse().unwrap()))
            .archived(archived)
            .try_into()
            .unwrap()
    };
    let sid = &started.session_id;
    let renamed = agent
        .client
        .update_session()
        .session_id(sid.as_str())
        .body(update(Some("Renamed"), None))
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (renamed.title.as_str(), renamed.archived),
        ("Renamed", false)
    );
    let archived = agent
        .client
        .update_session()
        .session_id(sid.as_str())
        .body(update(None, Some(true)))
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (archived.title.as_str(), archived.archived),
        ("Renamed", true)
    );
    let empty = agent
        .client
        .update_session()
        .session_id(sid.as_str())
        .body(update(None, None))
        .send()
        .await
        .map_err(intent_sdk::Error::from)
        .unwrap_err();
    assert_eq!(code(&empty).0, 400);

    // Another account sees none of it.
    let bob = agent.server.token("bob", Resource::Agent, SCOPES);
    for path in [
        format!("/v1/agent/sessions/{}", started.session_id),
        format!("/v1/agent/chat/{}", started.session_id),
        format!("/v1/agent/chat/{}/stream", started.session_id),
    ] {
        let response = agent.server.get(&path, &bob).await;
        assert_eq!(response.status(), 404, "{path}");
    }
    let bob_client = agent.server.client(&bob);
    let error = bob_client
        .start_chat()
        .body(chat_request("hello", &started.session_id))
        .send()
        .await
        .map_err(intent_sdk::Error::from)
        .unwrap_err();
    assert_eq!(code(&error).0, 404);
    let error = bob_client
        .delete_session()
        .session_id(started.session_id.as_str())
        .send()
        .await
        .map_err(intent_sdk::Error::from)
        .unwrap_err();
    assert_eq!(code(&error).0, 404);

    // Too long an id is 400, before any lookup.
    let token = agent.server.token("alice", Resource::Agent, SCOPES);
    let long = "s".repeat(161);
    let response = agent
        .server
        .get(&format!("/v1/agent/sessions/{long}"), &token)
        .await;
    assert_eq!(response.status(), 400);

    agent
        .client
        .delete_session()
        .session_id(started.session_id.as_str())
        .send()
        .await
        .unwrap();
    let gone = agent
        .client
        .get_session()
        .session_id(id)
        .send()
        .await
        .map_err(intent_sdk::Error::from)
        .unwrap_err();
    assert_eq!(code(&gone).0, 404);
}

/// A session whose turn awaits the approval of a transfer.
pub(crate) async fn awaiting(agent: &Agent) -> (String, ActionRequest, String) {
    let started = agent
        .chat(&format!("send 1 ETH to {RECIPIENT}"), None)
        .await;
    let (events, state, cursor) = agent.settle(&started.session_id, &started.cursor).await;
    assert_eq!(state, TurnState::AwaitingAction);
    (started.session_id, pending_action(&events), cursor)
}

#[tokio::test]
async fn the_same_key_and_body_replay_the_first_answer_once() {
    let agent = Agent::start().await;
    let (session, action, cursor) = awaiting(&agent).await;
    let first = agent
        .resolve(&session, &action.action_id, "k", 1, approve(&action))
        .await
        .unwrap();
    let replay = agent
        .resolve(&session, &action.action_id, "k", 1, approve(&action))
        .await
        .unwrap();
    assert_eq!((first, replay), (2, 2));
    let (events, state, _) = agent.settle(&session, &cursor).await;
    assert_eq!(state, TurnState::Complete);
    let results = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ActionResult { .. }))
        .count();
    assert_eq!(results, 1, "one effect for two requests");
}

#[tokio::test]
async fn idempotency_conflicts_and_stale_revisions_are_refused() {
    let agent = Agent::start().await;
    let (session, action, _) = awaiting(&agent).await;
    let key_body_mismatch = async |key: &str, revision: u64, result: ActionResult| {
        agent
            .resolve(&session, &action.action_id, key, revision, result)
            .await
            .unwrap_err()
    };
    // The result must name the reviewed Build.
    let wrong_digest = ActionResult::Approved {
        digest: format!("sha256:{}", "0".repeat(64)).parse().unwrap(),
    };
    let error = key_body_mismatch("k-digest", 1, wrong_digest).await;
    assert_eq!(code(&error), (400, "validation_failed".into()));
    // A stale revision is a conflict.
    let error = key_body_mismatch("k-stale", 7, approve(&action)).await;
    assert_eq!(code(&error), (409, "revision_conflict".into()));
    // The same key with another body.
    let error = key_body_mismatch("k-digest", 1, approve(&action)).await;
    assert_eq!(code(&error), (422, "idempotency_key_reused".into()));
    // A duplicate while the first is in flight.
    let body: ActionResolutionRequest = ActionResolutionRequest::builder()
        .revision(1u64)
        .result(approve(&action))
        .try_into()
        .unwrap();
    let hash = intent_server::agent::resolution_hash(&session, &action.action_id, &body);
    agent
        .server
        .state()
        .store()
        .begin_idempotent(
            &AccountId::verified("alice"),
            "k-flight",
            &hash,
            intent_server::now(),
            0,
        )
        .await
        .unwrap();
    let error = key_body_mismatch("k-flight", 1, approve(&action)).await;
    assert_eq!(code(&error), (409, "idempotency_in_flight".into()));
    // After all that the action is still pending and resolves once.
    let revision = agent
        .resolve(&session, &action.action_id, "k-ok", 1, approve(&action))
        .await
        .unwrap();
    assert_eq!(revision, 2);
    let error = key_body_mismatch("k-late", 2, approve(&action)).await;
    assert_eq!(code(&error), (409, "action_not_pending".into()));
}

#[tokio::test]
async fn caller_written_transaction_fields_and_missing_keys_are_refused() {
    let agent = Agent::start().await;
    let (session, action, _) = awaiting(&agent).await;
    let token = agent.server.token("alice", Resource::Agent, SCOPES);
    let url = format!(
        "{}/v1/agent/sessions/{session}/actions/{}/resolve",
        agent.server.base_url(),
        *action.action_id
    );
    let http = reqwest::Client::new();
    let digest = action.build.digest.to_string();
    let cases = [
        (
            Some("k1"),
            json!({ "revision": 1, "result": { "outcome": "approved", "digest": digest, "to": RECIPIENT } }),
        ),
        (
            Some("k2"),
            json!({ "revision": 1, "result": { "outcome": "approved", "digest": digest }, "actions": [] }),
        ),
        (
            None,
            json!({ "revision": 1, "result": { "outcome": "approved", "digest": digest } }),
        ),
    ];
    for (key, body) in cases {
        let mut request = http.post(&url).bearer_auth(&token).json(&body);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 400, "{body}");
    }
    // Too long an action id is 400, before any lookup (an unknown one is 404).
    let valid = json!({ "revision": 1, "result": { "outcome": "approved", "digest": digest } });
    for (action_id, status, code) in [
        ("a".repeat(161), 400, "invalid_parameter"),
        ("a".repeat(160), 404, "not_found"),
    ] {
        let url = format!(
            "{}/v1/agent/sessions/{session}/actions/{action_id}/resolve",
            agent.server.base_url()
        );
        let response = http
            .post(&url)
            .bearer_auth(&token)
            .header("Idempotency-Key", format!("k-{status}"))
            .json(&valid)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status);
        let envelope: serde_json::Value = response.json().await.unwrap();
        assert_eq!(envelope["error"]["code"], code, "{envelope}");
    }
    // A token without the resolve scope is 403.
    let narrow = agent
        .server
        .token("alice", Resource::Agent, &["agent:read", "agent:write"]);
    let response = http
        .post(&url)
        .bearer_auth(&narrow)
        .header("Idempotency-Key", "k3")
        .json(&json!({ "revision": 1, "result": { "outcome": "approved", "digest": digest } }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
}

#[tokio::test]
async fn empty_path_parameters_are_guarded_and_refused() {
    let server = TestServer::start().await;
    let token = server.token("alice", Resource::Agent, SCOPES);
    // An empty id between two slashes is a bad parameter; a trailing one names no resource.
    for (path, status) in [
        ("/v1/agent/chat//stream", 400),
        ("/v1/agent/sessions/", 404),
        ("/v1/agent/chat/", 404),
    ] {
        let anonymous = reqwest::get(format!("{}{path}", server.base_url()))
            .await
            .unwrap();
        assert_eq!(anonymous.status(), 401, "{path}");
        let response = server.get(path, &token).await;
        assert_eq!(response.status(), status, "{path}");
    }
}
