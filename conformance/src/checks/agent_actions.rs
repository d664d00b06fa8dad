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
