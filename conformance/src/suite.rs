//! Running the checks: which ones, in what order, and what each concluded.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::{FutureExt, StreamExt, stream};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use crate::breaks::{Break, State};
use crate::checks;
use crate::checks::{Category, Check, Status};
use crate::exchange::Exchange;
use crate::finding::{Broke, Finding, Tally, Teller, Told, told};
use crate::spec::Level;
use crate::spec::spec;
use crate::target::{Coverage, Target, checking};

/// The longest a single check may take before it counts as the suite's error.
const CHECK_TIMEOUT: Duration = Duration::from_secs(90);

/// Which checks a run takes.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only these ids or categories (all when empty).
    pub only: Vec<String>,
    /// Not these ids or categories.
    pub skip: Vec<String>,
    /// Only normative checks.
    pub normative_only: bool,
}

impl Selection {
    fn covers(patterns: &[String], check: &Check) -> bool {
        patterns.iter().any(|pattern| {
            *check.id == **pattern
                || check.category.as_str() == pattern
                || check.id.starts_with(&format!("{pattern}."))
        })
    }

    /// The `--only` and `--skip` entries that name no check, no category and no id prefix of
    /// `checks`: a typo that would otherwise quietly select nothing.
    pub fn unknown<'a>(&'a self, checks: &[Check]) -> Vec<&'a str> {
        self.only
            .iter()
            .chain(&self.skip)
            .filter(|pattern| {
                !checks
                    .iter()
                    .any(|check| Self::covers(std::slice::from_ref(pattern), check))
            })
            .map(String::as_str)
            .collect()
    }

    /// Whether the run takes `check`.
    pub fn takes(&self, check: &Check) -> bool {
        (self.only.is_empty() || Self::covers(&self.only, check))
            && !Self::covers(&self.skip, check)
            && !(self.normative_only && spec().level(&check.rests_on) == Level::Profile)
    }
}

/// Every check as `--list --json` prints it: `id`, `category`, `level`, `section`,
/// `requirement`, `restsOn`, `alone` (it needs the deployment to itself) and `selected`
/// (`selection` takes it).
pub fn listing(selection: &Selection) -> Value {
    checks::all()
        .iter()
        .map(|check| {
            json!({
                "id": check.id,
                "category": check.category,
                "level": spec().level(&check.rests_on),
                "section": check.section,
                "requirement": check.requirement,
                "restsOn": check.rests_on,
                "alone": checks::alone(check),
                "selected": selection.takes(check),
            })
        })
        .collect()
}

/// What one check concluded.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The check's id.
    pub id: String,
    /// Its category.
    pub category: Category,
    /// Its level.
    pub level: Level,
    /// Its requirement.
    pub requirement: &'static str,
    /// The section of the interface document.
    pub section: &'static str,
    /// The elements of openapi.json the check rests on: `METHOD /path` or `#/components/...`.
    pub rests_on: Vec<&'static str>,
    /// How it ended.
    pub status: Status,
    /// Why, when it did not pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// For a check that failed or broke, each way it did, with its fingerprint.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub broke: Vec<Break>,
    /// How it stands against the run's baseline: a failure `new` or `known`, a pass `fixed`
    /// when the baseline knew a failure of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<State>,
    /// How many assertions it made.
    pub assertions: usize,
    /// Where the deployment differs from our reference profile inside a check of either level:
    /// a failure at level `all`, a note at level `normative`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub profile_findings: Vec<String>,
    /// What the check met that judges nothing, such as a 429 it waited out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The `profile` keys it went through, each with whether the deployment proved it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub means: Vec<crate::finding::MeansUse>,
    /// The facts it told it asserted one by one, where it asserts several in turn.
    #[serde(skip)]
    pub facts: Vec<&'static str>,
    /// How long it took, in milliseconds.
    pub millis: u64,
    /// For a check that failed or broke, a `curl` line that sends its last request again (the
    /// token as `$TOKEN`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reproduce: Option<String>,
    /// The HTTP exchanges it made, in the order it sent them; for a check that judges the
    /// responses other checks got, the first few it found wrong.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exchanges: Vec<Exchange>,
}

impl Outcome {
    /// Whether it asserted the fact `id` on an answer from its subject: a check that tells the
    /// facts it reaches, the ones it told; else, once it asserted anything, all of its facts when
    /// it passed or failed.
    pub fn asserted(&self, id: &str) -> bool {
        if !self.facts.is_empty() {
            return self.facts.contains(&id);
        }
        matches!(self.status, Status::Pass | Status::Fail) && self.assertions > 0
    }

    /// Whether it failed or broke only in ways the run's baseline knows.
    pub fn is_known(&self) -> bool {
        self.baseline == Some(State::Known)
    }

    /// How the reports name its end: its status, or `known` for a failure the baseline knows.
    pub fn verdict(&self) -> &'static str {
        if self.is_known() {
            "known"
        } else {
            self.status.as_str()
        }
    }
}

/// The version of the JSON report's format (`conformance/report.schema.json`): it changes when a
/// member is removed or changes its meaning, not when one is added.
pub const REPORT_VERSION: u32 = 1;

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The format's version, [`REPORT_VERSION`].
    pub version: u32,
    /// The deployment's base URL.
    pub target: String,
    /// When the run started, Unix seconds.
    pub started: u64,
    /// How long it took, in milliseconds.
    pub millis: u64,
    /// One outcome per check, in run order.
    pub outcomes: Vec<Outcome>,
    /// Every operation of openapi.json with the statuses it was answered with.
    pub coverage: Vec<Coverage>,
    /// The testable facts of the document the run asserted, and those it did not.
    pub facts: crate::facts::Reached,
    /// Warnings about the run as a whole.
    pub warnings: Vec<String>,
    /// What the run removed of what it created, and what it left (none with `--keep`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<crate::target::CleanUp>,
}

impl Report {
    /// How many outcomes have `status`, failures the baseline knows apart.
    pub fn count(&self, status: Status) -> usize {
        self.outcomes
            .iter()
            .filter(|o| o.status == status && !o.is_known())
            .count()
    }

    /// How many checks failed or broke in ways the baseline knows, all of them.
    pub fn known(&self) -> usize {
        self.outcomes.iter().filter(|o| o.is_known()).count()
    }

    /// One line: how many checks ran against what, how long it took and how they ended (the
    /// failures a baseline knows counted apart, when there are any).
    pub fn summary(&self) -> String {
        let known = match self.known() {
            0 => String::new(),
            known => format!(", {known} known"),
        };
        format!(
            "{} checks against {} in {:.1} s: {} passed, {} failed{known}, {} errors, {} skipped, {} disabled",
            self.outcomes.len(),
            self.target,
            self.millis as f64 / 1000.0,
            self.count(Status::Pass),
            self.count(Status::Fail),
            self.count(Status::Error),
            self.count(Status::Skip),
            self.count(Status::Disabled),
        )
    }

    /// One line: how many operations were answered with a success status, so that their success
    /// schema was validated, and which were not.
    pub fn coverage_summary(&self) -> String {
        let missed: Vec<String> = self
            .coverage
            .iter()
            .filter(|operation| !operation.succeeded())
            .map(|operation| format!("{} {}", operation.method, operation.path))
            .collect();
        let mut line = format!(
            "coverage: {} of {} operations answered with a success status",
            self.coverage.len() - missed.len(),
            self.coverage.len()
        );
        if !missed.is_empty() {
            line.push_str(&format!("; never: {}", missed.join(", ")));
        }
        line
    }

    /// The share of operations answered with a success status, in percent (100 without any).
    pub fn coverage_percent(&self) -> f64 {
        if self.coverage.is_empty() {
            return 100.0;
        }
        let succeeded = self.coverage.iter().filter(|o| o.succeeded()).count();
        100.0 * succeeded as f64 / self.coverage.len() as f64
    }

    /// [`Self::coverage_percent`] over the operations the run sent a request to (100 without
    /// any): a re-run of what failed reaches only some.
    pub fn reached_coverage_percent(&self) -> f64 {
        let reached = self.coverage.iter().filter(|o| !o.statuses.is_empty());
        let (succeeded, all) = reached.fold((0, 0), |(succeeded, all), operation| {
            (succeeded + usize::from(operation.succeeded()), all + 1)
        });
        if all == 0 {
            return 100.0;
        }
        100.0 * succeeded as f64 / all as f64
    }

    /// Whether any check failed or broke in a way the baseline does not know.
    pub fn failed(&self) -> bool {
        self.count(Status::Fail) + self.count(Status::Error) > 0
    }
}

/// How many checks a run takes at once unless told otherwise: they mostly wait on the deployment.
pub const DEFAULT_JOBS: usize = 8;

/// What a run tells its reporters as it goes, as nextest's reporter events do: each check's
/// start, assertions, exchanges, warnings and end. The console and `--events` (JSON lines) read
/// them as they come; the [`Report`] the run returns is their sum.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum CheckEvent {
    /// The run takes `selected` of `total` checks against `target`.
    RunStarted {
        /// The deployment's base URL.
        target: String,
        /// Every check.
        total: usize,
        /// Those the selection takes.
        selected: usize,
    },
    /// A check started.
    Started {
        /// The check's id.
        check: String,
    },
    /// A check asserted something.
    Assertion {
        /// The check's id.
        check: String,
        /// Whether it held.
        held: bool,
        /// Whether it is a profile assertion inside the check (else at the check's level).
        profile: bool,
        /// What did not hold.
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// A check made (or cites) an HTTP exchange.
    Exchange {
        /// The check's id.
        check: String,
        /// The exchange, as it stood when made (a stream's frames come later).
        exchange: Box<Exchange>,
    },
    /// A check met something that judges nothing, such as a 429 it waited out.
    Warning {
        /// The check's id.
        check: String,
        /// What it met.
        message: String,
    },
    /// A check ended, the `done`th of `total` (a disabled one too); its outcome without its
    /// exchanges, which came as their own events.
    Finished {
        /// How many checks have ended.
        done: usize,
        /// Every check.
        total: usize,
        /// How it ended.
        outcome: Box<Outcome>,
    },
    /// The run ended: its one-line summary (the CLI writes it once a `--baseline` has judged
    /// the run, so that a run whose only failures are known is not `failed`).
    RunFinished {
        /// As [`Report::summary`] words it.
        summary: String,
        /// Whether any check failed or broke.
        failed: bool,
    },
}

/// The events of a run so far, and the outcomes in the checks' order.
struct Progress<F> {
    tell: F,
    checks: &'static [Check],
    outcomes: Vec<Option<Outcome>>,
    done: usize,
}

impl<F: FnMut(&CheckEvent)> Progress<F> {
    /// Passes on what the check at `index` told.
    fn told(&mut self, (index, told): (usize, Told)) {
        let check = self.checks[index].id.to_string();
        (self.tell)(&match told {
            Told::Began => CheckEvent::Started { check },
            Told::Asserted {
                held,
                profile,
                message,
            } => CheckEvent::Assertion {
                check,
                held,
                profile,
                message,
            },
            Told::Exchanged(exchange) => CheckEvent::Exchange { check, exchange },
            Told::Warned(message) => CheckEvent::Warning { check, message },
        });
    }

    /// Notes that the check at `index` ended with `outcome`, after what it told that is still
    /// in `heard`.
    fn ended(
        &mut self,
        index: usize,
        outcome: Outcome,
        heard: &mut UnboundedReceiver<(usize, Told)>,
    ) {
        while let Ok(told) = heard.try_recv() {
            self.told(told);
        }
        self.done += 1;
        // Its exchanges came as their own events: the event's outcome goes without them.
        let mut outcome = outcome;
        let exchanges = std::mem::take(&mut outcome.exchanges);
        (self.tell)(&CheckEvent::Finished {
            done: self.done,
            total: self.outcomes.len(),
            outcome: Box::new(outcome.clone()),
        });
        outcome.exchanges = exchanges;
        self.outcomes[index] = Some(outcome);
    }
}

/// Runs the selected checks against `target`, up to `jobs` at once; those that need the
/// deployment to themselves (`checks::alone`) run afterwards, one at a time. `tell` hears each
/// [`CheckEvent`] as it happens; the report keeps the checks' order.
pub async fn run(
    target: &Target,
    selection: &Selection,
    jobs: usize,
    tell: impl FnMut(&CheckEvent),
) -> Report {
    let started = Instant::now();
    let checks = checks::all();
    let total = checks.len();
    let mut progress = Progress {
        tell,
        checks,
        outcomes: vec![None; total],
        done: 0,
    };
    let (taken, disabled): (Vec<usize>, Vec<usize>) =
        (0..total).partition(|&index| selection.takes(&checks[index]));
    (progress.tell)(&CheckEvent::RunStarted {
        target: target.base().to_owned(),
        total,
        selected: taken.len(),
    });
    let (teller, mut heard) = unbounded_channel();
    for index in disabled {
        let check = &checks[index];
        let level = spec().level(&check.rests_on);
        let disabled = (Status::Disabled, None);
        let outcome = outcome(check, level, disabled, Duration::ZERO, Tally::default());
        progress.ended(index, outcome, &mut heard);
    }
    let (alone, together): (Vec<usize>, Vec<usize>) = taken
        .into_iter()
        .partition(|&index| checks::alone(&checks[index]));
    let normative_only = selection.normative_only;
    let run_at = |index: usize| {
        let check = &checks[index];
        let teller = teller.clone();
        async move {
            (
                index,
                run_one(target, check, normative_only, (index, teller)).await,
            )
        }
    };
    let together = stream::iter(together)
        .map(run_at)
        .buffer_unordered(jobs.max(1));
    let mut running = std::pin::pin!(together.chain(stream::iter(alone).then(run_at)));
    loop {
        tokio::select! {
            biased;
            Some(told) = heard.recv() => progress.told(told),
            next = running.next() => match next {
                Some((index, outcome)) => progress.ended(index, outcome, &mut heard),
                None => break,
            },
        }
    }
    let mut report = Report {
        version: REPORT_VERSION,
        target: target.base().to_owned(),
        started: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |now| now.as_secs())
            .saturating_sub(started.elapsed().as_secs()),
        millis: started.elapsed().as_millis() as u64,
        outcomes: progress.outcomes.into_iter().flatten().collect(),
        coverage: target.coverage(),
        facts: Default::default(),
        warnings: Vec::new(),
        cleanup: None,
    };
    report.facts = crate::facts::reached(|check, fact| {
        report
            .outcomes
            .iter()
            .any(|outcome| outcome.id == check && outcome.asserted(fact))
    });
    report.warnings = warnings(&report, &target.settings.means);
    (progress.tell)(&CheckEvent::RunFinished {
        summary: report.summary(),
        failed: report.failed(),
    });
    report
}

/// Runs `check`, telling `teller` what it does.
async fn run_one(
    target: &Target,
    check: &'static Check,
    normative_only: bool,
    teller: (usize, Teller),
) -> Outcome {
    let started = Instant::now();
    let body = AssertUnwindSafe((check.run)(target, check)).catch_unwind();
    let timed = tokio::time::timeout(CHECK_TIMEOUT, body);
    let (ended, tally) = checking(&check.id, told(timed, Some(teller))).await;
    // A pass whose profile assertions did not hold fails at level `all`, as a profile matter.
    let by_profile = matches!(&ended, Ok(Ok(Ok(()))))
        && tally.assertions > 0
        && !normative_only
        && !tally.profile_findings.is_empty();
    let (status, message) = match ended {
        Err(_) => (
            Status::Error,
            Some(format!("timed out after {} s", CHECK_TIMEOUT.as_secs())),
        ),
        Ok(Err(panic)) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            (Status::Error, Some(format!("the check panicked: {text}")))
        }
        Ok(Ok(Ok(()))) if tally.assertions == 0 => (
            Status::Error,
            Some("the check passed without asserting anything: a defect of the suite".into()),
        ),
        Ok(Ok(Ok(()))) if by_profile => (
            Status::Fail,
            Some(format!(
                "differs from the reference profile: {}",
                tally.profile_findings.join("; ")
            )),
        ),
        Ok(Ok(Ok(()))) => (Status::Pass, None),
        Ok(Ok(Err(Finding::Fail(message)))) if tally.assertions == 0 => (
            Status::Error,
            Some(format!(
                "the check failed without asserting anything on an answer, a defect of the suite: {message}"
            )),
        ),
        Ok(Ok(Err(Finding::Fail(message)))) => (Status::Fail, Some(message)),
        Ok(Ok(Err(Finding::Error(message)))) => (Status::Error, Some(message)),
        Ok(Ok(Err(Finding::Skip(reason)))) => (Status::Skip, Some(reason)),
    };
    let level = if by_profile {
        Level::Profile
    } else {
        spec().level(&check.rests_on)
    };
    outcome(check, level, (status, message), started.elapsed(), tally)
}

fn outcome(
    check: &Check,
    level: Level,
    (status, message): (Status, Option<String>),
    took: Duration,
    tally: Tally,
) -> Outcome {
    let failed = matches!(status, Status::Fail | Status::Error);
    let reproduce = failed
        .then(|| tally.exchanges.last().map(Exchange::curl))
        .flatten();
    let broke = match (&message, failed) {
        (Some(message), true) => broke(check, level, message, &tally),
        _ => Vec::new(),
    };
    Outcome {
        id: check.id.to_string(),
        category: check.category,
        level,
        requirement: check.requirement,
        section: check.section,
        rests_on: check.rests_on.clone(),
        status,
        message,
        broke,
        baseline: None,
        assertions: tally.assertions,
        profile_findings: tally.profile_findings,
        warnings: tally.warnings,
        means: tally.means,
        facts: tally.facts,
        millis: took.as_millis() as u64,
        reproduce,
        exchanges: tally.exchanges,
    }
}

/// How `check`, failed at `level` with `message`, broke: as its assertions told, or else (a
/// pass whose profile findings fail it, a timeout, a panic) as its message says.
fn broke(check: &Check, level: Level, message: &str, tally: &Tally) -> Vec<Break> {
    let told = if tally.broke.is_empty() {
        vec![Broke::assertion(message)]
    } else {
        tally.broke.clone()
    };
    let operation = check.operation.map(|operation| operation.id.as_str());
    let mut broke: Vec<Break> = told
        .iter()
        .map(|told| Break::new(&check.id, level, operation, told))
        .collect();
    broke.sort_by(|a, b| a.fingerprint.cmp(&b.fingerprint));
    broke.dedup_by(|a, b| a.fingerprint == b.fingerprint);
    broke
}

/// A run that passes while testing almost nothing says so loudly.
fn warnings(report: &Report, means: &crate::means::Means) -> Vec<String> {
    let mut warnings = Vec::new();
    let passed = report.count(Status::Pass);
    let total = report.outcomes.len();
    if !report.failed() && passed * 2 < total {
        warnings.push(format!(
            "only {passed} of {total} checks passed and none failed: this run tested almost nothing \
             (see the skipped and disabled checks)"
        ));
    }
    // A means set in the config file that no check went through was never tried.
    let used = |key: &str| {
        let outcomes = report.outcomes.iter();
        outcomes
            .flat_map(|outcome| &outcome.means)
            .any(|means| means.key == key)
    };
    for key in means.set_keys().into_iter().filter(|key| !used(key)) {
        warnings.push(format!(
            "`profile.{key}` is set, but no check of this run went through it"
        ));
    }
    warnings
}

/// A fixed run result for the report tests: a pass, a failure whose message needs escaping, a
/// skip, two operations of which one was answered with a success, and a warning.
#[cfg(test)]
pub(crate) fn fixture() -> Report {
    use crate::checks::Category;
    use crate::spec::Level;
    use crate::suite::Outcome;
    use crate::target::Coverage;
    let outcome = |id: &str, status, message: Option<&str>| Outcome {
        id: id.to_owned(),
        category: Category::Pipeline,
        level: Level::Normative,
        requirement: "A Build MUST verify.",
        section: "2.1",
        rests_on: vec!["POST /v1/pipeline/evm/build"],
        status,
        message: message.map(str::to_owned),
        broke: Vec::new(),
        baseline: None,
        assertions: 3,
        profile_findings: Vec::new(),
        warnings: Vec::new(),
        means: vec![crate::finding::MeansUse {
            key: "commit",
            verified: true,
        }],
        facts: Vec::new(),
        millis: 12,
        reproduce: None,
        exchanges: Vec::new(),
    };
    let mut failed = outcome(
        "pipeline.commit",
        Status::Fail,
        Some("got 500 <boom> & \"more\""),
    );
    let exchange = crate::exchange::Exchange {
        method: "POST".into(),
        url: "http://127.0.0.1:1/v1/pipeline/evm/build".into(),
        request_headers: [
            ("authorization".into(), "Bearer $TOKEN".into()),
            ("content-type".into(), "application/json".into()),
        ]
        .into(),
        request_body: Some(r#"{"chain":"evm"}"#.into()),
        sent: 1_795_000_000_010,
        millis: 4,
        status: Some(500),
        response_headers: [("content-type".into(), "text/plain".into())].into(),
        response_body: Some("<boom>".into()),
        frames: Vec::new(),
        frames_omitted: 0,
        error: None,
    };
    let broke = Broke::Status {
        what: crate::finding::shape("POST /v1/pipeline/evm/build"),
        expected: 200,
        seen: 500,
    };
    failed.broke = vec![Break::new(
        "pipeline.commit",
        Level::Normative,
        None,
        &broke,
    )];
    failed.reproduce = Some(exchange.curl());
    failed.exchanges = vec![exchange];
    Report {
        version: crate::suite::REPORT_VERSION,
        target: "http://127.0.0.1:1".into(),
        started: 1_795_000_000,
        millis: 100,
        outcomes: vec![
            outcome("pipeline.build", Status::Pass, None),
            failed,
            outcome("pipeline.svm", Status::Skip, Some("needs a pipeline token")),
        ],
        coverage: vec![
            Coverage {
                method: "GET".into(),
                path: "/v1/x".into(),
                statuses: vec![200, 401],
                unseen: vec!["403".into()],
            },
            Coverage {
                method: "POST".into(),
                path: "/v1/y/{id}".into(),
                statuses: vec![],
                unseen: vec!["200".into(), "404".into()],
            },
        ],
        facts: crate::facts::Reached {
            asserted: vec!["2.1.version".into()],
            unasserted: vec!["7.4.expired-cursor".into()],
        },
        warnings: vec!["only 1 of 3 checks passed".into()],
        cleanup: Some(crate::target::CleanUp {
            removed: vec!["/v1/agent/sessions/s-1".into()],
            left: vec!["/v1/agent/sessions/s-2 (500)".into()],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_names_every_check_once_with_its_level_and_whether_it_runs() {
        let selection = Selection {
            only: vec!["agent.sse".into(), "schema.responses".into()],
            ..Selection::default()
        };
        let listing = listing(&selection);
        let entries = listing.as_array().unwrap();
        assert_eq!(entries.len(), checks::all().len());
        let ids: std::collections::BTreeSet<&str> =
            entries.iter().map(|e| e["id"].as_str().unwrap()).collect();
        assert_eq!(ids.len(), entries.len(), "each id once");
        let entry = |id: &str| entries.iter().find(|e| e["id"] == id).unwrap();
        let responses = entry("schema.responses");
        assert_eq!(
            (
                &responses["category"],
                &responses["level"],
                &responses["alone"]
            ),
            (&json!("schema"), &json!("normative"), &json!(true))
        );
        assert_eq!(responses["selected"], true);
        assert_eq!(entry("agent.sse.ids")["selected"], true);
        assert_eq!(entry("agent.sse.ids")["alone"], false);
        assert_eq!(entry("pipeline.commit")["selected"], false);
        let selected = entries.iter().filter(|e| e["selected"] == true).count();
        assert_eq!(selected, 4, "the three SSE checks and schema.responses");
    }

    #[test]
    fn a_selection_entry_that_names_no_check_or_category_is_unknown() {
        let selection = Selection {
            only: vec![
                "agent.sse".into(),
                "pipeline.digest".into(),
                "nonexistent".into(),
            ],
            skip: vec!["agent.sse.resum".into(), "limits".into()],
            normative_only: false,
        };
        assert_eq!(
            selection.unknown(checks::all()),
            ["nonexistent", "agent.sse.resum"]
        );
    }
}
