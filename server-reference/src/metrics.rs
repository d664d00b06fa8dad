//! The metrics an operator scrapes, in the OpenMetrics text format (which Prometheus reads):
//! requests by operation and status with their latency, waiting long-polls and open streams,
//! the turns this process runs and how their runs ended, and the store's latency, errors and
//! PostgreSQL listener. The process has one registry, written where each fact happens (several
//! servers in one process share it); [`text`] encodes it, and `serve --metrics-addr` serves it on
//! an address of its own. A metric's name carries its unit (`_seconds`), with no `# UNIT` line.

use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::http::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The `operation` of a request outside the operations of openapi.json (the OAuth endpoints,
/// health, the document, a path no route serves).
pub const OTHER: &str = "other";

/// Upper bounds of the request latency buckets, in seconds: from a cached page GET to a
/// long-poll's longest wait (30 s).
const REQUEST_BUCKETS: [f64; 15] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Upper bounds of the store latency buckets, in seconds.
const STORE_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

struct Metrics {
    registry: Registry,
    requests: Histograms<RequestLabels>,
    long_polls: Gauge,
    streams: Gauge,
    turns_running: Gauge,
    turn_runs: Family<TurnLabels, Counter>,
    turns_resumed: Counter,
    store: Histograms<StoreLabels>,
    store_errors: Family<StoreLabels, Counter>,
    listener: Gauge,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    operation: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TurnLabels {
    end: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    op: &'static str,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let mut registry = Registry::with_prefix("intent");
    let requests: Histograms<RequestLabels> =
        Family::new_with_constructor(|| Histogram::new(REQUEST_BUCKETS));
    registry.register(
        "http_request_duration_seconds",
        "Requests answered, by operationId (\"other\" outside openapi.json) and status, and the \
         time to their answer's head (a long-poll's includes its wait)",
        requests.clone(),
    );
    let long_polls = Gauge::default();
    registry.register(
        "agent_long_polls_waiting",
        "Event page reads waiting for an event",
        long_polls.clone(),
    );
    let streams = Gauge::default();
    registry.register(
        "agent_streams_open",
        "Open SSE event streams",
        streams.clone(),
    );
    let turns_running = Gauge::default();
    registry.register(
        "agent_turns_running",
        "Turns this process runs now",
        turns_running.clone(),
    );
    let turn_runs = Family::<TurnLabels, Counter>::default();
    registry.register(
        "agent_turn_runs",
        "Runs of a turn here that ended, by how: complete, awaiting_action, failed, interrupted \
         (by the client, or as not resumable) or handed_over (at a drain)",
        turn_runs.clone(),
    );
    let turns_resumed = Counter::default();
    registry.register(
        "agent_turns_resumed",
        "Orphaned or handed-over turns this process claimed and carried on",
        turns_resumed.clone(),
    );
    let store: Histograms<StoreLabels> =
        Family::new_with_constructor(|| Histogram::new(STORE_BUCKETS));
    registry.register(
        "store_duration_seconds",
        "Store calls by kind (acquire: a wait for a pooled connection; statement; begin; commit) \
         and their time",
        store.clone(),
    );
    let store_errors = Family::<StoreLabels, Counter>::default();
    registry.register(
        "store_errors",
        "Store calls that failed, by kind",
        store_errors.clone(),
    );
    let listener = Gauge::default();
    registry.register(
        "store_listener_up",
        "1 while the PostgreSQL notification listener is connected, else 0 (always 0 on SQLite)",
        listener.clone(),
    );
    Metrics {
        registry,
        requests,
        long_polls,
        streams,
        turns_running,
        turn_runs,
        turns_resumed,
        store,
        store_errors,
        listener,
    }
});

/// The registry in the OpenMetrics text format.
pub fn text() -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &METRICS.registry)
        .expect("writing to a String does not fail");
    text
}

/// The `Content-Type` of [`text`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Counts a request of `operation` answered with `status`, `elapsed` after it came.
fn answered(operation: &'static str, status: u16, elapsed: Duration) {
    METRICS
        .requests
        .get_or_create(&RequestLabels { operation, status })
        .observe(elapsed.as_secs_f64());
}

/// An answer's future that counts the answer (in [`answered`]) when it is ready.
pub struct Timed<F> {
    answer: F,
    operation: &'static str,
    started: Instant,
}

impl<F> Timed<F> {
    /// `answer`, of a request of `operation` that came at `started`.
    pub fn new(answer: F, operation: &'static str, started: Instant) -> Self {
        Self {
            answer,
            operation,
            started,
        }
    }
}

impl<F, B, E> Future for Timed<F>
where
    F: Future<Output = Result<Response<B>, E>> + Unpin,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let answer = ready!(Pin::new(&mut self.answer).poll(cx));
        if let Ok(response) = &answer {
            answered(
                self.operation,
                response.status().as_u16(),
                self.started.elapsed(),
            );
        }
        Poll::Ready(answer)
    }
}

/// Something open that a gauge counts while it lasts.
pub struct Open(&'static Gauge);

impl Open {
    fn new(gauge: &'static Gauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A page read waiting for an event, until dropped.
pub fn long_poll() -> Open {
    Open::new(&METRICS.long_polls)
}

/// An open SSE stream, until dropped.
pub fn stream() -> Open {
    Open::new(&METRICS.streams)
}

/// A turn run here, until dropped.
pub fn turn_running() -> Open {
    Open::new(&METRICS.turns_running)
}

/// How a run of a turn here ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnded {
    Complete,
    AwaitingAction,
    Failed,
    Interrupted,
    HandedOver,
}

/// Counts a run of a turn that ended as `end`.
pub fn turn_run(end: RunEnded) {
    let end = match end {
        RunEnded::Complete => "complete",
        RunEnded::AwaitingAction => "awaiting_action",
        RunEnded::Failed => "failed",
        RunEnded::Interrupted => "interrupted",
        RunEnded::HandedOver => "handed_over",
    };
    METRICS.turn_runs.get_or_create(&TurnLabels { end }).inc();
}

/// Counts a turn claimed to be carried on here.
pub fn turn_resumed() {
    METRICS.turns_resumed.inc();
}

/// A kind of store call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreCall {
    /// Waiting for a pooled connection, for a statement outside a transaction.
    Acquire,
    Statement,
    Begin,
    Commit,
}

/// Times `call`, a store call of `kind`, and counts it when it fails.
pub async fn store<T, E>(
    kind: StoreCall,
    call: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let op = match kind {
        StoreCall::Acquire => "acquire",
        StoreCall::Statement => "statement",
        StoreCall::Begin => "begin",
        StoreCall::Commit => "commit",
    };
    let started = Instant::now();
    let done = call.await;
    let labels = StoreLabels { op };
    METRICS
        .store
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    if done.is_err() {
        METRICS.store_errors.get_or_create(&labels).inc();
    }
    done
}

/// Whether the PostgreSQL listener is connected.
pub fn listener_up(up: bool) {
    METRICS.listener.set(i64::from(up));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines of [`text`] that start with `prefix`.
    fn lines(prefix: &str) -> Vec<String> {
        text()
            .lines()
            .filter(|line| line.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn a_request_is_counted_under_its_operation_and_status_in_its_latency_bucket() {
        answered("metricsTestOperation", 404, Duration::from_millis(3));
        let bucket = |le: &str| {
            format!(
                r#"intent_http_request_duration_seconds_bucket{{le="{le}",operation="metricsTestOperation",status="404"}}"#
            )
        };
        assert_eq!(
            lines(&bucket("0.0025")),
            [format!("{} 0", bucket("0.0025"))]
        );
        assert_eq!(lines(&bucket("0.005")), [format!("{} 1", bucket("0.005"))]);
    }

    #[test]
    fn the_text_ends_as_openmetrics_requires() {
        assert!(text().ends_with("# EOF\n"));
    }
}
