//! Upgrades in place: each fixture under `tests/fixtures/upgrade/` is the data a server of an
//! earlier commit left (`cargo xtask fixture REV`). Today's server opens it and must read it back
//! unchanged: every session's events, the same and in the same order; the cursor issued then,
//! still opening to the same events; the action then pending, still resolving; the app still
//! installed with its credentials present; each month's statement counting the units the store
//! held then, whether as a raw ledger or as counters. And an old cursor past its lifetime is
//! refused with 410, after which the session read without a cursor reconciles to the same
//! events. The SQLite part runs always, the PostgreSQL part with `INTENT_TEST_DATABASE_URL`. And
//! the newest fixture must be of today's migrations and stored formats, so that changing either
//! without a fixture fails.
//!
//! A fixture's cursor lived a day from the day it was made, so no date is right for both: each
//! server runs with its wall clock moved (`--clock-offset`) to a minute after the fixture's
//! newest event, when the cursor still opens, or to 400 days after it, past any cursor lifetime
//! a server has had. Both hold on any date.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::{self, Server, page};

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upgrade");
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(root)
        .expect("the upgrade fixtures")
        .map(|entry| entry.expect("a fixture").path())
        .collect();
    fixtures.sort();
    fixtures
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("JSON")
}

/// `dir` copied to `to`, recursively.
fn copy(dir: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// The two days a fixture is read on, as seconds after its newest event: within every cursor
/// lifetime a server has had (a day), and past all of them.
const WITHIN_LIFETIME: i64 = 60;
const PAST_LIFETIME: i64 = 400 * 86_400;

/// The offset that moves the wall clock to `after` seconds past the newest event of `expected`.
fn clock_offset(expected: &Value, after: i64) -> i64 {
    fn newest(value: &Value) -> i64 {
        match value {
            Value::Object(members) => members
                .iter()
                .map(|(name, member)| match (name.as_str(), member.as_i64()) {
                    ("createdAt", Some(at)) => at,
                    _ => newest(member),
                })
                .max()
                .unwrap_or(0),
            Value::Array(items) => items.iter().map(newest).max().unwrap_or(0),
            _ => 0,
        }
    }
    let made = newest(expected);
    assert!(made > 0, "the fixture's events carry createdAt");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    made + after - i64::try_from(now.as_secs()).unwrap()
}

/// A server whose wall clock is moved by `offset` seconds, on the keys of `data_dir`.
struct Moved<'a> {
    server: Server,
    data_dir: &'a Path,
    offset: i64,
}

impl<'a> Moved<'a> {
    /// Starts the server on `data_dir`, with more `serve` options `args`.
    fn start(data_dir: &'a Path, args: &[&str], offset: i64) -> Self {
        let clock = format!("--clock-offset={offset}");
        let args = [args, &[clock.as_str()]].concat();
        let server = Server::start(data_dir, "127.0.0.1:0", &args);
        Self {
            server,
            data_dir,
            offset,
        }
    }

    /// A token of the fixture's account for `resource` with `scopes`.
    fn token(&self, resource: &str, scopes: &str) -> String {
        self.token_of("fixture", resource, scopes)
    }

    /// A token of `account` for `resource` with `scopes`, minted with the key of the data dir by
    /// a process whose clock is moved as the server's.
    fn token_of(&self, account: &str, resource: &str, scopes: &str) -> String {
        let resource_url = format!("{}/v1/{resource}", self.server.base);
        support::token_at(
            support::BINARY.as_ref(),
            self.data_dir,
            &resource_url,
            account,
            scopes,
            self.offset,
        )
    }
}

const AGENT_SCOPES: &str = "agent:read agent:write agent:actions:resolve";

/// Every event of `session` after `cursor`.
async fn events(server: &Server, token: &str, session: &str, cursor: Option<&str>) -> Vec<Value> {
    let http = reqwest::Client::new();
    let mut events = Vec::new();
    let mut cursor = cursor.map(str::to_owned);
    loop {
        let page = page(&http, &server.base, token, session, cursor.as_deref(), 0)
            .await
            .unwrap_or_else(|e| panic!("{session} after {cursor:?}: {e}"));
        events.extend(page["events"].as_array().unwrap().iter().cloned());
        cursor = page["cursor"].as_str().map(str::to_owned);
        if page["has_more"] != true {
            return events;
        }
    }
}

/// Whether `actual` holds every member of `expected`, recursively (an upgrade may add members,
/// never drop or change one).
fn holds(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Object(actual), Value::Object(expected)) => expected
            .iter()
            .all(|(name, value)| actual.get(name).is_some_and(|member| holds(member, value))),
        (Value::Array(actual), Value::Array(expected)) => {
            actual.len() == expected.len() && actual.iter().zip(expected).all(|(a, e)| holds(a, e))
        }
        _ => actual == expected,
    }
}

/// Whether every session of `expected`, read from its start, holds the events logged then.
async fn sessions_read_back(server: &Server, agent: &str, expected: &Value, fixture: &str) {
    for (session, logged) in expected["sessions"].as_object().unwrap() {
        let read = Value::from(events(server, agent, session, None).await);
        assert!(
            holds(&read, logged),
            "{fixture}: the events of {session}: {read:#}"
        );
    }
}

/// Reads back what `expected` says `moved` (its clock moved to within the fixture's cursor
/// lifetime) holds.
async fn reads_back(moved: &Moved<'_>, expected: &Value, fixture: &str) {
    let server = &moved.server;
    let agent = moved.token("agent", AGENT_SCOPES);
    sessions_read_back(server, &agent, expected, fixture).await;
    let issued = &expected["cursor"];
    let session = issued["session"].as_str().unwrap();
    let after = events(server, &agent, session, issued["cursor"].as_str()).await;
    assert!(
        holds(&Value::from(after), &issued["after"]),
        "{fixture}: the cursor issued then opens to the same events"
    );
    let pending = &expected["action"];
    let action = &pending["action"];
    let resolve = format!(
        "{}/v1/agent/sessions/{}/actions/{}/resolve",
        server.base,
        pending["session"].as_str().unwrap(),
        action["actionId"].as_str().unwrap()
    );
    let body = json!({
        "revision": action["revision"],
        "result": { "outcome": "rejected", "digest": action["build"]["digest"], "reason": "upgraded" },
    });
    let resolved = reqwest::Client::new()
        .post(resolve)
        .bearer_auth(&agent)
        .header("idempotency-key", format!("upgrade-{fixture}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        resolved.status(),
        200,
        "{fixture}: the pending action resolves"
    );
    let account = moved.token("account", "account:apps:read account:credentials:read");
    let id = &expected["app"]["id"];
    let get = |path: String| {
        let account = account.clone();
        async move {
            let answer = reqwest::Client::new()
                .get(path)
                .bearer_auth(account)
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status(), 200);
            answer.json::<Value>().await.unwrap()
        }
    };
    let apps = get(format!("{}/v1/account/apps", server.base)).await;
    let app = apps["apps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|app| app["id"] == *id);
    assert_eq!(
        app.unwrap()["installed"],
        true,
        "{fixture}: the app is installed"
    );
    let secrets = get(format!("{}/v1/account/apps/{id}/secrets", server.base)).await;
    for name in expected["app"]["credentials"].as_array().unwrap() {
        let listed = secrets["credentials"].as_array().unwrap();
        let credential = listed.iter().find(|credential| credential["name"] == *name);
        assert_eq!(
            credential.map(|credential| &credential["present"]),
            Some(&Value::Bool(true)),
            "{fixture}: the credential {name} is present"
        );
    }
}

/// The units a fixture's store holds, per account and month (`YYYY-MM`), per meter.
type Ledger = BTreeMap<(String, String), BTreeMap<String, i64>>;

/// The ledger of a store queried with `rows` (account, month, meter, units), as either engine's
/// rows arrive.
fn ledger(rows: Vec<(String, String, String, i64)>) -> Ledger {
    let mut ledger = Ledger::new();
    for (account, month, meter, units) in rows {
        *ledger
            .entry((account, month))
            .or_default()
            .entry(meter)
            .or_default() += units;
    }
    ledger
}

/// The ledger of a fixture's SQLite file, before today's server opens it: from the raw ledger
/// (a row per unit) of the versions that kept one, else from its counters.
async fn sqlite_ledger(db: &Path) -> Ledger {
    use sqlx::Connection;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(db)
        .read_only(true);
    let mut db = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    let (raw,): (bool,) =
        sqlx::query_as("SELECT COUNT(*) > 0 FROM sqlite_master WHERE name = 'usage'")
            .fetch_one(&mut db)
            .await
            .unwrap();
    let query = if raw {
        "SELECT account, strftime('%Y-%m', at, 'unixepoch'), meter, COUNT(*)
         FROM usage GROUP BY 1, 2, 3"
    } else {
        "SELECT account, strftime('%Y-%m', day, 'unixepoch'), meter, SUM(units)
         FROM usage_counters GROUP BY 1, 2, 3"
    };
    ledger(sqlx::query_as(query).fetch_all(&mut db).await.unwrap())
}

/// The ledger of a fixture's PostgreSQL database, before today's server opens it.
async fn postgres_ledger(url: &str) -> Ledger {
    use sqlx::Connection;
    let mut db = sqlx::PgConnection::connect(url).await.unwrap();
    let (raw,): (bool,) = sqlx::query_as("SELECT to_regclass('usage') IS NOT NULL")
        .fetch_one(&mut db)
        .await
        .unwrap();
    let query = if raw {
        "SELECT account, to_char(to_timestamp(at) AT TIME ZONE 'UTC', 'YYYY-MM'), meter,
                COUNT(*) FROM usage GROUP BY 1, 2, 3"
    } else {
        "SELECT account, to_char(to_timestamp(day) AT TIME ZONE 'UTC', 'YYYY-MM'), meter,
                SUM(units)::BIGINT FROM usage_counters GROUP BY 1, 2, 3"
    };
    ledger(sqlx::query_as(query).fetch_all(&mut db).await.unwrap())
}

/// Each month's statement of each account in `ledger` counts the units the fixture's store held.
async fn statements_read_back(moved: &Moved<'_>, ledger: &Ledger, fixture: &str) {
    assert!(!ledger.is_empty(), "{fixture}: the fixture metered usage");
    for ((account, month), units) in ledger {
        let token = moved.token_of(account, "account", "account:usage:read");
        let path = format!("/v1/account/statement?period={month}");
        let statement =
            support::get(&reqwest::Client::new(), &moved.server.base, &token, &path).await;
        let lines = statement["lines"].as_array().unwrap();
        let read: BTreeMap<String, i64> = lines
            .iter()
            .filter(|line| line["quantity"] != 0)
            .map(|line| {
                let meter = line["meter"].as_str().unwrap().to_owned();
                (meter, line["quantity"].as_i64().unwrap())
            })
            .collect();
        assert_eq!(
            &read, units,
            "{fixture}: {account}'s statement of {month}: {statement:#}"
        );
    }
}

/// On `moved` (its clock moved past the fixture's cursor lifetime): the cursor issued then is
/// refused with 410, and the sessions read without a cursor reconcile to the events logged then.
async fn refuses_the_expired_cursor(moved: &Moved<'_>, expected: &Value, fixture: &str) {
    let server = &moved.server;
    let agent = moved.token("agent", AGENT_SCOPES);
    let issued = &expected["cursor"];
    let refused = page(
        &reqwest::Client::new(),
        &server.base,
        &agent,
        issued["session"].as_str().unwrap(),
        issued["cursor"].as_str(),
        0,
    )
    .await
    .expect_err("an expired cursor is refused");
    assert_eq!(
        refused.status(),
        Some(reqwest::StatusCode::GONE),
        "{fixture}: the cursor issued then, past its lifetime: {refused}"
    );
    sessions_read_back(server, &agent, expected, fixture).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn todays_server_reads_back_the_sqlite_data_of_each_earlier_version() {
    for fixture in fixtures() {
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let expected = read_json(&fixture.join("sqlite/expected.json"));
        let data = tempfile::tempdir().unwrap();
        copy(&fixture.join("sqlite/data"), data.path());
        let ledger = sqlite_ledger(&data.path().join("intent.db")).await;
        let offset = clock_offset(&expected, WITHIN_LIFETIME);
        let moved = Moved::start(data.path(), &[], offset);
        reads_back(&moved, &expected, &name).await;
        statements_read_back(&moved, &ledger, &name).await;
        drop(moved);

        let data = tempfile::tempdir().unwrap();
        copy(&fixture.join("sqlite/data"), data.path());
        let offset = clock_offset(&expected, PAST_LIFETIME);
        let moved = Moved::start(data.path(), &[], offset);
        refuses_the_expired_cursor(&moved, &expected, &name).await;
    }
}

/// A new database `database` beside the one of `url`, restored from the dump of `fixture`; its
/// URL.
fn restore(url: &str, fixture: &Path, database: &str) -> String {
    let psql = |args: &[&str]| {
        let status = Command::new("/usr/lib/postgresql/15/bin/psql")
            .args(args)
            .output()
            .expect("psql runs");
        assert!(
            status.status.success(),
            "{}",
            String::from_utf8_lossy(&status.stderr)
        );
    };
    for command in [
        format!("DROP DATABASE IF EXISTS {database}"),
        format!("CREATE DATABASE {database}"),
    ] {
        psql(&[url, "--quiet", "--command", &command]);
    }
    let (server_url, _) = url.rsplit_once('/').unwrap();
    let database_url = format!("{server_url}/{database}");
    let dump = fixture.join("postgres/dump.sql");
    psql(&[&database_url, "--quiet", "--file", dump.to_str().unwrap()]);
    database_url
}

#[tokio::test(flavor = "multi_thread")]
async fn todays_server_reads_back_the_postgres_data_of_each_earlier_version() {
    let Ok(url) = std::env::var("INTENT_TEST_DATABASE_URL") else {
        eprintln!("not run: set INTENT_TEST_DATABASE_URL (CI's PostgreSQL pass does)");
        return;
    };
    for fixture in fixtures() {
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let expected = read_json(&fixture.join("postgres/expected.json"));
        let keys = tempfile::tempdir().unwrap();
        copy(&fixture.join("postgres/keys"), keys.path());

        // Named for this process, so that test runs sharing the server do not drop each other's.
        let database = format!("upgrade_{name}_{}", std::process::id());
        let database_url = restore(&url, &fixture, &database);
        let ledger = postgres_ledger(&database_url).await;
        let offset = clock_offset(&expected, WITHIN_LIFETIME);
        let moved = Moved::start(keys.path(), &["--database-url", &database_url], offset);
        reads_back(&moved, &expected, &name).await;
        statements_read_back(&moved, &ledger, &name).await;
        drop(moved);

        let database_url = restore(&url, &fixture, &format!("{database}_expired"));
        let offset = clock_offset(&expected, PAST_LIFETIME);
        let moved = Moved::start(keys.path(), &["--database-url", &database_url], offset);
        refuses_the_expired_cursor(&moved, &expected, &name).await;
    }
}

#[test]
fn the_newest_fixture_is_of_todays_migrations_and_stored_formats() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut migrations = BTreeMap::new();
    for backend in ["postgres", "sqlite"] {
        for entry in std::fs::read_dir(crate_dir.join("migrations").join(backend)).unwrap() {
            let path = entry.unwrap().path();
            let name = format!("{backend}/{}", path.file_name().unwrap().to_string_lossy());
            let digest = format!("{:x}", Sha256::digest(std::fs::read(&path).unwrap()));
            migrations.insert(name, Value::from(digest));
        }
    }
    let today = json!({
        "migrations": migrations,
        "formats": read_json(&crate_dir.join("stored-formats.json")),
    });
    let matching = fixtures().into_iter().any(|fixture| {
        let manifest = read_json(&fixture.join("manifest.json"));
        manifest["migrations"] == today["migrations"] && manifest["formats"] == today["formats"]
    });
    assert!(
        matching,
        "no upgrade fixture is of today's migrations and stored formats: commit the change, then \
         run `cargo xtask fixture HEAD` and commit the fixture ({today:#})"
    );
}
