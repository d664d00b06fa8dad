//! The authorization matrix: every /v1 operation of openapi.json, with no token, a garbage
//! token, an expired one, one signed by another server, one for another resource, and one
//! without the operation's scope. Each gets its status and challenge, and nothing else.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use intent_models::schema::Schemas;
use intent_server::auth::resource::Resource;
use intent_server::auth::token::{self, Grant};
use intent_tests::{TestServer, openapi, operations};
use serde_json::Value;

/// A concrete path for a template of openapi.json: each path parameter takes its example, or
/// a value of its form. No resource need exist: a refused token is refused before a lookup,
/// and the right token may be answered 404.
fn concrete(template: &str, op: &'static Value) -> String {
    let mut path = template.to_owned();
    for parameter in op["parameters"].as_array().into_iter().flatten() {
        let parameter = intent_tests::resolve(parameter);
        if parameter["in"] != "path" {
            continue;
        }
        let name = parameter["name"].as_str().unwrap();
        let value = match (&parameter["example"], name) {
            (Value::String(example), _) => example.clone(),
            (Value::Number(example), _) => example.to_string(),
            (_, "sessionId") => "ses_matrix".to_owned(),
            (_, "actionId") => "act_matrix".to_owned(),
            _ => "matrix".to_owned(),
        };
        path = path.replace(&format!("{{{name}}}"), &value);
    }
    assert!(
        !path.contains('{'),
        "{template}: a path parameter is not declared"
    );
    path
}

struct Case {
    method: reqwest::Method,
    path: String,
    scope: String,
    resource: Resource,
}

fn cases() -> Vec<Case> {
    let cases: Vec<Case> = operations()
        .into_iter()
        .map(|(method, template, op)| Case {
            method: method.parse().unwrap(),
            path: concrete(template, op),
            scope: op["security"][0]["oauth2"][0].as_str().unwrap().to_owned(),
            resource: Resource::from_name(op["x-resource"].as_str().unwrap()).unwrap(),
        })
        .collect();
    // Every operation of openapi.json, counted from its paths as written.
    let written = intent_models::openapi::operation_objects(openapi()).count();
    assert_eq!(cases.len(), written, "every operation of openapi.json");
    assert!(written > 0);
    cases
}

async fn send(server: &TestServer, case: &Case, token: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .request(
            case.method.clone(),
            format!("{}{}", server.base_url(), case.path),
        )
        .header("Idempotency-Key", "matrix");
    if matches!(
        case.method,
        reqwest::Method::POST | reqwest::Method::PUT | reqwest::Method::PATCH
    ) {
        request = request
            .header("content-type", "application/json")
            .body("{}");
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

/// Asserts the status, the error code, and that the body is the envelope of openapi.json;
/// returns the `WWW-Authenticate` challenge.
async fn refused(response: reqwest::Response, status: u16, code: &str, what: &str) -> String {
    assert_eq!(response.status(), status, "{what}");
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("{what}: no WWW-Authenticate"));
    let body: Value = response.json().await.unwrap();
    let schemas = Schemas::from_openapi(openapi()).unwrap();
    assert_eq!(
        schemas.component("ErrorEnvelope").unwrap().errors(&body),
        Vec::<String>::new(),
        "{what}"
    );
    assert_eq!(
        schemas
            .component("ErrorDetail")
            .unwrap()
            .errors(&body["error"]),
        Vec::<String>::new(),
        "{what}"
    );
    assert_eq!(body["error"]["code"], code, "{what}");
    challenge
}

fn grant(server: &TestServer, resource: Resource, scopes: Vec<String>) -> Grant {
    Grant {
        account: "alice".into(),
        scopes,
        resource: resource.identifier(server.base_url()),
        client_id: "matrix".into(),
        ttl: std::time::Duration::from_secs(3600),
    }
}

fn all_scopes(resource: Resource) -> Vec<String> {
    resource.scopes().iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn every_operation_refuses_missing_bad_expired_foreign_and_misdirected_tokens() {
    let server = TestServer::start().await;
    let stranger = tempfile::tempdir().unwrap();
    for case in cases() {
        let what = |kind: &str| format!("{} {} with {kind}", case.method, case.path);
        let metadata = format!(
            "resource_metadata=\"{}\"",
            server.state().resource_metadata_url(case.resource)
        );

        let challenge = refused(
            send(&server, &case, None).await,
            401,
            "unauthorized",
            &what("no token"),
        )
        .await;
        assert!(
            challenge.starts_with("Bearer ") && challenge.contains(&metadata),
            "{challenge}"
        );
        assert!(
            !challenge.contains("error="),
            "no error code without credentials: {challenge}"
        );

        let challenge = refused(
            send(&server, &case, Some("garbage")).await,
            401,
            "unauthorized",
            &what("garbage"),
        )
        .await;
        assert!(
            challenge.contains(r#"error="invalid_token""#) && challenge.contains(&metadata),
            "{challenge}"
        );

        let right = grant(&server, case.resource, all_scopes(case.resource));
        let expired = token::mint(
            server.state().signing_key(),
            server.state().issuer(),
            &right,
            intent_server::now() - 7200,
        );
        refused(
            send(&server, &case, Some(&expired)).await,
            401,
            "unauthorized",
            &what("an expired token"),
        )
        .await;

        let forged =
            token::mint_with_data_dir(stranger.path(), &right, intent_server::now()).unwrap();
        refused(
            send(&server, &case, Some(&forged)).await,
            401,
            "unauthorized",
            &what("another key"),
        )
        .await;

        let other = Resource::ALL
            .into_iter()
            .find(|r| *r != case.resource)
            .unwrap();
        let misdirected =
            server
                .state()
                .mint_access_token(&grant(&server, other, all_scopes(other)));
        refused(
            send(&server, &case, Some(&misdirected)).await,
            401,
            "unauthorized",
            &what("another audience"),
        )
        .await;

        let narrow: Vec<String> = all_scopes(case.resource)
            .into_iter()
            .filter(|s| *s != case.scope)
            .collect();
        let narrow = server
            .state()
            .mint_access_token(&grant(&server, case.resource, narrow));
        let response = send(&server, &case, Some(&narrow)).await;
        let challenge = refused(response, 403, "insufficient_scope", &what("no scope")).await;
        assert!(
            challenge.contains(&format!(r#"scope="{}""#, case.scope)),
            "{challenge}"
        );

        let allowed = server.state().mint_access_token(&right);
        let status = send(&server, &case, Some(&allowed)).await.status();
        assert!(
            status != 401 && status != 403,
            "{}: {status} with the right token",
            what("the scope")
        );
    }
}

#[tokio::test]
async fn the_scope_is_named_in_the_message_of_a_403() {
    let server = TestServer::start().await;
    let token = server.token("alice", Resource::Account, &["account:apps:read"]);
    let response = server.get("/v1/account/statement", &token).await;
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("account:usage:read"),
        "{body}"
    );
    assert_eq!(body["error"]["details"]["scope"], "account:usage:read");
}

#[tokio::test]
async fn resource_metadata_and_jwks_are_published() {
    let server = TestServer::start().await;
    for resource in Resource::ALL {
        let url = server.state().resource_metadata_url(resource);
        let metadata: Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
        assert_eq!(
            metadata["resource"],
            resource.identifier(server.base_url()),
            "{url}"
        );
        assert_eq!(
            metadata["authorization_servers"],
            serde_json::json!([server.base_url()]),
            "{url}"
        );
        // An MCP resource's tokens may also carry the scopes of the resource its tools call.
        let scopes = metadata["scopes_supported"].as_array().unwrap();
        assert_eq!(scopes.len(), resource.grantable().len(), "{url}");
    }
    let jwks: Value = reqwest::get(format!("{}/.well-known/jwks.json", server.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key = &jwks["keys"][0];
    assert_eq!(
        (key["kty"].as_str(), key["crv"].as_str()),
        (Some("OKP"), Some("Ed25519"))
    );
    let token = server.token("alice", Resource::Agent, &["agent:read"]);
    let header = token.split('.').next().unwrap();
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
    assert_eq!(header["kid"], key["kid"], "tokens name the published key");
    assert_eq!(header["typ"], "at+jwt");
}

#[tokio::test]
async fn the_token_command_mints_what_the_running_server_accepts() {
    let server = TestServer::start().await;
    let grant = grant(&server, Resource::Account, vec!["account:apps:read".into()]);
    let token = token::mint_with_data_dir(server.data_dir(), &grant, intent_server::now()).unwrap();
    let response = server.get("/v1/account/apps", &token).await;
    assert_eq!(response.status(), 200);

    let unknown = Grant {
        resource: format!("{}/v1/elsewhere", server.base_url()),
        ..grant.clone()
    };
    let error = token::mint_with_data_dir(server.data_dir(), &unknown, 0).unwrap_err();
    assert!(error.to_string().starts_with("invalid_target"), "{error}");
    let bad_scope = Grant {
        scopes: vec!["root".into()],
        ..grant
    };
    assert!(token::mint_with_data_dir(server.data_dir(), &bad_scope, 0).is_err());
}
