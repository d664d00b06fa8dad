//! The store, method by method, on both engines: SQLite in a temporary data dir always, and
//! PostgreSQL (a new database on the server `INTENT_TEST_DATABASE_URL` names) when it is set, as
//! in CI's PostgreSQL pass.

use intent_models::TurnState;
use intent_server::ids::AccountId;
use intent_server::store::agent::{
    Append, Appended, Bounds, IdempotencyBegin, NewAction, Resolution, Resolved, SessionRecord,
    TurnStarted,
};
use intent_server::store::{
    Authorization, AuthorizationCode, CommitRecorded, CredentialPresence, DeviceGrant,
    DeviceStatus, Meter, NewCommit, Purged, RefreshUse, Runner, Store,
};
use intent_testkit::{DATABASE_ENV, new_database};
use serde_json::{Map, Value, json};

/// Where a store keeps its data.
enum Engine {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

impl Engine {
    /// SQLite, and PostgreSQL when [`DATABASE_ENV`] is set, each empty.
    async fn each() -> Vec<Engine> {
        let mut engines = vec![Engine::Sqlite(tempfile::tempdir().unwrap())];
        if let Ok(server) = std::env::var(DATABASE_ENV) {
            engines.push(Engine::Postgres(new_database(&server).await));
        }
        engines
    }

    /// A store on this engine whose turns are leased to `runner` for ten seconds.
    async fn open(&self, runner: &str) -> Store {
        let runner = Runner {
            id: runner.into(),
            lease_ms: 10_000,
        };
        match self {
            Engine::Sqlite(dir) => Store::sqlite(dir.path(), runner).await.unwrap(),
            Engine::Postgres(url) => Store::postgres(url, runner).await.unwrap(),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Engine::Sqlite(_) => "sqlite",
            Engine::Postgres(_) => "postgres",
        }
    }
}

#[tokio::test]
async fn installs_are_kept_from_the_first_and_per_account() {
    for engine in Engine::each().await {
        let store = engine.open("a").await;
        store.ping().await.unwrap();
        // Only a database several processes share has others to hear and relay to.
        let shared = matches!(engine, Engine::Postgres(_));
        assert_eq!(store.shared().is_some(), shared, "{}", engine.name());
        assert_eq!(
            store
                .install(&AccountId::verified("alice"), 1, 100)
                .await
                .unwrap(),
            100
        );
        assert_eq!(
            store
                .install(&AccountId::verified("alice"), 1, 200)
                .await
                .unwrap(),
            100
        );
        assert_eq!(
            store
                .install(&AccountId::verified("alice"), 2, 300)
                .await
                .unwrap(),
            300
        );
        assert_eq!(
            store
                .installations(&AccountId::verified("alice"))
                .await
                .unwrap(),
            vec![(1, 100), (2, 300)],
            "{}",
            engine.name()
        );
        assert!(
            store
                .installations(&AccountId::verified("bob"))
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            !store
                .uninstall(&AccountId::verified("bob"), 1)
                .await
                .unwrap()
        );
        assert!(
            store
                .uninstall(&AccountId::verified("alice"), 1)
                .await
                .unwrap()
        );
        assert!(
            !store
                .uninstall(&AccountId::verified("alice"), 1)
                .await
                .unwrap()
        );
    }
}

#[tokio::test]
async fn credentials_are_replaced_by_name_and_outlive_the_process() {
    for engine in Engine::each().await {
        let store = engine.open("a").await;
        store
            .save_credential(&AccountId::verified("alice"), 1, "API_KEY", b"one", 5)
            .await
            .unwrap();
        store
            .save_credential(&AccountId::verified("alice"), 1, "API_KEY", b"two", 6)
            .await
            .unwrap();
        store
            .save_credential(&AccountId::verified("alice"), 1, "SECRET", b"s", 7)
            .await
            .unwrap();
        drop(store);
        let store = engine.open("b").await;
        let presence = |name: &str, updated_at| CredentialPresence {
            name: name.into(),
            updated_at,
        };
        assert_eq!(
            store
                .credentials(&AccountId::verified("alice"), 1)
                .await
                .unwrap(),
            vec![presence("API_KEY", 6), presence("SECRET", 7)],
            "{}",
            engine.name()
        );
        assert!(
            store
                .credentials(&AccountId::verified("bob"), 1)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            !store
                .remove_credential(&AccountId::verified("bob"), 1, "SECRET")
                .await
                .unwrap()
        );
        assert!(
            store
                .remove_credential(&AccountId::verified("alice"), 1, "SECRET")
                .await
                .unwrap()
        );
        assert_eq!(
            store
                .credentials(&AccountId::verified("alice"), 1)
                .await
                .unwrap()
                .len(),
            1
        );
    }
}

/// The units the raw ledger's rule counted: per meter, those recorded with `from <= at < to`.
fn counted(
    recorded: &[(&str, Meter, i64)],
    account: &str,
    from: i64,
    to: i64,
) -> Vec<(Meter, i64)> {
    let mut counts = std::collections::BTreeMap::new();
    for &(_, meter, at) in recorded.iter().filter(|(a, ..)| *a == account) {
        if (from..to).contains(&at) {
            *counts.entry(meter).or_insert(0) += 1;
        }
    }
    counts.into_iter().collect()
}

#[tokio::test]
async fn usage_counts_per_meter_inside_the_period_only_as_the_raw_ledger_did() {
    const DAY: i64 = 86_400;
    // Two 30-day periods back to back, of whole days as statements' months are.
    let start = 20_400 * DAY;
    let (middle, end) = (start + 30 * DAY, start + 60 * DAY);
    let mut recorded = Vec::new();
    for at in [start - 1, start, middle - 1, middle, end - 1, end] {
        recorded.push(("alice", Meter::Turn, at));
    }
    // Units spread over the periods and a day either side, from a fixed sequence.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..400 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let at = start - DAY + (state >> 33) as i64 % (62 * DAY);
        let meter = Meter::ALL[(state >> 20) as usize % Meter::ALL.len()];
        let account = if state >> 63 == 0 { "alice" } else { "bob" };
        recorded.push((account, meter, at));
    }
    for engine in Engine::each().await {
        let store = engine.open("a").await;
        for &(account, meter, at) in &recorded {
            store
                .record_usage(&AccountId::verified(account), meter, at)
                .await
                .unwrap();
        }
        for account in ["alice", "bob"] {
            for (from, to) in [(start, middle), (middle, end), (start, end)] {
                let mut usage = store
                    .usage(&AccountId::verified(account), from, to)
                    .await
                    .unwrap();
                usage.sort();
                assert_eq!(
                    usage,
                    counted(&recorded, account, from, to),
                    "{}: {account} in {from}..{to}",
                    engine.name()
                );
            }
        }
    }
}

#[tokio::test]
async fn a_commit_is_recorded_behind_the_last_one_with_its_usage_or_not_at_all() {
    for engine in Engine::each().await {
        let store = engine.open("a").await;
        let alice = AccountId::verified("alice");
        let commit = |digest, applied_through| NewCommit {
            chain: "evm",
            applied_through,
            digest,
            account: &alice,
            actions: "[1]",
            at: 15,
        };
        let first = store.record_commit(&commit("0x01", 0)).await.unwrap();
        assert_eq!(first, CommitRecorded::Done(1), "{}", engine.name());
        // A state that does not include commit 1, and a digest committed already.
        let behind = store.record_commit(&commit("0x02", 0)).await.unwrap();
        assert_eq!(behind, CommitRecorded::Behind);
        let again = store.record_commit(&commit("0x01", 1)).await.unwrap();
        assert_eq!(again, CommitRecorded::Duplicate);
        // PostgreSQL's sequence may skip the number the refused duplicate drew.
        let CommitRecorded::Done(second) = store.record_commit(&commit("0x02", 1)).await.unwrap()
        else {
            panic!("{}: the second commit is refused", engine.name());
        };
        assert!(second > 1);
        assert_eq!(
            store
                .usage(&AccountId::verified("alice"), 0, 100)
                .await
                .unwrap(),
            vec![(Meter::Commit, 2)]
        );
        assert_eq!(
            store.commits_after("evm", 1).await.unwrap(),
            vec![(second, "[1]".to_owned())]
        );
        assert!(store.commits_after("svm", 0).await.unwrap().is_empty());
    }
}

/// What the grants of these tests authorize.
fn grant() -> Authorization {
    Authorization {
        client_id: "c".into(),
        account: "alice".into(),
        scopes: "agent:read".into(),
        resource: "http://h/v1/agent".into(),
    }
}

#[tokio::test]
async fn an_authorization_code_is_taken_once() {
    for engine in Engine::each().await {
        let store = engine.open("a").await;
        let code = AuthorizationCode {
            grant: grant(),
            redirect_uri: "http://localhost/cb".into(),
            code_challenge: "challenge".into(),
            expires_at: 100,
        };
        store.save_code("hash", &code).await.unwrap();
        let taken = store.take_code("hash").await.unwrap().expect("the code");
        assert_eq!(taken.grant, grant(), "{}", engine.name());
        assert_eq!(
            (taken.redirect_uri, taken.code_challenge, taken.expires_at),
            (code.redirect_uri, code.code_challenge, 100)
        );
        assert!(store.take_code("hash").await.unwrap().is_none());
        assert!(store.take_code("other").await.unwrap().is_none());
    }
}

#[tokio::test]
async fn a_device_grant_is_decided_once_polled_slowed_and_consumed_once() {
    for engine in Engine::each().await {
        let store = engine.open("a").await;
        let pending = DeviceGrant {
            user_code: "ABCD-EFGH".into(),
            client_id: "c".into(),
            scopes: "agent:read".into(),
            resource: "http://h/v1/agent".into(),
            account: None,
            status: DeviceStatus::Pending,
            interval_secs: 5,
            last_poll_ms: None,
            expires_at: 100,
        };
        store.save_device_grant("device", &pending).await.unwrap();
        let found = store.device_grant_by_user_code("ABCD-EFGH").await.unwrap();
        assert_eq!(
            found.map(|grant| grant.status),
            Some(DeviceStatus::Pending),
            "{}",
            engine.name()
        );
        // The poll answers the grant as it was before it.
        let polled = store.poll_device_grant("device", 1_000).await.unwrap();
        assert_eq!(polled.unwrap().last_poll_ms, None);
        store.slow_device_grant("device", 5).await.unwrap();
        let polled = store.poll_device_grant("device", 2_000).await.unwrap();
        let polled = polled.unwrap();
        assert_eq!(
            (polled.last_poll_ms, polled.interval_secs),
            (Some(1_000), 10)
        );
        assert!(!store.consume_device_grant("device").await.unwrap());
        // Expired at 100: too late to decide.
        assert!(
            !store
                .decide_device_grant("ABCD-EFGH", Some("alice"), 100)
                .await
                .unwrap()
        );
        assert!(
            store
                .decide_device_grant("ABCD-EFGH", Some("alice"), 99)
                .await
                .unwrap()
        );
        assert!(
            !store
                .decide_device_grant("ABCD-EFGH", None, 99)
                .await
                .unwrap()
        );
        let approved = store.poll_device_grant("device", 3_000).await.unwrap();
        let approved = approved.unwrap();
        assert_eq!(approved.status, DeviceStatus::Approved);
        assert_eq!(approved.account.as_deref(), Some("alice"));
        assert!(store.consume_device_grant("device").await.unwrap());
        assert!(!store.consume_device_grant("device").await.unwrap());
        assert!(store.poll_device_grant("none", 0).await.unwrap().is_none());
    }
}

#[tokio::test]
async fn a_replayed_refresh_token_revokes_its_family_for_good() {
    for engine in Engine::each().await {
        let store = engine.open("a").await;
        let grant = grant();
        assert!(
            store
                .save_refresh_token("first", "fam", &grant, 100)
                .await
                .unwrap()
        );
        let rotated = store
            .use_refresh_token("first", &|_, _| true)
            .await
            .unwrap();
        assert!(
            matches!(rotated, RefreshUse::Rotated { ref family, expires_at: 100, .. } if family == "fam"),
            "{}: {rotated:?}",
            engine.name()
        );
        assert!(
            store
                .save_refresh_token("second", "fam", &grant, 100)
                .await
                .unwrap()
        );
        assert!(matches!(
            store
                .use_refresh_token("first", &|_, _| true)
                .await
                .unwrap(),
            RefreshUse::Replayed
        ));
        let second = store
            .use_refresh_token("second", &|_, _| true)
            .await
            .unwrap();
        assert!(matches!(second, RefreshUse::Replayed), "family revoked");
        // A rotation that finishes after the replay must not revive the family.
        assert!(
            !store
                .save_refresh_token("third", "fam", &grant, 100)
                .await
                .unwrap()
        );
        assert!(matches!(
            store
                .use_refresh_token("third", &|_, _| true)
                .await
                .unwrap(),
            RefreshUse::Unknown
        ));
        // Revoked on purpose: the same.
        assert!(
            store
                .save_refresh_token("other", "fam2", &grant, 100)
                .await
                .unwrap()
        );
        store.revoke_refresh_family("fam2").await.unwrap();
        assert!(matches!(
            store
                .use_refresh_token("other", &|_, _| true)
                .await
                .unwrap(),
            RefreshUse::Replayed
        ));
    }
}

#[tokio::test]
async fn a_refused_refresh_token_stays_usable() {
    for engine in Engine::each().await {
        let store = engine.open("a").await;
        assert!(
            store
                .save_refresh_token("t", "fam", &grant(), 100)
                .await
                .unwrap()
        );
        let wrong = store
            .use_refresh_token("t", &|g, _| g.resource == "http://h/v1/account")
            .await
            .unwrap();
        assert!(
            matches!(wrong, RefreshUse::Refused { .. }),
            "{}",
            engine.name()
        );
        let right = store
            .use_refresh_token("t", &|g, _| g.resource == "http://h/v1/agent")
            .await
            .unwrap();
        assert!(matches!(right, RefreshUse::Rotated { .. }));
    }
}

#[tokio::test]
async fn purge_removes_only_what_can_no_longer_be_used() {
    for engine in Engine::each().await {
        let store = engine.open("a").await;
        for (hash, expires_at) in [("old", 10), ("new", 30)] {
            let code = AuthorizationCode {
                grant: grant(),
                redirect_uri: "http://localhost/cb".into(),
                code_challenge: "c".into(),
                expires_at,
            };
            store.save_code(hash, &code).await.unwrap();
        }
        // A family goes when its every token expired.
        for (hash, family, expires_at) in [("a1", "a", 10), ("b1", "b", 10), ("b2", "b", 30)] {
            store
                .save_refresh_token(hash, family, &grant(), expires_at)
                .await
                .unwrap();
        }
        store
            .begin_idempotent(&AccountId::verified("alice"), "k1", "h", 5, 0)
            .await
            .unwrap();
        store
            .begin_idempotent(&AccountId::verified("alice"), "k2", "h", 25, 0)
            .await
            .unwrap();
        let purged = store.purge(20, 20).await.unwrap();
        assert_eq!(
            purged,
            Purged {
                codes: 1,
                device_grants: 0,
                idempotency_keys: 1,
                refresh_tokens: 1,
            },
            "{}",
            engine.name()
        );
        assert!(store.take_code("new").await.unwrap().is_some());
        assert!(matches!(
            store.use_refresh_token("b1", &|_, _| true).await.unwrap(),
            RefreshUse::Rotated { .. }
        ));
    }
}

/// A session of `account` named `id`.
fn session(id: &str, account: &str) -> SessionRecord {
    SessionRecord {
        id: id.parse().unwrap(),
        account: AccountId::verified(account),
        title: "t".into(),
        archived: false,
        updated_at: 1,
    }
}

#[tokio::test]
async fn sessions_belong_to_their_account() {
    for engine in Engine::each().await {
        let store = engine.open("a").await;
        assert!(store.create_session(&session("s1", "alice")).await.unwrap());
        assert!(!store.create_session(&session("s1", "bob")).await.unwrap());
        assert_eq!(
            store
                .session(&AccountId::verified("alice"), &s1())
                .await
                .unwrap(),
            Some(session("s1", "alice")),
            "{}",
            engine.name()
        );
        assert!(
            store
                .session(&AccountId::verified("bob"), &s1())
                .await
                .unwrap()
                .is_none()
        );
        let titled = store
            .update_session(&AccountId::verified("alice"), &s1(), Some("new"), None, 5)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((titled.title.as_str(), titled.archived), ("new", false));
        let archived = store
            .update_session(&AccountId::verified("alice"), &s1(), None, Some(true), 6)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                archived.title.as_str(),
                archived.archived,
                archived.updated_at
            ),
            ("new", true, 6)
        );
        assert!(
            store
                .update_session(&AccountId::verified("bob"), &s1(), Some("x"), None, 7)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            !store
                .delete_session(&AccountId::verified("bob"), &s1())
                .await
                .unwrap()
        );
        assert!(
            store
                .delete_session(&AccountId::verified("alice"), &s1())
                .await
                .unwrap()
        );
        assert!(
            store
                .session(&AccountId::verified("alice"), &s1())
                .await
                .unwrap()
                .is_none()
        );
    }
}

/// Events `0..n` of a turn, as drafts.
fn events(n: usize) -> Vec<Map<String, Value>> {
    (0..n)
        .map(|i| {
            let Value::Object(event) = json!({"kind": "message", "i": i}) else {
                unreachable!()
            };
            event
        })
        .collect()
}

/// An append of `n` events to turn `turn` of session `s1`, at `at_ms`.
fn append(turn: &str, n: usize, at_ms: i64) -> Append {
    Append {
        session_id: "s1".parse().unwrap(),
        turn_id: turn.into(),
        events: events(n),
        next_state: None,
        action: None,
        at_ms,
        prune_before_ms: 0,
    }
}

#[tokio::test]
async fn a_log_numbers_its_events_without_gaps_and_reads_them_in_pages() {
    for engine in Engine::each().await {
        let store = engine.open("a").await;
        let name = engine.name();
        store.create_session(&session("s1", "alice")).await.unwrap();
        assert_eq!(
            store
                .start_turn(&AccountId::verified("bob"), &append("t1", 1, 1_000))
                .await
                .unwrap(),
            TurnStarted::NoSession
        );
        let started = store
            .start_turn(&AccountId::verified("alice"), &append("t1", 2, 1_000))
            .await
            .unwrap();
        let bounds = |last_seq, pruned_through| Bounds {
            last_seq,
            pruned_through,
        };
        assert_eq!(
            started,
            TurnStarted::Started {
                before_seq: 0,
                bounds: bounds(2, 0)
            },
            "{name}"
        );
        assert_eq!(
            store
                .start_turn(&AccountId::verified("alice"), &append("t2", 1, 1_000))
                .await
                .unwrap(),
            TurnStarted::Busy {
                turn_id: "t1".into()
            }
        );
        assert_eq!(
            store.active_turn(&s1()).await.unwrap(),
            Some(("t1".to_owned(), TurnState::Processing))
        );
        let appended = store
            .append(&append("t1", 3, 2_000), &|state, _| {
                state == TurnState::Processing
            })
            .await
            .unwrap();
        assert_eq!(appended, Appended::Done(bounds(5, 0)));
        assert_eq!(
            store
                .append(&append("t1", 1, 2_000), &|_, _| false)
                .await
                .unwrap(),
            Appended::Refused(TurnState::Processing)
        );
        assert_eq!(
            store
                .append(&append("t9", 1, 2_000), &|_, _| true)
                .await
                .unwrap(),
            Appended::NoTurn
        );

        let page = store
            .read_log(&AccountId::verified("alice"), &s1(), 1, 2)
            .await
            .unwrap()
            .unwrap();
        let seqs: Vec<i64> = page
            .events
            .iter()
            .map(|body| {
                serde_json::from_str::<Value>(body).unwrap()["seq"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(seqs, vec![2, 3], "{name}");
        assert_eq!((page.last_seq, page.pruned_through), (5, 0));
        let end = store
            .read_log(&AccountId::verified("alice"), &s1(), 5, 2)
            .await
            .unwrap()
            .unwrap();
        assert!(end.events.is_empty());
        assert_eq!(end.last_seq, 5);
        assert!(
            store
                .read_log(&AccountId::verified("bob"), &s1(), 0, 2)
                .await
                .unwrap()
                .is_none()
        );

        // Events made before 2,000 ms leave the log with the next append; the turn ends.
        let ended = Append {
            next_state: Some(TurnState::Complete),
            prune_before_ms: 2_000,
            ..append("t1", 1, 3_000)
        };
        let appended = store.append(&ended, &|_, _| true).await.unwrap();
        assert_eq!(appended, Appended::Done(bounds(6, 2)), "{name}");
        let pruned = store
            .read_log(&AccountId::verified("alice"), &s1(), 0, 10)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(pruned.events.len(), 4);
        assert_eq!(pruned.pruned_through, 2);
        assert_eq!(store.active_turn(&s1()).await.unwrap(), None);
    }
}

#[tokio::test]
async fn an_action_is_resolved_once_at_its_revision_for_its_build() {
    for engine in Engine::each().await {
        let store = engine.open("a").await;
        let name = engine.name();
        store.create_session(&session("s1", "alice")).await.unwrap();
        store
            .start_turn(&AccountId::verified("alice"), &append("t1", 1, 1_000))
            .await
            .unwrap();
        let asked = Append {
            next_state: Some(TurnState::AwaitingAction),
            action: Some(NewAction {
                id: "act1".into(),
                revision: 1,
                digest: "0xd1".into(),
                request: json!({"kind": "review"}),
            }),
            ..append("t1", 1, 1_000)
        };
        store.append(&asked, &|_, _| true).await.unwrap();
        let resolution = |account: &str, revision, digest: &str| Resolution {
            account: AccountId::verified(account),
            session_id: "s1".parse().unwrap(),
            action_id: "act1".to_owned().try_into().unwrap(),
            revision,
            digest: digest.into(),
            at_ms: 2_000,
        };
        let resolved_events = |turn: &str, revision: i64| {
            let Value::Object(event) =
                json!({"kind": "resolved", "turn": turn, "revision": revision})
            else {
                unreachable!()
            };
            vec![event]
        };
        let resolve = async |resolution: Resolution| {
            store
                .resolve_action(&resolution, &resolved_events)
                .await
                .unwrap()
        };
        assert_eq!(
            resolve(resolution("bob", 1, "0xd1")).await,
            Resolved::NotFound,
            "{name}"
        );
        assert_eq!(
            resolve(resolution("alice", 2, "0xd1")).await,
            Resolved::Stale { current: 1 }
        );
        assert_eq!(
            resolve(resolution("alice", 1, "0xd2")).await,
            Resolved::DigestMismatch {
                expected: "0xd1".into()
            }
        );
        let done = resolve(resolution("alice", 1, "0xd1")).await;
        assert_eq!(
            done,
            Resolved::Done {
                turn_id: "t1".into(),
                revision: 2,
                request: json!({"kind": "review"}),
                bounds: Bounds {
                    last_seq: 3,
                    pruned_through: 0
                },
            },
            "{name}"
        );
        assert_eq!(
            store.active_turn(&s1()).await.unwrap(),
            Some(("t1".to_owned(), TurnState::Processing))
        );
        let page = store
            .read_log(&AccountId::verified("alice"), &s1(), 2, 10)
            .await
            .unwrap()
            .unwrap();
        let last: Value = serde_json::from_str(&page.events[0]).unwrap();
        assert_eq!(
            (last["turn"].as_str(), last["revision"].as_i64()),
            (Some("t1"), Some(2))
        );
        assert_eq!(
            resolve(resolution("alice", 2, "0xd1")).await,
            Resolved::NotPending
        );
    }
}

#[tokio::test]
async fn a_turn_whose_lease_ran_out_is_claimed_by_one_other_runner() {
    for engine in Engine::each().await {
        let first = engine.open("first").await;
        first.create_session(&session("s1", "alice")).await.unwrap();
        first
            .start_turn(&AccountId::verified("alice"), &append("t1", 1, 1_000))
            .await
            .unwrap();
        // Leased until 11,000 ms; renewed at 5,000 until 15,000.
        assert_eq!(first.renew_leases(5_000).await.unwrap(), 1);
        let second = engine.open("second").await;
        let orphans = second.claim_orphans(12_000).await.unwrap();
        match engine {
            // One SQLite file has one process: opening it ends every earlier lease.
            Engine::Sqlite(_) => assert_eq!(orphans, vec![(s1(), "t1".into())]),
            Engine::Postgres(_) => assert!(orphans.is_empty(), "renewed, not orphaned"),
        }
        let orphans = second.claim_orphans(16_000).await.unwrap();
        let claimed = matches!(engine, Engine::Postgres(_));
        assert_eq!(orphans.len(), usize::from(claimed), "{}", engine.name());
        assert!(second.claim_orphans(16_000).await.unwrap().is_empty());
        assert_eq!(
            first.renew_leases(16_000).await.unwrap(),
            0,
            "{}",
            engine.name()
        );
    }
}

#[tokio::test]
async fn an_idempotency_key_is_claimed_once_and_replays_its_answer() {
    for engine in Engine::each().await {
        let store = engine.open("a").await;
        let begin = async |key: &str, hash: &str, at: i64, expired_before: i64| {
            store
                .begin_idempotent(&AccountId::verified("alice"), key, hash, at, expired_before)
                .await
                .unwrap()
        };
        assert_eq!(begin("k", "h", 10, 0).await, IdempotencyBegin::Started);
        assert_eq!(
            begin("k", "h", 11, 0).await,
            IdempotencyBegin::InFlight,
            "{}",
            engine.name()
        );
        assert_eq!(begin("k", "other", 11, 0).await, IdempotencyBegin::Reused);
        store
            .abandon_idempotent(&AccountId::verified("alice"), "k")
            .await
            .unwrap();
        assert_eq!(begin("k", "h", 12, 0).await, IdempotencyBegin::Started);
        store
            .finish_idempotent(&AccountId::verified("alice"), "k", "{}")
            .await
            .unwrap();
        // An answered key stays when abandoned.
        store
            .abandon_idempotent(&AccountId::verified("alice"), "k")
            .await
            .unwrap();
        assert_eq!(
            begin("k", "h", 13, 0).await,
            IdempotencyBegin::Replay {
                answer: "{}".into()
            }
        );
        // Expired: forgotten, and claimed again.
        assert_eq!(begin("k", "h", 30, 20).await, IdempotencyBegin::Started);
    }
}

/// The session the tests here write.
fn s1() -> intent_models::SessionId {
    "s1".parse().unwrap()
}
