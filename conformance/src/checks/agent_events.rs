//! The event log read by long-poll pages: cursors, their errors, and `wait` (parts 2.11, 4.2, 6, 7).

use std::time::{Duration, Instant};

use serde_json::Value;

use super::{
    TERMINAL, alter_signature, cursor_taken, poll, read_log, read_pages, run, seqs, settle,
    settled_session, start_turn, stream_request, stream_takes_cursor, text, turn_state,
};
use crate::checks::{Category, Check};
use crate::finding::excerpt;
use crate::finding::{Finding, Verdict, ensure, fail, profile, skip};
use crate::target::{Role, Target};

const ON: &[&str] = &["GET /v1/agent/chat/{sessionId}"];

/// How a held poll ends (held for `wait`, an empty page at its end) is our profile.
const WAITING: &[&str] = &[
    "GET /v1/agent/chat/{sessionId}",
    "#/paths/~1v1~1agent~1chat~1{sessionId}/get/x-profile-note",
];

const ON_STREAM: &[&str] = &[
    "GET /v1/agent/chat/{sessionId}",
    "GET /v1/agent/chat/{sessionId}/stream",
];

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "agent.events.round-trip".into(),
            category: Category::AgentEvents,
            requirement: "Following a page's cursor while `has_more` is true MUST deliver the events appended after it, each once and none delivered before it, in the order the log holds them.",
            section: "2.11",
            rests_on: ON.to_vec(),
            operation: None,
            run: run!(round_trip),
        },
        Check {
            id: "agent.events.invalid-cursor".into(),
            category: Category::AgentEvents,
            requirement: "A malformed cursor MUST be answered with 400 and error `invalid_cursor`, on the event page and when it opens the stream, and a request without a cursor MUST then return the page to reconcile against.",
            section: "7.3",
            rests_on: ON_STREAM.to_vec(),
            operation: None,
            run: run!(invalid_cursor),
        },
        Check {
            id: "agent.events.foreign-cursor".into(),
            category: Category::AgentEvents,
            requirement: "A cursor of another session MUST be answered with 400 and error `invalid_cursor`.",
            section: "7.3",
            rests_on: ON.to_vec(),
            operation: None,
            run: run!(foreign_cursor),
        },
        Check {
            id: "agent.events.expired-cursor".into(),
            category: Category::AgentEvents,
            requirement: "An expired cursor MUST be answered with 410, on the event page and when it opens the stream, and a request without a cursor MUST then return the page to reconcile against.",
            section: "7.4, 7.5",
            rests_on: ON_STREAM.to_vec(),
            operation: None,
            run: run!(expired_cursor),
        },
        Check {
            id: "agent.events.wait".into(),
            category: Category::AgentEvents,
            requirement: "A poll with `wait` and nothing new MUST be held for about `wait` milliseconds and then answered with a page without events.",
            section: "4.2",
            rests_on: WAITING.to_vec(),
            operation: None,
            run: run!(wait),
        },
        Check {
            id: "agent.events.wake".into(),
            category: Category::AgentEvents,
            requirement: "A poll held with `wait` MUST be answered with a success within `wait` milliseconds, allowing 5 s for the network (being held until an event is appended, and answered with it at once, is a profile assertion).",
            section: "4.2",
            rests_on: ON.to_vec(),
            operation: None,
            run: run!(wake),
        },
    ]
}

async fn round_trip(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let (session, first) = start_turn(target, token, None, "conformance: first turn").await?;
    let (before, cursor) = settle(target, token, &session, &first).await?;
    cursor_taken(target, token, &session, &cursor, &before).await?;
    let (_, second) = start_turn(target, token, Some(&session), "conformance: second turn").await?;
    // From the first turn's cursor, following `has_more` and each page's cursor at once: each
    // later event once, none before.
    let after = events_until_settled(target, token, &session, &cursor, &second).await?;
    let (whole, _) = read_log(target, token, &session).await?;
    ensure(!after.iter().any(|event| before.contains(event)), || {
        "the pages after a cursor repeat events delivered before it".into()
    })?;
    ensure(
        after
            .iter()
            .enumerate()
            .all(|(at, event)| !after[..at].contains(event)),
        || "the pages after a cursor deliver an event twice".into(),
    )?;
    ensure(turn_state(target, &after, &second).is_some(), || {
        format!("the pages after the first turn's cursor lack the second turn {second}")
    })?;
    // One ordered log (part 6): read whole, it orders the events the reads before and after the
    // cursor delivered as they did (a read without a cursor may start later than the first).
    let delivered: Vec<&Value> = before.iter().chain(&after).collect();
    let in_whole: Vec<&Value> = whole.iter().filter(|e| delivered.contains(e)).collect();
    let kept: Vec<&Value> = delivered
        .into_iter()
        .filter(|e| whole.contains(e))
        .collect();
    ensure(in_whole == kept, || {
        "the log read whole orders its events otherwise than the reads around the cursor".into()
    })?;
    // Our profile: `limit` pages, and `seq` numbers from 1 without gaps.
    let (pages, _) = read_pages(target, token, &session, "limit=2").await?;
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    profile(sizes.iter().all(|size| *size <= 2), || {
        format!("limit=2 gave pages of {sizes:?} events")
    });
    let paged = pages.concat();
    let numbers = seqs(&paged);
    let expected: Vec<i64> = (1..=numbers.len() as i64).collect();
    profile(numbers == expected, || {
        format!("sequence numbers read page by page: {numbers:?}")
    });
    profile(
        paged.len() >= whole.len() && paged[..whole.len()] == whole[..],
        || "page-by-page reading gave other events than one read".into(),
    );
    Ok(())
}

/// The events after `cursor`, following each page's cursor as soon as it comes (a held poll of
/// `wait=2000` each), until `turn` has reached a terminal state and no more is ready. A cursor
/// that expires between two polls makes the check inconclusive.
async fn events_until_settled(
    target: &Target,
    token: &str,
    session: &str,
    cursor: &str,
    turn: &str,
) -> Result<Vec<Value>, Finding> {
    let deadline = Instant::now() + target.settings.turn_timeout;
    let mut cursor = cursor.to_owned();
    let mut events = Vec::new();
    loop {
        let reply = poll(target, token, session, Some(&cursor), "wait=2000").await?;
        if reply.status == 410 {
            return skip("inconclusive: a page's cursor expired before the next poll");
        }
        reply.ensure_success("following the log from a cursor")?;
        events.extend(reply.body["events"].as_array().cloned().unwrap_or_default());
        cursor = text(&reply.body, "/cursor")?.to_owned();
        let settled =
            turn_state(target, &events, turn).is_some_and(|state| TERMINAL.contains(&state));
        if settled && reply.body["has_more"] != true {
            return Ok(events);
        }
        if Instant::now() > deadline {
            return Err(crate::finding::failure(format!(
                "following the log, turn {turn} reached no terminal state within {} s",
                target.settings.turn_timeout.as_secs()
            )));
        }
    }
}

/// What the stream answers when `cursor` opens it: a refusal must be `status` (normative, with
/// `code` when given). A stream that opens ignored the cursor: a failure where the stream takes
/// the cursor `proof` issued after the events `proof` gives (with a turn appended since), a
/// profile finding where it does not take a cursor through `profile.streamCursor`.
async fn stream_refuses(
    target: &Target,
    token: &str,
    (session, proof): (&str, (&str, &[Value])),
    cursor: &str,
    (status, code): (u16, Option<&str>),
    what: &str,
) -> Verdict {
    let (path, call) = stream_request(target, token, session, Some(cursor));
    // A stream that opens is left unread.
    let reply = call.send().await?;
    if (200..300).contains(&reply.status) {
        // The proof: a turn appended after the cursor `proof` issued, a stream opened there
        // sends it and none of the events before.
        let (issued, seen) = proof;
        let message = "conformance: after the cursor";
        let (_, turn) = start_turn(target, token, Some(session), message).await?;
        settle(target, token, session, &turn).await?;
        if stream_takes_cursor(target, token, session, issued, seen).await? {
            return fail(format!(
                "GET {path} with {what} opened the stream, which takes a cursor it issued there: \
                 expected {status}"
            ));
        }
        profile(false, || {
            format!("the stream opened with {what}: it does not read the cursor means")
        });
        return Ok(());
    }
    let what = format!("GET {path} with {what}");
    match code {
        Some(code) => reply.ensure_error(status, code, &what),
        None => reply.ensure_envelope(status, &what),
    }
    .map(|_| ())
}

async fn invalid_cursor(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let (session, events, cursor) = settled_session(target, token, "conformance: cursors").await?;
    cursor_taken(target, token, &session, &cursor, &events).await?;
    for bad in ["not-a-cursor", "v1.e30.AAAA"] {
        poll(target, token, &session, Some(bad), "")
            .await?
            .ensure_error(400, "invalid_cursor", &format!("cursor {bad:?}"))?;
        let what = format!("cursor {bad:?}");
        let proof = (cursor.as_str(), events.as_slice());
        let refusal = (400, Some("invalid_cursor"));
        stream_refuses(target, token, (&session, proof), bad, refusal, &what).await?;
    }
    // Part 7.5: after 400 `invalid_cursor` the client requests the session without a cursor and
    // reconciles the page: that request is answered with the log.
    let (pages, _) = read_pages(target, token, &session, "").await?;
    ensure(pages.iter().any(|page| !page.is_empty()), || {
        "the request without a cursor after 400 `invalid_cursor` returned no events to reconcile \
         against"
            .into()
    })?;
    // A changed signature makes a cursor malformed only where cursors are signed, as the
    // profile's are (part 2.11: cursors are opaque).
    let altered = alter_signature(&cursor);
    let reply = poll(target, token, &session, Some(&altered), "").await?;
    profile(
        reply.status == 400
            && target.settings.means.error_code(&reply.body) == Some("invalid_cursor"),
        || {
            format!(
                "cursor {altered:?}, its signature changed: {} {}, where the profile answers 400 \
                 `invalid_cursor`",
                reply.status,
                excerpt(&reply.text)
            )
        },
    );
    Ok(())
}

async fn foreign_cursor(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let (first, events, _) = settled_session(target, token, "conformance: one session").await?;
    let (second, _, _) = settled_session(target, token, "conformance: another session").await?;
    // A cursor issued now, so that a short cursor lifetime cannot turn the answer into 410.
    let (_, cursor) = read_log(target, token, &first).await?;
    cursor_taken(target, token, &first, &cursor, &events).await?;
    poll(target, token, &second, Some(&cursor), "")
        .await?
        .ensure_error(
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
    let (session, events, cursor) = settled_session(target, token, "conformance: expiry").await?;
    cursor_taken(target, token, &session, &cursor, &events).await?;
    tokio::time::sleep(ttl + Duration::from_secs(1)).await;
    poll(target, token, &session, Some(&cursor), "")
        .await?
        .ensure_envelope(410, "a cursor past its lifetime")?;
    let what = "a cursor past its lifetime";
    // A cursor issued now proves that the stream takes one.
    let (fresh_events, fresh) = read_log(target, token, &session).await?;
    let proof = (fresh.as_str(), fresh_events.as_slice());
    stream_refuses(target, token, (&session, proof), &cursor, (410, None), what).await?;
    let reconcile = poll(target, token, &session, None, "").await?;
    reconcile.ensure_success("the reconcile request after 410")?;
    ensure(
        reconcile.body["events"]
            .as_array()
            .is_some_and(|events| !events.is_empty()),
        || "the reconcile page has no events".into(),
    )
}

async fn wait(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let (session, _, cursor) = settled_session(target, token, "conformance: wait").await?;
    let started = Instant::now();
    let reply = poll(target, token, &session, Some(&cursor), "wait=1000").await?;
    let held = started.elapsed();
    reply.ensure_success("a poll with wait=1000 at the end of the log")?;
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
    let (session, events, cursor) = settled_session(target, token, "conformance: wake").await?;
    // The poll holds the freshest cursor: a deployment's may live two seconds, and a retry after
    // a 429 waits one.
    let cursor = cursor_taken(target, token, &session, &cursor, &events).await?;
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
    // Part 4.2: `wait` is the long-poll's duration, so the poll is answered by the time it runs
    // out (20 s, and 5 s for the network). Being held until an event and woken by it at once is
    // the profile's (the operation's x-profile-note).
    ensure(
        (200..300).contains(&reply.status) && answered < Duration::from_secs(25),
        || {
            format!(
                "a poll with wait=20000 was answered {} after {} ms",
                reply.status,
                answered.as_millis()
            )
        },
    )?;
    profile(reply.status == 200, || {
        format!(
            "a held poll answered {}, where the profile answers 200",
            reply.status
        )
    });
    profile(answered >= appended, || {
        format!(
            "the held poll was answered after {} ms, before the turn was started at {} ms",
            answered.as_millis(),
            appended.as_millis()
        )
    });
    // Nothing else writes to the settled session: any event the held poll brings is new.
    let events = reply.body["events"].as_array().cloned().unwrap_or_default();
    profile(!events.is_empty(), || {
        format!(
            "the held poll was answered after {} ms without the events of the turn {turn} started \
             at {} ms: {}",
            answered.as_millis(),
            appended.as_millis(),
            excerpt(&reply.text)
        )
    });
    profile(
        events.iter().any(|event| event["turnId"] == turn.as_str()),
        || format!("the held poll's events name no `turnId` {turn}"),
    );
    profile(answered < Duration::from_secs(10), || {
        format!(
            "the held poll was answered {} ms after it was sent, not woken by the turn",
            answered.as_millis()
        )
    });
    Ok(())
}
