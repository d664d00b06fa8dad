//! What a waiting client costs the server: its resident set with waiting long-polls and open SSE
//! streams, against the same process idle, so that the machine's noise does not matter.

use std::time::Duration;

use serde_json::{Value, json};

use super::support::{Server, post, read_until};

/// The most a waiting long-poll may add to the server's resident set, in KiB (measured 9.7 and
/// 11.1 in a debug build), close enough that a regression of 6 KiB fails.
const LONG_POLL_LIMIT_KIB: f64 = 16.0;

/// The most an open SSE stream may add, in KiB (measured 13.7 and 15.0 in a debug build).
const STREAM_LIMIT_KIB: f64 = 20.0;

/// Long-polls and SSE streams the test holds open.
const LONG_POLLS: usize = 200;
const STREAMS: usize = 100;
const SESSIONS: usize = 20;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Takes about 4 s: 2 s each for the long-polls and the streams to settle before the resident
/// set is read.
#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_long_poll_or_stream_costs_the_server_at_most_its_limit() {
    let data_dir = tempfile::tempdir().unwrap();
    let server = Server::start(data_dir.path(), "127.0.0.1:0", &[]);
    let token = server.agent_token(data_dir.path(), "memory", "agent:read agent:write");
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let base = &server.base;
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        let started = post(
            &http,
            base,
            &token,
            "/v1/agent/chat",
            &json!({"message": "hi"}),
        )
        .await;
        let id = started["sessionId"].as_str().unwrap().to_owned();
        let cursor = started["cursor"].as_str().unwrap().to_owned();
        sessions.push((id, cursor));
    }
    // The first turns end before the long-polls start, so that no event wakes one.
    let mut cursors = Vec::new();
    for (id, cursor) in &sessions {
        let settled =
            |event: &Value| event["type"] == "turn_state" && event["state"] != "processing";
        cursors.push(read_until(&http, base, &token, id, cursor, settled).await);
    }
    let sessions: Vec<String> = sessions.into_iter().map(|(id, _)| id).collect();
    let pid = server.child.id();
    let idle = rss_kib(pid);
    let mut polls = Vec::new();
    for i in 0..LONG_POLLS {
        let request = http
            .get(format!("{base}/v1/agent/chat/{}", sessions[i % SESSIONS]))
            .bearer_auth(&token)
            .query(&[
                ("cursor", cursors[i % SESSIONS].as_str()),
                ("wait", "30000"),
            ]);
        polls.push(tokio::spawn(request.send()));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        polls.iter().all(|poll| !poll.is_finished()),
        "the long-polls wait"
    );
    let polling = rss_kib(pid);
    let mut streams = Vec::new();
    for i in 0..STREAMS {
        let response = http
            .get(format!(
                "{base}/v1/agent/chat/{}/stream",
                sessions[i % SESSIONS]
            ))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        streams.push(response);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let streaming = rss_kib(pid);
    let per_poll = polling.saturating_sub(idle) as f64 / LONG_POLLS as f64;
    let per_stream = streaming.saturating_sub(polling) as f64 / STREAMS as f64;
    println!(
        "memory: idle {idle} KiB; +{per_poll:.1} KiB per waiting long-poll, +{per_stream:.1} KiB per open SSE stream"
    );
    for poll in polls {
        poll.abort();
    }
    assert!(
        per_poll <= LONG_POLL_LIMIT_KIB,
        "a long-poll costs {per_poll:.1} KiB"
    );
    assert!(
        per_stream <= STREAM_LIMIT_KIB,
        "an SSE stream costs {per_stream:.1} KiB"
    );
}
