//! SDK benchmark on loopback, against a server that answers each path with canned bytes (so
//! that the server costs next to nothing beside the client):
//!
//! 1. decoding: events per second through `Agent::follow_sse` (SSE frames, `page` JSON, typed
//!    models) and through `Agent::follow` (long-poll pages), against the same pages' JSON
//!    decoded into the typed models with nothing around it (and fetched by a bare GET);
//! 2. overhead: time per call of `Intent` (the token put on by the hooks, typed errors), against
//!    a bare reqwest GET of the same address with the same token, and against the request the
//!    SDK sends (the same headers: the generated client adds `accept` and `api-version`) sent
//!    bare with its body decoded into the same typed model. Measured twice: on one thread
//!    (a current-thread runtime, the canned server on it too), where a call's time is the work
//!    of the client and the server and the difference is the SDK's own; and on the multi-thread
//!    runtime, where each call also waits for threads to wake, which moves a difference by
//!    several µs from run to run.
//!
//! Run: `cargo bench -p intent-sdk --bench sdk` (`-- decode` or `-- calls` for one part;
//! `-- alone-sdk` and `-- alone-bare` to count a call's instructions, see `main`)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use intent_sdk::Intent;
use intent_sdk::auth::{Resource, StaticToken};
use intent_sdk::models::{AgentEvent, EventPage, OnePassEvent};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

const SESSION: &str = "ses_bench";
const PAGES: u64 = 200;
const PER_PAGE: u64 = 100;
const CALLS: u32 = 3_000;
const TOKEN: &str = "bench-token";

/// A page of `tool_result` events as the reference server writes it (its cursor first, each
/// entry's `type` first).
fn page(cursor: &str, seqs: std::ops::RangeInclusive<u64>, has_more: bool) -> String {
    let events: Vec<String> = seqs
        .map(|seq| {
            let event = AgentEvent::ToolResult {
                created_at: 1_795_000_000,
                is_error: false,
                name: "pipeline.evm.build".to_owned(),
                output: json!({ "status": "simulated", "digest": format!("sha256:{seq:064x}") }),
                seq: seq.try_into().unwrap(),
                tool_call_id: "call_1".to_owned(),
                turn_id: "turn_1".to_owned(),
            };
            serde_json::to_string(&event).unwrap()
        })
        .collect();
    format!(
        r#"{{"cursor":"{cursor}","events":[{}],"has_more":{has_more},"session_id":"{SESSION}"}}"#,
        events.join(",")
    )
}

/// The SSE `page` frames' data: `PAGES` pages of `PER_PAGE` events.
fn sse_pages() -> Vec<(String, String)> {
    (0..PAGES)
        .map(|p| {
            let first = p * PER_PAGE + 1;
            let cursor = format!("c{p}");
            let data = page(&cursor, first..=first + PER_PAGE - 1, false);
            (cursor, data)
        })
        .collect()
}

/// A page decoded with nothing around it: each entry in one pass, as the SDK reads it.
#[derive(serde::Deserialize)]
struct BarePage {
    events: Vec<OnePassEvent>,
    cursor: String,
    has_more: bool,
}

/// The baseline: the same pages' JSON decoded into the typed models with nothing around it, in
/// one pass, and, for comparison, into `EventPage` by serde's derive (an app decoding by hand).
fn bare_decode() -> f64 {
    let pages = sse_pages();
    let total = PAGES * PER_PAGE;
    let rate = |decode: &dyn Fn(&str) -> usize| {
        let mut best = Duration::MAX;
        for _ in 0..5 {
            let began = Instant::now();
            let events: usize = pages.iter().map(|(_, data)| decode(data)).sum();
            assert_eq!(events as u64, total);
            best = best.min(began.elapsed());
        }
        total as f64 / best.as_secs_f64()
    };
    let one_pass = rate(&|data| serde_json::from_str::<BarePage>(data).unwrap().events.len());
    let derived = rate(&|data| {
        serde_json::from_str::<EventPage>(data)
            .unwrap()
            .events
            .len()
    });
    println!(
        "bare decode: {one_pass:.0} events/s in one pass (OnePassEvent), {derived:.0} by serde's \
         derive (EventPage) (best of 5)"
    );
    one_pass
}

async fn sse(server: &Canned, bare: f64) {
    let mut body = String::new();
    for (cursor, data) in sse_pages() {
        body.push_str(&format!("event: page\nid: {cursor}\ndata: {data}\n\n"));
    }
    server.answer(
        &format!("/v1/agent/chat/{SESSION}/stream"),
        "text/event-stream",
        body,
    );
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

async fn pages(server: &Canned, bare: f64) {
    // A log of `count` pages of `events`, each page's cursor leading to the next, as a reader
    // catching up reads it.
    let (count, events) = (40, 500);
    let chat = format!("/v1/agent/chat/{SESSION}");
    for index in 0..count {
        let first = index * events + 1;
        let more = index + 1 < count;
        let body = page(&format!("c{}", index + 1), first..=first + events - 1, more);
        let at = match index {
            0 => chat.clone(),
            _ => format!("{chat}?cursor=c{index}"),
        };
        server.answer(&at, "application/json", body);
    }
    let http = reqwest::Client::new();
    let intent = intent(server, http.clone());
    let url = format!("{}{chat}", server.uri);
    let total = count * events;
    // Best of 5 each, as for the stream: bare GETs with the same decode, each after the cursor
    // of the page before, then the follower.
    let mut bare_get = Duration::MAX;
    let mut follow = Duration::MAX;
    for _ in 0..5 {
        let began = Instant::now();
        let mut cursor: Option<String> = None;
        let mut read = 0;
        loop {
            let mut request = http.get(&url).bearer_auth(TOKEN);
            if let Some(cursor) = &cursor {
                request = request.query(&[("cursor", cursor)]);
            }
            let body = request.send().await.unwrap().bytes().await.unwrap();
            let page: BarePage = serde_json::from_slice(&body).unwrap();
            read += page.events.len() as u64;
            if !page.has_more {
                break;
            }
            cursor = Some(page.cursor);
        }
        assert_eq!(read, total);
        bare_get = bare_get.min(began.elapsed());
        let began = Instant::now();
        let mut stream = Box::pin(intent.agent().follow(SESSION, None));
        for _ in 0..total {
            stream.next().await.unwrap().unwrap();
        }
        follow = follow.min(began.elapsed());
    }
    let fetched = total as f64 / bare_get.as_secs_f64();
    println!(
        "bare GETs + decode ({count} pages of {events}, one after another): {fetched:.0} events/s \
         (best of 5)"
    );
    let rate = total as f64 / follow.as_secs_f64();
    println!(
        "follow ({count} pages of {events}): {total} events in {:.1} ms: {rate:.0} events/s (best \
         of 5), {:.2}x the bare decode, {:.2}x the bare GETs + decode",
        follow.as_secs_f64() * 1e3,
        rate / bare,
        rate / fetched
    );
}

/// The three calls `overhead` compares, of one session read.
struct Calls {
    http: reqwest::Client,
    intent: Intent,
    url: String,
}

impl Calls {
    fn of(server: &Canned) -> Self {
        let session = json!({ "id": SESSION, "updatedAt": 1_795_000_000, "archived": false, "title": "bench" });
        let read = format!("/v1/agent/sessions/{SESSION}");
        server.answer(&read, "application/json", session.to_string());
        let http = reqwest::Client::new();
        let intent = intent(server, http.clone());
        let url = format!("{}{read}", server.uri);
        Self { http, intent, url }
    }

    /// Call `which`: 0 a bare GET, 1 the SDK's request sent bare and decoded into the typed
    /// model, 2 the SDK's call.
    async fn make(&self, which: usize) {
        match which {
            0 => {
                let request = self.http.get(&self.url).bearer_auth(TOKEN);
                let body = request.send().await.unwrap().bytes().await.unwrap();
                assert!(!body.is_empty());
            }
            1 => {
                let request = self
                    .http
                    .get(&self.url)
                    .bearer_auth(TOKEN)
                    .header("accept", "application/json")
                    .header("api-version", "1.0.0");
                let body = request.send().await.unwrap().bytes().await.unwrap();
                let decoded: intent_sdk::models::Session = serde_json::from_slice(&body).unwrap();
                assert_eq!(decoded.title, "bench");
            }
            _ => {
                let session = self.intent.agent().session(SESSION).await.unwrap();
                assert_eq!(session.title, "bench");
            }
        }
    }
}

async fn overhead(server: &Canned, runtime: &str) {
    let calls = Calls::of(server);
    // Per round: a bare GET, the SDK's request sent bare and decoded into the typed model, and
    // the SDK's call, each timed alone. Interleaved, so that all three see the same server and
    // the same warm connection pool, in an order that turns each round so that none always
    // comes first.
    let mut rounds: Vec<[Duration; 3]> = Vec::new();
    for round in 0..CALLS {
        let mut times = [Duration::ZERO; 3];
        for turn in 0..3 {
            let which = (round as usize + turn) % 3;
            let began = Instant::now();
            calls.make(which).await;
            times[which] = began.elapsed();
        }
        rounds.push(times);
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
        "per call, {runtime} ({CALLS} rounds): p50 bare reqwest {:.1} µs, the same request bare + typed decode {:.1} µs, \
         SDK {:.1} µs; SDK overhead (paired median) over bare {:.1} µs, over the same request bare + typed decode {:.1} µs",
        p50(0),
        p50(1),
        p50(2),
        over(0),
        over(1)
    );
}

/// An Agent client of `server` through `http`.
fn intent(server: &Canned, http: reqwest::Client) -> Intent {
    Intent::builder(&server.uri)
        .token(Resource::Agent, StaticToken::new(TOKEN))
        .http_client(http)
        .build()
        .unwrap()
}

fn main() {
    // `-- decode` or `-- calls` runs one part alone (to profile it).
    let only = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    let runs = |part: &str| only.as_deref().is_none_or(|only| only == part);
    let threads = tokio::runtime::Runtime::new().unwrap();
    if runs("decode") {
        threads.block_on(async {
            let server = Canned::start().await;
            let bare = bare_decode();
            sse(&server, bare).await;
            pages(&server, bare).await;
        });
    }
    // `-- alone-sdk` or `-- alone-bare` makes 1,000 SDK calls, or as many of the same request
    // sent bare and decoded, on one thread: under callgrind, the difference of the two totals
    // over 1,000 is what the SDK adds per call in instructions.
    if let Some(which) = only.as_deref().and_then(|only| match only {
        "alone-bare" => Some(1),
        "alone-sdk" => Some(2),
        _ => None,
    }) {
        one_thread().block_on(async {
            let calls = Calls::of(&Canned::start().await);
            for _ in 0..1_000 {
                calls.make(which).await;
            }
        });
        return;
    }
    if runs("calls") {
        one_thread().block_on(async { overhead(&Canned::start().await, "one thread").await });
        threads.block_on(async { overhead(&Canned::start().await, "multi-thread").await });
    }
}

/// A current-thread runtime: a call's wait on it is the work of the client and the server.
fn one_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A loopback HTTP/1.1 server that answers every request on a keep-alive connection with the
/// canned answer of its path (the query left out), or 404.
struct Canned {
    uri: String,
    answers: Arc<Mutex<HashMap<String, Arc<[u8]>>>>,
}

impl Canned {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri = format!("http://{}", listener.local_addr().unwrap());
        let answers: Arc<Mutex<HashMap<String, Arc<[u8]>>>> = Arc::default();
        let shared = answers.clone();
        tokio::spawn(async move {
            while let Ok((connection, _)) = listener.accept().await {
                tokio::spawn(serve(connection, shared.clone()));
            }
        });
        Self { uri, answers }
    }

    /// Answers `path` with 200 and `body`.
    fn answer(&self, path: &str, content_type: &str, body: String) {
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let whole: Arc<[u8]> = [head.into_bytes(), body.into_bytes()].concat().into();
        self.answers.lock().unwrap().insert(path.to_owned(), whole);
    }
}

/// Reads each request's head on `connection` and writes its canned answer.
async fn serve(connection: tokio::net::TcpStream, answers: Arc<Mutex<HashMap<String, Arc<[u8]>>>>) {
    let (read, mut write) = connection.into_split();
    let mut lines = BufReader::new(read);
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let target = line.split(' ').nth(1).unwrap_or_default();
        // Answered by path, and by path and cursor where an answer is canned for that cursor.
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let cursor = query
            .split('&')
            .find_map(|pair| pair.strip_prefix("cursor="));
        let path = match cursor {
            Some(cursor) => format!("{path}?cursor={cursor}"),
            None => path.to_owned(),
        };
        loop {
            line.clear();
            if lines.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
        }
        let answer = answers.lock().unwrap().get(&path).cloned();
        let answer = answer.unwrap_or_else(|| {
            Arc::from(&b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"[..])
        });
        if write.write_all(&answer).await.is_err() {
            return;
        }
    }
}
