//! The gateway in front of every `/v1` request. It finds the operation in openapi.json, verifies
//! the bearer token (signature, expiry, issuer, and an audience equal to the operation's
//! resource), checks the operation's scope, and hands handlers a [`Principal`], never the token,
//! and the operation's [`BodySchema`], against which [`crate::http::ApiJson`] checks the body.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use intent_models::ErrorCode;
use intent_models::schema::{SchemaValidator, Schemas};
use serde_json::Value;

use crate::clock::now;
use crate::error::ApiError;
use crate::principal::Principal;
use crate::resource::Resource;
use crate::state::AppState;
use crate::token::TokenError;

impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Principal>().cloned().ok_or_else(|| {
            tracing::error!(path = %parts.uri.path(), "handler reached without the gateway");
            ApiError::internal()
        })
    }
}

/// The schema of an operation's JSON request body in openapi.json.
#[derive(Clone)]
pub struct BodySchema(pub Arc<SchemaValidator>);

/// One operation of openapi.json: where it is, what a token needs to reach it, and the schema
/// of its body.
#[derive(Clone)]
pub struct Operation {
    /// `None` for an MCP endpoint, which takes any method.
    method: Option<Method>,
    /// Path segments; `None` stands for a `{parameter}`.
    segments: Vec<Option<String>>,
    /// The scope the operation requires.
    pub scope: String,
    /// The resource whose token the operation takes.
    pub resource: Resource,
    /// The schema of its JSON body, when it takes one.
    pub body: Option<BodySchema>,
}

/// Every operation of openapi.json.
#[derive(Clone)]
pub struct Operations(Vec<Operation>);

impl Operations {
    /// Reads the operations of `document`: path, method, the one scope of `security`, the
    /// resource of `x-resource` and the schema of the JSON request body. The two MCP endpoints
    /// (any method, no body schema: JSON-RPC is the MCP layer's) are guarded by their
    /// resource's scope.
    pub fn from_openapi(document: &Value, schemas: &Schemas) -> Self {
        let mut operations = Vec::new();
        for (path, item) in document["paths"].as_object().into_iter().flatten() {
            for (method, op) in item.as_object().into_iter().flatten() {
                let Ok(method) = method.to_uppercase().parse::<Method>() else {
                    continue;
                };
                let scope = op["security"][0]["oauth2"][0].as_str();
                let resource = op["x-resource"].as_str().and_then(Resource::from_name);
                let (Some(scope), Some(resource)) = (scope, resource) else {
                    panic!("openapi.json: {method} {path} lacks a scope or x-resource");
                };
                let segments = path
                    .split('/')
                    .map(|s| (!(s.starts_with('{') && s.ends_with('}'))).then(|| s.to_owned()))
                    .collect();
                let body = op
                    .pointer("/requestBody/content/application~1json/schema")
                    .map(|schema| {
                        let validator = schemas.inline(schema).unwrap_or_else(|error| {
                            panic!("openapi.json: the body schema of {method} {path}: {error}")
                        });
                        BodySchema(Arc::new(validator))
                    });
                operations.push(Operation {
                    method: Some(method.clone()),
                    segments,
                    scope: scope.to_owned(),
                    resource,
                    body,
                });
            }
        }
        for resource in [Resource::AgentMcp, Resource::PipelineMcp] {
            operations.push(Operation {
                method: None,
                segments: resource
                    .path()
                    .split('/')
                    .map(|s| Some(s.to_owned()))
                    .collect(),
                scope: resource.scopes()[0].to_owned(),
                resource,
                body: None,
            });
        }
        Self(operations)
    }

    /// The operation at `method` and `path`, if any.
    /// HEAD is guarded like the GET it stands for.
    pub fn find(&self, method: &Method, path: &str) -> Option<&Operation> {
        let method = if method == Method::HEAD {
            &Method::GET
        } else {
            method
        };
        let segments: Vec<&str> = path.split('/').collect();
        self.0.iter().find(|op| {
            op.method.as_ref().is_none_or(|m| m == method)
                && op.segments.len() == segments.len()
                && op
                    .segments
                    .iter()
                    .zip(&segments)
                    .all(|(want, got)| match want {
                        Some(literal) => literal == got,
                        // An empty parameter is guarded too; its handler refuses it with 400.
                        None => true,
                    })
        })
    }
}

/// Middleware: authenticate and authorize the request, or answer 401 or 403.
pub async fn authorize(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(operation) = state
        .operations()
        .find(request.method(), request.uri().path())
    else {
        return next.run(request).await;
    };
    let resource = operation.resource;
    let metadata = state.resource_metadata_url(resource);
    let token = match bearer(request.headers()) {
        Ok(token) => token,
        Err(reason) => return unauthorized(reason, None, &metadata),
    };
    let audience = resource.identifier(state.issuer());
    let verified = state.verified_tokens().verify(
        state.signing_key(),
        token,
        state.issuer(),
        &audience,
        now(),
    );
    let claims = match verified {
        Ok(claims) => claims,
        Err(error) => return unauthorized(&error.to_string(), Some(&error), &metadata),
    };
    if !claims.has_scope(&operation.scope) {
        let scope = &operation.scope;
        let challenge = format!(
            r#"Bearer error="insufficient_scope", scope="{scope}", resource_metadata="{metadata}""#
        );
        return ApiError::new(
            ErrorCode::InsufficientScope,
            format!("this endpoint requires scope {scope}"),
        )
        .with_detail("scope", scope.as_str().into())
        .with_challenge(challenge)
        .into_response();
    }
    if let Some(limits) = state.rate_limits()
        && let Err(wait) = limits.admit(&claims.sub, resource)
    {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        return ApiError::new(
            ErrorCode::RateLimited,
            format!("too many requests for this account and resource; retry after {seconds} s"),
        )
        .with_retry_after(seconds)
        .into_response();
    }
    let scopes = claims.scope.split(' ').map(str::to_owned).collect();
    request.extensions_mut().insert(Principal {
        account: claims.sub.clone(),
        scopes,
        expires_at: claims.exp,
    });
    if let Some(body) = &operation.body {
        request.extensions_mut().insert(body.clone());
    }
    next.run(request).await
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
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err("the Authorization header is not a bearer token");
    }
    Ok(token.trim())
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

    fn operations() -> Operations {
        Operations::from_openapi(crate::openapi::document(), crate::openapi::schemas())
    }

    #[test]
    fn finds_operations_by_method_and_template() {
        let ops = operations();
        let page = ops.find(&Method::GET, "/v1/agent/chat/ses_1").unwrap();
        assert_eq!(
            (page.scope.as_str(), page.resource),
            ("agent:read", Resource::Agent)
        );
        let stage = ops.find(&Method::POST, "/v1/pipeline/svm/stage").unwrap();
        assert_eq!(
            (stage.scope.as_str(), stage.resource),
            ("pipeline:execute", Resource::Pipeline)
        );
        let remove = ops
            .find(&Method::DELETE, "/v1/account/apps/3/secrets/API_KEY")
            .unwrap();
        assert_eq!(remove.scope, "account:credentials:write");
        assert!(ops.find(&Method::PUT, "/v1/agent/chat/ses_1").is_none());
        let head = ops.find(&Method::HEAD, "/v1/account/statement").unwrap();
        assert_eq!(head.scope, "account:usage:read");
        let empty = ops.find(&Method::GET, "/v1/agent/chat/").unwrap();
        assert_eq!(empty.scope, "agent:read");
        assert!(ops.find(&Method::GET, "/v1/nowhere").is_none());
    }

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
