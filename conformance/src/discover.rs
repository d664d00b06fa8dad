//! `run --discover`: probes a deployment for the means the document leaves open and writes the
//! `profile` it finds, so that a team starts from a file that is mostly right.
//!
//! Each means is tried the way the checks prove it: a chat body is one a deployment answers
//! with a session that then exists, a cursor parameter one whose page does not repeat the
//! events before the cursor, a stream's cursor one whose stream sends what came after it and
//! none of what came before, a resolution path one that refuses a body that is no resolution
//! for its body (not with 404 or 405). Entries are read by what they hold: a turn's id beside a
//! turn state's word, a Build's `digest` beside an action id and a revision. What it cannot
//! probe without side effects (a commit takes custody of a Build) keeps our profile's value and
//! says so.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::checks::subjects::REFERENCE_ACTION_CHAT;
use crate::checks::{TERMINAL, encode, sends_only_after, stream_call};
use crate::finding::Finding;
use crate::means::{ActionEntry, Chat, Means, StreamCursor, TurnState};
use crate::target::{Reply, Role, Target};

/// What a probe of the deployment found.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    /// The config file's `profile`: the keys whose means differ from ours.
    pub profile: Map<String, Value>,
    /// One line per means: what was found, or why it keeps our value.
    pub notes: Vec<String>,
}

/// The chat bodies tried, as the member of the message and the member of the session.
const CHAT_SHAPES: [(&str, &str); 6] = [
    ("message", "sessionId"),
    ("input", "session"),
    ("prompt", "thread"),
    ("text", "session_id"),
    ("content", "conversationId"),
    ("query", "session"),
];

/// The query parameters tried for a cursor.
const CURSOR_NAMES: [&str; 10] = [
    "cursor",
    "after",
    "page_token",
    "pageToken",
    "from",
    "since",
    "starting_after",
    "position",
    "resume",
    "next",
];

/// The members that may name an entry's kind.
const KIND_MEMBERS: [&str; 7] = [
    "type",
    "kind",
    "event",
    "name",
    "category",
    "eventType",
    "event_type",
];

/// The resolution paths tried where an action's entry links none.
const RESOLUTION_PATHS: [&str; 4] = [
    "/v1/agent/sessions/{sessionId}/actions/{actionId}/resolve",
    "/v1/agent/sessions/{sessionId}/actions/{actionId}",
    "/v1/agent/sessions/{sessionId}/approvals/{actionId}",
    "/v1/agent/actions/{actionId}/resolve",
];

/// Probes `target` and returns the profile it finds.
pub async fn discover(target: &Target) -> Result<Discovery, String> {
    let token = target.role(Role::Agent).await.map_err(reason)?;
    let mut found = Discovery::default();
    let ours = Means::default();
    let Some((chat, session, turn)) = chat(target, &token).await? else {
        found.notes.push(format!(
            "chat: neither the config file's profile.chat nor any of the bodies {CHAT_SHAPES:?} \
             started a turn whose session then exists; the rest needs one: set profile.chat"
        ));
        return Ok(found);
    };
    found.set(
        "chat",
        &chat,
        &ours.chat,
        "a turn started and its session exists",
    );
    let mut probe = Probe {
        target,
        token: &token,
        chat,
        cursor_parameter: None,
    };
    let (seen, cursor) = probe.first_page(&session).await?;
    match probe.cursor_parameter(&session, &cursor, &seen).await? {
        Some(name) => {
            probe.cursor_parameter = Some(name.clone());
            found.set(
                "cursorParameter",
                &name,
                &ours.cursor_parameter,
                "its page moved",
            );
            match probe.error_code(&session, &name).await? {
                Some(pointer) => {
                    let what = "a malformed cursor's refusal names `invalid_cursor` there";
                    found.set_value("errorCode", json!(pointer), what);
                }
                None => found.notes.push("errorCode: as ours".into()),
            }
        }
        None => found.notes.push(format!(
            "cursorParameter: none of {CURSOR_NAMES:?} moved the page"
        )),
    }
    match probe.turn(&session, &turn).await? {
        Some(state) => found.set("turnState", &state, &ours.turn_state, "a turn's state read"),
        None => found
            .notes
            .push("turnState: no entry tells the turn's state in a state of part 3".into()),
    }
    // A turn after the cursor, which a stream opened there must send.
    let (_, second) = probe.start(Some(&session)).await?;
    probe.turn(&session, &second).await?;
    let poll = found
        .profile
        .get("cursorParameter")
        .and_then(Value::as_str)
        .map_or(ours.stream_cursor(), |name| {
            StreamCursor::Query(name.into())
        });
    match probe.stream_cursor(&session, &cursor, &seen).await? {
        Some(stream) if stream == poll => found.notes.push("streamCursor: as the poll's".into()),
        Some(stream) => found.set_value("streamCursor", stream_value(&stream), "its stream moved"),
        None => found
            .notes
            .push("streamCursor: no query parameter or Last-Event-ID moved the stream".into()),
    }
    match probe.action(&ours.action).await? {
        Ok((action, session, entry)) => {
            found.set("action", &action, &ours.action, "an action raised");
            match probe.resolution(&session, &action, &entry).await? {
                Some((method, path))
                    if method.as_str() == ours.resolution.method
                        && path == ours.resolution.path =>
                {
                    found.notes.push("resolution: as ours".into());
                }
                Some((method, path)) => {
                    let what = "a body that is no resolution was refused for its body";
                    found.set_value(
                        "resolution",
                        json!({ "method": method.as_str(), "path": path }),
                        what,
                    );
                    found.notes.push(
                        "resolution: the idempotency header, result and result entry are ours; \
                         edit them if they differ"
                            .into(),
                    );
                }
                None => found
                    .notes
                    .push("resolution: no path tried refused a bad body for its body".into()),
            }
        }
        Err(why) => found.notes.push(format!("action, resolution: {why}")),
    }
    found.notes.push(
        "commit: not probed, since a commit takes custody of a Build; ours presents the bare Build"
            .into(),
    );
    Ok(found)
}

impl Discovery {
    /// Keeps `value` as `key` when it differs from `ours`, and notes what showed it.
    fn set<T: serde::Serialize + PartialEq<U>, U: ?Sized>(
        &mut self,
        key: &str,
        value: &T,
        ours: &U,
        what: &str,
    ) {
        if value == ours {
            self.notes.push(format!("{key}: as ours ({what})"));
        } else {
            let value = serde_json::to_value(value).unwrap_or(Value::Null);
            self.set_value(key, value, what);
        }
    }

    fn set_value(&mut self, key: &str, value: Value, what: &str) {
        self.notes.push(format!("{key}: {value} ({what})"));
        self.profile.insert(key.to_owned(), value);
    }
}

/// `stream` as the config file writes it.
fn stream_value(stream: &StreamCursor) -> Value {
    match stream {
        StreamCursor::Query(name) => json!({ "query": name }),
        StreamCursor::Header(name) => json!({ "header": name }),
    }
}

fn reason(finding: Finding) -> String {
    match finding {
        Finding::Skip(reason) | Finding::Fail(reason) | Finding::Error(reason) => reason,
    }
}

/// The names a member that holds a session's id may have (in any case), or that an object
/// holding it as `id` may have.
const SESSION_NAMES: [&str; 9] = [
    "sessionid",
    "session_id",
    "session",
    "threadid",
    "thread_id",
    "thread",
    "conversationid",
    "conversation_id",
    "conversation",
];

/// The same for a turn's id.
const TURN_NAMES: [&str; 3] = ["turnid", "turn_id", "turn"];

/// The chat means whose turn starts in a session that then exists, and whose second turn in
/// that session is answered with it; that session and its second turn. A `profile.chat` the
/// config file sets is tried first.
async fn chat(target: &Target, token: &str) -> Result<Option<(Chat, String, String)>, String> {
    let configured = &target.settings.means.chat;
    if *configured != Chat::default()
        && let Some((session, turn)) = chat_through(target, token, configured).await?
    {
        return Ok(Some((configured.clone(), session, turn)));
    }
    for (message, _) in CHAT_SHAPES {
        let first = json!({ message: "conformance: discover" });
        let Ok(first) = started(target, token, &first, None).await? else {
            continue;
        };
        let exists = page(target, token, &first.session, "").await?;
        if !(200..300).contains(&exists.status) {
            continue;
        }
        // The member that names the session: a second turn asked for in it, once the first
        // settles, starts there.
        settle(target, token, (&first.session, &first.turn), None).await?;
        let pointers = (first.session_id.as_str(), first.turn_id.as_str());
        for (_, member) in CHAT_SHAPES {
            let next = json!({ message: "conformance: discover", member: first.session });
            let second = started(target, token, &next, Some(pointers)).await?;
            if let Ok(second) = second
                && second.session == first.session
            {
                let chat = Chat {
                    body: json!({ message: "{message}", member: "{sessionId}" }),
                    session_id: first.session_id,
                    turn_id: first.turn_id,
                };
                return Ok(Some((chat, second.session, second.turn)));
            }
        }
    }
    Ok(None)
}

/// The session and second turn of two turns started through `means`, when the first's session
/// then exists and the second, asked for in it, starts there.
async fn chat_through(
    target: &Target,
    token: &str,
    means: &Chat,
) -> Result<Option<(String, String)>, String> {
    let pointers = Some((means.session_id.as_str(), means.turn_id.as_str()));
    let first = means.request("conformance: discover", None);
    let Ok(first) = started(target, token, &first, pointers).await? else {
        return Ok(None);
    };
    if !(200..300).contains(&page(target, token, &first.session, "").await?.status) {
        return Ok(None);
    }
    settle(target, token, (&first.session, &first.turn), None).await?;
    let next = means.request("conformance: discover", Some(&first.session));
    Ok(match started(target, token, &next, pointers).await? {
        Ok(second) if second.session == first.session => Some((second.session, second.turn)),
        _ => None,
    })
}

/// A turn a chat request started: where its answer names the session and turn, and their ids.
struct Started {
    session_id: String,
    turn_id: String,
    session: String,
    turn: String,
}

/// Posts `body` to the chat endpoint: the turn it started, read at `pointers` (else found by
/// their members' names), or why none did.
async fn started(
    target: &Target,
    token: &str,
    body: &Value,
    pointers: Option<(&str, &str)>,
) -> Result<Result<Started, String>, String> {
    let reply = target
        .request(Method::POST, "/v1/agent/chat")
        .bearer(token)
        .json(body)
        .send()
        .await
        .map_err(reason)?;
    let named = |names: &[&str]| leaf(&reply.body, &|path, _| named_by(path, names));
    let (session_id, turn_id) = match pointers {
        Some((session, turn)) => (Some(session.to_owned()), Some(turn.to_owned())),
        None => (named(&SESSION_NAMES), named(&TURN_NAMES)),
    };
    let text = |pointer: &Option<String>| {
        let found = reply.body.pointer(pointer.as_deref()?)?.as_str();
        found.map(str::to_owned)
    };
    Ok(match (text(&session_id), text(&turn_id)) {
        (Some(session), Some(turn)) if (200..300).contains(&reply.status) => Ok(Started {
            session_id: session_id.unwrap_or_default(),
            turn_id: turn_id.unwrap_or_default(),
            session,
            turn,
        }),
        _ => Err(format!(
            "a turn did not start: {} {}",
            reply.status,
            crate::finding::excerpt(&reply.text)
        )),
    })
}

/// A page of `session`'s log, with `query` (perhaps empty).
async fn page(target: &Target, token: &str, session: &str, query: &str) -> Result<Reply, String> {
    let path = match query {
        "" => format!("/v1/agent/chat/{session}"),
        query => format!("/v1/agent/chat/{session}?{query}"),
    };
    target
        .request(Method::GET, &path)
        .bearer(token)
        .send()
        .await
        .map_err(reason)
}

/// The turn-state means of `turn` once it settles (or `turn_timeout` passes), read where an
/// entry of `session`'s log holds both its id and a state of part 3. With the cursor parameter
/// found, the whole log is read; before, its first page.
async fn settle(
    target: &Target,
    token: &str,
    (session, turn): (&str, &str),
    parameter: Option<&str>,
) -> Result<Option<TurnState>, String> {
    let deadline = Instant::now() + target.settings.turn_timeout;
    loop {
        let events = log(target, token, session, parameter).await?;
        let state = events
            .iter()
            .rev()
            .find_map(|event| turn_state(event, turn));
        let settled = state
            .as_ref()
            .is_some_and(|(_, word)| TERMINAL.contains(&word.as_str()));
        if settled || Instant::now() > deadline {
            return Ok(state.map(|(means, _)| means));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The events of `session`'s log: every page through the cursor `parameter` (at most 100), else
/// the first.
async fn log(
    target: &Target,
    token: &str,
    session: &str,
    parameter: Option<&str>,
) -> Result<Vec<Value>, String> {
    let mut events = Vec::new();
    let mut query = String::new();
    for _ in 0..100 {
        let reply = page(target, token, session, &query).await?;
        events.extend(reply.body["events"].as_array().cloned().unwrap_or_default());
        let next = reply.body["cursor"].as_str();
        match (parameter, next, reply.body["has_more"].as_bool()) {
            (Some(parameter), Some(cursor), Some(true)) => {
                query = format!("{parameter}={}", crate::checks::encode(cursor));
            }
            _ => break,
        }
    }
    Ok(events)
}

/// Whether the last member name of `path` is one of `names` (in any case), or is `id` in an
/// object whose name is.
fn named_by(path: &[String], names: &[&str]) -> bool {
    let named = |name: &String| names.contains(&name.to_ascii_lowercase().as_str());
    match path {
        [.., parent, last] if last == "id" => named(parent),
        [.., last] => named(last),
        [] => false,
    }
}

/// The JSON pointer of the first string leaf of `value` that `wanted` takes (by its path and
/// text).
fn leaf(value: &Value, wanted: &dyn Fn(&[String], &str) -> bool) -> Option<String> {
    fn walk(
        value: &Value,
        path: &mut Vec<String>,
        wanted: &dyn Fn(&[String], &str) -> bool,
    ) -> Option<String> {
        match value {
            Value::String(text) if wanted(path, text) => Some(pointer(path)),
            Value::Object(members) => members.iter().find_map(|(name, member)| {
                path.push(name.clone());
                let found = walk(member, path, wanted);
                path.pop();
                found
            }),
            _ => None,
        }
    }
    walk(value, &mut Vec::new(), wanted)
}

/// The JSON pointer of `path`.
fn pointer(path: &[String]) -> String {
    path.iter()
        .map(|name| format!("/{}", name.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// What the probes share: the deployment, an Agent token and the chat means found.
struct Probe<'a> {
    target: &'a Target,
    token: &'a str,
    chat: Chat,
    /// The cursor parameter, once found.
    cursor_parameter: Option<String>,
}

impl Probe<'_> {
    /// Starts a turn, in `session` or a new one; its session and turn.
    async fn start(&self, session: Option<&str>) -> Result<(String, String), String> {
        self.start_saying(session, "conformance: discover").await
    }

    /// Starts a turn that says `message`, in `session` or a new one.
    async fn start_saying(
        &self,
        session: Option<&str>,
        message: &str,
    ) -> Result<(String, String), String> {
        let body = self.chat.request(message, session);
        let pointers = (self.chat.session_id.as_str(), self.chat.turn_id.as_str());
        let started = started(self.target, self.token, &body, Some(pointers)).await?;
        started.map(|started| (started.session, started.turn))
    }

    /// A page of `session`, with `query` (perhaps empty).
    async fn page(&self, session: &str, query: &str) -> Result<(u16, Value), String> {
        let reply = page(self.target, self.token, session, query).await?;
        Ok((reply.status, reply.body))
    }

    /// The first page of `session` once it holds events: its events and cursor.
    async fn first_page(&self, session: &str) -> Result<(Vec<Value>, String), String> {
        let deadline = Instant::now() + self.target.settings.turn_timeout;
        loop {
            let (_, page) = self.page(session, "").await?;
            let events = page["events"].as_array().cloned().unwrap_or_default();
            if let (false, Some(cursor)) = (events.is_empty(), page["cursor"].as_str()) {
                return Ok((events, cursor.to_owned()));
            }
            if Instant::now() > deadline {
                return Err(format!("session {session} holds no events with a cursor"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The query parameter that takes `cursor`: its page repeats none of `seen`.
    async fn cursor_parameter(
        &self,
        session: &str,
        cursor: &str,
        seen: &[Value],
    ) -> Result<Option<String>, String> {
        for name in CURSOR_NAMES {
            let query = format!("{name}={}", encode(cursor));
            let (status, page) = self.page(session, &query).await?;
            let moved = page["events"]
                .as_array()
                .is_some_and(|events| !events.iter().any(|event| seen.contains(event)));
            if (200..300).contains(&status) && moved {
                return Ok(Some(name.to_owned()));
            }
        }
        Ok(None)
    }

    /// Where a malformed cursor's refusal carries `invalid_cursor`, when not where ours does.
    async fn error_code(&self, session: &str, name: &str) -> Result<Option<String>, String> {
        let (_, body) = self.page(session, &format!("{name}=not-a-cursor")).await?;
        if Means::default().error_code(&body) == Some("invalid_cursor") {
            return Ok(None);
        }
        Ok(leaf(&body, &|_, text| text == "invalid_cursor"))
    }

    /// The state of `turn` once settled, read where an entry holds both its id and a word of
    /// part 3.
    async fn turn(&self, session: &str, turn: &str) -> Result<Option<TurnState>, String> {
        let parameter = self.cursor_parameter.as_deref();
        settle(self.target, self.token, (session, turn), parameter).await
    }

    /// How a stream takes `cursor`: its first page sends events and none of `seen`.
    async fn stream_cursor(
        &self,
        session: &str,
        cursor: &str,
        seen: &[Value],
    ) -> Result<Option<StreamCursor>, String> {
        let header = StreamCursor::Header("Last-Event-ID".into());
        let queries = CURSOR_NAMES.map(|name| StreamCursor::Query(name.into()));
        for means in queries.into_iter().chain([header]) {
            let (_, call) = stream_call(self.target, self.token, session, Some((&means, cursor)));
            if sends_only_after(call, seen).await.map_err(reason)? == Some(true) {
                return Ok(Some(means));
            }
        }
        Ok(None)
    }

    /// Raises an action and reads its entry: the means, its session and the entry.
    async fn action(
        &self,
        ours: &ActionEntry,
    ) -> Result<Result<(ActionEntry, String, Value), String>, String> {
        let prompt = self
            .target
            .settings
            .inputs
            .action_chat
            .as_deref()
            .unwrap_or(REFERENCE_ACTION_CHAT);
        let (session, turn) = self.start_saying(None, prompt).await?;
        self.turn(&session, &turn).await?;
        let parameter = self.cursor_parameter.as_deref();
        let events = log(self.target, self.token, &session, parameter).await?;
        let found = events
            .iter()
            .find_map(|event| action_entry(event, &turn).map(|means| (means, event.clone())));
        Ok(match found {
            Some((_, entry)) if ours.read(&entry).is_ok() && ours.raised_in(&entry, &turn) => {
                Ok((ours.clone(), session, entry))
            }
            Some((means, entry)) => Ok((means, session, entry)),
            None => Err(format!(
                "no entry holding a Build's digest beside an id and a revision after {prompt:?}: \
                 where the turn raised an action, set profile.action to where its entry carries \
                 it; where it raised none, set inputs.actionChat to a message that does"
            )),
        })
    }

    /// The method and path that reach the action of `entry`: a link the entry holds, else one
    /// of [`RESOLUTION_PATHS`] that refuses a body that is no resolution for its body.
    async fn resolution(
        &self,
        session: &str,
        means: &ActionEntry,
        entry: &Value,
    ) -> Result<Option<(Method, String)>, String> {
        let Ok(raised) = means.read(entry) else {
            return Ok(None);
        };
        let linked = leaf(entry, &|_, text| {
            text.starts_with('/') && text.contains(&raised.action)
        })
        .and_then(|pointer| entry.pointer(&pointer)?.as_str().map(str::to_owned))
        .map(|path| {
            path.replace(session, "{sessionId}")
                .replace(&raised.action, "{actionId}")
        });
        let paths = linked
            .into_iter()
            .chain(RESOLUTION_PATHS.map(str::to_owned));
        for template in paths {
            let path = template
                .replace("{sessionId}", session)
                .replace("{actionId}", &raised.action);
            for method in [Method::POST, Method::PUT] {
                let reply = self
                    .target
                    .request(method.clone(), &path)
                    .bearer(self.token)
                    .json(&json!([]))
                    .send()
                    .await
                    .map_err(reason)?;
                let reached = (400..500).contains(&reply.status)
                    && !matches!(reply.status, 401 | 403 | 404 | 405);
                if reached {
                    return Ok(Some((method, template)));
                }
            }
        }
        Ok(None)
    }
}

/// The turn-state means `event` shows, with its word, when it holds `turn` and a state of part 3
/// beside a member that names its kind.
fn turn_state(event: &Value, turn: &str) -> Option<(TurnState, String)> {
    let turn_id = leaf(event, &|_, text| text == turn)?;
    let state = leaf(event, &|_, text| crate::checks::TURN_STATES.contains(&text))?;
    let (kind, value) = kind_of(event)?;
    let word = event.pointer(&state)?.as_str()?.to_owned();
    let means = TurnState {
        kind,
        value,
        turn_id,
        state,
    };
    Some((means, word))
}

/// The member that names `event`'s kind, and its value.
fn kind_of(event: &Value) -> Option<(String, String)> {
    KIND_MEMBERS.iter().find_map(|member| {
        let value = event.get(*member)?.as_str()?;
        Some((format!("/{member}"), value.to_owned()))
    })
}

/// The pointers of the action id and revision that `holder` (at `at`) holds: a member named
/// `id`, else one whose name ends in `id` or `ref` and holds neither the turn nor a session; and
/// an integer whose name begins with `rev`.
fn id_and_revision(holder: &Value, at: &str, turn: &str) -> Option<(String, String)> {
    let holder = holder.as_object()?;
    let ids = holder.iter().filter(|(name, value)| {
        let lower = name.to_ascii_lowercase();
        let named = lower.ends_with("id") || lower.ends_with("ref");
        value.is_string() && named && *value != turn && !lower.contains("session")
    });
    let (name, _) = ids.min_by_key(|(name, _)| name.as_str() != "id")?;
    let revision = holder.iter().find_map(|(name, value)| {
        (value.is_i64() && name.to_ascii_lowercase().starts_with("rev"))
            .then(|| format!("{at}/{name}"))
    })?;
    Some((format!("{at}/{name}"), revision))
}

/// The action means `event` shows when it holds `turn` and a Build's `digest` inside an object
/// with an id and a revision.
fn action_entry(event: &Value, turn: &str) -> Option<ActionEntry> {
    let turn_id = leaf(event, &|_, text| text == turn)?;
    let digest = leaf(event, &|path, text| {
        path.last().is_some_and(|name| name == "digest") && text.starts_with("sha256:")
    })?;
    let build = digest.strip_suffix("/digest")?.to_owned();
    // The action's id and revision: in the nearest object that holds the Build, at any depth
    // (an entry may carry the ActionRequest nested, as part 1 says).
    let mut parent = build.as_str();
    let (id, revision) = loop {
        parent = parent.rsplit_once('/').map_or("", |(up, _)| up);
        if let Some(found) = id_and_revision(event.pointer(parent)?, parent, turn) {
            break found;
        }
        if parent.is_empty() {
            return None;
        }
    };
    let (kind, value) = kind_of(event)?;
    Some(ActionEntry {
        kind,
        value,
        turn_id,
        action_id: id,
        revision,
        build,
    })
}
