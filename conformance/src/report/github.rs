//! GitHub Actions workflow commands: an `::error` for each check that failed or broke, a
//! `::warning` for each such failure a baseline knows and for each inconclusive check (a means
//! the deployment refuses, with the key to set), which the runner shows as annotations.

use crate::checks::Status;
use crate::suite::Report;

/// The longest message an annotation carries; the JSON report has the whole.
const MESSAGE: usize = 2000;

/// The workflow commands of `report`, one per line; the failures its baseline knows are
/// warnings.
pub fn github(report: &Report) -> String {
    let mut out = String::new();
    for outcome in &report.outcomes {
        let message = outcome.message.as_deref().unwrap_or_default();
        let command = match outcome.status {
            Status::Fail | Status::Error if outcome.is_known() => "warning",
            Status::Fail | Status::Error => "error",
            Status::Skip if message.starts_with("inconclusive") => "warning",
            _ => continue,
        };
        let title = format!(
            "{} {} [{}] (part {})",
            outcome.id,
            outcome.verdict(),
            outcome.level.as_str(),
            outcome.section
        );
        let text: String = message.chars().take(MESSAGE).collect();
        out.push_str(&format!(
            "::{command} title={}::{}\n",
            property(&title),
            data(&text)
        ));
    }
    out
}

/// A command's message, escaped as the runner reads it.
fn data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A command's property value, escaped as the runner reads it.
fn property(text: &str) -> String {
    data(text).replace(':', "%3A").replace(',', "%2C")
}
