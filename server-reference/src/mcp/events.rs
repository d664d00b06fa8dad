//! A session's log as an Agent MCP resource, `intent://sessions/{sessionId}/events{?cursor}`:
//! reading it gives the page at the retained log's start, or after `cursor` (the EventPage JSON,
//! whose own cursor reads on), and a `subscriptions/listen` request that names it is told of
//! every append while it stays open, so that a subscriber reads just what was appended from its
//! last cursor; a handshake client's `resources/subscribe` is told of them over its session. The
//! listener follows the log through the same notifier that wakes long-polls and SSE streams.

use axum::body::Body;
use axum::http::Request;
use futures_util::StreamExt;
use intent_models::Scope;
use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{
    ListResourceTemplatesResult, ReadResourceResult, ResourceContents, ResourceTemplate,
    ResourceUpdatedNotificationParam, SubscriptionFilter,
};
use rmcp::service::{Peer, SubscriptionContext};
use serde_json::json;

use super::api::{Api, principal};
use super::tools::percent_encode;
use crate::agent::StreamItem;
use crate::auth::principal::Principal;
use crate::ids::SessionId;

const SCHEME: &str = "intent://sessions/";
const SUFFIX: &str = "/events";

/// The one resource template.
pub fn templates() -> ListResourceTemplatesResult {
    let template: ResourceTemplate = serde_json::from_value(json!({
        "uriTemplate": format!("{SCHEME}{{sessionId}}{SUFFIX}{{?cursor}}"),
        "name": "session-events",
        "title": "A session's event log",
        "description": "The events of one of your sessions, a page at a time: from the start \
                        of its log, or after `cursor` (each page gives the cursor to read on \
                        from). Subscribe to be told when events are appended, then read from \
                        your last cursor.",
        "mimeType": "application/json",
    }))
    .expect("the template is well formed");
    ListResourceTemplatesResult::with_all_items(vec![template])
}

/// The session a resource URI names, and the cursor it reads after (its `cursor` query
/// parameter, percent-decoded), if any.
fn parse(uri: &str) -> Option<(SessionId, Option<String>)> {
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    let id = path.strip_prefix(SCHEME)?.strip_suffix(SUFFIX)?;
    if id.contains('/') {
        return None;
    }
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).ok()?;
    let mut cursor = None;
    for (name, value) in pairs {
        match name.as_str() {
            "cursor" if cursor.is_none() => cursor = Some(value),
            _ => return None,
        }
    }
    Some((id.parse().ok()?, cursor))
}

/// Reads the log of the session `uri` names, as the caller.
pub async fn read(
    api: &Api,
    principal: &Principal,
    uri: &str,
) -> Result<ReadResourceResult, McpError> {
    let Some((session, cursor)) = parse(uri) else {
        return Err(McpError::invalid_params(
            format!("{uri} is not a resource of this server"),
            None,
        ));
    };
    let mut path = format!("/v1/agent/chat/{}", percent_encode(&session));
    if let Some(cursor) = cursor {
        let query = serde_urlencoded::to_string([("cursor", cursor)]).expect("a pair encodes");
        path = format!("{path}?{query}");
    }
    let request = Request::builder()
        .uri(path)
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
        .filter(|uri| parse(uri).is_some())
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
    may_follow(&principal)?;
    let uris = context
        .accepted()
        .resource_subscriptions
        .clone()
        .unwrap_or_default();
    let mut followers = Vec::new();
    for uri in uris {
        let sink = context.sink().clone();
        let tell = move |uri: String| {
            let sink = sink.clone();
            async move { sink.notify_resource_updated(uri).await.is_ok() }
        };
        if let Ok(follower) = follower(api, &principal, uri, tell).await {
            followers.push(follower);
        }
    }
    tokio::select! {
        _ = futures_util::future::join_all(followers) => {}
        _ = context.cancelled() => {}
    }
    Ok(())
}

/// A handshake client's `resources/subscribe` to `uri`: the follower that tells its session's
/// `peer` of each append, for the caller to run until the client unsubscribes. Refused when the
/// caller lacks `agent:read` or the URI names no session of theirs.
pub async fn follow(
    api: &Api,
    principal: &Principal,
    uri: String,
    peer: Peer<RoleServer>,
) -> Result<impl Future<Output = ()> + Send + 'static, McpError> {
    may_follow(principal)?;
    let tell = move |uri: String| {
        let peer = peer.clone();
        async move {
            let note = ResourceUpdatedNotificationParam::new(uri);
            peer.notify_resource_updated(note).await.is_ok()
        }
    };
    follower(api, principal, uri.clone(), tell)
        .await
        .map_err(|()| {
            McpError::resource_not_found(format!("{uri} names no session of yours"), None)
        })
}

fn may_follow(principal: &Principal) -> Result<(), McpError> {
    if principal.has_scope(Scope::AgentRead.as_str()) {
        return Ok(());
    }
    Err(McpError::invalid_request(
        "subscribing to session logs needs scope agent:read",
        None,
    ))
}

/// Follows the log of the session `uri` names: `tell`s `uri` on each append, until `tell`
/// answers false (the subscriber is gone) or the caller's token expires. `Err` when the URI
/// names no session the caller may read.
async fn follower<F, T>(
    api: &Api,
    principal: &Principal,
    uri: String,
    tell: T,
) -> Result<impl Future<Output = ()> + Send + 'static, ()>
where
    T: Fn(String) -> F + Send + Sync + 'static,
    F: Future<Output = bool> + Send,
{
    let (session, _) = parse(&uri).ok_or(())?;
    let log = api
        .state()
        .log()
        .stream(&principal.account, &session, None, None)
        .await
        .map_err(|_| ())?;
    let expiry = principal.remaining();
    Ok(async move {
        let appends = async {
            // The first page is the log as it stands; each one after it is an append.
            let pages = log.filter(|item| std::future::ready(matches!(item, StreamItem::Page(_))));
            let mut pages = std::pin::pin!(pages);
            pages.next().await;
            while pages.next().await.is_some() {
                if !tell(uri.clone()).await {
                    return;
                }
            }
        };
        tokio::select! {
            _ = appends => {}
            _ = tokio::time::sleep(expiry) => {}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_uri_names_a_session_and_maybe_a_cursor() {
        let (session, cursor) = parse("intent://sessions/ses_1/events").unwrap();
        assert_eq!((session.as_str(), cursor), ("ses_1", None));
        let (_, cursor) = parse("intent://sessions/ses_1/events?cursor=a%2Bb").unwrap();
        assert_eq!(cursor.as_deref(), Some("a+b"));
        for other in [
            "intent://sessions/ses_1/events?limit=3",
            "intent://sessions/a/b/events",
            "intent://sessions/ses_1/log",
        ] {
            assert!(parse(other).is_none(), "{other}");
        }
    }
}
