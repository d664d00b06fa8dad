//! The validation proxy's overhead per request: the same GETs sent to the embedded reference
//! server directly and through `intent-conformance proxy`, interleaved in one run so that both
//! see the same machine. Prints p50 and p90 of each and the p50 overhead.
//!
//! `cargo bench -p intent-conformance --bench proxy` (`PROXY_BENCH_REQUESTS`, 2000 by default).

use std::sync::Arc;
use std::time::{Duration, Instant};

use intent_conformance::embedded::Embedded;
use intent_conformance::proxy::Proxy;
use intent_conformance::target::Role;

#[tokio::main]
async fn main() {
    let requests: usize = std::env::var("PROXY_BENCH_REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    let server = Embedded::start().await.expect("the embedded server starts");
    let token = server.target().role(Role::Account).await.expect("a token");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxied = format!("http://{}", listener.local_addr().unwrap());
    let proxy = Arc::new(Proxy::new(server.base()));
    tokio::spawn(proxy.clone().serve(listener));

    let http = reqwest::Client::new();
    let path = "/v1/account/statement";
    let time = |base: String| {
        let request = http.get(format!("{base}{path}")).bearer_auth(&token);
        async move {
            let started = Instant::now();
            let response = request.send().await.expect("an answer");
            assert_eq!(response.status(), 200);
            response.bytes().await.expect("a body");
            started.elapsed()
        }
    };
    // Warm both paths (connections, validator caches) before measuring.
    for _ in 0..50 {
        time(server.base().to_owned()).await;
        time(proxied.clone()).await;
    }
    let (mut direct, mut through) = (Vec::new(), Vec::new());
    for _ in 0..requests {
        direct.push(time(server.base().to_owned()).await);
        through.push(time(proxied.clone()).await);
    }
    let direct = percentiles(&mut direct);
    let through = percentiles(&mut through);
    println!("GET {path}, {requests} requests each way, interleaved:");
    println!("  direct:        p50 {:?}  p90 {:?}", direct.0, direct.1);
    println!("  through proxy: p50 {:?}  p90 {:?}", through.0, through.1);
    println!(
        "  overhead at p50: {:?} ({:.2}x)",
        through.0.saturating_sub(direct.0),
        through.0.as_secs_f64() / direct.0.as_secs_f64()
    );
    assert_eq!(proxy.ledger().violations(), 0, "the traffic broke nothing");
}

/// p50 and p90 of `samples`.
fn percentiles(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.9))
}
