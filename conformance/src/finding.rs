//! What a check finds when it does not pass, the helpers that say so, and the ledger that counts
//! what a check asserted, so that a pass that asserted nothing shows, and keeps how each
//! assertion broke, so that a failure is known again in another run.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::exchange::Exchange;
use crate::sse::Frame;

/// Why a check did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The deployment broke the requirement.
    Fail(String),
    /// The suite could not do its part.
    Error(String),
    /// The check cannot run against this deployment or with these settings.
    Skip(String),
}

/// What a check's run concludes: `Ok` is a pass.
pub type Verdict = Result<(), Finding>;

/// How an assertion broke, told by what stays the same from run to run (never an id, a time, a
/// cursor or a port): what a failure's fingerprint is made of.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Broke {
    /// `what` was answered with the status `seen` where `expected` is stated.
    Status {
        /// The request, as [`Broke::assertion`] reads a message.
        what: String,
        /// The status stated.
        expected: u16,
        /// The status answered.
        seen: u16,
    },
    /// A body broke its schema.
    Schema {
        /// The operation whose answer broke it, for a check that judges the answers of several.
        at: Option<String>,
        /// The JSON pointer of the member, array indices read as `*`.
        pointer: String,
        /// The JSON Schema keyword it breaks.
        keyword: String,
    },
    /// Any other assertion: its message, with every word that holds a digit read as `#`.
    Assertion(String),
}

impl Broke {
    /// The assertion whose failure `message` tells, without the values that change between runs:
    /// the JSON it quotes is left out, each word (letters, digits, `_`, `-` and `.`) holding a
    /// digit reads as `#`, and the text is cut to 300 characters.
    pub fn assertion(message: &str) -> Self {
        Self::Assertion(shape(message))
    }

    /// A schema violation of the answer to `at` (the operation's id, when the check judges
    /// several).
    pub fn schema(at: Option<&str>, violation: &intent_models::schema::Violation) -> Self {
        Self::Schema {
            at: at.map(str::to_owned),
            pointer: any_index(&violation.pointer),
            keyword: violation.keyword.clone(),
        }
    }
}

/// The JSON pointer `pointer` with its array indices read as `*`, so that the same member of
/// different entries reads the same.
pub(crate) fn any_index(pointer: &str) -> String {
    let segments: Vec<&str> = pointer
        .split('/')
        .map(|segment| {
            let index = !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit());
            if index { "*" } else { segment }
        })
        .collect();
    segments.join("/")
}

impl fmt::Display for Broke {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status {
                what,
                expected,
                seen,
            } => write!(f, "{what}: status {seen} where {expected} is stated"),
            Self::Schema {
                at,
                pointer,
                keyword,
            } => {
                write!(f, "`{pointer}` breaks `{keyword}`")?;
                match at {
                    Some(at) => write!(f, " in the answer to {at}"),
                    None => Ok(()),
                }
            }
            Self::Assertion(text) => f.write_str(text),
        }
    }
}

/// `text` up to the JSON it quotes (a body's excerpt, whose length and cut vary with its values),
/// with each word that holds a digit read as `#`, cut to 300 characters.
pub(crate) fn shape(text: &str) -> String {
    let quoted = ["{\"", "[\"", "…"]
        .iter()
        .filter_map(|mark| text.find(mark))
        .min();
    let text = text[..quoted.unwrap_or(text.len())].trim_end();
    let is_word = |c: char| c.is_alphanumeric() || "_-.".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if word.bytes().any(|b| b.is_ascii_digit()) {
            out.push('#');
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if is_word(c) {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out.chars().take(300).collect()
}

tokio::task_local! {
    static LEDGER: Ledger;
}

/// What one check asserted while it ran, and where it tells each thing as it happens.
#[derive(Debug, Default)]
struct Ledger {
    assertions: AtomicUsize,
    profile: Mutex<Vec<String>>,
    warnings: Mutex<Vec<String>>,
    exchanges: Mutex<Vec<Exchange>>,
    /// How the next assertion breaks, when it does not hold, as its helper told.
    breaking: Mutex<Vec<Broke>>,
    broke: Mutex<Vec<Broke>>,
    /// The `profile` keys it went through, and whether the deployment proved each.
    means: Mutex<BTreeMap<&'static str, bool>>,
    /// The facts of the document it has asserted on an answer, where it tells them one by one.
    facts: Mutex<Vec<&'static str>>,
    teller: Option<(usize, Teller)>,
}

impl Ledger {
    fn tell(&self, told: Told) {
        if let Some((check, teller)) = &self.teller {
            // A run that stopped listening has nothing left to tell.
            let _ = teller.send((*check, told));
        }
    }
}

/// What a running check tells as it happens, besides its verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    /// The check began.
    Began,
    /// An assertion, at the check's level or (`profile`) of our reference profile; the message
    /// when it did not hold.
    Asserted {
        /// Whether it held.
        held: bool,
        /// Whether it is a profile assertion inside the check.
        profile: bool,
        /// What did not hold.
        message: Option<String>,
    },
    /// An HTTP exchange it made or cites.
    Exchanged(Box<Exchange>),
    /// Something worth knowing that judges nothing.
    Warned(String),
}

/// Where running checks tell what they do: each telling with the index of the check it is of.
pub type Teller = tokio::sync::mpsc::UnboundedSender<(usize, Told)>;

/// The tally of one check's run: how many assertions it made at its own level, and the
/// profile assertions that did not hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Assertions made, at the check's level and at profile level, passed or not.
    pub assertions: usize,
    /// What differed from our reference profile, one line each.
    pub profile_findings: Vec<String>,
    /// What the check met that is worth knowing but judges nothing (a 429 waited out).
    pub warnings: Vec<String>,
    /// The HTTP exchanges it made, in the order they were sent.
    pub exchanges: Vec<Exchange>,
    /// How its assertions at the check's level broke, sorted, each once.
    pub broke: Vec<Broke>,
    /// The means it went through, by `profile` key.
    pub means: Vec<MeansUse>,
    /// The facts it told it asserted, for a check that asserts several one after another.
    pub facts: Vec<&'static str>,
}

/// A `profile` key a check went through, and whether the deployment proved that means (a
/// cursor taken, a turn started, a state read) before a fact rested on it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MeansUse {
    /// The key, such as `cursorParameter`.
    pub key: &'static str,
    /// Whether the deployment proved it.
    pub verified: bool,
}

/// Runs `body` with a fresh ledger and returns what it asserted.
pub async fn tallied<F: Future>(body: F) -> (F::Output, Tally) {
    told(body, None).await
}

/// Runs `body` with a fresh ledger that tells `teller` what it does as the check at `index`,
/// and returns what it asserted.
pub async fn told<F: Future>(body: F, teller: Option<(usize, Teller)>) -> (F::Output, Tally) {
    let ledger = Ledger {
        teller,
        ..Ledger::default()
    };
    let (output, ledger) = LEDGER
        .scope(ledger, async move {
            LEDGER.with(|ledger| ledger.tell(Told::Began));
            let output = body.await;
            let tally = LEDGER.with(|ledger| Tally {
                assertions: ledger.assertions.load(Ordering::Relaxed),
                profile_findings: ledger.profile.lock().expect("ledger").clone(),
                warnings: ledger.warnings.lock().expect("ledger").clone(),
                exchanges: std::mem::take(&mut *ledger.exchanges.lock().expect("ledger")),
                broke: {
                    let mut broke = std::mem::take(&mut *ledger.broke.lock().expect("ledger"));
                    broke.sort();
                    broke.dedup();
                    broke
                },
                means: ledger
                    .means
                    .lock()
                    .expect("ledger")
                    .iter()
                    .map(|(key, verified)| MeansUse {
                        key,
                        verified: *verified,
                    })
                    .collect(),
                facts: ledger.facts.lock().expect("ledger").clone(),
            });
            (output, tally)
        })
        .await;
    (output, ledger)
}

/// Counts one assertion of the running check, held or not with `message` (outside a check,
/// nothing); one at the check's level that did not hold keeps how it broke.
fn asserted(profile: bool, message: Option<&str>) {
    let _ = LEDGER.try_with(|ledger| {
        ledger.assertions.fetch_add(1, Ordering::Relaxed);
        if !profile {
            let breaking = std::mem::take(&mut *ledger.breaking.lock().expect("ledger"));
            if let Some(message) = message {
                let mut broke = ledger.broke.lock().expect("ledger");
                if breaking.is_empty() {
                    broke.push(Broke::assertion(message));
                } else {
                    broke.extend(breaking);
                }
            }
        }
        ledger.tell(Told::Asserted {
            held: message.is_none(),
            profile,
            message: message.map(str::to_owned),
        });
    });
}

/// Fails with `message` unless `condition` holds.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Verdict {
    if condition {
        asserted(false, None);
        Ok(())
    } else {
        fail(message())
    }
}

/// Tells how the running check's next assertion breaks if it does not hold, in more detail
/// than its message: the status it got, or the members of a body its schema refuses.
pub(crate) fn breaking(broke: impl IntoIterator<Item = Broke>) {
    let _ = LEDGER.try_with(|ledger| ledger.breaking.lock().expect("ledger").extend(broke));
}

/// A profile assertion inside a check: it rests on a choice of our reference profile, so when
/// `condition` does not hold the check goes on, and `message` is a profile finding (a failure
/// only at level `all`).
pub fn profile(condition: bool, message: impl FnOnce() -> String) {
    if condition {
        asserted(true, None);
    } else {
        let message = message();
        asserted(true, Some(&message));
        let _ = LEDGER.try_with(|ledger| ledger.profile.lock().expect("ledger").push(message));
    }
}

/// The running check goes through the means of `profile.{key}`; `proved` when the deployment
/// has just shown that it takes it. Once proved, a means stays proved for the check.
pub(crate) fn through_means(key: &'static str, proved: bool) {
    let _ = LEDGER.try_with(|ledger| {
        *ledger.means.lock().expect("ledger").entry(key).or_default() |= proved;
    });
}

/// The running check has asserted the fact `id` of `conformance/facts.json` on an answer from
/// its subject. A check that asserts several facts one after another tells each, so that a
/// failure part way claims only those it reached.
pub(crate) fn asserted_fact(id: &'static str) {
    let _ = LEDGER.try_with(|ledger| ledger.facts.lock().expect("ledger").push(id));
}

/// A warning of the running check: shown with its outcome, it judges nothing.
pub(crate) fn warn(message: String) {
    let _ = LEDGER.try_with(|ledger| {
        ledger.tell(Told::Warned(message.clone()));
        ledger.warnings.lock().expect("ledger").push(message);
    });
}

/// Keeps `exchange` among the running check's; its place, for [`framed`] (outside a check,
/// nothing is kept).
pub(crate) fn exchanged(exchange: Exchange) -> Option<usize> {
    LEDGER
        .try_with(|ledger| {
            ledger.tell(Told::Exchanged(Box::new(exchange.clone())));
            let mut exchanges = ledger.exchanges.lock().expect("ledger");
            exchanges.push(exchange);
            exchanges.len() - 1
        })
        .ok()
}

/// How many exchanges of other checks a check that judges their responses cites.
const CITED: usize = 5;

/// Keeps the first few of `exchanges`, made by other checks, among the running check's: the
/// responses it found wrong.
pub(crate) fn cite<'a>(exchanges: impl IntoIterator<Item = &'a Exchange>) {
    for exchange in exchanges.into_iter().take(CITED) {
        exchanged(exchange.clone());
    }
}

/// Adds `frame` to the running check's exchange at `place`, a stream it reads.
pub(crate) fn framed(place: usize, frame: &Frame) {
    let _ = LEDGER.try_with(|ledger| {
        if let Some(exchange) = ledger.exchanges.lock().expect("ledger").get_mut(place) {
            exchange.frame(frame);
        }
    });
}

/// A skip with `reason`.
pub fn skip<T>(reason: impl Into<String>) -> Result<T, Finding> {
    Err(Finding::Skip(reason.into()))
}

/// A failure with `message`: an assertion that did not hold.
pub fn fail<T>(message: impl Into<String>) -> Result<T, Finding> {
    let message = message.into();
    asserted(false, Some(&message));
    Err(Finding::Fail(message))
}

/// A failure with `message`, as a value: an assertion that did not hold.
pub fn failure(message: impl Into<String>) -> Finding {
    let message = message.into();
    asserted(false, Some(&message));
    Finding::Fail(message)
}

/// The first 300 characters of `text`, for messages.
pub fn excerpt(text: &str) -> String {
    let mut cut: String = text.chars().take(300).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_ledger_counts_assertions_and_keeps_profile_findings() {
        let (verdict, tally) = tallied(async {
            ensure(true, String::new)?;
            profile(false, || "the code differs".into());
            profile(true, String::new);
            warn("waited out a 429".into());
            ensure(false, || "broken".into())
        })
        .await;
        assert_eq!(verdict, Err(Finding::Fail("broken".into())));
        assert_eq!(tally.assertions, 4);
        assert_eq!(tally.profile_findings, ["the code differs"]);
        assert_eq!(tally.warnings, ["waited out a 429"]);
        let (_, empty) = tallied(async { skip::<()>("no token") }).await;
        assert_eq!(empty, Tally::default());
    }

    #[tokio::test]
    async fn a_check_tells_each_assertion_and_warning_as_it_happens() {
        let (teller, mut heard) = tokio::sync::mpsc::unbounded_channel();
        let (_, tally) = told(
            async {
                ensure(true, String::new)?;
                profile(false, || "the code differs".into());
                warn("waited out a 429".into());
                ensure(false, || "broken".into())
            },
            Some((7, teller)),
        )
        .await;
        let mut tellings = Vec::new();
        while let Ok(telling) = heard.try_recv() {
            tellings.push(telling);
        }
        let asserted = |held, profile, message: Option<&str>| Told::Asserted {
            held,
            profile,
            message: message.map(str::to_owned),
        };
        assert_eq!(
            tellings,
            [
                (7, Told::Began),
                (7, asserted(true, false, None)),
                (7, asserted(false, true, Some("the code differs"))),
                (7, Told::Warned("waited out a 429".into())),
                (7, asserted(false, false, Some("broken"))),
            ]
        );
        assert_eq!(tally.assertions, 3);
    }
}
