//! Agent event-log benchmark against the release server binary on loopback:
//!
//! 1. wake-up latency: a long-poll waits at the end of a session's log; an interrupt appends
//!    one event; the time from sending the interrupt to the long-poll's return bounds the time
//!    from the append to the return (it also holds the interrupt's own request and fsync);
//! 2. memory: the server's resident set with 1,000 waiting long-polls and 200 open SSE streams.
//!
//! Run: `cargo bench -p intent-server --bench agent_log`

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const ROUNDS: usize = 300;
const LONG_POLLS: usize = 1_000;
const STREAMS: usize = 200;
const SESSIONS: usize = 100;

struct Server {
    child: Child,
    base: String,
    token: String,
    _data_dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> Server {
    let data_dir = tempfile::tempdir().unwrap();
    let binary = env!("CARGO_BIN_EXE_intent-server");
    let mut child = Command::new(binary)
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir.path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line.trim().trim_start_matches("listening on ").to_owned();
    let output = Command::new(binary)
        .args([
            "token",
            "--sub",
            "bench",
            "--scope",
            "agent:read agent:write",
        ])
        .arg("--resource")
        .arg(format!("{base}/v1/agent"))
        .arg("--data-dir")
        .arg(data_dir.path())
        .output()
        .unwrap();
    let token = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    Server {
        child,
        base,
        token,
        _data_dir: data_dir,
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

async fn post(http: &reqwest::Client, server: &Server, path: &str, body: Value) -> Value {
    http.post(format!("{}{path}", server.base))
        .bearer_auth(&server.token)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn page(
    http: &reqwest::Client,
    server: &Server,
    session: &str,
    cursor: &str,
    wait: u64,
) -> Value {
    http.get(format!("{}/v1/agent/chat/{session}", server.base))
        .bearer_auth(&server.token)
        .query(&[("cursor", cursor), ("wait", &wait.to_string())])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

async fn wake_up_latency(server: &Server) {
    let http = reqwest::Client::new();
    let mut session: Option<String> = None;
    let (mut wake, mut interrupt) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let mut body = json!({ "message": "wait 60000" });
        if let Some(id) = &session {
            body["sessionId"] = id.clone().into();
        }
        let started = post(&http, server, "/v1/agent/chat", body).await;
        let id = started["sessionId"].as_str().unwrap().to_owned();
        // Catch up to the turn's tool call: the log then stays quiet until the interrupt.
        let mut cursor = started["cursor"].as_str().unwrap().to_owned();
        loop {
            let page = page(&http, server, &id, &cursor, 5_000).await;
            cursor = page["cursor"].as_str().unwrap().to_owned();
            if page["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["type"] == "tool_call")
            {
                break;
            }
        }
        let poller = {
            let (http, id, cursor) = (http.clone(), id.clone(), cursor.clone());
            let (base, token) = (server.base.clone(), server.token.clone());
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
        post(
            &http,
            server,
            &format!("/v1/agent/sessions/{id}/interrupt"),
            json!({}),
        )
        .await;
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

async fn memory(server: &Server) {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        let started = post(
            &http,
            server,
            "/v1/agent/chat",
            json!({ "message": "hello" }),
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
        *cursor = page(&http, server, id, cursor, 0).await["cursor"]
            .as_str()
            .unwrap()
            .to_owned();
    }
    let pid = server.child.id();
    let before = rss_kib(pid);
    let mut polls = Vec::new();
    for i in 0..LONG_POLLS {
        let (id, cursor) = sessions[i % SESSIONS].clone();
        let request = http
            .get(format!("{}/v1/agent/chat/{id}", server.base))
            .bearer_auth(&server.token)
            .query(&[("cursor", cursor.as_str()), ("wait", "30000")]);
        polls.push(tokio::spawn(request.send()));
    }
    let mut streams = Vec::new();
    for i in 0..STREAMS {
        let (id, _) = &sessions[i % SESSIONS];
        let response = http
            .get(format!("{}/v1/agent/chat/{id}/stream", server.base))
            .bearer_auth(&server.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        streams.push(response);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pending = polls.iter().filter(|p| !p.is_finished()).count();
    let during = rss_kib(pid);
    println!(
        "memory: server RSS {:.1} MiB idle, {:.1} MiB with {pending} waiting long-polls and {} open SSE streams (+{:.1} KiB per connection)",
        before as f64 / 1024.0,
        during as f64 / 1024.0,
        streams.len(),
        (during.saturating_sub(before)) as f64 / (pending + streams.len()) as f64,
    );
    for poll in polls {
        poll.abort();
    }
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; this harness takes no filter.
    let server = start();
    wake_up_latency(&server).await;
    memory(&server).await;
}
