//! The log an operator's tools read: with `--log-format json`, one JSON object a line, a
//! request's line naming its request id, status and latency; as text on a pipe, no colour.

use std::io::Read;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::{BINARY, listening};

/// Starts the server with `args` before `serve`, answers one request, kills it and returns
/// what it logged.
async fn logged(args: &[&str]) -> String {
    let data_dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BINARY)
        .args(args)
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir.path())
        .env("RUST_LOG", "info,intent_server=debug")
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the server binary starts");
    let base = listening(&mut child);
    let answer = reqwest::get(format!("{base}/.well-known/jwks.json"))
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let answer = reqwest::get(format!("{base}/v1/pipeline/apps"))
        .await
        .unwrap();
    assert_eq!(answer.status(), 401);
    // The answer's line is written before the answer is sent, so it is in the log by now.
    child.kill().unwrap();
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    child.wait().unwrap();
    log
}

#[tokio::test]
async fn json_logs_are_one_object_a_line_with_the_request_s_id_operation_status_and_latency() {
    let log = logged(&["--log-format", "json"]).await;
    let lines: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert!(lines.iter().all(Value::is_object), "{log}");
    let answered = lines
        .iter()
        .find(|line| line["fields"]["message"] == "answered")
        .unwrap_or_else(|| panic!("no line for the answer: {log}"));
    assert_eq!(answered["fields"]["status"], 200, "{answered}");
    assert!(answered["fields"]["latency_ms"].is_f64(), "{answered}");
    assert_eq!(
        answered["span"]["uri"], "/.well-known/jwks.json",
        "{answered}"
    );
    assert!(
        answered["span"]["request_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("req_")),
        "{answered}"
    );
    let refused = lines
        .iter()
        .find(|line| line["fields"]["message"] == "answered" && line["fields"]["status"] == 401)
        .unwrap_or_else(|| panic!("no line for the refused call: {log}"));
    assert_eq!(
        refused["span"]["operation"], "listPipelineApps",
        "{refused}"
    );
    assert_eq!(refused["span"]["uri"], "/v1/pipeline/apps", "{refused}");
}

#[tokio::test]
async fn text_logs_on_a_pipe_carry_no_colour() {
    let log = logged(&[]).await;
    assert!(log.contains("answered"), "{log}");
    assert!(!log.contains('\u{1b}'), "{log:?}");
}
