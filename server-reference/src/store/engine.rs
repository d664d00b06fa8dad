//! The two engines behind one [`Store`](super::Store). Every statement is written once, in SQL
//! both accept (numbered `$N` placeholders, which sqlx's SQLite driver binds by number, `TRUE`
//! and `FALSE`, `ON CONFLICT` upserts, `RETURNING`), and runs on whichever engine the store
//! opened. What really differs lives here:
//! - a write transaction: SQLite takes its one write lock at `BEGIN IMMEDIATE`; PostgreSQL
//!   locks the rows a write reads (`FOR UPDATE`, see [`Sql::for_update`]) and takes
//!   transaction-scoped advisory locks ([`Tx::lock`]);
//! - notifications: PostgreSQL tells the other processes what a transaction wrote
//!   ([`Tx::notify`]); one SQLite file has one process, which knows already.

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, PgRow};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{
    Arguments, AssertSqlSafe, Database, Encode, FromRow, PgConnection, Postgres, SqlSafeStr,
    SqlStr, Sqlite, SqliteConnection, Transaction, Type,
};

use super::postgres::EVENTS_CHANNEL;
use super::{Error, Result};
use crate::metrics::{self, StoreCall};

/// A pool of either engine.
#[derive(Clone)]
pub(super) enum Db {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// A row type both engines decode.
pub(super) trait Row:
    for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{
}

impl<T> Row for T where T: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{}

/// A value bound to a placeholder.
pub(super) enum Value {
    Int(i64),
    Text(Option<String>),
    Bool(Option<bool>),
    Bytes(Vec<u8>),
}

impl From<i64> for Value {
    fn from(value: i64) -> Self {
        Self::Int(value)
    }
}

impl From<&str> for Value {
    fn from(value: &str) -> Self {
        Self::Text(Some(value.to_owned()))
    }
}

impl From<&String> for Value {
    fn from(value: &String) -> Self {
        Self::Text(Some(value.clone()))
    }
}

impl From<String> for Value {
    fn from(value: String) -> Self {
        Self::Text(Some(value))
    }
}

impl From<Option<&str>> for Value {
    fn from(value: Option<&str>) -> Self {
        Self::Text(value.map(str::to_owned))
    }
}

impl From<bool> for Value {
    fn from(value: bool) -> Self {
        Self::Bool(Some(value))
    }
}

impl From<Option<bool>> for Value {
    fn from(value: Option<bool>) -> Self {
        Self::Bool(value)
    }
}

impl From<&[u8]> for Value {
    fn from(value: &[u8]) -> Self {
        Self::Bytes(value.to_vec())
    }
}

/// A statement with its bound values, for either engine.
pub(super) struct Sql {
    text: &'static str,
    values: Vec<Value>,
    for_update: bool,
}

/// The statement `text`, with nothing bound yet.
pub(super) fn sql(text: &'static str) -> Sql {
    Sql {
        text,
        values: Vec::new(),
        for_update: false,
    }
}

impl Sql {
    /// Binds the next placeholder.
    pub fn bind(mut self, value: impl Into<Value>) -> Self {
        self.values.push(value.into());
        self
    }

    /// Locks the rows this `SELECT` reads until the transaction ends: `FOR UPDATE` on
    /// PostgreSQL; on SQLite the write transaction holds the database's one write lock already.
    pub fn for_update(mut self) -> Self {
        self.for_update = true;
        self
    }

    fn arguments<DB: Database>(self) -> Result<DB::Arguments>
    where
        for<'t> i64: Encode<'t, DB> + Type<DB>,
        for<'t> Option<String>: Encode<'t, DB> + Type<DB>,
        for<'t> Option<bool>: Encode<'t, DB> + Type<DB>,
        for<'t> Vec<u8>: Encode<'t, DB> + Type<DB>,
    {
        let mut arguments = DB::Arguments::default();
        for value in self.values {
            match value {
                Value::Int(value) => arguments.add(value),
                Value::Text(value) => arguments.add(value),
                Value::Bool(value) => arguments.add(value),
                Value::Bytes(value) => arguments.add(value),
            }
            .map_err(sqlx::Error::Encode)?;
        }
        Ok(arguments)
    }

    async fn execute(self, conn: Conn<'_>) -> Result<u64> {
        metrics::store(StoreCall::Statement, self.execute_on(conn)).await
    }

    async fn execute_on(self, conn: Conn<'_>) -> Result<u64> {
        let done = match conn {
            Conn::Sqlite(conn) => sqlx::query_with(self.text, self.arguments::<Sqlite>()?)
                .execute(conn)
                .await?
                .rows_affected(),
            Conn::Postgres(conn) => {
                let text = self.postgres_text();
                sqlx::query_with(text, self.arguments::<Postgres>()?)
                    .execute(conn)
                    .await?
                    .rows_affected()
            }
        };
        Ok(done)
    }

    async fn fetch_all<R: Row>(self, conn: Conn<'_>) -> Result<Vec<R>> {
        metrics::store(StoreCall::Statement, self.fetch_all_on(conn)).await
    }

    async fn fetch_all_on<R: Row>(self, conn: Conn<'_>) -> Result<Vec<R>> {
        let rows = match conn {
            Conn::Sqlite(conn) => {
                sqlx::query_as_with(self.text, self.arguments::<Sqlite>()?)
                    .fetch_all(conn)
                    .await?
            }
            Conn::Postgres(conn) => {
                let text = self.postgres_text();
                sqlx::query_as_with(text, self.arguments::<Postgres>()?)
                    .fetch_all(conn)
                    .await?
            }
        };
        Ok(rows)
    }

    async fn fetch_optional<R: Row>(self, conn: Conn<'_>) -> Result<Option<R>> {
        metrics::store(StoreCall::Statement, self.fetch_optional_on(conn)).await
    }

    async fn fetch_optional_on<R: Row>(self, conn: Conn<'_>) -> Result<Option<R>> {
        let row = match conn {
            Conn::Sqlite(conn) => {
                sqlx::query_as_with(self.text, self.arguments::<Sqlite>()?)
                    .fetch_optional(conn)
                    .await?
            }
            Conn::Postgres(conn) => {
                let text = self.postgres_text();
                sqlx::query_as_with(text, self.arguments::<Postgres>()?)
                    .fetch_optional(conn)
                    .await?
            }
        };
        Ok(row)
    }

    /// The text PostgreSQL runs: with the row locks [`Sql::for_update`] asks for.
    fn postgres_text(&self) -> SqlStr {
        if self.for_update {
            AssertSqlSafe(format!("{} FOR UPDATE", self.text)).into_sql_str()
        } else {
            self.text.into_sql_str()
        }
    }
}

/// A connection of either engine, where a statement runs.
enum Conn<'c> {
    Sqlite(&'c mut SqliteConnection),
    Postgres(&'c mut PgConnection),
}

/// A connection taken from the pool for one statement.
enum Pooled {
    Sqlite(PoolConnection<Sqlite>),
    Postgres(PoolConnection<Postgres>),
}

impl Pooled {
    fn conn(&mut self) -> Conn<'_> {
        match self {
            Self::Sqlite(conn) => Conn::Sqlite(conn),
            Self::Postgres(conn) => Conn::Postgres(conn),
        }
    }
}

impl Db {
    async fn acquire(&self) -> Result<Pooled> {
        metrics::store(StoreCall::Acquire, async {
            Ok(match self {
                Self::Sqlite(pool) => Pooled::Sqlite(pool.acquire().await?),
                Self::Postgres(pool) => Pooled::Postgres(pool.acquire().await?),
            })
        })
        .await
    }

    /// Runs `sql` on a pooled connection; the rows it changed.
    pub async fn execute(&self, sql: Sql) -> Result<u64> {
        sql.execute(self.acquire().await?.conn()).await
    }

    /// Runs `sql` on a pooled connection; every row.
    pub async fn fetch_all<R: Row>(&self, sql: Sql) -> Result<Vec<R>> {
        sql.fetch_all(self.acquire().await?.conn()).await
    }

    /// Runs `sql` on a pooled connection; the first row, if any.
    pub async fn fetch_optional<R: Row>(&self, sql: Sql) -> Result<Option<R>> {
        sql.fetch_optional(self.acquire().await?.conn()).await
    }

    /// Runs `sql` on a pooled connection; the one row it answers.
    pub async fn fetch_one<R: Row>(&self, sql: Sql) -> Result<R> {
        self.fetch_optional(sql)
            .await?
            .ok_or(Error::Database(sqlx::Error::RowNotFound))
    }

    /// A transaction that reads and writes, holding SQLite's write lock from its start.
    pub async fn begin(&self) -> Result<Tx> {
        metrics::store(StoreCall::Begin, async {
            Ok(match self {
                Self::Sqlite(pool) => Tx::Sqlite(pool.begin_with("BEGIN IMMEDIATE").await?),
                Self::Postgres(pool) => Tx::Postgres(pool.begin().await?),
            })
        })
        .await
    }
}

/// A transaction of either engine; dropped without [`Tx::commit`], it rolls back.
pub(super) enum Tx {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>),
}

impl Tx {
    fn conn(&mut self) -> Conn<'_> {
        match self {
            Self::Sqlite(tx) => Conn::Sqlite(tx),
            Self::Postgres(tx) => Conn::Postgres(tx),
        }
    }

    /// Runs `sql` in the transaction; the rows it changed.
    pub async fn execute(&mut self, sql: Sql) -> Result<u64> {
        sql.execute(self.conn()).await
    }

    /// Runs `sql` in the transaction; the first row, if any.
    pub async fn fetch_optional<R: Row>(&mut self, sql: Sql) -> Result<Option<R>> {
        sql.fetch_optional(self.conn()).await
    }

    /// Runs `sql` in the transaction; the one row it answers.
    pub async fn fetch_one<R: Row>(&mut self, sql: Sql) -> Result<R> {
        self.fetch_optional(sql)
            .await?
            .ok_or(Error::Database(sqlx::Error::RowNotFound))
    }

    /// Serializes this transaction with every other one that takes the lock `name`, across the
    /// processes of a PostgreSQL database, until it ends. SQLite's write transaction holds the
    /// whole database already.
    pub async fn lock(&mut self, name: &str) -> Result<()> {
        if let Self::Postgres(_) = self {
            self.execute(sql("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))").bind(name))
                .await?;
        }
        Ok(())
    }

    /// Tells every process of a PostgreSQL database `payload` on
    /// [`EVENTS_CHANNEL`] when the transaction commits.
    pub async fn notify(&mut self, payload: String) -> Result<()> {
        if let Self::Postgres(_) = self {
            self.execute(
                sql("SELECT pg_notify($1, $2)")
                    .bind(EVENTS_CHANNEL)
                    .bind(payload),
            )
            .await?;
        }
        Ok(())
    }

    /// Commits the transaction.
    pub async fn commit(self) -> Result<()> {
        metrics::store(StoreCall::Commit, async {
            match self {
                Self::Sqlite(tx) => tx.commit().await?,
                Self::Postgres(tx) => tx.commit().await?,
            }
            Ok(())
        })
        .await
    }
}
