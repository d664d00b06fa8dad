//! Tokens. An access token is bound to exactly one resource (part 5), so a program that calls
//! the Agent and the Pipeline holds one [`TokenSource`] per resource. [`Authed`] hands each
//! request the token of its source and, on a 401, refreshes once and retries once.
//!
//! Sources: [`StaticToken`], and [`OAuthTokens`] obtained with [`OAuth::device`] (the device
//! flow: shows the verification address and user code, polls at the server's interval and
//! honours `slow_down`) or [`OAuth::authorize_url`] plus [`OAuth::exchange_code`]
//! (authorization code with PKCE); both refresh with rotation.
//!
//! ```no_run
//! # async fn run() -> Result<(), intent_sdk::Error> {
//! use std::sync::Arc;
//! use intent_sdk::auth::{Authed, OAuth};
//! let base = "http://127.0.0.1:8080";
//! let oauth = OAuth::new(base, "intent-cli");
//! let tokens = oauth
//!     .device(&format!("{base}/v1/agent"), &["agent:read", "agent:write"], |code| {
//!         println!("Open {} and enter {}", code.verification_uri, code.user_code);
//!     })
//!     .await?;
//! let agent = Authed::new(base, Arc::new(tokens));
//! let id: intent_sdk::types::GetSessionSessionId = "ses_1".parse().map_err(|e| intent_sdk::Error::InvalidInput(format!("{e}")))?;
//! let session = agent
//!     .call(|client| {
//!         let id = id.clone();
//!         async move { client.get_session(&id).await }
//!     })
//!     .await?;
//! println!("{}", session.title);
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use oauth2::basic::{BasicClient, BasicTokenResponse};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, CsrfToken, DeviceAuthorizationUrl, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, RefreshToken, Scope, StandardDeviceAuthorizationResponse,
    TokenResponse, TokenUrl,
};

use crate::{Client, Error, GeneratedError, ResponseValue};

/// Refresh this long before the access token expires.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);

/// Hands out the access token of one resource.
pub trait TokenSource: Send + Sync {
    /// The token to send now (refreshed first when it is about to expire).
    fn token(&self) -> impl Future<Output = Result<String, Error>> + Send;
    /// The last token got a 401: a fresh one, or `None` when this source cannot refresh.
    fn refresh(&self) -> impl Future<Output = Result<Option<String>, Error>> + Send;
}

/// A token given by the caller; it is never refreshed.
#[derive(Debug, Clone)]
pub struct StaticToken(pub String);

impl TokenSource for StaticToken {
    async fn token(&self) -> Result<String, Error> {
        Ok(self.0.clone())
    }

    async fn refresh(&self) -> Result<Option<String>, Error> {
        Ok(None)
    }
}

/// The authorization server of a deployment, for one public OAuth client.
#[derive(Debug, Clone)]
pub struct OAuth {
    base: String,
    client_id: String,
}

type OAuthClient = BasicClient<
    oauth2::EndpointSet,
    oauth2::EndpointSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointSet,
>;

/// What the user must do to approve a device login.
#[derive(Debug, Clone)]
pub struct DeviceCode {
    /// Where to go.
    pub verification_uri: String,
    /// What to type there.
    pub user_code: String,
    /// The address with the code filled in, when the server gives one.
    pub verification_uri_complete: Option<String>,
}

/// A pending authorization-code login: send the user to `url`, then pass the code the redirect
/// brings back to [`OAuth::exchange_code`] with this `verifier`, after checking `state`.
#[derive(Debug)]
pub struct AuthorizationStart {
    /// The authorization address to open.
    pub url: String,
    /// The PKCE verifier, kept by the app until the exchange.
    pub verifier: PkceCodeVerifier,
    /// The `state` the redirect must carry back.
    pub state: CsrfToken,
}

impl OAuth {
    /// The authorization server at `base` (the addresses of part 5), as client `client_id`.
    pub fn new(base: &str, client_id: &str) -> Self {
        Self {
            base: base.trim_end_matches('/').to_owned(),
            client_id: client_id.to_owned(),
        }
    }

    fn client(&self) -> Result<OAuthClient, Error> {
        let url = |path: &str| format!("{}{path}", self.base);
        Ok(BasicClient::new(ClientId::new(self.client_id.clone()))
            .set_auth_uri(AuthUrl::new(url("/api/auth/oauth2/authorize")).map_err(invalid)?)
            .set_token_uri(TokenUrl::new(url("/api/auth/oauth2/token")).map_err(invalid)?)
            .set_device_authorization_url(
                DeviceAuthorizationUrl::new(url("/api/auth/device/code")).map_err(invalid)?,
            ))
    }

    /// Logs in with the device flow for `resource` and `scopes`: `show` gets the code to show
    /// the user; the server is then polled at its interval until the user decides.
    pub async fn device(
        &self,
        resource: &str,
        scopes: &[&str],
        show: impl FnOnce(&DeviceCode),
    ) -> Result<OAuthTokens, Error> {
        let client = self.client()?;
        let details: StandardDeviceAuthorizationResponse = client
            .exchange_device_code()
            .add_scopes(scopes.iter().map(|s| Scope::new((*s).to_owned())))
            .add_extra_param("resource", resource)
            .request_async(&http)
            .await
            .map_err(oauth_error)?;
        show(&DeviceCode {
            verification_uri: details.verification_uri().to_string(),
            user_code: details.user_code().secret().clone(),
            verification_uri_complete: details
                .verification_uri_complete()
                .map(|u| u.secret().clone()),
        });
        let response = client
            .exchange_device_access_token(&details)
            .add_extra_param("resource", resource)
            .request_async(&http, tokio::time::sleep, None)
            .await
            .map_err(oauth_error)?;
        OAuthTokens::new(self.clone(), resource, response)
    }

    /// Starts an authorization-code login with PKCE (S256) for `resource` and `scopes`,
    /// redirecting to `redirect_uri`.
    pub fn authorize_url(
        &self,
        resource: &str,
        scopes: &[&str],
        redirect_uri: &str,
    ) -> Result<AuthorizationStart, Error> {
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state) = self
            .client()?
            .set_redirect_uri(RedirectUrl::new(redirect_uri.to_owned()).map_err(invalid)?)
            .authorize_url(CsrfToken::new_random)
            .add_scopes(scopes.iter().map(|s| Scope::new((*s).to_owned())))
            .add_extra_param("resource", resource)
            .set_pkce_challenge(challenge)
            .url();
        Ok(AuthorizationStart {
            url: url.to_string(),
            verifier,
            state,
        })
    }

    /// Exchanges the code of an authorization-code redirect for tokens.
    pub async fn exchange_code(
        &self,
        code: &str,
        verifier: PkceCodeVerifier,
        resource: &str,
        redirect_uri: &str,
    ) -> Result<OAuthTokens, Error> {
        let response = self
            .client()?
            .set_redirect_uri(RedirectUrl::new(redirect_uri.to_owned()).map_err(invalid)?)
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .set_pkce_verifier(verifier)
            .add_extra_param("resource", resource)
            .request_async(&http)
            .await
            .map_err(oauth_error)?;
        OAuthTokens::new(self.clone(), resource, response)
    }
}

/// Tokens from the authorization server; the refresh token rotates on every use.
pub struct OAuthTokens {
    oauth: OAuth,
    resource: String,
    state: Mutex<Tokens>,
    /// One refresh at a time: a rotated refresh token is good for one use.
    refreshing: tokio::sync::Mutex<()>,
}

struct Tokens {
    access: String,
    refresh: Option<String>,
    expires: Option<Instant>,
}

impl OAuthTokens {
    fn new(oauth: OAuth, resource: &str, response: BasicTokenResponse) -> Result<Self, Error> {
        Ok(Self {
            oauth,
            resource: resource.to_owned(),
            state: Mutex::new(tokens(&response)),
            refreshing: tokio::sync::Mutex::new(()),
        })
    }

    /// The current refresh token, for an app that stores it between runs.
    pub fn refresh_token(&self) -> Option<String> {
        self.lock().refresh.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tokens> {
        self.state.lock().expect("the token lock is not poisoned")
    }

    /// Refreshes unless another caller did since `stale` was handed out.
    async fn rotate(&self, stale: &str) -> Result<Option<String>, Error> {
        let _one_at_a_time = self.refreshing.lock().await;
        let refresh = {
            let state = self.lock();
            if state.access != stale {
                return Ok(Some(state.access.clone()));
            }
            match &state.refresh {
                Some(refresh) => refresh.clone(),
                None => return Ok(None),
            }
        };
        let response = self
            .oauth
            .client()?
            .exchange_refresh_token(&RefreshToken::new(refresh))
            .add_extra_param("resource", &self.resource)
            .request_async(&http)
            .await
            .map_err(oauth_error)?;
        let fresh = tokens(&response);
        let access = fresh.access.clone();
        *self.lock() = fresh;
        Ok(Some(access))
    }
}

impl TokenSource for OAuthTokens {
    async fn token(&self) -> Result<String, Error> {
        let (access, expiring) = {
            let state = self.lock();
            let expiring = state
                .expires
                .is_some_and(|at| at.saturating_duration_since(Instant::now()) < EXPIRY_MARGIN);
            (state.access.clone(), expiring && state.refresh.is_some())
        };
        if expiring && let Some(fresh) = self.rotate(&access).await? {
            return Ok(fresh);
        }
        Ok(access)
    }

    async fn refresh(&self) -> Result<Option<String>, Error> {
        let access = self.lock().access.clone();
        self.rotate(&access).await
    }
}

fn tokens(response: &BasicTokenResponse) -> Tokens {
    Tokens {
        access: response.access_token().secret().clone(),
        refresh: response.refresh_token().map(|r| r.secret().clone()),
        expires: response.expires_in().map(|d| Instant::now() + d),
    }
}

/// A generated [`Client`] for one resource whose requests carry the token of `source`.
pub struct Authed<S> {
    base: String,
    source: Arc<S>,
    current: Mutex<Option<(String, Client)>>,
}

impl<S: TokenSource> Authed<S> {
    /// Requests to `base` with tokens from `source`.
    pub fn new(base: &str, source: Arc<S>) -> Self {
        Self {
            base: base.to_owned(),
            source,
            current: Mutex::new(None),
        }
    }

    fn client_for(&self, token: &str) -> Result<Client, Error> {
        let mut current = self
            .current
            .lock()
            .expect("the client lock is not poisoned");
        if let Some((held, client)) = current.as_ref()
            && held == token
        {
            return Ok(client.clone());
        }
        let mut headers = reqwest::header::HeaderMap::new();
        let value = format!("Bearer {token}").parse().map_err(invalid)?;
        headers.insert(reqwest::header::AUTHORIZATION, value);
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .map_err(Error::Transport)?;
        let client = Client::new_with_client(&self.base, http);
        *current = Some((token.to_owned(), client.clone()));
        Ok(client)
    }

    /// A generated client carrying the current token, for helpers that take a [`Client`].
    /// Unlike [`Authed::call`], it does not refresh on 401.
    pub async fn client(&self) -> Result<Client, Error> {
        let token = self.source.token().await?;
        self.client_for(&token)
    }

    /// Runs `call` with a client carrying the current token; after a 401, refreshes the token
    /// once and runs `call` once more.
    pub async fn call<T, F, Fut>(&self, call: F) -> Result<T, Error>
    where
        F: Fn(Client) -> Fut,
        Fut:
            Future<Output = Result<ResponseValue<T>, GeneratedError<intent_models::ErrorEnvelope>>>,
    {
        let token = self.source.token().await?;
        match call(self.client_for(&token)?).await.map_err(Error::from) {
            Err(Error::Unauthorized(response)) => match self.source.refresh().await? {
                Some(fresh) => Ok(call(self.client_for(&fresh)?).await?.into_inner()),
                None => Err(Error::Unauthorized(response)),
            },
            other => other.map(ResponseValue::into_inner),
        }
    }
}

/// An HTTP client for the `oauth2` crate over reqwest 0.13: no redirects are followed, as RFC
/// 6749 asks of token requests. Pass it to `request_async` to drive other OAuth requests.
pub async fn http(request: oauth2::HttpRequest) -> Result<oauth2::HttpResponse, reqwest::Error> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let (parts, body) = request.into_parts();
    let response = client
        .request(parts.method, parts.uri.to_string())
        .headers(parts.headers)
        .body(body)
        .send()
        .await?;
    let mut builder = oauth2::http::Response::builder().status(response.status());
    for (name, value) in response.headers() {
        builder = builder.header(name, value);
    }
    Ok(builder
        .body(response.bytes().await?.to_vec())
        .expect("a response rebuilt from a response"))
}

fn oauth_error<E: std::error::Error + 'static, T: oauth2::ErrorResponse + 'static>(
    error: oauth2::RequestTokenError<E, T>,
) -> Error {
    match error {
        oauth2::RequestTokenError::ServerResponse(response) => Error::Api(crate::ErrorResponse {
            status: 400,
            code: serde_json::to_value(&response)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_owned)),
            message: Some(response.to_string()),
            body: serde_json::to_value(&response).unwrap_or_default(),
        }),
        other => Error::InvalidResponse(format!("the token request failed: {other}")),
    }
}

fn invalid(error: impl std::fmt::Display) -> Error {
    Error::InvalidInput(error.to_string())
}
