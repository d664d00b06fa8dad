//! HTTP load benchmark of the hot path, against the release server binary on loopback: page
//! GET (the same page for every reader, kept), page GETs at `CURSORS` distinct cursors in turn
//! (each page made anew), session GET and `/healthz`, next to a bare axum handler that is sent the
//! page GET's request (its path, query and bearer token) and answers the same page bytes, all
//! driven by the same in-process load generator (hyper HTTP/1.1 clients over `CONNECTIONS`
//! keep-alive connections). The bare handler runs in a child process like the server, so both
//! share the machine with the generator alike. Prints req/s, p50 and p99, each ratio to the bare
//! handler, and the CPU time the serving process spent per request (from `/proc`, on Linux).
//!
//! With `INTENT_BENCH_BASELINE` set to another build of the server binary (an earlier commit's,
//! built in a worktree), its session GET, page GET and page GETs at distinct cursors are driven
//! in the same run, beside ours.
//!
//! Run: `cargo bench -p intent-server --bench http`

use std::time::Duration;

use hyper::body::Bytes;
use serde_json::{Value, json};

mod load;
// Its server process and requests; the process tests' helpers (the metrics' address) unused.
#[allow(dead_code)]
#[path = "../tests/support/mod.rs"]
mod support;

use load::{CONNECTIONS, DURATION, Load, WARM_UP, drive};
/// Turns written to the measured session before the run: 4 events each.
const TURNS: usize = 3;
/// Distinct cursors read in turn, each opening a page of `TURNS * 4` events (as many as the kept
/// page holds), in a session of `CURSOR_TURNS` turns.
const CURSORS: usize = 24;
const CURSOR_TURNS: usize = 10;

/// The child-process mode: serve `body` (a file) at every path of `addr`.
const BARE_ARG: &str = "bare-server";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if args.get(1).map(String::as_str) == Some(BARE_ARG) {
        runtime.block_on(bare_server(&args[2]));
    } else {
        runtime.block_on(bench());
    }
}

/// A bare axum handler answering `body_file`'s bytes as JSON at every path, on a free port it
/// prints.
async fn bare_server(body_file: &str) {
    let body = Bytes::from(std::fs::read(body_file).unwrap());
    let app = axum::Router::new().fallback(move || {
        let body = body.clone();
        async move {
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                body,
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("listening on http://{}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.unwrap();
}

/// `server`, serving `data_dir`, with one session of `TURNS` finished turns; its token and
/// session.
async fn seeded(server: &support::Server, data_dir: &std::path::Path) -> (String, String) {
    let token = server.agent_token(data_dir, "bench", "agent:read agent:write");
    let session = session_of(server, &token, TURNS).await;
    (token, session)
}

/// A session of `turns` finished turns on `server`.
async fn session_of(server: &support::Server, token: &str, turns: usize) -> String {
    let http = reqwest::Client::new();
    let mut session: Option<String> = None;
    for _ in 0..turns {
        let mut body = json!({ "message": "hello" });
        if let Some(id) = &session {
            body["sessionId"] = id.clone().into();
        }
        let started = support::post(&http, &server.base, token, "/v1/agent/chat", &body).await;
        let id = started["sessionId"].as_str().unwrap().to_owned();
        let cursor = started["cursor"].as_str().unwrap();
        support::read_until(&http, &server.base, token, &id, cursor, |e| {
            e["type"] == "turn_state" && e["state"] == "complete"
        })
        .await;
        session = Some(id);
    }
    session.unwrap()
}

/// The page GETs of a session of `CURSOR_TURNS` turns at `CURSORS` distinct cursors (after its
/// first event, its second, and so on), each for a page of `TURNS * 4` events.
async fn at_cursors(server: &support::Server, token: &str) -> Vec<String> {
    let session = session_of(server, token, CURSOR_TURNS).await;
    let http = reqwest::Client::new();
    let mut cursor: Option<String> = None;
    let mut paths = Vec::new();
    for _ in 0..CURSORS {
        let after = cursor.map_or_else(String::new, |cursor| format!("&cursor={cursor}"));
        let path = format!("/v1/agent/chat/{session}?limit=1{after}");
        let one = support::get(&http, &server.base, token, &path).await;
        let next = one["cursor"].as_str().unwrap().to_owned();
        paths.push(format!(
            "/v1/agent/chat/{session}?limit={}&cursor={next}",
            TURNS * 4
        ));
        cursor = Some(next);
    }
    paths
}

/// What one target answered, and the CPU time its serving process spent per request.
struct Measured {
    load: Load,
    cpu: Option<Duration>,
}

/// [`drive`], with the CPU time process `pid` (the one serving `bases`) spent per request while
/// measured.
async fn measured(pid: u32, bases: &[&str], paths: &[&str], token: Option<&str>) -> Measured {
    let sampler = tokio::spawn(async move {
        tokio::time::sleep(WARM_UP).await;
        let from = cpu_time(pid);
        tokio::time::sleep(DURATION).await;
        Some(cpu_time(pid)?.saturating_sub(from?))
    });
    let load = drive(bases, paths, token).await;
    let spent = sampler.await.unwrap();
    let requests = u32::try_from(load.requests.max(1)).unwrap_or(u32::MAX);
    Measured {
        cpu: spent.map(|spent| spent / requests),
        load,
    }
}

/// The CPU time (user and system) process `pid` has used, from `/proc/<pid>/stat`; `None`
/// where there is none (not Linux).
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis come fields 3 on: utime is 14, stime 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // In USER_HZ, which is 100 on x86 and ARM Linux.
    Some(Duration::from_millis(ticks * 10))
}

fn report(name: &str, measured: &Measured, bare_per_second: f64) {
    let load = &measured.load;
    let cpu = measured.cpu.map_or_else(String::new, |cpu| {
        format!("  server CPU {:>5.1} µs/req", cpu.as_secs_f64() * 1e6)
    });
    println!(
        "{name:<42} {:>9.0} req/s  p50 {:>6.2} ms  p99 {:>6.2} ms  {:.2}x bare{cpu}",
        load.per_second(),
        load.percentile(0.50).as_secs_f64() * 1e3,
        load.percentile(0.99).as_secs_f64() * 1e3,
        load.per_second() / bare_per_second,
    );
}

async fn bench() {
    let data_dir = tempfile::tempdir().unwrap();
    let server = support::Server::start(data_dir.path(), "127.0.0.1:0", &[]);
    let (token, session) = seeded(&server, data_dir.path()).await;
    let page_path = format!("/v1/agent/chat/{session}?limit=20");
    let page = reqwest::Client::new()
        .get(format!("{}{page_path}", server.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let events = serde_json::from_slice::<Value>(&page).unwrap()["events"]
        .as_array()
        .unwrap()
        .len();
    let body_file = data_dir.path().join("page.json");
    std::fs::write(&body_file, &page).unwrap();
    let bare = bare_child(&body_file);

    println!(
        "{CONNECTIONS} connections, {} s per target after {} s of warm-up; the page holds {events} events, {} bytes",
        DURATION.as_secs(),
        WARM_UP.as_secs(),
        page.len()
    );
    // The bare handler runs first and last; ratios are to the mean of both runs.
    let (bare_pid, server_pid) = (bare.child.id(), server.child.id());
    let bare_first = measured(bare_pid, &[&bare.base], &[&page_path], Some(&token)).await;
    let healthz = measured(server_pid, &[&server.base], &["/healthz"], None).await;
    let ours = measured_server(&server, &token, &session).await;
    let baseline = match std::env::var_os("INTENT_BENCH_BASELINE") {
        Some(binary) => Some(baseline(binary.as_ref()).await),
        None => None,
    };
    let bare_last = measured(bare_pid, &[&bare.base], &[&page_path], Some(&token)).await;
    let bare_per_second = (bare_first.load.per_second() + bare_last.load.per_second()) / 2.0;
    report(
        "bare axum handler (same bytes)",
        &bare_first,
        bare_per_second,
    );
    report("bare axum handler, again", &bare_last, bare_per_second);
    report("GET /healthz", &healthz, bare_per_second);
    let names = [
        "GET /v1/agent/sessions/{id}".to_owned(),
        "GET /v1/agent/chat/{id}?limit=20".to_owned(),
        format!("the same at {CURSORS} cursors in turn (made anew)"),
    ];
    for (name, measured) in names.iter().zip(&ours) {
        report(name, measured, bare_per_second);
    }
    for (name, measured) in names.iter().zip(baseline.iter().flatten()) {
        report(&format!("baseline: {name}"), measured, bare_per_second);
    }
}

/// The session GET, page GET and page GETs at distinct cursors of `server`, whose `session` is
/// seeded, read with `token`.
async fn measured_server(server: &support::Server, token: &str, session: &str) -> [Measured; 3] {
    let (pid, bases) = (server.child.id(), [server.base.as_str()]);
    let session_path = format!("/v1/agent/sessions/{session}");
    let session_get = measured(pid, &bases, &[&session_path], Some(token)).await;
    let page_path = format!("/v1/agent/chat/{session}?limit=20");
    let page_get = measured(pid, &bases, &[&page_path], Some(token)).await;
    let cursor_paths = at_cursors(server, token).await;
    let cursor_paths: Vec<&str> = cursor_paths.iter().map(String::as_str).collect();
    let made_anew = measured(pid, &bases, &cursor_paths, Some(token)).await;
    [session_get, page_get, made_anew]
}

/// [`measured_server`] of the server build `binary`, seeded as ours is.
async fn baseline(binary: &std::path::Path) -> [Measured; 3] {
    let data_dir = tempfile::tempdir().unwrap();
    let server = support::Server::start_binary(binary, data_dir.path(), "127.0.0.1:0", &[]);
    let (token, session) = seeded(&server, data_dir.path()).await;
    measured_server(&server, &token, &session).await
}

/// This binary in its bare-server mode, serving `body_file`.
fn bare_child(body_file: &std::path::Path) -> support::Server {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .arg(BARE_ARG)
        .arg(body_file)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    support::Server {
        child,
        base,
        metrics: None,
        binary: std::env::current_exe().unwrap(),
    }
}
