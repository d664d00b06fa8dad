//! The limits of part 8.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;

use super::{build_simulation, cursor_taken, poll, run, settled_session};
use crate::checks::{Category, Check};
use crate::finding::excerpt;
use crate::finding::{Finding, Verdict, ensure, fail, profile, skip};
use crate::target::{Reply, Role, Target};

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "limits.wait".into(),
            category: Category::Limits,
            requirement: "A poll with a `wait` above 30000 milliseconds MUST be refused with a 4xx in the error envelope, or held no longer than 30000 ms (refusal with 400 is a profile assertion).",
            section: "4.2, 8",
            rests_on: vec![
                "GET /v1/agent/chat/{sessionId}",
                "#/components/parameters/Wait",
            ],
            operation: None,
            run: run!(wait),
        },
        Check {
            id: "limits.session-id".into(),
            category: Category::Limits,
            requirement: "A `{sessionId}` longer than 160 characters MUST be refused with a 4xx in the error envelope.",
            section: "4.2, 8",
            rests_on: vec![
                "GET /v1/agent/sessions/{sessionId}",
                "#/components/parameters/SessionId",
            ],
            operation: None,
            run: run!(session_id),
        },
        Check {
            id: "limits.names".into(),
            category: Category::Limits,
            requirement: "An `{app}`, `{skill}` or `{operation}` longer than 160 characters MUST be refused with a 4xx in the error envelope.",
            section: "4.1, 8",
            rests_on: vec![
                "GET /v1/pipeline/apps/{app}/operations/{operation}",
                "POST /v1/pipeline/skills/{skill}/operations/{operation}",
            ],
            operation: None,
            run: run!(names),
        },
        Check {
            id: "limits.application-id".into(),
            category: Category::Limits,
            requirement: "An `{applicationId}` below 1 or not a number MUST be refused with a 4xx in the error envelope.",
            section: "4.3, 8",
            rests_on: vec![
                "POST /v1/account/apps/{applicationId}",
                "#/components/parameters/ApplicationId",
            ],
            operation: None,
            run: run!(application_id),
        },
        Check {
            id: "limits.credential-name".into(),
            category: Category::Limits,
            requirement: "A credential `{name}` longer than 128 characters or not matching `^[A-Za-z_][A-Za-z0-9_]{0,127}$` MUST be refused with a 4xx in the error envelope.",
            section: "4.3, 8",
            rests_on: vec![
                "DELETE /v1/account/apps/{applicationId}/secrets/{name}",
                "#/components/parameters/CredentialName",
            ],
            operation: None,
            run: run!(credential_name),
        },
        Check {
            id: "limits.step".into(),
            category: Category::Limits,
            requirement: "Every `step` of a balance change, approval or log in the simulation of a Build a lifecycle endpoint answers MUST be at least 1.",
            section: "2.3, 2.4, 2.8, 8",
            rests_on: vec!["#/components/schemas/PipelineSimulation"],
            operation: None,
            run: run!(step),
        },
        Check {
            id: "limits.rate-limit".into(),
            category: Category::Limits,
            requirement: "A burst over the rate limit MUST be answered with 429, an error envelope and a `Retry-After` in seconds, and a request after that time MUST be admitted.",
            section: "8",
            rests_on: vec![
                "GET /v1/account/apps",
                "#/components/responses/TooManyRequests",
            ],
            operation: None,
            run: run!(rate_limit),
        },
    ]
}

/// Expects each request refused: a 4xx in the error envelope (the document gives no status);
/// our profile's 400 is a profile assertion.
async fn refused(target: &Target, token: &str, requests: &[(Method, String)]) -> Verdict {
    for (method, path) in requests {
        let mut call = target.request(method.clone(), path).bearer(token);
        if *method == Method::POST {
            call = call.json(&serde_json::json!({}));
        }
        let what = format!("{method} {}…", &path[..path.len().min(60)]);
        let reply = call.send().await?;
        reply.ensure_refused(&what)?;
        profile(reply.status == 400, || {
            format!(
                "{what}: refused with {}, the profile's is 400",
                reply.status
            )
        });
    }
    Ok(())
}

async fn wait(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    // A settled session, so that only `wait` can refuse a poll of it.
    let (session, events, cursor) = settled_session(target, token, "conformance: limits").await?;
    // Part 8 bounds `wait` and does not say how a larger one is met: refused, or held no
    // longer than the bound (and 5 s for the network).
    let is_refusal =
        |reply: &Reply| (400..500).contains(&reply.status) && reply.body.get("error").is_some();
    // Just past the bound, where an off-by-one shows, and far past it, where a poll held for
    // its whole length shows: both polled at once from the end of the log.
    let (near, far) = futures_util::future::join(
        held_poll(target, token, (&session, &cursor, &events), 30_001),
        held_poll(target, token, (&session, &cursor, &events), 120_000),
    )
    .await;
    for (wait, held) in [(30_001, near?), (120_000, far?)] {
        let bounded = |reply: &Reply, took: Duration| {
            (200..300).contains(&reply.status) && took < HELD_AT_MOST
        };
        ensure(
            held.as_ref()
                .is_some_and(|(reply, took)| is_refusal(reply) || bounded(reply, *took)),
            || match &held {
                Some((reply, took)) => format!(
                    "a poll with wait={wait}: {} after {} ms, neither refused in the error \
                     envelope nor held at most 30000 ms: {}",
                    reply.status,
                    took.as_millis(),
                    excerpt(&reply.text)
                ),
                None => format!(
                    "a poll with wait={wait} was still held after {} s, past the 30000 ms part 8 \
                     allows",
                    HELD_AT_MOST.as_secs()
                ),
            },
        )?;
        if let Some((reply, _)) = &held {
            profile(reply.status == 400, || {
                format!(
                    "a poll with wait={wait}: {}, where the profile refuses it with 400",
                    reply.status
                )
            });
        }
    }
    Ok(())
}

/// How long a poll may be held: the 30000 ms of part 8, and 5 s for the network.
const HELD_AT_MOST: Duration = Duration::from_secs(35);

/// A poll of `session` with `wait`: its answer and how long it was held, or `None` when it was
/// held past [`HELD_AT_MOST`]. Not refused outright, it is polled again from the cursor after
/// the log (proven taken), where nothing comes.
async fn held_poll(
    target: &Target,
    token: &str,
    (session, cursor, events): (&str, &str, &[Value]),
    wait: u32,
) -> Result<Option<(Reply, Duration)>, Finding> {
    let query = format!("wait={wait}");
    let reply = poll(target, token, session, None, &query).await?;
    if (400..500).contains(&reply.status) {
        return Ok(Some((reply, Duration::ZERO)));
    }
    let cursor = cursor_taken(target, token, session, cursor, events).await?;
    let started = Instant::now();
    let held = poll(target, token, session, Some(&cursor), &query);
    match tokio::time::timeout(HELD_AT_MOST, held).await {
        Ok(reply) => Ok(Some((reply?, started.elapsed()))),
        Err(_) => Ok(None),
    }
}

async fn session_id(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let long = "s".repeat(161);
    refused(
        target,
        token,
        &[
            (Method::GET, format!("/v1/agent/sessions/{long}")),
            (Method::GET, format!("/v1/agent/chat/{long}")),
        ],
    )
    .await
}

async fn names(target: &Target) -> Verdict {
    let token = &target.role(Role::Pipeline).await?;
    let long = "n".repeat(161);
    refused(
        target,
        token,
        &[
            (
                Method::GET,
                format!("/v1/pipeline/apps/{long}/operations/transfer"),
            ),
            (
                Method::GET,
                format!("/v1/pipeline/apps/conformance/operations/{long}"),
            ),
            (
                Method::POST,
                format!("/v1/pipeline/skills/{long}/operations/validate"),
            ),
            (
                Method::POST,
                format!("/v1/pipeline/skills/conformance/operations/{long}"),
            ),
        ],
    )
    .await
}

async fn application_id(target: &Target) -> Verdict {
    let token = &target.role(Role::Account).await?;
    refused(
        target,
        token,
        &[
            (Method::POST, "/v1/account/apps/0".to_owned()),
            (Method::POST, "/v1/account/apps/first".to_owned()),
        ],
    )
    .await
}

async fn credential_name(target: &Target) -> Verdict {
    let token = &target.role(Role::Account).await?;
    let long = "N".repeat(129);
    refused(
        target,
        token,
        &[
            (Method::DELETE, format!("/v1/account/apps/1/secrets/{long}")),
            // The pattern broken at its first character, and at a later one.
            (
                Method::DELETE,
                "/v1/account/apps/1/secrets/1ST_KEY".to_owned(),
            ),
            (
                Method::DELETE,
                "/v1/account/apps/1/secrets/API-KEY".to_owned(),
            ),
        ],
    )
    .await
}

/// Every `step` member in `value`, at any depth.
fn steps(value: &Value, found: &mut Vec<i64>) {
    match value {
        Value::Object(members) => {
            for (name, member) in members {
                match (name.as_str(), member.as_i64()) {
                    ("step", Some(step)) => found.push(step),
                    _ => steps(member, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| steps(item, found)),
        _ => {}
    }
}

async fn step(target: &Target) -> Verdict {
    let mut found = Vec::new();
    let mut low = Vec::new();
    let seen = target.seen();
    for seen in &seen {
        let mut here = Vec::new();
        if let Some(simulation) = build_simulation(seen) {
            steps(simulation, &mut here);
        }
        if here.iter().any(|step| *step < 1) {
            low.push(&seen.exchange);
        }
        found.extend(here);
    }
    if found.is_empty() {
        return skip("no simulation with steps was seen in this run (run the pipeline checks too)");
    }
    crate::finding::cite(low);
    let low: Vec<i64> = found.into_iter().filter(|step| *step < 1).collect();
    ensure(low.is_empty(), || format!("steps below 1: {low:?}"))
}

async fn rate_limit(target: &Target) -> Verdict {
    let Some(probe) = target.settings.rate_limit_probe else {
        return skip(
            "needs --rate-limit-probe N: how many requests in a burst pass the deployment's limit",
        );
    };
    let token = &target.role(Role::Account).await?;
    for _ in 0..probe {
        let reply = target
            .request(Method::GET, "/v1/account/apps")
            .bearer(token)
            .impatient()
            .send()
            .await?;
        if reply.status != 429 {
            reply.ensure_status(200, "a request within the rate limit")?;
            continue;
        }
        reply.ensure_envelope(429, "a request over the rate limit")?;
        let header = reply
            .headers
            .get("retry-after")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        let Ok(seconds) = header.parse::<u64>() else {
            return fail(format!(
                "429 with Retry-After {header:?}, not whole seconds"
            ));
        };
        ensure(seconds <= 60, || {
            format!("Retry-After {seconds} s is over a minute")
        })?;
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        let after = target
            .request(Method::GET, "/v1/account/apps")
            .bearer(token)
            .send()
            .await?;
        after.ensure_status(
            200,
            &format!("a request {seconds} s after a 429 with that Retry-After"),
        )?;
        return Ok(());
    }
    fail(format!("{probe} requests in a burst got no 429"))
}
