//! Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, which MCP
//! authorization recommends from revision 2025-11-25): a client whose id is an `https` URL is
//! described by the JSON document at that URL, so that a host never registered here signs in
//! without registering. The document is fetched by the guarded [`Fetcher`] when the client asks;
//! its URL is `https`, with a path, and without userinfo, query, fragment or dot segments; it
//! names its own URL as `client_id`, holds no secret, and its redirect URIs and grant types hold
//! as a registration's must.

use serde::Deserialize;
use url::Url;

use super::register::{Metadata, checked};
use crate::fetch::Fetcher;

/// A client a metadata document describes: what the authorization server uses of it.
#[derive(Debug)]
pub struct Described {
    pub redirect_uris: Vec<String>,
    /// The name the document gives (empty when none).
    pub client_name: String,
    /// The host that served the document.
    pub host: String,
}

/// Whether `client_id` names a metadata document (an `https` URL), to be described by it.
pub fn names_a_document(client_id: &str) -> bool {
    client_id.starts_with("https://")
}

/// The client the document at `client_id` describes; the error says why it describes none, for
/// the client's developer.
pub async fn describe(fetcher: &Fetcher, client_id: &str) -> Result<Described, String> {
    let url = document_url(client_id)?;
    let body = fetcher.json(&url).await?;
    described(client_id, url.host_str().unwrap_or_default(), &body)
}

/// The members of a document beside the client metadata.
#[derive(Deserialize)]
struct Document {
    client_id: String,
    client_secret: Option<serde_json::Value>,
    #[serde(flatten)]
    metadata: Metadata,
}

/// The client `body`, the document fetched from `client_id` on `host`, describes.
fn described(client_id: &str, host: &str, body: &[u8]) -> Result<Described, String> {
    let document: Document =
        serde_json::from_slice(body).map_err(|error| format!("is not client metadata: {error}"))?;
    if document.client_id != client_id {
        return Err(format!(
            "names client_id {:?}, not its own URL",
            document.client_id
        ));
    }
    if document.client_secret.is_some() {
        return Err("holds a client_secret: a document describes a public client".into());
    }
    checked(&document.metadata).map_err(|error| error.description)?;
    Ok(Described {
        redirect_uris: document.metadata.redirect_uris,
        client_name: document.metadata.client_name.unwrap_or_default(),
        host: host.to_owned(),
    })
}

/// `client_id` as the URL of a document, if it may be one.
fn document_url(client_id: &str) -> Result<Url, String> {
    let url = Url::parse(client_id).map_err(|error| format!("is not a URL: {error}"))?;
    let path = url.path();
    let refusal = if url.scheme() != "https" {
        Some("is not https")
    } else if path.is_empty() || path == "/" {
        Some("has no path")
    } else if !url.username().is_empty() || url.password().is_some() {
        Some("holds credentials")
    } else if url.query().is_some() || url.fragment().is_some() {
        Some("has a query or a fragment")
    } else if url.as_str() != client_id
        || path
            .split('/')
            .any(|segment| segment == "." || segment == "..")
    {
        Some("is not in its plain form (dot segments, case, escapes)")
    } else {
        None
    };
    match refusal {
        Some(why) => Err(why.into()),
        None => Ok(url),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_url_is_plain_https_with_a_path() {
        assert!(document_url("https://app.example/oauth/client.json").is_ok());
        for bad in [
            "http://app.example/client.json",
            "https://app.example",
            "https://app.example/",
            "https://user:pw@app.example/c.json",
            "https://app.example/c.json?x=1",
            "https://app.example/c.json#f",
            "https://app.example/a/../c.json",
            "https://APP.example/c.json",
        ] {
            assert!(document_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_document_must_name_itself_and_hold_no_secret() {
        let id = "https://app.example/client.json";
        let document = |extra: &str| {
            format!(
                r#"{{"client_id":"{id}","client_name":"App","redirect_uris":["http://127.0.0.1/cb"]{extra}}}"#
            )
        };
        let described = |id, body: String| described(id, "app.example", body.as_bytes());
        let app = described(id, document("")).unwrap();
        assert_eq!(app.client_name, "App");
        assert_eq!(app.redirect_uris, ["http://127.0.0.1/cb"]);
        let secret = described(id, document(r#","client_secret":"s""#));
        assert!(secret.unwrap_err().contains("client_secret"));
        let other = described("https://app.example/other.json", document(""));
        assert!(other.unwrap_err().contains("not its own URL"));
        let method = described(
            id,
            document(r#","token_endpoint_auth_method":"client_secret_basic""#),
        );
        assert!(method.unwrap_err().contains("token_endpoint_auth_method"));
        let redirect =
            format!(r#"{{"client_id":"{id}","redirect_uris":["http://app.example/cb"]}}"#);
        assert!(described(id, redirect).is_err());
    }
}
