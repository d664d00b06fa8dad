//! Two reference-server instances on one PostgreSQL database behave as one deployment: cursors,
//! wake-ups, SSE resumption, sequence numbers, idempotency keys, refresh tokens and devnet
//! commits hold across them; and an instance whose database goes away answers 503 and recovers
//! when it returns. Every test here needs `INTENT_TEST_DATABASE_URL` and passes trivially
//! without it (the SQLite run has one instance by construction).

use std::time::{Duration, Instant};

use intent_models::{AgentEvent, PipelineLifecycleRequest, PipelineLifecycleResponse, TurnState};
use intent_server::auth::resource::Resource;
use intent_server::ids::AccountId;
use intent_server::store::Meter;
use intent_tests::TestServer;
use serde_json::{Value, json};

use crate::agent::{Agent, approve, awaiting, code};

const SENDER: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
const RECIPIENT: &str = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

/// Instance A on a new database and instance B beside it; `None` on SQLite.
async fn pair() -> Option<(TestServer, TestServer)> {
    let a = TestServer::start().await;
    if a.database_url().is_none() {
        eprintln!("skipped: set INTENT_TEST_DATABASE_URL to run the two-instance tests");
        return None;
    }
    let b = a.peer_with(|config| config).await;
    Some((a, b))
}

#[tokio::test]
async fn a_cursor_from_one_instance_opens_on_the_other() {
    let Some((a, b)) = pair().await else { return };
    let (a, b) = (Agent::with(a), Agent::with(b));
    let started = a.chat("hello", None).await;
    let (events, state, cursor) = a.settle(&started.session_id, &started.cursor).await;
    assert_eq!(state, TurnState::Complete);
    let last = events.last().unwrap().seq();

    b.chat("hello again", Some(&started.session_id)).await;
    let (events, state, _) = b.settle(&started.session_id, &cursor).await;
    assert_eq!(state, TurnState::Complete);
    assert_eq!(
        events.first().unwrap().seq(),
        last + 1,
        "B resumes where A's cursor ends"
    );
}

/// B keeps a head of the session it serves. What A acknowledged is in B's page at once for a
/// client that brings A's cursor, and soon (A's notification) for any other reader; a change of
/// the session through A reaches B's reads too.
#[tokio::test]
async fn a_page_on_one_instance_holds_what_the_other_acknowledged() {
    let Some((a, b)) = pair().await else { return };
    let (a, b) = (Agent::with(a), Agent::with(b));
    let started = a.chat("hello", None).await;
    let session = started.session_id.to_string();
    a.settle(&session, &started.cursor).await;
    let held = b.page(&session, None, 0).await.unwrap().events.len();
    assert!(held > 0);
    for round in 0..5 {
        let next = a.chat("again", Some(&session)).await;
        let page = b.page(&session, Some(&next.cursor), 0).await.unwrap();
        assert!(
            matches!(page.events.first(), Some(AgentEvent::Message { text, .. }) if text == "again"),
            "round {round}: B's page starts with the message A acknowledged: {:?}",
            page.events
        );
        a.settle(&session, &next.cursor).await;
    }
    let everything = a.page(&session, None, 0).await.unwrap().events;
    assert!(everything.len() > held);
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.page(&session, None, 0).await.unwrap().events != everything {
        assert!(Instant::now() < deadline, "B's first page never caught up");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    async fn title(client: &intent_sdk::raw::Client, session: &str) -> String {
        let session = client.get_session().session_id(session).send().await;
        session.unwrap().into_inner().title
    }
    assert_ne!(title(&b.client, &session).await, "renamed");
    let update: intent_models::SessionUpdate = intent_models::SessionUpdate::builder()
        .title(Some("renamed".parse().unwrap()))
        .try_into()
        .unwrap();
    a.client
        .update_session()
        .session_id(session.as_str())
        .body(update)
        .send()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while title(&b.client, &session).await != "renamed" {
        assert!(Instant::now() < deadline, "B never read the new title");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_long_poll_on_one_instance_wakes_on_an_append_through_the_other() {
    let Some((a, b)) = pair().await else { return };
    let (a, b) = (Agent::with(a), Agent::with(b));
    let started = a.chat("hello", None).await;
    let (_, _, cursor) = a.settle(&started.session_id, &started.cursor).await;

    let session = started.session_id.clone();
    let waiting = tokio::spawn(async move {
        let page = b.page(&session, Some(&cursor), 20_000).await.unwrap();
        (page, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let appended_at = Instant::now();
    a.chat("wake up", Some(&started.session_id)).await;
    let (page, woke_at) = waiting.await.unwrap();
    assert!(!page.events.is_empty());
    let latency = woke_at.duration_since(appended_at);
    assert!(latency < Duration::from_secs(2), "woke after {latency:?}");
}

/// The SSE frames of a session's stream on one instance.
struct Frames {
    response: reqwest::Response,
    buffer: String,
}

impl Frames {
    /// `session`'s stream on `server`, resumed from `last_event_id` when given.
    async fn open(server: &TestServer, session: &str, last_event_id: Option<&str>) -> Self {
        let token = server.token("alice", Resource::Agent, &["agent:read"]);
        let mut request = reqwest::Client::new()
            .get(format!(
                "{}/v1/agent/chat/{session}/stream",
                server.base_url()
            ))
            .bearer_auth(token);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next frame's event name and data.
    async fn next(&mut self) -> (String, Value) {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let event = block
                    .lines()
                    .find_map(|line| line.strip_prefix("event: "))
                    .unwrap_or("message")
                    .to_owned();
                let data = block
                    .lines()
                    .filter_map(|line| line.strip_prefix("data: "))
                    .collect::<String>();
                // A block without data is a keep-alive comment.
                if !data.is_empty() {
                    return (event, serde_json::from_str(&data).unwrap());
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.response.chunk())
                .await
                .expect("a frame within 10 s")
                .unwrap()
                .expect("the stream stays open");
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// Whether the stream ends, with no frame after this, within `within`.
    async fn ends(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline.into(), self.response.chunk()).await {
                Ok(Ok(Some(chunk))) => self.buffer.push_str(std::str::from_utf8(&chunk).unwrap()),
                Ok(Ok(None)) => return true,
                Ok(Err(_)) | Err(_) => return false,
            }
        }
    }

    /// The data of the next frame named `event`.
    async fn next_named(&mut self, event: &str) -> Value {
        loop {
            let (name, data) = self.next().await;
            if name == event {
                return data;
            }
        }
    }
}

#[tokio::test]
async fn a_stream_resumes_on_the_other_instance_from_a_page_id() {
    let Some((a, b)) = pair().await else { return };
    let agent = Agent::with(a);
    let started = agent.chat("hello", None).await;
    let (events, _, cursor) = agent.settle(&started.session_id, &started.cursor).await;
    let last = events.last().unwrap().seq();
    agent.chat("hello again", Some(&started.session_id)).await;

    let mut frames = Frames::open(&b, &started.session_id, Some(&cursor)).await;
    let page = frames.next_named("page").await;
    assert_eq!(page["events"][0]["seq"], json!(last + 1));
}

#[tokio::test]
async fn a_stream_on_one_instance_shows_the_message_a_turn_on_the_other_is_writing() {
    let Some((a, b)) = pair().await else { return };
    let agent = Agent::with(a);
    let started = agent.chat("hello", None).await;
    agent.settle(&started.session_id, &started.cursor).await;
    let mut frames = Frames::open(&b, &started.session_id, None).await;
    // A stream without a cursor starts with a page: B follows the session from here.
    frames.next_named("page").await;

    let turn = agent.chat("hello again", Some(&started.session_id)).await;
    let snapshot = frames.next_named("message").await;
    assert_eq!(snapshot["turnId"], json!(turn.turn_id), "{snapshot}");
    assert!(!snapshot["text"].as_str().unwrap().is_empty(), "{snapshot}");
}

#[tokio::test]
async fn deleting_a_session_through_one_instance_ends_its_readers_on_the_other() {
    let Some((a, b)) = pair().await else { return };
    let (a, b) = (Agent::with(a), Agent::with(b));
    let started = a.chat("hello", None).await;
    let (_, _, cursor) = a.settle(&started.session_id, &started.cursor).await;
    let mut frames = Frames::open(&b.server, &started.session_id, None).await;
    frames.next_named("page").await;
    let session = started.session_id.clone();
    let waiting = tokio::spawn(async move { b.page(&session, Some(&cursor), 20_000).await });
    tokio::time::sleep(Duration::from_millis(300)).await;

    let deleted_at = Instant::now();
    a.client
        .delete_session()
        .session_id(started.session_id.as_str())
        .send()
        .await
        .unwrap();
    assert!(
        frames.ends(Duration::from_secs(5)).await,
        "the stream on B ends"
    );
    let error = waiting.await.unwrap().unwrap_err();
    assert_eq!(code(&error).0, 404, "the long-poll on B ends with 404");
    assert!(deleted_at.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn appends_through_both_instances_leave_no_gap_or_duplicate() {
    let Some((a, b)) = pair().await else { return };
    let (a, b) = (Agent::with(a), Agent::with(b));
    let started = a.chat("first", None).await;
    let session = started.session_id;
    a.settle(&session, &started.cursor).await;
    // Both instances start turns in the session at once, over and over: one of each pair
    // starts, the other is refused as busy, and every append gets the next seq.
    let mut turns = 1;
    for round in 0..8 {
        let (message_a, message_b) = (format!("a{round}"), format!("b{round}"));
        let (from_a, from_b) = tokio::join!(
            a.try_chat(&message_a, Some(&session)),
            b.try_chat(&message_b, Some(&session)),
        );
        for refused in [&from_a, &from_b]
            .into_iter()
            .filter_map(|r| r.as_ref().err())
        {
            assert_eq!(code(refused).0, 409, "{refused:?}");
        }
        assert!(
            from_a.is_ok() || from_b.is_ok(),
            "one start of round {round} succeeds"
        );
        turns += i64::from(from_a.is_ok()) + i64::from(from_b.is_ok());
        let deadline = Instant::now() + Duration::from_secs(20);
        let store = a.server.state().store();
        while store
            .active_turn(&session.parse().unwrap())
            .await
            .unwrap()
            .is_some()
        {
            assert!(Instant::now() < deadline, "the turn settles");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let mut seqs = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = b.page(&session, cursor.as_deref(), 0).await.unwrap();
        seqs.extend(page.events.iter().map(AgentEvent::seq));
        cursor = Some(page.cursor);
        if !page.has_more {
            break;
        }
    }
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected);
    assert!(
        seqs.len() >= 4 * 9,
        "nine turns of at least four events: {seqs:?}"
    );
    // Every started turn is metered once, a refused start not at all.
    let usage = b
        .server
        .state()
        .store()
        .usage(&AccountId::verified("alice"), 0, i64::MAX)
        .await;
    assert_eq!(usage.unwrap(), [(Meter::Turn, turns)]);
}

#[tokio::test]
async fn the_same_resolution_sent_to_both_instances_at_once_has_one_effect() {
    let Some((a, b)) = pair().await else { return };
    let (a, b) = (Agent::with(a), Agent::with(b));
    let (session, action, cursor) = awaiting(&a).await;
    let (through_a, through_b) = tokio::join!(
        a.resolve(&session, &action.action_id, "key", 1, approve(&action)),
        b.resolve(&session, &action.action_id, "key", 1, approve(&action)),
    );
    let answers: Vec<_> = [through_a, through_b]
        .into_iter()
        .map(|answer| answer.map_err(|error| code(&error)))
        .collect();
    // Each answer is the one resolution, or 409 while the other is in flight.
    for answer in &answers {
        assert!(
            matches!(answer, Ok(2)) || matches!(answer, Err((409, _))),
            "{answers:?}"
        );
    }
    let (events, state, _) = a.settle(&session, &cursor).await;
    assert_eq!(state, TurnState::Complete);
    let results = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ActionResult { .. }))
        .count();
    assert_eq!(results, 1, "one effect for two requests");
}

#[tokio::test]
async fn a_refresh_token_rotated_through_one_instance_cannot_be_replayed_through_the_other() {
    let Some((a, b)) = pair().await else { return };
    let (code, verifier) = crate::oauth::approved_code(&a, "account:apps:read").await;
    let (status, tokens) = crate::oauth::exchange(&b, &code, verifier.secret()).await;
    assert_eq!(
        status, 200,
        "a code issued by A is exchanged through B: {tokens}"
    );
    let first = tokens["refresh_token"].as_str().unwrap().to_owned();
    let (status, rotated) = crate::oauth::refresh(&a, &first, None).await;
    assert_eq!(status, 200);
    let (status, replay) = crate::oauth::refresh(&b, &first, None).await;
    assert_eq!(
        (status, replay["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    // The replay revoked the family: the rotated token is dead on both.
    let second = rotated["refresh_token"].as_str().unwrap();
    let (status, _) = crate::oauth::refresh(&a, second, None).await;
    assert_eq!(status, 400);
}

fn transfer(amount: &str) -> PipelineLifecycleRequest {
    serde_json::from_value(json!({
        "app": "evm-assets",
        "operations": [{
            "operation": "native-transfer",
            "input": { "chainId": 31337, "from": SENDER, "to": RECIPIENT, "amount": amount },
        }],
    }))
    .unwrap()
}

/// The status of `build`'s simulation.
fn simulated(build: &intent_models::PipelineBuild) -> String {
    build.simulation.as_ref().unwrap().status.to_string()
}

#[tokio::test]
async fn a_build_commits_once_whichever_instance_gets_it_and_changes_what_the_other_simulates() {
    let Some((a, b)) = pair().await else { return };
    let token = a.token("alice", Resource::Pipeline, &["pipeline:execute"]);
    let (client_a, client_b) = (a.client(&token), b.client(&token));
    let build = |client: intent_sdk::raw::Client| async move {
        match client
            .evm_build()
            .body(transfer("9000"))
            .send()
            .await
            .unwrap()
            .into_inner()
        {
            PipelineLifecycleResponse::Build(build) => build,
            other => panic!("a Build, not {other:?}"),
        }
    };
    // The sender holds 10,000 ETH at genesis: one transfer of 9,000 passes, two cannot.
    assert_eq!(simulated(&build(client_b.clone()).await), "passed");
    let committed = build(client_a.clone()).await;
    let request = PipelineLifecycleRequest::Build(committed);
    let (through_a, through_b) = tokio::join!(
        client_a.evm_build().body(request.clone()).send(),
        client_b.evm_build().body(request).send()
    );
    let mut outcomes: Vec<u16> = [through_a.map(|_| 200), through_b.map(|_| 200)]
        .into_iter()
        .map(|outcome| outcome.unwrap_or_else(|error| error.status().unwrap().as_u16()))
        .collect();
    outcomes.sort();
    assert_eq!(outcomes, [200, 422], "committed once");
    // Each instance now simulates on the state after the one commit.
    assert_eq!(simulated(&build(client_b).await), "failed");
    assert_eq!(simulated(&build(client_a).await), "failed");
    // The one commit is metered once, whichever instance reads the usage.
    let usage = b
        .state()
        .store()
        .usage(&AccountId::verified("alice"), 0, i64::MAX)
        .await
        .unwrap();
    assert!(usage.contains(&(Meter::Commit, 1)), "{usage:?}");
}

/// Runs `sql` on the test PostgreSQL server's administrative database.
async fn admin(sql: String) {
    use sqlx::Connection;
    let server = std::env::var(intent_testkit::DATABASE_ENV).unwrap();
    let mut connection = sqlx::PgConnection::connect(&server).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut connection)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_lost_database_gets_503_with_retry_after_and_the_server_recovers_when_it_returns() {
    let Some((a, b)) = pair().await else { return };
    let name = reqwest::Url::parse(a.database_url().unwrap())
        .unwrap()
        .path()
        .trim_start_matches('/')
        .to_owned();
    let (a, b) = (Agent::with(a), Agent::with(b));
    let started = a.chat("hello", None).await;
    let (_, _, cursor) = a.settle(&started.session_id, &started.cursor).await;

    // The database refuses connections and drops the ones it has.
    admin(format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false")).await;
    admin(format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
    ))
    .await;
    let token = a.server.token("alice", Resource::Agent, &["agent:read"]);
    let path = format!("/v1/agent/chat/{}", started.session_id);
    // A page may come from the instance's head until its listener finds the connection gone.
    let deadline = Instant::now() + Duration::from_secs(5);
    let response = loop {
        let response = a.server.get(&path, &token).await;
        if response.status() == 503 {
            break response;
        }
        assert!(Instant::now() < deadline, "503 while the database is gone");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(response.headers().contains_key("retry-after"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    let refused = a
        .try_chat("lost?", Some(&started.session_id))
        .await
        .unwrap_err();
    assert_eq!(code(&refused), (503, "unavailable".to_owned()));

    // Back: both instances serve again without a restart, and wake-ups cross again.
    admin(format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true")).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while a.page(&started.session_id, Some(&cursor), 0).await.is_err() {
        assert!(Instant::now() < deadline, "the server recovers");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let session = started.session_id.clone();
    let waiting = tokio::spawn(async move {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            match b.page(&session, Some(&cursor), 10_000).await {
                Ok(page) if !page.events.is_empty() => return page,
                _ => assert!(Instant::now() < deadline, "B reads again"),
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    a.chat("back again", Some(&started.session_id)).await;
    let page = waiting.await.unwrap();
    assert!(
        matches!(&page.events[0], AgentEvent::Message { text, .. } if text == "back again"),
        "{:?}",
        page.events[0]
    );
}

/// Takes 4 s: events are retained 1 s here, and B reads the log page by page for 4 s while
/// turns through A append to it and prune it several times over; on a busy machine, longer, until
/// B has read over 10 pages.
#[tokio::test]
async fn pruning_through_one_instance_leaves_readers_on_the_other_no_gap() {
    // Events leave the retained log one second after they are written, on both instances.
    let retention =
        |config: intent_server::config::Config| config.event_retention(Duration::from_secs(1));
    let first = TestServer::start_with(retention).await;
    if first.database_url().is_none() {
        return;
    }
    let a = Agent::with(first);
    let b = Agent::with(a.server.peer_with(retention).await);
    let started = a.chat("hello", None).await;
    let session = started.session_id.clone();
    // B follows the log page by page while turns through A append and prune it: each page
    // continues right after its cursor, or the cursor is refused as gone (410), never a gap.
    let mut cursor: Option<String> = None;
    let mut last: Option<u64> = None;
    let (mut pages, mut gone) = (0, 0);
    let (began, deadline) = (Instant::now(), Instant::now() + Duration::from_secs(30));
    while (began.elapsed() < Duration::from_secs(4) || pages <= 10) && Instant::now() < deadline {
        let _ = a.try_chat("more", Some(&session)).await;
        match b.page(&session, cursor.as_deref(), 100).await {
            Ok(page) => {
                let seqs: Vec<u64> = page.events.iter().map(AgentEvent::seq).collect();
                if let (Some(first), Some(last)) = (seqs.first(), last) {
                    assert_eq!(*first, last + 1, "a page continues after its cursor");
                }
                let expected: Vec<u64> = seqs.first().map_or(vec![], |first| {
                    (*first..*first + seqs.len() as u64).collect()
                });
                assert_eq!(seqs, expected, "a page is contiguous");
                last = seqs.last().copied().or(last);
                cursor = Some(page.cursor);
                pages += 1;
            }
            Err(error) => {
                assert_eq!(code(&error), (410, "cursor_expired".to_owned()));
                // Start over from the retained log.
                (cursor, last) = (None, None);
                gone += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let page = b.page(&session, None, 0).await.unwrap();
    let oldest = page.events.first().map_or(0, AgentEvent::seq);
    assert!(
        oldest > 1,
        "events were pruned (the oldest kept is {oldest})"
    );
    assert!(pages > 10, "{pages} pages, {gone} cursors gone");
}
