//! The server binary as a child process, stopped two ways. With `kill -9`: sessions take turns
//! while readers record every event the server acknowledged, the process is killed mid-append,
//! and a restart on the same data dir must still hold every acknowledged event, with no gap,
//! carry on the turn the kill cut short to its end, and accept every cursor handed out before.
//! With SIGTERM: the server drains, answering a waiting long-poll at once, and exits within its
//! shutdown grace. And one it never starts: on a data dir other users can write.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Server, page, post, read_until};

/// What readers saw acknowledged: events by sequence number, and each cursor with the
/// sequence number it stands after.
#[derive(Default)]
struct Seen {
    events: BTreeMap<u64, Value>,
    cursors: Vec<(String, u64)>,
}

/// Starts turns in `session` one after another, as fast as they end, until the server dies.
async fn churn(
    http: reqwest::Client,
    base: String,
    token: String,
    session: Option<String>,
) -> String {
    let mut session = session;
    loop {
        let mut body = json!({ "message": "hello" });
        if let Some(id) = &session {
            body["sessionId"] = id.clone().into();
        }
        let Ok(response) = http
            .post(format!("{base}/v1/agent/chat"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
        else {
            return session.unwrap_or_default();
        };
        if response.status() == 202 {
            let started: Value = response.json().await.unwrap();
            session = Some(started["sessionId"].as_str().unwrap().to_owned());
        } else {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Follows `session` from its start, recording what the server acknowledged and counting it in
/// `counted`, until it dies.
async fn follow(
    (http, base, token): (reqwest::Client, String, String),
    session: String,
    counted: Arc<AtomicUsize>,
) -> Seen {
    let mut seen = Seen::default();
    let mut cursor: Option<String> = None;
    while let Ok(page) = page(&http, &base, &token, &session, cursor.as_deref(), 1_000).await {
        for event in page["events"].as_array().unwrap() {
            seen.events
                .insert(event["seq"].as_u64().unwrap(), event.clone());
        }
        counted.fetch_add(page["events"].as_array().unwrap().len(), Ordering::Relaxed);
        let after = seen.events.keys().next_back().copied().unwrap_or(0);
        let next = page["cursor"].as_str().unwrap().to_owned();
        seen.cursors.push((next.clone(), after));
        cursor = Some(next);
    }
    seen
}

/// The state of the last turn of `session`, from the end of its log.
async fn last_state(http: &reqwest::Client, base: &str, token: &str, session: &str) -> String {
    let mut cursor: Option<String> = None;
    let mut state = String::new();
    loop {
        let page = page(http, base, token, session, cursor.as_deref(), 0)
            .await
            .unwrap();
        for event in page["events"].as_array().unwrap() {
            if event["type"] == "turn_state" {
                state = event["state"].as_str().unwrap().to_owned();
            }
        }
        cursor = Some(page["cursor"].as_str().unwrap().to_owned());
        if !page["has_more"].as_bool().unwrap() {
            return state;
        }
    }
}

/// The turns run until the readers have seen over 30 acknowledged events to check (up to 30 s
/// on a busy machine), then the server is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_events_survive_sigkill_with_no_gap_and_valid_cursors() {
    let data_dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(data_dir.path(), "127.0.0.1:0", &[]);
    let token = server.agent_token(data_dir.path(), "alice", "agent:read agent:write");
    let http = reqwest::Client::new();

    // Three sessions, each taking turns back to back, each followed by a reader.
    let mut sessions = Vec::new();
    for _ in 0..3 {
        let response = post(
            &http,
            &server.base,
            &token,
            "/v1/agent/chat",
            &json!({ "message": "hello" }),
        )
        .await;
        sessions.push(response["sessionId"].as_str().unwrap().to_owned());
    }
    let mut writers = Vec::new();
    let mut readers = Vec::new();
    let counted = Arc::new(AtomicUsize::new(0));
    for session in &sessions {
        let args = (http.clone(), server.base.clone(), token.clone());
        writers.push(tokio::spawn(churn(
            args.0.clone(),
            args.1.clone(),
            args.2.clone(),
            Some(session.clone()),
        )));
        readers.push(tokio::spawn(follow(args, session.clone(), counted.clone())));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while counted.load(Ordering::Relaxed) <= 30 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.child.kill().expect("SIGKILL"); // `Child::kill` sends SIGKILL on Unix.
    server.child.wait().unwrap();
    for writer in writers {
        writer.await.unwrap();
    }
    let mut seen = Vec::new();
    for reader in readers {
        seen.push(reader.await.unwrap());
    }
    let acknowledged: usize = seen.iter().map(|s| s.events.len()).sum();
    assert!(
        acknowledged > 30,
        "the run appended too little to test: {acknowledged}"
    );
    eprintln!("{acknowledged} events acknowledged before SIGKILL");

    let addr = server.base.trim_start_matches("http://").to_owned();
    let restarted = Server::start(data_dir.path(), &addr, &[]);
    for (session, seen) in sessions.iter().zip(&seen) {
        // The turn the kill cut short is carried on by the restarted server, to its end.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while last_state(&http, &restarted.base, &token, session).await == "processing" {
            assert!(
                std::time::Instant::now() < deadline,
                "session {session} settles"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The whole retained log, page by page from no cursor.
        let mut log = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = page(
                &http,
                &restarted.base,
                &token,
                session,
                cursor.as_deref(),
                0,
            )
            .await
            .unwrap();
            log.extend(page["events"].as_array().unwrap().iter().cloned());
            cursor = Some(page["cursor"].as_str().unwrap().to_owned());
            if !page["has_more"].as_bool().unwrap() {
                break;
            }
        }
        let seqs: Vec<u64> = log.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(seqs, expected, "no gap in session {session}");
        for (seq, event) in &seen.events {
            assert_eq!(
                &log[*seq as usize - 1],
                event,
                "acknowledged event {seq} is kept"
            );
        }
        let last = log.iter().rev().find(|e| e["type"] == "turn_state");
        assert_eq!(last.unwrap()["state"], "complete", "{last:?}");
        // Every cursor handed out before the kill still opens at its place.
        for (cursor, after) in &seen.cursors {
            let page = page(&http, &restarted.base, &token, session, Some(cursor), 0)
                .await
                .unwrap_or_else(|e| panic!("cursor after {after} refused: {e}"));
            let first = page["events"][0]["seq"].as_u64();
            assert_eq!(first, Some(after + 1).filter(|s| *s <= seqs.len() as u64));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_a_waiting_long_poll_and_the_server_exits_within_its_grace() {
    let data_dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(data_dir.path(), "127.0.0.1:0", &[]);
    let token = server.agent_token(data_dir.path(), "alice", "agent:read agent:write");
    let http = reqwest::Client::new();
    let started = post(
        &http,
        &server.base,
        &token,
        "/v1/agent/chat",
        &json!({ "message": "hello" }),
    )
    .await;
    let session = started["sessionId"].as_str().unwrap().to_owned();
    // Read the whole turn, then wait at its end.
    let cursor = read_until(
        &http,
        &server.base,
        &token,
        &session,
        started["cursor"].as_str().unwrap(),
        |e| e["type"] == "turn_state" && e["state"] == "complete",
    )
    .await;
    let waiting = {
        let (http, base, token, session, cursor) = (
            http.clone(),
            server.base.clone(),
            token.clone(),
            session.clone(),
            cursor.clone(),
        );
        tokio::spawn(
            async move { page(&http, &base, &token, &session, Some(&cursor), 30_000).await },
        )
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let signalled = std::time::Instant::now();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let answered = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the long-poll is answered at once")
        .unwrap()
        .expect("with a page, not an error");
    assert_eq!(answered["events"], json!([]));
    assert!(answered["cursor"].as_str().is_some_and(|c| !c.is_empty()));
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(12),
            "the server exits within its 10 s grace"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_data_dir_other_users_can_write_is_refused_at_start_with_the_fix() {
    use std::os::unix::fs::PermissionsExt;
    let data = tempfile::tempdir().unwrap();
    std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_intent-server"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("other users can write it") && stderr.contains("chmod 700"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "it never listened");
    assert_eq!(
        std::fs::read_dir(data.path()).unwrap().count(),
        0,
        "nothing written"
    );
}
