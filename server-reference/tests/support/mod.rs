//! The server binary as a child process, for tests and benchmarks that need a real process
//! (to kill it, or to measure its memory), and the few requests they all make.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// `http://ADDR`, as `serve`, started with a piped stdout, prints it on its first line.
pub fn listening(child: &mut Child) -> String {
    printed(child, 1).remove(0)
}

/// What the first `count` lines `serve` prints name: `http://ADDR` of the API, then (with
/// `--metrics-addr`) `http://ADDR/metrics`.
fn printed(child: &mut Child, count: usize) -> Vec<String> {
    let mut lines = BufReader::new(child.stdout.take().expect("a piped stdout")).lines();
    ["listening on ", "metrics on "][..count]
        .iter()
        .map(|prefix| {
            let line = lines
                .next()
                .expect("the server prints its address")
                .expect("a line of text");
            line.strip_prefix(prefix)
                .unwrap_or_else(|| panic!("{line:?} does not start with {prefix:?}"))
                .to_owned()
        })
        .collect()
}

/// This build of the server binary.
pub const BINARY: &str = env!("CARGO_BIN_EXE_intent-server");

/// The server binary serving a data dir; killed when dropped.
pub struct Server {
    /// The process.
    pub child: Child,
    /// `http://ADDR` as the server printed it.
    pub base: String,
    /// `http://ADDR/metrics`, when started with `--metrics-addr`.
    pub metrics: Option<String>,
    /// The binary it runs.
    pub binary: PathBuf,
}

impl Server {
    /// Starts the server on `addr` (port 0 for a free one) with more `serve` options `args`, and
    /// waits until it listens.
    pub fn start(data_dir: &Path, addr: &str, args: &[&str]) -> Self {
        Self::start_binary(BINARY.as_ref(), data_dir, addr, args)
    }

    /// [`Server::start`] with another build of the server, `binary`.
    pub fn start_binary(binary: &Path, data_dir: &Path, addr: &str, args: &[&str]) -> Self {
        let mut child = Command::new(binary)
            .args(["serve", "--addr", addr, "--data-dir"])
            .arg(data_dir)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server binary starts");
        let mut printed = printed(
            &mut child,
            1 + usize::from(args.contains(&"--metrics-addr")),
        );
        let metrics = printed.get(1).cloned();
        Self {
            child,
            base: printed.swap_remove(0),
            metrics,
            binary: binary.to_owned(),
        }
    }

    /// An Agent token for `account` with `scopes`, minted with the key of `data_dir`.
    pub fn agent_token(&self, data_dir: &Path, account: &str, scopes: &str) -> String {
        token(
            &self.binary,
            data_dir,
            &format!("{}/v1/agent", self.base),
            account,
            scopes,
        )
    }
}

/// A token for the resource at `resource_url`, `account` and `scopes`, minted with the key of
/// `data_dir` by `intent-server token`.
/// The server build `binary` mints it: [`BINARY`] or another.
pub fn token(
    binary: &Path,
    data_dir: &Path,
    resource_url: &str,
    account: &str,
    scopes: &str,
) -> String {
    token_at(binary, data_dir, resource_url, account, scopes, 0)
}

/// [`token`] minted by a process whose wall clock is `clock_offset` seconds from the system's
/// (`intent-server --clock-offset`).
pub fn token_at(
    binary: &Path,
    data_dir: &Path,
    resource_url: &str,
    account: &str,
    scopes: &str,
    clock_offset: i64,
) -> String {
    let output = Command::new(binary)
        .arg(format!("--clock-offset={clock_offset}"))
        .args(["token", "--sub", account, "--scope", scopes])
        .args(["--resource", resource_url])
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .expect("the token command runs");
    assert!(output.status.success(), "the token command succeeds");
    String::from_utf8(output.stdout)
        .expect("a token is text")
        .trim()
        .to_owned()
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `POST base+path` with `body`, as `token`; the JSON answer.
pub async fn post(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    path: &str,
    body: &Value,
) -> Value {
    http.post(format!("{base}{path}"))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .expect("the server answers")
        .json()
        .await
        .expect("a JSON answer")
}

/// `GET base+path` as `token`; the JSON of its 200.
pub async fn get(http: &reqwest::Client, base: &str, token: &str, path: &str) -> Value {
    let answer = http
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .expect("the server answers");
    assert_eq!(answer.status(), 200, "GET {path}");
    answer.json().await.expect("a JSON answer")
}

/// A page of up to 500 events of `session` after `cursor` (from the start without one),
/// waiting up to `wait` ms; an error when the server does not answer it.
pub async fn page(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    session: &str,
    cursor: Option<&str>,
    wait: u64,
) -> reqwest::Result<Value> {
    let mut query = vec![("wait", wait.to_string()), ("limit", "500".to_owned())];
    if let Some(cursor) = cursor {
        query.push(("cursor", cursor.to_owned()));
    }
    http.get(format!("{base}/v1/agent/chat/{session}"))
        .bearer_auth(token)
        .query(&query)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await
}

/// Reads `session` from `cursor` page by page until an event is `found`; the cursor after it.
pub async fn read_until(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    session: &str,
    cursor: &str,
    found: impl Fn(&Value) -> bool,
) -> String {
    let mut cursor = cursor.to_owned();
    loop {
        let page = page(http, base, token, session, Some(&cursor), 5_000)
            .await
            .expect("a page");
        cursor = page["cursor"].as_str().expect("a cursor").to_owned();
        if page["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(&found)
        {
            return cursor;
        }
    }
}
