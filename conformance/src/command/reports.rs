//! What both commands write: the report files they are given, the console summary, and the
//! levels that fail a run.

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use intent_conformance::{report, suite};

/// Where to write the reports, besides the console.
#[derive(clap::Args)]
pub struct ReportFiles {
    /// Write the report as JSON; without FILE, or with `-`, to standard output (and the console
    /// summary to standard error). With `--list`, the checks as JSON.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
    /// Write the report as JUnit XML.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write the report as an HTML page.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Write the failures as SARIF 2.1.0, one result per way a check broke with its fingerprint,
    /// located at the openapi.json operation each concerns, for code scanning (those a baseline
    /// knows as warnings, `unchanged`).
    #[arg(long, value_name = "FILE")]
    sarif: Option<PathBuf>,
    /// Write a Markdown summary (counts, failures with their curl lines, coverage), such as to
    /// `$GITHUB_STEP_SUMMARY` or for a pull request comment.
    #[arg(long, value_name = "FILE")]
    summary: Option<PathBuf>,
    /// Print GitHub Actions workflow commands: `::error` for each check that failed or broke in
    /// a way the baseline does not know, `::warning` for each known failure and each inconclusive
    /// check (on by itself in GitHub Actions).
    #[arg(long, env = "GITHUB_ACTIONS")]
    github: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Levels {
    /// Only checks every deployment must pass.
    Normative,
    /// Normative and reference-profile checks.
    All,
}

/// Prints the console summary of `report`: to standard error when the JSON report goes to
/// standard output.
pub fn console(report: &suite::Report, files: &ReportFiles) {
    if files
        .json
        .as_ref()
        .is_some_and(|path| path.as_os_str() == "-")
    {
        eprint!("{}", report::console(report));
    } else {
        print!("{}", report::console(report));
    }
}

/// Writes `report` to each file given, as JSON, JUnit XML, HTML, Markdown and SARIF, and prints its
/// GitHub annotations when asked (the failures its baseline knows as warnings).
pub fn write_reports(report: &suite::Report, files: &ReportFiles) -> Result<(), String> {
    let write = |path: &Option<PathBuf>, text: String| -> Result<(), String> {
        match path {
            Some(path) if path.as_os_str() == "-" => {
                print!("{text}");
                Ok(())
            }
            Some(path) => {
                std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
            }
            None => Ok(()),
        }
    };
    let text = serde_json::to_string_pretty(report).expect("a report serializes") + "\n";
    write(&files.json, text)?;
    write(&files.junit, report::junit(report))?;
    write(&files.html, report::html(report))?;
    write(&files.summary, report::summary(report))?;
    write(&files.sarif, report::sarif(report))?;
    if files.github {
        // Beside the JSON report on standard output, the runner reads them on standard error.
        let commands = report::github(report);
        if files
            .json
            .as_ref()
            .is_some_and(|path| path.as_os_str() == "-")
        {
            eprint!("{commands}");
        } else {
            print!("{commands}");
        }
    }
    Ok(())
}

/// Writes the transcript of each check that ran into `dir`.
pub fn write_transcripts(report: &suite::Report, dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for (name, text) in report::transcripts(report) {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}
