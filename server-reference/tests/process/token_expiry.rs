//! The SDK's log streams outlive their tokens. `CommandToken` runs `intent-server token --ttl 2`
//! as a credential process, and `follow` and `follow_sse` read a session across at least three
//! expiries while turns append (the server ends an SSE stream when its token expires). A static
//! token that expires ends both streams with a typed 401.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use intent_sdk::agent::LogItem;
use intent_sdk::auth::{CommandToken, Resource, StaticToken, TokenSource};
use intent_sdk::{Error, Intent};
use tokio::sync::watch;

use crate::support::Server;

const SCOPES: &str = "agent:read agent:write";

/// Turns append for this long: three lifetimes of a two-second token and more.
const APPENDING: Duration = Duration::from_secs(7);

/// The arguments of `intent-server token` for alice on the server's Agent, living `ttl` seconds.
fn token_command(data_dir: &Path, server: &Server, ttl: u64) -> Vec<OsString> {
    let resource = format!("{}/v1/agent", server.base);
    let ttl = ttl.to_string();
    let mut args = vec![
        OsString::from("token"),
        "--data-dir".into(),
        data_dir.into(),
    ];
    let rest = [
        "--sub",
        "alice",
        "--scope",
        SCOPES,
        "--resource",
        &resource,
        "--ttl",
        &ttl,
    ];
    args.extend(rest.map(OsString::from));
    args
}

fn intent(server: &Server, source: impl TokenSource) -> Intent {
    Intent::builder(&server.base)
        .token(Resource::Agent, source)
        .build()
        .unwrap()
}

/// What a stream handed out, until it ends or has delivered the event `until` names: `e<seq>`,
/// `restart`, or the error.
async fn record(
    stream: impl Stream<Item = Result<LogItem, Error>>,
    mut until: watch::Receiver<u64>,
) -> Vec<String> {
    let mut stream = std::pin::pin!(stream);
    let mut seen = Vec::new();
    let mut last = 0;
    loop {
        if last >= *until.borrow() {
            return seen;
        }
        tokio::select! {
            item = stream.next() => match item {
                Some(Ok(LogItem::Event { event, .. })) => {
                    last = event.seq();
                    seen.push(format!("e{last}"));
                }
                Some(Ok(LogItem::Snapshot(_))) => {}
                Some(Ok(LogItem::Restart)) => seen.push("restart".to_owned()),
                Some(Err(error)) => seen.push(format!("{error:?}")),
                None => return seen,
            },
            _ = until.changed() => {}
        }
    }
}

/// Runs turns in `session` for `APPENDING`; the last event's seq.
async fn append(appender: &Intent, session: &str) -> u64 {
    let began = Instant::now();
    let mut last = 0;
    while began.elapsed() < APPENDING {
        let outcome = appender
            .agent()
            .run_turn("hello", Some(session))
            .await
            .unwrap();
        last = outcome.events.last().map_or(last, |event| event.seq());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    last
}

/// Takes about 7 s: turns append for [`APPENDING`], three lifetimes of the 2 s token and more,
/// so that both streams renew their token at least three times.
#[tokio::test]
async fn follow_and_follow_sse_outlive_three_token_expiries() {
    let data_dir = tempfile::tempdir().unwrap();
    let server = Server::start(data_dir.path(), "127.0.0.1:0", &[]);
    let program = env!("CARGO_BIN_EXE_intent-server");
    let args = token_command(data_dir.path(), &server, 2);
    let intent = intent(&server, CommandToken::new(program, args));
    let session = intent
        .agent()
        .run_turn("hello", None)
        .await
        .unwrap()
        .session_id;

    let (target, until) = watch::channel(u64::MAX);
    let polled = tokio::spawn(record(intent.agent().follow(&session, None), until.clone()));
    let streamed = tokio::spawn(record(intent.agent().follow_sse(&session, None), until));
    let last = append(&intent, &session).await;
    target.send(last).unwrap();

    let expected: Vec<String> = (1..=last).map(|seq| format!("e{seq}")).collect();
    let within = Duration::from_secs(30);
    let polled = tokio::time::timeout(within, polled).await.unwrap().unwrap();
    assert_eq!(polled, expected, "long-poll pages");
    let streamed = tokio::time::timeout(within, streamed)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(streamed, expected, "SSE");
}

/// Takes about 7 s: turns append for [`APPENDING`], so that the 2 s static token expires while
/// both streams read.
#[tokio::test]
async fn a_static_token_that_expires_ends_each_stream_with_a_typed_401() {
    let data_dir = tempfile::tempdir().unwrap();
    let server = Server::start(data_dir.path(), "127.0.0.1:0", &[]);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_intent-server"))
        .args(token_command(data_dir.path(), &server, 2))
        .output()
        .unwrap();
    let short = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    let hour = server.agent_token(data_dir.path(), "alice", SCOPES);
    let appender = intent(&server, StaticToken::new(hour));
    let session = appender
        .agent()
        .run_turn("hello", None)
        .await
        .unwrap()
        .session_id;

    let follower = intent(&server, StaticToken::new(short));
    let (_target, until) = watch::channel(u64::MAX);
    let polled = tokio::spawn(record(
        follower.agent().follow(&session, None),
        until.clone(),
    ));
    let streamed = tokio::spawn(record(follower.agent().follow_sse(&session, None), until));
    append(&appender, &session).await;

    for (name, task) in [("long-poll pages", polled), ("SSE", streamed)] {
        let seen = tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .unwrap_or_else(|_| panic!("{name}: the stream ends"))
            .unwrap();
        let (last, events) = seen.split_last().unwrap();
        assert!(last.starts_with("Unauthorized"), "{name}: {last}");
        assert!(
            events.len() >= 4,
            "{name}: events before the expiry {events:?}"
        );
        assert!(
            events.iter().all(|e| e.starts_with('e')),
            "{name}: {events:?}"
        );
    }
}
