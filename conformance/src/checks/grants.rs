//! What part 5 states beyond each operation's matrix: the authorization server's addresses and
//! grants, and what each scope grants.

use intent_models::Scope;
use reqwest::Method;
use serde_json::{Value, json};

use super::agent_actions::pending_action;
use super::pipeline::{EVM, SVM};
use super::subjects::build_request;
use super::{run, start_turn};
use crate::checks::{Category, Check};
use crate::finding::{Finding, Verdict, ensure, skip};
use crate::target::{Account, Reply, Role, Target, TokenRequest};

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "auth.oauth".into(),
            category: Category::Auth,
            requirement: "The authorization, token and device code addresses under the base URL MUST answer as OAuth endpoints: a redirect of the authorization endpoint to the client's `redirect_uri` MUST carry `code` or `error` and the `state` sent (a sign-in page is an answer), and the token endpoint MUST know the authorization-code and device grants.",
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
        .form(&[
            ("client_id", "conformance"),
            ("scope", Scope::AgentRead.as_str()),
        ])
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
    authorization_endpoint(target).await
}

/// The callback the suite names as its `redirect_uri`, and the `state` it sends.
const CALLBACK: &str = "http://127.0.0.1/callback";
const STATE: &str = "conformance-state-7f3a";

/// `GET /api/auth/oauth2/authorize` judged where it answers (RFC 6749 4.1.1, 4.1.2): a redirect
/// to the client's `redirect_uri` must carry `code` or `error` and the `state` sent; a redirect
/// elsewhere, or a page, asks a person to sign in; an OAuth error refuses the request. The
/// redirect is never followed.
async fn authorization_endpoint(target: &Target) -> Verdict {
    let path = format!(
        "/api/auth/oauth2/authorize?response_type=code&client_id=conformance\
         &redirect_uri={}&state={STATE}&code_challenge_method=S256\
         &code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        super::encode(CALLBACK)
    );
    let reply = target.request(Method::GET, &path).send().await?;
    ensure(
        !matches!(reply.status, 404 | 405) && reply.status < 500,
        || {
            format!(
                "GET /api/auth/oauth2/authorize: {}, not an authorization endpoint",
                reply.status
            )
        },
    )?;
    if !(300..400).contains(&reply.status) {
        return Ok(());
    }
    let location = reply
        .headers
        .get(reqwest::header::LOCATION)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let Ok(to) = reqwest::Url::parse(target.base()).and_then(|base| base.join(location)) else {
        return crate::finding::fail(format!(
            "GET /api/auth/oauth2/authorize: {} with no usable Location ({location:?})",
            reply.status
        ));
    };
    let mut back = to.clone();
    back.set_query(None);
    back.set_fragment(None);
    if back.as_str() != CALLBACK {
        // A sign-in page, or another step of the authorization server's.
        return Ok(());
    }
    let query: Vec<(String, String)> = to.query_pairs().into_owned().collect();
    let has = |name: &str| query.iter().any(|(key, _)| key == name);
    ensure(has("code") || has("error"), || {
        format!(
            "the authorization redirect to the redirect_uri carries neither code nor error: {location}"
        )
    })?;
    ensure(
        query
            .iter()
            .any(|(key, value)| key == "state" && value == STATE),
        || {
            format!(
                "the authorization redirect does not carry the state sent ({STATE}): {location}"
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

/// Fails when `reply`, to `what` sent with a token holding `scope`, is 401 or 403. Tells the
/// fact of `scope`'s grant asserted.
fn let_through(reply: &Reply, scope: &str, what: &str) -> Verdict {
    if let Some(fact) = scope_fact(scope) {
        crate::finding::asserted_fact("5.4.http-resource-ids");
        crate::finding::asserted_fact(fact);
    }
    ensure(!matches!(reply.status, 401 | 403), || {
        format!(
            "{what} with a token holding {scope}: {} {}",
            reply.status,
            crate::finding::excerpt(&reply.text)
        )
    })
}

/// The fact of `conformance/facts.json` that says what `scope` grants, for the scopes whose
/// grant the checks probe.
fn scope_fact(scope: &str) -> Option<&'static str> {
    let scope = Scope::ALL.iter().find(|known| known.as_str() == scope)?;
    Some(match scope {
        Scope::AgentRead => "5.scope-agent-read",
        Scope::AgentWrite => "5.scope-agent-write",
        Scope::AgentActionsResolve => "5.scope-agent-actions-resolve",
        Scope::PipelineCatalog => "5.scope-pipeline-catalog",
        Scope::PipelineExecute => "5.scope-pipeline-execute",
        Scope::AccountAppsWrite => "5.scope-account-apps-write",
        Scope::AccountCredentialsWrite => "5.scope-account-credentials-write",
        Scope::AccountUsageRead => "5.scope-account-usage-read",
        Scope::McpAgent => "5.scope-mcp-agent",
        Scope::McpPipeline => "5.scope-mcp-pipeline",
        _ => return None,
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
    let read = ("agent", Scope::AgentRead.as_str());
    granted(target, read, Method::GET, &session_path, None).await?;
    let page = format!("/v1/agent/chat/{session}");
    granted(target, read, Method::GET, &page, None).await?;
    let write = ("agent", Scope::AgentWrite.as_str());
    let means = &target.settings.means.chat;
    let chat = means.request("conformance: written", Some(&session));
    granted(target, write, Method::POST, "/v1/agent/chat", Some(&chat)).await?;
    let body = json!({ "title": "conformance: granted", "archived": false });
    granted(target, write, Method::PATCH, &session_path, Some(&body)).await?;
    // An action to resolve exists only where the runtime raises one, and an MCP resource only
    // where the deployment serves one: what could not be tried is said once the rest has held.
    let mut untried = Vec::new();
    match pending_action(target, agent).await {
        Ok(pending) => {
            let resolve = only(target, "agent", Scope::AgentActionsResolve.as_str()).await?;
            let key = super::fresh_key("grants");
            let body = pending.body(target, pending.revision, crate::means::Decision::Reject);
            let reply = pending.resolve(target, &resolve, Some(&key), &body).await?;
            let_through(
                &reply,
                Scope::AgentActionsResolve.as_str(),
                "resolving an action",
            )?;
        }
        Err(Finding::Skip(reason)) => {
            untried.push(format!("{} ({reason})", Scope::AgentActionsResolve))
        }
        Err(other) => return Err(other),
    }
    for (resource, scope, path) in [
        ("agent-mcp", Scope::McpAgent.as_str(), "/v1/agent/mcp"),
        (
            "pipeline-mcp",
            Scope::McpPipeline.as_str(),
            "/v1/pipeline/mcp",
        ),
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
        // An MCP resource is no operation of the document: a 404 or 405 is one not served, where
        // nothing the scope grants was reached.
        match reply.status {
            404 | 405 => untried.push(format!("{scope} (POST {path} answered {})", reply.status)),
            _ => let_through(&reply, scope, &format!("POST {path} initialize"))?,
        }
    }
    pipeline_grants(target).await?;
    account_grants(target).await?;
    match untried.is_empty() {
        true => Ok(()),
        false => skip(format!(
            "the other grants held; not tried: {}",
            untried.join("; ")
        )),
    }
}

async fn pipeline_grants(target: &Target) -> Verdict {
    let named = super::subjects::app_operation(target).await?;
    let path = format!(
        "/v1/pipeline/apps/{}/operations/{}",
        super::encode(&named.app),
        super::encode(&named.operation)
    );
    let catalog = ("pipeline", Scope::PipelineCatalog.as_str());
    granted(target, catalog, Method::GET, &path, None).await?;
    // Execution is subject to a policy gate (part 5), which may answer 403: only a 401 says
    // the token was not taken.
    let execute = only(target, "pipeline", Scope::PipelineExecute.as_str()).await?;
    for path in [EVM, SVM] {
        let body = build_request(target, path).await?;
        let reply = target
            .request(Method::POST, path)
            .bearer(&execute)
            .json(&body)
            .send()
            .await?;
        crate::finding::asserted_fact("5.scope-pipeline-execute");
        ensure(reply.status != 401, || {
            format!("POST {path} with a token holding pipeline:execute: 401")
        })?;
    }
    Ok(())
}

async fn account_grants(target: &Target) -> Verdict {
    let install = super::subjects::install(target).await?;
    let application = format!("/v1/account/apps/{}", install.application_id);
    let apps = ("account", Scope::AccountAppsWrite.as_str());
    granted(target, apps, Method::POST, &application, None).await?;
    if let Some(name) = install.credentials.keys().next() {
        let path = format!("{application}/secrets/{name}");
        let credentials = ("account", Scope::AccountCredentialsWrite.as_str());
        granted(target, credentials, Method::DELETE, &path, None).await?;
    }
    let usage = ("account", Scope::AccountUsageRead.as_str());
    granted(target, usage, Method::GET, "/v1/account/statement", None).await
}
