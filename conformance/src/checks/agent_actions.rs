//! Durable actions and their resolution (parts 1, 4.2 and 6).

use serde_json::{Value, json};

use super::{fresh_key, read_log, run, settle, start_turn_saying};
use crate::check::{Category, Check};
use crate::finding::{Finding, Verdict, ensure, skip};
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

/// Starts a turn that raises an action and waits until it awaits it.
pub(super) async fn pending_action(target: &Target, token: &str) -> Result<Pending, Finding> {
    let prompt = super::inputs::action_chat(target);
    let (session, turn) = start_turn_saying(target, token, None, prompt).await?;
    let (events, _) = settle(target, token, &session, &turn).await?;
    let Some(event) = events
        .iter()
        .find(|event| event["type"] == "action" && event["turnId"] == turn.as_str())
    else {
        return skip(format!(
            "the runtime raised no action for {prompt:?}; set inputs.actionChat (--action-prompt)"
        ));
    };
    // The action's entry is our profile's shape (part 2.13 does not show it): one without what
    // a resolution names is a means of ours the deployment does not share.
    let named = |pointer: &str| {
        event
            .pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let (Some(action), Some(digest)) = (named("/action/actionId"), named("/action/build/digest"))
    else {
        return skip(
            "inconclusive: the action's entry names no /action/actionId and /action/build/digest, \
             which the profile's resolution needs",
        );
    };
    Ok(Pending {
        action,
        revision: event["action"]["revision"].as_i64().unwrap_or(1),
        digest,
        session,
    })
}

impl Pending {
    /// A resolution body at `revision` with `outcome`.
    pub(super) fn body(&self, revision: i64, outcome: &str) -> Value {
        json!({ "revision": revision, "result": { "outcome": outcome, "digest": self.digest } })
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
        let reply = call.send().await?;
        crate::finding::through_means("resolution", (200..300).contains(&reply.status));
        Ok(reply)
    }
}

async fn revision_conflict(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let pending = pending_action(target, token).await?;
    let stale = pending.body(pending.revision + 1, "rejected");
    pending
        .resolve(target, token, Some(&fresh_key("stale")), &stale)
        .await?
        .ensure_status(409, "a resolution naming a revision the action is not at")?;
    let current = pending.body(pending.revision, "rejected");
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
    let body = pending.body(pending.revision, "rejected");
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
    let in_flight = twin.status == 409 && twin.error_code() == Some("idempotency_in_flight");
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
    let other = pending.body(pending.revision, "approved");
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
    let other_digest = format!("sha256:{}", "0".repeat(64));
    let wrong = json!({
        "revision": pending.revision,
        "result": { "outcome": "approved", "digest": other_digest },
    });
    pending
        .resolve(target, token, Some(&fresh_key("digest")), &wrong)
        .await?
        .ensure_status(400, "a result naming another Build's digest")?;
    let mut authored = pending.body(pending.revision, "approved");
    authored["result"]["transaction"] =
        json!({ "to": "0x0000000000000000000000000000000000000000", "value": "1" });
    pending
        .resolve(target, token, Some(&fresh_key("authored")), &authored)
        .await?
        .ensure_status(400, "a result carrying transaction fields")?;
    let reviewed = pending.body(pending.revision, "rejected");
    pending
        .resolve(target, token, Some(&fresh_key("reviewed")), &reviewed)
        .await?
        .ensure_status(200, "the reviewed result, after the refusals")?;
    // The durable effect: the log records the result, and only the accepted one.
    let (events, _) = read_log(target, token, &pending.session).await?;
    let results: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == "action_result" && event["actionId"] == pending.action)
        .map(|event| &event["result"]["outcome"])
        .collect();
    ensure(results == [&json!("rejected")], || {
        format!(
            "the log records the outcomes {results:?} for action {}; expected the one accepted, rejected",
            pending.action
        )
    })
}
