//! `cargo xtask fixture REV`: an upgrade fixture, the data the server of commit REV leaves, for
//! `server-reference/tests/process/upgrade.rs` to open with today's server.
//!
//! It builds REV's `intent-server` in a worktree (into `target/fixtures`), runs it on a fresh
//! SQLite data dir and, when PostgreSQL is at hand (`INTENT_TEST_DATABASE_URL`, or `.ci/postgres`),
//! on a fresh database, and drives each the same way over HTTP (`curl`): a finished session, a
//! session whose second turn awaits an action, a cursor issued mid-log, an installed app and its
//! saved credentials. Then it stops the server (SIGTERM) and writes
//! `server-reference/tests/fixtures/upgrade/<REV>/`:
//! - `manifest.json`: the commit, the SHA-256 of each of its migrations, and its
//!   `stored-formats.json` (none before that file was kept);
//! - `sqlite/data/` (the data dir) and `sqlite/expected.json` (what was read back at the time);
//! - `postgres/keys/` (the data dir of keys), `postgres/dump.sql` and `postgres/expected.json`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const ACTION: &str = "send 1 USDC to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const AGENT_SCOPES: &str = "agent:read agent:write agent:actions:resolve";
const ACCOUNT_SCOPES: &str =
    "account:apps:read account:apps:write account:credentials:read account:credentials:write";
const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// Writes the fixture of commit `rev`.
pub fn run(root: &Path, rev: &str) -> Result<(), String> {
    let commit = output(
        Command::new("git")
            .args(["rev-parse", "--short=10", rev])
            .current_dir(root),
    )?;
    let source = root.join("target/fixtures/src").join(&commit);
    if !source.exists() {
        output(
            Command::new("git")
                .args(["worktree", "add", "--detach"])
                .arg(&source)
                .arg(&commit)
                .current_dir(root),
        )?;
    }
    eprintln!("building intent-server at {commit}");
    // Cargo keys the workspace's crates by their path inside the workspace, so another commit's
    // worktree would find them fresh from the last build: they are built anew, the registry's
    // crates kept.
    for step in [
        &["clean", "-p", "intent-server", "-p", "intent-models"][..],
        &["build", "-p", "intent-server", "--bin", "intent-server"],
    ] {
        let done = crate::cargo()
            .args(step)
            .env("CARGO_TARGET_DIR", root.join("target/fixtures"))
            .current_dir(&source)
            .status()
            .map_err(|e| format!("cargo {}: {e}", step[0]))?;
        if !done.success() {
            return Err(format!("cargo {} at {commit} failed", step[0]));
        }
    }
    let server = root.join("target/fixtures/debug/intent-server");
    let out = root
        .join("server-reference/tests/fixtures/upgrade")
        .join(&commit);
    if out.exists() {
        std::fs::remove_dir_all(&out).map_err(|e| format!("clearing {}: {e}", out.display()))?;
    }
    let formats = std::fs::read_to_string(source.join("server-reference/stored-formats.json"))
        .ok()
        .map(|text| serde_json::from_str::<Value>(&text).map_err(|e| e.to_string()))
        .transpose()?;
    let manifest = json!({
        "commit": commit,
        "migrations": migrations(&source.join("server-reference/migrations"))?,
        "formats": formats,
    });
    write_json(&out.join("manifest.json"), &manifest)?;

    let data = out.join("sqlite/data");
    let expected = drive(&server, &data, &[])?;
    write_json(&out.join("sqlite/expected.json"), &expected)?;

    match postgres(root)? {
        None => eprintln!("no PostgreSQL: the fixture has no postgres/ part"),
        Some(url) => {
            let database = fresh_database(&url, &format!("fixture_{commit}"))?;
            let keys = out.join("postgres/keys");
            let expected = drive(&server, &keys, &["--database-url", &database])?;
            write_json(&out.join("postgres/expected.json"), &expected)?;
            let dump = output(Command::new(format!("{PG_BIN}/pg_dump")).args([
                "--no-owner",
                "--no-privileges",
                &database,
            ]))?;
            std::fs::write(out.join("postgres/dump.sql"), dump + "\n")
                .map_err(|e| format!("writing the dump: {e}"))?;
        }
    }
    eprintln!("wrote {}", out.display());
    Ok(())
}

/// The SHA-256 of each migration file under `dir`, by `backend/file` name.
fn migrations(dir: &Path) -> Result<serde_json::Map<String, Value>, String> {
    let mut digests = serde_json::Map::new();
    for backend in ["postgres", "sqlite"] {
        let entries = std::fs::read_dir(dir.join(backend))
            .map_err(|e| format!("reading {}: {e}", dir.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| e.to_string())?.path();
            let text =
                std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            digests.insert(
                format!("{backend}/{name}"),
                format!("{:x}", Sha256::digest(&text)).into(),
            );
        }
    }
    Ok(digests)
}

/// Serves `data` with `server` (and `args`), makes the fixture's state and reads it back.
fn drive(server: &Path, data: &Path, args: &[&str]) -> Result<Value, String> {
    std::fs::create_dir_all(data).map_err(|e| format!("creating {}: {e}", data.display()))?;
    let mut child = Command::new(server)
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting the server: {e}"))?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().ok_or("no stdout")?)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .ok_or_else(|| format!("unexpected first line {line:?}"))?
        .to_owned();
    let driven = Session {
        server,
        data,
        base: &base,
    }
    .make();
    stop(&mut child)?;
    driven
}

/// Stops the server with SIGTERM and waits for it.
fn stop(child: &mut Child) -> Result<(), String> {
    output(Command::new("kill").args(["-TERM", &child.id().to_string()]))?;
    child.wait().map_err(|e| e.to_string())?;
    Ok(())
}

/// One server being driven.
struct Session<'a> {
    server: &'a Path,
    data: &'a Path,
    base: &'a str,
}

impl Session<'_> {
    /// The fixture's state: what it made, and each session's events as read then.
    fn make(&self) -> Result<Value, String> {
        let agent = self.token("agent", AGENT_SCOPES)?;
        let account = self.token("account", ACCOUNT_SCOPES)?;
        let finished = self.turn(&agent, "hello", None)?;
        let pending = self.turn(&agent, "hello", None)?;
        self.turn(&agent, ACTION, Some(&pending))?;
        let events = self.events(&agent, &pending, None)?;
        let action = events
            .iter()
            .rev()
            .find(|event| event["type"] == "action")
            .ok_or("the second turn raised no action")?["action"]
            .clone();
        let mid = self.call(
            &agent,
            "GET",
            &format!("/v1/agent/chat/{pending}?limit=3"),
            None,
        )?;
        let apps = self.call(&account, "GET", "/v1/account/apps", None)?;
        let app = apps["apps"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|app| {
                app["requiredCredentials"]
                    .as_array()
                    .is_some_and(|n| !n.is_empty())
            })
            .ok_or("no app needs a credential")?;
        let id = app["id"].as_i64().ok_or("an app without an id")?;
        let names: Vec<&str> = app["requiredCredentials"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for name in &names {
            let path = format!("/v1/account/apps/{id}/secrets/{name}");
            let body = json!({ "value": format!("fixture-{name}") });
            self.call(&account, "PUT", &path, Some(&body))?;
        }
        self.call(&account, "POST", &format!("/v1/account/apps/{id}"), None)?;
        let mut sessions = serde_json::Map::new();
        sessions.insert(
            finished.clone(),
            self.events(&agent, &finished, None)?.into(),
        );
        sessions.insert(pending.clone(), events.into());
        Ok(json!({
            "sessions": sessions,
            "cursor": {
                "session": pending,
                "cursor": mid["cursor"],
                "after": self.events(&agent, &pending, mid["cursor"].as_str())?,
            },
            "action": { "session": pending, "action": action },
            "app": { "id": id, "credentials": names },
        }))
    }

    fn token(&self, resource: &str, scopes: &str) -> Result<String, String> {
        output(
            Command::new(self.server)
                .args(["token", "--sub", "fixture", "--scope", scopes, "--resource"])
                .arg(format!("{}/v1/{resource}", self.base))
                .arg("--data-dir")
                .arg(self.data),
        )
    }

    /// Takes a turn with `message` (in `session`, or a new one) and waits until it settles:
    /// the session.
    fn turn(&self, token: &str, message: &str, session: Option<&str>) -> Result<String, String> {
        let mut body = json!({ "message": message });
        if let Some(session) = session {
            body["sessionId"] = session.into();
        }
        let started = self.call(token, "POST", "/v1/agent/chat", Some(&body))?;
        let session = started["sessionId"]
            .as_str()
            .ok_or("no sessionId")?
            .to_owned();
        let turn = started["turnId"].clone();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let events = self.events(token, &session, None)?;
            let settled = events.iter().any(|event| {
                event["type"] == "turn_state"
                    && event["turnId"] == turn
                    && event["state"] != "processing"
            });
            if settled {
                return Ok(session);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!("the turn {turn} did not settle"))
    }

    /// The events of `session` after `cursor` (from the start without one), page by page.
    fn events(
        &self,
        token: &str,
        session: &str,
        cursor: Option<&str>,
    ) -> Result<Vec<Value>, String> {
        let mut events = Vec::new();
        let mut cursor = cursor.map(str::to_owned);
        loop {
            let path = match &cursor {
                Some(cursor) => format!("/v1/agent/chat/{session}?cursor={cursor}"),
                None => format!("/v1/agent/chat/{session}"),
            };
            let page = self.call(token, "GET", &path, None)?;
            events.extend(page["events"].as_array().into_iter().flatten().cloned());
            cursor = page["cursor"].as_str().map(str::to_owned);
            if page["has_more"] != true {
                return Ok(events);
            }
        }
    }

    /// `METHOD base+path` with `body`, as `token`: the JSON answer of a 2xx.
    fn call(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, String> {
        let mut curl = Command::new("curl");
        curl.args([
            "--silent",
            "--show-error",
            "--fail-with-body",
            "--request",
            method,
        ])
        .arg("--header")
        .arg(format!("authorization: Bearer {token}"))
        .arg(format!("{}{path}", self.base));
        if let Some(body) = body {
            curl.args(["--header", "content-type: application/json", "--data"])
                .arg(body.to_string());
        }
        let text = output(&mut curl).map_err(|e| format!("{method} {path}: {e}"))?;
        if text.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| format!("{method} {path}: {e}: {text}"))
    }
}

/// The PostgreSQL server to write the fixture's database on, if any.
fn postgres(root: &Path) -> Result<Option<String>, String> {
    if let Ok(url) = std::env::var("INTENT_TEST_DATABASE_URL") {
        return Ok(Some(url));
    }
    if !Path::new(PG_BIN).join("postgres").exists() {
        return Ok(None);
    }
    let dir = root.join("target/fixtures/postgres");
    if !dir.join("data/postmaster.pid").exists() {
        let _ = std::fs::remove_dir_all(&dir);
        let url = output(
            Command::new(root.join(".ci/postgres"))
                .arg("start")
                .arg(&dir),
        )?;
        std::fs::write(dir.join("url"), &url).map_err(|e| e.to_string())?;
    }
    let url = std::fs::read_to_string(dir.join("url")).map_err(|e| e.to_string())?;
    Ok(Some(url.trim().to_owned()))
}

/// A new, empty database `name` on the server at `url`: its URL.
fn fresh_database(url: &str, name: &str) -> Result<String, String> {
    for sql in [
        format!("DROP DATABASE IF EXISTS {name}"),
        format!("CREATE DATABASE {name}"),
    ] {
        output(Command::new(format!("{PG_BIN}/psql")).args([url, "--quiet", "--command", &sql]))?;
    }
    let (server, _) = url
        .rsplit_once('/')
        .ok_or("a database URL ends with its name")?;
    Ok(format!("{server}/{name}"))
}

fn write_json(path: &PathBuf, value: &Value) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())? + "\n";
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The trimmed standard output of `command`, which must succeed.
fn output(command: &mut Command) -> Result<String, String> {
    let output = command
        .output()
        .map_err(|e| format!("running {command:?}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{command:?} exited with {}: {}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim(),
            String::from_utf8_lossy(&output.stdout).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}
