//! Every check of the suite, in the order a run takes them, and what they share.

mod account;
mod agent_actions;
mod agent_events;
mod agent_sessions;
mod agent_sse;
mod agent_turns;
mod auth;
mod check;
mod deployment;
mod grants;
mod limits;
mod mcp;
mod negative;
mod page_members;
mod pipeline;
mod schema;
mod stateful;
pub mod subjects;

pub use check::{Category, Check, Run, Status};

use std::sync::LazyLock;
use std::time::Instant;

use reqwest::Method;
use serde_json::{Value, json};

use crate::finding::{Finding, Verdict, skip, through_means};
use crate::means::{StreamCursor, inconclusive};
use crate::spec::{Operation, spec};
use crate::target::{Call, Reply, Role, Target};

/// Wraps an `async fn(&Target) -> Verdict` as a [`crate::checks::Run`].
macro_rules! run {
    ($check:path) => {{
        fn run<'a>(
            target: &'a $crate::target::Target,
            _: &'a $crate::checks::Check,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = $crate::finding::Verdict> + Send + 'a>,
        > {
            Box::pin($check(target))
        }
        run
    }};
}
pub(crate) use run;

/// Wraps an `async fn(&Target, &'static Operation) -> Verdict` as a [`crate::checks::Run`] of a
/// check made once per operation.
macro_rules! run_on_operation {
    ($check:path) => {{
        fn run<'a>(
            target: &'a $crate::target::Target,
            check: &'a $crate::checks::Check,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = $crate::finding::Verdict> + Send + 'a>,
        > {
            let operation = check.operation.expect("a check made per operation has one");
            Box::pin($check(target, operation))
        }
        run
    }};
}
pub(crate) use run_on_operation;

/// Every check, built once. The schema checks come last: they read the responses the others
/// saw.
pub fn all() -> &'static [Check] {
    static ALL: LazyLock<Vec<Check>> = LazyLock::new(|| {
        [
            auth::checks(),
            grants::checks(),
            agent_events::checks(),
            agent_sse::checks(),
            agent_turns::checks(),
            agent_sessions::checks(),
            agent_actions::checks(),
            pipeline::checks(),
            account::checks(),
            mcp::checks(),
            deployment::checks(),
            limits::checks(),
            negative::checks(),
            stateful::checks(),
            schema::checks(),
        ]
        .into_iter()
        .flatten()
        .collect()
    });
    &ALL
}

/// Whether `check` needs the deployment to itself. Such checks run after the others, one at a
/// time, at any `--jobs`:
/// - the schema checks and `limits.step` judge every response the run saw, and the account leak
///   check reads them all too;
/// - the account checks, the auth checks of account operations and `auth.grants` change the
///   apps and credentials of the accounts that the others list;
/// - `limits.rate-limit` spends the deployment's rate limit, which would make others wait.
pub fn alone(check: &Check) -> bool {
    use crate::checks::Category;
    match check.category {
        Category::Schema | Category::Limits | Category::Account => true,
        Category::Auth => {
            check.id == "auth.grants"
                || check
                    .operation
                    .is_some_and(|operation| operation.template.starts_with("/v1/account"))
        }
        _ => false,
    }
}

/// The role whose token holds every scope of `operation`'s resource (`x-resource`).
pub(crate) fn role_of(operation: &Operation) -> Role {
    let object = spec().operation_object(&operation.method, &operation.template);
    match object.and_then(|object| object["x-resource"].as_str()) {
        Some("pipeline") => Role::Pipeline,
        Some("account") => Role::Account,
        _ => Role::Agent,
    }
}

/// Turn states that end polling (part 3).
pub(crate) const TERMINAL: [&str; 4] = ["complete", "failed", "interrupted", "awaiting_action"];

/// Every turn state of part 3.
pub(crate) const TURN_STATES: [&str; 5] = [
    "processing",
    "complete",
    "failed",
    "interrupted",
    "awaiting_action",
];

/// A string member of a JSON body, or a failure naming it.
pub(crate) fn text<'a>(body: &'a Value, pointer: &str) -> Result<&'a str, Finding> {
    body.pointer(pointer)
        .and_then(Value::as_str)
        .ok_or_else(|| {
            crate::finding::failure(format!(
                "no string at {pointer} in {}",
                crate::finding::excerpt(&body.to_string())
            ))
        })
}

/// Starts a turn that ends by itself, in `session` or a new one: the configured chat message
/// (`inputs.chat`), else `label`. Returns `(sessionId, turnId)`.
pub(crate) async fn start_turn(
    target: &Target,
    token: &str,
    session: Option<&str>,
    label: &str,
) -> Result<(String, String), Finding> {
    start_turn_saying(target, token, session, subjects::chat(target, label)).await
}

/// Starts a turn with exactly `message`, in `session` or a new one, through the chat means
/// (`profile.chat`); returns `(sessionId, turnId)`. A refusal (4xx), an answer that does not
/// name the session and turn where the means says, a turn asked for in a session that starts in
/// another, or a new session it names that is none (its page answers a 4xx) makes the check
/// inconclusive.
pub(crate) async fn start_turn_saying(
    target: &Target,
    token: &str,
    session: Option<&str>,
    message: &str,
) -> Result<(String, String), Finding> {
    let chat = &target.settings.means.chat;
    let reply = target
        .request(Method::POST, "/v1/agent/chat")
        .bearer(token)
        .json(&chat.request(message, session))
        .send()
        .await?;
    if (400..500).contains(&reply.status) {
        return Err(inconclusive(
            "chat",
            format!(
                "starting a turn was refused: {} {}",
                reply.status,
                crate::finding::excerpt(&reply.text)
            ),
        ));
    }
    if !(200..300).contains(&reply.status) {
        return Err(crate::finding::failure(format!(
            "starting a turn: got {} {}",
            reply.status,
            crate::finding::excerpt(&reply.text)
        )));
    }
    let named = |pointer: &str| reply.body.pointer(pointer).and_then(Value::as_str);
    let started = (named(&chat.session_id), named(&chat.turn_id));
    match started {
        (Some(started), Some(turn)) => {
            // A turn in a session proves the means when the answer names that session; a new
            // session, when what the answer names there is a session.
            if let Some(asked) = session {
                through_means("chat", started == asked);
                if started != asked {
                    return Err(inconclusive(
                        "chat",
                        format!(
                            "a turn asked for in session {asked} started in {started:?}: the \
                             request does not name the session where this deployment reads it"
                        ),
                    ));
                }
            } else {
                let page = poll(target, token, started, None, "").await?;
                through_means("chat", (200..300).contains(&page.status));
                if (400..500).contains(&page.status) {
                    return Err(inconclusive(
                        "chat",
                        format!(
                            "the chat answer names {started:?} at {} but GET /v1/agent/chat/{started} \
                             answered {}: that is no session",
                            chat.session_id, page.status
                        ),
                    ));
                }
            }
            Ok((started.to_owned(), turn.to_owned()))
        }
        _ => Err({
            through_means("chat", false);
            inconclusive(
                "chat",
                format!(
                    "the chat answer names no session at {} and turn at {}: {}",
                    chat.session_id,
                    chat.turn_id,
                    crate::finding::excerpt(&reply.text)
                ),
            )
        }),
    }
}

/// `GET path` as `token`, expected 200; the body.
pub(crate) async fn read(target: &Target, token: &str, path: &str) -> Result<Value, Finding> {
    let reply = target
        .request(Method::GET, path)
        .bearer(token)
        .send()
        .await?;
    reply.ensure_success(&format!("GET {path}"))?;
    Ok(reply.body)
}

/// `name=value` of `cursor` in the query parameter the deployment reads it from
/// (`profile.cursorParameter`).
pub(crate) fn cursor_query(target: &Target, cursor: &str) -> String {
    format!(
        "{}={}",
        encode(&target.settings.means.cursor_parameter),
        encode(cursor)
    )
}

/// A request for `session`'s stream, from `cursor` when given, with the cursor where
/// `profile.streamCursor` says; and its path, for the report.
pub(crate) fn stream_request<'a>(
    target: &'a Target,
    token: &str,
    session: &str,
    cursor: Option<&str>,
) -> (String, Call<'a>) {
    if cursor.is_some() {
        through_means("streamCursor", false);
    }
    let means = target.settings.means.stream_cursor();
    stream_call(
        target,
        token,
        session,
        cursor.map(|cursor| (&means, cursor)),
    )
}

/// A request for `session`'s stream, with `cursor` where its means puts it; and its path.
pub(crate) fn stream_call<'a>(
    target: &'a Target,
    token: &str,
    session: &str,
    cursor: Option<(&StreamCursor, &str)>,
) -> (String, Call<'a>) {
    let mut path = format!("/v1/agent/chat/{session}/stream");
    let mut header = None;
    match cursor {
        Some((StreamCursor::Query(name), cursor)) => {
            path.push_str(&format!("?{}={}", encode(name), encode(cursor)));
        }
        Some((StreamCursor::Header(name), cursor)) => header = Some((name, cursor)),
        None => {}
    }
    let mut call = target.request(Method::GET, &path).bearer(token);
    if let Some((name, value)) = header {
        path.push_str(&format!(" ({name}: {value})"));
        call = call.header(name, value);
    }
    (path, call)
}

/// Whether a stream opened at `cursor`, which the deployment issued after `seen` (with events
/// appended since), takes it where `profile.streamCursor` says: its first page with events
/// repeats none of `seen`.
pub(crate) async fn stream_takes_cursor(
    target: &Target,
    token: &str,
    session: &str,
    cursor: &str,
    seen: &[Value],
) -> Result<bool, Finding> {
    let (_, call) = stream_request(target, token, session, Some(cursor));
    let taken = sends_only_after(call, seen).await?.unwrap_or(false);
    through_means("streamCursor", taken);
    Ok(taken)
}

/// Opens the stream `call` asks for and reads it (for up to 5 s) to its first page with events:
/// whether that page repeats none of `seen`; `None` when it does not open or sends none.
pub(crate) async fn sends_only_after(
    call: Call<'_>,
    seen: &[Value],
) -> Result<Option<bool>, Finding> {
    let response = call.open().await?;
    if !response.status().is_success() {
        return Ok(None);
    }
    let mut reader = crate::target::Reader::new(response);
    let deadline = Instant::now() + std::time::Duration::from_secs(5);
    while let Some(frame) = reader
        .next(deadline.saturating_duration_since(Instant::now()))
        .await?
    {
        let page: Value = serde_json::from_str(&frame.data).unwrap_or_default();
        if let Some(events) = page["events"]
            .as_array()
            .filter(|events| !events.is_empty())
        {
            return Ok(Some(!events.iter().any(|event| seen.contains(event))));
        }
    }
    Ok(None)
}

/// Whether the deployment takes `cursor`, which it issued after `seen`, through the cursor
/// means: a poll with it answers 2xx with none of `seen`. Otherwise the check is inconclusive.
/// Gives the cursor that poll's page carries (`cursor` when it carries none): issued later, it
/// expires later.
pub(crate) async fn cursor_taken(
    target: &Target,
    token: &str,
    session: &str,
    cursor: &str,
    seen: &[Value],
) -> Result<String, Finding> {
    let reply = poll(target, token, session, Some(cursor), "").await?;
    let repeated = reply.body["events"]
        .as_array()
        .is_none_or(|events| events.iter().any(|event| seen.contains(event)));
    let taken = (200..300).contains(&reply.status) && !repeated;
    through_means("cursorParameter", taken);
    if taken {
        return Ok(reply.body["cursor"].as_str().unwrap_or(cursor).to_owned());
    }
    Err(inconclusive(
        "cursorParameter",
        format!(
            "a cursor the deployment issued, sent as `{}`, was not taken: {} {}",
            target.settings.means.cursor_parameter,
            reply.status,
            crate::finding::excerpt(&reply.text)
        ),
    ))
}

/// A session with one settled turn: its id, its log and the cursor after it.
pub(crate) async fn settled_session(
    target: &Target,
    token: &str,
    message: &str,
) -> Result<(String, Vec<Value>, String), Finding> {
    let (session, turn) = start_turn(target, token, None, message).await?;
    let (events, cursor) = settle(target, token, &session, &turn).await?;
    Ok((session, events, cursor))
}

/// `GET /v1/agent/chat/{session}` with an optional cursor and wait.
pub(crate) async fn poll(
    target: &Target,
    token: &str,
    session: &str,
    cursor: Option<&str>,
    query: &str,
) -> Result<Reply, Finding> {
    if cursor.is_some() {
        through_means("cursorParameter", false);
    }
    let cursor = cursor.map(|cursor| cursor_query(target, cursor));
    let path = page_path(session, query, cursor.as_deref());
    target
        .request(Method::GET, &path)
        .bearer(token)
        .send()
        .await
}

/// The path of a page GET of `session` with `query` (perhaps empty) and the `cursor` parameter
/// (perhaps none): no `?` without a parameter, no empty one between two.
fn page_path(session: &str, query: &str, cursor: Option<&str>) -> String {
    let parameters: Vec<&str> = [Some(query), cursor]
        .into_iter()
        .flatten()
        .filter(|parameter| !parameter.is_empty())
        .collect();
    if parameters.is_empty() {
        format!("/v1/agent/chat/{session}")
    } else {
        format!("/v1/agent/chat/{session}?{}", parameters.join("&"))
    }
}

/// How many times `read_pages` starts again from the reconcile page when a cursor it holds
/// has outlived the lifetime the run was given.
const READ_RESTARTS: usize = 3;

/// The session's log page by page from the reconcile page, each poll with `query` (such as
/// `limit=2`), following cursors while `has_more`; returns the pages' events and the cursor
/// after the last page. A 410 to a cursor that may have outlived `--cursor-ttl` (counted from
/// the request that got it) is an expired cursor, after which the client starts again without
/// one (part 7); a 410 to a younger cursor fails.
pub(crate) async fn read_pages(
    target: &Target,
    token: &str,
    session: &str,
    query: &str,
) -> Result<(Vec<Vec<Value>>, String), Finding> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    // When the request that got `cursor` was sent.
    let mut asked = Instant::now();
    let mut restarts = 0;
    for _ in 0..1000 {
        let sent = Instant::now();
        let reply = poll(target, token, session, cursor.as_deref(), query).await?;
        let outlived = target.settings.cursor_outlived(asked);
        if reply.status == 410 && cursor.is_some() && outlived && restarts < READ_RESTARTS {
            restarts += 1;
            pages.clear();
            cursor = None;
            continue;
        }
        reply.ensure_success("reading the event log")?;
        let events = reply.body["events"]
            .as_array()
            .ok_or_else(|| crate::finding::failure("an EventPage without `events`"))?;
        // A page after a cursor that holds nothing new, only the pages before it again, did not
        // read the cursor: the means is not this deployment's, and following `has_more` would
        // not end. (One that repeats some besides new ones read it, and is judged elsewhere.)
        let repeats = !events.is_empty()
            && events
                .iter()
                .all(|event| pages.iter().flatten().any(|before| before == event));
        if cursor.is_some() {
            through_means("cursorParameter", !repeats);
        }
        if cursor.is_some() && repeats {
            return Err(inconclusive(
                "cursorParameter",
                format!(
                    "the page after a cursor the deployment issued, sent as `{}`, repeats the \
                     events before it",
                    target.settings.means.cursor_parameter
                ),
            ));
        }
        pages.push(events.clone());
        let next = text(&reply.body, "/cursor")?.to_owned();
        if reply.body["has_more"] != json!(true) {
            return Ok((pages, next));
        }
        cursor = Some(next);
        asked = sent;
    }
    Err(crate::finding::failure(
        "has_more stayed true for 1000 pages",
    ))
}

/// The session's whole log; returns the events and the cursor after the last one.
pub(crate) async fn read_log(
    target: &Target,
    token: &str,
    session: &str,
) -> Result<(Vec<Value>, String), Finding> {
    let (pages, cursor) = read_pages(target, token, session, "").await?;
    Ok((pages.concat(), cursor))
}

/// The sequence numbers of `events`, 0 where one has none.
pub(crate) fn seqs(events: &[Value]) -> Vec<i64> {
    events
        .iter()
        .map(|event| event["seq"].as_i64().unwrap_or(0))
        .collect()
}

/// The states `events` give `turn`, in log order, read where `profile.turnState` says.
pub(crate) fn turn_states<'a>(
    target: &'a Target,
    events: &'a [Value],
    turn: &'a str,
) -> impl DoubleEndedIterator<Item = &'a str> {
    let means = &target.settings.means.turn_state;
    events.iter().filter_map(move |event| means.of(event, turn))
}

/// The latest state `events` give `turn`.
pub(crate) fn turn_state<'a>(
    target: &'a Target,
    events: &'a [Value],
    turn: &'a str,
) -> Option<&'a str> {
    turn_states(target, events, turn).next_back()
}

/// A value no earlier run used, such as an Idempotency-Key: `conformance-{label}-{nanos}`.
pub(crate) fn fresh_key(label: &str) -> String {
    format!("conformance-{label}-{}", nanos())
}

/// Nanoseconds since 1970: a number no earlier run used.
pub(crate) fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

/// How many times a check that holds a cursor or a Build across other requests tries, when
/// what it holds outlives its lifetime before the fact is judged.
const TRIES: usize = 3;

/// What one try of such a check came to.
pub(crate) enum Tried {
    /// The fact was judged, and held.
    Judged,
    /// What the try held outlived its lifetime first (said how), so it proves nothing.
    Outlived(String),
}

/// `once` up to [`TRIES`] times, until a try is judged; inconclusive when what every try held
/// outlived its lifetime first.
pub(crate) async fn tried<F, Fut>(mut once: F) -> Verdict
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Tried, Finding>>,
{
    let mut outlived = Vec::new();
    while outlived.len() < TRIES {
        match once().await? {
            Tried::Judged => return Ok(()),
            Tried::Outlived(how) => outlived.push(how),
        }
    }
    skip(format!(
        "inconclusive: in each of {TRIES} tries, {}",
        outlived.join("; ")
    ))
}

/// Polls the log until `turn` reaches a terminal state (within the run's turn timeout); returns
/// the log. Once the run has waited a whole turn timeout for a state `profile.turnState` never
/// gave, and read none before, a turn whose state it does not give is inconclusive at once.
pub(crate) async fn settle(
    target: &Target,
    token: &str,
    session: &str,
    turn: &str,
) -> Result<(Vec<Value>, String), Finding> {
    settle_watching(target, token, (session, turn), false).await
}

/// [`settle`], and with `strict` a failure as soon as the means, having read a state of part 3
/// for the turn, reads one that is none of part 3's: for the check of part 3's states.
pub(crate) async fn settle_watching(
    target: &Target,
    token: &str,
    (session, turn): (&str, &str),
    strict: bool,
) -> Result<(Vec<Value>, String), Finding> {
    let timeout = target.settings.turn_timeout;
    let deadline = Instant::now() + timeout;
    loop {
        let (events, cursor) = read_log(target, token, session).await?;
        let state = turn_state(target, &events, turn);
        through_means("turnState", state.is_some());
        let states: Vec<&str> = turn_states(target, &events, turn).collect();
        let odd = states
            .iter()
            .find(|state| !TURN_STATES.contains(state))
            .filter(|_| states.iter().any(|state| TURN_STATES.contains(state)));
        if let Some(odd) = odd.filter(|_| strict) {
            return Err(crate::finding::failure(format!(
                "turn {turn} is in the state {odd:?}, which is none of part 3's ({})",
                TURN_STATES.join(", ")
            )));
        }
        if state.is_some_and(|state| TERMINAL.contains(&state)) {
            return Ok((events, cursor));
        }
        let timed_out = Instant::now() > deadline;
        let refused = target.turn_state_refused(state.is_some(), timed_out);
        if state.is_none() && (timed_out || refused) {
            let what = if timed_out {
                format!("the log never told the state of turn {turn} where the means says")
            } else {
                format!(
                    "the log told no state of turn {turn} where the means says, nor of an earlier turn within the turn timeout"
                )
            };
            return Err(inconclusive("turnState", what));
        }
        if timed_out {
            let latest = match state {
                Some(state) if !TURN_STATES.contains(&state) => {
                    format!("; its latest state, {state:?}, is none of part 3's")
                }
                Some(state) => format!("; its latest state is {state:?}"),
                None => String::new(),
            };
            return Err(crate::finding::failure(format!(
                "turn {turn} did not reach a terminal state within {} s (--turn-timeout){latest}",
                timeout.as_secs()
            )));
        }
        poll(target, token, session, Some(&cursor), "wait=2000").await?;
    }
}

/// `text` with the first character of its last `.`-separated part changed: for a JWS or a
/// signed cursor, its signature. Unlike the last character of base64, the first one carries
/// only meaningful bits, so the change cannot decode to the same bytes.
pub(crate) fn alter_signature(text: &str) -> String {
    let at = text.rfind('.').map_or(0, |dot| dot + 1);
    let mut changed = text.to_owned();
    if let Some(first) = text[at..].chars().next() {
        let other = if first == 'A' { "B" } else { "A" };
        changed.replace_range(at..at + first.len_utf8(), other);
    }
    changed
}

/// Percent-encodes a query value.
pub(crate) fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// The paths of the two lifecycle endpoints (part 4.1).
pub(crate) const LIFECYCLE: [&str; 2] = ["/v1/pipeline/evm/build", "/v1/pipeline/svm/stage"];

/// The simulation of a Build a lifecycle endpoint answered: the `simulation` member of a
/// success to a request that presents no Build (part 4.1: "200 PipelineBuild"). Commit results,
/// `summary` and `actions` have shapes the document does not show.
pub(crate) fn build_simulation(seen: &crate::target::Seen) -> Option<&Value> {
    let route = seen.request.split('?').next().unwrap_or(&seen.request);
    let lifecycle = LIFECYCLE.iter().any(|template| route.ends_with(template));
    // A request body cut short (not JSON) counts as presenting a Build: left out, never misjudged.
    let presents = seen.exchange.request_body.as_deref().is_some_and(|body| {
        serde_json::from_str::<Value>(body).map_or(true, |body| crate::spec::presents_build(&body))
    });
    let answered = lifecycle && (200..300).contains(&seen.status) && !presents;
    answered
        .then(|| seen.body.get("simulation"))
        .flatten()
        .filter(|simulation| simulation.is_object())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::spec::spec;

    #[test]
    fn a_page_path_has_a_question_mark_only_before_parameters_and_no_empty_one() {
        let at = |query, cursor| page_path("ses_1", query, cursor);
        assert_eq!(at("", None), "/v1/agent/chat/ses_1");
        assert_eq!(at("", Some("cursor=c")), "/v1/agent/chat/ses_1?cursor=c");
        assert_eq!(at("wait=0", None), "/v1/agent/chat/ses_1?wait=0");
        assert_eq!(
            at("wait=0", Some("cursor=c")),
            "/v1/agent/chat/ses_1?wait=0&cursor=c"
        );
    }

    #[test]
    fn every_check_is_well_formed() {
        let mut ids = HashSet::new();
        for check in all() {
            assert!(ids.insert(&check.id), "{} appears twice", check.id);
            assert!(
                check
                    .id
                    .starts_with(&format!("{}.", check.category.as_str())),
                "{} is not in its category {}",
                check.id,
                check.category.as_str()
            );
            let keywords = ["MUST", "MUST NOT", "SHOULD", "MAY"];
            assert!(
                keywords.iter().any(|k| check.requirement.contains(k)),
                "{}: no RFC 2119 keyword",
                check.id
            );
            assert!(!check.rests_on.is_empty(), "{} rests on nothing", check.id);
            for reference in &check.rests_on {
                assert!(
                    spec().element(reference).is_some(),
                    "{}: {reference} is not in openapi.json",
                    check.id
                );
            }
        }
    }

    #[test]
    fn the_level_follows_the_profile_marks() {
        assert_eq!(
            spec().level(&["GET /v1/agent/chat/{sessionId}"]),
            crate::spec::Level::Normative
        );
        assert_eq!(
            spec().level(&["DELETE /v1/agent/sessions/{sessionId}"]),
            crate::spec::Level::Profile
        );
        assert_eq!(
            spec().level(&["#/components/schemas/PipelineBuild/properties/digest/description"]),
            crate::spec::Level::Profile
        );
        assert_eq!(
            spec().level(&["#/components/schemas/PipelineBuild/properties/digest/pattern"]),
            crate::spec::Level::Normative
        );
    }
}
