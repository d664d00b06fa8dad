//! One token command for the SDK and the conformance suite: the docs' script
//! (`docs/token-command.sh`, which `.ci/remote-conformance` gives the suite) mints, for each
//! resource the SDK calls, a token with that resource's scopes, so that calls needing any of them
//! succeed.

use intent_sdk::Intent;
use intent_sdk::auth::{CommandToken, Resource};

use crate::support::{BINARY, Server};

/// The docs' example script, as a team copies it.
fn script() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    root.join("docs/token-command.sh").display().to_string()
}

#[tokio::test]
async fn the_docs_token_script_serves_the_sdk_with_each_resources_scopes() {
    let data_dir = tempfile::tempdir().unwrap();
    let server = Server::start(data_dir.path(), "127.0.0.1:0", &[]);
    let mut builder = Intent::builder(&server.base);
    for resource in [Resource::Agent, Resource::Pipeline, Resource::Account] {
        let source = CommandToken::shell(&script(), &server.base, resource, "primary")
            .env("INTENT_SERVER", BINARY)
            .env("INTENT_DATA_DIR", data_dir.path());
        builder = builder.token(resource, source);
    }
    let intent = builder.build().unwrap();
    // agent:write and agent:read, pipeline:catalog, account:usage:read: each only granted when
    // the command got the resource's scopes.
    let turn = intent.agent().run_turn("hello", None).await.unwrap();
    intent.agent().session(&turn.session_id).await.unwrap();
    intent.pipeline().apps().await.unwrap();
    intent.account().statement(None).await.unwrap();
}
