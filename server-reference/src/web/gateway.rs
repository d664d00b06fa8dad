//! The gateway in front of every `/v1` request. It finds the operation in openapi.json, verifies
//! the bearer token (signature, expiry, issuer, and an audience equal to the operation's
//! resource), checks the operation's scope, and hands handlers a
//! [`Principal`](crate::auth::principal::Principal), never the token, and the operation's
//! [`BodySchema`](crate::web::endpoints::BodySchema), against which [`crate::web::ApiJson`]
//! checks the body.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::extract::Request;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use futures_util::future::Either;
use intent_models::ErrorCode;
use tower::{Layer, Service};

use crate::auth::rate::RateLimits;
use crate::auth::resource::Resource;
use crate::auth::token::TokenError;
use crate::auth::token_cache::VerifiedTokens;
use crate::clock::now;
use crate::error::ApiError;
use crate::keys::signing::SigningKeys;
use crate::metrics::{self, Timed};
use crate::web::endpoints::{self, Endpoint};

/// What the gateway checks a request with. Cheap to clone.
#[derive(Clone)]
pub struct Gateway(Arc<Checks>);

struct Checks {
    issuer: String,
    /// Each resource's identifier at `issuer`: the audience its tokens carry.
    audiences: Vec<(Resource, String)>,
    keys: Arc<SigningKeys>,
    verified: VerifiedTokens,
    limits: Option<RateLimits>,
}

impl Gateway {
    /// A gateway admitting the tokens `keys` signed as `issuer`, within `limits` when given.
    pub fn new(issuer: String, keys: Arc<SigningKeys>, limits: Option<RateLimits>) -> Self {
        let audiences = Resource::ALL
            .into_iter()
            .map(|resource| (resource, resource.identifier(&issuer)))
            .collect();
        Self(Arc::new(Checks {
            audiences,
            issuer,
            keys,
            verified: VerifiedTokens::default(),
            limits,
        }))
    }
}

impl Checks {
    /// The audience of `resource`'s tokens.
    fn audience(&self, resource: Resource) -> &str {
        self.audiences
            .iter()
            .find(|(of, _)| *of == resource)
            .map(|(_, audience)| audience.as_str())
            .expect("every resource has an audience")
    }
}

/// The gateway as a layer: the service it wraps gets only the requests it admits.
impl<S> Layer<S> for Gateway {
    type Service = Guarded<S>;

    fn layer(&self, inner: S) -> Guarded<S> {
        Guarded {
            gateway: self.clone(),
            inner,
        }
    }
}

/// A service behind the gateway. Checking a request is synchronous, so the gateway answers a
/// refused one at once and hands an admitted one on: nothing is boxed per request. Every
/// answer is counted in the metrics under the operation the gateway found.
#[derive(Clone)]
pub struct Guarded<S> {
    gateway: Gateway,
    inner: S,
}

impl<S> Service<Request> for Guarded<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Timed<Either<Ready<Result<Response, Infallible>>, S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let started = Instant::now();
        let endpoint = endpoints::all().find(request.method(), request.uri().path());
        let operation = endpoint.map_or(metrics::OTHER, |e| e.operation.as_str());
        let answer = match endpoint {
            None => Either::Right(self.inner.call(request)),
            Some(endpoint) => match admit(&self.gateway.0, endpoint, request) {
                Ok(admitted) => Either::Right(self.inner.call(admitted)),
                Err(refused) => Either::Left(ready(Ok(*refused))),
            },
        };
        Timed::new(answer, operation, started)
    }
}

/// `request`, of `operation`, when its bearer token is valid for the operation's resource,
/// grants its scope and is within its rate limit; else the answer: 401, 403 or 429.
fn admit(
    checks: &Checks,
    operation: &Endpoint,
    mut request: Request,
) -> Result<Request, Box<Response>> {
    tracing::Span::current().record("operation", operation.operation.as_str());
    let resource = operation.resource;
    let metadata = || resource.metadata_url(&checks.issuer);
    let token = match bearer(request.headers()) {
        Ok(token) => token,
        Err(reason) => return Err(Box::new(unauthorized(reason, None, &metadata()))),
    };
    let audience = checks.audience(resource);
    let verified = checks
        .verified
        .verify(&checks.keys, token, &checks.issuer, audience, now());
    let principal = match verified {
        Ok(principal) => principal,
        Err(error) => {
            let answer = unauthorized(&error.to_string(), Some(&error), &metadata());
            return Err(Box::new(answer));
        }
    };
    if !principal.has_scope(&operation.scope) {
        let scope = &operation.scope;
        let challenge = format!(
            r#"Bearer error="insufficient_scope", scope="{scope}", resource_metadata="{}""#,
            metadata()
        );
        return Err(Box::new(
            ApiError::new(
                ErrorCode::InsufficientScope,
                format!("this endpoint requires scope {scope}"),
            )
            .with_detail("scope", scope.as_str().into())
            .with_challenge(challenge)
            .into_response(),
        ));
    }
    if let Some(limits) = &checks.limits
        && let Err(wait) = limits.admit(&principal.account, resource)
    {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        return Err(Box::new(
            ApiError::new(
                ErrorCode::RateLimited,
                format!("too many requests for this account and resource; retry after {seconds} s"),
            )
            .with_retry_after(seconds)
            .into_response(),
        ));
    }
    request.extensions_mut().insert(principal);
    if let Some(body) = &operation.body {
        request.extensions_mut().insert(body.clone());
    }
    Ok(request)
}

/// The bearer token of `headers`, or why there is none.
fn bearer(headers: &HeaderMap) -> Result<&str, &'static str> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or("a bearer token is required")?;
    let value = value
        .to_str()
        .map_err(|_| "the Authorization header is not text")?;
    let (scheme, token) = value
        .split_once(' ')
        .ok_or("the Authorization header is not a bearer token")?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err("the Authorization header is not a bearer token");
    }
    Ok(token)
}

/// 401 with a `WWW-Authenticate` challenge naming the resource metadata (RFC 9728). A request
/// without credentials gets no error code in the challenge (RFC 6750, 3.1).
fn unauthorized(message: &str, error: Option<&TokenError>, metadata: &str) -> Response {
    let challenge = match error {
        Some(_) => format!(
            r#"Bearer error="invalid_token", error_description="{message}", resource_metadata="{metadata}""#
        ),
        None => format!(r#"Bearer resource_metadata="{metadata}""#),
    };
    ApiError::new(ErrorCode::Unauthorized, message)
        .with_challenge(challenge)
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_parsing_refuses_other_schemes_and_empty_tokens() {
        let headers = |value: &str| {
            let mut map = HeaderMap::new();
            map.insert(header::AUTHORIZATION, value.parse().unwrap());
            map
        };
        assert_eq!(bearer(&headers("Bearer abc")), Ok("abc"));
        assert_eq!(bearer(&headers("bearer abc")), Ok("abc"));
        assert!(bearer(&headers("Basic abc")).is_err());
        assert!(bearer(&headers("Bearer ")).is_err());
        assert!(bearer(&HeaderMap::new()).is_err());
    }
}
