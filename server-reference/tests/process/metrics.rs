//! The metrics an operator scrapes: `serve --metrics-addr` serves them apart from the API, and
//! each scrape parses with an OpenMetrics parser while a turn runs, a long-poll waits and a
//! stream is open, and after they ended.

use std::time::{Duration, Instant};

use openmetrics_parser::{MetricsExposition, OpenMetricsValue, openmetrics};
use serde_json::json;

use crate::support::{Server, page, post, read_until};

pub type Exposition = MetricsExposition<openmetrics_parser::OpenMetricsType, OpenMetricsValue>;

/// A scrape of `url`, parsed.
pub async fn scrape(url: &str) -> Exposition {
    let answer = reqwest::get(url).await.unwrap();
    assert_eq!(answer.status(), 200);
    let content_type = answer.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text; version=1.0.0"),
        "{content_type}"
    );
    let text = answer.text().await.unwrap();
    openmetrics::parse_openmetrics(&text).unwrap_or_else(|e| panic!("{e:?}:\n{text}"))
}

/// The value of `family`'s sample whose labels are `labels` (all of them, in any order); `None`
/// when there is none. A histogram's value is its count.
pub fn value(scrape: &Exposition, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let family = scrape.families.get(family)?;
    family
        .iter_samples()
        .find(|sample| {
            let set = sample.get_labelset().unwrap();
            set.iter().count() == labels.len()
                && labels
                    .iter()
                    .all(|(name, value)| set.get_label_value(name) == Some(value))
        })
        .map(|sample| match &sample.value {
            OpenMetricsValue::Gauge(n) => n.as_f64(),
            OpenMetricsValue::Counter(c) => c.value.as_f64(),
            OpenMetricsValue::Histogram(h) => h.count.unwrap() as f64,
            other => panic!("{other:?}"),
        })
}

/// Scrapes until `settled` holds of a scrape (up to 10 s); that scrape.
async fn scrape_until(url: &str, settled: impl Fn(&Exposition) -> bool) -> Exposition {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let scrape = scrape(url).await;
        if settled(&scrape) {
            return scrape;
        }
        let gauges: Vec<_> = scrape
            .families
            .values()
            .filter(|f| f.family_type != openmetrics_parser::OpenMetricsType::Histogram)
            .map(|f| {
                (
                    &f.family_name,
                    f.iter_samples()
                        .map(|s| format!("{:?}", s.value))
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        assert!(Instant::now() < deadline, "the metrics settle: {gauges:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_scrape_counts_requests_long_polls_streams_turns_and_the_store() {
    let data_dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        data_dir.path(),
        "127.0.0.1:0",
        &["--metrics-addr", "127.0.0.1:0"],
    );
    let metrics = server.metrics.clone().unwrap();
    let http = reqwest::Client::new();

    let before = scrape(&metrics).await;
    assert_eq!(value(&before, "intent_agent_turns_running", &[]), Some(0.0));
    assert_eq!(value(&before, "intent_store_listener_up", &[]), Some(0.0));
    let refused = http
        .get(format!("{}/v1/pipeline/apps", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let other = http
        .get(format!("{}/healthz", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
    let not_here = http
        .get(metrics.replace("/metrics", "/v1/pipeline/apps"))
        .send()
        .await
        .unwrap();
    assert_eq!(not_here.status(), 404, "the metrics' address serves no API");

    let token = server.agent_token(data_dir.path(), "alice", "agent:read agent:write");
    let started = post(
        &http,
        &server.base,
        &token,
        "/v1/agent/chat",
        &json!({ "message": "wait 3000" }),
    )
    .await;
    let session = started["sessionId"].as_str().unwrap().to_owned();
    let stream = http
        .get(format!("{}/v1/agent/chat/{session}/stream", server.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    // From the turn's call of its three-second wait on, the log is still until the wait ends.
    let first = page(&http, &server.base, &token, &session, None, 0)
        .await
        .unwrap();
    let called = |event: &serde_json::Value| event["type"] == "tool_call";
    let cursor = match first["events"].as_array().unwrap().iter().any(called) {
        true => first["cursor"].as_str().unwrap().to_owned(),
        false => {
            let cursor = first["cursor"].as_str().unwrap();
            read_until(&http, &server.base, &token, &session, cursor, called).await
        }
    };
    let waiting = {
        let (http, base, token, session) = (
            http.clone(),
            server.base.clone(),
            token.clone(),
            session.clone(),
        );
        tokio::spawn(
            async move { page(&http, &base, &token, &session, Some(&cursor), 20_000).await },
        )
    };

    let during = scrape_until(&metrics, |s| {
        value(s, "intent_agent_long_polls_waiting", &[]) == Some(1.0)
    })
    .await;
    assert_eq!(value(&during, "intent_agent_turns_running", &[]), Some(1.0));
    assert_eq!(value(&during, "intent_agent_streams_open", &[]), Some(1.0));
    let requests = "intent_http_request_duration_seconds";
    let counted = |scrape: &Exposition, operation, status| {
        value(
            scrape,
            requests,
            &[("operation", operation), ("status", status)],
        )
    };
    assert_eq!(counted(&during, "listPipelineApps", "401"), Some(1.0));
    assert_eq!(counted(&during, "startChat", "202"), Some(1.0));
    assert_eq!(counted(&during, "other", "200"), Some(1.0));

    waiting.await.unwrap().expect("the long-poll answers");
    drop(stream);
    let after = scrape_until(&metrics, |s| {
        value(s, "intent_agent_turn_runs", &[("end", "complete")]) == Some(1.0)
            && value(s, "intent_agent_streams_open", &[]) == Some(0.0)
    })
    .await;
    assert_eq!(value(&after, "intent_agent_turns_running", &[]), Some(0.0));
    assert_eq!(
        value(&after, "intent_agent_long_polls_waiting", &[]),
        Some(0.0)
    );
    let pages = |scrape| counted(scrape, "getChatEvents", "200").unwrap();
    assert_eq!(
        pages(&after),
        pages(&during) + 1.0,
        "the long-poll is counted once it answers"
    );
    let statements = value(
        &after,
        "intent_store_duration_seconds",
        &[("op", "statement")],
    );
    assert!(statements.unwrap() > 0.0, "{after:?}");
    assert_eq!(
        value(&after, "intent_store_errors", &[("op", "statement")]),
        None,
        "no statement failed"
    );
}
