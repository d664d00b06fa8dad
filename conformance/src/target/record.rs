//! What a run records of the deployment's answers: each response with the check that got it,
//! the schema violations among them, each operation's statuses (the coverage), and what the run
//! made, to clean up.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use reqwest::Method;
use serde::Serialize;
use serde_json::Value;

use crate::exchange::Exchange;
use crate::finding::Broke;
use crate::spec::{Level, Operation, spec};

/// A response body that broke its schema in openapi.json.
#[derive(Debug, Clone)]
pub struct BrokenBody {
    /// The check whose request got it.
    pub check: &'static str,
    /// `METHOD /path` as sent.
    pub request: String,
    /// The status of the response.
    pub status: u16,
    /// Normative when the body breaks what every deployment must follow; profile when it breaks
    /// only a choice of our reference profile.
    pub level: Level,
    /// What is wrong.
    pub errors: Vec<String>,
    /// How it broke, for fingerprints.
    pub broke: Vec<Broke>,
    /// The exchange that got it.
    pub exchange: Exchange,
}

/// What a run's clean-up did with what the run created, each thing named by the path that
/// deletes it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CleanUp {
    /// Removed (or already gone).
    pub removed: Vec<String>,
    /// Left behind, with why.
    pub left: Vec<String>,
}

/// One response seen in the run, kept for the checks that read them all.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The check whose request got it.
    pub check: &'static str,
    /// `METHOD /path` as sent.
    pub request: String,
    /// The status.
    pub status: u16,
    /// The body, `Null` when empty or not JSON.
    pub body: Value,
    /// The exchange that got it.
    pub exchange: Exchange,
}

tokio::task_local! {
    /// The id of the check whose requests the current task makes.
    static CHECK: &'static str;
}

/// Runs `body` as the check `id`: the responses it sees are noted as its own.
pub(crate) async fn checking<F: std::future::Future>(id: &'static str, body: F) -> F::Output {
    CHECK.scope(id, body).await
}

/// How a run exercised one operation of openapi.json.
#[derive(Debug, Clone, Serialize)]
pub struct Coverage {
    /// Upper-case HTTP method.
    pub method: String,
    /// The path template.
    pub path: String,
    /// Every status the deployment answered it with, ascending.
    pub statuses: Vec<u16>,
    /// The statuses openapi.json documents for it that the run never saw, in its order.
    pub unseen: Vec<String>,
}

impl Coverage {
    /// The coverage of `operation`, answered with `statuses` (ascending): with the statuses
    /// openapi.json documents for it that are not among them.
    pub fn of(operation: &Operation, statuses: Vec<u16>) -> Self {
        let documented = spec()
            .operation_object(&operation.method, &operation.template)
            .and_then(|object| object["responses"].as_object())
            .into_iter()
            .flat_map(|responses| responses.keys());
        let unseen = documented
            .filter(|status| {
                status
                    .parse::<u16>()
                    .is_ok_and(|status| !statuses.contains(&status))
            })
            .cloned()
            .collect();
        Self {
            method: operation.method.clone(),
            path: operation.template.clone(),
            statuses,
            unseen,
        }
    }

    /// Whether the operation was answered with a success status, so that its success schema
    /// was validated.
    pub fn succeeded(&self) -> bool {
        self.statuses
            .iter()
            .any(|status| (200..300).contains(status))
    }
}

/// What a run saw and made: every response with the check that got it, the schema violations
/// among them, the statuses each operation answered, and what the run made and has not deleted.
#[derive(Default)]
pub(crate) struct Record {
    seen: Mutex<Vec<Arc<Seen>>>,
    violations: Mutex<Vec<BrokenBody>>,
    /// The statuses answered per operation, keyed by `METHOD template`.
    answered: Mutex<BTreeMap<String, BTreeSet<u16>>>,
    /// What the run made and has not deleted (sessions, installed apps, saved credentials), by
    /// the path that deletes it, with the token that made it.
    made: Mutex<BTreeMap<String, String>>,
    /// What the run learnt of the `profile.turnState` means: `Some(true)` once a turn's state
    /// was read through it, `Some(false)` once a whole turn timeout passed without one.
    turn_state: Mutex<Option<bool>>,
}

impl Record {
    /// Every response seen so far (shared, not copied: a run sees hundreds).
    pub(crate) fn seen(&self) -> Vec<Arc<Seen>> {
        self.seen.lock().expect("seen responses").clone()
    }

    /// Notes that a turn's state was `read` through `profile.turnState`, or that a whole turn
    /// timeout passed without one (`read` false); whether the means is refused: a timeout passed
    /// without a state and none was read before, so that no later turn is waited for in vain.
    pub(crate) fn turn_state_refused(&self, read: bool, timed_out: bool) -> bool {
        let mut known = self.turn_state.lock().expect("turn state means");
        if read {
            *known = Some(true);
        } else if timed_out {
            known.get_or_insert(false);
        }
        *known == Some(false)
    }

    /// Every schema violation found so far.
    pub(crate) fn violations(&self) -> Vec<BrokenBody> {
        self.violations.lock().expect("violations").clone()
    }

    /// Every operation of openapi.json, in its order, with the statuses answered so far.
    pub(crate) fn coverage(&self) -> Vec<Coverage> {
        let answered = self.answered.lock().expect("answered statuses");
        spec()
            .operations()
            .iter()
            .map(|operation| {
                let statuses = answered.get(&operation.reference);
                let statuses = statuses.into_iter().flatten().copied();
                Coverage::of(operation, statuses.collect())
            })
            .collect()
    }

    /// The operation of openapi.json a request for `method` and `path` (with its query) is an
    /// instance of, after noting that it answered `status`.
    pub(crate) fn answered(
        &self,
        method: &Method,
        path: &str,
        status: u16,
    ) -> Option<&'static Operation> {
        let route = path.split('?').next().unwrap_or(path);
        let operation = spec().operation(method.as_str(), route)?;
        let mut answered = self.answered.lock().expect("answered statuses");
        answered
            .entry(operation.reference.clone())
            .or_default()
            .insert(status);
        Some(operation)
    }

    /// Notes what a successful request created or deleted: the sessions the run starts, the apps
    /// it installs and the credentials it saves.
    /// A chat answer names its session at `means.chat.sessionId`.
    pub(crate) fn created(
        &self,
        (method, path): (&Method, &str),
        body: &Value,
        bearer: Option<String>,
        means: &crate::means::Means,
    ) {
        let route = path.split('?').next().unwrap_or(path);
        let made = match (method.as_str(), route) {
            ("POST", "/v1/agent/chat") => body
                .pointer(&means.chat.session_id)
                .and_then(Value::as_str)
                .map(|session| format!("/v1/agent/sessions/{session}")),
            // An install: `/v1/account/apps/{applicationId}`, nothing after it.
            ("POST", _)
                if route
                    .strip_prefix("/v1/account/apps/")
                    .is_some_and(|id| !id.contains('/')) =>
            {
                Some(route.to_owned())
            }
            ("PUT", _) if route.contains("/secrets/") => Some(route.to_owned()),
            ("DELETE", _) => {
                self.made.lock().expect("made").remove(route);
                None
            }
            _ => None,
        };
        if let (Some(made), Some(token)) = (made, bearer) {
            self.made(made, token);
        }
    }

    /// Notes that the run made what `path` deletes, with `token`.
    pub(crate) fn made(&self, path: String, token: String) {
        self.made.lock().expect("made").entry(path).or_insert(token);
    }

    /// Takes what the run made and has not deleted, in the order to delete it (credentials, then
    /// apps, then sessions), each with the token that made it.
    pub(crate) fn take_made(&self) -> Vec<(String, String)> {
        let made = std::mem::take(&mut *self.made.lock().expect("made"));
        let mut made: Vec<(String, String)> = made.into_iter().collect();
        made.sort_by_key(|(path, _)| {
            let order = if path.contains("/secrets/") {
                0
            } else if path.starts_with("/v1/account/") {
                1
            } else {
                2
            };
            (order, path.clone())
        });
        made
    }

    /// Validates the response of `exchange` against openapi.json and keeps it as the running
    /// check's.
    pub(crate) fn response(
        &self,
        exchange: &Exchange,
        sent: Option<&Value>,
        (method, path): (&Method, &str),
        (body, text): (&Value, &str),
    ) {
        let status = exchange.status.unwrap_or_default();
        let operation = self.answered(method, path, status);
        let check = CHECK.try_with(|check| *check).unwrap_or_default();
        let request = format!("{method} {path}");
        let judged =
            operation.and_then(|operation| spec().judge(operation, sent, (status, body, text)));
        if let Some(judged) = judged {
            self.violations
                .lock()
                .expect("violations")
                .push(BrokenBody {
                    check,
                    request: request.clone(),
                    status,
                    level: judged.level,
                    errors: judged.errors,
                    broke: judged.broke,
                    exchange: exchange.clone(),
                });
        }
        self.seen
            .lock()
            .expect("seen responses")
            .push(Arc::new(Seen {
                check,
                request,
                status,
                body: body.clone(),
                exchange: exchange.clone(),
            }));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_turn_state_means_is_refused_only_after_a_timeout_with_no_state_read_before() {
        let record = Record::default();
        assert!(
            !record.turn_state_refused(false, false),
            "nothing known yet"
        );
        assert!(
            record.turn_state_refused(false, true),
            "a timeout without a state"
        );
        assert!(
            record.turn_state_refused(false, false),
            "refused for the next turn"
        );
        assert!(
            !record.turn_state_refused(true, false),
            "a state read proves it"
        );
        assert!(
            !record.turn_state_refused(false, true),
            "a proved means stays proved"
        );
        let proved = Record::default();
        assert!(!proved.turn_state_refused(true, false));
        assert!(
            !proved.turn_state_refused(false, true),
            "a slow turn on a proved means"
        );
    }

    fn exchange(method: Method, path: &str, status: u16) -> Exchange {
        let url = format!("http://deployment.test{path}").parse().unwrap();
        let mut exchange = Exchange::sent(&reqwest::Request::new(method, url), |_| false);
        exchange.answered(status, &Default::default(), Default::default());
        exchange
    }

    #[tokio::test]
    async fn a_response_is_kept_as_the_running_checks_with_its_violations_and_coverage() {
        let record = Record::default();
        let path = "/v1/agent/sessions/s1?trace=1";
        let body = json!({ "unexpected": true });
        checking("agent.sessions.read", async {
            let exchange = exchange(Method::GET, path, 200);
            record.response(&exchange, None, (&Method::GET, path), (&body, "{}"));
        })
        .await;
        let seen = record.seen();
        assert_eq!(
            (seen[0].check, seen[0].status, &seen[0].request[..]),
            (
                "agent.sessions.read",
                200,
                "GET /v1/agent/sessions/s1?trace=1"
            )
        );
        let violations = record.violations();
        assert_eq!(violations.len(), 1, "a Session is not that body");
        assert_eq!(violations[0].check, "agent.sessions.read");
        let coverage = record.coverage();
        let session = coverage
            .iter()
            .find(|c| c.method == "GET" && c.path == "/v1/agent/sessions/{sessionId}")
            .unwrap();
        assert_eq!(session.statuses, [200]);
        assert!(!session.unseen.contains(&"200".to_owned()));
        assert!(coverage.iter().filter(|c| !c.statuses.is_empty()).count() == 1);
    }

    #[test]
    fn what_the_run_made_is_taken_credentials_first_and_a_delete_forgets_it() {
        let record = Record::default();
        let token = || Some("t".to_owned());
        let chat = |session: &str| json!({ "sessionId": session });
        record.created(
            (&Method::POST, "/v1/agent/chat"),
            &chat("s1"),
            token(),
            &crate::means::Means::default(),
        );
        record.created(
            (&Method::POST, "/v1/agent/chat"),
            &chat("s2"),
            token(),
            &crate::means::Means::default(),
        );
        record.created(
            (&Method::POST, "/v1/account/apps/7"),
            &Value::Null,
            token(),
            &crate::means::Means::default(),
        );
        record.created(
            (&Method::PUT, "/v1/account/apps/7/secrets/k"),
            &Value::Null,
            token(),
            &crate::means::Means::default(),
        );
        record.created(
            (&Method::DELETE, "/v1/agent/sessions/s2"),
            &Value::Null,
            token(),
            &crate::means::Means::default(),
        );
        record.created(
            (&Method::GET, "/v1/agent/sessions/s1"),
            &Value::Null,
            token(),
            &crate::means::Means::default(),
        );
        let made: Vec<String> = record
            .take_made()
            .into_iter()
            .map(|(path, _)| path)
            .collect();
        assert_eq!(
            made,
            [
                "/v1/account/apps/7/secrets/k",
                "/v1/account/apps/7",
                "/v1/agent/sessions/s1"
            ]
        );
        assert!(record.take_made().is_empty(), "taken once");
    }
}
