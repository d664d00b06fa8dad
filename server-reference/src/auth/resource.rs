//! The five protected resources of part 5.4; a token is bound to exactly one of them. Their
//! paths and scopes are openapi.json's ([`intent_models::RESOURCES`]).

use intent_models::ProtectedResource;

/// Prefix of a resource's protected-resource metadata; the resource's path follows it (RFC 9728,
/// 3.1).
const METADATA_PREFIX: &str = "/.well-known/oauth-protected-resource";

/// A protected resource. Its identifier is the issuer's base address followed by [`path`].
///
/// [`path`]: Resource::path
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    /// `/v1/agent`
    Agent,
    /// `/v1/pipeline`
    Pipeline,
    /// `/v1/agent/mcp`
    AgentMcp,
    /// `/v1/pipeline/mcp`
    PipelineMcp,
    /// `/v1/account`
    Account,
}

impl Resource {
    /// Every resource.
    pub const ALL: [Resource; 5] = [
        Resource::Agent,
        Resource::Pipeline,
        Resource::AgentMcp,
        Resource::PipelineMcp,
        Resource::Account,
    ];

    /// The name openapi.json uses in `x-resource` and `x-resources`.
    pub fn name(self) -> &'static str {
        match self {
            Resource::Agent => "agent",
            Resource::Pipeline => "pipeline",
            Resource::AgentMcp => "agent-mcp",
            Resource::PipelineMcp => "pipeline-mcp",
            Resource::Account => "account",
        }
    }

    /// The path that follows the base address in the identifier.
    pub fn path(self) -> &'static str {
        self.declared().path
    }

    /// The path of this resource's protected-resource metadata (RFC 9728, 3.1).
    pub fn metadata_path(self) -> String {
        format!("{METADATA_PREFIX}{}", self.path())
    }

    /// The address of this resource's protected-resource metadata at `issuer`.
    pub fn metadata_url(self, issuer: &str) -> String {
        format!("{issuer}{}", self.metadata_path())
    }

    /// The scopes of part 5 that belong to this resource.
    pub fn scopes(self) -> &'static [&'static str] {
        self.declared().scopes
    }

    /// This resource as openapi.json declares it.
    fn declared(self) -> &'static ProtectedResource {
        ProtectedResource::named(self.name())
            .expect("openapi.json declares each resource (a test reads them all)")
    }

    /// The scopes a token for this resource may carry: its own and, for an MCP resource, those
    /// of the resource its tools call (what an MCP client may do is its token's scopes).
    pub fn grantable(self) -> Vec<&'static str> {
        let behind = match self {
            Resource::AgentMcp => Resource::Agent.scopes(),
            Resource::PipelineMcp => Resource::Pipeline.scopes(),
            _ => &[],
        };
        self.scopes().iter().chain(behind).copied().collect()
    }

    /// The resource called `name` in openapi.json.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The identifier of this resource at `base` (no trailing slash).
    pub fn identifier(self, base: &str) -> String {
        format!("{base}{}", self.path())
    }

    /// Splits an identifier into its base address and resource.
    pub fn parse_identifier(identifier: &str) -> Option<(&str, Self)> {
        // Longest path first: `/v1/agent/mcp` before `/v1/agent`.
        let mut all = Self::ALL;
        all.sort_by_key(|r| std::cmp::Reverse(r.path().len()));
        all.into_iter().find_map(|r| {
            let base = identifier.strip_suffix(r.path())?;
            (!base.is_empty() && !base.ends_with('/')).then_some((base, r))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_parse_back_to_their_resource() {
        for resource in Resource::ALL {
            let id = resource.identifier("http://127.0.0.1:8080");
            assert_eq!(
                Resource::parse_identifier(&id),
                Some(("http://127.0.0.1:8080", resource))
            );
        }
        assert_eq!(Resource::parse_identifier("http://h/v1/other"), None);
        assert_eq!(Resource::parse_identifier("/v1/agent"), None);
    }

    #[test]
    fn the_sixteen_scopes_belong_to_one_resource_each() {
        let mut all: Vec<&str> = Resource::ALL
            .iter()
            .flat_map(|r| r.scopes().iter().copied())
            .collect();
        assert_eq!(all.len(), 16);
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 16);
    }

    #[test]
    fn the_resources_are_those_openapi_json_declares() {
        let mut ours: Vec<&str> = Resource::ALL.iter().map(|r| r.name()).collect();
        let mut declared: Vec<&str> = intent_models::RESOURCES.iter().map(|r| r.name).collect();
        ours.sort_unstable();
        declared.sort_unstable();
        assert_eq!(ours, declared);
    }
}
