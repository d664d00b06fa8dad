//! Two addresses of one deployment (`--peer-url`: another instance behind the load balancer)
//! behave as one: what one issues, the other honours. Skipped without a peer; two instances
//! that share nothing but their keys fail every check here.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use super::pipeline::EVM;
use super::subjects::build_request;
use super::{nanos, run, seqs, settle, settled_session, start_turn, text};
use crate::checks::{Category, Check};
use crate::finding::{Finding, Verdict, ensure, fail};
use crate::target::Reader;
use crate::target::{Reply, Role, Target};

const PROFILE: &[&str] = &["#/x-deployment"];

/// How soon a long-poll on one address must wake after an append through the other.
const WAKE_WITHIN: Duration = Duration::from_secs(3);

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "deployment.cursor".into(),
            category: Category::Deployment,
            requirement: "A cursor issued by one address of the deployment MUST open on the other, at the same place of the same log.",
            section: "2.11, 6",
            rests_on: PROFILE.to_vec(),
            operation: None,
            run: run!(cursor),
        },
        Check {
            id: "deployment.wake".into(),
            category: Category::Deployment,
            requirement: "A long-poll waiting on one address MUST be answered with the events appended through the other, within 3 s, not at the end of its wait.",
            section: "6",
            rests_on: PROFILE.to_vec(),
            operation: None,
            run: run!(wake),
        },
        Check {
            id: "deployment.sse-resume".into(),
            category: Category::Deployment,
            requirement: "An SSE stream opened on one address with the id of a page the other address sent MUST continue right after that page.",
            section: "6",
            rests_on: PROFILE.to_vec(),
            operation: None,
            run: run!(sse_resume),
        },
        Check {
            id: "deployment.commit".into(),
            category: Category::Deployment,
            requirement: "A Build one address issued MUST commit through the other, once: committing it again through the first MUST be refused.",
            section: "2.8, 4.1",
            rests_on: PROFILE.to_vec(),
            operation: None,
            run: run!(commit),
        },
    ]
}

/// A page of `session` on the peer after `cursor`, waiting up to `wait` ms.
async fn peer_page(
    target: &Target,
    token: &str,
    session: &str,
    cursor: &str,
    wait: u64,
) -> Result<Reply, Finding> {
    let path = format!(
        "/v1/agent/chat/{session}?wait={wait}&{}",
        super::cursor_query(target, cursor)
    );
    target
        .peer_request(Method::GET, &path)?
        .bearer(token)
        .send()
        .await
}

async fn cursor(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    target.peer()?;
    let (session, events, _) = settled_session(target, token, "deployment cursor").await?;
    // The cursor after the first event, from the first address.
    let first = target
        .request(Method::GET, &format!("/v1/agent/chat/{session}?limit=1"))
        .bearer(token)
        .send()
        .await?;
    first.ensure_success("a page of one event")?;
    let cursor = text(&first.body, "/cursor")?;
    let reply = peer_page(target, token, &session, cursor, 0).await?;
    reply.ensure_success("the first address's cursor on the peer")?;
    let got = seqs(
        reply.body["events"]
            .as_array()
            .map_or(&[][..], Vec::as_slice),
    );
    let expected = seqs(&events[1..]);
    ensure(got == expected, || {
        format!("the peer continued with seqs {got:?}; the log goes on with {expected:?}")
    })
}

async fn wake(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    target.peer()?;
    let (session, _, cursor) = settled_session(target, token, "deployment wake").await?;
    let waiting = peer_page(target, token, &session, &cursor, 15_000);
    let append = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let sent = Instant::now();
        start_turn(target, token, Some(&session), "deployment wake-up").await?;
        Ok::<_, Finding>(sent)
    };
    let (reply, sent) = tokio::join!(waiting, append);
    let (reply, sent) = (reply?, sent?);
    let woke = sent.elapsed();
    reply.ensure_success("the long-poll on the peer")?;
    let events = reply.body["events"].as_array().map_or(0, Vec::len);
    ensure(events > 0 && woke <= WAKE_WITHIN, || {
        format!(
            "the peer's long-poll answered {events} events {} ms after the append",
            woke.as_millis()
        )
    })
}

async fn sse_resume(target: &Target) -> Verdict {
    let token = &target.role(Role::Agent).await?;
    target.peer()?;
    let (session, events, cursor) = settled_session(target, token, "deployment sse").await?;
    let last = seqs(&events).last().copied().unwrap_or(0);
    let (_, turn) = start_turn(target, token, Some(&session), "deployment sse again").await?;
    settle(target, token, &session, &turn).await?;
    let response = target
        .peer_request(Method::GET, &format!("/v1/agent/chat/{session}/stream"))?
        .bearer(token)
        .header("Last-Event-ID", &cursor)
        .open()
        .await?;
    if response.status() != 200 {
        return fail(format!(
            "the peer's stream answered {} to the first address's page id",
            response.status()
        ));
    }
    let mut reader = Reader::new(response);
    while let Some(frame) = reader.next(Duration::from_secs(10)).await? {
        if frame.event != "page" {
            continue;
        }
        let page: Value = serde_json::from_str(&frame.data)
            .map_err(|e| crate::finding::failure(format!("a page frame that is not JSON: {e}")))?;
        let first = page["events"][0]["seq"].as_i64();
        return ensure(first == Some(last + 1), || {
            format!(
                "the peer's stream resumed at seq {first:?}; expected {}",
                last + 1
            )
        });
    }
    fail("the peer's stream sent no page within 10 s")
}

async fn commit(target: &Target) -> Verdict {
    let token = &target.role(Role::Pipeline).await?;
    // A transfer to a recipient no run used, so that no other commit shares its Build.
    let mut request = build_request(target, EVM).await?;
    if let Some(to) = request.pointer_mut("/operations/0/input/to") {
        *to = json!(format!("0x{:040x}", nanos()));
    }
    let made = target
        .request(Method::POST, EVM)
        .bearer(token)
        .json(&request)
        .send()
        .await?;
    made.ensure_status(200, "a build request on the first address")?;
    let build = made.body.clone();
    let through_peer = target
        .peer_request(Method::POST, EVM)?
        .bearer(token)
        .json(&build)
        .send()
        .await?;
    through_peer.ensure_status(200, "committing the first address's Build through the peer")?;
    let again = target
        .request(Method::POST, EVM)
        .bearer(token)
        .json(&build)
        .send()
        .await?;
    ensure(
        (400..500).contains(&again.status) && again.body.get("error").is_some(),
        || {
            format!(
                "the Build committed through the peer was answered {} when committed again through the first address",
                again.status
            )
        },
    )
}
