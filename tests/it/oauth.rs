//! The OAuth 2.1 authorization server end to end, driven by the `oauth2` crate: authorization
//! code with PKCE, the device grant, refresh rotation, and the errors RFC 6749 and RFC 8628 name.

use std::time::Duration;

use intent_sdk::auth::http;
use intent_server::auth::resource::Resource;
use intent_tests::{TEST_CLIENT, TEST_REDIRECT_URI, TestServer, submit_page};
use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, CsrfToken, DeviceAuthorizationUrl, PkceCodeChallenge,
    RedirectUrl, Scope, StandardDeviceAuthorizationResponse, TokenResponse, TokenUrl,
};
use serde_json::Value;

pub(crate) fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The query parameters of the `Location` a response redirects to.
pub(crate) fn redirect_query(response: &reqwest::Response) -> Vec<(String, String)> {
    assert_eq!(response.status(), 303, "a redirect to the client");
    let location = response.headers()["location"].to_str().unwrap();
    assert!(location.starts_with(TEST_REDIRECT_URI), "{location}");
    let url = reqwest::Url::parse(location).unwrap();
    url.query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

pub(crate) fn param<'a>(query: &'a [(String, String)], name: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Calls `/v1/account/apps` with `token`; the status tells whether the gateway accepts it.
async fn account_apps_status(server: &TestServer, token: &str) -> u16 {
    server
        .get("/v1/account/apps", token)
        .await
        .status()
        .as_u16()
}

#[tokio::test]
async fn authorization_code_with_pkce_issues_a_token_for_the_chosen_account_and_resource() {
    let server = TestServer::start().await;
    let resource = Resource::Account.identifier(server.base_url());
    let client = BasicClient::new(ClientId::new(TEST_CLIENT.into()))
        .set_auth_uri(
            AuthUrl::new(format!("{}/api/auth/oauth2/authorize", server.base_url())).unwrap(),
        )
        .set_token_uri(
            TokenUrl::new(format!("{}/api/auth/oauth2/token", server.base_url())).unwrap(),
        )
        .set_redirect_uri(RedirectUrl::new(TEST_REDIRECT_URI.into()).unwrap());
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (authorize_url, csrf) = client
        .authorize_url(CsrfToken::new_random)
        .add_scope(Scope::new("account:apps:read".into()))
        .add_extra_param("resource", &resource)
        .set_pkce_challenge(challenge)
        .url();

    let consent = no_redirects()
        .get(authorize_url.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(consent.status(), 200);
    let page = consent.text().await.unwrap();
    assert!(
        page.contains("Approve") && page.contains("account:apps:read"),
        "{page}"
    );

    let mut form: Vec<(String, String)> = authorize_url
        .query_pairs()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    form.push(("account".into(), "alice".into()));
    form.push(("decision".into(), "approve".into()));
    let decided = submit_page(authorize_url.as_str(), authorize_url.as_str(), &form).await;
    let query = redirect_query(&decided);
    assert_eq!(param(&query, "state"), Some(csrf.secret().as_str()));
    assert_eq!(param(&query, "iss"), Some(server.base_url()));
    let code = param(&query, "code").expect("a code").to_owned();

    let tokens = client
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(verifier)
        .request_async(&http)
        .await
        .expect("the code exchanges for tokens");
    let access = tokens.access_token().secret();
    assert_eq!(account_apps_status(&server, access).await, 200);
    let agent = server.get("/v1/agent/sessions/ses_x", access).await;
    assert_eq!(
        agent.status(),
        401,
        "the token is bound to the Account resource only"
    );

    // Refresh rotates: the new refresh token works once, the old one is refused, and replaying
    // the old one revokes the new one too.
    let first = tokens.refresh_token().expect("a refresh token").clone();
    let elsewhere = client
        .exchange_refresh_token(&first)
        .add_extra_param("resource", Resource::Agent.identifier(server.base_url()))
        .request_async(&http)
        .await;
    assert_oauth_error(elsewhere, "invalid_target");
    let rotated = client
        .exchange_refresh_token(&first)
        .request_async(&http)
        .await
        .expect("refresh");
    let second = rotated
        .refresh_token()
        .expect("a rotated refresh token")
        .clone();
    assert_ne!(first.secret(), second.secret());
    assert_eq!(
        account_apps_status(&server, rotated.access_token().secret()).await,
        200
    );
    assert_oauth_error(
        client
            .exchange_refresh_token(&first)
            .request_async(&http)
            .await,
        "invalid_grant",
    );
    assert_oauth_error(
        client
            .exchange_refresh_token(&second)
            .request_async(&http)
            .await,
        "invalid_grant",
    );
}

fn assert_oauth_error<T: std::fmt::Debug>(
    result: Result<T, oauth2::RequestTokenError<reqwest::Error, oauth2::basic::BasicErrorResponse>>,
    expected: &str,
) {
    match result {
        Err(oauth2::RequestTokenError::ServerResponse(response)) => {
            assert_eq!(response.error().as_ref(), expected, "{response:?}")
        }
        other => panic!("expected {expected}, got {other:?}"),
    }
}

#[tokio::test]
async fn authorization_requests_are_refused_as_the_rfcs_say() {
    let server = TestServer::start().await;
    let resource = Resource::Agent.identifier(server.base_url());
    let (challenge, _) = PkceCodeChallenge::new_random_sha256();
    let base = vec![
        ("response_type", "code".to_owned()),
        ("client_id", TEST_CLIENT.to_owned()),
        ("redirect_uri", TEST_REDIRECT_URI.to_owned()),
        ("scope", "agent:read".to_owned()),
        ("state", "s1".to_owned()),
        ("code_challenge", challenge.as_str().to_owned()),
        ("code_challenge_method", "S256".to_owned()),
        ("resource", resource.clone()),
    ];
    let with = |name: &str, value: &str| {
        let mut params = base.clone();
        params.retain(|(k, _)| *k != name);
        params.push((
            Box::leak(name.to_owned().into_boxed_str()),
            value.to_owned(),
        ));
        params
    };
    let authorize = format!("{}/api/auth/oauth2/authorize", server.base_url());
    // Before the redirect URI is trusted: a page, never a redirect.
    for (name, value) in [
        ("redirect_uri", "http://127.0.0.1:9/callback/other"),
        ("client_id", "stranger"),
    ] {
        let response = no_redirects()
            .get(&authorize)
            .query(&with(name, value))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{name}={value}");
        assert!(response.headers().get("location").is_none());
    }
    // After: the error goes back to the client with the state.
    for (name, value, error) in [
        ("code_challenge_method", "plain", "invalid_request"),
        ("resource", "http://elsewhere/v1/agent", "invalid_target"),
        ("scope", "account:apps:read", "invalid_scope"),
        ("response_type", "token", "unsupported_response_type"),
    ] {
        let response = no_redirects()
            .get(&authorize)
            .query(&with(name, value))
            .send()
            .await
            .unwrap();
        let query = redirect_query(&response);
        assert_eq!(param(&query, "error"), Some(error), "{name}={value}");
        assert_eq!(param(&query, "state"), Some("s1"));
        assert_eq!(
            param(&query, "iss"),
            Some(server.base_url()),
            "RFC 9207 on errors too"
        );
    }
    let page = reqwest::Url::parse_with_params(&authorize, &base).unwrap();
    let mut denied: Vec<(String, String)> = base
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    denied.push(("decision".into(), "deny".into()));
    let response = submit_page(page.as_str(), page.as_str(), &denied).await;
    assert_eq!(
        param(&redirect_query(&response), "error"),
        Some("access_denied")
    );
}

#[tokio::test]
async fn a_wrong_pkce_verifier_or_redirect_uri_gets_invalid_grant() {
    let server = TestServer::start().await;
    let (code, _) = approved_code(&server, "account:apps:read").await;
    let wrong_verifier = PkceCodeChallenge::new_random_sha256().1;
    let (status, body) = exchange(&server, &code, wrong_verifier.secret()).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "verifier: {body}"
    );

    let (code, verifier) = approved_code(&server, "account:apps:read").await;
    let form = [
        ("grant_type", "authorization_code"),
        ("client_id", TEST_CLIENT),
        ("code", &code),
        ("redirect_uri", "http://127.0.0.1:9/elsewhere"),
        ("code_verifier", verifier.secret()),
    ];
    let (status, body) = token_request(&server, &form).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "redirect_uri: {body}"
    );
}

/// A code approved for alice on the Account resource with `scope`, and its PKCE verifier.
pub(crate) async fn approved_code(
    server: &TestServer,
    scope: &str,
) -> (String, oauth2::PkceCodeVerifier) {
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let params = [
        ("response_type", "code"),
        ("client_id", TEST_CLIENT),
        ("redirect_uri", TEST_REDIRECT_URI),
        ("scope", scope),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("resource", &Resource::Account.identifier(server.base_url())),
    ];
    let url = format!("{}/api/auth/oauth2/authorize", server.base_url());
    let page = reqwest::Url::parse_with_params(&url, &params).unwrap();
    let mut form: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    form.push(("account".into(), "alice".into()));
    form.push(("decision".into(), "approve".into()));
    let response = submit_page(page.as_str(), page.as_str(), &form).await;
    (
        param(&redirect_query(&response), "code")
            .unwrap()
            .to_owned(),
        verifier,
    )
}

pub(crate) async fn exchange(server: &TestServer, code: &str, verifier: &str) -> (u16, Value) {
    let form = [
        ("grant_type", "authorization_code"),
        ("client_id", TEST_CLIENT),
        ("code", code),
        ("redirect_uri", TEST_REDIRECT_URI),
        ("code_verifier", verifier),
    ];
    token_request(server, &form).await
}

pub(crate) async fn refresh(
    server: &TestServer,
    refresh_token: &str,
    scope: Option<&str>,
) -> (u16, Value) {
    let mut form = vec![
        ("grant_type", "refresh_token"),
        ("client_id", TEST_CLIENT),
        ("refresh_token", refresh_token),
    ];
    form.extend(scope.map(|scope| ("scope", scope)));
    token_request(server, &form).await
}

#[tokio::test]
async fn a_replayed_code_fails_and_revokes_the_refresh_tokens_it_produced() {
    let server = TestServer::start().await;
    let (code, verifier) = approved_code(&server, "account:apps:read").await;
    let (status, tokens) = exchange(&server, &code, verifier.secret()).await;
    assert_eq!(status, 200, "{tokens}");
    let (status, replay) = exchange(&server, &code, verifier.secret()).await;
    assert_eq!(
        (status, replay["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let (status, body) = refresh(&server, tokens["refresh_token"].as_str().unwrap(), None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "revoked with the code"
    );
}

#[tokio::test]
async fn a_code_exchanged_for_another_resource_gets_invalid_target() {
    let server = TestServer::start().await;
    let (code, verifier) = approved_code(&server, "account:apps:read").await;
    let agent = Resource::Agent.identifier(server.base_url());
    let form = [
        ("grant_type", "authorization_code"),
        ("client_id", TEST_CLIENT),
        ("code", &code),
        ("redirect_uri", TEST_REDIRECT_URI),
        ("code_verifier", verifier.secret()),
        ("resource", &agent),
    ];
    let (status, body) = token_request(&server, &form).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_target")),
        "{body}"
    );
}

#[tokio::test]
async fn a_refresh_may_narrow_the_scope_but_not_widen_it() {
    let server = TestServer::start().await;
    let (code, verifier) = approved_code(&server, "account:apps:read account:usage:read").await;
    let (_, tokens) = exchange(&server, &code, verifier.secret()).await;
    let refresh_token = tokens["refresh_token"].as_str().unwrap();
    let (status, body) = refresh(&server, refresh_token, Some("account:apps:write")).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_scope")),
        "{body}"
    );
    let (status, narrow) = refresh(&server, refresh_token, Some("account:apps:read")).await;
    assert_eq!(
        (status, narrow["scope"].as_str()),
        (200, Some("account:apps:read")),
        "{narrow}"
    );
    let access = narrow["access_token"].as_str().unwrap();
    assert_eq!(server.get("/v1/account/apps", access).await.status(), 200);
    assert_eq!(
        server.get("/v1/account/statement", access).await.status(),
        403,
        "usage was left out"
    );
    let (status, full) = refresh(&server, narrow["refresh_token"].as_str().unwrap(), None).await;
    assert_eq!(
        (status, full["scope"].as_str()),
        (200, Some("account:apps:read account:usage:read"))
    );
}

async fn token_request(server: &TestServer, form: &[(&str, &str)]) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/api/auth/oauth2/token", server.base_url()))
        .form(form)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

fn device_client(
    server: &TestServer,
) -> BasicClient<
    oauth2::EndpointSet,
    oauth2::EndpointSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointSet,
> {
    BasicClient::new(ClientId::new("intent-cli".into()))
        .set_auth_uri(
            AuthUrl::new(format!("{}/api/auth/oauth2/authorize", server.base_url())).unwrap(),
        )
        .set_token_uri(
            TokenUrl::new(format!("{}/api/auth/oauth2/token", server.base_url())).unwrap(),
        )
        .set_device_authorization_url(
            DeviceAuthorizationUrl::new(format!("{}/api/auth/device/code", server.base_url()))
                .unwrap(),
        )
}

/// Approves or denies `user_code` on the verification page, as a person would.
pub(crate) async fn decide(base: &str, user_code: &str, decision: &str) -> u16 {
    let page = reqwest::get(format!("{base}/api/auth/device?user_code={user_code}"))
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains(user_code));
    let form = [
        ("user_code", user_code),
        ("account", "alice"),
        ("decision", decision),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let response = submit_page(
        &format!("{base}/api/auth/device?user_code={user_code}"),
        &format!("{base}/api/auth/device"),
        &form,
    )
    .await;
    response.status().as_u16()
}

#[tokio::test]
async fn a_page_form_without_its_csrf_cookie_is_refused() {
    let server = TestServer::start().await;
    let (_, user_code) = start_device(&server).await;
    // A form posted from another site carries no cookie of this one.
    let response = reqwest::Client::new()
        .post(format!("{}/api/auth/device", server.base_url()))
        .form(&[
            ("user_code", user_code.as_str()),
            ("account", "mallory"),
            ("decision", "approve"),
            ("csrf", "csrf_guessed"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    // The same person on the page itself gets through.
    assert_eq!(decide(server.base_url(), &user_code, "approve").await, 200);
}

/// Takes about 2 s: the approval comes 1.5 s in, so the client polls at its 1 s interval and is
/// answered `authorization_pending` before it gets the token.
#[tokio::test]
async fn the_device_flow_polls_until_the_user_approves() {
    let server = TestServer::start().await;
    let client = device_client(&server);
    let details: StandardDeviceAuthorizationResponse = client
        .exchange_device_code()
        .add_scope(Scope::new("account:apps:read".into()))
        .add_extra_param("resource", Resource::Account.identifier(server.base_url()))
        .request_async(&http)
        .await
        .expect("device authorization");
    assert_eq!(details.interval(), Duration::from_secs(1));
    assert!(
        details
            .verification_uri()
            .as_str()
            .ends_with("/api/auth/device")
    );
    let user_code = details.user_code().secret().clone();
    let approver = {
        let (base, user_code) = (server.base_url().to_owned(), user_code.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            decide(&base, &user_code, "approve").await
        })
    };
    let tokens = client
        .exchange_device_access_token(&details)
        .request_async(&http, tokio::time::sleep, Some(Duration::from_secs(20)))
        .await
        .expect("a token once approved");
    assert_eq!(approver.await.unwrap(), 200);
    assert_eq!(
        account_apps_status(&server, tokens.access_token().secret()).await,
        200
    );
    assert!(tokens.refresh_token().is_some());
    let again = client
        .exchange_refresh_token(tokens.refresh_token().unwrap())
        .request_async(&http)
        .await;
    assert!(again.is_ok(), "a device token refreshes too");
}

async fn start_device(server: &TestServer) -> (String, String) {
    let form = [
        ("client_id", "intent-cli"),
        ("scope", "agent:read"),
        ("resource", &Resource::Agent.identifier(server.base_url())),
    ];
    let response = reqwest::Client::new()
        .post(format!("{}/api/auth/device/code", server.base_url()))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    (
        body["device_code"].as_str().unwrap().to_owned(),
        body["user_code"].as_str().unwrap().to_owned(),
    )
}

async fn poll(server: &TestServer, device_code: &str) -> (u16, Value) {
    let form = [
        ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
        ("client_id", "intent-cli"),
        ("device_code", device_code),
    ];
    token_request(server, &form).await
}

/// Takes about 7 s: after `slow_down` the poll interval is 6 s (1 s plus 5), which the next
/// poll honours, and then a second server's 1 s device code must expire.
#[tokio::test]
async fn device_polls_answer_pending_slow_down_denied_and_expired() {
    let server = TestServer::start().await;
    let (device_code, user_code) = start_device(&server).await;
    assert_eq!(
        poll(&server, &device_code).await.1["error"],
        "authorization_pending"
    );
    assert_eq!(
        poll(&server, &device_code).await.1["error"],
        "slow_down",
        "polled again at once"
    );
    assert_eq!(decide(server.base_url(), &user_code, "deny").await, 200);
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        poll(&server, &device_code).await.1["error"],
        "access_denied"
    );
    assert_eq!(
        decide(server.base_url(), &user_code, "approve").await,
        400,
        "a decided code cannot be decided again"
    );

    let short =
        TestServer::start_with(|config| config.device_code_ttl(Duration::from_secs(1))).await;
    let (device_code, user_code) = start_device(&short).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(poll(&short, &device_code).await.1["error"], "expired_token");
    assert_eq!(
        decide(short.base_url(), &user_code, "approve").await,
        400,
        "an expired code cannot be approved"
    );
}

#[tokio::test]
async fn device_authorization_refuses_unknown_clients_resources_and_scopes() {
    let server = TestServer::start().await;
    let agent = Resource::Agent.identifier(server.base_url());
    for (client, scope, resource, status, error) in [
        (
            "stranger",
            "agent:read",
            agent.as_str(),
            401,
            "invalid_client",
        ),
        (
            "intent-cli",
            "agent:read",
            "http://elsewhere/v1/agent",
            400,
            "invalid_target",
        ),
        ("intent-cli", "agent:read", "", 400, "invalid_target"),
        (
            "intent-cli",
            "pipeline:execute",
            agent.as_str(),
            400,
            "invalid_scope",
        ),
    ] {
        let form = [
            ("client_id", client),
            ("scope", scope),
            ("resource", resource),
        ];
        let response = reqwest::Client::new()
            .post(format!("{}/api/auth/device/code", server.base_url()))
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{client} {scope} {resource}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"], error);
    }
}

#[tokio::test]
async fn the_token_endpoint_answers_oauth_errors_in_json() {
    let server = TestServer::start().await;
    let (status, body) = token_request(
        &server,
        &[("grant_type", "password"), ("client_id", "intent-cli")],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("unsupported_grant_type"))
    );
    let (status, body) = token_request(
        &server,
        &[("grant_type", "refresh_token"), ("client_id", "nobody")],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("invalid_client"))
    );
    let response = reqwest::Client::new()
        .post(format!("{}/api/auth/oauth2/token", server.base_url()))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(response.headers()["cache-control"], "no-store");
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["error"], "invalid_request",
        "a body that is not a form"
    );
}

#[tokio::test]
async fn authorization_server_metadata_names_the_endpoints() {
    let server = TestServer::start().await;
    let url = format!(
        "{}/.well-known/oauth-authorization-server",
        server.base_url()
    );
    let metadata: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    assert_eq!(metadata["issuer"], server.base_url());
    assert_eq!(
        metadata["token_endpoint"],
        format!("{}/api/auth/oauth2/token", server.base_url())
    );
    assert_eq!(
        metadata["device_authorization_endpoint"],
        format!("{}/api/auth/device/code", server.base_url())
    );
    assert_eq!(
        metadata["code_challenge_methods_supported"],
        serde_json::json!(["S256"])
    );
    assert_eq!(metadata["scopes_supported"].as_array().unwrap().len(), 16);
}

#[tokio::test]
async fn the_consent_page_takes_a_loopback_redirect_on_any_port_and_cannot_be_framed() {
    let server = TestServer::start().await;
    let (challenge, _) = PkceCodeChallenge::new_random_sha256();
    let resource = Resource::Agent.identifier(server.base_url());
    let page = |redirect_uri: &'static str| {
        no_redirects()
            .get(format!("{}/api/auth/oauth2/authorize", server.base_url()))
            .query(&[
                ("response_type", "code"),
                ("client_id", TEST_CLIENT),
                ("redirect_uri", redirect_uri),
                ("scope", "agent:read"),
                ("state", "s"),
                ("code_challenge", challenge.as_str()),
                ("code_challenge_method", "S256"),
                ("resource", &resource),
            ])
            .send()
    };
    // TEST_REDIRECT_URI is http://127.0.0.1:9/callback; a native client listens elsewhere.
    let response = page("http://127.0.0.1:53117/callback").await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-frame-options"], "DENY");
    let policy = response.headers()["content-security-policy"]
        .to_str()
        .unwrap();
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    let response = page("http://127.0.0.1:53117/elsewhere").await.unwrap();
    assert_eq!(
        response.status(),
        400,
        "another path is another redirect URI"
    );
}

/// Registers a client with `metadata`; the status and the JSON answer.
async fn register(server: &TestServer, metadata: &Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/api/auth/oauth2/register", server.base_url()))
        .json(metadata)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn a_host_never_configured_registers_itself_and_signs_in_with_the_code_grant() {
    let server = TestServer::start().await;
    let url = format!(
        "{}/.well-known/oauth-authorization-server",
        server.base_url()
    );
    let metadata: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    let endpoint = format!("{}/api/auth/oauth2/register", server.base_url());
    assert_eq!(metadata["registration_endpoint"], endpoint.as_str());

    let redirect = "http://127.0.0.1:9/host-callback";
    let asked = serde_json::json!({
        "redirect_uris": [redirect],
        "client_name": "A Host",
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "logo_uri": "https://host.example/logo.png",
    });
    let (status, registered) = register(&server, &asked).await;
    assert_eq!(status, 201, "{registered}");
    let client_id = registered["client_id"].as_str().expect("a client id");
    assert!(client_id.starts_with("cl_"), "{client_id}");
    assert_eq!(registered["redirect_uris"], serde_json::json!([redirect]));
    assert_eq!(registered["token_endpoint_auth_method"], "none");
    assert_eq!(registered["client_name"], "A Host");
    assert!(registered["client_id_issued_at"].is_i64());

    let resource = Resource::Account.identifier(server.base_url());
    let client = BasicClient::new(ClientId::new(client_id.into()))
        .set_auth_uri(
            AuthUrl::new(format!("{}/api/auth/oauth2/authorize", server.base_url())).unwrap(),
        )
        .set_token_uri(
            TokenUrl::new(format!("{}/api/auth/oauth2/token", server.base_url())).unwrap(),
        )
        .set_redirect_uri(RedirectUrl::new(redirect.into()).unwrap());
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (authorize_url, _) = client
        .authorize_url(CsrfToken::new_random)
        .add_scope(Scope::new("account:apps:read".into()))
        .add_extra_param("resource", &resource)
        .set_pkce_challenge(challenge)
        .url();
    let page = no_redirects()
        .get(authorize_url.clone())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("A Host") && page.contains("registered by itself"),
        "the person sees the name is the client's own claim: {page}"
    );
    let mut form: Vec<(String, String)> = authorize_url
        .query_pairs()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    form.push(("account".into(), "alice".into()));
    form.push(("decision".into(), "approve".into()));
    let decided = submit_page(authorize_url.as_str(), authorize_url.as_str(), &form).await;
    assert_eq!(decided.status(), 303);
    let location = reqwest::Url::parse(decided.headers()["location"].to_str().unwrap()).unwrap();
    assert!(location.as_str().starts_with(redirect), "{location}");
    let code = location
        .query_pairs()
        .find(|(k, _)| k == "code")
        .expect("a code")
        .1
        .into_owned();
    let tokens = client
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(verifier)
        .request_async(&http)
        .await
        .expect("the registered client's code exchanges for tokens");
    assert_eq!(
        account_apps_status(&server, tokens.access_token().secret()).await,
        200
    );

    // Another client's redirect URI is not this client's.
    let elsewhere = no_redirects()
        .get(authorize_url.as_str().replace("host-callback", "callback"))
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), 400);
}

#[tokio::test]
async fn registration_refuses_metadata_it_cannot_honour_and_takes_a_device_only_client() {
    let server = TestServer::start().await;
    let refused = [
        (
            serde_json::json!({"redirect_uris": ["https://h.example/cb"], "token_endpoint_auth_method": "client_secret_basic"}),
            "invalid_client_metadata",
        ),
        (
            serde_json::json!({"redirect_uris": ["http://h.example/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            serde_json::json!({"client_name": "no redirect"}),
            "invalid_redirect_uri",
        ),
        (
            serde_json::json!({"redirect_uris": ["https://h.example/cb"], "grant_types": ["client_credentials"]}),
            "invalid_client_metadata",
        ),
        (
            serde_json::json!({"redirect_uris": "https://h.example/cb"}),
            "invalid_client_metadata",
        ),
    ];
    for (metadata, error) in refused {
        let (status, answer) = register(&server, &metadata).await;
        assert_eq!(
            (status, answer["error"].as_str()),
            (400, Some(error)),
            "{metadata}"
        );
        assert!(
            answer["error_description"]
                .as_str()
                .is_some_and(|d| !d.is_empty())
        );
    }

    let device_only = serde_json::json!({"grant_types": [
        "urn:ietf:params:oauth:grant-type:device_code", "refresh_token"]});
    let (status, registered) = register(&server, &device_only).await;
    assert_eq!(status, 201, "{registered}");
    let client_id = registered["client_id"].as_str().unwrap();
    let started = reqwest::Client::new()
        .post(format!("{}/api/auth/device/code", server.base_url()))
        .form(&[
            ("client_id", client_id),
            ("resource", &Resource::Agent.identifier(server.base_url())),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(
        started.status(),
        200,
        "the registered client starts a device grant"
    );
}

#[tokio::test]
async fn an_operator_may_close_registration() {
    let server = TestServer::start_with(|config| config.client_registration(false)).await;
    let url = format!(
        "{}/.well-known/oauth-authorization-server",
        server.base_url()
    );
    let metadata: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    assert!(
        metadata.get("registration_endpoint").is_none(),
        "{metadata}"
    );
    let (status, answer) = register(
        &server,
        &serde_json::json!({"redirect_uris": ["https://h.example/cb"]}),
    )
    .await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (403, Some("access_denied"))
    );
}
