//! A closed-loop HTTP load generator for the benchmarks: hyper HTTP/1.1 clients over
//! `CONNECTIONS` keep-alive connections, each sending its next GET as soon as the last one is
//! answered.

use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;

/// Concurrent keep-alive connections of the generator.
pub const CONNECTIONS: usize = 32;
/// Time each target is driven, after `WARM_UP`.
pub const DURATION: Duration = Duration::from_secs(5);
/// Time each target is driven before the measurement starts.
pub const WARM_UP: Duration = Duration::from_secs(1);

/// What one target answered under load.
pub struct Load {
    /// Requests answered while measured.
    pub requests: usize,
    /// The measured time.
    pub elapsed: Duration,
    /// Every measured latency, ascending.
    pub latencies: Vec<Duration>,
}

impl Load {
    /// Requests answered per second.
    pub fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    /// The latency at `p` (0 to 1).
    pub fn percentile(&self, p: f64) -> Duration {
        let index = ((self.latencies.len() as f64 * p) as usize).min(self.latencies.len() - 1);
        self.latencies[index]
    }
}

/// Drives `GET base+path` with `token` over `CONNECTIONS` connections for `DURATION`, the
/// connections spread evenly over `bases` (instances of one deployment), each asking `paths` in
/// turn from the one after the last connection's first; every answer must be 200.
pub async fn drive(bases: &[&str], paths: &[&str], token: Option<&str>) -> Load {
    let started = Instant::now();
    let measure_from = started + WARM_UP;
    let until = measure_from + DURATION;
    let mut workers = Vec::new();
    for connection in 0..CONNECTIONS {
        let base = bases[connection % bases.len()];
        let address = base.trim_start_matches("http://").to_owned();
        let mut paths: Vec<String> = paths.iter().map(|path| (*path).to_owned()).collect();
        let first = connection % paths.len();
        paths.rotate_left(first);
        let authorization = token.map(|t| format!("Bearer {t}"));
        workers.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(&address).await.unwrap();
            stream.set_nodelay(true).unwrap();
            let io = hyper_util::rt::TokioIo::new(stream);
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(io)
                    .await
                    .unwrap();
            tokio::spawn(connection);
            let mut latencies = Vec::new();
            let mut in_turn = paths.iter().cycle();
            loop {
                let path = in_turn.next().expect("at least one path");
                let mut request = hyper::Request::get(path).header("host", &address);
                if let Some(value) = &authorization {
                    request = request.header("authorization", value);
                }
                let request = request.body(Empty::new()).unwrap();
                let sent = Instant::now();
                let response = sender.send_request(request).await.unwrap();
                let status = response.status();
                response.into_body().collect().await.unwrap();
                assert_eq!(status, 200, "GET {path}");
                let now = Instant::now();
                if now >= until {
                    return latencies;
                }
                if sent >= measure_from {
                    latencies.push(now - sent);
                }
            }
        }));
    }
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await.unwrap());
    }
    latencies.sort();
    Load {
        requests: latencies.len(),
        elapsed: DURATION,
        latencies,
    }
}
