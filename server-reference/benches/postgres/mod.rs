//! A PostgreSQL server for the benchmarks that need one: `INTENT_TEST_DATABASE_URL`'s when set,
//! else a throwaway PostgreSQL 15 started with `.ci/postgres`.

use std::path::Path;

use sqlx::Connection;

/// A PostgreSQL server for the run, stopped when dropped if the run started it.
pub struct Postgres {
    url: String,
    started: Option<tempfile::TempDir>,
}

impl Postgres {
    /// `INTENT_TEST_DATABASE_URL`'s server, else a throwaway one started with `.ci/postgres`.
    pub fn start() -> Self {
        if let Ok(url) = std::env::var("INTENT_TEST_DATABASE_URL") {
            return Self { url, started: None };
        }
        let dir = tempfile::tempdir().unwrap();
        let output = std::process::Command::new(workspace().join(".ci/postgres"))
            .arg("start")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let url = String::from_utf8(output.stdout).unwrap().trim().to_owned();
        Self {
            url,
            started: Some(dir),
        }
    }

    /// A new, empty database.
    pub async fn database(&self, name: &str) -> String {
        let mut admin = sqlx::PgConnection::connect(&self.url).await.unwrap();
        for sql in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut admin)
                .await
                .unwrap();
        }
        let mut url = reqwest::Url::parse(&self.url).unwrap();
        url.set_path(name);
        url.to_string()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(dir) = &self.started {
            let _ = std::process::Command::new(workspace().join(".ci/postgres"))
                .arg("stop")
                .arg(dir.path())
                .status();
        }
    }
}

fn workspace() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}
