//! The OAuth 2.1 flows of part 5 through the `oauth2` crate: the device flow and the
//! authorization code with PKCE, both renewed by refresh-token rotation.

use std::sync::{Arc, Mutex};

use oauth2::basic::{BasicClient, BasicTokenResponse};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, CsrfToken, DeviceAuthorizationUrl, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, RefreshToken, Scope, StandardDeviceAuthorizationResponse,
    TokenResponse, TokenUrl,
};

use super::{Held, Slot, TokenSource, TokenStore};
use crate::Error;
use crate::error::invalid;

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

    /// Tokens for `resource` from a refresh token kept from an earlier run: the first token
    /// asked for is fetched by the refresh grant.
    pub fn from_refresh_token(&self, resource: &str, refresh_token: &str) -> OAuthTokens {
        OAuthTokens {
            oauth: self.clone(),
            resource: resource.to_owned(),
            access: Slot::default(),
            refresh: Arc::new(Mutex::new(Some(refresh_token.to_owned()))),
            store: None,
        }
    }

    /// Tokens for `resource` from the refresh token `store` keeps for this client and resource
    /// ([`OAuth::store_key`]), kept there as it rotates; `None` when it keeps none (log in,
    /// then [`OAuthTokens::stored`]).
    pub fn from_store(
        &self,
        resource: &str,
        store: impl TokenStore,
    ) -> Result<Option<OAuthTokens>, Error> {
        let key = self.store_key(resource);
        Ok(match store.load(&key)? {
            Some(refresh) => Some(self.from_refresh_token(resource, &refresh).stored(store)?),
            None => None,
        })
    }

    /// The key under which this client's refresh token for `resource` is stored.
    pub fn store_key(&self, resource: &str) -> String {
        format!("{resource} {}", self.client_id)
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
    access: Slot,
    /// The refresh token; a rotated one is good for one use, so renewals take turns in `access`.
    refresh: Arc<Mutex<Option<String>>>,
    /// Where each rotated refresh token is kept, under its key.
    store: Option<(Arc<dyn TokenStore>, String)>,
}

impl OAuthTokens {
    fn new(oauth: OAuth, resource: &str, response: BasicTokenResponse) -> Result<Self, Error> {
        Ok(Self {
            oauth,
            resource: resource.to_owned(),
            access: Slot::holding(held(&response)),
            refresh: Arc::new(Mutex::new(
                response.refresh_token().map(|r| r.secret().clone()),
            )),
            store: None,
        })
    }

    /// Keeps the refresh token in `store` (under [`OAuth::store_key`]) now and after each
    /// rotation, so that a later run starts from it ([`OAuth::from_store`]).
    pub fn stored(mut self, store: impl TokenStore) -> Result<Self, Error> {
        let key = self.oauth.store_key(&self.resource);
        if let Some(refresh) = self.refresh_token() {
            store.save(&key, &refresh)?;
        }
        self.store = Some((Arc::new(store), key));
        Ok(self)
    }

    /// The current refresh token, for an app that stores it between runs.
    pub fn refresh_token(&self) -> Option<String> {
        self.refresh
            .lock()
            .expect("the refresh lock is not poisoned")
            .clone()
    }

    /// A new access token by the refresh grant, or `None` without a refresh token.
    ///
    /// The exchange runs in a task of its own: a caller that gives up mid-way (a timeout, a
    /// dropped stream) must not lose the rotated refresh token, since replaying the old one
    /// revokes the whole family. A response without a refresh token keeps the old one (RFC 6749
    /// section 6).
    async fn rotate(&self) -> Result<Option<Held>, Error> {
        let Some(refresh) = self.refresh_token() else {
            return Ok(None);
        };
        let client = self.oauth.client()?;
        let (resource, kept) = (self.resource.clone(), self.refresh.clone());
        let store = self.store.clone();
        let exchange = tokio::spawn(async move {
            let response = client
                .exchange_refresh_token(&RefreshToken::new(refresh))
                .add_extra_param("resource", &resource)
                .request_async(&http)
                .await
                .map_err(oauth_error)?;
            if let Some(rotated) = response.refresh_token() {
                *kept.lock().expect("the refresh lock is not poisoned") =
                    Some(rotated.secret().clone());
                if let Some((store, key)) = &store {
                    store.save(key, rotated.secret())?;
                }
            }
            Ok(held(&response))
        });
        match exchange.await {
            Ok(result) => result.map(Some),
            Err(failed) => Err(Error::Token(format!(
                "the refresh did not finish: {failed}"
            ))),
        }
    }
}

impl TokenSource for OAuthTokens {
    async fn token(&self) -> Result<String, Error> {
        self.access.token(|| self.rotate()).await
    }

    async fn refresh(&self, rejected: &str) -> Result<Option<String>, Error> {
        self.access.replace(rejected, || self.rotate()).await
    }
}

fn held(response: &BasicTokenResponse) -> Held {
    Held::new(
        response.access_token().secret().clone(),
        response.expires_in(),
    )
}

/// An HTTP client for the `oauth2` crate over reqwest 0.13: no redirects are followed, as RFC
/// 6749 asks of token requests. Pass it to `request_async` to drive other OAuth requests.
pub async fn http(request: oauth2::HttpRequest) -> Result<oauth2::HttpResponse, reqwest::Error> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(std::time::Duration::from_secs(10))
        .timeout(std::time::Duration::from_secs(30))
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
            request_id: None,
        }),
        other => Error::InvalidResponse(format!("the token request failed: {other}")),
    }
}
