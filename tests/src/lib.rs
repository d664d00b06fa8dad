//! Shared helpers of the workspace integration tests.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use intent_models::openapi::Document;
use serde_json::Value;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives one level below the workspace root")
        .to_path_buf()
}

/// `openapi.json`, read once.
pub fn document() -> &'static Document {
    static DOCUMENT: LazyLock<Document> = LazyLock::new(|| {
        let path = workspace_root().join("openapi.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        Document::parse(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
    });
    &DOCUMENT
}

/// `openapi.json` as JSON.
pub fn openapi() -> &'static Value {
    document().value()
}

/// Every operation of the document as `(method, path, operation)`, methods in upper case.
pub fn operations() -> Vec<(String, &'static str, &'static Value)> {
    let operations = document().operations().iter();
    operations
        .map(|op| (op.method.clone(), op.template.as_str(), &op.object))
        .collect()
}

/// Follows local `$ref`s (`#/components/...`); other values are returned as they are.
pub fn resolve(value: &'static Value) -> &'static Value {
    document().resolve(value)
}

pub use intent_testkit::{TEST_CLIENT, TEST_REDIRECT_URI, TestServer};

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
