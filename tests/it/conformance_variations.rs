//! The suite against deployments that differ from the reference server only where the interface
//! leaves room: a layer in front of the reference server changes event kinds, error codes, key
//! order, profile objects and the catalog. The normative level must pass through each variation;
//! at level `all`, the profile findings must name what differed. The SDK reads through the same
//! layer: an event kind it does not know is kept whole, on a turn and on both streams. Another
//! team's deployment ([`crate::another_team`]) has them all at once and more: the normative level
//! passes it, refused means are inconclusive, and each fault on a stated fact fails it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use futures_util::StreamExt;
use intent_conformance::baseline::{Baseline, compare};
use intent_conformance::checks::Status;
use intent_conformance::embedded::Embedded;
use intent_conformance::inputs::Inputs;
use intent_conformance::suite::{DEFAULT_JOBS, Report, Selection, run};
use intent_models::{AgentEvent, TurnState};
use intent_sdk::RetryPolicy;
use serde_json::{Value, json};

use crate::another_team::{AnotherTeam, Fault as AnotherFault, front, its_profile};
use crate::fronts::{events_up_to, failed_normative, is_event_stream, refusal, sdk_behind};

/// One way a deployment may differ from the reference server and still follow the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variation {
    /// User-message entries have another kind name, and every entry an extra member (parts 2.11
    /// and 6: the shape of event entries and their kind names are not shown).
    EventKinds,
    /// Error codes other than `invalid_cursor` are other words (part 7).
    ErrorCodes,
    /// Error envelopes carry a bare string code (part 7: the content of `error` is not shown).
    BareErrorCodes,
    /// Every JSON object is written with its keys in reverse order.
    ReorderedKeys,
    /// Objects of our profile's schemas carry an extra member.
    ProfileExtraMembers,
    /// The catalog lacks the operations and the skill of openapi.json's examples (part 4.1: the
    /// catalog is the deployment's), and the run is given inputs from what it holds.
    AnotherCatalog,
    /// Every 40th request under `/v1/` is refused with 429 and `Retry-After: 1` (part 7: rate
    /// limits are not shown).
    RateLimited,
}

impl Variation {
    const ALL: [Variation; 7] = [
        Variation::EventKinds,
        Variation::ErrorCodes,
        Variation::BareErrorCodes,
        Variation::ReorderedKeys,
        Variation::ProfileExtraMembers,
        Variation::AnotherCatalog,
        Variation::RateLimited,
    ];

    /// What the profile findings at level `all` must mention, where our profile differs.
    fn named(self) -> Option<&'static str> {
        match self {
            Variation::EventKinds => Some("user_input"),
            Variation::ErrorCodes => Some("E_"),
            // The profile reads a bare code as the code: nothing differs.
            Variation::BareErrorCodes => None,
            Variation::ReorderedKeys => None,
            // The profile's objects are open to members it does not name.
            Variation::ProfileExtraMembers => None,
            // The catalog is not part of the profile.
            Variation::AnotherCatalog => None,
            // A 429 waited out is a warning at every level.
            Variation::RateLimited => None,
        }
    }
}

/// The operations and skill of openapi.json's examples, which the other catalog lacks.
const HIDDEN: [&str; 3] = ["erc20-transfer", "spl-transfer", "address"];

/// Inputs from what the other catalog holds.
fn catalog_inputs() -> Inputs {
    let evm = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
    let svm = "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM";
    serde_json::from_value(json!({
        "evmBuild": { "app": "evm-assets", "operations": [{ "operation": "native-transfer",
            "input": { "chainId": 31337, "from": evm, "to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
                       "amount": "0.001" } }] },
        "svmStage": { "app": "svm-assets", "operations": [{ "operation": "sol-transfer",
            "input": { "cluster": "localnet", "from": svm,
                       "to": "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T", "amount": "0.01" } }] },
        "skillCall": { "skill": "fees", "operation": "quote", "input": { "chainId": 31337 } },
        "appOperation": { "app": "evm-assets", "operation": "native-transfer" }
    }))
    .expect("inputs")
}

/// Whether a request to `path` with `body` names what the other catalog lacks.
fn names_hidden(path: &str, body: &[u8]) -> bool {
    let in_path = path.starts_with("/v1/pipeline/")
        && path.split('/').any(|segment| HIDDEN.contains(&segment));
    let in_body = serde_json::from_slice::<Value>(body).is_ok_and(|body| {
        body["operations"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|operation| {
                HIDDEN
                    .iter()
                    .any(|hidden| operation["operation"] == *hidden)
            })
    });
    in_path || in_body
}

/// The catalog list under `list` in `body` without what the other catalog lacks.
fn hide(body: &mut Value, list: &str) {
    let Some(entries) = body.get_mut(list).and_then(Value::as_array_mut) else {
        return;
    };
    entries.retain(|entry| !HIDDEN.iter().any(|hidden| entry["name"] == *hidden));
    for entry in entries {
        if let Some(operations) = entry.get_mut("operations").and_then(Value::as_array_mut) {
            operations
                .retain(|operation| !HIDDEN.iter().any(|hidden| operation["name"] == *hidden));
        }
    }
}

/// A deployment whose catalog lacks [`HIDDEN`]: requests naming them that the server would
/// grant get 404, and the catalog lists leave them out.
async fn another_catalog(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let hidden = names_hidden(&path, &bytes);
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if hidden && response.status().is_success() {
        return refusal(404, "not_found", None);
    }
    let list = match path.as_str() {
        "/v1/pipeline/apps" => "apps",
        "/v1/pipeline/skills" => "skills",
        _ => return response,
    };
    let (mut parts, body) = response.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    hide(&mut value, list);
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(value.to_string()))
}

/// The page or entry list in `body` with its user messages renamed and a member added to every
/// entry.
fn vary_events(body: &mut Value) {
    for event in body["events"].as_array_mut().into_iter().flatten() {
        if event["type"] == "message" && event["role"] == "user" {
            event["type"] = json!("user_input");
            if let Some(members) = event.as_object_mut() {
                members.remove("role");
            }
        }
        event["x-trace"] = json!("t-1");
    }
}

/// JSON text of `value` with every object's keys in reverse order.
fn reversed(value: &Value) -> String {
    match value {
        Value::Object(members) => {
            let inner: Vec<String> = members
                .iter()
                .rev()
                .map(|(key, member)| format!("{}:{}", Value::from(key.as_str()), reversed(member)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(reversed).collect();
            format!("[{}]", inner.join(","))
        }
        other => other.to_string(),
    }
}

/// Whether a response of `method` `path` is an object of a schema our profile fills.
fn profile_object(method: &str, path: &str) -> bool {
    (method == "POST" && path == "/v1/agent/chat")
        || (method == "GET"
            && (path == "/v1/account/apps"
                || path == "/v1/account/statement"
                || path == "/v1/pipeline/skills"
                || path.ends_with("/secrets")))
}

/// Varies a JSON body of `method` `path` answered with `status`.
fn vary_json(variation: Variation, method: &str, path: &str, status: u16, body: &mut Value) {
    let events_page = method == "GET" && path.starts_with("/v1/agent/chat/");
    if !path.starts_with("/v1/") {
        // OAuth's endpoints answer in OAuth's form, which the interface does not shape.
        return;
    }
    match variation {
        Variation::EventKinds if events_page && status == 200 => vary_events(body),
        Variation::ErrorCodes | Variation::BareErrorCodes if status >= 400 => {
            let code = body
                .pointer("/error/code")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_owned();
            if code == "invalid_cursor" {
                return;
            }
            if variation == Variation::ErrorCodes {
                body["error"]["code"] = json!(format!("E_{code}"));
            } else {
                *body = json!({ "error": code });
            }
        }
        Variation::ProfileExtraMembers if status < 300 && profile_object(method, path) => {
            body["x-vendor"] = json!({ "region": "eu" });
        }
        _ => {}
    }
}

/// One SSE chunk with the data of its `page` events varied.
fn vary_sse(chunk: &Bytes) -> Bytes {
    let text = String::from_utf8_lossy(chunk);
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| match line.strip_prefix("data:") {
            Some(data) => match serde_json::from_str::<Value>(data.trim()) {
                Ok(mut page) if page.get("events").is_some() => {
                    vary_events(&mut page);
                    format!("data: {page}")
                }
                _ => line.to_owned(),
            },
            None => line.to_owned(),
        })
        .collect();
    Bytes::from(lines.join("\n"))
}

async fn vary(State(variation): State<Arc<Variation>>, request: Request, next: Next) -> Response {
    let variation = *variation;
    if variation == Variation::AnotherCatalog {
        return another_catalog(request, next).await;
    }
    if variation == Variation::RateLimited && request.uri().path().starts_with("/v1/") {
        static REQUESTS: AtomicUsize = AtomicUsize::new(0);
        if REQUESTS.fetch_add(1, Ordering::Relaxed) % 40 == 39 {
            return refusal(429, "rate_limited", Some("1"));
        }
    }
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let (mut parts, body) = response.into_parts();
    if is_event_stream(&parts.headers) {
        if variation != Variation::EventKinds {
            return Response::from_parts(parts, body);
        }
        let stream = body
            .into_data_stream()
            .map(|chunk| chunk.map(|chunk| vary_sse(&chunk)));
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    vary_json(variation, &method, &path, status, &mut value);
    parts.headers.remove(header::CONTENT_LENGTH);
    let text = if variation == Variation::ReorderedKeys {
        reversed(&value)
    } else {
        value.to_string()
    };
    Response::from_parts(parts, Body::from(text))
}

/// The suite at `level` against the reference server behind `variation`, given the inputs the
/// variation's catalog needs.
async fn suite(variation: Variation, normative_only: bool) -> Report {
    let inputs = match variation {
        Variation::AnotherCatalog => catalog_inputs(),
        _ => Inputs::default(),
    };
    suite_with(variation, normative_only, inputs).await
}

async fn suite_with(variation: Variation, normative_only: bool, inputs: Inputs) -> Report {
    let state = Arc::new(variation);
    let server = Embedded::start_with(move |app| app.layer(from_fn_with_state(state, vary)))
        .await
        .expect("the embedded server starts");
    let selection = Selection {
        skip: vec!["limits.rate-limit".into(), "deployment".into()],
        normative_only,
        ..Selection::default()
    };
    let mut target = server.target();
    target.settings.inputs = inputs;
    run(&target, &selection, DEFAULT_JOBS, |_| {}).await
}

fn broken(report: &Report) -> Vec<String> {
    report
        .outcomes
        .iter()
        .filter(|outcome| matches!(outcome.status, Status::Fail | Status::Error | Status::Skip))
        .map(|outcome| format!("{}: {:?}", outcome.id, outcome.message))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_normative_level_passes_every_variation_the_interface_allows() {
    let reports = futures_util::future::join_all(
        Variation::ALL
            .iter()
            .map(|variation| suite(*variation, true)),
    )
    .await;
    for (variation, report) in Variation::ALL.iter().zip(&reports) {
        assert!(
            broken(report).is_empty(),
            "{variation:?} at level normative: {:#?}",
            broken(report)
        );
        assert!(report.count(Status::Pass) > 30, "{}", report.summary());
    }
    let limited = &reports[Variation::ALL
        .iter()
        .position(|variation| *variation == Variation::RateLimited)
        .expect("in ALL")];
    let warned = limited
        .outcomes
        .iter()
        .flat_map(|outcome| &outcome.warnings)
        .filter(|warning| warning.contains("429"))
        .count();
    assert!(warned >= 5, "only {warned} waited-out 429s were reported");
}

#[tokio::test(flavor = "multi_thread")]
async fn at_level_all_the_profile_findings_name_what_differed() {
    let varied: Vec<Variation> = Variation::ALL
        .into_iter()
        .filter(|variation| variation.named().is_some())
        .collect();
    let reports =
        futures_util::future::join_all(varied.iter().map(|variation| suite(*variation, false)))
            .await;
    for (variation, report) in varied.iter().zip(&reports) {
        let needle = variation.named().expect("filtered");
        let named = report.outcomes.iter().any(|outcome| {
            outcome.status == Status::Fail
                && outcome.level == intent_conformance::spec::Level::Profile
                && outcome
                    .message
                    .as_deref()
                    .is_some_and(|m| m.contains(needle))
        });
        assert!(
            named,
            "{variation:?} at level all: no profile failure names {needle:?}: {:#?}",
            broken(report)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn without_inputs_the_checks_another_catalog_cannot_serve_skip_and_name_the_key() {
    let report = suite_with(Variation::AnotherCatalog, true, Inputs::default()).await;
    let failed: Vec<String> = broken(&report)
        .into_iter()
        .filter(|line| !line.contains("inputs."))
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    let skipped = |key: &str| {
        report
            .outcomes
            .iter()
            .filter(|outcome| outcome.status == Status::Skip)
            .filter(|outcome| outcome.message.as_deref().is_some_and(|m| m.contains(key)))
            .count()
    };
    assert!(skipped("inputs.evmBuild") >= 5, "{:#?}", broken(&report));
    assert!(skipped("inputs.svmStage") >= 1, "{:#?}", broken(&report));
    assert!(skipped("inputs.skillCall") >= 1, "{:#?}", broken(&report));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sdk_keeps_entries_of_kinds_it_does_not_know_on_a_turn_and_on_both_streams() {
    let state = Arc::new(Variation::EventKinds);
    let (_server, intent) = sdk_behind(
        move |app| app.layer(from_fn_with_state(state, vary)),
        RetryPolicy::default(),
    )
    .await;
    let agent = intent.agent();
    let outcome = agent.run_turn("hello", None).await.expect("the turn runs");
    assert_eq!(outcome.state, TurnState::Complete);
    let renamed = |events: &[AgentEvent]| {
        events.iter().any(|event| {
            matches!(event, AgentEvent::Unknown(unknown)
                if unknown.kind == "user_input" && unknown.members.contains_key("x-trace"))
        })
    };
    assert!(renamed(&outcome.events), "{:#?}", outcome.events);
    let last = outcome.events.last().expect("events").seq();
    let within = Duration::from_secs(10);
    let polled = events_up_to(agent.follow(&outcome.session_id, None), last, within).await;
    let streamed = events_up_to(agent.follow_sse(&outcome.session_id, None), last, within).await;
    assert_eq!(polled, outcome.events);
    assert_eq!(streamed, outcome.events);
}

/// The suite against another team's deployment ([`crate::another_team`]): every variation above
/// at once behind its front, broken by `fault` when given, with `means` as the config file's
/// `profile` (none: a token source alone). Takes `only` (all when empty), at the normative level.
async fn another_team(faults: &[AnotherFault], means: Option<Value>, only: &[&str]) -> Report {
    let team = AnotherTeam::new(faults);
    let layered = |variation: Variation| from_fn_with_state(Arc::new(variation), vary);
    let server = Embedded::start_with(move |app| {
        app.layer(layered(Variation::EventKinds))
            .layer(layered(Variation::BareErrorCodes))
            .layer(layered(Variation::ProfileExtraMembers))
            .layer(layered(Variation::AnotherCatalog))
            .layer(layered(Variation::RateLimited))
            .layer(from_fn_with_state(team, front))
            .layer(layered(Variation::ReorderedKeys))
    })
    .await
    .expect("the embedded server starts");
    let selection = Selection {
        only: only.iter().map(|id| id.to_string()).collect(),
        skip: vec!["limits.rate-limit".into(), "deployment".into()],
        normative_only: true,
    };
    let mut target = server.target();
    target.settings.inputs = catalog_inputs();
    if let Some(means) = means {
        target.settings.means = serde_json::from_value(means).expect("a profile");
    }
    run(&target, &selection, DEFAULT_JOBS, |_| {}).await
}

fn status_of(report: &Report, id: &str) -> Status {
    report
        .outcomes
        .iter()
        .find(|outcome| outcome.id == id)
        .map_or(Status::Disabled, |outcome| outcome.status)
}

#[tokio::test(flavor = "multi_thread")]
async fn another_teams_deployment_passes_the_normative_level_and_refused_means_are_inconclusive() {
    let mut chat_only = its_profile();
    chat_only["cursorParameter"] = json!("cursor");
    let (configured, alone, chat_only) = tokio::join!(
        another_team(&[], Some(its_profile()), &[]),
        another_team(&[], None, &[]),
        another_team(&[], Some(chat_only), &["agent.events", "agent.sse"]),
    );
    // With its profile in the config file, the cursor rules of part 7 are judged, and hold.
    let failed = |report: &Report| -> Vec<String> {
        broken(report)
            .into_iter()
            .filter(|line| !line.contains("Some(\"inconclusive"))
            .filter(|line| {
                !line.starts_with("agent.events.expired-cursor") || !line.contains("15 s")
            })
            .collect()
    };
    assert!(failed(&configured).is_empty(), "{:#?}", broken(&configured));
    for id in [
        "agent.events.invalid-cursor",
        "agent.events.foreign-cursor",
        "agent.events.expired-cursor",
        "agent.events.round-trip",
        "agent.sse.resume",
        "pipeline.commit",
        "pipeline.commit-expired",
        "agent.sessions.update",
        "auth.isolation.getSession",
        "limits.wait",
    ] {
        assert_eq!(
            status_of(&configured, id),
            Status::Pass,
            "{id}: {:#?}",
            broken(&configured)
        );
    }
    assert!(
        configured.count(Status::Pass) > 40,
        "{}",
        configured.summary()
    );
    // Each check names the means it went through, proved: the poll's cursor, and the stream's
    // from `Last-Event-ID`.
    let proved = |report: &Report, id: &str, key: &str| {
        let outcome = report.outcomes.iter().find(|outcome| outcome.id == id);
        let means = outcome.into_iter().flat_map(|outcome| &outcome.means);
        means
            .filter(|means| means.key == key)
            .any(|means| means.verified)
    };
    assert!(proved(
        &configured,
        "agent.events.round-trip",
        "cursorParameter"
    ));
    assert!(proved(&configured, "agent.sse.resume", "streamCursor"));
    assert!(proved(&configured, "pipeline.commit", "commit"));
    // A means set for checks the run left out is reported as never tried.
    let unused = "`profile.commit` is set, but no check of this run went through it";
    assert!(
        chat_only.warnings.iter().any(|w| w == unused),
        "{:?}",
        chat_only.warnings
    );
    assert!(
        !configured
            .warnings
            .iter()
            .any(|w| w.contains("is set, but")),
        "{:?}",
        configured.warnings
    );
    // With a token source alone, or our cursor parameter, nothing fails: what needs a means the
    // deployment refuses is inconclusive and names the key to set.
    for (report, keys) in [
        (&alone, &["profile.chat", "profile.commit"][..]),
        (&chat_only, &["profile.cursorParameter"][..]),
    ] {
        let refused: Vec<String> = broken(report)
            .into_iter()
            .filter(|line| !line.contains("inconclusive") && !line.contains("was seen in this run"))
            .collect();
        assert!(refused.is_empty(), "{refused:#?}");
        for key in keys {
            let named = report.outcomes.iter().any(|outcome| {
                outcome.status == Status::Skip
                    && outcome.message.as_deref().is_some_and(|m| m.contains(key))
            });
            assert!(
                named,
                "no inconclusive check names {key}: {:#?}",
                broken(report)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn another_teams_deployment_is_never_failed_by_its_profile_less_any_one_key() {
    let keys: Vec<String> = its_profile()
        .as_object()
        .expect("a profile is an object")
        .keys()
        .cloned()
        .collect();
    let reports = futures_util::future::join_all(keys.iter().map(|key| {
        let mut partial = its_profile();
        partial.as_object_mut().unwrap().remove(key);
        another_team(&[], Some(partial), &[])
    }))
    .await;
    for (key, report) in keys.iter().zip(&reports) {
        let failed: Vec<String> = broken(report)
            .into_iter()
            .filter(|line| !line.contains("inconclusive") && !line.contains("was seen in this run"))
            .filter(|line| {
                !line.starts_with("agent.events.expired-cursor") || !line.contains("15 s")
            })
            .collect();
        assert!(failed.is_empty(), "without profile.{key}: {failed:#?}");
        let named = report.outcomes.iter().any(|outcome| {
            outcome.status == Status::Skip
                && outcome
                    .message
                    .as_deref()
                    .is_some_and(|m| m.contains(&format!("profile.{key}")))
        });
        assert!(
            named,
            "without profile.{key}, no inconclusive check names it: {:#?}",
            broken(report)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_fault_on_a_stated_fact_fails_another_teams_deployment_at_the_normative_level() {
    let reports = futures_util::future::join_all(AnotherFault::ALL.iter().map(|fault| {
        another_team(
            std::slice::from_ref(fault),
            Some(its_profile()),
            fault.breaks().0,
        )
    }))
    .await;
    let mut wrong = Vec::new();
    for (fault, report) in AnotherFault::ALL.iter().zip(&reports) {
        let expected: BTreeSet<&str> = fault.breaks().1.iter().copied().collect();
        if !expected.is_subset(&failed_normative(report)) {
            wrong.push(format!(
                "{fault:?}: expected {expected:?} to fail, got {:#?}",
                broken(report)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_baseline_knows_each_way_a_check_fails_so_a_second_break_inside_a_known_failure_is_new() {
    use AnotherFault::{BuildWithoutAttestation, IgnoresBadCursor, SimulationWithoutGas};
    let only = ["agent.events.invalid-cursor", "pipeline.build"];
    let profile = || Some(its_profile());
    // Four deployments of their own (other ports, ids, times and cursors): the first two break
    // the same facts the same way, the third breaks part 2.2 once more inside `pipeline.build`.
    let (first, again, both, mended) = tokio::join!(
        another_team(
            &[IgnoresBadCursor, BuildWithoutAttestation],
            profile(),
            &only
        ),
        another_team(
            &[IgnoresBadCursor, BuildWithoutAttestation],
            profile(),
            &only
        ),
        another_team(
            &[
                IgnoresBadCursor,
                BuildWithoutAttestation,
                SimulationWithoutGas
            ],
            profile(),
            &only
        ),
        another_team(&[], profile(), &only),
    );
    let baseline = Baseline::of(&first);
    let checks: Vec<&str> = baseline.known.iter().map(|k| k.check.as_str()).collect();
    assert_eq!(checks, only, "{baseline:#?}");
    assert!(
        baseline.known[1]
            .broke
            .as_deref()
            .is_some_and(|broke| broke.contains("/attestation")),
        "{baseline:#?}"
    );

    // The same failures with other ids and times: known, and no report calls the run failed.
    let mut again = again;
    let known = compare(&mut again, &baseline, false);
    assert_eq!((known.new.len(), known.known.len()), (0, 2), "{known:#?}");
    assert!(!again.failed());
    let junit = intent_conformance::report::junit(&again);
    let parsed = quick_junit::Report::deserialize_from_str(&junit).expect("JUnit XML");
    let failures: usize = parsed
        .test_suites
        .iter()
        .map(|s| s.failures + s.errors)
        .sum();
    let skipped_known = parsed
        .test_suites
        .iter()
        .flat_map(|suite| &suite.test_cases)
        .filter(|case| {
            matches!(&case.status, quick_junit::TestCaseStatus::Skipped { ty: Some(ty), .. } if ty.as_str() == "known")
        })
        .count();
    assert_eq!((failures, skipped_known), (0, 2), "{junit}");
    let summary = intent_conformance::report::summary(&again);
    assert!(summary.contains("| 0 | 0 | 2 |"), "{summary}");
    assert!(summary.contains("### Known failures") && !summary.contains("### New failures"));
    assert!(!intent_conformance::report::github(&again).contains("::error"));
    // Unless normative findings may not be baselined.
    assert_eq!(compare(&mut first.clone(), &baseline, true).new.len(), 2);

    // A second, independent break inside the failing `pipeline.build`: new, though the check
    // already failed, and it alone is new.
    let mut both = both;
    let compared = compare(&mut both, &baseline, false);
    let new: Vec<(&str, &str)> = compared
        .new
        .iter()
        .map(|k| (k.check.as_str(), k.broke.as_deref().unwrap_or_default()))
        .collect();
    assert_eq!(new.len(), 1, "{compared:#?}");
    assert_eq!(new[0].0, "pipeline.build");
    assert!(new[0].1.contains("/simulation/gas"), "{new:?}");
    assert_eq!(compared.known.len(), 2, "{compared:#?}");
    assert!(both.failed());
    let github = intent_conformance::report::github(&both);
    assert!(
        github.contains("::error title=pipeline.build fail"),
        "{github}"
    );
    assert!(
        github.contains("::warning title=agent.events.invalid-cursor known"),
        "{github}"
    );
    let sarif: Value = serde_json::from_str(&intent_conformance::report::sarif(&both)).unwrap();
    let states: Vec<(&str, &str)> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["ruleId"].as_str().unwrap(),
                r["baselineState"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states
            .iter()
            .filter(|(_, state)| *state == "new")
            .collect::<Vec<_>>(),
        [&("pipeline.build", "new")],
        "{states:?}"
    );
    assert_eq!(states.len(), 3, "{states:?}");
    // The baseline's verdicts are members of the JSON report, which holds against its schema.
    let path = intent_tests::workspace_root().join("conformance/report.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let json = serde_json::to_value(&both).unwrap();
    let errors: Vec<String> = jsonschema::draft202012::new(&schema)
        .expect("the report schema compiles")
        .iter_errors(&json)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");

    // A deployment that mended both: nothing new, both fixed.
    let mut mended = mended;
    let fixed = compare(&mut mended, &baseline, false);
    assert_eq!((fixed.new.len(), fixed.fixed.len()), (0, 2), "{fixed:#?}");
}
