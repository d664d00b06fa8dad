//! The SSE projection of the event log (part 6).

use std::time::{Duration, Instant};

use serde_json::Value;

use super::page_members::{PAGE_FIELDS, entry_kind};
use super::{Tried, run, settle, start_turn, stream_request, text, tried};
use crate::checks::{Category, Check};
use crate::finding::{Broke, Finding, Verdict, ensure, fail, skip};
use crate::means::inconclusive;
use crate::spec::spec;
use crate::sse::Frame;
use crate::target::Reader;
use crate::target::{Role, Target};

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "agent.sse.events".into(),
            category: Category::AgentSse,
            requirement: "The stream MUST carry the events appended while it is open, MUST send only the events `page`, `message` and `resync`, and every `page` MUST carry an EventPage (a `message` without an id is a profile assertion).",
            section: "6",
            rests_on: vec![
                "GET /v1/agent/chat/{sessionId}/stream",
                "#/components/schemas/EventPage",
            ],
            operation: None,
            run: run!(event_names),
        },
        Check {
            id: "agent.sse.ids".into(),
            category: Category::AgentSse,
            requirement: "A `page` event's id MUST be its page's cursor, and a `message` event MUST NOT carry an id.",
            section: "6",
            rests_on: vec![
                "GET /v1/agent/chat/{sessionId}/stream",
                "#/components/parameters/LastEventId",
            ],
            operation: None,
            run: run!(ids),
        },
        Check {
            id: "agent.sse.resume".into(),
            category: Category::AgentSse,
            requirement: "A stream reopened, after a turn ran while it was closed, with the cursor of the last `page` event it sent MUST continue after that page, without repeating or skipping an event.",
            section: "6",
            rests_on: vec!["GET /v1/agent/chat/{sessionId}/stream"],
            operation: None,
            run: run!(resume),
        },
    ]
}

/// Opens the stream of `session` (after `cursor` when given).
async fn open(
    target: &Target,
    token: &str,
    session: &str,
    cursor: Option<&str>,
) -> Result<Reader, Finding> {
    let (path, call) = stream_request(target, token, session, cursor);
    reader(&path, call.open().await?)
}

/// The stream `response` answered to `GET path`: it must be a success of type
/// `text/event-stream`.
fn reader(path: &str, response: reqwest::Response) -> Result<Reader, Finding> {
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        return fail(format!("GET {path}: {status}"));
    }
    crate::finding::profile(status == 200, || {
        format!("GET {path}: {status}, where the profile answers 200")
    });
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    ensure(kind.starts_with("text/event-stream"), || {
        format!("GET {path}: content type {kind:?}")
    })?;
    Ok(Reader::new(response))
}

/// The frames a stream sends while a new turn runs in a settled session, until the stream has
/// been quiet for 1.5 s (at most 10 s). The stream must carry that turn's events in its pages:
/// what is appended while a stream is open reaches it.
async fn frames_of_a_turn(target: &Target, token: &str) -> Result<Vec<Frame>, Finding> {
    let (session, first) = start_turn(target, token, None, "conformance: stream me").await?;
    settle(target, token, &session, &first).await?;
    let reader = open(target, token, &session, None).await?;
    let (_, turn) = start_turn(
        target,
        token,
        Some(&session),
        "conformance: stream this turn too",
    )
    .await?;
    let frames = read_until_quiet(reader).await?;
    let means = &target.settings.means.turn_state;
    let new_event = |event: &Value| means.of(event, &turn).is_some();
    let streamed = frames
        .iter()
        .filter(|frame| frame.event == "page")
        .any(|frame| {
            let data: Value = serde_json::from_str(&frame.data).unwrap_or_default();
            data["events"]
                .as_array()
                .into_iter()
                .flatten()
                .any(new_event)
        });
    ensure(turn != first && streamed, || {
        format!(
            "no page of the {} frames carries the state of the turn {turn}, started after the \
             turn {first} while the stream was open",
            frames.len()
        )
    })?;
    Ok(frames)
}

async fn event_names(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let frames = frames_of_a_turn(target, token).await?;
    // One shape, one verdict: the page is judged as the long-poll page is, normatively on what
    // the interface shows and against the profile's event entries as a profile assertion.
    let (Some(page), Some(profile_page)) = (
        spec().normative_component("EventPage"),
        spec().component("EventPage"),
    ) else {
        return Err(Finding::Error("no EventPage schema".into()));
    };
    let mut pages = 0;
    for frame in &frames {
        match frame.event.as_str() {
            "page" => {
                pages += 1;
                let data: Value = serde_json::from_str(&frame.data).map_err(|e| {
                    crate::finding::failure(format!("a page whose data is not JSON: {e}"))
                })?;
                let errors = page.errors(&data);
                if !errors.is_empty() {
                    let violations = page.violations(&data);
                    crate::finding::breaking(violations.iter().map(|v| Broke::schema(None, v)));
                }
                ensure(errors.is_empty(), || {
                    format!("a page that is not an EventPage: {}", errors.join("; "))
                })?;
                // Part 2.11: entries only in `events`, never beside it.
                let carried: Vec<String> = data
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(name, _)| !PAGE_FIELDS.contains(&name.as_str()))
                    .filter_map(|(name, value)| {
                        entry_kind(name, value).map(|kind| format!("`{name}`, carrying {kind}"))
                    })
                    .collect();
                ensure(carried.is_empty(), || {
                    format!(
                        "a page with entries beside `events`: {}",
                        carried.join("; ")
                    )
                })?;
                let differs = profile_page.errors(&data);
                crate::finding::profile(differs.is_empty(), || {
                    format!(
                        "a page the profile's EventPage does not hold: {}",
                        differs.join("; ")
                    )
                });
            }
            // Transient (part 6); that it carries no id is the profile's choice.
            "message" => crate::finding::profile(frame.id.is_none(), || {
                format!(
                    "a `message` event with the id {:?}, where the profile's carry none",
                    frame.id
                )
            }),
            "resync" => {}
            other => return fail(format!("an SSE event named {other:?}")),
        }
    }
    ensure(pages > 0, || {
        format!("no `page` event among {} frames", frames.len())
    })
}

async fn ids(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    let frames = frames_of_a_turn(target, token).await?;
    ensure(frames.iter().any(|frame| frame.event == "page"), || {
        "no `page` event".into()
    })?;
    for frame in &frames {
        match frame.event.as_str() {
            "page" => {
                let data: Value = serde_json::from_str(&frame.data).unwrap_or_default();
                ensure(
                    frame.id.is_some() && frame.id.as_deref() == data["cursor"].as_str(),
                    || {
                        format!(
                            "a page whose id {:?} is not its cursor {}",
                            frame.id, data["cursor"]
                        )
                    },
                )?;
            }
            "message" => ensure(frame.id.is_none(), || {
                format!("a message with id {:?}", frame.id)
            })?,
            _ => {}
        }
    }
    Ok(())
}

async fn resume(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    tried(|| resume_once(target, token)).await
}

async fn resume_once(target: &Target, token: &str) -> Result<Tried, Finding> {
    let (session, first) = start_turn(target, token, None, "conformance: before the break").await?;
    let (before, _) = settle(target, token, &session, &first).await?;
    // No cursor of this stream was issued before it was asked for.
    let asked = Instant::now();
    // The cursor of the last `page` event the stream gave, kept for the reconnect (part 6): the
    // page that has no more after it.
    let mut first_stream = open(target, token, &session, None).await?;
    let cursor = loop {
        let Some(frame) = first_stream.next(Duration::from_secs(5)).await? else {
            // That a stream opened without a cursor replays the log is not stated.
            return skip(
                "inconclusive: the stream of a settled session, opened without a cursor, sent no \
                 `page` event with `has_more` false within 5 s",
            );
        };
        let page: Value = serde_json::from_str(&frame.data).unwrap_or_default();
        if frame.event == "page" && page["has_more"] == false {
            break text(&page, "/cursor")?.to_owned();
        }
    };
    drop(first_stream);
    // The break: a turn runs while no stream is open; the stream reopened after it must send
    // what was missed.
    let (_, second) = start_turn(
        target,
        token,
        Some(&session),
        "conformance: after the break",
    )
    .await?;
    let (all, _) = settle(target, token, &session, &second).await?;
    let (path, call) = stream_request(target, token, &session, Some(&cursor));
    let response = call.open().await?;
    // An expired cursor gives 410 (part 7): then this try proves nothing.
    if response.status().as_u16() == 410 && target.settings.cursor_outlived(asked) {
        return Ok(Tried::Outlived(format!(
            "the reopened stream answered 410 to a cursor held {} ms, past the lifetime \
             --cursor-ttl gives, while a turn ran",
            asked.elapsed().as_millis()
        )));
    }
    let mut reader = reader(&path, response)?;
    if !all.starts_with(&before) {
        return skip("inconclusive: the reconcile pages do not start with the log read before");
    }
    let missed = &all[before.len()..];
    ensure(!missed.is_empty(), || {
        "the second turn appended no events".into()
    })?;
    let mut streamed = Vec::new();
    while streamed.len() < missed.len() {
        let Some(frame) = reader.next(Duration::from_secs(5)).await? else {
            break;
        };
        if frame.event == "resync" {
            return skip("inconclusive: the reopened stream asked for a resync (part 6)");
        }
        if frame.event == "page" {
            let data: Value = serde_json::from_str(&frame.data).unwrap_or_default();
            let events = data["events"].as_array().cloned().unwrap_or_default();
            // A stream that repeats what came before the cursor did not take it where
            // `profile.streamCursor` puts it: a means to prove before the fact rests on it.
            let repeats = events.iter().any(|event| before.contains(event));
            if streamed.is_empty() && !events.is_empty() {
                crate::finding::through_means("streamCursor", !repeats);
            }
            if streamed.is_empty() && repeats {
                return Err(inconclusive(
                    "streamCursor",
                    "the stream reopened from its last page's cursor repeats the events before \
                     it: it does not take the cursor there",
                ));
            }
            streamed.extend(events);
        }
    }
    ensure(streamed == missed, || {
        format!(
            "the stream reopened with its last page's cursor gave {} events, the log has {} after it: {}",
            streamed.len(),
            missed.len(),
            crate::finding::excerpt(&Value::from(streamed.clone()).to_string())
        )
    })?;
    Ok(Tried::Judged)
}

/// The frames `reader` sends until it has been quiet for 1.5 s (at most 10 s).
async fn read_until_quiet(mut reader: Reader) -> Result<Vec<Frame>, Finding> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut frames = Vec::new();
    while Instant::now() < deadline {
        match reader.next(Duration::from_millis(1500)).await? {
            Some(frame) => frames.push(frame),
            None => break,
        }
    }
    Ok(frames)
}
