//! Rolling restarts under load, as a deployment of several instances is upgraded: release server
//! binaries behind a round-robin TCP front on loopback, driven through the SDK while the
//! instances restart one at a time, SIGTERM (drain) and kill -9 in turn.
//!
//! - `postgres`: two instances on one PostgreSQL database, each restarted twice.
//! - `sqlite`: one instance restarted in place four times (the front refuses while it is down).
//!
//! The load, for `INTENT_ROLLING_SECS` (default 60): `SESSIONS` sessions taking turns in turn of
//! three kinds: one that waits `INTENT_ROLLING_WAIT_MS` (default 3,000: a step of several
//! seconds, which a restart cuts), one
//! that raises an action, resolved `DECIDE` later with an idempotency key, and an instant one;
//! and `FOLLOWERS` per session reading its log, long-poll and SSE mixed. Then every follower
//! reads on to the end of its session's log, and the log itself is read whole. It reports, and
//! fails unless the first four are 0:
//! - events lost: in the log, never delivered to a follower;
//! - events seen twice by a follower;
//! - double effects: a turn that ended twice, or an action with two results;
//! - turns failed: a turn that ended `failed` (a restart hands a turn over or orphans it, and it
//!   goes on elsewhere);
//! - turns interrupted: ended `interrupted` (here, only as not resumable);
//! - turns resumed: handed over or orphaned turns an instance claimed and carried on (the sum of
//!   the instances' `intent_agent_turns_resumed_total`, scraped before each stop and at the end);
//! - the errors that surfaced to the app through the SDK's retries: calls that failed (a
//!   driver then starts its next turn) and the reconnections a follower's stream reported;
//! - the times a follower's view restarted (the SDK's answer to a refused cursor);
//! - the longest stall a follower saw: how much later it received an event than the first of
//!   its session's followers did.
//!
//! Uses `INTENT_TEST_DATABASE_URL` when set, else starts a throwaway PostgreSQL with
//! `.ci/postgres`. `INTENT_ROLLING_BACKENDS` (`postgres,sqlite` by default) picks the runs.
//!
//! Run: `cargo bench -p intent-server --bench rolling_restart`

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use intent_sdk::Intent;
use intent_sdk::agent::{Decision, LogItem, TurnOutcome};
use intent_sdk::auth::{Resource, StaticToken};
use intent_sdk::models::{AgentEvent, ChatStartRequest, TurnState};
use tokio::net::{TcpListener, TcpStream};

mod postgres;
// Its server process only: the requests go through the SDK.
#[allow(dead_code)]
#[path = "../tests/support/mod.rs"]
mod support;

use postgres::Postgres;

/// Sessions taking turns.
const SESSIONS: usize = 50;
/// Followers per session: the even ones long-poll, the odd ones read SSE.
const FOLLOWERS: usize = 4;
/// Restarts in a run, spread evenly over it; they alternate SIGTERM and kill -9.
const RESTARTS: usize = 4;
/// How long a follower may take to read on to the end of the log once the turns stop.
const CATCH_UP: Duration = Duration::from_secs(60);
/// How many times a driver waits for a turn whose wait failed.
const WAITS: usize = 20;
const ACTION: &str = "send 1 USDC to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
/// Seconds a draining instance lets its turns run before it hands them over: less than a
/// waiting turn's wait, so that a SIGTERM hands turns over.
const TURN_GRACE: &str = "1";
/// How long a driver takes to decide an action.
const DECIDE: Duration = Duration::from_secs(1);
const SCOPES: &str = "agent:read agent:write agent:actions:resolve";

fn main() {
    let seconds = std::env::var("INTENT_ROLLING_SECS")
        .ok()
        .map(|s| {
            s.parse::<u64>()
                .expect("INTENT_ROLLING_SECS is whole seconds")
        })
        .unwrap_or(60);
    let backends =
        std::env::var("INTENT_ROLLING_BACKENDS").unwrap_or_else(|_| "postgres,sqlite".into());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let hold = Duration::from_secs(seconds);
    let mut tallies = Vec::new();
    for backend in backends.split(',') {
        let tally = match backend {
            "postgres" => runtime.block_on(on_postgres(hold)),
            "sqlite" => runtime.block_on(on_sqlite(hold)),
            other => panic!("unknown backend {other:?}: postgres or sqlite"),
        };
        tallies.push(tally);
    }
    println!(
        "\n| run | restarts | turns | resolutions | events | lost | seen twice | double effects | turns failed | turns interrupted | turns resumed | calls failed | stream errors | view restarts | longest stall |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for tally in &tallies {
        println!("{tally}");
    }
    let broken: Vec<&Tally> = tallies
        .iter()
        .filter(|t| t.lost + t.twice + t.double + t.failed + t.interrupted > 0)
        .collect();
    assert!(
        broken.is_empty(),
        "lost, duplicated, doubled, failed or interrupted: {broken:?}"
    );
}

/// Two instances on one PostgreSQL database behind the front.
async fn on_postgres(hold: Duration) -> Tally {
    let postgres = Postgres::start();
    let database = postgres.database("rolling_restart_bench").await;
    let keys = tempfile::tempdir().unwrap();
    let front = Front::new(2);
    let args = [
        "--database-url",
        &database,
        "--public-url",
        &front.base,
        "--turn-grace",
        TURN_GRACE,
    ];
    let instances = front
        .backends
        .iter()
        .map(|addr| Instance::start(keys.path(), addr, &args))
        .collect();
    let label = "postgres, 2 instances";
    run(label, hold, front, instances, keys.path()).await
}

/// One SQLite instance restarted in place behind the front.
async fn on_sqlite(hold: Duration) -> Tally {
    let dir = tempfile::tempdir().unwrap();
    let front = Front::new(1);
    let args = [
        "--public-url",
        front.base.as_str(),
        "--turn-grace",
        TURN_GRACE,
    ];
    let instance = Instance::start(dir.path(), &front.backends[0], &args);
    run(
        "sqlite, 1 instance",
        hold,
        front,
        vec![instance],
        dir.path(),
    )
    .await
}

/// What one run measured.
#[derive(Debug, Default)]
struct Tally {
    label: &'static str,
    restarts: Vec<String>,
    turns: usize,
    resolutions: usize,
    events: usize,
    lost: usize,
    twice: usize,
    double: usize,
    failed: usize,
    interrupted: usize,
    resumed: usize,
    calls_failed: usize,
    stream_errors: usize,
    view_restarts: usize,
    stall: Duration,
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} s |",
            self.label,
            self.restarts.join(", "),
            self.turns,
            self.resolutions,
            self.events,
            self.lost,
            self.twice,
            self.double,
            self.failed,
            self.interrupted,
            self.resumed,
            self.calls_failed,
            self.stream_errors,
            self.view_restarts,
            self.stall.as_secs_f64()
        )
    }
}

/// A follower of one session's log, reading in a task of its own.
struct Follower {
    session: String,
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

/// What one follower saw.
#[derive(Debug, Default)]
struct Seen {
    /// Each event's seq, and when it arrived.
    seqs: Vec<(u64, Instant)>,
    errors: usize,
    /// Times the SDK told the follower to drop its view and read the log again.
    restarts: usize,
}

async fn run(
    label: &'static str,
    hold: Duration,
    front: Front,
    mut instances: Vec<Instance>,
    keys: &Path,
) -> Tally {
    let wait_ms: u64 = std::env::var("INTENT_ROLLING_WAIT_MS")
        .ok()
        .map(|ms| {
            ms.parse()
                .expect("INTENT_ROLLING_WAIT_MS is whole milliseconds")
        })
        .unwrap_or(3_000);
    let token = token(keys, &front.base);
    let intent = Intent::builder(front.base.clone())
        .token(Resource::Agent, StaticToken::new(token))
        .turn_deadline(Duration::from_secs(60))
        .build()
        .unwrap();
    tokio::spawn(front.clone().serve());
    let turning = Arc::new(AtomicBool::new(true));
    let (turns, resolutions, errors) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let sessions: Arc<Mutex<Vec<String>>> = Arc::default();
    let followers: Arc<Mutex<Vec<Follower>>> = Arc::default();
    let mut drivers = Vec::new();
    for driver in 0..SESSIONS {
        let (intent, turning, turns, resolutions, errors) = (
            intent.clone(),
            turning.clone(),
            turns.clone(),
            resolutions.clone(),
            errors.clone(),
        );
        let (sessions, followers) = (sessions.clone(), followers.clone());
        drivers.push(tokio::spawn(async move {
            let mut session: Option<String> = None;
            let mut round = 0;
            while turning.load(Ordering::Relaxed) {
                round += 1;
                let wait = format!("wait {wait_ms}");
                let message = match (driver + round) % 3 {
                    0 => ACTION,
                    1 => wait.as_str(),
                    _ => "hello",
                };
                match take_turn(&intent, session.as_deref(), message, &errors).await {
                    Ok((id, resolved)) => {
                        turns.fetch_add(1, Ordering::Relaxed);
                        resolutions.fetch_add(resolved, Ordering::Relaxed);
                        if session.is_none() {
                            sessions.lock().unwrap().push(id.clone());
                            let mut followers = followers.lock().unwrap();
                            for follower in 0..FOLLOWERS {
                                followers.push(follow(&intent, &id, follower % 2 == 1));
                            }
                            session = Some(id);
                        }
                    }
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        }));
    }
    let started = Instant::now();
    let mut restarts = Vec::new();
    for restart in 0..RESTARTS {
        let at = hold * (restart as u32 + 1) / (RESTARTS as u32 + 1);
        tokio::time::sleep(at.saturating_sub(started.elapsed())).await;
        let count = instances.len();
        let instance = &mut instances[restart % count];
        let how = if (restart / count).is_multiple_of(2) {
            Stop::Term
        } else {
            Stop::Kill
        };
        let took = tokio::task::block_in_place(|| {
            // A rolling upgrade takes the instance out of rotation before SIGTERM (as a load
            // balancer's deregistration does) and back once it listens; a crash is found by
            // the front's refused connections alone.
            front.rotate(restart % count, matches!(how, Stop::Kill));
            let took = instance.restart(how);
            front.rotate(restart % count, true);
            took
        });
        restarts.push(format!("{how:?} {} ms", took.as_millis()));
    }
    tokio::time::sleep(hold.saturating_sub(started.elapsed())).await;
    turning.store(false, Ordering::Relaxed);
    for driver in drivers {
        driver.await.unwrap();
    }
    // The log as it stands, read whole, and each follower read on to its end.
    let mut tally = Tally {
        label,
        restarts,
        turns: turns.load(Ordering::Relaxed),
        resolutions: resolutions.load(Ordering::Relaxed),
        calls_failed: errors.load(Ordering::Relaxed),
        ..Tally::default()
    };
    let mut logs = HashMap::new();
    let sessions = sessions.lock().unwrap().clone();
    for session in sessions {
        let log = read_log(&intent, &session).await;
        tally.double += double_effects(&log);
        tally.failed += ended(&log, TurnState::Failed);
        tally.interrupted += ended(&log, TurnState::Interrupted);
        tally.events += log.len();
        logs.insert(session, log);
    }
    let deadline = Instant::now() + CATCH_UP;
    let followers = std::mem::take(&mut *followers.lock().unwrap());
    let mut first: HashMap<(&str, u64), Instant> = HashMap::new();
    for Follower {
        session,
        seen,
        task,
        ..
    } in &followers
    {
        let last = logs[session].last().map_or(0, AgentEvent::seq);
        let read = || seen.lock().unwrap().seqs.last().map_or(0, |(seq, _)| *seq);
        while read() < last && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        task.abort();
        for (seq, at) in &seen.lock().unwrap().seqs {
            let earliest = first.entry((session.as_str(), *seq)).or_insert(*at);
            *earliest = (*earliest).min(*at);
        }
    }
    for Follower { session, seen, .. } in &followers {
        let seen = seen.lock().unwrap();
        let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
        for (seq, at) in &seen.seqs {
            *counts.entry(*seq).or_default() += 1;
            let lag = at.duration_since(first[&(session.as_str(), *seq)]);
            tally.stall = tally.stall.max(lag);
        }
        tally.lost += logs[session]
            .iter()
            .filter(|event| !counts.contains_key(&event.seq()))
            .count();
        tally.twice += counts.values().filter(|&&n| n > 1).count();
        tally.stream_errors += seen.errors;
        tally.view_restarts += seen.restarts;
    }
    tally.resumed = instances.iter().map(Instance::resumed).sum();
    drop(instances);
    tally
}

/// Takes one turn with `message` in `session` (a new one when `None`), resolving the action it
/// raises: the session, and how many resolutions it made.
async fn take_turn(
    intent: &Intent,
    session: Option<&str>,
    message: &str,
    failed: &AtomicUsize,
) -> Result<(String, usize), intent_sdk::Error> {
    let agent = intent.agent();
    let request: ChatStartRequest = ChatStartRequest::builder()
        .message(message)
        .session_id(session.map(|id| id.parse().expect("a session id")))
        .try_into()
        .expect("a chat start request");
    let started = agent.start(&request).await?;
    let session = started.session_id.to_string();
    let turn = started.turn_id.to_string();
    let mut outcome = settled(intent, &session, &turn, &started.cursor, failed).await?;
    let mut resolved = 0;
    while outcome.state == TurnState::AwaitingAction {
        let action = outcome.action.take().expect("an awaited action");
        tokio::time::sleep(DECIDE).await;
        agent.resolve(&session, &action, Decision::Reject).await?;
        resolved += 1;
        outcome = settled(intent, &session, &turn, &outcome.cursor, failed).await?;
    }
    Ok((session, resolved))
}

/// Waits for `turn` to settle from `cursor`, as an app would: a wait that fails is counted in
/// `failed` and waited again, up to `WAITS` times.
async fn settled(
    intent: &Intent,
    session: &str,
    turn: &str,
    cursor: &str,
    failed: &AtomicUsize,
) -> Result<TurnOutcome, intent_sdk::Error> {
    let mut waits = 1;
    loop {
        match intent.agent().wait_turn(session, turn, cursor).await {
            Err(_) if waits < WAITS => {
                failed.fetch_add(1, Ordering::Relaxed);
                waits += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            settled => return settled,
        }
    }
}

/// A follower of `session`'s log from its start, over SSE or long-poll.
fn follow(intent: &Intent, session: &str, sse: bool) -> Follower {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut log = if sse {
        intent.agent().follow_sse(session, None).boxed()
    } else {
        intent.agent().follow(session, None).boxed()
    };
    let record = seen.clone();
    let task = tokio::spawn(async move {
        while let Some(item) = log.next().await {
            let mut seen = record.lock().unwrap();
            match item {
                Ok(LogItem::Event { event, .. }) => {
                    seen.seqs.push((event.seq(), Instant::now()));
                }
                // The SDK read the log again from its start (its cursor was refused): the
                // events it repeats count as seen twice.
                Ok(LogItem::Restart) => seen.restarts += 1,
                Ok(LogItem::Snapshot(_)) => {}
                Err(_) => seen.errors += 1,
            }
        }
    });
    Follower {
        session: session.to_owned(),
        seen,
        task,
    }
}

/// The whole log of `session`, page by page.
async fn read_log(intent: &Intent, session: &str) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = intent
            .agent()
            .page(session, cursor.as_deref(), None)
            .await
            .expect("the log reads");
        events.extend(page.events);
        if !page.has_more {
            return events;
        }
        cursor = Some(page.cursor.to_string());
    }
}

/// Turns that ended `state` in `log`.
fn ended(log: &[AgentEvent], state: TurnState) -> usize {
    log.iter()
        .filter(|event| matches!(event, AgentEvent::TurnState { state: s, .. } if *s == state))
        .count()
}

/// Turns that ended more than once, and actions with more than one result, in `log`.
fn double_effects(log: &[AgentEvent]) -> usize {
    let mut ends: HashMap<String, usize> = HashMap::new();
    let mut results: HashMap<String, usize> = HashMap::new();
    for event in log {
        match event {
            AgentEvent::TurnState {
                state: TurnState::Complete | TurnState::Failed | TurnState::Interrupted,
                turn_id,
                ..
            } => {
                *ends.entry(turn_id.to_string()).or_default() += 1;
            }
            AgentEvent::ActionResult { turn_id, .. } => {
                *results.entry(turn_id.to_string()).or_default() += 1;
            }
            _ => {}
        }
    }
    ends.values()
        .chain(results.values())
        .filter(|&&n| n > 1)
        .count()
}

/// An Agent token for the front's resource, minted with the key in `keys`.
fn token(keys: &Path, base: &str) -> String {
    support::token(
        support::BINARY.as_ref(),
        keys,
        &format!("{base}/v1/agent"),
        "rolling",
        SCOPES,
    )
}

/// How an instance is stopped.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// SIGTERM: the server drains, then exits.
    Term,
    /// kill -9.
    Kill,
}

/// A server binary on a fixed address, restarted there.
struct Instance {
    dir: PathBuf,
    addr: String,
    args: Vec<String>,
    server: Option<support::Server>,
    /// Turns resumed by the instance's earlier processes.
    resumed: usize,
}

impl Instance {
    fn start(dir: &Path, addr: &str, args: &[&str]) -> Self {
        let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
        let server = Some(Self::spawn(dir, addr, &args));
        Self {
            dir: dir.to_owned(),
            addr: addr.to_owned(),
            args,
            server,
            resumed: 0,
        }
    }

    /// Turns resumed by the instance's processes so far.
    fn resumed(&self) -> usize {
        self.resumed + self.server.as_ref().map_or(0, resumed)
    }

    fn spawn(dir: &Path, addr: &str, args: &[String]) -> support::Server {
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        args.extend(["--metrics-addr", "127.0.0.1:0"]);
        support::Server::start(dir, addr, &args)
    }

    /// Stops the instance as `how` says and starts it again on its address: how long it was
    /// down.
    fn restart(&mut self, how: Stop) -> Duration {
        let down = Instant::now();
        let mut server = self.server.take().expect("a running instance");
        self.resumed += resumed(&server);
        match how {
            Stop::Term => {
                let pid = server.child.id().to_string();
                let sent = std::process::Command::new("kill")
                    .args(["-TERM", &pid])
                    .status()
                    .unwrap();
                assert!(sent.success(), "SIGTERM is sent");
                server.child.wait().unwrap();
            }
            Stop::Kill => {
                server.child.kill().unwrap();
                server.child.wait().unwrap();
            }
        }
        drop(server);
        self.server = Some(Self::spawn(&self.dir, &self.addr, &self.args));
        down.elapsed()
    }
}

/// Turns `server` resumed, from its metrics.
fn resumed(server: &support::Server) -> usize {
    use std::io::{Read, Write};
    let url = server
        .metrics
        .as_deref()
        .expect("started with --metrics-addr");
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics");
    let mut connection = std::net::TcpStream::connect(addr).expect("the metrics answer");
    connection
        .write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    connection.read_to_string(&mut text).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("intent_agent_turns_resumed_total "))
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no count of resumed turns in {text}"))
}

/// A round-robin TCP front on loopback: each connection goes to the next backend in rotation
/// that accepts it; with none, the connection is closed.
#[derive(Clone)]
struct Front {
    base: String,
    backends: Vec<String>,
    /// Whether each backend is in rotation.
    rotation: Arc<Vec<AtomicBool>>,
    listener: Arc<Mutex<Option<std::net::TcpListener>>>,
}

impl Front {
    /// A front for `count` backends on free loopback ports (not yet started).
    fn new(count: usize) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let backends = (0..count)
            .map(|_| {
                let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                free.local_addr().unwrap().to_string()
            })
            .collect();
        Self {
            base,
            rotation: Arc::new((0..count).map(|_| AtomicBool::new(true)).collect()),
            backends,
            listener: Arc::new(Mutex::new(Some(listener))),
        }
    }

    /// Puts backend `index` in rotation, or takes it out.
    fn rotate(&self, index: usize, into: bool) {
        self.rotation[index].store(into, Ordering::Relaxed);
    }

    async fn serve(self) {
        let listener = self.listener.lock().unwrap().take().expect("served once");
        let listener = TcpListener::from_std(listener).unwrap();
        let next = Arc::new(AtomicUsize::new(0));
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                continue;
            };
            let (front, next) = (self.clone(), next.clone());
            tokio::spawn(async move {
                let first = next.fetch_add(1, Ordering::Relaxed);
                let count = front.backends.len();
                for index in (first..first + count).map(|index| index % count) {
                    if !front.rotation[index].load(Ordering::Relaxed) {
                        continue;
                    }
                    if let Ok(mut server) = TcpStream::connect(&front.backends[index]).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                        return;
                    }
                }
            });
        }
    }
}
