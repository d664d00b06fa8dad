//! Agent event-log benchmark against the release server binary on loopback:
//!
//! 1. wake-up latency: a long-poll waits at the end of a session's log; an interrupt appends
//!    one event; the time from sending the interrupt to the long-poll's return bounds the time
//!    from the append to the return (it also holds the interrupt's own request and fsync);
//! 2. memory: the server's resident set with 1,000 waiting long-polls and 200 open SSE streams.
//!
//! Run: `cargo bench -p intent-server --bench agent_log`

use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[allow(dead_code)]
#[path = "../tests/support/mod.rs"]
mod support;

use support::{Server, page, post, read_until};

const ROUNDS: usize = 300;
const LONG_POLLS: usize = 1_000;
const STREAMS: usize = 200;
const SESSIONS: usize = 100;

/// The release server with a token of its own.
struct Bench {
    server: Server,
    token: String,
    _data_dir: tempfile::TempDir,
}

fn start() -> Bench {
    let data_dir = tempfile::tempdir().unwrap();
    let server = Server::start(data_dir.path(), "127.0.0.1:0", &[]);
    let token = server.agent_token(data_dir.path(), "bench", "agent:read agent:write");
    Bench {
        server,
        token,
        _data_dir: data_dir,
    }
}

/// A `/proc/PID/status` figure in KiB: `VmRSS` (all resident pages) or `RssAnon` (those not
/// backed by a file: the heap and stacks, without the binary's own code pages).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

async fn wake_up_latency(bench: &Bench) {
    let http = reqwest::Client::new();
    let mut session: Option<String> = None;
    let (mut wake, mut interrupt) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let mut body = json!({ "message": "wait 60000" });
        if let Some(id) = &session {
            body["sessionId"] = id.clone().into();
        }
        let (base, token) = (&bench.server.base, &bench.token);
        let started = post(&http, base, token, "/v1/agent/chat", &body).await;
        let id = started["sessionId"].as_str().unwrap().to_owned();
        // Catch up to the turn's tool call: the log then stays quiet until the interrupt.
        let start = started["cursor"].as_str().unwrap();
        let cursor = read_until(&http, base, token, &id, start, |e| e["type"] == "tool_call").await;
        let poller = {
            let (http, id, cursor) = (http.clone(), id.clone(), cursor.clone());
            let (base, token) = (bench.server.base.clone(), bench.token.clone());
            tokio::spawn(async move {
                let page: Value = http
                    .get(format!("{base}/v1/agent/chat/{id}"))
                    .bearer_auth(token)
                    .query(&[("cursor", cursor.as_str()), ("wait", "30000")])
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                (Instant::now(), page)
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let sent = Instant::now();
        let interrupt_path = format!("/v1/agent/sessions/{id}/interrupt");
        post(&http, base, token, &interrupt_path, &json!({})).await;
        interrupt.push(sent.elapsed());
        let (returned, page) = poller.await.unwrap();
        assert_eq!(page["events"][0]["state"], "interrupted");
        wake.push(returned - sent);
        session = Some(id);
    }
    wake.sort();
    interrupt.sort();
    println!("wake-up after an append ({ROUNDS} rounds), measured from sending the interrupt:");
    for (name, sorted) in [
        ("long-poll returned", &wake),
        ("interrupt answered", &interrupt),
    ] {
        println!(
            "  {name:<20} p50 {:>8.3} ms  p99 {:>8.3} ms  max {:>8.3} ms",
            percentile(sorted, 0.50).as_secs_f64() * 1e3,
            percentile(sorted, 0.99).as_secs_f64() * 1e3,
            sorted.last().unwrap().as_secs_f64() * 1e3,
        );
    }
}

async fn memory(bench: &Bench) {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        let body = json!({ "message": "hello" });
        let started = post(
            &http,
            &bench.server.base,
            &bench.token,
            "/v1/agent/chat",
            &body,
        )
        .await;
        sessions.push((
            started["sessionId"].as_str().unwrap().to_owned(),
            started["cursor"].as_str().unwrap().to_owned(),
        ));
    }
    // Let the turns finish, then move each cursor to the end of its log.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (id, cursor) in &mut sessions {
        *cursor = page(&http, &bench.server.base, &bench.token, id, Some(cursor), 0)
            .await
            .unwrap()["cursor"]
            .as_str()
            .unwrap()
            .to_owned();
    }
    let pid = bench.server.child.id();
    let before = rss_kib(pid);
    let anonymous_before = status_kib(pid, "RssAnon:");
    let mut polls = Vec::new();
    for i in 0..LONG_POLLS {
        let (id, cursor) = sessions[i % SESSIONS].clone();
        let request = http
            .get(format!("{}/v1/agent/chat/{id}", bench.server.base))
            .bearer_auth(&bench.token)
            .query(&[("cursor", cursor.as_str()), ("wait", "30000")]);
        polls.push(tokio::spawn(request.send()));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pending = polls.iter().filter(|p| !p.is_finished()).count();
    let polling = rss_kib(pid);
    let mut streams = Vec::new();
    for i in 0..STREAMS {
        let (id, _) = &sessions[i % SESSIONS];
        let response = http
            .get(format!("{}/v1/agent/chat/{id}/stream", bench.server.base))
            .bearer_auth(&bench.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        streams.push(response);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during = rss_kib(pid);
    let anonymous = status_kib(pid, "RssAnon:");
    let mib = |kib: u64| kib as f64 / 1024.0;
    let per = |grown: u64, count: usize| grown as f64 / count.max(1) as f64;
    println!(
        "memory: server RSS {:.1} MiB idle, {:.1} MiB with {pending} waiting long-polls and {} open SSE streams \
         (anonymous {:.1} and {:.1} MiB; the rest is the binary's own pages)",
        mib(before),
        mib(during),
        streams.len(),
        mib(anonymous_before),
        mib(anonymous),
    );
    let (per_poll, per_stream) = (
        per(polling.saturating_sub(before), pending),
        per(during.saturating_sub(polling), streams.len()),
    );
    println!(
        "  +{per_poll:.1} KiB per waiting long-poll, +{per_stream:.1} KiB per open SSE stream; \
         1 GiB holds about {:.0} waiting clients beside the idle server",
        (1024.0 * 1024.0 - before as f64) / per_poll.max(per_stream).max(0.1),
    );
    for poll in polls {
        poll.abort();
    }
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; this harness takes no filter.
    let bench = start();
    wake_up_latency(&bench).await;
    memory(&bench).await;
}
