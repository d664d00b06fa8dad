//! Part 5 over every operation of openapi.json: the authorization matrix (no token, a malformed
//! one, one of another resource, one without the operation's scope), and the isolation of one
//! account's sessions and apps from another's (part 1).

use intent_models::Scope;
use reqwest::Method;
use serde_json::{Value, json};

use super::agent_actions::pending_action;
use super::{read, read_log, run_on_operation, settle, start_turn, start_turn_saying};
use crate::checks::{Category, Check};
use crate::finding::{Finding, Verdict, ensure, fail, profile, skip};
use crate::spec::{Operation, spec};
use crate::target::{
    ACCOUNT_SCOPES, AGENT_SCOPES, Account, PIPELINE_SCOPES, Reply, Role, Target, TokenRequest,
};

pub(super) fn checks() -> Vec<Check> {
    let operations = spec().operations();
    let matrix = operations.iter().map(|operation| Check {
        id: format!("auth.matrix.{}", operation.id).into(),
        category: Category::Auth,
        requirement: "The operation MUST refuse a request without a token, with a malformed one or with one bound to another resource with an error envelope: with 401 (or, for another resource's token, 401 or 403) where the document declares them, on the lifecycle endpoints; and, where part 5 names its scope, one that lacks it with 403. The profile's 401 and 403 elsewhere are profile assertions.",
        section: "5",
        rests_on: vec![&operation.reference, "#/components/securitySchemes/oauth2"],
        operation: Some(operation),
        run: run_on_operation!(matrix),
    });
    let isolated = operations.iter().filter(|operation| {
        operation.template.contains("{sessionId}")
            || operation.template == "/v1/agent/chat"
            || ["listAccountApps", "listCredentials"].contains(&operation.id.as_str())
    });
    let isolation = isolated.map(|operation| Check {
        id: format!("auth.isolation.{}", operation.id).into(),
        category: Category::Auth,
        requirement: if operation.template.starts_with("/v1/account/") {
            "Another account MUST see none of the account's apps and credentials."
        } else {
            "Another account's request MUST carry none of the session's data and MUST change nothing (that it gets the answer a missing session gets is a profile assertion)."
        },
        section: "1",
        rests_on: vec![&operation.reference],
        operation: Some(operation),
        run: run_on_operation!(isolation),
    });
    matrix.chain(isolation).collect()
}

/// The resource (`x-resource`) and scope of `operation`.
fn resource_and_scope(operation: &Operation) -> (&'static str, &'static str) {
    let object = spec()
        .operation_object(&operation.method, &operation.template)
        .expect("operations come from the document");
    (
        object["x-resource"].as_str().unwrap_or_default(),
        object
            .pointer("/security/0/oauth2/0")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    )
}

/// Every scope of `resource` that its operations use.
fn scopes_of(resource: &str) -> &'static [&'static str] {
    match resource {
        "agent" => &AGENT_SCOPES,
        "pipeline" => &PIPELINE_SCOPES,
        _ => &ACCOUNT_SCOPES,
    }
}

/// A full token of a resource other than `resource`.
fn other_role(resource: &str) -> Role {
    match resource {
        "agent" => Role::Pipeline,
        "pipeline" => Role::Account,
        _ => Role::Agent,
    }
}

/// Whether the interface itself names the scope of `operation` (part 5 names two): the
/// operation's `security` is not a fill of our profile.
fn scope_is_normative(operation: &Operation) -> bool {
    let object = spec()
        .operation_object(&operation.method, &operation.template)
        .expect("operations come from the document");
    let filled = object["x-profile-fills"]
        .as_array()
        .is_some_and(|fills| fills.iter().any(|fill| fill == "security"));
    object.get("x-profile").is_none() && !filled
}

/// A concrete path for `operation` ([`super::subjects::path_of`]); an action's resolution where
/// the deployment takes it (`profile.resolution`).
async fn path_of(target: &Target, operation: &Operation, session: &str, action: &str) -> String {
    if operation.id == "resolveAction" {
        crate::finding::through_means("resolution", false);
        return target.settings.means.resolution.path(session, action);
    }
    super::subjects::path_of(target, operation, session, action).await
}

/// Sends `operation` to `path` with `authorization` (a whole header value) or none, `body` where
/// the method takes one, and an Idempotency-Key. A stream is read only when it does not open.
async fn send(
    target: &Target,
    operation: &Operation,
    path: &str,
    authorization: Option<&str>,
    body: &Value,
) -> Result<Reply, Finding> {
    let resolution = &target.settings.means.resolution;
    let (method, idempotency) = if operation.id == "resolveAction" {
        (
            resolution.http_method(),
            resolution.idempotency_header.as_str(),
        )
    } else {
        let method = operation.method.parse().expect("the document's methods");
        (method, "idempotency-key")
    };
    let mut call = target
        .request(method.clone(), path)
        .header(idempotency, &super::fresh_key("auth"));
    if let Some(value) = authorization {
        call = call.header("authorization", value);
    }
    if [Method::POST, Method::PUT, Method::PATCH].contains(&method) {
        call = call.json(body);
    }
    if !operation.template.ends_with("/stream") {
        return call.send().await;
    }
    // A stream that opens is read no further: only its status and headers count.
    let response = call.open().await?;
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    let text = match status {
        200..=299 => String::new(),
        _ => response.text().await.unwrap_or_default(),
    };
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Ok(Reply {
        status,
        headers,
        body,
        text,
    })
}

async fn matrix(target: &Target, operation: &'static Operation) -> Verdict {
    let (resource, scope) = resource_and_scope(operation);
    // The subject is the run's own: a session it started, an action it raised.
    let (session, action) = match (resource, operation.id.as_str()) {
        ("agent", "resolveAction") => {
            let agent = target.role(Role::Agent).await?;
            let pending = pending_action(target, &agent).await?;
            (pending.session, pending.action)
        }
        ("agent", _) => {
            let agent = target.role(Role::Agent).await?;
            let started = start_turn(target, &agent, None, "conformance: the auth matrix").await?;
            (started.0, String::new())
        }
        _ => (String::new(), String::new()),
    };
    let path = path_of(target, operation, &session, &action).await;
    // A body every variation of the document accepts, so that only the token can refuse it.
    let body = plausible_body(target, operation).await;
    let empty = body.clone().unwrap_or_else(|| json!({}));
    let what = format!("{} {path}", operation.method);
    let mut skipped = Vec::new();
    // Part 5.5 and 7.2 declare 401 for the lifecycle endpoints; elsewhere an error falls to the
    // envelope, and our 401 is the profile's.
    let declared = spec().normative_declares(operation, 401);
    let unauthorized = |reply: &Reply, case: &str| -> Verdict {
        let case = format!("{what} {case}");
        if declared {
            reply.ensure_envelope(401, &case)?;
        } else {
            reply.ensure_refused(&case)?;
            profile(reply.status == 401, || {
                format!("{case}: {}, where the profile answers 401", reply.status)
            });
        }
        let challenge = reply
            .headers
            .get("www-authenticate")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        profile(challenge.contains("resource_metadata"), || {
            format!("{case}: the 401's WWW-Authenticate names no resource_metadata")
        });
        Ok(())
    };
    let anonymous = send(target, operation, &path, None, &empty).await?;
    // Another refusal than 401 tells of the token only where a valid token is not refused alike
    // (the example path or body may be what is refused); it is asked of a GET alone, which
    // changes nothing.
    let told = declared || anonymous.status == 401 || !(400..500).contains(&anonymous.status);
    let alike = !told && operation.method == "GET" && {
        let own = target.role(super::role_of(operation)).await?;
        let bearer = format!("Bearer {own}");
        let served = send(target, operation, &path, Some(&bearer), &empty).await?;
        served.status == anonymous.status
    };
    // A route or thing that is not there answers 404 or 405 whatever the token: that is no
    // refusal of it.
    if matches!(anonymous.status, 404 | 405) && !declared {
        skipped.push(format!(
            "inconclusive token cases: {what} answered {} without a token, so the request \
             never reached what the token guards",
            anonymous.status
        ));
    } else if alike {
        skipped.push(format!(
            "inconclusive token cases: a valid token is answered {} too",
            anonymous.status
        ));
    } else {
        unauthorized(&anonymous, "without a token")?;
        for malformed in [
            "Bearer conformance.not-a.token",
            "Basic Y29uZm9ybWFuY2U6Y29uZm9ybWFuY2U=",
        ] {
            let reply = send(target, operation, &path, Some(malformed), &empty).await?;
            unauthorized(&reply, &format!("with `{malformed}`"))?;
        }
        another_resource(target, operation, (&path, &empty), declared, &mut skipped).await?;
    }
    let rest: Vec<&str> = scopes_of(resource)
        .iter()
        .copied()
        .filter(|held| *held != scope)
        .collect();
    let mut without = target
        .token(&TokenRequest::new(Account::Primary, resource, &rest))
        .await;
    // Given tokens only: the narrow token (agent:read alone) lacks every other agent scope.
    if matches!(without, Err(Finding::Skip(_)))
        && resource == "agent"
        && scope != Scope::AgentRead.as_str()
    {
        without = target.role(Role::Narrow).await;
    }
    match without {
        Ok(token) => {
            let reply = send(
                target,
                operation,
                &path,
                Some(&format!("Bearer {token}")),
                &empty,
            )
            .await?;
            let case = format!("{what} with every {resource} scope but {scope}");
            if scope_is_normative(operation) && body.is_none() {
                skipped.push(format!(
                    "a missing scope: no request body this deployment takes (set inputs.{})",
                    operation.id
                ));
            } else if scope_is_normative(operation) {
                reply.ensure_envelope(403, &case)?;
            } else {
                profile(
                    reply.status == 403 && reply.body.get("error").is_some(),
                    || {
                        format!(
                            "{case}: expected 403 with an error envelope, got {}",
                            reply.status
                        )
                    },
                );
            }
            let code = target.settings.means.error_code(&reply.body);
            profile(code == Some("insufficient_scope"), || {
                format!("{case}: the error code is {code:?}, not insufficient_scope")
            });
        }
        Err(Finding::Skip(reason)) => skipped.push(format!("a missing scope: {reason}")),
        Err(other) => return Err(other),
    }
    if skipped.is_empty() {
        Ok(())
    } else if skipped
        .iter()
        .any(|reason| reason.starts_with("inconclusive"))
    {
        skip(format!(
            "inconclusive: the other cases passed; not told: {}",
            skipped.join("; ")
        ))
    } else {
        skip(format!(
            "the other cases passed; not tried: {}",
            skipped.join("; ")
        ))
    }
}

/// The case of a token bound to another resource (part 5.2 binds a token to its resource). On
/// an endpoint that declares 401 and 403 (the lifecycle ones) it is either; elsewhere any
/// refusal in the envelope, the profile's 401 a profile assertion.
async fn another_resource(
    target: &Target,
    operation: &'static Operation,
    (path, body): (&str, &Value),
    declared: bool,
    skipped: &mut Vec<String>,
) -> Verdict {
    let (resource, _) = resource_and_scope(operation);
    let other = other_role(resource);
    // Bound to another resource and holding every scope of this one's, so that only the binding
    // can refuse it; the other role's own token where the token source mints none.
    let bound_elsewhere = TokenRequest::new(
        Account::Primary,
        &other.request().resource,
        scopes_of(resource),
    );
    let token = match target.token(&bound_elsewhere).await {
        Ok(token) => Ok(token),
        Err(Finding::Skip(_)) => target.role(other).await,
        Err(other) => Err(other),
    };
    let token = match token {
        Ok(token) => token,
        Err(Finding::Skip(reason)) => {
            skipped.push(format!("another resource: {reason}"));
            return Ok(());
        }
        Err(other) => return Err(other),
    };
    let bearer = format!("Bearer {token}");
    let reply = send(target, operation, path, Some(&bearer), body).await?;
    let case = format!(
        "{} {path} with a token of {}",
        operation.method,
        other.request().resource
    );
    if declared {
        ensure(
            matches!(reply.status, 401 | 403) && reply.body.get("error").is_some(),
            || {
                format!(
                    "{case}: {} {}, not 401 or 403 in the error envelope",
                    reply.status,
                    crate::finding::excerpt(&reply.text)
                )
            },
        )?;
    } else {
        reply.ensure_refused(&case)?;
    }
    profile(reply.status == 401, || {
        format!("{case}: {}, where the profile answers 401", reply.status)
    });
    Ok(())
}

/// What the owner reads of a session: its title, archived flag and log length.
async fn session_state(target: &Target, owner: &str, session: &str) -> Result<Value, Finding> {
    let read_back = read(target, owner, &format!("/v1/agent/sessions/{session}")).await?;
    let (events, _) = read_log(target, owner, session).await?;
    Ok(json!([
        read_back["title"],
        read_back["archived"],
        events.len()
    ]))
}

/// A body of `operation` that every deployment accepts where the document shows it: both
/// members of a session update, the chat means, the configured build request; `{}` elsewhere.
/// `None` for a lifecycle endpoint with no build request this deployment takes: with `{}`, a
/// deployment that checks the body before the scope would answer 400, not 403.
async fn plausible_body(target: &Target, operation: &Operation) -> Option<Value> {
    match operation.id.as_str() {
        "updateSession" => {
            Some(json!({ "title": "conformance: the auth matrix", "archived": false }))
        }
        "startChat" => Some(
            target
                .settings
                .means
                .chat
                .request("conformance: the auth matrix", None),
        ),
        "evmBuild" | "svmStage" => super::subjects::build_request(target, &operation.template)
            .await
            .ok(),
        _ => Some(json!({})),
    }
}

/// A wallet address both accounts name in their messages.
const WALLET: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";

/// `id` with its last character changed: an id of the same shape that names nothing.
fn missing(id: &str) -> String {
    let mut changed = id.to_owned();
    let last = changed.pop().unwrap_or('x');
    changed.push(if last == 'z' { 'y' } else { 'z' });
    changed
}

async fn isolation(target: &Target, operation: &'static Operation) -> Verdict {
    let (resource, scope) = resource_and_scope(operation);
    if resource == "account" {
        return account_isolation(target, operation).await;
    }
    let owner = target.role(Role::Agent).await?;
    // The other account's token holds what the operation needs: the whole resource's scopes
    // for a resolution, reading and writing otherwise.
    let scopes: &[&str] = if scope == Scope::AgentActionsResolve.as_str() {
        &AGENT_SCOPES
    } else {
        &AGENT_SCOPES[..2]
    };
    let other = target
        .token(&TokenRequest::new(Account::Secondary, "agent", scopes))
        .await?;
    // What only this session holds, first, so that a title cut short keeps it; the message names
    // a wallet, which the second account names too: a wallet owns nothing (part 1).
    let marker = format!("iso-{}", super::nanos());
    // The body the owner could send, so that only ownership can refuse the request.
    let (session, action, body) = if operation.template.contains("{actionId}") {
        let pending = pending_action(target, &owner).await?;
        let body = pending.body(target, pending.revision, crate::means::Decision::Reject);
        (pending.session, pending.action, body)
    } else {
        let message = format!("{marker} conformance: isolation from {WALLET}");
        let (session, turn) = start_turn_saying(target, &owner, None, &message).await?;
        settle(target, &owner, &session, &turn).await?;
        let body = match operation.method.as_str() {
            "PATCH" => json!({ "title": "conformance: renamed by another", "archived": true }),
            _ => json!({}),
        };
        (session, "act_conformance".to_owned(), body)
    };
    let before = session_state(target, &owner, &session).await?;
    let bearer = format!("Bearer {other}");
    let (theirs, absent) = if operation.template == "/v1/agent/chat" {
        let into = |session: &str| {
            target
                .request(Method::POST, "/v1/agent/chat")
                .bearer(&other)
                .json(&target.settings.means.chat.request(
                    &format!("conformance: not mine, from {WALLET}"),
                    Some(session),
                ))
                .send()
        };
        (into(&session).await?, into(&missing(&session)).await?)
    } else {
        let mine = path_of(target, operation, &session, &action).await;
        let nobody = path_of(target, operation, &missing(&session), &action).await;
        (
            send(target, operation, &mine, Some(&bearer), &body).await?,
            send(target, operation, &nobody, Some(&bearer), &body).await?,
        )
    };
    compare(
        target,
        &owner,
        (&session, &marker),
        &before,
        (&theirs, absent.status),
        &operation.template,
    )
    .await
}

/// Fails unless another account's answer carries none of the session's data (`marker`, the
/// owner's message) and the owner reads the session back unchanged, whatever the status. That
/// the answer is a refusal, and the one a missing session gets, is our profile.
async fn compare(
    target: &Target,
    owner: &str,
    (session, marker): (&str, &str),
    before: &Value,
    (theirs, absent): (&Reply, u16),
    template: &str,
) -> Verdict {
    // A stream is not read once it opens: that it opened is what it yields.
    let opened = template.ends_with("/stream") && (200..300).contains(&theirs.status);
    ensure(!theirs.text.contains(marker) && !opened, || {
        format!(
            "{template}: another account's request was answered with the session's data: {}",
            crate::finding::excerpt(&theirs.text)
        )
    })?;
    let status = theirs.status;
    profile(!(200..300).contains(&status) && status == absent, || {
        format!(
            "{template}: another account's session answered {status}, a missing one {absent}; \
             the profile answers both alike, with a refusal"
        )
    });
    let after = session_state(target, owner, session).await?;
    ensure(&after == before, || {
        format!("{template}: another account's request changed the session: {before} -> {after}")
    })
}

/// The second account's view of apps or credentials must not change when the first installs an
/// app or saves a credential.
async fn account_isolation(target: &Target, operation: &'static Operation) -> Verdict {
    let owner = target.role(Role::Account).await?;
    let other = target
        .token(&TokenRequest::new(
            Account::Secondary,
            "account",
            &ACCOUNT_SCOPES,
        ))
        .await?;
    let path = path_of(target, operation, "", "").await;
    let install = super::subjects::install(target).await?;
    let application = format!("/v1/account/apps/{}", install.application_id);
    let credential = |name: &str| format!("{application}/secrets/{name}");
    // From nothing installed and nothing saved, so that what the owner does shows.
    let cleared = std::iter::once(application.clone())
        .chain(install.credentials.keys().map(|name| credential(name)));
    for cleared in cleared {
        target
            .request(Method::DELETE, &cleared)
            .bearer(&owner)
            .send()
            .await?;
    }
    let before = read(target, &other, &path).await?;
    for (name, value) in &install.credentials {
        let saved = target
            .request(Method::PUT, &credential(name))
            .bearer(&owner)
            .json(&json!({ "value": value }))
            .send()
            .await?;
        if !(200..300).contains(&saved.status) {
            return fail(format!(
                "PUT {} by the owner: {} {}",
                credential(name),
                saved.status,
                crate::finding::excerpt(&saved.text)
            ));
        }
    }
    let installed = target
        .request(Method::POST, &application)
        .bearer(&owner)
        .send()
        .await?;
    let after = read(target, &other, &path).await?;
    ensure(before == after, || {
        format!(
            "GET {path} by another account changed when the owner saved a credential and \
             installed (answered {}): {before} -> {after}",
            installed.status
        )
    })
}
