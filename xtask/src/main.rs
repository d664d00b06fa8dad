//! Project tasks, run as `cargo xtask <task>`.

#![forbid(unsafe_code)]

mod breaking;
mod budget;
mod codegen;
mod conformance_doc;
mod downstream;
mod fixture;
mod lint;
mod release;
mod releases;
mod sync;

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use sync::Mode;

const USAGE: &str = "usage: cargo xtask codegen [--check] | conformance-doc [--check] | breaking [BASE [HEAD]] [--json | --markdown] [--interface] [--compile] | release [--dry-run] | budget | lint | fixture REV";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    if let ["breaking", rest @ ..] = args.as_slice() {
        return match breaking::run(&workspace_root(), rest) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::from(2)
            }
        };
    }
    let result = match args.as_slice() {
        ["codegen"] => codegen::run(&workspace_root(), Mode::Write),
        ["codegen", "--check"] => codegen::run(&workspace_root(), Mode::Check),
        ["conformance-doc"] => conformance_doc::run(&workspace_root(), Mode::Write),
        ["conformance-doc", "--check"] => conformance_doc::run(&workspace_root(), Mode::Check),
        ["budget"] => budget::run(&workspace_root()),
        ["lint"] => lint::run(&workspace_root()),
        ["fixture", rev] => fixture::run(&workspace_root(), rev),
        ["release", rest @ ..] => release::run(&workspace_root(), rest),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: the parent of this crate's manifest directory.
fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// A `cargo` command: the cargo that started this task where one did, else the one on `PATH`.
/// Cargo keeps the real clock: a clock preloaded into this process (CI's year-ahead pass preloads
/// libfaketime into every test binary) would hang it, so the preload is not passed on.
fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.env_remove("LD_PRELOAD");
    command
}
