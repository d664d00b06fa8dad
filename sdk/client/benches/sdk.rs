//! SDK benchmark on loopback, against a wiremock server answering canned bodies:
//!
//! 1. decoding: events per second through `Agent::follow_sse` (SSE frames, `page` JSON, typed
//!    models) and through `Agent::follow` (long-poll pages), against the same pages' JSON
//!    decoded into the typed model with nothing around it;
//! 2. overhead: time per call of `Intent` (the token put on by the hooks, typed errors), against
//!    a bare reqwest GET of the same address with the same header, and against that GET with
//!    its body decoded into the same typed model.
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

/// The SSE `page` frames' data: `PAGES` pages of `PER_PAGE` events.
fn sse_pages() -> Vec<(String, String)> {
    (0..PAGES)
        .map(|p| {
            let first = p * PER_PAGE + 1;
            let cursor = format!("c{p}");
            let data = page(&cursor, first..=first + PER_PAGE - 1).to_string();
            (cursor, data)
        })
        .collect()
}

/// The baseline: the same pages' JSON decoded into the typed model, with nothing around it.
fn bare_decode() -> f64 {
    let pages = sse_pages();
    let total = PAGES * PER_PAGE;
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let began = Instant::now();
        let mut events = 0;
        for (_, data) in &pages {
            let page: intent_sdk::models::EventPage = serde_json::from_str(data).unwrap();
            events += page.events.len() as u64;
        }
        assert_eq!(events, total);
        best = best.min(began.elapsed());
    }
    let rate = total as f64 / best.as_secs_f64();
    println!("bare decode (serde_json into EventPage): {rate:.0} events/s (best of 5)");
    rate
}

async fn sse(server: &MockServer, bare: f64) {
    let mut body = String::new();
    for (cursor, data) in sse_pages() {
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
    let rate = total as f64 / best.as_secs_f64();
    println!(
        "follow_sse: {total} events in {:.1} ms: {rate:.0} events/s (best of 5), {:.2}x the bare decode",
        best.as_secs_f64() * 1e3,
        rate / bare
    );
}

async fn pages(server: &MockServer, bare: f64) {
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
    let rate = total as f64 / elapsed.as_secs_f64();
    println!(
        "follow (pages of {events}): {total} events in {:.1} ms: {rate:.0} events/s, {:.2}x the bare decode",
        elapsed.as_secs_f64() * 1e3,
        rate / bare
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
    // Per round: a bare GET, a bare GET decoded into the typed model, and the SDK's call.
    let mut rounds: Vec<[Duration; 3]> = Vec::new();
    // Interleaved, so that all three see the same server and the same warm connection pool.
    for _ in 0..CALLS {
        let began = Instant::now();
        let request = http.get(&url).bearer_auth(TOKEN);
        let body = request.send().await.unwrap().bytes().await.unwrap();
        let bare = began.elapsed();
        assert!(!body.is_empty());
        let began = Instant::now();
        let request = http.get(&url).bearer_auth(TOKEN);
        let body = request.send().await.unwrap().bytes().await.unwrap();
        let decoded: intent_sdk::models::Session = serde_json::from_slice(&body).unwrap();
        let typed = began.elapsed();
        assert_eq!(decoded.title, "bench");
        let began = Instant::now();
        let session = intent.agent().session(SESSION).await.unwrap();
        let sdk = began.elapsed();
        assert_eq!(session.title, "bench");
        rounds.push([bare, typed, sdk]);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    let p50 = |i: usize| median(rounds.iter().map(|r| micros(r[i])).collect());
    // Paired: the median of each round's difference, steadier than a difference of medians.
    let over = |i: usize| median(rounds.iter().map(|r| micros(r[2]) - micros(r[i])).collect());
    println!(
        "per call ({CALLS} rounds): p50 bare reqwest {:.1} µs, bare + typed decode {:.1} µs, SDK {:.1} µs; \
         SDK overhead (paired median) over bare {:.1} µs, over bare + typed decode {:.1} µs",
        p50(0),
        p50(1),
        p50(2),
        over(0),
        over(1)
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
    let bare = bare_decode();
    sse(&server, bare).await;
    pages(&server, bare).await;
    overhead(&server).await;
}
