//! Fetching JSON from a URL a client names (a client metadata document), guarded against
//! reaching what the operator has not exposed:
//! - it connects only to public addresses, checked on the addresses it connects to (so a name
//!   that resolves elsewhere on a second look gains nothing), unless the operator allowed the
//!   host ([`Config::client_metadata_hosts`]); no proxy, no redirect followed;
//! - it reads at most [`MAX_BYTES`] of `application/json` within [`TIMEOUT`], and keeps what it
//!   read for [`KEPT`].

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

use crate::config::Config;

/// How long a fetched body is used before it is fetched again.
pub const KEPT: Duration = Duration::from_secs(300);
/// The largest body read, in bytes (the client metadata draft's suggested bound).
pub const MAX_BYTES: usize = 5 * 1024;
/// How long one fetch may take, connection included.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// The most bodies kept at once; past it, the kept ones are dropped.
const MAX_KEPT: usize = 1000;

/// The guarded fetcher, with the bodies it fetched lately. Its HTTP client, which loads the
/// system's roots, is built at the first fetch rather than at every start; the operator's roots
/// are read at the start, so that a bad file stops it.
pub struct Fetcher {
    roots: Vec<reqwest::Certificate>,
    http: OnceLock<Result<reqwest::Client, String>>,
    allowed: Arc<[String]>,
    kept: Mutex<HashMap<Url, Kept>>,
}

/// A body, and when it was fetched.
type Kept = (Instant, Arc<[u8]>);

/// Why the server could not set up its fetcher.
#[derive(Debug, thiserror::Error)]
#[error("the client metadata roots {path}: {reason}")]
pub struct RootsError {
    path: std::path::PathBuf,
    reason: String,
}

impl Fetcher {
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
        let roots = match &config.client_metadata_roots {
            None => Vec::new(),
            Some(path) => {
                let error = |reason: String| RootsError {
                    path: path.clone(),
                    reason,
                };
                let pem = std::fs::read(path).map_err(|e| error(e.to_string()))?;
                reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| error(e.to_string()))?
            }
        };
        Ok(Some(Self {
            roots,
            http: OnceLock::new(),
            allowed,
            kept: Mutex::new(HashMap::new()),
        }))
    }

    /// The HTTP client: no redirect followed, no proxy, the guarded resolver, the extra roots.
    fn http(&self) -> Result<&reqwest::Client, String> {
        let built = self.http.get_or_init(|| {
            reqwest::Client::builder()
                .timeout(TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .pool_max_idle_per_host(0)
                .dns_resolver(Guarded(Arc::clone(&self.allowed)))
                .tls_certs_merge(self.roots.iter().cloned())
                .build()
                .map_err(|error| format!("could not be fetched: {}", causes(&error)))
        });
        built.as_ref().map_err(Clone::clone)
    }

    /// The JSON body at `url`, fetched unless kept; the error says why there is none, for the
    /// developer of the client that named it.
    pub async fn json(&self, url: &Url) -> Result<Arc<[u8]>, String> {
        if let Some((at, body)) = self.kept.lock().unwrap().get(url)
            && at.elapsed() < KEPT
        {
            return Ok(Arc::clone(body));
        }
        let body: Arc<[u8]> = self.get(url).await?.into();
        let mut kept = self.kept.lock().unwrap();
        kept.retain(|_, (at, _)| at.elapsed() < KEPT);
        if kept.len() >= MAX_KEPT {
            kept.clear();
        }
        kept.insert(url.clone(), (Instant::now(), Arc::clone(&body)));
        Ok(body)
    }

    async fn get(&self, url: &Url) -> Result<Vec<u8>, String> {
        if let Some(ip) = literal(url)
            && !self.allowed(url)
            && !public(ip)
        {
            return Err(format!("{ip} is not a public address"));
        }
        let mut response = self
            .http()?
            .get(url.clone())
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
        if response
            .content_length()
            .is_some_and(|length| length > MAX_BYTES as u64)
        {
            return Err(format!("is larger than {MAX_BYTES} bytes"));
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
        Ok(body)
    }

    fn allowed(&self, url: &Url) -> bool {
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        self.allowed.contains(&host)
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
/// shared, documentation, benchmarking, multicast, reserved or unspecified. An IPv6 address is
/// public only within global unicast (2000::/3), outside the IETF's special blocks there and
/// the transition prefixes that can embed an IPv4 address (6to4, Teredo); NAT64's 64:ff9b::/96
/// and the IPv4-compatible ::/96 lie outside 2000::/3.
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
            let [first, second, ..] = ip.segments();
            let global_unicast = (first & 0xe000) == 0x2000;
            // 2001::/23 (Teredo among them) and 2001:db8::/32 (documentation); 6to4; 3fff::/20
            // (documentation).
            let special = (first == 0x2001 && (second < 0x0200 || second == 0x0db8))
                || first == 0x2002
                || first == 0x3fff;
            global_unicast && !special
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
                // The addresses stay unsaid: the error reaches whoever named the host.
                return Err(format!(
                    "{host} resolves to no public address; the operator may allow it with \
                     --client-metadata-host"
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
    fn a_roots_file_that_holds_no_certificate_stops_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let not_pem = dir.path().join("roots.pem");
        std::fs::write(&not_pem, "-----BEGIN CERTIFICATE-----\nnot base64\n").unwrap();
        for path in [dir.path().join("missing.pem"), not_pem] {
            let mut config = Config::new(dir.path());
            config.client_metadata_roots = Some(path.clone());
            let refused = Fetcher::from_config(&config).err().expect("refused");
            assert!(
                refused.to_string().contains(&path.display().to_string()),
                "{refused}"
            );
        }
        assert!(
            Fetcher::from_config(&Config::new(dir.path()))
                .unwrap()
                .is_some()
        );
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
            "64:ff9b::a00:5",
            "64:ff9b:1::1",
            "::10.0.0.5",
            "fec0::1",
            "100::1",
            "2001::1",
            "2001:2::1",
            "2001:db8::1",
            "2002:a00:5::1",
            "3fff::1",
        ] {
            assert!(!public(private.parse().unwrap()), "{private}");
        }
        for open in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(public(open.parse().unwrap()), "{open}");
        }
    }
}
