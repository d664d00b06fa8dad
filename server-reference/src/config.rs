//! Server configuration.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

/// A registered OAuth client. Clients are public (no secret) and prove possession with PKCE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthClient {
    /// The client id.
    pub id: String,
    /// Redirect URIs, matched exactly; empty for device-only clients.
    pub redirect_uris: Vec<String>,
}

impl OAuthClient {
    /// Parses `ID` or `ID=URI[,URI...]`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (id, uris) = text.split_once('=').unwrap_or((text, ""));
        if id.is_empty() {
            return Err(format!("client {text:?} has no id"));
        }
        let redirect_uris = uris
            .split(',')
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(Self {
            id: id.to_owned(),
            redirect_uris,
        })
    }
}

/// How the server runs. Build it with [`Config::new`] and the chainable setters.
#[derive(Debug, Clone)]
pub struct Config {
    /// Directory of the keys and, without a database URL, of the SQLite database; created when
    /// missing.
    pub data_dir: PathBuf,
    /// A PostgreSQL URL: the state lives there, shared by every process given the same URL
    /// (and the same keys), and the data dir holds only keys.
    pub database_url: Option<String>,
    /// How long a process's claim on a turn it runs lasts unless renewed; a processing turn
    /// whose claim ran out is failed as orphaned.
    pub turn_lease: Duration,
    /// The public base address: the token issuer and the prefix of the five resource
    /// identifiers. `None` takes `http://` and the bound address.
    pub public_url: Option<String>,
    /// Largest accepted request body, in bytes.
    pub body_limit: usize,
    /// Registered OAuth clients. The default registers `intent-cli` for the device flow.
    pub clients: Vec<OAuthClient>,
    /// Whether clients may register themselves (RFC 7591) at the registration endpoint; on by
    /// default, so that an MCP host never configured here can sign in.
    pub client_registration: bool,
    /// Whether a client whose id is an `https` URL is described by the metadata document there
    /// ([`crate::oauth::document`]); on by default.
    pub client_metadata_documents: bool,
    /// Hosts whose metadata documents may be fetched though they resolve to addresses that are
    /// not public (loopback, private networks); none by default.
    pub client_metadata_hosts: Vec<String>,
    /// A PEM file of roots trusted, beside the system's, to fetch metadata documents.
    pub client_metadata_roots: Option<PathBuf>,
    /// Lifetime of access tokens issued by the token endpoint.
    pub access_token_ttl: Duration,
    /// Lifetime of refresh tokens; each use rotates to a new one.
    pub refresh_token_ttl: Duration,
    /// Lifetime of a device code.
    pub device_code_ttl: Duration,
    /// Seconds a device client waits between polls (RFC 8628 `interval`).
    pub device_poll_interval: Duration,
    /// How long events stay in a session's retained log; a cursor before it is 410.
    pub event_retention: Duration,
    /// How long an event-log cursor stays valid after it is issued.
    pub cursor_ttl: Duration,
    /// Idle time after which an SSE stream gets a keep-alive comment.
    pub sse_keep_alive: Duration,
    /// Lifetime of a Build: its `expiresAt` is this long after it is made.
    pub build_ttl: Duration,
    /// Requests each account may make per resource; `None` (the default) sets no limit.
    pub rate_limit: Option<RateLimit>,
    /// Time between two clean-ups of expired codes, grants, keys and idle wake-up channels.
    pub cleanup_interval: Duration,
    /// How long an idempotency key and its answer are kept.
    pub idempotency_key_ttl: Duration,
    /// How long expired authorization codes, device grants and refresh-token families are
    /// kept, so that a late replay or poll is still told what it was.
    pub expired_kept: Duration,
}

/// A token bucket: `per_second` requests a second on average, `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// The sustained rate.
    pub per_second: NonZeroU32,
    /// The most requests admitted at once.
    pub burst: NonZeroU32,
}

impl RateLimit {
    /// Parses `RPS` or `RPS:BURST` (a burst of RPS by default), both at least 1.
    pub fn parse(text: &str) -> Result<Self, String> {
        let number = |part: &str| {
            part.parse::<NonZeroU32>().map_err(|_| {
                format!("{text:?} is not RPS[:BURST] with whole numbers of at least 1")
            })
        };
        let (rate, burst) = text.split_once(':').unwrap_or((text, text));
        Ok(Self {
            per_second: number(rate)?,
            burst: number(burst)?,
        })
    }
}

impl Config {
    /// The defaults, with state in `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            database_url: None,
            turn_lease: Duration::from_secs(10),
            public_url: None,
            body_limit: 1024 * 1024,
            clients: vec![OAuthClient {
                id: DEVICE_CLIENT_ID.to_owned(),
                redirect_uris: Vec::new(),
            }],
            client_registration: true,
            client_metadata_documents: true,
            client_metadata_hosts: Vec::new(),
            client_metadata_roots: None,
            access_token_ttl: DEFAULT_TOKEN_TTL,
            refresh_token_ttl: Duration::from_secs(30 * 24 * 3600),
            device_code_ttl: Duration::from_secs(600),
            device_poll_interval: Duration::from_secs(5),
            event_retention: Duration::from_secs(7 * 24 * 3600),
            cursor_ttl: Duration::from_secs(24 * 3600),
            sse_keep_alive: Duration::from_secs(15),
            build_ttl: Duration::from_secs(600),
            rate_limit: None,
            cleanup_interval: Duration::from_secs(60),
            idempotency_key_ttl: Duration::from_secs(24 * 3600),
            expired_kept: Duration::from_secs(3600),
        }
    }

    /// Sets [`Config::database_url`].
    pub fn database_url(mut self, url: Option<String>) -> Self {
        self.database_url = url;
        self
    }

    /// Sets [`Config::turn_lease`].
    pub fn turn_lease(mut self, lease: Duration) -> Self {
        self.turn_lease = lease;
        self
    }

    /// Sets [`Config::public_url`].
    pub fn public_url(mut self, url: impl Into<String>) -> Self {
        self.public_url = Some(url.into().trim_end_matches('/').to_owned());
        self
    }

    /// Sets [`Config::body_limit`].
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// Adds a registered OAuth client.
    pub fn client(mut self, client: OAuthClient) -> Self {
        self.clients.push(client);
        self
    }

    /// Sets [`Config::client_metadata_documents`], [`Config::client_metadata_hosts`] and
    /// [`Config::client_metadata_roots`].
    pub fn client_metadata(
        mut self,
        documents: bool,
        hosts: Vec<String>,
        roots: Option<PathBuf>,
    ) -> Self {
        self.client_metadata_documents = documents;
        self.client_metadata_hosts = hosts;
        self.client_metadata_roots = roots;
        self
    }

    /// Sets [`Config::client_registration`].
    pub fn client_registration(mut self, open: bool) -> Self {
        self.client_registration = open;
        self
    }

    /// Sets [`Config::access_token_ttl`].
    pub fn access_token_ttl(mut self, ttl: Duration) -> Self {
        self.access_token_ttl = ttl;
        self
    }

    /// Sets [`Config::device_code_ttl`].
    pub fn device_code_ttl(mut self, ttl: Duration) -> Self {
        self.device_code_ttl = ttl;
        self
    }

    /// Sets [`Config::device_poll_interval`].
    pub fn device_poll_interval(mut self, interval: Duration) -> Self {
        self.device_poll_interval = interval;
        self
    }

    /// Sets [`Config::event_retention`].
    pub fn event_retention(mut self, retention: Duration) -> Self {
        self.event_retention = retention;
        self
    }

    /// Sets [`Config::cursor_ttl`].
    pub fn cursor_ttl(mut self, ttl: Duration) -> Self {
        self.cursor_ttl = ttl;
        self
    }

    /// Sets [`Config::sse_keep_alive`].
    pub fn sse_keep_alive(mut self, interval: Duration) -> Self {
        self.sse_keep_alive = interval;
        self
    }

    /// Sets [`Config::build_ttl`].
    pub fn build_ttl(mut self, ttl: Duration) -> Self {
        self.build_ttl = ttl;
        self
    }

    /// Sets [`Config::cleanup_interval`].
    pub fn cleanup_interval(mut self, interval: Duration) -> Self {
        self.cleanup_interval = interval;
        self
    }

    /// Sets [`Config::idempotency_key_ttl`].
    pub fn idempotency_key_ttl(mut self, ttl: Duration) -> Self {
        self.idempotency_key_ttl = ttl;
        self
    }

    /// Sets [`Config::expired_kept`].
    pub fn expired_kept(mut self, kept: Duration) -> Self {
        self.expired_kept = kept;
        self
    }

    /// Sets [`Config::rate_limit`].
    pub fn rate_limit(mut self, limit: Option<RateLimit>) -> Self {
        self.rate_limit = limit;
        self
    }
}

/// The client registered by default for the device flow.
pub const DEVICE_CLIENT_ID: &str = "intent-cli";

/// Default lifetime of access tokens.
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(3600);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_parse_with_and_without_redirect_uris() {
        let app = OAuthClient::parse("app=http://127.0.0.1:9/cb,https://x/cb").unwrap();
        assert_eq!(app.redirect_uris, ["http://127.0.0.1:9/cb", "https://x/cb"]);
        assert!(OAuthClient::parse("cli").unwrap().redirect_uris.is_empty());
        assert!(OAuthClient::parse("=http://x").is_err());
    }

    #[test]
    fn rate_limits_parse_with_and_without_a_burst() {
        let limit = RateLimit::parse("5:20").unwrap();
        assert_eq!((limit.per_second.get(), limit.burst.get()), (5, 20));
        let limit = RateLimit::parse("5").unwrap();
        assert_eq!((limit.per_second.get(), limit.burst.get()), (5, 5));
        for bad in ["", "0", "5:0", "x", "5:", "-1"] {
            assert!(RateLimit::parse(bad).is_err(), "{bad}");
        }
    }
}
