//! Reports of a run: the console summary, JSON, JUnit XML and HTML, with secrets redacted.

mod html;
mod junit;

use std::fmt::Write as _;

use crate::check::Status;
use crate::run::Report;

pub use html::html;
pub use junit::junit;

const REDACTED: &str = "[redacted]";

/// `report` with every secret, bearer credential and JWT-shaped string in its text replaced.
pub fn redacted(report: &Report, secrets: &[String]) -> Report {
    let mut report = report.clone();
    report.target = redact(&report.target, secrets);
    for outcome in &mut report.outcomes {
        outcome.message = outcome.message.as_deref().map(|m| redact(m, secrets));
        for line in outcome
            .profile_findings
            .iter_mut()
            .chain(outcome.warnings.iter_mut())
        {
            *line = redact(line, secrets);
        }
    }
    for warning in &mut report.warnings {
        *warning = redact(warning, secrets);
    }
    report
}

/// `text` with `secrets`, `Bearer` credentials and JWT-shaped words replaced by `[redacted]`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_owned();
    for secret in secrets.iter().filter(|secret| secret.len() >= 8) {
        text = text.replace(secret.as_str(), REDACTED);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    let next = |rest: &str| {
        let jwt = rest.find("eyJ");
        let bearer = rest.find("Bearer ").map(|at| at + "Bearer ".len());
        jwt.into_iter().chain(bearer).min()
    };
    while let Some(at) = next(rest) {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let end = from
            .find(|c: char| !(c.is_ascii_alphanumeric() || "-_.~+/=".contains(c)))
            .unwrap_or(from.len());
        if end == 0 {
            out.push_str(&from[..1]);
            rest = &from[1..];
        } else {
            out.push_str(REDACTED);
            rest = &from[end..];
        }
    }
    out.push_str(rest);
    out
}

/// The console summary: every check that did not pass, with its message, then the counts.
pub fn console(report: &Report) -> String {
    let mut out = String::new();
    for outcome in &report.outcomes {
        if outcome.status == Status::Pass && !outcome.profile_findings.is_empty() {
            let _ = writeln!(
                out,
                "NOTE  {} [profile] differs from the reference profile: {}",
                outcome.id,
                outcome.profile_findings.join("; ")
            );
        }
        for warning in &outcome.warnings {
            let _ = writeln!(out, "WARN  {} {warning}", outcome.id);
        }
        if matches!(outcome.status, Status::Pass | Status::Disabled) {
            continue;
        }
        let _ = writeln!(
            out,
            "{:<5} {} [{}] {}",
            outcome.status.as_str().to_uppercase(),
            outcome.id,
            outcome.level.as_str(),
            outcome.message.as_deref().unwrap_or_default()
        );
    }
    let _ = writeln!(out, "\n{}\n{}", report.summary(), report.coverage_summary());
    for warning in &report.warnings {
        let _ = writeln!(out, "\nWARNING: {warning}");
    }
    out
}

/// A fixed run result for the report tests: a pass, a failure whose message needs escaping, a
/// skip, two operations of which one was answered with a success, and a warning.
#[cfg(test)]
pub(crate) fn fixture() -> Report {
    use crate::check::Category;
    use crate::run::Outcome;
    use crate::spec::Level;
    use crate::target::Coverage;
    let outcome = |id, status, message: Option<&str>| Outcome {
        id,
        category: Category::Pipeline,
        level: Level::Normative,
        requirement: "A Build MUST verify.",
        section: "2.1",
        status,
        message: message.map(str::to_owned),
        assertions: 3,
        profile_findings: Vec::new(),
        warnings: Vec::new(),
        millis: 12,
    };
    Report {
        version: crate::run::REPORT_VERSION,
        target: "http://127.0.0.1:1".into(),
        started: 1_795_000_000,
        millis: 100,
        outcomes: vec![
            outcome("pipeline.build", Status::Pass, None),
            outcome(
                "pipeline.commit",
                Status::Fail,
                Some("got 500 <boom> & \"more\""),
            ),
            outcome("pipeline.svm", Status::Skip, Some("needs a pipeline token")),
        ],
        coverage: vec![
            Coverage {
                method: "GET".into(),
                path: "/v1/x".into(),
                statuses: vec![200, 401],
            },
            Coverage {
                method: "POST".into(),
                path: "/v1/y/{id}".into(),
                statuses: vec![],
            },
        ],
        warnings: vec!["only 1 of 3 checks passed".into()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_report_of_a_fixed_run_is_as_snapshotted() {
        let report = fixture();
        insta::assert_snapshot!("console", console(&report));
        let json = serde_json::to_string_pretty(&report).unwrap();
        insta::assert_snapshot!("json", json);
        insta::assert_snapshot!("junit", junit(&report));
        insta::assert_snapshot!("html", html(&report));
    }

    #[test]
    fn redact_replaces_secrets_bearer_credentials_and_jwts() {
        let secrets = vec!["conformance-secret-42".to_owned()];
        let text =
            "value conformance-secret-42, Bearer abc.def-ghi and eyJhbGciOi.eyJzdWIi.sig; done";
        assert_eq!(
            redact(text, &secrets),
            "value [redacted], Bearer [redacted] and [redacted]; done"
        );
    }
}
