//! Shared helpers of the workspace integration tests.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use intent_server::config::{Config, OAuthClient};
use serde_json::Value;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives one level below the workspace root")
        .to_path_buf()
}

/// `openapi.json`, parsed once.
pub fn openapi() -> &'static Value {
    static DOCUMENT: LazyLock<Value> = LazyLock::new(|| {
        let path = workspace_root().join("openapi.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
    });
    &DOCUMENT
}

/// Every operation of the document as `(method, path, operation)`, methods in upper case.
pub fn operations() -> Vec<(String, &'static str, &'static Value)> {
    let paths = openapi()["paths"].as_object().expect("paths is an object");
    paths
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .into_iter()
                .flatten()
                .filter(|(method, _)| {
                    ["get", "put", "post", "delete", "patch"].contains(&method.as_str())
                })
                .map(move |(method, op)| (method.to_uppercase(), path.as_str(), op))
        })
        .collect()
}

/// Follows a local `$ref` (`#/components/...`) once; other values are returned as they are.
pub fn resolve(value: &'static Value) -> &'static Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(reference) => openapi()
            .pointer(reference.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("dangling $ref {reference}")),
        None => value,
    }
}

/// The OAuth client every test server registers.
pub const TEST_CLIENT: &str = "intent-tests";

/// The one redirect URI of [`TEST_CLIENT`]; nothing listens there, tests read the redirect.
pub const TEST_REDIRECT_URI: &str = "http://127.0.0.1:9/callback";

/// A reference server on a free loopback port, with its own data dir, for one test.
pub struct TestServer {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// The server's state, to mint tokens.
    pub state: intent_server::AppState,
    /// The data dir; removed when the server is dropped.
    pub data_dir: tempfile::TempDir,
}

impl TestServer {
    /// Starts a server on `127.0.0.1:0` with a new data dir, [`TEST_CLIENT`] registered at
    /// [`TEST_REDIRECT_URI`], and a one-second device poll interval.
    pub async fn start() -> Self {
        Self::start_with(|config| config).await
    }

    /// Starts a server like [`TestServer::start`], with `configure` applied to its config.
    pub async fn start_with(configure: impl FnOnce(Config) -> Config) -> Self {
        let data_dir = tempfile::tempdir().expect("a temporary data dir");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("a bound address"));
        let client = OAuthClient {
            id: TEST_CLIENT.to_owned(),
            redirect_uris: vec![TEST_REDIRECT_URI.to_owned()],
        };
        let config = Config::new(data_dir.path())
            .client(client)
            .device_poll_interval(std::time::Duration::from_secs(1));
        let config = configure(config);
        let state = intent_server::AppState::open(config, &base)
            .await
            .expect("the server opens its data dir");
        tokio::spawn(intent_server::serve(listener, state.clone()));
        Self {
            base,
            state,
            data_dir,
        }
    }

    /// An access token for `account` on `resource` with `scopes`, valid for an hour.
    pub fn token(
        &self,
        account: &str,
        resource: intent_server::resource::Resource,
        scopes: &[&str],
    ) -> String {
        self.state.mint_access_token(&intent_server::token::Grant {
            account: account.to_owned(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            resource: resource.identifier(&self.base),
            client_id: "intent-tests".to_owned(),
            ttl: std::time::Duration::from_secs(3600),
        })
    }

    /// `GET path` with `token` as the bearer.
    pub async fn get(&self, path: &str, token: &str) -> reqwest::Response {
        let request = reqwest::Client::new()
            .get(format!("{}{path}", self.base))
            .bearer_auth(token);
        request.send().await.expect("the test server answers")
    }

    /// A generated client that sends `token` as its bearer.
    pub fn client(&self, token: &str) -> intent_sdk::Client {
        let mut headers = reqwest::header::HeaderMap::new();
        let value = format!("Bearer {token}")
            .parse()
            .expect("a token is a valid header value");
        headers.insert(reqwest::header::AUTHORIZATION, value);
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .expect("a reqwest client");
        intent_sdk::Client::new_with_client(&self.base, http)
    }
}

/// Fills in a consent or device page as a browser does: GETs `page` for its CSRF cookie and
/// hidden token, then POSTs `fields` with both to `action`. Redirects are not followed.
pub async fn submit_page(
    page: &str,
    action: &str,
    fields: &[(String, String)],
) -> reqwest::Response {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a reqwest client");
    let shown = http.get(page).send().await.expect("the page answers");
    assert_eq!(shown.status(), 200, "GET {page}");
    let cookie = shown.headers()[reqwest::header::SET_COOKIE]
        .to_str()
        .expect("a cookie is text")
        .split(';')
        .next()
        .expect("a cookie has a value")
        .to_owned();
    let html = shown.text().await.expect("the page reads");
    let marker = "name=\"csrf\" value=\"";
    let start = html.find(marker).expect("the form carries a CSRF token") + marker.len();
    let token = &html[start..start + html[start..].find('"').expect("a closed attribute")];
    let mut form = fields.to_vec();
    form.push(("csrf".to_owned(), token.to_owned()));
    http.post(action)
        .header(reqwest::header::COOKIE, cookie)
        .form(&form)
        .send()
        .await
        .expect("the form is answered")
}
