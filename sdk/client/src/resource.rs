//! The protected resources of part 5.4, as openapi.json declares them: each takes tokens of its
//! own, with the scopes openapi.json gives it.

/// A protected resource of part 5.4; each takes tokens of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    /// `{base}/v1/agent`
    Agent,
    /// `{base}/v1/pipeline`
    Pipeline,
    /// `{base}/v1/account`
    Account,
    /// `{base}/v1/agent/mcp`
    AgentMcp,
    /// `{base}/v1/pipeline/mcp`
    PipelineMcp,
}

impl Resource {
    /// Every resource, the MCP ones before the resources whose paths contain theirs.
    pub const ALL: [Resource; 5] = [
        Resource::AgentMcp,
        Resource::PipelineMcp,
        Resource::Agent,
        Resource::Pipeline,
        Resource::Account,
    ];

    /// The resource's name in openapi.json (`x-resources`, an operation's `x-resource`).
    pub fn name(self) -> &'static str {
        match self {
            Resource::Agent => "agent",
            Resource::Pipeline => "pipeline",
            Resource::Account => "account",
            Resource::AgentMcp => "agent-mcp",
            Resource::PipelineMcp => "pipeline-mcp",
        }
    }

    /// The resource's path below the deployment's base address.
    pub fn path(self) -> &'static str {
        self.declared().path
    }

    /// This resource as openapi.json declares it ([`intent_models::RESOURCES`]).
    fn declared(self) -> &'static intent_models::ProtectedResource {
        intent_models::ProtectedResource::named(self.name())
            .expect("openapi.json declares each resource (a test reads them all)")
    }

    /// The resource identifier (RFC 8707) of a deployment at `base`: the `resource` of token
    /// requests and the audience of the tokens.
    pub fn identifier(self, base: &str) -> String {
        format!("{}{}", base.trim_end_matches('/'), self.path())
    }

    /// The resource a request path (below the base address) belongs to.
    pub fn of_path(path: &str) -> Option<Resource> {
        Resource::ALL.into_iter().find(|resource| {
            path.strip_prefix(resource.path())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }

    /// The scopes of openapi.json a token for this resource may carry ([`Self::owns_scope`]),
    /// sorted.
    pub fn scopes(self) -> Vec<&'static str> {
        let scopes = intent_models::SCOPES.iter().copied();
        scopes.filter(|scope| self.owns_scope(scope)).collect()
    }

    /// Whether a token for this resource may carry `scope`: one openapi.json gives it
    /// (`x-resource-scopes`), and for an MCP resource one of the resource its tools call.
    pub fn owns_scope(self, scope: &str) -> bool {
        let behind = match self {
            Resource::AgentMcp => Some(Resource::Agent),
            Resource::PipelineMcp => Some(Resource::Pipeline),
            _ => None,
        };
        self.declared().scopes.contains(&scope)
            || behind.is_some_and(|behind| behind.owns_scope(scope))
    }
}
