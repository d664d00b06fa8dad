//! The SDK's Agent handle against the reference server: a turn through an action, and a log
//! followed as a stream across cursor errors.

use std::time::Duration;

use futures_util::StreamExt;
use intent_models::{AgentEvent, TurnState};
use intent_sdk::agent::{Decision, LogItem};
use intent_tests::TestServer;

#[tokio::test]
async fn a_turn_runs_through_its_action_to_completion() {
    let server = TestServer::start().await;
    let intent = server.intent("alice");
    let agent = intent.agent();
    let outcome = agent
        .run_turn(
            "send 0.25 ETH to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
            None,
        )
        .await
        .unwrap();
    assert_eq!(outcome.state, TurnState::AwaitingAction);
    let action = outcome.action.clone().expect("the pending action");
    let resolution = agent
        .resolve(&outcome.session_id, &action, Decision::Approve)
        .await
        .unwrap();
    assert_eq!(resolution.revision.get(), 2);
    let done = agent
        .wait_turn(&outcome.session_id, &outcome.turn_id, &outcome.cursor)
        .await
        .unwrap();
    assert_eq!(done.state, TurnState::Complete);
    assert!(done.action.is_none());

    // A plain turn in the same session.
    let plain = agent
        .run_turn("hello", Some(&outcome.session_id))
        .await
        .unwrap();
    assert_eq!(plain.state, TurnState::Complete);
}

/// Each handle owns what it needs: it moves into a task of its own, and the `Intent` it came
/// from may be gone by then.
#[tokio::test]
async fn a_handle_moves_into_a_spawned_task() {
    fn owned<T: Clone + Send + Sync + 'static>(handle: T) -> T {
        handle
    }
    let server = TestServer::start().await;
    let intent = server.intent("alice");
    let agent = owned(intent.agent());
    let (_, _) = (owned(intent.pipeline()), owned(intent.account()));
    drop(intent);
    let outcome = tokio::spawn(async move { agent.run_turn("hello", None).await })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.state, TurnState::Complete);
}

async fn take(
    stream: &mut (impl futures_util::Stream<Item = Result<LogItem, intent_sdk::Error>> + Unpin),
    n: usize,
) -> Vec<LogItem> {
    let mut items = Vec::new();
    while items.len() < n {
        let item = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("an item within 10 s")
            .expect("the stream goes on");
        items.push(item.unwrap());
    }
    items
}

fn seqs(items: &[LogItem]) -> Vec<Option<u64>> {
    items
        .iter()
        .map(|item| match item {
            LogItem::Event { event, .. } => Some(event.seq()),
            LogItem::Restart => None,
            LogItem::Snapshot(_) => panic!("long-poll pages carry no snapshot"),
        })
        .collect()
}

/// Needs 2.1 s: cursors live 1 s here, counted in whole seconds, so the first turn's cursor is
/// surely expired 2 s on, when the check is that a follower from it restarts.
#[tokio::test]
async fn the_log_stream_delivers_each_event_once_and_restarts_on_cursor_errors() {
    let server = TestServer::start_with(|config| config.cursor_ttl(Duration::from_secs(1))).await;
    let intent = server.intent("alice");
    let agent = intent.agent();
    let first = agent.run_turn("hello", None).await.unwrap();
    let session = first.session_id.clone();

    let mut stream = agent.follow(&session, None);
    let items = take(&mut stream, 4).await;
    assert_eq!(seqs(&items), [Some(1), Some(2), Some(3), Some(4)]);
    agent.run_turn("hello", Some(&session)).await.unwrap();
    let items = take(&mut stream, 4).await;
    assert_eq!(seqs(&items), [Some(5), Some(6), Some(7), Some(8)]);
    let LogItem::Event { event: last, .. } = &items[3] else {
        panic!("an event")
    };
    assert!(matches!(
        **last,
        AgentEvent::TurnState {
            state: TurnState::Complete,
            ..
        }
    ));

    // A cursor that does not open: restart, then the whole retained log.
    let mut garbage = agent.follow(&session, Some("garbage"));
    let items = take(&mut garbage, 9).await;
    assert_eq!(seqs(&items)[..2], [None, Some(1)]);
    assert_eq!(seqs(&items)[8], Some(8));

    // An expired one: the same.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let mut expired = agent.follow(&session, Some(&first.cursor));
    let items = take(&mut expired, 2).await;
    assert_eq!(seqs(&items), [None, Some(1)]);
}

/// Needs 2.1 s: cursors live 1 s here, counted in whole seconds, so the first turn's cursor is
/// surely expired 2 s on, when the check is that a follower from it restarts.
#[tokio::test]
async fn the_sse_follower_delivers_events_in_order_and_restarts() {
    let server = TestServer::start_with(|config| config.cursor_ttl(Duration::from_secs(1))).await;
    let intent = server.intent("alice");
    let agent = intent.agent();
    let first = agent.run_turn("hello", None).await.unwrap();
    let session = first.session_id.clone();

    let mut stream = agent.follow_sse(&session, None);
    agent.run_turn("hello", Some(&session)).await.unwrap();
    let mut seqs = Vec::new();
    while seqs.len() < 8 {
        let item = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("an item within 10 s")
            .expect("the stream goes on")
            .unwrap();
        match item {
            LogItem::Event { event, .. } => seqs.push(event.seq()),
            // Transient: whether one arrives depends on timing.
            LogItem::Snapshot(_) => {}
            LogItem::Restart => panic!("no restart on a fresh stream"),
        }
    }
    assert_eq!(seqs, (1..=8).collect::<Vec<_>>());

    for cursor in ["garbage".to_owned(), first.cursor] {
        if cursor != "garbage" {
            tokio::time::sleep(Duration::from_millis(2_100)).await;
        }
        let mut stream = agent.follow_sse(&session, Some(&cursor));
        let mut items = Vec::new();
        while items.len() < 2 {
            let item = tokio::time::timeout(Duration::from_secs(10), stream.next())
                .await
                .expect("an item within 10 s")
                .expect("the stream goes on")
                .unwrap();
            if !matches!(item, LogItem::Snapshot(_)) {
                items.push(item);
            }
        }
        assert_eq!(items[0], LogItem::Restart);
        assert!(matches!(&items[1], LogItem::Event { event: e, .. } if e.seq() == 1));
    }
}

#[tokio::test]
async fn a_follower_resumes_from_a_stored_position_after_the_event_it_names() {
    let server = TestServer::start().await;
    let intent = server.intent("alice");
    let agent = intent.agent();
    let first = agent.run_turn("hello", None).await.unwrap();
    let session = first.session_id.clone();
    agent.run_turn("hello again", Some(&session)).await.unwrap();
    let all = take(&mut agent.follow(&session, None), 8).await;
    // The position of an event in the middle of a page, kept as text across a "restart".
    let LogItem::Event { position, .. } = &all[1] else {
        panic!("an event")
    };
    let stored = position.to_string();
    assert_eq!(position.seq(), 2);
    for sse in [false, true] {
        let from: intent_sdk::agent::Position = stored.parse().unwrap();
        let mut resumed = if sse {
            agent.follow_sse_from(&session, from).left_stream()
        } else {
            agent.follow_from(&session, from).right_stream()
        };
        let items = take(&mut resumed, 6).await;
        assert_eq!(
            seqs(&items),
            [Some(3), Some(4), Some(5), Some(6), Some(7), Some(8)],
            "sse: {sse}"
        );
    }
}

#[tokio::test]
async fn following_a_turn_ends_when_it_settles_and_reads_it_to_its_end_after_the_action() {
    let server = TestServer::start().await;
    let intent = server.intent("alice");
    let agent = intent.agent();
    let earlier = agent.run_turn("hello", None).await.unwrap();
    let request: intent_models::ChatStartRequest = intent_models::ChatStartRequest::builder()
        .message("send 0.1 ETH to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
        .session_id(Some(earlier.session_id.parse().unwrap()))
        .try_into()
        .unwrap();
    let started = agent.start(&request).await.unwrap();
    let (session, turn) = (&started.session_id, &started.turn_id);

    // From the log's start: the earlier turn's events are left out, and the stream ends at
    // `awaiting_action` with the action before it.
    let read = |stream: intent_sdk::agent::LogStream| async move {
        let items: Vec<Result<LogItem, intent_sdk::Error>> =
            tokio::time::timeout(Duration::from_secs(20), stream.collect())
                .await
                .expect("the stream ends once the turn settles");
        items.into_iter().map(Result::unwrap).collect::<Vec<_>>()
    };
    let first = read(agent.follow_turn(session, turn, None)).await;
    let events: Vec<&AgentEvent> = first
        .iter()
        .filter_map(|item| match item {
            LogItem::Event { event, .. } => Some(event.as_ref()),
            _ => None,
        })
        .collect();
    assert!(
        events.iter().all(|e| e.turn_id() == turn.as_str()),
        "{events:#?}"
    );
    let kinds: Vec<String> = events.iter().map(|e| e.to_string()).collect();
    assert!(
        kinds
            .last()
            .is_some_and(|k| k.ends_with("turn_state: awaiting_action")),
        "{kinds:#?}"
    );
    let action = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::Action { action, .. } => Some(action.clone()),
            _ => None,
        })
        .expect("the action on the way");
    let Some(LogItem::Event { position, .. }) = first.last() else {
        panic!("events, not {first:?}");
    };

    // Resolved, the turn is read on from the last event to its end.
    agent
        .resolve(session, &action, Decision::Approve)
        .await
        .unwrap();
    let rest = read(agent.follow_turn_from(session, turn, position.clone())).await;
    let last = rest.iter().rev().find_map(|item| match item {
        LogItem::Event { event, .. } => Some(event.as_ref()),
        _ => None,
    });
    assert!(
        matches!(
            last,
            Some(AgentEvent::TurnState {
                state: TurnState::Complete,
                ..
            })
        ),
        "{rest:#?}"
    );
}

/// An app that saves its position after each event, restarted at each point of a turn: before
/// the action (mid-turn), after the action (unresolved), and after the turn ended. Each resumed
/// follow reaches the turn's end, or hands out what the app must act on, without waiting on a
/// turn that already settled.
#[tokio::test]
async fn an_app_restarted_at_each_point_of_a_turn_reaches_its_end_without_hanging() {
    let server = TestServer::start().await;
    let intent = server.intent("alice");
    let agent = intent.agent();
    let request: intent_models::ChatStartRequest = intent_models::ChatStartRequest::builder()
        .message("send 0.1 ETH to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
        .try_into()
        .unwrap();
    let started = agent.start(&request).await.unwrap();
    let (session, turn) = (&started.session_id, &started.turn_id);
    let within = Duration::from_secs(10);
    let read = |stream: intent_sdk::agent::LogStream| async move {
        let items: Vec<Result<LogItem, intent_sdk::Error>> =
            tokio::time::timeout(within, stream.collect())
                .await
                .expect("a resumed follow ends");
        let events: Vec<(AgentEvent, intent_sdk::agent::Position)> = items
            .into_iter()
            .filter_map(|item| match item.unwrap() {
                LogItem::Event { event, position } => Some((*event, position)),
                _ => None,
            })
            .collect();
        events
    };
    let first = read(agent.follow_turn(session, turn, Some(&started.cursor))).await;
    let at_action = first
        .iter()
        .position(|(event, _)| matches!(event, AgentEvent::Action { .. }))
        .expect("the turn raises an action");
    let (action_event, after_action) = first[at_action].clone();
    let AgentEvent::Action { action, .. } = &action_event else {
        unreachable!()
    };

    // Restarted before the action (after the first event): read on, the action comes.
    let (_, early) = first[0].clone();
    let resumed = read(agent.follow_turn_from(session, turn, early)).await;
    assert!(
        resumed.iter().any(|(event, _)| *event == action_event),
        "{resumed:#?}"
    );

    // Restarted after the action, before resolving it: the action again, and the end.
    let again = read(agent.follow_turn_from(session, turn, after_action.clone())).await;
    assert_eq!(
        again.iter().map(|(e, _)| e).collect::<Vec<_>>(),
        [&action_event]
    );
    let waited = agent
        .wait_turn(session, turn, &started.cursor)
        .await
        .unwrap();
    assert_eq!(
        (waited.state, waited.action.as_ref()),
        (TurnState::AwaitingAction, Some(action))
    );

    // Resolved, then restarted from the saved position: read to the turn's end.
    agent
        .resolve(session, action, Decision::Approve)
        .await
        .unwrap();
    let rest = read(agent.follow_turn_from(session, turn, after_action)).await;
    let (last, ended) = rest.last().cloned().expect("the rest of the turn");
    assert!(
        matches!(
            last,
            AgentEvent::TurnState {
                state: TurnState::Complete,
                ..
            }
        ),
        "{rest:#?}"
    );

    // Restarted after the turn ended: the follow and the wait end without waiting on it (the
    // client's turn deadline is 5 minutes).
    assert!(
        read(agent.follow_turn_from(session, turn, ended.clone()))
            .await
            .is_empty()
    );
    let ended = ended.to_string();
    let cursor = ended.split_once(':').expect("seq:cursor").1;
    let wait = agent.wait_turn(session, turn, cursor);
    let done = tokio::time::timeout(within, wait)
        .await
        .expect("the wait ends")
        .unwrap();
    assert_eq!(done.state, TurnState::Complete);
    assert_eq!(
        agent.turn_state(session, turn).await.unwrap(),
        Some(TurnState::Complete)
    );
    // The whole log, read once: each event once, in order.
    let log = agent.read_log(session).await.unwrap();
    let seqs: Vec<u64> = log.iter().map(AgentEvent::seq).collect();
    assert_eq!(seqs, (1..=log.len() as u64).collect::<Vec<_>>());
}

#[tokio::test]
async fn an_error_names_the_request_the_server_logged_and_a_bad_input_converts_with_a_question_mark()
 {
    let server = TestServer::start().await;
    let intent = server.intent("alice");
    let error = intent.agent().session("ses_absent").await.unwrap_err();
    let id = error
        .request_id()
        .expect("the server names every request")
        .to_owned();
    assert!(id.starts_with("req_"), "{id}");
    assert!(error.to_string().contains(&id), "{error}");

    // The server keeps the id a request brings, and answers with it.
    let answered = reqwest::Client::new()
        .get(format!(
            "{}/v1/agent/sessions/ses_absent",
            server.base_url()
        ))
        .header("x-request-id", "req_from_the_client")
        .send()
        .await
        .unwrap();
    assert_eq!(answered.headers()["x-request-id"], "req_from_the_client");

    fn message(text: &str) -> intent_sdk::error::Result<intent_models::ChatStartRequestMessage> {
        Ok(text.parse()?)
    }
    assert!(message("hi").is_ok());
    assert!(matches!(
        message(""),
        Err(intent_sdk::Error::InvalidInput(_))
    ));
}

/// A log of several pages, followed from its start against the reference server (which writes
/// a page's cursor first, so the follower asks for each next page while it decodes one): every
/// event once, in order, as a single read of the whole log gives them.
#[tokio::test]
async fn a_log_of_several_pages_is_followed_each_event_once_in_order() {
    let server = TestServer::start().await;
    let intent = server.intent("alice");
    let agent = intent.agent();
    let session = agent.run_turn("hello", None).await.unwrap().session_id;
    // Pages hold 100 events unless asked otherwise: more than two pages' worth.
    let per_turn = agent.read_log(&session).await.unwrap().len();
    for _ in 0..250 / per_turn {
        agent.run_turn("hello", Some(&session)).await.unwrap();
    }
    let logged = agent.read_log(&session).await.unwrap();
    assert!(logged.len() > 250, "{} events", logged.len());
    let mut stream = Box::pin(agent.follow(&session, None));
    let followed = seqs(&take(&mut stream, logged.len()).await);
    let read: Vec<Option<u64>> = logged.iter().map(|event| Some(event.seq())).collect();
    assert_eq!(followed, read);
}
