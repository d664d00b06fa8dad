//! One self-contained HTML page for people, written with `maud` (which escapes every value): the
//! summary, the checks with failures first, and the coverage per operation.

use maud::{DOCTYPE, PreEscaped, html as page};

use crate::checks::Status;
use crate::exchange::transcript;
use crate::suite::Report;

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;width:100%}\
td,th{border-bottom:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}\
.pass{color:#1a7f37}.fail,.error{color:#cf222e;font-weight:bold}.skip,.disabled{color:#888}\
.known{color:#9a6700}\
.warning{background:#fff3cd;padding:.5em 1em;border:1px solid #e0c36c}";

/// The report as an HTML page.
pub fn html(report: &Report) -> String {
    // New failures first, then errors, known failures, skips, passes and what the run left
    // out; run order within.
    let mut outcomes: Vec<_> = report.outcomes.iter().collect();
    outcomes.sort_by_key(|outcome| match outcome.status {
        _ if outcome.is_known() => 2,
        Status::Fail => 0,
        Status::Error => 1,
        Status::Skip => 3,
        Status::Pass => 4,
        Status::Disabled => 5,
    });
    page! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "intent-conformance" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { "Conformance of " (report.target) }
                p { (report.summary()) "." }
                @for warning in &report.warnings {
                    p.warning { (warning) }
                }
                table {
                    tr {
                        th { "Status" } th { "Check" } th { "Level" } th { "Section" }
                        th { "Requirement" } th { "Detail" }
                    }
                    @for outcome in outcomes {
                        tr {
                            td class=(outcome.verdict()) { (outcome.verdict()) }
                            td { code { (outcome.id) } }
                            td { (outcome.level.as_str()) }
                            td { (outcome.section) }
                            td { (outcome.requirement) }
                            td {
                                (outcome.message.as_deref().unwrap_or_default())
                                @if let Some(curl) = &outcome.reproduce {
                                    details {
                                        summary { "Exchanges (" (outcome.exchanges.len()) ")" }
                                        pre { (curl) "\n\n" (transcript(&outcome.exchanges)) }
                                    }
                                }
                            }
                        }
                    }
                }
                h2 { "Coverage" }
                p { (report.coverage_summary()) "." }
                @if let Some(facts) = report.facts.summary() {
                    p { (facts) "." }
                }
                table {
                    tr { th { "Operation" } th { "Statuses answered" } }
                    @for operation in &report.coverage {
                        tr {
                            td { code { (operation.method) " " (operation.path) } }
                            @if operation.statuses.is_empty() {
                                td.fail { "none" }
                            } @else {
                                td class=(if operation.succeeded() { "pass" } else { "fail" }) {
                                    (operation.statuses.iter().map(u16::to_string).collect::<Vec<_>>().join(", "))
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    .into_string()
}
