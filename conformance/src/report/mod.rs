//! Reports of a run: the console summary, JSON, JUnit XML, HTML, GitHub Actions annotations and
//! a Markdown summary, with secrets redacted.

mod github;
mod html;
mod junit;
mod sarif;
mod summary;

use std::fmt::Write as _;

use crate::checks::Status;
use crate::suite::{Outcome, Report};

pub use github::github;
pub use html::html;
pub use junit::junit;
pub use sarif::sarif;
pub use summary::summary;

const REDACTED: &str = "[redacted]";

/// `report` with every secret, bearer credential and JWT-shaped string in its text replaced.
pub fn redacted(report: &Report, secrets: &[String]) -> Report {
    let mut report = report.clone();
    report.target = redact(&report.target, secrets);
    for outcome in &mut report.outcomes {
        outcome.message = outcome.message.as_deref().map(|m| redact(m, secrets));
        outcome.reproduce = outcome.reproduce.as_deref().map(|r| redact(r, secrets));
        for line in outcome
            .profile_findings
            .iter_mut()
            .chain(outcome.warnings.iter_mut())
        {
            *line = redact(line, secrets);
        }
        for exchange in &mut outcome.exchanges {
            let texts = [&mut exchange.url]
                .into_iter()
                .chain(exchange.request_headers.values_mut())
                .chain(exchange.request_body.as_mut())
                .chain(exchange.response_headers.values_mut())
                .chain(exchange.response_body.as_mut())
                .chain(exchange.frames.iter_mut().map(|frame| &mut frame.data));
            for text in texts {
                *text = redact(text, secrets);
            }
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
        // A text shorter than a secret cannot hold it: no search for it there.
        if secret.len() <= text.len() {
            text = text.replace(secret.as_str(), REDACTED);
        }
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

/// The transcript of each check that ran, as `(file name, text)`: `<id>.txt`, holding its
/// verdict, the `curl` line of a failure, and every exchange it made (see
/// [`crate::exchange::transcript`]).
pub fn transcripts(report: &Report) -> Vec<(String, String)> {
    report
        .outcomes
        .iter()
        .filter(|outcome| outcome.status != Status::Disabled)
        .map(|outcome| {
            let mut text = format!("{} {}", outcome.id, outcome.status.as_str());
            if let Some(message) = &outcome.message {
                let _ = write!(text, ": {message}");
            }
            text.push('\n');
            if let Some(curl) = &outcome.reproduce {
                let _ = writeln!(text, "reproduce: {curl}");
            }
            text.push('\n');
            text.push_str(&crate::exchange::transcript(&outcome.exchanges));
            let name: String = outcome
                .id
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "._-".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            (format!("{name}.txt"), text)
        })
        .collect()
}

/// The longest line the console prints; the JSON report keeps the whole text.
const LINE: usize = 300;

/// The most lines the console gives one outcome.
const LINES: usize = 5;

/// The console summary: every check that did not pass, with its findings (at most five lines of
/// at most 300 characters each; the JSON report has them all), then the counts.
pub fn console(report: &Report) -> String {
    let mut out = String::new();
    for outcome in &report.outcomes {
        if outcome.status == Status::Pass && !outcome.profile_findings.is_empty() {
            let head = format!(
                "NOTE  {} [profile] differs from the reference profile:",
                outcome.id
            );
            findings(&mut out, &head, &outcome.profile_findings.join("; "));
        }
        for warning in &outcome.warnings {
            line(&mut out, &format!("WARN  {} {warning}", outcome.id));
        }
        if matches!(outcome.status, Status::Pass | Status::Disabled) {
            continue;
        }
        let head = format!(
            "{:<5} {} [{}]",
            outcome.verdict().to_uppercase(),
            outcome.id,
            outcome.level.as_str(),
        );
        findings(
            &mut out,
            &head,
            outcome.message.as_deref().unwrap_or_default(),
        );
        exchanges(&mut out, outcome);
    }
    let _ = writeln!(out);
    line(&mut out, &report.summary());
    line(&mut out, &report.coverage_summary());
    if let Some(facts) = report.facts.summary() {
        line(&mut out, &facts);
    }
    if let Some(cleanup) = &report.cleanup {
        let removed = format!(
            "clean-up: removed {} of {} things the run created",
            cleanup.removed.len(),
            cleanup.removed.len() + cleanup.left.len()
        );
        if cleanup.left.is_empty() {
            line(&mut out, &removed);
        } else {
            let head = format!("{removed}; left:");
            findings(&mut out, &head, &cleanup.left.join("; "));
        }
    }
    for warning in &report.warnings {
        let _ = writeln!(out);
        line(&mut out, &format!("WARNING: {warning}"));
    }
    out
}

/// `head` and the first of `text`'s findings (its `; `-separated parts) on one line, the next
/// ones indented below, up to [`LINES`] lines in all.
fn findings(out: &mut String, head: &str, text: &str) {
    let parts: Vec<&str> = text.split("; ").filter(|part| !part.is_empty()).collect();
    let shown = if parts.len() > LINES {
        LINES - 1
    } else {
        parts.len()
    };
    match parts.first() {
        Some(first) => line(out, &format!("{head} {first}")),
        None => line(out, head),
    }
    for part in parts.iter().take(shown).skip(1) {
        line(out, &format!("      {part}"));
    }
    if parts.len() > shown {
        let more = parts.len() - shown;
        line(
            out,
            &format!("      and {more} more (the JSON report has them all)"),
        );
    }
}

/// How many of a failed check's last exchanges the console shows.
const LAST_EXCHANGES: usize = 2;

/// The last exchanges of a check that failed or broke, and the `curl` line that repeats its
/// last request when it fits on a line.
fn exchanges(out: &mut String, outcome: &Outcome) {
    let Some(curl) = &outcome.reproduce else {
        return;
    };
    let first = outcome.exchanges.len().saturating_sub(LAST_EXCHANGES);
    for exchange in &outcome.exchanges[first..] {
        line(out, &format!("      {}", exchange.summary()));
    }
    let reproduce = format!("      reproduce: {curl}");
    if reproduce.chars().count() <= LINE {
        line(out, &reproduce);
    } else {
        line(
            out,
            "      reproduce: a long line, in the JSON report (--json) and the transcript (--transcript)",
        );
    }
}

/// Writes `text` as one line, cut to [`LINE`] characters.
fn line(out: &mut String, text: &str) {
    match text.char_indices().nth(LINE - 1) {
        Some((at, _)) => {
            let _ = writeln!(out, "{}…", &text[..at]);
        }
        None => {
            let _ = writeln!(out, "{text}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::fixture;

    #[test]
    fn every_report_of_a_fixed_run_is_as_snapshotted() {
        let report = fixture();
        insta::assert_snapshot!("console", console(&report));
        let json = serde_json::to_string_pretty(&report).unwrap();
        insta::assert_snapshot!("json", json);
        insta::assert_snapshot!("junit", junit(&report));
        insta::assert_snapshot!("html", html(&report));
        insta::assert_snapshot!("github", github(&report));
        insta::assert_snapshot!("summary", summary(&report));
        let transcripts = transcripts(&report);
        let names: Vec<&str> = transcripts.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            [
                "pipeline.build.txt",
                "pipeline.commit.txt",
                "pipeline.svm.txt"
            ]
        );
        insta::assert_snapshot!("transcript", &transcripts[1].1);
    }

    #[test]
    fn a_long_failure_takes_five_lines_then_its_exchanges_each_of_at_most_300_characters() {
        let mut report = fixture();
        let findings: Vec<String> = (1..=8)
            .map(|n| format!("finding {n}: {}", "x".repeat(400)))
            .collect();
        report.outcomes[1].message = Some(findings.join("; "));
        let mut long = report.outcomes[1].exchanges[0].clone();
        long.request_body = Some("y".repeat(400));
        report.outcomes[1].reproduce = Some(long.curl());
        report.outcomes[1].exchanges.push(long.clone());
        report.outcomes[1].exchanges.push(long);
        let text = console(&report);
        assert!(
            text.lines().all(|line| line.chars().count() <= 300),
            "{text}"
        );
        let failure: Vec<&str> = text
            .lines()
            .skip_while(|line| !line.starts_with("FAIL"))
            .take_while(|line| !line.starts_with("SKIP"))
            .collect();
        assert_eq!(failure.len(), 8, "{failure:?}");
        assert!(failure[0].starts_with("FAIL  pipeline.commit [normative] finding 1: xxx"));
        assert!(failure[3].starts_with("      finding 4: "));
        assert_eq!(
            failure[4],
            "      and 4 more (the JSON report has them all)"
        );
        // The last two of its three exchanges, and where to find the long curl line.
        let last = "      POST http://127.0.0.1:1/v1/pipeline/evm/build -> 500 in 4 ms";
        assert_eq!(failure[5..7], [last, last]);
        assert!(failure[7].starts_with("      reproduce: a long line, in the JSON report"));
    }

    #[test]
    fn coverage_counts_the_operations_answered_with_a_success_and_lists_unseen_statuses() {
        let report = fixture();
        assert_eq!(report.coverage_percent(), 50.0);
        // Of the one operation the run reached, one succeeded.
        assert_eq!(report.reached_coverage_percent(), 100.0);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            json["coverage"][1]["unseen"],
            serde_json::json!(["200", "404"])
        );
    }

    #[test]
    fn github_annotates_an_inconclusive_check_as_a_warning_that_names_its_key() {
        let mut report = fixture();
        report.outcomes[2].message = Some(
            "inconclusive: the chat was refused: 422; set `profile.chat` in the config file".into(),
        );
        let commands = github(&report);
        let lines: Vec<&str> = commands.lines().collect();
        assert_eq!(lines.len(), 2, "{commands}");
        assert!(lines[0].starts_with("::error title=pipeline.commit fail [normative]"));
        assert!(lines[1].starts_with("::warning title=pipeline.svm skip"));
        assert!(lines[1].ends_with("set `profile.chat` in the config file"));
        assert!(summary(&report).contains("- `pipeline.svm`: inconclusive"));
        let baseline = crate::baseline::Baseline::of(&report);
        crate::baseline::compare(&mut report, &baseline, false);
        assert!(github(&report).starts_with("::warning title=pipeline.commit known"));
        assert!(summary(&report).contains("### Known failures\n\n- **`pipeline.commit`** fail"));
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
