//! Pipeline: the committed Builds of each chain, in commit order, which every process replays
//! onto its devnet.

use super::account::{Meter, record_usage};
use super::engine::sql;
use super::rows::CommitRow;
use super::{Result, Store};
use crate::ids::AccountId;

/// A Build to record as committed.
#[derive(Debug, Clone, Copy)]
pub struct NewCommit<'a> {
    /// The chain, `evm` or `svm`.
    pub chain: &'a str,
    /// The seq of the last commit on `chain` the caller's state includes.
    pub applied_through: i64,
    /// The Build's digest.
    pub digest: &'a str,
    /// The committing account.
    pub account: &'a AccountId,
    /// The Build's actions as JSON.
    pub actions: &'a str,
    /// Unix seconds now.
    pub at: i64,
}

/// What recording a commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitRecorded {
    /// Recorded at this seq.
    Done(i64),
    /// Another commit on the chain came first: catch up and re-simulate.
    Behind,
    /// The Build was committed before.
    Duplicate,
}

impl Store {
    /// Records a committed Build's actions (JSON) on `chain`, if the last commit on that chain
    /// is still `applied_through` (the one the caller's devnet state ends at), with one unit of
    /// the `commit` meter for its account, in one transaction. Commits of one chain are
    /// serialized across every process of the database.
    pub async fn record_commit(&self, commit: &NewCommit<'_>) -> Result<CommitRecorded> {
        let mut tx = self.db.begin().await?;
        tx.lock(&format!("intent.devnet.{}", commit.chain)).await?;
        let (last,): (i64,) = tx
            .fetch_one(
                sql("SELECT COALESCE(MAX(seq), 0) FROM commits WHERE chain = $1")
                    .bind(commit.chain),
            )
            .await?;
        if last != commit.applied_through {
            return Ok(CommitRecorded::Behind);
        }
        let seq: Option<(i64,)> = tx
            .fetch_optional(
                sql(
                    "INSERT INTO commits (chain, digest, account, actions, committed_at)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (digest) DO NOTHING RETURNING seq",
                )
                .bind(commit.chain)
                .bind(commit.digest)
                .bind(commit.account.as_str())
                .bind(commit.actions)
                .bind(commit.at),
            )
            .await?;
        let Some((seq,)) = seq else {
            return Ok(CommitRecorded::Duplicate);
        };
        tx.execute(record_usage(commit.account, Meter::Commit, commit.at))
            .await?;
        tx.commit().await?;
        Ok(CommitRecorded::Done(seq))
    }

    /// The commits on `chain` after `after`, in commit order, as (seq, actions JSON).
    pub async fn commits_after(&self, chain: &str, after: i64) -> Result<Vec<(i64, String)>> {
        let rows: Vec<CommitRow> = self
            .db
            .fetch_all(
                sql("SELECT seq, actions FROM commits WHERE chain = $1 AND seq > $2 ORDER BY seq")
                    .bind(chain)
                    .bind(after),
            )
            .await?;
        Ok(rows.into_iter().map(|row| (row.seq, row.actions)).collect())
    }
}
