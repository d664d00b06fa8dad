//! A session's log as an Agent MCP resource, `intent://sessions/{sessionId}/events`: reading it
//! gives the page at the retained log's start (the EventPage JSON), and a `subscriptions/listen`
//! request that names it is told of every append while it stays open. The listener follows the
//! log through the same notifier that wakes long-polls and SSE streams.

use axum::body::Body;
use axum::http::Request;
use futures_util::StreamExt;
use intent_models::Scope;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ListResourceTemplatesResult, ReadResourceResult, ResourceContents, ResourceTemplate,
    SubscriptionFilter,
};
use rmcp::service::SubscriptionContext;
use serde_json::json;

use super::api::{Api, principal};
use super::tools::percent_encode;
use crate::agent::StreamItem;
use crate::ids::SessionId;

const SCHEME: &str = "intent://sessions/";
const SUFFIX: &str = "/events";

/// The one resource template.
pub fn templates() -> ListResourceTemplatesResult {
    let template: ResourceTemplate = serde_json::from_value(json!({
        "uriTemplate": format!("{SCHEME}{{sessionId}}{SUFFIX}"),
        "name": "session-events",
        "title": "A session's event log",
        "description": "The durable events of one of your sessions (an EventPage from the \
                        retained log's start); subscribe to be told of appends.",
        "mimeType": "application/json",
    }))
    .expect("the template is well formed");
    ListResourceTemplatesResult::with_all_items(vec![template])
}

/// The session a resource URI names.
fn session_of(uri: &str) -> Option<SessionId> {
    let id = uri.strip_prefix(SCHEME)?.strip_suffix(SUFFIX)?;
    (!id.contains('/')).then_some(id.parse().ok()?)
}

/// Reads the log of the session `uri` names, as the caller.
pub async fn read(
    api: &Api,
    principal: &crate::auth::principal::Principal,
    uri: &str,
) -> Result<ReadResourceResult, McpError> {
    let Some(session) = session_of(uri) else {
        return Err(McpError::invalid_params(
            format!("{uri} is not a resource of this server"),
            None,
        ));
    };
    let request = Request::builder()
        .uri(format!("/v1/agent/chat/{}", percent_encode(&session)))
        .body(Body::empty())
        .expect("a session path is a valid request");
    let (status, page) = api.send(principal, request).await?;
    if !status.is_success() {
        return Err(McpError::resource_not_found(
            format!("{uri}: the Agent answered {status}"),
            Some(page),
        ));
    }
    let contents = ResourceContents::TextResourceContents {
        uri: uri.to_owned(),
        mime_type: Some("application/json".into()),
        text: page.to_string(),
        meta: None,
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

/// Session logs one subscription may follow at most.
const MOST_SUBSCRIPTIONS: usize = 32;

/// The part of a requested filter this server serves: subscriptions to session logs, at most
/// [`MOST_SUBSCRIPTIONS`] of them.
pub fn accepted(requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
    let uris: Vec<String> = requested
        .resource_subscriptions
        .iter()
        .flatten()
        .filter(|uri| session_of(uri).is_some())
        .take(MOST_SUBSCRIPTIONS)
        .cloned()
        .collect();
    Some(
        SubscriptionFilter::builder()
            .resource_subscriptions(uris)
            .build(),
    )
}

/// Tells the subscriber of each append to the sessions it named, until it goes away or its
/// token expires (as an SSE stream ends). It needs `agent:read`; a session the caller does not
/// own (or that does not exist) is never reported.
pub async fn listen(api: &Api, context: SubscriptionContext) -> Result<(), McpError> {
    let principal = principal(context.request_context())?;
    if !principal.has_scope(Scope::AgentRead.as_str()) {
        return Err(McpError::invalid_request(
            "subscribing to session logs needs scope agent:read",
            None,
        ));
    }
    let uris = context
        .accepted()
        .resource_subscriptions
        .clone()
        .unwrap_or_default();
    let mut followers = Vec::new();
    for uri in uris {
        let Some(session) = session_of(&uri) else {
            continue;
        };
        let Ok(log) = api
            .state()
            .log()
            .stream(&principal.account, &session, None, None)
            .await
        else {
            continue;
        };
        let sink = context.sink().clone();
        followers.push(async move {
            // The first page is the log as it stands; each one after it is an append.
            let pages = log.filter(|item| std::future::ready(matches!(item, StreamItem::Page(_))));
            let mut pages = std::pin::pin!(pages);
            pages.next().await;
            while pages.next().await.is_some() {
                if sink.notify_resource_updated(uri.clone()).await.is_err() {
                    return;
                }
            }
        });
    }
    tokio::select! {
        _ = futures_util::future::join_all(followers) => {}
        _ = context.cancelled() => {}
        _ = tokio::time::sleep(principal.remaining()) => {}
    }
    Ok(())
}
