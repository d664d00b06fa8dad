//! What the proxy saw, per operation, and the report it makes of it: one outcome per operation
//! of openapi.json, with the statuses answered and the violations by side and level.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::judge::Breach;
use crate::breaks::Break;
use crate::checks::{Category, Status};
use crate::finding::Broke;
use crate::spec::{Level, spec};
use crate::suite::{Outcome, REPORT_VERSION, Report};
use crate::target::Coverage;

/// The most distinct violations an outcome's message names; the rest are counted.
const NAMED: usize = 5;

/// The requirement each traffic outcome stands for.
const REQUIREMENT: &str = "Every exchange of the operation MUST hold against openapi.json: the client's request (path, parameters, bearer, body), and the server's status, body or SSE frames.";

/// What the proxy saw of one operation.
#[derive(Debug, Default)]
struct Traffic {
    exchanges: usize,
    statuses: BTreeSet<u16>,
    /// Each distinct violation and how many times it was seen.
    violations: BTreeMap<Breach, usize>,
}

impl Traffic {
    /// Counts each of `found` once more.
    fn count(&mut self, found: &[Breach]) {
        for violation in found {
            *self.violations.entry(violation.clone()).or_default() += 1;
        }
    }
}

/// Everything the proxy saw since it started.
#[derive(Debug)]
pub struct Ledger {
    started: Instant,
    started_unix: u64,
    /// Keyed by `operationId`; requests that are no operation under `""`.
    traffic: Mutex<BTreeMap<String, Traffic>>,
}

impl Default for Ledger {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            started_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |now| now.as_secs()),
            traffic: Mutex::default(),
        }
    }
}

impl Ledger {
    /// Notes one exchange of `operation` (`None`: a request that is no operation) answered
    /// with `status` (`None`: not answered), and what it broke.
    pub fn exchange(&self, operation: Option<&str>, status: Option<u16>, found: &[Breach]) {
        let mut traffic = self.traffic.lock().expect("traffic");
        let seen = traffic
            .entry(operation.unwrap_or_default().to_owned())
            .or_default();
        seen.exchanges += 1;
        seen.statuses.extend(status);
        seen.count(found);
    }

    /// Notes what one more frame of `operation`'s stream broke.
    pub fn frame(&self, operation: &str, found: &[Breach]) {
        let mut traffic = self.traffic.lock().expect("traffic");
        traffic
            .entry(operation.to_owned())
            .or_default()
            .count(found);
    }

    /// How many violations were seen, of either level.
    pub fn violations(&self) -> usize {
        let traffic = self.traffic.lock().expect("traffic");
        traffic
            .values()
            .flat_map(|seen| seen.violations.values())
            .sum()
    }

    /// The report so far, of the traffic to `upstream`: one outcome per operation of
    /// openapi.json (skipped when the app never called it), and `traffic.paths` for requests
    /// that are no operation. At `normative_only`, profile violations are notes.
    pub fn report(&self, upstream: &str, normative_only: bool) -> Report {
        let traffic = self.traffic.lock().expect("traffic");
        let none = Traffic::default();
        let operations = spec().operations();
        let mut outcomes: Vec<Outcome> = operations
            .iter()
            .map(|operation| {
                let seen = traffic.get(&operation.id).unwrap_or(&none);
                let id = format!("traffic.{}", operation.id);
                outcome(id, vec![&operation.reference], seen, normative_only)
            })
            .collect();
        outcomes.push(outcome(
            "traffic.paths".into(),
            Vec::new(),
            traffic.get("").unwrap_or(&none),
            normative_only,
        ));
        let coverage = operations
            .iter()
            .map(|operation| {
                let seen = traffic.get(&operation.id);
                let statuses = seen.into_iter().flat_map(|seen| seen.statuses.iter());
                Coverage::of(operation, statuses.copied().collect())
            })
            .collect();
        Report {
            version: REPORT_VERSION,
            target: upstream.to_owned(),
            started: self.started_unix,
            millis: self.started.elapsed().as_millis() as u64,
            // Traffic asserts no fact of the ledger by itself.
            facts: Default::default(),
            outcomes,
            coverage,
            warnings: Vec::new(),
            cleanup: None,
        }
    }
}

/// The outcome of one operation's traffic.
fn outcome(
    id: String,
    rests_on: Vec<&'static str>,
    seen: &Traffic,
    normative_only: bool,
) -> Outcome {
    let (normative, profile): (Vec<_>, Vec<_>) = seen
        .violations
        .iter()
        .partition(|(violation, _)| violation.level == Level::Normative);
    let told = |violations: &[(&Breach, &usize)]| -> Vec<String> {
        violations
            .iter()
            .map(|(violation, count)| format!("{violation} x{count}"))
            .collect()
    };
    let (status, level, message) = if seen.exchanges == 0 {
        let reason = "the app made no request of this operation";
        (Status::Skip, Level::Normative, Some(reason.to_owned()))
    } else if !normative.is_empty() {
        (
            Status::Fail,
            Level::Normative,
            Some(summary(&told(&normative))),
        )
    } else if !profile.is_empty() && !normative_only {
        (Status::Fail, Level::Profile, Some(summary(&told(&profile))))
    } else {
        (Status::Pass, Level::Normative, None)
    };
    let failed = match (status, level) {
        (Status::Fail, Level::Normative) => &normative[..],
        (Status::Fail, Level::Profile) => &profile[..],
        _ => &[],
    };
    let broke = failed
        .iter()
        .map(|(violation, _)| {
            Break::new(&id, level, None, &Broke::assertion(&violation.to_string()))
        })
        .collect();
    Outcome {
        id,
        category: Category::Traffic,
        level,
        requirement: REQUIREMENT,
        section: "7",
        rests_on,
        status,
        message,
        broke,
        baseline: None,
        assertions: seen.exchanges,
        profile_findings: if status == Status::Pass {
            told(&profile)
        } else {
            Vec::new()
        },
        warnings: Vec::new(),
        means: Vec::new(),
        facts: Vec::new(),
        millis: 0,
        reproduce: None,
        exchanges: Vec::new(),
    }
}

/// The first [`NAMED`] violations, and how many more there were.
fn summary(told: &[String]) -> String {
    let mut text = told
        .iter()
        .take(NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if told.len() > NAMED {
        text.push_str(&format!("; and {} more", told.len() - NAMED));
    }
    text
}
