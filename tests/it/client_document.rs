//! Client ID Metadata Documents: a host whose client id is the `https` URL of its metadata
//! document signs in without registering, the document fetched over real TLS (a test CA in
//! tests/fixtures/tls) from a host the operator allowed; what the guard refuses, it refuses
//! before fetching.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use intent_server::auth::resource::Resource;
use intent_tests::{TEST_REDIRECT_URI, TestServer, submit_page};
use oauth2::PkceCodeChallenge;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::oauth::{no_redirects, param, redirect_query};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/tls")
        .join(name)
}

/// An HTTPS server on loopback, `localhost` by its certificate, answering each path with the
/// JSON it was given (404 else) and counting the requests.
struct DocumentHost {
    port: u16,
    documents: Arc<Mutex<HashMap<String, Value>>>,
    fetches: Arc<AtomicUsize>,
}

impl DocumentHost {
    async fn start() -> Self {
        let certs = CertificateDer::pem_file_iter(fixture("localhost.pem"))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(fixture("localhost.key")).unwrap();
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let documents: Arc<Mutex<HashMap<String, Value>>> = Arc::default();
        let fetches = Arc::new(AtomicUsize::new(0));
        let (served, counted) = (Arc::clone(&documents), Arc::clone(&fetches));
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, served, counted) =
                    (acceptor.clone(), Arc::clone(&served), Arc::clone(&counted));
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut request = Vec::new();
                    let mut buffer = [0; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tls.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buffer[..n]),
                        }
                    }
                    counted.fetch_add(1, Ordering::SeqCst);
                    let line = String::from_utf8_lossy(&request);
                    let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
                    let document = served.lock().unwrap().get(&path).cloned();
                    let (status, body) = match document {
                        Some(document) => ("200 OK", document.to_string()),
                        None => ("404 Not Found", "{}".to_owned()),
                    };
                    let answer = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = tls.write_all(answer.as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        Self {
            port,
            documents,
            fetches,
        }
    }

    /// Serves `document` at `path`; the client id that names it.
    fn serve(&self, path: &str, document: impl FnOnce(&str) -> Value) -> String {
        let id = format!("https://localhost:{}{path}", self.port);
        let document = document(&id);
        self.documents
            .lock()
            .unwrap()
            .insert(path.to_owned(), document);
        id
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

/// A server that fetches documents from `localhost`, trusting the test CA.
async fn server_allowing_localhost() -> TestServer {
    TestServer::start_with(|config| {
        config.client_metadata(true, vec!["localhost".into()], Some(fixture("ca.pem")))
    })
    .await
}

/// The authorization request of `client_id` to `redirect_uri`, and its PKCE verifier.
fn authorize_url(
    server: &TestServer,
    client_id: &str,
    redirect_uri: &str,
) -> (reqwest::Url, Vec<(String, String)>, String) {
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let params: Vec<(String, String)> = [
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect_uri),
        ("scope", "account:apps:read"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("resource", &Resource::Account.identifier(server.base_url())),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let url = format!("{}/api/auth/oauth2/authorize", server.base_url());
    let url = reqwest::Url::parse_with_params(&url, &params).unwrap();
    (url, params, verifier.secret().clone())
}

/// The status and text of the consent page for `client_id`.
async fn page(server: &TestServer, client_id: &str, redirect_uri: &str) -> (u16, String) {
    let (url, _, _) = authorize_url(server, client_id, redirect_uri);
    let response = no_redirects().get(url).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn app(id: &str) -> Value {
    json!({
        "client_id": id,
        "client_name": "Document App",
        "redirect_uris": [TEST_REDIRECT_URI],
        "token_endpoint_auth_method": "none",
    })
}

#[tokio::test]
async fn a_host_described_by_its_document_signs_in_without_registering() {
    let host = DocumentHost::start().await;
    let id = host.serve("/oauth/client.json", app);
    let server = server_allowing_localhost().await;
    let url = format!(
        "{}/.well-known/oauth-authorization-server",
        server.base_url()
    );
    let metadata: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    assert_eq!(metadata["client_id_metadata_document_supported"], true);

    let (status, text) = page(&server, &id, TEST_REDIRECT_URI).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains(&format!("Document App (described by localhost at {id})")),
        "the page names the host serving the document: {text}"
    );

    let (url, mut form, verifier) = authorize_url(&server, &id, TEST_REDIRECT_URI);
    form.push(("account".into(), "dora".into()));
    form.push(("decision".into(), "approve".into()));
    let response = submit_page(url.as_str(), url.as_str(), &form).await;
    let code = param(&redirect_query(&response), "code")
        .unwrap()
        .to_owned();
    let answer: Value = reqwest::Client::new()
        .post(format!("{}/api/auth/oauth2/token", server.base_url()))
        .form(&[
            ("grant_type", "authorization_code"),
            ("client_id", id.as_str()),
            ("code", code.as_str()),
            ("redirect_uri", TEST_REDIRECT_URI),
            ("code_verifier", verifier.as_str()),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(answer["access_token"].is_string(), "{answer}");
    assert_eq!(
        host.fetches(),
        1,
        "the document is kept between the page, the decision and the token"
    );

    // The document's redirect URIs bind the client: another one is refused on the page.
    let (status, text) = page(&server, &id, "http://127.0.0.1:9/elsewhere").await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("is not registered for this client"), "{text}");
}

#[tokio::test]
async fn a_document_that_does_not_describe_its_client_is_refused_saying_why() {
    let host = DocumentHost::start().await;
    let server = server_allowing_localhost().await;
    let cases = [
        (
            host.serve("/other.json", |_| app("https://elsewhere.example/c.json")),
            "not its own URL",
        ),
        (
            host.serve("/secret.json", |id| {
                let mut document = app(id);
                document["client_secret"] = json!("s3cret");
                document
            }),
            "client_secret",
        ),
        (
            host.serve("/plain-http.json", |id| {
                let mut document = app(id);
                document["redirect_uris"] = json!(["http://app.example/cb"]);
                document
            }),
            "redirect URI",
        ),
        (
            format!("https://localhost:{}/missing.json", host.port),
            "answered 404",
        ),
    ];
    for (id, why) in cases {
        let (status, text) = page(&server, &id, TEST_REDIRECT_URI).await;
        assert_eq!(status, 400, "{id}: {text}");
        assert!(text.contains(why), "{id} should say {why:?}: {text}");
    }
    // A token request from such a client is invalid_client.
    let response = reqwest::Client::new()
        .post(format!("{}/api/auth/oauth2/token", server.base_url()))
        .form(&[
            ("grant_type", "authorization_code"),
            (
                "client_id",
                &format!("https://localhost:{}/missing.json", host.port),
            ),
            ("code", "c"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["error"], "invalid_client", "{answer}");
    let told = answer["error_description"].as_str().unwrap_or_default();
    assert!(
        told.contains("answered 404"),
        "the token endpoint says why: {answer}"
    );
}

#[tokio::test]
async fn no_document_is_fetched_from_an_address_the_operator_did_not_allow() {
    let host = DocumentHost::start().await;
    let id = host.serve("/oauth/client.json", app);
    // The default: public addresses only; localhost resolves to loopback.
    let server = TestServer::start_with(|config| {
        config.client_metadata(true, Vec::new(), Some(fixture("ca.pem")))
    })
    .await;
    let (status, text) = page(&server, &id, TEST_REDIRECT_URI).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("no public address"), "{text}");
    let literal = format!("https://127.0.0.1:{}/oauth/client.json", host.port);
    let (status, text) = page(&server, &literal, TEST_REDIRECT_URI).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("127.0.0.1 is not a public address"), "{text}");
    assert_eq!(host.fetches(), 0, "nothing reached the document host");

    // With documents off, such a client id is unknown, and the metadata says nothing of them.
    let off =
        TestServer::start_with(|config| config.client_metadata(false, Vec::new(), None)).await;
    let (status, text) = page(&off, &id, TEST_REDIRECT_URI).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("Unknown client"), "{text}");
    let url = format!("{}/.well-known/oauth-authorization-server", off.base_url());
    let metadata: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    assert!(
        metadata
            .get("client_id_metadata_document_supported")
            .is_none()
    );
    assert_eq!(host.fetches(), 0);
}
