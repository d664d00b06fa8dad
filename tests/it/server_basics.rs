//! The reference server on a real loopback socket: health, the document it serves, and the
//! error envelope for everything it does not route.

use intent_models::schema::Schemas;
use intent_server::ids::AccountId;
use intent_tests::{TestServer, openapi};
use serde_json::Value;

#[tokio::test]
async fn healthz_answers_ok() {
    let server = TestServer::start().await;
    let response = reqwest::get(format!("{}/healthz", server.base_url()))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "ok");
}

#[tokio::test]
async fn serves_the_openapi_document_it_implements() {
    let server = TestServer::start().await;
    let response = reqwest::get(format!("{}/openapi.json", server.base_url()))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let served: Value = response.json().await.unwrap();
    assert_eq!(&served, openapi());
}

#[tokio::test]
async fn unrouted_paths_and_methods_answer_in_the_error_envelope() {
    let server = TestServer::start().await;
    let schemas = Schemas::from_openapi(openapi()).unwrap();
    let (envelope, detail) = (
        schemas.component("ErrorEnvelope").unwrap(),
        schemas.component("ErrorDetail").unwrap(),
    );
    let client = reqwest::Client::new();
    for (method, path, status, code) in [
        (reqwest::Method::GET, "/v1/nowhere", 404, "not_found"),
        (
            reqwest::Method::DELETE,
            "/healthz",
            405,
            "method_not_allowed",
        ),
    ] {
        let response = client
            .request(method.clone(), format!("{}{path}", server.base_url()))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{method} {path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            envelope.errors(&body),
            Vec::<String>::new(),
            "{method} {path}"
        );
        assert_eq!(
            detail.errors(&body["error"]),
            Vec::<String>::new(),
            "{method} {path}"
        );
        assert_eq!(body["error"]["code"], code, "{method} {path}");
    }
}

#[tokio::test]
async fn sdk_errors_classify_what_the_server_answers() {
    use intent_sdk::Error;
    use intent_server::auth::resource::Resource;
    let server = TestServer::start().await;

    let anonymous = intent_sdk::raw::Client::new(server.base_url(), Default::default());
    let error = Error::from(
        anonymous
            .get_session()
            .session_id("ses_missing")
            .send()
            .await
            .unwrap_err(),
    );
    assert!(matches!(error, Error::Unauthorized(_)), "{error:?}");
    assert_eq!(
        (error.status(), error.code()),
        (Some(401), Some("unauthorized"))
    );

    let narrow = server.client(&server.token("ann", Resource::Account, &["account:apps:read"]));
    let error = Error::from(narrow.get_statement().send().await.unwrap_err());
    assert!(
        matches!(error, Error::Forbidden { scope: Some(ref s), .. } if s == "account:usage:read"),
        "{error:?}"
    );

    let writer = server.client(&server.token("ann", Resource::Account, &["account:apps:write"]));
    let error = Error::from(
        writer
            .install_app()
            .application_id(99u64)
            .send()
            .await
            .unwrap_err(),
    );
    assert!(matches!(error, Error::NotFound(_)), "{error:?}");
    let error = Error::from(
        writer
            .install_app()
            .application_id(1u64)
            .send()
            .await
            .unwrap_err(),
    );
    assert!(matches!(error, Error::Api(_)), "{error:?}");
    assert_eq!(
        (error.status(), error.code()),
        (Some(422), Some("credentials_missing"))
    );

    let refused = Error::from(
        intent_sdk::raw::Client::new("http://127.0.0.1:9", Default::default())
            .list_account_apps()
            .send()
            .await
            .unwrap_err(),
    );
    assert!(matches!(refused, Error::Transport(_)), "{refused:?}");
}

/// Needs 1 to 2 s: the bucket refills one request a second, and the check is that a request
/// after the 429's `Retry-After` is admitted.
#[tokio::test]
async fn a_burst_over_the_rate_limit_gets_429_with_a_retry_after_that_honoured_succeeds() {
    use intent_server::auth::resource::Resource;
    use intent_server::config::RateLimit;
    let limit = RateLimit::parse("1:2").unwrap();
    let server = TestServer::start_with(|config| config.rate_limit(Some(limit))).await;
    let token = server.token("alice", Resource::Account, &["account:apps:read"]);
    let other = server.token("bob", Resource::Account, &["account:apps:read"]);
    for _ in 0..2 {
        assert_eq!(server.get("/v1/account/apps", &token).await.status(), 200);
    }
    let limited = server.get("/v1/account/apps", &token).await;
    assert_eq!(limited.status(), 429);
    let retry_after: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    let body: serde_json::Value = limited.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited");
    // Another account has its own bucket.
    assert_eq!(server.get("/v1/account/apps", &other).await.status(), 200);
    tokio::time::sleep(std::time::Duration::from_secs(retry_after)).await;
    assert_eq!(server.get("/v1/account/apps", &token).await.status(), 200);
}

/// Needs about 0.2 s: the clean-up runs every 200 ms here, and the test waits for the first run
/// after the rows are saved (up to 10 s on a busy machine), seen as the old device grant gone:
/// one clean-up removes everything in one transaction.
#[tokio::test]
async fn the_periodic_clean_up_removes_what_expired_and_keeps_the_rest() {
    use intent_server::store::{Authorization, AuthorizationCode, DeviceGrant, DeviceStatus};
    let server = TestServer::start_with(|config| {
        config.cleanup_interval(std::time::Duration::from_millis(200))
    })
    .await;
    let store = server.state().store();
    let now = intent_server::now();
    let grant = Authorization {
        client_id: "c".into(),
        account: "alice".into(),
        scopes: "agent:read".into(),
        resource: "r".into(),
    };
    let code = |expires_at| AuthorizationCode {
        grant: grant.clone(),
        redirect_uri: "http://127.0.0.1:9/callback".into(),
        code_challenge: "x".into(),
        expires_at,
    };
    // Expired two hours ago, and still valid.
    store
        .save_code("old-code", &code(now - 7200))
        .await
        .unwrap();
    store.save_code("new-code", &code(now + 600)).await.unwrap();
    let device = |user_code: &str, expires_at| DeviceGrant {
        user_code: user_code.into(),
        client_id: "c".into(),
        scopes: "agent:read".into(),
        resource: "r".into(),
        account: None,
        status: DeviceStatus::Pending,
        interval_secs: 5,
        last_poll_ms: None,
        expires_at,
    };
    store
        .save_device_grant("old-device", &device("OLD-CODE", now - 7200))
        .await
        .unwrap();
    store
        .save_device_grant("new-device", &device("NEW-CODE", now + 600))
        .await
        .unwrap();
    store
        .save_refresh_token("old-refresh", "old-family", &grant, now - 7200)
        .await
        .unwrap();
    store
        .save_refresh_token("new-refresh", "new-family", &grant, now + 600)
        .await
        .unwrap();
    store
        .begin_idempotent(
            &AccountId::verified("alice"),
            "old-key",
            "h",
            now - 2 * 24 * 3600,
            0,
        )
        .await
        .unwrap();
    store
        .begin_idempotent(&AccountId::verified("alice"), "new-key", "h", now, 0)
        .await
        .unwrap();

    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while store
        .device_grant_by_user_code("OLD-CODE")
        .await
        .unwrap()
        .is_some()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no clean-up ran within 10 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(store.take_code("old-code").await.unwrap().is_none());
    assert!(store.take_code("new-code").await.unwrap().is_some());
    assert!(
        store
            .device_grant_by_user_code("OLD-CODE")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .device_grant_by_user_code("NEW-CODE")
            .await
            .unwrap()
            .is_some()
    );
    let accept = |_: &Authorization, _: i64| false;
    assert!(matches!(
        store
            .use_refresh_token("old-refresh", &accept)
            .await
            .unwrap(),
        intent_server::store::RefreshUse::Unknown
    ));
    assert!(matches!(
        store
            .use_refresh_token("new-refresh", &accept)
            .await
            .unwrap(),
        intent_server::store::RefreshUse::Refused { .. }
    ));
    // The old key is free again; the new one is still in flight.
    let old = store
        .begin_idempotent(&AccountId::verified("alice"), "old-key", "other", now, 0)
        .await
        .unwrap();
    assert_eq!(old, intent_server::store::agent::IdempotencyBegin::Started);
    let new = store
        .begin_idempotent(&AccountId::verified("alice"), "new-key", "h", now, 0)
        .await
        .unwrap();
    assert_eq!(new, intent_server::store::agent::IdempotencyBegin::InFlight);
}

/// Bodies that break openapi.json's request schemas, with the token each operation takes: every
/// one is 400 `invalid_request` naming where it breaks, never echoing a value, and changes
/// nothing.
#[tokio::test]
async fn bodies_that_break_the_request_schemas_are_refused_with_400() {
    use intent_server::auth::resource::Resource;
    let server = TestServer::start().await;
    let pipeline = server.token("alice", Resource::Pipeline, &["pipeline:execute"]);
    let agent = server.token("alice", Resource::Agent, &["agent:read", "agent:write"]);
    let account = server.token("alice", Resource::Account, &["account:credentials:write"]);
    let secret = "s".repeat(4097);
    let build = serde_json::json!({
        "app": "evm-assets",
        "operations": [{ "operation": "native-transfer", "input": {} }],
    });
    let cases = [
        (
            "POST",
            "/v1/pipeline/evm/build",
            &pipeline,
            {
                let mut b = build.clone();
                b["simulate"] = Value::Null;
                b
            },
            "`/simulate` breaks `type`",
        ),
        (
            "POST",
            "/v1/pipeline/evm/build",
            &pipeline,
            {
                let mut b = build.clone();
                b["skills"] = 1.into();
                b
            },
            "`/skills` breaks `type`",
        ),
        (
            "POST",
            "/v1/agent/chat",
            &agent,
            serde_json::json!({ "message": "hi", "sessionId": 7 }),
            "`/sessionId` breaks `type`",
        ),
        (
            "POST",
            "/v1/agent/chat",
            &agent,
            serde_json::json!({}),
            "lacks the required property \"message\"",
        ),
        (
            "PATCH",
            "/v1/agent/sessions/ses_x",
            &agent,
            serde_json::json!({ "title": null }),
            "`/title` breaks `type`",
        ),
        (
            "PUT",
            "/v1/account/apps/1/secrets/API_KEY",
            &account,
            serde_json::json!({ "value": secret }),
            "`/value` breaks `maxLength`",
        ),
    ];
    let http = reqwest::Client::new();
    for (method, path, token, body, says) in cases {
        let response = http
            .request(
                method.parse().unwrap(),
                format!("{}{path}", server.base_url()),
            )
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        assert_eq!(status, 400, "{method} {path} {body}: {text}");
        let error: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(error["error"]["code"], "invalid_request", "{text}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{method} {path}: {message}");
        assert!(
            !text.contains(&secret[..64]),
            "the answer echoes the secret"
        );
    }
    // Nothing was written: no turn, build or simulation is billed, no credential saved.
    let usage = server.token("alice", Resource::Account, &["account:usage:read"]);
    let statement: Value = server
        .get("/v1/account/statement", &usage)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(statement["total"], "0.000", "{statement}");
    let read = server.token("alice", Resource::Account, &["account:credentials:read"]);
    let list: Value = server
        .get("/v1/account/apps/1/secrets", &read)
        .await
        .json()
        .await
        .unwrap();
    assert!(
        list["credentials"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["present"] == false),
        "{list}"
    );
}

#[tokio::test]
async fn every_answer_carries_a_request_id_and_a_given_one_is_kept() {
    let server = TestServer::start().await;
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    for path in ["/healthz", "/v1/agent/sessions/ses_1", "/nowhere"] {
        let response = client
            .get(format!("{}{path}", server.base_url()))
            .send()
            .await
            .unwrap();
        let id = response.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(id.starts_with("req_") && id.len() == 36, "{path}: {id}");
        ids.push(id);
    }
    ids.dedup();
    assert_eq!(ids.len(), 3, "each answer has its own id: {ids:?}");
    let given = client
        .get(format!("{}/healthz", server.base_url()))
        .header("x-request-id", "trace-42")
        .send()
        .await
        .unwrap();
    assert_eq!(given.headers()["x-request-id"], "trace-42");
}

#[tokio::test]
async fn every_file_of_the_data_dir_is_private_to_the_server() {
    use std::os::unix::fs::PermissionsExt;
    let server = TestServer::start().await;
    if server.database_url().is_some() {
        // The data files are SQLite's; PostgreSQL keeps its own.
        return;
    }
    // A write, so that SQLite has made its WAL and SHM files.
    let token = server.token(
        "private",
        intent_server::auth::resource::Resource::Agent,
        &["agent:write"],
    );
    let started = reqwest::Client::new()
        .post(format!("{}/v1/agent/chat", server.base_url()))
        .bearer_auth(token)
        .json(&serde_json::json!({ "message": "hello" }))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 202);
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    // The test kit made the directory; the server makes every file in it private.
    let mut files: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(server.data_dir()).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(mode(&path), 0o600, "{}", path.display());
        files.push(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    for name in ["intent.db", "intent.db-wal", "intent.db-shm"] {
        assert!(
            files.iter().any(|file| file == name),
            "{name} among {files:?}"
        );
    }
}
