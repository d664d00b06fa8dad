//! What part 5 states beyond each operation's matrix: the authorization server's addresses and
//! grants, and what each scope grants.

use reqwest::Method;
use serde_json::{Value, json};

use super::agent_actions::pending_action;
use super::pipeline::{EVM, SVM};
use super::subjects::build_request;
use super::{run, start_turn, text};
use crate::checks::{Category, Check};
use crate::finding::{Finding, Verdict, ensure, skip};
use crate::target::{Account, Reply, Role, Target, TokenRequest};

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "auth.oauth".into(),
            category: Category::Auth,
            requirement: "The authorization, token and device code addresses under the base URL MUST answer as OAuth endpoints, and the token endpoint MUST know the authorization-code and device grants.",
            section: "5.1, 5.3",
            rests_on: vec!["#/components/securitySchemes/oauth2"],
            operation: None,
            run: run!(oauth),
        },
        Check {
            id: "auth.grants".into(),
            category: Category::Auth,
            requirement: "A token bound to a resource and holding one scope MUST be let through (neither 401 nor 403) where part 5 says that scope grants: reading and writing Agent sessions, resolving an action, the MCP resources, the catalog, execution, installing apps, removing credentials and reading usage.",
            section: "5.4, 5.5",
            rests_on: vec!["#/components/securitySchemes/oauth2/x-resources"],
            operation: None,
            run: run!(grants),
        },
    ]
}

/// An OAuth error object (RFC 6749 5.2): a JSON object whose `error` is a string.
fn oauth_error(reply: &Reply) -> Option<&str> {
    reply.body.get("error").and_then(Value::as_str)
}

async fn oauth(target: &Target) -> Verdict {
    let token_path = "/api/auth/oauth2/token";
    let grants = [
        vec![
            ("grant_type", "authorization_code"),
            ("code", "conformance-not-a-code"),
            ("redirect_uri", "http://127.0.0.1/callback"),
            (
                "code_verifier",
                "conformance-verifier-conformance-verifier-0123",
            ),
            ("client_id", "conformance"),
        ],
        vec![
            ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
            ("device_code", "conformance-not-a-device-code"),
            ("client_id", "conformance"),
        ],
    ];
    for form in &grants {
        let grant = form[0].1;
        let reply = target
            .request(Method::POST, token_path)
            .form(form)
            .send()
            .await?;
        ensure(
            matches!(reply.status, 400 | 401) && oauth_error(&reply).is_some(),
            || {
                format!(
                    "POST {token_path} with a made-up {grant} grant: {} {}, not an OAuth error",
                    reply.status,
                    crate::finding::excerpt(&reply.text)
                )
            },
        )?;
        ensure(
            oauth_error(&reply) != Some("unsupported_grant_type"),
            || format!("POST {token_path}: the {grant} grant is unsupported"),
        )?;
    }
    let device_path = "/api/auth/device/code";
    let reply = target
        .request(Method::POST, device_path)
        .form(&[("client_id", "conformance"), ("scope", "agent:read")])
        .send()
        .await?;
    let granted = (200..300).contains(&reply.status)
        && ["device_code", "user_code", "verification_uri"]
            .iter()
            .all(|member| reply.body.get(member).is_some_and(Value::is_string));
    ensure(granted || oauth_error(&reply).is_some(), || {
        format!(
            "POST {device_path}: {} {}, neither a device authorization nor an OAuth error",
            reply.status,
            crate::finding::excerpt(&reply.text)
        )
    })?;
    let authorize_path = "/api/auth/oauth2/authorize?response_type=code&client_id=conformance\
        &redirect_uri=http%3A%2F%2F127.0.0.1%2Fcallback&code_challenge_method=S256\
        &code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
    let reply = target.request(Method::GET, authorize_path).send().await?;
    ensure(
        !matches!(reply.status, 404 | 405) && reply.status < 500,
        || {
            format!(
                "GET /api/auth/oauth2/authorize: {}, not an authorization endpoint",
                reply.status
            )
        },
    )
}

/// A token of the primary account for `resource` holding only `scope`.
async fn only(target: &Target, resource: &str, scope: &str) -> Result<String, Finding> {
    target
        .token(&TokenRequest::new(Account::Primary, resource, &[scope]))
        .await
}

/// Fails when `reply`, to `what` sent with a token holding `scope`, is 401 or 403.
fn let_through(reply: &Reply, scope: &str, what: &str) -> Verdict {
    ensure(!matches!(reply.status, 401 | 403), || {
        format!(
            "{what} with a token holding {scope}: {} {}",
            reply.status,
            crate::finding::excerpt(&reply.text)
        )
    })
}

/// Sends `method path` (with `body`) with a token of `resource` holding only `scope`, and fails
/// when it is refused 401 or 403.
async fn granted(
    target: &Target,
    (resource, scope): (&str, &str),
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Verdict {
    let token = only(target, resource, scope).await?;
    let mut call = target.request(method.clone(), path).bearer(&token);
    if let Some(body) = body {
        call = call.json(body);
    }
    let reply = call.send().await?;
    let_through(&reply, scope, &format!("{method} {path}"))
}

async fn grants(target: &Target) -> Verdict {
    let agent = &target.role(Role::Agent).await?;
    let (session, _) = start_turn(target, agent, None, "conformance: grants").await?;
    let session_path = format!("/v1/agent/sessions/{session}");
    let read = ("agent", "agent:read");
    granted(target, read, Method::GET, &session_path, None).await?;
    let page = format!("/v1/agent/chat/{session}");
    granted(target, read, Method::GET, &page, None).await?;
    let write = ("agent", "agent:write");
    let means = &target.settings.means.chat;
    let chat = means.request("conformance: written", Some(&session));
    granted(target, write, Method::POST, "/v1/agent/chat", Some(&chat)).await?;
    let body = json!({ "title": "conformance: granted", "archived": false });
    granted(target, write, Method::PATCH, &session_path, Some(&body)).await?;
    // An action to resolve exists only where the runtime raises one; else the check says what
    // it could not try once the rest has held.
    let unresolved = match pending_action(target, agent).await {
        Ok(pending) => {
            let resolve = only(target, "agent", "agent:actions:resolve").await?;
            let key = super::fresh_key("grants");
            let body = pending.body(target, pending.revision, crate::means::Decision::Reject);
            let reply = pending.resolve(target, &resolve, Some(&key), &body).await?;
            let_through(&reply, "agent:actions:resolve", "resolving an action")?;
            None
        }
        Err(Finding::Skip(reason)) => Some(reason),
        Err(other) => return Err(other),
    };
    for (resource, scope, path) in [
        ("agent-mcp", "mcp:agent", "/v1/agent/mcp"),
        ("pipeline-mcp", "mcp:pipeline", "/v1/pipeline/mcp"),
    ] {
        let token = only(target, resource, scope).await?;
        let initialize = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": { "name": "intent-conformance", "version": "1" } } });
        let reply = target
            .request(Method::POST, path)
            .bearer(&token)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize)
            .send()
            .await?;
        let_through(&reply, scope, &format!("POST {path} initialize"))?;
    }
    pipeline_grants(target).await?;
    account_grants(target).await?;
    match unresolved {
        Some(reason) => skip(format!(
            "the other grants held; agent:actions:resolve was not tried: {reason}"
        )),
        None => Ok(()),
    }
}

async fn pipeline_grants(target: &Target) -> Verdict {
    let request = build_request(target, EVM).await?;
    let (app, operation) = (
        text(&request, "/app")?,
        text(&request, "/operations/0/operation")?,
    );
    let path = format!("/v1/pipeline/apps/{app}/operations/{operation}");
    let catalog = ("pipeline", "pipeline:catalog");
    granted(target, catalog, Method::GET, &path, None).await?;
    // Execution is subject to a policy gate (part 5), which may answer 403: only a 401 says
    // the token was not taken.
    let execute = only(target, "pipeline", "pipeline:execute").await?;
    for path in [EVM, SVM] {
        let body = build_request(target, path).await?;
        let reply = target
            .request(Method::POST, path)
            .bearer(&execute)
            .json(&body)
            .send()
            .await?;
        ensure(reply.status != 401, || {
            format!("POST {path} with a token holding pipeline:execute: 401")
        })?;
    }
    Ok(())
}

async fn account_grants(target: &Target) -> Verdict {
    let install = super::subjects::install(target).await?;
    let application = format!("/v1/account/apps/{}", install.application_id);
    let apps = ("account", "account:apps:write");
    granted(target, apps, Method::POST, &application, None).await?;
    if let Some(name) = install.credentials.keys().next() {
        let path = format!("{application}/secrets/{name}");
        let credentials = ("account", "account:credentials:write");
        granted(target, credentials, Method::DELETE, &path, None).await?;
    }
    let usage = ("account", "account:usage:read");
    granted(target, usage, Method::GET, "/v1/account/statement", None).await
}
