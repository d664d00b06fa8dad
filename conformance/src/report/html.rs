//! One self-contained HTML page for people: the summary, the checks with failures first, and
//! the coverage per operation.

use std::fmt::Write as _;

use super::escape;
use crate::check::Status;
use crate::run::Report;

/// The report as an HTML page.
pub fn html(report: &Report) -> String {
    let mut out = String::from(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <title>intent-conformance</title>\n<style>\n\
         body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}\n\
         table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}\n\
         .pass{color:#1a7f37}.fail,.error{color:#cf222e;font-weight:bold}.skip,.disabled{color:#888}\n\
         .warning{background:#fff3cd;padding:.5em 1em;border:1px solid #e0c36c}\n\
         </style></head><body>\n",
    );
    let _ = writeln!(
        out,
        "<h1>Conformance of {}</h1>\n<p>{}.</p>",
        escape(&report.target),
        escape(&report.summary()),
    );
    for warning in &report.warnings {
        let _ = writeln!(out, "<p class=\"warning\">{}</p>", escape(warning));
    }
    out.push_str("<table><tr><th>Status</th><th>Check</th><th>Level</th><th>Section</th><th>Requirement</th><th>Detail</th></tr>\n");
    // Failures first, then errors, skips, passes and what the run left out; run order within.
    let mut outcomes: Vec<_> = report.outcomes.iter().collect();
    outcomes.sort_by_key(|outcome| match outcome.status {
        Status::Fail => 0,
        Status::Error => 1,
        Status::Skip => 2,
        Status::Pass => 3,
        Status::Disabled => 4,
    });
    for outcome in outcomes {
        let status = outcome.status.as_str();
        let _ = writeln!(
            out,
            "<tr><td class=\"{status}\">{status}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            outcome.id,
            outcome.level.as_str(),
            escape(outcome.section),
            escape(outcome.requirement),
            escape(outcome.message.as_deref().unwrap_or_default()),
        );
    }
    out.push_str("</table>\n");
    let _ = writeln!(
        out,
        "<h2>Coverage</h2>\n<p>{}.</p>\n<table><tr><th>Operation</th><th>Statuses answered</th></tr>",
        escape(&report.coverage_summary())
    );
    for operation in &report.coverage {
        let statuses: Vec<String> = operation.statuses.iter().map(u16::to_string).collect();
        let class = if operation.succeeded() {
            "pass"
        } else {
            "fail"
        };
        let _ = writeln!(
            out,
            "<tr><td><code>{} {}</code></td><td class=\"{class}\">{}</td></tr>",
            operation.method,
            escape(&operation.path),
            if statuses.is_empty() {
                "none".to_owned()
            } else {
                statuses.join(", ")
            },
        );
    }
    out.push_str("</table>\n</body></html>\n");
    out
}
