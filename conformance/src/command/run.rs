//! `intent-conformance run`: the checks against a deployment, and the reports of the run.

use std::fs::File;
use std::io::{IsTerminal, LineWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use intent_conformance::baseline::{self, Baseline, Known};
use intent_conformance::checks::Status;
use intent_conformance::config::{self, Layer};
use intent_conformance::inputs::Inputs;
use intent_conformance::spec::spec;
use intent_conformance::suite::{CheckEvent, Outcome, Selection};
use intent_conformance::target::{Role, Target, TokenSource, Tokens};
use intent_conformance::{checks, report, suite};

use super::reports::{Levels, ReportFiles, console, write_reports, write_transcripts};

#[derive(Parser)]
pub struct RunArgs {
    /// The deployment's base URL, such as https://staging.example.com.
    #[arg(long, env = "INTENT_CONFORMANCE_BASE_URL")]
    base_url: Option<String>,
    /// An environment of the config file (its baseUrl and tokens).
    #[arg(long)]
    env: Option<String>,
    /// The config file (JSON); ./intent-conformance.json when present.
    #[arg(long, env = "INTENT_CONFORMANCE_CONFIG")]
    config: Option<PathBuf>,
    /// A shell command that prints a bearer token (its last line of output) for the resource
    /// `$INTENT_RESOURCE`, the scopes `$INTENT_SCOPE` (space-separated) and the account
    /// `$INTENT_ACCOUNT` (`primary` or `secondary`). Every token no flag gives comes from it.
    #[arg(long, env = "INTENT_CONFORMANCE_TOKEN_COMMAND")]
    token_command: Option<String>,
    #[command(flatten)]
    tokens: TokenFlags,
    /// The deployment's cursor lifetime in seconds, when at most 15 (enables the 410 check).
    #[arg(long, env = "INTENT_CONFORMANCE_CURSOR_TTL")]
    cursor_ttl: Option<u64>,
    /// Seconds a turn may take to reach a terminal state (20 unless set).
    #[arg(long, env = "INTENT_CONFORMANCE_TURN_TIMEOUT")]
    turn_timeout: Option<u64>,
    /// The seed of the values the `stateful` checks generate (0 unless set): the same seed sends
    /// the same values.
    #[arg(long, env = "INTENT_CONFORMANCE_SEED")]
    seed: Option<u64>,
    /// A chat message that makes the deployment's runtime raise an action (`inputs.actionChat`).
    #[arg(long, env = "INTENT_CONFORMANCE_ACTION_PROMPT")]
    action_prompt: Option<String>,
    /// How many requests in a burst pass the deployment's rate limit (enables the 429 check).
    #[arg(long, env = "INTENT_CONFORMANCE_RATE_LIMIT_PROBE")]
    rate_limit_probe: Option<u32>,
    /// A second address of the same deployment (another instance behind the load balancer):
    /// enables the `deployment` checks.
    #[arg(long, env = "INTENT_CONFORMANCE_PEER_URL")]
    peer_url: Option<String>,
    /// Only these checks or categories (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Not these checks or categories (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// Leave what the run created (its sessions) instead of deleting it at the end.
    #[arg(long)]
    keep: bool,
    /// How many checks run at once; those that need the deployment to themselves run alone.
    #[arg(long, env = "INTENT_CONFORMANCE_JOBS", default_value_t = suite::DEFAULT_JOBS as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    jobs: u64,
    /// Which levels to run.
    #[arg(long, value_enum, default_value_t = Levels::All)]
    level: Levels,
    /// List the checks and exit.
    #[arg(long)]
    list: bool,
    /// Probe the deployment for the means the document leaves open (the chat body, cursor
    /// parameters, entries, the resolution path), write the `profile` it finds to FILE (`-`:
    /// standard output) and exit; what it could not tell goes to standard error.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["list", "rerun"])]
    discover: Option<PathBuf>,
    /// A baseline of known failures (a file `--write-baseline` made, or a JSON report): a
    /// failure whose every fingerprint it holds is reported as known and fails nothing; a new
    /// way of failing, even in a check that already failed, fails the run.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// With `--baseline`, a normative failure fails the run even when the baseline holds it.
    #[arg(long, requires = "baseline")]
    strict_normative: bool,
    /// Run only the checks that failed or broke in this JSON report, and say which pass now;
    /// `--min-coverage` is then judged over the operations those checks reached.
    #[arg(long, value_name = "REPORT", conflicts_with = "only")]
    rerun: Option<PathBuf>,
    /// Write this run's failures as a baseline file (a fingerprint per way each check broke);
    /// the run then passes whatever failed, since recording the failures is what it is for.
    #[arg(long, value_name = "FILE")]
    write_baseline: Option<PathBuf>,
    /// Fail the run when fewer than this percent of the operations were answered with a success
    /// status (their success schema validated).
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(0..=100))]
    min_coverage: Option<u8>,
    #[command(flatten)]
    reports: ReportFiles,
    /// Write every exchange of every check that ran into DIR, one file per check (`<id>.txt`).
    #[arg(long, value_name = "DIR")]
    transcript: Option<PathBuf>,
    /// No progress bar (a line per check instead).
    #[arg(long)]
    no_progress: bool,
    /// Write each event of the run to FILE as one JSON line, as it happens: each check's start,
    /// assertions, exchanges, warnings and end, secrets redacted.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
}

pub async fn run_command(args: RunArgs) -> Result<ExitCode, String> {
    let rerun = read_baseline(args.rerun.as_deref())?;
    if rerun.as_ref().is_some_and(|failed| failed.known.is_empty()) {
        println!("rerun: no check failed or broke in that report");
        return Ok(ExitCode::SUCCESS);
    }
    let only = match &rerun {
        Some(failed) => failed.checks(),
        None => args.only.clone(),
    };
    let selection = Selection {
        only,
        skip: args.skip.clone(),
        normative_only: args.level == Levels::Normative,
    };
    let all = checks::all();
    let unknown = selection.unknown(all);
    if !unknown.is_empty() {
        let mut categories: Vec<&str> = all.iter().map(|check| check.category.as_str()).collect();
        categories.dedup();
        return Err(format!(
            "--only or --skip names no check or category: {}; the categories are {}; `--list` shows \
             the checks",
            unknown.join(", "),
            categories.join(", ")
        ));
    }
    if args.list && args.reports.json.is_some() {
        let text = serde_json::to_string_pretty(&suite::listing(&selection));
        println!("{}", text.expect("checks serialize"));
        return Ok(ExitCode::SUCCESS);
    }
    if args.list {
        for check in all {
            let mark = if selection.takes(check) { " " } else { "-" };
            println!(
                "{mark} {:<34} {:<9} {:<10} {}",
                check.id,
                spec().level(&check.rests_on).as_str(),
                check.section,
                check.requirement
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let baseline = read_baseline(args.baseline.as_deref())?;
    if baseline.as_ref().is_some_and(Baseline::unfingerprinted) {
        eprintln!(
            "intent-conformance: warning: the baseline has entries without a fingerprint (a file \
             of version 1): each knows every way its check fails; write it anew with \
             --write-baseline"
        );
    }
    let resolved = resolve(&args)?;
    #[cfg(feature = "embedded")]
    let embedded;
    let target = match &resolved.base_url {
        Some(base) => Target::new(base, resolved.tokens.clone(), resolved.settings.clone()),
        #[cfg(feature = "embedded")]
        None => {
            embedded = intent_conformance::embedded::Embedded::start().await?;
            eprintln!(
                "intent-conformance: no --base-url; checking an embedded reference server at {}",
                embedded.base()
            );
            embedded.target()
        }
        #[cfg(not(feature = "embedded"))]
        None => return Err("--base-url is required (built without the embedded server)".into()),
    };
    let target = match &resolved.token_command {
        Some(command) => target.with_source(TokenSource::Command(command.clone())),
        None => target,
    };
    if let Some(path) = &args.discover {
        return discover(&target, path).await;
    }
    let bar = (!args.no_progress && std::io::stderr().is_terminal()).then(|| {
        let style = ProgressStyle::with_template("[{bar:30}] {pos}/{len} {msg}")
            .expect("a valid progress template")
            .progress_chars("#>-");
        ProgressBar::new(0).with_style(style)
    });
    let mut events = match &args.events {
        Some(path) => Some(LineWriter::new(
            File::create(path).map_err(|e| format!("creating {}: {e}", path.display()))?,
        )),
        None => None,
    };
    let mut unwritten = None;
    let mut write_event = |event: &CheckEvent| {
        if let Some(file) = events.as_mut() {
            let line = serde_json::to_string(event).expect("an event serializes");
            if let Err(e) = writeln!(file, "{}", report::redact(&line, &target.secrets())) {
                unwritten.get_or_insert_with(|| format!("writing the events: {e}"));
            }
        }
    };
    let mut report = suite::run(&target, &selection, args.jobs as usize, |event| {
        match event {
            CheckEvent::Finished {
                done,
                total,
                outcome,
            } => progress(bar.as_ref(), *done, *total, outcome),
            // Written once the baseline has judged the run, below.
            CheckEvent::RunFinished { .. } => return,
            _ => {}
        }
        write_event(event);
    })
    .await;

    if !args.keep {
        report.cleanup = Some(target.clean_up().await);
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let mut report = report::redacted(&report, &target.secrets());
    let comparison = baseline
        .as_ref()
        .map(|baseline| baseline::compare(&mut report, baseline, args.strict_normative));
    write_event(&CheckEvent::RunFinished {
        summary: report.summary(),
        failed: report.failed(),
    });
    console(&report, &args.reports);
    write_reports(&report, &args.reports)?;
    if let Some(comparison) = &comparison {
        let groups = [
            ("known", &comparison.known),
            ("fixed", &comparison.fixed),
            ("new", &comparison.new),
        ];
        print_findings("baseline", &groups);
    }
    if let Some(failed) = &rerun {
        let changed = baseline::compare(&mut report.clone(), failed, false);
        let groups = [
            ("passes now", &changed.fixed),
            ("fails again", &changed.known),
            ("fails anew", &changed.new),
        ];
        print_findings("rerun", &groups);
    }
    if let Some(path) = &args.write_baseline {
        let written = Baseline::of(&report);
        let text = serde_json::to_string_pretty(&written).expect("a baseline") + "\n";
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!(
            "baseline: wrote {} known breaks to {}",
            written.known.len(),
            path.display()
        );
    }
    if let Some(dir) = &args.transcript {
        write_transcripts(&report, dir)?;
    }
    if let Some(unwritten) = unwritten {
        return Err(unwritten);
    }
    // A re-run takes only what failed: its coverage is of the operations its checks reached.
    let (percent, of) = if rerun.is_some() {
        (
            report.reached_coverage_percent(),
            "the operations the re-run reached",
        )
    } else {
        (report.coverage_percent(), "the operations")
    };
    let short = args
        .min_coverage
        .is_some_and(|least| percent < f64::from(least));
    if short {
        eprintln!(
            "intent-conformance: {percent:.0}% of {of} were answered with a success status, \
             under --min-coverage {}",
            args.min_coverage.unwrap_or_default()
        );
    }
    // Writing a baseline records the failures: the run that writes it passes.
    let failed = report.failed() && args.write_baseline.is_none();
    Ok(if failed || short {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The baseline in the file at `path`, when given: one `--write-baseline` made, or a JSON report.
/// Writes the profile `target` shows to `path` (`-`: standard output), each note to standard
/// error.
async fn discover(target: &Target, path: &Path) -> Result<ExitCode, String> {
    let found = intent_conformance::discover::discover(target).await?;
    for note in &found.notes {
        eprintln!("discover: {note}");
    }
    let text = serde_json::to_string_pretty(&serde_json::json!({ "profile": found.profile }))
        .expect("a profile serializes");
    if path.as_os_str() == "-" {
        println!("{text}");
    } else {
        std::fs::write(path, format!("{text}\n"))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("discover: wrote {}", path.display());
    }
    target.clean_up().await;
    Ok(ExitCode::SUCCESS)
}

fn read_baseline(path: Option<&Path>) -> Result<Option<Baseline>, String> {
    let Some(path) = path else {
        return Ok(None);
    };
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    Baseline::parse(&text).map(Some)
}

/// Prints each finding of each `(what, findings)` group as
/// `{prefix}: {check} [{level}] {what}: {broke}`.
fn print_findings(prefix: &str, groups: &[(&str, &Vec<Known>)]) {
    for (what, findings) in groups {
        for finding in *findings {
            let broke = finding
                .broke
                .as_deref()
                .map_or_else(String::new, |broke| format!(": {broke}"));
            println!(
                "{prefix}: {} [{}] {what}{broke}",
                finding.check,
                finding.level.as_str()
            );
        }
    }
}

/// Flags and environment variables over the config file.
fn resolve(args: &RunArgs) -> Result<config::Resolved, String> {
    let path = args.config.clone().or_else(|| {
        let default = PathBuf::from("intent-conformance.json");
        default.exists().then_some(default)
    });
    let file = match &path {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            Some(config::File::parse(&text)?)
        }
        None => None,
    };
    let command_line = Layer {
        base_url: args.base_url.clone(),
        tokens: args.tokens.0.clone(),
        cursor_ttl: args.cursor_ttl,
        inputs: Inputs {
            action_chat: args.action_prompt.clone(),
            ..Inputs::default()
        },
        rate_limit_probe: args.rate_limit_probe,
        peer_url: args.peer_url.clone(),
        token_command: args.token_command.clone(),
        turn_timeout: args.turn_timeout,
        seed: args.seed,
        // The means of reaching a deployment come from the config file's `profile` alone.
        profile: None,
    };
    config::resolve(command_line, file.as_ref(), args.env.as_deref())
}

/// Advances the progress bar, or without one prints a line per check that ran.
fn progress(bar: Option<&ProgressBar>, done: usize, total: usize, outcome: &Outcome) {
    match bar {
        Some(bar) => {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            bar.set_message(outcome.id.clone());
        }
        None if outcome.status != Status::Disabled => eprintln!(
            "{:<5} {} ({} ms)",
            outcome.status.as_str(),
            outcome.id,
            outcome.millis
        ),
        None => {}
    }
}

/// A flag per token role (`--agent-token` and the like), each with its environment variable and
/// the role's doc comment as its help.
#[derive(Clone)]
struct TokenFlags(Tokens);

/// The id and long name of `role`'s flag, such as `agent-mcp-token`.
fn flag_name(role: Role) -> String {
    role.flag().trim_start_matches('-').to_owned()
}

impl clap::FromArgMatches for TokenFlags {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let tokens = Role::all().iter().fold(Tokens::default(), |tokens, &role| {
            match matches.get_one::<String>(&flag_name(role)) {
                Some(token) => tokens.with(role, token.clone()),
                None => tokens,
            }
        });
        Ok(Self(tokens))
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Args for TokenFlags {
    fn augment_args(command: clap::Command) -> clap::Command {
        Role::all().iter().fold(command, |command, &role| {
            let help = role
                .to_possible_value()
                .and_then(|value| value.get_help().cloned())
                .unwrap_or_default();
            command.arg(
                clap::Arg::new(flag_name(role))
                    .long(flag_name(role))
                    .env(role.env())
                    .hide_env_values(true)
                    .value_name("TOKEN")
                    .help(help),
            )
        })
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        Self::augment_args(command)
    }
}
