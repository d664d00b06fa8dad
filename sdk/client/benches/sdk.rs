//! SDK benchmark on loopback, against a wiremock server answering canned bodies:
//!
//! 1. decoding: events per second through `Agent::follow_sse` (SSE frames, `page` JSON, strict
//!    models) and through `Agent::follow` (long-poll pages);
//! 2. overhead: time per call of `Intent` (the token put on by the hooks, typed errors), against
//!    a bare reqwest GET of the same address with the same header.
//!
//! Run: `cargo bench -p intent-sdk --bench sdk`

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use intent_sdk::Intent;
use intent_sdk::auth::{Resource, StaticToken};
use serde_json::{Value, json};
use wiremock::matchers::{method, path, query_param_is_missing};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SESSION: &str = "ses_bench";
const PAGES: u64 = 200;
const PER_PAGE: u64 = 100;
const CALLS: u32 = 3_000;
const TOKEN: &str = "bench-token";

fn page(cursor: &str, seqs: std::ops::RangeInclusive<u64>) -> Value {
    let events: Vec<Value> = seqs
        .map(|seq| {
            json!({
                "type": "tool_result", "seq": seq, "turnId": "turn_1", "createdAt": 1_795_000_000,
                "toolCallId": "call_1", "name": "pipeline.evm.build", "isError": false,
                "output": { "status": "simulated", "digest": format!("sha256:{seq:064x}") },
            })
        })
        .collect();
    json!({ "session_id": SESSION, "cursor": cursor, "events": events, "has_more": false })
}

async fn sse(server: &MockServer) {
    let mut body = String::new();
    for p in 0..PAGES {
        let cursor = format!("c{p}");
        let first = p * PER_PAGE + 1;
        let data = page(&cursor, first..=first + PER_PAGE - 1);
        body.push_str(&format!("event: page\nid: {cursor}\ndata: {data}\n\n"));
    }
    Mock::given(method("GET"))
        .and(path(format!("/v1/agent/chat/{SESSION}/stream")))
        .and(query_param_is_missing("cursor"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(server)
        .await;
    let intent = intent(server, reqwest::Client::new());
    let total = PAGES * PER_PAGE;
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let began = Instant::now();
        let mut stream = Box::pin(intent.agent().follow_sse(SESSION, None));
        for _ in 0..total {
            stream.next().await.unwrap().unwrap();
        }
        best = best.min(began.elapsed());
    }
    println!(
        "follow_sse: {total} events in {:.1} ms: {:.0} events/s (best of 5)",
        best.as_secs_f64() * 1e3,
        total as f64 / best.as_secs_f64()
    );
}

async fn pages(server: &MockServer) {
    let events = 500;
    Mock::given(method("GET"))
        .and(path(format!("/v1/agent/chat/{SESSION}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(page("c", 1..=events)))
        .mount(server)
        .await;
    let intent = intent(server, reqwest::Client::new());
    let rounds = 40;
    let began = Instant::now();
    for _ in 0..rounds {
        let mut stream = Box::pin(intent.agent().follow(SESSION, None));
        for _ in 0..events {
            stream.next().await.unwrap().unwrap();
        }
    }
    let elapsed = began.elapsed();
    let total = rounds * events;
    println!(
        "follow (pages of {events}): {total} events in {:.1} ms: {:.0} events/s",
        elapsed.as_secs_f64() * 1e3,
        total as f64 / elapsed.as_secs_f64()
    );
}

async fn overhead(server: &MockServer) {
    let session =
        json!({ "id": SESSION, "updatedAt": 1_795_000_000, "archived": false, "title": "bench" });
    Mock::given(method("GET"))
        .and(path(format!("/v1/agent/sessions/{SESSION}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(session))
        .mount(server)
        .await;
    let http = reqwest::Client::new();
    let intent = intent(server, http.clone());
    let url = format!("{}/v1/agent/sessions/{SESSION}", server.uri());
    let mut bare = Vec::new();
    let mut sdk = Vec::new();
    // Interleaved, so that both see the same server and the same warm connection pool.
    for _ in 0..CALLS {
        let began = Instant::now();
        let request = http.get(&url).bearer_auth(TOKEN);
        let body = request.send().await.unwrap().bytes().await.unwrap();
        bare.push(began.elapsed());
        assert!(!body.is_empty());
        let began = Instant::now();
        let session = intent.agent().session(SESSION).await.unwrap();
        sdk.push(began.elapsed());
        assert_eq!(session.title, "bench");
    }
    bare.sort();
    sdk.sort();
    let median = |v: &[Duration]| v[v.len() / 2].as_secs_f64() * 1e6;
    println!(
        "per call ({CALLS} each): bare reqwest p50 {:.1} µs, SDK p50 {:.1} µs, overhead {:.1} µs",
        median(&bare),
        median(&sdk),
        median(&sdk) - median(&bare)
    );
}

/// An Agent client of the mock server through `http`.
fn intent(server: &MockServer, http: reqwest::Client) -> Intent {
    Intent::builder(server.uri())
        .token(Resource::Agent, StaticToken::new(TOKEN))
        .http_client(http)
        .build()
        .unwrap()
}

#[tokio::main]
async fn main() {
    let server = MockServer::start().await;
    sse(&server).await;
    pages(&server).await;
    overhead(&server).await;
}
