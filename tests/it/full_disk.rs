//! A full disk under the embedded SQLite store, on a small filesystem the test mounts (where the
//! machine lets it): a write is refused 503 with `Retry-After` in the error envelope and leaves
//! nothing behind, reads go on, and writes succeed again once space returns, without a restart.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use intent_server::auth::resource::Resource;
use intent_tests::TestServer;
use serde_json::{Value, json};

/// A tmpfs of `size` at `path`, unmounted when dropped; `None` where the machine refuses it.
struct SmallFilesystem(PathBuf);

impl SmallFilesystem {
    fn mount(path: &Path, size: &str) -> Option<Self> {
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .status();
        mounted
            .is_ok_and(|status| status.success())
            .then(|| Self(path.to_owned()))
    }
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes `path` until the filesystem has no byte left.
fn fill(path: &Path) {
    let mut file = std::fs::File::create(path).unwrap();
    for chunk in [65_536, 4_096, 1] {
        let bytes = vec![0u8; chunk];
        while file.write_all(&bytes).is_ok() {}
    }
    let _ = file.sync_all();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_disk_is_a_503_that_writes_nothing_and_the_server_recovers_when_space_returns() {
    let mount_point = tempfile::tempdir().unwrap();
    let Some(_filesystem) = SmallFilesystem::mount(mount_point.path(), "8m") else {
        eprintln!("full_disk: this machine lets the test mount no small filesystem; not run");
        return;
    };
    let server = TestServer::start_in(mount_point.path()).await;
    let token = server.token("full", Resource::Agent, &["agent:read", "agent:write"]);
    let http = reqwest::Client::new();
    let started: Value = http
        .post(format!("{}/v1/agent/chat", server.base_url()))
        .bearer_auth(&token)
        .json(&json!({ "message": "hello" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let path = format!(
        "{}/v1/agent/sessions/{}",
        server.base_url(),
        started["sessionId"].as_str().unwrap()
    );
    let rename = |title: String| {
        http.patch(&path)
            .bearer_auth(&token)
            .json(&json!({ "title": title, "archived": false }))
            .send()
    };
    let read_title = || async {
        let read = http.get(&path).bearer_auth(&token).send().await.unwrap();
        assert_eq!(read.status(), 200, "reads go on");
        read.json::<Value>().await.unwrap()["title"].clone()
    };

    let filler = mount_point.path().join("filler");
    fill(&filler);
    // Writes until one is refused: each answer is a success or a 503, never a 500.
    let mut last = read_title().await;
    let mut refused = None;
    for attempt in 0..2_000 {
        let title = format!("renamed {attempt}");
        let answer = rename(title.clone()).await.unwrap();
        match answer.status().as_u16() {
            200 => last = json!(title),
            503 => {
                refused = Some(answer);
                break;
            }
            other => panic!(
                "a write on a full disk answered {other}: {:?}",
                answer.text().await
            ),
        }
    }
    let refused = refused.expect("a write on a full disk is refused within 2000 attempts");
    assert!(refused.headers().contains_key("retry-after"));
    let envelope: Value = refused.json().await.unwrap();
    assert!(envelope.get("error").is_some(), "{envelope}");
    // Nothing half-written: the session reads as the last acknowledged write left it.
    assert_eq!(read_title().await, last);

    std::fs::remove_file(&filler).unwrap();
    let recovered = rename("after the disk had space again".into())
        .await
        .unwrap();
    assert_eq!(recovered.status(), 200, "{:?}", recovered.text().await);
    assert_eq!(read_title().await, json!("after the disk had space again"));
    drop(server);
}
