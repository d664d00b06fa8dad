//! `intent-conformance`: checks a deployment against the interface and writes reports.

#![forbid(unsafe_code)]

mod command {
    pub mod proxy;
    pub mod reports;
    pub mod run;
}

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use command::proxy::{ProxyArgs, proxy_command};
use command::run::{RunArgs, run_command};

#[derive(Parser)]
#[command(
    version,
    about = "Checks a deployment of the Pipeline, Agent and Account interface"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the checks. Without a base URL, against a reference server started in-process.
    Run(Box<RunArgs>),
    /// Forwards an app's traffic to a deployment and checks both directions against
    /// openapi.json, reporting like `run` on SIGINT or SIGTERM and every `--flush` seconds.
    Proxy(ProxyArgs),
    /// Prints every key of the config file's `profile` and `inputs`: its default, its meaning
    /// and an example.
    Keys,
}

fn main() -> ExitCode {
    let runtime = tokio::runtime::Runtime::new().expect("a Tokio runtime");
    let ran = match Cli::parse().command {
        Command::Run(args) => runtime.block_on(run_command(*args)),
        Command::Proxy(args) => runtime.block_on(proxy_command(args)),
        Command::Keys => {
            print!("{}", intent_conformance::keys::reference());
            Ok(ExitCode::SUCCESS)
        }
    };
    match ran {
        Ok(code) => code,
        Err(message) => {
            eprintln!("intent-conformance: {message}");
            ExitCode::from(2)
        }
    }
}
