//! Two server processes on one PostgreSQL database (needs `INTENT_TEST_DATABASE_URL`; passes
//! trivially without it). Turns churn through A while B reads; A is killed with SIGKILL. B keeps
//! serving, every event a reader saw acknowledged is still there with no gap, and B fails the
//! turns A left `processing` once their lease ran out, and only those.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::Connection;

use crate::metrics;
use crate::support::{Server, page, post};

/// A new, empty database on the test PostgreSQL server; `None` when there is none.
async fn new_database() -> Option<String> {
    let server = std::env::var("INTENT_TEST_DATABASE_URL").ok()?;
    let mut admin = sqlx::PgConnection::connect(&server).await.unwrap();
    let name = format!("scale_out_{}", std::process::id());
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name}"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .unwrap();
    let mut url = reqwest::Url::parse(&server).unwrap();
    url.set_path(&name);
    Some(url.to_string())
}

/// The whole retained log of `session`, read through `base`.
async fn whole_log(http: &reqwest::Client, base: &str, token: &str, session: &str) -> Vec<Value> {
    let mut log = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = page(http, base, token, session, cursor.as_deref(), 0)
            .await
            .unwrap();
        log.extend(page["events"].as_array().unwrap().iter().cloned());
        cursor = Some(page["cursor"].as_str().unwrap().to_owned());
        if !page["has_more"].as_bool().unwrap() {
            return log;
        }
    }
}

/// The state of the last turn in `log`.
fn last_state(log: &[Value]) -> String {
    log.iter()
        .rev()
        .find(|e| e["type"] == "turn_state")
        .map(|e| e["state"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// Takes over 1 s: after the kill, A's 1 s turn lease must run out before B carries on the turns
/// A left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_one_instance_loses_nothing_and_the_other_takes_over_its_orphans() {
    let Some(database) = new_database().await else {
        eprintln!("skipped: set INTENT_TEST_DATABASE_URL to run the two-process test");
        return;
    };
    // Both processes share the key files, like a mounted secret, and the database.
    let keys = tempfile::tempdir().unwrap();
    let shared = ["--database-url", database.as_str(), "--turn-lease", "1"];
    let mut a = Server::start(keys.path(), "127.0.0.1:0", &shared);
    let public = a.base.clone();
    let mut with_public = shared.to_vec();
    with_public.extend([
        "--public-url",
        public.as_str(),
        "--metrics-addr",
        "127.0.0.1:0",
    ]);
    let b = Server::start(keys.path(), "127.0.0.1:0", &with_public);
    let token = a.agent_token(keys.path(), "alice", "agent:read agent:write");
    let http = reqwest::Client::new();

    let mut sessions = Vec::new();
    for _ in 0..3 {
        let started = post(
            &http,
            &a.base,
            &token,
            "/v1/agent/chat",
            &json!({ "message": "hello" }),
        )
        .await;
        sessions.push(started["sessionId"].as_str().unwrap().to_owned());
    }
    // Writers start turns through A back to back; readers follow each session through B.
    let churn = |session: String| {
        let (http, base, token) = (http.clone(), a.base.clone(), token.clone());
        tokio::spawn(async move {
            loop {
                let body = json!({ "message": "hello", "sessionId": session });
                let sent = http
                    .post(format!("{base}/v1/agent/chat"))
                    .bearer_auth(&token)
                    .json(&body)
                    .send()
                    .await;
                match sent {
                    Ok(response) if response.status() == 202 => {}
                    Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                    Err(_) => return,
                }
            }
        })
    };
    let writers: Vec<_> = sessions.iter().cloned().map(churn).collect();
    // The turns run until B serves over 30 events to check (up to 30 s on a busy machine).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let seen = loop {
        let mut seen = Vec::new();
        for session in &sessions {
            seen.push(whole_log(&http, &b.base, &token, session).await);
        }
        if seen.iter().map(Vec::len).sum::<usize>() > 30 || std::time::Instant::now() > deadline {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    a.child.kill().expect("SIGKILL");
    a.child.wait().unwrap();
    for writer in writers {
        writer.await.unwrap();
    }
    let acknowledged: usize = seen.iter().map(Vec::len).sum();
    assert!(
        acknowledged > 30,
        "too little appended to test: {acknowledged}"
    );

    // B carries on what A left processing, once A's one-second lease has run out, to its end.
    let deadline = Instant::now() + Duration::from_secs(15);
    for (session, seen) in sessions.iter().zip(&seen) {
        let log = loop {
            let log = whole_log(&http, &b.base, &token, session).await;
            if last_state(&log) != "processing" {
                break log;
            }
            assert!(Instant::now() < deadline, "B takes over session {session}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let seqs: Vec<u64> = log.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(seqs, expected, "no gap in session {session}");
        assert_eq!(last_state(&log), "complete", "session {session}");
        assert_eq!(
            &log[..seen.len()],
            &seen[..],
            "every acknowledged event is kept"
        );
    }

    // B listens to the database's notifications, and carried on A's orphaned turns.
    let scrape = metrics::scrape(b.metrics.as_deref().unwrap()).await;
    let up = metrics::value(&scrape, "intent_store_listener_up", &[]);
    assert_eq!(up, Some(1.0), "B's listener is connected");
    let resumed = metrics::value(&scrape, "intent_agent_turns_resumed", &[]).unwrap();
    assert!(resumed >= 1.0, "B resumed A's turns: {resumed}");

    // B's own turns meanwhile complete: a live runner's turns are never failed as orphans.
    let started = post(
        &http,
        &b.base,
        &token,
        "/v1/agent/chat",
        &json!({ "message": "hello" }),
    )
    .await;
    let session = started["sessionId"].as_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = whole_log(&http, &b.base, &token, session).await;
        match last_state(&log).as_str() {
            "complete" => break,
            "processing" => assert!(Instant::now() < deadline, "the turn on B completes"),
            other => panic!("a turn on the live instance ended {other}: {log:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn an_unreachable_database_at_start_is_a_clear_error_and_exit_code() {
    let keys = tempfile::tempdir().unwrap();
    // Nothing listens on port 9 of the loopback.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_intent-server"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(keys.path())
        .args(["--database-url", "postgres://intent@127.0.0.1:9/intent"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("database") && stderr.contains("127.0.0.1:9"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "it never listened");
}
