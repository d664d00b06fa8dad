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
//!   "action": { "kind": "/type", "value": "action", "turnId": "/turnId",
//!               "actionId": "/action/actionId", "revision": "/action/revision",
//!               "build": "/action/build" },
//!   "resolution": { "method": "POST",
//!                   "path": "/v1/agent/sessions/{sessionId}/actions/{actionId}/resolve",
//!                   "idempotencyHeader": "Idempotency-Key",
//!                   "result": { "outcome": "{outcome}", "digest": "{digest}" },
//!                   "approve": "approved", "reject": "rejected",
//!                   "resultEntry": { "kind": "/type", "value": "action_result",
//!                                    "actionId": "/actionId", "outcome": "/result/outcome" } },
//!   "commit": { "body": "{build}" },
//!   "streamCursor": { "header": "Last-Event-ID" },
//!   "errorCode": "/error/code"
//! }
//! ```
//!
//! `streamCursor` is `{ "query": NAME }` or `{ "header": NAME }`; left out, a stream takes its
//! cursor as the poll does (`cursorParameter`). `errorCode` left out, a code is `error` itself
//! when that is a string, else `error.code`. A chat answer may be any 2xx: no key names its
//! status.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::finding::Finding;

/// The means of reaching a deployment (config key `profile`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Means {
    /// The query parameter that carries an event page's cursor (part 4.2 does not show its name).
    pub cursor_parameter: String,
    /// How a turn is started (part 4.2 does not show the chat request and answer).
    pub chat: Chat,
    /// Where a page tells a turn's state (part 2.13 does not show the event entries).
    pub turn_state: TurnState,
    /// Where an event entry carries an action (part 2.13 does not show the event entries).
    pub action: ActionEntry,
    /// How an action is resolved (part 4.2 does not show the path, method and result).
    pub resolution: Resolution,
    /// How a Build is presented for commit (part 4.1 does not show the request body).
    pub commit: Commit,
    /// How a credential is saved before an install (part 4.3 shows no way to save one).
    pub credential: Credential,
    /// How a stream is opened from a cursor (part 6 does not show it); `None`: as the poll
    /// takes its cursor.
    pub stream_cursor: Option<StreamCursor>,
    /// JSON pointer to the code in an error envelope (part 7 does not show the content of
    /// `error`); `None`: `error` itself when a string, else `error.code`.
    pub error_code: Option<String>,
}

/// Where a stream takes the cursor it resumes from (config key `profile.streamCursor`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
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
            ("action", self.action != ours.action),
            ("resolution", self.resolution != ours.resolution),
            ("commit", self.commit != ours.commit),
            ("credential", self.credential != ours.credential),
            ("streamCursor", self.stream_cursor.is_some()),
            ("errorCode", self.error_code.is_some()),
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

    /// The code of the error envelope `body`, where `profile.errorCode` says.
    pub fn error_code<'a>(&self, body: &'a Value) -> Option<&'a str> {
        let code = code_at(self.error_code.as_deref(), body);
        crate::finding::through_means("errorCode", code.is_some());
        code
    }
}

impl Default for Means {
    fn default() -> Self {
        Self {
            cursor_parameter: "cursor".into(),
            chat: Chat::default(),
            turn_state: TurnState::default(),
            action: ActionEntry::default(),
            resolution: Resolution::default(),
            commit: Commit::default(),
            credential: Credential::default(),
            stream_cursor: None,
            error_code: None,
        }
    }
}

/// The chat request (config key `profile.chat`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
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
        let entry = is_entry(event, (&self.kind, &self.value), (&self.turn_id, turn));
        entry
            .then(|| event.pointer(&self.state)?.as_str())
            .flatten()
    }
}

/// Where an event entry carries an action the client must resolve (config key
/// `profile.action`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ActionEntry {
    /// JSON pointer to the member that names an entry's kind.
    pub kind: String,
    /// The kind of the entries that carry an action.
    pub value: String,
    /// JSON pointer to the turn id in such an entry.
    pub turn_id: String,
    /// JSON pointer to the action id.
    pub action_id: String,
    /// JSON pointer to the action's revision (a number, part 4.2).
    pub revision: String,
    /// JSON pointer to the Build the action asks the client to review; its `digest` is the
    /// document's (part 2.1).
    pub build: String,
}

impl Default for ActionEntry {
    fn default() -> Self {
        Self {
            kind: "/type".into(),
            value: "action".into(),
            turn_id: "/turnId".into(),
            action_id: "/action/actionId".into(),
            revision: "/action/revision".into(),
            build: "/action/build".into(),
        }
    }
}

/// An action a turn raised, as its entry names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raised {
    /// The action id.
    pub action: String,
    /// Its current revision.
    pub revision: i64,
    /// The digest of the Build it asks the client to review.
    pub digest: String,
}

impl ActionEntry {
    /// Whether `event` is an entry of this kind for `turn`.
    pub fn raised_in(&self, event: &Value, turn: &str) -> bool {
        is_entry(event, (&self.kind, &self.value), (&self.turn_id, turn))
    }

    /// The action `event` carries; the pointers it lacks when it does not name all of it.
    pub fn read(&self, event: &Value) -> Result<Raised, String> {
        let text = |pointer: &str| event.pointer(pointer).and_then(Value::as_str);
        let digest = format!("{}/digest", self.build);
        let revision = event.pointer(&self.revision).and_then(Value::as_i64);
        match (text(&self.action_id), revision, text(&digest)) {
            (Some(action), Some(revision), Some(digest)) => Ok(Raised {
                action: action.to_owned(),
                revision,
                digest: digest.to_owned(),
            }),
            (action, revision, found) => Err([
                (action.is_none(), self.action_id.as_str()),
                (revision.is_none(), self.revision.as_str()),
                (found.is_none(), digest.as_str()),
            ]
            .into_iter()
            .filter_map(|(missing, pointer)| missing.then_some(pointer))
            .collect::<Vec<_>>()
            .join(", ")),
        }
    }
}

/// How an action is resolved (config key `profile.resolution`); the body, `{ revision, result }`,
/// is the document's, the result's members are not.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Resolution {
    /// The HTTP method.
    pub method: String,
    /// The path, with `{sessionId}` and `{actionId}` replaced.
    pub path: String,
    /// The header that carries the idempotency key.
    pub idempotency_header: String,
    /// The ActionResult: the string `{outcome}` becomes `approve` or `reject`, and `{digest}`
    /// the reviewed Build's digest.
    pub result: Value,
    /// The outcome that approves the action.
    pub approve: String,
    /// The outcome that rejects it.
    pub reject: String,
    /// Where the log records a result.
    pub result_entry: ResultEntry,
}

impl Default for Resolution {
    fn default() -> Self {
        Self {
            method: "POST".into(),
            path: "/v1/agent/sessions/{sessionId}/actions/{actionId}/resolve".into(),
            idempotency_header: "Idempotency-Key".into(),
            result: json!({ "outcome": "{outcome}", "digest": "{digest}" }),
            approve: "approved".into(),
            reject: "rejected".into(),
            result_entry: ResultEntry::default(),
        }
    }
}

/// The two outcomes a resolution can send: the decision on the reviewed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The client approves the reviewed request.
    Approve,
    /// The client rejects it.
    Reject,
}

impl Resolution {
    /// The HTTP method, in any case as configured; `POST` when it names none.
    pub fn http_method(&self) -> reqwest::Method {
        method_or(&self.method, reqwest::Method::POST)
    }

    /// The path that resolves `action` of `session`.
    pub fn path(&self, session: &str, action: &str) -> String {
        self.path
            .replace("{sessionId}", session)
            .replace("{actionId}", action)
    }

    /// The word this deployment gives `outcome`.
    pub fn word(&self, outcome: Decision) -> &str {
        match outcome {
            Decision::Approve => &self.approve,
            Decision::Reject => &self.reject,
        }
    }

    /// The body that resolves at `revision` with `outcome`, naming the Build of `digest`.
    pub fn body(&self, revision: i64, outcome: Decision, digest: &str) -> Value {
        let result = fill(&self.result, &|text| match text {
            "{outcome}" => Some(Some(Value::from(self.word(outcome)))),
            "{digest}" => Some(Some(Value::from(digest))),
            _ => None,
        });
        json!({ "revision": revision, "result": result.unwrap_or(Value::Null) })
    }
}

/// Where the log records an action's result (config key `profile.resolution.resultEntry`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ResultEntry {
    /// JSON pointer to the member that names an entry's kind.
    pub kind: String,
    /// The kind of the entries that record a result.
    pub value: String,
    /// JSON pointer to the action id in such an entry.
    pub action_id: String,
    /// JSON pointer to the outcome it records.
    pub outcome: String,
}

impl Default for ResultEntry {
    fn default() -> Self {
        Self {
            kind: "/type".into(),
            value: "action_result".into(),
            action_id: "/actionId".into(),
            outcome: "/result/outcome".into(),
        }
    }
}

impl ResultEntry {
    /// The outcome `event` records for `action` (`null` where it names none), when it is an
    /// entry of this kind for it.
    pub fn outcome<'a>(&self, event: &'a Value, action: &str) -> Option<&'a Value> {
        let recorded = is_entry(event, (&self.kind, &self.value), (&self.action_id, action));
        recorded.then(|| event.pointer(&self.outcome).unwrap_or(&Value::Null))
    }
}

/// Whether `event` is an entry whose `kind` pointer holds `value` and whose `id` pointer holds
/// `of`: the kind of entry a means reads, about the turn or action at hand.
fn is_entry(event: &Value, (kind, value): (&str, &str), (id, of): (&str, &str)) -> bool {
    let text = |pointer: &str| event.pointer(pointer).and_then(Value::as_str);
    text(kind) == Some(value) && text(id) == Some(of)
}

/// How a Build is presented for commit (config key `profile.commit`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
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

/// How a credential an app needs is saved (config key `profile.credential`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Credential {
    /// The HTTP method.
    pub method: String,
    /// The path, with `{applicationId}` and `{name}` replaced.
    pub path: String,
    /// The request body: the strings `{name}` and `{value}` become the credential's.
    pub body: Value,
}

impl Default for Credential {
    fn default() -> Self {
        Self {
            method: "PUT".into(),
            path: "/v1/account/apps/{applicationId}/secrets/{name}".into(),
            body: json!({ "value": "{value}" }),
        }
    }
}

impl Credential {
    /// The HTTP method, in any case as configured; `PUT` when it names none.
    pub fn http_method(&self) -> reqwest::Method {
        method_or(&self.method, reqwest::Method::PUT)
    }

    /// The path that saves `name` for the app `application`.
    pub fn path(&self, application: i64, name: &str) -> String {
        self.path
            .replace("{applicationId}", &application.to_string())
            .replace("{name}", name)
    }

    /// The body that saves `value` as `name`.
    pub fn request(&self, name: &str, value: &str) -> Value {
        fill(&self.body, &|text| match text {
            "{name}" => Some(Some(Value::from(name))),
            "{value}" => Some(Some(Value::from(value))),
            _ => None,
        })
        .unwrap_or(Value::Null)
    }
}

/// The HTTP method `text` names, in any case; `default` when it names none.
fn method_or(text: &str, default: reqwest::Method) -> reqwest::Method {
    text.to_ascii_uppercase().parse().unwrap_or(default)
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

/// The code of the error envelope `body` at `pointer`; without one, where our profile puts it:
/// `error` itself when a string, else `error.code`.
pub fn code_at<'a>(pointer: Option<&str>, body: &'a Value) -> Option<&'a str> {
    match pointer {
        Some(pointer) => body.pointer(pointer).and_then(Value::as_str),
        None => body.get("error").and_then(|error| {
            error
                .as_str()
                .or_else(|| error.get("code").and_then(Value::as_str))
        }),
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
    fn an_action_and_its_result_are_read_and_written_where_the_profile_says() {
        let ours = Means::default();
        let entry = json!({ "type": "action", "turnId": "t1",
            "action": { "actionId": "a1", "revision": 2, "build": { "digest": "sha256:01" } } });
        assert!(ours.action.raised_in(&entry, "t1"));
        assert!(!ours.action.raised_in(&entry, "t2"));
        let raised = ours.action.read(&entry).unwrap();
        assert_eq!((raised.action.as_str(), raised.revision), ("a1", 2));
        assert_eq!(
            ours.resolution.body(2, Decision::Reject, &raised.digest),
            json!({ "revision": 2, "result": { "outcome": "rejected", "digest": "sha256:01" } })
        );
        let bare = json!({ "type": "action", "turnId": "t1", "action": { "actionId": "a1" } });
        assert_eq!(
            ours.action.read(&bare).unwrap_err(),
            "/action/revision, /action/build/digest"
        );
        let theirs: Means = serde_json::from_value(json!({
            "action": { "kind": "/kind", "value": "approval", "turnId": "/turn",
                        "actionId": "/approval/id", "revision": "/approval/rev",
                        "build": "/approval/envelope" },
            "resolution": { "result": { "decision": "{outcome}", "of": "{digest}" },
                            "approve": "yes", "reject": "no",
                            "resultEntry": { "kind": "/kind", "value": "decided",
                                             "actionId": "/approval", "outcome": "/decision" } },
            "errorCode": "/error/reason"
        }))
        .unwrap();
        let entry = json!({ "kind": "approval", "turn": "t1",
            "approval": { "id": "a9", "rev": 1, "envelope": { "digest": "sha256:02" } } });
        assert!(theirs.action.raised_in(&entry, "t1"));
        let raised = theirs.action.read(&entry).unwrap();
        assert_eq!(
            theirs.resolution.body(1, Decision::Approve, &raised.digest),
            json!({ "revision": 1, "result": { "decision": "yes", "of": "sha256:02" } })
        );
        let recorded = json!({ "kind": "decided", "approval": "a9", "decision": "no" });
        let entry = &theirs.resolution.result_entry;
        assert_eq!(entry.outcome(&recorded, "a9"), Some(&json!("no")));
        assert_eq!(entry.outcome(&recorded, "a1"), None);
        let error = json!({ "error": { "reason": "gone", "code": 7 } });
        assert_eq!(theirs.error_code(&error), Some("gone"));
        assert_eq!(ours.error_code(&json!({ "error": "bare" })), Some("bare"));
        assert_eq!(
            ours.error_code(&json!({ "error": { "code": "c" } })),
            Some("c")
        );
        assert_eq!(theirs.set_keys(), ["action", "resolution", "errorCode"]);
    }

    #[test]
    fn a_partial_profile_keeps_the_other_defaults() {
        let means: Means = serde_json::from_value(json!({ "cursorParameter": "after" })).unwrap();
        assert_eq!(means.cursor_parameter, "after");
        assert_eq!(means.chat.turn_id, "/turnId");
        assert!(serde_json::from_value::<Means>(json!({ "cursor": "x" })).is_err());
    }
}
