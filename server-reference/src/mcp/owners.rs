//! Each handshake session belongs to the account whose token opened it, as MCP's security best
//! practices ask (a session id is bound to its user, never taken as proof of one): a request
//! that names another account's session, or one this instance did not open, is answered as for
//! a session that ended (404), so a leaked id gives no one the questions or notifications meant
//! for its owner. A session ended by DELETE is answered 204 No Content (rmcp says 202, which
//! clients that expect 200 or 204, the Python SDK's among them, report).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::principal::Principal;
use crate::ids::AccountId;

const SESSION_HEADER: &str = "mcp-session-id";

/// How long an owner is remembered without a request: well past rmcp's end of an idle session
/// (5 minutes), so that a session outlives its owner's record only when it has already ended.
const REMEMBERED: Duration = Duration::from_secs(3600);

/// The owner of each session this instance opened, and when it was last named.
#[derive(Default)]
pub struct Owners(Mutex<HashMap<String, (AccountId, Instant)>>);

/// Refuses a request naming a session another account opened, and records who opens one.
pub async fn guard(State(owners): State<Arc<Owners>>, request: Request, next: Next) -> Response {
    let account = request
        .extensions()
        .get::<Principal>()
        .map(|principal| principal.account.clone());
    let named = session(request.headers());
    if let Some(named) = &named
        && !owners.admits(named, account.as_ref())
    {
        return (StatusCode::NOT_FOUND, "no such session").into_response();
    }
    let deleting = request.method() == Method::DELETE;
    let mut response = next.run(request).await;
    match (&named, session(response.headers()), account) {
        (None, Some(opened), Some(account)) => owners.record(opened, account),
        (Some(ended), _, _) if deleting && response.status().is_success() => {
            owners.forget(ended);
            if response.status() == StatusCode::ACCEPTED {
                *response.status_mut() = StatusCode::NO_CONTENT;
            }
        }
        _ => {}
    }
    response
}

fn session(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(SESSION_HEADER)?.to_str().ok()?;
    Some(value.to_owned())
}

impl Owners {
    /// Whether `account` may use session `id`: it opened it here. A session this instance did
    /// not open is unknown to its rmcp too, which would answer 404 as well.
    fn admits(&self, id: &str, account: Option<&AccountId>) -> bool {
        let mut owners = self.0.lock().unwrap();
        match owners.get_mut(id) {
            Some((owner, seen)) if Some(&*owner) == account => {
                *seen = Instant::now();
                true
            }
            _ => false,
        }
    }

    fn record(&self, id: String, account: AccountId) {
        let mut owners = self.0.lock().unwrap();
        owners.retain(|_, (_, seen)| seen.elapsed() < REMEMBERED);
        owners.insert(id, (account, Instant::now()));
    }

    fn forget(&self, id: &str) {
        self.0.lock().unwrap().remove(id);
    }
}
