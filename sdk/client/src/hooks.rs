//! The generated [`Client`]'s hooks: each request gets its resource's token as it is sent, and a
//! 401 is answered by renewing the token once and sending the request once more.

use progenitor_client::{ClientHooks, ClientInfo, OperationInfo};
use reqwest::header::{AUTHORIZATION, HeaderValue};
use reqwest::{Request, Response, StatusCode};

use crate::auth::Tokens;
use crate::{Client, Error};

impl ClientHooks<Tokens> for Client {
    async fn pre<E>(
        &self,
        request: &mut Request,
        _info: &OperationInfo,
    ) -> Result<(), progenitor_client::Error<E>> {
        let Some(source) = self.inner().source_for(request.url()) else {
            return Ok(());
        };
        let token = source
            .token()
            .await
            .map_err(|e| progenitor_client::Error::Custom(token_failure(e)))?;
        bear(request, &token).map_err(|e| progenitor_client::Error::Custom(token_failure(e)))
    }

    async fn exec(&self, request: Request, _info: &OperationInfo) -> reqwest::Result<Response> {
        let Some(source) = self.inner().source_for(request.url()) else {
            return self.client().execute(request).await;
        };
        let again = request.try_clone();
        let sent = request.headers().get(AUTHORIZATION).cloned();
        let response = self.client().execute(request).await?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        // A renewal that fails leaves the 401 as the answer; the next request's `pre` runs the
        // source again and reports its error.
        let (Some(mut again), Some(sent)) = (again, sent.as_ref().and_then(bearer)) else {
            return Ok(response);
        };
        match source.refresh(sent).await {
            Ok(Some(fresh)) if bear(&mut again, &fresh).is_ok() => {
                self.client().execute(again).await
            }
            _ => Ok(response),
        }
    }
}

/// Sends a request built outside the generated methods through the same hooks.
pub(crate) async fn send(client: &Client, mut request: Request) -> Result<Response, Error> {
    let info = OperationInfo {
        operation_id: "raw",
    };
    client
        .pre::<intent_models::ErrorEnvelope>(&mut request, &info)
        .await?;
    client.exec(request, &info).await.map_err(Error::Transport)
}

fn bear(request: &mut Request, token: &str) -> Result<(), Error> {
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| Error::Token("the token is not a valid header value".to_owned()))?;
    value.set_sensitive(true);
    request.headers_mut().insert(AUTHORIZATION, value);
    Ok(())
}

fn bearer(value: &HeaderValue) -> Option<&str> {
    value.to_str().ok()?.strip_prefix("Bearer ")
}

/// The message of a source's error, carried through progenitor's `Custom` to [`Error::Token`].
fn token_failure(error: Error) -> String {
    match error {
        Error::Token(message) => message,
        other => other.to_string(),
    }
}
