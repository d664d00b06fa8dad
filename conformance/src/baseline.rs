//! A baseline of known failures, so that a team's CI fails on new findings only (as
//! schemathesis's baseline and oasdiff's ignore file do): a finding already in the baseline is
//! *known*, a known one that now passes is *fixed*, and only the others fail the run.
//!
//! A finding is matched by its check's id (which names the operation, for the checks made once
//! per operation) and the level it failed at, never by its message, whose values change from run
//! to run. The file is JSON: `{"version": 1, "known": [{"check": "...", "level": "normative"}]}`;
//! a JSON report of a run (`--json`) serves as well.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::check::Status;
use crate::run::{Outcome, Report};
use crate::spec::Level;

/// The format of a baseline file.
pub const BASELINE_VERSION: u32 = 1;

/// One known failure.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Known {
    /// The check's id.
    pub check: String,
    /// The level it failed at.
    pub level: Level,
}

impl Known {
    /// Whether `outcome` is this failure: its check failed or broke at this level.
    pub fn holds(&self, outcome: &Outcome) -> bool {
        is_finding(outcome) && outcome.id == self.check && outcome.level == self.level
    }
}

/// The known failures of a deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// [`BASELINE_VERSION`].
    pub version: u32,
    /// The failures, sorted.
    pub known: Vec<Known>,
}

/// Whether `outcome` is a finding: a check that failed or broke.
fn is_finding(outcome: &Outcome) -> bool {
    matches!(outcome.status, Status::Fail | Status::Error)
}

impl Baseline {
    /// The failures of `report`.
    pub fn of(report: &Report) -> Self {
        let mut known: Vec<Known> = report
            .outcomes
            .iter()
            .filter(|outcome| is_finding(outcome))
            .map(|outcome| Known {
                check: outcome.id.to_owned(),
                level: outcome.level,
            })
            .collect();
        known.sort();
        known.dedup();
        Self {
            version: BASELINE_VERSION,
            known,
        }
    }

    /// A baseline file's text, or a JSON report's (its failed and broken outcomes).
    pub fn parse(text: &str) -> Result<Self, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("the baseline: {e}"))?;
        let Some(outcomes) = value.get("outcomes").and_then(Value::as_array) else {
            let baseline: Self =
                serde_json::from_value(value).map_err(|e| format!("the baseline: {e}"))?;
            if baseline.version != BASELINE_VERSION {
                return Err(format!(
                    "the baseline is of version {}; this suite reads {BASELINE_VERSION}",
                    baseline.version
                ));
            }
            return Ok(baseline);
        };
        let mut known: Vec<Known> = outcomes
            .iter()
            .filter(|outcome| ["fail", "error"].contains(&outcome["status"].as_str().unwrap_or("")))
            .map(|outcome| {
                let known = serde_json::from_value(serde_json::json!({
                    "check": outcome["id"], "level": outcome["level"]
                }));
                known.map_err(|e| format!("the baseline report's outcome: {e}"))
            })
            .collect::<Result<_, _>>()?;
        known.sort();
        known.dedup();
        Ok(Self {
            version: BASELINE_VERSION,
            known,
        })
    }
}

/// A run's findings against a baseline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Failures the baseline does not hold (or, with `strict_normative`, normative ones it
    /// holds): they fail the run.
    pub new: Vec<Known>,
    /// Failures the baseline holds.
    pub known: Vec<Known>,
    /// Known failures whose check ran and passed.
    pub fixed: Vec<Known>,
}

/// `report`'s findings against `baseline`; with `strict_normative`, a normative failure is new
/// even when the baseline holds it.
pub fn compare(report: &Report, baseline: &Baseline, strict_normative: bool) -> Comparison {
    let mut comparison = Comparison::default();
    for finding in Baseline::of(report).known {
        let accepted = baseline.known.contains(&finding)
            && !(strict_normative && finding.level == Level::Normative);
        if accepted {
            comparison.known.push(finding);
        } else {
            comparison.new.push(finding);
        }
    }
    for known in &baseline.known {
        let passed = report
            .outcomes
            .iter()
            .any(|outcome| outcome.id == known.check && outcome.status == Status::Pass);
        if passed {
            comparison.fixed.push(known.clone());
        }
    }
    comparison
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_failures_pass_new_ones_fail_and_fixed_ones_are_named() {
        let report = crate::run::fixture();
        // The fixture's one failure: pipeline.commit at the normative level.
        let baseline = Baseline::of(&report);
        let commit = Known {
            check: "pipeline.commit".into(),
            level: Level::Normative,
        };
        assert_eq!(baseline.known, std::slice::from_ref(&commit));
        let same = compare(&report, &baseline, false);
        assert_eq!(
            (same.new.len(), same.known, same.fixed.len()),
            (0, vec![commit.clone()], 0)
        );
        // Strict: a normative failure cannot be baselined.
        assert_eq!(
            compare(&report, &baseline, true).new,
            std::slice::from_ref(&commit)
        );
        // A baseline that knows another failure: this one is new, and the other fixed once its
        // check passes.
        let build = Known {
            check: "pipeline.build".into(),
            level: Level::Normative,
        };
        let other = Baseline {
            version: BASELINE_VERSION,
            known: vec![build.clone()],
        };
        let compared = compare(&report, &other, false);
        assert_eq!((compared.new, compared.fixed), (vec![commit], vec![build]));
    }

    #[test]
    fn a_report_or_a_baseline_file_reads_as_the_same_baseline() {
        let report = crate::run::fixture();
        let from_report = Baseline::parse(&serde_json::to_string(&report).unwrap()).unwrap();
        let file = serde_json::to_string(&Baseline::of(&report)).unwrap();
        assert_eq!(Baseline::parse(&file).unwrap(), from_report);
        assert!(Baseline::parse(r#"{"version": 2, "known": []}"#).is_err());
        assert!(Baseline::parse(r#"{"version": 1, "known": [], "extra": 1}"#).is_err());
    }
}
