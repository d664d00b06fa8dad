//! The operations of the interface document (where each is, the scope and resource of its token,
//! the schema of its body), which the gateway guards.

use std::sync::{Arc, LazyLock};

use axum::http::Method;
use intent_models::openapi::Document;
use intent_models::schema::{SchemaValidator, Schemas};

use crate::auth::resource::Resource;
use crate::interface::{document, schemas};

/// The operations of the interface document.
pub fn all() -> &'static Endpoints {
    static ENDPOINTS: LazyLock<Endpoints> =
        LazyLock::new(|| Endpoints::from_openapi(document(), schemas()));
    &ENDPOINTS
}

/// The schema of an operation's JSON request body in openapi.json.
#[derive(Clone)]
pub struct BodySchema(pub Arc<SchemaValidator>);

/// One operation of openapi.json: where it is, what a token needs to reach it, and the schema
/// of its body.
#[derive(Clone)]
pub struct Endpoint {
    /// `None` for an MCP endpoint, which takes any method.
    method: Option<Method>,
    /// Path segments; `None` stands for a `{parameter}`.
    segments: Vec<Option<String>>,
    /// What the logs name it by: its `operationId`, or an MCP endpoint's path.
    pub operation: String,
    /// The scope the operation requires.
    pub scope: String,
    /// The resource whose token the operation takes.
    pub resource: Resource,
    /// The schema of its JSON body, when it takes one.
    pub body: Option<BodySchema>,
}

/// The most segments an operation's path has (`/v1/agent/sessions/{id}/actions/{id}/resolve`
/// has 7, after the empty one before the first slash).
const MAX_SEGMENTS: usize = 8;

/// Every operation of openapi.json, indexed by its count of path segments.
#[derive(Clone)]
pub struct Endpoints {
    /// Sorted by their count of segments, stably: within a count, in the document's order.
    all: Vec<Endpoint>,
    /// Where the operations of each count start in `all`: those of `n` segments are
    /// `all[starts[n]..starts[n + 1]]`.
    starts: [usize; MAX_SEGMENTS + 2],
}

impl Endpoints {
    /// Reads the operations of `document`: path, method, the one scope of `security`, the
    /// resource of `x-resource` and the schema of the JSON request body. The two MCP endpoints
    /// (any method, no body schema: JSON-RPC is the MCP layer's) are guarded by their
    /// resource's scope.
    pub fn from_openapi(document: &Document, schemas: &Schemas) -> Self {
        let mut operations = Vec::new();
        for op in document.operations() {
            let Ok(method) = op.method.parse::<Method>() else {
                continue;
            };
            let resource = op.resource.as_deref().and_then(Resource::from_name);
            let (Some(scope), Some(resource)) = (op.scopes.first(), resource) else {
                panic!("openapi.json: {} lacks a scope or x-resource", op.reference);
            };
            let segments = op.segments().map(|s| s.map(str::to_owned)).collect();
            let body = op.body.as_ref().map(|schema| {
                let validator = schemas.inline(schema).unwrap_or_else(|error| {
                    panic!("openapi.json: the body schema of {}: {error}", op.reference)
                });
                BodySchema(Arc::new(validator))
            });
            operations.push(Endpoint {
                method: Some(method.clone()),
                segments,
                operation: op.id.clone(),
                scope: scope.to_owned(),
                resource,
                body,
            });
        }
        for resource in [Resource::AgentMcp, Resource::PipelineMcp] {
            operations.push(Endpoint {
                method: None,
                segments: resource
                    .path()
                    .split('/')
                    .map(|s| Some(s.to_owned()))
                    .collect(),
                operation: resource.path().to_owned(),
                scope: resource.scopes()[0].to_owned(),
                resource,
                body: None,
            });
        }
        if let Some(long) = operations
            .iter()
            .find(|op| op.segments.len() > MAX_SEGMENTS)
        {
            let path: Vec<&str> = long
                .segments
                .iter()
                .map(|segment| segment.as_deref().unwrap_or("{}"))
                .collect();
            panic!(
                "openapi.json: {} has more than {MAX_SEGMENTS} segments",
                path.join("/")
            );
        }
        operations.sort_by_key(|op| op.segments.len());
        let starts =
            std::array::from_fn(|count| operations.partition_point(|op| op.segments.len() < count));
        Self {
            all: operations,
            starts,
        }
    }

    /// The operation at `method` and `path`, if any.
    /// HEAD is guarded like the GET it stands for.
    pub fn find(&self, method: &Method, path: &str) -> Option<&Endpoint> {
        let method = if method == Method::HEAD {
            &Method::GET
        } else {
            method
        };
        // The path's segments, split once and as bytes (a `str` split by a `char` searches with
        // `memchr`, which costs more on segments this short); no operation has more than
        // `MAX_SEGMENTS`.
        let mut segments: [&[u8]; MAX_SEGMENTS] = [b""; MAX_SEGMENTS];
        let mut count = 0;
        for segment in path.as_bytes().split(|&byte| byte == b'/') {
            *segments.get_mut(count)? = segment;
            count += 1;
        }
        let segments = &segments[..count];
        self.all[self.starts[count]..self.starts[count + 1]]
            .iter()
            .find(|op| {
                op.method.as_ref().is_none_or(|m| m == method)
                    && op
                        .segments
                        .iter()
                        .zip(segments)
                        .all(|(want, got)| match want {
                            Some(literal) => literal.as_bytes() == *got,
                            // An empty parameter is guarded too; its handler refuses it with 400.
                            None => true,
                        })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_operations_by_method_and_template() {
        let ops = all();
        let documented = document().operations().len();
        assert_eq!(
            ops.all.len(),
            documented + 2,
            "every operation of openapi.json, and the two MCP endpoints"
        );
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
}
