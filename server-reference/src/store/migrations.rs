//! The schema migrations of both engines, compiled into the binary as SQL text. sqlx's
//! `migrate!` macro would do the same, at the cost of compiling both database drivers a second
//! time for the host; this is the list it would read, in version order.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

/// One migration file: its version, its description (the file name's words) and its SQL.
type MigrationFile = (i64, &'static str, &'static str);

const SQLITE: &[MigrationFile] = &[
    (
        1,
        "account",
        include_str!("../../migrations/sqlite/0001_account.sql"),
    ),
    (
        2,
        "oauth",
        include_str!("../../migrations/sqlite/0002_oauth.sql"),
    ),
    (
        3,
        "agent",
        include_str!("../../migrations/sqlite/0003_agent.sql"),
    ),
    (
        4,
        "pipeline",
        include_str!("../../migrations/sqlite/0004_pipeline.sql"),
    ),
    (
        5,
        "idempotent answers",
        include_str!("../../migrations/sqlite/0005_idempotent_answers.sql"),
    ),
    (
        6,
        "shared devnet and leases",
        include_str!("../../migrations/sqlite/0006_shared_devnet_and_leases.sql"),
    ),
    (
        7,
        "usage counters",
        include_str!("../../migrations/sqlite/0007_usage_counters.sql"),
    ),
    (
        8,
        "registered clients",
        include_str!("../../migrations/sqlite/0008_registered_clients.sql"),
    ),
];

const POSTGRES: &[MigrationFile] = &[
    (
        1,
        "schema",
        include_str!("../../migrations/postgres/0001_schema.sql"),
    ),
    (
        2,
        "usage counters",
        include_str!("../../migrations/postgres/0002_usage_counters.sql"),
    ),
    (
        3,
        "registered clients",
        include_str!("../../migrations/postgres/0003_registered_clients.sql"),
    ),
];

/// The migrations of the embedded SQLite store.
pub async fn sqlite() -> Result<Migrator, sqlx::migrate::MigrateError> {
    Migrator::new(Embedded(SQLITE)).await
}

/// The migrations of the shared PostgreSQL store.
pub async fn postgres() -> Result<Migrator, sqlx::migrate::MigrateError> {
    Migrator::new(Embedded(POSTGRES)).await
}

/// A list of migrations held in the binary.
#[derive(Debug)]
struct Embedded(&'static [MigrationFile]);

impl MigrationSource<'static> for Embedded {
    fn resolve(
        self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<Migration>, sqlx::error::BoxDynError>> + Send>>
    {
        let migrations = self
            .0
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    Cow::Borrowed(description),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect();
        Box::pin(std::future::ready(Ok(migrations)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `NNNN_words_of_description.sql` as the `(version, description)` sqlx reads from it.
    fn files(engine: &str) -> Vec<(i64, String)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("migrations")
            .join(engine);
        let mut files: Vec<(i64, String)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .map(|name| {
                let stem = name
                    .strip_suffix(".sql")
                    .expect("a migration is a .sql file");
                let (version, words) = stem.split_once('_').expect("NNNN_description.sql");
                (version.parse().unwrap(), words.replace('_', " "))
            })
            .collect();
        files.sort();
        files
    }

    #[test]
    fn every_migration_file_is_embedded_in_order() {
        for (engine, steps) in [("sqlite", SQLITE), ("postgres", POSTGRES)] {
            let embedded: Vec<(i64, String)> = steps
                .iter()
                .map(|&(version, description, _)| (version, description.to_owned()))
                .collect();
            assert_eq!(embedded, files(engine), "migrations/{engine}");
        }
    }
}
