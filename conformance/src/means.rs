//! How the suite reaches a deployment where the interface document leaves the means open: the
//! config file's `profile`, each key defaulting to our reference profile.
//!
//! A means is not a fact: the level of what a check asserts through one is the level of the fact
//! asserted. A deployment that refuses a means (a 4xx, or an answer without what the means
//! needs) makes the check inconclusive: it is skipped, naming the key to set.
//!
//! ```json
//! "profile": {
//!   "cursorParameter": "cursor",
//!   "chat": { "body": { "message": "{message}", "sessionId": "{sessionId}" },
//!             "sessionId": "/sessionId", "turnId": "/turnId" },
//!   "turnState": { "kind": "/type", "value": "turn_state", "turnId": "/turnId", "state": "/state" },
//!   "resolution": { "method": "POST",
//!                   "path": "/v1/agent/sessions/{sessionId}/actions/{actionId}/resolve",
//!                   "idempotencyHeader": "Idempotency-Key" },
//!   "commit": { "body": "{build}" },
//!   "streamCursor": { "header": "Last-Event-ID" }
//! }
//! ```
//!
//! `streamCursor` is `{ "query": NAME }` or `{ "header": NAME }`; left out, a stream takes its
//! cursor as the poll does (`cursorParameter`).

use serde::Deserialize;
use serde_json::{Value, json};

use crate::finding::Finding;

/// The means of reaching a deployment (config key `profile`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Means {
    /// The query parameter that carries an event page's cursor (part 4.2 does not show its name).
    pub cursor_parameter: String,
    /// How a turn is started (part 4.2 does not show the chat request and answer).
    pub chat: Chat,
    /// Where a page tells a turn's state (part 2.13 does not show the event entries).
    pub turn_state: TurnState,
    /// How an action is resolved (part 4.2 does not show the path and method).
    pub resolution: Resolution,
    /// How a Build is presented for commit (part 4.1 does not show the request body).
    pub commit: Commit,
    /// How a stream is opened from a cursor (part 6 does not show it); `None`: as the poll
    /// takes its cursor.
    pub stream_cursor: Option<StreamCursor>,
}

/// Where a stream takes the cursor it resumes from (config key `profile.streamCursor`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum StreamCursor {
    /// In the query parameter of this name.
    Query(String),
    /// In the header of this name, such as `Last-Event-ID`.
    Header(String),
}

impl Means {
    /// The keys whose means differ from our profile's: those a config file set.
    pub fn set_keys(&self) -> Vec<&'static str> {
        let ours = Self::default();
        [
            (
                "cursorParameter",
                self.cursor_parameter != ours.cursor_parameter,
            ),
            ("chat", self.chat != ours.chat),
            ("turnState", self.turn_state != ours.turn_state),
            ("resolution", self.resolution != ours.resolution),
            ("commit", self.commit != ours.commit),
            ("streamCursor", self.stream_cursor.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect()
    }

    /// Where a stream takes its cursor: `profile.streamCursor`, else the poll's parameter.
    pub fn stream_cursor(&self) -> StreamCursor {
        self.stream_cursor
            .clone()
            .unwrap_or_else(|| StreamCursor::Query(self.cursor_parameter.clone()))
    }
}

impl Default for Means {
    fn default() -> Self {
        Self {
            cursor_parameter: "cursor".into(),
            chat: Chat::default(),
            turn_state: TurnState::default(),
            resolution: Resolution::default(),
            commit: Commit::default(),
            stream_cursor: None,
        }
    }
}

/// The chat request (config key `profile.chat`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Chat {
    /// The request body: the string `{message}` becomes the message and `{sessionId}` the
    /// session; a member whose value is `{sessionId}` is left out when a turn starts a session.
    pub body: Value,
    /// JSON pointer to the session id in the answer.
    pub session_id: String,
    /// JSON pointer to the turn id in the answer.
    pub turn_id: String,
}

impl Default for Chat {
    fn default() -> Self {
        Self {
            body: json!({ "message": "{message}", "sessionId": "{sessionId}" }),
            session_id: "/sessionId".into(),
            turn_id: "/turnId".into(),
        }
    }
}

impl Chat {
    /// The body that says `message`, in `session` or a new one.
    pub fn request(&self, message: &str, session: Option<&str>) -> Value {
        fill(&self.body, &|text| match text {
            "{message}" => Some(Some(Value::from(message))),
            "{sessionId}" => Some(session.map(Value::from)),
            _ => None,
        })
        .unwrap_or(Value::Null)
    }
}

/// Where an event entry tells a turn's state (config key `profile.turnState`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TurnState {
    /// JSON pointer to the member that names an entry's kind.
    pub kind: String,
    /// The kind of the entries that tell a turn's state.
    pub value: String,
    /// JSON pointer to the turn id in such an entry.
    pub turn_id: String,
    /// JSON pointer to the state in such an entry.
    pub state: String,
}

impl Default for TurnState {
    fn default() -> Self {
        Self {
            kind: "/type".into(),
            value: "turn_state".into(),
            turn_id: "/turnId".into(),
            state: "/state".into(),
        }
    }
}

impl TurnState {
    /// The state `event` gives `turn`, when it is an entry of that kind for that turn.
    pub fn of<'a>(&self, event: &'a Value, turn: &str) -> Option<&'a str> {
        let kind = event.pointer(&self.kind).and_then(Value::as_str);
        let this = event.pointer(&self.turn_id).and_then(Value::as_str);
        if kind == Some(self.value.as_str()) && this == Some(turn) {
            event.pointer(&self.state).and_then(Value::as_str)
        } else {
            None
        }
    }
}

/// How an action is resolved (config key `profile.resolution`); the body, `{ revision, result }`,
/// is the document's.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Resolution {
    /// The HTTP method.
    pub method: String,
    /// The path, with `{sessionId}` and `{actionId}` replaced.
    pub path: String,
    /// The header that carries the idempotency key.
    pub idempotency_header: String,
}

impl Default for Resolution {
    fn default() -> Self {
        Self {
            method: "POST".into(),
            path: "/v1/agent/sessions/{sessionId}/actions/{actionId}/resolve".into(),
            idempotency_header: "Idempotency-Key".into(),
        }
    }
}

impl Resolution {
    /// The HTTP method, in any case as configured; `POST` when it names none.
    pub fn http_method(&self) -> reqwest::Method {
        self.method
            .to_ascii_uppercase()
            .parse()
            .unwrap_or(reqwest::Method::POST)
    }

    /// The path that resolves `action` of `session`.
    pub fn path(&self, session: &str, action: &str) -> String {
        self.path
            .replace("{sessionId}", session)
            .replace("{actionId}", action)
    }
}

/// How a Build is presented for commit (config key `profile.commit`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Commit {
    /// The request body: the string `{build}` becomes the Build.
    pub body: Value,
}

impl Default for Commit {
    fn default() -> Self {
        Self {
            body: json!("{build}"),
        }
    }
}

impl Commit {
    /// The body that presents `build` for commit.
    pub fn request(&self, build: &Value) -> Value {
        fill(&self.body, &|text| {
            (text == "{build}").then(|| Some(build.clone()))
        })
        .unwrap_or(Value::Null)
    }
}

/// `template` with each string that `value` knows replaced: by its value, or left out (in an
/// object) when that is `None`.
fn fill(template: &Value, value: &dyn Fn(&str) -> Option<Option<Value>>) -> Option<Value> {
    match template {
        Value::String(text) => value(text).unwrap_or_else(|| Some(template.clone())),
        Value::Object(members) => Some(Value::Object(
            members
                .iter()
                .filter_map(|(key, member)| Some((key.clone(), fill(member, value)?)))
                .collect(),
        )),
        Value::Array(items) => Some(Value::Array(
            items.iter().filter_map(|item| fill(item, value)).collect(),
        )),
        other => Some(other.clone()),
    }
}

/// A check that cannot reach the deployment through the means at config key `profile.{key}`:
/// skipped as inconclusive, never a failure.
pub fn inconclusive(key: &str, what: impl std::fmt::Display) -> Finding {
    Finding::Skip(format!(
        "inconclusive: {what}; the deployment refuses this means of our profile: set `profile.{key}` in the config file"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_fill_their_placeholders_and_drop_an_absent_session() {
        let means = Means::default();
        assert_eq!(
            means.chat.request("hi", Some("s1")),
            json!({ "message": "hi", "sessionId": "s1" })
        );
        assert_eq!(means.chat.request("hi", None), json!({ "message": "hi" }));
        let build = json!({ "digest": "sha256:00" });
        assert_eq!(means.commit.request(&build), build);
        let wrapped = Commit {
            body: json!({ "build": "{build}", "mode": "commit" }),
        };
        assert_eq!(
            wrapped.request(&build),
            json!({ "build": build, "mode": "commit" })
        );
        assert_eq!(
            means.resolution.path("s", "a"),
            "/v1/agent/sessions/s/actions/a/resolve"
        );
        let lower = Resolution {
            method: "put".into(),
            ..Resolution::default()
        };
        assert_eq!(lower.http_method(), reqwest::Method::PUT);
    }

    #[test]
    fn a_turn_state_is_read_where_the_profile_says() {
        let ours = TurnState::default();
        let event = json!({ "type": "turn_state", "turnId": "t1", "state": "complete" });
        assert_eq!(ours.of(&event, "t1"), Some("complete"));
        assert_eq!(ours.of(&event, "t2"), None);
        let theirs = TurnState {
            kind: "/kind".into(),
            value: "turn".into(),
            turn_id: "/turn/id".into(),
            state: "/turn/state".into(),
        };
        let event = json!({ "kind": "turn", "turn": { "id": "t1", "state": "failed" } });
        assert_eq!(theirs.of(&event, "t1"), Some("failed"));
    }

    #[test]
    fn a_partial_profile_keeps_the_other_defaults() {
        let means: Means = serde_json::from_value(json!({ "cursorParameter": "after" })).unwrap();
        assert_eq!(means.cursor_parameter, "after");
        assert_eq!(means.chat.turn_id, "/turnId");
        assert!(serde_json::from_value::<Means>(json!({ "cursor": "x" })).is_err());
    }
}
