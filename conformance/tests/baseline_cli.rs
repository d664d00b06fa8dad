//! The baseline workflow of a CI job, through the CLI as a job runs it: record the failures
//! (exit 0), pass on known ones, fail on a new one, and re-run what failed under
//! `--min-coverage`. The deployment is a loopback port nothing listens on, so every check that
//! reaches it breaks the same way in every run.

use std::path::Path;
use std::process::{Command, Output};

/// Nothing listens on port 9 (discard) of the loopback.
const NOWHERE: &str = "http://127.0.0.1:9";

/// Runs `intent-conformance run` against [`NOWHERE`] in `dir` with `args`.
fn run(dir: &Path, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_intent-conformance"))
        .current_dir(dir)
        .args([
            "run",
            "--base-url",
            NOWHERE,
            "--agent-token",
            "t",
            "--no-progress",
        ])
        .args(args)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("the CLI runs");
    assert!(
        output.status.code().is_some_and(|code| code < 2),
        "usage or setup error: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn a_job_records_its_baseline_then_fails_only_on_what_is_new_and_reruns_under_min_coverage() {
    let dir = std::env::temp_dir().join(format!("intent-baseline-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let one = "auth.matrix.getSession";
    let two = "auth.matrix.getSession,auth.matrix.updateSession";

    // Recording the baseline passes, though the check broke.
    let first = run(
        &dir,
        &[
            "--only",
            one,
            "--json",
            "first.json",
            "--write-baseline",
            "baseline.json",
        ],
    );
    assert!(first.status.success(), "{}", stdout(&first));
    let baseline: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("baseline.json")).unwrap()).unwrap();
    assert_eq!(baseline["version"], 2);
    let known = baseline["known"].as_array().unwrap();
    assert_eq!(known.len(), 1, "{baseline}");
    assert_eq!(known[0]["check"], one);
    assert_eq!(known[0]["fingerprint"].as_str().map(str::len), Some(16));

    // Without it, the same run fails.
    assert_eq!(run(&dir, &["--only", one]).status.code(), Some(1));

    // Against it: the known failure passes the run, and no report calls it failed.
    let again = run(
        &dir,
        &[
            "--only",
            one,
            "--baseline",
            "baseline.json",
            "--summary",
            "summary.md",
            "--events",
            "events.jsonl",
        ],
    );
    assert!(again.status.success(), "{}", stdout(&again));
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let last = events.lines().last().unwrap_or_default();
    assert!(
        last.contains(r#""event":"run_finished""#) && last.contains(r#""failed":false"#),
        "{last}"
    );
    assert!(
        stdout(&again).contains("0 failed, 1 known, 0 errors"),
        "{}",
        stdout(&again)
    );
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("### Known failures") && !summary.contains("New failures"));

    // Another check failing the same way is new, and fails the run.
    let new = run(&dir, &["--only", two, "--baseline", "baseline.json"]);
    assert_eq!(new.status.code(), Some(1), "{}", stdout(&new));
    assert!(
        stdout(&new).contains("baseline: auth.matrix.updateSession [normative] new"),
        "{}",
        stdout(&new)
    );

    // A re-run of what failed reaches one operation of 21: `--min-coverage` is judged over what
    // it reached (here none answered), not over every operation.
    let rerun = run(
        &dir,
        &[
            "--rerun",
            "first.json",
            "--baseline",
            "baseline.json",
            "--min-coverage",
            "90",
        ],
    );
    assert!(
        rerun.status.success(),
        "{}",
        String::from_utf8_lossy(&rerun.stderr)
    );
    assert!(stdout(&rerun).contains("rerun: auth.matrix.getSession [normative] fails again"));
    std::fs::remove_dir_all(&dir).unwrap();
}
