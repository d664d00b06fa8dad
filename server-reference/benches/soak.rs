//! Soak test of the clean-up: the release server binary, with lifetimes of a few seconds, is
//! driven by `WORKERS` clients that each, in a loop, take a turn to an action, resolve it under a
//! fresh idempotency key, abandon a long-poll and an SSE stream, delete the session and start a
//! device authorization they never finish. Every `SAMPLE` it reads the rows of every table (from
//! the SQLite file, read-only) and the server's RSS. It fails when a table or the RSS at the end
//! is well above what it was after the first third of the run, once the clean-up had caught up.
//! Usage is counted per day (`usage_counters`), so it is held flat as every other table is.
//!
//! Run: `cargo bench -p intent-server --bench soak` (`INTENT_SOAK_SECS`, default 180).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};

#[allow(dead_code)]
#[path = "../tests/support/mod.rs"]
mod support;

/// Concurrent clients.
const WORKERS: usize = 4;
/// Time between two samples.
const SAMPLE: Duration = Duration::from_secs(10);
/// Lifetimes of the run, in seconds: short, so that the clean-up has work every second.
const SERVE_ARGS: [&str; 8] = [
    "--cleanup-interval",
    "1",
    "--device-code-ttl",
    "2",
    "--idempotency-key-ttl",
    "5",
    "--keep-expired",
    "2",
];
/// A table may end this much above its level after the first third (times, plus rows).
const TABLE_SLACK: (f64, i64) = (1.5, 20);
/// The RSS may end this much above its level after the first third (times, plus KiB).
const RSS_SLACK: (f64, i64) = (1.25, 4096);
const RECIPIENT: &str = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

/// Rows per table and the server's RSS in KiB, at one moment.
struct Sample {
    at: Duration,
    rows: BTreeMap<String, i64>,
    rss_kib: i64,
}

fn main() {
    let seconds = std::env::var("INTENT_SOAK_SECS")
        .ok()
        .map(|s| s.parse::<u64>().expect("INTENT_SOAK_SECS is whole seconds"))
        .unwrap_or(180);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let flat = runtime.block_on(soak(Duration::from_secs(seconds)));
    if !flat {
        std::process::exit(1);
    }
}

/// Runs the soak for `duration`; whether every checked figure stayed flat.
async fn soak(duration: Duration) -> bool {
    let data_dir = tempfile::tempdir().unwrap();
    let server = support::Server::start(data_dir.path(), "127.0.0.1:0", &SERVE_ARGS);
    let scopes = "agent:read agent:write agent:actions:resolve";
    let token = server.agent_token(data_dir.path(), "soak", scopes);
    let base = server.base.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let (base, token) = (base.clone(), token.clone());
            let (stop, rounds) = (stop.clone(), rounds.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let mut round = 0;
                while !stop.load(Ordering::Relaxed) {
                    abandon(&http, &base, &token, &format!("soak-{worker}-{round}")).await;
                    round += 1;
                    rounds.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();

    let started = Instant::now();
    let mut samples = vec![sample(data_dir.path(), server.child.id(), started).await];
    while started.elapsed() < duration {
        tokio::time::sleep(SAMPLE.min(duration.saturating_sub(started.elapsed()))).await;
        samples.push(sample(data_dir.path(), server.child.id(), started).await);
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.unwrap();
    }
    let rounds = rounds.load(Ordering::Relaxed);
    println!(
        "{rounds} rounds by {WORKERS} clients in {:.0} s ({:.1} rounds/s)",
        started.elapsed().as_secs_f64(),
        rounds as f64 / started.elapsed().as_secs_f64()
    );
    print_samples(&samples);
    judge(&samples)
}

/// One round of a client that leaves everything behind it.
async fn abandon(http: &reqwest::Client, base: &str, token: &str, key: &str) {
    let message = json!({ "message": format!("send 1 ETH to {RECIPIENT}") });
    let started = support::post(http, base, token, "/v1/agent/chat", &message).await;
    let session = started["sessionId"].as_str().expect("a session id");
    let cursor = started["cursor"].as_str().expect("a cursor");
    let action = Mutex::new(Value::Null);
    let cursor = support::read_until(http, base, token, session, cursor, |event| {
        let found = event["type"] == "action";
        if found {
            *action.lock().unwrap() = event["action"].clone();
        }
        found
    })
    .await;
    let action = action.into_inner().unwrap();
    let resolve = format!(
        "{base}/v1/agent/sessions/{session}/actions/{}/resolve",
        action["actionId"].as_str().expect("an action id")
    );
    let rejection = json!({
        "revision": 1,
        "result": { "outcome": "rejected", "digest": action["build"]["digest"], "reason": "soak" },
    });
    let resolved = http
        .post(resolve)
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .json(&rejection)
        .send()
        .await
        .expect("the server answers");
    assert_eq!(resolved.status(), 200, "the resolution is taken");

    // A long-poll and a stream that the client gives up on.
    let events = format!("{base}/v1/agent/chat/{session}");
    let gone = http
        .get(&events)
        .bearer_auth(token)
        .query(&[("cursor", cursor.as_str()), ("wait", "20000")])
        .timeout(Duration::from_millis(20))
        .send()
        .await;
    assert!(gone.is_err() || gone.unwrap().status() == 200);
    let mut stream = http
        .get(format!("{events}/stream"))
        .bearer_auth(token)
        .send()
        .await
        .expect("the stream opens");
    assert_eq!(stream.status(), 200, "the stream opens");
    stream
        .chunk()
        .await
        .expect("the stream sends its first page");
    drop(stream);

    let deleted = http
        .delete(format!("{base}/v1/agent/sessions/{session}"))
        .bearer_auth(token)
        .send()
        .await
        .expect("the server answers");
    assert_eq!(deleted.status(), 204, "the session is deleted");

    let device = http
        .post(format!("{base}/api/auth/device/code"))
        .form(&[
            ("client_id", "intent-cli"),
            ("scope", "agent:read"),
            ("resource", &format!("{base}/v1/agent")),
        ])
        .send()
        .await
        .expect("the server answers");
    assert_eq!(device.status(), 200, "the device authorization starts");
}

/// Every table's rows, read from the SQLite file beside the running server, and its RSS.
async fn sample(data_dir: &Path, pid: u32, started: Instant) -> Sample {
    let mut db = SqliteConnectOptions::new()
        .filename(data_dir.join("intent.db"))
        .read_only(true)
        .connect()
        .await
        .expect("the database opens read-only");
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table'
         AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_sqlx%' ORDER BY name",
    )
    .fetch_all(&mut db)
    .await
    .unwrap();
    let mut rows = BTreeMap::new();
    for table in tables {
        // The names come from sqlite_master, not from input.
        let count = format!("SELECT COUNT(*) FROM \"{table}\"");
        let count: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(count))
            .fetch_one(&mut db)
            .await
            .unwrap();
        rows.insert(table, count);
    }
    db.close().await.unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("a Linux /proc");
    let rss_kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status");
    Sample {
        at: started.elapsed(),
        rows,
        rss_kib,
    }
}

fn print_samples(samples: &[Sample]) {
    let tables: Vec<&String> = samples[0].rows.keys().collect();
    let mut header = format!("| {:>5} | {:>8} |", "s", "RSS KiB");
    for table in &tables {
        header.push_str(&format!(" {table} |"));
    }
    println!("{header}");
    for sample in samples {
        let mut line = format!(
            "| {:>5.0} | {:>8} |",
            sample.at.as_secs_f64(),
            sample.rss_kib
        );
        for table in &tables {
            line.push_str(&format!(" {} |", sample.rows.get(*table).unwrap_or(&0)));
        }
        println!("{line}");
    }
}

/// Compares the last third of the run with the end of the first: whether nothing grew.
fn judge(samples: &[Sample]) -> bool {
    assert!(
        samples.len() >= 4,
        "the run is too short to judge: raise INTENT_SOAK_SECS"
    );
    let third = samples.len() / 3;
    let (early, late) = (&samples[1..=third], &samples[samples.len() - third..]);
    let peak = |samples: &[Sample], figure: &dyn Fn(&Sample) -> i64| {
        samples.iter().map(figure).max().unwrap_or(0)
    };
    let mut flat = true;
    let mut check = |name: &str, figure: &dyn Fn(&Sample) -> i64, (times, plus): (f64, i64)| {
        let (before, after) = (peak(early, figure), peak(late, figure));
        let bound = (before as f64 * times) as i64 + plus;
        if after > bound {
            println!("GREW: {name} from {before} to {after} (bound {bound})");
            flat = false;
        }
    };
    check("RSS KiB", &|s| s.rss_kib, RSS_SLACK);
    for table in samples[0].rows.keys() {
        check(table, &|s| s.rows[table], TABLE_SLACK);
    }
    if flat {
        println!("flat: neither a table nor the RSS grew after the first third");
    }
    flat
}
