//! JUnit XML through `quick-junit` (what nextest writes): one test case per check, grouped by
//! category, and a `coverage` suite whose properties give the statuses answered per operation.

use std::collections::BTreeMap;
use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite};

use crate::checks::Status;
use crate::suite::{Outcome, Report};

/// The type of a known failure's `<skipped>`.
const KNOWN: &str = "known";

/// The report as JUnit XML, for CI systems.
pub fn junit(report: &Report) -> String {
    let mut junit = quick_junit::Report::new("intent-conformance");
    junit.set_time(Duration::from_millis(report.millis));
    let mut suites: BTreeMap<&str, Vec<&Outcome>> = BTreeMap::new();
    for outcome in &report.outcomes {
        let category = outcome.category.as_str();
        suites.entry(category).or_default().push(outcome);
    }
    for (category, outcomes) in suites {
        let mut suite = TestSuite::new(category);
        suite.add_test_cases(outcomes.into_iter().map(|outcome| case(category, outcome)));
        junit.add_test_suite(suite);
    }
    let mut coverage = TestSuite::new("coverage");
    let succeeded = report.coverage.iter().filter(|o| o.succeeded()).count();
    let share = format!("{succeeded}/{}", report.coverage.len());
    coverage.add_property(Property::new("operations succeeded", share));
    for operation in &report.coverage {
        let statuses: Vec<String> = operation.statuses.iter().map(u16::to_string).collect();
        let name = format!("{} {}", operation.method, operation.path);
        coverage.add_property(Property::new(name, statuses.join(" ")));
    }
    junit.add_test_suite(coverage);
    junit.to_string().expect("a JUnit report serializes")
}

/// The test case of one check: a failure carries its requirement, an error or a skip its message.
/// A failure the baseline knows is a skip of type `known` (as pytest writes an expected failure),
/// so that a JUnit reader counts it neither as a pass nor as a failure.
fn case(category: &str, outcome: &Outcome) -> TestCase {
    let message = outcome.message.as_deref().unwrap_or_default();
    let status = match outcome.status {
        _ if outcome.is_known() => {
            let mut status = TestCaseStatus::skipped();
            status
                .set_type(KNOWN)
                .set_message(format!(
                    "known failure ({}): {message}",
                    outcome.status.as_str()
                ))
                .set_description(outcome.requirement);
            status
        }
        Status::Pass => TestCaseStatus::success(),
        Status::Fail => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status
                .set_message(message)
                .set_description(outcome.requirement);
            status
        }
        Status::Error => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
            status.set_message(message);
            status
        }
        Status::Skip => {
            let mut status = TestCaseStatus::skipped();
            status.set_message(message);
            status
        }
        Status::Disabled => {
            let mut status = TestCaseStatus::skipped();
            status.set_message("disabled");
            status
        }
    };
    let mut case = TestCase::new(outcome.id.as_str(), status);
    if let Some(curl) = &outcome.reproduce {
        case.set_system_out(format!(
            "reproduce: {curl}\n\n{}",
            crate::exchange::transcript(&outcome.exchanges)
        ));
    }
    case.set_classname(category)
        .set_time(Duration::from_millis(outcome.millis));
    case
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_become_cases_by_category_and_coverage_becomes_properties() {
        let report = crate::suite::fixture();
        let xml = junit(&report);
        let parsed = quick_junit::Report::deserialize_from_str(&xml).expect("valid JUnit XML");
        let suites: Vec<(&str, usize, usize)> = parsed
            .test_suites
            .iter()
            .map(|s| (s.name.as_str(), s.test_cases.len(), s.failures))
            .collect();
        assert_eq!(suites, [("pipeline", 3, 1), ("coverage", 0, 0)]);
        let failed = &parsed.test_suites[0].test_cases[1];
        assert_eq!(failed.name.as_str(), "pipeline.commit");
        assert!(matches!(
            &failed.status,
            TestCaseStatus::NonSuccess { message: Some(m), .. } if m.as_str() == "got 500 <boom> & \"more\""
        ));
        let properties: Vec<(&str, &str)> = parsed.test_suites[1]
            .properties
            .iter()
            .map(|p| (p.name.as_str(), p.value.as_str()))
            .collect();
        assert_eq!(
            properties,
            [
                ("operations succeeded", "1/2"),
                ("GET /v1/x", "200 401"),
                ("POST /v1/y/{id}", "")
            ]
        );
    }
}
