//! The embedded engine: one SQLite file in the data dir, WAL journal, `synchronous=FULL`.

use std::path::Path;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::{Error, Result};

/// Opens (creating it if needed) `intent.db` in `data_dir` and applies the migrations. The file
/// has one process, this one: every turn lease of an earlier process has ended.
pub(super) async fn open(data_dir: &Path) -> Result<SqlitePool> {
    let options = SqliteConnectOptions::new()
        .filename(data_dir.join(super::SQLITE_FILE))
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(5));
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await?;
    super::migrations::sqlite()
        .await
        .map_err(Error::Migrate)?
        .run(&pool)
        .await
        .map_err(Error::Migrate)?;
    sqlx::query("UPDATE turns SET lease_until = 0 WHERE state = 'processing'")
        .execute(&pool)
        .await?;
    Ok(pool)
}
