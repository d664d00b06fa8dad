//! The SSE projection of a session's log on a real socket: `page` events whose id is their
//! cursor, transient `message` snapshots without an id, resume by `cursor` and by
//! Last-Event-ID, `resync` when no safe delta exists, and keep-alive comments.

use std::time::Duration;

use intent_models::{AgentEvent, EventPage, MessageSnapshot, Resync, TurnState};
use intent_server::auth::resource::Resource;
use intent_tests::TestServer;
use serde_json::Value;

/// One SSE frame; a comment has no event name and its text as data.
#[derive(Debug, Clone, Default)]
struct Frame {
    event: String,
    id: Option<String>,
    data: String,
    comment: bool,
}

/// A minimal reader of `text/event-stream` frames over a response body.
struct Stream {
    response: reqwest::Response,
    buffer: String,
}

impl Stream {
    async fn next(&mut self) -> Frame {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut frame = Frame::default();
                for line in block.lines().filter(|line| !line.is_empty()) {
                    let (field, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value);
                    match field {
                        "" => {
                            frame.comment = true;
                            frame.data.push_str(value);
                        }
                        "event" => frame.event = value.to_owned(),
                        "id" => frame.id = Some(value.to_owned()),
                        "data" => frame.data.push_str(value),
                        _ => {}
                    }
                }
                return frame;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.response.chunk())
                .await
                .unwrap_or_else(|_| panic!("no frame within 10 s; buffered: {:?}", self.buffer))
                .expect("the stream reads")
                .expect("the stream stays open");
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// The next frame that is not a comment.
    async fn next_event(&mut self) -> Frame {
        loop {
            let frame = self.next().await;
            if !frame.comment {
                return frame;
            }
        }
    }
}

struct Fixture {
    server: TestServer,
    token: String,
}

impl Fixture {
    async fn new(server: TestServer) -> Self {
        let token = server.token("alice", Resource::Agent, &["agent:read", "agent:write"]);
        Self { server, token }
    }

    async fn open(
        &self,
        session: &str,
        query: &str,
        last_event_id: Option<&str>,
    ) -> reqwest::Response {
        let mut request = reqwest::Client::new()
            .get(format!(
                "{}/v1/agent/chat/{session}/stream{query}",
                self.server.base_url()
            ))
            .bearer_auth(&self.token);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        request.send().await.unwrap()
    }

    async fn stream(&self, session: &str, query: &str, last_event_id: Option<&str>) -> Stream {
        let response = self.open(session, query, last_event_id).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Stream {
            response,
            buffer: String::new(),
        }
    }

    /// Starts a turn with `message` and returns its session.
    async fn chat(&self, message: &str, session: Option<&str>) -> String {
        let mut body = serde_json::json!({ "message": message });
        if let Some(session) = session {
            body["sessionId"] = session.into();
        }
        let response = reqwest::Client::new()
            .post(format!("{}/v1/agent/chat", self.server.base_url()))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202);
        let started: Value = response.json().await.unwrap();
        started["sessionId"].as_str().unwrap().to_owned()
    }

    /// Reads pages (skipping snapshots) until a turn ends; the pages' events and last id.
    async fn until_turn_ends(&self, stream: &mut Stream) -> (Vec<AgentEvent>, String, usize) {
        let mut events = Vec::new();
        let mut snapshots = 0;
        loop {
            let frame = stream.next_event().await;
            match frame.event.as_str() {
                "message" => {
                    assert_eq!(frame.id, None, "a snapshot is never a cursor");
                    let snapshot: MessageSnapshot = serde_json::from_str(&frame.data).unwrap();
                    assert!(!snapshot.text.is_empty());
                    snapshots += 1;
                }
                "page" => {
                    let page: EventPage = serde_json::from_str(&frame.data).unwrap();
                    assert_eq!(frame.id.as_deref(), Some(page.cursor.as_str()));
                    let ended = page.events.iter().any(|e| {
                        matches!(e, AgentEvent::TurnState { state, .. } if *state != TurnState::Processing)
                    });
                    events.extend(page.events);
                    if ended {
                        return (events, page.cursor, snapshots);
                    }
                }
                other => panic!("unexpected event {other:?}: {frame:?}"),
            }
        }
    }
}

fn seqs(events: &[AgentEvent]) -> Vec<u64> {
    events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap()["seq"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn the_stream_sends_pages_with_cursor_ids_and_transient_snapshots() {
    let fixture = Fixture::new(TestServer::start().await).await;
    let session = fixture.chat("hello", None).await;
    let mut stream = fixture.stream(&session, "", None).await;
    let (events, _, snapshots) = fixture.until_turn_ends(&mut stream).await;
    assert_eq!(seqs(&events), [1, 2, 3, 4]);

    fixture.chat("hello again", Some(&session)).await;
    let (events, _, snapshots_2) = fixture.until_turn_ends(&mut stream).await;
    assert_eq!(seqs(&events), [5, 6, 7, 8]);
    assert!(
        snapshots + snapshots_2 > 0,
        "the reply was streamed as snapshots"
    );
}

#[tokio::test]
async fn a_stream_resumes_after_a_cursor_or_a_last_event_id() {
    let fixture = Fixture::new(TestServer::start().await).await;
    let session = fixture.chat("hello", None).await;
    let mut stream = fixture.stream(&session, "", None).await;
    let (_, cursor, _) = fixture.until_turn_ends(&mut stream).await;
    drop(stream);

    fixture.chat("hello again", Some(&session)).await;
    let mut by_cursor = fixture
        .stream(&session, &format!("?cursor={cursor}"), None)
        .await;
    let (events, _, _) = fixture.until_turn_ends(&mut by_cursor).await;
    assert_eq!(seqs(&events), [5, 6, 7, 8]);

    let mut by_header = fixture.stream(&session, "", Some(&cursor)).await;
    let (events, _, _) = fixture.until_turn_ends(&mut by_header).await;
    assert_eq!(seqs(&events), [5, 6, 7, 8]);

    // `cursor` wins over Last-Event-ID.
    let mut both = fixture
        .stream(&session, &format!("?cursor={cursor}"), Some("garbage"))
        .await;
    let frame = both.next_event().await;
    assert_eq!(frame.event, "page");
}

/// Needs 2.1 s: cursors live 1 s here, counted in whole seconds, so the turn's cursor is surely
/// expired 2 s on, when the check is that it gets `resync` or 410.
#[tokio::test]
async fn a_stream_that_cannot_resume_safely_sends_resync_and_a_bad_cursor_gets_its_status() {
    let fixture = Fixture::new(
        TestServer::start_with(|config| config.cursor_ttl(Duration::from_secs(1))).await,
    )
    .await;
    let session = fixture.chat("hello", None).await;
    let mut stream = fixture.stream(&session, "", None).await;
    let (_, cursor, _) = fixture.until_turn_ends(&mut stream).await;

    // A malformed cursor in the query is the client's mistake: 400.
    let response = fixture.open(&session, "?cursor=garbage", None).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_cursor");

    // A Last-Event-ID that does not open: resync, then the page to reconcile against.
    let mut invalid = fixture.stream(&session, "", Some("garbage")).await;
    let frame = invalid.next_event().await;
    assert_eq!(frame.event, "resync");
    assert_eq!(frame.id, None);
    let resync: Resync = serde_json::from_str(&frame.data).unwrap();
    assert_eq!(resync.reason.to_string(), "cursor_invalid");
    let page = invalid.next_event().await;
    assert_eq!(page.event, "page");
    let page: EventPage = serde_json::from_str(&page.data).unwrap();
    assert_eq!(seqs(&page.events), [1, 2, 3, 4]);

    // An expired one: a Last-Event-ID gets resync, a `cursor` 410 before any event (7.4).
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let mut expired = fixture.stream(&session, "", Some(&cursor)).await;
    let frame = expired.next_event().await;
    assert_eq!(frame.event, "resync");
    let resync: Resync = serde_json::from_str(&frame.data).unwrap();
    assert_eq!(resync.reason.to_string(), "cursor_expired");
    assert_eq!(expired.next_event().await.event, "page");
    let response = fixture
        .open(&session, &format!("?cursor={cursor}"), None)
        .await;
    assert_eq!(response.status(), 410);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "cursor_expired");
}

/// Waits about 0.1 s: keep-alives are set to every 100 ms, and the check is that an idle stream
/// gets one.
#[tokio::test]
async fn an_idle_stream_gets_keep_alive_comments() {
    let fixture = Fixture::new(
        TestServer::start_with(|config| config.sse_keep_alive(Duration::from_millis(100))).await,
    )
    .await;
    let session = fixture.chat("hello", None).await;
    let mut stream = fixture.stream(&session, "", None).await;
    fixture.until_turn_ends(&mut stream).await;
    let frame = stream.next().await;
    assert!(frame.comment, "{frame:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn draining_answers_waiting_long_polls_at_once_and_ends_streams_after_a_comment() {
    let fixture = Fixture::new(TestServer::start().await).await;
    let http = reqwest::Client::new();
    let base = fixture.server.base_url().to_owned();
    assert_eq!(
        http.get(format!("{base}/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let mut sessions = Vec::new();
    for _ in 0..5 {
        let session = fixture.chat("hello", None).await;
        let mut stream = fixture.stream(&session, "", None).await;
        let (_, cursor, _) = fixture.until_turn_ends(&mut stream).await;
        sessions.push((session, cursor));
    }
    // 100 long-polls at the end of their logs, and 20 streams past their first page.
    let polls: Vec<_> = (0..100)
        .map(|i| {
            let (session, cursor) = sessions[i % sessions.len()].clone();
            let (http, base, token) = (http.clone(), base.clone(), fixture.token.clone());
            tokio::spawn(async move {
                let response = http
                    .get(format!("{base}/v1/agent/chat/{session}"))
                    .bearer_auth(token)
                    .query(&[("cursor", cursor.as_str()), ("wait", "30000")])
                    .send()
                    .await
                    .unwrap();
                (
                    response.status(),
                    response.json::<EventPage>().await.unwrap(),
                    session,
                )
            })
        })
        .collect();
    let mut streams = Vec::new();
    for i in 0..20 {
        let (session, _) = &sessions[i % sessions.len()];
        let mut stream = fixture.stream(session, "", None).await;
        assert_eq!(stream.next_event().await.event, "page");
        streams.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    let drained = std::time::Instant::now();
    fixture.server.state().log().drain();
    for poll in polls {
        let (status, page, session) = tokio::time::timeout(Duration::from_secs(5), poll)
            .await
            .expect("a waiting long-poll answers at once")
            .unwrap();
        assert_eq!(status, 200);
        assert!(page.events.is_empty() && !page.has_more, "{page:?}");
        // The cursor still opens: nothing is lost.
        let again = http
            .get(format!("{base}/v1/agent/chat/{session}"))
            .bearer_auth(&fixture.token)
            .query(&[("cursor", page.cursor.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 200);
    }
    for stream in &mut streams {
        let mut rest = std::mem::take(&mut stream.buffer);
        while let Some(chunk) =
            tokio::time::timeout(Duration::from_secs(5), stream.response.chunk())
                .await
                .expect("a stream ends at once")
                .unwrap()
        {
            rest.push_str(std::str::from_utf8(&chunk).unwrap());
        }
        assert!(rest.contains(": the server is draining"), "{rest:?}");
    }
    assert!(drained.elapsed() < Duration::from_secs(5));
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let body: Value = ready.json().await.unwrap();
    assert_eq!(body["status"], "draining");
}
