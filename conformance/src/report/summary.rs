//! A Markdown summary of a run, for `$GITHUB_STEP_SUMMARY` or a pull request comment: the counts,
//! each check that failed or broke with the `curl` line that sends its last request again (those
//! the baseline knows apart, under "Known failures"), the inconclusive ones with the key to set,
//! and the operations' coverage.

use std::fmt::Write as _;

use crate::checks::Status;
use crate::suite::{Outcome, Report};

/// The longest message a line of the summary gives; the JSON report has the whole.
const MESSAGE: usize = 500;

/// The summary of `report` as Markdown.
pub fn summary(report: &Report) -> String {
    let mut out = format!("## intent-conformance against {}\n\n", report.target);
    out.push_str(
        "| passed | failed | errors | known | skipped | disabled |\n|---|---|---|---|---|---|\n",
    );
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} |",
        report.count(Status::Pass),
        report.count(Status::Fail),
        report.count(Status::Error),
        report.known(),
        report.count(Status::Skip),
        report.count(Status::Disabled)
    );
    let failed = |known: bool| -> Vec<&Outcome> {
        let failed = report
            .outcomes
            .iter()
            .filter(|outcome| matches!(outcome.status, Status::Fail | Status::Error));
        failed
            .filter(|outcome| outcome.is_known() == known)
            .collect()
    };
    // Against a baseline, the failures it does not know are the new ones.
    let baselined = report.outcomes.iter().any(|o| o.baseline.is_some());
    let new = if baselined {
        "New failures"
    } else {
        "Failures"
    };
    for (title, outcomes) in [(new, failed(false)), ("Known failures", failed(true))] {
        if outcomes.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n### {title}\n");
        for outcome in outcomes {
            finding(&mut out, outcome);
        }
    }
    let inconclusive: Vec<_> = report
        .outcomes
        .iter()
        .filter(|outcome| outcome.status == Status::Skip)
        .filter(|outcome| {
            outcome
                .message
                .as_deref()
                .is_some_and(|message| message.starts_with("inconclusive"))
        })
        .collect();
    if !inconclusive.is_empty() {
        out.push_str("\n### Inconclusive\n\n");
    }
    for outcome in inconclusive {
        let message = outcome.message.as_deref().unwrap_or_default();
        let _ = writeln!(out, "- `{}`: {}", outcome.id, cut(message));
    }
    let _ = writeln!(out, "\n### Coverage\n\n{}", report.coverage_summary());
    if let Some(facts) = report.facts.summary() {
        let _ = writeln!(out, "\n{facts}");
    }
    out
}

/// One failure: its check, status, level, part and message, and the `curl` line that sends its
/// last request again.
fn finding(out: &mut String, outcome: &Outcome) {
    let _ = writeln!(
        out,
        "- **`{}`** {} [{}], part {}: {}",
        outcome.id,
        outcome.status.as_str(),
        outcome.level.as_str(),
        outcome.section,
        cut(outcome.message.as_deref().unwrap_or_default())
    );
    if let Some(curl) = &outcome.reproduce {
        let _ = writeln!(out, "  ```sh\n  {curl}\n  ```");
    }
}

/// `text` on one line and at most [`MESSAGE`] characters, with Markdown's table and code marks
/// kept as text.
fn cut(text: &str) -> String {
    let line: String = text
        .replace(['\n', '\r'], " ")
        .chars()
        .take(MESSAGE)
        .collect();
    line.replace('|', "\\|")
}
