//! Durable actions and their resolution (parts 1, 4.2 and 6).

use serde_json::{Value, json};

use super::{fresh_key, read_log, run, settle, start_turn_saying};
use crate::checks::{Category, Check};
use crate::finding::{Finding, Verdict, ensure, skip, through_means};
use crate::means::{Decision, inconclusive};
use crate::target::{Reply, Role, Target};

const ON: &[&str] = &[
    "POST /v1/agent/sessions/{sessionId}/actions/{actionId}/resolve",
    "#/components/schemas/ActionResult",
];

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "agent.actions.resolution".into(),
            category: Category::AgentActions,
            requirement: "Through a proven resolution means, a resolution MUST be refused, and leave the action unresolved, without a token holding `agent:actions:resolve` or without an idempotency key, and when its result names another Build than the reviewed one; caller-authored transaction fields MUST NOT change the action's payload; and the reviewed result MUST be accepted (the refusals' statuses are profile assertions).",
            section: "4.2, 5.6",
            rests_on: vec!["#/components/schemas/ActionResolutionRequest"],
            operation: None,
            run: run!(resolution),
        },
        Check {
            id: "agent.actions.revision-conflict".into(),
            category: Category::AgentActions,
            requirement: "A resolution naming another revision than the action's current one MUST be refused with 409 and leave the action pending.",
            section: "4.2",
            rests_on: ON.to_vec(),
            operation: None,
            run: run!(revision_conflict),
        },
        Check {
            id: "agent.actions.idempotency".into(),
            category: Category::AgentActions,
            requirement: "A resolution MUST need an Idempotency-Key; a duplicate sent while the first is in flight MUST get the first answer or 409 `idempotency_in_flight`; a later retry MUST get the first answer again; the same key with another body MUST be refused with 422; and a new key after resolution MUST be refused with 409.",
            section: "4.2",
            rests_on: vec![
                "POST /v1/agent/sessions/{sessionId}/actions/{actionId}/resolve",
                "#/components/parameters/IdempotencyKey",
            ],
            operation: None,
            run: run!(idempotency),
        },
        Check {
            id: "agent.actions.reviewed-result".into(),
            category: Category::AgentActions,
            requirement: "A result MUST be the one produced by the reviewed request: one naming another Build's digest, or carrying transaction fields, MUST be refused with 400, and the accepted one MUST enter the log as the action's result.",
            section: "4.2",
            rests_on: ON.to_vec(),
            operation: None,
            run: run!(reviewed_result),
        },
    ]
}

/// A pending action: its session, id, revision and Build digest.
pub(super) struct Pending {
    pub(super) session: String,
    turn: String,
    pub(super) action: String,
    pub(super) revision: i64,
    digest: String,
}

/// Starts a turn that raises an action, waits until it awaits it, and proves the resolution's
/// path on it (`profile.action` and `profile.resolution`).
pub(super) async fn pending_action(target: &Target, token: &str) -> Result<Pending, Finding> {
    let prompt = super::subjects::action_chat(target);
    let (session, turn) = start_turn_saying(target, token, None, prompt).await?;
    let (events, _) = settle(target, token, &session, &turn).await?;
    let means = &target.settings.means.action;
    // The latest entry: an action raised again carries its current revision.
    let Some(event) = events
        .iter()
        .rev()
        .find(|event| means.raised_in(event, &turn))
    else {
        if super::turn_state(target, &events, &turn) == Some("awaiting_action") {
            return Err(inconclusive(
                "action",
                format!(
                    "the turn awaits an action, but no entry of the log has `{}` at {} and the \
                     turn at {}",
                    means.value, means.kind, means.turn_id
                ),
            ));
        }
        return skip(format!(
            "the runtime raised no action for {prompt:?}; set inputs.actionChat (--action-prompt)"
        ));
    };
    let raised = means.read(event).map_err(|missing| {
        through_means("action", false);
        inconclusive(
            "action",
            format!("the action's entry names nothing at {missing}"),
        )
    })?;
    through_means("action", true);
    let pending = Pending {
        session,
        turn,
        action: raised.action,
        revision: raised.revision,
        digest: raised.digest,
    };
    pending.prove(target, token).await?;
    Ok(pending)
}

impl Pending {
    /// A resolution body at `revision` with `outcome`, naming the reviewed Build.
    pub(super) fn body(&self, target: &Target, revision: i64, outcome: Decision) -> Value {
        let means = &target.settings.means.resolution;
        means.body(revision, outcome, &self.digest)
    }

    /// Proves that the resolution's path reaches this action: a body that is no resolution
    /// (an array) is refused, and not as a route or action that is not there (404, 405). A
    /// refusal of the token (401, 403) reached the route too: the checks judge it.
    async fn prove(&self, target: &Target, token: &str) -> Verdict {
        let reply = self
            .resolve(target, token, Some(&fresh_key("prove")), &json!([]))
            .await?;
        let reached = (400..500).contains(&reply.status) && !matches!(reply.status, 404 | 405);
        through_means("resolution", reached);
        if reached {
            return Ok(());
        }
        Err(inconclusive(
            "resolution",
            format!(
                "{} {} with a body that is no resolution answered {} {}, not a refusal of the \
                 body: the path does not reach action {}",
                target.settings.means.resolution.method,
                target
                    .settings
                    .means
                    .resolution
                    .path(&self.session, &self.action),
                reply.status,
                crate::finding::excerpt(&reply.text),
                self.action
            ),
        ))
    }

    pub(super) async fn resolve(
        &self,
        target: &Target,
        token: &str,
        key: Option<&str>,
        body: &Value,
    ) -> Result<Reply, Finding> {
        let means = &target.settings.means.resolution;
        let path = means.path(&self.session, &self.action);
        let mut call = target
            .request(means.http_method(), &path)
            .bearer(token)
            .json(body);
        if let Some(key) = key {
            call = call.header(&means.idempotency_header, key);
        }
        call.send().await
    }
}

/// Waits until the turn of `pending`, resolved, no longer awaits the action (within the turn
/// timeout).
async fn went_on(target: &Target, token: &str, pending: &Pending) -> Verdict {
    let deadline = std::time::Instant::now() + target.settings.turn_timeout;
    loop {
        let (events, _) = super::settle(target, token, &pending.session, &pending.turn).await?;
        let state = super::turn_state(target, &events, &pending.turn);
        if state != Some("awaiting_action") || std::time::Instant::now() > deadline {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Fails unless `reply`, to a resolution sent `how`, is a refusal (a 4xx, never 404 or 405,
/// which do not reach the action); `status` is the profile's.
fn refused(reply: &Reply, how: &str, status: u16) -> Verdict {
    ensure((400..500).contains(&reply.status), || {
        format!(
            "a resolution {how} was answered {} {}, not refused",
            reply.status,
            crate::finding::excerpt(&reply.text)
        )
    })?;
    crate::finding::profile(reply.status == status, || {
        format!(
            "the profile refuses a resolution {how} with {status}; got {}",
            reply.status
        )
    });
    Ok(())
}

/// The facts of parts 4.2 and 5.6 on a resolution, asserted at their own level once the means
/// that reaches the action is proved ([`pending_action`]).
async fn resolution(target: &Target) -> Verdict {
    use crate::finding::asserted_fact;
    let token = &target.role(Role::Agent).await?;
    let pending = pending_action(target, token).await?;
    [
        "1.action-durable-event",
        "6.actions-durable",
        "1.action-needs-response",
    ]
    .into_iter()
    .for_each(asserted_fact);
    let means = &target.settings.means.resolution;
    let reviewed = pending.body(target, pending.revision, Decision::Reject);
    let request = crate::target::TokenRequest::new(
        crate::target::Account::Primary,
        "agent",
        &["agent:read", "agent:write"],
    );
    let unscoped = target.token(&request).await?;
    asserted_fact("4.2.resolution-scope");
    asserted_fact("5.6.resolve-scope");
    let reply = pending
        .resolve(target, &unscoped, Some(&fresh_key("unscoped")), &reviewed)
        .await?;
    refused(&reply, "with a token without agent:actions:resolve", 403)?;
    asserted_fact("4.2.resolution-idempotency-key");
    let reply = pending.resolve(target, token, None, &reviewed).await?;
    refused(
        &reply,
        &format!("without {}", means.idempotency_header),
        400,
    )?;
    let other_digest = format!("sha256:{}", "0".repeat(64));
    let wrong = means.body(pending.revision, Decision::Reject, &other_digest);
    if wrong != reviewed {
        asserted_fact("4.2.reviewed-result");
        let reply = pending
            .resolve(target, token, Some(&fresh_key("other-build")), &wrong)
            .await?;
        refused(&reply, "whose result names another Build", 400)?;
    } else {
        crate::finding::warn(
            "the result template names no `{digest}`, so no result named another Build".into(),
        );
    }
    // Caller-authored transaction fields, at the result's top level and under `transaction`,
    // approving: refused, or accepted without reaching the payload or what the turn does.
    let caller = "0x00000000000000000000000000000000000c0de5";
    let mut authored = pending.body(target, pending.revision, Decision::Approve);
    let accepted = match authored["result"].as_object_mut() {
        Some(result) => {
            let fields = json!({ "to": caller, "from": caller, "amount": "1", "value": "1",
                                 "data": "0xdeadbeef" });
            for (name, value) in fields.as_object().into_iter().flatten() {
                result.entry(name.clone()).or_insert_with(|| value.clone());
            }
            result.insert("transaction".into(), fields);
            let reply = pending
                .resolve(target, token, Some(&fresh_key("authored")), &authored)
                .await?;
            (200..300).contains(&reply.status)
        }
        None => false,
    };
    if accepted {
        // The turn goes on from the action: what it then does is in the log.
        went_on(target, token, &pending).await?;
    } else {
        asserted_fact("4.2.resolution-body");
        let reply = pending
            .resolve(target, token, Some(&fresh_key("reviewed")), &reviewed)
            .await?;
        ensure((200..300).contains(&reply.status), || {
            format!(
                "the reviewed result, at the action's revision {}, was answered {} {}",
                pending.revision,
                reply.status,
                crate::finding::excerpt(&reply.text)
            )
        })?;
    }
    // The payload: the action's entries still carry the reviewed Build, and no entry but a
    // result's carries the caller's transaction.
    asserted_fact("4.2.no-caller-transaction");
    let (events, _) = read_log(target, token, &pending.session).await?;
    let action = &target.settings.means.action;
    for event in &events {
        if means.result_entry.outcome(event, &pending.action).is_some() {
            continue;
        }
        if let Ok(raised) = action.read(event)
            && raised.action == pending.action
        {
            ensure(raised.digest == pending.digest, || {
                format!(
                    "after the resolutions, action {} carries the Build {}, not the reviewed {}",
                    pending.action, raised.digest, pending.digest
                )
            })?;
        }
        ensure(!event.to_string().contains(caller), || {
            format!(
                "a result's caller-authored transaction fields reached the log beyond the result: {}",
                crate::finding::excerpt(&event.to_string())
            )
        })?;
    }
    // No refused resolution had an effect: the log records one result at most.
    let results = events
        .iter()
        .filter(|event| means.result_entry.outcome(event, &pending.action).is_some())
        .count();
    ensure(results <= 1, || {
        format!(
            "the log records {results} results for action {}, where one resolution was accepted",
            pending.action
        )
    })
}

async fn revision_conflict(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let pending = pending_action(target, token).await?;
    let stale = pending.body(target, pending.revision + 1, Decision::Reject);
    pending
        .resolve(target, token, Some(&fresh_key("stale")), &stale)
        .await?
        .ensure_status(409, "a resolution naming a revision the action is not at")?;
    let current = pending.body(target, pending.revision, Decision::Reject);
    pending
        .resolve(target, token, Some(&fresh_key("current")), &current)
        .await?
        .ensure_status(
            200,
            "the resolution at the current revision, after the conflict",
        )?;
    Ok(())
}

async fn idempotency(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let pending = pending_action(target, token).await?;
    let body = pending.body(target, pending.revision, Decision::Reject);
    pending
        .resolve(target, token, None, &body)
        .await?
        .ensure_status(400, "a resolution without Idempotency-Key")?;
    let key = fresh_key("retry");
    let (first, twin) = futures_util::future::join(
        pending.resolve(target, token, Some(&key), &body),
        pending.resolve(target, token, Some(&key), &body),
    )
    .await;
    let (first, twin) = (first?, twin?);
    let (first, twin) = if first.status == 200 {
        (first, twin)
    } else {
        (twin, first)
    };
    first.ensure_status(200, "one of two concurrent resolutions with the same key")?;
    let replayed = twin.status == first.status && twin.body == first.body;
    let in_flight = twin.status == 409 && twin.names_error("idempotency_in_flight");
    ensure(replayed || in_flight, || {
        format!(
            "a duplicate sent while the first was in flight got {} {} after {} {}",
            twin.status, twin.text, first.status, first.text
        )
    })?;
    let retry = pending.resolve(target, token, Some(&key), &body).await?;
    ensure(
        retry.status == first.status && retry.body == first.body,
        || {
            format!(
                "a retry with the same key got {} {} after {} {}",
                retry.status, retry.text, first.status, first.text
            )
        },
    )?;
    let other = pending.body(target, pending.revision, Decision::Approve);
    pending
        .resolve(target, token, Some(&key), &other)
        .await?
        .ensure_status(422, "the same key with another body")?;
    pending
        .resolve(target, token, Some(&fresh_key("late")), &body)
        .await?
        .ensure_status(409, "a new key for an action already resolved")?;
    Ok(())
}

async fn reviewed_result(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let pending = pending_action(target, token).await?;
    let means = &target.settings.means.resolution;
    let other_digest = format!("sha256:{}", "0".repeat(64));
    let wrong = means.body(pending.revision, Decision::Approve, &other_digest);
    if wrong == pending.body(target, pending.revision, Decision::Approve) {
        return Err(inconclusive(
            "resolution",
            "the result template names no `{digest}`, so no result can name another Build",
        ));
    }
    pending
        .resolve(target, token, Some(&fresh_key("digest")), &wrong)
        .await?
        .ensure_status(400, "a result naming another Build's digest")?;
    let mut authored = pending.body(target, pending.revision, Decision::Approve);
    if let Some(result) = authored["result"].as_object_mut() {
        let transaction =
            json!({ "to": "0x0000000000000000000000000000000000000000", "value": "1" });
        result.insert("transaction".into(), transaction);
        pending
            .resolve(target, token, Some(&fresh_key("authored")), &authored)
            .await?
            .ensure_status(400, "a result carrying transaction fields")?;
    }
    let reviewed = pending.body(target, pending.revision, Decision::Reject);
    pending
        .resolve(target, token, Some(&fresh_key("reviewed")), &reviewed)
        .await?
        .ensure_status(200, "the reviewed result, after the refusals")?;
    // The durable effect: the log records the result, and only the accepted one.
    let (events, _) = read_log(target, token, &pending.session).await?;
    let results: Vec<&Value> = events
        .iter()
        .filter_map(|event| means.result_entry.outcome(event, &pending.action))
        .collect();
    let rejected = json!(means.reject);
    ensure(results == [&rejected], || {
        format!(
            "the log records the outcomes {results:?} for action {}; expected the one accepted, \
             {rejected}",
            pending.action
        )
    })
}
