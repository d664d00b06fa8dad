//! `intent-server`: runs the reference server, mints an access token of its data dir, or
//! rotates its keys.

#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use intent_server::AppState;
use intent_server::auth::token::{self, Grant};
use intent_server::config::{Config, DEFAULT_TOKEN_TTL, OAuthClient, RateLimit};
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    version,
    about = "Reference server of the Pipeline, Agent and Account interface"
)]
struct Cli {
    /// Seconds to move this process's wall clock by (negative: into the past), for tests that
    /// read data made on another day; timers keep real time.
    #[arg(
        long,
        global = true,
        env = "INTENT_CLOCK_OFFSET",
        default_value_t = 0,
        allow_hyphen_values = true
    )]
    clock_offset: i64,
    /// How the log (on standard error) is written.
    #[arg(
        long,
        global = true,
        env = "INTENT_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// How the log is written.
#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    /// Lines for a person: coloured on a terminal, unless `NO_COLOR` is set.
    Text,
    /// One JSON object a line: its time, level, message and fields, and the span of the request
    /// it is of (method, URI, request id).
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the interface over HTTP until interrupted (Ctrl-C or SIGTERM).
    Serve {
        /// Address to bind; port 0 picks a free port, and the bound address is printed.
        #[arg(long, env = "INTENT_ADDR", default_value = "127.0.0.1:8080")]
        addr: SocketAddr,
        /// Directory of the keys and, without --database-url, of the SQLite database; created
        /// when missing.
        #[arg(long, env = "INTENT_DATA_DIR", default_value = "intent-data")]
        data_dir: PathBuf,
        /// PostgreSQL URL (postgres://...): keep the state there, shared with every instance
        /// given the same URL and the same key files; the data dir then holds only keys.
        #[arg(long, env = "INTENT_DATABASE_URL")]
        database_url: Option<String>,
        /// Seconds an instance's claim on a turn it runs lasts unless renewed.
        #[arg(long, env = "INTENT_TURN_LEASE", default_value_t = Config::new("").turn_lease.as_secs())]
        turn_lease: u64,
        /// Public base address (token issuer, prefix of the resource identifiers); defaults to
        /// http:// and the bound address.
        #[arg(long, env = "INTENT_PUBLIC_URL")]
        public_url: Option<String>,
        /// Largest accepted request body, in bytes.
        #[arg(long, env = "INTENT_BODY_LIMIT", default_value_t = 1024 * 1024)]
        body_limit: usize,
        /// Seconds an event-log cursor stays valid.
        #[arg(long, env = "INTENT_CURSOR_TTL", default_value_t = Config::new("").cursor_ttl.as_secs())]
        cursor_ttl: u64,
        /// Seconds events stay in a session's retained log.
        #[arg(long, env = "INTENT_EVENT_RETENTION", default_value_t = Config::new("").event_retention.as_secs())]
        event_retention: u64,
        /// Seconds from a Build's making to its `expiresAt`.
        #[arg(long, env = "INTENT_BUILD_TTL", default_value_t = Config::new("").build_ttl.as_secs())]
        build_ttl: u64,
        /// An OAuth client to register, as ID=REDIRECT_URI[,REDIRECT_URI...]; repeatable.
        /// `intent-cli` is always registered for the device flow.
        #[arg(long = "client", env = "INTENT_CLIENTS", value_delimiter = ' ', value_parser = OAuthClient::parse)]
        clients: Vec<OAuthClient>,
        /// Refuse dynamic client registration (RFC 7591): only the clients given with
        /// `--client` (and `intent-cli`) may sign in.
        #[arg(long, env = "INTENT_NO_CLIENT_REGISTRATION")]
        no_client_registration: bool,
        /// Refuse client ids that are `https` URLs of client metadata documents: no document
        /// is fetched.
        #[arg(long, env = "INTENT_NO_CLIENT_METADATA_DOCUMENTS")]
        no_client_metadata_documents: bool,
        /// A host whose client metadata documents may be fetched though it resolves to an
        /// address that is not public (loopback, a private network); repeatable.
        #[arg(
            long = "client-metadata-host",
            env = "INTENT_CLIENT_METADATA_HOSTS",
            value_delimiter = ','
        )]
        client_metadata_hosts: Vec<String>,
        /// A PEM file of root certificates trusted, beside the system's, to fetch client
        /// metadata documents.
        #[arg(long, env = "INTENT_CLIENT_METADATA_ROOTS")]
        client_metadata_roots: Option<PathBuf>,
        /// Requests per second each account may make on each resource, as RPS or RPS:BURST;
        /// over it, 429 with Retry-After. No limit by default.
        #[arg(long, env = "INTENT_RATE_LIMIT", value_parser = RateLimit::parse)]
        rate_limit: Option<RateLimit>,
        /// Seconds between two clean-ups of expired codes, grants, idempotency keys and idle
        /// wake-up channels; at least 1.
        #[arg(long, env = "INTENT_CLEANUP_INTERVAL", default_value_t = Config::new("").cleanup_interval.as_secs())]
        cleanup_interval: u64,
        /// Seconds a device code stays valid.
        #[arg(long, env = "INTENT_DEVICE_CODE_TTL", default_value_t = Config::new("").device_code_ttl.as_secs())]
        device_code_ttl: u64,
        /// Seconds an idempotency key and its answer are kept.
        #[arg(long, env = "INTENT_IDEMPOTENCY_KEY_TTL", default_value_t = Config::new("").idempotency_key_ttl.as_secs())]
        idempotency_key_ttl: u64,
        /// Seconds expired codes, grants and refresh-token families are kept to tell a late
        /// replay or poll what it was.
        #[arg(long, env = "INTENT_KEEP_EXPIRED", default_value_t = Config::new("").expired_kept.as_secs())]
        keep_expired: u64,
        /// Seconds to wait for open connections after SIGTERM or Ctrl-C before exiting.
        #[arg(long, env = "INTENT_SHUTDOWN_GRACE", default_value_t = 10)]
        shutdown_grace: u64,
        /// Seconds the turns running at SIGTERM or Ctrl-C have to end here; the ones still
        /// running then are handed over, to go on in another instance or in this one's restart.
        #[arg(long, env = "INTENT_TURN_GRACE", default_value_t = 5)]
        turn_grace: u64,
        /// Address to serve the metrics on (`GET /metrics`, OpenMetrics text), apart from the
        /// API; none are served without it. Port 0 picks a free port, printed after the API's.
        #[arg(long, env = "INTENT_METRICS_ADDR")]
        metrics_addr: Option<SocketAddr>,
    },
    /// Print an access token signed with the data dir's key, for tests, CI and conformance runs.
    Token {
        /// Directory of the server's keys; created when missing.
        #[arg(long, env = "INTENT_DATA_DIR", default_value = "intent-data")]
        data_dir: PathBuf,
        /// The account the token speaks for.
        #[arg(long)]
        sub: String,
        /// Space-separated scopes.
        #[arg(long)]
        scope: String,
        /// The one resource identifier, for example http://127.0.0.1:8080/v1/agent; the issuer is
        /// what precedes the resource path.
        #[arg(long)]
        resource: String,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = DEFAULT_TOKEN_TTL.as_secs())]
        ttl: u64,
        /// OAuth client id recorded in the token.
        #[arg(long, default_value = "intent-server-cli")]
        client_id: String,
    },
    /// Manage the data dir's keys.
    #[command(subcommand)]
    Keys(Keys),
}

#[derive(Subcommand)]
enum Keys {
    /// Make new signing and cursor keys current. The previous ones keep verifying tokens, Build
    /// attestations and cursors until those can have expired; servers take the new keys when
    /// they start.
    Rotate {
        /// Directory of the server's keys.
        #[arg(long, env = "INTENT_DATA_DIR", default_value = "intent-data")]
        data_dir: PathBuf,
    },
}

/// Writes the log to standard error as `format` says, filtered by `RUST_LOG` (`info` unless set).
fn logs(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    match format {
        LogFormat::Text => logs.with_ansi(colour()).init(),
        LogFormat::Json => logs.json().with_span_list(false).init(),
    }
}

/// Whether text logs are coloured: on a terminal only, and not when `NO_COLOR` is set to
/// anything but nothing (no-color.org).
fn colour() -> bool {
    let asked_not = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
    std::io::stderr().is_terminal() && !asked_not
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    logs(cli.log_format);
    intent_server::set_clock_offset(cli.clock_offset);
    let result = match cli.command {
        Command::Serve {
            addr,
            data_dir,
            database_url,
            turn_lease,
            public_url,
            body_limit,
            cursor_ttl,
            event_retention,
            build_ttl,
            clients,
            no_client_registration,
            no_client_metadata_documents,
            client_metadata_hosts,
            client_metadata_roots,
            rate_limit,
            cleanup_interval,
            device_code_ttl,
            idempotency_key_ttl,
            keep_expired,
            shutdown_grace,
            turn_grace,
            metrics_addr,
        } => {
            let config = Config::new(data_dir)
                .database_url(database_url)
                .turn_lease(Duration::from_secs(turn_lease.max(1)))
                .body_limit(body_limit)
                .cursor_ttl(Duration::from_secs(cursor_ttl))
                .event_retention(Duration::from_secs(event_retention))
                .build_ttl(Duration::from_secs(build_ttl))
                .rate_limit(rate_limit)
                .client_registration(!no_client_registration)
                .client_metadata(
                    !no_client_metadata_documents,
                    client_metadata_hosts,
                    client_metadata_roots,
                )
                .cleanup_interval(Duration::from_secs(cleanup_interval.max(1)))
                .device_code_ttl(Duration::from_secs(device_code_ttl))
                .idempotency_key_ttl(Duration::from_secs(idempotency_key_ttl))
                .expired_kept(Duration::from_secs(keep_expired));
            let mut config = clients.into_iter().fold(config, Config::client);
            if let Some(url) = public_url {
                config = config.public_url(url);
            }
            let graces = Graces {
                connections: Duration::from_secs(shutdown_grace),
                turns: Duration::from_secs(turn_grace),
            };
            serve(addr, metrics_addr, config, graces).await
        }
        Command::Token {
            data_dir,
            sub,
            scope,
            resource,
            ttl,
            client_id,
        } => print_token(data_dir, sub, &scope, resource, ttl, client_id),
        Command::Keys(Keys::Rotate { data_dir }) => rotate_keys(&data_dir),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// How long a shutdown waits for what is open.
struct Graces {
    /// For the open connections.
    connections: Duration,
    /// For the running turns, before handing them over.
    turns: Duration,
}

/// Serves until SIGTERM or Ctrl-C (and the metrics, when given an address, until the process
/// exits), then drains: no new connections, waiting long-polls answer
/// at once, streams end, and the running turns end or are handed over; exits once every
/// connection closed (or after the connections' grace) and every turn ended or was handed over.
async fn serve(
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    config: Config,
    graces: Graces,
) -> Result<(), String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("binding {addr}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    let state = AppState::open(config, &format!("http://{bound}"))
        .await
        .map_err(report)?;
    if !bound.ip().is_loopback() {
        tracing::warn!(%bound, "the consent and device pages let anyone act as any account: keep this server private");
    }
    println!("listening on http://{bound}");
    if let Some(addr) = metrics_addr {
        let metrics = TcpListener::bind(addr)
            .await
            .map_err(|e| format!("binding {addr} for the metrics: {e}"))?;
        let bound = metrics.local_addr().map_err(|e| e.to_string())?;
        println!("metrics on http://{bound}/metrics");
        tokio::spawn(async move {
            if let Err(error) = intent_server::serve_metrics(metrics).await {
                tracing::error!(%error, "serving the metrics");
            }
        });
    }
    tracing::info!(%bound, issuer = state.issuer(), "serving");
    let (signalled, on_signal) = tokio::sync::watch::channel(false);
    let log = state.log().clone();
    let turns = state.turns().clone();
    let mut turns_signalled = on_signal.clone();
    let turns_drained = tokio::spawn(async move {
        turns_signalled.wait_for(|s| *s).await.ok()?;
        Some(turns.drain(graces.turns).await)
    });
    let shutdown = async move {
        shutdown_signal().await;
        log.drain();
        signalled.send_replace(true);
    };
    let serving = intent_server::serve_until(listener, state, shutdown);
    let mut deadline_signalled = on_signal;
    let deadline = async move {
        match deadline_signalled.wait_for(|s| *s).await {
            Ok(_) => tokio::time::sleep(graces.connections).await,
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        served = serving => served.map_err(|e| e.to_string())?,
        () = deadline => {
            tracing::warn!(grace = ?graces.connections, "connections still open after the shutdown grace");
        }
    }
    if let Ok(Some(drained)) = turns_drained.await {
        tracing::info!(
            running = drained.running,
            handed_over = drained.handed_over,
            "turns drained"
        );
    }
    Ok(())
}

fn print_token(
    data_dir: PathBuf,
    sub: String,
    scope: &str,
    resource: String,
    ttl: u64,
    client_id: String,
) -> Result<(), String> {
    let scopes = scope.split_whitespace().map(str::to_owned).collect();
    let grant = Grant {
        account: sub,
        scopes,
        resource,
        client_id,
        ttl: Duration::from_secs(ttl),
    };
    let token =
        token::mint_with_data_dir(&data_dir, &grant, intent_server::now()).map_err(report)?;
    println!("{token}");
    Ok(())
}

fn rotate_keys(data_dir: &std::path::Path) -> Result<(), String> {
    if !data_dir.is_dir() {
        return Err(format!("{} is not a data dir", data_dir.display()));
    }
    let kid = intent_server::rotate_keys(data_dir, intent_server::now())
        .map_err(|e| format!("rotating the keys in {}: {e}", data_dir.display()))?;
    println!("signing key {kid} is current; restart the servers of this data dir");
    Ok(())
}

/// An error with its chain of causes on one line.
fn report(error: impl std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        tokio::signal::ctrl_c().await.ok();
    };
    #[cfg(unix)]
    let terminate = async {
        if let Ok(mut signal) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            signal.recv().await;
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}
