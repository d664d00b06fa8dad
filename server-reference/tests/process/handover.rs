//! Turns that outlive their process, on SQLite with one instance restarted in place: a turn of
//! three seconds, and one waiting on its action, through a SIGTERM whose turn grace ends first
//! (the turn is handed over) and through kill -9 (the turn is orphaned). The restarted server
//! carries each on from its last durable step: every turn completes, no step runs twice, and
//! the wait lasts what it would have.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::metrics;
use crate::support::{Server, page, post};

const WAIT_MS: u64 = 3_000;

/// How the server is stopped mid-turn.
#[derive(Clone, Copy)]
enum Stop {
    Term,
    Kill,
}

/// The whole log of `session`, once its last turn state is no longer `processing` (up to 20 s).
async fn settled(http: &reqwest::Client, base: &str, token: &str, session: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = page(http, base, token, session, None, 0).await.unwrap()["events"]
            .as_array()
            .unwrap()
            .clone();
        let last_state = log
            .iter()
            .rev()
            .find(|e| e["type"] == "turn_state")
            .map(|e| e["state"].as_str().unwrap().to_owned());
        if last_state.as_deref() != Some("processing") {
            return log;
        }
        assert!(Instant::now() < deadline, "the turn settles: {log:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn count(log: &[Value], kind: &str) -> usize {
    log.iter().filter(|e| e["type"] == kind).count()
}

fn states(log: &[Value]) -> Vec<&str> {
    log.iter()
        .filter(|e| e["type"] == "turn_state")
        .map(|e| e["state"].as_str().unwrap())
        .collect()
}

async fn a_turn_outlives(stop: Stop) {
    let data_dir = tempfile::tempdir().unwrap();
    let args = ["--turn-grace", "0"];
    let mut server = Server::start(data_dir.path(), "127.0.0.1:0", &args);
    let token = server.agent_token(
        data_dir.path(),
        "alice",
        "agent:read agent:write agent:actions:resolve",
    );
    let http = reqwest::Client::new();
    // Before the wait begins, so that its whole length is within what is measured.
    let started = Instant::now();
    let waiting = post(
        &http,
        &server.base,
        &token,
        "/v1/agent/chat",
        &json!({ "message": format!("wait {WAIT_MS}") }),
    )
    .await;
    let waiting = waiting["sessionId"].as_str().unwrap().to_owned();
    let sending = post(
        &http,
        &server.base,
        &token,
        "/v1/agent/chat",
        &json!({ "message": "send 1 USDC to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8" }),
    )
    .await;
    let sending = sending["sessionId"].as_str().unwrap().to_owned();
    let log = settled(&http, &server.base, &token, &sending).await;
    let action = &log.iter().find(|e| e["type"] == "action").unwrap()["action"];
    tokio::time::sleep(Duration::from_millis(1_000)).await;

    match stop {
        Stop::Term => {
            let pid = server.child.id().to_string();
            let term = std::process::Command::new("kill")
                .args(["-TERM", &pid])
                .status();
            assert!(term.unwrap().success());
        }
        Stop::Kill => server.child.kill().unwrap(),
    }
    server.child.wait().unwrap();
    let addr = server.base.trim_start_matches("http://").to_owned();
    let restarted = Server::start(
        data_dir.path(),
        &addr,
        &[&args[..], &["--metrics-addr", "127.0.0.1:0"]].concat(),
    );

    let log = settled(&http, &restarted.base, &token, &waiting).await;
    assert_eq!(states(&log), ["processing", "complete"], "{log:#?}");
    let scrape = metrics::scrape(restarted.metrics.as_deref().unwrap()).await;
    let resumed = metrics::value(&scrape, "intent_agent_turns_resumed", &[]);
    assert_eq!(
        resumed,
        Some(1.0),
        "the restarted server carried the turn on"
    );
    assert_eq!(count(&log, "tool_call"), 1, "the wait is called once");
    assert_eq!(count(&log, "tool_result"), 1);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(WAIT_MS),
        "the wait lasts its {WAIT_MS} ms: {waited:?}"
    );

    // The action raised before the stop is resolved after it, and committed once.
    let resolved = http
        .post(format!(
            "{}/v1/agent/sessions/{sending}/actions/{}/resolve",
            restarted.base,
            action["actionId"].as_str().unwrap()
        ))
        .bearer_auth(&token)
        .header("idempotency-key", "approve-once")
        .json(&json!({
            "revision": action["revision"],
            "result": { "outcome": "approved", "digest": action["build"]["digest"] },
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resolved.status(), 200, "{}", resolved.text().await.unwrap());
    let log = settled(&http, &restarted.base, &token, &sending).await;
    assert_eq!(
        states(&log),
        ["processing", "awaiting_action", "processing", "complete"],
        "{log:#?}"
    );
    let commits = log
        .iter()
        .filter(|e| e["type"] == "tool_result" && e["name"] == "pipeline.evm.commit")
        .count();
    assert_eq!(commits, 1, "{log:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_running_at_sigterm_is_handed_over_and_completes_after_the_restart() {
    a_turn_outlives(Stop::Term).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_orphaned_by_sigkill_is_carried_on_and_completes_after_the_restart() {
    a_turn_outlives(Stop::Kill).await;
}
