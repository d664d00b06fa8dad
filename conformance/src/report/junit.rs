//! JUnit XML, one test case per check, grouped by category.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::escape;
use crate::check::Status;
use crate::run::{Outcome, Report};

/// The report as JUnit XML, for CI systems.
pub fn junit(report: &Report) -> String {
    let mut suites: BTreeMap<&str, Vec<&Outcome>> = BTreeMap::new();
    for outcome in &report.outcomes {
        suites
            .entry(outcome.category.as_str())
            .or_default()
            .push(outcome);
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"intent-conformance\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3}\">",
        report.outcomes.len(),
        report.count(Status::Fail),
        report.count(Status::Error),
        report.count(Status::Skip) + report.count(Status::Disabled),
        report.millis as f64 / 1000.0
    );
    for (category, outcomes) in suites {
        let count = |status| outcomes.iter().filter(|o| o.status == status).count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{category}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
            outcomes.len(),
            count(Status::Fail),
            count(Status::Error),
            count(Status::Skip) + count(Status::Disabled)
        );
        for outcome in outcomes {
            let _ = write!(
                out,
                "    <testcase classname=\"{category}\" name=\"{}\" time=\"{:.3}\">",
                outcome.id,
                outcome.millis as f64 / 1000.0
            );
            let message = escape(outcome.message.as_deref().unwrap_or_default());
            match outcome.status {
                Status::Pass => {}
                Status::Fail => {
                    let _ = write!(
                        out,
                        "<failure message=\"{message}\">{}</failure>",
                        escape(outcome.requirement)
                    );
                }
                Status::Error => {
                    let _ = write!(out, "<error message=\"{message}\"/>");
                }
                Status::Skip => {
                    let _ = write!(out, "<skipped message=\"{message}\"/>");
                }
                Status::Disabled => out.push_str("<skipped message=\"disabled\"/>"),
            }
            out.push_str("</testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    coverage(&mut out, report);
    out.push_str("</testsuites>\n");
    out
}

/// A `coverage` suite without test cases, whose properties give the statuses answered per
/// operation and the share of operations answered with a success.
fn coverage(out: &mut String, report: &Report) {
    let succeeded = report.coverage.iter().filter(|o| o.succeeded()).count();
    out.push_str("  <testsuite name=\"coverage\" tests=\"0\" failures=\"0\" errors=\"0\" skipped=\"0\">\n    <properties>\n");
    let _ = writeln!(
        out,
        "      <property name=\"operations succeeded\" value=\"{succeeded}/{}\"/>",
        report.coverage.len()
    );
    for operation in &report.coverage {
        let statuses: Vec<String> = operation.statuses.iter().map(u16::to_string).collect();
        let _ = writeln!(
            out,
            "      <property name=\"{} {}\" value=\"{}\"/>",
            operation.method,
            escape(&operation.path),
            statuses.join(" ")
        );
    }
    out.push_str("    </properties>\n  </testsuite>\n");
}
