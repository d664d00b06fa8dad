//! Scale-out on PostgreSQL, against release server binaries on loopback, all in one run:
//!
//! - wake-up latency: a long-poll on instance B woken by a turn started through instance A,
//!   next to the same with both on A (the in-process wake-up, the baseline), p50 and p99 from
//!   A's acknowledgment of the append to B's answer;
//! - page GET throughput: one SQLite instance, one PostgreSQL instance, and two PostgreSQL
//!   instances on one database sharing the generator's connections.
//!
//! Uses `INTENT_TEST_DATABASE_URL` when set, else starts a throwaway PostgreSQL with
//! `.ci/postgres` (PostgreSQL 15 under /usr/lib/postgresql/15/bin).
//!
//! Run: `cargo bench -p intent-server --bench scale_out`

use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod load;
mod postgres;
#[allow(dead_code)]
#[path = "../tests/support/mod.rs"]
mod support;

use load::{CONNECTIONS, DURATION, Load, WARM_UP, drive};
use postgres::Postgres;

/// Wake-ups measured per pairing.
const WAKE_UPS: usize = 200;

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench());
}

/// Starts a turn in `session` (or a new one) through `base` and reads it to its end; the
/// session and the cursor after the turn.
async fn turn(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    session: Option<&str>,
) -> (String, String) {
    let mut body = json!({ "message": "hello" });
    if let Some(id) = session {
        body["sessionId"] = id.into();
    }
    let started = support::post(http, base, token, "/v1/agent/chat", &body).await;
    let id = started["sessionId"].as_str().unwrap().to_owned();
    let cursor = started["cursor"].as_str().unwrap();
    let after = support::read_until(http, base, token, &id, cursor, |e| {
        e["type"] == "turn_state" && e["state"] == "complete"
    })
    .await;
    (id, after)
}

/// Wake-up latencies, ascending: a long-poll on `reader` after the end of the session, woken by
/// a turn started through `writer`, measured from the writer's acknowledgment.
async fn wake_ups(reader: &str, writer: &str, token: &str) -> Vec<Duration> {
    let http = reqwest::Client::new();
    let (session, mut cursor) = turn(&http, writer, token, None).await;
    let mut latencies = Vec::new();
    for _ in 0..WAKE_UPS {
        let waiting = {
            let (http, reader, token, session, cursor) = (
                http.clone(),
                reader.to_owned(),
                token.to_owned(),
                session.clone(),
                cursor.clone(),
            );
            tokio::spawn(async move {
                let page = support::page(&http, &reader, &token, &session, Some(&cursor), 10_000)
                    .await
                    .unwrap();
                (page, Instant::now())
            })
        };
        // Let the long-poll reach the server and wait.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let body = json!({ "message": "hello", "sessionId": session });
        let started = support::post(&http, writer, token, "/v1/agent/chat", &body).await;
        let acknowledged = Instant::now();
        let (page, woke): (Value, Instant) = waiting.await.unwrap();
        assert!(!page["events"].as_array().unwrap().is_empty());
        latencies.push(woke.saturating_duration_since(acknowledged));
        cursor = support::read_until(
            &http,
            writer,
            token,
            &session,
            started["cursor"].as_str().unwrap(),
            |e| e["type"] == "turn_state" && e["state"] == "complete",
        )
        .await;
    }
    latencies.sort();
    latencies
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn report_wake(name: &str, latencies: &[Duration]) {
    println!(
        "{name:<44} p50 {:>6.2} ms  p99 {:>6.2} ms  max {:>6.2} ms",
        percentile(latencies, 0.50).as_secs_f64() * 1e3,
        percentile(latencies, 0.99).as_secs_f64() * 1e3,
        latencies.last().unwrap().as_secs_f64() * 1e3,
    );
}

fn report_load(name: &str, load: &Load, baseline: f64) {
    println!(
        "{name:<44} {:>8.0} req/s  p50 {:>6.2} ms  p99 {:>6.2} ms  {:.2}x SQLite",
        load.per_second(),
        load.percentile(0.50).as_secs_f64() * 1e3,
        load.percentile(0.99).as_secs_f64() * 1e3,
        load.per_second() / baseline,
    );
}

async fn bench() {
    let postgres = Postgres::start();
    let database = postgres.database("scale_out_bench").await;
    let keys = tempfile::tempdir().unwrap();
    let shared = ["--database-url", database.as_str()];
    let a = support::Server::start(keys.path(), "127.0.0.1:0", &shared);
    let public = [
        "--database-url",
        database.as_str(),
        "--public-url",
        a.base.as_str(),
    ];
    let b = support::Server::start(keys.path(), "127.0.0.1:0", &public);
    let token = a.agent_token(keys.path(), "bench", "agent:read agent:write");
    let sqlite_dir = tempfile::tempdir().unwrap();
    let sqlite = support::Server::start(sqlite_dir.path(), "127.0.0.1:0", &[]);
    let sqlite_token = sqlite.agent_token(sqlite_dir.path(), "bench", "agent:read agent:write");

    println!("{WAKE_UPS} wake-ups per pairing, from the writer's 202 to the reader's page");
    let same = wake_ups(&a.base, &a.base, &token).await;
    let across = wake_ups(&b.base, &a.base, &token).await;
    report_wake("long-poll on A, turn through A (baseline)", &same);
    report_wake("long-poll on B, turn through A (NOTIFY)", &across);

    // One session of three finished turns on each store, read a page of 20 events at a time.
    let http = reqwest::Client::new();
    let seeded = |base: String, token: String| {
        let http = http.clone();
        async move {
            let (session, _) = turn(&http, &base, &token, None).await;
            for _ in 0..2 {
                turn(&http, &base, &token, Some(&session)).await;
            }
            format!("/v1/agent/chat/{session}?limit=20")
        }
    };
    let sqlite_page = seeded(sqlite.base.clone(), sqlite_token.clone()).await;
    let pg_page = seeded(a.base.clone(), token.clone()).await;
    println!(
        "\n{CONNECTIONS} connections, {} s per target after {} s of warm-up",
        DURATION.as_secs(),
        WARM_UP.as_secs()
    );
    let sqlite_first = drive(&[&sqlite.base], &[&sqlite_page], Some(&sqlite_token)).await;
    let one = drive(&[&a.base], &[&pg_page], Some(&token)).await;
    let two = drive(&[&a.base, &b.base], &[&pg_page], Some(&token)).await;
    let sqlite_last = drive(&[&sqlite.base], &[&sqlite_page], Some(&sqlite_token)).await;
    let baseline = (sqlite_first.per_second() + sqlite_last.per_second()) / 2.0;
    report_load("page GET, SQLite, one instance", &sqlite_first, baseline);
    report_load("page GET, PostgreSQL, one instance", &one, baseline);
    report_load("page GET, PostgreSQL, two instances", &two, baseline);
    report_load(
        "page GET, SQLite, one instance, again",
        &sqlite_last,
        baseline,
    );
}
