//! Server configuration.

use std::path::PathBuf;
use std::time::Duration;

/// How the server runs. Build it with [`Config::new`] and the chainable setters.
#[derive(Debug, Clone)]
pub struct Config {
    /// Directory of the SQLite database and the keys; created when missing.
    pub data_dir: PathBuf,
    /// The public base address: the token issuer and the prefix of the five resource
    /// identifiers. `None` takes `http://` and the bound address.
    pub public_url: Option<String>,
    /// Largest accepted request body, in bytes.
    pub body_limit: usize,
}

impl Config {
    /// The defaults, with state in `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            public_url: None,
            body_limit: 1024 * 1024,
        }
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
}

/// Default lifetime of access tokens minted by the `token` command.
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(3600);
