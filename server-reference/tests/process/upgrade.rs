//! Upgrades in place: each fixture under `tests/fixtures/upgrade/` is the data a server of an
//! earlier commit left (`cargo xtask fixture REV`). Today's server opens it and must read it back
//! unchanged: every session's events, the same and in the same order; the cursor issued then,
//! still opening to the same events; the action then pending, still resolving; the app still
//! installed with its credentials present. The SQLite part runs always, the PostgreSQL part with
//! `INTENT_TEST_DATABASE_URL`. And the newest fixture must be of today's migrations and stored
//! formats, so that changing either without a fixture fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// A token of `server` for `resource` with `scopes`, minted with the key of `data_dir`.
fn token(server: &Server, data_dir: &Path, resource: &str, scopes: &str) -> String {
    let resource_url = format!("{}/v1/{resource}", server.base);
    support::token(
        support::BINARY.as_ref(),
        data_dir,
        &resource_url,
        "fixture",
        scopes,
    )
}

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

/// Reads back what `expected` says `server` (on `data_dir`) holds.
async fn reads_back(server: &Server, data_dir: &Path, expected: &Value, fixture: &str) {
    let agent = token(
        server,
        data_dir,
        "agent",
        "agent:read agent:write agent:actions:resolve",
    );
    for (session, logged) in expected["sessions"].as_object().unwrap() {
        let read = Value::from(events(server, &agent, session, None).await);
        assert!(
            holds(&read, logged),
            "{fixture}: the events of {session}: {read:#}"
        );
    }
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
    let account = token(
        server,
        data_dir,
        "account",
        "account:apps:read account:credentials:read",
    );
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

#[tokio::test(flavor = "multi_thread")]
async fn todays_server_reads_back_the_sqlite_data_of_each_earlier_version() {
    for fixture in fixtures() {
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let data = tempfile::tempdir().unwrap();
        copy(&fixture.join("sqlite/data"), data.path());
        let server = Server::start(data.path(), "127.0.0.1:0", &[]);
        let expected = read_json(&fixture.join("sqlite/expected.json"));
        reads_back(&server, data.path(), &expected, &name).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn todays_server_reads_back_the_postgres_data_of_each_earlier_version() {
    let Ok(url) = std::env::var("INTENT_TEST_DATABASE_URL") else {
        eprintln!("not run: set INTENT_TEST_DATABASE_URL (CI's PostgreSQL pass does)");
        return;
    };
    for fixture in fixtures() {
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let database = format!("upgrade_{name}");
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
        psql(&[
            &url,
            "--quiet",
            "--command",
            &format!("DROP DATABASE IF EXISTS {database}"),
        ]);
        psql(&[
            &url,
            "--quiet",
            "--command",
            &format!("CREATE DATABASE {database}"),
        ]);
        let (server_url, _) = url.rsplit_once('/').unwrap();
        let database_url = format!("{server_url}/{database}");
        let dump = fixture.join("postgres/dump.sql");
        psql(&[&database_url, "--quiet", "--file", dump.to_str().unwrap()]);
        let keys = tempfile::tempdir().unwrap();
        copy(&fixture.join("postgres/keys"), keys.path());
        let server = Server::start(
            keys.path(),
            "127.0.0.1:0",
            &["--database-url", &database_url],
        );
        let expected = read_json(&fixture.join("postgres/expected.json"));
        reads_back(&server, keys.path(), &expected, &name).await;
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
