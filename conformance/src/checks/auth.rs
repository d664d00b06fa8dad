//! Part 5: bearer tokens bound to one resource and carrying scopes; session ownership (part 1).

use reqwest::Method;

use super::{run, start_turn, token};
use crate::check::{Category, Check};
use crate::finding::{Finding, Verdict, ensure};
use crate::spec::{Operation, spec};
use crate::target::Target;

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "auth.no-token",
            category: Category::Auth,
            requirement: "Every operation MUST answer a request without a bearer token with 401 and an error envelope.",
            section: "5.5",
            rests_on: &["#/components/securitySchemes/oauth2"],
            run: run!(no_token),
        },
        Check {
            id: "auth.bad-token",
            category: Category::Auth,
            requirement: "Every operation MUST answer a request whose bearer token is not a valid access token with 401 and an error envelope.",
            section: "5.5",
            rests_on: &["#/components/securitySchemes/oauth2"],
            run: run!(bad_token),
        },
        Check {
            id: "auth.other-resource",
            category: Category::Auth,
            requirement: "A token bound to one resource MUST be refused with 401 by the operations of every other resource.",
            section: "5.2",
            rests_on: &["#/components/securitySchemes/oauth2"],
            run: run!(other_resource),
        },
        Check {
            id: "auth.missing-scope",
            category: Category::Auth,
            requirement: "A valid token without the scope an operation needs MUST be refused with 403 and an error envelope.",
            section: "5.5",
            rests_on: &["POST /v1/agent/chat"],
            run: run!(missing_scope),
        },
        Check {
            id: "auth.session-ownership",
            category: Category::Auth,
            requirement: "A session MUST be visible only to the account that owns it: another account's requests for it get 404.",
            section: "1",
            rests_on: &[
                "GET /v1/agent/sessions/{sessionId}",
                "GET /v1/agent/chat/{sessionId}",
            ],
            run: run!(session_ownership),
        },
    ]
}

/// The operations of the interface itself (not those only our profile adds), with their
/// parameters filled in.
fn interface_operations() -> Vec<(&'static Operation, String)> {
    spec()
        .operations()
        .iter()
        .filter(|op| {
            spec()
                .operation_object(&op.method, &op.template)
                .is_some_and(|object| object.get("x-profile").is_none())
        })
        .map(|op| (op, fill(&op.template)))
        .collect()
}

/// A concrete path for `template`, with harmless values for its parameters.
fn fill(template: &str) -> String {
    template
        .replace("{sessionId}", "conformance-session")
        .replace("{actionId}", "conformance-action")
        .replace("{applicationId}", "1")
        .replace("{name}", "CONFORMANCE")
        .replace("{app}", "conformance-app")
        .replace("{skill}", "conformance-skill")
        .replace("{operation}", "conformance-operation")
}

/// Sends every interface operation with `authorization` (or none) and expects 401.
async fn expect_unauthorized(target: &Target, authorization: Option<&str>) -> Verdict {
    let mut wrong = Vec::new();
    for (operation, path) in interface_operations() {
        let method = Method::from_bytes(operation.method.as_bytes()).expect("a method");
        let mut call = target.request(method.clone(), &path);
        if let Some(value) = authorization {
            call = call.header("authorization", value);
        }
        if [Method::POST, Method::PUT, Method::PATCH].contains(&method) {
            call = call.json(&serde_json::json!({}));
        }
        let reply = call.send().await?;
        if reply.status != 401 || reply.body.get("error").is_none() {
            wrong.push(format!("{method} {path}: {}", reply.status));
        }
    }
    ensure(wrong.is_empty(), || {
        format!("not 401 with an error envelope: {}", wrong.join("; "))
    })
}

async fn no_token(target: &Target) -> Verdict {
    expect_unauthorized(target, None).await
}

async fn bad_token(target: &Target) -> Verdict {
    expect_unauthorized(target, Some("Bearer conformance.not-a.token")).await?;
    expect_unauthorized(target, Some("Basic Y29uZm9ybWFuY2U6Y29uZm9ybWFuY2U=")).await
}

async fn other_resource(target: &Target) -> Verdict {
    let tokens = &target.tokens;
    let probes = [
        (
            &tokens.pipeline,
            "pipeline",
            Method::GET,
            "/v1/agent/sessions/conformance-session",
        ),
        (
            &tokens.account,
            "account",
            Method::GET,
            "/v1/pipeline/apps/evm-assets/operations/erc20-transfer",
        ),
        (&tokens.agent, "agent", Method::GET, "/v1/account/statement"),
    ];
    let mut tried = 0;
    for (token, name, method, path) in probes {
        let Some(token) = token else { continue };
        tried += 1;
        target
            .request(method.clone(), path)
            .bearer(token)
            .send()
            .await?
            .expect_envelope(401, &format!("the {name} token on {method} {path}"))?;
    }
    if tried == 0 {
        return Err(Finding::Skip("needs at least one resource token".into()));
    }
    Ok(())
}

async fn missing_scope(target: &Target) -> Verdict {
    let narrow = token(&target.tokens.narrow, "narrow")?;
    let reply = target
        .request(Method::POST, "/v1/agent/chat")
        .bearer(narrow)
        .json(&serde_json::json!({ "message": "conformance: a token without agent:write" }))
        .send()
        .await?;
    reply.expect_envelope(
        403,
        "POST /v1/agent/chat with a token holding agent:read only",
    )?;
    Ok(())
}

async fn session_ownership(target: &Target) -> Verdict {
    let owner = token(&target.tokens.agent, "agent")?;
    let other = token(&target.tokens.second, "second")?;
    let (session, _) = start_turn(target, owner, None, "conformance: ownership").await?;
    for path in [
        format!("/v1/agent/sessions/{session}"),
        format!("/v1/agent/chat/{session}"),
    ] {
        let reply = target
            .request(Method::GET, &path)
            .bearer(other)
            .send()
            .await?;
        reply.expect(404, &format!("GET {path} by another account"))?;
    }
    let path = format!("/v1/agent/chat/{session}/stream");
    let stream = target
        .request(Method::GET, &path)
        .bearer(other)
        .open()
        .await?;
    ensure(stream.status() == 404, || {
        format!(
            "GET {path} by another account: expected 404, got {}",
            stream.status()
        )
    })?;
    let reply = target
        .request(Method::POST, "/v1/agent/chat")
        .bearer(other)
        .json(&serde_json::json!({ "message": "conformance: not mine", "sessionId": session }))
        .send()
        .await?;
    reply.expect(404, "POST /v1/agent/chat into another account's session")?;
    Ok(())
}
