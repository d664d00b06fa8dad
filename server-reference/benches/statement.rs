//! The usage statement at any volume, on SQLite and on PostgreSQL, against the release server
//! binary on loopback, all in one run:
//!
//! - `GET /v1/account/statement` for a month with 10 million metered units (and eleven months of
//!   as many before it), beside the same for an account with none, on the same server, the two
//!   asked in turn: p50, p99 and their ratio;
//! - the cost of recording one unit, each in its own transaction over one connection, in the
//!   same database: the counter's upsert (the store's `RECORD_USAGE`) beside the insert of the
//!   raw ledger it replaced (a table of the old schema, made for the run), in alternating blocks:
//!   mean and ratio.
//!
//! The busy account's counters are written as 10 million units spread over every day and meter
//! of the month leave them, and the bench checks that the statement counts exactly those units.
//!
//! Uses `INTENT_TEST_DATABASE_URL` when set, else starts a throwaway PostgreSQL with
//! `.ci/postgres` (PostgreSQL 15 under /usr/lib/postgresql/15/bin).
//!
//! Run: `cargo bench -p intent-server --bench statement`

use std::path::Path;
use std::time::{Duration, Instant};

use intent_server::store::Meter;
use intent_server::store::account::{RECORD_USAGE, counter_day};
use serde_json::Value;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection, PgConnection, SqliteConnection};

mod postgres;
#[allow(dead_code)]
#[path = "../tests/support/mod.rs"]
mod support;

use postgres::Postgres;

/// The month measured, and its bounds in Unix seconds.
const MONTH: &str = "2026-10";
const MONTH_START: i64 = 1_790_812_800;
const MONTH_END: i64 = 1_793_491_200;
/// Months of history before it, each as busy.
const MONTHS_BEFORE: i64 = 11;
/// Units metered in each month of the busy account.
const UNITS: i64 = 10_000_000;
/// Statements asked per account, after as many again to warm up.
const STATEMENTS: usize = 2_000;
/// Units recorded per way, in blocks of `BLOCK` taking turns.
const RECORDS: usize = 4_000;
const BLOCK: usize = 250;

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench());
}

async fn bench() {
    let sqlite = tempfile::tempdir().unwrap();
    engine("SQLite", sqlite.path(), &[], None).await;

    let postgres = Postgres::start();
    let database = postgres.database("statement_bench").await;
    let keys = tempfile::tempdir().unwrap();
    engine(
        "PostgreSQL",
        keys.path(),
        &["--database-url", &database],
        Some(&database),
    )
    .await;
}

/// A connection of the bench's own to the server's database.
enum Db {
    Sqlite(SqliteConnection),
    Postgres(PgConnection),
}

impl Db {
    /// The database of the data dir `data_dir`, or PostgreSQL's at `url`.
    async fn connect(data_dir: &Path, url: Option<&str>) -> Self {
        match url {
            None => {
                let options = SqliteConnectOptions::new().filename(data_dir.join("intent.db"));
                Self::Sqlite(SqliteConnection::connect_with(&options).await.unwrap())
            }
            Some(url) => Self::Postgres(PgConnection::connect(url).await.unwrap()),
        }
    }

    /// Runs `statements`, binding nothing.
    async fn run(&mut self, statements: &'static str) {
        match self {
            Db::Sqlite(db) => sqlx::raw_sql(statements).execute(db).await.map(drop),
            Db::Postgres(db) => sqlx::raw_sql(statements).execute(db).await.map(drop),
        }
        .unwrap();
    }

    /// Runs the insert `sql` with `values` bound in order.
    async fn insert(&mut self, sql: &'static str, values: &[Bind<'_>]) {
        macro_rules! bound {
            ($db:expr) => {{
                let mut query = sqlx::query(sql);
                for value in values {
                    query = match *value {
                        Bind::Text(text) => query.bind(text),
                        Bind::Number(number) => query.bind(number),
                    };
                }
                query.execute($db).await.map(drop)
            }};
        }
        match self {
            Db::Sqlite(db) => bound!(db),
            Db::Postgres(db) => bound!(db),
        }
        .unwrap();
    }

    /// The raw ledger's table as the engine's first migration made it, as `raw_ledger`.
    async fn create_raw_ledger(&mut self) {
        let table = match self {
            Db::Sqlite(_) => {
                "CREATE TABLE raw_ledger (
                     id      INTEGER PRIMARY KEY,
                     account TEXT    NOT NULL,
                     meter   TEXT    NOT NULL
                             CHECK (meter IN ('turn', 'build', 'simulation', 'commit')),
                     at      INTEGER NOT NULL
                 ) STRICT;
                 CREATE INDEX raw_ledger_by_account_time ON raw_ledger (account, at);"
            }
            Db::Postgres(_) => {
                "CREATE TABLE raw_ledger (
                     id      BIGSERIAL PRIMARY KEY,
                     account TEXT   NOT NULL,
                     meter   TEXT   NOT NULL
                             CHECK (meter IN ('turn', 'build', 'simulation', 'commit')),
                     at      BIGINT NOT NULL
                 );
                 CREATE INDEX raw_ledger_by_account_time ON raw_ledger (account, at);"
            }
        };
        self.run(table).await;
    }
}

/// A value bound to a statement.
enum Bind<'a> {
    Text(&'a str),
    Number(i64),
}

/// Both measures on one engine: the server on `data_dir` with `args`, its database PostgreSQL's
/// at `url` or else the data dir's SQLite file.
async fn engine(name: &str, data_dir: &Path, args: &[&str], url: Option<&str>) {
    let server = support::Server::start(data_dir, "127.0.0.1:0", args);
    let mut db = Db::connect(data_dir, url).await;
    seed(&mut db, "busy").await;
    let http = reqwest::Client::new();
    let token = |account| {
        let resource = format!("{}/v1/account", server.base);
        support::token(
            support::BINARY.as_ref(),
            data_dir,
            &resource,
            account,
            "account:usage:read",
        )
    };
    let (idle, busy) = (token("idle"), token("busy"));
    assert_eq!(units(&statement(&http, &server.base, &busy).await), UNITS);
    assert_eq!(units(&statement(&http, &server.base, &idle).await), 0);
    let (mut none, mut many) = (Vec::new(), Vec::new());
    for round in 0..2 * STATEMENTS {
        let (idle_took, busy_took) = (
            timed(statement(&http, &server.base, &idle)).await,
            timed(statement(&http, &server.base, &busy)).await,
        );
        if round >= STATEMENTS {
            none.push(idle_took);
            many.push(busy_took);
        }
    }
    drop(server);
    none.sort();
    many.sort();
    let (p50_none, p50_many) = (percentile(&none, 0.5), percentile(&many, 0.5));
    println!(
        "{name:<11} statement, no units        p50 {:>6.3} ms  p99 {:>6.3} ms",
        ms(p50_none),
        ms(percentile(&none, 0.99)),
    );
    println!(
        "{name:<11} statement, 10M units/month p50 {:>6.3} ms  p99 {:>6.3} ms  {:.2}x none",
        ms(p50_many),
        ms(percentile(&many, 0.99)),
        p50_many.as_secs_f64() / p50_none.as_secs_f64(),
    );

    let (raw, counter) = recording(&mut db).await;
    println!(
        "{name:<11} recording a unit: raw ledger insert {:>6.1} µs  counter upsert {:>6.1} µs  \
         {:.2}x the insert",
        raw * 1e6,
        counter * 1e6,
        counter / raw,
    );
}

/// Writes `account`'s counters as `UNITS` units in each month up to `MONTH`, spread over every
/// day and meter, leave them.
async fn seed(db: &mut Db, account: &str) {
    const DAY: i64 = 86_400;
    let meters = Meter::ALL.len() as i64;
    let first = MONTH_START - MONTHS_BEFORE * 31 * DAY;
    let counters = (MONTH_END - MONTH_START) / DAY * meters;
    db.run("BEGIN").await;
    for day in (first..MONTH_END).step_by(DAY as usize) {
        for (index, meter) in Meter::ALL.into_iter().enumerate() {
            // In the measured month, the first counters take the division's remainder.
            let nth = (day - MONTH_START) / DAY * meters + index as i64;
            let extra = i64::from((0..UNITS % counters).contains(&nth));
            let units = UNITS / counters + extra;
            db.insert(
                "INSERT INTO usage_counters (account, day, meter, units) VALUES ($1, $2, $3, $4)",
                &[
                    Bind::Text(account),
                    Bind::Number(day),
                    Bind::Text(meter.as_str()),
                    Bind::Number(units),
                ],
            )
            .await;
        }
    }
    db.run("COMMIT").await;
}

/// `MONTH`'s statement as `token`'s account.
async fn statement(http: &reqwest::Client, base: &str, token: &str) -> Value {
    let path = format!("/v1/account/statement?period={MONTH}");
    support::get(http, base, token, &path).await
}

/// The units a statement counts, over its lines.
fn units(statement: &Value) -> i64 {
    let lines = statement["lines"].as_array().unwrap();
    lines
        .iter()
        .map(|line| line["quantity"].as_i64().unwrap())
        .sum()
}

/// The mean seconds of recording one unit: the raw ledger's insert and the counter's upsert,
/// each its own transaction, over `db`.
async fn recording(db: &mut Db) -> (f64, f64) {
    // The raw ledger's schema and statement, as they were before the counters.
    db.create_raw_ledger().await;
    let (mut raw, mut counter) = (Duration::ZERO, Duration::ZERO);
    // Each block a second later than the last, all in one day's counter.
    for at in (MONTH_START..).take(RECORDS / BLOCK) {
        let started = Instant::now();
        for _ in 0..BLOCK {
            db.insert(
                "INSERT INTO raw_ledger (account, meter, at) VALUES ($1, $2, $3)",
                &[Bind::Text("recorder"), Bind::Text("turn"), Bind::Number(at)],
            )
            .await;
        }
        raw += started.elapsed();
        let started = Instant::now();
        for _ in 0..BLOCK {
            let unit = [
                Bind::Text("recorder"),
                Bind::Number(counter_day(at)),
                Bind::Text("turn"),
            ];
            db.insert(RECORD_USAGE, &unit).await;
        }
        counter += started.elapsed();
    }
    let per_unit = |total: Duration| total.as_secs_f64() / RECORDS as f64;
    (per_unit(raw), per_unit(counter))
}

async fn timed(request: impl Future<Output = Value>) -> Duration {
    let started = Instant::now();
    request.await;
    started.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}
