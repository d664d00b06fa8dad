//! A deployment written from the interface document alone, in another language:
//! `tests/independent/server.py` (Python's standard library, no code of ours). It keeps its own
//! Builds and simulations, event log, cursors, tokens and OAuth, and its means differ from ours
//! and from the other teams' wherever the document allows (its README lists them). It is
//! configured as its README says a new user would: `--discover`, then the keys discovery cannot
//! find (`tests/independent/intent-conformance.json`), and it can be broken on a fact the
//! document states (`--fault NAME`).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use intent_conformance::checks::Status;
use intent_conformance::discover::{Discovery, discover};
use intent_conformance::suite::{DEFAULT_JOBS, Report, Selection, run};
use intent_conformance::target::{Settings, Target, TokenSource, Tokens};

use crate::fronts::{failed_normative, with_status};

/// The secret the server signs its tokens, cursors and attestations with.
const SECRET: &str = "independent-secret";

/// Its cursor lifetime in seconds, short enough for the 410 check.
const CURSOR_TTL: u64 = 5;

/// The directory of the implementation.
fn home() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("independent")
}

/// The implementation, running on a free port; stopped when dropped.
struct Independent {
    child: Child,
    base: String,
}

impl Independent {
    /// Starts it with `faults` (names of its `--fault`).
    fn start(faults: &[&str]) -> Self {
        let mut command = Command::new("python3");
        command
            .arg(home().join("server.py"))
            .args([
                "serve",
                "--port",
                "0",
                "--secret",
                SECRET,
                "--build-ttl",
                "8",
            ])
            .args(["--cursor-ttl", &CURSOR_TTL.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for fault in faults {
            command.args(["--fault", fault]);
        }
        let mut child = command
            .spawn()
            .expect("python3 runs tests/independent/server.py (the tests need Python 3)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("its standard output"))
            .read_line(&mut line)
            .expect("its first line");
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the server did not start: {line:?}"))
            .to_owned();
        Self { child, base }
    }
}

impl Drop for Independent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The config file its README gives the suite: the keys discovery cannot find.
fn documented() -> Value {
    let text = std::fs::read_to_string(home().join("intent-conformance.json")).expect("the file");
    serde_json::from_str(&text).expect("JSON")
}

/// `over` merged into `under`, member by member, `over` winning.
fn merged(under: &Value, over: &Value) -> Value {
    match (under, over) {
        (Value::Object(under), Value::Object(over)) => {
            let mut out = under.clone();
            for (key, value) in over {
                let merged = match out.get(key) {
                    Some(below) => merged(below, value),
                    None => value.clone(),
                };
                out.insert(key.clone(), merged);
            }
            Value::Object(out)
        }
        (_, over) => over.clone(),
    }
}

/// The suite's view of the deployment at `base` through `profile` and `inputs` (JSON), its
/// tokens from the server's own token command.
fn target(base: &str, profile: &Value, inputs: &Value) -> Target {
    let settings = Settings {
        cursor_ttl: Some(Duration::from_secs(CURSOR_TTL)),
        means: serde_json::from_value(profile.clone()).expect("a profile"),
        inputs: serde_json::from_value(inputs.clone()).expect("inputs"),
        ..Settings::default()
    };
    let command = format!(
        "INDEPENDENT_SECRET={SECRET} python3 '{}' token",
        home().join("server.py").display()
    );
    Target::new(base, Tokens::default(), settings).with_source(TokenSource::Command(command))
}

/// The normative level of the suite against `target`, `only` those checks when any.
async fn normative(target: &Target, only: &[&str]) -> Report {
    let selection = Selection {
        only: only.iter().map(|id| id.to_string()).collect(),
        skip: vec!["limits.rate-limit".into(), "deployment".into()],
        normative_only: true,
    };
    run(target, &selection, DEFAULT_JOBS, |_| {}).await
}

/// What discovery finds on `server`, and the profile and inputs a new user ends with: what it
/// found, with the documented keys over it.
async fn configured(server: &Independent) -> (Discovery, Value, Value) {
    let file = documented();
    let found = discover(&target(&server.base, &file["profile"], &file["inputs"]))
        .await
        .expect("a discovery");
    let profile = merged(&Value::Object(found.profile.clone()), &file["profile"]);
    (found, profile, file["inputs"].clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deployment_written_from_the_document_alone_passes_once_configured_and_is_never_failed_without()
 {
    let server = Independent::start(&[]);
    let (found, profile, inputs) = configured(&server).await;
    // Discovery finds every means but those it cannot probe without an effect.
    for (key, expected) in [
        ("cursorParameter", serde_json::json!("from")),
        ("streamCursor", serde_json::json!({ "query": "since" })),
        ("errorCode", serde_json::json!("/error/kind")),
    ] {
        assert_eq!(
            found.profile.get(key),
            Some(&expected),
            "{:#?}",
            found.notes
        );
    }
    for key in ["turnState", "action", "resolution"] {
        assert!(found.profile.contains_key(key), "{key}: {:#?}", found.notes);
    }
    let report = normative(&target(&server.base, &profile, &inputs), &[]).await;
    let unpassed: Vec<String> = [Status::Fail, Status::Error]
        .into_iter()
        .flat_map(|status| with_status(&report, status))
        .collect();
    assert!(unpassed.is_empty(), "{unpassed:#?}");
    // The checks that rest on each subject and means the keys give reach a verdict.
    for id in [
        "auth.oauth",
        "pipeline.operation-descriptor",
        "pipeline.commit-resimulates",
        "account.install-remove",
        "agent.actions.resolution",
        "agent.events.invalid-cursor",
        "agent.events.expired-cursor",
        "agent.sse.resume",
        "limits.wait",
    ] {
        let outcome = report.outcomes.iter().find(|outcome| outcome.id == id);
        assert_eq!(
            outcome.map(|outcome| outcome.status),
            Some(Status::Pass),
            "{id}: {:?}",
            outcome.map(|outcome| &outcome.message)
        );
    }
    // It serves no MCP resource: the grants of the MCP scopes are never claimed.
    assert!(
        report
            .facts
            .unasserted
            .contains(&"5.scope-mcp-agent".to_owned()),
        "{:?}",
        report.facts
    );
    // With neither profile nor inputs, on a fresh instance: never failed.
    let fresh = Independent::start(&[]);
    let none = Value::Object(Default::default());
    let alone = normative(&target(&fresh.base, &none, &none), &[]).await;
    let failed = with_status(&alone, Status::Fail);
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Each fault of the implementation on a fact the document states, and the normative check
/// that names that fact. Its faults that let a path parameter past its bound (`session-id-161`,
/// `app-id-zero`, `names-unlimited`) are left out: past the bound it answers what it answers a
/// missing session or app, a 404 in the envelope, which no request can tell from a refusal.
const FAULTS: [(&str, &str); 24] = [
    ("wait-unbounded", "limits.wait"),
    ("credential-name-late-char", "limits.credential-name"),
    ("resolve-without-scope", "agent.actions.resolution"),
    ("resolve-without-key", "agent.actions.resolution"),
    ("resolve-other-build", "agent.actions.resolution"),
    ("resolve-caller-fields", "agent.actions.resolution"),
    ("turn-state-outside", "agent.turns.terminal"),
    ("cursor-not-400", "agent.events.invalid-cursor"),
    ("foreign-cursor-ok", "agent.events.foreign-cursor"),
    ("expired-cursor-ok", "agent.events.expired-cursor"),
    ("stage-without-scope", "auth.matrix.svmStage"),
    ("token-any-resource", "auth.matrix.getSession"),
    ("session-leak", "auth.isolation.getSession"),
    ("build-version-1", "pipeline.build"),
    ("commit-after-expiry", "pipeline.commit-expired"),
    ("no-resimulate", "pipeline.commit-resimulates"),
    ("digest-unchecked", "pipeline.commit-tampered"),
    ("commit-any-owner", "pipeline.commit-tampered"),
    ("page-top-level-messages", "schema.event-page"),
    ("error-outside-envelope", "schema.error-envelope"),
    ("step-zero", "limits.step"),
    ("simulation-extra-field", "schema.simulation"),
    ("install-without-credential", "account.install-remove"),
    ("patch-ignored", "agent.sessions.update"),
];

#[tokio::test(flavor = "multi_thread")]
async fn each_fault_on_a_stated_fact_fails_the_check_that_names_it() {
    let (_, profile, inputs) = configured(&Independent::start(&[])).await;
    let runs = FAULTS.iter().map(|(fault, check)| {
        let (profile, inputs) = (&profile, &inputs);
        async move {
            let server = Independent::start(&[fault]);
            // The checks that judge what other checks were answered run beside one that asks.
            let only: &[&str] = match *check {
                "limits.step" | "schema.simulation" => &[check, "pipeline.build"],
                "schema.event-page" => &[check, "agent.events.round-trip"],
                "schema.error-envelope" => &[check, "agent.events.invalid-cursor"],
                _ => &[check],
            };
            let report = normative(&target(&server.base, profile, inputs), only).await;
            (fault, check, report)
        }
    });
    let mut missed = Vec::new();
    for (fault, check, report) in futures_util::future::join_all(runs).await {
        let failed: BTreeSet<&str> = failed_normative(&report);
        if !failed.contains(check) {
            missed.push(format!(
                "{fault}: {check} did not fail: {:?}",
                report
                    .outcomes
                    .iter()
                    .filter(|outcome| outcome.status != Status::Disabled)
                    .map(|outcome| format!(
                        "{} {:?} {:?}",
                        outcome.id, outcome.status, outcome.message
                    ))
                    .collect::<Vec<_>>()
            ));
        }
    }
    assert!(missed.is_empty(), "{missed:#?}");
}
