//! `intent-conformance proxy`: an app's traffic to a deployment, judged both ways.

use std::process::ExitCode;

use clap::Parser;
use intent_conformance::proxy::Proxy;

use super::reports::{Levels, ReportFiles, console, write_reports};

#[derive(Parser)]
pub struct ProxyArgs {
    /// The deployment's base URL, such as https://staging.example.com.
    #[arg(long, env = "INTENT_CONFORMANCE_UPSTREAM")]
    upstream: String,
    /// The address to listen on (port 0 picks one; the address is printed).
    #[arg(long, default_value = "127.0.0.1:8081")]
    listen: String,
    #[command(flatten)]
    reports: ReportFiles,
    /// Which levels fail an operation: at `normative`, profile violations are notes.
    #[arg(long, value_enum, default_value_t = Levels::All)]
    level: Levels,
    /// Exit 1 when anything normative broke, whatever `--level` shows.
    #[arg(long)]
    fail_on_violation: bool,
    /// Also write the reports every this many seconds.
    #[arg(long, value_name = "SECONDS")]
    flush: Option<u64>,
}

pub async fn proxy_command(args: ProxyArgs) -> Result<ExitCode, String> {
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| format!("listening on {}: {e}", args.listen))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let proxy = std::sync::Arc::new(Proxy::new(&args.upstream));
    println!("listening on http://{address}");
    let normative_only = args.level == Levels::Normative;
    let serving = tokio::spawn(proxy.clone().serve(listener));
    let flush = async {
        let Some(seconds) = args.flush else {
            return std::future::pending::<Result<ExitCode, String>>().await;
        };
        let mut every = tokio::time::interval(std::time::Duration::from_secs(seconds.max(1)));
        every.tick().await;
        loop {
            every.tick().await;
            let report = proxy.ledger().report(proxy.upstream(), normative_only);
            write_reports(&report, &args.reports)?;
        }
    };
    tokio::select! {
        stopped = stop_signal() => stopped?,
        flushed = flush => return flushed,
        served = serving => return Err(format!("the proxy stopped: {served:?}")),
    }
    let report = proxy.ledger().report(proxy.upstream(), normative_only);
    console(&report, &args.reports);
    write_reports(&report, &args.reports)?;
    // What broke normatively fails the exit code, whatever `--level` shows.
    let broke = || proxy.ledger().report(proxy.upstream(), true).failed();
    Ok(if args.fail_on_violation && broke() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Waits for SIGINT (Ctrl-C) or SIGTERM.
async fn stop_signal() -> Result<(), String> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("listening for SIGTERM: {e}"))?;
    tokio::select! {
        interrupted = tokio::signal::ctrl_c() => interrupted.map_err(|e| e.to_string()),
        _ = terminate.recv() => Ok(()),
    }
}
