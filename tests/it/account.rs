//! The Account area end to end through the generated client against the running server: apps,
//! credentials and the statement, per account, with every body valid against openapi.json and
//! no credential value ever echoed or stored in clear.

use intent_models::schema::Schemas;
use intent_server::auth::resource::Resource;
use intent_server::ids::AccountId;
use intent_tests::{TestServer, openapi};
use serde_json::{Value, json};

const SECRET: &str = "sk_live_do_not_leak_4242";

const ALL_ACCOUNT_SCOPES: &[&str] = &[
    "account:apps:read",
    "account:apps:write",
    "account:credentials:read",
    "account:credentials:write",
    "account:usage:read",
];

/// Status and JSON body of a raw request, for checks the typed client cannot make.
async fn raw(
    server: &TestServer,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<(&str, &str)>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", server.base_url()))
        .bearer_auth(token);
    if let Some((content_type, body)) = body {
        request = request
            .header("content-type", content_type)
            .body(body.to_owned());
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert!(!text.contains(SECRET), "{path} echoed the credential value");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn assert_valid(schema: &str, body: &Value) {
    let validator = Schemas::from_openapi(openapi())
        .unwrap()
        .component(schema)
        .unwrap();
    assert_eq!(
        validator.errors(body),
        Vec::<String>::new(),
        "{schema}: {body}"
    );
}

fn api_error(error: intent_sdk::raw::Error<intent_sdk::models::ErrorEnvelope>) -> (u16, Value) {
    let error = intent_sdk::Error::from(error);
    let response = error
        .response()
        .unwrap_or_else(|| panic!("expected an error response, got {error:?}"));
    (response.status, response.body.clone())
}

#[tokio::test]
async fn install_needs_its_required_credentials_and_state_is_per_account() {
    let server = TestServer::start().await;
    let alice = server.client(&server.token("alice", Resource::Account, ALL_ACCOUNT_SCOPES));
    let bob = server.client(&server.token("bob", Resource::Account, ALL_ACCOUNT_SCOPES));
    let price_feeds: std::num::NonZeroU64 = 1.try_into().unwrap();

    let apps = alice.list_account_apps().send().await.unwrap().into_inner();
    assert_eq!(apps.apps.len(), 3);
    assert!(
        apps.apps
            .iter()
            .all(|app| !app.installed && app.installed_at.is_none())
    );

    let (status, error) = api_error(
        alice
            .install_app()
            .application_id(price_feeds)
            .send()
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, error["code"].as_str()),
        (422, Some("credentials_missing"))
    );
    assert_eq!(error["details"]["missing"], json!(["API_KEY"]));

    let body: intent_sdk::models::CredentialValue = intent_sdk::models::CredentialValue::builder()
        .value(SECRET)
        .try_into()
        .unwrap();
    let saved = alice
        .save_credential()
        .application_id(price_feeds)
        .name("API_KEY")
        .body(body.clone())
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(saved.present);
    let installed = alice
        .install_app()
        .application_id(price_feeds)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(installed.installed);
    let again = alice
        .install_app()
        .application_id(price_feeds)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        again.installed_at, installed.installed_at,
        "install is idempotent"
    );

    let alice_apps = alice.list_account_apps().send().await.unwrap().into_inner();
    assert!(
        alice_apps
            .apps
            .iter()
            .any(|app| app.id.get() == 1 && app.installed)
    );
    let bob_apps = bob.list_account_apps().send().await.unwrap().into_inner();
    assert!(
        bob_apps.apps.iter().all(|app| !app.installed),
        "bob sees none of alice's installs"
    );
    let bob_credentials = bob
        .list_credentials()
        .application_id(price_feeds)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(
        bob_credentials.credentials.iter().all(|c| !c.present),
        "bob sees none of alice's credentials"
    );
    let (status, _) = api_error(
        bob.remove_credential()
            .application_id(price_feeds)
            .name("API_KEY")
            .send()
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 404, "another account's credential is absent to bob");

    let removed = alice
        .remove_credential()
        .application_id(price_feeds)
        .name("API_KEY")
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(!removed.present);
    let (status, _) = api_error(
        alice
            .remove_credential()
            .application_id(price_feeds)
            .name("API_KEY")
            .send()
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 404);
    let uninstalled = alice
        .uninstall_app()
        .application_id(price_feeds)
        .send()
        .await
        .unwrap()
        .into_inner();
    assert!(!uninstalled.installed && uninstalled.installed_at.is_none());
}

#[tokio::test]
async fn every_account_response_validates_against_openapi_json() {
    let server = TestServer::start().await;
    let token = server.token("carol", Resource::Account, ALL_ACCOUNT_SCOPES);
    use reqwest::Method;
    let secret_body = json!({ "value": SECRET }).to_string();
    let steps: [(Method, &str, Option<&str>, &str, u16); 8] = [
        (Method::GET, "/v1/account/apps", None, "AccountAppList", 200),
        (
            Method::GET,
            "/v1/account/apps/2/secrets",
            None,
            "CredentialList",
            200,
        ),
        (
            Method::PUT,
            "/v1/account/apps/2/secrets/API_KEY",
            Some(&secret_body),
            "CredentialChange",
            200,
        ),
        (
            Method::POST,
            "/v1/account/apps/2",
            None,
            "AppInstallation",
            200,
        ),
        (
            Method::GET,
            "/v1/account/apps/2/secrets",
            None,
            "CredentialList",
            200,
        ),
        (
            Method::DELETE,
            "/v1/account/apps/2/secrets/API_KEY",
            None,
            "CredentialChange",
            200,
        ),
        (
            Method::DELETE,
            "/v1/account/apps/2",
            None,
            "AppInstallation",
            200,
        ),
        (
            Method::GET,
            "/v1/account/statement?period=2026-11",
            None,
            "UsageStatement",
            200,
        ),
    ];
    for (method, path, body, schema, status) in steps {
        let body = body.map(|b| ("application/json", b));
        let (got, json) = raw(&server, &token, method.clone(), path, body).await;
        assert_eq!(got, status, "{method} {path}: {json}");
        assert_valid(schema, &json);
    }
}

#[tokio::test]
async fn the_statement_prices_every_meter_for_one_calendar_month() {
    let server = TestServer::start().await;
    let client = server.client(&server.token("dave", Resource::Account, &["account:usage:read"]));
    let statement = client
        .get_statement()
        .period("2026-11")
        .send()
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (statement.period.start, statement.period.end),
        (1_793_491_200, 1_796_083_200)
    );
    let meters: Vec<String> = statement
        .lines
        .iter()
        .map(|l| l.meter.to_string())
        .collect();
    assert_eq!(meters, ["turn", "build", "simulation", "commit"]);
    assert!(
        statement
            .lines
            .iter()
            .all(|line| line.quantity == 0 && line.amount.as_str() == "0.000")
    );
    assert_eq!(statement.total.as_str(), "0.000");
    assert_eq!(statement.lines[3].unit_price.as_str(), "0.020");
}

/// A refused request: method, path, optional (content type, body), expected status and code.
type BadInput<'a> = (
    reqwest::Method,
    String,
    Option<(&'a str, &'a str)>,
    u16,
    &'a str,
);

#[tokio::test]
async fn the_statement_prices_what_was_metered_for_the_caller_in_the_month() {
    use intent_server::store::Meter;
    let server = TestServer::start().await;
    let store = server.state().store();
    let november = 1_795_000_000; // 2026-11-19
    for meter in [
        Meter::Turn,
        Meter::Turn,
        Meter::Build,
        Meter::Simulation,
        Meter::Commit,
    ] {
        store
            .record_usage(&AccountId::verified("gina"), meter, november)
            .await
            .unwrap();
    }
    store
        .record_usage(&AccountId::verified("gina"), Meter::Turn, 1_796_083_200)
        .await
        .unwrap(); // December
    store
        .record_usage(&AccountId::verified("hank"), Meter::Commit, november)
        .await
        .unwrap(); // someone else
    let client = server.client(&server.token("gina", Resource::Account, &["account:usage:read"]));
    let statement = client
        .get_statement()
        .period("2026-11")
        .send()
        .await
        .unwrap()
        .into_inner();
    let lines: Vec<(String, i64, String)> = statement
        .lines
        .iter()
        .map(|l| (l.meter.to_string(), l.quantity, l.amount.to_string()))
        .collect();
    assert_eq!(
        lines,
        [
            ("turn".into(), 2, "0.020".into()),
            ("build".into(), 1, "0.002".into()),
            ("simulation".into(), 1, "0.001".into()),
            ("commit".into(), 1, "0.020".into()),
        ]
    );
    assert_eq!(statement.total.as_str(), "0.043");
}

#[tokio::test]
async fn bad_input_answers_400_413_or_415_in_the_envelope_and_writes_nothing() {
    let server = TestServer::start().await;
    let token = server.token("erin", Resource::Account, ALL_ACCOUNT_SCOPES);
    use reqwest::Method;
    let long_name = format!("/v1/account/apps/1/secrets/{}", "A".repeat(129));
    let huge = json!({ "value": "x".repeat(2 * 1024 * 1024) }).to_string();
    let cases: Vec<BadInput> = vec![
        (
            Method::POST,
            "/v1/account/apps/0".into(),
            None,
            400,
            "invalid_parameter",
        ),
        (
            Method::POST,
            "/v1/account/apps/abc".into(),
            None,
            400,
            "invalid_parameter",
        ),
        (
            Method::GET,
            "/v1/account/apps/-3/secrets".into(),
            None,
            400,
            "invalid_parameter",
        ),
        (
            Method::POST,
            "/v1/account/apps/99".into(),
            None,
            404,
            "not_found",
        ),
        (
            Method::DELETE,
            "/v1/account/apps/1/secrets/1BAD".into(),
            None,
            400,
            "invalid_parameter",
        ),
        (Method::DELETE, long_name, None, 400, "invalid_parameter"),
        (
            Method::PUT,
            "/v1/account/apps/1/secrets/NOT_DECLARED".into(),
            Some(("application/json", r#"{"value":"v"}"#)),
            404,
            "not_found",
        ),
        (
            Method::PUT,
            "/v1/account/apps/1/secrets/API_KEY".into(),
            Some(("application/json", "{not json")),
            400,
            "invalid_request",
        ),
        (
            Method::PUT,
            "/v1/account/apps/1/secrets/API_KEY".into(),
            Some(("application/json", r#"{"value":""}"#)),
            400,
            "invalid_request",
        ),
        (
            Method::PUT,
            "/v1/account/apps/1/secrets/API_KEY".into(),
            Some(("application/json", r#"{"value":"v","extra":1}"#)),
            400,
            "invalid_request",
        ),
        (
            Method::PUT,
            "/v1/account/apps/1/secrets/API_KEY".into(),
            Some(("text/plain", SECRET)),
            415,
            "unsupported_media_type",
        ),
        (
            Method::PUT,
            "/v1/account/apps/1/secrets/API_KEY".into(),
            Some(("application/json", &huge)),
            413,
            "payload_too_large",
        ),
        (
            Method::GET,
            "/v1/account/statement?period=2026-13".into(),
            None,
            400,
            "invalid_parameter",
        ),
    ];
    for (method, path, body, status, code) in cases {
        let (got, json) = raw(&server, &token, method.clone(), &path, body).await;
        assert_eq!(
            (got, json["error"]["code"].as_str()),
            (status, Some(code)),
            "{method} {path}: {json}"
        );
        assert_valid("ErrorEnvelope", &json);
    }
    let (_, credentials) = raw(
        &server,
        &token,
        Method::GET,
        "/v1/account/apps/1/secrets",
        None,
    )
    .await;
    assert_eq!(
        credentials["credentials"][0]["present"], false,
        "no bad request wrote a credential"
    );
}

#[tokio::test]
async fn credential_values_are_not_stored_in_clear() {
    let server = TestServer::start().await;
    let client = server.client(&server.token("frank", Resource::Account, ALL_ACCOUNT_SCOPES));
    let body: intent_sdk::models::CredentialValue = intent_sdk::models::CredentialValue::builder()
        .value(SECRET)
        .try_into()
        .unwrap();
    client
        .save_credential()
        .application_id(1u64)
        .name("API_KEY")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    let mut found = Vec::new();
    for entry in std::fs::read_dir(server.data_dir()).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        if bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()) {
            found.push(path);
        }
    }
    assert!(found.is_empty(), "the clear value is in {found:?}");
}
