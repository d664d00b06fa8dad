//! The event log read by long-poll pages: cursors, their errors, and `wait` (parts 2.11, 4.2, 6, 7).

use std::time::{Duration, Instant};

use reqwest::Method;

use super::{alter_signature, encode, poll, read_log, read_pages, run, seqs, settle, start_turn};
use crate::check::{Category, Check};
use crate::finding::{Finding, Verdict, ensure, skip};
use crate::target::{Role, Target, excerpt};

const ON: &[&str] = &[
    "GET /v1/agent/chat/{sessionId}",
    "#/components/parameters/Cursor",
];

const ON_STREAM: &[&str] = &[
    "GET /v1/agent/chat/{sessionId}",
    "GET /v1/agent/chat/{sessionId}/stream",
    "#/components/parameters/Cursor",
];

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "agent.events.round-trip",
            category: Category::AgentEvents,
            requirement: "Following the cursor from the reconcile page while `has_more` is true MUST deliver every event once, in sequence order, without gaps.",
            section: "2.11",
            rests_on: &[
                "GET /v1/agent/chat/{sessionId}",
                "#/components/parameters/Cursor",
                "#/components/parameters/Limit",
                "#/components/schemas/AgentEvent",
            ],
            operation: None,
            run: run!(round_trip),
        },
        Check {
            id: "agent.events.invalid-cursor",
            category: Category::AgentEvents,
            requirement: "A malformed cursor MUST be answered with 400 and error `invalid_cursor`, on the event page and when it opens the stream.",
            section: "7.3",
            rests_on: ON_STREAM,
            operation: None,
            run: run!(invalid_cursor),
        },
        Check {
            id: "agent.events.foreign-cursor",
            category: Category::AgentEvents,
            requirement: "A cursor of another session MUST be answered with 400 and error `invalid_cursor`.",
            section: "7.3",
            rests_on: ON,
            operation: None,
            run: run!(foreign_cursor),
        },
        Check {
            id: "agent.events.expired-cursor",
            category: Category::AgentEvents,
            requirement: "An expired cursor MUST be answered with 410, on the event page and when it opens the stream, and a request without a cursor MUST then return the page to reconcile against.",
            section: "7.4, 7.5",
            rests_on: &[
                "GET /v1/agent/chat/{sessionId}",
                "GET /v1/agent/chat/{sessionId}/stream",
                "#/components/parameters/Cursor",
            ],
            operation: None,
            run: run!(expired_cursor),
        },
        Check {
            id: "agent.events.wait",
            category: Category::AgentEvents,
            requirement: "A poll with `wait` and nothing new MUST be held for about `wait` milliseconds and then answered with a page without events.",
            section: "4.2",
            rests_on: ON,
            operation: None,
            run: run!(wait),
        },
        Check {
            id: "agent.events.wake",
            category: Category::AgentEvents,
            requirement: "A held poll MUST NOT be answered before an event is appended, and MUST be answered with the appended events as soon as one is, before `wait` ends.",
            section: "4.2",
            rests_on: ON,
            operation: None,
            run: run!(wake),
        },
    ]
}

/// A session with one settled turn; returns its id and the cursor after its log.
async fn settled_session(
    target: &Target,
    token: &str,
    message: &str,
) -> Result<(String, String), Finding> {
    let (session, turn) = start_turn(target, token, None, message).await?;
    let (_, cursor) = settle(target, token, &session, &turn).await?;
    Ok((session, cursor))
}

async fn round_trip(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let (session, first) = start_turn(target, token, None, "conformance: first turn").await?;
    settle(target, token, &session, &first).await?;
    let (_, second) = start_turn(target, token, Some(&session), "conformance: second turn").await?;
    let (whole, _) = settle(target, token, &session, &second).await?;
    // The same log again, two events a page.
    let (pages, _) = read_pages(target, token, &session, "limit=2").await?;
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    ensure(sizes.iter().all(|size| *size <= 2), || {
        format!("limit=2 gave pages of {sizes:?} events")
    })?;
    let paged = pages.concat();
    let numbers = seqs(&paged);
    let expected: Vec<i64> = (1..=numbers.len() as i64).collect();
    ensure(numbers == expected, || {
        format!("sequence numbers read page by page: {numbers:?}")
    })?;
    ensure(paged.len() >= whole.len(), || {
        format!(
            "{} events page by page, {} in one read",
            paged.len(),
            whole.len()
        )
    })?;
    ensure(paged[..whole.len()] == whole[..], || {
        "page-by-page reading gave other events than one read".into()
    })
}

async fn invalid_cursor(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let (session, cursor) = settled_session(target, token, "conformance: cursors").await?;
    let altered = alter_signature(&cursor);
    for bad in ["not-a-cursor", "v1.e30.AAAA", altered.as_str()] {
        poll(target, token, &session, Some(bad), "")
            .await?
            .expect_error(400, "invalid_cursor", &format!("cursor {bad:?}"))?;
        let path = format!("/v1/agent/chat/{session}/stream?cursor={}", encode(bad));
        target
            .request(Method::GET, &path)
            .bearer(token)
            .send()
            .await?
            .expect_error(
                400,
                "invalid_cursor",
                &format!("the stream with cursor {bad:?}"),
            )?;
    }
    Ok(())
}

async fn foreign_cursor(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let (first, _) = settled_session(target, token, "conformance: one session").await?;
    let (second, _) = settled_session(target, token, "conformance: another session").await?;
    // A cursor issued now, so that a short cursor lifetime cannot turn the answer into 410.
    let (_, cursor) = read_log(target, token, &first).await?;
    poll(target, token, &second, Some(&cursor), "")
        .await?
        .expect_error(
            400,
            "invalid_cursor",
            &format!("a cursor of session {first} on session {second}"),
        )?;
    Ok(())
}

async fn expired_cursor(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let Some(ttl) = target
        .settings
        .cursor_ttl
        .filter(|ttl| *ttl <= Duration::from_secs(15))
    else {
        return skip("needs a deployment whose cursors live at most 15 s (--cursor-ttl)");
    };
    let (session, cursor) = settled_session(target, token, "conformance: expiry").await?;
    tokio::time::sleep(ttl + Duration::from_secs(1)).await;
    poll(target, token, &session, Some(&cursor), "")
        .await?
        .expect_envelope(410, "a cursor past its lifetime")?;
    let path = format!("/v1/agent/chat/{session}/stream?cursor={}", encode(&cursor));
    let stream = target
        .request(Method::GET, &path)
        .bearer(token)
        .open()
        .await?;
    ensure(stream.status() == 410, || {
        format!(
            "GET {path} with a cursor past its lifetime: {}, not 410 before any event",
            stream.status()
        )
    })?;
    let reconcile = poll(target, token, &session, None, "").await?;
    reconcile.expect(200, "the reconcile request after 410")?;
    ensure(
        reconcile.body["events"]
            .as_array()
            .is_some_and(|events| !events.is_empty()),
        || "the reconcile page has no events".into(),
    )
}

async fn wait(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let (session, cursor) = settled_session(target, token, "conformance: wait").await?;
    let started = Instant::now();
    let reply = poll(target, token, &session, Some(&cursor), "wait=1000").await?;
    let held = started.elapsed();
    reply.expect(200, "a poll with wait=1000 at the end of the log")?;
    ensure(
        reply.body["events"].as_array().is_some_and(Vec::is_empty),
        || "events appeared in a settled session".into(),
    )?;
    ensure(
        held >= Duration::from_millis(900) && held < Duration::from_secs(6),
        || format!("wait=1000 was answered after {} ms", held.as_millis()),
    )
}

async fn wake(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let (session, cursor) = settled_session(target, token, "conformance: wake").await?;
    let started = Instant::now();
    let ((reply, answered), (turn, appended)) = tokio::join!(
        async {
            let reply = poll(target, token, &session, Some(&cursor), "wait=20000").await;
            (reply, started.elapsed())
        },
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let appended = started.elapsed();
            let turn = start_turn(target, token, Some(&session), "conformance: wake up").await;
            (turn, appended)
        }
    );
    let (reply, (_, turn)) = (reply?, turn?);
    reply.expect(200, "a held poll")?;
    ensure(answered >= appended, || {
        format!(
            "the held poll was answered after {} ms, before the turn was started at {} ms",
            answered.as_millis(),
            appended.as_millis()
        )
    })?;
    let events = reply.body["events"].as_array().cloned().unwrap_or_default();
    ensure(
        events.iter().any(|event| event["turnId"] == turn.as_str()),
        || {
            format!(
                "the held poll was answered after {} ms without an event of the turn {turn} started \
             at {} ms: {}",
                answered.as_millis(),
                appended.as_millis(),
                excerpt(&reply.text)
            )
        },
    )?;
    ensure(answered < Duration::from_secs(10), || {
        format!(
            "the held poll was answered {} ms after it was sent",
            answered.as_millis()
        )
    })
}
