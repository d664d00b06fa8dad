//! A credential process, in the style of kubectl's exec plugins and AWS `credential_process`:
//! a program prints a token on its standard output.

use std::ffi::OsString;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;

use super::{Held, Resource, Slot, TokenSource};
use crate::Error;

/// Runs a program for each token and reads the token from its standard output: either JSON with
/// `access_token` and optionally `expires_in` (seconds), or the bare token on the last line that
/// is not empty (what the conformance suite's `--token-command` reads too). The expiry is the
/// JWT's `exp` when the token is a JWT, else `expires_in`; the program runs again ahead of it,
/// and after a 401. A program that fails is an [`Error::Token`] showing its standard error.
///
/// ```no_run
/// use intent_sdk::auth::CommandToken;
/// let source = CommandToken::new(
///     "intent-server",
///     ["token", "--data-dir", "data", "--sub", "me", "--scope", "agent:read", "--resource", "http://127.0.0.1:8080/v1/agent"],
/// );
/// ```
#[derive(Debug)]
pub struct CommandToken {
    program: OsString,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    slot: Slot,
}

/// The variable a token command reads its resource's identifier from.
const RESOURCE_ENV: &str = "INTENT_RESOURCE";
/// The variable a token command reads the scopes to ask for from, space-separated.
const SCOPE_ENV: &str = "INTENT_SCOPE";
/// The variable a token command reads its account from: `primary`, or `secondary` for the
/// conformance suite's isolation checks.
pub(crate) const ACCOUNT_ENV: &str = "INTENT_ACCOUNT";

/// A program that has printed nothing by then is killed and the renewal fails.
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(60);

/// The JSON a program may print.
#[derive(Deserialize)]
struct Printed {
    access_token: String,
    expires_in: Option<u64>,
}

impl CommandToken {
    /// `program` run with `args`; it is first run when a token is needed.
    pub fn new(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            envs: Vec::new(),
            slot: Slot::default(),
        }
    }

    /// The token command of a deployment at `base` for `resource`: `command` run through `sh -c`
    /// with `INTENT_RESOURCE` (the resource's identifier), `INTENT_SCOPE` (the resource's scopes
    /// in openapi.json, space-separated) and `INTENT_ACCOUNT` (`account`) in its environment,
    /// the contract the conformance suite's `--token-command` keeps too, so that one script
    /// serves both (docs/token-command.md).
    pub fn shell(command: &str, base: &str, resource: Resource, account: &str) -> Self {
        Self::new("sh", ["-c", command])
            .env(RESOURCE_ENV, resource.identifier(base))
            .env(SCOPE_ENV, resource.scopes().join(" "))
            .env(ACCOUNT_ENV, account)
    }

    /// Runs the program with the environment variable `name` set to `value` too.
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.envs.push((name.into(), value.into()));
        self
    }

    async fn run(&self) -> Result<Option<Held>, Error> {
        let name = self.program.to_string_lossy();
        let running = tokio::process::Command::new(&self.program)
            .args(&self.args)
            .envs(self.envs.iter().map(|(name, value)| (name, value)))
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(PROGRAM_TIMEOUT, running)
            .await
            .map_err(|_| {
                Error::Token(format!(
                    "`{name}` printed no token within {PROGRAM_TIMEOUT:?}"
                ))
            })?
            .map_err(|e| Error::Token(format!("cannot run `{name}`: {e}")))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(Error::Token(format!(
                "`{name}` failed ({}): {}",
                output.status,
                stderr.trim()
            )));
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        parse(stdout.trim(), SystemTime::now())
            .map(Some)
            .map_err(|reason| Error::Token(format!("`{name}` printed no token: {reason}")))
    }
}

impl TokenSource for CommandToken {
    async fn token(&self) -> Result<String, Error> {
        self.slot.token(|| self.run()).await
    }

    async fn refresh(&self, rejected: &str) -> Result<Option<String>, Error> {
        self.slot.replace(rejected, || self.run()).await
    }
}

/// The token a program printed, with its lifetime from `now`.
fn parse(stdout: &str, now: SystemTime) -> Result<Held, String> {
    let (token, expires_in) = if stdout.starts_with('{') {
        let printed: Printed = serde_json::from_str(stdout).map_err(|e| e.to_string())?;
        (printed.access_token, printed.expires_in)
    } else {
        let last = stdout.lines().map(str::trim).rfind(|line| !line.is_empty());
        (last.unwrap_or_default().to_owned(), None)
    };
    if token.is_empty() || token.chars().any(char::is_whitespace) {
        return Err("the output is empty or has more than one word".to_owned());
    }
    let lifetime = match jwt_exp(&token) {
        Some(exp) => {
            let now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
            Some(Duration::from_secs(exp.saturating_sub(now)))
        }
        None => expires_in.map(Duration::from_secs),
    };
    Ok(Held::new(token, lifetime))
}

/// The `exp` claim of a JWT, read without checking its signature (the server checks it).
fn jwt_exp(token: &str) -> Option<u64> {
    let payload = token.split('.').nth(1)?;
    let claims: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
    claims["exp"].as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(exp: u64) -> String {
        let part = |json: &str| URL_SAFE_NO_PAD.encode(json);
        format!(
            "{}.{}.sig",
            part(r#"{"alg":"EdDSA"}"#),
            part(&format!(r#"{{"exp":{exp}}}"#))
        )
    }

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds)
    }

    #[tokio::test(start_paused = true)]
    async fn the_expiry_is_the_jwts_exp_before_expires_in() {
        let token = jwt(1_000_100);
        let printed = format!(r#"{{"access_token":"{token}","expires_in":5}}"#);
        let held = parse(&printed, at(1_000_000)).unwrap();
        assert_eq!(held.secret, token);
        // 100 s of life: renewed 20 s before its end.
        tokio::time::advance(Duration::from_secs(79)).await;
        assert!(held.fresh());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!held.fresh());
    }

    #[tokio::test(start_paused = true)]
    async fn a_bare_opaque_token_never_expires_and_json_expires_in_counts() {
        let bare = parse("opaque-token", at(0)).unwrap();
        assert_eq!(
            (bare.secret.as_str(), bare.renew_at),
            ("opaque-token", None)
        );
        let json = parse(r#"{"access_token":"opaque","expires_in":10}"#, at(0)).unwrap();
        tokio::time::advance(Duration::from_secs(8)).await;
        assert!(!json.fresh());
    }

    #[test]
    fn output_that_is_not_one_token_is_refused() {
        for output in [
            "",
            "two words",
            "logged in\ntwo words",
            r#"{"expires_in":5}"#,
        ] {
            assert!(parse(output, at(0)).is_err(), "{output:?}");
        }
        // What a script logs before its token is not the token.
        let logged = parse("minting a token for the agent\n\nthe-token\n", at(0)).unwrap();
        assert_eq!(logged.secret, "the-token");
    }

    #[tokio::test]
    async fn a_failing_program_is_a_token_error_showing_its_stderr() {
        let source = CommandToken::new("sh", ["-c", "echo no such account >&2; exit 3"]);
        let error = TokenSource::token(&source).await.unwrap_err();
        let Error::Token(message) = error else {
            panic!("{error:?}")
        };
        assert!(message.contains("no such account"), "{message}");
        assert!(message.contains("exit status: 3"), "{message}");
    }

    #[tokio::test]
    async fn the_program_runs_again_after_a_rejection_and_not_before() {
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("count");
        let script = format!("echo x >> {0}; echo token-$(wc -l < {0})", count.display());
        let source = CommandToken::new("sh", ["-c", script.as_str()]);
        assert_eq!(TokenSource::token(&source).await.unwrap(), "token-1");
        assert_eq!(TokenSource::token(&source).await.unwrap(), "token-1");
        let fresh = TokenSource::refresh(&source, "token-1").await.unwrap();
        assert_eq!(fresh.as_deref(), Some("token-2"));
    }
}
