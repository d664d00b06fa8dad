//! Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, which MCP
//! authorization recommends from revision 2025-11-25): a client whose id is an `https` URL is
//! described by the JSON document at that URL, so that a host never registered here signs in
//! without registering. The document is fetched when the client first asks, and kept for
//! [`KEPT`]. The fetch is guarded against reaching what the operator has not exposed:
//! - the URL is `https`, with a path, and without userinfo, query, fragment or dot segments;
//! - it connects only to public addresses, checked on the addresses it connects to (so a name
//!   that resolves elsewhere on a second look gains nothing), unless the operator allowed the
//!   host ([`Config::client_metadata_hosts`]); no proxy, no redirect followed;
//! - it reads at most [`MAX_BYTES`] within [`TIMEOUT`];
//! - the document names its own URL as `client_id`, holds no secret, and its redirect URIs and
//!   grant types hold as a registration's must.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use serde::Deserialize;
use url::{Host, Url};

use super::register::{Metadata, checked};
use crate::config::Config;

/// How long a fetched document is used before it is fetched again.
pub const KEPT: Duration = Duration::from_secs(300);
/// The largest document read, in bytes (the draft's suggested bound).
pub const MAX_BYTES: usize = 5 * 1024;
/// How long one fetch may take, connection included.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// The most documents kept at once; past it, the kept ones are dropped.
const MAX_KEPT: usize = 1000;

/// A client a metadata document describes: what the authorization server uses of it.
#[derive(Debug, Clone)]
pub struct Described {
    pub redirect_uris: Vec<String>,
    /// The name the document gives (empty when none).
    pub client_name: String,
}

/// The fetcher of client metadata documents, with the ones it fetched lately.
pub struct Documents {
    http: reqwest::Client,
    allowed: Arc<[String]>,
    kept: Mutex<HashMap<String, (Instant, Described)>>,
}

/// Why the server could not set up its fetcher.
#[derive(Debug, thiserror::Error)]
#[error("the client metadata roots {path}: {reason}")]
pub struct RootsError {
    path: std::path::PathBuf,
    reason: String,
}

impl Documents {
    /// The fetcher `config` asks for; `None` when client metadata documents are off.
    pub fn from_config(config: &Config) -> Result<Option<Self>, RootsError> {
        if !config.client_metadata_documents {
            return Ok(None);
        }
        let allowed: Arc<[String]> = config
            .client_metadata_hosts
            .iter()
            .map(|host| host.to_ascii_lowercase())
            .collect();
        let mut builder = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .pool_max_idle_per_host(0)
            .dns_resolver(Guarded(Arc::clone(&allowed)));
        if let Some(path) = &config.client_metadata_roots {
            let error = |reason: String| RootsError {
                path: path.clone(),
                reason,
            };
            let pem = std::fs::read(path).map_err(|e| error(e.to_string()))?;
            let roots =
                reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| error(e.to_string()))?;
            builder = builder.tls_certs_merge(roots);
        }
        let http = builder.build().map_err(|e| RootsError {
            path: config.client_metadata_roots.clone().unwrap_or_default(),
            reason: e.to_string(),
        })?;
        Ok(Some(Self {
            http,
            allowed,
            kept: Mutex::new(HashMap::new()),
        }))
    }

    /// Whether `client_id` names a metadata document (an `https` URL), to be described by it.
    pub fn names_a_document(client_id: &str) -> bool {
        client_id.starts_with("https://")
    }

    /// The client the document at `client_id` describes, fetched unless kept; the error says
    /// why it describes none, for the client's developer.
    pub async fn describe(&self, client_id: &str) -> Result<Described, String> {
        if let Some((at, described)) = self.kept.lock().unwrap().get(client_id)
            && at.elapsed() < KEPT
        {
            return Ok(described.clone());
        }
        let described = self.fetch(client_id).await?;
        let mut kept = self.kept.lock().unwrap();
        kept.retain(|_, (at, _)| at.elapsed() < KEPT);
        if kept.len() >= MAX_KEPT {
            kept.clear();
        }
        kept.insert(client_id.to_owned(), (Instant::now(), described.clone()));
        Ok(described)
    }

    async fn fetch(&self, client_id: &str) -> Result<Described, String> {
        let url = document_url(client_id)?;
        if let Some(ip) = literal(&url)
            && !self.allowed(&url)
            && !public(ip)
        {
            return Err(format!("{ip} is not a public address"));
        }
        let mut response = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|error| format!("could not be fetched: {}", causes(&error)))?;
        let status = response.status();
        if status != reqwest::StatusCode::OK {
            let redirect = if status.is_redirection() {
                " (redirects are not followed)"
            } else {
                ""
            };
            return Err(format!("answered {status}{redirect}, not 200"));
        }
        let kind = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|kind| kind.to_str().ok())
            .unwrap_or_default();
        let essence = kind.split(';').next().unwrap_or_default().trim();
        if essence != "application/json" && !essence.ends_with("+json") {
            return Err(format!("answered {kind:?}, not application/json"));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| format!("could not be read: {}", causes(&error)))?
        {
            if body.len() + chunk.len() > MAX_BYTES {
                return Err(format!("is larger than {MAX_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        described(client_id, &body)
    }

    fn allowed(&self, url: &Url) -> bool {
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        self.allowed.contains(&host)
    }
}

/// The members of a document beside the client metadata.
#[derive(Deserialize)]
struct Document {
    client_id: String,
    client_secret: Option<serde_json::Value>,
    #[serde(flatten)]
    metadata: Metadata,
}

/// The client `body`, the document fetched from `client_id`, describes.
fn described(client_id: &str, body: &[u8]) -> Result<Described, String> {
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

/// The address `url` names literally, if it names one.
fn literal(url: &Url) -> Option<IpAddr> {
    match url.host()? {
        Host::Ipv4(ip) => Some(ip.into()),
        Host::Ipv6(ip) => Some(ip.into()),
        Host::Domain(_) => None,
    }
}

/// Whether `ip` is an address of the public internet: not loopback, private, link-local,
/// shared, documentation, benchmarking, multicast, reserved or unspecified.
fn public(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(ip) => {
            let [a, b, c, _] = ip.octets();
            !(ip.is_private()
                || ip.is_loopback()
                || ip.is_link_local()
                || ip.is_broadcast()
                || ip.is_documentation()
                || ip.is_multicast()
                || ip.is_unspecified()
                || a == 0
                || a >= 240
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && c == 0)
                || (a == 198 && (18..20).contains(&b)))
        }
        IpAddr::V6(ip) => {
            let first = ip.segments()[0];
            !(ip.is_loopback()
                || ip.is_unspecified()
                || ip.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || first == 0x2001 && ip.segments()[1] == 0x0db8)
        }
    }
}

/// An error and its causes, as one line.
fn causes(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        line.push_str(": ");
        line.push_str(&cause.to_string());
        source = cause.source();
    }
    line
}

/// The fetcher's resolver: a name resolves to its public addresses only, or to all of them
/// when the operator allowed the host.
struct Guarded(Arc<[String]>);

impl Resolve for Guarded {
    fn resolve(&self, name: Name) -> Resolving {
        let allowed = self.0.contains(&name.as_str().to_ascii_lowercase());
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let permitted: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|address| allowed || public(address.ip()))
                .collect();
            if permitted.is_empty() {
                let found: Vec<IpAddr> = found.iter().map(SocketAddr::ip).collect();
                return Err(format!(
                    "{host} resolves to no public address ({found:?}); the operator may allow \
                     it with --client-metadata-host"
                )
                .into());
            }
            Ok(Box::new(permitted.into_iter()) as Addrs)
        })
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
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::",
        ] {
            assert!(!public(private.parse().unwrap()), "{private}");
        }
        for open in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(public(open.parse().unwrap()), "{open}");
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
        let app = described(id, document("").as_bytes()).unwrap();
        assert_eq!(app.client_name, "App");
        assert_eq!(app.redirect_uris, ["http://127.0.0.1/cb"]);
        let secret = described(id, document(r#","client_secret":"s""#).as_bytes());
        assert!(secret.unwrap_err().contains("client_secret"));
        let other = described("https://app.example/other.json", document("").as_bytes());
        assert!(other.unwrap_err().contains("not its own URL"));
        let method = described(
            id,
            document(r#","token_endpoint_auth_method":"client_secret_basic""#).as_bytes(),
        );
        assert!(method.unwrap_err().contains("token_endpoint_auth_method"));
        let redirect =
            format!(r#"{{"client_id":"{id}","redirect_uris":["http://app.example/cb"]}}"#);
        assert!(described(id, redirect.as_bytes()).is_err());
    }
}
