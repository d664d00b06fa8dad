//! Sessions read, updated and deleted (part 4.2).

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::{fresh_key, read, run, settle, start_turn};
use crate::checks::{Category, Check};
use crate::finding::excerpt;
use crate::finding::{Finding, Verdict, ensure, profile};
use crate::target::{Role, Target};

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "agent.sessions.update".into(),
            category: Category::AgentSessions,
            requirement: "A session MUST read as a Session, and a PATCH of its `title` and `archived` MUST answer the Session with those values, which later reads show.",
            section: "4.2",
            rests_on: vec![
                "GET /v1/agent/sessions/{sessionId}",
                "PATCH /v1/agent/sessions/{sessionId}",
            ],
            operation: None,
            run: run!(update),
        },
        Check {
            id: "agent.sessions.delete".into(),
            category: Category::AgentSessions,
            requirement: "A deleted session MUST be gone: reading it and its log MUST answer 404, and it MUST take no new turn (404).",
            section: "4.2",
            rests_on: vec!["DELETE /v1/agent/sessions/{sessionId}"],
            operation: None,
            run: run!(delete),
        },
    ]
}

/// `PATCH path` with `body`, expected 2xx (part 4.2 gives no status); the Session answered.
async fn patch(target: &Target, token: &str, path: &str, body: Value) -> Result<Value, Finding> {
    let reply = target
        .request(Method::PATCH, path)
        .bearer(token)
        .json(&body)
        .send()
        .await?;
    ensure((200..300).contains(&reply.status), || {
        format!(
            "PATCH {path} {body}: {} {}",
            reply.status,
            excerpt(&reply.text)
        )
    })?;
    Ok(reply.body)
}

async fn update(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let (session, turn) = start_turn(target, token, None, "hello").await?;
    settle(target, token, &session, &turn).await?;
    let path = format!("/v1/agent/sessions/{session}");
    let before = read(target, token, &path).await?;
    ensure(
        before.get("id").is_none_or(|id| *id == json!(session)),
        || format!("GET {path} answered the session {}", before["id"]),
    )?;
    // `updatedAt` counts seconds: a change must come in a later second to move it.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    // Both members in every PATCH: which one is required is not shown.
    let title = fresh_key("title");
    let archived = before["archived"].as_bool().unwrap_or(false);
    let body = json!({ "title": title, "archived": archived });
    let renamed = patch(target, token, &path, body).await?;
    let expected = json!([session, title, archived]);
    // Part 2.9 gives a Session's fields and no required list: a member left out is not judged.
    let fields = |s: &Value, expected: &Value| -> Value {
        let names = ["id", "title", "archived"];
        let members = names.iter().enumerate().map(|(at, name)| {
            s.get(*name)
                .cloned()
                .unwrap_or_else(|| expected[at].clone())
        });
        Value::from(members.collect::<Vec<_>>())
    };
    ensure(fields(&renamed, &expected) == expected, || {
        format!(
            "after renaming to {title:?}, id, title and archived are {}; expected {expected}",
            fields(&renamed, &expected)
        )
    })?;
    let (was, now) = (&before["updatedAt"], &renamed["updatedAt"]);
    profile(now.as_i64() > was.as_i64(), || {
        format!("a rename a second later moved `updatedAt` from {was} to {now}")
    });
    let archived = patch(
        target,
        token,
        &path,
        json!({ "title": title, "archived": true }),
    )
    .await?;
    let expected = json!([session, title, true]);
    ensure(fields(&archived, &expected) == expected, || {
        format!(
            "after archiving, id, title and archived are {}; expected {expected}",
            fields(&archived, &expected)
        )
    })?;
    let reread = read(target, token, &path).await?;
    ensure(fields(&reread, &expected) == expected, || {
        format!(
            "a read after the changes shows id, title and archived {}; expected {expected}",
            fields(&reread, &expected)
        )
    })?;
    // Our profile takes a PATCH of one member.
    let single = target
        .request(Method::PATCH, &path)
        .bearer(token)
        .json(&json!({ "archived": true }))
        .send()
        .await?;
    profile((200..300).contains(&single.status), || {
        format!("a PATCH of `archived` alone was answered {}", single.status)
    });
    Ok(())
}

async fn delete(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let (session, _) = start_turn(target, token, None, "hello").await?;
    let path = format!("/v1/agent/sessions/{session}");
    let deleted = target
        .request(Method::DELETE, &path)
        .bearer(token)
        .send()
        .await?;
    ensure((200..300).contains(&deleted.status), || {
        format!("DELETE {path} answered {} {}", deleted.status, deleted.text)
    })?;
    for gone in [path.clone(), format!("/v1/agent/chat/{session}")] {
        target
            .request(Method::GET, &gone)
            .bearer(token)
            .send()
            .await?
            .ensure_envelope(404, &format!("GET {gone} after DELETE {path}"))?;
    }
    target
        .request(Method::POST, "/v1/agent/chat")
        .bearer(token)
        .json(
            &target
                .settings
                .means
                .chat
                .request("hello again", Some(&session)),
        )
        .send()
        .await?
        .ensure_envelope(404, &format!("a turn in the session after DELETE {path}"))?;
    Ok(())
}
