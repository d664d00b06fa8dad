//! A baseline of known failures, so that a team's CI fails on new findings only (as
//! schemathesis's baseline and oasdiff's ignore file do).
//!
//! Each way a check failed is a [`Break`] with a **fingerprint**: a hash of the check, the level
//! it failed at, the operation it concerns, and how the answer broke the fact ([`Broke`](crate::finding::Broke): the
//! status expected and seen, the JSON pointer and schema keyword, or the assertion's message
//! without its values), never of ids, times, cursors or ports. A break whose fingerprint the
//! baseline holds is *known*; any other is *new*, even inside a check that already failed, and
//! fails the run; a known one whose check now passes is *fixed*.
//!
//! The file is JSON, `{"version": 2, "known": [{"check", "level", "fingerprint", "broke"}]}`;
//! a JSON report of a run (`--json`) serves as well. A file of version 1 (entries without a
//! fingerprint) is still read: each entry then knows every way its check fails at its level.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::breaks::{Break, State};
use crate::checks::Status;
use crate::spec::Level;
use crate::suite::{Outcome, Report};

/// The format of a baseline file.
pub const BASELINE_VERSION: u32 = 2;

/// The format before fingerprints, still read.
const UNFINGERPRINTED: u32 = 1;

/// One known failure.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Known {
    /// The check's id.
    pub check: String,
    /// The level it failed at.
    pub level: Level,
    /// The break's fingerprint; absent in a file of version 1, where the entry knows every way
    /// the check fails at its level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// How it broke, for the reader of the file (not matched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broke: Option<String>,
}

impl Known {
    /// Whether this entry knows `broken`, a break of `outcome`.
    fn knows(&self, outcome: &Outcome, broken: &Break) -> bool {
        self.check == outcome.id
            && self.level == outcome.level
            && self
                .fingerprint
                .as_ref()
                .is_none_or(|fingerprint| *fingerprint == broken.fingerprint)
    }

    /// The entry of `broken`, a break of `outcome`.
    fn of(outcome: &Outcome, broken: &Break) -> Self {
        Self {
            check: outcome.id.clone(),
            level: outcome.level,
            fingerprint: Some(broken.fingerprint.clone()),
            broke: Some(broken.broke.clone()),
        }
    }
}

/// The known failures of a deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// [`BASELINE_VERSION`], or 1 for a file written before fingerprints.
    pub version: u32,
    /// The failures, sorted.
    pub known: Vec<Known>,
}

/// Whether `outcome` is a finding: a check that failed or broke.
fn is_finding(outcome: &Outcome) -> bool {
    matches!(outcome.status, Status::Fail | Status::Error)
}

impl Baseline {
    /// The failures of `report`, a break each.
    pub fn of(report: &Report) -> Self {
        let mut known: Vec<Known> = report
            .outcomes
            .iter()
            .filter(|outcome| is_finding(outcome))
            .flat_map(|outcome| outcome.broke.iter().map(|b| Known::of(outcome, b)))
            .collect();
        known.sort();
        known.dedup();
        Self {
            version: BASELINE_VERSION,
            known,
        }
    }

    /// Whether an entry lacks a fingerprint (a file of version 1, or a report written before
    /// fingerprints): it then knows every way its check fails.
    pub fn unfingerprinted(&self) -> bool {
        self.known.iter().any(|known| known.fingerprint.is_none())
    }

    /// The checks it holds failures of, each once.
    pub fn checks(&self) -> Vec<String> {
        let mut checks: Vec<String> = self.known.iter().map(|k| k.check.clone()).collect();
        checks.dedup();
        checks
    }

    /// A baseline file's text, or a JSON report's (its failed and broken outcomes).
    pub fn parse(text: &str) -> Result<Self, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("the baseline: {e}"))?;
        let Some(outcomes) = value.get("outcomes").and_then(Value::as_array) else {
            let baseline: Self =
                serde_json::from_value(value).map_err(|e| format!("the baseline: {e}"))?;
            if ![UNFINGERPRINTED, BASELINE_VERSION].contains(&baseline.version) {
                return Err(format!(
                    "the baseline is of version {}; this suite reads {UNFINGERPRINTED} and \
                     {BASELINE_VERSION}",
                    baseline.version
                ));
            }
            return Ok(baseline);
        };
        let mut known = Vec::new();
        for outcome in outcomes {
            if !["fail", "error"].contains(&outcome["status"].as_str().unwrap_or_default()) {
                continue;
            }
            let entry = |fingerprint: &Value, broke: &Value| {
                let known = serde_json::from_value(serde_json::json!({
                    "check": outcome["id"], "level": outcome["level"],
                    "fingerprint": fingerprint, "broke": broke,
                }));
                known.map_err(|e| format!("the baseline report's outcome: {e}"))
            };
            match outcome.get("broke").and_then(Value::as_array) {
                Some(broke) => {
                    for broken in broke {
                        known.push(entry(&broken["fingerprint"], &broken["broke"])?);
                    }
                }
                None => known.push(entry(&Value::Null, &Value::Null)?),
            }
        }
        known.sort();
        known.dedup();
        Ok(Self {
            version: BASELINE_VERSION,
            known,
        })
    }
}

/// A run's findings against a baseline, a break each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Breaks the baseline does not hold (or, with `strict_normative`, normative ones it
    /// holds): they fail the run.
    pub new: Vec<Known>,
    /// Breaks the baseline holds.
    pub known: Vec<Known>,
    /// Known failures whose check ran and passed.
    pub fixed: Vec<Known>,
}

/// Marks each break of `report` and each outcome with how it stands against `baseline`, and
/// returns the comparison. An outcome is known when every one of its breaks is; with
/// `strict_normative`, a normative break is new even when the baseline holds it.
pub fn compare(report: &mut Report, baseline: &Baseline, strict_normative: bool) -> Comparison {
    let mut comparison = Comparison::default();
    for outcome in &mut report.outcomes {
        if !is_finding(outcome) {
            let fixed: Vec<&Known> = baseline
                .known
                .iter()
                .filter(|known| known.check == outcome.id && outcome.status == Status::Pass)
                .collect();
            if !fixed.is_empty() {
                outcome.baseline = Some(State::Fixed);
            }
            comparison.fixed.extend(fixed.into_iter().cloned());
            continue;
        }
        let strict = strict_normative && outcome.level == Level::Normative;
        let mut broke = std::mem::take(&mut outcome.broke);
        for broken in &mut broke {
            let known = !strict && baseline.known.iter().any(|k| k.knows(outcome, broken));
            let (state, into) = if known {
                (State::Known, &mut comparison.known)
            } else {
                (State::New, &mut comparison.new)
            };
            broken.baseline = Some(state);
            into.push(Known::of(outcome, broken));
        }
        let new = broke.iter().any(|b| b.baseline == Some(State::New));
        outcome.baseline = Some(if new { State::New } else { State::Known });
        outcome.broke = broke;
    }
    comparison
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Broke;

    #[test]
    fn known_breaks_pass_new_ones_fail_and_fixed_ones_are_named() {
        let report = crate::suite::fixture();
        // The fixture's one failure: pipeline.commit at the normative level, one break.
        let baseline = Baseline::of(&report);
        let [commit] = &baseline.known[..] else {
            panic!("one break: {baseline:?}")
        };
        assert_eq!(commit.check, "pipeline.commit");
        let mut same = report.clone();
        let compared = compare(&mut same, &baseline, false);
        assert_eq!(
            (
                compared.new.len(),
                &compared.known[..],
                compared.fixed.len()
            ),
            (0, std::slice::from_ref(commit), 0)
        );
        assert_eq!(same.outcomes[1].baseline, Some(State::Known));
        assert!(!same.failed(), "a known failure fails nothing");
        // Strict: a normative failure cannot be baselined.
        let mut strict = report.clone();
        assert_eq!(compare(&mut strict, &baseline, true).new.len(), 1);
        assert!(strict.failed());
        // Another way of failing in the same check is new.
        let mut other = report.clone();
        let broke = Broke::assertion("another fact broke");
        other.outcomes[1].broke.push(Break::new(
            "pipeline.commit",
            Level::Normative,
            None,
            &broke,
        ));
        let compared = compare(&mut other, &baseline, false);
        assert_eq!((compared.new.len(), compared.known.len()), (1, 1));
        assert_eq!(other.outcomes[1].baseline, Some(State::New));
        assert!(other.failed());
        // A baseline that knows a failure of a check that passes: fixed.
        let build = Known {
            check: "pipeline.build".into(),
            level: Level::Normative,
            fingerprint: Some("0123456789abcdef".into()),
            broke: None,
        };
        let elsewhere = Baseline {
            version: BASELINE_VERSION,
            known: vec![build.clone()],
        };
        let mut fixed = report.clone();
        let compared = compare(&mut fixed, &elsewhere, false);
        assert_eq!((compared.new.len(), compared.fixed), (1, vec![build]));
        assert_eq!(fixed.outcomes[0].baseline, Some(State::Fixed));
    }

    #[test]
    fn a_report_or_a_baseline_file_reads_as_the_same_baseline_and_version_1_still_reads() {
        let report = crate::suite::fixture();
        let from_report = Baseline::parse(&serde_json::to_string(&report).unwrap()).unwrap();
        let file = serde_json::to_string(&Baseline::of(&report)).unwrap();
        assert_eq!(Baseline::parse(&file).unwrap(), from_report);
        assert!(!from_report.unfingerprinted());
        assert!(Baseline::parse(r#"{"version": 3, "known": []}"#).is_err());
        assert!(Baseline::parse(r#"{"version": 2, "known": [], "extra": 1}"#).is_err());
        // Version 1: by check and level, every way of failing.
        let old =
            r#"{"version": 1, "known": [{"check": "pipeline.commit", "level": "normative"}]}"#;
        let old = Baseline::parse(old).unwrap();
        assert!(old.unfingerprinted());
        let mut again = report.clone();
        again.outcomes[1].broke.push(Break::new(
            "pipeline.commit",
            Level::Normative,
            None,
            &Broke::assertion("another"),
        ));
        let compared = compare(&mut again, &old, false);
        assert_eq!((compared.new.len(), compared.known.len()), (0, 2));
    }

    #[test]
    fn a_fingerprint_is_of_how_it_broke_not_of_the_values_that_change_between_runs() {
        let broke =
            |message: &str| Break::new("c", Level::Normative, None, &Broke::assertion(message));
        let one = broke("session ses_01HZ3 answered at 2026-11-28T11:32:07Z on 127.0.0.1:41234");
        let two = broke("session ses_77QQ9 answered at 2027-01-02T00:00:00Z on 127.0.0.1:5000");
        assert_eq!(one.fingerprint, two.fingerprint);
        assert_eq!(one.broke, "session # answered at #:#:# on #:#");
        assert_ne!(one.fingerprint, broke("session # refused").fingerprint);
        // A body it quotes, cut wherever its values end, is left out.
        let quoting = |id: &str| {
            broke(&format!(
                r#"answered the session's data: {{"id":"{id}","t…"#
            ))
        };
        assert_eq!(
            quoting("ses_1").fingerprint,
            quoting("ses_12345").fingerprint
        );
        assert_eq!(quoting("s").broke, "answered the session's data:");
        let status = |seen| Broke::Status {
            what: "GET /v#/agent/sessions/#".into(),
            expected: 401,
            seen,
        };
        let (a, b) = (
            Break::new("c", Level::Normative, Some("getSession"), &status(500)),
            Break::new("c", Level::Normative, Some("getSession"), &status(404)),
        );
        assert_ne!(
            a.fingerprint, b.fingerprint,
            "the status seen is part of it"
        );
        assert_eq!(a.fingerprint.len(), 16);
    }
}
